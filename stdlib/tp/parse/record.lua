-- tp.record: the unified run record ("schema": "tplua.run/2") built from a parsed log (tp.log),
-- and its atomic save. A superset of the tprimat-era result files: the flat arrays and the
-- performance_metrics / training_config / memory_metrics key names are the ones tprimat wrote
-- (DmitriiNikolaevAtAmd/tprimat, evaluate/extract_prim_metrics.py, extract_metrics_from_log).
-- docs/record.md describes every field.
local stats = require('tp.stats')

local M = {}

--- The schema name written in every record. /2 added the members a run writes about how it
--- ran (environment, preflight, profile, joules_per_token); a /1 record reads as one without
--- them (docs/record.md, "Versions").
M.SCHEMA = 'tplua.run/2'

--- The record schemas this version reads, oldest first.
M.READABLE = { 'tplua.run/1', 'tplua.run/2' }

--- True when `schema` names a run record this version reads.
---@param schema any
---@return boolean
function M.readable(schema)
  for _, s in ipairs(M.READABLE) do
    if schema == s then
      return true
    end
  end
  return false
end

-- JSON null: tp.json's sentinel, so tp.json.encode writes null.
local function load_json()
  local ok, mod = pcall(require, 'tp.json')
  if ok then
    return mod
  end
  if not tostring(mod):find("module 'tp.json' not found", 1, true) then
    error(mod, 0)
  end
  return nil
end

local json = load_json()

--- The value that stands for JSON null in a record (tp.json.null).
M.null = json and json.null
  or setmetatable({}, {
    __name = 'tp.record.null',
    __tostring = function()
      return 'null'
    end,
  })
local null = M.null

-- Marks `t` as a JSON array (so an empty one encodes as [] rather than {}), when tp.json can.
local function array(t)
  if json and type(json.array) == 'function' then
    return json.array(t)
  end
  return t
end

-- The iteration-record fields of the parsed-log contract, in the order they are documented.
M.RECORD_FIELDS = {
  'iteration', 'train_iters', 'epoch', 'epoch_iteration', 'step_time_s', 'step_time_derived',
  'loss', 'losses', 'lr', 'grad_norm', 'loss_scale', 'params_norm', 'num_zeros',
  'skipped_iterations', 'nan_iterations', 'consumed_samples', 'consumed_tokens',
  'skipped_samples', 'global_batch_size', 'tflops_per_gpu', 'tokens_per_s_per_gpu', 'mfu_pct',
  'mem_allocated_gib', 'mem_max_allocated_gib', 'mem_reserved_gib', 'mem_max_reserved_gib',
  'mem_device_used_gib', 'mem_device_total_gib', 'mem_usage_fraction', 'energy_j_per_gpu',
  'power_w_per_gpu', 'timestamp', 'time_s', 'rank', 'line', 'extra',
}

--- The platform names a record's `platform` takes: AMD/ROCm, NVIDIA/CUDA, and runs without a GPU
--- (tp.run writes 'cpu' when the probe finds no device).
M.PLATFORMS = { 'amd', 'nvd', 'cpu' }

--- The precisions a record's training_config.precision and MFU know (tp.metrics.mfu takes a
--- peak for each: tp.hardware.PRECISIONS and fp4).
M.PRECISIONS = { 'fp32', 'tf32', 'bf16', 'fp16', 'fp8', 'fp4' }
local MFU_PRECISIONS = {}
for _, p in ipairs(M.PRECISIONS) do
  MFU_PRECISIONS[p] = true
end
local PRECISION_LIST = table.concat(M.PRECISIONS, ', ')

-- Options: the three overrides, what goes into `source`, what is copied to the top level, and
-- the catalog id of the GPU (tp.hardware) that gives gpu_info and MFU.
local OPT_TYPES = {
  gbs = 'number', seq_len = 'number', gpus = 'number',
  path = 'string', sha256 = 'string', size_bytes = 'number', command = 'string',
  exit_status = 'number', started_at = 'string', finished_at = 'string',
  platform = 'string', framework = 'string', model = 'string', dataset = 'string',
  methodology = 'string', ['repeat'] = 'number', gpu_info = 'table', run_id = 'string',
  experiment = 'string', hardware = 'string', lazy_records = 'boolean', precision = 'string',
}
local TOP_LEVEL = { 'platform', 'framework', 'model', 'dataset', 'methodology', 'repeat',
  'gpu_info', 'run_id', 'experiment' }

