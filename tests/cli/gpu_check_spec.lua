-- The GPU check, ready before a GPU is: `make gpu-bundle` (a self-contained tplua, run here from
-- a copy elsewhere in a bare environment), `tools/gpu-check --cpu` (every step of the check on
-- this machine: the CPU trainer, the fake GPU libraries of tests/fakes for the probe and the
-- sampler; its summary.json read back), the figures of summary.json held against recorded GPU
-- output (a real H100 Kineto trace), and the trainer's device chosen by TPLUA_REFTRAIN_DEVICE.
-- docs/gpu.md, "The GPU check".
local h = require('helper')
local json = require('tp.json')
local fs = require('tp.fs')

local ROOT = h.source_dir
local CHECK = ROOT .. '/tools/gpu-check'
local FAKES = h.fakes_dir .. '/h100x8'
local STEPS = { 'probe', 'torch', 'sampler', 'train', 'trace', 'peaks', 'ops', 'memory',
  'report' }
local GLIBC = { 'libc.so', 'libm.so', 'libdl.so', 'libpthread.so', 'librt.so', 'ld-linux',
  'linux-vdso' }

local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

-- Runs a program (not tplua) through helper.run.
local function sh(argv, opts)
  opts = opts or {}
  local args = {}
  for i = 2, #argv do
    args[#args + 1] = argv[i]
  end
  return h.run(args, { bin = argv[1], env = opts.env, cwd = opts.cwd })
end

local function is_glibc(name)
  for _, p in ipairs(GLIBC) do
    if name:sub(1, #p) == p then
      return true
    end
  end
  return false
end

-- The libraries ldd lists for a binary: {name = path} (nil path: not found).
local function ldd(bin, env)
  local r = sh({ '/usr/bin/env', '-i', 'PATH=/usr/bin:/bin', env or 'X=', 'ldd', bin })
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  local out = {}
  for name, where in r.stdout:gmatch('\n?%s*(%S+) => ([^\n]-) %(') do
    out[name] = where
  end
  for name in r.stdout:gmatch('\n?%s*(%S+) => not found') do
    out[name] = false
  end
  return out
end

-- One bundle for the file, made by `make gpu-bundle` into a temp dir (nil and why if not),
-- from the build under test as it is: `-o all` keeps make from rebuilding it while other
-- tests run its binary.
local bundle_dir, bundle_why
local function bundle()
  if bundle_dir or bundle_why then
    return bundle_dir, bundle_why
  end
  local dir = h.tmpdir() .. '/bundle'
  local r = sh({ '/usr/bin/make', '--no-print-directory', '-C', ROOT, '-o', 'all', 'gpu-bundle',
    'BUILD=' .. h.build_dir, 'GPU_BUNDLE=' .. dir })
  if r.code ~= 0 then
    bundle_why = 'make gpu-bundle failed: ' .. r.stdout .. r.stderr
  else
    bundle_dir = dir
  end
  return bundle_dir, bundle_why
end

describe('make gpu-bundle', function()
  it('writes a folder whose copy runs tplua -v and tplua probe elsewhere, in a bare '
    .. 'environment, under 40 MB', function()
    local dir = assert(bundle())
    -- A copy somewhere else, the original moved away meanwhile: nothing points back to it.
    local copy = h.tmpdir() .. '/somewhere/tplua-bundle'
    assert(fs.mkdir_p(copy:match('^(.*)/')))
    assert.are.equal(0, sh({ '/bin/cp', '-a', dir, copy }).code)
    assert(os.rename(dir, dir .. '.away'))
    finally(function()
      os.rename(dir .. '.away', dir)
    end)
    local elsewhere = h.tmpdir()
    local bare = { '/usr/bin/env', '-i', 'PATH=/usr/bin:/bin', 'HOME=' .. elsewhere }
    local function bare_run(...)
      local argv = { table.unpack(bare) }
      for _, a in ipairs({ ... }) do
        argv[#argv + 1] = a
      end
      return sh(argv, { cwd = elsewhere })
    end
    local r = bare_run(copy .. '/tplua', '-v')
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'stdlib: ' .. copy .. '/share/tplua/lua'), r.stdout)
    r = bare_run(copy .. '/tplua', 'probe')
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'libraries:'), r.stdout)
    assert.is_true(has(r.stdout, 'environment: '), r.stdout)
    r = bare_run(copy .. '/tplua', 'probe', '--json')
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('tplua.environment/1', assert(json.decode(r.stdout)).environment.schema)
    -- The stdlib is the bundle's: a module of it loads from the copy.
    r = bare_run(copy .. '/tplua', '-e', "print(package.searchpath('tp.gpu', package.path))")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(copy .. '/share/tplua/lua/tp/gpu.lua', (r.stdout:gsub('%s+$', '')))

    -- Every library the binary links but glibc is in lib/, and the loader takes it from there.
    local want = ldd(h.build_dir .. '/tplua')
    local got = ldd(copy .. '/bin/tplua', 'LD_LIBRARY_PATH=' .. copy .. '/lib')
    local n = 0
    for name, where in pairs(want) do
      assert.is_truthy(where, name .. ' not found by ldd')
      if is_glibc(name) then
        assert.is_false(fs.exists(copy .. '/lib/' .. name), name .. ' is bundled')
      else
        n = n + 1
        assert.is_true(fs.is_file(copy .. '/lib/' .. name), name .. ' is not bundled')
        assert.are.equal(fs.realpath(copy .. '/lib/' .. name), fs.realpath(got[name]), name)
      end
    end
    assert.is_true(n >= 5, 'only ' .. n .. ' libraries bundled')
    assert.is_false(fs.exists(copy .. '/lib/libpq.so.5'))
    assert.is_true(has(h.read(copy .. '/BUNDLE'), 'libpq.so.5'))

    r = sh({ '/usr/bin/du', '-sb', copy })
    local bytes = assert(tonumber(r.stdout:match('^(%d+)')))
    assert.is_true(bytes < 40 * 1000 * 1000, bytes .. ' bytes')
  end)

  it('refuses to replace a folder that is not a bundle, and needs its two arguments', function()
    local dir = h.tmpdir()
    h.write(dir .. '/mine.txt', 'keep me')
    local r = sh({ ROOT .. '/scripts/gpu-bundle', h.build_dir, dir })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stderr, dir .. ' exists and is not a tplua bundle'), r.stderr)
    assert.are.equal('keep me', h.read(dir .. '/mine.txt'))
    r = sh({ ROOT .. '/scripts/gpu-bundle', h.build_dir })
    assert.are.equal(2, r.code)
    assert.is_true(has(r.stderr, 'usage: scripts/gpu-bundle BUILD_DIR OUT_DIR'), r.stderr)
    r = sh({ ROOT .. '/scripts/gpu-bundle', dir, h.tmpdir() .. '/b' })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stderr, dir .. '/tplua: not built'), r.stderr)
  end)
