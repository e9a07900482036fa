-- The figures of tools/gpu-check, read from what each step wrote: the probe's JSON, the torch
-- check, the sampler's readings, the training run's record, `tplua trace --json` (and --ops),
-- the peaks record. Each function returns the step's figures (a table for summary.json), its
-- problems (the step failed when there is one) and its notes. Pure functions of decoded JSON,
-- so that a spec holds them against recorded GPU output. docs/gpu.md, "The GPU check".
local json = require('tp.json')

local M = {}

local null = json.null
local GIB = 1024 * 1024 * 1024

-- A finite number, else nil (JSON null, strings, NaN).
local function num(v)
  if type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge then
    return v
  end
  return nil
end

-- A table, else nil (JSON null).
local function tbl(v)
  return type(v) == 'table' and v or nil
end

-- v, or JSON null: every figure keeps its key in summary.json, measured or not.
local function out(v)
  if v == nil then
    return null
  end
  return v
end

local function round(v, places)
  v = num(v)
  if not v then
    return null
  end
  local m = 10 ^ (places or 3)
  return math.floor(v * m + 0.5) / m
end

M.num, M.out, M.round = num, out, round

-- Keeps the keys of `keys` in `t`, each as out(value).
local function fill(keys, t)
  local o = {}
  for _, k in ipairs(keys) do
    o[k] = out(t[k])
  end
  return o
end

