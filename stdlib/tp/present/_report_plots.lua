-- tp.present._report_plots: the data of the report's plots (tp.plot chart tables), from a report
-- model (charts) or straight from a result set (chart, for the REPL).
local results = require('tp.analyse.results')
local compare = require('tp.analyse.compare')
local convergence = require('tp.analyse.convergence')
local efficiency = require('tp.analyse.efficiency')
local profiled = require('tp.analyse.profiled')
local base = require('tp.present._report_base')
local profile_part = require('tp.present._report_profile')

local is_finite, misuse = base.is_finite, base.misuse
local group_colors, metric_entry = base.group_colors, base.metric_entry

local M = {}

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

-- Where each group's step goes, from the profiled runs' traces (stacked bars).
function BUILDERS.profile(ctx)
  return profile_part.chart(ctx.profile(), ctx.by)
end

-- Why each group's GPU is idle, from the profiled runs' traces (stacked bars of the causes).
function BUILDERS.idle(ctx)
  return profile_part.idle_chart(ctx.profile(), ctx.by)
end

-- Each profiled op against its GPU's roofline (points under ceilings, log-log).
function BUILDERS.roofline(ctx)
  return profile_part.roofline(ctx.profile())
end

-- One profiled step of two groups: allocated and reserved memory over time (the memory section).
function BUILDERS.memory_step(ctx)
  local sec = ctx.memory and ctx.memory()
  local c = sec and require('tp.present.memory').section_chart(sec)
  if not c then
    return { missing = sec and 'no two groups with profiler traces holding memory events'
      or 'no memory measured' }
  end
  return c
end

local TITLES = { throughput = 'Throughput per GPU', step_time = 'Step-time distributions',
  loss = 'Loss curves', memory = 'Memory', mfu = 'Model FLOPs utilisation',
  lr = 'Learning rate', profile = profile_part.TITLE, roofline = profile_part.ROOFLINE_TITLE,
  idle = profile_part.IDLE_TITLE,
  memory_step = 'GPU memory over one step (profiler traces)',
  collectives = 'Collective bandwidth (busbw by message size)' }

-- nccl-tests / rccl-tests results: busbw by message size, every platform on one chart
-- (tp.present.collectives; docs/collectives.md).
function BUILDERS.collectives(ctx)
  local cmp = ctx.collectives and ctx.collectives()
  local chart = cmp and require('tp.present.collectives').chart_all(cmp)
  if not chart then
    return { missing = 'no nccl-tests or rccl-tests result' }
  end
  return { chart = chart, caption = 'busbw (GB/s) against the message size (log scale), the '
    .. 'mean over the runs of each platform; dashed: the bounds of its confidence interval' }
end

-- The charts the report's profile section shows, not its Plots section.
local PROFILE_CHARTS = { profile = true, roofline = true, idle = true, memory_step = true }


--- The chart names `chart` knows: the report's plots (tp.report.PLOTS), 'lr', 'profile',
--- 'roofline' and 'idle' (a report draws those three when runs were profiled).
M.CHARTS = { 'throughput', 'step_time', 'loss', 'memory', 'mfu', 'lr', 'profile', 'roofline',
  'idle' }

local function make_ctx(set, by, order, cmp_fn, level, convention, hw, profile_fn)
  local idx, cats = {}, {}
  for i, v in ipairs(order) do
    idx[v] = i
    cats[i] = tostring(v)
  end
  return { set = set, by = by, order = order, colors = group_colors(order), idx = idx,
    cats = cats, compare = cmp_fn, level = level, convention = convention, hardware = hw,
    profile = profile_fn }
end

local function entry(ctx, name)
  local e = BUILDERS[name](ctx)
  e.name = name
  e.title = TITLES[name]
  return e
end

--- Returns the charts of a report model (tp.plot chart tables), in tp.report.PLOTS order:
--- {{name=, title=, caption=, chart=}}; a plot without data is {name=, title=, missing = why}.
--- When profiled runs have GPU traces, 'profile' and 'roofline' follow (the report shows them
--- in its profile section, not among the plots).
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
  end, model.level, model.compare.settings.convention, model.hardware, function()
    return model.profile
  end)
  ctx.collectives = function()
    return model.collectives
  end
  ctx.memory = function()
    return model.memory
  end
  local out = {}
  for _, name in ipairs(base.PLOTS) do
    out[#out + 1] = entry(ctx, name)
  end
  for _, name in ipairs({ 'profile', 'idle', 'roofline', 'memory_step', 'collectives' }) do
    local p = entry(ctx, name)
    if not p.missing then
      out[#out + 1] = p
    end
  end
  model.charts = out
  return out
end

--- The charts of the report's Plots section: M.charts but the profile and roofline charts
--- (shown in the report's profile section).
---@param model table from `build`
---@return table[]
function M.plots_of(model)
  local out = {}
  for _, c in ipairs(M.charts(model)) do
    if not PROFILE_CHARTS[c.name] then
      out[#out + 1] = c
    end
  end
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
  end, 95, convention, nil, function()
    return #set.runs > 0 and profiled.section(set, { by = by, baseline = order[1] }) or nil
  end)
  return entry(ctx, name)
end

return M
