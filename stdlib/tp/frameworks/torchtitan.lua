-- tp.frameworks.torchtitan: the unified config as a torchtitan job: `python3 -m torchtitan.train
-- --job.config_file <toml>` with the training keys as `--section.key value` overrides.
-- Section and field names: pytorch/torchtitan torchtitan/config/job_config.py (Job, Profiling,
-- Metrics, Model, Optimizer, LRScheduler, Training, Parallelism, Checkpoint,
-- ActivationCheckpoint, Float8, MX, Validation); file layout:
-- torchtitan/models/llama3/train_configs/llama3_8b.toml. This targets the TOML-era releases
-- (`model.hf_assets_path`, `training.local_batch_size`); the later Python config registry
-- (`--config <name>`) is not targeted.

local fw = require('tp.frameworks')

local M = {}

M.name = 'torchtitan'
M.parser = 'torchtitan'

local fail = fw._fail
local num = fw._fmt_number

-- torchtitan model flavors with the architecture of a unified model id
-- (torchtitan/models/llama3/__init__.py llama3_args: "8B" = dim 4096, 32 layers, 32 heads,
-- 8 KV heads, rope_theta 500000; "70B" = dim 8192, 80 layers, 64 heads, 8 KV heads).
local FLAVORS = {
  ['llama3.1-8b'] = { name = 'llama3', flavor = '8B' },
  ['llama3.1-70b'] = { name = 'llama3', flavor = '70B' },
}

