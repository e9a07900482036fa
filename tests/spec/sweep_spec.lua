-- tp.sweep: cartesian and zipped axes, filters, constraints, pruning, ordering, repeats and the
-- stable run ids (SHA-256 of canonical JSON).
local sweep = require('tp.sweep')
local config = require('tp.config')

local function base()
  return {
    model = 'llama3.1-8b',
    training = { seed = 42, mbs = 1, gbs = 64, seq_len = 2048, iters = 100, lr = 3e-4,
                 warmup = 10, precision = 'bf16', dataset = 'bc' },
    parallelism = { tp = 1, pp = 1, dp = 8 },
    nodes = 1, gpus_per_node = 8,
  }
end

local function points_of(expanded, status)
  local out = {}
  for _, e in ipairs(expanded) do
    if status == nil or e.status == status then
      out[#out + 1] = e
    end
  end
  return out
end

describe('tp.sweep.canonical and hash', function()
  it('sorts keys, drops whitespace and writes numbers exactly', function()
    assert.are.equal('{"a":[0.1,2],"b":1}', sweep.canonical({ b = 1, a = { 0.1, 2 } }))
    assert.are.equal('{"x":1.0,"y":0.0003,"z":"q\\"\\u000a"}',
      sweep.canonical({ x = 1.0, y = 3e-4, z = 'q"\n' }))
    assert.are.equal('[true,false]', sweep.canonical({ true, false }))
    assert.are.equal('{}', sweep.canonical({}))
  end)

  it('hashes equal configs equally whatever the construction order', function()
    local a = { training = { lr = 3e-4, mbs = 2 }, model = 'm' }
    local b = { model = 'm', training = { mbs = 2, lr = 3e-4 } }
    assert.are.equal(sweep.hash(a), sweep.hash(b))
    assert.are.equal(64, #sweep.hash(a))
    assert.are_not.equal(sweep.hash(a), sweep.hash({ model = 'm', training = { mbs = 2,
      lr = 1e-4 } }))
    -- Integer and float one are different values in the canonical form.
    assert.are_not.equal(sweep.hash({ x = 1 }), sweep.hash({ x = 1.0 }))
    -- The known SHA-256 of the canonical text.
    assert.are.equal(require('tp._digest').sha256('{"a":1}'), sweep.hash({ a = 1 }))
  end)

  it('refuses what JSON cannot hold', function()
    assert.has_error(function()
      sweep.canonical({ f = function() end })
    end)
    assert.has_error(function()
      sweep.canonical({ x = 0 / 0 })
    end)
    local t = {}
    t.self = t
    assert.has_error(function()
      sweep.canonical(t)
    end)
  end)
end)

describe('tp.sweep', function()
  it('makes the cartesian product, last axis fastest', function()
    local s = sweep({ axes = { { 'parallelism.tp', { 1, 2 } }, { 'training.mbs', { 1, 2, 4 } } },
                      validate = false })
    local pts = s:points()
    assert.are.equal(6, #pts)
    assert.are.same({ ['parallelism.tp'] = 1, ['training.mbs'] = 1 }, pts[1])
    assert.are.same({ ['parallelism.tp'] = 1, ['training.mbs'] = 2 }, pts[2])
    assert.are.same({ ['parallelism.tp'] = 2, ['training.mbs'] = 4 }, pts[6])
    assert.are.same({ 'parallelism.tp', 'training.mbs' }, s:keys())
  end)

  it('accepts axes as a map, applied in key order', function()
    local s = sweep({ axes = { ['training.mbs'] = { 1, 2 }, ['parallelism.tp'] = { 1, 2 } } })
    assert.are.same({ 'parallelism.tp', 'training.mbs' }, s:keys())
  end)

  it('advances zipped keys together', function()
    local s = sweep({ zip = { { { 'training.seq_len', { 1024, 2048, 4096 } },
                                { 'training.gbs', { 128, 64, 32 } } } },
                      axes = { { 'training.mbs', { 1, 2 } } } })
    local pts = s:points()
    assert.are.equal(6, #pts)
    for _, p in ipairs(pts) do
      assert.are.equal(131072, p['training.seq_len'] * p['training.gbs'])
    end
    -- A single group may be given without the outer list.
    assert.are.equal(3, #sweep({ zip = { ['training.seq_len'] = { 1, 2, 3 },
                                        ['training.gbs'] = { 3, 2, 1 } } }):points())
  end)

  it('validates points and says why each is dropped', function()
    local s = sweep({ axes = { { 'parallelism.tp', { 1, 2, 3 } },
                               { 'parallelism.pp', { 1, 2 } } } })
    local ex = s:expand(base())
    assert.are.equal(6, #ex)
    -- dp is derived again for every layout: tp 2 pp 2 gives dp 2.
    for _, e in ipairs(points_of(ex, 'ok')) do
      local p = e.config.parallelism
      assert.are.equal(8, p.tp * p.pp * p.dp)
    end
    local invalid = points_of(ex, 'invalid')
    assert.are.equal(2, #invalid)
    assert.is_truthy(invalid[1].reason:find('parallelism: tp*pp*cp = 3*1*1 = 3 does not divide '
      .. 'the 8 GPUs', 1, true))
  end)

  it('derives ga again when the batch changes', function()
    local b = base()
    b.training.ga = 8
    local ex = sweep({ axes = { { 'training.mbs', { 1, 2 } } } }):expand(b)
    assert.are.equal(8, ex[1].config.training.ga)
    assert.are.equal(4, ex[2].config.training.ga)
    assert.are.equal('ok', ex[2].status)
  end)

  it('applies filters and user constraints', function()
    local s = sweep({
      axes = { { 'training.mbs', { 1, 2, 4 } } },
      filter = function(cfg)
        return cfg.training.mbs ~= 2
      end,
      constraints = { function(cfg)
        return cfg.training.mbs < 4, 'mbs too large for this study'
      end },
    })
    local ex = s:expand(base())
    assert.are.equal('ok', ex[1].status)
    assert.are.equal('filtered', ex[2].status)
    assert.are.equal('invalid', ex[3].status)
    assert.are.equal('mbs too large for this study', ex[3].reason)
  end)

  it('prunes points that do not fit unless told not to', function()
    local s = sweep({ axes = { { 'training.mbs', { 1, 4 } } } })
    local plan = s:plan(base(), { hardware = 'h100-sxm', platform = 'nvd' })
    assert.are.equal(1, #plan.runs)
    assert.are.equal('pruned', plan.dropped[1].status)
    assert.is_truthy(plan.dropped[1].reason:find('exceeds', 1, true))
    local keep = s:plan(base(), { hardware = 'h100-sxm', platform = 'nvd', no_prune = true })
    assert.are.equal(2, #keep.runs)
    -- The same point fits on a 192 GB GPU.
    assert.are.equal(2, #s:plan(base(), { hardware = 'mi300x' }).runs)
  end)

  it('orders by key paths, descending with a minus', function()
    local s = sweep({ axes = { { 'parallelism.tp', { 1, 2 } }, { 'training.mbs', { 1, 2 } } },
                      order = { '-training.mbs', 'parallelism.tp' } })
    local ex = s:expand(base())
    local seq = {}
    for _, e in ipairs(ex) do
      seq[#seq + 1] = e.point['training.mbs'] .. '/' .. e.point['parallelism.tp']
    end
    assert.are.same({ '2/1', '2/2', '1/1', '1/2' }, seq)
    local f = sweep({ axes = { { 'training.mbs', { 1, 2, 4 } } },
      order = function(a, b)
        return a['training.mbs'] > b['training.mbs']
      end })
    assert.are.equal(4, f:expand(base())[1].point['training.mbs'])
  end)

  it('plans repeats with stable ids that depend on config, platform and framework', function()
    local s = sweep({ axes = { { 'training.mbs', { 1, 2 } } }, repeats = 3 })
    local p1 = s:plan(base(), { platform = 'nvd', framework = 'megatron' })
    local p2 = s:plan(base(), { platform = 'nvd', framework = 'megatron' })
    assert.are.equal(6, #p1.runs)
    for i, r in ipairs(p1.runs) do
      assert.are.equal(r.id, p2.runs[i].id)
      assert.is_truthy(r.id:match('^nvd%-megatron%-%x+%-r%d$'))
    end
    assert.are.equal(p1.runs[1].hash, p1.runs[3].hash)
    assert.are.equal('nvd-megatron-' .. p1.runs[1].hash:sub(1, 12) .. '-r3', p1.runs[3].id)
    assert.are_not.equal(p1.runs[1].hash, p1.runs[4].hash)
    -- Primus needs an absolute output directory; it does not change the id either.
    local ba = base()
    ba.paths = { output = '/runs/x' }
    local amd = s:plan(ba, { platform = 'amd', framework = 'primus' })
    assert.are_not.equal(p1.runs[1].hash, amd.runs[1].hash)
    -- Output paths are not part of the identity.
    local b = base()
    b.paths = { output = '/somewhere/else' }
    assert.are.equal(p1.runs[1].hash, s:plan(b, { platform = 'nvd',
      framework = 'megatron' }).runs[1].hash)
    assert.are.equal(2, #s:plan(base(), { repeats = 1 }).runs)
  end)

  it('checks points against the framework adapter when told which', function()
    local b = base()
    b.system = { recompute = 'full' }
    local s = sweep({ axes = { { 'system.cuda_graphs', { false, true } } } })
    local plan = s:plan(b, { framework = 'megatron' })
    assert.are.equal(1, #plan.runs)
    assert.is_truthy(plan.dropped[1].reason:find('Megatron refuses CUDA graphs', 1, true))
  end)

  it('describes points briefly', function()
    assert.are.equal('tp=4 mbs=2', sweep.describe_point({ ['parallelism.tp'] = 4,
      ['training.mbs'] = 2 }))
  end)

  it('raises on malformed sweeps', function()
    assert.has_error(function()
      sweep({ axes = { { 'training.learning_rate', { 1 } } } })
    end, "tp.sweep: axes: 'training.learning_rate' is not a unified key path")
    assert.has_error(function()
      sweep({ axes = { { 'training.mbs', {} } } })
    end, "tp.sweep: axes: 'training.mbs' has no values")
    assert.has_error(function()
      sweep({ zip = { { { 'training.mbs', { 1, 2 } }, { 'training.gbs', { 64 } } } } })
    end, 'tp.sweep: zip[1]: lists of different lengths (training.mbs has 2, training.gbs has 1)')
    assert.has_error(function()
      sweep({ axes = { { 'training.mbs', { 1 } } }, zip = { { { 'training.mbs', { 2 } } } } })
    end, "tp.sweep: zip[1]: 'training.mbs' is swept twice")
    assert.has_error(function()
      sweep({ axes = {}, repeats = 0 })
    end, 'tp.sweep: repeats must be a positive integer, got 0')
    assert.has_error(function()
      sweep({ colour = 'red' })
    end, "tp.sweep: unknown field 'colour'")
    assert.has_error(function()
      sweep({ order = { 'training.nope' } })
    end, "tp.sweep: order[1]: 'training.nope' is not a key path")
  end)

  it('keeps the base config untouched', function()
    local b = base()
    local before = sweep.canonical(b)
    sweep({ axes = { { 'parallelism.tp', { 2 } } } }):plan(b)
    assert.are.equal(before, sweep.canonical(b))
    assert.are.equal(8, config.get(b, 'parallelism.dp'))
  end)
end)
