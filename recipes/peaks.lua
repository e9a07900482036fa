-- Measured peaks: what this machine achieves, measured with torch (tools/peaks/peaks.py), so
-- that a trace's GEMMs and copies can be put against the measured limit beside the datasheet's:
-- the model's own GEMM shapes (QKV, attention output, the MLP's up/gate and down projections,
-- the LM head; M = micro-batch x sequence length; forward, dX and dW) in the training
-- precision, a square GEMM in bf16, fp16, fp32, tf32 and fp8 (torch._scaled_mm, where the GPU
-- has it), and the device memory bandwidth. On the first GPU torch sees (CUDA or ROCm), else on
-- the CPU with every GEMM dimension capped at 1024 (a few seconds). One normal run record with a
-- `peaks` section (docs/peaks.md):
--
--   tplua plan recipes/peaks.lua        # the shapes and the exact command
--   tplua run recipes/peaks.lua [--results DIR]
--
-- The model and shapes from the environment (defaults: the flagship's):
--   TPLUA_PEAKS_MODEL      a tp.catalog model id (llama3.1-8b)
--   TPLUA_PEAKS_MBS        micro-batch size (2)
--   TPLUA_PEAKS_SEQ_LEN    sequence length (2048)
--   TPLUA_PEAKS_PRECISION  precision of the model's GEMMs: bf16, fp16, fp32, tf32, fp8 (bf16)
--   TPLUA_PEAKS_TP         tensor parallelism: the shard of each GEMM one GPU computes (1)
-- TPLUA_PYTHON names the interpreter (default /usr/bin/python3). A finished run is not run
-- again in the same results directory: give another --results to measure again.
local tp = require('tp')

local peaks = tp.frameworks.get('peaks')

local function env_int(name, default)
  local v = os.getenv(name)
  if v == nil or v == '' then
    return default
  end
  local n = math.tointeger(tonumber(v))
  if not n or n < 1 then
    error(string.format('recipes/peaks.lua: %s must be a whole number >= 1, got %s', name, v), 0)
  end
  return n
end

local function env_str(name, default)
  local v = os.getenv(name)
  return (v ~= nil and v ~= '') and v or default
end

local config = peaks.config({
  model = env_str('TPLUA_PEAKS_MODEL', peaks.DEFAULTS.model),
  mbs = env_int('TPLUA_PEAKS_MBS', peaks.DEFAULTS.mbs),
  seq_len = env_int('TPLUA_PEAKS_SEQ_LEN', peaks.DEFAULTS.seq_len),
  precision = env_str('TPLUA_PEAKS_PRECISION', peaks.DEFAULTS.precision),
  tp = env_int('TPLUA_PEAKS_TP', peaks.DEFAULTS.tp),
})
local ok, cmd = pcall(peaks.build, config)
if not ok then
  error('recipes/peaks.lua: ' .. tostring(cmd), 0)
end

return tp.campaign({
  name = 'measured peaks',
  results = 'output/peaks',
  runs = { {
    id = string.format('peaks-%s-%s', config.model, config.training.precision),
    argv = cmd.argv,
    env = cmd.env,
    framework = peaks.name,
    config = config,
    outputs = cmd.outputs,
    iterations = cmd.iterations,
    timeout = 1800,
  } },
})
