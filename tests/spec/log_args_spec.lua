-- tp.log argument dumps of NeMo 2 and torchtitan runs: the NeMo driver's `_print_args`-layout
-- dump with dotted recipe paths, torchtitan's "Running with args: {...}" job config flattened to
-- dotted names, both read back by the adapters' effective(); tplua extract's record `args`; the
-- fairness audit on two runs that differ in lr; hostile and truncated job configs.
local h = require('helper')
local tplog = require('tp.log')
local fw = require('tp.frameworks')
local json = require('tp.json')

local NEMO = h.fixture('logs/synthetic/nemo2_driver_dump_llama31_8b.log')
local TITAN = h.fixture('logs/synthetic/torchtitan_print_args_llama31_8b.log')

local PREFIX = '[rank0]:[titan] 2025-10-15 10:36:40,200 - root - INFO - '
local STEP = '[rank0]:[titan] 2025-10-15 10:36:51,000 - root - INFO - step:  1  loss: 11.8465'
  .. '  grad_norm:  4.4253  memory: 33.21GiB(34.95%)  tps: 5,615  tflops: 325.20  mfu: 32.88%\n'

local function parse_text(text)
  return assert(tplog.parse(text, { is_string = true }))
end

-- A torchtitan log whose job config line is `config` (text after "Running with args: ").
local function titan_log(config)
  return parse_text(PREFIX .. 'Running with args: ' .. config .. '\n' .. STEP)
end

local function count(t)
  local n = 0
  for _ in pairs(t) do
    n = n + 1
  end
  return n
end

-- The unified values both fixtures were generated from (generate.py, CONFIG).
local function expect_unified(eff)
  assert.are.equal(3e-4, eff.training.lr)
  assert.are.equal(2048, eff.training.seq_len)
  assert.are.equal(64, eff.training.gbs)
  assert.are.equal(2, eff.training.mbs)
  assert.are.equal(42, eff.training.seed)
  assert.are.equal(500, eff.training.iters)
  assert.are.equal(50, eff.training.warmup)
  assert.are.equal('bf16', eff.training.precision)
  assert.are.equal(2, eff.parallelism.tp)
  assert.are.equal(1, eff.parallelism.pp)
  assert.are.equal(4, eff.parallelism.dp)
  assert.are.equal(1, eff.parallelism.cp)
end

