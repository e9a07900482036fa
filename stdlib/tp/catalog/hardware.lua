-- tp.hardware: the GPU catalog (memory, bandwidth, SM/CU count, peak dense TFLOP/s per
-- precision, TDP, architecture) and the match from a probed device to a catalog row.
-- Figures and their sources: HARDWARE.md §1 of the design notes, which cites the vendors'
-- datasheets and whitepapers; each row's `source` names them. Peaks are DENSE (no 2:4
-- sparsity); a precision a GPU lacks is nil, never 0.
local catalog_rows = require('tp.catalog._rows')

local M = {}

-- Sources, as cited in HARDWARE.md §6.
local SRC = {
  a100 = 'NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf); '
    .. 'NVIDIA Ampere architecture whitepaper; Hopper whitepaper Table 3',
  h100 = 'NVIDIA H100 datasheet and product page (nvidia.com/en-us/data-center/h100); '
    .. 'NVIDIA H100 Tensor Core GPU Architecture whitepaper V1.04, Tables 1 and 3',
  h200 = 'NVIDIA H200 product page (nvidia.com/en-us/data-center/h200), sparse figures halved',
  b200 = 'NVIDIA HGX platform page (nvidia.com/en-us/data-center/hgx, HGX B200 per GPU); '
    .. 'DGX B200 datasheet; SM count: device queries reported by third parties',
  gb200 = 'NVIDIA GB200 NVL72 page (nvidia.com/en-us/data-center/gb200-nvl72), '
    .. '"Individual Blackwell GPU Specifications", sparse figures halved',
  mi250x = 'AMD CDNA 2 architecture whitepaper (tables); ROCm docs "AMD GPU specifications"; '
    .. 'CDNA 3 whitepaper Table 1 (MI250X TF32/FP8 N/A)',
  mi300 = 'AMD CDNA 3 architecture whitepaper Table 2; ROCm docs "AMD GPU specifications"',
  mi355x = 'AMD CDNA 4 architecture whitepaper Tables 1 and 2 (peaks derived: FLOPs/clock/CU x '
    .. '256 CUs x 2.4 GHz); ROCm docs "AMD GPU specifications"',
}

--- Precisions with a peak in the catalog.
M.PRECISIONS = { 'fp32', 'tf32', 'bf16', 'fp16', 'fp8' }

local function copy(t)
  if type(t) ~= 'table' then
    return t
  end
  local out = {}
  for k, v in pairs(t) do
    out[k] = copy(v)
  end
  return out
end

-- One catalog row: a copy of the fields its vendor or chip shares, then its own.
local function catalog_row(base, fields)
  local out = copy(base)
  for k, v in pairs(fields) do
    out[k] = v
  end
  return out
end

local NVIDIA = { vendor = 'nvidia', fp32_lanes_per_unit = 128, exclude = {} }
local AMD = { vendor = 'amd', fp32_lanes_per_unit = 64, exclude = {} }

-- MI300X and MI325X: one CDNA 3 compute die (gfx942, 304 CUs, same clock and peaks); memory,
-- bandwidth and TDP differ.
local MI300 = catalog_row(AMD, {
  arch = 'gfx942', sm_count = 304, clock_mhz = 2100,
  peak_tflops = { fp32 = 163.4, tf32 = 653.7, bf16 = 1307.4, fp16 = 1307.4, fp8 = 2614.9 },
  peak_tflops_sparse = { tf32 = 1307.4, bf16 = 2614.9, fp16 = 2614.9, fp8 = 5229.8 },
  source = SRC.mi300,
})

