-- tp.analyse._op_models: the table-driven performance models of profiler ops. A registry maps
-- a CPU op name (exactly, or by a Lua pattern) to a model that turns the op's Input Dims, Input
-- type, Input Strides and Concrete Inputs into FLOPs and bytes moved per call, with the
-- precision the FLOPs run in and whether matrix or vector units run them. The built-in models
-- follow AMD's TraceLens where it has one (docs/ops.md lists the formulas and the differences);
-- users put their own in front.
--
--   local set = models.new()
--   models.add(set, { name = 'my::op', class = 'gemm', category = 'GEMM', fn = function(op) end })
--   local res, why = models.evaluate(set, { name = 'aten::mm', dims = {...}, types = {...} })

local B = require('tp.analyse._op_models_base')
local gemm = require('tp.analyse._op_models_gemm')
local attention = require('tp.analyse._op_models_attention')
local norm = require('tp.analyse._op_models_norm')
local vector = require('tp.analyse._op_models_vector')

-- The built-in models, in the order their names are registered.
local parts = { gemm, attention, norm, vector }

local M = {}

--- The kernel classes a model's ops belong to (those of tp.analyse.trace's kernel classes that
--- compute), and whether matrix units run them.
M.CLASSES = { gemm = 'matrix', attention = 'matrix', convolution = 'matrix',
  normalization = 'vector', elementwise = 'vector', optimizer = 'vector', other = 'vector' }

M.precision_of = B.precision_of
M.bytes_per_element = B.bytes_per_element

local ENTRY_FIELDS = { name = true, names = true, pattern = true, class = true, category = true,
  fn = true }

-- Checks an entry and returns a copy of it; misuse raises at `level`.
local function check_entry(e, level)
  if type(e) ~= 'table' then
    error('op model: a table { name | names | pattern, class, category, fn } expected', level)
  end
  for k in pairs(e) do
    if not ENTRY_FIELDS[k] then
      error('op model: unknown field ' .. tostring(k), level)
    end
  end
  local keys = (e.name ~= nil and 1 or 0) + (e.names ~= nil and 1 or 0)
    + (e.pattern ~= nil and 1 or 0)
  if keys ~= 1 then
    error('op model: exactly one of name, names and pattern expected', level)
  end
  local copy = { class = e.class, category = e.category, fn = e.fn }
  if e.name ~= nil then
    if type(e.name) ~= 'string' or e.name == '' then
      error('op model: name must be a non-empty string', level)
    end
    copy.names = { e.name }
  elseif e.names ~= nil then
    if not B.is_list(e.names) or #e.names == 0 then
      error('op model: names must be a non-empty list of op names', level)
    end
    copy.names = {}
    for i, n in ipairs(e.names) do
      if type(n) ~= 'string' or n == '' then
        error(('op model: names[%d] must be a non-empty string'):format(i), level)
      end
      copy.names[i] = n
    end
  else
    if type(e.pattern) ~= 'string' or e.pattern == '' then
      error('op model: pattern must be a non-empty string', level)
    end
    local ok, err = pcall(string.find, '', e.pattern)
    if not ok then
      error(('op model: bad pattern %q: %s'):format(e.pattern, err), level)
    end
    copy.pattern = e.pattern
  end
  if type(e.class) ~= 'string' or not e.class:match('^[%w_%-]+$') then
    error('op model: class must be a word (gemm, attention, convolution, normalization, '
      .. 'elementwise, optimizer, other)', level)
  end
  if type(e.category) ~= 'string' or e.category == '' then
    error('op model: category must be a non-empty string', level)
  end
  if type(e.fn) ~= 'function' then
    error('op model: fn must be a function', level)
  end
  copy.name = copy.names and copy.names[1] or nil
  return copy
end

---@class tp.analyse.OpModel
---@field name? string one op name
---@field names? string[] several op names
---@field pattern? string a Lua pattern on the op name
---@field class string a kernel class: gemm, attention, convolution, normalization, ...
---@field category string TraceLens's category: GEMM, SDPA_fwd, NORM_bwd, ...
---@field fn fun(op: table): table|nil, string? the model: op -> result, or nil and a reason

