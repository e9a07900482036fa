-- tp.frameworks.reference: the unified config as arguments of tplua's reference trainer
-- (tools/reftrain/reftrain.py): a small Llama-shaped model trained with PyTorch DDP that prints
-- Megatron-LM's log format. It is the workload of tplua's own end-to-end tests and the cluster
-- smoke test a user runs before a campaign (docs/reftrain.md). Data parallel only.

local fw = require('tp.frameworks')

local M = {}

M.name = 'reference'
M.parser = 'megatron'
-- On a machine without GPUs it trains on the CPU (the preflight does not ask for GPUs there).
M.cpu_fallback = 'the reference trainer runs on the CPU (gloo)'

local fail = fw._fail
local num = fw._fmt_number

-- Synthetic datasets the trainer makes itself: 'mock' is a repeated token pattern (the loss
-- falls towards 0), 'mock-random' uniform random tokens (the loss stays near ln(vocab)).
local SYNTHETIC = { mock = 'repeat', ['mock-random'] = 'random' }

local function is_file(path)
  return require('tp.fs').is_file(path)
end

--- The directory that holds reftrain.py: paths.framework_dir when given, else the tools/
--- directory beside the stdlib this tplua runs (the source tree's tools/reftrain, or
--- share/tplua/tools/reftrain when installed).
---@param c? table normalized config
---@return string
function M.trainer_dir(c)
  if c and c.paths.framework_dir then
    return c.paths.framework_dir
  end
  local ok, host = pcall(require, 'tp._host')
  local lib = ok and host.stdlib_dir and host.stdlib_dir()
  if type(lib) ~= 'string' then
    local path = package.searchpath('tp.frameworks.reference', package.path) or ''
    lib = path:match('^(.*)/tp/frameworks/reference%.lua$') or 'stdlib'
  end
  return (lib:gsub('/[^/]*/?$', '')) .. '/tools/reftrain'
end

