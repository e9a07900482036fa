-- tp.proc: run child processes by argv, watch their output line by line, time them out, kill
-- their whole process group, forward SIGINT/SIGTERM. Public face of tp._proc (engine/proc.c).
local _proc = require('tp._proc')
-- The host (lua/tplua.c) reports a SIGINT that reached tplua outside any loop; absent under a
-- plain Lua interpreter.
local host_ok, host = pcall(require, 'tp._host')
if not host_ok or type(host) ~= 'table' or type(host.interrupted) ~= 'function' then
  host = nil
end

local M = {}

--- Seconds between SIGTERM (sent or forwarded) and SIGKILL, unless `kill_grace` says otherwise.
M.DEFAULT_KILL_GRACE = 5
--- Bytes of each stream kept by `capture = true` (more is dropped and flagged `*_truncated`).
M.DEFAULT_CAPTURE_MAX = 64 * 1024 * 1024

---@class tp.proc.SpawnOpts
---@field argv string[] program and arguments; the program is searched in PATH without a shell
---@field env? table<string, string|number|false> variables to set (false: remove)
---@field clear_env? boolean start from an empty environment (default false)
---@field cwd? string working directory of the child (default: ours)
---@field log? string file receiving every byte of stdout, and of stderr unless `log_stderr`
---@field log_stderr? string separate file for stderr
---@field log_append? boolean append to the log files instead of truncating them (default false)
---@field timeout? number seconds; then SIGTERM to the group, SIGKILL after `kill_grace`
---@field kill_grace? number seconds from SIGTERM to SIGKILL (default 5); after a forwarded SIGINT,
---  SIGTERM comes min(1, kill_grace) seconds later, SIGKILL kill_grace after that
---@field capture? boolean|integer keep stdout/stderr in the result (true: up to 64 MiB each)
---@field on_line? fun(stream: 'stdout'|'stderr', line: string, partial: boolean)
---@field on_exit? fun(result: tp.proc.Result)

---@class tp.proc.Result
---@field code integer exit status; 128 + signal when killed; 124 after a timeout
---@field signal? string terminating signal of the leader ('SIGKILL', ...)
---@field timed_out boolean
---@field interrupted? string 'SIGINT' or 'SIGTERM' when tplua received it and forwarded it
---@field wall_s number seconds from spawn to exit
---@field rusage table utime, stime (s), maxrss_kb, minflt, majflt, inblock, oublock, nvcsw, nivcsw
---@field stragglers integer group members still alive at the leader's exit (then killed)
---@field escaped? boolean a process outside the group kept the output pipes open
---@field log_error? string the first failed write to a log file (logging then stopped)
---@field stdout? string captured output (with `capture`)
---@field stderr? string

local SPAWN_TYPES = {
  argv = 'table',
  env = 'table',
  clear_env = 'boolean',
  cwd = 'string',
  log = 'string',
  log_stderr = 'string',
  log_append = 'boolean',
  timeout = 'number',
  kill_grace = 'number',
  capture = 'boolean|number',
  on_line = 'function',
  on_exit = 'function',
}

-- Checks a spawn option table and returns a copy ready for tp._proc; raises at `level`.
local function check_spawn(opts, level)
  if type(opts) ~= 'table' then
    error(('spawn options: table expected, got %s'):format(type(opts)), level)
  end
  local o = {}
  for k, v in pairs(opts) do
    local want = SPAWN_TYPES[k]
    if not want then
      error(('spawn options: unknown option %q'):format(tostring(k)), level)
    end
    if not want:find(type(v), 1, true) then
      error(('option %q: %s expected, got %s'):format(k, want, type(v)), level)
    end
    o[k] = v
  end
  local argv = opts.argv
  if not argv or #argv == 0 then
    error('option "argv": a non-empty list of strings expected', level)
  end
  o.argv = {}
  for i = 1, #argv do
    local a = argv[i]
    if type(a) == 'number' then
      a = tostring(a)
    elseif type(a) ~= 'string' then
      error(('option "argv": item %d: string expected, got %s'):format(i, type(a)), level)
    end
    o.argv[i] = a
  end
  if opts.env then
    o.env = {}
    for name, v in pairs(opts.env) do
      if type(name) ~= 'string' or name == '' or name:find('[=%z]') then
        error(('option "env": invalid variable name %q'):format(tostring(name)), level)
      end
      if type(v) == 'number' then
        v = tostring(v)
      elseif type(v) ~= 'string' and v ~= false then
        error(('option "env": value of %s: string or false expected, got %s')
          :format(name, type(v)), level)
      end
      if v and v:find('%z') then
        error(('option "env": value of %s contains a NUL byte'):format(name), level)
      end
      o.env[name] = v
    end
  end
  for _, k in ipairs({ 'timeout', 'kill_grace' }) do
    local v = opts[k]
    if v ~= nil and not (v >= 0 and v < 1e9) then
      error(('option %q: seconds >= 0 expected, got %s'):format(k, tostring(v)), level)
    end
  end
  if o.timeout == 0 then
    o.timeout = nil
  end
  o.kill_grace = o.kill_grace or M.DEFAULT_KILL_GRACE
  if o.capture == true then
    o.capture = M.DEFAULT_CAPTURE_MAX
  elseif o.capture == false then
    o.capture = nil
  elseif o.capture and (o.capture < 0 or math.type(o.capture) ~= 'integer') then
    error('option "capture": true or a byte count expected', level)
  end
  return o
