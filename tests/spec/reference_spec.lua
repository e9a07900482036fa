-- The open adapter registry (tp.frameworks.register, adapters found on package.path) and the
-- reference trainer's adapter: its argv, what it refuses, and the reading back of the arguments
-- the trainer prints.
local h = require('helper')
local fw = require('tp.frameworks')
local ref = require('tp.frameworks.reference')

local function arg_after(argv, flag)
  for i, a in ipairs(argv) do
    if a == flag then
      return argv[i + 1]
    end
  end
end

local function has(argv, flag)
  for _, a in ipairs(argv) do
    if a == flag then
      return true
    end
  end
  return false
end

describe('tp.frameworks registry', function()
  after_each(function()
    fw.unregister('mytrainer')
    fw.unregister('fromdisk')
  end)

  it('adds an adapter a recipe defines, and lists it', function()
    local adapter = fw.register('mytrainer', {
      parser = 'megatron',
      build = function(config)
        local c = fw.normalize(config)
        return { argv = { 'train', '--lr', tostring(c.training.lr) }, env = {},
          parser = 'megatron' }
      end,
    })
    assert.are.equal('mytrainer', adapter.name)
    assert.are.equal(adapter, fw.get('mytrainer'))
    assert.truthy(table.concat(fw.list(), ','):find('mytrainer', 1, true))
    -- A recipe can name it like a built-in framework.
    local e = require('tp.experiment').new({ name = 'own', model = 'ref-tiny',
      platforms = { nvd = { framework = 'mytrainer' } }, gpus_per_node = 1,
      training = { mbs = 1, gbs = 1, seq_len = 64, iters = 2, lr = 1e-3 }, results = '/tmp/own' })
    local p = e:plan({ launcher = 'local' })
    assert.is_true(p.ok)
    assert.are.same({ 'train', '--lr', '0.001' }, p.runs[1].argv)
  end)

  it('finds an adapter module tp.frameworks.<name> on package.path', function()
    local dir = h.tmpdir()
    assert(os.execute('mkdir -p ' .. h.shquote(dir .. '/tp/frameworks')))
    h.write(dir .. '/tp/frameworks/fromdisk.lua', [[
return { name = 'fromdisk', parser = 'torchtitan',
  build = function() return { argv = { 'x' }, env = {}, parser = 'torchtitan' } end }
]])
    local saved = package.path
    package.path = dir .. '/?.lua;' .. package.path
    local a, err = fw.get('fromdisk')
    package.path = saved
    assert.is_table(a, err)
    assert.are.equal('torchtitan', a.parser)
  end)

  it('refuses to replace a built-in adapter and checks the shape', function()
    assert.has_error(function()
      fw.register('megatron', { parser = 'megatron', build = function() end })
    end, "frameworks.register: 'megatron' is a built-in adapter and cannot be replaced")
    assert.has_error(function()
      fw.register('mytrainer', { parser = 'megatron' })
    end, "frameworks: adapter 'mytrainer' needs build (a function), got nil")
    assert.has_error(function()
      fw.register('my trainer', { parser = 'megatron', build = function() end })
    end)
  end)
end)

describe('tp.frameworks.reference', function()
  local config = ref.smoke_config(2)

  it('builds the trainer argv from the unified config', function()
    local cmd = ref.build(config)
    assert.truthy(cmd.argv[2]:find('/tools/reftrain/reftrain.py$'))
    assert.are.equal(h.source_dir .. '/tools/reftrain/reftrain.py',
      cmd.argv[2]:gsub('^.*/tools/', h.source_dir .. '/tools/'))
    assert.are.equal('64', arg_after(cmd.argv, '--hidden-size'))
    assert.are.equal('8', arg_after(cmd.argv, '--global-batch-size'))
    assert.are.equal('0.003', arg_after(cmd.argv, '--lr'))
    assert.are.equal('repeat', arg_after(cmd.argv, '--synthetic-kind'))
    assert.is_true(has(cmd.argv, '--bf16'))
    assert.are.equal('megatron', cmd.parser)
    assert.is_true(cmd.env_init)
    assert.are.same({}, cmd.notes)
  end)

  it('uses mock-random for uniform tokens and the interpreter TPLUA_PYTHON would name', function()
    local c = ref.smoke_config(1)
    c.training.dataset = 'mock-random'
    assert.are.equal('random', arg_after(ref.build(c).argv, '--synthetic-kind'))
    assert.truthy(ref.python():find('python3', 1, true))
  end)

  it('reads a Megatron indexed dataset by path or by name', function()
    local c = ref.smoke_config(1)
    c.training.dataset = { path = '/data/gpl_text_document' }
    local argv = ref.build(c).argv
    assert.are.equal('/data/gpl_text_document', arg_after(argv, '--data-path'))
    assert.is_false(has(argv, '--mock-data'))
    c.training.dataset = 'licenses'
    c.paths = { data = '/d' }
    assert.are.equal('/d/licenses/ref-tiny', arg_after(ref.build(c).argv, '--data-path'))
  end)

  it('refuses what the reference trainer cannot honour, naming the key', function()
    for _, case in ipairs({
      { function(c) c.parallelism = { tp = 2 }; c.gpus_per_node = 2 end, 'parallelism.tp = 2' },
      { function(c) c.model = 'qwen2.5-7b' end, 'model.qkv_bias' },
      { function(c) c.model = 'llama3.1-8b'; c.training.seq_len = 64 end, 'model.rope_scaling' },
    }) do
      local c = ref.smoke_config(1)
      c.parallelism = nil
      case[1](c)
      local ok, err = pcall(ref.build, c)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(case[2], 1, true), tostring(err))
    end
  end)

  it('reads the unified config back from the arguments the trainer prints', function()
    local args = { lr = '0.003', micro_batch_size = '4', global_batch_size = '8',
      seq_length = '64', train_iters = '40', hidden_size = '64', num_layers = '2', bf16 = 'True',
      fp16 = 'False', tensor_model_parallel_size = '1', data_parallel_size = '2',
      use_distributed_optimizer = 'True' }
    local eff = ref.effective(args)
    assert.are.equal(0.003, eff.training.lr)
    assert.are.equal(8, eff.training.gbs)
    assert.are.equal('bf16', eff.training.precision)
    assert.are.equal(2, eff.parallelism.dp)
    -- Keys the trainer has no notion of are not read back.
    assert.is_nil(eff.parallelism.distributed_optimizer)
  end)
end)
