-- tp.analyse._op_models_attention: the performance models of attention ops. PyTorch's
-- scaled_dot_product_attention backends (flash, efficient, cuDNN) forward and backward,
-- flash-attn (dense and varlen), FlashAttention-3, aiter / Composable Kernel and Evoformer
-- attention. TraceLens's SDPA formulas, causal masks counted as it counts them; backward ops
-- are modelled from their own Input Dims with TraceLens's backward formula (docs/ops.md).

local B = require('tp.analyse._op_models_base')

local M = {}

local fail, shape, dtype, conc = B.fail, B.shape, B.dtype, B.conc

-- Batch, heads, sequence and head size of a q/k/v shape in the op's layout: 'bhnd'
-- (PyTorch SDPA: [B, H, N, d]) or 'bnhd' (flash-attn, aiter: [B, N, H, d]).
local function bhnd(s, layout)
  if layout == 'bnhd' then
    return s[1], s[3], s[2], s[4]
  end
  return s[1], s[2], s[3], s[4]
end

-- The attention sizes from q, k, v (checked as TraceLens checks them).
local function sizes(op, at, layout)
  local q, k, v = shape(op, at[1], 4), shape(op, at[2], 4), shape(op, at[3], 4)
  local bq, hq, nq, dq = bhnd(q, layout)
  local bk, hk, nk, dk = bhnd(k, layout)
  local bv, hv, nv, dv = bhnd(v, layout)
  if bq ~= bk or bq ~= bv then
    fail('batch sizes differ: q %d, k %d, v %d (Input Dims[%d], [%d], [%d])', bq, bk, bv, at[1],
      at[2], at[3])
  end
  if hk ~= hv then
    fail('k and v head counts differ: %d, %d', hk, hv)
  end
  if nk ~= nv then
    fail('k and v sequence lengths differ: %d, %d', nk, nv)
  end
  if dq ~= dk then
    fail('q and k head sizes differ: %d, %d', dq, dk)
  end
  if hk == 0 and hq > 0 then
    fail('k has no heads')
  end
  return { B = bq, N_Q = nq, H_Q = hq, N_KV = nk, H_KV = hk, d_h_qk = dq, d_h_v = dv }
end

-- The kept share of the scores (1 without a mask).
local function mask_share(p, align)
  if not p.causal or p.N_Q == 0 or p.N_KV == 0 then
    return 1.0
  end
  return B.causal_pairs(p.N_Q, p.N_KV, align) / (1.0 * p.N_Q * p.N_KV)
end

--- Forward FLOPs: 2 N_Q N_KV (d_qk + d_v) per batch and query head, times the causal share.
function M.flops_fwd(p, align)
  local f = 1.0 * p.B * p.H_Q * 2 * p.N_Q * p.N_KV * (p.d_h_qk + p.d_h_v)
  return f * mask_share(p, align)
end

