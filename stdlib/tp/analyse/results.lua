-- tp.results: load run records ("schema": "tplua.run/2", docs/record.md) and tprimat-era result
-- files (train_*.json, benchmark_*.json) into a result set that can be filtered, grouped,
-- sorted and printed. Each run keeps a small summary in memory; its per-iteration arrays are
-- read back from the file on first access. docs/analysis.md describes the summary fields.
local json = require('tp.json')
local fs = require('tp.fs')
local stats = require('tp.stats')

local M = {}

local null = json.null

--- The schema of the run records this module reads.
M.SCHEMA = require('tp.parse.record').SCHEMA

--- Per-iteration fields read lazily from the file on first access (kept out of the summary).
M.DETAIL_FIELDS = { 'records', 'iterations', 'step_times', 'loss_values', 'learning_rates',
  'args' }

--- The summary fields, in the order tables, CSV and JSON use.
M.SUMMARY_FIELDS = {
  'id', 'path', 'kind', 'platform', 'framework', 'model', 'dataset', 'methodology', 'experiment',
  'repeat', 'status', 'gpu', 'gpus', 'gbs', 'mbs', 'seq_len', 'precision', 'lr', 'seed', 'tp',
  'pp', 'dp', 'train_iters', 'last_iteration', 'n_records', 'loss_first', 'loss_last',
  'step_time', 'step_time_median', 'step_time_std', 'step_time_cv', 'steady_method',
  'steady_first_iteration', 'tokens_per_s', 'tokens_per_s_per_gpu', 'tflops_per_gpu', 'mfu',
  'joules_per_token', 'energy_basis', 'memory_gib', 'started',
}

-- Nested tables kept with the summary (small: a few dozen scalars each).
local KEPT_TABLES = { 'training_config', 'performance_metrics', 'memory_metrics',
  'energy_metrics', 'cost_metrics', 'gpu_info', 'source', 'diagnostics', 'environment',
  'profile' }

local DETAIL = {}
for _, k in ipairs(M.DETAIL_FIELDS) do
  DETAIL[k] = true
end

-- File facts of each run (path, size, mtime, kind), out of the summary; weak keys.
local FILE = setmetatable({}, { __mode = 'k' })

local function is_null(v)
  return rawequal(v, null)
end

local HUGE = math.huge

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= HUGE and v ~= -HUGE
end

local function num(v)
  if is_finite(v) then
    return v
  end
  return nil
end

local function str(v)
  if type(v) == 'string' and v ~= '' then
    return v
  end
  return nil
end

local function tbl(v)
  if type(v) == 'table' and not is_null(v) then
    return v
  end
  return nil
end

-- ---------------------------------------------------------------------------------------------
-- Decoding and validation.

-- Python's json module writes NaN, Infinity and -Infinity as bare words (Python documentation,
-- json.dump: allow_nan=True by default; tprimat wrote its files with json.dump). They are not
-- JSON (RFC 8259 §6): given the result of a strict decode (doc, err, code) of the text
-- `text_of()` gives, a parse failure is retried with them read as null. Returns doc, err, code,
-- and how many were read so.
local function or_nonfinite(text_of, name, doc, err, code)
  if doc ~= nil or code ~= 'EPARSE' then
    return doc, err, code, 0
  end
  local n = 0
  local fixed = text_of():gsub('([%[,:]%s*)(%-?)(%a+)', function(pre, sign, word)
    if word == 'NaN' and sign == '' or word == 'Infinity' then
      n = n + 1
      return pre .. 'null'
    end
    return nil
  end)
  if n == 0 then
    return nil, err, code
  end
  local doc2 = json.decode(fixed, { name = name })
  if doc2 == nil then
    return nil, err, code
  end
  return doc2, nil, nil, n
end

