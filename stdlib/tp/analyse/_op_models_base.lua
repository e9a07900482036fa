-- tp.analyse._op_models_base: what every op performance model shares. The element types of
-- PyTorch profiler traces (bytes per element, the precision the FLOPs run in), the checked
-- reading of an op's Input Dims, Input type and Concrete Inputs (a malformed shape stops the
-- model with a reason that names the field and its index), the parsing of Concrete Inputs
-- strings, and the GEMM and attention formulas that several models use. Formulas: docs/ops.md.

local json = require('tp.json')

local M = {}

--- Largest dimension and largest element count a shape may have.
M.MAX_DIM = 1 << 40
M.MAX_ELEMS = 1 << 62

-- Bytes per element of the type names a trace writes in 'Input type' (lower-cased).
local BPE = {
  ['double'] = 8, ['long int'] = 8, ['long'] = 8, ['int64_t'] = 8, ['unsigned long'] = 8,
  ['float'] = 4, ['int'] = 4, ['unsigned int'] = 4, ['c10::qint32'] = 4,
  ['c10::half'] = 2, ['c10::bfloat16'] = 2, ['short int'] = 2, ['short'] = 2,
  ['unsigned short'] = 2,
  ['bool'] = 1, ['signed char'] = 1, ['unsigned char'] = 1, ['c10::qint8'] = 1,
  ['c10::quint8'] = 1,
  ['c10::float8_e4m3fn'] = 1, ['c10::float8_e4m3fnuz'] = 1, ['c10::float8_e5m2'] = 1,
  ['c10::float8_e5m2fnuz'] = 1, ['c10::float8_e8m0fnu'] = 1,
  -- two FP4 values packed in one byte; the shapes already count packed pairs
  ['c10::float4_e2m1fn_x2'] = 1,
  ['c10::complex<c10::half>'] = 4, ['c10::complex<float>'] = 8, ['c10::complex<double>'] = 16,
}

