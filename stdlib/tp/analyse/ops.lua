-- tp.analyse.ops: every op of a profiled run against its platform's limit. The engine's trace
-- reader keeps the CPU ops with their shapes and links each GPU kernel to the op that launched it
-- (tp._trace: op_keys, ops); this module gives each op key its FLOPs and bytes per call from the
-- performance models (tp.analyse._op_models, extendable with M.model), and makes the per-shape
-- table: calls, GPU time, achieved TFLOP/s and TB/s, the platform's peak for the op's precision
-- from the catalog (and a measured one from a peaks record), % of the roofline limit, compute- or
-- memory-bound; per class, the time-weighted efficiency. M.compare pairs the same ops across two
-- platforms (tp.analyse._ops_compare). docs/trace.md ("Ops") defines every figure.
local json = require('tp.json')
local hardware = require('tp.catalog.hardware')
local models = require('tp.analyse._op_models')
local pairing = require('tp.analyse._ops_compare')

local M = {}

local registry = models.new()

--- Adds a performance model in front of the built-in ones (docs/ops.md):
---
--- ```lua
--- require('tp.analyse.ops').model { name = 'my::fused_mlp', class = 'gemm', category = 'GEMM',
---   fn = function(op)
---     local m, k = op.dims[1][1], op.dims[1][2]
---     return { flops = ..., bytes = ..., precision = 'bf16', compute = 'matrix' }
---   end }
--- ```
---@param entry table { name|names|pattern, class, category, fn }
function M.model(entry)
  if type(entry) ~= 'table' then
    error('ops.model: a table { name = ..., fn = function(op) ... end } expected', 2)
  end
  local ok, err = pcall(models.add, registry, entry)
  if not ok then
    error('ops.model: ' .. tostring(err):gsub('^[^:]*:%d+: ', ''), 2)
  end
end

--- Forgets the models added with M.model.
function M.reset_models()
  registry = models.new()
end

--- Runs a Lua file of M.model calls (`tplua trace --models FILE`). Returns true, or nil, message.
function M.load_models(path)
  local chunk, err = loadfile(path)
  if not chunk then
    return nil, err
  end
  local ok, perr = pcall(chunk)
  if not ok then
    return nil, tostring(perr)
  end
  return true
end

--- The model's result for one op ({ name, dims, types, strides, concrete }), or nil, reason.
function M.evaluate(op)
  return models.evaluate(registry, op)
end

--- Whether op `name` has a model.
function M.has_model(name)
  return models.lookup(registry, name) ~= nil
end

-- --- limits ------------------------------------------------------------------------------------

-- The device a trace ran on, as the catalog matches it: { name, row = catalog row | nil, why }.
local function device_of(devices)
  local d = type(devices) == 'table' and devices[1] or nil
  if type(d) ~= 'table' or type(d.name) ~= 'string' then
    return { why = 'the trace names no device (deviceProperties)' }
  end
  local probe = { name = d.name, sm_count = math.tointeger(d.numSms),
    memory_bytes = tonumber(d.totalGlobalMem),
    vendor = d.warpSize == 64 and 'amd' or 'nvidia' }
  local row, why = hardware.match(probe)
  return { name = d.name, row = row, why = why }
end

--- The limits an op is held against on a device: { tflops = compute ceiling for the op's
--- precision and unit, tbs = memory bandwidth, measured_tflops, measured_tbs }. Matrix ops
--- (GEMM, attention, convolution) take the catalog's dense peak of their precision; vector ops
--- the FP32 (non-matrix) peak; `peaks` is a measured entry of tp.analyse.peaks (its GEMM figure
--- of the precision for matrix ops, none for vector ops, and its bandwidth).
function M.limits(device, precision, compute, peaks)
  local out = {}
  local row = device and device.row
  if row then
    local p = compute == 'matrix' and precision or 'fp32'
    if compute == 'matrix' and precision == 'fp64' then
      p = 'fp32'
    end
    out.tflops = row.peak_tflops and row.peak_tflops[p] or nil
    out.tflops_of = p
    out.tbs = row.bandwidth_tbs
  end
  if peaks and peaks.peaks then
    -- measured GEMMs say nothing of vector units: vector ops are held to the bandwidth alone
    local pk = peaks.peaks
    out.measured_tflops = compute == 'matrix' and type(pk.tflops) == 'table'
      and tonumber(pk.tflops[precision]) or nil
    out.measured_tbs = tonumber(pk.bandwidth_tbs)
  end
  return out
end

