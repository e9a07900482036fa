-- tp.profile: the `profile` run option. Either wraps a framework command in a system profiler
-- (Nsight Systems `nsys`, ROCm `rocprofv3`) or sets the framework's own PyTorch-profiler
-- arguments, and says where the trace files will appear. Applied to the per-process command an
-- adapter builds (before tp.launch.torchrun), so each rank writes its own trace.
--
--   profile = { tool = 'torch' | 'nsys' | 'rocprofv3', steps = { first, last }, output = dir,
--               memory = true }
--
-- `memory` (torch only): the PyTorch profiler also records the allocator's events
-- (profile_memory=True), which tplua reads for where the memory goes (docs/memory.md).
--
-- `steps` are 1-based training steps, both included; without `steps` a system profiler
-- traces the whole run. Recipes set it with a `profile` field or `--profile TOOL[:FIRST-LAST]`
-- (parse, normalize); Experiment:plan applies it to each run (plan_findings, for_run), tp.run
-- lists the trace files in the run record (record) and tp.report links them (links).
-- docs/frameworks.md, "Profiling".

local M = {}

local TOOLS = { torch = true, nsys = true, rocprofv3 = true }
local BINARY = { nsys = 'nsys', rocprofv3 = 'rocprofv3' }

local function validate(opts, level)
  level = (level or 1) + 1
  if type(opts) ~= 'table' then
    error('profile: opts must be a table, got ' .. type(opts), level)
  end
  for k in pairs(opts) do
    if k ~= 'tool' and k ~= 'steps' and k ~= 'output' and k ~= 'path' and k ~= 'memory' then
      error('profile: unknown option ' .. tostring(k), level)
    end
  end
  if not TOOLS[opts.tool] then
    error("profile: tool must be 'torch', 'nsys' or 'rocprofv3', got " .. tostring(opts.tool),
      level)
  end
  if type(opts.output) ~= 'string' or opts.output == '' then
    error('profile: output (a directory) is required', level)
  end
  if opts.steps ~= nil then
    local s = opts.steps
    if type(s) ~= 'table' or math.type(s[1]) ~= 'integer' or math.type(s[2]) ~= 'integer'
      or s[1] < 1 or s[2] < s[1] then
      error('profile: steps must be { first, last } with 1 <= first <= last', level)
    end
  end
  if opts.path ~= nil and type(opts.path) ~= 'string' then
    error('profile: path must be a string (a PATH-style list)', level)
  end
  if opts.memory ~= nil and type(opts.memory) ~= 'boolean' then
    error('profile: memory must be a boolean', level)
  end
  if opts.memory and opts.tool ~= 'torch' then
    error("profile: memory needs tool = 'torch' (the PyTorch profiler's profile_memory)", level)
  end
end

local function is_executable(path)
  local ok, fs = pcall(require, 'tp.fs')
  if ok then
    local st = fs.stat(path)
    -- Any execute bit on a regular file (or a link to one).
    return st ~= nil and st.type == 'file' and st.mode ~= nil and (st.mode & 73) ~= 0
  end
  local f = io.open(path, 'rb')
  if not f then
    return false
  end
  local readable = f:read(0) ~= nil
  f:close()
  return readable
end

--- Finds an executable in a PATH-style list; returns its path or nil.
---@param name string
---@param path? string  default: $PATH
---@return string|nil
function M.which(name, path)
  if type(name) ~= 'string' or name == '' then
    error('profile.which: name must be a non-empty string', 2)
  end
  if name:find('/') then
    return is_executable(name) and name or nil
  end
  path = path or os.getenv('PATH') or ''
  for dir in (path .. ':'):gmatch('([^:]*):') do
    if dir == '' then
      dir = '.'
    end
    local candidate = dir .. '/' .. name
    if is_executable(candidate) then
      return candidate
    end
  end
  return nil
end

--- Checks a profile option at plan time: the tool is known and, for a system profiler, found
--- in PATH (`opts.path`, default $PATH).
---```lua
---local ok, err = tp.profile.check({ tool = 'nsys', steps = { 10, 12 }, output = 'prof' })
---if not ok then print(err) end  -- profile: nsys: not found in PATH
---```
---@param opts table
---@return true|nil ok, string? err, string? code
function M.check(opts)
  validate(opts, 2)
  local binary = BINARY[opts.tool]
  if binary and not M.which(binary, opts.path) then
    return nil, string.format('profile: %s: not found in PATH (%s)', binary,
      opts.path or os.getenv('PATH') or ''), 'ENOENT'
  end
  return true
