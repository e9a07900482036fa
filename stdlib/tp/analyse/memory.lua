-- tp.analyse.memory: where a run's GPU memory goes, from the allocator's events in its profiler
-- traces (Kineto's `[memory]` events, written with profile_memory=True on both vendors). The
-- engine's reader (tp._trace, trace:memory()) follows them as the trace streams in; this module
-- names what it found: per device the allocated and reserved curves, their peaks, when they
-- happen (step, phase, op) and what was live then by category; per step what was allocated,
-- held at its end and short-lived; the ops that allocate most; the caching allocator's slack;
-- headroom against the GPU's capacity (tp.catalog.hardware). M.compare sets two runs side by
-- side; tp.analyse._memory_plan holds a measurement against tp.plan.memory's estimate, and
-- tp.analyse._memory_timeline reads PyTorch's own memory-timeline export. docs/memory.md defines
-- every figure.
local json = require('tp.json')
local hardware = require('tp.catalog.hardware')
local models_base = require('tp.analyse._op_models_base')
local timeline = require('tp.analyse._memory_timeline')
local plan = require('tp.analyse._memory_plan')

local M = {}

--- PyTorch's own memory timeline (export_memory_timeline): M.read_timeline(path) reads one
--- (tp.analyse._memory_timeline.read), M.is_timeline_name(path) tells its file names, and its
--- categories in the export's order with their labels.
M.read_timeline = timeline.read
M.is_timeline_name = timeline.is_timeline_name
M.TIMELINE_CATEGORIES = timeline.CATEGORIES
M.TIMELINE_LABELS = timeline.LABELS

--- Against the plan (tp.analyse._memory_plan): a run's estimate (its record's, else made from
--- its unified config), its measured memory (the traces', else its log's), and the two set side
--- by side by component.
M.estimate_of = plan.estimate_of
M.measured_of = plan.measured_of
M.against_plan = plan.compare
M.compact_estimate = plan.compact
M.plan_for_json = plan.for_json


--- The categories of memory at a peak, in the order they are shown, and their labels.
M.CATEGORIES = { 'before', 'activation', 'gradient', 'optimizer', 'autograd', 'temporary',
  'other' }
M.CATEGORY_LABELS = { before = 'held before the trace', activation = 'activations',
  gradient = 'gradients', optimizer = 'optimizer state', autograd = 'autograd intermediates',
  temporary = 'temporaries', other = 'other' }

-- c10::DeviceType numbers (c10/core/DeviceType.h) of the devices traces name.
local DEVICE_TYPES = { [0] = 'cpu', [1] = 'cuda', [6] = 'hip', [12] = 'xpu', [13] = 'mps' }

--- A device's label: 'cuda:0', 'hip:0', 'cpu', 'type 9:0'.
---@param type integer
---@param id integer
---@return string
function M.device_label(type, id)
  local name = DEVICE_TYPES[type] or ('type ' .. tostring(type))
  if name == 'cpu' or id == nil or id < 0 then
    return name
  end
  return name .. ':' .. tostring(id)
end

local function decode(text)
  if type(text) ~= 'string' then
    return nil
  end
  local ok, v = pcall(json.decode, text)
  return ok and type(v) == 'table' and v or nil
end

-- The top-level shapes of an Input Dims text ("[8944,1024] [1024,2816]"), scalars left out, as
-- the op table writes them.
local function shapes_text(text)
  return require('tp.analyse.ops').shapes_text(decode(text))
end

-- The precision of an op key's first tensor input ('bf16', 'fp32', ...), or '-'.
local function dtype_text(text)
  local types = decode(text)
  for _, t in ipairs(type(types) == 'table' and types or {}) do
    local p = models_base.precision_of(t)
    if p then
      return p
    end
  end
  return '-'
end

-- The name, shapes and dtype of op key id k (1-based), or the placeholder of no op.
local function op_of(keys, k)
  local key = k and keys[k]
  if not key then
    return { name = '(no op)', shapes = '-', dtype = '-' }
  end
  return { name = key.name, shapes = shapes_text(key.dims), dtype = dtype_text(key.types),
    dims_text = key.dims, types_text = key.types }
end

