-- tp.stats: the Lua face of engine/stats (values, argument checks, expected failures, defaults).
local stats = require('tp.stats')

local function near(a, b, tol)
  tol = tol or 1e-12
  local scale = math.max(math.abs(b), 1e-300)
  return math.abs(a - b) <= tol * scale
end

-- R's `sleep` data (datasets package): extra sleep for two drugs.
local sleep1 = { 0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0 }
local sleep2 = { 1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4 }

describe('tp.stats', function()
  describe('location and spread', function()
    -- 2 4 4 4 5 5 7 9: mean 5, squared deviations sum to 32, sample variance 32 / 7.
    local xs = { 2, 4, 4, 4, 5, 5, 7, 9 }

    it('computes mean, variance, stddev, median, min, max, cv', function()
      assert.are.equal(5.0, stats.mean(xs))
      assert.is_true(near(stats.variance(xs), 32 / 7))
      assert.is_true(near(stats.stddev(xs), math.sqrt(32 / 7)))
      assert.are.equal(4.5, stats.median(xs))
      assert.are.equal(2, stats.min(xs))
      assert.are.equal(9, stats.max(xs))
      assert.is_true(near(stats.cv(xs), math.sqrt(32 / 7) / 5))
    end)

    it('summarises in one call and omits undefined spread', function()
      local s = stats.summary({ 7, 3, 10, 1, 5, 2, 9, 8, 6, 4 })
      assert.are.equal(10, s.n)
      assert.are.equal(5.5, s.mean)
      assert.is_true(near(s.p5, 1.45))
      assert.is_true(near(s.p95, 9.55))
      assert.is_true(near(s.variance, 82.5 / 9))
      local one = stats.summary({ 3 })
      assert.are.equal(3, one.mean)
      assert.is_nil(one.stddev)
      assert.is_nil(one.variance)
      assert.is_nil(one.cv)
    end)

    it('interpolates percentiles linearly (NumPy default)', function()
      -- numpy.percentile([[10, 7, 4], [3, 2, 1]], 50) == 3.5 (NumPy documentation example).
      assert.are.equal(3.5, stats.percentile({ 10, 7, 4, 3, 2, 1 }, 50))
      local ps = stats.percentile({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, { 5, 25, 75, 95 })
      assert.is_true(near(ps[1], 1.45) and near(ps[2], 3.25))
      assert.is_true(near(ps[3], 7.75) and near(ps[4], 9.55))
    end)
  end)

  describe('failure modes', function()
    it('returns nil, err, EINVAL for NaN, infinities and short samples', function()
      local v, err, code = stats.mean({ 1, 0 / 0, 3 })
      assert.is_nil(v)
      assert.are.equal('EINVAL', code)
      assert.is_truthy(err:find('mean: value #2 is NaN', 1, true))
      v, err = stats.max({ 1, math.huge })
      assert.is_nil(v)
      assert.is_truthy(err:find('max: value #2 is infinite', 1, true))
      v, err, code = stats.stddev({ 1 })
      assert.is_nil(v)
      assert.are.equal('EINVAL', code)
      assert.is_truthy(err:find('stddev: needs at least 2 values, got 1', 1, true))
      v, err = stats.mean({})
      assert.is_nil(v)
      assert.is_truthy(err:find('needs at least 1 value, got 0', 1, true))
      v, err = stats.percentile({ 1, 2 }, 120)
      assert.is_nil(v)
      assert.is_truthy(err:find('percentile 120 outside [0, 100]', 1, true))
      v, err = stats.cv({ -1, 1 })
      assert.is_nil(v)
      assert.is_truthy(err:find('cv: mean is 0', 1, true))
    end)

    it('raises on misuse: non-arrays, non-numbers, bad options', function()
      assert.has_error(function()
        stats.mean('1 2 3')
      end, 'tp.stats.mean: xs must be an array of numbers, got string')
      local ok, err = pcall(stats.median, { 1, '2', 3 })
      assert.is_false(ok)
      assert.is_truthy(err:find('tp.stats.median: xs[2] is string, number expected', 1, true))
      ok, err = pcall(stats.mser, { 1, 2 }, { batchsize = 5 })
      assert.is_false(ok)
      assert.is_truthy(err:find("tp.stats.mser: unknown option 'batchsize'", 1, true))
      ok, err = pcall(stats.bootstrap_ci, { 1, 2 }, { resamples = 1.5 })
      assert.is_false(ok)
      assert.is_truthy(err:find("option 'resamples' must be integer, got float", 1, true))
      ok, err = pcall(stats.bootstrap_ci, { 1, 2 }, { level = 1.5 })
      assert.is_false(ok)
      assert.is_truthy(err:find('option level must be in (0, 1)', 1, true))
      ok, err = pcall(stats.moving_average, { 1, 2 }, 0)
      assert.is_false(ok)
      assert.is_truthy(err:find('window must be an integer >= 1', 1, true))
      ok, err = pcall(stats.curve_distance, { x = { 1, 2 }, y = { 1 } }, { x = {}, y = {} })
      assert.is_false(ok)
      assert.is_truthy(err:find('curve 1 has 2 x and 1 y values', 1, true))
    end)

    it('blames the caller for misuse', function()
      local ok, err = pcall(function()
        stats.mean(nil)
      end)
      assert.is_false(ok)
      assert.is_truthy(err:find('stats_spec.lua:%d+: tp.stats.mean'))
    end)

    it('rejects misuse in the C binding too', function()
      local C = require('tp._stats')
      local ok, err = pcall(C.mean, { 1, nil, 3 })
      assert.is_false(ok)
      assert.is_truthy(err:find('number expected at index 2, got nil', 1, true))
    end)
  end)

  describe('steady state', function()
    it('applies MSER-5 and reports 1-based windows', function()
      -- Batch means 10, 1, 1, 2: d* = 1 (see tests/c/test_stats.c for the working).
      local xs = { 10, 10, 10, 10, 10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2 }
      local r = stats.mser(xs)
      assert.are.equal(6, r.start)
      assert.are.equal(5, r.batch)
      assert.are.equal(4, r.batches)
      assert.are.equal(1, r.truncated)
      assert.is_true(near(r.statistic, 2 / 27))
      local w = stats.steady_state(xs)
      assert.are.same({ 6, 22, 17, 'mser-5', 5 }, { w.first, w.last, w.count, w.method, w.batch })
    end)

    it('falls back to batches of 1 for short series, and a single value is its own window',
      function()
        -- 30.5 15.6 then ~0.5: MSER-1 over d <= 3; removing the two slow values is best.
        local w = stats.steady_state({ 30.5, 15.6, 0.73, 0.49, 0.51, 0.52 })
        assert.are.equal('mser-1', w.method)
        assert.is_true(w.first >= 3)
        assert.are.equal(6, w.last)
        local one = stats.steady_state({ 4.2 })
        assert.are.same({ 1, 1, 1, 'single' }, { one.first, one.last, one.count, one.method })
        local v, err = stats.steady_state({ 0 / 0 })
        assert.is_nil(v)
        assert.is_truthy(err:find('steady_state: value #1 is NaN', 1, true))
        v, err = stats.steady_state({})
        assert.is_nil(v)
        assert.is_truthy(err:find('steady_state: needs at least 1 value', 1, true))
        v, err = stats.mser({ 1, 2, 3 })
        assert.is_nil(v)
        assert.is_truthy(err:find('needs at least 2 batches of 5 values', 1, true))
      end)
  end)

  describe('bootstrap', function()
    local xs = {}
    for i = 1, 100 do
      xs[i] = i
    end

    it('is reproducible for a seed and changes with the seed', function()
      local a = stats.bootstrap_ci(xs, { seed = 42, resamples = 2000 })
      local b = stats.bootstrap_ci(xs, { seed = 42, resamples = 2000 })
      local c = stats.bootstrap_ci(xs, { seed = 43, resamples = 2000 })
      assert.are.equal(a.lo, b.lo)
      assert.are.equal(a.hi, b.hi)
      assert.is_true(a.lo ~= c.lo or a.hi ~= c.hi)
      assert.are.equal(50.5, a.estimate)
      -- Normal approximation 50.5 -+ 1.96 * 2.8866 = 44.84 .. 56.16.
      assert.is_true(math.abs(a.lo - 44.84) < 0.7 and math.abs(a.hi - 56.16) < 0.7)
    end)

    it('uses the documented defaults (level 0.95, 10000 resamples, seed 1)', function()
      local d = stats.bootstrap_ci(xs)
      local e = stats.bootstrap_ci(xs, { level = 0.95, resamples = 10000, seed = 1 })
      assert.are.same(d, e)
    end)

    it('brackets a ratio of means', function()
      local ys = {}
      for i = 1, 100 do
        ys[i] = 2 * i
      end
      local r = stats.bootstrap_ratio_ci(xs, ys, { resamples = 2000 })
      assert.are.equal(0.5, r.estimate)
      assert.is_true(r.lo < 0.5 and r.hi > 0.5)
      local v, err = stats.bootstrap_ratio_ci(xs, { -1, 1 })
      assert.is_nil(v)
      assert.is_truthy(err:find('mean of the second sample is 0', 1, true))
    end)
  end)

  describe('tests of difference', function()
    it("matches R's t.test(extra ~ group, data = sleep)", function()
      -- R: t = -1.8608, df = 17.776, p-value = 0.07939.
      local w = stats.welch(sleep1, sleep2)
      assert.is_true(near(w.t, -1.8608134674868526, 1e-10))
      assert.is_true(near(w.df, 17.776473516178495, 1e-10))
      assert.is_true(near(w.p, 0.07939414018735823, 1e-8))
      local v, err = stats.welch({ 1, 1 }, { 2, 2 })
      assert.is_nil(v)
      assert.is_truthy(err:find('both samples have zero variance', 1, true))
    end)

    it("matches R's wilcox.test(extra ~ group, data = sleep)", function()
      -- R: W = 25.5, p-value = 0.06933.
      local m = stats.mann_whitney(sleep1, sleep2)
      assert.are.equal(25.5, m.u1)
      assert.is_true(near(m.p, 0.06932757543362658, 1e-10))
      local nc = stats.mann_whitney({ 1, 2 }, { 3, 4 }, { continuity = false })
      assert.is_true(near(nc.z, -2 / math.sqrt(5 / 3)))
    end)

    it('computes two-sided Student t p-values', function()
      assert.is_true(near(stats.t_p2(1, 1), 0.5))
      assert.is_true(near(stats.t_p2(2.2281388519649385, 10), 0.05, 1e-9))
    end)
  end)

  describe('outliers and smoothing', function()
    it('flags modified z-scores above 3.5', function()
      local out, scores = stats.outliers({ 1, 2, 3, 4, 100 })
      assert.are.equal(1, #out)
      assert.are.same({ 5, 100 }, { out[1].index, out[1].value })
      assert.is_true(near(out[1].score, 65.4265))
      assert.is_true(near(scores[1], -1.349))
      assert.are.equal(0, #stats.outliers({ 1, 2, 3, 4, 100 }, { threshold = 100 }))
    end)

    it('smooths with a trailing window and an EMA', function()
      assert.are.same({ 1, 1.5, 2, 3, 4 }, stats.moving_average({ 1, 2, 3, 4, 5 }, 3))
      assert.are.same({ 1, 1.5, 2.25, 3.125, 4.0625 }, stats.ema({ 1, 2, 3, 4, 5 }, 0.5))
      local v, err = stats.ema({ 1 }, 2)
      assert.is_nil(v)
      assert.is_truthy(err:find('ema: alpha 2 outside (0, 1]', 1, true))
    end)

    it('measures the RMS distance of two curves on common x', function()
      local rms, n = stats.curve_distance({ x = { 1, 2, 3, 4 }, y = { 1, 1, 1, 1 } },
        { x = { 5, 3, 2 }, y = { 0, 3, 2 } })
      assert.is_true(near(rms, math.sqrt(2.5)))
      assert.are.equal(2, n)
      local v, err = stats.curve_distance({ x = { 1 }, y = { 1 } }, { x = { 2 }, y = { 1 } })
      assert.is_nil(v)
      assert.is_truthy(err:find('no x value in common', 1, true))
    end)
  end)

  describe('rng', function()
    it('is splitmix64: the reference outputs for seed 0, the same sequence for the same seed',
      function()
        -- splitmix64 from state 0 (Vigna's reference splitmix64.c): first outputs.
        local g = stats.rng(0)
        assert.are.equal(math.tointeger(0xE220A8397B1DCDAF), g.next())
        assert.are.equal(math.tointeger(0x6E789E6AA1B965F4), g.next())
        local a, b = stats.rng(7), stats.rng(7)
        for _ = 1, 100 do
          local u = a.uniform()
          assert.are.equal(u, b.uniform())
          assert.is_true(u > 0 and u < 1)
        end
        local n, sum, sq = 20000, 0, 0
        local c = stats.rng(11)
        for _ = 1, n do
          local z = c.normal()
          sum, sq = sum + z, sq + z * z
        end
        assert.is_true(math.abs(sum / n) < 0.03)
        assert.is_true(math.abs(sq / n - 1) < 0.05)
        assert.has_error(function()
          stats.rng(1.5)
        end)
      end)
  end)
end)