describe('NeMo driver dump (dotted names in the _print_args layout)', function()
  it('fills log.args with the recipe paths the driver printed', function()
    local log = assert(tplog.parse(NEMO))
    assert.are.equal('nemo', log.format)
    assert.are.equal(5, #log.records)
    assert.are.equal(54, count(log.args))
    assert.are.equal('0.0003', log.args['optim.config.lr'])
    assert.are.equal('2048', log.args['data.seq_length'])
    assert.are.equal('bf16_mixed', log.args['trainer.plugins'])
    assert.are.equal('/runs/llama3.1-8b/nemo', log.args['recipe.dir'])
    assert.are.equal('None', log.args['model.config.recompute_granularity'])
    -- 48 characters: no dots, two spaces (print_arguments: '.' * (48 - len(name))).
    assert.are.equal('False', log.args['model.config.share_embeddings_and_output_weights'])
    assert.are.equal('42', log.args.seed)
    assert.same({}, log.args_primus)
  end)

  it('reads back the unified config through the nemo adapter', function()
    local log = assert(tplog.parse(NEMO))
    local eff = fw.get('nemo').effective(log.args)
    expect_unified(eff)
    assert.are.equal(3e-5, eff.training.min_lr)
    assert.are.equal(4096, eff.model.hidden_size)
    assert.is_false(eff.model.tie_embeddings)
    assert.is_true(eff.parallelism.sequence_parallel)
  end)

  it('states the run facts the dump gives', function()
    local meta = assert(tplog.parse(NEMO)).meta
    assert.are.equal(2048, meta.seq_len)
    assert.are.equal(3e-4, meta.lr)
    assert.are.equal(42, meta.seed)
    assert.are.equal(2, meta.tp)
    assert.are.equal(8, meta.world_size)
    assert.are.equal(2, meta.micro_batch_size)
    assert.are.equal(500, meta.train_iters)
    assert.are.equal('bf16', meta.precision)
  end)

  it('keeps Megatron dumps as they were: identifiers, and dotted names only in the layout',
    function()
      local log = parse_text(table.concat({
        '------------------------ arguments ------------------------',
        '  lr .............................................. 0.0003',
        '  seq_length ...................................... 4096',
        '  data_path ....................................... None',
        '  a_name_of_forty_eight_characters_exactly_abcdefg  True',
        '  torch.distributed timed out',
        '  e.g. something',
        '  .hidden ........ 1',
        '  a..b ........... 1',
        '  trainer.max_steps ............................... 10',
        '-------------------- end of arguments ---------------------',
        ' iteration        1/      10 | consumed samples:          128 | elapsed time per '
          .. 'iteration (ms): 1000.0 | learning rate: 3.000000E-04 | global batch size:   128 |'
          .. ' lm loss: 1.100000E+01 |',
      }, '\n') .. '\n')
      assert.are.equal('megatron', log.format)
      assert.same({
        lr = '0.0003', seq_length = '4096', data_path = 'None',
        a_name_of_forty_eight_characters_exactly_abcdefg = 'True',
        ['trainer.max_steps'] = '10',
      }, log.args)
      assert.are.equal(4096, log.meta.seq_len)
    end)

  it("keeps Megatron's own `iteration` argument and the arguments after it", function()
    -- _print_args lists `iteration` (0 at the start of a run) among the others; it reads like a
    -- record line, so only the exact layout makes it an argument.
    local log = parse_text(table.concat({
      '------------------------ arguments ------------------------',
      '  hidden_size ..................................... 4096',
      '  iteration ....................................... 0',
      '  seq_length ...................................... 2048',
      '  lr .............................................. 0.0003',
      ' iteration        1/      10 | consumed samples:          128 | elapsed time per '
        .. 'iteration (ms): 1000.0 | learning rate: 3.000000E-04 | global batch size:   128 |'
        .. ' lm loss: 1.100000E+01 |',
      ' iteration        2/      10 | consumed samples:          256 | elapsed time per '
        .. 'iteration (ms): 1000.0 | learning rate: 3.000000E-04 | global batch size:   128 |'
        .. ' lm loss: 1.000000E+01 |',
    }, '\n') .. '\n')
    assert.same({ hidden_size = '4096', iteration = '0', seq_length = '2048', lr = '0.0003' },
      log.args)
    assert.are.equal(2, #log.records)
    assert.are.equal(2048, log.meta.seq_len)
  end)
end)

describe('torchtitan job config (Running with args)', function()
  it('flattens the printed dict to dotted names in log.args', function()
    local log = assert(tplog.parse(TITAN))
    assert.are.equal('torchtitan', log.format)
    assert.are.equal(5, #log.records)
    assert.are.equal('0.0003', log.args['optimizer.lr'])
    assert.are.equal('1e-08', log.args['optimizer.eps'])
    assert.are.equal('2048', log.args['training.seq_len'])
    assert.are.equal('4', log.args['parallelism.data_parallel_shard_degree'])
    assert.are.equal('None', log.args['job.config_file'])
    assert.are.equal('True', log.args['job.print_args'])
    assert.are.equal('llama3.1-8b (tplua)', log.args['job.description'])
    assert.are.equal('[]', log.args['model.converters'])
    assert.are.equal("['output']", log.args['float8.filter_fqns'])
    assert.are.equal('bfloat16', log.args['training.mixed_precision_param'])
    assert.is_nil(log:diagnostic('bad_args'))
  end)

  it('reads back the unified config through the torchtitan adapter', function()
    local log = assert(tplog.parse(TITAN))
    local eff = fw.get('torchtitan').effective(log.args)
    expect_unified(eff)
    assert.are.equal('cosine', eff.training.decay)
    assert.is_true(math.abs(eff.training.min_lr - 3e-5) < 1e-15)
    assert.are.equal('c4', eff.training.dataset)
    assert.is_true(eff.parallelism.distributed_optimizer)
  end)

  it('states the run facts the job config gives', function()
    local log = titan_log("{'training': {'seq_len': 4096, 'global_batch_size': -1, 'steps': 7, "
      .. "'seed': None, 'mixed_precision_param': 'float32'}, 'optimizer': {'lr': 3e-4}, "
      .. "'parallelism': {'data_parallel_shard_degree': -1, 'tensor_parallel_degree': 2}}")
    assert.are.equal(4096, log.meta.seq_len)
    assert.are.equal(7, log.meta.train_iters)
    assert.are.equal(3e-4, log.meta.lr)
    assert.are.equal(2, log.meta.tp)
    assert.are.equal('fp32', log.meta.precision)
    -- -1 means "derived" and None "unset": no fact.
    assert.is_nil(log.meta.global_batch_size)
    assert.is_nil(log.meta.dp)
    assert.is_nil(log.meta.seed)
    local fp8 = titan_log("{'model': {'converters': ['float8']}, "
      .. "'training': {'mixed_precision_param': 'bfloat16'}}")
    assert.are.equal('fp8', fp8.meta.precision)
  end)

  it('reads JSON: double quotes, true/false/null, escapes, surrogate pairs', function()
    local log = titan_log('{"job": {"description": "say \\"hi\\" \\\\ caf\\u00e9 \\ud83d\\ude00",'
      .. ' "print_args": true, "config_file": null}, "optimizer": {"lr": 3e-4, "eps": 1e-08},'
      .. ' "training": {"compile": false, "dataset_path": "/data/c4\\/x"},'
      .. ' "model": {"converters": ["float8", "mx"]}}')
    assert.are.equal('say "hi" \\ caf\u{e9} \u{1f600}', log.args['job.description'])
    assert.are.equal('True', log.args['job.print_args'])
    assert.are.equal('None', log.args['job.config_file'])
    assert.are.equal('False', log.args['training.compile'])
    assert.are.equal('3e-4', log.args['optimizer.lr'])
    assert.are.equal('/data/c4/x', log.args['training.dataset_path'])
    assert.are.equal('["float8", "mx"]', log.args['model.converters'])
    local eff = fw.get('torchtitan').effective(log.args)
    assert.are.equal(3e-4, eff.training.lr)
    assert.are.equal('fp8', eff.training.precision)
  end)

  it('reads Python reprs: quotes, escapes, tuples, nesting, inf, empty dicts, reprs', function()
    local log = titan_log("{'job': {'description': \"it's a \\\"test\\\"\", 'path': 'a\\\\b',"
      .. " 'tab': 'x\\ty', 'nul': '\\x00', 'odd': '\\q', 'hex': '\\xe9\\u20ac'},"
      .. " 'a': {'b': {'c': {'d': 1.5}}, 'e': {}, 't': (1, 'x,y', [2, 3]), 'inf': inf,"
      .. " 'p': PosixPath('/x, y'), 1: 'int key', 'k': <Kind.AUTO: 'a, b'>},"
      .. " 'training': {'seq_len': 8192,},}")
    assert.are.equal("it's a \"test\"", log.args['job.description'])
    assert.are.equal('a\\b', log.args['job.path'])
    -- Control characters keep their escape text (values stay on one line, without NUL).
    assert.are.equal('x\\ty', log.args['job.tab'])
    assert.are.equal('\\x00', log.args['job.nul'])
    assert.are.equal('\\q', log.args['job.odd'])
    assert.are.equal('\u{e9}\u{20ac}', log.args['job.hex'])
    assert.are.equal('1.5', log.args['a.b.c.d'])
    assert.are.equal('{}', log.args['a.e'])
    assert.are.equal("(1, 'x,y', [2, 3])", log.args['a.t'])
    assert.are.equal('inf', log.args['a.inf'])
    assert.are.equal("PosixPath('/x, y')", log.args['a.p'])
    assert.are.equal('int key', log.args['a.1'])
    assert.are.equal("<Kind.AUTO: 'a, b'>", log.args['a.k'])
    assert.are.equal('8192', log.args['training.seq_len'])
    assert.is_nil(log:diagnostic('bad_args'))
  end)

  it('gives the same args whatever the chunking (stream) and after launcher prefixes', function()
    local text = h.read(TITAN)
    local whole = assert(tplog.parse(TITAN))
    local s <close> = tplog.stream()
    for i = 1, #text, 97 do
      assert(s:feed(text:sub(i, i + 96)))
    end
    local streamed = assert(s:finish())
    assert.same(whole.args, streamed.args)
    local srun = parse_text((text:gsub('([^\n]+)', '  3: %1')))
    assert.same(whole.args, srun.args)
  end)

  it('takes the last of two different configs (a second run in the same log)', function()
    local log = parse_text(PREFIX .. "Running with args: {'optimizer': {'lr': 0.001}, "
      .. "'training': {'seed': 1}}\n" .. STEP .. PREFIX
      .. "Running with args: {'optimizer': {'lr': 0.0002}}\n" .. STEP)
    assert.are.equal('0.0002', log.args['optimizer.lr'])
    assert.are.equal('1', log.args['training.seed'])
  end)

  it('ignores "Running with args:" that is not a dict', function()
    local log = parse_text(PREFIX .. 'Running with args: Namespace(lr=0.1)\n' .. STEP)
    assert.same({}, log.args)
    assert.is_nil(log:diagnostic('bad_args'))
  end)

  describe('bad input', function()
    local function bad(config, where)
      local log = titan_log(config)
      local d = assert(log:diagnostic('bad_args'), 'no bad_args diagnostic for ' .. config)
      assert.are.equal('warning', d.severity)
      assert.are.equal(1, d.line)
      assert.is_truthy(d.message:find('torchtitan job config ("Running with args") unreadable '
        .. 'at line 1, column ', 1, true), d.message)
      assert.is_truthy(d.message:find(where, 1, true), d.message)
      assert.are.equal(1, #log.records)  -- the rest of the log is still read
      return log, d
    end

    it('says where a truncated config stops and keeps the values read before', function()
      local log, d = bad("{'optimizer': {'lr': 0.0003, 'eps': 1e-08}, 'training': {'dataset': 'c4",
        'unterminated string')
      assert.is_truthy(d.message:find('(2 values kept)', 1, true), d.message)
      assert.is_truthy(d.message:find("'dataset': 'c4", 1, true), d.message)
      assert.are.equal('0.0003', log.args['optimizer.lr'])
      assert.is_nil(log.args['training.dataset'])
      bad("{'optimizer': {'lr': 0.0003", 'unterminated dict')
      bad("{'a': [1, 2", 'unterminated list or tuple')
      bad("{'a': 'x\\u12'}", 'bad escape in a string')
    end)

    it('names malformed structure', function()
      bad("{'a' 1}", "':' was expected after a key")
      bad("{'a': 1 'b': 2}", "',' or '}' was expected")
      bad("{'a': [1, 2)}", 'mismatched bracket')
      bad("{'a': }", 'a value was expected')
      bad('{: 1}', 'a key was expected')
      bad(string.rep('{"a": ', 100) .. '1' .. string.rep('}', 100), 'nested too deep')
      bad("{'a': " .. string.rep('[', 100) .. string.rep(']', 100) .. '}', 'nested too deep')
    end)

    it('survives binary garbage and a cut last line', function()
      local garbage = {}
      for i = 0, 255 do
        garbage[#garbage + 1] = string.char((i * 37 + 11) % 256)
      end
      local log = titan_log('{' .. table.concat(garbage):gsub('[\n\r]', ''))
      assert.is_not_nil(log:diagnostic('bad_args'))
      local cut = parse_text(STEP .. PREFIX .. "Running with args: {'optimizer': {'lr': 0.1")
      local d = assert(cut:diagnostic('bad_args'))
      assert.is_truthy(d.message:find('(the log ends inside the line)', 1, true), d.message)
      assert.are.equal(2, d.line)
    end)

    it('keeps memory bounded: dumps past 16 MiB are dropped with a diagnostic', function()
      -- 22 different configs of about 0.9 MB each (lines up to tp.log.max_line are read).
      local entries = {}
      for i = 1, 40000 do
        entries[i] = string.format("'key_number_%05d': 1", i)
      end
      local body = table.concat(entries, ', ')
      assert.is_true(#body < tplog.max_line)
      local lines = {}
      for r = 1, 22 do
        lines[r] = PREFIX .. "Running with args: {'run" .. r .. "': {" .. body .. '}}'
      end
      local log = parse_text(table.concat(lines, '\n') .. '\n' .. STEP)
      local d = assert(log:diagnostic('bad_args'))
      assert.is_truthy(d.message:find('argument dumps exceed 16 MiB', 1, true), d.message)
      assert.are.equal('1', log.args['run1.key_number_00001'])
      assert.is_nil(log.args['run22.key_number_40000'])
      assert.are.equal(1, #log.records)
    end)
  end)
end)

describe('tplua extract --json', function()
  local function extract(log, extra)
    local out = h.tmpdir() .. '/run.json'
    local args = { 'extract', log, '--json', out, '--quiet' }
    for _, a in ipairs(extra or {}) do
      args[#args + 1] = a
    end
    local r = h.run(args)
    assert.are.equal(0, r.code, r.stderr)
    return assert(json.decode(assert(h.read(out))))
  end

  it('writes the NeMo driver dump into the record args', function()
    local rec = extract(NEMO)
    assert.are.equal('nemo', rec.framework)
    assert.are.equal('0.0003', rec.args['optim.config.lr'])
    assert.are.equal('2', rec.args['trainer.strategy.tensor_model_parallel_size'])
    expect_unified(fw.get('nemo').effective(rec.args))
  end)

  it('writes the flattened torchtitan job config into the record args', function()
    local rec = extract(TITAN)
    assert.are.equal('torchtitan', rec.framework)
    assert.are.equal('0.0003', rec.args['optimizer.lr'])
    assert.are.equal('True', rec.args['job.print_args'])
    expect_unified(fw.get('torchtitan').effective(rec.args))
  end)
end)

describe('fairness audit on the read-back args', function()
  local audit = require('tp.audit')
  local results = require('tp.results')

  local function audit_pair(path, framework, from, to)
    local dir = h.tmpdir()
    local other = dir .. '/other.log'
    local text = h.read(path)
    local changed, n = text:gsub(from, to)
    assert.is_true(n >= 1)
    h.write(other, changed)
    for _, run in ipairs({ { path, 'nvd', 'nvd-' .. framework }, { other, 'amd', 'amd-'
      .. framework } }) do
      local r = h.run({ 'extract', run[1], '--json', dir .. '/' .. run[3] .. '.json', '--quiet',
        '--platform', run[2], '--framework', framework, '--run-id', run[3] })
      assert.are.equal(0, r.code, r.stderr)
    end
    return audit.compare(assert(results.load(dir)))
  end

  local function lr_finding(a)
    for _, f in ipairs(a.findings) do
      if f.kind == 'config_differs' and f.key == 'training.lr' then
        return f
      end
    end
  end

  it('flags two torchtitan runs whose printed lr differs', function()
    local a = audit_pair(TITAN, 'torchtitan', "'lr': 0%.0003", "'lr': 0.0001")
    local f = assert(lr_finding(a), 'no training.lr finding')
    assert.are.equal('error', f.severity)
    assert.is_truthy(f.message:find('torchtitan args optimizer.lr=0.0001', 1, true), f.message)
    assert.are.equal(3e-4, a.effective['nvd-torchtitan']['training.lr'])
  end)

  it('flags two NeMo runs whose printed lr differs', function()
    local a = audit_pair(NEMO, 'nemo', 'optim%.config%.lr (%.+) 0%.0003',
      'optim.config.lr %1 0.001')
    local f = assert(lr_finding(a), 'no training.lr finding')
    assert.are.equal('error', f.severity)
    assert.is_truthy(f.message:find('nemo args optim.config.lr=0.001', 1, true), f.message)
  end)

  it('finds no lr difference between two copies of one log', function()
    assert.is_nil(lr_finding(audit_pair(TITAN, 'torchtitan', 'Starting job', 'Starting job')))
  end)
end)
