-- tp.json: JSON text <-> Lua values (RFC 8259) over the tp._json binding (cJSON).
-- Decoding keeps integers exact and reports '<source>:<line>:<column>: <problem>'; encoding is
-- deterministic (sorted keys) so records and golden files compare byte for byte.
-- Rules and limits: docs/yaml-json.md.
local C = require('tp._json')

local M = {}

--- Default largest input `decode` and `load_file` accept, in bytes (1 GiB).
M.DEFAULT_MAX_SIZE = 1024 * 1024 * 1024

--- The value that stands for JSON null where nil cannot: in arrays (so they keep their length),
--- at the top level, and in objects when `opts.null = tp.json.null`. `tostring` gives 'null';
--- `encode` writes it as null. tp.yaml uses the same value.
M.null = C.null

local ARRAY_MT = C.array_mt

local DECODE_OPTS = {
  name = 'string',
  null = 'any',
  max_depth = 'integer',
  max_size = 'integer',
  skip = 'table',
}

local ENCODE_OPTS = {
  pretty = 'boolean',
  indent = 'integer',
  sort_keys = 'boolean',
  allow_nan = 'boolean',
}

-- Checks an options table against `spec` (field -> 'string' | 'boolean' | 'integer' | 'any');
-- unknown fields and wrong types are the caller's mistake: they raise at the caller's level
-- (`level`, default 3: the user of a public function that calls this directly).
local function check_opts(fname, opts, spec, level)
  level = level or 3
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    error(('%s: opts must be a table, got %s'):format(fname, type(opts)), level)
  end
  for k, v in pairs(opts) do
    local want = spec[k]
    if want == nil then
      error(('%s: unknown option %q'):format(fname, tostring(k)), level)
    end
    local ok = want == 'any' or type(v) == want or (want == 'integer' and math.type(v) == 'integer')
    if not ok then
      error(('%s: option %q must be %s, got %s'):format(fname, k, want, type(v)), level)
    end
  end
  return opts
end

-- tp.yaml checks its options by the same rules.
M._check_opts = check_opts

-- cJSON refuses more than 1000 levels (CJSON_NESTING_LIMIT in cJSON.h). Also checks `skip`.
local function check_depth(fname, opts)
  local d = opts.max_depth
  if d ~= nil and (d < 1 or d > 1000) then
    error(('%s: option "max_depth" must be within 1..1000'):format(fname), 3)
  end
  local skip = opts.skip
  if skip ~= nil then
    for k, v in pairs(skip) do
      if math.type(k) ~= 'integer' or type(v) ~= 'string' then
        error(('%s: option "skip" must be a list of member names'):format(fname), 3)
      end
    end
  end
end

-- A copy of the encode options with the defaults filled in; checks the indent range.
local function encode_opts(fname, opts, pretty)
  local o = {}
  for k, v in pairs(opts) do
    o[k] = v
  end
  if o.sort_keys == nil then
    o.sort_keys = true
  end
  if o.pretty == nil then
    o.pretty = pretty
  end
  if o.indent ~= nil and (o.indent < 0 or o.indent > 16) then
    error(('%s: option "indent" must be within 0..16'):format(fname), 3)
  end
  return o
end

local function copy(t)
  local r = {}
  for k, v in pairs(t) do
    r[k] = v
  end
  return r
end

--- Returns true when `v` is the null sentinel.
---@param v any
---@return boolean
function M.is_null(v)
  return rawequal(v, C.null)
end

--- Marks `t` (or a new empty table) as an array, so that it encodes as `[]` even when empty.
--- Decoded arrays carry the same mark. `t` must not have another metatable.
---```lua
---json.encode({ runs = json.array() })  --> '{"runs":[]}'
---```
---@param t? table
---@return table t
function M.array(t)
  if t == nil then
    t = {}
  end
  if type(t) ~= 'table' then
    error(('json.array: table expected, got %s'):format(type(t)), 2)
  end
  local mt = getmetatable(t)
  if mt ~= nil and mt ~= ARRAY_MT then
    error('json.array: table already has a metatable', 2)
  end
  return setmetatable(t, ARRAY_MT)
end

--- Returns true when `t` is a table marked as an array (by `array` or by decoding).
---@param t any
---@return boolean
function M.is_array(t)
  return type(t) == 'table' and getmetatable(t) == ARRAY_MT
end

---@class tp.json.DecodeOpts
---@field name? string source named in messages (default '<string>', or the path for load_file)
---@field null? any value stored for null members (default: the member is left out); also
---  replaces tp.json.null in arrays and at the top level
---@field max_depth? integer deepest nesting accepted, 1..1000 (default 512)
---@field max_size? integer largest input in bytes (default DEFAULT_MAX_SIZE)
---@field skip? string[] members of a top-level object to check but not convert: each array or
---  object among them becomes a skipped value (see `is_skipped`)

