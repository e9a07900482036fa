-- tp.analyse.profiled: the trace files of a record's profile member, the summary a profiled run's
-- record keeps (profile.analysis) and the one made from its traces, the mean of several, and the
-- profile section of a comparison on tests/fixtures/results/profiled (two records of the same
-- configuration whose traces are the real qwen05b H100 and MI300X fixtures).
local h = require('helper')
local json = require('tp.json')
local fs = require('tp.fs')
local results = require('tp.analyse.results')
local trace = require('tp.analyse.trace')
local profiled = require('tp.analyse.profiled')

local H100 = h.fixture('traces/qwen05b_h100.json.gz')
local MI300 = h.fixture('traces/qwen05b_mi300.json.gz')

local function load(name)
  return assert(results.load(h.fixture('results/' .. name)))
end

local function run_of(set, id)
  for _, r in ipairs(set.runs) do
    if r.id == id then
      return r
    end
  end
  error('no run ' .. id)
end

-- A Kineto trace with CPU activity only (what torch.profiler writes on a machine without GPUs).
local function cpu_trace(path)
  assert(fs.mkdir_p(fs.dirname(path)))
  h.write(path, json.encode({ schemaVersion = 1, traceEvents = {
    { ph = 'X', cat = 'cpu_op', name = 'aten::mm', pid = 1, tid = 1, ts = 10, dur = 5 },
    { ph = 'X', cat = 'user_annotation', name = 'ProfilerStep#2', pid = 1, tid = 1, ts = 1,
      dur = 40 } } }))
  return path
end

describe('tp.analyse.profiled.files', function()
  it('keeps the traces it reads, joined to the record directory when relative', function()
    local member = { traces = { 'nvd/x/profile/rank0_trace.json', '/abs/rank1.pt.trace.json.gz',
      'nvd/x/profile/nsys_rank0.nsys-rep', 'nvd/x/profile/nsys_rank0.sqlite',
      'amd/x/profile/rank0_results.pftrace', 'amd/x/profile/rank0_kernel_trace.csv' } }
    assert.are.same({ 'out/nvd/x/profile/rank0_trace.json', '/abs/rank1.pt.trace.json.gz',
      'out/nvd/x/profile/nsys_rank0.sqlite', 'out/amd/x/profile/rank0_kernel_trace.csv' },
      profiled.files(member, 'out/run.json'))
    assert.are.same({}, profiled.files({ tool = 'torch' }, 'out/run.json'))
    assert.are.same({}, profiled.files(nil))
    assert.is_true(profiled.is_readable('a.json.gz'))
    assert.is_true(profiled.is_readable('nsys_rank3.sqlite.gz'))
    assert.is_true(profiled.is_readable('rank3_kernel_trace.csv'))
    assert.is_false(profiled.is_readable('rank3_memory_copy_trace.csv'))
    assert.is_false(profiled.is_readable('a.json.gz.tmp'))
    assert.is_false(profiled.is_readable('nsys_rank0.nsys-rep'))
  end)
end)

describe('tp.analyse.profiled with the system profilers\' files', function()
  it('summarises an nsys export and a rocprofv3 kernel trace as it does Kineto', function()
    for _, name in ipairs({ 'nsys_cloverleaf_a100.sqlite.gz',
      'rocprofv3_vcopy_mi300x_kernel_trace.csv' }) do
      local path = h.fixture('traces/' .. name)
      local s = assert(profiled.summarise({ path }))
      local want = trace.summary(assert(trace.analyse({ path })))
      assert.is_true(s.gpu, name)
      assert.are.equal(1, s.ranks)
      assert.are.equal(want.window_ms, s.window_ms)
      assert.is_true(s.window_ms > 0)
    end
  end)
end)

