-- tp.hardware: every catalog row against HARDWARE.md §1, the match from probed devices to rows
-- (never a silent fallback, partitions scaled), and the price assumptions.
local h = require('helper')
local hardware = require('tp.hardware')

-- HARDWARE.md §1.1 and §1.2, row by row: units, memory GB, bandwidth TB/s, TDP W, arch, and
-- dense peaks (nil where the table says the GPU lacks the precision or none is published).
local EXPECTED = {
  ['a100-sxm'] = { 108, 80, 2.039, 400, 'sm_80', { fp32 = 19.5, tf32 = 156, bf16 = 312,
    fp16 = 312 } },
  ['h100-sxm'] = { 132, 80, 3.35, 700, 'sm_90', { fp32 = 67, tf32 = 494.7, bf16 = 989.4,
    fp16 = 989.4, fp8 = 1978.9 } },
  ['h100-pcie'] = { 114, 80, 2.0, 350, 'sm_90', { fp32 = 51, tf32 = 378, bf16 = 756, fp16 = 756,
    fp8 = 1513 } },
  ['h200'] = { 132, 141, 4.8, 700, 'sm_90', { fp32 = 67, tf32 = 494.7, bf16 = 989.4,
    fp16 = 989.4, fp8 = 1978.9 } },
  ['b200'] = { 148, 180, 7.7, 1000, 'sm_100', { fp32 = 75, tf32 = 1100, bf16 = 2250,
    fp16 = 2250, fp8 = 4500 } },
  ['gb200'] = { nil, 186, 8.0, 1200, 'sm_100', { fp32 = 80, tf32 = 1250, bf16 = 2500,
    fp16 = 2500, fp8 = 5000 } },
  ['mi250x'] = { 220, 128, 3.2768, 560, 'gfx90a', { fp32 = 47.9, bf16 = 383.0, fp16 = 383.0 } },
  ['mi300x'] = { 304, 192, 5.3, 750, 'gfx942', { fp32 = 163.4, tf32 = 653.7, bf16 = 1307.4,
    fp16 = 1307.4, fp8 = 2614.9 } },
  ['mi325x'] = { 304, 256, 6.0, 1000, 'gfx942', { fp32 = 163.4, tf32 = 653.7, bf16 = 1307.4,
    fp16 = 1307.4, fp8 = 2614.9 } },
  ['mi355x'] = { 256, 288, 8.0, 1400, 'gfx950', { fp32 = 157.3, bf16 = 2516.6, fp16 = 2516.6,
    fp8 = 5033.2 } },
}

local function dev(name, arch, units, vendor, gib, mhz)
  return { name = name, arch = arch, sm_count = units, vendor = vendor or 'nvidia',
    memory_bytes = gib and math.floor(gib * 2 ^ 30), clock_mhz = mhz }
end

