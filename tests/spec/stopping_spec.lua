-- Stopping a run when its number is known (tp.run._stop, docs/stopping.md): the rule's checks,
-- the batch-means interval and t quantile of tp.stats, the incremental monitor against the C
-- functions it stands for, and its verdicts on recorded real and generated step-time series.
local stats = require('tp.stats')
local json = require('tp.json')
local run = require('tp.run')
local stop = require('tp.run._stop')

local function near(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-9) * math.max(math.abs(b), 1e-300)
end

-- A seeded generator (xorshift64*), so that the series are the same on every machine.
local function rng(seed)
  local s = seed * 2654435761 + 88172645463325252
  local function u()
    s = s ~ (s << 13)
    s = s ~ (s >> 7)
    s = s ~ (s << 17)
    return ((s >> 11) & 0x1fffffffffffff) / 9007199254740992.0
  end
  return function()
    -- Box-Muller: one standard normal value.
    local a, b = u(), u()
    return math.sqrt(-2 * math.log(a + 1e-300)) * math.cos(2 * math.pi * b)
  end
end

-- Step times: `warm` slow iterations (x3 falling to x1), then mean `mu` with AR(1) noise of
-- relative sd `cv` and coefficient `phi`.
local function series(n, opts)
  local z = rng(opts.seed or 1)
  local mu, cv, phi, warm = opts.mu or 0.1, opts.cv or 0.02, opts.phi or 0.5, opts.warm or 10
  local xs, e = {}, 0
  for i = 1, n do
    e = phi * e + math.sqrt(1 - phi * phi) * z()
    local w = i <= warm and (1 + 2 * (warm - i + 1) / warm) or 1
    xs[i] = mu * w * (1 + cv * e)
  end
  return xs
end

local function fixture()
  local dir = os.getenv('TPLUA_SOURCE_DIR') or '.'
  local path = dir .. '/tests/fixtures/stopping/reftrain_runs.json'
  return assert(json.load_file(path))
end

