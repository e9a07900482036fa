-- tp.analyse._results_summary: the small summary each run keeps in memory, made from its decoded
-- record (tprimat-era files: the steady window recomputed from their step times).
local json = require('tp.json')
local stats = require('tp.stats')
local decode = require('tp.analyse._results_decode')

local M = {}

local is_null, is_finite, num, str, tbl = decode.is_null, decode.is_finite, decode.num,
  decode.str, decode.tbl
local KEPT_TABLES = decode.KEPT_TABLES
local HUGE = math.huge

local function finite_list(xs)
  local out = {}
  for i = 1, #(xs or {}) do
    local v = xs[i]
    if is_finite(v) then
      out[#out + 1] = v
    end
  end
  return out
end

local function first_finite(xs, from, to, step)
  for i = from, to, step do
    if is_finite(xs[i]) then
      return xs[i]
    end
  end
  return nil
end

local function gpu_name(gi)
  if not gi then
    return nil
  end
  local d = tbl(gi.devices) and tbl(gi.devices[1])
  return str(gi.device_name) or str(gi.name) or (d and str(d.name))
end

local function unified_get(tc, section, key)
  local u = tbl(tc.unified)
  local s = u and tbl(u[section])
  local v = s and s[key]
  if is_null(v) then
    return nil
  end
  return v
end

local function dataset_name(v)
  if type(v) == 'string' then
    return v
  end
  if tbl(v) then
    return str(v.name) or str(v.path)
  end
  return nil
end

-- tprimat's own step-time figures include or exclude warm-up by its own rules (its
-- benchmark_*.json average all steps but the first: DmitriiNikolaevAtAmd/tprimat
-- output/benchmark_rocm_llama.json, avg 9.763 over raw_step_times[2..10]); for a fair comparison
-- the steady window is recomputed here with MSER-5, exactly as tp.record does.
local function recompute_perf(s, times)
  local xs = finite_list(times)
  if #xs == 0 then
    return
  end
  local w = stats.steady_state(xs)
  if not w then
    return
  end
  local window = table.move(xs, w.first, w.last, 1, {})
  local sm = stats.summary(window)
  if not sm then
    return
  end
  s.step_time = sm.mean
  s.step_time_median = sm.median
  s.step_time_std = sm.stddev
  s.step_time_cv = sm.cv
  s.steady_method = w.method .. ' (recomputed)'
  s.steady_first_iteration = w.first
  if s.gbs and s.seq_len then
    s.tokens_per_s = s.gbs * s.seq_len / sm.mean
    if s.gpus then
      s.tokens_per_s_per_gpu = s.tokens_per_s / s.gpus
    end
  end
end

-- Length of an array, decoded or skipped.
local function length(v)
  if json.is_skipped(v) then
    return v.count
  end
  return #v
end

