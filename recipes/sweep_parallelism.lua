-- Parallelism sweep on one platform: tensor parallelism x pipeline parallelism x micro-batch for
-- Llama 3.1 8B on 8 x H100 with Megatron-LM. Tensor parallelism always comes with sequence
-- parallelism (zipped axis). Layouts that do not divide the 8 GPUs, the attention heads or the
-- layers are left out with the reason; those whose memory estimate exceeds the GPU are pruned
-- (--no-prune keeps them). To sweep on MI300X instead, use
--   amd = { framework = 'primus', hardware = 'mi300x', sweep = parallelism_sweep }
-- as the platform entry below.
local tp = require('tp')

local parallelism_sweep = tp.sweep({
  axes = {
    { 'parallelism.pp', { 1, 2, 4 } },
    { 'training.mbs', { 1, 2, 4 } },
  },
  zip = {
    { { 'parallelism.tp', { 1, 2, 4, 8 } },
      { 'parallelism.sequence_parallel', { false, true, true, true } } },
  },
  -- Pipelining needs several micro-batches in flight: at least 2 per stage.
  constraints = {
    function(cfg)
      local p = cfg.parallelism
      local microbatches = cfg.training.gbs // (cfg.training.mbs * p.dp)
      if p.pp > 1 and microbatches < 2 * p.pp then
        return false, string.format('%d micro-batches for %d pipeline stages (need >= %d)',
          microbatches, p.pp, 2 * p.pp)
      end
      return true
    end,
  },
  order = { 'parallelism.tp', 'parallelism.pp', 'training.mbs' },
})

return tp.experiment.main({
  name = 'llama3.1-8b-parallelism',
  description = 'TP x PP x micro-batch sweep of Llama 3.1 8B on 8 x H100 (Megatron-LM)',
  model = 'llama3.1-8b',
  methodology = 'maximum_performance',
  platforms = {
    nvd = { framework = 'megatron', hardware = 'h100-sxm', sweep = parallelism_sweep },
  },
  training = {
    seed = 42, gbs = 64, mbs = 1, seq_len = 2048, iters = 100,
    lr = 3e-4, min_lr = 3e-5, warmup = 10, decay = 'cosine', precision = 'bf16',
    dataset = 'bc',
  },
  parallelism = { tp = 1, pp = 1 },
  nodes = 1,
  gpus_per_node = 8,
  repeats = 1,
  results = 'output/llama3.1-8b-parallelism',
})