end

local function join(dir, rel)
  return dir:sub(-1) == '/' and dir .. rel or dir .. '/' .. rel
end

local function copy(cmd)
  local out = {}
  for k, v in pairs(cmd) do
    out[k] = v
  end
  out.argv = {}
  for i, a in ipairs(cmd.argv) do
    out.argv[i] = a
  end
  out.env = {}
  for k, v in pairs(cmd.env or {}) do
    out.env[k] = v
  end
  return out
end

local function append(argv, ...)
  for _, a in ipairs({ ... }) do
    argv[#argv + 1] = a
  end
end

local function fail(fmt, ...)
  error(string.format(fmt, ...), 0)
end

-- The frameworks whose PyTorch profiler tplua can ask for the allocator's events.
local MEMORY = { reference = '--profile-memory' }

-- `profile.memory` for a framework that cannot record it: an error naming why.
local function memory_unsupported(framework, opts)
  if opts.memory and not MEMORY[framework] then
    fail("profile: %s: memory cannot be asked of its profiler (tplua passes profile_memory to "
      .. "the reference trainer only); profile without memory, or use tool = 'torch' with "
      .. 'the reference trainer', framework)
  end
end

-- Megatron counts `iteration` as completed steps: profiling starts before the step after
-- iteration == --profile-step-start and stops once iteration == --profile-step-end
-- (megatron/training/training.py train: cudaProfilerStart/Stop, and the pytorch profiler's
-- schedule wait = start-1, warmup = 1, active = end-start). So steps {first, last} are
-- start = first - 1, end = last.
local function megatron_range(steps)
  return tostring(steps[1] - 1), tostring(steps[2])
end

--- The files nsys writes for the output name `base`: its report and the SQLite export.
---@param base string
---@return string[]
function M.nsys_traces(base)
  return { base .. '.nsys-rep', base .. '.sqlite' }
end

local function system_wrap(cmd, opts, ranged)
  local out = copy(cmd)
  local pre, traces
  if opts.tool == 'nsys' then
    -- nsys profile: -o with %q{RANK} (an environment variable, set by torchrun per worker);
    -- with a range, capture only between cudaProfilerStart and cudaProfilerStop.
    -- --export=sqlite also writes the report as an SQLite database beside it, which
    -- tp.analyse.trace reads (docs/trace.md).
    pre = { 'nsys', 'profile', '-t', 'cuda,nvtx', '-s', 'none', '--force-overwrite', 'true',
            '--export=sqlite', '-o', join(opts.output, 'nsys_rank%q{RANK}') }
    if ranged then
      append(pre, '--capture-range=cudaProfilerApi', '--capture-range-end=stop')
    end
    traces = M.nsys_traces(join(opts.output, 'nsys_rank<RANK>'))
  else
    -- rocprofv3: -d output directory, -o file name with the %rank% key; Perfetto output to look
    -- at and CSV (rank<r>_kernel_trace.csv, memory copies and HIP calls beside it) to analyse.
    pre = { 'rocprofv3', '--runtime-trace', '--output-format', 'pftrace', 'csv', '-d',
            opts.output, '-o', 'rank%rank%', '--' }
    traces = { join(opts.output, 'rank<RANK>_results.pftrace'),
               join(opts.output, 'rank<RANK>_kernel_trace.csv') }
  end
  local argv = pre
  for _, a in ipairs(out.argv) do
    argv[#argv + 1] = a
  end
  out.argv = argv
  return out, traces
end

-- The PyTorch profiler traces a window of steps: `steps` is required.
local function need_steps(framework, s)
  if not s then
    fail('profile: %s: the PyTorch profiler needs steps = { first, last }', framework)
  end
end

-- rocprofv3 has no capture range for a framework's cudaProfilerStart/Stop: the whole run only.
-- `label` prefixes the message ('' or 'nemo: '), `whose` names the framework's range.
local function rocprof_whole_run(opts, label, whose)
  if opts.tool == 'rocprofv3' and opts.steps then
    fail('profile: %srocprofv3: steps cannot be honoured (rocprofv3 has no capture range for '
      .. '%s cudaProfilerStart/Stop); omit steps to trace the whole run', label, whose)
  end
end

local APPLY = {}

function APPLY.megatron(cmd, opts)
  local s = opts.steps
  if opts.tool == 'torch' then
    need_steps('megatron', s)
    local out = copy(cmd)
    local first, last = megatron_range(s)
    -- arguments.py _add_training_args: --profile, --use-pytorch-profiler,
    -- --profile-step-start/end, --profile-ranks; traces go to --tensorboard-dir through
    -- torch.profiler.tensorboard_trace_handler.
    append(out.argv, '--profile', '--use-pytorch-profiler', '--profile-step-start', first,
      '--profile-step-end', last, '--profile-ranks', '0', '--tensorboard-dir', opts.output)
    return out, { join(opts.output, '*.pt.trace.json') }
  end
  rocprof_whole_run(opts, '', "Megatron's")
  local out, traces = system_wrap(cmd, opts, s ~= nil)
  if s then
    local first, last = megatron_range(s)
    append(out.argv, '--profile', '--profile-step-start', first, '--profile-step-end', last,
      '--profile-ranks', '0')
    traces = M.nsys_traces(join(opts.output, 'nsys_rank0'))
  end
  return out, traces
end

function APPLY.primus(cmd, opts)
  local s = opts.steps
  if opts.tool ~= 'torch' then
    fail('profile: primus: %s cannot wrap the workers; primus-cli starts torchrun itself '
      .. "(use tool = 'torch')", opts.tool)
  end
  need_steps('primus', s)
  local out = copy(cmd)
  local first, last = megatron_range(s)
  -- Megatron's arguments as Primus command-line overrides (`--name value` after --config, as
  -- Primus' own run scripts pass them).
  append(out.argv, '--profile', 'True', '--use_pytorch_profiler', 'True', '--profile_step_start',
    first, '--profile_step_end', last, '--disable_tensorboard', 'False', '--tensorboard_dir',
    opts.output)
  return out, { join(opts.output, '*.pt.trace.json') }
end

function APPLY.torchtitan(cmd, opts)
  local s = opts.steps
  if opts.tool ~= 'torch' then
    if s then
      fail('profile: torchtitan: %s: steps cannot be honoured (torchtitan marks no capture '
        .. 'range); omit steps to trace the whole run', opts.tool)
    end
    return system_wrap(cmd, opts, false)
  end
  need_steps('torchtitan', s)
  -- torchtitan/tools/profiling.py maybe_enable_profiling: schedule(wait = profile_freq -
  -- (warmup + active), warmup, active), repeating every profile_freq steps; traces in
  -- <dump_folder>/<save_traces_folder>/iteration_<step>/rank<r>_trace.json.
  local active = s[2] - s[1] + 1
  local warmup = s[1] > 1 and 1 or 0
  local out = copy(cmd)
  append(out.argv, '--profiling.enable_profiling', '--profiling.save_traces_folder', opts.output,
    '--profiling.profile_freq', tostring(s[2]), '--profiling.profiler_warmup', tostring(warmup),
    '--profiling.profiler_active', tostring(active))
  return out, { join(opts.output, 'iteration_' .. s[2] .. '/rank<RANK>_trace.json') }
end

-- A Python string literal (the NeMo driver reads its arguments with ast.literal_eval).
local function py_string(s)
  return "'" .. s:gsub('\\', '\\\\'):gsub("'", "\\'") .. "'"
end

-- NeMo 2 profiles through Lightning callbacks that tplua's driver script adds to the recipe's
-- trainer (tp.frameworks.nemo SCRIPT, `profile.torch=` / `profile.nsys=`):
-- nemo/lightning/pytorch/callbacks/pytorch_profiler.py PytorchProfilerCallback starts at
-- on_train_batch_start when global_step == start_step (completed steps: first - 1) and stops at
-- on_train_batch_end once global_step reaches end_step (last), writing
-- <trace_dir>/device/rank-<r>.json; callbacks/nsys.py NsysCallback brackets the same steps
-- (trainer.strategy.current_epoch_step) with cudaProfilerStart/Stop on the ranks given (0).
function APPLY.nemo(cmd, opts)
  local s = opts.steps
  if opts.tool == 'torch' then
    need_steps('nemo', s)
    local out = copy(cmd)
    append(out.argv, string.format('profile.torch=[%d, %d, %s]', s[1] - 1, s[2],
      py_string(opts.output)))
    return out, { join(opts.output, 'device/rank-<RANK>.json') }
  end
  rocprof_whole_run(opts, 'nemo: ', "NeMo's")
  local out, traces = system_wrap(cmd, opts, s ~= nil)
  if s then
    append(out.argv, string.format('profile.nsys=[%d, %d]', s[1] - 1, s[2]))
    traces = M.nsys_traces(join(opts.output, 'nsys_rank0'))
  end
  return out, traces
end

-- The reference trainer reads Megatron's profiler arguments with Megatron's meaning
-- (tools/reftrain/reftrain.py): --profile-step-start first-1, --profile-step-end last; with
-- --use-pytorch-profiler every rank writes <--profile-dir>/rank<r>_trace.json, without it the
-- steps are bracketed by cudaProfilerStart/Stop for nsys' capture range.
function APPLY.reference(cmd, opts)
  local s = opts.steps
  if opts.tool == 'torch' then
    need_steps('reference', s)
    local out = copy(cmd)
    local first, last = megatron_range(s)
    append(out.argv, '--profile', '--use-pytorch-profiler', '--profile-step-start', first,
      '--profile-step-end', last, '--profile-dir', opts.output)
    if opts.memory then
      append(out.argv, MEMORY.reference)
    end
    return out, { join(opts.output, 'rank<RANK>_trace.json') }
  end
  rocprof_whole_run(opts, '', "the trainer's")
  local out, traces = system_wrap(cmd, opts, s ~= nil)
  if s then
    local first, last = megatron_range(s)
    append(out.argv, '--profile', '--profile-step-start', first, '--profile-step-end', last)
  end
  return out, traces
end

--- Applies a profile option to the per-process command of a framework adapter. Raises for a
--- combination the framework cannot express. Call check() first for the PATH test.
---```lua
---local cmd, traces = tp.profile.apply('megatron', megatron.build(config),
---  { tool = 'torch', steps = { 10, 12 }, output = '/runs/x/profile' })
---```
---@param framework string  'megatron' | 'primus' | 'nemo' | 'torchtitan' | 'reference'
---@param cmd table  the adapter's build() result
---@param opts table  { tool, steps?, output }
---@return table cmd, string[] traces  where the trace files will appear (<RANK> = global rank)
function M.apply(framework, cmd, opts)
  validate(opts, 2)
  if type(cmd) ~= 'table' or type(cmd.argv) ~= 'table' then
    error('profile.apply: cmd must be a command table', 2)
  end
  local fn = APPLY[framework]
  if not fn then
    error("profile.apply: unknown framework '" .. tostring(framework) .. "'", 2)
  end
  memory_unsupported(framework, opts)
  return fn(cmd, opts)
end

-- ---------------------------------------------------------------------------------------------
-- Profiling from recipes and the command line: the `profile` field, the --profile flag, the
-- plan's checks, and the trace files a run leaves (its record's `profile` member).

--- The tools, in the order messages list them.
M.TOOLS = { 'torch', 'nsys', 'rocprofv3' }

local function steps_ok(s)
  return type(s) == 'table' and #s == 2 and math.type(s[1]) == 'integer'
    and math.type(s[2]) == 'integer' and s[1] >= 1 and s[2] >= s[1]
end

--- Parses the value of the `--profile` flag: `TOOL` or `TOOL:FIRST-LAST` (1-based steps, both
--- included), with `,memory` after it for the allocator's events too (torch only), or `none` (no
--- profiling, whatever the recipe says). Returns the profile `{tool =, steps =, memory =}`,
--- false for `none`, or nil and a message.
---```lua
---local p = tp.profile.parse('torch:5-7')  -- { tool = 'torch', steps = { 5, 7 } }
---```
---@param text string
---@return table|false|nil profile, string? err
function M.parse(text)
  if type(text) ~= 'string' then
    error('profile.parse: string expected, got ' .. type(text), 2)
  end
  if text == 'none' then
    return false
  end
  local memory = false
  local base = text:match('^(.*),memory$')
  if base then
    text, memory = base, true
  end
  local tool, range = text:match('^([^:]*):(.*)$')
  tool = tool or text
  if not TOOLS[tool] then
    return nil, string.format("unknown tool '%s' (%s, or none)", tool,
      table.concat(M.TOOLS, ', '))
  end
  if memory and tool ~= 'torch' then
    return nil, string.format("'%s,memory': memory needs the torch tool (torch:5-7,memory)",
      text)
  end
  if range == nil then
    return { tool = tool, memory = memory or nil }
  end
  local a, b = range:match('^(%d+)%-(%d+)$')
  local steps = { math.tointeger(tonumber(a)), math.tointeger(tonumber(b)) }
  if not steps_ok(steps) then
    return nil, string.format("'%s': steps must be FIRST-LAST with 1 <= FIRST <= LAST "
      .. '(e.g. %s:5-7)', text, tool)
  end
  return { tool = tool, steps = steps, memory = memory or nil }
