-- tplua report DIR... --out DIR: writes report.md, report.html and the plots of a comparison.
local M = {
  summary = 'write a Markdown + HTML report with plots (PNG, SVG) of the results in DIR...',
  usage = [[usage: tplua report DIR... --out DIR [--by KEY] [--baseline VALUE] [--title TEXT]
                    [--methodology NAME] [--hardware GROUP=ID]... [--seed N] [--no-plots]
                    [--csv FILE|-] [--peaks FILE|DIR]
Loads the run records (and tprimat-era results) under DIR... and writes into --out:
  report.md      the verdict (fair or not, headline ratio with its confidence interval),
                 findings (audit, loss curves, statistics), the comparison table with its
                 basis (MFU and energy per token included), each group's software stack,
                 the plots and the runs
  report.html    the same, self-contained (inline CSS and SVG plots, no script)
  throughput.{png,svg}  step_time.{png,svg}  loss.{png,svg}  memory.{png,svg}  mfu.{png,svg}
                 drawn by gnuplot (a plot without data is named in the report instead)
Given MLPerf Training submission directories (results/<system>/<benchmark>/ of result_*.txt),
it writes their comparison (tplua mlperf compare, RCP flags included) and eval_accuracy.{png,svg}
(every run's eval accuracy against samples) instead (docs/mlperf.md).
Options:
  --out DIR            output directory (created when missing; files replaced atomically)
  --by KEY             split the runs by this field (default platform; any result field,
                       e.g. framework, gbs, training_config.seed)
  --baseline VALUE     the group the others are divided by (default nvd, else the first)
  --title TEXT         report title (default: the models and the groups)
  --methodology NAME   audit under this methodology instead of the records' own
  --hardware GROUP=ID  the GPU of a group, from the catalog (tp.hardware: h100-sxm, mi300x,
                       ...), for records that name none (MFU, energy); repeatable; without
                       it such records are taken to run on the platform's usual GPU (amd
                       mi300x, nvd h100-sxm), and the report says so
  --seed N             seed of the bootstrap (default 42)
  --no-plots           do not run gnuplot
  --csv FILE|-         also write the comparison as CSV to FILE (replaced atomically), one row
                       per group: runs, tokens/s, tokens/s/GPU, MFU, J/token and its basis, ...
                       each with n, mean, sd, CV, min, max, CI, ratio, p; '-' prints it on
                       stdout (the summary lines then go to stderr)
  --peaks FILE|DIR     measured peaks (records of recipes/peaks.lua): profiled runs' ops are
                       also held against the measured peak of their GPU ("% of measured
                       peak"); peaks records among the results are used without it
Exit status: 0 written (even when the comparison is not fair: the report says so), 1 nothing
to report or a file could not be written, 2 usage error.]],
}

-- tplua report on MLPerf submission directories (tp.present.report.write_mlperf).
function M.run_mlperf(dirs, opts, n)
  local cli = require('tp.cli')
  local allowed = { out = true, title = true, seed = true, no_plots = true }
  for k in pairs(opts) do
    if not allowed[k] then
      return cli.usage_error('report', string.format("option '--%s' is not for MLPerf "
        .. 'submission directories (they take --out, --title, --seed, --no-plots)',
        k:gsub('_', '-')), M.usage)
    end
  end
  if n < #dirs or #dirs < 2 then
    return cli.usage_error('report', 'MLPerf submission directories are reported with each '
      .. 'other: give two or more of them and no run records', M.usage)
  end
  local res, err = require('tp.present.report').write_mlperf(dirs, opts.out, {
    seed = opts.seed, title = opts.title, plots = not opts.no_plots })
  if not res then
    io.stderr:write('tplua report: ', tostring(err), '\n')
    return 1
  end
  for _, w in ipairs(res.warnings) do
    io.stderr:write('tplua report: warning: ', tostring(w), '\n')
  end
  for _, c in ipairs(res.model.comparisons) do
    io.stdout:write(string.format('%s / A: score ratio %s, mean time to train %.4f (%g%% CI '
      .. '%.4f-%.4f)\n', c.b.label, c.ratio and string.format('%.4f', c.ratio) or 'none',
      c.ci.estimate, c.level * 100, c.ci.lo, c.ci.hi))
  end
  for _, fl in ipairs(res.model.flags) do
    io.stdout:write('flag: ', fl, '\n')
  end
  io.stdout:write('wrote:\n')
  for _, f in ipairs(res.files) do
    io.stdout:write('  ', f, '\n')
  end
  return 0
end

function M.run(args)
  local cli = require('tp.cli')
  local opts, dirs = cli.parse(args, {
    help = 'boolean', out = 'string', by = 'string', baseline = 'string', title = 'string',
    methodology = 'string', seed = 'integer', no_plots = 'boolean', hardware = 'list',
    csv = 'string', peaks = 'string',
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
  if opts.csv == '' then
    return cli.usage_error('report', "option '--csv' needs a FILE (or - for standard output)",
      M.usage)
  end
  -- MLPerf Training submission directories: their comparison and eval-accuracy plot.
  local n_mlperf = require('tp.analyse.mlperf').count_submission_dirs(dirs)
  if n_mlperf > 0 then
    return M.run_mlperf(dirs, opts, n_mlperf)
  end
  local hw
  for _, spec in ipairs(opts.hardware or {}) do
    local group, id = spec:match('^([^=]+)=(.+)$')
    if not group then
      return cli.usage_error('report', string.format("--hardware '%s': GROUP=ID expected " ..
        '(e.g. amd=mi300x)', spec), M.usage)
    end
    local row, herr = require('tp.catalog.hardware').get(id)
    if not row then
      return cli.usage_error('report', string.format('--hardware %s: %s', spec, tostring(herr)),
        nil)
    end
    hw = hw or {}
    hw[group] = id
  end
  local peaks
  if opts.peaks then
    local perr
    peaks, perr = require('tp.analyse.peaks').load(opts.peaks)
    if not peaks then
      io.stderr:write('tplua report: --peaks ', opts.peaks, ': ', tostring(perr), '\n')
      return 1
    end
  end
  local results = require('tp.analyse.results')
  local report = require('tp.present.report')
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
    local m, merr = require('tp.plan.methodology').get(opts.methodology)
    if not m then
      return cli.usage_error('report', tostring(merr), nil)
    end
  end
  local res, werr = report.write(set, opts.out, {
    by = opts.by, baseline = baseline, title = opts.title, methodology = opts.methodology,
    seed = opts.seed, sources = dirs, plots = not opts.no_plots, hardware = hw, peaks = peaks,
  })
  if not res then
    io.stderr:write('tplua report: ', tostring(werr):gsub('^report: ', ''), '\n')
    return 1
  end
  for _, w in ipairs(res.warnings) do
    io.stderr:write('tplua report: warning: ', tostring(w), '\n')
  end
  local out = io.stdout
  if opts.csv then
    local csv = require('tp.analyse.compare_csv')
    local ok, cerr = csv.write(opts.csv, csv.format(res.model.set, res.model.compare))
    if not ok then
      io.stderr:write('tplua report: cannot write the CSV: ', tostring(cerr), '\n')
      return 1
    end
    if opts.csv == '-' then
      out = io.stderr
    else
      res.files[#res.files + 1] = opts.csv
    end
  end
  local v = res.model.verdict
  out:write(string.format('%s. %s.\n', v.label, v.summary))
  for _, h in ipairs(v.headline) do
    out:write(string.format('  %s / %s = %.3fx %s%s\n', tostring(h.group),
      tostring(h.baseline), h.ratio, h.label, h.ci and string.format(' (%d%% CI %.3f-%.3f)',
        res.model.level, h.ci.lo, h.ci.hi) or ''))
  end
  out:write(string.format('findings: %d errors, %d warnings, %d notes\n', v.counts.error,
    v.counts.warning, v.counts.info))
  out:write('wrote:\n')
  for _, f in ipairs(res.files) do
    out:write('  ', f, '\n')
  end
  return 0
end

return M