--- The probe (`tplua probe --json`): the first device, the catalog row it matched and whether
--- it is the one expected; which libraries answered.
---@param doc table the decoded probe
---@param ctx {mode: string, expect?: string}
function M.probe(doc, ctx)
  local problems, notes = {}, {}
  local devices = tbl(doc.devices) or {}
  local d = tbl(devices[1]) or {}
  local cat = tbl(d.catalog) or {}
  local inv = tbl(doc.inventory) or {}
  local backends = tbl(doc.backends) or {}
  local status = {}
  for _, api in ipairs({ 'nvml', 'cuda', 'cudart', 'hip', 'rsmi', 'nccl', 'rccl' }) do
    local b = tbl(backends[api])
    status[api] = out(b and b.status)
  end
  local f = {
    devices = #devices,
    name = out(d.name),
    vendor = out(d.vendor),
    arch = out(d.arch),
    api = out(d.api),
    sm_count = out(num(d.sm_count)),
    memory_gib = round(num(d.memory_bytes) and d.memory_bytes / GIB, 2),
    clock_mhz = out(num(d.clock_mhz)),
    power_limit_w = out(num(d.power_limit_w)),
    catalog = out(cat.id),
    catalog_scale = out(num(cat.scale)),
    peak_bf16_tflops = out(num(tbl(cat.peak_tflops) and cat.peak_tflops.bf16)),
    expected = out(ctx.expect),
    matched = false,
    libraries = status,
    versions = fill({ 'nvidia_driver', 'cuda_driver', 'cuda_runtime', 'hip_runtime',
      'amdgpu_driver', 'rocm_smi', 'nccl', 'rccl' }, inv),
  }
  if #devices == 0 then
    problems[#problems + 1] = 'no GPU found (the libraries\' answers are in probe.txt)'
    return f, problems, notes
  end
  if not cat.id then
    problems[#problems + 1] = string.format("device '%s' (%s) matches no row of the hardware "
      .. 'catalog: no MFU can be computed', tostring(d.name), tostring(d.arch))
  elseif ctx.expect and cat.id ~= ctx.expect then
    problems[#problems + 1] = string.format("device '%s' matches catalog row %s, not %s",
      tostring(d.name), cat.id, ctx.expect)
  end
  f.matched = cat.id ~= nil and (ctx.expect == nil or cat.id == ctx.expect)
  if cat.id and num(cat.scale) and cat.scale ~= 1 then
    problems[#problems + 1] = string.format('device 1 is a partition of %s (%g of its units): '
      .. 'the check wants a whole GPU', cat.id, cat.scale)
  end
  local mgmt = d.vendor == 'amd' and 'rsmi' or 'nvml'
  if status[mgmt] ~= 'ok' then
    problems[#problems + 1] = string.format('%s did not answer (%s): no telemetry', mgmt,
      tostring(status[mgmt]))
  end
  local runtimes = d.vendor == 'amd' and { 'hip' } or { 'cuda', 'cudart' }
  local any = false
  for _, api in ipairs(runtimes) do
    any = any or status[api] == 'ok'
  end
  if not any then
    problems[#problems + 1] = string.format('no %s runtime answered (%s)',
      d.vendor == 'amd' and 'HIP' or 'CUDA', table.concat(runtimes, ', '))
  end
  if ctx.mode == 'cpu' then
    notes[#notes + 1] = 'cpu mode: the GPU libraries are the test doubles of tests/fakes'
  end
  return f, problems, notes
end

--- The interpreter's torch (tools/gpu-check.d/torch_info.py's JSON).
---@param info table
---@param ctx {mode: string}
function M.torch(info, ctx)
  local problems = {}
  local f = fill({ 'python', 'executable', 'torch', 'cuda_build', 'hip_build', 'cuda_available',
    'device_count', 'device_name', 'capability', 'memory_bytes', 'sm_count', 'bf16_supported',
    'matmul_device', 'matmul_ok', 'matmul_ms', 'threads', 'error' }, info)
  if info.error then
    problems[#problems + 1] = tostring(info.error)
  elseif ctx.mode == 'gpu' then
    if info.cuda_available ~= true then
      problems[#problems + 1] = 'torch sees no GPU (torch.cuda.is_available() is False)'
    elseif info.bf16_supported ~= true then
      problems[#problems + 1] = 'torch says the GPU has no bf16'
    end
  end
  if info.matmul_ok ~= true and not info.error then
    problems[#problems + 1] = 'a bf16 matrix product on ' .. tostring(info.matmul_device)
      .. ' failed: ' .. tostring(info.matmul_error)
  end
  return f, problems, {}
end

-- min, mean and max of the finite values of `field` over `rows`.
local function spread(rows, field, scale)
  local lo, hi, sum, n
  for _, x in ipairs(rows) do
    local v = num(x[field])
    if v then
      v = v * (scale or 1)
      lo = lo and math.min(lo, v) or v
      hi = hi and math.max(hi, v) or v
      sum, n = (sum or 0) + v, (n or 0) + 1
    end
  end
  return { min = round(lo, 3), mean = round(n and sum / n, 3), max = round(hi, 3), n = n or 0 }
end

--- The sampler's readings (tp.gpu sampler:samples()): per device the spread of power, SM
--- clock, memory used and temperature, the rate achieved, and the same over each window.
---@param samples table[] readings {t, device, power_w, sm_clock_mhz, memory_used, temperature_c}
---@param ctx {interval: number, t0: number, t1: number, windows?: table<string, table>}
function M.telemetry(samples, ctx)
  local problems = {}
  local per = {}
  for _, x in ipairs(samples) do
    local d = math.tointeger(x.device) or 0
    per[d] = per[d] or {}
    table.insert(per[d], x)
  end
  local window = math.max(ctx.t1 - ctx.t0, 1e-9)
  local devices = {}
  for d, rows in pairs(per) do
    devices[#devices + 1] = { device = d, readings = #rows, rate_hz = round(#rows / window, 2),
      power_w = spread(rows, 'power_w'), sm_clock_mhz = spread(rows, 'sm_clock_mhz'),
      memory_used_gib = spread(rows, 'memory_used', 1 / GIB),
      temperature_c = spread(rows, 'temperature_c'),
      utilization_pct = spread(rows, 'utilization') }
  end
  table.sort(devices, function(a, b)
    return a.device < b.device
  end)
  local first = devices[1]
  local f = {
    interval_s = ctx.interval,
    window_s = round(window, 3),
    readings = #samples,
    devices = json.array(devices),
    rate_hz = first and first.rate_hz or null,
    windows = {},
  }
  for name, w in pairs(ctx.windows or {}) do
    local rows = {}
    for _, x in ipairs(per[first and first.device or -1] or {}) do
      if x.t >= w.t0 and x.t <= w.t1 then
        rows[#rows + 1] = x
      end
    end
    f.windows[name] = { seconds = round(w.t1 - w.t0, 3), readings = #rows,
      power_w = spread(rows, 'power_w'), sm_clock_mhz = spread(rows, 'sm_clock_mhz'),
      energy_j = round(w.energy_j, 1), energy_method = out(w.energy_method) }
  end
  if not first then
    problems[#problems + 1] = 'no reading arrived'
    return f, problems, {}
  end
  for _, k in ipairs({ 'power_w', 'sm_clock_mhz', 'memory_used_gib', 'temperature_c' }) do
    if first[k].n == 0 then
      problems[#problems + 1] = string.format('device %d reported no %s', first.device, k)
    end
  end
  -- Readings come every interval; half the rate asked for means the sampler fell behind.
  if first.rate_hz ~= null and first.rate_hz < 0.5 / ctx.interval then
    problems[#problems + 1] = string.format('%.1f readings a second on device %d, asked for %g',
      first.rate_hz, first.device, 1 / ctx.interval)
  end
  return f, problems, {}
end

-- The first and last loss of a record.
local function losses(rec)
  local l = tbl(rec.loss_values) or {}
  return num(l[1]), num(l[#l])
end

--- The training run: its record (tplua.run/2) read for the figures the check is about: how it
--- stopped, step time, tokens/s, MFU, energy per token, the device and precision it ran in.
--- MFU is the record's when it has one; a model outside the catalog gets it from
--- tp.metrics.mfu over the record's tokens/s (the same formula), marked `mfu_from = 'summary'`.
---@param rec table the run record
---@param ctx {mode: string, model: table, hardware?: string, device: string, seq_len: integer,
---  mbs: integer, iterations_planned?: integer}
function M.train(rec, ctx)
  local problems, notes = {}, {}
  local pm = tbl(rec.performance_metrics) or {}
  local em = tbl(rec.energy_metrics) or {}
  local st = tbl(rec.stopping) or {}
  local ci = tbl(st.ci) or {}
  local args = tbl(rec.args) or {}
  local mm = tbl(rec.memory_metrics) or {}
  local first, last = losses(rec)
  local f = {
    run_id = out(rec.run_id),
    status = out(rec.status),
    outcome = out(rec.outcome),
    stopped_by = out(rec.stopped_by),
    device = out(args.device),
    precision = out(args.params_dtype),
    model = ctx.model.id,
    params = out(num(rec.params)),
    seq_len = ctx.seq_len,
    mbs = ctx.mbs,
    iterations_planned = out(num(st.iterations_planned) or ctx.iterations_planned),
    iterations_done = out(num(st.iterations_done) or num(pm.total_steps)),
    ci_relative = round(ci.relative_half_width, 5),
    steady_iterations = out(num(ci.steady_iterations)),
    step_time_s = round(pm.avg_step_time_seconds, 6),
    cv_step_time = round(pm.cv_step_time, 4),
    tokens_per_s = round(pm.tokens_per_second, 1),
    hardware = out(ctx.hardware),
    mfu = round(pm.mfu, 7),
    mfu_from = pm.mfu and 'record' or null,
    achieved_tflops = round(pm.tflops_per_gpu, 2),
    peak_bf16_tflops = null,
    joules_per_token = round(em.joules_per_token, 5),
    energy_basis = out(em.energy_basis),
    energy_method = out(em.energy_method),
    avg_power_w_per_gpu = round(em.avg_power_w_per_gpu, 1),
    telemetry_devices = out(num(em.devices)),
    max_allocated_gib = null,
    loss_first = round(first, 4),
    loss_last = round(last, 4),
    traces = json.array((tbl(rec.profile) or {}).traces or {}),
  }
  for k, v in pairs(mm) do
    if k:find('max_allocated') and num(v) then
      f.max_allocated_gib = round(v, 2)
    end
  end
  if not num(pm.mfu) and ctx.hardware and num(pm.tokens_per_second) then
    local metrics = require('tp.parse.metrics')
    local r, err = metrics.mfu({ tokens_per_s = pm.tokens_per_second, gpus = 1,
      model = ctx.model, seq_len = ctx.seq_len, precision = 'bf16', hardware = ctx.hardware })
    if r then
      f.mfu, f.mfu_from = round(r.mfu, 7), 'summary'
      f.achieved_tflops = round(r.achieved_tflops_per_gpu, 2)
      f.peak_bf16_tflops = round(r.peak_tflops, 1)
      notes[#notes + 1] = string.format('MFU from tp.metrics.mfu over the record\'s tokens/s '
        .. '(%s is not a tp.catalog model, so the record holds none)', ctx.model.id)
    else
      problems[#problems + 1] = 'MFU: ' .. tostring(err)
    end
  elseif num(pm.mfu) then
    local basis = tbl(pm.mfu_basis) or {}
    f.peak_bf16_tflops = round(basis.peak_tflops, 1)
  end
  if rec.status ~= 'completed' then
    problems[#problems + 1] = string.format('the run did not complete (status %s, outcome %s)',
      tostring(rec.status), tostring(rec.outcome))
    return f, problems, notes
  end
  if args.device ~= ctx.device then
    problems[#problems + 1] = string.format('the trainer ran on %s, not %s',
      tostring(args.device), ctx.device)
  end
  if ctx.device == 'cuda' and args.params_dtype ~= 'torch.bfloat16' then
    problems[#problems + 1] = 'the trainer did not run in bf16 (params_dtype '
      .. tostring(args.params_dtype) .. ')'
  end
  if not num(pm.tokens_per_second) then
    problems[#problems + 1] = 'no tokens/s in the record'
  end
  if f.mfu == null then
    problems[#problems + 1] = 'no MFU'
  elseif ctx.device == 'cuda' and not (f.mfu > 0 and f.mfu < 1) then
    problems[#problems + 1] = string.format('MFU %.4f is not in (0, 1)', f.mfu)
  end
  if not num(em.joules_per_token) then
    problems[#problems + 1] = 'no energy per token: ' .. tostring(em.reason or em.energy_note
      or 'no telemetry')
  end
  if rec.stopped_by == nil or rec.stopped_by == null then
    notes[#notes + 1] = 'the stop rule did not stop the run: it ran its planned iterations'
  end
  if #f.traces == 0 then
    problems[#problems + 1] = 'the profiler wrote no trace'
  end
  if num(em.devices) and em.devices > 1 then
    notes[#notes + 1] = string.format('energy per token counts the %d devices the sampler '
      .. 'read, not only the one trained on', em.devices)
  end
  return f, problems, notes
end

local function ms(ns)
  return round(num(ns) and ns / 1e6, 3)
end

--- The trace breakdown (`tplua trace --json`) of rank 0: steps, the step window's idle /
--- compute / non-compute share, host wait, time per class and the top kernels.
---@param doc table
---@param ctx {mode: string}
function M.trace(doc, ctx)
  local problems, notes = {}, {}
  local r = tbl((tbl(doc.ranks) or {})[1]) or {}
  local info = tbl(r.info) or {}
  local mean = tbl(r.mean) or {}
  local dev = tbl((tbl(r.devices) or {})[1]) or {}
  local window = num(mean.window)
  local function pct(v)
    return round(window and window > 0 and num(v) and 100 * v / window, 2)
  end
  local f = {
    gpu = r.gpu == true,
    device = out(dev.name),
    events = out(num(info.events)),
    gpu_ops = out(num(info.ops)),
    launches = out(num(info.launches)),
    steps = out(num(info.steps)),
    window_ms = ms(window),
    idle_pct = pct(mean.idle),
    compute_pct = pct(mean.compute),
    non_compute_pct = pct(mean.non_compute),
    host_wait_ms = ms(mean.host_wait),
    classes = {},
    top_kernels = {},
    warnings = json.array(tbl(r.warnings) or {}),
  }
  local classes = {}
  for name, c in pairs(tbl(mean.class) or {}) do
    if num(c.count) and c.count > 0 then
      classes[#classes + 1] = { name = name, ops = c.count, exclusive_ms = ms(c.exclusive),
        pct = pct(c.exclusive) }
    end
  end
  table.sort(classes, function(a, b)
    return (num(a.exclusive_ms) or 0) > (num(b.exclusive_ms) or 0)
  end)
  f.classes = json.array(classes)
  for i, k in ipairs(tbl(r.top) or {}) do
    if i > 5 then
      break
    end
    f.top_kernels[i] = { name = out(k.name), class = out(k.class), count = out(num(k.count)),
      total_ms = ms(k.total) }
  end
  f.top_kernels = json.array(f.top_kernels)
  if ctx.mode == 'gpu' then
    if not f.gpu then
      problems[#problems + 1] = 'no GPU kernels in the trace (torch.profiler recorded no CUDA '
        .. 'activity)'
    end
  elseif not f.gpu then
    notes[#notes + 1] = 'no GPU: a CPU-only trace (the trainer ran on the CPU), no GPU breakdown'
  end
  return f, problems, notes
end

--- The op table (`tplua trace --ops --json`): linked ops, the device's limits, per class the
--- efficiency against the roofline, the top ops.
---@param doc table
---@param ctx {mode: string}
function M.ops(doc, ctx)
  local problems, notes = {}, {}
  local o = tbl(doc.ops) or {}
  local dev = tbl(o.device) or {}
  local f = {
    linked = out(num(o.linked)),
    unlinked = out(num(o.unlinked)),
    rows = #(tbl(o.rows) or {}),
    device = out(dev.name),
    catalog = out(dev.catalog),
    -- The measured peaks the ops were also held against (--peaks), when their GPU matched.
    measured_peaks = out(tbl(o.peaks) and (o.peaks.gpu or o.peaks.source)),
    classes = {},
    top = {},
  }
  local classes = {}
  for _, c in ipairs(tbl(o.classes) or {}) do
    classes[#classes + 1] = { class = out(c.class), efficiency = round(c.efficiency, 4),
      efficiency_measured = round(c.efficiency_measured, 4), bound = out(c.main_bound),
      ms = ms(c.own) }
  end
  f.classes = json.array(classes)
  for i, row in ipairs(tbl(o.rows) or {}) do
    if i > 5 then
      break
    end
    f.top[i] = { name = out(row.name), shapes = out(row.shapes), dtype = out(row.precision),
      calls = out(num(row.calls)), tflops = round(row.tflops, 2), tbs = round(row.tbs, 3),
      pct_of_limit = round(num(row.pct) and row.pct * 100, 1),
      pct_of_measured = round(num(row.measured_pct) and row.measured_pct * 100, 1),
      bound = out(row.bound) }
  end
  f.top = json.array(f.top)
  if ctx.mode == 'gpu' then
    if not (num(o.linked) and o.linked > 0) then
      problems[#problems + 1] = 'no GPU op linked to the CPU op that launched it'
    end
  elseif not (num(o.linked) and o.linked > 0) then
    notes[#notes + 1] = 'no GPU: a CPU-only trace has no GPU ops to put against a limit'
  end
  return f, problems, notes
end

-- Bytes as an integer, else JSON null.
local function bytes(v)
  v = num(v)
  return v and math.floor(v) or null
end

--- The memory (`tplua trace --memory --json`): per device of the first rank the peak allocated,
--- when and where, what was live then by category, the reserved peak and the headroom against
--- the catalog's capacity, in bytes; and the run record's `memory` (the measured peak it kept
--- and the plan's estimate, with the estimate's error).
---@param doc table
---@param rec table|nil the training run's record
---@param ctx {mode: string}
function M.memory(doc, rec, ctx)
  local problems, notes = {}, {}
  local rank = tbl(doc.ranks) and tbl(doc.ranks[1]) or {}
  local m = tbl(rank.memory)
  local f = { events = out(m and num(m.events)), devices = {} }
  local gpu_seen = false
  for _, d in ipairs(m and tbl(m.devices) or {}) do
    local op = tbl(d.peak_op) or {}
    local at = {}
    for k, v in pairs(tbl(d.at_peak) or {}) do
      at[k] = bytes(v)
    end
    f.devices[#f.devices + 1] = {
      label = out(d.label), name = out(d.name), events = out(num(d.events)),
      peak_bytes = bytes(d.peak), peak_step = out(num(d.peak_step)),
      peak_phase = out(d.peak_phase),
      peak_op = out(op.name and (op.name .. (op.shapes and op.shapes ~= '-' and (' '
        .. op.shapes) or ''))),
      at_peak_bytes = at, reserved_at_peak_bytes = bytes(d.peak_reserved),
      reserved_max_bytes = bytes(d.reserved_max), live_end_bytes = bytes(d.live_end),
      capacity_bytes = bytes(d.capacity), capacity_from = out(d.capacity_from),
      headroom_bytes = bytes(d.headroom),
    }
    gpu_seen = gpu_seen or d.kind == 'gpu'
  end
  f.devices = json.array(f.devices)
  local mem = rec and tbl(rec.memory) or {}
  local measured, estimate = tbl(mem.measured), tbl(mem.estimate)
  f.record = {
    source = out(measured and measured.source), device = out(measured and measured.device),
    peak_allocated_bytes = bytes(measured and measured.peak_allocated),
    peak_reserved_bytes = bytes(measured and measured.peak_reserved),
    estimate_bytes = bytes(estimate and tbl(estimate.bytes) and estimate.bytes.total),
    estimate_model = out(estimate and estimate.model),
  }
  local e, p = num(estimate and tbl(estimate.bytes) and estimate.bytes.total),
    num(measured and measured.peak_allocated)
  f.record.estimate_error = round(e and p and p > 0 and e / p - 1, 4)
  if not m then
    problems[#problems + 1] = 'no [memory] events in the trace (profile_memory did not take)'
  elseif ctx.mode == 'gpu' then
    if not gpu_seen then
      problems[#problems + 1] = 'no GPU among the devices of the [memory] events'
    end
    if not measured then
      problems[#problems + 1] = 'the run record keeps no measured memory'
    end
  elseif not gpu_seen then
    notes[#notes + 1] = "no GPU: the CPU allocator's events only, which leave out what was made "
      .. 'before the profiler started'
  end
  return f, problems, notes
end

--- The peaks record (recipes/peaks.lua): the measured TFLOP/s per precision, the square bf16
--- GEMM, the bandwidth, each against the catalog row of the device.
---@param rec table the run record with a `peaks` section
---@param ctx {mode: string, hardware_row?: table}
function M.peaks(rec, ctx)
  local problems, notes = {}, {}
  local p = tbl(rec.peaks) or {}
  local tf = tbl(p.tflops) or {}
  local sq = tbl(tbl(p.square) and p.square.bf16) or {}
  local row = ctx.hardware_row
  local peak_bf16 = row and tbl(row.peak_tflops) and num(row.peak_tflops.bf16)
  local f = {
    status = out(rec.status),
    device = out(p.device),
    gpu = out(p.gpu),
    torch = out(p.torch),
    runtime = out(p.runtime),
    scaled_down = p.scaled_down == true,
    tflops = {},
    square_bf16_tflops = round(sq.tflops, 1),
    bandwidth_tbs = round(p.bandwidth_tbs, 3),
    bf16_of_catalog = round(peak_bf16 and num(tf.bf16) and tf.bf16 / peak_bf16, 4),
    bandwidth_of_catalog = round(row and num(row.bandwidth_tbs) and num(p.bandwidth_tbs)
      and p.bandwidth_tbs / row.bandwidth_tbs, 4),
    gemm = {},
    elapsed_s = round(p.elapsed_s, 1),
  }
  for _, k in ipairs({ 'bf16', 'fp16', 'fp32', 'tf32', 'fp8' }) do
    f.tflops[k] = round(tf[k], 4)
  end
  for _, g in ipairs(tbl(p.gemm) or {}) do
    f.gemm[#f.gemm + 1] = { label = out(g.label), m = out(g.m), n = out(g.n), k = out(g.k),
      dtype = out(g.dtype), tflops = round(g.tflops, 2), skipped = out(g.skipped) }
  end
  f.gemm = json.array(f.gemm)
  if rec.status ~= 'completed' then
    problems[#problems + 1] = string.format('the peaks run did not complete (status %s)',
      tostring(rec.status))
  end
  local want = ctx.mode == 'gpu' and 'cuda' or 'cpu'
  if p.device ~= want then
    problems[#problems + 1] = string.format('peaks measured on %s, not %s', tostring(p.device),
      want)
  end
  if not num(tf.bf16) and not num(tf.fp32) then
    problems[#problems + 1] = 'no GEMM figure measured'
  end
  if not num(p.bandwidth_tbs) then
    problems[#problems + 1] = 'no memory bandwidth measured'
  end
  if ctx.mode == 'gpu' and f.bf16_of_catalog ~= null and f.bf16_of_catalog > 1.05 then
    problems[#problems + 1] = string.format('measured bf16 %.1f TFLOP/s is above the catalog '
      .. 'peak %.1f: the catalog row or the timing is wrong', tf.bf16, peak_bf16)
  end
  if ctx.mode == 'cpu' then
    notes[#notes + 1] = 'no GPU: measured on the CPU, every GEMM dimension capped'
  end
  return f, problems, notes
end

return M
