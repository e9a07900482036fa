-- tp.experiment: the recipe entry point. `tp.experiment{...}` checks an experiment definition
-- (model x platforms x frameworks x methodology x sweep x repeats), and when the recipe is the
-- main script (`tplua recipe.lua [flags]`) it runs itself: it plans, runs what this machine
-- can run (its own platform, found by tp.gpu.probe) through tp.campaign, then compares with the
-- results the results directory holds. `tplua plan RECIPE` and `tplua run RECIPE` load the same
-- file through tp.experiment.load and do one phase each. docs/recipes.md is the guide.
--
-- This file is the public face and keeps the entry points (caller() must run here); the parts
-- hold the rest: _define (definition checks, constants), _paths, _plan, _execute, _summary and
-- _analyse (the phases), _cli (flags and the command line).
local define = require('tp.experiment._define')
local paths = require('tp.experiment._paths')
local run = require('tp.experiment._execute')
local summary = require('tp.experiment._summary')
local analysis = require('tp.experiment._analyse')
local cli = require('tp.experiment._cli')
local searching = require('tp.experiment._search')

local M = {}

-- Platforms with their default GPU, launchers, standard flags (tp.experiment._define).
M.PLATFORMS = define.PLATFORMS
M.DEFAULT_HARDWARE = define.DEFAULT_HARDWARE
M.LAUNCHERS = define.LAUNCHERS
M.STANDARD_OPTIONS = define.STANDARD_OPTIONS

M.absolute = paths.absolute
M.new = define.new
M.is_experiment = define.is_experiment
M.local_platform = run.local_platform
M.slurm_platform = run.slurm_platform
M.campaign_runs = run.campaign_runs
M.with_analysis = run.with_analysis
M.execute = run.execute
M.add_to_history = run.add_to_history
M.history_hook = run.history_hook
M.load_results = summary.load_results
M.summarize = summary.summarize
M.print_summary = summary.print_summary
M.best_per_platform = summary.best_per_platform

-- The methods of experiment objects.
local Experiment = define.Experiment
Experiment.flag_spec = cli.flag_spec
Experiment.usage = cli.usage
Experiment.parse_args = cli.parse_args
Experiment.plan = searching.plan  -- planning.plan, with a searching platform's rung 0 and rungs
Experiment.results_source = analysis.results_source
Experiment.analyse = analysis.analyse
Experiment.cli = cli.cli

-- Depth of tp.experiment.load calls in progress: while > 0, experiments never run themselves.
local loading = 0

-- ---------------------------------------------------------------------------------------------
-- Entry points.

local function same_file(a, b)
  if a == nil or b == nil then
    return false
  end
  if a == b then
    return true
  end
  local fs = require('tp.fs')
  local ra, rb = fs.realpath(a), fs.realpath(b)
  return ra ~= nil and ra == rb
end

local function script_args()
  local out = {}
  local a = rawget(_G, 'arg')
  if type(a) == 'table' then
    for i = 1, #a do
      out[i] = a[i]
    end
  end
  return out
end

-- Finds who called into this module: returns is_main (the caller is the main script, arg[0])
-- and the caller's file when known. A recipe usually ends with `return tp.experiment.main{...}`,
-- a tail call that removes its own frame: then the caller counts as the main script when
-- nothing but C frames (the host) lies below, and arg[0] names a .lua file.
local function caller()
  local a = rawget(_G, 'arg')
  local script = type(a) == 'table' and type(a[0]) == 'string' and a[0]:match('%.lua$')
    and a[0] or nil
  local this = debug.getinfo(1, 'S').source
  local level = 2
  local tail = false
  while true do
    local info = debug.getinfo(level, 'St')
    if not info then
      return tail and script ~= nil, tail and script or nil
    end
    if info.source == this then
      tail = info.istailcall
    elseif tail then
      -- Our outermost frame was tail-called, so the caller's frame is gone: it was the main
      -- chunk when nothing but C frames (the host) lies below.
      local l = level
      while true do
        local below = debug.getinfo(l, 'S')
        if not below then
          return script ~= nil, script
        end
        if below.what ~= 'C' then
          return false, nil
        end
        l = l + 1
      end
    elseif info.what == 'C' then
      return false, nil
    else
      local file = info.source:sub(1, 1) == '@' and info.source:sub(2) or nil
      return script ~= nil and same_file(file, script), file
    end
    level = level + 1
  end
