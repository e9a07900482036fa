-- tp.plan._config_check: checking a unified config: the kind of each key (check_types) and the
-- rules of a fair, runnable experiment (validate), and the copy a framework adapter takes.
local keys = require('tp.plan._keys')
local memory = require('tp.plan.memory')

local M = {}

local SECTION = {}
for _, s in ipairs(keys.SECTIONS) do
  SECTION[s] = true
end

-- ---------------------------------------------------------------------------------------------
-- Type checking.

local function type_error(path, kind, v)
  local got = type(v)
  if got == 'number' then
    got = math.type(v) == 'integer' and 'integer' or 'number'
  end
  return string.format('%s: %s expected, got %s %s', path, kind, got, keys.show(v))
end

-- Checks one value against its kind; returns the (possibly converted) value or nil, message.
local function check_kind(path, kind, v)
  if kind == 'integer' then
    if math.type(v) == 'integer' then
      return v
    end
    if type(v) == 'number' and math.tointeger(v) then
      return math.tointeger(v)
    end
    return nil, type_error(path, 'integer', v)
  elseif kind == 'number' then
    if type(v) ~= 'number' or v ~= v or v == math.huge or v == -math.huge then
      return nil, type_error(path, 'finite number', v)
    end
    return v
  elseif kind == 'boolean' or kind == 'string' then
    if type(v) ~= kind then
      return nil, type_error(path, kind, v)
    end
    return v
  elseif kind == 'dataset' then
    if type(v) == 'string' then
      return v
    end
    if type(v) == 'table' and type(v.path) == 'string' then
      for k in pairs(v) do
        if k ~= 'path' and k ~= 'tokenizer' then
          return nil, string.format("%s.%s: unknown key (a dataset is a name or { path =, "
            .. 'tokenizer = })', path, tostring(k))
        end
      end
      return v
    end
    return nil, type_error(path, "dataset name or { path = '...' }", v)
  elseif kind == 'model' then
    if type(v) == 'string' then
      local row = require('tp.catalog.models').get(v)
      if not row then
        return nil, string.format("%s: unknown model '%s' (known: %s)", path, v,
          table.concat(require('tp.catalog.models').ids(), ', '))
      end
      return v
    end
    if type(v) == 'table' and type(v.id) == 'string' then
      return v
    end
    return nil, type_error(path, 'model id (tp.models) or model row', v)
  end
  error('tp.config: unknown kind ' .. tostring(kind))
end

