-- tp.stats: summary statistics, percentiles, steady-state detection (MSER), seeded bootstrap
-- confidence intervals, Welch and Mann-Whitney tests, outliers, smoothing, curve distance and
-- change points (E-divisive means). The arithmetic lives in engine/stats.c and
-- engine/changepoint.c (tp._stats); this module checks arguments, fills defaults and documents
-- the API.
--
-- Arrays are Lua sequences of numbers. An element that is not a number (nil hole, string) is a
-- programming error and raises; a NaN or infinite element is bad data and gives
-- `nil, '<fn>: value #i is NaN', 'EINVAL'`, as do too-short samples. Nothing is skipped silently.
local C = require('tp._stats')

local M = {}

local function check_array(fname, what, xs)
  if type(xs) ~= 'table' then
    error(string.format('tp.stats.%s: %s must be an array of numbers, got %s', fname, what,
      type(xs)), 3)
  end
  for i = 1, #xs do
    if type(xs[i]) ~= 'number' then
      error(string.format('tp.stats.%s: %s[%d] is %s, number expected', fname, what, i,
        type(xs[i])), 3)
    end
  end
end

-- Validates an options table against spec {name = 'number'|'integer'|'boolean'}; rejects unknown
-- keys. Returns the table (an empty one when opts is nil). `level` blames the caller's caller
-- (default 3: the user of a public function that calls this directly).
local function check_opts(fname, opts, spec, level)
  level = level or 3
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    error(string.format('tp.stats.%s: options must be a table, got %s', fname, type(opts)),
      level)
  end
  for k, v in pairs(opts) do
    local want = spec[k]
    if not want then
      error(string.format("tp.stats.%s: unknown option '%s'", fname, tostring(k)), level)
    end
    local ok
    if want == 'integer' then
      ok = math.type(v) == 'integer'
    else
      ok = type(v) == want
    end
    if not ok then
      error(string.format("tp.stats.%s: option '%s' must be %s, got %s", fname, k, want,
        math.type(v) or type(v)), level)
    end
  end
  return opts
end

--- Returns the arithmetic mean.
---@param xs number[]
---@return number|nil mean, string? err, string? code
function M.mean(xs)
  check_array('mean', 'xs', xs)
  return C.mean(xs)
end

--- Returns the sample variance (divisor n - 1); needs 2 values.
---@param xs number[]
---@return number|nil variance, string? err, string? code
function M.variance(xs)
  check_array('variance', 'xs', xs)
  return C.variance(xs)
end

--- Returns the sample standard deviation (divisor n - 1); needs 2 values.
---@param xs number[]
---@return number|nil stddev, string? err, string? code
function M.stddev(xs)
  check_array('stddev', 'xs', xs)
  return C.stddev(xs)
end

--- Returns the smallest value.
---@param xs number[]
---@return number|nil min, string? err, string? code
function M.min(xs)
  check_array('min', 'xs', xs)
  return C.min(xs)
end

--- Returns the largest value.
---@param xs number[]
---@return number|nil max, string? err, string? code
function M.max(xs)
  check_array('max', 'xs', xs)
  return C.max(xs)
end

--- Returns the median (mean of the two middle values for an even count).
---@param xs number[]
---@return number|nil median, string? err, string? code
function M.median(xs)
  check_array('median', 'xs', xs)
  return C.median(xs)
end

--- Returns the coefficient of variation, sample stddev / |mean|.
---@param xs number[]
---@return number|nil cv, string? err, string? code
function M.cv(xs)
  check_array('cv', 'xs', xs)
  return C.cv(xs)
end

--- Returns percentile `p` (0..100), or a list of percentiles when `p` is a list. Linear
--- interpolation between closest ranks: NumPy's default method "linear" (R type 7).
---```lua
---tp.stats.percentile({1, 2, 3, 4}, 50)          --> 2.5
---tp.stats.percentile(times, {5, 95})            --> {p5, p95}
---```
---@param xs number[]
---@param p number|number[]
---@return number|number[]|nil value, string? err, string? code
function M.percentile(xs, p)
  check_array('percentile', 'xs', xs)
  if type(p) == 'number' then
    return C.percentile(xs, p)
  end
  check_array('percentile', 'p', p)
  local out = {}
  for i, q in ipairs(p) do
    local v, err, code = C.percentile(xs, q)
    if v == nil then
      return nil, err, code
    end
    out[i] = v
  end
  return out
