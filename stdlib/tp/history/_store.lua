-- tp.history._store: the history's tables on a database (tp._db: SQLite file or PostgreSQL
-- URL): the schema, its version and migrations, adding runs and reading series, points, notes
-- and records back. Every statement takes its values as `?` parameters; the only names put
-- into SQL text are the metric columns, checked against M.METRICS first.
local M = {}

--- The schema version this module writes and reads (table meta, key 'schema_version').
M.SCHEMA_VERSION = 1

--- The metric columns of a run, the names `--metric` accepts.
M.METRICS = { 'tokens_per_s', 'tokens_per_s_per_gpu', 'step_time_s', 'mfu', 'joules_per_token',
  'final_loss', 'peak_memory_gb' }

local IS_METRIC = {}
for _, m in ipairs(M.METRICS) do
  IS_METRIC[m] = true
end

-- The column types that differ between the backends.
local TYPES = {
  sqlite = { id = 'INTEGER PRIMARY KEY', real = 'REAL' },
  postgresql = { id = 'BIGSERIAL PRIMARY KEY', real = 'DOUBLE PRECISION' },
}

--- Migrations: MIGRATIONS[v](types) brings a database of version v - 1 to version v: a list of
--- statements, run in one transaction with the version update (`types`: the column types of the
--- backend, {id, real}). A new schema version adds MIGRATIONS[v] and raises SCHEMA_VERSION.
M.MIGRATIONS = {
  [1] = function(t)
    local real = t.real
    return {
      'CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)',
      'CREATE TABLE series (id ' .. t.id .. ', key TEXT NOT NULL UNIQUE, platform TEXT, '
        .. 'gpu TEXT, framework TEXT, framework_version TEXT, model TEXT, config_hash TEXT, '
        .. 'methodology TEXT)',
      'CREATE TABLE runs (id ' .. t.id .. ', sha256 TEXT NOT NULL UNIQUE, '
        .. 'series_id BIGINT NOT NULL REFERENCES series (id), run_id TEXT, time TEXT NOT NULL, '
        .. 'time_epoch ' .. real .. ' NOT NULL, time_basis TEXT, '
        .. 'tokens_per_s ' .. real .. ', tokens_per_s_per_gpu ' .. real .. ', '
        .. 'step_time_s ' .. real .. ', step_time_ci_lo ' .. real .. ', '
        .. 'step_time_ci_hi ' .. real .. ', mfu ' .. real .. ', joules_per_token ' .. real
        .. ', final_loss ' .. real .. ', peak_memory_gb ' .. real .. ', '
        .. 'environment TEXT, record TEXT NOT NULL, source TEXT, added_at TEXT NOT NULL)',
      'CREATE INDEX runs_series_time ON runs (series_id, time_epoch)',
      'CREATE INDEX runs_run_id ON runs (run_id)',
      'CREATE TABLE notes (id ' .. t.id .. ', series_key TEXT NOT NULL, time TEXT NOT NULL, '
        .. 'time_epoch ' .. real .. ' NOT NULL, text TEXT NOT NULL)',
      'CREATE INDEX notes_series ON notes (series_key, time_epoch)',
    }
  end,
}

-- A fixed number that PostgreSQL's advisory lock takes: one migration at a time per database.
local PG_MIGRATION_LOCK = 7261696

-- The names of the tables of the database (nil, err, code when it cannot be read).
local function tables(c)
  local sql = c:backend() == 'postgresql'
    and 'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = '
      .. 'current_schema()'
    or "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
  local rows, err, code = c:query(sql)
  if not rows then
    return nil, err, code
  end
  local out = {}
  for _, r in ipairs(rows) do
    out[r.name] = true
  end
  return out
end

