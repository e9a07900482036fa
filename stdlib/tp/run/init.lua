-- tp.run: one training command under supervision. Spawns it (tp.proc: own process group, log
-- teed as it arrives, timeout), parses its output live (tp.log.stream), stops it early on NaN
-- loss, OOM, NCCL failure or a stall, samples GPU telemetry when there are GPUs, and writes the
-- unified run record (tp.record) atomically. tp.campaign runs many of these with a journal.
-- docs/campaign.md describes the run table, the abort rules and the record additions.
local fs = require('tp.fs')
local json = require('tp.json')
local proc = require('tp.proc')
local record = require('tp.parse.record')
local secrets = require('tp.secrets')
local digest = require('tp._digest')

local M = {}

--- Early-abort rules, each on by default: a NaN/Inf loss, an OOM or NCCL failure signature in the
--- parser's diagnostics, no new iteration for `stall_minutes`.
M.ABORT_DEFAULTS = { nan = true, oom = true, nccl = true, stall_minutes = 30 }

--- Version of the hashed view of a run (changes when the hash would change for the same run).
M.HASH_SCHEMA = 'tplua.campaign.run/1'

-- Fields of a run table and their Lua types ('integer' = a positive whole number).
local RUN_TYPES = {
  id = 'string', argv = 'table', env = 'table', cwd = 'string', parser = 'string',
  timeout = 'number', kill_grace = 'number', gbs = 'integer', seq_len = 'integer',
  gpus = 'integer', platform = 'string', framework = 'string', model = 'string',
  dataset = 'string', methodology = 'string', ['repeat'] = 'integer', config = 'table',
  files = 'table', files_dir = 'string', total_iters = 'integer', experiment = 'string',
  hardware = 'string', launcher = 'string', profile = 'table', preflight = 'table',
}

-- The fields that define what a run computes: they make up its config hash. Supervision
-- settings (timeout, kill_grace) and where generated files go are left out.
local HASHED = { 'id', 'argv', 'env', 'cwd', 'parser', 'gbs', 'seq_len', 'gpus', 'platform',
  'framework', 'model', 'dataset', 'methodology', 'repeat', 'config', 'files', 'total_iters',
  'experiment', 'hardware' }

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function fail_check(level, fmt, ...)
  error(string.format(fmt, ...), level + 1)
end

-- Wall-clock time for the journal and records: os.time (whole seconds) at load plus the
-- monotonic time since, so that times are ordered and millisecond-resolved within a process
-- (and within a second of the system clock).
local mono = require('tp.gpu').now
local EPOCH0, MONO0 = os.time(), mono()

local function wall_now()
  return EPOCH0 + (mono() - MONO0)
end

--- Formats epoch seconds as '2026-01-31T12:00:00.250Z'.
---@param t? number epoch seconds (default now)
---@return string
function M.iso_time(t)
  t = t or wall_now()
  local s = math.floor(t)
  return os.date('!%Y-%m-%dT%H:%M:%S', s) .. string.format('.%03dZ', math.floor((t - s) * 1000))
end

--- Seconds on the monotonic clock (for durations).
M.clock = mono

-- The value at a dotted path of a table, or nil.
local function dig(t, ...)
  for _, k in ipairs({ ... }) do
    if type(t) ~= 'table' then
      return nil
    end
    t = t[k]
  end
  return t
end

local function check_relpath(level, id, rel)
  if type(rel) ~= 'string' or rel == '' or rel:sub(1, 1) == '/' then
    fail_check(level, "run '%s': files: a relative path expected, got %s", id, tostring(rel))
  end
  for part in rel:gmatch('[^/]+') do
    if part == '..' then
      fail_check(level, "run '%s': files: '%s' leaves its directory ('..')", id, rel)
    end
  end
end

