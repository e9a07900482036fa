-- A real Slurm cluster for the specs: its own munged (on a socket in its temp dir, named in
-- slurm.conf's AuthInfo, so that clusters of specs running at the same time, and the machine's
-- own munged, never share one that another stops), one slurmctld and two slurmd "nodes" on this
-- host, from a slurm.conf generated in a temp dir on free ports.
-- `stop()` cancels what still runs and stops exactly the daemons it started, by their pids.
-- When a daemon fails to start, the error gives the last lines of its log and of the other
-- daemons' logs, and the logs are kept (under the build directory's slurm-logs/), since the
-- cluster's temp dir goes when the spec file ends.
-- Needs root and Debian's slurmctld, slurmd, slurm-client and munge; `available()` says why not.
local h = require('helper')
local fs = require('tp.fs')
local proc = require('tp.proc')

local M = {}

local BINARIES = { '/usr/sbin/slurmctld', '/usr/sbin/slurmd', '/usr/bin/sbatch', '/usr/bin/srun',
  '/usr/bin/scontrol', '/usr/bin/squeue', '/usr/bin/scancel', '/usr/bin/sinfo',
  '/usr/sbin/munged', '/usr/bin/munge' }

--- Returns true, or nil and why a real cluster cannot be started here.
function M.available()
  local id = proc.run({ 'id', '-u' })
  if not id or id.stdout:gsub('%s', '') ~= '0' then
    return nil, 'not root: slurmd and munged need root (run the suite as root)'
  end
  for _, b in ipairs(BINARIES) do
    if not fs.is_file(b) then
      return nil, b .. ' is missing: scripts/install-deps installs slurmctld, slurmd, '
        .. 'slurm-client and munge'
    end
  end
  return true
end

-- Polls `check()` every 0.2 s until it returns true or `timeout` seconds pass.
local function wait_for(check, timeout, what)
  local clock = require('tp.gpu').now
  local deadline = clock() + timeout
  local loop <close> = proc.loop()
  while true do
    if check() then
      return true
    end
    if clock() > deadline then
      error(string.format('slurm cluster: %s did not happen within %d s', what, timeout), 2)
    end
    loop:spawn({ argv = { 'sleep', '0.2' } })
    loop:run()
  end
end

local function read_pid(path)
  local s = h.read(path)
  return s and math.tointeger(tonumber(s:match('%d+')))
end

