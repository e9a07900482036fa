-- tp.gpu: GPU probe and telemetry. The probe asks the NVIDIA and AMD libraries (NVML, CUDA
-- driver and runtime, HIP, ROCm SMI, NCCL/RCCL) in short-lived child processes, so this process
-- never holds a GPU context; the sampler reads power, energy, memory, utilisation, clocks and
-- temperature through NVML / ROCm SMI in a child. See docs/gpu.md.
local C = require('tp._gpu')

local M = {}

--- The libraries the probe asks, in report order.
M.APIS = { 'nvml', 'cuda', 'cudart', 'hip', 'rsmi', 'nccl', 'rccl' }

local KNOWN_API = {}
for _, name in ipairs(M.APIS) do
  KNOWN_API[name] = true
end

-- Raises a misuse error naming the caller's line.
local function misuse(fmt, ...)
  error(string.format(fmt, ...), 3)
end

-- Checks `opts` against `spec` (field -> Lua type) and rejects unknown fields.
local function check_opts(fname, opts, spec)
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    misuse('%s: options table expected, got %s', fname, type(opts))
  end
  for k, v in pairs(opts) do
    local want = spec[k]
    if want == nil then
      misuse("%s: unknown option '%s'", fname, tostring(k))
    end
    if type(v) ~= want then
      misuse("%s: option '%s': %s expected, got %s", fname, k, want, type(v))
    end
  end
  return opts
end

local function check_apis(fname, apis, allowed)
  if apis == nil then
    return
  end
  for i, name in ipairs(apis) do
    if not allowed[name] then
      misuse("%s: apis[%d]: unknown api '%s'", fname, i, tostring(name))
    end
  end
end

-- Formats a compute capability or gfx major.minor.
local function capability(d)
  if d.cc_major and d.cc_minor then
    return string.format('%d.%d', d.cc_major, d.cc_minor)
  end
  return nil
end

-- One device of the merged list, from a compute library's record (or a management one).
local function device_from(raw, position)
  return {
    index = position,
    api = raw.api,
    api_index = raw.index,
    vendor = raw.vendor,
    name = raw.name,
    arch = raw.arch,
    arch_full = raw.arch_full,
    compute_capability = capability(raw),
    memory_bytes = raw.memory_total,
    sm_count = raw.sm_count,
    unit_name = raw.vendor == 'amd' and 'CU' or 'SM',
    clock_mhz = raw.clock_khz and raw.clock_khz / 1000 or nil,
    memory_clock_mhz = raw.memory_clock_khz and raw.memory_clock_khz / 1000 or nil,
    memory_bus_width = raw.memory_bus_width,
    pci_bus_id = raw.pci_bus_id,
    uuid = raw.uuid,
    power_limit_w = raw.power_limit_mw and raw.power_limit_mw / 1000 or nil,
    error = raw.error,
  }
end

-- What the management library (NVML, ROCm SMI) says of the device's state now: memory in use,
-- clocks, ECC and persistence mode, and the compute processes on it ({{pid =, memory =}, ...},
-- process_count: how many, which the list may be cut short of; nil when they cannot be listed).
local function add_state(d, m)
  d.memory_used_bytes = m.memory_used
  d.clock_now_mhz = m.clock_now_khz and m.clock_now_khz / 1000 or nil
  d.app_clock_mhz = m.app_clock_khz and m.app_clock_khz / 1000 or nil
  d.ecc = m.ecc
  d.persistence = m.persistence
  d.processes = m.processes
  d.process_count = m.process_count
end

