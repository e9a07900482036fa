-- Traces that cannot mislead: each warning of tplua trace (one trace, the files given as one
-- run, two runs compared) and of tplua compare (a run's log against its traces), through the real
-- binary, on a trace made to trigger it and on a real trace (tests/fixtures/traces) that must
-- not.
local h = require('helper')
local json = require('tp.json')

local DIR = h.fixture('traces')

-- A trace: profiler steps { {n, ts, dur} } and kernels { {corr, launch ts, ts, dur, name?} }
-- (us), with extra events and top-level members.
local function synth(path, steps, kernels, extra, top)
  local ev = {}
  for _, s in ipairs(steps) do
    ev[#ev + 1] = { ph = 'X', cat = 'user_annotation', name = 'ProfilerStep#' .. s[1], ts = s[2],
      dur = s[3] }
  end
  for _, k in ipairs(kernels) do
    ev[#ev + 1] = { ph = 'X', cat = 'cuda_runtime', name = 'cudaLaunchKernel', ts = k[2],
      dur = 1, args = { correlation = k[1] } }
    ev[#ev + 1] = { ph = 'X', cat = 'kernel', name = k[5] or ('kernel_' .. k[1]), ts = k[3],
      dur = k[4], args = { stream = 7, correlation = k[1] } }
  end
  for _, e in ipairs(extra or {}) do
    ev[#ev + 1] = e
  end
  local doc = top or {}
  doc.traceEvents = ev
  h.write(path, json.encode(doc))
  return path
end

local function warnings_of(args)
  local r = h.run(args)
  assert.are.equal(0, r.code, r.stderr)
  return r.stdout
end

local function copy(from, to)
  assert(os.execute('cp ' .. h.shquote(from) .. ' ' .. h.shquote(to)))
end

describe('tplua trace warns when a trace would mislead', function()
  local dir
  setup(function()
    dir = h.tmpdir()
  end)

  it('a profiled step without GPU ops, and the ops in a few of many steps', function()
    local p = synth(dir .. '/empty.json', { { 1, 0, 100 }, { 2, 100, 100 }, { 3, 200, 100 } },
      { { 1, 10, 20, 10 }, { 2, 110, 120, 10 } })
    local out = warnings_of({ 'trace', p })
    assert.is_truthy(out:find('warning: ' .. p .. ': profiler step 3 has no GPU op: its GPU '
      .. 'work ran outside the steps', 1, true), out)
    local few = {}
    for i = 1, 6 do
      few[i] = { i, (i - 1) * 100, 100 }
    end
    p = synth(dir .. '/few.json', few, { { 1, 10, 20, 10 }, { 2, 30, 40, 10 } })
    out = warnings_of({ 'trace', p })
    assert.is_truthy(out:find('warning: ' .. p .. ': the GPU ops fall in few of the profiled '
      .. 'steps: 1 of 6 steps hold 90% of them, and steps 2, 3, 4, 5, 6 have none', 1, true), out)
    -- a real three-step DDP trace: every step has its ops
    out = warnings_of({ 'trace', DIR .. '/resnet_ddp8_mi300_rank0.json.gz' })
    assert.is_falsy(out:find('warning', 1, true), out)
  end)

  it('one op holding more than half of a step', function()
    local p = synth(dir .. '/long.json', { { 1, 0, 100 }, { 2, 100, 100 }, { 3, 200, 100 } },
      { { 1, 5, 10, 80, 'wait_kernel' }, { 2, 6, 95, 5 }, { 3, 105, 110, 10 },
        { 4, 106, 150, 10 }, { 5, 205, 210, 10 } })
    local out = warnings_of({ 'trace', p })
    -- step 1's window is [10, 110) us: wait_kernel runs 80 of its 100 us
    assert.is_truthy(out:find('warning: ' .. p .. ': one op holds more than half of step 1: '
      .. 'wait_kernel runs 0.080 ms of step 1\'s 0.100 ms (80%)', 1, true), out)
    local doc = json.decode(warnings_of({ 'trace', p, '--json' }))
    assert.are.equal('long_op', doc.ranks[1].checks[1].code)
    -- the real DDP rank: its collectives are long, but none holds half a step
    out = warnings_of({ 'trace', DIR .. '/resnet_ddp8_mi300_rank0.json.gz', '--json' })
    assert.are.same({}, json.decode(out).ranks[1].checks)
  end)

  it('ops launched through CUDA graphs', function()
    local p = synth(dir .. '/graph.json', { { 1, 0, 100 } }, {},
      { { ph = 'X', cat = 'cuda_runtime', name = 'cudaGraphLaunch', ts = 5, dur = 3,
        args = { correlation = 9 } },
        { ph = 'X', cat = 'kernel', name = 'g1', ts = 10, dur = 5, args = { stream = 7,
          correlation = 9 } },
        { ph = 'X', cat = 'kernel', name = 'g2', ts = 15, dur = 5, args = { stream = 7,
          correlation = 9 } },
        { ph = 'X', cat = 'kernel', name = 'g3', ts = 20, dur = 5, args = { stream = 7,
          correlation = 9 } } })
    local out = warnings_of({ 'trace', p })
    assert.is_truthy(out:find('warning: ' .. p .. ': 3 GPU ops ran from 1 CUDA/HIP graph '
      .. 'launches', 1, true), out)
    out = warnings_of({ 'trace', DIR .. '/vllm_b200_tp8_rank0.json.gz' })
    assert.is_falsy(out:find('graph', 1, true), out)
  end)

  it('a rank of a multi-rank run without any communication kernel', function()
    local p = synth(dir .. '/nocomm.json', { { 1, 0, 100 } }, { { 1, 5, 10, 10, 'gemm_a' } },
      {}, { distributedInfo = { backend = 'nccl', rank = 1, world_size = 2 } })
    local out = warnings_of({ 'trace', p })
    assert.is_truthy(out:find('warning: ' .. p .. ': rank 1 of 2, but no communication kernel '
      .. 'in its steps', 1, true), out)
    out = warnings_of({ 'trace', DIR .. '/resnet_ddp8_mi300_rank0.json.gz' })
    assert.is_falsy(out:find('no communication kernel', 1, true), out)
  end)

  it('a first profiled step far longer than the rest', function()
    local p = synth(dir .. '/first.json', { { 1, 0, 400 }, { 2, 400, 100 }, { 3, 500, 100 },
      { 4, 600, 100 } }, { { 1, 1, 10, 10 }, { 2, 2, 300, 10 }, { 3, 401, 410, 10 },
      { 4, 402, 480, 10 }, { 5, 501, 510, 10 }, { 6, 502, 590, 10 }, { 7, 601, 610, 10 } })
    local out = warnings_of({ 'trace', p })
    -- windows [10, 410), [410, 510), [510, 610): 400 us against a median of 100
    assert.is_truthy(out:find('warning: ' .. p .. ': the first profiled step (1) took 0.400 ms '
      .. 'on the GPU against a median of 0.100 ms for the other steady steps (4.0x)', 1, true),
      out)
    out = warnings_of({ 'trace', DIR .. '/resnet_ddp8_mi300_rank0.json.gz' })
    assert.is_falsy(out:find('first profiled step', 1, true), out)
  end)
end)

describe('tplua trace DIR refuses to take unrelated traces for the ranks of one run', function()
  it('names the files that claim the same rank, and the devices and times that differ',
    function()
      local dir = h.tmpdir()
      copy(DIR .. '/resnet_ddp8_mi300_rank0.json.gz', dir .. '/a.json.gz')
      copy(DIR .. '/vllm_b200_tp8_rank0.json.gz', dir .. '/b.json.gz')
      local out = warnings_of({ 'trace', dir })
      local a, b = dir .. '/a.json.gz', dir .. '/b.json.gz'
      assert.is_truthy(out:find('warning: 2 files claim rank 0: ' .. a .. ', ' .. b
        .. ': they are not the ranks of one run', 1, true), out)
      assert.is_truthy(out:find('warning: the files are not the ranks of one run: device AMD '
        .. 'Instinct MI300X in ' .. a .. '; device NVIDIA B200 in ' .. b, 1, true), out)
      assert.is_truthy(out:find('warning: the files are not the ranks of one run: ' .. a
        .. ' was profiled at 2026-', 1, true), out)
      assert.is_truthy(out:find('not the ranks of one run (above): no stragglers looked for', 1,
        true), out)
      local doc = json.decode(warnings_of({ 'trace', dir, '--json' }))
      assert.is_true(doc.mixed)
      assert.are.same({}, doc.stragglers)
    end)

  it('says when the world sizes differ, or the kernels of one GPU barely overlap', function()
    local dir = h.tmpdir()
    copy(DIR .. '/resnet_ddp8_mi300_rank0.json.gz', dir .. '/rank0.json.gz')
    synth(dir .. '/rank1.json', { { 15, 0, 100 } }, { { 1, 5, 10, 10 } }, {},
      { distributedInfo = { backend = 'nccl', rank = 1, world_size = 2 } })
    local out = warnings_of({ 'trace', dir })
    assert.is_truthy(out:find('warning: the files are not the ranks of one run: world size 8 in '
      .. dir .. '/rank0.json.gz; world size 2 in ' .. dir .. '/rank1.json', 1, true), out)
    -- two H100 traces of two models
    dir = h.tmpdir()
    copy(DIR .. '/qwen05b_h100.json.gz', dir .. '/r0.json.gz')
    copy(DIR .. '/bert_small_h100.json.gz', dir .. '/r1.json.gz')
    out = warnings_of({ 'trace', dir })
    assert.is_truthy(out:find('share only %d+%% of their kernel time by kernel name'), out)
  end)

  it('takes the same trace twice for two ranks without a warning', function()
    local dir = h.tmpdir()
    copy(DIR .. '/bert_small_h100.json.gz', dir .. '/rank0.json.gz')
    copy(DIR .. '/bert_small_h100.json.gz', dir .. '/rank1.json.gz')
    local out = warnings_of({ 'trace', dir })
    assert.is_falsy(out:find('warning', 1, true), out)
    assert.is_truthy(out:find('ranks: 2; no straggler', 1, true), out)
  end)
end)

describe('tplua trace --compare warns when the two sides are not comparable', function()
  it('a side resting on one profiled step', function()
    local out = warnings_of({ 'trace', '--compare', DIR .. '/bert_small_h100.json.gz',
      DIR .. '/bert_small_mi300.json.gz', '--label-a', 'H100', '--label-b', 'MI300X' })
    assert.is_truthy(out:find('warning: H100 rests on one profiled step', 1, true), out)
    assert.is_truthy(out:find('warning: MI300X rests on one profiled step', 1, true), out)
    local f = DIR .. '/resnet_ddp8_mi300_rank0.json.gz'
    out = warnings_of({ 'trace', '--compare', f, f })
    assert.is_falsy(out:find('warning', 1, true), out)
  end)

  it('not the same workload: model size, world size', function()
    local out = warnings_of({ 'trace', '--compare', DIR .. '/qwen05b_h100.json.gz',
      DIR .. '/bert_small_mi300.json.gz', '--label-a', 'qwen', '--label-b', 'bert' })
    assert.is_truthy(out:find('warning: not the same workload: qwen does [%d.]+ GFLOP per step in '
      .. 'its modelled ops, bert [%d.]+ %([%d.]+x%): a different model size'), out)
    assert.is_truthy(out:find('warning: not the same workload?: the ops (name, shapes, dtype) '
      .. 'found on both sides hold only', 1, true), out)
    out = warnings_of({ 'trace', '--compare', DIR .. '/resnet_ddp8_mi300_rank0.json.gz',
      DIR .. '/bert_small_mi300.json.gz', '--label-a', 'ddp', '--label-b', 'one' })
    assert.is_truthy(out:find('warning: not the same workload: ddp ran on 8 ranks, one on 1 '
      .. '(world size)', 1, true), out)
    -- the same model on both vendors: no such warning (only the one-step ones)
    out = warnings_of({ 'trace', '--compare', DIR .. '/qwen05b_h100.json.gz',
      DIR .. '/qwen05b_mi300.json.gz' })
    assert.is_falsy(out:find('not the same workload', 1, true), out)
  end)
end)

describe('tplua compare warns when a run\'s log and its traces disagree', function()
  it('a logged step time more than twice the traced step', function()
    -- The profiled fixture's records log steps of 2.745 and 2.402 s; their traces (a Qwen
    -- inference step) are 34.9 and 33.1 ms.
    local r = h.run({ 'compare', h.fixture('results/profiled') })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find('warning: nvd-megatron-prof: the log\'s step time (2745.003 '
      .. 'ms) and its traced step (34.892 ms) differ by', 1, true), r.stdout)
    assert.is_truthy(r.stdout:find('warning: amd-primus-prof: the log\'s step time', 1, true))
    -- The amd record with a step time of 40 ms, close to its trace's: no warning for it.
    local root = h.tmpdir()
    assert(os.execute('mkdir -p ' .. h.shquote(root .. '/results/profiled/amd') .. ' '
      .. h.shquote(root .. '/results/profiled/nvd') .. ' ' .. h.shquote(root .. '/traces')))
    copy(DIR .. '/qwen05b_h100.json.gz', root .. '/traces/qwen05b_h100.json.gz')
    copy(DIR .. '/qwen05b_mi300.json.gz', root .. '/traces/qwen05b_mi300.json.gz')
    copy(h.fixture('results/profiled/nvd/megatron-prof.json'),
      root .. '/results/profiled/nvd/megatron-prof.json')
    local rec = json.decode(assert(h.read(h.fixture('results/profiled/amd/primus-prof.json'))))
    rec.performance_metrics.avg_step_time_seconds = 0.040
    h.write(root .. '/results/profiled/amd/primus-prof.json', json.encode(rec))
    r = h.run({ 'compare', root .. '/results/profiled' })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find('warning: nvd-megatron-prof: the log\'s step time', 1, true))
    assert.is_falsy(r.stdout:find('warning: amd-primus-prof: the log\'s step time', 1, true),
      r.stdout)
  end)
end)
