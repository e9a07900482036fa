-- tp.plan.search: the spec, the schedule and its budget, the batch-means interval of a
-- candidate's step times (its coverage on autocorrelated series), successive halving's
-- decisions (confident drops, uncertain candidates kept within the budget, failures,
-- interruption, determinism), a ranking function and a whole strategy from Lua.
local search = require('tp.plan.search')

-- A seeded AR(1) series of `n` step times around `mean`: coefficient phi, innovation sd
-- `sd` (relative), the first `warm` ones slower.
local function series(rng, n, mean, sd, phi, warm)
  local out, e = {}, 0
  for i = 1, n do
    local u1, u2 = rng(), rng()
    local z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
    e = phi * e + math.sqrt(1 - phi * phi) * sd * z
    out[i] = mean * (1 + e) * (i <= (warm or 0) and 3 or 1)
  end
  return out
end

local function lcg(seed)
  local state = seed
  return function()
    state = (state * 6364136223846793005 + 1442695040888963407) & 0x7FFFFFFFFFFFFFFF
    return ((state >> 11) + 0.5) / (1 << 52)
  end
end

-- Candidates whose true step time is `steps[i]` (tokens per step 1000, 1 GPU), and a measure
-- function that makes a noisy run of `iters` iterations for each; `calls` records the rungs.
local function world(steps, opts)
  opts = opts or {}
  local rng = lcg(opts.seed or 7)
  local cands = {}
  for i, st in ipairs(steps) do
    cands[i] = { key = 'c' .. i, gpus = opts.gpus and opts.gpus[i] or 1, tokens_per_step = 1000,
      true_step = st }
  end
  local calls = {}
  local function measure(list, iters, rung)
    local keys = {}
    local out = {}
    for i, c in ipairs(list) do
      keys[i] = c.key
      if opts.fail and opts.fail[c.key] then
        out[c.key] = { failed = 'out of memory' }
      else
        out[c.key] = { runs = { { step_times = series(rng, iters, c.true_step, opts.sd or 0.01,
          0.3, 2) } } }
      end
    end
    calls[#calls + 1] = { rung = rung, iters = iters, keys = keys }
    if opts.interrupt_at == rung then
      return { interrupted = true }
    end
    return out
  end
  return cands, measure, calls
end

local function spec(t)
  return assert(search.resolve(search.normalize(t or 'halving'), (t and t.max_iters) or 100))
end

describe('tp.plan.search spec', function()
  it('fills the defaults', function()
    local s = search.normalize('halving')
    assert.are.equal('halving', s.name)
    assert.are.equal(3, s.eta)
    assert.are.equal(0.4, s.budget)
    assert.are.equal(0.95, s.level)
    assert.are.equal('tokens_per_second', s.metric)
    local r = assert(search.resolve(s, 100))
    assert.are.equal(100, r.max_iters)
    assert.are.equal(12, r.min_iters)  -- ceil(100 / 9): three rungs
    assert.are.equal(10, assert(search.resolve(s, 40)).min_iters)
  end)

  it('refuses bad specs, naming the field', function()
    for _, case in ipairs({
      { 'grid', "strategy: 'halving' or a function(ctx) expected, got 'grid'" },
      { { eta = 1 }, 'eta: a whole number >= 2 expected, got 1' },
      { { budget = 0 }, 'budget: a fraction of the full grid in (0, 1] expected, got 0' },
      { { level = 1 }, 'level: a confidence level in (0, 1) expected, got 1' },
      { { min_iters = 5 }, 'min_iters: a whole number >= 10 expected' },
      { { min_iters = 50, max_iters = 20 }, 'min_iters (50) is more than max_iters (20)' },
      { { metric = 'mfu' }, "metric: 'tokens_per_second' or 'tokens_per_second_per_gpu'" },
      { { rank = 3 }, 'rank: a function(candidate) -> estimate, lo, hi expected' },
      { { etta = 2 }, "unknown field 'etta'" },
      { 3, "'halving' or a table { strategy =, eta =, ... } expected, got number" },
    }) do
      local ok, err = pcall(search.normalize, case[1])
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find('tp.plan.search: ' .. case[2], 1, true), tostring(err))
    end
    local s, err = search.resolve(search.normalize('halving'), 5)
    assert.is_nil(s)
    assert.are.equal('max_iters: 5 iterations, a search needs at least 10', err)
  end)
end)

