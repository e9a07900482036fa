-- tp.config: key paths, type checks, the validation rules (one test each), and loading YAML in
-- the unified and the tprimat-era layouts.
local h = require('helper')
local config = require('tp.config')

local function cfg(over)
  local c = {
    model = 'llama3.1-8b',
    training = { seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500, lr = 3e-4,
                 warmup = 50, precision = 'bf16', dataset = 'bc' },
    parallelism = { tp = 1, pp = 1, dp = 8 },
    nodes = 1, gpus_per_node = 8,
  }
  return config.merge(c, over or {})
end

local function errors(r)
  local out = {}
  for _, f in ipairs(r.findings) do
    if f.severity == 'error' then
      out[#out + 1] = f
    end
  end
  return out
end

local function find(r, severity, text)
  for _, f in ipairs(r.findings) do
    if f.severity == severity and f.message:find(text, 1, true) then
      return f
    end
  end
  return nil
end

describe('tp.config helpers', function()
  it('gets, sets, merges and flattens key paths', function()
    local t = {}
    config.set(t, 'training.lr', 1e-4)
    assert.are.equal(1e-4, config.get(t, 'training.lr'))
    assert.is_nil(config.get(t, 'system.recompute'))
    local m = config.merge({ training = { lr = 1, mbs = 2 }, model = 'a' },
      { training = { lr = 3 }, model = 'b' })
    assert.are.same({ training = { lr = 3, mbs = 2 }, model = 'b' }, m)
    -- The dataset is replaced whole, not merged.
    local d = config.merge({ training = { dataset = { path = '/a', tokenizer = 't' } } },
      { training = { dataset = { path = '/b' } } })
    assert.are.same({ path = '/b' }, d.training.dataset)
    local f = config.flatten(cfg())
    assert.are.equal(64, f['training.gbs'])
    assert.are.equal('llama3.1-8b', f.model)
  end)

  it('drops the validation-only key for adapters', function()
    local c = config.for_framework(cfg({ training = { ga = 4 } }))
    assert.is_nil(c.training.ga)
  end)
end)

describe('tp.config.check_types', function()
  it('names the key path, the expected type and the value', function()
    local f = config.check_types(cfg({ training = { gbs = '64x' } }))
    assert.are.equal(1, #f)
    assert.are.equal('training.gbs: integer expected, got string "64x"', f[1].message)
    assert.are.equal('training.gbs', f[1].key)
  end)

  it('refuses unknown keys and values outside an enumeration', function()
    local f = config.check_types(cfg({ training = { learning_rate = 1 },
                                       system = { recompute = 'sometimes' } }))
    assert.are.equal('system.recompute: \'sometimes\' is not one of none, selective, full',
      f[1].message)
    assert.are.equal('training.learning_rate: unknown key', f[2].message)
    assert.are.equal('bogus: unknown key', config.check_types({ bogus = 1 })[1].message)
    assert.are.equal('training.lr: finite number expected, got number nan',
      config.check_types({ training = { lr = 0 / 0 } })[1].message)
  end)

  it('accepts integral floats as integers', function()
    local c = cfg({ training = { gbs = 64.0 } })
    assert.are.same({}, config.check_types(c))
    assert.are.equal('integer', math.type(c.training.gbs))
  end)
end)

describe('tp.config.validate', function()
  it('accepts the flagship and derives ga', function()
    local r = config.validate(cfg(), { hardware = 'h100-sxm' })
    assert.is_true(r.ok)
    assert.are.equal(4, r.ga)
    assert.are.equal(4, r.config.training.ga)
    assert.is_truthy(r.memory)
  end)

  it('derives dp from the GPU count', function()
    local c = cfg()
    c.parallelism.dp = nil
    c.parallelism.tp = 2
    local r = config.validate(c)
    assert.is_true(r.ok)
    assert.are.equal(4, r.config.parallelism.dp)
  end)

  it('rule: tp*pp*cp*dp must equal the GPUs', function()
    local r = config.validate(cfg({ parallelism = { tp = 2 } }))
    assert.is_false(r.ok)
    assert.are.equal('parallelism: tp*pp*cp*dp = 2*1*1*8 = 16, but nodes 1 x gpus_per_node 8 '
      .. '= 8 GPUs', errors(r)[1].message)
    local c = cfg()
    c.parallelism.dp = nil
    c.parallelism.tp, c.parallelism.pp = 4, 4
    assert.is_truthy(find(config.validate(c), 'error', 'parallelism: tp*pp*cp = 4*4*1 = 16 does '
      .. 'not divide the 8 GPUs (nodes 1 x gpus_per_node 8)'))
  end)

  it('rule: gbs must equal mbs*dp*ga', function()
    local r = config.validate(cfg({ training = { ga = 3 } }))
    assert.are.equal('training.gbs: 64, but mbs*dp*ga = 2*8*3 = 48', errors(r)[1].message)
    local r2 = config.validate(cfg({ training = { gbs = 60 } }))
    assert.are.equal('training.gbs: 60 is not a multiple of mbs*dp = 2*8 = 16 (gradient '
      .. 'accumulation must be a whole number)', errors(r2)[1].message)
    assert.is_true(config.validate(cfg({ training = { ga = 4 } })).ok)
  end)

  it('rule: tp must divide the attention heads and the KV heads', function()
    local c = cfg({ parallelism = { tp = 8, dp = 1 } })
    assert.is_true(config.validate(c).ok)
    local q = cfg({ model = 'qwen2.5-7b', parallelism = { tp = 8, dp = 1 } })
    local r = config.validate(q)
    assert.are.equal('parallelism.tp: 8 does not divide the 28 attention heads and 4 KV heads '
      .. 'of qwen2.5-7b', errors(r)[1].message)
    local c3 = cfg({ gpus_per_node = 3, parallelism = { tp = 3, dp = 1 },
                     training = { gbs = 64, mbs = 2 } })
    assert.is_truthy(find(config.validate(c3), 'error', 'parallelism.tp: 3 does not divide the '
      .. '32 attention heads and 8 KV heads of llama3.1-8b'))
  end)

  it('rule: pp must divide the layers', function()
    local r = config.validate(cfg({ gpus_per_node = 3, parallelism = { pp = 3, dp = 1 } }))
    assert.is_truthy(find(r, 'error', 'parallelism.pp: 3 does not divide the 32 layers of '
      .. 'llama3.1-8b'))
    assert.is_true(config.validate(cfg({ parallelism = { pp = 4, dp = 2 } })).ok)
  end)

  it('rule: a sequence longer than the model positions is a warning', function()
    local row = require('tp.models').get('llama3.1-8b')
    row.max_position_embeddings = 1024
    local r = config.validate(cfg({ model = row }))
    local f = find(r, 'warning', 'training.seq_len: 2048 is above the 1024 positions '
      .. 'llama3.1-8b was trained for')
    assert.is_truthy(f)
    assert.are.equal('training.seq_len', f.key)
    assert.is_true(r.ok)
  end)

  it('rule: precision must be known', function()
    local r = config.validate(cfg({ training = { precision = 'fp4' } }))
    assert.are.equal("training.precision: 'fp4' is not one of bf16, fp16, fp8",
      errors(r)[1].message)
  end)

  it('rule: fp8 only on hardware with an FP8 peak', function()
    local c = cfg({ training = { precision = 'fp8', fp8_recipe = 'delayed' } })
    local r = config.validate(c, { hardware = 'mi250x' })
    assert.is_truthy(find(r, 'error', 'training.precision: fp8 needs a GPU with FP8 tensor '
      .. 'cores; mi250x'))
    assert.is_true(config.validate(c, { hardware = 'h100-sxm' }).ok)
    assert.is_true(config.validate(c, { hardware = 'mi300x' }).ok)
  end)

  it('rule: the memory estimate is a warning when tight or above, info when it fits',
    function()
      local hv = config.validate(cfg(), { hardware = 'h100-sxm' })
      local f = find(hv, 'warning', 'memory: estimate')
      assert.is_truthy(f)
      assert.is_truthy(f.message:find('of 80.0 GiB (94%): tight', 1, true))
      local big = config.validate(cfg({ parallelism = { distributed_optimizer = false } }),
        { hardware = 'h100-sxm' })
      assert.is_truthy(find(big, 'warning', 'exceeds'))
      assert.is_true(big.ok)
      assert.is_truthy(find(config.validate(cfg(), { hardware = 'mi300x' }), 'info',
        '(39%): fits'))
    end)

  it('rule: the framework adapter must accept the config', function()
    local c = cfg({ system = { cuda_graphs = true, recompute = 'full' } })
    local r = config.validate(c, { framework = 'megatron' })
    assert.is_truthy(find(r, 'error', "megatron: system.cuda_graphs: Megatron refuses CUDA "
      .. "graphs with system.recompute = 'full'"))
    assert.is_true(config.validate(cfg(), { framework = 'megatron' }).ok)
  end)

  it('requires the training basics and positive sizes', function()
    local c = cfg()
    c.training.lr = nil
    assert.are.equal('training.lr: required', errors(config.validate(c))[1].message)
    assert.are.equal('training.mbs: must be >= 1, got 0',
      errors(config.validate(cfg({ training = { mbs = 0 } })))[1].message)
  end)
end)

describe('tp.config.load', function()
  local fixture = function(name)
    return h.fixture('config/' .. name)
  end

  it('loads the unified layout with ${VAR:-default} typed by what it expands to', function()
    local spec = assert(config.load(fixture('unified.yaml'), { env = {} }))
    assert.are.equal('llama-from-yaml', spec.name)
    assert.are.equal(64, spec.training.gbs)
    assert.are.equal('integer', math.type(spec.training.gbs))
    assert.are.equal('primus', spec.platforms.amd.framework)
    local spec2 = assert(config.load(fixture('unified.yaml'), { env = { GBS = '128' } }))
    assert.are.equal(128, spec2.training.gbs)
  end)

  it('reports an expanded value of the wrong type with its key path', function()
    local s, err, code = config.load(fixture('unified.yaml'), { env = { GBS = '64x' } })
    assert.is_nil(s)
    assert.are.equal('EINVAL', code)
    assert.are.equal(fixture('unified.yaml') .. ': training.gbs: integer expected, got string '
      .. '"64x"', err)
  end)

  it('lists every type error of a unified file', function()
    local _, err, code = config.load(fixture('unified_bad_types.yaml'))
    assert.are.equal('EINVAL', code)
    assert.is_truthy(err:find('training.gbs: integer expected, got string "64x"', 1, true))
    assert.is_truthy(err:find('training.lr: finite number expected, got string "fast"', 1,
      true))
    assert.is_truthy(err:find('parallelism.bogus: unknown key', 1, true))
  end)

  it('loads the tprimat-era example config, one experiment per model', function()
    local all = assert(config.load_all('examples/tprimat/config.yaml', { env = {} }))
    assert.are.equal('tprimat', all.format)
    assert.are.same({ 'llama', 'qwen' }, all.order)
    local s = all.specs.llama
    assert.are.equal('llama3.1-8b', s.model)
    assert.are.equal('identical_config', s.methodology)
    assert.are.same({ seed = 42, mbs = 1, gbs = 128, seq_len = 2048, iters = 50, lr = 3e-4,
      warmup = 10, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, precision = 'bf16',
      dataset = { path = '/data/bc/llama3.1-8b', tokenizer = 'meta-llama/Llama-3.1-8B' },
      ga = 64 }, s.training)
    -- Parallelism equal on both platforms moved to the shared config.
    assert.are.same({ tp = 4, pp = 1, dp = 2 }, s.parallelism)
    assert.are.equal('nemo', s.platforms.nvd.framework)
    assert.are.equal('h100-sxm', s.platforms.nvd.hardware)
    assert.are.equal('mi300x', s.platforms.amd.hardware)
    assert.are.equal('full', s.platforms.nvd.system.recompute)
    assert.are.equal('none', s.platforms.amd.system.recompute)
    assert.are.equal('expandable_segments:True', s.platforms.nvd.env.PYTORCH_CUDA_ALLOC_CONF)
    assert.are.equal('/workspace/Primus', s.platforms.amd.paths.framework_dir)
    assert.are.equal(3, s.repeats)
    assert.are.equal('./output/tprimat', s.results)
    assert.are.equal(8, s.gpus_per_node)
    assert.are.equal('qwen2.5-7b', all.specs.qwen.model)
  end)

  it('makes a valid experiment of the example config #slow', function()
    local spec = assert(config.load('examples/tprimat/config.yaml', { model = 'llama',
      env = { PRIMUS_PATH = '/opt/primus' } }))
    assert.are.equal('/opt/primus', spec.platforms.amd.paths.framework_dir)
    local exp = require('tp.experiment').new(spec)
    local plan = exp:plan({ results = h.tmpdir() })
    assert.is_true(plan.ok)
    assert.are.equal(6, #plan.runs)
    local mp = assert(config.load('examples/tprimat/config.yaml', { model = 'qwen2.5-7b',
      methodology = 'maximum_performance', env = {} }))
    assert.are.equal(1, mp.platforms.amd.parallelism.tp)
    assert.are.equal(4, mp.platforms.nvd.parallelism.tp)
    assert.are.equal(16, mp.platforms.amd.training.ga)
  end)

  it('needs a model choice when the file has several', function()
    local s, err, code = config.load('examples/tprimat/config.yaml', { env = {} })
    assert.is_nil(s)
    assert.are.equal('EINVAL', code)
    assert.is_truthy(err:find('describes 2 models (llama, qwen); choose one with opts.model', 1,
      true))
    local _, err2, code2 = config.load('examples/tprimat/config.yaml', { model = 'mistral' })
    assert.are.equal('ENOENT', code2)
    assert.is_truthy(err2:find("models: no model 'mistral' (the file has: llama, qwen)", 1, true))
  end)

  it('reports every mistake of a tprimat file with its key path', function()
    local _, err, code = config.load(fixture('tprimat_errors.yaml'))
    assert.are.equal('EINVAL', code)
    for _, text in ipairs({
      'training.data.global_batch_size: integer expected, got string "64x"',
      'training.duration: max_steps 50 and train_iters 60 disagree',
      "training.optimizer.type: 'sgd' is not supported",
      'training.precision.fp8_param: true has no unified key',
      "hardware.platforms.amd.framework: unknown framework 'deepspeed'",
      "hardware.platforms.amd.gpu_model: 'MI999Z' is not in the GPU catalog",
      'hardware.platforms.nvidia.memory_per_gpu_gb: 94, but the catalog gives 80 GB for h100-sxm',
      'models.llama.num_layers: 30, but llama3.1-8b has 32',
    }) do
      assert.is_truthy(err:find(text, 1, true), text)
    end
  end)

  it('keeps per-platform precision so that the methodology can refuse it', function()
    local spec = assert(config.load(fixture('tprimat_fp8_mismatch.yaml')))
    assert.are.equal('fp8', spec.platforms.nvd.training.precision)
    assert.are.equal('bf16', spec.platforms.amd.training.precision)
    local ok, err = pcall(require('tp.experiment').new, spec)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('platforms.nvd.training.precision: identical_config fixes '
      .. 'training.precision on every platform (experiment: "bf16", nvd: "fp8")', 1, true))
  end)

  it('fails cleanly on broken files, naming the file and line', function()
    local cases = {
      { 'truncated.yaml', 'EPARSE', fixture('truncated.yaml') .. ':5:1:' },
      { 'binary.yaml', 'EPARSE', fixture('binary.yaml') .. ':1:1: NUL byte' },
      { 'empty.yaml', 'EPARSE', fixture('empty.yaml') .. ':1:1: empty input' },
      { 'list.yaml', 'EINVAL', 'a mapping expected at the top level, got a list' },
      { 'missing.yaml', 'ENOENT', fixture('missing.yaml') },
    }
    for _, c in ipairs(cases) do
      local s, err, code = config.load(fixture(c[1]))
      assert.is_nil(s)
      assert.are.equal(c[2], code, c[1])
      assert.is_truthy(err:find(c[3], 1, true), err)
    end
  end)

  it('fails on a variable without a default that is not set', function()
    local dir = h.tmpdir()
    h.write(dir .. '/c.yaml', 'name: x\nmodel: llama3.1-8b\npaths: { data: "${NO_SUCH_VAR}" }\n')
    local s, err, code = config.load(dir .. '/c.yaml', { env = {} })
    assert.is_nil(s)
    assert.are.equal('ENOENT', code)
    assert.is_truthy(err:find('environment variable NO_SUCH_VAR is not set', 1, true))
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      config.load(42)
    end, 'tp.config.load: path must be a string, got number')
    assert.has_error(function()
      config.load('x.yaml', { colour = 1 })
    end, "tp.config.load: unknown option 'colour'")
  end)
end)
