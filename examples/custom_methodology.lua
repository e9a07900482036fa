-- A custom methodology: "best_precision" keeps the data, schedule, batch and sequence length
-- equal but lets each platform pick its fastest numeric format (FP8 on H100 with a tensor-wise
-- recipe, BF16 on MI300X here) along with its own parallelism and system settings. Such a
-- comparison answers "how fast can each platform train this model", not "how fast is the same
-- computation": the loss curves are checked, the numerics are not identical.
--   tplua plan examples/custom_methodology.lua
local tp = require('tp')

-- Defined once per process (a recipe can be loaded several times, e.g. by tplua plan and a spec).
if not tp.methodology.get('best_precision') then
  tp.methodology.define({
    name = 'best_precision',
    description = 'same data, schedule, batch and sequence length; each platform its own '
      .. 'numeric format, parallelism and system settings',
    fixed = {
      'model', 'training.seed', 'training.dataset', 'training.tokenizer', 'training.lr',
      'training.min_lr', 'training.warmup', 'training.decay', 'training.weight_decay',
      'training.beta1', 'training.beta2', 'training.eps', 'training.grad_clip', 'training.gbs',
      'training.seq_len', 'training.iters', 'training.init_std', 'nodes', 'gpus_per_node',
    },
    free = { 'training.precision', 'training.fp8_recipe', 'training.mbs', 'parallelism.*',
             'system.*' },
  })
end

return tp.experiment.main({
  name = 'llama3.1-8b-best-precision',
  description = 'Llama 3.1 8B, FP8 on H100 against BF16 on MI300X, same data and schedule',
  model = 'llama3.1-8b',
  methodology = 'best_precision',
  platforms = {
    amd = { framework = 'primus', hardware = 'mi300x' },
    nvd = { framework = 'megatron', hardware = 'h100-sxm',
            training = { precision = 'fp8', fp8_recipe = 'tensorwise' } },
  },
  training = {
    seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500, lr = 3e-4, min_lr = 0,
    warmup = 50, decay = 'cosine', weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95,
    precision = 'bf16', dataset = 'bc',
  },
  parallelism = { tp = 1, pp = 1, dp = 8 },
  nodes = 1,
  gpus_per_node = 8,
  repeats = 3,
  results = 'output/llama3.1-8b-best-precision',
})
