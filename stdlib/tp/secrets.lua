-- tp.secrets: keeps credentials out of everything tplua writes or prints. A variable whose name
-- contains TOKEN, KEY, SECRET or PASSWORD (any case) holds a secret; its value is replaced by
-- '<redacted>' in env tables, and wherever it appears verbatim in strings (argv words, commands,
-- records, journal lines).
local M = {}

--- What a secret value is replaced with.
M.REDACTED = '<redacted>'

--- Name fragments that mark an environment variable as secret (matched case-insensitively).
M.NAME_PATTERNS = { 'TOKEN', 'KEY', 'SECRET', 'PASSWORD' }

--- Values shorter than this (and numbers, true/false/yes/no/none/null) are redacted in env
--- tables but not searched for inside other strings: a two-letter "secret" would otherwise erase
--- every occurrence of those letters.
M.MIN_SCRUB_LEN = 4

-- Values that are words of configuration rather than credentials (TOKENIZERS_PARALLELISM=false
-- is common): redacted in env tables, never searched for elsewhere.
local function is_plain_word(v)
  local low = v:lower()
  return tonumber(v) ~= nil or low == 'true' or low == 'false' or low == 'none' or low == 'null'
    or low == 'yes' or low == 'no'
end

local function check(name, value, kind, optional)
  if value == nil and optional then
    return
  end
  if type(value) ~= kind then
    error(string.format('%s: %s expected, got %s', name, kind, type(value)), 3)
  end
end

--- Returns true when an environment variable name marks a secret.
---```lua
---tp.secrets.is_secret_name('HF_TOKEN')      --> true
---tp.secrets.is_secret_name('wandb_api_key') --> true
---tp.secrets.is_secret_name('CUDA_VISIBLE_DEVICES') --> false
---```
---@param name string
---@return boolean
function M.is_secret_name(name)
  check('name', name, 'string')
  local up = name:upper()
  for _, p in ipairs(M.NAME_PATTERNS) do
    if up:find(p, 1, true) then
      return true
    end
  end
  return false
end

--- Reads this process's environment as it was at start-up (/proc/self/environ, proc(5)): Lua
--- itself cannot list it. Returns an empty table where /proc is not mounted.
---@return table<string, string>
function M.process_env()
  local env = {}
  local f = io.open('/proc/self/environ', 'rb')
  if not f then
    return env
  end
  local data = f:read('a') or ''
  f:close()
  for entry in data:gmatch('([^%z]+)') do
    local name, value = entry:match('^([^=]+)=(.*)$')
    if name then
      env[name] = value
    end
  end
  return env
end

---@class tp.secrets.Scrubber
---@field values string[] secret values searched for in strings, longest first
local Scrubber = {}
Scrubber.__index = Scrubber

