-- Writes N small, valid run records (tplua.run/2, no per-iteration arrays) for the history's
-- benchmark and fault test: 20 series (2 platforms x 10 global batch sizes), one run per series
-- a night, tokens/s with 1.5% noise. Seeded: the same arguments give the same files.
--
--   build/tplua bench/history/records.lua DIR N [SEED]
local json = require('tp.json')
local fs = require('tp.fs')

local dir, n, seed = arg[1], math.tointeger(tonumber(arg[2] or '')), tonumber(arg[3] or '1')
if not dir or not n or n < 1 then
  io.stderr:write('usage: tplua bench/history/records.lua DIR N [SEED]\n')
  os.exit(2)
end
assert(fs.mkdir_p(dir))

-- xorshift32 with Box-Muller normals: the same numbers on every machine.
local state = math.tointeger(seed * 2654435761 % 4294967296) or 1
local function uniform()
  state = state ~ ((state << 13) & 0xffffffff)
  state = state ~ (state >> 17)
  state = state ~ ((state << 5) & 0xffffffff)
  return (state % 16777216 + 0.5) / 16777216
end
local function normal()
  return math.sqrt(-2 * math.log(uniform())) * math.cos(2 * math.pi * uniform())
end

local PLATFORMS = {
  { name = 'amd', framework = 'primus', hardware = 'mi300x', gpu = 'AMD Instinct MI300X',
    step = 1.61 },
  { name = 'nvd', framework = 'megatron', hardware = 'h100-sxm', gpu = 'NVIDIA H100 80GB HBM3',
    step = 1.90 },
}
local START = 1767225600 -- 2026-01-01T00:00:00Z
local SERIES = 20

for i = 1, n do
  local s = (i - 1) % SERIES
  local night = (i - 1) // SERIES
  local p = PLATFORMS[s % 2 + 1]
  local gbs = 64 * (s // 2 + 1)
  local step = p.step * gbs / 64 * (1 + 0.015 * normal())
  local tokens = gbs * 2048 / step
  local t = START + night * 86400 + s * 60
  local id = string.format('%s-%s-gbs%d-n%05d', p.name, p.framework, gbs, night)
  local rec = {
    schema = 'tplua.run/2', run_id = id, platform = p.name, framework = p.framework,
    model = 'llama3.1-8b', methodology = 'identical_config', experiment = 'bench-history',
    ['repeat'] = 1, status = 'completed', dataset = 'bc',
    gpu_info = { device_name = p.gpu, device_count = 8, hardware = p.hardware },
    training_config = { global_batch_size = gbs, micro_batch_size = 2, sequence_length = 2048,
      num_gpus = 8, precision = 'bf16', tensor_parallel_size = 1, pipeline_parallel_size = 1,
      data_parallel_size = 8, max_steps = 100 },
    performance_metrics = { avg_step_time_seconds = step, std_step_time_seconds = step * 0.01,
      tokens_per_second = tokens, tokens_per_second_per_gpu = tokens / 8,
      steady_state = { method = 'mser-5', records = 95, first_iteration = 6 } },
    memory_metrics = { peak_memory_allocated_gib = 60 + gbs / 64 },
    loss_values = { 11.5, 6.0 + 0.01 * normal() },
    source = { started_at = os.date('!%Y-%m-%dT%H:%M:%SZ', t) },
    environment = { schema = 'tplua.environment/1',
      python = { torch = night < 200 and '2.4.1' or '2.5.1' },
      framework = { name = p.framework, version = '0.9.0' } },
    diagnostics = json.array(),
  }
  -- Plain writes: these are inputs to read, not results to keep (no fsync per file).
  local f = assert(io.open(string.format('%s/%s.json', dir, id), 'wb'))
  assert(f:write(assert(json.encode(rec)), '\n'))
  assert(f:close())
end
