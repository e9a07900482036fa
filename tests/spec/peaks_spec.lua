-- tp.analyse.peaks (measured peaks loaded from records, the tool's files and directories, looked
-- up by device) and tp.frameworks.peaks (the microbenchmark's command: the model's GEMM shapes).
local h = require('helper')
local json = require('tp.json')
local fs = require('tp.fs')
local record = require('tp.parse.record')
local peaks = require('tp.analyse.peaks')

-- A peaks section as the tool writes it on a GPU; `over` replaces members.
local function sample(over)
  local p = {
    schema = 'tplua.peaks/1', device = 'cuda', gpu = 'NVIDIA H200', torch = '2.5.1',
    runtime = 'CUDA 12.4', arch = 'sm_90', sm_count = 132, scaled_down = false,
    measured_at = '2026-01-02T03:04:05Z', precision = 'bf16', model = 'llama3.1-8b',
    gemm = {
      { label = 'qkv', op = 'qkv', pass = 'fwd', m = 4096, n = 6144, k = 4096, dtype = 'bf16',
        tflops = 701.5, tflops_median = 690.25, seconds = 3.0e-4, reps = 20 },
      { label = 'lm_head', op = 'lm_head', pass = 'fwd', m = 4096, n = 128256, k = 4096,
        dtype = 'bf16', skipped = 'not enough device memory for this shape' },
    },
    square = { bf16 = { n = 8192, tflops = 790.5, tflops_median = 781.0 },
      fp32 = { n = 8192, tflops = 51.25, tflops_median = 50.5 },
      fp8 = { n = 8192, skipped = 'torch 2.0 has no torch._scaled_mm' } },
    memory = { tbs = 4.125, tbs_median = 4.0, bytes = 4294967296, method = 'copy',
      counted = 'read+write' },
    tflops = { bf16 = 790.5, fp32 = 51.25 },
    bandwidth_tbs = 4.125,
  }
  for k, v in pairs(over or {}) do
    p[k] = v
  end
  return p
end

-- A run record of the peaks recipe holding `p`.
local function write_record(path, p, run_id)
  local rec = record.from_log({ records = {}, diagnostics = {}, args = {}, meta = {} },
    { iterations = false, platform = p.device == 'cpu' and 'cpu' or 'nvd', framework = 'peaks',
      run_id = run_id or 'peaks-llama3.1-8b-bf16', model = 'llama3.1-8b' })
  rec.status = 'completed'
  rec.peaks = p
  assert(fs.mkdir_p(fs.dirname(path)))
  assert(record.save(rec, path))
  return path
end

local function write_json(path, v)
  assert(fs.mkdir_p(fs.dirname(path)))
  assert(json.save_file(path, v))
  return path
end

