-- tp.analyse._results_query: reading a run's values by key (tp.results.get) and the result set's
-- query methods: iter, where, group, group_keys, sort, map, values.
local decode = require('tp.analyse._results_decode')
local load_part = require('tp.analyse._results_load')

local M = {}

local is_null, is_finite = decode.is_null, decode.is_finite
local ResultSet, new_set = load_part.ResultSet, load_part.new_set

--- Returns the value of `key` for `run`: a summary field ('platform'), a dotted path into the
--- kept tables ('training_config.seed', 'gpu_info.device_name') or a function of the run.
---@param run table
---@param key string|fun(run: table): any
---@return any
function M.get(run, key)
  if type(key) == 'function' then
    return key(run)
  end
  local v = run[key]
  if v ~= nil or not key:find('.', 1, true) then
    if is_null(v) then
      return nil
    end
    return v
  end
  local cur = run
  for part in key:gmatch('[^.]+') do
    if type(cur) ~= 'table' or is_null(cur) then
      return nil
    end
    cur = cur[part]
  end
  if is_null(cur) then
    return nil
  end
  return cur
end

local get = M.get

local function check_key(fname, key)
  if type(key) ~= 'string' and type(key) ~= 'function' then
    error(string.format('ResultSet:%s: key must be a string or a function, got %s', fname,
      type(key)), 3)
  end
end

--- Iterates over the runs: `for i, run in set:iter() do`.
function ResultSet:iter()
  return ipairs(self.runs)
end

--- Keeps the runs that match: `filter` maps keys (as in tp.results.get) to a value (equal), a
--- list of values (any of them) or a predicate function(value, run); or `filter` is itself a
--- predicate function(run).
---```lua
---set:where({ platform = 'amd', gbs = { 64, 128 }, tokens_per_s = function(v) return v > 1e5 end })
---```
---@param filter table|fun(run: table): boolean
---@return table set
function ResultSet:where(filter)
  local pred
  if type(filter) == 'function' then
    pred = filter
  elseif type(filter) == 'table' then
    local conds = {}
    for k, want in pairs(filter) do
      check_key('where', k)
      conds[#conds + 1] = { k, want }
    end
    pred = function(run)
      for _, c in ipairs(conds) do
        local v, want = get(run, c[1]), c[2]
        if type(want) == 'function' then
          if not want(v, run) then
            return false
          end
        elseif type(want) == 'table' then
          local any = false
          for _, w in ipairs(want) do
            if v == w then
              any = true
              break
            end
          end
          if not any then
            return false
          end
        elseif v ~= want then
          return false
        end
      end
      return true
    end
  else
    error('ResultSet:where: filter must be a table or a function, got ' .. type(filter), 2)
  end
  local out = {}
  for _, r in ipairs(self.runs) do
    if pred(r) then
      out[#out + 1] = r
    end
  end
  return new_set(out, self.errors, self.skipped)
end

--- Splits the set by the value of `key`: {value = ResultSet}. Runs without a value go under the
--- string '(none)'. `set:group_keys(key)` gives the values in sorted order.
---@param key string|fun(run: table): any
---@return table<any, table> groups
function ResultSet:group(key)
  check_key('group', key)
  local groups = {}
  for _, r in ipairs(self.runs) do
    local v = get(r, key)
    if v == nil then
      v = '(none)'
    end
    local g = groups[v]
    if not g then
      g = new_set({}, self.errors, self.skipped)
      groups[v] = g
    end
    g.runs[#g.runs + 1] = r
  end
  return groups
end

local function compare_values(a, b)
  local ta, tb = type(a), type(b)
  if ta == tb and (ta == 'number' or ta == 'string') then
    return a < b
  end
  return tostring(a) < tostring(b)
end

--- Returns the distinct values of `key` in the set, sorted.
---@param key string|fun(run: table): any
---@return any[]
function ResultSet:group_keys(key)
  check_key('group_keys', key)
  local seen, out = {}, {}
  for _, r in ipairs(self.runs) do
    local v = get(r, key)
    if v == nil then
      v = '(none)'
    end
    if not seen[v] then
      seen[v] = true
      out[#out + 1] = v
    end
  end
  table.sort(out, compare_values)
  return out
end

--- Returns a new set sorted by `key` (stable; runs without a value last).
---@param key string|fun(run: table): any
---@param opts? {desc?: boolean}
---@return table set
function ResultSet:sort(key, opts)
  check_key('sort', key)
  local desc = opts and opts.desc or false
  local items = {}
  for i, r in ipairs(self.runs) do
    items[i] = { r, get(r, key), i }
  end
  table.sort(items, function(a, b)
    local va, vb = a[2], b[2]
    if va == nil or vb == nil then
      if va == nil and vb == nil then
        return a[3] < b[3]
      end
      return vb == nil
    end
    if va == vb then
      return a[3] < b[3]
    end
    if desc then
      return compare_values(vb, va)
    end
    return compare_values(va, vb)
  end)
  local out = {}
  for i, it in ipairs(items) do
    out[i] = it[1]
  end
  return new_set(out, self.errors, self.skipped)
end

--- Applies `fn(run)` to every run; returns the list of results (nil results are kept out).
---@param fn fun(run: table): any
---@return any[]
function ResultSet:map(fn)
  if type(fn) ~= 'function' then
    error('ResultSet:map: function expected, got ' .. type(fn), 2)
  end
  local out = {}
  for _, r in ipairs(self.runs) do
    local v = fn(r)
    if v ~= nil then
      out[#out + 1] = v
    end
  end
  return out
end

--- Returns the values of `key` over the runs that have one (numbers only when `numeric`).
---@param key string|fun(run: table): any
---@param numeric? boolean
---@return any[]
function ResultSet:values(key, numeric)
  check_key('values', key)
  local out = {}
  for _, r in ipairs(self.runs) do
    local v = get(r, key)
    if v ~= nil and (not numeric or is_finite(v)) then
      out[#out + 1] = v
    end
  end
  return out
end

return M