describe('tp.stats batch means', function()
  it('t_quantile matches the tables (R qt)', function()
    assert.is_true(near(stats.t_quantile(0.975, 9), 2.262157162798205, 1e-10))
    assert.is_true(near(stats.t_quantile(0.975, 19), 2.093024054408263, 1e-10))
    assert.is_true(near(stats.t_quantile(0.995, 4), 4.604094871415897, 1e-10))
    assert.is_true(near(stats.t_quantile(0.025, 1e7), -1.959963984540054, 1e-6))
    assert.are.equal(0.0, stats.t_quantile(0.5, 3))
    -- The far lower tail from p itself (mpmath: -15683.925454365776), not from 1 - p.
    assert.is_true(near(stats.t_quantile(1e-20, 5), -15683.925454365776, 1e-10))
    assert.has_error(function()
      stats.t_quantile(1, 3)
    end, 'tp.stats.t_quantile: p in (0, 1) and df > 0 expected')
  end)

  it('batch_means_ci: last k x b values, batch means, t(k-1) x se', function()
    -- 11 values, 2 batches of 5: the first value is left out; batch means 4 and 9.
    local ci = stats.batch_means_ci({ 100, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, { batches = 2 })
    assert.are.equal(2, ci.first)
    assert.are.equal(5, ci.batch_size)
    assert.are.equal(6.5, ci.mean)
    assert.is_true(near(ci.se, 2.5))
    assert.is_true(near(ci.half_width, 12.706204736174707 * 2.5, 1e-9))
    assert.are.equal(ci.mean - ci.half_width, ci.lo)
    assert.are.equal(1.0, ci.df)
  end)

  it('batch_means_ci refuses too few values, bad options and NaN', function()
    local ci, err, code = stats.batch_means_ci({ 1, 2, 3 }, { batches = 10 })
    assert.is_nil(ci)
    assert.are.equal('batch_means_ci: needs at least 10 values, got 3', err)
    assert.are.equal('EINVAL', code)
    ci, err = stats.batch_means_ci({ 1, 0 / 0, 3 }, { batches = 2 })
    assert.is_nil(ci)
    assert.are.equal('batch_means_ci: value #2 is NaN', err)
    assert.has_error(function()
      stats.batch_means_ci({ 1, 2 }, { batches = 1 })
    end, 'tp.stats.batch_means_ci: option batches must be at least 2')
    assert.has_error(function()
      stats.batch_means_ci({ 1, 2 }, { level = 95 })
    end, 'tp.stats.batch_means_ci: option level must be in (0, 1), got 95')
  end)
end)

describe('the stop rule', function()
  it('fills the defaults', function()
    local r = run.stop_rule({ ci = 0.02 })
    assert.are.same({ ci = 0.02, confidence = 0.95, min_iters = 50, batches = 20, confirm = 2 / 3 },
      r)
    assert.are.equal(0, run.stop_rule({ confirm = 0 }).confirm)
    r = run.stop_rule({ ci = 0.01, min_iters = 20.0, max_iters = 500, confidence = 0.9 })
    assert.are.equal(20, r.min_iters)
    assert.are.equal('integer', math.type(r.min_iters))
    assert.are.equal(500, r.max_iters)
    assert.truthy(run.describe_stop(r):find('90% CI of the steady step time is within 1% of',
      1, true), run.describe_stop(r))
  end)

  it('names the field and what it expects', function()
    local function msg(rule)
      local ok, err = pcall(run.stop_rule, rule, "run 'a': ")
      assert.is_false(ok)
      return err
    end
    assert.are.equal("run 'a': stop.ci: the relative half-width wanted, a number in (0, 1) "
      .. '(0.01 = 1% of the mean) expected, got 0', msg({ ci = 0 }))
    assert.are.equal("run 'a': stop.ci: the relative half-width wanted, a number in (0, 1) "
      .. '(0.01 = 1% of the mean) expected, got "1%"', msg({ ci = '1%' }))
    assert.truthy(msg({ min_iters = 2.5 }):find("^run 'a': stop.min_iters: a whole number >= 1"))
    assert.are.equal("run 'a': stop.confidence: the confidence level, a number in [0.5, 1) "
      .. '(default 0.95) expected, got 95', msg({ confidence = 95 }))
    assert.truthy(msg({ batches = 1 }):find("^run 'a': stop.batches: the least number of batch"))
    assert.are.equal("run 'a': stop: unknown field 'cl' (known: batches, ci, confidence, "
      .. 'confirm, max_iters, min_iters, observe)', msg({ cl = 0.01 }))
    assert.are.equal("run 'a': stop.confirm: the share of the steady window watched again before "
      .. 'a stop, a number in [0, 4] (default 0.667; 0 stops at the first narrow interval) '
      .. 'expected, got 5', msg({ confirm = 5 }))
    assert.truthy(msg({ confirm = 'yes' }):find('got "yes"', 1, true))
    assert.are.equal("run 'a': stop.max_iters: 10 is below min_iters (50)",
      msg({ max_iters = 10 }))
    assert.truthy(msg(0.01):find("^run 'a': stop: a table {ci = 0.01"))
  end)

  it('is checked with the run table, left out of its hash', function()
    local a = { id = 'a', argv = { 'true' } }
    local b = { id = 'a', argv = { 'true' }, stop = { ci = 0.05 } }
    assert.are.equal(run.hash(a), run.hash(b))
    assert.are.equal(0.05, run.check(b).stop.ci)
    assert.are.equal(50, run.check(b).stop.min_iters)
    local ok, err = pcall(run.check, { id = 'a', argv = { 'true' }, stop = { ci = 2 } })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("run 'a': stop.ci: ", 1, true), err)
  end)
end)

