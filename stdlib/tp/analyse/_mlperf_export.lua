-- tp.analyse._mlperf_export: a tplua run record (docs/record.md) written as MLPerf-style
-- `:::MLLOG {json}` lines, with the keys, event types and metadata names of MLPerf's mllog
-- package (mlcommons/logging, mlperf_logging/mllog/constants.py and mllog.py: each line is
-- `:::MLLOG ` and a JSON object of namespace, time_ms, event_type, key, value, metadata, in that
-- order; metadata starts with the file and line the event comes from). Re-implemented, not
-- copied; docs/mlperf.md says what each event is made from.
local json = require('tp.json')
local fs = require('tp.fs')
local times = require('tp.parse.time')

local M = {}

local START, STOP, POINT = 'INTERVAL_START', 'INTERVAL_END', 'POINT_IN_TIME'

-- Times (seconds) beyond this are refused: their milliseconds would not be exact integers.
local MAX_SECONDS <const> = 2 ^ 53 / 1000

local function is_num(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function num(v)
  if is_num(v) then
    return v
  end
  if type(v) == 'string' then
    local n = tonumber(v)
    return is_num(n) and n or nil
  end
  return nil
end

-- "2026-03-03T09:00:55Z", "2026-03-03 09:00:55.4" (UTC unless an offset is given) -> seconds
-- since the epoch, or nil: a date alone is not a time here.
local function parse_utc(s)
  if type(s) ~= 'string' or not s:match('^%s*%d%d%d%d%-%d%d%-%d%d[T ]') then
    return nil
  end
  return times.parse(s)
end

local function ms(seconds)
  return math.floor(seconds * 1000 + 0.5)
end

local named = require('tp.analyse._mlperf_base').named

--- The run's status for run_stop: success when the record's outcome (else its status) is
--- completed, aborted otherwise.
---@param rec table
---@return string
function M.status(rec)
  local how = rec.outcome ~= nil and rec.outcome ~= json.null and rec.outcome or rec.status
  return how == 'completed' and 'success' or 'aborted'
end

-- The training records (with an iteration), each with its end time in seconds: the log's clock
-- (time_s) when every record has one, else the step times summed from the start.
local function timeline(rec)
  local list = {}
  for _, r in ipairs(type(rec.records) == 'table' and rec.records or {}) do
    if type(r) == 'table' and math.tointeger(r.iteration) then
      list[#list + 1] = r
    end
  end
  if #list == 0 then
    return nil, 'no iteration record'
  end
  local clock = true
  for _, r in ipairs(list) do
    clock = clock and is_num(r.time_s)
  end
  local out = {}
  if clock then
    for i, r in ipairs(list) do
      out[i] = { r = r, t = r.time_s }
    end
    local first = num(list[1].step_time_s) or 0
    return out, list[1].time_s - first, 'log'
  end
  local src = type(rec.source) == 'table' and rec.source or {}
  local t = parse_utc(src.started_at) or 0
  local start = t
  for i, r in ipairs(list) do
    local dt = num(r.step_time_s)
    if not dt then
      return nil, string.format('record %d (iteration %d) has neither time_s nor step_time_s', i,
        r.iteration)
    end
    t = t + dt
    out[i] = { r = r, t = t }
  end
  return out, start, 'steps'
end

local function encode_line(t, ev, key, value, meta)
  local parts = {}
  for _, kv in ipairs(meta) do
    parts[#parts + 1] = json.encode(kv[1]) .. ': ' .. json.encode(kv[2])
  end
  return string.format(':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "%s", "key": %s, '
    .. '"value": %s, "metadata": {%s}}', t, ev, json.encode(key),
    value == nil and 'null' or json.encode(value), table.concat(parts, ', '))
end

local OPTS = { benchmark = 'string', org = 'string', division = 'string', status = 'string',
  platform = 'string' }

--- The MLLOG lines of a run record. `opts` may set the submission_* values (`benchmark`,
--- `org`, `division`, `status`, `platform`); else the record's model (or 'tplua'), platform
--- (or 'tplua'), 'open', 'onprem', and `<GPUs>x<GPU name>` (or the platform). Returns the list
--- of lines (no newline) and a summary {iterations, samples, run_start_ms, run_stop_ms,
--- evals, status, clock}, or nil and a message naming what is missing.
---@param rec table a decoded run record
---@param file string the record's name, for the events' metadata
---@param opts? table
---@return string[]|nil lines
---@return table|string summary_or_err
function M.lines(rec, file, opts)
  opts = opts or {}
  for k, v in pairs(opts) do
    if not OPTS[k] or type(v) ~= 'string' or v == '' then
      error(string.format('tp.analyse.mlperf.export: bad option %s', tostring(k)), 3)
    end
  end
  if type(rec) ~= 'table' or type(rec.schema) ~= 'string' or not rec.schema:find('^tplua%.run/')
  then
    return nil, file .. ': not a tplua run record (no "schema": "tplua.run/N")'
  end
  local tl, start, clock = timeline(rec)
  if not tl then
    return nil, file .. ': ' .. start .. ': nothing to export'
  end
  -- time_ms is written as an integer: times must stay within what one holds exactly.
  if math.abs(start) >= MAX_SECONDS then
    return nil, string.format('%s: the start time %s s is out of range', file, tostring(start))
  end
  for i, e in ipairs(tl) do
    if math.abs(e.t) >= MAX_SECONDS then
      return nil, string.format('%s: record %d (iteration %d): time %s s is out of range', file,
        i, e.r.iteration, tostring(e.t))
    end
  end
  local cfg = type(rec.training_config) == 'table' and rec.training_config or {}
  local gbs = math.tointeger(num(cfg.global_batch_size))
  local function samples_of(r)
    local s = math.tointeger(num(r.consumed_samples))
    if s then
      return s
    end
    local g = math.tointeger(num(r.global_batch_size)) or gbs
    return g and (r.iteration + (tl[1].r.iteration == 0 and 1 or 0)) * g or nil
  end
  for i, e in ipairs(tl) do
    e.samples = samples_of(e.r)
    if not e.samples then
      return nil, string.format('%s: record %d (iteration %d): no consumed_samples and no '
        .. 'global batch size (training_config.global_batch_size): samples_count unknown', file,
        i, e.r.iteration)
    end
  end
  local gi = type(rec.gpu_info) == 'table' and rec.gpu_info or {}
  local gpus = math.tointeger(num(cfg.num_gpus)) or math.tointeger(num(gi.device_count))
  local platform = opts.platform
  if not platform and type(gi.device_name) == 'string' and gi.device_name ~= '' then
    platform = (gpus and (gpus .. 'x') or '') .. gi.device_name
  end
  local src = type(rec.source) == 'table' and rec.source or {}
  local where = type(src.path) == 'string' and src.path or file
  local lines = {}
  local t_start = ms(start)
  local t_init = t_start
  local began = parse_utc(src.started_at)
  if began and ms(began) < t_init then
    t_init = ms(began)
  end
  local function add(t, ev, key, value, meta, line)
    local m = { { 'file', where }, { 'lineno', line or 0 } }
    for _, kv in ipairs(meta or {}) do
      if kv[2] ~= nil then
        m[#m + 1] = kv
      end
    end
    lines[#lines + 1] = encode_line(t, ev, key, value, m)
  end
  local function str(v, fallback)
    return type(v) == 'string' and v ~= '' and v or fallback
  end
  add(t_init, START, 'init_start', nil)
  add(t_init, POINT, 'submission_benchmark', opts.benchmark or str(rec.model, 'tplua'))
  add(t_init, POINT, 'submission_org', opts.org or str(rec.platform, 'tplua'))
  add(t_init, POINT, 'submission_division', opts.division or 'open')
  add(t_init, POINT, 'submission_status', opts.status or 'onprem')
  add(t_init, POINT, 'submission_platform', platform or str(rec.platform, 'tplua'))
  local function cfg_point(key, v)
    if v ~= nil and v ~= json.null and is_num(v) then
      add(t_init, POINT, key, v)
    end
  end
  cfg_point('seed', cfg.seed)
  cfg_point('global_batch_size', gbs)
  cfg_point('micro_batch_size', cfg.micro_batch_size)
  cfg_point('gradient_accumulation_steps', cfg.gradient_accumulation_steps)
  cfg_point('max_sequence_length', cfg.sequence_length)
  cfg_point('max_steps', cfg.max_steps)
  cfg_point('opt_base_learning_rate', num(cfg.learning_rate))
  cfg_point('tensor_parallelism', cfg.tensor_parallel_size)
  cfg_point('pipeline_parallelism', cfg.pipeline_parallel_size)
  cfg_point('context_parallelism', cfg.context_parallel_size)
  cfg_point('expert_parallelism', cfg.expert_parallel_size)
  add(t_start, STOP, 'init_stop', nil)
  add(t_start, START, 'run_start', nil)
  local first_epoch = math.tointeger(num(tl[1].r.epoch))
  local block_from = 0
  add(t_start, START, 'block_start', nil, { { 'samples_count', 0 } }, tl[1].r.line)
  if first_epoch then
    add(t_start, START, 'epoch_start', nil, { { 'epoch_num', first_epoch },
      { 'samples_count', 0 } }, tl[1].r.line)
  end
  local evals, last_val = 0, nil
  for i, e in ipairs(tl) do
    local r, t = e.r, ms(e.t)
    local epoch = math.tointeger(num(r.epoch))
    local prev = tl[i - 1] and math.tointeger(num(tl[i - 1].r.epoch))
    if epoch and prev and epoch ~= prev then
      local t0 = ms(tl[i - 1].t)
      add(t0, STOP, 'epoch_stop', nil, { { 'epoch_num', prev },
        { 'samples_count', tl[i - 1].samples } }, tl[i - 1].r.line)
      add(t0, START, 'epoch_start', nil, { { 'epoch_num', epoch },
        { 'samples_count', tl[i - 1].samples } }, r.line)
    end
    local loss = num(r.loss)
    if loss then
      add(t, POINT, 'train_loss', loss, { { 'samples_count', e.samples },
        { 'step_num', r.iteration } }, r.line)
    end
    local val = type(r.extra) == 'table' and num(r.extra.val_loss) or nil
    if val and val ~= last_val then
      evals = evals + 1
      local meta = { { 'samples_count', e.samples }, { 'epoch_num', epoch } }
      add(t, STOP, 'block_stop', nil, { { 'samples_count', e.samples } }, r.line)
      add(t, START, 'eval_start', nil, meta, r.line)
      add(t, POINT, 'eval_accuracy', val, meta, r.line)
      add(t, STOP, 'eval_stop', nil, meta, r.line)
      block_from = e.samples
      if i < #tl then
        add(t, START, 'block_start', nil, { { 'samples_count', e.samples } }, r.line)
      end
    end
    if val then
      last_val = val
    end
  end
  local last = tl[#tl]
  local t_stop = ms(last.t)
  if block_from ~= last.samples or evals == 0 then
    add(t_stop, STOP, 'block_stop', nil, { { 'samples_count', last.samples } }, last.r.line)
  end
  local last_epoch = math.tointeger(num(last.r.epoch))
  if last_epoch then
    add(t_stop, STOP, 'epoch_stop', nil, { { 'epoch_num', last_epoch },
      { 'samples_count', last.samples } }, last.r.line)
  end
  local status = M.status(rec)
  add(t_stop, POINT, 'trained_samples', last.samples, nil, last.r.line)
  add(t_stop, STOP, 'run_stop', nil, { { 'samples_count', last.samples }, { 'status', status } },
    last.r.line)
  return lines, { iterations = #tl, last_iteration = last.r.iteration, samples = last.samples,
    run_start_ms = t_start, run_stop_ms = t_stop, evals = evals, status = status, clock = clock }
end

--- Writes the MLLOG lines of the record file `path` to `out` atomically (temporary file, fsync,
--- rename). Returns the summary of `lines`, or nil and a message.
---@param path string a run record (JSON)
---@param out string
---@param opts? table as for lines
---@return table|nil summary
---@return string? err
function M.write(path, out, opts)
  local rec, err = json.load_file(path)
  if rec == nil then
    return nil, tostring(err)
  end
  local lines, sum = M.lines(rec, path, opts)
  if not lines then
    return nil, sum
  end
  local ok, werr = fs.write_atomic(out, table.concat(lines, '\n') .. '\n')
  if not ok then
    return nil, named(out, werr)
  end
  return sum
end

return M
