-- tp.record: the unified run record ("schema": "tplua.run/2") built from a parsed log (tp.log),
-- and its atomic save. A superset of the tprimat-era result files: the flat arrays and the
-- performance_metrics / training_config / memory_metrics key names are the ones tprimat wrote
-- (DmitriiNikolaevAtAmd/tprimat, evaluate/extract_prim_metrics.py, extract_metrics_from_log).
-- docs/record.md describes every field.
--
-- This module is the public face; tp.parse._record_base holds what the parts share and the
-- record conversion, tp.parse._record_build the metrics built from the records.
local base = require('tp.parse._record_base')
local build = require('tp.parse._record_build')

local json, null, array = base.json, base.null, base.array
local is_finite, diag, convert_record = base.is_finite, base.diag, base.convert_record
local table_access, log_access = build.table_access, build.log_access
local build_training_config, build_performance = build.build_training_config,
  build.build_performance
local add_mfu, gpu_info_of, build_memory = build.add_mfu, build.gpu_info_of, build.build_memory

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

--- The value that stands for JSON null in a record (tp.json.null).
M.null = null

--- The iteration-record fields of the parsed-log contract (tp.parse._record_base).
M.RECORD_FIELDS = base.RECORD_FIELDS

--- The platform names a record's `platform` takes: AMD/ROCm, NVIDIA/CUDA, and runs without a GPU
--- (tp.run writes 'cpu' when the probe finds no device).
M.PLATFORMS = { 'amd', 'nvd', 'cpu' }

--- The precisions a record's training_config.precision and MFU know (tp.parse._record_base).
M.PRECISIONS = base.PRECISIONS
local MFU_PRECISIONS, PRECISION_LIST = base.MFU_PRECISIONS, base.PRECISION_LIST

-- Options: the three overrides, what goes into `source`, what is copied to the top level, and
-- the catalog id of the GPU (tp.hardware) that gives gpu_info and MFU.
local OPT_TYPES = {
  gbs = 'number', seq_len = 'number', gpus = 'number',
  path = 'string', sha256 = 'string', size_bytes = 'number', command = 'string',
  exit_status = 'number', started_at = 'string', finished_at = 'string',
  platform = 'string', framework = 'string', model = 'string', dataset = 'string',
  methodology = 'string', ['repeat'] = 'number', gpu_info = 'table', run_id = 'string',
  experiment = 'string', hardware = 'string', lazy_records = 'boolean', precision = 'string',
  iterations = 'boolean',
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
    local row, err = require('tp.catalog.hardware').get(opts.hardware)
    if not row then
      error('tp.record.from_log: ' .. err, 3)
    end
  end
  return opts
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
    -- A command that prints no iteration is not expected to be recognised as a training log.
    if not (opts.iterations == false and d.kind == 'unrecognised') then
      diags[#diags + 1] = {
        kind = d.kind or 'unknown',
        severity = d.severity or 'info',
        message = d.message or '',
        line = d.line or null,
      }
    end
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
      local row = require('tp.catalog.hardware').match({ name = shown })
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

  if A.n == 0 and opts.iterations ~= false then
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
---@field iterations? boolean false for a command that prints no iteration record (a
---  microbenchmark such as tools/peaks): no `no_records` error when there is none, and no
---  `unrecognised` warning from the parser
---@field lazy_records? boolean leave the records in the log's scanner (`log` must come from
---  tp.log.parse and stay open): `records` is a read-only array that converts a record when it is
---  read, and tp.record.save writes them straight from the scanner (memory bounded by the flat
---  arrays, not by the records); tp.json.encode cannot encode such a record

local PRETTY = { pretty = true, sort_keys = true }

-- A top-level member's pretty text, or nil and the error named from the record's root, as
-- json.save_file names it.
local function encode_member(rec, k)
  local text, err, code = json.encode(rec[k], PRETTY)
  if text then
    return text
  end
  local ident = k:match('^[%a_][%w_]*$') and #k <= 40
  return nil, '$' .. (ident and ('.' .. k) or ('["' .. k .. '"]')) .. err:sub(2), code