-- Name rules: `names` are Lua patterns the device name must match (one of them), `exclude`
-- patterns it must not match. Both are applied to the name made canonical (upper case, '-', '_'
-- and '/' read as spaces, runs of spaces as one: canonical()), so that "NVIDIA A100-SXM4-80GB"
-- as the CUDA runtime and nvidia-smi print it and "NVIDIA A100 SXM4 80GB" as datasheets write it
-- are one name. %f frontiers keep "GH200" from matching H200, "GB200" from matching B200 and
-- "MI308X" from matching MI300X. The names the vendors' tools print, per row:
-- - NVIDIA (cudaGetDeviceProperties().name = cuDeviceGetName = nvmlDeviceGetName =
--   `nvidia-smi --query-gpu=name`): "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3",
--   "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA B200", "NVIDIA GB200"; drivers before R470
--   printed no "NVIDIA " prefix ("A100-SXM4-80GB"); MLCommons system descriptions write
--   "NVIDIA A100-SXM-80GB" (pytorch/torchtitan torchtitan/tools/utils.py get_peak_flops tells H100
--   SXM, PCIe and NVL apart by the same tokens).
-- - AMD (hipDeviceProp_t.name and `rocm-smi --showproductname` "Card Series" both come from
--   libdrm's data/amdgpu.ids, e.g. X11Libre/drm): 740C "AMD Instinct MI250X / MI250", 7408
--   "AMD Instinct MI250X", 74A1 "AMD Instinct MI300X", 74A9/74BD "AMD Instinct MI300X HF",
--   74B5 "AMD Instinct MI300X VF" (SR-IOV guests), 74A5 "AMD Instinct MI325X"; amd-smi's
--   product_name adds " OAM" ("AMD Instinct MI300X OAM", ROCm/vllm PR #359); MI355X prints
--   "AMD Instinct MI355X" (sgl-project/sglang PR #30984). Where amdgpu.ids lacks the device
--   (Debian 12's libdrm 2.4.114 has no MI300 entry; ROCm 7.2.4 images without AMD's libdrm),
--   HIP names every gfx942/gfx950 device "AMD Radeon Graphics" (unslothai/unsloth PR #4048,
--   meta-pytorch/tritonbench PR #702): such a device is identified by `arch`, full CU count
--   and memory instead (generic_match below).
local ROWS = {
  catalog_row(NVIDIA, {
    id = 'a100-sxm', name = 'NVIDIA A100 SXM4 80GB', arch = 'sm_80',
    compute_capability = '8.0', sm_count = 108, fp32_lanes_per_unit = 64,
    memory_gb = 80, memory_type = 'HBM2e', bandwidth_tbs = 2.039, tdp_w = 400,
    peak_tflops = { fp32 = 19.5, tf32 = 156, bf16 = 312, fp16 = 312 },
    peak_tflops_sparse = { tf32 = 312, bf16 = 624, fp16 = 624 },
    names = { '%f[%w]A100 SXM4? 80GB%f[%W]', '%f[%w]A100 80GB SXM4?%f[%W]' },
    exclude = { 'PCIE' },
    source = SRC.a100,
  }),
  catalog_row(NVIDIA, {
    id = 'h100-sxm', name = 'NVIDIA H100 SXM5 80GB', arch = 'sm_90',
    compute_capability = '9.0', sm_count = 132,
    memory_gb = 80, memory_type = 'HBM3', bandwidth_tbs = 3.35, tdp_w = 700,
    peak_tflops = { fp32 = 67, tf32 = 494.7, bf16 = 989.4, fp16 = 989.4, fp8 = 1978.9 },
    peak_tflops_sparse = { tf32 = 989.4, bf16 = 1978.9, fp16 = 1978.9, fp8 = 3957.8 },
    names = { '%f[%w]H100%f[%W]' }, exclude = { 'PCIE', 'NVL' },
    notes = 'FP32 67 TF per the datasheet (whitepaper: 66.9)',
    source = SRC.h100,
  }),
  catalog_row(NVIDIA, {
    id = 'h100-pcie', name = 'NVIDIA H100 PCIe 80GB', arch = 'sm_90',
    compute_capability = '9.0', sm_count = 114,
    memory_gb = 80, memory_type = 'HBM2e', bandwidth_tbs = 2.0, tdp_w = 350,
    peak_tflops = { fp32 = 51, tf32 = 378, bf16 = 756, fp16 = 756, fp8 = 1513 },
    peak_tflops_sparse = { tf32 = 756, bf16 = 1513, fp16 = 1513, fp8 = 3026 },
    names = { '%f[%w]H100 PCIE%f[%W]' }, exclude = { 'NVL' },
    notes = 'TDP 300-350 W (whitepaper: 350 W); FP32 51 TF (whitepaper: 51.2)',
    source = SRC.h100,
  }),
  catalog_row(NVIDIA, {
    id = 'h200', name = 'NVIDIA H200 SXM 141GB', arch = 'sm_90',
    compute_capability = '9.0', sm_count = 132,
    memory_gb = 141, memory_type = 'HBM3e', bandwidth_tbs = 4.8, tdp_w = 700,
    peak_tflops = { fp32 = 67, tf32 = 494.7, bf16 = 989.4, fp16 = 989.4, fp8 = 1978.9 },
    peak_tflops_sparse = { tf32 = 989, bf16 = 1979, fp16 = 1979, fp8 = 3958 },
    names = { '%f[%w]H200%f[%W]' }, exclude = { 'NVL' },
    notes = 'SM count as H100 SXM (same GH100 configuration; not on the spec sheet)',
    source = SRC.h200,
  }),
  catalog_row(NVIDIA, {
    id = 'b200', name = 'NVIDIA B200 (HGX B200, per GPU)', arch = 'sm_100',
    compute_capability = '10.0', sm_count = 148,
    memory_gb = 180, memory_type = 'HBM3E', bandwidth_tbs = 7.7, tdp_w = 1000,
    peak_tflops = { fp32 = 75, tf32 = 1100, bf16 = 2250, fp16 = 2250, fp8 = 4500, fp4 = 9000 },
    peak_tflops_sparse = { tf32 = 2200, bf16 = 4500, fp16 = 4500, fp8 = 9000, fp4 = 18000 },
    names = { '%f[%w]B200%f[%W]' },
    notes = 'launch material: 192 GB, 8 TB/s; 148 SMs is a third-party device-query value',
    source = SRC.b200,
  }),
  catalog_row(NVIDIA, {
    id = 'gb200', name = 'NVIDIA GB200 (per Blackwell GPU)', arch = 'sm_100',
    compute_capability = '10.0', sm_count = nil,
    memory_gb = 186, memory_type = 'HBM3E', bandwidth_tbs = 8.0, tdp_w = 1200,
    peak_tflops = { fp32 = 80, tf32 = 1250, bf16 = 2500, fp16 = 2500, fp8 = 5000, fp4 = 10000 },
    peak_tflops_sparse = { tf32 = 2500, bf16 = 5000, fp16 = 5000, fp8 = 10000, fp4 = 20000 },
    names = { '%f[%w]GB200%f[%W]' },
    notes = 'SM count not published (read at run time); launch material: 192 GB',
    source = SRC.gb200,
  }),
  catalog_row(AMD, {
    id = 'mi250x', name = 'AMD Instinct MI250X (OAM, 2 GCDs)', arch = 'gfx90a',
    sm_count = 220, devices_per_package = 2,
    memory_gb = 128, memory_type = 'HBM2e', bandwidth_tbs = 3.2768, tdp_w = 560,
    peak_tflops = { fp32 = 47.9, bf16 = 383.0, fp16 = 383.0 },
    peak_tflops_sparse = {},
    clock_mhz = 1700,
    names = { '%f[%w]MI250X%f[%W]' },
    notes = 'each GCD (110 CUs, 64 GB) is one HIP device: per-device peaks are half; '
      .. 'FP32 47.9 TF vector (95.7 matrix / packed); TDP 500 W / 560 W',
    source = SRC.mi250x,
  }),
  catalog_row(MI300, {
    id = 'mi300x', name = 'AMD Instinct MI300X',
    memory_gb = 192, memory_type = 'HBM3', bandwidth_tbs = 5.3, tdp_w = 750,
    names = { '%f[%w]MI300X%f[%W]' },
  }),
  catalog_row(MI300, {
    id = 'mi325x', name = 'AMD Instinct MI325X',
    memory_gb = 256, memory_type = 'HBM3E', bandwidth_tbs = 6.0, tdp_w = 1000,
    names = { '%f[%w]MI325X%f[%W]' },
  }),
  catalog_row(AMD, {
    id = 'mi355x', name = 'AMD Instinct MI355X', arch = 'gfx950',
    sm_count = 256,
    memory_gb = 288, memory_type = 'HBM3E', bandwidth_tbs = 8.0, tdp_w = 1400,
    peak_tflops = { fp32 = 157.3, bf16 = 2516.6, fp16 = 2516.6, fp8 = 5033.2, fp4 = 10066 },
    peak_tflops_sparse = { bf16 = 5033.2, fp16 = 5033.2, fp8 = 10066 },
    clock_mhz = 2400, twins = { { name = 'MI350X', clock_mhz = 2200 } },
    names = { '%f[%w]MI355X%f[%W]' },
    notes = 'no TF32 rate in the CDNA 4 tables: unknown; peaks derived from FLOPs/clock/CU',
    source = SRC.mi355x,
  }),
}

local BY_ID = {}
for _, row in ipairs(ROWS) do
  BY_ID[row.id] = row
end

-- Prices per GPU-hour: none is assumed until one is set.
local prices = {}

-- A row as handed out: a copy (callers may not change the catalog) with its price, if set.
local function public(row)
  local r = copy(row)
  r.names, r.exclude, r.twins = nil, nil, nil
  local p = prices[row.id]
  if p then
    r.price_per_gpu_hour = p.usd
    r.price = { usd_per_gpu_hour = p.usd, assumption = true, note = p.note }
  end
  return r
end

local row_ids, row_get, row_list = catalog_rows.accessors(ROWS, BY_ID, public, 'tp.hardware.get',
  "hardware: no catalog row '%s' (known: %s)")

--- Lists the catalog ids in table order.
---@return string[]
M.ids = row_ids

--- Returns a copy of the catalog row `id` ('a100-sxm', 'h100-sxm', 'h100-pcie', 'h200',
--- 'b200', 'gb200', 'mi250x', 'mi300x', 'mi325x', 'mi355x'), or nil, message, 'ENOENT'.
---```lua
---tp.hardware.get('h100-sxm').peak_tflops.bf16  --> 989.4
---```
---@param id string
---@return table|nil row
---@return string? err
---@return string? code
M.get = row_get

--- Returns copies of all rows.
---@return table[]
M.list = row_list

--- Returns the peak dense TFLOP/s of `row` (a row or an id) at `precision`, or nil with a
--- message when the catalog has none (the GPU lacks it or no figure is published).
---@param row table|string
---@param precision string 'fp32'|'tf32'|'bf16'|'fp16'|'fp8'|'fp4'
---@return number|nil tflops
---@return string? err
function M.peak(row, precision)
  if type(row) == 'string' then
    local r, err = M.get(row)
    if not r then
      return nil, err
    end
    row = r
  end
  if type(row) ~= 'table' or type(row.peak_tflops) ~= 'table' then
    error('tp.hardware.peak: catalog row or id expected', 2)
  end
  local v = row.peak_tflops[precision]
  if v == nil then
    return nil, string.format('hardware: %s has no %s peak in the catalog', row.id or '?',
      tostring(precision))
  end
  return v
end

-- The name as the rules see it: upper case, '-', '_' and '/' as spaces, one space between words.
local function canonical(name)
  return (name:upper():gsub('[%-_/]', ' '):gsub('%s+', ' '):gsub('^ ', ''):gsub(' $', ''))
end

local function name_matches(row, name)
  for _, pat in ipairs(row.exclude) do
    if name:find(pat) then
      return false
    end
  end
  for _, pat in ipairs(row.names) do
    if name:find(pat) then
      return true
    end
  end
  return false
end

-- Names that say nothing of the model: HIP's fallback when libdrm's amdgpu.ids has no entry for
-- the device, and a bare LLVM target (rocminfo's agent "Name: gfx942").
local function is_generic(cname)
  return cname == 'AMD RADEON GRAPHICS' or cname:match('^GFX%x+$') ~= nil
end

-- A device with a generic name: the one AMD row of its architecture whose full per-device CU
-- count and memory it reports (within 3 %: HIP reports an MI300X's 192 GB as 191.98 GiB). A row
-- with a twin outside the catalog (MI355X and MI350X: same gfx950, CUs and memory; 2,400 vs
-- 2,200 MHz, HARDWARE.md §1.3) also needs the device's clock. Returns row or nil, reason.
local function generic_match(device, label)
  local arch, units, bytes = device.arch, device.sm_count, device.memory_bytes
  if type(arch) ~= 'string' or math.type(units) ~= 'integer' or type(bytes) ~= 'number' then
    return nil, label .. ': generic name and no architecture, CU count and memory to identify '
      .. 'it by (no MFU)'
  end
  local gib = bytes / 2 ^ 30
  local found
  for _, row in ipairs(ROWS) do
    local per = row.devices_per_package or 1
    if row.vendor == 'amd' and row.arch == arch and row.sm_count
      and units == row.sm_count // per
      and math.abs(gib - row.memory_gb / per) <= 0.03 * row.memory_gb / per then
      if found then
        return nil, string.format('%s: generic name; %s and %s both have %d CUs and %.0f GiB '
          .. '(no MFU)', label, found.id, row.id, units, gib)
      end
      found = row
    end
  end
  if not found then
    return nil, string.format('%s: generic name; no catalog row has %s, %d CUs and %.0f GiB '
      .. '(no MFU)', label, arch, units, gib)
  end
  for _, twin in ipairs(found.twins or {}) do
    local mhz = device.clock_mhz
    if type(mhz) ~= 'number' then
      return nil, string.format('%s: generic name; %s, %d CUs and %.0f GiB fit %s and %s, and '
        .. 'no clock was reported to tell them apart (no MFU)', label, arch, units, gib,
        found.id, twin.name)
    end
    if math.abs(mhz - found.clock_mhz) > 0.02 * found.clock_mhz then
      return nil, string.format('%s: generic name; %s, %d CUs, %.0f GiB at %s MHz is not %s '
        .. '(%d MHz)%s (no MFU)', label, arch, units, gib, tostring(mhz), found.id,
        found.clock_mhz, math.abs(mhz - twin.clock_mhz) <= 0.02 * twin.clock_mhz
          and (', it looks like an ' .. twin.name .. ', not in the catalog') or '')
    end
  end
  return found
end

--- Maps a probed device (tp.gpu.probe().devices[i]) to its catalog row by name and
--- architecture. Never guesses: an unknown or ambiguous device gives nil and a diagnostic, so
--- no MFU is computed against another GPU's peak. A device with fewer SMs/CUs than the full
--- chip (MIG instance, compute partition, one MI250X GCD) gets peaks scaled by visible/full
--- units (HARDWARE.md §1.3); `scale` and `partition` say so.
---```lua
---local row, why = tp.hardware.match(probe.devices[1])
---if row then print(row.id, row.peak_tflops.bf16) else print(why) end
---```
---@param device table {name=, arch=, sm_count=, vendor=}
--- Names are compared case-insensitively with '-', '_' and '/' as spaces. A device named only
--- "AMD Radeon Graphics" (or its gfx target) is identified by architecture, full CU count and
--- memory (and clock, where a part outside the catalog shares the rest); `identified_by` says
--- 'name' or 'arch'.
---@return table|nil row copy of the row with scaled peak_tflops, scale=, partition=,
---  identified_by=
---@return string? diagnostic
function M.match(device)
  if type(device) ~= 'table' then
    error(string.format('tp.hardware.match: device table expected, got %s', type(device)), 2)
  end
  local name, arch = device.name, device.arch
  local label = string.format("device '%s' (%s)", tostring(name or '?'), tostring(arch or '?'))
  if type(name) ~= 'string' or name == '' then
    return nil, label .. ': no name reported, cannot identify it (no MFU)'
  end
  local cname = canonical(name)
  local hits = {}
  for _, row in ipairs(ROWS) do
    if name_matches(row, cname) then
      hits[#hits + 1] = row
    end
  end
  local by_arch = false
  if #hits == 0 and is_generic(cname) then
    local row, why = generic_match(device, label)
    if not row then
      return nil, why
    end
    hits[1], by_arch = row, true
  end
  if #hits == 0 then
    return nil, label .. ': not in the hardware catalog (no MFU); known: '
      .. table.concat(M.ids(), ', ')
  end
  if #hits > 1 then
    local ids = {}
    for i, r in ipairs(hits) do
      ids[i] = r.id
    end
    return nil, label .. ': ambiguous, matches ' .. table.concat(ids, ', ') .. ' (no MFU)'
  end
  local row = hits[1]
  if arch and arch ~= row.arch then
    return nil, string.format('%s: named like %s but reports %s, not %s (no MFU)', label,
      row.id, arch, row.arch)
  end
  local r = public(row)
  r.scale, r.partition = 1, false
  r.identified_by = by_arch and 'arch' or 'name'
  if by_arch then
    r.notes = (r.notes and r.notes .. '; ' or '') .. string.format(
      "the device's name '%s' is generic: identified by %s, %d CUs and its memory", name, arch,
      device.sm_count)
  end
  local units = device.sm_count
  if units and row.sm_count then
    if units > row.sm_count then
      return nil, string.format('%s: reports %d %s, more than the %d of %s (no MFU)', label,
        units, device.vendor == 'amd' and 'CUs' or 'SMs', row.sm_count, row.id)
    end
    if units < row.sm_count then
      r.scale = units / row.sm_count
      r.partition = true
      r.visible_units = units
      for p, v in pairs(r.peak_tflops) do
        r.peak_tflops[p] = v * r.scale
      end
      for p, v in pairs(r.peak_tflops_sparse) do
        r.peak_tflops_sparse[p] = v * r.scale
      end
    end
  elseif not row.sm_count then
    r.notes = (r.notes and r.notes .. '; ' or '')
      .. 'full-chip unit count unknown: peaks not scaled for partitions'
  else
    r.notes = (r.notes and r.notes .. '; ' or '')
      .. 'the device reported no unit count: peaks assume the full chip'
  end
  return r
end

--- Sets the price per GPU-hour (USD) used by cost figures for `id`; it is labelled as an
--- assumption wherever it is used. `nil` removes it. The catalog ships no prices.
---@param id string
---@param usd number|nil
---@param note? string where the figure comes from (shown with it)
function M.set_price(id, usd, note)
  if not BY_ID[id] then
    error(string.format("tp.hardware.set_price: no catalog row '%s'", tostring(id)), 2)
  end
  if usd ~= nil and (type(usd) ~= 'number' or usd < 0 or usd ~= usd) then
    error('tp.hardware.set_price: price must be a non-negative number', 2)
  end
  if note ~= nil and type(note) ~= 'string' then
    error('tp.hardware.set_price: note must be a string', 2)
  end
  prices[id] = usd and { usd = usd, note = note or 'set by the user' } or nil
end

--- Returns the price per GPU-hour set for `id` and its label, or nil when none is set.
---@param id string
---@return number|nil usd
---@return table? label {assumption = true, note=}
function M.price(id)
  local p = prices[id]
  if not p then
    return nil
  end
  return p.usd, { assumption = true, note = p.note }
end

return M
