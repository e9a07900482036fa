-- tp.frameworks.peaks: the command of tplua's peaks microbenchmark (tools/peaks/peaks.py), which
-- measures what this machine achieves with torch: GEMM TFLOP/s on a model's own GEMM shapes and
-- on a large square GEMM per precision, and the device memory bandwidth (docs/peaks.md).
-- Its config is a part of the unified config: the model (tp.catalog.models), training.mbs x
-- training.seq_len (the GEMMs' M), training.precision, parallelism.tp (the shard of each GEMM one
-- GPU computes), and a `peaks` section of its own. Not a training framework (tp.frameworks.list
-- does not name it until it is loaded): its command prints no iteration, it leaves its results
-- in a JSON file, and its run carries `outputs` and `iterations = false` so that tp.run puts
-- that file in the run record as `peaks`.

local fw = require('tp.frameworks')

local M = {}

M.name = 'peaks'
-- Its log is progress lines, no training log: tp.log's auto-detection reads it (for failure
-- signatures); a run of it leaves its `parser` out.
M.parser = 'auto'
-- On a machine without GPUs it measures the CPU (the preflight does not ask for GPUs there).
M.cpu_fallback = 'the peaks microbenchmark measures the CPU (scaled-down shapes)'

--- The file the tool writes, relative to its run's directory, and the record member it becomes.
M.OUTPUT = 'peaks.json'
M.MEMBER = 'peaks'

--- The precisions the tool measures in.
M.PRECISIONS = { 'fp32', 'tf32', 'bf16', 'fp16', 'fp8' }

--- The config `M.config()` fills in: the flagship's model, micro-batch and sequence length.
M.DEFAULTS = { model = 'llama3.1-8b', mbs = 2, seq_len = 2048, precision = 'bf16', tp = 1 }

--- The `peaks` section's defaults: each forward GEMM and its two backward ones, the square GEMM
--- in every precision at 8192, every dimension capped at 1024 on a CPU; the tool's own timing
--- and buffer defaults (docs/peaks.md) unless set here.
M.OPTIONS = { backward = true, square = { 'bf16', 'fp16', 'fp32', 'tf32', 'fp8' },
  square_n = 8192, cpu_cap = 1024 }

-- The `peaks` section's keys and their kinds ('pos' = a positive whole number).
local OPTION_KINDS = { backward = 'boolean', square = 'list', square_n = 'pos', cpu_cap = 'pos',
  memory_mib = 'pos', warmup = 'pos', repeats = 'pos', budget_s = 'number', memory = 'boolean' }

local fail = fw._fail
local num = fw._fmt_number

local function is_precision(p)
  for _, x in ipairs(M.PRECISIONS) do
    if x == p then
      return true
    end
  end
  return false
end

local function positive_int(path, v)
  if math.type(v) ~= 'integer' and not (type(v) == 'number' and math.tointeger(v)) then
    fail('peaks: config.%s: a whole number expected, got %s', path, tostring(v))
  end
  v = math.tointeger(v)
  if v < 1 then
    fail('peaks: config.%s: a positive number expected, got %d', path, v)
  end
  return v
end

local function model_row(m)
  local row = m
  if type(m) == 'string' then
    local err
    row, err = require('tp.catalog.models').get(m)
    if not row then
      fail('peaks: config.model: %s', err)
    end
  elseif type(m) ~= 'table' then
    fail('peaks: config.model: model id or model table expected, got %s', type(m))
  end
  for _, k in ipairs({ 'hidden_size', 'ffn_hidden_size', 'num_attention_heads', 'num_kv_heads',
    'vocab_size' }) do
    if math.type(row[k]) ~= 'integer' or row[k] < 1 then
      fail('peaks: config.model: %s must be a positive whole number', k)
    end
  end
  return row
end

