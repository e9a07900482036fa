-- tp.analyse.memory on the real traces with memory events (tests/fixtures/traces, SOURCES.md),
-- checked against figures computed apart from tplua: tests/fixtures/traces/memory_figures.py, a
-- plain replay of the whole JSON in Python (every event loaded, every CPU range kept). Per
-- device the peak, its time, op, phase and step, the reserved peak, the totals at the end, the
-- bytes live at the end and at the peak by category, per step and per op, all exact; the ops'
-- allocations add up to the device's. Also a generated training trace (bench/trace/gentrace.py:
-- forward, backward, optimizer), PyTorch's memory-timeline export against Holistic Trace
-- Analysis' own test values, two runs side by side and the estimate of the plan.
local h = require('helper')
local json = require('tp.json')
local trace = require('tp.analyse.trace')
local memory = require('tp.analyse.memory')

local DIR = h.source_dir .. '/tests/fixtures/traces'
local SCRIPT = DIR .. '/memory_figures.py'
local WITH_MEMORY = { 'qwen05b_h100.json.gz', 'qwen05b_mi300.json.gz', 'bert_small_h100.json.gz',
  'bert_small_mi300.json.gz', 'resnet18_mi300_nostep.json.gz' }
local WITHOUT = { 'hta_event_sync_a100.json.gz', 'resnet_ddp8_mi300_rank0.json.gz',
  'vllm_b200_tp8_rank0.json.gz' }

local function python_missing()
  local r = h.run({ '-c', 'import json, gzip, decimal' }, { bin = '/usr/bin/python3' })
  return r.code ~= 0 and '/usr/bin/python3 is not installed: no independent figures' or nil
end

