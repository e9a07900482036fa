-- tp.memory: an estimate of the memory one GPU needs to train a dense decoder-only model the way
-- Megatron-LM does it (bf16 weights, fp32 main gradients, fp32 Adam states, optionally sharded by
-- the distributed optimizer), with activations by sequence length and recompute setting.
-- It is an estimate for planning: it decides "fits / tight / exceeds" and prunes sweeps; it never
-- replaces the memory a run reports. docs/recipes.md ("Memory per GPU") derives every term.
--
-- Sources:
-- * Weights, gradients, optimizer states: NVIDIA/Megatron-LM
--   megatron/training/theoretical_memory_usage.py, compute_weight_and_optimizer_memory: 18 bytes
--   per parameter, or 6 + 12 / DP with --use-distributed-optimizer, counted on the most loaded
--   model shard ((transformer block / PP + embedding) / TP, plus the output layer when it is
--   untied and PP = 1). The 4-byte gradient is real for bf16: validate_args in
--   megatron/training/arguments.py turns on accumulate_allreduce_grads_in_fp32 for bf16 unless
--   --grad-reduce-in-bf16 is given.
-- * Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
--   Transformer Models" (arXiv:2205.05198), Table 2 and section 4, generalised to grouped-query
--   attention and SwiGLU and without the attention-score and dropout-mask terms (flash/fused
--   attention keeps no s x s matrix; the adapters set dropout to 0); the pipeline in-flight
--   discount, the embedding input and the output-layer terms follow compute_activation_memory
--   in the same Megatron-LM file.
local models = require('tp.catalog.models')

local M = {}

--- Bytes in a GiB. Catalog memory sizes (tp.hardware `memory_gb`) are HBM capacities, which are
--- binary (an "80 GB" H100 has 5 x 16 GiB stacks), so they are read as GiB.
M.GIB = 1024 * 1024 * 1024

--- Share of the device memory the estimate may fill and still be called 'fits'; between this and
--- 1.0 it is 'tight' (the CUDA/HIP context, NCCL/RCCL buffers and allocator fragmentation take the
--- rest), above 1.0 'exceeds'.
M.FIT_FRACTION = 0.90

local RECOMPUTE = { none = true, selective = true, full = true }

local function misuse(fmt, ...)
  error(string.format(fmt, ...), 3)
end

local function positive_int(name, v, default)
  if v == nil then
    return default
  end
  if math.type(v) ~= 'integer' or v < 1 then
    misuse('tp.memory.estimate: %s must be a positive integer, got %s', name, tostring(v))
  end
  return v
end

local function resolve_model(model)
  if type(model) == 'string' then
    local row, err = models.get(model)
    if not row then
      misuse('tp.memory.estimate: %s', err)
    end
    return row
  elseif type(model) == 'table' then
    return model
  end
  misuse('tp.memory.estimate: model id or model row expected, got %s', type(model))
end

local function resolve_hardware(hw)
  if hw == nil then
    return nil
  end
  if type(hw) == 'string' then
    local row, err = require('tp.catalog.hardware').get(hw)
    if not row then
      misuse('tp.memory.estimate: %s', err)
    end
    return row
  elseif type(hw) == 'table' then
    return hw
  end
  misuse('tp.memory.estimate: hardware id or row expected, got %s', type(hw))
end

---@class tp.memory.Input
---@field model string|table model id (tp.models) or row
---@field mbs integer micro-batch size
---@field seq_len integer sequence length
---@field gbs? integer global batch size (for the pipeline in-flight discount)
---@field tp? integer tensor parallel size (default 1)
---@field pp? integer pipeline parallel size (default 1)
---@field cp? integer context parallel size (default 1)
---@field dp? integer data parallel size (default 1)
---@field sequence_parallel? boolean (default false)
---@field distributed_optimizer? boolean (default true)
---@field recompute? 'none'|'selective'|'full' (default 'none')
---@field hardware? string|table catalog id or row: adds capacity, fraction and status

