-- tp.launch.slurm and tp.launch.ranks without a cluster: the host-list parser, scontrol's
-- one-line records, the batch script each option produces (GPU requests, containers, task
-- layouts, rendezvous), the per-rank environment, and the plan of recipes with several nodes.
local h = require('helper')
local launch = require('tp.launch')
local slurm = require('tp.launch.slurm')
local ranks = require('tp.launch.ranks')

local function cmd_of(argv, env, extra)
  local c = { argv = argv, env = env or {} }
  for k, v in pairs(extra or {}) do
    c[k] = v
  end
  return c
end

local MEGATRON = cmd_of({ 'python3', '/w/Megatron-LM/pretrain_gpt.py', '--lr', '0.0003' },
  { CUDA_DEVICE_MAX_CONNECTIONS = '1', HF_TOKEN = 'hf_secret' }, { launcher = 'torchrun' })
local REF = cmd_of({ '/usr/bin/python3', '/t/reftrain.py', '--train-iters', '5' }, {},
  { launcher = 'torchrun', env_init = true })
local PRIMUS = cmd_of({ 'bash', '/w/Primus/runner/primus-cli', 'direct', '--', 'train' }, {},
  { launcher = 'self', cwd = '/w/Primus' })

local function has_line(text, line)
  for l in text:gmatch('[^\n]+') do
    if l == line then
      return true
    end
  end
  return false
end

local function srun_line(text)
  for l in text:gmatch('[^\n]+') do
    if l:match('^srun ') then
      return l
    end
  end
end

