-- tp.config: the unified training config as data: its key paths and types, dotted-path access,
-- merging, validation against the rules of a fair, runnable experiment (with findings that name
-- the key path and what was expected), and loading from YAML, including the tprimat-era
-- config.yaml layout (experiment / hardware / models / training / parallelism /
-- platform_optimizations / benchmarking) with ${VAR:-default} expansion.
-- The unified keys are those of docs/frameworks.md (tp.frameworks.normalize); docs/recipes.md
-- describes the rules and the tprimat mapping.
local memory = require('tp.plan.memory')

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

local SECTION = {}
for _, s in ipairs(M.SECTIONS) do
  SECTION[s] = true
end

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

local function contains(list, v)
  for _, x in ipairs(list) do
    if x == v then
      return true
    end
  end
  return false
end

-- ---------------------------------------------------------------------------------------------
-- Type checking.

local function type_error(path, kind, v)
  local got = type(v)
  if got == 'number' then
    got = math.type(v) == 'integer' and 'integer' or 'number'
  end
  return string.format('%s: %s expected, got %s %s', path, kind, got, M.show(v))
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
      local row = require('tp.plan.models').get(v)
      if not row then
        return nil, string.format("%s: unknown model '%s' (known: %s)", path, v,
          table.concat(require('tp.plan.models').ids(), ', '))
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
  for _, k in ipairs(M.sorted_keys(cfg)) do
    local v = cfg[k]
    if SECTION[k] then
      if type(v) ~= 'table' then
        err(k, type_error(k, 'table', v))
      else
        for _, sk in ipairs(M.sorted_keys(v)) do
          local path = k .. '.' .. tostring(sk)
          local kind = M.KEYS[path]
          if not kind then
            err(path, string.format('%s: unknown key', path))
          else
            local ok, msg = check_kind(path, kind, v[sk])
            if ok == nil then
              err(path, msg)
            else
              v[sk] = ok
              local allowed = M.ENUMS[path]
              if allowed and not contains(allowed, ok) then
                err(path, string.format("%s: '%s' is not one of %s", path, tostring(ok),
                  table.concat(allowed, ', ')))
              end
            end
          end
        end
      end
    elseif M.KEYS[k] then
      local ok, msg = check_kind(k, M.KEYS[k], v)
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
    return require('tp.plan.models').get(m)
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
  return require('tp.plan.hardware').get(hw)
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
  local c = M.copy(cfg)
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
    local v = M.get(c, path)
    if v ~= nil and v < 1 then
      add('error', 'positive', path, '%s: must be >= 1, got %d', path, v)
    end
  end
  if #findings > 0 then
    return finish()
  end

  -- Layout: TP x PP x CP x DP = GPUs.
  local nodes = c.nodes or 1
  local gpn = c.gpus_per_node or M.DEFAULT_GPUS_PER_NODE
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
  if not contains(M.ENUMS['training.precision'], precision) then
    add('error', 'precision', 'training.precision', "training.precision: '%s' is not one of %s",
      tostring(precision), table.concat(M.ENUMS['training.precision'], ', '))
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
  local c = M.copy(cfg)
  if c.training then
    c.training.ga = nil
  end
  return c
end

-- ---------------------------------------------------------------------------------------------
-- Loading YAML.

-- Re-types a string produced by ${VAR} expansion the way a YAML 1.2 core-schema plain scalar
-- would be typed: "64" -> 64, "3.0e-4" -> 3e-4, "true" -> true. Anything else stays a string.
local function retype(s)
  if s == 'true' then
    return true
  elseif s == 'false' then
    return false
  end
  if s:match('^[-+]?%d+$') then
    return math.tointeger(tonumber(s)) or tonumber(s)
  end
  if s:match('^[-+]?%d*%.?%d+[eE][-+]?%d+$') or s:match('^[-+]?%d+%.%d*$')
    or s:match('^[-+]?%.%d+$') or s:match('^[-+]?%d+%.?%d*[eE][-+]?%d+$') then
    return tonumber(s)
  end
  return s
end

