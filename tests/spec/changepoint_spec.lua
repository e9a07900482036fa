-- tp.stats.change_points (E-divisive means, engine/changepoint) and
-- tp.stats.bootstrap_pct_change_ci through the public face: indices, fields, determinism, options,
-- bad input.
local stats = require('tp.stats')

-- A seeded series of n nights: level 1000, noise CV `cv`, the level times (1 + size) from each
-- step's 1-based index on. Lua 5.4's generator gives the same values for a seed everywhere.
local function series(n, cv, steps, seed)
  math.randomseed(seed)
  local xs, level, j = {}, 1000, 1
  for i = 1, n do
    if steps[j] and i == steps[j][1] then
      level = level * (1 + steps[j][2])
      j = j + 1
    end
    local g = math.sqrt(-2 * math.log(1 - math.random())) * math.cos(2 * math.pi * math.random())
    xs[i] = level * (1 + cv * g)
  end
  return xs
end

local function mean(xs, a, b)
  local s = 0
  for i = a, b do
    s = s + xs[i]
  end
  return s / (b - a + 1)
end

describe('tp.stats.change_points', function()
  it('finds one step at the first night after it, with its statistics', function()
    local xs = series(60, 0.01, { { 31, -0.04 } }, 3)
    local cps = assert(stats.change_points(xs))
    assert.are.equal(1, #cps)
    local c = cps[1]
    assert.are.equal(31, c.index)
    assert.is_true(math.abs(c.mean_before - mean(xs, 1, 30)) < 1e-9)
    assert.is_true(math.abs(c.mean_after - mean(xs, 31, 60)) < 1e-9)
    assert.is_true(c.p < 1e-6)
    assert.is_true(c.t < 0)
    assert.is_true(c.stat > 0)
    assert.is_true(c.mean_after / c.mean_before - 1 < -0.03)
  end)

  it('finds two steps, up then down, each against its neighbouring segments', function()
    local xs = series(90, 0.01, { { 31, 0.05 }, { 61, -0.03 } }, 4)
    local cps = assert(stats.change_points(xs))
    assert.are.equal(2, #cps)
    assert.is_true(math.abs(cps[1].index - 31) <= 1)
    assert.is_true(math.abs(cps[2].index - 61) <= 1)
    local i1, i2 = cps[1].index, cps[2].index
    assert.is_true(math.abs(cps[1].mean_after - mean(xs, i1, i2 - 1)) < 1e-9)
    assert.is_true(math.abs(cps[2].mean_before - mean(xs, i1, i2 - 1)) < 1e-9)
    assert.is_true(cps[1].t > 0 and cps[2].t < 0)
    -- max_points keeps the strongest.
    local one = assert(stats.change_points(xs, { max_points = 1 }))
    assert.are.equal(1, #one)
    assert.is_true(math.abs(one[1].index - 31) <= 1)
  end)

  it('reports nothing on noise, on a constant series and on a short one', function()
    local alarms = 0
    for seed = 1, 40 do
      alarms = alarms + #assert(stats.change_points(series(80, 0.02, {}, 100 + seed)))
    end
    assert.is_true(alarms <= 2)
    local flat = {}
    for i = 1, 40 do
      flat[i] = 7.5
    end
    assert.are.same({}, stats.change_points(flat))
    -- 9 values with min_size 5: too short to split, even with an obvious step.
    assert.are.same({}, stats.change_points({ 1, 1, 1, 1, 1, 9, 9, 9, 9 }))
    assert.are.same({}, stats.change_points({}))
    -- min_size 2 allows it.
    local cps = stats.change_points({ 1, 1, 1, 1, 1, 9, 9, 9, 9 }, { min_size = 2 })
    assert.are.equal(1, #cps)
    assert.are.equal(6, cps[1].index)
  end)

  it('is deterministic, and seeded with permutations', function()
    local xs = series(50, 0.01, { { 26, 0.05 } }, 5)
    assert.are.same(stats.change_points(xs), stats.change_points(xs))
    local a = assert(stats.change_points(xs, { permutations = 99, seed = 3 }))
    assert.are.same(a, stats.change_points(xs, { permutations = 99, seed = 3 }))
    assert.are.equal(1, #a)
    assert.are.equal(26, a[1].index)
    -- The smallest permutation p-value: no permutation reached the observed divergence.
    assert.are.equal(0.01, a[1].p)
  end)

  it('rejects NaN and infinite values with nil, message, EINVAL', function()
    local v, err, code = stats.change_points({ 1, 2, 0 / 0, 4, 5, 6, 7, 8, 9, 10 })
    assert.is_nil(v)
    assert.are.equal('EINVAL', code)
    assert.are.equal('change_points: value #3 is NaN', err)
    v, err = stats.change_points({ 1, 2, math.huge })
    assert.is_nil(v)
    assert.are.equal('change_points: value #3 is infinite', err)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      stats.change_points('1 2 3')
    end, 'tp.stats.change_points: values must be an array of numbers, got string')
    assert.has_error(function()
      stats.change_points({ 1, 2 }, { window = 3 })
    end, "tp.stats.change_points: unknown option 'window'")
    assert.has_error(function()
      stats.change_points({ 1, 2 }, { alpha = 1.5 })
    end, 'tp.stats.change_points: option alpha must be in (0, 1), got 1.5')
    assert.has_error(function()
      stats.change_points({ 1, 2 }, { min_size = 1 })
    end, 'tp.stats.change_points: option min_size must be at least 2, got 1')
    assert.has_error(function()
      stats.change_points({ 1, 2 }, { min_size = 2.5 })
    end, "tp.stats.change_points: option 'min_size' must be integer, got float")
  end)
end)

describe('tp.stats.bootstrap_pct_change_ci', function()
  local before = { 100, 101, 99, 100, 102, 98 }
  local after = { 96, 97, 95, 96, 98, 94 }

  it('gives the percent change of the means and a seeded interval around it', function()
    local ci = assert(stats.bootstrap_pct_change_ci(before, after, { seed = 7 }))
    -- means 100 and 96: -4 %.
    assert.is_true(math.abs(ci.estimate - -4) < 1e-12)
    assert.is_true(ci.lo < ci.estimate and ci.estimate < ci.hi)
    assert.is_true(ci.lo > -6 and ci.hi < -2)
    assert.are.same(ci, stats.bootstrap_pct_change_ci(before, after, { seed = 7 }))
    -- The ratio interval of the same resamples, moved to percent.
    local r = stats.bootstrap_ratio_ci(after, before, { seed = 7 })
    assert.is_true(math.abs(ci.lo - 100 * (r.lo - 1)) < 1e-9)
    assert.is_true(math.abs(ci.hi - 100 * (r.hi - 1)) < 1e-9)
  end)

  it('returns nil, message, code for bad data and raises on misuse', function()
    local v, err, code = stats.bootstrap_pct_change_ci({ 0, 0 }, { 1, 2 })
    assert.is_nil(v)
    assert.are.equal('EINVAL', code)
    assert.is_truthy(err:find('^bootstrap_pct_change_ci:'))
    v, err = stats.bootstrap_pct_change_ci({ 1, 0 / 0 }, { 1, 2 })
    assert.is_nil(v)
    assert.is_truthy(err:find('is NaN', 1, true))
    assert.has_error(function()
      stats.bootstrap_pct_change_ci(before, after, { level = 2 })
    end, 'tp.stats.bootstrap_pct_change_ci: option level must be in (0, 1), got 2')
  end)
end)
