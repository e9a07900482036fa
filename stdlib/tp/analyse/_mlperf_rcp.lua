-- tp.analyse._mlperf_rcp: MLPerf Training's reference convergence point (RCP) check, as
-- mlcommons/logging's mlperf_logging/rcp_checker/rcp_checker.py does it (re-implemented, not
-- copied; docs/mlperf.md lists each rule and its source). The reference points are data: the
-- rcps_<benchmark>.json files of mlperf_rcp/training_<ruleset>/ beside this module, copied
-- byte for byte from mlcommons/logging (mlperf_rcp/SOURCES.md: commit, paths, licence).
local json = require('tp.json')
local fs = require('tp.fs')
local stats = require('tp.stats')

local M = {}

--- The rulesets whose RCP files tplua carries, and the one used when none is named (the round
--- of the newest published results, v5.1).
M.RULESETS = { '5.0.0', '5.1.0', '6.0.0', '6.1.0' }
M.DEFAULT_RULESET = '5.1.0'

--- The one-sided t-test's level and the bisection's tolerance (rcp_checker.py, RCP_Checker).
M.ALPHA = 0.05
M.TOLERANCE = 0.0001

--- Value of a run that did not converge (rcp_checker.py, read_submission_file).
M.NOT_CONVERGED = 1e9

-- Benchmarks whose convergence point is the last eval's samples_count (read_submission_file).
local BY_SAMPLES = { llama2_70b_lora = true, flux1 = true, llama31_405b = true,
  llama31_8b = true, gpt_oss_20b = true, deepseekv3_671b = true, qwen35_397b_grpo = true }
-- Benchmarks whose RCP files list "samples to converge" (_process_raw_rcp_data).
local SAMPLES_KEY = { llama2_70b_lora = true, flux1 = true }

local function rejected(benchmark)
  return benchmark == 'unet3d' and 4 or 1
end

local function data_dir()
  local ok, host = pcall(require, 'tp._host')
  local lib = ok and host.stdlib_dir and host.stdlib_dir()
  if type(lib) == 'string' then
    return fs.join(lib, 'tp', 'analyse', 'mlperf_rcp')
  end
  local path = package.searchpath('tp.analyse._mlperf_rcp', package.path) or ''
  return (path:match('^(.*)/_mlperf_rcp%.lua$') or 'stdlib/tp/analyse') .. '/mlperf_rcp'
end

local named = require('tp.analyse._mlperf_base').named

