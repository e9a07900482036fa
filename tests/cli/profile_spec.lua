-- Profiling from the command line: `--profile TOOL[:FIRST-LAST]` on `tplua plan`, `tplua run`
-- and `tplua RECIPE.lua` (usage errors, the plan's commands), and a real profiled run of the
-- reference trainer: the record lists the Chrome traces it wrote, the report links them.
local h = require('helper')
local json = require('tp.json')
local fs = require('tp.fs')


local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

-- A one-rank reference-trainer recipe: 4 iterations of 2 sequences of 32 tokens (about 2 s).
local function tiny_recipe(dir)
  local path = dir .. '/tiny.lua'
  h.write(path, [[
local tp = require('tp')
return tp.experiment.main({
  name = 'tiny-profile',
  model = 'ref-tiny',
  platforms = { nvd = { framework = 'reference' } },
  gpus_per_node = 1,
  training = { seed = 1, mbs = 2, gbs = 2, seq_len = 32, iters = 4, lr = 3e-3,
               dataset = 'mock', log_interval = 1 },
  parallelism = { tp = 1, pp = 1, dp = 1 },
  launcher = 'local',
})
]])
  return path
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
  local missing = h.torch_missing()
    or (not fs.is_dir(fake) and ('fake GPU libraries not built (' .. fake .. ')')) or nil

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
    end)
end)
