-- Llama 3.1 8B, identical config: the same training (seed, data, schedule, batch, precision)
-- and the same parallelism on 8 x MI300X with Primus and on 8 x H100 with Megatron-LM.
-- `tplua recipes/llama_identical.lua` plans both, runs the platform of this machine, then
-- compares with the results in output/llama3.1-8b-identical (or, while that holds none, with
-- the recorded illustration runs in examples/runs/llama3.1-8b-identical).
local tp = require('tp')

return tp.experiment.main({
  name = 'llama3.1-8b-identical',
  description = 'Llama 3.1 8B pre-training, identical configuration on MI300X (Primus) and '
    .. 'H100 (Megatron-LM)',
  model = 'llama3.1-8b',
  methodology = 'identical_config',
  platforms = {
    amd = { framework = 'primus', hardware = 'mi300x' },
    nvd = { framework = 'megatron', hardware = 'h100-sxm' },
  },
  training = {
    seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500,
    lr = 3e-4, min_lr = 0, warmup = 50, decay = 'cosine',
    weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, grad_clip = 1.0,
    precision = 'bf16', dataset = 'bc', init_std = 0.02, log_interval = 1,
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
  results = 'output/llama3.1-8b-identical',
  recorded = '../examples/runs/llama3.1-8b-identical',
})