-- Compares two versions like 5.1.0 number by number.
local function version_less(a, b)
  local xa, xb = {}, {}
  for d in a:gmatch('%d+') do
    xa[#xa + 1] = tonumber(d)
  end
  for d in b:gmatch('%d+') do
    xb[#xb + 1] = tonumber(d)
  end
  for i = 1, math.max(#xa, #xb) do
    if (xa[i] or 0) ~= (xb[i] or 0) then
      return (xa[i] or 0) < (xb[i] or 0)
    end
  end
  return false
end

--- The training rulesets whose RCP files tplua carries: the training_<V> folders of
--- mlperf_rcp/ beside this module, in version order (M.RULESETS when they cannot be listed).
---@return string[]
function M.rulesets()
  local entries = fs.list(data_dir())
  if not entries then
    return table.move(M.RULESETS, 1, #M.RULESETS, 1, {})
  end
  local out = {}
  for _, e in ipairs(entries) do
    local v = e.name:match('^training_(%d+%.%d+%.%d+)$')
    if v and e.type == 'directory' then
      out[#out + 1] = v
    end
  end
  table.sort(out, version_less)
  return out
end

--- Checks a ruleset named by a user: nil when it is one tplua carries (or when `custom`, an RCP
--- file of the user's, stands for its data and it is a version like 5.1.0), else the message
--- that names the ones it carries.
---@param ruleset string
---@param custom? boolean an RCP file is given
---@return string|nil err
function M.unknown_ruleset(ruleset, custom)
  if type(ruleset) ~= 'string' or not ruleset:match('^%d+%.%d+%.%d+$') then
    return string.format("'%s' is not a version like %s", tostring(ruleset), M.DEFAULT_RULESET)
  end
  if custom then
    return nil
  end
  local known = M.rulesets()
  for _, v in ipairs(known) do
    if v == ruleset then
      return nil
    end
  end
  return string.format('unknown MLPerf Training ruleset %s: tplua carries the RCPs of %s '
    .. '(or give an RCP file with --rcp-file)', ruleset, table.concat(known, ', '))
end

--- The RCP file tplua carries for a benchmark and ruleset (it may not exist).
---@param benchmark string
---@param ruleset string e.g. '5.1.0'
---@return string path
function M.file(benchmark, ruleset)
  return fs.join(data_dir(), 'training_' .. ruleset, 'rcps_' .. benchmark .. '.json')
end

-- np.mean of xs[first..last] (sums of integers are exact; the order does not matter then).
local function mean_of(xs, first, last)
  local sum = 0
  for i = first, last do
    sum = sum + xs[i]
  end
  return sum / (last - first + 1)
end

-- np.std (population) of xs.
local function pstdev(xs)
  local m = mean_of(xs, 1, #xs)
  local sum = 0
  for _, x in ipairs(xs) do
    sum = sum + (x - m) ^ 2
  end
  return math.sqrt(sum / #xs)
end

-- One-sided p-value of scipy.stats.ttest_ind_from_stats(m1, s, n1, m2, s, n2,
-- equal_var=True), made one-sided as _find_p_value does.
local function p_value(m1, s, n1, m2, n2)
  local df = n1 + n2 - 2
  local svar = ((n1 - 1) * s * s + (n2 - 1) * s * s) / df
  local t = (m1 - m2) / math.sqrt(svar * (1 / n1 + 1 / n2))
  local p = stats.t_p2(t, df)
  if t < 0 then
    return p / 2
  end
  return 1 - p / 2
end

--- The smallest mean a submission may converge in (_find_min_acceptable_mean): bisection on
--- [0, mean] until the interval is under the tolerance, for the mean whose one-sided t-test
--- against the reference (same stdev, `n_ref` and required runs - 2 samples) has p > alpha.
---@param mean number the reference's mean
---@param stdev number
---@param n_ref integer
---@param runs integer the runs the benchmark requires
---@return number
function M.min_acceptable_mean(mean, stdev, n_ref, runs)
  if stdev == 0 then
    return mean
  end
  local n_subm = runs - 2
  local hi, lo = mean, 0.0
  local mid = (lo + hi) / 2
  while hi - lo > M.TOLERANCE do
    if p_value(mid, stdev, n_ref, mean, n_subm) > M.ALPHA then
      hi = mid
    else
      lo = mid
    end
    mid = (lo + hi) / 2
  end
  return mid
end

-- np.interp for one x between two points.
local function interp(x, x0, x1, y0, y1)
  local slope = (y1 - y0) / (x1 - x0)
  return slope * (x - x0) + y0
end

local function interp_record(checker, bs, low, high)
  local mean = interp(bs, low.bs, high.bs, low.mean, high.mean)
  local stdev = interp(bs, low.bs, high.bs, low.stdev, high.stdev)
  local min = M.min_acceptable_mean(mean, stdev, checker.runs * 2, checker.runs)
  return { name = checker.benchmark .. '_interp_' .. tostring(bs), bs = bs, mean = mean,
    stdev = stdev, min_epochs = min, max_speedup = mean / min, interpolated = true,
    low = low.name, high = high.name }
end

-- Pruning (_prune_rcps): drop the points of a smaller batch size than the fastest-converging
-- one, then every point slower than the interpolation of its two neighbours.
local function prune(checker)
  local list = table.move(checker.records, 1, #checker.records, 1, {})
  local fastest = list[1]
  for _, r in ipairs(list) do
    if r.mean < fastest.mean then
      fastest = r
    end
  end
  local kept = {}
  for _, r in ipairs(list) do
    if r.bs >= fastest.bs then
      kept[#kept + 1] = r
    end
  end
  local i = 2
  while i < #kept do
    local guess = interp_record(checker, kept[i].bs, kept[i - 1], kept[i + 1])
    if kept[i].mean > guess.mean then
      table.remove(kept, i)
      i = i - 1
    end
    i = i + 1
  end
  local keep_bs = {}
  for _, r in ipairs(kept) do
    keep_bs[r.bs] = true
  end
  local pruned = {}
  for _, r in ipairs(checker.records) do
    if keep_bs[r.bs] then
      pruned[#pruned + 1] = r
    else
      r.pruned = true
    end
  end
  return pruned
end

--- Loads the reference points of a benchmark: tplua's copy for `ruleset`, or `opts.file` (an
--- RCP JSON file of the same layout, like rcp_checker's --custom_rcps). Returns the checker:
--- `benchmark`, `ruleset`, `file`, `runs` (the runs the benchmark requires), `records` (sorted
--- by batch size: `name`, `bs`, `epochs` sorted, `mean` (olympic), `stdev` (population),
--- `min_epochs`, `max_speedup`, `pruned`), `pruned_records`; or nil and a message.
---@param benchmark string
---@param runs integer the runs the benchmark requires
---@param opts? {ruleset?: string, file?: string}
---@return table|nil checker
---@return string? err
function M.load(benchmark, runs, opts)
  opts = opts or {}
  local ruleset = opts.ruleset or M.DEFAULT_RULESET
  local file = opts.file or M.file(benchmark, ruleset)
  if not opts.file and not fs.is_file(file) then
    return nil, string.format('no RCP data for %s in training ruleset %s (tplua carries %s)',
      benchmark, ruleset, table.concat(M.rulesets(), ', '))
  end
  local doc, err = json.load_file(file)
  if type(doc) ~= 'table' then
    return nil, named(file, err or 'not a JSON object')
  end
  local checker = { benchmark = benchmark, ruleset = ruleset, file = file, runs = runs,
    records = {} }
  local names = {}
  for name in pairs(doc) do
    names[#names + 1] = name
  end
  table.sort(names)
  local key = SAMPLES_KEY[benchmark] and 'samples to converge' or 'Epochs to converge'
  for _, name in ipairs(names) do
    local rec = doc[name]
    local epochs = type(rec) == 'table' and rec[key]
    if type(rec) ~= 'table' or type(rec.BS) ~= 'number' or type(epochs) ~= 'table'
      or #epochs < 3 then
      return nil, string.format('%s: record %s: needs a number BS and a list "%s" of 3 or more '
        .. 'numbers', file, name, key)
    end
    if rec.Benchmark ~= benchmark then
      return nil, string.format('%s: record %s is for benchmark %s, not %s', file, name,
        tostring(rec.Benchmark), benchmark)
    end
    local sorted = {}
    for i, e in ipairs(epochs) do
      if type(e) ~= 'number' then
        return nil, string.format('%s: record %s: "%s"[%d] is not a number', file, name, key, i)
      end
      sorted[i] = e
    end
    table.sort(sorted)
    local rej = rejected(benchmark)
    local r = { name = name, bs = rec.BS, epochs = sorted,
      mean = mean_of(sorted, rej + 1, #sorted - rej), stdev = pstdev(sorted) }
    r.min_epochs = M.min_acceptable_mean(r.mean, r.stdev, #sorted - 2 * rej, runs)
    r.max_speedup = r.mean / r.min_epochs
    checker.records[#checker.records + 1] = r
  end
  if #checker.records == 0 then
    return nil, file .. ': no RCP record'
  end
  table.sort(checker.records, function(a, b)
    if a.bs ~= b.bs then
      return a.bs < b.bs
    end
    return a.name < b.name
  end)
  checker.pruned_records = prune(checker)
  return checker
end

--- A run's convergence point as the RCP checker reads it (read_submission_file): for the
--- benchmarks scored in samples (llama2_70b_lora, llama31_8b, llama31_405b, flux1, ...) the
--- last eval's samples_count, for the others its epoch_num rounded to 3 decimals; 1e9 when
--- the run's status is not success. Returns the value, or nil and why.
---@param run table from tp.analyse.mlperf.parse_text
---@param benchmark string
---@return number|nil epochs
---@return string? err
function M.run_epochs(run, benchmark)
  if run.status ~= 'success' then
    return M.NOT_CONVERGED
  end
  local conv = run.conv
  if not conv then
    return nil, run.file .. ': no eval_accuracy before run_stop'
  end
  if BY_SAMPLES[benchmark] then
    if type(conv.samples_count) ~= 'number' then
      return nil, run.file .. ': the last eval_accuracy has no samples_count'
    end
    return conv.samples_count
  end
  if type(conv.epoch_num) ~= 'number' then
    return nil, run.file .. ': the last eval_accuracy has no epoch_num'
  end
  -- Python's round(x, 3): the exact binary value rounded to 3 decimals, halves to even, which
  -- is what C's printf does (floor(x * 1000 + 0.5) would take 2.0625 to 2.063, not 2.062).
  return tonumber(string.format('%.3f', conv.epoch_num))
end

-- is_version_at_least: dotted versions compared part by part as numbers.
local function at_least(version, min)
  local a, b = {}, {}
  for p in version:gmatch('%d+') do
    a[#a + 1] = tonumber(p)
  end
  for p in min:gmatch('%d+') do
    b[#b + 1] = tonumber(p)
  end
  for i = 1, math.max(#a, #b) do
    if (a[i] or 0) ~= (b[i] or 0) then
      return (a[i] or 0) > (b[i] or 0)
    end
  end
  return true
end

local function evaluate(v, rec, epochs, benchmark, ruleset)
  local max_speedup = rec.max_speedup
  if benchmark == 'llama31_405b' and at_least(ruleset, '5.0.0') then
    max_speedup = rec.mean / (rec.min_epochs - 46080)
  end
  local sorted = table.move(epochs, 1, #epochs, 1, {})
  table.sort(sorted)
  local rej = rejected(benchmark)
  v.mean = mean_of(sorted, rej + 1, #sorted - rej)
  v.rcp = { name = rec.name, bs = rec.bs, mean = rec.mean, stdev = rec.stdev,
    min_epochs = rec.min_epochs, max_speedup = max_speedup, interpolated = rec.interpolated,
    low = rec.low, high = rec.high }
  v.min_mean = rec.mean / max_speedup
  local norm = rec.mean / v.mean
  v.norm_factor = norm < 1 and 1.0 or norm
  return v.mean >= v.min_mean
end

--- The RCP check of a submission (check_directory with the pruned RCPs, as the package checker
--- and the result summarizer run it). `runs` are parsed result files of one directory. Returns
--- the verdict: `pass` (true, false, or nil when not applied), `kind` ('found',
--- 'interpolated', 'smaller_bs', 'missing', 'none', 'no_bs', 'insufficient', 'not_applied',
--- 'error'), `message` (MLPerf's wording), `reason` (for not_applied/error), `bs`, `epochs`
--- (per run), `mean` (olympic), `min_mean`, `rcp` (the point used), `norm_factor` (RCP mean /
--- submission mean, at least 1), `ruleset`, `file`.
---@param runs table[]
---@param benchmark string
---@param required integer the runs the benchmark requires
---@param opts? {ruleset?: string, file?: string}
---@return table verdict
function M.check(runs, benchmark, required, opts)
  opts = opts or {}
  local v = { ruleset = opts.ruleset or M.DEFAULT_RULESET, epochs = {},
    unit = BY_SAMPLES[benchmark] and 'samples to converge' or 'epochs to converge' }
  local division
  for _, run in ipairs(runs) do
    division = division or run.division
  end
  if division ~= 'closed' then
    v.kind, v.reason = 'not_applied', string.format('division %s: RCP checks apply to the '
      .. 'closed division only', tostring(division or 'not logged'))
    return v
  end
  if not required then
    v.kind, v.reason = 'error', string.format('benchmark %s: its required runs are unknown',
      benchmark)
    return v
  end
  if benchmark == 'stable_diffusion' then
    v.kind, v.reason = 'error', 'stable_diffusion\'s convergence rule (FID and CLIP) is not '
      .. 'implemented'
    return v
  end
  local bs
  local failed = 0
  for i, run in ipairs(runs) do
    -- The first file's batch size, logged or not, is the one the others must match
    -- (get_submission_epochs: a file without one after a file with one is a mismatch).
    if i == 1 then
      bs = run.global_batch_size
    elseif run.benchmark ~= runs[1].benchmark then
      -- get_submission_epochs: "Benchmark names in files do not match", batch size -1.
      v.kind, v.pass = 'no_bs', false
      v.message = string.format('Benchmark names in files do not match (%s: %s, %s)', run.file,
        tostring(run.benchmark), tostring(runs[1].benchmark))
      return v
    elseif run.global_batch_size ~= bs then
      v.kind, v.pass = 'no_bs', false
      v.message = string.format('Batch sizes in files do not match (%s: %s, %s)', run.file,
        tostring(run.global_batch_size), tostring(bs))
      return v
    end
    local e, err = M.run_epochs(run, benchmark)
    if not e then
      v.kind, v.reason = 'error', err
      return v
    end
    v.epochs[i] = e
    if e == M.NOT_CONVERGED then
      failed = failed + 1
    end
  end
  v.bs = bs
  if type(bs) ~= 'number' then
    v.kind, v.pass, v.message = 'no_bs', false, 'Could not detect global_batch_size'
    return v
  end
  if failed > rejected(benchmark) then
    v.kind, v.pass, v.message = 'insufficient', false, 'Insufficient convergence'
    return v
  end
  if #v.epochs < 2 * rejected(benchmark) + 1 then
    -- MLPerf's checker would take np.mean of nothing (nan) and fail; say why instead.
    v.kind, v.pass = 'insufficient', false
    v.message = string.format('Insufficient convergence: %d result files, the olympic mean '
      .. 'needs %d or more', #v.epochs, 2 * rejected(benchmark) + 1)
    return v
  end
  local checker, err = M.load(benchmark, required, opts)
  if not checker then
    v.kind, v.reason = 'error', err
    return v
  end
  v.file = checker.file
  local recs = checker.pruned_records
  local exact, low, high, smallest
  for _, r in ipairs(recs) do
    if r.bs == bs and not exact then
      exact = r
    end
    if r.bs < bs and (not low or r.bs > low.bs) then
      low = r
    end
    if r.bs > bs and (not high or r.bs < high.bs) then
      high = r
    end
    if not smallest or r.bs < smallest.bs then
      smallest = r
    end
  end
  local missing = string.format('Missing RCP, please submit RCP with BS = %s', tostring(bs))
  if exact then
    v.kind, v.message = 'found', 'RCP found'
    v.pass = evaluate(v, exact, v.epochs, benchmark, v.ruleset)
  elseif low and high then
    v.kind, v.message = 'interpolated', 'RCP Interpolation'
    v.pass = evaluate(v, interp_record(checker, bs, low, high), v.epochs, benchmark, v.ruleset)
  elseif low then
    v.kind, v.pass, v.message = 'missing', false, missing
  elseif high then
    v.pass = evaluate(v, smallest, v.epochs, benchmark, v.ruleset)
    if v.pass then
      v.kind, v.message = 'smaller_bs', 'RCP not found but slower convergence on smaller batch '
        .. 'size'
    else
      v.kind, v.message = 'missing', missing
    end
  else
    v.kind, v.pass, v.message = 'none', false, 'Cannot find any RCPs'
  end
  return v
end

return M
