-- tp.provenance: the framework version a checkout declares (Megatron-LM and NeMo
-- package_info.py, torchtitan's version.txt, a __version__ line), the GPUs' state at the start
-- grouped by distinct state, and the keys the audit compares.
local h = require('helper')
local fs = require('tp.fs')
local provenance = require('tp.provenance')

describe('tp.provenance', function()
  it("reads the version a framework checkout declares", function()
    local dir = h.tmpdir()
    assert(fs.mkdir_p(dir .. '/m/megatron/core'))
    h.write(dir .. '/m/megatron/core/package_info.py',
      "# header\nMAJOR = 0\nMINOR = 13\nPATCH = 0\nPRE_RELEASE = 'rc2'\n")
    assert.are.same({ '0.13.0rc2', 'megatron/core/package_info.py' },
      { provenance.framework_version('megatron', dir .. '/m') })
    assert(fs.mkdir_p(dir .. '/t/assets'))
    h.write(dir .. '/t/assets/version.txt', '0.3.0rc4\n')
    assert.are.equal('0.3.0rc4', provenance.framework_version('torchtitan', dir .. '/t'))
    assert(fs.mkdir_p(dir .. '/p/primus'))
    h.write(dir .. '/p/primus/__init__.py', '__version__ = "0.2.1"\n')
    assert.are.equal('0.2.1', provenance.framework_version('primus', dir .. '/p'))
    -- Nothing declared, or an unknown framework: no version rather than a guess.
    assert.is_nil(provenance.framework_version('nemo', dir .. '/m'))
    assert.is_nil(provenance.framework_version('megatron', dir .. '/t'))
    assert.is_nil(provenance.framework_version('other', dir .. '/m'))
    h.write(dir .. '/m/megatron/core/package_info.py', '\0\1binary')
    assert.is_nil(provenance.framework_version('megatron', dir .. '/m'))
  end)

  it("groups the GPUs' state at the start, so an odd device stands out", function()
    local function dev(i, w)
      return { index = i, name = 'H100', power_limit_w = w, app_clock_mhz = 1980,
        clock_mhz = 1980, ecc = true, persistence = true, clock_now_mhz = 345,
        memory_used_bytes = 2 ^ 29 }
    end
    local probe = { devices = { dev(1, 700), dev(2, 700), dev(3, 500), dev(4, 700) } }
    local inv = provenance.inventory({ probe = probe })
    assert.are.equal(2, #inv.gpu_state)
    assert.are.same({ 1, 2, 4 }, inv.gpu_state[1].devices)
    assert.are.same({ 3 }, inv.gpu_state[2].devices)
    assert.are.equal(500, inv.gpu_state[2].power_limit_w)
    assert.are.same({ 345, 345, 345 }, inv.gpu_state[1].clock_now_mhz)
    assert.are.equal(0.5, inv.gpu_state[1].memory_used_gib)
    local keys = provenance.comparable(inv)
    assert.are.equal('700', keys['gpu_state.1.power_limit_w'])
    assert.are.equal('500', keys['gpu_state.2.power_limit_w'])
    assert.are.equal('true', keys['gpu_state.1.ecc'])
    -- The clock now and the memory in use are not settings: never compared.
    for k in pairs(keys) do
      assert.is_nil(k:find('clock_now', 1, true), k)
      assert.is_nil(k:find('memory_used', 1, true), k)
    end
    assert.is_nil(provenance.inventory({}).gpu_state)
  end)

  it("takes a framework's version from its installed package when the checkout has none",
    function()
      local dir = h.tmpdir()
      local py = dir .. '/python3'
      h.write(py, '#!/bin/sh\necho \'{"python": "3.12.0", "torch": "2.6.0", '
        .. '"packages": {"megatron-core": "0.12.1", "transformer-engine": "2.1.0"}}\'\n')
      assert(require('tp.proc').run({ 'chmod', '+x', py }))
      local inv = provenance.inventory({ python = py, framework = 'megatron',
        framework_dir = dir })
      assert.are.equal('0.12.1', inv.framework.version)
      assert.are.equal('package megatron-core', inv.framework.version_file)
      local keys = provenance.comparable(inv)
      assert.are.equal('2.1.0', keys['package.transformer-engine'])
      assert.are.equal('0.12.1', keys['framework.version'])
    end)
end)
