-- recipes/peaks.lua through the real binary: its plan, and a real run of the peaks
-- microbenchmark (tools/peaks, torch) on this machine's CPU into a temporary results directory,
-- whose record must carry the measured peaks. Needs Debian's python3-torch; pending (visibly)
-- without it.
local h = require('helper')
local json = require('tp.json')

local ENV = { TPLUA_PYTHON = '/usr/bin/python3', TPLUA_PEAKS_MODEL = false,
  TPLUA_PEAKS_MBS = false, TPLUA_PEAKS_SEQ_LEN = false, TPLUA_PEAKS_PRECISION = false,
  TPLUA_PEAKS_TP = false }

describe('tplua plan recipes/peaks.lua', function()
  it('shows the model\'s GEMM shapes, the command and where its results go', function()
    local r = h.run({ 'plan', 'recipes/peaks.lua' }, { cwd = h.source_dir, env = ENV })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    for _, want in ipairs({ 'peaks-llama3.1-8b-bf16  [peaks]', '/tools/peaks/peaks.py --out '
      .. 'peaks.json --dtype bf16 --model llama3.1-8b', '--gemm qkv=4096x6144x4096',
      '--gemm attn_out=4096x4096x4096', '--gemm ffn_up_gate=4096x28672x4096',
      '--gemm ffn_down=4096x4096x14336', '--gemm lm_head=4096x128256x4096', '--backward',
      '--cpu-cap 1024', 'runs in output/peaks/peaks-llama3.1-8b-bf16.files',
      "output output/peaks/peaks-llama3.1-8b-bf16.files/peaks.json -> the record's peaks",
      'prints no iteration' }) do
      assert.is_truthy(r.stdout:find(want, 1, true), want .. '\n' .. r.stdout)
    end
  end)

  it('takes the model and shapes from the environment, and says what is wrong', function()
    local env = {}
    for k, v in pairs(ENV) do
      env[k] = v
    end
    env.TPLUA_PEAKS_MODEL, env.TPLUA_PEAKS_MBS, env.TPLUA_PEAKS_SEQ_LEN = 'qwen2.5-7b', '1', '8192'
    local r = h.run({ 'plan', 'recipes/peaks.lua' }, { cwd = h.source_dir, env = env })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find('--gemm qkv=8192x4608x3584', 1, true), r.stdout)
    env.TPLUA_PEAKS_TP = '3'
    r = h.run({ 'plan', 'recipes/peaks.lua' }, { cwd = h.source_dir, env = env })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find('peaks: config.parallelism.tp: 3 does not divide the 28 '
      .. 'attention heads', 1, true), r.stderr)
  end)
end)

