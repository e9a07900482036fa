-- tplua probe [--json]: the GPUs of this machine, the libraries that answered (or why not),
-- their versions, and the catalog row (with peaks) each device matches.
local cli = require('tp.cli')
local gpu = require('tp.gpu')
local hardware = require('tp.catalog.hardware')

local M = {
  summary = 'show the GPUs, their driver/runtime stacks and catalog peaks',
  usage = [[
usage: tplua probe [--json] [--timeout SECONDS] [--libpath DIRS]

Asks NVML, the CUDA driver and runtime, HIP, ROCm SMI, NCCL and RCCL (each in a child process)
and prints the devices found, each library's answer and versions, and the hardware catalog row
each device matches with its peak dense TFLOP/s, then the environment inventory run records
carry (OS, kernel, tplua, the container, the NCCL_/RCCL_/HSA_/TORCH_ variables; with --python,
that interpreter's torch). A machine without GPUs is not an error: the command says so and
exits 0.

  --json             machine output: {devices, backends, inventory, environment}
  --timeout SECONDS  kill a library's probe after this long (default 20)
  --python PATH      also ask this interpreter for its Python, torch, CUDA/HIP and NCCL versions
  --libpath DIRS     ':'-separated directories searched instead of the system's
                     (default $TPLUA_GPU_LIBPATH)

Environment: TPLUA_CUDART, TPLUA_CUDA, TPLUA_NVML, TPLUA_HIP, TPLUA_RSMI, TPLUA_NCCL,
TPLUA_RCCL name a library file to try first; CUDA_HOME / CUDA_PATH and ROCM_PATH / HIP_PATH add
toolkit directories.]],
}

local PEAK_ORDER = { 'bf16', 'fp8', 'tf32', 'fp32' }

-- Attaches the catalog match to each device: `catalog` (id, peaks, scale) or `catalog_note`.
local function add_catalog(devices)
  for _, d in ipairs(devices) do
    local row, why = hardware.match(d)
    if row then
      d.catalog = {
        id = row.id,
        name = row.name,
        peak_tflops = row.peak_tflops,
        scale = row.scale,
        partition = row.partition,
      }
    else
      d.catalog_note = why
    end
  end
end

local function gib(bytes)
  return bytes and string.format('%.1f GiB', bytes / 2 ^ 30) or '?'
end

local function peaks_text(peaks)
  local parts = {}
  for _, p in ipairs(PEAK_ORDER) do
    if peaks[p] then
      parts[#parts + 1] = string.format('%s %g', p, math.floor(peaks[p] * 10 + 0.5) / 10)
    end
  end
  return table.concat(parts, ', ') .. ' TFLOP/s'
end

local function print_devices(devices)
  local rows = { { '#', 'name', 'arch', 'units', 'memory', 'clock', 'PCI bus', 'via' } }
  for _, d in ipairs(devices) do
    rows[#rows + 1] = {
      tostring(d.index), d.name or '?', d.arch or '?',
      d.sm_count and string.format('%d %s', d.sm_count, d.unit_name) or '?',
      gib(d.memory_bytes),
      d.clock_mhz and string.format('%d MHz', math.floor(d.clock_mhz + 0.5)) or '?',
      d.pci_bus_id or '?', d.api,
    }
  end
  local widths = {}
  for _, r in ipairs(rows) do
    for i, cell in ipairs(r) do
      widths[i] = math.max(widths[i] or 0, #cell)
    end
  end
  for ri, r in ipairs(rows) do
    local cells = {}
    for i, cell in ipairs(r) do
      cells[i] = cell .. string.rep(' ', widths[i] - #cell)
    end
    io.stdout:write('  ', table.concat(cells, '  '):gsub('%s+$', ''), '\n')
    if ri > 1 then
      local d = devices[ri - 1]
      local pad = string.rep(' ', widths[1] + 2)
      if d.catalog then
        local scaled = d.catalog.partition
            and string.format(' (partition: x%.3f of the full chip)', d.catalog.scale) or ''
        io.stdout:write('  ', pad, 'catalog: ', d.catalog.id, ', ',
          peaks_text(d.catalog.peak_tflops), scaled, '\n')
      else
        io.stdout:write('  ', pad, 'catalog: ', d.catalog_note, '\n')
      end
      if (d.process_count or 0) > 0 then
        local list = {}
        for _, p in ipairs(d.processes or {}) do
          list[#list + 1] = p.memory and string.format('pid %d (%.1f GiB)', p.pid,
            p.memory / 2 ^ 30) or string.format('pid %d', p.pid)
        end
        io.stdout:write('  ', pad, string.format('in use: %d process(es)%s\n', d.process_count,
          #list > 0 and (': ' .. table.concat(list, ', ')) or ''))
      end
      if d.error then
        io.stdout:write('  ', pad, 'errors: ', d.error, '\n')
      end
    end
  end
end

local function print_backends(backends)
  for _, name in ipairs(gpu.APIS) do
    local b = backends[name]
    local versions = {}
    for _, k in ipairs({ { 'driver_version', 'driver' }, { 'cuda_version', 'CUDA' },
      { 'runtime_version', 'runtime' }, { 'version', 'version' } }) do
      if b[k[1]] then
        versions[#versions + 1] = k[2] .. ' ' .. b[k[1]]
      end
    end
    local detail
    if b.status == 'ok' then
      detail = (b.device_count and (b.device_count .. ' devices, ') or '')
        .. table.concat(versions, ', ') .. ' (' .. (b.library or '?') .. ')'
    else
      detail = b.reason or '?'
      if #versions > 0 then
        detail = detail .. ' [' .. table.concat(versions, ', ') .. ']'
      end
    end
    io.stdout:write(string.format('  %-7s %-9s %s\n', name, b.status, detail))
  end
end

local function print_inventory(inv)
  local labels = {
    { 'nvidia_driver', 'NVIDIA driver' }, { 'cuda_driver', 'CUDA (driver)' },
    { 'cuda_runtime', 'CUDA runtime' }, { 'hip_runtime', 'HIP runtime' },
    { 'amdgpu_driver', 'amdgpu driver' }, { 'rocm_smi', 'ROCm SMI' },
    { 'nccl', 'NCCL' }, { 'rccl', 'RCCL' },
  }
  local parts = {}
  for _, l in ipairs(labels) do
    if inv[l[1]] then
      parts[#parts + 1] = l[2] .. ' ' .. inv[l[1]]
    end
  end
  io.stdout:write('versions: ', #parts > 0 and table.concat(parts, ', ') or 'none found', '\n')
end

-- Marks the lists that must stay JSON arrays when empty.
local function json_value(probe, json)
  for _, b in pairs(probe.backends) do
    json.array(b.tried)
  end
  return {
    devices = json.array(probe.devices),
    backends = probe.backends,
    inventory = probe.inventory,
    environment = probe.environment,
  }
end

-- The machine's environment inventory (tp.provenance), as run records carry it; with `python`,
-- also that interpreter's versions and its torch's (importing torch takes a second or so).
local function environment(probe, python)
  local inv = require('tp.run.provenance').inventory({ probe = probe, python = python })
  return require('tp.secrets').new({}):value(inv)
end

function M.run(args)
  local opts, rest = cli.parse(args, { json = 'boolean', timeout = 'number', libpath = 'string',
    python = 'string', help = 'boolean' })
  if not opts then
    return cli.usage_error('probe', rest, M.usage)
  end
  if opts.help then
    print(M.usage)
    return 0
  end
  if #rest > 0 then
    return cli.usage_error('probe', "unexpected argument '" .. rest[1] .. "'", M.usage)
  end
  if opts.timeout and not (opts.timeout > 0 and opts.timeout <= 3600) then
    return cli.usage_error('probe', '--timeout must be in (0, 3600] seconds', M.usage)
  end
  local probe, err = gpu.probe({ timeout = opts.timeout, libpath = opts.libpath })
  if not probe then
    io.stderr:write('tplua probe: ', err, '\n')
    return 1
  end
  add_catalog(probe.devices)
  probe.environment = environment(probe, opts.python)
  if opts.json then
    local json = require('tp.json')
    local text, jerr = json.encode(json_value(probe, json), { pretty = true, sort_keys = true })
    if not text then
      io.stderr:write('tplua probe: ', jerr, '\n')
      return 1
    end
    io.stdout:write(text, '\n')
    return 0
  end
  local n = #probe.devices
  if n == 0 then
    io.stdout:write(string.format('no GPU found (%d libraries asked in %.2f s; their answers '
      .. 'below)\n', #gpu.APIS, probe.elapsed_s))
  else
    io.stdout:write(string.format('%d GPU%s found (in %.2f s)\n', n, n == 1 and '' or 's',
      probe.elapsed_s))
    print_devices(probe.devices)
  end
  io.stdout:write('libraries:\n')
  print_backends(probe.backends)
  print_inventory(probe.inventory)
  local e = probe.environment
  local py = type(e.python) == 'table' and e.python
  io.stdout:write(string.format('environment: %s, kernel %s, tplua %s%s%s\n',
    e.system.os or '?', e.system.kernel or '?', e.system.tplua or '?',
    py and string.format(', Python %s (%s)', py.python or '?', py.torch and ('torch ' .. py.torch)
      or (py.torch_error or py.error or 'no torch')) or '',
    e.container and (', in a ' .. e.container.runtime .. ' container') or ''))
  return 0
end

return M
