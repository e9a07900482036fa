-- tp.log: training logs (Megatron-LM, Primus, NeMo, torchtitan, and formats registered from Lua)
-- turned into iteration records, argument dumps, parameter counts, memory reports, run facts
-- and failure diagnostics. The scanning is done by the C engine (tp._log); see docs/logs.md.
local C = require('tp._log')

local M = {}

local BUILTIN = { 'megatron', 'primus', 'nemo', 'torchtitan' }
local is_builtin = {}
for _, name in ipairs(BUILTIN) do
  is_builtin[name] = true
end

-- Registered parsers, in registration order: { {name=, detect=, line=, version=}, ... }.
local registry = {}

local function check(name, value, kind, optional, level)
  if value == nil and optional then
    return
  end
  if type(value) ~= kind then
    error(string.format('%s: %s expected, got %s', name, kind, type(value)), (level or 2) + 1)
  end
end

local PARSE_OPTS = {
  format = 'string',
  rank = 'number',
  gbs = 'number',
  seq_len = 'number',
  gpus = 'number',
  is_string = 'boolean',
  sha256 = 'boolean',
}

local function check_opts(opts, allowed, level)
  check('opts', opts, 'table', true, level + 1)
  for k, v in pairs(opts or {}) do
    local kind = allowed[k]
    if not kind then
      error(string.format("opts: unknown option '%s'", tostring(k)), level + 1)
    end
    if not (k == 'sha256' and v == 'later') then
      check('opts.' .. k, v, kind, false, level + 1)
    end
  end
  if opts and opts.rank ~= nil and (math.type(opts.rank) ~= 'integer' or opts.rank < 0) then
    error('opts.rank: non-negative integer expected', level + 1)
  end
  for _, k in ipairs({ 'gbs', 'seq_len', 'gpus' }) do
    local v = opts and opts[k]
    if v ~= nil and (v ~= v or v <= 0) then
      error('opts.' .. k .. ': positive number expected', level + 1)
    end
  end
end

-- Options for tp._log.new, with a snapshot of the registry (later registrations do not change
-- a scan in progress).
local function scanner_opts(opts, level)
  local parsers = {}
  for i, p in ipairs(registry) do
    parsers[i] = p
  end
  local o = { rank = opts.rank, gbs = opts.gbs, seq_len = opts.seq_len, gpus = opts.gpus,
              parsers = parsers }
  local fmt = opts.format
  if fmt ~= nil and fmt ~= 'auto' then
    if is_builtin[fmt] then
      o.format = fmt
    else
      for i, p in ipairs(parsers) do
        if p.name == fmt then
          o.custom_id = i
        end
      end
      if not o.custom_id then
        error(string.format("opts.format: unknown format '%s' (known: %s)", fmt,
                            table.concat(M.formats(), ', ')), level + 1)
      end
    end
  end
  return o, parsers
end

