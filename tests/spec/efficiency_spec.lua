-- tp.efficiency: the GPU a run's MFU and energy estimate divide by (given, recorded id, device
-- name, the platform's), the MFU and the energy per token (measured first), for tp.results runs
-- and raw records alike.
local efficiency = require('tp.efficiency')

local function run(t)
  local r = { id = 'r1', platform = 'amd', model = 'llama3.1-8b', gpus = 8, seq_len = 2048,
    precision = 'bf16', tokens_per_s = 80000 }
  for k, v in pairs(t or {}) do
    r[k] = v
  end
  return r
end

describe('tp.efficiency.hardware', function()
  it('takes the given id, then the recorded one, then the device name, then the platform',
    function()
      local row, how = efficiency.hardware(run({ gpu_info = { hardware = 'mi325x' } }),
        { hardware = 'mi300x' })
      assert.are.same({ 'mi300x', 'given' }, { row.id, how })
      row, how = efficiency.hardware(run({ gpu = 'NVIDIA H100 80GB HBM3',
        gpu_info = { hardware = 'mi325x' } }))
      assert.are.same({ 'mi325x', 'recorded' }, { row.id, how })
      row, how = efficiency.hardware(run({ gpu = 'AMD Instinct MI300X' }))
      assert.are.same({ 'mi300x', 'device name' }, { row.id, how })
      row, how = efficiency.hardware(run({ platform = 'nvd' }))
      assert.are.same({ 'h100-sxm', 'assumed from the platform' }, { row.id, how })
    end)

  it('reports what it cannot resolve instead of guessing', function()
    local row, why = efficiency.hardware(run({ gpu_info = { hardware = 'mi999x' } }))
    assert.is_nil(row)
    assert.is_truthy(why:find("gpu_info.hardware 'mi999x' is not in tp.hardware", 1, true))
    row, why = efficiency.hardware(run({ platform = 'tpu' }))
    assert.is_nil(row)
    assert.is_truthy(why:find('the record names no GPU (gpu_info); give its catalog id', 1, true))
  end)
end)

describe('tp.efficiency.mfu and energy', function()
  it('computes MFU from the catalog, or takes the recorded one', function()
    local mfu, d = efficiency.mfu(run())
    local want = assert(require('tp.metrics').mfu({ tokens_per_s = 80000, gpus = 8,
      model = 'llama3.1-8b', seq_len = 2048, precision = 'bf16', hardware = 'mi300x' }))
    assert.are.equal(want.mfu, mfu)
    assert.are.equal('assumed from the platform', d.how)
    assert.are.same({ 0.5, { recorded = true } }, { efficiency.mfu(run({ mfu = 0.5 })) })
    local none, why = efficiency.mfu(run({ model = 'nonesuch' }))
    assert.is_nil(none)
    assert.are.equal("model 'nonesuch' is not in tp.models", why)
  end)

  it('prefers the measured energy per token and labels the estimate an upper bound', function()
    assert.are.same({ 0.05, 'measured' }, { efficiency.energy(run({
      energy_metrics = { joules_per_token = 0.05 } })) })
    local j, basis, d = efficiency.energy(run({ gpu = 'AMD Instinct MI300X' }))
    assert.are.equal(8 * 750 / 80000, j)
    assert.are.equal('estimated: 8 GPUs x mi300x TDP 750 W x time (upper bound)', basis)
    assert.are.equal('device name', d.how)
    local _, assumed = efficiency.energy(run())
    assert.is_truthy(assumed:find('x mi300x (assumed from the platform amd: the records name no '
      .. 'GPU; --hardware amd=ID sets it) TDP 750 W', 1, true), assumed)
  end)

  it('reads the same fields from a raw record', function()
    local r = efficiency.run_fields({ platform = 'nvd', training_config = { num_gpus = 8,
      sequence_length = 4096, precision = 'fp8' }, performance_metrics = {
      tokens_per_second = 1e5 }, gpu_info = { devices = { { name = 'NVIDIA H200' } } } },
      { model = 'llama3.1-8b' })
    assert.are.same({ 'nvd', 'llama3.1-8b', 8, 4096, 'fp8', 1e5, 'NVIDIA H200' }, { r.platform,
      r.model, r.gpus, r.seq_len, r.precision, r.tokens_per_s, r.gpu })
  end)
end)
