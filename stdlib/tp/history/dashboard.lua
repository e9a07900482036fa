-- tp.history.dashboard: the history as one self-contained static HTML page (`tplua history
-- dashboard --out DIR`): a time-series chart per comparable group (the same model, config hash
-- and methodology: both vendors on one chart, one line per platform, GPU and framework), change
-- points marked with their size and the software-stack change, notes marked, and a run's
-- metrics and stack shown on hover or click. Inline SVG, style and script: nothing is fetched
-- when the page is viewed. Written atomically (tp.fs.write_atomic).
local fs = require('tp.fs')
local stack = require('tp.analyse.stack')
local detect = require('tp.history._detect')
local svg = require('tp.history._dashboard_svg')
local page = require('tp.history._dashboard_page')

local M = {}

local esc = svg.escape

-- The metrics a run's details list, in this order: the history's metric columns.
local METRICS = require('tp.history._store').METRICS

local PLATFORM_COLOURS = { amd = '#c8102e', nvd = '#5a8f00', cpu = '#555555' }
local PALETTE = { '#1f77b4', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f',
  '#bcbd22' }

local function part(v)
  return (v == nil or v == '') and '-' or tostring(v)
end

local function group_key(s)
  return table.concat({ part(s.model), part(s.config_hash), part(s.methodology) }, '/')
end

