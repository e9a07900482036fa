-- tp.history._import: run records (files, results directories, tprimat-era result files, or
-- record tables) made into history rows: the series key, the metrics, the time of the run, the
-- record's SHA-256, and added in batches, each one transaction. Records are read and normalised
-- by tp.analyse.results, as `tplua compare` reads them.
local fs = require('tp.fs')
local json = require('tp.json')
local digest = require('tp._digest')
local results = require('tp.analyse.results')
local store = require('tp.history._store')
local times = require('tp.parse.time')

local M = {}

--- Records read and added per transaction: a kill loses at most one batch, which the next
--- import adds again (sha256 makes it idempotent).
M.BATCH = 250

local function str(v)
  if type(v) == 'string' and v ~= '' then
    return v
  end
  return nil
end

local function tbl(v)
  if type(v) == 'table' and not json.is_null(v) then
    return v
  end
  return nil
end

local function num(v)
  if type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge then
    return v
  end
  return nil
end

-- A part of the series key: '/' would read as a separator, so it becomes '_'.
local function key_part(v)
  if v == nil then
    return '-'
  end
  return (tostring(v):gsub('/', '_'))
end

-- What defines the comparison a run belongs to, besides platform, GPU, framework, model and
-- methodology: the training configuration as the record states it (the log's own values,
-- training_config; unified keys where the log shows none). The same values, the same hash,
-- whatever the paths, run ids, seeds or repeat numbers.
local CONFIG_FIELDS = { 'gbs', 'mbs', 'seq_len', 'gpus', 'precision', 'tp', 'pp', 'dp', 'cp',
  'ep', 'iters', 'dataset' }

local function fmt_value(v)
  if math.type(v) == 'integer' then
    return string.format('%d', v)
  elseif math.type(v) == 'float' then
    if v == math.floor(v) and math.abs(v) < 2 ^ 53 then
      return string.format('%d', math.tointeger(v))
    end
    return string.format('%.17g', v)
  end
  return tostring(v)
end

--- The comparison-defining configuration of a loaded run: {name = value} over CONFIG_FIELDS.
---@param run table a tp.analyse.results run
---@return table
function M.config_of(run)
  local tc = tbl(run.training_config) or {}
  return {
    gbs = run.gbs, mbs = run.mbs, seq_len = run.seq_len, gpus = run.gpus,
    precision = run.precision, tp = run.tp, pp = run.pp, dp = run.dp,
    cp = num(tc.context_parallel_size), ep = num(tc.expert_parallel_size),
    iters = run.train_iters, dataset = run.dataset,
  }
end