--- Estimates the memory of the most loaded GPU. Bytes are exact integers where the formula is
--- integral (floats otherwise); `status` is 'fits', 'tight', 'exceeds', or 'unknown' without
--- hardware.
---```lua
---local est = tp.memory.estimate { model = 'llama3.1-8b', mbs = 2, seq_len = 2048, gbs = 64,
---  dp = 8, hardware = 'h100-sxm' }
---print(tp.memory.format(est))
---```
---@param input tp.memory.Input
---@return table estimate {params_total=, params_shard=, bytes = {weights=, gradients=,
---  optimizer=, activations=, logits=, total=}, bytes_per_param=, activation_per_layer=,
---  microbatches=, in_flight=, capacity_bytes=, fraction=, status=, hardware=, model=}
function M.estimate(input)
  if type(input) ~= 'table' then
    misuse('tp.memory.estimate: input table expected, got %s', type(input))
  end
  local known = {
    model = true, mbs = true, seq_len = true, gbs = true, tp = true, pp = true, cp = true,
    dp = true, sequence_parallel = true, distributed_optimizer = true, recompute = true,
    hardware = true,
  }
  for k in pairs(input) do
    if not known[k] then
      misuse("tp.memory.estimate: unknown field '%s'", tostring(k))
    end
  end
  local m = resolve_model(input.model)
  local b = positive_int('mbs', input.mbs)
  local s = positive_int('seq_len', input.seq_len)
  if b == nil or s == nil then
    misuse('tp.memory.estimate: mbs and seq_len are required')
  end
  local t = positive_int('tp', input.tp, 1)
  local p = positive_int('pp', input.pp, 1)
  local c = positive_int('cp', input.cp, 1)
  local d = positive_int('dp', input.dp, 1)
  local gbs = positive_int('gbs', input.gbs)
  local sp = input.sequence_parallel == true
  local dist = input.distributed_optimizer ~= false
  local recompute = input.recompute or 'none'
  if not RECOMPUTE[recompute] then
    misuse("tp.memory.estimate: recompute must be 'none', 'selective' or 'full', got %s",
      tostring(recompute))
  end
  local hw = resolve_hardware(input.hardware)

  -- Parameters of the most loaded shard.
  local total, parts = models.params(m)
  local block = parts.non_embedding
  local embedding = parts.embedding
  local shard = (block / p + embedding) / t
  if parts.lm_head > 0 and p == 1 then
    shard = shard + parts.lm_head / t
  end

  -- Weights (bf16) 2 B, main gradients (fp32) 4 B, optimizer 12 B (fp32 master copy, Adam m and
  -- v), the last sharded over the data-parallel ranks (DP x CP) by the distributed optimizer.
  local opt_per_param = dist and 12 / (d * c) or 12
  local bytes = {
    weights = 2 * shard,
    gradients = 4 * shard,
    optimizer = opt_per_param * shard,
  }

  -- Activations of one transformer layer for one micro-batch, in bytes (Korthikanti et al.
  -- Table 2 terms, 2-byte activations): the inputs of the two norms (2 x 2sbh), of the QKV
  -- projection (2sbh) and of the first MLP matmul (2sbh) are replicated across TP ranks unless
  -- sequence parallelism splits them; Q, K, V (2sb x d_q, 2 x 2sb x d_kv), the input of the
  -- output projection (2sb x d_q), flash attention's fp32 softmax statistics (4sb x heads) and
  -- the SwiGLU MLP (first matmul output 2 x 2sbF, activation output 2sbF) are split by TP.
  local sl = s / c
  local h = m.hidden_size
  local hd = m.head_dim or h // m.num_attention_heads
  local dq = m.num_attention_heads * hd
  local dkv = m.num_kv_heads * hd
  local F = m.ffn_hidden_size
  local replicated = 8 * sl * b * h
  local split = sl * b * (4 * dq + 4 * dkv) + 4 * sl * b * m.num_attention_heads
    + 6 * sl * b * F
  local layer = replicated / (sp and t or 1) + split / t
  local L = m.num_layers

  -- Micro-batches per step and, with pipelining (1F1B), how many the first stage holds: its
  -- L / PP layers for PP micro-batches, i.e. L layers' worth, discounted when there are fewer
  -- micro-batches than stages (compute_activation_memory).
  local microbatches = gbs and gbs // (b * d) or nil
  local discount = 1
  if p > 1 and microbatches then
    discount = math.min(1, microbatches / p)
  end
  local acts
  if recompute == 'full' then
    -- Only each layer's input is kept (2sbh, split by TP under sequence parallelism); the layer
    -- being recomputed needs its full activations once.
    acts = L * (2 * sl * b * h) / (sp and t or 1) * discount + layer
  else
    -- 'selective' recomputes the attention-score part, which flash/fused attention never
    -- stores, so it equals 'none' here.
    acts = L * layer * discount
  end
  -- Token ids of the input (int64) for the micro-batches in flight (compute_activation_memory).
  acts = acts + 8 * sl * b * p
  bytes.activations = acts
  -- Output layer and loss on the last stage, counted when it is also the first (PP = 1):
  -- 4 bytes per logit (fp32 cross entropy) and the final norm output (compute_activation_memory).
  bytes.logits = p == 1 and (4 * sl * b * h + 4 * sl * b * m.vocab_size) / t or 0
  bytes.total = bytes.weights + bytes.gradients + bytes.optimizer + bytes.activations
    + bytes.logits

  local est = {
    model = m.id,
    params_total = total,
    params_shard = shard,
    bytes = bytes,
    bytes_per_param = { weights = 2, gradients = 4, optimizer = opt_per_param },
    activation_per_layer = layer,
    microbatches = microbatches,
    in_flight = p > 1 and math.min(microbatches or p, p) or 1,
    recompute = recompute,
    status = 'unknown',
  }
  if hw and hw.memory_gb then
    est.hardware = hw.id
    est.capacity_bytes = hw.memory_gb * M.GIB
    est.fraction = bytes.total / est.capacity_bytes
    if est.fraction <= M.FIT_FRACTION then
      est.status = 'fits'
    elseif est.fraction <= 1 then
      est.status = 'tight'
    else
      est.status = 'exceeds'
    end
  end
  return est
