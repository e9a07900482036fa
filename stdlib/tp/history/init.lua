-- tp.history: every run kept in a database (a SQLite file, or a PostgreSQL shared by a team):
-- runs added from their records, series of comparable runs, their points over time, notes,
-- change detection (tp.history._detect) and the dashboard (tp.history.dashboard). docs/history.md
-- walks through it; the private parts: _store (schema, SQL), _import (records to rows), _time,
-- _views (list and show as text), _set (the REPL's series sets).
local fs = require('tp.fs')
local json = require('tp.json')
local store = require('tp.history._store')
local import = require('tp.history._import')
local times = require('tp.parse.time')

local M = {}

M.METRICS = store.METRICS
M.SCHEMA_VERSION = store.SCHEMA_VERSION

--- The metric the commands follow unless told otherwise.
M.DEFAULT_METRIC = 'tokens_per_s_per_gpu'

local function is_url(target)
  return target:match('^postgres[a-z]*://') ~= nil
end

--- The target as it may be shown: a URL's password replaced by '***'.
---@param target string
---@return string
function M.display(target)
  if not is_url(target) then
    return target
  end
  local shown = target:gsub('^(postgres[a-z]*://[^:/@]*):[^@/]*@', '%1:***@')
  shown = shown:gsub('([?&]password=)[^&]*', '%1***')
  return shown
end

--- The history `open()` uses without a target: $TPLUA_HISTORY, else
--- $XDG_DATA_HOME/tplua/history.db, else ~/.local/share/tplua/history.db.
---@return string target, boolean is_default true when neither was given by TPLUA_HISTORY
function M.default_target()
  local env = os.getenv('TPLUA_HISTORY')
  if env and env ~= '' then
    return env, false
  end
  local data = os.getenv('XDG_DATA_HOME')
  if not data or data == '' then
    data = (os.getenv('HOME') or '.') .. '/.local/share'
  end
  return data .. '/tplua/history.db', true
end

---@class tp.history.History
---@field target string the file or URL it was opened on
---@field backend string 'sqlite' or 'postgresql'
local History = {}
History.__index = History
History.__name = 'tp.history.History'

function History.__tostring(h)
  if not h.conn then
    return 'tp.history.History (closed)'
  end
  local n = store.count_runs(h.conn)
  return string.format('tp.history.History %s (%s, %s runs); H:series() lists its series',
    M.display(h.target), h.backend, tostring(n or '?'))
end

local function check_open(h, name)
  if getmetatable(h) ~= History then
    error(string.format('History:%s: call it with a colon (H:%s(...))', name, name), 3)
  end
  if not h.conn then
    error(string.format('History:%s: the history is closed', name), 3)
  end
end

--- Opens the history at `target`: a file path (SQLite) or a `postgresql://` URL (the database
--- must exist). Without a target, `default_target()`. With `opts.create` (the default) a missing
--- history is made: the file (and the default file's directory) and the tables on first use.
--- With `create = false` (what the commands that only read use) a file that does not exist, an
--- empty one, or a database without the history's tables is an error naming it ('ENOHISTORY'),
--- and nothing is made. A database of a newer schema, one that is not a history, a damaged file,
--- a server that is down or refuses the password: nil and a message naming the database and the
--- cause, nothing written.
---```lua
---local H = assert(tp.history.open())               -- ~/.local/share/tplua/history.db
---H:add({ 'output/nightly' })
---print(H:series{ platform = 'amd' })
---```
---@param target? string
---@param opts? {timeout_ms?: integer, create?: boolean}
---@return tp.history.History|nil h, string? err, string? code
function M.open(target, opts)
  if target ~= nil and type(target) ~= 'string' then
    error('tp.history.open: a path or postgresql:// URL expected, got ' .. type(target), 2)
  end
  if opts ~= nil and type(opts) ~= 'table' then
    error('tp.history.open: options must be a table, got ' .. type(opts), 2)
  end
  for k, v in pairs(opts or {}) do
    if k ~= 'timeout_ms' and k ~= 'create' then
      error(string.format("tp.history.open: unknown option '%s'", tostring(k)), 2)
    end
    if k == 'create' and type(v) ~= 'boolean' then
      error('tp.history.open: option create must be a boolean, got ' .. type(v), 2)
    end
  end
  local create = not (opts and opts.create == false)
  local origin
  if target == nil or target == '' then
    local is_default
    target, is_default = M.default_target()
    origin = is_default and 'the default history' or 'TPLUA_HISTORY'
  end
  -- A libpq keyword string ('host=db password=...') is not a file name: refused before SQLite
  -- would create a file of that name, and never echoed (it may hold a password).
  if not is_url(target) and target:match('^%s*[%a_]+%s*=') then
    return nil, 'history: a PostgreSQL keyword string is not a history target: '
      .. 'give a postgresql:// URL (docs/history.md)', 'EINVAL'
  end
  local where = M.display(target)
  local function missing(why)
    return nil, string.format("no history at %s%s: %s; 'tplua history add' creates one, --db "
      .. 'or TPLUA_HISTORY names another', where, origin and (' (' .. origin .. ')') or '', why),
      'ENOHISTORY'
  end
  if not is_url(target) then
    if create and origin == 'the default history' then
      local ok, err, code = fs.mkdir_p(fs.dirname(target))
      if not ok then
        return nil, string.format('%s: cannot create its directory: %s', target, err), code
      end
    elseif not create then
      local st, _, scode = fs.stat(target)
      if not st and scode == 'ENOENT' then
        return missing('no such file')
      elseif st and st.type == 'file' and st.size == 0 then
        return missing('the file is empty')
      end
    end
  end
  local db = require('tp._db')
  local c, err, code = db.open(target, { timeout_ms = opts and opts.timeout_ms or 5000 })
  if not c then
    return nil, err, code
  end
  if not create then
    local v, verr, vcode = store.version(c, where)
    if v == 0 then
      local what = c:backend() == 'postgresql' and 'the database' or 'the file'
      c:close()
      return missing(what .. ' has no history tables')
    elseif not v then
      c:close()
      if not tostring(verr):find(where, 1, true) then
        verr = where .. ': ' .. tostring(verr)
      end
      return nil, verr, vcode
    end
  end
  local ok, merr, mcode = store.migrate(c, where)
  if not ok then
    c:close()
    if not tostring(merr):find(where, 1, true) then
      merr = where .. ': ' .. tostring(merr)
    end
    return nil, merr, mcode
  end
  return setmetatable({ target = target, shown = where, backend = c:backend(), conn = c,
    series_ids = {} }, History)
end

--- Adds run records: paths of record files, tprimat-era result files and results directories
--- (searched recursively for `*.json`), or records as tables. Files are read and normalised as
--- tp.analyse.results reads them; each is stored once (by the SHA-256 of its bytes: adding it
--- again adds nothing), in batches of one transaction each. A file that cannot be read or is
--- damaged, or that an item names and is not a run record, is listed in `failed` ({path,
--- error}) and skipped; other JSON files found in a directory and failed runs' records are
--- listed in `ignored` ({path, reason}). `opts.on_run(info)` is called for each run stored or
--- found stored:
--- {path, run_id, key, sha256, time, added}. Returns nil, err, code and the result so far when
--- the database fails (the batches before stay added).
---```lua
---local r = assert(H:add({ 'output/nightly' }))
---print(r.added, r.skipped, #r.failed)
---```
---@param items string|table|(string|table)[]
---@param opts? {on_run?: fun(info: table), batch?: integer}
---@return table|nil result {added, skipped (stored already), failed = {{path, error}},
---  ignored = {{path, reason}}, files (how many were read)}
---@return string? err, string? code
function History:add(items, opts)
  check_open(self, 'add')
  if type(items) == 'string' or (type(items) == 'table' and items[1] == nil and next(items)) then
    items = { items }
  end
  if type(items) ~= 'table' then
    error('History:add: paths or records expected, got ' .. type(items), 2)
  end
  opts = opts or {}
  for k, v in pairs(opts) do
    if k ~= 'on_run' and k ~= 'batch' then
      error(string.format("History:add: unknown option '%s'", tostring(k)), 2)
    end
    if k == 'on_run' and type(v) ~= 'function' or k == 'batch' and
      (math.type(v) ~= 'integer' or v < 1) then
      error(string.format('History:add: option %s has the wrong type', k), 2)
    end
  end
  for i, item in ipairs(items) do
    if type(item) ~= 'string' and type(item) ~= 'table' then
      error(string.format('History:add: items[%d] is %s, a path or a record expected', i,
        type(item)), 2)
    end
  end
  return import.add(self, items, opts)
end

--- Every series, by key: {key, id, platform, gpu, framework, framework_version, model,
--- config_hash, methodology, count, first_time, last_time}.
---@return table[]|nil rows, string? err, string? code
function History:series_list()
  check_open(self, 'series_list')
  return store.series_list(self.conn)
end

-- True when `row` matches a filter's fields.
local FILTER_FIELDS = { platform = true, gpu = true, framework = true, framework_version = true,
  model = true, methodology = true, config_hash = true, key = true, match = true }

local function matches(row, filter)
  for k, v in pairs(filter) do
    if k == 'match' then
      if not store.key_matches(row.key, v) then
        return false
      end
    elseif row[k] ~= v then
      return false
    end
  end
  return true
end

--- The series that match `filter`: {platform=, gpu=, framework=, model=, methodology=, key=
--- (exact), match= (a substring or a Lua pattern of the key)}; a string is `match`. The result
--- is a list of series_list's rows that prints as a table at the prompt, with methods
--- (`:points(i)`, `:table()`, `:keys()`).
---```lua
---H:series{ platform = 'amd', model = 'llama3.1-8b' }
---H:series('MI300X')[1]
---```
---@param filter? table|string
---@return table|nil set, string? err, string? code
function History:series(filter)
  check_open(self, 'series')
  if type(filter) == 'string' then
    filter = { match = filter }
  end
  filter = filter or {}
  if type(filter) ~= 'table' then
    error('History:series: a filter table or a key pattern expected, got ' .. type(filter), 2)
  end
  for k, v in pairs(filter) do
    if not FILTER_FIELDS[k] then
      error(string.format("History:series: unknown filter field '%s'", tostring(k)), 2)
    end
    if type(v) ~= 'string' then
      error(string.format('History:series: filter field %s must be a string', k), 2)
    end
  end
  local rows, err, code = store.series_list(self.conn)
  if not rows then
    return nil, err, code
  end
  local out = {}
  for _, r in ipairs(rows) do
    if matches(r, filter) then
      out[#out + 1] = r
    end
  end
  return require('tp.history._set').series_set(self, out)
end

--- The series that `spec` names: its exact key, its id, or a substring / Lua pattern that
--- only one key matches. Returns the series_list row, or nil and why (none, or which match).
---@param spec string|integer
---@return table|nil row, string? err
function History:resolve(spec)
  check_open(self, 'resolve')
  local rows, err = store.series_list(self.conn)
  if not rows then
    return nil, err
  end
  local id = math.tointeger(tonumber(spec))
  for _, r in ipairs(rows) do
    if r.key == spec or (id and r.id == id) then
      return r
    end
  end
  local found = {}
  for _, r in ipairs(rows) do
    if matches(r, { match = tostring(spec) }) then
      found[#found + 1] = r
    end
  end
  if #found == 1 then
    return found[1]
  end
  if #found == 0 then
    return nil, string.format("no series matches '%s' (tplua history list shows them)",
      tostring(spec))
  end
  local keys = {}
  for i = 1, math.min(#found, 5) do
    keys[i] = found[i].key
  end
  return nil, string.format("'%s' matches %d series: %s%s; give more of the key",
    tostring(spec), #found, table.concat(keys, ', '), #found > 5 and ', ...' or '')
end

-- The id of a series key (or nil, err).
local function series_id(h, key)
  if math.type(key) == 'integer' then
    return key
  end
  local id, err, code = store.find_series_id(h.conn, key)
  if err then
    return nil, err, code
  end
  if not id then
    return nil, string.format("no series '%s' in %s", key, M.display(h.target)), 'ENOENT'
  end
  return id
end

--- Reads a date or time given on the command line or to a method ('2026-11-01',
--- '2026-11-01T06:00:00Z'): epoch seconds, or nil and why.
---@param s string
---@return number|nil epoch, string? err
function M.parse_time(s)
  local t = times.parse(s)
  if not t then
    return nil, string.format("'%s' is not a date (YYYY-MM-DD, or YYYY-MM-DDTHH:MM[:SS][Z])",
      tostring(s))
  end
  return t
end

local function decode_env(text)
  if type(text) ~= 'string' then
    return nil
  end
  return json.decode(text)
end

--- The runs of series `key` that have `opts.metric` (default tokens_per_s_per_gpu), in time
--- order (from `opts.since`, a date, on; the last `opts.last` only): {time, time_epoch, run_id,
--- sha256, value, ci_lo, ci_hi, metrics = {every metric}, environment = the decoded stack,
--- time_basis, source}. ci_lo/ci_hi: the 95% CI of the value where the record gives one (step
--- time's, and tokens/s's derived from it).
---@param key string|integer the series key or id
---@param opts? {metric?: string, since?: string, last?: integer}
---@return table[]|nil points, string? err, string? code
function History:points(key, opts)
  check_open(self, 'points')
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= 'metric' and k ~= 'since' and k ~= 'last' then
      error(string.format("History:points: unknown option '%s'", tostring(k)), 2)
    end
  end
  local metric, merr = store.check_metric(opts.metric or M.DEFAULT_METRIC)
  if not metric then
    return nil, merr, 'EINVAL'
  end
  local since
  if opts.since then
    local serr
    since, serr = M.parse_time(opts.since)
    if not since then
      return nil, serr, 'EINVAL'
    end
  end
  local sid, err, code = series_id(self, key)
  if not sid then
    return nil, err, code
  end
  local rows
  rows, err, code = store.points(self.conn, sid, metric, since, opts.last)
  if not rows then
    return nil, err, code
  end
  local out = {}
  for i, r in ipairs(rows) do
    local m = {}
    for _, name in ipairs(store.METRICS) do
      m[name] = r[name]
    end
    local lo, hi
    if metric == 'step_time_s' then
      lo, hi = r.step_time_ci_lo, r.step_time_ci_hi
    elseif (metric == 'tokens_per_s' or metric == 'tokens_per_s_per_gpu')
      and r.step_time_ci_lo and r.step_time_ci_hi and r.step_time_s then
      -- tokens/s = tokens per step / step time: the interval of the one maps onto the other.
      lo = r[metric] * r.step_time_s / r.step_time_ci_hi
      hi = r[metric] * r.step_time_s / r.step_time_ci_lo
    end
    out[i] = { time = r.time, time_epoch = r.time_epoch, run_id = r.run_id, sha256 = r.sha256,
      value = r[metric], ci_lo = lo, ci_hi = hi, metrics = m,
      environment = decode_env(r.environment), time_basis = r.time_basis, source = r.source }
  end
  return out
end

--- Adds a note to a series (its key; '*' for every series) at a date or time: shown beside
--- the changes near it ('new cooling', 'driver rolled back').
---```lua
---H:note('*', '2026-11-20', 'cluster moved to the new cooling loop')
---```
---@param key string
---@param time string a date or ISO-8601 time
---@param text string
---@return true|nil ok, string? err, string? code
function History:note(key, time, text)
  check_open(self, 'note')
  if type(key) ~= 'string' or type(time) ~= 'string' or type(text) ~= 'string' then
    error('History:note: (series key, date, text) expected', 2)
  end
  if text:match('^%s*$') then
    return nil, 'the note is empty', 'EINVAL'
  end
  local epoch, terr = M.parse_time(time)
  if not epoch then
    return nil, terr, 'EINVAL'
  end
  if key ~= '*' then
    local sid, err, code = series_id(self, key)
    if not sid then
      return nil, err, code
    end
  end
  local n, err, code = store.add_note(self.conn, key, times.iso(epoch), epoch, text)
  if not n then
    return nil, err, code
  end
  return true
end

--- The notes of series `key`, with those for every series, in time order: {time, time_epoch,
--- text, series_key}.
---@param key string
---@return table[]|nil notes, string? err, string? code
function History:notes(key)
  check_open(self, 'notes')
  if type(key) ~= 'string' then
    error('History:notes: a series key expected, got ' .. type(key), 2)
  end
  return store.notes(self.conn, key)
end

-- Python's json module writes NaN and Infinity bare (tprimat's files): read as null.
local function decode_record(text)
  local doc, err = json.decode(text)
  if doc == nil then
    local fixed = text:gsub('([%[,:]%s*)%-?(%a+)', function(pre, word)
      if word == 'NaN' or word == 'Infinity' then
        return pre .. 'null'
      end
      return nil
    end)
    doc = json.decode(fixed)
  end
  if doc == nil then
    return nil, err
  end
  return doc
end

--- The whole record of a stored run, decoded: `x` is its sha256 (or 8 hex digits of it at
--- least) or its run id (the latest run of that id). Also returns {sha256, run_id, time, key}.
---@param x string
---@return table|nil record, table|string info_or_err, string? code
function History:record(x)
  check_open(self, 'record')
  if type(x) ~= 'string' then
    error('History:record: a sha256 or a run id expected, got ' .. type(x), 2)
  end
  local rows, err, code = store.find_runs(self.conn, x)
  if not rows then
    return nil, err, code
  end
  local r = rows[1]
  if not r then
    return nil, string.format("no run '%s' in %s", x, M.display(self.target)), 'ENOENT'
  end
  local doc, derr = decode_record(r.record)
  if doc == nil then
    return nil, string.format('run %s: its stored record cannot be read: %s', r.sha256,
      tostring(derr)), 'EPARSE'
  end
  return doc, { sha256 = r.sha256, run_id = r.run_id, time = r.time, key = r.key,
    matches = #rows }
end

--- Finds the changes of each series (tp.history._detect: E-divisive means with a significance
--- test, and the latest runs against the baseline window); see docs/history.md.
---@param opts? table {series, since, metric, fail_on, seed}
---@return table report
function History:check(opts)
  check_open(self, 'check')
  return require('tp.history._detect').check(self, opts or {})
end

--- Closes the database connection; further calls raise.
function History:close()
  if getmetatable(self) ~= History then
    error('History:close: call it with a colon (H:close())', 2)
  end
  if self.conn then
    local c = self.conn
    self.conn = nil
    c:close()
  end
end

History.__close = History.close
History.__gc = function(h)
  if h.conn then
    pcall(h.conn.close, h.conn)
    h.conn = nil
  end
end

--- Checks a metric name: returns it, or nil and a message naming the known ones.
---@param metric string
---@return string|nil metric, string? err
function M.check_metric(metric)
  return store.check_metric(metric)
end

--- The text of `tplua history list` (tp.history._views): every series with its runs, the last
--- value of `opts.metric` (default tokens_per_s_per_gpu), the trend over the last `opts.last`
--- runs (default 10), its first and last date.
---@param h tp.history.History
---@param opts? {metric?: string, last?: integer}
---@return string|nil text, string? err
function M.list_text(h, opts)
  opts = opts or {}
  return require('tp.history._views').list(h, { metric = opts.metric or M.DEFAULT_METRIC,
    last = opts.last })
end

--- The text of `tplua history show`: the runs of series `s` (a row of H:series_list or
--- H:resolve) with the metric, its CI, the software stack where it changes, a sparkline and
--- the notes.
---@param h tp.history.History
---@param s table
---@param opts? {metric?: string, since?: string, last?: integer}
---@return string|nil text, string? err
function M.show_text(h, s, opts)
  opts = opts or {}
  return require('tp.history._views').show(h, s, { metric = opts.metric or M.DEFAULT_METRIC,
    since = opts.since, last = opts.last })
end

--- A report of History:check as text (terminal) and as a plain table for JSON
--- (tp.history._detect's text and json).
---@param report table
---@return string
function M.check_text(report)
  return require('tp.history._detect').text(report)
end

---@param report table
---@return table
function M.check_json(report)
  return require('tp.history._detect').json(report)
end

M.History = History

return M