end)

describe('tools/gpu-check', function()
  it('is a usage error without an output folder, with two, or with an unknown flag', function()
    local out = h.tmpdir()
    for _, case in ipairs({
      { {}, {}, 'no output folder: set $OUT or give --out DIR' },
      { { '--out', out .. '/a' }, { OUT = out .. '/b' }, 'both $OUT (' .. out .. '/b) and --out' },
      { { '--out', out, '--gpus', '8' }, {}, "unknown argument '--gpus'" },
      { { '--out', out, '--tplua', out .. '/nope' }, {}, '--tplua ' .. out .. '/nope: not' },
      { { '--out', out, '--budget' }, {}, "option '--budget' needs a value" },
    }) do
      local env = { OUT = false }
      for k, v in pairs(case[2]) do
        env[k] = v
      end
      local r = sh({ CHECK, table.unpack(case[1]) }, { env = env })
      assert.are.equal(2, r.code, r.stdout .. r.stderr)
      assert.is_true(has(r.stderr, case[3]), r.stderr)
    end
    -- A folder that holds something else is left alone.
    h.write(out .. '/notes.txt', 'mine')
    local r = sh({ CHECK, '--cpu', '--tplua', h.bin, '--fakes', FAKES },
      { env = { OUT = out } })
    assert.are.equal(2, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stderr, out .. ' is not empty'), r.stderr)
    assert.are.equal('mine', h.read(out .. '/notes.txt'))
    -- The check's own flags are checked before any step runs.
    r = sh({ CHECK, '--cpu', '--tplua', h.bin, '--fakes', FAKES, '--expect', 'h900' },
      { env = { OUT = h.tmpdir() } })
    assert.are.equal(2, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stderr, "--expect: 'h900' is not a hardware catalog id"), r.stderr)
  end)

  it('writes summary.json saying why when its tplua does not start', function()
    local dir = h.tmpdir()
    local broken = dir .. '/tplua'
    h.write(broken, '#!/bin/sh\necho "tplua: error while loading shared libraries: '
      .. 'libyaml-0.so.2: cannot open shared object file" >&2\nexit 127\n')
    assert.are.equal(0, sh({ '/bin/chmod', '+x', broken }).code)
    local out = dir .. '/out'
    local r = sh({ CHECK, '--tplua', broken }, { env = { OUT = out } })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    local s = assert(json.load_file(out .. '/summary.json'))
    assert.are.equal('tplua.gpu_check/1', s.schema)
    assert.is_false(s.ok)
    assert.are.equal('failed', s.steps[1].status)
    assert.is_true(has(s.steps[1].reason, 'libyaml-0.so.2: cannot open shared object file'),
      s.steps[1].reason)
  end)