describe('tp.analyse.profiled.summarise', function()
  it('gives what tp.analyse.trace.summary says, with JSON lists', function()
    local s = assert(profiled.summarise({ H100 }))
    local want = trace.summary(assert(trace.analyse({ H100 })))
    assert.is_true(s.gpu)
    assert.are.equal(1, s.ranks)
    for _, k in ipairs({ 'window_ms', 'idle_ms', 'compute_ms', 'non_compute_ms', 'steps' }) do
      assert.are.equal(want[k], s[k], k)
    end
    assert.are.same(want.classes, s.classes)
    for _, k in ipairs({ 'warnings', 'errors', 'top', 'stragglers' }) do
      assert.is_true(json.is_array(s[k]), k)
    end
    assert.is_truthy(json.encode(s):find('"warnings":[]', 1, true))
  end)

  it('says a CPU-only trace has no GPU breakdown, naming it relative to the record', function()
    local dir = h.tmpdir()
    local path = cpu_trace(dir .. '/nvd/r/profile/rank0_trace.json')
    local s = assert(profiled.summarise({ path }, dir))
    assert.is_false(s.gpu)
    assert.are.equal(1, s.ranks)
    assert.is_nil(s.window_ms)
    assert.is_nil(s.classes)
    assert.are.same({ 'nvd/r/profile/rank0_trace.json: no GPU kernels, copies or memsets in '
      .. 'this trace (a CPU-only profile): there is no GPU breakdown to give' }, s.warnings)
  end)

  it('returns nothing without a Kineto trace, and the reason when none can be read', function()
    assert.is_nil(profiled.summarise({ 'x/nsys_rank0.nsys-rep' }))
    assert.are.equal(1, select('#', profiled.summarise({})))  -- nil alone: no error
    local s, err = profiled.summarise({ '/nonexistent/rank0_trace.json' })
    assert.is_nil(s)
    assert.is_truthy(tostring(err):find('/nonexistent/rank0_trace.json', 1, true), err)
  end)
end)

