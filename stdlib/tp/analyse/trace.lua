-- tp.analyse.trace: why a run spends its step time where it does, from its profiler traces
-- (PyTorch profiler / Kineto JSON, plain or gzip, one file per rank). The engine's streaming
-- reader (tp._trace) keeps the GPU ops, their launches and the profiler steps; this module gives
-- each op name a class (tp.analyse._trace_rules, extendable with M.rule), has the engine break
-- each step down, and summarises: the temporal breakdown (idle / compute / non-compute, as
-- Holistic Trace Analysis defines it), time per class, communication hidden behind compute, the
-- top kernels, the host's gaps in front of the GPU and the dataloader. M.explain sets two runs
-- side by side (tp.analyse._trace_explain). docs/trace.md defines every figure.
local json = require('tp.json')
local rules = require('tp.analyse._trace_rules')
local explain = require('tp.analyse._trace_explain')
local idle = require('tp.analyse._trace_idle')
local checks = require('tp.analyse._trace_checks')

local M = {}

--- The causes of idle time, in order (docs/trace.md, "Why the GPU is idle"), their labels and
--- what each means.
M.CAUSES = idle.CAUSES
M.CAUSE_LABELS = idle.LABELS
M.CAUSE_MEANING = idle.MEANING

local ruleset = rules.new()

--- Adds a classification rule in front of the others: ops whose lower-cased name matches the
--- Lua pattern get the class (a new class needs its kind).
---
--- ```lua
--- tp.analyse.trace.rule { pattern = 'my_fused_mlp', class = 'gemm' }
--- tp.analyse.trace.rule { pattern = '^moe_', class = 'moe', kind = 'compute' }
--- ```
---@param r { pattern: string, class: string, kind?: string, plain?: boolean }
function M.rule(r)
  rules.add(ruleset, r, 2)
end

--- Forgets the rules added with M.rule.
function M.reset_rules()
  ruleset = rules.new()
end

--- The classes in report order: { { name =, kind = }, ... } (a copy).
function M.classes()
  local out = {}
  for i, c in ipairs(ruleset.classes) do
    out[i] = { name = c.name, kind = c.kind }
  end
  return out
end

--- The class of one op name (kind: 'kernel', 'memcpy' or 'memset'; collective: the profiler's
--- "Collective name", or nil).
function M.classify(name, kind, collective)
  return rules.classify(ruleset, name, kind or 'kernel', collective)
end

local function decode_meta(text)
  if type(text) ~= 'string' then
    return nil
  end
  local ok, v = pcall(json.decode, text)
  return ok and v or nil
end

local function mean(list, field)
  if #list == 0 then
    return 0
  end
  local s = 0
  for _, x in ipairs(list) do
    s = s + (field and x[field] or x)
  end
  return s / #list
end

local STEP_FIELDS = { 'window', 'busy', 'idle', 'compute', 'non_compute', 'comm',
  'comm_overlapped', 'host_wait', 'dataloader', 'cpu_step' }

