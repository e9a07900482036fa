-- tp.run._resume: resuming a campaign: what to do with each run (from the journal and the
-- records), and clearing what a previous attempt left (files, processes, temps, the lock).
local fs = require('tp.fs')
local json = require('tp.json')
local proc = require('tp.proc')
local run_mod = require('tp.run')
local secrets = require('tp.secrets')
local lock_mod = require('tp._lock')
local journal_mod = require('tp.run._journal')

local M = {}

--- The lock file's name inside the results directory.
M.LOCK = '.lock'

-- The journal's last end-or-start event of each run id (planned events do not count).
local function last_events(journal)
  local last = {}
  for _, ev in ipairs(journal.events) do
    if ev.id and ev.event ~= 'planned' then
      last[ev.id] = ev
    end
  end
  return last
end

-- Loads a record and says whether it is a complete record of this run with this hash.
local function check_record(path, id, hash)
  if not fs.exists(path) then
    return false, 'missing'
  end
  local rec, err = json.load_file(path)
  if type(rec) ~= 'table' then
    return false, 'unreadable (' .. tostring(err) .. ')'
  end
  if not require('tp.parse.record').readable(rec.schema) or rec.run_id ~= id then
    return false, 'not a run record of this run'
  end
  if rec.config_hash ~= hash then
    return false, 'written for another configuration', rec
  end
  return true, nil, rec
end

local function short(h)
  return type(h) == 'string' and h:sub(1, 12) or tostring(h)
end

