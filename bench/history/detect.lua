-- Change-point detection quality and speed of tp.stats.change_points on generated series with a
-- known truth (run by bench/history/detect; see there for the options).
--
-- usage: tplua bench/history/detect.lua [--series N] [--seed S] [--tune] [--alpha A]
--          [--min-size M] [--min-segment K]
--
-- Each series stands for one metric of one benchmark, night after night: a length of 30 to 120
-- points, Gaussian noise with a coefficient of variation drawn from 1-2 %, and no step (30 % of the
-- series), one step (45 %) or two steps (25 %) of 2-5 % of the level, up or down, each segment at
-- least --min-segment points long (default 10: a change seen on fewer nights is the job of the
-- "latest runs against the baseline" test, not of change-point detection).
--
-- Figures (goals of docs/history.md, "How changes are found"):
--   found        true steps with a reported change point within 2 points     goal >= 95 %
--   false        reported change points with no true step within 2 points    goal <= 5 %
--   flat alarms  series without a step that report one                        goal <= 5 %
--   time         one detection on a 1,000-point series (median of 5)          goal < 1 s
-- With --tune, the same series under a grid of alpha and min_size (how the defaults were chosen).
local stats = require('tp.stats')
local gpu = require('tp.gpu')

local opts = { series = 2000, seed = 1, min_segment = 10 }
do
  local i = 1
  while arg[i] do
    local k = arg[i]
    if k == '--tune' then
      opts.tune = true
      i = i + 1
    else
      local v = tonumber(arg[i + 1] or '')
      local name = ({
        ['--series'] = 'series',
        ['--seed'] = 'seed',
        ['--alpha'] = 'alpha',
        ['--min-size'] = 'min_size',
        ['--min-segment'] = 'min_segment',
      })[k]
      if not name or not v then
        io.stderr:write('detect.lua: usage: [--series N] [--seed S] [--tune] [--alpha A] ',
          '[--min-size M] [--min-segment K]\n')
        os.exit(2)
      end
      opts[name] = v
      i = i + 2
    end
  end
end

-- Lua 5.4's generator (xoshiro256**) gives the same sequence for a seed on every machine.
local rng = math.random
math.randomseed(math.tointeger(opts.seed) or 1)

local function uniform(a, b)
  return a + (b - a) * rng()
end

local function gauss()
  local u = 1 - rng() -- (0, 1]
  return math.sqrt(-2 * math.log(u)) * math.cos(2 * math.pi * rng())
end

-- Step positions (1-based index of the first point after each step) for a series of n points
-- with `k` steps, every segment at least `seg` long.
local function positions(n, k, seg)
  local out = {}
  if k == 0 then
    return out
  end
  while true do
    out = {}
    for j = 1, k do
      out[j] = math.random(seg + 1, n - seg + 1)
    end
    table.sort(out)
    local ok = true
    for j = 2, k do
      if out[j] - out[j - 1] < seg then
        ok = false
      end
    end
    if ok then
      return out
    end
  end
end

local function make_series(seg)
  local n = math.random(30, 120)
  local r = rng()
  local k = r < 0.30 and 0 or (r < 0.75 and 1 or 2)
  if k == 2 and n < 3 * seg then
    k = 1
  end
  local cv = uniform(0.01, 0.02)
  local steps = positions(n, k, seg)
  local level = uniform(500, 5000) -- tokens/s/GPU, say
  local values = {}
  local j = 1
  local sizes = {}
  for i = 1, n do
    if steps[j] and i == steps[j] then
      local size = uniform(0.02, 0.05) * (rng() < 0.5 and -1 or 1)
      sizes[j] = size
      level = level * (1 + size)
      j = j + 1
    end
    values[i] = level * (1 + cv * gauss())
  end
  return { values = values, steps = steps, sizes = sizes, cv = cv }
end

local corpus = {}
for s = 1, math.tointeger(opts.series) do
  corpus[s] = make_series(math.tointeger(opts.min_segment))
end

