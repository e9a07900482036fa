-- tp.analyse._memory_timeline: PyTorch's own memory timeline, as
-- torch.profiler.profile.export_memory_timeline writes it (torch >= 2.1, from
-- torch/profiler/_memory_profiler.py): the raw events (`.raw.json.gz`: a list of [time ns,
-- action, bytes, category], the file Holistic Trace Analysis' MemoryAnalysis reads) or the plot
-- points (`.json` / `.json.gz`: [times us, sizes by category]). Its categories come from
-- PyTorch's analysis of the autograd graph, where tplua's are derived from phases and lifetimes
-- (docs/memory.md): read both when a run has both.
local json = require('tp.json')

local M = {}

--- PyTorch's categories in the index order of its export (_memory_profiler.py
--- _CATEGORY_TO_INDEX: Category members in order, then None), with their labels.
M.CATEGORIES = { 'parameter', 'optimizer_state', 'input', 'temporary', 'activation', 'gradient',
  'autograd_detail', 'unknown' }
M.LABELS = { parameter = 'parameters', optimizer_state = 'optimizer state', input = 'inputs',
  temporary = 'temporaries', activation = 'activations', gradient = 'gradients',
  autograd_detail = 'autograd detail', unknown = 'unknown' }

local NCAT = #M.CATEGORIES

local function fail(path, fmt, ...)
  return nil, path .. ': ' .. string.format(fmt, ...), 'EINVAL'
end

-- The raw events into times and sizes per category at each time, as HTA's MemoryAnalysis
-- (hta/memory_analysis.py, _process_raw_events) does: one entry per distinct time in file
-- order, each category's bytes the sum of the events so far; pre-existing allocations (time -1)
-- placed at the first real time.
local function from_raw(path, list)
  local times, sizes = {}, {}
  local t_min = -1
  for i, e in ipairs(list) do
    if type(e) ~= 'table' or #e ~= 4 then
      return fail(path, 'event %d is not [time, action, bytes, category]', i)
    end
    local t, action, bytes, cat = e[1], e[2], e[3], e[4]
    if math.type(t) ~= 'integer' or math.type(bytes) ~= 'integer'
      or math.type(cat) ~= 'integer' or cat < 0 or cat >= NCAT
      or math.type(action) ~= 'integer' or action < 1 or action > 4 then
      return fail(path, 'event %d: [%s, %s, %s, %s] is not [integer time, action 1-4, integer '
        .. 'bytes, category 0-%d]', i, tostring(t), tostring(action), tostring(bytes),
        tostring(cat), NCAT - 1)
    end
    if t_min == -1 or (t < t_min and t > 0) then
      t_min = t
    end
    if #times == 0 then
      times[1] = t
      sizes[1] = {}
      for c = 1, NCAT do
        sizes[1][c] = 0
      end
    elseif t ~= times[#times] then
      times[#times + 1] = t
      local prev, row = sizes[#sizes], {}
      for c = 1, NCAT do
        row[c] = prev[c]
      end
      sizes[#sizes + 1] = row
    end
    local row = sizes[#sizes]
    row[cat + 1] = row[cat + 1] + bytes
  end
  for i, t in ipairs(times) do
    if t < 0 then
      times[i] = t_min
    end
  end
  return times, sizes, 'ns'
end

-- The plot points: [times (us), sizes] with one row per time of 8 categories, or 9 with a
-- leading 0 (torch's _coalesce_timeline keeps an unused first column).
local function from_points(path, doc)
  local times, rows = doc[1], doc[2]
  if type(times) ~= 'table' or type(rows) ~= 'table' or #times ~= #rows then
    return fail(path, 'not [times, sizes] of the same length')
  end
  local sizes = {}
  for i, r in ipairs(rows) do
    if type(r) ~= 'table' or (#r ~= NCAT and #r ~= NCAT + 1) then
      return fail(path, 'sizes[%d] does not have %d or %d numbers', i, NCAT, NCAT + 1)
    end
    local off = #r - NCAT
    local row = {}
    for c = 1, NCAT do
      local v = r[c + off]
      if type(v) ~= 'number' then
        return fail(path, 'sizes[%d][%d] is not a number', i, c + off)
      end
      row[c] = v
    end
    if type(times[i]) ~= 'number' then
      return fail(path, 'times[%d] is not a number', i)
    end
    sizes[i] = row
  end
  return times, sizes, 'us'
end

--- Whether a file name is PyTorch's memory-timeline export ('*memory_timeline*.json[.gz]' or
--- '*.raw.json[.gz]').
---@param path string
---@return boolean
function M.is_timeline_name(path)
  local p = path:gsub('%.gz$', '')
  return p:find('%.json$') ~= nil and (p:find('memory_timeline', 1, true) ~= nil
    or p:find('%.raw%.json$') ~= nil)
end

--- Reads a memory-timeline export (plain or gzip). Returns `{path, format = 'raw'|'points',
--- time_unit = 'ns'|'us', times = {...}, sizes = {{bytes per category}...}, peak, peak_time,
--- peak_index, at_peak = {category = bytes}}` (the peak: the largest sum over the categories),
--- or nil, message, code.
---@param path string
---@return table|nil, string?, string?
function M.read(path)
  local text, trunc_or_err, code = require('tp._trace').read_text(path)
  if not text then
    return nil, trunc_or_err, code
  end
  if trunc_or_err == true then
    return nil, path .. ': the gzip stream ends early', 'EINVAL'
  end
  local ok, doc = pcall(json.decode, text)
  if not ok or type(doc) ~= 'table' then
    return fail(path, 'not JSON: %s', ok and 'not a list' or tostring(doc))
  end
  local times, sizes, unit
  local first = doc[1]
  if type(first) == 'table' and #doc >= 1 and type(first[1]) == 'number' and #first == 4 then
    times, sizes, unit = from_raw(path, doc)
  elseif #doc == 2 and type(first) == 'table' then
    times, sizes, unit = from_points(path, doc)
  elseif #doc == 0 then
    return fail(path, 'an empty memory timeline')
  else
    return fail(path, 'neither raw memory events ([[time, action, bytes, category], ...]) nor '
      .. 'plot points ([times, sizes])')
  end
  if not times then
    return nil, sizes, unit
  end
  local out = { path = path, format = unit == 'ns' and 'raw' or 'points', time_unit = unit,
    times = times, sizes = sizes, peak = 0 }
  for i, row in ipairs(sizes) do
    local s = 0
    for c = 1, NCAT do
      s = s + row[c]
    end
    if s > out.peak or not out.peak_index then
      out.peak, out.peak_index, out.peak_time = s, i, times[i]
    end
  end
  out.at_peak = {}
  if out.peak_index then
    for c, name in ipairs(M.CATEGORIES) do
      out.at_peak[name] = sizes[out.peak_index][c]
    end
  end
  return out
end

return M
