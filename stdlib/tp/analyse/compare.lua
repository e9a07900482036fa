-- tp.compare: ratios between groups of runs (platform, framework, any key) for throughput, step
-- time, MFU, memory, energy per token, cost and time to train, with seeded bootstrap confidence
-- intervals, Welch's test and hyperfine-style warnings (high variation, outliers, too few
-- repeats, slow first run). A ratio always travels with its basis: methodology, steady-state
-- window, FLOPs convention and peak divisor, prices. docs/analysis.md "Comparison".
local stats = require('tp.stats')
local json = require('tp.json')
local metrics = require('tp.parse.metrics')
local hardware = require('tp.catalog.hardware')
local efficiency = require('tp.analyse.efficiency')

local M = {}

--- The metrics `compare` knows: label, unit, which direction is better, display scale and
--- format. Metrics of the 'throughput' family are functions of the step time: variation
--- warnings are given once, for the first of them compared.
M.METRICS = {
  tokens_per_s_per_gpu = { label = 'tokens/s/GPU', unit = 'tokens/s', better = 'higher',
    fmt = '%.1f', family = 'throughput' },
  tokens_per_s = { label = 'tokens/s', unit = 'tokens/s', better = 'higher', fmt = '%.0f',
    family = 'throughput' },
  step_time = { label = 'step time', unit = 's', better = 'lower', fmt = '%.4g',
    family = 'throughput' },
  mfu = { label = 'MFU', unit = '%', better = 'higher', scale = 100, fmt = '%.2f',
    family = 'throughput' },
  tflops_per_gpu = { label = 'model TFLOP/s/GPU', unit = 'TFLOP/s', better = 'higher',
    fmt = '%.1f', family = 'throughput' },
  memory = { label = 'peak memory allocated', unit = 'GiB', better = 'lower', fmt = '%.2f' },
  memory_device = { label = 'peak device memory used', unit = 'GiB', better = 'lower',
    fmt = '%.2f' },
  energy_per_token = { label = 'GPU energy/token', unit = 'J', better = 'lower', fmt = '%.4g',
    family = 'throughput' },
  cost_per_1t_tokens = { label = 'cost per 1T tokens', unit = 'USD', better = 'lower',
    fmt = '%.0f', family = 'throughput' },
  time_to_train = { label = 'time to train', unit = 'h', better = 'lower', fmt = '%.1f',
    family = 'throughput' },
}

--- Metrics compared when `opts.metrics` is not given, in display order.
M.DEFAULT_METRICS = { 'tokens_per_s_per_gpu', 'step_time', 'mfu', 'memory', 'energy_per_token',
  'cost_per_1t_tokens', 'time_to_train' }

-- outlier_z: 3.5, the modified z-score cut-off of Iglewicz & Hoaglin ("How to Detect and Handle
-- Outliers", ASQC 1993), as tp.stats.outliers uses it; hyperfine (sharkdp/hyperfine
-- src/outlier_detection.rs) applies the same score with a looser cut for thousands of timings.
local DEFAULTS = {
  by = 'platform', seed = 42, n_boot = 10000, level = 0.95, alpha = 0.05,
  train_tokens = 1e12, convention = 'megatron', cv_warn = 0.05, outlier_z = 3.5,
  outlier_rel = 0.01, step_cv_warn = 0.1,
}

local OPT_TYPES = {
  by = 'string', metrics = 'table', baseline = 'any', seed = 'integer', n_boot = 'integer',
  level = 'number', alpha = 'number', train_tokens = 'number', convention = 'string',
  prices = 'table', hardware = 'table', cv_warn = 'number', outlier_z = 'number',
  outlier_rel = 'number', step_cv_warn = 'number', methodology = 'string',
}

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function misuse(fmt, ...)
  error('tp.compare: ' .. string.format(fmt, ...), 3)
end

