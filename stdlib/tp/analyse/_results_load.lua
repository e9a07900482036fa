-- tp.analyse._results_load: runs and result sets (their metatables; a run's per-iteration arrays
-- load on first access) and loading them: the planned walk of files and directories, the summary
-- index, unique ids. The set's methods are added by _results_query and _results_output.
local json = require('tp.json')
local fs = require('tp.fs')
local decode = require('tp.analyse._results_decode')
local summarise = require('tp.analyse._results_summary').summarise

local M = {}

local is_null, tbl = decode.is_null, decode.tbl
local read_doc, read_file_doc = decode.read_doc, decode.read_file_doc
local Bad, bad, validate = decode.Bad, decode.bad, decode.validate
local DETAIL_FIELDS, SKIPPED_ON_LOAD = decode.DETAIL_FIELDS, decode.SKIPPED_ON_LOAD

local DETAIL = {}
for _, k in ipairs(DETAIL_FIELDS) do
  DETAIL[k] = true
end

-- File facts of each run (path, size, mtime, kind), out of the summary; weak keys.
local FILE = setmetatable({}, { __mode = 'k' })

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
  for _, k in ipairs(DETAIL_FIELDS) do
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
for _, k in ipairs(DETAIL_FIELDS) do
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
  for _, k in ipairs(DETAIL_FIELDS) do
    rawset(self, k, nil)
  end
end

--- Returns the file the run was read from and its kind ('run' or 'tprimat').
---@return string path, string kind
function Run:file()
  local f = FILE[self]
  return f.path, f.kind
end

--- Returns the summary of the run's profiler traces (tp.analyse.trace.summary, docs/record.md
--- `profile.analysis`): its record's `profile.analysis`, else one made from the trace files the
--- record lists, read on first call. Also returns where it came from ('record' or 'traces');
--- nil and the reason when the run was not profiled or its traces cannot be read.
---```lua
---local s = R[1]:profile_analysis()
---if s and s.gpu then print(s.window_ms, s.idle_ms) end
---```
---@return table|nil summary, string from_or_err
function Run:profile_analysis()
  return require('tp.analyse.profiled').analysis(self)
end

--- Returns the whole analysis of the run's profiler traces (tp.analyse.trace.analyse: each
--- rank, each step, the top kernels), read from the files its record lists on first call; nil
--- and the reason when there are none or none can be read.
---@return table|nil analysis, string? err
function Run:trace()
  return require('tp.analyse.profiled').trace(self)
end

--- Returns the op table of the run's profiler traces (tp.analyse.ops: every op with its shapes
--- against its GPU's limit, the ranks added up), read on first call; it prints as the table at
--- the prompt. nil and the reason when the run was not profiled or its traces hold no CPU op
--- with shapes.
---```lua
---R[1]:ops()                          -- the table
---R[1]:ops().rows[1].pct             -- the largest op's share of its roofline limit
---```
---@return table|nil ops, string? err
function Run:ops()
  local a, err = require('tp.analyse.profiled').trace(self)
  if not a then
    return nil, err
  end
  if not a.ops or #a.ops.rows == 0 then
    return nil, 'its traces link no GPU op to a CPU op (record_shapes=True traces needed)'
  end
  return require('tp.analyse.ops').printable(a.ops)
end

--- Returns where the run's GPU memory went, from the allocator's events in its profiler traces
--- (tp.analyse.memory: per device the peaks, when and in which op, what was live then by
--- category, per step and per op; the rank with the largest peak), read on first call; it
--- prints as `tplua trace --memory` does, with the run's measurement against the plan's
--- estimate (`against_plan`) when its record or config gives one. nil and the reason when the
--- run was not profiled or its traces hold no memory event.
---```lua
---R[1]:memory()                       -- the text
---R[1]:memory().primary.peak         -- bytes at the main device's peak
---```
---@return table|nil memory, string? err
function Run:memory()
  local a, err = require('tp.analyse.profiled').trace(self)
  if not a then
    return nil, err
  end
  local memory = require('tp.analyse.memory')
  local m = memory.of_run(a)
  if not m then
    return nil, 'its traces hold no [memory] events (profile with profile_memory=True; '
      .. 'docs/memory.md)'
  end
  local mem = m.memory
  local est = memory.estimate_of(self)
  if est then
    mem.against_plan = memory.against_plan(memory.summary(a), est)
  end
  return memory.printable(mem)
end

for k, f in pairs(Run) do
  RUN_COMPLETE[k] = f
end

-- A record's `memory` member (its estimate and measurement) shadows the method of that name:
-- the member answers the call for it, so `run.memory.measured` and `run:memory()` both work.
local MEMORY_MEMBER = { __name = 'tp.results.RunMemory', __call = function(_, run)
  return Run.memory(run)
end }

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

-- Documents tplua itself writes beside the run records, which a results directory holds as a
-- matter of course: not results, and not counted as skipped foreign files.
local COMPANIONS = {
  '^tplua%.search/', -- a search's decisions (docs/search.md)
  '^tplua%.peaks/',  -- what the peaks microbenchmark measured; its record holds it (docs/peaks.md)
}

local function is_companion(schema)
  for _, pattern in ipairs(COMPANIONS) do
    if type(schema) == 'string' and schema:match(pattern) then
      return true
    end
  end
  return false
end

-- Classifies a decoded document: 'run', 'tprimat', 'companion' (is_companion), or nil and the
-- reason it is not a result.
local function classify(doc, path, explicit)
  local schema = doc.schema
  if schema ~= nil and not is_null(schema) then
    local record = require('tp.parse.record')
    if record.readable(schema) then
      return 'run'
    end
    if is_companion(schema) then
      return 'companion'
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
-- 'skipped' | 'companion', reason}, and its stat. `text_of()` gives the file's text (for
-- members to decode).
local function examine_doc(path, explicit, doc, st, nonfinite, text_of)
  if doc == nil then
    return { kind = 'error', message = st, code = nonfinite }
  end
  local out
  local ok, err = pcall(function()
    validate(path, doc, text_of)
    local kind, why = classify(doc, path, explicit)
    if not kind or kind == 'companion' then
      out = { kind = kind and 'companion' or 'skipped', reason = why }
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

-- Adds an outcome of `examine_doc` (fresh or from an index) to the set.
local function apply(set, outcome, path, root, st)
  if outcome.kind == 'error' then
    set.errors[#set.errors + 1] = { path = path, message = outcome.message, code = outcome.code }
  elseif outcome.kind == 'skipped' then
    set.skipped[#set.skipped + 1] = { path = path, reason = outcome.reason }
  elseif outcome.kind == 'companion' then
    return -- tplua's own document beside the records (COMPANIONS): neither a run nor skipped
  else
    local run = {}
    for k, v in pairs(outcome.summary) do
      run[k] = v
    end
    run.path = path
    if type(run.memory) == 'table' and getmetatable(run.memory) == nil then
      setmetatable(run.memory, MEMORY_MEMBER)
    end
    FILE[run] = { path = path, size = st.size, mtime = st.mtime, kind = outcome.file_kind,
      root = root }
    set.runs[#set.runs + 1] = setmetatable(run, RUN_MT)
  end
end

--- Name of the summary index `load` keeps in a directory when asked (`opts.index`).
M.INDEX_NAME = '.tplua-results-index.json'
-- /2: tplua's own documents (COMPANIONS) are cached as 'companion', no longer as 'skipped'.
-- /3: a run's summary keeps its record's `memory` member (docs/memory.md).
local INDEX_SCHEMA = 'tplua.results-index/3'

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

M.ResultSet, M.new_set = ResultSet, new_set

return M