--- A fresh registry holding the built-in models.
---```lua
---local set = models.new()
---models.evaluate(set, { name = 'aten::mm', dims = { {8, 16}, {16, 4} } }).flops  --> 1024
---```
---@return table set
function M.new()
  local set = { exact = {}, patterns = {} }
  for _, part in ipairs(parts) do
    for _, e in ipairs(part.entries) do
      local entry = check_entry(e, 2)
      if entry.pattern then
        set.patterns[#set.patterns + 1] = entry
      else
        for _, n in ipairs(entry.names) do
          set.exact[n] = set.exact[n] or entry
        end
      end
    end
  end
  return set
end

--- Puts a user's model in front: its names override the built-in models (and earlier user
--- models) of the same names; a pattern entry is tried before the patterns already there.
--- Misuse raises at `level` (default: the caller of add).
---@param set table a registry from new()
---@param entry tp.analyse.OpModel
---@param level? integer the level blamed for a malformed entry (1: add's caller)
---@return table entry the entry as stored
function M.add(set, entry, level)
  level = (level or 1) + 1
  if type(set) ~= 'table' or type(set.exact) ~= 'table' then
    error('op model: a registry from new() expected', level)
  end
  local e = check_entry(entry, level + 1)
  if e.pattern then
    table.insert(set.patterns, 1, e)
  else
    for _, n in ipairs(e.names) do
      set.exact[n] = e
    end
  end
  return e
end

--- The entry for an op name: an exact name first, then the pattern entries in order; or nil.
---@param set table
---@param name string
---@return table|nil entry
function M.lookup(set, name)
  if type(name) ~= 'string' then
    return nil
  end
  local e = set.exact[name]
  if e then
    return e
  end
  for _, p in ipairs(set.patterns) do
    local ok, found = pcall(string.find, name, p.pattern)
    if ok and found then
      return p
    end
  end
  return nil
end

--- The op names with an exact entry, sorted, and the patterns in the order they are tried.
---@param set table
---@return string[] names
---@return string[] patterns
function M.list(set)
  local names, patterns = {}, {}
  for n in pairs(set.exact) do
    names[#names + 1] = n
  end
  table.sort(names)
  for i, p in ipairs(set.patterns) do
    patterns[i] = p.pattern
  end
  return names, patterns
end

local function finite(x)
  return type(x) == 'number' and x == x and x ~= math.huge and x ~= -math.huge
end

-- Checks what a model returned and builds the result.
local function build(entry, res)
  if type(res) ~= 'table' then
    return nil, 'model error: the model returned a ' .. type(res)
  end
  if not finite(res.flops) or res.flops < 0 then
    return nil, 'model error: flops is not a number >= 0: ' .. B.repr(res.flops)
  end
  if res.bytes ~= nil and (not finite(res.bytes) or res.bytes < 0) then
    return nil, 'model error: bytes is not a number >= 0: ' .. B.repr(res.bytes)
  end
  if res.precision ~= nil and type(res.precision) ~= 'string' then
    return nil, 'model error: precision is not a string'
  end
  local compute = res.compute or M.CLASSES[entry.class] or 'vector'
  if compute ~= 'matrix' and compute ~= 'vector' then
    return nil, "model error: compute is neither 'matrix' nor 'vector': " .. B.repr(compute)
  end
  if res.params ~= nil and type(res.params) ~= 'table' then
    return nil, 'model error: params is not a table'
  end
  if res.note ~= nil and type(res.note) ~= 'string' then
    return nil, 'model error: note is not a string'
  end
  return {
    flops = B.num(res.flops),
    bytes = res.bytes ~= nil and B.num(res.bytes) or nil,
    precision = res.precision,
    compute = compute,
    class = entry.class,
    category = entry.category,
    params = res.params or {},
    note = res.note,
  }
end

--- Runs the model of op.name on `op` ({ name, dims, types, strides, concrete }: the decoded
--- Input Dims, Input type, Input Strides and Concrete Inputs). Returns the result
--- { flops, bytes, precision, compute, class, category, params, note }, or nil and a reason:
--- 'no model', a malformed or absurd shape (naming the field and its index), or
--- 'model error: ...' when the model raised or returned something unusable.
---```lua
---local res, why = models.evaluate(set, { name = 'aten::mm', dims = { {8944, 1024}, {1024, 2816} },
---  types = { 'c10::BFloat16', 'c10::BFloat16' } })
---res.flops, res.bytes, res.precision  --> 51581550592, 74457088, 'bf16'
---```
---@param set table
---@param op table { name, dims?, types?, strides?, concrete? }
---@return table|nil result
---@return string? reason
function M.evaluate(set, op)
  if type(op) ~= 'table' then
    return nil, 'op is not a table'
  end
  if type(op.name) ~= 'string' then
    return nil, 'op has no name'
  end
  local entry = M.lookup(set, op.name)
  if not entry then
    return nil, 'no model'
  end
  local ok, res, why = pcall(entry.fn, op)
  if not ok then
    if B.is_reason(res) then
      return nil, res.reason
    end
    return nil, 'model error: ' .. tostring(res)
  end
  if res == nil then
    if type(why) == 'string' and why ~= '' then
      return nil, why
    end
    return nil, 'model error: the model returned nothing'
  end
  return build(entry, res)
end

return M