end

--- Spawns one child in a process group of its own and returns its handle. stdin is /dev/null;
--- stdout and stderr are read by tplua (teed to `log`, split into lines for `on_line`). Callbacks
--- run while `:wait()` runs. A missing program is an expected failure, not an error.
---
--- ```lua
--- local p <close> = assert(tp.proc.spawn({ argv = { 'nvidia-smi', '-L' }, capture = true }))
--- local r = p:wait()
--- if r.code ~= 0 then print(r.stderr) end
--- ```
---@param opts tp.proc.SpawnOpts
---@return userdata|nil proc `tp.Proc`: wait(), kill([sig]), pid(), pgid(), done(), close()
---@return string? err "<argv0>: No such file or directory", ...
---@return string? code "ENOENT", "EACCES", ...
function M.spawn(opts)
  local o = check_spawn(opts, 3)
  local loop = assert(_proc.loop())
  return loop:spawn(o)
end

--- Runs argv to completion and returns its result with `stdout` and `stderr` captured (unless
--- `opts.capture = false`). A non-zero exit status is data in the result, not a failure.
---
--- ```lua
--- local r = assert(tp.proc.run({ 'git', 'rev-parse', 'HEAD' }, { timeout = 10 }))
--- ```
---@param argv string[]
---@param opts? tp.proc.SpawnOpts without argv
---@return tp.proc.Result|nil
---@return string? err
---@return string? code
function M.run(argv, opts)
  if type(argv) ~= 'table' then
    error(('argv: table expected, got %s'):format(type(argv)), 2)
  end
  local o = {}
  for k, v in pairs(opts or {}) do
    o[k] = v
  end
  if o.argv ~= nil then
    error('run: give argv as the first argument, not as an option', 2)
  end
  o.argv = argv
  if o.capture == nil then
    o.capture = true
  end
  o = check_spawn(o, 3)
  local loop = assert(_proc.loop())
  local p, err, code = loop:spawn(o)
  if not p then
    return nil, err, code
  end
  local r = p:wait()
  p:close()
  loop:close()
  if o.capture then
    r.stdout = r.stdout or ''
    r.stderr = r.stderr or ''
  end
  return r
end

---@class tp.proc.Loop
---@field private _loop userdata
local Loop = {}
Loop.__index = Loop

--- Creates a loop that supervises many children and timers at once. While `:run()` runs,
--- SIGINT/SIGTERM sent to tplua are forwarded to every child's group, then escalated: after a
--- SIGINT, SIGTERM follows min(1 s, `kill_grace`) later if the child still runs, and SIGKILL
--- `kill_grace` after the SIGTERM; a second signal kills at once. `:run()` then reports
--- `interrupted`; callbacks can ask `:interrupted()` meanwhile.
---
--- ```lua
--- local loop <close> = tp.proc.loop()
--- for i = 1, 4 do
---   loop:spawn({ argv = { 'sh', '-c', 'echo run ' .. i }, on_line = function(_, l) print(l) end })
--- end
--- loop:timer(1, function() print('tick') end)
--- local r = loop:run()
--- if r.interrupted then os.exit(r.exit_code) end
--- ```
---@param opts? {coalesce?: number} coalesce: after a read that did not fill the read buffer, a
---  stream is read again only this many seconds later (default 0.01; 0: every write wakes tplua)
---@return tp.proc.Loop
function M.loop(opts)
  opts = opts or {}
  if type(opts) ~= 'table' then
    error(('loop options: table expected, got %s'):format(type(opts)), 2)
  end
  for k, v in pairs(opts) do
    if k ~= 'coalesce' then
      error(('loop options: unknown option %q'):format(tostring(k)), 2)
    elseif type(v) ~= 'number' or v ~= v or v < 0 or v > 10 then
      error(('option "coalesce": seconds from 0 to 10 expected, got %s'):format(tostring(v)), 2)
    end
  end
  return setmetatable({ _loop = assert(_proc.loop(opts.coalesce)) }, Loop)
end

--- Spawns a child in this loop (see `tp.proc.spawn`); its callbacks run inside the loop's run
--- functions.
---@param opts tp.proc.SpawnOpts
---@return userdata|nil proc
---@return string? err
---@return string? code
function Loop:spawn(opts)
  return self._loop:spawn(check_spawn(opts, 3))
end

local function check_timer(interval, fn)
  if type(interval) ~= 'number' or interval ~= interval or interval <= 0 then
    error(('interval: seconds > 0 expected, got %s'):format(tostring(interval)), 3)
  end
  if type(fn) ~= 'function' then
    error(('callback: function expected, got %s'):format(type(fn)), 3)
  end
