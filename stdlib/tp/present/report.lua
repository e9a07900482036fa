-- tp.report: a comparison report from a result set: the verdict first (fair or not, the headline
-- ratio with its confidence interval), then the findings of the audit, the loss-curve checks and
-- the statistics, the comparison table with its basis, the runs, and the plots. Written as
-- report.md, a self-contained report.html (inline CSS and SVG, no script, no external asset)
-- and PNG + SVG plots drawn by gnuplot (tp.plot). Every file is replaced atomically.
local results = require('tp.analyse.results')
local compare = require('tp.analyse.compare')
local audit = require('tp.analyse.audit')
local convergence = require('tp.analyse.convergence')
local efficiency = require('tp.analyse.efficiency')
local stack = require('tp.analyse.stack')
local plot = require('tp.present.plot')
local fs = require('tp.fs')

local M = {}

--- Colours of well-known group values; other values take tp.plot.PALETTE in order.
M.COLORS = { nvd = '#76b900', amd = '#ed1c24', cpu = '#7f7f7f' }

--- The plots a report draws, in order (file stems).
M.PLOTS = { 'throughput', 'step_time', 'loss', 'memory', 'mfu' }

--- Metrics the headline ratio is taken from: the first with a ratio wins.
M.HEADLINE_METRICS = { 'tokens_per_s_per_gpu', 'tokens_per_s', 'step_time', 'mfu' }

local SEVERITY_ORDER = { error = 1, warning = 2, info = 3 }

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function misuse(fname, fmt, ...)
  error(string.format('tp.report.%s: ', fname) .. string.format(fmt, ...), 3)
end

local function g(v, fmtspec)
  if v == nil then
    return '-'
  end
  if type(v) ~= 'number' then
    return tostring(v)
  end
  if not is_finite(v) then
    return tostring(v)
  end
  if fmtspec then
    return string.format(fmtspec, v)
  end
  if math.type(v) == 'integer' then
    return tostring(v)
  end
  return string.format('%.4g', v)
end

local function fmt_p(p)
  if p == nil then
    return 'n/a'
  end
  if p < 0.0001 then
    return '< 0.0001'
  end
  return string.format('%.4f', p)
end

local function plural(n, word)
  return string.format('%d %s%s', n, word, n == 1 and '' or 's')
end

-- ---------------------------------------------------------------------------------------------
-- The model: everything a report says, computed once and rendered by markdown() and html().

local BUILD_OPTS = {
  by = 'string', baseline = 'any', title = 'string', methodology = 'string', seed = 'integer',
  n_boot = 'integer', level = 'number', convention = 'string', prices = 'table',
  hardware = 'table', sources = 'table', generated = 'string',
}

local function check_opts(fname, opts, extra)
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    misuse(fname, 'options must be a table, got %s', type(opts))
  end
  for k, v in pairs(opts) do
    local want = BUILD_OPTS[k] or (extra and extra[k])
    if not want then
      misuse(fname, "unknown option '%s'", tostring(k))
    end
    local ok = want == 'any' or type(v) == want or (want == 'integer' and math.type(v) == 'integer')
    if not ok then
      misuse(fname, "option '%s' must be %s, got %s", k, want, math.type(v) or type(v))
    end
  end
  return opts
end

