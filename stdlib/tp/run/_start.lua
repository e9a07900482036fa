-- tp.run._start: starting a run: its log parser, its generated files, GPU sampling, the spawn,
-- and the started event with what identifies its process across a restart of tplua (/proc).
local fs = require('tp.fs')
local json = require('tp.json')
local base = require('tp.run._base')
local checks = require('tp.run._check')
-- The run object: how it follows its output (_active); _record (how it ends) and _slurm_job
-- add their methods to it.
local Active = require('tp.run._active')
require('tp.run._record')
require('tp.run._slurm_job')

local mono = base.clock

local M = {}

-- /proc helpers: identify a process across a restart of tplua (proc(5): /proc/<pid>/stat field
-- 22 is the start time in clock ticks since boot; /proc/sys/kernel/random/boot_id changes at
-- every boot).

local function read_small(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local s = f:read(4096)
  f:close()
  return s
end

--- The boot id of this machine (a UUID), or nil where /proc does not have it.
---@return string|nil
function M.boot_id()
  local s = read_small('/proc/sys/kernel/random/boot_id')
  return s and s:match('^%s*(.-)%s*$') or nil
end

--- Process facts from /proc/<pid>/stat: {pgid=, starttime=, state=}, or nil when it is gone.
---@param pid integer
---@return table|nil
function M.proc_stat(pid)
  local s = read_small('/proc/' .. tostring(pid) .. '/stat')
  if not s then
    return nil
  end
  -- The command name (field 2) may contain spaces and ')': the fields start after the last ')'.
  local rest = s:match('^.*%)%s+(.*)$')
  if not rest then
    return nil
  end
  local f = {}
  for w in rest:gmatch('%S+') do
    f[#f + 1] = w
  end
  -- rest starts at field 3 (state): field n is f[n - 2].
  return { state = f[1], pgid = tonumber(f[3]), starttime = tonumber(f[20]) }
end

local function load_log_module()
  local ok, mod = pcall(require, 'tp.parse.log')
  if not ok then
    return nil, tostring(mod)
  end
  if type(mod.stream) ~= 'function' then
    return nil, 'tp.log has no stream()'
  end
  return mod
end

-- A run's outputs (JSON files its command leaves in its directory, read into its record) are
-- removed before it starts: what a previous attempt left is never read as this one's. The
-- directory is made, since a command that declares outputs runs in it.
local function clear_outputs(run, dir)
  if not run.outputs then
    return true
  end
  local ok, err, code = fs.mkdir_p(dir)
  if not ok then
    return nil, err, code
  end
  for _, rel in pairs(run.outputs) do
    local path = fs.join(dir, rel)
    if fs.exists(path) then
      ok, err, code = os.remove(path)
      if not ok then
        return nil, err, code
      end
    end
  end
  return true
end

local function write_files(run, dir)
  for rel, content in pairs(run.files or {}) do
    local path = fs.join(dir, rel)
    local ok, err, code = fs.mkdir_p(fs.dirname(path))
    if not ok then
      return nil, err, code
    end
    ok, err, code = fs.write_atomic(path, content)
    if not ok then
      return nil, err, code
    end
  end
  return true
end

--- Starts a checked run in `loop`. `ctx`: results (directory), scrubber, abort (normalised),
--- gpus (from probe_gpus), view (tp.live view or nil), attempt (string), journal (function or
--- nil), kill_grace, telemetry_interval, on_exit (function(active), called from the loop when
--- the exit is delivered). Returns the Active object; it is finished (`:done()`) once its exit
--- was delivered (or at once when it could not start), and `:finalize()` then writes the record.
---@param loop tp.proc.Loop
---@param run table checked run
---@param ctx table
---@return tp.run.Active
function M.start(loop, run, ctx)
  local self = setmetatable({
    run = run,
    ctx = ctx,
    abort = ctx.abort or checks.abort_rules(),
    hash = ctx.hash or checks.hash(run, ctx.scrubber),
    log_name = run.id .. '.log',
    log_path = fs.join(ctx.results, run.id .. '.log'),
    record_path = fs.join(ctx.results, run.id .. '.json'),
    pending = {},
    window = {},
    state = { records = 0, total = run.total_iters },
    started_at = base.iso_time(),
    t0 = mono(),
    last_progress = mono(),
  }, Active)
  if run.stop then
    -- Stop when the number is known (tp.run._stop): fed each step time by on_records.
    self.stopper = require('tp.run._stop').new(run.stop)
  end
  local log_mod, lerr = load_log_module()
  if not log_mod then
    self.spawn_error = 'log parser unavailable: ' .. lerr
    self.exited = true
    return self
  end
  self.stream = log_mod.stream({ format = run.parser, gbs = run.gbs, seq_len = run.seq_len,
    gpus = run.gpus })
  local dir = base.files_dir(run, ctx.results)
  local ok, err = write_files(run, dir)
  if ok then
    ok, err = clear_outputs(run, dir)
  end
  if ok and run.profile and type(run.profile.output) == 'string' then
    -- Profilers write into the run's profile directory (tp.profile.for_run); not all create it.
    ok, err = fs.mkdir_p(run.profile.output)
  end
  if not ok then
    self.spawn_error = 'cannot write the run\'s files: ' .. tostring(err)
    self.exited = true
    return self
  end
  if ctx.gpus and #ctx.gpus.devices > 0 then
    local gpu = require('tp.gpu')
    local s = gpu.sampler({ interval = ctx.telemetry_interval or 1.0 })
    local sok, serr = s:start()
    if sok then
      self.sampler = s
    else
      s:close()
      self.telemetry_error = serr
    end
  end
  self.t0 = mono()
  self.last_progress = self.t0
  local p, perr = loop:spawn({
    argv = run.argv,
    env = run.env,
    -- A command that leaves outputs runs in its run's directory unless it names a cwd: it
    -- writes them there by their relative names.
    cwd = run.cwd or (run.outputs and dir) or nil,
    log = self.log_path,
    timeout = run.timeout,
    kill_grace = run.kill_grace or ctx.kill_grace,
    on_line = function(stream, line, partial)
      self:on_line(stream, line, partial)
    end,
    on_exit = function(result)
      self.result = result
      self.exited = true
      self.t1 = mono()
      if ctx.on_exit then
        ctx.on_exit(self)
      end
    end,
  })
  if not p then
    self.spawn_error = tostring(perr)
    self.exited = true
    self.t1 = mono()
    return self
  end
  self.proc = p
  self.pid = p:pid()
  local st = M.proc_stat(self.pid)
  if ctx.journal then
    ctx.journal({ event = 'started', id = run.id, hash = self.hash, attempt = ctx.attempt,
      pid = self.pid, pgid = p:pgid(), starttime = st and st.starttime or json.null,
      boot_id = M.boot_id() or json.null, log = self.log_name })
  end
  if ctx.view then
    ctx.view:started(run.id, self.state)
  end
  return self
end

return M