describe('tp.plan.search schedule and budget', function()
  it('grows the budget by eta, the runs of a rung adding to the ones before', function()
    local s = spec()
    local rungs = search.schedule(s, 26)
    assert.are.equal(3, #rungs)
    assert.are.same({ 0, 12, 12, 26 }, { rungs[1].rung, rungs[1].iters, rungs[1].budget,
      rungs[1].candidates })
    assert.are.same({ 1, 24, 36, 9 }, { rungs[2].rung, rungs[2].iters, rungs[2].budget,
      rungs[2].candidates })
    assert.are.same({ 2, 64, 100, 3 }, { rungs[3].rung, rungs[3].iters, rungs[3].budget,
      rungs[3].candidates })
    local cands = {}
    for i = 1, 26 do
      cands[i] = { gpus = 8 }
    end
    local b = search.budget(s, cands)
    assert.are.equal(26 * 8 * 100, b.grid)
    assert.are.equal(8 * (26 * 12 + 9 * 24 + 3 * 64), b.nominal)
    assert.is_true(math.abs(b.fraction - 720 / 2600) < 1e-12)
    assert.are.equal(0.4 * b.grid, b.cap)
  end)

  it('gives a last rung of at least 10 iterations', function()
    local rungs = search.schedule(spec({ eta = 2, min_iters = 30, max_iters = 65 }), 8)
    assert.are.same({ 30, 30, 10 }, { rungs[1].iters, rungs[2].iters, rungs[3].iters })
    assert.are.equal(70, rungs[3].budget)
  end)
end)

describe('tp.plan.search.step_time_ci', function()
  it('is exact on constant step times and unbounded with one batch', function()
    local t = {}
    for i = 1, 30 do
      t[i] = 0.5
    end
    local e = assert(search.step_time_ci({ { step_times = t } }))
    assert.are.equal(0.5, e.mean)
    assert.are.equal(0.5, e.lo)
    assert.are.equal(0.5, e.hi)
    assert.are.equal(5, e.batch_size)
    e = assert(search.step_time_ci({ { step_times = { 1, 1.1 } } }))
    assert.are.equal(math.huge, e.hi)
    assert.are.equal(0, e.lo)
    local none, err = search.step_time_ci({ { step_times = {} } })
    assert.is_nil(none)
    assert.are.equal('no step times', err)
  end)

  it('leaves the warm-up out (MSER-5) and pools runs without straddling them', function()
    local rng = lcg(3)
    local a = series(rng, 40, 1.0, 0.01, 0, 3)
    local b = series(rng, 40, 1.0, 0.01, 0, 3)
    local e = assert(search.step_time_ci({ { step_times = a }, { step_times = b } }))
    assert.are.equal(2, e.runs)
    assert.is_true(e.lo < 1.0 and 1.0 < e.hi, string.format('[%g, %g]', e.lo, e.hi))
    assert.is_true(e.steps <= 74)  -- the 3 slow iterations of each run are out
  end)

  it('covers the true mean at about the stated rate on autocorrelated series', function()
    local rng = lcg(11)
    local covered, n = 0, 400
    for _ = 1, n do
      local e = assert(search.step_time_ci({ { step_times = series(rng, 100, 2.0, 0.02, 0.5,
        0), first = 1 } }))
      if e.lo <= 2.0 and 2.0 <= e.hi then
        covered = covered + 1
      end
    end
    -- 95% nominal; batch means of 10 keeps it near that with phi = 0.5 (a plain t interval on
    -- the step times themselves covers about 75% here).
    assert.is_true(covered >= 0.88 * n and covered <= 0.99 * n, tostring(covered))
  end)

  it('counts the run-to-run variation when a configuration has several runs', function()
    -- Each run of a configuration is off its true mean by a run offset (sd 1%, as the node it
    -- lands on), its steps AR(1) around that. Pooling the runs' batch means as if they were one
    -- run covers the true mean about half the time here; with the variation between runs
    -- estimated over 8 configurations (tp.plan.search.between_runs) about 95%.
    local rng = lcg(5)
    local function normal()
      local u1, u2 = rng(), rng()
      return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
    end
    local covered, naive, n = 0, 0, 0
    for _ = 1, 60 do
      local cands = {}
      for k = 1, 8 do
        local runs = {}
        for r, iters in ipairs({ 20, 40, 60 }) do
          local offset = 1 + 0.01 * normal()
          local t = series(rng, iters, 2.0 * offset, 0.01, 0.3, 0)
          runs[r] = { step_times = t, first = 1 }
        end
        cands[k] = { runs = runs }
      end
      local between = assert(search.between_runs(cands))
      assert.are.equal(16, between.df)
      for _, c in ipairs(cands) do
        n = n + 1
        local e = assert(search.step_time_ci(c.runs, 0.95, between))
        if e.lo <= 2.0 and 2.0 <= e.hi then
          covered = covered + 1
        end
        local p = assert(search.step_time_ci(c.runs, 0.95))
        if p.lo <= 2.0 and 2.0 <= p.hi then
          naive = naive + 1
        end
      end
    end
    assert.is_true(covered >= 0.9 * n and covered <= 0.99 * n, covered .. ' of ' .. n)
    assert.is_true(naive < 0.8 * n, naive .. ' of ' .. n)
    -- No configuration measured twice: nothing to estimate.
    assert.is_nil(search.between_runs({ { runs = { { step_times = { 1, 1, 1, 1 } } } } }))
  end)

  it('gives tokens/s and its interval, per GPU on request', function()
    local c = { tokens_per_step = 1000, gpus = 4, runs = { { step_times = { 0.5, 0.5, 0.5, 0.5,
      0.5, 0.5, 0.5, 0.5, 0.5, 0.5 } } } }
    local e, lo, hi = search.default_rank(c, { level = 0.95, metric = 'tokens_per_second' })
    assert.are.same({ 2000, 2000, 2000 }, { e, lo, hi })
    e = search.default_rank(c, { level = 0.95, metric = 'tokens_per_second_per_gpu' })
    assert.are.equal(500, e)
  end)
end)

describe('tp.plan.search.run (successive halving)', function()
  it('drops the clearly worse with confidence and finds the best', function()
    local steps = { 1.30, 1.00, 1.60, 1.25, 2.0, 1.9, 1.75, 1.45, 1.15 }
    local s = spec({ eta = 3, min_iters = 20, max_iters = 100, budget = 1 })
    local cands, measure, calls = world(steps)
    local r = search.run(s, cands, measure)
    assert.are.equal('c2', r.best.key)
    assert.are.equal(#r.rungs, #calls)
    assert.are.equal(9, #calls[1].keys)
    assert.are.equal(20, calls[1].iters)
    -- Rung 0: the best 3 go on; the far slower ones are dropped as worse, with the bound.
    local rung0 = r.rungs[1]
    local dropped = {}
    for _, d in ipairs(rung0.dropped) do
      dropped[d.key] = d
      assert.are.equal('worse', d.reason)
      assert.is_true(d.hi < d.threshold)
      assert.is_truthy(d.detail:find('is below', 1, true))
    end
    for _, k in ipairs({ 'c5', 'c6', 'c7' }) do
      assert.is_truthy(dropped[k], k)
    end
    assert.is_nil(dropped.c2)
    -- Every candidate of rung 0 is either kept or dropped, once.
    assert.are.equal(9, #rung0.kept + #rung0.dropped)
    assert.is_true(r.spent_gpu_iters < 9 * 100)
  end)

  it('keeps a candidate it cannot tell apart from the best, and only within the budget',
    function()
      local steps = { 1.00, 1.004, 1.5, 1.6, 1.7, 1.8 }
      local s = spec({ eta = 3, min_iters = 20, max_iters = 100, budget = 1, level = 0.95 })
      local cands, measure = world(steps, { sd = 0.02 })
      local r = search.run(s, cands, measure)
      local kept = {}
      for _, k in ipairs(r.rungs[1].kept) do
        kept[k.key] = k.why
      end
      assert.is_truthy(kept.c1 and kept.c2, 'both close candidates go on')
      -- With a budget too small for any extra, the uncertain ones are dropped for the budget.
      local tight = spec({ eta = 3, min_iters = 20, max_iters = 100, budget = 0.1 })
      cands, measure = world({ 1.00, 1.004, 1.002, 1.003, 1.001, 1.005 }, { sd = 0.02 })
      r = search.run(tight, cands, measure)
      local budget_drops = 0
      for _, d in ipairs(r.rungs[1].dropped) do
        if d.reason == 'budget' then
          budget_drops = budget_drops + 1
          assert.is_truthy(d.detail:find('would exceed the budget', 1, true))
        end
      end
      assert.is_true(budget_drops > 0)
      assert.are.equal(2, #r.rungs[1].kept)  -- ceil(6 / 3): the nominal share goes on
    end)

  it('drops a candidate whose run failed, and makes the same decisions twice', function()
    local steps = { 1.0, 1.2, 0.8, 1.5 }
    local s = spec({ eta = 2, min_iters = 20, max_iters = 80 })
    local cands, measure = world(steps, { fail = { c3 = true } })
    local r1 = search.run(s, cands, measure)
    assert.are.equal('c1', r1.best.key)
    assert.are.equal('failed', r1.rungs[1].dropped[1].reason)
    assert.are.equal('out of memory', r1.rungs[1].dropped[1].detail)
    local cands2, measure2 = world(steps, { fail = { c3 = true } })
    local r2 = search.run(s, cands2, measure2)
    local function decisions(r)
      local out = {}
      for _, rung in ipairs(r.rungs) do
        for _, k in ipairs(rung.kept) do
          out[#out + 1] = rung.rung .. ' kept ' .. k.key
        end
        for _, d in ipairs(rung.dropped) do
          out[#out + 1] = rung.rung .. ' ' .. d.reason .. ' ' .. d.key
        end
      end
      return out
    end
    assert.are.same(decisions(r1), decisions(r2))
  end)

  it('stops where it is when the runs are interrupted', function()
    local cands, measure, calls = world({ 1.0, 1.1, 1.2, 1.3 }, { interrupt_at = 1 })
    local r = search.run(spec({ eta = 2, min_iters = 20, max_iters = 80 }), cands, measure)
    assert.is_true(r.interrupted)
    assert.is_nil(r.best)
    assert.are.equal(2, #calls)
    assert.are.equal(1, #r.rungs)  -- rung 1's measurements never came back
  end)

  it('ranks by a ranking function of the recipe', function()
    -- Rank by fewest GPUs, whatever the speed: the user's criterion decides.
    local s = spec({ eta = 2, min_iters = 20, max_iters = 40, rank = function(c)
      return -c.gpus, -c.gpus, -c.gpus
    end })
    local cands, measure = world({ 1.0, 2.0, 3.0 }, { gpus = { 8, 4, 2 } })
    local r = search.run(s, cands, measure)
    assert.are.equal('c3', r.best.key)
  end)

  it('runs a whole strategy written in Lua through the same context', function()
    local seen
    local s = spec({ max_iters = 50, strategy = function(ctx)
      -- A grid: every candidate max_iters at once, the best estimate wins.
      local all = ctx:alive()
      local rung = ctx:measure(all, ctx.spec.max_iters)
      seen = rung
      local best
      for _, c in ipairs(all) do
        if not best or c.estimate > best.estimate then
          best = c
        end
      end
      for _, c in ipairs(all) do
        if c ~= best then
          ctx:drop(c, 'slower')
        end
      end
      ctx:keep(best, 'best')
      return best
    end })
    assert.are.equal('custom', s.name)
    local cands, measure, calls = world({ 1.4, 1.2, 1.3 })
    local r = search.run(s, cands, measure)
    assert.are.equal('c2', r.best.key)
    assert.are.equal(1, #calls)
    assert.are.equal(50, calls[1].iters)
    assert.are.equal(3, #seen.ranking)
    assert.are.equal('slower', r.rungs[1].dropped[1].reason)
    local bad = spec({ max_iters = 50, strategy = function()
      return { key = 'nobody' }
    end })
    cands, measure = world({ 1.0 })
    local ok, err = pcall(search.run, bad, cands, measure)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('the strategy must return one of the candidates', 1,
      true), tostring(err))
  end)
end)

describe('what a search says of its answer', function()
  local present = require('tp.present.search')

  it('tells whether the best is separated from the runner-up at the level', function()
    local best = { label = 'a', estimate = 100, lo = 95, hi = 105 }
    local clear = { label = 'b', estimate = 90, lo = 88, hi = 94 }
    local close = { label = 'c', estimate = 93, lo = 89, hi = 96 }
    local sep = search.separation(best, { best, clear })
    assert.are.same({ candidate = 'b', estimate = 90, lo = 88, hi = 94, separated = true,
      overlapping = 0 }, sep)
    -- The runner-up is the next estimate, whatever its rung; its high end reaches 95.
    sep = search.separation(best, { clear, best, close })
    assert.are.equal('c', sep.candidate)
    assert.is_false(sep.separated)
    assert.are.equal(1, sep.overlapping)
    -- An unbounded interval is never below anything; alone, there is no runner-up.
    sep = search.separation(best, { best, { label = 'd', estimate = 50, lo = 10 } })
    assert.is_false(sep.separated)
    assert.is_nil(sep.hi)
    assert.is_nil(search.separation(best, { best }))
    assert.is_nil(search.separation(nil, { best, clear }))
  end)

  -- A finished search document: `b` is the best; `lo_a`/`hi_a` the interval of `a`.
  local function doc(hi_a, spent)
    return { schema = 'tplua.search/1', platform = 'nvd', state = 'complete',
      strategy = 'halving', metric = 'tokens_per_second', best = 'b',
      settings = { eta = 2, min_iters = 20, max_iters = 80, budget = 0.6, level = 0.95 },
      candidates = { { candidate = 'a', estimate = 5996, lo = 4916, hi = hi_a, iters = 80 },
        { candidate = 'b', estimate = 8593, lo = 6788, hi = 11708, iters = 80 },
        { candidate = 'c', estimate = 1000, lo = 900, hi = 1100, iters = 20 } },
      rungs = {}, spent_gpu_seconds = spent, grid_gpu_seconds = 100, spent_gpu_iters = 560,
      grid_gpu_iters = 960 }
  end

  local function text(d)
    return table.concat(present.lines(d), '\n')
  end

  it('prints the separation, and what its budget and GPU figures count', function()
    local t = text(doc(6500, 50))
    assert.truthy(t:find("budget 60% of the grid's GPU-time,", 1, true), t)
    assert.truthy(t:find('  best: [b] 8593 [6788, 11708] tokens/s over 80 measured iterations\n'
      .. '  separated from the runner-up at 95%: [a] 5996 [4916, 6500], its high end below the '
      .. "best's low end 6788\n", 1, true), t)
    assert.truthy(t:find('GPU-time (GPUs x wall time, start-up included): 50 GPU-s, 50.0% of '
      .. "the full grid's 100 GPU-s (estimated from what the runs measured), within the 60% "
      .. 'budget', 1, true), t)
    assert.truthy(t:find('GPU-iterations (measured iterations x GPUs, start-up and warm-up '
      .. "excluded): 560 of the grid's 960 (58.3%)", 1, true), t)
    t = text(doc(7683, 88))
    assert.truthy(t:find('NOT separated from the runner-up at 95%: [a] 5996 [4916, 7683] '
      .. "reaches the best's low end 6788 (1 candidate in all): the measurements cannot tell "
      .. 'which is faster', 1, true), t)
    assert.truthy(t:find('88.0% of the full grid\'s 100 GPU-s (estimated from what the runs '
      .. 'measured), over the 60% budget: the nominal schedule is never cut', 1, true), t)
    local md = table.concat(present.markdown(doc(7683, 88)), '\n')
    assert.truthy(md:find('NOT separated from the runner-up at 95%', 1, true), md)
  end)
end)
