-- tplua trace: profiler traces (PyTorch profiler / Kineto JSON, plain or gzip) broken down per
-- step, per class of kernel, per rank; and two runs' traces set side by side (--compare).
local cli = require('tp.cli')

local M = {}

M.summary = 'break profiler traces down (idle, compute, communication, kernels) and explain gaps'

M.usage = [[
usage: tplua trace FILE|DIR... [--json] [--step N] [--top K] [--rules FILE] [--idle] [--gap US]
                  [--ops] [--roofline PATH] [--peaks FILE|DIR] [--models FILE]
                  [--collectives] [--memory]
       tplua trace --compare A B [--label-a NAME] [--label-b NAME] [--json] [--top K] [--gap US]
                  [--rules FILE] [--roofline PATH] [--peaks FILE|DIR] [--models FILE]
                  [--collectives] [--memory]

Reads profiler traces with the engine's streaming reader: PyTorch profiler traces (Kineto
Chrome-trace JSON as torch.profiler writes it on CUDA and ROCm: .json, .json.gz,
.pt.trace.json.gz), Nsight Systems SQLite exports (nsys export --type sqlite: .sqlite) and
rocprofv3 kernel traces (--kernel-trace --output-format csv: *kernel_trace.csv, with the
memory copy and HIP API traces beside it); gzip or not; one file per rank; a DIR stands for
the trace files in it, the ranks of one run. Prints per rank:
  - the temporal breakdown of each profiler step on the GPU: idle, compute, non-compute
    (communication and memory ops not under compute), as Holistic Trace Analysis defines them,
    and their mean over the steady steps (every step but the last);
  - time per class of GPU op (gemm, attention, normalization, elementwise, optimizer, each
    collective, each kind of copy, ...): ops, kernel time, busy time and the exclusive share
    of the step (the classes' exclusive times and idle add up to the step);
  - communication hidden behind compute, the host's gaps in front of the GPU (launch-bound
    steps), the dataloader; the top kernels; stragglers across ranks.
With --ops, also every op against its platform's limit: each GPU kernel linked to the CPU op
that launched it (Kineto traces with record_shapes=True), per (op, shapes, dtype) the calls,
GPU time, FLOPs and bytes per call from the op's performance model, TFLOP/s and TB/s, % of the
roofline limit of the GPU's catalog peak for its precision (and of a measured one, --peaks),
compute- or memory-bound; per class the time-weighted efficiency.
With --memory, where the memory goes instead (traces written with profile_memory=True): per
device the peak of the allocated memory (when: step, phase, op; what was live then by category:
held before the trace, activations, gradients, optimizer state, temporaries), the reserved peak
and the allocator's slack, headroom against the GPU's capacity, per step what was allocated,
held at its end and short-lived, and the ops that allocate most; a memory-timeline export of
PyTorch (export_memory_timeline: *.raw.json.gz) is read too. docs/memory.md.
With --compare, A and B are two runs (a file, or a DIR of rank files, each): the table of
time per class per step on each side and the difference, rows adding up to the difference
in step time, largest first; then the same ops paired across the two (they run different
kernels on each vendor) with each side's % of its own limit, the time each would save at the
other's efficiency, and per class a verdict: hardware (the chips' limits) or software (kernel
efficiency).