describe('the stop monitor', function()
  -- From scratch, straight from the definitions: the lag-1 autocorrelation of xs[a..b], and the
  -- Cramer-von Mises statistic of that window with the variance s2.
  local function lag1_direct(xs, a, b)
    local n, m = b - a + 1, 0
    for i = a, b do
      m = m + xs[i] / n
    end
    local var, cov = 0, 0
    for i = a, b do
      var = var + (xs[i] - m) ^ 2
      if i > a then
        cov = cov + (xs[i] - m) * (xs[i - 1] - m)
      end
    end
    return var > 0 and cov / var or 0
  end
  local function cvm_direct(xs, a, b, s2)
    local n, m = b - a + 1, 0
    for i = a, b do
      m = m + xs[i] / n
    end
    local part, sum = 0, 0
    for i = a, b do
      part = part + xs[i] - m
      sum = sum + part * part
    end
    return sum / (n * s2) / n
  end

  -- Least-squares slope of ys against 1..k and its t statistic (residuals, k - 2 df).
  local function trend_direct(ys)
    local k = #ys
    local mx, my = (k + 1) / 2, 0
    for j = 1, k do
      my = my + ys[j] / k
    end
    local sxx, sxy = 0, 0
    for j = 1, k do
      sxx = sxx + (j - mx) ^ 2
      sxy = sxy + (j - mx) * (ys[j] - my)
    end
    local beta = sxy / sxx
    local rss = 0
    for j = 1, k do
      rss = rss + (ys[j] - my - beta * (j - mx)) ^ 2
    end
    return beta, beta / math.sqrt(rss / (k - 2) / sxx)
  end

  -- At every check the monitor made, its truncation is tp.stats.mser's on the values so far,
  -- its interval tp.stats.batch_means_ci's on the steady window, and the lag-1 autocorrelation
  -- that sized its batches and its stationarity statistic those computed from scratch.
  local function agrees(xs, rule)
    local mon = stop.new(rule)
    local compared = 0
    for i, x in ipairs(xs) do
      local before = mon.checks
      mon:add(x, i)
      if mon.checks > before then
        local prefix = table.move(xs, 1, i, 1, {})
        local m = assert(stats.mser(prefix, { batch = 5 }))
        local e = mon.estimate
        if e then
          compared = compared + 1
          assert.are.equal(m.start, e.steady_first, 'value ' .. i)
          local steady = table.move(xs, m.start, i, 1, {})
          local c = assert(stats.batch_means_ci(steady, { batches = e.batches,
            level = rule.confidence }))
          -- Batches of at least 4 correlation times, as many as fit (at least rule.batches).
          if e.batches_long_enough then
            assert.is_true(e.batch_size >= 4 * e.tau and e.batches >= rule.batches)
          end
          assert.is_true(near(e.mean, c.mean, 1e-12), 'value ' .. i)
          assert.is_true(near(e.half_width, c.half_width, 1e-7), 'value ' .. i)
          assert.are.equal(c.batch_size, e.batch_size)
          assert.are.equal(m.start + c.first - 1, e.first, 'value ' .. i)
          local r1 = math.max(0, math.min(lag1_direct(xs, m.start, i), 0.98))
          assert.is_true(math.abs(e.lag1 - r1) <= 1e-9, 'value ' .. i .. ': ' .. e.lag1 .. ' '
            .. r1)
          -- As many batches of ceil(4 tau) values as the window holds, or rule.batches.
          local b = math.max(1, math.ceil(stop.TAU_FACTOR * (1 + r1) / (1 - r1)))
          local k = (i - m.start + 1) // b
          assert.are.equal(k >= rule.batches and k or rule.batches, e.batches, 'value ' .. i)
          if e.cvm then
            local s2 = e.batch_size * e.batches * e.se * e.se
            assert.is_true(near(e.cvm, cvm_direct(xs, m.start, i, s2), 1e-7), 'value ' .. i)
          end
          -- The trend: the least-squares slope of the batch means tp.stats.batch_means_ci cut,
          -- and its t statistic, from scratch.
          if e.batches >= 4 then
            local bm = {}
            local first = m.start + c.first - 1
            for j = 1, e.batches do
              local sum = 0
              for q = first + (j - 1) * e.batch_size, first + j * e.batch_size - 1 do
                sum = sum + xs[q]
              end
              bm[j] = sum / e.batch_size
            end
            local slope, t = trend_direct(bm)
            assert.is_true(near(e.slope * e.batch_size, slope, 1e-6)
              or math.abs(e.slope * e.batch_size - slope) < 1e-12 * math.abs(e.mean),
              'value ' .. i)
            assert.is_true(math.abs(e.trend_t - t) <= 1e-6 * math.max(1, math.abs(t)),
              'value ' .. i .. ': ' .. e.trend_t .. ' ' .. t)
          end
        else
          -- No estimate: the least MSER is at the end of the first half, or too few values.
          assert.is_true(m.truncated >= m.batches // 2 or i - m.start + 1 < rule.batches,
            'value ' .. i)
        end
      end
      if mon.verdict then
        break
      end
    end
    return compared, mon
  end

  it('agrees with tp.stats.mser and batch_means_ci on real step times', function()
    local doc = fixture()
    assert.is_true(#doc.runs >= 8, 'fixture runs')
    local rule = stop.check({ ci = 0.001, min_iters = 50 })  -- too tight to stop: all checks
    for _, r in ipairs({ doc.runs[1], doc.runs[2], doc.runs[#doc.runs] }) do
      local compared = agrees(r.step_time_ms, rule)
      assert.is_true(compared >= 20, r.id .. ': ' .. compared)
    end
  end)

  it('agrees on generated series with warm-up and autocorrelation', function()
    for seed = 1, 3 do
      local compared = agrees(series(600, { seed = seed, phi = 0.8, cv = 0.05 }),
        stop.check({ ci = 0.0005, batches = 20 }))
      assert.is_true(compared >= 50)
    end
  end)

  it('stops a steady series once the interval is narrow enough and confirmed', function()
    local xs = series(1000, { seed = 7, mu = 0.25, cv = 0.02, phi = 0.3, warm = 15 })
    local res = run.replay_stop(xs, run.stop_rule({ ci = 0.01 }), nil, 1000)
    assert.is_truthy(res.stopped)
    assert.are.equal('converged_ci', res.verdict.reason)
    local e = res.verdict.estimate
    assert.is_true(e.relative <= 0.01)
    assert.is_true(e.steady_iterations >= 50)
    assert.is_true(e.steady_first_iteration > 15, tostring(e.steady_first_iteration))
    assert.is_true(res.stopped < 450, tostring(res.stopped))
    assert.is_true(e.lo <= 0.25 and e.hi >= 0.25, e.lo .. ' ' .. e.hi)
    assert.are.equal(1, res.monitor.confirmations)
    assert.is_nil(res.monitor.drift)
    -- Without the confirmation, the stop is where the interval was first narrow enough: two
    -- thirds of its window earlier (the first window began at the steady start).
    local first = run.replay_stop(xs, run.stop_rule({ ci = 0.01, confirm = 0 }), nil, 1000)
    assert.are.equal('converged_ci', first.verdict.reason)
    local fe = first.verdict.estimate
    local due = first.stopped + math.ceil(2 / 3 * (first.stopped - fe.steady_first + 1))
    assert.is_true(res.stopped >= due, res.stopped .. ' ' .. due)
    assert.is_true(res.stopped <= due + 5, res.stopped .. ' ' .. due)
    -- A tighter rule needs more iterations (about 4x for half the width).
    local tight = run.replay_stop(xs, run.stop_rule({ ci = fe.relative / 2, confirm = 0 }))
    assert.is_true(tight.stopped > 2 * first.stopped, tight.stopped .. ' ' .. first.stopped)
    assert.is_true(tight.verdict.estimate.relative <= fe.relative / 2)
  end)

  it('waits for min_iters, and never stops a series that keeps drifting', function()
    local xs = series(600, { seed = 3, cv = 0.001, warm = 0 })
    local res = run.replay_stop(xs, run.stop_rule({ ci = 0.01, min_iters = 120 }))
    assert.are.equal('converged_ci', res.verdict.reason)
    assert.is_true(res.verdict.estimate.steady_iterations >= 120)
    assert.is_true(res.stopped >= 120)
    -- Step times growing by 0.5% an iteration: MSER keeps the window at the end, the interval
    -- never narrows to 1%.
    local drift = {}
    for i = 1, 400 do
      drift[i] = 0.1 * (1 + 0.005 * i)
    end
    res = run.replay_stop(drift, run.stop_rule({ ci = 0.01 }))
    assert.is_nil(res.stopped)
  end)

  it('stops at max_iters without convergence, and says so', function()
    local xs = series(300, { seed = 5, cv = 0.3 })
    local res = run.replay_stop(xs, run.stop_rule({ ci = 0.001, max_iters = 120 }))
    assert.are.equal(120, res.stopped)
    assert.are.equal('max_iters', res.verdict.reason)
    assert.truthy(stop.message(res.verdict):find('^max_iters reached without convergence'))
    local s = stop.summary(res.monitor.rule, res.monitor, 121, 300)
    assert.is_false(s.converged)
    assert.are.equal('max_iters', s.stopped_by)
    assert.are.equal(179, s.iterations_saved)
  end)

  it('tests the window for stationarity (Cramer-von Mises, Heidelberger-Welch)', function()
    local function cvm(xs)
      local mon = stop.new(stop.check({ ci = 1e-9 }))
      for i, x in ipairs(xs) do
        mon:add(x, i)
      end
      return mon:cvm(1, #xs, stats.variance(xs))
    end
    -- Independent values: the statistic of a Brownian bridge, below its 5% point (0.461)
    -- in about 95% of series; a drift of 4 standard deviations over the window: far above.
    local below = 0
    for seed = 1, 100 do
      if cvm(series(400, { seed = seed, phi = 0, warm = 0 })) <= stop.CVM_CRITICAL then
        below = below + 1
      end
    end
    assert.is_true(below >= 88, tostring(below))
    local drift = series(400, { seed = 1, phi = 0, warm = 0, cv = 0.01 })
    for i = 1, #drift do
      drift[i] = drift[i] + 0.1 * 0.04 * i / #drift
    end
    assert.is_true(cvm(drift) > 1, tostring(cvm(drift)))
  end)

  it('costs O(1) a value: a few hundred checks on 20000 values', function()
    local xs = series(20000, { seed = 11, cv = 0.05 })
    local res = run.replay_stop(xs, run.stop_rule({ ci = 1e-6 }))
    assert.is_nil(res.stopped)
    local checks = res.monitor.checks
    -- Every batch of 5 up to 200 batches, then every 0.5% of growth: 200 + 200 ln(20).
    assert.is_true(checks > 200 and checks < 200 + 200 * math.log(20) + 10, tostring(checks))
  end)
end)

describe('a stop rule under drift', function()
  local function full_mean(xs)
    local w = assert(stats.steady_state(xs))
    local s = 0
    for i = w.first, w.last do
      s = s + xs[i]
    end
    return s / (w.last - w.first + 1)
  end

  it('stops a recorded real run whose step time fell with stopped_by = drift', function()
    -- 2ranks-mbs4-seq128-r2: its step time falls from about 92.7 to 88.5 ms after its first
    -- 100 iterations. Stopped at its first narrow interval, the interval misses the mean its
    -- record shows at the end; confirmed, the fall is seen, and the widened interval holds it.
    local run_of
    for _, r in ipairs(fixture().runs) do
      if r.id == '2ranks-mbs4-seq128-r2' then
        run_of = r
      end
    end
    assert.is_truthy(run_of, 'fixture run 2ranks-mbs4-seq128-r2')
    local xs = run_of.step_time_ms
    local target = full_mean(xs)
    local first = run.replay_stop(xs, run.stop_rule({ ci = 0.15, confirm = 0 }), nil, #xs)
    assert.are.equal('converged_ci', first.verdict.reason)
    local fe = first.verdict.estimate
    assert.is_false(fe.lo <= target and target <= fe.hi, fe.lo .. ' ' .. fe.hi .. ' ' .. target)
    local res = run.replay_stop(xs, run.stop_rule({ ci = 0.15 }), nil, #xs)
    assert.are.equal('drift', res.verdict.reason)
    local e = res.verdict.estimate
    assert.is_true(e.lo <= target and target <= e.hi, e.lo .. ' ' .. e.hi .. ' ' .. target)
    assert.is_true(e.half_width > e.batch_means_half_width)
    assert.are.equal(e.batch_means_half_width + e.drift_allowance, e.half_width)
    assert.is_true(e.relative <= 0.15)
    assert.truthy(stop.message(res.verdict):find('^drift: steady step time'))
    local s = stop.summary(res.monitor.rule, res.monitor, res.stopped, #xs)
    assert.are.equal('drift', s.stopped_by)
    assert.is_false(s.converged)
    assert.are.equal('confirmation', s.drift.by)
    assert.is_true(s.drift.shift_relative < -0.02, tostring(s.drift.shift_relative))
    assert.truthy(s.warning:find('^the step time drifted: the %d+ iterations after iteration'))
    assert.truthy(s.warning:find('the interval is widened by', 1, true))
    assert.are.equal(e.half_width, s.ci.half_width_s)
    assert.are.equal(e.batch_means_half_width, s.ci.batch_means_half_width_s)
    -- The shift is the mean of the values after the held interval (all of them, or their later
    -- half), from scratch, against the held mean.
    local d = res.monitor.drift
    local function mean_of(a, b)
      local sum = 0
      for i = a, b do
        sum = sum + xs[i]
      end
      return sum / (b - a + 1)
    end
    local whole = mean_of(d.held_at_iteration + 1, d.at_iteration)
    local later = mean_of(d.at_iteration - d.iterations + 1, d.at_iteration)
    assert.is_true(near(d.mean, whole, 1e-9) or near(d.mean, later, 1e-9), tostring(d.mean))
    assert.is_true(near(d.shift, d.mean - d.held_mean, 1e-12))
    assert.is_true(math.abs(d.z) > stats.t_quantile(0.975, e.batches - 1) - 1e-9)
  end)

  -- A steady series, and the same with its step time 5% higher from 10 iterations after the
  -- point where the interval is first narrow enough (a power cap, a clock change).
  local function stepped()
    local xs = series(1000, { seed = 4, cv = 0.01, phi = 0.3, warm = 10 })
    local s0 = run.replay_stop(xs, run.stop_rule({ ci = 0.15, confirm = 0 }), nil, 1000).stopped
    assert.is_truthy(s0)
    for i = s0 + 10, #xs do
      xs[i] = xs[i] * 1.05
    end
    return xs, s0
  end

  it('sees a step after the first narrow interval; never calls it converged', function()
    local xs, s0 = stepped()
    local target = full_mean(xs)
    local old = run.replay_stop(xs, run.stop_rule({ ci = 0.15, confirm = 0 }), nil, 1000)
    assert.are.equal(s0, old.stopped)
    assert.is_true(old.verdict.estimate.hi < target)
    for _, ci in ipairs({ 0.15, 0.01 }) do
      local res = run.replay_stop(xs, run.stop_rule({ ci = ci }), nil, 1000)
      assert.are.equal('drift', res.verdict.reason, 'ci ' .. ci)
      local e = res.verdict.estimate
      assert.is_true(res.stopped > s0 + 10)
      assert.is_true(e.lo <= target and target <= e.hi, ci .. ': ' .. e.lo .. ' ' .. e.hi)
      assert.is_true(e.relative <= ci)
      assert.is_true(res.monitor.drift.shift / res.monitor.drift.held_mean > 0.02)
    end
    -- The tighter the rule, the longer it waits: the drift's share of the run must shrink.
    local wide = run.replay_stop(xs, run.stop_rule({ ci = 0.15 }), nil, 1000)
    local tight = run.replay_stop(xs, run.stop_rule({ ci = 0.01 }), nil, 1000)
    assert.is_true(tight.stopped > wide.stopped, tight.stopped .. ' ' .. wide.stopped)
    -- Narrow enough before the step, tight once it drifted: only near the end of the run is
    -- what is left of it too short to move its mean by more than asked.
    local late = run.replay_stop(xs, run.stop_rule({ ci = 0.003 }), nil, 1000)
    assert.are.equal('drift', late.verdict.reason)
    assert.is_true(late.stopped > 900, tostring(late.stopped))
    local s = stop.summary(late.monitor.rule, late.monitor, late.stopped, 1000)
    assert.are.equal('drift', s.stopped_by)
    assert.truthy(s.warning:find('the step time drifted', 1, true))
  end)

  it('stops at max_iters with the interval widened for the drift', function()
    local xs = stepped()
    local res = run.replay_stop(xs, run.stop_rule({ ci = 0.01, max_iters = 700 }), nil, 1000)
    assert.are.equal(700, res.stopped)
    assert.are.equal('max_iters', res.verdict.reason)
    assert.is_true(res.verdict.estimate.widened)
    assert.truthy(stop.message(res.verdict):find('the step time moved by +', 1, true))
    local s = stop.summary(res.monitor.rule, res.monitor, 700, 1000)
    assert.are.equal('max_iters', s.stopped_by)
    assert.truthy(s.warning:find('the step time drifted', 1, true))
  end)

  it('holds a stop back while the batch means trend, and says so', function()
    -- 4% slower over 600 iterations: no stop, converged or not, and the record's warning.
    local xs = series(600, { seed = 5, cv = 0.01, phi = 0.3, warm = 10 })
    for i = 1, #xs do
      xs[i] = xs[i] * (1 + 0.04 * i / 600)
    end
    local res = run.replay_stop(xs, run.stop_rule({ ci = 0.15 }), nil, 600)
    assert.is_nil(res.stopped)
    local s = stop.summary(res.monitor.rule, res.monitor, 600, 600)
    assert.are.equal('trend', s.drift.by)
    assert.is_true(s.drift.trend_t > stats.t_quantile(0.975, s.ci.batches - 1))
    assert.truthy(s.warning:find('^the step time drifts: the batch means of its last steady '
      .. 'window trend by %+'))
  end)

  it('flags few steady series: about the rule\'s 5%', function()
    local flagged, stopped = 0, 0
    for seed = 1, 60 do
      local xs = series(1000, { seed = 100 + seed, cv = 0.01, phi = 0.3, warm = 10 })
      local res = run.replay_stop(xs, run.stop_rule({ ci = 0.01 }), nil, 1000)
      if res.stopped then
        stopped = stopped + 1
        flagged = flagged + (res.verdict.reason == 'drift' and 1 or 0)
      end
    end
    assert.is_true(stopped >= 55, tostring(stopped))
    assert.is_true(flagged <= 9, tostring(flagged))
  end)
end)
