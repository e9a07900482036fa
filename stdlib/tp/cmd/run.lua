-- tplua run: run the part of a recipe's plan that this machine can run (its own platform),
-- through tp.campaign; no comparison afterwards.
local M = {}

M.summary = "run a recipe's runs for this machine's platform (no analysis)"

M.usage = [[
usage: tplua run RECIPE.lua [flags]
       tplua run CAMPAIGN.lua [--results DIR] [--retry-failed] [--quiet] [--concurrency N]
                              [--skip-preflight]

Loads RECIPE.lua, plans it, finds this machine's platform with the GPU probe (nvd on NVIDIA,
amd on AMD) and runs that platform's runs through tp.campaign, writing results under the
results directory. Prints a short plan first, then the checks before launch (GPUs present and
idle, framework and its argument parser, data, output space, Slurm partition; see
docs/preflight.md): when one fails, nothing starts. Unlike 'tplua RECIPE.lua' it does not compare
afterwards ('tplua compare DIR' does).

The recipe's flags apply (see 'tplua RECIPE.lua --help'): --iters N, --repeats N,
--results DIR, --only PLATFORM, --launcher local|torchrun|ranks|container|slurm, --dry-run,
--no-prune, --profile TOOL[:FIRST-LAST] (torch, nsys, rocprofv3; docs/recipes.md),
--skip-preflight (start without the checks; each record says so), and its own.

  -h, --help  show this help

A file returning tp.campaign{...} (docs/campaign.md) is executed as it is: finished runs are
skipped, interrupted ones rerun, failed ones rerun with --retry-failed. The runs it is about to
start are checked first, each as a recipe's ('tplua preflight CAMPAIGN.lua'): when a check
fails, nothing starts; --skip-preflight starts without the checks (each record says so).

exit status: 0 when the runs were started and finished, 1 when the plan has errors, the recipe
cannot be loaded, this machine has no GPU of a planned platform, the preflight failed, or runs
cannot be started;
2 on a usage error.
]]

-- The checks before a campaign's runs start (tp.preflight.check_campaign), for the runs that
-- executing it now would start; each run's record keeps its report's summary. Returns false
-- when one failed.
local function preflight_campaign(c, opts)
  local preflight = require('tp.run.preflight')
  if opts.skip_preflight then
    if not opts.quiet then
      io.stdout:write('run: --skip-preflight: the checks before launch are skipped (each '
        .. 'record says so)\n')
    end
    for _, r in ipairs(c.runs) do
      r.preflight = preflight.summary(nil)
    end
    return true
  end
  -- What the journal says is left to run (an unreadable journal: execute reports it).
  local ok, status = pcall(c.status, c, { results = opts.results,
    retry_failed = opts.retry_failed })
  local ids
  if ok then
    ids = {}
    for _, st in ipairs(status) do
      if st.action == 'run' then
        ids[#ids + 1] = st.id
      end
    end
    if #ids == 0 then
      return true
    end
  end
  local report = preflight.check_campaign(c, { results = opts.results, runs = ids })
  if not opts.quiet or not report.ok then
    preflight.print(report, io.stdout)
  end
  local by_id = {}
  for _, r in ipairs(report.runs) do
    by_id[r.run] = r
  end
  for _, r in ipairs(c.runs) do
    r.preflight = by_id[r.id] and preflight.summary(by_id[r.id]) or nil
  end
  return report.ok
end

-- A file returning tp.campaign{...}: executed with --results DIR, --retry-failed, --quiet,
-- --concurrency N (docs/campaign.md); exits 0, 1 when a run failed, 130/143 when interrupted.
local function run_campaign(c, args)
  local cli = require('tp.cli')
  local opts, rest = cli.parse(args, { results = 'string', retry_failed = 'boolean',
    quiet = 'boolean', concurrency = 'integer', help = 'boolean', skip_preflight = 'boolean' })
  if not opts then
    return cli.usage_error('run', rest, M.usage)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #rest > 0 then
    return cli.usage_error('run', 'unexpected argument: ' .. rest[1], M.usage)
  end
  -- Profiled runs get their traces analysed into their records (profile.analysis), as a
  -- recipe's runs do (tp.experiment).
  -- Each run adds itself to the history TPLUA_HISTORY names as soon as its record is written.
  local on_record = require('tp.experiment').history_hook(nil, io.stdout)
  for _, r in ipairs(c.runs) do
    if type(r.profile) == 'table' and r.profile.analyse == nil then
      r.profile = require('tp.experiment').with_analysis(r.profile)
    end
    r.on_record = r.on_record or on_record
  end
  if not preflight_campaign(c, opts) then
    io.stdout:write('run: the preflight found errors: nothing started (--skip-preflight starts '
      .. 'anyway)\n')
    return 1
  end
  local summary, err = c:execute({ results = opts.results, retry_failed = opts.retry_failed,
    quiet = opts.quiet, concurrency = opts.concurrency })
  if not summary then
    io.stderr:write(string.format('tplua run: %s\n', err))
    return 1
  end
  -- Each finished run into the history, when TPLUA_HISTORY names one (docs/history.md).
  if not require('tp.experiment').add_to_history(nil, summary, io.stdout)
    and summary.exit_code == 0 then
    return 1
  end
  return summary.exit_code
end

function M.run(args)
  local path, rest = require('tp.cli').recipe_arg('run', args, M.usage)
  if not path then
    return rest
  end
  local exp, err = require('tp.experiment').load(path)
  if not exp then
    io.stderr:write(string.format('tplua run: %s\n', err))
    return 1
  end
  if require('tp.run.campaign').is_campaign(exp) then
    return run_campaign(exp, rest)
  end
  return exp:cli(rest, 'run', 'tplua run ' .. path)
end

return M
