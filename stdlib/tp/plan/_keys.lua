-- tp.plan._keys: the unified config's key paths, kinds and enumerations, and the small table
-- helpers over them (deep copy, dotted get/set, merge, flatten, show, deep equal) that tp.config
-- and tp.methodology share.
local M = {}

--- The unified key paths and their kinds ('integer', 'number', 'string', 'boolean', 'dataset',
--- 'model'). `training.ga` (gradient-accumulation steps) is checked here and dropped before a
--- framework adapter sees the config: adapters derive it from gbs / (mbs x dp).
M.KEYS = {
  model = 'model',
  nodes = 'integer',
  gpus_per_node = 'integer',
  ['training.seed'] = 'integer',
  ['training.mbs'] = 'integer',
  ['training.gbs'] = 'integer',
  ['training.ga'] = 'integer',
  ['training.seq_len'] = 'integer',
  ['training.iters'] = 'integer',
  ['training.lr'] = 'number',
  ['training.min_lr'] = 'number',
  ['training.warmup'] = 'integer',
  ['training.decay'] = 'string',
  ['training.weight_decay'] = 'number',
  ['training.beta1'] = 'number',
  ['training.beta2'] = 'number',
  ['training.eps'] = 'number',
  ['training.grad_clip'] = 'number',
  ['training.precision'] = 'string',
  ['training.fp8_recipe'] = 'string',
  ['training.dataset'] = 'dataset',
  ['training.tokenizer'] = 'string',
  ['training.init_std'] = 'number',
  ['training.log_interval'] = 'integer',
  ['parallelism.tp'] = 'integer',
  ['parallelism.pp'] = 'integer',
  ['parallelism.cp'] = 'integer',
  ['parallelism.dp'] = 'integer',
  ['parallelism.ep'] = 'integer',
  ['parallelism.sequence_parallel'] = 'boolean',
  ['parallelism.distributed_optimizer'] = 'boolean',
  ['system.recompute'] = 'string',
  ['system.attention'] = 'string',
  ['system.fused_kernels'] = 'boolean',
  ['system.cuda_graphs'] = 'boolean',
  ['paths.framework_dir'] = 'string',
  ['paths.data'] = 'string',
  ['paths.output'] = 'string',
  ['paths.checkpoints'] = 'string',
}

--- Allowed values of the enumerated keys (docs/frameworks.md).
M.ENUMS = {
  ['training.decay'] = { 'cosine', 'linear', 'constant' },
  ['training.precision'] = { 'bf16', 'fp16', 'fp8' },
  ['training.fp8_recipe'] = { 'delayed', 'tensorwise', 'blockwise', 'mxfp8' },
  ['system.recompute'] = { 'none', 'selective', 'full' },
  ['system.attention'] = { 'flash', 'fused', 'auto' },
}

--- The sections of the unified config.
M.SECTIONS = { 'training', 'parallelism', 'system', 'paths' }

--- Default GPU count per node when a config does not say.
M.DEFAULT_GPUS_PER_NODE = 8

-- ---------------------------------------------------------------------------------------------
-- Small table helpers.

--- Returns a deep copy of a value (tables copied recursively; metatables dropped).
---@param v any
---@return any
function M.copy(v)
  if type(v) ~= 'table' then
    return v
  end
  local out = {}
  for k, x in pairs(v) do
    out[k] = M.copy(x)
  end
  return out
end

--- Returns the value at a dotted key path ('training.lr'), or nil.
---```lua
---tp.config.get({ training = { lr = 3e-4 } }, 'training.lr')  --> 0.0003
---```
---@param t table
---@param path string
---@return any
function M.get(t, path)
  local v = t
  for part in path:gmatch('[^.]+') do
    if type(v) ~= 'table' then
      return nil
    end
    v = v[part]
  end
  return v
end

--- Sets the value at a dotted key path, creating the tables on the way.
---@param t table
---@param path string
---@param value any
function M.set(t, path, value)
  local parts = {}
  for part in path:gmatch('[^.]+') do
    parts[#parts + 1] = part
  end
  local v = t
  for i = 1, #parts - 1 do
    if type(v[parts[i]]) ~= 'table' then
      v[parts[i]] = {}
    end
    v = v[parts[i]]
  end
  v[parts[#parts]] = value
end

--- Returns `base` deep-merged with `over` (a new table; `over` wins; tables merge key by key,
--- except `training.dataset` and `model`, which are replaced whole).
---@param base table
---@param over table|nil
---@return table
function M.merge(base, over)
  local out = M.copy(base or {})
  local function walk(dst, src, prefix)
    for k, v in pairs(src) do
      local path = prefix and (prefix .. '.' .. k) or k
      if type(v) == 'table' and type(dst[k]) == 'table' and path ~= 'training.dataset'
        and path ~= 'model' then
        walk(dst[k], v, path)
      else
        dst[k] = M.copy(v)
      end
    end
  end
  walk(out, over or {}, nil)
  return out
end

--- Flattens the unified keys of a config into { ['training.lr'] = 3e-4, ... } (only the keys of
--- M.KEYS that are set).
---@param t table
---@return table<string, any>
function M.flatten(t)
  local out = {}
  for path in pairs(M.KEYS) do
    local v = M.get(t, path)
    if v ~= nil then
      out[path] = v
    end
  end
  return out
end

--- Returns the sorted list of keys of a table.
---@param t table
---@return string[]
function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do
    keys[#keys + 1] = k
  end
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  return keys
end

--- Formats a value for a message: strings quoted, numbers as Lua prints them, tables by shape.
---@param v any
---@return string
function M.show(v)
  if type(v) == 'string' then
    return string.format('%q', v):gsub('\\\n', '\\n')
  elseif type(v) == 'table' then
    if v.id then
      return tostring(v.id)
    end
    if v.path then
      return string.format('{ path = %q }', v.path)
    end
    return 'table'
  elseif type(v) == 'number' and v ~= v then
    return 'nan'
  end
  return tostring(v)
end

--- True when `v` is an element of the list.
---@param list any[]
---@param v any
---@return boolean
function M.contains(list, v)
  for _, x in ipairs(list) do
    if x == v then
      return true
    end
  end
  return false
end

--- Compares two values of a config deeply (numbers by value, tables key by key).
---@param a any
---@param b any
---@return boolean
function M.equal(a, b)
  if type(a) ~= type(b) then
    return false
  end
  if type(a) ~= 'table' then
    return a == b
  end
  for k, v in pairs(a) do
    if not M.equal(v, b[k]) then
      return false
    end
  end
  for k in pairs(b) do
    if a[k] == nil then
      return false
    end
  end
  return true
end

return M