-- Records are materialised from the engine on access (a 1 GB log holds ~10^5 of them): the
-- table behaves as a read-only array (#, [i], ipairs, pairs); a record table stays the same
-- object while something holds it.
local function records_proxy(sc, n)
  local cache = setmetatable({}, { __mode = 'v' })
  local function get(_, i)
    if math.type(i) ~= 'integer' or i < 1 or i > n then
      return nil
    end
    local r = cache[i]
    if r == nil then
      r = sc:record(i)
      cache[i] = r
    end
    return r
  end
  return setmetatable({}, {
    __index = get,
    __len = function()
      return n
    end,
    __pairs = function(t)
      local i = 0
      return function()
        i = i + 1
        if i <= n then
          return i, get(t, i)
        end
      end, t, nil
    end,
    __newindex = function()
      error('log records are read-only', 2)
    end,
  })
end

---@class tp.log.Log
---@field format string|nil 'megatron', 'primus', 'nemo', 'torchtitan', a registered name, or nil
---@field parser_version string
---@field records table array of iteration records (read-only, materialised on access)
---@field args table<string,string> the framework's argument dump (empty when none): Megatron's
---`_print_args`, the NeMo driver's dotted dump, torchtitan's job config as `section.field`
---@field args_primus table<string,string> Primus' own argument dump (empty when none)
---@field params table|nil {total=, shards={{tp=, pp=, count=}...}, trainable=, ...}
---@field memory table[] memory reports {rank=, after_iterations=, allocated_gib=, ..., line=}
---@field theoretical_memory table|nil Megatron's theoretical memory footprints
---@field diagnostics table[] {kind=, severity=, message=, line=, first_line=, count=}
---@field meta table run facts the log states (global_batch_size, seq_len, world_size, ...)
---@field outcome string how the run ended (tp.log.outcome): 'completed', 'oom', 'timeout', ...
---@field lines integer lines read
---@field sha256 string|nil SHA-256 of the file (lowercase hex), with parse's `sha256 = true`
---  (with `sha256 = 'later'`, log:digest() gives it)
---@field size_bytes integer|nil bytes of the file, with parse's `sha256` option
---@field bytes integer bytes read
local Log = {}
Log.__index = Log

--- Returns two dense arrays: the values of `name` for the records that have it, and each such
--- record's iteration (its position in `records` when it has none). `name` is a record field,
--- 'timestamp', 'step_time_derived', a loss name or an `extra` label.
---```lua
---local times, iters = log:column('step_time_s')
---```
---@param name string
---@return table values, table iterations
function Log:column(name)
  check('name', name, 'string')
  return self._scanner:column(name)
end

--- Returns the finite values of numeric record field `name` in records first..last (default:
--- all), in record order and as the records hold them (integers for counts), and with
--- `positions` the position of each such record. Nothing is materialised but the arrays.
---@param name string a numeric record field ('step_time_s', 'global_batch_size', ...)
---@param first? integer
---@param last? integer
---@param positions? boolean
---@return number[] values, integer[]? positions
function Log:values(name, first, last, positions)
  check('name', name, 'string')
  return self._scanner:values(name, first, last, positions)
end

--- Returns the largest finite value of the numeric record fields `names` over all records (records
--- in order, each record's fields in list order; the first of equal values is kept), or nil.
---@param names string[]
---@return number|nil
function Log:peak(names)
  check('names', names, 'table')
  return self._scanner:peak(names)
end

--- Returns the positions of the records that hold a non-finite number (a field, or one of their
--- losses when they have several).
---@return integer[]
function Log:nonfinite()
  return self._scanner:nonfinite()
end

--- Returns true when a record with a finite step time has it derived (step_time_derived).
---@return boolean
function Log:derived_any()
  return self._scanner:derived_any()
end

--- Writes the records to `out` (an output file from tp.log.output) as the JSON array of a run
--- record's `records` member (tp.record: every contract field, null where absent or not finite),
--- indented for depth 1 of a pretty record, without building them as tables.
---@param out userdata
---@return true|nil ok, string? err, string? code
function Log:write_records(out)
  return out:records(self._scanner)
end

--- Returns the file's SHA-256 (lowercase hex) and its size in bytes. After parse with
--- `sha256 = 'later'` it waits for the digest the second thread is still computing (the same
--- answer on each call); after `sha256 = true` it returns `sha256` and `size_bytes`.
---@return string|nil hex, integer|string size_or_err, string? code
function Log:digest()
  if self.sha256 then
    return self.sha256, self.size_bytes
  end
  return self._scanner:digest()
end

--- Returns the records as a plain array of tables (all materialised at once).
---@return table[]
function Log:record_list()
  local out = {}
  for i = 1, #self.records do
    out[i] = self.records[i]
  end
  return out
end

--- Returns the diagnostics of severity 'error' (failure signatures).
---@return table[]
function Log:errors()
  local out = {}
  for _, d in ipairs(self.diagnostics) do
    if d.severity == 'error' then
      out[#out + 1] = d
    end
  end
  return out
end

--- Returns the first diagnostic of `kind` ('oom', 'nan_loss', 'truncated', ...), or nil.
---@param kind string
---@return table|nil
function Log:diagnostic(kind)
  check('kind', kind, 'string')
  for _, d in ipairs(self.diagnostics) do
    if d.kind == kind then
      return d
    end
  end
  return nil
end

-- How a run ended (docs/logs.md, "How the run ended"). Causes the run has no part in, or that
-- start a cascade: the first of them in the log wins. The names are tp.campaign's retry outcomes.
local ROOT_CAUSES = {
  oom = 'oom', nan_loss = 'nan_loss', gpu_fault = 'gpu_fault', preempted = 'preempted',
  timeout = 'timeout', cancelled = 'cancelled', node_failure = 'node_failure',
}
-- Explicit stop reasons (scheduler, handler): they explain a bare signal wherever they are.
local STOP_REASONS = { preempted = true, timeout = true, cancelled = true, node_failure = true }
-- What follows a root cause on the other ranks; a cause only when nothing above was seen.
local SECONDARY = { nccl_timeout = 'nccl_error', nccl_error = 'nccl_error', crash = 'crash' }

local function first_of(diagnostics, map)
  local best, line
  for _, d in ipairs(diagnostics) do
    local o = map[d.kind]
    local l = d.first_line or d.line or math.huge
    if o and (not line or l < line) then
      best, line = o, l
    end
  end
  return best
end

--- Returns how the run ended, from a log's diagnostics and meta: 'completed', 'oom',
--- 'nan_loss', 'gpu_fault', 'preempted', 'timeout', 'cancelled', 'node_failure', 'nccl_error',
--- 'crash', 'truncated' or 'unknown'. The first root cause wins over the errors that follow it
--- on other ranks (an OOM, then NCCL errors and SignalException: 'oom'); a bare signal (torchrun's
--- "Received 15 death signal") is 'preempted' (SIGTERM) or 'cancelled' (SIGINT, SIGHUP) unless
--- the scheduler says why (Slurm "CANCELLED AT ... DUE TO TIME LIMIT": 'timeout'), or a worker
--- failed before it (torchelastic stopping the others: 'crash').
---@param diagnostics table[] {kind=, line=, first_line=, message=}
---@param meta? table the log's meta (`completed`)
---@return string outcome
function M.outcome(diagnostics, meta)
  check('diagnostics', diagnostics, 'table')
  meta = meta or {}
  local seen, reason = {}, false
  for _, d in ipairs(diagnostics) do
    seen[d.kind] = d
    reason = reason or STOP_REASONS[d.kind] ~= nil
  end
  local roots = setmetatable({}, { __index = ROOT_CAUSES })
  local sig = seen.signal
  -- A worker that failed before the signals: the launcher (torchelastic) stopped the others
  -- with SIGTERM as it tore the job down, so the failure is the cause, not the signal.
  local crash = seen.crash
  local teardown = sig and crash and (crash.first_line or crash.line or math.huge)
    < (sig.first_line or sig.line or math.huge)
  if sig and not reason and not teardown then
    local m = tostring(sig.message)
    roots.signal = (m:find('SIGINT', 1, true) or m:find('SIGHUP', 1, true)) and 'cancelled'
      or 'preempted'
  end
  local cause = first_of(diagnostics, roots) or first_of(diagnostics, SECONDARY)
  if meta.completed and (not cause or seen.restart) then
    return 'completed'
  end
  return cause or (seen.truncated and 'truncated') or 'unknown'
end

local function build_log(sc, parsers, source)
  local res = sc:result()
  local log = setmetatable({
    _scanner = sc,
    format = res.format,
    parser_version = C.version,
    records = records_proxy(sc, res.records),
    args = res.args,
    args_primus = res.args_primus,
    params = res.params,
    memory = res.memory,
    theoretical_memory = res.theoretical_memory,
    diagnostics = res.diagnostics,
    meta = res.meta,
    lines = res.lines,
    bytes = res.bytes,
    source = source,
  }, Log)
  log.outcome = M.outcome(log.diagnostics, log.meta)
  if res.custom_id then
    local p = parsers[res.custom_id]
    log.format = p.name
    log.parser_version = p.version or C.version
  end
  return log
end

--- Parses a whole log: a file path (read in bounded chunks, never slurped) or, with
--- `opts.is_string` (or when the argument contains a newline), the log text itself.
---```lua
---local log = assert(tp.log.parse('run.log'))
---print(log.format, #log.records, log.records[#log.records].loss)
---```
---@class tp.log.ParseOpts
---@field format? string force a format (default: detected; built-ins before registered ones)
---@field rank? integer keep this rank's records (default: rank 0 if it prints, else lowest)
---@field gbs? number global batch size, to derive torchtitan step times without a batch line
---@field seq_len? number sequence length, idem
---@field gpus? number GPUs of the run, idem
---@field is_string? boolean the first argument is log text, not a path
---@field sha256? boolean|'later' also compute the file's SHA-256: true, in the same read (a
---  second thread hashes the chunks the scanner reads; the scan goes at the hash's pace): the
---  log's `sha256` (hex) and `size_bytes`; 'later', by a second thread that reads and hashes the
---  file behind the scanner: parse returns once the file is scanned, `size_bytes` set, and
---  log:digest() waits for the hex (meanwhile the caller builds and writes what does not need it)
---@param src string path or log text
---@param opts? tp.log.ParseOpts
---@return tp.log.Log|nil log, string? err, string? code
function M.parse(src, opts)
  check('src', src, 'string')
  check_opts(opts, PARSE_OPTS, 2)
  opts = opts or {}
  local so, parsers = scanner_opts(opts, 2)
  local sc = C.new(so)
  local is_string = opts.is_string
  if is_string == nil then
    is_string = src:find('\n', 1, true) ~= nil
  end
  local ok, err, code
  local sha, size
  if is_string then
    ok, err, code = sc:feed(src)
  elseif opts.sha256 then
    ok, err, code = sc:feed_file(src, opts.sha256)
    if ok and opts.sha256 == 'later' then
      size = err
    elseif ok then
      sha, size = err, code
    end
  else
    ok, err, code = sc:feed_file(src)
  end
  if ok then
    ok, err, code = sc:finish()
  end
  if not ok then
    sc:close()
    return nil, err, code
  end
  local log = build_log(sc, parsers, not is_string and src or nil)
  log.sha256, log.size_bytes = sha, size
  return log
end

---@class tp.log.Stream
local Stream = {}
Stream.__index = Stream

--- Feeds bytes (any chunking) and returns the records completed by them, as an array.
--- A lower rank starting to print later can drop records already returned (multi-rank rule);
--- the log object of finish() is authoritative.
---@param bytes string
---@return table[]|nil records, string? err, string? code
function Stream:feed(bytes)
  check('bytes', bytes, 'string')
  if self._log then
    error('attempt to feed a finished log stream', 2)
  end
  return self._scanner:feed(bytes)
end

--- Ends the stream (the last unterminated line counts, end-of-stream diagnostics such as
--- 'truncated' are added) and returns the log object. Idempotent.
---@return tp.log.Log|nil log, string? err, string? code
function Stream:finish()
  if self._log then
    return self._log
  end
  local ok, err, code = self._scanner:finish()
  if not ok then
    return nil, err, code
  end
  self._log = build_log(self._scanner, self._parsers, nil)
  return self._log
end

--- Returns the diagnostics found so far (same shape as a log's `diagnostics`); a kind seen for
--- the first time is appended, so callers can remember how many they have looked at.
---@return table[]
function Stream:diagnostics()
  return self._scanner:diagnostics()
end

--- Releases the scanner unless finish() handed it to a log object. Idempotent.
function Stream:close()
  if not self._log then
    self._scanner:close()
  end
end

Stream.__close = Stream.close

function Stream:__tostring()
  return 'tp.log.Stream (' .. tostring(self._scanner) .. ')'
end

--- Starts an incremental parse for a live run.
---```lua
---local s <close> = tp.log.stream()
---for chunk in pipe:lines('L') do for _, rec in ipairs(s:feed(chunk)) do print(rec.loss) end end
---local log = s:finish()
---```
---@param opts? tp.log.ParseOpts (is_string does not apply)
---@return tp.log.Stream
function M.stream(opts)
  local allowed = {}
  for k, v in pairs(PARSE_OPTS) do
    if k ~= 'is_string' then
      allowed[k] = v
    end
  end
  check_opts(opts, allowed, 2)
  local so, parsers = scanner_opts(opts or {}, 2)
  return setmetatable({ _scanner = C.new(so), _parsers = parsers }, Stream)
end

--- Registers a parser for a framework the engine does not know (DeepSpeed, HF Trainer, ...).
--- `detect(line)` returns true when a normalised line (escapes and launcher prefixes removed)
--- identifies the format; it is asked only while no built-in format matched. `line(line, rec)`
--- fills `rec` with record fields (iteration, loss, step_time_s, lr, ... as in the records of
--- the built-ins; `losses` and `extra` tables; other keys go to `extra`) and returns true when
--- the line was a record. Registering a name again replaces that parser.
---```lua
---tp.log.register{
---  name = 'deepspeed',
---  detect = function(line) return line:find('^%[Rank %d+%] step=') ~= nil end,
---  line = function(line, rec)
---    local step, loss = line:match('step=(%d+).- loss=([%d.eE+-]+)')
---    if not step then return false end
---    rec.iteration, rec.loss = tonumber(step), tonumber(loss)
---    return true
---  end,
---}
---```
---@class tp.log.ParserSpec
---@field name string format name (not a built-in one)
---@field detect fun(line: string): boolean
---@field line fun(line: string, rec: table): boolean
---@field version? string reported as the log's parser_version (default: the engine's)
---@param spec tp.log.ParserSpec
---@return true
function M.register(spec)
  check('spec', spec, 'table')
  for k in pairs(spec) do
    if k ~= 'name' and k ~= 'detect' and k ~= 'line' and k ~= 'version' then
      error(string.format("spec: unknown field '%s'", tostring(k)), 2)
    end
  end
  check('spec.name', spec.name, 'string')
  check('spec.detect', spec.detect, 'function')
  check('spec.line', spec.line, 'function')
  check('spec.version', spec.version, 'string', true)
  if spec.name == '' or spec.name == 'auto' or is_builtin[spec.name] then
    error(string.format("spec.name: '%s' is reserved", spec.name), 2)
  end
  local entry = { name = spec.name, detect = spec.detect, line = spec.line,
                  version = spec.version }
  for i, p in ipairs(registry) do
    if p.name == spec.name then
      registry[i] = entry
      return true
    end
  end
  registry[#registry + 1] = entry
  return true
end

--- Removes a registered parser; returns true when there was one.
---@param name string
---@return boolean
function M.unregister(name)
  check('name', name, 'string')
  for i, p in ipairs(registry) do
    if p.name == name then
      table.remove(registry, i)
      return true
    end
  end
  return false
end

--- Lists the known formats: the built-ins, then the registered ones in registration order.
---@return string[]
function M.formats()
  local out = {}
  for _, name in ipairs(BUILTIN) do
    out[#out + 1] = name
  end
  for _, p in ipairs(registry) do
    out[#out + 1] = p.name
  end
  return out
end

--- Starts a file written as a stream and put in place atomically: the bytes go to
--- "<path>.tmp.XXXXXX" in the same directory; `out:commit()` fsyncs it, renames it over `path`
--- and fsyncs the directory; `out:close()` (or a failed write, or the collector) removes it.
--- `out:write(text)` and `log:write_records(out)` return true or nil, err, code.
---```lua
---local out <close> = assert(tp.log.output('run.json'))
---assert(out:write('[]\n')); assert(out:commit())
---```
---@param path string
---@return userdata|nil out, string? err, string? code
function M.output(path)
  check('path', path, 'string')
  return C.output(path)
end

--- The largest line the scanner examines (longer ones are skipped with a 'long_line'
--- diagnostic), in bytes.
M.max_line = C.max_line

--- The engine's version (also each log's parser_version for the built-in formats).
M.version = C.version

return M
