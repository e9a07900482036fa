-- tp.methodology: built-in and user-defined methodologies, the cross-platform check and the
-- per-platform override check.
local methodology = require('tp.methodology')
local config = require('tp.config')

local function base()
  return {
    model = 'llama3.1-8b',
    training = { seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500, lr = 3e-4,
                 precision = 'bf16', dataset = 'bc' },
    parallelism = { tp = 1, pp = 1, dp = 8 },
    system = { recompute = 'none' },
    nodes = 1, gpus_per_node = 8,
  }
end

local function contains(list, v)
  for _, x in ipairs(list) do
    if x == v then
      return true
    end
  end
  return false
end

describe('tp.methodology', function()
  it('lists the built-ins and returns copies', function()
    assert.are.same({ 'identical_config', 'maximum_performance' },
      { methodology.list()[1], methodology.list()[2] })
    local m = methodology.get('identical_config')
    m.fixed[1] = 'changed'
    assert.are_not.equal('changed', methodology.get('identical_config').fixed[1])
    local none, err, code = methodology.get('nope')
    assert.is_nil(none)
    assert.are.equal('ENOENT', code)
    assert.is_truthy(err:find("unknown methodology 'nope'", 1, true))
  end)

  it('fixes algorithmic keys and parallelism in identical_config', function()
    local m = methodology.get('identical_config')
    for _, k in ipairs({ 'training.seed', 'training.dataset', 'training.tokenizer', 'training.lr',
      'training.warmup', 'training.decay', 'training.mbs', 'training.gbs', 'training.seq_len',
      'training.iters', 'training.beta1', 'training.precision', 'training.init_std',
      'parallelism.tp', 'parallelism.pp', 'parallelism.dp', 'model' }) do
      assert.is_true(contains(m.fixed, k), k)
    end
    assert.is_true(contains(m.free, 'system.recompute'))
  end)

  it('frees system keys but not the algorithm in maximum_performance', function()
    local m = methodology.get('maximum_performance')
    for _, k in ipairs({ 'parallelism.tp', 'training.mbs', 'system.recompute',
      'system.fused_kernels', 'system.attention', 'training.fp8_recipe' }) do
      assert.is_true(contains(m.free, k), k)
    end
    for _, k in ipairs({ 'training.lr', 'training.gbs', 'training.precision', 'training.seed' }) do
      assert.is_true(contains(m.fixed, k), k)
      assert.is_true(contains(m.algorithmic, k), k)
    end
  end)

  it('reports a fixed key that differs, with every value', function()
    local a, n = base(), base()
    n.training.lr = 1e-4
    local f = methodology.check('identical_config', { amd = a, nvd = n })
    assert.are.equal(1, #f)
    assert.are.equal('error', f[1].severity)
    assert.are.equal('training.lr', f[1].key)
    assert.are.equal(3e-4, f[1].values.amd)
    assert.are.equal(1e-4, f[1].values.nvd)
    assert.is_truthy(f[1].message:find('training.lr differs across platforms (amd = 0.0003, '
      .. 'nvd = 0.0001); identical_config fixes it', 1, true))
  end)

  it('accepts tuned system keys under maximum_performance and notes them', function()
    local a, n = base(), base()
    a.parallelism.tp, a.parallelism.dp = 1, 8
    n.parallelism.tp, n.parallelism.dp = 2, 4
    n.system.recompute = 'full'
    local f = methodology.check('maximum_performance', { amd = a, nvd = n })
    for _, x in ipairs(f) do
      assert.are.equal('info', x.severity)
    end
    assert.is_true(#f >= 3)
    local strict = methodology.check('identical_config', { amd = a, nvd = n })
    assert.are.equal('error', strict[1].severity)
  end)

  it('compares datasets given as tables by value', function()
    local a, n = base(), base()
    a.training.dataset = { path = '/d/x', tokenizer = 't' }
    n.training.dataset = { path = '/d/x', tokenizer = 't' }
    assert.are.same({}, methodology.check('identical_config', { amd = a, nvd = n }))
    n.training.dataset = { path = '/d/y', tokenizer = 't' }
    assert.are.equal('training.dataset',
      methodology.check('identical_config', { amd = a, nvd = n })[1].key)
  end)

  it('refuses overrides of fixed keys with both values', function()
    local errs = methodology.check_overrides('identical_config', base(),
      { amd = { training = { lr = 1e-4 } }, nvd = { system = { recompute = 'full' } } })
    assert.are.equal(1, #errs)
    assert.are.equal('platforms.amd.training.lr: identical_config fixes training.lr on every '
      .. 'platform (experiment: 0.0003, amd: 0.0001)', errs[1])
    -- An override equal to the shared value is harmless.
    assert.are.same({}, methodology.check_overrides('identical_config', base(),
      { amd = { training = { lr = 3e-4 } } }))
    assert.are.same({}, methodology.check_overrides('maximum_performance', base(),
      { amd = { parallelism = { tp = 2, dp = 4 } } }))
  end)

  it('defines user methodologies with sections and checks the paths', function()
    local m = methodology.define({
      name = 'spec_same_tokens', description = 'same data and tokens per step',
      fixed = { 'model', 'training.seed', 'training.gbs', 'training.seq_len' },
      free = { 'parallelism.*', 'system.*', 'training.mbs', 'training.precision' },
    })
    assert.are.equal('spec_same_tokens', m.name)
    assert.is_true(contains(m.free, 'parallelism.sequence_parallel'))
    assert.is_true(contains(m.algorithmic, 'training.gbs'))
    assert.is_false(contains(m.algorithmic, 'training.precision'))
    assert.are.same(m, methodology.get('spec_same_tokens'))
    local a, n = base(), base()
    n.training.precision = 'fp8'
    local f = methodology.check('spec_same_tokens', { amd = a, nvd = n })
    assert.are.equal('info', f[1].severity)
  end)

  it('raises on bad definitions', function()
    assert.has_error(function()
      methodology.define({ name = 'spec_bad1', fixed = { 'training.learning_rate' } })
    end, "tp.methodology.define: 'spec_bad1': fixed[1]: 'training.learning_rate' is not a "
      .. "unified key path (e.g. 'training.lr', 'system.*')")
    assert.has_error(function()
      methodology.define({ name = 'spec_bad2', fixed = { 'training.lr' },
                           free = { 'training.*' } })
    end, "tp.methodology.define: 'spec_bad2': 'training.lr' is both fixed and free")
    assert.has_error(function()
      methodology.define({ name = 'identical_config', fixed = { 'model' } })
    end, "tp.methodology.define: 'identical_config' is already defined")
    assert.has_error(function()
      methodology.define({ name = 'spec_bad3', fixed = {}, colour = 'red' })
    end)
  end)

  it('checks configs through the config module helpers', function()
    assert.are.equal(3e-4, config.get(base(), 'training.lr'))
  end)
end)
