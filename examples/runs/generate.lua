-- Writes the recorded illustration runs of recipes/llama_identical.lua: three MI300X/Primus and
-- three H100/Megatron-LM training logs of the flagship config (500 iterations each) in the
-- frameworks' real log formats, and their run records made by `tplua extract`.
-- Seeded and reproducible: the same tplua gives byte-identical files.
--
--   tplua examples/runs/generate.lua [OUTDIR]     (run from the repository root)
--
-- These are ILLUSTRATIONS derived from published figures, not measurements. How each number is
-- made (examples/runs/llama3.1-8b-identical/README.md says the same):
--
-- * Step time. Each platform's steady step time comes from a published model-TFLOP/s per GPU,
--   converted with the Megatron FLOPs-per-token count of Llama 3.1 8B at sequence length 2048
--   (tp.models.flops_per_token(..., 'megatron') = 46,638,563,328 FLOPs per token):
--     step time = gbs x seq_len x flops_per_token / (gpus x TFLOP/s x 1e12)
--   - H100 SXM: 41% MFU of the 989.4 TFLOP/s dense BF16 peak = 405.65 TFLOP/s, the lowest MFU of
--     NVIDIA's Megatron-LM weak-scaling study on H100 (NVIDIA/Megatron-LM README.md, "Weak Scaling
--     Results": "MFU increases from 41% for the smallest model considered to 47-48%").
--     -> 8,697.8 tokens/s/GPU, 1.8838 s per step (64 x 2048 tokens on 8 GPUs).
--   - MI300X: 474 TFLOP/s per GPU, AMD's figure for Llama 3 8B on 8 x MI300X with Transformer
--     Engine in ROCm/TransformerEngine issue #79 (comment of 2024-10-17: "8xMI300X FSDP TE ...
--     (batch size 4): 474TFLOPs"). That figure was taken with FP8 GEMMs; the thread's title
--     reports FP8 21% slower than BF16 before AMD's fix and gives no BF16 figure after it, so
--     using 474 as the BF16 rate is this illustration's assumption, not a published number.
--     -> 10,163.3 tokens/s/GPU, 1.6121 s per step.
--   Per iteration: a per-run offset (normal, 0.4%), per-iteration noise (normal, 0.8%), one
--   iteration in 100 slower by 3-9%; iteration 1 carries start-up (H100 18-20 s, MI300X 26-29 s),
--   iterations 2 and 3 are 15% and 3% slower.
-- * Loss. ln(128256) = 11.76 is the loss of a uniform guess over the vocabulary; the curve starts
--   at 11.82 and follows L = 5.2 + 6.62 (1 + s/3)^-0.45, where s is the learning rate summed over
--   the iterations so far in units of the peak (so nothing happens while the warm-up rate is
--   tiny): 7.6 at the end of warm-up, about 6.1 at iteration 500. Both platforms read the same
--   data in the same order (same seed), so a shared per-iteration noise (normal, 0.05) is the
--   same on all six runs; each run adds its own numerical noise (normal, 0.008).
-- * Learning rate: Megatron's schedule (megatron/core/optimizer_param_scheduler.py get_lr):
--   linear warm-up to 3e-4 over 50 iterations, cosine decay to 0 at iteration 500.
-- * Gradient norm 0.9 + 9 exp(-i / 15), with 10% multiplicative noise.
local tp = require('tp')

local out_root = arg and arg[1] or 'examples/runs/llama3.1-8b-identical'
local recipe = 'recipes/llama_identical.lua'

-- ---------------------------------------------------------------------------------------------
-- A seeded generator (splitmix64), the same on every machine: tp.stats.rng.

local rng = tp.stats.rng

-- ---------------------------------------------------------------------------------------------
-- The runs: the recipe's own plan, so ids, configs and arguments are exactly what it would run.

local exp = assert(tp.experiment.load(recipe))
local plan = exp:plan({})
assert(plan.ok, 'the recipe plan has errors')

local STEP_S = {
  -- gbs x seq x FLOPs/token / (gpus x TFLOP/s x 1e12); see the header.
  nvd = 64 * 2048 * 46638563328 / (8 * 0.41 * 989.4e12),
  amd = 64 * 2048 * 46638563328 / (8 * 474e12),
}
local STARTUP_S = { nvd = 18.0, amd = 26.0 }
local START = { nvd = { 2026, 3, 2, 9, 0, 0 }, amd = { 2026, 3, 3, 9, 0, 0 } }
local SEED = 20260302
local ITERS = 500
local FLOPS_PER_TOKEN = tp.models.flops_per_token('llama3.1-8b', 2048)

