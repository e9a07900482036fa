-- tp.present._report_profile: the report's profile analysis (tp.analyse.profiled.section): the
-- chart of where each group's step goes (stacked bars of the classes' exclusive time and idle,
-- ms per step), and the section of report.md (tp.present.trace.markdown) and report.html: each
-- group's mean step, the explanation of each gap, the runs they come from.
local trace = require('tp.analyse.trace')
local profiled = require('tp.analyse.profiled')
local present_trace = require('tp.present.trace')
local present_ops = require('tp.present.ops')
local plot = require('tp.present.plot')

local M = {}

local ops_html

M.TITLE = 'Where the step time goes (profiler traces)'
M.ROOFLINE_TITLE = 'Each op against its GPU\'s limits (roofline)'
M.IDLE_TITLE = 'Why the GPU is idle (profiler traces)'

local IDLE_COLOR = '#c7c7c7'

local FROM = { record = "its record's profile.analysis", traces = 'analysed from its traces' }

-- The groups of a section whose traces hold GPU ops.
local function gpu_groups(sec)
  local out = {}
  for _, g in ipairs(sec and sec.groups or {}) do
    if g.summary and g.summary.gpu then
      out[#out + 1] = g
    end
  end
  return out
end

--- The chart of a profile section: one stacked bar per group with GPU traces, the classes'
--- exclusive time per step and idle (ms), which add up to the step. Returns {caption=, chart=}
--- or {missing = why}.
---@param sec? table tp.analyse.profiled.section's
---@param by string
---@return table
function M.chart(sec, by)
  local groups = gpu_groups(sec)
  if #groups == 0 then
    return { missing = sec and 'no profiled run has GPU ops in its traces' or 'no run was '
      .. 'profiled' }
  end
  local cats = {}
  for i, g in ipairs(groups) do
    cats[i] = tostring(g.value)
  end
  local series = {}
  for _, c in ipairs(trace.classes()) do
    local values, any = {}, false
    for i, g in ipairs(groups) do
      local v = g.summary.classes and g.summary.classes[c.name]
      values[i] = v and v.exclusive_ms or 0
      any = any or (v ~= nil and (v.exclusive_ms or 0) > 0)
    end
    if any then
      series[#series + 1] = { title = c.name, values = values,
        color = plot.PALETTE[#series % #plot.PALETTE + 1] }
    end
  end
  local idle = {}
  for i, g in ipairs(groups) do
    idle[i] = g.summary.idle_ms or 0
  end
  series[#series + 1] = { title = 'idle', values = idle, color = IDLE_COLOR }
  return { caption = string.format('Mean GPU time per step of each %s\'s profiled runs, from ' ..
    'their profiler traces: the exclusive time of each class of GPU op (the part of the step ' ..
    'the class alone accounts for) and the idle time, stacked; they add up to the step. ' ..
    'Communication and copies count only where no compute hides them.', by),
    chart = { kind = 'bars', stacked = true, title = 'GPU time per step by class (ms)',
      ylabel = 'ms per step', categories = cats, series = series } }
end

-- One colour per idle cause, fixed so that a cause keeps its colour across reports.
local CAUSE_COLORS = { host = '#d62728', sync = '#9467bd', dataloader = '#8c564b',
  latency = '#ff7f0e', other = IDLE_COLOR }

--- The chart of why the GPU is idle: one stacked bar per group with GPU traces, its idle time
--- per step split by cause (ms; they add up to the group's idle). Returns {caption=, chart=} or
--- {missing = why}.
---@param sec? table tp.analyse.profiled.section's
---@param by string
---@return table
function M.idle_chart(sec, by)
  local groups = {}
  for _, g in ipairs(gpu_groups(sec)) do
    if g.idle then
      groups[#groups + 1] = g
    end
  end
  if #groups == 0 then
    return { missing = sec and 'no profiled run has GPU ops in its traces' or 'no run was '
      .. 'profiled' }
  end
  local cats, series = {}, {}
  for i, g in ipairs(groups) do
    cats[i] = tostring(g.value)
  end
  for _, c in ipairs(trace.CAUSES) do
    local values = {}
    for i, g in ipairs(groups) do
      values[i] = g.idle[c] or 0
    end
    series[#series + 1] = { title = trace.CAUSE_LABELS[c], values = values,
      color = CAUSE_COLORS[c] }
  end
  return { caption = string.format('Idle GPU time per step of each %s\'s profiled runs, split '
    .. 'by cause, stacked (ms): host launch (the next op\'s launch call started after the GPU '
    .. 'went idle), synchronisation and dataloader (the same, while the host was blocked in a '
    .. 'synchronisation or ran the dataloader), launch latency (the op was already queued, a '
    .. 'short gap), other. docs/trace.md, "Why the GPU is idle".', by),
    chart = { kind = 'bars', stacked = true, title = 'GPU idle time per step by cause (ms)',
      ylabel = 'ms per step', categories = cats, series = series } }
end

--- The roofline chart of a profile section: each group's ops (the op table of its first run
--- with GPU traces) at (FLOPs per byte, TFLOP/s) under its GPU's ceiling, on one chart. Returns
--- {caption=, chart=} or {missing = why}.
---@param sec? table tp.analyse.profiled.section's
---@return table
function M.roofline(sec)
  local sides = {}
  for _, g in ipairs(sec and sec.groups or {}) do
    if g.ops then
      sides[#sides + 1] = { label = tostring(g.value), table = g.ops }
    end
  end
  local chart = #sides > 0 and present_ops.roofline_chart(sides, 'Ops against each GPU\'s '
    .. 'roofline (TFLOP/s, log scales)') or nil
  if not chart then
    return { missing = 'no profiled op has both FLOPs per byte and TFLOP/s (traces without CPU '
      .. 'ops and shapes, or no op with a model)' }
  end
  return { caption = 'Each modelled op of the profiled runs (the largest by GPU time) at its '
    .. 'FLOPs per byte and achieved TFLOP/s, under its GPU\'s roofline: min(dense peak of the '
    .. 'main precision, memory bandwidth x FLOPs per byte), from the catalog. Ops far below '
    .. 'their ceiling leave the most to a better kernel.', chart = chart }
end

-- The lines under the tables: where each group's figures come from, which runs an explanation
-- used, why one is missing, the warnings.
local function notes(sec)
  local out = {}
  for _, g in ipairs(sec.groups) do
    if #g.runs > 0 then
      local used = {}
      for i, id in ipairs(g.runs) do
        used[i] = string.format('%s (%s)', id, FROM[g.from[id]] or tostring(g.from[id]))
      end
      out[#out + 1] = string.format('%s: %s', tostring(g.value), table.concat(used, ', '))
    end
    for _, e in ipairs(g.errors) do
      out[#out + 1] = string.format('%s: not analysed: %s', tostring(g.value), e)
    end
  end
  for _, x in ipairs(sec.explanations) do
    if x.explanation then
      out[#out + 1] = string.format('The explanation of %s against %s uses the traces of %s ' ..
        'and %s.', tostring(x.group), tostring(x.baseline), x.runs[1], x.runs[2])
    else
      out[#out + 1] = string.format('%s against %s: no explanation: %s.', tostring(x.group),
        tostring(x.baseline), x.missing)
    end
  end
  for _, g in ipairs(sec.groups) do
    for _, w in ipairs(g.summary and g.summary.warnings or {}) do
      out[#out + 1] = 'Warning: ' .. w
    end
  end
  for _, x in ipairs(sec.explanations) do
    for _, w in ipairs(x.explanation and x.explanation.warnings or {}) do
      out[#out + 1] = string.format('Warning (%s against %s): %s', tostring(x.group),
        tostring(x.baseline), w)
    end
  end
  return out
end

local function intro(sec)
  return string.format('Where the step time goes on the GPU, from the profiled runs\' profiler ' ..
    'traces (tp.analyse.trace): the mean step of each %s\'s profiled runs, in ms; idle, ' ..
    'compute and non-compute as Holistic Trace Analysis defines them. Then, between the ' ..
    'baseline and each other %s, the classes\' time per step on each side: the rows add up to ' ..
    'the difference in step time.', sec.by, sec.by)
end

local function entries(sec)
  local list, explained = {}, {}
  for _, g in ipairs(sec.groups) do
    if g.summary then
      list[#list + 1] = { label = tostring(g.value), summary = g.summary }
    end
  end
  for _, x in ipairs(sec.explanations) do
    if x.explanation then
      explained[#explained + 1] = { explanation = x.explanation }
    end
  end
  return list, explained
end

--- The lines of report.md's profile section (none without a profiled run).
---@param model table the report model (its `profile`, `by`)
---@param plots table the rendered plots (`profile`: {png=, svg=} or {error=})
---@param md_text fun(s: string): string Markdown escaping
---@return string[]
function M.markdown(model, plots, md_text)
  local sec = model.profile
  if not sec then
    return {}
  end
  local L = { '## Profile analysis', '', md_text(intro(sec)), '' }
  local list, explained = entries(sec)
  if #list > 0 then
    L[#L + 1] = (present_trace.markdown(list, explained):gsub('\n$', ''))
    L[#L + 1] = ''
  end
  for _, n in ipairs(notes(sec)) do
    L[#L + 1] = '- ' .. md_text(n)
  end
  L[#L + 1] = ''
  local c = M.chart(sec, model.by)
  local p = plots.profile or {}
  if c.missing then
    L[#L + 1] = 'Not drawn: ' .. md_text(c.missing) .. '.'
  elseif p.png then
    L[#L + 1] = string.format('![%s](%s)', md_text(M.TITLE), p.png)
    L[#L + 1] = ''
    L[#L + 1] = md_text(c.caption) .. (p.svg and string.format(' ([SVG](%s))', p.svg) or '')
  else
    L[#L + 1] = 'Not drawn: ' .. md_text(p.error or 'plots were not rendered') .. '.'
  end
  L[#L + 1] = ''
  local ic = M.idle_chart(sec, model.by)
  local ip = plots.idle or {}
  if not ic.missing and ip.png then
    L[#L + 1] = string.format('![%s](%s)', md_text(M.IDLE_TITLE), ip.png)
    L[#L + 1] = ''
    L[#L + 1] = md_text(ic.caption) .. (ip.svg and string.format(' ([SVG](%s))', ip.svg) or '')
    L[#L + 1] = ''
  elseif not ic.missing then
    L[#L + 1] = 'Idle causes not drawn: ' .. md_text(ip.error or 'plots were not rendered') .. '.'
    L[#L + 1] = ''
  end
  for _, l in ipairs(M.ops_markdown(model, plots, md_text)) do
    L[#L + 1] = l
  end
  return L
end

--- The lines of report.md about the ops: each group's op table, the pairing of the baseline with
--- each other group (verdicts and top pairs) and the roofline.
function M.ops_markdown(model, plots, md_text)
  local sec = model.profile
  local L = {}
  local any = false
  for _, g in ipairs(sec.groups) do
    if g.ops then
      any = true
      L[#L + 1] = present_ops.markdown(g.ops, tostring(g.value))
    end
  end
  if not any then
    return L
  end
  table.insert(L, 1, '### Ops against their GPU\'s limits')
  table.insert(L, 2, '')
  table.insert(L, 3, md_text('Each op of the first profiled run of each group with its shapes: '
    .. 'FLOPs and bytes per call from its performance model, achieved TFLOP/s and TB/s, and % '
    .. 'of the roofline limit of its GPU (the time the datasheet peak and bandwidth allow over '
    .. 'the time taken)' .. (sec.groups[1].ops and sec.groups[1].ops.peaks and ', and of the '
    .. 'measured peak' or '') .. '. docs/trace.md, "Ops".'))
  table.insert(L, 4, '')
  for _, x in ipairs(sec.explanations) do
    if x.ops then
      L[#L + 1] = present_ops.compare_markdown({ labels = x.explanation.labels,
        pairs = x.ops.pairs, verdicts = x.ops.verdicts })
    end
  end
  local r = M.roofline(sec)
  local p = plots.roofline or {}
  if r.missing then
    L[#L + 1] = 'Roofline not drawn: ' .. md_text(r.missing) .. '.'
  elseif p.png then
    L[#L + 1] = string.format('![%s](%s)', md_text(M.ROOFLINE_TITLE), p.png)
    L[#L + 1] = ''
    L[#L + 1] = md_text(r.caption) .. (p.svg and string.format(' ([SVG](%s))', p.svg) or '')
  else
    L[#L + 1] = 'Roofline not drawn: ' .. md_text(p.error or 'plots were not rendered') .. '.'
  end
  L[#L + 1] = ''
  return L
end

local ms, pct = present_trace.ms_text, present_trace.pct_text

local function group_row(g)
  local s = g.summary
  if not s.gpu then
    return { tostring(g.value), tostring(s.ranks), '-', '-', '-', '-', '-', '-', '-',
      'no GPU ops in the trace (CPU-only profile)' }
  end
  local top = {}
  for i, c in ipairs(profiled.classes_by_time(s)) do
    if i > 3 then
      break
    end
    top[i] = string.format('%s %.3f', c.name, c.ms)
  end
  return { tostring(g.value), tostring(s.ranks), ms(s.window_ms), pct(s.idle_ms, s.window_ms),
    pct(s.compute_ms, s.window_ms), pct(s.non_compute_ms, s.window_ms), ms(s.comm_exposed_ms),
    s.overlap and string.format('%.0f%%', 100 * s.overlap) or '-', ms(s.host_wait_ms),
    table.concat(top, ', ') }
end

local function ns_ms(v)
  return type(v) == 'number' and string.format('%.3f', v / 1e6) or '-'
end

local function share(v)
  return v and string.format('%.0f%%', 100 * v) or '-'
end

local function num(v, fmt)
  return type(v) == 'number' and string.format(fmt, v) or '-'
end

-- A figure of an inline SVG with links to its files, or why it is missing.
local function figure(svg, p, caption, esc)
  if not svg then
    return '<p class="missing">Not drawn: ' .. esc(p.error or 'plots were not rendered') .. '.</p>'
  end
  local links = {}
  for _, fmt in ipairs({ 'png', 'svg' }) do
    if p[fmt] then
      links[#links + 1] = string.format('<a href="%s">%s</a>', esc(p[fmt]), fmt:upper())
    end
  end
  return '<figure>' .. svg .. '<figcaption>' .. esc(caption) ..
    (#links > 0 and (' (' .. table.concat(links, ', ') .. ')') or '') .. '</figcaption></figure>'
end

-- The ops part of the HTML profile section: each group's ops, the pairs and verdicts, the
-- roofline.
ops_html = function(sec, plots, svgs, esc, html_table)
  local H = {}
  for _, g in ipairs(sec.groups) do
    local t = g.ops
    if t then
      local measured = t.peaks ~= nil
      H[#H + 1] = string.format('<h3>Ops of %s against the limits of %s</h3>', esc(g.value),
        esc(t.device and t.device.name or 'its GPU'))
      local rows = {}
      for i = 1, math.min(10, #t.rows) do
        local r = t.rows[i]
        rows[i] = { r.name, r.shapes or '-', r.precision or '-', tostring(r.calls),
          num(r.per_step and r.per_step / 1e6, '%.3f'), num(r.tflops, '%.1f'),
          num(r.tbs, '%.2f'), share(r.pct), r.bound or '-' }
        if measured then
          rows[i][#rows[i] + 1] = share(r.measured_pct)
        end
      end
      local head = { 'op', 'shapes', 'dtype', 'calls', 'ms/step', 'TFLOP/s', 'TB/s',
        '% of limit', 'bound' }
      local numeric = { false, false, false, true, true, true, true, true, false }
      if measured then
        head[#head + 1] = '% of measured peak'
        numeric[#numeric + 1] = true
      end
      H[#H + 1] = html_table(head, rows, numeric)
    end
  end
  for _, x in ipairs(sec.explanations) do
    if x.ops then
      local la, lb = x.explanation.labels[1], x.explanation.labels[2]
      H[#H + 1] = string.format('<h3>The same ops on %s and %s: hardware or software?</h3>',
        esc(la), esc(lb))
      H[#H + 1] = '<ul class="reasons">'
      for _, v in ipairs(x.ops.verdicts) do
        H[#H + 1] = '<li>' .. esc(v) .. '</li>'
      end
      H[#H + 1] = '</ul>'
      local rows = {}
      for i = 1, math.min(10, #x.ops.pairs) do
        local q = x.ops.pairs[i]
        rows[i] = { q.name, q.shapes or '-', num(q.a.per_step / 1e6, '%.3f'),
          num(q.b.per_step / 1e6, '%.3f'), share(q.a.pct), share(q.b.pct),
          num(q.save / 1e6, '%.3f') }
      end
      H[#H + 1] = html_table({ 'op', 'shapes', la .. ' ms/step', lb .. ' ms/step',
        la .. ' % of limit', lb .. ' % of limit', 'saves ms/step at the other\'s efficiency' },
        rows, { false, false, true, true, true, true, true })
    end
  end
  local r = M.roofline(sec)
  if not r.missing and #H > 0 then
    H[#H + 1] = figure(svgs.roofline, plots.roofline or {}, r.caption, esc)
  end
  return table.concat(H, '\n')
end

--- The HTML of report.html's profile section ('' without a profiled run).
---@param model table the report model
---@param plots table the rendered plots
---@param svgs table inline SVG by plot name
---@param esc fun(s: any): string HTML escaping
---@param html_table fun(head: string[], rows: table[], numeric: boolean[]): string
---@return string
function M.html(model, plots, svgs, esc, html_table)
  local sec = model.profile
  if not sec then
    return ''
  end
  local H = { '<section id="profile-analysis"><h2>Profile analysis</h2>',
    '<p class="missing">' .. esc(intro(sec)) .. '</p>' }
  local rows = {}
  for _, g in ipairs(sec.groups) do
    if g.summary then
      rows[#rows + 1] = group_row(g)
    end
  end
  if #rows > 0 then
    H[#H + 1] = html_table({ sec.by, 'ranks', 'step ms', 'idle', 'compute', 'non-compute',
      'comm exposed', 'comm hidden', 'host wait', 'largest classes (ms)' }, rows,
      { false, true, true, true, true, true, true, true, true, false })
  end
  for _, x in ipairs(sec.explanations) do
    local e = x.explanation
    if e then
      H[#H + 1] = string.format('<h3>Why %s and %s differ</h3><p>%s.</p><p class="missing">%s.'
        .. '</p>', esc(e.labels[2]), esc(e.labels[1]), esc(present_trace.faster_text(e)),
        esc(present_trace.sign_text(e)))
      local erows = {}
      for i, r in ipairs(e.rows) do
        erows[i] = { r.label, ns_ms(r.a), ns_ms(r.b), string.format('%+.3f', r.diff / 1e6),
          r.moved and string.format('%.0f%%', 100 * r.moved) or '-' }
      end
      erows[#erows + 1] = { 'step (sum of the rows)', ns_ms(e.step_a), ns_ms(e.step_b),
        string.format('%+.3f', e.sum / 1e6), '' }
      H[#H + 1] = html_table({ 'ms per step', e.labels[1], e.labels[2], 'difference',
        'of all movement' }, erows, { false, true, true, true, true })
    end
  end
  H[#H + 1] = '<ul class="reasons">'
  for _, n in ipairs(notes(sec)) do
    H[#H + 1] = '<li>' .. esc(n) .. '</li>'
  end
  H[#H + 1] = '</ul>'
  local c = M.chart(sec, model.by)
  local p = plots.profile or {}
  if c.missing then
    H[#H + 1] = '<p class="missing">Not drawn: ' .. esc(c.missing) .. '.</p>'
  elseif svgs.profile then
    local links = {}
    if p.png then
      links[#links + 1] = string.format('<a href="%s">PNG</a>', esc(p.png))
    end
    if p.svg then
      links[#links + 1] = string.format('<a href="%s">SVG</a>', esc(p.svg))
    end
    H[#H + 1] = '<figure>' .. svgs.profile .. '<figcaption>' .. esc(c.caption) ..
      (#links > 0 and (' (' .. table.concat(links, ', ') .. ')') or '') .. '</figcaption></figure>'
  else
    H[#H + 1] = '<p class="missing">Not drawn: ' .. esc(p.error or 'plots were not rendered') ..
      '.</p>'
  end
  local ic = M.idle_chart(sec, model.by)
  if not ic.missing then
    H[#H + 1] = figure(svgs.idle, plots.idle or {}, ic.caption, esc)
  end
  H[#H + 1] = ops_html(sec, plots, svgs, esc, html_table)
  H[#H + 1] = '</section>'
  return table.concat(H, '\n')
end

return M
