-- tp.frameworks: the registry, the unified-config validation, the four adapters (golden argv
-- and generated files for the flagship configs, errors for inexpressible settings) and the
-- read-back of effective values from printed argument dumps.
-- Golden files live in tests/spec/golden/<framework>/<case>.txt; TPLUA_UPDATE_GOLDEN=1
-- rewrites them.
local h = require('helper')
local fw = require('tp.frameworks')

-- Model rows as tp.models describes them; shapes from the HF config.json of
-- meta-llama/Llama-3.1-8B and Qwen/Qwen2.5-7B (HARDWARE.md 3.3). The goldens use these rows so
-- that they do not move when the catalog gains fields.
local MODELS = {
  ['llama3.1-8b'] = {
    id = 'llama3.1-8b', family = 'llama', hf_name = 'meta-llama/Llama-3.1-8B', num_layers = 32,
    hidden_size = 4096, ffn_hidden_size = 14336, num_attention_heads = 32, num_kv_heads = 8,
    head_dim = 128, vocab_size = 128256, max_position_embeddings = 131072,
    rope_theta = 500000.0, norm_eps = 1e-5, tie_embeddings = false, qkv_bias = false,
    rope_scaling = { type = 'llama3', factor = 8.0, low_freq_factor = 1.0,
                     high_freq_factor = 4.0, original_max_position_embeddings = 8192 },
  },
  ['qwen2.5-7b'] = {
    id = 'qwen2.5-7b', family = 'qwen', hf_name = 'Qwen/Qwen2.5-7B', num_layers = 28,
    hidden_size = 3584, ffn_hidden_size = 18944, num_attention_heads = 28, num_kv_heads = 4,
    head_dim = 128, vocab_size = 152064, max_position_embeddings = 131072,
    rope_theta = 1000000.0, norm_eps = 1e-6, tie_embeddings = false, qkv_bias = true,
  },
}

local function deep_copy(t)
  if type(t) ~= 'table' then
    return t
  end
  local out = {}
  for k, v in pairs(t) do
    out[k] = deep_copy(v)
  end
  return out
end

-- The flagship config of DESIGN.md ("A recipe") for one model and framework.
local function flagship(model_id, framework)
  return {
    model = deep_copy(MODELS[model_id]),
    training = { seed = 42, mbs = 2, gbs = 64, seq_len = 2048, iters = 500, lr = 3e-4,
                 min_lr = 0, warmup = 50, decay = 'cosine', weight_decay = 0.1, beta1 = 0.9,
                 beta2 = 0.95, eps = 1e-8, grad_clip = 1.0, precision = 'bf16', dataset = 'bc' },
    parallelism = { tp = 1, pp = 1, dp = 8 },
    paths = { output = '/runs/' .. model_id .. '/' .. framework },
    nodes = 1, gpus_per_node = 8,
  }
end

-- A model-parallel variant: TP 2 with sequence parallelism, PP 2, full recomputation, FP8.
local function parallel_variant(model_id, framework)
  local c = flagship(model_id, framework)
  c.parallelism = { tp = 2, pp = 2, dp = 2, sequence_parallel = true,
                    distributed_optimizer = true }
  c.training.precision = 'fp8'
  c.training.fp8_recipe = 'tensorwise'
  c.system = { recompute = 'full', fused_kernels = false }
  return c
end

