-- tp.frameworks: the registry of framework adapters, the validation of the unified training
-- config they all translate, and the small text helpers (numbers, YAML, TOML) they share.
-- Each adapter (tp.frameworks.<name>) turns one unified config into argv, env and config files
-- for its framework and maps the framework's printed arguments back to unified keys.

local M = {}

-- The adapters that ship with tplua (tp.frameworks.<name>).
local BUILTIN = { 'megatron', 'nemo', 'primus', 'reference', 'torchtitan' }

-- Adapters added with M.register, by name.
local registered = {}

local function is_builtin(name)
  for _, n in ipairs(BUILTIN) do
    if n == name then
      return true
    end
  end
  return false
end

--- Lists the framework names: the built-in adapters and those registered, sorted.
---```lua
---for _, name in ipairs(tp.frameworks.list()) do print(name) end
---```
---@return string[]
function M.list()
  local out = {}
  for i, n in ipairs(BUILTIN) do
    out[i] = n
  end
  for n in pairs(registered) do
    if not is_builtin(n) then
      out[#out + 1] = n
    end
  end
  table.sort(out)
  return out
end

-- The fields an adapter must have, and those it may have, with their types.
local ADAPTER_FIELDS = { build = 'function', parser = 'string' }
local ADAPTER_OPTIONAL = { name = 'string', effective = 'function', keymap = 'table',
  launcher = 'string', cpu_fallback = 'string' }

local function check_adapter(name, a, level)
  if type(a) ~= 'table' then
    error(string.format("frameworks: adapter '%s' must be a table, got %s", name, type(a)), level)
  end
  for k, kind in pairs(ADAPTER_FIELDS) do
    if type(a[k]) ~= kind then
      error(string.format("frameworks: adapter '%s' needs %s (a %s), got %s", name, k, kind,
        type(a[k])), level)
    end
  end
  for k, kind in pairs(ADAPTER_OPTIONAL) do
    if a[k] ~= nil and type(a[k]) ~= kind then
      error(string.format("frameworks: adapter '%s': %s must be a %s, got %s", name, k, kind,
        type(a[k])), level)
    end
  end
end

--- Adds a framework adapter under `name`, so that recipes, campaigns and sweeps can name it
--- like a built-in one. The adapter is a table with `build(config) -> cmd` (cmd: { argv, env,
--- files?, parser, cwd?, launcher? }) and `parser` (a tp.log format name); `effective(args)`
--- (the log's printed arguments back to unified keys, for the audit) is optional. A built-in
--- name cannot be replaced; registering a name again replaces the earlier registration.
---```lua
---tp.frameworks.register('mytrainer', {
---  parser = 'megatron',
---  build = function(config)
---    local c = tp.frameworks.normalize(config)
---    return { argv = { 'python3', 'train.py', '--lr', tostring(c.training.lr) }, env = {},
---             parser = 'megatron' }
---  end,
---})
---```
---@param name string  letters, digits, '_' and '-'
---@param adapter table
---@return table adapter
function M.register(name, adapter)
  if type(name) ~= 'string' or not name:match('^[%a][%w_%-]*$') then
    error("frameworks.register: name must be letters, digits, '_' or '-' (a letter first), got "
      .. tostring(name), 2)
  end
  if is_builtin(name) then
    error(string.format("frameworks.register: '%s' is a built-in adapter and cannot be replaced",
      name), 2)
  end
  check_adapter(name, adapter, 3)
  adapter.name = adapter.name or name
  registered[name] = adapter
  return adapter
end

--- Removes a registered adapter (not a built-in one). Returns whether it was registered.
---@param name string
---@return boolean
function M.unregister(name)
  local was = registered[name] ~= nil
  registered[name] = nil
  return was
end

--- Returns the adapter module of a framework, or nil, message, 'ENOENT' for an unknown name.
--- Looks in this order: a registered adapter, a built-in one, then a module
--- `tp.frameworks.<name>` anywhere on package.path (a user's adapter file; it is registered
--- when found).
---```lua
---local megatron = assert(tp.frameworks.get('megatron'))
---local cmd = megatron.build(config)
---```
---@param name string
---@return table|nil adapter, string? err, string? code
function M.get(name)
  if type(name) ~= 'string' then
    error('frameworks.get: name must be a string, got ' .. type(name), 2)
  end
  if registered[name] then
    return registered[name]
  end
  if is_builtin(name) then
    return require('tp.frameworks.' .. name)
  end
  if name:match('^[%a][%w_%-]*$') then
    local modname = 'tp.frameworks.' .. name
    if package.searchpath(modname, package.path) then
      local ok, mod = pcall(require, modname)
      if not ok then
        return nil, string.format("frameworks: the adapter module %s cannot be loaded: %s",
          modname, tostring(mod)), 'EINVAL'
      end
      local cok, cerr = pcall(check_adapter, name, mod, 1)
      if not cok then
        return nil, tostring(cerr), 'EINVAL'
      end
      registered[name] = mod
      return mod
    end
  end
  return nil, string.format("frameworks: unknown framework '%s' (known: %s; add one with "
    .. 'tp.frameworks.register or a module tp.frameworks.%s on package.path)', name,
    table.concat(M.list(), ', '), name), 'ENOENT'
end

-- ---------------------------------------------------------------------------------------------
-- Plan-time errors. Adapters raise a plain string (level 0, no position prefix) that names the
-- framework and the key path, so a recipe's plan shows exactly which setting cannot be honoured.

local function fail(fmt, ...)
  error(string.format(fmt, ...), 0)
end
M._fail = fail

-- ---------------------------------------------------------------------------------------------
-- The unified config.

local SCHEMA = {
  training = {
    seed = 'integer', mbs = 'integer', gbs = 'integer', seq_len = 'integer', iters = 'integer',
    lr = 'number', min_lr = 'number', warmup = 'integer', decay = 'string',
    weight_decay = 'number', beta1 = 'number', beta2 = 'number', eps = 'number',
    grad_clip = 'number', precision = 'string', fp8_recipe = 'string', dataset = 'dataset',
    tokenizer = 'string', init_std = 'number', log_interval = 'integer',
  },
  parallelism = {
    tp = 'integer', pp = 'integer', cp = 'integer', dp = 'integer', ep = 'integer',
    sequence_parallel = 'boolean', distributed_optimizer = 'boolean',
  },
  system = {
    recompute = 'string', attention = 'string', fused_kernels = 'boolean',
    cuda_graphs = 'boolean',
  },
  paths = {
    framework_dir = 'string', data = 'string', output = 'string', checkpoints = 'string',
  },
}

local TOP = {
  model = true, training = true, parallelism = true, system = true, paths = true,
  nodes = true, gpus_per_node = true,
}

local DEFAULTS = {
  training = {
    seed = 1234, min_lr = 0, warmup = 0, decay = 'cosine', weight_decay = 0.1, beta1 = 0.9,
    beta2 = 0.95, eps = 1e-8, grad_clip = 1.0, precision = 'bf16', dataset = 'mock',
    init_std = 0.02, log_interval = 1,
  },
  parallelism = {
    tp = 1, pp = 1, cp = 1, ep = 1, sequence_parallel = false, distributed_optimizer = true,
  },
  system = { recompute = 'none', attention = 'auto', fused_kernels = true, cuda_graphs = false },
  paths = { data = '/data', output = 'output' },
}

local REQUIRED = { 'mbs', 'gbs', 'seq_len', 'iters', 'lr' }

local ENUMS = {
  ['training.decay'] = { 'cosine', 'linear', 'constant' },
  ['training.precision'] = { 'bf16', 'fp16', 'fp8' },
  ['training.fp8_recipe'] = { 'delayed', 'tensorwise', 'blockwise', 'mxfp8' },
  ['system.recompute'] = { 'none', 'selective', 'full' },
  ['system.attention'] = { 'flash', 'fused', 'auto' },
}

local MODEL_FIELDS = {
  id = 'string', family = 'string', hf_name = 'string', num_layers = 'integer',
  hidden_size = 'integer', ffn_hidden_size = 'integer', num_attention_heads = 'integer',
  num_kv_heads = 'integer', head_dim = 'integer', vocab_size = 'integer',
  max_position_embeddings = 'integer', rope_theta = 'number', norm_eps = 'number',
  tie_embeddings = 'boolean', qkv_bias = 'boolean',
}

local function contains(list, v)
  for _, x in ipairs(list) do
    if x == v then
      return true
    end
  end
  return false
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do
    keys[#keys + 1] = k
  end
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  return keys
end
M._sorted_keys = sorted_keys

local function check_value(path, v, kind)
  if kind == 'integer' then
    if math.type(v) ~= 'integer' then
      if type(v) == 'number' and v == math.floor(v) and v == v then
        return math.tointeger(v)
      end
      fail('config.%s: integer expected, got %s', path, type(v) == 'number' and tostring(v)
        or type(v))
    end
    return v
  elseif kind == 'number' then
    if type(v) ~= 'number' or v ~= v or v == math.huge or v == -math.huge then
      fail('config.%s: finite number expected, got %s', path, tostring(v))
    end
    return v
  elseif kind == 'dataset' then
    if type(v) == 'string' then
      if v == '' or v:find('[/%s]') then
        fail("config.%s: dataset name '%s' must be a plain name (use { path = ... } for a path)",
          path, v)
      end
      return v
    elseif type(v) == 'table' then
      for k in pairs(v) do
        if k ~= 'path' and k ~= 'tokenizer' then
          fail('config.%s.%s: unknown key', path, tostring(k))
        end
      end
      if type(v.path) ~= 'string' or v.path == '' then
        fail('config.%s.path: non-empty string expected', path)
      end
      if v.tokenizer ~= nil and type(v.tokenizer) ~= 'string' then
        fail('config.%s.tokenizer: string expected, got %s', path, type(v.tokenizer))
      end
      return { path = v.path, tokenizer = v.tokenizer }
    end
    fail('config.%s: dataset name or { path = ... } expected, got %s', path, type(v))
  elseif type(v) ~= kind then
    fail('config.%s: %s expected, got %s', path, kind, type(v))
  end
  return v
end

local function resolve_model(m)
  local row
  if type(m) == 'string' then
    local ok, models = pcall(require, 'tp.catalog.models')
    if not ok then
      fail("config.model: model '%s' given by id but tp.models cannot be loaded: %s", m,
        tostring(models))
    end
    row = models.get(m)
    if not row then
      fail("config.model: unknown model '%s'", m)
    end
  elseif type(m) == 'table' then
    row = m
  else
    fail('config.model: model id or model table expected, got %s', type(m))
  end
  local out = {}
  for field, kind in pairs(MODEL_FIELDS) do
    local v = row[field]
    if v == nil then
      fail('config.model: model row lacks field %s', field)
    end
    out[field] = check_value('model.' .. field, v, kind)
  end
  if out.family ~= 'llama' and out.family ~= 'qwen' then
    fail("config.model.family: '%s' is not a supported family (llama, qwen)", out.family)
  end
  -- Optional RoPE scaling of the Llama 3.1 kind: { factor = 8, ... }.
  if row.rope_scaling ~= nil then
    if type(row.rope_scaling) ~= 'table' or type(row.rope_scaling.factor) ~= 'number' then
      fail('config.model.rope_scaling: table with a numeric factor expected')
    end
    out.rope_scaling = row.rope_scaling
  end
  out.num_experts = row.num_experts
  return out
end

--- The Megatron dataset prefix a unified config (normalized or not) names, and its tokenizer
--- when the config says: `{ path = prefix }` as given; a name other than the synthetic ones
--- ('mock', 'mock-...') under paths.data as <name>/<model id> (one tokenised copy per model).
--- nil for synthetic data.
---@param config table
---@return string|nil prefix
---@return string|nil tokenizer
function M.dataset_prefix(config)
  local t = type(config.training) == 'table' and config.training or {}
  local d = t.dataset
  if type(d) == 'table' and type(d.path) == 'string' then
    return d.path, d.tokenizer or t.tokenizer
  end
  if type(d) == 'string' and not d:match('^mock') then
    local model = config.model
    local id = type(model) == 'table' and model.id or model
    local data = type(config.paths) == 'table' and config.paths.data or DEFAULTS.paths.data
    if type(id) == 'string' then
      return data .. '/' .. d .. '/' .. id, t.tokenizer
    end
  end
  return nil
end

local function dataset_spec(c)
  local d = c.training.dataset
  local tok = c.training.tokenizer or c.model.hf_name
  if d == 'mock' then
    return { kind = 'mock', tokenizer = tok }
  elseif type(d) == 'string' then
    return { kind = 'indexed', name = d,
             path = c.paths.data .. '/' .. d .. '/' .. c.model.id, tokenizer = tok }
  end
  return { kind = 'indexed', path = d.path, tokenizer = d.tokenizer or tok }
end

--- Validates a unified config, fills defaults, resolves the model row, and returns a new table
--- (the input is not modified). Raises a message naming the key path for any bad setting.
---@param config table  the unified config (see docs/frameworks.md)
---@return table normalized  with `.model` a model row, `.data` the resolved dataset, `.world`
function M.normalize(config)
  if type(config) ~= 'table' then
    error('frameworks.normalize: config must be a table, got ' .. type(config), 2)
  end
  for k in pairs(config) do
    if not TOP[k] then
      fail('config.%s: unknown key', tostring(k))
    end
  end
  local c = { explicit = {} }
  c.model = resolve_model(config.model)
  for section, fields in pairs(SCHEMA) do
    local src = config[section]
    if src ~= nil and type(src) ~= 'table' then
      fail('config.%s: table expected, got %s', section, type(src))
    end
    src = src or {}
    for k in pairs(src) do
      if fields[k] == nil then
        fail('config.%s.%s: unknown key', section, tostring(k))
      end
    end
    local dst = {}
    for k, kind in pairs(fields) do
      local v = src[k]
      if v ~= nil then
        c.explicit[section .. '.' .. k] = true
        dst[k] = check_value(section .. '.' .. k, v, kind)
      elseif DEFAULTS[section] and DEFAULTS[section][k] ~= nil then
        dst[k] = DEFAULTS[section][k]
      end
    end
    c[section] = dst
  end
  for _, k in ipairs(REQUIRED) do
    if c.training[k] == nil then
      fail('config.training.%s: required', k)
    end
  end
  for path, allowed in pairs(ENUMS) do
    local section, key = path:match('^(%w+)%.([%w_]+)$')
    local v = c[section][key]
    if v ~= nil and not contains(allowed, v) then
      fail("config.%s: '%s' is not one of %s", path, v, table.concat(allowed, ', '))
    end
  end
  c.nodes = check_value('nodes', config.nodes or 1, 'integer')
  c.gpus_per_node = check_value('gpus_per_node', config.gpus_per_node or 8, 'integer')
  if c.nodes < 1 then
    fail('config.nodes: must be >= 1, got %d', c.nodes)
  end
  if c.gpus_per_node < 1 then
    fail('config.gpus_per_node: must be >= 1, got %d', c.gpus_per_node)
  end
  c.world = c.nodes * c.gpus_per_node

  local t, p = c.training, c.parallelism
  for _, k in ipairs({ 'mbs', 'gbs', 'seq_len', 'iters', 'log_interval' }) do
    if t[k] < 1 then
      fail('config.training.%s: must be >= 1, got %d', k, t[k])
    end
  end
  for _, k in ipairs({ 'tp', 'pp', 'cp', 'ep' }) do
    if p[k] < 1 then
      fail('config.parallelism.%s: must be >= 1, got %d', k, p[k])
    end
  end
  local model_par = p.tp * p.pp * p.cp
  if c.world % model_par ~= 0 then
    fail('config.parallelism: tp*pp*cp = %d does not divide nodes*gpus_per_node = %d',
      model_par, c.world)
  end
  if p.dp == nil then
    p.dp = c.world // model_par
  elseif p.dp < 1 or model_par * p.dp ~= c.world then
    fail('config.parallelism: tp*pp*cp*dp = %d but nodes*gpus_per_node = %d',
      model_par * p.dp, c.world)
  end
  if t.gbs % (t.mbs * p.dp) ~= 0 then
    fail('config.training.gbs: %d is not a multiple of mbs*dp = %d', t.gbs, t.mbs * p.dp)
  end
  if p.ep > 1 and not c.model.num_experts then
    fail("config.parallelism.ep: %d needs a mixture-of-experts model; '%s' is dense", p.ep,
      c.model.id)
  end
  if p.sequence_parallel and p.tp == 1 then
    fail('config.parallelism.sequence_parallel: needs parallelism.tp > 1 (tp = 1)')
  end
  if c.model.num_layers % p.pp ~= 0 then
    fail('config.parallelism.pp: %d does not divide the %d layers of %s', p.pp,
      c.model.num_layers, c.model.id)
  end
  if c.model.num_attention_heads % p.tp ~= 0 or c.model.num_kv_heads % p.tp ~= 0 then
    fail('config.parallelism.tp: %d does not divide the %d attention heads / %d KV heads of %s',
      p.tp, c.model.num_attention_heads, c.model.num_kv_heads, c.model.id)
  end
  if p.cp > 1 and t.seq_len % (2 * p.cp) ~= 0 then
    fail('config.training.seq_len: %d is not a multiple of 2*cp = %d', t.seq_len, 2 * p.cp)
  end
  if t.seq_len > c.model.max_position_embeddings then
    fail('config.training.seq_len: %d exceeds max_position_embeddings %d of %s', t.seq_len,
      c.model.max_position_embeddings, c.model.id)
  end
  if t.lr <= 0 then
    fail('config.training.lr: must be > 0, got %s', tostring(t.lr))
  end
  if t.min_lr < 0 or t.min_lr > t.lr then
    fail('config.training.min_lr: must be in [0, lr], got %s', tostring(t.min_lr))
  end
  if t.warmup < 0 or t.warmup > t.iters then
    fail('config.training.warmup: must be in [0, iters], got %d', t.warmup)
  end
  if t.precision == 'fp8' and t.fp8_recipe == nil then
    fail('config.training.fp8_recipe: required when training.precision is fp8')
  end
  if t.precision ~= 'fp8' and t.fp8_recipe ~= nil then
    fail("config.training.fp8_recipe: set but training.precision is '%s'", t.precision)
  end
  c.data = dataset_spec(c)
  return c
end

-- ---------------------------------------------------------------------------------------------
-- Number formatting and parsing shared by the adapters.

--- Formats a number the way Python's str() prints it: integers plainly, floats with the
--- shortest representation that reads back exactly, a whole float with '.0' (1.0, 0.0).
---@param x number
---@return string
function M._fmt_number(x)
  if math.type(x) == 'integer' then
    return string.format('%d', x)
  end
  if x == math.floor(x) and math.abs(x) < 1e16 then
    return string.format('%.1f', x)
  end
  for digits = 1, 17 do
    local s = string.format('%.' .. digits .. 'g', x)
    if tonumber(s) == x then
      -- Python writes two exponent digits at least, as C does: 1e-08, 3e-05.
      return s
    end
  end
  return string.format('%.17g', x)
end

local function strip(s)
  return (s:gsub('^%s+', ''):gsub('%s+$', ''))
end

local function unquote(s)
  s = strip(s)
  local inner = s:match('^"(.*)"$') or s:match("^'(.*)'$")
  return inner or s
end
M._unquote = unquote

local function is_none(s)
  return s == 'None' or s == 'null' or s == 'NoneType' or s == ''
end

--- Converters from a printed value (Python str(), YAML or JSON text) to a Lua value; nil when
--- the printed value means "unset" (None, null) or cannot be read.
M._parse = {}

function M._parse.number(s)
  s = unquote(s)
  if is_none(s) then
    return nil
  end
  local low = s:lower()
  if low == 'nan' then
    return 0 / 0
  elseif low == 'inf' or low == '+inf' then
    return math.huge
  elseif low == '-inf' then
    return -math.huge
  end
  return tonumber(s)
end

function M._parse.integer(s)
  local n = M._parse.number(s)
  if n == nil then
    return nil
  end
  return math.tointeger(n) or n
end

function M._parse.boolean(s)
  s = unquote(s)
  if s == 'True' or s == 'true' then
    return true
  elseif s == 'False' or s == 'false' then
    return false
  end
  return nil
end

function M._parse.string(s)
  s = unquote(s)
  if is_none(s) then
    return nil
  end
  return s
end

-- "['/data/x']" or "/data/x" -> first element.
function M._parse.first_path(s)
  s = strip(s)
  if is_none(s) or s == '[]' then
    return nil
  end
  local inner = s:match('^%[(.*)%]$')
  if inner then
    local first = inner:match('^%s*([^,]+)')
    return first and unquote(first) or nil
  end
  return unquote(s)
end

--- Reads back a unified table from a parsed log's argument dump using a keymap: a list of
--- { key = 'training.lr', names = { 'lr' }, parse = fn(value, args) } entries, where `names`
--- are tried in order and the first present one is converted. Keys whose names are all absent
--- (or whose values mean "unset") are left out.
---@param keymap table[]
---@param args table<string, string>  name -> printed value
---@return table unified
function M._effective(keymap, args)
  if type(args) ~= 'table' then
    error('effective: args must be a table of name -> printed value', 3)
  end
  local out = {}
  for _, entry in ipairs(keymap) do
    local value
    if entry.read then
      value = entry.read(args)
    else
      for _, name in ipairs(entry.names) do
        local raw = args[name]
        if raw ~= nil then
          value = entry.parse(tostring(raw), args)
          break
        end
      end
    end
    if value ~= nil then
      local section, key = entry.key:match('^([%w_]+)%.([%w_]+)$')
      out[section] = out[section] or {}
      out[section][key] = value
    end
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- Text emitters for generated config files. Both take ordered lists so output is byte-stable.

local function yaml_scalar(v)
  if type(v) == 'boolean' then
    return v and 'true' or 'false'
  elseif type(v) == 'number' then
    local s = M._fmt_number(v)
    -- YAML 1.1 (PyYAML, which Primus uses) reads a float only with a '.': 1e-05 would load as
    -- a string, 1.0e-05 as a float (yaml.resolver float regexp).
    if math.type(v) == 'float' and s:find('e') and not s:find('%.') then
      s = s:gsub('e', '.0e', 1)
    end
    return s
  elseif v == M.NULL then
    return 'null'
  end
  local s = tostring(v)
  -- Quote anything YAML could read as another type or that holds syntax characters.
  if s == '' or s:find('^[%s%-?:,%[%]{}#&*!|>\'"%%@`]') or s:find(': ') or s:find(' #')
    or s:find('%s$') or tonumber(s) or s == 'true' or s == 'false' or s == 'null'
    or s == 'yes' or s == 'no' or s == '~' or s:find('[\n\r\t]') then
    return '"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n'):gsub('\t', '\\t')
      :gsub('\r', '\\r') .. '"'
  end
  return s
end

--- Sentinel for an explicit YAML null.
M.NULL = setmetatable({}, { __tostring = function()
  return 'null'
end })

--- Renders a YAML block mapping from { {key, value}, ... }; values may be scalars, M.NULL,
--- lists (sequence tables with `list = true`) or nested ordered lists of pairs.
---@param pairs_list table
---@param indent? integer
---@return string
function M._yaml(pairs_list, indent)
  indent = indent or 0
  local pad = string.rep(' ', indent)
  local out = {}
  for _, kv in ipairs(pairs_list) do
    local k, v = kv[1], kv[2]
    if type(v) == 'table' and v ~= M.NULL and v.list then
      local items = {}
      for _, item in ipairs(v) do
        items[#items + 1] = yaml_scalar(item)
      end
      out[#out + 1] = string.format('%s%s: [%s]\n', pad, k, table.concat(items, ', '))
    elseif type(v) == 'table' and v ~= M.NULL then
      out[#out + 1] = string.format('%s%s:\n', pad, k)
      out[#out + 1] = M._yaml(v, indent + 2)
    else
      out[#out + 1] = string.format('%s%s: %s\n', pad, k, yaml_scalar(v))
    end
  end
  return table.concat(out)
end

local function toml_value(v)
  if type(v) == 'boolean' then
    return v and 'true' or 'false'
  elseif type(v) == 'number' then
    return M._fmt_number(v)
  elseif type(v) == 'table' then
    local items = {}
    for _, item in ipairs(v) do
      items[#items + 1] = toml_value(item)
    end
    return '[' .. table.concat(items, ', ') .. ']'
  end
  return '"' .. tostring(v):gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n') .. '"'
end

--- Renders TOML from { {section, { {key, value}, ... }}, ... }.
---@param sections table
---@return string
function M._toml(sections)
  local out = {}
  for i, sec in ipairs(sections) do
    if i > 1 then
      out[#out + 1] = '\n'
    end
    out[#out + 1] = '[' .. sec[1] .. ']\n'
    for _, kv in ipairs(sec[2]) do
      out[#out + 1] = kv[1] .. ' = ' .. toml_value(kv[2]) .. '\n'
    end
  end
  return table.concat(out)
end

--- Joins a directory and a relative file name.
function M._join(dir, rel)
  if dir:sub(-1) == '/' then
    return dir .. rel
  end
  return dir .. '/' .. rel
end

--- Returns true when `path` is absolute.
function M._is_absolute(path)
  return path:sub(1, 1) == '/'
end

return M