--- Checks a run table and returns a normalised copy: numbers in argv and env become strings,
--- gbs / seq_len / gpus / total_iters / model / dataset default from `config` (the unified
--- config: training.gbs, training.seq_len, nodes x gpus_per_node, training.iters, model,
--- training.dataset). Raises on misuse, naming the run.
---@param run table
---@param level? integer error level (default 2: the caller's caller)
---@return table run
function M.check(run, level)
  level = (level or 1) + 1
  if type(run) ~= 'table' then
    fail_check(level, 'run: table expected, got %s', type(run))
  end
  local id = run.id
  if type(id) ~= 'string' or not id:match('^[%w][%w%._%-]*$') or #id > 200 then
    fail_check(level, "run id: letters, digits, '.', '_' and '-' (not first) expected, got %s",
      type(id) == 'string' and ("'" .. id .. "'") or type(id))
  end
  local out = {}
  for k, v in pairs(run) do
    local want = RUN_TYPES[k]
    if not want then
      fail_check(level, "run '%s': unknown field '%s'", id, tostring(k))
    end
    if want == 'integer' then
      if math.type(v) ~= 'integer' and not (type(v) == 'number' and math.tointeger(v)) then
        fail_check(level, "run '%s': %s: a whole number expected, got %s", id, k, tostring(v))
      end
      v = math.tointeger(v)
      if v < 1 then
        fail_check(level, "run '%s': %s: a positive number expected, got %d", id, k, v)
      end
    elseif type(v) ~= want then
      fail_check(level, "run '%s': %s: %s expected, got %s", id, k, want, type(v))
    end
    out[k] = v
  end
  if type(run.argv) ~= 'table' or #run.argv == 0 then
    fail_check(level, "run '%s': argv: a non-empty list expected", id)
  end
  out.argv = {}
  for i, a in ipairs(run.argv) do
    if type(a) == 'number' then
      a = tostring(a)
    elseif type(a) ~= 'string' then
      fail_check(level, "run '%s': argv[%d]: string expected, got %s", id, i, type(a))
    end
    out.argv[i] = a
  end
  if run.env then
    out.env = {}
    for name, v in pairs(run.env) do
      if type(name) ~= 'string' or not name:match('^[^=]+$') then
        fail_check(level, "run '%s': env: invalid variable name %s", id, tostring(name))
      end
      if type(v) == 'number' then
        v = tostring(v)
      elseif type(v) ~= 'string' and v ~= false then
        fail_check(level, "run '%s': env.%s: string or false expected, got %s", id, name, type(v))
      end
      out.env[name] = v
    end
  end
  if run.parser then
    local ok, log_mod = pcall(require, 'tp.log')
    if ok and type(log_mod.formats) == 'function' then
      local known = log_mod.formats()
      local found = false
      for _, f in ipairs(known) do
        found = found or f == run.parser
      end
      if not found then
        fail_check(level, "run '%s': parser: unknown log format '%s' (known: %s)", id, run.parser,
          table.concat(known, ', '))
      end
    end
  end
  for _, k in ipairs({ 'timeout', 'kill_grace' }) do
    local v = run[k]
    if v ~= nil and not (v >= 0 and v < 1e9) then
      fail_check(level, "run '%s': %s: seconds >= 0 expected, got %s", id, k, tostring(v))
    end
  end
  if run.files then
    for rel, content in pairs(run.files) do
      check_relpath(level + 1, id, rel)
      if type(content) ~= 'string' then
        fail_check(level, "run '%s': files['%s']: string expected, got %s", id, rel,
          type(content))
      end
    end
  end
  local cfg = run.config
  if cfg then
    local training = cfg.training or {}
    out.gbs = out.gbs or math.tointeger(training.gbs)
    out.seq_len = out.seq_len or math.tointeger(training.seq_len)
    out.total_iters = out.total_iters or math.tointeger(training.iters)
    if out.gpus == nil and math.tointeger(cfg.gpus_per_node) then
      out.gpus = math.tointeger(cfg.gpus_per_node) * (math.tointeger(cfg.nodes) or 1)
    end
    if out.model == nil and type(cfg.model) == 'string' then
      out.model = cfg.model
    end
    if out.dataset == nil and type(training.dataset) == 'string' then
      out.dataset = training.dataset
    end
    local ok, err = pcall(json.encode, cfg, { sort_keys = true })
    if not ok then
      fail_check(level, "run '%s': config: not representable as JSON: %s", id, tostring(err))
    end
  end
  return out
end

--- The part of a checked run that its config hash covers, with secrets redacted (so that the
--- hash, which is written to the journal, reveals nothing, and a rotated token does not make a
--- finished run look changed).
---@param run table a checked run
---@param scrubber? tp.secrets.Scrubber
---@return table
function M.hashed_view(run, scrubber)
  scrubber = scrubber or secrets.new({ run.env or {} })
  local v = { schema = M.HASH_SCHEMA }
  for _, k in ipairs(HASHED) do
    v[k] = run[k]
  end
  if v.env then
    v.env = scrubber:env(v.env)
  end
  v.argv = scrubber:argv(v.argv)
  return scrubber:value(v)
end

--- Stable hash of a run's configuration: SHA-256 of its canonical JSON (sorted keys, see
--- `hashed_view`).
---```lua
---local h = tp.run.hash({ id = 'a', argv = { 'true' } })  --> 64 hex digits
---```
---@param run table
---@param scrubber? tp.secrets.Scrubber
---@return string hex
function M.hash(run, scrubber)
  local r = M.check(run, 2)
  local text = json.encode(M.hashed_view(r, scrubber), { sort_keys = true })
  return assert(digest.sha256(text))
