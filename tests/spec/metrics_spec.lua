-- tp.metrics: MFU against the peak of the precision run (hand computations), energy per token,
-- cost with labelled price assumptions, time to train; misuse.
local hardware = require('tp.hardware')
local metrics = require('tp.metrics')

describe('tp.metrics.mfu', function()
  it('equals the hand computation for Llama 3.1 8B, 2048 tokens, bf16, H100 SXM', function()
    -- 8 GPUs at 9,000 tokens/s each = 72,000 tokens/s. FLOPs per token (Megatron convention,
    -- HARDWARE.md §3.3) = 6 * 7,504,658,432 + 6 * 32 * 4,096 * 2,048 = 46,638,563,328.
    -- MFU = 72,000 * 46,638,563,328 / (8 * 989.4e12) = 3,357,976,559,616,000 / 7.9152e15
    --     = 0.42424405695573...
    local r = assert(metrics.mfu({ tokens_per_s = 72000, gpus = 8, model = 'llama3.1-8b',
      seq_len = 2048, precision = 'bf16', hardware = 'h100-sxm', convention = 'megatron' }))
    assert.near(3357976559616000 / 7.9152e15, r.mfu, 1e-15)
    assert.near(0.424244056955731, r.mfu, 1e-12)
    assert.are.equal(989.4, r.peak_tflops)
    assert.are.equal('bf16', r.precision)
    assert.are.equal('megatron', r.convention)
    assert.are.equal(46638563328, r.flops_per_token)
    assert.are.equal('text', r.basis)
    assert.are.equal('h100-sxm', r.hardware)
    assert.near(72000 * 46638563328 / 8 / 1e12, r.achieved_tflops_per_gpu, 1e-9)
    assert.is_nil(r.mfu_vs_bf16)
  end)

  it('reproduces the worked example of HARDWARE.md §3.3 (8 x H100, 8192 tokens)', function()
    local args = { tokens_per_s = 40000, gpus = 8, model = 'llama3.1-8b', seq_len = 8192,
      hardware = 'h100-sxm', convention = 'palm' }
    assert.are.equal('0.293', string.format('%.3f', metrics.mfu(args).mfu))
    args.convention = 'megatron'
    assert.are.equal('0.260', string.format('%.3f', metrics.mfu(args).mfu))
  end)

  it('uses the fp8 peak for an fp8 run and also reports the MFU against bf16', function()
    local base = { tokens_per_s = 72000, gpus = 8, model = 'llama3.1-8b', seq_len = 2048,
      hardware = 'h100-sxm' }
    local bf16 = metrics.mfu(base)
    base.precision = 'fp8'
    local fp8 = assert(metrics.mfu(base))
    assert.are.equal(1978.9, fp8.peak_tflops)
    assert.are.equal(989.4, fp8.peak_tflops_bf16)
    assert.near(bf16.mfu * 989.4 / 1978.9, fp8.mfu, 1e-15)
    assert.near(bf16.mfu, fp8.mfu_vs_bf16, 1e-15)
    local mi = assert(metrics.mfu({ tokens_per_s = 1e5, gpus = 8, model = 'qwen2.5-7b',
      seq_len = 4096, precision = 'fp8', hardware = hardware.get('mi300x') }))
    assert.are.equal(2614.9, mi.peak_tflops)
  end)

  it('uses the scaled peak of a matched partition', function()
    local gcd = hardware.match({ name = 'AMD Instinct MI250X', arch = 'gfx90a', sm_count = 110,
      vendor = 'amd' })
    local r = assert(metrics.mfu({ tokens_per_s = 1000, gpus = 1, model = 'llama3.2-1b',
      seq_len = 2048, precision = 'bf16', hardware = gcd }))
    assert.near(191.5, r.peak_tflops, 1e-9)
    assert.is_true(r.partition)
  end)

  it('refuses to compute without a peak', function()
    local args = { tokens_per_s = 1000, gpus = 8, model = 'llama3.1-8b', seq_len = 2048,
      precision = 'fp8', hardware = 'a100-sxm' }
    local r, err, code = metrics.mfu(args)
    assert.is_nil(r)
    assert.are.equal('ENOPEAK', code)
    assert.are.equal('metrics: a100-sxm has no fp8 peak in the catalog: MFU not computed', err)
    args.hardware, args.precision = nil, 'bf16'
    r, err, code = metrics.mfu(args)
    assert.is_nil(r)
    assert.are.equal('ENOPEAK', code)
    assert.truthy(err:find('GPU not in the catalog', 1, true))
    args.hardware = 'v100'
    r, err, code = metrics.mfu(args)
    assert.is_nil(r)
    assert.are.equal('ENOPEAK', code)
    assert.truthy(err:find("no catalog row 'v100'", 1, true))
  end)

  it('raises on misuse', function()
    local good = { tokens_per_s = 1, gpus = 1, model = 'llama3.1-8b', seq_len = 2048,
      hardware = 'h100-sxm' }
    local function with(k, v)
      local t = {}
      for key, val in pairs(good) do
        t[key] = val
      end
      t[k] = v
      return t
    end
    assert.has_error(function()
      metrics.mfu(with('gpus', 1.5))
    end, "tp.metrics.mfu: field 'gpus': count expected, got 1.5")
    assert.has_error(function()
      metrics.mfu(with('precision', 'int8'))
    end, "tp.metrics.mfu: unknown precision 'int8' (fp32, tf32, bf16, fp16, fp8, fp4)")
    assert.has_error(function()
      metrics.mfu(with('convention', 'kaplan'))
    end, "tp.metrics.mfu: unknown convention 'kaplan' (megatron, palm, 6n)")
    assert.has_error(function()
      metrics.mfu(with('tokens', 5))
    end, "tp.metrics.mfu: unknown field 'tokens'")
    assert.has_error(function()
      metrics.mfu(with('seq_len', nil))
    end, "tp.metrics.mfu: field 'seq_len' is required")
    assert.has_error(function()
      metrics.mfu(with('model', 'gpt-5'))
    end)
  end)
end)