local function summarise(doc, path, kind, nonfinite)
  local tc = tbl(doc.training_config) or {}
  local pm = tbl(doc.performance_metrics) or {}
  local mm = tbl(doc.memory_metrics) or {}
  local gi = tbl(doc.gpu_info)
  local s = { path = path, kind = kind }
  s.platform = str(doc.platform)
  s.framework = str(doc.framework) or str(doc.format)
  s.model = str(doc.model) or (tbl(doc.model) and str(doc.model.id))
    or (tbl(tc.unified) and str(tc.unified.model))
  s.dataset = dataset_name(doc.dataset) or dataset_name(unified_get(tc, 'training', 'dataset'))
  s.methodology = str(doc.methodology)
  s.experiment = str(doc.experiment)
  s['repeat'] = num(doc['repeat'])
  s.status = str(doc.status)
  s.run_id = str(doc.run_id)
  -- Why tplua stopped the run, when it did: 'converged_ci' and 'max_iters' are its stop rule's
  -- good ends (docs/stopping.md), the rest failures.
  s.stopped_by = str(doc.stopped_by)
  s.gpu = gpu_name(gi)
  s.gpus = num(tc.num_gpus) or (gi and (num(gi.device_count) or num(gi.count)))
  if not s.gpus and tbl(tc.unified) then
    local u = tc.unified
    if num(u.nodes) and num(u.gpus_per_node) then
      s.gpus = u.nodes * u.gpus_per_node
    end
  end
  s.gbs = num(tc.global_batch_size) or num(unified_get(tc, 'training', 'gbs'))
  s.mbs = num(tc.micro_batch_size) or num(unified_get(tc, 'training', 'mbs'))
  s.seq_len = num(tc.sequence_length) or num(unified_get(tc, 'training', 'seq_len'))
  s.precision = str(tc.precision) or str(unified_get(tc, 'training', 'precision'))
  s.lr = num(tc.learning_rate) or num(unified_get(tc, 'training', 'lr'))
  s.seed = num(tc.seed) or num(unified_get(tc, 'training', 'seed'))
  s.tp = num(tc.tensor_parallel_size) or num(unified_get(tc, 'parallelism', 'tp'))
  s.pp = num(tc.pipeline_parallel_size) or num(unified_get(tc, 'parallelism', 'pp'))
  s.dp = num(tc.data_parallel_size) or num(unified_get(tc, 'parallelism', 'dp'))
  s.train_iters = num(tc.max_steps) or num(unified_get(tc, 'training', 'iters'))

  -- tprimat's benchmark_*.json name the array raw_step_times, its train_*.json step_times
  -- (DmitriiNikolaevAtAmd/tprimat output/ and output_prev/).
  local times = doc.step_times or doc.raw_step_times or {}
  local iters = doc.iterations or {}
  local losses = doc.loss_values or {}
  local records = doc.records or {}
  s.n_records = math.max(length(records), length(times))
  if #iters > 0 then
    local last = -HUGE
    for i = 1, #iters do  -- the largest finite value (inlined: 10^4 runs x their iterations)
      local v = iters[i]
      if type(v) == 'number' and v > last and v < HUGE then
        last = v
      end
    end
    s.last_iteration = last > -HUGE and last or nil
  elseif kind == 'tprimat' and #times > 0 then
    -- tprimat logged every step: the n-th step time is iteration n.
    s.last_iteration = #times
  end
  s.loss_first = first_finite(losses, 1, #losses, 1)
  s.loss_last = first_finite(losses, #losses, 1, -1)
  s.nonfinite_values = nonfinite > 0 and nonfinite or nil

  if kind == 'tprimat' then
    recompute_perf(s, times)
    s.recorded_tokens_per_s_per_gpu = num(pm.tokens_per_second_per_gpu)
    s.recorded_step_time = num(pm.avg_step_time_seconds)
  else
    s.step_time = num(pm.avg_step_time_seconds)
    s.step_time_median = num(pm.median_step_time_seconds)
    s.step_time_std = num(pm.std_step_time_seconds)
    s.step_time_cv = num(pm.cv_step_time)
    if not s.step_time_cv and s.step_time_std and s.step_time then
      s.step_time_cv = s.step_time_std / s.step_time
    end
    local ss = tbl(pm.steady_state)
    if ss then
      s.steady_method = str(ss.method)
      s.steady_first_iteration = num(ss.first_iteration)
    end
    s.tokens_per_s = num(pm.tokens_per_second)
    s.tokens_per_s_per_gpu = num(pm.tokens_per_second_per_gpu)
  end
  s.tflops_per_gpu = num(pm.tflops_per_gpu)
  s.mfu = num(pm.mfu)
  s.memory_gib = num(mm.peak_memory_allocated_gib)
  if not s.memory_gib and num(mm.peak_memory_allocated_gb) then
    s.memory_gib = mm.peak_memory_allocated_gb / 1.073741824
  end
  local src = tbl(doc.source)
  s.started = (src and str(src.started_at)) or str(doc.timestamp)
  for _, k in ipairs(KEPT_TABLES) do
    s[k] = tbl(doc[k])
  end
  s.dataset_info = tbl(doc.dataset)
  -- Energy per token as compare and reports take it (tp.efficiency): the record's measured
  -- value first, else the TDP estimate; energy_basis says which ('measured' or 'estimated').
  if s.energy_metrics or s.tokens_per_s then
    local ok, jpt, basis = pcall(require('tp.analyse.efficiency').energy, s)
    if ok and jpt then
      s.joules_per_token, s.energy_basis = jpt, basis:match('^%a+')
    end
  end
  return s
end

M.summarise = summarise

return M
