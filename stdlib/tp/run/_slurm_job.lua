-- tp.run._slurm_job: runs launched as Slurm jobs (methods of tp.run.Active): the status lines
-- of `tplua slurm job`, and settling the job once its process has exited.
local fs = require('tp.fs')
local json = require('tp.json')
local proc = require('tp.proc')
local base = require('tp.run._base')
local Active = require('tp.run._active')

local mono = base.clock

-- Runs launched as Slurm jobs (tp.launch.slurm): `tplua slurm job DIR` submits and follows the
-- job; its status lines (stderr, 'tplua slurm: ...') reach on_line, and DIR/slurm.json holds the
-- job's id and final state.

-- A status line of `tplua slurm job`: the job id goes into the journal, queue states into the
-- live view.
function Active:on_slurm_line(line)
  local msg = line:match('^tplua slurm: (.*)$')
  if not msg then
    return
  end
  local submitted = msg:match('^submitted batch job (%d+)')
  local attached = msg:match('^attached to job (%d+)')
  local step = msg:match('^running in allocation (%d+)')
  local job = submitted or attached or step
  if job then
    self.slurm_job_id = math.tointeger(tonumber(job))
    self.queued = step == nil
    if self.ctx.journal then
      self.ctx.journal({ event = 'slurm_job', id = self.run.id, attempt = self.ctx.attempt,
        job_id = self.slurm_job_id, attached = attached ~= nil, step = step ~= nil })
    end
  end
  local state, why = msg:match('^job %d+ ([%u_]+)(.*)$')
  if state then
    self.queued = state == 'PENDING' or state == 'CONFIGURING' or state == 'REQUEUED'
    self.state.queue = self.queued and (state .. why) or nil
    if self.queued then
      self.last_progress = mono()
    end
  end
  if self.ctx.view and (job or state) then
    self.ctx.view:note(self.run.id .. ': slurm: ' .. msg)
  end
end

local function slurm_state_path(self)
  local slurm = require('tp.launch.slurm')
  return fs.join(base.files_dir(self.run, self.ctx.results), slurm.STATE)
end

-- After `tplua slurm job` exited: reads the job's state; a job still running (tplua stopped the
-- run: early abort, timeout, interrupt) is cancelled with scancel and followed to its end.
function Active:settle_slurm_job()
  local path = slurm_state_path(self)
  local ok, st = pcall(json.load_file, path)
  if not ok or type(st) ~= 'table' then
    return
  end
  self.slurm_job = st
  if st.finished or not st.job_id or st.mode == 'step' then
    -- A step of someone's allocation is stopped with its process, never by cancelling the job.
    return
  end
  local slurm = require('tp.launch.slurm')
  local r = proc.run({ 'scancel', tostring(st.job_id) }, { timeout = 60 })
  st.cancelled_by_tplua = r ~= nil and r.code == 0
  if self.ctx.journal then
    self.ctx.journal({ event = 'slurm_cancel', id = self.run.id, attempt = self.ctx.attempt,
      job_id = st.job_id, ok = st.cancelled_by_tplua,
      error = (r and r.code ~= 0) and r.stderr or json.null })
  end
  -- Follow the job to its end (bounded): its record then names the final state.
  local deadline = mono() + 60
  local waiter <close> = proc.loop()
  while mono() < deadline do
    local q = slurm.query(st.job_id)
    if not q or (slurm.STATES[q.state] and slurm.STATES[q.state].final) then
      if q then
        st.state, st.exit_code, st.nodelist, st.reason = q.state, q.exit_code, q.nodelist,
          q.reason
        st.finished = true
      end
      break
    end
    -- A poll of the scheduler at a modest pace, not a wait for something of ours.
    waiter:spawn({ argv = { 'sleep', '0.5' } })
    waiter:run()
  end
  st.ended_at = base.iso_time()
  fs.write_atomic(path, json.encode(st, { sort_keys = true }) .. '\n')
end

return Active