-- Renders a build result (or its error) as stable text.
local function render(ok, result)
  if not ok then
    return 'error: ' .. tostring(result) .. '\n'
  end
  local out = {}
  local function line(s)
    out[#out + 1] = s
  end
  line('parser: ' .. result.parser)
  line('entry: ' .. result.entry)
  line('launcher: ' .. result.launcher)
  line('cwd: ' .. (result.cwd or '-'))
  line('argv:')
  for _, a in ipairs(result.argv) do
    line('  ' .. a)
  end
  line('env:')
  for _, k in ipairs(fw._sorted_keys(result.env)) do
    line('  ' .. k .. '=' .. result.env[k])
  end
  line('notes:')
  for _, n in ipairs(result.notes or {}) do
    line('  ' .. n)
  end
  for _, name in ipairs(fw._sorted_keys(result.files)) do
    line('file: ' .. name)
    out[#out + 1] = result.files[name]:gsub('\n$', '')
  end
  return table.concat(out, '\n') .. '\n'
end

local GOLDEN = h.source_dir .. '/tests/spec/golden'
local UPDATE = os.getenv('TPLUA_UPDATE_GOLDEN') == '1'

local function check_golden(rel, text)
  local path = GOLDEN .. '/' .. rel
  if UPDATE then
    os.execute('mkdir -p ' .. h.shquote(path:match('^(.*)/')))
    h.write(path, text)
    return
  end
  local want = h.read(path)
  assert(want, path .. ': missing golden file (run the spec with TPLUA_UPDATE_GOLDEN=1)')
  assert.are.equal(want, text)
end

local function build(framework, config)
  return pcall(fw.get(framework).build, config)
end

local function errmsg(framework, config)
  local ok, err = build(framework, config)
  assert.is_false(ok, framework .. ' accepted the config')
  return err
end

describe('tp.frameworks', function()
  describe('registry', function()
    it('lists the built-in frameworks, sorted', function()
      assert.are.same({ 'megatron', 'nemo', 'primus', 'reference', 'torchtitan' }, fw.list())
    end)

    it('returns each adapter with build, keymap and effective', function()
      for _, name in ipairs(fw.list()) do
        local a = assert(fw.get(name))
        assert.are.equal(name, a.name)
        assert.are.equal('function', type(a.build))
        assert.are.equal('function', type(a.effective))
        assert.are.equal('table', type(a.keymap))
        assert.are.equal(name == 'reference' and 'megatron' or name, a.parser)
      end
    end)

    it('returns nil, message, ENOENT for an unknown framework', function()
      local a, err, code = fw.get('deepspeed')
      assert.is_nil(a)
      assert.are.equal('ENOENT', code)
      assert.truthy(err:find("unknown framework 'deepspeed'", 1, true))
      assert.truthy(err:find('megatron, nemo, primus, reference, torchtitan', 1, true))
      assert.truthy(err:find('tp.frameworks.register', 1, true))
    end)

    it('raises on a non-string name', function()
      assert.has_error(function()
        fw.get(42)
      end, 'frameworks.get: name must be a string, got number')
    end)
  end)

  describe('golden commands', function()
    for _, framework in ipairs({ 'megatron', 'nemo', 'primus', 'torchtitan' }) do
      for _, model in ipairs({ 'llama3.1-8b', 'qwen2.5-7b' }) do
        it(framework .. ' ' .. model, function()
          check_golden(framework .. '/' .. model .. '.txt',
            render(build(framework, flagship(model, framework))))
        end)
      end
      it(framework .. ' llama3.1-8b, tp2 pp2 sp, full recompute, fp8 tensorwise', function()
        check_golden(framework .. '/llama3.1-8b-tp2-pp2-fp8.txt',
          render(build(framework, parallel_variant('llama3.1-8b', framework))))
      end)
    end

    it('is deterministic', function()
      for _, framework in ipairs(fw.list()) do
        local a = render(build(framework, flagship('llama3.1-8b', framework)))
        local b = render(build(framework, flagship('llama3.1-8b', framework)))
        assert.are.equal(a, b)
      end
    end)

    it('does not modify the config it is given', function()
      local c = flagship('qwen2.5-7b', 'megatron')
      local before = deep_copy(c)
      fw.get('megatron').build(c)
      assert.are.same(before, c)
    end)
  end)

  describe('unified config validation', function()
    local function with(patch, framework)
      local c = flagship('llama3.1-8b', framework or 'megatron')
      patch(c)
      return errmsg(framework or 'megatron', c)
    end

    it('rejects unknown keys with their path', function()
      assert.are.equal('config.training.learning_rate: unknown key', with(function(c)
        c.training.learning_rate = 1
      end))
      assert.are.equal('config.nodez: unknown key', with(function(c)
        c.nodez = 2
      end))
    end)

    it('requires the batch and schedule keys', function()
      assert.are.equal('config.training.iters: required', with(function(c)
        c.training.iters = nil
      end))
    end)

    it('checks types and enumerations', function()
      assert.are.equal('config.training.mbs: integer expected, got 1.5', with(function(c)
        c.training.mbs = 1.5
      end))
      assert.are.equal("config.training.decay: 'wsd' is not one of cosine, linear, constant",
        with(function(c)
          c.training.decay = 'wsd'
        end))
      assert.are.equal('config.training.lr: finite number expected, got nan', with(function(c)
        c.training.lr = 0 / 0
      end):gsub('%-nan', 'nan'))
    end)

    it('checks the parallel layout against the GPU count', function()
      assert.are.equal('config.parallelism: tp*pp*cp*dp = 4 but nodes*gpus_per_node = 8',
        with(function(c)
          c.parallelism.dp = 4
        end))
      assert.are.equal('config.training.gbs: 60 is not a multiple of mbs*dp = 16',
        with(function(c)
          c.training.gbs = 60
        end))
      assert.are.equal('config.parallelism.pp: 3 does not divide the 32 layers of llama3.1-8b',
        with(function(c)
          c.nodes, c.gpus_per_node = 1, 3
          c.parallelism = { pp = 3, dp = 1 }
          c.training.gbs = 6
        end))
    end)

    it('derives dp when it is left out', function()
      local c = flagship('llama3.1-8b', 'megatron')
      c.parallelism = { tp = 2 }
      local n = fw.normalize(c)
      assert.are.equal(4, n.parallelism.dp)
    end)

    it('refuses settings that mean nothing for the model', function()
      assert.are.equal(
        "config.parallelism.ep: 2 needs a mixture-of-experts model; 'llama3.1-8b' is dense",
        with(function(c)
          c.parallelism.ep = 2
        end))
      assert.are.equal('config.parallelism.sequence_parallel: needs parallelism.tp > 1 (tp = 1)',
        with(function(c)
          c.parallelism.sequence_parallel = true
        end))
      assert.are.equal('config.training.fp8_recipe: required when training.precision is fp8',
        with(function(c)
          c.training.precision = 'fp8'
        end))
      assert.are.equal('config.training.seq_len: 131080 exceeds max_position_embeddings 131072'
        .. ' of llama3.1-8b', with(function(c)
          c.training.seq_len = 131080
        end))
    end)

    it('names a missing model field', function()
      assert.are.equal('config.model: model row lacks field rope_theta', with(function(c)
        c.model.rope_theta = nil
      end))
    end)

    it('raises on a config that is not a table', function()
      assert.has_error(function()
        fw.normalize('llama')
      end, 'frameworks.normalize: config must be a table, got string')
    end)
  end)

  describe('inexpressible settings', function()
    local function with(framework, patch)
      local c = flagship('llama3.1-8b', framework)
      patch(c)
      return errmsg(framework, c)
    end

    it('megatron: CUDA graphs with full recomputation', function()
      local err = with('megatron', function(c)
        c.system = { cuda_graphs = true, recompute = 'full' }
      end)
      assert.truthy(err:find('megatron: system.cuda_graphs:', 1, true))
    end)

    it('primus: a relative output directory', function()
      assert.are.equal("primus: paths.output: 'runs/x' must be absolute (primus-cli runs from "
        .. 'paths.framework_dir)', with('primus', function(c)
          c.paths.output = 'runs/x'
        end))
    end)

    it('nemo: decay styles other than cosine, blockwise fp8, CUDA graphs, unknown models',
      function()
        assert.truthy(with('nemo', function(c)
          c.training.decay = 'linear'
        end):find("nemo: training.decay: 'linear' cannot be expressed", 1, true))
        assert.truthy(with('nemo', function(c)
          c.training.precision, c.training.fp8_recipe = 'fp8', 'blockwise'
        end):find("nemo: training.fp8_recipe: 'blockwise'", 1, true))
        assert.truthy(with('nemo', function(c)
          c.system = { cuda_graphs = true }
        end):find('nemo: system.cuda_graphs:', 1, true))
        assert.truthy(with('nemo', function(c)
          c.model.id = 'llama3.2-1b'
        end):find("nemo: model: no NeMo 2 pre-training recipe is known for 'llama3.2-1b'", 1,
          true))
      end)

    it('torchtitan: mock data, fp16, explicit init_std, constant decay, TP without SP',
      function()
        assert.truthy(with('torchtitan', function(c)
          c.training.dataset = 'mock'
        end):find("torchtitan: training.dataset: 'mock' cannot be expressed", 1, true))
        assert.truthy(with('torchtitan', function(c)
          c.training.precision = 'fp16'
        end):find("torchtitan: training.precision: 'fp16'", 1, true))
        assert.truthy(with('torchtitan', function(c)
          c.training.init_std = 0.02
        end):find('torchtitan: training.init_std: cannot be expressed', 1, true))
        assert.truthy(with('torchtitan', function(c)
          c.training.decay = 'constant'
        end):find("torchtitan: training.decay: 'constant'", 1, true))
        assert.truthy(with('torchtitan', function(c)
          c.parallelism = { tp = 2, dp = 4 }
        end):find('torchtitan: parallelism.sequence_parallel:', 1, true))
        assert.truthy(with('torchtitan', function(c)
          c.system = { attention = 'flash' }
        end):find("torchtitan: system.attention: 'flash' cannot be expressed", 1, true))
        assert.truthy(with('torchtitan', function(c)
          c.training.dataset = { path = '/data/bc_text_document' }
        end):find('is a Megatron indexed dataset', 1, true))
      end)
  end)

  describe('generated files', function()
    it('nemo driver receives only Python literals', function()
      local cmd = fw.get('nemo').build(flagship('qwen2.5-7b', 'nemo'))
      for i = 4, #cmd.argv do
        local path, value = cmd.argv[i]:match('^([%w_.]+)=(.+)$')
        assert.truthy(path, cmd.argv[i])
        -- Literals: numbers, True/False/None, quoted strings, lists of quoted strings.
        assert.truthy(value:match('^%-?[%d.e+-]+$') or value == 'True' or value == 'False'
          or value == 'None' or value:match("^'[^']*'$") or value:match("^%['[^']*'%]$"),
          cmd.argv[i])
      end
    end)

    it('primus YAML writes floats with a decimal point (YAML 1.1 reads 1e-05 as text)',
      function()
        local cmd = fw.get('primus').build(flagship('qwen2.5-7b', 'primus'))
        local yaml = cmd.files['primus_experiment.yaml']
        assert.truthy(yaml:find('\n      norm_epsilon: 1.0e-06\n', 1, true))
        assert.truthy(yaml:find('\n      adam_eps: 1.0e-08\n', 1, true))
        assert.is_nil(yaml:find('[^.%d]%de%-'))
      end)

    it('quotes YAML strings that would read as another type', function()
      local text = fw._yaml({ { 'a', 'true' }, { 'b', '1.5' }, { 'c', 'x: y' }, { 'd', '' },
                              { 'e', 'plain' }, { 'f', fw.NULL } })
      assert.are.equal('a: "true"\nb: "1.5"\nc: "x: y"\nd: ""\ne: plain\nf: null\n', text)
    end)

    it('formats numbers as Python prints them', function()
      assert.are.equal('0.0003', fw._fmt_number(3e-4))
      assert.are.equal('1e-08', fw._fmt_number(1e-8))
      assert.are.equal('1.0', fw._fmt_number(1.0))
      assert.are.equal('0.95', fw._fmt_number(0.95))
      assert.are.equal('500000', fw._fmt_number(500000))
      assert.are.equal('0.1', fw._fmt_number(0.1))
    end)
  end)

  describe('generated files read by the real parsers', function()
    -- Python's own readers, where this machine has them: tomllib (3.11+), ast, PyYAML.
    local function python(code, input)
      local dir = h.tmpdir()
      h.write(dir .. '/in', input)
      h.write(dir .. '/check.py', code)
      local ok = os.execute('python3 ' .. h.shquote(dir .. '/check.py') .. ' '
        .. h.shquote(dir .. '/in') .. ' >' .. h.shquote(dir .. '/out') .. ' 2>&1')
      return ok, h.read(dir .. '/out') or ''
    end

    local function have(module)
      return os.execute('python3 -c ' .. h.shquote('import ' .. module) .. ' >/dev/null 2>&1')
    end

    it('torchtitan TOML loads with tomllib and holds the job sections', function()
      if not have('tomllib') then
        pending('python3 with tomllib is not installed')
        return
      end
      local cmd = fw.get('torchtitan').build(parallel_variant('llama3.1-8b', 'torchtitan'))
      local ok, out = python([[
import sys, tomllib
d = tomllib.load(open(sys.argv[1], 'rb'))
assert d['model']['flavor'] == '8B', d
assert d['model']['converters'] == ['float8'], d
assert d['activation_checkpoint']['mode'] == 'full', d
assert d['job']['print_args'] is True, d
print('ok')
]], cmd.files['torchtitan.toml'])
      assert.is_true(ok, out)
    end)

    it('nemo driver compiles and its overrides are Python literals', function()
      if not have('ast') then
        pending('python3 is not installed')
        return
      end
      local cmd = fw.get('nemo').build(flagship('qwen2.5-7b', 'nemo'))
      local ok, out = python([[
import ast, sys
compile(open(sys.argv[1]).read(), 'nemo_pretrain.py', 'exec')
print('ok')
]], cmd.files['nemo_pretrain.py'])
      assert.is_true(ok, out)
      ok, out = python([[
import ast, sys
for arg in open(sys.argv[1]).read().split('\n'):
    path, sep, text = arg.partition('=')
    assert sep, arg
    ast.literal_eval(text)
print('ok')
]], table.concat(cmd.argv, '\n', 4))
      assert.is_true(ok, out)
    end)

    it('primus YAML loads with PyYAML with the intended types', function()
      if not have('yaml') then
        pending('python3 with PyYAML is not installed')
        return
      end
      local cmd = fw.get('primus').build(flagship('qwen2.5-7b', 'primus'))
      local ok, out = python([[
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
o = d['modules']['pre_trainer']['overrides']
assert isinstance(o['norm_epsilon'], float) and o['norm_epsilon'] == 1e-06, o
assert isinstance(o['adam_eps'], float) and o['adam_eps'] == 1e-08, o
assert o['lr'] == 0.0003 and o['fp8'] is None and o['add_qkv_bias'] is True, o
assert o['data_path'] == ['/data/bc/qwen2.5-7b'] and o['split'] == '100,0,0', o
assert o['rotary_base'] == 1000000, o
print('ok')
]], cmd.files['primus_experiment.yaml'])
      assert.is_true(ok, out)
    end)
  end)

  describe('effective values', function()
    -- Argument-dump lines of a real Primus/Megatron run (AMD-AGI/Primus, branch
    -- dev/tas/deepseek-v4-flash-release, deepseek-v4/develop/progress/p20/
    -- smoke_ep8_pp1_final.log; Megatron's _print_args dump, prefixes stripped).
    local DUMP = [[
  adam_beta1 ...................................... 0.9
  adam_beta2 ...................................... 0.95
  adam_eps ........................................ 1e-08
  add_bias_linear ................................. False
  add_qkv_bias .................................... False
  attention_backend ............................... auto
  bf16 ............................................ True
  clip_grad ....................................... 1.0
  context_parallel_size ........................... 1
  cuda_graph_impl ................................. none
  data_parallel_size .............................. 8
  data_path ....................................... None
  expert_model_parallel_size ...................... 8
  ffn_hidden_size ................................. 18432
  fp16 ............................................ False
  fp8 ............................................. None
  fp8_recipe ...................................... None
  global_batch_size ............................... 16
  group_query_attention ........................... False
  hidden_size ..................................... 4096
  init_method_std ................................. 0.008
  log_interval .................................... 1
  lr .............................................. 1e-05
  lr_decay_style .................................. cosine
  lr_warmup_iters ................................. 0
  micro_batch_size ................................ 1
  min_lr .......................................... 0.0
  mock_data ....................................... True
  num_attention_heads ............................. 64
  num_layers ...................................... 8
  pipeline_model_parallel_size .................... 1
  recompute_granularity ........................... full
  seed ............................................ 1234
  seq_length ...................................... 128
  sequence_parallel ............................... False
  tensor_model_parallel_size ...................... 1
  train_iters ..................................... 10
  untie_embeddings_and_output_weights ............. True
  use_distributed_optimizer ....................... True
  weight_decay .................................... 0.1
]]

    local function parse_dump(text)
      local args = {}
      for name, value in text:gmatch('%s*([%w_]+) %.* ?([^\n]*)\n') do
        args[name] = value
      end
      return args
    end

    it('megatron reads a real argument dump', function()
      local eff = fw.get('megatron').effective(parse_dump(DUMP))
      assert.are.equal(1e-05, eff.training.lr)
      assert.are.equal(0.0, eff.training.min_lr)
      assert.are.equal(16, eff.training.gbs)
      assert.are.equal(1, eff.training.mbs)
      assert.are.equal(128, eff.training.seq_len)
      assert.are.equal(10, eff.training.iters)
      assert.are.equal('cosine', eff.training.decay)
      assert.are.equal('bf16', eff.training.precision)
      assert.is_nil(eff.training.fp8_recipe)
      assert.are.equal('mock', eff.training.dataset)
      assert.are.equal(1e-08, eff.training.eps)
      assert.are.equal(8, eff.parallelism.dp)
      assert.are.equal(8, eff.parallelism.ep)
      assert.is_true(eff.parallelism.distributed_optimizer)
      assert.is_false(eff.parallelism.sequence_parallel)
      assert.are.equal('full', eff.system.recompute)
      assert.are.equal('auto', eff.system.attention)
      assert.is_false(eff.system.cuda_graphs)
      -- No GQA: every head has its own KV head.
      assert.are.equal(64, eff.model.num_kv_heads)
      assert.is_false(eff.model.tie_embeddings)
    end)

    it('primus reads its own dump format values (null, quoted)', function()
      local eff = fw.get('primus').effective({ fp8 = 'null', bf16 = 'True',
        attention_backend = 'AttnBackend.flash', recompute_granularity = 'None',
        lr = '0.0003', data_path = "['/data/bc/llama3.1-8b']", mock_data = 'False' })
      assert.are.equal('bf16', eff.training.precision)
      assert.are.equal('flash', eff.system.attention)
      assert.are.equal('none', eff.system.recompute)
      assert.are.equal(3e-4, eff.training.lr)
      assert.are.equal('/data/bc/llama3.1-8b', eff.training.dataset)
    end)

    it('leaves out keys whose arguments were not printed', function()
      assert.are.same({}, fw.get('megatron').effective({ unrelated = '1' }))
    end)

    it('raises when args is not a table', function()
      assert.has_error(function()
        fw.get('torchtitan').effective('lr=1')
      end)
    end)

    -- Python's str() of a value Megatron stores from an argument.
    local function pystr(v)
      if v == fw.NULL or v == nil then
        return 'None'
      elseif type(v) == 'boolean' then
        return v and 'True' or 'False'
      elseif type(v) == 'number' then
        return fw._fmt_number(v)
      elseif type(v) == 'table' then
        local items = {}
        for i, x in ipairs(v) do
          items[i] = "'" .. x .. "'"
        end
        return '[' .. table.concat(items, ', ') .. ']'
      end
      return tostring(v)
    end

    -- Every unified key an adapter maps must read back as the value it was built from.
    local function expect_roundtrip(framework, eff, c)
      local checked = 0
      for _, entry in ipairs(fw.get(framework).keymap) do
        local section, key = entry.key:match('^(%w+)%.([%w_]+)$')
        local want = c[section][key]
        if key == 'dataset' then
          want = c.data.kind == 'mock' and 'mock' or c.data.path
          if framework == 'torchtitan' then
            want = c.data.name
          end
        elseif key == 'tokenizer' and framework == 'torchtitan' then
          want = '/data/tokenizers/' .. c.model.hf_name
        elseif key == 'tokenizer' then
          want = c.data.tokenizer
        elseif section == 'model' then
          want = c.model[key]
        end
        local got = eff[section] and eff[section][key]
        if want ~= nil and got ~= nil then
          checked = checked + 1
          if type(want) == 'number' then
            assert.is_true(math.abs(got - want) <= 1e-12 * math.max(1, math.abs(want)),
              entry.key .. ': ' .. tostring(got) .. ' ~= ' .. tostring(want))
          else
            assert.are.equal(want, got, entry.key)
          end
        end
        if want ~= nil then
          assert.is_not_nil(got, framework .. ': ' .. entry.key .. ' did not read back')
        else
          assert.is_nil(got, framework .. ': ' .. entry.key .. ' read back a value never set')
        end
      end
      return checked
    end

    it('megatron and primus read back every mapped key from what they were built with',
      function()
        local megatron = require('tp.frameworks.megatron')
        for _, framework in ipairs({ 'megatron', 'primus' }) do
          for _, make in ipairs({ flagship, parallel_variant }) do
            local c = fw.normalize(make('llama3.1-8b', framework))
            local args = { data_parallel_size = tostring(c.parallelism.dp),
                           expert_model_parallel_size = '1', fp8 = 'None', fp16 = 'False',
                           recompute_granularity = 'None', cuda_graph_impl = 'none',
                           masked_softmax_fusion = 'True', bias_swiglu_fusion = 'True',
                           bias_dropout_fusion = 'True', apply_rope_fusion = 'True',
                           mock_data = 'False', sequence_parallel = 'False',
                           group_query_attention = 'False', add_qkv_bias = 'False',
                           untie_embeddings_and_output_weights = 'False',
                           use_distributed_optimizer = 'False' }
            for _, e in ipairs(megatron._settings(c, framework)) do
              args[e.dest] = pystr(e.value)
            end
            local n = expect_roundtrip(framework, megatron.effective(args), c)
            assert.is_true(n >= 40, framework .. ' checked ' .. n)
          end
        end
      end)

    it('nemo reads back every mapped key from its driver dump', function()
      for _, model in ipairs({ 'llama3.1-8b', 'qwen2.5-7b' }) do
        local c = fw.normalize(flagship(model, 'nemo'))
        local cmd = fw.get('nemo').build(flagship(model, 'nemo'))
        local args = {}
        for i = 4, #cmd.argv do
          local path, value = cmd.argv[i]:match('^([%w_.]+)=(.+)$')
          -- str() of the literal: strings lose their quotes.
          args[path] = value:match("^'(.*)'$") or value
        end
        local n = expect_roundtrip('nemo', fw.get('nemo').effective(args), c)
        assert.is_true(n >= 35, 'nemo checked ' .. n)
      end
    end)

    it('torchtitan reads back every mapped key from its job config', function()
      for _, make in ipairs({ flagship, function(m, f)
        local c = parallel_variant(m, f)
        c.system.fused_kernels = true
        return c
      end }) do
        local c = fw.normalize(make('llama3.1-8b', 'torchtitan'))
        local cmd = fw.get('torchtitan').build(make('llama3.1-8b', 'torchtitan'))
        local args = {}
        local section
        for line in cmd.files['torchtitan.toml']:gmatch('[^\n]+') do
          section = line:match('^%[([%w_]+)%]$') or section
          local k, v = line:match('^([%w_]+) = (.*)$')
          if k then
            args[section .. '.' .. k] = v
          end
        end
        for i = 6, #cmd.argv, 2 do
          args[cmd.argv[i]:sub(3)] = cmd.argv[i + 1]
        end
        args['parallelism.expert_parallel_degree'] = '1'
        local n = expect_roundtrip('torchtitan', fw.get('torchtitan').effective(args), c)
        assert.is_true(n >= 20, 'torchtitan checked ' .. n)
      end
    end)
  end)

  describe('tp.models', function()
    it('agrees with the rows the goldens use', function()
      local ok, models = pcall(require, 'tp.models')
      if not ok then
        pending('tp.models is not in this tree yet')
        return
      end
      for id, row in pairs(MODELS) do
        local got = assert(models.get(id), id)
        for _, field in ipairs({ 'num_layers', 'hidden_size', 'ffn_hidden_size',
                                 'num_attention_heads', 'num_kv_heads', 'head_dim', 'vocab_size',
                                 'rope_theta', 'norm_eps', 'tie_embeddings', 'qkv_bias' }) do
          assert.are.equal(row[field], got[field], id .. '.' .. field)
        end
      end
    end)

    it('builds from a model id through tp.models', function()
      local ok = pcall(require, 'tp.models')
      if not ok then
        pending('tp.models is not in this tree yet')
        return
      end
      local c = flagship('llama3.1-8b', 'megatron')
      c.model = 'llama3.1-8b'
      local cmd = fw.get('megatron').build(c)
      assert.truthy(table.concat(cmd.argv, ' '):find('--num-layers 32', 1, true))
    end)
  end)
end)
