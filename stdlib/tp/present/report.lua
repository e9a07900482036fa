-- tp.report: a comparison report from a result set: the verdict first (fair or not, the headline
-- ratio with its confidence interval), then the findings of the audit, the loss-curve checks and
-- the statistics, the comparison table with its basis, the runs, and the plots. Written as
-- report.md, a self-contained report.html (inline CSS and SVG, no script, no external asset)
-- and PNG + SVG plots drawn by gnuplot (tp.plot). Every file is replaced atomically.
--
-- This file is the public face; the work is done in private parts, lowest first: _report_base
-- (shared helpers), _report_data (the model), _report_plots, _report_text, _report_markdown and
-- _report_html. Writing a report is here.
local base = require('tp.present._report_base')
local data = require('tp.present._report_data')
local plots_part = require('tp.present._report_plots')
local markdown_part = require('tp.present._report_markdown')
local html_part = require('tp.present._report_html')
local plot = require('tp.present.plot')
local fs = require('tp.fs')

local misuse, check_opts = base.misuse, data.check_opts

local M = {}

M.COLORS = base.COLORS
M.PLOTS = base.PLOTS
M.HEADLINE_METRICS = base.HEADLINE_METRICS
M.build = data.build
M.steady_step_times = plots_part.steady_step_times
M.CHARTS = plots_part.CHARTS
M.charts = plots_part.charts
M.chart = plots_part.chart
M.markdown = markdown_part.markdown
M.escape_html = html_part.escape_html
M.svg_inline = html_part.svg_inline
M.html = html_part.html
--- The report of MLPerf Training submission directories (tp.present._report_mlperf.write).
M.write_mlperf = require('tp.present._report_mlperf').write

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
