-- tplua trace: profiler traces (PyTorch profiler / Kineto JSON, plain or gzip) broken down per
-- step, per class of kernel, per rank; and two runs' traces set side by side (--compare).
local cli = require('tp.cli')

local M = {}

M.summary = 'break profiler traces down (idle, compute, communication, kernels) and explain gaps'

M.usage = [[
usage: tplua trace FILE|DIR... [--json] [--step N] [--top K] [--rules FILE]
       tplua trace --compare A B [--label-a NAME] [--label-b NAME] [--json] [--rules FILE]

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
With --compare, A and B are two runs (a file, or a DIR of rank files, each): the table of
time per class per step on each side and the difference, rows adding up to the difference
in step time, largest first.

options:
  --json          print one JSON document instead of the text
  --step N        show this profiler step (ProfilerStep#N) instead of every step
  --top K         kernels in the top list (default 15)
  --compare       explain the difference between the runs A and B (B against A)
  --label-a NAME  name of A in the explanation (default: its file or directory name)
  --label-b NAME  name of B
  --rules FILE    a Lua file that adds classification rules first, e.g.
                    local trace = require('tp.analyse.trace')
                    trace.rule { pattern = '^my_fused_mlp', class = 'gemm' }
  -h, --help      show this help

exit status: 0 when every trace was read (a truncated trace is read up to its cut, with a
warning), 1 when a trace cannot be read, 2 on a usage error.

examples:
  tplua trace rank0.pt.trace.json.gz --top 10
  tplua trace --compare traces/h100 traces/mi300x --label-a H100 --label-b MI300X
]]

local SPEC = { json = 'boolean', step = 'integer', top = 'integer', compare = 'boolean',
  label_a = 'string', label_b = 'string', rules = 'string', help = 'boolean' }

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

-- A JSON-friendly copy of a run's analysis (no functions, no cycles).
local function for_json(run)
  local out = { ranks = {}, errors = run.errors, stragglers = run.stragglers, mean = run.mean }
  for i, a in ipairs(run.ranks) do
    out.ranks[i] = { path = a.path, rank = a.rank, world_size = a.world_size,
      backend = a.backend, devices = a.devices, info = a.info, gpu = a.gpu,
      warnings = a.warnings, steps = a.steps, mean = a.mean, whole = a.whole, top = a.top,
      cpu = a.cpu, classes = a.classes }
  end
  return out
end

local function load_rules(path)
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
  local trace = require('tp.analyse.trace')
  if opts.rules then
    local ok, err = load_rules(opts.rules)
    if not ok then
      io.stderr:write(string.format('tplua trace: --rules %s: %s\n', opts.rules, err))
      return 1
    end
  end
  local json = require('tp.json')
  local present = require('tp.present.trace')
  local top = { top = opts.top or 15 }
  if opts.compare then
    local runs = {}
    for i, arg in ipairs(inputs) do
      local files = expand_or_say(arg)
      if not files then
        return 1
      end
      local run, err = trace.analyse(files, top)
      if not run or #run.errors > 0 then
        io.stderr:write(string.format('tplua trace: %s\n', err or run.errors[1]))
        return 1
      end
      runs[i] = run
    end
    local labels = { opts.label_a or label_of(inputs[1]), opts.label_b or label_of(inputs[2]) }
    local e, err = trace.explain(runs[1], runs[2], labels)
    if not e then
      io.stderr:write(string.format('tplua trace: %s\n', err))
      return 1
    end
    if opts.json then
      io.stdout:write(json.encode({ explanation = { labels = e.labels, step_a = e.step_a,
        step_b = e.step_b, diff = e.diff, ratio = e.ratio, sum = e.sum, rows = e.rows,
        overlap_a = e.overlap_a, overlap_b = e.overlap_b, lines = e.lines,
        warnings = e.warnings }, a = for_json(runs[1]), b = for_json(runs[2]) },
        { pretty = true }), '\n')
    else
      io.stdout:write(present.explain_text(e))
    end
    return 0
  end
  local files = {}
  for _, arg in ipairs(inputs) do
    local list = expand_or_say(arg)
    if not list then
      return 1
    end
    for _, f in ipairs(list) do
      files[#files + 1] = f
    end
  end
  local run, err = trace.analyse(files, top)
  if not run then
    io.stderr:write(string.format('tplua trace: %s\n', err))
    return 1
  end
  if opts.json then
    io.stdout:write(json.encode(for_json(run), { pretty = true }), '\n')
  else
    io.stdout:write(present.run_text(run, { step = opts.step }))
  end
  for _, e in ipairs(run.errors) do
    io.stderr:write(string.format('tplua trace: %s\n', e))
  end
  return #run.errors > 0 and 1 or 0
end

return M
