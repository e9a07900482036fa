-- tplua report DIR... --out DIR: writes report.md, report.html and the plots of a comparison.
local M = {
  summary = 'write a Markdown + HTML report with plots (PNG, SVG) of the results in DIR...',
  usage = [[usage: tplua report DIR... --out DIR [--by KEY] [--baseline VALUE] [--title TEXT]
                    [--methodology NAME] [--hardware GROUP=ID]... [--seed N] [--no-plots]
Loads the run records (and tprimat-era results) under DIR... and writes into --out:
  report.md      the verdict (fair or not, headline ratio with its confidence interval),
                 findings (audit, loss curves, statistics), the comparison table with its
                 basis, the plots and the runs
  report.html    the same, self-contained (inline CSS and SVG plots, no script)
  throughput.{png,svg}  step_time.{png,svg}  loss.{png,svg}  memory.{png,svg}  mfu.{png,svg}
                 drawn by gnuplot (a plot without data is named in the report instead)
Options:
  --out DIR            output directory (created when missing; files replaced atomically)
  --by KEY             split the runs by this field (default platform; any result field,
                       e.g. framework, gbs, training_config.seed)
  --baseline VALUE     the group the others are divided by (default nvd, else the first)
  --title TEXT         report title (default: the models and the groups)
  --methodology NAME   audit under this methodology instead of the records' own
  --hardware GROUP=ID  the GPU of a group, from the catalog (tp.hardware: h100-sxm, mi300x,
                       ...), for records that name none (MFU, energy); repeatable
  --seed N             seed of the bootstrap (default 42)
  --no-plots           do not run gnuplot
Exit status: 0 written (even when the comparison is not fair: the report says so), 1 nothing
to report or a file could not be written, 2 usage error.]],
}

function M.run(args)
  local cli = require('tp.cli')
  local opts, dirs = cli.parse(args, {
    help = 'boolean', out = 'string', by = 'string', baseline = 'string', title = 'string',
    methodology = 'string', seed = 'integer', no_plots = 'boolean', hardware = 'list',
  })
  if not opts then
    return cli.usage_error('report', dirs, M.usage)
  end
  if opts.help then
    print(M.usage)
    return 0
  end
  if #dirs == 0 then
    return cli.usage_error('report', 'no result directory given', M.usage)
  end
  if not opts.out or opts.out == '' then
    return cli.usage_error('report', '--out DIR is required', M.usage)
  end
  local hw
  for _, spec in ipairs(opts.hardware or {}) do
    local group, id = spec:match('^([^=]+)=(.+)$')
    if not group then
      return cli.usage_error('report', string.format("--hardware '%s': GROUP=ID expected " ..
        '(e.g. amd=mi300x)', spec), M.usage)
    end
    local row, herr = require('tp.hardware').get(id)
    if not row then
      return cli.usage_error('report', string.format('--hardware %s: %s', spec, tostring(herr)),
        nil)
    end
    hw = hw or {}
    hw[group] = id
  end
  local results = require('tp.results')
  local report = require('tp.report')
  local set, err = results.load(dirs)
  if not set then
    io.stderr:write('tplua report: ', tostring(err), '\n')
    return 1
  end
  for _, e in ipairs(set.errors) do
    io.stderr:write('tplua report: warning: ', tostring(e.message), ' (left out)\n')
  end
  local baseline = opts.baseline
  if baseline ~= nil and tonumber(baseline) and #set:where({ [opts.by or 'platform'] =
    baseline }).runs == 0 then
    baseline = tonumber(baseline)  -- a numeric key (gbs, seed) typed on the command line
  end
  if opts.methodology then
    local m, merr = require('tp.methodology').get(opts.methodology)
    if not m then
      return cli.usage_error('report', tostring(merr), nil)
    end
  end
  local res, werr = report.write(set, opts.out, {
    by = opts.by, baseline = baseline, title = opts.title, methodology = opts.methodology,
    seed = opts.seed, sources = dirs, plots = not opts.no_plots, hardware = hw,
  })
  if not res then
    io.stderr:write('tplua report: ', tostring(werr):gsub('^report: ', ''), '\n')
    return 1
  end
  for _, w in ipairs(res.warnings) do
    io.stderr:write('tplua report: warning: ', tostring(w), '\n')
  end
  local v = res.model.verdict
  io.stdout:write(string.format('%s. %s.\n', v.label, v.summary))
  for _, h in ipairs(v.headline) do
    io.stdout:write(string.format('  %s / %s = %.3fx %s%s\n', tostring(h.group),
      tostring(h.baseline), h.ratio, h.label, h.ci and string.format(' (%d%% CI %.3f-%.3f)',
        res.model.level, h.ci.lo, h.ci.hi) or ''))
  end
  io.stdout:write(string.format('findings: %d errors, %d warnings, %d notes\n', v.counts.error,
    v.counts.warning, v.counts.info))
  io.stdout:write('wrote:\n')
  for _, f in ipairs(res.files) do
    io.stdout:write('  ', f, '\n')
  end
  return 0
end

return M
