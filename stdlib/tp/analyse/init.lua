-- tp.analyse: what is concluded from run records. tp.analyse.results loads and queries them,
-- efficiency and convergence derive per-run figures, compare and compare_csv set platforms side
-- by side with statistics of repeats, audit checks the comparison is fair, stack the software
-- stacks behind each side, trace breaks profiler traces down and profiled does it for the
-- profiled runs' records, ops holds each op of a trace against its platform's limit (and pairs
-- the same ops across platforms); mlperf scores MLPerf Training result files by MLPerf's rules;
-- peaks loads what the peaks microbenchmark measured (docs/peaks.md); memory names where a run's
-- memory goes from the allocator's events in its traces (docs/memory.md).
return require('tp').package('tp.analyse', {
  'results', 'efficiency', 'convergence', 'compare', 'compare_csv', 'audit', 'stack', 'trace',
  'profiled', 'mlperf', 'peaks', 'ops', 'collectives', 'memory',
})
