-- tplua plan: print the plan of a recipe (every platform's runs with their exact commands, the
-- memory estimate, the findings) without starting anything.
local M = {}

M.summary = 'print the plan of a recipe: runs, exact commands, memory estimate, findings'

M.usage = [[
usage: tplua plan RECIPE.lua [flags] [--json]

Loads RECIPE.lua (it returns tp.experiment{...}), plans it for every platform (or --only one)
and prints: the effective config, each platform's GPU and framework, the estimate of memory per
GPU, every run with its id and exact command, the sweep points left out and why, and the
findings (errors, warnings, notes). Nothing is started.

The recipe's flags apply (see 'tplua RECIPE.lua --help'): --iters N, --repeats N,
--results DIR, --only PLATFORM, --launcher local|torchrun|ranks|container|slurm, --no-prune,
and its own. A Slurm run shows its batch script in full.

A file returning tp.campaign{...} (docs/campaign.md) prints its runs: each exact command and the
files written before it starts (a batch script in full).

  --json      print the plan as JSON (schema tplua.plan/1) instead
  -h, --help  show this help

exit status: 0 when the plan has no error, 1 when it has errors or the recipe cannot be loaded,
2 on a usage error.
]]

function M.run(args)
  if #args == 0 then
    return require('tp.cli').usage_error('plan', 'no RECIPE given', M.usage)
  end
  if args[1] == '--help' or args[1] == '-h' then
    io.stdout:write(M.usage)
    return 0
  end
  local path = args[1]
  if path:sub(1, 1) == '-' then
    return require('tp.cli').usage_error('plan', 'the first argument must be the RECIPE file',
      M.usage)
  end
  local experiment = require('tp.experiment')
  local exp, err = experiment.load(path)
  if not exp then
    io.stderr:write(string.format('tplua plan: %s\n', err))
    return 1
  end
  local rest = table.move(args, 2, #args, 1, {})
  if require('tp.campaign').is_campaign(exp) then
    if #rest > 0 then
      return require('tp.cli').usage_error('plan', 'a campaign file takes no flags: '
        .. rest[1], M.usage)
    end
    require('tp.plan').print_campaign(exp, io.stdout)
    return 0
  end
  return exp:cli(rest, 'plan', 'tplua plan ' .. path)
end

return M