end

--- Formats a profile as the flag writes it: `torch:5-7`, `nsys`.
---@param profile table {tool, steps?}
---@return string
function M.format(profile)
  local s = profile.steps
  return (s and string.format('%s:%d-%d', profile.tool, s[1], s[2]) or profile.tool)
    .. (profile.memory and ',memory' or '')
end

--- Checks the `profile` field of a recipe or of one of its platforms: `{ tool = 'torch' |
--- 'nsys' | 'rocprofv3', steps = { first, last }? }`, or false (no profiling). Returns a copy,
--- or nil and a message.
---```lua
---local p, err = tp.profile.normalize({ tool = 'perf' })  -- nil, "tool: one of torch, ..."
---```
---@param v any
---@return table|false|nil profile, string? err
function M.normalize(v)
  if v == false then
    return false
  end
  if type(v) ~= 'table' then
    return nil, '{ tool = ..., steps = { first, last } } or false expected, got ' .. type(v)
  end
  for k in pairs(v) do
    if k ~= 'tool' and k ~= 'steps' and k ~= 'memory' then
      return nil, string.format("unknown field '%s' (tool, steps, memory)", tostring(k))
    end
  end
  if not TOOLS[v.tool] then
    return nil, string.format("tool: one of %s expected, got %s", table.concat(M.TOOLS, ', '),
      type(v.tool) == 'string' and ("'" .. v.tool .. "'") or type(v.tool))
  end
  if v.steps ~= nil and not steps_ok(v.steps) then
    return nil, 'steps: { first, last } with 1 <= first <= last expected'
  end
  if v.memory ~= nil and type(v.memory) ~= 'boolean' then
    return nil, 'memory: true or false expected, got ' .. type(v.memory)
  end
  if v.memory and v.tool ~= 'torch' then
    return nil, "memory: needs tool = 'torch' (the PyTorch profiler's profile_memory)"
  end
  return { tool = v.tool, steps = v.steps and { v.steps[1], v.steps[2] } or nil,
    memory = v.memory or nil }