local function lr_at(i, t)
  if i <= t.warmup then
    return t.lr * i / t.warmup
  end
  local ratio = (i - t.warmup) / (t.iters - t.warmup)
  return t.min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (t.lr - t.min_lr)
end

-- The shared data noise: one value per iteration, the same for every run.
local shared = {}
do
  local g = rng(SEED)
  for i = 1, ITERS do
    shared[i] = g.normal() * 0.05
  end
end

-- ---------------------------------------------------------------------------------------------
-- Formatting helpers (Python's str() of argument values, Megatron's number formats).

local function py_float(x)
  if x == math.floor(x) and math.abs(x) < 1e16 then
    return string.format('%.1f', x)
  end
  for d = 1, 17 do
    local s = string.format('%.' .. d .. 'g', x)
    if tonumber(s) == x then
      return s
    end
  end
  return string.format('%.17g', x)
end

-- Megatron's ⟨E:6⟩: 1.176543E+01.
local function e6(x)
  return string.format('%.6E', x)
end

local function timestamp(t, micro)
  local s = math.floor(t)
  local us = math.floor((t - s) * 1e6)
  local base = os.date('!%Y-%m-%d %H:%M:%S', s)
  if micro then
    return base .. string.format('.%06d', us)
  end
  return base
end

local function epoch(parts)
  -- Seconds since 1970 of a UTC date (no time zone involved).
  local y, mo, d, h, mi, s = table.unpack(parts)
  local function leap(year)
    return (year % 4 == 0 and year % 100 ~= 0) or year % 400 == 0
  end
  local days = 0
  for year = 1970, y - 1 do
    days = days + (leap(year) and 366 or 365)
  end
  local mdays = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }
  if leap(y) then
    mdays[2] = 29
  end
  for m = 1, mo - 1 do
    days = days + mdays[m]
  end
  days = days + d - 1
  return ((days * 24 + h) * 60 + mi) * 60 + s
end

-- Arguments whose Megatron type is float: printed by Python as floats (0 -> 0.0).
local FLOAT_ARGS = {
  lr = true, min_lr = true, weight_decay = true, adam_beta1 = true, adam_beta2 = true,
  adam_eps = true, clip_grad = true, init_method_std = true, attention_dropout = true,
  hidden_dropout = true, norm_epsilon = true, rope_scaling_factor = true,
}

