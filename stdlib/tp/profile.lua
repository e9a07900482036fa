-- tp.profile: the `profile` run option. Either wraps a framework command in a system profiler
-- (Nsight Systems `nsys`, ROCm `rocprofv3`) or sets the framework's own PyTorch-profiler
-- arguments, and says where the trace files will appear. Applied to the per-process command an
-- adapter builds (before tp.launch.torchrun), so each rank writes its own trace.
--
--   profile = { tool = 'torch' | 'nsys' | 'rocprofv3', steps = { first, last }, output = dir }
--
-- `steps` are 1-based training steps, both included; without `steps` a system profiler
-- traces the whole run.

local M = {}

local TOOLS = { torch = true, nsys = true, rocprofv3 = true }
local BINARY = { nsys = 'nsys', rocprofv3 = 'rocprofv3' }

local function validate(opts, level)
  level = (level or 1) + 1
  if type(opts) ~= 'table' then
    error('profile: opts must be a table, got ' .. type(opts), level)
  end
  for k in pairs(opts) do
    if k ~= 'tool' and k ~= 'steps' and k ~= 'output' and k ~= 'path' then
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

-- Megatron counts `iteration` as completed steps: profiling starts before the step after
-- iteration == --profile-step-start and stops once iteration == --profile-step-end
-- (megatron/training/training.py train: cudaProfilerStart/Stop, and the pytorch profiler's
-- schedule wait = start-1, warmup = 1, active = end-start). So steps {first, last} are
-- start = first - 1, end = last.
local function megatron_range(steps)
  return tostring(steps[1] - 1), tostring(steps[2])
end

local function system_wrap(cmd, opts, ranged)
  local out = copy(cmd)
  local pre, traces
  if opts.tool == 'nsys' then
    -- nsys profile: -o with %q{RANK} (an environment variable, set by torchrun per worker);
    -- with a range, capture only between cudaProfilerStart and cudaProfilerStop.
    pre = { 'nsys', 'profile', '-t', 'cuda,nvtx', '-s', 'none', '--force-overwrite', 'true',
            '-o', join(opts.output, 'nsys_rank%q{RANK}') }
    if ranged then
      append(pre, '--capture-range=cudaProfilerApi', '--capture-range-end=stop')
    end
    traces = { join(opts.output, 'nsys_rank<RANK>.nsys-rep') }
  else
    -- rocprofv3: -d output directory, -o file name with the %rank% key, Perfetto output.
    pre = { 'rocprofv3', '--runtime-trace', '--output-format', 'pftrace', '-d', opts.output,
            '-o', 'rank%rank%', '--' }
    traces = { join(opts.output, 'rank<RANK>_results.pftrace') }
  end
  local argv = pre
  for _, a in ipairs(out.argv) do
    argv[#argv + 1] = a
  end
  out.argv = argv
  return out, traces
end

local APPLY = {}

function APPLY.megatron(cmd, opts)
  local s = opts.steps
  if opts.tool == 'torch' then
    if not s then
      fail('profile: megatron: the PyTorch profiler needs steps = { first, last }')
    end
    local out = copy(cmd)
    local first, last = megatron_range(s)
    -- arguments.py _add_training_args: --profile, --use-pytorch-profiler,
    -- --profile-step-start/end, --profile-ranks; traces go to --tensorboard-dir through
    -- torch.profiler.tensorboard_trace_handler.
    append(out.argv, '--profile', '--use-pytorch-profiler', '--profile-step-start', first,
      '--profile-step-end', last, '--profile-ranks', '0', '--tensorboard-dir', opts.output)
    return out, { join(opts.output, '*.pt.trace.json') }
  end
  if opts.tool == 'rocprofv3' and s then
    fail('profile: rocprofv3: steps cannot be honoured (rocprofv3 has no capture range for '
      .. "Megatron's cudaProfilerStart/Stop); omit steps to trace the whole run")
  end
  local out, traces = system_wrap(cmd, opts, s ~= nil)
  if s then
    local first, last = megatron_range(s)
    append(out.argv, '--profile', '--profile-step-start', first, '--profile-step-end', last,
      '--profile-ranks', '0')
    traces = { join(opts.output, 'nsys_rank0.nsys-rep') }
  end
  return out, traces
end

function APPLY.primus(cmd, opts)
  local s = opts.steps
  if opts.tool ~= 'torch' then
    fail('profile: primus: %s cannot wrap the workers; primus-cli starts torchrun itself '
      .. "(use tool = 'torch')", opts.tool)
  end
  if not s then
    fail('profile: primus: the PyTorch profiler needs steps = { first, last }')
  end
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
  if not s then
    fail('profile: torchtitan: the PyTorch profiler needs steps = { first, last }')
  end
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

function APPLY.nemo(cmd, opts)
  if opts.tool == 'torch' then
    fail('profile: nemo: the pre-training recipe has no PyTorch-profiler setting')
  end
  if opts.steps then
    fail('profile: nemo: %s: steps cannot be honoured by the recipe; omit steps to trace the '
      .. 'whole run', opts.tool)
  end
  return system_wrap(cmd, opts, false)
end

--- Applies a profile option to the per-process command of a framework adapter. Raises for a
--- combination the framework cannot express. Call check() first for the PATH test.
---```lua
---local cmd, traces = tp.profile.apply('megatron', megatron.build(config),
---  { tool = 'torch', steps = { 10, 12 }, output = '/runs/x/profile' })
---```
---@param framework string  'megatron' | 'primus' | 'nemo' | 'torchtitan'
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
  return fn(cmd, opts)
end

return M