describe('tp.metrics energy, cost and time', function()
  after_each(function()
    hardware.set_price('mi300x', nil)
  end)

  it('divides energy by tokens and labels its basis', function()
    local e = metrics.energy_per_token({ energy_j = 3.6e6, tokens = 1e6 })
    assert.are.equal(3.6, e.joules_per_token)
    assert.are.equal(1000, e.wh_per_million_tokens)
    assert.are.equal('measured', e.basis)
    assert.are.equal('estimated',
      metrics.energy_per_token({ energy_j = 1, tokens = 1, estimated = true }).basis)
  end)

  it('estimates energy from TDP when no telemetry ran', function()
    assert.are.equal(8 * 700 * 3600, metrics.estimated_energy_j({ gpus = 8, seconds = 3600,
      hardware = 'h100-sxm' }))
  end)

  it('computes cost per million tokens with the price labelled as an assumption', function()
    -- 8 GPUs x $2/GPU-hour = $16/hour; 10,000 tokens/s = 36e6 tokens/hour -> $0.4444 per 1M
    local c = assert(metrics.cost_per_tokens({ gpus = 8, tokens_per_s = 10000,
      price_per_gpu_hour = 2 }))
    assert.near(16 / 36, c.cost, 1e-12)
    assert.are.equal(1e6, c.per)
    assert.is_true(c.assumption)
    local same = assert(metrics.cost_per_tokens({ gpus = 8, tokens = 36e6, seconds = 3600,
      price_per_gpu_hour = 2, per = 1e6 }))
    assert.near(c.cost, same.cost, 1e-12)
    local r, err, code = metrics.cost_per_tokens({ gpus = 8, tokens_per_s = 1,
      hardware = 'mi300x' })
    assert.is_nil(r)
    assert.are.equal('ENOPRICE', code)
    assert.are.equal('metrics: no price set for mi300x (tp.hardware.set_price)', err)
    hardware.set_price('mi300x', 3, 'illustration')
    c = assert(metrics.cost_per_tokens({ gpus = 1, tokens_per_s = 1000, hardware = 'mi300x' }))
    assert.near(3 / 3.6, c.cost, 1e-12)
    assert.are.equal('illustration', c.price_note)
    assert.is_true(c.assumption)
    assert.has_error(function()
      metrics.cost_per_tokens({ gpus = 1, tokens = 5, price_per_gpu_hour = 1 })
    end, 'tp.metrics.cost_per_tokens: give tokens_per_s, or tokens and seconds')
  end)

  it('computes time to train', function()
    local t = metrics.time_to_train({ tokens = 15e12, tokens_per_s = 1e7 })
    assert.are.equal(1.5e6, t.seconds)
    assert.near(1.5e6 / 3600, t.hours, 1e-9)
    assert.near(1.5e6 / 86400, t.days, 1e-12)
    assert.has_error(function()
      metrics.time_to_train({ tokens = 1, tokens_per_s = 0 })
    end, "tp.metrics.time_to_train: field 'tokens_per_s': positive expected, got 0")
  end)
end)