--- Says, for each run, what executing the campaign now would do, from the journal and the
--- files in the results directory: {id=, state=, action = 'run'|'skip', reason=, hash=,
--- last = journal event or nil}. `state` is 'new', 'finished', 'failed', 'interrupted'
--- (includes runs whose tplua died), 'changed' (config hash differs from the one that ran) or
--- 'record_missing'.
---@param self tp.Campaign
---@param opts? {results?: string, retry_failed?: boolean}
---@return table[] plan
---@return table journal as read_journal returns it
function M.status(self, opts)
  opts = opts or {}
  local results = opts.results or self.results
  local journal, jerr = journal_mod.read_journal(fs.join(results, journal_mod.JOURNAL))
  if not journal then
    error(jerr, 0)
  end
  local last = last_events(journal)
  local scrubber = opts._scrubber or secrets.new(self:_envs())
  local plan = {}
  for _, r in ipairs(self.runs) do
    local h = run_mod.hash(r, scrubber)
    local ev = last[r.id]
    local p = { id = r.id, hash = h, last = ev, run = r }
    local rec_path = fs.join(results, r.id .. '.json')
    if ev == nil then
      p.state, p.action = 'new', 'run'
    elseif ev.hash ~= h and (ev.event == 'finished' or ev.event == 'failed') then
      p.state, p.action = 'changed', 'run'
      p.reason = string.format('its configuration changed since it %s (hash %s, now %s)',
        ev.event, short(ev.hash), short(h))
    elseif ev.event == 'finished' then
      local ok, why = check_record(rec_path, r.id, h)
      if ok then
        p.state, p.action = 'finished', 'skip'
      else
        p.state, p.action = 'record_missing', 'run'
        p.reason = string.format('the journal says finished but %s.json is %s', r.id, why)
      end
    elseif ev.event == 'failed' then
      p.state = 'failed'
      if opts.retry_failed then
        p.action, p.reason = 'run', 'failed before (' .. tostring(ev.reason) .. '): retrying'
      else
        p.action = 'skip'
        p.reason = 'failed before (' .. tostring(ev.reason) .. '); retry_failed runs it again'
      end
    else  -- 'started' without an end (tplua died) or 'interrupted'
      p.state, p.action = 'interrupted', 'run'
      -- A record of this very attempt means the run ended but its journal line was lost.
      local ok, _, rec = check_record(rec_path, r.id, h)
      if ok and ev.event == 'started' and rec.campaign and rec.campaign.attempt == ev.attempt then
        p.recovered = rec.status == 'completed' and 'finished' or 'failed'
        p.state = p.recovered
        p.action = (p.recovered == 'failed' and opts.retry_failed) and 'run' or 'skip'
        p.reason = string.format('its record was written but the journal line was lost: %s',
          p.recovered)
      elseif ev.event == 'started' then
        p.reason = 'tplua stopped while it ran: running it again'
      else
        p.reason = 'interrupted (' .. tostring(ev.reason) .. '): running it again'
      end
    end
    plan[#plan + 1] = p
  end
  return plan, journal
end

-- Renames `path` to `path.<kind>-N` with the first free N; returns the new name or nil.
function M.move_aside(path, kind)
  if not fs.exists(path) then
    return nil
  end
  local n = 1
  while fs.exists(string.format('%s.%s-%d', path, kind, n)) do
    n = n + 1
  end
  local dest = string.format('%s.%s-%d', path, kind, n)
  local ok, err = os.rename(path, dest)
  if not ok then
    error(string.format('cannot keep %s as %s: %s', path, dest, tostring(err)), 0)
  end
  return dest
end

-- Sends a signal to a whole process group. tp.proc only signals its own children, so this uses
-- kill(1) (procps/util-linux: `kill -s SIG -- -PGID`), by argv, no shell.
local function signal_group(pgid, sig)
  local r = proc.run({ 'kill', '-s', sig, '--', '-' .. tostring(pgid) }, { timeout = 10 })
  return r and r.code == 0
end

-- Makes sure no process of a previous attempt's group is alive before its run starts again:
-- the group recorded in the journal's started event is checked in /proc (same boot, and the
-- leader, when alive, must have the recorded start time, so that a reused pid is left alone);
-- what remains gets SIGTERM, then SIGKILL. Returns true, or nil and a message.
function M.ensure_group_gone(ev, grace, note)
  local pgid = math.tointeger(ev.pgid)
  if not pgid or pgid <= 1 then
    return true
  end
  if ev.boot_id and ev.boot_id ~= run_mod.boot_id() then
    return true  -- the machine rebooted since: nothing of it can be left
  end
  local members = proc.group_members(pgid)
  if not members or #members == 0 then
    return true
  end
  local leader = run_mod.proc_stat(pgid)
  if leader and leader.pgid == pgid and ev.starttime and leader.starttime ~= ev.starttime then
    note(string.format('%s: process group %d now belongs to another program: left alone', ev.id,
      pgid))
    return true
  end
  note(string.format('%s: %d process(es) of its previous attempt (group %d) still run: ' ..
    'stopping them first', ev.id, #members, pgid))
  signal_group(pgid, 'TERM')
  if proc.wait_gone(members, grace) then
    return true
  end
  signal_group(pgid, 'KILL')
  local ok, err = proc.wait_gone(members, 10)
  if not ok then
    return nil, string.format('processes of its previous attempt (group %d) survive SIGKILL: %s',
      pgid, tostring(err))
  end
  return true
end

-- Removes temporary files left by atomic writes that a crash interrupted (<name>.tmp.XXXXXX).
function M.remove_stale_temps(results, note)
  local entries = fs.list(results) or {}
  for _, e in ipairs(entries) do
    if e.type == 'file' and e.name:match('%.tmp%.[%w]+$') then
      os.remove(fs.join(results, e.name))
      note(string.format('removed %s (left by an interrupted write)', e.name))
    end
  end
end

-- Takes the results directory's lock: at once when its holder is alive; when the holder is gone
-- but the lock is still held (a child of it, forked without exec, has not exited yet), waits up
-- to `wait` seconds for it to be released.
function M.take_lock(results, wait)
  local path = fs.join(results, M.LOCK)
  local lk, err, code = lock_mod.acquire(path, 0)
  if lk then
    return lk
  end
  if code ~= 'EBUSY' then
    return nil, err, code
  end
  local pid, alive = lock_mod.holder(path)
  if pid and alive then
    return nil, string.format('%s: another campaign is running in this directory (tplua pid ' ..
      '%d); wait for it to end or use another results directory', results, pid), 'EBUSY'
  end
  lk, err, code = lock_mod.acquire(path, wait)
  if lk then
    return lk
  end
  return nil, string.format('%s: the results directory is locked (%s); wait for the other ' ..
    'campaign to end or use another results directory', results, tostring(err)), code
end

return M