--- Decodes JSON text. Integers without fraction or exponent that fit in 64 bits are Lua
--- integers, other numbers floats; null is tp.json.null in arrays and at the top level and
--- leaves the member out of an object (unless `opts.null`); arrays are marked (see `array`).
--- Fails with `nil, '<source>:<line>:<column>: <problem>', 'EPARSE'` (or 'ELIMIT' for depth and
--- size).
---```lua
---local v = assert(json.decode('{"iters": 500, "lr": 3e-4}'))
---```
---@param text string
---@param opts? tp.json.DecodeOpts
---@return any|nil value
---@return string? err
---@return string? code
function M.decode(text, opts)
  if type(text) ~= 'string' then
    error(('json.decode: string expected, got %s'):format(type(text)), 2)
  end
  opts = check_opts('json.decode', opts, DECODE_OPTS)
  check_depth('json.decode', opts)
  local max = opts.max_size or M.DEFAULT_MAX_SIZE
  if #text > max then
    local name = opts.name or '<string>'
    local msg = ('%s: input is %d bytes, above max_size (%d bytes)'):format(name, #text, max)
    return nil, msg, 'ELIMIT'
  end
  return C.decode(text, opts)
end

local SKIPPED_MT = C.skipped_mt

SKIPPED_MT.__tostring = function(v)
  return ('tp.json.skipped %s (%d %s, bytes %d..%d)'):format(v.kind, v.count,
    v.kind == 'array' and 'elements' or 'members', v.first, v.last)
end

--- Returns true when `v` stands for a member left undecoded by `decode{skip = ...}`: a table
--- with `kind` ('array' or 'object'), `count` (its elements or members), `kinds` (how many of
--- them are 'number', 'string', 'null', 'boolean', 'array', 'object'), and `first`, `last`
--- (its text is `text:sub(first, last)`; `decode_skipped` decodes it).
---@param v any
---@return boolean
function M.is_skipped(v)
  return type(v) == 'table' and getmetatable(v) == SKIPPED_MT
end

--- Decodes a member that `decode(text, {skip = ...})` skipped, from the same `text`.
---@param text string the text given to decode
---@param v table the skipped value
---@param opts? tp.json.DecodeOpts
---@return any|nil value
---@return string? err
---@return string? code
function M.decode_skipped(text, v, opts)
  if not M.is_skipped(v) then
    error('json.decode_skipped: a skipped value expected', 2)
  end
  return M.decode(text:sub(v.first, v.last), opts)
end

---@class tp.json.EncodeOpts
---@field pretty? boolean newlines and indentation (default false: compact, no spaces)
---@field indent? integer spaces per level when pretty, 0..16 (default 2)
---@field sort_keys? boolean object keys in byte order (default true)
---@field allow_nan? boolean write NaN and infinities as null (default false: an error)

--- Encodes a Lua value as JSON text. Tables whose keys are exactly 1..n are arrays (an empty
--- table is `{}` unless marked with `array`), tables with string keys objects; mixed or sparse
--- tables, cycles, functions, NaN and infinities fail with `nil, '<path>: <problem>', 'EINVAL'`
--- where path reads like `$.runs[2].loss` (Lua indices). Integers are written exactly, floats
--- with the shortest text that reads back the same and a '.0' when integral.
---```lua
---json.encode({ b = 1, a = { 1.5, 2 } })  --> '{"a":[1.5,2],"b":1}'
---```
---@param value any
---@param opts? tp.json.EncodeOpts
---@return string|nil text
---@return string? err
---@return string? code
function M.encode(value, opts)
  opts = check_opts('json.encode', opts, ENCODE_OPTS)
  return C.encode(value, encode_opts('json.encode', opts, false))
end

--- Reads and decodes a JSON file; messages name the file. Missing files, directories and
--- unreadable files fail with `nil, '<path>: <reason>', '<ERRNO>'`.
---```lua
---local run = assert(json.load_file('output/run-1.json'))
---```
---@param path string
---@param opts? tp.json.DecodeOpts
---@return any|nil value
---@return string? err
---@return string? code
function M.load_file(path, opts)
  if type(path) ~= 'string' then
    error(('json.load_file: path must be a string, got %s'):format(type(path)), 2)
  end
  opts = check_opts('json.load_file', opts, DECODE_OPTS)
  check_depth('json.load_file', opts)
  local text, err, code = C.read_file(path, opts.max_size or M.DEFAULT_MAX_SIZE)
  if not text then
    return nil, err, code
  end
  local o = copy(opts)
  o.name = o.name or path
  return C.decode(text, o)
end

--- Reads a whole file (a regular file in one read of its size, or a stream) without decoding
--- it: for callers that keep the text, e.g. to decode skipped members later. More than
--- `max_size` bytes (default DEFAULT_MAX_SIZE) fails with 'ELIMIT'. For a regular file the
--- second value is its modification time as `tp.fs.stat` gives it, taken from the descriptor
--- that was read (no separate stat, no race between the two).
---@param path string
---@param max_size? integer
---@return string|nil text
---@return number|string|nil mtime (regular files) or err
---@return string? code
function M.read_text(path, max_size)
  if type(path) ~= 'string' then
    error(('json.read_text: path must be a string, got %s'):format(type(path)), 2)
  end
  return C.read_file(path, max_size or M.DEFAULT_MAX_SIZE)
end

---@class tp.json.ReadFilesOpts
---@field max_size? integer largest file, in bytes (default DEFAULT_MAX_SIZE)
---@field max_depth? integer the depth `file:decode` will use (default 512): files are scanned
---  with it; 0 reads them without scanning
---@field ahead? integer files read ahead of the caller (default 8; at least `threads`)
---@field threads? integer worker threads (default: the CPUs this process may use, minus one
---  for the caller, 1..4)

--- Reads the files at `paths` in order, each whole, on worker threads that run ahead of the
--- caller, and scans each as a JSON object on the way: `file:decode{skip = ...}` then only
--- converts the members it keeps (the skipped ones were checked by the worker), so that a caller
--- that works on each file in turn (tp.results loading thousands of records) finds the next one
--- read and checked. Iterates over files, in the order of `paths`, each with `file:path()`,
--- `file:error()` (nil, or err, code when it could not be read: missing, a directory, larger than
--- max_size), `file:stat()` ({size, mtime} of the descriptor read), `file:text()` (the whole
--- text, made a Lua string once) and `file:decode(opts)` (as `decode`; `opts.name` defaults to
--- the path). Leaving the loop early stops the workers.
---```lua
---for file in json.read_files({ 'a.json', 'b.json' }) do
---  local doc, err = file:decode({ skip = { 'records' } })
---end
---```
---@param paths string[]
---@param opts? tp.json.ReadFilesOpts
---@return function iterator, nil, nil, userdata reader (closed when the loop ends)
function M.read_files(paths, opts)
  if type(paths) ~= 'table' then
    error(('json.read_files: paths must be a list of strings, got %s'):format(type(paths)), 2)
  end
  for i = 1, #paths do
    if type(paths[i]) ~= 'string' then
      error(('json.read_files: paths[%d] must be a string, got %s'):format(i, type(paths[i])), 2)
    end
  end
  opts = check_opts('json.read_files', opts,
    { max_size = 'integer', max_depth = 'integer', ahead = 'integer', threads = 'integer' })
  local depth = opts.max_depth or 512
  if depth < 0 or depth > 1000 then
    error('json.read_files: option "max_depth" must be within 0..1000', 2)
  end
  local threads = opts.threads or math.max(1, math.min(4, require('tp.proc').cpu_count() - 1))
  if threads < 1 or threads > 256 then
    error('json.read_files: option "threads" must be within 1..256', 2)
  end
  local ahead = opts.ahead or math.max(8, threads)
  if ahead < 1 or ahead > 4096 then
    error('json.read_files: option "ahead" must be within 1..4096', 2)
  end
  local max = opts.max_size or M.DEFAULT_MAX_SIZE
  if max < 0 then
    error('json.read_files: option "max_size" must be >= 0', 2)
  end
  local files = C.read_files(table.move(paths, 1, #paths, 1, {}), max, depth, ahead, threads)
  return function()
    return files:next()
  end, nil, nil, files
end

-- file:decode takes decode's options, checked the same way (unknown names, types, depth).
local file_methods = C.file_mt.__index
local file_decode = file_methods.decode
function file_methods.decode(file, opts)
  opts = check_opts('file:decode', opts, DECODE_OPTS)
  check_depth('file:decode', opts)
  return file_decode(file, opts)
end

---@class tp.json.SaveOpts: tp.json.EncodeOpts
---@field pretty? boolean (default true for files)

--- Encodes `value` and replaces `path` with it atomically (temporary file in the same directory,
--- fsync, rename, fsync of the directory), ending the file with a newline. Nothing is written
--- when encoding fails; on a write failure the old file is left as it was.
---```lua
---assert(json.save_file('output/run-1.json', record))
---```
---@param path string
---@param value any
---@param opts? tp.json.SaveOpts
---@return true|nil ok
---@return string? err
---@return string? code
function M.save_file(path, value, opts)
  if type(path) ~= 'string' then
    error(('json.save_file: path must be a string, got %s'):format(type(path)), 2)
  end
  opts = check_opts('json.save_file', opts, ENCODE_OPTS)
  local text, err, code = C.encode(value, encode_opts('json.save_file', opts, true))
  if not text then
    return nil, ('%s: %s'):format(path, err), code
  end
  return C.write_file(path, text .. '\n')
end

return M