-- The independent figures of `paths`, by path.
local function figures(paths)
  local args = { SCRIPT }
  for _, p in ipairs(paths) do
    args[#args + 1] = p
  end
  local r = h.run(args, { bin = '/usr/bin/python3' })
  assert(r.code == 0, r.stderr)
  return json.decode(r.stdout).traces
end

local function null(v)
  if v == json.null then
    return nil
  end
  return v
end

-- Checks one trace's memory (tp.analyse.memory.of_trace, through trace.open) against the
-- script's figures of it.
local function check(path, want)
  local a = assert(trace.open(path))
  local m = assert(a.memory, path .. ': no memory')
  assert.are.equal(#want.devices, #m.devices, path)
  local by_label = {}
  for _, d in ipairs(m.devices) do
    by_label[d.label] = d
  end
  for _, w in ipairs(want.devices) do
    local label = memory.device_label(w.type, w.id)
    local d = assert(by_label[label], label)
    for _, k in ipairs({ 'events', 'allocs', 'frees', 'alloc_bytes', 'free_bytes', 'before',
      'peak', 'peak_ts', 'peak_reserved', 'peak_phase', 'reserved_max', 'end_allocated',
      'end_reserved', 'live_end' }) do
      assert.are.equal(w[k], d[k], path .. ' ' .. label .. ' ' .. k)
    end
    assert.are.equal(null(w.peak_op) or '(no op)', d.peak_op.name, path .. ' peak_op')
    assert.are.equal(null(w.peak_step), d.peak_step, path .. ' peak_step')
    for c, v in pairs(w.at_peak) do
      assert.are.equal(v, d.at_peak[c], path .. ' ' .. label .. ' at_peak ' .. c)
    end
    -- The ops, by name: each one's allocated bytes, and all of them the device's.
    local by_name, sum = {}, 0
    for _, r in ipairs(m.ops) do
      if r.device == label then
        local n = r.name == '(no op)' and '' or r.name
        by_name[n] = (by_name[n] or 0) + r.bytes
        sum = sum + r.bytes
      end
    end
    assert.are.same(want.ops[w.type .. ':' .. w.id], by_name)
    assert.are.equal(d.alloc_bytes, sum, path .. ' ops add up')
  end
  for _, w in ipairs(want.steps) do
    local label = memory.device_label(w.type, w.id)
    local found
    for _, s in ipairs(m.steps) do
      if s.device == label and s.step == null(w.step) then
        found = s
      end
    end
    assert.truthy(found, path .. ' step ' .. tostring(w.step))
    for _, k in ipairs({ 'events', 'allocs', 'alloc_bytes', 'peak', 'held', 'temporary' }) do
      assert.are.equal(w[k], found[k], path .. ' step ' .. tostring(w.step) .. ' ' .. k)
    end
  end
  return a
end

describe('tp.analyse.memory on the real traces', function()
  it('equals the independent figures on every fixture with memory events', function()
    local why = python_missing()
    if why then
      pending(why)
      return
    end
    local paths = {}
    for i, f in ipairs(WITH_MEMORY) do
      paths[i] = DIR .. '/' .. f
    end
    local want = figures(paths)
    for _, p in ipairs(paths) do
      check(p, assert(want[p], p))
    end
  end)

  it('has no memory for traces without memory events', function()
    for _, f in ipairs(WITHOUT) do
      local a = assert(trace.open(DIR .. '/' .. f))
      assert.is_nil(a.memory, f)
    end
  end)

  it('names the devices, the GPU and its capacity from the catalog', function()
    local a = assert(trace.open(DIR .. '/qwen05b_mi300.json.gz'))
    local d = a.memory.primary
    assert.are.equal('hip:0', d.label)
    assert.are.equal('AMD Instinct MI300X VF', d.name)
    assert.are.equal('catalog mi300x', d.capacity_from)
    assert.are.equal(192 * 1024 ^ 3, d.capacity)
    assert.are.equal(d.capacity - d.reserved_max, d.headroom)
    assert.are.equal(d.peak_reserved - d.peak, d.slack)
    assert.are.equal('aten::mm', d.peak_op.name)
    assert.are.equal('[8944,1024] [1024,2816]', d.peak_op.shapes)
    assert.are.equal('cpu', a.memory.devices[2].label)
    assert.is_nil(a.memory.devices[2].slack)  -- the CPU allocator reserves nothing
    -- the CPU's caveat is said, not hidden
    assert.truthy(a.memory.warnings[1]:find('counts only what was allocated while the profiler '
      .. 'ran', 1, true))
  end)
end)

describe('tp.analyse.memory on a generated training trace', function()
  it('gives activations, autograd intermediates and temporaries as the replay does', function()
    local why = python_missing()
    if why then
      pending(why)
      return
    end
    local path = h.tmpdir() .. '/train.json'
    local g = h.run({ h.source_dir .. '/bench/trace/gentrace.py', path, '--mb', '3' },
      { bin = '/usr/bin/python3' })
    assert.are.equal(0, g.code, g.stderr)
    local a = check(path, assert(figures({ path })[path]))
    local d = a.memory.primary
    assert.are.equal('backward', d.peak_phase)
    assert.is_true(d.at_peak.activation > 0 and d.at_peak.autograd > 0)
    assert.are.equal(21 * 1024 ^ 3, d.before)
    -- the run's memory summary (a record's memory.measured) is that device's
    local run = assert(trace.analyse({ path }))
    local s = assert(memory.summary(run))
    assert.are.equal(d.peak, s.peak_allocated)
    assert.are.equal(d.reserved_max, s.peak_reserved)
    assert.are.same(d.at_peak, s.at_peak)
  end)
end)

describe("PyTorch's memory-timeline export", function()
  it("reads Holistic Trace Analysis' test file as its MemoryAnalysis does", function()
    local t = assert(memory.read_timeline(DIR .. '/hta_memory_timeline.raw.json.gz'))
    assert.are.equal('raw', t.format)
    assert.are.equal(#t.times, #t.sizes)
    assert.are.equal(8, #t.sizes[1])
    -- hta/tests/test_memory_analysis.py: sizes[744] (0-based)
    assert.are.same({ 102440608, 102228128, 19395584, 0, 2618160128, 58417152, 41811968,
      25494440 }, t.sizes[745])
    local sum = 0
    for _, v in pairs(t.at_peak) do
      sum = sum + v
    end
    assert.are.equal(t.peak, sum)
  end)

  it('refuses what is not a timeline, naming the file', function()
    local dir = h.tmpdir()
    for name, text in pairs({ ['a.raw.json'] = '[[1, 9, 3, 0]]', ['b.raw.json'] = '{"x": 1}',
      ['c.raw.json'] = '[]', ['d.raw.json'] = '[[1, 2' }) do
      h.write(dir .. '/' .. name, text)
      local t, err = memory.read_timeline(dir .. '/' .. name)
      assert.is_nil(t)
      assert.truthy(err:find(name, 1, true), err)
    end
    local t, err, code = memory.read_timeline(dir .. '/none.raw.json.gz')
    assert.is_nil(t)
    assert.are.equal('ENOENT', code, err)
  end)
end)

describe('two runs side by side', function()
  it('pairs the ops by name, shapes and dtype and plots one step of each', function()
    local a = assert(trace.open(DIR .. '/qwen05b_h100.json.gz'))
    local b = assert(trace.open(DIR .. '/qwen05b_mi300.json.gz'))
    local c = memory.compare(a.memory, b.memory, { 'H100', 'MI300X' })
    assert.are.equal(a.memory.primary.peak, c.sides[1].peak)
    assert.are.equal(b.memory.primary.peak, c.sides[2].peak)
    assert.are.equal(80 * 1024 ^ 3, c.sides[1].capacity)
    assert.are.equal(192 * 1024 ^ 3, c.sides[2].capacity)
    assert.are.equal(c.sides[2].peak / c.sides[1].peak, c.ratio)
    -- every allocated byte of each side is in a pair or in the side's unpaired ops
    for i = 1, 2 do
      local m = i == 1 and a.memory or b.memory
      local total = 0
      for _, p in ipairs(c.pairs) do
        total = total + (i == 1 and p.a.bytes or p.b.bytes)
      end
      for _, o in ipairs(c.only[i]) do
        total = total + o.bytes
      end
      assert.are.equal(m.primary.alloc_bytes, total)
    end
    local top = c.pairs[1]
    assert.are.equal('aten::addmm', top.name)
    assert.are.equal('[1024] [8944,1024] [1024,1024]', top.shapes)
    assert.are.equal('bf16', top.dtype)
    -- one step of each: step 6, its points in time order, the peak among them
    for i, s in ipairs(c.sides) do
      local cv = assert(s.curve)
      assert.are.equal(6, cv.step)
      local top_point = 0
      for j, x in ipairs(cv.x) do
        assert.is_true(j == 1 or cv.x[j - 1] <= x)
        top_point = math.max(top_point, cv.allocated[j])
      end
      assert.are.equal(s.peak, top_point, 'side ' .. i)
    end
    local chart = require('tp.present.memory').step_chart(c)
    assert.are.equal(4, #chart.series)
  end)
end)

describe('against the plan', function()
  it('names the difference by component where the categories allow it', function()
    local measured = { source = 'trace', device = 'cuda:0', peak_allocated = 60 * 1024 ^ 3,
      at_peak = { before = 20 * 1024 ^ 3, activation = 30 * 1024 ^ 3, gradient = 5 * 1024 ^ 3,
        optimizer = 0, autograd = 1024 ^ 3, temporary = 3 * 1024 ^ 3, other = 1024 ^ 3 } }
    local est = { bytes = { weights = 16 * 1024 ^ 3, gradients = 6 * 1024 ^ 3,
      optimizer = 4 * 1024 ^ 3, activations = 28 * 1024 ^ 3, logits = 2 * 1024 ^ 3,
      total = 56 * 1024 ^ 3 } }
    local c = memory.against_plan(measured, est)
    local rows = {}
    for _, r in ipairs(c.rows) do
      rows[r.key] = r
    end
    assert.are.equal(30 * 1024 ^ 3, rows.activations.measured)
    assert.are.equal(30 * 1024 ^ 3, rows.activations.estimated)  -- activations and logits
    assert.are.equal(5 * 1024 ^ 3, rows.gradients.measured)
    assert.is_nil(rows.optimizer)  -- not made in the trace: held before it
    assert.are.equal(20 * 1024 ^ 3, rows.before.measured)
    assert.are.equal(20 * 1024 ^ 3, rows.before.estimated)  -- weights and optimizer state
    assert.are.equal(5 * 1024 ^ 3, rows.rest.measured)
    assert.are.equal(4 * 1024 ^ 3, rows.total.diff)
    local lines = require('tp.present.memory').plan_lines(c)
    assert.are.equal('activations 30.000 GiB measured vs 30.000 GiB estimated (+0 B)', lines[1])
    -- from a log: the total only, said
    local l = memory.against_plan({ source = 'log', peak_allocated = 50 * 1024 ^ 3 }, est)
    assert.are.equal(1, #l.rows)
    assert.truthy(l.notes[1]:find('printed in its log', 1, true))
  end)
end)

describe('the memory section of a comparison', function()
  local results = require('tp.analyse.results')
  local profiled = require('tp.analyse.profiled')

  it('sets each run measured beside its estimate, from its traces or its record', function()
    local set = results.load(h.fixture('results/profiled'))
    local sec = assert(profiled.memory_section(set))
    local by = {}
    for _, r in ipairs(sec.runs) do
      by[r.id] = r
    end
    local nvd, amd = by['nvd-megatron-prof'], by['amd-primus-prof']
    assert.are.equal('trace', nvd.source)  -- its record's memory.measured
    assert.are.equal(2088508416, nvd.peak_allocated)
    assert.are.equal('trace', amd.source)  -- made from its traces now
    assert.are.equal(2219047936, amd.peak_allocated)
    -- the same configuration, one estimate (tp.plan.memory for its unified config)
    assert.are.equal(nvd.estimate, amd.estimate)
    assert.are.equal(nvd.estimate / nvd.peak_allocated - 1, nvd.error)
    assert.are.equal('fits', amd.estimate_status)
    assert.are.equal('tight', nvd.estimate_status)
    local c = sec.comparisons[1].comparison
    assert.are.same({ 'nvd', 'amd' }, c.labels)
    -- the traces are of another model than the logs: said
    assert.truthy(sec.notes[1]:find('over 2x apart', 1, true), sec.notes[1])
  end)

  it("falls back on the log's peak, saying so", function()
    local set = results.load(h.fixture('results/fair'))
    local sec = assert(profiled.memory_section(set))
    assert.are.equal(6, #sec.runs)
    for _, r in ipairs(sec.runs) do
      assert.are.equal('log', r.source)  -- memory_metrics: the peak Megatron and Primus printed
      assert.truthy(r.peak_allocated > 0 and r.estimate > 0)
    end
    local g = sec.groups[1]
    assert.are.equal('log', g.plan.source)
    assert.are.equal(1, #g.plan.rows)  -- the total only
    assert.are.equal('total', g.plan.rows[1].key)
  end)

  it("reads a run's PyTorch memory timeline when its profile lists one", function()
    local set = results.load(h.fixture('results/profiled'))
    local run
    for _, r in ipairs(set.runs) do
      if r.id == 'amd-primus-prof' then
        run = r
      end
    end
    run.profile.traces = { run.profile.traces[1],
      '../../../traces/hta_memory_timeline.raw.json.gz' }
    local sec = assert(profiled.memory_section(set))
    local row
    for _, r in ipairs(sec.runs) do
      if r.id == 'amd-primus-prof' then
        row = r
      end
    end
    local t = assert(memory.read_timeline(DIR .. '/hta_memory_timeline.raw.json.gz'))
    assert.are.equal(t.peak, row.timeline.peak)
    assert.are.same(t.at_peak, row.timeline.at_peak)
    -- the timeline is not taken for a trace
    assert.is_false(profiled.is_readable(run.profile.traces[2]))
    assert.truthy(require('tp.present.memory').section_text(sec):find(
      "amd-primus-prof: PyTorch's memory timeline", 1, true))
  end)
end)
