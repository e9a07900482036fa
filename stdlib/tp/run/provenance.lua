-- tp.provenance: which software stack produced a number. The environment inventory of a run
-- (host, kernel, OS, tplua; the GPU driver, runtimes, NCCL/RCCL the probe found; the Python,
-- torch and framework version and git commit of the run's own interpreter and checkout; the
-- container; the NCCL_/RCCL_/HSA_/TORCH_ variables, secrets scrubbed), written into every run
-- record as `environment` and printed by `tplua probe --json`. tp.audit compares inventories.
local M = {}

--- Version of the inventory's layout.
M.SCHEMA = 'tplua.environment/1'

--- Prefixes (and names) of the environment variables an inventory keeps: the communication
--- libraries' and runtimes' knobs that change performance.
M.ENV_PREFIXES = { 'NCCL_', 'RCCL_', 'HSA_', 'TORCH_', 'PYTORCH_', 'CUDA_DEVICE_MAX_CONNECTIONS',
  'CUDA_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES', 'OMP_NUM_THREADS',
  'NVTE_', 'MIOPEN_', 'GPU_MAX_HW_QUEUES' }

local function read_line(path)
  local f = io.open(path, 'r')
  if not f then
    return nil
  end
  local s = f:read('l')
  f:close()
  return s
end

local function os_release()
  local f = io.open('/etc/os-release', 'r')
  if not f then
    return nil
  end
  local out
  for line in f:lines() do
    local v = line:match('^PRETTY_NAME="?([^"]*)"?$')
    if v then
      out = v
    end
  end
  f:close()
  return out
end

--- The machine: host name, kernel release, OS, tplua's version.
---@return table
function M.system()
  return {
    host = read_line('/proc/sys/kernel/hostname'),
    kernel = read_line('/proc/sys/kernel/osrelease'),
    os = os_release(),
    tplua = require('tp._host').version,
  }
end