-- Merges the per-library device lists: compute devices from the CUDA driver API (else the CUDA
-- runtime) and HIP, each joined by PCI bus id with what NVML / ROCm SMI say about it; devices
-- that only a management library lists are kept too. Devices of a library that crashed or
-- timed out are left out (their records are partial).
local function merge_devices(raw_devices, backends)
  local by_api = {}
  for _, d in ipairs(raw_devices) do
    by_api[d.api] = by_api[d.api] or {}
    table.insert(by_api[d.api], d)
  end
  local function usable(api)
    local b = backends[api]
    return b and b.status == 'ok' and by_api[api] or {}
  end
  local nvidia = usable('cuda')
  if #nvidia == 0 then
    nvidia = usable('cudart')
  end
  local out = {}
  local function add_group(compute, mgmt_api)
    local mgmt_by_pci, used = {}, {}
    for _, m in ipairs(usable(mgmt_api)) do
      if m.pci_bus_id then
        mgmt_by_pci[m.pci_bus_id] = m
      end
    end
    table.sort(compute, function(a, b)
      return a.index < b.index
    end)
    for _, raw in ipairs(compute) do
      local d = device_from(raw, #out + 1)
      local m = raw.pci_bus_id and mgmt_by_pci[raw.pci_bus_id]
      if m then
        used[m] = true
        d.management = { api = m.api, index = m.index, name = m.name, uuid = m.uuid }
        d.uuid = d.uuid or m.uuid
        if m.power_limit_mw then
          d.power_limit_w = m.power_limit_mw / 1000
        end
        add_state(d, m)
      end
      out[#out + 1] = d
    end
    local rest = {}
    for _, m in ipairs(usable(mgmt_api)) do
      if not used[m] then
        rest[#rest + 1] = m
      end
    end
    table.sort(rest, function(a, b)
      return a.index < b.index
    end)
    for _, m in ipairs(rest) do
      local d = device_from(m, #out + 1)
      d.management = { api = m.api, index = m.index, name = m.name, uuid = m.uuid }
      add_state(d, m)
      out[#out + 1] = d
    end
  end
  add_group(nvidia, 'nvml')
  add_group(usable('hip'), 'rsmi')
  return out
end

-- The software inventory: driver, runtime and library versions, and which file answered.
local function inventory(b)
  local inv = {
    nvidia_driver = b.nvml.driver_version,
    cuda_driver = b.cuda.driver_version or b.cudart.driver_version or b.nvml.cuda_version,
    cuda_runtime = b.cudart.runtime_version,
    hip_runtime = b.hip.runtime_version,
    hip_driver = b.hip.driver_version,
    amdgpu_driver = b.rsmi.driver_version,
    rocm_smi = b.rsmi.version,
    nccl = b.nccl.version,
    rccl = b.rccl.version,
    libraries = {},
  }
  for _, name in ipairs(M.APIS) do
    inv.libraries[name] = b[name].library
  end
  return inv
end

---@class tp.gpu.ProbeOpts
---@field timeout? number seconds before a probe child is killed (default 20)
---@field apis? string[] libraries to ask (default all of tp.gpu.APIS)
---@field libpath? string ':'-separated directories searched instead of the system's
---  (default $TPLUA_GPU_LIBPATH; tests point it at fake libraries)

--- Probes the GPUs and their software stacks. A machine without GPUs is a normal answer:
--- `devices` is empty and each backend says why (`status` 'absent', 'no_device', 'error',
--- 'timeout' or 'crashed', with `reason`, and the library's own `code` / `code_name`). What a
--- library printed is kept in `backends[api].output`; nothing is printed here.
---```lua
---local probe = assert(tp.gpu.probe())
---for _, d in ipairs(probe.devices) do print(d.name, d.arch, d.sm_count) end
---print(probe.backends.hip.reason)
---```
---@param opts? tp.gpu.ProbeOpts
---@return table|nil probe {devices=, backends=, inventory=, raw_devices=, elapsed_s=}
---@return string? err
---@return string? code
function M.probe(opts)
  opts = check_opts('tp.gpu.probe', opts, { timeout = 'number', apis = 'table',
    libpath = 'string' })
  if opts.timeout and not (opts.timeout > 0 and opts.timeout <= 3600) then
    misuse('tp.gpu.probe: timeout must be in (0, 3600] seconds, got %s', opts.timeout)
  end
  check_apis('tp.gpu.probe', opts.apis, KNOWN_API)
  local raw, err, code = C.probe(opts)
  if not raw then
    return nil, err, code
  end
  local backends = raw.backends
  for _, b in pairs(backends) do
    if b.status ~= 'crashed' and b.status ~= 'timeout' then
      b.phase = nil  -- the last step announced only matters for a hang or a crash
    else
      local n = 0
      for _, d in ipairs(raw.devices) do
        n = n + (d.api == b.api and 1 or 0)
      end
      b.partial_devices = n
    end
  end
  return {
    devices = merge_devices(raw.devices, backends),
    backends = backends,
    inventory = inventory(backends),
    raw_devices = raw.devices,
    elapsed_s = raw.elapsed_s,
  }
end

--- Lists the files the probe tries for `api`, in order (bare sonames go through the dynamic
--- loader). Environment: TPLUA_<API> names a file to try first; CUDA_HOME / CUDA_PATH and
--- ROCM_PATH / HIP_PATH add toolkit trees; without `libpath`, /usr/local/cuda* and /opt/rocm*.
---@param api string one of tp.gpu.APIS
---@param libpath? string as in tp.gpu.probe
---@return string[]
function M.search_path(api, libpath)
  if not KNOWN_API[api] then
    misuse("tp.gpu.search_path: unknown api '%s'", tostring(api))
  end
  if libpath ~= nil and type(libpath) ~= 'string' then
    misuse('tp.gpu.search_path: libpath: string expected, got %s', type(libpath))
  end
  return C.candidates(api, libpath)
end

--- Returns the current time on the sampler's clock (CLOCK_MONOTONIC seconds): use it to mark
--- the window of a measurement for `Sampler:energy_j`.
---@return number
function M.now()
  return C.monotonic()
end

---@class tp.gpu.SamplerOpts
---@field interval? number seconds between readings (default 1.0, minimum 0.001)
---@field apis? string[] 'nvml' and/or 'rsmi' (default both)
---@field libpath? string as in tp.gpu.probe
---@field start_timeout? number seconds to wait for the device list (default 20)

---@class tp.gpu.Sampler
local Sampler = {}
Sampler.__index = Sampler

local SAMPLER_APIS = { nvml = true, rsmi = true }

--- Creates a telemetry sampler (not started). Readings come from NVML / ROCm SMI in a child
--- process every `interval` seconds; `start` begins, `stop` ends, `samples` and `energy_j` read
--- them back in bulk. Closing it (or `<close>`) stops the child.
---```lua
---local s <close> = tp.gpu.sampler { interval = 1.0 }
---assert(s:start())
---local t0 = tp.gpu.now()
---run_benchmark()
---local joules = s:energy_j { from = t0, to = tp.gpu.now() }
---s:stop()
---```
---@param opts? tp.gpu.SamplerOpts
---@return tp.gpu.Sampler
function M.sampler(opts)
  opts = check_opts('tp.gpu.sampler', opts, { interval = 'number', apis = 'table',
    libpath = 'string', start_timeout = 'number' })
  local interval = opts.interval or 1.0
  if not (interval >= 0.001 and interval <= 86400) then
    misuse('tp.gpu.sampler: interval must be in [0.001, 86400] seconds, got %s', interval)
  end
  check_apis('tp.gpu.sampler', opts.apis, SAMPLER_APIS)
  return setmetatable({
    _opts = { interval = interval, apis = opts.apis, libpath = opts.libpath,
      start_timeout = opts.start_timeout },
    _handle = nil,
    _devices = {},
    _samples = {},
    _closed = false,
  }, Sampler)
end

local function check_open(self)
  if self._closed then
    error('attempt to use a closed gpu sampler', 3)
  end
end

-- Moves the readings the child sent since the last call into self._samples.
local function collect(self)
  local h = self._handle
  if not h then
    return true
  end
  local n, err, code = h:poll()
  if not n then
    return nil, err, code
  end
  local fresh = h:samples(#self._samples + 1)
  for _, x in ipairs(fresh) do
    self._samples[#self._samples + 1] = x
  end
  return true
end

--- Starts sampling. Fails with `nil, err, 'ENOGPU'` when neither NVML nor ROCm SMI lists a
--- device (the message says what each answered). Starting again after `stop` begins a new
--- series (earlier readings are dropped).
---@return tp.gpu.Sampler|nil self
---@return string? err
---@return string? code
function Sampler:start()
  check_open(self)
  if self._handle and self._handle:running() then
    error('tp.gpu.Sampler:start: already running', 2)
  end
  if self._handle then
    self._handle:close()
    self._handle = nil
  end
  local h, err, code = C.sampler(self._opts)
  if not h then
    return nil, err, code
  end
  self._handle = h
  self._devices = h:devices()
  self._samples = {}
  return self
end

--- Blocks until at least `count` readings (all devices together, since `start`) have arrived,
--- or `timeout` seconds pass: `nil, err, 'ETIMEDOUT'`.
---@param count integer
---@param timeout? number seconds (default 60)
---@return tp.gpu.Sampler|nil self
---@return string? err
---@return string? code
function Sampler:wait(count, timeout)
  check_open(self)
  if math.type(count) ~= 'integer' or count < 0 then
    error('tp.gpu.Sampler:wait: count must be a non-negative integer', 2)
  end
  timeout = timeout or 60
  if type(timeout) ~= 'number' or not (timeout >= 0 and timeout <= 86400) then
    error('tp.gpu.Sampler:wait: timeout must be in [0, 86400] seconds', 2)
  end
  if not self._handle then
    return nil, 'gpu sampler: not started', 'ENODATA'
  end
  local ok, err, code = self._handle:wait(count, timeout)
  local cok, cerr, ccode = collect(self)
  if not ok then
    return nil, err, code
  end
  if not cok then
    return nil, cerr, ccode
  end
  return self
end

--- Stops sampling and collects the remaining readings. Idempotent.
---@return tp.gpu.Sampler|nil self
---@return string? err
---@return string? code
function Sampler:stop()
  check_open(self)
  local h = self._handle
  if not h or not h:running() then
    return self
  end
  local ok, err, code = h:stop()
  local cok, cerr, ccode = collect(self)
  if not ok then
    return nil, err, code
  end
  if not cok then
    return nil, cerr, ccode
  end
  return self
end

--- True between `start` and `stop`.
---@return boolean
function Sampler:running()
  check_open(self)
  return self._handle ~= nil and self._handle:running()
end

--- The sampled devices: {{api=, index=, name=, pci_bus_id=, uuid=, memory_total=}, ...};
--- `sample.device` indexes this list.
---@return table[]
function Sampler:devices()
  check_open(self)
  return self._devices
end

--- All readings so far, oldest first: {t=, wall=, device=, power_w=, energy_j=, memory_used=,
--- utilization=, sm_clock_mhz=, temperature_c=} (`t` on tp.gpu.now's clock, `wall` in epoch
--- seconds; quantities a device does not report are nil).
---@return table[]|nil samples
---@return string? err
---@return string? code
function Sampler:samples()
  check_open(self)
  local ok, err, code = collect(self)
  if not ok then
    return nil, err, code
  end
  return self._samples
end

--- Energy in joules over a window (default: every reading), summed over devices (or one
--- `device`). Per device it is the difference of the energy counter where the device has one,
--- else the trapezoid over sampled power; `details.devices[i].method` says which. Fails with
--- `nil, err, 'ENODATA'` when no device has two readings in the window.
---@param opts? {from?: number, to?: number, device?: integer}
---@return number|nil joules
---@return table|string details {devices = {{device=, joules=, method=, t_first=, t_last=,
---  samples=}}, method = 'counter'|'trapezoid'|'mixed'} or the error message
---@return string? code
function Sampler:energy_j(opts)
  check_open(self)
  opts = check_opts('tp.gpu.Sampler:energy_j', opts, { from = 'number', to = 'number',
    device = 'number' })
  if opts.from and opts.to and opts.to < opts.from then
    misuse('tp.gpu.Sampler:energy_j: window ends (%s) before it starts (%s)', opts.to,
      opts.from)
  end
  if not self._handle then
    return nil, 'gpu sampler: not started', 'ENODATA'
  end
  local ok, err, code = collect(self)
  if not ok then
    return nil, err, code
  end
  local first, last = 1, #self._devices
  if opts.device then
    if not self._devices[opts.device] then
      misuse('tp.gpu.Sampler:energy_j: no device %s', opts.device)
    end
    first, last = opts.device, opts.device
  end
  local total, methods, per = 0, {}, {}
  for dev = first, last do
    local e = self._handle:energy(dev, opts.from, opts.to)
    e.device = dev
    per[#per + 1] = e
    if e.joules then
      total = total + e.joules
      methods[e.method] = true
    end
  end
  if next(methods) == nil then
    return nil, 'gpu sampler: fewer than two readings in the window', 'ENODATA'
  end
  local method = (methods.counter and methods.trapezoid) and 'mixed'
    or (methods.counter and 'counter' or 'trapezoid')
  return total, { devices = per, method = method }
end

--- What the sampler could not do (missing libraries, unsupported metrics), one line each.
---@return string
function Sampler:notes()
  check_open(self)
  return self._handle and self._handle:notes() or ''
end

--- Stops the child (if running) and releases everything. Idempotent.
function Sampler:close()
  if self._closed then
    return
  end
  self._closed = true
  local h = self._handle
  self._handle = nil
  if h then
    h:close()
  end
end

Sampler.__close = Sampler.close

function Sampler.__tostring(self)
  if self._closed then
    return 'tp.gpu.Sampler (closed)'
  end
  return string.format('tp.gpu.Sampler (%s, %d devices, %d readings)',
    self:running() and 'running' or 'stopped', #self._devices, #self._samples)
end

return M
