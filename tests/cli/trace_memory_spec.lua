-- tplua trace --memory: the real binary on the real traces with the allocator's events (text,
-- JSON, the H100/MI300X pair side by side, PyTorch's memory-timeline export), usage errors, and
-- damaged memory events (counted and warned about, never a crash). Then a profiled run of the
-- reference trainer (CPU, seconds) with profile_memory: its record holds the memory its trace
-- measured, checked against the trace by tests/fixtures/traces/memory_figures.py, beside the
-- plan's estimate, and tplua compare and report show both with where each came from.
local h = require('helper')
local json = require('tp.json')
local fs = require('tp.fs')

local DIR = h.fixture('traces')
local H100 = DIR .. '/qwen05b_h100.json.gz'
local MI300 = DIR .. '/qwen05b_mi300.json.gz'
local SCRIPT = DIR .. '/memory_figures.py'

local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

-- The independent figures of one trace (memory_figures.py), or nil when Python is missing.
local function figures(path)
  local r = h.run({ SCRIPT, path }, { bin = '/usr/bin/python3' })
  if r.code ~= 0 then
    return nil, r.stderr
  end
  return json.decode(r.stdout).traces[path]
end

describe('tplua trace --memory', function()
  it('prints where the memory goes on a real H100 trace', function()
    local r = h.run({ 'trace', H100, '--memory', '--top', '5' })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    assert.truthy(has(out, 'memory of ' .. H100 .. '  (NVIDIA H100 80GB HBM3)'), out)
    assert.truthy(has(out, '2450 [memory] events on 2 devices'), out)
    assert.truthy(has(out, 'cuda:0: peak 1.945 GiB, 46.148 ms into step 6, forward, in aten::mul '
      .. '[16,559,2816] [16,559,2816]'), out)
    assert.truthy(has(out, 'at the peak: held before the trace 939.1 MiB, temporaries 1.028 GiB'),
      out)
    assert.truthy(has(out, 'capacity 80.000 GiB (catalog h100-sxm), headroom 77.551 GiB'), out)
    assert.truthy(has(out, 'top 5 ops of 34 by bytes allocated on cuda:0 (they add up to '
      .. '19.907 GiB, all its allocations)'), out)
    assert.truthy(has(out, 'warning: ' .. H100 .. ': memory events of cpu: on the CPU'), out)
    -- without --memory, none of it
    r = h.run({ 'trace', H100 })
    assert.is_false(has(r.stdout, '[memory] events'))
  end)

  it('writes the memory in the JSON schema with --json, and only then', function()
    local r = h.run({ 'trace', H100, '--memory', '--json' })
    assert.are.equal(0, r.code, r.stderr)
    local doc = json.decode(r.stdout)
    assert.are.equal('tplua.trace/2', doc.schema)
    local m = doc.ranks[1].memory
    local d = m.devices[1]
    assert.are.equal('cuda:0', d.label)
    assert.are.equal(2088508416, d.peak)
    assert.are.equal(1428625778044036, d.peak_ts)
    assert.are.equal(#d.curve.ts, #d.curve.allocated)
    assert.are.equal(#d.curve.ts, #d.curve.reserved)
    assert.are.equal(2250, #d.curve.ts)  -- every event: few enough
    assert.are.equal(34, #(function()
      local n = {}
      for _, o in ipairs(m.ops) do
        if o.device == 'cuda:0' then
          n[#n + 1] = o
        end
      end
      return n
    end)())
    r = h.run({ 'trace', H100, '--json' })
    assert.is_nil(json.decode(r.stdout).ranks[1].memory)
    -- a trace without memory events: null, and said in the text
    r = h.run({ 'trace', DIR .. '/vllm_b200_tp8_rank0.json.gz', '--memory', '--json' })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(json.null, json.decode(r.stdout, { null = json.null }).ranks[1].memory)
    r = h.run({ 'trace', DIR .. '/vllm_b200_tp8_rank0.json.gz', '--memory' })
    assert.truthy(has(r.stdout, 'no [memory] events in this trace'), r.stdout)
  end)

  it('sets the H100 and MI300X runs side by side with the same ops matched', function()
    local r = h.run({ 'trace', '--memory', '--compare', H100, MI300, '--label-a', 'H100',
      '--label-b', 'MI300X', '--top', '3' })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    assert.truthy(has(out, 'memory: H100 and MI300X side by side'), out)
    assert.truthy(out:find('peak allocated%s+1%.945 GiB%s+2%.067 GiB'), out)
    assert.truthy(out:find('capacity%s+80%.000 GiB %(catalog h100%-sxm%)%s+192%.000 GiB '
      .. '%(catalog mi300x%)'), out)
    assert.truthy(has(out, "MI300X's peak is 1.06x H100's"), out)
    assert.truthy(has(out, 'matched by op, shapes and dtype: 33 pairs, 100% of H100\'s'), out)
    assert.truthy(out:find('aten::addmm%s+%[1024%] %[8944,1024%] %[1024,1024%]%s+bf16%s+1%.299 '
      .. 'GiB%s+6%.572 GiB'), out)
    assert.truthy(has(out, 'only on MI300X (1): aten::zeros'), out)
    r = h.run({ 'trace', '--memory', '--compare', H100, MI300, '--json' })
    assert.are.equal(0, r.code, r.stderr)
    local c = json.decode(r.stdout).memory
    assert.are.equal(2088508416, c.sides[1].peak)
    assert.are.equal(2219047936, c.sides[2].peak)
    assert.are.equal(33, #c.pairs)
    assert.are.equal(6, c.sides[1].curve.step)
    -- a side without memory events
    r = h.run({ 'trace', '--memory', '--compare', H100, DIR .. '/vllm_b200_tp8_rank0.json.gz' })
    assert.are.equal(1, r.code)
    assert.truthy(has(r.stderr, 'vllm_b200_tp8_rank0.json.gz: no [memory] events'), r.stderr)
  end)

  it("reads PyTorch's memory-timeline export", function()
    local t = DIR .. '/hta_memory_timeline.raw.json.gz'
    local r = h.run({ 'trace', '--memory', t })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(has(r.stdout, 'raw events: 7721 points'), r.stdout)
    assert.truthy(r.stdout:find('activations%s+2%.414 GiB%s+84%%'), r.stdout)
    r = h.run({ 'trace', '--memory', t, '--json' })
    local doc = json.decode(r.stdout)
    assert.are.equal(7721, #doc.timelines[1].times)
  end)

  it('is a usage error with --idle, --ops, --roofline, --collectives', function()
    for _, extra in ipairs({ '--idle', '--ops', '--collectives' }) do
      local r = h.run({ 'trace', H100, '--memory', extra })
      assert.are.equal(2, r.code)
      assert.truthy(has(r.stderr, '--memory is a view of its own'), r.stderr)
    end
  end)

  it('counts and warns about damaged memory events, and reads the rest', function()
    local dir = h.tmpdir()
    local ev = '{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": %d, "args": {%s}}'
    local lines = {
      '{"ph": "X", "cat": "cpu_op", "name": "aten::x", "pid": 1, "tid": 1, "ts": 0, "dur": 99}',
      ev:format(1, '"Total Allocated": 10, "Device Type": 1, "Device Id": 0'),
      ev:format(2, '"Bytes": 1e300, "Device Type": 1, "Device Id": 0'),
      ev:format(3, '"Bytes": 100, "Addr": 7, "Total Allocated": -5, "Device Type": 1, '
        .. '"Device Id": 0'),
      ev:format(4, '"Bytes": -40, "Addr": 9, "Total Allocated": 60, "Total Reserved": 4096, '
        .. '"Device Type": 1, "Device Id": 0'),
      ev:format(5, '"Bytes": 30, "Total Allocated": 90, "Device Type": 1, "Device Id": 0'),
      ev:format(6, '"Bytes": 123456789012345678901234567890, "Device Type": 1'),
    }
    local path = dir .. '/bad.json'
    h.write(path, '{"traceEvents": [\n' .. table.concat(lines, ',\n') .. '\n]}')
    local r = h.run({ 'trace', path, '--memory' })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    assert.truthy(has(out, '3 [memory] events without a valid Bytes'), out)
    assert.truthy(has(out, '1 frees of addresses not allocated in the trace'), out)
    assert.truthy(has(out, '1 events without an address'), out)
    assert.truthy(has(out, '1 events without a valid Total Allocated (1 of them negative or over '
      .. '2^60)'), out)
    -- a number too long to read is the JSON's error, named with its file and byte
    lines[#lines + 1] = ev:format(7, '"Bytes": ' .. string.rep('9', 80))
    h.write(path, '{"traceEvents": [\n' .. table.concat(lines, ',\n') .. '\n]}')
    r = h.run({ 'trace', path, '--memory' })
    assert.are.equal(1, r.code)
    assert.truthy(has(r.stderr, 'bad.json: byte '), r.stderr)
    -- cut short: what was read before the cut, and a warning that says so
    local text = '{"traceEvents": [\n' .. table.concat(lines, ',\n', 1, 5)
    h.write(path, text)
    r = h.run({ 'trace', path, '--memory' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(has(r.stdout, 'bad.json: truncated: read up to the cut'), r.stdout)
    assert.truthy(has(r.stdout, '[memory] events on 1 device'), r.stdout)
  end)
end)

describe('a profiled run of the reference trainer with profile_memory #slow', function()
  local fake = h.fakes_dir .. '/h100x8'
  local missing = h.trainer_missing(fake)

  it('keeps the memory its trace measured beside the plan\'s estimate, in compare and report',
    function()
      if missing then
        pending(missing)
        return
      end
      local dir = h.tmpdir()
      local recipe = dir .. '/tiny.lua'
      h.write(recipe, [[
local tp = require('tp')
return tp.experiment.main({
  name = 'tiny-memory',
  model = 'ref-tiny',
  platforms = { nvd = { framework = 'reference' } },
  gpus_per_node = 1,
  training = { seed = 1, mbs = 2, gbs = 2, seq_len = 32, iters = 4, lr = 3e-3,
               dataset = 'mock', log_interval = 1 },
  parallelism = { tp = 1, pp = 1, dp = 1 },
  launcher = 'local',
})
]])
      local results = dir .. '/results'
      local env = { TPLUA_GPU_LIBPATH = fake }
      local r = h.run({ 'run', recipe, '--profile', 'torch:1-2,memory', '--results', results },
        { env = env })
      assert.are.equal(0, r.code, r.stdout .. r.stderr)
      local paths = fs.glob(results .. '/*.json')
      assert.are.equal(1, #paths, table.concat(paths, ' '))
      local rec = assert(json.load_file(paths[1]))
      assert.is_true(rec.profile.memory)
      local trace = results .. '/' .. rec.profile.traces[1]
      -- the measurement, against the trace replayed apart from tplua
      local want = assert(figures(trace))
      local dev = want.devices[1]
      local m = rec.memory.measured
      assert.are.equal('trace', m.source)
      assert.are.equal('cpu', m.device)
      assert.are.equal(dev.peak, m.peak_allocated)
      assert.are.equal(dev.reserved_max, m.peak_reserved)
      assert.are.equal(dev.live_end, m.live_end)
      assert.are.equal(dev.peak_op, m.peak_op)
      assert.are.equal(dev.peak_phase, m.peak_phase)
      assert.are.equal(dev.peak_step, m.peak_step)
      assert.are.same(dev.at_peak, m.at_peak)
      -- AdamW's state, made in the first profiled step and held: exp_avg and exp_avg_sq (fp32
      -- on the CPU) of every parameter and a 4-byte step per parameter tensor, the model's own
      -- count by torch
      local plan = json.decode(h.run({ 'plan', recipe, '--json', '--results', results }).stdout)
      local argv = plan.platforms.nvd.runs[1].argv
      local from
      for i, a in ipairs(argv) do
        if a:find('reftrain%.py$') then
          from = i + 1
        end
      end
      local args = {}
      for i = from, #argv do
        args[#args + 1] = string.format('%q', argv[i])
      end
      local count = h.run({ '-c', 'import sys; sys.path.insert(0, ' .. string.format('%q',
        h.source_dir .. '/tools/reftrain') .. '); import reftrain; a = reftrain.parse_args(['
        .. table.concat(args, ', ') .. ']); ps = list(reftrain.GPT(a).parameters()); '
        .. 'print(sum(p.numel() for p in ps), len(ps))' }, { bin = '/usr/bin/python3' })
      assert.are.equal(0, count.code, count.stderr)
      local params, tensors = count.stdout:match('(%d+) (%d+)')
      assert.are.equal(8 * tonumber(params) + 4 * tonumber(tensors), m.at_peak.optimizer)
      -- the estimate for the same configuration
      local e = rec.memory.estimate
      assert.are.equal('plan', e.source)
      assert.are.equal('ref-tiny', e.model)
      assert.are.equal(2 * tonumber(params), e.bytes.weights)
      -- compare and report: the measured peak beside the estimate, the source named
      local c = h.run({ 'compare', results }, { env = env })
      assert.truthy(c.stdout:find(rec.run_id:gsub('%p', '%%%0') .. '%s+nvd%s+profiler trace%s+'
        .. 'cpu%s+2%.4 MiB'), c.stdout)
      assert.truthy(has(c.stdout, 'optimizer state 1.1 MiB measured vs 1.7 MiB estimated'),
        c.stdout)
      local rep = h.run({ 'report', results, '--out', dir .. '/report', '--no-plots' })
      assert.are.equal(0, rep.code, rep.stderr)
      local md = h.read(dir .. '/report/report.md')
      assert.truthy(has(md, '## Memory'), md)
      assert.truthy(has(md, '| ' .. rec.run_id .. ' | nvd | profiler trace | cpu |'), md)
      assert.truthy(has(md, '- activations '), md)
    end)
end)
