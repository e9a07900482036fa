-- tp.campaign: a resumable series of runs. Runs them in order (or several at once in one tp.proc
-- loop), writes <results>/<id>.json (the run record, atomically) and <results>/<id>.log (the
-- raw output) for each, and keeps an append-only, fsync'd journal (<results>/journal.jsonl).
-- Executing the same campaign again resumes it: finished runs are skipped, interrupted ones run
-- again, failed ones only when asked. An exclusive lock on <results>/.lock keeps a second tplua
-- out of the same directory. docs/campaign.md is the guide.
--
-- The journal and the resume decisions live in private parts of tp.run:
--   tp.run._journal  JOURNAL, JOURNAL_VERSION, JOURNAL_MAX, read_journal, the journal writer
--   tp.run._resume   LOCK, Campaign:status, and clearing what a previous attempt left
local fs = require('tp.fs')
local proc = require('tp.proc')
local run_mod = require('tp.run')
local secrets = require('tp.secrets')
local journal_mod = require('tp.run._journal')
local resume = require('tp.run._resume')

local M = {}

-- The journal and the lock (tp.run._journal, tp.run._resume).
M.JOURNAL = journal_mod.JOURNAL
M.LOCK = resume.LOCK
M.JOURNAL_VERSION = journal_mod.JOURNAL_VERSION
M.JOURNAL_MAX = journal_mod.JOURNAL_MAX
M.read_journal = journal_mod.read_journal

---@class tp.Campaign
---@field name? string
---@field results string
---@field runs table[] checked runs
local Campaign = {}
Campaign.__index = Campaign
Campaign.__name = 'tp.Campaign'

local SPEC_TYPES = {
  results = 'string', runs = 'table', name = 'string', abort = 'table', concurrency = 'number',
  kill_grace = 'number', telemetry = 'boolean', telemetry_interval = 'number',
  progress_interval = 'number', progress_every = 'number', retry = 'any',
}

