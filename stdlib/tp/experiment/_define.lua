-- tp.experiment._define: an experiment's definition checked (misuse raises, naming the recipe
-- field) and made an object; the platforms, launchers and standard flags every experiment has.
local config = require('tp.plan.config')
local methodology = require('tp.plan.methodology')
local sweep = require('tp.plan.sweep')

local M = {}

-- The class of experiment objects; tp.experiment gives it the methods of the other parts.
local Experiment = {}
Experiment.__index = Experiment
M.Experiment = Experiment

--- Platform names and the GPU each uses unless the recipe says otherwise.
M.PLATFORMS = { 'amd', 'nvd' }
M.DEFAULT_HARDWARE = require('tp.analyse.efficiency').PLATFORM_HARDWARE
-- The GPU vendor of each platform (tp.launch's `vendor`).
M.VENDOR = { amd = 'amd', nvd = 'nvidia' }

--- Launchers a run can start under (--launcher).
M.LAUNCHERS = { 'local', 'torchrun', 'ranks', 'container', 'slurm' }

--- The flags every experiment has, besides its own `options`.
M.STANDARD_OPTIONS = {
  iters = { type = 'integer', key = 'training.iters',
            desc = 'training iterations of every run (training.iters)' },
  repeats = { type = 'integer', desc = 'runs of each configuration' },
  results = { type = 'string', desc = 'results directory (runs are written and read there)' },
  only = { type = 'string', desc = 'plan and run one platform only (amd or nvd)' },
  launcher = { type = 'string',
               desc = 'how runs start: local, torchrun, ranks, container or slurm' },
  dry_run = { type = 'boolean', desc = 'print the plan and start nothing' },
  no_prune = { type = 'boolean',
               desc = 'keep sweep points whose memory estimate exceeds the GPU memory' },
  search = { type = 'string',
             desc = "search a sweep instead of running its grid: 'halving', or 'none' (the grid)" },
  concurrency = { type = 'integer',
                  desc = 'runs at once (default 1; with --launcher slurm: jobs in the queue)' },
  skip_preflight = { type = 'boolean',
                     desc = 'start without the preflight checks (the records say so)' },
  profile = { type = 'string',
              desc = 'profile every run: TOOL[:FIRST-LAST] (torch, nsys, rocprofv3) or none' },
}
-- The order in which the usage text lists the standard flags.
M.STANDARD_ORDER = { 'iters', 'repeats', 'results', 'only', 'launcher', 'concurrency',
                         'profile', 'dry_run',
                         'no_prune', 'search', 'skip_preflight' }

-- True when `name` is one of M.LAUNCHERS.
function M.is_launcher(name)
  for _, l in ipairs(M.LAUNCHERS) do
    if l == name then
      return true
    end
  end
  return false
end

-- ---------------------------------------------------------------------------------------------
-- Definition checks (misuse raises, naming the recipe field).

local DEF_FIELDS = {
  stop = 'table',
  search = 'any',
  name = 'string', description = 'string', model = 'any', methodology = 'any',
  platforms = 'table', training = 'table', parallelism = 'table', system = 'table',
  paths = 'table', nodes = 'any', gpus_per_node = 'any', repeats = 'integer', sweep = 'any',
  options = 'table', results = 'string', recorded = 'string', launcher = 'string',
  timeout = 'number', torchrun = 'table', container = 'table', slurm = 'table',
  profile = 'any', history = 'string',
}

local PLATFORM_FIELDS = {
  stop = 'table',
  search = 'any',
  framework = 'string', hardware = 'string', training = 'table', parallelism = 'table',
  system = 'table', paths = 'table', nodes = 'any', gpus_per_node = 'any', env = 'table',
  sweep = 'any', torchrun = 'table', container = 'table', timeout = 'number', slurm = 'table',
  profile = 'any',
}

local OPTION_TYPES = { integer = true, number = true, string = true, boolean = true }

local function fail(name, fmt, ...)
  local msg = string.format(fmt, ...)
  error(string.format("experiment '%s': %s", name or '?', msg), 0)
end

local function check_fields(name, t, fields, where)
  for _, k in ipairs(config.sorted_keys(t)) do
    local want = fields[k]
    if not want then
      local known = config.sorted_keys(fields)
      fail(name, "%s%s: unknown field (known: %s)", where, tostring(k), table.concat(known, ', '))
    end
    local v = t[k]
    if want == 'integer' then
      if math.type(v) ~= 'integer' or v < 1 then
        fail(name, '%s%s: positive integer expected, got %s', where, k, config.show(v))
      end
    elseif want ~= 'any' and type(v) ~= want then
      fail(name, '%s%s: %s expected, got %s %s', where, k, want, type(v), config.show(v))
    end
  end
end

local function as_sweep(name, v, where)
  if v == nil then
    return nil
  end
  if sweep.is_sweep(v) then
    return v
  end
  if type(v) == 'table' then
    local ok, s = pcall(sweep.new, v)
    if not ok then
      fail(name, '%ssweep: %s', where, tostring(s):gsub('^tp%.sweep: ', ''))
    end
    return s
  end
  fail(name, '%ssweep: tp.sweep{...} or a sweep spec table expected, got %s', where, type(v))
end

-- The `stop` field (tp.run.stop_rule, docs/stopping.md): the rule with its defaults, or nil.
local function as_stop(name, v, where)
  if v == nil then
    return nil
  end
  local ok, rule = pcall(require('tp.run').stop_rule, v, where)
  if not ok then
    fail(name, '%s', tostring(rule))
  end
  return rule
end

-- The `search` field (tp.plan.search.normalize; docs/search.md): the spec with its defaults, or
-- nil when absent.
local function as_search(name, v, where)
  if v == nil then
    return nil
  end
  local ok, s = pcall(require('tp.plan.search').normalize, v)
  if not ok then
    fail(name, '%ssearch: %s', where, tostring(s):gsub('^tp%.plan%.search: ', ''))
  end
  return s
end

-- The `profile` field (tp.profile.normalize): {tool, steps?}, false, or nil when absent.
local function as_profile(name, v, where)
  if v == nil then
    return nil
  end
  local p, err = require('tp.plan.profile').normalize(v)
  if p == nil then
    fail(name, '%sprofile: %s', where, err)
  end
  return p
end

-- The unified-config part of a table (model, training, parallelism, system, paths, nodes,
-- gpus_per_node).
local function unified_part(t)
  local out = {}
  for _, k in ipairs({ 'model', 'training', 'parallelism', 'system', 'paths', 'nodes',
    'gpus_per_node' }) do
    if t[k] ~= nil then
      out[k] = config.copy(t[k])
    end
  end
  return out
end

local function check_options(name, options)
  local out = {}
  for _, k in ipairs(config.sorted_keys(options or {})) do
    local o = options[k]
    if type(k) ~= 'string' or not k:match('^[%a][%w_]*$') then
      fail(name, 'options: option names must be identifiers, got %s', config.show(k))
    end
    if M.STANDARD_OPTIONS[k] then
      fail(name, "options.%s: '--%s' is a standard flag; choose another name", k,
        k:gsub('_', '-'))
    end
    if type(o) ~= 'table' then
      fail(name, 'options.%s: table {desc =, default =, type =, key = | apply =} expected', k)
    end
    for f in pairs(o) do
      if f ~= 'desc' and f ~= 'default' and f ~= 'type' and f ~= 'key' and f ~= 'apply' then
        fail(name, "options.%s: unknown field '%s' (desc, default, type, key, apply)", k,
          tostring(f))
      end
    end
    if type(o.desc) ~= 'string' then
      fail(name, 'options.%s.desc: string expected', k)
    end
    local kind = o.type
    if kind == nil then
      kind = math.type(o.default) or type(o.default)
      if kind == 'float' then
        kind = 'number'
      end
    end
    if not OPTION_TYPES[kind] then
      fail(name, 'options.%s: give type (integer, number, string, boolean) or a default', k)
    end
    if o.key ~= nil and not config.KEYS[o.key] then
      fail(name, "options.%s.key: '%s' is not a unified key path", k, tostring(o.key))
    end
    if o.apply ~= nil and type(o.apply) ~= 'function' then
      fail(name, 'options.%s.apply: function(config, value, platform) expected', k)
    end
    if o.key == nil and o.apply == nil then
      fail(name, 'options.%s: give key (a unified key path) or apply (a function)', k)
    end
    out[k] = { desc = o.desc, default = o.default, type = kind, key = o.key, apply = o.apply }
  end
  return out
end

--- Creates an experiment from a definition without running it (tp.experiment{...} and
--- tp.experiment.main{...} run it when the recipe is the main script). Raises
--- "experiment '<name>': <key path>: <problem>" on a malformed definition, on config values of the
--- wrong type, and on a per-platform override of a key the methodology fixes (with both values).
---@param def table the experiment definition (docs/recipes.md)
---@param meta? {source?: string} the recipe file, for relative `recorded` paths
---@return table experiment
function M.new(def, meta)
  if type(def) ~= 'table' then
    error('tp.experiment: definition table expected, got ' .. type(def), 2)
  end
  if getmetatable(def) == Experiment then
    return def
  end
  local name = def.name
  if type(name) ~= 'string' or name == '' then
    error('tp.experiment: name: non-empty string expected', 2)
  end
  check_fields(name, def, DEF_FIELDS, '')
  if def.model == nil then
    fail(name, 'model: required (a tp.models id such as llama3.1-8b, or a model row)')
  end
  if type(def.platforms) ~= 'table' or next(def.platforms) == nil then
    fail(name, 'platforms: at least one platform expected (amd = { framework = ... }, nvd = ...)')
  end
  local m_spec = def.methodology or 'identical_config'
  local meth
  if type(m_spec) == 'string' then
    local err
    meth, err = methodology.get(m_spec)
    if not meth then
      fail(name, 'methodology: %s', err:gsub('^methodology: ', ''))
    end
  elseif type(m_spec) == 'table' and type(m_spec.fixed) == 'table' then
    meth = m_spec
  else
    fail(name, 'methodology: a name or a tp.methodology.define{...} result expected')
  end

  local common = unified_part(def)
  for _, f in ipairs(config.check_types(common)) do
    fail(name, '%s', f.message)
  end
  local platforms = {}
  for _, p in ipairs(config.sorted_keys(def.platforms)) do
    local pd = def.platforms[p]
    local where = string.format('platforms.%s.', tostring(p))
    if not (p == 'amd' or p == 'nvd') then
      fail(name, "platforms.%s: unknown platform (amd, nvd)", tostring(p))
    end
    if type(pd) ~= 'table' then
      fail(name, '%s: table expected', where:sub(1, -2))
    end
    check_fields(name, pd, PLATFORM_FIELDS, where)
    if type(pd.framework) ~= 'string' then
      fail(name, '%sframework: required (megatron, primus, nemo, torchtitan)', where)
    end
    local ok_fw, fw_err = require('tp.frameworks').get(pd.framework)
    if not ok_fw then
      fail(name, '%sframework: %s', where, fw_err:gsub('^frameworks: ', ''))
    end
    local hw = pd.hardware or M.DEFAULT_HARDWARE[p]
    local row, hw_err = require('tp.catalog.hardware').get(hw)
    if not row then
      fail(name, '%shardware: %s', where, hw_err:gsub('^hardware: ', ''))
    end
    local over = unified_part(pd)
    over.model = nil
    for _, f in ipairs(config.check_types(over, { prefix = where:sub(1, -2) })) do
      fail(name, '%s', f.message)
    end
    for k, v in pairs(pd.env or {}) do
      if type(k) ~= 'string' or type(v) ~= 'string' then
        fail(name, '%senv: must map names to strings', where)
      end
    end
    platforms[p] = {
      framework = pd.framework,
      hardware = row,
      overrides = over,
      env = pd.env,
      sweep = as_sweep(name, pd.sweep, where),
      search = as_search(name, pd.search, where),
      torchrun = pd.torchrun,
      container = pd.container,
      slurm = pd.slurm,
      timeout = pd.timeout,
      stop = as_stop(name, pd.stop, where),
      profile = as_profile(name, pd.profile, where),
    }
  end
  local overrides = {}
  for p, pd in pairs(platforms) do
    overrides[p] = pd.overrides
  end
  local errs = methodology.check_overrides(meth, common, overrides)
  if #errs > 0 then
    fail(name, '%s', table.concat(errs, '; '))
  end
  if def.launcher ~= nil then
    if not M.is_launcher(def.launcher) then
      fail(name, "launcher: '%s' is not one of %s", def.launcher, table.concat(M.LAUNCHERS, ', '))
    end
  end
  local source = meta and meta.source
  return setmetatable({
    name = name,
    description = def.description,
    methodology = meth,
    common = common,
    platforms = platforms,
    repeats = def.repeats,
    sweep = as_sweep(name, def.sweep, ''),
    search = as_search(name, def.search, ''),
    options = check_options(name, def.options),
    results = def.results,
    recorded = def.recorded,
    launcher = def.launcher,
    timeout = def.timeout,
    stop = as_stop(name, def.stop, ''),
    torchrun = def.torchrun,
    container = def.container,
    slurm = def.slurm,
    profile = as_profile(name, def.profile, ''),
    history = def.history,
    source = source,
  }, Experiment)
end

--- Returns true when `v` is an experiment object.
---@param v any
---@return boolean
function M.is_experiment(v)
  return getmetatable(v) == Experiment
end

return M