end

--- Normalises the abort rules: `true`/nil fields take the defaults, `false` turns a rule off,
--- `stall_minutes = false` or 0 disables the stall rule.
---@param abort? {nan?: boolean, oom?: boolean, nccl?: boolean, stall_minutes?: number|false}
---@return table
function M.abort_rules(abort)
  if abort ~= nil and type(abort) ~= 'table' then
    error('abort: table expected, got ' .. type(abort), 2)
  end
  local out = {}
  for k, def in pairs(M.ABORT_DEFAULTS) do
    local v = abort and abort[k]
    if v == nil then
      v = def
    end
    out[k] = v
  end
  for k, v in pairs(abort or {}) do
    if M.ABORT_DEFAULTS[k] == nil then
      error(string.format("abort: unknown rule '%s' (nan, oom, nccl, stall_minutes)",
        tostring(k)), 2)
    end
    if k == 'stall_minutes' then
      if v ~= false and not (type(v) == 'number' and v >= 0) then
        error('abort.stall_minutes: minutes >= 0 or false expected, got ' .. tostring(v), 2)
      end
    elseif type(v) ~= 'boolean' then
      error(string.format('abort.%s: boolean expected, got %s', k, type(v)), 2)
    end
  end
  if out.stall_minutes == 0 then
    out.stall_minutes = false
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
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

-- ---------------------------------------------------------------------------------------------
-- Telemetry

