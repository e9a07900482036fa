-- Llama 3.1 8B, maximum performance: the same training (seed, data, schedule, global batch,
-- sequence length, precision) on both platforms, while each platform tunes its system settings
-- (parallelism, micro-batch, recompute) by a sweep. The comparison reports each platform's best
-- configuration with its settings. Sweep points whose memory estimate exceeds the GPU are left
-- out of the plan (--no-prune keeps them).
local tp = require('tp')

-- Both platforms sweep the same knobs; the memory estimate prunes what cannot fit on each.
local function system_sweep()
  return tp.sweep({
    axes = {
      { 'parallelism.tp', { 1, 2 } },
      { 'training.mbs', { 1, 2, 4 } },
      { 'system.recompute', { 'none', 'selective' } },
    },
    -- Recompute only pays when memory is short: skip it where the plain setting fits easily.
    filter = function(cfg)
      local est = tp.memory.for_config(cfg)
      return cfg.system.recompute == 'none' or est.bytes.total > 60 * tp.memory.GIB
    end,
    order = { 'parallelism.tp', 'training.mbs' },
  })
end

return tp.experiment.main({
  name = 'llama3.1-8b-max-perf',
  description = "Llama 3.1 8B pre-training, each platform's best system settings",
  model = 'llama3.1-8b',
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
  parallelism = { tp = 1, pp = 1, distributed_optimizer = true },
  nodes = 1,
  gpus_per_node = 8,
  repeats = 2,
  results = 'output/llama3.1-8b-max-perf',
})