end

--- Returns {n, mean, median, variance, stddev, min, max, p5, p25, p75, p95, cv} in one pass;
--- variance, stddev and cv are absent when undefined (one value; cv also when the mean is 0).
---@param xs number[]
---@return table|nil summary, string? err, string? code
function M.summary(xs)
  check_array('summary', 'xs', xs)
  return C.summary(xs)
end

-- The `batch` option of mser and steady_state: default 5, at least 1.
local function batch_opt(fname, opts)
  opts = check_opts(fname, opts, { batch = 'integer' }, 4)
  local batch = opts.batch or 5
  if batch < 1 then
    error(string.format('tp.stats.%s: option batch must be at least 1', fname), 3)
  end
  return batch
end

--- MSER truncation (White 1997; MSER-5 with the default batch of 5): cuts `xs` into batches,
--- and returns the truncation that minimises the MSER statistic over the first half:
--- {start = 1-based first index of the steady window, batch, batches, truncated, statistic}.
--- Needs at least 2 complete batches.
---@param xs number[]
---@param opts? {batch?: integer} batch size (default 5)
---@return table|nil result, string? err, string? code
function M.mser(xs, opts)
  check_array('mser', 'xs', xs)
  local batch = batch_opt('mser', opts)
  return C.mser(xs, batch)
end

--- Finds the steady-state window of a series (step times): MSER-`batch` when there are at least
--- two batches, MSER with batches of 1 for shorter series of 2 or more values, and the whole
--- series for a single value. Returns {first, last (1-based, inclusive), count, method
--- ('mser-5', 'mser-1', 'single'), batch, statistic}.
---```lua
---local w = tp.stats.steady_state(step_times)
---local steady = table.move(step_times, w.first, w.last, 1, {})
---```
---@param xs number[]
---@param opts? {batch?: integer} batch size (default 5)
---@return table|nil window, string? err, string? code
function M.steady_state(xs, opts)
  check_array('steady_state', 'xs', xs)
  local batch = batch_opt('steady_state', opts)
  local n = #xs
  if n == 0 then
    return nil, 'steady_state: needs at least 1 value, got 0', 'EINVAL'
  end
  if n == 1 then
    -- One value is its own window; still reject bad data like the other paths.
    local _, err, code = C.min(xs)
    if err then
      return nil, (err:gsub('^min:', 'steady_state:')), code
    end
    return { first = 1, last = 1, count = 1, method = 'single', batch = 1, statistic = 0.0 }
  end
  local b = n >= 2 * batch and batch or 1
  local r, err, code = C.mser(xs, b)
  if not r then
    return nil, (err:gsub('^mser:', 'steady_state:')), code
  end
  return {
    first = r.start,
    last = n,
    count = n - r.start + 1,
    method = 'mser-' .. b,
    batch = b,
    statistic = r.statistic,
  }
end

local BOOT_OPTS = { level = 'number', resamples = 'integer', seed = 'integer' }

local function boot_defaults(fname, opts)
  opts = check_opts(fname, opts, BOOT_OPTS, 4)
  local level = opts.level or 0.95
  local resamples = opts.resamples or 10000
  if not (level > 0 and level < 1) then
    error(string.format('tp.stats.%s: option level must be in (0, 1), got %s', fname, level), 3)
  end
  if resamples < 1 or resamples > 100000000 then
    error(string.format('tp.stats.%s: option resamples must be in [1, 1e8], got %d', fname,
      resamples), 3)
  end
  return level, resamples, opts.seed or 1
end

--- Percentile-bootstrap confidence interval of the mean: {estimate, lo, hi}. Reproducible: the
--- same seed gives the same interval on every machine (xoshiro256** seeded by splitmix64).
---```lua
---local ci = tp.stats.bootstrap_ci(times, { level = 0.95, resamples = 10000, seed = 1 })
---```
---@param xs number[]
---@param opts? {level?: number, resamples?: integer, seed?: integer} defaults 0.95, 10000, 1
---@return table|nil ci, string? err, string? code
function M.bootstrap_ci(xs, opts)
  check_array('bootstrap_ci', 'xs', xs)
  local level, resamples, seed = boot_defaults('bootstrap_ci', opts)
  return C.bootstrap_mean_ci(xs, level, resamples, seed)
end

