-- tp.yaml: YAML text <-> Lua values over the tp._yaml binding (libyaml), with the YAML 1.2 core
-- schema, anchors and aliases (bounded), merge keys, and explicit ${VAR} expansion.
-- Rules and limits: docs/yaml-json.md.
local C = require('tp._yaml')
local cjson = require('tp._json')
local json_check_opts = require('tp.json')._check_opts

local M = {}

--- Default largest input `load`, `load_all` and `load_file` accept, in bytes (64 MiB). YAML
--- here is configuration; larger inputs need an explicit `opts.max_size`.
M.DEFAULT_MAX_SIZE = 64 * 1024 * 1024

--- The null sentinel, the same value as tp.json.null.
M.null = C.null

local LOAD_OPTS = {
  name = 'string',
  null = 'any',
  max_depth = 'integer',
  max_alias_nodes = 'integer',
  max_size = 'integer',
}

local DUMP_OPTS = {
  sort_keys = 'boolean',
  indent = 'integer',
  width = 'integer',
}

-- Checks an options table as tp.json does (unknown fields and wrong types raise at the caller's
-- level), then the ranges of the load limits.
local function check_opts(fname, opts, spec)
  opts = json_check_opts(fname, opts, spec, 4)
  if opts.max_depth ~= nil and opts.max_depth < 1 then
    error(('%s: option "max_depth" must be >= 1'):format(fname), 3)
  end
  if opts.max_alias_nodes ~= nil and opts.max_alias_nodes < 0 then
    error(('%s: option "max_alias_nodes" must be >= 0'):format(fname), 3)
  end
  return opts
end

local function check_text(fname, text, opts)
  if type(text) ~= 'string' then
    error(('%s: string expected, got %s'):format(fname, type(text)), 3)
  end
  local max = opts.max_size or M.DEFAULT_MAX_SIZE
  if #text > max then
    return ('%s: input is %d bytes, above max_size (%d bytes)'):format(
      opts.name or '<string>',
      #text,
      max
    )
  end
end

---@class tp.yaml.LoadOpts
---@field name? string source named in messages (default '<string>', or the path for load_file)
---@field null? any value stored for null (default: a null mapping value leaves its key out; a
---  null in a sequence or as a whole document is tp.yaml.null)
---@field max_depth? integer deepest nesting of sequences and mappings (default 512)
---@field max_alias_nodes? integer most nodes reached through aliases, each alias counting the
---  size of the node it names (default 1000000; stops "billion laughs")
---@field max_size? integer largest input in bytes (default DEFAULT_MAX_SIZE)

--- Loads the first document of a YAML stream (the rest is parsed and checked too). Plain
--- scalars are typed by the YAML 1.2 core schema (ints, floats incl. .inf/.nan, true/false,
--- null/~/empty); quoted scalars stay strings; yes/no/on/off are strings. Fails with
--- `nil, '<source>:<line>:<column>: <problem>', 'EPARSE'` ('ELIMIT' for size, depth and alias
--- limits): syntax errors, duplicate keys, NUL bytes, invalid UTF-8, unknown tags, an empty
--- stream. Never expands ${VAR} (see expand_env).
---```lua
---local cfg = assert(yaml.load('training: {iters: 500, lr: 3.0e-4}'))
---```
---@param text string
---@param opts? tp.yaml.LoadOpts
---@return any|nil value
---@return string? err
---@return string? code
function M.load(text, opts)
  opts = check_opts('yaml.load', opts, LOAD_OPTS)
  local err = check_text('yaml.load', text, opts)
  if err then
    return nil, err, 'ELIMIT'
  end
  return C.load(text, opts)
end

--- Loads every document of a YAML stream (`---` separated) into a list (empty for an empty
--- stream). Same rules and failures as `load`.
---@param text string
---@param opts? tp.yaml.LoadOpts
---@return any[]|nil documents
---@return string? err
---@return string? code
function M.load_all(text, opts)
  opts = check_opts('yaml.load_all', opts, LOAD_OPTS)
  local err = check_text('yaml.load_all', text, opts)
  if err then
    return nil, err, 'ELIMIT'
  end
  return C.load_all(text, opts)
end

--- Reads and loads the first document of a YAML file; messages name the file. Missing files,
--- directories and unreadable files fail with `nil, '<path>: <reason>', '<ERRNO>'`.
---```lua
---local cfg = assert(yaml.load_file('examples/llama.yaml'))
---```
---@param path string
---@param opts? tp.yaml.LoadOpts
---@return any|nil value
---@return string? err
---@return string? code
function M.load_file(path, opts)
  if type(path) ~= 'string' then
    error(('yaml.load_file: path must be a string, got %s'):format(type(path)), 2)
  end
  opts = check_opts('yaml.load_file', opts, LOAD_OPTS)
  local text, err, code = cjson.read_file(path, opts.max_size or M.DEFAULT_MAX_SIZE)
  if not text then
    return nil, err, code
  end
  local o = {}
  for k, v in pairs(opts) do
    o[k] = v
  end
  o.name = o.name or path
  return C.load(text, o)
end

---@class tp.yaml.DumpOpts
---@field sort_keys? boolean mapping keys sorted, integers first (default true)
---@field indent? integer spaces per level, 2..9 (default 2)
---@field width? integer preferred line width (default -1: long strings are never folded)

