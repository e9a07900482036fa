-- tp.analyse._memory_section: the memory section of a comparison (tplua compare, tplua report,
-- the REPL): each run's measured memory per GPU with where the figure came from (the
-- allocator's events in its profiler traces, else the peak its framework printed in its log)
-- beside tp.plan.memory's estimate for its configuration and the estimate's error (across a
-- sweep, one row per point); the measurement against the estimate by component for the first
-- run of each group that has both; and, between the baseline group and each other group, the
-- two runs' memory from their traces side by side (tp.analyse.memory.compare). docs/memory.md.
local json = require('tp.json')
local plan = require('tp.analyse._memory_plan')

local M = {}

local GIB = 1024 * 1024 * 1024

local timeline_of  -- below

-- The groups of a comparison, the baseline first: {{value =, runs = {id...}}...}.
local function groups_of(set, cmp)
  if cmp and cmp.groups then
    return cmp.groups, cmp.by or 'platform', cmp.baseline
  end
  local by = (cmp and cmp.by) or 'platform'
  local keys = set:group_keys(by)
  local split = set:group(by)
  local base = (cmp and cmp.baseline) or ((by == 'platform' and split.nvd) and 'nvd' or keys[1])
  local out = {}
  for _, k in ipairs(keys) do
    local ids = {}
    for i, r in ipairs(split[k].runs) do
      ids[i] = r.id
    end
    table.insert(out, k == base and 1 or #out + 1, { value = k, runs = ids })
  end
  return out, by, base
end

-- The memory of a run's traces (tp.analyse.memory.of_run of `trace_of(run)`, the analysis of
-- its traces), or nil.
local function traced(run, memory, trace_of)
  if type(run.profile) ~= 'table' then
    return nil
  end
  local a = trace_of(run)
  return a and memory.of_run(a) or nil
end

-- PyTorch's memory timeline of a run, when its profile lists one (export_memory_timeline):
-- its peak and the peak's bytes by PyTorch's categories, or nil.
timeline_of = function(run, memory)
  local p = type(run.profile) == 'table' and run.profile or nil
  for _, t in ipairs(p and type(p.traces) == 'table' and p.traces or {}) do
    if type(t) == 'string' and memory.is_timeline_name(t) then
      local path = t:sub(1, 1) == '/' and t or require('tp.fs').join(
        require('tp.fs').dirname(run.path or '.'), t)
      local tl, err = memory.read_timeline(path)
      if tl then
        return { path = t, peak = tl.peak, at_peak = tl.at_peak }
      end
      return { path = t, error = err }
    end
  end
  return nil
end

--- The memory section of a result set: nil when no run has a measured figure or an estimate.
--- `cmp` is tp.analyse.compare's result (its groups, `by`, baseline) or {by =, baseline =}.
---@param set table a tp.results ResultSet
---@param cmp? table
---@param trace_of fun(run: table): table|nil the analysis of a run's traces
---  (tp.analyse.profiled.trace)
---@return table|nil {by, baseline, runs = {...}, groups = {...}, comparisons = {...}, notes}
function M.section(set, cmp, trace_of)
  local memory = require('tp.analyse.memory')
  local groups, by, baseline = groups_of(set, cmp)
  local by_id = {}
  for _, r in ipairs(set.runs) do
    by_id[r.id] = r
  end
  local sec = { by = by, baseline = baseline, runs = json.array(), groups = json.array(),
    comparisons = json.array(), notes = json.array() }
  local any = false
  for _, gr in ipairs(groups) do
    local g = { value = gr.value, runs = json.array() }
    for _, id in ipairs(gr.runs or {}) do
      local r = by_id[id]
      local tr = traced(r, memory, trace_of)
      local measured = plan.measured_of(r, tr and memory.summary({ ranks = { tr.rank } }) or nil)
      local est = plan.estimate_of(r)
      if measured or est then
        any = true
        local row = { id = id, group = gr.value, source = measured and measured.source or nil,
          peak_allocated = measured and measured.peak_allocated,
          peak_reserved = measured and measured.peak_reserved, device = measured
          and measured.device, name = measured and measured.name, capacity = measured
          and tonumber(measured.capacity), capacity_from = measured and measured.capacity_from,
          estimate = est and est.bytes.total, estimate_status = est and est.status }
        if type(row.capacity) == 'number' and type(row.peak_reserved) == 'number' then
          row.headroom = row.capacity - row.peak_reserved
        end
        if row.peak_allocated and row.estimate and row.estimate > 0 then
          row.error = row.estimate / row.peak_allocated - 1
        end
        if measured and est and not g.plan then
          g.plan = plan.for_json(plan.compare(measured, est))
          g.plan_run = id
        end
        if tr and not g.trace then
          g.trace, g.trace_run = tr.memory, id
        end
        row.timeline = timeline_of(r, memory)
        sec.runs[#sec.runs + 1] = row
        g.runs[#g.runs + 1] = id
      end
    end
    sec.groups[#sec.groups + 1] = g
  end
  if not any then
    return nil
  end
  local base = sec.groups[1]
  for i = 2, #sec.groups do
    local g = sec.groups[i]
    local x = { baseline = base.value, group = g.value }
    if base.trace and g.trace then
      x.runs = json.array({ base.trace_run, g.trace_run })
      local c = memory.compare(base.trace, g.trace, { tostring(base.value), tostring(g.value) })
      c.pairs = json.array(c.pairs)
      c.only = json.array({ json.array(c.only[1]), json.array(c.only[2]) })
      c.lines = json.array(c.lines)
      x.comparison = c
    else
      x.missing = string.format('%s has no profiler trace with memory events (profile with '
        .. 'profile_memory=True)', tostring(base.trace and g.value or base.value))
    end
    sec.comparisons[#sec.comparisons + 1] = x
  end
  for _, row in ipairs(sec.runs) do
    if row.source == 'trace' and row.peak_allocated then
      local r = by_id[row.id]
      local mm = type(r.memory_metrics) == 'table' and r.memory_metrics or {}
      local logged = type(mm.peak_memory_allocated_gib) == 'number'
        and mm.peak_memory_allocated_gib * GIB or nil
      if logged and logged > 0 and (row.peak_allocated / logged > 2
        or logged / row.peak_allocated > 2) then
        sec.notes[#sec.notes + 1] = string.format('%s: the peak its traces show (%.2f GiB) and '
          .. 'the one its log printed (%.2f GiB) are over 2x apart: the traces may be of '
          .. 'another run or part of it', row.id, row.peak_allocated / GIB,
          logged / GIB)
      end
    end
  end
  return sec
end

--- A copy of a section for JSON: each group without the whole memory of its trace.
---@param sec table
---@return table
function M.for_json(sec)
  local out = {}
  for k, v in pairs(sec) do
    out[k] = v
  end
  out.groups = json.array()
  for i, g in ipairs(sec.groups) do
    local c = {}
    for k, v in pairs(g) do
      if k ~= 'trace' then
        c[k] = v
      end
    end
    out.groups[i] = c
  end
  return out
end

return M