--- The Python interpreter: $TPLUA_PYTHON, else /usr/bin/python3 when present (Debian's, which
--- sees Debian's python3-torch whatever else is first on PATH), else `python3` from PATH.
---@return string
function M.python()
  local env = os.getenv('TPLUA_PYTHON')
  if env and env ~= '' then
    return env
  end
  if is_file('/usr/bin/python3') then
    return '/usr/bin/python3'
  end
  return 'python3'
end

--- The device the trainer is told to use: $TPLUA_REFTRAIN_DEVICE (`cpu`, `cuda`: a CUDA or a
--- ROCm GPU through torch, or `auto`), given to it as --device; nil when unset (the trainer's
--- own default, auto: the GPU when torch sees one). Any other value raises.
---@return string|nil
function M.device()
  local env = os.getenv('TPLUA_REFTRAIN_DEVICE')
  if env == nil or env == '' then
    return nil
  end
  if env ~= 'auto' and env ~= 'cpu' and env ~= 'cuda' then
    fail("reference: TPLUA_REFTRAIN_DEVICE: '%s' is not a device (auto, cpu, cuda)", env)
  end
  return env
end

--- Builds the command of one reference-trainer process (one rank; tp.launch starts the ranks:
--- torchrun, `tplua ranks`, or one Slurm task per GPU, since the trainer reads RANK /
--- SLURM_PROCID itself).
---```lua
---local cmd = tp.frameworks.get('reference').build({ model = 'ref-tiny', nodes = 1,
---  gpus_per_node = 2, training = { mbs = 4, gbs = 8, seq_len = 64, iters = 30, lr = 3e-3 } })
---```
---@param config table unified config
---@return table cmd { argv, env, files, parser, entry, launcher, env_init, notes }
function M.build(config)
  local c = fw.normalize(config)
  local m, t, p, s = c.model, c.training, c.parallelism, c.system
  for _, k in ipairs({ 'tp', 'pp', 'cp', 'ep' }) do
    if p[k] ~= 1 then
      fail('reference: parallelism.%s = %d: the reference trainer is data parallel only '
        .. '(tp = pp = cp = ep = 1)', k, p[k])
    end
  end
  if p.sequence_parallel then
    fail('reference: parallelism.sequence_parallel: not supported (data parallel only)')
  end
  if m.head_dim * m.num_attention_heads ~= m.hidden_size then
    fail('reference: model.head_dim: %d x %d heads must equal hidden_size %d', m.head_dim,
      m.num_attention_heads, m.hidden_size)
  end
  if m.qkv_bias then
    fail('reference: model.qkv_bias: the reference model has no biases')
  end
  if m.rope_scaling then
    fail('reference: model.rope_scaling: the reference trainer uses plain RoPE (choose a model '
      .. 'without rope_scaling, such as ref-tiny)')
  end
  if t.precision == 'fp8' then
    fail('reference: training.precision: fp8 is not supported (bf16 or fp16)')
  end
  -- Synthetic data by name, else a Megatron indexed dataset (a { path = prefix } or a name
  -- under paths.data, as for Megatron).
  local kind = type(t.dataset) == 'string' and SYNTHETIC[t.dataset]
  local data_path = not kind and c.data.path
  if s.recompute ~= 'none' then
    fail("reference: system.recompute: '%s' is not supported (none)", s.recompute)
  end
  local dir = M.trainer_dir(c)
  local entry = dir .. '/reftrain.py'
  local argv = { M.python(), entry }
  local function add(opt, v)
    argv[#argv + 1] = opt
    if v ~= nil then
      argv[#argv + 1] = type(v) == 'number' and num(v) or tostring(v)
    end
  end
  add('--num-layers', m.num_layers)
  add('--hidden-size', m.hidden_size)
  add('--ffn-hidden-size', m.ffn_hidden_size)
  add('--num-attention-heads', m.num_attention_heads)
  add('--num-query-groups', m.num_kv_heads)
  add('--padded-vocab-size', m.vocab_size)
  add('--max-position-embeddings', m.max_position_embeddings)
  add('--rotary-base', m.rope_theta + 0.0)
  add('--norm-epsilon', m.norm_eps)
  if not m.tie_embeddings then
    add('--untie-embeddings-and-output-weights')
  end
  add('--seed', t.seed)
  add('--init-method-std', t.init_std)
  add('--micro-batch-size', t.mbs)
  add('--global-batch-size', t.gbs)
  add('--seq-length', t.seq_len)
  add('--train-iters', t.iters)
  add('--lr', t.lr)
  add('--min-lr', t.min_lr)
  add('--lr-warmup-iters', t.warmup)
  add('--lr-decay-style', t.decay)
  add('--lr-decay-iters', t.iters)
  add('--weight-decay', t.weight_decay)
  add('--adam-beta1', t.beta1)
  add('--adam-beta2', t.beta2)
  add('--adam-eps', t.eps)
  add('--clip-grad', t.grad_clip)
  add('--log-interval', t.log_interval)
  add(t.precision == 'fp16' and '--fp16' or '--bf16')
  local device = M.device()
  if device then
    add('--device', device)
  end
  if kind then
    add('--mock-data')
    add('--synthetic-kind', kind)
  else
    add('--data-path', data_path)
  end
  local notes = {}
  if not is_file(entry) then
    notes[#notes + 1] = string.format('reference: %s does not exist on this machine (set '
      .. 'paths.framework_dir to the directory that holds reftrain.py)', entry)
  end
  return {
    argv = argv,
    env = { PYTHONUNBUFFERED = '1' },
    files = {},
    parser = M.parser,
    entry = entry,
    launcher = 'torchrun',
    -- Each rank can also be started directly: the trainer reads RANK/WORLD_SIZE or
    -- SLURM_PROCID/SLURM_NTASKS (tp.launch.ranks, one Slurm task per GPU).
    env_init = true,
    notes = notes,
  }
end

--- The unified config of the smoke test (examples/smoke.lua, examples/slurm_smoke.lua): the
--- ref-tiny model, 40 iterations of 4 sequences of 64 tokens per rank on the repeated pattern,
--- so that the loss falls well below ln(256) in under a minute on CPU cores.
---@param gpus_per_node integer ranks per node
---@param nodes? integer (default 1)
---@return table config
function M.smoke_config(gpus_per_node, nodes)
  nodes = nodes or 1
  local world = gpus_per_node * nodes
  return {
    model = 'ref-tiny',
    training = { seed = 1234, mbs = 4, gbs = 4 * world, seq_len = 64, iters = 40, lr = 3e-3,
      min_lr = 3e-4, warmup = 4, decay = 'cosine', precision = 'bf16', dataset = 'mock',
      log_interval = 2 },
    parallelism = { tp = 1, pp = 1, dp = world },
    nodes = nodes,
    gpus_per_node = gpus_per_node,
  }
end

-- The trainer prints Megatron's argument names for what it shares with Megatron.
M.keymap = {}
do
  local megatron = require('tp.frameworks.megatron')
  local skip = {
    ['parallelism.dp'] = false, ['parallelism.distributed_optimizer'] = true,
    ['parallelism.sequence_parallel'] = true, ['parallelism.cp'] = true,
    ['parallelism.ep'] = true, ['system.recompute'] = true, ['system.attention'] = true,
    ['system.fused_kernels'] = true, ['system.cuda_graphs'] = true,
    ['training.fp8_recipe'] = true, ['training.tokenizer'] = true, ['training.dataset'] = true,
    ['model.qkv_bias'] = true,
  }
  for _, e in ipairs(megatron.keymap) do
    if not skip[e.key] then
      M.keymap[#M.keymap + 1] = e
    end
  end
end

--- Reads the unified config back from the trainer's printed arguments.
---@param args table<string, string>
---@return table unified
function M.effective(args)
  return fw._effective(M.keymap, args)
end

return M