-- Recent steps: one step 5 to 9 points before the end of a 30-120 point series (what a nightly
-- check sees in the first week after a change). Reported on their own, without a goal: they show
-- what a larger min_size costs.
local recent = {}
for s = 1, math.tointeger(opts.series) // 4 do
  local n = math.random(30, 120)
  local at = n - math.random(5, 9) + 1
  local cv = uniform(0.01, 0.02)
  local size = uniform(0.02, 0.05) * (rng() < 0.5 and -1 or 1)
  local values = {}
  for i = 1, n do
    values[i] = (i >= at and 1 + size or 1) * 1000 * (1 + cv * gauss())
  end
  recent[s] = { values = values, at = at }
end

-- The best any detector can place a step, for reference: told that a series has exactly one
-- step, the maximum-likelihood location under Gaussian noise (the split with the largest
-- n m / (n + m) (mean difference)^2). Its share within 2 points bounds the found figure.
local function oracle_hits()
  local hits, total = 0, 0
  for _, s in ipairs(corpus) do
    if #s.steps == 1 then
      local v, n = s.values, #s.values
      local prefix = { [0] = 0 }
      for i = 1, n do
        prefix[i] = prefix[i - 1] + v[i]
      end
      local best, best_at = -1, 0
      for t = 2, n - 1 do -- t: first index after the split; sides t - 1 and n - t + 1 long
        local a, b = t - 1, n - t + 1
        local d = (prefix[n] - prefix[t - 1]) / b - prefix[t - 1] / a
        local score = a * b / n * d * d
        if score > best then
          best, best_at = score, t
        end
      end
      total = total + 1
      if math.abs(best_at - s.steps[1]) <= 2 then
        hits = hits + 1
      end
    end
  end
  return hits, total
end

-- Scores one configuration on the corpus.
local function score(cp_opts)
  local truths, found, reported, false_alarms, flat, flat_alarmed = 0, 0, 0, 0, 0, 0
  local small_truths, small_found = 0, 0 -- steps under 2 noise sigma
  local spurious = 0 -- false alarms with no true step within 6 points either
  local single_found = 0 -- steps found in the series with one step
  for _, s in ipairs(corpus) do
    local cps = assert(stats.change_points(s.values, cp_opts))
    reported = reported + #cps
    local used = {}
    for j, t in ipairs(s.steps) do
      truths = truths + 1
      local small = math.abs(s.sizes[j]) / s.cv < 2
      if small then
        small_truths = small_truths + 1
      end
      for c, cp in ipairs(cps) do
        if not used[c] and math.abs(cp.index - t) <= 2 then
          used[c] = true
          found = found + 1
          if small then
            small_found = small_found + 1
          end
          if #s.steps == 1 then
            single_found = single_found + 1
          end
          break
        end
      end
    end
    for c, cp in ipairs(cps) do
      local dist = math.huge
      for _, t in ipairs(s.steps) do
        dist = math.min(dist, math.abs(cp.index - t))
      end
      if not used[c] and dist > 2 then
        false_alarms = false_alarms + 1
        if dist > 6 then
          spurious = spurious + 1
        end
      end
    end
    if #s.steps == 0 then
      flat = flat + 1
      if #cps > 0 then
        flat_alarmed = flat_alarmed + 1
      end
    end
  end
  local recent_found = 0
  for _, s in ipairs(recent) do
    for _, cp in ipairs(assert(stats.change_points(s.values, cp_opts))) do
      if math.abs(cp.index - s.at) <= 2 then
        recent_found = recent_found + 1
        break
      end
    end
  end
  return {
    truths = truths,
    found = found,
    reported = reported,
    false_alarms = false_alarms,
    flat = flat,
    flat_alarmed = flat_alarmed,
    small_truths = small_truths,
    small_found = small_found,
    spurious = spurious,
    single_found = single_found,
    recent_found = recent_found,
  }
end

local function pct(a, b)
  return b > 0 and 100 * a / b or 0
end

local function goal(label, value, ok, want)
  print(string.format('goal  %-52s %7.2f %%  %s  (%s)', label, value, ok and 'PASS' or 'MISS',
    want))
end

local base = { alpha = opts.alpha, min_size = opts.min_size and math.tointeger(opts.min_size) }