-- The `peaks` section, checked, with its defaults.
local function options(section)
  if section ~= nil and type(section) ~= 'table' then
    fail('peaks: config.peaks: table expected, got %s', type(section))
  end
  local o = {}
  for k, v in pairs(M.OPTIONS) do
    o[k] = v
  end
  for k, v in pairs(section or {}) do
    local kind = OPTION_KINDS[k]
    if not kind then
      fail('peaks: config.peaks.%s: unknown key (%s)', tostring(k),
        table.concat(fw._sorted_keys(OPTION_KINDS), ', '))
    end
    if kind == 'pos' then
      v = positive_int('peaks.' .. k, v)
    elseif kind == 'number' then
      if type(v) ~= 'number' or not (v > 0 and v < math.huge) then
        fail('peaks: config.peaks.%s: a positive number expected, got %s', k, tostring(v))
      end
    elseif kind == 'list' then
      if type(v) ~= 'table' then
        fail('peaks: config.peaks.%s: a list of precisions expected, got %s', k, type(v))
      end
      for i, p in ipairs(v) do
        if not is_precision(p) then
          fail("peaks: config.peaks.%s[%d]: unknown precision '%s' (%s)", k, i, tostring(p),
            table.concat(M.PRECISIONS, ', '))
        end
      end
    elseif type(v) ~= kind then
      fail('peaks: config.peaks.%s: %s expected, got %s', k, kind, type(v))
    end
    o[k] = v
  end
  return o
end

--- Checks a peaks config and returns its parts: the model row, M (micro-batch x sequence
--- length), the precision, tp, and the `peaks` options with their defaults. Raises a message
--- naming the key (a plan-time error, as the other adapters do).
---@param config table
---@return table parts {model, tokens, precision, tp, options}
function M.parts(config)
  if type(config) ~= 'table' then
    fail('peaks: config: table expected, got %s', type(config))
  end
  for k in pairs(config) do
    if k ~= 'model' and k ~= 'training' and k ~= 'parallelism' and k ~= 'peaks'
      and k ~= 'gpus_per_node' and k ~= 'nodes' and k ~= 'paths' then
      fail('peaks: config.%s: unknown key', tostring(k))
    end
  end
  local t = config.training or {}
  local p = config.parallelism or {}
  if type(t) ~= 'table' or type(p) ~= 'table' then
    fail('peaks: config.training and config.parallelism must be tables')
  end
  for k in pairs(t) do
    if k ~= 'mbs' and k ~= 'seq_len' and k ~= 'precision' then
      fail('peaks: config.training.%s: not used by the peaks microbenchmark (mbs, seq_len, '
        .. 'precision)', tostring(k))
    end
  end
  for k in pairs(p) do
    if k ~= 'tp' then
      fail('peaks: config.parallelism.%s: not used by the peaks microbenchmark (tp)', tostring(k))
    end
  end
  local row = model_row(config.model)
  local mbs = positive_int('training.mbs', t.mbs or M.DEFAULTS.mbs)
  local seq = positive_int('training.seq_len', t.seq_len or M.DEFAULTS.seq_len)
  local precision = t.precision or M.DEFAULTS.precision
  if not is_precision(precision) then
    fail("peaks: config.training.precision: unknown precision '%s' (%s)", tostring(precision),
      table.concat(M.PRECISIONS, ', '))
  end
  local tp = positive_int('parallelism.tp', p.tp or M.DEFAULTS.tp)
  local heads, kv = row.num_attention_heads, row.num_kv_heads
  if heads % tp ~= 0 or kv % tp ~= 0 or row.ffn_hidden_size % tp ~= 0 then
    fail('peaks: config.parallelism.tp: %d does not divide the %d attention heads, %d KV heads '
      .. 'and FFN size %d of %s', tp, heads, kv, row.ffn_hidden_size, tostring(row.id))
  end
  return { model = row, tokens = mbs * seq, precision = precision, tp = tp,
    options = options(config.peaks) }
end

