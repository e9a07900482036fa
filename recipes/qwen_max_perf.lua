-- Qwen 2.5 7B, maximum performance: the algorithmic settings equal, each platform's system
-- settings found by a sweep over tensor parallelism (1, 2, 4: Qwen 2.5 7B's 4 KV heads allow no
-- more), micro-batch with recompute. Points that do not fit in memory are pruned.
local tp = require('tp')

local function system_sweep()
  return tp.sweep({
    axes = {
      { 'parallelism.tp', { 1, 2, 4 } },
    },
    -- Full recompute only together with a micro-batch it makes room for.
    zip = { { ['system.recompute'] = { 'none', 'none', 'full' },
              ['training.mbs'] = { 1, 2, 4 } } },
    order = { 'parallelism.tp', 'training.mbs' },
  })
end

return tp.experiment.main({
  name = 'qwen2.5-7b-max-perf',
  description = "Qwen 2.5 7B pre-training, each platform's best system settings",
  model = 'qwen2.5-7b',
  methodology = 'maximum_performance',
  platforms = {
    amd = { framework = 'primus', hardware = 'mi300x', sweep = system_sweep() },
    nvd = { framework = 'megatron', hardware = 'h100-sxm', sweep = system_sweep() },
  },
  training = {
    seed = 42, gbs = 128, mbs = 1, seq_len = 2048, iters = 200,
    lr = 3e-4, min_lr = 3e-5, warmup = 20, decay = 'cosine',
    weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, precision = 'bf16', dataset = 'bc',
  },
  parallelism = { tp = 1, pp = 1 },
  nodes = 1,
  gpus_per_node = 8,
  repeats = 2,
  results = 'output/qwen2.5-7b-max-perf',
})