describe('tp.analyse.profiled.analysis and trace', function()
  local set = load('profiled')

  it("reads the record's profile.analysis when it has one", function()
    local r = run_of(set, 'nvd-megatron-prof')
    local s, from = profiled.analysis(r)
    assert.are.equal('record', from)
    assert.are.equal(r.profile.analysis, s)
    -- The run's method is the same.
    assert.are.equal(s, r:profile_analysis())
  end)

  it('makes the summary from the traces when the record lists only them, once', function()
    local r = run_of(set, 'amd-primus-prof')
    assert.is_nil(r.profile.analysis)
    local s, from = r:profile_analysis()
    assert.are.equal('traces', from)
    assert.is_true(s.gpu)
    assert.are.equal(trace.summary(assert(trace.analyse({ MI300 }))).window_ms, s.window_ms)
    assert.are.equal(s, (r:profile_analysis()))
    local a = assert(r:trace())
    assert.are.equal(1, #a.ranks)
    assert.are.equal(a, (r:trace()))
  end)

  it('keeps the fixture record consistent with its trace (generate_profiled.lua)', function()
    local r = run_of(set, 'nvd-megatron-prof')
    local dir = fs.dirname(r.path)
    local fresh = assert(profiled.summarise(profiled.files(r.profile, r.path), dir))
    assert.are.same(json.decode(json.encode(fresh)), r.profile.analysis,
      'regenerate: build/tplua tests/fixtures/results/generate_profiled.lua')
  end)

  it('says why there is none', function()
    local r = load('fair').runs[1]
    local s, why = r:profile_analysis()
    assert.is_nil(s)
    assert.are.equal('the run was not profiled (its record has no profile member)', why)
    assert.are.same({ nil, why }, { r:trace() })
    s, why = profiled.analysis({ path = '/x/r.json', profile = { tool = 'nsys',
      traces = { 'nvd/r/profile/nsys_rank0.nsys-rep' } } })
    assert.is_nil(s)
    assert.are.equal('its record lists no trace file tp.analyse.trace reads (PyTorch profiler '
      .. 'JSON)', why)
    s, why = profiled.analysis({ path = '/nonexistent/r.json', profile = { tool = 'torch',
      traces = { 'gone/rank0_trace.json' } } })
    assert.is_nil(s)
    assert.is_truthy(why:find('/nonexistent/gone/rank0_trace.json', 1, true), why)
  end)
end)

describe('tp.analyse.profiled.mean', function()
  it('averages the runs with GPU ops and gathers the warnings, naming the runs', function()
    local a = { ranks = 2, gpu = true, steps = 3, window_ms = 10, idle_ms = 1, overlap = 0.5,
      classes = { gemm = { kind = 'compute', exclusive_ms = 6, time_ms = 6, sum_ms = 7,
        count = 10 } }, warnings = { 'w1' }, errors = {}, stragglers = { 's1' }, top = { 1 } }
    local b = { ranks = 4, gpu = true, steps = 3, window_ms = 14, idle_ms = 3,
      classes = { gemm = { kind = 'compute', exclusive_ms = 8, time_ms = 8, sum_ms = 9,
        count = 12 }, all_reduce = { kind = 'communication', exclusive_ms = 2, time_ms = 4,
        sum_ms = 4, count = 2 } }, warnings = {}, errors = {}, stragglers = {} }
    local cpu = { ranks = 1, gpu = false, warnings = { 'cpu only' }, errors = {} }
    local m = profiled.mean({ a, b, cpu }, { 'ra', 'rb', 'rc' })
    assert.is_true(m.gpu)
    assert.are.equal(3, m.runs)
    assert.are.equal(4, m.ranks)
    assert.are.equal(6, m.steps)
    assert.are.equal(12, m.window_ms)
    assert.are.equal(2, m.idle_ms)
    assert.are.equal(0.5, m.overlap)
    assert.are.same({ kind = 'compute', exclusive_ms = 7, time_ms = 7, sum_ms = 8, count = 11 },
      m.classes.gemm)
    assert.are.equal(1, m.classes.all_reduce.exclusive_ms)
    assert.are.same({ 'ra: w1', 'rc: cpu only' }, m.warnings)
    assert.are.same({ 'ra: s1' }, m.stragglers)
    assert.are.same({ 1 }, m.top)
    local none = profiled.mean({ cpu })
    assert.is_false(none.gpu)
    assert.is_nil(none.window_ms)
    assert.are.same({ 'cpu only' }, none.warnings)
  end)
end)

describe('tp.analyse.profiled.section', function()
  local set = load('profiled')

  it('gives each group its breakdown and explains the gap from one run per group', function()
    local cmp = assert(require('tp.analyse.compare').compare(set, { n_boot = 50 }))
    local sec = assert(profiled.section(set, cmp))
    assert.are.equal('platform', sec.by)
    assert.are.equal('nvd', sec.baseline)
    assert.are.equal(2, #sec.groups)
    local nvd, amd = sec.groups[1], sec.groups[2]
    assert.are.equal('nvd', nvd.value)
    assert.are.same({ 'nvd-megatron-prof' }, nvd.runs)
    assert.are.same({ ['nvd-megatron-prof'] = 'record' }, nvd.from)
    assert.are.same({ ['amd-primus-prof'] = 'traces' }, amd.from)
    assert.are.equal(34.892, nvd.summary.window_ms)
    assert.are.equal(33.131, amd.summary.window_ms)
    local x = sec.explanations[1]
    assert.are.same({ 'nvd-megatron-prof', 'amd-primus-prof' }, x.runs)
    local e = x.explanation
    assert.are.equal('ns', e.unit)
    assert.are.same({ 'nvd', 'amd' }, e.labels)
    -- The same as tp.analyse.trace.explain on the two traces; the rows add up to the gap.
    local want = trace.explain(assert(trace.analyse({ H100 })), assert(trace.analyse({ MI300 })),
      { 'nvd', 'amd' })
    assert.are.equal(want.diff, e.diff)
    assert.are.equal(#want.rows, #e.rows)
    local sum = 0
    for _, r in ipairs(e.rows) do
      sum = sum + r.diff
    end
    assert.is_true(math.abs(sum - e.diff) < 1, tostring(sum))
    assert.are.equal('elementwise', e.rows[1].key)
    -- JSON as tplua compare --json prints it.
    local back = json.decode(json.encode(sec))
    assert.are.equal(e.diff, back.explanations[1].explanation.diff)
  end)

  it('takes the groups itself, another baseline, and says when there is nothing to explain',
    function()
      local sec = assert(profiled.section(set, { by = 'platform', baseline = 'amd' }))
      assert.are.equal('amd', sec.groups[1].value)
      assert.are.same({ 'amd', 'nvd' }, sec.explanations[1].explanation.labels)
      local one = assert(profiled.section(set:where({ platform = 'nvd' })))
      assert.are.equal(1, #one.groups)
      assert.are.equal(0, #one.explanations)
      assert.is_nil(profiled.section(load('fair')))
      -- A group without a profiled run, and one whose traces hold no GPU op.
      local mixed = results.from_runs({ run_of(set, 'nvd-megatron-prof'), load('fair').runs[1] })
      local m = assert(profiled.section(mixed))
      assert.are.equal('amd has no profiled run', m.explanations[1].missing)
      local dir = h.tmpdir()
      local rec = assert(json.load_file(run_of(set, 'amd-primus-prof').path))
      rec.run_id = 'amd-cpu'
      rec.profile = { tool = 'torch', traces = { 'rank0_trace.json' } }
      cpu_trace(dir .. '/rank0_trace.json')
      assert(json.save_file(dir .. '/cpu.json', rec))
      local cpu_set = results.from_runs({ run_of(set, 'nvd-megatron-prof'),
        assert(results.load(dir)).runs[1] })
      local c = assert(profiled.section(cpu_set))
      assert.is_false(c.groups[2].summary.gpu)
      assert.are.equal('amd has no GPU ops in its traces (a CPU-only profile)',
        c.explanations[1].missing)
      local text = require('tp.present.trace').section_text(c)
      assert.is_truthy(text:find('amd: no GPU ops in the traces (a CPU-only profile): no GPU '
        .. 'breakdown', 1, true), text)
      assert.is_truthy(text:find('amd against nvd: no explanation: amd has no GPU ops', 1, true))
      -- No row of figures for amd: never a zero shown as measured.
      assert.is_nil(text:find('\n  amd +%d'), text)
    end)

  it('prints as text (tp.present.trace.section_text), with each explanation\'s table', function()
    local section_text = require('tp.present.trace').section_text
    local sec = assert(profiled.section(set))
    local text = section_text(sec)
    assert.is_truthy(text:find('profile: where the step time goes', 1, true))
    assert.is_truthy(text:find('  nvd          1      1   34.892   8.6%', 1, true), text)
    assert.is_truthy(text:find("nvd runs: nvd-megatron-prof (its record's profile.analysis)", 1,
      true), text)
    assert.is_truthy(text:find('amd runs: amd-primus-prof (read from its traces)', 1, true))
    assert.is_truthy(text:find('amd against nvd, from the traces of nvd-megatron-prof (nvd) and '
      .. 'amd-primus-prof (amd):\nwhy amd and nvd differ: amd 5.0% faster per step: 33.131 vs '
      .. '34.892 ms', 1, true), text)
    assert.is_truthy(text:find('largest contributors: elementwise -5.298 ms/step', 1, true))
    assert.has_error(function()
      section_text('x')
    end, 'tp.present.trace.section_text: profile section expected, got string')
    assert.has_error(function()
      profiled.section('x')
    end, 'tp.analyse.profiled.section: result set expected, got string')
  end)
end)
