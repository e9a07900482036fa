-- tp.present._report_markdown: renders a report model as Markdown (report.md).
local base = require('tp.present._report_base')
local plots_part = require('tp.present._report_plots')
local text = require('tp.present._report_text')
local profile_part = require('tp.present._report_profile')

local misuse, g, plural = base.misuse, base.g, base.plural

local M = {}

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
  for _, h in ipairs(text.headline_lines(model)) do
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
  local rows, level = text.comparison_rows(model)
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
  for _, r in ipairs(text.basis_rows(model)) do
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
  for _, l in ipairs(profile_part.markdown(model, plots, md_text)) do
    add(l)
  end
  for _, l in ipairs(require('tp.present.memory').markdown(model.memory, plots.memory_step,
    md_text)) do
    add(l)
  end
  if model.collectives then
    add('## Collectives')
    add()
    add('nccl-tests and rccl-tests results side by side (docs/collectives.md).')
    add()
    for l in require('tp.present.collectives').markdown(model.collectives):gmatch('([^\n]*)\n?')
    do
      add(l)
    end
  end
  if #(model.searches or {}) > 0 then
    add('## Search')
    add()
    for _, s in ipairs(model.searches) do
      for _, l in ipairs(require('tp.present.search').markdown(s.doc)) do
        add(l)
      end
    end
  end
  add('## Plots')
  add()
  for _, c in ipairs(plots_part.plots_of(model)) do
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
  for j, c in ipairs(text.RUN_COLUMNS) do
    head[j] = c[1]
  end
  add(md_row(head))
  local rule = {}
  for j = 1, #text.RUN_COLUMNS do
    rule[j] = '---'
  end
  add('| ' .. table.concat(rule, ' | ') .. ' |')
  for _, r in ipairs(text.run_rows(model)) do
    add(md_row(r))
  end
  local skipped = model.set.skipped or {}
  if #skipped > 0 then
    add()
    add(string.format('%s in the result directories are not results and were skipped.',
      plural(#skipped, 'JSON file')))
  end
  local profiled = text.profile_rows(model)
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

return M