-- The precision arithmetic on a type runs in (the peak TFLOP/s a model's FLOPs are held to).
local PRECISION = {
  ['double'] = 'fp64', ['float'] = 'fp32', ['c10::half'] = 'fp16', ['c10::bfloat16'] = 'bf16',
  ['c10::float8_e4m3fn'] = 'fp8', ['c10::float8_e4m3fnuz'] = 'fp8', ['c10::float8_e5m2'] = 'fp8',
  ['c10::float8_e5m2fnuz'] = 'fp8', ['c10::float8_e8m0fnu'] = 'fp8',
  ['c10::float4_e2m1fn_x2'] = 'fp4',
  ['signed char'] = 'int8', ['unsigned char'] = 'int8', ['c10::qint8'] = 'int8',
  ['c10::quint8'] = 'int8',
}

--- Bytes per element of a trace's type name ('c10::BFloat16' -> 2), or nil for what is not a
--- tensor element type ('Scalar', 'TensorList', '').
function M.bytes_per_element(t)
  if type(t) ~= 'string' then
    return nil
  end
  return BPE[t:lower()]
end

--- The precision of a trace's type name: 'bf16', 'fp16', 'fp32', 'fp64', 'fp8', 'fp4', 'int8',
--- or nil (integer and boolean types, 'Scalar', unknown names).
function M.precision_of(t)
  if type(t) ~= 'string' then
    return nil
  end
  return PRECISION[t:lower()]
end

-- A model stops with a reason by raising a table with this metatable; evaluate returns the
-- reason as `nil, reason`. Anything else a model raises is a model error.
local REASON_MT = { __tostring = function(e)
  return e.reason
end }

--- Stops the running model: evaluate returns nil and this reason.
function M.fail(fmt, ...)
  error(setmetatable({ reason = fmt:format(...) }, REASON_MT), 0)
end

--- Whether a raised value is a reason given by `fail`.
function M.is_reason(e)
  return getmetatable(e) == REASON_MT
end

-- A short, safe rendering of any value for messages: {1, 2}, 'x', null.
local function repr(v, depth)
  depth = depth or 0
  local t = type(v)
  if t == 'string' then
    if #v > 40 then
      v = v:sub(1, 40) .. '...'
    end
    return ("'%s'"):format((v:gsub('[%c\\]', '?')))
  elseif t == 'number' then
    return tostring(v)
  elseif t == 'table' then
    if depth > 2 then
      return '{...}'
    end
    local parts = {}
    for i = 1, math.min(#v, 8) do
      parts[i] = repr(v[i], depth + 1)
    end
    if #v > 8 then
      parts[#parts + 1] = '...'
    end
    if #v == 0 and next(v) ~= nil then
      return '{...}'
    end
    return '{' .. table.concat(parts, ', ') .. '}'
  end
  return tostring(v)
end
M.repr = repr

local is_array = json.is_array

-- Whether v is a Lua sequence 1..n and nothing else (a decoded JSON array).
local function is_list(v)
  if type(v) ~= 'table' then
    return false
  end
  if is_array(v) then
    return true  -- decoded from a JSON array: a sequence, nulls kept as json.null
  end
  local n = #v
  local count = 0
  for k in pairs(v) do
    if math.type(k) ~= 'integer' or k < 1 or k > n then
      return false
    end
    count = count + 1
  end
  return count == n
end
M.is_list = is_list

-- Whether a dims entry stands for no tensor: nil, JSON null, or an empty list.
local function is_absent(v)
  return v == nil or json.is_null(v) or (type(v) == 'table' and next(v) == nil)
end

-- The entries of op.dims, or a reason.
local function dims_of(op)
  local dims = op.dims
  if dims == nil then
    M.fail('Input Dims missing')
  end
  if not is_list(dims) then
    M.fail('Input Dims is not a list: %s', repr(dims))
  end
  return dims
end

-- Checks one shape (a list of integers) and returns a copy with integer dimensions.
local function check_shape(v, where)
  if not is_list(v) then
    M.fail('%s is not a shape: %s', where, repr(v))
  end
  local out, elems = {}, 1
  for j = 1, #v do
    local d = v[j]
    local di = math.type(d) and math.tointeger(d)
    if not di then
      M.fail('%s[%d] is not an integer: %s', where, j, repr(d))
    end
    if di < 0 then
      M.fail('%s[%d] is negative: %d', where, j, di)
    end
    if di > M.MAX_DIM then
      M.fail('%s[%d] is over 2^40: %d', where, j, di)
    end
    if di ~= 0 and elems > M.MAX_ELEMS // di then
      M.fail('%s has more than 2^62 elements: %s', where, repr(v))
    end
    elems = elems * di
    out[j] = di
  end
  return out
end

local function rank_ok(n, rank)
  if rank == nil then
    return true
  elseif type(rank) == 'table' then
    return n >= rank[1] and n <= rank[2]
  end
  return n == rank
end

local function rank_text(rank)
  if type(rank) == 'table' then
    return ('%d-D to %d-D'):format(rank[1], rank[2])
  end
  return ('%d-D'):format(rank)
end

--- The shape at Input Dims[i] (1-based), checked: a list of integers within limits and, when
--- `rank` is given, of that rank (a number, or {min, max}). Stops the model with a reason
--- otherwise ("Input Dims[2] is not a 2-D shape: {3}").
function M.shape(op, i, rank)
  local dims = dims_of(op)
  local where = ('Input Dims[%d]'):format(i)
  local v = dims[i]
  if v == nil then
    M.fail('%s missing (the op has %d inputs)', where, #dims)
  end
  if type(v) ~= 'table' then
    M.fail('%s is not a shape: %s', where, repr(v))
  end
  local s = check_shape(v, where)
  if not rank_ok(#s, rank) then
    M.fail('%s is not a %s shape: %s', where, rank_text(rank), repr(v))
  end
  return s
end

--- The shape at Input Dims[i] when that input is a tensor, or nil when the entry is absent or
--- empty (an optional tensor not given, a scalar); checked as `shape` otherwise.
function M.opt_shape(op, i, rank)
  local dims = dims_of(op)
  if is_absent(dims[i]) then
    return nil
  end
  return M.shape(op, i, rank)
end

--- The shapes of a TensorList input at Input Dims[i] (a list of shapes, as newer profilers
--- record them), or nil when the profiler recorded none (an empty entry).
function M.shape_list(op, i)
  local dims = dims_of(op)
  local v = dims[i]
  local where = ('Input Dims[%d]'):format(i)
  if is_absent(v) then
    return nil
  end
  if not is_list(v) or type(v[1]) ~= 'table' then
    M.fail('%s is not a list of shapes: %s', where, repr(v))
  end
  local out = {}
  for j = 1, #v do
    out[j] = check_shape(v[j], ('%s[%d]'):format(where, j))
  end
  return out
end

--- Number of elements of a checked shape (1 for a 0-d shape).
function M.numel(s)
  local n = 1
  for j = 1, #s do
    n = n * s[j]
  end
  return n
end

--- Number of elements of a shape built by a model (a broadcast, an output): stops the model
--- when it is over 2^62 (`what` names the shape).
function M.checked_numel(s, what)
  local n = 1.0
  for j = 1, #s do
    n = n * s[j]
  end
  if n > M.MAX_ELEMS then
    M.fail('%s has more than 2^62 elements: %s', what, repr(s))
  end
  return math.tointeger(n) or n
end

--- Number of Input Dims entries (0 when absent).
function M.ninputs(op)
  return is_list(op.dims) and #op.dims or 0
end

--- The type name of input i, or nil (types absent, not a string).
function M.dtype(op, i)
  local types = op.types
  if type(types) ~= 'table' then
    return nil
  end
  local t = types[i]
  if type(t) ~= 'string' then
    return nil
  end
  return t
end

--- The Concrete Inputs string of input i, or nil (absent; numbers are turned into text).
function M.conc(op, i)
  local c = op.concrete
  if type(c) ~= 'table' then
    return nil
  end
  local v = c[i]
  if type(v) == 'string' then
    return v
  elseif math.type(v) then
    return tostring(v)
  elseif type(v) == 'boolean' then
    return v and 'True' or 'False'
  end
  return nil
end

--- Whether the op carries Concrete Inputs at all (older traces do not).
function M.has_concrete(op)
  return type(op.concrete) == 'table'
end

--- 'True'/'true'/'1' -> true, 'False'/'false'/'0' -> false, anything else -> nil.
function M.parse_bool(s)
  if type(s) ~= 'string' then
    return nil
  end
  local l = s:match('^%s*(.-)%s*$'):lower()
  if l == 'true' or l == '1' then
    return true
  elseif l == 'false' or l == '0' then
    return false
  end
  return nil
end

--- An integer written as text ('-1', '8'), or nil.
function M.parse_int(s)
  if type(s) ~= 'string' then
    return nil
  end
  local d = s:match('^%s*(%-?%d+)%s*$')
  return d and math.tointeger(tonumber(d)) or nil
end

--- A number written as text ('0.', '1e-05', '2'), or nil.
function M.parse_number(s)
  if type(s) ~= 'string' then
    return nil
  end
  local n = tonumber((s:match('^%s*(.-)%s*$')))
  if n == nil or n ~= n or n == math.huge or n == -math.huge then
    return nil
  end
  return n
end

--- A list of integers written as text ('[1, 1]', '[]', or a single '2'), or nil.
function M.parse_int_list(s)
  if type(s) ~= 'string' then
    return nil
  end
  local single = M.parse_int(s)
  if single then
    return { single }
  end
  local body = s:match('^%s*[%[%(](.-)[%]%)]%s*$')
  if not body then
    return nil
  end
  local out = {}
  for part in body:gmatch('[^,]+') do
    local v = M.parse_int(part)
    if not v then
      if part:match('^%s*$') then
        goto continue
      end
      return nil
    end
    out[#out + 1] = v
    ::continue::
  end
  return out
end

--- A list of booleans written as text ('[True, False, True]'), or nil.
function M.parse_bool_list(s)
  if type(s) ~= 'string' then
    return nil
  end
  local body = s:match('^%s*[%[%(](.-)[%]%)]%s*$')
  if not body then
    return nil
  end
  local out = {}
  for part in body:gmatch('[^,]+') do
    local b = M.parse_bool(part)
    if b == nil then
      return nil
    end
    out[#out + 1] = b
  end
  return out
end

--- A number as an integer when it is one (and exactly representable), else as it is.
function M.num(x)
  if math.type(x) == 'float' and x == math.floor(x) and math.abs(x) < 2 ^ 53 then
    return math.tointeger(x)
  end
  return x
end

--- Joins the notes of a model ('; '), or nil when there are none.
function M.notes(list)
  if list == nil or #list == 0 then
    return nil
  end
  return table.concat(list, '; ')
end

--- The bytes of a GEMM C = A B (+ bias): A is M x K, B is K x N, C is M x N, the bias is
--- taken as N elements (TraceLens's rule), all times the batch Bt. nil when a type is unknown.
function M.gemm_bytes(Bt, Mm, N, K, bias, bpe_a, bpe_b, bpe_bias, bpe_out)
  if not (bpe_a and bpe_b and bpe_out and (bpe_bias or not bias)) then
    return nil
  end
  local per = 1.0 * Mm * K * bpe_a + 1.0 * K * N * bpe_b + 1.0 * Mm * N * bpe_out
  if bias then
    per = per + 1.0 * N * bpe_bias
  end
  return M.num(Bt * per)
end

--- The FLOPs of a GEMM: Bt (2 M N K + M N when a bias is added).
function M.gemm_flops(Bt, Mm, N, K, bias)
  local f = 2.0 * Mm * N * K
  if bias then
    f = f + 1.0 * Mm * N
  end
  return M.num(Bt * f)
end

--- The share of the score matrix a causal mask keeps, counted as TraceLens counts it for
--- N_Q = N_KV (half of it: N^2 / 2 of N^2 pairs) and extended to N_Q ~= N_KV with the same
--- half-diagonal rule: `align` 'top' (PyTorch SDPA: query i sees keys 0..i) or 'bottom'
--- (flash-attn, aiter: the last query sees every key).
function M.causal_pairs(nq, nkv, align)
  nq, nkv = 1.0 * nq, 1.0 * nkv
  if nq == nkv then
    return nq * nkv / 2
  end
  if align == 'bottom' then
    if nq <= nkv then
      return nq * nkv - nq * nq / 2
    end
    return nkv * nkv / 2
  end
  if nq <= nkv then
    return nq * nq / 2
  end
  return nkv * nkv / 2 + (nq - nkv) * nkv
end

return M
