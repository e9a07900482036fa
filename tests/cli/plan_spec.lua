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

describe('tplua plan CONFIG', function()
  local UNIFIED = h.fixture('config/unified.yaml')
  local ENV = h.fixture('config/config.env')

  local function no_crash(r)
    assert.is_nil(r.stderr:find('stack traceback', 1, true), r.stderr)
    assert.is_nil(r.stderr:find('attempt to', 1, true), r.stderr)
  end

  it('plans a unified YAML config exactly as the recipe with the same fields', function()
    local yaml = h.run({ 'plan', UNIFIED, '--only', 'nvd' })
    assert.are.equal(0, yaml.code, yaml.stderr)
    assert.is_true(has(yaml.stdout, 'experiment: llama-from-yaml'))
    assert.is_true(has(yaml.stdout, 'runs: 3 on 1 platform'))
    assert.is_true(has(yaml.stdout, '--micro-batch-size 2 --global-batch-size 64 --seq-length '
      .. '2048 --train-iters 500 --lr 0.0003'))
    local dir = h.tmpdir()
    local path = recipe(dir, [[
      name = 'llama-from-yaml', model = 'llama3.1-8b', methodology = 'identical_config',
      platforms = { amd = { framework = 'primus', hardware = 'mi300x' },
                    nvd = { framework = 'megatron', hardware = 'h100-sxm' } },
      training = { seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500, lr = 3e-4,
                   warmup = 50, precision = 'bf16', dataset = 'bc' },
      parallelism = { tp = 1, pp = 1, dp = 8 }, repeats = 3,
    ]])
    local lua = h.run({ 'plan', path, '--only', 'nvd' })
    assert.are.equal(0, lua.code, lua.stderr)
    assert.are.equal(lua.stdout, yaml.stdout)
    -- Flags apply as to a recipe; ${GBS:-64} takes the environment.
    local flags = h.run({ 'plan', UNIFIED, '--iters', '100', '--repeats', '1', '--json' },
      { env = { GBS = '128' } })
    assert.are.equal(0, flags.code, flags.stderr)
    local data = assert(json.decode(flags.stdout))
    assert.are.equal(100, data.platforms.nvd.runs[1].config.training.iters)
    assert.are.equal(128, data.platforms.nvd.runs[1].config.training.gbs)
    assert.are.equal(1, #data.platforms.amd.runs)
  end)

  it('plans the example config files: the YAML twin of the flagship plans as the flagship',
    function()
      local yaml = h.run({ 'plan', 'examples/llama_identical.yaml' })
      assert.are.equal(0, yaml.code, yaml.stderr)
      assert.are.equal(h.run({ 'plan', FLAGSHIP }).stdout, yaml.stdout)
      assert.is_true(has(yaml.stdout, 'nvd-megatron-2b8ed7d97d77-r3'))
      local env = h.run({ 'plan', 'examples/tprimat/config.env' })
      assert.are.equal(0, env.code, env.stderr)
      assert.is_true(has(env.stdout, 'experiment: config-llama3.1-8b'))
    end)

  it('plans a JSON config, and reads it as JSON (its messages)', function()
    local dir = h.tmpdir()
    local path = dir .. '/exp.json'
    h.write(path, assert(json.encode({ name = 'from-json', model = 'llama3.1-8b',
      platforms = { nvd = { framework = 'megatron' } },
      training = { seed = 1, mbs = 1, gbs = 16, seq_len = 1024, iters = 20, lr = 1e-4 } })))
    local r = h.run({ 'plan', path })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_true(has(r.stdout, 'experiment: from-json'))
    assert.is_true(has(r.stdout, '--global-batch-size 16 --seq-length 1024 --train-iters 20'))
    h.write(path, '{"name": "from-json", "model": ')
    local bad = h.run({ 'plan', path })
    assert.are.equal(1, bad.code)
    assert.is_true(has(bad.stderr, 'tplua plan: ' .. path .. ':1:31: unexpected end of input'),
      bad.stderr)
    no_crash(bad)
  end)

  it('fails a config whose values break the rules, naming the file and the key', function()
    local r = h.run({ 'plan', h.fixture('config/unified_bad_types.yaml') })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stderr, 'unified_bad_types.yaml: training.gbs: integer expected, got '
      .. 'string "64x"'), r.stderr)
    local dir = h.tmpdir()
    local path = dir .. '/override.yaml'
    h.write(path, 'name: o\nmodel: llama3.1-8b\nplatforms:\n  nvd: { framework: megatron, '
      .. 'training: { lr: 1.0e-4 } }\ntraining: { seed: 1, mbs: 1, gbs: 16, seq_len: 1024, '
      .. 'iters: 20, lr: 3.0e-4 }\n')
    local o = h.run({ 'plan', path })
    assert.are.equal(1, o.code)
    assert.is_true(has(o.stderr, path .. ": experiment 'o': platforms.nvd.training.lr: "
      .. 'identical_config fixes training.lr on every platform'), o.stderr)
    no_crash(o)
  end)

  it('plans one model of a tprimat-era config.yaml with --model', function()
    local both = h.run({ 'plan', 'examples/tprimat/config.yaml' })
    assert.are.equal(1, both.code)
    assert.is_true(has(both.stderr, 'the file describes 2 models (llama, qwen); choose one with '
      .. '--model KEY'), both.stderr)
    local r = h.run({ 'plan', 'examples/tprimat/config.yaml', '--model', 'qwen' })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_true(has(r.stdout, 'model: qwen2.5-7b'))
    local usage = h.run({ 'plan', 'examples/tprimat/config.yaml', '--model' })
    assert.are.equal(2, usage.code)
    assert.is_true(has(usage.stderr, "option '--model' needs a value"))
  end)

  it('imports a Primus-style config.env: every key mapped, the unused ones named', function()
    local r = h.run({ 'plan', ENV, '--json' })
    assert.are.equal(0, r.code, r.stderr)
    local data = assert(json.decode(r.stdout))
    assert.are.equal('config-llama3.1-8b', data.experiment)
    assert.are.same({ 'amd', 'nvd' }, data.order)
    local cfg = data.platforms.nvd.runs[1].config
    assert.are.equal('llama3.1-8b', cfg.model)
    assert.are.same({ 42, 1, 64, 2048, 50, 3e-4, 10, 0.1, 0.9, 0.95, 'bf16', 'bc' },
      { cfg.training.seed, cfg.training.mbs, cfg.training.gbs, cfg.training.seq_len,
        cfg.training.iters, cfg.training.lr, cfg.training.warmup, cfg.training.weight_decay,
        cfg.training.beta1, cfg.training.beta2, cfg.training.precision, cfg.training.dataset })
    assert.are.same({ 1, 1, 8 }, { cfg.parallelism.tp, cfg.parallelism.pp, cfg.parallelism.dp })
    assert.are.equal('/data/tprimat', cfg.paths.data)
    assert.are.equal('./cache', data.platforms.nvd.runs[1].env.HF_HOME)
    assert.are.equal('primus', data.platforms.amd.framework)
    assert.is_true(has(r.stderr, 'tplua plan: note: ' .. ENV .. ':22: DATA_SAMPLES is not used'),
      r.stderr)
    -- The text plan, and the environment and --model in their places.
    local text = h.run({ 'plan', ENV, '--model', 'qwen2.5-7b', '--only', 'nvd' },
      { env = { GA = '4' } })
    assert.are.equal(0, text.code, text.stderr)
    assert.is_true(has(text.stdout, 'experiment: config-qwen2.5-7b'))
    assert.is_true(has(text.stdout, '--micro-batch-size 1 --global-batch-size 32'), text.stdout)
  end)

  it('names the file, the line and the key of anything it cannot map', function()
    local dir = h.tmpdir()
    local function plan_env(name, text)
      local path = dir .. '/' .. name
      h.write(path, text)
      local r = h.run({ 'plan', path })
      assert.are.equal(1, r.code, r.stdout)
      no_crash(r)
      return r.stderr, path
    end
    local err, path = plan_env('unknown.env', 'MODEL=llama3.1-8b\n# a comment\nTP=1\nFOO=1\n')
    assert.is_true(has(err, 'tplua plan: ' .. path .. ":4: unknown key 'FOO' (known: "
      .. 'AMD_FRAMEWORK, AMD_GPU, BETA1, BETA2, CP,'), err)
    err, path = plan_env('values.env', 'MODEL=llama3.1-8b\nTP=two\nPP = 1\nGBS=$((MBS*8))\n'
      .. 'DP=8\nDP=4\n')
    assert.is_true(has(err, path .. ':2: TP: integer expected, got "two"'), err)
    assert.is_true(has(err, path .. ":3: not a KEY=value line: 'PP = 1' (no spaces around '=')"))
    assert.is_true(has(err, path .. ':4: GBS: command substitution and $((...)) arithmetic are '
      .. 'not supported'))
    assert.is_true(has(err, path .. ':6: DP is set again (first at line 5)'))
    err, path = plan_env('fp8.env', 'MODEL=llama3.1-8b\nFP8_PARAM=true\n')
    assert.is_true(has(err, path .. ':2: FP8_PARAM: true is not expressible'), err)
    err, path = plan_env('nomodel.env', 'TP=1\n')
    assert.is_true(has(err, path .. ': MODEL is not set'), err)
  end)

  it('refuses empty, binary, truncated and huge files with a message naming the file', function()
    local dir = h.tmpdir()
    local cases = {
      { 'empty.env', '', ': no KEY=value line (empty file)' },
      { 'comments.env', '# only\n\n', ': no KEY=value line (only blank lines and comments)' },
      { 'binary.env', 'MODEL=x\nTP=1\0\1\2\n', ':2: NUL byte' },
      { 'latin1.env', 'MODEL=llama3.1-8b\nNAME=caf\xe9\n', ':2: invalid UTF-8 (byte 0xE9)' },
      { 'truncated.env', 'MODEL=llama3.1-8b\nLR="3.0e-4\nTRAIN_IT',
        ':2: LR: unterminated double quote' },
      { 'huge.env', string.rep('# padding\n', 120000), ': file is 1200000 bytes, above max_size '
        .. '(1048576 bytes)' },
      { 'empty.yaml', '', ':1:1: empty input' },
      { 'binary.json', '\0\1\2', ':1:1: NUL byte' },
      { 'truncated.yaml', 'name: x\ntraining: { seed: 1', 'did not find expected' },
      { 'huge.yaml', 'name: x\n' .. string.rep('# padding\n', 120000),
        ': file is 1200008 bytes, above max_size (1048576 bytes)' },
      { 'list.json', '[1, 2]', ': a mapping expected at the top level, got a list' },
      { 'record.json', '{"schema": "tplua.run/2", "run_id": "x"}',
        ": a 'tplua.run/2' document, not an experiment config" },
    }
    for _, c in ipairs(cases) do
      local path = dir .. '/' .. c[1]
      h.write(path, c[2])
      local r = h.run({ 'plan', path })
      assert.are.equal(1, r.code, c[1] .. ': ' .. r.stdout .. r.stderr)
      assert.is_true(has(r.stderr, 'tplua plan: ' .. path), c[1] .. ': ' .. r.stderr)
      assert.is_true(has(r.stderr, c[3]), c[1] .. ': ' .. r.stderr)
      no_crash(r)
    end
    local d = h.run({ 'plan', dir .. '/' })
    assert.are.equal(1, d.code)
  end)
end)
