-- tp.models: the model catalog (Llama 3.1 / 3.2, Qwen 2.5): architecture fields, exact
-- parameter counts, and model FLOPs per token for MFU (HARDWARE.md §3 of the design notes).
-- Shapes are the values of each model's published Hugging Face config.json, cited per row.
local catalog_rows = require('tp.catalog._rows')

local M = {}

-- One catalog row: the fields its family shares, then its own; a published model's `source` is
-- its Hugging Face config.json.
local function catalog_row(family, fields)
  local out = { source = string.format('huggingface.co/%s config.json', fields.hf_name) }
  for k, v in pairs(family) do
    out[k] = v
  end
  for k, v in pairs(fields) do
    out[k] = v
  end
  return out
end

-- Llama 3.x rows carry `rope_scaling` (the "llama3" RoPE frequency scaling of their
-- config.json: factor 8 for 3.1, 32 for 3.2), so every framework applies the same positions.
-- Every row: a decoder-only transformer with RMSNorm, SwiGLU MLP, rotary positions and grouped
-- query attention. Qwen 2.5 adds biases on q/k/v (huggingface/transformers
-- src/transformers/models/qwen2/modeling_qwen2.py: q_proj, k_proj, v_proj bias=True).
local LLAMA3 = {
  family = 'llama', num_kv_heads = 8, head_dim = 128, vocab_size = 128256,
  max_position_embeddings = 131072, rope_theta = 500000.0, norm_eps = 1e-5, qkv_bias = false,
}

-- The "llama3" RoPE scaling of a Llama 3.x config.json; a new table for every row.
local function llama3_rope(factor)
  return { type = 'llama3', factor = factor, low_freq_factor = 1.0, high_freq_factor = 4.0,
           original_max_position_embeddings = 8192 }
end

local QWEN2_5 = {
  family = 'qwen', num_kv_heads = 8, head_dim = 128, vocab_size = 152064,
  max_position_embeddings = 131072, rope_theta = 1000000.0, norm_eps = 1e-5,
  tie_embeddings = false, qkv_bias = true,
}

local ROWS = {
  catalog_row(LLAMA3, {
    id = 'llama3.1-8b', hf_name = 'meta-llama/Llama-3.1-8B',
    num_layers = 32, hidden_size = 4096, ffn_hidden_size = 14336, num_attention_heads = 32,
    rope_scaling = llama3_rope(8.0), tie_embeddings = false,
  }),
  catalog_row(LLAMA3, {
    id = 'llama3.1-70b', hf_name = 'meta-llama/Llama-3.1-70B',
    num_layers = 80, hidden_size = 8192, ffn_hidden_size = 28672, num_attention_heads = 64,
    rope_scaling = llama3_rope(8.0), tie_embeddings = false,
  }),
  catalog_row(LLAMA3, {
    id = 'llama3.1-405b', hf_name = 'meta-llama/Llama-3.1-405B',
    num_layers = 126, hidden_size = 16384, ffn_hidden_size = 53248, num_attention_heads = 128,
    rope_scaling = llama3_rope(8.0), tie_embeddings = false,
  }),
  catalog_row(LLAMA3, {
    id = 'llama3.2-1b', hf_name = 'meta-llama/Llama-3.2-1B',
    num_layers = 16, hidden_size = 2048, ffn_hidden_size = 8192, num_attention_heads = 32,
    head_dim = 64, rope_scaling = llama3_rope(32.0), tie_embeddings = true,
  }),
  catalog_row(LLAMA3, {
    id = 'llama3.2-3b', hf_name = 'meta-llama/Llama-3.2-3B',
    num_layers = 28, hidden_size = 3072, ffn_hidden_size = 8192, num_attention_heads = 24,
    rope_scaling = llama3_rope(32.0), tie_embeddings = true,
  }),
  catalog_row(QWEN2_5, {
    id = 'qwen2.5-7b', hf_name = 'Qwen/Qwen2.5-7B',
    num_layers = 28, hidden_size = 3584, ffn_hidden_size = 18944, num_attention_heads = 28,
    num_kv_heads = 4, norm_eps = 1e-6,
  }),
  catalog_row(QWEN2_5, {
    id = 'qwen2.5-14b', hf_name = 'Qwen/Qwen2.5-14B',
    num_layers = 48, hidden_size = 5120, ffn_hidden_size = 13824, num_attention_heads = 40,
  }),
  catalog_row(QWEN2_5, {
    id = 'qwen2.5-32b', hf_name = 'Qwen/Qwen2.5-32B',
    num_layers = 64, hidden_size = 5120, ffn_hidden_size = 27648, num_attention_heads = 40,
  }),
  catalog_row(QWEN2_5, {
    id = 'qwen2.5-72b', hf_name = 'Qwen/Qwen2.5-72B',
    num_layers = 80, hidden_size = 8192, ffn_hidden_size = 29568, num_attention_heads = 64,
  }),
  -- The reference trainer's model (tools/reftrain): the Llama shape scaled down to run on CPU
  -- cores in seconds, over a byte vocabulary (256 ids, the `bytes` tokenizer of tplua data).
  {
    id = 'ref-tiny', family = 'llama', hf_name = 'none',
    num_layers = 2, hidden_size = 64, ffn_hidden_size = 256,
    num_attention_heads = 4, num_kv_heads = 4, head_dim = 16, vocab_size = 256,
    max_position_embeddings = 1024, rope_theta = 10000.0, norm_eps = 1e-5,
    tie_embeddings = true, qkv_bias = false,
    source = 'tplua reference trainer, tools/reftrain/reftrain.py (no published config.json)',
  },
}