local function check_opts(opts)
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    error('tp.record.from_log: options must be a table, got ' .. type(opts), 3)
  end
  for k, v in pairs(opts) do
    local want = OPT_TYPES[k]
    if not want then
      error(string.format("tp.record.from_log: unknown option '%s'", tostring(k)), 3)
    end
    if type(v) ~= want then
      error(string.format("tp.record.from_log: option '%s' must be a %s, got %s", k, want,
        type(v)), 3)
    end
  end
  for _, k in ipairs({ 'gbs', 'seq_len', 'gpus' }) do
    local v = opts[k]
    if v ~= nil and (math.tointeger(v) == nil or v < 1) then
      error(string.format("tp.record.from_log: option '%s' must be a positive integer, got %s", k,
        tostring(v)), 3)
    end
  end
  if opts.precision ~= nil and not MFU_PRECISIONS[opts.precision] then
    error(string.format("tp.record.from_log: option 'precision' must be one of %s, got '%s'",
      PRECISION_LIST, opts.precision), 3)
  end
  if opts.hardware ~= nil then
    local row, err = require('tp.plan.hardware').get(opts.hardware)
    if not row then
      error('tp.record.from_log: ' .. err, 3)
    end
  end
  return opts
end

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

-- Numbers from an argument dump ("16", "1e-05", "True"): integers stay integers.
local function arg_number(args, name)
  local v = args and args[name]
  if type(v) == 'number' then
    return v
  end
  if type(v) ~= 'string' then
    return nil
  end
  local n = tonumber(v)
  if n == nil then
    return nil
  end
  return math.tointeger(n) or n
end

local function arg_true(args, name)
  local v = args and args[name]
  return v == true or v == 'True' or v == 'true'
end

-- The first present (neither nil nor null) of (value, source) pairs: returns value, source.
local function first_of(...)
  local n = select('#', ...)
  for i = 1, n, 2 do
    local v = select(i, ...)
    if v ~= nil and v ~= null then
      return v, select(i + 1, ...)
    end
  end
  return nil, nil
end