-- Expands ${VAR} / ${VAR:-default} in every string of `doc` (tp.yaml.expand_env) and re-types
-- the strings that held a reference.
local function expand(doc, env)
  local yaml = require('tp.yaml')
  local marked = {}
  local function mark(v, path)
    if type(v) == 'string' and v:find('${', 1, true) then
      marked[path] = true
    elseif type(v) == 'table' then
      for k, x in pairs(v) do
        mark(x, path .. '.' .. tostring(k))
      end
    end
  end
  mark(doc, '$')
  local out, err, code = yaml.expand_env(doc, env)
  if out == nil then
    return nil, err, code
  end
  local function fix(v, path)
    if type(v) == 'string' and marked[path] then
      return retype(v)
    elseif type(v) == 'table' then
      for k, x in pairs(v) do
        v[k] = fix(x, path .. '.' .. tostring(k))
      end
    end
    return v
  end
  return fix(out, '$')
end

-- tprimat's hardware.platforms keys and GPU names -> tplua platform names and catalog ids.
local TPRIMAT_PLATFORM = { nvidia = 'nvd', nvd = 'nvd', amd = 'amd' }
local FRAMEWORKS = { megatron = true, primus = true, nemo = true, torchtitan = true }

local function gpu_model_to_id(name)
  if type(name) ~= 'string' then
    return nil
  end
  local hw = require('tp.plan.hardware')
  local low = name:lower():gsub('%s+', '-')
  for _, cand in ipairs({ low, low .. '-sxm', (low:gsub('^nvidia%-', '')), (low:gsub('^amd%-',
    '')), (low:gsub('^nvidia%-', '')) .. '-sxm' }) do
    if hw.get(cand) then
      return cand
    end
  end
  return nil
end

-- tprimat model names ("llama3.1_8b") -> tp.models ids ("llama3.1-8b").
local function model_name_to_id(name)
  if type(name) ~= 'string' then
    return nil
  end
  local id = name:lower():gsub('_', '-')
  if require('tp.plan.models').get(id) then
    return id
  end
  return nil
end

