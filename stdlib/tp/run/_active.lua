-- tp.run._active: the run object (tp.run.Active) while its command runs: output lines fed to
-- the log parser, the live state, and the early-abort rules (NaN, OOM, NCCL, stall) that stop it.
local base = require('tp.run._base')

local is_finite = base.is_finite
local mono = base.clock

-- Longest line handed to the parser in one piece (its own limit is 1 MiB: longer lines are
-- skipped with a `long_line` diagnostic; cut here so that memory stays bounded).
local MAX_LINE = 1024 * 1024 + 1

local FAILURE_KINDS = { oom = 'oom', nccl_timeout = 'nccl', nccl_error = 'nccl' }

---@class tp.run.Active
local Active = {}
Active.__index = Active

-- Which rule a diagnostic triggers, if any: 'oom' | 'nccl' | 'nan' | nil.
local function rule_of(d)
  if d.kind == 'nan_loss' then
    return 'nan'
  end
  return FAILURE_KINDS[d.kind]
end

local STOPPED_BY = { nan = 'nan_loss', oom = 'oom', nccl = 'nccl_failure', stall = 'stall' }

--- Why tplua stops a run that has given its answer: not a failure (tp.run._stop).
Active.GOOD_STOPS = { converged_ci = true, drift = true, max_iters = true }

-- Asks the child to stop (SIGTERM to its group, SIGKILL after the grace) and notes why.
function Active:stop(rule, message, line)
  if self.stopped_by or self.exited then
    return
  end
  self.stopped_by = STOPPED_BY[rule] or rule
  self.stop_message = message
  self.stop_line = line
  if self.proc and not self.proc:done() then
    self.proc:kill()
  end
  if self.ctx.view then
    self.ctx.view:note(string.format('%s: stopping: %s', self.run.id, message))
  end
end

-- Looks at the parser's diagnostics so far. The list holds one entry per kind, which may be
-- updated in place when a more severe match of the same kind comes (tp.log Stream:diagnostics),
-- so all of it is looked at each time (a few entries); only errors trigger a rule.
function Active:check_diagnostics()
  if self.stopped_by then
    return
  end
  local list = self.stream:diagnostics()
  for _, d in ipairs(list or {}) do
    local rule = rule_of(d)
    if rule and self.abort[rule] and d.severity == 'error' then
      self:stop(rule, string.format('%s%s', d.message or d.kind,
        d.line and (' (log line ' .. tostring(d.line) .. ')') or ''), d.line)
      return
    end
  end
end

