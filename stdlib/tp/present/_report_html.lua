-- tp.present._report_html: renders a report model as one self-contained HTML page (report.html),
-- with gnuplot's SVG made safe to inline.
local base = require('tp.present._report_base')
local plots_part = require('tp.present._report_plots')
local text = require('tp.present._report_text')
local profile_part = require('tp.present._report_profile')

local misuse, g, plural = base.misuse, base.g, base.plural

local M = {}

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
  local hl = text.headline_lines(model)
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
  local rows, level = text.comparison_rows(model)
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
  for _, r in ipairs(text.basis_rows(model)) do
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

  -- Where the step time goes (profiled runs).
  if model.profile then
    add(profile_part.html(model, plots, svgs, esc, html_table))
  end
  -- Memory per GPU (measured beside the plan's estimate; the traces side by side).
  if model.memory then
    add(require('tp.present.memory').html(model.memory, plots.memory_step or {},
      svgs.memory_step, esc, html_table))
  end

  -- nccl-tests and rccl-tests results side by side.
  if model.collectives then
    add('<section id="collectives"><h2>Collectives</h2>')
    local pc = require('tp.present.collectives')
    for _, tb in ipairs(model.collectives.tables) do
      local title, head, crows = pc.table_rows(model.collectives, tb)
      local numeric = {}
      for j = 2, #head do
        numeric[j] = true
      end
      add('<h3>' .. esc(title) .. '</h3>')
      add(html_table(head, crows, numeric))
    end
    add('</section>')
  end

  -- What a configuration search decided, rung by rung.
  if #(model.searches or {}) > 0 then
    add('<section id="search"><h2>Search</h2>')
    for _, s in ipairs(model.searches) do
      add('<pre>' .. esc(table.concat(require('tp.present.search').lines(s.doc), '\n'))
        .. '</pre>')
    end
    add('</section>')
  end

  -- Plots.
  add('<section id="plots"><h2>Plots</h2>')
  for _, c in ipairs(plots_part.plots_of(model)) do
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
  for j, c in ipairs(text.RUN_COLUMNS) do
    head[j] = c[1]
    numeric[j] = j >= 6 and j ~= 9 and j ~= #text.RUN_COLUMNS
  end
  add(html_table(head, text.run_rows(model), numeric))
  local skipped = model.set.skipped or {}
  if #skipped > 0 then
    add(string.format('<p class="missing">%s in the result directories are not results and ' ..
      'were skipped.</p>', esc(plural(#skipped, 'JSON file'))))
  end
  add('</section>')
  local profiled = text.profile_rows(model)
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

return M
