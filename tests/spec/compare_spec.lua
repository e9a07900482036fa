-- tp.compare: ratios between groups with bootstrap CIs and Welch's test on the fair fixture
-- pair, the hyperfine-style warnings on small records written here, the basis of each ratio,
-- and the terminal rendering.
local h = require('helper')
local compare = require('tp.compare')
local results = require('tp.results')
local stats = require('tp.stats')
local metrics = require('tp.metrics')
local json = require('tp.json')

local ROOT = h.fixture('results')

local function metric(res, name)
  for _, m in ipairs(res.metrics) do
    if m.name == name then
      return m
    end
  end
end

local function group(m, value)
  for _, s in ipairs(m.groups) do
    if s.value == value then
      return s
    end
  end
end

local function warnings_of(res, kind)
  local out = {}
  for _, w in ipairs(res.warnings) do
    if w.kind == kind then
      out[#out + 1] = w
    end
  end
  return out
end

local function near(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-12) * math.max(math.abs(b), 1e-300)
end

-- Minimal records with chosen throughput: values = {{platform, tokens/s/GPU, repeat, step CV,
-- gpu_info}, ...}.
local function synthetic(values)
  local dir = h.tmpdir()
  for i, v in ipairs(values) do
    local tps = v[2]
    local doc = {
      schema = 'tplua.run/1', platform = v[1], framework = 'megatron', run_id = v[1] .. i,
      ['repeat'] = v[3], model = 'llama3.1-8b',
      gpu_info = v[5] or { device_name = v[1] == 'amd' and 'AMD Instinct MI300X'
        or 'NVIDIA H100 80GB HBM3' },
      training_config = { num_gpus = 8, global_batch_size = 128, sequence_length = 2048,
        precision = 'bf16' },
      performance_metrics = { tokens_per_second_per_gpu = tps, tokens_per_second = tps * 8,
        avg_step_time_seconds = 128 * 2048 / (tps * 8), cv_step_time = v[4] or 0.01 },
    }
    h.write(string.format('%s/r%02d.json', dir, i), assert(json.encode(doc)))
  end
  return assert(results.load(dir))
end

describe('tp.compare.compare on the fair pair', function()
  local set, res

  setup(function()
    set = assert(results.load(ROOT .. '/fair'))
    res = assert(compare.compare(set, { by = 'platform', baseline = 'nvd', seed = 42,
      n_boot = 10000 }))
  end)

  it('orders the groups baseline first and counts their runs', function()
    assert.are.equal('nvd', res.baseline)
    assert.are.equal('nvd', res.groups[1].value)
    assert.are.equal('amd', res.groups[2].value)
    assert.are.equal(3, res.groups[2].n)
    assert.are.same({ 'amd-primus-r1', 'amd-primus-r2', 'amd-primus-r3' },
      { table.unpack(res.groups[2].runs) })
  end)

  it('computes per-group statistics of each metric from the runs', function()
    local m = metric(res, 'tokens_per_s_per_gpu')
    local amd = group(m, 'amd')
    local xs = set:where({ platform = 'amd' }):values('tokens_per_s_per_gpu')
    assert.are.equal(3, amd.n)
    assert.is_true(near(amd.mean, stats.mean(xs)))
    assert.is_true(near(amd.stddev, stats.stddev(xs)))
    local ci = stats.bootstrap_ci(xs, { seed = 42, resamples = 10000 })
    assert.are.equal(ci.lo, amd.ci.lo)
    assert.are.equal(ci.hi, amd.ci.hi)
  end)

  it('gives the ratio to the baseline with a seeded bootstrap CI and Welch p', function()
    local m = metric(res, 'tokens_per_s_per_gpu')
    local r = m.ratios[1]
    local a = set:where({ platform = 'amd' }):values('tokens_per_s_per_gpu')
    local n = set:where({ platform = 'nvd' }):values('tokens_per_s_per_gpu')
    assert.are.equal('amd', r.group)
    assert.are.equal('nvd', r.baseline)
    assert.is_true(near(r.ratio, stats.mean(a) / stats.mean(n)))
    assert.is_true(r.ratio > 1.14 and r.ratio < 1.15)
    local ci = stats.bootstrap_ratio_ci(a, n, { seed = 42, resamples = 10000 })
    assert.are.equal(ci.lo, r.ci.lo)
    assert.are.equal(ci.hi, r.ci.hi)
    assert.is_true(r.ci.lo < r.ratio and r.ratio < r.ci.hi)
    assert.are.equal(stats.welch(a, n).p, r.p)
    assert.is_true(r.significant)
    assert.is_true(r.better)
    local st = metric(res, 'step_time').ratios[1]
    assert.is_true(st.ratio < 1)
    assert.is_true(st.better) -- lower is better for step time
  end)

  it('is reproducible with its seed and changes with another', function()
    local again = assert(compare.compare(set, { seed = 42 }))
    assert.are.same(metric(res, 'tokens_per_s_per_gpu').ratios[1].ci,
      metric(again, 'tokens_per_s_per_gpu').ratios[1].ci)
    -- With 3 runs a side the bootstrap has few distinct means (3^3 each) and other seeds land
    -- on the same percentiles; 8 runs a side make the seed visible.
    local vals = {}
    for i = 1, 8 do
      vals[#vals + 1] = { 'nvd', 1000 + 7 * i, i }
      vals[#vals + 1] = { 'amd', 1100 + 11 * ((i * 5) % 8), i }
    end
    local many = synthetic(vals)
    local a = assert(compare.compare(many, { seed = 42, metrics = { 'tokens_per_s_per_gpu' } }))
    local b = assert(compare.compare(many, { seed = 7, metrics = { 'tokens_per_s_per_gpu' } }))
    assert.are_not.same(a.metrics[1].ratios[1].ci, b.metrics[1].ratios[1].ci)
  end)

  it('computes MFU against the precision-matched dense peak, and says so', function()
    local m = metric(res, 'mfu')
    local run = set:where({ id = 'amd-primus-r1' })[1]
    local want = metrics.mfu({ tokens_per_s = run.tokens_per_s, gpus = 8, model = 'llama3.1-8b',
      seq_len = 2048, precision = 'bf16', hardware = 'mi300x', convention = 'megatron' })
    local amd = group(m, 'amd')
    assert.are.equal(3, amd.n)
    local mine = compare.compare(set:where({ id = 'amd-primus-r1' }), { metrics = { 'mfu' } })
    assert.is_true(near(group(metric(mine, 'mfu'), 'amd').mean, want.mfu))
    assert.are.equal('mi300x bf16 1307.4 TFLOP/s dense', res.basis.peak.amd)
    assert.are.equal('h100-sxm bf16 989.4 TFLOP/s dense', res.basis.peak.nvd)
    assert.are.equal('megatron', res.basis.flops.convention)
    assert.are.equal(want.flops_per_token, res.basis.flops.flops_per_token['llama3.1-8b @ 2048'])
  end)

  it('states the basis of every ratio', function()
    local b = res.basis
    assert.are.equal('identical_config', b.methodology)
    assert.is_truthy(b.tokens:find('global batch size x sequence length / mean step time', 1,
      true))
    assert.are.equal('mser-5, window starts at iteration 30', b.steady_state.nvd)
    assert.is_truthy(b.energy.amd:find('estimated: 8 GPUs x mi300x TDP 750 W', 1, true))
    assert.is_truthy(b.statistics:find('10000 resamples, seed 42', 1, true))
    assert.are.equal(1e12, b.train_tokens)
  end)

  it('leaves cost out without a price, and computes it with one (labelled an assumption)',
    function()
      local m = metric(res, 'cost_per_1t_tokens')
      assert.are.equal(0, group(m, 'amd').n)
      assert.are.equal(2, #warnings_of(res, 'not_computed'))
      local priced = assert(compare.compare(set, { metrics = { 'cost_per_1t_tokens' },
        prices = { amd = 2.0, ['h100-sxm'] = 3.0 } }))
      local cm = metric(priced, 'cost_per_1t_tokens')
      local run = set:where({ id = 'amd-primus-r2' })[1]
      local want = 8 * 2.0 / 3600 / run.tokens_per_s * 1e12
      local found = false
      for _, id in ipairs(group(cm, 'amd').runs) do
        found = found or id == 'amd-primus-r2'
      end
      assert.is_true(found)
      assert.is_true(near(group(cm, 'amd').min, want, 1e-3) or near(group(cm, 'amd').max, want,
        1e-3) or (group(cm, 'amd').min < want and want < group(cm, 'amd').max))
      assert.is_truthy(priced.basis.price.amd:find('2 USD per GPU-hour (given; an assumption)', 1,
        true))
      assert.is_truthy(priced.basis.price.nvd:find('3 USD per GPU-hour', 1, true))
    end)

  it('computes time to train from tokens/s', function()
    local m = metric(res, 'time_to_train')
    local xs = set:where({ platform = 'nvd' }):map(function(r)
      return 1e12 / r.tokens_per_s / 3600
    end)
    assert.is_true(near(group(m, 'nvd').mean, stats.mean(xs), 1e-12))
  end)

  it('gives no variation warnings for quiet repeats', function()
    assert.are.equal(0, #warnings_of(res, 'high_cv'))
    assert.are.equal(0, #warnings_of(res, 'outlier'))
    assert.are.equal(0, #warnings_of(res, 'few_repeats'))
  end)

  it('encodes as JSON', function()
    local text = assert(json.encode(res))
    local back = assert(json.decode(text))
    assert.are.equal('nvd', back.baseline)
  end)

  it('renders a terminal table with the ratio, its CI and the basis', function()
    local text = compare.format(res)
    assert.is_truthy(text:find('comparison by platform, baseline nvd', 1, true))
    assert.is_truthy(text:find('tokens/s/GPU (tokens/s, higher is better)', 1, true))
    local r = metric(res, 'tokens_per_s_per_gpu').ratios[1]
    assert.is_truthy(text:find(string.format('%.3f better  [%.3f, %.3f]', r.ratio, r.ci.lo,
      r.ci.hi), 1, true))
    assert.is_truthy(text:find('1 (baseline)', 1, true))
    assert.is_truthy(text:find('basis:', 1, true))
    assert.is_truthy(text:find('peak amd: mi300x bf16 1307.4 TFLOP/s dense', 1, true))
  end)
end)

describe('tp.compare.compare warnings', function()
  it('warns about too few repeats, with no CI for a single run', function()
    local set = assert(results.load(ROOT .. '/unfair'))
    local res = assert(compare.compare(set, { metrics = { 'tokens_per_s_per_gpu' } }))
    assert.are.equal(2, #warnings_of(res, 'few_repeats'))
    local r = metric(res, 'tokens_per_s_per_gpu').ratios[1]
    assert.is_nil(r.ci)
    assert.is_nil(r.p)
    assert.is_truthy(compare.format(res):find('n/a', 1, true))
  end)

  it('warns about a high coefficient of variation', function()
    local set = synthetic({ { 'nvd', 1000, 1 }, { 'nvd', 1200, 2 }, { 'nvd', 900, 3 },
      { 'amd', 1100, 1 }, { 'amd', 1102, 2 }, { 'amd', 1101, 3 } })
    local res = assert(compare.compare(set, { metrics = { 'tokens_per_s_per_gpu', 'step_time' } }))
    local w = warnings_of(res, 'high_cv')
    assert.are.equal(1, #w) -- once for the throughput family, for nvd only
    assert.are.equal('nvd', w[1].group)
    assert.is_truthy(w[1].message:find('nvd: tokens/s/GPU varies by 14.', 1, true))
  end)

  it('warns about a slow first run (hyperfine) rather than a plain outlier', function()
    local set = synthetic({ { 'nvd', 800, 1 }, { 'nvd', 1000, 2 }, { 'nvd', 1001, 3 },
      { 'nvd', 999, 4 }, { 'amd', 1100, 1 }, { 'amd', 1101, 2 }, { 'amd', 1099, 3 } })
    local res = assert(compare.compare(set, { metrics = { 'tokens_per_s_per_gpu' } }))
    local w = warnings_of(res, 'first_run')
    assert.are.equal(1, #w)
    assert.are.equal('nvd1', w[1].run)
    assert.are.equal(0, #warnings_of(res, 'outlier'))
  end)

  it('warns about outliers by modified z-score', function()
    local set = synthetic({ { 'nvd', 1000, 1 }, { 'nvd', 1001, 2 }, { 'nvd', 999, 3 },
      { 'nvd', 700, 4 }, { 'nvd', 1000.5, 5 }, { 'amd', 1100, 1 }, { 'amd', 1101, 2 },
      { 'amd', 1099, 3 } })
    local res = assert(compare.compare(set, { metrics = { 'tokens_per_s_per_gpu' } }))
    local w = warnings_of(res, 'outlier')
    assert.are.equal(1, #w)
    assert.is_truthy(w[1].message:find('nvd4 700', 1, true))
  end)

  it('does not call 0.3% an outlier among near-identical runs', function()
    local set = synthetic({ { 'nvd', 1000, 1 }, { 'nvd', 1000.2, 2 }, { 'nvd', 1003, 3 },
      { 'amd', 1100, 1 }, { 'amd', 1101, 2 }, { 'amd', 1099, 3 } })
    local res = assert(compare.compare(set, { metrics = { 'tokens_per_s_per_gpu' } }))
    assert.are.equal(0, #warnings_of(res, 'outlier'))
  end)

  it('warns about unstable step times inside a run', function()
    local set = synthetic({ { 'nvd', 1000, 1, 0.25 }, { 'amd', 1100, 1 } })
    local res = assert(compare.compare(set, { metrics = { 'step_time' } }))
    local w = warnings_of(res, 'unstable_steps')
    assert.are.equal(1, #w)
    assert.is_truthy(w[1].message:find('nvd1: step time varies by 25.0%', 1, true))
  end)

  it('says why a metric could not be computed', function()
    local set = assert(results.load(ROOT .. '/tprimat'))
    local res = assert(compare.compare(set, { metrics = { 'mfu' } }))
    local w = warnings_of(res, 'not_computed')
    assert.are.equal(1, #w)
    assert.is_truthy(w[1].message:find('MFU not computed for 4 runs: the record names no model',
      1, true))
  end)
end)

describe('tp.compare: the GPU of a run', function()
  local function peaks(set, opts)
    opts = opts or {}
    opts.metrics = { 'mfu' }
    local res = assert(compare.compare(set, opts))
    return res.basis.peak, res
  end

  it('takes the catalog id the record names (gpu_info.hardware) before the device name',
    function()
      local set = synthetic({
        -- a device HIP could only call 'AMD Radeon Graphics', the id from the campaign
        { 'amd', 3000, 1, 0.01, { device_name = 'AMD Radeon Graphics', device_count = 8,
          hardware = 'mi325x' } },
        -- the id wins over a name that would match another row
        { 'nvd', 3000, 1, 0.01, { device_name = 'NVIDIA H100 80GB HBM3', hardware = 'h200' } },
      })
      local p = peaks(set)
      assert.are.equal('mi325x bf16 1307.4 TFLOP/s dense', p.amd)
      assert.are.equal('h200 bf16 989.4 TFLOP/s dense', p.nvd)
      -- the energy estimate uses the same row (mi325x TDP 1000 W, not the MI300X's 750 W)
      local res = assert(compare.compare(set, { metrics = { 'energy_per_token' } }))
      assert.is_truthy(res.basis.energy.amd:find('mi325x TDP 1000 W', 1, true),
        res.basis.energy.amd)
    end)

  it('still matches the device name when the record names no id', function()
    local set = synthetic({
      { 'amd', 3000, 1, 0.01, { device_name = 'AMD Instinct MI300X', hardware = json.null } },
      -- the catalog's own name, as tplua extract --gpu a100-sxm writes it
      { 'nvd', 3000, 1, 0.01, { device_name = 'NVIDIA A100 SXM4 80GB' } },
    })
    local p = peaks(set)
    assert.are.equal('mi300x bf16 1307.4 TFLOP/s dense', p.amd)
    assert.are.equal('a100-sxm bf16 312.0 TFLOP/s dense', p.nvd)
  end)

  it('lets opts.hardware override the recorded id', function()
    local set = synthetic({
      { 'amd', 3000, 1, 0.01, { device_name = 'AMD Instinct MI300X', hardware = 'mi300x' } },
      { 'nvd', 3000, 1, 0.01, { device_name = 'NVIDIA H100 80GB HBM3', hardware = 'h100-sxm' } },
    })
    local p = peaks(set, { hardware = { amd = 'mi325x' } })
    assert.are.equal('mi325x bf16 1307.4 TFLOP/s dense', p.amd)
    assert.are.equal('h100-sxm bf16 989.4 TFLOP/s dense', p.nvd)
  end)

  it('reports a recorded id the catalog does not know rather than guessing from the name',
    function()
      local set = synthetic({
        { 'amd', 3000, 1, 0.01, { device_name = 'AMD Instinct MI300X', hardware = 'mi999x' } },
        { 'nvd', 3000, 1, 0.01 },
      })
      local p, res = peaks(set)
      assert.is_nil(p.amd)
      assert.are.equal('h100-sxm bf16 989.4 TFLOP/s dense', p.nvd)
      local w = warnings_of(res, 'not_computed')
      assert.are.equal(1, #w)
      assert.is_truthy(w[1].message:find("gpu_info.hardware 'mi999x' is not in tp.hardware", 1,
        true), w[1].message)
    end)
end)

describe('tp.compare.compare options', function()
  local set

  setup(function()
    set = assert(results.load(ROOT .. '/fair'))
  end)

  it('takes nvd as the platform baseline by default, else the first group', function()
    assert.are.equal('nvd', assert(compare.compare(set)).baseline)
    local fw = assert(compare.compare(set, { by = 'framework' }))
    assert.are.equal('megatron', fw.baseline)
    local other = assert(compare.compare(set, { baseline = 'amd' }))
    assert.are.equal('amd', other.baseline)
    assert.is_true(metric(other, 'tokens_per_s_per_gpu').ratios[1].ratio < 1)
  end)

  it('matches a baseline given as text to a numeric group', function()
    local res = assert(compare.compare(set, { by = 'repeat', baseline = '2',
      metrics = { 'step_time' } }))
    assert.are.equal(2, res.baseline)
  end)

  it('fails on an unknown baseline or an empty set', function()
    local res, err, code = compare.compare(set, { baseline = 'tpu' })
    assert.is_nil(res)
    assert.are.equal('EINVAL', code)
    assert.are.equal("compare: no group 'tpu' for platform (groups: amd, nvd)", err)
    local empty = set:where({ platform = 'cpu' })
    local r2, err2 = compare.compare(empty)
    assert.is_nil(r2)
    assert.are.equal('compare: no runs to compare', err2)
  end)

  it('warns when there is a single group', function()
    local res = assert(compare.compare(set:where({ platform = 'amd' })))
    assert.are.equal(1, #warnings_of(res, 'single_group'))
    assert.are.equal(0, #metric(res, 'step_time').ratios)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      compare.compare(set, { metrics = { 'speed' } })
    end)
    assert.has_error(function()
      compare.compare(set, { seeds = 1 })
    end, "tp.compare: unknown option 'seeds'")
    assert.has_error(function()
      compare.compare(set, { n_boot = 0 })
    end, 'tp.compare: option n_boot must be in [1, 1e7], got 0')
    assert.has_error(function()
      compare.compare({})
    end, 'tp.compare: result set (tp.results.load) expected, got table')
    assert.has_error(function()
      compare.format(5)
    end, 'tp.compare.format: comparison result expected')
  end)
end)
