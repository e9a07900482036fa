-- tp.analyse._results_decode: what one result file holds: the field lists, reading and decoding
-- its JSON (with Python's NaN and Infinity) and the validation of its members' types.
local json = require('tp.json')

local M = {}

local null = json.null

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
  'profile', 'memory' }

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

M.KEPT_TABLES = KEPT_TABLES
M.SKIPPED_ON_LOAD = SKIPPED_ON_LOAD
M.is_null, M.is_finite, M.num, M.str, M.tbl = is_null, is_finite, num, str, tbl
M.read_doc, M.read_file_doc = read_doc, read_file_doc
M.Bad, M.bad, M.validate = Bad, bad, validate

return M
