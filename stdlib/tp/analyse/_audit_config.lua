-- tp.analyse._audit_config: what the audit compares: the methodology's classes of keys, the
-- formatting and likeness of values, and a run's effective and intended configurations.
local json = require('tp.json')

local M = {}

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function is_null(v)
  return rawequal(v, json.null)
end

-- ---------------------------------------------------------------------------------------------
-- Methodology rules.

-- Returns the methodology table for `name` (tp.methodology.get), or nil and a message.
local function methodology(name)
  return require('tp.plan.methodology').get(name)
end

-- True when `key` is listed in `list` itself or under a listed prefix ('model' covers
-- 'model.hidden_size').
local function listed(list, key)
  for _, k in ipairs(list or {}) do
    if k == key or key:sub(1, #k + 1) == k .. '.' then
      return true
    end
  end
  return false
end

-- The GPU count is not a unified key: it is nodes x gpus_per_node, classed as they are.
local GPU_KEYS = { 'gpus', 'nodes', 'gpus_per_node' }

-- 'algorithmic' | 'fixed' | 'free' | 'other' (not compared: tp.methodology leaves keys in
-- neither list alone).
local function class_of(m, key)
  if key == 'gpus' then
    for _, k in ipairs(GPU_KEYS) do
      if listed(m.fixed, k) then
        return 'fixed'
      end
    end
    for _, k in ipairs(GPU_KEYS) do
      if listed(m.free, k) then
        return 'free'
      end
    end
    return 'other'
  end
  if listed(m.algorithmic, key) then
    return 'algorithmic'
  elseif listed(m.fixed, key) then
    return 'fixed'
  elseif listed(m.free, key) then
    return 'free'
  end
  return 'other'
end

local CLASS_SEVERITY = { algorithmic = 'error', fixed = 'error', free = 'info' }

-- ---------------------------------------------------------------------------------------------
-- Formatting.

local function fmt(v)
  if v == nil then
    return 'unknown'
  end
  if type(v) == 'number' then
    if math.type(v) == 'integer' then
      return tostring(v)
    end
    return string.format('%.6g', v)
  end
  if type(v) == 'table' then
    return json.encode(v) or '<table>'
  end
  return tostring(v)
end

local LABELS = { gpus = 'number of GPUs' }

local function label(key)
  return LABELS[key] and (LABELS[key] .. ' (' .. key .. ')') or key
end

local function same(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    if a == b then
      return true
    end
    return math.abs(a - b) <= 1e-9 * math.max(math.abs(a), math.abs(b))
  end
  if type(a) == 'table' and type(b) == 'table' then
    return json.encode(a) == json.encode(b)
  end
  return a == b
end

-- ---------------------------------------------------------------------------------------------
-- Effective and intended configurations.

local function flatten(t, prefix, out)
  out = out or {}
  for k, v in pairs(t) do
    local key = prefix and (prefix .. '.' .. k) or k
    if type(v) == 'table' and not is_null(v) and not json.is_array(v) and next(v) ~= nil
      and key ~= 'training.dataset' then
      flatten(v, key, out)
    elseif not is_null(v) then
      out[key] = v
    end
  end
  return out
end

-- tprimat's training_config names -> unified key paths.
local TPRIMAT_KEYS = {
  global_batch_size = 'training.gbs', sequence_length = 'training.seq_len',
  micro_batch_size = 'training.mbs', max_steps = 'training.iters',
  learning_rate = 'training.lr', seed = 'training.seed', precision = 'training.precision',
  tensor_parallel_size = 'parallelism.tp', pipeline_parallel_size = 'parallelism.pp',
  context_parallel_size = 'parallelism.cp', data_parallel_size = 'parallelism.dp',
  expert_parallel_size = 'parallelism.ep', num_gpus = 'gpus',
}

local function adapter(name)
  if type(name) ~= 'string' then
    return nil
  end
  local ok, fw = pcall(require, 'tp.frameworks')
  if not ok then
    return nil
  end
  return (fw.get(name))
end

-- "primus args lr=1e-05" for key `key`, from the adapter's keymap.
local function arg_provenance(ad, key, args)
  for _, e in ipairs(ad.keymap or {}) do
    if e.key == key then
      local shown = {}
      for _, n in ipairs(e.names or {}) do
        if args[n] ~= nil and #shown < 3 then
          shown[#shown + 1] = n .. '=' .. tostring(args[n])
        end
      end
      if #shown > 0 then
        return string.format('%s args %s', ad.name or '?', table.concat(shown, ' '))
      end
    end
  end
  return string.format('%s args', ad.name or '?')
end

local function intended_model(id)
  local ok, models = pcall(require, 'tp.catalog.models')
  if not ok or type(id) ~= 'string' then
    return nil
  end
  local row = models.get(id)
  if not row then
    return nil
  end
  local out = {}
  for _, k in ipairs({ 'num_layers', 'hidden_size', 'ffn_hidden_size', 'num_attention_heads',
    'num_kv_heads', 'head_dim', 'vocab_size', 'max_position_embeddings', 'tie_embeddings',
    'qkv_bias' }) do
    out['model.' .. k] = row[k]
  end
  return out
end

local function basename(p)
  return (tostring(p):gsub('/+$', ''):match('([^/]*)$'))
end

--- Returns the effective configuration of a run, flattened to unified key paths
--- ({['training.lr'] = 3e-4, gpus = 8, ...}), where each value was read (`provenance`, e.g.
--- "primus args lr=0.0003"), and the intended configuration when the record carries one (the
--- recipe's `training_config.unified`, plus values given on the command line).
---```lua
---local e = tp.audit.effective(run)
---print(e.config['training.lr'], e.provenance['training.lr'])
---```
---@param run table a tp.results run
---@return table {config, provenance, intended, intended_source, framework, has_args, notes}
function M.effective(run)
  if type(run) ~= 'table' then
    error('tp.audit.effective: run expected, got ' .. type(run), 2)
  end
  local out = { config = {}, provenance = {}, notes = {} }
  local tc = type(run.training_config) == 'table' and run.training_config or {}
  local sources = type(tc.sources) == 'table' and tc.sources or {}
  local from_tprimat = run.kind == 'tprimat'
  -- 1. What the record's training_config says (tprimat's configuration, or the log's values).
  for name, key in pairs(TPRIMAT_KEYS) do
    local v = tc[name]
    if v ~= nil and not is_null(v) then
      out.config[key] = v
      out.provenance[key] = string.format('%s training_config.%s', from_tprimat and 'tprimat'
        or (sources[name] or 'record'), name)
    end
  end
  -- The model the record names (a tp.models id): two runs of different models do not do the
  -- same work, whatever their arguments say.
  if type(run.model) == 'string' and run.model ~= '' then
    out.config.model = run.model
    out.provenance.model = 'record model'
  end
  if out.config.gpus == nil then
    local gi = type(run.gpu_info) == 'table' and run.gpu_info or {}
    local n = gi.device_count or gi.count
    if is_finite(n) then
      out.config.gpus = n
      out.provenance.gpus = 'gpu_info.device_count'
    end
  end
  -- 2. What the framework printed, through its adapter.
  local args = run.args
  out.has_args = type(args) == 'table' and next(args) ~= nil
  local ad = adapter(run.framework)
  out.framework = ad and ad.name or run.framework
  if out.has_args and ad and type(ad.effective) == 'function' then
    local ok, eff = pcall(ad.effective, args)
    if ok then
      for key, v in pairs(flatten(eff)) do
        out.config[key] = v
        out.provenance[key] = arg_provenance(ad, key, args)
      end
    else
      out.notes[#out.notes + 1] = string.format('%s: the %s adapter cannot read the argument ' ..
        'dump: %s', run.id or '?', ad.name, tostring(eff))
    end
    -- world_size is in every Megatron argument dump (megatron/training/arguments.py,
    -- parse_args sets args.world_size; _print_args prints the namespace).
    local ws = tonumber(args.world_size or '')
    if ws then
      out.config.gpus = math.tointeger(ws) or ws
      out.provenance.gpus = string.format('%s args world_size=%s', ad.name, args.world_size)
    end
  elseif out.has_args and not ad then
    out.notes[#out.notes + 1] = string.format("%s: no adapter for framework '%s': the argument " ..
      'dump is not read back', run.id or '?', tostring(run.framework))
  end
  -- 3. The intent: the recipe's unified config, and values given as flags.
  local u = type(tc.unified) == 'table' and tc.unified or nil
  if u then
    local intended = flatten({ training = u.training, parallelism = u.parallelism,
      system = u.system })
    local model = u.model
    if type(model) == 'string' then
      for k, v in pairs(intended_model(model) or {}) do
        intended[k] = v
      end
    elseif type(model) == 'table' then
      for k, v in pairs(flatten(model, 'model')) do
        intended[k] = v
      end
    end
    if is_finite(u.nodes) and is_finite(u.gpus_per_node) then
      intended.gpus = u.nodes * u.gpus_per_node
    end
    out.intended = intended
    out.intended_source = 'recipe'
  end
  local from_flags = false
  for name, key in pairs(TPRIMAT_KEYS) do
    if sources[name] == 'flag' and tc[name] ~= nil then
      out.intended = out.intended or {}
      out.intended[key] = tc[name]
      from_flags = true
    end
  end
  if from_flags then
    -- Named once, however many keys the flags gave.
    out.intended_source = out.intended_source and (out.intended_source .. ' and flags') or 'flags'
  end
  -- The dataset as a comparable label: 'mock', the recipe's name when the path matches it, else
  -- the last two components of the path (the root differs between machines).
  local d = out.config['training.dataset']
  local want = out.intended and out.intended['training.dataset']
  if type(d) == 'string' and d ~= 'mock' then
    if type(want) == 'string' and (d:find('/' .. want .. '/', 1, true) or basename(d) == want) then
      out.dataset = want
    else
      out.dataset = d:match('([^/]+/[^/]+)/*$') or d
    end
  elseif d == 'mock' then
    out.dataset = 'mock'
  elseif type(want) == 'string' then
    out.dataset = want
  elseif type(run.dataset) == 'string' then
    out.dataset = run.dataset
  end
  return out
end

M.is_finite, M.basename, M.methodology = is_finite, basename, methodology
M.class_of, M.CLASS_SEVERITY = class_of, CLASS_SEVERITY
M.fmt, M.label, M.same = fmt, label, same

return M
