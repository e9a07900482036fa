-- A real Slurm cluster for the specs: munge (reused when one already answers), one slurmctld and
-- two slurmd "nodes" on this host, from a slurm.conf generated in a temp dir on free ports.
-- `stop()` cancels what still runs and stops exactly the daemons it started, by their pids.
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

--- Starts the cluster. Returns it ({ dir, conf, env = { SLURM_CONF = ... }, stop = fn }).
function M.start()
  local dir = h.tmpdir()
  local self = setmetatable({ dir = dir, pids = {} }, Cluster)
  for _, d in ipairs({ 'state', 'spool/n1', 'spool/n2', 'log', 'munge' }) do
    assert(fs.mkdir_p(dir .. '/' .. d))
  end
  assert(proc.run({ 'chmod', '755', dir }))
  self.conf = dir .. '/slurm.conf'
  self.env = { SLURM_CONF = self.conf }
  -- munge: reuse a running daemon (the machine's), else start one as the munge user.
  local probe = proc.run({ 'munge', '-n' })
  if not (probe and probe.code == 0) then
    if not fs.is_file('/etc/munge/munge.key') then
      assert(proc.run({ 'mungekey', '-c', '-k', '/etc/munge/munge.key' }))
      assert(proc.run({ 'chown', 'munge:munge', '/etc/munge/munge.key' }))
      assert(proc.run({ 'chmod', '400', '/etc/munge/munge.key' }))
    end
    assert(fs.mkdir_p('/run/munge'))
    assert(proc.run({ 'chown', 'munge:munge', '/run/munge', dir .. '/munge' }))
    local r = assert(proc.run(daemon({ 'runuser', '-u', 'munge', '--', '/usr/sbin/munged',
      '--pid-file=' .. dir .. '/munge/munged.pid' }), { timeout = 30 }))
    assert(r.code == 0, 'munged: ' .. r.stderr)
    wait_for(function()
      return read_pid(dir .. '/munge/munged.pid') ~= nil
    end, 10, 'munged pid file')
    self.pids.munged = read_pid(dir .. '/munge/munged.pid')
  end
  local ctld_port, slurmd_port = ports()
  h.write(self.conf, table.concat({
    'ClusterName=tptest',
    'SlurmctldHost=localhost',
    'SlurmUser=root',
    'SlurmctldPort=' .. ctld_port,
    'SlurmdPort=' .. slurmd_port,
    'AuthType=auth/munge',
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
  local function start(argv, pidfile, name)
    local r = assert(proc.run(daemon(argv), { env = self.env, timeout = 60 }))
    if r.code ~= 0 then
      self:stop()
      error(string.format('slurm cluster: %s exited %d: %s', name, r.code, r.stderr))
    end
    local ok, err = pcall(wait_for, function()
      return read_pid(pidfile) ~= nil
    end, 30, name .. ' pid file')
    if not ok then
      local logs = self:logs()
      self:stop()
      error(tostring(err) .. '\n' .. logs, 0)
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
    self:stop()
    error(err)
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
    local pid = self.pids[name]
    if pid then
      proc.run({ 'kill', '-TERM', tostring(pid) })
      if not proc.wait_gone({ pid }, 10) then
        proc.run({ 'kill', '-KILL', tostring(pid) })
        proc.wait_gone({ pid }, 5)
      end
    end
  end
end

--- The last lines of the daemons' logs, for a failing test's message.
function Cluster:logs()
  local out = {}
  for _, n in ipairs({ 'slurmctld', 'slurmd-n1', 'slurmd-n2' }) do
    local text = h.read(self.dir .. '/log/' .. n .. '.log') or ''
    out[#out + 1] = '== ' .. n .. '\n' .. text:sub(-2000)
  end
  return table.concat(out, '\n')
end

return M