end

-- Launchers that start the runs on another machine or in an image: a profiler missing here
-- may be present there.
local ELSEWHERE = { container = 'in the image', slurm = 'on the compute nodes' }

--- The plan-time findings of profiling one platform's runs: `{severity =, message =}` each. A
--- system profiler not found in PATH is an error, or a warning with a launcher that starts the
--- runs elsewhere (`container`, `slurm`); steps past the run's last iteration are a warning.
---```lua
---for _, f in ipairs(tp.profile.plan_findings({ tool = 'nsys' }, { launcher = 'torchrun' })) do
---  print(f.severity, f.message)  -- error   profile: nsys: not found in PATH (...)
---end
---```
---@param profile table {tool, steps?}
---@param opts? {launcher?: string, path?: string, iters?: integer}
---@return table[] findings
function M.plan_findings(profile, opts)
  opts = opts or {}
  local out = {}
  local ok, err = M.check({ tool = profile.tool, steps = profile.steps, output = '.',
    path = opts.path })
  if not ok then
    local where = ELSEWHERE[opts.launcher]
    out[#out + 1] = where and { severity = 'warning', message = string.format('%s here; it '
      .. 'must be there %s', err, where) } or { severity = 'error', message = err }
  end
  local s = profile.steps
  if s and math.type(opts.iters) == 'integer' and s[2] > opts.iters then
    out[#out + 1] = { severity = 'warning', message = string.format('profile: steps %d-%d end '
      .. 'after the last iteration (%d): the trace may be incomplete or missing', s[1], s[2],
      opts.iters) }
  end
  return out
