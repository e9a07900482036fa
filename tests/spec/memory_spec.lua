-- tp.memory: the per-GPU memory estimate (weights, gradients, optimizer, activations, logits).
local memory = require('tp.memory')
local models = require('tp.models')

local GIB = memory.GIB

local function llama(over)
  local t = { model = 'llama3.1-8b', mbs = 2, seq_len = 2048, gbs = 64, dp = 8 }
  for k, v in pairs(over or {}) do
    t[k] = v
  end
  return t
end

describe('tp.memory.estimate', function()
  it('counts 18 bytes per parameter without the distributed optimizer', function()
    local e = memory.estimate(llama({ distributed_optimizer = false }))
    local total = models.params('llama3.1-8b')
    assert.are.equal(total, e.params_shard)
    assert.are.equal(2 * total, e.bytes.weights)
    assert.are.equal(4 * total, e.bytes.gradients)
    assert.are.equal(12 * total, e.bytes.optimizer)
  end)

  it('shards the optimizer states over dp x cp with the distributed optimizer', function()
    local e = memory.estimate(llama())
    local total = models.params('llama3.1-8b')
    assert.are.equal(12 / 8, e.bytes_per_param.optimizer)
    assert.is_true(math.abs(e.bytes.optimizer - 1.5 * total) < 1)
    local e2 = memory.estimate(llama({ dp = 4, cp = 2 }))
    assert.is_true(math.abs(e2.bytes.optimizer - 1.5 * total) < 1)
  end)

  it('puts embedding and output layer on the shard as Megatron does', function()
    local _, parts = models.params('llama3.1-8b')
    local e = memory.estimate(llama({ tp = 2, dp = 4 }))
    assert.is_true(math.abs(e.params_shard
      - (parts.non_embedding + parts.embedding + parts.lm_head) / 2) < 1)
    -- With pipelining the first stage holds block / pp and the embedding only.
    local p = memory.estimate(llama({ pp = 2, dp = 4 }))
    assert.is_true(math.abs(p.params_shard - (parts.non_embedding / 2 + parts.embedding)) < 1)
    assert.are.equal(0, p.bytes.logits)
  end)

  it('gives 34 sbh of activations per layer for Llama 3.1 8B without TP', function()
    local e = memory.estimate(llama())
    local sbh = 2048 * 2 * 4096
    -- 34 sbh plus flash attention's softmax statistics (4 s b heads).
    assert.are.equal(34 * sbh + 4 * 2048 * 2 * 32, e.activation_per_layer)
  end)

  it('scales activations with sequence length and micro-batch', function()
    local a = memory.estimate(llama())
    local b = memory.estimate(llama({ seq_len = 4096 }))
    local c = memory.estimate(llama({ mbs = 4, gbs = 64 }))
    assert.is_true(math.abs(b.bytes.activations / a.bytes.activations - 2) < 0.01)
    assert.is_true(math.abs(c.bytes.activations / a.bytes.activations - 2) < 0.01)
  end)

  it('splits activations by tp, and the replicated part too with sequence parallelism',
    function()
      local base = memory.estimate(llama({ tp = 2, dp = 4 }))
      local sp = memory.estimate(llama({ tp = 2, dp = 4, sequence_parallel = true }))
      assert.is_true(sp.activation_per_layer < base.activation_per_layer)
      local sbh = 2048 * 2 * 4096
      assert.are.equal(8 * sbh / 2, base.activation_per_layer - sp.activation_per_layer)
    end)

  it('keeps only layer inputs with full recompute, and equals none for selective', function()
    local none = memory.estimate(llama())
    local sel = memory.estimate(llama({ recompute = 'selective' }))
    local full = memory.estimate(llama({ recompute = 'full' }))
    assert.are.equal(none.bytes.activations, sel.bytes.activations)
    assert.is_true(full.bytes.activations < none.bytes.activations / 4)
    local sbh = 2048 * 2 * 4096
    assert.are.equal(32 * 2 * sbh + full.activation_per_layer + 8 * 2048 * 2,
      full.bytes.activations)
  end)

  it('discounts pipeline activations when there are fewer micro-batches than stages', function()
    local many = memory.estimate(llama({ pp = 4, dp = 2, gbs = 64 }))
    local few = memory.estimate(llama({ pp = 4, dp = 2, gbs = 8 }))  -- 2 micro-batches
    assert.are.equal(2, few.microbatches)
    assert.is_true(few.bytes.activations < many.bytes.activations)
  end)

  it('judges the flagship tight on H100 and fitting on MI300X', function()
    local h = memory.estimate(llama({ hardware = 'h100-sxm' }))
    local a = memory.estimate(llama({ hardware = 'mi300x' }))
    assert.are.equal('tight', h.status)
    assert.are.equal('fits', a.status)
    assert.are.equal(80 * GIB, h.capacity_bytes)
    assert.is_true(h.bytes.total > 74 * GIB and h.bytes.total < 76 * GIB)
    local no = memory.estimate(llama({ hardware = 'h100-sxm', distributed_optimizer = false }))
    assert.are.equal('exceeds', no.status)
    assert.are.equal('unknown', memory.estimate(llama()).status)
  end)

  it('formats the parts and the verdict', function()
    local s = memory.format(memory.estimate(llama({ hardware = 'h100-sxm' })))
    assert.is_truthy(s:find('weights 15.0 + gradients 29.9 + optimizer 11.2', 1, true))
    assert.is_truthy(s:find('of 80.0 GiB (94%): tight', 1, true))
  end)

  it('estimates from a unified config, deriving dp', function()
    local e = memory.for_config({ model = 'llama3.1-8b', training = { mbs = 2, seq_len = 2048,
      gbs = 64 }, parallelism = { tp = 2 }, nodes = 1, gpus_per_node = 8 }, 'h100-sxm')
    local d = memory.estimate(llama({ tp = 2, dp = 4, hardware = 'h100-sxm' }))
    assert.are.equal(d.bytes.total, e.bytes.total)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      memory.estimate(llama({ mbs = 0 }))
    end, 'tp.memory.estimate: mbs must be a positive integer, got 0')
    assert.has_error(function()
      memory.estimate(llama({ recompute = 'some' }))
    end)
    assert.has_error(function()
      memory.estimate(llama({ bogus = 1 }))
    end, "tp.memory.estimate: unknown field 'bogus'")
    local ok, err = pcall(memory.estimate, llama({ model = 'gpt-9' }))
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("unknown model 'gpt-9'", 1, true))
  end)
end)
