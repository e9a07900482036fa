-- tplua run: run the part of a recipe's plan that this machine can run (its own platform),
-- through tp.campaign; no comparison afterwards.
local M = {}

M.summary = "run a recipe's runs for this machine's platform (no analysis)"

M.usage = [[
usage: tplua run RECIPE.lua [flags]

Loads RECIPE.lua, plans it, finds this machine's platform with the GPU probe (nvd on NVIDIA,
amd on AMD) and runs that platform's runs through tp.campaign, writing results under the
results directory. Prints a short plan first. Unlike 'tplua RECIPE.lua' it does not compare
afterwards ('tplua compare DIR' does).

The recipe's flags apply (see 'tplua RECIPE.lua --help'): --iters N, --repeats N,
--results DIR, --only PLATFORM, --launcher local|torchrun|container, --dry-run, --no-prune,
and its own.

  -h, --help  show this help

exit status: 0 when the runs were started and finished, 1 when the plan has errors, the recipe
cannot be loaded, this machine has no GPU of a planned platform, or runs cannot be started;
2 on a usage error.
]]

function M.run(args)
  if #args == 0 then
    return require('tp.cli').usage_error('run', 'no RECIPE given', M.usage)
  end
  if args[1] == '--help' or args[1] == '-h' then
    io.stdout:write(M.usage)
    return 0
  end
  local path = args[1]
  if path:sub(1, 1) == '-' then
    return require('tp.cli').usage_error('run', 'the first argument must be the RECIPE file',
      M.usage)
  end
  local exp, err = require('tp.experiment').load(path)
  if not exp then
    io.stderr:write(string.format('tplua run: %s\n', err))
    return 1
  end
  local rest = table.move(args, 2, #args, 1, {})
  return exp:cli(rest, 'run', 'tplua run ' .. path)
end

return M
