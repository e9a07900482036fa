-- tp.launch: launchers that wrap a command ({ argv, env, ... }) for how it must be started
-- (as is, under torchrun, inside a container), composable, plus a printable, secret-redacted
-- shell form of any command.

local M = {}

local NAMES = { 'container', 'local', 'ranks', 'slurm', 'torchrun' }

--- Lists the launcher names, sorted.
---@return string[]
function M.list()
  local out = {}
  for i, n in ipairs(NAMES) do
    out[i] = n
  end
  return out
end

--- Returns a launcher module ({ wrap = fn(cmd, opts) -> cmd }), or nil, message, 'ENOENT'.
---@param name string
---@return table|nil launcher, string? err, string? code
function M.get(name)
  if type(name) ~= 'string' then
    error('launch.get: name must be a string, got ' .. type(name), 2)
  end
  for _, n in ipairs(NAMES) do
    if n == name then
      return require('tp.launch.' .. name)
    end
  end
  return nil, string.format("launch: unknown launcher '%s' (known: %s)", name,
    table.concat(NAMES, ', ')), 'ENOENT'
end

--- Returns true when an environment variable name looks like it holds a secret: its name
--- contains TOKEN, KEY, SECRET or PASSWORD (any case).
---@param name string
---@return boolean
function M.is_secret(name)
  local up = tostring(name):upper()
  return up:find('TOKEN', 1, true) ~= nil or up:find('KEY', 1, true) ~= nil
    or up:find('SECRET', 1, true) ~= nil or up:find('PASSWORD', 1, true) ~= nil
end

--- Quotes one word for a POSIX shell; words of safe characters are left bare.
---@param s string
---@return string
function M.shquote(s)
  s = tostring(s)
  if s ~= '' and not s:find('[^%w@%%+=:,%./%-_]') then
    return s
  end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- Checks the common shape of a command and returns a shallow copy with copied argv and env.
---@param cmd table
---@param who string  caller name for messages
---@return table
function M._copy(cmd, who)
  if type(cmd) ~= 'table' then
    error(who .. ': cmd must be a table, got ' .. type(cmd), 3)
  end
  if type(cmd.argv) ~= 'table' or #cmd.argv == 0 then
    error(who .. ': cmd.argv must be a non-empty list', 3)
  end
  if cmd.env ~= nil and type(cmd.env) ~= 'table' then
    error(who .. ': cmd.env must be a table', 3)
  end
  local out = {}
  for k, v in pairs(cmd) do
    out[k] = v
  end
  out.argv = {}
  for i, a in ipairs(cmd.argv) do
    if type(a) ~= 'string' then
      error(string.format('%s: cmd.argv[%d] must be a string, got %s', who, i, type(a)), 3)
    end
    out.argv[i] = a
  end
  out.env = {}
  for k, v in pairs(cmd.env or {}) do
    if type(k) ~= 'string' or type(v) ~= 'string' then
      error(who .. ': cmd.env must map strings to strings', 3)
    end
    out.env[k] = v
  end
  return out
end

--- Rejects option keys a launcher does not know.
---@param opts table|nil
---@param known table<string, string>  name -> expected Lua type
---@param who string
---@return table opts
function M._check_opts(opts, known, who)
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    error(who .. ': opts must be a table, got ' .. type(opts), 3)
  end
  for k, v in pairs(opts) do
    local kind = known[k]
    if kind == nil then
      error(string.format('%s: unknown option %s', who, tostring(k)), 3)
    end
    if kind ~= 'any' and type(v) ~= kind then
      error(string.format('%s: option %s must be a %s, got %s', who, k, kind, type(v)), 3)
    end
  end
  return opts
end

local function sorted(t)
  local keys = {}
  for k in pairs(t) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  return keys
end
M._sorted = sorted

-- A NAME=value word whose NAME is secret gets its value replaced.
local function redact_word(word)
  local name, value = word:match('^([%w_]+)=(.*)$')
  if name and value ~= '' and M.is_secret(name) then
    return name .. '=<redacted>'
  end
  return word
end

--- Returns the command as one shell line: `NAME=value ... argv...`, every word quoted, the
--- values of secret variables (env entries and NAME=value words in argv) shown as <redacted>.
---```lua
---print(tp.launch.describe({ argv = { 'python3', 'train.py' }, env = { HF_TOKEN = 'hf_x' } }))
----- HF_TOKEN='<redacted>' python3 train.py
---```
---@param cmd table  { argv = {...}, env = {...}, cwd? }
---@return string
function M.describe(cmd)
  local c = M._copy(cmd, 'launch.describe')
  local words = {}
  if c.cwd then
    words[#words + 1] = 'cd ' .. M.shquote(c.cwd) .. ' &&'
  end
  for _, k in ipairs(sorted(c.env)) do
    local v = M.is_secret(k) and '<redacted>' or c.env[k]
    -- Only the value is quoted: a quoted NAME= would be a command word, not an assignment.
    words[#words + 1] = k .. '=' .. M.shquote(v)
  end
  for _, a in ipairs(c.argv) do
    words[#words + 1] = M.shquote(redact_word(a))
  end
  return table.concat(words, ' ')
end

--- Applies launchers in order: steps = { {'torchrun', opts}, {'container', opts} } wraps the
--- command in torchrun, then the result in a container.
---@param cmd table
---@param steps table[]
---@return table cmd
function M.compose(cmd, steps)
  if type(steps) ~= 'table' then
    error('launch.compose: steps must be a list', 2)
  end
  for i, step in ipairs(steps) do
    if type(step) ~= 'table' or type(step[1]) ~= 'string' then
      error(string.format('launch.compose: steps[%d] must be { name, opts }', i), 2)
    end
    local launcher, err = M.get(step[1])
    if not launcher then
      error('launch.compose: ' .. err, 2)
    end
    cmd = launcher.wrap(cmd, step[2])
  end
  return cmd
end

return M