-- Updates the live state from new records and applies the NaN rule.
function Active:on_records(recs)
  local st = self.state
  for _, r in ipairs(recs) do
    if math.type(r.iteration) == 'integer' then
      if st.iteration == nil or r.iteration > st.iteration then
        self.last_progress = mono()
      end
      st.iteration = r.iteration
    end
    st.records = st.records + 1
    -- When each record arrived: the steady-state window's start and end in time, for its
    -- energy (measured_window_energy).
    self.record_times = self.record_times or {}
    self.record_times[st.records] = mono()
    st.total = r.train_iters or st.total
    if is_finite(r.step_time_s) then
      self:check_stop(r)
      local w = self.window
      w[#w + 1] = r.step_time_s
      if #w > 10 then
        table.remove(w, 1)
      end
      st.step_time_s = r.step_time_s
    end
    if r.loss ~= nil then
      st.loss = r.loss
    end
    local gbs = r.global_batch_size or self.run.gbs
    if is_finite(st.step_time_s) and st.step_time_s > 0 and gbs and self.run.seq_len
      and self.run.gpus then
      st.tokens_per_s_per_gpu = gbs * self.run.seq_len / st.step_time_s / self.run.gpus
    elseif is_finite(r.tokens_per_s_per_gpu) then
      st.tokens_per_s_per_gpu = r.tokens_per_s_per_gpu
    end
    if self.abort.nan then
      local bad = (type(r.loss) == 'number' and not is_finite(r.loss)) and 'loss'
        or (r.loss == nil and type(r.grad_norm) == 'number' and not is_finite(r.grad_norm)
          and (r.skipped_iterations or 0) == 0 and 'grad norm')
      if bad then
        self:stop('nan', string.format('%s is %s at iteration %s', bad,
          tostring(bad == 'loss' and r.loss or r.grad_norm), tostring(r.iteration)), r.line)
      end
    end
  end
  if #self.window > 0 then
    local sum = 0
    for _, x in ipairs(self.window) do
      sum = sum + x
    end
    st.mean_step_s = sum / #self.window
    if st.total and st.iteration then
      st.eta_s = math.max(0, st.total - st.iteration) * st.mean_step_s
    end
  end
  if #recs > 0 and self.ctx.view then
    self.ctx.view:progress(self.run.id, st)
  end
end

-- The stop rule (tp.run._stop): each step time goes to the monitor; once it says the mean is
-- known (or max_iters is reached), the run is stopped through its launcher like any early stop.
function Active:check_stop(r)
  local mon = self.stopper
  if not mon or mon.verdict or self.stopped_by or self.exited then
    return
  end
  local it = math.tointeger(r.iteration)
  local total = math.tointeger(self.state.total or self.run.total_iters)
  local verdict = mon:add(r.step_time_s, it, total)
  if verdict and not mon.rule.observe and it and total and it >= total then
    -- Decided on the run's last planned iteration: nothing is left to save, and a SIGTERM now
    -- would only cut its own ending short (or race with it): it ends by itself, not stopped.
    verdict.at_end = true
  elseif verdict and not mon.rule.observe then
    self:stop(verdict.reason, require('tp.run._stop').message(verdict), r.line)
  elseif verdict and self.ctx.view then
    self.ctx.view:note(string.format('%s: stop rule (observed only): %s', self.run.id,
      require('tp.run._stop').message(verdict)))
  end
end

function Active:feed(text)
  local recs = self.stream:feed(text)
  if recs and #recs > 0 then
    self:on_records(recs)
  end
  self:check_diagnostics()
end

-- tp.proc on_line: whole lines go to the parser; pieces of an overlong line are joined (up to
-- MAX_LINE bytes, the rest dropped) so that stdout and stderr lines never interleave mid-line.
function Active:on_line(stream, line, partial)
  if self.run.iterations == false then
    -- A command that prints no iteration (a microbenchmark) shows progress by its output.
    self.last_progress = mono()
  end
  if self.run.launcher == 'slurm' and not partial and not self.pending[stream] then
    self:on_slurm_line(line)
  end
  local pend = self.pending[stream]
  if partial or pend then
    pend = pend or { n = 0 }
    self.pending[stream] = pend
    if pend.n < MAX_LINE then
      local piece = line:sub(1, MAX_LINE - pend.n)
      pend[#pend + 1] = piece
      pend.n = pend.n + #piece
    end
    if partial then
      return
    end
    self.pending[stream] = nil
    line = table.concat(pend)
  end
  if self.run.iterations == false and line:find('%S') then
    -- Its last line is its live state (tp.live shows it where an iteration would be).
    self.state.line = line:gsub('%s+$', ''):sub(1, 100)
    if self.ctx.view then
      self.ctx.view:progress(self.run.id, self.state)
    end
  end
  self:feed(line .. '\n')
end

--- Periodic check (called by the owner's timer): the stall rule.
---@param now number monotonic seconds
function Active:tick(now)
  local minutes = self.abort.stall_minutes
  if self.queued then
    -- Time in the scheduler's queue is not a stall.
    self.last_progress = now
  end
  if minutes and not self.exited and not self.stopped_by
    and now - self.last_progress > minutes * 60 then
    local what = self.state.iteration and ('iteration ' .. self.state.iteration) or 'the start'
    self:stop('stall', string.format('no new %s for %s minutes (last progress: %s)',
      self.run.iterations == false and 'output' or 'iteration',
      (string.format('%.4g', minutes)), what))
  end
end

--- Asks the run to stop because tplua was interrupted (SIGTERM to its group, then SIGKILL).
function Active:interrupt(why)
  if self.exited then
    return
  end
  self.interrupted = why or 'SIGINT'
  if self.proc and not self.proc:done() then
    self.proc:kill()
  end
end

function Active:done()
  return self.exited == true
end

return Active
