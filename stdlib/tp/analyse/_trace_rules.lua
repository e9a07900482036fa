-- tp.analyse._trace_rules: the classes of GPU ops and the table of rules that gives each op name
-- its class, for both vendors' kernel names (cuBLAS/cuBLASLt/nvjet/CUTLASS/sm90 xmma;
-- hipBLASLt/Tensile Cijk_*, Composable Kernel, aiter/CK fmha_*, Triton; NCCL and RCCL
-- ncclDevKernel_*/ncclKernel_*). Users add or override rules from Lua (tp.analyse.trace.rule).

local M = {}

-- The classes, in the order reports list them, each with its kind (how the temporal breakdown
-- counts it: compute, communication or memory).
local CLASSES = {
  { name = 'gemm', kind = 'compute' },
  { name = 'attention', kind = 'compute' },
  { name = 'convolution', kind = 'compute' },
  { name = 'normalization', kind = 'compute' },
  { name = 'elementwise', kind = 'compute' },
  { name = 'optimizer', kind = 'compute' },
  { name = 'other', kind = 'compute' },
  { name = 'all_reduce', kind = 'communication' },
  { name = 'all_gather', kind = 'communication' },
  { name = 'reduce_scatter', kind = 'communication' },
  { name = 'all_to_all', kind = 'communication' },
  { name = 'broadcast', kind = 'communication' },
  { name = 'reduce', kind = 'communication' },
  { name = 'send_recv', kind = 'communication' },
  { name = 'collective', kind = 'communication' },
  { name = 'memcpy_h2d', kind = 'memory' },
  { name = 'memcpy_d2h', kind = 'memory' },
  { name = 'memcpy_d2d', kind = 'memory' },
  { name = 'memcpy', kind = 'memory' },
  { name = 'memset', kind = 'memory' },
}

M.KINDS = { compute = true, communication = true, memory = true }

-- Collectives named in kernel names (ncclDevKernel_AllReduce_Sum_f32_RING_LL) or in the
-- profiler's "Collective name" argument (allreduce, _allgather_base, reduce_scatter_tensor...),
-- matched on the lower-cased text with '_' removed.
local COLLECTIVES = {
  { 'allreduce', 'all_reduce' },
  { 'allgather', 'all_gather' },
  { 'reducescatter', 'reduce_scatter' },
  { 'alltoall', 'all_to_all' },
  { 'broadcast', 'broadcast' },
  { 'sendrecv', 'send_recv' },
  { 'send', 'send_recv' },
  { 'recv', 'send_recv' },
  { 'reduce', 'reduce' },
}

local function collective_class(text)
  if not text then
    return nil
  end
  local t = text:lower():gsub('_', '')
  for _, c in ipairs(COLLECTIVES) do
    if t:find(c[1], 1, true) then
      return c[2]
    end
  end
  return nil
end

