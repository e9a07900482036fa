-- tp.history._set: the series History:series returns: a plain list of series rows (ipairs, #,
-- [i] work) that prints as a table at the prompt and has methods to go further (the points of
-- one series, its runs as text, the list with last values and trends).
local views = require('tp.history._views')

local M = {}

---@class tp.history.SeriesSet
local Set = {}

-- The history each set came from (weak: a set does not keep a closed history alive).
local HISTORY = setmetatable({}, { __mode = 'k' })

local SET_MT = {
  __name = 'tp.history.SeriesSet',
  __index = Set,
  __tostring = function(set)
    if #set == 0 then
      return 'no series (H:series() lists them all; H:add(DIR) adds runs)'
    end
    return views.series_table(set) .. string.format('%d series; S:show(i) shows one, '
      .. 'S:points(i) gives its points, S:table() the last values and trends', #set)
  end,
}

local function check(self, name)
  if getmetatable(self) ~= SET_MT then
    error(string.format('SeriesSet:%s: call it with a colon (S:%s(...))', name, name), 3)
  end
  return HISTORY[self]
end

-- The series row that `i` names in the set: a position, or a key.
local function pick(self, i, name)
  local s = math.type(i) == 'integer' and self[i] or nil
  if not s and type(i) == 'string' then
    for _, row in ipairs(self) do
      if row.key == i then
        s = row
      end
    end
  end
  if not s then
    error(string.format('SeriesSet:%s: no series %s in this set (1..%d or a key)', name,
      tostring(i), #self), 3)
  end
  return s
end

--- The keys of the series, in order.
---@return string[]
function Set:keys()
  check(self, 'keys')
  local out = {}
  for i, s in ipairs(self) do
    out[i] = s.key
  end
  return out
end

--- The points of the i-th series (or of the series with this key): History:points.
---@param i integer|string
---@param opts? {metric?: string, since?: string, last?: integer}
---@return table[]
function Set:points(i, opts)
  local h = check(self, 'points')
  local s = pick(self, i, 'points')
  return assert(h:points(s.key, opts))
end

-- Text that prints as it is at the prompt (no quotes, no escapes).
local TEXT_MT = { __tostring = function(t)
  return t.text
end, __name = 'tp.history.Text' }

local function text(s)
  return setmetatable({ text = s }, TEXT_MT)
end

--- The runs of the i-th series as `tplua history show` prints them.
---@param i integer|string
---@param opts? {metric?: string, since?: string, last?: integer}
function Set:show(i, opts)
  local h = check(self, 'show')
  local s = pick(self, i, 'show')
  opts = opts or {}
  return text(assert(views.show(h, s, { metric = opts.metric or 'tokens_per_s_per_gpu',
    since = opts.since, last = opts.last })))
end

--- The series with their last value and trend, as `tplua history list` prints them.
---@param opts? {metric?: string, last?: integer}
function Set:table(opts)
  local h = check(self, 'table')
  opts = opts or {}
  return text(assert(views.list(h, { metric = opts.metric or 'tokens_per_s_per_gpu',
    last = opts.last, rows = self })))
end

--- Makes the set of `rows` from history `h`.
---@param h table
---@param rows table[]
---@return tp.history.SeriesSet
function M.series_set(h, rows)
  local set = setmetatable(rows, SET_MT)
  HISTORY[set] = h
  return set
end

return M
