-- tp.models: the catalog rows, exact parameter counts, and FLOPs per token in each convention,
-- checked against HARDWARE.md §3 and published parameter counts.
local models = require('tp.models')

local IDS = { 'llama3.1-8b', 'llama3.1-70b', 'llama3.1-405b', 'llama3.2-1b', 'llama3.2-3b',
  'qwen2.5-7b', 'qwen2.5-14b', 'qwen2.5-32b', 'qwen2.5-72b' }
-- The reference trainer's model (no published config.json), last in the catalog.
local ALL_IDS = { table.unpack(IDS) }
ALL_IDS[#ALL_IDS + 1] = 'ref-tiny'

local FIELDS = { id = 'string', family = 'string', hf_name = 'string', num_layers = 'number',
  hidden_size = 'number', ffn_hidden_size = 'number', num_attention_heads = 'number',
  num_kv_heads = 'number', head_dim = 'number', vocab_size = 'number',
  max_position_embeddings = 'number', rope_theta = 'number', norm_eps = 'number',
  tie_embeddings = 'boolean', qkv_bias = 'boolean', source = 'string' }

describe('tp.models', function()
  it('lists the nine published models and ref-tiny in catalog order', function()
    assert.are.same(ALL_IDS, models.ids())
    assert.are.equal(10, #models.list())
    local tiny = assert(models.get('ref-tiny'))
    assert.are.equal(256, tiny.vocab_size)
    assert.are.equal(tiny.hidden_size, tiny.num_attention_heads * tiny.head_dim)
  end)

  it('gives every row the field names framework adapters read', function()
    for _, id in ipairs(IDS) do
      local m = assert(models.get(id))
      for field, kind in pairs(FIELDS) do
        assert.are.equal(kind, type(m[field]), id .. '.' .. field)
      end
      assert.are.equal(m.hidden_size, m.num_attention_heads * m.head_dim, id)
      assert.are.equal(0, m.num_attention_heads % m.num_kv_heads, id)
      assert.are.equal(m.family == 'qwen', m.qkv_bias, id)
      assert.truthy(m.source:find('config.json', 1, true))
    end
  end)

  it('hands out copies', function()
    local m = models.get('llama3.1-8b')
    m.num_layers = 1
    assert.are.equal(32, models.get('llama3.1-8b').num_layers)
  end)

  it('counts parameters exactly (HARDWARE.md §3.3)', function()
    local total, parts = models.params('llama3.1-8b')
    assert.are.equal(8030261248, total)
    assert.are.equal(218112000, parts.per_layer)
    assert.are.equal(525336576, parts.embedding)
    assert.are.equal(6979588096, parts.non_embedding)
    assert.are.equal(7504658432, parts.matmul)
    total, parts = models.params('qwen2.5-7b')
    assert.are.equal(7615616512, total)
    assert.are.equal(233057792, parts.per_layer)
    assert.are.equal(6525621760, parts.non_embedding)
    assert.are.equal(7070285824, parts.matmul)
    -- "total if the embeddings were tied" column
    local tied = models.get('llama3.1-8b')
    tied.tie_embeddings = true
    assert.are.equal(7504924672, models.params(tied))
    tied = models.get('qwen2.5-7b')
    tied.tie_embeddings = true
    assert.are.equal(7070619136, models.params(tied))
  end)

  it('matches the published parameter counts of every model', function()
    -- Hugging Face safetensors totals of the released checkpoints (the "safetensors.total" of
    -- each model page, as quoted in public code), which include every weight, bias and norm.
    local published = {
      ['llama3.1-8b'] = 8030261248, ['llama3.1-70b'] = 70553706496,
      ['llama3.1-405b'] = 405853388800, ['llama3.2-1b'] = 1235814400,
      ['llama3.2-3b'] = 3212749824, ['qwen2.5-7b'] = 7615616512,
      ['qwen2.5-14b'] = 14770033664, ['qwen2.5-32b'] = 32763876352,
      ['qwen2.5-72b'] = 72706203648,
    }
    for id, n in pairs(published) do
      assert.are.equal(n, (models.params(id)), id)
    end
    -- The Qwen2.5-7B model card: 7.61B parameters, 6.53B non-embedding.
    local total, parts = models.params('qwen2.5-7b')
    assert.are.equal('7.61', string.format('%.2f', math.floor(total / 1e7) / 100))
    assert.are.equal('6.53', string.format('%.2f', parts.non_embedding / 1e9))
  end)

  it('computes FLOPs per token in the Megatron and PaLM conventions (HARDWARE.md §3.3)',
    function()
      local f = models.flops_per_token
      assert.are.equal(46638563328, f('llama3.1-8b', 2048, { convention = 'megatron' }))
      assert.are.equal(46638563328, f('llama3.1-8b', 2048))
      assert.are.equal(48249176064, f('llama3.1-8b', 2048, { convention = 'palm' }))
      assert.are.equal(57912852480, f('llama3.1-8b', 8192, { convention = 'palm' }))
      assert.are.equal(51470401536, f('llama3.1-8b', 8192))
      assert.are.equal(44887965696, f('qwen2.5-7b', 2048, { convention = 'palm' }))
      assert.are.equal(43654840320, f('qwen2.5-7b', 2048))
      assert.are.equal(52286717952, f('qwen2.5-7b', 8192, { convention = 'palm' }))
      assert.are.equal(47354216448, f('qwen2.5-7b', 8192))
      assert.are.equal(6 * 6979588096, f('llama3.1-8b', 2048, { convention = '6n' }))
      assert.are.equal('integer', math.type(f('qwen2.5-72b', 4096)))
    end)

  it('reproduces volcengine/verl\'s Qwen2.5-7B FLOPs test value from the same shapes', function()
    -- verl/utils/flops_counter.py counts the embedding as a matmul and the full attention
    -- square per sequence; its test: 3 sequences of 512, 1024, 2048 tokens -> 170388331954176.
    local _, parts = models.params('qwen2.5-7b')
    local m = models.get('qwen2.5-7b')
    local dense = parts.matmul + parts.embedding
    local flops = 6 * dense * (512 + 1024 + 2048)
      + 12 * (512 ^ 2 + 1024 ^ 2 + 2048 ^ 2) * m.head_dim * m.num_attention_heads * m.num_layers
    assert.are.equal(170388331954176, math.tointeger(flops))
  end)

  it('fails for an unknown id and raises on misuse', function()
    local m, err, code = models.get('gpt-5')
    assert.is_nil(m)
    assert.are.equal('ENOENT', code)
    assert.truthy(err:find("models: unknown model 'gpt-5'", 1, true))
    assert.has_error(function()
      models.params('gpt-5')
    end)
    assert.has_error(function()
      models.flops_per_token('llama3.1-8b', 2048.5)
    end, 'tp.models.flops_per_token: seq_len must be a positive integer, got 2048.5')
    assert.has_error(function()
      models.flops_per_token('llama3.1-8b', 2048, { convention = 'kaplan' })
    end, "tp.models.flops_per_token: unknown convention 'kaplan' (megatron, palm, 6n)")
    assert.has_error(function()
      models.flops_per_token('llama3.1-8b', 2048, { conv = 'palm' })
    end, "tp.models.flops_per_token: unknown option 'conv'")
    assert.has_error(function()
      models.params({ num_layers = 2 })
    end, 'tp.models.params: model field hidden_size must be a positive integer')
    assert.has_error(function()
      models.get(8)
    end, 'tp.models.get: string expected, got number')
  end)
end)