describe('tp.launch.slurm', function()
  describe('expand_nodelist', function()
    it('expands ranges, lists and plain names in order', function()
      assert.are.same({ 'gpu01', 'gpu02', 'gpu03', 'gpu04', 'gpu07', 'cpu3' },
        slurm.expand_nodelist('gpu[01-04,07],cpu3'))
      assert.are.same({ 'n1', 'n2' }, slurm.expand_nodelist('n[1-2]'))
      assert.are.same({ 'node' }, slurm.expand_nodelist('node'))
      assert.are.same({ 'nid008', 'nid009', 'nid010' }, slurm.expand_nodelist('nid[008-010]'))
      assert.are.same({}, slurm.expand_nodelist(''))
      assert.are.same({}, slurm.expand_nodelist('(null)'))
    end)

    it('multiplies several bracket groups, as Slurm does', function()
      assert.are.same({ 'r1-n01', 'r1-n02', 'r2-n01', 'r2-n02' },
        slurm.expand_nodelist('r[1-2]-n[01-02]'))
    end)

    it('names the expression and the fault of a malformed list', function()
      for expr, why in pairs({
        ['gpu[01-'] = "'[' without ']'",
        ['gpu]1['] = "']' without '['",
        ['gpu[3-1]'] = 'runs backwards',
        ['gpu[x]'] = "'x' is not a number or a range",
        ['gpu[[1]]'] = 'nested brackets',
        ['a,,b'] = 'empty host name',
        ['a b'] = 'spaces inside',
      }) do
        local hosts, err = slurm.expand_nodelist(expr)
        assert.is_nil(hosts, expr)
        assert.truthy(err:find("host list '" .. expr .. "'", 1, true), err)
        assert.truthy(err:find(why, 1, true), err)
      end
    end)

    it('refuses lists larger than the limit before building them', function()
      local hosts, err = slurm.expand_nodelist('n[1-100000000]', 1000)
      assert.is_nil(hosts)
      assert.truthy(err:find('more than 1000 hosts', 1, true))
    end)
  end)

  describe('parse_scontrol and STATES', function()
    it('reads Name=Value pairs, values with spaces included', function()
      local kv = slurm.parse_scontrol('JobId=42 JobName=tplua-x UserId=root(0) JobState=TIMEOUT '
        .. 'Reason=TimeLimit Dependency=(null) ExitCode=0:15 Command=/a b/job.sbatch '
        .. 'NodeList=gpu[01-02] BatchHost=gpu01')
      assert.are.equal('42', kv.JobId)
      assert.are.equal('TIMEOUT', kv.JobState)
      assert.are.equal('0:15', kv.ExitCode)
      assert.are.equal('/a b/job.sbatch', kv.Command)
      assert.are.equal('gpu[01-02]', kv.NodeList)
    end)

    it('maps every final state to a run outcome, never crash for a signal from outside', function()
      assert.are.equal('completed', slurm.STATES.COMPLETED.outcome)
      assert.are.equal('timeout', slurm.STATES.TIMEOUT.outcome)
      assert.are.equal('preempted', slurm.STATES.PREEMPTED.outcome)
      assert.are.equal('cancelled', slurm.STATES.CANCELLED.outcome)
      assert.are.equal('node_failure', slurm.STATES.NODE_FAIL.outcome)
      assert.are.equal('oom', slurm.STATES.OUT_OF_MEMORY.outcome)
      assert.are.equal('crash', slurm.STATES.FAILED.outcome)
      assert.is_false(slurm.STATES.PENDING.final)
      assert.is_false(slurm.STATES.RUNNING.final)
    end)
  end)

  describe('wrap', function()
    it('writes the batch script and follows it with tplua slurm job', function()
      local c = slurm.wrap(MEGATRON, { dir = '/shared/out/run1', nodes = 2, gpus_per_node = 8,
        partition = 'gpu', account = 'proj', qos = 'high', time = '02:00:00', exclusive = true,
        constraint = 'h100', sbatch_args = { '--mem=0' }, tplua = '/opt/tplua', poll = 2 })
      assert.are.same({ '/opt/tplua', 'slurm', 'job', '/shared/out/run1', '--poll', '2' }, c.argv)
      assert.are.equal('/shared/out/run1', c.files_dir)
      assert.are.equal('slurm', c.launcher)
      local s = c.files['job.sbatch']
      for _, line in ipairs({ '#!/bin/bash', '#SBATCH --nodes=2', '#SBATCH --ntasks-per-node=1',
        '#SBATCH --gpus-per-node=8', '#SBATCH --partition=gpu', '#SBATCH --account=proj',
        '#SBATCH --qos=high', '#SBATCH --time=02:00:00', '#SBATCH --exclusive',
        '#SBATCH --constraint=h100', '#SBATCH --mem=0',
        '#SBATCH --output=/shared/out/run1/slurm-%j.out',
        'export CUDA_DEVICE_MAX_CONNECTIONS=1', 'export HF_TOKEN',
        'export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))' }) do
        assert.is_true(has_line(s, line), line .. '\n' .. s)
      end
      -- A secret reaches the job through the environment, never through the script.
      assert.is_nil(s:find('hf_secret', 1, true))
      assert.are.equal('hf_secret', c.env.HF_TOKEN)
      -- One torchrun per node, node rank from Slurm, static rendezvous at node 0.
      assert.are.equal('srun --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=1 '
        .. '--output=/shared/out/run1/node-%n.log torchrun --nnodes 2 --nproc-per-node 8 '
        .. '--node-rank "$SLURM_NODEID" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" '
        .. '/w/Megatron-LM/pretrain_gpt.py --lr 0.0003', srun_line(s))
    end)

    it('starts one task per GPU with env init for trainers that take it', function()
      local c = slurm.wrap(REF, { dir = '/o/r', nodes = 2, gpus_per_node = 2, gpus = false })
      local s = c.files['job.sbatch']
      assert.is_true(has_line(s, '#SBATCH --ntasks-per-node=2'))
      assert.is_nil(s:find('gpus-per-node', 1, true))
      local line = srun_line(s)
      assert.truthy(line:find("bash -c 'export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID "
        .. 'WORLD_SIZE=$SLURM_NTASKS', 1, true), line)
      local tail = "tplua-task /usr/bin/python3 /t/reftrain.py --train-iters 5"
      assert.are.equal(tail, line:sub(-#tail))
      assert.are.equal('per_gpu', c.slurm.tasks)
      -- tasks = 'per_node' chooses torchrun instead.
      local t = slurm.wrap(REF, { dir = '/o/r', nodes = 2, gpus_per_node = 2, tasks = 'per_node' })
      assert.truthy(srun_line(t.files['job.sbatch']):find('torchrun --nnodes 2', 1, true))
    end)

    it('gives a command that starts its own workers NNODES and NODE_RANK', function()
      local c = slurm.wrap(PRIMUS, { dir = '/o/p', nodes = 4, gpus_per_node = 8 })
      local s = c.files['job.sbatch']
      assert.is_true(has_line(s, 'export GPUS_PER_NODE=8'))
      assert.is_true(has_line(s, 'cd /w/Primus'))
      assert.truthy(srun_line(s):find("bash -c 'export NNODES=$SLURM_NNODES "
        .. "NODE_RANK=$SLURM_NODEID; exec \"$@\"' tplua-node bash /w/Primus/runner/primus-cli", 1,
        true))
      assert.has_error(function()
        slurm.wrap(PRIMUS, { dir = '/o/p', tasks = 'per_gpu' })
      end)
    end)

    it('runs in a container through pyxis or apptainer with the run directory mounted', function()
      local p = slurm.wrap(MEGATRON, { dir = '/o/c', container_image = 'nvcr.io#nvidia/pytorch',
        container_mounts = { '/data:/data' } })
      local line = srun_line(p.files['job.sbatch'])
      assert.truthy(line:find('--container-image=nvcr.io#nvidia/pytorch', 1, true), line)
      assert.truthy(line:find('--container-mounts=/data:/data,/o/c:/o/c', 1, true), line)
      local a = slurm.wrap(MEGATRON, { dir = '/o/c', container_image = '/img/rocm.sif',
        container = 'apptainer', vendor = 'amd' })
      line = srun_line(a.files['job.sbatch'])
      assert.truthy(line:find('apptainer exec --rocm --bind /o/c:/o/c /img/rocm.sif torchrun',
        1, true), line)
    end)

    it('takes gres instead of gpus-per-node', function()
      local s = slurm.wrap(MEGATRON, { dir = '/o/g', gres = 'gpu:8' }).files['job.sbatch']
      assert.is_true(has_line(s, '#SBATCH --gres=gpu:8'))
      assert.is_nil(s:find('gpus-per-node', 1, true))
    end)

    it('refuses bad options with the option named', function()
      for _, case in ipairs({
        { { dir = 'rel/dir' }, 'option dir must be an absolute path' },
        { { dir = '/o/x y' }, 'must not contain spaces' },
        { { dir = '/o/x', time = '1h' }, "option time must be minutes or '[D-]HH:MM:SS'" },
        { { dir = '/o/x', nodes = 0 }, 'option nodes must be a positive integer' },
        { { dir = '/o/x', tasks = 'per_core' }, "option tasks must be 'per_gpu' or 'per_node'" },
        { { dir = '/o/x', partition = 'a b' }, 'option partition: no spaces or quotes' },
        { { dir = '/o/x', sbatch_args = { 'mem=0' } }, 'sbatch_args entries are options' },
        { { dir = '/o/x', container = 'docker' }, "option container must be 'pyxis' or" },
        { { dir = '/o/x', colour = 'red' }, 'unknown option colour' },
      }) do
        local ok, err = pcall(slurm.wrap, MEGATRON, case[1])
        assert.is_false(ok)
        assert.truthy(tostring(err):find(case[2], 1, true), tostring(err))
      end
    end)
  end)
end)

describe('tp.launch.slurm.read_script', function()
  local function job_of(cmd, opts)
    local o = { dir = '/shared/run1', nodes = 2, gpus_per_node = 4, partition = 'gpu' }
    for k, v in pairs(opts or {}) do
      if v == 'none' then
        v = nil
      end
      o[k] = v
    end
    local w = slurm.wrap(cmd, o)
    local u = launch.unwrap(w.argv, w.files)
    assert.are.equal('slurm', u.launcher)
    return u, slurm.read_script(w.files[slurm.SCRIPT])
  end

  it('reads the options and the command of one task per GPU', function()
    local u, job = job_of(REF)
    assert.are.same(REF.argv, job.argv)
    assert.are.same(REF.argv, u.argv)
    assert.are.equal('gpu', job.options.partition)
    assert.are.equal('2', job.options.nodes)
    assert.are.equal('4', job.options['gpus-per-node'])
    assert.is_true(job.options['no-requeue'])
    assert.are.same(job.options, u.slurm)
  end)

  it("reads torchrun's and a self-launching command's, and a GRES request", function()
    local u, job = job_of(MEGATRON, { gres = 'gpu:h100:4', partition = 'none' })
    assert.are.same({ 'python3', '/w/Megatron-LM/pretrain_gpt.py', '--lr', '0.0003' }, job.argv)
    assert.are.equal('torchrun', u.runner)
    assert.are.equal('gpu:h100:4', job.options.gres)
    assert.is_nil(job.options['gpus-per-node'])
    assert.is_nil(job.options.partition)
    local _, self = job_of(PRIMUS, { gpus = false })
    assert.are.same(PRIMUS.argv, self.argv)
    assert.is_nil(self.options['gpus-per-node'])
    -- Quotes inside words survive the script's quoting.
    local _, q = job_of(cmd_of({ 'python3', "/w/it's here/x.py", 'a b' }, {},
      { env_init = true }))
    assert.are.same({ 'python3', "/w/it's here/x.py", 'a b' }, q.argv)
  end)
end)

describe('tp.launch.ranks', function()
  it('wraps a command in tplua ranks', function()
    local c = ranks.wrap(REF, { nproc_per_node = 4, tplua = '/opt/tplua' })
    assert.are.same({ '/opt/tplua', 'ranks', '--nproc-per-node', '4', '--', '/usr/bin/python3',
      '/t/reftrain.py', '--train-iters', '5' }, c.argv)
    local m = ranks.wrap(REF, { nproc_per_node = 2, nnodes = 2, node_rank = 1,
      master_addr = 'n1', master_port = 29400, tplua = 't' })
    assert.are.same({ 't', 'ranks', '--nproc-per-node', '2', '--nnodes', '2', '--node-rank', '1',
      '--master-addr', 'n1', '--master-port', '29400', '--' }, { table.unpack(m.argv, 1, 13) })
  end)

  it('refuses several nodes without a rendezvous, and self-launching commands', function()
    assert.has_error(function()
      ranks.wrap(REF, { nproc_per_node = 2, nnodes = 2 })
    end, 'launch.ranks: master_addr and master_port are required when nnodes > 1')
    assert.has_error(function()
      ranks.wrap(PRIMUS, { nproc_per_node = 2 })
    end)
  end)

  it("gives each rank torch.distributed's environment", function()
    local o = { nproc_per_node = 4, nnodes = 2, node_rank = 1, master_addr = 'n1',
      master_port = 29400 }
    assert.are.same({ RANK = '6', LOCAL_RANK = '2', WORLD_SIZE = '8', LOCAL_WORLD_SIZE = '4',
      GROUP_RANK = '1', NODE_RANK = '1', MASTER_ADDR = 'n1', MASTER_PORT = '29400' },
      ranks.worker_env(2, o))
  end)

  it('picks a port no socket of this machine uses', function()
    local p = ranks.free_port()
    assert.is_true(p >= 20000 and p <= 39999)
    assert.is_nil(ranks.ports_in_use()[p])
    -- A socket that listens on it (held by a Python that asks tplua meanwhile) is seen.
    local r = assert(require('tp.proc').run({ 'python3', '-c', string.format([[
import socket, subprocess, sys
s = socket.socket()
s.bind(("127.0.0.1", %d))
s.listen()
sys.stdout.write(subprocess.run([%q, "-e",
  "io.write(tostring(require('tp.launch.ranks').ports_in_use()[%d]))"],
  capture_output=True, text=True).stdout)
]], p, h.bin, p) }, { timeout = 60 }))
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('true', r.stdout)
  end)

  it('gives different ports to tplua processes started together', function()
    -- Lua seeds math.random from the time and an address; under a sanitizer's allocator two
    -- processes started in the same second got the same port and one rendezvous failed.
    local proc = require('tp.proc')
    local loop <close> = proc.loop()
    local procs = {}
    for i = 1, 6 do
      procs[i] = assert(loop:spawn({ argv = { h.bin, '-e',
        "io.write(require('tp.launch.ranks').free_port())" }, capture = true }))
    end
    local seen = {}
    for _, p in ipairs(procs) do
      local port = assert(tonumber(p:wait().stdout))
      assert.is_nil(seen[port], 'port ' .. port .. ' picked twice')
      seen[port] = true
    end
  end)
end)

describe('recipes with several nodes', function()
  local experiment = require('tp.experiment')
  local function def(extra)
    local d = { name = 'multi', model = 'ref-tiny',
      platforms = { nvd = { framework = 'reference' } },
      training = { mbs = 4, gbs = 16, seq_len = 64, iters = 10, lr = 3e-3, dataset = 'mock' },
      nodes = 2, gpus_per_node = 2, results = '/tmp/tplua-multi' }
    for k, v in pairs(extra or {}) do
      d[k] = v
    end
    return experiment.new(d)
  end

  it('refuses to plan node 0 alone on this machine', function()
    for _, l in ipairs({ 'torchrun', 'ranks', 'container' }) do
      local p = def({ container = { image = 'x' } }):plan({ launcher = l })
      assert.is_false(p.ok, l)
      local found
      for _, f in ipairs(p.findings) do
        found = found or (f.message:find('nodes = 2', 1, true)
          and f.message:find('use --launcher slurm', 1, true))
      end
      assert.truthy(found, l)
    end
  end)

  it('plans one Slurm job per run with its batch script', function()
    local p = def({ launcher = 'slurm', slurm = { partition = 'debug', gpus = false } }):plan()
    assert.is_true(p.ok)
    local r = p.runs[1]
    assert.are.equal('slurm', r.launcher)
    assert.are.same({ 'slurm', 'job', r.output }, { table.unpack(r.argv, 2, 4) })
    local s = r.files['job.sbatch']
    assert.is_true(has_line(s, '#SBATCH --partition=debug'))
    assert.is_true(has_line(s, '#SBATCH --ntasks-per-node=2'))
    local runs = experiment.campaign_runs(p)
    assert.are.equal('slurm', runs[1].launcher)
    assert.are.equal(r.output, runs[1].files_dir)
    -- The printed plan shows the script whole.
    local text = require('tp.plan').format(p)
    assert.truthy(text:find('| #SBATCH --nodes=2', 1, true))
  end)

  it('names the slurm option a recipe got wrong', function()
    local p = def({ launcher = 'slurm', slurm = { time = 'soon' } }):plan()
    assert.is_false(p.ok)
    local found
    for _, f in ipairs(p.findings) do
      found = found or (f.severity == 'error'
        and f.message:find('nvd: slurm: option time must be', 1, true))
    end
    assert.truthy(found)
  end)
end)

describe('launch.describe of a Slurm command', function()
  it('shows the follower, secrets redacted', function()
    local c = slurm.wrap(MEGATRON, { dir = '/o/d', tplua = 'tplua' })
    assert.are.equal("HF_TOKEN='<redacted>' tplua slurm job /o/d", launch.describe(c))
  end)
end)
