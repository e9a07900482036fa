-- tp.analyse._op_models_gemm: the performance models of matrix products (aten::mm, addmm, bmm,
-- baddbmm, _scaled_mm, matmul, linear; Transformer Engine and hipBLASLt GEMM ops) and of
-- convolutions (aten::convolution and its backward, the cuDNN and MIOpen ops, conv1d/2d/3d).
-- Each entry follows TraceLens's formula where TraceLens has one (docs/ops.md says where not).

local B = require('tp.analyse._op_models_base')

local M = {}

local fail, shape, opt_shape, dtype, conc = B.fail, B.shape, B.opt_shape, B.dtype, B.conc
local bpe_of, prec = B.bytes_per_element, B.precision_of

-- The result of a GEMM-like model.
local function gemm_result(g)
  local bias = g.bias == true
  return {
    flops = B.gemm_flops(g.B, g.M, g.N, g.K, bias),
    bytes = B.gemm_bytes(g.B, g.M, g.N, g.K, bias, g.bpe_a, g.bpe_b, g.bpe_bias, g.bpe_out),
    precision = prec(g.dtype),
    compute = 'matrix',
    params = { B = g.B, M = g.M, N = g.N, K = g.K, bias = bias },
    note = B.notes(g.notes),
  }
end

local function check_inner(ka, kb, ia, ib)
  if ka ~= kb then
    fail('inner dimensions differ: Input Dims[%d] has K = %d, Input Dims[%d] has K = %d', ia, ka,
      ib, kb)
  end
end

-- aten::mm(self [M, K], mat2 [K, N]); every operand at the bytes of the first input's type.
local function mm(op)
  local a, b = shape(op, 1, 2), shape(op, 2, 2)
  check_inner(a[2], b[1], 1, 2)
  local e = bpe_of(dtype(op, 1))
  return gemm_result({ B = 1, M = a[1], N = b[2], K = a[2], bias = false, bpe_a = e, bpe_b = e,
    bpe_out = e, dtype = dtype(op, 1) })
end

-- aten::addmm(bias, mat1 [M, K], mat2 [K, N], beta, alpha): M N more FLOPs, N more elements.
local function addmm(op)
  local a, b = shape(op, 2, 2), shape(op, 3, 2)
  check_inner(a[2], b[1], 2, 3)
  local e = bpe_of(dtype(op, 2))
  return gemm_result({ B = 1, M = a[1], N = b[2], K = a[2], bias = true, bpe_a = e, bpe_b = e,
    bpe_bias = e, bpe_out = e, dtype = dtype(op, 2) })
end

-- aten::bmm(self [Bt, M, K], mat2 [Bt, K, N]); aten::baddbmm(bias, batch1, batch2, ...).
local function bmm_at(first, bias)
  return function(op)
    local a, b = shape(op, first, 3), shape(op, first + 1, 3)
    check_inner(a[3], b[2], first, first + 1)
    local e = bpe_of(dtype(op, first))
    return gemm_result({ B = a[1], M = a[2], N = b[3], K = a[3], bias = bias, bpe_a = e,
      bpe_b = e, bpe_bias = e, bpe_out = e, dtype = dtype(op, first) })
  end
end

-- aten::_scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, fast_accum):
-- both operands at the first one's size; output 2 bytes for 1-byte (FP8) inputs, else the same.
local function scaled_mm(op)
  local a, b = shape(op, 1, 2), shape(op, 2, 2)
  check_inner(a[2], b[1], 1, 2)
  local e = bpe_of(dtype(op, 1))
  local out = e == 1 and 2 or ((e == 2 or e == 4) and e or nil)
  local bias = B.ninputs(op) == 3 or opt_shape(op, 5) ~= nil
  return gemm_result({ B = 1, M = a[1], N = b[2], K = a[2], bias = bias, bpe_a = e, bpe_b = e,
    bpe_bias = e, bpe_out = out, dtype = dtype(op, 1),
    notes = { 'the scale factors are not counted' } })