--- The config hash of a loaded run: the first 12 hex digits of the SHA-256 of
--- 'name=value;...' over the fields of `config_of` that are known, in a fixed order.
---@param run table
---@return string
function M.config_hash(run)
  local cfg = M.config_of(run)
  local parts = {}
  for _, k in ipairs(CONFIG_FIELDS) do
    if cfg[k] ~= nil then
      parts[#parts + 1] = k .. '=' .. fmt_value(cfg[k])
    end
  end
  return digest.sha256(table.concat(parts, ';')):sub(1, 12)
end

-- The framework's version the record's environment names (tp.run.provenance), or nil.
local function framework_version(run)
  local env = tbl(run.environment)
  local fw = env and tbl(env.framework)
  return fw and (str(fw.version) or (num(fw.version) and tostring(fw.version))) or nil
end

local function gpu_of(run)
  local gi = tbl(run.gpu_info)
  return (gi and str(gi.hardware)) or run.gpu
end

--- The series of a loaded run: {key, platform, gpu, framework, framework_version, model,
--- config_hash, methodology}. The key is those joined by '/' (framework@version), '-' for
--- what the record does not say.
---@param run table
---@return table
function M.series_of(run, collective)
  local s = {
    platform = run.platform, gpu = gpu_of(run), framework = run.framework,
    framework_version = framework_version(run), model = run.model or collective,
    config_hash = M.config_hash(run), methodology = run.methodology,
  }
  s.key = table.concat({ key_part(s.platform), key_part(s.gpu),
    key_part(s.framework) .. '@' .. key_part(s.framework_version), key_part(s.model),
    s.config_hash, key_part(s.methodology) }, '/')
  return s
end

-- The 95% confidence interval of the mean step time over the steady window: mean +/- 1.96 s/sqrt(n)
-- (normal approximation), when the record gives the standard deviation and the window's size.
local function step_time_ci(run)
  local pm = tbl(run.performance_metrics)
  local ss = pm and tbl(pm.steady_state)
  local n = ss and num(ss.records)
  local mean, sd = run.step_time, run.step_time_std
  if not (mean and sd and n and n >= 2) then
    return nil, nil
  end
  local half = 1.96 * sd / math.sqrt(n)
  return mean - half, mean + half
end

--- The metrics of a loaded run, by column name (store.METRICS); absent ones are nil.
---@param run table
---@return table
function M.metrics_of(run)
  local mm = tbl(run.memory_metrics) or {}
  local peak = num(mm.peak_memory_allocated_gb)
  if not peak and run.memory_gib then
    peak = run.memory_gib * 1.073741824
  end
  return {
    tokens_per_s = run.tokens_per_s,
    tokens_per_s_per_gpu = run.tokens_per_s_per_gpu,
    step_time_s = run.step_time,
    mfu = run.mfu,
    -- Measured energy only: tp.analyse's TDP estimate is not a figure to follow over time.
    joules_per_token = run.energy_basis == 'measured' and run.joules_per_token or nil,
    final_loss = run.loss_last,
    peak_memory_gb = peak,
  }
end

--- The time of a loaded run: the record's start (source.started_at; tprimat's timestamp), else
--- its end (source.finished_at), else the file's modification time. Returns the ISO-8601 UTC
--- text, the epoch seconds and the basis ('record' or 'file mtime').
---@param run table
---@param mtime number the file's modification time
---@return string iso, number epoch, string basis
function M.time_of(run, mtime)
  local src = tbl(run.source) or {}
  local candidates = { str(src.started_at), str(run.started), str(src.finished_at) }
  for i = 1, 3 do
    local epoch = times.parse(candidates[i])
    if epoch then
      return times.iso(epoch), epoch, 'record'
    end
  end
  return times.iso(mtime), mtime, 'file mtime'
end

--- The collective a nccl-tests or rccl-tests record measured, with its type ('all_reduce float';
--- docs/collectives.md): its series' model part, so that each collective has a series of its own.
---@param run table
---@param text string the record's JSON text
---@return string|nil
function M.collective_of(run, text)
  if run.framework ~= 'nccl-tests' and run.framework ~= 'rccl-tests' then
    return nil
  end
  local ok, doc = pcall(json.decode, text)
  local t = ok and tbl(doc) and tbl(doc.collectives) and tbl(doc.collectives.tests)
  t = t and tbl(t[1])
  if not t or not str(t.collective) then
    return nil
  end
  return t.collective .. (str(t.dtype) and (' ' .. t.dtype) or '')
end

--- The row of one loaded run whose file's text is `text`.
---@param run table a tp.analyse.results run
---@param text string
---@param st table {mtime} of the file
---@return table row {series, sha256, run_id, time, time_epoch, time_basis, metrics, ...}
function M.row(run, text, st, path)
  local iso, epoch, basis = M.time_of(run, st.mtime)
  local lo, hi = step_time_ci(run)
  local env = tbl(run.environment)
  return {
    series = M.series_of(run, M.collective_of(run, text)),
    sha256 = digest.sha256(text),
    run_id = run.run_id or fs.basename(path):gsub('%.json$', ''),
    time = iso, time_epoch = epoch, time_basis = basis,
    metrics = M.metrics_of(run),
    step_time_ci_lo = lo, step_time_ci_hi = hi,
    environment = env and json.encode(env) or nil,
    record = text,
    source = fs.realpath(path) or path,
  }
end

-- ---------------------------------------------------------------------------------------------
-- Walking the arguments.

local function is_candidate(name)
  return name:sub(1, 1) ~= '.' and name:match('%.json$') ~= nil
    and not require('tp.plan.profile').is_trace_name(name)
end