-- Kernels that are collectives without NCCL or RCCL in their names (PyTorch's symmetric-memory
-- all-reduce, vLLM's custom all-reduce).
local COMM_NAMES = { 'multimem_all_reduce', 'one_shot_all_reduce', 'two_shot_all_reduce',
  'cross_device_reduce', 'all_reduce_kernel', 'allreduce_kernel', 'all_gather_kernel',
  'reduce_scatter_kernel' }

-- The default rules: Lua patterns matched against the lower-cased name in passes: the rules
-- marked `whole` against the whole name; then every rule against the function's own name (the
-- last '::' part, without template arguments and parameters), then that name with its
-- namespaces, then, when the own name is a generic launcher (`cutlass::device_kernel<X>`,
-- `Kernel2<X>`), the kernel X it launches. Within a pass the first matching rule wins; `unless`
-- vetoes a match. So `void at::native::vectorized_elementwise_kernel<4, ...silu_kernel...>(...)`
-- is elementwise by its own name, `void cutlass::Kernel2<cutlass_80_tensorop_..._gemm...>` a
-- GEMM by its namespace, and `cutlass::bfloat16_t` in a template argument decides nothing.
local DEFAULT_RULES = {
  -- PyTorch's generic elementwise kernels named by the functor they run (whole = the whole name)
  { pattern = 'batch_norm_update_stats', class = 'normalization', whole = true },
  -- attention before GEMM: flash and fused attention kernels may carry "gemm" in their names
  { pattern = 'flash', class = 'attention' },
  { pattern = 'fmha', class = 'attention' },
  { pattern = 'attention', class = 'attention' },
  { pattern = 'attn', class = 'attention' },
  { pattern = 'sdpa', class = 'attention' },
  { pattern = 'mha_[fb]wd', class = 'attention' },
  { pattern = '^triton_tem_fused_.*mm', class = 'gemm' },
  { pattern = 'cijk_', class = 'gemm' },
  { pattern = 'gemm', class = 'gemm' },
  { pattern = 'gemv', class = 'gemm' },
  { pattern = 'nvjet', class = 'gemm' },
  { pattern = 'cutlass', class = 'gemm' },
  { pattern = 'xmma', class = 'gemm' },
  { pattern = 'cublas', class = 'gemm' },
  { pattern = 'hipblaslt', class = 'gemm' },
  { pattern = 'matmul', class = 'gemm' },
  { pattern = '^bmm_', class = 'gemm' },
  { pattern = '^ampere_.*_[nt][nt]', class = 'gemm' },
  { pattern = 'conv', class = 'convolution', unless = 'convert' },
  { pattern = 'winograd', class = 'convolution' },
  { pattern = 'fprop', class = 'convolution' },
  { pattern = 'dgrad', class = 'convolution' },
  { pattern = 'wgrad', class = 'convolution' },
  { pattern = 'layer_?norm', class = 'normalization' },
  { pattern = 'batch_?norm', class = 'normalization' },
  { pattern = 'group_?norm', class = 'normalization' },
  { pattern = 'rms_?norm', class = 'normalization' },
  { pattern = 'instance_?norm', class = 'normalization' },
  { pattern = 'norm_kernel', class = 'normalization' },
  { pattern = 'adam', class = 'optimizer' },
  { pattern = 'multi_tensor_apply', class = 'optimizer' },
  { pattern = 'sgd', class = 'optimizer' },
  { pattern = 'optimizer', class = 'optimizer' },
  { pattern = 'elementwise', class = 'elementwise' },
  { pattern = 'vectorized_elementwise', class = 'elementwise' },
  { pattern = 'unrolled_elementwise', class = 'elementwise' },
  { pattern = 'gelu', class = 'elementwise' },
  { pattern = 'silu', class = 'elementwise' },
  { pattern = 'swiglu', class = 'elementwise' },
  { pattern = 'relu', class = 'elementwise' },
  { pattern = 'sigmoid', class = 'elementwise' },
  { pattern = 'tanh', class = 'elementwise' },
  { pattern = 'softmax', class = 'elementwise' },
  { pattern = 'dropout', class = 'elementwise' },
  { pattern = 'reduce_kernel', class = 'elementwise' },
  { pattern = '^triton_[a-z]+_fused', class = 'elementwise' },
}

-- The core of a C++ kernel name: no template arguments, parameters or return type.
local function core_of(text)
  local core = text:gsub('%(anonymous namespace%)', 'anon'):gsub('%b()', ''):gsub('%b{}', '')
    :gsub('%b<>', '')
  return core:match('(%S+)%s*$') or core
end

