-- tp.analyse._op_models_norm: the performance models of normalization ops, forward and backward:
-- batch, layer, group, instance and RMS norm (TraceLens's norm_ops, with its Normalization
-- formulas) and vLLM's fused RMS norm ops. Formulas and the differences: docs/ops.md.

local B = require('tp.analyse._op_models_base')

local M = {}

local fail, shape, opt_shape, dtype, conc = B.fail, B.shape, B.opt_shape, B.dtype, B.conc

--- Forward FLOPs of TraceLens's Normalization model: 6 per channel (the per-channel scale,
--- shift and 1/std), 2 per element (scale and shift), 3 more per element when the statistics
--- are computed (training).
function M.flops_fwd(p)
  local f = 6.0 * p.channels + 2.0 * p.elems
  if p.training then
    f = f + 3.0 * p.elems
  end
  return f
end

--- Forward bytes: the input read and the output written once, and per channel mean and
--- variance, weight and bias when affine, and the two running statistics when training.
function M.bytes_fwd(p)
  local tensors = 2
  if p.affine then
    tensors = tensors + 1
    if p.has_bias then
      tensors = tensors + 1
    end
  end
  if p.training then
    tensors = tensors + 2
  end
  return 1.0 * p.elems * (p.bpe_in + p.bpe_out) + 1.0 * tensors * p.channels * p.bpe_in
end

