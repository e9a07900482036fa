-- tp.history._detect: changes in the run history. For each series and one metric: the change
-- points of E-divisive means (tp.stats.change_points, with its significance test), each with its
-- size in % and a seeded bootstrap CI, its direction by the metric's sense, the first run after
-- it, the notes near it and what changed in the software stack there; and the plain test of the
-- latest runs against the baseline window before them. `tplua history check` prints the report
-- (text or JSON) and gates on --fail-on.
local json = require('tp.json')
local stats = require('tp.stats')
local stackdiff = require('tp.history._stackdiff')
local store = require('tp.history._store')

local M = {}

--- Which way is better for each metric: 'higher' or 'lower'.
M.SENSE = {
  tokens_per_s = 'higher', tokens_per_s_per_gpu = 'higher', mfu = 'higher',
  step_time_s = 'lower', joules_per_token = 'lower', final_loss = 'lower',
  peak_memory_gb = 'lower',
}

--- The metrics' names as printed.
M.LABEL = {
  tokens_per_s = 'tokens/s', tokens_per_s_per_gpu = 'tokens/s/GPU', mfu = 'MFU',
  step_time_s = 'step time', joules_per_token = 'J/token', final_loss = 'final loss',
  peak_memory_gb = 'peak memory (GB)',
}

--- Defaults of the options: the latest runs tested against the baseline window before them,
--- the bootstrap's resamples and seed.
M.DEFAULTS = { metric = 'tokens_per_s_per_gpu', latest = 5, baseline = 20, resamples = 2000,
  seed = 1, min_size = 5, level = 0.99 }

local OPTS = {
  series = 'table', since = 'string', metric = 'string', fail_on = 'number', seed = 'number',
  latest = 'number', baseline = 'number', alpha = 'number', min_size = 'number',
  resamples = 'number', level = 'number',
}

local SECONDS_PER_DAY = 86400
-- Fewest runs in the baseline window of the latest-runs test.
local MIN_BASELINE = 3