describe('tplua run recipes/peaks.lua #slow', function()
  local missing = h.torch_missing()
  if missing then
    it('measures this machine\'s peaks with torch', function()
      pending(missing)
    end)
    return
  end

  it('measures the CPU\'s peaks into a normal run record with a peaks section', function()
    local dir = h.tmpdir()
    local r = h.run({ 'run', 'recipes/peaks.lua', '--results', dir },
      { cwd = h.source_dir, env = ENV })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local path = dir .. '/peaks-llama3.1-8b-bf16.json'
    local rec = assert(json.load_file(path))
    assert.are.equal('tplua.run/2', rec.schema)
    assert.are.equal('completed', rec.status)
    assert.are.equal('completed', rec.outcome)
    assert.are.equal('peaks', rec.framework)
    assert.are.equal('cpu', rec.platform)
    assert.are.equal('llama3.1-8b', rec.model)
    for _, d in ipairs(rec.diagnostics) do
      assert.are_not.equal('error', d.severity, d.message)
    end

    local p = rec.peaks
    assert.are.equal('tplua.peaks/1', p.schema)
    assert.are.equal('cpu', p.device)
    assert.is_true(p.scaled_down)
    assert.is_nil(p.gpu)
    assert.is_nil(p.runtime)
    assert.is_string(p.cpu)
    assert.is_truthy(p.torch:find('^%d+%.%d+'), p.torch)
    assert.are.equal(1024, p.cpu_cap)
    -- Five shapes of the model, forward, dX and dW; each dimension capped at 1024 on the CPU.
    assert.are.equal(15, #p.gemm)
    local labels = {}
    for _, g in ipairs(p.gemm) do
      labels[#labels + 1] = g.label
      assert.is_true(g.m <= 1024 and g.n <= 1024 and g.k <= 1024, g.label)
      assert.is_true(g.scaled_down, g.label)
      assert.is_table(g.planned, g.label)
      -- bf16 where the CPU has bf16 instructions, else fp32 (and the request kept).
      assert.is_truthy(g.dtype == 'bf16' or (g.dtype == 'fp32' and g.dtype_requested == 'bf16'))
      assert.is_nil(g.skipped, g.label)
      assert.is_true(g.tflops > 0, g.label)
      assert.is_true(g.tflops_median > 0 and g.tflops_median <= g.tflops, g.label)
      assert.is_true(g.seconds > 0 and g.reps >= 3, g.label)
    end
    assert.are.same({ 'qkv', 'qkv_dx', 'qkv_dw', 'attn_out', 'attn_out_dx', 'attn_out_dw',
      'ffn_up_gate', 'ffn_up_gate_dx', 'ffn_up_gate_dw', 'ffn_down', 'ffn_down_dx',
      'ffn_down_dw', 'lm_head', 'lm_head_dx', 'lm_head_dw' }, labels)
    assert.are.same({ m = 4096, n = 128256, k = 4096 }, p.gemm[13].planned)
    -- The square GEMMs: measured, or skipped with the reason (tf32 and fp8 need a GPU).
    for _, prec in ipairs({ 'bf16', 'fp16', 'fp32', 'tf32', 'fp8' }) do
      local s = p.square[prec]
      assert.is_table(s, prec)
      assert.are.equal(1024, s.n)
      assert.is_truthy(s.skipped or s.tflops > 0, prec)
    end
    assert.is_true(p.square.fp32.tflops > 0)
    assert.is_string(p.square.fp8.skipped)
    assert.is_string(p.square.tf32.skipped)
    -- Memory bandwidth: a copy, bytes read and written.
    assert.are.equal('copy', p.memory.method)
    assert.are.equal('read+write', p.memory.counted)
    assert.are.equal(2 * p.memory.buffer_bytes, p.memory.bytes)
    assert.is_true(p.memory.tbs > 0 and p.memory.tbs_median > 0)
    assert.are.equal(p.memory.tbs, p.bandwidth_tbs)
    -- The measured peak per precision: the best of its figures.
    local dtype = p.gemm[1].dtype
    assert.is_true(p.tflops[dtype] > 0)
    for _, g in ipairs(p.gemm) do
      assert.is_true(g.tflops <= p.tflops[g.dtype])
    end
    assert.is_true(p.tflops.fp32 >= p.square.fp32.tflops)
    assert.are.equal(p.square.bf16.tflops ~= nil, p.tflops.bf16 ~= nil)

    -- The tool's own file stays beside the record; the log has its progress lines.
    local tool = assert(json.load_file(dir .. '/peaks-llama3.1-8b-bf16.files/peaks.json'))
    assert.are.same(p.tflops, tool.tflops)
    local log = h.read(dir .. '/peaks-llama3.1-8b-bf16.log')
    assert.is_truthy(log:find('peaks: gemm qkv 1024x1024x1024', 1, true), log)
    assert.is_truthy(log:find('peaks: measured peaks:', 1, true), log)

    -- Loaded by the peaks loader and by every reader of records.
    local pk = require('tp.analyse.peaks')
    local list = assert(pk.load(dir))
    assert.are.equal(1, #list)
    assert.are.equal(path, list[1].source)
    assert.are.same({}, list.errors)
    local e = pk.for_device(list, 'cpu')
    assert.are.equal(p.tflops[dtype], pk.tflops(e, dtype))
    assert.are.equal(p.bandwidth_tbs, pk.bandwidth(e))
    local c = h.run({ 'compare', dir }, { cwd = h.source_dir })
    assert.are.equal(0, c.code, c.stdout .. c.stderr)
    assert.is_truthy(c.stdout:find('peaks-llama3.1-8b-bf16', 1, true), c.stdout)
    local set = assert(require('tp.analyse.results').load(dir))
    assert.are.equal(1, #set.runs)
    assert.are.same({}, set.errors)
    assert.are.same({}, set.skipped)

    -- Run again into the same directory: finished already, nothing measured.
    r = h.run({ 'run', 'recipes/peaks.lua', '--results', dir, '--skip-preflight' },
      { cwd = h.source_dir, env = ENV })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_truthy(r.stdout:find('0 finished, 0 failed, 1 skipped', 1, true), r.stdout)
  end)
end)