--- Backward FLOPs (TraceLens's flops_func_bwd): per channel 4 per element for the dot
--- product, 5 per element more for the input gradient when training, 2 per element when the
--- input gradient is not asked for, 3 for 1/std when not training.
function M.flops_bwd(p)
  local per = 1.0 * p.elems / p.channels
  local f = (p.training and 0 or 3) + 4 * per
  if p.grad_input then
    if p.training then
      f = f + 5 * per
    end
  else
    f = f + 2 * per
  end
  return p.channels * f
end

--- Backward bytes: grad_out read, the input read (twice when training with an input gradient),
--- 1/std when training, the weight when affine, and its gradients when training.
function M.bytes_bwd(p)
  local reads = (p.grad_input and p.training) and 2 or 1
  local b = 1.0 * p.elems * p.bpe_out + 1.0 * p.elems * p.bpe_in * reads
  if p.training then
    b = b + 1.0 * p.channels * p.bpe_in
  end
  if p.affine then
    b = b + 1.0 * p.channels * p.bpe_in
    if p.training then
      b = b + 1.0 * p.channels * p.bpe_in * (p.has_bias and 2 or 1)
    end
  end
  return b
end

-- The product of a normalized_shape in Concrete Inputs[i], or, when it is not recorded, the
-- size of the weight at Input Dims[w] (or the last dimension of the input).
local function normalized(op, i, w, x, notes)
  local s = conc(op, i)
  local list = B.parse_int_list(s)
  if list then
    local n = 1
    for _, d in ipairs(list) do
      if d < 0 or d > B.MAX_DIM or (d > 0 and n > B.MAX_ELEMS // d) then
        fail('Concrete Inputs[%d] (normalized_shape) is out of range: %s', i, s)
      end
      n = n * d
    end
    return n
  end
  if s ~= nil and s ~= '' then
    fail('Concrete Inputs[%d] (normalized_shape) is not a list of integers: %s', i, B.repr(s))
  end
  local ws = w and opt_shape(op, w)
  if ws then
    notes[#notes + 1] = 'normalized_shape not recorded: the weight\'s size taken'
    return B.numel(ws)
  end
  notes[#notes + 1] = 'normalized_shape not recorded: the last dimension taken'
  return x[#x] or 1
end

-- A flag from Concrete Inputs[i]; `default` (with a note) when it is not recorded.
local function flag(op, i, default, what, notes)
  local v = B.parse_bool(conc(op, i))
  if v == nil then
    if conc(op, i) == nil then
      notes[#notes + 1] = ('%s not recorded: %s assumed'):format(what, tostring(default))
    end
    return default
  end
  return v
end

-- The bytes per element of the input type; a model without it has no bytes.
local function finish(p, op, x_at, notes, backward)
  local bpe = B.bytes_per_element(dtype(op, x_at))
  local flops, bytes
  if p.channels == 0 then
    fail('the normalization has no channels')
  end
  if backward then
    flops = M.flops_bwd(p)
  else
    flops = M.flops_fwd(p)
  end
  if bpe then
    p.bpe_in, p.bpe_out = bpe, bpe
    bytes = backward and M.bytes_bwd(p) or M.bytes_fwd(p)
  end
  p.bpe_in, p.bpe_out = nil, nil
  return { flops = B.num(flops), bytes = bytes and B.num(bytes),
    precision = B.precision_of(dtype(op, x_at)), compute = 'vector', params = p,
    note = B.notes(notes) }
end

-- batch_norm(input, weight, bias, running_mean, running_var, training, ...): the channels are
-- dimension 2 of the input.
local function batch_norm(op)
  local notes = {}
  local x = shape(op, 1, { 2, 8 })
  local p = { elems = B.numel(x), channels = x[2], affine = opt_shape(op, 2) ~= nil,
    has_bias = opt_shape(op, 3) ~= nil, training = flag(op, 6, true, 'training', notes) }
  return finish(p, op, 1, notes, false)
end

-- native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
-- save_invstd, train, eps, output_mask); the cuDNN and MIOpen ones take (input, grad_output,
-- weight, ...) and TraceLens counts them as not training.
local function batch_norm_bwd(op, name)
  local notes = {}
  local vendor = name == 'aten::cudnn_batch_norm_backward'
    or name == 'aten::miopen_batch_norm_backward'
  local x_at = vendor and 1 or 2
  local x = shape(op, x_at, { 2, 8 })
  local p = { elems = B.numel(x), channels = x[2], affine = opt_shape(op, 3) ~= nil,
    has_bias = true }
  if vendor then
    p.training = false
    p.grad_input = true
  else
    p.training = flag(op, 8, true, 'train', notes)
    local mask = B.parse_bool_list(conc(op, 10))
    p.grad_input = mask == nil or mask[1] == true
  end
  return finish(p, op, x_at, notes, true)
end

-- layer_norm(input, normalized_shape, weight, bias, eps, ...): the channels are the
-- normalized elements; always computes its statistics.
local function layer_norm(op)
  local notes = {}
  local x = shape(op, 1)
  local p = { elems = B.numel(x), channels = normalized(op, 2, 3, x, notes),
    affine = opt_shape(op, 3) ~= nil, has_bias = opt_shape(op, 4) ~= nil, training = true }
  return finish(p, op, 1, notes, false)
end

-- native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
-- output_mask): affine and bias from the output mask.
local function layer_norm_bwd(op)
  local notes = {}
  local x = shape(op, 2)
  local mask = B.parse_bool_list(conc(op, 8))
  if mask == nil then
    notes[#notes + 1] = 'output_mask not recorded: every gradient assumed'
    mask = { opt_shape(op, 1) ~= nil, opt_shape(op, 6) ~= nil, opt_shape(op, 7) ~= nil }
  end
  local p = { elems = B.numel(x), channels = normalized(op, 3, 6, x, notes),
    affine = mask[2] == true, has_bias = mask[3] == true, training = true,
    grad_input = mask[1] == true }
  return finish(p, op, 2, notes, true)
end

-- group_norm(input, num_groups, weight, bias, eps, ...) and native_group_norm(input, weight,
-- bias, N, C, HxW, group, eps): TraceLens takes the channels (dimension 2) as its channels.
local function group_norm(w_at)
  return function(op)
    local x = shape(op, 1, { 2, 8 })
    local p = { elems = B.numel(x), channels = x[2], affine = opt_shape(op, w_at) ~= nil,
      has_bias = true, training = true }
    return finish(p, op, 1, {}, false)
  end
end

-- native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
-- output_mask): channels per group as its channels.
local function group_norm_bwd(op)
  local notes = {}
  local x = shape(op, 2, { 2, 8 })
  local groups = B.parse_int(conc(op, 9))
  if groups == nil or groups < 1 then
    notes[#notes + 1] = 'group not recorded: one group assumed'
    groups = 1
  end
  local mask = B.parse_bool_list(conc(op, 10))
  local p = { elems = B.numel(x), channels = x[2] / groups, groups = groups,
    affine = opt_shape(op, 5) ~= nil, has_bias = true, training = true,
    grad_input = mask == nil or mask[1] == true }
  return finish(p, op, 2, notes, true)
end

-- instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, ...)
local function instance_norm(op)
  local notes = {}
  local x = shape(op, 1, { 2, 8 })
  local p = { elems = B.numel(x), channels = x[2], affine = opt_shape(op, 2) ~= nil,
    has_bias = true, training = flag(op, 6, true, 'use_input_stats', notes) }
  return finish(p, op, 1, notes, false)
end

-- RMS norm forward (TraceLens's RMSNorm): per normalized row 2 C + 2 FLOPs for 1/rms, then 1
-- per element (2 with a weight); the input read, the output written, the weight read.
local function rms_result(op, x_at, x, channels, affine, notes, extra)
  local elems = B.numel(x)
  if channels == 0 then
    fail('the normalization has no channels')
  end
  local flops = (1.0 * elems / channels) * (2.0 * channels + 2) + elems * (affine and 2.0 or 1.0)
  local bpe = B.bytes_per_element(dtype(op, x_at))
  local bytes
  if bpe then
    bytes = 2.0 * elems * bpe + (affine and channels * bpe or 0)
  end
  if extra then
    flops = flops + extra.flops
    bytes = bytes and bytes + extra.elems * bpe
  end
  return { flops = B.num(flops), bytes = bytes and B.num(bytes),
    precision = B.precision_of(dtype(op, x_at)), compute = 'vector',
    params = { elems = elems, channels = channels, affine = affine }, note = B.notes(notes) }
end

-- _fused_rms_norm / rms_norm(input, normalized_shape, weight, eps)
local function rms_norm(op)
  local notes = {}
  local x = shape(op, 1)
  return rms_result(op, 1, x, normalized(op, 2, 3, x, notes), opt_shape(op, 3) ~= nil, notes)
end

-- _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)
local function rms_norm_bwd(op)
  local notes = {}
  local x = shape(op, 2)
  local elems = B.numel(x)
  local channels = normalized(op, 3, 5, x, notes)
  if channels == 0 then
    fail('the normalization has no channels')
  end
  local affine = opt_shape(op, 5) ~= nil
  local mask = B.parse_bool_list(conc(op, 6))
  if mask == nil then
    notes[#notes + 1] = 'output_mask not recorded: both gradients assumed'
    mask = { true, true }
  end
  local flops = 1.0 * elems + (affine and elems or 0)
  if mask[1] then
    flops = flops + 6.0 * elems
  end
  if mask[2] and affine then
    flops = flops + elems + (elems / channels > 1 and elems or 0)
  end
  local bpe = B.bytes_per_element(dtype(op, 2))
  local bytes
  if bpe then
    bytes = 3.0 * elems * bpe + (affine and 2.0 * channels * bpe or 0)
  end
  return { flops = B.num(flops), bytes = bytes and B.num(bytes),
    precision = B.precision_of(dtype(op, 2)), compute = 'vector',
    params = { elems = elems, channels = channels, affine = affine, output_mask = mask },
    note = B.notes(notes) }
end

-- vLLM _C::rms_norm(out, input, weight, eps); _C::fused_add_rms_norm(input, residual, weight,
-- eps): residual += input, then input = rms_norm(residual): one add per element and the
-- residual read and written once more.
local function vllm_rms_norm(op)
  local x = shape(op, 2)
  local w = opt_shape(op, 3)
  return rms_result(op, 2, x, x[#x] or 1, w ~= nil, {})
end

local function vllm_fused_add_rms_norm(op)
  local x = shape(op, 1)
  local w = opt_shape(op, 3)
  local n = B.numel(x)
  return rms_result(op, 1, x, x[#x] or 1, w ~= nil, {}, { flops = n, elems = 2.0 * n })
end

local function names(kind, suffix)
  local out = {}
  for _, prefix in ipairs({ 'aten::', 'aten::native_', 'aten::miopen_', 'aten::cudnn_' }) do
    out[#out + 1] = prefix .. kind .. suffix
  end
  return out
end

local function entry(list, category, fn)
  return { names = list, class = 'normalization', category = category, fn = fn }
end

local batch_names = names('batch_norm', '')
batch_names[#batch_names + 1] = 'aten::_batch_norm_impl_index'
local batch_bwd_names = names('batch_norm', '_backward')
local rms_bwd_names = names('rms_norm', '_backward')
rms_bwd_names[#rms_bwd_names + 1] = 'aten::_fused_rms_norm_backward'

M.entries = {
  entry(batch_names, 'NORM_fwd', batch_norm),
  entry(batch_bwd_names, 'NORM_bwd', function(op)
    return batch_norm_bwd(op, op.name)
  end),
  entry(names('layer_norm', ''), 'NORM_fwd', layer_norm),
  entry(names('layer_norm', '_backward'), 'NORM_bwd', layer_norm_bwd),
  entry({ 'aten::group_norm', 'aten::miopen_group_norm', 'aten::cudnn_group_norm' }, 'NORM_fwd',
    group_norm(3)),
  entry({ 'aten::native_group_norm' }, 'NORM_fwd', group_norm(2)),
  entry(names('group_norm', '_backward'), 'NORM_bwd', group_norm_bwd),
  entry(names('instance_norm', ''), 'NORM_fwd', instance_norm),
  entry({ 'aten::_fused_rms_norm', 'aten::rms_norm' }, 'NORM_fwd', rms_norm),
  entry(rms_bwd_names, 'NORM_bwd', rms_norm_bwd),
  entry({ '_C::rms_norm' }, 'NORM_fwd', vllm_rms_norm),
  entry({ '_C::fused_add_rms_norm' }, 'NORM_fwd', vllm_fused_add_rms_norm),
}

return M
