-- Real distributed training on this machine: the reference trainer (tools/reftrain, PyTorch DDP
-- over gloo) started by `tplua ranks` under tplua's run supervisor, through the real binary.
-- Needs Debian's python3-torch; pending (visibly) without it.
local h = require('helper')
local json = require('tp.json')


local function record(path)
  return assert(json.load_file(path))
end

describe('tplua ranks', function()
  it('stops the other ranks when one fails, with its exit status', function()
    local r = h.run({ 'ranks', '--nproc-per-node', '3', '--', 'sh', '-c',
      'echo "rank $RANK of $WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT local $LOCAL_RANK"; '
        .. 'if [ "$RANK" = 2 ]; then exit 7; fi; exec sleep 60' })
    assert.are.equal(7, r.code, r.stderr)
    for rank = 0, 2 do
      assert.truthy(r.stdout:find('rank ' .. rank .. ' of 3 at 127.0.0.1:', 1, true), r.stdout)
    end
    assert.truthy(r.stderr:find('tplua ranks: rank 2 exited with status 7; the other ranks '
      .. 'were stopped', 1, true), r.stderr)
  end)

  it('gives every rank the same port and exits 0 when all do', function()
    local r = h.run({ 'ranks', '--nproc-per-node', '2', '--master-port', '29777', '--', 'sh',
      '-c', 'echo "$RANK:$MASTER_PORT"' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('0:29777', 1, true))
    assert.truthy(r.stdout:find('1:29777', 1, true))
  end)

  it('says what is wrong with its arguments', function()
    local r = h.run({ 'ranks', '--', 'true' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('--nproc-per-node N (N >= 1) is required', 1, true))
    r = h.run({ 'ranks', '--nproc-per-node', '2', '--nnodes', '2', '--', 'true' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('--master-port is required with --nnodes > 1', 1, true))
  end)
end)

describe('the reference trainer under tplua #slow', function()
  local missing = h.torch_missing()
  if missing then
    it('trains with real DDP', function()
      pending(missing)
    end)
    return
  end

  it('runs examples/smoke.lua: 2 gloo ranks, the loss falls, a normal record', function()
    local dir = h.tmpdir()
    local r = h.run({ 'run', 'examples/smoke.lua', '--results', dir },
      { cwd = h.source_dir })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local rec = record(dir .. '/smoke-2ranks.json')
    assert.are.equal('completed', rec.status)
    assert.are.equal('reference', rec.framework)
    assert.are.equal(20, #rec.loss_values)
    local first, last = rec.loss_values[1], rec.loss_values[#rec.loss_values]
    -- Learning the repeated pattern: far below ln(256) = 5.545 and falling.
    assert.is_true(first > 4.5, tostring(first))
    assert.is_true(last < 2.5 and last < first / 2, tostring(last))
    assert.is_true(rec.performance_metrics.tokens_per_second > 0)
    -- The software stack that produced it (tp.provenance): the trainer's own Python and torch.
    local e = rec.environment
    assert.are.equal('tplua.environment/1', e.schema)
    assert.are.equal('reference', e.framework.name)
    assert.truthy(e.python.torch:find('^%d+%.%d+'), e.python.torch)
    assert.are.equal('/usr/bin/python3', e.python.executable)
    assert.truthy(e.system.kernel and e.system.os)
    local log = h.read(dir .. '/smoke-2ranks.log')
    assert.truthy(log:find('initialized data parallel with size 2 (backend gloo, cpu)', 1, true))
  end)

  it('learns real text and stays at ln(256) on random bytes; compare tells them apart', function()
    local dir = h.tmpdir()
    local r = h.run({ 'run', 'examples/data_convergence.lua', '--quiet' },
      { cwd = h.source_dir, env = { TPLUA_DATA_EXAMPLE_DIR = dir } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local real, rnd = record(dir .. '/licenses.json'), record(dir .. '/random.json')
    local ln256 = math.log(256)
    assert.is_true(real.loss_values[#real.loss_values] < ln256 - 1.5,
      tostring(real.loss_values[#real.loss_values]))
    assert.is_true(math.abs(rnd.loss_values[#rnd.loss_values] - ln256) < 0.3,
      tostring(rnd.loss_values[#rnd.loss_values]))
    -- The records name their data: prefix, fingerprint (the .bin's SHA-256), tokenizer.
    assert.are.equal('bytes', real.dataset.tokenizer)
    local p = io.popen('sha256sum ' .. h.shquote(dir .. '/data/licenses.bin'))
    assert.are.equal(p:read('a'):match('^(%x+)'), real.dataset.fingerprint)
    p:close()
    assert.are_not.equal(real.dataset.fingerprint, rnd.dataset.fingerprint)
    local c = h.run({ 'compare', dir })
    assert.truthy(c.stdout:find('the dataset fingerprints differ', 1, true), c.stdout)
    assert.truthy(c.stdout:find('random stays at 5.5', 1, true), c.stdout)
    assert.truthy(c.stdout:find('licenses learns (loss', 1, true), c.stdout)
    assert.truthy(c.stdout:find('synthetic data on one side: random (random)', 1, true), c.stdout)
  end)

  it('is stopped early when a NaN loss appears', function()
    local dir = h.tmpdir()
    local path = dir .. '/nan.lua'
    h.write(path, string.format([[
local tp = require('tp')
local ref = tp.frameworks.get('reference')
local config = ref.smoke_config(2)
local cmd = tp.launch.get('ranks').wrap(ref.build(config), { nproc_per_node = 2 })
table.insert(cmd.argv, '--inject-nan-at')
table.insert(cmd.argv, '6')
return tp.campaign({ results = %q, runs = { { id = 'nan', argv = cmd.argv, env = cmd.env,
  parser = 'megatron', framework = 'reference', config = config, timeout = 600 } } })
]], dir))
    local r = h.run({ 'run', path })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    local rec = record(dir .. '/nan.json')
    assert.are.equal('failed', rec.status)
    assert.are.equal('nan_loss', rec.stopped_by)
    assert.truthy(tostring(rec.failure_reason):find('NaN loss at iteration 6', 1, true),
      tostring(rec.failure_reason))
    assert.is_true(rec.iterations[#rec.iterations] < 40)
  end)
end)