end

-- The shared body of tp.experiment{...} and tp.experiment.main{...}.
local function main_at(def)
  local is_main, source = caller()
  local ok, exp = pcall(M.new, def, { source = source })
  if loading > 0 or not is_main then
    if not ok then
      error(exp, 0)
    end
    return exp
  end
  if not ok then
    io.stderr:write(string.format('%s: %s\n', source, tostring(exp)))
    io.stdout:flush()
    os.exit(1, true)
  end
  local code = exp:cli(script_args(), 'all', 'tplua ' .. source)
  io.stdout:flush()
  if code ~= 0 then
    os.exit(code, true)
  end
  return exp
end

--- Creates the experiment and, when the calling recipe is the main script (`tplua recipe.lua
--- [flags]`, i.e. the recipe file is `arg[0]`) and no tp.experiment.load is in progress, runs
--- it: plan, run this machine's platform, analyse; the process exits with the status when it is
--- not 0. Otherwise it only returns the experiment, so `tplua plan recipe.lua` and specs can
--- load the same file. `tp.experiment{...}` does the same.
---```lua
---local tp = require('tp')
---return tp.experiment.main {
---  name = 'llama3.1-8b, identical config', model = 'llama3.1-8b',
---  methodology = 'identical_config',
---  platforms = { amd = { framework = 'primus' }, nvd = { framework = 'megatron' } },
---  training = { seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500, lr = 3e-4 },
---  parallelism = { tp = 1, pp = 1, dp = 8 },
---  repeats = 3,
---}
---```
---@param def table
---@return table experiment
function M.main(def)
  local exp = main_at(def)  -- not a tail call: caller() needs this frame
  return exp
end

setmetatable(M, {
  __call = function(_, def)
    local exp = main_at(def)
    return exp
  end,
})

--- Loads a recipe file without running it: the file's chunk is executed with tp.experiment in
--- loading mode and must return an experiment (or an experiment definition table). Returns the
--- experiment, or nil, '<path>: <message>', code ('ENOENT', 'EPARSE', 'EINVAL').
---```lua
---local exp = assert(tp.experiment.load('recipes/llama_identical.lua'))
---local plan = exp:plan({ iters = 10 })
---```
---@param path string
---@return table|nil experiment
---@return string? err
---@return string? code
function M.load(path)
  if type(path) ~= 'string' then
    error('tp.experiment.load: path must be a string, got ' .. type(path), 2)
  end
  local fs = require('tp.fs')
  if not fs.exists(path) then
    return nil, string.format('%s: no such file', path), 'ENOENT'
  end
  if fs.is_dir(path) then
    return nil, string.format('%s: is a directory, a recipe file expected', path), 'EINVAL'
  end
  local chunk, err = loadfile(path)
  if not chunk then
    return nil, tostring(err), 'EPARSE'
  end
  loading = loading + 1
  local ok, result = pcall(chunk)
  loading = loading - 1
  if not ok then
    local msg = tostring(result)
    if not msg:find(path, 1, true) then
      msg = path .. ': ' .. msg
    end
    return nil, msg, 'EINVAL'
  end
  if require('tp.run.campaign').is_campaign(result) then
    return result  -- a campaign file: tplua run executes it as is
  end
  if M.is_experiment(result) then
    if result.source == nil then
      result.source = path
    end
    return result
  end
  if type(result) == 'table' and result.name then
    local okn, exp = pcall(M.new, result, { source = path })
    if not okn then
      return nil, path .. ': ' .. tostring(exp), 'EINVAL'
    end
    return exp
  end
  return nil, string.format('%s: the recipe must return tp.experiment{...} (it returned %s)',
    path, type(result)), 'EINVAL'
end

return M
