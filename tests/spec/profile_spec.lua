-- tp.profile from recipes and the command line: the --profile flag and the `profile` field, the
-- reference trainer's arguments, the plan's checks, the record's `profile` member (the trace
-- files a run left) and the report's links to them. tests/spec/launch_spec.lua covers
-- check/apply for the other frameworks; tests/cli/profile_spec.lua runs a real profiled run.
local h = require('helper')
local profile = require('tp.profile')
local json = require('tp.json')
local fs = require('tp.fs')

describe('tp.profile.parse (the --profile flag)', function()
  it('reads TOOL and TOOL:FIRST-LAST, and none', function()
    assert.are.same({ tool = 'torch', steps = { 5, 7 } }, profile.parse('torch:5-7'))
    assert.are.same({ tool = 'nsys' }, profile.parse('nsys'))
    assert.are.same({ tool = 'rocprofv3', steps = { 1, 1 } }, profile.parse('rocprofv3:1-1'))
    assert.is_false(profile.parse('none'))
    assert.are.equal('torch:5-7', profile.format(profile.parse('torch:5-7')))
    assert.are.equal('nsys', profile.format({ tool = 'nsys' }))
  end)

  it('names what is wrong', function()
    for _, case in ipairs({
      { 'perf', "unknown tool 'perf' (torch, nsys, rocprofv3, or none)" },
      { '', "unknown tool '' (torch, nsys, rocprofv3, or none)" },
      { 'torch:5', "'torch:5': steps must be FIRST-LAST with 1 <= FIRST <= LAST (e.g. "
        .. 'torch:5-7)' },
      { 'torch:7-5', "'torch:7-5': steps must be FIRST-LAST" },
      { 'torch:0-2', "'torch:0-2': steps must be FIRST-LAST" },
      { 'nsys:a-b', "'nsys:a-b': steps must be FIRST-LAST" },
    }) do
      local p, err = profile.parse(case[1])
      assert.is_nil(p)
      assert.is_truthy(err:find(case[2], 1, true), err)
    end
    assert.has_error(function()
      profile.parse(5)
    end, 'profile.parse: string expected, got number')
  end)
end)

describe('tp.profile.normalize (the recipe field)', function()
  it('copies a valid field and keeps false', function()
    local v = { tool = 'torch', steps = { 2, 3 } }
    local p = profile.normalize(v)
    assert.are.same(v, p)
    assert.are_not.equal(v.steps, p.steps)
    assert.are.same({ tool = 'nsys' }, profile.normalize({ tool = 'nsys' }))
    assert.is_false(profile.normalize(false))
  end)

  it('refuses unknown fields, tools and bad steps', function()
    local function err_of(v)
      local p, err = profile.normalize(v)
      assert.is_nil(p)
      return err
    end
    assert.are.equal("unknown field 'output' (tool, steps, memory)",
      err_of({ tool = 'torch', output = '/x' }))
    assert.are.equal("tool: one of torch, nsys, rocprofv3 expected, got 'perf'",
      err_of({ tool = 'perf' }))
    assert.are.equal('steps: { first, last } with 1 <= first <= last expected',
      err_of({ tool = 'torch', steps = { 2.5, 3 } }))
    assert.are.equal('{ tool = ..., steps = { first, last } } or false expected, got string',
      err_of('torch'))
  end)
end)

