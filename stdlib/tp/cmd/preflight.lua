-- tplua preflight: the checks `tplua run` makes before it starts anything (tp.preflight), on
-- their own: GPUs present and idle, the framework installed and accepting the generated
-- arguments, data and tokenizer present, room for the output, the Slurm partition.
local M = {}

M.summary = "check before launch that a recipe's or a campaign's runs can start here"

M.usage = [[
usage: tplua preflight RECIPE.lua [flags] [--json]
       tplua preflight CAMPAIGN.lua [--results DIR] [--json]

Plans RECIPE.lua as 'tplua run' would and checks, without starting a run, what would make the
runs of this machine's platform fail or measure the wrong thing:

  gpus       the planned number of GPUs of the planned model are here, and idle (no other
             process on them, from NVML / ROCm SMI)
  framework  the framework's checkout, entry script and interpreter exist, at a version tplua's
             adapter generates arguments for
  arguments  the framework's own argument parser accepts the generated command (Megatron-LM,
             torchtitan, the reference trainer; run in the run's interpreter, no training)
  data       dataset files exist and verify; the tokenizer is on local disk (runs are offline)
  output     the results directory is writable, with room for logs and checkpoints
  slurm      (--launcher slurm) the partition exists and is up, with the nodes and GPUs per
             node the runs request

'tplua run' makes these checks itself and starts nothing when one fails; --skip-preflight
starts anyway, and every record says it was skipped.

The recipe's flags apply (--only, --launcher, --results, --iters, its own...).

A file returning tp.campaign{...} (docs/campaign.md) gets the same checks run by run, on the
command each run starts: its launcher and interpreter are found, the framework's checkout and
parser (for the frameworks tplua knows), the data among its config or its --data-path, the
results directory (--results DIR, else the campaign's), its GPUs when it asks for them, the
Slurm partition of a Slurm run's job script. One report per run; the flags of
'tplua run CAMPAIGN.lua' are taken too.

  --json      print the report as JSON instead
  -h, --help  show this help

exit status: 0 when no check failed (warnings allowed), 1 when one did or the recipe has plan
errors, 2 on a usage error.
]]

-- The platform to check: Slurm's (the recipe's), this machine's, or --only's.
local function choose_platform(plan, opts)
  local experiment = require('tp.experiment')
  if plan.launcher == 'slurm' then
    local p, why = experiment.slurm_platform(plan, opts)
    return p, why
  end
  local p, why, probe = experiment.local_platform()
  if opts.only then
    return opts.only, why, probe
  end
  if p and plan.platforms[p] then
    return p, why, probe
  end
  if #plan.order == 1 then
    return plan.order[1], why, probe
  end
  return nil, string.format('this machine is %s (%s); choose the platform to check with --only '
    .. '(the plan has: %s)', tostring(p or 'no GPU platform'), why,
    table.concat(plan.order, ', '))
end

-- A file returning tp.campaign{...}: each run checked (tp.preflight.check_campaign).
local function check_campaign(c, args)
  local cli = require('tp.cli')
  local opts, rest = cli.parse(args, { results = 'string', json = 'boolean', help = 'boolean',
    retry_failed = 'boolean', quiet = 'boolean', concurrency = 'integer',
    skip_preflight = 'boolean' })
  if not opts then
    return cli.usage_error('preflight', rest, M.usage)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #rest > 0 then
    return cli.usage_error('preflight', 'unexpected argument: ' .. rest[1], M.usage)
  end
  local preflight = require('tp.run.preflight')
  local report = preflight.check_campaign(c, { results = opts.results })
  if opts.json then
    io.stdout:write(require('tp.json').encode(report, { pretty = true }), '\n')
  else
    preflight.print(report, io.stdout)
  end
  return report.ok and 0 or 1
end

function M.run(args)
  local cli = require('tp.cli')
  local path, rest = cli.recipe_arg('preflight', args, M.usage)
  if not path then
    return rest
  end
  local experiment = require('tp.experiment')
  local exp, err = experiment.load(path)
  if not exp then
    io.stderr:write(string.format('tplua preflight: %s\n', err))
    return 1
  end
  if require('tp.run.campaign').is_campaign(exp) then
    return check_campaign(exp, rest)
  end
  local opts, perr = exp:parse_args(rest)
  if not opts then
    return cli.usage_error('preflight', perr, M.usage)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  local as_json = opts.json
  opts.json = nil
  local plan = exp:plan(opts)
  if not plan.ok then
    require('tp.plan').print(plan, io.stdout, { brief = true })
    io.stdout:write('\nthe plan has errors: fix them first (tplua plan ' .. path .. ')\n')
    return 1
  end
  local platform, why, probe = choose_platform(plan, opts)
  if not platform then
    io.stderr:write('tplua preflight: ' .. why .. '\n')
    return 1
  end
  local preflight = require('tp.run.preflight')
  local report = preflight.check(plan, { platform = platform, probe = probe })
  if as_json then
    io.stdout:write(require('tp.json').encode(report, { pretty = true }), '\n')
  else
    preflight.print(report, io.stdout)
  end
  return report.ok and 0 or 1
end

return M