if opts.tune then
  print(string.format('%-8s %-8s %8s %8s %10s %8s %10s %9s', 'alpha', 'min_size', 'found%',
    'false%', 'spurious%', 'flat%', 'found<2sd%', 'recent%'))
  for _, alpha in ipairs({ 0.005, 0.01, 0.02, 0.03, 0.05 }) do
    for _, m in ipairs({ 3, 4, 5, 6, 8 }) do
      local r = score({ alpha = alpha, min_size = m })
      print(string.format('%-8g %-8d %8.2f %8.2f %10.2f %8.2f %10.2f %9.2f', alpha, m,
        pct(r.found, r.truths), pct(r.false_alarms, r.reported), pct(r.spurious, r.reported),
        pct(r.flat_alarmed, r.flat), pct(r.small_found, r.small_truths),
        pct(r.recent_found, #recent)))
    end
  end
  print()
end

local r = score(base)
local steps1, steps2 = 0, 0
for _, s in ipairs(corpus) do
  if #s.steps == 1 then
    steps1 = steps1 + 1
  elseif #s.steps == 2 then
    steps2 = steps2 + 1
  end
end
print(string.format('series: %d (seed %d): %d without a step, %d with one, %d with two; ' ..
  '30-120 points, noise CV 1-2 %%, steps 2-5 %%, segments >= %d points', #corpus, opts.seed,
  r.flat, steps1, steps2, opts.min_segment))
print(string.format('options: alpha %s, min_size %s', tostring(base.alpha or 'default'),
  tostring(base.min_size or 'default')))
local oh, ot = oracle_hits()
print(string.format('true steps found within 2 points: %d of %d (%.2f %%); of the steps under 2 ' ..
  'noise sigma: %d of %d (%.2f %%), of the others: %d of %d (%.2f %%)', r.found, r.truths,
  pct(r.found, r.truths), r.small_found, r.small_truths, pct(r.small_found, r.small_truths),
  r.found - r.small_found, r.truths - r.small_truths,
  pct(r.found - r.small_found, r.truths - r.small_truths)))
print(string.format('series with one step: found within 2 points in %d of %d (%.2f %%); for ' ..
  'reference, the maximum-likelihood location of a step known to be the only one is within 2 ' ..
  'points in %d (%.2f %%), the practical ceiling of this figure', r.single_found, ot,
  pct(r.single_found, ot), oh, pct(oh, ot)))
print(string.format('reported change points: %d; false alarms (no true step within 2 points): ' ..
  '%d (%.2f %%), of which %d (%.2f %%) have no true step within 6 points', r.reported,
  r.false_alarms, pct(r.false_alarms, r.reported), r.spurious, pct(r.spurious, r.reported)))
print(string.format('series without a step that report one: %d of %d (%.2f %%)', r.flat_alarmed,
  r.flat, pct(r.flat_alarmed, r.flat)))
print(string.format('recent steps (5-9 points before the end) found within 2 points: %d of %d ' ..
  '(%.2f %%)', r.recent_found, #recent, pct(r.recent_found, #recent)))

-- Speed: a 1,000-point series with three steps.
local big = {}
do
  local level = 1000
  for i = 1, 1000 do
    if i == 250 or i == 600 or i == 800 then
      level = level * (i == 600 and 1.04 or 0.97)
    end
    big[i] = level * (1 + 0.015 * gauss())
  end
end
local times = {}
local found_big
for k = 1, 5 do
  local t0 = gpu.now()
  found_big = assert(stats.change_points(big, base))
  times[k] = gpu.now() - t0
end
table.sort(times)
local idx = {}
for i, c in ipairs(found_big) do
  idx[i] = c.index
end
print(string.format('1,000-point series (steps at 250, 600, 800): change points at %s; ' ..
  'detection %.1f ms (median of 5, min %.1f, max %.1f)', table.concat(idx, ' '), 1e3 * times[3],
  1e3 * times[1], 1e3 * times[5]))

local found_pct = pct(r.found, r.truths)
local false_pct = pct(r.false_alarms, r.reported)
local flat_pct = pct(r.flat_alarmed, r.flat)
goal('true steps found within 2 points', found_pct, found_pct >= 95, '>= 95 %')
goal('false alarms among reported change points', false_pct, false_pct <= 5, '<= 5 %')
goal('series without a step that report one', flat_pct, flat_pct <= 5, '<= 5 %')
print(string.format('goal  %-52s %7.1f ms %s  (< 1000 ms)', 'detection on a 1,000-point series',
  1e3 * times[3], times[3] < 1 and 'PASS' or 'MISS'))