end

-- Broadcasts two batch shapes (NumPy rules).
local function broadcast(s1, s2, what)
  local n = math.max(#s1, #s2)
  local out = {}
  for i = 1, n do
    local d1 = s1[#s1 - n + i] or 1
    local d2 = s2[#s2 - n + i] or 1
    if d1 ~= d2 and d1 ~= 1 and d2 ~= 1 then
      fail('%s cannot be broadcast together: %s and %s', what, B.repr(s1), B.repr(s2))
    end
    out[i] = math.max(d1, d2)
  end
  return out
end

local function prefix(s, n)
  local out = {}
  for i = 1, n do
    out[i] = s[i]
  end
  return out
end

-- aten::matmul(self, other): NumPy matmul, 1-D operands included.
local function matmul(op)
  local a, b = shape(op, 1, { 1, 16 }), shape(op, 2, { 1, 16 })
  local Mm, K, N, ka, kb
  local ba, bb = {}, {}
  if #a == 1 then
    Mm, ka = 1, a[1]
  else
    Mm, ka, ba = a[#a - 1], a[#a], prefix(a, #a - 2)
  end
  if #b == 1 then
    N, kb = 1, b[1]
  else
    kb, N, bb = b[#b - 1], b[#b], prefix(b, #b - 2)
  end
  check_inner(ka, kb, 1, 2)
  K = ka
  local batch = B.checked_numel(broadcast(ba, bb, 'the batch dimensions of Input Dims[1] and [2]'),
    'the broadcast batch')
  local e = bpe_of(dtype(op, 1))
  local bytes
  if e then
    bytes = B.num(e * (1.0 * B.numel(ba) * Mm * K + 1.0 * B.numel(bb) * K * N
      + 1.0 * batch * Mm * N))
  end
  return {
    flops = B.gemm_flops(batch, Mm, N, K, false),
    bytes = bytes,
    precision = prec(dtype(op, 1)),
    compute = 'matrix',
    params = { B = batch, M = Mm, N = N, K = K, bias = false },
    note = 'aten::matmul runs as aten::mm or aten::bmm (or a dot product), whose own rows carry '
      .. 'the same FLOPs',
  }
end

-- aten::linear(input [..., K], weight [N, K], bias [N]?): M is the product of input's leading
-- dimensions.
local function linear(op)
  local x, w = shape(op, 1, { 1, 16 }), shape(op, 2, 2)
  local bias = opt_shape(op, 3, { 1, 2 }) ~= nil
  check_inner(x[#x], w[2], 1, 2)
  local e = bpe_of(dtype(op, 1))
  return gemm_result({ B = 1, M = B.numel(prefix(x, #x - 1)), N = w[1], K = w[2], bias = bias,
    bpe_a = e, bpe_b = e, bpe_bias = e, bpe_out = e, dtype = dtype(op, 1),
    notes = { 'aten::linear runs as aten::addmm or aten::mm, whose own rows carry the same '
      .. 'FLOPs' } })
end

-- tex_ts::te_gemm_ts (Transformer Engine, TorchScript): A at input 1, B at 6, D (output) at 11,
-- transa and transb at Concrete Inputs 5 and 10 ('1' = transposed), the bias at 15 and 19.
local function te_gemm_ts(op)
  local a, b = shape(op, 1, 2), shape(op, 6, 2)
  local notes = {}
  local ta, tb = conc(op, 5), conc(op, 10)
  if ta == nil or tb == nil then
    notes[#notes + 1] = 'transa/transb not recorded: TN layout (transa, not transb) assumed'
    ta, tb = ta or '1', tb or '0'
  end
  local Mm, K
  if ta == '1' then
    Mm, K = a[1], a[2]
  else
    Mm, K = a[2], a[1]
  end
  local N = tb == '1' and b[2] or b[1]
  local bias_arg = conc(op, 15)
  local bias = bias_arg ~= nil and bias_arg ~= ''
  return gemm_result({ B = 1, M = Mm, N = N, K = K, bias = bias,
    bpe_a = bpe_of(dtype(op, 1)), bpe_b = bpe_of(dtype(op, 6)), bpe_out = bpe_of(dtype(op, 11)),
    bpe_bias = bpe_of(dtype(op, 19)), dtype = dtype(op, 1), notes = notes })
end

-- TraceLens's Transformer Engine v2 GEMM pseudo ops (A [M, K], B [K, N]): the output is
-- 2 bytes per element whatever the inputs.
local function tev2_gemm(op)
  local a, b = shape(op, 1, 2), shape(op, 2, 2)
  check_inner(a[2], b[1], 1, 2)
  local e = bpe_of(dtype(op, 1))
  return gemm_result({ B = 1, M = a[1], N = b[2], K = a[2], bias = false, bpe_a = e, bpe_b = e,
    bpe_out = 2, dtype = dtype(op, 1) })
end

-- Transformer Engine's autograd functions _Linear(weight [N, K], input [..., K], bias, ...) and
-- _LayerNormLinear(input, ln_weight, ln_bias, weight, ...): the forward GEMM only.
local function te_linear(w_at, x_at, bias_at, what)
  return function(op)
    local w, x = shape(op, w_at, 2), shape(op, x_at, { 1, 16 })
    check_inner(x[#x], w[2], x_at, w_at)
    -- a bias is a 1-D input of N elements there; anything else there is not a bias
    local raw = bias_at and op.dims[bias_at]
    local bias = B.is_list(raw) and #raw == 1 and raw[1] == w[1] and w[1] > 0
    local ex = bpe_of(dtype(op, x_at))
    return gemm_result({ B = 1, M = B.numel(prefix(x, #x - 1)), N = w[1], K = w[2], bias = bias,
      bpe_a = ex, bpe_b = bpe_of(dtype(op, w_at)), bpe_bias = ex, bpe_out = ex,
      dtype = dtype(op, x_at), notes = { what } })
  end
end

-- primus_turbo hipblaslt_gemm_fp8(A, scaleA_inv, B, scaleB_inv, out_dtype, transA, transB,
-- transC, granularity): transC swaps the operands as the C++ code does; FP8 in, 2 bytes out.
local function hipblaslt_fp8(op)
  local a, b = shape(op, 1, 2), shape(op, 3, 2)
  local ta = B.parse_bool(conc(op, 6)) or false
  local tb = B.parse_bool(conc(op, 7)) or false
  local tc = B.parse_bool(conc(op, 8)) or false
  local ea, eb = bpe_of(dtype(op, 1)), bpe_of(dtype(op, 3))
  if tc then
    a, b = b, a
    ta, tb = not tb, not ta
    ea, eb = eb, ea
  end
  local Mm = ta and a[2] or a[1]
  local K = ta and a[1] or a[2]
  local N = tb and b[1] or b[2]
  local out = ea and (ea == 1 and 2 or ea)
  return gemm_result({ B = 1, M = Mm, N = N, K = K, bias = false, bpe_a = ea, bpe_b = eb,
    bpe_out = out, dtype = dtype(op, 1), notes = { 'the scale factors are not counted' } })
end

-- vllm::gemm_with_dynamic_quant: the first two 2-D inputs are x [M, K] and weight [N, K'].
local function vllm_dynamic_quant(op)
  local found = {}
  for i = 1, B.ninputs(op) do
    local s = opt_shape(op, i)
    if s and #s == 2 then
      found[#found + 1] = s
      if #found == 2 then
        break
      end
    end
  end
  if #found < 2 then
    fail('Input Dims has fewer than two 2-D shapes')
  end
  local a, w = found[1], found[2]
  local e = bpe_of(dtype(op, 1))
  return gemm_result({ B = 1, M = a[1], N = w[1], K = a[2], bias = false, bpe_a = e, bpe_b = e,
    bpe_out = e, dtype = dtype(op, 1) })
end

-- Convolutions ----------------------------------------------------------------------------

-- The output size of a convolution along one dimension, truncated toward zero as TraceLens's
-- int() does.
local function conv_out(n, k, s, p, d)
  local q = (n + 2.0 * p - 1.0 * d * (k - 1) - 1) / s + 1
  return q >= 0 and math.floor(q) or math.ceil(q)
end

-- A list parameter of a convolution (stride, padding, ...) from Concrete Inputs[i]: nil when
-- the entry is absent or empty, broadcast to `nd` values when it holds one.
local function conv_param(op, i, nd, what)
  local s = conc(op, i)
  if s == nil or s == '' then
    return nil
  end
  local v = B.parse_int_list(s)
  if v == nil then
    fail('Concrete Inputs[%d] (%s) is not a list of integers: %s', i, what, B.repr(s))
  end
  if #v == 1 and nd > 1 then
    for j = 2, nd do
      v[j] = v[1]
    end
  end
  if #v ~= nd then
    fail('Concrete Inputs[%d] (%s) has %d values for %d spatial dimensions', i, what, #v, nd)
  end
  for j = 1, nd do
    if v[j] < 0 or v[j] > B.MAX_DIM
      or (what ~= 'padding' and what ~= 'output_padding' and v[j] == 0) then
      fail('Concrete Inputs[%d] (%s) is out of range: %s', i, what, s)
    end
  end
  return v
end

local function fill(nd, value)
  local v = {}
  for j = 1, nd do
    v[j] = value
  end
  return v
end

-- Reads a convolution's shapes and parameters. `at` gives the 1-based positions: x, w, bias
-- (Input Dims), stride, padding, dilation, transposed, output_padding, groups (Concrete
-- Inputs); a missing position means the op has no such argument.
local function conv_params(op, at)
  local x = shape(op, at.x, { 3, 5 })
  local w = shape(op, at.w, #x)
  local nd = #x - 2
  local notes = {}
  local c = {
    x = x, w = w, nd = nd, notes = notes,
    bias = at.bias and opt_shape(op, at.bias) ~= nil or false,
  }
  if not B.has_concrete(op) then
    notes[#notes + 1] = 'Concrete Inputs not recorded: stride 1, dilation 1, a padding that '
      .. 'keeps the spatial size and the groups the channel counts give are assumed'
    c.stride, c.dilation, c.output_padding = fill(nd, 1), fill(nd, 1), fill(nd, 0)
    c.padding = {}
    for j = 1, nd do
      c.padding[j] = (w[j + 2] - 1) // 2
    end
    c.transposed = false
  else
    c.stride = at.stride and conv_param(op, at.stride, nd, 'stride') or fill(nd, 1)
    c.padding = at.padding and conv_param(op, at.padding, nd, 'padding') or fill(nd, 0)
    c.dilation = at.dilation and conv_param(op, at.dilation, nd, 'dilation') or fill(nd, 1)
    c.output_padding = at.output_padding and conv_param(op, at.output_padding, nd,
      'output_padding') or fill(nd, 0)
    c.transposed = at.transposed and B.parse_bool(conc(op, at.transposed)) or false
    c.groups = at.groups and B.parse_int(conc(op, at.groups)) or nil
  end
  if c.groups == nil then
    -- the weight holds C_in / groups input channels (a transposed one does not say)
    local per = w[2]
    c.groups = (not c.transposed and per > 0 and x[2] % per == 0) and x[2] // per or 1
  end
  if c.groups < 1 or c.groups > B.MAX_DIM then
    fail('the convolution has %d groups', c.groups)
  end
  local cout = c.transposed and 1.0 * w[2] * c.groups or w[1]
  if cout > B.MAX_DIM then
    fail('the convolution has more than 2^40 output channels')
  end
  local out = { x[1], math.tointeger(cout) }
  for j = 1, nd do
    local n, k = x[j + 2], w[j + 2]
    local o
    if c.transposed then
      o = (n - 1.0) * c.stride[j] - 2.0 * c.padding[j] + 1.0 * c.dilation[j] * (k - 1)
        + c.output_padding[j] + 1
    else
      o = conv_out(n, k, c.stride[j], c.padding[j], c.dilation[j])
    end
    if o < 0 then
      fail('the convolution output is empty along spatial dimension %d (input %d, kernel %d)', j,
        n, k)
    end
    if o > B.MAX_DIM then
      fail('the convolution output is over 2^40 along spatial dimension %d', j)
    end
    out[j + 2] = math.tointeger(o)
  end
  B.checked_numel(out, 'the convolution output')
  c.out = out
  local tx, tw = dtype(op, at.x), dtype(op, at.w)
  if tx and tw and tx ~= tw then
    notes[#notes + 1] = ('input and weight types differ (%s, %s): bytes at the input\'s size')
      :format(tx, tw)
  end
  c.dtype = tx
  c.bpe = bpe_of(tx)
  return c
end

local function rest(s, from)
  local n = 1
  for j = from, #s do
    n = n * s[j]
  end
  return n
end

local function conv_info(c)
  return { input_shape = c.x, filter_shape = c.w, output_shape = c.out, stride = c.stride,
    padding = c.padding, dilation = c.dilation, groups = c.groups, transposed = c.transposed,
    bias = c.bias, convNd = ('conv%dd'):format(c.nd) }
end

-- The forward FLOPs and bytes (TraceLens's CONV model): 2 prod(w[2:]) per output element (per
-- input element when transposed), the output once more for a bias; x, w, bias (C_out) and the
-- output read or written once.
local function conv_forward(at)
  return function(op)
    local c = conv_params(op, at)
    local per = 2.0 * rest(c.w, 2)
    local flops = (c.transposed and B.numel(c.x) or B.numel(c.out)) * per
    if c.bias then
      flops = flops + B.numel(c.out)
    end
    local bytes
    if c.bpe then
      bytes = c.bpe * (1.0 * B.numel(c.x) + B.numel(c.w) + B.numel(c.out)
        + (c.bias and c.out[2] or 0))
    end
    return { flops = B.num(flops), bytes = bytes and B.num(bytes), precision = prec(c.dtype),
      compute = 'matrix', params = conv_info(c), note = B.notes(c.notes) }
  end
end

local function transpose01(s)
  local t = { s[2], s[1] }
  for j = 3, #s do
    t[j] = s[j]
  end
  return t
end

-- aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
-- transposed, output_padding, groups, output_mask): the gradients output_mask asks for.
local function conv_backward(op)
  local c = conv_params(op, { x = 2, w = 3, stride = 5, padding = 6, dilation = 7, transposed = 8,
    output_padding = 9, groups = 10 })
  local mask = B.parse_bool_list(conc(op, 11))
  if mask == nil or #mask < 2 then
    c.notes[#c.notes + 1] = 'output_mask not recorded: input and weight gradients assumed'
    mask = { true, true, false }
  end
  c.bias = mask[3] == true
  local nx, nw, no = B.numel(c.x), B.numel(c.w), B.numel(c.out)
  local flops, elems = 0.0, 0.0
  if mask[1] then
    -- the input gradient is the transposed convolution of the output gradient
    flops = flops + 2.0 * rest(c.w, 2) * (c.transposed and nx or no)
    elems = elems + no + nw + nx
  end
  if mask[2] then
    local tsp = c.transposed and transpose01(c.x) or transpose01(c.out)
    flops = flops + 2.0 * nw * rest(tsp, 2)
    elems = elems + no + nx + nw
  end
  if mask[3] then
    flops = flops + no
    elems = elems + no + c.out[2]
  end
  local info = conv_info(c)
  info.output_mask = mask
  return { flops = B.num(flops), bytes = c.bpe and B.num(c.bpe * elems), precision = prec(c.dtype),
    compute = 'matrix', params = info, note = B.notes(c.notes) }
end

-- aten::cudnn_convolution(self, weight, padding, stride, dilation, groups, ...); releases before
-- PyTorch 1.8 had a bias third, which shifts the rest by one.
local function cudnn_conv(op)
  if B.parse_int_list(conc(op, 3)) ~= nil or not B.has_concrete(op) then
    return conv_forward({ x = 1, w = 2, padding = 3, stride = 4, dilation = 5, groups = 6 })(op)
  end
  return conv_forward({ x = 1, w = 2, bias = 3, padding = 4, stride = 5, dilation = 6,
    groups = 7 })(op)
end

local CONV = { x = 1, w = 2, bias = 3, stride = 4, padding = 5, dilation = 6, transposed = 7,
  output_padding = 8, groups = 9 }

M.entries = {
  { name = 'aten::mm', class = 'gemm', category = 'GEMM', fn = mm },
  { name = 'aten::addmm', class = 'gemm', category = 'GEMM', fn = addmm },
  { name = 'aten::bmm', class = 'gemm', category = 'GEMM', fn = bmm_at(1, false) },
  { name = 'aten::baddbmm', class = 'gemm', category = 'GEMM', fn = bmm_at(2, true) },
  { name = 'aten::_scaled_mm', class = 'gemm', category = 'GEMM', fn = scaled_mm },
  { name = 'aten::matmul', class = 'gemm', category = 'GEMM', fn = matmul },
  { name = 'aten::linear', class = 'gemm', category = 'GEMM', fn = linear },
  { name = 'tex_ts::te_gemm_ts', class = 'gemm', category = 'GEMM', fn = te_gemm_ts },
  { names = { '_Linear_yfwd_mm', '_LinearBackward_xgrad_mm', '_LinearBackward_wgrad_mm',
    '_LayerNormLinear_yfwd_mm', '_LayerNormLinearBackward_xgrad_mm',
    '_LayerNormLinearBackward_wgrad_mm' }, class = 'gemm', category = 'GEMM', fn = tev2_gemm },
  { name = '_Linear', class = 'gemm', category = 'GEMM',
    fn = te_linear(1, 2, 3, 'the forward GEMM of Transformer Engine\'s _Linear only') },
  { name = '_LayerNormLinear', class = 'gemm', category = 'GEMM',
    fn = te_linear(4, 1, nil, 'the forward GEMM of _LayerNormLinear only (not its LayerNorm)') },
  { names = { 'primus_turbo_cpp_extension::hipblaslt_gemm_fp8',
    'primus_turbo::hipblaslt_gemm_fp8' }, class = 'gemm', category = 'GEMM', fn = hipblaslt_fp8 },
  { name = 'vllm::gemm_with_dynamic_quant', class = 'gemm', category = 'GEMM',
    fn = vllm_dynamic_quant },
  { names = { 'aten::convolution', 'aten::_convolution' }, class = 'convolution',
    category = 'CONV_fwd', fn = conv_forward(CONV) },
  { names = { 'aten::conv1d', 'aten::conv2d', 'aten::conv3d' }, class = 'convolution',
    category = 'CONV_fwd', fn = conv_forward({ x = 1, w = 2, bias = 3, stride = 4, padding = 5,
      dilation = 6, groups = 7 }) },
  { name = 'aten::cudnn_convolution', class = 'convolution', category = 'CONV_fwd',
    fn = cudnn_conv },
  { name = 'aten::miopen_convolution', class = 'convolution', category = 'CONV_fwd',
    fn = conv_forward({ x = 1, w = 2, bias = 3, padding = 4, stride = 5, dilation = 6,
      groups = 7 }) },
  { name = 'aten::convolution_backward', class = 'convolution', category = 'CONV_bwd',
    fn = conv_backward },
}

return M