local function check_opts(opts)
  if opts == nil then
    opts = {}
  end
  if type(opts) ~= 'table' then
    misuse('options must be a table, got %s', type(opts))
  end
  local o = {}
  for k, v in pairs(opts) do
    local want = OPT_TYPES[k]
    if not want then
      misuse("unknown option '%s'", tostring(k))
    end
    local ok = want == 'any' or type(v) == want or (want == 'integer' and math.type(v) == 'integer')
    if not ok then
      misuse("option '%s' must be %s, got %s", k, want, math.type(v) or type(v))
    end
    o[k] = v
  end
  for k, v in pairs(DEFAULTS) do
    if o[k] == nil then
      o[k] = v
    end
  end
  if o.n_boot < 1 or o.n_boot > 10000000 then
    misuse('option n_boot must be in [1, 1e7], got %d', o.n_boot)
  end
  if not (o.level > 0 and o.level < 1) then
    misuse('option level must be in (0, 1), got %s', tostring(o.level))
  end
  local list = o.metrics or M.DEFAULT_METRICS
  for i, name in ipairs(list) do
    if not M.METRICS[name] then
      local known = {}
      for n in pairs(M.METRICS) do
        known[#known + 1] = n
      end
      table.sort(known)
      misuse("unknown metric '%s' (metrics[%d]; known: %s)", tostring(name), i,
        table.concat(known, ', '))
    end
  end
  o.metric_list = list
  return o
end

local function g(v)
  if math.type(v) == 'integer' then
    return tostring(v)
  end
  return string.format('%.4g', v)
end

-- ---------------------------------------------------------------------------------------------
-- Per-run values.

-- The catalog id given for a run or its group (opts.hardware), if any.
local function given_hardware(run, group, ctx)
  return ctx.opts.hardware and (ctx.opts.hardware[group] or ctx.opts.hardware[run.id])
end

-- Notes a GPU taken from the run's platform (tp.efficiency.hardware's last resort).
local function note_hardware(run, group, row, how, ctx)
  if how == 'assumed from the platform' then
    ctx.assumed[group] = { id = row.id, platform = run.platform }
  end
end

-- The catalog row of the run's GPU (tp.efficiency.hardware), cached per run: row, or nil, why.
local function hardware_of(run, group, ctx)
  local key = run.id
  if ctx.hw_cache[key] == nil then
    local row, how = efficiency.hardware(run, { hardware = given_hardware(run, group, ctx),
      group = group })
    ctx.hw_cache[key] = row or false
    ctx.hw_why[key] = how
    if row then
      note_hardware(run, group, row, how, ctx)
    end
  end
  return ctx.hw_cache[key] or nil, ctx.hw_why[key]
end

local function mfu_of(run, group, ctx)
  local cached = ctx.mfu_cache[run.id]
  if cached ~= nil then
    return cached.value, cached.why, cached.r
  end
  local value, d = efficiency.mfu(run, { hardware = given_hardware(run, group, ctx),
    group = group, convention = ctx.opts.convention })
  local why, r
  if value == nil then
    why = d
  elseif d.recorded then
    ctx.notes.mfu_recorded = true
  else
    r = d.result
    note_hardware(run, group, d.row, d.how, ctx)
    local peak = ctx.peaks[group] or {}
    ctx.peaks[group] = peak
    local label = string.format('%s %s %.1f TFLOP/s dense%s', efficiency.hardware_label(d.row,
      d.how, run.platform, group), d.precision, r.peak_tflops, d.precision_assumed
      and ' (precision not recorded: bf16 assumed)' or '')
    peak[label] = true
    ctx.flops[run.model .. ' @ ' .. g(run.seq_len)] = r.flops_per_token
  end
  ctx.mfu_cache[run.id] = { value = value, why = why, r = r }
  return value, why, r
end

-- Measured joules per token when the record has them, else the TDP estimate
-- (tp.efficiency.energy); the basis of each group is collected for the result's basis.
local function energy_of(run, group, ctx)
  local value, basis, d = efficiency.energy(run, { hardware = given_hardware(run, group, ctx),
    group = group })
  if value == nil then
    return nil, basis
  end
  if d then
    note_hardware(run, group, d.row, d.how, ctx)
  end
  ctx.energy[group] = ctx.energy[group] or {}
  ctx.energy[group][basis] = true
  return value