-- A reader over the decoded tprimat document that records typed errors with file key paths.
local function reader(doc, errors)
  local r = {}
  function r.at(path)
    return M.get(doc, path)
  end
  function r.typed(path, kind, v)
    if v == nil then
      v = M.get(doc, path)
    end
    if v == nil then
      return nil
    end
    local ok, msg = check_kind(path, kind, v)
    if ok == nil then
      errors[#errors + 1] = msg
      return nil
    end
    return ok
  end
  function r.fail(fmt, ...)
    errors[#errors + 1] = string.format(fmt, ...)
  end
  return r
end

-- Maps a tprimat-era document to one experiment spec per model (see docs/recipes.md, "tprimat
-- config.yaml").
local function from_tprimat(doc, opts)
  local errors = {}
  local r = reader(doc, errors)
  local methodology = opts.methodology or r.typed('experiment.methodology', 'string')
    or 'identical_config'
  -- tprimat called the identical methodology both identical_config and truly_identical.
  local par_key = methodology
  if methodology == 'identical_config' and r.at('parallelism.identical_config') == nil
    and r.at('parallelism.truly_identical') ~= nil then
    par_key = 'truly_identical'
  end
  local training = {
    seed = r.typed('training.general.seed', 'integer'),
    mbs = r.typed('training.data.micro_batch_size', 'integer'),
    gbs = r.typed('training.data.global_batch_size', 'integer'),
    seq_len = r.typed('training.data.seq_length', 'integer'),
    lr = r.typed('training.optimizer.learning_rate', 'number'),
    min_lr = r.typed('training.optimizer.min_learning_rate', 'number'),
    warmup = r.typed('training.optimizer.warmup_steps', 'integer'),
    weight_decay = r.typed('training.optimizer.weight_decay', 'number'),
    beta1 = r.typed('training.optimizer.beta1', 'number'),
    beta2 = r.typed('training.optimizer.beta2', 'number'),
    decay = r.typed('training.optimizer.lr_decay_style', 'string'),
    grad_clip = r.typed('training.optimizer.grad_clip', 'number'),
    precision = r.typed('training.precision.default', 'string'),
  }
  local max_steps = r.typed('training.duration.max_steps', 'integer')
  local train_iters = r.typed('training.duration.train_iters', 'integer')
  if max_steps and train_iters and max_steps ~= train_iters then
    r.fail('training.duration: max_steps %d and train_iters %d disagree (they name the same '
      .. 'number of steps)', max_steps, train_iters)
  end
  training.iters = max_steps or train_iters
  local opt_type = r.typed('training.optimizer.type', 'string')
  if opt_type and opt_type:lower() ~= 'adam' and opt_type:lower() ~= 'adamw' then
    r.fail("training.optimizer.type: '%s' is not supported (the unified config trains with "
      .. 'Adam/AdamW)', opt_type)
  end
  local dataset_path = r.typed('training.data.dataset_path', 'string')
  local tokenizer = r.typed('training.data.tokenizer_path', 'string')
  if dataset_path then
    training.dataset = { path = dataset_path, tokenizer = tokenizer }
  else
    training.dataset = r.typed('training.data.dataset', 'string')
    training.tokenizer = tokenizer
  end
  if r.typed('training.precision.fp8_param', 'boolean') then
    r.fail('training.precision.fp8_param: true has no unified key (FP8 parameter storage is '
      .. 'not expressible); set it to false')
  end
  if training.precision == 'fp8' or r.typed('training.precision.fp8_hybrid', 'boolean') then
    training.precision = 'fp8'
    training.fp8_recipe = r.typed('training.precision.fp8_recipe', 'string') or 'delayed'
  end

  -- Platforms.
  local platforms = {}
  local plats = r.at('hardware.platforms')
  if type(plats) ~= 'table' then
    r.fail('hardware.platforms: table expected (nvidia: {...}, amd: {...})')
    plats = {}
  end
  local gpus = {}
  for _, name in ipairs(M.sorted_keys(plats)) do
    local prefix = 'hardware.platforms.' .. name
    local pname = TPRIMAT_PLATFORM[name]
    if not pname then
      r.fail("%s: unknown platform '%s' (nvidia, amd)", prefix, name)
    else
      local entry = {}
      local fwname = r.typed(prefix .. '.framework', 'string')
      if not fwname then
        r.fail('%s.framework: required (megatron, primus, nemo or torchtitan)', prefix)
      elseif not FRAMEWORKS[fwname] then
        r.fail("%s.framework: unknown framework '%s' (megatron, primus, nemo, torchtitan)",
          prefix, fwname)
      end
      entry.framework = fwname
      local gpu_model = r.typed(prefix .. '.gpu_model', 'string')
      if gpu_model then
        entry.hardware = gpu_model_to_id(gpu_model)
        if not entry.hardware then
          r.fail("%s.gpu_model: '%s' is not in the GPU catalog (tp.hardware)", prefix, gpu_model)
        end
      end
      local mem = r.typed(prefix .. '.memory_per_gpu_gb', 'number')
      if mem and entry.hardware then
        local row = require('tp.plan.hardware').get(entry.hardware)
        if math.abs(row.memory_gb - mem) > 0.5 then
          r.fail('%s.memory_per_gpu_gb: %s, but the catalog gives %s GB for %s', prefix,
            tostring(mem), tostring(row.memory_gb), row.id)
        end
      end
      gpus[pname] = r.typed(prefix .. '.num_gpus', 'integer')
      -- platform_optimizations.<name>.
      local po = 'platform_optimizations.' .. name
      local po_t = r.at(po)
      if po_t ~= nil then
        local prec = r.typed(po .. '.precision', 'string')
        local fp8_hybrid = r.typed(po .. '.fp8_hybrid', 'boolean')
        if r.typed(po .. '.fp8_param', 'boolean') then
          r.fail('%s.fp8_param: true has no unified key (FP8 parameter storage is not '
            .. 'expressible); set it to false', po)
        end
        if prec then
          entry.training = entry.training or {}
          entry.training.precision = prec
          if prec == 'fp8' then
            entry.training.fp8_recipe = r.typed(po .. '.fp8_recipe', 'string') or 'delayed'
          end
        elseif fp8_hybrid then
          entry.training = { precision = 'fp8',
                             fp8_recipe = r.typed(po .. '.fp8_recipe', 'string') or 'delayed' }
        end
        local ac = r.typed(po .. '.activation_checkpointing', 'boolean')
        local gc = r.typed(po .. '.gradient_checkpointing', 'boolean')
        if ac ~= nil or gc ~= nil then
          entry.system = { recompute = (ac or gc) and 'full' or 'none' }
        end
        local alloc = r.typed(po .. '.cuda_alloc_conf', 'string')
        if alloc then
          entry.env = { PYTORCH_CUDA_ALLOC_CONF = alloc }
        end
      end
      platforms[pname] = entry
    end
  end
  local gpn
  for _, n in pairs(gpus) do
    if gpn and gpn ~= n then
      r.fail('hardware.platforms.*.num_gpus: the platforms give different GPU counts (%d and '
        .. '%d); a comparison needs the same number of GPUs', gpn, n)
    end
    gpn = n
  end

  local paths = {}
  local primus_dir = r.typed('paths.primus.installation', 'string')
  if primus_dir and platforms.amd and platforms.amd.framework == 'primus' then
    platforms.amd.paths = { framework_dir = primus_dir }
  end
  if r.typed('training.checkpointing.enabled', 'boolean') then
    paths.checkpoints = r.typed('paths.nemo.checkpoint_dir', 'string') or 'checkpoints'
  end
  local results = r.typed('benchmarking.output.directory', 'string')
    or r.typed('paths.tprimat.output_dir', 'string')
  local repeats = r.typed('benchmarking.runs.recommended_num_runs', 'integer')
    or r.typed('benchmarking.runs.default_num_runs', 'integer')

  -- Models and their parallelism.
  local models_t = r.at('models')
  if type(models_t) ~= 'table' or next(models_t) == nil then
    r.fail('models: at least one model expected (llama: {name: llama3.1_8b, ...})')
    models_t = {}
  end
  local specs, order = {}, {}
  local name = r.typed('experiment.name', 'string') or 'experiment'
  for _, key in ipairs(M.sorted_keys(models_t)) do
    local mp = 'models.' .. key
    local mname = r.typed(mp .. '.name', 'string')
    local id = model_name_to_id(mname)
    if not id then
      r.fail("%s.name: '%s' is not in the model catalog (tp.models: %s)", mp, tostring(mname),
        table.concat(require('tp.plan.models').ids(), ', '))
    else
      local row = require('tp.plan.models').get(id)
      for _, f in ipairs({ 'num_layers', 'hidden_size', 'num_attention_heads' }) do
        local v = r.typed(mp .. '.' .. f, 'integer')
        if v and v ~= row[f] then
          r.fail('%s.%s: %d, but %s has %d', mp, f, v, id, row[f])
        end
      end
      local spec = {
        name = string.format('%s: %s, %s', name, id, methodology),
        description = r.typed('experiment.description', 'string'),
        model = id,
        methodology = methodology,
        training = M.copy(training),
        parallelism = {},
        system = {},
        paths = M.copy(paths),
        nodes = 1,
        gpus_per_node = gpn or M.DEFAULT_GPUS_PER_NODE,
        repeats = repeats,
        results = results,
        platforms = {},
      }
      local pp_path = 'parallelism.' .. par_key .. '.' .. key
      local plat_par = r.at(pp_path)
      if plat_par ~= nil and type(plat_par) ~= 'table' then
        r.fail('%s: table expected', pp_path)
        plat_par = nil
      end
      for pname, entry in pairs(platforms) do
        local p_entry = M.copy(entry)
        local src
        for tname, tp_name in pairs(TPRIMAT_PLATFORM) do
          if tp_name == pname and plat_par and plat_par[tname] ~= nil then
            src = tname
          end
        end
        if plat_par and src then
          local pre = pp_path .. '.' .. src
          p_entry.parallelism = {
            tp = r.typed(pre .. '.tensor_model_parallel_size', 'integer'),
            pp = r.typed(pre .. '.pipeline_model_parallel_size', 'integer'),
            dp = r.typed(pre .. '.data_parallel_size', 'integer'),
          }
          local ga = r.typed(pre .. '.gradient_accumulation_steps', 'integer')
          if ga then
            p_entry.training = p_entry.training or {}
            p_entry.training.ga = ga
          end
        elseif plat_par ~= nil then
          r.fail('%s: no entry for platform %s', pp_path, pname)
        end
        spec.platforms[pname] = p_entry
      end
      -- Settings equal on every platform belong to the common config, so that the methodology
      -- sees them as shared rather than as per-platform overrides.
      M.hoist(spec)
      specs[key] = spec
      order[#order + 1] = key
    end
  end
  if #errors > 0 then
    return nil, errors
  end
  return { format = 'tprimat', specs = specs, order = order }
end

--- Moves every unified key that all platforms of a spec set to the same value from the
--- platforms into the common config (in place). Keys the platforms set differently stay
--- per-platform.
---@param spec table experiment spec {training=, parallelism=, system=, platforms = {...}}
function M.hoist(spec)
  local names = M.sorted_keys(spec.platforms or {})
  if #names == 0 then
    return
  end
  local equal = require('tp.plan.methodology').equal
  for path in pairs(M.KEYS) do
    local first = M.get(spec.platforms[names[1]], path)
    local same = first ~= nil
    for i = 2, #names do
      if not same then
        break
      end
      same = equal(M.get(spec.platforms[names[i]], path), first)
    end
    if same then
      M.set(spec, path, M.copy(first))
      for _, n in ipairs(names) do
        M.set(spec.platforms[n], path, nil)
      end
    end
  end
  for _, n in ipairs(names) do
    for _, section in ipairs(M.SECTIONS) do
      local s = spec.platforms[n][section]
      if type(s) == 'table' and next(s) == nil then
        spec.platforms[n][section] = nil
      end
    end
  end
end

local UNIFIED_TOP = {
  name = 'string', description = 'string', methodology = 'string', platforms = 'table',
  repeats = 'integer', results = 'string', recorded = 'string', launcher = 'string',
  timeout = 'number',
}

-- A YAML file in the unified layout: the experiment spec as a recipe writes it.
local function from_unified(doc)
  local errors = {}
  local spec = {}
  local cfg = {}
  for _, k in ipairs(M.sorted_keys(doc)) do
    local v = doc[k]
    if UNIFIED_TOP[k] then
      local kind = UNIFIED_TOP[k]
      local ok, msg = check_kind(k, kind == 'table' and 'string' or kind, v)
      if kind == 'table' then
        if type(v) ~= 'table' then
          errors[#errors + 1] = type_error(k, 'table', v)
        else
          spec[k] = v
        end
      elseif ok == nil then
        errors[#errors + 1] = msg
      else
        spec[k] = ok
      end
    else
      cfg[k] = v
    end
  end
  for _, f in ipairs(M.check_types(cfg)) do
    errors[#errors + 1] = f.message
  end
  if #errors > 0 then
    return nil, errors
  end
  for k, v in pairs(cfg) do
    spec[k] = v
  end
  return { format = 'unified', specs = { [spec.model or 'default'] = spec },
           order = { spec.model or 'default' } }
end

--- The largest config file `load` reads (1 MiB): an experiment's config is a few KB.
M.MAX_FILE_SIZE = 1024 * 1024

-- Problems listed in one failure message; the rest are counted.
local MAX_ERRORS = 10

---@class tp.config.LoadOpts
---@field model? string with several models in the file, the one to take (its key, e.g. 'llama',
---  or its tp.models id)
---@field methodology? string override experiment.methodology (tprimat layout)
---@field env? table|function environment for ${VAR} expansion (default os.getenv)

--- Loads an experiment spec (the table tp.experiment takes) from a YAML file (a `.json` file is
--- read as JSON, with JSON's messages; at most MAX_FILE_SIZE bytes): either the unified
--- layout (the keys of a recipe) or the tprimat-era layout, detected by its `hardware`, `models`
--- or `benchmarking` sections. `${VAR}` and `${VAR:-default}` are expanded first, and an
--- expanded value that reads as a number or boolean gets that type. Fails with
--- `nil, '<path>: <key path>: <problem>', code` ('EPARSE' for YAML errors, 'ENOENT' for a
--- missing file or variable, 'ELIMIT' for a file above MAX_FILE_SIZE, 'EINVAL' for values of
--- the wrong type, several problems joined by '; ', the first ten named and the rest counted).
---```lua
---local spec = assert(tp.config.load('examples/tprimat/config.yaml', { model = 'llama' }))
---return tp.experiment.main(spec)
---```
---@param path string
---@param opts? tp.config.LoadOpts
---@return table|nil spec
---@return string? err
---@return string? code
function M.load(path, opts)
  if type(path) ~= 'string' then
    error('tp.config.load: path must be a string, got ' .. type(path), 2)
  end
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('tp.config.load: opts must be a table', 2)
  end
  for k in pairs(opts) do
    if k ~= 'model' and k ~= 'methodology' and k ~= 'env' then
      error(string.format("tp.config.load: unknown option '%s'", tostring(k)), 2)
    end
  end
  local all, err, code = M.load_all(path, opts)
  if not all then
    return nil, err, code
  end
  if opts.model then
    local spec = all.specs[opts.model]
    if not spec then
      for _, key in ipairs(all.order) do
        if all.specs[key].model == opts.model then
          spec = all.specs[key]
        end
      end
    end
    if not spec then
      return nil, string.format("%s: models: no model '%s' (the file has: %s)", path, opts.model,
        table.concat(all.order, ', ')), 'ENOENT'
    end
    return spec
  end
  if #all.order > 1 then
    return nil, string.format('%s: models: the file describes %d models (%s); choose one with '
      .. 'opts.model', path, #all.order, table.concat(all.order, ', ')), 'EINVAL'
  end
  return all.specs[all.order[1]]
end

--- Loads every experiment spec of a YAML file: `{format = 'tprimat'|'unified', specs = {key =
--- spec}, order = {keys}}`. Same failures as load.
---@param path string
---@param opts? tp.config.LoadOpts
---@return table|nil all
---@return string? err
---@return string? code
function M.load_all(path, opts)
  opts = opts or {}
  local doc, err, code
  if path:lower():match('%.json$') then
    doc, err, code = require('tp.json').load_file(path, { max_size = M.MAX_FILE_SIZE })
  else
    doc, err, code = require('tp.yaml').load_file(path, { max_size = M.MAX_FILE_SIZE })
  end
  if doc == nil then
    return nil, err, code
  end
  if type(doc) ~= 'table' or (#doc > 0 and next(doc, #doc) == nil)
    or require('tp.json').is_array(doc) then
    return nil, string.format('%s: a mapping expected at the top level, got %s', path,
      type(doc) == 'table' and 'a list' or type(doc)), 'EINVAL'
  end
  doc, err, code = expand(doc, opts.env)
  if doc == nil then
    return nil, string.format('%s: %s', path, err), code
  end
  if type(doc.schema) == 'string' then
    return nil, string.format("%s: a '%s' document, not an experiment config", path, doc.schema),
      'EINVAL'
  end
  local result, errors
  if doc.hardware ~= nil or doc.models ~= nil or doc.benchmarking ~= nil then
    result, errors = from_tprimat(doc, opts)
  else
    result, errors = from_unified(doc)
  end
  if not result then
    local shown = {}
    for i = 1, math.min(#errors, MAX_ERRORS) do
      shown[i] = path .. ': ' .. errors[i]
    end
    if #errors > MAX_ERRORS then
      shown[#shown + 1] = string.format('%s: ... and %d more problems', path,
        #errors - MAX_ERRORS)
    end
    return nil, table.concat(shown, '; '), 'EINVAL'
  end
  result.source = path
  return result
end

return M