--- Backward FLOPs (TraceLens's flops_bwd): dV, dP, dQ, dK products, the head reduction of dK
--- and dV under GQA, the recomputed QK^T for flash implementations; times the causal share.
function M.flops_bwd(p, align)
  local bh = 1.0 * p.B * p.H_Q
  local qk = bh * 2 * p.N_Q * p.N_KV
  local groups = p.H_KV > 0 and math.max(p.H_Q // p.H_KV - 1, 0) or 0
  local f = qk * p.d_h_v + 1.0 * p.B * p.N_KV * p.d_h_v * groups -- dV = P^T dO
    + qk * p.d_h_v -- dP = dO V^T
    + qk * p.d_h_qk -- dQ = dS K
    + qk * p.d_h_qk + 1.0 * p.B * p.N_KV * p.d_h_qk * groups -- dK = dS^T Q
  if p.flash_impl then
    f = f + qk * p.d_h_qk -- S = Q K^T once more
  end
  return f * mask_share(p, align)
end

local function elems(p)
  local q = 1.0 * p.B * p.N_Q * p.H_Q
  local kv = 1.0 * p.B * p.N_KV * p.H_KV
  return q * p.d_h_qk, kv * p.d_h_qk, kv * p.d_h_v, q * p.d_h_v
end

--- Forward bytes: q, k, v read, the output written.
function M.bytes_fwd(p, bpe)
  local q, k, v, o = elems(p)
  return bpe * (q + k + v + o)
end

--- Backward bytes: q, k, v and dO read, dq, dk, dv written.
function M.bytes_bwd(p, bpe)
  local q, k, v, o = elems(p)
  return bpe * (2 * (q + k + v) + o)
end

-- The causal flag at Concrete Inputs[i] (also tried at `alt`); dropout at `d`.
local function flags(op, p, notes, spec)
  if not B.has_concrete(op) then
    notes[#notes + 1] = 'Concrete Inputs not recorded: no causal mask assumed'
    p.causal, p.dropout = false, 0
    return
  end
  local c = spec.causal and B.parse_bool(conc(op, spec.causal))
  if c == nil and spec.causal_alt then
    c = B.parse_bool(conc(op, spec.causal_alt))
  end
  if spec.mask_type then
    local t = B.parse_int(conc(op, spec.mask_type))
    c = t ~= nil and t ~= 0
    if t == 2 then
      p.align = 'bottom'
    end
  end
  p.causal = c == true
  p.dropout = spec.dropout and B.parse_number(conc(op, spec.dropout)) or 0
end

local function bytes_per_element(op, i, notes)
  local e = B.bytes_per_element(dtype(op, i))
  if e == nil then
    notes[#notes + 1] = 'element type unknown: 2 bytes per element assumed'
    e = 2
  end
  return e
end

-- A model of a dense attention op. spec: at = {q, k, v} (Input Dims positions), layout,
-- causal / causal_alt / mask_type / dropout (Concrete Inputs positions), flash_impl, align
-- ('top' for PyTorch's ops, 'bottom' for flash-attn and aiter), backward, note.
local function attention(spec)
  return function(op)
    local notes = {}
    local p = sizes(op, spec.at, spec.layout or 'bhnd')
    p.flash_impl = spec.flash_impl == true
    p.align = spec.align or 'top'
    flags(op, p, notes, spec)
    local bpe = bytes_per_element(op, spec.at[1], notes)
    local flops, bytes
    if spec.backward then
      flops, bytes = M.flops_bwd(p, p.align), M.bytes_bwd(p, bpe)
    else
      flops, bytes = M.flops_fwd(p, p.align), M.bytes_fwd(p, bpe)
    end
    if spec.note then
      notes[#notes + 1] = spec.note
    end
    return { flops = B.num(flops), bytes = B.num(bytes), precision = B.precision_of(dtype(op,
      spec.at[1])), compute = 'matrix', params = p, note = B.notes(notes) }
  end
end

-- flash-attn's varlen ops: q, k, v are [total tokens, H, d]; with S sequences and the longest
-- max_q (max_k) tokens long, TraceLens counts one sequence of max_q and S - 1 of
-- (total - max_q) // (S - 1) tokens. spec: at, cu_q, cu_k (Input Dims of cu_seqlens), max_q,
-- max_k, dropout, causal (Concrete Inputs), backward.
local function varlen(spec)
  return function(op)
    local notes = {}
    local q, k, v = shape(op, spec.at[1], 3), shape(op, spec.at[2], 3), shape(op, spec.at[3], 3)
    if k[2] ~= v[2] or k[1] ~= v[1] or q[3] ~= k[3] then
      fail('q, k, v shapes do not match: %s, %s, %s', B.repr(q), B.repr(k), B.repr(v))
    end
    local p = { B = 1, N_Q = q[1], H_Q = q[2], N_KV = k[1], H_KV = k[2], d_h_qk = q[3],
      d_h_v = v[3], flash_impl = true, align = 'bottom' }
    if p.H_KV == 0 and p.H_Q > 0 then
      fail('k has no heads')
    end
    flags(op, p, notes, spec)
    local cq, ck = shape(op, spec.cu_q, 1), shape(op, spec.cu_k, 1)
    local sq, sk = cq[1] - 1, ck[1] - 1
    local mq, mk = B.parse_number(conc(op, spec.max_q)), B.parse_number(conc(op, spec.max_k))
    local fn = spec.backward and M.flops_bwd or M.flops_fwd
    local flops
    if sq < 1 or mq == nil or mk == nil then
      notes[#notes + 1] = 'sequence lengths not recorded: all tokens counted as one sequence'
      flops = fn(p, 'bottom')
    else
      if mq < 0 or mk < 0 or mq > p.N_Q or mk > p.N_KV then
        fail('Concrete Inputs[%d] and [%d] (max_seqlen %s, %s) do not fit %d query and %d key '
          .. 'tokens', spec.max_q, spec.max_k, B.repr(mq), B.repr(mk), p.N_Q, p.N_KV)
      end
      local one = { B = 1, N_Q = mq, H_Q = p.H_Q, N_KV = mk, H_KV = p.H_KV, d_h_qk = p.d_h_qk,
        d_h_v = p.d_h_v, causal = p.causal, flash_impl = true }
      flops = fn(one, 'bottom')
      if sq > 1 then
        if sk < 2 then
          fail('Input Dims[%d] holds one sequence of keys for %d of queries', spec.cu_k, sq)
        end
        local rest = { B = 1, N_Q = (p.N_Q - mq) // (sq - 1), H_Q = p.H_Q,
          N_KV = (p.N_KV - mk) // (sk - 1), H_KV = p.H_KV, d_h_qk = p.d_h_qk, d_h_v = p.d_h_v,
          causal = p.causal, flash_impl = true }
        flops = flops + (sq - 1) * fn(rest, 'bottom')
      end
      p.num_seqs_q, p.num_seqs_kv, p.max_seqlen_q, p.max_seqlen_kv = sq, sk, mq, mk
    end
    local bpe = bytes_per_element(op, spec.at[1], notes)
    local bytes = spec.backward and M.bytes_bwd(p, bpe) or M.bytes_fwd(p, bpe)
    return { flops = B.num(flops), bytes = B.num(bytes), precision = B.precision_of(dtype(op,
      spec.at[1])), compute = 'matrix', params = p, note = B.notes(notes) }
  end
end

-- EvoformerAttention(Q, K, V, res_mask, pair_bias), Q [Batch, N_seq, N_res, H, D]: attention
-- over N_res for every (Batch, N_seq), never causal; the mask and bias reads are not counted.
local function evoformer(op)
  local notes = {}
  local q = shape(op, 1, 5)
  local p = { B = q[1] * q[2], N_Q = q[3], H_Q = q[4], N_KV = q[3], H_KV = q[4], d_h_qk = q[5],
    d_h_v = q[5], causal = false, flash_impl = false }
  local bpe = bytes_per_element(op, 1, notes)
  return { flops = B.num(M.flops_fwd(p)), bytes = B.num(M.bytes_fwd(p, bpe)),
    precision = B.precision_of(dtype(op, 1)), compute = 'matrix', params = p,
    note = B.notes(notes) }
end

local WRAP = 'aten::scaled_dot_product_attention runs as one of the _scaled_dot_product_* '
  .. 'backends, whose own rows carry the same FLOPs'
local PACKED = 'with cu_seqlens the packed sequences count as one'

local function fwd(names, spec)
  return { names = names, class = 'attention', category = 'SDPA_fwd', fn = attention(spec) }
end

local function bwd(names, spec)
  spec.backward = true
  return { names = names, class = 'attention', category = 'SDPA_bwd', fn = attention(spec) }
end

local QKV, QKV2 = { 1, 2, 3 }, { 2, 3, 4 }

M.entries = {
  -- PyTorch SDPA backends, [B, H, N, d]
  fwd({ 'aten::_scaled_dot_product_flash_attention' },
    { at = QKV, dropout = 4, causal = 5, flash_impl = true }),
  fwd({ 'aten::_scaled_dot_product_efficient_attention' },
    { at = QKV, dropout = 6, causal = 7 }),
  fwd({ 'aten::_scaled_dot_product_cudnn_attention' }, { at = QKV, dropout = 6, causal = 7 }),
  fwd({ 'aten::scaled_dot_product_attention' },
    { at = QKV, dropout = 5, causal = 6, note = WRAP }),
  bwd({ 'aten::_scaled_dot_product_flash_attention_backward' },
    { at = QKV2, dropout = 11, causal = 12, flash_impl = true }),
  { name = 'aten::_scaled_dot_product_efficient_attention_backward', class = 'attention',
    category = 'SDPA_bwd', fn = function(op)
      -- PyTorch 2.0 had (grad_out, q, k, v, out, logsumexp, is_causal, chunk_grad_outputs, scale)
      if B.ninputs(op) >= 12 then
        return attention({ at = QKV2, dropout = 10, causal = 12, backward = true })(op)
      end
      return attention({ at = QKV2, causal = 7, backward = true })(op)
    end },
  bwd({ 'aten::_scaled_dot_product_cudnn_attention_backward' },
    { at = QKV2, dropout = 14, causal = 15 }),
  -- the kernels' own ops under the SDPA ones, [B, N, H, d]
  fwd({ 'aten::_flash_attention_forward' }, { at = QKV, layout = 'bnhd', dropout = 8, causal = 9,
    flash_impl = true }),
  bwd({ 'aten::_flash_attention_backward' }, { at = QKV2, layout = 'bnhd', dropout = 11,
    causal = 12, flash_impl = true }),
  fwd({ 'aten::_efficient_attention_forward' }, { at = QKV, layout = 'bnhd', dropout = 9,
    mask_type = 10, note = 'custom_mask_type 1 or 2 counted as causal; ' .. PACKED }),
  bwd({ 'aten::_efficient_attention_backward' }, { at = QKV2, layout = 'bnhd', dropout = 12,
    mask_type = 15, note = 'custom_mask_type 1 or 2 counted as causal; ' .. PACKED }),
  -- flash-attn 2 and 3
  fwd({ 'flash_attn::_flash_attn_forward', 'FlashAttnFunc' }, { at = QKV, layout = 'bnhd',
    dropout = 4, causal = 6, flash_impl = true, align = 'bottom' }),
  bwd({ 'flash_attn::_flash_attn_backward' }, { at = QKV2, layout = 'bnhd', dropout = 10,
    causal = 12, causal_alt = 11, flash_impl = true, align = 'bottom' }),
  { name = 'flash_attn::_flash_attn_varlen_forward', class = 'attention', category = 'SDPA_fwd',
    fn = varlen({ at = QKV, cu_q = 4, cu_k = 5, max_q = 6, max_k = 7, dropout = 8, causal = 10 }) },
  { name = 'flash_attn::_flash_attn_varlen_backward', class = 'attention', category = 'SDPA_bwd',
    fn = varlen({ at = QKV2, cu_q = 10, cu_k = 11, max_q = 12, max_k = 13, dropout = 14,
      causal = 16, backward = true }) },
  fwd({ 'flash_attn_3::fwd' }, { at = QKV, layout = 'bnhd', causal = 25, flash_impl = true,
    align = 'bottom' }),
  -- aiter / Composable Kernel
  fwd({ 'aiter::_flash_attn_forward', 'aiter::mha_fwd', 'aiter::fmha_v3_fwd' },
    { at = QKV, layout = 'bnhd', dropout = 4, causal = 6, flash_impl = true, align = 'bottom' }),
  fwd({ 'aiter::wrapper_fmha_v3_fwd' }, { at = QKV2, layout = 'bnhd', dropout = 5, causal = 7,
    flash_impl = true, align = 'bottom' }),
  bwd({ 'aiter::_flash_attn_backward' }, { at = QKV2, layout = 'bnhd', dropout = 11, causal = 13,
    flash_impl = true, align = 'bottom' }),
  bwd({ 'aiter::mha_bwd' }, { at = QKV2, layout = 'bnhd', dropout = 7, causal = 9,
    flash_impl = true, align = 'bottom' }),
  bwd({ 'aiter::fmha_v3_bwd' }, { at = QKV2, layout = 'bnhd', dropout = 7, causal = 9,
    flash_impl = true, align = 'bottom', note = 'argument layout of aiter::mha_bwd assumed' }),
  bwd({ 'aiter::wrapper_fmha_v3_bwd' }, { at = QKV2, layout = 'bnhd', dropout = 8, causal = 10,
    flash_impl = true, align = 'bottom' }),
  { name = 'EvoformerAttention', class = 'attention', category = 'SDPA_fwd', fn = evoformer },
}

return M