-- Adds the record files under `dir` (recursively, sorted, hidden entries and profiler traces
-- passed by) to `out`.
local function walk(dir, out, failed, seen)
  local real = fs.realpath(dir) or dir
  if seen[real] then
    return
  end
  seen[real] = true
  local entries, err = fs.list(dir)
  if not entries then
    failed[#failed + 1] = { path = dir, error = err }
    return
  end
  for _, e in ipairs(entries) do
    if e.name:sub(1, 1) ~= '.' then
      local p = dir:gsub('/+$', '') .. '/' .. e.name
      local t = e.type
      if t ~= 'file' and t ~= 'directory' then
        local st = fs.stat(p)
        t = st and st.type
      end
      if t == 'directory' then
        walk(p, out, failed, seen)
      elseif t == 'file' and is_candidate(e.name) then
        out[#out + 1] = p
      end
    end
  end
end

-- The files the arguments stand for, and the arguments that name nothing. A record given as a
-- table is written to a temporary file and read back like the others (the same checks);
-- `labels` maps such a file to the name it goes by in messages ('records[3]'); `explicit`
-- holds the files named by an argument (not found in a directory).
local function expand(items, tmp, labels, explicit)
  local files, failed, seen = {}, {}, {}
  for i, item in ipairs(items) do
    if type(item) == 'table' then
      local label = string.format('records[%d]', i)
      local text, err = json.encode(item, { pretty = true })
      if not text then
        failed[#failed + 1] = { path = label, error = label .. ': ' .. tostring(err) }
      else
        local path = string.format('%s/record-%d.json', tmp(), i)
        local ok, werr = fs.write_atomic(path, text .. '\n')
        if ok then
          files[#files + 1] = path
          labels[path] = label
          explicit[path] = true
        else
          failed[#failed + 1] = { path = label, error = label .. ': ' .. tostring(werr) }
        end
      end
    else
      local st, err = fs.stat(item)
      if not st then
        failed[#failed + 1] = { path = item, error = err }
      elseif st.type == 'directory' then
        walk(item, files, failed, seen)
      else
        files[#files + 1] = item
        explicit[item] = true
      end
    end
  end
  return files, failed
end

-- ---------------------------------------------------------------------------------------------
-- Adding.

local function make_tmp()
  local dir
  return function()
    if not dir then
      local name = os.tmpname()
      os.remove(name)
      assert(fs.mkdir_p(name, 448))
      dir = name
    end
    return dir
  end, function()
    if dir then
      fs.remove_tree(dir)
    end
  end
end

-- Text bytes of the records a batch holds at most: big records make small batches (memory,
-- and the time other writers wait for the write lock).
M.BATCH_BYTES = 32 * 1024 * 1024

-- Whether an error of tp.analyse.results says the file is no result at all (JSON, but neither a
-- run record nor a tprimat-era file), rather than a damaged or unreadable one.
local function is_not_a_result(msg)
  return tostring(msg):find('neither a run record', 1, true) ~= nil
end

-- Reads the files `paths` (one chunk), calling `emit(row, bytes)` for each run to store and
-- noting in `res` what could not be read: in `failed`, damaged or unreadable files and files
-- named by an argument that are no run record; in `ignored`, other JSON files found in a
-- directory, and failed runs. `labels` names temporary files in messages.
local function read_chunk(paths, res, labels, explicit, emit)
  local function name(p)
    return labels[p] or p
  end
  local function named(p, msg)
    local label = labels[p]
    if label then
      return (tostring(msg):gsub(p:gsub('%p', '%%%0'), label))
    end
    return msg
  end
  local set = results.load(paths, { recursive = false })
  if not set then
    for _, p in ipairs(paths) do
      res.failed[#res.failed + 1] = { path = name(p), error = name(p) .. ': cannot be read' }
    end
    return true
  end
  for _, e in ipairs(set.errors) do
    if not explicit[e.path] and is_not_a_result(e.message) then
      res.ignored[#res.ignored + 1] = { path = name(e.path), reason = named(e.path, e.message) }
    else
      res.failed[#res.failed + 1] = { path = name(e.path), error = named(e.path, e.message) }
    end
  end
  for _, sk in ipairs(set.skipped) do
    if sk.reason:match('^already loaded as ') then
      res.skipped = res.skipped + 1
    else
      local list = explicit[sk.path] and res.failed or res.ignored
      local msg = string.format('%s: not a run record: %s', name(sk.path), sk.reason)
      list[#list + 1] = { path = name(sk.path), error = msg, reason = msg }
    end
  end
  for _, run in ipairs(set.runs) do
    local path = run.path
    if run.status == 'failed' then
      res.ignored[#res.ignored + 1] = { path = name(path), reason = string.format(
        "%s: a failed run (status 'failed'): its figures are not kept", name(path)) }
    else
      local text, mtime, code = json.read_text(path)
      if not text then
        res.failed[#res.failed + 1] = { path = name(path), error = named(path, mtime),
          code = code }
      else
        local row = M.row(run, text, { mtime = mtime or os.time() }, path)
        if labels[path] then
          row.source = labels[path]
        end
        local ok, err, ecode = emit(row, #text)
        if not ok then
          return nil, err, ecode
        end
      end
    end
  end
  return true
end

-- Adds the rows of a batch in one transaction. Returns true, or nil, err, code (rolled back).
-- The series are made first, in key order, then the runs, in sha256 order: two adders whose
-- batches share series or runs take their locks in the same order (PostgreSQL locks each new
-- key until commit), so they wait for each other and never deadlock.
local function store_batch(h, rows, res, on_run)
  local c = h.conn
  local added = {}
  local ok, err, code = store.transaction(c, function()
    local keys, series = {}, {}
    for _, row in ipairs(rows) do
      local k = row.series.key
      if not series[k] then
        series[k] = row.series
        keys[#keys + 1] = k
      end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local sid, serr, scode = store.series_id(c, series[k], h.series_ids)
      if not sid then
        return nil, serr, scode
      end
    end
    local order = table.move(rows, 1, #rows, 1, {})
    table.sort(order, function(x, y)
      return x.sha256 < y.sha256
    end)
    local now = times.iso(os.time())
    for _, row in ipairs(order) do
      row.added_at = now
      local new, aerr, acode = store.add_run(c, h.series_ids[row.series.key], row)
      if new == nil then
        return nil, aerr, acode
      end
      -- The same file twice in one batch: the second finds the first.
      added[row] = new
    end
    return true
  end)
  if not ok then
    h.series_ids = {} -- ids of series made in the transaction rolled back are gone
    return nil, err, code
  end
  for _, row in ipairs(rows) do
    if added[row] then
      res.added = res.added + 1
    else
      res.skipped = res.skipped + 1
    end
    if on_run then
      on_run({ path = row.source, run_id = row.run_id, key = row.series.key,
        sha256 = row.sha256, time = row.time, added = added[row] })
    end
  end
  return true
end

--- Adds run records to the history `h` (see tp.history History:add).
---@param h table the History
---@param items (string|table)[]
---@param opts {on_run?: function, batch?: integer}
---@return table|nil result, string? err, string? code, table? so_far (the result until the
---  database failed: the batches it counts are stored)
function M.add(h, items, opts)
  local tmp, cleanup = make_tmp()
  local labels, explicit = {}, {}
  local files, failed = expand(items, tmp, labels, explicit)
  local res = { added = 0, skipped = 0, failed = failed, ignored = {}, files = #files }
  local batch = opts.batch or M.BATCH
  local pending, bytes = {}, 0
  local function flush()
    if #pending == 0 then
      return true
    end
    local rows = pending
    pending, bytes = {}, 0
    return store_batch(h, rows, res, opts.on_run)
  end
  local function emit(row, n)
    pending[#pending + 1] = row
    bytes = bytes + n
    if #pending >= batch or bytes >= M.BATCH_BYTES then
      return flush()
    end
    return true
  end
  local ok, err, code = true, nil, nil
  for first = 1, #files, batch do
    local chunk = table.move(files, first, math.min(first + batch - 1, #files), 1, {})
    ok, err, code = read_chunk(chunk, res, labels, explicit, emit)
    if not ok then
      break
    end
  end
  if ok then
    ok, err, code = flush()
  end
  cleanup()
  if not ok then
    return nil, err, code, res
  end
  return res
end

return M
