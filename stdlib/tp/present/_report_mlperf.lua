-- tp.present._report_mlperf: the report of MLPerf Training submission directories
-- (results/<system>/<benchmark>/, tp.analyse.mlperf): the first directory the baseline, each
-- other one compared with it as `tplua mlperf compare` does (score ratio, the bootstrap CI of
-- the ratio of mean times to train, accelerator-minutes, samples to converge, the RCP check
-- and its flags), the plot of every run's eval accuracy against samples, and the runs.
-- Written as report.md, a self-contained report.html and eval_accuracy.{png,svg} (gnuplot).
local mlperf = require('tp.analyse.mlperf')
local html_part = require('tp.present._report_html')
local plot = require('tp.present.plot')
local fs = require('tp.fs')

local M = {}

local esc = html_part.escape_html

local function f(v, fmt)
  return type(v) == 'number' and string.format(fmt, v) or '-'
end

local function rcp_text(v)
  if not v then
    return '-'
  elseif v.pass == nil then
    -- not_applied: the division is open, or not logged (the check is the closed division's)
    return v.kind == 'not_applied' and 'not applied (not the closed division)' or 'not run'
  end
  return (v.pass and 'pass' or 'FAIL') .. ', ' .. v.message
end

local function label(i)
  return string.char(64 + i)  -- A, B, C, ...
end

-- The table: one row per figure, one column per directory.
local function table_rows(sides)
  local rows = {}
  local function row(name, fn)
    local r = { name }
    for i, s in ipairs(sides) do
      r[i + 1] = fn(s)
    end
    rows[#rows + 1] = r
  end
  row('score (minutes)', function(s) return f(s.score, '%.4f') end)
  row('runs scored / not (required)', function(s)
    return string.format('%d / %d (%s)', s.scored, s.dropped, s.required
      and tostring(s.required) or 'unknown')
  end)
  row('mean time to train (minutes)', function(s) return f(s.mean_minutes, '%.4f') end)
  row('accelerators', function(s) return s.accelerators and tostring(s.accelerators)
    or 'unknown' end)
  row('accelerator-minutes', function(s) return f(s.accelerator_minutes, '%.2f') end)
  row('samples to converge (mean, range)', function(s)
    local m = s.samples
    return m and string.format('%.1f (%.0f..%.0f)', m.mean, m.min, m.max) or '-'
  end)
  row('RCP check', function(s) return rcp_text(s.rcp) end)
  row('RCP least accepted mean', function(s) return f(s.rcp and s.rcp.min_mean, '%.1f') end)
  row('olympic mean samples to converge', function(s) return f(s.rcp and s.rcp.mean, '%.1f') end)
  row('scaling factor', function(s)
    return string.format('%.6f%s', s.scaling_factor or 1, s.scaling_source and (' ('
      .. s.scaling_source .. ')') or '')
  end)
  return rows
end

--- Builds the model of the report: `benchmark`, `sides` (each compare side, with `label` and
--- `dir`), `comparisons` (dirs[1] against each other one: tp.analyse.mlperf.compare's),
--- `flags`, `title`; or nil and a message (a directory that cannot be read, different
--- benchmarks, no scored run).
---@param dirs string[] two or more submission directories, the first the baseline
---@param opts? {seed?: integer, title?: string, ruleset?: string}
---@return table|nil model
---@return string? err
function M.build(dirs, opts)
  opts = opts or {}
  local model = { sides = {}, comparisons = {}, flags = {} }
  for i = 2, #dirs do
    local c, err = mlperf.compare_dirs(dirs[1], dirs[i], { seed = opts.seed,
      ruleset = opts.ruleset })
    if not c then
      return nil, err
    end
    model.benchmark = c.benchmark
    c.a.label = 'A'
    if i == 2 then
      model.sides[1] = c.a
    end
    c.b.label = label(i)
    model.sides[i] = c.b
    model.comparisons[#model.comparisons + 1] = c
    for _, fl in ipairs(c.flags) do
      local seen = false
      for _, x in ipairs(model.flags) do
        seen = seen or x == fl
      end
      if not seen then
        model.flags[#model.flags + 1] = fl
      end
    end
  end
  model.title = opts.title or string.format('MLPerf Training %s: %d submissions compared',
    tostring(model.benchmark), #dirs)
  model.rows = table_rows(model.sides)
  return model
end

--- The chart of every run's eval accuracy against samples_count (epoch_num when a run logs no
--- samples), one colour per directory; for a benchmark whose eval_accuracy is a loss
--- (tp.analyse.mlperf.eval_metric: the language models, flux1) the title and axis say so, lower
--- being better, and MLPerf's target is drawn. Returns {chart=} or {missing=why}.
---@param model table from build
---@return table
function M.chart(model)
  local metric = mlperf.eval_metric(model.benchmark)
  local series, xlabel = {}, 'samples'
  local xmin, xmax
  for i, s in ipairs(model.sides) do
    for k, run in ipairs(s.result.runs) do
      local xs, ys = {}, {}
      for _, e in ipairs(run.evals) do
        local x = e.samples_count or e.epoch_num
        if type(x) == 'number' and type(e.value) == 'number' then
          xs[#xs + 1], ys[#ys + 1] = x, e.value
          xmin, xmax = math.min(xmin or x, x), math.max(xmax or x, x)
          if not e.samples_count then
            xlabel = 'samples (epoch_num where no samples_count is logged)'
          end
        end
      end
      if #xs > 0 then
        series[#series + 1] = { title = k == 1 and (s.label .. ': ' .. fs.basename(s.dir)) or nil,
          x = xs, y = ys, color = plot.PALETTE[(i - 1) % #plot.PALETTE + 1], width = 1.2 }
      end
    end
  end
  if #series == 0 then
    return { missing = 'no run logs an eval_accuracy' }
  end
  if metric.loss then
    series[#series + 1] = { title = string.format('MLPerf target: <= %g', metric.target),
      x = { xmin, xmax }, y = { metric.target, metric.target }, color = '#555555', width = 1,
      dash = 2 }
    return { chart = { kind = 'lines', title = 'Eval loss against samples, every run (lower is '
      .. 'better)', xlabel = xlabel, ylabel = 'eval loss (eval_accuracy), lower is better',
      series = series } }
  end
  return { chart = { kind = 'lines', title = 'Eval accuracy against samples, every run',
    xlabel = xlabel, ylabel = 'eval_accuracy', series = series } }
end

-- The title of the eval section and the caption of its chart.
local function eval_texts(model)
  local metric = mlperf.eval_metric(model.benchmark)
  if metric.loss then
    return 'Eval loss against samples (lower is better)', string.format('Every run\'s '
      .. 'eval_accuracy against samples_count, one colour per submission: for %s an evaluation '
      .. 'loss, lower is better; the dashed line is MLPerf\'s target (<= %g).',
      tostring(model.benchmark), metric.target)
  end
  return 'Eval accuracy against samples', 'Every run\'s eval_accuracy against samples_count, '
    .. 'one colour per submission.'
end

-- The notes of the sides whose score is not that of all the runs the benchmark requires.
local function score_notes(model)
  local out = {}
  for _, s in ipairs(model.sides) do
    if s.score_note then
      out[#out + 1] = string.format('%s: score %s (%s)', s.label, s.score and string.format(
        '%.4f minutes', s.score) or 'none', s.score_note)
    end
  end
  return out
end

local function headline(c)
  local parts = {}
  if c.ratio then
    parts[#parts + 1] = string.format('score ratio %s/A %.4f (%.4f / %.4f minutes)', c.b.label,
      c.ratio, c.b.score, c.a.score)
  else
    local why = {}
    for _, x in ipairs({ c.a, c.b }) do
      if not x.score then
        why[#why + 1] = string.format('%s: %s', x.label, x.score_note or 'no score')
      end
    end
    parts[#parts + 1] = string.format('score ratio %s/A: none (%s)', c.b.label,
      table.concat(why, '; '))
  end
  parts[#parts + 1] = string.format('mean time to train %s/A %.4f, %g%% CI [%.4f, %.4f] '
    .. '(bootstrap, %d resamples, seed %d)', c.b.label, c.ci.estimate, c.level * 100, c.ci.lo,
    c.ci.hi, c.resamples, c.seed)
  if c.accelerator_ratio then
    parts[#parts + 1] = string.format('accelerator-minutes %s/A %.4f', c.b.label,
      c.accelerator_ratio)
  end
  return table.concat(parts, '; ')
end

local function run_rows(s)
  local rows = {}
  for _, run in ipairs(s.result.runs) do
    local last = run.evals[#run.evals]
    rows[#rows + 1] = { run.file, run.ok and run.status or ('(' .. (run.status or 'none') .. ')'),
      f(run.minutes, '%.4f'), run.samples_to_converge and tostring(run.samples_to_converge)
      or '-', tostring(#run.evals), last and f(last.value, '%.4f') or '-' }
  end
  return rows
end

local function run_head(model)
  return { 'file', 'status', 'minutes', 'samples', 'evals',
    'last ' .. mlperf.eval_metric(model.benchmark).label }
end

local function md_table(head, rows)
  local out = { '| ' .. table.concat(head, ' | ') .. ' |' }
  local sep = {}
  for i = 1, #head do
    sep[i] = i == 1 and '---' or '---:'
  end
  out[#out + 1] = '| ' .. table.concat(sep, ' | ') .. ' |'
  for _, r in ipairs(rows) do
    local cells = {}
    for i, c in ipairs(r) do
      -- One line per row: a line break in a file name would end the table.
      cells[i] = tostring(c):gsub('[\r\n]', ' '):gsub('|', '\\|')
    end
    out[#out + 1] = '| ' .. table.concat(cells, ' | ') .. ' |'
  end
  return out
end

--- report.md of a model; `plotted` is {png=, svg=} or {error=}.
---@param model table
---@param plotted table
---@return string
function M.markdown(model, plotted)
  local l = { '# ' .. model.title, '', '## Verdict', '' }
  for _, c in ipairs(model.comparisons) do
    l[#l + 1] = '- ' .. headline(c)
  end
  for _, fl in ipairs(model.flags) do
    l[#l + 1] = '- **flag**: ' .. fl
  end
  l[#l + 1] = ''
  l[#l + 1] = '## MLPerf Training submissions'
  l[#l + 1] = ''
  for _, s in ipairs(model.sides) do
    l[#l + 1] = string.format('- %s: `%s`%s', s.label, s.dir, s.label == 'A' and ' (baseline)'
      or '')
  end
  l[#l + 1] = ''
  local head = { '' }
  for i, s in ipairs(model.sides) do
    head[i + 1] = s.label
  end
  table.move(md_table(head, model.rows), 1, #model.rows + 2, #l + 1, l)
  l[#l + 1] = ''
  for _, n in ipairs(score_notes(model)) do
    l[#l + 1] = '- ' .. n
  end
  l[#l + 1] = ''
  l[#l + 1] = 'Scores by MLPerf\'s rules (olympic mean of the times to train, times the scaling '
    .. 'factor; RCP check of the pruned reference convergence points), as `tplua mlperf '
    .. 'compare` prints them; docs/mlperf.md lists the rules.'
  l[#l + 1] = ''
  local title, caption = eval_texts(model)
  l[#l + 1] = '## ' .. title
  l[#l + 1] = ''
  if plotted.png then
    l[#l + 1] = string.format('![%s](%s)', title, plotted.png)
    l[#l + 1] = ''
    l[#l + 1] = caption
  else
    l[#l + 1] = 'Not drawn: ' .. tostring(plotted.error)
  end
  for _, s in ipairs(model.sides) do
    l[#l + 1] = ''
    l[#l + 1] = string.format('## Runs of %s', s.label)
    l[#l + 1] = ''
    local rows = run_rows(s)
    table.move(md_table(run_head(model), rows), 1, #rows + 2, #l + 1, l)
  end
  return table.concat(l, '\n') .. '\n'
end

local CSS = 'body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}'
  .. 'table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em}'
  .. 'td.n{text-align:right}.flag{color:#a00}svg{max-width:100%;height:auto}'

local function html_table(head, rows)
  local out = { '<table><thead><tr>' }
  for _, h in ipairs(head) do
    out[#out + 1] = '<th>' .. esc(h) .. '</th>'
  end
  out[#out + 1] = '</tr></thead><tbody>'
  for _, r in ipairs(rows) do
    out[#out + 1] = '<tr>'
    for i, c in ipairs(r) do
      out[#out + 1] = (i == 1 and '<td>' or '<td class="n">') .. esc(c) .. '</td>'
    end
    out[#out + 1] = '</tr>'
  end
  out[#out + 1] = '</tbody></table>'
  return table.concat(out)
end

--- report.html of a model: self-contained (inline CSS, the plot's SVG inline, no script).
---@param model table
---@param plotted table
---@param svg? string the inlined SVG
---@return string
function M.html(model, plotted, svg)
  local o = { '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>',
    esc(model.title), '</title><style>', CSS, '</style></head><body><h1>', esc(model.title),
    '</h1><section id="verdict"><h2>Verdict</h2><ul>' }
  for _, c in ipairs(model.comparisons) do
    o[#o + 1] = '<li>' .. esc(headline(c)) .. '</li>'
  end
  for _, fl in ipairs(model.flags) do
    o[#o + 1] = '<li class="flag"><strong>flag</strong>: ' .. esc(fl) .. '</li>'
  end
  o[#o + 1] = '</ul></section><section id="mlperf"><h2>MLPerf Training submissions</h2><ul>'
  for _, s in ipairs(model.sides) do
    o[#o + 1] = string.format('<li>%s: <code>%s</code>%s</li>', esc(s.label), esc(s.dir),
      s.label == 'A' and ' (baseline)' or '')
  end
  o[#o + 1] = '</ul>'
  local head = { '' }
  for i, s in ipairs(model.sides) do
    head[i + 1] = s.label
  end
  o[#o + 1] = html_table(head, model.rows)
  local notes = score_notes(model)
  if #notes > 0 then
    o[#o + 1] = '<ul>'
    for _, n in ipairs(notes) do
      o[#o + 1] = '<li>' .. esc(n) .. '</li>'
    end
    o[#o + 1] = '</ul>'
  end
  local title, caption = eval_texts(model)
  o[#o + 1] = '</section><section id="eval-accuracy"><h2>' .. esc(title) .. '</h2>'
  if svg then
    o[#o + 1] = '<figure>' .. svg .. '<figcaption>' .. esc(caption) .. '</figcaption></figure>'
  else
    o[#o + 1] = '<p>Not drawn: ' .. esc(plotted.error or 'no SVG') .. '</p>'
  end
  o[#o + 1] = '</section>'
  for _, s in ipairs(model.sides) do
    o[#o + 1] = '<section><h2>Runs of ' .. esc(s.label) .. '</h2>'
      .. html_table(run_head(model), run_rows(s)) .. '</section>'
  end
  o[#o + 1] = '</body></html>\n'
  return table.concat(o)
end

--- Writes the report of submission directories into `out` (created when missing): report.md,
--- report.html and, unless `opts.plots == false`, eval_accuracy.png and .svg. Every file is
--- replaced atomically. Returns {files, warnings, model} or nil and a message.
---@param dirs string[]
---@param out string
---@param opts? {seed?: integer, title?: string, plots?: boolean, ruleset?: string}
---@return table|nil result
---@return string? err
function M.write(dirs, out, opts)
  opts = opts or {}
  local model, err = M.build(dirs, opts)
  if not model then
    return nil, err
  end
  local st = fs.stat(out)
  if st and st.type ~= 'directory' then
    return nil, string.format('%s exists and is not a directory', out)
  end
  if not st then
    local ok, merr = fs.mkdir_p(out)
    if not ok then
      return nil, tostring(merr)
    end
  end
  local files, warnings, plotted, svg = {}, {}, {}, nil
  local c = M.chart(model)
  if c.missing then
    plotted.error = c.missing
  elseif opts.plots == false then
    plotted.error = 'plots were turned off'
  else
    local ok, gerr = plot.available()
    if not ok then
      plotted.error = tostring(gerr)
    else
      for _, fmt in ipairs({ 'png', 'svg' }) do
        local name = 'eval_accuracy.' .. fmt
        local r, rerr = plot.render(c.chart, { format = fmt, path = fs.join(out, name) })
        if not r then
          plotted = { error = tostring(rerr) }
          break
        end
        plotted[fmt] = name
        files[#files + 1] = fs.join(out, name)
      end
      if plotted.svg then
        local ierr
        svg, ierr = html_part.svg_inline(fs.read(fs.join(out, plotted.svg)) or '', 'p1-')
        if not svg then
          warnings[#warnings + 1] = plotted.svg .. ': ' .. tostring(ierr)
        end
      end
    end
  end
  if plotted.error and not c.missing and opts.plots ~= false then
    warnings[#warnings + 1] = plotted.error .. ': plot left out'
  end
  for name, text in pairs({ ['report.md'] = M.markdown(model, plotted),
    ['report.html'] = M.html(model, plotted, svg) }) do
    local ok, werr = fs.write_atomic(fs.join(out, name), text)
    if not ok then
      return nil, string.format('%s: %s', fs.join(out, name), tostring(werr))
    end
  end
  files[#files + 1] = fs.join(out, 'report.md')
  files[#files + 1] = fs.join(out, 'report.html')
  return { files = files, warnings = warnings, model = model }
end

return M