-- Fills the roofline figures of a row from its limits: the time the limits allow for its FLOPs
-- and bytes, the bound, and the share of that limit the op reached.
local function roofline(row, lim, tflops_key, tbs_key, prefix)
  local peak, bw = lim[tflops_key], lim[tbs_key]
  if not row.gflops or not row.mean or row.mean <= 0 then
    return
  end
  local t_flops = peak and peak > 0 and row.gflops * 1e9 / (peak * 1e12) or nil
  local t_bytes = bw and bw > 0 and row.bytes and row.bytes / (bw * 1e12) or nil
  if not t_flops and not t_bytes then
    return
  end
  local limit_s = math.max(t_flops or 0, t_bytes or 0)
  row[prefix .. 'bound'] = (t_flops or 0) >= (t_bytes or 0) and 'compute' or 'memory'
  row[prefix .. 'pct'] = limit_s / (row.mean * 1e-9)
  if peak and peak > 0 then
    row[prefix .. 'pct_flops'] = row.tflops and row.tflops / peak or nil
  end
  if bw and bw > 0 then
    row[prefix .. 'pct_bw'] = row.tbs and row.tbs / bw or nil
  end
end

-- --- the table ---------------------------------------------------------------------------------

--- Fills a row's derived figures from its sums (calls, time, time_sq, inv, own; flops, bytes and
--- limits when modelled): the mean, minimum and standard deviation per call, TFLOP/s and TB/s,
--- the time per step (own / steps) and the roofline figures.
function M.derive(row, steps)
  local calls = row.calls
  row.mean = calls > 0 and row.time / calls or nil
  row.std = nil
  if calls > 1 then
    local var = (row.time_sq - row.time * row.time / calls) / (calls - 1)
    row.std = var > 0 and math.sqrt(var) or 0
  end
  row.per_step = row.own / math.max(steps or 1, 1)
  row.nested = calls > 0 and row.own_ops == 0 or nil
  if row.modeled then
    row.gflops = row.flops and row.flops / 1e9 or nil
    row.mb = row.bytes and row.bytes / 2 ^ 20 or nil
    row.intensity = row.bytes and row.bytes > 0 and row.flops and row.flops / row.bytes or nil
    if calls > 0 and row.inv > 0 then
      -- the mean over calls of each call's rate, as TraceLens reports it
      row.tflops = row.flops and row.flops * row.inv / calls / 1e3 or nil
      row.tbs = row.bytes and row.bytes * row.inv / calls / 1e3 or nil
    end
    for _, prefix in ipairs({ '', 'measured_' }) do
      for _, f in ipairs({ 'bound', 'pct', 'pct_flops', 'pct_bw' }) do
        row[prefix .. f] = nil
      end
    end
    roofline(row, row.limits or {}, 'tflops', 'tbs', '')
    roofline(row, row.limits or {}, 'measured_tflops', 'measured_tbs', 'measured_')
  end
  return row
end

local function decode(text)
  if type(text) ~= 'string' then
    return nil
  end
  local ok, v = pcall(json.decode, text)
  if ok and type(v) == 'table' then
    return v
  end
  return nil, 'not a JSON list'
end

local function shape_text(d, depth)
  local items = {}
  for i, v in ipairs(d) do
    if type(v) == 'table' then
      items[i] = depth < 2 and shape_text(v, depth + 1) or '[..]'
    else
      items[i] = tostring(v)
    end
  end
  return '[' .. table.concat(items, ',') .. ']'
end