--- Returns the TOML sections and the CLI overrides for a normalized config.
---@param c table
---@return table sections, table overrides  ordered { {key, value}, ... } lists
function M._job(c)
  local m, t, p, s = c.model, c.training, c.parallelism, c.system
  local model = FLAVORS[m.id]
  if not model then
    if m.qkv_bias then
      fail("torchtitan: model: '%s' has QKV biases; torchtitan's llama3 model has none and "
        .. 'torchtitan has no Qwen 2 architecture (its qwen3 model uses QK-norm)', m.id)
    end
    fail("torchtitan: model: no torchtitan model flavor is known for '%s' (known: %s)", m.id,
      table.concat(fw._sorted_keys(FLAVORS), ', '))
  end
  if c.data.kind == 'mock' then
    fail("torchtitan: training.dataset: 'mock' cannot be expressed; torchtitan loads text "
      .. 'datasets (training.dataset, training.dataset_path) and has no synthetic-token loader')
  end
  if not c.data.name then
    fail("torchtitan: training.dataset: { path = '%s' } is a Megatron indexed dataset; "
      .. 'torchtitan needs a dataset name it registers (training.dataset)', c.data.path)
  end
  if c.explicit['training.init_std'] then
    fail('torchtitan: training.init_std: cannot be expressed; torchtitan initialises each '
      .. 'layer with its own depth-scaled standard deviation (models/llama3 init_weights)')
  end
  if c.training.precision == 'fp16' then
    fail("torchtitan: training.precision: 'fp16' cannot be expressed; "
      .. 'training.mixed_precision_param accepts bfloat16 or float32 only')
  end
  if t.decay == 'constant' then
    fail("torchtitan: training.decay: 'constant' cannot be expressed; "
      .. 'lr_scheduler.decay_type accepts linear, sqrt, cosine')
  end
  if p.tp > 1 and not p.sequence_parallel then
    fail('torchtitan: parallelism.sequence_parallel: torchtitan tensor parallelism always '
      .. 'shards activations along the sequence; set it to true when tp > 1')
  end
  if s.attention ~= 'auto' then
    fail("torchtitan: system.attention: '%s' cannot be expressed; torchtitan calls PyTorch "
      .. "scaled_dot_product_attention, which chooses its kernel itself (use 'auto')",
      s.attention)
  end
  if s.cuda_graphs then
    fail('torchtitan: system.cuda_graphs: torchtitan has no CUDA-graph option')
  end
  local converters = {}
  local float8, mx
  if t.precision == 'fp8' then
    if t.fp8_recipe == 'tensorwise' then
      converters = { 'float8' }
      float8 = { { 'recipe_name', 'tensorwise' } }
    elseif t.fp8_recipe == 'mxfp8' then
      converters = { 'mx' }
      mx = { { 'recipe_name', 'mxfp8' } }
    else
      fail("torchtitan: training.fp8_recipe: '%s' cannot be expressed; float8.recipe_name "
        .. 'accepts tensorwise, rowwise, rowwise_with_gw_hp and mx.recipe_name mxfp8',
        t.fp8_recipe)
    end
  end
  local tokenizer = c.training.tokenizer or (c.paths.data .. '/tokenizers/' .. m.hf_name)

  local activation = { { 'mode', s.recompute } }
  if s.recompute == 'selective' then
    activation[2] = { 'selective_ac_option', 'op' }
  end
  local sections = {
    { 'job', {
      { 'dump_folder', c.paths.output },
      { 'description', m.id .. ' (tplua)' },
      { 'print_args', true },
    } },
    { 'metrics', {
      { 'log_freq', t.log_interval },
      { 'disable_color_printing', true },
      { 'enable_tensorboard', false },
    } },
    { 'model', {
      { 'name', model.name },
      { 'flavor', model.flavor },
      { 'hf_assets_path', tokenizer },
      { 'converters', converters },
    } },
    { 'optimizer', {
      { 'name', 'AdamW' },
      -- Optimizer.implementation: 'fused' is torchtitan's fused AdamW kernel.
      { 'implementation', s.fused_kernels and 'fused' or 'foreach' },
    } },
    { 'training', {
      { 'dataset', c.data.name },
      -- A named dataset's text lives in <paths.data>/<name>, shared by all tokenizers.
      { 'dataset_path', c.paths.data .. '/' .. c.data.name },
      { 'mixed_precision_param', 'bfloat16' },
      { 'mixed_precision_reduce', 'float32' },
      { 'compile', false },
    } },
    { 'parallelism', {
      { 'pipeline_parallel_schedule', '1F1B' },
    } },
    { 'activation_checkpoint', activation },
    { 'validation', {
      { 'enabled', false },
    } },
  }
  if float8 then
    sections[#sections + 1] = { 'float8', float8 }
  end
  if mx then
    sections[#sections + 1] = { 'mx', mx }
  end
  if c.paths.checkpoints then
    sections[#sections + 1] = { 'checkpoint', {
      { 'enable', true },
      { 'folder', c.paths.checkpoints },
      { 'interval', t.iters },
    } }
  end

  -- Batch: local_batch_size per data-parallel rank, gradient accumulation =
  -- global_batch_size / (local_batch_size * dp) as Megatron's micro-batches. With pipeline
  -- parallelism the local batch is split into pipeline micro-batches of
  -- parallelism.pipeline_parallel_microbatch_size, so the whole per-rank batch is local.
  local local_batch = t.mbs
  if p.pp > 1 then
    local_batch = t.gbs // p.dp
  end
  local dp_shard, dp_replicate = p.dp, 1
  if not p.distributed_optimizer then
    -- Plain DDP: replicate instead of shard (Parallelism.data_parallel_replicate_degree).
    dp_shard, dp_replicate = 1, p.dp
  end
  local overrides = {
    { 'training.local_batch_size', local_batch },
    { 'training.global_batch_size', t.gbs },
    { 'training.seq_len', t.seq_len },
    { 'training.steps', t.iters },
    { 'training.seed', t.seed },
    { 'training.max_norm', t.grad_clip },
    { 'optimizer.lr', t.lr },
    { 'optimizer.beta1', t.beta1 },
    { 'optimizer.beta2', t.beta2 },
    { 'optimizer.eps', t.eps },
    { 'optimizer.weight_decay', t.weight_decay },
    { 'lr_scheduler.warmup_steps', t.warmup },
    { 'lr_scheduler.decay_type', t.decay },
    -- LRScheduler.lr_min is a fraction of optimizer.lr.
    { 'lr_scheduler.lr_min', t.min_lr / t.lr },
    { 'parallelism.data_parallel_replicate_degree', dp_replicate },
    { 'parallelism.data_parallel_shard_degree', dp_shard },
    { 'parallelism.tensor_parallel_degree', p.tp },
    { 'parallelism.pipeline_parallel_degree', p.pp },
    { 'parallelism.context_parallel_degree', p.cp },
  }
  if p.pp > 1 then
    overrides[#overrides + 1] = { 'parallelism.pipeline_parallel_microbatch_size', t.mbs }
  end
  return sections, overrides
end

--- Builds the command for one torchtitan run.
---@param config table  unified config
---@return table cmd  { argv, env, files, parser, entry, launcher, notes }
function M.build(config)
  local c = fw.normalize(config)
  local dir = c.paths.framework_dir or '/workspace/torchtitan'
  local sections, overrides = M._job(c)
  local rel = 'torchtitan.toml'
  local toml_path = fw._join(c.paths.output, rel)
  local argv = { 'python3', '-m', 'torchtitan.train', '--job.config_file', toml_path }
  for _, kv in ipairs(overrides) do
    argv[#argv + 1] = '--' .. kv[1]
    argv[#argv + 1] = type(kv[2]) == 'number' and num(kv[2]) or tostring(kv[2])
  end
  local notes = {}
  if c.parallelism.distributed_optimizer then
    notes[#notes + 1] = 'torchtitan: parallelism.distributed_optimizer is expressed as FSDP '
      .. '(parameters, gradients and optimizer state sharded), Megatron shards optimizer '
      .. 'state only: same arithmetic, different memory'
  end
  notes[#notes + 1] = 'torchtitan: weights are initialised by torchtitan itself '
    .. '(training.init_std is not expressible)'
  return {
    argv = argv,
    -- The checkout is importable without installation (run_train.sh runs from its root).
    env = { PYTHONPATH = dir },
    files = { [rel] = '# torchtitan job generated by tplua from a unified training config.\n'
      .. fw._toml(sections) },
    parser = M.parser,
    entry = 'torchtitan.train',
    launcher = 'torchrun',
    notes = notes,
  }
end

-- ---------------------------------------------------------------------------------------------
-- Effective values: with job.print_args torchtitan logs "Running with args: {...}", the Python
-- repr of JobConfig.to_dict() (torchtitan/train.py, Trainer.__init__); the log scanner flattens
-- it to dotted names (section.field) in the log's args (docs/logs.md).

local P = fw._parse

local function min_lr(args)
  local ratio = args['lr_scheduler.lr_min'] and P.number(tostring(args['lr_scheduler.lr_min']))
  local lr = args['optimizer.lr'] and P.number(tostring(args['optimizer.lr']))
  if ratio == nil or lr == nil then
    return nil
  end
  return ratio * lr
end

local function dp(args)
  local shard = args['parallelism.data_parallel_shard_degree']
    and P.integer(tostring(args['parallelism.data_parallel_shard_degree']))
  local replicate = args['parallelism.data_parallel_replicate_degree']
    and P.integer(tostring(args['parallelism.data_parallel_replicate_degree'])) or 1
  if shard == nil or shard < 1 then
    -- -1 means "the ranks left over", which the dump alone cannot resolve.
    return nil
  end
  return shard * replicate
end

local function distributed_optimizer(args)
  local shard = args['parallelism.data_parallel_shard_degree']
    and P.integer(tostring(args['parallelism.data_parallel_shard_degree']))
  if shard == nil then
    return nil
  end
  return shard ~= 1
end

local function precision(args)
  local conv = args['model.converters'] and tostring(args['model.converters']) or ''
  if conv:find('float8') or conv:find('mx') then
    return 'fp8'
  end
  local param = args['training.mixed_precision_param']
    and P.string(tostring(args['training.mixed_precision_param']))
  if param == 'bfloat16' then
    return 'bf16'
  elseif param == 'float32' then
    return 'fp32'
  end
  return nil
end

local function fp8_recipe(args)
  local conv = args['model.converters'] and tostring(args['model.converters']) or ''
  if conv:find('float8') then
    return args['float8.recipe_name'] and P.string(tostring(args['float8.recipe_name']))
  elseif conv:find('mx') then
    return 'mxfp8'
  end
  return nil
end

local function fused(s)
  s = P.string(s)
  if s == nil then
    return nil
  end
  return s == 'fused'
end

local function mbs(args)
  local pp = args['parallelism.pipeline_parallel_degree']
    and P.integer(tostring(args['parallelism.pipeline_parallel_degree'])) or 1
  local name = pp > 1 and 'parallelism.pipeline_parallel_microbatch_size'
    or 'training.local_batch_size'
  return args[name] and P.integer(tostring(args[name]))
end

--- unified key -> printed job-config names (section.field).
M.keymap = {
  { key = 'training.seed', names = { 'training.seed' }, parse = P.integer },
  { key = 'training.mbs', names = { 'training.local_batch_size' }, read = mbs },
  { key = 'training.gbs', names = { 'training.global_batch_size' }, parse = P.integer },
  { key = 'training.seq_len', names = { 'training.seq_len' }, parse = P.integer },
  { key = 'training.iters', names = { 'training.steps' }, parse = P.integer },
  { key = 'training.lr', names = { 'optimizer.lr' }, parse = P.number },
  { key = 'training.min_lr', names = { 'lr_scheduler.lr_min', 'optimizer.lr' }, read = min_lr },
  { key = 'training.warmup', names = { 'lr_scheduler.warmup_steps' }, parse = P.integer },
  { key = 'training.decay', names = { 'lr_scheduler.decay_type' }, parse = P.string },
  { key = 'training.weight_decay', names = { 'optimizer.weight_decay' }, parse = P.number },
  { key = 'training.beta1', names = { 'optimizer.beta1' }, parse = P.number },
  { key = 'training.beta2', names = { 'optimizer.beta2' }, parse = P.number },
  { key = 'training.eps', names = { 'optimizer.eps' }, parse = P.number },
  { key = 'training.grad_clip', names = { 'training.max_norm' }, parse = P.number },
  { key = 'training.precision', names = { 'model.converters', 'training.mixed_precision_param' },
    read = precision },
  { key = 'training.fp8_recipe', names = { 'model.converters', 'float8.recipe_name' },
    read = fp8_recipe },
  { key = 'training.log_interval', names = { 'metrics.log_freq' }, parse = P.integer },
  { key = 'training.dataset', names = { 'training.dataset' }, parse = P.string },
  { key = 'training.tokenizer', names = { 'model.hf_assets_path' }, parse = P.string },
  { key = 'parallelism.tp', names = { 'parallelism.tensor_parallel_degree' }, parse = P.integer },
  { key = 'parallelism.pp', names = { 'parallelism.pipeline_parallel_degree' },
    parse = P.integer },
  { key = 'parallelism.cp', names = { 'parallelism.context_parallel_degree' }, parse = P.integer },
  { key = 'parallelism.dp', names = { 'parallelism.data_parallel_shard_degree' }, read = dp },
  { key = 'parallelism.ep', names = { 'parallelism.expert_parallel_degree' }, parse = P.integer },
  { key = 'parallelism.distributed_optimizer',
    names = { 'parallelism.data_parallel_shard_degree' }, read = distributed_optimizer },
  { key = 'system.recompute', names = { 'activation_checkpoint.mode' }, parse = P.string },
  { key = 'system.fused_kernels', names = { 'optimizer.implementation' }, parse = fused },
}

--- Reads the unified config back from torchtitan's printed job config (flattened names).
---@param args table<string, string>
---@return table unified
function M.effective(args)
  return fw._effective(M.keymap, args)
end

return M