-- The texts a name is matched on (lower case): its own name, with namespaces, and the kernel a
-- generic launcher runs.
local function name_parts(lower)
  local core = core_of(lower)
  local own = core:match('::([^:]+)$') or core
  local parts = { own, core }
  if own:match('^kernel%d*$') or own:match('^device_kernel') or own == 'kernel_with_params' then
    local inner = lower:gsub('%(anonymous namespace%)', 'anon'):match('%b<>')
    if inner then
      local inner_core = core_of(inner:sub(2, -2):match('^([^,]*)') or '')
      parts[#parts + 1] = inner_core:match('::([^:]+)$') or inner_core
      parts[#parts + 1] = inner_core
    end
  end
  return parts
end

local function match(rule, text)
  return text:find(rule.pattern, 1, rule.plain) and not (rule.unless and text:find(rule.unless,
    1, true))
end

--- A new rule set: the default classes and rules, to which a user's rules are added.
function M.new()
  local set = { classes = {}, index = {}, rules = {}, user = {} }
  for _, c in ipairs(CLASSES) do
    set.classes[#set.classes + 1] = { name = c.name, kind = c.kind }
    set.index[c.name] = #set.classes
  end
  for _, r in ipairs(DEFAULT_RULES) do
    set.rules[#set.rules + 1] = r
  end
  return set
end

--- Adds a rule in front of the others (a user's rule wins over the defaults and over the rules
--- added before it). A new class needs its kind.
function M.add(set, rule, level)
  level = (level or 1) + 1
  if type(rule) ~= 'table' then
    error('trace.rule: a table { pattern =, class =, kind = } expected', level)
  end
  for k in pairs(rule) do
    if k ~= 'pattern' and k ~= 'class' and k ~= 'kind' and k ~= 'plain' then
      error('trace.rule: unknown field ' .. tostring(k), level)
    end
  end
  if type(rule.pattern) ~= 'string' or rule.pattern == '' then
    error('trace.rule: pattern must be a non-empty string', level)
  end
  if type(rule.class) ~= 'string' or not rule.class:match('^[%w_%-]+$') then
    error('trace.rule: class must be a word (letters, digits, _ or -)', level)
  end
  local ok, err = pcall(string.find, '', rule.pattern)
  if not ok then
    error('trace.rule: bad pattern ' .. string.format('%q', rule.pattern) .. ': ' .. err, level)
  end
  local idx = set.index[rule.class]
  if not idx then
    if not M.KINDS[rule.kind] then
      error("trace.rule: the new class '" .. rule.class
        .. "' needs kind = 'compute', 'communication' or 'memory'", level)
    end
    if #set.classes >= 64 then
      error('trace.rule: at most 64 classes', level)
    end
    set.classes[#set.classes + 1] = { name = rule.class, kind = rule.kind }
    set.index[rule.class] = #set.classes
  elseif rule.kind ~= nil and rule.kind ~= set.classes[idx].kind then
    error("trace.rule: class '" .. rule.class .. "' is of kind " .. set.classes[idx].kind, level)
  end
  table.insert(set.user, 1, { pattern = rule.plain and rule.pattern:lower() or rule.pattern,
    class = rule.class, plain = rule.plain == true })
end

--- The class of an op: its name, its kind ('kernel', 'memcpy', 'memset') and the collective
--- the profiler named for it (or nil).
function M.classify(set, name, kind, collective)
  local lower = name:lower()
  local parts = name_parts(lower)
  for _, text in ipairs(parts) do
    for _, r in ipairs(set.user) do
      if match(r, text) then
        return r.class
      end
    end
  end
  for _, r in ipairs(set.user) do
    if match(r, lower) then
      return r.class
    end
  end
  if kind == 'memset' then
    return 'memset'
  end
  if kind == 'memcpy' then
    if lower:find('htod', 1, true) then
      return 'memcpy_h2d'
    elseif lower:find('dtoh', 1, true) then
      return 'memcpy_d2h'
    elseif lower:find('dtod', 1, true) then
      return 'memcpy_d2d'
    end
    return 'memcpy'
  end
  local comm = lower:find('nccl', 1, true) or lower:find('rccl', 1, true) or collective
  for _, c in ipairs(COMM_NAMES) do
    comm = comm or parts[2]:find(c, 1, true)
  end
  if comm then
    return collective_class(parts[1]) or collective_class(collective) or 'collective'
  end
  for _, r in ipairs(set.rules) do
    if r.whole and match(r, lower) then
      return r.class
    end
  end
  for _, text in ipairs(parts) do
    for _, r in ipairs(set.rules) do
      if not r.whole and match(r, text) then
        return r.class
      end
    end
  end
  return 'other'
end

return M