end

--- Calls `fn(id)` every `interval` seconds while the loop runs (never from a signal handler).
--- Late ticks are not replayed. Returns the id for `:cancel`.
---@param interval number seconds
---@param fn fun(id: integer)
---@return integer id
function Loop:timer(interval, fn)
  check_timer(interval, fn)
  return self._loop:timer(interval, fn, false)
end

--- Calls `fn(id)` once, `delay` seconds from now (when the loop runs then).
---@param delay number seconds
---@param fn fun(id: integer)
---@return integer id
function Loop:after(delay, fn)
  check_timer(delay, fn)
  return self._loop:timer(delay, fn, true)
end

--- Cancels a timer. Returns whether it was still pending.
---@param id integer
---@return boolean
function Loop:cancel(id)
  return self._loop:cancel(id)
end

--- Runs until every child of the loop has exited and its output was delivered. Timers alone do
--- not keep it running. Raises the error of a callback that raised.
---@return {interrupted?: string, exit_code?: integer}|nil summary `exit_code` = 128 + signal
---@return string? err
---@return string? code
function Loop:run()
  return self._loop:run()
end

--- Waits at most `timeout` seconds (nil: until something happens) and delivers what is ready.
---@param timeout? number
---@return boolean|nil active whether children are still running
---@return string? interrupted 'SIGINT'/'SIGTERM' once forwarded (or err on failure)
function Loop:run_once(timeout)
  if timeout ~= nil and type(timeout) ~= 'number' then
    error(('timeout: number expected, got %s'):format(type(timeout)), 2)
  end
  return self._loop:run_once(timeout)
end

--- Says whether tplua has been interrupted: the signal this loop forwarded to its children, or
--- 'SIGINT' when the host caught one outside any loop (its "interrupted" error, then caught by
--- the script). Meant for callbacks (`on_line`, `on_exit`, timers) that should stop starting new
--- work: the loop goes on until its children have exited.
---```lua
---loop:spawn({ argv = argv, on_line = function(_, line)
---  if not loop:interrupted() then queue_more_work(line) end
---end })
---```
---@return 'SIGINT'|'SIGTERM'|nil
function Loop:interrupted()
  local sig = self._loop:interrupted()
  if sig then
    return sig
  end
  local h = host and host.interrupted()
  if type(h) == 'string' then
    return h
  end
  return h and 'SIGINT' or nil
end

--- Forwards `sig` ('SIGINT' or 'SIGTERM') to every running child with the escalation of a signal
--- received while the loop runs (carried out by the next run calls). Does nothing when the loop
--- has already forwarded a signal. For a signal that reached tplua outside the loop.
---@param sig 'SIGINT'|'SIGTERM'
function Loop:interrupt(sig)
  if sig ~= 'SIGINT' and sig ~= 'SIGTERM' then
    error(("sig: 'SIGINT' or 'SIGTERM' expected, got %s"):format(tostring(sig)), 2)
  end
  self._loop:interrupt(sig)
end

--- Number of children whose exit has not been delivered yet.
---@return integer
function Loop:active()
  return self._loop:active()
end

--- Kills (SIGKILL to each group) and reaps every child still running; idempotent. Also called
--- by `<close>` and by the garbage collector.
function Loop:close()
  self._loop:close()
end

Loop.__close = Loop.close

function Loop:__tostring()
  return tostring(self._loop)
end

--- Returns the number of CPUs this process may run on (its affinity mask: a container's or a
--- taskset's limit, not the machine's count), at least 1.
---@return integer
function M.cpu_count()
  return _proc.cpu_count()
end

--- Lists the live processes (zombies excluded) of a process group, read from /proc.
---@param pgid integer
---@return integer[]|nil pids
---@return string? err
---@return string? code
function M.group_members(pgid)
  if math.type(pgid) ~= 'integer' or pgid <= 0 then
    error(('pgid: positive integer expected, got %s'):format(tostring(pgid)), 2)
  end
  return _proc.group_members(pgid)
end

--- Waits until every process in `pids` has terminated (zombie or gone), whoever its parent is
--- (pidfds, Linux 5.3+). Useful before reusing a GPU that a killed run held.
---
--- ```lua
--- local pids = tp.proc.group_members(pgid)
--- assert(tp.proc.wait_gone(pids, 10))
--- ```
---@param pids integer[]
---@param timeout number seconds
---@return true|nil ok
---@return string? err "N of M processes still alive after T ms"
---@return string? code "ETIMEDOUT"
function M.wait_gone(pids, timeout)
  if type(pids) ~= 'table' then
    error(('pids: table expected, got %s'):format(type(pids)), 2)
  end
  if type(timeout) ~= 'number' or timeout ~= timeout or timeout < 0 then
    error(('timeout: seconds >= 0 expected, got %s'):format(tostring(timeout)), 2)
  end
  return _proc.wait_gone(pids, timeout)
end

return M
