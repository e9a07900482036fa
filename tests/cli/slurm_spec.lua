-- Runs through a REAL Slurm cluster (munge, slurmctld and two slurmd "nodes" on this host, started
-- by tests/slurm_cluster.lua and stopped by pid) with the real binary: the 2-node x 2-rank
-- reference training matches a local 4-rank run, and a failing job, a job cancelled from
-- outside, a job over its time limit and a tplua killed with SIGKILL while its job runs each end
-- as a user would expect; the preflight of a Slurm campaign asks the cluster for its partition.
-- Needs root, Slurm, munge and python3-torch; pending without them.
local h = require('helper')
local json = require('tp.json')
local proc = require('tp.proc')
local campaign = require('tp.campaign')
local cluster_mod = require('slurm_cluster')

local function missing()
  local ok, why = cluster_mod.available()
  if not ok then
    return why
  end
  return h.torch_missing()
end

local function events(dir)
  return assert(campaign.read_journal(dir .. '/journal.jsonl')).events
end

local function events_of(dir, kind)
  local out = {}
  for _, e in ipairs(events(dir)) do
    if e.event == kind then
      out[#out + 1] = e
    end
  end
  return out
end

-- A campaign of one reference run as a 2 x 2 Slurm job, with extra trainer flags and slurm
-- options (a Lua table constructor's text).
local function campaign_file(dir, id, extra, slurm_opts, iters)
  local path = dir .. '/' .. id .. '.lua'
  h.write(path, string.format([[
local tp = require('tp')
local ref = tp.frameworks.get('reference')
local config = ref.smoke_config(2, 2)
config.training.iters = %d
local cmd = ref.build(config)
for _, a in ipairs(%s) do cmd.argv[#cmd.argv + 1] = a end
local opts = { dir = %q, nodes = 2, gpus_per_node = 2, gpus = false, poll = 1 }
for k, v in pairs(%s) do opts[k] = v end
local job = tp.launch.get('slurm').wrap(cmd, opts)
return tp.campaign({ results = %q, runs = { { id = %q, argv = job.argv, env = job.env,
  files = job.files, files_dir = job.files_dir, launcher = job.launcher, parser = 'megatron',
  framework = 'reference', config = config, timeout = 900 } } })
]], iters or 40, extra or '{}', dir .. '/' .. id, slurm_opts or '{}', dir, id))
  return path
end

-- Starts tplua in the background; returns the process.
local function spawn_tplua(args, env)
  local argv = { h.bin }
  for _, a in ipairs(args) do
    argv[#argv + 1] = a
  end
  return assert(proc.spawn({ argv = argv, env = env, cwd = h.source_dir, capture = true }))
end

-- Polls until `check()` is true (every 0.2 s, at most `timeout` seconds).
local function wait_until(check, timeout, what)
  local clock = require('tp.gpu').now
  local deadline = clock() + timeout
  local loop <close> = proc.loop()
  while not check() do
    assert(clock() < deadline, what .. ' did not happen within ' .. timeout .. ' s')
    loop:spawn({ argv = { 'sleep', '0.2' } })
    loop:run()
  end
end

describe('tplua on a real Slurm cluster #slow', function()
  local why = missing()
  if why then
    it('runs training jobs through Slurm', function()
      pending(why)
    end)
    return
  end

  local cluster
  setup(function()
    cluster = cluster_mod.start()
  end)
  teardown(function()
    if cluster then
      cluster:stop()
    end
  end)

  local function tplua(args, extra_env)
    local env = { SLURM_CONF = cluster.conf }
    for k, v in pairs(extra_env or {}) do
      env[k] = v
    end
    return h.run(args, { env = env, cwd = h.source_dir })
  end

  it('runs the 2-node x 2-rank smoke job, with the losses of a local 4-rank run', function()
    local dir = h.tmpdir()
    local plan = tplua({ 'plan', 'examples/slurm_smoke.lua' }, { TPLUA_SMOKE_DIR = dir })
    assert.are.equal(0, plan.code, plan.stderr)
    assert.truthy(plan.stdout:find('| #SBATCH --nodes=2', 1, true), plan.stdout)

    local r = tplua({ 'run', 'examples/slurm_smoke.lua' }, { TPLUA_SMOKE_DIR = dir })
    assert.are.equal(0, r.code, r.stdout .. r.stderr .. cluster:logs())
    local rec = assert(json.load_file(dir .. '/slurm-smoke-2x2.json'))
    assert.are.equal('completed', rec.status)
    assert.are.equal('COMPLETED', rec.slurm.state)
    assert.are.same({ 'n1', 'n2' }, rec.slurm.nodes)
    assert.are.equal(2, #rec.slurm.node_logs)
    assert.is_true(math.type(rec.slurm.job_id) == 'integer')
    assert.truthy(r.stdout:find('slurm: submitted batch job ' .. rec.slurm.job_id, 1, true))
    local jobs = events_of(dir, 'slurm_job')
    assert.are.equal(1, #jobs)
    assert.are.equal(rec.slurm.job_id, jobs[1].job_id)

    local ldir = h.tmpdir()
    local l = tplua({ 'run', 'examples/smoke.lua', '--results', ldir },
      { TPLUA_SMOKE_RANKS = '4' })
    assert.are.equal(0, l.code, l.stdout .. l.stderr)
    local lrec = assert(json.load_file(ldir .. '/smoke-4ranks.json'))
    assert.are.same(lrec.iterations, rec.iterations)
    assert.are.equal(#lrec.loss_values, #rec.loss_values)
    for i, v in ipairs(lrec.loss_values) do
      assert.is_true(math.abs(v - rec.loss_values[i]) <= 1e-4,
        string.format('iteration %d: local %.6f, slurm %.6f', lrec.iterations[i], v,
          rec.loss_values[i]))
    end
    assert.are.same(lrec.learning_rates, rec.learning_rates)
    assert.are.equal(lrec.training_config.global_batch_size, rec.training_config.global_batch_size)
    assert.are.equal(lrec.training_config.seq_length, rec.training_config.seq_length)
  end)

  it('runs a recipe through Slurm from a machine without its GPUs', function()
    local dir = h.tmpdir()
    local path = dir .. '/recipe.lua'
    h.write(path, string.format([[
local tp = require('tp')
local config = tp.frameworks.get('reference').smoke_config(2, 2)
return tp.experiment({ name = 'slurm recipe', model = 'ref-tiny',
  platforms = { nvd = { framework = 'reference' } }, training = config.training,
  nodes = 2, gpus_per_node = 2, launcher = 'slurm', slurm = { gpus = false, poll = 1 },
  results = %q, repeats = 2 })
]], dir))
    local r = tplua({ 'run', path, '--concurrency', '2' })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.truthy(r.stdout:find('run: platform nvd (submitted through Slurm): 2 run(s)', 1, true),
      r.stdout)
    -- The preflight asked the cluster (sinfo) for the partition before submitting.
    assert.truthy(r.stdout:find("info    slurm     partition 'debug': 2 node(s), up to 0 GPU(s) "
      .. 'per node', 1, true), r.stdout)
    assert.truthy(r.stdout:find('preflight: passed', 1, true), r.stdout)
    local jobs = events_of(dir, 'slurm_job')
    assert.are.equal(2, #jobs)
    assert.are_not.equal(jobs[1].job_id, jobs[2].job_id)
    local finished = events_of(dir, 'finished')
    assert.are.equal(2, #finished)
    for _, f in ipairs(finished) do
      local rec = assert(json.load_file(dir .. '/' .. f.record))
      assert.are.equal('completed', rec.status)
      assert.are.equal('COMPLETED', rec.slurm.state)
    end
  end)

  it('preflight names a missing partition and one without the GPUs requested', function()
    local dir = h.tmpdir()
    local function recipe(slurm, nodes)
      local path = dir .. '/pf.lua'
      h.write(path, string.format([[
local tp = require('tp')
local config = tp.frameworks.get('reference').smoke_config(2, %d)
return tp.experiment({ name = 'slurm preflight', model = 'ref-tiny',
  platforms = { nvd = { framework = 'reference' } }, training = config.training,
  nodes = %d, gpus_per_node = 2, launcher = 'slurm', slurm = %s, results = %q })
]], nodes or 2, nodes or 2, slurm, dir .. '/out'))
      return path
    end
    local r = tplua({ 'preflight', recipe("{ partition = 'gpu-h100', gpus = false }") })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.truthy(r.stdout:find("error   slurm     partition 'gpu-h100' does not exist (the "
      .. 'cluster has: debug)', 1, true), r.stdout)
    -- GPUs requested (--gpus-per-node) from nodes without GPU GRES.
    r = tplua({ 'preflight', recipe('{}') })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.truthy(r.stdout:find("error   slurm     partition 'debug' offers 0 GPU(s) per node "
      .. '(GRES); the runs request 2', 1, true), r.stdout)
    r = tplua({ 'preflight', recipe('{ gpus = false }', 3) })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.truthy(r.stdout:find("error   slurm     partition 'debug' has 2 node(s); the runs "
      .. 'need 3', 1, true), r.stdout)
  end)

  it('checks examples/slurm_smoke.lua before it submits: passes, or names what is wrong',
    function()
    local dir = h.tmpdir()
    local ok = tplua({ 'preflight', 'examples/slurm_smoke.lua' }, { TPLUA_SMOKE_DIR = dir })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.truthy(ok.stdout:find('preflight: run slurm-smoke-2x2 (slurm)', 1, true), ok.stdout)
    assert.truthy(ok.stdout:find("info    slurm     partition 'debug': 2 node(s), up to 0 GPU(s) "
      .. 'per node', 1, true), ok.stdout)
    assert.truthy(ok.stdout:find('preflight: passed (0 error(s), 0 warning(s)', 1, true),
      ok.stdout)
    local gpus = tplua({ 'preflight', 'examples/slurm_smoke.lua' },
      { TPLUA_SMOKE_DIR = dir, TPLUA_SLURM_GPUS_PER_NODE = '2' })
    assert.are.equal(1, gpus.code, gpus.stdout .. gpus.stderr)
    assert.truthy(gpus.stdout:find("error   slurm     partition 'debug' offers 0 GPU(s) per node "
      .. '(GRES); the runs request 2', 1, true), gpus.stdout)
    local env = { TPLUA_SMOKE_DIR = dir, TPLUA_SLURM_PARTITION = 'gpu-h100' }
    local bad = tplua({ 'preflight', 'examples/slurm_smoke.lua' }, env)
    assert.are.equal(1, bad.code, bad.stdout .. bad.stderr)
    assert.truthy(bad.stdout:find("error   slurm     partition 'gpu-h100' does not exist (the "
      .. 'cluster has: debug)', 1, true), bad.stdout)
    -- tplua run makes the same checks first and submits nothing.
    local function jobs()
      local q = cluster:run({ 'scontrol', 'show', 'job', '-o' })
      local n = 0
      for _ in q.stdout:gmatch('JobName=tplua%-slurm%-smoke%-2x2 ') do
        n = n + 1
      end
      return n
    end
    local before = jobs()
    local r = tplua({ 'run', 'examples/slurm_smoke.lua' }, env)
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.truthy(r.stdout:find("partition 'gpu-h100' does not exist", 1, true), r.stdout)
    assert.truthy(r.stdout:find('run: the preflight found errors: nothing started', 1, true),
      r.stdout)
    assert.is_nil(h.read(dir .. '/journal.jsonl'))
    assert.are.equal(before, jobs())
  end)

  it('records a failing job as failed, with the job state and the trainer error', function()
    local dir = h.tmpdir()
    local path = campaign_file(dir, 'fails', "{ '--fail-at', '3' }")
    local r = tplua({ 'run', path })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    local rec = assert(json.load_file(dir .. '/fails.json'))
    assert.are.equal('failed', rec.status)
    assert.are.equal('FAILED', rec.slurm.state)
    -- srun's status: a failed rank's 1, or 143 for the ranks --kill-on-bad-exit stopped.
    assert.is_true(rec.slurm.exit_code ~= 0, json.encode(rec.slurm))
    assert.truthy(tostring(rec.failure_reason):find('ended FAILED', 1, true))
    local log = h.read(dir .. '/fails.log')
    assert.truthy(log:find('failing at iteration 3 as asked', 1, true), log)
  end)

  it('records a job cancelled from outside as cancelled, never a crash', function()
    local dir = h.tmpdir()
    local path = campaign_file(dir, 'cancelme', "{ '--sleep-ms', '300' }", nil, 400)
    local p = spawn_tplua({ 'run', path }, { SLURM_CONF = cluster.conf })
    local job
    wait_until(function()
      local log = h.read(dir .. '/cancelme.log') or ''
      job = job or log:match('submitted batch job (%d+)')
      return job ~= nil and log:find('iteration', 1, true) ~= nil
    end, 120, 'the first iteration')
    local c = cluster:run({ 'scancel', job })
    assert.are.equal(0, c.code, c.stderr)
    local res = p:wait()
    assert.are.equal(1, res.code, json.encode(res))
    local rec = assert(json.load_file(dir .. '/cancelme.json'))
    assert.are.equal('failed', rec.status)
    assert.are.equal('cancelled', rec.stopped_by)
    assert.are.equal('CANCELLED', rec.slurm.state)
    assert.is_false(rec.slurm.cancelled_by_tplua)
  end)

  it('re-attaches to its running job after tplua is killed with SIGKILL', function()
    local dir = h.tmpdir()
    local path = campaign_file(dir, 'resume', "{ '--sleep-ms', '100' }", nil, 60)
    local p = spawn_tplua({ 'run', path }, { SLURM_CONF = cluster.conf })
    wait_until(function()
      return (h.read(dir .. '/resume.log') or ''):find('iteration', 1, true) ~= nil
    end, 120, 'the first iteration')
    p:kill('SIGKILL')
    p:wait()
    local r = tplua({ 'run', path })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.truthy(r.stdout:find('slurm: attached to job', 1, true), r.stdout)
    local jobs = events_of(dir, 'slurm_job')
    assert.are.equal(2, #jobs)
    assert.are.equal(jobs[1].job_id, jobs[2].job_id)
    assert.is_false(jobs[1].attached)
    assert.is_true(jobs[2].attached)
    local rec = assert(json.load_file(dir .. '/resume.json'))
    assert.are.equal('completed', rec.status)
    assert.are.equal(jobs[1].job_id, rec.slurm.job_id)
    assert.is_true(rec.slurm.attached)
    -- One job only: the cluster never saw a second submission.
    local q = cluster:run({ 'scontrol', 'show', 'job', '-o' })
    local count = 0
    for _ in q.stdout:gmatch('JobName=tplua%-resume ') do
      count = count + 1
    end
    assert.are.equal(1, count, q.stdout)
  end)

  it('submits again a job whose node failed (the retry policy), then completes', function()
    local dir = h.tmpdir()
    local path = campaign_file(dir, 'nodefail', "{ '--sleep-ms', '200' }", nil, 60)
    local p = spawn_tplua({ 'run', path }, { SLURM_CONF = cluster.conf })
    wait_until(function()
      return (h.read(dir .. '/nodefail.log') or ''):find('iteration', 1, true) ~= nil
    end, 120, 'the first iteration')
    local d = cluster:run({ 'scontrol', 'update', 'nodename=n2', 'state=down',
      'reason=tplua-test' })
    assert.are.equal(0, d.code, d.stderr)
    wait_until(function()
      return #events_of(dir, 'retry') > 0
    end, 120, 'the retry')
    -- ReturnToService=2 may have brought the node back when its slurmd registered again.
    local n = cluster:run({ 'scontrol', 'show', 'node', '-o', 'n2' })
    if n.stdout:find('State=DOWN', 1, true) then
      local u = cluster:run({ 'scontrol', 'update', 'nodename=n2', 'state=resume' })
      assert.are.equal(0, u.code, u.stderr)
    end
    local res = p:wait()
    assert.are.equal(0, res.code, json.encode(res))
    local failed = events_of(dir, 'failed')
    assert.are.equal(1, #failed)
    assert.are.equal('node_failure', failed[1].stopped_by)
    local retry = events_of(dir, 'retry')[1]
    assert.are.equal('node_failure', retry.stopped_by)
    assert.are.equal(1, retry.retry)
    local jobs = events_of(dir, 'slurm_job')
    assert.are.equal(2, #jobs)
    assert.are_not.equal(jobs[1].job_id, jobs[2].job_id)
    local rec = assert(json.load_file(dir .. '/nodefail.json'))
    assert.are.equal('completed', rec.status)
    assert.are.equal(jobs[2].job_id, rec.slurm.job_id)
  end)

  it('runs inside an existing allocation as a job step, not as a new job', function()
    local dir = h.tmpdir()
    local path = campaign_file(dir, 'inalloc', nil, nil, 10)
    local r = assert(proc.run({ 'salloc', '--nodes=2', '--ntasks-per-node=2', h.bin, 'run', path },
      { env = { SLURM_CONF = cluster.conf }, cwd = h.source_dir, timeout = 600 }))
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local alloc = tonumber(r.stderr:match('Granted job allocation (%d+)'))
    local rec = assert(json.load_file(dir .. '/inalloc.json'))
    assert.are.equal('completed', rec.status)
    assert.are.equal('step', rec.slurm.mode)
    assert.are.equal(alloc, rec.slurm.job_id)
    assert.are.same({ 'n1', 'n2' }, rec.slurm.nodes)
    local jobs = events_of(dir, 'slurm_job')
    assert.are.equal(1, #jobs)
    assert.is_true(jobs[1].step)
    local q = cluster:run({ 'scontrol', 'show', 'job', '-o' })
    assert.is_nil(q.stdout:find('JobName=tplua-inalloc ', 1, true), q.stdout)
  end)

  it('records a job over its time limit as timeout', function()
    local dir = h.tmpdir()
    local path = campaign_file(dir, 'slow', "{ '--sleep-ms', '2000' }", '{ time = 1 }', 400)
    local r = tplua({ 'run', path })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    local rec = assert(json.load_file(dir .. '/slow.json'))
    assert.are.equal('TIMEOUT', rec.slurm.state)
    assert.are.equal('timeout', rec.stopped_by)
    assert.are.equal('failed', rec.status)
  end)
end)
