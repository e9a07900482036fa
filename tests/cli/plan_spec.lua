-- tplua plan RECIPE: the printed plan (both platforms' exact commands, the memory estimate,
-- the findings), --json, and the failures (invalid configs, missing files, bad flags).
local h = require('helper')
local json = require('tp.json')

local FLAGSHIP = 'recipes/llama_identical.lua'

local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

local function recipe(dir, body)
  local path = dir .. '/recipe.lua'
  h.write(path, "local tp = require('tp')\nreturn tp.experiment.main({\n" .. body .. '\n})\n')
  return path
end

local BASE = [[
  name = 'cli-spec', model = 'llama3.1-8b',
  platforms = { nvd = { framework = 'megatron' }, amd = { framework = 'primus' } },
  training = { seed = 1, mbs = 1, gbs = 16, seq_len = 1024, iters = 20, lr = 1e-4 },
]]

describe('tplua plan', function()
  it('prints both platforms, their exact commands and the memory estimate', function()
    local r = h.run({ 'plan', FLAGSHIP })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    assert.is_true(has(out, 'experiment: llama3.1-8b-identical'))
    assert.is_true(has(out, 'methodology: identical_config'))
    assert.is_true(has(out, 'runs: 6 on 2 platforms'))
    assert.is_true(has(out, 'platform amd: AMD Instinct MI300X (mi300x, 192 GiB), framework '
      .. 'primus'))
    assert.is_true(has(out, 'platform nvd: NVIDIA H100 SXM5 80GB (h100-sxm, 80 GiB), framework '
      .. 'megatron'))
    assert.is_true(has(out, '$ torchrun --nnodes 1 --nproc-per-node 8 --standalone '
      .. '/workspace/Megatron-LM/pretrain_gpt.py --num-layers 32'))
    assert.is_true(has(out, '--micro-batch-size 2 --global-batch-size 64 --seq-length 2048 '
      .. '--train-iters 500 --lr 0.0003'))
    assert.is_true(has(out, 'bash /workspace/Primus/runner/primus-cli direct -- train pretrain '
      .. '--config '))
    assert.is_true(has(out, 'memory per GPU (estimate): weights 15.0 + gradients 29.9 + '
      .. 'optimizer 11.2 + activations 17.0 + logits 2.0 = 75.1 GiB of 80.0 GiB (94%): tight'))
    assert.is_true(has(out, '= 75.1 GiB of 192.0 GiB (39%): fits'))
    assert.is_true(has(out, 'nvd-megatron-2b8ed7d97d77-r3'))
    assert.is_true(has(out, 'amd-primus-e84adbb11776-r1'))
    assert.is_true(has(out, 'primus_experiment.yaml ('))
    assert.are.equal('', r.stderr)
  end)

  it('writes the plan as JSON', function()
    local r = h.run({ 'plan', FLAGSHIP, '--json', '--only', 'nvd', '--repeats', '1' })
    assert.are.equal(0, r.code, r.stderr)
    local data = assert(json.decode(r.stdout))
    assert.are.equal('tplua.plan/1', data.schema)
    assert.is_true(data.ok)
    assert.are.same({ 'nvd' }, data.order)
    local run = data.platforms.nvd.runs[1]
    assert.are.equal('torchrun', run.argv[1])
    assert.are.equal(64, run.config.training.gbs)
    assert.are.equal('tight', data.platforms.nvd.memory.status)
  end)

  it('fails an invalid config with a precise message', function()
    local dir = h.tmpdir()
    local path = recipe(dir, BASE .. 'parallelism = { tp = 3, dp = 8 },')
    local r = h.run({ 'plan', path })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stdout, 'parallelism: tp*pp*cp*dp = 3*1*1*8 = 24, but nodes 1 x '
      .. 'gpus_per_node 8 = 8 GPUs'), r.stdout)
    assert.is_true(has(r.stdout, 'plan: '))
  end)

  it('fails a definition error at load time, naming the recipe and the key', function()
    local dir = h.tmpdir()
    local path = recipe(dir, [[
      name = 'cli-spec', model = 'llama3.1-8b', methodology = 'identical_config',
      platforms = { nvd = { framework = 'megatron' },
                    amd = { framework = 'primus', training = { seed = 7 } } },
      training = { seed = 1, mbs = 1, gbs = 16, seq_len = 1024, iters = 20, lr = 1e-4 },
    ]])
    local r = h.run({ 'plan', path })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stderr, 'platforms.amd.training.seed: identical_config fixes '
      .. 'training.seed on every platform (experiment: 1, amd: 7)'), r.stderr)
    assert.is_true(has(r.stderr, path))
  end)

  it('refuses flags that break a rule, and takes the recipe options', function()
    local r = h.run({ 'plan', FLAGSHIP, '--iters', '10' })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stdout, 'training.warmup: must be in [0, iters], got 50'), r.stdout)
    local ok = h.run({ 'plan', FLAGSHIP, '--iters', '10', '--warmup', '2' })
    assert.are.equal(0, ok.code, ok.stdout)
    assert.is_true(has(ok.stdout, '--train-iters 10'))
  end)

  it('plans the other recipes and examples', function()
    for _, path in ipairs({ 'recipes/llama_max_perf.lua', 'recipes/qwen_identical.lua',
      'recipes/qwen_max_perf.lua', 'recipes/sweep_parallelism.lua', 'examples/custom_sweep.lua',
      'examples/custom_methodology.lua', 'examples/tprimat_config.lua' }) do
      local r = h.run({ 'plan', path })
      assert.are.equal(0, r.code, path .. ': ' .. r.stdout .. r.stderr)
    end
    local sw = h.run({ 'plan', 'recipes/sweep_parallelism.lua' })
    assert.is_true(has(sw.stdout, 'left out:'))
    assert.is_true(has(sw.stdout, 'pruned: memory: estimate'))
    assert.is_true(has(sw.stdout, 'does not divide the 8 GPUs'))
  end)

  it('reports a tprimat config value of the wrong type from the environment', function()
    local r = h.run({ 'plan', 'examples/tprimat_config.lua' }, { env = { GBS = '64x' } })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stderr, 'examples/tprimat/config.yaml: '
      .. 'training.data.global_batch_size: integer expected, got string "64x"'), r.stderr)
  end)

  it('handles usage errors', function()
    local none = h.run({ 'plan' })
    assert.are.equal(2, none.code)
    assert.is_true(has(none.stderr, 'tplua plan: no RECIPE given'))
    local help = h.run({ 'plan', '--help' })
    assert.are.equal(0, help.code)
    assert.is_true(has(help.stdout, 'usage: tplua plan RECIPE.lua'))
    local missing = h.run({ 'plan', 'recipes/no_such_recipe.lua' })
    assert.are.equal(1, missing.code)
    assert.is_true(has(missing.stderr, 'tplua plan: recipes/no_such_recipe.lua: no such file'))
    local bad = h.run({ 'plan', FLAGSHIP, '--colour', 'red' })
    assert.are.equal(2, bad.code)
    assert.is_true(has(bad.stderr, "unknown option '--colour'"))
    local only = h.run({ 'plan', FLAGSHIP, '--only', 'tpu' })
    assert.are.equal(1, only.code)
    assert.is_true(has(only.stdout, "--only: no platform 'tpu' in this experiment"))
  end)
end)
