-- tp.run._stop: stopping a run when its number is known. A run's `stop` rule (docs/stopping.md)
-- asks for the step-time mean of its steady state to a given precision: once MSER-5 finds the
-- steady state and the batch-means confidence interval of its mean (autocorrelation taken into
-- account) is narrower than `ci` x the mean, with at least `min_iters` steady iterations, the
-- interval is held and checked against the iterations that follow (`confirm` x the window more);
-- when they agree with it, the run has given its answer and tp.run stops it (stopped_by =
-- 'converged_ci', a success).
--
-- The interval: the steady window is cut into batches of b = ceil(4 tau) values, tau = (1 + r1)
-- / (1 - r1) the integrated autocorrelation time of an AR(1) series with the window's lag-1
-- autocorrelation r1, so that the batch means are nearly independent; with k >= `batches` such
-- batches, mean +- t(k - 1) x sd(batch means) / sqrt(k). Until the window holds `batches` of
-- them, there is an estimate (on `batches` shorter batches, for the record) but no stop. The
-- batch means must look independent (lag-1 autocorrelation below 1.645 / sqrt(k)), show no trend
-- (the t test of their least-squares slope) and the window must look stationary (Heidelberger &
-- Welch's Cramer-von Mises test).
--
-- Drift: a step time that moves slowly (clocks, thermals, power capping, a neighbour's load) is
-- not averaged out by more iterations, and an interval taken before it moves says nothing of the
-- rest of the run. The held interval is the rule's prediction; when the mean of the iterations
-- after it falls outside it (a two-sample test at the rule's level), the run drifts: it is never
-- stopped as converged, and may be stopped only with stopped_by = 'drift' once its interval,
-- widened by what the drift could still move the full run's mean (the shift seen, and the trend
-- of the batch means carried over the iterations still planned, each at its upper confidence
-- bound, times the share of the run still to come), is within `ci`. The record then says so.
--
-- The monitor is incremental: each step time costs O(1) (prefix sums; a batch mean every 5
-- values). The check (MSER over the batch means, the interval from the prefix sums, the
-- stationarity test over the window: O(n) together) runs at each new batch of 5 up to 200
-- batches and then each time the series has grown by another 0.5%, so a run of n iterations
-- costs O(n) in all, amortised O(1) a log line. The truncation is tp.stats.mser's (same batch
-- means, same Welford walk, same tie rule) and the interval tp.stats.batch_means_ci's, on the
-- values seen so far; tests/spec/stopping_spec.lua checks both against the C functions.
local json = require('tp.json')
local stats = require('tp.stats')

local M = {}

--- Defaults of a stop rule: the 95% interval's half-width within 1% of the mean, at least 50
--- steady iterations, at least 20 batch means, the interval confirmed over two thirds of its
--- window more, no maximum. Fewer batches stop sooner but the first interval found narrow enough
--- is then too often one whose own noise made it narrow; a shorter confirmation saves more
--- iterations but lets through more drifts that begin after the stop (bench/stopping/run
--- measures both; docs/stopping.md has the figures).
M.DEFAULTS = { ci = 0.01, confidence = 0.95, min_iters = 50, batches = 20, confirm = 2 / 3 }

--- How many correlation times a batch spans: b = ceil(TAU_FACTOR x tau) (docs/stopping.md).
M.TAU_FACTOR = 4

--- The stationarity test's 5% critical value: the upper 5% point of the Cramer-von Mises
--- statistic of a Brownian bridge, 0.461 (Anderson & Darling 1952), as Heidelberger and Welch use.
M.CVM_CRITICAL = 0.461

--- The batch means' lag-1 autocorrelation must stay below BATCH_LAG1_Z / sqrt(k).
M.BATCH_LAG1_Z = 1.645

-- MSER's batch (MSER-5, as the record's steady state).
local MSER_BATCH = 5
-- Check at every batch of 5 up to this many, then every time the series grew by 1/CHECK_EVERY.
local CHECK_EVERY = 200