--- Percentile-bootstrap confidence interval of mean(xs) / mean(ys), both samples resampled
--- independently: {estimate, lo, hi}. Options and defaults as bootstrap_ci.
---@param xs number[]
---@param ys number[]
---@param opts? {level?: number, resamples?: integer, seed?: integer}
---@return table|nil ci, string? err, string? code
function M.bootstrap_ratio_ci(xs, ys, opts)
  check_array('bootstrap_ratio_ci', 'xs', xs)
  check_array('bootstrap_ratio_ci', 'ys', ys)
  local level, resamples, seed = boot_defaults('bootstrap_ratio_ci', opts)
  return C.bootstrap_ratio_ci(xs, ys, level, resamples, seed)
end

--- Confidence interval of the mean of an autocorrelated series (step times in steady state) by
--- non-overlapping batch means with a fixed number of batches: the last `batches` x b values (b =
--- floor(n / batches)) in `batches` batches, mean +- t(batches - 1) x stddev of the batch means /
--- sqrt(batches). Returns {mean, half_width, lo, hi, se, df, batches, batch_size, first (1-based
--- index of the first value used)}. Needs at least `batches` values.
---```lua
---local ci = tp.stats.batch_means_ci(steady_times, { batches = 10, level = 0.95 })
---print(ci.half_width / ci.mean)   --> relative half-width
---```
---@param xs number[]
---@param opts? {batches?: integer, level?: number} defaults 10, 0.95
---@return table|nil ci, string? err, string? code
function M.batch_means_ci(xs, opts)
  check_array('batch_means_ci', 'xs', xs)
  opts = check_opts('batch_means_ci', opts, { batches = 'integer', level = 'number' })
  local batches, level = opts.batches or 10, opts.level or 0.95
  if batches < 2 then
    error('tp.stats.batch_means_ci: option batches must be at least 2', 2)
  end
  if not (level > 0 and level < 1) then
    error(string.format('tp.stats.batch_means_ci: option level must be in (0, 1), got %s',
      level), 2)
  end
  return C.batch_means_ci(xs, batches, level)
end

--- Quantile of Student's t with `df` degrees of freedom: the t with P(T <= t) = p.
---```lua
---tp.stats.t_quantile(0.975, 9)   --> 2.262...
---```
---@param p number in (0, 1)
---@param df number > 0
---@return number t
function M.t_quantile(p, df)
  if type(p) ~= 'number' or type(df) ~= 'number' or not (p > 0 and p < 1) or df <= 0
    or df ~= df then
    error('tp.stats.t_quantile: p in (0, 1) and df > 0 expected', 2)
  end
  return C.t_quantile(p, df)
end

--- Percentile-bootstrap confidence interval of the percent change from `before` to `after`,
--- 100 (mean(after) - mean(before)) / mean(before): {estimate, lo, hi}, in percent. The two samples
--- are resampled independently; options and defaults as bootstrap_ci (seeded, reproducible).
---```lua
---local ci = tp.stats.bootstrap_pct_change_ci(last_week, this_week)   --> {estimate = -4.1, ...}
---```
---@param before number[]
---@param after number[]
---@param opts? {level?: number, resamples?: integer, seed?: integer} defaults 0.95, 10000, 1
---@return table|nil ci, string? err, string? code
function M.bootstrap_pct_change_ci(before, after, opts)
  check_array('bootstrap_pct_change_ci', 'before', before)
  check_array('bootstrap_pct_change_ci', 'after', after)
  local level, resamples, seed = boot_defaults('bootstrap_pct_change_ci', opts)
  -- mean(after) / mean(before) - 1 is monotone in the ratio, so the ratio's percentile interval
  -- maps onto the percent change's exactly.
  local ci, err, code = C.bootstrap_ratio_ci(after, before, level, resamples, seed)
  if not ci then
    return nil, (err:gsub('^bootstrap_ratio_ci:', 'bootstrap_pct_change_ci:')), code
  end
  return {
    estimate = 100 * (ci.estimate - 1),
    lo = 100 * (ci.lo - 1),
    hi = 100 * (ci.hi - 1),
  }
end

--- Welch's unequal-variances t-test: {t, df, p (two-sided), mean_diff = mean(xs) - mean(ys)}.
---@param xs number[] at least 2 values
---@param ys number[] at least 2 values
---@return table|nil result, string? err, string? code
function M.welch(xs, ys)
  check_array('welch', 'xs', xs)
  check_array('welch', 'ys', ys)
  return C.welch(xs, ys)