describe('tp.hardware', function()
  it('has every row of HARDWARE.md with its figures', function()
    assert.are.same({ 'a100-sxm', 'h100-sxm', 'h100-pcie', 'h200', 'b200', 'gb200', 'mi250x',
      'mi300x', 'mi325x', 'mi355x' }, hardware.ids())
    for id, e in pairs(EXPECTED) do
      local row = assert(hardware.get(id))
      assert.are.equal(id, row.id)
      assert.are.equal(e[1], row.sm_count, id .. ' units')
      assert.are.equal(e[2], row.memory_gb, id .. ' memory')
      assert.are.equal(e[3], row.bandwidth_tbs, id .. ' bandwidth')
      assert.are.equal(e[4], row.tdp_w, id .. ' tdp')
      assert.are.equal(e[5], row.arch, id .. ' arch')
      for _, p in ipairs(hardware.PRECISIONS) do
        assert.are.equal(e[6][p], row.peak_tflops[p], id .. ' ' .. p)
      end
      assert.truthy(#row.source > 20, id .. ' source')
    end
  end)

  it('answers the two figures quoted most often, and the ones claimed wrongly (§2)', function()
    assert.are.equal(989.4, hardware.get('h100-sxm').peak_tflops.bf16)
    assert.are.equal(2614.9, hardware.get('mi300x').peak_tflops.fp8)
    -- 989 is the H100 SXM dense BF16 peak, not FP8; 653.7 is MI300X dense TF32, not FP16
    assert.are.equal(1978.9, hardware.get('h100-sxm').peak_tflops.fp8)
    assert.are.equal(1307.4, hardware.get('mi300x').peak_tflops.fp16)
  end)

  it('leaves a missing precision nil, never 0', function()
    assert.is_nil(hardware.get('a100-sxm').peak_tflops.fp8)
    assert.is_nil(hardware.get('mi250x').peak_tflops.tf32)
    assert.is_nil(hardware.get('mi250x').peak_tflops.fp8)
    assert.is_nil(hardware.get('mi355x').peak_tflops.tf32)
    for _, row in ipairs(hardware.list()) do
      for p, v in pairs(row.peak_tflops) do
        assert.is_true(v > 0, row.id .. ' ' .. p)
      end
    end
    local v, err = hardware.peak('a100-sxm', 'fp8')
    assert.is_nil(v)
    assert.are.equal('hardware: a100-sxm has no fp8 peak in the catalog', err)
    assert.are.equal(756, hardware.peak('h100-pcie', 'bf16'))
  end)

  it('keeps dense at half the vendor sparse figure where one is printed', function()
    for _, row in ipairs(hardware.list()) do
      for p, sparse in pairs(row.peak_tflops_sparse) do
        local dense = row.peak_tflops[p]
        assert.is_true(math.abs(sparse / dense - 2) < 0.002, row.id .. ' ' .. p)
      end
    end
  end)

  it('hands out copies', function()
    local row = hardware.get('h100-sxm')
    row.peak_tflops.bf16 = 1
    assert.are.equal(989.4, hardware.get('h100-sxm').peak_tflops.bf16)
  end)

  it('fails for an unknown id', function()
    local row, err, code = hardware.get('v100')
    assert.is_nil(row)
    assert.are.equal('ENOENT', code)
    assert.truthy(err:find("hardware: no catalog row 'v100'", 1, true))
    assert.has_error(function()
      hardware.get(nil)
    end, 'tp.hardware.get: string expected, got nil')
  end)

  describe('match', function()
    it('maps device names to rows', function()
      local cases = {
        { dev('NVIDIA H100 80GB HBM3', 'sm_90', 132), 'h100-sxm' },
        { dev('NVIDIA H100 PCIe', 'sm_90', 114), 'h100-pcie' },
        { dev('NVIDIA H200', 'sm_90', 132), 'h200' },
        { dev('NVIDIA A100-SXM4-80GB', 'sm_80', 108), 'a100-sxm' },
        { dev('NVIDIA B200', 'sm_100', 148), 'b200' },
        { dev('NVIDIA GB200', 'sm_100', 152), 'gb200' },
        { dev('AMD Instinct MI300X', 'gfx942', 304, 'amd'), 'mi300x' },
        { dev('AMD Instinct MI325X', 'gfx942', 304, 'amd'), 'mi325x' },
        { dev('AMD Instinct MI355X', 'gfx950', 256, 'amd'), 'mi355x' },
      }
      for _, c in ipairs(cases) do
        local row, why = hardware.match(c[1])
        assert.truthy(row, why)
        assert.are.equal(c[2], row.id)
        assert.are.equal(1, row.scale)
        assert.is_false(row.partition)
      end
      assert.truthy(hardware.match(dev('NVIDIA GB200', 'sm_100', 152)).notes
        :find('not scaled', 1, true))
      assert.are.equal('name', hardware.match(dev('NVIDIA H200', 'sm_90', 132)).identified_by)
      local unknown_units = assert(hardware.match(dev('NVIDIA H100 80GB HBM3', 'sm_90', nil)))
      assert.are.equal(1, unknown_units.scale)
      assert.truthy(unknown_units.notes:find('peaks assume the full chip', 1, true))
    end)

    -- The names the vendors' tools print for each row (tp.hardware's comment on the name rules
    -- cites where each comes from), the catalog's own names (tplua extract --gpu writes them to
    -- gpu_info.device_name, which tp.compare matches again), and the spellings of other tools.
    it('accepts every name the vendors print for each row', function()
      local names = {
        ['a100-sxm'] = { 'NVIDIA A100-SXM4-80GB', 'A100-SXM4-80GB', 'NVIDIA A100 SXM4 80GB',
          'NVIDIA A100-SXM-80GB', 'nvidia a100-sxm4-80gb' },
        ['h100-sxm'] = { 'NVIDIA H100 80GB HBM3', 'NVIDIA H100 SXM5 80GB', 'H100 80GB HBM3' },
        ['h100-pcie'] = { 'NVIDIA H100 PCIe', 'NVIDIA H100 PCIe 80GB', 'NVIDIA H100-PCIE' },
        ['h200'] = { 'NVIDIA H200', 'NVIDIA H200 SXM 141GB' },
        ['b200'] = { 'NVIDIA B200' },
        ['gb200'] = { 'NVIDIA GB200' },
        ['mi250x'] = { 'AMD Instinct MI250X', 'AMD Instinct MI250X / MI250',
          'AMD INSTINCT MI250X' },
        ['mi300x'] = { 'AMD Instinct MI300X', 'AMD Instinct MI300X VF', 'AMD Instinct MI300X HF',
          'AMD Instinct MI300X OAM' },
        ['mi325x'] = { 'AMD Instinct MI325X', 'AMD Instinct MI325X OAM' },
        ['mi355x'] = { 'AMD Instinct MI355X', 'AMD Instinct MI355X OAM' },
      }
      for _, row in ipairs(hardware.list()) do
        local list = assert(names[row.id], row.id)
        list[#list + 1] = row.name
        for _, name in ipairs(list) do
          -- by name alone, as tp.compare matches recorded names
          local got, why = hardware.match({ name = name })
          assert.truthy(got, why)
          assert.are.equal(row.id, got.id, name)
          -- and with what the probe adds: the architecture and the full unit count of a device
          local per = row.devices_per_package or 1
          got, why = hardware.match({ name = name, arch = row.arch, vendor = row.vendor,
            sm_count = row.sm_count and row.sm_count // per })
          assert.truthy(got, why)
          assert.are.equal(row.id, got.id, name)
        end
      end
    end)

    it('identifies AMD devices HIP names only "AMD Radeon Graphics" by arch, CUs and memory',
      function()
        local cases = {
          { dev('AMD Radeon Graphics', 'gfx942', 304, 'amd', 191.98, 2100), 'mi300x' },
          { dev('AMD Radeon Graphics', 'gfx942', 304, 'amd', 255.98, 2100), 'mi325x' },
          -- one MI250X GCD: half the package, scaled as when named
          { dev('AMD Radeon Graphics', 'gfx90a', 110, 'amd', 63.98, 1700), 'mi250x', 0.5 },
          { dev('AMD Radeon Graphics', 'gfx950', 256, 'amd', 287.98, 2400), 'mi355x' },
          { dev('gfx942', 'gfx942', 304, 'amd', 191.98), 'mi300x' },
        }
        for _, c in ipairs(cases) do
          local row, why = hardware.match(c[1])
          assert.truthy(row, why)
          assert.are.equal(c[2], row.id)
          assert.are.equal('arch', row.identified_by)
          assert.are.equal(c[3] or 1, row.scale)
          assert.truthy(row.notes:find('is generic', 1, true), row.notes)
        end
        local refused = {
          -- MI300A (228 CUs, 128 GB), MI308X (80 CUs): gfx942 but no catalog row
          { dev('AMD Radeon Graphics', 'gfx942', 228, 'amd', 128), 'no catalog row has gfx942' },
          { dev('AMD Radeon Graphics', 'gfx942', 80, 'amd', 192), 'no catalog row has gfx942' },
          -- a compute partition with a generic name: nothing says which chip it is part of
          { dev('AMD Radeon Graphics', 'gfx942', 38, 'amd', 192), 'no catalog row has gfx942' },
          -- MI350X: the MI355X's CUs and memory at 2,200 MHz; no clock, no decision
          { dev('AMD Radeon Graphics', 'gfx950', 256, 'amd', 288, 2200), 'looks like an MI350X' },
          { dev('AMD Radeon Graphics', 'gfx950', 256, 'amd', 288), 'no clock was reported' },
          { dev('AMD Radeon Graphics', 'gfx942', 304, 'amd'), 'generic name and no' },
          { dev('AMD Radeon Graphics', nil, 304, 'amd', 192), 'generic name and no' },
        }
        for _, c in ipairs(refused) do
          local row, why = hardware.match(c[1])
          assert.is_nil(row, c[2])
          assert.truthy(why:find(c[2], 1, true), why)
          assert.truthy(why:find('no MFU', 1, true), why)
        end
      end)

    it('never falls back to another GPU\'s peak', function()
      local unknown = {
        { dev('NVIDIA H100 NVL', 'sm_90', 132), 'not in the hardware catalog' },
        { dev('NVIDIA GH200 480GB', 'sm_90', 132), 'not in the hardware catalog' },
        { dev('NVIDIA H200 NVL', 'sm_90', 132), 'not in the hardware catalog' },
        { dev('NVIDIA A100-SXM4-40GB', 'sm_80', 108), 'not in the hardware catalog' },
        { dev('NVIDIA A100 80GB PCIe', 'sm_80', 108), 'not in the hardware catalog' },
        { dev('NVIDIA GeForce RTX 4090', 'sm_89', 128), 'not in the hardware catalog' },
        { dev('AMD Instinct MI300A', 'gfx942', 228, 'amd'), 'not in the hardware catalog' },
        { dev('AMD Instinct MI350X', 'gfx950', 256, 'amd'), 'not in the hardware catalog' },
        { dev('AMD Instinct MI308X', 'gfx942', 80, 'amd'), 'not in the hardware catalog' },
        { dev('NVIDIA A100-SXM4-40GB', 'sm_80', 108), 'not in the hardware catalog' },
        { dev('NVIDIA A100 PCIe 80GB', 'sm_80', 108), 'not in the hardware catalog' },
        { dev('AMD Radeon RX 7900 XTX', 'gfx1100', 96, 'amd', 24), 'not in the hardware catalog' },
        { dev('NVIDIA H100 80GB HBM3', 'sm_80', 132), 'reports sm_80, not sm_90' },
        { dev('NVIDIA H100 80GB HBM3', 'sm_90', 144), 'more than the 132 of h100-sxm' },
        { dev('', 'gfx942', 304, 'amd'), 'no name reported' },
        { { arch = 'sm_90' }, 'no name reported' },
      }
      for _, c in ipairs(unknown) do
        local row, why = hardware.match(c[1])
        assert.is_nil(row, c[1].name)
        assert.truthy(why:find(c[2], 1, true), why)
        assert.truthy(why:find('no MFU', 1, true), why)
      end
    end)

    it('scales peaks by visible units for partitions (§1.3)', function()
      -- one MI250X GCD is one HIP device: 110 of 220 CUs -> FP16 191.5 TF
      local gcd = assert(hardware.match(dev('AMD Instinct MI250X', 'gfx90a', 110, 'amd')))
      assert.are.equal('mi250x', gcd.id)
      assert.are.equal(0.5, gcd.scale)
      assert.is_true(gcd.partition)
      assert.near(191.5, gcd.peak_tflops.fp16, 1e-9)
      -- an MI300X in an 8-way compute partition: 38 CUs -> 163.4 TF FP16 per device
      local cpx = assert(hardware.match(dev('AMD Instinct MI300X', 'gfx942', 38, 'amd')))
      assert.near(163.4, cpx.peak_tflops.fp16, 0.05)
      -- an H100 MIG slice of 16 SMs
      local mig = assert(hardware.match(dev('NVIDIA H100 80GB HBM3 MIG 1g.10gb', 'sm_90', 16)))
      assert.are.equal('h100-sxm', mig.id)
      assert.near(989.4 * 16 / 132, mig.peak_tflops.bf16, 1e-9)
      assert.are.equal(16, mig.visible_units)
      -- the catalog itself is unchanged
      assert.are.equal(383.0, hardware.get('mi250x').peak_tflops.fp16)
    end)

    it('maps the devices the probe reports for the fake boxes', function()
      local gpu = require('tp.gpu')
      local p = assert(gpu.probe({ libpath = h.fakes_dir .. '/h100x8' }))
      for _, d in ipairs(p.devices) do
        assert.are.equal('h100-sxm', assert(hardware.match(d)).id)
      end
      p = assert(gpu.probe({ libpath = h.fakes_dir .. '/mi300x8' }))
      for _, d in ipairs(p.devices) do
        assert.are.equal('mi300x', assert(hardware.match(d)).id)
      end
      p = assert(gpu.probe({ libpath = h.fakes_dir .. '/mixed' }))
      assert.are.equal('a100-sxm', assert(hardware.match(p.devices[1])).id)
      local gcd = assert(hardware.match(p.devices[3]))
      assert.are.equal('mi250x', gcd.id)
      assert.are.equal(0.5, gcd.scale)
    end)

    it('raises on a non-table', function()
      assert.has_error(function()
        hardware.match('H100')
      end, 'tp.hardware.match: device table expected, got string')
    end)
  end)

  describe('prices', function()
    after_each(function()
      hardware.set_price('h100-sxm', nil)
    end)

    it('ships none and labels a set price as an assumption', function()
      assert.is_nil(hardware.price('h100-sxm'))
      assert.is_nil(hardware.get('h100-sxm').price_per_gpu_hour)
      hardware.set_price('h100-sxm', 2.5, 'example cloud list price')
      local usd, label = hardware.price('h100-sxm')
      assert.are.equal(2.5, usd)
      assert.is_true(label.assumption)
      assert.are.equal('example cloud list price', label.note)
      local row = hardware.get('h100-sxm')
      assert.are.equal(2.5, row.price_per_gpu_hour)
      assert.is_true(row.price.assumption)
      hardware.set_price('h100-sxm', nil)
      assert.is_nil(hardware.price('h100-sxm'))
    end)

    it('raises on misuse', function()
      assert.has_error(function()
        hardware.set_price('v100', 1)
      end, "tp.hardware.set_price: no catalog row 'v100'")
      assert.has_error(function()
        hardware.set_price('h100-sxm', -1)
      end, 'tp.hardware.set_price: price must be a non-negative number')
    end)
  end)
end)