local FIELDS = {
  ci = 'the relative half-width wanted, a number in (0, 1) (0.01 = 1% of the mean)',
  confidence = 'the confidence level, a number in [0.5, 1) (default 0.95)',
  min_iters = 'a whole number >= 1 of steady iterations before a stop (default 50)',
  max_iters = 'a whole number >= min_iters: stop there even when not converged',
  observe = 'a boolean: true only records when the run would have stopped (default false)',
  batches = 'the least number of batch means of the interval, a whole number in [2, 1000] '
    .. '(default 20)',
  confirm = 'the share of the steady window watched again before a stop, a number in [0, 4] '
    .. '(default 0.667; 0 stops at the first narrow interval)',
}

local function bad(where, k, v)
  error(string.format('%sstop.%s: %s expected, got %s', where, k, FIELDS[k],
    type(v) == 'string' and string.format('%q', v) or tostring(v)), 0)
end

local function whole(v)
  return (type(v) == 'number' and math.tointeger(v)) or nil
end

--- Checks a stop rule and returns it normalised (defaults filled in). `where` prefixes the
--- message ("experiment 'x': ", "run 'a': "); errors are raised with level 0 (no position).
---```lua
---tp.run._stop.check({ ci = 0.02 })  --> {ci = 0.02, confidence = 0.95, min_iters = 50, ...}
---```
---@param stop table
---@param where? string
---@return table rule
function M.check(stop, where)
  where = where or ''
  if type(stop) ~= 'table' then
    error(string.format('%sstop: a table {ci = 0.01, min_iters = 50, max_iters = N, '
      .. 'confidence = 0.95} expected, got %s', where, type(stop)), 0)
  end
  for k in pairs(stop) do
    if not FIELDS[k] then
      error(string.format("%sstop: unknown field '%s' (known: batches, ci, confidence, "
        .. 'confirm, max_iters, min_iters, observe)', where, tostring(k)), 0)
    end
  end
  local out = {}
  for k, v in pairs(M.DEFAULTS) do
    out[k] = v
  end
  local v = stop.ci
  if v ~= nil then
    if type(v) ~= 'number' or not (v > 0 and v < 1) then
      bad(where, 'ci', v)
    end
    out.ci = v
  end
  v = stop.confidence
  if v ~= nil then
    if type(v) ~= 'number' or not (v >= 0.5 and v < 1) then
      bad(where, 'confidence', v)
    end
    out.confidence = v
  end
  v = stop.confirm
  if v ~= nil then
    if type(v) ~= 'number' or not (v >= 0 and v <= 4) then
      bad(where, 'confirm', v)
    end
    out.confirm = v
  end
  for _, k in ipairs({ 'min_iters', 'max_iters', 'batches' }) do
    v = stop[k]
    if v ~= nil then
      local n = whole(v)
      if not n or n < 1 or (k == 'batches' and (n < 2 or n > 1000)) then
        bad(where, k, v)
      end
      out[k] = n
    end
  end
  if stop.observe ~= nil then
    if type(stop.observe) ~= 'boolean' then
      bad(where, 'observe', stop.observe)
    end
    out.observe = stop.observe or nil
  end
  if out.max_iters and out.max_iters < out.min_iters then
    error(string.format('%sstop.max_iters: %d is below min_iters (%d)', where, out.max_iters,
      out.min_iters), 0)
  end
  return out
end

--- One line describing a rule (the plan and the live view).
---@param rule table a checked rule
---@return string
function M.describe(rule)
  return string.format('stop when the %g%% CI of the steady step time is within %g%% of its '
    .. 'mean (>= %d batch means, >= %d steady iterations%s), %s', rule.confidence * 100,
    rule.ci * 100, rule.batches, rule.min_iters,
    rule.max_iters and (', at most ' .. rule.max_iters) or '',
    rule.confirm > 0 and string.format('confirmed over %.0f%% of its window more, or with '
      .. 'stopped_by = drift and a widened interval when the step time moved', rule.confirm * 100)
    or 'not confirmed')
    .. (rule.observe and '; observed only, the run goes on' or '')
end

---@class tp.run.StopMonitor
local Monitor = {}
Monitor.__index = Monitor