-- The schema version of the database: 0 when it is empty; nil, err, code when it cannot be read
-- or is not a history (tables, but no meta).
local function version_of(c, where)
  local names, err, code = tables(c)
  if not names then
    return nil, err, code
  end
  if not names.meta then
    if next(names) then
      local list = {}
      for n in pairs(names) do
        list[#list + 1] = n
      end
      table.sort(list)
      return nil, string.format('%s: not a tplua history (it has the tables %s and no table '
        .. 'meta): choose another database', where, table.concat(list, ', ')), 'ENOTHISTORY'
    end
    return 0
  end
  local rows, qerr, qcode = c:query("SELECT value FROM meta WHERE key = 'schema_version'")
  if not rows then
    return nil, qerr, qcode
  end
  local v = rows[1] and math.tointeger(tonumber(rows[1].value))
  if not v then
    return nil, string.format('%s: table meta has no schema_version: not a tplua history',
      where), 'ENOTHISTORY'
  end
  return v
end

-- The schema version of the database when this tplua can read it (M.SCHEMA_VERSION or older);
-- nil, err, code for a newer one and as version_of.
local function readable_version(c, where)
  local v, err, code = version_of(c, where)
  if not v then
    return nil, err, code
  end
  if v > M.SCHEMA_VERSION then
    return nil, string.format('%s: the history has schema version %d, newer than this tplua '
      .. 'reads (%d): use a newer tplua; nothing was changed', where, v, M.SCHEMA_VERSION),
      'ENEWER'
  end
  return v
end

--- Runs `fn()` in one transaction of connection `c`: committed when it returns a true value
--- (returned), rolled back when it returns nil, err, code (returned) or raises (raised again).
---@param c userdata a tp._db connection
---@param fn fun(): any, string?, string?
---@return any|nil result, string? err, string? code
function M.transaction(c, fn)
  local ok, err, code = c:begin()
  if not ok then
    return nil, err, code
  end
  local pok, r, ferr, fcode = pcall(fn)
  if not pok then
    c:rollback()
    error(r, 0)
  end
  if not r then
    c:rollback()
    return nil, ferr, fcode
  end
  local cok, cerr, ccode = c:commit()
  if not cok then
    c:rollback()
    return nil, cerr, ccode
  end
  return r
end

--- Brings the database of connection `c` to M.SCHEMA_VERSION (creating the tables of an empty
--- one), in one transaction. A database of a newer version, or one that is not a history, is
--- refused before anything is written. `where` names the database in messages.
---@param c userdata a tp._db connection
---@param where string
---@return true|nil ok, string? err, string? code
function M.migrate(c, where)
  local v, err, code = readable_version(c, where)
  if not v then
    return nil, err, code
  end
  if v == M.SCHEMA_VERSION then
    return true
  end
  return M.transaction(c, function()
    if c:backend() == 'postgresql' then
      local r, lerr, lcode = c:query('SELECT pg_advisory_xact_lock(?) AS locked',
        PG_MIGRATION_LOCK)
      if not r then
        return nil, lerr, lcode
      end
    end
    -- Another process may have migrated it since the first look: read it again, inside.
    v, err, code = readable_version(c, where)
    if not v then
      return nil, err, code
    end
    local t = TYPES[c:backend()]
    for target = v + 1, M.SCHEMA_VERSION do
      for _, sql in ipairs(M.MIGRATIONS[target](t)) do
        local n, serr, scode = c:exec(sql)
        if not n then
          return nil, serr, scode
        end
      end
    end
    if v == 0 then
      return c:exec("INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
        tostring(M.SCHEMA_VERSION))
    end
    return c:exec("UPDATE meta SET value = ? WHERE key = 'schema_version'",
      tostring(M.SCHEMA_VERSION))
  end)
end

--- The schema version recorded in the database (0 when empty).
---@return integer|nil version, string? err, string? code
function M.version(c, where)
  return version_of(c, where)
end

-- ---------------------------------------------------------------------------------------------
-- Adding runs.

local NULL

local function null()
  NULL = NULL or require('tp._db').NULL
  return NULL
end

local function opt(v)
  if v == nil then
    return null()
  end
  return v
end

local INSERT_SERIES = 'INSERT INTO series (key, platform, gpu, framework, framework_version, '
  .. 'model, config_hash, methodology) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO '
  .. 'NOTHING'

local INSERT_RUN = 'INSERT INTO runs (sha256, series_id, run_id, time, time_epoch, time_basis, '
  .. 'tokens_per_s, tokens_per_s_per_gpu, step_time_s, step_time_ci_lo, step_time_ci_hi, mfu, '
  .. 'joules_per_token, final_loss, peak_memory_gb, environment, record, source, added_at) '
  .. 'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO '
  .. 'NOTHING'

--- The id of the series with `row.key`, created from `row` when it is new. `cache` maps keys
--- to ids already known (series are never removed).
---@return integer|nil id, string? err, string? code
function M.series_id(c, row, cache)
  local id = cache and cache[row.key]
  if id then
    return id
  end
  local n, err, code = c:exec(INSERT_SERIES, row.key, opt(row.platform), opt(row.gpu),
    opt(row.framework), opt(row.framework_version), opt(row.model), opt(row.config_hash),
    opt(row.methodology))
  if not n then
    return nil, err, code
  end
  local qerr, qcode
  id, qerr, qcode = M.find_series_id(c, row.key)
  if qerr then
    return nil, qerr, qcode
  end
  if not id then
    return nil, 'series ' .. row.key .. ': not found after it was added', 'EDB'
  end
  if cache then
    cache[row.key] = id
  end
  return id
end

--- The id of the series with `key`: nil (no error) when there is none; nil, err, code when the
--- database fails.
---@return integer|nil id, string? err, string? code
function M.find_series_id(c, key)
  local rows, err, code = c:query('SELECT id FROM series WHERE key = ?', key)
  if not rows then
    return nil, err, code
  end
  return rows[1] and rows[1].id
end

--- Adds one run (the row _import makes) to series `series_id`: true when it is new, false when
--- a run with the same sha256 is stored already.
---@return boolean|nil added, string? err, string? code
function M.add_run(c, series_id, r)
  local m = r.metrics
  local n, err, code = c:exec(INSERT_RUN, r.sha256, series_id, opt(r.run_id), r.time,
    r.time_epoch, opt(r.time_basis), opt(m.tokens_per_s), opt(m.tokens_per_s_per_gpu),
    opt(m.step_time_s), opt(r.step_time_ci_lo), opt(r.step_time_ci_hi), opt(m.mfu),
    opt(m.joules_per_token), opt(m.final_loss), opt(m.peak_memory_gb), opt(r.environment),
    r.record, opt(r.source), r.added_at)
  if not n then
    return nil, err, code
  end
  return n > 0
end

-- ---------------------------------------------------------------------------------------------
-- Reading.

--- Every series with its count of runs and the times of its first and last run, by key.
---@return table[]|nil rows, string? err, string? code
function M.series_list(c)
  -- One look into the (series_id, time_epoch) index per series and figure, not a scan of runs.
  local rows, err, code = c:query('SELECT s.id, s.key, s.platform, s.gpu, s.framework, '
    .. 's.framework_version, s.model, s.config_hash, s.methodology, '
    .. '(SELECT COUNT(*) FROM runs r WHERE r.series_id = s.id) AS count, '
    .. '(SELECT r.time FROM runs r WHERE r.series_id = s.id ORDER BY r.time_epoch, r.id '
    .. 'LIMIT 1) AS first_time, '
    .. '(SELECT r.time FROM runs r WHERE r.series_id = s.id ORDER BY r.time_epoch DESC, '
    .. 'r.id DESC LIMIT 1) AS last_time FROM series s ORDER BY s.key')
  if not rows then
    return nil, err, code
  end
  for _, r in ipairs(rows) do
    r.count = math.tointeger(r.count) or 0
  end
  return rows
end

--- Whether series key `key` matches `spec`: the key itself, a part of it, or a Lua pattern that
--- finds something in it (a pattern that is not valid is only a part).
---@param key string
---@param spec string
---@return boolean
function M.key_matches(key, spec)
  if key == spec or key:find(spec, 1, true) then
    return true
  end
  local ok, found = pcall(string.find, key, spec)
  return ok and found ~= nil
end

--- Checks a metric name; returns it, or nil and a message listing the known ones.
---@param metric string
---@return string|nil metric, string? err
function M.check_metric(metric)
  if IS_METRIC[metric] then
    return metric
  end
  return nil, string.format("unknown metric '%s' (%s)", tostring(metric),
    table.concat(M.METRICS, ', '))
end

local POINT_COLUMNS = 'r.id, r.time, r.time_epoch, r.time_basis, r.run_id, r.sha256, r.source, '
  .. 'r.tokens_per_s, r.tokens_per_s_per_gpu, r.step_time_s, r.step_time_ci_lo, '
  .. 'r.step_time_ci_hi, r.mfu, r.joules_per_token, r.final_loss, r.peak_memory_gb, '
  .. 'r.environment'

--- The runs of the series `series_id` that have `metric`, in time order (runs of the same time,
--- such as files dated by their modification time, by run id, then in the order they were
--- added), from `since_epoch` on when given; the last `last` of them when given.
---@return table[]|nil rows, string? err, string? code
function M.points(c, series_id, metric, since_epoch, last)
  assert(IS_METRIC[metric], 'metric checked by the caller')
  local sql = 'SELECT ' .. POINT_COLUMNS .. ' FROM runs r WHERE r.series_id = ? AND r.'
    .. metric .. ' IS NOT NULL'
  local params = { series_id }
  if since_epoch then
    sql = sql .. ' AND r.time_epoch >= ?'
    params[#params + 1] = since_epoch
  end
  if last then
    sql = 'SELECT * FROM (' .. sql .. ' ORDER BY r.time_epoch DESC, r.run_id DESC, r.id DESC '
      .. 'LIMIT ?) p ORDER BY p.time_epoch, p.run_id, p.id'
    params[#params + 1] = last
  else
    sql = sql .. ' ORDER BY r.time_epoch, r.run_id, r.id'
  end
  return c:query(sql, table.unpack(params))
end

--- Adds a note.
function M.add_note(c, series_key, time, time_epoch, text)
  return c:exec('INSERT INTO notes (series_key, time, time_epoch, text) VALUES (?, ?, ?, ?)',
    series_key, time, time_epoch, text)
end

--- The notes of a series and those for every series ('*'), in time order.
function M.notes(c, series_key)
  return c:query('SELECT time, time_epoch, text, series_key FROM notes WHERE series_key = ? OR '
    .. "series_key = '*' ORDER BY time_epoch, id", series_key)
end

--- The stored runs whose sha256 is `x` or starts with it (8 hex digits at least), or whose
--- run_id is `x`: {sha256, run_id, time, record, key}, latest first.
function M.find_runs(c, x)
  local cols = 'SELECT r.sha256, r.run_id, r.time, r.time_epoch, r.record, s.key FROM runs r '
    .. 'JOIN series s ON s.id = r.series_id WHERE '
  local rows, err, code
  if x:match('^%x+$') and #x >= 8 then
    rows, err, code = c:query(cols .. 'r.sha256 >= ? AND r.sha256 <= ? ORDER BY r.time_epoch '
      .. 'DESC', x:lower(), x:lower() .. string.rep('f', 64 - #x))
    if not rows then
      return nil, err, code
    end
    if #rows > 0 then
      return rows
    end
  end
  return c:query(cols .. 'r.run_id = ? ORDER BY r.time_epoch DESC, r.id DESC', x)
end

--- How many runs are stored.
function M.count_runs(c)
  local rows, err, code = c:query('SELECT COUNT(*) AS n FROM runs')
  if not rows then
    return nil, err, code
  end
  return math.tointeger(rows[1].n)
end

return M