end

local function cost_of(run, group, ctx)
  if not is_finite(run.tokens_per_s) or not is_finite(run.gpus) then
    return nil, 'tokens/s or GPU count unknown'
  end
  local row = hardware_of(run, group, ctx)
  local prices = ctx.opts.prices or {}
  local price, note = prices[group] or (row and prices[row.id]), 'given'
  if price == nil and row then
    local label
    price, label = hardware.price(row.id)
    note = label and label.note
  end
  if not is_finite(price) then
    return nil, string.format('no price per GPU-hour for %s (tp.hardware.set_price, or ' ..
      'prices = {%s = USD})', row and row.id or tostring(group), tostring(group))
  end
  local res = metrics.cost_per_tokens({ gpus = math.tointeger(run.gpus) or math.floor(run.gpus),
    tokens_per_s = run.tokens_per_s, price_per_gpu_hour = price, per = 1e12 })
  ctx.prices[group] = ctx.prices[group] or {}
  ctx.prices[group][string.format('%s USD per GPU-hour (%s; an assumption)', g(price),
    note or 'given')] = true
  return res.cost
end

local VALUE = {
  tokens_per_s_per_gpu = function(run)
    return run.tokens_per_s_per_gpu, 'tokens/s/GPU not in the record'
  end,
  tokens_per_s = function(run)
    return run.tokens_per_s, 'tokens/s not in the record'
  end,
  step_time = function(run)
    return run.step_time, 'no step time in the record'
  end,
  mfu = mfu_of,
  tflops_per_gpu = function(run, group, ctx)
    local _, why, r = mfu_of(run, group, ctx)
    if r then
      return r.achieved_tflops_per_gpu
    end
    return nil, why
  end,
  memory = function(run)
    return run.memory_gib, 'no allocated-memory figure in the record'
  end,
  memory_device = function(run)
    local mm = type(run.memory_metrics) == 'table' and run.memory_metrics or {}
    return mm.peak_device_memory_used_gib, 'no device-memory figure in the record'
  end,
  energy_per_token = energy_of,
  cost_per_1t_tokens = cost_of,
  time_to_train = function(run, _, ctx)
    if not is_finite(run.tokens_per_s) or run.tokens_per_s <= 0 then
      return nil, 'tokens/s unknown'
    end
    return metrics.time_to_train({ tokens = ctx.opts.train_tokens,
      tokens_per_s = run.tokens_per_s }).hours
  end,
}

-- ---------------------------------------------------------------------------------------------
-- Statistics.

