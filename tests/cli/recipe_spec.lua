-- Running a recipe as a script: `tplua recipes/llama_identical.lua` plans, runs this machine's
-- platform (none here, or a fake GPU), and ends with the comparison of the recorded runs;
-- `tplua run`; the recipe's --help and flag errors; the custom log parser example.
local h = require('helper')

local FLAGSHIP = 'recipes/llama_identical.lua'

local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

-- No GPU library is found in an empty directory: a GPU-less machine, wherever the specs run.
local function no_gpu()
  return { TPLUA_GPU_LIBPATH = h.tmpdir() }
end

describe('tplua RECIPE.lua', function()
  it('on a machine without GPUs plans, runs nothing and compares the recorded runs', function()
    local results = h.tmpdir() .. '/empty'
    local r = h.run({ FLAGSHIP, '--results', results }, { env = no_gpu() })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    assert.is_true(has(out, 'platform amd: AMD Instinct MI300X'))
    assert.is_true(has(out, 'platform nvd: NVIDIA H100'))
    assert.is_true(has(out, 'run: no GPU on this machine'), out)
    assert.is_true(has(out, 'nothing runs here'))
    assert.is_true(has(out, 'analysis: examples/runs/llama3.1-8b-identical (the recorded runs '
      .. 'shipped with the recipe: illustrations derived from published figures, not '
      .. 'measurements'))
    assert.is_true(has(out, '6 run records (3 amd, 3 nvd)'))
    assert.is_true(has(out, 'tokens/s/GPU'))
    assert.is_true(has(out, 'fairness audit (identical_config): the comparison is fair'))
    -- It ends with the comparison: the loss-curve agreement is the last line.
    local last = out:gsub('%s+$', ''):match('[^\n]*$')
    assert.is_truthy(last:find('^loss curves amd vs nvd: RMS difference 0%.0%d+ over 500 '
      .. 'iterations'), last)
    assert.are.equal('', r.stderr)
  end)

  it('exits 3 when the fairness audit of its results finds errors, as tplua compare does',
    function()
      -- tests/fixtures/results/unfair: runs whose learning rates differ across platforms.
      local results = h.tmpdir() .. '/unfair'
      assert(os.execute('cp -r ' .. h.shquote(h.fixture('results/unfair')) .. ' '
        .. h.shquote(results)))
      local r = h.run({ FLAGSHIP, '--results', results }, { env = no_gpu() })
      assert.are.equal(3, r.code, r.stdout .. r.stderr)
      assert.is_true(has(r.stdout, 'the comparison is NOT fair'))
      assert.is_true(has(r.stdout, 'the fairness audit found errors: exit status 3'))
    end)

  it('analyses its own results directory once it holds run records', function()
    local results = h.tmpdir()
    os.execute(string.format('mkdir -p %s/nvd && cp %s %s/nvd/',
      h.shquote(results), 'examples/runs/llama3.1-8b-identical/nvd/*-r1.json',
      h.shquote(results)))
    local r = h.run({ FLAGSHIP, '--results', results }, { env = no_gpu() })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_true(has(r.stdout, 'analysis: ' .. results .. '\n'), r.stdout)
    assert.is_true(has(r.stdout, '1 run records (1 nvd)'))
  end)

  it('on a (fake) NVIDIA machine runs the nvd runs through tp.campaign', function()
    local fake = h.fakes_dir .. '/h100x8'
    if not require('tp.fs').is_dir(fake) then
      pending('fake GPU libraries not built (' .. fake .. ')')
      return
    end
    local results = h.tmpdir()
    -- No torchrun on an empty PATH: the run starts and fails at once, deterministically.
    -- The preflight stops it first: no Megatron-LM checkout, no python3 on that PATH.
    local env = { TPLUA_GPU_LIBPATH = fake, PATH = h.tmpdir() }
    local pf = h.run({ FLAGSHIP, '--results', results, '--only', 'nvd', '--repeats', '1' },
      { env = env })
    assert.are.equal(1, pf.code, pf.stdout .. pf.stderr)
    assert.is_true(has(pf.stdout, 'error   framework megatron: /workspace/Megatron-LM does not '
      .. 'exist'), pf.stdout)
    assert.is_true(has(pf.stdout, 'run: the preflight found errors: nothing started'), pf.stdout)
    local r = h.run({ FLAGSHIP, '--results', results, '--only', 'nvd', '--repeats', '1',
      '--skip-preflight' }, { env = env })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'run: this machine is nvd (8 x NVIDIA H100'), r.stdout)
    assert.is_true(has(r.stdout, 'nvd-megatron-'))
    assert.is_true(has(r.stdout, 'analysis: ' .. results))
  end)

  it('on a (fake) AMD machine runs nothing of an NVIDIA-only plan', function()
    local fake = h.fakes_dir .. '/mi300x8'
    if not require('tp.fs').is_dir(fake) then
      pending('fake GPU libraries not built (' .. fake .. ')')
      return
    end
    local r = h.run({ FLAGSHIP, '--results', h.tmpdir() .. '/x', '--only', 'nvd' },
      { env = { TPLUA_GPU_LIBPATH = fake } })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_true(has(r.stdout, "run: this machine is 'amd'"), r.stdout)
    assert.is_true(has(r.stdout, 'which this plan does not include: nothing runs here'))
  end)

  it('starts nothing with --dry-run', function()
    local r = h.run({ FLAGSHIP, '--dry-run', '--results', h.tmpdir() .. '/x' },
      { env = no_gpu() })
    assert.are.equal(0, r.code)
    assert.is_true(has(r.stdout, 'run: --dry-run: nothing started'))
  end)

  it('prints its flags with --help and refuses unknown ones', function()
    local help = h.run({ FLAGSHIP, '--help' })
    assert.are.equal(0, help.code)
    assert.is_true(has(help.stdout, 'usage: tplua recipes/llama_identical.lua [flags]'))
    assert.is_true(has(help.stdout, '--warmup N'))
    assert.is_true(has(help.stdout, 'runs of each configuration (default 3)'))
    local bad = h.run({ FLAGSHIP, '--fast' })
    assert.are.equal(2, bad.code)
    assert.is_true(has(bad.stderr, "unknown option '--fast'"))
    assert.are.equal('', bad.stdout)
  end)

  it('exits 1 on a plan with errors and on a malformed definition', function()
    local dir = h.tmpdir()
    h.write(dir .. '/bad_plan.lua', "return require('tp').experiment.main({ name = 'b', "
      .. "model = 'qwen2.5-7b', platforms = { nvd = { framework = 'megatron' } }, "
      .. 'training = { mbs = 1, gbs = 8, seq_len = 1024, iters = 10, lr = 1e-4 }, '
      .. 'parallelism = { tp = 8 } })\n')
    local r = h.run({ dir .. '/bad_plan.lua' }, { env = no_gpu() })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stdout, 'parallelism.tp: 8 does not divide the 28 attention heads and '
      .. '4 KV heads of qwen2.5-7b'), r.stdout)
    assert.is_true(has(r.stdout, 'the plan has errors: nothing runs'))
    h.write(dir .. '/bad_def.lua', "return require('tp').experiment.main({ name = 'b', "
      .. "model = 'llama3.1-8b', platforms = { nvd = { framework = 'megatron' } }, "
      .. "training = { mbs = 1, gbs = '8x', seq_len = 1024, iters = 10, lr = 1e-4 } })\n")
    local d = h.run({ dir .. '/bad_def.lua' })
    assert.are.equal(1, d.code)
    assert.is_true(has(d.stderr, "bad_def.lua: experiment 'b': training.gbs: integer expected, "
      .. 'got string "8x"'), d.stderr)
  end)
