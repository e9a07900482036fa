-- tplua trace --idle and the JSON output: why the GPU is idle through the real binary, on a real
-- trace with synchronisations (causes worked out by hand from its events, SOURCES.md) and on a
-- hand-made trace with every cause; the JSON document's schema (integer ns, [] for empty lists).
local h = require('helper')
local json = require('tp.json')

local DIR = h.fixture('traces')

-- A trace with every cause, worked out by hand (the same as tests/c/test_trace.c's idle_trace):
-- step 1's window [100, 1020) us has 5 us of launch latency, 85 + 530 us of synchronisation,
-- 95 us of dataloader, 100 us of host launch and 50 us of other.
local function every_cause(path)
  local ev = {
    { ph = 'X', cat = 'user_annotation', name = 'ProfilerStep#1', ts = 0, dur = 1000 },
    { ph = 'X', cat = 'user_annotation', name = 'ProfilerStep#2', ts = 1000, dur = 1000 },
    { ph = 'X', cat = 'user_annotation', name = 'enumerate(DataLoader)#_Iter.__next__',
      ts = 220, dur = 60 },
    { ph = 'X', cat = 'cuda_runtime', name = 'cudaStreamSynchronize', ts = 130, dur = 60,
      args = { correlation = 50 } },
    { ph = 'X', cat = 'cuda_sync', name = 'Context Sync', ts = 600, dur = 100,
      args = { stream = -1, correlation = 51 } },
  }
  local kernels = { { 10, 5, 100, 10 }, { 20, 8, 115, 5 }, { 200, 5, 205, 10 },
    { 300, 5, 310, 10 }, { 400, 5, 420, 10 }, { 405, 5, 480, 10 }, { 1010, 5, 1020, 10 } }
  for i, k in ipairs(kernels) do
    ev[#ev + 1] = { ph = 'X', cat = 'cuda_runtime', name = 'cudaLaunchKernel', ts = k[1],
      dur = k[2], args = { correlation = i } }
    ev[#ev + 1] = { ph = 'X', cat = 'kernel', name = 'k' .. i, ts = k[3], dur = k[4],
      args = { stream = 7, correlation = i } }
  end
  h.write(path, json.encode({ traceEvents = ev }))
end

describe('tplua trace --idle', function()
  it('says why the GPU is idle in a real trace with synchronisations', function()
    local r = h.run({ 'trace', DIR .. '/hta_event_sync_a100.json.gz', '--idle' })
    assert.are.equal('', r.stderr)
    assert.are.equal(0, r.code)
    local out = r.stdout
    assert.is_truthy(out:find('NVIDIA A100-PG509-200)', 1, true), out)
    -- 263 us window, 212 us idle = 112 host launch + 100 synchronisation (SOURCES.md)
    assert.is_truthy(out:find('\n  100 +0%.263 +0%.212 +0%.112 +0%.100 +0%.000 +0%.000 +0%.000\n'),
      out)
    assert.is_truthy(out:find('host launch: the launch call of the op that ends the gap started '
      .. 'after the GPU went idle', 1, true), out)
    -- four kernels, two shorter than their launch call
    assert.is_truthy(out:find('\n  100 +4 +50%% '), out)
    assert.is_truthy(out:find('2 of 4 kernels (50%) ran shorter than their launch call', 1, true))
    -- the queue of stream 7, and HTA's view of it: 212 us of host wait
    assert.is_truthy(out:find('queue per stream', 1, true), out)
    assert.is_truthy(out:find('\n  7 +5 +0%.212 +0%.000 +0%.000\n'), out)
  end)

  it('gives every cause of a hand-made trace, with its threshold, as JSON', function()
    local dir = h.tmpdir()
    local p = dir .. '/causes.json'
    every_cause(p)
    local r = h.run({ 'trace', p, '--idle', '--json' })
    assert.are.equal(0, r.code, r.stderr)
    local s = json.decode(r.stdout).ranks[1].steps[1]
    assert.are.same({ host = 100000, sync = 615000, dataloader = 95000, latency = 5000,
      other = 50000 }, s.cause)
    assert.are.equal(865000, s.idle)
    -- a queued gap of 50 us is launch latency under a threshold of 60 us
    r = h.run({ 'trace', p, '--json', '--gap', '60' })
    assert.are.equal(0, r.code, r.stderr)
    local doc = json.decode(r.stdout)
    s = doc.ranks[1].steps[1]
    assert.are.equal(55000, s.cause.latency)
    assert.are.equal(0, s.cause.other)
    assert.are.equal(60000, doc.ranks[1].idle.gap)
    -- and in the text
    r = h.run({ 'trace', p, '--idle', '--gap', '60' })
    assert.is_truthy(r.stdout:find('launch latency under 60.0 us', 1, true), r.stdout)
  end)

  it('shows HTA\'s span beside its own when the trace has synchronisation rows', function()
    local hta = json.decode(assert(h.read(DIR .. '/hta_idle.json')))
    local t = hta.fixtures['hta_alexnet_a100_sync.json.gz'].temporal_us
    local r = h.run({ 'trace', DIR .. '/hta_alexnet_a100_sync.json.gz' })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find(string.format('HTA also counts 41 cuda_sync rows as GPU rows '
      .. '(tplua does not: they are waits, not work): its span %.3f ms', t.kernel_time / 1e3), 1,
      true), r.stdout)
    r = h.run({ 'trace', DIR .. '/bert_small_h100.json.gz' })
    assert.is_falsy(r.stdout:find('cuda_sync rows', 1, true), r.stdout)
  end)

  it('refuses a threshold that is not positive, and --idle with --compare', function()
    local r = h.run({ 'trace', DIR .. '/bert_small_h100.json.gz', '--gap', '0' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find('--gap must be a positive number of microseconds', 1, true))
    r = h.run({ 'trace', '--compare', DIR .. '/bert_small_h100.json.gz',
      DIR .. '/bert_small_mi300.json.gz', '--idle' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find('--idle goes with the traces of one run', 1, true), r.stderr)
  end)
end)

-- Every number under a key that holds a time must be an integer (ns).
local TIME_KEYS = { window = true, busy = true, idle = true, compute = true, non_compute = true,
  comm = true, comm_overlapped = true, comm_exposed = true, host_wait = true, dataloader = true,
  cpu_step = true, start = true, span = true, sum = true, exclusive = true, total = true,
  step_a = true, step_b = true, diff = true, a = true, b = true, fast = true, slow = true,
  cpu = true, gpu = true, delay_p50 = true, delay_max = true, host = true, sync = true,
  latency = true, other = true }

local function check_times(t, path, seen)
  seen = seen or {}
  if type(t) ~= 'table' or seen[t] then
    return 0
  end
  seen[t] = true
  local n = 0
  for k, v in pairs(t) do
    if type(v) == 'number' and TIME_KEYS[k] then
      assert.are.equal('integer', math.type(v), path .. '.' .. tostring(k))
      n = n + 1
    elseif type(v) == 'table' and k ~= 'ops' and k ~= 'collectives' then
      n = n + check_times(v, path .. '.' .. tostring(k), seen)
    end
  end
  return n
end

describe('tplua trace --json', function()
  it('names its schema and unit, gives every time as integer ns and empty lists as []',
    function()
      local r = h.run({ 'trace', DIR .. '/bert_small_mi300.json.gz', '--json' })
      assert.are.equal(0, r.code, r.stderr)
      local doc = json.decode(r.stdout)
      assert.are.equal('tplua.trace/2', doc.schema)
      assert.are.equal('ns', doc.time_unit)
      assert.is_true(check_times(doc, 'doc') > 100)
      -- the mean step and the classes' exclusive time are means: rounded to the ns
      local a = doc.ranks[1]
      assert.are.equal('integer', math.type(a.mean.window))
      assert.are.equal('integer', math.type(a.mean.class.gemm.exclusive))
      assert.are.equal('integer', math.type(a.top[1].mean))
      assert.is_truthy(r.stdout:find('"errors": []', 1, true), r.stdout:sub(1, 400))
      assert.is_truthy(r.stdout:find('"stragglers": []', 1, true))
      assert.is_falsy(r.stdout:find('"errors": {}', 1, true))
      -- a CPU-only trace: no steps, no top kernels, as []
      local dir = h.tmpdir()
      local p = dir .. '/cpu.json'
      h.write(p, '{"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#2",'
        .. '"ts":1,"dur":9},{"ph":"X","cat":"cpu_op","name":"aten::addmm","ts":2,"dur":3}]}')
      r = h.run({ 'trace', p, '--json' })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_truthy(r.stdout:find('"steps": []', 1, true), r.stdout)
      assert.is_truthy(r.stdout:find('"top": []', 1, true), r.stdout)
      -- objects (the trace's top-level members by name) stay objects
      assert.is_truthy(r.stdout:find('"meta": {}', 1, true), r.stdout)
    end)

  it('gives an explanation\'s times as integer ns, which side is faster and the sign',
    function()
      local r = h.run({ 'trace', '--compare', DIR .. '/bert_small_h100.json.gz',
        DIR .. '/bert_small_mi300.json.gz', '--label-a', 'H100', '--label-b', 'MI300X',
        '--json' })
      assert.are.equal(0, r.code, r.stderr)
      local doc = json.decode(r.stdout)
      assert.are.equal('ns', doc.time_unit)
      local e = doc.explanation
      -- the oracle's windows (expected.json): 3,907,825 and 3,495,976 ns
      assert.are.equal(3907825, e.step_a)
      assert.are.equal(3495976, e.step_b)
      assert.are.equal(3495976 - 3907825, e.diff)
      assert.are.equal('MI300X', e.faster.label)
      assert.are.equal(2, e.faster.side)
      assert.is_true(math.abs(e.faster.pct - 100 * 411849 / 3907825) < 1e-9)
      assert.is_truthy(e.sign:find('difference = MI300X - H100', 1, true))
      local moved = 0
      for _, row in ipairs(e.rows) do
        assert.are.equal('integer', math.type(row.diff))
        assert.is_true(row.moved >= 0 and row.moved <= 1)
        moved = moved + row.moved
      end
      assert.is_true(math.abs(moved - 1) < 1e-9)
      assert.is_true(check_times(doc, 'doc') > 100)
    end)
end)