--- Writes a Lua value as one YAML document in block style. Strings that would read back as
--- another type (in YAML 1.2 or 1.1) are single-quoted, multi-line strings use `|` blocks;
--- floats always carry a '.', so they stay floats. Tables with keys exactly 1..n (or empty
--- and marked with tp.json.array) are sequences, others mappings with string or integer keys.
--- Cycles, functions and other key types fail with `nil, '<path>: <problem>', 'EINVAL'`.
---```lua
---print(yaml.dump({ model = 'llama3.1-8b', gbs = 64 }))
---```
---@param value any
---@param opts? tp.yaml.DumpOpts
---@return string|nil text
---@return string? err
---@return string? code
function M.dump(value, opts)
  opts = check_opts('yaml.dump', opts, DUMP_OPTS)
  local o = { sort_keys = opts.sort_keys, indent = opts.indent, width = opts.width }
  if o.sort_keys == nil then
    o.sort_keys = true
  end
  if o.indent ~= nil and (o.indent < 2 or o.indent > 9) then
    error('yaml.dump: option "indent" must be within 2..9', 2)
  end
  if o.width ~= nil and o.width < -1 then
    error('yaml.dump: option "width" must be >= -1', 2)
  end
  return C.dump(value, o)
end

-- Key path in the same form as the C side's messages: $.name, $["odd key"], $[3].
local function path_join(path, k)
  if type(k) == 'string' and k:match('^[%a_][%w_]*$') and #k <= 40 then
    return path .. '.' .. k
  elseif type(k) == 'string' then
    return ('%s[%q]'):format(path, k)
  end
  return ('%s[%s]'):format(path, tostring(k))
end

-- Expands ${NAME} and ${NAME:-default} in one string; '$${' stands for a literal '${'.
local function expand_string(s, lookup, where)
  if not s:find('$', 1, true) then
    return s
  end
  local out, i = {}, 1
  while true do
    local j = s:find('$', i, true)
    if not j then
      out[#out + 1] = s:sub(i)
      break
    end
    out[#out + 1] = s:sub(i, j - 1)
    if s:sub(j, j + 2) == '$${' then
      out[#out + 1] = '${'
      i = j + 3
    elseif s:sub(j + 1, j + 1) == '{' then
      local close = s:find('}', j + 2, true)
      if not close then
        return nil, ('expand_env: %s: unterminated "${" in %q'):format(where, s), 'EINVAL'
      end
      local body = s:sub(j + 2, close - 1)
      local name, default = body:match('^([%a_][%w_]*):%-(.*)$')
      if not name then
        name = body:match('^([%a_][%w_]*)$')
      end
      if not name then
        return nil, ('expand_env: %s: invalid reference "${%s}"'):format(where, body), 'EINVAL'
      end
      local v = lookup(name)
      if v == nil or (default ~= nil and v == '') then
        if default == nil then
          return nil,
            ('expand_env: %s: environment variable %s is not set (no default in "${%s}")'):format(
              where,
              name,
              body
            ),
            'ENOENT'
        end
        v = default
      end
      out[#out + 1] = v
      i = close + 1
    else
      out[#out + 1] = '$'
      i = j + 1
    end
  end
  return table.concat(out)
end

local function expand(v, lookup, where, memo)
  if type(v) == 'string' then
    return expand_string(v, lookup, where)
  elseif type(v) ~= 'table' then
    return v
  end
  if memo[v] then
    return memo[v]
  end
  local r = {}
  memo[v] = r
  for k, x in pairs(v) do
    local e, err, code = expand(x, lookup, path_join(where, k), memo)
    if e == nil then
      return nil, err, code
    end
    r[k] = e
  end
  return setmetatable(r, getmetatable(v))
end

--- Returns a copy of `value` (a string, or a table as `load` returns) in which every string
--- value has `${NAME}` replaced by the variable's value and `${NAME:-default}` by the value, or
--- by `default` when the variable is unset or empty; `$${` gives a literal `${`. Keys are not
--- expanded; tables shared through aliases stay shared in the copy. `env` is a table of
--- NAME = value or a function(name) -> value|nil (default os.getenv). An unset variable without
--- default fails with `nil, 'expand_env: <path>: environment variable NAME is not set ...',
--- 'ENOENT'`, where path reads like `$.data.path`. Loading never expands by itself.
---```lua
---local cfg = assert(yaml.expand_env(assert(yaml.load_file('exp.yaml'))))
---```
---@param value any
---@param env? table<string, string>|fun(name: string): string?
---@return any|nil value
---@return string? err
---@return string? code
function M.expand_env(value, env)
  local lookup
  if env == nil then
    lookup = os.getenv
  elseif type(env) == 'function' then
    lookup = env
  elseif type(env) == 'table' then
    lookup = function(name)
      return env[name]
    end
  else
    error(('yaml.expand_env: env must be a table or a function, got %s'):format(type(env)), 2)
  end
  local checked = function(name)
    local v = lookup(name)
    if v ~= nil and type(v) ~= 'string' then
      if type(v) ~= 'number' then
        error(('yaml.expand_env: value of %s must be a string, got %s'):format(name, type(v)), 0)
      end
      v = tostring(v)
    end
    return v
  end
  return expand(value, checked, '$', {})
end

return M
