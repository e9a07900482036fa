-- tplua plan: print the plan of a recipe or a config file (YAML, JSON, config.env): every
-- platform's runs with their exact commands, the memory estimate, the findings; nothing starts.
local M = {}

M.summary = 'print the plan of a recipe: runs, exact commands, memory estimate, findings'

M.usage = [[
usage: tplua plan RECIPE.lua|CONFIG.yaml|CONFIG.json|config.env [flags] [--json]

Loads RECIPE.lua (it returns tp.experiment{...}), plans it for every platform (or --only one)
and prints: the effective config, each platform's GPU and framework, the estimate of memory per
GPU, every run with its id and exact command, the sweep points left out and why, and the
findings (errors, warnings, notes). Nothing is started.

A config file is planned the same way, without a recipe: a unified YAML or JSON file (the
fields of a recipe), a tprimat-era config.yaml, or a Primus/tprimat-style config.env (shell
KEY=value lines: MODEL, TP, PP, DP, MBS, GBS, SEQ_LEN, TRAIN_ITERS, LR, PRECISION, ...). The
layouts and the config.env keys: docs/recipes.md "Configs from YAML, JSON and config.env".
With a config file:
  --model ID  the model to plan: one of a tprimat-era file's models (its key or tp.models id),
              or a config.env's model (instead of its MODEL)

The recipe's flags apply (see 'tplua RECIPE.lua --help'): --iters N, --repeats N,
--results DIR, --only PLATFORM, --launcher local|torchrun|ranks|container|slurm, --no-prune,
--profile TOOL[:FIRST-LAST], and its own. A Slurm run shows its batch script in full.
'tplua preflight RECIPE.lua' checks, on the machine that will run it, what the plan cannot
(docs/preflight.md).

A file returning tp.campaign{...} (docs/campaign.md) prints its runs: each exact command and the
files written before it starts (a batch script in full).

  --json      print the plan as JSON (schema tplua.plan/1) instead
  -h, --help  show this help

exit status: 0 when the plan has no error, 1 when it has errors or the file cannot be loaded,
2 on a usage error.
]]

-- A config file rather than a recipe: YAML, JSON or config.env, by its name.
local function is_config(path)
  local low = path:lower()
  return low:match('%.ya?ml$') ~= nil or low:match('%.json$') ~= nil
    or require('tp.plan.config_env').is_env_file(path)
end

-- Removes `--model ID` (or --model=ID) from the flags; returns the id, or nil, a usage error.
local function take_model(rest)
  local model
  local i = 1
  while i <= #rest do
    local v = rest[i]:match('^%-%-model=(.*)$')
    if rest[i] == '--model' then
      v = rest[i + 1]
      if v == nil or v == '' then
        return nil, "option '--model' needs a value"
      end
      table.remove(rest, i)
    end
    if v ~= nil then
      table.remove(rest, i)
      model = v
    else
      i = i + 1
    end
  end
  return model
end

-- The experiment a config file describes (tp.config, tp.config_env), checked as a recipe's is.
-- Notes on config.env keys that are read and not used go to stderr.
local function load_config(path, model)
  local fs = require('tp.fs')
  if fs.is_dir(path) then
    return nil, string.format('%s: is a directory, a config file expected', path)
  end
  local spec, err
  if require('tp.plan.config_env').is_env_file(path) then
    local notes
    spec, notes = require('tp.plan.config_env').load(path, { model = model })
    if not spec then
      return nil, notes
    end
    for _, n in ipairs(notes) do
      io.stderr:write(string.format('tplua plan: note: %s\n', n))
    end
  else
    spec, err = require('tp.plan.config').load(path, { model = model })
    if not spec then
      return nil, (err:gsub('choose one with opts%.model', 'choose one with --model KEY'))
    end
  end
  local ok, exp = pcall(require('tp.experiment').new, spec, { source = path })
  if not ok then
    return nil, path .. ': ' .. tostring(exp):gsub('^[^:]*:%d+: ', '')
  end
  return exp
end

function M.run(args)
  local path, rest = require('tp.cli').recipe_arg('plan', args, M.usage)
  if not path then
    return rest
  end
  local exp, err
  if is_config(path) then
    local model
    model, err = take_model(rest)
    if err then
      return require('tp.cli').usage_error('plan', err, M.usage)
    end
    exp, err = load_config(path, model)
  else
    exp, err = require('tp.experiment').load(path)
  end
  if not exp then
    io.stderr:write(string.format('tplua plan: %s\n', err))
    return 1
  end
  if require('tp.run.campaign').is_campaign(exp) then
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
