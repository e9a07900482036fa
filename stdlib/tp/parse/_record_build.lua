-- tp.parse._record_build: the metrics of a run record, read from its records through one access
-- interface: training_config (flags, log, argument dump), performance_metrics (step times,
-- steady state, tokens/s, MFU), gpu_info from the catalog, and memory_metrics.
local base = require('tp.parse._record_base')
local stats = require('tp.stats')

local null = base.null
local array, is_finite, diag = base.array, base.is_finite, base.diag
local copy_scalars, raise_peak, MFU_PRECISIONS = base.copy_scalars, base.raise_peak,
  base.MFU_PRECISIONS

local M = {}

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

local function slice(xs, first, last)
  return table.move(xs, first, last, 1, {})
end

-- What the metrics read of the records, through one interface with two implementations: the
-- converted record tables (from_log), and the scanner's stored records (lazy_records, nothing
-- materialised; tp.log's values, peak and derived_any do the same in C).
--   A.n                        number of records
--   A.values(f, first, last, pos)  finite values of field f in records first..last (and, with
--                              pos, their positions)
--   A.peak(fields)             largest finite value of the fields (records in order), or nil
--   A.derived_any()            a record with a finite step time has it derived
function M.table_access(records)
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

function M.log_access(log, n)
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

function M.build_training_config(log, A, opts, diags)
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

function M.build_performance(A, cfg, diags)
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
function M.add_mfu(perf, cfg, model, hw_id, diags)
  local missing, flags = {}, {}
  if model == nil then
    missing[#missing + 1] = 'the model'
    flags[#flags + 1] = '--model'
  elseif not require('tp.catalog.models').get(model) then
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
  local r, err = require('tp.parse.metrics').mfu({ tokens_per_s = perf.tokens_per_second,
    gpus = gpus, model = model, seq_len = seq, precision = precision, hardware = hw_id })
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
function M.gpu_info_of(hw_id, cfg)
  local row = assert(require('tp.catalog.hardware').get(hw_id))
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
function M.build_memory(A, reports)
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

return M
