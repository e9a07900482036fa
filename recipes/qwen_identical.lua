-- Qwen 2.5 7B, identical config on 8 x MI300X (Primus) and 8 x H100 (Megatron-LM): the same
-- seed, data, schedule, batch sizes, precision and parallelism everywhere. Qwen 2.5 7B has 28
-- attention heads and 4 KV heads, so tensor parallelism can only be 1, 2 or 4.
local tp = require('tp')

return tp.experiment.main({
  name = 'qwen2.5-7b-identical',
  description = 'Qwen 2.5 7B pre-training, identical configuration on MI300X (Primus) and H100 '
    .. '(Megatron-LM)',
  model = 'qwen2.5-7b',
  methodology = 'identical_config',
  platforms = {
    amd = { framework = 'primus', hardware = 'mi300x' },
    nvd = { framework = 'megatron', hardware = 'h100-sxm' },
  },
  training = {
    seed = 42, mbs = 1, gbs = 64, seq_len = 2048, iters = 500,
    lr = 3e-4, min_lr = 0, warmup = 50, decay = 'cosine',
    weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, grad_clip = 1.0,
    precision = 'bf16', dataset = 'bc', init_std = 0.02,
  },
  parallelism = { tp = 1, pp = 1, dp = 8, distributed_optimizer = true },
  system = { recompute = 'none', attention = 'auto' },
  nodes = 1,
  gpus_per_node = 8,
  repeats = 3,
  options = {
    warmup = { desc = 'learning-rate warm-up iterations (training.warmup)', default = 50,
               key = 'training.warmup' },
  },
  results = 'output/qwen2.5-7b-identical',
})