options:
  --json            print one JSON document instead of the text
  --step N          this profiler step (ProfilerStep#N) only: its breakdown and its ops
  --top K           kernels and ops in the top lists (default 15)
  --ops             the op table (per op, shapes and dtype, against the GPU's limit)
  --idle            why the GPU is idle: per step the idle time of each cause (the host late to
                    launch, in a synchronisation or in the dataloader; launch latency; other),
                    the launch figures (launch call against kernel time, launch delay, kernels
                    shorter than their launch), each stream's queue, and HTA's per-stream view
  --gap US          a gap whose op was already queued counts as launch latency when shorter
                    than US microseconds (default 30, as HTA), else as other
  --collectives     each NCCL/RCCL op with its message size, algbw and busbw, by collective
                    and message size; across the ranks of a DIR, each collective matched
                    (process group and sequence number), its latency, arrival skew and the
                    rank that arrives last (docs/collectives.md); with --compare, busbw side
                    by side
  --roofline PATH   draw the roofline of the ops (PATH.png or PATH.svg; both runs on one
                    chart with --compare); implies --ops
  --peaks FILE|DIR  measured peaks (a record of recipes/peaks.lua, or a directory of them):
                    ops are also held against the measured peak of their GPU
  --models FILE     a Lua file that adds or overrides op performance models, e.g.
                      local ops = require('tp.analyse.ops')
                      ops.model { name = 'my::gemm', class = 'gemm', category = 'GEMM',
                        fn = function(op) return { flops = ..., bytes = ...,
                          precision = 'bf16', compute = 'matrix' } end }
  --memory          where the memory goes (the allocator's [memory] events): peaks, categories,
                    steps, ops; with --compare, both runs side by side and the ops matched
  --compare         explain the difference between the runs A and B (B against A)
  --label-a NAME    name of A in the explanation (default: its file or directory name)
  --label-b NAME    name of B
  --rules FILE      a Lua file that adds classification rules first, e.g.
                      local trace = require('tp.analyse.trace')
                      trace.rule { pattern = '^my_fused_mlp', class = 'gemm' }
  -h, --help        show this help

exit status: 0 when every trace was read (a truncated trace is read up to its cut, with a
warning), 1 when a trace cannot be read, 2 on a usage error (a --step the trace lacks among
them).

examples:
  tplua trace rank0.pt.trace.json.gz --top 10
  tplua trace rank0.pt.trace.json.gz --idle
  tplua trace rank0.pt.trace.json.gz --ops --top 20 --peaks results/peaks
  tplua trace --compare traces/h100 traces/mi300x --label-a H100 --label-b MI300X
  tplua trace --compare traces/h100 traces/mi300x --roofline roofline.svg
  tplua trace rank0.pt.trace.json.gz --memory
  tplua trace --compare traces/h100 traces/mi300x --memory
]]

local SPEC = { idle = 'boolean', gap = 'number', json = 'boolean', step = 'integer',
  top = 'integer', compare = 'boolean',
  label_a = 'string', label_b = 'string', rules = 'string', help = 'boolean', ops = 'boolean',
  roofline = 'string', peaks = 'string', models = 'string', collectives = 'boolean',
  memory = 'boolean' }

local timelines_out, memory_compare  -- below

local function usage_error(msg)
  return cli.usage_error('trace', msg, M.usage)
end

-- The files of a directory that are traces: Kineto JSON, Nsight Systems SQLite exports, and
-- rocprofv3 kernel traces (their memory-copy and HIP API traces beside them are read with them).
local TRACE_FILE = { '%.json$', '%.json%.gz$', '%.sqlite$', '%.sqlite%.gz$', 'kernel_trace%.csv$',
  'kernel_trace%.csv%.gz$' }

-- The trace files an argument stands for: the file itself, or the trace files of a directory.
local function expand(arg)
  local fs = require('tp.fs')
  local st = fs.stat(arg)
  if not st or st.type ~= 'directory' then
    return { arg }
  end
  local files = {}
  for _, e in ipairs(fs.list(arg) or {}) do
    for _, pat in ipairs(TRACE_FILE) do
      if e.name:find(pat) and e.type ~= 'directory' then
        files[#files + 1] = arg .. '/' .. e.name
        break
      end
    end
  end
  table.sort(files)
  return files
end

-- expand(arg), or nil once the error is printed when it stands for no trace file.
local function expand_or_say(arg)
  local files = expand(arg)
  if #files == 0 then
    io.stderr:write(string.format('tplua trace: %s: no trace file (*.json, *.sqlite, '
      .. '*kernel_trace.csv, gzip or not)\n', arg))
    return nil
  end
  return files
end

local function label_of(arg)
  return (arg:gsub('/+$', ''):match('([^/]+)$') or arg):gsub('%.gz$', '')
    :gsub('%.pt%.trace%.json$', ''):gsub('%.json$', ''):gsub('%.sqlite$', ''):gsub('%.csv$', '')
end

-- JSON-friendly copies of the op tables (the rows without their decoded shapes).
local function ops_for_json(t)
  if not t then
    return nil
  end
  local rows = {}
  for i, r in ipairs(t.rows) do
    local c = {}
    for k, v in pairs(r) do
      if k ~= 'time_sq' and k ~= 'inv' then
        c[k] = v
      end
    end
    rows[i] = c
  end
  return { rows = rows, classes = t.classes, linked = t.linked, unlinked = t.unlinked,
    steps = t.steps, own = t.own, device = t.device, peaks = t.peaks, malformed = t.malformed,
    warnings = t.warnings, ranks = t.ranks }
end

-- A JSON-friendly copy of a run's analysis (no functions, no cycles); with `step`, only that
-- step's breakdown.
local function for_json(run, step, memory)
  local out = { ranks = {}, errors = run.errors, stragglers = run.stragglers, mean = run.mean,
    warnings = run.warnings, mixed = run.mixed or nil,
    ops = ops_for_json(run.ops), step = step, collectives = run.collectives }
  for i, a in ipairs(run.ranks) do
    local steps = a.steps
    if step then
      steps = {}
      for _, s in ipairs(a.steps) do
        if s.step == step then
          steps[#steps + 1] = s
        end
      end
    end
    out.ranks[i] = { path = a.path, rank = a.rank, world_size = a.world_size,
      backend = a.backend, devices = a.devices, info = a.info, gpu = a.gpu,
      warnings = a.warnings, steps = steps, mean = not step and a.mean or nil, whole = a.whole,
      top = a.top, cpu = a.cpu, classes = a.classes, idle = a.idle, checks = a.checks,
      ops = #run.ranks > 1 and ops_for_json(a.ops) or nil, collectives = a.collectives,
      memory = memory and (a.memory or require('tp.json').null) or nil }
  end
  return out
end

local function load_lua(path)
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

-- The profiler steps a run's traces hold, as text ("3, 4, 5"), for a --step that names none.
local function steps_text(run)
  local seen, list = {}, {}
  for _, a in ipairs(run.ranks) do
    for _, st in ipairs(a.info.stepless and {} or a.steps) do
      if not seen[st.step] then
        seen[st.step] = true
        list[#list + 1] = st.step
      end
    end
  end
  table.sort(list)
  for i, n in ipairs(list) do
    list[i] = tostring(n)
  end
  return #list > 0 and table.concat(list, ', ') or 'none (no ProfilerStep in the trace)'
end

-- Draws the roofline of `sides` ({ {label, table} }) to PATH (.png or .svg).
local function draw_roofline(path, sides)
  local format = path:match('%.(%w+)$')
  format = format and format:lower()
  if format ~= 'png' and format ~= 'svg' then
    return nil, string.format('--roofline %s: the file must end in .png or .svg', path), 2
  end
  local chart = require('tp.present.ops').roofline_chart(sides)
  if not chart then
    return nil, '--roofline: no op has both FLOPs per byte and TFLOP/s to draw', 1
  end
  local r, err = require('tp.present.plot').render(chart, { format = format, path = path })
  if not r then
    return nil, '--roofline: ' .. tostring(err), 1
  end
  return true
end

local function say(msg)
  io.stderr:write(string.format('tplua trace: %s\n', msg))
end

-- PyTorch's memory-timeline exports (tp.analyse.memory), loaded when --memory asks.
local timeline = setmetatable({}, { __index = function(_, k)
  local m = require('tp.analyse.memory')
  return ({ read = m.read_timeline, is_timeline_name = m.is_timeline_name })[k]
end })

-- The memory-timeline exports given (PyTorch's export_memory_timeline), read; nil and the exit
-- status once the error is printed.
local function timelines_list(paths)
  local list = {}
  for _, p in ipairs(paths) do
    local t, err = timeline.read(p)
    if not t then
      io.stderr:write('tplua trace: ', err, '\n')
      return nil, 1
    end
    list[#list + 1] = t
  end
  return list
end

-- Prints the memory-timeline exports given (text, or JSON with --json); the exit status.
timelines_out = function(paths, opts)
  local list, code = timelines_list(paths)
  if not list then
    return code
  end
  if opts.json then
    local json = require('tp.json')
    for _, t in ipairs(list) do
      t.times, t.sizes = json.array(t.times), json.array(t.sizes)
    end
    io.stdout:write(json.encode({ schema = 'tplua.trace/2', time_unit = 'ns',
      timelines = json.array(list) }, { pretty = true }), '\n')
    return 0
  end
  local present_memory = require('tp.present.memory')
  for _, t in ipairs(list) do
    io.stdout:write(present_memory.timeline_text(t))
  end
  return 0
end

-- --memory --compare: the two runs' memory side by side (their rank with the largest peak).
memory_compare = function(runs, labels, inputs, opts)
  local analyse_memory = require('tp.analyse.memory')
  local sides = {}
  for i, run in ipairs(runs) do
    local m = analyse_memory.of_run(run)
    if not m then
      io.stderr:write(string.format('tplua trace: %s: no [memory] events in its traces '
        .. '(profile with profile_memory=True; docs/memory.md)\n', inputs[i]))
      return 1
    end
    sides[i] = m.memory
  end
  local c = analyse_memory.compare(sides[1], sides[2], labels)
  if opts.json then
    local json = require('tp.json')
    c.pairs = json.array(c.pairs)
    c.only = json.array({ json.array(c.only[1]), json.array(c.only[2]) })
    c.lines = json.array(c.lines)
    io.stdout:write(json.encode(require('tp.present.trace').json_doc({ memory = c }),
      { pretty = true }), '\n')
  else
    io.stdout:write(require('tp.present.memory').compare_text(c, { top = opts.top }))
  end
  return 0
end

function M.run(args)
  local opts, inputs = cli.parse(args, SPEC)
  if not opts then
    return usage_error(inputs)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #inputs == 0 then
    return usage_error('no trace FILE or DIR given')
  end
  if opts.top and opts.top < 0 then
    return usage_error('--top must be 0 or more')
  end
  if opts.compare and #inputs ~= 2 then
    return usage_error(string.format('--compare takes two runs (A B), got %d', #inputs))
  end
  if not opts.compare and (opts.label_a or opts.label_b) then
    return usage_error('--label-a and --label-b go with --compare')
  end
  if opts.gap and opts.gap <= 0 then
    return usage_error('--gap must be a positive number of microseconds')
  end
  if opts.memory and (opts.idle or opts.ops or opts.roofline or opts.collectives) then
    return usage_error('--memory is a view of its own: not with --idle, --ops, --roofline or '
      .. '--collectives')
  end
  if opts.compare and opts.idle then
    return usage_error('--idle goes with the traces of one run (with --compare, the '
      .. 'explanation gives each side\'s idle causes)')
  end
  if opts.compare and opts.step then
    return usage_error('--step goes with the traces of one run, not with --compare (the '
      .. 'explanation uses the mean of the steady steps of each side)')
  end
  local trace = require('tp.analyse.trace')
  local ops = require('tp.analyse.ops')
  if opts.rules then
    local ok, err = load_lua(opts.rules)
    if not ok then
      say(string.format('--rules %s: %s', opts.rules, err))
      return 1
    end
  end
  if opts.models then
    local ok, err = ops.load_models(opts.models)
    if not ok then
      say(string.format('--models %s: %s', opts.models, err))
      return 1
    end
  end
  local peaks
  if opts.peaks then
    local err
    peaks, err = require('tp.analyse.peaks').load(opts.peaks)
    if not peaks then
      say(string.format('--peaks %s: %s', opts.peaks, err))
      return 1
    end
  end
  local want_ops = not opts.memory and (opts.ops or opts.roofline ~= nil or opts.compare
    or peaks ~= nil)
  local json = require('tp.json')
  local present = require('tp.present.trace')
  local present_ops = require('tp.present.ops')
  local aopts = { top = opts.top or 15, ops = want_ops or nil, peaks = peaks,
    collectives = opts.collectives or nil,
    gap = opts.gap and math.max(1, math.floor(opts.gap * 1e3 + 0.5)) or nil }
  if opts.compare then
    local runs = {}
    for i, arg in ipairs(inputs) do
      local files = expand_or_say(arg)
      if not files then
        return 1
      end
      local run, err = trace.analyse(files, aopts)
      if not run or #run.errors > 0 then
        say(err or run.errors[1])
        return 1
      end
      runs[i] = run
    end
    local labels = { opts.label_a or label_of(inputs[1]), opts.label_b or label_of(inputs[2]) }
    if opts.memory then
      return memory_compare(runs, labels, inputs, opts)
    end
    local e, err = trace.explain(runs[1], runs[2], labels)
    if not e then
      say(err)
      return 1
    end
    if opts.roofline then
      local ok, rerr, code = draw_roofline(opts.roofline, { { label = labels[1],
        table = runs[1].ops }, { label = labels[2], table = runs[2].ops } })
      if not ok then
        say(rerr)
        return code
      end
    end
    if opts.json then
      local c = e.ops
      io.stdout:write(json.encode(present.json_doc({ explanation = { labels = e.labels,
        step_a = e.step_a, step_b = e.step_b, diff = e.diff, ratio = e.ratio, sum = e.sum,
        moved = e.moved, sign = e.sign, faster = e.faster, host = e.host, rows = e.rows,
        overlap_a = e.overlap_a, overlap_b = e.overlap_b, lines = e.lines,
        warnings = e.warnings, checks = e.checks }, ops = c and { pairs = c.pairs,
        only_a = c.only_a, only_b = c.only_b, classes = c.class_order, verdicts = c.verdicts,
        matched_a = c.matched_a, matched_b = c.matched_b } or nil,
        a = for_json(runs[1]), b = for_json(runs[2]) }), { pretty = true }), '\n')
    else
      io.stdout:write(present.explain_text(e))
      if e.ops then
        io.stdout:write('\n', present_ops.compare_text(e.ops, e, { top = opts.top }))
      end
      if opts.collectives then
        io.stdout:write('\n', require('tp.present.collectives').trace_compare_text(runs[1],
          runs[2], labels))
      end
    end
    return 0
  end
  local files = {}
  local timelines = {}
  for _, arg in ipairs(inputs) do
    local list = expand_or_say(arg)
    if not list then
      return 1
    end
    for _, f in ipairs(list) do
      if opts.memory and timeline.is_timeline_name(f) then
        timelines[#timelines + 1] = f
      else
        files[#files + 1] = f
      end
    end
  end
  if #files == 0 then
    return timelines_out(timelines, opts)
  end
  if opts.step then
    aopts.step = opts.step
  end
  local run, err, code = trace.analyse(files, aopts)
  if not run and code == 'EINVAL' and opts.step then
    -- the step is not in the trace: say which ones are
    local whole = trace.analyse(files, { top = 0 })
    return usage_error(string.format('--step %d: no such profiler step; the trace has: %s',
      opts.step, whole and steps_text(whole) or '?'))
  end
  if not run then
    say(err)
    return 1
  end
  if opts.step then
    local found = false
    for _, a in ipairs(run.ranks) do
      for _, st in ipairs(a.steps) do
        found = found or (st.step == opts.step and not a.info.stepless)
      end
    end
    if not found then
      return usage_error(string.format('--step %d: no such profiler step; the trace has: %s',
        opts.step, steps_text(run)))
    end
  end
  if opts.roofline and run.ops then
    local ok, rerr, rcode = draw_roofline(opts.roofline, { { label = label_of(inputs[1]),
      table = run.ops } })
    if not ok then
      say(rerr)
      return rcode
    end
  end
  if opts.json then
    local doc = for_json(run, opts.step, opts.memory)
    if opts.memory and #timelines > 0 then
      local list, status = timelines_list(timelines)
      if not list then
        return status
      end
      doc.timelines = list
    end
    io.stdout:write(json.encode(present.json_doc(doc), { pretty = true }), '\n')
  elseif opts.memory then
    io.stdout:write(require('tp.present.memory').run_text(run, { top = opts.top,
      step = opts.step }))
    if #timelines > 0 and timelines_out(timelines, opts) ~= 0 then
      return 1
    end
  elseif opts.idle then
    io.stdout:write(present.idle_text(run, { step = opts.step }))
  else
    io.stdout:write(present.run_text(run, { step = opts.step }))
    if run.ops then
      io.stdout:write('\n', present_ops.table_text(run.ops, { top = opts.top }))
    end
    if opts.collectives then
      io.stdout:write('\n', require('tp.present.collectives').trace_text(run))
    end
  end
  for _, e in ipairs(run.errors) do
    say(e)
  end
  return #run.errors > 0 and 1 or 0
end

return M