local function diag(list, kind, severity, message, line)
  list[#list + 1] = { kind = kind, severity = severity, message = message, line = line or null }
end

-- Copies a table of scalars, turning non-finite numbers into null; returns copy, had_nonfinite.
local function copy_scalars(t)
  local out, bad = {}, false
  for k, v in pairs(t) do
    if type(v) == 'number' and not is_finite(v) then
      out[k] = null
      bad = true
    else
      out[k] = v
    end
  end
  return out, bad
end

local function fmt_num(v)
  if v ~= v then
    return 'nan'
  end
  return tostring(v)
end

-- One contract record -> one record object with every field (null where absent). Non-finite
-- numbers become null and are reported once per record.
local HUGE = math.huge

local IS_FIELD = {}
for _, f in ipairs(M.RECORD_FIELDS) do
  IS_FIELD[f] = true
end

-- Returns a new record with every field null. Built from a table constructor (compiled once from
-- RECORD_FIELDS) so the table is allocated at its final size: filling a table key by key rehashes
-- it six times on the way to 36 fields, which dominated from_log on long logs.
local new_record = (function()
  local parts = {}
  for i, f in ipairs(M.RECORD_FIELDS) do
    parts[i] = f .. ' = null'
  end
  local src = 'local null = ...\nreturn function() return { ' .. table.concat(parts, ', ')
    .. ' } end'
  return assert(load(src, '=tp.record.new_record', 't', {}))(null)
end)()

local function convert_record(r, diags)
  local out = new_record()
  local bad
  for f, v in pairs(r) do
    if IS_FIELD[f] then
      local t = type(v)
      if t == 'number' and (v ~= v or v == HUGE or v == -HUGE) then
        bad = bad or {}
        bad[#bad + 1] = f .. '=' .. fmt_num(v)
      elseif t == 'table' then
        local c, nonfinite = copy_scalars(v)
        out[f] = c
        if nonfinite then
          bad = bad or {}
          bad[#bad + 1] = f .. ' (a value is not finite)'
        end
      else
        out[f] = v
      end
    end
  end
  if bad then
    table.sort(bad)
    diag(diags, 'nonfinite_value', 'warning',
      string.format('iteration %s: %s written as null', tostring(r.iteration or '?'),
        table.concat(bad, ', ')), r.line)
  end
  return out
end

local function slice(xs, first, last)
  return table.move(xs, first, last, 1, {})
end

-- Raises best[g] to the finite numbers found in t[fields[..]].
local function raise_peak(best, g, t, fields)
  for k = 1, #fields do
    local v = t[fields[k]]
    if type(v) == 'number' and v == v and v < HUGE and v > -HUGE
      and (best[g] == nil or v > best[g]) then
      best[g] = v
    end
  end
end

-- What the metrics read of the records, through one interface with two implementations: the
-- converted record tables (from_log), and the scanner's stored records (lazy_records, nothing
-- materialised; tp.log's values, peak and derived_any do the same in C).
--   A.n                        number of records
--   A.values(f, first, last, pos)  finite values of field f in records first..last (and, with
--                              pos, their positions)
--   A.peak(fields)             largest finite value of the fields (records in order), or nil
--   A.derived_any()            a record with a finite step time has it derived
local function table_access(records)
  local A = { n = #records }
  function A.values(f, first, last)
    local vals, pos = {}, {}
    for i = first or 1, last or #records do
      local v = records[i][f]
      if is_finite(v) then
        vals[#vals + 1] = v
        pos[#pos + 1] = i
      end
    end
    return vals, pos
  end
  function A.peak(fields)
    local best = {}
    for i = 1, #records do
      raise_peak(best, 1, records[i], fields)
    end
    return best[1]
  end
  function A.derived_any()
    for i = 1, #records do
      local r = records[i]
      if is_finite(r.step_time_s) and r.step_time_derived == true then
        return true
      end
    end
    return false
  end
  return A
end

local function log_access(log, n)
  return {
    n = n,
    values = function(f, first, last, pos)
      return log:values(f, first, last, pos)
    end,
    peak = function(fields)
      return log:peak(fields)
    end,
    derived_any = function()
      return log:derived_any()
    end,
  }
end

-- Mean of the present (finite) values of field `f` over records[first..last]; nil if none.
local function mean_field(A, f, first, last)
  local xs = A.values(f, first, last)
  if #xs == 0 then
    return nil
  end
  return (stats.mean(xs))
end

-- The global batch size shared by records[first..last], 'varies' when it changes, nil if absent.
local function records_gbs(A, first, last)
  local gbs
  for _, v in ipairs((A.values('global_batch_size', first, last))) do
    if gbs == nil then
      gbs = v
    elseif gbs ~= v then
      return 'varies'
    end
  end
  return gbs
end

local function build_training_config(log, A, opts, diags)
  local meta, args = log.meta or {}, log.args or {}
  local cfg, src = {}, {}
  local function set(key, ...)
    local v, from = first_of(...)
    cfg[key] = v == nil and null or v
    if v ~= nil then
      src[key] = from
    end
  end
  local last_train_iters = A.n > 0 and A.values('train_iters', A.n, A.n)[1] or nil
  local rec_gbs = A.n > 0 and records_gbs(A, 1, A.n) or nil
  if rec_gbs == 'varies' then
    rec_gbs = nil
  end
  set('global_batch_size', opts.gbs, 'flag', meta.global_batch_size, 'log',
    arg_number(args, 'global_batch_size'), 'args', rec_gbs, 'records')
  set('sequence_length', opts.seq_len, 'flag', meta.seq_len, 'log',
    arg_number(args, 'seq_length'), 'args')
  set('num_gpus', opts.gpus, 'flag', meta.world_size, 'log', arg_number(args, 'world_size'),
    'args')
  set('micro_batch_size', meta.micro_batch_size, 'log', arg_number(args, 'micro_batch_size'),
    'args')
  set('local_batch_size', meta.local_batch_size, 'log')
  set('gradient_accumulation_steps', meta.grad_accum, 'log')
  set('tensor_parallel_size', meta.tp, 'log', arg_number(args, 'tensor_model_parallel_size'),
    'args')
  set('pipeline_parallel_size', meta.pp, 'log',
    arg_number(args, 'pipeline_model_parallel_size'), 'args')
  set('context_parallel_size', meta.cp, 'log', arg_number(args, 'context_parallel_size'), 'args')
  set('data_parallel_size', meta.dp, 'log', arg_number(args, 'data_parallel_size'), 'args')
  set('expert_parallel_size', meta.ep, 'log', arg_number(args, 'expert_model_parallel_size'),
    'args')
  set('max_steps', meta.train_iters, 'log', arg_number(args, 'train_iters'), 'args',
    last_train_iters, 'records')
  local precision
  if arg_true(args, 'fp8') or (args.fp8 and args.fp8 ~= 'None' and args.fp8 ~= 'False') then
    precision = 'fp8'
  elseif arg_true(args, 'bf16') then
    precision = 'bf16'
  elseif arg_true(args, 'fp16') then
    precision = 'fp16'
  end
  -- The log's precision is what ran; the intended one (opts.precision: the run's config, or
  -- --precision) fills in only where the log does not show it, and a disagreement is reported.
  local shown = first_of(meta.precision, 'log', precision, 'args')
  set('precision', meta.precision, 'log', precision, 'args', opts.precision, 'config')
  if opts.precision and shown and shown ~= opts.precision then
    diag(diags, 'config_override', 'warning', string.format(
      'the run was configured for %s but the log shows %s: the log\'s precision is used',
      opts.precision, tostring(shown)))
  end
  set('learning_rate', meta.lr, 'log', arg_number(args, 'lr'), 'args')
  set('seed', meta.seed, 'log', arg_number(args, 'seed'), 'args')
  local tp_, pp, dp = cfg.tensor_parallel_size, cfg.pipeline_parallel_size,
    cfg.data_parallel_size
  if math.tointeger(tp_) and math.tointeger(pp) and math.tointeger(dp) then
    cfg.parallel_strategy = string.format('TP%d_PP%d_DP%d', tp_, pp, dp)
  else
    cfg.parallel_strategy = null
  end
  cfg.sources = src
  -- A flag that disagrees with what the log says is kept (flags override) but reported.
  local logged = {
    gbs = { 'global batch size', meta.global_batch_size or arg_number(args, 'global_batch_size') },
    seq_len = { 'sequence length', meta.seq_len or arg_number(args, 'seq_length') },
    gpus = { 'GPU count', meta.world_size or arg_number(args, 'world_size') },
  }
  for _, k in ipairs({ 'gbs', 'seq_len', 'gpus' }) do
    local what, seen = logged[k][1], logged[k][2]
    if opts[k] and seen and seen ~= opts[k] then
      diag(diags, 'config_override', 'warning', string.format(
        '%s %s from the command line overrides %s shown in the log', what, tostring(opts[k]),
        tostring(seen)))
    end
  end
  return cfg
end

local function build_performance(A, cfg, diags)
  local times, rec_of = A.values('step_time_s', nil, nil, true)
  local derived = #times > 0 and A.derived_any()
  local perf = { records_with_step_time = #times, step_time_derived = derived }
  if #times == 0 then
    if A.n > 0 then
      diag(diags, 'no_step_time', 'warning',
        'no record carries a step time: step-time statistics and tokens/s are not computed')
    end
    return perf
  end
  local all = assert(stats.summary(times))
  perf.all_records = {
    count = all.n,
    avg_step_time_seconds = all.mean,
    median_step_time_seconds = all.median,
    min_step_time_seconds = all.min,
    max_step_time_seconds = all.max,
    std_step_time_seconds = all.stddev or null,
  }
  local w = assert(stats.steady_state(times))
  local first_rec, last_rec = rec_of[w.first], rec_of[w.last]
  perf.steady_state = {
    method = w.method,
    batch_size = w.batch,
    statistic = w.statistic,
    first_record = first_rec,
    last_record = last_rec,
    first_iteration = A.values('iteration', first_rec, first_rec)[1] or null,
    last_iteration = A.values('iteration', last_rec, last_rec)[1] or null,
    records = w.count,
  }
  if w.method ~= 'mser-5' then
    diag(diags, 'steady_state', 'info', string.format(
      '%d step time%s: fewer than 10, so the steady-state window uses %s instead of MSER-5',
      #times, #times == 1 and '' or 's',
      w.method == 'single' and 'the single record' or 'MSER with batches of 1'))
  end
  local window = slice(times, w.first, w.last)
  local s = assert(stats.summary(window))
  perf.total_steps = #times
  perf.avg_step_time_seconds = s.mean
  perf.median_step_time_seconds = s.median
  perf.min_step_time_seconds = s.min
  perf.max_step_time_seconds = s.max
  perf.std_step_time_seconds = s.stddev or null
  perf.p5_step_time_seconds = s.p5
  perf.p95_step_time_seconds = s.p95
  perf.cv_step_time = s.cv or null
  perf.steps_per_second = 1 / s.mean

  -- Tokens/s = global batch x sequence length / mean step time over the window, for every
  -- framework alike (DESIGN.md); the framework's own figures are kept beside it for reference.
  local gbs, seq, gpus = cfg.global_batch_size, cfg.sequence_length, cfg.num_gpus
  local missing = {}
  if gbs == null then
    -- No single batch size for the run (ramp-up): use the window's own.
    local v = records_gbs(A, first_rec, last_rec)
    if v == 'varies' then
      -- Ramp-up inside the window: samples over the window / time over the window, expressed as
      -- the batch size that gives that rate at the window's mean step time.
      local samples, sec = 0, 0
      local k_of = {}
      for k = w.first, w.last do
        k_of[rec_of[k]] = k
      end
      local gv, gpos = A.values('global_batch_size', first_rec, last_rec, true)
      for j = 1, #gv do
        local k = k_of[gpos[j]]
        if k then
          samples, sec = samples + gv[j], sec + times[k]
        end
      end
      gbs = samples / sec * s.mean
      diag(diags, 'batch_size_ramp', 'info', 'the global batch size changes inside the steady '
        .. 'window: tokens/s = its samples x sequence length / its time')
    elseif v ~= nil then
      gbs = v
    end
  end
  local flags = {}
  if gbs == null then
    missing[#missing + 1] = 'global batch size'
    flags[#flags + 1] = '--gbs'
  end
  if seq == null then
    missing[#missing + 1] = 'sequence length'
    flags[#flags + 1] = '--seq-len'
  end
  if #missing > 0 then
    diag(diags, 'missing_config', 'warning', string.format(
      'tokens/s not computed: the log does not show the %s; give %s (tplua extract %s)',
      table.concat(missing, ' or the '), #missing > 1 and 'them' or 'it',
      table.concat(flags, ' ')))
  else
    perf.tokens_per_step = gbs * seq
    perf.tokens_per_second = gbs * seq / s.mean
    if gpus ~= null then
      perf.tokens_per_second_per_gpu = perf.tokens_per_second / gpus
    else
      diag(diags, 'missing_config', 'warning',
        'tokens/s/GPU not computed: the log does not show the GPU count; give it ' ..
        '(tplua extract --gpus)')
    end
  end
  perf.framework_tokens_per_second_per_gpu = mean_field(A, 'tokens_per_s_per_gpu',
    first_rec, last_rec) or null
  perf.framework_tflops_per_gpu = mean_field(A, 'tflops_per_gpu', first_rec, last_rec)
    or null
  perf.framework_mfu_pct = mean_field(A, 'mfu_pct', first_rec, last_rec) or null
  return perf
end

-- Model FLOPs utilisation of the run on catalog GPU `hw_id` (tp.metrics.mfu, Megatron's FLOPs per
-- token): adds perf.mfu (a fraction), perf.tflops_per_gpu (model TFLOP/s per GPU) and
-- perf.mfu_basis, or a missing_config warning naming what is lacking. The precision is the
-- training config's (the log's, else the intended one: opts.precision); when neither says it,
-- bf16 is assumed and said so. mfu_basis.precision_source tells which.
local function add_mfu(perf, cfg, model, hw_id, diags)
  local missing, flags = {}, {}
  if model == nil then
    missing[#missing + 1] = 'the model'
    flags[#flags + 1] = '--model'
  elseif not require('tp.plan.models').get(model) then
    diag(diags, 'missing_config', 'warning', string.format(
      "MFU not computed: model '%s' is not in the model catalog (tp.models)", model))
    return
  end
  local gpus, seq = math.tointeger(cfg.num_gpus), math.tointeger(cfg.sequence_length)
  if gpus == nil or gpus < 1 then
    missing[#missing + 1] = 'the GPU count'
    flags[#flags + 1] = '--gpus'
  end
  if seq == nil or seq < 1 then
    missing[#missing + 1] = 'the sequence length'
    flags[#flags + 1] = '--seq-len'
  end
  if #missing == 0 and not is_finite(perf.tokens_per_second) then
    diag(diags, 'missing_config', 'warning', 'MFU not computed: tokens/s is not known')
    return
  end
  if #missing > 0 then
    diag(diags, 'missing_config', 'warning', string.format(
      'MFU not computed: %s %s not known; give %s (tplua extract %s)',
      table.concat(missing, ' and '), #missing > 1 and 'are' or 'is',
      #missing > 1 and 'them' or 'it', table.concat(flags, ' ')))
    return
  end
  local precision, assumed = cfg.precision, false
  local source = cfg.sources and cfg.sources.precision
  if not MFU_PRECISIONS[precision] then
    precision, assumed, source = 'bf16', true, 'assumed'
  end
  local r, err = require('tp.parse.metrics').mfu({ tokens_per_s = perf.tokens_per_second, gpus = gpus,
    model = model, seq_len = seq, precision = precision, hardware = hw_id })
  if not r then
    diag(diags, 'missing_config', 'warning', err)
    return
  end
  if assumed then
    diag(diags, 'precision_assumed', 'info', string.format(
      'neither the log nor the config shows the precision: MFU is against the %s bf16 peak',
      hw_id))
  end
  perf.mfu = r.mfu
  perf.tflops_per_gpu = r.achieved_tflops_per_gpu
  perf.mfu_basis = {
    hardware = r.hardware,
    precision = r.precision,
    precision_assumed = assumed,
    precision_source = source or null,
    peak_tflops = r.peak_tflops,
    convention = r.convention,
    flops_per_token = r.flops_per_token,
    mfu_vs_bf16 = r.mfu_vs_bf16 or null,
    peak_tflops_bf16 = r.peak_tflops_bf16 or null,
  }
end

-- gpu_info from a catalog row: its name, the run's GPU count and the catalog id.
local function gpu_info_of(hw_id, cfg)
  local row = assert(require('tp.plan.hardware').get(hw_id))
  return {
    device_name = row.name,
    device_count = math.tointeger(cfg.num_gpus) or null,
    hardware = row.id,
  }
end

-- Each memory metric is the peak of some record fields and some memory-report fields.
local MEM_GROUPS = {
  { key = 'peak_memory_allocated_gib', rf = { 'mem_allocated_gib', 'mem_max_allocated_gib' },
    mf = { 'allocated_gib', 'max_allocated_gib' } },
  { key = 'peak_memory_reserved_gib', rf = { 'mem_reserved_gib', 'mem_max_reserved_gib' },
    mf = { 'reserved_gib', 'max_reserved_gib' } },
  { key = 'peak_device_memory_used_gib', rf = { 'mem_device_used_gib' },
    mf = { 'device_used_gib' } },
  { key = 'device_memory_total_gib', rf = { 'mem_device_total_gib' }, mf = {} },
  { key = 'peak_memory_usage_fraction', rf = { 'mem_usage_fraction' }, mf = {} },
}

local GIB_TO_GB = 1073741824 / 1e9

-- Allocated (live tensors), reserved (allocator cache) and device-used (whole device) memory are
-- different quantities: each has its own keys and is never substituted for another. One pass
-- over the records (long logs have 10^5 of them).
local function build_memory(A, reports)
  reports = reports or {}
  local best = {}
  local ngroups = #MEM_GROUPS
  for g = 1, ngroups do
    best[g] = A.peak(MEM_GROUPS[g].rf)
  end
  for i = 1, #reports do
    for g = 1, ngroups do
      raise_peak(best, g, reports[i], MEM_GROUPS[g].mf)
    end
  end
  local mem = {}
  for g = 1, ngroups do
    mem[MEM_GROUPS[g].key] = best[g] or null
  end
  -- tprimat's key, in decimal GB, and only for the allocator's allocated peak.
  mem.peak_memory_allocated_gb = best[1] and best[1] * GIB_TO_GB or null
  local list = {}
  for i, m in ipairs(reports) do
    list[i] = copy_scalars(m)
  end
  mem.reports = array(list)
  return mem
end

local function describe_findings(diags)
  local seen = {}
  for _, d in ipairs(diags) do
    if d.severity == 'error' or d.severity == 'warning' then
      local where = d.line ~= null and d.line and (' (line ' .. tostring(d.line) .. ')') or ''
      seen[#seen + 1] = d.kind .. where
    end
  end
  return seen
end

-- Logs of the records arrays built with lazy_records (weak keys): save streams them.
local lazy_logs = setmetatable({}, { __mode = 'k' })

-- A read-only array of the log's records, each converted (every field, null where absent) when
-- it is read; tp.record.save writes it straight from the scanner.
local function lazy_records(log, n)
  local src = log.records
  local t = setmetatable({}, {
    __index = function(_, i)
      local r = src[i]
      return r and convert_record(r, {}) or nil
    end,
    __len = function()
      return n
    end,
    __newindex = function()
      error('lazy records are read-only', 2)
    end,
  })
  lazy_logs[t] = log
  return t
end

--- Builds the run record from a parsed log (the table tp.log.parse returns).
---```lua
---local log = assert(tp.log.parse('train.log'))
---local rec = tp.record.from_log(log, { gbs = 128, seq_len = 2048, gpus = 8,
---  path = 'train.log', platform = 'amd' })
---print(rec.performance_metrics.tokens_per_second)
---```
---@param log table parsed log: format, parser_version, records, args, params, memory,
---  diagnostics, meta (see tp.log)
---@param opts? tp.record.Opts
---@return table record
function M.from_log(log, opts)
  if type(log) ~= 'table' or type(log.records) ~= 'table' then
    error('tp.record.from_log: log must be a parsed log (tp.log.parse), got ' .. type(log), 2)
  end
  opts = check_opts(opts)
  local diags = {}
  for _, d in ipairs(log.diagnostics or {}) do
    diags[#diags + 1] = {
      kind = d.kind or 'unknown',
      severity = d.severity or 'info',
      message = d.message or '',
      line = d.line or null,
    }
  end
  local n_parser_diags = #diags

  local rec = { schema = M.SCHEMA }
  for _, k in ipairs(TOP_LEVEL) do
    rec[k] = opts[k] or null
  end
  if rec.framework == null and log.format then
    rec.framework = log.format
  end
  rec.format = log.format or null

  local A, iterations, step_times, losses, lrs
  if opts.lazy_records then
    -- The records stay in the scanner: the ones holding a non-finite number are converted for
    -- their diagnostic, the flat arrays and metrics are read as columns.
    if type(log.values) ~= 'function' or type(log.nonfinite) ~= 'function' then
      error('tp.record.from_log: lazy_records needs a log from tp.log.parse', 2)
    end
    local n = #log.records
    for _, i in ipairs(log:nonfinite()) do
      convert_record(log.records[i], diags)
    end
    iterations = {}
    for _, v in ipairs((log:values('iteration'))) do
      if math.type(v) == 'integer' then
        iterations[#iterations + 1] = v
      end
    end
    step_times, losses, lrs = log:values('step_time_s'), log:values('loss'), log:values('lr')
    A = log_access(log, n)
    rec.records = lazy_records(log, n)
  else
    -- One pass over the parser's records (tp.log materialises them on access and lets them go
    -- again); everything after works on the converted records, where absent is null.
    local records = {}
    iterations, step_times, losses, lrs = {}, {}, {}, {}
    for i, r in ipairs(log.records) do
      records[i] = convert_record(r, diags)
      if math.type(r.iteration) == 'integer' then
        iterations[#iterations + 1] = r.iteration
      end
      if is_finite(r.step_time_s) then
        step_times[#step_times + 1] = r.step_time_s
      end
      if is_finite(r.loss) then
        losses[#losses + 1] = r.loss
      end
      if is_finite(r.lr) then
        lrs[#lrs + 1] = r.lr
      end
    end
    A = table_access(records)
    rec.records = array(records)
  end
  rec.iterations = array(iterations)
  rec.step_times = array(step_times)
  rec.loss_values = array(losses)
  rec.learning_rates = array(lrs)

  rec.training_config = build_training_config(log, A, opts, diags)
  rec.performance_metrics = build_performance(A, rec.training_config, diags)
  if opts.hardware then
    if rec.gpu_info == null then
      rec.gpu_info = gpu_info_of(opts.hardware, rec.training_config)
    end
    -- The GPU the log names (meta.device_name: torchtitan's "CUDA capacity: <name> with ...",
    -- Primus' "Detected GPU model: <name>"), when the catalog knows it and it is another one, is
    -- reported like a flag that overrides the log.
    local shown = (log.meta or {}).device_name
    if type(shown) == 'string' then
      local row = require('tp.plan.hardware').match({ name = shown })
      if row and row.id ~= opts.hardware then
        diag(diags, 'config_override', 'warning', string.format(
          "GPU %s from the command line overrides the log's device '%s' (%s)", opts.hardware,
          shown, row.id))
      end
    end
    if A.n > 0 then
      add_mfu(rec.performance_metrics, rec.training_config, opts.model, opts.hardware, diags)
    end
  end
  rec.memory_metrics = build_memory(A, log.memory)
  rec.args = log.args or {}
  rec.params = log.params or null

  if A.n == 0 then
    local found = describe_findings(table.move(diags, 1, n_parser_diags, 1, {}))
    diag(diags, 'no_records', 'error', string.format(
      'no iteration record found (format: %s)%s', log.format or 'not recognised',
      #found > 0 and ('; the log shows: ' .. table.concat(found, ', ')) or ''))
  end
  rec.diagnostics = array(diags)

  local failed = false
  for _, d in ipairs(diags) do
    failed = failed or d.severity == 'error'
  end
  local meta = log.meta or {}
  rec.status = failed and 'failed' or (meta.completed and 'completed' or 'unknown')
  rec.outcome = log.outcome or require('tp.parse.log').outcome(log.diagnostics or {}, meta)

  rec.source = {
    path = opts.path or null,
    sha256 = opts.sha256 or null,
    size_bytes = opts.size_bytes or null,
    parser = log.format or null,
    parser_version = log.parser_version or null,
    command = opts.command or null,
    exit_status = opts.exit_status or meta.exit_code or null,
    started_at = opts.started_at or null,
    finished_at = opts.finished_at or null,
  }
  return rec
end

---@class tp.record.Opts
---@field gbs? integer global batch size (overrides the log)
---@field seq_len? integer sequence length (overrides the log)
---@field gpus? integer number of GPUs (overrides the log)
---@field path? string log path, for source.path
---@field sha256? string log SHA-256, for source.sha256
---@field size_bytes? integer log size, for source.size_bytes
---@field command? string command line of the run, for source.command
---@field exit_status? integer exit status of the run, for source.exit_status
---@field started_at? string
---@field finished_at? string
---@field platform? string 'nvd' | 'amd' | 'cpu'
---@field framework? string defaults to the log's format
---@field model? string
---@field dataset? string
---@field methodology? string
---@field repeat? integer
---@field run_id? string
---@field experiment? string
---@field gpu_info? table devices as probed; with `hardware` alone it is {device_name=,
---  device_count=, hardware=} from the catalog row
---@field hardware? string catalog id of the GPU (tp.hardware.ids()): gpu_info when none is given,
---  and MFU (performance_metrics.mfu) when `model` is in tp.models
---@field precision? string the precision the run was configured for (fp32, tf32, bf16, fp16, fp8,
---  fp4): training_config.precision (source 'config') and MFU's peak when the log does not show
---  one; a log that shows another gives a config_override warning and its own is used
---@field lazy_records? boolean leave the records in the log's scanner (`log` must come from
---  tp.log.parse and stay open): `records` is a read-only array that converts a record when it is
---  read, and tp.record.save writes them straight from the scanner (memory bounded by the flat
---  arrays, not by the records); tp.json.encode cannot encode such a record

local PRETTY = { pretty = true, sort_keys = true }

-- Writes a record whose records stay in the log's scanner: the same text as
-- json.save_file(path, rec, PRETTY), produced member by member (each one's pretty text indented
-- one level: a JSON text has newlines only between tokens) with the records streamed from the
-- scanner, into a file put in place atomically.
local function save_streamed(rec, log, path)
  local keys = {}
  for k in pairs(rec) do
    if type(k) ~= 'string' then
      return nil, string.format('%s: $: table key of type %s (JSON keys are strings)', path,
        type(k)), 'EINVAL'
    end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  -- What building the record left behind goes before the text is produced (peak memory).
  collectgarbage('collect')
  local out <close>, oerr, ocode = require('tp.parse.log').output(path)
  if not out then
    return nil, oerr, ocode
  end
  local ok, err, code = out:write('{')
  for i, k in ipairs(keys) do
    if not ok then
      break
    end
    ok, err, code = out:write((i > 1 and ',\n  ' or '\n  ') .. json.encode(k) .. ': ')
    if ok and k == 'records' then
      ok, err, code = log:write_records(out)
      if not ok and code ~= 'EINVAL' and code ~= 'ENOMEM' then
        return nil, err, code
      end
    elseif ok then
      local text
      text, err, code = json.encode(rec[k], PRETTY)
      if text then
        ok, err, code = out:write((text:gsub('\n', '\n  ')))
      else
        ok = false
        -- Named from the record's root, as json.save_file names it.
        local ident = k:match('^[%a_][%w_]*$') and #k <= 40
        err = '$' .. (ident and ('.' .. k) or ('["' .. k .. '"]')) .. err:sub(2)
      end
    end
    if not ok and (code == 'EINVAL' or code == 'ENOMEM') and err:sub(1, 1) == '$' then
      return nil, string.format('%s: %s', path, err), code
    end
  end
  if ok then
    ok, err, code = out:write('\n}\n')
  end
  if ok then
    ok, err, code = out:commit()
  end
  if not ok then
    return nil, err, code
  end
  return true
end

--- Writes a record as pretty JSON with sorted keys, atomically (a crash or an error leaves the
--- old file or none, never a partial one).
---@param rec table a record from from_log
---@param path string
---@return true|nil ok, string? err, string? code
function M.save(rec, path)
  if type(rec) ~= 'table' then
    error('tp.record.save: record must be a table, got ' .. type(rec), 2)
  end
  if type(path) ~= 'string' then
    error('tp.record.save: path must be a string, got ' .. type(path), 2)
  end
  if not json then
    return nil, 'record.save: tp.json is not available in this build', 'ENOSYS'
  end
  local log = type(rec.records) == 'table' and lazy_logs[rec.records]
  if log then
    return save_streamed(rec, log, path)
  end
  return json.save_file(path, rec, { pretty = true, sort_keys = true })
end

return M
