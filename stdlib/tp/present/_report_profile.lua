-- tp.present._report_profile: the report's profile analysis (tp.analyse.profiled.section): the
-- chart of where each group's step goes (stacked bars of the classes' exclusive time and idle,
-- ms per step), and the section of report.md (tp.present.trace.markdown) and report.html: each
-- group's mean step, the explanation of each gap, the runs they come from.
local trace = require('tp.analyse.trace')
local profiled = require('tp.analyse.profiled')
local present_trace = require('tp.present.trace')
local plot = require('tp.present.plot')

local M = {}

M.TITLE = 'Where the step time goes (profiler traces)'

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
      H[#H + 1] = string.format('<h3>Why %s and %s differ</h3><p>Step %s ms against %s ms ' ..
        '(%+.3f ms, %s).</p>', esc(e.labels[2]), esc(e.labels[1]), ns_ms(e.step_b),
        ns_ms(e.step_a), e.diff / 1e6, e.ratio and string.format('%.3fx', e.ratio) or '-')
      local erows = {}
      for i, r in ipairs(e.rows) do
        erows[i] = { r.label, ns_ms(r.a), ns_ms(r.b), string.format('%+.3f', r.diff / 1e6),
          r.share and string.format('%.0f%%', 100 * r.share) or '-' }
      end
      erows[#erows + 1] = { 'step (sum of the rows)', ns_ms(e.step_a), ns_ms(e.step_b),
        string.format('%+.3f', e.sum / 1e6), '100%' }
      H[#H + 1] = html_table({ 'ms per step', e.labels[1], e.labels[2], 'difference',
        'of the gap' }, erows, { false, true, true, true, true })
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
  H[#H + 1] = '</section>'
  return table.concat(H, '\n')
end

return M