end

--- Profiles one run: applies `profile` ({tool, steps?}) to the adapter's command with the
--- traces written under `output` (a directory of the run). Returns the new command and the
--- run's `profile` entry `{tool, steps, output, patterns}`, or nil and the reason the framework
--- cannot do it.
---```lua
---local cmd, info = tp.profile.for_run('reference', ref.build(config),
---  { tool = 'torch', steps = { 2, 3 } }, '/runs/nvd/x/profile')
---```
---@param framework string
---@param cmd table
---@param profile table
---@param output string
---@return table|nil cmd, table|string info
function M.for_run(framework, cmd, profile, output)
  local ok, out, patterns = pcall(M.apply, framework, cmd,
    { tool = profile.tool, steps = profile.steps, output = output, memory = profile.memory })
  if not ok then
    return nil, tostring(out)
  end
  return out, { tool = profile.tool, steps = profile.steps, output = output,
                patterns = patterns, memory = profile.memory }
end

--- Returns true when a file name is one the profilers write: `*_trace.json` (the reference
--- trainer, torchtitan) or `*.pt.trace.json` (torch.profiler's TensorBoard handler: Megatron,
--- Primus). Results directories hold them beside the run records, which tp.results and the
--- recipes' analysis read: they skip these (a trace can be gigabytes).
---@param name string
---@return boolean
function M.is_trace_name(name)
  return name:match('_trace%.json$') ~= nil or name:match('%.pt%.trace%.json$') ~= nil
