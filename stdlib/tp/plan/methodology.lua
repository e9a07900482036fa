-- tp.methodology: what makes a cross-platform comparison fair. A methodology names the unified
-- key paths that must be equal on every platform (`fixed`; the `algorithmic` ones change what
-- is computed) and those each platform may tune (`free`). Two are built in:
--   identical_config     the algorithmic keys and the parallelism equal everywhere
--   maximum_performance  the algorithmic keys equal; system keys (parallelism, micro-batch,
--                        recompute, fusions, attention backend, fp8 recipe) tuned per platform
-- and users define their own with tp.methodology.define{...}. See docs/recipes.md.
local keys = require('tp.plan._keys')

local M = {}

-- Keys that change the computation itself: data, initialisation, schedule, batch, optimizer,
-- numerics. A platform that changes one of them trains a different model.
local ALGORITHMIC = {
  'model', 'training.seed', 'training.dataset', 'training.tokenizer', 'training.lr',
  'training.min_lr', 'training.warmup', 'training.decay', 'training.weight_decay',
  'training.beta1', 'training.beta2', 'training.eps', 'training.grad_clip', 'training.gbs',
  'training.seq_len', 'training.iters', 'training.precision', 'training.init_std',
}

local PARALLELISM = {
  'parallelism.tp', 'parallelism.pp', 'parallelism.cp', 'parallelism.dp', 'parallelism.ep',
  'parallelism.sequence_parallel', 'parallelism.distributed_optimizer',
}

local SYSTEM = {
  'system.recompute', 'system.attention', 'system.fused_kernels', 'system.cuda_graphs',
}