-- 'amd mi300x megatron 0.10.0': the parts of the series key that tell its lines apart, those
-- the key does not know ('-') left out.
local function series_label(s)
  local words = {}
  for _, v in ipairs({ s.platform, s.gpu, s.framework, s.framework_version }) do
    if v ~= nil and v ~= '' and v ~= '-' then
      words[#words + 1] = tostring(v)
    end
  end
  return #words > 0 and table.concat(words, ' ') or tostring(s.key)
end

-- The software stack of a run as rows {label, text} (tp.analyse.stack's rows), or {} without.
local function stack_rows(env)
  local rows = {}
  if type(env) ~= 'table' then
    return rows
  end
  for _, row in ipairs(stack.ROWS) do
    local v = row.get(env)
    if v then
      rows[#rows + 1] = { row.label, v }
    end
  end
  return rows
end

local function check_args(H, outdir, opts)
  if type(H) ~= 'table' or type(H.series_list) ~= 'function' then
    error('tp.history.dashboard.write: a History expected, got ' .. type(H), 3)
  end
  if type(outdir) ~= 'string' or outdir == '' then
    error('tp.history.dashboard.write: outdir must be a non-empty string', 3)
  end
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('tp.history.dashboard.write: options must be a table, got ' .. type(opts), 3)
  end
  for k, v in pairs(opts) do
    if k ~= 'since' and k ~= 'metric' then
      error(string.format("tp.history.dashboard.write: unknown option '%s'", tostring(k)), 3)
    end
    if type(v) ~= 'string' then
      error(string.format("tp.history.dashboard.write: option '%s' must be a string, got %s", k,
        type(v)), 3)
    end
  end
  if opts.metric and not detect.SENSE[opts.metric] then
    error(string.format("tp.history.dashboard.write: unknown metric '%s'", opts.metric), 3)
  end
  return opts
end

-- Reads every series' points and notes and analyses them: groups in key order, each with its
-- series {info, label, result, notes}. nil, err, code when the database fails.
local function collect(H, metric, since)
  local list, err, code = H:series_list()
  if not list then
    return nil, err, code
  end
  local groups, by_key = {}, {}
  for _, s in ipairs(list) do
    local result, notes, rcode = detect.analyse_series(H, s.key, metric, since)
    if not result then
      return nil, notes, rcode
    end
    if #result.points > 0 then
      local gk = group_key(s)
      local g = by_key[gk]
      if not g then
        g = { key = gk, info = s, series = {} }
        by_key[gk] = g
        groups[#groups + 1] = g
      end
      g.series[#g.series + 1] = { info = s, label = series_label(s), notes = notes,
        result = result }
    end
  end
  table.sort(groups, function(a, b)
    return a.key < b.key
  end)
  for _, g in ipairs(groups) do
    table.sort(g.series, function(a, b)
      return a.info.key < b.info.key
    end)
  end
  return groups
end

local function assign_colours(g)
  local used, next_free = {}, 1
  for _, s in ipairs(g.series) do
    local c = PLATFORM_COLOURS[s.info.platform]
    if not c or used[c] then
      repeat
        c = PALETTE[(next_free - 1) % #PALETTE + 1]
        next_free = next_free + 1
      until not used[c] or next_free > #PALETTE + 1
    end
    used[c] = true
    s.colour = c
  end
end

-- Adds one series' runs to the embedded data; returns its 1-based index there.
local function embed_series(data, stacks_seen, s, chart_id)
  local pts = {}
  for i, p in ipairs(s.result.points) do
    local rows = stack_rows(p.environment)
    local id = {}
    for j, r in ipairs(rows) do
      id[j] = r[1] .. '\0' .. r[2]
    end
    local sid = table.concat(id, '\1')
    local idx = stacks_seen[sid]
    if not idx then
      data.stacks[#data.stacks + 1] = rows
      idx = #data.stacks - 1
      stacks_seen[sid] = idx
    end
    local metrics = {}
    for _, m in ipairs(METRICS) do
      local v = type(p.metrics) == 'table' and p.metrics[m] or nil
      if type(v) == 'number' and v == v and math.abs(v) < math.huge then
        metrics[m] = v
      end
    end
    metrics[s.result.metric] = metrics[s.result.metric] or p.value
    pts[i] = { time = tostring(p.time), run_id = tostring(p.run_id or '-'),
      sha256 = tostring(p.sha256 or '-'), value = p.value, metrics = metrics, stack = idx }
  end
  data.series[#data.series + 1] = { key = s.info.key, label = s.label, chart = chart_id,
    colour = s.colour, points = pts }
  return #data.series
end

local function change_item(metric, s, c)
  return string.format('<li class="%s">%s %s: %s %s (first run after: %s; mean %s -> %s)</li>',
    esc(c.kind or 'change'), esc(tostring(c.time):sub(1, 10)), esc(s.label),
    esc(c.kind or 'change'), esc(detect.change_text(metric, c)), esc(tostring(c.run_id)),
    esc(detect.value_text(c.before)), esc(detect.value_text(c.after)))
end

local function latest_text(l)
  if not l then
    return '-'
  elseif l.skipped then
    return 'not tested: ' .. l.skipped
  end
  local what = l.change and 'the change above' or l.kind or 'no change'
  return string.format('latest %d vs %d before: %s: %s', l.n_latest, l.n_baseline,
    detect.pct_text(l.pct, l.ci), what)
end

-- The HTML of one group: its heading, legend, chart, changes and notes.
local function group_html(g, gi, metric, since, data, stacks_seen)
  assign_colours(g)
  local chart_id = 'chart-' .. gi
  local chart = { id = chart_id, ylabel = detect.LABEL[metric] or metric, series = {},
    notes = {} }
  local legend, changes, notes, seen_notes = {}, {}, {}, {}
  for _, s in ipairs(g.series) do
    local index = embed_series(data, stacks_seen, s, chart_id)
    local pts = {}
    for i, p in ipairs(s.result.points) do
      pts[i] = { p.time_epoch, p.value }
    end
    local marks = {}
    for _, c in ipairs(s.result.changes) do
      local before = s.result.points[c.index - 1]
      marks[#marks + 1] = { t_before = before.time_epoch, t_after = c.time_epoch,
        kind = c.kind, text = string.format('%+.1f%%', c.pct),
        title = string.format('%s %s, %s: %s', tostring(c.time):sub(1, 10), c.kind or 'change',
          s.label, detect.change_text(metric, c)) }
      changes[#changes + 1] = change_item(metric, s, c)
    end
    chart.series[#chart.series + 1] = { label = s.label, colour = s.colour, points = pts,
      changes = marks, index = index }
    legend[#legend + 1] = string.format('<span><i style="background:%s"></i>%s (%d runs)</span>',
      esc(s.colour), esc(s.label), #s.result.points)
    for _, n in ipairs(s.notes) do
      local id = tostring(n.time) .. '\0' .. tostring(n.text)
      if not seen_notes[id] and type(n.time_epoch) == 'number'
        and (since == nil or tostring(n.time) >= since) then
        seen_notes[id] = true
        chart.notes[#chart.notes + 1] = { t = n.time_epoch, text = n.text }
        notes[#notes + 1] = string.format('<li>%s: %s</li>', esc(tostring(n.time):sub(1, 10)),
          esc(n.text))
      end
    end
  end
  chart.title = string.format('%s: %s', detect.LABEL[metric] or metric, g.key)
  local info = g.info
  local out = {
    string.format('<section class="group" id="group-%d">', gi),
    string.format('<h2>%s</h2>', esc(string.format('%s, config %s, %s', part(info.model),
      part(info.config_hash), part(info.methodology)))),
    '<div class="legend">' .. table.concat(legend) .. '</div>',
    svg.chart(chart),
  }
  if #changes > 0 then
    out[#out + 1] = '<ul class="changes">' .. table.concat(changes) .. '</ul>'
  else
    out[#out + 1] = '<p>No change point.</p>'
  end
  if #notes > 0 then
    out[#out + 1] = '<p>Notes:</p><ul class="notes">' .. table.concat(notes) .. '</ul>'
  end
  out[#out + 1] = '</section>'
  return table.concat(out, '\n')
end

local function summary_html(groups)
  local rows = { '<table class="summary"><tr><th>series</th><th>runs</th><th>from</th>'
    .. '<th>to</th><th>last</th><th>changes</th><th>latest runs</th></tr>' }
  for gi, g in ipairs(groups) do
    for _, s in ipairs(g.series) do
      local pts = s.result.points
      local nreg, nimp = 0, 0
      for _, c in ipairs(s.result.changes) do
        if c.kind == 'regression' then
          nreg = nreg + 1
        elseif c.kind == 'improvement' then
          nimp = nimp + 1
        end
      end
      rows[#rows + 1] = string.format('<tr><td><a href="#group-%d">%s</a></td>'
        .. '<td class="num">%d</td><td class="date">%s</td><td class="date">%s</td>'
        .. '<td class="num">%s</td>'
        .. '<td>%d regression%s, %d improvement%s</td><td>%s</td></tr>', gi,
        esc(s.info.key), #pts, esc(tostring(pts[1].time):sub(1, 10)),
        esc(tostring(pts[#pts].time):sub(1, 10)), esc(detect.value_text(pts[#pts].value)), nreg,
        nreg == 1 and '' or 's', nimp, nimp == 1 and '' or 's', esc(latest_text(s.result.latest)))
    end
  end
  rows[#rows + 1] = '</table>'
  return table.concat(rows, '\n')
end

--- Builds the dashboard's HTML text (what `write` writes).
---@param H table a tp.history History
---@param opts? {since?: string, metric?: string}
---@return string|nil html, string? err, string? code
function M.html(H, opts)
  opts = opts or {}
  local metric = opts.metric or detect.DEFAULTS.metric
  local groups, err, code = collect(H, metric, opts.since)
  if not groups then
    return nil, err, code
  end
  local label = detect.LABEL[metric] or metric
  local data = { metric = metric, metrics = METRICS, labels = detect.LABEL, series = {},
    stacks = {} }
  local stacks_seen = {}
  local runs = 0
  for _, g in ipairs(groups) do
    for _, s in ipairs(g.series) do
      runs = runs + #s.result.points
    end
  end
  local body = {
    string.format('<h1>Run history: %s</h1>', esc(label)),
    string.format('<p class="meta">%d chart%s, %d runs%s; %s is better. Written by tplua on %s. '
      .. 'Hover over or click a run for its metrics and software stack.</p>', #groups,
      #groups == 1 and '' or 's', runs, opts.since and (', since ' .. esc(opts.since)) or '',
      detect.SENSE[metric], os.date('!%Y-%m-%d %H:%M UTC')),
  }
  if #groups == 0 then
    body[#body + 1] = '<p class="empty">The history holds no runs with this metric yet '
      .. '(tplua history add DIR adds some).</p>'
  else
    body[#body + 1] = summary_html(groups)
    for gi, g in ipairs(groups) do
      body[#body + 1] = group_html(g, gi, metric, opts.since, data, stacks_seen)
    end
  end
  return page.render(esc('tplua history: ' .. label), table.concat(body, '\n'), data)
end

--- Writes the dashboard to `outdir`/index.html (the directory made when absent; the file
--- replaced atomically) and returns its path.
---```lua
---local H = assert(tp.history.open())
---print(assert(require('tp.history.dashboard').write(H, 'public/perf', { since = '2026-10-01' })))
---```
---@param H table a tp.history History
---@param outdir string
---@param opts? {since?: string, metric?: string} metric default tokens_per_s_per_gpu
---@return string|nil path, string? err, string? code
function M.write(H, outdir, opts)
  opts = check_args(H, outdir, opts)
  local html, err, code = M.html(H, opts)
  if not html then
    return nil, err, code
  end
  local ok, merr, mcode = fs.mkdir_p(outdir)
  if not ok then
    return nil, merr, mcode
  end
  local path = fs.join(outdir, 'index.html')
  local wok, werr, wcode = fs.write_atomic(path, html)
  if not wok then
    return nil, werr, wcode
  end
  return path
end

return M
