-- Nightly run records to try the history with (and the history specs' data): one tplua.run/2
-- record a night, built as `tplua run` builds it (tp.record.from_log on a Megatron-LM-format
-- log of the night's training steps, then config_hash, campaign, energy_metrics and the
-- environment inventory of tp.run.provenance), one day apart. The software stack changes at
-- one night (ROCm and torch on AMD, CUDA and torch on NVIDIA) and the step time may grow there,
-- so tokens/s drops by a chosen fraction. Seeded: the same options give the same files.
--
--   tplua examples/history/nightly.lua /tmp/nightly    40 nights of MI300X (ROCm 6.2.4 -> 6.3.1
--                                                      on 26 March, tokens/s 4% lower from then)
--                                                      and of H100 (CUDA and NCCL changed on 20
--                                                      March, same speed), in /tmp/nightly/amd, nvd
--   local nightly = dofile('examples/history/nightly.lua')     -- as a module
--   local info = nightly.write(dir, { nights = 40, change_at = 26, drop = 0.04 })
local json = require('tp.json')
local record = require('tp.parse.record')
local log = require('tp.parse.log')
local times = require('tp.parse.time')

local M = {}

local DAY = 86400

--- A seeded generator: rng(seed).uniform() in (0, 1), .normal() standard normal (tp.stats.rng).
local rng = require('tp.stats').rng
M.rng = rng

-- Seconds since 1970 of a UTC date 'YYYY-MM-DD' at `hour`.
local function epoch_of(date, hour)
  return assert(times.parse(date), date) + hour * 3600
end
M.epoch_of = epoch_of

local function iso(t)
  return os.date('!%Y-%m-%dT%H:%M:%SZ', math.floor(t))
end

-- The platforms: GPU, step time of the flagship config (examples/runs/generate.lua), stacks.
M.PLATFORMS = {
  amd = {
    hardware = 'mi300x', step_s = 1.6121, host = 'mi300x-node-01',
    stacks = {
      {
        gpu_stack = { amdgpu_driver = '6.8.5', hip_runtime = '6.2.41134-65d174c3e',
          rocm_smi = '7.3.0', rccl = '2.20.5' },
        python = { torch = '2.4.1+rocm6.2.4', torch_hip = '6.2.41134-65d174c3e' },
        container = { runtime = 'docker', image = 'rocm/megatron-lm:v25.2',
          rocm_version = '6.2.4' },
      },
      {
        gpu_stack = { amdgpu_driver = '6.8.5', hip_runtime = '6.3.42131-fa1d09cbd',
          rocm_smi = '7.4.0', rccl = '2.21.5' },
        python = { torch = '2.5.0+rocm6.3.1', torch_hip = '6.3.42131-fa1d09cbd' },
        container = { runtime = 'docker', image = 'rocm/megatron-lm:v25.3',
          rocm_version = '6.3.1' },
      },
    },
    env = { HSA_NO_SCRATCH_RECLAIM = '1', NCCL_MIN_NCHANNELS = '112', TORCH_NCCL_HIGH_PRIORITY =
      '1', CUDA_DEVICE_MAX_CONNECTIONS = '1' },
    power_limit_w = 750,
  },
  nvd = {
    hardware = 'h100-sxm', step_s = 1.8838, host = 'h100-node-07',
    stacks = {
      {
        gpu_stack = { nvidia_driver = '550.54.15', cuda_driver = '12.4', cuda_runtime = '12.4',
          nccl = '2.21.5' },
        python = { torch = '2.4.0a0+3bcc3cddb5.nv24.07', torch_cuda = '12.5',
          torch_nccl = '2.21.5' },
        container = { runtime = 'docker', image = 'nvcr.io/nvidia/pytorch:24.07-py3',
          nvidia_pytorch_version = '24.07' },
      },
      {
        gpu_stack = { nvidia_driver = '550.54.15', cuda_driver = '12.4', cuda_runtime = '12.6',
          nccl = '2.23.4' },
        python = { torch = '2.5.0a0+e000cf0ad9.nv24.10', torch_cuda = '12.6',
          torch_nccl = '2.23.4' },
        container = { runtime = 'docker', image = 'nvcr.io/nvidia/pytorch:24.10-py3',
          nvidia_pytorch_version = '24.10' },
      },
    },
    env = { CUDA_DEVICE_MAX_CONNECTIONS = '1', NCCL_IB_DISABLE = '0',
      TORCH_NCCL_AVOID_RECORD_STREAMS = '1' },
    power_limit_w = 700,
  },
}

local GBS, SEQ, GPUS, ITERS = 64, 2048, 8, 30
M.GBS, M.SEQ, M.GPUS = GBS, SEQ, GPUS

-- The environment inventory (docs/gpu.md) of a night: the platform's stack `k`.
local function environment(p, k)
  local s = p.stacks[k]
  local python = { python = '3.10.14', executable = '/opt/conda/envs/py_3.10/bin/python3',
    packages = { ['megatron-core'] = '0.10.0', ['transformer-engine'] = '1.12.0' } }
  for key, v in pairs(s.python) do
    python[key] = v
  end
  local devices = json.array()
  for i = 1, GPUS do
    devices[i] = i
  end
  return {
    schema = 'tplua.environment/1',
    system = { host = p.host, kernel = '5.15.0-119-generic', os = 'Ubuntu 22.04.4 LTS',
      tplua = '0.1.0' },
    gpu_stack = s.gpu_stack,
    gpu_state = { { name = p.hardware, power_limit_w = p.power_limit_w, ecc = true,
      persistence = true, devices = devices } },
    python = python,
    framework = { name = 'megatron', dir = '/workspace/Megatron-LM', version = '0.10.0',
      commit = '6c6b2ae6d0c2c6cb1c1bdb5a8c4a7ea0f4fd1c2b', describe = 'core_r0.10.0' },
    container = s.container,
    env = p.env,
  }
end

-- A Megatron-LM log of `steps` (seconds), starting at epoch `t0`.
local function megatron_log(steps, t0)
  local lines = {
    string.format('using world size: %d, data-parallel size: %d, context-parallel size: 1, '
      .. 'tensor-model-parallel size: 1, pipeline-model-parallel size: 1', GPUS, GPUS),
    'training ...',
  }
  local now = t0 + 25
  local consumed = 0
  for i, s in ipairs(steps) do
    now = now + s
    consumed = consumed + GBS
    local loss = 5.2 + 6.62 * (1 + i / 3) ^ -0.45
    lines[#lines + 1] = string.format(' [%s] iteration %8d/%8d | consumed samples: %12d | '
      .. 'elapsed time per iteration (ms): %.1f | learning rate: %.6E | global batch size: %5d '
      .. '| lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | number of skipped iterations: '
      .. '%3d | number of nan iterations: %3d |', os.date('!%Y-%m-%d %H:%M:%S', math.floor(now)),
      i, ITERS, consumed, s * 1000, 3e-4, GBS, loss, 1.2, 0, 0)
  end
  lines[#lines + 1] = string.format('[after training is done] datetime: %s ',
    os.date('!%Y-%m-%d %H:%M:%S', math.floor(now + 1)))
  return table.concat(lines, '\n') .. '\n', now + 1
end

--- Writes the records of `opts.nights` nights (40) from `opts.start` ('2026-03-01', runs at
--- 02:00 UTC) into `dir`, one file per night: the stack switches at night `opts.change_at`
--- (26; nil: never) and tokens/s drops there by `opts.drop` (a fraction, 0 = none); run to run
--- the throughput varies by `opts.noise` (0.01, normal). `opts.platform` 'amd' or 'nvd';
--- `opts.config_hash` the series' config hash. Returns {paths, times, run_ids, change_time,
--- change_run_id, config_hash}.
---@param dir string
---@param opts? table
---@return table
function M.write(dir, opts)
  opts = opts or {}
  local nights = opts.nights or 40
  local change_at = opts.change_at == nil and 26 or opts.change_at
  local drop = opts.drop or 0
  local noise = opts.noise or 0.01
  local platform = opts.platform or 'amd'
  local p = assert(M.PLATFORMS[platform], platform)
  local hash = opts.config_hash or '3f9c0e2a71b4'
  local g = rng(opts.seed or 20260301)
  local start = epoch_of(opts.start or '2026-03-01', 2)
  local out = { paths = {}, times = {}, run_ids = {}, config_hash = hash }
  for night = 1, nights do
    local changed = change_at and night >= change_at
    local t0 = start + (night - 1) * DAY
    -- The night's own level (machine, data order), then small step-to-step noise.
    local level = p.step_s * (1 + noise * g.normal()) / (changed and (1 - drop) or 1)
    local steps = {}
    for i = 1, ITERS do
      steps[i] = level * (1 + 0.002 * g.normal())
      if i == 1 then
        steps[i] = steps[i] + 20
      end
    end
    local text, t1 = megatron_log(steps, t0)
    local date = os.date('!%Y%m%d', t0)
    local run_id = string.format('%s-megatron-%s-%s', platform, hash, date)
    local parsed = assert(log.parse(text, { is_string = true }))
    local rec = record.from_log(parsed, {
      gbs = GBS, seq_len = SEQ, gpus = GPUS, path = run_id .. '.log',
      command = 'torchrun --nproc-per-node 8 pretrain_gpt.py ...', exit_status = 0,
      started_at = iso(t0), finished_at = iso(t1), platform = platform, framework = 'megatron',
      model = 'llama3.1-8b', dataset = 'bc', methodology = 'identical_config', ['repeat'] = 1,
      run_id = run_id, experiment = 'nightly-llama3.1-8b', hardware = p.hardware,
      precision = 'bf16',
    })
    rec.status = 'completed'
    rec.config_hash = hash
    rec.campaign = { attempt = 1, wall_s = t1 - t0, exit = { code = 0, signal = json.null,
      timed_out = false, stragglers = 0 }, rusage = json.null }
    rec.energy_metrics = { measured = false, reason = 'no GPU telemetry: not sampled' }
    rec.environment = environment(p, changed and 2 or 1)
    local path = string.format('%s/%s.json', dir, run_id)
    assert(record.save(rec, path))
    out.paths[night] = path
    out.times[night] = iso(t0)
    out.run_ids[night] = run_id
    if change_at == night then
      out.change_time, out.change_run_id = iso(t0), run_id
    end
  end
  return out
end

-- Run as a script: both platforms' nights under OUT (default /tmp/nightly).
if arg and type(arg[0]) == 'string' and arg[0]:match('nightly%.lua$') then
  local fs = require('tp.fs')
  local out = arg[1] or '/tmp/nightly'
  for _, spec in ipairs({ { 'amd', 26, 0.04 }, { 'nvd', 20, 0 } }) do
    local dir = fs.join(out, spec[1])
    assert(fs.mkdir_p(dir))
    local info = M.write(dir, { platform = spec[1], change_at = spec[2], drop = spec[3] })
    print(string.format('%s: %d nightly records in %s (stack change on %s)', spec[1],
      #info.paths, dir, info.change_time))
  end
end

return M
