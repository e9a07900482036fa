-- The Slurm test fixture (tests/slurm_cluster.lua) when a daemon does not start: the error says
-- which daemon and why, with the last lines of its log (where slurmd writes its reason) and of
-- the others', the logs are kept out of the temp dir that goes with the spec, and no daemon of
-- the failed cluster is left running, even one that runs without having written its pid file.
-- Two clusters at once (specs run in parallel) share no munged: stopping one leaves the other
-- working.
-- Needs root, Slurm and munge (real daemons); pending without them.
local h = require('helper')
local fs = require('tp.fs')
local cluster_mod = require('slurm_cluster')

-- The pids of the processes whose command line names `dir` (the failed cluster's temp dir).
local function running_in(dir)
  local out = {}
  for _, e in ipairs(fs.list('/proc') or {}) do
    if e.name:match('^%d+$') then
      local cmd = h.read('/proc/' .. e.name .. '/cmdline')
      local stat = h.read('/proc/' .. e.name .. '/stat') or ''
      -- A zombie (state Z) has exited; it only waits to be reaped.
      if cmd and cmd:find(dir, 1, true) and not stat:match('^%d+ %b() Z') then
        out[#out + 1] = e.name .. ' ' .. cmd:gsub('%z', ' ')
      end
    end
  end
  return out
end

-- Starts a cluster broken by `prepare`; returns the error message it fails with.
local function failing_start(prepare)
  local ok, err = pcall(cluster_mod.start, { prepare = prepare, wait_s = 5 })
  if ok then
    err:stop()
    error('the cluster started although its set-up was broken')
  end
  return tostring(err)
end

describe('the Slurm test fixture', function()
  local why
  setup(function()
    local ok, reason = cluster_mod.available()
    why = not ok and reason or nil
  end)

  it('says why slurmd exited, from its log, and keeps the logs', function()
    if why then
      pending(why)
      return
    end
    -- slurmd-n1's spool directory cannot be made: it exits 1, its reason only in its log.
    local err = failing_start(function(dir)
      assert(os.remove(dir .. '/spool/n2') and os.remove(dir .. '/spool/n1')
        and os.remove(dir .. '/spool'))
      h.write(dir .. '/spool', 'not a directory\n')
    end)
    assert.is_truthy(err:find('^slurm cluster: slurmd%-n1 exited 1\n'), err)
    local dir = err:match('== slurmd%-n1: the last lines of (/%S+)/log/slurmd%-n1%.log\n')
    assert.is_truthy(dir, err)
    -- Slurm's own reason, as slurmd logs it.
    assert.is_truthy(err:find('fatal: mkdir(' .. dir .. '/spool/n1): Not a directory', 1, true),
      err)
    assert.is_truthy(err:find('\n== slurmctld: the last lines of ', 1, true), err)
    assert.is_truthy(err:find('\n== slurmd-n2: no log (', 1, true), err)
    local kept = err:match("%(the daemons' logs are kept in (%S+)%)$")
    assert.is_truthy(kept, err)
    assert.is_truthy(h.read(kept .. '/slurmd-n1.log'):find('fatal: mkdir(', 1, true))
    assert.is_true(fs.is_file(kept .. '/slurmctld.log'))
    assert.is_true(fs.is_file(kept .. '/slurm.conf'))
    assert.are.same({}, running_in(dir))
    fs.remove_tree(kept)
  end)

  it('stops a daemon that runs without its pid file, and shows its log', function()
    if why then
      pending(why)
      return
    end
    -- slurmd-n1 cannot write its pid file (a directory stands there) but keeps running.
    local err = failing_start(function(dir)
      assert(fs.mkdir_p(dir .. '/slurmd-n1.pid'))
    end)
    assert.is_truthy(err:find('^slurm cluster: slurmd%-n1 did not start: slurmd%-n1 pid file did '
      .. 'not happen within 5 s\n'), err)
    local dir = err:match('== slurmd%-n1: the last lines of (/%S+)/log/slurmd%-n1%.log\n')
    assert.is_truthy(dir, err)
    assert.is_truthy(err:find("Unable to open pidfile `" .. dir .. "/slurmd-n1.pid': Is a "
      .. 'directory', 1, true), err)
    assert.are.same({}, running_in(dir))
    local kept = err:match("%(the daemons' logs are kept in (%S+)%)$")
    fs.remove_tree(assert(kept, err))
  end)

  it('gives each cluster its own munged: stopping one leaves the other running jobs', function()
    if why then
      pending(why)
      return
    end
    local a = cluster_mod.start()
    local ok, b = pcall(cluster_mod.start)
    if not ok then
      a:stop()
      error(b, 0)
    end
    finally(function()
      a:stop()
      b:stop()
    end)
    assert.are_not.equal(a.munge_socket, b.munge_socket)
    a:stop()
    local r = b:run({ 'srun', '-N2', '-n2', 'true' })
    assert.are.equal(0, r.code, r.stdout .. r.stderr .. b:logs())
    r = b:run({ 'sbatch', '--wait', '--output=/dev/null', '--wrap', 'exit 3' })
    assert.are.equal(3, r.code, r.stdout .. r.stderr)
  end)
end)
