-- tp.run._telemetry: GPU telemetry of runs: the probe made once for a series of runs, and the
-- summary of a sampler's readings over one run's window (power, memory, energy).
local json = require('tp.json')
local is_finite = require('tp.run._base').is_finite

local M = {}

local function probe_reason(probe)
  local parts = {}
  for _, api in ipairs({ 'nvml', 'rsmi', 'cuda', 'hip' }) do
    local b = probe.backends and probe.backends[api]
    if b and b.reason then
      parts[#parts + 1] = api .. ': ' .. tostring(b.reason)
    end
  end
  if #parts == 0 then
    return 'no GPU found'
  end
  return 'no GPU found (' .. table.concat(parts, '; ') .. ')'
end

--- Probes the GPUs once for a series of runs. Returns {devices=, platform=, reason=} where
--- `reason` says why there is no telemetry (nil when devices were found).
---@param opts? {telemetry?: boolean}
---@return table
function M.probe_gpus(opts)
  if opts and opts.telemetry == false then
    return { devices = {}, platform = nil, reason = 'telemetry turned off' }
  end
  local ok, gpu = pcall(require, 'tp.gpu')
  if not ok then
    return { devices = {}, reason = 'tp.gpu unavailable: ' .. tostring(gpu) }
  end
  local probe, err = gpu.probe()
  if not probe then
    return { devices = {}, reason = 'GPU probe failed: ' .. tostring(err) }
  end
  if #probe.devices == 0 then
    return { devices = {}, reason = probe_reason(probe), probe = probe }
  end
  local first = probe.devices[1]
  local out = { devices = probe.devices, probe = probe,
    platform = first.vendor == 'amd' and 'amd' or 'nvd' }
  local hok, hardware = pcall(require, 'tp.catalog.hardware')
  if hok then
    local row = hardware.match(first)
    out.hardware = row and row.id or nil
  end
  return out
end

-- Summary of the sampler's readings inside [t0, t1]: mean/max power, max memory, energy.
function M.summary(sampler, t0, t1, concurrent)
  local samples, err = sampler:samples()
  if not samples then
    return { measured = false, reason = 'no GPU telemetry: ' .. tostring(err) }
  end
  local per_dev, max_power, max_mem, n = {}, nil, nil, 0
  for _, x in ipairs(samples) do
    if x.t >= t0 and x.t <= t1 then
      n = n + 1
      local d = per_dev[x.device] or { sum = 0, count = 0 }
      per_dev[x.device] = d
      if is_finite(x.power_w) then
        d.sum, d.count = d.sum + x.power_w, d.count + 1
        max_power = math.max(max_power or x.power_w, x.power_w)
      end
      if is_finite(x.memory_used) then
        max_mem = math.max(max_mem or x.memory_used, x.memory_used)
      end
    end
  end
  local devices = #sampler:devices()
  local out = {
    measured = true,
    source = 'telemetry',
    samples = n,
    devices = devices,
    window_s = t1 - t0,
    max_power_w = max_power or json.null,
    max_memory_used_gib = max_mem and max_mem / 1073741824 or json.null,
  }
  local total_mean, any = 0, false
  for _, d in pairs(per_dev) do
    if d.count > 0 then
      total_mean, any = total_mean + d.sum / d.count, true
    end
  end
  out.avg_power_w = any and total_mean or json.null
  out.avg_power_w_per_gpu = any and devices > 0 and total_mean / devices or json.null
  local joules, details = sampler:energy_j({ from = t0, to = t1 })
  if joules then
    out.energy_j = joules
    out.energy_j_per_gpu = devices > 0 and joules / devices or json.null
    out.energy_method = details.method
  else
    out.energy_j = json.null
    out.energy_note = tostring(details)
  end
  if concurrent and concurrent > 1 then
    out.note = string.format('%d runs shared the devices during this window', concurrent)
  end
  return out
end

return M