--- The model's GEMMs as one GPU computes them in a training step, forward, as a linear layer
--- does (Y[M,N] = X[M,K] W[N,K]^T, M = micro-batch x sequence length): the QKV projection, the
--- attention output projection, the SwiGLU MLP's fused up/gate and its down projection, and the
--- LM head; N or K divided by tp where Megatron's tensor parallelism splits them (the
--- vocabulary rounded up).
---```lua
---local shapes = tp.frameworks.get('peaks').shapes({ model = 'llama3.1-8b',
---  training = { mbs = 2, seq_len = 2048 } })
---print(shapes[1].label, shapes[1].m, shapes[1].n, shapes[1].k)  --> qkv 4096 6144 4096
---```
---@param config table
---@return table[] shapes {label, m, n, k}
function M.shapes(config)
  local c = M.parts(config)
  local r, tp, m = c.model, c.tp, c.tokens
  local h, f = r.hidden_size, r.ffn_hidden_size
  local d = r.head_dim or h // r.num_attention_heads
  local dq, dkv = r.num_attention_heads * d, r.num_kv_heads * d
  return {
    { label = 'qkv', m = m, n = (dq + 2 * dkv) // tp, k = h },
    { label = 'attn_out', m = m, n = h, k = dq // tp },
    { label = 'ffn_up_gate', m = m, n = 2 * f // tp, k = h },
    { label = 'ffn_down', m = m, n = h, k = f // tp },
    { label = 'lm_head', m = m, n = (r.vocab_size + tp - 1) // tp, k = h },
  }
end

--- The unified-config part the recipe runs: DEFAULTS with `over` on top (`model`, `mbs`,
--- `seq_len`, `precision`, `tp`, and `peaks`, the options), in the shape `build` takes.
---@param over? table
---@return table config
function M.config(over)
  over = over or {}
  local v = {}
  for k, x in pairs(M.DEFAULTS) do
    v[k] = over[k] == nil and x or over[k]
  end
  return { model = v.model, training = { mbs = v.mbs, seq_len = v.seq_len,
    precision = v.precision }, parallelism = { tp = v.tp }, gpus_per_node = 1,
    peaks = over.peaks }
end

--- The directory that holds peaks.py: tools/peaks beside the reference trainer's directory
--- (the source tree's, or share/tplua/tools when installed), made absolute: the command runs in
--- its run's directory.
---@return string
function M.tool_dir()
  local ref = require('tp.frameworks.reference')
  local dir = ref.trainer_dir():gsub('/reftrain$', '') .. '/peaks'
  return require('tp.fs').realpath(dir) or dir
end

--- Builds the command of the microbenchmark.
---```lua
---local peaks = tp.frameworks.get('peaks')
---local cmd = peaks.build(peaks.config({ model = 'qwen2.5-7b', mbs = 1, seq_len = 4096 }))
---```
---@param config table see M.config
---@return table cmd { argv, env, files, parser, entry, outputs, iterations, shapes, notes }
function M.build(config)
  local c = M.parts(config)
  local o = c.options
  local dir = M.tool_dir()
  local entry = dir .. '/peaks.py'
  local argv = { require('tp.frameworks.reference').python(), entry, '--out', M.OUTPUT,
    '--dtype', c.precision }
  local function add(opt, v)
    argv[#argv + 1] = opt
    if v ~= nil then
      argv[#argv + 1] = type(v) == 'number' and num(v) or tostring(v)
    end
  end
  if type(c.model.id) == 'string' then
    add('--model', c.model.id)
  end
  local shapes = M.shapes(config)
  for _, s in ipairs(shapes) do
    add('--gemm', string.format('%s=%dx%dx%d', s.label, s.m, s.n, s.k))
  end
  if o.backward then
    add('--backward')
  end
  add('--square', table.concat(o.square, ','))
  add('--square-n', o.square_n)
  add('--cpu-cap', o.cpu_cap)
  if o.memory == false then
    add('--no-memory')
  end
  for _, k in ipairs({ 'memory_mib', 'warmup', 'repeats', 'budget_s' }) do
    if o[k] ~= nil then
      add('--' .. k:gsub('_', '-'), o[k])
    end
  end
  local notes = {}
  if not require('tp.fs').is_file(entry) then
    notes[#notes + 1] = string.format('peaks: %s does not exist on this machine', entry)
  end
  return {
    argv = argv,
    env = { PYTHONUNBUFFERED = '1' },
    files = {},
    parser = M.parser,
    entry = entry,
    launcher = 'local',
    outputs = { [M.MEMBER] = M.OUTPUT },
    iterations = false,
    shapes = shapes,
    notes = notes,
  }
end

return M