describe('tp.analyse.peaks.load', function()
  it('reads a run record with a peaks section', function()
    local dir = h.tmpdir()
    local path = write_record(dir .. '/peaks-a.json', sample())
    local list, err = peaks.load(path)
    assert.is_nil(err)
    assert.are.equal(1, #list)
    local e = list[1]
    assert.are.equal(path, e.source)
    assert.are.equal('NVIDIA H200', e.gpu)
    assert.are.equal('h200', e.catalog)
    assert.are.equal('peaks-llama3.1-8b-bf16', e.run_id)
    assert.are.equal('tplua.peaks/1', e.peaks.schema)
    assert.are.equal(701.5, e.peaks.gemm[1].tflops)
    assert.are.same({}, list.errors)
  end)

  it('is what tp.analyse lists, and the record loads with tp.analyse.results', function()
    assert.are.equal(peaks, require('tp.analyse').peaks)
    local dir = h.tmpdir()
    write_record(dir .. '/peaks-a.json', sample())
    write_json(dir .. '/peaks-a.files/peaks.json', sample())
    local set = assert(require('tp.analyse.results').load(dir))
    assert.are.equal(1, #set.runs)
    assert.are.same({}, set.errors)
    -- The tool's own file beside the record is tplua's, not a foreign file.
    assert.are.same({}, set.skipped)
  end)

  it('reads the tool\'s own file (tplua.peaks/1)', function()
    local dir = h.tmpdir()
    local path = write_json(dir .. '/peaks.json', sample({ gpu = 'AMD Instinct MI300X',
      arch = 'gfx942', sm_count = 304, runtime = 'HIP 6.2.41133' }))
    local list = assert(peaks.load(path))
    assert.are.equal(1, #list)
    assert.are.equal('mi300x', list[1].catalog)
    assert.is_nil(list[1].run_id)
  end)

  it('walks a directory: records with peaks, the tool\'s files, nothing else', function()
    local dir = h.tmpdir()
    write_record(dir .. '/h200/peaks-a.json', sample())
    -- The tool's file of the same measurement, beside its record: counted once.
    write_json(dir .. '/h200/peaks-a.files/peaks.json', sample())
    -- Another measurement, only as the tool's file.
    write_json(dir .. '/mi300x/peaks.json', sample({ gpu = 'AMD Instinct MI300X',
      arch = 'gfx942', sm_count = 304, runtime = 'HIP 6.2', tflops = { bf16 = 650.0 } }))
    -- A training record without peaks, another JSON document, a profiler trace, hidden files.
    local rec = record.from_log({ records = {}, diagnostics = {}, args = {}, meta = {} },
      { platform = 'nvd', framework = 'megatron' })
    assert(record.save(rec, dir .. '/h200/train-1.json'))
    write_json(dir .. '/notes.json', { hello = 'world' })
    h.write(dir .. '/h200/rank0_trace.json', '{ not json')
    h.write(dir .. '/.hidden.json', '{ not json')
    local list = assert(peaks.load(dir))
    assert.are.equal(2, #list)
    assert.are.equal(dir .. '/h200/peaks-a.json', list[1].source)
    assert.are.equal('h200', list[1].catalog)
    assert.are.equal(dir .. '/mi300x/peaks.json', list[2].source)
    assert.are.equal('mi300x', list[2].catalog)
    assert.are.same({}, list.errors)
  end)

  it('lists the damaged files of a directory and loads the rest', function()
    local dir = h.tmpdir()
    write_record(dir .. '/good.json', sample())
    h.write(dir .. '/empty.json', '')
    h.write(dir .. '/binary.json', '\0\1\2\255\254 peaks')
    local text = h.read(write_record(dir .. '/whole.json', sample()))
    h.write(dir .. '/cut.json', text:sub(1, #text // 2))
    os.remove(dir .. '/whole.json')
    write_json(dir .. '/bad-peaks.json', sample({ tflops = { bf16 = 'fast' } }))
    local list = assert(peaks.load(dir))
    assert.are.equal(1, #list)
    assert.are.equal(dir .. '/good.json', list[1].source)
    local by = {}
    for _, e in ipairs(list.errors) do
      by[e.path:match('[^/]+$')] = e.message
    end
    for _, name in ipairs({ 'empty.json', 'binary.json', 'cut.json', 'bad-peaks.json' }) do
      assert.is_string(by[name], name)
      assert.is_truthy(by[name]:find(dir .. '/' .. name, 1, true), by[name])
    end
    assert.is_truthy(by['bad-peaks.json']:find('$.tflops.bf16 is string, a number expected', 1,
      true), by['bad-peaks.json'])
  end)

  it('returns nil and a message naming the file for a missing or damaged one', function()
    local dir = h.tmpdir()
    local function fails(path, want, code)
      local list, err, c = peaks.load(path)
      assert.is_nil(list)
      assert.is_string(err)
      assert.is_truthy(err:find(path, 1, true), err)
      assert.is_truthy(err:find(want, 1, true), err)
      if code then
        assert.are.equal(code, c)
      end
    end
    fails(dir .. '/missing.json', 'No such file', 'ENOENT')
    h.write(dir .. '/empty.json', '')
    fails(dir .. '/empty.json', 'empty.json', 'EPARSE')
    h.write(dir .. '/binary.json', '\0\1\2\255\254')
    fails(dir .. '/binary.json', 'binary.json', 'EPARSE')
    local text = h.read(write_record(dir .. '/whole.json', sample()))
    h.write(dir .. '/cut.json', text:sub(1, #text - 40))
    fails(dir .. '/cut.json', 'cut.json', 'EPARSE')
    h.write(dir .. '/list.json', '[1, 2]')
    fails(dir .. '/list.json', 'top level is array', 'EINVAL')
    write_json(dir .. '/other.json', { schema = 'tplua.search/1' })
    fails(dir .. '/other.json', "neither a run record nor a peaks file (schema 'tplua.search/1')",
      'EINVAL')
    local rec = record.from_log({ records = {}, diagnostics = {}, args = {}, meta = {} }, {})
    assert(record.save(rec, dir .. '/train.json'))
    fails(dir .. '/train.json', 'a run record without a peaks section', 'ENOENT')
    write_json(dir .. '/v2.json', sample({ schema = 'tplua.peaks/2' }))
    fails(dir .. '/v2.json', "$.schema 'tplua.peaks/2' is not supported (this version reads "
      .. 'tplua.peaks/1)', 'EINVAL')
    write_record(dir .. '/bad-device.json', sample({ device = 'tpu' }))
    fails(dir .. '/bad-device.json', "$.peaks.device is 'tpu', 'cuda' or 'cpu' expected")
    write_record(dir .. '/bad-gemm.json', sample({ gemm = { { label = 'x', m = 0, n = 1,
      k = 1 } } }))
    fails(dir .. '/bad-gemm.json', '$.peaks.gemm[1].m is integer, a positive whole number')
    write_record(dir .. '/no-tflops.json', sample({ tflops = json.null }))
    fails(dir .. '/no-tflops.json', '$.peaks.tflops is null, an object expected')
  end)

  it('raises on misuse only', function()
    assert.has_error(function()
      peaks.load(42)
    end, 'tp.analyse.peaks.load: path must be a string, got number')
  end)
end)

describe('tp.analyse.peaks lookups', function()
  local list
  setup(function()
    local dir = h.tmpdir()
    write_record(dir .. '/a-old.json', sample({ measured_at = '2025-01-01T00:00:00Z',
      tflops = { bf16 = 700.0 } }), 'old')
    write_record(dir .. '/b-new.json', sample(), 'new')
    write_record(dir .. '/c-h100.json', sample({ gpu = 'NVIDIA H100 80GB HBM3',
      tflops = { bf16 = 640.0, fp8 = 1210.5 }, bandwidth_tbs = json.null,
      memory = { tbs = 2.9, method = 'copy' } }), 'h100')
    write_record(dir .. '/d-acme.json', sample({ gpu = 'Acme X1', arch = 'acme1',
      tflops = { bf16 = 10.0 }, bandwidth_tbs = json.null, memory = json.null }), 'acme')
    write_record(dir .. '/e-cpu.json', sample({ device = 'cpu', gpu = json.null,
      cpu = 'AMD EPYC', runtime = json.null, arch = json.null, sm_count = json.null,
      scaled_down = true, tflops = { bf16 = 0.5, fp32 = 0.01 }, bandwidth_tbs = 0.04 }), 'cpu')
    list = assert(peaks.load(dir))
    assert.are.equal(5, #list)
  end)

  it('finds a device by the name torch or the probe reports, through the catalog', function()
    local e = peaks.for_device(list, 'NVIDIA H200')
    assert.are.equal('new', e.run_id)  -- the latest of the two H200 measurements
    assert.are.equal('new', peaks.for_device(list, 'h200').run_id)  -- a catalog id
    assert.are.equal('new', peaks.for_device(list, 'NVIDIA H200 SXM 141GB').run_id)
    assert.are.equal('h100', peaks.for_device(list, 'NVIDIA H100 80GB HBM3').run_id)
    assert.are.equal('h100', peaks.for_device(list, 'H100-SXM5-80GB').run_id)
  end)

  it('compares names as they are where the catalog does not know the device', function()
    assert.is_nil(list[4].catalog)
    assert.are.equal('acme', peaks.for_device(list, 'Acme X1').run_id)
    assert.is_nil(peaks.for_device(list, 'Acme X2'))
    assert.is_nil(peaks.for_device(list, 'NVIDIA B200'))
    assert.are.equal('cpu', peaks.for_device(list, 'cpu').run_id)
    assert.are.equal('cpu', peaks.for_device(list, 'AMD EPYC').run_id)
    assert.is_nil(peaks.for_device({}, 'NVIDIA H200'))
  end)

  it('gives the measured TFLOP/s of a precision and the bandwidth, nil when not measured',
    function()
      local e = peaks.for_device(list, 'NVIDIA H200')
      assert.are.equal(790.5, peaks.tflops(e, 'bf16'))
      assert.are.equal(51.25, peaks.tflops(e, 'fp32'))
      assert.is_nil(peaks.tflops(e, 'fp8'))
      assert.are.equal(4.125, peaks.bandwidth(e))
      -- A peaks table works as well as an entry; a missing entry gives nil.
      assert.are.equal(790.5, peaks.tflops(e.peaks, 'bf16'))
      assert.is_nil(peaks.tflops(nil, 'bf16'))
      assert.is_nil(peaks.bandwidth(peaks.for_device(list, 'NVIDIA B200')))
      -- Without bandwidth_tbs, the copy's figure; without either, nil.
      local h100 = peaks.for_device(list, 'NVIDIA H100 80GB HBM3')
      assert.are.equal(1210.5, peaks.tflops(h100, 'fp8'))
      assert.are.equal(2.9, peaks.bandwidth(h100))
      assert.is_nil(peaks.bandwidth(peaks.for_device(list, 'Acme X1')))
      assert.are.equal(0.04, peaks.bandwidth(peaks.for_device(list, 'cpu')))
    end)

  it('raises on misuse', function()
    assert.has_error(function()
      peaks.for_device(nil, 'x')
    end, 'tp.analyse.peaks.for_device: a list from peaks.load expected, got nil')
    assert.has_error(function()
      peaks.for_device(list, 42)
    end, 'tp.analyse.peaks.for_device: device must be a string, got number')
    assert.has_error(function()
      peaks.tflops('x', 'bf16')
    end, 'tp.analyse.peaks.tflops: an entry or a peaks table expected, got string')
  end)
end)

describe('tp.frameworks.peaks', function()
  local adapter = assert(require('tp.frameworks').get('peaks'))

  it('takes the model\'s GEMM shapes from the catalog, M = micro-batch x sequence', function()
    local s = adapter.shapes(adapter.config())
    local got = {}
    for i, x in ipairs(s) do
      got[i] = string.format('%s=%dx%dx%d', x.label, x.m, x.n, x.k)
    end
    -- Llama 3.1 8B: hidden 4096, 32 heads and 8 KV heads of 128, FFN 14336 (SwiGLU: up and
    -- gate fused), vocabulary 128256; mbs 2 x 2048 tokens.
    assert.are.same({ 'qkv=4096x6144x4096', 'attn_out=4096x4096x4096',
      'ffn_up_gate=4096x28672x4096', 'ffn_down=4096x4096x14336', 'lm_head=4096x128256x4096' },
      got)
    s = adapter.shapes(adapter.config({ model = 'qwen2.5-7b', mbs = 1, seq_len = 4096, tp = 2 }))
    assert.are.same({ 4096, 2304, 3584 }, { s[1].m, s[1].n, s[1].k })
    assert.are.same({ 3584, 1792 }, { s[2].n, s[2].k })
    assert.are.same({ 76032, 3584 }, { s[5].n, s[5].k })
  end)

  it('builds the tool\'s command: shapes, precision, its output and no iterations', function()
    local cmd = adapter.build(adapter.config({ precision = 'fp8', peaks = { backward = false,
      square = { 'bf16' }, repeats = 7 } }))
    local argv = table.concat(cmd.argv, ' ')
    assert.is_truthy(cmd.argv[2]:match('/tools/peaks/peaks%.py$'), cmd.argv[2])
    assert.is_truthy(argv:find('--out peaks.json --dtype fp8 --model llama3.1-8b', 1, true), argv)
    assert.is_truthy(argv:find('--gemm lm_head=4096x128256x4096', 1, true), argv)
    assert.is_truthy(argv:find('--square bf16 --square-n 8192 --cpu-cap 1024', 1, true), argv)
    assert.is_truthy(argv:find('--repeats 7', 1, true), argv)
    assert.is_falsy(argv:find('--backward', 1, true))
    assert.are.same({ peaks = 'peaks.json' }, cmd.outputs)
    assert.is_false(cmd.iterations)
    assert.is_truthy(adapter.cpu_fallback)
  end)

  it('names the key at fault', function()
    local function bad(over, want)
      local ok, err = pcall(adapter.build, adapter.config(over))
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(want, 1, true), tostring(err))
    end
    bad({ model = 'llama3-8b' }, "peaks: config.model: models: unknown model 'llama3-8b'")
    bad({ mbs = 0 }, 'peaks: config.training.mbs: a positive number expected, got 0')
    bad({ precision = 'fp4' }, "peaks: config.training.precision: unknown precision 'fp4'")
    bad({ tp = 3 }, 'peaks: config.parallelism.tp: 3 does not divide the 32 attention heads')
    bad({ peaks = { squares = {} } }, 'peaks: config.peaks.squares: unknown key')
    bad({ peaks = { square = { 'fp64' } } }, "config.peaks.square[1]: unknown precision 'fp64'")
    local ok, err = pcall(adapter.build, { model = 'ref-tiny', training = { lr = 1 } })
    assert.is_false(ok)
    assert.is_truthy(err:find('config.training.lr: not used by the peaks microbenchmark', 1,
      true), err)
  end)
end)
