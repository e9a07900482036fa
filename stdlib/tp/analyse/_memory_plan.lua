-- tp.analyse._memory_plan: a run's measured memory against tp.plan.memory's estimate for the
-- same configuration, component by component where the trace's categories allow it
-- (activations, gradients, optimizer state, what was held before the trace), and the measured
-- figure of each run with where it came from: the profiler trace's allocator events
-- (`memory.measured` of its record, or its traces), else the peak the framework printed in its
-- log (memory_metrics). docs/memory.md, "Against the plan".
local json = require('tp.json')
local plan_memory = require('tp.plan.memory')
local hardware = require('tp.catalog.hardware')

local M = {}

local GIB = plan_memory.GIB

local function tbl(v)
  return type(v) == 'table' and v or nil
end

local function num(v)
  return type(v) == 'number' and v == v and v or nil
end

--- The estimate of a run: its record's `memory.estimate`, else tp.plan.memory.for_config of the
--- unified config its record keeps (training_config.unified) on the GPU it names. Returns the
--- estimate's compact form {bytes = {...}, capacity_bytes, status, hardware, model} or nil and
--- why there is none.
---@param run table a run record (or a tp.results run)
---@return table|nil estimate, string? why
function M.estimate_of(run)
  local mem = tbl(run.memory)
  if mem and tbl(mem.estimate) and tbl(mem.estimate.bytes) then
    return mem.estimate
  end
  local tc = tbl(run.training_config)
  local unified = tc and tbl(tc.unified)
  if not unified or type(unified.model) ~= 'string' then
    return nil, 'its record keeps no unified config (training_config.unified) to estimate from'
  end
  local hw
  local gi = tbl(run.gpu_info)
  if gi and type(gi.device_name) == 'string' then
    hw = hardware.match({ name = gi.device_name })
  end
  local ok, est = pcall(plan_memory.for_config, unified, hw)
  if not ok then
    return nil, 'tp.plan.memory: ' .. tostring(est)
  end
  return M.compact(est)
end

--- The compact form of an estimate a record keeps (`memory.estimate`): tp.plan.memory.record.
M.compact = plan_memory.record

--- The measured memory of a run: from its traces' allocator events (`memory.measured` of its
--- record, or `trace_summary` made from its traces now), else the allocated and reserved peaks
--- its log printed (memory_metrics, GiB). Returns {source = 'trace'|'log', peak_allocated,
--- peak_reserved, ...} in bytes, or nil.
---@param run table
---@param trace_summary? table tp.analyse.memory.summary's
---@return table|nil
function M.measured_of(run, trace_summary)
  local mem = tbl(run.memory)
  local m = trace_summary or (mem and tbl(mem.measured))
  if m and m.source == 'trace' and num(m.peak_allocated) then
    return m
  end
  local mm = tbl(run.memory_metrics)
  local alloc = mm and num(mm.peak_memory_allocated_gib)
  if alloc then
    local res = num(mm.peak_memory_reserved_gib)
    return { source = 'log', peak_allocated = math.floor(alloc * GIB + 0.5),
      peak_reserved = res and math.floor(res * GIB + 0.5) or nil }
  end
  return nil
end

local function row(key, label, measured, estimated, note)
  return { key = key, label = label, measured = measured, estimated = estimated,
    diff = measured and estimated and measured - estimated or nil,
    ratio = measured and estimated and estimated > 0 and measured / estimated or nil,
    note = note }
end

--- A measurement against an estimate, by component: activations (the estimate's activations
--- and logits against the activations live at the peak), gradients and optimizer state (when
--- the trace saw them made; else they are in what was held before it), what was held before
--- the trace (against the weights and whatever part was not seen made), temporaries and the
--- rest (not in the estimate), and the total. With a log's figure, the total only.
---@param measured table M.measured_of's
---@param estimate table M.estimate_of's (or tp.plan.memory.estimate's)
---@return table {rows = {...}, source, notes = {...}}
function M.compare(measured, estimate)
  local e = estimate.bytes
  local out = { source = measured.source, rows = {}, notes = {} }
  local total = row('total', 'total (the peak)', measured.peak_allocated, e.total)
  if measured.source ~= 'trace' or type(measured.at_peak) ~= 'table' then
    out.rows[1] = total
    out.notes[#out.notes + 1] = 'the peak the framework printed in its log (no profiler trace '
      .. 'with memory events): no breakdown by component'
    return out
  end
  local a = measured.at_peak
  local function at(c)
    return num(a[c]) or 0
  end
  local before_est = e.weights
  local grads, opt
  if at('gradient') > 0 then
    grads = row('gradients', 'gradients', at('gradient'), e.gradients)
  else
    before_est = before_est + e.gradients
  end
  if at('optimizer') > 0 then
    opt = row('optimizer', 'optimizer state', at('optimizer'), e.optimizer)
  else
    before_est = before_est + e.optimizer
  end
  local rows = out.rows
  rows[#rows + 1] = row('activations', 'activations', at('activation'),
    e.activations + (e.logits or 0))
  rows[#rows + 1] = grads
  rows[#rows + 1] = opt
  local parts = { 'weights' }
  if not grads then
    parts[#parts + 1] = 'gradients'
  end
  if not opt then
    parts[#parts + 1] = 'optimizer state'
  end
  rows[#rows + 1] = row('before', 'held before the trace (' .. table.concat(parts, ', ') .. ')',
    at('before'), before_est)
  rows[#rows + 1] = row('rest', 'temporaries, autograd intermediates, other',
    at('temporary') + at('autograd') + at('other'), 0, 'not in the estimate')
  rows[#rows + 1] = total
  if measured.device == 'cpu' then
    out.notes[#out.notes + 1] = 'measured on the CPU: PyTorch\'s CPU allocator counts only what '
      .. 'was allocated while the profiler ran, so what was made before it (parameters, '
      .. 'optimizer state) is missing from the measured figures'
  end
  if at('activation') == 0 and at('gradient') == 0 then
    out.notes[#out.notes + 1] = 'no backward pass in the trace (inference, or a forward-only '
      .. 'window): activations are not told apart from temporaries'
  end
  return out
end

--- A compact form of M.compare's result for JSON (lists as arrays).
---@param c table
---@return table
function M.for_json(c)
  local rows = json.array()
  for i, r in ipairs(c.rows) do
    rows[i] = r
  end
  return { source = c.source, rows = rows, notes = json.array(c.notes) }
end

return M
