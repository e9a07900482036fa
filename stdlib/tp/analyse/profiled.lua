-- tp.analyse.profiled: the profiler traces of profiled runs, analysed by tp.analyse.trace. The
-- trace files a record's `profile` member lists; the summary the record keeps
-- (`profile.analysis`, written after a profiled run; tp.analyse.trace.summary), or, for a record
-- without one, the same summary made from its trace files on demand; and the profile section of
-- a comparison (tplua compare, tplua report, the REPL's R:profile()): each group's mean
-- breakdown per step, and between the baseline group and each other group the explanation of
-- the gap in step time, from the traces of one run per group. docs/analysis.md, "Profiles".
local fs = require('tp.fs')
local json = require('tp.json')
local trace = require('tp.analyse.trace')
local checks = require('tp.analyse._trace_checks')

local M = {}

--- Returns true when tp.analyse.trace reads the file: PyTorch profiler (Kineto) JSON
--- (`rank0_trace.json`, `x.pt.trace.json.gz`), Nsight Systems SQLite exports (`.sqlite`) and
--- rocprofv3 kernel traces (`rank0_kernel_trace.csv`), gzip or not; not nsys reports,
--- Perfetto files or PyTorch's memory-timeline exports (`*.raw.json.gz`).
---```lua
---tp.analyse.profiled.is_readable('rank0_trace.json')       --> true
---tp.analyse.profiled.is_readable('nsys_rank0.sqlite')      --> true
---tp.analyse.profiled.is_readable('nsys_rank0.nsys-rep')    --> false
---```
---@param path string
---@return boolean
function M.is_readable(path)
  if type(path) ~= 'string' then
    return false
  end
  if require('tp.analyse._memory_timeline').is_timeline_name(path) then
    return false  -- PyTorch's memory timeline: tp.analyse.memory reads it, not as a trace
  end
  local p = path:gsub('%.gz$', '')
  return p:find('%.json$') ~= nil or p:find('%.sqlite$') ~= nil
    or p:find('kernel_trace%.csv$') ~= nil
end

--- The files of a record's `profile` member (its `traces`) that tp.analyse.trace reads, each
--- joined to the record's directory when relative (as the record writes them).
---```lua
---local files = tp.analyse.profiled.files(run.profile, run.path)
---```
---@param member table the record's `profile`
---@param record_path? string the record's file
---@return string[]
function M.files(member, record_path)
  local out = {}
  if type(member) ~= 'table' or type(member.traces) ~= 'table' then
    return out
  end
  local dir = type(record_path) == 'string' and fs.dirname(record_path) or '.'
  for _, t in ipairs(member.traces) do
    if M.is_readable(t) then
      out[#out + 1] = t:sub(1, 1) == '/' and t or fs.join(dir, t)
    end
  end
  return out
end

local LISTS = { 'warnings', 'errors', 'top', 'stragglers' }

-- `s` with every "<base>/" taken out: file names in messages relative to the record.
local function relative_text(s, base)
  if not base or base == '' or base == '.' then
    return s
  end
  local prefix = (base:gsub('/+$', '') .. '/'):gsub('%p', '%%%0')
  return (s:gsub(prefix, ''))
end

--- Makes a summary of tp.analyse.trace.summary ready to be written in a record: its lists are
--- JSON arrays (empty ones too), file names in its messages relative to `base` (the record's
--- directory). Changes and returns `summary`.
---```lua
---local s = tp.analyse.profiled.for_record(tp.analyse.trace.summary(run), 'out')
---```
---@param summary table
---@param base? string
---@return table summary
function M.for_record(summary, base)
  for _, k in ipairs(LISTS) do
    local list = summary[k]
    if type(list) == 'table' then
      local arr = json.array()
      for i, v in ipairs(list) do
        arr[i] = type(v) == 'string' and relative_text(v, base) or v
      end
      summary[k] = arr
    end
  end
  return summary
end

--- Analyses the trace files of one run (one per rank) and returns the summary its record keeps
--- as `profile.analysis` (M.for_record of tp.analyse.trace.summary), then nil and, when the
--- traces hold the allocator's events, the memory its record keeps as `memory.measured`
--- (tp.analyse.memory.summary). Returns nil when none of the files is a Kineto trace (nothing to
--- analyse: an nsys or rocprofv3 profile), nil and a message when none can be read.
--- tp.experiment gives it to each profiled run (the run's `profile.analyse`), and the record
--- writer calls it before writing the record.
---```lua
---local s = tp.analyse.profiled.summarise({ 'out/nvd/x/profile/rank0_trace.json' }, 'out')
---print(s.gpu, s.ranks, s.window_ms)
---```
---@param paths string[]
---@param base? string the record's directory
---@return table|nil summary, string? err
function M.summarise(paths, base)
  local files = {}
  for _, p in ipairs(paths) do
    if M.is_readable(p) then
      files[#files + 1] = p
    end
  end
  if #files == 0 then
    return nil
  end
  local run, err = trace.analyse(files)
  if not run then
    return nil, err
  end
  local s = M.for_record(trace.summary(run), base)
  -- Where the memory went, when the traces hold the allocator's events (docs/memory.md): the
  -- record's `memory.measured`.
  local mem = require('tp.analyse.memory').summary(run)
  if mem then
    for i, w in ipairs(mem.warnings) do
      mem.warnings[i] = relative_text(w, base)
    end
  end
  return s, nil, mem
end

-- Per run (weak keys): the summary made from its traces, and the analysis of its traces.
local summaries = setmetatable({}, { __mode = 'k' })
local analyses = setmetatable({}, { __mode = 'k' })

local function profile_of(run)
  return type(run) == 'table' and type(run.profile) == 'table' and run.profile or nil
end

--- The trace-analysis summary of a run (a tp.results run, or a table with the record's
--- `profile` and `path`): the record's `profile.analysis`, else one made from the trace files
--- it lists (kept for the next call). Returns the summary and where it came from ('record' or
--- 'traces'), or nil and the reason there is none.
---```lua
---local s, from = tp.analyse.profiled.analysis(R[1])
---if s and s.gpu then print(s.window_ms, s.idle_ms, from) end
---```
---@param run table
---@return table|nil summary, string from_or_err
function M.analysis(run)
  local p = profile_of(run)
  if not p then
    return nil, 'the run was not profiled (its record has no profile member)'
  end
  if type(p.analysis) == 'table' then
    return p.analysis, 'record'
  end
  local hit = summaries[run]
  if not hit then
    local files = M.files(p, run.path)
    local s, err
    if #files == 0 then
      err = 'its record lists no trace file tp.analyse.trace reads (PyTorch profiler JSON)'
    else
      s, err = M.summarise(files, run.path and fs.dirname(run.path))
    end
    hit = { s, s and 'traces' or tostring(err) }
    summaries[run] = hit
  end
  return hit[1], hit[2]
end

--- The whole analysis of a run's traces (tp.analyse.trace.analyse: every rank, every step,
--- and the op table: `ops`), read from the files its record lists (kept for the next call); nil
--- and a message when it has none or none can be read. `opts.peaks`: measured peaks
--- (tp.analyse.peaks entries) for the op table, used by the first call.
---```lua
---local a = assert(tp.analyse.profiled.trace(R[1]))
---print(tp.present.trace.run_text(a))
---print(tp.present.ops.table_text(a.ops))
---```
---@param run table
---@param opts? { peaks?: table[] }
---@return table|nil analysis, string? err
function M.trace(run, opts)
  local p = profile_of(run)
  if not p then
    return nil, 'the run was not profiled (its record has no profile member)'
  end
  local hit = analyses[run]
  if not hit then
    local files = M.files(p, run.path)
    if #files == 0 then
      hit = { nil, 'its record lists no trace file tp.analyse.trace reads (PyTorch profiler '
        .. 'JSON)' }
    else
      local a, err = trace.analyse(files, { ops = true, peaks = opts and opts.peaks })
      hit = { a, err }
    end
    analyses[run] = hit
  end
  return hit[1], hit[2]
end

--- The measured peaks among a result set's records (records of recipes/peaks.lua, with a
--- `peaks` member), as tp.analyse.peaks entries; nil when there are none.
---@param set table a tp.results ResultSet
---@return table[]|nil
function M.peaks_of(set)
  local out = {}
  for _, r in ipairs(set.runs or {}) do
    local pk = type(r.peaks) == 'table' and r.peaks or nil
    if pk and type(pk.tflops) == 'table' then
      out[#out + 1] = { source = r.path or r.id, peaks = pk, gpu = pk.gpu }
    end
  end
  return #out > 0 and out or nil
end

local ROW_FIELDS = { 'name', 'shapes', 'precision', 'compute', 'category', 'class', 'calls',
  'per_step', 'mean', 'gflops', 'mb', 'intensity', 'tflops', 'tbs', 'pct', 'bound',
  'measured_pct', 'measured_bound', 'phase', 'module', 'own', 'skipped' }

--- The part of an op table (tp.analyse.ops) a comparison keeps: the device and its limits,
--- the classes' efficiency and the `top` rows by time with their figures.
---@param t table
---@param top? integer (default 30)
---@return table
function M.ops_brief(t, top)
  local rows = json.array()
  for i = 1, math.min(top or 30, #t.rows) do
    local r, c = t.rows[i], {}
    for _, f in ipairs(ROW_FIELDS) do
      c[f] = r[f]
    end
    c.kernel = r.kernels[1] and r.kernels[1].name or nil
    rows[#rows + 1] = c
  end
  return { device = t.device, peaks = t.peaks, linked = t.linked, unlinked = t.unlinked,
    steps = t.steps, classes = t.classes, rows = rows, warnings = json.array(t.warnings) }
end

-- The part of a pairing (tp.analyse.ops.compare) a comparison keeps.
local function pairs_brief(c, top)
  local out = json.array()
  for i = 1, math.min(top or 15, #c.pairs) do
    local p = c.pairs[i]
    local function side(e)
      return { per_step = e.per_step, tflops = e.tflops, pct = e.pct,
        measured_pct = e.measured_pct, bound = e.bound, calls = e.calls, kernel = e.kernel }
    end
    out[i] = { name = p.name, shapes = p.shapes, precision = p.precision, class = p.class,
      category = p.category, a = side(p.a), b = side(p.b), save = p.save, save_a = p.save_a,
      save_b = p.save_b }
  end
  return { pairs = out, verdicts = json.array(c.verdicts), matched_a = c.matched_a,
    matched_b = c.matched_b }
end

local FIELDS = { 'window', 'busy', 'idle', 'compute', 'non_compute', 'comm', 'comm_overlapped',
  'comm_exposed', 'host_wait', 'dataloader', 'cpu_step' }

local CLASS_FIELDS = { 'exclusive_ms', 'time_ms', 'sum_ms', 'count' }

local function append(list, items, prefix)
  for _, v in ipairs(type(items) == 'table' and items or {}) do
    list[#list + 1] = prefix and (prefix .. tostring(v)) or v
  end
end

--- The mean of several runs' summaries (same shape as one): each figure and each class's over
--- the runs with GPU ops; `gpu` false when none has any. `runs` counts the summaries, `ranks`
--- is the most ranks of one run; warnings, errors and stragglers are gathered, each prefixed
--- with its run's id when `ids` are given.
---```lua
---local m = tp.analyse.profiled.mean({ a:profile_analysis(), b:profile_analysis() }, { 'a', 'b' })
---print(m.window_ms, m.classes.gemm.exclusive_ms)
---```
---@param list table[] summaries
---@param ids? string[]
---@return table
function M.mean(list, ids)
  local out = { runs = #list, ranks = 0, gpu = false, warnings = json.array(),
    errors = json.array(), stragglers = json.array() }
  local gpu = {}
  for i, s in ipairs(list) do
    out.ranks = math.max(out.ranks, math.tointeger(s.ranks) or 0)
    if s.gpu == true then
      gpu[#gpu + 1] = s
    end
    local prefix = ids and ids[i] and (ids[i] .. ': ') or nil
    append(out.warnings, s.warnings, prefix)
    append(out.errors, s.errors, prefix)
    append(out.stragglers, s.stragglers, prefix)
  end
  if #gpu == 0 then
    return out
  end
  out.gpu = true
  out.steps = 0
  for _, s in ipairs(gpu) do
    out.steps = out.steps + (s.steps or 0)
  end
  for _, f in ipairs(FIELDS) do
    local sum, n = 0, 0
    for _, s in ipairs(gpu) do
      local v = s[f .. '_ms']
      if type(v) == 'number' then
        sum, n = sum + v, n + 1
      end
    end
    out[f .. '_ms'] = n > 0 and sum / n or nil
  end
  local sum, n = 0, 0
  for _, s in ipairs(gpu) do
    if type(s.overlap) == 'number' then
      sum, n = sum + s.overlap, n + 1
    end
  end
  out.overlap = n > 0 and sum / n or nil
  out.classes = {}
  for _, s in ipairs(gpu) do
    for name, c in pairs(type(s.classes) == 'table' and s.classes or {}) do
      local m = out.classes[name]
      if not m then
        m = { kind = c.kind }
        for _, f in ipairs(CLASS_FIELDS) do
          m[f] = 0
        end
        out.classes[name] = m
      end
      for _, f in ipairs(CLASS_FIELDS) do
        m[f] = m[f] + (type(c[f]) == 'number' and c[f] or 0) / #gpu
      end
    end
  end
  out.top = gpu[1].top
  -- Idle time per cause, over the summaries that have it (records written before it lack it).
  local causes = {}
  for _, s in ipairs(gpu) do
    if type(s.idle_causes_ms) == 'table' then
      causes[#causes + 1] = s.idle_causes_ms
    end
  end
  if #causes > 0 then
    out.idle_causes_ms = {}
    for _, c in ipairs(trace.CAUSES) do
      local v = 0
      for _, x in ipairs(causes) do
        v = v + (type(x[c]) == 'number' and x[c] or 0)
      end
      out.idle_causes_ms[c] = v / #causes
    end
  end
  return out
end

-- The parts of an explanation (tp.analyse.trace.explain) worth keeping and printing as JSON
-- (times in ns, as tp.analyse.trace gives them).
local function brief(e)
  local rows = json.array()
  for i, r in ipairs(e.rows) do
    rows[i] = { key = r.key, label = r.label, kind = r.kind, a = r.a, b = r.b, diff = r.diff,
      share = r.share, moved = r.moved }
  end
  local host = json.array()
  for i, x in ipairs(e.host or {}) do
    host[i] = { host_wait = x.host_wait, idle = x.idle, window = x.window,
      launch_bound = x.launch_bound, cause = x.cause }
  end
  return { unit = 'ns', labels = json.array({ e.labels[1], e.labels[2] }), step_a = e.step_a,
    step_b = e.step_b, diff = e.diff, ratio = e.ratio, sum = e.sum, moved = e.moved,
    faster = e.faster, sign = e.sign, host = host, rows = rows, overlap_a = e.overlap_a,
    overlap_b = e.overlap_b, lines = json.array(e.lines), warnings = json.array(e.warnings) }
end

-- The groups of `set` by opts.by, the baseline first: {{value=, runs = {id...}}...}.
local function groups_of(set, opts)
  local by = opts.by or 'platform'
  local keys = set:group_keys(by)
  local split = set:group(by)
  local baseline = opts.baseline
  if baseline == nil or split[baseline] == nil then
    baseline = (by == 'platform' and split.nvd) and 'nvd' or keys[1]
  end
  local out = {}
  for _, k in ipairs(keys) do
    local ids = {}
    for i, r in ipairs(split[k].runs) do
      ids[i] = r.id
    end
    table.insert(out, k == baseline and 1 or #out + 1, { value = k, runs = ids })
  end
  return out, by, baseline
end

-- The first run of a group whose traces hold GPU ops: its analysis and id, or nil and why not.
local function first_trace(group, by_id, peaks)
  local why
  for _, id in ipairs(group.runs) do
    local a, err = M.trace(by_id[id], { peaks = peaks })
    if a and a.gpu then
      return a, id
    end
    why = why or string.format('%s: %s', id, a and 'no GPU ops in its traces' or tostring(err))
  end
  return nil, string.format('no trace of %s with GPU ops can be read (%s)',
    tostring(group.value), why or 'no profiled run')
end

---@class tp.analyse.profiled.Section
---@field by string the key that splits the runs
---@field baseline any the baseline group
---@field groups table[] {value=, runs = {id...} (its profiled runs), from = {id = 'record'|
---  'traces'}, summary = M.mean of their summaries (nil without any), errors = {message...},
---  ops = M.ops_brief of the op table of its first run with GPU traces}
---@field explanations table[] one per other group: {baseline=, group=, runs = {id_a, id_b},
---  explanation = (tp.analyse.trace.explain's, JSON-friendly), ops = the same ops paired (their
---  verdicts and top pairs)} or {baseline=, group=, missing = why}

--- The profile section of a comparison: `cmp` is a tp.analyse.compare result (its `by`,
--- `baseline` and `groups`, the baseline first) or the options { by = 'platform', baseline = }.
--- For each group, the mean breakdown of its profiled runs (M.analysis of each: the records'
--- summaries, or their traces); between the baseline group and each other group, the
--- explanation of the gap in step time (tp.analyse.trace.explain) from the traces of the first
--- run of each group whose traces hold GPU ops. Returns nil when no run of the set is profiled.
---```lua
---local sec = tp.analyse.profiled.section(set, assert(tp.analyse.compare.compare(set)))
---for _, g in ipairs(sec and sec.groups or {}) do print(g.value, g.summary.window_ms) end
---```
---@param set table a tp.results ResultSet
---@param cmp? table
---@param opts? { peaks?: table[] } measured peaks (tp.analyse.peaks entries) beside those of the
---  set's own peaks records, for the op tables
---@return tp.analyse.profiled.Section|nil
function M.section(set, cmp, opts)
  if type(set) ~= 'table' or type(set.runs) ~= 'table' then
    error('tp.analyse.profiled.section: result set expected, got ' .. type(set), 2)
  end
  cmp = cmp or {}
  local by_id, any = {}, false
  for _, r in ipairs(set.runs) do
    by_id[r.id] = r
    any = any or profile_of(r) ~= nil
  end
  if not any then
    return nil
  end
  local groups, by, baseline = cmp.groups, cmp.by, cmp.baseline
  if not groups then
    groups, by, baseline = groups_of(set, cmp)
  end
  local peaks = M.peaks_of(set)
  if opts and opts.peaks then
    peaks = peaks or {}
    for _, p in ipairs(opts.peaks) do
      peaks[#peaks + 1] = p
    end
  end
  local sec = { by = by or 'platform', baseline = baseline, groups = json.array(),
    explanations = json.array() }
  for _, gr in ipairs(groups) do
    local g = { value = gr.value, runs = json.array(), from = {}, errors = json.array() }
    local list = {}
    for _, id in ipairs(gr.runs or {}) do
      local r = by_id[id]
      if profile_of(r) then
        local s, from = M.analysis(r)
        if s then
          list[#list + 1] = s
          g.runs[#g.runs + 1] = id
          g.from[id] = from
        else
          g.errors[#g.errors + 1] = string.format('%s: %s', id, from)
        end
      end
    end
    g.summary = #list > 0 and M.mean(list, g.runs) or nil
    if g.summary and g.summary.gpu then
      local a = first_trace(g, by_id, peaks)
      if a and a.ops then
        g.ops = M.ops_brief(a.ops)
      end
      -- Idle per cause: the summaries', else the traces' of its first run (older records).
      g.idle = g.summary.idle_causes_ms
      if not g.idle and a and a.mean and a.mean.cause then
        g.idle = {}
        for _, c in ipairs(trace.CAUSES) do
          g.idle[c] = a.mean.cause[c] / 1e6
        end
      end
      -- A logged step time far from the traced step: the traces may not be of this run.
      for i, id in ipairs(g.runs) do
        local w = checks.step_time(id, by_id[id].step_time, list[i].gpu and list[i].window_ms)
        if w then
          g.summary.warnings[#g.summary.warnings + 1] = w
        end
      end
    end
    sec.groups[#sec.groups + 1] = g
  end
  local base = sec.groups[1]
  for i = 2, #sec.groups do
    local g = sec.groups[i]
    local x = { baseline = base.value, group = g.value }
    local label = tostring(g.value)
    local base_label = tostring(base.value)
    if not base.summary then
      x.missing = string.format('the baseline %s has no profiled run', base_label)
    elseif not g.summary then
      x.missing = string.format('%s has no profiled run', label)
    elseif not base.summary.gpu or not g.summary.gpu then
      x.missing = string.format('%s has no GPU ops in its traces (a CPU-only profile)',
        base.summary.gpu and label or base_label)
    else
      local a, ida = first_trace(base, by_id, peaks)
      local b, idb = first_trace(g, by_id, peaks)
      if not a or not b then
        x.missing = not a and ida or idb
      else
        local e, err = trace.explain(a, b, { base_label, label })
        if e then
          x.runs = json.array({ ida, idb })
          x.explanation = brief(e)
          x.ops = e.ops and pairs_brief(e.ops) or nil
        else
          x.missing = err
        end
      end
    end
    sec.explanations[#sec.explanations + 1] = x
  end
  return sec
end

--- The memory section of a comparison (tp.analyse._memory_section): each run's measured
--- memory per GPU (its traces' allocator events, else its log's peaks) beside the plan's
--- estimate, the measurement against the estimate by component for each group's first run with
--- both, and the groups' traces side by side (tp.analyse.memory.compare). nil when no run has a
--- measurement or an estimate. `cmp` as for M.section.
---```lua
---local mem = tp.analyse.profiled.memory_section(set, cmp)
---for _, r in ipairs(mem and mem.runs or {}) do print(r.id, r.source, r.peak_allocated) end
---```
---@param set table a tp.results ResultSet
---@param cmp? table
---@return table|nil
function M.memory_section(set, cmp)
  return require('tp.analyse._memory_section').section(set, cmp, function(r)
    return M.trace(r)
  end)
end

--- A copy of a memory section for JSON (each group without the whole memory of its trace).
---@param sec table
---@return table
function M.memory_section_for_json(sec)
  return require('tp.analyse._memory_section').for_json(sec)
end

--- The classes of a summary by exclusive time per step, largest first: {{name=, kind=, ms=}}.
---```lua
---print(tp.analyse.profiled.classes_by_time(R[1]:profile_analysis())[1].name)  --> 'gemm'
---```
---@param s table a summary
---@return table[]
function M.classes_by_time(s)
  local out = {}
  for name, c in pairs(type(s.classes) == 'table' and s.classes or {}) do
    out[#out + 1] = { name = name, kind = c.kind, ms = type(c.exclusive_ms) == 'number'
      and c.exclusive_ms or 0 }
  end
  table.sort(out, function(x, y)
    return x.ms > y.ms or (x.ms == y.ms and x.name < y.name)
  end)
  return out
end

return M