--- Checks the shape and types of a unified config: unknown sections and keys, wrong types,
--- values outside an enumeration. Returns a (possibly empty) list of error findings
--- `{severity = 'error', key =, message =}` whose messages start with the key path, e.g.
--- `training.gbs: integer expected, got string "64x"`. Integral floats (64.0) are accepted.
---@param cfg table
---@param opts? {prefix?: string, allow?: table<string, boolean>}  prefix for messages; extra
---  top-level keys to ignore
---@return table[] findings
function M.check_types(cfg, opts)
  opts = opts or {}
  local prefix = opts.prefix and (opts.prefix .. '.') or ''
  local findings = {}
  local function err(key, msg)
    findings[#findings + 1] = { severity = 'error', key = key, message = prefix .. msg }
  end
  if type(cfg) ~= 'table' then
    err('', string.format('config: table expected, got %s', type(cfg)))
    return findings
  end
  for _, k in ipairs(keys.sorted_keys(cfg)) do
    local v = cfg[k]
    if SECTION[k] then
      if type(v) ~= 'table' then
        err(k, type_error(k, 'table', v))
      else
        for _, sk in ipairs(keys.sorted_keys(v)) do
          local path = k .. '.' .. tostring(sk)
          local kind = keys.KEYS[path]
          if not kind then
            err(path, string.format('%s: unknown key', path))
          else
            local ok, msg = check_kind(path, kind, v[sk])
            if ok == nil then
              err(path, msg)
            else
              v[sk] = ok
              local allowed = keys.ENUMS[path]
              if allowed and not keys.contains(allowed, ok) then
                err(path, string.format("%s: '%s' is not one of %s", path, tostring(ok),
                  table.concat(allowed, ', ')))
              end
            end
          end
        end
      end
    elseif keys.KEYS[k] then
      local ok, msg = check_kind(k, keys.KEYS[k], v)
      if ok == nil then
        err(k, msg)
      else
        cfg[k] = ok
      end
    elseif not (opts.allow and opts.allow[k]) then
      err(tostring(k), string.format('%s: unknown key', tostring(k)))
    end
  end
  return findings
end

-- ---------------------------------------------------------------------------------------------
-- Validation rules.

local function model_row(cfg)
  local m = cfg.model
  if type(m) == 'string' then
    return require('tp.catalog.models').get(m)
  end
  return m
end

local function hardware_row(hw)
  if hw == nil then
    return nil
  end
  if type(hw) == 'table' then
    return hw
  end
  return require('tp.catalog.hardware').get(hw)
end

---@class tp.config.ValidateOpts
---@field hardware? string|table catalog id or row of the GPU the config runs on
---@field platform? string platform name, for messages
---@field framework? string framework adapter to check the config against (tp.frameworks)

--- Validates a unified config against the rules of a runnable, well-defined experiment. Each
--- broken rule is a finding `{severity, key, message, rule}` (message starts with the key path):
---
--- | rule | severity |
--- | --- | --- |
--- | types, unknown keys, enumerations (check_types) | error |
--- | `parallelism`: tp x pp x cp x dp = nodes x gpus_per_node | error |
--- | `training.gbs`: gbs = mbs x dp x ga (ga derived when absent) | error |
--- | `parallelism.tp`: divides attention heads and KV heads | error |
--- | `parallelism.pp`: divides the layers | error |
--- | `training.seq_len`: at most the model's max_position_embeddings | warning |
--- | `training.precision`: known; fp8 only on a GPU with an FP8 peak | error |
--- | `memory`: the estimate (tp.memory) against the GPU's memory | warning when above, info |
--- | `framework`: the adapter accepts the config (tp.frameworks build) | error |
---
--- Returns `{ok = no errors, findings =, config = the checked copy (ga and dp filled),
--- memory = estimate or nil, ga =}`.
---```lua
---local r = tp.config.validate(cfg, { hardware = 'h100-sxm' })
---for _, f in ipairs(r.findings) do print(f.severity, f.message) end
---```
---@param cfg table unified config
---@param opts? tp.config.ValidateOpts
---@return table result
function M.validate(cfg, opts)
  if type(cfg) ~= 'table' then
    error('tp.config.validate: config table expected, got ' .. type(cfg), 2)
  end
  opts = opts or {}
  local c = keys.copy(cfg)
  local findings = M.check_types(c)
  local result = { findings = findings, config = c }
  local function add(severity, rule, key, fmt, ...)
    findings[#findings + 1] = { severity = severity, rule = rule, key = key,
                                message = string.format(fmt, ...) }
  end
  local function finish()
    result.ok = true
    for _, f in ipairs(findings) do
      if f.severity == 'error' then
        result.ok = false
      end
    end
    return result
  end
  if #findings > 0 then
    return finish()
  end
  c.training = c.training or {}
  c.parallelism = c.parallelism or {}
  c.system = c.system or {}
  local t, p = c.training, c.parallelism
  if c.model == nil then
    add('error', 'required', 'model', 'model: required (a tp.models id or a model row)')
  end
  for _, k in ipairs({ 'mbs', 'gbs', 'seq_len', 'iters', 'lr' }) do
    if t[k] == nil then
      add('error', 'required', 'training.' .. k, 'training.%s: required', k)
    end
  end
  for _, path in ipairs({ 'training.mbs', 'training.gbs', 'training.ga', 'training.seq_len',
    'training.iters', 'parallelism.tp', 'parallelism.pp', 'parallelism.cp', 'parallelism.dp',
    'parallelism.ep', 'nodes', 'gpus_per_node' }) do
    local v = keys.get(c, path)
    if v ~= nil and v < 1 then
      add('error', 'positive', path, '%s: must be >= 1, got %d', path, v)
    end
  end
  if #findings > 0 then
    return finish()
  end

  -- Layout: TP x PP x CP x DP = GPUs.
  local nodes = c.nodes or 1
  local gpn = c.gpus_per_node or keys.DEFAULT_GPUS_PER_NODE
  local world = nodes * gpn
  local tp, pp, cp = p.tp or 1, p.pp or 1, p.cp or 1
  local model_par = tp * pp * cp
  if p.dp == nil then
    if world % model_par ~= 0 then
      add('error', 'layout', 'parallelism', 'parallelism: tp*pp*cp = %d*%d*%d = %d does not '
        .. 'divide the %d GPUs (nodes %d x gpus_per_node %d)', tp, pp, cp, model_par, world,
        nodes, gpn)
    else
      p.dp = world // model_par
    end
  elseif model_par * p.dp ~= world then
    add('error', 'layout', 'parallelism', 'parallelism: tp*pp*cp*dp = %d*%d*%d*%d = %d, but '
      .. 'nodes %d x gpus_per_node %d = %d GPUs', tp, pp, cp, p.dp, model_par * p.dp, nodes, gpn,
      world)
  end

  -- Batch: GBS = MBS x DP x GA.
  if p.dp then
    local per_step = t.mbs * p.dp
    if t.ga ~= nil then
      if per_step * t.ga ~= t.gbs then
        add('error', 'batch', 'training.gbs', 'training.gbs: %d, but mbs*dp*ga = %d*%d*%d = %d',
          t.gbs, t.mbs, p.dp, t.ga, per_step * t.ga)
      end
    elseif t.gbs % per_step ~= 0 then
      add('error', 'batch', 'training.gbs', 'training.gbs: %d is not a multiple of mbs*dp = '
        .. '%d*%d = %d (gradient accumulation must be a whole number)', t.gbs, t.mbs, p.dp,
        per_step)
    else
      t.ga = t.gbs // per_step
    end
    result.ga = t.ga
  end

  -- Model shape: heads / TP, layers / PP, sequence length.
  local m = model_row(c)
  if m then
    if m.num_attention_heads % tp ~= 0 or m.num_kv_heads % tp ~= 0 then
      add('error', 'heads', 'parallelism.tp', 'parallelism.tp: %d does not divide the %d '
        .. 'attention heads and %d KV heads of %s', tp, m.num_attention_heads, m.num_kv_heads,
        m.id)
    end
    if m.num_layers % pp ~= 0 then
      add('error', 'layers', 'parallelism.pp', 'parallelism.pp: %d does not divide the %d '
        .. 'layers of %s', pp, m.num_layers, m.id)
    end
    if m.max_position_embeddings and t.seq_len > m.max_position_embeddings then
      add('warning', 'seq_len', 'training.seq_len', 'training.seq_len: %d is above the %d '
        .. 'positions %s was trained for (max_position_embeddings)', t.seq_len,
        m.max_position_embeddings, m.id)
    end
  end

  -- Precision: known, and fp8 only where the GPU has an fp8 peak.
  local precision = t.precision or 'bf16'
  local hw = hardware_row(opts.hardware)
  if not keys.contains(keys.ENUMS['training.precision'], precision) then
    add('error', 'precision', 'training.precision', "training.precision: '%s' is not one of %s",
      tostring(precision), table.concat(keys.ENUMS['training.precision'], ', '))
  elseif precision == 'fp8' and hw and not (hw.peak_tflops and hw.peak_tflops.fp8) then
    add('error', 'precision', 'training.precision', 'training.precision: fp8 needs a GPU with '
      .. 'FP8 tensor cores; %s (%s) has no FP8 peak in the catalog', hw.id or '?',
      hw.name or '?')
  end

  -- Memory per GPU.
  if m and p.dp then
    local est = memory.for_config(c, hw)
    result.memory = est
    local severity = (est.status == 'exceeds' or est.status == 'tight') and 'warning' or 'info'
    add(severity, 'memory', 'memory', 'memory: estimate %s', memory.format(est))
  end

  -- The framework adapter: everything it refuses is an error at plan time.
  local errors = 0
  for _, f in ipairs(findings) do
    errors = errors + (f.severity == 'error' and 1 or 0)
  end
  if opts.framework and errors == 0 then
    local fw = require('tp.frameworks')
    local adapter, ferr = fw.get(opts.framework)
    if not adapter then
      add('error', 'framework', 'framework', '%s', ferr)
    else
      local ok, msg = pcall(adapter.build, M.for_framework(c))
      if not ok then
        add('error', 'framework', 'framework', '%s', tostring(msg):gsub('^config%.', ''))
      end
    end
  end
  return finish()
end

--- Returns a copy of a unified config as the framework adapters take it: without the
--- validation-only key `training.ga`.
---@param cfg table
---@return table
function M.for_framework(cfg)
  local c = keys.copy(cfg)
  if c.training then
    c.training.ga = nil
  end
  return c
end

-- For the loader (tp.plan._config_load), which checks the values of a file with the same kinds.
M.type_error = type_error
M.check_kind = check_kind

return M