--- A compact text of an op's shapes: "[8944,1024] [1024,2816]" from Input Dims (decoded), the
--- empty ones (scalars) left out; a list of tensors as "[[16,16,559,32],[16,16,559,32]]"; '-'
--- for none.
---@param dims table|nil
---@return string
local function shapes_text(dims)
  if type(dims) ~= 'table' then
    return '-'
  end
  local parts = {}
  for _, d in ipairs(dims) do
    if type(d) == 'table' and #d > 0 then
      parts[#parts + 1] = shape_text(d, 1)
    end
  end
  return #parts > 0 and table.concat(parts, ' ') or '-'
end

-- The class of the GPU ops a key owns: the one with the most time.
local function main_class(kernels, names)
  local by = {}
  for _, k in ipairs(kernels) do
    local c = names[k.name] and names[k.name].class or 'other'
    by[c] = (by[c] or 0) + k.total
  end
  local best, bt
  for c, t in pairs(by) do
    if not bt or t > bt or (t == bt and c < best) then
      best, bt = c, t
    end
  end
  return best
end

local function phase_of(st)
  local f, b, o = st.forward or 0, st.backward or 0, st.optimizer or 0
  local n = (f > 0 and 1 or 0) + (b > 0 and 1 or 0) + (o > 0 and 1 or 0)
  if n == 0 then
    return nil
  end
  if n > 1 then
    return 'mixed'
  end
  return f > 0 and 'forward' or b > 0 and 'backward' or 'optimizer'
end

-- The same text from Input Dims' JSON text as the reader keeps it (no whitespace), without
-- decoding it: its top-level entries, the empty ones ("[]", "null") left out.
local function shapes_of_text(text)
  if type(text) ~= 'string' or text:sub(1, 1) ~= '[' then
    return '-'
  end
  local parts, depth, from = {}, 0, nil
  for i = 2, #text do
    local c = text:byte(i)
    if c == 91 then  -- [
      if depth == 0 then
        from = i
      end
      depth = depth + 1
    elseif c == 93 then  -- ]
      if depth == 0 then
        break
      end
      depth = depth - 1
      if depth == 0 and i > from + 1 then
        parts[#parts + 1] = text:sub(from, i)
      end
    end
  end
  return #parts > 0 and table.concat(parts, ' ') or '-'
end

--- Builds the op table of one open engine trace (tp._trace). `names` are the trace's GPU op
--- names with their classes (tr:names() after classification), `steps` the number of steps the
--- per-step figures divide by, `devices` the trace's deviceProperties, `opts.step` a profiler
--- step number, `opts.peaks` a measured peaks entry (tp.analyse.peaks.for_device).
--- Returns the table (see docs/trace.md, "Ops"), or nil, message.
function M.from_trace(tr, names, steps, devices, opts)
  opts = opts or {}
  local keys = tr:op_keys()
  local wanted, ops = {}, {}
  local malformed = 0
  local warnings = {}
  local has_model = {}  -- by name: many keys share one
  for i, k in ipairs(keys) do
    if k.kind == 'op' then
      local h = has_model[k.name]
      if h == nil then
        h = models.lookup(registry, k.name) ~= nil
        has_model[k.name] = h
      end
      wanted[i] = h
    else
      wanted[i] = false
    end
  end
  local r, err = tr:ops(wanted, opts.step)
  if not r then
    return nil, err
  end
  -- The model of each key with GPU ops under it (the others are never shown).
  for i in pairs(r.stats) do
    local k = keys[i]
    if wanted[i] then
      local op = { name = k.name }
      local bad
      for _, f in ipairs({ 'dims', 'types', 'strides', 'concrete' }) do
        if k[f] then
          local v, why = decode(k[f])
          if v == nil then
            bad = bad or string.format('%s is %s', f, why or 'absent')
          end
          op[f] = v
        end
      end
      if bad then
        ops[i] = { skipped = bad }
      else
        local res, why = models.evaluate(registry, op)
        ops[i] = res and { res = res, op = op } or { skipped = why, op = op }
      end
    end
  end
  local kernels_of = {}
  for _, k in ipairs(r.kernels) do
    local list = kernels_of[k.key]
    if not list then
      list = {}
      kernels_of[k.key] = list
    end
    list[#list + 1] = k
  end
  local device = device_of(devices)
  local nsteps = math.max(steps or 1, 1)
  local rows = {}
  local total_own = 0
  for id, st in pairs(r.stats) do
    local k = keys[id]
    local ev = ops[id]
    local ks = kernels_of[id] or {}
    table.sort(ks, function(x, y)
      if x.total ~= y.total then
        return x.total > y.total
      end
      return x.name < y.name
    end)
    local row = {
      key = id, name = k.name, kind = k.kind,
      dims_text = k.dims, types_text = k.types, strides_text = k.strides,
      concrete_text = k.concrete,
      calls = st.calls, ops = st.ops, own = st.own, own_ops = st.own_ops,
      time = st.time, time_sq = st.time_sq, inv = st.inv,
      min = st.calls > 0 and st.min or nil, max = st.calls > 0 and st.max or nil,
      forward = st.forward, backward = st.backward, optimizer = st.optimizer,
      kernel_sum = st.kernel_sum, memcpy_sum = st.memcpy_sum, memset_sum = st.memset_sum,
      phase = phase_of(st),
      module = st.module and keys[st.module] and keys[st.module].name or nil,
      module_parent = st.module_parent and keys[st.module_parent]
        and keys[st.module_parent].name or nil,
      class = main_class(ks, names) or 'other',
      kernels = {},
    }
    for i = 1, math.min(#ks, 3) do
      local n = names[ks[i].name]
      row.kernels[i] = { name = n and n.name or '?', class = n and n.class or nil,
        count = ks[i].count, total = ks[i].total }
    end
    row.kernel_names = #ks
    if ev and ev.op then
      row.shapes = shapes_text(ev.op.dims)
    else
      row.shapes = shapes_of_text(k.dims)
    end
    if ev and ev.res then
      local res = ev.res
      row.modeled = true
      row.category, row.op_class = res.category, res.class
      row.precision, row.compute = res.precision, res.compute
      row.params, row.note = res.params, res.note
      row.flops, row.bytes = res.flops, res.bytes
      row.limits = M.limits(device, res.precision, res.compute, opts.peaks)
    elseif ev and ev.skipped then
      row.skipped = ev.skipped
      if ev.skipped ~= 'no model' then
        malformed = malformed + 1
      end
    end
    M.derive(row, nsteps)
    total_own = total_own + st.own
    rows[#rows + 1] = row
  end
  table.sort(rows, function(x, y)
    if x.own ~= y.own then
      return x.own > y.own
    end
    if x.name ~= y.name then
      return x.name < y.name
    end
    return x.key < y.key
  end)
  if malformed > 0 then
    local first
    for _, row in ipairs(rows) do
      if row.skipped and row.skipped ~= 'no model' then
        first = string.format('%s (%s)', row.name, row.skipped)
        break
      end
    end
    warnings[#warnings + 1] = string.format('%d op shape%s not modelled (missing, malformed or '
      .. 'absurd shapes): their time is counted, their FLOPs and bytes are not%s',
      malformed, malformed == 1 and '' or 's',
      first and ('; first: ' .. first) or '')
  end
  local t = {
    rows = rows, linked = r.linked, unlinked = r.unlinked, steps = nsteps,
    own = total_own, device = { name = device.name, catalog = device.row and device.row.id,
      why = device.why, bandwidth_tbs = device.row and device.row.bandwidth_tbs,
      peak_tflops = device.row and device.row.peak_tflops },
    peaks = opts.peaks and { source = opts.peaks.source, gpu = opts.peaks.gpu } or nil,
    malformed = malformed, warnings = warnings,
  }
  t.classes = M.class_efficiency(rows)
  return t
end

--- Per class, the time-weighted efficiency of its modelled ops: sum(time x % of limit) / sum(time)
--- over the ops with a limit, and the share of the class's time those ops cover.
function M.class_efficiency(rows)
  local by = {}
  local order = {}
  for _, row in ipairs(rows) do
    local c = by[row.class]
    if not c then
      c = { class = row.class, own = 0, modeled = 0, weighted = 0, weighted_measured = 0,
        measured = 0, bound = {} }
      by[row.class] = c
      order[#order + 1] = c
    end
    c.own = c.own + row.own
    if row.pct then
      c.modeled = c.modeled + row.own
      c.weighted = c.weighted + row.own * row.pct
      c.bound[row.bound] = (c.bound[row.bound] or 0) + row.own
      local p = row.precision
      if row.bound == 'compute' and p then
        c.precision = c.precision or {}
        c.precision[p] = (c.precision[p] or 0) + row.own
      end
    end
    if row.measured_pct then
      c.measured = c.measured + row.own
      c.weighted_measured = c.weighted_measured + row.own * row.measured_pct
    end
  end
  for _, c in ipairs(order) do
    c.efficiency = c.modeled > 0 and c.weighted / c.modeled or nil
    c.efficiency_measured = c.measured > 0 and c.weighted_measured / c.measured or nil
    c.coverage = c.own > 0 and c.modeled / c.own or 0
    c.main_bound = (c.bound.compute or 0) >= (c.bound.memory or 0)
      and (c.bound.compute and 'compute') or (c.bound.memory and 'memory') or nil
    local best, bt
    for p, t in pairs(c.precision or {}) do
      if not bt or t > bt or (t == bt and p < best) then
        best, bt = p, t
      end
    end
    c.main_precision = best
    c.precision = nil
    c.weighted, c.weighted_measured = nil, nil
  end
  table.sort(order, function(x, y)
    if x.own ~= y.own then
      return x.own > y.own
    end
    return x.class < y.class
  end)
  return order
end

--- The op tables of several ranks of one run as one: rows of the same key text added up, the
--- per-step figures the mean over ranks.
function M.merge(tables)
  if #tables == 1 then
    return tables[1]
  end
  return pairing.merge(tables, M.class_efficiency, M.derive)
end

local text_of  -- set by tp.present.ops: the op table as text

--- Sets the function that makes an op table's text (tp.present.ops does, when loaded), used by
--- the tables M.printable returns.
function M.set_text(fn)
  text_of = fn
end

local PRINTABLE = { __name = 'tp.analyse.ops.Table', __tostring = function(t)
  if text_of then
    return text_of(t)
  end
  return string.format('op table: %d ops, %d GPU ops linked', #t.rows, t.linked)
end }

--- An op table that prints as text (at the REPL's prompt); its fields stay as they are.
function M.printable(t)
  return setmetatable(t, PRINTABLE)
end

--- Pairs the same ops of two runs' op tables (by op name, Input Dims and Input type), side by
--- side: time per step on each side, TFLOP/s and % of each side's own limit, the time per step
--- each side would save at the other side's efficiency; ranked by that saving. `explanation` is
--- tp.analyse.trace.explain's result (its class rows get their top pairs). Returns the pairing.
function M.compare(a, b, labels, explanation)
  return pairing.compare(a, b, labels or { 'A', 'B' }, explanation)
end

M.shapes_text = shapes_text

return M
