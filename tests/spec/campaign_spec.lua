-- tp.campaign, tp.run and tp.live in this process, with the fake trainer as the training: the
-- journal and resuming, records, early aborts, timeouts, secrets, the lock, stale process groups,
-- the live view's output.
local h = require('helper')
local campaign = require('tp.campaign')
local run_mod = require('tp.run')
local live = require('tp.live')
local json = require('tp.json')
local fs = require('tp.fs')
local proc = require('tp.proc')

local FT = h.tools_dir .. '/fake_trainer'

-- argv of a fake Megatron run: n iterations at `lps` lines per second, 250 ms printed step time.
local function gen(n, lps, extra)
  local a = { FT, '--megatron-gen', tostring(n), '--lines-per-sec', tostring(lps or 400),
    '--step-ms', '250', '--gbs', '32' }
  for _, x in ipairs(extra or {}) do
    a[#a + 1] = x
  end
  return a
end

local function mkrun(id, argv, more)
  local r = { id = id, argv = argv, parser = 'megatron', gbs = 32, seq_len = 1024, gpus = 4 }
  for k, v in pairs(more or {}) do
    r[k] = v
  end
  return r
end

-- Executes quietly (or into a file when `out` is given), without GPU telemetry unless asked.
local function exec(c, opts)
  opts = opts or {}
  if opts.out == nil and opts.quiet == nil then
    opts.quiet = true
  end
  if opts.telemetry == nil then
    opts.telemetry = false
  end
  return c:execute(opts)
end

local function journal(dir)
  return assert(campaign.read_journal(dir .. '/journal.jsonl'))
end

local function events(dir, id, kind)
  local out = {}
  for _, ev in ipairs(journal(dir).events) do
    if (id == nil or ev.id == id) and (kind == nil or ev.event == kind) then
      out[#out + 1] = ev
    end
  end
  return out
end

local function load(path)
  return assert(json.load_file(path))
end

local function record_files(dir)
  return assert(fs.glob(dir .. '/*.json'))
end

local function has_note(notes, text)
  for _, n in ipairs(notes) do
    if n:find(text, 1, true) then
      return true
    end
  end
  return false
end

local function diag_of(rec, kind)
  for _, d in ipairs(rec.diagnostics) do
    if d.kind == kind then
      return d
    end
  end
  return nil
end

describe('tp.campaign construction', function()
  it('checks runs and names the offending one', function()
    local function bad(spec, msg)
      local ok, err = pcall(campaign, spec)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(msg, 1, true), tostring(err))
    end
    bad('x', 'tp.campaign: table expected, got string')
    bad({ runs = {} }, 'results: a directory path expected')
    bad({ results = 'd', runs = {}, color = 'red' }, "unknown field 'color'")
    bad({ results = 'd', runs = { { id = 'a b', argv = { 'x' } } } },
      "runs[1]: run id: letters, digits")
    bad({ results = 'd', runs = { { id = 'a', argv = {} } } }, "run 'a': argv: a non-empty list")
    bad({ results = 'd', runs = { { id = 'a', argv = { 'x' }, gpus = 1.5 } } },
      "run 'a': gpus: a whole number expected")
    bad({ results = 'd', runs = { { id = 'a', argv = { 'x' }, files = { ['../x'] = '' } } } },
      "'../x' leaves its directory")
    bad({ results = 'd', runs = { { id = 'a', argv = { 'x' }, frobnicate = 1 } } },
      "run 'a': unknown field 'frobnicate'")
    bad({ results = 'd', runs = { { id = 'a', argv = { 'x' } }, { id = 'a', argv = { 'y' } } } },
      "runs[2]: duplicate id 'a' (also runs[1])")
    bad({ results = 'd', runs = {}, abort = { nann = true } }, "abort: unknown rule 'nann'")
    bad({ results = 'd', runs = { { id = 'a', argv = { 'x' }, parser = 'deepspeedy' } } },
      "run 'a': parser: unknown log format 'deepspeedy' (known: megatron")
  end)

  it('is recognisable and takes defaults from the unified config', function()
    local c = campaign({ results = 'd', runs = { { id = 'a', argv = { 'x', 3 },
      config = { model = 'llama3.1-8b', training = { gbs = 64, seq_len = 2048, iters = 50,
        dataset = 'bc' }, nodes = 2, gpus_per_node = 8 } } } })
    assert.is_true(campaign.is_campaign(c))
    assert.is_false(campaign.is_campaign({}))
    assert.is_false(campaign.is_campaign(nil))
    local r = c.runs[1]
    assert.are.same({ 'x', '3' }, r.argv)
    assert.are.equal(64, r.gbs)
    assert.are.equal(2048, r.seq_len)
    assert.are.equal(16, r.gpus)
    assert.are.equal(50, r.total_iters)
    assert.are.equal('llama3.1-8b', r.model)
    assert.are.equal('bc', r.dataset)
    assert.is_truthy(tostring(c):find('1 runs', 1, true))
  end)
end)

describe('tp.run.hash', function()
  it('is stable, covers what is run, and ignores secret values and supervision', function()
    local a = { id = 'a', argv = { 'x', '--n', '1' }, env = { A = '1', HF_TOKEN = 'one-secret' },
      config = { training = { lr = 3e-4, gbs = 8 }, model = 'm' }, timeout = 10 }
    local b = { timeout = 99, config = { model = 'm', training = { gbs = 8, lr = 3e-4 } },
      env = { HF_TOKEN = 'other-secret', A = '1' }, argv = { 'x', '--n', '1' }, id = 'a' }
    local ha = run_mod.hash(a)
    assert.is_truthy(ha:match('^%x+$'))
    assert.are.equal(64, #ha)
    assert.are.equal(ha, run_mod.hash(b))
    b.argv[3] = '2'
    assert.are_not.equal(ha, run_mod.hash(b))
    b.argv[3] = '1'
    b.config.training.lr = 1e-4
    assert.are_not.equal(ha, run_mod.hash(b))
    b.config.training.lr = 3e-4
    b.env.A = '2'
    assert.are_not.equal(ha, run_mod.hash(b))
  end)
end)

describe('tp.campaign.read_journal', function()
  it('ignores and reports a partial last line and skips broken lines', function()
    local dir = h.tmpdir()
    local p = dir .. '/journal.jsonl'
    h.write(p, '{"event":"planned","id":"a"}\nnot json\n{"id":"b"}\n{"event":"started","id":"a"}\n'
      .. '{"event":"fini')
    local j = assert(campaign.read_journal(p))
    assert.are.equal(2, #j.events)
    assert.are.equal('started', j.events[2].event)
    assert.is_true(j.partial)
    assert.is_true(has_note(j.notes, 'journal.jsonl: line 5 is incomplete (14 bytes'))
    assert.is_true(has_note(j.notes,
      "journal.jsonl: line 2: not a journal event (unexpected 'not')"))
    assert.is_true(has_note(j.notes, 'journal.jsonl: line 3: not a journal event'))
    local empty = assert(campaign.read_journal(dir .. '/none.jsonl'))
    assert.are.equal(0, #empty.events)
    assert.is_false(empty.partial)
  end)
end)

describe('tp.campaign execution', function()
  it('runs, records, journals, and skips finished runs when executed again', function()
    local dir = h.tmpdir() .. '/res'
    local runs = {}
    for i = 1, 3 do
      runs[i] = mkrun('r' .. i, gen(12), { total_iters = 12 })
    end
    local c = campaign({ results = dir, runs = runs, name = 'spec' })
    local s = assert(exec(c))
    assert.are.same({ 3, 0, 0, 0, 0 }, { s.finished, s.failed, s.skipped, s.interrupted,
      s.exit_code })
    assert.are.equal(3, #record_files(dir))
    for i = 1, 3 do
      local id = 'r' .. i
      local rec = load(dir .. '/' .. id .. '.json')
      assert.are.equal('tplua.run/2', rec.schema)
      assert.are.equal(id, rec.run_id)
      assert.are.equal('completed', rec.status)
      assert.are.equal('spec', rec.experiment)
      assert.are.equal(12, #rec.iterations)
      assert.are.equal(run_mod.hash(runs[i]), rec.config_hash)
      -- 32 x 1024 tokens per 0.25 s step (the printed step time, +-1% jitter).
      local tps = rec.performance_metrics.tokens_per_second
      assert.is_true(math.abs(tps / (32 * 1024 / 0.25) - 1) < 0.02, tostring(tps))
      assert.is_true(math.abs(rec.performance_metrics.tokens_per_second_per_gpu * 4 - tps) < 1e-6)
      assert.are.equal(id .. '.log', rec.source.path)
      assert.are.equal(0, rec.source.exit_status)
      assert.is_false(rec.energy_metrics.measured)
      assert.is_truthy(rec.energy_metrics.reason:find('^no GPU telemetry: '))
      local log = assert(h.read(dir .. '/' .. id .. '.log'))
      assert.is_truthy(log:find('iteration       12/      12', 1, true))
      local kinds = {}
      for _, ev in ipairs(events(dir, id)) do
        kinds[#kinds + 1] = ev.event
        assert.are.equal(rec.config_hash, ev.hash)
        assert.is_truthy(ev.time:match('^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$'))
      end
      assert.are.same({ 'planned', 'started', 'finished' }, kinds)
      local started = events(dir, id, 'started')[1]
      assert.is_truthy(math.tointeger(started.pgid))
      assert.are.equal(started.attempt, rec.campaign.attempt)
    end
    local s2 = assert(exec(c))
    assert.are.same({ 0, 0, 3, 0 }, { s2.finished, s2.failed, s2.skipped, s2.exit_code })
    assert.are.equal(3, #events(dir, nil, 'finished'))
  end)

  it('runs a changed configuration again and keeps the old record', function()
    local dir = h.tmpdir()
    assert(exec(campaign({ results = dir, runs = { mkrun('a', gen(6)) } })))
    local old = load(dir .. '/a.json')
    local c = campaign({ results = dir, runs = { mkrun('a', gen(6, 400, { '--seed', '7' })) } })
    local plan = c:status()
    assert.are.equal('changed', plan[1].state)
    assert.is_truthy(plan[1].reason:find('its configuration changed since it finished', 1, true))
    local s = assert(exec(c))
    assert.are.equal(1, s.finished)
    assert.is_true(has_note(s.notes, 'a: its configuration changed since it finished (hash '
      .. old.config_hash:sub(1, 12)))
    assert.is_true(has_note(s.notes, 'kept the previous record as a.json.superseded-1'))
    assert.are.equal(old.config_hash, load(dir .. '/a.json.superseded-1').config_hash)
    assert.are_not.equal(old.config_hash, load(dir .. '/a.json').config_hash)
    assert.is_true(fs.is_file(dir .. '/a.log.superseded-1'))
  end)

  it('reruns a finished run whose record is missing or corrupt', function()
    local dir = h.tmpdir()
    local c = campaign({ results = dir, runs = { mkrun('a', gen(6)) } })
    assert(exec(c))
    h.write(dir .. '/a.json', '{"schema": "tplua.run/1", "run_')
    local plan = c:status()
    assert.are.equal('record_missing', plan[1].state)
    assert.is_truthy(plan[1].reason:find('the journal says finished but a.json is unreadable', 1,
      true))
    local s = assert(exec(c))
    assert.are.equal(1, s.finished)
    assert.are.equal('completed', load(dir .. '/a.json').status)
    assert.are.equal('{"schema": "tplua.run/1", "run_', h.read(dir .. '/a.json.previous-1'))
  end)

  it('recovers a run whose record was written but whose journal line was lost', function()
    local dir = h.tmpdir()
    local c = campaign({ results = dir, runs = { mkrun('a', gen(6)) } })
    assert(exec(c))
    -- Drop the 'finished' line, as a kill between the record's rename and the append would.
    local lines = {}
    for line in h.read(dir .. '/journal.jsonl'):gmatch('[^\n]+') do
      if not line:find('"event":"finished"', 1, true) then
        lines[#lines + 1] = line
      end
    end
    h.write(dir .. '/journal.jsonl', table.concat(lines, '\n') .. '\n')
    local before = h.read(dir .. '/a.json')
    local s = assert(exec(c))
    assert.are.same({ 0, 1 }, { s.finished, s.skipped })
    assert.is_true(has_note(s.notes, 'a: its record was written but the journal line was lost'))
    local fin = events(dir, 'a', 'finished')
    assert.are.equal(1, #fin)
    assert.is_true(fin[1].recovered)
    assert.are.equal(before, h.read(dir .. '/a.json'))
  end)

  it('repairs a journal whose last line was cut by a crash', function()
    local dir = h.tmpdir()
    local c = campaign({ results = dir, runs = { mkrun('a', gen(6)), mkrun('b', gen(6)) } })
    assert(exec(c))
    local f = assert(io.open(dir .. '/journal.jsonl', 'ab'))
    f:write('{"event":"started","id":"b","ha')
    f:close()
    local s = assert(exec(c))
    assert.are.equal(2, s.skipped)
    assert.is_true(has_note(s.notes, 'is incomplete (31 bytes without a newline'))
    local data = h.read(dir .. '/journal.jsonl')
    assert.are.equal('\n', data:sub(-1))
    for line in data:gmatch('[^\n]+') do
      assert.is_table(json.decode(line))
    end
  end)

  it('removes temporary files left by an interrupted atomic write', function()
    local dir = h.tmpdir()
    h.write(dir .. '/a.json.tmp.AbC123', '{"half":')
    local s = assert(exec(campaign({ results = dir, runs = { mkrun('a', gen(4)) } })))
    assert.is_true(has_note(s.notes, 'removed a.json.tmp.AbC123'))
    assert.is_false(fs.exists(dir .. '/a.json.tmp.AbC123'))
  end)

  it('skips failed runs unless retry_failed, keeping the failed record', function()
    local dir = h.tmpdir()
    local c = campaign({ results = dir, runs = { mkrun('bad', gen(6, 400, { '--crash-at', '9' })),
      mkrun('good', gen(4)) } })
    local s = assert(exec(c))
    assert.are.same({ 1, 1, 1 }, { s.finished, s.failed, s.exit_code })
    local rec = load(dir .. '/bad.json')
    assert.are.equal('failed', rec.status)
    assert.are.equal(134, rec.source.exit_status)
    assert.is_truthy(rec.failure_reason:find('killed by SIGABRT', 1, true))
    assert.is_truthy(diag_of(rec, 'run_failed'))
    local fail = events(dir, 'bad', 'failed')[1]
    assert.is_truthy(fail.reason:find('killed by SIGABRT', 1, true))
    s = assert(exec(c))
    assert.are.same({ 0, 0, 2, 0 }, { s.finished, s.failed, s.skipped, s.exit_code })
    assert.are.equal('skipped', s.runs.bad.status)
    assert.is_true(has_note(s.notes, 'bad: skipped: failed before (killed by SIGABRT'))
    s = assert(exec(c, { retry_failed = true }))
    assert.are.same({ 0, 1, 1 }, { s.finished, s.failed, s.skipped })
    assert.are.equal('failed', load(dir .. '/bad.json.failed-1').status)
    assert.is_true(fs.is_file(dir .. '/bad.log.failed-1'))
    assert.are.equal(2, #events(dir, 'bad', 'failed'))
  end)

  it('runs again at once a run the retry policy covers, up to max times', function()
    local dir = h.tmpdir()
    local c = campaign({ results = dir, retry = { on = { 'timeout' }, max = 1 },
      runs = { mkrun('slow', gen(10, 400, { '--hang-after', '3' }),
        { timeout = 0.5, kill_grace = 0.3 }),
      mkrun('crash', gen(6, 400, { '--crash-at', '4' })) } })
    local s = assert(exec(c))
    assert.are.same({ 0, 2 }, { s.finished, s.failed })
    -- The timed-out run ran twice; the crash (the training's own failure) once.
    assert.are.equal(2, #events(dir, 'slow', 'started'))
    assert.are.equal(1, #events(dir, 'slow', 'retry'))
    local retry = events(dir, 'slow', 'retry')[1]
    assert.are.same({ 'timeout', 1, 1 }, { retry.stopped_by, retry.retry, retry.max })
    assert.are.equal('timeout', load(dir .. '/slow.json.failed-1').stopped_by)
    assert.are.equal(1, #events(dir, 'crash', 'started'))
    assert.are.equal(0, #events(dir, 'crash', 'retry'))
    assert.are.equal('timeout', s.runs.slow.stopped_by)
  end)

  it('runs again a run whose log says it was stopped from outside (preempted)', function()
    local dir = h.tmpdir()
    local marker = dir .. '/attempted'
    -- The first attempt: torchelastic's agent got SIGTERM (a preemption), exit 1; the second
    -- trains to the end.
    local line = 'W0511 03:22:23.562000 41337 torch/distributed/elastic/agent/server/api.py:739] '
      .. 'Received 15 death signal, shutting down workers'
    local sh = string.format('if [ -e %s ]; then exec "$@"; fi; touch %s\necho %s\nexit 1',
      h.shquote(marker), h.shquote(marker), h.shquote(line))
    local argv = { 'sh', '-c', sh, 'sh' }
    for _, a in ipairs(gen(6, 400)) do
      argv[#argv + 1] = a
    end
    local c = campaign({ results = dir, runs = { mkrun('pre', argv) } })
    local s = assert(exec(c))
    assert.are.same({ 1, 0 }, { s.finished, s.failed })
    local retry = events(dir, 'pre', 'retry')[1]
    assert.are.equal('preempted', retry.stopped_by)
    local first = load(dir .. '/pre.json.failed-1')
    assert.are.equal('preempted', first.stopped_by)
    assert.are.equal('preempted', first.outcome)
    assert.are.equal('completed', load(dir .. '/pre.json').status)
  end)

  it('checks the retry policy', function()
    for _, case in ipairs({
      { { on = { 'crash' } }, "retry.on[1]: 'crash' is not one of preempted" },
      { { max = -1 }, 'retry.max: a whole number >= 0 expected' },
      { { tries = 2 }, "retry: unknown field 'tries'" },
      { 'always', 'retry: { on = {...}, max = N } or false expected' },
    }) do
      local ok, err = pcall(campaign, { results = '/tmp/x', runs = {}, retry = case[1] })
      assert.is_false(ok)
      assert.truthy(tostring(err):find(case[2], 1, true), tostring(err))
    end
    assert.is_true(campaign.is_campaign(campaign({ results = '/tmp/x', runs = {},
      retry = false })))
  end)

  it('writes a failed record when the program cannot start', function()
    local dir = h.tmpdir()
    local s = assert(exec(campaign({ results = dir, runs = {
      mkrun('nope', { dir .. '/no-such-program' }) } })))
    assert.are.equal(1, s.failed)
    local rec = load(dir .. '/nope.json')
    assert.are.equal('failed', rec.status)
    assert.is_truthy(rec.failure_reason:find('no-such-program', 1, true))
    assert.is_truthy(events(dir, 'nope', 'failed')[1])
  end)

  it('runs several at once in one loop', function()
    local dir = h.tmpdir()
    local runs = {}
    for i = 1, 3 do
      runs[i] = mkrun('c' .. i, gen(10, 100))
    end
    local s = assert(exec(campaign({ results = dir, runs = runs }), { concurrency = 2 }))
    assert.are.equal(3, s.finished)
    -- c1 and c2 both started before either ended.
    local order = {}
    for _, ev in ipairs(journal(dir).events) do
      if ev.event ~= 'planned' then
        order[#order + 1] = ev.event .. ':' .. ev.id
      end
    end
    assert.are.same({ 'started:c1', 'started:c2' }, { order[1], order[2] })
    for i = 1, 3 do
      local rec = load(dir .. '/c' .. i .. '.json')
      assert.are.equal(10, #rec.iterations)
      assert.is_false(rec.energy_metrics.measured)
    end
  end)

  it('writes generated files where the run expects them', function()
    local dir = h.tmpdir()
    local out = dir .. '/work'
    assert(exec(campaign({ results = dir, runs = { mkrun('f', gen(3), {
      files = { ['conf/exp.yaml'] = 'a: 1\n' }, files_dir = out }) } })))
    assert.are.equal('a: 1\n', h.read(out .. '/conf/exp.yaml'))
  end)
end)

describe('the GPU and identity of a campaign record', function()
  local metrics = require('tp.metrics')
  local hardware = require('tp.hardware')

  -- MFU of a record, computed here from its own tokens/s: the figure tp.record must have written.
  local function expected_mfu(rec, hw, precision, gpus)
    return assert(metrics.mfu({ tokens_per_s = rec.performance_metrics.tokens_per_second,
      gpus = gpus or 4, model = 'llama3.1-8b', seq_len = 1024, precision = precision,
      hardware = hw })).mfu
  end

  it('has the run id and experiment, and gpu_info.hardware and MFU of a configured GPU',
    function()
      local dir = h.tmpdir()
      assert(exec(campaign({ results = dir, name = 'gpu-spec', runs = {
        mkrun('conf', gen(12), { model = 'llama3.1-8b', hardware = 'h100-sxm' }),
        mkrun('fp8', gen(12), { model = 'llama3.1-8b', hardware = 'mi300x',
          experiment = 'own-name', config = { training = { precision = 'fp8' } } }),
        mkrun('none', gen(12), { model = 'llama3.1-8b' }),
        mkrun('bogus', gen(12), { model = 'llama3.1-8b', hardware = 'h100' }),
      } })))
      local rec = load(dir .. '/conf.json')
      assert.are.equal('conf', rec.run_id)
      assert.are.equal('gpu-spec', rec.experiment)
      -- no device was probed (telemetry off): gpu_info comes from the catalog row
      assert.are.same({ device_name = hardware.get('h100-sxm').name, device_count = 4,
        hardware = 'h100-sxm' }, rec.gpu_info)
      local perf = rec.performance_metrics
      assert.is_true(math.abs(perf.mfu / expected_mfu(rec, 'h100-sxm', 'bf16') - 1) < 1e-12)
      assert.are.equal('h100-sxm', perf.mfu_basis.hardware)
      assert.is_true(perf.mfu_basis.precision_assumed)
      assert.truthy(diag_of(rec, 'precision_assumed'))

      -- the run's own experiment name wins; the precision of its unified config replaces the
      -- bf16 assumption (the fake trainer's log shows none)
      rec = load(dir .. '/fp8.json')
      assert.are.equal('own-name', rec.experiment)
      assert.are.equal('mi300x', rec.gpu_info.hardware)
      assert.are.equal('fp8', rec.training_config.precision)
      perf = rec.performance_metrics
      assert.are.equal('fp8', perf.mfu_basis.precision)
      assert.is_false(perf.mfu_basis.precision_assumed)
      assert.are.equal('config', perf.mfu_basis.precision_source)
      assert.are.equal('config', rec.training_config.sources.precision)
      assert.are.equal(2614.9, perf.mfu_basis.peak_tflops)
      assert.is_true(math.abs(perf.mfu / expected_mfu(rec, 'mi300x', 'fp8') - 1) < 1e-12)
      assert.is_true(perf.mfu_basis.mfu_vs_bf16 > perf.mfu)
      assert.is_nil(diag_of(rec, 'precision_assumed'))

      -- no GPU known: no gpu_info, no MFU, the identity all the same
      rec = load(dir .. '/none.json')
      assert.are.equal('none', rec.run_id)
      assert.are.equal('gpu-spec', rec.experiment)
      assert.is_true(rec.gpu_info == nil or rec.gpu_info == json.null)
      assert.is_nil(rec.performance_metrics.mfu)

      -- an id the catalog does not know: said so, no MFU, the record still written
      rec = load(dir .. '/bogus.json')
      assert.is_true(rec.gpu_info == nil or rec.gpu_info == json.null)
      assert.is_nil(rec.performance_metrics.mfu)
      local w = assert(diag_of(rec, 'config_override'))
      assert.truthy(w.message:find("hardware 'h100' is not in tp.hardware", 1, true), w.message)
    end)

  it('measures J/token over the steady-state window, and compare uses it (fake ROCm)', function()
    local libpath = h.fakes_dir .. '/mi300x8'
    if not fs.is_dir(libpath) then
      pending('fake GPU libraries not built: ' .. libpath)
      return
    end
    -- The fake MI300Xs draw 600..607 W (tests/fakes/fake_rsmi.c), 4828 W in all; 40 log lines
    -- a second make iterations 25 ms apart, whatever step time the log prints.
    local dir = h.tmpdir()
    local script = dir .. '/energy.lua'
    h.write(script, string.format([[
local campaign = require('tp.campaign')
local c = campaign({ results = %q, name = 'energy', runs = { { id = 'e', parser = 'megatron',
  gbs = 32, seq_len = 1024, gpus = 8, model = 'llama3.1-8b', argv = { %q, '--megatron-gen',
  '40', '--lines-per-sec', '40', '--step-ms', '250', '--gbs', '32' } } } })
local s = assert(c:execute({ quiet = true, telemetry_interval = 0.02 }))
os.exit(s.exit_code)
]], dir .. '/res', FT))
    local r = h.run({ script }, { env = { TPLUA_GPU_LIBPATH = libpath } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local rec = load(dir .. '/res/e.json')
    local em = rec.energy_metrics
    assert.is_true(em.measured)
    assert.truthy(tostring(em.energy_basis):find('^measured %(counter%) over the steady%-state '
      .. 'window, iterations %d+%-40$'), tostring(em.energy_basis))
    -- The counters' joules over the window's wall time are the fake devices' power.
    assert.is_true(math.abs(em.window_energy_j / em.window_s / 4828 - 1) < 0.05,
      string.format('%.1f J over %.3f s', em.window_energy_j, em.window_s))
    assert.are.equal(em.window_energy_j / em.window_tokens, em.joules_per_token)
    -- tp.compare takes the measured figure and says so.
    local set = assert(require('tp.results').load({ dir .. '/res' }))
    local res = assert(require('tp.compare').compare(set, { metrics = { 'energy_per_token' },
      by = 'platform' }))
    assert.are.equal('measured', res.basis.energy.amd)
    assert.are.equal('energy_per_token', res.metrics[1].name)
    assert.are.equal(em.joules_per_token, res.metrics[1].groups[1].mean)
  end)

  it('has gpu_info.hardware and MFU of the probed GPU (fake ROCm libraries)', function()
    local libpath = h.fakes_dir .. '/mi300x8'
    if not fs.is_dir(libpath) then
      pending('fake GPU libraries not built: ' .. libpath)
      return
    end
    -- The probe runs in tplua's own process: a child tplua with the fake libraries in its path.
    local dir = h.tmpdir()
    local script = dir .. '/probed.lua'
    h.write(script, string.format([[
local campaign = require('tp.campaign')
local function run(id, more)
  local r = { id = id, parser = 'megatron', gbs = 32, seq_len = 1024, gpus = 8,
    model = 'llama3.1-8b', argv = { %q, '--megatron-gen', '12', '--lines-per-sec', '400',
    '--step-ms', '250', '--gbs', '32' } }
  for k, v in pairs(more or {}) do r[k] = v end
  return r
end
local c = campaign({ results = %q, name = 'probed', runs = { run('p1'),
  run('p2', { hardware = 'mi325x' }) } })
local s = assert(c:execute({ quiet = true, telemetry_interval = 0.05 }))
os.exit(s.exit_code)
]], FT, dir .. '/res'))
    local r = h.run({ script }, { env = { TPLUA_GPU_LIBPATH = libpath } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local rec = load(dir .. '/res/p1.json')
    assert.are.equal('p1', rec.run_id)
    assert.are.equal('probed', rec.experiment)
    assert.are.equal('amd', rec.platform)
    local gi = rec.gpu_info
    assert.are.equal('mi300x', gi.hardware)
    assert.are.equal('AMD Instinct MI300X', gi.device_name)
    assert.are.equal(8, gi.device_count)
    assert.are.equal(8, #gi.devices)
    assert.are.equal('gfx942', gi.devices[1].arch)
    local perf = rec.performance_metrics
    assert.are.equal('mi300x', perf.mfu_basis.hardware)
    assert.is_true(math.abs(perf.mfu / expected_mfu(rec, 'mi300x', 'bf16', 8) - 1) < 1e-12)
    assert.is_true(rec.energy_metrics.measured)
    assert.is_nil(diag_of(rec, 'config_override'))
    -- a configured GPU wins over the probed one, with a warning naming both
    rec = load(dir .. '/res/p2.json')
    assert.are.equal('mi325x', rec.gpu_info.hardware)
    assert.are.equal('AMD Instinct MI300X', rec.gpu_info.device_name)
    assert.are.equal('mi325x', rec.performance_metrics.mfu_basis.hardware)
    local w = assert(diag_of(rec, 'config_override'))
    assert.truthy(w.message:find('configured for mi325x but the probed GPU is mi300x', 1, true),
      w.message)
  end)
end)

describe('early aborts', function()
  it('stops a run at a NaN loss and says why', function()
    local dir = h.tmpdir()
    local s = assert(exec(campaign({ results = dir, runs = {
      mkrun('nan', gen(400, 100, { '--nan-at', '5', '--nan-style', 'nan' })),
      mkrun('nandrop', gen(400, 100, { '--nan-at', '5' })) } })))
    assert.are.equal(2, s.failed)
    for _, id in ipairs({ 'nan', 'nandrop' }) do
      local rec = load(dir .. '/' .. id .. '.json')
      assert.are.equal('nan_loss', rec.stopped_by)
      assert.are.equal('failed', rec.status)
      assert.is_true(#rec.records >= 5 and #rec.records < 100, id .. ': ' .. #rec.records)
      local d = assert(diag_of(rec, 'stopped'))
      assert.is_truthy(d.message:find('stopped by tplua (nan_loss)', 1, true), d.message)
      assert.is_truthy(rec.failure_reason:find('iteration 5', 1, true), rec.failure_reason)
      assert.are.equal('nan_loss', events(dir, id, 'failed')[1].stopped_by)
    end
  end)

  -- A log with a failure signature, replayed; the trainer then hangs, so only the rule ends it.
  local function signature_run(dir, id, line)
    local path = dir .. '/' .. id .. '.src'
    local r = assert(proc.run(gen(4, 0)))
    h.write(path, r.stdout .. line .. '\n')
    local lines = select(2, r.stdout:gsub('\n', '')) + 1
    return mkrun(id, { FT, '--file', path, '--lines-per-sec', '500', '--hang-after',
      tostring(lines) }, { timeout = 30, kill_grace = 1 }), lines
  end

  it('stops a run at an OOM or NCCL failure signature', function()
    local dir = h.tmpdir()
    local oom, oom_line = signature_run(dir, 'oom', 'torch.OutOfMemoryError: CUDA out of '
      .. 'memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which '
      .. '1.20 GiB is free.')
    local nccl = signature_run(dir, 'nccl', '[rank0]:[E ProcessGroupNCCL.cpp:616] Watchdog caught '
      .. 'collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, '
      .. 'NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.')
    local s = assert(exec(campaign({ results = dir, runs = { oom, nccl } })))
    assert.are.equal(2, s.failed)
    local r1 = load(dir .. '/oom.json')
    assert.are.equal('oom', r1.stopped_by)
    assert.is_truthy(r1.failure_reason:find('(log line ' .. oom_line .. ')', 1, true),
      r1.failure_reason)
    assert.are.equal('nccl_failure', load(dir .. '/nccl.json').stopped_by)
    assert.is_false(load(dir .. '/oom.json').campaign.exit.timed_out)
  end)

  it('lets a disabled rule pass: the run then ends on its own', function()
    local dir = h.tmpdir()
    local r = assert(proc.run(gen(4, 0)))
    h.write(dir .. '/src.log', r.stdout .. 'torch.OutOfMemoryError: CUDA out of memory.\n')
    local s = assert(exec(campaign({ results = dir, runs = { mkrun('o', { FT, '--file',
      dir .. '/src.log', '--exit-code', '1' }) } }), { abort = { oom = false } }))
    assert.are.equal(1, s.failed)
    local rec = load(dir .. '/o.json')
    assert.is_nil(rec.stopped_by)
    assert.is_truthy(rec.failure_reason:find('exit status 1', 1, true), rec.failure_reason)
    assert.is_truthy(rec.failure_reason:find('out of memory', 1, true), rec.failure_reason)
  end)

  it('stops a stalled run', function()
    local dir = h.tmpdir()
    local s = assert(exec(campaign({ results = dir, runs = {
      mkrun('stall', gen(20, 400, { '--hang-after', '11' }), { kill_grace = 1 }) } }),
      { abort = { stall_minutes = 0.005 } }))
    assert.are.equal(1, s.failed)
    local rec = load(dir .. '/stall.json')
    assert.are.equal('stall', rec.stopped_by)
    assert.is_truthy(rec.failure_reason:find('no new iteration for 0.005 minutes (last ' ..
      'progress: iteration 3)', 1, true), rec.failure_reason)
  end)

  it('kills the whole group of a hung run at its timeout', function()
    local dir = h.tmpdir()
    local s = assert(exec(campaign({ results = dir, runs = { mkrun('hang', gen(10, 400,
      { '--hang-after', '9', '--fork-children', '2', '--ignore-sigterm' }),
      { timeout = 0.5, kill_grace = 0.3 }) } })))
    assert.are.equal(1, s.failed)
    local rec = load(dir .. '/hang.json')
    assert.are.equal('timeout', rec.stopped_by)
    assert.is_true(rec.campaign.exit.timed_out)
    local started = events(dir, 'hang', 'started')[1]
    assert.are.same({}, assert(proc.group_members(started.pgid)))
  end)
end)

describe('secrets', function()
  it('never reach the results directory nor the printed output', function()
    local dir = h.tmpdir()
    local out_path = dir .. '/printed.txt'
    local out = assert(io.open(out_path, 'w'))
    local secret = 's3cr3t-hf-value'
    local c = campaign({ results = dir .. '/res', runs = {
      mkrun('s1', { 'env', 'DUMMY_URL=https://user:' .. secret .. '@host', 'HF_TOKEN=' .. secret,
        table.unpack(gen(5)) }, { env = { HF_TOKEN = secret, WANDB_API_KEY = 'wandb-' .. secret },
        config = { training = { gbs = 32 }, note = 'token ' .. secret } }),
      mkrun('s2', { 'env', 'X=' .. secret, FT, '--crash-at', '1' },
        { env = { HF_TOKEN = secret } }),
    } })
    local s = assert(exec(c, { out = out, tty = false, progress_every = 1 }))
    out:close()
    assert.are.same({ 1, 1 }, { s.finished, s.failed })
    local files = assert(fs.glob(dir .. '/res/*'))
    assert.is_true(#files >= 5)
    for _, p in ipairs(files) do
      local data = assert(h.read(p))
      assert.is_nil(data:find(secret, 1, true), p)
    end
    local printed = h.read(out_path)
    assert.is_truthy(printed:find('s2: FAILED', 1, true))
    assert.is_nil(printed:find(secret, 1, true))
    local rec = load(dir .. '/res/s1.json')
    assert.is_truthy(rec.source.command:find("HF_TOKEN='<redacted>'", 1, true), rec.source.command)
    assert.is_truthy(rec.source.command:find('DUMMY_URL=https://user:<redacted>@host', 1, true))
    assert.are.equal('token <redacted>', rec.training_config.unified.note)
    for _, p in ipairs(c:status()) do
      assert.is_nil(json.encode(p.last):find(secret, 1, true))
    end
  end)
end)

describe('the results directory lock', function()
  it('refuses a second campaign with a clear message', function()
    local dir = h.tmpdir()
    local lk = assert(require('tp._lock').acquire(dir .. '/.lock', 0))
    local s, err, code = exec(campaign({ results = dir, runs = { mkrun('a', gen(2)) } }))
    assert.is_nil(s)
    assert.are.equal('EBUSY', code)
    local pid = tonumber(h.read('/proc/self/stat'):match('^(%d+)'))
    assert.is_truthy(err:find(dir .. ': another campaign is running in this directory (tplua pid '
      .. pid .. ')', 1, true), err)
    assert.is_false(fs.exists(dir .. '/journal.jsonl'))
    lk:close()
    assert.are.equal(1, assert(exec(campaign({ results = dir, runs = {
      mkrun('a', gen(2)) } }))).finished)
  end)
end)

describe('a results directory that cannot be used', function()
  it('fails with the path and the reason, before running anything', function()
    local dir = h.tmpdir()
    h.write(dir .. '/plain-file', 'x')
    local s, err, code = exec(campaign({ results = dir .. '/plain-file/res', runs = {
      mkrun('a', gen(2)) } }))
    assert.is_nil(s)
    assert.is_truthy(err:find(dir .. '/plain-file', 1, true), err)
    assert.are.equal('ENOTDIR', code)
  end)

  it('refuses a journal that is not a file', function()
    local dir = h.tmpdir()
    assert(fs.mkdir_p(dir .. '/journal.jsonl'))
    local s, err, code = exec(campaign({ results = dir, runs = { mkrun('a', gen(2)) } }))
    assert.is_nil(s)
    assert.are.equal(dir .. '/journal.jsonl: not a regular file', err)
    assert.are.equal('EINVAL', code)
    -- and the lock was released
    local lk = assert(require('tp._lock').acquire(dir .. '/.lock', 0))
    lk:close()
  end)
end)

describe('resuming after tplua died', function()
  it('stops what is left of the previous attempt before running it again', function()
    local dir = h.tmpdir()
    local run = mkrun('stale', gen(4))
    -- A process group playing a run of a tplua that died: it ignores SIGTERM and has a child.
    local loop <close> = proc.loop()
    local printed = false
    local p = assert(loop:spawn({ argv = { FT, '--megatron-gen', '1', '--hang-after', '1',
      '--fork-children', '1', '--ignore-sigterm' },
      on_line = function()
        printed = true
      end }))
    while not printed do
      loop:run_once(5)
    end
    local pgid = p:pgid()
    local members = assert(proc.group_members(pgid))
    assert.are.equal(2, #members)
    local st = assert(run_mod.proc_stat(pgid))
    local h0 = run_mod.hash(run)
    h.write(dir .. '/journal.jsonl', json.encode({ event = 'planned', id = 'stale', hash = h0 })
      .. '\n' .. json.encode({ event = 'started', id = 'stale', hash = h0, attempt = 'old-1',
        pid = pgid, pgid = pgid, starttime = st.starttime, boot_id = run_mod.boot_id() }) .. '\n')
    h.write(dir .. '/stale.log', 'partial output\n')
    local c = campaign({ results = dir, runs = { run } })
    assert.are.equal('interrupted', c:status()[1].state)
    local s = assert(exec(c, { kill_grace = 0.3 }))
    assert.are.equal(1, s.finished)
    assert.is_true(has_note(s.notes, 'stale: 2 process(es) of its previous attempt (group '
      .. pgid .. ') still run: stopping them first'))
    assert.are.same({}, assert(proc.group_members(pgid)))
    assert.are.equal('partial output\n', h.read(dir .. '/stale.log.interrupted-1'))
    local r = p:wait()
    assert.are.equal('SIGKILL', r.signal)
  end)

  it('leaves alone a process group that now belongs to another program', function()
    local dir = h.tmpdir()
    local run = mkrun('reused', gen(3))
    local loop <close> = proc.loop()
    local p = assert(loop:spawn({ argv = { FT, '--hang-after', '1', '--megatron-gen', '1' },
      on_line = function() end }))
    local pgid = p:pgid()
    local h0 = run_mod.hash(run)
    h.write(dir .. '/journal.jsonl', json.encode({ event = 'started', id = 'reused', hash = h0,
      pgid = pgid, starttime = 1, boot_id = run_mod.boot_id() }) .. '\n')
    local s = assert(exec(campaign({ results = dir, runs = { run } })))
    assert.are.equal(1, s.finished)
    assert.is_true(has_note(s.notes, 'now belongs to another program: left alone'))
    assert.are.equal(1, #assert(proc.group_members(pgid)))
    p:kill('SIGKILL')
    p:wait()
  end)
end)

describe('tp.run.execute', function()
  it('runs one run and writes its record and log, without a journal', function()
    local dir = h.tmpdir()
    local out = run_mod.execute(mkrun('one', gen(8)), { results = dir, quiet = true,
      telemetry = false })
    assert.are.equal('finished', out.status)
    assert.are.equal(dir .. '/one.json', out.record_path)
    assert.are.equal(8, #load(out.record_path).iterations)
    assert.is_true(fs.is_file(dir .. '/one.log'))
    assert.is_false(fs.exists(dir .. '/journal.jsonl'))
    assert.has_error(function()
      run_mod.execute({ id = 'x' }, { results = dir })
    end, "run 'x': argv: a non-empty list expected")
  end)
end)

describe('runs that leave outputs (a microbenchmark: iterations = false)', function()
  -- A command that prints progress lines, no iteration, and writes its result as JSON.
  local function bench(script, more)
    local r = { id = 'bench', argv = { 'sh', '-c', script }, outputs = { result = 'out.json' },
      iterations = false }
    for k, v in pairs(more or {}) do
      r[k] = v
    end
    return r
  end
  local WRITES = 'pwd > where.txt; echo "bench: measuring"; '
    .. 'printf \'{"schema": "x/1", "tflops": 2.5}\' > out.json; echo "bench: done"'

  it('runs in its directory, and its output becomes the record member of its name', function()
    local dir = h.tmpdir()
    local s = assert(exec(campaign({ results = dir, runs = { bench(WRITES) } })))
    assert.are.equal(1, s.finished)
    local rec = load(dir .. '/bench.json')
    assert.are.equal('completed', rec.status)
    assert.are.equal('completed', rec.outcome)
    assert.are.same({ schema = 'x/1', tflops = 2.5 }, rec.result)
    assert.are.same({}, rec.diagnostics)  -- no no_records error, no unrecognised warning
    assert.are.equal(0, #rec.records)
    local where = h.read(dir .. '/bench.files/where.txt'):gsub('%s+$', '')
    assert.are.equal(fs.realpath(dir .. '/bench.files'), fs.realpath(where))
  end)

  it('fails without its output, never reading what an earlier attempt left', function()
    local dir = h.tmpdir()
    assert(fs.mkdir_p(dir .. '/bench.files'))
    h.write(dir .. '/bench.files/out.json', '{"stale": true}')
    local s = assert(exec(campaign({ results = dir, runs = { bench('echo "bench: nothing"') } })))
    assert.are.equal(1, s.failed)
    local rec = load(dir .. '/bench.json')
    assert.are.equal('failed', rec.status)
    assert.is_nil(rec.result)
    assert.is_truthy(rec.failure_reason:find('output result: ' .. dir .. '/bench.files/out.json',
      1, true), rec.failure_reason)
    assert.is_false(fs.exists(dir .. '/bench.files/out.json'))
  end)

  it('fails on a non-zero exit, keeping what it wrote', function()
    local dir = h.tmpdir()
    local s = assert(exec(campaign({ results = dir, runs = { bench(WRITES .. '; exit 3') } })))
    assert.are.equal(1, s.failed)
    local rec = load(dir .. '/bench.json')
    assert.is_truthy(rec.failure_reason:find('exit status 3', 1, true), rec.failure_reason)
    assert.are.equal(2.5, rec.result.tflops)
  end)

  it('lets a training run leave outputs too: a missing one is a warning', function()
    local dir = h.tmpdir()
    -- It runs in its directory: its program by absolute path.
    local argv = gen(5)
    argv[1] = fs.realpath(argv[1])
    local s = assert(exec(campaign({ results = dir, runs = {
      mkrun('t', argv, { outputs = { extra = 'extra.json' } }) } })))
    assert.are.equal(1, s.finished)
    local rec = load(dir .. '/t.json')
    assert.are.equal('completed', rec.status)
    local found
    for _, d in ipairs(rec.diagnostics) do
      if d.kind == 'output_missing' then
        found = d
      end
    end
    assert.are.equal('warning', found.severity)
    assert.is_truthy(found.message:find('output extra: ' .. dir .. '/t.files/extra.json', 1,
      true), found.message)
  end)

  it('never replaces a member of the record', function()
    local dir = h.tmpdir()
    assert(exec(campaign({ results = dir, runs = {
      bench('echo \'"mine"\' > s.json', { outputs = { status = 's.json' } }) } })))
    local rec = load(dir .. '/bench.json')
    assert.are.equal('completed', rec.status)
    local clash
    for _, d in ipairs(rec.diagnostics) do
      clash = d.kind == 'output_clash' and d or clash
    end
    assert.are.equal('error', clash.severity)
    assert.are.equal("output status: the record has a member 'status' already: not replaced",
      clash.message)
  end)

  it('checks the outputs of a run table, and hashes them', function()
    local function bad(outputs, msg)
      local ok, err = pcall(campaign, { results = 'd', runs = { { id = 'a', argv = { 'x' },
        outputs = outputs } } })
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(msg, 1, true), tostring(err))
    end
    bad({ ['a b'] = 'x.json' }, "run 'a': outputs: a member name")
    bad({ r = '../x.json' }, "run 'a': outputs.r: '../x.json' leaves its directory")
    bad({ r = '/tmp/x.json' }, "run 'a': outputs.r: a relative path expected")
    bad('x.json', "run 'a': outputs: table expected, got string")
    local a = run_mod.hash({ id = 'a', argv = { 'x' } })
    assert.are.equal(a, run_mod.hash({ id = 'a', argv = { 'x' } }))
    assert.are_not.equal(a, run_mod.hash({ id = 'a', argv = { 'x' }, iterations = false }))
    assert.are_not.equal(a, run_mod.hash({ id = 'a', argv = { 'x' }, outputs = { r = 'r' } }))
  end)

  it('shows its last line in the live view where an iteration would be', function()
    assert.are.equal('bench: done', live.fmt_state({ line = 'bench: done' }))
    assert.are.equal('starting', live.fmt_state({}))
  end)
end)

describe('tp.live', function()
  it('formats durations and states', function()
    assert.are.equal('0.4s', live.fmt_duration(0.42))
    assert.are.equal('42s', live.fmt_duration(42))
    assert.are.equal('5m12s', live.fmt_duration(312))
    assert.are.equal('2h05m', live.fmt_duration(7500))
    assert.are.equal('3d04h', live.fmt_duration(3 * 86400 + 4 * 3600))
    assert.are.equal('?', live.fmt_duration(0 / 0))
    -- The rate of the latest record is labelled `now`.
    assert.are.equal('iter 120/500 (24%) | 3456 tok/s/GPU now | loss 4.1230 | ETA 5m12s',
      live.fmt_state({ iteration = 120, total = 500, tokens_per_s_per_gpu = 3456.2,
        loss = 4.123, eta_s = 312 }))
    -- Finished: no ETA; the steady state's mean when the record gave it, else the last rate.
    assert.are.equal('iter 500/500 (100%) | 3401 tok/s/GPU steady mean (iterations 21-500) | '
      .. 'loss 2.0000', live.fmt_state({ iteration = 500, total = 500, finished = true,
        tokens_per_s_per_gpu = 3456.2, loss = 2, eta_s = 0, steady = {
          tokens_per_s_per_gpu = 3401.4, step_time_s = 0.3, first_iteration = 21,
          last_iteration = 500 } }))
    assert.are.equal('iter 60/3000 (2%) | 0.1046 s/step steady mean | loss 0.0247',
      live.fmt_state({ iteration = 60, total = 3000, finished = true, loss = 0.0247,
        eta_s = 303, steady = { step_time_s = 0.10455 } }))
    assert.are.equal('iter 60/3000 (2%) | 2542 tok/s/GPU last', live.fmt_state({
      iteration = 60, total = 3000, finished = true, tokens_per_s_per_gpu = 2542, eta_s = 303 }))
    assert.are.equal('starting', live.fmt_state({}))
    assert.are.equal('iter 3 | loss nan', live.fmt_state({ iteration = 3, loss = 0 / 0 }))
  end)

  it('prints plain lines every K iterations and on ticks', function()
    local path = h.tmpdir() .. '/out.txt'
    local f = assert(io.open(path, 'w'))
    local v = live.new({ out = f, tty = false, every = 5, interval = 0 })
    v:started('a', { records = 0 })
    for i = 1, 12 do
      v:progress('a', { iteration = i, total = 12, loss = 1 / i })
    end
    -- The finished line: the record's steady-state mean, no ETA though the state has one.
    v:finished('a', { status = 'finished', record = { performance_metrics = {
      avg_step_time_seconds = 0.5, tokens_per_second_per_gpu = 2048,
      steady_state = { first_iteration = 3, last_iteration = 12 } } } },
      { iteration = 12, total = 12, tokens_per_s_per_gpu = 1999, eta_s = 0 })
    v:close('all done')
    f:close()
    local text = h.read(path)
    local n = select(2, text:gsub('a: iter ', ''))
    assert.are.equal(3, n)  -- iterations 1, 6, 11
    assert.is_truthy(text:find('a: finished in ', 1, true))
    assert.is_truthy(text:find('| iter 12/12 (100%) | 2048 tok/s/GPU steady mean (iterations '
      .. '3-12)\n', 1, true), text)
    assert.is_nil(text:find('ETA', 1, true))
    assert.are.equal('all done\n', text:sub(-9))
    assert.is_nil(text:find('\27', 1, true))
  end)

  it('redraws a status block in place on a terminal', function()
    local path = h.tmpdir() .. '/tty.txt'
    local f = assert(io.open(path, 'w'))
    local v = live.new({ out = f, tty = true, width = 60 })
    v:started('a', { records = 0 })
    v:started('b', { records = 0 })
    v:progress('a', { iteration = 2, total = 10, loss = 3.5 })
    v:tick()
    v:finished('a', { status = 'failed', reason = 'boom', stopped_by = 'nan_loss' })
    v:close('summary line')
    f:close()
    local text = h.read(path)
    assert.is_truthy(text:find('\27[2A', 1, true))  -- up over the two status lines
    assert.is_truthy(text:find('\27[2K  a  iter 2/10 (20%) | loss 3.5000', 1, true))
    assert.is_truthy(text:find('a: FAILED in ', 1, true))
    assert.is_truthy(text:find('(nan_loss): boom', 1, true))
    assert.are.equal('summary line\n', text:sub(-13))
    for line in text:gmatch('[^\n]*') do
      assert.is_true(#line:gsub('\27%[[%d;]*%a', '') <= 60, line)
    end
    assert.has_error(function()
      live.new({ colour = true })
    end, "tp.live.new: unknown option 'colour'")
  end)
end)