--- A monitor for one run: feed it each step time with `add`. `planned`, the iterations the run
--- was started for, sizes what a drift could still move (unknown: as many again as the window).
---@param rule table a checked rule (M.check)
---@param planned? integer
---@return tp.run.StopMonitor
function M.new(rule, planned)
  return setmetatable({
    rule = rule,
    planned = planned,
    tq = {},
    xs = {}, its = {}, prefix = { [0] = 0.0 }, sq = { [0] = 0.0 }, lag = { [0] = 0.0, 0.0 },
    shift = nil, ys = {},
    next_check = 1, checks = 0, estimate = nil, verdict = nil,
    hold = nil, drift = nil, confirmations = 0,
  }, Monitor)
end

-- MSER over the batch means ys[1..m]: tp_stats_mser's walk (engine/stats.c), so the same d*.
-- Returns d* (0-based count of truncated batches).
local function mser(ys, m)
  local dmax = m // 2
  local mean, m2 = 0.0, 0.0
  local best_d, best = 0, math.huge
  for k = 1, m do
    local d = m - k
    local v = ys[d + 1]
    local delta = v - mean
    mean = mean + delta / k
    m2 = m2 + delta * (v - mean)
    if d <= dmax then
      local stat = (m2 > 0.0 and m2 or 0.0) / (k * k)
      if stat <= best then
        best, best_d = stat, d
      end
    end
  end
  return best_d, dmax
end

-- The two-sided t quantile of the rule's confidence with k - 1 degrees of freedom (cached).
function Monitor:quantile(k)
  local q = self.tq[k]
  if not q then
    q = stats.t_quantile((1 + self.rule.confidence) / 2, k - 1)
    self.tq[k] = q
  end
  return q
end

-- The batch-means interval of values first..n (1-based) from the prefix sums, with k batches
-- (the last k x b values, b = floor(count / k)).
function Monitor:interval(first, n, k)
  local count = n - first + 1
  if count < k then
    return nil
  end
  local b = count // k
  local from = n - k * b  -- prefix index before the first value used
  local p, shift = self.prefix, self.shift
  local y = {}
  local sum = 0.0
  for j = 1, k do
    local v = shift + (p[from + j * b] - p[from + (j - 1) * b]) / b
    y[j] = v
    sum = sum + v
  end
  local mean = sum / k
  local ss, comp = 0.0, 0.0
  for j = 1, k do
    local d = y[j] - mean
    ss = ss + d * d
    comp = comp + d
  end
  ss = ss - comp * comp / k
  -- Lag-1 autocorrelation of the batch means: near 0 when the batches are long enough.
  local c1 = 0.0
  for j = 2, k do
    c1 = c1 + (y[j] - mean) * (y[j - 1] - mean)
  end
  local se = math.sqrt((ss > 0 and ss or 0) / (k - 1) / k)
  local half = self:quantile(k) * se
  local ci = { mean = mean, half_width = half, lo = mean - half, hi = mean + half, se = se,
    batches = k, batch_size = b, first = from + 1, batch_lag1 = ss > 0 and c1 / ss or 0 }
  -- The trend of the batch means: their least-squares slope against time, per value, its
  -- standard error from the residuals (k - 2 degrees of freedom) and its t statistic.
  if k >= 4 then
    local mid, sxx, sxy = (k + 1) / 2, 0.0, 0.0
    for j = 1, k do
      sxx = sxx + (j - mid) * (j - mid)
      sxy = sxy + (j - mid) * (y[j] - mean)
    end
    local beta = sxy / sxx
    local rss = 0.0
    for j = 1, k do
      local r = y[j] - mean - beta * (j - mid)
      rss = rss + r * r
    end
    local se_beta = math.sqrt(rss / (k - 2) / sxx)
    ci.slope, ci.slope_se = beta / b, se_beta / b
    ci.trend_t = se_beta > 0 and beta / se_beta or (beta == 0 and 0 or math.huge)
  end
  return ci
end