-- The GPU a device is: its deviceProperties entry (by id, else the only one), its catalog row,
-- its capacity in bytes (the catalog's memory, else the trace's totalGlobalMem).
local function gpu_of(dev, props)
  if dev.kind ~= 'gpu' or type(props) ~= 'table' then
    return {}
  end
  local p
  for _, d in ipairs(props) do
    if type(d) == 'table' and tonumber(d.id) == dev.id then
      p = d
    end
  end
  p = p or (#props == 1 and props[1]) or nil
  if type(p) ~= 'table' or type(p.name) ~= 'string' then
    return {}
  end
  local out = { name = p.name }
  local row, why = hardware.match({ name = p.name, sm_count = math.tointeger(p.numSms),
    memory_bytes = tonumber(p.totalGlobalMem), vendor = p.warpSize == 64 and 'amd' or 'nvidia' })
  if row and row.memory_gb then
    out.catalog = row.id
    out.capacity = math.floor(row.memory_gb * 1024 * 1024 * 1024 + 0.5)
    out.capacity_from = 'catalog ' .. row.id
  elseif tonumber(p.totalGlobalMem) then
    out.capacity = math.tointeger(tonumber(p.totalGlobalMem)) or tonumber(p.totalGlobalMem)
    out.capacity_from = 'the trace (deviceProperties totalGlobalMem)'
    out.why = why
  end
  return out
end

-- The warnings a device's counts call for (never silent: each says what was left out).
local function device_warnings(path, d, out)
  local who = string.format('%s: memory events of %s', path, d.label)
  local function say(n, fmt, ...)
    if n and n > 0 then
      out[#out + 1] = who .. ': ' .. string.format(fmt, n, ...)
    end
  end
  local c = d.counts
  say(c.unpaired_frees, '%d frees of addresses not allocated in the trace (allocated before it '
    .. 'began, or their allocation is missing): not paired')
  say(c.size_mismatch, '%d frees whose size is not the size allocated at their address')
  say(c.realloc, '%d allocations at an address still live (its free is missing): the older '
    .. 'one counts as freed there, category other')
  say(c.no_addr, '%d events without an address: not paired, so no lifetime or category; '
    .. 'their bytes count as other')
  say(c.derived_total, '%d events without a valid Total Allocated (%d of them negative or over '
    .. '2^60): each derived from the one before and its Bytes', c.bad_total)
  say(c.no_reserved, '%d events without a valid Total Reserved: the one before is kept')
  say(c.untracked, '%d allocations past the live map\'s bound (4194304): not followed')
  if d.type == 0 then
    out[#out + 1] = who .. ': on the CPU, PyTorch\'s allocator counts only what was allocated '
      .. 'while the profiler ran: the totals leave out what was made before (parameters, '
      .. 'optimizer state)'
  end
end

--- The memory of one open engine trace (tp._trace): nil when it holds no `[memory]` event.
--- `props` is its deviceProperties, `cpu_steps` its tr:steps(). Devices are ordered GPUs first,
--- by peak; `primary` is the first (the GPU with the largest peak, else the CPU).
---@param tr table
---@param props? table[]
---@param cpu_steps? table[]
---@param path? string names the trace in warnings
---@return table|nil
function M.of_trace(tr, props, cpu_steps, path)
  local m = tr:memory()
  if m.events == 0 then
    return nil
  end
  path = path or tr:info().path
  local keys = tr:op_keys()
  local out = { events = m.events, devices = {}, steps = {}, ops = {}, warnings = {},
    counts = { skipped = m.skipped, other_devices = m.other_devices,
      unattributed = m.unattributed, late_ranges = m.late_ranges, late_steps = m.late_steps } }
  local step_at = {}
  for _, s in ipairs(cpu_steps or {}) do
    step_at[s.step] = s
  end
  local by_index = {}
  for i, d in ipairs(m.devices) do
    local dev = { type = d.type, id = d.id, label = M.device_label(d.type, d.id),
      kind = d.type == 0 and 'cpu' or ((d.type == 1 or d.type == 6) and 'gpu' or 'other'),
      events = d.events, allocs = d.allocs, frees = d.frees, alloc_bytes = d.alloc_bytes,
      free_bytes = d.free_bytes, before = d.before, first_ts = d.first_ts, last_ts = d.last_ts,
      peak = d.peak, peak_ts = d.peak_ts, peak_time = d.peak_ts - d.first_ts,
      peak_reserved = d.peak_reserved, peak_phase = d.peak_phase, peak_step = d.peak_step,
      peak_op = op_of(keys, d.peak_key), reserved_max = d.reserved_max,
      reserved_max_ts = d.reserved_max_ts, slack = d.peak_reserved - d.peak,
      slack_max = d.slack_max, end_allocated = d.end_allocated, end_reserved = d.end_reserved,
      live_end = d.live_end, at_peak = d.at_peak, categories = d.categories, curve = d.curve,
      counts = { unpaired_frees = d.unpaired_frees, size_mismatch = d.size_mismatch,
        realloc = d.realloc, no_addr = d.no_addr, derived_total = d.derived_total,
        bad_total = d.bad_total, no_reserved = d.no_reserved, untracked = d.untracked } }
    if dev.kind == 'cpu' then
      dev.slack = nil  -- the CPU allocator reserves nothing of its own
    end
    local g = gpu_of(dev, props)
    dev.name, dev.catalog, dev.capacity, dev.capacity_from = g.name, g.catalog, g.capacity,
      g.capacity_from
    if dev.capacity then
      dev.headroom = dev.capacity - dev.reserved_max
    end
    by_index[i] = dev
    out.devices[#out.devices + 1] = dev
  end
  table.sort(out.devices, function(a, b)
    local ga, gb = a.kind == 'gpu', b.kind == 'gpu'
    if ga ~= gb then
      return ga
    end
    if a.peak ~= b.peak then
      return a.peak > b.peak
    end
    return a.label < b.label
  end)
  out.primary = out.devices[1]
  for _, s in ipairs(m.steps) do
    local dev = by_index[s.device]
    local cpu = s.step and step_at[s.step]
    out.steps[#out.steps + 1] = { step = s.step, device = dev.label, events = s.events,
      allocs = s.allocs, frees = s.frees, alloc_bytes = s.alloc_bytes, free_bytes = s.free_bytes,
      start = s.start, ['end'] = s['end'], peak = s.peak, peak_ts = s.peak_ts,
      peak_phase = s.peak_phase, peak_op = op_of(keys, s.peak_key), phase_peak = s.phase_peak,
      phase_bytes = s.phase_bytes, reserved_max = s.reserved_max, held = s.held,
      temporary = s.temporary, cpu_ts = cpu and cpu.cpu_ts, cpu_dur = cpu and cpu.cpu_dur }
  end
  for _, o in ipairs(m.ops) do
    local op = op_of(keys, o.key)
    local f, b, p = o.phase_allocs.forward, o.phase_allocs.backward, o.phase_allocs.optimizer
    local n = (f > 0 and 1 or 0) + (b > 0 and 1 or 0) + (p > 0 and 1 or 0)
    out.ops[#out.ops + 1] = { name = op.name, shapes = op.shapes, dtype = op.dtype,
      dims_text = op.dims_text, types_text = op.types_text, device = by_index[o.device].label,
      allocs = o.allocs, frees = o.frees, bytes = o.bytes, freed = o.freed,
      temporary = o.temporary, at_peak = o.at_peak, live_end = o.live_end,
      phase = n > 1 and 'mixed' or (b > 0 and 'backward') or (p > 0 and 'optimizer')
        or (f > 0 and 'forward') or nil }
  end
  table.sort(out.ops, function(a, b)
    if a.bytes ~= b.bytes then
      return a.bytes > b.bytes
    end
    if a.name ~= b.name then
      return a.name < b.name
    end
    return a.shapes < b.shapes
  end)
  local c = out.counts
  local function say(n, text)
    if n > 0 then
      out.warnings[#out.warnings + 1] = string.format('%s: %d %s', path, n, text)
    end
  end
  say(c.skipped, '[memory] events without a valid Bytes (missing, not an integer, or over 2^60) '
    .. 'were left out')
  say(c.other_devices, '[memory] events of devices past the first 16 were left out')
  say(c.unattributed, '[memory] events whose thread stepped back in time too often: no op or '
    .. 'phase given')
  say(c.late_ranges, 'CPU ops read after memory events they may hold: those events may name '
    .. 'an outer op')
  say(c.late_steps, 'profiler steps read after memory events they may hold: those events may be '
    .. 'in no step')
  for _, d in ipairs(out.devices) do
    device_warnings(path, d, out.warnings)
  end
  return out
end

--- The steps of a trace's memory on one device (its label), in time order.
---@param mem table M.of_trace's
---@param label string
---@return table[]
function M.steps_of(mem, label)
  local out = {}
  for _, s in ipairs(mem.steps) do
    if s.device == label then
      out[#out + 1] = s
    end
  end
  return out
end

--- The curve of one step of a device (the step its peak is in, else its first), times in ns
--- from the step's start: `{step =, x = {ns...}, allocated = {...}, reserved = {...}}`; the whole
--- trace (step nil) when it has no profiler step. nil without a curve.
---@param mem table
---@param dev table one of mem.devices
---@param step? integer a profiler step number
---@return table|nil
function M.step_curve(mem, dev, step)
  local c = dev.curve
  if not c or #c.ts == 0 then
    return nil
  end
  local chosen
  for _, s in ipairs(M.steps_of(mem, dev.label)) do
    if s.step ~= nil and s.cpu_ts and ((step and s.step == step)
      or (not step and s.step == dev.peak_step)) then
      chosen = s
    end
  end
  if not chosen and not step then
    for _, s in ipairs(M.steps_of(mem, dev.label)) do
      if s.step ~= nil and s.cpu_ts then
        chosen = chosen or s
      end
    end
  end
  if step and not chosen then
    return nil
  end
  local from, to = -math.huge, math.huge
  local origin = c.ts[1]
  if chosen then
    from, to, origin = chosen.cpu_ts, chosen.cpu_ts + chosen.cpu_dur, chosen.cpu_ts
  end
  local out = { step = chosen and chosen.step, x = {}, allocated = {}, reserved = {},
    stride = c.stride }
  for i, ts in ipairs(c.ts) do
    if ts >= from and ts < to then
      out.x[#out.x + 1] = ts - origin
      out.allocated[#out.allocated + 1] = c.allocated[i]
      out.reserved[#out.reserved + 1] = c.reserved[i]
    end
  end
  return #out.x > 0 and out or nil
end

--- The memory of one run (tp.analyse.trace.analyse's: its ranks, each with `memory`): the rank
--- whose primary device has the largest peak, and every rank's primary device. nil when no rank
--- has memory events.
---@param run table
---@return table|nil {rank = the analysis of that rank, memory = its M.of_trace, peaks = {...}}
function M.of_run(run)
  local best
  local peaks = {}
  for _, a in ipairs(run.ranks or {}) do
    local m = a.memory
    if m and m.primary then
      peaks[#peaks + 1] = { rank = a.rank, path = a.path, device = m.primary.label,
        peak = m.primary.peak, reserved_max = m.primary.reserved_max }
      if not best or m.primary.peak > best.memory.primary.peak then
        best = { rank = a, memory = m }
      end
    end
  end
  if not best then
    return nil
  end
  best.peaks = peaks
  return best
end

-- The key that pairs an op across two runs: name, Input Dims and Input type (as the op table's
-- pairing does, tp.analyse._ops_compare).
local function pair_key(r)
  return table.concat({ r.name, r.dims_text or '', r.types_text or '' }, '\t')
end

--- Two runs' memory side by side (each M.of_trace's, or M.of_run's `memory`): each side's
--- primary device (peaks, reserved, slack, headroom against its GPU's capacity, the peak's
--- categories), the curve of one step of each, and the ops that allocate matched by name and
--- shapes. `labels` name the sides.
---@param a table
---@param b table
---@param labels string[]
---@return table
function M.compare(a, b, labels)
  local out = { labels = { labels[1], labels[2] }, sides = {}, pairs = {}, only = { {}, {} },
    lines = {} }
  for i, m in ipairs({ a, b }) do
    local d = m.primary
    out.sides[i] = { label = labels[i], device = d.label, name = d.name, capacity = d.capacity,
      capacity_from = d.capacity_from, peak = d.peak, peak_reserved = d.peak_reserved,
      reserved_max = d.reserved_max, slack = d.slack, headroom = d.headroom,
      before = d.before, live_end = d.live_end, end_allocated = d.end_allocated,
      peak_phase = d.peak_phase, peak_op = d.peak_op, peak_step = d.peak_step,
      at_peak = d.at_peak, alloc_bytes = d.alloc_bytes, allocs = d.allocs,
      curve = M.step_curve(m, d) }
  end
  -- The ops, on each side's primary device, paired.
  local by = { {}, {} }
  local order, seen = {}, {}
  for i, m in ipairs({ a, b }) do
    for _, r in ipairs(m.ops) do
      if r.device == m.primary.label then
        local k = pair_key(r)
        local e = by[i][k]
        if not e then
          e = { name = r.name, shapes = r.shapes, dtype = r.dtype, bytes = 0, allocs = 0,
            at_peak = 0, temporary = 0 }
          by[i][k] = e
          if not seen[k] then
            seen[k] = true
            order[#order + 1] = k
          end
        end
        e.bytes = e.bytes + r.bytes
        e.allocs = e.allocs + r.allocs
        e.at_peak = e.at_peak + r.at_peak
        e.temporary = e.temporary + r.temporary
      end
    end
  end
  local matched = { 0, 0 }
  local total = { 0, 0 }
  for i = 1, 2 do
    for k, e in pairs(by[i]) do
      total[i] = total[i] + e.bytes
      if by[3 - i][k] then
        matched[i] = matched[i] + e.bytes
      end
    end
  end
  for _, k in ipairs(order) do
    local x, y = by[1][k], by[2][k]
    if x and y then
      out.pairs[#out.pairs + 1] = { name = x.name, shapes = x.shapes, dtype = x.dtype, a = x,
        b = y }
    elseif x then
      out.only[1][#out.only[1] + 1] = x
    else
      out.only[2][#out.only[2] + 1] = y
    end
  end
  table.sort(out.pairs, function(p, q)
    local mp, mq = math.max(p.a.bytes, p.b.bytes), math.max(q.a.bytes, q.b.bytes)
    if mp ~= mq then
      return mp > mq
    end
    return p.name .. p.shapes < q.name .. q.shapes
  end)
  for i = 1, 2 do
    table.sort(out.only[i], function(p, q)
      if p.bytes ~= q.bytes then
        return p.bytes > q.bytes
      end
      return p.name .. p.shapes < q.name .. q.shapes
    end)
  end
  out.matched = { total[1] > 0 and matched[1] / total[1] or nil,
    total[2] > 0 and matched[2] / total[2] or nil }
  local s1, s2 = out.sides[1], out.sides[2]
  if s1.peak > 0 and s2.peak > 0 then
    out.ratio = s2.peak / s1.peak
  end
  return out
end

--- The compact memory summary a run record keeps (`memory.measured`, docs/record.md): from the
--- rank with the largest peak on its primary device; bytes and ns.
---@param run table tp.analyse.trace.analyse's
---@return table|nil
function M.summary(run)
  local r = M.of_run(run)
  if not r then
    return nil
  end
  local d = r.memory.primary
  local at = {}
  for _, c in ipairs(M.CATEGORIES) do
    at[c] = d.at_peak[c]
  end
  local ranks = json.array()
  for i, p in ipairs(r.peaks) do
    ranks[i] = { rank = p.rank or json.null, device = p.device, peak_allocated = p.peak,
      peak_reserved = p.reserved_max }
  end
  return { source = 'trace', device = d.label, name = d.name or json.null,
    rank = r.rank.rank or json.null, peak_allocated = d.peak, peak_reserved = d.reserved_max,
    reserved_at_peak = d.peak_reserved, peak_time_ns = d.peak_time, peak_phase = d.peak_phase,
    peak_step = d.peak_step or json.null, peak_op = d.peak_op.name,
    peak_op_shapes = d.peak_op.shapes, before = d.before, live_end = d.live_end,
    capacity = d.capacity or json.null, capacity_from = d.capacity_from or json.null,
    at_peak = at, ranks = ranks, events = r.memory.events,
    warnings = json.array(r.memory.warnings) }
end

local text_of  -- set by tp.present.memory: a trace's memory as text

--- Sets the function that makes a trace's memory text (tp.present.memory does, when loaded),
--- used by the tables M.printable returns.
function M.set_text(fn)
  text_of = fn
end

local PRINTABLE = { __name = 'tp.analyse.memory.Memory', __tostring = function(m)
  if text_of then
    return text_of(m)
  end
  return string.format('memory: %d events, peak %d bytes on %s', m.events, m.primary.peak,
    m.primary.label)
end }

--- A trace's memory that prints as text (at the REPL's prompt); its fields stay as they are.
---@param m table M.of_trace's
---@return table
function M.printable(m)
  return setmetatable(m, PRINTABLE)
end

return M