-- The steady steps: every step window but the last when there are several (the last window
-- ends with its own ops, not with the next step, as Holistic Trace Analysis also drops it).
local function steady_steps(steps)
  local out = {}
  local n = #steps > 1 and #steps - 1 or #steps
  for i = 1, n do
    out[#out + 1] = steps[i]
  end
  return out
end

-- The mean of the steady steps: every figure, and each class's.
local function mean_step(steps, classes)
  local m = { steps = #steps, class = {} }
  for _, f in ipairs(STEP_FIELDS) do
    local present = {}
    for _, s in ipairs(steps) do
      if s[f] then
        present[#present + 1] = s[f]
      end
    end
    m[f] = #present > 0 and mean(present) or nil
  end
  for _, c in ipairs(classes) do
    local agg = { count = 0, sum = 0, time = 0, exclusive = 0 }
    for _, s in ipairs(steps) do
      local sc = s.class[c.name]
      for k in pairs(agg) do
        agg[k] = agg[k] + sc[k]
      end
    end
    for k, v in pairs(agg) do
      agg[k] = #steps > 0 and v / #steps or 0
    end
    m.class[c.name] = agg
  end
  m.comm_exposed = (m.comm or 0) - (m.comm_overlapped or 0)
  m.overlap = (m.comm or 0) > 0 and m.comm_overlapped / m.comm or nil
  return m
end

--- Reads and breaks down one trace file. Returns the analysis, or nil, message, code when the
--- file cannot be read (a truncated trace is analysed and carries a warning).
---
--- ```lua
--- local a = assert(tp.analyse.trace.open('rank0.pt.trace.json.gz'))
--- print(a.mean.window / 1e6, 'ms per step', a.mean.idle / a.mean.window)
--- ```
---@param path string
---@param opts? { top?: integer, ops?: boolean, step?: integer, peaks?: table[],
---  collectives?: boolean }
---  collectives: also `collectives`, each NCCL/RCCL op with its message size and bandwidth
---  (tp.analyse._trace_comm; docs/collectives.md);
---  gap: the latency threshold of the idle causes, ns (default 30 us: a queued gap shorter
---  than this is launch latency; docs/trace.md "Why the GPU is idle");
---  top: kernels kept in `top` (default 20); ops: also the op table (`ops`, tp.analyse.ops;
---  docs/trace.md "Ops"); step: the op table of this profiler step only; peaks: measured peaks
---  (tp.analyse.peaks.load), the one of the trace's GPU is used
---@return table|nil, string?, string?
function M.open(path, opts)
  if type(path) ~= 'string' then
    error('trace.open: path must be a string', 2)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= 'top' and k ~= 'ops' and k ~= 'step' and k ~= 'peaks' and k ~= 'collectives'
      and k ~= 'gap' then
      error('trace.open: unknown option ' .. tostring(k), 2)
    end
  end
  if opts.step ~= nil and math.type(opts.step) ~= 'integer' then
    error('trace.open: step must be an integer', 2)
  end
  if opts.gap ~= nil and (math.type(opts.gap) ~= 'integer' or opts.gap <= 0) then
    error('trace.open: gap must be a positive integer (ns)', 2)
  end
  local top_n = opts.top or 20
  if math.type(top_n) ~= 'integer' or top_n < 0 then
    error('trace.open: top must be a non-negative integer', 2)
  end
  local engine = require('tp._trace')
  local tr, err, code = engine.open(path)
  if not tr then
    return nil, err, code
  end
  local info = tr:info()
  local names = tr:names()
  local classes = ruleset.classes
  local class_of, kinds = {}, {}
  for i, c in ipairs(classes) do
    kinds[i] = c.kind
  end
  for i, n in ipairs(names) do
    n.class = rules.classify(ruleset, n.name, n.kind, n.collective)
    class_of[i] = ruleset.index[n.class]
  end
  local b
  b, err, code = tr:breakdown(class_of, kinds, opts.gap and { gap = opts.gap } or nil)
  if not b then
    tr:close()
    return nil, err, code
  end
  local meta = info.meta or {}
  local dist = decode_meta(meta.distributedInfo) or {}
  local devices = decode_meta(meta.deviceProperties)
  local op_table
  local comm
  if opts.collectives then
    local list = tr:collectives()
    if opts.step ~= nil then  -- the ops of that profiler step only
      local kept = {}
      for _, c in ipairs(list) do
        if c.step == opts.step then
          kept[#kept + 1] = c
        end
      end
      list = kept
    end
    comm = require('tp.analyse._trace_comm').of_trace(list, names,
      math.tointeger(dist.world_size))
  end
  if opts.ops then
    op_table, err, code = M.ops_of(tr, names, b, devices, opts)
    if not op_table then
      tr:close()
      return nil, err, code
    end
  end
  local cpu_steps = tr:steps()
  local memory = require('tp.analyse.memory').of_trace(tr, devices, cpu_steps, path)
  tr:close()
  local a = {
    path = path,
    info = info,
    rank = math.tointeger(dist.rank),
    world_size = math.tointeger(dist.world_size),
    backend = type(dist.backend) == 'string' and dist.backend or nil,
    devices = type(devices) == 'table' and devices or nil,
    classes = {},
    gpu = info.ops > 0,
    warnings = {},
    ops = op_table,
    collectives = comm,
    memory = memory,
  }
  for i, c in ipairs(classes) do
    a.classes[i] = { name = c.name, kind = c.kind }
  end
  if info.warning then
    a.warnings[#a.warnings + 1] = info.warning
  end
  if not a.gpu then
    a.warnings[#a.warnings + 1] = path .. ': no GPU kernels, copies or memsets in this trace'
      .. ' (a CPU-only profile): there is no GPU breakdown to give'
  end
  -- Steps, with classes by name.
  a.steps = {}
  for _, s in ipairs(b.steps) do
    local cls = {}
    for i, c in ipairs(classes) do
      cls[c.name] = s.class[i]
    end
    s.class = cls
    s.comm_exposed = s.comm - s.comm_overlapped
    if s.longest then
      s.longest.name = names[s.longest.name].name
    end
    a.steps[#a.steps + 1] = s
  end
  a.steady = steady_steps(a.steps)
  a.mean = mean_step(a.steady, classes)
  a.whole = b.whole
  -- Why the GPU is idle: the mean causes, launches, queues, HTA's per-stream view.
  a.idle = idle.summary(b, a.steady)
  a.mean.cause = a.idle.causes
  a.kernel_time = {}
  for i, n in ipairs(names) do
    if b.names[i].sum > 0 then
      a.kernel_time[n.name] = (a.kernel_time[n.name] or 0) + b.names[i].sum
    end
  end
  -- Top kernels over the ops of the steps (count, total, mean, class).
  local top = {}
  for i, n in ipairs(names) do
    local agg = b.names[i]
    if agg.count > 0 then
      top[#top + 1] = { name = n.name, kind = n.kind, class = n.class, count = agg.count,
        total = agg.sum, mean = agg.sum / agg.count, collective = n.collective,
        bytes = n.bytes > 0 and n.bytes or nil }
    end
  end
  table.sort(top, function(x, y)
    if x.total ~= y.total then
      return x.total > y.total
    end
    return x.name < y.name
  end)
  a.kernels = #top
  for i = #top, top_n + 1, -1 do
    top[i] = nil
  end
  a.top = top
  -- The CPU side.
  a.cpu = { launch_bound = {}, host_wait = a.mean.host_wait, dataloader = a.mean.dataloader,
    cpu_step = a.mean.cpu_step }
  for _, s in ipairs(a.steady) do
    if s.window > 0 and s.host_wait > 0.5 * s.idle and s.idle > 0.1 * s.window then
      a.cpu.launch_bound[#a.cpu.launch_bound + 1] = s.step
    end
  end
  -- The warnings that keep the figures from misleading (tp.analyse._trace_checks).
  a.checks = checks.trace(a, cpu_steps)
  for _, w in ipairs(a.checks) do
    a.warnings[#a.warnings + 1] = w.message
  end
  return a
end

--- The op table of an open engine trace (tp.analyse.ops.from_trace), after its breakdown `b`.
--- Returns it, or nil, message, code (EINVAL: opts.step names no profiler step of the trace).
function M.ops_of(tr, names, b, devices, opts)
  local ops = require('tp.analyse.ops')
  local steps = 0
  for _ in ipairs(b.steps) do
    steps = steps + 1
  end
  if opts.step ~= nil then
    local found = false
    for _, s in ipairs(tr:steps()) do
      found = found or s.step == opts.step
    end
    if not found then
      return nil, string.format('%s: no profiler step %d in this trace', tr:info().path,
        opts.step), 'EINVAL'
    end
    steps = 1
  end
  local measured
  if opts.peaks then
    local peaks = require('tp.analyse.peaks')
    local d = type(devices) == 'table' and devices[1] or nil
    measured = d and type(d.name) == 'string' and peaks.for_device(opts.peaks, d.name) or nil
  end
  return ops.from_trace(tr, names, steps, devices, { step = opts.step, peaks = measured })
end

--- Analyses the traces of one run (one file per rank) and finds stragglers across ranks.
--- Returns { ranks = { analysis... }, mean = the mean step over ranks, stragglers = {...},
--- errors = { message... } }, or nil, message when no file could be read.
---@param paths string[]
---@param opts? { top?: integer, ops?: boolean, step?: integer, peaks?: table[] } as M.open
function M.analyse(paths, opts)
  if type(paths) == 'string' then
    paths = { paths }
  end
  if type(paths) ~= 'table' then
    error('trace.analyse: paths must be a list of file names', 2)
  end
  local run = { ranks = {}, errors = {} }
  local first_code
  for _, p in ipairs(paths) do
    local a, err, code = M.open(p, opts)
    if a then
      run.ranks[#run.ranks + 1] = a
    else
      run.errors[#run.errors + 1] = err
      first_code = first_code or code
    end
  end
  if #run.ranks == 0 then
    return nil, run.errors[1] or 'trace.analyse: no trace given', first_code
  end
  table.sort(run.ranks, function(x, y)
    return (x.rank or math.maxinteger) < (y.rank or math.maxinteger)
  end)
  run.mean = explain.mean_of_ranks(run.ranks)
  -- Files that are not the ranks of one run: said, and no stragglers among them.
  run.checks, run.mixed = checks.run(run.ranks)
  run.warnings = {}
  for _, w in ipairs(run.checks) do
    run.warnings[#run.warnings + 1] = w.message
  end
  run.stragglers = run.mixed and {} or explain.stragglers(run.ranks)
  run.gpu = run.mean ~= nil
  if opts and opts.collectives then
    run.collectives = require('tp.analyse._trace_comm').across(run.ranks)
  end
  if opts and opts.ops then
    local tables = {}
    for _, a in ipairs(run.ranks) do
      tables[#tables + 1] = a.ops
    end
    if #tables > 0 then
      run.ops = require('tp.analyse.ops').merge(tables)
    end
  end
  return run
end

--- Sets two runs side by side (each a result of M.analyse, or one analysis of M.open): per
--- class time per step on each side and the difference, rows adding up to the difference in
--- step time, largest first.
---@return table
function M.explain(a, b, labels)
  local e, err = explain.explain(a, b, labels)
  if e and a.ops and b.ops then
    e.ops = require('tp.analyse.ops').compare(a.ops, b.ops, e.labels, e)
  end
  if e then
    -- Not the same workload, one profiled step: said beside the explanation.
    e.checks = checks.compare(a, b, e, e.labels)
    for _, w in ipairs(e.checks) do
      e.warnings[#e.warnings + 1] = w.message
    end
  end
  return e, err
end

--- The compact summary a run record keeps (record.profile.analysis): per-step means in ms.
function M.summary(run)
  return explain.summary(run)
end

return M
