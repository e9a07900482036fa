-- tp.run._record: how a run ends (methods of tp.run.Active): its outcome (classify), its
-- unified record (build_record), and finalize, which writes the record and the journal event.
local fs = require('tp.fs')
local json = require('tp.json')
local record = require('tp.parse.record')
local digest = require('tp._digest')
local base = require('tp.run._base')
local telemetry = require('tp.run._telemetry')
local Active = require('tp.run._active')

local dig = base.dig
local mono = base.clock

-- The printable command of the run, secrets redacted.
local function describe(run, scrubber)
  local ok, launch = pcall(require, 'tp.launch')
  local text
  if ok and type(launch.describe) == 'function' then
    local dok, s = pcall(launch.describe, { argv = run.argv, env = run.env or {}, cwd = run.cwd })
    text = dok and s or nil
  end
  if not text then
    local words = {}
    for _, a in ipairs(run.argv) do
      words[#words + 1] = a:match('^[%w%._/=:,+-]+$') and a or ("'" .. a:gsub("'", "'\\''") .. "'")
    end
    text = table.concat(words, ' ')
  end
  return (scrubber:string(text))
end

-- Error diagnostics of a parsed log as one line, or nil.
local function log_errors(log)
  local parts = {}
  for _, d in ipairs(log.diagnostics or {}) do
    if d.severity == 'error' then
      parts[#parts + 1] = string.format('%s%s', d.message or d.kind,
        d.line and (' (line ' .. tostring(d.line) .. ')') or '')
    end
  end
  return #parts > 0 and table.concat(parts, '; ') or nil
end

local function exit_text(r)
  if r.timed_out then
    return 'timed out'
  elseif r.signal then
    return 'killed by ' .. tostring(r.signal)
  end
  return 'exit status ' .. tostring(r.code)
end

-- Decides the outcome: 'finished' | 'failed' | 'interrupted', the reason and stopped_by.
function Active:classify(log)
  local r = self.result
  local run = self.run
  if self.spawn_error then
    return 'failed', self.spawn_error
  end
  local last = log and log.records[#log.records]
  local total = (last and last.train_iters) or run.total_iters
  local complete = r.code == 0 and last ~= nil
    and (total == nil or (math.type(last.iteration) == 'integer' and last.iteration >= total))
  if self.stopped_by and Active.GOOD_STOPS[self.stopped_by] then
    -- Stopped by its stop rule (tp.run._stop): the run gave its answer, a success.
    return 'finished', nil
  end
  if self.stopped_by then
    return 'failed', self.stop_message
  end
  local job = self.slurm_job
  if job and job.finished and job.state and job.state ~= 'COMPLETED' and not self.interrupted
    and not r.interrupted then
    local s = require('tp.launch.slurm').STATES[job.state]
    local errs = log and log_errors(log)
    self.stopped_by = s and s.outcome ~= 'crash' and s.outcome or nil
    return 'failed', string.format('Slurm job %s ended %s (exit code %s)%s', tostring(job.job_id),
      job.state, tostring(job.exit_code), errs and ('; ' .. errs) or '')
  end
  if (self.interrupted or r.interrupted) and not complete then
    return 'interrupted', 'interrupted by ' .. tostring(self.interrupted or r.interrupted)
  end
  if r.timed_out then
    self.stopped_by = 'timeout'
    return 'failed', string.format('no exit after the %s s timeout', tostring(run.timeout))
  end
  if r.code ~= 0 then
    local errs = log and log_errors(log)
    -- Stopped from outside, as its log says (tp.log.outcome: a scheduler's or launcher's
    -- signal, a time limit, a failed node): the retry policy decides on these.
    local o = log and log.outcome
    if o == 'preempted' or o == 'timeout' or o == 'cancelled' or o == 'node_failure' then
      self.stopped_by = o
    end
    return 'failed', exit_text(r) .. (errs and ('; ' .. errs) or '')
  end
  if not last then
    if run.iterations == false then
      -- A command that prints no iteration (a microbenchmark) gave its answer when it exited 0
      -- and left its outputs.
      local missing = self:outputs_error()
      if missing then
        return 'failed', missing
      end
      return 'finished', nil
    end
    return 'failed', 'no iteration record in the output'
  end
  local errs = log_errors(log)
  if errs then
    return 'failed', errs
  end
  if not complete then
    return 'failed', string.format('exited 0 at iteration %s of %s', tostring(last.iteration),
      tostring(total))
  end
  return 'finished', nil
end

--- Reads the run's outputs (the JSON files its command left in its directory, `run.outputs`:
--- member name -> path relative to the run's files directory) into `self.outputs_read`
--- (member -> value) and `self.outputs_failed` (member -> message). A file missing, empty or
--- not JSON is a failure, named by its path.
function Active:read_outputs()
  self.outputs_read, self.outputs_failed = {}, {}
  if not self.run.outputs then
    return
  end
  local dir = base.files_dir(self.run, self.ctx.results)
  for member, rel in pairs(self.run.outputs) do
    local path = fs.join(dir, rel)
    local v, err = json.load_file(path)
    if v == nil or v == json.null then
      self.outputs_failed[member] = err or (path .. ': null instead of a JSON value')
    else
      self.outputs_read[member] = v
    end
  end
end

-- The outputs that could not be read, as one message (sorted by member), or nil.
function Active:outputs_error()
  local names = {}
  for member in pairs(self.outputs_failed or {}) do
    names[#names + 1] = member
  end
  if #names == 0 then
    return nil
  end
  table.sort(names)
  local parts = {}
  for i, member in ipairs(names) do
    parts[i] = string.format('output %s: %s', member, self.outputs_failed[member])
  end
  return table.concat(parts, '; ')
end

-- The catalog GPU of a run: its configured one (the run's `hardware`; tp.experiment sets the
-- platform's) first, else the probed device's match (probe_gpus). Returns the id or nil, and a
-- warning when the probe matched another catalog row than the configured one.
local function run_hardware(run, gpus_info)
  local probed = gpus_info.hardware
  local hw = run.hardware or probed
  if hw == nil then
    return nil
  end
  if not require('tp.catalog.hardware').get(hw) then
    return nil, string.format("hardware '%s' is not in tp.hardware: no gpu_info.hardware, no MFU",
      hw)
  end
  if run.hardware and probed and probed ~= run.hardware then
    return hw, string.format('the run is configured for %s but the probed GPU is %s (%s): '
      .. 'figures use %s', run.hardware, probed, tostring(gpus_info.devices[1].name),
      run.hardware)
  end
  return hw
end

-- gpu_info of a run that probed devices: the first device's name, how many the probe saw, the
-- catalog id (null when none matched) and the devices themselves. Without devices, nil:
-- tp.record.from_log then writes {device_name, device_count, hardware} from the catalog row
-- when there is one, as for tplua extract --gpu.
local function probed_gpu_info(gpus_info, hw)
  local devices = gpus_info.devices
  if #devices == 0 then
    return nil
  end
  return { device_name = devices[1].name or json.null, device_count = #devices,
    hardware = hw or json.null, devices = devices }
end

-- The precision the run's unified config asks for, when tp.record knows it (the fake trainer's
-- log, like many, does not show one): it fills training_config.precision and MFU's peak.
local function config_precision(run)
  local want = dig(run.config, 'training', 'precision')
  for _, p in ipairs(record.PRECISIONS) do
    if p == want then
      return want
    end
  end
  return nil
end

-- The energy of the steady-state window, from the GPUs' energy counters (or their power
-- integrated) between the arrival of the record before the window and of the window's last
-- record, divided by the tokens the window's iterations processed: J/token measured over the
-- same iterations as tokens/s (docs/campaign.md, "Telemetry").
function Active:measured_window_energy(rec)
  local s = self.stopped_sampler
  local em = rec.energy_metrics
  if not s or type(em) ~= 'table' or em.measured ~= true then
    return
  end
  local ss = dig(rec, 'performance_metrics', 'steady_state')
  local first, last = ss and math.tointeger(ss.first_record), ss and math.tointeger(ss.last_record)
  local times = self.record_times or {}
  local gbs, seq = self.run.gbs, self.run.seq_len
  if not (first and last and times[last] and gbs and seq) then
    em.joules_per_token = json.null
    em.joules_per_token_note = 'no steady-state window with record times, batch and length'
    return
  end
  local t_from = first > 1 and times[first - 1] or self.t0
  local prev = first > 1 and rec.records[first - 1] and rec.records[first - 1].iteration or 0
  local last_it = rec.records[last] and rec.records[last].iteration
  local iters = math.tointeger(last_it) and math.tointeger(prev) and (last_it - prev) or nil
  local joules, details = s:energy_j({ from = t_from, to = times[last] })
  if not joules or not iters or iters < 1 then
    em.joules_per_token = json.null
    em.joules_per_token_note = not joules and tostring(details)
      or 'the window has no whole iterations'
    return
  end
  local tokens = iters * gbs * seq
  em.joules_per_token = joules / tokens
  em.energy_basis = string.format('measured (%s) over the steady-state window, iterations '
    .. '%d-%d', details.method, prev + 1, last_it)
  em.window_energy_j = joules
  em.window_tokens = tokens
  em.window_s = times[last] - t_from
end

-- Builds the record of a run that ended (finished or failed).
function Active:build_record(log, status, reason)
  local run, ctx = self.run, self.ctx
  local scrubber = ctx.scrubber
  local sha, size
  if fs.is_file(self.log_path) then
    sha, size = digest.sha256_file(self.log_path)
  end
  local r = self.result or {}
  local gpus_info = ctx.gpus or { devices = {} }
  local hw, hw_warning = run_hardware(run, gpus_info)
  local opts = {
    gbs = run.gbs, seq_len = run.seq_len, gpus = run.gpus,
    path = self.log_name, sha256 = sha, size_bytes = size,
    command = describe(run, scrubber),
    exit_status = math.tointeger(r.code),
    started_at = self.started_at,
    finished_at = self.finished_at,
    platform = run.platform or gpus_info.platform or (#gpus_info.devices == 0 and 'cpu' or nil),
    framework = run.framework, model = run.model, dataset = run.dataset,
    methodology = run.methodology, ['repeat'] = run['repeat'],
    run_id = run.id, experiment = run.experiment or ctx.experiment,
    hardware = hw, gpu_info = probed_gpu_info(gpus_info, hw), precision = config_precision(run),
    iterations = run.iterations,
  }
  local rec = record.from_log(log, opts)
  if hw_warning then
    rec.diagnostics[#rec.diagnostics + 1] = { kind = 'config_override', severity = 'warning',
      message = hw_warning, line = json.null }
  end
  rec.status = status == 'finished' and 'completed' or 'failed'
  if status == 'finished' and run.iterations == false and rec.outcome == 'unknown' then
    -- No training log to say how it ended: it exited 0 with its outputs.
    rec.outcome = 'completed'
  end
  rec.stopped_by = self.stopped_by or json.null
  rec.failure_reason = reason or json.null
  if self.run.stop then
    self:stopping_record(rec, log)
  end
  if self.stopped_by and Active.GOOD_STOPS[self.stopped_by] then
    rec.diagnostics[#rec.diagnostics + 1] = { kind = 'stopped', severity = 'info',
      message = string.format('stopped by tplua (%s): %s', self.stopped_by,
        tostring(self.stop_message)), line = self.stop_line or json.null }
  elseif self.stopped_by then
    rec.diagnostics[#rec.diagnostics + 1] = { kind = 'stopped', severity = 'error',
      message = string.format('stopped by tplua (%s): %s', self.stopped_by, tostring(reason)),
      line = self.stop_line or json.null }
  elseif status == 'failed' then
    rec.diagnostics[#rec.diagnostics + 1] = { kind = 'run_failed', severity = 'error',
      message = tostring(reason), line = json.null }
  end
  rec.training_config.unified = run.config and scrubber:value(run.config) or json.null
  -- The dataset's identity, when its files are reachable from here: the audit compares
  -- fingerprints across runs (docs/data.md).
  local prefix, tokenizer
  if type(run.config) == 'table' then
    prefix, tokenizer = require('tp.frameworks').dataset_prefix(run.config)
  end
  if prefix then
    local ok, info = pcall(require('tp.data').describe, prefix, { name = run.dataset
      or prefix:match('[^/]+$'), seq_len = run.seq_len, tokenizer = tokenizer })
    rec.dataset = ok and info or { prefix = prefix, error = tostring(info) }
    if rec.dataset.error then
      rec.diagnostics[#rec.diagnostics + 1] = { kind = 'dataset_unverified',
        severity = 'warning', line = json.null, message = 'dataset not fingerprinted: '
          .. tostring(rec.dataset.error) }
    end
  end
  rec.config_hash = self.hash
  -- What the checks before launch found (tp.preflight.summary), or that they were skipped.
  rec.preflight = run.preflight or json.null
  rec.campaign = {
    attempt = ctx.attempt or json.null,
    wall_s = self.t1 and (self.t1 - self.t0) or json.null,
    exit = { code = math.tointeger(r.code) or json.null, signal = r.signal or json.null,
      timed_out = r.timed_out == true, stragglers = r.stragglers or 0 },
    rusage = r.rusage or json.null,
  }
  -- Which software stack produced the numbers (tp.provenance): one inventory per interpreter,
  -- framework checkout and environment in this process.
  local pok, provenance = pcall(require, 'tp.run.provenance')
  if pok then
    local fdir = dig(run.config, 'paths', 'framework_dir')
    local ok, inv = pcall(provenance.inventory, { probe = gpus_info.probe, argv = run.argv,
      framework = run.framework, framework_dir = fdir, env = run.env })
    rec.environment = ok and scrubber:value(inv) or { error = tostring(inv) }
  end
  if self.slurm_job then
    local j = self.slurm_job
    rec.slurm = { job_id = j.job_id or json.null, state = j.state or json.null,
      exit_code = j.exit_code or json.null, nodelist = j.nodelist or json.null,
      nodes = j.nodes or json.array(), node_logs = j.node_logs or json.array(),
      batch_log = j.batch_log or json.null, script = j.script or json.null,
      attached = j.attached == true, cancelled_by_tplua = j.cancelled_by_tplua == true,
      submitted_at = j.submitted_at or json.null, ended_at = j.ended_at or json.null,
      mode = j.mode or 'batch' }
  end
  if run.profile then
    -- The trace files the profiler left (tp.profile.for_run's patterns), relative to the record.
    rec.profile = require('tp.plan.profile').record(run.profile, fs.dirname(self.record_path))
    if #rec.profile.traces == 0 then
      rec.diagnostics[#rec.diagnostics + 1] = { kind = 'profile_missing', severity = 'warning',
        line = json.null, message = 'profile: no trace file matches '
          .. table.concat(rec.profile.patterns, ', ') }
    else
      self:analyse_profile(rec)
    end
  end
  self:memory_record(rec)
  self:record_outputs(rec)
  rec.energy_metrics = self.energy or { measured = false,
    reason = 'no GPU telemetry: ' .. tostring(gpus_info.reason or 'not sampled') }
  self:measured_window_energy(rec)
  return scrubber:value(rec)
end

-- The run's outputs into its record, each as the top-level member of its name; one the record
-- has already is not replaced (an `output_clash` error says so); one that could not be read is
-- an `output_missing` warning of a training run (a run without iterations failed on it).
function Active:record_outputs(rec)
  local names = {}
  for member in pairs(self.run.outputs or {}) do
    names[#names + 1] = member
  end
  table.sort(names)
  for _, member in ipairs(names) do
    local v, err = (self.outputs_read or {})[member], (self.outputs_failed or {})[member]
    if v ~= nil and rec[member] ~= nil then
      rec.diagnostics[#rec.diagnostics + 1] = { kind = 'output_clash', severity = 'error',
        line = json.null, message = string.format("output %s: the record has a member '%s' "
          .. 'already: not replaced', member, member) }
    elseif v ~= nil then
      rec[member] = v
    elseif err and self.run.iterations ~= false then
      -- (A run without iterations has failed on it already: run_failed says why.)
      rec.diagnostics[#rec.diagnostics + 1] = { kind = 'output_missing', severity = 'warning',
        line = json.null, message = string.format('output %s: %s', member, err) }
    end
  end
end

-- The record of a run with a stop rule: its `stopping` member (tp.run._stop.summary: the rule,
-- the iterations done, planned and saved, the interval reached). A run stopped by its rule ended
-- on tplua's SIGTERM (or scancel): the errors the log shows after the line that decided the stop
-- (the signal, the ranks torn down) are kept as warnings, since the stop was asked for, and
-- `outcome` names the rule.
function Active:stopping_record(rec, log)
  local records = log and log.records or {}
  local last = records[#records]
  local done = last and math.tointeger(last.iteration)
  local planned = (last and math.tointeger(last.train_iters)) or self.run.total_iters
  rec.stopping = require('tp.run._stop').summary(self.run.stop, self.stopper, done, planned)
  if type(rec.stopping.warning) == 'string' then
    rec.diagnostics[#rec.diagnostics + 1] = { kind = 'step_time_drift', severity = 'warning',
      message = rec.stopping.warning, line = json.null }
  end
  if self.stopped_by and Active.GOOD_STOPS[self.stopped_by] then
    rec.outcome = self.stopped_by
    local from = self.stop_line
    for _, d in ipairs(rec.diagnostics) do
      if d.severity == 'error' and math.type(d.line) == 'integer' and from and d.line > from then
        d.severity = 'warning'
        d.message = tostring(d.message) .. ' (after tplua stopped the run: '
          .. self.stopped_by .. ')'
      end
    end
  end
end

--- Adds `profile.analysis` to a record whose run was given a trace analysis (the run's
--- `profile.analyse`, a function of the trace files and the record's directory returning the
--- summary, nil when there is nothing to analyse, or nil and a message: tp.experiment gives
--- tp.analyse.profiled.summarise, which tp.run may not require; a third value, the memory the
--- traces measured, goes to the record's `memory.measured`). A failure is a warning in
--- `diagnostics`; the record is written whatever happens.
---@param rec table the record being built, with its `profile` member
function Active:analyse_profile(rec)
  local analyse = self.run.profile.analyse
  if type(analyse) ~= 'function' then
    return
  end
  local dir = fs.dirname(self.record_path)
  local files = {}
  for i, t in ipairs(rec.profile.traces) do
    files[i] = t:sub(1, 1) == '/' and t or fs.join(dir, t)
  end
  local ok, summary, err, memory = pcall(analyse, files, dir)
  if ok and summary then
    rec.profile.analysis = summary
    self.measured_memory = memory
  elseif not ok or err then
    rec.diagnostics[#rec.diagnostics + 1] = { kind = 'profile_unanalysed', severity = 'warning',
      line = json.null, message = 'profile: the traces could not be analysed: '
        .. tostring(ok and err or summary) }
  end
end

--- Adds the record's `memory` member (docs/record.md): the plan's estimate for the run's
--- configuration (tp.plan.memory) and the memory measured, from the allocator's events in its
--- profiler traces (what the trace analysis measured) or else the peaks its log printed
--- (memory_metrics), each saying where it came from. Left out when there is neither.
---@param rec table the record being built
function Active:memory_record(rec)
  local est
  local cfg = self.run.config
  -- A catalog model's id, or a model row given inline (as tools/gpu-check's recipe does).
  if type(cfg) == 'table' and (type(cfg.model) == 'string' or type(cfg.model) == 'table') then
    local plan_memory = require('tp.plan.memory')
    local ok, e = pcall(plan_memory.for_config, cfg, self.run.hardware)
    if ok then
      est = plan_memory.record(e)
    end
  end
  local measured = self.measured_memory
  local mm = type(rec.memory_metrics) == 'table' and rec.memory_metrics or {}
  local gib = 1024 * 1024 * 1024
  if not measured and type(mm.peak_memory_allocated_gib) == 'number' then
    local res = mm.peak_memory_reserved_gib
    measured = { source = 'log',
      peak_allocated = math.floor(mm.peak_memory_allocated_gib * gib + 0.5),
      peak_reserved = type(res) == 'number' and math.floor(res * gib + 0.5) or json.null }
  end
  if est or measured then
    rec.memory = { estimate = est or json.null, measured = measured or json.null }
  end
end

--- After the exit was delivered: parses the rest of the output, stops telemetry, writes the
--- record (unless the run was interrupted: then only its log is kept) and the journal event.
--- Returns the outcome {id=, status=, reason=, stopped_by=, record=, record_path=, log_path=}.
---@return table outcome
function Active:finalize()
  assert(self.exited, 'finalize before the exit')
  if self.outcome then
    return self.outcome
  end
  -- Each step is marked done, so that a finalize cut short (SIGINT arrives as an error from the
  -- host between two Lua instructions) can be called again and completes without repeating.
  local f = self.fin or {}
  self.fin = f
  if not f.parsed then
    self.finished_at = self.finished_at or base.iso_time()
    self.t1 = self.t1 or mono()
    if self.stream then
      for stream, pend in pairs(self.pending) do
        self.pending[stream] = nil
        self:feed(table.concat(pend) .. '\n')
      end
      f.log = self.stream:finish()
    end
    f.parsed = true
  end
  if not f.telemetry then
    local s = self.sampler
    self.sampler = nil
    if s then
      local t1 = mono()
      s:stop()
      self.energy = telemetry.summary(s, self.t0, t1, self.concurrent)
      -- Kept (stopped) until the record is built: the steady-state window's energy is read
      -- from it then.
      self.stopped_sampler = s
    elseif self.telemetry_error then
      self.energy = { measured = false,
        reason = 'no GPU telemetry: ' .. tostring(self.telemetry_error) }
    end
    f.telemetry = true
  end
  local ctx = self.ctx
  if not f.slurm and self.run.launcher == 'slurm' then
    self:settle_slurm_job()
    f.slurm = true
  end
  if not f.outcome then
    self.result = self.result or { code = 127 }
    f.log = f.log or { records = {}, diagnostics = {}, args = {}, meta = {} }
    self:read_outputs()
    local status, reason = self:classify(f.log)
    f.outcome = { id = self.run.id, status = status, reason = reason,
      stopped_by = self.stopped_by, log_path = self.log_path, exit = self.result }
  end
  local outcome = f.outcome
  if not f.saved then
    if outcome.status ~= 'interrupted' then
      local rec = self:build_record(f.log, outcome.status, outcome.reason)
      local ok, err = record.save(rec, self.record_path)
      if not ok then
        outcome.status, outcome.reason = 'failed', 'cannot write the record: ' .. tostring(err)
      else
        outcome.record = rec
        outcome.record_path = self.record_path
      end
    end
    if self.stopped_sampler then
      self.stopped_sampler:close()
      self.stopped_sampler = nil
    end
    f.saved = true
  end
  if not f.journaled then
    if ctx.journal then
      local ev = { event = outcome.status, id = self.run.id, hash = self.hash,
        attempt = ctx.attempt, reason = outcome.reason or json.null,
        stopped_by = self.stopped_by or json.null,
        exit_status = math.tointeger(self.result.code) or json.null }
      if outcome.record_path then
        ev.record = self.run.id .. '.json'
      end
      ctx.journal(ev)
    end
    f.journaled = true
  end
  if not f.handed then
    -- The run's `on_record(path, record)`, once its record is in place (tp.experiment adds it
    -- to the history there): a failure is printed, the run's outcome stays what it was.
    f.handed = true
    local hook = self.run.on_record
    if outcome.record_path and type(hook) == 'function' then
      local ok, herr = pcall(hook, outcome.record_path, outcome.record)
      if not ok then
        io.stderr:write(string.format('run %s: after the record: %s\n', self.run.id,
          tostring(herr)))
      end
    end
  end
  self.outcome = outcome
  if ctx.view then
    ctx.view:finished(self.run.id, outcome, self.state)
  end
  if self.proc then
    self.proc:close()
  end
  return outcome
end

return Active
