-- tp.gpu: the probe against the fake GPU libraries of tests/fakes (8 x H100, 8 x MI300X, a mixed
-- box, failures mid-probe, a hang) and against the real libraries of this machine; the
-- telemetry sampler and its energy figures; argument checks.
local h = require('helper')
local gpu = require('tp.gpu')

local function scenario(name)
  return h.fakes_dir .. '/' .. name
end

local function probe(name, opts)
  opts = opts or {}
  opts.libpath = scenario(name)
  return assert(gpu.probe(opts))
end

local function count(list, pred)
  local n = 0
  for _, x in ipairs(list) do
    if pred(x) then
      n = n + 1
    end
  end
  return n
end

describe('tp.gpu.probe', function()
  it('finds 8 H100s through the CUDA 12 runtime after the 13 one refuses the old driver',
    function()
      local p = probe('h100x8')
      assert.are.equal(8, #p.devices)
      for i, d in ipairs(p.devices) do
        assert.are.equal(i, d.index)
        assert.are.equal('cudart', d.api)
        assert.are.equal('nvidia', d.vendor)
        assert.are.equal('NVIDIA H100 80GB HBM3', d.name)
        assert.are.equal('sm_90', d.arch)
        assert.are.equal('9.0', d.compute_capability)
        assert.are.equal(132, d.sm_count)
        assert.are.equal('SM', d.unit_name)
        assert.are.equal(85520809984, d.memory_bytes)
        assert.are.equal(1980, d.clock_mhz)
        assert.are.equal(string.format('0000:%02x:00.0', 0x18 + 0x10 * (i - 1)), d.pci_bus_id)
        assert.truthy(d.uuid:find('^GPU%-%x+%-'))
        -- joined with NVML by PCI bus id
        assert.are.equal('nvml', d.management.api)
        assert.are.equal(i - 1, d.management.index)
        assert.are.equal(d.uuid, d.management.uuid)
        assert.are.equal(700, d.power_limit_w)
        assert.is_nil(d.error)
      end
      local rt = p.backends.cudart
      assert.are.equal('ok', rt.status)
      assert.truthy(rt.library:find('h100x8/libcudart.so.12', 1, true))
      assert.are.equal(1, #rt.tried)
      assert.truthy(rt.tried[1]:find('libcudart.so.13: cudaGetDeviceCount: error 35 '
        .. '(cudaErrorInsufficientDriver)', 1, true))
      assert.are.equal('absent', p.backends.cuda.status)
      assert.truthy(p.backends.cuda.reason:find('libcuda.so.1: not found', 1, true))
      assert.are.equal('absent', p.backends.hip.status)
      assert.are.equal('535.161.08', p.inventory.nvidia_driver)
      assert.are.equal('12.2', p.inventory.cuda_runtime)
      assert.are.equal('12.2', p.inventory.cuda_driver)
      assert.are.equal('2.21.5', p.inventory.nccl)
      assert.truthy(p.inventory.libraries.nccl:find('h100x8/libnccl.so.2', 1, true))
      assert.is_true(p.elapsed_s < 2)
    end)

  it('finds 8 MI300Xs through HIP 6 (R0600 properties) and ROCm SMI', function()
    local p = probe('mi300x8')
    assert.are.equal(8, #p.devices)
    for _, d in ipairs(p.devices) do
      assert.are.equal('hip', d.api)
      assert.are.equal('amd', d.vendor)
      assert.are.equal('AMD Instinct MI300X', d.name)
      assert.are.equal('gfx942', d.arch)
      assert.are.equal('gfx942:sramecc+:xnack-', d.arch_full)
      assert.are.equal(304, d.sm_count)
      assert.are.equal('CU', d.unit_name)
      assert.are.equal('rsmi', d.management.api)
      assert.are.equal(750, d.power_limit_w)
    end
    assert.are.equal('6.2.41134', p.inventory.hip_runtime)
    assert.are.equal('7.3.0', p.inventory.rocm_smi)
    assert.are.equal('6.8.5', p.inventory.amdgpu_driver)
    assert.are.equal('2.20.5', p.inventory.rccl)
    -- what the runtime printed is data, not terminal output
    assert.truthy(p.backends.hip.output:find('fake hip: runtime starting', 1, true))
  end)

  it("reads each device's state: memory in use, clocks, ECC, persistence, processes",
    function()
      local p = probe('h100busy')
      assert.are.equal(8, #p.devices)
      for i, d in ipairs(p.devices) do
        assert.are.equal(1755, d.clock_now_mhz)
        assert.are.equal(1980, d.app_clock_mhz)
        assert.is_true(d.ecc)
        assert.is_true(d.persistence)
        local busy = i == 2  -- the fake's device 1
        assert.are.equal(busy and 1 or 0, d.process_count)
        assert.are.equal(busy and 1 or 0, #d.processes)
        assert.are.equal((i + (busy and 30 or 0)) * 2 ^ 30, d.memory_used_bytes)
      end
      assert.are.same({ { pid = 4242, memory = 30 * 2 ^ 30 } }, p.devices[2].processes)
      -- ROCm SMI lists processes for the machine; each names its devices.
      local a = probe('mi300xbusy')
      for i, d in ipairs(a.devices) do
        assert.are.equal('rsmi', d.management.api)
        assert.is_true(d.ecc)
        assert.is_nil(d.persistence)
        assert.are.equal(i == 4 and 1 or 0, d.process_count)
        assert.are.equal(i * 2 * 2 ^ 30, d.memory_used_bytes)
      end
      assert.are.same({ { pid = 4343, memory = 40 * 2 ^ 30 } }, a.devices[4].processes)
      -- Without a management library (a CUDA runtime alone) the state is unknown, not idle.
      for _, d in ipairs(probe('errmid').devices) do
        assert.is_nil(d.process_count)
        assert.is_nil(d.memory_used_bytes)
        assert.is_nil(d.ecc)
      end
    end)

  it('lists both vendors of a mixed box, NVIDIA through the driver API', function()
    local p = probe('mixed')
    assert.are.equal(6, #p.devices)
    assert.are.equal(2, count(p.devices, function(d)
      return d.api == 'cuda' and d.arch == 'sm_80' and d.name == 'NVIDIA A100-SXM4-80GB'
    end))
    assert.are.equal(4, count(p.devices, function(d)
      return d.api == 'hip' and d.arch == 'gfx90a' and d.sm_count == 110
    end))
    assert.are.equal('nvidia', p.devices[1].vendor)
    assert.are.equal('amd', p.devices[6].vendor)
    assert.are.equal('12.4', p.inventory.cuda_driver)
    assert.are.equal('5.2.21153', p.inventory.hip_runtime)
    assert.are.equal('absent', p.backends.cudart.status)
  end)

  it('keeps a device whose queries fail mid-probe, with its errors, and reports a crash',
    function()
      local p = probe('errmid')
      assert.are.equal(4, #p.devices)
      local bad = p.devices[3]
      assert.are.equal(2, bad.api_index)
      assert.truthy(bad.error:find('cudaDeviceGetPCIBusId: error 999', 1, true))
      assert.is_nil(bad.pci_bus_id)
      assert.is_nil(bad.sm_count)
      assert.are.equal('NVIDIA H100 80GB HBM3', bad.name)
      assert.are.equal(1, p.backends.cudart.device_errors)
      local hip = p.backends.hip
      assert.are.equal('crashed', hip.status)
      assert.truthy(hip.reason:find('killed by signal 6 (SIGABRT) during hipDeviceGetName(1)', 1,
        true))
      assert.are.equal('hipDeviceGetName(1)', hip.phase)
      assert.is_true(hip.partial_devices >= 1)
      assert.truthy(hip.output:find('fell off the bus', 1, true))
    end)

  it('kills a probe that hangs and still reports the other libraries', function()
    local t0 = gpu.now()
    local p = probe('hang', { timeout = 0.5 })
    local took = gpu.now() - t0
    local hip = p.backends.hip
    assert.are.equal('timeout', hip.status)
    assert.truthy(hip.reason:find('no answer within 0.5 s during hipGetDeviceCount', 1, true))
    assert.is_true(took >= 0.45 and took < 5)
    -- NVML answered: its devices are listed, without a compute API
    assert.are.equal(8, #p.devices)
    assert.are.equal('nvml', p.devices[1].api)
    assert.are.equal('NVIDIA H100 80GB HBM3', p.devices[1].name)
  end)

  it('names a stub driver library for what it is', function()
    local p = probe('stub', { apis = { 'cuda' } })
    local cu = p.backends.cuda
    assert.are.equal('error', cu.status)
    assert.are.equal(34, cu.code)
    assert.are.equal('CUDA_ERROR_STUB_LIBRARY', cu.code_name)
    assert.truthy(cu.reason:find('stub library', 1, true))
  end)

  it('asks only the libraries named in apis', function()
    local p = probe('h100x8', { apis = { 'nvml' } })
    assert.are.equal('ok', p.backends.nvml.status)
    assert.are.equal('absent', p.backends.cudart.status)
    assert.are.equal(8, #p.devices)
  end)

  it('reports no device and each library\'s reason on this machine, quickly', function()
    local p = assert(gpu.probe())
    if #p.devices > 0 then
      pending('this machine has GPUs')
      return
    end
    for _, name in ipairs(gpu.APIS) do
      local b = p.backends[name]
      assert.truthy(b.status)
      if b.status ~= 'ok' then
        assert.truthy(b.reason and #b.reason > 0, name)
      end
    end
    assert.is_true(p.elapsed_s < 1.0)
  end)

  it('reports hipErrorNoDevice from the real HIP runtime', function()
    local p = assert(gpu.probe({ apis = { 'hip' } }))
    local hip = p.backends.hip
    if hip.status == 'absent' then
      pending('libamdhip64 not installed (scripts/install-deps installs libamdhip64-5)')
      return
    end
    if hip.status == 'ok' then
      pending('this machine has AMD GPUs')
      return
    end
    assert.are.equal(100, hip.code)
    assert.are.equal('hipErrorNoDevice', hip.code_name)
    assert.truthy(hip.library:find('libamdhip64', 1, true))
  end)

  it('reports the real ROCm SMI init failure and keeps what it printed', function()
    local p = assert(gpu.probe({ apis = { 'rsmi' } }))
    local r = p.backends.rsmi
    if r.status == 'absent' then
      pending('librocm_smi64 not installed (scripts/install-deps installs librocm-smi64-1)')
      return
    end
    if r.status == 'ok' or r.status == 'no_device' then
      pending('this machine has an amdgpu driver')
      return
    end
    if r.status == 'crashed' and r.output:find('real___cxa_throw', 1, true) then
      -- ROCm SMI throws a C++ exception internally; a sanitizer build of a C host has no
      -- libstdc++ when ASan sets up its __cxa_throw interceptor, and aborts.
      pending('sanitizer build: ASan cannot intercept C++ exceptions of a library loaded later')
      return
    end
    assert.are.equal('rsmi_init', r.call)
    assert.are.equal(8, r.code)
    assert.are.equal('RSMI_STATUS_INIT_ERROR', r.code_name)
    assert.truthy(r.output:find('rsmi_init', 1, true))
  end)

  it('finds a toolkit runtime off the loader path through CUDA_HOME', function()
    local tree = h.tmpdir()
    local lib = scenario('h100x8') .. '/libcudart.so.12'
    assert(os.execute('mkdir -p ' .. h.shquote(tree .. '/lib64') .. ' && cp ' .. h.shquote(lib)
      .. ' ' .. h.shquote(tree .. '/lib64/')))
    local r = h.run({ '-e', [[
      local p = assert(require('tp.gpu').probe({ apis = { 'cudart' } }))
      io.write(p.backends.cudart.status, ' ', #p.devices, ' ', p.backends.cudart.library)
    ]] }, { env = { CUDA_HOME = tree, CUDA_PATH = '', TPLUA_GPU_LIBPATH = '',
      TPLUA_CUDART = '' } })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('ok 8 ' .. tree .. '/lib64/libcudart.so.12', r.stdout)
  end)

  it('lists where it looks for a library', function()
    local list = gpu.search_path('cudart', '/x:/y')
    assert.are.same({ '/x/libcudart.so.13', '/y/libcudart.so.13', '/x/libcudart.so.12',
      '/y/libcudart.so.12', '/x/libcudart.so.11.0', '/y/libcudart.so.11.0', '/x/libcudart.so',
      '/y/libcudart.so' }, list)
    assert.are.same({ 'libcuda.so.1' }, gpu.search_path('cuda'))
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      gpu.probe({ timeout = -1 })
    end, 'tp.gpu.probe: timeout must be in (0, 3600] seconds, got -1')
    assert.has_error(function()
      gpu.probe({ apis = { 'opencl' } })
    end, "tp.gpu.probe: apis[1]: unknown api 'opencl'")
    assert.has_error(function()
      gpu.probe({ colour = 'red' })
    end, "tp.gpu.probe: unknown option 'colour'")
    assert.has_error(function()
      gpu.probe('fast')
    end, 'tp.gpu.probe: options table expected, got string')
    assert.has_error(function()
      gpu.search_path('opencl')
    end, "tp.gpu.search_path: unknown api 'opencl'")
  end)
end)

describe('tp.gpu.sampler', function()
  local function sample_until(s, n)
    assert(s:wait(n, 10))
    assert.is_true(#s:samples() >= n)
  end

  it('samples 8 fake H100s and integrates the energy counter', function()
    local s <close> = gpu.sampler({ interval = 0.02, libpath = scenario('h100x8') })
    assert.is_false(s:running())
    assert(s:start())
    assert.is_true(s:running())
    local devs = s:devices()
    assert.are.equal(8, #devs)
    assert.are.equal('nvml', devs[1].api)
    assert.are.equal('0000:18:00.0', devs[1].pci_bus_id)
    local t0 = gpu.now()
    sample_until(s, 8 * 6)
    local t1 = gpu.now()
    assert(s:stop())
    assert(s:stop())  -- idempotent
    assert.is_false(s:running())
    local samples = s:samples()
    assert.is_true(#samples >= 48)
    local x = samples[1]
    assert.are.equal(1, x.device)
    assert.are.equal(400, x.power_w)
    assert.are.equal(40, x.temperature_c)
    assert.are.equal(1755, x.sm_clock_mhz)
    assert.are.equal(50, x.utilization)
    assert.are.equal(2 ^ 30, x.memory_used)
    assert.is_true(x.wall > 1.6e9)
    local total, details = s:energy_j({ from = t0, to = t1 })
    assert.are.equal('counter', details.method)
    local expect = 0
    for _, d in ipairs(details.devices) do
      assert.are.equal('counter', d.method)
      local watts = 400 + 10 * (d.device - 1)
      assert.near(watts * (d.t_last - d.t_first), d.joules, 1e-3 * d.joules)
      expect = expect + d.joules
    end
    assert.near(expect, total, 1e-9 * total)
    local one = s:energy_j({ device = 3 })
    assert.is_true(one > 0)
    assert.truthy(tostring(s):find('stopped, 8 devices', 1, true))
  end)

  it('falls back to the trapezoid over power without an energy counter', function()
    local s <close> = gpu.sampler({ interval = 0.02, libpath = scenario('mixed'),
      apis = { 'rsmi' } })
    assert(s:start())
    sample_until(s, 4 * 6)
    s:stop()
    local total, details = s:energy_j()
    assert.are.equal('trapezoid', details.method)
    local sum = 0
    for _, d in ipairs(details.devices) do
      sum = sum + (600 + (d.device - 1)) * (d.t_last - d.t_first)
    end
    assert.near(sum, total, 1e-9 * sum)
    assert.truthy(s:notes():find('energy counter not available', 1, true))
  end)

  it('fails with ENOGPU and the reasons when nothing can be sampled', function()
    local s <close> = gpu.sampler({ libpath = h.tmpdir() })
    local ok, err, code = s:start()
    assert.is_nil(ok)
    assert.are.equal('ENOGPU', code)
    assert.truthy(err:find('gpu sampler: no device to sample', 1, true))
    assert.truthy(err:find('nvml: libnvidia-ml.so.1: not found', 1, true))
    local none, msg, c2 = s:energy_j()
    assert.is_nil(none)
    assert.are.equal('gpu sampler: not started', msg)
    assert.are.equal('ENODATA', c2)
  end)

  it('closes idempotently and refuses use after close', function()
    local s = gpu.sampler({ interval = 0.01, libpath = scenario('h100x8') })
    assert(s:start())
    s:close()
    s:close()
    assert.are.equal('tp.gpu.Sampler (closed)', tostring(s))
    assert.has_error(function()
      s:samples()
    end, 'attempt to use a closed gpu sampler')
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      gpu.sampler({ interval = 0 })
    end, 'tp.gpu.sampler: interval must be in [0.001, 86400] seconds, got 0')
    assert.has_error(function()
      gpu.sampler({ apis = { 'cuda' } })
    end, "tp.gpu.sampler: apis[1]: unknown api 'cuda'")
    local s <close> = gpu.sampler({ interval = 0.01, libpath = scenario('h100x8') })
    assert(s:start())
    assert.has_error(function()
      s:start()
    end, 'tp.gpu.Sampler:start: already running')
    assert.has_error(function()
      s:energy_j({ from = 2, to = 1 })
    end, 'tp.gpu.Sampler:energy_j: window ends (1) before it starts (2)')
    assert.has_error(function()
      s:energy_j({ device = 99 })
    end, 'tp.gpu.Sampler:energy_j: no device 99')
    assert.has_error(function()
      s:wait(-1)
    end, 'tp.gpu.Sampler:wait: count must be a non-negative integer')
  end)

  it('times out waiting for readings that cannot come in time', function()
    local s <close> = gpu.sampler({ interval = 10, libpath = scenario('h100x8') })
    assert(s:start())
    local ok, err, code = s:wait(1000, 0.2)
    assert.is_nil(ok)
    assert.are.equal('ETIMEDOUT', code)
    assert.truthy(err:find('of 1000 readings after 0.2 s', 1, true))
  end)
end)
