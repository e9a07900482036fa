-- tp.present._trace_json: the JSON document of tplua trace --json (and --compare --json) in its
-- documented schema (docs/trace.md, "JSON output"): the schema and the time unit named at the
-- top, every time an integer number of nanoseconds (means over steps and ranks and the equal
-- shares of exclusive time are rounded to the nearest ns), every list an array even when empty.
local json = require('tp.json')

local M = {}

M.SCHEMA = 'tplua.trace/2'

-- The times of a step, a mean step and the CPU side (ns).
local STEP_TIMES = { 'start', 'window', 'busy', 'idle', 'compute', 'non_compute', 'comm',
  'comm_overlapped', 'comm_exposed', 'host_wait', 'dataloader', 'cpu_step' }
local CLASS_TIMES = { 'sum', 'time', 'exclusive' }
local LAUNCH_TIMES = { 'cpu', 'gpu', 'delay_sum', 'delay_min', 'delay_p50', 'delay_p90',
  'delay_p99', 'delay_max', 'cpu_mean', 'gpu_mean', 'delay_mean' }
-- Times inside the op tables and their pairings.
local OPS_TIMES = { per_step = true, mean = true, std = true, own = true, time = true, min = true,
  max = true, save = true, save_a = true, save_b = true, diff = true, time_a = true,
  time_b = true }
-- Keys whose values are lists: marked as arrays, so that an empty one is [] and not {}.
local LISTS = { ranks = true, errors = true, stragglers = true, warnings = true, steps = true,
  top = true, classes = true, rows = true, lines = true, pairs = true, only_a = true,
  only_b = true, verdicts = true, launch_bound = true, queue = true, queues = true, hta = true,
  checks = true, kernels = true, labels = true, devices = true }

local function ns(v)
  if type(v) ~= 'number' then
    return v
  end
  if v ~= v or v == math.huge or v == -math.huge then
    return nil
  end
  return math.floor(v + 0.5)
end

local function round(t, keys)
  if type(t) ~= 'table' then
    return
  end
  for _, k in ipairs(keys) do
    t[k] = ns(t[k])
  end
end

-- Marks the empty lists of `t` (by their key) as arrays, all the way down.
local function arrays(t, seen)
  if type(t) ~= 'table' or seen[t] then
    return
  end
  seen[t] = true
  for k, v in pairs(t) do
    if type(v) == 'table' then
      if LISTS[k] and next(v) == nil and getmetatable(v) == nil then
        t[k] = json.array()
      else
        arrays(v, seen)
      end
    end
  end
end

-- Rounds the OPS_TIMES keys of an op table or pairing, all the way down.
local function ops_times(t, seen)
  if type(t) ~= 'table' or seen[t] then
    return
  end
  seen[t] = true
  for k, v in pairs(t) do
    if OPS_TIMES[k] and type(v) == 'number' then
      t[k] = ns(v)
    elseif type(v) == 'table' then
      ops_times(v, seen)
    end
  end
end

-- A step or a mean step: its times, its classes' times, its idle causes and launch figures.
local function step(s)
  if type(s) ~= 'table' then
    return
  end
  round(s, STEP_TIMES)
  for _, c in pairs(type(s.class) == 'table' and s.class or {}) do
    round(c, CLASS_TIMES)
  end
  for k, v in pairs(type(s.cause) == 'table' and s.cause or {}) do
    s.cause[k] = ns(v)
  end
  round(s.launch, LAUNCH_TIMES)
  if type(s.longest) == 'table' then
    s.longest.dur = ns(s.longest.dur)
  end
end

local function rank(a)
  for _, s in ipairs(a.steps or {}) do
    step(s)
  end
  step(a.mean)
  for _, k in ipairs(a.top or {}) do
    k.total, k.mean = ns(k.total), ns(k.mean)
  end
  round(a.cpu, { 'host_wait', 'dataloader', 'cpu_step' })
  local id = a.idle
  if type(id) == 'table' then
    for k, v in pairs(type(id.causes) == 'table' and id.causes or {}) do
      id.causes[k] = ns(v)
    end
    round(id.launch, LAUNCH_TIMES)
  end
end

local function run(r)
  if type(r) ~= 'table' then
    return
  end
  for _, a in ipairs(r.ranks or {}) do
    rank(a)
  end
  step(r.mean)
end

--- Puts a document of tplua trace --json in the schema: changes and returns `doc` (a run's, with
--- `ranks`; or a comparison's, with `explanation`, `a` and `b`).
---@param doc table
---@return table
function M.doc(doc)
  doc.schema = M.SCHEMA
  doc.time_unit = 'ns'
  run(doc)
  run(doc.a)
  run(doc.b)
  local e = doc.explanation
  if type(e) == 'table' then
    round(e, { 'step_a', 'step_b', 'diff', 'sum', 'moved' })
    for _, r in ipairs(e.rows or {}) do
      round(r, { 'a', 'b', 'diff' })
    end
    if type(e.faster) == 'table' then
      round(e.faster, { 'fast', 'slow' })
    end
    for _, h in ipairs(e.host or {}) do
      round(h, { 'host_wait', 'idle', 'window' })
      for k, v in pairs(type(h.cause) == 'table' and h.cause or {}) do
        h.cause[k] = ns(v)
      end
    end
  end
  local seen = {}
  ops_times(doc.ops, seen)
  for _, side in ipairs({ doc, doc.a or {}, doc.b or {} }) do
    ops_times(side.ops, seen)
    for _, a in ipairs(side.ranks or {}) do
      ops_times(a.ops, seen)
    end
  end
  arrays(doc, {})
  return doc
end

return M