local function probe_reason(probe)
  local parts = {}
  for _, api in ipairs({ 'nvml', 'rsmi', 'cuda', 'hip' }) do
    local b = probe.backends and probe.backends[api]
    if b and b.reason then
      parts[#parts + 1] = api .. ': ' .. tostring(b.reason)
    end
  end
  if #parts == 0 then
    return 'no GPU found'
  end
  return 'no GPU found (' .. table.concat(parts, '; ') .. ')'
end

--- Probes the GPUs once for a series of runs. Returns {devices=, platform=, reason=} where
--- `reason` says why there is no telemetry (nil when devices were found).
---@param opts? {telemetry?: boolean}
---@return table
function M.probe_gpus(opts)
  if opts and opts.telemetry == false then
    return { devices = {}, platform = nil, reason = 'telemetry turned off' }
  end
  local ok, gpu = pcall(require, 'tp.gpu')
  if not ok then
    return { devices = {}, reason = 'tp.gpu unavailable: ' .. tostring(gpu) }
  end
  local probe, err = gpu.probe()
  if not probe then
    return { devices = {}, reason = 'GPU probe failed: ' .. tostring(err) }
  end
  if #probe.devices == 0 then
    return { devices = {}, reason = probe_reason(probe), probe = probe }
  end
  local first = probe.devices[1]
  local out = { devices = probe.devices, probe = probe,
    platform = first.vendor == 'amd' and 'amd' or 'nvd' }
  local hok, hardware = pcall(require, 'tp.hardware')
  if hok then
    local row = hardware.match(first)
    out.hardware = row and row.id or nil
  end
  return out
end

-- Summary of the sampler's readings inside [t0, t1]: mean/max power, max memory, energy.
local function telemetry_summary(sampler, t0, t1, concurrent)
  local samples, err = sampler:samples()
  if not samples then
    return { measured = false, reason = 'no GPU telemetry: ' .. tostring(err) }
  end
  local per_dev, max_power, max_mem, n = {}, nil, nil, 0
  for _, x in ipairs(samples) do
    if x.t >= t0 and x.t <= t1 then
      n = n + 1
      local d = per_dev[x.device] or { sum = 0, count = 0 }
      per_dev[x.device] = d
      if is_finite(x.power_w) then
        d.sum, d.count = d.sum + x.power_w, d.count + 1
        max_power = math.max(max_power or x.power_w, x.power_w)
      end
      if is_finite(x.memory_used) then
        max_mem = math.max(max_mem or x.memory_used, x.memory_used)
      end
    end
  end
  local devices = #sampler:devices()
  local out = {
    measured = true,
    source = 'telemetry',
    samples = n,
    devices = devices,
    window_s = t1 - t0,
    max_power_w = max_power or json.null,
    max_memory_used_gib = max_mem and max_mem / 1073741824 or json.null,
  }
  local total_mean, any = 0, false
  for _, d in pairs(per_dev) do
    if d.count > 0 then
      total_mean, any = total_mean + d.sum / d.count, true
    end
  end
  out.avg_power_w = any and total_mean or json.null
  out.avg_power_w_per_gpu = any and devices > 0 and total_mean / devices or json.null
  local joules, details = sampler:energy_j({ from = t0, to = t1 })
  if joules then
    out.energy_j = joules
    out.energy_j_per_gpu = devices > 0 and joules / devices or json.null
    out.energy_method = details.method
  else
    out.energy_j = json.null
    out.energy_note = tostring(details)
  end
  if concurrent and concurrent > 1 then
    out.note = string.format('%d runs shared the devices during this window', concurrent)
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- Output parsing

local function load_log_module()
  local ok, mod = pcall(require, 'tp.log')
  if not ok then
    return nil, tostring(mod)
  end
  if type(mod.stream) ~= 'function' then
    return nil, 'tp.log has no stream()'
  end
  return mod
end

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
    self:stop('stall', string.format('no new iteration for %s minutes (last progress: %s)',
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

-- Where a run's generated files go: files_dir, the config's paths.output, its cwd, or
-- <results>/<id>.files.
local function files_dir(run, results)
  return run.files_dir or dig(run.config, 'paths', 'output') or run.cwd
    or fs.join(results, run.id .. '.files')
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
    abort = ctx.abort or M.abort_rules(),
    hash = ctx.hash or M.hash(run, ctx.scrubber),
    log_name = run.id .. '.log',
    log_path = fs.join(ctx.results, run.id .. '.log'),
    record_path = fs.join(ctx.results, run.id .. '.json'),
    pending = {},
    window = {},
    state = { records = 0, total = run.total_iters },
    started_at = M.iso_time(),
    t0 = mono(),
    last_progress = mono(),
  }, Active)
  local log_mod, lerr = load_log_module()
  if not log_mod then
    self.spawn_error = 'log parser unavailable: ' .. lerr
    self.exited = true
    return self
  end
  self.stream = log_mod.stream({ format = run.parser, gbs = run.gbs, seq_len = run.seq_len,
    gpus = run.gpus })
  local ok, err = write_files(run, files_dir(run, ctx.results))
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
    cwd = run.cwd,
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

-- The catalog GPU of a run: its configured one (the run's `hardware`; tp.experiment sets the
-- platform's) first, else the probed device's match (probe_gpus). Returns the id or nil, and a
-- warning when the probe matched another catalog row than the configured one.
local function run_hardware(run, gpus_info)
  local probed = gpus_info.hardware
  local hw = run.hardware or probed
  if hw == nil then
    return nil
  end
  if not require('tp.plan.hardware').get(hw) then
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
  }
  local rec = record.from_log(log, opts)
  if hw_warning then
    rec.diagnostics[#rec.diagnostics + 1] = { kind = 'config_override', severity = 'warning',
      message = hw_warning, line = json.null }
  end
  rec.status = status == 'finished' and 'completed' or 'failed'
  rec.stopped_by = self.stopped_by or json.null
  rec.failure_reason = reason or json.null
  if self.stopped_by then
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
  local pok, provenance = pcall(require, 'tp.provenance')
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
    end
  end
  rec.energy_metrics = self.energy or { measured = false,
    reason = 'no GPU telemetry: ' .. tostring(gpus_info.reason or 'not sampled') }
  self:measured_window_energy(rec)
  return scrubber:value(rec)
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
    self.finished_at = self.finished_at or M.iso_time()
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
      self.energy = telemetry_summary(s, self.t0, t1, self.concurrent)
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
  self.outcome = outcome
  if ctx.view then
    ctx.view:finished(self.run.id, outcome, self.state)
  end
  if self.proc then
    self.proc:close()
  end
  return outcome
end

---@class tp.run.ExecuteOpts
---@field results? string directory of the record and the log (default '.')
---@field abort? table early-abort rules (default tp.run.ABORT_DEFAULTS)
---@field quiet? boolean no live view (default false)
---@field view? tp.live.View a view to report to (default: a new one unless quiet)
---@field telemetry? boolean sample GPUs when there are some (default true)
---@field telemetry_interval? number seconds between GPU readings (default 1)
---@field kill_grace? number seconds from SIGTERM to SIGKILL (default 5)

--- Runs one run to completion and writes `<results>/<id>.json` and `<results>/<id>.log` (no
--- journal, no lock: tp.campaign adds those). SIGINT or SIGTERM during the run is forwarded
--- to its process group (after a SIGINT, SIGTERM follows within a second, then SIGKILL after
--- `kill_grace`; docs/proc.md) and the outcome says `interrupted`.
---```lua
---local out = tp.run.execute({ id = 'smoke', argv = { 'python3', 'train.py' }, gbs = 8,
---  seq_len = 2048, gpus = 1 }, { results = 'output' })
---print(out.status, out.record and out.record.performance_metrics.tokens_per_second)
---```
---@param run table
---@param opts? tp.run.ExecuteOpts
---@return table outcome see Active:finalize
function M.execute(run, opts)
  opts = opts or {}
  local r = M.check(run, 2)
  local results = opts.results or '.'
  assert(fs.mkdir_p(results))
  local scrubber = secrets.new({ r.env or {} })
  local view = opts.view
  if view == nil and not opts.quiet then
    view = require('tp.run.live').new({ scrub = function(text)
      return (scrubber:string(text))
    end })
  end
  local ctx = {
    results = results, scrubber = scrubber, abort = M.abort_rules(opts.abort),
    gpus = M.probe_gpus(opts), view = view or nil, kill_grace = opts.kill_grace,
    telemetry_interval = opts.telemetry_interval,
  }
  local loop <close> = proc.loop()
  local active = M.start(loop, r, ctx)
  local timer = loop:timer(1, function()
    active:tick(mono())
    if ctx.view then
      ctx.view:tick()
    end
  end)
  -- loop:run keeps its signal handlers installed until the child is gone: SIGINT is forwarded
  -- to the run's group (then SIGTERM, then SIGKILL after the grace) and the exit says
  -- `interrupted`.
  while not active:done() do
    assert(loop:run())
  end
  loop:cancel(timer)
  local outcome = active:finalize()
  if ctx.view then
    ctx.view:close()
  end
  return outcome
end

-- ---------------------------------------------------------------------------------------------
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
  return fs.join(files_dir(self.run, self.ctx.results), slurm.STATE)
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
  st.ended_at = M.iso_time()
  fs.write_atomic(path, json.encode(st, { sort_keys = true }) .. '\n')
end

M.Active = Active

return M
