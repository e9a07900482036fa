-- tp.launch (local, torchrun, container, describe, compose) and tp.profile (PATH check, the
-- per-framework profiler arguments and wrappers, trace locations).
local h = require('helper')
local launch = require('tp.launch')
local profile = require('tp.profile')

local function cmd_of(argv, env, extra)
  local c = { argv = argv, env = env or {} }
  for k, v in pairs(extra or {}) do
    c[k] = v
  end
  return c
end

local PY = cmd_of({ 'python3', '/w/Megatron-LM/pretrain_gpt.py', '--lr', '0.0003' },
  { CUDA_DEVICE_MAX_CONNECTIONS = '1' }, { launcher = 'torchrun' })

describe('tp.launch', function()
  describe('registry', function()
    it('lists and returns the launchers', function()
      assert.are.same({ 'container', 'local', 'ranks', 'slurm', 'torchrun' }, launch.list())
      for _, n in ipairs(launch.list()) do
        assert.are.equal('function', type(assert(launch.get(n)).wrap))
      end
      local l, err, code = launch.get('pbs')
      assert.is_nil(l)
      assert.are.equal('ENOENT', code)
      assert.truthy(err:find("unknown launcher 'pbs'", 1, true))
    end)
  end)

  describe('local', function()
    it('returns an equal copy', function()
      local out = launch.get('local').wrap(PY)
      assert.are.same(PY.argv, out.argv)
      assert.are.same(PY.env, out.env)
      out.argv[1] = 'changed'
      assert.are.equal('python3', PY.argv[1])
    end)

    it('rejects options and malformed commands', function()
      assert.has_error(function()
        launch.get('local').wrap(PY, { gpus = 2 })
      end, 'launch.local: unknown option gpus')
      assert.has_error(function()
        launch.get('local').wrap({ argv = {} })
      end, 'launch.local: cmd.argv must be a non-empty list')
      assert.has_error(function()
        launch.get('local').wrap({ argv = { 'x', 3 } })
      end, 'launch.local: cmd.argv[2] must be a string, got number')
    end)
  end)

  describe('torchrun', function()
    local torchrun = launch.get('torchrun')

    it('runs a script on one node with a standalone rendezvous', function()
      local out = torchrun.wrap(PY, { nproc_per_node = 8 })
      assert.are.same({ 'torchrun', '--nnodes', '1', '--nproc-per-node', '8', '--standalone',
                        '/w/Megatron-LM/pretrain_gpt.py', '--lr', '0.0003' }, out.argv)
      assert.are.same(PY.env, out.env)
      assert.are.equal('torchrun', out.launcher)
    end)

    it('keeps -m for modules and uses --no-python for other programs', function()
      local out = torchrun.wrap(cmd_of({ 'python3.11', '-m', 'torchtitan.train', '--x', '1' }),
        { nproc_per_node = 2 })
      assert.are.same({ 'torchrun', '--nnodes', '1', '--nproc-per-node', '2', '--standalone',
                        '-m', 'torchtitan.train', '--x', '1' }, out.argv)
      out = torchrun.wrap(cmd_of({ 'nsys', 'profile', 'python3', 't.py' }),
        { nproc_per_node = 2 })
      assert.are.same({ 'torchrun', '--nnodes', '1', '--nproc-per-node', '2', '--standalone',
                        '--no-python', 'nsys', 'profile', 'python3', 't.py' }, out.argv)
    end)

    it('uses a c10d rendezvous across nodes, tees into a log directory', function()
      local out = torchrun.wrap(PY, { nproc_per_node = 8, nnodes = 2, node_rank = 1,
        rdzv_endpoint = 'node0:29500', rdzv_id = 'job7', log_dir = '/runs/x/ranks',
        local_ranks_filter = '0', max_restarts = 1 })
      assert.are.same({ 'torchrun', '--nnodes', '2', '--nproc-per-node', '8', '--rdzv-backend',
                        'c10d', '--rdzv-endpoint', 'node0:29500', '--rdzv-id', 'job7',
                        '--max-restarts', '1', '--log-dir', '/runs/x/ranks', '--tee', '3',
                        '--local-ranks-filter', '0', '/w/Megatron-LM/pretrain_gpt.py', '--lr',
                        '0.0003' }, out.argv)
    end)

    it('supports the static rendezvous with an explicit node rank', function()
      local out = torchrun.wrap(PY, { nproc_per_node = 4, nnodes = 2, node_rank = 1,
        rdzv_backend = 'static', master_addr = '10.1.2.3', master_port = 29400 })
      assert.are.same({ 'torchrun', '--nnodes', '2', '--nproc-per-node', '4', '--node-rank', '1',
                        '--master-addr', '10.1.2.3', '--master-port', '29400',
                        '/w/Megatron-LM/pretrain_gpt.py', '--lr', '0.0003' }, out.argv)
    end)

    it('passes the rendezvous to a self-launching command in its environment', function()
      local primus = cmd_of({ 'bash', '/w/Primus/runner/primus-cli', 'direct', '--' },
        { NNODES = '1' }, { launcher = 'self', cwd = '/w/Primus' })
      local out = torchrun.wrap(primus, { nproc_per_node = 8, nnodes = 2, node_rank = 1,
        rdzv_endpoint = 'node0:29500' })
      assert.are.same(primus.argv, out.argv)
      assert.are.same({ NNODES = '2', NODE_RANK = '1', GPUS_PER_NODE = '8',
                        MASTER_ADDR = 'node0', MASTER_PORT = '29500' }, out.env)
      assert.are.equal('self', out.launcher)
      assert.are.equal('/w/Primus', out.cwd)
    end)

    it('refuses bad options', function()
      assert.has_error(function()
        torchrun.wrap(PY, {})
      end, 'launch.torchrun: option nproc_per_node is required')
      assert.has_error(function()
        torchrun.wrap(PY, { nproc_per_node = 8, nnodes = 2 })
      end, 'launch.torchrun: rdzv_endpoint (host:port) is required when nnodes > 1')
      assert.has_error(function()
        torchrun.wrap(PY, { nproc_per_node = 8, rdzv_endpoint = 'node0' })
      end, "launch.torchrun: option rdzv_endpoint must be 'host:port', got 'node0'")
      assert.has_error(function()
        torchrun.wrap(PY, { nproc_per_node = 0 })
      end, 'launch.torchrun: option nproc_per_node must be a positive integer, got 0')
      assert.has_error(function()
        torchrun.wrap(PY, { nproc_per_node = 8, nnodes = 2, node_rank = 2,
          rdzv_endpoint = 'a:1' })
      end, 'launch.torchrun: node_rank 2 must be below nnodes 2')
      assert.has_error(function()
        torchrun.wrap(PY, { nproc_per_node = 8, tee = 3 })
      end, 'launch.torchrun: unknown option tee')
      assert.has_error(function()
        torchrun.wrap(cmd_of({ 'python3', '-m' }), { nproc_per_node = 1 })
      end, 'launch.torchrun: cmd.argv has -m without a module')
      assert.has_error(function()
        torchrun.wrap(torchrun.wrap(PY, { nproc_per_node = 8 }), { nproc_per_node = 8 })
      end, 'launch.torchrun: the command is already started by torchrun')
    end)
  end)

  describe('container', function()
    local container = launch.get('container')
    local SECRET = cmd_of({ 'python3', 't.py' }, { HF_TOKEN = 'hf_abc', NCCL_DEBUG = 'WARN',
                                                   WANDB_API_KEY = 'k123' }, { cwd = '/w' })

    it('docker with NVIDIA GPUs, mounts, inline env, secrets by name only', function()
      local out = container.wrap(SECRET, { runtime = 'docker', image = 'nvcr.io/nvidia/pytorch',
        vendor = 'nvidia', mounts = { '/data:/data:ro', { '/runs', '/runs' } } })
      assert.are.same({ 'docker', 'run', '--rm', '--ipc=host', '--network=host',
                        '--shm-size=64g', '--gpus', 'all', '-v', '/data:/data:ro', '-v',
                        '/runs:/runs', '-w', '/w', '-e', 'HF_TOKEN', '-e', 'NCCL_DEBUG=WARN',
                        '-e', 'WANDB_API_KEY', 'nvcr.io/nvidia/pytorch', 'python3', 't.py' },
        out.argv)
      assert.are.same({ HF_TOKEN = 'hf_abc', WANDB_API_KEY = 'k123' }, out.env)
      assert.is_nil(out.cwd)
      for _, a in ipairs(out.argv) do
        assert.is_nil(a:find('hf_abc', 1, true))
        assert.is_nil(a:find('k123', 1, true))
      end
    end)

    it('docker and podman with AMD GPUs', function()
      for _, runtime in ipairs({ 'docker', 'podman' }) do
        local out = container.wrap(cmd_of({ 'true' }), { runtime = runtime,
          image = 'rocm/primus:v25.9', vendor = 'amd', shm_size = '128g', ipc_host = false })
        assert.are.same({ runtime, 'run', '--rm', '--network=host', '--shm-size=128g',
                          '--device=/dev/kfd', '--device=/dev/dri', '--group-add', 'video',
                          '--security-opt', 'seccomp=unconfined', 'rocm/primus:v25.9', 'true' },
          out.argv)
      end
    end)

    it('podman with NVIDIA GPUs uses the CDI device name', function()
      local out = container.wrap(cmd_of({ 'true' }), { runtime = 'podman', image = 'img',
        vendor = 'nvidia' })
      assert.are.same({ 'podman', 'run', '--rm', '--ipc=host', '--network=host',
                        '--shm-size=64g', '--device', 'nvidia.com/gpu=all', 'img', 'true' },
        out.argv)
    end)

    it('apptainer with a clean environment and secrets through APPTAINERENV_', function()
      local out = container.wrap(SECRET, { runtime = 'apptainer', image = '/sif/pt.sif',
        vendor = 'amd', mounts = { '/data:/data' } })
      assert.are.same({ 'apptainer', 'exec', '--cleanenv', '--rocm', '--bind', '/data:/data',
                        '--pwd', '/w', '--env', 'NCCL_DEBUG=WARN', '/sif/pt.sif', 'python3',
                        't.py' }, out.argv)
      assert.are.same({ APPTAINERENV_HF_TOKEN = 'hf_abc', APPTAINERENV_WANDB_API_KEY = 'k123' },
        out.env)
      assert.has_error(function()
        container.wrap(SECRET, { runtime = 'apptainer', image = 'x', vendor = 'nvidia',
          shm_size = '8g' })
      end, 'launch.container: option shm_size cannot be expressed with apptainer (it shares '
        .. 'the host IPC namespace, /dev/shm and network)')
    end)

    it('refuses bad options', function()
      assert.has_error(function()
        container.wrap(SECRET, { image = 'x' })
      end, "launch.container: option vendor must be 'nvidia' or 'amd', got nil")
      assert.has_error(function()
        container.wrap(SECRET, { vendor = 'amd' })
      end, 'launch.container: option image is required')
      assert.has_error(function()
        container.wrap(SECRET, { runtime = 'enroot', image = 'x', vendor = 'amd' })
      end, "launch.container: option runtime must be docker, podman or apptainer, got 'enroot'")
      assert.has_error(function()
        container.wrap(SECRET, { image = 'x', vendor = 'amd', mounts = { '/a:/b:rw' } })
      end, "launch.container: mounts[1] '/a:/b:rw' must be 'src:dst' or 'src:dst:ro'")
    end)
  end)

  describe('compose and describe', function()
    it('runs torchrun inside a container', function()
      local out = launch.compose(PY, {
        { 'torchrun', { nproc_per_node = 8 } },
        { 'container', { image = 'img', vendor = 'nvidia' } },
      })
      assert.are.same({ 'docker', 'run', '--rm', '--ipc=host', '--network=host',
                        '--shm-size=64g', '--gpus', 'all', '-e', 'CUDA_DEVICE_MAX_CONNECTIONS=1',
                        'img', 'torchrun', '--nnodes', '1', '--nproc-per-node', '8',
                        '--standalone', '/w/Megatron-LM/pretrain_gpt.py', '--lr', '0.0003' },
        out.argv)
      assert.are.same({}, out.env)
    end)

    it('quotes words for the shell and redacts secret values', function()
      local text = launch.describe(cmd_of({ 'python3', 'a b.py', "it's", '--x=$HOME',
                                            'HF_TOKEN=hf_abc', '--env', 'MY_SECRET=s3' },
        { HF_TOKEN = 'hf_abc', PATH = '/usr/bin', GH_PASSWORD = '' }, { cwd = '/w d' }))
      assert.are.equal("cd '/w d' && GH_PASSWORD='<redacted>' HF_TOKEN='<redacted>' "
        .. "PATH=/usr/bin python3 'a b.py' 'it'\\''s' '--x=$HOME' 'HF_TOKEN=<redacted>' --env "
        .. "'MY_SECRET=<redacted>'", text)
      assert.is_nil(text:find('hf_abc', 1, true))
      assert.is_nil(text:find('s3', 1, true))
    end)

    it('describes a container command without the secret values', function()
      local out = launch.get('container').wrap(cmd_of({ 'python3', 't.py' },
        { HF_TOKEN = 'hf_abc' }), { image = 'img', vendor = 'nvidia' })
      local text = launch.describe(out)
      assert.is_nil(text:find('hf_abc', 1, true))
      assert.truthy(text:find('-e HF_TOKEN img', 1, true))
    end)

    it('reads wrapped commands back (unwrap): the launcher and the command inside', function()
      local ranks = launch.get('ranks').wrap(PY, { nproc_per_node = 2, tplua = '/b/tplua' })
      local u = launch.unwrap(ranks.argv)
      assert.are.equal('ranks', u.launcher)
      assert.are.same(PY.argv, u.argv)
      -- torchrun runs the script with its own interpreter (u.runner's): argv[1] stands for it.
      u = launch.unwrap(launch.get('torchrun').wrap(PY, { nproc_per_node = 8 }).argv)
      assert.are.equal('torchrun', u.launcher)
      assert.are.same({ 'python3', '/w/Megatron-LM/pretrain_gpt.py', '--lr', '0.0003' }, u.argv)
      assert.are.equal('torchrun', u.runner)
      u = launch.unwrap({ '/opt/bin/torchrun', '--nproc-per-node=2', '--rdzv-endpoint', 'h:1',
        '-m', 'torchtitan.train', '--job.config_file', 'x.toml' })
      assert.are.same({ 'python3', '-m', 'torchtitan.train', '--job.config_file', 'x.toml' },
        u.argv)
      u = launch.unwrap({ 'torchrun', '--nproc-per-node', '2', '--no-python', 'bash', 'x.sh' })
      assert.are.same({ 'bash', 'x.sh' }, u.argv)
      assert.is_nil(u.runner)
      u = launch.unwrap(launch.get('container').wrap(PY, { image = 'img', vendor = 'nvidia' }).argv)
      assert.are.equal('container', u.launcher)
      assert.is_nil(u.argv)
      u = launch.unwrap(PY.argv)
      assert.are.equal('local', u.launcher)
      assert.are.same(PY.argv, u.argv)
      -- Another program's 'ranks' argument is just an argument.
      assert.are.equal('local', launch.unwrap({ 'make', 'ranks', '--', 'x' }).launcher)
      assert.has_error(function()
        launch.unwrap({})
      end, 'launch.unwrap: argv must be a non-empty list of strings')
    end)

    it('classifies secret names', function()
      assert.is_true(launch.is_secret('HF_TOKEN'))
      assert.is_true(launch.is_secret('wandb_api_key'))
      assert.is_true(launch.is_secret('DB_PASSWORD'))
      assert.is_true(launch.is_secret('AWS_SECRET_ACCESS_KEY'))
      assert.is_false(launch.is_secret('NCCL_DEBUG'))
      assert.are.equal("''", launch.shquote(''))
      assert.are.equal('a/b-c_d.e:f=1,2@x%', launch.shquote('a/b-c_d.e:f=1,2@x%'))
    end)
  end)
end)

describe('tp.profile', function()
  local dir = h.tmpdir()
  local bin = dir .. '/bin'
  os.execute('mkdir -p ' .. h.shquote(bin))
  -- A fake nsys that is executable, and a rocprofv3 that is present but not executable.
  h.write(bin .. '/nsys', '#!/bin/sh\nexit 0\n')
  assert(os.execute('chmod 755 ' .. h.shquote(bin .. '/nsys')))
  h.write(bin .. '/rocprofv3', '#!/bin/sh\nexit 0\n')
  assert(os.execute('chmod 644 ' .. h.shquote(bin .. '/rocprofv3')))

  describe('check', function()
    it('finds a tool in PATH', function()
      assert.is_true(profile.check({ tool = 'nsys', output = '/p', path = '/nonexistent:' .. bin }))
      assert.are.equal(bin .. '/nsys', profile.which('nsys', '/nonexistent:' .. bin))
    end)

    it('fails with ENOENT when the tool is missing or not executable', function()
      local ok, err, code = profile.check({ tool = 'nsys', output = '/p', path = '/nonexistent' })
      assert.is_nil(ok)
      assert.are.equal('ENOENT', code)
      assert.are.equal('profile: nsys: not found in PATH (/nonexistent)', err)
      ok, err, code = profile.check({ tool = 'rocprofv3', output = '/p', path = bin })
      assert.is_nil(ok)
      assert.are.equal('ENOENT', code)
      assert.truthy(err:find('profile: rocprofv3: not found in PATH', 1, true))
    end)

    it('needs no binary for the framework profiler', function()
      assert.is_true(profile.check({ tool = 'torch', steps = { 3, 4 }, output = '/p',
        path = '/nonexistent' }))
    end)

    it('raises on malformed options', function()
      assert.has_error(function()
        profile.check({ tool = 'perf', output = '/p' })
      end, "profile: tool must be 'torch', 'nsys' or 'rocprofv3', got perf")
      assert.has_error(function()
        profile.check({ tool = 'nsys', output = '/p', steps = { 5, 4 } })
      end, 'profile: steps must be { first, last } with 1 <= first <= last')
      assert.has_error(function()
        profile.check({ tool = 'nsys' })
      end, 'profile: output (a directory) is required')
      assert.has_error(function()
        profile.check({ tool = 'nsys', output = '/p', ranks = 0 })
      end, 'profile: unknown option ranks')
    end)
  end)

  describe('apply', function()
    local MEG = { argv = { 'python3', 'pretrain_gpt.py', '--lr', '0.0003' }, env = {} }

    it('megatron: the PyTorch profiler over steps 10..12', function()
      local out, traces = profile.apply('megatron', MEG,
        { tool = 'torch', steps = { 10, 12 }, output = '/p' })
      assert.are.same({ 'python3', 'pretrain_gpt.py', '--lr', '0.0003', '--profile',
                        '--use-pytorch-profiler', '--profile-step-start', '9',
                        '--profile-step-end', '12', '--profile-ranks', '0', '--tensorboard-dir',
                        '/p' }, out.argv)
      assert.are.same({ '/p/*.pt.trace.json' }, traces)
      assert.are.equal(4, #MEG.argv)
    end)

    it('megatron: nsys with a cudaProfilerApi capture range, per-rank reports', function()
      local out, traces = profile.apply('megatron', MEG,
        { tool = 'nsys', steps = { 10, 12 }, output = '/p/' })
      assert.are.same({ 'nsys', 'profile', '-t', 'cuda,nvtx', '-s', 'none', '--force-overwrite',
                        'true', '--export=sqlite', '-o', '/p/nsys_rank%q{RANK}',
                        '--capture-range=cudaProfilerApi',
                        '--capture-range-end=stop', 'python3', 'pretrain_gpt.py', '--lr',
                        '0.0003', '--profile', '--profile-step-start', '9',
                        '--profile-step-end', '12', '--profile-ranks', '0' }, out.argv)
      assert.are.same({ '/p/nsys_rank0.nsys-rep', '/p/nsys_rank0.sqlite' }, traces)
      -- and torchrun then runs the profiler as a program
      local wrapped = launch.get('torchrun').wrap(out, { nproc_per_node = 8 })
      assert.are.equal('--no-python', wrapped.argv[7])
      assert.are.equal('nsys', wrapped.argv[8])
    end)

    it('megatron: rocprofv3 traces the whole run, not a step range', function()
      local out, traces = profile.apply('megatron', MEG, { tool = 'rocprofv3', output = '/p' })
      assert.are.same({ 'rocprofv3', '--runtime-trace', '--output-format', 'pftrace', 'csv',
                        '-d', '/p', '-o', 'rank%rank%', '--', 'python3', 'pretrain_gpt.py',
                        '--lr', '0.0003' }, out.argv)
      assert.are.same({ '/p/rank<RANK>_results.pftrace', '/p/rank<RANK>_kernel_trace.csv' },
        traces)
      assert.has_error(function()
        profile.apply('megatron', MEG, { tool = 'rocprofv3', steps = { 1, 2 }, output = '/p' })
      end)
    end)

    it('torchtitan: profiler schedule covering steps 10..12', function()
      local out, traces = profile.apply('torchtitan', { argv = { 'python3', '-m', 't' } },
        { tool = 'torch', steps = { 10, 12 }, output = '/runs/x/prof' })
      assert.are.same({ 'python3', '-m', 't', '--profiling.enable_profiling',
                        '--profiling.save_traces_folder', '/runs/x/prof',
                        '--profiling.profile_freq', '12', '--profiling.profiler_warmup', '1',
                        '--profiling.profiler_active', '3' }, out.argv)
      assert.are.same({ '/runs/x/prof/iteration_12/rank<RANK>_trace.json' }, traces)
    end)

    it('primus: Megatron profiler arguments as command-line overrides', function()
      local out = profile.apply('primus', { argv = { 'bash', 'primus-cli', '--config', 'e.yaml' },
        launcher = 'self' }, { tool = 'torch', steps = { 5, 6 }, output = '/p' })
      assert.are.same({ 'bash', 'primus-cli', '--config', 'e.yaml', '--profile', 'True',
                        '--use_pytorch_profiler', 'True', '--profile_step_start', '4',
                        '--profile_step_end', '6', '--disable_tensorboard', 'False',
                        '--tensorboard_dir', '/p' }, out.argv)
      assert.are.equal('self', out.launcher)
    end)

    it('refuses what a framework cannot express', function()
      local ok, err = pcall(profile.apply, 'nemo', MEG, { tool = 'torch', output = '/p' })
      assert.is_false(ok)
      assert.are.equal('profile: nemo: the PyTorch profiler needs steps = { first, last }', err)
      ok, err = pcall(profile.apply, 'primus', MEG, { tool = 'nsys', steps = { 1, 2 },
        output = '/p' })
      assert.is_false(ok)
      assert.truthy(err:find('primus-cli starts torchrun itself', 1, true))
      ok, err = pcall(profile.apply, 'torchtitan', MEG, { tool = 'nsys', steps = { 1, 2 },
        output = '/p' })
      assert.is_false(ok)
      assert.truthy(err:find('steps cannot be honoured', 1, true))
      ok, err = pcall(profile.apply, 'megatron', MEG, { tool = 'torch', output = '/p' })
      assert.is_false(ok)
      assert.truthy(err:find('needs steps', 1, true))
      assert.has_error(function()
        profile.apply('deepspeed', MEG, { tool = 'torch', output = '/p' })
      end, "profile.apply: unknown framework 'deepspeed'")
    end)

    it('wraps nemo in a system profiler for the whole run', function()
      local out, traces = profile.apply('nemo', MEG, { tool = 'nsys', output = '/p' })
      assert.are.equal('nsys', out.argv[1])
      assert.is_nil(table.concat(out.argv, ' '):find('capture-range', 1, true))
      assert.are.same({ '/p/nsys_rank<RANK>.nsys-rep', '/p/nsys_rank<RANK>.sqlite' }, traces)
    end)

    it("gives nemo's driver its profiler callbacks for a window of steps", function()
      -- NeMo's callbacks count completed steps: steps 5..7 start at 4 and end at 7.
      local out, traces = profile.apply('nemo', MEG, { tool = 'torch', steps = { 5, 7 },
        output = "/r/it's" })
      assert.are.equal("profile.torch=[4, 7, '/r/it\\'s']", out.argv[#out.argv])
      assert.are.same({ "/r/it's/device/rank-<RANK>.json" }, traces)
      out, traces = profile.apply('nemo', MEG, { tool = 'nsys', steps = { 5, 7 }, output = '/p' })
      assert.are.equal('profile.nsys=[4, 7]', out.argv[#out.argv])
      assert.truthy(table.concat(out.argv, ' '):find('--capture-range=cudaProfilerApi', 1, true))
      assert.are.same({ '/p/nsys_rank0.nsys-rep', '/p/nsys_rank0.sqlite' }, traces)
    end)
  end)
end)
