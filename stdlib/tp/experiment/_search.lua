-- tp.experiment._search: a recipe's `search` (tp.plan.search) planned and run. The plan of a
-- platform that searches lists the runs of rung 0 and the rungs with their budget against the
-- full grid; running it runs each rung's runs through the same execution as every plan
-- (tp.experiment._execute, so tp.campaign's journal and resume), ranks the candidates from the
-- records, and writes what was decided in <results>/search-<platform>.json (tplua.search/1),
-- which tplua report and compare show. A search killed at any point resumes: finished runs are
-- skipped by the journal and the same records give the same decisions.
local config = require('tp.plan.config')
local sweep = require('tp.plan.sweep')
local search = require('tp.plan.search')
local planning = require('tp.experiment._plan')
local run = require('tp.experiment._execute')

local M = {}

M.SCHEMA = require('tp.present.search').SCHEMA -- 'tplua.search/1'

-- The flags without --search (the grid's plan).
local function grid_opts_of(opts)
  local o = {}
  for k, v in pairs(opts) do
    if k ~= 'search' then
      o[k] = v
    end
  end
  return o
end

-- The search of platform p: the --search flag's ('none' turns a recipe's off; 'halving' gives
-- a sweep the default search), else the platform's, else the recipe's; nil when none.
local function spec_of(self, p, opts)
  local flag = opts.search
  if flag == 'none' then
    return nil
  end
  local pd = self.platforms[p]
  local s = pd.search or self.search
  if flag ~= nil then
    if s and s.name == flag then
      return s
    end
    return search.normalize(flag)
  end
  return s
end

-- The candidates of a platform's grid runs: one per sweep point (its repeats pooled), in the
-- plan's order.
local function candidates_of(runs)
  local out, by_key = {}, {}
  for _, r in ipairs(runs) do
    local key = sweep.canonical(r.point or {})
    local c = by_key[key]
    if not c then
      c = { key = key, point = r.point, label = sweep.describe_point(r.point or {}),
        gpus = r.gpus, tokens_per_step = r.gbs * r.seq_len, grid_ids = {} }
      by_key[key] = c
      out[#out + 1] = c
    end
    c.grid_ids[#c.grid_ids + 1] = r.id
  end
  return out
end

-- The runs of each configuration in the grid: --repeats, else the recipe's, else the sweep's.
local function repeats_of(self, p, opts)
  local sw = self.platforms[p].sweep or self.sweep
  return opts.repeats or self.repeats or (sw and sw.repeats) or 1
end

-- A copy of the flags for the runs of rung `rung` of platform p, `iters` iterations each. Each
-- rung's runs are new runs of their configuration: the repeats after those of the rungs before
-- (rung r of a grid of R repeats runs repeats r x R + 1 to (r + 1) x R), so that every run has
-- its own id and directory, stable from one invocation to the next.
local function rung_opts(self, opts, p, iters, rung)
  local o = {}
  for k, v in pairs(opts) do
    if k ~= 'help' and k ~= 'json' then
      o[k] = v
    end
  end
  o.iters, o.only, o.search = iters, p, 'none'
  o.repeats = (rung + 1) * repeats_of(self, p, opts)
  return o
end

-- The runs of rung `rung` in a plan made with rung_opts.
local function rung_runs(self, plan, p, opts, rung)
  local first = rung * repeats_of(self, p, opts)
  local out = {}
  for _, r in ipairs(plan.platforms[p] and plan.platforms[p].runs or {}) do
    if r['repeat'] > first then
      out[#out + 1] = r
    end
  end
  return out
end

--- Plans the experiment (tp.experiment._plan) and, for each platform that searches, replaces
--- its runs with those of rung 0 and adds `search` to its entry: {spec, strategy, candidates,
--- rungs, budget, grid_runs}. A search that cannot be planned is an error finding.
---@param self table experiment
---@param opts? table
---@return table plan
function M.plan(self, opts)
  opts = opts or {}
  if opts.search ~= nil and opts.search ~= 'none' and opts.search ~= 'halving' then
    local plan = planning.plan(self, grid_opts_of(opts))
    plan.findings[#plan.findings + 1] = { severity = 'error', key = 'search', message =
      string.format("--search: '%s' is not one of halving, none", tostring(opts.search)) }
    plan.ok = false
    return plan
  end
  local plan = planning.plan(self, grid_opts_of(opts))
  local function add(severity, p, msg)
    plan.findings[#plan.findings + 1] = { severity = severity, key = 'search', platform = p,
      message = msg }
  end
  local changed, unswept = false, {}
  for _, p in ipairs(plan.order) do
    local entry = plan.platforms[p]
    local spec = spec_of(self, p, opts)
    if spec and #entry.runs > 0 then
      local cands = candidates_of(entry.runs)
      local s, err = search.resolve(spec, config.get(entry.config, 'training.iters'))
      if not entry.sweep then
        -- The recipe's search (or --search) applies to the platforms that sweep; a platform's
        -- own search needs its sweep.
        unswept[#unswept + 1] = p
        if self.platforms[p].search then
          add('error', p, p .. ': search: the platform has no sweep to search')
        end
      elseif not s then
        add('error', p, p .. ': search: ' .. err)
      elseif #cands < 2 then
        add('warning', p, string.format('%s: search: the sweep leaves %d candidate: nothing to '
          .. 'search, the grid runs', p, #cands))
      else
        local b = search.budget(s, cands)
        local r0 = planning.plan(self, rung_opts(self, opts, p, b.rungs[1].iters, 0))
        for _, f in ipairs(r0.findings) do
          if f.severity == 'error' then
            add('error', p, string.format('%s: search rung 0 (%d iterations): %s', p,
              b.rungs[1].iters, f.message))
          end
        end
        entry.search = { spec = s, strategy = s.name, candidates = cands, rungs = b.rungs,
          budget = b, grid_runs = entry.runs }
        entry.runs = rung_runs(self, r0, p, opts, 0)
        changed = true
      end
    end
  end
  if not changed and #unswept > 0 and not self.platforms[unswept[1]].search then
    add('error', nil, string.format('search: no platform of the plan has a sweep to search (%s)',
      table.concat(unswept, ', ')))
  end
  if changed then
    plan.runs = {}
    for _, p in ipairs(plan.order) do
      for _, r in ipairs(plan.platforms[p].runs) do
        plan.runs[#plan.runs + 1] = r
      end
    end
  end
  local errors = 0
  for _, f in ipairs(plan.findings) do
    errors = errors + (f.severity == 'error' and 1 or 0)
  end
  plan.ok = errors == 0
  return plan
end

-- The record of a run, or nil and why it has none.
local function load_record(path)
  local json = require('tp.json')
  local fs = require('tp.fs')
  if not fs.exists(path) then
    return nil, path .. ': no record (the run left none)'
  end
  local rec, err = json.load_file(path)
  if not rec then
    return nil, tostring(err)
  end
  return rec
end

-- What a run cost in GPU-seconds: its GPUs x its wall time from start to end (the GPUs are
-- held from the launch on), else x the sum of its step times.
local function gpu_seconds_of(rec, gpus)
  local src = rec.source or {}
  local times = require('tp.parse.time')
  local a, b = times.parse(src.started_at), times.parse(src.finished_at)
  if a and b and b >= a then
    return gpus * (b - a)
  end
  local t = 0
  for _, x in ipairs(rec.step_times) do
    t = t + x
  end
  return gpus * t
end

-- The JSON document of a search (tplua.search/1).
local function document(plan, platform, s, cands, result, state)
  local json = require('tp.json')
  local labels = {}
  for _, c in ipairs(cands) do
    labels[c.key] = c.label
  end
  local function entry_list(list, fields)
    local out = {}
    for i, e in ipairs(list) do
      local o = { candidate = labels[e.key] }
      for _, f in ipairs(fields) do
        local v = e[f]
        if v == math.huge then
          v = nil -- unbounded: absent
        end
        o[f] = v
      end
      out[i] = o
    end
    return json.array(out)
  end
  local rungs = {}
  for i, r in ipairs(result.rungs) do
    rungs[i] = {
      rung = r.rung, iters = r.iters, budget = r.budget,
      run_to_run = r.between and { cv = math.sqrt(r.between.cv2), df = r.between.df } or nil,
      ranking = entry_list(r.ranking, { 'estimate', 'lo', 'hi', 'failed', 'iters' }),
      kept = entry_list(r.kept, { 'why', 'estimate', 'lo', 'hi' }),
      dropped = entry_list(r.dropped, { 'reason', 'detail', 'estimate', 'lo', 'hi',
        'threshold' }),
    }
  end
  local candidates = {}
  for i, c in ipairs(cands) do
    candidates[i] = {
      candidate = c.label, point = c.point, gpus = c.gpus, tokens_per_step = c.tokens_per_step,
      estimate = c.estimate, lo = c.lo, hi = c.hi ~= math.huge and c.hi or nil,
      iters = c.iters, runs = json.array(c.run_ids or {}), gpu_seconds = c.gpu_seconds,
      dropped = c.dropped,
    }
  end
  local grid = result.grid_gpu_seconds
  return {
    schema = M.SCHEMA,
    experiment = plan.experiment,
    platform = platform,
    state = state,
    strategy = s.name,
    metric = s.metric,
    settings = { eta = s.eta, min_iters = s.min_iters, max_iters = s.max_iters,
      budget = s.budget, level = s.level },
    best = result.best and result.best.label or nil,
    -- Whether the best is separated from the runner-up at the intervals' level.
    runner_up = search.separation(result.best, cands),
    spent_gpu_seconds = result.spent_gpu_seconds,
    grid_gpu_seconds = grid,
    fraction = grid and grid > 0 and result.spent_gpu_seconds / grid or nil,
    spent_gpu_iters = result.spent_gpu_iters,
    grid_gpu_iters = result.budget and result.budget.grid,
    candidates = json.array(candidates),
    rungs = json.array(rungs),
  }
end

local function write_document(path, doc)
  local json = require('tp.json')
  local ok, err = require('tp.fs').write_atomic(path, json.encode(doc, { pretty = true,
    sort_keys = true }) .. '\n')
  if not ok then
    io.stdout:write(string.format('search: %s: %s\n', path, tostring(err)))
  end
end

--- The best configuration of each platform whose search in `dir` is complete, in the shape of
--- tp.experiment._summary's best_per_platform: {key (the id of its rung-0 run without the
--- repeat), records (the records of its longest runs, those of the last rung it ran: runs of
--- one length, as the fairness audit wants them), tps (their tokens/s/GPU), tps_mean, configs
--- (the candidates), search (the document's path), candidate (its entry in the document)}.
--- Platforms without one are absent.
---@param dir string results directory
---@param records table[] loaded records (with `_path`)
---@return table<string, table>
function M.best_records(dir, records)
  local out = {}
  local by_id = {}
  for _, rec in ipairs(records) do
    local id = type(rec.run_id) == 'string' and rec.run_id
      or (rec._path or ''):match('([^/]+)%.json$')
    if id then
      by_id[id] = rec
    end
  end
  for _, s in ipairs((require('tp.present.search').find({ dir }))) do
    local doc = s.doc
    if doc.state == 'complete' and doc.best and doc.platform then
      for _, c in ipairs(doc.candidates or {}) do
        if c.candidate == doc.best and c.runs and c.runs[1] then
          local g = { key = tostring(c.runs[1]):gsub('%-r%d+$', ''), records = {}, tps = {},
            configs = #doc.candidates, search = s.path, candidate = c }
          local longest = 0
          for _, id in ipairs(c.runs) do
            local steps = by_id[id] and #(by_id[id].step_times or {}) or 0
            longest = math.max(longest, steps)
          end
          local sum = 0
          for _, id in ipairs(c.runs) do
            local rec = by_id[id]
            if rec and #(rec.step_times or {}) == longest then
              g.records[#g.records + 1] = rec
              local v = (rec.performance_metrics or {}).tokens_per_second_per_gpu
              if type(v) == 'number' then
                g.tps[#g.tps + 1] = v
                sum = sum + v
              end
            end
          end
          g.tps_mean = #g.tps > 0 and sum / #g.tps or nil
          if #g.records > 0 then
            out[doc.platform] = g
          end
        end
      end
    end
  end
  return out
end

--- Runs the search of `platform` in `plan` (M.plan's): each rung's runs through
--- tp.experiment._execute (tp.campaign: journal, resume), ranked from their records; writes
--- <results>/search-<platform>.json after every rung and at the end, and prints what was
--- decided. Returns {exit_code, search = the document} (exit code 130/143 when interrupted, 1
--- when no candidate could be measured), or nil, message when the runs cannot be started.
---@param self table experiment
---@param plan table
---@param platform string
---@param opts table the flags the plan was made with
---@param exec_opts? table passed to the campaign (concurrency)
---@param extra? table passed to tp.experiment._execute (preflight)
---@return table|nil result
---@return string? err
function M.execute(self, plan, platform, opts, exec_opts, extra)
  local entry = plan.platforms[platform]
  local info = entry.search
  local s = info.spec
  local fs = require('tp.fs')
  local present = require('tp.present.search')
  local path = fs.join(plan.results_abs, 'search-' .. platform .. '.json')
  local made, merr = fs.mkdir_p(plan.results_abs)
  if not made then
    return nil, merr
  end
  local cands = {}
  for i, c in ipairs(info.candidates) do
    cands[i] = { key = c.key, point = c.point, label = c.label, gpus = c.gpus,
      tokens_per_step = c.tokens_per_step, run_ids = {} }
  end
  local failure, exit_code
  -- Every rung's runs in one summary, in tp.campaign's shape (runs by id, results).
  local summary = { runs = {}, results = plan.results_abs }
  local function measure(list, iters, rung, ctx)
    -- What was decided so far, on disk before the rung's runs start.
    write_document(path, document(plan, platform, s, cands, { rungs = ctx.rungs,
      budget = info.budget, spent_gpu_seconds = ctx.spent_gpu_seconds,
      spent_gpu_iters = ctx.spent_gpu_iters, grid_gpu_seconds = rung > 0
      and ctx:grid_estimate() or nil }, 'running'))
    local rp = planning.plan(self, rung_opts(self, opts, platform, iters, rung))
    local out = {}
    local wanted = {}
    for _, c in ipairs(list) do
      wanted[c.key] = c
    end
    local sub = { experiment = plan.experiment, results_abs = plan.results_abs, runs = {} }
    for _, r in ipairs(rung_runs(self, rp, platform, opts, rung)) do
      local c = wanted[sweep.canonical(r.point or {})]
      if c then
        sub.runs[#sub.runs + 1] = r
      end
    end
    io.stdout:write(string.format('\nsearch rung %d: %d candidate%s x %d iterations\n', rung,
      #list, #list == 1 and '' or 's', iters))
    if not rp.ok then
      for _, c in ipairs(list) do
        out[c.key] = { failed = 'the plan of this rung has errors' }
      end
      return out
    end
    local result, err = run.execute(sub, platform, exec_opts, extra)
    if not result then
      failure = err
      return { interrupted = true }
    end
    for id, r in pairs(result.runs or {}) do
      summary.runs[id] = r
    end
    if result.signal then
      exit_code = result.exit_code
      return { interrupted = true }
    end
    for _, r in ipairs(sub.runs) do
      local c = wanted[sweep.canonical(r.point or {})]
      local m = out[c.key] or { runs = {} }
      out[c.key] = m
      c.run_ids[#c.run_ids + 1] = r.id
      local rec, why = load_record(fs.join(plan.results_abs, r.id .. '.json'))
      -- A run stopped early by its stop rule (stop = {ci =}) measured what it had to.
      if rec and rec.status ~= 'failed' and type(rec.step_times) == 'table'
        and #rec.step_times > 0 then
        m.runs[#m.runs + 1] = { id = r.id, step_times = rec.step_times,
          gpu_seconds = gpu_seconds_of(rec, c.gpus or 1) }
      else
        m.failed = rec and (rec.failure_reason or rec.stopped_by or rec.status) or why
      end
    end
    return out
  end
  local ok, result = pcall(search.run, s, cands, measure)
  if not ok then
    return nil, 'search: ' .. tostring(result)
  end
  if failure then
    write_document(path, document(plan, platform, s, cands, result, 'interrupted'))
    return nil, failure
  end
  local state = result.interrupted and 'interrupted' or 'complete'
  local doc = document(plan, platform, s, cands, result, state)
  write_document(path, doc)
  io.stdout:write('\n')
  for _, line in ipairs(present.lines(doc)) do
    io.stdout:write(line, '\n')
  end
  summary.search = doc
  summary.exit_code = result.interrupted and (exit_code or 130) or (result.best and 0 or 1)
  return summary
end

return M