local function summary(values, o, metric)
  local s = { n = #values }
  if #values == 0 then
    return s
  end
  local sm = assert(stats.summary(values))
  s.mean, s.median, s.min, s.max = sm.mean, sm.median, sm.min, sm.max
  s.stddev, s.cv = sm.stddev, sm.cv
  if #values >= 2 then
    local ci = stats.bootstrap_ci(values, { level = o.level, resamples = o.n_boot,
      seed = o.seed })
    if ci then
      s.ci = { lo = ci.lo, hi = ci.hi }
    end
  end
  s.unit = metric.unit
  return s
end

local function ratio(a_vals, b_vals, o)
  local ma = assert(stats.mean(a_vals))
  local mb = assert(stats.mean(b_vals))
  if mb == 0 then
    return nil
  end
  local r = { ratio = ma / mb, n = #a_vals, n_baseline = #b_vals }
  if #a_vals >= 2 and #b_vals >= 2 then
    local ci = stats.bootstrap_ratio_ci(a_vals, b_vals, { level = o.level, resamples = o.n_boot,
      seed = o.seed })
    -- A resample of the baseline can average 0 (zeros in the data): no finite interval then.
    if ci and is_finite(ci.lo) and is_finite(ci.hi) then
      r.ci = { lo = ci.lo, hi = ci.hi }
    end
    local w = stats.welch(a_vals, b_vals)
    if w and is_finite(w.p) and is_finite(w.t) and is_finite(w.df) then
      r.p = w.p
      r.t = w.t
      r.df = w.df
      r.significant = w.p < o.alpha
    end
  end
  return r
end

-- The run that ran first in a group: the smallest repeat number, else the earliest start time.
local function first_run_index(runs)
  local best
  for i, r in ipairs(runs) do
    if is_finite(r['repeat']) then
      if not best or r['repeat'] < runs[best]['repeat'] then
        best = i
      end
    end
  end
  if best then
    return best
  end
  for i, r in ipairs(runs) do
    if type(r.started) == 'string' and (not best or r.started < runs[best].started) then
      best = i
    end
  end
  return best
end

local function warn(list, kind, message, extra)
  local w = { severity = 'warning', kind = kind, message = message }
  for k, v in pairs(extra or {}) do
    w[k] = v
  end
  list[#list + 1] = w
end

local function variation_warnings(name, metric, group, runs, values, ids, o, out)
  if #values < 2 then
    return
  end
  local s = assert(stats.summary(values))
  if s.cv and s.cv > o.cv_warn then
    warn(out, 'high_cv', string.format('%s: %s varies by %.1f%% across %d runs (coefficient of ' ..
      'variation above %g%%): the machine was not quiet, or the runs differ — look at the runs ' ..
      'before trusting the ratio', tostring(group), metric.label, s.cv * 100, #values,
      o.cv_warn * 100), { metric = name, group = group, value = s.cv })
  end
  if #values < 3 then
    return
  end
  local z = stats.modified_z(values)
  if not z then
    return
  end
  -- hyperfine (sharkdp/hyperfine src/benchmark/mod.rs): a slow first run is reported on its own,
  -- other outliers together; "slow" is the worse direction of this metric.
  local sign = metric.better == 'higher' and -1 or 1
  local fi = first_run_index(runs)
  local first_id = fi and runs[fi].id
  local first_k
  for k, id in ipairs(ids) do
    if id == first_id then
      first_k = k
    end
  end
  if first_k and sign * z[first_k] > o.outlier_z and math.abs(values[first_k] - s.median) >
    o.outlier_rel * math.abs(s.median) then
    warn(out, 'first_run', string.format('%s: the first run (%s) is slower than the others on ' ..
      '%s: %s vs a median of %s (modified z-score %.1f > %g) — a cold cache, compilation or ' ..
      'clock ramp-up; add a warm-up run or drop it', tostring(group), first_id, metric.label,
      g(values[first_k]), g(s.median), z[first_k] * sign, o.outlier_z),
      { metric = name, group = group, run = first_id })
    return
  end
  -- A score far out among near-identical runs is not an outlier worth a word: the value must
  -- also lie more than outlier_rel from the median.
  local odd = {}
  for k, zk in ipairs(z) do
    if math.abs(zk) > o.outlier_z and math.abs(values[k] - s.median) > o.outlier_rel *
      math.abs(s.median) then
      odd[#odd + 1] = string.format('%s %s (z %.1f)', ids[k], g(values[k]), zk)
    end
  end
  if #odd > 0 then
    warn(out, 'outlier', string.format('%s: %s has outliers by modified z-score (|z| > %g): %s ' ..
      'among %d runs (median %s)', tostring(group), metric.label, o.outlier_z,
      table.concat(odd, ', '), #values, g(s.median)), { metric = name, group = group })
  end
end

-- ---------------------------------------------------------------------------------------------
-- The comparison.

local function ordered_groups(set, o)
  local groups = set:group(o.by)
  local keys = set:group_keys(o.by)
  local baseline = o.baseline
  if baseline == nil then
    if o.by == 'platform' and groups.nvd then
      baseline = 'nvd'
    else
      baseline = keys[1]
    end
  elseif groups[baseline] == nil then
    -- A number typed on the command line arrives as a string.
    local alt
    for _, k in ipairs(keys) do
      if tostring(k) == tostring(baseline) then
        alt = k
      end
    end
    if alt == nil then
      local names = {}
      for i, k in ipairs(keys) do
        names[i] = tostring(k)
      end
      return nil, string.format("compare: no group '%s' for %s (groups: %s)", tostring(baseline),
        o.by, table.concat(names, ', '))
    end
    baseline = alt
  end
  local order = { baseline }
  for _, k in ipairs(keys) do
    if k ~= baseline then
      order[#order + 1] = k
    end
  end
  return order, groups, baseline
end

local function steady_basis(runs)
  local methods, firsts = {}, {}
  for _, r in ipairs(runs) do
    if r.steady_method then
      methods[r.steady_method] = true
    end
    if is_finite(r.steady_first_iteration) then
      firsts[#firsts + 1] = r.steady_first_iteration
    end
  end
  local ms = {}
  for m in pairs(methods) do
    ms[#ms + 1] = m
  end
  table.sort(ms)
  local text = #ms > 0 and table.concat(ms, ', ') or 'window unknown'
  if #firsts > 0 then
    table.sort(firsts)
    text = text .. string.format(', window starts at iteration %s', firsts[1] == firsts[#firsts]
      and g(firsts[1]) or (g(firsts[1]) .. '..' .. g(firsts[#firsts])))
  end
  return text
end

local function keys_of(t)
  local out = {}
  for k in pairs(t or {}) do
    out[#out + 1] = k
  end
  table.sort(out)
  return out
end

local CONVENTION_TEXT = {
  megatron = '6 x matmul parameters + 6 x layers x query width x sequence length per token ' ..
    '(causal attention counted once: NVIDIA/Megatron-LM training.py ' ..
    'num_floating_point_operations)',
  palm = '6 x matmul parameters + 12 x layers x query width x sequence length per token ' ..
    '(full attention square: PaLM appendix B, torchtitan get_num_flop_per_token)',
  ['6n'] = '6 x non-embedding parameters per token (Kaplan et al. 2020), no attention term',
}

--- Compares groups of runs. For each metric and group: n, mean, median, stddev, CV, min, max
--- and a bootstrap CI of the mean; for each group against the baseline: the ratio of means, its
--- bootstrap CI (both sides resampled, seeded) and Welch's two-sided p (with 2+ runs a side).
--- Warnings: high CV, outliers by modified z-score, a slow first run, fewer than 3 runs, unstable
--- step times, metrics not computable. `basis` says what every ratio rests on. Fails with
--- nil, message, 'EINVAL' when the set is empty or the baseline names no group.
---```lua
---local r = assert(tp.compare.compare(set, { by = 'platform', baseline = 'nvd', seed = 42 }))
---print(tp.compare.format(r))
---```
---@param set table a tp.results ResultSet
---@param opts? table by, metrics, baseline, seed, n_boot, level, alpha, train_tokens,
---  convention, prices = {group|hardware id = USD per GPU-hour}, hardware = {group|run id =
---  catalog id} (else the record's gpu_info.hardware, else its device name), methodology,
---  cv_warn, outlier_z, outlier_rel, step_cv_warn
---@return table|nil result, string? err, string? code
function M.compare(set, opts)
  if type(set) ~= 'table' or type(set.runs) ~= 'table' or type(set.group) ~= 'function' then
    error('tp.compare: result set (tp.results.load) expected, got ' .. type(set), 2)
  end
  local o = check_opts(opts)
  if #set.runs == 0 then
    return nil, 'compare: no runs to compare', 'EINVAL'
  end
  local order, groups, baseline = ordered_groups(set, o)
  if not order then
    return nil, groups, 'EINVAL'
  end
  local ctx = { opts = o, hw_cache = {}, hw_why = {}, mfu_cache = {}, peaks = {}, flops = {},
    energy = {}, prices = {}, notes = {}, assumed = {} }
  local warnings = json.array()
  local result = {
    by = o.by,
    baseline = baseline,
    groups = json.array(),
    metrics = json.array(),
    warnings = warnings,
    settings = { seed = o.seed, n_boot = o.n_boot, level = o.level, alpha = o.alpha,
      train_tokens = o.train_tokens, convention = o.convention, cv_warn = o.cv_warn,
      outlier_z = o.outlier_z },
  }
  for _, key in ipairs(order) do
    local runs = groups[key].runs
    local ids = json.array()
    for i, r in ipairs(runs) do
      ids[i] = r.id
    end
    result.groups[#result.groups + 1] = { value = key, n = #runs, runs = ids }
    if #runs < 3 then
      warn(warnings, 'few_repeats', string.format('%s: %d run%s — %s; run 3 or more repeats ' ..
        '(5 is better)', tostring(key), #runs, #runs == 1 and '' or 's', #runs == 1
        and 'no confidence interval and no significance test' or
        'the confidence interval and the test rest on very few values'),
        { group = key, n = #runs })
    end
    for _, r in ipairs(runs) do
      if is_finite(r.step_time_cv) and r.step_time_cv > o.step_cv_warn then
        warn(warnings, 'unstable_steps', string.format('%s: step time varies by %.1f%% within ' ..
          'its steady-state window (CV above %g%%): throttling, contention or a data-loader ' ..
          'stall', r.id, r.step_time_cv * 100, o.step_cv_warn * 100),
          { group = key, run = r.id })
      end
    end
  end
  if #order < 2 then
    warn(warnings, 'single_group', string.format("only one group (%s = %s): nothing to compare " ..
      'against', o.by, tostring(order[1])))
  end
  local warned_family = {}
  for _, name in ipairs(o.metric_list) do
    local metric = M.METRICS[name]
    local warn_here = not (metric.family and warned_family[metric.family])
    local entry = { name = name, label = metric.label, unit = metric.unit,
      better = metric.better, scale = metric.scale or 1, groups = json.array(),
      ratios = json.array(), missing = json.array() }
    local per = {}
    for _, key in ipairs(order) do
      local runs = groups[key].runs
      local values, ids, used = {}, {}, {}
      for _, r in ipairs(runs) do
        local v, why = VALUE[name](r, key, ctx)
        if is_finite(v) then
          values[#values + 1] = v
          ids[#ids + 1] = r.id
          used[#used + 1] = r
        else
          entry.missing[#entry.missing + 1] = { group = key, run = r.id,
            reason = why or 'not available' }
        end
      end
      local s = summary(values, o, metric)
      s.value = key
      s.runs = json.array(ids)
      entry.groups[#entry.groups + 1] = s
      per[key] = values
      if warn_here then
        variation_warnings(name, metric, key, used, values, ids, o, warnings)
      end
    end
    if metric.family then
      warned_family[metric.family] = true
    end
    local base = per[baseline]
    for _, key in ipairs(order) do
      if key ~= baseline and #per[key] > 0 and base and #base > 0 then
        local r = ratio(per[key], base, o)
        if r then
          r.group = key
          r.baseline = baseline
          local better = (metric.better == 'higher' and r.ratio > 1)
            or (metric.better == 'lower' and r.ratio < 1)
          r.better = better
          entry.ratios[#entry.ratios + 1] = r
        end
      end
    end
    if #entry.missing > 0 then
      local by_reason = {}
      for _, m in ipairs(entry.missing) do
        by_reason[m.reason] = (by_reason[m.reason] or 0) + 1
      end
      for _, reason in ipairs(keys_of(by_reason)) do
        warn(warnings, 'not_computed', string.format('%s not computed for %d run%s: %s',
          metric.label, by_reason[reason], by_reason[reason] == 1 and '' or 's', reason),
          { metric = name })
      end
    end
    result.metrics[#result.metrics + 1] = entry
  end
  for _, key in ipairs(order) do
    local a = ctx.assumed[key]
    if a then
      warn(warnings, 'assumed_hardware', string.format('%s: the records name no GPU: MFU and the '
        .. 'energy estimate use %s, the GPU a recipe plans for platform %s (--hardware %s=ID, '
        .. 'or hardware = {%s = id}, sets it)', tostring(key), a.id,
        tostring(a.platform), tostring(key), tostring(key)), { group = key, hardware = a.id })
    end
  end
  -- Mixed energy bases.
  local kinds = {}
  for group, t in pairs(ctx.energy) do
    for k in pairs(t) do
      kinds[k:match('^(%a+)')] = kinds[k:match('^(%a+)')] or {}
      kinds[k:match('^(%a+)')][#kinds[k:match('^(%a+)')] + 1] = tostring(group)
    end
  end
  if kinds.measured and kinds.estimated then
    warn(warnings, 'mixed_energy_basis', string.format('energy per token mixes measured (%s) ' ..
      'and TDP-estimated (%s) figures: that ratio compares a measurement with an upper bound',
      table.concat(kinds.measured, ', '), table.concat(kinds.estimated, ', ')),
      { metric = 'energy_per_token' })
  end
  -- The basis of every ratio.
  local methods = {}
  for _, r in ipairs(set.runs) do
    if type(r.methodology) == 'string' then
      methods[r.methodology] = true
    end
  end
  local mlist = keys_of(methods)
  local basis = {
    methodology = o.methodology or (#mlist > 0 and table.concat(mlist, ', ')
      or 'identical_config (assumed: the records name none)'),
    tokens = 'tokens/s = global batch size x sequence length / mean step time over the ' ..
      'steady-state window; tokens/s/GPU divides by the GPU count (tp.record, DESIGN.md)',
    steady_state = {},
    flops = nil,
    peak = {},
    energy = {},
    price = {},
    statistics = string.format('%d%% percentile bootstrap of the mean (and of the ratio of ' ..
      'means, both sides resampled), %d resamples, seed %d; Welch two-sided t-test, alpha %g',
      math.floor(o.level * 100 + 0.5), o.n_boot, o.seed, o.alpha),
  }
  for _, name in ipairs(o.metric_list) do
    if name == 'mfu' or name == 'tflops_per_gpu' then
      basis.flops = { convention = o.convention,
        formula = CONVENTION_TEXT[o.convention] or o.convention, flops_per_token = ctx.flops }
    elseif name == 'time_to_train' then
      basis.train_tokens = o.train_tokens
    end
  end
  for _, key in ipairs(order) do
    local gk = tostring(key)
    basis.steady_state[gk] = steady_basis(groups[key].runs)
    basis.peak[gk] = ctx.peaks[key] and table.concat(keys_of(ctx.peaks[key]), '; ') or nil
    basis.energy[gk] = ctx.energy[key] and table.concat(keys_of(ctx.energy[key]), '; ') or nil
    basis.price[gk] = ctx.prices[key] and table.concat(keys_of(ctx.prices[key]), '; ') or nil
  end
  if ctx.notes.mfu_recorded and basis.flops then
    basis.flops.note = 'some records carry their own MFU: it is used as recorded'
  end
  result.basis = basis
  return result
end

-- ---------------------------------------------------------------------------------------------
-- Terminal rendering.

local function fmt_value(metric, v)
  if v == nil then
    return '-'
  end
  return string.format(metric.fmt or '%.4g', v * (metric.scale or 1))
end

local function fmt_p(p)
  if p == nil then
    return ''
  end
  if p < 0.0001 then
    return '<0.0001'
  end
  return string.format('%.4f', p)
end

local function render_rows(rows)
  local widths = {}
  for _, row in ipairs(rows) do
    if type(row) == 'table' then
      for j, cell in ipairs(row) do
        widths[j] = math.max(widths[j] or 0, #cell)
      end
    end
  end
  local out = {}
  for _, row in ipairs(rows) do
    if type(row) == 'string' then
      out[#out + 1] = row
    else
      local parts = {}
      for j, cell in ipairs(row) do
        local pad = string.rep(' ', widths[j] - #cell)
        parts[j] = j == 1 and (cell .. pad) or (pad .. cell)
      end
      out[#out + 1] = (table.concat(parts, '  '):gsub('%s+$', ''))
    end
  end
  return out
end

--- Renders a comparison as terminal text: one block per metric (group, n, mean ± sd, CI,
--- ratio to the baseline with its CI and p), then the basis and the warnings.
---@param result table from `compare`
---@return string
function M.format(result)
  if type(result) ~= 'table' or type(result.metrics) ~= 'table' then
    error('tp.compare.format: comparison result expected', 2)
  end
  local level = math.floor((result.settings and result.settings.level or 0.95) * 100 + 0.5)
  local lines = {}
  lines[#lines + 1] = string.format('comparison by %s, baseline %s', result.by,
    tostring(result.baseline))
  local rows = { { '', 'n', 'mean', 'sd', level .. '% CI', 'ratio', level .. '% CI', 'p' } }
  for _, m in ipairs(result.metrics) do
    local metric = { fmt = M.METRICS[m.name] and M.METRICS[m.name].fmt, scale = m.scale }
    rows[#rows + 1] = string.format('%s (%s, %s is better)', m.label, m.unit, m.better)
    local ratio_of = {}
    for _, r in ipairs(m.ratios) do
      ratio_of[r.group] = r
    end
    for _, s in ipairs(m.groups) do
      local r = ratio_of[s.value]
      local ratio_txt, rci, p = '', '', ''
      if s.value == result.baseline then
        ratio_txt = s.n > 0 and '1 (baseline)' or ''
      elseif r then
        ratio_txt = string.format('%.3f%s', r.ratio, r.better and ' better' or ' worse')
        rci = r.ci and string.format('[%.3f, %.3f]', r.ci.lo, r.ci.hi) or 'n/a'
        p = r.p and (fmt_p(r.p) .. (r.significant and ' *' or '')) or 'n/a'
      end
      rows[#rows + 1] = {
        '  ' .. tostring(s.value), tostring(s.n), fmt_value(metric, s.mean),
        s.stddev and fmt_value(metric, s.stddev) or '-',
        s.ci and string.format('[%s, %s]', fmt_value(metric, s.ci.lo), fmt_value(metric, s.ci.hi))
          or '-', ratio_txt, rci, p,
      }
    end
  end
  for _, l in ipairs(render_rows(rows)) do
    lines[#lines + 1] = l
  end
  local b = result.basis or {}
  lines[#lines + 1] = ''
  lines[#lines + 1] = 'basis:'
  lines[#lines + 1] = '  methodology: ' .. tostring(b.methodology)
  lines[#lines + 1] = '  ' .. tostring(b.tokens)
  for _, k in ipairs(keys_of(b.steady_state)) do
    lines[#lines + 1] = string.format('  steady state %s: %s', k, b.steady_state[k])
  end
  if b.flops then
    lines[#lines + 1] = string.format('  MFU: model FLOPs (%s convention: %s) / peak', b.flops
      .convention, b.flops.formula)
    for _, k in ipairs(keys_of(b.flops.flops_per_token)) do
      lines[#lines + 1] = string.format('    %s: %s FLOPs per token', k,
        tostring(b.flops.flops_per_token[k]))
    end
    if b.flops.note then
      lines[#lines + 1] = '    ' .. b.flops.note
    end
  end
  for _, k in ipairs(keys_of(b.peak)) do
    lines[#lines + 1] = string.format('  peak %s: %s', k, b.peak[k])
  end
  for _, k in ipairs(keys_of(b.energy)) do
    lines[#lines + 1] = string.format('  energy %s: %s', k, b.energy[k])
  end
  for _, k in ipairs(keys_of(b.price)) do
    lines[#lines + 1] = string.format('  price %s: %s', k, b.price[k])
  end
  if b.train_tokens then
    lines[#lines + 1] = string.format('  time to train: %s tokens', g(b.train_tokens))
  end
  lines[#lines + 1] = '  ' .. tostring(b.statistics) .. ' (* = significant)'
  if #result.warnings > 0 then
    lines[#lines + 1] = ''
    lines[#lines + 1] = 'warnings:'
    for _, w in ipairs(result.warnings) do
      lines[#lines + 1] = '  ' .. w.message
    end
  end
  return table.concat(lines, '\n') .. '\n'
end

return M