local BY_ID = {}
for _, row in ipairs(ROWS) do
  BY_ID[row.id] = row
end

--- FLOPs-per-token conventions: 'megatron' (causal attention, half the score square:
--- NVIDIA/Megatron-LM megatron/training/training.py num_floating_point_operations), 'palm' (the
--- full square: PaLM App. B, nanoGPT estimate_mfu, torchtitan get_num_flop_per_token) and '6n'
--- (Kaplan et al. 2020: 6 x non-embedding parameters, no attention term; for reference).
M.CONVENTIONS = { 'megatron', 'palm', '6n' }

local function copy(row)
  local out = {}
  for k, v in pairs(row) do
    out[k] = v
  end
  return out
end

local function resolve(model, fname)
  if type(model) == 'string' then
    local row = BY_ID[model]
    if not row then
      error(string.format("%s: unknown model '%s' (known: %s)", fname, model,
        table.concat(M.ids(), ', ')), 3)
    end
    return row
  end
  if type(model) ~= 'table' then
    error(string.format('%s: model id or row expected, got %s', fname, type(model)), 3)
  end
  for _, k in ipairs({ 'num_layers', 'hidden_size', 'ffn_hidden_size', 'num_attention_heads',
    'num_kv_heads', 'vocab_size' }) do
    if math.type(model[k]) ~= 'integer' or model[k] <= 0 then
      error(string.format('%s: model field %s must be a positive integer', fname, k), 3)
    end
  end
  return model
end

-- The shape terms of HARDWARE.md §3.2, all integers.
local function shape(m)
  local h, heads = m.hidden_size, m.num_attention_heads
  local d = m.head_dim or h // heads
  return {
    L = m.num_layers, h = h, F = m.ffn_hidden_size, V = m.vocab_size,
    dq = heads * d, dkv = m.num_kv_heads * d,
  }
end

local row_ids, row_get, row_list = catalog_rows.accessors(ROWS, BY_ID, copy, 'tp.models.get',
  "models: unknown model '%s' (known: %s)")

--- Lists the model ids in catalog order.
---@return string[]
M.ids = row_ids

--- Returns a copy of model row `id`, or nil, message, 'ENOENT'.
---@param id string
---@return table|nil row
---@return string? err
---@return string? code
M.get = row_get

--- Returns copies of every row, in catalog order.
---@return table[]
M.list = row_list

--- Counts the parameters of a model (id or row), exactly: per layer q/k/v/o and the three
--- SwiGLU matrices, the q/k/v biases when `qkv_bias`, two RMSNorm vectors; the final norm; the
--- embedding table and, when untied, the LM head.
---```lua
---tp.models.params('llama3.1-8b')  --> 8030261248
---```
---@param model string|table
---@return integer total
---@return table parts {per_layer=, embedding=, lm_head=, non_embedding=, matmul=}
function M.params(model)
  local m = resolve(model, 'tp.models.params')
  local s = shape(m)
  local per_layer = s.h * s.dq + 2 * s.h * s.dkv + s.dq * s.h + 3 * s.h * s.F + 2 * s.h
  if m.qkv_bias then
    per_layer = per_layer + s.dq + 2 * s.dkv
  end
  local embedding = s.V * s.h
  local lm_head = m.tie_embeddings and 0 or s.V * s.h
  local total = s.L * per_layer + s.h + embedding + lm_head
  return total, {
    per_layer = per_layer,
    embedding = embedding,
    lm_head = lm_head,
    non_embedding = total - embedding - lm_head,
    -- Matmul weights incl. the LM head matmul (run even when tied): HARDWARE.md §3.2 N_mm.
    matmul = s.L * (2 * s.h * s.dq + 2 * s.h * s.dkv + 3 * s.h * s.F) + s.h * s.V,
  }
end

--- Training FLOPs per token (forward + backward, no recomputation) of `model` at sequence
--- length `seq_len`: 6 * N_mm + c * L * d_q * T with c = 6 ('megatron', default) or 12
--- ('palm'); '6n' is 6 x non-embedding parameters. Integers, exact.
---```lua
---tp.models.flops_per_token('llama3.1-8b', 2048)                         --> 46638563328
---tp.models.flops_per_token('llama3.1-8b', 2048, { convention = 'palm' }) --> 48249176064
---```
---@param model string|table
---@param seq_len integer
---@param opts? {convention?: 'megatron'|'palm'|'6n'}
---@return integer flops
function M.flops_per_token(model, seq_len, opts)
  local m = resolve(model, 'tp.models.flops_per_token')
  if math.type(seq_len) ~= 'integer' or seq_len <= 0 then
    error(string.format('tp.models.flops_per_token: seq_len must be a positive integer, got %s',
      tostring(seq_len)), 2)
  end
  if opts ~= nil and type(opts) ~= 'table' then
    error('tp.models.flops_per_token: opts must be a table', 2)
  end
  local convention = opts and opts.convention or 'megatron'
  for k in pairs(opts or {}) do
    if k ~= 'convention' then
      error(string.format("tp.models.flops_per_token: unknown option '%s'", tostring(k)), 2)
    end
  end
  local _, parts = M.params(m)
  local s = shape(m)
  if convention == '6n' then
    return 6 * parts.non_embedding
  end
  local c
  if convention == 'megatron' then
    c = 6
  elseif convention == 'palm' then
    c = 12
  else
    error(string.format("tp.models.flops_per_token: unknown convention '%s' (megatron, palm, "
      .. '6n)', tostring(convention)), 2)
  end
  return 6 * parts.matmul + c * s.L * s.dq * seq_len
end

return M
