-- tplua probe: the real binary on this machine (no GPU: one clear line, exit 0, nothing on
-- stderr) and on the fake boxes of tests/fakes; --json; usage errors.
local h = require('helper')
local json = require('tp.json')

-- The system search, undisturbed by variables that redirect it (empty means unset).
local SYSTEM = { TPLUA_GPU_LIBPATH = '' }

local function fakes(name)
  return { TPLUA_GPU_LIBPATH = h.fakes_dir .. '/' .. name }
end

describe('tplua probe', function()
  it('says there is no GPU, with each library\'s answer, and exits 0 silently', function()
    local r = h.run({ 'probe' }, { env = SYSTEM })
    assert.are.equal(0, r.code)
    assert.are.equal('', r.stderr)
    if not r.stdout:find('^no GPU found') then
      pending('this machine has GPUs')
      return
    end
    local first = r.stdout:match('^[^\n]*')
    assert.truthy(first:find('^no GPU found %(7 libraries asked in %d+%.%d+ s'))
    for _, api in ipairs({ 'nvml', 'cuda', 'cudart', 'hip', 'rsmi', 'nccl', 'rccl' }) do
      assert.truthy(r.stdout:find('\n  ' .. api .. ' ', 1, true), api)
    end
  end)

  it('--json reports no devices and the reasons of the real libraries', function()
    local r = h.run({ 'probe', '--json' }, { env = SYSTEM })
    assert.are.equal(0, r.code)
    assert.are.equal('', r.stderr)
    local v = assert(json.decode(r.stdout))
    -- The machine's environment inventory, as run records carry it.
    assert.are.equal('tplua.environment/1', v.environment.schema)
    assert.are.equal(h.read('/proc/sys/kernel/osrelease'):gsub('%s+$', ''),
      v.environment.system.kernel)
    assert.truthy(r.stdout:find('"devices": []', 1, true) or #v.devices > 0)
    if #v.devices > 0 then
      pending('this machine has GPUs')
      return
    end
    for _, api in ipairs({ 'nvml', 'cuda', 'cudart', 'hip', 'rsmi', 'nccl', 'rccl' }) do
      local b = v.backends[api]
      assert.truthy(b and b.status, api)
      assert.truthy(b.status == 'ok' or (b.reason and #b.reason > 0), api)
    end
    assert.are.equal('table', type(v.inventory))
    local hip = v.backends.hip
    if hip.status == 'absent' then
      pending('libamdhip64 not installed (scripts/install-deps installs libamdhip64-5)')
      return
    end
    assert.are.equal(100, hip.code)
    assert.are.equal('hipErrorNoDevice', hip.code_name)
  end)

  it('asks an interpreter for its torch with --python', function()
    local r = h.run({ 'probe', '--json', '--python', 'python3-that-is-not-there' },
      { env = SYSTEM })
    assert.are.equal(0, r.code, r.stderr)
    local v = assert(json.decode(r.stdout))
    assert.truthy(v.environment.python.error:find('python3-that-is-not-there', 1, true))
  end)

  it('answers in well under a second without GPUs', function()
    local t0 = require('tp.gpu').now()
    local r = h.run({ 'probe', '--json' }, { env = SYSTEM })
    local took = require('tp.gpu').now() - t0
    assert.are.equal(0, r.code)
    assert.is_true(took < 1.0, string.format('took %.3f s', took))
  end)

  it('shows 8 H100s with their catalog row and peaks', function()
    local r = h.run({ 'probe' }, { env = fakes('h100x8') })
    assert.are.equal(0, r.code)
    assert.are.equal('', r.stderr)
    assert.truthy(r.stdout:find('^8 GPUs found'))
    assert.truthy(r.stdout:find('NVIDIA H100 80GB HBM3  sm_90  132 SM  79.6 GiB  1980 MHz  '
      .. '0000:18:00.0  cudart', 1, true))
    assert.truthy(r.stdout:find('catalog: h100-sxm, bf16 989.4, fp8 1978.9, tf32 494.7, fp32 67 '
      .. 'TFLOP/s', 1, true))
    assert.truthy(r.stdout:find('NVIDIA driver 535.161.08', 1, true))
    assert.truthy(r.stdout:find('NCCL 2.21.5', 1, true))
    assert.falsy(r.stdout:find('in use:', 1, true))
  end)

  it('shows a GPU that another process holds, and its state in --json', function()
    local r = h.run({ 'probe' }, { env = fakes('h100busy') })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('0000:28:00.0  cudart\n[^\n]*\n%s+in use: 1 process%(es%): '
      .. 'pid 4242 %(30%.0 GiB%)\n'), r.stdout)
    local _, n = r.stdout:gsub('in use:', '')
    assert.are.equal(1, n)
    local j = h.run({ 'probe', '--json' }, { env = fakes('h100busy') })
    local doc = assert(require('tp.json').decode(j.stdout))
    local st = doc.environment.gpu_state
    assert.are.equal(700, st[1].power_limit_w)
    assert.is_true(st[1].ecc)
  end)

  it('--json gives devices, backends and inventory for a mixed box', function()
    local r = h.run({ 'probe', '--json', '--libpath', h.fakes_dir .. '/mixed' }, { env = SYSTEM })
    assert.are.equal(0, r.code)
    assert.are.equal('', r.stderr)
    local v = assert(json.decode(r.stdout))
    assert.are.equal(6, #v.devices)
    assert.are.equal('a100-sxm', v.devices[1].catalog.id)
    assert.are.equal(312, v.devices[1].catalog.peak_tflops.bf16)
    local gcd = v.devices[3].catalog
    assert.are.equal('mi250x', gcd.id)
    assert.are.equal(0.5, gcd.scale)
    assert.are.equal(191.5, gcd.peak_tflops.bf16)
    assert.are.equal('ok', v.backends.cuda.status)
    assert.are.equal('5.2.21153', v.inventory.hip_runtime)
  end)

  it('reports a crashed library and a device that failed mid-probe', function()
    local r = h.run({ 'probe' }, { env = fakes('errmid') })
    assert.are.equal(0, r.code)
    assert.are.equal('', r.stderr)
    assert.truthy(r.stdout:find('errors: cudaDeviceGetAttribute(16): error 999', 1, true))
    assert.truthy(r.stdout:find('hip     crashed   libamdhip64.so.6: probe child killed by '
      .. 'signal 6 (SIGABRT) during hipDeviceGetName(1)', 1, true))
  end)

  it('reports a hung library after --timeout', function()
    local r = h.run({ 'probe', '--timeout', '0.3' }, { env = fakes('hang') })
    assert.are.equal(0, r.code)
    assert.truthy(r.stdout:find('hip     timeout   ', 1, true))
    assert.truthy(r.stdout:find('no answer within 0.3 s during hipGetDeviceCount', 1, true))
  end)

  it('names a device it cannot match instead of guessing its peak', function()
    local r = h.run({ '-e', [[
      local probe = require('tp.cmd.probe')
      local gpu = require('tp.gpu')
      local real = gpu.probe
      gpu.probe = function(o)
        local p = real(o)
        for _, d in ipairs(p.devices) do d.name = 'NVIDIA H100 NVL' end
        return p
      end
      os.exit(probe.run({}))
    ]] }, { env = fakes('h100x8') })
    assert.are.equal(0, r.code)
    assert.truthy(r.stdout:find("catalog: device 'NVIDIA H100 NVL' (sm_90): not in the hardware "
      .. 'catalog (no MFU)', 1, true))
  end)

  it('prints usage for --help and refuses bad arguments', function()
    local r = h.run({ 'probe', '--help' })
    assert.are.equal(0, r.code)
    assert.truthy(r.stdout:find('usage: tplua probe [--json]', 1, true))
    r = h.run({ 'probe', '--colour' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("tplua probe: unknown option '--colour'", 1, true))
    r = h.run({ 'probe', 'extra' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("tplua probe: unexpected argument 'extra'", 1, true))
    r = h.run({ 'probe', '--timeout', '0' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('--timeout must be in (0, 3600] seconds', 1, true))
  end)
end)