-- Python run once per interpreter: its version, torch's, torch's CUDA/HIP and NCCL builds.
local PY_PROBE = [[
import json, sys
out = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = getattr(torch.version, "cuda", None)
    out["torch_hip"] = getattr(torch.version, "hip", None)
    try:
        out["torch_nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    except Exception:
        pass
except Exception as e:
    out["torch_error"] = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
try:
    from importlib import metadata
    pkgs = {}
    for name in ("megatron-core", "nemo-toolkit", "torchtitan", "primus",
                 "transformer-engine", "flash-attn", "apex"):
        try:
            pkgs[name] = metadata.version(name)
        except Exception:
            pass
    if pkgs:
        out["packages"] = pkgs
except Exception:
    pass
print(json.dumps(out))
]]

local python_cache = {}

--- What an interpreter reports of itself and its torch (run once per interpreter and process,
--- at most 60 s): { python, executable, torch, torch_cuda, torch_hip, torch_nccl } or
--- { error = why }.
---@param interpreter string
---@return table
function M.python(interpreter)
  if python_cache[interpreter] then
    return python_cache[interpreter]
  end
  local proc = require('tp.proc')
  local r, err = proc.run({ interpreter, '-c', PY_PROBE }, { timeout = 60 })
  local out
  if not r then
    out = { error = tostring(err) }
  elseif r.code ~= 0 then
    out = { error = string.format('%s exited %d: %s', interpreter, r.code,
      (r.stderr:gsub('%s+$', ''):match('[^\n]*$'))) }
  else
    local ok, t = pcall(require('tp.json').decode, r.stdout)
    out = ok and type(t) == 'table' and t
      or { error = 'unreadable answer: ' .. r.stdout:sub(1, 100) }
  end
  python_cache[interpreter] = out
  return out
end

--- A framework checkout: its git commit and `git describe` (tags, dirty), or nil when `dir` is
--- not a git work tree (or git is missing).
---@param dir string
---@return table|nil
function M.git(dir)
  local proc = require('tp.proc')
  local r = proc.run({ 'git', '-C', dir, 'rev-parse', 'HEAD' }, { timeout = 30 })
  if not r or r.code ~= 0 then
    return nil
  end
  local d = proc.run({ 'git', '-C', dir, 'describe', '--tags', '--always', '--dirty' },
    { timeout = 30 })
  return { dir = dir, commit = r.stdout:match('%x+'),
    describe = d and d.code == 0 and d.stdout:gsub('%s+$', '') or nil }
end

-- Version files of the frameworks' checkouts, relative to their directory: a Python module of
-- MAJOR/MINOR/PATCH/PRE_RELEASE assignments (Megatron-LM megatron/core/package_info.py, NeMo
-- nemo/package_info.py), a one-line file (torchtitan assets/version.txt), or a __version__
-- assignment. Primus carries Megatron-LM as a submodule: its version is the Megatron one.
local VERSION_FILES = {
  megatron = { 'megatron/core/package_info.py' },
  nemo = { 'nemo/package_info.py' },
  torchtitan = { 'assets/version.txt', 'version.txt' },
  primus = { 'primus/__init__.py', 'third_party/Megatron-LM/megatron/core/package_info.py' },
}

-- The distribution name of each framework's installed package (importlib.metadata).
local PACKAGE = { megatron = 'megatron-core', nemo = 'nemo-toolkit', torchtitan = 'torchtitan',
  primus = 'primus' }

local function version_of_file(path)
  local f = io.open(path, 'r')
  if not f then
    return nil
  end
  local text = '\n' .. (f:read(65536) or '')
  f:close()
  local function num(name)
    return text:match('\n%s*' .. name .. '%s*=%s*(%d+)')
  end
  local major, minor, patch = num('MAJOR'), num('MINOR'), num('PATCH')
  if major and minor then
    local pre = text:match("\n%s*PRE_RELEASE%s*=%s*['\"]([%w%.%-]*)['\"]") or ''
    return string.format('%s.%s.%s%s', major, minor, patch or '0', pre)
  end
  local v = text:match("__version__%s*=%s*['\"]([%w%.%-%+]+)['\"]")
  if v then
    return v
  end
  if path:match('%.txt$') then
    v = text:match('^%s*([%w%.%-%+]+)%s*$')
    return v
  end
  return nil
end

--- The version a framework checkout declares in its own files (package_info.py, version.txt,
--- __version__), or nil. `framework` is tplua's adapter name.
---```lua
---print(tp.provenance.framework_version('megatron', '/opt/Megatron-LM'))  -- 0.13.0rc2
---```
---@param framework string
---@param dir string
---@return string|nil version, string? file  the file it came from
function M.framework_version(framework, dir)
  for _, rel in ipairs(VERSION_FILES[framework] or {}) do
    local v = version_of_file(dir .. '/' .. rel)
    if v then
      return v, rel
    end
  end
  return nil
end

--- The container tplua runs in, as far as it can tell: apptainer/singularity (their variables),
--- docker/podman (/.dockerenv, /run/.containerenv), enroot/pyxis, and the image's own version
--- variables (NVIDIA_PYTORCH_VERSION, ROCM_VERSION...). nil outside a container.
---@return table|nil
function M.container()
  local env = os.getenv
  local out
  local image = env('APPTAINER_CONTAINER') or env('SINGULARITY_CONTAINER')
  if image then
    out = { runtime = env('APPTAINER_CONTAINER') and 'apptainer' or 'singularity', image = image,
      name = env('APPTAINER_NAME') or env('SINGULARITY_NAME') }
  elseif env('ENROOT_ROOTFS') or env('PYXIS_VERSION') then
    out = { runtime = 'enroot', image = env('ENROOT_ROOTFS') }
  elseif require('tp.fs').exists('/.dockerenv') then
    out = { runtime = 'docker' }
  elseif require('tp.fs').exists('/run/.containerenv') then
    out = { runtime = 'podman' }
  end
  for _, k in ipairs({ 'NVIDIA_PYTORCH_VERSION', 'PYTORCH_VERSION', 'NVIDIA_BUILD_ID',
    'ROCM_VERSION', 'CONTAINER_IMAGE', 'IMAGE_DIGEST' }) do
    local v = env(k)
    if v and v ~= '' then
      out = out or { runtime = 'unknown' }
      out[k:lower()] = v
    end
  end
  return out
end

local function kept(name)
  for _, p in ipairs(M.ENV_PREFIXES) do
    if name:sub(1, #p) == p then
      return true
    end
  end
  return false
end

--- The variables of `env` (and of tplua's own environment) whose names an inventory keeps,
--- secret values replaced by <redacted>. `env` wins over the process environment.
---@param env? table<string, string>
---@return table<string, string>
function M.env_vars(env)
  local secrets = require('tp.secrets')
  local out = {}
  for k, v in pairs(secrets.process_env()) do
    if kept(k) then
      out[k] = v
    end
  end
  for k, v in pairs(env or {}) do
    if type(k) == 'string' and kept(k) then
      out[k] = v ~= false and tostring(v) or nil
    end
  end
  for k in pairs(out) do
    if secrets.is_secret_name(k) then
      out[k] = '<redacted>'
    end
  end
  return out
end

-- The GPU stack the probe found: driver and runtime versions (no library paths).
local function gpu_stack(probe)
  local inv = probe and probe.inventory
  if type(inv) ~= 'table' then
    return nil
  end
  local out = {}
  for k, v in pairs(inv) do
    if type(v) == 'string' or type(v) == 'number' then
      out[k] = v
    end
  end
  return next(out) and out or nil
end

-- The GPUs' state at the start (tp.gpu.probe's devices): power limit, clocks, ECC and
-- persistence mode, memory already in use. One entry per distinct state, with the devices
-- (1-based) in it, so eight identical GPUs make one line and an odd one stands out.
local function gpu_state(probe)
  local devices = probe and probe.devices
  if type(devices) ~= 'table' or #devices == 0 then
    return nil
  end
  local groups, order = {}, {}
  for _, d in ipairs(devices) do
    local s = { name = d.name, power_limit_w = d.power_limit_w, app_clock_mhz = d.app_clock_mhz,
      max_clock_mhz = d.clock_mhz, ecc = d.ecc, persistence = d.persistence }
    local key = table.concat({ tostring(s.name), tostring(s.power_limit_w),
      tostring(s.app_clock_mhz), tostring(s.max_clock_mhz), tostring(s.ecc),
      tostring(s.persistence) }, '|')
    if not groups[key] then
      s.devices = {}
      groups[key] = s
      order[#order + 1] = key
    end
    local g = groups[key]
    g.devices[#g.devices + 1] = d.index
    if d.clock_now_mhz then
      g.clock_now_mhz = g.clock_now_mhz or {}
      g.clock_now_mhz[#g.clock_now_mhz + 1] = d.clock_now_mhz
    end
    if d.memory_used_bytes then
      g.memory_used_gib = math.max(g.memory_used_gib or 0, d.memory_used_bytes / 2 ^ 30)
    end
  end
  local out = {}
  for i, k in ipairs(order) do
    out[i] = groups[k]
  end
  return out
end

-- The interpreter of a command: its first word when that is a Python, else nil.
local function interpreter_of(argv)
  for i = 1, math.min(#argv, 8) do
    local base = tostring(argv[i]):match('[^/]*$')
    if base:match('^python%d*%.?%d*$') then
      return argv[i]
    end
  end
  return nil
end

--- The inventory of one run: `opts.probe` (tp.gpu.probe's result), `opts.argv` (its command:
--- the Python in it is asked for its torch), `opts.framework` and `opts.framework_dir` (a git
--- checkout gives its commit), `opts.env` (the run's own variables).
---```lua
---local env = tp.provenance.inventory({ probe = tp.gpu.probe(), argv = { 'python3', 'x.py' } })
---print(env.system.kernel, env.python and env.python.torch)
---```
---@param opts? table {probe?, argv?, python? (an interpreter to ask, whatever argv says),
---  framework?, framework_dir?, env?}
---@return table
function M.inventory(opts)
  opts = opts or {}
  local out = { schema = M.SCHEMA, system = M.system(), gpu_stack = gpu_stack(opts.probe),
    gpu_state = gpu_state(opts.probe), container = M.container(), env = M.env_vars(opts.env) }
  local py = opts.python or (opts.argv and interpreter_of(opts.argv))
  if py then
    out.python = M.python(py)
  end
  if opts.framework or opts.framework_dir then
    local fw = { name = opts.framework }
    if opts.framework_dir then
      local g = M.git(opts.framework_dir)
      fw.dir = opts.framework_dir
      if g then
        fw.commit, fw.describe = g.commit, g.describe
      end
      fw.version, fw.version_file = M.framework_version(opts.framework or '', opts.framework_dir)
    end
    if opts.framework == 'reference' or opts.framework == 'peaks' then
      -- tplua's own tools (tools/reftrain, tools/peaks): the version of tplua that ships them.
      fw.version = out.system.tplua
    end
    -- The installed package, when the checkout said nothing (pip install megatron-core...).
    local pkg = PACKAGE[opts.framework or '']
    local pkgs = out.python and type(out.python.packages) == 'table' and out.python.packages
    if not fw.version and pkg and pkgs and pkgs[pkg] then
      fw.version, fw.version_file = pkgs[pkg], 'package ' .. pkg
    end
    out.framework = fw
  end
  return out
end

--- The keys of an inventory the audit compares, flattened: 'gpu_stack.nvidia_driver',
--- 'python.torch', 'framework.commit', ... -> value.
---@param inv table
---@return table<string, string>
function M.comparable(inv)
  local out = {}
  if type(inv) ~= 'table' then
    return out
  end
  for k, v in pairs(type(inv.gpu_stack) == 'table' and inv.gpu_stack or {}) do
    out['gpu_stack.' .. k] = tostring(v)
  end
  local py = type(inv.python) == 'table' and inv.python or {}
  for _, k in ipairs({ 'python', 'torch', 'torch_cuda', 'torch_hip', 'torch_nccl' }) do
    if py[k] ~= nil then
      out['python.' .. k] = tostring(py[k])
    end
  end
  local fw = type(inv.framework) == 'table' and inv.framework or {}
  for _, k in ipairs({ 'commit', 'version' }) do
    if fw[k] ~= nil then
      out['framework.' .. k] = tostring(fw[k])
    end
  end
  for name, v in pairs(type(py.packages) == 'table' and py.packages or {}) do
    out['package.' .. name] = tostring(v)
  end
  -- The GPUs' settings that change a number: power limit, target clock, ECC (memory
  -- bandwidth), per distinct state; the clock now and memory in use are not settings.
  for i, s in ipairs(type(inv.gpu_state) == 'table' and inv.gpu_state or {}) do
    for _, k in ipairs({ 'power_limit_w', 'app_clock_mhz', 'ecc', 'persistence' }) do
      if s[k] ~= nil then
        out[string.format('gpu_state.%d.%s', i, k)] = tostring(s[k])
      end
    end
  end
  local c = type(inv.container) == 'table' and inv.container or {}
  for _, k in ipairs({ 'image', 'nvidia_pytorch_version', 'rocm_version', 'image_digest' }) do
    if c[k] ~= nil then
      out['container.' .. k] = tostring(c[k])
    end
  end
  return out
end

return M
