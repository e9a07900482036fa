-- tp.frameworks.megatron: the unified config as NVIDIA Megatron-LM `pretrain_gpt.py` arguments,
-- and the map from Megatron's printed argument dump back to unified keys.
-- Every argument name below was checked in NVIDIA/Megatron-LM megatron/training/arguments.py;
-- the comment beside each group names the function there that declares it.

local fw = require('tp.frameworks')

local M = {}

M.name = 'megatron'
M.parser = 'megatron'

local fail = fw._fail
local num = fw._fmt_number

-- Megatron's --attention-backend takes an AttnBackend member name
-- (megatron/core/transformer/enums.py AttnBackend: flash, fused, unfused, local, auto).
local ATTENTION = { flash = 'flash', fused = 'fused', auto = 'auto' }

-- --fp8-recipe choices (arguments.py _add_transformer_engine_args).
local FP8_RECIPE = { delayed = 'delayed', tensorwise = 'tensorwise', blockwise = 'blockwise',
                     mxfp8 = 'mxfp8' }

--- Returns the settings as an ordered list of { opt = '--cli-name', dest = 'namespace_name',
--- value = v, flag = bool }. A flag entry is a store_true/store_false option: it appears on the
--- command line as `opt` alone, and its `value` is what Megatron stores in `dest`. Primus reuses
--- this list (its YAML keys are Megatron's `dest` names).
---@param c table  normalized config (tp.frameworks.normalize)
---@param who string  framework name used in error messages
---@return table[]
function M._settings(c, who)
  local m, t, p, s = c.model, c.training, c.parallelism, c.system
  local out = {}
  local function add(opt, dest, value)
    out[#out + 1] = { opt = opt, dest = dest, value = value }
  end
  local function flag(opt, dest, value)
    out[#out + 1] = { opt = opt, dest = dest, value = value, flag = true }
  end

  -- Network size: _add_network_size_args.
  add('--num-layers', 'num_layers', m.num_layers)
  add('--hidden-size', 'hidden_size', m.hidden_size)
  add('--ffn-hidden-size', 'ffn_hidden_size', m.ffn_hidden_size)
  add('--num-attention-heads', 'num_attention_heads', m.num_attention_heads)
  add('--kv-channels', 'kv_channels', m.head_dim)
  if m.num_kv_heads ~= m.num_attention_heads then
    flag('--group-query-attention', 'group_query_attention', true)
    add('--num-query-groups', 'num_query_groups', m.num_kv_heads)
  end
  add('--max-position-embeddings', 'max_position_embeddings', m.max_position_embeddings)
  add('--position-embedding-type', 'position_embedding_type', 'rope')
  add('--rotary-base', 'rotary_base', math.tointeger(m.rope_theta) or m.rope_theta)
  if m.rope_scaling then
    -- --use-rope-scaling / --rope-scaling-factor: "rope scaling as used in llama3.x".
    flag('--use-rope-scaling', 'use_rope_scaling', true)
    add('--rope-scaling-factor', 'rope_scaling_factor', m.rope_scaling.factor + 0.0)
  end
  add('--normalization', 'normalization', 'RMSNorm')
  add('--norm-epsilon', 'norm_epsilon', m.norm_eps)
  flag('--swiglu', 'swiglu', true)
  if not m.tie_embeddings then
    flag('--untie-embeddings-and-output-weights', 'untie_embeddings_and_output_weights', true)
  end
  -- _add_training_args: --disable-bias-linear (dest add_bias_linear), --add-qkv-bias.
  flag('--disable-bias-linear', 'add_bias_linear', false)
  if m.qkv_bias then
    flag('--add-qkv-bias', 'add_qkv_bias', true)
  end
  -- _add_tokenizer_args: the model's exact (padded) vocabulary.
  add('--padded-vocab-size', 'padded_vocab_size', m.vocab_size)
  add('--attention-backend', 'attention_backend', ATTENTION[s.attention])
  -- _add_regularization_args: dropout defaults are 0.1; these models train without dropout.
  add('--attention-dropout', 'attention_dropout', 0.0)
  add('--hidden-dropout', 'hidden_dropout', 0.0)

  -- Initialization: _add_initialization_args.
  add('--seed', 'seed', t.seed)
  add('--init-method-std', 'init_method_std', t.init_std)

  -- Batch, length, schedule: _add_training_args, _add_data_args, _add_learning_rate_args.
  add('--micro-batch-size', 'micro_batch_size', t.mbs)
  add('--global-batch-size', 'global_batch_size', t.gbs)
  add('--seq-length', 'seq_length', t.seq_len)
  add('--train-iters', 'train_iters', t.iters)
  add('--lr', 'lr', t.lr)
  add('--min-lr', 'min_lr', t.min_lr)
  add('--lr-warmup-iters', 'lr_warmup_iters', t.warmup)
  add('--lr-decay-style', 'lr_decay_style', t.decay)
  add('--lr-decay-iters', 'lr_decay_iters', t.iters)
  -- _add_regularization_args.
  add('--weight-decay', 'weight_decay', t.weight_decay)
  add('--adam-beta1', 'adam_beta1', t.beta1)
  add('--adam-beta2', 'adam_beta2', t.beta2)
  add('--adam-eps', 'adam_eps', t.eps)
  add('--clip-grad', 'clip_grad', t.grad_clip)

  -- Precision: _add_mixed_precision_args (--bf16, --fp16) and _add_transformer_engine_args
  -- (--fp8-format, dest fp8; --fp8-recipe).
  if t.precision == 'fp16' then
    flag('--fp16', 'fp16', true)
  else
    flag('--bf16', 'bf16', true)
  end
  if t.precision == 'fp8' then
    add('--fp8-format', 'fp8', 'hybrid')
    add('--fp8-recipe', 'fp8_recipe', FP8_RECIPE[t.fp8_recipe])
  end

  -- Parallelism: _add_distributed_args (--context-parallel-size is declared there too).
  add('--tensor-model-parallel-size', 'tensor_model_parallel_size', p.tp)
  add('--pipeline-model-parallel-size', 'pipeline_model_parallel_size', p.pp)
  add('--context-parallel-size', 'context_parallel_size', p.cp)
  if p.sequence_parallel then
    flag('--sequence-parallel', 'sequence_parallel', true)
  end
  if p.distributed_optimizer then
    flag('--use-distributed-optimizer', 'use_distributed_optimizer', true)
  end

  -- Activation recomputation: _add_training_args. Full recomputation of every layer is
  -- --recompute-method uniform with one layer per recomputed unit.
  if s.recompute == 'full' then
    add('--recompute-granularity', 'recompute_granularity', 'full')
    add('--recompute-method', 'recompute_method', 'uniform')
    add('--recompute-num-layers', 'recompute_num_layers', 1)
  elseif s.recompute == 'selective' then
    add('--recompute-granularity', 'recompute_granularity', 'selective')
  end
  -- Kernel fusions that are on by default: _add_training_args (--no-masked-softmax-fusion,
  -- --no-bias-swiglu-fusion, --no-bias-dropout-fusion, --no-rope-fusion).
  if not s.fused_kernels then
    flag('--no-masked-softmax-fusion', 'masked_softmax_fusion', false)
    flag('--no-bias-swiglu-fusion', 'bias_swiglu_fusion', false)
    flag('--no-bias-dropout-fusion', 'bias_dropout_fusion', false)
    flag('--no-rope-fusion', 'apply_rope_fusion', false)
  end
  if s.cuda_graphs then
    -- _add_inference_args: --cuda-graph-impl; validate_args refuses it with full recompute.
    if s.recompute == 'full' then
      fail("%s: system.cuda_graphs: Megatron refuses CUDA graphs with system.recompute = 'full' "
        .. '(validate_args)', who)
    end
    add('--cuda-graph-impl', 'cuda_graph_impl', 'transformer_engine')
  end

  -- Tokenizer and data: _add_tokenizer_args, _add_data_args.
  add('--tokenizer-type', 'tokenizer_type', 'HuggingFaceTokenizer')
  add('--tokenizer-model', 'tokenizer_model', c.data.tokenizer)
  if c.data.kind == 'mock' then
    flag('--mock-data', 'mock_data', true)
  else
    add('--data-path', 'data_path', { c.data.path })
    add('--split', 'split', '100,0,0')
  end
  -- _add_validation_args: no evaluation inside a benchmark.
  add('--eval-iters', 'eval_iters', 0)
  add('--eval-interval', 'eval_interval', t.iters)

  -- Logging: _add_training_args (--log-interval), _add_logging_args (--log-throughput).
  add('--log-interval', 'log_interval', t.log_interval)
  flag('--log-throughput', 'log_throughput', true)

  -- Checkpointing: _add_checkpointing_args; nothing is saved unless paths.checkpoints is set.
  if c.paths.checkpoints then
    add('--save', 'save', c.paths.checkpoints)
    add('--save-interval', 'save_interval', t.iters)
  end
  return out
end

local function render_value(v)
  if type(v) == 'number' then
    return num(v)
  end
  return tostring(v)
end

--- Renders settings as Megatron command-line arguments.
---@param settings table[]
---@return string[]
function M._cli(settings)
  local argv = {}
  for _, e in ipairs(settings) do
    argv[#argv + 1] = e.opt
    if not e.flag then
      if type(e.value) == 'table' then
        for _, item in ipairs(e.value) do
          argv[#argv + 1] = render_value(item)
        end
      else
        argv[#argv + 1] = render_value(e.value)
      end
    end
  end
  return argv
end

--- Environment both Megatron and Primus need: validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1
--- whenever tensor or context parallelism is used on pre-Blackwell GPUs.
function M._env(c)
  local env = {}
  if c.parallelism.tp > 1 or c.parallelism.cp > 1 then
    env.CUDA_DEVICE_MAX_CONNECTIONS = '1'
  end
  return env
end

--- Builds the command for one Megatron-LM run.
---```lua
---local cmd = require('tp.frameworks.megatron').build(config)
----- cmd.argv = { 'python3', '/workspace/Megatron-LM/pretrain_gpt.py', '--num-layers', ... }
---```
---@param config table  unified config
---@return table cmd  { argv, env, files, parser, entry, launcher, notes }
function M.build(config)
  local c = fw.normalize(config)
  local dir = c.paths.framework_dir or '/workspace/Megatron-LM'
  local entry = fw._join(dir, 'pretrain_gpt.py')
  local argv = { 'python3', entry }
  for _, a in ipairs(M._cli(M._settings(c, 'megatron'))) do
    argv[#argv + 1] = a
  end
  return {
    argv = argv,
    env = M._env(c),
    files = {},
    parser = M.parser,
    entry = entry,
    launcher = 'torchrun',
    notes = {},
  }
end

-- ---------------------------------------------------------------------------------------------
-- Effective values: the names printed by arguments.py _print_args (the namespace `dest` names).

local P = fw._parse

local function attention(s)
  s = P.string(s)
  return s and (s:gsub('^AttnBackend%.', ''))
end

local function recompute(s)
  return P.string(s) or 'none'
end

local function precision(args)
  local fp8 = args.fp8 and P.string(tostring(args.fp8))
  if fp8 then
    return 'fp8'
  end
  if args.fp16 and P.boolean(tostring(args.fp16)) then
    return 'fp16'
  end
  if args.bf16 and P.boolean(tostring(args.bf16)) then
    return 'bf16'
  end
  if args.bf16 or args.fp16 then
    return 'fp32'
  end
  return nil
end

local function fp8_recipe(args)
  if precision(args) ~= 'fp8' then
    return nil
  end
  return args.fp8_recipe and P.string(tostring(args.fp8_recipe))
end

local FUSIONS = { 'masked_softmax_fusion', 'bias_swiglu_fusion', 'bias_dropout_fusion',
                  'apply_rope_fusion' }

local function fused(args)
  local seen, on = 0, 0
  for _, name in ipairs(FUSIONS) do
    local v = args[name] and P.boolean(tostring(args[name]))
    if v ~= nil then
      seen = seen + 1
      on = on + (v and 1 or 0)
    end
  end
  if seen == 0 then
    return nil
  end
  if on == seen then
    return true
  elseif on == 0 then
    return false
  end
  return 'mixed'
end

local function dataset(args)
  if args.mock_data and P.boolean(tostring(args.mock_data)) then
    return 'mock'
  end
  return args.data_path and P.first_path(tostring(args.data_path))
end

local function untied_to_tied(s)
  local v = P.boolean(s)
  if v == nil then
    return nil
  end
  return not v
end

-- num_query_groups only counts when group_query_attention is on; otherwise every head has its
-- own KV head (arguments.py core_transformer_config_from_args).
local function kv_heads(args)
  local gqa = args.group_query_attention and P.boolean(tostring(args.group_query_attention))
  if gqa == nil then
    return nil
  end
  if gqa then
    return args.num_query_groups and P.integer(tostring(args.num_query_groups))
  end
  return args.num_attention_heads and P.integer(tostring(args.num_attention_heads))
end

local function cuda_graphs(s)
  s = P.string(s)
  if s == nil then
    return nil
  end
  return s ~= 'none'
end

--- unified key -> printed argument name(s) and converter.
M.keymap = {
  { key = 'model.num_layers', names = { 'num_layers' }, parse = P.integer },
  { key = 'model.hidden_size', names = { 'hidden_size' }, parse = P.integer },
  { key = 'model.ffn_hidden_size', names = { 'ffn_hidden_size' }, parse = P.integer },
  { key = 'model.num_attention_heads', names = { 'num_attention_heads' }, parse = P.integer },
  { key = 'model.num_kv_heads', names = { 'group_query_attention', 'num_query_groups' },
    read = kv_heads },
  { key = 'model.head_dim', names = { 'kv_channels' }, parse = P.integer },
  { key = 'model.vocab_size', names = { 'padded_vocab_size' }, parse = P.integer },
  { key = 'model.max_position_embeddings', names = { 'max_position_embeddings' },
    parse = P.integer },
  { key = 'model.rope_theta', names = { 'rotary_base' }, parse = P.number },
  { key = 'model.norm_eps', names = { 'norm_epsilon' }, parse = P.number },
  { key = 'model.tie_embeddings', names = { 'untie_embeddings_and_output_weights' },
    parse = untied_to_tied },
  { key = 'model.qkv_bias', names = { 'add_qkv_bias' }, parse = P.boolean },
  { key = 'training.seed', names = { 'seed' }, parse = P.integer },
  { key = 'training.mbs', names = { 'micro_batch_size' }, parse = P.integer },
  { key = 'training.gbs', names = { 'global_batch_size' }, parse = P.integer },
  { key = 'training.seq_len', names = { 'seq_length' }, parse = P.integer },
  { key = 'training.iters', names = { 'train_iters' }, parse = P.integer },
  { key = 'training.lr', names = { 'lr' }, parse = P.number },
  { key = 'training.min_lr', names = { 'min_lr' }, parse = P.number },
  { key = 'training.warmup', names = { 'lr_warmup_iters' }, parse = P.integer },
  { key = 'training.decay', names = { 'lr_decay_style' }, parse = P.string },
  { key = 'training.weight_decay', names = { 'weight_decay' }, parse = P.number },
  { key = 'training.beta1', names = { 'adam_beta1' }, parse = P.number },
  { key = 'training.beta2', names = { 'adam_beta2' }, parse = P.number },
  { key = 'training.eps', names = { 'adam_eps' }, parse = P.number },
  { key = 'training.grad_clip', names = { 'clip_grad' }, parse = P.number },
  { key = 'training.precision', names = { 'bf16', 'fp16', 'fp8' }, read = precision },
  { key = 'training.fp8_recipe', names = { 'fp8_recipe' }, read = fp8_recipe },
  { key = 'training.init_std', names = { 'init_method_std' }, parse = P.number },
  { key = 'training.log_interval', names = { 'log_interval' }, parse = P.integer },
  { key = 'training.dataset', names = { 'mock_data', 'data_path' }, read = dataset },
  { key = 'training.tokenizer', names = { 'tokenizer_model' }, parse = P.string },
  { key = 'parallelism.tp', names = { 'tensor_model_parallel_size' }, parse = P.integer },
  { key = 'parallelism.pp', names = { 'pipeline_model_parallel_size' }, parse = P.integer },
  { key = 'parallelism.cp', names = { 'context_parallel_size' }, parse = P.integer },
  { key = 'parallelism.dp', names = { 'data_parallel_size' }, parse = P.integer },
  { key = 'parallelism.ep', names = { 'expert_model_parallel_size' }, parse = P.integer },
  { key = 'parallelism.sequence_parallel', names = { 'sequence_parallel' }, parse = P.boolean },
  { key = 'parallelism.distributed_optimizer', names = { 'use_distributed_optimizer' },
    parse = P.boolean },
  { key = 'system.recompute', names = { 'recompute_granularity' }, parse = recompute },
  { key = 'system.attention', names = { 'attention_backend' }, parse = attention },
  { key = 'system.fused_kernels', names = FUSIONS, read = fused },
  { key = 'system.cuda_graphs', names = { 'cuda_graph_impl' }, parse = cuda_graphs },
}

--- Reads the unified config back from a parsed Megatron argument dump.
---```lua
---local eff = megatron.effective({ lr = '0.0003', bf16 = 'True' })
----- eff.training.lr == 3e-4, eff.training.precision == 'bf16'
---```
---@param args table<string, string>  argument name -> printed value
---@return table unified  only the keys whose arguments were printed
function M.effective(args)
  return fw._effective(M.keymap, args)
end

return M