local function group_colors(order)
  local colors, k = {}, 0
  for _, v in ipairs(order) do
    local known = M.COLORS[tostring(v)]
    if known then
      colors[v] = known
    else
      k = k + 1
      colors[v] = plot.PALETTE[(k - 1) % #plot.PALETTE + 1]
    end
  end
  return colors
end

local function metric_entry(cmp, name)
  for _, m in ipairs(cmp and cmp.metrics or {}) do
    if m.name == name then
      return m
    end
  end
  return nil
end

local function headline(cmp)
  for _, name in ipairs(M.HEADLINE_METRICS) do
    local m = metric_entry(cmp, name)
    if m and #m.ratios > 0 then
      local out = {}
      for _, r in ipairs(m.ratios) do
        out[#out + 1] = { metric = name, label = m.label, better = m.better, group = r.group,
          baseline = r.baseline, ratio = r.ratio, ci = r.ci, p = r.p,
          significant = r.significant, n = r.n, n_baseline = r.n_baseline,
          is_better = r.better }
      end
      return out
    end
  end
  return {}
end

local function add_findings(list, source, findings)
  for _, f in ipairs(findings or {}) do
    list[#list + 1] = { severity = f.severity or 'info', source = source, kind = f.kind or '?',
      message = tostring(f.message) }
  end
end

---@class tp.report.BuildOpts
---@field by? string key that splits the runs (default 'platform')
---@field baseline? any the group the others are divided by (default nvd, else the first)
---@field title? string report title (default: the models and the groups)
---@field methodology? string audit under this methodology instead of the records' own
---@field seed? integer bootstrap seed (default 42)
---@field n_boot? integer bootstrap resamples (default 10000)
---@field level? number confidence level (default 0.95)
---@field convention? string FLOPs convention for MFU (default 'megatron')
---@field prices? table USD per GPU-hour by group or hardware id (tp.compare)
---@field hardware? table hardware id by group (tp.compare)
---@field sources? string[] the directories the results came from (shown in the header)
---@field generated? string the date line (default: now, UTC)

--- Computes what a report says about `set` (a tp.results ResultSet): the comparison
--- (tp.compare), the audit (tp.audit.compare), the loss checks (tp.convergence.check_set), the
--- verdict and the headline ratio. Fails with nil, message, code when the set is empty
--- ('ENODATA') or the baseline names no group ('EINVAL').
---```lua
---local model = assert(tp.report.build(set, { by = 'platform', baseline = 'nvd' }))
---print(model.verdict.label, model.verdict.headline[1].ratio)
---```
---@param set table
---@param opts? tp.report.BuildOpts
---@return table|nil model, string? err, string? code
function M.build(set, opts)
  if type(set) ~= 'table' or type(set.runs) ~= 'table' then
    misuse('build', 'result set (tp.results.load) expected, got %s', type(set))
  end
  opts = check_opts('build', opts)
  if #set.runs == 0 then
    local why = ''
    if set.errors and #set.errors > 0 then
      why = string.format(' (%s could not be read: %s)', plural(#set.errors, 'file'),
        set.errors[1].message)
    end
    return nil, 'report: no runs to report on' .. why, 'ENODATA'
  end
  local by = opts.by or 'platform'
  local copts = { by = by, baseline = opts.baseline, methodology = opts.methodology,
    seed = opts.seed, n_boot = opts.n_boot, level = opts.level, convention = opts.convention,
    prices = opts.prices, hardware = opts.hardware }
  local cmp, cerr, ccode = compare.compare(set, copts)
  if not cmp then
    return nil, 'report: ' .. tostring(cerr):gsub('^compare: ', ''), ccode
  end
  local cv = convergence.check_set(set, { by = by })
  local per_run = {}
  for _, f in ipairs(cv.findings) do
    if #f.runs == 1 and not tostring(f.kind):match('^curves_') then
      per_run[f.runs[1]] = per_run[f.runs[1]] or {}
      table.insert(per_run[f.runs[1]], f)
    end
  end
  for _, r in ipairs(set.runs) do
    per_run[r.id] = per_run[r.id] or {}
  end
  local aud = audit.compare(set, { by = by, methodology = opts.methodology,
    loss_findings = per_run })

  local order = {}
  for i, gr in ipairs(cmp.groups) do
    order[i] = gr.value
  end
  local findings = {}
  add_findings(findings, 'audit', aud.findings)
  add_findings(findings, 'loss', cv.findings)
  add_findings(findings, 'statistics', cmp.warnings)
  for _, e in ipairs(set.errors or {}) do
    findings[#findings + 1] = { severity = 'warning', source = 'input', kind = 'unreadable',
      message = tostring(e.message) .. ' (left out)' }
  end
  for i, f in ipairs(findings) do
    f.order = i
  end
  table.sort(findings, function(a, b)
    local sa, sb = SEVERITY_ORDER[a.severity] or 9, SEVERITY_ORDER[b.severity] or 9
    if sa ~= sb then
      return sa < sb
    end
    return a.order < b.order
  end)
  local counts = { error = 0, warning = 0, info = 0 }
  for _, f in ipairs(findings) do
    counts[f.severity] = (counts[f.severity] or 0) + 1
  end

  local verdict = { counts = counts, headline = headline(cmp), reasons = {} }
  for _, f in ipairs(findings) do
    if f.severity == 'error' then
      verdict.reasons[#verdict.reasons + 1] = f.message
    end
  end
  if #order < 2 then
    verdict.status = 'single'
    verdict.label = 'Nothing to compare'
    verdict.summary = string.format('every run has %s = %s: a comparison needs two groups',
      by, tostring(order[1]))
  elseif counts.error > 0 then
    verdict.status = 'unfair'
    verdict.label = 'Not a fair comparison'
    verdict.summary = string.format('%s found: the ratios below are measured, but they do not ' ..
      'compare like with like until %s fixed', plural(counts.error, 'error'),
      counts.error == 1 and 'it is' or 'they are')
  else
    verdict.status = 'fair'
    verdict.label = 'Fair comparison'
    verdict.summary = string.format('the audit found no error under %s (%s); %s', aud.methodology,
      aud.methodology_source, counts.warning > 0 and (plural(counts.warning, 'warning') ..
      ' to read below') or 'no warnings')
  end
  verdict.fair = verdict.status == 'fair'
  verdict.summary = verdict.summary:sub(1, 1):upper() .. verdict.summary:sub(2)

  local models_seen = {}
  for _, r in ipairs(set.runs) do
    if r.model then
      models_seen[r.model] = true
    end
  end
  local mlist = {}
  for m in pairs(models_seen) do
    mlist[#mlist + 1] = m
  end
  table.sort(mlist)
  local title = opts.title
  if not title then
    -- "amd vs nvd": the groups measured against the baseline first, the baseline last.
    local names = {}
    for i = 2, #order do
      names[#names + 1] = tostring(order[i])
    end
    names[#names + 1] = tostring(order[1])
    title = string.format('%s: %s', #mlist > 0 and table.concat(mlist, ', ') or 'Results',
      table.concat(names, ' vs '))
  end
  local per_run_efficiency = {}
  for _, r in ipairs(set.runs) do
    local gv = results.get(r, by)
    if gv == nil then
      gv = '(none)'
    end
    local hw = opts.hardware and (opts.hardware[gv] or opts.hardware[r.id])
    local eopts = { hardware = hw, group = gv, convention = opts.convention }
    per_run_efficiency[r.id] = { mfu = (efficiency.mfu(r, eopts)),
      joules = (efficiency.energy(r, eopts)) }
  end
  return {
    title = title,
    generated = opts.generated or os.date('!%Y-%m-%d %H:%M UTC'),
    version = require('tp').version,
    sources = opts.sources or {},
    by = by,
    baseline = cmp.baseline,
    order = order,
    colors = group_colors(order),
    set = set,
    compare = cmp,
    audit = aud,
    convergence = cv,
    findings = findings,
    verdict = verdict,
    level = math.floor((cmp.settings.level or 0.95) * 100 + 0.5),
    hardware = opts.hardware,
    efficiency = per_run_efficiency,
    stack = stack.table(set, { by = by, order = order }),
  }
end

-- ---------------------------------------------------------------------------------------------
-- Plot data.

-- The step times of a run's steady-state window (the window tp.record or tp.results chose).
local function steady_step_times(run)
  local times = run.step_times or {}
  local iters = run.iterations or {}
  local first = run.steady_first_iteration
  local out = {}
  if run.kind == 'tprimat' then
    -- tp.results recomputed the window on the finite step times; `first` is an index there.
    local k = 0
    for i = 1, #times do
      if is_finite(times[i]) then
        k = k + 1
        if not first or k >= first then
          out[#out + 1] = times[i]
        end
      end
    end
    return out
  end
  for i = 1, #times do
    local it = iters[i]
    if is_finite(times[i]) and (not first or not is_finite(it) or it >= first) then
      out[#out + 1] = times[i]
    end
  end
  return out
end

M.steady_step_times = steady_step_times

-- Charts are built from a context {set, by, order, colors, idx, cats, level, convention,
-- compare = function(metric) -> comparison entry}: a report model gives its comparison; the REPL
-- computes only the metric a plot needs.

local function group_of(ctx, run)
  local v = results.get(run, ctx.by)
  if v == nil then
    v = '(none)'
  end
  return v
end

local function bar_series(ctx, name, scale)
  local m = ctx.compare(name)
  if not m then
    return nil
  end
  local s = { values = {}, lo = {}, hi = {}, points = {}, colors = {} }
  local any = false
  for i, v in ipairs(ctx.order) do
    s.colors[i] = ctx.colors[v]
    s.points[i] = {}
  end
  for _, gr in ipairs(m.groups) do
    local i = ctx.idx[gr.value]
    if i and is_finite(gr.mean) then
      any = true
      s.values[i] = gr.mean * scale
      if gr.ci then
        s.lo[i], s.hi[i] = gr.ci.lo * scale, gr.ci.hi * scale
      end
    end
  end
  return any and s or nil, m
end

-- Per-run MFU as the comparison computes it (tp.efficiency: recorded, or from tp.metrics and
-- the catalog GPU, with the hardware given by group or run id).
local function mfu_by_run(ctx)
  local out = {}
  for _, r in ipairs(ctx.set.runs) do
    local gv = group_of(ctx, r)
    local hw = ctx.hardware and (ctx.hardware[gv] or ctx.hardware[r.id])
    local v = efficiency.mfu(r, { hardware = hw, group = gv, convention = ctx.convention })
    if is_finite(v) then
      out[r.id] = v
    end
  end
  return out
end

local BUILDERS = {}

function BUILDERS.throughput(ctx)
  local s = bar_series(ctx, 'tokens_per_s_per_gpu', 1)
  if not s then
    return { missing = 'no run records tokens/s/GPU' }
  end
  for _, r in ipairs(ctx.set.runs) do
    local i = ctx.idx[group_of(ctx, r)]
    if i and is_finite(r.tokens_per_s_per_gpu) then
      table.insert(s.points[i], r.tokens_per_s_per_gpu)
    end
  end
  return { caption = string.format('Mean tokens/s/GPU over the steady-state window, by %s; ' ..
    'whiskers: %d%% bootstrap confidence interval of the mean; dots: individual runs.', ctx.by,
    ctx.level),
    chart = { kind = 'bars', title = 'Throughput per GPU (tokens/s/GPU)',
      ylabel = 'tokens/s/GPU', categories = ctx.cats, series = { s } } }
end

function BUILDERS.step_time(ctx)
  local boxes, nsamples = {}, 0
  for _, r in ipairs(ctx.set.runs) do
    local gv = group_of(ctx, r)
    local samples = steady_step_times(r)
    nsamples = nsamples + #samples
    boxes[#boxes + 1] = { label = tostring(r.id), samples = samples, color = ctx.colors[gv],
      legend = tostring(gv), group = ctx.idx[gv] or math.huge }
  end
  if nsamples == 0 then
    return { missing = 'no run records per-iteration step times' }
  end
  table.sort(boxes, function(a, b)
    if a.group ~= b.group then
      return a.group < b.group
    end
    return a.label < b.label
  end)
  return { caption = 'Step times of each run over its steady-state window: box = quartiles, ' ..
    'line = median, whiskers = 1.5 x IQR, dots = outliers.',
    chart = { kind = 'boxes', title = 'Step time per run (steady state)',
      ylabel = 'seconds per iteration', categories = boxes } }
end

-- Line charts of a per-iteration quantity: the loss (tp.convergence.curve) or the learning rate.
local function curves(ctx, what)
  local series, seen = {}, {}
  for _, r in ipairs(ctx.set.runs) do
    local xs, ys = {}, {}
    if what == 'loss' then
      local ok, c = pcall(convergence.curve, r)
      if ok then
        xs, ys = c.x, c.y
      end
    else
      local its, lrs = r.iterations or {}, r.learning_rates or {}
      for i = 1, #lrs do
        if is_finite(lrs[i]) then
          xs[#xs + 1] = is_finite(its[i]) and its[i] or i
          ys[#ys + 1] = lrs[i]
        end
      end
    end
    if #xs > 0 then
      local gv = group_of(ctx, r)
      seen[gv] = (seen[gv] or 0) + 1
      series[#series + 1] = { title = tostring(r.id), x = xs, y = ys, color = ctx.colors[gv],
        dash = seen[gv], group = ctx.idx[gv] or math.huge, width = 1.2 }
    end
  end
  table.sort(series, function(a, b)
    if a.group ~= b.group then
      return a.group < b.group
    end
    return a.title < b.title
  end)
  return series
end

function BUILDERS.loss(ctx)
  local series = curves(ctx, 'loss')
  if #series == 0 then
    return { missing = 'no run records a loss' }
  end
  return { caption = string.format('Training loss of every run against the iteration, ' ..
    'coloured by %s (one dash pattern per repeat).', ctx.by),
    chart = { kind = 'lines', title = 'Training loss', xlabel = 'iteration', ylabel = 'loss',
      series = series } }
end

function BUILDERS.lr(ctx)
  local series = curves(ctx, 'lr')
  if #series == 0 then
    return { missing = 'no run records a learning rate' }
  end
  return { caption = string.format('Learning rate of every run against the iteration, ' ..
    'coloured by %s.', ctx.by),
    chart = { kind = 'lines', title = 'Learning rate', xlabel = 'iteration',
      ylabel = 'learning rate', series = series } }
end

-- Allocated, reserved and device-used memory are kept apart (docs/record.md memory_metrics).
local MEMORY_KINDS = {
  { key = 'peak_memory_allocated_gib', title = 'allocated (peak)', color = '#4c72b0' },
  { key = 'peak_memory_reserved_gib', title = 'reserved (peak)', color = '#dd8452' },
  { key = 'peak_device_memory_used_gib', title = 'device used (peak)', color = '#55a868' },
}

function BUILDERS.memory(ctx)
  local mseries = {}
  local n_cats = #ctx.cats
  for _, k in ipairs(MEMORY_KINDS) do
    local sum, n, pts = {}, {}, {}
    for i = 1, n_cats do
      sum[i], n[i], pts[i] = 0, 0, {}
    end
    for _, r in ipairs(ctx.set.runs) do
      local i = ctx.idx[group_of(ctx, r)]
      local v
      if k.key == 'peak_memory_allocated_gib' then
        v = r.memory_gib  -- tp.results converts tprimat's decimal GB
      else
        local mm = type(r.memory_metrics) == 'table' and r.memory_metrics or {}
        v = mm[k.key]
      end
      if i and is_finite(v) then
        sum[i], n[i] = sum[i] + v, n[i] + 1
        table.insert(pts[i], v)
      end
    end
    local values, any = {}, false
    for i = 1, n_cats do
      if n[i] > 0 then
        values[i] = sum[i] / n[i]
        any = true
      end
    end
    if any then
      mseries[#mseries + 1] = { title = k.title, color = k.color, values = values, points = pts }
    end
  end
  if #mseries == 0 then
    return { missing = 'no run records memory figures' }
  end
  return { caption = string.format('Peak memory per GPU, mean by %s (GiB): allocated by live ' ..
    'tensors, reserved by the caching allocator, and used on the whole device, as the logs ' ..
    'report them; dots: individual runs.', ctx.by),
    chart = { kind = 'bars', title = 'Peak memory per GPU (GiB)', ylabel = 'GiB',
      categories = ctx.cats, series = mseries } }
end

function BUILDERS.mfu(ctx)
  local ms, m = bar_series(ctx, 'mfu', 100)
  if not ms then
    local why = m and m.missing[1] and m.missing[1].reason or 'not computable'
    return { missing = 'MFU: ' .. why }
  end
  local per = mfu_by_run(ctx)
  for _, r in ipairs(ctx.set.runs) do
    local i = ctx.idx[group_of(ctx, r)]
    if i and per[r.id] then
      table.insert(ms.points[i], per[r.id] * 100)
    end
  end
  return { caption = string.format('MFU = model FLOPs per second / (GPUs x dense peak of the ' ..
    'precision run), %s convention; whiskers: %d%% bootstrap CI; dots: runs.', ctx.convention,
    ctx.level),
    chart = { kind = 'bars', title = 'Model FLOPs utilisation (%)', ylabel = 'MFU (%)',
      categories = ctx.cats, series = { ms } } }
end

local TITLES = { throughput = 'Throughput per GPU', step_time = 'Step-time distributions',
  loss = 'Loss curves', memory = 'Memory', mfu = 'Model FLOPs utilisation',
  lr = 'Learning rate' }

--- The chart names `chart` knows: the report's plots (M.PLOTS) and 'lr'.
M.CHARTS = { 'throughput', 'step_time', 'loss', 'memory', 'mfu', 'lr' }

local function make_ctx(set, by, order, cmp_fn, level, convention, hw)
  local idx, cats = {}, {}
  for i, v in ipairs(order) do
    idx[v] = i
    cats[i] = tostring(v)
  end
  return { set = set, by = by, order = order, colors = group_colors(order), idx = idx,
    cats = cats, compare = cmp_fn, level = level, convention = convention, hardware = hw }
end

local function entry(ctx, name)
  local e = BUILDERS[name](ctx)
  e.name = name
  e.title = TITLES[name]
  return e
end

--- Returns the charts of a report model (tp.plot chart tables), in M.PLOTS order:
--- {{name=, title=, caption=, chart=}}; a plot without data is {name=, title=, missing = why}.
---@param model table from `build`
---@return table[]
function M.charts(model)
  if type(model) ~= 'table' or type(model.compare) ~= 'table' then
    misuse('charts', 'report model (tp.report.build) expected')
  end
  if model.charts then
    return model.charts
  end
  local ctx = make_ctx(model.set, model.by, model.order, function(name)
    return metric_entry(model.compare, name)
  end, model.level, model.compare.settings.convention, model.hardware)
  local out = {}
  for _, name in ipairs(M.PLOTS) do
    out[#out + 1] = entry(ctx, name)
  end
  model.charts = out
  return out
end

--- Builds one chart of a result set without a full report: `name` is one of M.CHARTS; the
--- runs are split by `opts.by` (default 'platform'), nvd first when present. Returns
--- {name=, title=, caption=, chart=} or {name=, title=, missing = why}.
---```lua
---local c = tp.report.chart(set, 'loss')
---if c.chart then print(tp.plot.render(c.chart, { format = 'dumb' }).text) end
---```
---@param set table a tp.results ResultSet
---@param name string
---@param opts? {by?: string, seed?: integer, convention?: string}
---@return table
function M.chart(set, name, opts)
  if type(set) ~= 'table' or type(set.runs) ~= 'table' or type(set.group_keys) ~= 'function' then
    misuse('chart', 'result set (tp.results.load) expected, got %s', type(set))
  end
  if not BUILDERS[name] then
    misuse('chart', "unknown chart '%s' (known: %s)", tostring(name),
      table.concat(M.CHARTS, ', '))
  end
  opts = opts or {}
  if type(opts) ~= 'table' then
    misuse('chart', 'options must be a table, got %s', type(opts))
  end
  for k in pairs(opts) do
    if k ~= 'by' and k ~= 'seed' and k ~= 'convention' then
      misuse('chart', "unknown option '%s'", tostring(k))
    end
  end
  local by = opts.by or 'platform'
  local keys = set:group_keys(by)
  local order = {}
  if by == 'platform' then
    for _, k in ipairs(keys) do
      if k == 'nvd' then
        order[1] = k
      end
    end
  end
  for _, k in ipairs(keys) do
    if k ~= order[1] then
      order[#order + 1] = k
    end
  end
  local convention = opts.convention or 'megatron'
  local cache = {}
  local ctx = make_ctx(set, by, order, function(metric)
    if cache[metric] == nil then
      local res = #set.runs > 0 and compare.compare(set, { by = by, metrics = { metric },
        seed = opts.seed, convention = convention, baseline = order[1] })
      cache[metric] = res and res.metrics[1] or false
    end
    return cache[metric] or nil
  end, 95, convention)
  return entry(ctx, name)
end

-- ---------------------------------------------------------------------------------------------
-- Shared text pieces.

local function ratio_text(h, level)
  local ci = h.ci and string.format('%d%% CI %.3f–%.3f', level, h.ci.lo, h.ci.hi)
    or 'no CI (fewer than 2 runs a side)'
  local p = h.p and string.format('Welch p %s%s', fmt_p(h.p),
    h.significant and '' or ', not significant') or 'no test'
  return string.format('%s, %s, %s vs %s runs', ci, p, g(h.n), g(h.n_baseline))
end

-- One line per headline ratio: "amd / nvd = 1.146x tokens/s/GPU (higher is better)".
local function headline_lines(model)
  local out = {}
  for _, h in ipairs(model.verdict.headline) do
    out[#out + 1] = {
      main = string.format('%s / %s = %.3f× %s', tostring(h.group), tostring(h.baseline),
        h.ratio, h.label),
      detail = ratio_text(h, model.level) .. string.format(' (%s is better)', h.better),
      better = h.is_better,
    }
  end
  return out
end

local function basis_rows(model)
  local b = model.compare.basis or {}
  local rows = {}
  rows[#rows + 1] = { 'Methodology', string.format('%s (audit: %s; %s)', tostring(b.methodology),
    tostring(model.audit.methodology), tostring(model.audit.methodology_source)) }
  rows[#rows + 1] = { 'Throughput', tostring(b.tokens) }
  local keys = {}
  for k in pairs(b.steady_state or {}) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    rows[#rows + 1] = { 'Steady-state window (' .. k .. ')', tostring(b.steady_state[k]) }
  end
  if b.flops then
    local per = {}
    local fk = {}
    for k in pairs(b.flops.flops_per_token or {}) do
      fk[#fk + 1] = k
    end
    table.sort(fk)
    for _, k in ipairs(fk) do
      per[#per + 1] = string.format('%s: %.4g FLOPs/token', k, b.flops.flops_per_token[k])
    end
    rows[#rows + 1] = { 'FLOPs convention', string.format('%s: %s%s%s', tostring(b.flops
      .convention), tostring(b.flops.formula), #per > 0 and ('; ' .. table.concat(per, '; '))
      or '', b.flops.note and ('; ' .. b.flops.note) or '') }
  end
  for _, section in ipairs({ { 'peak', 'Peak divisor' }, { 'energy', 'Energy basis' },
    { 'price', 'Price basis' } }) do
    local t = b[section[1]] or {}
    local ks = {}
    for k in pairs(t) do
      ks[#ks + 1] = k
    end
    table.sort(ks)
    for _, k in ipairs(ks) do
      rows[#rows + 1] = { section[2] .. ' (' .. k .. ')', tostring(t[k]) }
    end
  end
  if b.train_tokens then
    rows[#rows + 1] = { 'Time to train', string.format('%.4g tokens at the measured rate',
      b.train_tokens) }
  end
  rows[#rows + 1] = { 'Statistics', tostring(b.statistics) }
  return rows
end

-- Rows of the comparison table: {metric label, group, n, mean, sd, CI, ratio, ratio CI, p}.
local function comparison_rows(model)
  local level = model.level
  local rows = {}
  for _, m in ipairs(model.compare.metrics) do
    local has = false
    for _, s in ipairs(m.groups) do
      if s.n > 0 then
        has = true
      end
    end
    if has then
      local spec = compare.METRICS[m.name] or {}
      local fmtspec = spec.fmt or '%.4g'
      local scale = m.scale or 1
      local function f(v)
        return v and string.format(fmtspec, v * scale) or '-'
      end
      local ratio_of = {}
      for _, r in ipairs(m.ratios) do
        ratio_of[r.group] = r
      end
      for k, s in ipairs(m.groups) do
        local r = ratio_of[s.value]
        local row = {
          metric = k == 1 and string.format('%s (%s, %s is better)', m.label, m.unit, m.better)
            or '',
          group = tostring(s.value), n = tostring(s.n), mean = f(s.mean),
          sd = s.stddev and f(s.stddev) or '-',
          ci = s.ci and string.format('%s – %s', f(s.ci.lo), f(s.ci.hi)) or '-',
          ratio = '', ratio_ci = '', p = '', better = nil,
        }
        if s.value == model.compare.baseline then
          row.ratio = s.n > 0 and 'baseline' or ''
        elseif r then
          row.ratio = string.format('%.3f', r.ratio)
          row.better = r.better
          row.ratio_ci = r.ci and string.format('%.3f – %.3f', r.ci.lo, r.ci.hi) or 'n/a'
          row.p = r.p and (fmt_p(r.p) .. (r.significant and ' *' or '')) or 'n/a'
        end
        rows[#rows + 1] = row
      end
    end
  end
  return rows, level
end

-- A run's MFU and energy per token as the comparison computes them (tp.efficiency).
local function run_mfu(r, model)
  return (model.efficiency[r.id] or {}).mfu
end

local function run_joules(r, model)
  return (model.efficiency[r.id] or {}).joules
end

local RUN_COLUMNS = {
  { 'run', 'id' }, { 'platform', 'platform' }, { 'framework', 'framework' },
  { 'model', 'model' }, { 'GPU', 'gpu' }, { 'GPUs', 'gpus' }, { 'GBS', 'gbs' },
  { 'seq', 'seq_len' }, { 'precision', 'precision' }, { 'steady from', 'steady_first_iteration' },
  { 'step time (s)', 'step_time', '%.4f' }, { 'tokens/s/GPU', 'tokens_per_s_per_gpu', '%.1f' },
  { 'MFU (%)', run_mfu, '%.2f', 100 }, { 'J/token', run_joules, '%.4g' },
  { 'memory (GiB)', 'memory_gib', '%.2f' }, { 'last iter', 'last_iteration' },
  { 'status', 'status' },
}

-- The runs that were profiled (their record's `profile` member, tp.profile): {run, tool,
-- steps, links = {{label, href}}}, hrefs relative to the report's directory (model.dir, set by
-- write) or absolute.
local function profile_rows(model)
  local rows = {}
  local profile = require('tp.plan.profile')
  for _, r in ipairs(model.set:sort(model.by).runs) do
    local p = type(r.profile) == 'table' and r.profile or nil
    if p and type(p.tool) == 'string' then
      local s = type(p.steps) == 'table' and p.steps or {}
      local ok, path = pcall(r.file, r)
      rows[#rows + 1] = { run = tostring(r.id), tool = p.tool,
        steps = s[2] and string.format('%s-%s', g(s[1]), g(s[2])) or 'all',
        links = profile.links(p, ok and path or '.', model.dir) }
    end
  end
  return rows
end

local function run_rows(model)
  local rows = {}
  local runs = model.set:sort(model.by).runs
  for _, r in ipairs(runs) do
    local row = {}
    for j, c in ipairs(RUN_COLUMNS) do
      local v
      if type(c[2]) == 'function' then
        v = c[2](r, model)
      else
        v = results.get(r, c[2])
      end
      if type(v) == 'number' and c[4] then
        v = v * c[4]
      end
      if type(v) == 'number' and math.type(v) == 'float' and v == math.floor(v) and not c[3]
        and math.abs(v) < 2 ^ 53 then
        v = math.tointeger(v)
      end
      row[j] = v == nil and '' or g(v, type(v) == 'number' and c[3] or nil)
    end
    rows[#rows + 1] = row
  end
  return rows
end

-- ---------------------------------------------------------------------------------------------
-- Markdown.

local function md_text(s)
  s = tostring(s):gsub('[%c]', ' ')
  return (s:gsub('([\\`*_{}%[%]<>#|~])', '\\%1'))
end

local function md_row(cells)
  local out = {}
  for i, c in ipairs(cells) do
    out[i] = md_text(c)
  end
  return '| ' .. table.concat(out, ' | ') .. ' |'
end

local SEVERITY_LABEL = { error = 'ERROR', warning = 'WARNING', info = 'info' }

--- Renders a report model as Markdown (GitHub flavour). `plots` maps a plot name to
--- {png = 'file.png', svg = 'file.svg'} (relative to the report) or {error = 'why'}.
---@param model table from `build`
---@param plots? table<string, table>
---@return string
function M.markdown(model, plots)
  if type(model) ~= 'table' or type(model.verdict) ~= 'table' then
    misuse('markdown', 'report model (tp.report.build) expected')
  end
  plots = plots or {}
  local L = {}
  local function add(s)
    L[#L + 1] = s or ''
  end
  local v = model.verdict
  add('# ' .. md_text(model.title))
  add()
  add(string.format('%s · by %s · baseline %s · generated %s by tplua %s',
    plural(#model.set.runs, 'run'), md_text(model.by), md_text(model.baseline),
    md_text(model.generated), md_text(model.version)))
  if #model.sources > 0 then
    local s = {}
    for i, p in ipairs(model.sources) do
      s[i] = '`' .. tostring(p):gsub('[%c`]', '?') .. '`'
    end
    add()
    add('Results: ' .. table.concat(s, ', '))
  end
  add()
  add('## Verdict: ' .. md_text(v.label))
  add()
  add(md_text(v.summary) .. '.')
  add()
  for _, h in ipairs(headline_lines(model)) do
    add(string.format('- **%s** — %s', md_text(h.main), md_text(h.detail)))
  end
  if #v.headline == 0 and v.status ~= 'single' then
    add('- no ratio: no metric was measured on both sides')
  end
  add()
  add(string.format('Findings: %s, %s, %s.', plural(v.counts.error, 'error'),
    plural(v.counts.warning, 'warning'), plural(v.counts.info, 'note')))
  add()
  add('## Findings')
  add()
  if #model.findings == 0 then
    add('Nothing to report: the audit, the loss checks and the statistics found nothing.')
  end
  for _, f in ipairs(model.findings) do
    add(string.format('- **%s** (%s, %s): %s', SEVERITY_LABEL[f.severity] or f.severity,
      md_text(f.source), md_text(f.kind), md_text(f.message)))
  end
  add()
  add('## Comparison')
  add()
  local rows, level = comparison_rows(model)
  add(md_row({ 'metric', tostring(model.by), 'n', 'mean', 'sd', level .. '% CI', 'ratio',
    'ratio ' .. level .. '% CI', 'p' }))
  add('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for _, r in ipairs(rows) do
    add(md_row({ r.metric, r.group, r.n, r.mean, r.sd, r.ci, r.ratio .. (r.better == true and
      ' (better)' or r.better == false and ' (worse)' or ''), r.ratio_ci, r.p }))
  end
  add()
  add('\\* significant at alpha ' .. g(model.compare.settings.alpha) .. ' (Welch two-sided).')
  add()
  add('### Basis')
  add()
  add('| | |')
  add('| --- | --- |')
  for _, r in ipairs(basis_rows(model)) do
    add(md_row(r))
  end
  add()
  add('## Software stack')
  add()
  local st = model.stack
  add(st.any and "Each group's software stack, from the records' environment ('-': not "
    .. 'recorded).' or "The records carry no environment (they were written before tplua "
    .. "recorded it): '-' throughout.")
  add()
  local shead = { '' }
  for i, gv in ipairs(st.groups) do
    shead[i + 1] = gv
  end
  add(md_row(shead))
  add('| --- |' .. string.rep(' --- |', #st.groups))
  for _, row in ipairs(st.rows) do
    add(md_row({ row.label, table.unpack(row.values) }))
  end
  add()
  add('## Plots')
  add()
  for _, c in ipairs(M.charts(model)) do
    local p = plots[c.name] or {}
    add('### ' .. md_text(c.title))
    add()
    if c.missing then
      add('Not drawn: ' .. md_text(c.missing) .. '.')
    elseif p.png then
      add(string.format('![%s](%s)', md_text(c.title), p.png))
      add()
      add(md_text(c.caption) .. (p.svg and string.format(' ([SVG](%s))', p.svg) or ''))
    else
      add('Not drawn: ' .. md_text(p.error or 'plots were not rendered') .. '.')
    end
    add()
  end
  add('## Runs')
  add()
  local head = {}
  for j, c in ipairs(RUN_COLUMNS) do
    head[j] = c[1]
  end
  add(md_row(head))
  local rule = {}
  for j = 1, #RUN_COLUMNS do
    rule[j] = '---'
  end
  add('| ' .. table.concat(rule, ' | ') .. ' |')
  for _, r in ipairs(run_rows(model)) do
    add(md_row(r))
  end
  local skipped = model.set.skipped or {}
  if #skipped > 0 then
    add()
    add(string.format('%s in the result directories are not results and were skipped.',
      plural(#skipped, 'JSON file')))
  end
  local profiled = profile_rows(model)
  if #profiled > 0 then
    add()
    add('## Profiles')
    add()
    add('| run | tool | steps | traces |')
    add('| --- | --- | --- | --- |')
    for _, p in ipairs(profiled) do
      local links = {}
      for i, l in ipairs(p.links) do
        links[i] = string.format('[%s](%s)', md_text(l.label), l.href)
      end
      add(string.format('| %s | %s | %s | %s |', md_text(p.run), md_text(p.tool),
        md_text(p.steps), #links > 0 and table.concat(links, ', ') or 'none found'))
    end
  end
  add()
  return table.concat(L, '\n')
end

-- ---------------------------------------------------------------------------------------------
-- HTML.

local function esc(s)
  s = tostring(s):gsub('[%z\1-\8\11\12\14-\31\127]', ' ')
  return (s:gsub('[&<>"\']', { ['&'] = '&amp;', ['<'] = '&lt;', ['>'] = '&gt;',
    ['"'] = '&quot;', ["'"] = '&#39;' }))
end

M.escape_html = esc

-- gnuplot's svg terminal (gnuplot term/svg.trm) gives every document the same ids (gnuplot_canvas,
-- gnuplot_plot_N, gpDot, gpPt0.., textbox) and refers to them as xlink:href='#id' and url(#id).
--- Prepares gnuplot's SVG for inlining in HTML: drops the XML declaration and doctype, gives
--- every id a `prefix` (several plots on one page must not share ids) and refuses anything
--- that could run (script elements, event attributes, javascript: links).
---@param svg string
---@param prefix string
---@return string|nil svg, string? err
function M.svg_inline(svg, prefix)
  if type(svg) ~= 'string' or type(prefix) ~= 'string' then
    misuse('svg_inline', 'svg text and id prefix expected')
  end
  local start = svg:find('<svg[%s>]')
  if not start then
    return nil, 'not an SVG document (no <svg> element)'
  end
  local body = svg:sub(start)
  local lower = body:lower()
  if lower:find('<script', 1, true) or lower:find('javascript:', 1, true)
    or lower:find('%son%a+%s*=') then
    return nil, 'the SVG holds script or event attributes'
  end
  local ids = {}
  for _, id in body:gmatch('%sid=([\'"])([^\'"]+)%1') do
    ids[id] = true
  end
  body = body:gsub('(%sid=)([\'"])([^\'"]+)%2', function(pre, q, id)
    return pre .. q .. prefix .. id .. q
  end)
  body = body:gsub('(href=)([\'"])#([^\'"]+)%2', function(pre, q, id)
    if ids[id] then
      return pre .. q .. '#' .. prefix .. id .. q
    end
    return nil
  end)
  body = body:gsub('url%(#([^)]+)%)', function(id)
    if ids[id] then
      return 'url(#' .. prefix .. id .. ')'
    end
    return nil
  end)
  return body
end

local CSS = [[
:root { --fg: #1d2330; --muted: #5b6475; --line: #dde1e8; --bg: #f6f7f9; --card: #ffffff;
  --ok: #1a7f37; --ok-bg: #e9f6ec; --bad: #c62828; --bad-bg: #fdecea; --warn: #9a6700;
  --warn-bg: #fff6dd; --info: #3b5bdb; --info-bg: #edf1ff; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.5 "Helvetica Neue", Helvetica, Arial, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 48px; }
header h1 { font-size: 28px; margin: 0 0 4px; letter-spacing: -0.01em; }
header .meta { color: var(--muted); font-size: 13px; }
header .meta code { font-size: 12px; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 10px;
  padding: 18px 22px; margin: 18px 0; }
h2 { font-size: 19px; margin: 0 0 12px; }
h3 { font-size: 16px; margin: 18px 0 8px; }
.verdict { border-left: 8px solid var(--muted); }
.verdict.fair { border-left-color: var(--ok); }
.verdict.unfair { border-left-color: var(--bad); }
.verdict .label { display: inline-block; font-weight: 700; font-size: 22px; margin-bottom: 6px; }
.verdict.fair .label { color: var(--ok); }
.verdict.unfair .label { color: var(--bad); }
.verdict .summary { color: var(--muted); margin: 0 0 14px; }
.headline { display: flex; flex-wrap: wrap; gap: 14px; margin: 8px 0 12px; }
.ratio { background: var(--bg); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 16px; min-width: 320px; }
.ratio .big { font-size: 26px; font-weight: 700; }
.ratio .big.better { color: var(--ok); }
.ratio .big.worse { color: var(--bad); }
.ratio .what { font-weight: 600; }
.ratio .detail { color: var(--muted); font-size: 13px; }
.counts span { display: inline-block; margin-right: 12px; font-size: 13px; }
.badge { display: inline-block; min-width: 64px; text-align: center; border-radius: 4px;
  font-size: 11px; font-weight: 700; letter-spacing: 0.04em; padding: 1px 6px;
  text-transform: uppercase; margin-right: 8px; }
.badge.error { background: var(--bad-bg); color: var(--bad); }
.badge.warning { background: var(--warn-bg); color: var(--warn); }
.badge.info { background: var(--info-bg); color: var(--info); }
ul.findings { list-style: none; padding: 0; margin: 0; }
ul.findings li { padding: 7px 0; border-bottom: 1px solid var(--line); }
ul.findings li:last-child { border-bottom: 0; }
ul.findings .src { color: var(--muted); font-size: 12px; margin-right: 6px; }
ul.reasons { margin: 4px 0 0; padding-left: 20px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 5px 8px; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
th { background: var(--bg); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.better { color: var(--ok); font-weight: 600; }
td.worse { color: var(--bad); font-weight: 600; }
tr.first td { border-top: 2px solid var(--line); }
.scroll { overflow-x: auto; }
table.basis th { width: 230px; background: transparent; }
figure { margin: 8px 0 22px; }
figure svg { width: 100%; height: auto; max-width: 900px; display: block;
  border: 1px solid var(--line); border-radius: 6px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 6px; }
figcaption a { color: var(--info); }
.missing { color: var(--muted); font-style: italic; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 5px; vertical-align: baseline; }
footer { color: var(--muted); font-size: 12px; text-align: center; margin-top: 24px; }
]]

local function html_table(head, rows, numeric, row_class)
  local out = { '<div class="scroll"><table>', '<thead><tr>' }
  for j, h in ipairs(head) do
    out[#out + 1] = string.format('<th%s>%s</th>', numeric[j] and ' class="num"' or '', esc(h))
  end
  out[#out + 1] = '</tr></thead><tbody>'
  for i, r in ipairs(rows) do
    local cls = row_class and row_class(i, r)
    out[#out + 1] = cls and string.format('<tr class="%s">', cls) or '<tr>'
    for j, c in ipairs(r) do
      local cellcls = numeric[j] and 'num' or nil
      if type(c) == 'table' then
        cellcls = (cellcls and (cellcls .. ' ') or '') .. c.class
        c = c.text
      end
      out[#out + 1] = string.format('<td%s>%s</td>', cellcls and (' class="' .. cellcls .. '"')
        or '', esc(c))
    end
    out[#out + 1] = '</tr>'
  end
  out[#out + 1] = '</tbody></table></div>'
  return table.concat(out, '\n')
end

--- Renders a report model as one self-contained HTML page: inline CSS, the plots as inline
--- SVG (`svgs` maps a plot name to SVG text from gnuplot), no script, no external resource.
--- `plots` is as for `markdown` (used for links to the PNG/SVG files and for errors).
---@param model table from `build`
---@param plots? table<string, table>
---@param svgs? table<string, string>
---@return string
function M.html(model, plots, svgs)
  if type(model) ~= 'table' or type(model.verdict) ~= 'table' then
    misuse('html', 'report model (tp.report.build) expected')
  end
  plots, svgs = plots or {}, svgs or {}
  local v = model.verdict
  local H = {}
  local function add(s)
    H[#H + 1] = s
  end
  add('<!DOCTYPE html>')
  add('<html lang="en"><head><meta charset="utf-8">')
  add('<meta name="viewport" content="width=device-width, initial-scale=1">')
  add('<meta name="generator" content="tplua ' .. esc(model.version) .. '">')
  add('<link rel="icon" href="data:,">')
  add('<title>' .. esc(model.title) .. '</title>')
  add('<style>' .. CSS .. '</style></head><body><main>')
  add('<header><h1>' .. esc(model.title) .. '</h1>')
  local legend = {}
  for _, gv in ipairs(model.order) do
    legend[#legend + 1] = string.format('<span class="swatch" style="background:%s"></span>%s',
      esc(model.colors[gv] or '#999999'), esc(gv))
  end
  add(string.format('<div class="meta">%s · by %s (%s) · baseline <b>%s</b> · generated %s ' ..
    'by tplua %s</div>', esc(plural(#model.set.runs, 'run')), esc(model.by),
    table.concat(legend, ' '), esc(model.baseline), esc(model.generated), esc(model.version)))
  if #model.sources > 0 then
    local s = {}
    for i, p in ipairs(model.sources) do
      s[i] = '<code>' .. esc(p) .. '</code>'
    end
    add('<div class="meta">results: ' .. table.concat(s, ', ') .. '</div>')
  end
  add('</header>')

  -- Verdict.
  add(string.format('<section class="verdict %s" id="verdict">', esc(v.status)))
  add('<div class="label">' .. esc(v.label) .. '</div>')
  add('<p class="summary">' .. esc(v.summary) .. '.</p>')
  local hl = headline_lines(model)
  if #hl > 0 then
    add('<div class="headline">')
    for i, h in ipairs(hl) do
      local r = v.headline[i]
      -- Coloured only when it means something: a fair comparison and a significant difference.
      local cls = 'neutral'
      if v.fair and r.significant then
        cls = r.is_better and 'better' or 'worse'
      end
      add(string.format('<div class="ratio"><div class="big %s">%.3f×</div><div class="what">' ..
        '%s / %s, %s</div><div class="detail">%s%s</div></div>', cls, r.ratio, esc(r.group),
        esc(r.baseline), esc(r.label), esc(h.detail), v.fair and '' or
        '<br><b>Measured, but not a like-for-like comparison: see the errors.</b>'))
    end
    add('</div>')
  elseif v.status ~= 'single' then
    add('<p class="missing">No ratio: no metric was measured on both sides.</p>')
  end
  add(string.format('<div class="counts"><span><span class="badge error">errors</span>%d</span>' ..
    '<span><span class="badge warning">warnings</span>%d</span><span><span class="badge info">' ..
    'notes</span>%d</span></div>', v.counts.error, v.counts.warning, v.counts.info))
  if #v.reasons > 0 then
    add('<ul class="reasons">')
    for i, msg in ipairs(v.reasons) do
      if i > 5 then
        add(string.format('<li>… and %d more (see Findings)</li>', #v.reasons - 5))
        break
      end
      add('<li>' .. esc(msg) .. '</li>')
    end
    add('</ul>')
  end
  add('</section>')

  -- Findings.
  add('<section id="findings"><h2>Findings</h2>')
  if #model.findings == 0 then
    add('<p class="missing">Nothing to report: the audit, the loss checks and the statistics ' ..
      'found nothing.</p>')
  else
    add('<ul class="findings">')
    for _, f in ipairs(model.findings) do
      add(string.format('<li><span class="badge %s">%s</span><span class="src">%s · %s</span>%s' ..
        '</li>', esc(f.severity), esc(f.severity), esc(f.source), esc(f.kind), esc(f.message)))
    end
    add('</ul>')
  end
  add('</section>')

  -- Comparison.
  add('<section id="comparison"><h2>Comparison</h2>')
  local rows, level = comparison_rows(model)
  local trs = {}
  for i, r in ipairs(rows) do
    local cls = r.better == true and 'better' or r.better == false and 'worse' or nil
    trs[i] = { r.metric, r.group, r.n, r.mean, r.sd, r.ci,
      cls and { text = r.ratio, class = cls } or r.ratio, r.ratio_ci, r.p }
  end
  add(html_table({ 'metric', model.by, 'n', 'mean', 'sd', level .. '% CI', 'ratio',
    'ratio ' .. level .. '% CI', 'p' }, trs,
    { false, false, true, true, true, true, true, true, true }, function(i)
      return rows[i].metric ~= '' and 'first' or nil
    end))
  add('<p class="missing">* significant at alpha ' .. esc(g(model.compare.settings.alpha)) ..
    ' (Welch two-sided). Ratios are group / baseline.</p>')
  add('<h3>Basis</h3><table class="basis"><tbody>')
  for _, r in ipairs(basis_rows(model)) do
    add(string.format('<tr><th>%s</th><td>%s</td></tr>', esc(r[1]), esc(r[2])))
  end
  add('</tbody></table></section>')

  -- Software stack.
  add('<section id="stack"><h2>Software stack</h2>')
  local st = model.stack
  add('<p class="missing">' .. esc(st.any and "From the records' environment ('-': not "
    .. 'recorded).' or "The records carry no environment (they were written before tplua "
    .. "recorded it): '-' throughout.") .. '</p>')
  local shead, srows = { '' }, {}
  for i, gv in ipairs(st.groups) do
    shead[i + 1] = gv
  end
  for i, row in ipairs(st.rows) do
    srows[i] = { row.label, table.unpack(row.values) }
  end
  add(html_table(shead, srows, {}))
  add('</section>')

  -- Plots.
  add('<section id="plots"><h2>Plots</h2>')
  for _, c in ipairs(M.charts(model)) do
    local p = plots[c.name] or {}
    add('<h3>' .. esc(c.title) .. '</h3>')
    if c.missing then
      add('<p class="missing">Not drawn: ' .. esc(c.missing) .. '.</p>')
    elseif svgs[c.name] then
      local links = {}
      if p.png then
        links[#links + 1] = string.format('<a href="%s">PNG</a>', esc(p.png))
      end
      if p.svg then
        links[#links + 1] = string.format('<a href="%s">SVG</a>', esc(p.svg))
      end
      add('<figure>' .. svgs[c.name] .. '<figcaption>' .. esc(c.caption) ..
        (#links > 0 and (' (' .. table.concat(links, ', ') .. ')') or '') ..
        '</figcaption></figure>')
    else
      add('<p class="missing">Not drawn: ' .. esc(p.error or 'plots were not rendered') ..
        '.</p>')
    end
  end
  add('</section>')

  -- Runs.
  add('<section id="runs"><h2>Runs</h2>')
  local head, numeric = {}, {}
  for j, c in ipairs(RUN_COLUMNS) do
    head[j] = c[1]
    numeric[j] = j >= 6 and j ~= 9 and j ~= #RUN_COLUMNS
  end
  add(html_table(head, run_rows(model), numeric))
  local skipped = model.set.skipped or {}
  if #skipped > 0 then
    add(string.format('<p class="missing">%s in the result directories are not results and ' ..
      'were skipped.</p>', esc(plural(#skipped, 'JSON file'))))
  end
  add('</section>')
  local profiled = profile_rows(model)
  if #profiled > 0 then
    add('<section id="profiles"><h2>Profiles</h2><div class="scroll"><table><thead><tr>'
      .. '<th>run</th><th>tool</th><th>steps</th><th>traces</th></tr></thead><tbody>')
    for _, p in ipairs(profiled) do
      local links = {}
      for i, l in ipairs(p.links) do
        links[i] = string.format('<a href="%s">%s</a>', esc(l.href), esc(l.label))
      end
      add(string.format('<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>', esc(p.run),
        esc(p.tool), esc(p.steps), #links > 0 and table.concat(links, ', ') or 'none found'))
    end
    add('</tbody></table></div></section>')
  end
  add('<footer>tplua ' .. esc(model.version) .. ' · tp.report</footer>')
  add('</main></body></html>')
  return table.concat(H, '\n') .. '\n'
end

-- ---------------------------------------------------------------------------------------------
-- Writing a report.

local WRITE_OPTS = { plots = 'boolean', width = 'integer', height = 'integer' }

--- Writes a report on `set` into directory `out` (created when missing): report.md,
--- report.html, and <plot>.png + <plot>.svg for each plot of `charts` (gnuplot). A plot that
--- cannot be drawn (no data, gnuplot missing or failing) is named in the report and in
--- `result.warnings`; the Markdown and HTML are written whatever happens to the plots. Options
--- are those of `build`, plus `plots = false` (no gnuplot) and `width`/`height` (pixels).
--- Fails with nil, message, code when there is nothing to report or `out` cannot be written.
---```lua
---local r = assert(tp.report.write(set, 'out/report', { by = 'platform' }))
---for _, f in ipairs(r.files) do print(f) end
---```
---@param set table a tp.results ResultSet
---@param out string directory
---@param opts? table
---@return table|nil result {files, plots = {name = {png=, svg=, error=}}, warnings, model}
---@return string? err
---@return string? code
function M.write(set, out, opts)
  if type(out) ~= 'string' or out == '' then
    misuse('write', 'output directory expected, got %s', type(out))
  end
  opts = check_opts('write', opts, WRITE_OPTS)
  local bopts = {}
  for k, v in pairs(opts) do
    if not WRITE_OPTS[k] then
      bopts[k] = v
    end
  end
  local st = fs.stat(out)
  if st and st.type ~= 'directory' then
    return nil, string.format('report: %s exists and is not a directory', out), 'ENOTDIR'
  end
  local model, err, code = M.build(set, bopts)
  if not model then
    return nil, err, code
  end
  model.dir = out  -- profile trace links are relative to it
  if not st then
    local ok, merr, mcode = fs.mkdir_p(out)
    if not ok then
      return nil, 'report: ' .. tostring(merr), mcode
    end
  end
  local files, warnings, plots, svgs = {}, {}, {}, {}
  local gp_ok, gp_err = true, nil
  if opts.plots ~= false then
    gp_ok, gp_err = plot.available()
    if not gp_ok then
      warnings[#warnings + 1] = tostring(gp_err) .. ': plots left out'
    end
  end
  for k, c in ipairs(M.charts(model)) do
    if c.missing then
      plots[c.name] = { error = c.missing }
    elseif opts.plots == false then
      plots[c.name] = { error = 'plots were turned off' }
    elseif not gp_ok then
      plots[c.name] = { error = tostring(gp_err) }
    else
      local made = {}
      for _, fmt in ipairs({ 'png', 'svg' }) do
        local file = c.name .. '.' .. fmt
        local r, rerr = plot.render(c.chart, { format = fmt, path = fs.join(out, file),
          width = opts.width, height = opts.height })
        if r then
          made[fmt] = file
          files[#files + 1] = fs.join(out, file)
          for _, w in ipairs(r.warnings) do
            warnings[#warnings + 1] = string.format('%s: gnuplot: %s', file, w)
          end
        else
          made.error = rerr
          warnings[#warnings + 1] = tostring(rerr)
          break
        end
      end
      if made.svg then
        local text = fs.read(fs.join(out, made.svg))
        local inline, ierr = M.svg_inline(text or '', 'p' .. k .. '-')
        if inline then
          svgs[c.name] = inline
        else
          made.error = made.svg .. ': ' .. tostring(ierr)
          warnings[#warnings + 1] = made.error
        end
      end
      plots[c.name] = made
    end
  end
  local md = M.markdown(model, plots)
  local ok, werr, wcode = fs.write_atomic(fs.join(out, 'report.md'), md)
  if not ok then
    return nil, 'report: ' .. tostring(werr), wcode
  end
  files[#files + 1] = fs.join(out, 'report.md')
  local html = M.html(model, plots, svgs)
  ok, werr, wcode = fs.write_atomic(fs.join(out, 'report.html'), html)
  if not ok then
    return nil, 'report: ' .. tostring(werr), wcode
  end
  files[#files + 1] = fs.join(out, 'report.html')
  return { files = files, plots = plots, warnings = warnings, model = model }
end

return M