end

--- Estimates from a unified config (tp.config layout: model, training, parallelism, system,
--- nodes, gpus_per_node) with `dp` derived from the GPU count when absent.
---@param config table unified config
---@param hardware? string|table
---@return table estimate
function M.for_config(config, hardware)
  if type(config) ~= 'table' then
    misuse('tp.memory.for_config: config table expected, got %s', type(config))
  end
  local tr = config.training or {}
  local par = config.parallelism or {}
  local sys = config.system or {}
  local world = (config.nodes or 1) * (config.gpus_per_node or 8)
  local tpn, ppn, cpn = par.tp or 1, par.pp or 1, par.cp or 1
  local dp = par.dp or math.max(1, world // (tpn * ppn * cpn))
  return M.estimate({
    model = config.model, mbs = tr.mbs, seq_len = tr.seq_len, gbs = tr.gbs, tp = tpn, pp = ppn,
    cp = cpn, dp = dp, sequence_parallel = par.sequence_parallel,
    distributed_optimizer = par.distributed_optimizer, recompute = sys.recompute,
    hardware = hardware,
  })
end

--- The compact form of an estimate a run record keeps (`memory.estimate`, docs/record.md):
--- bytes by component, the capacity and verdict, the model and recompute setting.
---```lua
---rec.memory = { estimate = tp.memory.record(tp.memory.for_config(config, 'h100-sxm')) }
---```
---@param est table from estimate
---@return table
function M.record(est)
  local json = require('tp.json')
  local b = est.bytes
  return { source = 'plan', model = est.model, recompute = est.recompute,
    bytes = { weights = b.weights, gradients = b.gradients, optimizer = b.optimizer,
      activations = b.activations, logits = b.logits, total = b.total },
    capacity_bytes = est.capacity_bytes or json.null, hardware = est.hardware or json.null,
    status = est.status }
end

local function gib(x)
  return string.format('%.1f', x / M.GIB)
end

--- Formats an estimate on one line: the parts, the total, and the verdict when known.
---```lua
---print(tp.memory.format(est))
----- weights 15.0 + gradients 29.9 + optimizer 11.2 + activations 17.0 + logits 2.0 = 75.1 GiB
----- of 80 GiB (94%): tight
---```
---@param est table from estimate
---@return string
function M.format(est)
  local b = est.bytes
  local s = string.format('weights %s + gradients %s + optimizer %s + activations %s + '
    .. 'logits %s = %s GiB', gib(b.weights), gib(b.gradients), gib(b.optimizer),
    gib(b.activations), gib(b.logits), gib(b.total))
  if est.capacity_bytes then
    s = s .. string.format(' of %s GiB (%d%%): %s', gib(est.capacity_bytes),
      math.floor(est.fraction * 100 + 0.5), est.status)
  end
  return s
end

return M