local function concat(...)
  local out = {}
  for _, list in ipairs({ ... }) do
    for _, v in ipairs(list) do
      out[#out + 1] = v
    end
  end
  return out
end

local registry = {}
local order = {}

local function copy_list(t)
  local out = {}
  for i, v in ipairs(t) do
    out[i] = v
  end
  return out
end

local function public(m)
  return {
    name = m.name,
    description = m.description,
    algorithmic = copy_list(m.algorithmic),
    fixed = copy_list(m.fixed),
    free = copy_list(m.free),
  }
end

-- Expands 'section.*' and checks every path against the unified keys (tp.config.KEYS).
local function expand_paths(list, field, name)
  local known = keys.KEYS
  if type(list) ~= 'table' then
    error(string.format("tp.methodology.define: '%s': %s must be a list of key paths, got %s",
      name, field, type(list)), 4)
  end
  local out, seen = {}, {}
  for i, path in ipairs(list) do
    if type(path) ~= 'string' then
      error(string.format("tp.methodology.define: '%s': %s[%d] must be a key path string", name,
        field, i), 4)
    end
    local section = path:match('^([%w_]+)%.%*$')
    local matched = {}
    if section then
      for k in pairs(known) do
        if k:sub(1, #section + 1) == section .. '.' then
          matched[#matched + 1] = k
        end
      end
      table.sort(matched)
    elseif known[path] then
      matched[1] = path
    end
    if #matched == 0 then
      error(string.format("tp.methodology.define: '%s': %s[%d]: '%s' is not a unified key path "
        .. "(e.g. 'training.lr', 'system.*')", name, field, i, path), 4)
    end
    for _, k in ipairs(matched) do
      if not seen[k] then
        seen[k] = true
        out[#out + 1] = k
      end
    end
  end
  return out
end

local function register(def, replace)
  if type(def) ~= 'table' then
    error('tp.methodology.define: definition table expected, got ' .. type(def), 3)
  end
  for k in pairs(def) do
    if k ~= 'name' and k ~= 'description' and k ~= 'fixed' and k ~= 'free'
      and k ~= 'algorithmic' then
      error(string.format("tp.methodology.define: unknown field '%s' (name, description, fixed, "
        .. 'free, algorithmic)', tostring(k)), 3)
    end
  end
  local name = def.name
  if type(name) ~= 'string' or not name:match('^[%a_][%w_%-]*$') then
    error('tp.methodology.define: name must be an identifier-like string, got '
      .. tostring(name), 3)
  end
  if registry[name] and not replace then
    error(string.format("tp.methodology.define: '%s' is already defined", name), 3)
  end
  if def.description ~= nil and type(def.description) ~= 'string' then
    error(string.format("tp.methodology.define: '%s': description must be a string", name), 3)
  end
  local fixed = expand_paths(def.fixed or {}, 'fixed', name)
  local free = expand_paths(def.free or {}, 'free', name)
  local in_fixed = {}
  for _, k in ipairs(fixed) do
    in_fixed[k] = true
  end
  for _, k in ipairs(free) do
    if in_fixed[k] then
      error(string.format("tp.methodology.define: '%s': '%s' is both fixed and free", name, k),
        3)
    end
  end
  local algorithmic
  if def.algorithmic then
    algorithmic = expand_paths(def.algorithmic, 'algorithmic', name)
    for _, k in ipairs(algorithmic) do
      if not in_fixed[k] then
        error(string.format("tp.methodology.define: '%s': algorithmic key '%s' must also be "
          .. 'fixed', name, k), 3)
      end
    end
  else
    algorithmic = {}
    for _, k in ipairs(ALGORITHMIC) do
      if in_fixed[k] then
        algorithmic[#algorithmic + 1] = k
      end
    end
  end
  if not registry[name] then
    order[#order + 1] = name
  end
  registry[name] = {
    name = name,
    description = def.description or '',
    algorithmic = algorithmic,
    fixed = fixed,
    free = free,
  }
  return public(registry[name])
end

--- Defines a methodology. `fixed` and `free` are lists of unified key paths ('training.lr') or
--- whole sections ('system.*'); `algorithmic` (default: the fixed keys among the built-in
--- algorithmic list) says which fixed keys change the computation. Keys in neither list are
--- not compared. Raises on unknown key paths, a key both fixed and free, or a name already
--- defined.
---```lua
---tp.methodology.define {
---  name = 'same_batch', description = 'same data and batch, everything else free',
---  fixed = { 'model', 'training.seed', 'training.dataset', 'training.gbs', 'training.seq_len' },
---  free = { 'parallelism.*', 'system.*', 'training.mbs' },
---}
---```
---@param def {name: string, description?: string, fixed: string[], free?: string[],
---  algorithmic?: string[]}
---@return table methodology a copy of the stored definition
function M.define(def)
  return register(def, false)
end

register({
  name = 'identical_config',
  description = 'the algorithmic keys (seed, data and tokenizer, LR schedule, batch sizes, '
    .. 'sequence length, iterations, optimizer, precision, init std) and the parallelism are '
    .. 'equal on every platform',
  algorithmic = concat(ALGORITHMIC, { 'training.mbs', 'training.fp8_recipe' }),
  fixed = concat(ALGORITHMIC, { 'training.mbs', 'training.fp8_recipe' }, PARALLELISM,
    { 'nodes', 'gpus_per_node' }),
  free = concat(SYSTEM, { 'training.log_interval' }),
}, false)

register({
  name = 'maximum_performance',
  description = 'the algorithmic keys are equal; system keys (parallelism, micro-batch, '
    .. 'recompute, fusions, attention backend, fp8 recipe) are tuned per platform, each '
    .. "platform's best found by a sweep",
  algorithmic = ALGORITHMIC,
  fixed = concat(ALGORITHMIC, { 'nodes', 'gpus_per_node' }),
  free = concat(PARALLELISM, SYSTEM, { 'training.mbs', 'training.fp8_recipe',
    'training.log_interval' }),
}, false)

--- Returns a copy of methodology `name`, or nil, message, 'ENOENT'.
---@param name string
---@return table|nil methodology {name=, description=, algorithmic=, fixed=, free=}
---@return string? err
---@return string? code
function M.get(name)
  if type(name) ~= 'string' then
    error('tp.methodology.get: name must be a string, got ' .. type(name), 2)
  end
  local m = registry[name]
  if not m then
    return nil, string.format("methodology: unknown methodology '%s' (known: %s)", name,
      table.concat(order, ', ')), 'ENOENT'
  end
  return public(m)
end

--- Lists the defined methodology names, built-ins first.
---@return string[]
function M.list()
  return copy_list(order)
end

--- Compares two values of a config deeply (numbers by value, tables key by key); the same
--- function as tp.plan._keys.equal, which tp.config uses too.
M.equal = keys.equal

local show = keys.show

local function model_value(v)
  if type(v) == 'table' then
    return v.id
  end
  return v
end

local function resolve(m)
  if type(m) == 'string' then
    local got, err = M.get(m)
    if not got then
      error('tp.methodology: ' .. err, 3)
    end
    return got
  elseif type(m) == 'table' and type(m.fixed) == 'table' then
    return m
  end
  error('tp.methodology: methodology name or table expected, got ' .. type(m), 3)
end

--- Checks the effective configs of the platforms against a methodology. Returns findings
--- `{severity, key, message, values = {platform = value}}`: an 'error' for each fixed key whose
--- values differ, an 'info' for each free key that is tuned per platform.
---```lua
---local findings = tp.methodology.check('identical_config', { amd = cfg_a, nvd = cfg_n })
---```
---@param m string|table methodology name or table
---@param configs_by_platform table<string, table> platform -> unified config (defaults filled)
---@return table[] findings
function M.check(m, configs_by_platform)
  m = resolve(m)
  if type(configs_by_platform) ~= 'table' then
    error('tp.methodology.check: configs_by_platform must be a table', 2)
  end
  local names = keys.sorted_keys(configs_by_platform)
  local findings = {}
  local function compare(path)
    local values, first, differ = {}, nil, false
    for i, p in ipairs(names) do
      local v = keys.get(configs_by_platform[p], path)
      if path == 'model' then
        v = model_value(v)
      end
      values[p] = v
      if i == 1 then
        first = v
      elseif not M.equal(v, first) then
        differ = true
      end
    end
    return differ, values
  end
  local function listing(values)
    local parts = {}
    for _, p in ipairs(names) do
      parts[#parts + 1] = string.format('%s = %s', p, values[p] == nil and 'unset'
        or show(values[p]))
    end
    return table.concat(parts, ', ')
  end
  for _, path in ipairs(m.fixed) do
    local differ, values = compare(path)
    if differ then
      findings[#findings + 1] = {
        severity = 'error', key = path, values = values,
        message = string.format('%s differs across platforms (%s); %s fixes it', path,
          listing(values), m.name or 'the methodology'),
      }
    end
  end
  for _, path in ipairs(m.free) do
    local differ, values = compare(path)
    if differ then
      findings[#findings + 1] = {
        severity = 'info', key = path, values = values,
        message = string.format('%s tuned per platform (%s)', path, listing(values)),
      }
    end
  end
  return findings
end

--- Checks per-platform overrides at experiment creation: an override of a fixed key by any
--- platform is an error naming the key path, the experiment's value and the platform's.
--- Returns a list of messages (empty when none).
---@param m string|table
---@param common table the experiment's common unified config
---@param overrides table<string, table> platform -> its override table (unified layout)
---@return string[] errors
function M.check_overrides(m, common, overrides)
  m = resolve(m)
  local errors = {}
  for _, p in ipairs(keys.sorted_keys(overrides)) do
    for _, path in ipairs(m.fixed) do
      local over = keys.get(overrides[p], path)
      if over ~= nil then
        local base = keys.get(common, path)
        if not M.equal(model_value(over), model_value(base)) then
          errors[#errors + 1] = string.format('platforms.%s.%s: %s fixes %s on every platform '
            .. '(experiment: %s, %s: %s)', p, path, m.name or 'the methodology', path,
            base == nil and 'unset' or show(base), p, show(over))
        end
      end
    end
  end
  return errors
end

return M