-- The per-iteration members a summary needs only the size and kinds of: loading a set leaves
-- them undecoded (tp.json's skip; they load with the other details on first access).
local SKIPPED_ON_LOAD = { 'records', 'args', 'step_times', 'raw_step_times', 'learning_rates' }

-- A file that could not be read, named alike by both readers below.
local function read_failure(path, err, code)
  if code == 'ELIMIT' then
    return nil, string.format('%s: larger than the %d-byte limit', path, json.DEFAULT_MAX_SIZE),
      code
  end
  return nil, err, code
end

-- Reads and decodes `path` in full (a run's details). Returns doc and {size, mtime} (of the file
-- as read).
local function read_doc(path)
  local text, mtime, rcode = json.read_text(path)
  if not text then
    return read_failure(path, mtime, rcode)
  end
  if #text == 0 then
    return nil, path .. ': empty file', 'EPARSE'
  end
  local function text_of()
    return text
  end
  local doc, err, code = or_nonfinite(text_of, path, json.decode(text, { name = path }))
  if doc == nil then
    return nil, err, code
  end
  return doc, { size = #text, mtime = mtime }
end

local Bad = {}

local function bad(path, fmt, ...)
  error(setmetatable({ msg = path .. ': ' .. string.format(fmt, ...) }, Bad), 0)
end

local function kind_of(v)
  if is_null(v) then
    return 'null'
  end
  if json.is_skipped(v) then
    return v.kind
  end
  if type(v) == 'table' then
    return json.is_array(v) and 'array' or 'object'
  end
  return math.type(v) or type(v)
end

local function check_field(path, doc, key, want)
  local v = doc[key]
  if v == nil or is_null(v) then
    return
  end
  local k = kind_of(v)
  local ok = k == want or (want == 'number' and (k == 'integer' or k == 'float'))
    or (want == 'object' and k == 'array' and
      (json.is_skipped(v) and v.count == 0 or not json.is_skipped(v) and next(v) == nil))
  if not ok then
    bad(path, '%s is %s, %s expected', key, k, want)
  end
end

-- Arrays of numbers (null allowed: a non-finite value written as null).
local function check_numbers(path, doc, key, text_of)
  local v = doc[key]
  if v == nil or is_null(v) then
    return
  end
  if json.is_skipped(v) then
    if v.kind == 'array' and (v.kinds.number or 0) + (v.kinds.null or 0) == v.count then
      return
    end
    v = json.decode_skipped(text_of(), v)  -- to name the element at fault
  end
  if type(v) ~= 'table' or (not json.is_array(v) and next(v) ~= nil) then
    bad(path, '%s is %s, array expected', key, kind_of(v))
  end
  for i = 1, #v do
    local x = v[i]
    if type(x) ~= 'number' and not rawequal(x, null) then
      bad(path, '%s[%d] is %s, number expected', key, i, kind_of(x))
    end
  end
end

-- Numeric members the summary reads: present means a number (or null).
local NUMERIC_MEMBERS = {
  performance_metrics = { 'avg_step_time_seconds', 'median_step_time_seconds',
    'std_step_time_seconds', 'cv_step_time', 'tokens_per_second', 'tokens_per_second_per_gpu',
    'tflops_per_gpu', 'mfu' },
  training_config = { 'global_batch_size', 'sequence_length', 'num_gpus', 'micro_batch_size',
    'max_steps', 'learning_rate', 'seed', 'tensor_parallel_size', 'pipeline_parallel_size',
    'data_parallel_size' },
  memory_metrics = { 'peak_memory_allocated_gib', 'peak_memory_allocated_gb' },
}

local function check_numeric_members(path, doc)
  for section, keys in pairs(NUMERIC_MEMBERS) do
    local t = doc[section]
    if type(t) == 'table' then
      for _, k in ipairs(keys) do
        local v = t[k]
        if v ~= nil and type(v) ~= 'number' and not is_null(v) then
          bad(path, '%s.%s is %s, number expected', section, k, kind_of(v))
        end
      end
    end
  end
end

-- `text_of()` gives the document's text (to decode a skipped member that needs a closer look).
local function validate(path, doc, text_of)
  if type(doc) ~= 'table' or json.is_array(doc) then
    bad(path, 'top level is %s, a JSON object (run record) expected', kind_of(doc))
  end
  for _, k in ipairs({ 'platform', 'framework', 'methodology', 'experiment', 'run_id', 'status' })
  do
    check_field(path, doc, k, 'string')
  end
  for _, k in ipairs(KEPT_TABLES) do
    if k == 'diagnostics' then
      check_field(path, doc, k, 'array')
    elseif k == 'source' and type(doc.source) == 'string' then
      -- tprimat wrote a label here ("primus_log_extraction"); kept as source.label.
      doc.source = { label = doc.source }
    else
      check_field(path, doc, k, 'object')
    end
  end
  check_field(path, doc, 'args', 'object')
  check_field(path, doc, 'records', 'array')
  local recs = doc.records
  if json.is_skipped(recs) and (recs.kinds.object or 0) < recs.count then
    recs = json.decode_skipped(text_of(), recs)  -- to name the element at fault
  end
  if type(recs) == 'table' then
    for i = 1, #recs do
      local r = recs[i]
      if type(r) ~= 'table' or json.is_array(r) and next(r) ~= nil then
        bad(path, 'records[%d] is %s, object expected', i, kind_of(r))
      end
    end
  end
  check_field(path, doc, 'repeat', 'number')
  for _, k in ipairs({ 'iterations', 'step_times', 'raw_step_times', 'loss_values',
    'learning_rates' }) do
    check_numbers(path, doc, k, text_of)
  end
  check_numeric_members(path, doc)
end

-- ---------------------------------------------------------------------------------------------
-- Summaries.

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

-- ---------------------------------------------------------------------------------------------
-- Runs: summary fields are plain members; the detail fields load on first access.

local Run = {}

local function load_details(run)
  local f = FILE[run]
  local doc, st = read_doc(f.path)
  if doc == nil then
    error(string.format('tp.results: cannot read back %s: %s', f.path, tostring(st)), 3)
  end
  if st.size ~= f.size or st.mtime ~= f.mtime then
    error(string.format('tp.results: %s changed since it was loaded (%d -> %d bytes); load ' ..
      'the results again', f.path, f.size, st.size), 3)
  end
  local times = doc.step_times or doc.raw_step_times
  local loaded = {
    records = doc.records,
    iterations = doc.iterations,
    step_times = times,
    loss_values = doc.loss_values,
    learning_rates = doc.learning_rates,
    args = tbl(doc.args) or {},
  }
  for _, k in ipairs(M.DETAIL_FIELDS) do
    local v = loaded[k]
    if v == nil or is_null(v) then
      v = k == 'args' and {} or json.array()
    end
    rawset(run, k, v)
  end
  if f.kind == 'tprimat' and #run.iterations == 0 then
    local n = math.max(#run.step_times, #(run.loss_values or {}))
    local its = json.array()
    for i = 1, n do
      its[i] = i
    end
    rawset(run, 'iterations', its)
  end
end

-- What the prompt offers after `run.` / `run:` besides the summary fields (lua/tplua.c reads
-- __complete because __index is a function): the lazily loaded arrays and the methods.
local RUN_COMPLETE = {}
for _, k in ipairs(M.DETAIL_FIELDS) do
  RUN_COMPLETE[k] = true
end

local RUN_MT = {
  __name = 'tp.results.Run',
  __complete = RUN_COMPLETE,
  __index = function(run, k)
    if DETAIL[k] then
      load_details(run)
      return rawget(run, k)
    end
    return Run[k]
  end,
  __tostring = function(run)
    return string.format('tp.results.Run %s (%s, %s)', run.id or '?',
      run.platform or '?', run.framework or '?')
  end,
}

--- Returns true when the per-iteration arrays of `run` are in memory.
---@return boolean
function Run:details_loaded()
  return rawget(self, 'step_times') ~= nil
end

--- Drops the per-iteration arrays of `run` from memory (they load again on next access).
function Run:drop_details()
  for _, k in ipairs(M.DETAIL_FIELDS) do
    rawset(self, k, nil)
  end
end

--- Returns the file the run was read from and its kind ('run' or 'tprimat').
---@return string path, string kind
function Run:file()
  local f = FILE[self]
  return f.path, f.kind
end

for k, f in pairs(Run) do
  RUN_COMPLETE[k] = f
end

--- Returns true when `v` is a run of a result set.
---@param v any
---@return boolean
function M.is_run(v)
  return type(v) == 'table' and getmetatable(v) == RUN_MT
end

-- ---------------------------------------------------------------------------------------------
-- Loading.

local function basename(p)
  return (p:gsub('/+$', ''):match('([^/]*)$'))
end

local function stem(p)
  local b = basename(p)
  return b:match('^(.+)%.[^.]*$') or b
end

local function is_tprimat_name(name)
  return name:match('^train_.*%.json$') ~= nil or name:match('^benchmark_.*%.json$') ~= nil
end

-- Classifies a decoded document: 'run', 'tprimat', or nil and the reason it is not a result.
local function classify(doc, path, explicit)
  local schema = doc.schema
  if schema ~= nil and not is_null(schema) then
    local record = require('tp.parse.record')
    if record.readable(schema) then
      return 'run'
    end
    if type(schema) == 'string' and schema:match('^tplua%.run/') then
      bad(path, "schema '%s' is not supported (this version reads %s)", schema,
        table.concat(record.READABLE, ', '))
    end
    return nil, string.format("schema '%s' is not a run record", tostring(schema))
  end
  local looks = doc.performance_metrics ~= nil or doc.step_times ~= nil
    or doc.raw_step_times ~= nil
  if looks then
    return 'tprimat'
  end
  if explicit or is_tprimat_name(basename(path)) then
    bad(path, 'neither a run record (no "schema") nor a tprimat-era result (no ' ..
      'performance_metrics, step_times or raw_step_times)')
  end
  return nil, 'not a result file (no schema, no performance_metrics)'
end

-- Reads, validates and summarises one document (read_file_doc's results): returns
-- an outcome {kind = 'run', summary, kind_of} | {kind = 'error', message, code} | {kind =
-- 'skipped', reason}, and its stat. `text_of()` gives the file's text (for members to decode).
local function examine_doc(path, explicit, doc, st, nonfinite, text_of)
  if doc == nil then
    return { kind = 'error', message = st, code = nonfinite }
  end
  local out
  local ok, err = pcall(function()
    validate(path, doc, text_of)
    local kind, why = classify(doc, path, explicit)
    if not kind then
      out = { kind = 'skipped', reason = why }
      return
    end
    if kind == 'tprimat' then
      -- Its step times are summarised here (recompute_perf): decode them.
      for _, k in ipairs({ 'step_times', 'raw_step_times' }) do
        if json.is_skipped(doc[k]) then
          doc[k] = json.decode_skipped(text_of(), doc[k])
        end
      end
    end
    local summary = summarise(doc, path, kind, nonfinite)
    summary.path = nil
    out = { kind = 'run', summary = summary, file_kind = kind }
  end)
  if not ok then
    if getmetatable(err) ~= Bad then
      error(err, 0)
    end
    out = { kind = 'error', message = err.msg, code = 'EINVAL' }
  end
  return out, st
end

-- A file handed out by json.read_files, decoded as read_doc decodes a path (same results, same
-- messages): doc, {size, mtime}, count of non-finite words, and a function giving the text.
local function read_file_doc(file, skip)
  local path = file:path()
  local err, code = file:error()
  if err then
    return read_failure(path, err, code)
  end
  local st = file:stat()
  if st.size == 0 then
    return nil, path .. ': empty file', 'EPARSE'
  end
  local function text_of()
    return file:text()
  end
  local doc, derr, dcode, nonfinite = or_nonfinite(text_of, path, file:decode({ skip = skip }))
  if doc == nil then
    return nil, derr, dcode
  end
  return doc, { size = st.size, mtime = st.mtime }, nonfinite, text_of
end

-- Adds an outcome of `examine_doc` (fresh or from an index) to the set.
local function apply(set, outcome, path, root, st)
  if outcome.kind == 'error' then
    set.errors[#set.errors + 1] = { path = path, message = outcome.message, code = outcome.code }
  elseif outcome.kind == 'skipped' then
    set.skipped[#set.skipped + 1] = { path = path, reason = outcome.reason }
  else
    local run = {}
    for k, v in pairs(outcome.summary) do
      run[k] = v
    end
    run.path = path
    FILE[run] = { path = path, size = st.size, mtime = st.mtime, kind = outcome.file_kind,
      root = root }
    set.runs[#set.runs + 1] = setmetatable(run, RUN_MT)
  end
end

--- Name of the summary index `load` keeps in a directory when asked (`opts.index`).
M.INDEX_NAME = '.tplua-results-index.json'
local INDEX_SCHEMA = 'tplua.results-index/1'

-- The entries of a directory's index ({[file name] = {size, mtime, outcome}}), or {} when it is
-- missing, unreadable or of another version: the index is a cache, never a source of truth.
local function read_index(dir)
  local doc = json.load_file(dir .. '/' .. M.INDEX_NAME)
  if type(doc) ~= 'table' or doc.schema ~= INDEX_SCHEMA or type(doc.entries) ~= 'table' then
    return {}
  end
  return doc.entries
end

local function write_index(dir, entries)
  local text = json.encode({ schema = INDEX_SCHEMA, entries = entries })
  if text then
    -- Best effort: a read-only directory simply has no index.
    fs.write_atomic(dir .. '/' .. M.INDEX_NAME, text)
  end
end

-- Loading is planned first (the directories walked, the files listed in order, the index
-- consulted), then carried out: the files to read go to json.read_files, whose workers read and
-- scan the next ones while this thread validates and summarises the current one. A plan is a
-- list of steps in the order their results go into the set:
--   {error = {path, message, code}} | {skipped = {path, reason}}
--   | {path, root, explicit, dir = index state or nil, name, outcome?, st?} (outcome: from the
--     index; without it the file is read)

-- Plans a file unless it was planned already (same real path). `real` is its real path when the
-- caller knows it (a regular file listed in a directory whose real path it has).
local function plan_file(plan, seen, path, root, explicit, real, dir, name)
  real = real or fs.realpath(path) or path
  if seen[real] then
    plan[#plan + 1] = { skipped = { path = path, reason = 'already loaded as ' .. seen[real] } }
    return
  end
  seen[real] = path
  local step = { path = path, root = root, explicit = explicit, dir = dir, name = name }
  if dir then
    local st = fs.stat(path)
    local cached = dir.old[name]
    if st and type(cached) == 'table' and cached.size == st.size and cached.mtime == st.mtime
      and type(cached.outcome) == 'table' then
      step.outcome, step.st = cached.outcome, st
    end
  end
  plan[#plan + 1] = step
end

local function plan_dir(plan, dir, root, opts, seen, dirs_seen, indexes)
  local real = fs.realpath(dir) or dir
  if dirs_seen[real] then
    return
  end
  dirs_seen[real] = true
  local entries, err, code = fs.list(dir)
  if not entries then
    plan[#plan + 1] = { error = { path = dir, message = err, code = code } }
    return
  end
  local index
  if opts.index then
    index = { path = dir, old = read_index(dir), new = {}, changed = false }
    indexes[#indexes + 1] = index
  end
  for _, e in ipairs(entries) do
    if e.name:sub(1, 1) ~= '.' then
      local p = dir:gsub('/+$', '') .. '/' .. e.name
      local t = e.type
      if t == 'link' or t == 'other' or t == nil then
        local st = fs.stat(p)
        t = st and st.type
      end
      if t == 'directory' then
        if opts.recursive then
          plan_dir(plan, p, root, opts, seen, dirs_seen, indexes)
        end
      elseif t == 'file' and e.name:match('%.json$')
        and not require('tp.plan.profile').is_trace_name(e.name) then
        -- A regular file (not a link) is where its directory really is: no realpath(3) per file.
        local rp = e.type == 'file' and (real .. '/' .. e.name) or nil
        plan_file(plan, seen, p, root, false, rp, index, e.name)
      end
    end
  end
end

-- Carries out a plan into `set`, then rewrites the indexes that changed.
local function run_plan(set, plan, indexes)
  local paths = {}
  for _, step in ipairs(plan) do
    if step.path and not step.outcome then
      paths[#paths + 1] = step.path
    end
  end
  local next_file, _, _, reader = json.read_files(paths)
  local _reader <close> = reader
  for _, step in ipairs(plan) do
    if step.error then
      set.errors[#set.errors + 1] = step.error
    elseif step.skipped then
      set.skipped[#set.skipped + 1] = step.skipped
    else
      local outcome, st = step.outcome, step.st
      if not outcome then
        local file <close> = assert(next_file(), 'tp.results: file reader ended early')
        outcome, st = examine_doc(step.path, step.explicit, read_file_doc(file, SKIPPED_ON_LOAD))
        if step.dir then
          step.dir.changed = true
        end
      end
      if step.dir and st then
        step.dir.new[step.name] = { size = st.size, mtime = st.mtime, outcome = outcome }
      end
      apply(set, outcome, step.path, step.root, st)
    end
  end
  for _, index in ipairs(indexes) do
    for name in pairs(index.old) do
      if index.new[name] == nil then
        index.changed = true
      end
    end
    if index.changed then
      write_index(index.path, index.new)
    end
  end
end

-- Gives every run a unique id: its run_id, else the file stem; on a clash, the path relative to
-- the directory it was found under (without .json).
local function assign_ids(runs)
  local count = {}
  for _, r in ipairs(runs) do
    local base = r.run_id or stem(r.path)
    rawset(r, 'id', base)
    count[base] = (count[base] or 0) + 1
  end
  local used = {}
  for _, r in ipairs(runs) do
    if count[r.id] > 1 then
      local f = FILE[r]
      local rel = r.path
      if f.root and rel:sub(1, #f.root + 1) == f.root .. '/' then
        rel = rel:sub(#f.root + 2)
      end
      rel = rel:gsub('%.json$', '')
      local id, k = rel, 2
      while used[id] do
        id = rel .. '#' .. k
        k = k + 1
      end
      rawset(r, 'id', id)
    end
    used[r.id] = true
  end
end

---@class tp.results.LoadOpts
---@field recursive? boolean descend into subdirectories (default true)
---@field index? boolean keep a summary index (INDEX_NAME) in each directory and reuse the
---  summaries of files whose size and mtime have not changed (default false)

local ResultSet = {}

local SET_MT = {
  __name = 'tp.results.ResultSet',
  __complete = ResultSet,  -- for the prompt's completion (lua/tplua.c): __index is a function
  __index = function(set, k)
    if math.type(k) == 'integer' then
      return set.runs[k]
    end
    return ResultSet[k]
  end,
  __len = function(set)
    return #set.runs
  end,
  __tostring = function(set)
    return string.format('tp.results.ResultSet (%d runs, %d errors)', #set.runs, #set.errors)
  end,
}

local function new_set(runs, errors, skipped)
  return setmetatable({ runs = runs, errors = errors or {}, skipped = skipped or {} }, SET_MT)
end

--- Loads run records and tprimat-era result files into a result set. `sources` is a path or a
--- list of paths: files are read whatever their name; directories are searched for `*.json`
--- (recursively unless `opts.recursive` is false; hidden entries skipped). A file that cannot be
--- read, is not JSON or has fields of the wrong type is listed in `set.errors` ({path, message,
--- code}) and skipped; JSON files in a directory that are not results (another schema) are
--- listed in `set.skipped`. Fails only when `sources` names nothing that exists. With
--- `opts.index`, each directory keeps a summary index (a cache keyed by file size and mtime) so
--- that loading it again decodes only the files that changed.
---```lua
---local set = assert(tp.results.load({ 'output/amd', 'output/nvd' }))
---for _, e in ipairs(set.errors) do io.stderr:write(e.message, '\n') end
---print(set:where({ platform = 'amd' }):table({ 'id', 'tokens_per_s_per_gpu' }))
---```
---@param sources string|string[]
---@param opts? tp.results.LoadOpts
---@return table|nil set, string? err, string? code
function M.load(sources, opts)
  if type(sources) == 'string' then
    sources = { sources }
  end
  if type(sources) ~= 'table' then
    error('tp.results.load: path or list of paths expected, got ' .. type(sources), 2)
  end
  for i, s in ipairs(sources) do
    if type(s) ~= 'string' then
      error(string.format('tp.results.load: sources[%d] is %s, string expected', i, type(s)), 2)
    end
  end
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('tp.results.load: options must be a table, got ' .. type(opts), 2)
  end
  for k, v in pairs(opts) do
    if k ~= 'recursive' and k ~= 'index' then
      error(string.format("tp.results.load: unknown option '%s'", tostring(k)), 2)
    end
    if type(v) ~= 'boolean' then
      error(string.format('tp.results.load: option %s must be a boolean', k), 2)
    end
  end
  local wopts = { recursive = opts.recursive ~= false, index = opts.index == true }
  local set = new_set({}, {}, {})
  local plan, indexes, seen, dirs_seen, found = {}, {}, {}, {}, 0
  for _, src in ipairs(sources) do
    local st, err, code = fs.stat(src)
    if not st then
      plan[#plan + 1] = { error = { path = src, message = err, code = code } }
    else
      found = found + 1
      if st.type == 'directory' then
        plan_dir(plan, src, src:gsub('/+$', ''), wopts, seen, dirs_seen, indexes)
      else
        plan_file(plan, seen, src, nil, true)
      end
    end
  end
  run_plan(set, plan, indexes)
  if found == 0 and #sources > 0 then
    local msgs = {}
    for _, e in ipairs(set.errors) do
      msgs[#msgs + 1] = e.message
    end
    return nil, 'results: ' .. table.concat(msgs, '; '), 'ENOENT'
  end
  assign_ids(set.runs)
  return set
end

--- Makes a result set from runs already loaded (e.g. picked from several sets).
---@param runs table[]
---@return table set
function M.from_runs(runs)
  if type(runs) ~= 'table' then
    error('tp.results.from_runs: list of runs expected', 2)
  end
  local list = {}
  for i, r in ipairs(runs) do
    if not M.is_run(r) then
      error(string.format('tp.results.from_runs: runs[%d] is not a loaded run', i), 2)
    end
    list[i] = r
  end
  return new_set(list)
end

-- ---------------------------------------------------------------------------------------------
-- Queries.

--- Returns the value of `key` for `run`: a summary field ('platform'), a dotted path into the
--- kept tables ('training_config.seed', 'gpu_info.device_name') or a function of the run.
---@param run table
---@param key string|fun(run: table): any
---@return any
function M.get(run, key)
  if type(key) == 'function' then
    return key(run)
  end
  local v = run[key]
  if v ~= nil or not key:find('.', 1, true) then
    if is_null(v) then
      return nil
    end
    return v
  end
  local cur = run
  for part in key:gmatch('[^.]+') do
    if type(cur) ~= 'table' or is_null(cur) then
      return nil
    end
    cur = cur[part]
  end
  if is_null(cur) then
    return nil
  end
  return cur
end

local get = M.get

local function check_key(fname, key)
  if type(key) ~= 'string' and type(key) ~= 'function' then
    error(string.format('ResultSet:%s: key must be a string or a function, got %s', fname,
      type(key)), 3)
  end
end

--- Iterates over the runs: `for i, run in set:iter() do`.
function ResultSet:iter()
  return ipairs(self.runs)
end

--- Keeps the runs that match: `filter` maps keys (as in tp.results.get) to a value (equal), a
--- list of values (any of them) or a predicate function(value, run); or `filter` is itself a
--- predicate function(run).
---```lua
---set:where({ platform = 'amd', gbs = { 64, 128 }, tokens_per_s = function(v) return v > 1e5 end })
---```
---@param filter table|fun(run: table): boolean
---@return table set
function ResultSet:where(filter)
  local pred
  if type(filter) == 'function' then
    pred = filter
  elseif type(filter) == 'table' then
    local conds = {}
    for k, want in pairs(filter) do
      check_key('where', k)
      conds[#conds + 1] = { k, want }
    end
    pred = function(run)
      for _, c in ipairs(conds) do
        local v, want = get(run, c[1]), c[2]
        if type(want) == 'function' then
          if not want(v, run) then
            return false
          end
        elseif type(want) == 'table' then
          local any = false
          for _, w in ipairs(want) do
            if v == w then
              any = true
              break
            end
          end
          if not any then
            return false
          end
        elseif v ~= want then
          return false
        end
      end
      return true
    end
  else
    error('ResultSet:where: filter must be a table or a function, got ' .. type(filter), 2)
  end
  local out = {}
  for _, r in ipairs(self.runs) do
    if pred(r) then
      out[#out + 1] = r
    end
  end
  return new_set(out, self.errors, self.skipped)
end

--- Splits the set by the value of `key`: {value = ResultSet}. Runs without a value go under the
--- string '(none)'. `set:group_keys(key)` gives the values in sorted order.
---@param key string|fun(run: table): any
---@return table<any, table> groups
function ResultSet:group(key)
  check_key('group', key)
  local groups = {}
  for _, r in ipairs(self.runs) do
    local v = get(r, key)
    if v == nil then
      v = '(none)'
    end
    local g = groups[v]
    if not g then
      g = new_set({}, self.errors, self.skipped)
      groups[v] = g
    end
    g.runs[#g.runs + 1] = r
  end
  return groups
end

local function compare_values(a, b)
  local ta, tb = type(a), type(b)
  if ta == tb and (ta == 'number' or ta == 'string') then
    return a < b
  end
  return tostring(a) < tostring(b)
end

--- Returns the distinct values of `key` in the set, sorted.
---@param key string|fun(run: table): any
---@return any[]
function ResultSet:group_keys(key)
  check_key('group_keys', key)
  local seen, out = {}, {}
  for _, r in ipairs(self.runs) do
    local v = get(r, key)
    if v == nil then
      v = '(none)'
    end
    if not seen[v] then
      seen[v] = true
      out[#out + 1] = v
    end
  end
  table.sort(out, compare_values)
  return out
end

--- Returns a new set sorted by `key` (stable; runs without a value last).
---@param key string|fun(run: table): any
---@param opts? {desc?: boolean}
---@return table set
function ResultSet:sort(key, opts)
  check_key('sort', key)
  local desc = opts and opts.desc or false
  local items = {}
  for i, r in ipairs(self.runs) do
    items[i] = { r, get(r, key), i }
  end
  table.sort(items, function(a, b)
    local va, vb = a[2], b[2]
    if va == nil or vb == nil then
      if va == nil and vb == nil then
        return a[3] < b[3]
      end
      return vb == nil
    end
    if va == vb then
      return a[3] < b[3]
    end
    if desc then
      return compare_values(vb, va)
    end
    return compare_values(va, vb)
  end)
  local out = {}
  for i, it in ipairs(items) do
    out[i] = it[1]
  end
  return new_set(out, self.errors, self.skipped)
end

--- Applies `fn(run)` to every run; returns the list of results (nil results are kept out).
---@param fn fun(run: table): any
---@return any[]
function ResultSet:map(fn)
  if type(fn) ~= 'function' then
    error('ResultSet:map: function expected, got ' .. type(fn), 2)
  end
  local out = {}
  for _, r in ipairs(self.runs) do
    local v = fn(r)
    if v ~= nil then
      out[#out + 1] = v
    end
  end
  return out
end

--- Returns the values of `key` over the runs that have one (numbers only when `numeric`).
---@param key string|fun(run: table): any
---@param numeric? boolean
---@return any[]
function ResultSet:values(key, numeric)
  check_key('values', key)
  local out = {}
  for _, r in ipairs(self.runs) do
    local v = get(r, key)
    if v ~= nil and (not numeric or is_finite(v)) then
      out[#out + 1] = v
    end
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- Output.

local DEFAULT_COLUMNS = { 'id', 'platform', 'framework', 'model', 'gpus', 'gbs', 'seq_len',
  'precision', 'step_time', 'tokens_per_s_per_gpu', 'status' }

local function fmt_value(v, fmt)
  if v == nil or is_null(v) then
    return ''
  end
  if type(v) == 'number' then
    if fmt then
      return string.format(fmt, v)
    end
    if math.type(v) == 'integer' then
      return tostring(v)
    end
    if v ~= v or v == math.huge or v == -math.huge then
      return tostring(v)
    end
    return string.format('%.6g', v)
  end
  if type(v) == 'boolean' then
    return tostring(v)
  end
  if type(v) == 'table' then
    local t = json.encode(v, { allow_nan = true })
    return t or '<table>'
  end
  return tostring(v)
end

-- Field names a column may name whether or not any run has a value: the summary fields, the
-- per-iteration arrays, the kept tables and the summary's extras.
local KNOWN_FIELDS = {}
for _, list in ipairs({ M.SUMMARY_FIELDS, M.DETAIL_FIELDS, KEPT_TABLES, { 'run_id',
  'dataset_info', 'nonfinite_values', 'recorded_tokens_per_s_per_gpu', 'recorded_step_time' } }) do
  for _, k in ipairs(list) do
    KNOWN_FIELDS[k] = true
  end
end

-- A string column is known when it names a field, or when some run has a value for it (a
-- dotted path into a kept table: 'training_config.seed'); in an empty set, any dotted path into
-- a kept table. Misspelt columns would otherwise print as blanks.
local function check_column(fname, key, runs, level)
  if KNOWN_FIELDS[key] then
    return
  end
  local head = key:match('^([^.]+)%.')
  if head and KNOWN_FIELDS[head] and #runs == 0 then
    return
  end
  for _, r in ipairs(runs) do
    if get(r, key) ~= nil then
      return
    end
  end
  local near = {}
  for _, k in ipairs(M.SUMMARY_FIELDS) do
    if k:find(key, 1, true) or key:find(k, 1, true) then
      near[#near + 1] = k
    end
  end
  error(string.format("ResultSet:%s: unknown column '%s': no run has it%s (known: %s; or a "
    .. 'dotted path into %s, e.g. training_config.seed)', fname, key, #near > 0
    and ('; did you mean ' .. table.concat(near, ', ') .. '?') or '',
    table.concat(M.SUMMARY_FIELDS, ', '), table.concat(KEPT_TABLES, ', ')), level + 1)
end

local function columns_of(opts, fname, runs)
  local cols = opts and (opts.columns or (opts[1] and opts)) or DEFAULT_COLUMNS
  local out = {}
  for i, c in ipairs(cols) do
    if type(c) == 'string' then
      out[i] = { key = c, title = c }
    elseif type(c) == 'table' and (type(c.key) == 'string' or type(c.key) == 'function') then
      out[i] = { key = c.key, title = c.title or tostring(c.key), format = c.format }
    else
      error(string.format('ResultSet:%s: column %d must be a key or {key=, title=, format=}',
        fname, i), 3)
    end
    if type(out[i].key) == 'string' then
      check_column(fname, out[i].key, runs, 3)
    end
  end
  return out
end

--- Renders the set as an aligned text table. `opts` is a list of columns or {columns = ...};
--- a column is a key (as in tp.results.get) or {key=, title=, format = '%.1f'}.
---```lua
---print(set:sort('tokens_per_s_per_gpu', { desc = true }):table({ 'id', 'platform',
---  { key = 'tokens_per_s_per_gpu', title = 'tok/s/GPU', format = '%.0f' } }))
---```
---@param opts? table
---@return string
function ResultSet:table(opts)
  local cols = columns_of(opts, 'table', self.runs)
  local rows, widths, numeric = {}, {}, {}
  for j, c in ipairs(cols) do
    widths[j] = #c.title
    numeric[j] = true
  end
  for i, r in ipairs(self.runs) do
    local row = {}
    for j, c in ipairs(cols) do
      local v = get(r, c.key)
      row[j] = fmt_value(v, c.format)
      if v ~= nil and type(v) ~= 'number' then
        numeric[j] = false
      end
      widths[j] = math.max(widths[j], #row[j])
    end
    rows[i] = row
  end
  local function line(cells)
    local parts = {}
    for j, cell in ipairs(cells) do
      local pad = string.rep(' ', widths[j] - #cell)
      parts[j] = numeric[j] and (pad .. cell) or (cell .. pad)
    end
    return (table.concat(parts, '  '):gsub('%s+$', ''))
  end
  local titles, rules = {}, {}
  for j, c in ipairs(cols) do
    titles[j] = c.title
    rules[j] = string.rep('-', widths[j])
  end
  local out = { line(titles), line(rules) }
  for _, row in ipairs(rows) do
    out[#out + 1] = line(row)
  end
  return table.concat(out, '\n') .. '\n'
end

local function csv_cell(s)
  if s:find('[",\r\n]') then
    return '"' .. s:gsub('"', '""') .. '"'
  end
  return s
end

--- Renders the set as CSV (RFC 4180: comma separated, quoted when needed, CRLF line ends), one
--- row per run, a header row first. Columns as for `table` (default: every summary field).
---@param opts? table
---@return string
function ResultSet:to_csv(opts)
  local cols = columns_of(opts or { columns = M.SUMMARY_FIELDS }, 'to_csv', self.runs)
  local out = {}
  local head = {}
  for j, c in ipairs(cols) do
    head[j] = csv_cell(c.title)
  end
  out[1] = table.concat(head, ',')
  for _, r in ipairs(self.runs) do
    local row = {}
    for j, c in ipairs(cols) do
      local v = get(r, c.key)
      if type(v) == 'number' and c.format == nil then
        row[j] = math.type(v) == 'integer' and tostring(v) or string.format('%.17g', v)
      else
        row[j] = csv_cell(fmt_value(v, c.format))
      end
    end
    out[#out + 1] = table.concat(row, ',')
  end
  return table.concat(out, '\r\n') .. '\r\n'
end

--- Returns the summary of `run` as a plain table (summary fields only, no per-iteration data).
---@param run table
---@return table
function M.summary(run)
  local out = {}
  for _, k in ipairs(M.SUMMARY_FIELDS) do
    local v = rawget(run, k)
    if v ~= nil and not (type(v) == 'number' and not is_finite(v)) then
      out[k] = v
    end
  end
  return out
end

--- Renders the set as JSON: {runs = [summary...], errors = [...], skipped = [...]}.
---@param opts? {pretty?: boolean}
---@return string
function ResultSet:to_json(opts)
  local runs = json.array()
  for i, r in ipairs(self.runs) do
    runs[i] = M.summary(r)
  end
  local errors = json.array()
  for i, e in ipairs(self.errors) do
    errors[i] = { path = e.path, message = e.message, code = e.code }
  end
  local skipped = json.array()
  for i, e in ipairs(self.skipped) do
    skipped[i] = { path = e.path, reason = e.reason }
  end
  local text, err = json.encode({ runs = runs, errors = errors, skipped = skipped },
    { pretty = opts and opts.pretty or false })
  if not text then
    error('ResultSet:to_json: ' .. tostring(err), 2)
  end
  return text
end

return M