end

-- Writes a record whose records stay in the log's scanner: the same text as
-- json.save_file(path, rec, PRETTY), produced member by member (each one's pretty text indented
-- one level: a JSON text has newlines only between tokens) with the records streamed from the
-- scanner, into a file put in place atomically. The members `pending` fills in are filled just
-- before they are written, the texts of the members after the first of them made before it.
local function save_streamed(rec, log, path, pending)
  -- A pending member the record lacks is filled in first (it may add the member), as save does
  -- for a record held in full: each function is called once, whatever the record holds.
  local early = {}
  for k in pairs(pending) do
    if rec[k] == nil then
      early[#early + 1] = k
    end
  end
  table.sort(early)
  for _, k in ipairs(early) do
    local ok, err, code = pending[k](rec)
    if not ok then
      return nil, err, code
    end
    early[k] = true
  end
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
  local ahead -- texts made ahead of a pending member: key -> { text } or { nil, err, code }
  local ok, err, code = out:write('{')
  for i, k in ipairs(keys) do
    if not ok then
      break
    end
    if pending[k] and not early[k] then
      if not ahead then
        out:writeback() -- the disk writes go on while the member is filled in
        ahead = {}
        for j = i + 1, #keys do
          local kj = keys[j]
          if kj ~= 'records' and not (pending[kj] and not early[kj]) then
            ahead[kj] = table.pack(encode_member(rec, kj))
          end
        end
      end
      ok, err, code = pending[k](rec)
      if not ok then
        return nil, err, code
      end
    end
    ok, err, code = out:write((i > 1 and ',\n  ' or '\n  ') .. json.encode(k) .. ': ')
    if ok and k == 'records' then
      ok, err, code = log:write_records(out)
      if not ok and code ~= 'EINVAL' and code ~= 'ENOMEM' then
        return nil, err, code
      end
    elseif ok then
      local text
      local made = ahead and ahead[k]
      if made then
        ahead[k] = nil
        text, err, code = made[1], made[2], made[3]
      else
        text, err, code = encode_member(rec, k)
      end
      if text then
        ok, err, code = out:write(text, 2)
      else
        ok = false
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
---@param opts? {pending?: table<string, fun(rec: table): (true|nil, string?, string?)>} pending:
---  functions that fill in top-level members late, each called just before its member is written
---  (after the members before it, with the texts of those after it already made), returning true
---  or nil, err, code (then nothing is written); a record whose records stay in the log's scanner
---  is written while a digest still being computed elsewhere is awaited only there
---@return true|nil ok, string? err, string? code
function M.save(rec, path, opts)
  if type(rec) ~= 'table' then
    error('tp.record.save: record must be a table, got ' .. type(rec), 2)
  end
  if type(path) ~= 'string' then
    error('tp.record.save: path must be a string, got ' .. type(path), 2)
  end
  if opts ~= nil and type(opts) ~= 'table' then
    error('tp.record.save: opts must be a table, got ' .. type(opts), 2)
  end
  local pending = opts and opts.pending or {}
  for k, f in pairs(pending) do
    if type(k) ~= 'string' or type(f) ~= 'function' then
      error('tp.record.save: opts.pending must map member names to functions', 2)
    end
  end
  if not json then
    return nil, 'record.save: tp.json is not available in this build', 'ENOSYS'
  end
  local log = type(rec.records) == 'table' and lazy_logs[rec.records]
  if log then
    return save_streamed(rec, log, path, pending)
  end
  local keys = {}
  for k in pairs(pending) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local ok, err, code = pending[k](rec)
    if not ok then
      return nil, err, code
    end
  end
  return json.save_file(path, rec, { pretty = true, sort_keys = true })
end

return M