end)

describe('tools/gpu-check --cpu #slow', function()
  local missing = h.torch_missing()
    or (not fs.is_file(FAKES .. '/libnvidia-ml.so.1')
      and ('fake GPU libraries not built (' .. FAKES .. ')')) or nil

  it('runs every step of the check here, with the bundle, and says so in summary.json',
    function()
      if missing then
        pending(missing)
        return
      end
      local dir = assert(bundle())
      local out = h.tmpdir() .. '/check'
      local t0 = require('tp.gpu').now()
      -- From another directory: the script finds the repository root itself.
      local r = sh({ CHECK, '--cpu', '--tplua', dir .. '/tplua', '--fakes', FAKES },
        { env = { OUT = out, TPLUA_PYTHON = false }, cwd = h.tmpdir() })
      local wall = require('tp.gpu').now() - t0
      local s = assert(json.load_file(out .. '/summary.json'), r.stdout .. r.stderr)
      assert.are.equal('tplua.gpu_check/1', s.schema)
      assert.are.equal('cpu', s.mode)
      assert.is_true(wall < 180, string.format('the check took %.0f s', wall))
      assert.is_true(type(s.elapsed_s) == 'number' and s.elapsed_s <= wall)
      assert.is_true(has(s.tplua, 'stdlib: ' .. dir .. '/share/tplua/lua'), s.tplua)

      -- Every step, in order, ran and passed; a step may only be passed over for want of a GPU.
      assert.are.equal(#STEPS, #s.steps)
      for i, name in ipairs(STEPS) do
        local st = s.steps[i]
        assert.are.equal(name, st.name)
        assert.are.equal('number', type(st.seconds), name)
        if st.status == 'skipped' then
          assert.is_true(has(st.reason or '', 'no GPU'), name .. ': ' .. tostring(st.reason))
        else
          assert.are.equal('ok', st.status, name .. ': ' .. tostring(st.reason) .. '\n'
            .. r.stdout .. r.stderr)
        end
        for _, f in ipairs(st.files or {}) do
          assert.is_true(fs.exists(out .. '/' .. f), name .. ': ' .. f)
        end
      end
      assert.is_true(s.ok)
      assert.are.equal(0, r.code, r.stdout .. r.stderr)

      local F = s.figures
      -- The probe: the fakes' first GPU and its catalog row.
      assert.are.equal('NVIDIA H100 80GB HBM3', F.probe.name)
      assert.are.equal('h100-sxm', F.probe.catalog)
      assert.is_true(F.probe.matched)
      assert.are.equal(989.4, F.probe.peak_bf16_tflops)
      assert.are.equal('ok', F.probe.libraries.nvml)
      -- torch: the interpreter chosen, a bf16 product computed on the CPU.
      assert.is_true(F.torch.matmul_ok)
      assert.are.equal('cpu', F.torch.matmul_device)
      -- The sampler at 10 Hz over the steps after it, every quantity read.
      assert.are.equal(0.1, F.sampler.interval_s)
      assert.is_true(F.sampler.readings > 0)
      assert.is_true(F.sampler.rate_hz >= 5 and F.sampler.rate_hz <= 11, F.sampler.rate_hz)
      local d1 = F.sampler.devices[1]
      for _, k in ipairs({ 'power_w', 'sm_clock_mhz', 'memory_used_gib', 'temperature_c' }) do
        assert.is_true(d1[k].n > 0 and type(d1[k].max) == 'number', k)
      end
      assert.is_true(F.sampler.windows.train.readings > 0)
      assert.is_true(F.sampler.windows.train.energy_j > 0)
      local csv = h.read(out .. '/telemetry.csv')
      assert.is_true(has(csv, 't,wall,device,power_w,energy_j,memory_used_bytes,'))
      local _, rows = csv:gsub('\n', '')
      assert.are.equal(F.sampler.readings + 1, rows)
      -- The training run: completed (stopped by its rule, or at its planned end), on the CPU,
      -- figures from its record, MFU against the fake GPU's catalog row.
      local T = F.train
      assert.are.equal('completed', T.status)
      assert.are.equal('cpu', T.device)
      assert.are.equal('gpu-check-cpu', T.model)
      assert.is_true(T.iterations_done >= 20 and T.iterations_done <= 50, T.iterations_done)
      assert.are.equal(50, T.iterations_planned)
      assert.is_true(T.stopped_by == nil or T.stopped_by == 'converged_ci', T.stopped_by)
      assert.is_true(T.tokens_per_s > 0 and T.step_time_s > 0)
      assert.are.equal('summary', T.mfu_from)
      assert.is_true(T.mfu > 0 and T.mfu < 1e-3, T.mfu)
      assert.are.equal('h100-sxm', T.hardware)
      assert.are.equal(989.4, T.peak_bf16_tflops)
      assert.is_true(T.joules_per_token > 0)
      assert.are.equal('counter', T.energy_method)
      assert.are.equal(1, #T.traces)
      assert.is_true(T.loss_last < T.loss_first)
      -- The trace and the op table: a CPU-only trace, read through, no GPU figures.
      assert.is_false(F.trace.gpu)
      assert.is_true(F.trace.events > 0)
      assert.are.equal(0, F.trace.gpu_ops)
      assert.are.equal(0, F.ops.linked)
      -- The memory: the CPU allocator's events of the profiled steps, and the record keeps
      -- the same peak beside the plan's estimate.
      local M = F.memory
      assert.is_true(M.events > 0)
      assert.are.equal('cpu', M.devices[1].label)
      assert.is_true(M.devices[1].peak_bytes > 0)
      assert.are.equal('trace', M.record.source)
      assert.are.equal(M.devices[1].peak_bytes, M.record.peak_allocated_bytes)
      local sum = 0
      for _, v in pairs(M.devices[1].at_peak_bytes) do
        sum = sum + v
      end
      assert.are.equal(M.devices[1].peak_bytes, sum)
      -- the estimate for the recipe's inline model row
      assert.are.equal('gpu-check-cpu', M.record.estimate_model)
      assert.is_true(M.record.estimate_bytes > 0)
      assert.is_true(fs.is_file(out .. '/memory.txt'))
      -- The peaks: measured on the CPU.
      assert.are.equal('cpu', F.peaks.device)
      assert.is_true(F.peaks.scaled_down)
      assert.is_true((F.peaks.tflops.bf16 or F.peaks.tflops.fp32) > 0)
      assert.is_true(F.peaks.bandwidth_tbs > 0)
      assert.is_true(#F.peaks.gemm >= 15)
      -- The report of it all.
      assert.is_true(fs.is_file(out .. '/report/report.md'))
      assert.is_true(has(h.read(out .. '/report/report.md'), T.run_id))
      -- The training run's recipe, kept with the results, asks for the CPU and the stop rule.
      local plan = h.run({ 'plan', out .. '/train.lua', '--json' },
        { env = { TPLUA_GPU_LIBPATH = FAKES, TPLUA_REFTRAIN_DEVICE = 'cpu' } })
      assert.are.equal(0, plan.code, plan.stderr)
      local argv = table.concat(assert(json.decode(plan.stdout)).platforms.nvd.runs[1].argv, ' ')
      assert.is_true(has(argv, ' --device cpu'), argv)
    end)
end)

describe('the figures of summary.json', function()
  local figures = dofile(ROOT .. '/tools/gpu-check.d/figures.lua')
  local TRACE = h.fixture('traces/qwen05b_h100.json.gz')

  local function tplua_json(args)
    local r = h.run(args)
    assert.are.equal(0, r.code, r.stderr)
    return assert(json.decode(r.stdout))
  end

  it('read a real H100 Kineto trace as a GPU run would write it', function()
    local f, problems = figures.trace(tplua_json({ 'trace', TRACE, '--json' }), { mode = 'gpu' })
    assert.are.same({}, problems)
    assert.is_true(f.gpu)
    assert.are.equal('NVIDIA H100 80GB HBM3', f.device)
    assert.are.equal(1707, f.gpu_ops)
    assert.are.equal(34.892, f.window_ms)
    assert.are.equal(8.56, f.idle_pct)
    assert.are.equal('elementwise', f.classes[1].name)
    assert.are.equal(18.11, f.classes[1].exclusive_ms)
    assert.are.equal('gemm', f.top_kernels[1].class)
    f, problems = figures.ops(tplua_json({ 'trace', TRACE, '--ops', '--json' }), { mode = 'gpu' })
    assert.are.same({}, problems)
    assert.are.equal(1198, f.linked)
    assert.are.equal('h100-sxm', f.catalog)
    assert.are.equal('aten::mm', f.top[1].name)
    assert.are.equal('compute', f.top[1].bound)
  end)

  it('read the memory of a real H100 trace and the record that kept it', function()
    local rec = assert(json.load_file(h.fixture('results/profiled/nvd/megatron-prof.json')))
    local f, problems = figures.memory(tplua_json({ 'trace', TRACE, '--memory', '--json' }), rec,
      { mode = 'gpu' })
    assert.are.same({}, problems)
    local d = f.devices[1]
    assert.are.equal('cuda:0', d.label)
    assert.are.equal(2088508416, d.peak_bytes)
    assert.are.equal('forward', d.peak_phase)
    assert.are.equal('aten::mul [16,559,2816] [16,559,2816]', d.peak_op)
    assert.are.equal(1103766016, d.at_peak_bytes.temporary)
    assert.are.equal(85899345920 - 2629828608, d.headroom_bytes)
    assert.are.equal('catalog h100-sxm', d.capacity_from)
    assert.are.equal(2088508416, f.record.peak_allocated_bytes)
    assert.are.equal(80665835520, f.record.estimate_bytes)
    assert.are.equal(math.floor((80665835520 / 2088508416 - 1) * 1e4 + 0.5) / 1e4,
      f.record.estimate_error)
    -- A GPU run whose trace has no allocator events fails the step.
    f, problems = figures.memory({ ranks = { {} } }, nil, { mode = 'gpu' })
    assert.are.same({ 'no [memory] events in the trace (profile_memory did not take)' }, problems)
    assert.are.equal(0, #f.devices)
  end)

  it('fail a GPU step on what a GPU run must show', function()
    local r = h.run({ 'probe', '--json' }, { env = { TPLUA_GPU_LIBPATH = FAKES } })
    assert.are.equal(0, r.code, r.stderr)
    local probe = assert(json.decode(r.stdout))
    local _, problems = figures.probe(probe, { mode = 'gpu', expect = 'h200' })
    assert.are.same({ "device 'NVIDIA H100 80GB HBM3' matches catalog row h100-sxm, not h200" },
      problems)
    _, problems = figures.probe({ devices = {}, backends = {} }, { mode = 'gpu' })
    assert.is_true(has(problems[1], 'no GPU found'))
    -- A CPU trace from a GPU run: the profiler recorded no CUDA activity.
    _, problems = figures.trace({ ranks = { { gpu = false, info = { events = 10 } } } },
      { mode = 'gpu' })
    assert.is_true(has(problems[1], 'no GPU kernels in the trace'))
    -- A record of a run that fell back to the CPU, in float32.
    local rec = { status = 'completed', args = { device = 'cpu', params_dtype = 'torch.float32' },
      performance_metrics = { tokens_per_second = 1000 }, energy_metrics = {},
      profile = { traces = { 'x' } } }
    local model = { id = 'm', num_layers = 2, hidden_size = 64, ffn_hidden_size = 256,
      num_attention_heads = 4, num_kv_heads = 4, vocab_size = 256, head_dim = 16 }
    _, problems = figures.train(rec, { mode = 'gpu', model = model, hardware = 'h200',
      device = 'cuda', seq_len = 64, mbs = 4 })
    assert.are.equal('the trainer ran on cpu, not cuda', problems[1])
    assert.are.equal('the trainer did not run in bf16 (params_dtype torch.float32)', problems[2])
    assert.is_true(has(problems[3], 'no energy per token'))
    -- torch without the GPU; peaks above the datasheet, or measured on the CPU.
    _, problems = figures.torch({ torch = '2.5.1', cuda_available = false, matmul_ok = false,
      matmul_device = 'cuda', matmul_error = 'RuntimeError: no GPU' }, { mode = 'gpu' })
    assert.are.same({ 'torch sees no GPU (torch.cuda.is_available() is False)',
      'a bf16 matrix product on cuda failed: RuntimeError: no GPU' }, problems)
    local row = require('tp.catalog.hardware').get('h200')
    local f
    f, problems = figures.peaks({ status = 'completed', peaks = { device = 'cuda',
      tflops = { bf16 = 1200.0 }, bandwidth_tbs = 4.1 } }, { mode = 'gpu', hardware_row = row })
    assert.are.equal(0.8542, f.bandwidth_of_catalog)
    assert.are.same({ 'measured bf16 1200.0 TFLOP/s is above the catalog peak 989.4: the catalog '
      .. 'row or the timing is wrong' }, problems)
    _, problems = figures.peaks({ status = 'completed', peaks = { device = 'cpu',
      tflops = { fp32 = 0.1 }, bandwidth_tbs = 0.04 } }, { mode = 'gpu', hardware_row = row })
    assert.are.same({ 'peaks measured on cpu, not cuda' }, problems)
    -- The sampler fell behind, and one quantity was never reported.
    local samples = {}
    for i = 0, 9 do
      samples[#samples + 1] = { t = i, device = 1, power_w = 500, sm_clock_mhz = 1980,
        memory_used = 2 ^ 30 }
    end
    _, problems = figures.telemetry(samples, { interval = 0.1, t0 = 0, t1 = 10 })
    assert.are.same({ 'device 1 reported no temperature_c',
      '1.0 readings a second on device 1, asked for 10' }, problems)
  end)
end)

describe('the reference trainer\'s device', function()
  local recipe = h.tmpdir() .. '/r.lua'
  h.write(recipe, [[
local tp = require('tp')
return tp.experiment.main({ name = 'dev', model = 'ref-tiny',
  platforms = { nvd = { framework = 'reference' } }, gpus_per_node = 1,
  training = { mbs = 2, gbs = 2, seq_len = 32, iters = 4, lr = 3e-3 },
  parallelism = { tp = 1, pp = 1, dp = 1 }, launcher = 'local' })
]])

  it('is TPLUA_REFTRAIN_DEVICE, given as --device; another value is refused', function()
    local r = h.run({ 'plan', recipe, '--json' }, { env = { TPLUA_REFTRAIN_DEVICE = 'cuda' } })
    assert.are.equal(0, r.code, r.stderr)
    local argv = assert(json.decode(r.stdout)).platforms.nvd.runs[1].argv
    local at
    for i, a in ipairs(argv) do
      if a == '--device' then
        at = i
      end
    end
    assert.is_truthy(at, table.concat(argv, ' '))
    assert.are.equal('cuda', argv[at + 1])
    r = h.run({ 'plan', recipe, '--json' }, { env = { TPLUA_REFTRAIN_DEVICE = false } })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_false(has(r.stdout, '"--device"'))
    r = h.run({ 'plan', recipe }, { env = { TPLUA_REFTRAIN_DEVICE = 'gpu' } })
    assert.are_not.equal(0, r.code)
    assert.is_true(has(r.stdout .. r.stderr, "reference: TPLUA_REFTRAIN_DEVICE: 'gpu' is not a "
      .. 'device (auto, cpu, cuda)'), r.stdout .. r.stderr)
  end)
end)
