-- tp.analyse._op_models_vector: the performance models of the ops vector units run. Unary and
-- binary elementwise ops and activations (TraceLens's lists and formulas, plus GELU, ReLU,
-- tanh, SiLU and their backward), reductions (TraceLens's reduce_ops), softmax and log-softmax
-- forward and backward, embedding lookups and their backward, and the optimizer steps (fused
-- Adam/AdamW/SGD, the _foreach_ ops). Formulas and where they come from: docs/ops.md.

local B = require('tp.analyse._op_models_base')

local M = {}

local fail, shape, opt_shape, dtype, conc = B.fail, B.shape, B.opt_shape, B.dtype, B.conc
local bpe_of = B.bytes_per_element

local function result(flops, bytes, t, params, notes)
  return { flops = B.num(flops), bytes = bytes and B.num(bytes), precision = B.precision_of(t),
    compute = 'vector', params = params, note = B.notes(notes) }
end

-- Unary elementwise (TraceLens): one FLOP per element of Input Dims[1]; that many elements read
-- at the first input's size and written at the second input's when the op has a second
-- tensor (copy_'s source), else at the first's.
local function unary(op)
  local x = shape(op, 1)
  local n = B.numel(x)
  local t_in = dtype(op, 1)
  local t_out = opt_shape(op, 2) and dtype(op, 2) or t_in
  local e_in, e_out = bpe_of(t_in), bpe_of(t_out)
  local bytes = (e_in and e_out) and (1.0 * n * e_in + 1.0 * n * e_out) or nil
  return result(n, bytes, t_in, { elems = n, shape = x })
end

-- replication_pad{1,2,3}d(self, padding): padding (Concrete Inputs[2]) holds (before, after)
-- pairs from the last dimension inwards; one FLOP per output element, the input read and the
-- output written (TraceLens's model).
local function replication_pad(op)
  local x = shape(op, 1, { 1, 8 })
  local s = conc(op, 2)
  local pad = B.parse_int_list(s)
  if pad == nil or #pad % 2 ~= 0 or #pad // 2 > #x then
    fail('Concrete Inputs[2] (padding) is not a list of (before, after) pairs: %s', B.repr(s))
  end
  local out = {}
  for i = 1, #x do
    out[i] = x[i]
  end
  for i = 1, #pad // 2 do
    local d = #x + 1 - i
    out[d] = out[d] + pad[2 * i - 1] + pad[2 * i]
    if out[d] < 0 or out[d] > B.MAX_DIM then
      fail('Concrete Inputs[2] (padding) gives dimension %d a size of %d', d, out[d])
    end
  end
  local nin, nout = B.numel(x), B.checked_numel(out, 'the padded output')
  local e = bpe_of(dtype(op, 1))
  return result(nout, e and e * (1.0 * nin + nout), dtype(op, 1), { input_shape = x,
    output_shape = out })
end

-- upsample_nearest{1,2,3}d(self, output_size, ...): the output is [N, C] + output_size
-- (Concrete Inputs[2]); one FLOP per output element, the input read and the output written.
local function upsample_nearest(op)
  local x = shape(op, 1, { 3, 5 })
  local s = conc(op, 2)
  local size = B.parse_int_list(s)
  if size == nil or #size ~= #x - 2 then
    fail('Concrete Inputs[2] (output_size) is not %d sizes: %s', #x - 2, B.repr(s))
  end
  local out = { x[1], x[2] }
  for i, d in ipairs(size) do
    if d < 0 or d > B.MAX_DIM then
      fail('Concrete Inputs[2] (output_size) is out of range: %s', s)
    end
    out[i + 2] = d
  end
  local nin, nout = B.numel(x), B.checked_numel(out, 'the upsampled output')
  local e = bpe_of(dtype(op, 1))
  return result(nout, e and e * (1.0 * nin + nout), dtype(op, 1), { input_shape = x,
    output_shape = out })
end

-- The bytes of an operand of a binary op: a Scalar counts as one 4-byte element, as TraceLens
-- counts it.
local function operand_bpe(t)
  if t == 'Scalar' then
    return 4
  end
  return bpe_of(t)
end

local function broadcast(s1, s2)
  local n = math.max(#s1, #s2)
  local out = {}
  for i = 1, n do
    local d1 = s1[#s1 - n + i] or 1
    local d2 = s2[#s2 - n + i] or 1
    if d1 ~= d2 and d1 ~= 1 and d2 ~= 1 then
      fail('Input Dims[1] and [2] cannot be broadcast together: %s and %s', B.repr(s1),
        B.repr(s2))
    end
    out[i] = math.max(d1, d2)
  end
  return out
end

-- The second operand of a binary op: a shape ({} for a scalar).
local function second(op)
  if B.ninputs(op) < 2 then
    fail('Input Dims[2] missing (the op has %d inputs)', B.ninputs(op))
  end
  return opt_shape(op, 2) or {}
end

-- Binary elementwise (TraceLens): one FLOP per output element (the broadcast shape); both
-- inputs read and the output written. The output's size: the out tensor's (Input Dims[3])
-- when given, the larger input's when both are tensors, else the first's.
local function binary(op)
  local s1, s2 = shape(op, 1), second(op)
  local out = broadcast(s1, s2)
  local n1, n2, no = B.numel(s1), B.numel(s2), B.checked_numel(out, 'the broadcast output')
  local t1, t2 = dtype(op, 1), dtype(op, 2)
  local e1, e2 = operand_bpe(t1), operand_bpe(t2)
  local eo
  if opt_shape(op, 3) then
    eo = bpe_of(dtype(op, 3))
  elseif e1 and e2 then
    eo = (#s1 > 0 and #s2 > 0) and math.max(e1, e2) or e1
  end
  local bytes
  if e1 and e2 and eo then
    bytes = 1.0 * n1 * e1 + 1.0 * n2 * e2 + 1.0 * no * eo
  end
  return result(no, bytes, t1, { shape_in1 = s1, shape_in2 = s2, elems = no })
end

-- Reductions (TraceLens's reduce model): one FLOP per input element; the input read and the
-- output written. The output's size from `dim` (Concrete Inputs[2], [3] for the norms) and the
-- last True/False after it (keepdim); cumsum and cumprod keep the input's size.
local function reduce(op)
  local name = op.name
  local x = shape(op, 1)
  local nin = B.numel(x)
  local notes = {}
  local t = dtype(op, 1)
  local e = bpe_of(t)
  local y = opt_shape(op, 2)
  if y and (name == 'aten::max' or name == 'aten::min') then
    -- max(self, other) / min(self, other): elementwise
    local out = broadcast(x, y)
    local no = B.checked_numel(out, 'the broadcast output')
    local bytes = e and e * (1.0 * nin + B.numel(y) + no)
    return result(no, bytes, t, { num_input_elems = nin, num_output_elems = no },
      { 'the elementwise form (two tensors)' })
  end
  local nout
  if name:find('cumsum', 1, true) or name:find('cumprod', 1, true) then
    nout = nin
  else
    local at = name:find('norm', 1, true) and 3 or 2
    local dim
    if not B.has_concrete(op) then
      notes[#notes + 1] = 'Concrete Inputs not recorded: a full reduction assumed'
    else
      local s = conc(op, at)
      dim = B.parse_int_list(s)
      if dim == nil and s ~= nil and s ~= '' then
        fail('Concrete Inputs[%d] (dim) is not a list of integers: %s', at, B.repr(s))
      end
    end
    if dim == nil or #dim == 0 or #x == 0 then
      nout = 1
    else
      local keepdim = false
      for i = at + 1, #op.concrete do
        local v = conc(op, i)
        if v == 'True' or v == 'False' then
          keepdim = v == 'True'
        end
      end
      local drop = {}
      for _, d in ipairs(dim) do
        local dd = d < 0 and #x + d or d
        if dd < 0 or dd >= #x then
          fail('Concrete Inputs[%d] (dim) is out of range for a %d-D input: %d', at, #x, d)
        end
        drop[dd + 1] = true
      end
      nout = 1
      for i = 1, #x do
        if not drop[i] or keepdim then
          nout = nout * (drop[i] and 1 or x[i])
        end
      end
    end
  end
  local bytes = e and (1.0 * nin * e + 1.0 * nout * e)
  return result(nin, bytes, t, { num_input_elems = nin, num_output_elems = nout }, notes)
end

-- ScalarType codes a trace writes for a dtype argument, and their sizes.
local SCALAR_TYPE_BYTES = { [5] = 2, [6] = 4, [7] = 8, [15] = 2 }

-- Softmax and log-softmax forward: 3 FLOPs per element (TraceLens's Softmax model: exp, sum,
-- divide); the input read, the output written (in float with half_to_float, or at `dtype`).
local function softmax(half_to_float)
  return function(op)
    local x = shape(op, 1)
    local n = B.numel(x)
    local t = dtype(op, 1)
    local e_in = bpe_of(t)
    local e_out = e_in
    local a = conc(op, 3)
    if half_to_float then
      if B.parse_bool(a) then
        e_out = 4
      end
    elseif B.parse_int(a) and SCALAR_TYPE_BYTES[B.parse_int(a)] then
      e_out = SCALAR_TYPE_BYTES[B.parse_int(a)]
    end
    local bytes = e_in and (1.0 * n * e_in + 1.0 * n * e_out)
    return result(3.0 * n, bytes, t, { elems = n, shape = x })
  end
end

-- _softmax_backward_data(grad_output, output, dim, input_dtype): 4 FLOPs per element
-- (grad * y, its row sum, the difference, times y); grad_output and output read, the input
-- gradient written (at input_dtype's size when recorded).
local function softmax_bwd(op)
  local g, y = shape(op, 1), shape(op, 2)
  local n = B.numel(g)
  if B.numel(y) ~= n then
    fail('Input Dims[1] and [2] differ: %s and %s', B.repr(g), B.repr(y))
  end
  local eg, ey = bpe_of(dtype(op, 1)), bpe_of(dtype(op, 2))
  local code = B.parse_int(conc(op, 4))
  local ei = code and SCALAR_TYPE_BYTES[code] or eg
  local bytes = (eg and ey and ei) and (1.0 * n * (eg + ey + ei)) or nil
  return result(4.0 * n, bytes, dtype(op, 1), { elems = n, shape = g })
end

-- embedding(weight [V, D], indices, padding_idx, ...): a gather, no FLOPs; the indices and
-- the rows read, the output written.
local function embedding(op)
  local w, idx = shape(op, 1, 2), shape(op, 2)
  local n, d = B.numel(idx), w[2]
  local ew, ei = bpe_of(dtype(op, 1)), bpe_of(dtype(op, 2)) or 8
  local bytes = ew and (1.0 * n * ei + 2.0 * n * d * ew)
  return result(0, bytes, dtype(op, 1), { indices = n, D = d, V = w[1] })
end

-- embedding_dense_backward(grad_output [..., D], indices, num_weights, padding_idx, ...): one
-- add per gradient element; the gradient and indices read, the [num_weights, D] gradient of
-- the table written.
local function embedding_bwd(op)
  local g, idx = shape(op, 1, { 1, 16 }), shape(op, 2)
  local n, d = B.numel(idx), g[#g]
  local notes = {}
  local v = B.parse_int(conc(op, 3))
  if v == nil or v < 0 then
    notes[#notes + 1] = 'num_weights not recorded: the table\'s gradient write not counted'
    v = 0
  end
  local eg, ei = bpe_of(dtype(op, 1)), bpe_of(dtype(op, 2)) or 8
  local bytes = eg and (1.0 * n * d * eg + 1.0 * n * ei + 1.0 * v * d * eg)
  return result(1.0 * n * d, bytes, dtype(op, 1), { indices = n, D = d, V = v }, notes)
end

-- Optimizers ------------------------------------------------------------------------------

local LIST_BPE = 4
local LIST_NOTE = 'a TensorList\'s element type is not recorded: 4 bytes (fp32) per element '
  .. 'assumed'

-- The element count of the TensorList at Input Dims[i].
local function list_elems(op, i)
  local shapes = B.shape_list(op, i)
  if shapes == nil then
    fail('Input Dims[%d] holds no shapes (the profiler records a TensorList\'s shapes only when '
      .. 'it has fewer than 30 tensors)', i)
  end
  local n = 0.0
  for _, s in ipairs(shapes) do
    n = n + B.numel(s)
  end
  return B.num(n), #shapes
end

local function nonzero(op, i)
  local v = B.parse_number(conc(op, i))
  return v ~= nil and v ~= 0
end

-- _fused_adam_ / _fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
-- state_steps, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf):
-- per element 12 FLOPs (both moments, the bias-corrected step), weight decay 2 (Adam) or 1
-- (AdamW), amsgrad 1, unscaling 1; param, exp_avg and exp_avg_sq read and written, grad read,
-- max_exp_avg_sq read and written with amsgrad.
local function fused_adam(decoupled)
  return function(op)
    local n, tensors = list_elems(op, 1)
    local per, access = 12, 7
    if nonzero(op, 10) then
      per = per + (decoupled and 1 or 2)
    end
    if B.parse_bool(conc(op, 12)) then
      per, access = per + 1, access + 2
    end
    if opt_shape(op, 14) then
      per = per + 1
    end
    return { flops = B.num(1.0 * n * per), bytes = B.num(1.0 * n * access * LIST_BPE),
      precision = 'fp32', compute = 'vector',
      params = { elems = n, tensors = tensors, flops_per_elem = per, accesses_per_elem = access },
      note = LIST_NOTE }
  end
end

-- _fused_sgd_(params, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening,
-- nesterov, ...): p -= lr g (2 per element), weight decay 2, momentum 3 (nesterov 2 more);
-- param read and written, grad read, the momentum buffer read and written with momentum.
local function fused_sgd(op)
  local n, tensors = list_elems(op, 1)
  local per, access = 2, 3
  if nonzero(op, 4) then
    per = per + 2
  end
  if nonzero(op, 5) then
    per, access = per + 3, access + 2
    if B.parse_bool(conc(op, 8)) then
      per = per + 2
    end
  end
  return { flops = B.num(1.0 * n * per), bytes = B.num(1.0 * n * access * LIST_BPE),
    precision = 'fp32', compute = 'vector',
    params = { elems = n, tensors = tensors, flops_per_elem = per, accesses_per_elem = access },
    note = LIST_NOTE }
end

-- FLOPs per element of the _foreach_ ops (1 for the others).
local FOREACH_FLOPS = {
  addcmul = 2, addcdiv = 2, lerp = 2, copy = 0, zero = 0, norm = 2, sqrt = 1, mul = 1,
}

-- aten::_foreach_<op>[_](self, ...): the TensorList inputs (all as large as the first) read,
-- one list written (the first, in place, for names ending in '_'); _foreach_zero_ only
-- writes, _foreach_copy_ does not read its destination, _foreach_norm writes one value per
-- tensor.
local function foreach(op)
  local n, tensors = list_elems(op, 1)
  local base = op.name:match('^aten::_foreach_([%w_]-)_?$') or ''
  local lists = 0
  for i = 1, B.ninputs(op) do
    local t = dtype(op, i)
    if t == 'TensorList' or (t == nil and B.is_list(op.dims[i]) and type(op.dims[i][1])
      == 'table') then
      lists = lists + 1
    end
  end
  lists = math.max(lists, 1)
  local reads, writes = lists * n, n
  if base == 'zero' then
    reads = 0
  elseif base == 'copy' then
    reads = (lists - 1) * n
  elseif base == 'norm' then
    writes = tensors
  end
  local per = FOREACH_FLOPS[base] or 1
  return { flops = B.num(1.0 * n * per), bytes = B.num(1.0 * (reads + writes) * LIST_BPE),
    precision = 'fp32', compute = 'vector',
    params = { elems = n, tensors = tensors, lists = lists, flops_per_elem = per },
    note = LIST_NOTE }
end

local function with_prefix(list)
  local out = {}
  for i, n in ipairs(list) do
    out[i] = 'aten::' .. n
  end
  return out
end

--- TraceLens's unary and binary lists, and the activations added to them.
M.UNARY = with_prefix({ 'copy', 'copy_', 'clamp_min', 'clamp_min_', 'clamp_max', 'clamp_max_',
  'sigmoid', 'rsqrt', 'silu', 'neg', 'pow',
  'gelu', 'gelu_', 'relu', 'relu_', 'silu_', 'sigmoid_', 'tanh', 'tanh_', 'neg_', 'rsqrt_',
  'pow_', 'exp', 'exp_', 'log', 'log_', 'sqrt', 'sqrt_', 'abs', 'abs_', 'reciprocal',
  'reciprocal_', 'erf', 'erf_', 'clamp', 'clamp_', 'hardtanh', 'hardtanh_', 'leaky_relu',
  'leaky_relu_', 'elu', 'elu_' })
M.BINARY = with_prefix({ 'div', 'div_', 'mul', 'mul_', 'add', 'add_', 'sigmoid_backward',
  'threshold_backward',
  'sub', 'sub_', 'rsub', 'maximum', 'minimum', 'gelu_backward', 'silu_backward',
  'tanh_backward' })
-- Liger-Kernel's fused SiLU(a) * b
M.BINARY[#M.BINARY + 1] = 'LigerSiLUMulFunction'
M.REDUCE = with_prefix({ 'sum', 'mean', 'max', 'min', 'norm', 'linalg_norm', 'std', 'var',
  'logsumexp', 'cumsum', 'cumprod', 'amin', 'amax', 'linalg_vector_norm' })

M.entries = {
  { names = M.UNARY, class = 'elementwise', category = 'UnaryElementwise', fn = unary },
  { names = M.BINARY, class = 'elementwise', category = 'BinaryElementwise', fn = binary },
  { names = with_prefix({ 'replication_pad1d', 'replication_pad2d', 'replication_pad3d' }),
    class = 'elementwise', category = 'UnaryElementwise', fn = replication_pad },
  { names = with_prefix({ 'upsample_nearest1d', 'upsample_nearest2d', 'upsample_nearest3d' }),
    class = 'elementwise', category = 'UnaryElementwise', fn = upsample_nearest },
  { names = M.REDUCE, class = 'elementwise', category = 'Reduce', fn = reduce },
  { names = { 'aten::_softmax', 'aten::_log_softmax' }, class = 'elementwise',
    category = 'Softmax', fn = softmax(true) },
  { names = { 'aten::softmax', 'aten::log_softmax' }, class = 'elementwise', category = 'Softmax',
    fn = softmax(false) },
  { names = { 'aten::_softmax_backward_data', 'aten::_log_softmax_backward_data' },
    class = 'elementwise', category = 'Softmax', fn = softmax_bwd },
  { name = 'aten::embedding', class = 'other', category = 'Embedding', fn = embedding },
  { name = 'aten::embedding_dense_backward', class = 'other', category = 'Embedding',
    fn = embedding_bwd },
  { names = { 'aten::_fused_adam_', 'aten::_fused_adam' }, class = 'optimizer',
    category = 'Optimizer', fn = fused_adam(false) },
  { names = { 'aten::_fused_adamw_', 'aten::_fused_adamw' }, class = 'optimizer',
    category = 'Optimizer', fn = fused_adam(true) },
  { names = { 'aten::_fused_sgd_', 'aten::_fused_sgd' }, class = 'optimizer',
    category = 'Optimizer', fn = fused_sgd },
  { pattern = '^aten::_foreach_', class = 'optimizer', category = 'Optimizer', fn = foreach },
}

return M
