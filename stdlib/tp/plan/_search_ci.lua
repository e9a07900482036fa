-- tp.plan._search_ci: the intervals a configuration search ranks by (tp.plan.search): the
-- steady-state step times of a candidate's runs by batch means, with the run-to-run variation
-- of a configuration estimated over the candidates measured more than once.
local stats = require('tp.stats')

local M = {}

-- The two-sided Student-t quantile: t with P(|T| > t) = 1 - level (df may be fractional).
local function t_quantile(level, df)
  return stats.t_quantile((1 + level) / 2, df)
end
M.t_quantile = t_quantile

-- The batch means of each run's steady window: {size (of a batch), batches, count (steps
-- batched), mean, windows (runs with step times), runs = { {means, count, mean} ... } (those
-- with a complete batch)}, or nil and why. Each run's MSER-5
-- window (tp.stats.steady_state) is cut into batches of floor(sqrt(n)) step times, n the
-- average window, the oldest leftover dropped, no batch straddling two runs.
local function run_batches(runs)
  local windows, total = {}, 0
  for _, r in ipairs(runs) do
    local times = r.step_times
    if type(times) == 'table' and #times > 0 then
      local first = r.first
      if not first then
        local w = stats.steady_state(times)
        first = w and w.first or 1
      end
      windows[#windows + 1] = { times = times, first = first }
      total = total + #times - first + 1
    end
  end
  if total == 0 then
    return nil, 'no step times'
  end
  local size = math.max(1, math.floor(math.sqrt(total / #windows)))
  local out = { size = size, runs = {}, batches = 0, sum = 0, count = 0, windows = #windows }
  for _, w in ipairs(windows) do
    local n = #w.times - w.first + 1
    local start = w.first + n % size -- the leftover is the oldest part of the window
    local run = { means = {}, sum = 0, count = 0 }
    for b = start, #w.times - size + 1, size do
      local t = 0
      for i = b, b + size - 1 do
        t = t + w.times[i]
      end
      run.means[#run.means + 1] = t / size
      run.sum, run.count = run.sum + t, run.count + size
    end
    if run.count > 0 then
      run.mean = run.sum / run.count
      out.runs[#out.runs + 1] = run
      out.batches = out.batches + #run.means
      out.sum, out.count = out.sum + run.sum, out.count + run.count
    end
  end
  if out.count == 0 then
    return nil, 'no complete batch of step times'
  end
  out.mean = out.sum / out.count
  return out
end

-- The pooled within-run variance of a batch mean (deviations from each run's own mean) and its
-- degrees of freedom (batches - runs).
local function within_var(bt)
  local ss = 0
  for _, run in ipairs(bt.runs) do
    for _, m in ipairs(run.means) do
      ss = ss + (m - run.mean) ^ 2
    end
  end
  local df = bt.batches - #bt.runs
  return df > 0 and ss / df or nil, df
end

--- The run-to-run variation of a configuration's mean step time, pooled over `candidates`
--- (those with two runs or more): the relative variance of a run's steady mean about its
--- configuration's beyond what the noise within the runs explains (one-way random effects, the
--- method of moments, clamped at 0), and its degrees of freedom (the sum of runs - 1). A
--- configuration's runs differ by more than their step times' noise (the node, its
--- temperature, the placement of the ranks): an interval over one configuration's pooled steps
--- that leaves this out is too narrow. Returns {cv2, df}, or nil when no candidate has two runs.
---@param candidates table[] each with `runs` ({step_times, first?})
---@return table|nil between
function M.between_runs(candidates)
  local num, within, df = 0, 0, 0
  for _, c in ipairs(candidates) do
    local bt = c.runs and #c.runs > 1 and run_batches(c.runs)
    if bt and #bt.runs > 1 then
      local r = #bt.runs
      local var_means = 0
      for _, run in ipairs(bt.runs) do
        var_means = var_means + (run.mean / bt.mean - 1) ^ 2
      end
      var_means = var_means / (r - 1)
      local wv = within_var(bt) or 0
      local noise = 0
      for _, run in ipairs(bt.runs) do
        noise = noise + wv / #run.means
      end
      num = num + (r - 1) * var_means
      within = within + (r - 1) * noise / r / bt.mean ^ 2
      df = df + r - 1
    end
  end
  if df == 0 then
    return nil
  end
  return { cv2 = math.max(0, (num - within) / df), df = df }
end

--- The steady-state step times of a candidate's runs and the confidence interval of their mean
--- by batch means: each run's MSER-5 window (tp.stats.steady_state) is cut into batches of
--- floor(sqrt(n)) step times (Flegal, Haran & Jones 2008, "Markov chain Monte Carlo: can we
--- trust the third significant figure?", Statist. Sci. 23(2)), the oldest leftover dropped, no
--- batch straddling two runs; the batch means give a Student-t interval, which takes the
--- autocorrelation of step times into account. With `between` (M.between_runs) the interval
--- also counts the run-to-run variation: the variance of the pooled mean is the batch means'
--- within their runs plus cv2 x mean^2 x the sum of the squared run weights, its degrees of
--- freedom by Welch-Satterthwaite. With fewer than 2 batches the interval is unbounded.
--- Returns {mean, lo, hi, batches, batch_size, steps, runs, df} of the step time in seconds.
---@param runs table[] {step_times = number[], first? = first index of the steady window}
---@param level? number default 0.95
---@param between? table {cv2, df} (M.between_runs)
---@return table|nil est
---@return string? err
function M.step_time_ci(runs, level, between)
  level = level or 0.95
  local bt, err = run_batches(runs)
  if not bt then
    return nil, err
  end
  local mean, nb = bt.mean, bt.batches
  local est = { mean = mean, batches = nb, batch_size = bt.size, steps = bt.count,
    runs = bt.windows }
  if nb < 2 then
    est.lo, est.hi = 0, math.huge
    return est
  end
  local wv, wdf = within_var(bt)
  local se2, df
  if between and between.cv2 > 0 and wv then
    local w2 = 0
    for _, run in ipairs(bt.runs) do
      w2 = w2 + (#run.means / nb) ^ 2
    end
    local a, b = wv / nb, between.cv2 * mean * mean * w2
    se2 = a + b
    df = se2 * se2 / (a * a / wdf + b * b / between.df)
  else
    -- The batch means about the pooled mean: runs taken as exchangeable.
    local var = 0
    for _, run in ipairs(bt.runs) do
      for _, m in ipairs(run.means) do
        var = var + (m - mean) ^ 2
      end
    end
    se2, df = var / (nb - 1) / nb, nb - 1
  end
  local half = t_quantile(level, df) * math.sqrt(se2)
  est.lo, est.hi, est.df = math.max(0, mean - half), mean + half, df
  return est
end

return M