local function check_opts(fname, opts, depth)
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    error(string.format('%s: options must be a table, got %s', fname, type(opts)), depth + 1)
  end
  for k, v in pairs(opts) do
    local want = OPTS[k]
    if not want then
      error(string.format("%s: unknown option '%s'", fname, tostring(k)), depth + 1)
    end
    if type(v) ~= want then
      error(string.format("%s: option '%s' must be a %s, got %s", fname, k, want, type(v)),
        depth + 1)
    end
  end
  if opts.metric ~= nil and not M.SENSE[opts.metric] then
    local names = {}
    for name in pairs(M.SENSE) do
      names[#names + 1] = name
    end
    table.sort(names)
    error(string.format("%s: unknown metric '%s' (one of %s)", fname, opts.metric,
      table.concat(names, ', ')), depth + 1)
  end
  for _, k in ipairs({ 'latest', 'baseline', 'min_size', 'resamples', 'seed' }) do
    local v = opts[k]
    if v ~= nil and (math.tointeger(v) == nil or v < 1) then
      error(string.format("%s: option '%s' must be a positive integer, got %s", fname, k,
        tostring(v)), depth + 1)
    end
  end
  if opts.fail_on ~= nil and not (opts.fail_on >= 0 and opts.fail_on < math.huge) then
    error(string.format("%s: option 'fail_on' must be a percentage >= 0, got %s", fname,
      tostring(opts.fail_on)), depth + 1)
  end
  if opts.level ~= nil and not (opts.level > 0 and opts.level < 1) then
    error(string.format("%s: option 'level' must be in (0, 1), got %s", fname,
      tostring(opts.level)), depth + 1)
  end
  if opts.since ~= nil and not opts.since:match('^%d%d%d%d%-%d%d%-%d%d') then
    error(string.format("%s: option 'since' must be a date YYYY-MM-DD, got '%s'", fname,
      opts.since), depth + 1)
  end
  return opts
end

local function values_of(points, from, to)
  local out = {}
  for i = from, to do
    out[#out + 1] = points[i].value
  end
  return out
end

-- Bootstrap CI of the change from mean(before) to mean(after), in %: pct, {lo, hi}.
local function pct_change(before, after, opts, level)
  local ci = stats.bootstrap_pct_change_ci(before, after, { seed = math.tointeger(opts.seed),
    resamples = math.tointeger(opts.resamples), level = level })
  if not ci then
    local pct = (stats.mean(after) / stats.mean(before) - 1) * 100
    return pct, { pct, pct }
  end
  return ci.estimate, { ci.lo, ci.hi }
end

-- 'regression', 'improvement' or nil for a change of `pct` in a metric of `sense`.
local function direction(sense, pct)
  if pct == 0 then
    return nil
  end
  if (pct < 0) == (sense == 'higher') then
    return 'regression'
  end
  return 'improvement'
end

local function day_start(epoch)
  return epoch - epoch % SECONDS_PER_DAY
end

-- The notes dated from the day of the last run before the change to the first run after it.
local function notes_between(notes, t_before, t_after)
  local out = {}
  local from = day_start(t_before)
  for _, n in ipairs(notes or {}) do
    local t = n.time_epoch
    if type(t) == 'number' and t >= from and t <= t_after then
      out[#out + 1] = { time = n.time, text = n.text }
    end
  end
  return out
end

-- What changed in the stack at points[i] (against points[i - 1]); when nothing did, the nearest
-- change within two runs either side (the change point's position is only that exact).
local function stack_at(points, i)
  local items = stackdiff.diff(points[i - 1].environment, points[i].environment)
  if items == nil then
    return nil, nil
  end
  if #items > 0 then
    return items, nil
  end
  for d = 1, 2 do
    for _, j in ipairs({ i - d, i + d }) do
      if j >= 2 and j <= #points then
        local near = stackdiff.diff(points[j - 1].environment, points[j].environment)
        if near and #near > 0 then
          return items, { offset = j - i, run_id = points[j].run_id, time = points[j].time,
            stack = near }
        end
      end
    end
  end
  return items, nil
end

--- Analyses one series' points (pure: no database). `points` in time order, each
--- `{time, time_epoch, value, run_id, sha256, environment}`; `opts.notes` the series' notes
--- `{time, time_epoch, text}`. Returns the result shape of docs/history.md: `{series, metric,
--- sense, points, changes, latest, too_few}`.
---```lua
---local r = analyse(points, { key = 'amd/mi300x/...', metric = 'tokens_per_s_per_gpu' })
---for _, c in ipairs(r.changes) do print(c.time, c.kind, c.pct) end
---```
---@param points table[]
---@param opts? table key, metric, notes, seed, latest, baseline, alpha, min_size, resamples
---@return table result
function M.analyse(points, opts)
  if type(points) ~= 'table' then
    error('tp.history.analyse: points must be a list, got ' .. type(points), 2)
  end
  opts = opts or {}
  local metric = opts.metric or M.DEFAULTS.metric
  local sense = M.SENSE[metric]
  if not sense then
    error(string.format("tp.history.analyse: unknown metric '%s'", tostring(metric)), 2)
  end
  local o = {
    seed = opts.seed or M.DEFAULTS.seed, resamples = opts.resamples or M.DEFAULTS.resamples,
    latest = opts.latest or M.DEFAULTS.latest, baseline = opts.baseline or M.DEFAULTS.baseline,
    min_size = opts.min_size or M.DEFAULTS.min_size, alpha = opts.alpha,
    level = opts.level or M.DEFAULTS.level,
  }
  local pts = {}
  for _, p in ipairs(points) do
    if type(p.value) == 'number' and p.value == p.value and math.abs(p.value) < math.huge then
      pts[#pts + 1] = p
    end
  end
  local result = { series = opts.key, metric = metric, sense = sense, points = pts,
    changes = {}, skipped = #points - #pts }
  local n = #pts
  if n < 2 * o.min_size then
    result.too_few = string.format('%d run%s with %s: change points need at least %d', n,
      n == 1 and '' or 's', metric, 2 * o.min_size)
  else
    local values = values_of(pts, 1, n)
    local cps = assert(stats.change_points(values, { seed = math.tointeger(o.seed),
      alpha = o.alpha, min_size = math.tointeger(o.min_size) }))
    for k, cp in ipairs(cps) do
      local i = cp.index
      local from = k > 1 and cps[k - 1].index or 1
      local to = k < #cps and cps[k + 1].index - 1 or n
      local before, after = values_of(pts, from, i - 1), values_of(pts, i, to)
      local pct, ci = pct_change(before, after, o)
      local items, near = stack_at(pts, i)
      result.changes[#result.changes + 1] = {
        index = i, time = pts[i].time, time_epoch = pts[i].time_epoch, run_id = pts[i].run_id,
        sha256 = pts[i].sha256, before_run_id = pts[i - 1].run_id, before_time = pts[i - 1].time,
        before = stats.mean(before), after = stats.mean(after), pct = pct, ci = ci, p = cp.p,
        kind = direction(sense, pct), stack = items, stack_near = near,
        notes = notes_between(opts.notes, pts[i - 1].time_epoch, pts[i].time_epoch),
      }
    end
  end
  result.latest = M.latest(pts, result.changes, o, sense)
  return result
end

--- The latest `o.latest` runs against the `o.baseline` runs before them (not reaching back
--- past the last change point before them): the % difference of the means with a bootstrap
--- CI at `o.level`; a regression or improvement when the CI excludes 0 and Welch's t test
--- agrees (p <= 1 - level). When the last change point falls
--- inside the latest runs, the test restates that change: `change` gives its index.
---@param pts table[] points with numeric values, in time order
---@param changes table[] the series' change points
---@param o table latest, baseline, level, seed, resamples
---@param sense string 'higher' or 'lower'
---@return table latest {pct, ci, p, kind, n_baseline, n_latest, change?} or {skipped = why}
function M.latest(pts, changes, o, sense)
  local n = #pts
  -- A young series keeps a baseline of MIN_BASELINE runs: fewer latest runs then.
  local k = math.min(o.latest, n - MIN_BASELINE)
  if k < 1 then
    return { skipped = string.format('%d run%s: the latest-runs test needs at least %d', n,
      n == 1 and '' or 's', MIN_BASELINE + 1), n_latest = 0, n_baseline = 0 }
  end
  local last = changes[#changes]
  -- A change point inside the latest runs, or too close before them to leave a baseline of 3
  -- runs after it: the latest runs are the ones since that change, tested against the runs
  -- before it, which restates the change point.
  local restates = last and last.index > n - k - MIN_BASELINE + 1 and last.index or nil
  local b_to = n - k
  if restates then
    b_to = restates - 1
    k = n - restates + 1
  end
  local b_from, bound = math.max(1, b_to - o.baseline + 1), nil
  for j = #changes, 1, -1 do
    local c = changes[j].index
    if c <= b_to and c ~= restates then
      if c >= b_from then
        b_from, bound = c, changes[j]
      end
      break
    end
  end
  local nb = math.max(b_to - b_from + 1, 0)
  if nb < MIN_BASELINE or k < 1 then
    return { skipped = string.format('%d run%s before the latest %d%s: at least %d needed', nb,
      nb == 1 and '' or 's', k, bound and (' since the change at ' .. tostring(bound.time)) or '',
      MIN_BASELINE), n_latest = k, n_baseline = nb }
  end
  local base, late = values_of(pts, b_from, b_to), values_of(pts, n - k + 1, n)
  local pct, ci = pct_change(base, late, o, o.level)
  -- The percentile bootstrap is too narrow for a handful of runs, so Welch's t test must agree.
  local w = #late >= 2 and stats.welch(late, base) or nil
  local p = w and w.p or nil
  local significant = (ci[1] > 0 or ci[2] < 0) and p ~= nil and p <= 1 - o.level
  local kind = significant and direction(sense, pct) or nil
  return { pct = pct, ci = ci, p = p, kind = kind, n_latest = k, n_baseline = nb,
    change = restates, baseline_from = pts[b_from].time, latest_from = pts[n - k + 1].time }
end

--- Reads the points of series `key` with `metric` (from the date `since` on) and its notes from
--- history `H` (its points and notes methods), and analyses them (M.analyse with `opts`: seed,
--- latest, baseline, alpha, min_size, resamples, level). Returns the result and the notes, or
--- nil, err, code when the history cannot be read.
---@param H table
---@param key string
---@param metric string
---@param since? string
---@param opts? table
---@return table|nil result, table|string notes_or_err, string? code
function M.analyse_series(H, key, metric, since, opts)
  local points, err, code = H:points(key, { metric = metric, since = since })
  if not points then
    return nil, err, code
  end
  local notes, nerr, ncode = H:notes(key)
  if not notes then
    return nil, nerr, ncode
  end
  local o = { key = key, metric = metric, notes = notes }
  for k, v in pairs(opts or {}) do
    o[k] = v
  end
  return M.analyse(points, o), notes
end

-- The series `opts.series` names: exact keys, else substrings or Lua patterns of keys.
local function select_series(H, wanted)
  local all, err, code = H:series_list()
  if not all then
    return nil, err, code
  end
  if not wanted or #wanted == 0 then
    return all
  end
  local out, seen = {}, {}
  for _, w in ipairs(wanted) do
    local hit = false
    for _, s in ipairs(all) do
      if store.key_matches(s.key, w) then
        hit = true
        if not seen[s.key] then
          seen[s.key] = true
          out[#out + 1] = s
        end
      end
    end
    if not hit then
      return nil, string.format("no series matches '%s' (tplua history list shows them)", w),
        'ENOSERIES'
    end
  end
  return out
end

local function is_regression_beyond(c, fail_on)
  return c and c.kind == 'regression' and fail_on ~= nil and math.abs(c.pct) > fail_on
end

-- Whether a series' result was tested at all: change points searched, or the latest runs
-- tested against a baseline (a series with too few runs for both was not checked).
local function was_checked(r)
  return not r.too_few or (r.latest ~= nil and not r.latest.skipped)
end

--- Why a report checked no series, as one line ('no series was checked: the history has no
--- series').
---@param report table from check
---@return string
function M.nothing_checked_text(report)
  local n = #report.results
  if n == 0 then
    return 'no series was checked: the history has no series'
  end
  local latest, changes = MIN_BASELINE + 1, 2 * M.DEFAULTS.min_size
  return string.format('no series was checked: %s too few runs with %s%s (the latest-runs '
    .. 'test needs %d, change points %d)', n == 1 and 'the only series has'
      or string.format('each of the %d series has', n), report.metric,
    report.since and (' since ' .. report.since) or '', latest, changes)
end

--- Checks the series of a history for changes (`tplua history check`). `opts.series` lists
--- keys, substrings or Lua patterns (nil: every series); `opts.since` a date; `opts.metric` one
--- of M.SENSE's (default tokens_per_s_per_gpu); `opts.fail_on` a percentage: the report fails
--- when a regression (a change point's, or the latest runs') is larger, and when no series was
--- checked (none, or each with too few runs for either test: `nothing_checked`), so that a gate
--- on an empty history or a filter that leaves nothing does not pass.
---```lua
---local report = assert(detect.check(H, { fail_on = 2 }))
---io.write(detect.text(report))
---os.exit(report.failed and 4 or 0)
---```
---@param H table a tp.history History
---@param opts? table series, since, metric, fail_on, seed, latest, baseline, alpha, min_size
---@return table|nil report {metric, sense, results, checked (series tested), regressions,
---  improvements, failed, failing, nothing_checked (why, when --fail-on checked no series)}
---@return string? err
---@return string? code
function M.check(H, opts)
  opts = check_opts('tp.history.check', opts, 2)
  local metric = opts.metric or M.DEFAULTS.metric
  local list, err, code = select_series(H, opts.series)
  if not list then
    return nil, err, code
  end
  local report = { metric = metric, sense = M.SENSE[metric], since = opts.since,
    fail_on = opts.fail_on, results = {}, checked = 0, regressions = 0, improvements = 0,
    failed = false, failing = {} }
  for _, s in ipairs(list) do
    local r, rerr, rcode = M.analyse_series(H, s.key, metric, opts.since, { seed = opts.seed,
      latest = opts.latest, baseline = opts.baseline, alpha = opts.alpha,
      min_size = opts.min_size, resamples = opts.resamples, level = opts.level })
    if not r then
      return nil, rerr, rcode
    end
    r.info = s
    report.results[#report.results + 1] = r
    if was_checked(r) then
      report.checked = report.checked + 1
    end
    local found = {}
    for _, c in ipairs(r.changes) do
      found[#found + 1] = c
    end
    if r.latest and r.latest.kind and not r.latest.change then
      found[#found + 1] = r.latest
    end
    for _, c in ipairs(found) do
      if c.kind == 'regression' then
        report.regressions = report.regressions + 1
      elseif c.kind == 'improvement' then
        report.improvements = report.improvements + 1
      end
      if is_regression_beyond(c, opts.fail_on) then
        report.failed = true
        report.failing[#report.failing + 1] = { series = s.key, time = c.time or c.latest_from,
          pct = c.pct, latest = c.index == nil }
      end
    end
  end
  if opts.fail_on and report.checked == 0 then
    report.failed = true
    report.nothing_checked = M.nothing_checked_text(report)
  end
  return report
end

-- ---------------------------------------------------------------------------------------------
-- Text

local function signed(x, digits)
  digits = digits or 1
  if math.abs(x) < 0.5 * 10 ^ -digits then
    x = 0.0  -- not '-0.0'
  end
  return string.format('%+.' .. digits .. 'f', x)
end

local function fmt_pct_ci(pct, ci)
  return string.format('%s%% [%s, %s]', signed(pct), signed(ci[1]), signed(ci[2]))
end

--- A metric's value as the reports write it: 10193, 1.61, 0.4123; '-' for no number.
---@param v any
---@return string
function M.value_text(v)
  if type(v) ~= 'number' then
    return '-'
  elseif math.abs(v) >= 100 then
    return string.format('%.0f', v)
  elseif math.abs(v) >= 1 then
    return string.format('%.3g', v)
  end
  return string.format('%.4g', v)
end

local function fmt_p(p)
  if type(p) ~= 'number' then
    return 'p ?'
  elseif p < 0.001 then
    return 'p < 0.001'
  end
  return string.format('p %.3f', p)
end

local function date_of(time)
  return type(time) == 'string' and time:sub(1, 10) or '?'
end

--- The stack part of a change as one line: what changed, or why nothing is said.
---@param c table a change
---@return string
function M.stack_text(c)
  if c.stack == nil then
    return 'software stack not recorded for these runs'
  elseif #c.stack > 0 then
    return stackdiff.format(c.stack)
  elseif c.stack_near then
    local n = c.stack_near
    return string.format('no stack change at this run; %d run%s %s (%s): %s',
      math.abs(n.offset), math.abs(n.offset) == 1 and '' or 's',
      n.offset < 0 and 'earlier' or 'later', tostring(n.run_id), stackdiff.format(n.stack))
  end
  return 'no change in the recorded software stack'
end

--- One change as a line: 'ROCm 6.2.4 -> 6.3.1, torch 2.4.1 -> 2.5.0: tokens/s/GPU -4.1%
--- [-5.0, -3.2]' (the stack part left out when nothing is known to have changed).
---@param metric string
---@param c table a change of analyse's result
---@return string
function M.change_text(metric, c)
  local stack = c.stack and #c.stack > 0 and stackdiff.format(c.stack) .. ': ' or ''
  return string.format('%s%s %s', stack, M.LABEL[metric] or metric, fmt_pct_ci(c.pct, c.ci))
end

--- A % change with its CI: '-4.1% [-5.0, -3.2]'.
---@param pct number
---@param ci number[] {lo, hi}
---@return string
function M.pct_text(pct, ci)
  return fmt_pct_ci(pct, ci)
end

local function change_lines(out, r, c)
  out[#out + 1] = string.format('  %s  %-11s %s', date_of(c.time), c.kind or 'change',
    M.change_text(r.metric, c))
  out[#out + 1] = string.format('      first run after: %s (%s); mean %s -> %s; %s',
    tostring(c.run_id), tostring(c.time), M.value_text(c.before), M.value_text(c.after),
    fmt_p(c.p))
  if not (c.stack and #c.stack > 0) then
    out[#out + 1] = '      stack: ' .. M.stack_text(c)
  end
  for _, n in ipairs(c.notes) do
    out[#out + 1] = string.format('      note %s: %s', date_of(n.time), n.text)
  end
end

local function latest_line(r)
  local l = r.latest
  if not l then
    return nil
  elseif l.skipped then
    return '  latest runs: not tested (' .. l.skipped .. ')'
  end
  local what
  if l.change then
    what = 'the change above'
  elseif l.kind then
    what = l.kind
  else
    what = 'no change'
  end
  return string.format('  latest %d run%s vs the %d before: %s: %s', l.n_latest,
    l.n_latest == 1 and '' or 's', l.n_baseline, fmt_pct_ci(l.pct, l.ci), what)
end

--- The report as terminal text: a block per series (its changes, each with the stack change,
--- the first run after it and the notes near it; the latest runs' test), then a summary line.
---@param report table from check
---@return string
function M.text(report)
  local label = M.LABEL[report.metric] or report.metric
  local out = { string.format('%s (%s is better), %d series%s', label, report.sense,
    #report.results, report.since and (', since ' .. report.since) or '') }
  for _, r in ipairs(report.results) do
    local pts = r.points
    out[#out + 1] = ''
    out[#out + 1] = tostring(r.series)
    if #pts == 0 then
      out[#out + 1] = '  no runs with ' .. r.metric
    else
      out[#out + 1] = string.format('  %d run%s, %s .. %s, last %s', #pts,
        #pts == 1 and '' or 's', date_of(pts[1].time), date_of(pts[#pts].time),
        M.value_text(pts[#pts].value))
    end
    if r.too_few then
      out[#out + 1] = '  too few runs: ' .. r.too_few
    elseif #r.changes == 0 then
      out[#out + 1] = '  no change point'
    end
    for _, c in ipairs(r.changes) do
      change_lines(out, r, c)
    end
    local ll = latest_line(r)
    if ll then
      out[#out + 1] = ll
    end
  end
  out[#out + 1] = ''
  local summary = string.format('%d regression%s, %d improvement%s in %d series',
    report.regressions, report.regressions == 1 and '' or 's', report.improvements,
    report.improvements == 1 and '' or 's', #report.results)
  if report.fail_on then
    if report.nothing_checked then
      summary = string.format('%s; --fail-on %g%%: FAILED: %s', summary, report.fail_on,
        report.nothing_checked)
    elseif report.failed then
      local worst = report.failing[1]
      for _, f in ipairs(report.failing) do
        if math.abs(f.pct) > math.abs(worst.pct) then
          worst = f
        end
      end
      summary = string.format('%s; --fail-on %g%%: FAILED (%s%% at %s on %s)', summary,
        report.fail_on, signed(worst.pct), date_of(worst.time), worst.series)
    else
      summary = string.format('%s; --fail-on %g%%: passed', summary, report.fail_on)
    end
  end
  out[#out + 1] = summary
  return table.concat(out, '\n') .. '\n'
end

-- ---------------------------------------------------------------------------------------------
-- JSON

local function items_json(items)
  local out = json.array()
  for _, it in ipairs(items or {}) do
    out[#out + 1] = { what = it.what, from = it.from or json.null, to = it.to or json.null }
  end
  return out
end

local function change_json(c)
  local notes = json.array()
  for _, n in ipairs(c.notes) do
    notes[#notes + 1] = { time = n.time, text = n.text }
  end
  local near = json.null
  if c.stack_near then
    near = { offset = c.stack_near.offset, run_id = c.stack_near.run_id,
      time = c.stack_near.time, stack = items_json(c.stack_near.stack) }
  end
  return {
    index = c.index, time = c.time, run_id = c.run_id or json.null, sha256 = c.sha256 or json.null,
    before_run_id = c.before_run_id or json.null, before = c.before, after = c.after,
    pct = c.pct, ci = json.array({ c.ci[1], c.ci[2] }), p = c.p or json.null,
    kind = c.kind or json.null, stack_recorded = c.stack ~= nil, stack = items_json(c.stack),
    stack_text = M.stack_text(c), stack_near = near, notes = notes,
  }
end

local function latest_json(l)
  if not l then
    return json.null
  elseif l.skipped then
    return { skipped = l.skipped, n_latest = l.n_latest, n_baseline = l.n_baseline }
  end
  return { pct = l.pct, ci = json.array({ l.ci[1], l.ci[2] }), p = l.p or json.null,
    kind = l.kind or json.null,
    n_latest = l.n_latest, n_baseline = l.n_baseline, restates_change = l.change or json.null,
    baseline_from = l.baseline_from, latest_from = l.latest_from }
end

--- The report as a plain table for tp.json (`tplua history check --json`), schema
--- 'tplua.history.check/1'.
---@param report table from check
---@return table
function M.json(report)
  local results = json.array()
  for _, r in ipairs(report.results) do
    local points, changes = json.array(), json.array()
    for _, p in ipairs(r.points) do
      points[#points + 1] = { time = p.time, value = p.value, run_id = p.run_id or json.null,
        sha256 = p.sha256 or json.null }
    end
    for _, c in ipairs(r.changes) do
      changes[#changes + 1] = change_json(c)
    end
    results[#results + 1] = { series = r.series, metric = r.metric, sense = r.sense,
      runs = #r.points, too_few = r.too_few or json.null, changes = changes,
      latest = latest_json(r.latest), points = points }
  end
  local failing = json.array()
  for _, f in ipairs(report.failing) do
    failing[#failing + 1] = { series = f.series, time = f.time, pct = f.pct, latest = f.latest }
  end
  return { schema = 'tplua.history.check/1', metric = report.metric, sense = report.sense,
    since = report.since or json.null, fail_on = report.fail_on or json.null,
    checked = report.checked, nothing_checked = report.nothing_checked or json.null,
    regressions = report.regressions, improvements = report.improvements,
    failed = report.failed, failing = failing, results = results }
end

return M
