-- A custom sweep: sequence length x micro-batch for Llama 3.1 8B on 8 x MI300X (Primus), with
-- the global batch zipped to the sequence length so that every point trains on the same number
-- of tokens per step (64 x 2048 = 131,072), a user constraint, a filter, ordering and repeats.
--   tplua plan examples/custom_sweep.lua            the points, their ids and commands
--   tplua plan examples/custom_sweep.lua --no-prune keep the points that do not fit in memory
local tp = require('tp')

local TOKENS_PER_STEP = 64 * 2048

local sweep = tp.sweep({
  name = 'seq-len x mbs at constant tokens per step',
  -- A zipped group: the i-th sequence length goes with the i-th global batch.
  zip = {
    { { 'training.seq_len', { 1024, 2048, 4096, 8192 } },
      { 'training.gbs', { 128, 64, 32, 16 } } },
  },
  axes = {
    { 'training.mbs', { 1, 2, 4 } },
  },
  -- Every point must keep the tokens per step; one that does not is a mistake in the lists.
  constraints = {
    function(cfg)
      local tokens = cfg.training.gbs * cfg.training.seq_len
      return tokens == TOKENS_PER_STEP, string.format('%d tokens per step, expected %d', tokens,
        TOKENS_PER_STEP)
    end,
  },
  -- Skip micro-batches of more than 16k tokens: they only measure the attention kernel.
  filter = function(cfg)
    return cfg.training.mbs * cfg.training.seq_len <= 16384
  end,
  order = { 'training.seq_len', '-training.mbs' },
  repeats = 2,
})

return tp.experiment.main({
  name = 'llama3.1-8b-seq-len-sweep',
  description = 'sequence length x micro-batch at constant tokens per step, MI300X',
  model = 'llama3.1-8b',
  methodology = 'maximum_performance',
  platforms = {
    amd = { framework = 'primus', hardware = 'mi300x', sweep = sweep },
  },
  training = {
    seed = 42, mbs = 1, gbs = 64, seq_len = 2048, iters = 100, lr = 3e-4, min_lr = 3e-5,
    warmup = 10, decay = 'cosine', precision = 'bf16', dataset = 'bc',
  },
  parallelism = { tp = 1, pp = 1 },
  nodes = 1,
  gpus_per_node = 8,
  results = 'output/llama3.1-8b-seq-len-sweep',
})