-- The argument dump `_print_args` would print for a run: the adapter's settings by their
-- namespace names, plus the arguments Megatron adds itself (world size, data-parallel size,
-- derived flags), sorted case-insensitively (megatron/training/arguments.py _print_args).
local function argument_dump(cfg)
  local fw = require('tp.frameworks')
  local megatron = require('tp.frameworks.megatron')
  local c = fw.normalize(tp.config.for_framework(cfg))
  local args = {}
  for _, e in ipairs(megatron._settings(c, 'megatron')) do
    local v = e.value
    local s
    if type(v) == 'table' then
      local items = {}
      for i, x in ipairs(v) do
        items[i] = "'" .. tostring(x) .. "'"
      end
      s = '[' .. table.concat(items, ', ') .. ']'
    elseif type(v) == 'boolean' then
      s = v and 'True' or 'False'
    elseif type(v) == 'number' then
      s = FLOAT_ARGS[e.dest] and py_float(v + 0.0) or fw._fmt_number(v)
    else
      s = tostring(v)
    end
    if e.dest == 'attention_backend' then
      s = 'AttnBackend.' .. s
    end
    args[e.dest] = s
  end
  local world = c.world
  local extra = {
    accumulate_allreduce_grads_in_fp32 = 'True', data_parallel_size = tostring(c.parallelism.dp),
    world_size = tostring(world), rank = '0', local_rank = '0', fp16 = 'False',
    fp8 = 'None', params_dtype = 'torch.bfloat16', mock_data = 'False',
    sequence_parallel = 'False', recompute_granularity = 'None', transformer_impl =
    'transformer_engine', use_mcore_models = 'True', num_workers = '2',
    dataloader_type = 'single', distributed_backend = 'nccl', ddp_bucket_size = 'None',
    overlap_grad_reduce = 'False', overlap_param_gather = 'False',
    expert_model_parallel_size = '1', virtual_pipeline_model_parallel_size = 'None',
    micro_batch_size = tostring(c.training.mbs), padded_vocab_size = tostring(c.model.vocab_size),
    vocab_size = 'None', lr_decay_samples = 'None', lr_warmup_fraction = 'None',
    lr_warmup_init = '0.0', save = 'None', load = 'None', exit_interval = 'None',
    log_memory_to_tensorboard = 'False', tensorboard_dir = 'None', wandb_project = '',
    check_for_nan_in_loss_and_grad = 'True', deterministic_mode = 'False',
    use_flash_attn = 'False', apply_query_key_layer_scaling = 'False',
    attention_softmax_in_fp32 = 'False', bias_swiglu_fusion = 'True',
    masked_softmax_fusion = 'True', bias_dropout_fusion = 'True', apply_rope_fusion = 'True',
    gradient_accumulation_fusion = 'True', cuda_graph_impl = 'none',
    consumed_train_samples = '0', skipped_train_samples = '0', iteration = '0',
  }
  for k, v in pairs(extra) do
    if args[k] == nil then
      args[k] = v
    end
  end
  local names = {}
  for k in pairs(args) do
    names[#names + 1] = k
  end
  table.sort(names, function(a, b)
    return a:lower() < b:lower()
  end)
  local lines = {}
  for _, k in ipairs(names) do
    local dots = string.rep('.', math.max(0, 48 - #k))
    if #dots > 0 then
      lines[#lines + 1] = string.format('  %s %s %s', k, dots, args[k])
    else
      lines[#lines + 1] = string.format('  %s  %s', k, args[k])
    end
  end
  return lines
end

-- ---------------------------------------------------------------------------------------------
-- The iteration values of one run.

local function simulate(platform, rep)
  local g = rng(SEED + (platform == 'amd' and 1000 or 2000) + rep)
  local t = plan.platforms[platform].config.training
  local offset = 1 + g.normal() * 0.004
  local steps = {}
  local s = 0
  local drift = 0
  for i = 1, ITERS do
    local lr = lr_at(i, t)
    s = s + lr / t.lr
    local step = STEP_S[platform] * offset * (1 + g.normal() * 0.008)
    if g.uniform() < 0.01 then
      step = step * (1.03 + 0.06 * g.uniform())
    end
    if i == 1 then
      step = STARTUP_S[platform] + 2.5 * g.uniform() + step
    elseif i == 2 then
      step = step * 1.15
    elseif i == 3 then
      step = step * 1.03
    end
    drift = drift * 0.98 + g.normal() * 0.002
    local loss = 5.2 + 6.62 * (1 + s / 3) ^ -0.45
    if i == 1 then
      loss = 11.82
    end
    loss = loss + shared[i] * math.min(1, i / 5) + g.normal() * 0.008 + drift
    local gn = (0.9 + 9 * math.exp(-i / 15)) * (1 + 0.1 * g.normal())
    steps[i] = { step = step, loss = loss, lr = lr, grad_norm = math.abs(gn) }
  end
  return steps
end

-- ---------------------------------------------------------------------------------------------
-- Megatron-LM (core_v0.16 style) log.

local function megatron_log(run, steps, start)
  local cfg = run.config
  local t = cfg.training
  local lines = {}
  local function add(s)
    lines[#lines + 1] = s
  end
  local now = start
  add(string.format('using world size: %d, data-parallel size: %d, context-parallel size: 1, '
    .. 'hierarchical context-parallel sizes: None, tensor-model-parallel size: 1, '
    .. 'pipeline-model-parallel size: 1', run.gpus, cfg.parallelism.dp))
  add('accumulate and all-reduce gradients in fp32 for bfloat16 data type.')
  add('using torch.bfloat16 for parameters ...')
  add('------------------------ arguments ------------------------')
  for _, l in ipairs(argument_dump(cfg)) do
    add(l)
  end
  add('-------------------- end of arguments ---------------------')
  add(string.format('INFO:megatron.core.num_microbatches_calculator:setting number of '
    .. 'microbatches to constant %d', t.gbs // (t.mbs * cfg.parallelism.dp)))
  add('> building HuggingFaceTokenizer tokenizer ...')
  add(string.format(' > padded vocab (size: 128256) with 0 dummy tokens (new size: 128256)'))
  add('> initializing torch distributed ...')
  add('> initialized tensor model parallel with size 1')
  add('> initialized pipeline model parallel with size 1')
  add(string.format('> setting random seeds to %d ...', t.seed))
  now = now + 11.742
  add(string.format('time to initialize megatron (seconds): %.3f', 11.742))
  add(string.format('[after megatron is initialized] datetime: %s ', timestamp(now, true)))
  add('building GPT model ...')
  add(string.format(' > number of parameters on (tensor, pipeline) model parallel rank (0, 0): '
    .. '%d', tp.models.params('llama3.1-8b')))
  now = now + 6.318
  add(string.format('[after model, optimizer, and learning rate scheduler are built] datetime: '
    .. '%s ', timestamp(now, true)))
  add('> building train, validation, and test datasets ...')
  add(string.format(' > datasets target sizes (minimum size):'))
  add(string.format('    train:      %d', t.gbs * t.iters))
  add('    validation: 0')
  add('    test:       0')
  now = now + 3.105
  add(string.format('[after dataloaders are built] datetime: %s ', timestamp(now, true)))
  add('done with setup ...')
  add('training ...')
  add(string.format('[before the start of training step] datetime: %s ', timestamp(now, true)))
  local consumed = 0
  local mem = require('tp.memory').for_config(cfg, 'h100-sxm')
  local mib = 1024 * 1024
  for i, s in ipairs(steps) do
    now = now + s.step
    consumed = consumed + t.gbs
    local tflops = FLOPS_PER_TOKEN * t.gbs * t.seq_len / (s.step * run.gpus) / 1e12
    add(string.format(' [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per '
      .. 'iteration (ms): %.1f | throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %s | '
      .. 'global batch size: %5d | lm loss: %s | loss scale: 1.0 | grad norm: %.3f | number of '
      .. 'skipped iterations: %3d | number of nan iterations: %3d |', timestamp(now, true), i,
      t.iters, consumed, s.step * 1000, tflops, e6(s.lr), t.gbs, e6(s.loss), s.grad_norm, 0, 0))
    if i == 1 then
      local wo = (mem.bytes.weights + mem.bytes.gradients + mem.bytes.optimizer) / mib
      local act = mem.bytes.activations / mib
      add(string.format('Theoretical memory footprints: weight and optimizer=%.2f MB, '
        .. 'activation=%.2f MB, total=%.2f MB', wo, act, wo + act))
      add('')
    end
    if i <= 2 then
      local alloc = (mem.bytes.weights + mem.bytes.gradients + mem.bytes.optimizer) / mib + 412.5
      local maxa = alloc + (mem.bytes.activations + mem.bytes.logits) / mib * 0.93
      local reserved = math.floor((maxa + 1536) / 2) * 2
      add(string.format('[Rank 0] (after %d iterations) memory (MB) | allocated: %.2f | max '
        .. 'allocated: %.2f | reserved: %.2f | max reserved: %.2f', i, alloc, maxa + (i - 1)
        * 3.5, reserved, reserved))
    end
  end
  add(string.format('[after training is done] datetime: %s ', timestamp(now + 0.004, true)))
  return table.concat(lines, '\n') .. '\n'
end

-- ---------------------------------------------------------------------------------------------
-- Primus (patch-architecture, v0.6 - v26.4) log: Primus' logger prefix on every Python line,
-- Megatron's argument dump at DEBUG, the rewritten iteration line (instant/mean values, tokens
-- per GPU inside the throughput segment, the memory segment at the end, no trailing '|'); the
-- first `log_avg_skip_iterations` (2) iterations keep Megatron's single values and log
-- "No token throughput" (AMD-AGI/Primus primus/backends/megatron/patches/training_log/
-- print_rank_last_patches.py; primus/core/utils/logger.py).

local ESC = string.char(27)

local function primus_logger()
  local width = 0
  local self = {}
  function self.line(t, rank, level, loc, msg)
    local stamp = os.date('!%Y%m%d %H:%M:%S', math.floor(t))
    width = math.max(width, #loc + 4)
    local location = '[' .. string.rep('-', width - #loc) .. loc .. ']'
    local colour, padded
    if level == 'DEBUG' then
      colour = ESC .. '[34m' .. ESC .. '[1m'
      padded = '[DEBUG]    '
    elseif level == 'WARNING' then
      colour = ESC .. '[33m' .. ESC .. '[1m'
      padded = '[WARNING]  '
    else
      colour = ESC .. '[1m'
      padded = '[INFO]     '
    end
    return string.format('[%s[32m%s%s[0m][%s[36mrank-%d/8%s[0m]%s%s%s[0m%s%s : %s%s[0m', ESC,
      stamp, ESC, ESC, rank, ESC, colour, padded, ESC, colour, location, msg, ESC)
  end
  return self
end

local function primus_log(run, steps, start)
  local cfg = run.config
  local t = cfg.training
  local L = primus_logger()
  local lines = {}
  local function add(s)
    lines[#lines + 1] = s
  end
  local now = start
  local function launcher(tag, msg)
    add(string.format('[%s] [NODE-0(mi300x-node-01)] [INFO] [%s] %s', timestamp(now, false), tag,
      msg))
  end
  launcher('direct', 'Launching: torchrun --nnodes 1 --nproc-per-node 8 --node-rank 0 '
    .. '--master-addr localhost --master-port 1234 primus/cli/main.py train pretrain --config '
    .. run.output .. '/primus_experiment.yaml')
  now = now + 4.2
  add(L.line(now, 0, 'INFO', 'train_runtime.py:121', 'Primus training runtime: backend=megatron, '
    .. 'module=pre_trainer, model=llama3.1_8B.yaml'))
  add(L.line(now, 0, 'INFO', 'megatron_base_trainer.py:68',
    'Patched parse_args(); Primus provided the Megatron arguments'))
  add(L.line(now, 0, 'DEBUG', 'arguments.py:1570',
    '------------------------ arguments ------------------------'))
  for _, l in ipairs(argument_dump(cfg)) do
    add(L.line(now, 0, 'DEBUG', 'arguments.py:1576', l))
  end
  add(L.line(now, 0, 'DEBUG', 'arguments.py:1577',
    '-------------------- end of arguments ---------------------'))
  now = now + 13.4
  add(L.line(now, 0, 'DEBUG', 'utils.py:401', string.format('[after megatron is initialized] '
    .. 'datetime: %s ', timestamp(now, true))))
  add(L.line(now, 0, 'DEBUG', 'training.py:1286', string.format(' > number of parameters on '
    .. '(tensor, pipeline) model parallel rank (0, 0): %d', tp.models.params('llama3.1-8b'))))
  now = now + 7.9
  add(L.line(now, 0, 'DEBUG', 'utils.py:401', string.format('[after dataloaders are built] '
    .. 'datetime: %s ', timestamp(now, true))))
  add(L.line(now, 0, 'DEBUG', 'utils.py:401', 'training ...'))
  local consumed = 0
  local sum, n = 0, 0
  local sum_tf, sum_tok = 0, 0
  local mem = require('tp.memory').for_config(cfg, 'mi300x')
  local gib = 1024 ^ 3
  local used = (mem.bytes.total) / gib + 3.1
  local total = 191.98
  local hip = string.format('hip mem usage/free/total/usage_ratio: %.2fGB/%.2fGB/%.2fGB/%.2f%%',
    used, total - used, total, used / total * 100)
  for i, s in ipairs(steps) do
    now = now + s.step
    consumed = consumed + t.gbs
    local tflops = FLOPS_PER_TOKEN * t.gbs * t.seq_len / (s.step * run.gpus) / 1e12
    local tokens = t.gbs * t.seq_len / s.step / run.gpus
    local elapsed, thr
    if i <= 2 then
      add(L.line(now, 0, 'WARNING', 'print_rank_last_patches.py:475',
        '[Patch:megatron.training_log] No token throughput'))
      elapsed = string.format('%.1f', s.step * 1000)
      thr = string.format('throughput per GPU (TFLOP/s/GPU): %.1f', tflops)
    else
      n = n + 1
      sum = sum + s.step
      sum_tf = sum_tf + tflops
      sum_tok = sum_tok + tokens
      elapsed = string.format('%.1f/%.1f', s.step * 1000, sum / n * 1000)
      thr = string.format('throughput per GPU (TFLOP/s/GPU): %.1f/%.1f  | tokens per GPU '
        .. '(tokens/s/GPU): %.1f/%.1f', tflops, sum_tf / n, tokens, sum_tok / n)
    end
    local msg = string.format('[%s] iteration %8d/%8d | consumed samples: %12d | elapsed time '
      .. 'per iteration (ms): %s | %s | learning rate: %s | global batch size: %5d | lm loss: %s '
      .. '| loss scale: 1.0 | grad norm: %.3f | number of skipped iterations: %3d | number of nan '
      .. 'iterations: %3d | %s', timestamp(now, true), i, t.iters, consumed, elapsed, thr,
      e6(s.lr), t.gbs, e6(s.loss), s.grad_norm, 0, 0, hip)
    add(L.line(now, 7, 'DEBUG', 'utils.py:425', msg))
    if i <= 2 then
      local mib = 1024 * 1024
      local alloc = (mem.bytes.weights + mem.bytes.gradients + mem.bytes.optimizer) / mib + 388.0
      local maxa = alloc + (mem.bytes.activations + mem.bytes.logits) / mib * 0.95
      local reserved = math.floor((maxa + 2048) / 2) * 2
      add(L.line(now, 0, 'DEBUG', 'utils.py:291', string.format('[Rank 0] (after %d iterations) '
        .. 'memory (MB) | allocated: %.2f | max allocated: %.2f | reserved: %.2f | max reserved: '
        .. '%.2f', i, alloc, maxa + (i - 1) * 2.25, reserved, reserved)))
    end
  end
  add(L.line(now, 0, 'DEBUG', 'utils.py:401', string.format('[after training is done] datetime: '
    .. '%s ', timestamp(now + 0.003, true))))
  add(L.line(now, 0, 'INFO', 'megatron_pretrain_trainer.py:117',
    'Megatron pretrain execution completed.'))
  add(L.line(now, 0, 'INFO', 'train_runtime.py:317', 'Training completed.'))
  now = now + 8.4
  launcher('direct', 'torchrun finished successfully (code 0)')
  return table.concat(lines, '\n') .. '\n'
end

-- ---------------------------------------------------------------------------------------------
-- Write the logs, then the records with `tplua extract`.

local fs = tp.fs
local written = {}
for _, p in ipairs({ 'amd', 'nvd' }) do
  local dir = out_root .. '/' .. p
  assert(fs.mkdir_p(dir))
  for _, run in ipairs(plan.platforms[p].runs) do
    local rep = run['repeat']
    local steps = simulate(p, rep)
    local start = epoch(START[p]) + (rep - 1) * 3 * 3600
    local text = p == 'amd' and primus_log(run, steps, start) or megatron_log(run, steps, start)
    local path = string.format('%s/%s.log', dir, run.id)
    assert(fs.write_atomic(path, text))
    written[#written + 1] = { path = path, run = run, dir = dir }
    io.stdout:write(string.format('wrote %s (%d bytes)\n', path, #text))
  end
end

-- The run's identity goes in through `tplua extract`'s flags, as a user who trained elsewhere
-- would give it. No --gpu: no GPU ran these logs, so the records name none (tplua compare and
-- tplua report assume each platform's planned GPU, and say so; --hardware gives another).
local extract = require('tp.cmd.extract')
for _, w in ipairs(written) do
  local run = w.run
  local dataset = run.config.training.dataset
  assert(type(dataset) == 'string', 'the recipe names its dataset')
  local code = extract.run({ '--quiet', '--json-dir', w.dir, '--platform', run.platform,
    '--framework', run.framework, '--model', run.model, '--methodology', run.methodology,
    '--repeat', tostring(run['repeat']), '--run-id', run.id, '--experiment', plan.experiment,
    '--dataset', dataset, w.path })
  assert(code == 0, 'tplua extract failed on ' .. w.path)
  local json_path = w.path:gsub('%.log$', '.json')
  local rec = assert(tp.json.load_file(json_path))
  io.stdout:write(string.format('wrote %s (%d records, %s)\n', json_path, #rec.records,
    rec.status))
end