--- Outcomes a run can be retried on (a record's stopped_by), and the default policy: runs ended
--- by the machine rather than by the training (a preempted job, a failed node) run again, twice
--- at most.
M.RETRY_OUTCOMES = { 'preempted', 'node_failure', 'timeout', 'cancelled', 'nccl_failure', 'oom',
  'stall' }
M.RETRY_DEFAULT = { on = { 'preempted', 'node_failure' }, max = 2 }

-- Checks a retry policy ({ on = {...}, max = N } or false) and returns { on = set, max = N }.
local function retry_policy(v, level)
  if v == false then
    return { on = {}, max = 0 }
  end
  v = v == nil and M.RETRY_DEFAULT or v
  if type(v) ~= 'table' then
    error('tp.campaign: retry: { on = {...}, max = N } or false expected, got ' .. type(v), level)
  end
  for k in pairs(v) do
    if k ~= 'on' and k ~= 'max' then
      error(string.format("tp.campaign: retry: unknown field '%s' (on, max)", tostring(k)), level)
    end
  end
  local max = v.max or M.RETRY_DEFAULT.max
  if math.type(max) ~= 'integer' or max < 0 then
    error('tp.campaign: retry.max: a whole number >= 0 expected, got ' .. tostring(max), level)
  end
  local on = {}
  for i, o in ipairs(v.on or M.RETRY_DEFAULT.on) do
    local known = false
    for _, k in ipairs(M.RETRY_OUTCOMES) do
      known = known or k == o
    end
    if not known then
      error(string.format("tp.campaign: retry.on[%d]: '%s' is not one of %s", i, tostring(o),
        table.concat(M.RETRY_OUTCOMES, ', ')), level)
    end
    on[o] = true
  end
  return { on = on, max = max }
end

local EXEC_TYPES = {
  results = 'string', retry_failed = 'boolean', quiet = 'boolean', concurrency = 'number',
  abort = 'table', tty = 'boolean', progress_interval = 'number', progress_every = 'number',
  out = 'userdata', telemetry = 'boolean', telemetry_interval = 'number', kill_grace = 'number',
  lock_wait = 'number',
}

local function check_fields(what, t, spec, level)
  for k, v in pairs(t) do
    local want = spec[k]
    if not want then
      error(string.format("%s: unknown field '%s'", what, tostring(k)), level + 1)
    end
    if want ~= 'any' and type(v) ~= want then
      error(string.format('%s: %s: %s expected, got %s', what, k, want, type(v)), level + 1)
    end
  end
end

--- Creates a campaign. Each run is checked at once (unknown fields, types, duplicate ids raise
--- here, naming the run). `tp.campaign{...}` is the same as `tp.campaign.new{...}`.
---```lua
---local c = tp.campaign {
---  results = 'output/sweep',
---  runs = {
---    { id = 'gbs64', argv = { 'python3', 'train.py', '--gbs', '64' }, gbs = 64, seq_len = 2048,
---      gpus = 8, parser = 'megatron', timeout = 3600 },
---  },
---}
---local summary = c:execute({ concurrency = 1 })
---```
---@class tp.campaign.Spec
---@field results string results directory
---@field runs table[] the runs (docs/campaign.md, "The run table")
---@field name? string experiment name written in the records
---@field abort? table early-abort rules (tp.run.ABORT_DEFAULTS)
---@field concurrency? integer runs at once (default 1)
---@field kill_grace? number seconds from SIGTERM to SIGKILL (default 5)
---@field telemetry? boolean sample GPUs when there are some (default true)
---@field telemetry_interval? number seconds between GPU readings (default 1)
---@field progress_interval? number plain view: seconds between progress lines (default 10)
---@field progress_every? integer plain view: a line every this many iterations too

---@param spec tp.campaign.Spec
---@return tp.Campaign
function M.new(spec)
  if type(spec) ~= 'table' then
    error('tp.campaign: table expected, got ' .. type(spec), 2)
  end
  check_fields('tp.campaign', spec, SPEC_TYPES, 2)
  if type(spec.results) ~= 'string' or spec.results == '' then
    error('tp.campaign: results: a directory path expected', 2)
  end
  if type(spec.runs) ~= 'table' then
    error('tp.campaign: runs: a list of runs expected', 2)
  end
  local runs, seen = {}, {}
  for i, r in ipairs(spec.runs) do
    local ok, checked = pcall(run_mod.check, r, 1)
    if not ok then
      error(string.format('tp.campaign: runs[%d]: %s', i, tostring(checked)), 2)
    end
    if seen[checked.id] then
      error(string.format("tp.campaign: runs[%d]: duplicate id '%s' (also runs[%d])", i,
        checked.id, seen[checked.id]), 2)
    end
    seen[checked.id] = i
    runs[i] = checked
  end
  if spec.abort then
    run_mod.abort_rules(spec.abort)
  end
  local policy = retry_policy(spec.retry, 3)
  local self = setmetatable({}, Campaign)
  for k, v in pairs(spec) do
    self[k] = v
  end
  self.runs = runs
  self.retry_policy = policy
  return self
end

setmetatable(M, {
  __call = function(_, spec)
    local ok, c = pcall(M.new, spec)
    if not ok then
      error(c, 2)
    end
    return c
  end,
})

--- Returns true when `v` is a campaign (made by tp.campaign).
---@param v any
---@return boolean
function M.is_campaign(v)
  return type(v) == 'table' and getmetatable(v) == Campaign
end

function Campaign:__tostring()
  return string.format('tp.Campaign (%s%d runs, results %s)',
    self.name and (self.name .. ', ') or '', #self.runs, self.results)
end

-- What executing the campaign now would do for each run (tp.run._resume).
Campaign.status = resume.status

-- The env tables of every run (for the secret scrubber).
function Campaign:_envs()
  local envs = {}
  for _, r in ipairs(self.runs) do
    envs[#envs + 1] = r.env or {}
  end
  return envs
end

-- ---------------------------------------------------------------------------------------------
-- Execution

local SIGNAL_CODES = { SIGINT = 130, SIGTERM = 143 }

-- Whether an error is the host's SIGINT ("interrupted", raised by the hook of lua/tplua.c,
-- lstop, with luaL_error's position prefix) rather than a failure to report.
local function is_host_interrupt(err)
  local hok, host = pcall(require, 'tp._host')
  if not (hok and type(host) == 'table' and host.interrupted()) then
    return false
  end
  local text = tostring(err)
  return text == 'interrupted' or text:match(':%d+: interrupted$') ~= nil
end

---@class tp.campaign.ExecuteOpts
---@field results? string results directory (default: the campaign's)
---@field retry_failed? boolean run again the runs that failed before (default false)
---@field quiet? boolean no live view, no summary (default false)
---@field concurrency? integer runs at once, in one tp.proc loop (default 1)
---@field abort? table early-abort rules (tp.run.ABORT_DEFAULTS; default the campaign's)
---@field tty? boolean force the terminal (redraw) or plain view (default: detected)
---@field progress_interval? number plain view: seconds between progress lines (default 10)
---@field progress_every? integer plain view: a line every this many iterations too
---@field out? file* where the view writes (default io.stdout)
---@field telemetry? boolean sample GPUs when there are some (default true)
---@field telemetry_interval? number seconds between GPU readings (default 1)
---@field kill_grace? number seconds from SIGTERM to SIGKILL when stopping a run (default 5)
---@field lock_wait? number seconds to wait for a lock left by a dead tplua's child (default 10)

---@class tp.campaign.Summary
---@field finished integer runs that finished in this execution
---@field failed integer runs that failed in this execution
---@field skipped integer runs not run (finished before, or failed before without retry_failed)
---@field interrupted integer runs stopped by an interruption (they run again next time)
---@field not_started integer runs not reached because of the interruption
---@field signal? string 'SIGINT' / 'SIGTERM' when tplua was interrupted
---@field exit_code integer 0 all good, 1 a run failed, 130/143 interrupted
---@field runs table<string, {status: string, reason?: string}>
---@field notes string[] what the resume found (partial journal line, changed configs, ...)

--- Executes the campaign: resumes from the journal, runs what is left, writes records, journal
--- and logs. Returns the summary, or nil, err, code when it cannot start (results directory
--- locked by another campaign, not writable).
---```lua
---local s = assert(c:execute({ results = 'output/sweep', concurrency = 2 }))
---if s.signal then os.exit(s.exit_code) end
---```
---@param opts? tp.campaign.ExecuteOpts
---@return tp.campaign.Summary|nil summary
---@return string? err
---@return string? code
function Campaign:execute(opts)
  if not M.is_campaign(self) then
    error('execute: call it as campaign:execute(opts)', 2)
  end
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('execute: options table expected, got ' .. type(opts), 2)
  end
  check_fields('execute', opts, EXEC_TYPES, 2)
  local concurrency = math.tointeger(opts.concurrency or self.concurrency or 1)
  if not concurrency or concurrency < 1 then
    error('execute: concurrency: a whole number >= 1 expected', 2)
  end
  local results = opts.results or self.results
  local st = {
    opts = opts,
    concurrency = concurrency,
    abort = run_mod.abort_rules(opts.abort or self.abort),
    results = results,
    notes = {},
    queue = {},
    active = {},
    summary = { finished = 0, failed = 0, skipped = 0, interrupted = 0, not_started = 0,
      runs = {}, results = results },
  }
  st.summary.notes = st.notes
  st.record = function(o)
    local summary = st.summary
    if o and not summary.runs[o.id] then
      summary.runs[o.id] = { status = o.status, reason = o.reason, stopped_by = o.stopped_by }
      summary[o.status] = (summary[o.status] or 0) + 1
    end
  end

  local ok, err, code = fs.mkdir_p(results)
  if not ok then
    return nil, err, code
  end
  local lk
  lk, err, code = resume.take_lock(results, opts.lock_wait or 10)
  if not lk then
    return nil, err, code
  end
  -- A journal that cannot be read is a reason not to start (nothing would be resumable).
  local jok, jerr, jcode = M.read_journal(fs.join(results, M.JOURNAL))
  if not jok then
    lk:close()
    return nil, jerr, jcode
  end
  st.scrubber = secrets.new(self:_envs())
  if opts.quiet ~= true then
    st.view = require('tp.run.live').new({ out = opts.out, tty = opts.tty,
      interval = opts.progress_interval or self.progress_interval,
      every = opts.progress_every or self.progress_every,
      scrub = function(text)
        return (st.scrubber:string(text))
      end })
  end
  st.loop = proc.loop()

  -- Everything from here runs protected: SIGINT outside the process loop arrives as an
  -- "interrupted" error from the host, and any error must still stop the runs and journal them.
  local main_ok, main_err = pcall(self._run_locked, self, st)
  if not main_ok then
    local by_sigint = is_host_interrupt(main_err)
    local sig = st.interrupted_by or st.loop:interrupted() or (by_sigint and 'SIGINT') or nil
    st.interrupted_by = sig or 'error'
    if sig then
      -- The same escalation as a signal caught inside the loop: forwarded, SIGTERM, SIGKILL
      -- (nothing new when the loop already forwarded it).
      st.loop:interrupt(sig)
    else
      for _, a in ipairs(st.active) do
        a:interrupt('error: ' .. tostring(main_err))
      end
    end
    -- The exits are delivered to the same on_exit (which records them) when it was set up.
    while st.loop:active() > 0 do
      st.loop:run()
    end
    for _, a in ipairs(st.active) do
      if a:done() then
        st.record(a:finalize())
      end
    end
    st.active = {}
    if not by_sigint then
      st.loop:close()
      if st.view then
        st.view:close()
      end
      lk:close()
      error(main_err, 0)
    end
  end
  st.loop:close()
  local summary = st.summary
  -- Runs still queued, except one that the interruption caught after it had started (its exit
  -- was recorded).
  summary.not_started = 0
  for _, p in ipairs(st.queue) do
    if not summary.runs[p.id] then
      summary.not_started = summary.not_started + 1
    end
  end
  summary.signal = st.interrupted_by
  if st.interrupted_by then
    summary.exit_code = SIGNAL_CODES[st.interrupted_by] or 130
  else
    summary.exit_code = summary.failed > 0 and 1 or 0
  end
  if st.view then
    st.view:close(M.format_summary(summary))
  end
  lk:close()
  return summary
end

-- The body of execute, under the lock and protected: resume decisions, then the process loop.
function Campaign:_run_locked(st)
  local opts, results, summary, view = st.opts, st.results, st.summary, st.view
  local scrubber = st.scrubber
  local function note(text)
    st.notes[#st.notes + 1] = text
    if view then
      view:note(text)
    end
  end

  local session = journal_mod.session_id()
  local journal_path = fs.join(results, M.JOURNAL)
  local journal = journal_mod.writer(journal_path, scrubber, session)

  resume.remove_stale_temps(results, note)
  local plan, jr = self:status({ results = results, retry_failed = opts.retry_failed,
    _scrubber = scrubber })
  for _, n in ipairs(jr.notes) do
    note(n)
  end
  if jr.partial then
    -- Cut the partial last line off (atomically), so that the next append starts a fresh line.
    local data = assert(fs.read(journal_path))
    local wok, werr = fs.write_atomic(journal_path, data:sub(1, jr.good_bytes))
    if not wok then
      error('cannot repair the journal: ' .. tostring(werr), 0)
    end
  end

  local queue = st.queue
  for _, p in ipairs(plan) do
    if p.recovered then
      journal({ event = p.recovered, id = p.id, hash = p.hash, attempt = p.last.attempt,
        recovered = true, reason = p.reason })
      note(string.format('%s: %s', p.id, p.reason))
    end
    if p.action == 'skip' then
      summary.skipped = summary.skipped + 1
      summary.runs[p.id] = { status = 'skipped', state = p.state, reason = p.reason }
      if p.state == 'failed' and not p.recovered then
        note(string.format('%s: skipped: %s', p.id, p.reason))
      end
    else
      queue[#queue + 1] = p
      if p.reason and p.state ~= 'new' then
        note(string.format('%s: %s', p.id, p.reason))
      end
    end
  end
  for _, p in ipairs(queue) do
    journal({ event = 'planned', id = p.id, hash = p.hash })
  end

  -- The probe costs a few child processes: only when something will run.
  local gpus = #queue > 0 and run_mod.probe_gpus({
    telemetry = opts.telemetry ~= false and self.telemetry ~= false }) or { devices = {} }
  local ctx_base = {
    results = results, scrubber = scrubber, abort = st.abort, gpus = gpus, view = view,
    kill_grace = opts.kill_grace or self.kill_grace, journal = journal,
    telemetry_interval = opts.telemetry_interval or self.telemetry_interval,
    experiment = self.name,
  }
  local grace = opts.kill_grace or self.kill_grace or proc.DEFAULT_KILL_GRACE

  -- Moves what a previous attempt left aside and makes sure none of its processes remain.
  local function prepare(p)
    local rec_path = fs.join(results, p.id .. '.json')
    local log_path = fs.join(results, p.id .. '.log')
    local kind = ({ changed = 'superseded', failed = 'failed', interrupted = 'interrupted',
      record_missing = 'previous', new = 'unjournaled' })[p.state] or 'previous'
    if p.last and p.last.event == 'started' then
      local gone, gerr = resume.ensure_group_gone(p.last, grace, note)
      if not gone then
        return nil, gerr
      end
    end
    local moved_rec = resume.move_aside(rec_path, p.state == 'interrupted' and 'stale' or kind)
    local moved_log = resume.move_aside(log_path, kind)
    if moved_rec then
      note(string.format('%s: kept the previous record as %s', p.id, fs.basename(moved_rec)))
    end
    if moved_log and p.state ~= 'interrupted' then
      note(string.format('%s: kept the previous log as %s', p.id, fs.basename(moved_log)))
    end
    return true
  end

  local loop, active = st.loop, st.active
  st.retries = {}
  local attempt_no = 0
  local fill
  -- A run's exit, delivered inside the loop: record it, then start the next one. Everything runs
  -- inside loop:run(), whose signal handlers stay installed throughout, so a SIGINT that arrives
  -- while a callback runs is still seen and forwarded.
  local function on_exit(a)
    -- The loop forwarded the signal to every running group at once and escalates it for each
    -- (SIGTERM, then SIGKILL): nothing to add here but to stop starting runs.
    local sig = a.result and a.result.interrupted
    if sig and not st.interrupted_by then
      st.interrupted_by = sig
    end
    local outcome = a:finalize()
    local policy = self.retry_policy
    local id = outcome.id
    if outcome.status == 'failed' and policy.on[outcome.stopped_by or '']
      and (st.retries[id] or 0) < policy.max and not st.interrupted_by
      and not loop:interrupted() then
      -- Not the training's fault (a preempted job, a failed node): run it again.
      st.retries[id] = (st.retries[id] or 0) + 1
      journal({ event = 'retry', id = id, hash = a.hash, attempt = a.ctx.attempt,
        stopped_by = outcome.stopped_by, retry = st.retries[id], max = policy.max })
      note(string.format('%s: %s: running it again (retry %d of %d)', id, outcome.stopped_by,
        st.retries[id], policy.max))
      table.insert(queue, 1, { id = id, hash = a.hash, run = a.run, state = 'failed' })
    else
      st.record(outcome)
    end
    for i, b in ipairs(active) do
      if b == a then
        table.remove(active, i)
        break
      end
    end
    fill()
  end
  ctx_base.on_exit = on_exit
  fill = function()
    while not st.interrupted_by and not loop:interrupted() and #active < st.concurrency
      and #queue > 0 do
      -- The run leaves the queue once it is started or recorded, so that an interruption in
      -- between (the host's SIGINT error) still counts it as not started.
      local p = queue[1]
      local pok, perr = prepare(p)
      if not pok then
        table.remove(queue, 1)
        journal({ event = 'failed', id = p.id, hash = p.hash, reason = perr })
        st.record({ id = p.id, status = 'failed', reason = perr })
        if view then
          view:finished(p.id, { status = 'failed', reason = perr })
        end
      else
        attempt_no = attempt_no + 1
        local ctx = setmetatable({ hash = p.hash,
          attempt = string.format('%s-%d', session, attempt_no) }, { __index = ctx_base })
        local a = run_mod.start(loop, p.run, ctx)
        table.remove(queue, 1)
        a.concurrent = st.concurrency
        if a:done() then
          st.record(a:finalize())  -- it could not start: no exit will be delivered
        else
          active[#active + 1] = a
        end
      end
    end
  end
  loop:timer(0.2, function()
    local now = run_mod.clock()
    for _, a in ipairs(active) do
      a:tick(now)
    end
    if view then
      view:tick()
    end
  end)
  fill()
  while #active > 0 do
    local res = assert(loop:run())
    if res.interrupted and not st.interrupted_by then
      st.interrupted_by = res.interrupted
    end
  end
  -- A signal caught while no run was active (during a tp.proc.run of the planning, say).
  st.interrupted_by = st.interrupted_by or loop:interrupted()
end

--- One line describing a summary: 'campaign: 3 finished, 1 failed, 2 skipped (results: out)'.
---@param s tp.campaign.Summary
---@return string
function M.format_summary(s)
  local parts = { string.format('%d finished', s.finished), string.format('%d failed', s.failed),
    string.format('%d skipped', s.skipped) }
  if s.interrupted > 0 or s.signal then
    parts[#parts + 1] = string.format('%d interrupted', s.interrupted)
  end
  if (s.not_started or 0) > 0 then
    parts[#parts + 1] = string.format('%d not started', s.not_started)
  end
  local text = 'campaign: ' .. table.concat(parts, ', ')
  if s.signal then
    text = text .. string.format(' (stopped by %s; run it again to resume)', s.signal)
  end
  if s.results then
    text = text .. ' (results: ' .. s.results .. ')'
  end
  return text
end

M.Campaign = Campaign

return M
