-- tp.config_env: imports a Primus/tprimat-style `config.env` (shell KEY=value lines, sourced by
-- the older tooling's scripts and passed to `docker --env-file`) as an experiment spec, the table
-- tp.experiment takes. Every key has one documented unified meaning (M.KEYS, docs/recipes.md);
-- an unknown key is an error naming the file and the line, never a silent default.
local M = {}

--- The largest file read (1 MiB, as tp.config.MAX_FILE_SIZE).
M.MAX_FILE_SIZE = 1024 * 1024

-- Problems listed in one failure message; the rest are counted.
local MAX_ERRORS = 10

local DATA_PREP = 'data preparation (tplua data prepare), not a training setting'
local PROFILER = "tprimat's torch profiler schedule: profile with the recipe's `profile` field "
  .. 'or --profile (docs/recipes.md)'

--- The keys a config.env may set: the unified key path (or spec field) each one sets and its
--- kind. `alias` keys name the same setting under tprimat's other spelling.
M.KEYS = {
  NAME = { path = 'name', kind = 'string' },
  MODEL = { path = 'model', kind = 'string' },
  METHODOLOGY = { path = 'methodology', kind = 'string' },
  PLATFORMS = { path = 'platforms', kind = 'string' },
  AMD_FRAMEWORK = { path = 'platforms.amd.framework', kind = 'string' },
  NVD_FRAMEWORK = { path = 'platforms.nvd.framework', kind = 'string' },
  AMD_GPU = { path = 'platforms.amd.hardware', kind = 'string' },
  NVD_GPU = { path = 'platforms.nvd.hardware', kind = 'string' },
  REPEATS = { path = 'repeats', kind = 'integer' },
  NODES = { path = 'nodes', kind = 'integer' },
  GPUS_PER_NODE = { path = 'gpus_per_node', kind = 'integer' },
  SEED = { path = 'training.seed', kind = 'integer' },
  MBS = { path = 'training.mbs', kind = 'integer' },
  GBS = { path = 'training.gbs', kind = 'integer' },
  GA = { path = 'training.ga', kind = 'integer' },
  GRAD_ACCUM = { path = 'training.ga', kind = 'integer', alias = 'GA' },
  SEQ_LEN = { path = 'training.seq_len', kind = 'integer' },
  SL = { path = 'training.seq_len', kind = 'integer', alias = 'SEQ_LEN' },
  TRAIN_ITERS = { path = 'training.iters', kind = 'integer' },
  LR = { path = 'training.lr', kind = 'number' },
  MIN_LR = { path = 'training.min_lr', kind = 'number' },
  WARMUP_STEPS = { path = 'training.warmup', kind = 'integer' },
  LR_DECAY_STEPS = { path = nil, kind = 'integer' },  -- checked against TRAIN_ITERS
  WEIGHT_DECAY = { path = 'training.weight_decay', kind = 'number' },
  BETA1 = { path = 'training.beta1', kind = 'number' },
  BETA2 = { path = 'training.beta2', kind = 'number' },
  PRECISION = { path = 'training.precision', kind = 'string' },
  FP8_HYBRID = { path = nil, kind = 'boolean' },  -- true: fp8 with the delayed recipe
  FP8_PARAM = { path = nil, kind = 'boolean' },  -- true is refused: not expressible
  TP = { path = 'parallelism.tp', kind = 'integer' },
  PP = { path = 'parallelism.pp', kind = 'integer' },
  CP = { path = 'parallelism.cp', kind = 'integer' },
  EP = { path = 'parallelism.ep', kind = 'integer' },
  DP = { path = 'parallelism.dp', kind = 'integer' },
  DATASET = { path = 'training.dataset', kind = 'string' },
  TOKENIZER = { path = 'training.tokenizer', kind = 'string' },
  DATA_DIR = { path = 'paths.data', kind = 'string' },
  OUTPUT_DIR = { path = 'results', kind = 'string' },
  -- Variables the training processes read: given to every platform's runs as they are.
  HF_HOME = { env = true },
  HF_DATASETS_CACHE = { env = true },
  TRANSFORMERS_CACHE = { env = true },
  CUDA_LAUNCH_BLOCKING = { env = true },
  -- Read and not used, with the reason (tprimat's data preparation and profiler schedule).
  DATA_SAMPLES = { ignored = DATA_PREP },
  TRAIN_SPLIT = { ignored = DATA_PREP },
  PROFILING = { ignored = PROFILER },
  PROFILE_WAIT = { ignored = PROFILER },
  PROFILE_WARMUP = { ignored = PROFILER },
  PROFILE_ACTIVE = { ignored = PROFILER },
  PROFILE_REPEAT = { ignored = PROFILER },
}

--- The platforms planned when PLATFORMS is not set, and each one's framework and GPU when the
--- file does not name them (tprimat's pair: Primus on MI300X, Megatron-LM on H100).
M.PLATFORM_DEFAULTS = {
  amd = { framework = 'primus', hardware = 'mi300x' },
  nvd = { framework = 'megatron', hardware = 'h100-sxm' },
}

local function known_keys()
  local out = {}
  for k in pairs(M.KEYS) do
    out[#out + 1] = k
  end
  table.sort(out)
  return table.concat(out, ', ')
end

-- Expands $VAR, ${VAR}, ${VAR-default} and ${VAR:-default} in an unquoted or double-quoted
-- value, in one pass (a substituted value is not expanded again): the file's earlier assignments
-- first, then `lookup` (the environment). Returns the text, or nil, why.
local function expand(s, vars, lookup)
  if s:find('$(', 1, true) or s:find('`', 1, true) then
    return nil, 'command substitution and $((...)) arithmetic are not supported: write the value'
  end
  local function value(name)
    local v = vars[name]
    if v == nil then
      v = lookup(name)
    end
    return v
  end
  local out, i = {}, 1
  while true do
    local d = s:find('$', i, true)
    if not d then
      out[#out + 1] = s:sub(i)
      break
    end
    out[#out + 1] = s:sub(i, d - 1)
    local name, op, default, stop
    local braced = s:match('^%b{}', d + 1)
    if braced then
      name, op, default = braced:match('^{([%a_][%w_]*)(:?%-?)(.*)}$')
      if not name or (op == '' and default ~= '') then
        return nil, string.format("'$%s': only ${VAR}, ${VAR-default} and ${VAR:-default} are "
          .. 'supported', braced)
      end
      stop = d + #braced
    else
      name = s:match('^[%a_][%w_]*', d + 1)
      if not name then
        return nil, "a '$' that starts no variable name (write '\\$' in double quotes, or "
          .. 'single-quote the value)'
      end
      op, default, stop = '', '', d + #name
    end
    local v = value(name)
    if (op == ':-' and (v == nil or v == '')) or (op == '-' and v == nil) then
      v = default
    end
    if v == nil then
      return nil, string.format('%s is not set (write ${%s:-default} for a default)', name, name)
    end
    out[#out + 1] = v
    i = stop + 1
  end
  return table.concat(out)
end

-- Splits the value part of `KEY=value  # comment` the way sh reads one word: single quotes
-- (literal), double quotes (\" \\ \$ escapes, expansion), bare characters (expansion); a `#` after
-- white space starts a comment. Returns the value, or nil, why.
local function read_value(rest, vars, lookup)
  local out, i, n = {}, 1, #rest
  while i <= n do
    local c = rest:sub(i, i)
    if c == "'" then
      local j = rest:find("'", i + 1, true)
      if not j then
        return nil, 'unterminated single quote (a value spans one line)'
      end
      out[#out + 1] = rest:sub(i + 1, j - 1)
      i = j + 1
    elseif c == '"' then
      local buf, j = {}, i + 1
      while true do
        local d = rest:sub(j, j)
        if d == '' then
          return nil, 'unterminated double quote (a value spans one line)'
        elseif d == '\\' and rest:sub(j + 1, j + 1):match('["\\$`]') then
          buf[#buf + 1] = rest:sub(j + 1, j + 1) == '$' and '\0' or rest:sub(j + 1, j + 1)
          j = j + 2
        elseif d == '"' then
          break
        else
          buf[#buf + 1] = d
          j = j + 1
        end
      end
      local v, err = expand(table.concat(buf), vars, lookup)
      if not v then
        return nil, err
      end
      out[#out + 1] = (v:gsub('%z', '$'))
      i = j + 1
    elseif c:match('%s') then
      local tail = rest:sub(i):match('^%s*(.-)$')
      if tail ~= '' and tail:sub(1, 1) ~= '#' then
        return nil, string.format("more than one word: '%s' (quote a value with spaces)", rest)
      end
      break
    else
      local j = rest:find('[%s\'"]', i) or n + 1
      local v, err = expand(rest:sub(i, j - 1), vars, lookup)
      if not v then
        return nil, err
      end
      out[#out + 1] = v
      i = j
    end
  end
  return table.concat(out)
end

local BOOLEANS = { ['true'] = true, ['1'] = true, yes = true, on = true, ['false'] = false,
  ['0'] = false, no = false, off = false }

-- Types a value by its key's kind; nil, why when it is not one.
local function typed(kind, s)
  if kind == 'string' then
    if s == '' then
      return nil, 'empty value'
    end
    return s
  elseif kind == 'integer' then
    local v = s:match('^[+-]?%d+$') and math.tointeger(tonumber(s))
    if not v then
      return nil, string.format('integer expected, got "%s"', s)
    end
    return v
  elseif kind == 'number' then
    local v = tonumber(s)
    if not v or v ~= v or v == math.huge or v == -math.huge or s:match('^%s*0[xX]') then
      return nil, string.format('number expected, got "%s"', s)
    end
    return v
  end
  local b = BOOLEANS[s:lower()]
  if b == nil then
    return nil, string.format('true or false expected, got "%s"', s)
  end
  return b
end

local function set_path(t, path, v)
  local cur = t
  local parts = {}
  for p in path:gmatch('[^.]+') do
    parts[#parts + 1] = p
  end
  for i = 1, #parts - 1 do
    cur[parts[i]] = cur[parts[i]] or {}
    cur = cur[parts[i]]
  end
  cur[parts[#parts]] = v
end

--- Reads config.env text into its assignments: `{ {key=, value= (typed), line=}, ... }` and the
--- notes on keys read but not used. Fails with `nil, '<name>:<line>: <problem>; ...', code`
--- ('EPARSE' for text that is not KEY=value lines, 'EINVAL' for unknown keys and bad values).
---```lua
---local entries = assert(tp.config_env.parse('TP=1\nPP=1\n', { name = 'config.env' }))
---```
---@param text string
---@param opts? {name?: string, env?: table|fun(name: string): string?}
---@return table|nil entries
---@return string|table err_or_notes
---@return string? code
function M.parse(text, opts)
  if type(text) ~= 'string' then
    error('tp.config_env.parse: text must be a string, got ' .. type(text), 2)
  end
  opts = opts or {}
  local name = opts.name or '<string>'
  local env = opts.env
  local lookup = type(env) == 'function' and env
    or type(env) == 'table' and function(k) return env[k] end
    or os.getenv
  local nul = text:find('%z')
  if nul then
    local _, line = text:sub(1, nul):gsub('\n', '')
    return nil, string.format('%s:%d: NUL byte: a text file of KEY=value lines expected', name,
      line + 1), 'EPARSE'
  end
  if not utf8.len(text) then
    local _, bad = utf8.len(text)
    local _, line = text:sub(1, bad):gsub('\n', '')
    return nil, string.format('%s:%d: invalid UTF-8 (byte 0x%02X): a text file of KEY=value '
      .. 'lines expected', name, line + 1, text:byte(bad)), 'EPARSE'
  end
  local entries, notes, errors, vars, first = {}, {}, {}, {}, {}
  local code = 'EINVAL'
  local lineno = 0
  for line in (text:sub(-1) == '\n' and text or text .. '\n'):gmatch('([^\n]*)\n') do
    lineno = lineno + 1
    line = line:gsub('\r$', '')
    local body = line:match('^%s*(.-)%s*$')
    if body ~= '' and body:sub(1, 1) ~= '#' then
      body = body:gsub('^export%s+', '')
      local key, rest = body:match('^([%a_][%w_]*)=(.*)$')
      local spec = key and M.KEYS[key]
      if not key then
        code = 'EPARSE'
        errors[#errors + 1] = string.format("%s:%d: not a KEY=value line: '%s'%s", name, lineno,
          body, body:find('^[%a_][%w_]*%s+=') and " (no spaces around '=')" or '')
      elseif not spec then
        errors[#errors + 1] = string.format("%s:%d: unknown key '%s' (known: %s)", name, lineno,
          key, known_keys())
      else
        local raw, err = read_value(rest, vars, lookup)
        local v
        if raw then
          vars[key] = raw
          if spec.env or spec.ignored then
            v = raw
          else
            v, err = typed(spec.kind, raw)
          end
        end
        local same = spec.alias or key
        if err then
          errors[#errors + 1] = string.format('%s:%d: %s: %s', name, lineno, key, err)
        elseif first[same] then
          errors[#errors + 1] = string.format('%s:%d: %s is set again (first at line %d%s)',
            name, lineno, same, first[same].line, first[same].key ~= key
            and (' as ' .. first[same].key) or '')
        else
          first[same] = { line = lineno, key = key }
          if spec.ignored then
            notes[#notes + 1] = string.format('%s:%d: %s is not used: %s', name, lineno, key,
              spec.ignored)
          else
            entries[#entries + 1] = { key = key, value = v, line = lineno }
          end
        end
      end
    end
  end
  if #errors > 0 then
    local shown = { table.unpack(errors, 1, math.min(#errors, MAX_ERRORS)) }
    if #errors > MAX_ERRORS then
      shown[#shown + 1] = string.format('%s: ... and %d more problems', name,
        #errors - MAX_ERRORS)
    end
    return nil, table.concat(shown, '; '), code
  end
  if #entries == 0 and #notes == 0 then
    return nil, string.format('%s: no KEY=value line (%s)', name, #text == 0 and 'empty file'
      or 'only blank lines and comments'), 'EINVAL'
  end
  return entries, notes
end

-- Builds the spec from the typed entries; nil, message on a setting with no unified meaning.
local function build(entries, name, opts)
  local spec, by_key, env = {}, {}, nil
  for _, e in ipairs(entries) do
    by_key[M.KEYS[e.key].alias or e.key] = e
  end
  local function where(key)
    return string.format('%s:%d: %s', name, by_key[key].line, key)
  end
  local platforms = {}
  if by_key.PLATFORMS then
    for p in by_key.PLATFORMS.value:gmatch('[^,%s]+') do
      if not M.PLATFORM_DEFAULTS[p] then
        return nil, string.format("%s: unknown platform '%s' (amd, nvd)", where('PLATFORMS'), p)
      end
      platforms[#platforms + 1] = p
    end
  else
    platforms = { 'amd', 'nvd' }
  end
  spec.platforms = {}
  for _, p in ipairs(platforms) do
    spec.platforms[p] = { framework = M.PLATFORM_DEFAULTS[p].framework,
      hardware = M.PLATFORM_DEFAULTS[p].hardware }
  end
  for _, e in ipairs(entries) do
    local k = M.KEYS[e.key]
    if k.env then
      env = env or {}
      env[e.key] = e.value
    elseif k.path and k.path:match('^platforms%.') then
      local p = k.path:match('^platforms%.(%a+)%.')
      if not spec.platforms[p] then
        return nil, string.format('%s: platform %s is not planned (PLATFORMS=%s)', where(e.key),
          p, table.concat(platforms, ','))
      end
      set_path(spec, k.path, e.value)
    elseif k.path and k.path ~= 'platforms' then
      set_path(spec, k.path, e.value)
    end
  end
  for p in pairs(spec.platforms) do
    spec.platforms[p].env = env
  end
  if opts.model then
    spec.model = opts.model
  end
  if spec.model == nil then
    return nil, string.format('%s: MODEL is not set: add MODEL=<a tp.models id, e.g. '
      .. 'llama3.1-8b> (or give --model)', name)
  end
  local id = spec.model:lower():gsub('_', '-')
  if require('tp.catalog.models').get(id) then
    spec.model = id
  end
  local tr, par = spec.training or {}, spec.parallelism or {}
  if by_key.FP8_PARAM and by_key.FP8_PARAM.value then
    return nil, where('FP8_PARAM') .. ': true is not expressible in the unified config (FP8 '
      .. 'parameters); set it to false'
  end
  if by_key.FP8_HYBRID and by_key.FP8_HYBRID.value then
    if by_key.PRECISION and tr.precision ~= 'fp8' and tr.precision ~= 'bf16' then
      return nil, string.format('%s: true asks for fp8, but PRECISION is %s', where('FP8_HYBRID'),
        tr.precision)
    end
    tr.precision, tr.fp8_recipe = 'fp8', 'delayed'
  end
  if by_key.LR_DECAY_STEPS and by_key.LR_DECAY_STEPS.value ~= tr.iters then
    return nil, string.format('%s: %d, but the unified config decays over training.iters '
      .. '(TRAIN_ITERS = %s): give the same number', where('LR_DECAY_STEPS'),
      by_key.LR_DECAY_STEPS.value, tostring(tr.iters))
  end
  -- tprimat wrote the global batch as MBS x DP x GA.
  if tr.gbs == nil and tr.mbs and par.dp and tr.ga then
    tr.gbs = tr.mbs * par.dp * tr.ga
  end
  -- The layout names the GPU count: tp x pp x cp x dp over the nodes.
  if spec.gpus_per_node == nil and par.dp then
    local world = (par.tp or 1) * (par.pp or 1) * (par.cp or 1) * par.dp
    local nodes = spec.nodes or 1
    if world % nodes == 0 then
      spec.gpus_per_node = world // nodes
    end
  end
  if spec.name == nil then
    local stem = name:match('([^/]*)$'):gsub('%.env$', '')
    spec.name = (stem ~= '' and stem or 'config') .. '-' .. spec.model
  end
  return spec
end

---@class tp.config_env.LoadOpts
---@field model? string the model (a tp.models id) when the file sets no MODEL, or instead of it
---@field env? table|fun(name: string): string? variables for $VAR expansion after the file's own
---  (default os.getenv)

--- Loads a config.env as an experiment spec (what tp.experiment takes): each key as M.KEYS maps
--- it, the platforms and their frameworks from PLATFORMS / *_FRAMEWORK / *_GPU or
--- M.PLATFORM_DEFAULTS, GBS from MBS x DP x GA when only those are given, gpus_per_node from
--- tp x pp x cp x dp / nodes. Returns the spec and the notes on keys read but not used. Fails with
--- `nil, '<path>:<line>: <problem>', code`: 'ENOENT' (no file), 'ELIMIT' (above MAX_FILE_SIZE),
--- 'EPARSE' (binary data, lines that are not KEY=value), 'EINVAL' (unknown keys, bad values).
---```lua
---local spec, notes = assert(tp.config_env.load('config.env', { model = 'llama3.1-8b' }))
---local exp = tp.experiment.new(spec, { source = 'config.env' })
---```
---@param path string
---@param opts? tp.config_env.LoadOpts
---@return table|nil spec
---@return string|string[] err_or_notes
---@return string? code
function M.load(path, opts)
  if type(path) ~= 'string' then
    error('tp.config_env.load: path must be a string, got ' .. type(path), 2)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= 'model' and k ~= 'env' then
      error(string.format("tp.config_env.load: unknown option '%s'", tostring(k)), 2)
    end
  end
  local text, err, code = require('tp.json').read_text(path, M.MAX_FILE_SIZE)
  if not text then
    return nil, err, code
  end
  local entries, notes
  entries, notes, code = M.parse(text, { name = path, env = opts.env })
  if not entries then
    return nil, notes, code
  end
  local spec, berr = build(entries, path, opts)
  if not spec then
    return nil, berr, 'EINVAL'
  end
  return spec, notes
end

--- True when `path` names a config.env: a `.env` file name, or `config.env` itself.
---@param path string
---@return boolean
function M.is_env_file(path)
  return type(path) == 'string' and path:match('%.env$') ~= nil
end

return M