describe('profile memory (the allocator\'s events)', function()
  local REF = { argv = { '/usr/bin/python3', 'reftrain.py' }, env = {}, parser = 'megatron' }

  it('is read from the flag and the field, and written back', function()
    assert.are.same({ tool = 'torch', steps = { 2, 3 }, memory = true },
      profile.parse('torch:2-3,memory'))
    assert.are.same({ tool = 'torch', memory = true }, profile.parse('torch,memory'))
    assert.are.equal('torch:2-3,memory', profile.format(profile.parse('torch:2-3,memory')))
    local p, err = profile.parse('nsys,memory')
    assert.is_nil(p)
    assert.are.equal("'nsys,memory': memory needs the torch tool (torch:5-7,memory)", err)
    assert.are.same({ tool = 'torch', steps = { 1, 2 }, memory = true },
      profile.normalize({ tool = 'torch', steps = { 1, 2 }, memory = true }))
    assert.are.same({ nil, "memory: needs tool = 'torch' (the PyTorch profiler's "
      .. 'profile_memory)' }, { profile.normalize({ tool = 'nsys', memory = true }) })
    assert.are.same({ nil, 'memory: true or false expected, got string' },
      { profile.normalize({ tool = 'torch', memory = 'yes' }) })
  end)

  it('asks the reference trainer for it, and refuses the frameworks it cannot reach', function()
    local out = profile.apply('reference', REF,
      { tool = 'torch', steps = { 2, 3 }, output = '/r/p', memory = true })
    assert.are.equal('--profile-memory', out.argv[#out.argv])
    local cmd, info = profile.for_run('reference', REF, { tool = 'torch', steps = { 2, 3 },
      memory = true }, '/r/p')
    assert.truthy(cmd)
    assert.is_true(info.memory)
    assert.is_true(profile.record(info).memory)
    local none = profile.for_run('reference', REF, { tool = 'torch', steps = { 2, 3 } }, '/r/p')
    assert.is_nil(table.concat(none.argv, ' '):find('--profile-memory', 1, true))
    local bad, why = profile.for_run('megatron', { argv = { 'pretrain_gpt.py' }, env = {} },
      { tool = 'torch', steps = { 2, 3 }, memory = true }, '/r/p')
    assert.is_nil(bad)
    assert.truthy(why:find('profile: megatron: memory cannot be asked of its profiler', 1,
      true), why)
  end)
end)

describe('tp.profile.apply for the reference trainer', function()
  local REF = { argv = { '/usr/bin/python3', 'reftrain.py', '--lr', '0.001' }, env = {},
    parser = 'megatron', launcher = 'torchrun' }

  it('torch: Megatron-style window, one Chrome trace per rank', function()
    local out, traces = profile.apply('reference', REF,
      { tool = 'torch', steps = { 2, 3 }, output = '/r/profile' })
    assert.are.same({ '/usr/bin/python3', 'reftrain.py', '--lr', '0.001', '--profile',
      '--use-pytorch-profiler', '--profile-step-start', '1', '--profile-step-end', '3',
      '--profile-dir', '/r/profile' }, out.argv)
    assert.are.same({ '/r/profile/rank<RANK>_trace.json' }, traces)
    assert.are.equal('megatron', out.parser)
    assert.are.equal(4, #REF.argv)
  end)

  it('nsys: a capture range the trainer opens with cudaProfilerStart', function()
    local out, traces = profile.apply('reference', REF,
      { tool = 'nsys', steps = { 4, 6 }, output = '/r/profile' })
    assert.are.equal('nsys', out.argv[1])
    assert.is_truthy(table.concat(out.argv, ' '):find('--capture-range=cudaProfilerApi '
      .. '--capture-range-end=stop /usr/bin/python3 reftrain.py --lr 0.001 --profile '
      .. '--profile-step-start 3 --profile-step-end 6', 1, true))
    assert.are.same({ '/r/profile/nsys_rank<RANK>.nsys-rep', '/r/profile/nsys_rank<RANK>.sqlite' },
      traces)
    assert.is_truthy(table.concat(out.argv, ' '):find('--export=sqlite', 1, true))
  end)

  it('rocprofv3: the whole run; steps refused; torch needs steps', function()
    local out = profile.apply('reference', REF, { tool = 'rocprofv3', output = '/r/p' })
    assert.are.equal('rocprofv3', out.argv[1])
    local ok, err = pcall(profile.apply, 'reference', REF,
      { tool = 'rocprofv3', steps = { 1, 2 }, output = '/r/p' })
    assert.is_false(ok)
    assert.is_truthy(err:find('steps cannot be honoured', 1, true), err)
    local cmd, why = profile.for_run('reference', REF, { tool = 'torch' }, '/r/p')
    assert.is_nil(cmd)
    assert.are.equal('profile: reference: the PyTorch profiler needs steps = { first, last }',
      why)
  end)
end)

describe('tp.profile.plan_findings', function()
  it('errors on a missing profiler, warns when the runs start elsewhere', function()
    local f = profile.plan_findings({ tool = 'rocprofv3' }, { path = '/nonexistent' })
    assert.are.same({ { severity = 'error',
      message = 'profile: rocprofv3: not found in PATH (/nonexistent)' } }, f)
    f = profile.plan_findings({ tool = 'nsys' }, { path = '/nonexistent', launcher = 'slurm' })
    assert.are.equal('warning', f[1].severity)
    assert.is_truthy(f[1].message:find('it must be there on the compute nodes', 1, true))
    assert.are.same({}, profile.plan_findings({ tool = 'torch', steps = { 2, 3 } },
      { path = '/nonexistent', iters = 3 }))
    f = profile.plan_findings({ tool = 'torch', steps = { 2, 4 } }, { iters = 3 })
    assert.are.equal('profile: steps 2-4 end after the last iteration (3): the trace may be '
      .. 'incomplete or missing', f[1].message)
  end)
end)

describe('tp.profile.record and links', function()
  local results = h.tmpdir()
  local out = results .. '/nvd/run-1/profile'
  assert(fs.mkdir_p(out .. '/iteration_3'))
  h.write(out .. '/rank0_trace.json', '[]')
  h.write(out .. '/rank1_trace.json', '[]')
  h.write(out .. '/host.123.pt.trace.json', '{}')
  h.write(out .. '/iteration_3/rank0_trace.json', '{}')

  it('lists the files the patterns match, relative to the record', function()
    local rec = profile.record({ tool = 'torch', steps = { 2, 3 }, output = out,
      patterns = { out .. '/rank<RANK>_trace.json' } }, results)
    assert.are.same({ tool = 'torch', steps = { 2, 3 }, output = 'nvd/run-1/profile',
      patterns = { 'nvd/run-1/profile/rank<RANK>_trace.json' },
      traces = { 'nvd/run-1/profile/rank0_trace.json', 'nvd/run-1/profile/rank1_trace.json' } },
      rec)
    assert.are.same({ out .. '/host.123.pt.trace.json' }, profile.expand(out
      .. '/*.pt.trace.json', out))
    assert.are.same({ out .. '/iteration_3/rank0_trace.json' }, profile.expand(out
      .. '/iteration_3/rank<RANK>_trace.json', out))
  end)

  it('writes an empty list and null steps when nothing matched', function()
    local rec = profile.record({ tool = 'nsys', output = out,
      patterns = { out .. '/nsys_rank<RANK>.nsys-rep' } }, results)
    assert.are.equal(0, #rec.traces)
    assert.are.equal(json.null, rec.steps)
    assert.are.equal('{"output":"nvd/run-1/profile","patterns":["nvd/run-1/profile/nsys_rank'
      .. '<RANK>.nsys-rep"],"steps":null,"tool":"nsys","traces":[]}',
      json.encode(rec, { sort_keys = true }))
  end)

  it('takes the output directory literally, glob characters and all', function()
    local odd = results .. '/odd[1]*'
    assert(fs.mkdir_p(odd))
    h.write(odd .. '/rank0_trace.json', '[]')
    assert.are.same({ odd .. '/rank0_trace.json' },
      profile.expand(odd .. '/rank<RANK>_trace.json', odd))
  end)

  it('knows the trace file names the profilers write', function()
    assert.is_true(profile.is_trace_name('rank0_trace.json'))
    assert.is_true(profile.is_trace_name('/r/iteration_12/rank7_trace.json'))
    assert.is_true(profile.is_trace_name('node1_1234.1700000000000.pt.trace.json'))
    assert.is_false(profile.is_trace_name('nvd-megatron-r1.json'))
    assert.is_false(profile.is_trace_name('trace.json'))
  end)

  it('links the traces from a report directory, percent-encoded', function()
    local member = { traces = { 'nvd/run-1/profile/rank0_trace.json', '/abs/a b.json' } }
    local links = profile.links(member, results .. '/run-1.json', results .. '/report')
    assert.are.same({ { label = 'rank0_trace.json',
      href = '../nvd/run-1/profile/rank0_trace.json' },
      { label = 'a b.json', href = string.rep('../', #results:gsub('[^/]', '') + 1)
        :sub(1, -2) .. '/abs/a%20b.json' } }, links)
    links = profile.links(member, results .. '/run-1.json')
    assert.are.equal(results .. '/nvd/run-1/profile/rank0_trace.json', links[1].href)
  end)
end)

describe('a profiled run (tp.run.execute)', function()
  local FT = h.tools_dir .. '/fake_trainer'
  local gen = { FT, '--megatron-gen', '3', '--lines-per-sec', '400', '--step-ms', '250',
    '--gbs', '8' }

  local function execute(id, argv, dir, analyse, suffix)
    local out = dir .. '/' .. id .. '/profile'
    return require('tp.run').execute({ id = id, argv = argv, parser = 'megatron', gbs = 8,
      seq_len = 64, gpus = 1, profile = { tool = 'torch', steps = { 2, 3 }, output = out,
        patterns = { out .. '/rank<RANK>_trace.json' .. (suffix or '') }, analyse = analyse } },
      { results = dir, quiet = true, telemetry = false }), out
  end

  -- A stand-in for the trainer that copies a real trace (tests/fixtures/traces) as rank 0's.
  local function copying(dir, id, fixture)
    local argv = { 'sh', '-c', 'cp "$1" "$0/rank0_trace.json.gz" && shift && exec "$@"',
      dir .. '/' .. id .. '/profile', h.fixture('traces/' .. fixture) }
    table.move(gen, 1, #gen, #argv + 1, argv)
    return argv
  end

  local function diagnostic(rec, kind)
    for _, d in ipairs(rec.diagnostics) do
      if d.kind == kind then
        return d
      end
    end
  end

  it('creates the profile directory and lists the traces in the record', function()
    local dir = h.tmpdir()
    -- A stand-in for the trainer: writes a trace into its profile directory, then trains.
    local argv = { 'sh', '-c', 'echo "[]" > "$0/rank0_trace.json" && exec "$@"', dir
      .. '/traced/profile' }
    table.move(gen, 1, #gen, #argv + 1, argv)
    local res = execute('traced', argv, dir)
    assert.are.equal('finished', res.status, res.reason)
    local rec = assert(json.load_file(res.record_path))
    assert.are.same({ 'traced/profile/rank0_trace.json' }, rec.profile.traces)
    assert.are.same({ 2, 3 }, rec.profile.steps)
  end)

  it('analyses the traces into the record with the analysis the run is given', function()
    local dir = h.tmpdir()
    local profiled = require('tp.analyse.profiled')
    local res = execute('analysed', copying(dir, 'analysed', 'qwen05b_h100.json.gz'), dir,
      profiled.summarise, '.gz')
    assert.are.equal('finished', res.status, res.reason)
    local rec = assert(json.load_file(res.record_path))
    assert.are.same({ 'analysed/profile/rank0_trace.json.gz' }, rec.profile.traces)
    local a = rec.profile.analysis
    -- What tp.analyse.trace says of the same file, in ms per step; lists as JSON arrays.
    local direct = require('tp.analyse.trace')
    local want = direct.summary(assert(direct.analyse({ h.fixture(
      'traces/qwen05b_h100.json.gz') })))
    assert.is_true(a.gpu)
    assert.are.equal(1, a.ranks)
    assert.are.equal(want.window_ms, a.window_ms)
    assert.are.equal(want.idle_ms, a.idle_ms)
    assert.are.equal(want.classes.gemm.exclusive_ms, a.classes.gemm.exclusive_ms)
    assert.are.same({}, a.warnings)
    assert.is_true(json.is_array(a.warnings) and json.is_array(a.errors))
    assert.is_nil(diagnostic(rec, 'profile_unanalysed'))
    assert.is_nil(rec.profile.analyse)
  end)

  it('keeps the record and warns when the analysis fails, and says nothing when there is '
    .. 'nothing to analyse', function()
    local dir = h.tmpdir()
    local res = execute('failing', copying(dir, 'failing', 'bert_small_h100.json.gz'), dir,
      function()
        error('analyser exploded')
      end, '.gz')
    assert.are.equal('finished', res.status, res.reason)
    local rec = assert(json.load_file(res.record_path))
    assert.is_nil(rec.profile.analysis)
    local d = assert(diagnostic(rec, 'profile_unanalysed'))
    assert.are.equal('warning', d.severity)
    assert.is_truthy(d.message:find('profile: the traces could not be analysed: ', 1, true))
    assert.is_truthy(d.message:find('analyser exploded', 1, true), d.message)
    res = execute('unreadable', copying(dir, 'unreadable', 'bert_small_h100.json.gz'), dir,
      function()
        return nil, 'no such trace'
      end, '.gz')
    rec = assert(json.load_file(res.record_path))
    assert.are.equal('profile: the traces could not be analysed: no such trace',
      diagnostic(rec, 'profile_unanalysed').message)
    res = execute('nothing', copying(dir, 'nothing', 'bert_small_h100.json.gz'), dir,
      function()
        return nil
      end, '.gz')
    rec = assert(json.load_file(res.record_path))
    assert.is_nil(rec.profile.analysis)
    assert.is_nil(diagnostic(rec, 'profile_unanalysed'))
  end)

  it('warns in the record when no trace appeared', function()
    local dir = h.tmpdir()
    local res, out = execute('untraced', gen, dir)
    assert.are.equal('finished', res.status, res.reason)
    assert.is_true(fs.is_dir(out))
    local rec = assert(json.load_file(res.record_path))
    assert.are.equal(0, #rec.profile.traces)
    local found
    for _, d in ipairs(rec.diagnostics) do
      found = found or (d.kind == 'profile_missing' and d)
    end
    assert.are.equal('warning', found.severity)
    assert.are.equal('profile: no trace file matches untraced/profile/rank<RANK>_trace.json',
      found.message)
    assert.are.equal('completed', rec.status)
  end)
end)

describe('a report on profiled runs', function()
  it('links each trace file from report.md and report.html', function()
    local results = require('tp.results')
    local report = require('tp.report')
    local dir = h.tmpdir()
    local set = assert(results.load(h.fixture('results/fair')))
    assert(fs.mkdir_p(dir .. '/runs'))
    for i, r in ipairs(set.runs) do
      local doc = assert(json.load_file(r.path))
      if i == 1 then
        doc.profile = { tool = 'torch', steps = { 2, 3 }, output = 'prof',
          patterns = { 'prof/rank<RANK>_trace.json' }, traces = { 'prof/rank0_trace.json' } }
      end
      assert(json.save_file(dir .. '/runs/' .. fs.basename(r.path), doc))
    end
    -- The trace itself lies beside the records; tp.results passes it by (no 'unreadable').
    assert(fs.mkdir_p(dir .. '/runs/prof'))
    h.write(dir .. '/runs/prof/rank0_trace.json', '[{"name": "aten::mm", "ph": "X"}]')
    local profiled = assert(results.load(dir .. '/runs'))
    assert.are.equal(#set.runs, #profiled.runs)
    assert.are.same({}, profiled.errors)
    assert.are.same({}, profiled.skipped)
    local w = assert(report.write(profiled, dir .. '/report', { plots = false }))
    local md = h.read(dir .. '/report/report.md')
    assert.is_truthy(md:find('## Profiles', 1, true), md)
    assert.is_truthy(md:find('| torch | 2-3 | [rank0\\_trace.json]'
      .. '(../runs/prof/rank0_trace.json) |', 1, true), md)
    local html = h.read(dir .. '/report/report.html')
    assert.is_truthy(html:find('<a href="../runs/prof/rank0_trace.json">rank0_trace.json</a>', 1,
      true))
    assert.are.equal(dir .. '/report', w.model.dir)
    -- Without profiled runs there is no such section.
    local plain = report.markdown(report.build(set))
    assert.is_nil(plain:find('## Profiles', 1, true))
  end)
end)
