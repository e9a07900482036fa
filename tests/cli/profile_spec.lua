-- Profiling from the command line: `--profile TOOL[:FIRST-LAST]` on `tplua plan`, `tplua run`
-- and `tplua RECIPE.lua` (usage errors, the plan's commands), and real profiled runs of the
-- reference trainer (one rank, two): the record lists the Chrome traces they wrote and their
-- analysis (profile.analysis: CPU traces, so no GPU breakdown), the report links them.
local h = require('helper')
local json = require('tp.json')
local fs = require('tp.fs')


local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

-- A reference-trainer recipe: 4 iterations of 2 sequences of 32 tokens per rank (about 2 s);
-- one rank (launcher local), or `ranks` started by `tplua ranks`.
local function tiny_recipe(dir, ranks)
  ranks = ranks or 1
  local path = dir .. '/tiny.lua'
  h.write(path, string.format([[
local tp = require('tp')
return tp.experiment.main({
  name = 'tiny-profile',
  model = 'ref-tiny',
  platforms = { nvd = { framework = 'reference' } },
  gpus_per_node = %d,
  training = { seed = 1, mbs = 2, gbs = %d, seq_len = 32, iters = 4, lr = 3e-3,
               dataset = 'mock', log_interval = 1 },
  parallelism = { tp = 1, pp = 1, dp = %d },
  launcher = %q,
})
]], ranks, 2 * ranks, ranks, ranks == 1 and 'local' or 'ranks'))
  return path
end

-- The record's profile.analysis of CPU traces (the trainer runs on the CPU here): no GPU op in
-- any, said once per trace, and no figure at all (never zeros shown as measured).
local function assert_cpu_analysis(p)
  local a = p.analysis
  assert.is_table(a, 'no profile.analysis in the record')
  assert.is_false(a.gpu)
  assert.are.equal(#p.traces, a.ranks)
  assert.are.same({}, a.errors)
  assert.are.equal(#p.traces, #a.warnings)
  for i, t in ipairs(p.traces) do
    assert.are.equal(t .. ': no GPU kernels, copies or memsets in this trace (a CPU-only '
      .. 'profile): there is no GPU breakdown to give', a.warnings[i])
  end
  for _, k in ipairs({ 'window_ms', 'idle_ms', 'compute_ms', 'non_compute_ms', 'steps',
    'classes', 'top' }) do
    assert.is_nil(a[k], k)
  end
end

describe('--profile', function()
  local recipe = tiny_recipe(h.tmpdir())

  it('adds the profiler arguments to the planned command', function()
    local r = h.run({ 'plan', recipe, '--profile', 'torch:2-3', '--json', '--results', '/r' })
    assert.are.equal(0, r.code, r.stderr)
    local run = assert(json.decode(r.stdout)).platforms.nvd.runs[1]
    local words = table.concat(run.argv, ' ')
    assert.is_true(has(words, ' --profile --use-pytorch-profiler --profile-step-start 1 '
      .. '--profile-step-end 3 --profile-dir /r/nvd/' .. run.id .. '/profile'), words)
    assert.are.equal('torch', run.profile.tool)
    assert.are.same({ 2, 3 }, run.profile.steps)
    assert.are.same({ '/r/nvd/' .. run.id .. '/profile/rank<RANK>_trace.json' },
      run.profile.patterns)
    r = h.run({ 'plan', recipe, '--profile', 'torch:2-3' })
    assert.is_true(has(r.stdout, 'note: profile torch:2-3: traces /'), r.stdout)
  end)

  it('is a usage error naming the flag for an unknown tool or bad steps', function()
    for _, case in ipairs({
      { { 'plan', recipe, '--profile', 'perf' },
        "tplua plan " .. recipe .. ": option '--profile': unknown tool 'perf'" },
      { { 'run', recipe, '--profile', 'torch:3' },
        "option '--profile': 'torch:3': steps must be FIRST-LAST" },
      { { recipe, '--profile=nsys:9-2' },
        "option '--profile': 'nsys:9-2': steps must be FIRST-LAST" },
      { { 'plan', recipe, '--profile' }, "option '--profile' needs a value" },
    }) do
      local r = h.run(case[1])
      assert.are.equal(2, r.code, r.stdout .. r.stderr)
      assert.is_true(has(r.stderr, case[2]), r.stderr)
    end
  end)

  it('makes a missing system profiler a plan error (exit 1)', function()
    local r = h.run({ 'plan', recipe, '--profile', 'rocprofv3' }, { env = { PATH = h.tmpdir() } })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'error   nvd: profile: rocprofv3: not found in PATH'), r.stdout)
  end)
end)

describe('a profiled run of the reference trainer #slow', function()
  local fake = h.fakes_dir .. '/h100x8'
  local missing = h.trainer_missing(fake)

  it('writes a Chrome trace per rank, listed in the record and linked from the report',
    function()
      if missing then
        pending(missing)
        return
      end
      local dir = h.tmpdir()
      local recipe = tiny_recipe(dir)
      local results = dir .. '/results'
      -- The fake NVIDIA libraries make this machine 'nvd'; the trainer itself runs on the CPU.
      local r = h.run({ 'run', recipe, '--profile', 'torch:2-3', '--results', results },
        { env = { TPLUA_GPU_LIBPATH = fake } })
      assert.are.equal(0, r.code, r.stdout .. r.stderr)
      local paths = fs.glob(results .. '/*.json')
      assert.are.equal(1, #paths, table.concat(paths, ' '))
      local rec = assert(json.load_file(paths[1]))
      assert.are.equal('completed', rec.status)
      local p = rec.profile
      assert.are.equal('torch', p.tool)
      assert.are.same({ 2, 3 }, p.steps)
      assert.are.equal(1, #p.traces)
      assert.are.equal('nvd/' .. rec.run_id .. '/profile/rank0_trace.json', p.traces[1])
      -- The trace exists and is JSON (a Chrome trace: a list of events, or {traceEvents}).
      local trace = assert(json.load_file(results .. '/' .. p.traces[1]))
      local events = trace.traceEvents or trace
      assert.is_true(#events > 0)
      assert.is_truthy(h.read(results .. '/' .. rec.run_id .. '.log')
        :find('> profiler: steps 2-3 traced', 1, true))
      local rep = h.run({ 'report', results, '--out', dir .. '/report', '--no-plots' })
      assert.are.equal(0, rep.code, rep.stdout .. rep.stderr)
      local md = h.read(dir .. '/report/report.md')
      assert.is_true(has(md, '(../results/nvd/' .. rec.run_id .. '/profile/rank0_trace.json)'),
        md)
      -- The trace is not mistaken for a damaged run record.
      assert.is_false(has(md, 'unreadable'), md)
      -- The trace analysed into the record, consistent with the trace: CPU activity only.
      assert_cpu_analysis(p)
      local t = h.run({ 'trace', results .. '/' .. p.traces[1] })
      assert.are.equal(0, t.code, t.stderr)
      assert.is_true(has(t.stdout, ' 0 GPU ops '), t.stdout)
      assert.is_true(has(md, 'no GPU ops in the trace (CPU-only profile)'), md)
    end)

  it('analyses one trace per rank of a 2-rank run into the record', function()
    if missing then
      pending(missing)
      return
    end
    local dir = h.tmpdir()
    local recipe = tiny_recipe(dir, 2)
    local results = dir .. '/results'
    local r = h.run({ 'run', recipe, '--profile', 'torch:2-3', '--results', results },
      { env = { TPLUA_GPU_LIBPATH = fake } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local paths = fs.glob(results .. '/*.json')
    assert.are.equal(1, #paths, table.concat(paths, ' '))
    local rec = assert(json.load_file(paths[1]))
    local p = rec.profile
    local dir_of = 'nvd/' .. rec.run_id .. '/profile/'
    assert.are.same({ dir_of .. 'rank0_trace.json', dir_of .. 'rank1_trace.json' }, p.traces)
    -- As many ranks analysed as trace files, and the files the record lists are those read.
    assert_cpu_analysis(p)
    assert.are.equal(2, p.analysis.ranks)
    -- compare says the same: no GPU breakdown, nothing to explain.
    local c = h.run({ 'compare', results })
    assert.is_true(has(c.stdout, 'nvd: no GPU ops in the traces (a CPU-only profile): no GPU '
      .. 'breakdown'), c.stdout)
    assert.is_true(has(c.stdout, "nvd runs: " .. rec.run_id .. " (its record's "
      .. 'profile.analysis)'), c.stdout)
  end)
end)