end

--- Mann-Whitney U test (normal approximation, tie correction): {u1 (U of xs), u2, z, p}.
---@param xs number[]
---@param ys number[]
---@param opts? {continuity?: boolean} continuity correction (default true, as R and SciPy)
---@return table|nil result, string? err, string? code
function M.mann_whitney(xs, ys, opts)
  check_array('mann_whitney', 'xs', xs)
  check_array('mann_whitney', 'ys', ys)
  opts = check_opts('mann_whitney', opts, { continuity = 'boolean' })
  return C.mann_whitney(xs, ys, opts.continuity ~= false)
end

--- Modified z-scores (Iglewicz-Hoaglin): 0.6745 (x - median) / MAD, one per value.
---@param xs number[]
---@return number[]|nil scores, string? err, string? code
function M.modified_z(xs)
  check_array('modified_z', 'xs', xs)
  return C.modified_z(xs)
end

--- Outliers by modified z-score: the values with |score| > threshold, as a list of
--- {index, value, score} in order, plus the list of all scores.
---```lua
---for _, o in ipairs(tp.stats.outliers(times)) do print(o.index, o.value) end
---```
---@param xs number[]
---@param opts? {threshold?: number} default 3.5 (Iglewicz & Hoaglin)
---@return table|nil outliers, number[]|string scores_or_err, string? code
function M.outliers(xs, opts)
  check_array('outliers', 'xs', xs)
  opts = check_opts('outliers', opts, { threshold = 'number' })
  local threshold = opts.threshold or 3.5
  local scores, err, code = C.modified_z(xs)
  if not scores then
    return nil, (err:gsub('^modified_z:', 'outliers:')), code
  end
  local out = {}
  for i, s in ipairs(scores) do
    if math.abs(s) > threshold then
      out[#out + 1] = { index = i, value = xs[i], score = s }
    end
  end
  return out, scores
end

--- Trailing moving average over `window` values (shorter at the start): one value per input.
---@param xs number[]
---@param window integer >= 1
---@return number[]|nil smoothed, string? err, string? code
function M.moving_average(xs, window)
  check_array('moving_average', 'xs', xs)
  if math.type(window) ~= 'integer' or window < 1 then
    error('tp.stats.moving_average: window must be an integer >= 1', 2)
  end
  return C.moving_average(xs, window)
end

--- Exponential moving average: y1 = x1, yi = alpha xi + (1 - alpha) y(i-1).
---@param xs number[]
---@param alpha number in (0, 1]
---@return number[]|nil smoothed, string? err, string? code
function M.ema(xs, alpha)
  check_array('ema', 'xs', xs)
  if type(alpha) ~= 'number' then
    error('tp.stats.ema: alpha must be a number in (0, 1]', 2)
  end
  return C.ema(xs, alpha)
end

--- RMS difference of two curves over the x values both have (e.g. iterations); when an x
--- repeats in one curve (restart), its last point counts. Returns rms, number of common x.
---```lua
---local rms, n = tp.stats.curve_distance({ x = it_a, y = loss_a }, { x = it_b, y = loss_b })
---```
---@param a {x: number[], y: number[]}
---@param b {x: number[], y: number[]}
---@return number|nil rms, integer|string common_or_err, string? code
function M.curve_distance(a, b)
  for i, c in ipairs({ a, b }) do
    if type(c) ~= 'table' then
      error(string.format('tp.stats.curve_distance: curve %d must be a table {x=, y=}', i), 2)
    end
    check_array('curve_distance', 'curve ' .. i .. '.x', c.x)
    check_array('curve_distance', 'curve ' .. i .. '.y', c.y)
    if #c.x ~= #c.y then
      error(string.format('tp.stats.curve_distance: curve %d has %d x and %d y values', i, #c.x,
        #c.y), 2)
    end
  end
  return C.curve_distance(a.x, a.y, b.x, b.y)
end

local CP_OPTS = {
  alpha = 'number',
  min_size = 'integer',
  max_points = 'integer',
  permutations = 'integer',
  seed = 'integer',
}

--- Change points of a series (one metric, run after run, in time order) by E-divisive means
--- (Matteson & James 2014, "A nonparametric approach for multiple change point analysis of
--- multivariate data", JASA 109; univariate, alpha = 1). The segment with the largest divergence
--- Q^ is cut in two while the cut is significant. Significance, by default, is Student's t test
--- with Hunter's merge step (Fleming et al. 2023, arXiv 2301.03034; Apache Otava): each reported
--- change point has p <= alpha against the two segments next to it, p multiplied by the number of
--- places the change could have been between them (so long series get no more false alarms). With
--- `permutations`, the permutation test of the original method (MongoDB's signal processing,
--- arXiv 2003.00584), seeded. Deterministic: the same values and options give the same result.
---
--- Returns, in index order, `{index, stat, p, t, mean_before, mean_after}` per change point:
--- `index` the 1-based position of the first value after the change, `stat` Q^ of the adjacent
--- segments, `p` the p-value, `t` Student's t (positive when the values rose), the means of the
--- segments before and after (each up to the neighbouring change point or the end). A series
--- shorter than 2 min_size, or constant, has none. A NaN or infinite value gives
--- `nil, 'change_points: value #i is NaN', 'EINVAL'`.
---```lua
---for _, c in ipairs(tp.stats.change_points(tokens_per_s)) do
---  print(c.index, 100 * (c.mean_after / c.mean_before - 1), c.p)
---end
---```
---@param values number[]
---@param opts? table {alpha?, min_size?, max_points?, permutations?, seed?}
---  alpha: significance level in (0, 1), default 0.01 (0.05 with permutations); min_size: fewest
---  values on each side of a change, default 5 (at least 2); max_points: most change points
---  (the most significant are kept), default 0: no limit; permutations: 0 (default) for the t test,
---  else the number of permutations (p >= 1 / (permutations + 1); each test then costs that many
---  searches: 199 take about 1.5 s on 1,000 values, the t test 5 ms); seed: of the permutations,
---  default 1. The defaults were tuned with bench/history/detect.
---@return table[]|nil change_points, string? err, string? code
function M.change_points(values, opts)
  check_array('change_points', 'values', values)
  opts = check_opts('change_points', opts, CP_OPTS)
  local permutations = opts.permutations or 0
  local alpha = opts.alpha or (permutations > 0 and 0.05 or 0.01)
  local min_size = opts.min_size or 5
  local max_points = opts.max_points or 0
  if not (alpha > 0 and alpha < 1) then
    error(string.format('tp.stats.change_points: option alpha must be in (0, 1), got %s', alpha), 2)
  end
  if min_size < 2 then
    error(string.format('tp.stats.change_points: option min_size must be at least 2, got %d',
      min_size), 2)
  end
  if max_points < 0 then
    error(string.format('tp.stats.change_points: option max_points must be >= 0, got %d',
      max_points), 2)
  end
  if permutations < 0 or permutations > 1000000 then
    error(string.format('tp.stats.change_points: option permutations must be in [0, 1e6], got %d',
      permutations), 2)
  end
  return C.change_points(values, alpha, min_size, max_points, permutations, opts.seed or 1)
end

--- Two-sided p-value of Student's t with `df` degrees of freedom.
---@param t number
---@param df number > 0
---@return number p
function M.t_p2(t, df)
  if type(t) ~= 'number' or type(df) ~= 'number' then
    error('tp.stats.t_p2: t and df must be numbers', 2)
  end
  return C.t_p2(t, df)
end


--- A seeded generator of pseudo-random numbers, the same on every machine: splitmix64 (Steele,
--- Lea and Flood 2014) from the integer `seed`, `:next()` the raw 64-bit integer, `:uniform()` a
--- double in (0, 1), `:normal()` a standard normal value (Box-Muller). For generators of test
--- data and simulations that must give the same series for the same seed.
---```lua
---local g = tp.stats.rng(42)
---print(g.uniform(), g.normal())
---```
---@param seed integer
---@return table generator {next, uniform, normal}
function M.rng(seed)
  if math.type(seed) ~= 'integer' then
    error('tp.stats.rng: an integer seed expected, got ' .. tostring(seed), 2)
  end
  local state = seed
  local g = {}
  function g.next()
    state = state + 0x9E3779B97F4A7C15
    local z = state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
  end
  function g.uniform()
    return ((g.next() >> 11) + 0.5) * (1.0 / 9007199254740992.0)
  end
  function g.normal()
    local u1, u2 = g.uniform(), g.uniform()
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
  end
  return g
end

return M