-- The pids of the processes whose command line is exactly `argv` (it names this cluster's own
-- slurm.conf, so only daemons this fixture started match): for a daemon that runs but wrote no
-- pid file.
local function pids_of(argv)
  local want = table.concat(argv, '\0') .. '\0'
  local out = {}
  for _, e in ipairs(fs.list('/proc') or {}) do
    local pid = math.tointeger(tonumber(e.name))
    if pid and h.read('/proc/' .. e.name .. '/cmdline') == want then
      out[#out + 1] = pid
    end
  end
  return out
end

-- A free port for slurmctld and two consecutive free ones for the two slurmd.
local function ports()
  local ranks = require('tp.launch.ranks')
  for _ = 1, 100 do
    local ctld, slurmd = ranks.free_port(), ranks.free_port()
    local used = ranks.ports_in_use()
    if ctld ~= slurmd and ctld ~= slurmd + 1 and not used[slurmd + 1] then
      return ctld, slurmd
    end
  end
  error('slurm cluster: no free ports')
end

local Cluster = {}
Cluster.__index = Cluster

-- The argv that starts a daemon in a session of its own. tp.proc kills what is left of a child's
-- process group when the child exits, and a daemon that has forked but not yet called setsid()
-- is still in that group: setsid(1) --wait moves it out first, and returns when the daemon's
-- first process has exited (after its own fork).
local function daemon(argv)
  local out = { 'setsid', '--wait' }
  for _, a in ipairs(argv) do
    out[#out + 1] = a
  end
  return out
end

-- The daemons whose logs are kept, in the order they start.
local DAEMONS = { 'slurmctld', 'slurmd-n1', 'slurmd-n2' }

--- Starts the cluster. Returns it ({ dir, conf, env = { SLURM_CONF = ... }, stop = fn }).
--- `opts.prepare(dir)`, when given, runs once the cluster's directories and slurm.conf are
--- made and before any Slurm daemon starts (a test breaks the set-up there); `opts.wait_s`: how
--- long a daemon has to write its pid file (default 30 s).
function M.start(opts)
  opts = opts or {}
  local dir = h.tmpdir()
  local self = setmetatable({ dir = dir, pids = {}, argv = {} }, Cluster)
  for _, d in ipairs({ 'state', 'spool/n1', 'spool/n2', 'log', 'munge' }) do
    assert(fs.mkdir_p(dir .. '/' .. d))
  end
  assert(proc.run({ 'chmod', '755', dir }))
  self.conf = dir .. '/slurm.conf'
  self.env = { SLURM_CONF = self.conf }
  -- munge: a daemon of this cluster's own, as the munge user, with the machine's key.
  if not fs.is_file('/etc/munge/munge.key') then
    assert(proc.run({ 'mungekey', '-c', '-k', '/etc/munge/munge.key' }))
    assert(proc.run({ 'chown', 'munge:munge', '/etc/munge/munge.key' }))
    assert(proc.run({ 'chmod', '400', '/etc/munge/munge.key' }))
  end
  local md = dir .. '/munge'
  self.munge_socket = md .. '/munge.socket'
  assert(proc.run({ 'chown', 'munge:munge', md }))
  local mr = assert(proc.run(daemon({ 'runuser', '-u', 'munge', '--', '/usr/sbin/munged',
    '--socket=' .. self.munge_socket, '--pid-file=' .. md .. '/munged.pid',
    '--log-file=' .. md .. '/munged.log', '--seed-file=' .. md .. '/munged.seed' }),
    { timeout = 30 }))
  if mr.code ~= 0 then
    error(string.format('slurm cluster: munged exited %d: %s%s\n%s', mr.code, mr.stdout,
      mr.stderr, h.read(md .. '/munged.log') or ''), 0)
  end
  wait_for(function()
    return read_pid(md .. '/munged.pid') ~= nil
  end, 10, 'munged pid file')
  self.pids.munged = read_pid(md .. '/munged.pid')
  local ctld_port, slurmd_port = ports()
  h.write(self.conf, table.concat({
    'ClusterName=tptest',
    'SlurmctldHost=localhost',
    'SlurmUser=root',
    'SlurmctldPort=' .. ctld_port,
    'SlurmdPort=' .. slurmd_port,
    'AuthType=auth/munge',
    'AuthInfo=socket=' .. self.munge_socket,
    'StateSaveLocation=' .. dir .. '/state',
    'SlurmdSpoolDir=' .. dir .. '/spool/%n',
    'SlurmctldPidFile=' .. dir .. '/slurmctld.pid',
    'SlurmdPidFile=' .. dir .. '/slurmd-%n.pid',
    'SlurmctldLogFile=' .. dir .. '/log/slurmctld.log',
    'SlurmdLogFile=' .. dir .. '/log/slurmd-%n.log',
    'ProctrackType=proctrack/linuxproc',
    'TaskPlugin=task/none',
    'SchedulerType=sched/backfill',
    'SelectType=select/cons_tres',
    'SelectTypeParameters=CR_Core',
    'ReturnToService=2',
    'MpiDefault=none',
    -- Finished jobs stay visible to scontrol (no accounting here) for 10 minutes.
    'MinJobAge=600',
    -- Time limits are enforced on this sweep (seconds); the default is 30.
    'OverTimeLimit=0',
    'KillWait=5',
    string.format('NodeName=n[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d-%d '
      .. 'CPUs=2 RealMemory=4000 State=UNKNOWN', slurmd_port, slurmd_port + 1),
    'PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP',
  }, '\n') .. '\n')
  if opts.prepare then
    opts.prepare(dir)
  end
  -- A daemon that did not start: stop the others, keep the logs, and say why.
  local function failed(name, what)
    self:stop()
    local kept, why = self:keep_logs()
    error(string.format('slurm cluster: %s %s\n%s\n(%s)', name, what, self:logs(name),
      kept and ("the daemons' logs are kept in " .. kept)
        or ("the daemons' logs could not be kept: " .. tostring(why))), 0)
  end
  local function start(argv, pidfile, name)
    self.argv[name] = argv
    local r = assert(proc.run(daemon(argv), { env = self.env, timeout = 60 }))
    if r.code ~= 0 then
      local out = (r.stdout .. r.stderr):gsub('%s+$', '')
      failed(name, string.format('exited %d%s', r.code, out ~= '' and (': ' .. out) or ''))
    end
    local ok, err = pcall(wait_for, function()
      return read_pid(pidfile) ~= nil
    end, opts.wait_s or 30, name .. ' pid file')
    if not ok then
      failed(name, 'did not start: ' .. tostring(err):gsub('^slurm cluster: ', ''))
    end
    self.pids[name] = read_pid(pidfile)
  end
  start({ '/usr/sbin/slurmctld', '-f', self.conf }, dir .. '/slurmctld.pid', 'slurmctld')
  start({ '/usr/sbin/slurmd', '-f', self.conf, '-N', 'n1' }, dir .. '/slurmd-n1.pid', 'slurmd-n1')
  start({ '/usr/sbin/slurmd', '-f', self.conf, '-N', 'n2' }, dir .. '/slurmd-n2.pid', 'slurmd-n2')
  local ok, err = pcall(wait_for, function()
    local r = proc.run({ 'sinfo', '-h', '-o', '%t %D' }, { env = self.env, timeout = 10 })
    return r and r.code == 0 and r.stdout:match('^idle 2') ~= nil
  end, 30, 'two idle nodes')
  if not ok then
    failed('the cluster', 'did not come up: ' .. tostring(err):gsub('^slurm cluster: ', ''))
  end
  return self
end

--- Runs a Slurm client command against this cluster; returns proc.run's result.
function Cluster:run(argv)
  return assert(proc.run(argv, { env = self.env, timeout = 60 }))
end

--- Cancels every job, waits for the queue to empty, then stops the daemons this fixture
--- started (SIGTERM, SIGKILL after 10 s), by pid. Idempotent.
function Cluster:stop()
  if self.stopped then
    return
  end
  self.stopped = true
  if self.pids.slurmctld then
    pcall(self.run, self, { 'scancel', '--partition=debug' })
    pcall(wait_for, function()
      local r = proc.run({ 'squeue', '-h' }, { env = self.env, timeout = 10 })
      return not r or r.code ~= 0 or not r.stdout:match('%S')
    end, 30, 'an empty queue')
  end
  for _, name in ipairs({ 'slurmd-n1', 'slurmd-n2', 'slurmctld', 'munged' }) do
    -- A daemon that started without writing its pid file is found by its exact command line.
    local pids = self.pids[name] and { self.pids[name] }
      or (self.argv[name] and pids_of(self.argv[name])) or {}
    for _, pid in ipairs(pids) do
      proc.run({ 'kill', '-TERM', tostring(pid) })
      if not proc.wait_gone({ pid }, 10) then
        proc.run({ 'kill', '-KILL', tostring(pid) })
        proc.wait_gone({ pid }, 5)
      end
    end
  end
end

-- The last `n` lines of `text`.
local function tail(text, n)
  local lines = {}
  for line in text:gmatch('[^\n]+') do
    lines[#lines + 1] = line
    if #lines > n then
      table.remove(lines, 1)
    end
  end
  return table.concat(lines, '\n')
end

--- The last lines of the daemons' logs, for a failing test's message: 40 of `first`'s (the
--- daemon that failed) first, then 10 of each other's; a log that is missing or empty says so.
function Cluster:logs(first)
  local order = { first }
  for _, n in ipairs(DAEMONS) do
    if n ~= first then
      order[#order + 1] = n
    end
  end
  local out = {}
  for _, n in ipairs(order) do
    local path = self.dir .. '/log/' .. n .. '.log'
    local text = h.read(path)
    local lines = n == first and 40 or 10
    if not text then
      out[#out + 1] = string.format('== %s: no log (%s)', n, path)
    elseif not text:match('%S') then
      out[#out + 1] = string.format('== %s: its log is empty (%s)', n, path)
    else
      out[#out + 1] = string.format('== %s: the last lines of %s\n%s', n, path, tail(text, lines))
    end
  end
  return table.concat(out, '\n')
end

--- Copies the daemons' logs (and slurm.conf) out of the cluster's temp dir, which goes when the
--- spec file ends, into a new directory under the build directory's slurm-logs/; returns it (or
--- nil and why).
function Cluster:keep_logs()
  local root = h.build_dir .. '/slurm-logs'
  local ok, err = fs.mkdir_p(root)
  if not ok then
    return nil, err
  end
  local kept = root .. '/' .. os.date('!%Y%m%dT%H%M%SZ') .. '-' .. fs.basename(self.dir)
  local r = proc.run({ 'cp', '-R', self.dir .. '/log', kept })
  if not r or r.code ~= 0 then
    return nil, r and r.stderr or 'cp failed'
  end
  proc.run({ 'cp', self.conf, kept .. '/slurm.conf' })
  proc.run({ 'cp', self.dir .. '/munge/munged.log', kept .. '/munged.log' })
  return kept
end

return M
