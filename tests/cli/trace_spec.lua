-- tplua trace: the real binary on real AMD and NVIDIA traces (tests/fixtures/traces), the
-- explanation of a cross-vendor pair, and damaged, truncated, empty, non-JSON and huge-number
-- traces (clear errors or warnings, never a crash).
local h = require('helper')
local json = require('tp.json')

local DIR = h.fixture('traces')
local EXPECTED = json.decode(assert(h.read(DIR .. '/expected.json')))

-- The fixture's JSON text, uncompressed.
local function plain_text(name)
  local p = io.popen('gzip -dc ' .. h.shquote(DIR .. '/' .. name))
  local s = p:read('a')
  p:close()
  return s
end

describe('tplua trace', function()
  it('breaks down a real AMD MI300X trace (DDP rank, RCCL)', function()
    local r = h.run({ 'trace', DIR .. '/resnet_ddp8_mi300_rank0.json.gz', '--top', '5' })
    assert.are.equal('', r.stderr)
    assert.are.equal(0, r.code)
    local out = r.stdout
    assert.is_truthy(out:find('(rank 0 of 8, nccl, AMD Instinct MI300X)', 1, true))
    assert.is_truthy(out:find('56451 events, 3653 GPU ops (57 distinct names), 3100 launches, '
      .. '3 profiler steps, 968 ops in no step', 1, true))
    assert.is_truthy(out:find('\n  15            18.980  0.093  0.5%    6.434  33.9%', 1, true))
    assert.is_truthy(out:find('mean of 2', 1, true))
    assert.is_truthy(out:find('\n  broadcast      communication', 1, true))
    assert.is_truthy(out:find('communication: 15.887 ms per step, 25.0% hidden behind compute, '
      .. '11.920 ms exposed', 1, true))
    assert.is_truthy(out:find('top 5 kernels of 57', 1, true))
    assert.is_truthy(out:find('whole trace as HTA takes it (2685 ops)', 1, true))
  end)

  it('breaks down a real NVIDIA H100 trace, one step with --step', function()
    local r = h.run({ 'trace', DIR .. '/qwen05b_h100.json.gz', '--step', '6' })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('(NVIDIA H100', 1, true))
    assert.is_truthy(r.stdout:find('time per class (step 6', 1, true))
    assert.is_truthy(r.stdout:find('\n  gemm ', 1, true))
    assert.is_truthy(r.stdout:find('\n  attention ', 1, true))
    -- a step the trace lacks: a usage error that lists the steps it has, with or without --ops
    for _, extra in ipairs({ {}, { '--ops' }, { '--json' } }) do
      r = h.run({ 'trace', DIR .. '/qwen05b_h100.json.gz', '--step', '99', table.unpack(extra) })
      assert.are.equal(2, r.code)
      assert.are.equal('', r.stdout)
      assert.is_truthy(r.stderr:find('--step 99: no such profiler step; the trace has: 6', 1,
        true), r.stderr)
    end
    -- --step with --json: that step only
    r = h.run({ 'trace', DIR .. '/resnet_ddp8_mi300_rank0.json.gz', '--step', '16', '--json' })
    assert.are.equal(0, r.code)
    local doc = json.decode(r.stdout)
    assert.are.equal(16, doc.step)
    assert.are.equal(1, #doc.ranks[1].steps)
    assert.are.equal(16, doc.ranks[1].steps[1].step)
    r = h.run({ 'trace', '--compare', DIR .. '/qwen05b_h100.json.gz',
      DIR .. '/qwen05b_mi300.json.gz', '--step', '6' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find('--step goes with the traces of one run', 1, true))
  end)

  it('holds each op against the GPU\'s limit with --ops (text, JSON, one step)', function()
    local r = h.run({ 'trace', DIR .. '/qwen05b_h100.json.gz', '--ops', '--top', '5' })
    assert.are.equal('', r.stderr)
    assert.are.equal(0, r.code)
    local out = r.stdout
    assert.is_truthy(out:find('ops: 1198 GPU ops linked to the CPU op that launched them, 509 '
      .. 'not; NVIDIA H100 80GB HBM3 = catalog h100-sxm', 1, true), out)
    assert.is_truthy(out:find('top 5 ops of ', 1, true))
    assert.is_truthy(out:find('\n  aten::mm +%[8944,1024%] %[1024,2816%] +bf16 +48 +4%.055 +'
      .. '84%.48 +51%.582'), out)
    assert.is_truthy(out:find('per class: % of the roofline limit', 1, true))
    assert.is_truthy(out:find('\n  gemm ', 1, true))
    r = h.run({ 'trace', DIR .. '/bert_small_mi300.json.gz', '--ops', '--json' })
    assert.are.equal(0, r.code)
    local doc = json.decode(r.stdout)
    local t = doc.ops
    assert.are.equal('mi300x', t.device.catalog)
    assert.is_true(#t.rows > 5)
    assert.is_nil(doc.ranks[1].ops)  -- one rank: the run's table is its table
    local mm = t.rows[1]
    assert.is_number(mm.tflops)
    assert.is_number(mm.pct)
    -- one step of a three-step trace: a third of the ops
    r = h.run({ 'trace', DIR .. '/resnet_ddp8_mi300_rank0.json.gz', '--ops', '--json', '--step',
      '15' })
    assert.are.equal(0, r.code)
    local one = json.decode(r.stdout).ops
    r = h.run({ 'trace', DIR .. '/resnet_ddp8_mi300_rank0.json.gz', '--ops', '--json' })
    local all = json.decode(r.stdout).ops
    assert.are.equal(895, one.linked)
    assert.are.equal(2685, all.linked)
  end)

  it('pairs the same ops across H100 and MI300X with verdicts, and draws the roofline',
    function()
      local dir = h.tmpdir()
      local svg = dir .. '/roofline.svg'
      local r = h.run({ 'trace', '--compare', DIR .. '/qwen05b_h100.json.gz',
        DIR .. '/qwen05b_mi300.json.gz', '--label-a', 'H100', '--label-b', 'MI300X',
        '--roofline', svg })
      assert.are.equal('', r.stderr)
      assert.are.equal(0, r.code)
      local out = r.stdout
      assert.is_truthy(out:find('the same ops on both: ', 1, true))
      assert.is_truthy(out:find('H100 % limit', 1, true))
      assert.is_truthy(out:find('hardware or software, per class', 1, true))
      assert.is_truthy(out:find('\n    gemm: MI300X at %d+%% of its bf16 peak, H100 at %d+%%: '),
        out)
      assert.is_truthy(out:find('the explanation\'s classes and their largest paired ops', 1,
        true))
      local text = assert(h.read(svg))
      assert.is_truthy(text:find('<svg', 1, true))
      assert.is_truthy(text:find('MI300X ops', 1, true))
      assert.is_truthy(text:find('H100 limit (bf16 989 TFLOP/s', 1, true))
      r = h.run({ 'trace', '--compare', DIR .. '/bert_small_h100.json.gz',
        DIR .. '/bert_small_mi300.json.gz', '--json' })
      assert.are.equal(0, r.code)
      local doc = json.decode(r.stdout)
      assert.is_true(#doc.ops.pairs > 0)
      assert.is_true(#doc.ops.verdicts > 0)
      r = h.run({ 'trace', DIR .. '/bert_small_h100.json.gz', '--roofline', dir .. '/r.pdf' })
      assert.are.equal(2, r.code)
      assert.is_truthy(r.stderr:find('must end in .png or .svg', 1, true))
    end)

  it('takes models and measured peaks from files', function()
    local dir = h.tmpdir()
    local models = dir .. '/models.lua'
    h.write(models, "require('tp.analyse.ops').model { name = 'aten::mm', class = 'gemm', "
      .. "category = 'GEMM', fn = function(op) return { flops = 1e12, bytes = 1e6, "
      .. "precision = 'bf16', compute = 'matrix' } end }\n")
    local peaks = dir .. '/peaks.json'
    h.write(peaks, json.encode({ schema = 'tplua.peaks/1', device = 'cuda',
      gpu = 'NVIDIA H100 80GB HBM3', tflops = { bf16 = 800.0 }, bandwidth_tbs = 3.0 }))
    local r = h.run({ 'trace', DIR .. '/qwen05b_h100.json.gz', '--models', models, '--peaks',
      peaks, '--json' })
    assert.are.equal(0, r.code)
    local t = json.decode(r.stdout).ops
    local mm = t.rows[1]
    assert.are.equal('aten::mm', mm.name)
    assert.are.equal(1000, mm.gflops)
    assert.are.equal(800.0, mm.limits.measured_tflops)
    assert.is_number(mm.measured_pct)
    r = h.run({ 'trace', DIR .. '/qwen05b_h100.json.gz', '--peaks', peaks })
    assert.is_truthy(r.stdout:find('% meas.', 1, true))
    assert.is_truthy(r.stdout:find('measured peaks: ' .. peaks, 1, true))
    r = h.run({ 'trace', DIR .. '/qwen05b_h100.json.gz', '--models', dir .. '/none.lua' })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find('--models ' .. dir .. '/none.lua', 1, true))
    h.write(dir .. '/bad.json', 'not json')
    r = h.run({ 'trace', DIR .. '/qwen05b_h100.json.gz', '--peaks', dir .. '/bad.json' })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find('bad.json', 1, true))
  end)

  it('counts and skips ops with missing, malformed or absurd shapes, never a crash', function()
    local dir = h.tmpdir()
    local p = dir .. '/shapes.json'
    local function op(i, dims)
      return string.format('{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,'
        .. '"ts":%d,"dur":5,"args":{"External id":%d,"Input Dims":%s,"Input type":'
        .. '["c10::BFloat16","c10::BFloat16"]}},'
        .. '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,'
        .. '"ts":%d,"dur":1,"args":{"External id":%d,"correlation":%d}},'
        .. '{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":%d,"dur":3,'
        .. '"args":{"correlation":%d}},', i * 10, i, dims, i * 10 + 1, i, i, 1000 + i * 10, i)
    end
    h.write(p, '{"traceEvents":[' .. op(1, '[[4,8],[8,2]]') .. op(2, '[[-4,8],[8,2]]')
      .. op(3, '[["a",8],[8,2]]') .. op(4, '[[4,8]]') .. op(5, '[[99999999999999,8],'
      .. '[8,99999999999999]]') .. op(6, '{"x":1}')
      .. '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":0,"dur":100}]}')
    local r = h.run({ 'trace', p, '--ops', '--json' })
    assert.are.equal(0, r.code)
    local t = json.decode(r.stdout).ops
    assert.are.equal(6, t.linked)
    assert.are.equal(5, t.malformed)
    local good, skipped = 0, 0
    for _, row in ipairs(t.rows) do
      if row.gflops then
        good = good + 1
      else
        skipped = skipped + 1
        assert.is_string(row.skipped)
        assert.are.equal(3000, row.own)
      end
    end
    assert.are.equal(1, good)
    assert.are.equal(5, skipped)
    assert.is_truthy(t.warnings[1]:find('5 op shapes not modelled', 1, true))
    r = h.run({ 'trace', p, '--ops' })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('warning: 5 op shapes not modelled', 1, true))
  end)

  it('prints JSON with the steps, the mean, the classes and HTA\'s view', function()
    local r = h.run({ 'trace', DIR .. '/bert_small_mi300.json.gz', '--json' })
    assert.are.equal(0, r.code)
    local doc = json.decode(r.stdout)
    local a = doc.ranks[1]
    assert.are.equal(61, a.info.ops)
    assert.are.equal(1, #a.steps)
    assert.are.equal(6, a.steps[1].step)
    assert.are.equal(a.steps[1].window, a.steps[1].idle + a.steps[1].busy)
    assert.are.equal(61, a.whole.ops)
    assert.is_true(#a.top > 0)
  end)

  it('explains a real H100 / MI300X pair: rows adding up to the step-time difference',
    function()
      local r = h.run({ 'trace', '--compare', DIR .. '/qwen05b_h100.json.gz',
        DIR .. '/qwen05b_mi300.json.gz', '--label-a', 'H100', '--label-b', 'MI300X' })
      assert.are.equal('', r.stderr)
      assert.are.equal(0, r.code)
      -- Which side is faster and by how much, the columns and the sign, from the oracle's
      -- step windows (expected.json).
      local wa = EXPECTED.fixtures['qwen05b_h100.json.gz'].steps[1].window_ns
      local wb = EXPECTED.fixtures['qwen05b_mi300.json.gz'].steps[1].window_ns
      assert.is_truthy(r.stdout:find(string.format('why MI300X and H100 differ: MI300X %.1f%% '
        .. 'faster per step: %.3f vs %.3f ms\n', 100 * (wa - wb) / wa, wb / 1e6, wa / 1e6), 1,
        true), r.stdout)
      assert.is_truthy(r.stdout:find('  columns: H100 (A), MI300X (B); difference = MI300X - '
        .. 'H100, ms per step: negative where MI300X spends less time', 1, true), r.stdout)
      assert.is_truthy(r.stdout:find('step (sum of the rows)', 1, true))
      assert.is_truthy(r.stdout:find('largest contributors: elementwise ', 1, true))
      -- Rows moving in opposite directions: each row's share of all the movement, none over
      -- 100% nor negative, and together 100%.
      local total = 0
      for share in r.stdout:gmatch('\n  [%w_ ]-  +[%d.]+ +[%d.]+ +[-+][%d.]+ +(%d+)%%') do
        local v = tonumber(share)
        assert.is_true(v >= 0 and v <= 100, share)
        total = total + v
      end
      assert.is_true(total >= 97 and total <= 103, tostring(total))
      -- The host side stays in the explanation: host wait of each, and the causes of idle.
      assert.is_truthy(r.stdout:find('\n  host: H100 waited ', 1, true), r.stdout)
      assert.is_truthy(r.stdout:find('\n  idle by cause (ms/step): H100 ', 1, true), r.stdout)
      r = h.run({ 'trace', '--compare', DIR .. '/qwen05b_h100.json.gz',
        DIR .. '/qwen05b_mi300.json.gz', '--json' })
      local doc = json.decode(r.stdout)
      local e = doc.explanation
      local sum = 0
      for _, row in ipairs(e.rows) do
        sum = sum + row.diff
      end
      assert.is_true(math.abs(sum - e.diff) <= 0.01 * math.abs(e.diff))
      assert.are.equal(doc.a.ranks[1].mean.window, e.step_a)
      assert.are.equal('qwen05b_h100', e.labels[1])
    end)

  it('takes a directory of rank files as one run and classification rules from a file',
    function()
      local dir = h.tmpdir()
      os.execute('cp ' .. h.shquote(DIR .. '/bert_small_h100.json.gz') .. ' '
        .. h.shquote(dir .. '/rank0.json.gz'))
      os.execute('cp ' .. h.shquote(DIR .. '/bert_small_h100.json.gz') .. ' '
        .. h.shquote(dir .. '/rank1.json.gz'))
      local rules = dir .. '/rules.lua'
      h.write(rules, "require('tp.analyse.trace').rule { pattern = 'gemm', class = 'mm', "
        .. "kind = 'compute' }\n")
      local r = h.run({ 'trace', dir, '--rules', rules, '--json' })
      assert.are.equal(0, r.code)
      local doc = json.decode(r.stdout)
      assert.are.equal(2, #doc.ranks)
      assert.are.equal(0, #doc.stragglers)
      assert.is_true(doc.ranks[1].mean.class.mm.count > 0)
      r = h.run({ 'trace', dir, '--rules', dir .. '/none.lua' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find('--rules ' .. dir .. '/none.lua', 1, true))
    end)

  it('reads a truncated trace up to its cut, with a warning', function()
    local dir = h.tmpdir()
    local text = plain_text('bert_small_h100.json.gz')
    local cut = dir .. '/cut.json'
    h.write(cut, text:sub(1, math.floor(#text * 0.8)))
    local r = h.run({ 'trace', cut })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('warning: ' .. cut .. ': truncated at byte ', 1, true))
    -- a gzip stream cut in half
    local gz = h.read(DIR .. '/bert_small_h100.json.gz')
    local cutgz = dir .. '/cut.json.gz'
    h.write(cutgz, gz:sub(1, #gz // 2))
    r = h.run({ 'trace', cutgz, '--json' })
    assert.are.equal(0, r.code)
    local doc = json.decode(r.stdout)
    assert.is_true(doc.ranks[1].info.truncated)
    -- where: the offset in the gzip file, and the one in the text it inflates to, each named
    assert.is_truthy(doc.ranks[1].warnings[1]:find(cutgz .. ': truncated at compressed byte '
      .. (#gz // 2) .. ' (decompressed byte ' .. doc.ranks[1].info.bytes .. '): kept the ', 1,
      true), doc.ranks[1].warnings[1])
  end)

  it('refuses a cut file that gives no event, naming both offsets of a gzip', function()
    local dir = h.tmpdir()
    local gz = h.read(DIR .. '/bert_small_h100.json.gz')
    -- a gzip cut right after its 10-byte header: a cut file, not an empty one
    local p = dir .. '/header.json.gz'
    h.write(p, gz:sub(1, 10))
    local r = h.run({ 'trace', p })
    assert.are.equal(1, r.code)
    assert.are.equal('', r.stdout)
    assert.is_truthy(r.stderr:find(p .. ': truncated at compressed byte 10 (decompressed byte 0):'
      .. ' the gzip stream ends early', 1, true), r.stderr)
    -- JSON cut inside the first event: an error, not "a CPU-only profile" with exit status 0
    local text = plain_text('bert_small_h100.json.gz')
    local first = assert(text:find('"traceEvents"', 1, true))
    first = assert(text:find('{', first, true))
    p = dir .. '/early.json'
    h.write(p, text:sub(1, first + 20))
    r = h.run({ 'trace', p })
    assert.are.equal(1, r.code)
    assert.are.equal('', r.stdout)
    assert.is_truthy(r.stderr:find(p .. ': truncated at byte ' .. (first + 20) .. ': no event '
      .. 'before the cut', 1, true), r.stderr)
    -- the same, gzip: the compressed offset, then the decompressed one
    p = dir .. '/early.json.gz'
    h.write(dir .. '/early.json.plain', text:sub(1, first + 20))
    local gzip = io.popen('gzip -c ' .. h.shquote(dir .. '/early.json.plain'))
    local whole = gzip:read('a')
    gzip:close()
    h.write(p, whole:sub(1, #whole - 8))  -- no trailer: cut at the end of the data
    r = h.run({ 'trace', p })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find(p .. ': truncated at compressed byte ' .. (#whole - 8)
      .. ' (decompressed byte ' .. (first + 20) .. '): no event before the cut', 1, true),
      r.stderr)
  end)

  it('refuses empty, non-JSON, damaged and missing traces with the file and the byte', function()
    local dir = h.tmpdir()
    local cases = {
      { 'empty.json', '', 'empty.json: empty file' },
      { 'binary.json', '\0\1\2\255garbage', 'binary.json: byte 0: not a JSON trace' },
      { 'text.json', 'hello world', 'text.json: byte 0: not a JSON trace' },
      { 'damaged.json', '{"traceEvents":[{"ph":"X","name":"k","ts":1,,}]}',
        'damaged.json: byte 44: expected a string' },
      { 'noevents.json', '{"schemaVersion":1}', 'noevents.json: no traceEvents in the trace' },
      { 'header.json', '{"schemaVersion":1, "deviceProp', 'header.json: byte 31: the file '
        .. 'ends before any traceEvents' },
    }
    for _, c in ipairs(cases) do
      h.write(dir .. '/' .. c[1], c[2])
      local r = h.run({ 'trace', dir .. '/' .. c[1] })
      assert.are.equal(1, r.code, c[1])
      assert.is_truthy(r.stderr:find(c[3], 1, true), r.stderr)
    end
    local gz = h.read(DIR .. '/bert_small_h100.json.gz')
    local bad = gz:sub(1, 2000) .. string.rep('\255', 64) .. gz:sub(2065)
    h.write(dir .. '/flipped.json.gz', bad)
    local r = h.run({ 'trace', dir .. '/flipped.json.gz' })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find('flipped.json.gz: gzip: ', 1, true), r.stderr)
    r = h.run({ 'trace', dir .. '/missing.json' })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find('missing.json: No such file or directory', 1, true))
  end)

  it('keeps huge numbers out of the figures: skipped with a warning, never a crash', function()
    local dir = h.tmpdir()
    local p = dir .. '/huge.json'
    h.write(p, '{"traceEvents":['
      .. '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":0,"dur":100},'
      .. '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1,"dur":1,'
      .. '"args":{"correlation":7,"External id":123456789012345678901234567890}},'
      .. '{"ph":"X","cat":"kernel","name":"gemm_a","ts":5,"dur":10,"args":{"correlation":7,'
      .. '"stream":7,"grid":[1e400,2]}},'
      .. '{"ph":"X","cat":"kernel","name":"gemm_b","ts":1e30,"dur":10}]}')
    local r = h.run({ 'trace', p, '--json' })
    assert.are.equal(0, r.code)
    local doc = json.decode(r.stdout)
    local a = doc.ranks[1]
    assert.are.equal(1, a.info.ops)
    assert.are.equal(1, a.info.bad)
    assert.is_truthy(a.warnings[1]:find('out-of-range ts or dur was skipped', 1, true))
    assert.are.equal(10000, a.steps[1].busy)
  end)

  it('says a CPU-only trace has no GPU breakdown instead of printing zeros', function()
    local dir = h.tmpdir()
    local p = dir .. '/cpu.json'
    h.write(p, '{"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#2",'
      .. '"ts":1,"dur":9},{"ph":"X","cat":"cpu_op","name":"aten::addmm","ts":2,"dur":3}]}')
    local r = h.run({ 'trace', p })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('no GPU kernels, copies or memsets in this trace (a CPU-only '
      .. 'profile)', 1, true))
    assert.is_falsy(r.stdout:find('temporal breakdown', 1, true))
  end)

  it('explains its usage', function()
    local r = h.run({ 'trace', '--help' })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('usage: tplua trace FILE|DIR...', 1, true))
    r = h.run({ 'trace' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find('no trace FILE or DIR given', 1, true))
    r = h.run({ 'trace', '--compare', DIR .. '/qwen05b_h100.json.gz' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find('--compare takes two runs (A B), got 1', 1, true))
    r = h.run({ 'trace', 'x.json', '--label-a', 'A' })
    assert.are.equal(2, r.code)
    r = h.run({ 'trace', 'x.json', '--bogus' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("unknown option '--bogus'", 1, true))
  end)
end)
