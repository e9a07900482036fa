-- The stopping benchmark's replay (bench/stopping/run starts it): step-time series replayed
-- through tp.run's stop monitor (tp.run.replay_stop, the code a live run uses), the iterations a
-- stop rule saves and how often the stopped runs' intervals cover their full runs' means.
--
--   tplua bench/stopping/harness.lua [FIXTURE] [REPS] [CI] [SEED] [REAL_CI]
--
-- The real series are replayed at CI (the savings) and again at REAL_CI (default 0.15): step
-- times of CPU ranks on a 2-core machine vary by several percent a step (by far more when other
-- work shares the cores), so that a 1% interval may be out of reach in 300 iterations and their
-- coverage is measured at a wider one as well.
--
-- Two sets of series:
--   real       the full runs of tests/fixtures/stopping/reftrain_runs.json (bench/stopping/
--              record.lua: the reference trainer on this machine's CPUs, DDP over gloo), each
--              replayed as recorded, and each replayed again from many start offsets of its
--              steady part with its own warm-up in front (the same real values, other windows);
--   generated  REPS series with a start-up iteration and a warm-up, AR(1) noise (relative sd
--              and lag-1 correlation drawn per series) and occasional slow iterations, of
--              100, 200, 500 and 1000 iterations (the shape of examples/runs/generate.lua's
--              step times, which come from published figures, with the noise widened).
-- A run's "full mean" is what its record would say had it gone to the end: the mean step time of
-- the steady-state window tp.stats.steady_state (MSER-5) finds in the whole series. A stopped
-- run's interval covers it when lo <= full mean <= hi.
local stats = require('tp.stats')
local json = require('tp.json')
local run = require('tp.run')

local fixture = arg[1] or 'tests/fixtures/stopping/reftrain_runs.json'
local reps = math.tointeger(tonumber(arg[2] or '2000'))
local ci_want = tonumber(arg[3] or '0.01')
local seed = math.tointeger(tonumber(arg[4] or '1'))
local real_ci = tonumber(arg[5] or '0.15')
local rule = run.stop_rule({ ci = ci_want })
local rule_real = run.stop_rule({ ci = real_ci })

-- xorshift64* uniform and Box-Muller normal values, seeded: the same figures on every machine.
local function rng(s)
  local state = s * 2654435761 + 88172645463325252
  local r = {}
  function r.u()
    state = state ~ (state << 13)
    state = state ~ (state >> 7)
    state = state ~ (state << 17)
    return ((state >> 11) & 0x1fffffffffffff) / 9007199254740992.0
  end
  function r.normal()
    return math.sqrt(-2 * math.log(r.u() + 1e-300)) * math.cos(2 * math.pi * r.u())
  end
  function r.range(a, b)
    return a + (b - a) * r.u()
  end
  return r
end

local function full_mean(xs)
  local w = assert(stats.steady_state(xs))
  local s = 0
  for i = w.first, w.last do
    s = s + xs[i]
  end
  return s / (w.last - w.first + 1), w
end

-- One replay: {n, stopped (or nil), saved share, covered (or nil), relative half-width}.
local function replay(xs, true_mean, with)
  local target = full_mean(xs)
  local res = run.replay_stop(xs, with or rule)
  local out = { n = #xs, target = target }
  if res.stopped and res.verdict.reason == 'converged_ci' then
    local e = res.verdict.estimate
    out.stopped = res.stopped
    out.covered = e.lo <= target and target <= e.hi
    if true_mean then
      out.covered_true = e.lo <= true_mean and true_mean <= e.hi
    end
    out.relative = e.relative
    out.lo, out.hi = e.lo, e.hi
  end
  return out
end

local function tally(name, list)
  local t = { name = name, runs = #list, stopped = 0, covered = 0, planned = 0, done = 0,
    long = 0, long_planned = 0, long_done = 0 }
  local shares = {}
  for _, r in ipairs(list) do
    local done = r.stopped or r.n
    t.planned, t.done = t.planned + r.n, t.done + done
    if r.n >= 100 then
      t.long, t.long_planned, t.long_done = t.long + 1, t.long_planned + r.n, t.long_done + done
    end
    shares[#shares + 1] = 1 - done / r.n
    if r.stopped then
      t.stopped = t.stopped + 1
      t.covered = t.covered + (r.covered and 1 or 0)
      if r.covered_true ~= nil then
        t.covered_true = (t.covered_true or 0) + (r.covered_true and 1 or 0)
      end
    end
  end
  t.saved = t.long_planned > 0 and (1 - t.long_done / t.long_planned) or 0
  t.median_saved = #shares > 0 and stats.median(shares) or 0
  t.coverage = t.stopped > 0 and t.covered / t.stopped or 0 / 0
  t.coverage_se = t.stopped > 0 and math.sqrt(0.95 * 0.05 / t.stopped) or 0 / 0
  return t
end

local function show(t)
  local cov = t.stopped == 0 and 'coverage -' or string.format('coverage %5.1f%% (%d of %d, '
    .. 'se %.1f)%s', t.coverage * 100, t.covered, t.stopped, t.coverage_se * 100,
    t.covered_true and string.format('  of the true mean %5.1f%%',
      t.covered_true / t.stopped * 100) or '')
  print(string.format('  %-34s runs %5d  stopped %5d  saved %5.1f%% (median run %5.1f%%)  %s',
    t.name, t.runs, t.stopped, t.saved * 100, t.median_saved * 100, cov))
end

-- ---------------------------------------------------------------------------------------------
-- Real series.

local doc = assert(json.load_file(fixture))
local real, windows, real_wide, windows_wide = {}, {}, {}, {}
local t0 = os.clock()
local values = 0
for _, r in ipairs(doc.runs) do
  local xs = r.step_time_ms
  real[#real + 1] = replay(xs)
  real_wide[#real_wide + 1] = replay(xs, nil, rule_real)
  values = values + 2 * #xs
  -- Other windows of the same real values: the run's own warm-up (up to its steady start) in
  -- front of its steady part read from offset o, wrapping around, 300 values as recorded.
  local _, w = full_mean(xs)
  local warm, steady = {}, {}
  for i = 1, w.first - 1 do
    warm[#warm + 1] = xs[i]
  end
  for i = w.first, #xs do
    steady[#steady + 1] = xs[i]
  end
  for o = 1, #steady, 7 do
    local ys = table.move(warm, 1, #warm, 1, {})
    for k = 0, #steady - 1 do
      ys[#ys + 1] = steady[(o - 1 + k) % #steady + 1]
    end
    windows[#windows + 1] = replay(ys)
    windows_wide[#windows_wide + 1] = replay(ys, nil, rule_real)
    values = values + 2 * #ys
  end
end

-- The spread of the real series' steady step times (coefficient of variation), for the output.
local cvs = {}
for _, r in ipairs(doc.runs) do
  local xs = r.step_time_ms
  local w = assert(stats.steady_state(xs))
  cvs[#cvs + 1] = stats.cv(table.move(xs, w.first, w.last, 1, {}))
end
local cv_range = #cvs > 0 and string.format('%.0f-%.0f%%', stats.min(cvs) * 100,
  stats.max(cvs) * 100) or '-'

-- ---------------------------------------------------------------------------------------------
-- Generated series.

local gen = {}
local g = rng(seed)
local LENGTHS = { 100, 200, 500, 1000 }
for i = 1, reps do
  local n = LENGTHS[(i - 1) % #LENGTHS + 1]
  local mu = g.range(0.05, 5)                -- seconds per step
  local cv = g.range(0.003, 0.03)            -- per-iteration noise, relative
  local phi = g.range(0, 0.8)                -- lag-1 autocorrelation of the noise
  local startup = g.range(3, 15)             -- the first iteration: start-up, compilation
  local warm = math.floor(g.range(2, 20))    -- iterations settling in, x(1 + 0.15 .. 0)
  local xs, e = {}, 0
  for k = 1, n do
    e = phi * e + math.sqrt(1 - phi * phi) * g.normal()
    local f = 1 + cv * e
    if k == 1 then
      f = f * startup
    elseif k <= warm then
      f = f * (1 + 0.15 * (warm - k + 1) / warm)
    end
    if g.u() < 0.01 then
      f = f * g.range(1.03, 1.09)            -- one iteration in 100 slower (a GC, a log flush)
    end
    xs[k] = mu * f
  end
  -- The true steady mean: mu x E[f] = mu (0.99 + 0.01 x 1.06).
  gen[#gen + 1] = replay(xs, mu * 1.0006)
  values = values + n
end
local cpu = os.clock() - t0

-- ---------------------------------------------------------------------------------------------
-- Figures and goals.

print(string.format('stop rule: %s', run.describe_stop(rule)))
print(string.format('real series: %d full runs of the reference trainer (%s), recorded %s on %s',
  #doc.runs, doc.runs[1] and (#doc.runs[1].step_time_ms .. ' iterations each') or '-',
  tostring(doc.recorded_at), tostring(doc.host and doc.host.uname)))
local t_real = tally('real runs, as recorded', real)
local t_win = tally('real runs, other windows', windows)
local t_gen = tally('generated (100-1000 iterations)', gen)
show(t_real)
show(t_win)
local t_real_wide = tally(string.format('real runs, as recorded, ci %g', real_ci), real_wide)
local t_win_wide = tally(string.format('real runs, other windows, ci %g', real_ci), windows_wide)
show(t_real_wide)
show(t_win_wide)
show(t_gen)
local by_len = {}
for i, r in ipairs(gen) do
  local n = LENGTHS[(i - 1) % #LENGTHS + 1]
  by_len[n] = by_len[n] or {}
  table.insert(by_len[n], r)
end
for _, n in ipairs(LENGTHS) do
  show(tally(string.format('  generated, %d iterations', n), by_len[n]))
end
print(string.format('monitor cost: %.2f us per step time (%d values replayed, %.2f s CPU)',
  cpu / values * 1e6, values, cpu))

local nominal = rule.confidence
local function goal(ok, text)
  print(string.format('%s %s', ok and 'PASS' or 'MISS', text))
  return ok
end
local ok = true
ok = goal(t_gen.saved >= 0.30, string.format('iterations saved on runs of 100+ iterations at CI '
  .. 'half-width %g%%, generated series: %.1f%% (goal >= 30%%)', ci_want * 100, t_gen.saved * 100))
  and ok
print(string.format('     (real series at %g%%: %.1f%% saved, %d of %d stopped: their steady '
  .. 'step times vary by %s; a %g%% interval needs far more than their %s iterations)',
  ci_want * 100, t_win.saved * 100, t_real.stopped + t_win.stopped, t_real.runs + t_win.runs,
  cv_range, ci_want * 100, doc.runs[1] and #doc.runs[1].step_time_ms or '-'))
ok = goal(t_gen.coverage >= nominal - 0.02, string.format('coverage of the full-run means by '
  .. 'the stopped CIs, generated: %.1f%% of %d (goal >= %.0f%%, nominal %.0f%%)',
  t_gen.coverage * 100, t_gen.stopped, (nominal - 0.02) * 100, nominal * 100)) and ok
local rw = t_win_wide
ok = goal(rw.stopped > 0 and rw.coverage >= nominal - 0.02 - 2 * rw.coverage_se,
  string.format('coverage, real series (all windows) at CI half-width %g%%: %.1f%% of %d (goal '
  .. '>= %.1f%%: nominal - 2 points - 2 se; the windows overlap, so se is optimistic)',
  real_ci * 100, rw.coverage * 100, rw.stopped, (nominal - 0.02 - 2 * rw.coverage_se) * 100))
  and ok
os.exit(ok and 0 or 1)