--- Creates a scrubber that knows the secret values of the given env tables
--- ({NAME = value | false}); `opts.process_env = true` (default) adds the secrets of this
--- process's own environment, which every child inherits.
---```lua
---local s = tp.secrets.new({ { HF_TOKEN = 'hf_abc123' } })
---print(s:string('--token=hf_abc123'))  --> --token=<redacted>
---```
---@param envs? table[] env tables
---@param opts? {process_env?: boolean}
---@return tp.secrets.Scrubber
function M.new(envs, opts)
  check('envs', envs, 'table', true)
  check('opts', opts, 'table', true)
  opts = opts or {}
  local seen, values = {}, {}
  local function add(name, v)
    if type(name) == 'string' and type(v) == 'string' and M.is_secret_name(name)
      and #v >= M.MIN_SCRUB_LEN and not is_plain_word(v) and not seen[v] then
      seen[v] = true
      values[#values + 1] = v
    end
  end
  if opts.process_env ~= false then
    for name, v in pairs(M.process_env()) do
      add(name, v)
    end
  end
  for i, env in ipairs(envs or {}) do
    if type(env) ~= 'table' then
      error(string.format('envs[%d]: table expected, got %s', i, type(env)), 2)
    end
    for name, v in pairs(env) do
      add(name, type(v) == 'number' and tostring(v) or v)
    end
  end
  -- Longest first, so that a secret containing another is replaced whole.
  table.sort(values, function(a, b)
    return #a > #b or (#a == #b and a < b)
  end)
  return setmetatable({ values = values }, Scrubber)
end

--- Adds the secrets of one more env table.
---@param env table
function Scrubber:add_env(env)
  check('env', env, 'table')
  local merged = M.new({ env }, { process_env = false })
  local seen = {}
  for _, v in ipairs(self.values) do
    seen[v] = true
  end
  for _, v in ipairs(merged.values) do
    if not seen[v] then
      self.values[#self.values + 1] = v
    end
  end
  table.sort(self.values, function(a, b)
    return #a > #b or (#a == #b and a < b)
  end)
end

--- Replaces every verbatim occurrence of a known secret value in `s`.
---@param s string
---@return string scrubbed
---@return integer count replacements made
function Scrubber:string(s)
  check('s', s, 'string')
  local total = 0
  for _, v in ipairs(self.values) do
    local start = 1
    local parts = nil
    while true do
      local i, j = s:find(v, start, true)
      if not i then
        break
      end
      parts = parts or {}
      parts[#parts + 1] = s:sub(start, i - 1)
      parts[#parts + 1] = M.REDACTED
      start = j + 1
      total = total + 1
    end
    if parts then
      parts[#parts + 1] = s:sub(start)
      s = table.concat(parts)
    end
  end
  return s, total
end

--- Returns a copy of an env table with the values of secret names redacted (and any known
--- secret value inside other values scrubbed). `false` (unset) stays `false`.
---@param env table<string, string|number|false>
---@return table
function Scrubber:env(env)
  check('env', env, 'table')
  local out = {}
  for name, v in pairs(env) do
    if type(name) == 'string' and M.is_secret_name(name) and v ~= false then
      out[name] = M.REDACTED
    elseif type(v) == 'string' then
      out[name] = (self:string(v))
    else
      out[name] = v
    end
  end
  return out
end

-- A NAME=value word (as `env` or a container's `-e` takes them) with a secret NAME.
local function redact_assignment(word)
  local name, value = word:match('^([%a_][%w_]*)=(.*)$')
  if name and value ~= '' and M.is_secret_name(name) then
    return name .. '=' .. M.REDACTED
  end
  return word
end

--- Returns a copy of an argv list: NAME=value words with a secret NAME are redacted, and every
--- known secret value is scrubbed from every word.
---@param argv string[]
---@return string[]
function Scrubber:argv(argv)
  check('argv', argv, 'table')
  local out = {}
  for i, a in ipairs(argv) do
    out[i] = (self:string(redact_assignment(tostring(a))))
  end
  return out
end

--- Returns a deep copy of `v` in which every string (keys included) is scrubbed. Env tables
--- inside it should go through `Scrubber:env` first (names are not looked at here: a field such
--- as `tokenizer` is not a secret). Metatables are kept (so tp.json arrays and null stay what
--- they are); cycles are preserved.
---@param v any
---@return any
function Scrubber:value(v)
  local seen = {}
  local function walk(x)
    local t = type(x)
    if t == 'string' then
      return (self:string(x))
    elseif t ~= 'table' then
      return x
    end
    if seen[x] then
      return seen[x]
    end
    local mt = getmetatable(x)
    if mt ~= nil and next(x) == nil then
      return x  -- sentinels such as tp.json.null: shared, never copied
    end
    local out = {}
    seen[x] = out
    for k, val in pairs(x) do
      out[walk(k)] = walk(val)
    end
    if mt ~= nil then
      setmetatable(out, mt)
    end
    return out
  end
  return walk(v)
end

return M
