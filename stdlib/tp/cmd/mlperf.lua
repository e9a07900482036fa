-- tplua mlperf: MLPerf Training results scored by MLPerf's rules (tp.analyse.mlperf,
-- docs/mlperf.md).
local cli = require('tp.cli')

local M = {}

M.summary = 'score MLPerf Training result files (time to train, olympic mean) by MLPerf\'s rules'

M.usage = [[
usage: tplua mlperf score DIR [--json] [--curve]
       tplua mlperf compare A B [--json] [--seed N]

DIR is one results/<system>/<benchmark>/ directory of a published MLPerf Training submission:
its result_*.txt files (`:::MLLOG {json}` lines) and the scaling.json of the review when there
is one. Prints each run's time to train (run_start to run_stop, minutes, from time_ms), its
status (run_stop's), its samples to converge and eval accuracy curve, and the benchmark's score
by MLPerf's rules (mlcommons/logging's result summarizer): the runs the benchmark needs, the
olympic mean (the fastest and the slowest run dropped; 4 each for unet3d), a run that did not
converge counted as a dropped slowest one, times the scaling factor. RCP checks and the
compliance checker are not run (docs/mlperf.md).

compare scores two such directories of the same benchmark (A the baseline; different
benchmarks are refused) and prints each score, the ratio of scores B/A, a seeded bootstrap 95%
CI of the ratio of the mean times to train B/A over the scored runs, the accelerator-minutes
(score x accelerators, when the logs name the accelerators; else unknown) and the samples to
converge (mean and range) side by side.

options:
  --json       print one JSON document instead of the text
  --curve      print every run's eval accuracy curve (samples_count or epoch_num: accuracy)
  --seed N     compare: the bootstrap's seed (default 1; the same seed, the same CI)
  -h, --help   show this help

exit status: 0 when the benchmark has a score, 1 when it has none (too few runs, too many
runs not converged) or DIR cannot be read, 2 on a usage error. compare: 0 when both sides have
a score, 1 when one has none, a directory cannot be read or the benchmarks differ.

examples:
  tplua mlperf score results/MI355X_EPYC_9575F_pytorch/llama2_70b_lora
  tplua mlperf compare results/MI355X_EPYC_9575F_pytorch/llama2_70b_lora \
    results/theia_ngpu8_ngc25.09_nemo/llama2_70b_lora --seed 7
]]

local SPEC = { json = 'boolean', curve = 'boolean', help = 'boolean', seed = 'integer' }

local function usage_error(msg)
  return cli.usage_error('mlperf', msg, M.usage)
end

local function fmt_num(v, f)
  return v and string.format(f, v) or '-'
end

local function curve_text(run)
  local parts = {}
  for _, e in ipairs(run.evals) do
    local at = e.samples_count or e.epoch_num
    parts[#parts + 1] = string.format('%s:%s', tostring(at or '?'),
      type(e.value) == 'number' and string.format('%.4f', e.value) or tostring(e.value))
  end
  return table.concat(parts, ' ')
end