-- Lag-1 autocorrelation of values first..n from the prefix sums (centred on the first value).
function Monitor:lag1(first, n)
  local cnt = n - first + 1
  if cnt < 3 then
    return 0
  end
  local shift = self.shift
  local s1 = self.prefix[n] - self.prefix[first - 1]
  local m = s1 / cnt
  local var = (self.sq[n] - self.sq[first - 1]) - cnt * m * m
  if var <= 0 or var ~= var then
    return 0
  end
  local a, b = self.xs[first] - shift, self.xs[n] - shift
  local cov = (self.lag[n] - self.lag[first]) - m * (s1 - a) - m * (s1 - b) + (cnt - 1) * m * m
  return cov / var
end

-- Cramer-von Mises statistic of the window first..n against a stationary mean (the first test
-- of Heidelberger & Welch 1983, "Simulation run length control in the presence of an initial
-- transient", Operations Research 31(6)): the scaled partial sums B(t) = (S(Nt) - Nt xbar) /
-- sqrt(N s2) form a Brownian bridge when the window is stationary, s2 the variance of the
-- mean's estimator times N (here from the batch means); the statistic is the mean of B^2.
function Monitor:cvm(first, n, s2)
  local cnt = n - first + 1
  if s2 <= 0 or s2 ~= s2 then
    return 0
  end
  local p = self.prefix
  local base = p[first - 1]
  local mean = (p[n] - base) / cnt
  local scale = cnt * s2
  local sum = 0.0
  for k = 1, cnt do
    local b = (p[first - 1 + k] - base) - k * mean
    sum = sum + b * b
  end
  return sum / scale / cnt
end

-- The check: steady state by MSER-5, then the interval of the steady window.
function Monitor:check()
  local n, m = #self.xs, #self.ys
  self.checks = self.checks + 1
  local d, dmax = mser(self.ys, m)
  if d >= dmax then
    -- The least MSER at the end of the first half: the warm-up may not be over yet.
    self.estimate = nil
    return
  end
  local start = d * MSER_BATCH + 1
  -- The batches must be long against the series' correlation time, or their means are
  -- correlated and the interval too narrow: b >= TAU_FACTOR x tau, tau = (1 + r1) / (1 - r1)
  -- the integrated autocorrelation time of an AR(1) series with the lag-1 autocorrelation r1
  -- of the window. As many batches of b as the window holds, at least the rule's `batches`.
  local r1 = math.max(0, math.min(self:lag1(start, n), 0.98))
  local tau = (1 + r1) / (1 - r1)
  local b = math.max(1, math.ceil(M.TAU_FACTOR * tau))
  local k = (n - start + 1) // b
  local enough = k >= self.rule.batches
  local ci = self:interval(start, n, enough and k or self.rule.batches)
  if not ci then
    self.estimate = nil
    return
  end
  -- And their means must look independent: lag-1 autocorrelation below the one-sided 5% point
  -- of its distribution under independence, about 1.645 / sqrt(k) (von Neumann; Fishman's
  -- LBATCH rule tests the batch means the same way).
  enough = enough and ci.batch_lag1 <= M.BATCH_LAG1_Z / math.sqrt(ci.batches)
  -- And the window must look stationary: no drift of its mean that the interval would hide (a
  -- neighbour's load, clocks settling, a data-loader slowing down).
  ci.independent = enough
  -- And the batch means must show no trend: the t test of their slope at the rule's level.
  ci.trend = ci.trend_t ~= nil and math.abs(ci.trend_t) > self:quantile(ci.batches - 1)
  if enough then
    ci.cvm = self:cvm(start, n, ci.batch_size * ci.batches * ci.se * ci.se)
    ci.stationary = ci.cvm <= M.CVM_CRITICAL
    enough = ci.stationary and not ci.trend
  end
  ci.lag1, ci.tau, ci.batches_long_enough = r1, tau, enough
  local its = self.its
  ci.steady_first = start
  ci.steady_first_iteration = its[start]
  ci.steady_iterations = its[n] - (start > 1 and its[start - 1] or 0)
  ci.relative = ci.mean > 0 and ci.half_width / ci.mean or math.huge
  ci.iteration = its[n]
  ci.count = n
  self.estimate = ci
end

-- What a drift could still move the full run's mean by, beyond the interval: the share of the
-- run still to come times the larger of the shift the confirmation saw and the trend of the
-- window's batch means carried over the iterations still planned (each at its upper confidence
-- bound). Returns the estimate widened by it (a copy), the interval of the batch means kept.
function Monitor:widen(e)
  local d = self.drift
  local values = e.count - e.steady_first + 1
  local per_value = e.steady_iterations / values
  local left
  if self.planned then
    left = math.max(0, self.planned - e.iteration) / per_value
  else
    left = values  -- unknown: as many again as the window
  end
  local rest = left / (values + left)
  local t = self:quantile(e.batches)
  local by_shift = rest * (math.abs(d.shift) + t * d.shift_se)
  local by_trend = 0
  if e.slope then
    by_trend = (math.abs(e.slope) + self:quantile(e.batches - 1) * e.slope_se) * left / 2
  end
  local w = {}
  for k, v in pairs(e) do
    w[k] = v
  end
  w.batch_means_half_width = e.half_width
  w.drift_allowance = math.max(by_shift, by_trend)
  w.half_width = e.half_width + w.drift_allowance
  w.lo, w.hi = e.mean - w.half_width, e.mean + w.half_width
  w.relative = e.mean > 0 and w.half_width / e.mean or math.huge
  w.widened = true
  return w
end

-- The confirmation of a held interval: the mean of the values after it against its mean, and
-- the mean of the later half of them too (a shift that begins during the stretch shows there
-- first). The standard error of each difference comes from the variance per value of the whole
-- steady window now (its batch means), which the selection of a narrow held interval does not
-- bias low. Outside t x that: the step time moved.
function Monitor:confirm(hold, n)
  local e = self.estimate
  local variance = e and e.se * e.se * e.batches * e.batch_size or hold.variance
  local function look(from)
    local count = n - from
    local mean = self.shift + (self.prefix[n] - self.prefix[from]) / count
    local se = math.sqrt(variance / hold.used + variance / count)
    local shift = mean - hold.mean
    return { ok = math.abs(shift) <= hold.t * se, shift = shift, shift_se = se, mean = mean,
      held_mean = hold.mean, held_at_iteration = hold.iteration, at_iteration = self.its[n],
      z = se > 0 and shift / se or 0, iterations = self.its[n] - self.its[from] }
  end
  local c = look(hold.count)
  if c.ok and n - hold.count >= 2 * MSER_BATCH then
    local later = look(n - (n - hold.count) // 2)
    if not later.ok then
      return later
    end
  end
  return c
end

-- The decision after a check: nil (go on) or a verdict.
function Monitor:decide()
  local rule, e, n = self.rule, self.estimate, #self.xs
  local confirmed = false
  local hold = self.hold
  if hold and n >= hold.due then
    -- The held interval meets the iterations that followed it.
    self.hold = nil
    local c = self:confirm(hold, n)
    self.confirmations = self.confirmations + 1
    if c.ok then
      confirmed = true
    elseif not self.drift or math.abs(c.shift) > math.abs(self.drift.shift) then
      c.by = 'confirmation'
      self.drift = c
    end
  end
  if not e or e.steady_iterations < rule.min_iters then
    return nil
  end
  if self.drift then
    -- A run that drifts: stopped only once the widened interval is narrow enough.
    if e.batches >= rule.batches and e.independent then
      local w = self:widen(e)
      if w.relative <= rule.ci then
        return { reason = 'drift', estimate = w, drift = self.drift }
      end
    end
    return nil
  end
  if e.relative > rule.ci or not e.batches_long_enough then
    return nil
  end
  if confirmed or rule.confirm <= 0 then
    return { reason = 'converged_ci', estimate = e }
  end
  if not self.hold then
    local values = n - e.steady_first + 1
    self.hold = { count = n, iteration = e.iteration, mean = e.mean, se = e.se,
      used = e.batches * e.batch_size, variance = e.se * e.se * e.batches * e.batch_size,
      t = self:quantile(e.batches),
      due = n + math.max(1, math.ceil(rule.confirm * values)) }
  end
  return nil
end

--- Adds one step time (seconds) and its iteration number (default: its position); `planned`
--- updates the iterations the run was started for (a log line may say). Returns the verdict once
--- the run should stop — {reason = 'converged_ci' | 'drift' | 'max_iters', estimate, drift} —
--- and the same verdict on every later call; nil while it should go on.
---@param value number a finite step time
---@param iteration? integer
---@param planned? integer
---@return table|nil verdict
function Monitor:add(value, iteration, planned)
  if self.verdict then
    return self.verdict
  end
  if planned then
    self.planned = planned
  end
  local xs = self.xs
  local n = #xs + 1
  xs[n] = value
  iteration = iteration or n
  self.its[n] = iteration
  self.shift = self.shift or value
  local c = value - self.shift
  self.prefix[n] = self.prefix[n - 1] + c
  self.sq[n] = self.sq[n - 1] + c * c
  if n > 1 then
    self.lag[n] = self.lag[n - 1] + c * (xs[n - 1] - self.shift)
  end
  if n % MSER_BATCH == 0 then
    local s = 0.0
    for i = n - MSER_BATCH + 1, n do
      s = s + xs[i]
    end
    local ys = self.ys
    ys[#ys + 1] = s / MSER_BATCH
    local m = #ys
    if m >= 2 and m >= self.next_check then
      self.next_check = m <= CHECK_EVERY and m + 1 or m + (m + CHECK_EVERY - 1) // CHECK_EVERY
      self:check()
      local v = self:decide()
      if v then
        self.verdict = v
        return v
      end
    end
  end
  local max = self.rule.max_iters
  if max and iteration >= max then
    if not self.estimate and #self.ys >= 2 then
      self:check()
    end
    local e = self.estimate
    if e and self.drift then
      e = self:widen(e)
    end
    self.verdict = { reason = 'max_iters', estimate = e, drift = self.drift }
    return self.verdict
  end
  return nil
end

-- The drift a monitor saw, as the record's `drift` member (nil when none): its confirmation that
-- failed, else the trend or the non-stationarity of its last window; with the warning.
local function drift_of(monitor, e)
  local d = monitor and monitor.drift
  if d then
    local rel = d.held_mean ~= 0 and d.shift / d.held_mean or 0
    local out = { by = d.by, held_mean_s = d.held_mean, held_at_iteration = d.held_at_iteration,
      later_mean_s = d.mean, detected_at_iteration = d.at_iteration, shift_s = d.shift,
      shift_relative = rel, z = d.z }
    out.warning = string.format('the step time drifted: the %d iterations after iteration %s '
      .. 'averaged %.6g s, %+.2f%% from the %.6g s held there (z = %.1f)', d.iterations,
      tostring(d.held_at_iteration), d.mean, rel * 100, d.held_mean, d.z)
    if e and e.widened then
      out.allowance_s = e.drift_allowance
      out.warning = out.warning .. string.format('; the interval is widened by %.3g s for what '
        .. 'the drift could still move the run\'s mean', e.drift_allowance)
    end
    return out
  end
  if e and (e.trend or e.stationary == false) then
    local out = { by = e.trend and 'trend' or 'stationarity', trend_t = e.trend_t,
      slope_relative_per_iteration = (e.mean ~= 0 and e.slope) and e.slope
        / (e.steady_iterations / (e.count - e.steady_first + 1)) / e.mean or nil,
      cvm = e.cvm, detected_at_iteration = e.iteration }
    if e.trend then
      out.warning = string.format('the step time drifts: the batch means of its last steady '
        .. 'window trend by %+.3g%% of the mean per 100 iterations (t = %.1f)',
        (out.slope_relative_per_iteration or 0) * 1e4, e.trend_t)
    else
      out.warning = string.format('the step time is not stationary: the Cramer-von Mises '
        .. 'statistic of its last steady window is %.3g (above %.3g)', e.cvm, M.CVM_CRITICAL)
    end
    return out
  end
  return nil
end

--- One line about a verdict (the stop message of the run).
---@param verdict table
---@return string
function M.message(verdict)
  local e = verdict.estimate
  local what = e and string.format('steady step time %.6g s +- %.3g (%.3g%% of the mean, %d '
    .. 'batches of %d) over %d steady iterations from iteration %s', e.mean, e.half_width,
    e.relative * 100, e.batches, e.batch_size, e.steady_iterations,
    tostring(e.steady_first_iteration)) or 'no steady-state interval yet'
  if verdict.reason == 'converged_ci' then
    return 'converged: ' .. what
  end
  local d = verdict.drift
  local moved = d and string.format('; the step time moved by %+.2f%% after iteration %s',
    d.held_mean ~= 0 and d.shift / d.held_mean * 100 or 0, tostring(d.held_at_iteration)) or ''
  if verdict.reason == 'drift' then
    return string.format('drift: %s, widened by %.3g s for the drift (the batch means\' '
      .. 'interval: +- %.3g)%s', what, e.drift_allowance, e.batch_means_half_width, moved)
  end
  return 'max_iters reached without convergence: ' .. what .. moved
end

--- The record's `stopping` member (docs/record.md): the rule, whether and why the run was
--- stopped, the iterations done, planned and saved, the interval reached (at the stop, or the
--- last one computed; widened when the step time drifted) and the drift seen, with its warning.
---@param rule table
---@param monitor tp.run.StopMonitor|nil
---@param done integer|nil last iteration of the run's log
---@param planned integer|nil iterations the run was started for
---@return table
function M.summary(rule, monitor, done, planned)
  local v = monitor and monitor.verdict
  local e = (v and v.estimate) or (monitor and monitor.estimate)
  if e and not e.widened and monitor and monitor.drift then
    if planned then
      monitor.planned = planned
    end
    e = monitor:widen(e)
  end
  local null = json.null
  local out = {
    rule = { ci = rule.ci, confidence = rule.confidence, min_iters = rule.min_iters,
      max_iters = rule.max_iters or null, batches = rule.batches, confirm = rule.confirm or 0,
      observe = rule.observe == true },
    converged = v ~= nil and v.reason == 'converged_ci',
    -- Observed only: what the rule would have done; the run went on.
    -- Decided on the last planned iteration (at_end): the run ended by itself, not stopped.
    stopped_by = (v and not rule.observe and not v.at_end) and v.reason or null,
    would_stop_by = (v and rule.observe) and v.reason or null,
    decided_at_iteration = v and e and e.iteration or null,
    iterations_done = done or null,
    iterations_planned = planned or null,
    iterations_saved = (v and not rule.observe and not v.at_end and done and planned
      and planned > done)
      and (planned - done) or 0,
    -- Observed only: the iterations after the one the rule would have stopped at.
    iterations_saveable = (v and rule.observe and e and planned and planned > e.iteration)
      and (planned - e.iteration) or null,
    checks = monitor and monitor.checks or 0,
    confirmations = monitor and monitor.confirmations or 0,
    ci = null,
    drift = null,
    warning = null,
  }
  if e then
    out.ci = { mean_step_time_s = e.mean, half_width_s = e.half_width, lo = e.lo, hi = e.hi,
      relative_half_width = e.relative, level = rule.confidence, batches = e.batches,
      batch_size = e.batch_size, steady_first_iteration = e.steady_first_iteration,
      steady_iterations = e.steady_iterations, at_iteration = e.iteration,
      batch_means_half_width_s = e.batch_means_half_width or e.half_width,
      drift_allowance_s = e.drift_allowance or 0 }
  end
  local d = drift_of(monitor, e)
  if d then
    out.drift, out.warning = d, d.warning
  end
  return out
end

--- Replays a series of step times through a monitor (the benchmark and the tests: the same code
--- as a live run). Returns {stopped = index of the value at which it stopped, or nil, verdict,
--- monitor}.
---@param values number[]
---@param rule table a checked rule
---@param iterations? integer[] iteration numbers (default 1..n)
---@param planned? integer the iterations the run was started for (default: unknown)
---@return table
function M.replay(values, rule, iterations, planned)
  local mon = M.new(rule, planned)
  for i, v in ipairs(values) do
    local verdict = mon:add(v, iterations and iterations[i] or i)
    if verdict then
      return { stopped = i, verdict = verdict, monitor = mon }
    end
  end
  return { monitor = mon }
end

return M
