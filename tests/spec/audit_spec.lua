-- tp.audit: the fairness audit on the result fixtures (a fair pair, the seeded unfair pair,
-- mock data, random tokens, a killed run, TP/precision/GPU-count mismatches, tprimat files) and
-- on small records written here for the cases the fixtures do not cover.
local h = require('helper')
local audit = require('tp.audit')
local results = require('tp.results')
local json = require('tp.json')

local ROOT = h.fixture('results')

local function load(dir)
  return assert(results.load(ROOT .. '/' .. dir))
end

local function select(findings, kind, key)
  local out = {}
  for _, f in ipairs(findings) do
    if f.kind == kind and (key == nil or f.key == key) then
      out[#out + 1] = f
    end
  end
  return out
end

local function one(findings, kind, key)
  local s = select(findings, kind, key)
  assert.are.equal(1, #s, string.format('expected one %s finding for %s, got %d', kind,
    tostring(key), #s))
  return s[1]
end

local function write_record(dir, name, fields)
  local doc = { schema = 'tplua.run/1', framework = 'megatron', run_id = name }
  for k, v in pairs(fields) do
    doc[k] = v
  end
  h.write(dir .. '/' .. name .. '.json', assert(json.encode(doc)))
end

describe('tp.audit.compare', function()
  it('finds nothing wrong with the fair pair', function()
    local a = audit.compare(load('fair'))
    assert.are.same({}, a.findings)
    assert.is_true(a.valid)
    assert.are.same({ error = 0, warning = 0, info = 0 }, a.counts)
    assert.are.equal('identical_config', a.methodology)
    assert.are.equal('records', a.methodology_source)
    assert.are.equal(3e-4, a.effective['amd-primus-r1']['training.lr'])
    assert.are.equal(8, a.effective['nvd-megatron-r2'].gpus)
  end)

  it('flags the seeded unfair pair: the lr 30x off and the changed seed are errors', function()
    local a = audit.compare(load('unfair'))
    assert.is_false(a.valid)
    local lr = one(a.findings, 'config_differs', 'training.lr')
    assert.are.equal('error', lr.severity)
    assert.is_truthy(lr.message:find('training.lr differs: amd 1e-05 (amd-primus-lr: primus ' ..
      'args lr=1e-05) vs nvd 0.0003 (nvd-megatron-seed: megatron args lr=0.0003)', 1, true))
    assert.is_truthy(lr.message:find('identical_config requires the same value (algorithmic)', 1,
      true))
    assert.are.same({ 'amd-primus-lr', 'nvd-megatron-seed' }, { table.unpack(lr.runs) })
    local seed = one(a.findings, 'config_differs', 'training.seed')
    assert.are.equal('error', seed.severity)
    assert.is_truthy(seed.message:find('amd 42 (amd-primus-lr: primus args seed=42) vs nvd 1234',
      1, true))
    -- The recipe asked 3e-4: the AMD run did not run what it was given.
    local ie = one(a.findings, 'intended_vs_effective', 'training.lr')
    assert.are.equal('error', ie.severity)
    assert.is_truthy(ie.message:find('amd-primus-lr: training.lr is 1e-05 in the log (primus ' ..
      'args lr=1e-05) but the recipe asked for 0.0003', 1, true))
    assert.are.equal(3e-4, ie.values.intended)
    assert.are.equal(1e-5, ie.values.effective)
    -- The seed was changed in the recipe itself: no intended-vs-effective finding for it.
    assert.are.equal(0, #select(a.findings, 'intended_vs_effective', 'training.seed'))
    -- Errors come first.
    for i = 2, #a.findings do
      assert.is_false(a.findings[i - 1].severity == 'info' and a.findings[i].severity == 'error')
    end
  end)

  it('flags mock data on one side from the arguments and from the loss', function()
    local a = audit.compare(load('mock'))
    assert.is_false(a.valid)
    local both = select(a.findings, 'mock_data', 'training.dataset')
    assert.are.equal(2, #both)
    local args, note = both[1], both[2]
    assert.are.equal('error', args.severity)
    assert.are.equal('info', note.severity)
    assert.is_truthy(note.message:find('amd-primus-mock trains on mock data', 1, true))
    assert.is_truthy(args.message:find('amd mock (amd-primus-mock: primus args mock_data=True',
      1, true))
    local loss = one(a.findings, 'mock_data', 'loss')
    assert.are.equal('error', loss.severity)
    assert.is_truthy(loss.message:find('amd-primus-mock stays at 11.761 = ln(128256), while ' ..
      'nvd-megatron-real learns', 1, true))
    assert.are.same({ 'amd-primus-mock' }, { table.unpack(loss.runs) })
    one(a.findings, 'intended_vs_effective', 'training.dataset')
  end)

  it('flags random data from the loss plateau alone', function()
    local a = audit.compare(load('random'))
    assert.are.equal(1, a.counts.error)
    local f = one(a.findings, 'mock_data', 'loss')
    assert.is_truthy(f.message:find('amd-primus-randomtokens stays at', 1, true))
    assert.are.equal(0, #select(a.findings, 'mock_data', 'training.dataset'))
  end)

  it('can leave the loss out of the data checks', function()
    local a = audit.compare(load('random'), { convergence = false })
    assert.is_true(a.valid)
  end)

  it('flags a run that did not reach its last iteration', function()
    local a = audit.compare(load('truncated'))
    local f = one(a.findings, 'incomplete')
    assert.are.equal('error', f.severity)
    assert.is_truthy(f.message:find('nvd-megatron-killed stopped at iteration 135 of 200', 1,
      true))
    assert.are.equal(135, f.values.last_iteration)
  end)

  it('flags TP 4 vs 1, fp8 vs bf16, batch, sequence length and GPU count', function()
    local a = audit.compare(load('mismatch'))
    for _, key in ipairs({ 'parallelism.tp', 'training.precision', 'training.gbs',
      'training.seq_len', 'gpus' }) do
      assert.are.equal('error', one(a.findings, 'config_differs', key).severity, key)
    end
    local gpus = one(a.findings, 'config_differs', 'gpus')
    assert.is_truthy(gpus.message:find('number of GPUs (gpus) differs: amd 8 ' ..
      '(amd-primus-tp4-fp8: primus args world_size=8) vs nvd 16', 1, true))
    local p = one(a.findings, 'config_differs', 'training.precision')
    assert.is_truthy(p.message:find('amd fp8', 1, true))
  end)

  it('lets maximum_performance tune parallelism per platform', function()
    local a = audit.compare(load('mismatch'), { methodology = 'maximum_performance' })
    assert.are.equal('option', a.methodology_source)
    assert.are.equal('info', one(a.findings, 'config_differs', 'parallelism.tp').severity)
    assert.are.equal('error', one(a.findings, 'config_differs', 'training.precision').severity)
    assert.are.equal('error', one(a.findings, 'config_differs', 'gpus').severity)
  end)

  it('audits tprimat files with what they record, and says what it could not check', function()
    local a = audit.compare(load('tprimat'))
    assert.are.equal('identical_config', a.methodology)
    assert.is_truthy(a.methodology_source:find('assumed', 1, true))
    assert.are.equal(4, #select(a.findings, 'no_argument_dump'))
    local gbs = one(a.findings, 'config_differs', 'training.gbs')
    assert.is_truthy(gbs.message:find('tprimat training_config.global_batch_size', 1, true))
    -- Both memorised, no learning run to contrast: a warning, not an error.
    local m = one(a.findings, 'mock_data', 'loss')
    assert.are.equal('warning', m.severity)
  end)

  it('checks dataset fingerprints, methodologies that disagree and unknown keys', function()
    local dir = h.tmpdir()
    local tc = { num_gpus = 8, global_batch_size = 128 }
    write_record(dir, 'a', { platform = 'amd', methodology = 'identical_config',
      dataset = { name = 'bc', fingerprint = 'sha256:aaaa' }, training_config = tc })
    write_record(dir, 'b', { platform = 'nvd', methodology = 'maximum_performance',
      dataset = { name = 'bc', fingerprint = 'sha256:bbbb' },
      training_config = { global_batch_size = 128 } })
    local a = audit.compare(assert(results.load(dir)))
    local fp = one(a.findings, 'data_identity')
    assert.are.equal('error', fp.severity)
    assert.is_truthy(fp.message:find('amd sha256:aaaa (a: dataset fingerprint) vs nvd ' ..
      'sha256:bbbb (b: dataset fingerprint)', 1, true))
    local mm = one(a.findings, 'methodology_mismatch')
    assert.are.equal('warning', mm.severity)
    assert.are.equal('identical_config', a.methodology)
    -- b records no GPU count: the 8 of a cannot be checked against it.
    local nc = one(a.findings, 'not_checked', 'gpus')
    assert.are.same({ 'b' }, { table.unpack(nc.runs) })
  end)

  it('says the same data when the fingerprints agree', function()
    local dir = h.tmpdir()
    for _, p in ipairs({ 'amd', 'nvd' }) do
      write_record(dir, p, { platform = p, dataset = { fingerprint = 'sha256:cafe' } })
    end
    local f = one(audit.compare(assert(results.load(dir))).findings, 'data_identity')
    assert.are.equal('info', f.severity)
    assert.is_truthy(f.message:find('fingerprint sha256:cafe, 2 runs', 1, true))
  end)

  it('groups by any key', function()
    local a = audit.compare(load('unfair'), { by = 'framework' })
    local lr = one(a.findings, 'config_differs', 'training.lr')
    assert.is_truthy(lr.message:find('primus 1e-05', 1, true))
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      audit.compare(load('fair'), { methodology = 'fastest' })
    end)
    assert.has_error(function()
      audit.compare(load('fair'), { bye = 'platform' })
    end, "tp.audit.compare: unknown option 'bye'")
    assert.has_error(function()
      audit.compare(7)
    end, 'tp.audit.compare: result set or list of runs expected, got number')
  end)
end)

describe('tp.audit.run and tp.audit.effective', function()
  it('reads the effective config back through the adapter, with provenance', function()
    local run = load('unfair/amd')[1]
    local e = audit.effective(run)
    assert.are.equal(1e-5, e.config['training.lr'])
    assert.are.equal('primus args lr=1e-05', e.provenance['training.lr'])
    assert.are.equal(8, e.config.gpus)
    assert.are.equal('primus args world_size=8', e.provenance.gpus)
    assert.are.equal(4096, e.config['model.hidden_size'])
    assert.are.equal(3e-4, e.intended['training.lr'])
    assert.are.equal(4096, e.intended['model.hidden_size'])
    assert.are.equal('recipe', e.intended_source)
    assert.are.equal('bc', e.dataset)
    assert.is_true(e.has_args)
  end)

  it('audits one run', function()
    local f = audit.run(load('unfair/amd')[1])
    assert.are.equal(2, #f)
    assert.are.equal('intended_vs_effective', f[1].kind)
    assert.are.same({}, audit.run(load('fair/nvd')[1]))
    local killed = audit.run(load('truncated/nvd')[1])
    assert.are.equal('incomplete', killed[1].kind)
  end)

  it('reports a failed run with its error diagnostics', function()
    local dir = h.tmpdir()
    write_record(dir, 'oom', { platform = 'amd', status = 'failed', diagnostics = json.array({
      { kind = 'oom', severity = 'error', message = 'HIP out of memory (line 812)' } }) })
    local f = audit.run(assert(results.load(dir))[1])
    local failed = one(f, 'run_failed')
    assert.are.equal('oom failed (oom: HIP out of memory (line 812))', failed.message)
  end)
end)

describe('tp.audit.effective intended source', function()
  it('names the flags once however many keys they gave', function()
    local e = audit.effective({ id = 'r', training_config = {
      global_batch_size = 64, sequence_length = 2048, learning_rate = 3e-4,
      sources = { global_batch_size = 'flag', sequence_length = 'flag', learning_rate = 'flag' },
      unified = { training = { lr = 3e-4, gbs = 64 } } } })
    assert.are.equal('recipe and flags', e.intended_source)
    local f = audit.effective({ id = 'f', training_config = { global_batch_size = 64,
      sequence_length = 2048,
      sources = { global_batch_size = 'flag', sequence_length = 'flag' } } })
    assert.are.equal('flags', f.intended_source)
  end)
end)

describe('tp.audit.compare environments', function()
  local function env(driver, torch, commit)
    return { schema = 'tplua.environment/1', gpu_stack = { nvidia_driver = driver },
      python = { python = '3.11.2', torch = torch }, framework = { name = 'megatron',
        commit = commit } }
  end

  it('states each side, warns on a differing stack, fails on differing repeats', function()
    local dir = h.tmpdir()
    write_record(dir, 'a-r1', { platform = 'nvd', environment = env('550.54', '2.5.1', 'abc') })
    write_record(dir, 'a-r2', { platform = 'nvd', environment = env('550.54', '2.6.0', 'abc') })
    write_record(dir, 'b-r1', { platform = 'nvd', environment = env('560.10', '2.5.1', 'abc') })
    write_record(dir, 'c-r1', { platform = 'amd', environment = env('6.10', '2.5.1', 'def') })
    local r = audit.compare(assert(results.load(dir)), { convergence = false })
    local rep = one(r.findings, 'environment_repeats')
    assert.are.equal('error', rep.severity)
    assert.truthy(rep.message:find('nvd: python.torch differs between repeats of one '
      .. 'configuration: 2.5.1 (a-r1, b-r1) vs 2.6.0 (a-r2)', 1, true), rep.message)
    local diff = one(r.findings, 'environment_differs')
    assert.are.equal('warning', diff.severity)
    assert.truthy(diff.message:find('nvd: gpu_stack.nvidia_driver differs between its runs: '
      .. '550.54 (a-r1, a-r2) vs 560.10 (b-r1)', 1, true), diff.message)
    local notes = select(r.findings, 'environment')
    assert.are.equal(2, #notes)
    local amd = notes[1].message:find('^amd') and notes[1] or notes[2]
    assert.truthy(amd.message:find('amd stack: framework.commit def, gpu_stack.nvidia_driver '
      .. '6.10, python.python 3.11.2, python.torch 2.5.1', 1, true), amd.message)
    assert.is_false(r.valid)
  end)

  it("fails when a GPU's power limit differs between repeats", function()
    local dir = h.tmpdir()
    local function capped(w)
      local e = env('550.54', '2.5.1', 'abc')
      e.gpu_state = { { name = 'NVIDIA H100 80GB HBM3', power_limit_w = w, ecc = true,
        devices = { 1, 2, 3, 4, 5, 6, 7, 8 } } }
      return e
    end
    write_record(dir, 'a-r1', { platform = 'nvd', environment = capped(700) })
    write_record(dir, 'a-r2', { platform = 'nvd', environment = capped(500) })
    local r = audit.compare(assert(results.load(dir)), { convergence = false })
    local rep = one(r.findings, 'environment_repeats')
    assert.truthy(rep.message:find('nvd: gpu_state.1.power_limit_w differs between repeats of '
      .. 'one configuration: 500 (a-r2) vs 700 (a-r1)', 1, true), rep.message)
  end)

  it('loads records without an environment as before', function()
    local r = audit.compare(load('fair'))
    assert.are.equal(0, #select(r.findings, 'environment'))
    assert.is_true(r.valid)
  end)
end)