local function print_text(r, opts)
  local out = io.stdout
  out:write(string.format('MLPerf Training %s, %s: %d result files, %s required\n', r.benchmark,
    r.dir, #r.runs, r.required and tostring(r.required) or 'unknown'))
  local width = 4
  for _, run in ipairs(r.runs) do
    width = math.max(width, #run.file)
  end
  out:write(string.format('\n  %-' .. width .. 's  %-8s  %9s  %9s  %5s  %s\n', 'file', 'status',
    'minutes', 'samples', 'evals', 'last accuracy'))
  for _, run in ipairs(r.runs) do
    local last = run.evals[#run.evals]
    out:write(string.format('  %-' .. width .. 's  %-8s  %9s  %9s  %5d  %s\n', run.file,
      run.ok and run.status or ('(' .. tostring(run.status or 'none') .. ')'),
      fmt_num(run.minutes, '%.4f'), tostring(run.samples_to_converge or '-'), #run.evals,
      last and type(last.value) == 'number' and string.format('%.4f', last.value) or '-'))
  end
  if opts.curve then
    out:write('\neval accuracy (samples_count or epoch_num:accuracy)\n')
    for _, run in ipairs(r.runs) do
      out:write(string.format('  %-' .. width .. 's  %s\n', run.file, curve_text(run)))
    end
  end
  if #r.findings > 0 then
    out:write('\nfindings\n')
    for _, f in ipairs(r.findings) do
      out:write('  ' .. f .. '\n')
    end
  end
  out:write(string.format('\n%d runs scored, %d not (at most %d may be)\n', r.scored, r.dropped,
    r.max_dropped))
  if r.olympic then
    out:write(string.format('olympic mean: %.4f minutes (%d fastest and %d slowest dropped)\n',
      r.olympic, r.max_dropped, r.max_dropped - r.dropped))
  end
  if r.has_scaling then
    out:write(string.format('scaling factor: %.6f (scaling.json)\n', r.scaling_factor))
  end
  if r.score then
    out:write(string.format('score: %.4f minutes\n', r.score))
  else
    out:write('score: none\n')
  end
end

local function for_json(r)
  local json = require('tp.json')
  local runs = {}
  for i, run in ipairs(r.runs) do
    runs[i] = { file = run.file, status = run.status, ok = run.ok, minutes = run.minutes,
      start_ms = run.start_ms, stop_ms = run.stop_ms,
      samples_to_converge = run.samples_to_converge, evals = json.array(run.evals) }
  end
  return { benchmark = r.benchmark, dir = r.dir, required = r.required, runs = runs,
    scored = r.scored, dropped = r.dropped, max_dropped = r.max_dropped, olympic = r.olympic,
    scaling_factor = r.scaling_factor, score = r.score, findings = json.array(r.findings) }
end

local function fmt_count(v)
  return string.format('%.0f', v)
end

local function print_compare(c)
  local out = io.stdout
  local a, b = c.a, c.b
  out:write(string.format('MLPerf Training %s: B vs A (A the baseline)\n  A  %s\n  B  %s\n\n',
    c.benchmark, a.dir, b.dir))
  local rows = {
    { 'score (minutes)', fmt_num(a.score, '%.4f'), fmt_num(b.score, '%.4f') },
    { 'runs scored', tostring(a.scored), tostring(b.scored) },
    { 'mean time to train', fmt_num(a.mean_minutes, '%.4f'), fmt_num(b.mean_minutes, '%.4f') },
    { 'accelerators', a.accelerators and tostring(a.accelerators) or 'unknown',
      b.accelerators and tostring(b.accelerators) or 'unknown' },
    { 'accelerator-minutes', fmt_num(a.accelerator_minutes, '%.2f'),
      fmt_num(b.accelerator_minutes, '%.2f') },
  }
  for _, s in ipairs({ a, b }) do
    local sm = s.samples
    s.samples_text = sm and string.format('%.1f (%s..%s)', sm.mean, fmt_count(sm.min),
      fmt_count(sm.max)) or '-'
  end
  rows[#rows + 1] = { 'samples to converge', a.samples_text, b.samples_text }
  out:write(string.format('  %-22s  %20s  %20s\n', '', 'A', 'B'))
  for _, row in ipairs(rows) do
    out:write(string.format('  %-22s  %20s  %20s\n', row[1], row[2], row[3]))
  end
  out:write('\n')
  if c.ratio then
    out:write(string.format('score ratio B/A: %.4f (%.4f / %.4f)\n', c.ratio, b.score, a.score))
  else
    out:write('score ratio B/A: none (a side has no score)\n')
  end
  out:write(string.format('mean time to train B/A: %.4f, %g%% CI [%.4f, %.4f] (bootstrap, %d '
    .. 'resamples, seed %d)\n', c.ci.estimate, c.level * 100, c.ci.lo, c.ci.hi, c.resamples,
    c.seed))
  if c.accelerator_ratio then
    out:write(string.format('accelerator-minutes B/A: %.4f\n', c.accelerator_ratio))
  else
    out:write('accelerator-minutes B/A: unknown (no accelerators_per_node line in the logs)\n')
  end
end

local function compare_json(c)
  local json = require('tp.json')
  local function s(x)
    return { dir = x.dir, score = x.score, olympic = x.olympic, scored = x.scored,
      dropped = x.dropped, mean_minutes = x.mean_minutes, minutes = json.array(x.minutes),
      accelerators = x.accelerators, accelerator_minutes = x.accelerator_minutes,
      samples_to_converge = x.samples }
  end
  return { benchmark = c.benchmark, a = s(c.a), b = s(c.b), ratio = c.ratio,
    time_ratio_ci = c.ci, accelerator_ratio = c.accelerator_ratio, level = c.level,
    resamples = c.resamples, seed = c.seed }
end

local function run_compare(opts, rest)
  if #rest ~= 3 then
    return usage_error('compare takes two directories, A and B')
  end
  local mlperf = require('tp.analyse.mlperf')
  local c, err = mlperf.compare_dirs(rest[2], rest[3], { seed = opts.seed })
  if not c then
    io.stderr:write('tplua mlperf: ' .. err .. '\n')
    return 1
  end
  if opts.json then
    local json = require('tp.json')
    io.stdout:write(json.encode(compare_json(c), { pretty = true }), '\n')
  else
    print_compare(c)
  end
  return c.ratio and 0 or 1
end

function M.run(args)
  local opts, rest = cli.parse(args, SPEC)
  if not opts then
    return usage_error(rest)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if rest[1] == 'compare' then
    return run_compare(opts, rest)
  end
  if rest[1] ~= 'score' then
    return usage_error(rest[1] and string.format("unknown subcommand '%s'", rest[1])
      or 'no subcommand given (score, compare)')
  end
  if #rest ~= 2 then
    return usage_error('score takes one DIR')
  end
  local mlperf = require('tp.analyse.mlperf')
  local r, err = mlperf.score_dir(rest[2])
  if not r then
    io.stderr:write('tplua mlperf: ' .. err .. '\n')
    return 1
  end
  if opts.json then
    local json = require('tp.json')
    io.stdout:write(json.encode(for_json(r), { pretty = true }), '\n')
  else
    print_text(r, opts)
  end
  return r.score and 0 or 1
end

return M