end

local function glob_quote(s)
  return (s:gsub('[%[%]%*%?\\]', '\\%0'))
end

--- The files a trace pattern of apply() names (`<RANK>` and `*` match anything), sorted.
--- `output`, a prefix of the pattern, is taken literally.
---@param pattern string
---@param output? string
---@return string[]
function M.expand(pattern, output)
  local fixed, rest = '', pattern
  if output and pattern:sub(1, #output) == output then
    fixed, rest = glob_quote(output), pattern:sub(#output + 1)
  end
  return require('tp.fs').glob(fixed .. rest:gsub('<RANK>', '*')) or {}
end

local function under(path, base)
  if base and path:sub(1, #base + 1) == base .. '/' then
    return path:sub(#base + 2)
  end
  return path
end

--- The `profile` member of a run record, from the run's entry (for_run): tool, steps (or
--- null), output, the patterns, and `traces`: the files they match now, relative to `base`
--- (the record's directory) when under it.
---```lua
---rec.profile = tp.profile.record(run.profile, '/runs')  -- traces = { 'nvd/x/profile/...' }
---```
---@param info table
---@param base? string
---@return table
function M.record(info, base)
  local json = require('tp.json')
  local traces, seen = {}, {}
  for _, pattern in ipairs(info.patterns or {}) do
    for _, path in ipairs(M.expand(pattern, info.output)) do
      if not seen[path] then
        seen[path] = true
        traces[#traces + 1] = under(path, base)
      end
    end
  end
  local patterns = {}
  for i, p in ipairs(info.patterns or {}) do
    patterns[i] = under(p, base)
  end
  return { tool = info.tool, steps = info.steps and json.array({ info.steps[1], info.steps[2] })
    or json.null, output = under(info.output, base), patterns = json.array(patterns),
    traces = json.array(traces), memory = info.memory or nil }
end

local function absolute(path)
  local fs = require('tp.fs')
  if path:sub(1, 1) ~= '/' then
    local cwd = fs.realpath('.') or '.'
    path = cwd .. '/' .. path
  end
  local parts = {}
  for part in path:gmatch('[^/]+') do
    if part == '..' then
      parts[#parts] = nil
    elseif part ~= '.' then
      parts[#parts + 1] = part
    end
  end
  return parts
end

-- `path` relative to directory `dir`, both made absolute.
local function relative_to(path, dir)
  local p, d = absolute(path), absolute(dir)
  local i = 1
  while i <= #p and i <= #d and p[i] == d[i] do
    i = i + 1
  end
  local out = {}
  for _ = i, #d do
    out[#out + 1] = '..'
  end
  for j = i, #p do
    out[#out + 1] = p[j]
  end
  return table.concat(out, '/')
end

--- The trace files of a record's `profile` member as links for a report: `{label, href}` each,
--- `href` relative to `dir` (the report's directory; default: absolute) and percent-encoded.
---```lua
---for _, l in ipairs(tp.profile.links(rec.profile, 'runs/x.json', 'report')) do
---  print(l.label, l.href)  -- rank0_trace.json  ../runs/nvd/x/profile/rank0_trace.json
---end
---```
---@param member table the record's `profile`
---@param record_path string the record's file (its traces are relative to its directory)
---@param dir? string
---@return table[] links
function M.links(member, record_path, dir)
  local fs = require('tp.fs')
  local out = {}
  local base = fs.dirname(record_path)
  for _, t in ipairs(type(member.traces) == 'table' and member.traces or {}) do
    if type(t) == 'string' then
      local path = t:sub(1, 1) == '/' and t or fs.join(base, t)
      local href = dir and relative_to(path, dir) or ('/' .. table.concat(absolute(path), '/'))
      href = href:gsub('[^%w%-%._~/]', function(c)
        return string.format('%%%02X', c:byte())
      end)
      out[#out + 1] = { label = fs.basename(t), href = href }
    end
  end
  return out
end

return M