end)

describe('tplua run RECIPE.lua', function()
  it('fails on a machine without GPUs and does not analyse', function()
    local r = h.run({ 'run', FLAGSHIP, '--results', h.tmpdir() .. '/x' }, { env = no_gpu() })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stdout, 'run: no GPU on this machine'))
    assert.is_false(has(r.stdout, 'analysis:'))
    -- The short plan: run ids without the commands.
    assert.is_true(has(r.stdout, 'nvd-megatron-2b8ed7d97d77-r1'))
    assert.is_false(has(r.stdout, '$ torchrun'))
  end)

  it('handles usage errors', function()
    assert.are.equal(2, h.run({ 'run' }).code)
    assert.are.equal(0, h.run({ 'run', '--help' }).code)
    local m = h.run({ 'run', 'nope.lua' })
    assert.are.equal(1, m.code)
    assert.is_true(has(m.stderr, 'tplua run: nope.lua: no such file'))
  end)
end)

describe('examples', function()
  it('parses a log format through a registered parser', function()
    local r = h.run({ 'examples/custom_log_parser.lua' })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_true(has(r.stdout, 'format nanotrain, 12 records'))
    assert.is_true(has(r.stdout, 'tokens/s/GPU 20429.7'))
    assert.is_true(has(r.stdout, 'loss 11.7842 -> 7.3025'))
  end)

  it('regenerates the recorded runs: the same seeded iteration lines', function()
    local out = h.tmpdir() .. '/runs'
    local r = h.run({ 'examples/runs/generate.lua', out })
    assert.are.equal(0, r.code, r.stderr)
    -- The argument dumps follow the framework adapters; the seeded part is the iterations.
    local function iterations(text)
      local lines = {}
      for line in (text or ''):gmatch('[^\n]+') do
        if line:find(' iteration +%d+/') then
          lines[#lines + 1] = line
        end
      end
      return lines
    end
    for _, rel in ipairs({ 'amd/amd-primus-e84adbb11776-r2.log',
      'nvd/nvd-megatron-2b8ed7d97d77-r3.log' }) do
      local want = iterations(h.read('examples/runs/llama3.1-8b-identical/' .. rel))
      local got = iterations(h.read(out .. '/' .. rel))
      assert.are.equal(500, #want, rel)
      assert.are.same(want, got, rel)
    end
  end)
end)
