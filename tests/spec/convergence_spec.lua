-- tp.convergence: loss-curve checks on plain curves with known shapes, on the result fixtures
-- (mock data, random tokens, memorisation with a NaN), and curve agreement between groups.
local h = require('helper')
local convergence = require('tp.convergence')
local results = require('tp.results')

local ROOT = h.fixture('results')
local LN_V = math.log(128256)

local function kinds(findings)
  local out = {}
  for _, f in ipairs(findings) do
    out[#out + 1] = f.kind
  end
  table.sort(out)
  return out
end

local function find(findings, kind)
  for _, f in ipairs(findings) do
    if f.kind == kind then
      return f
    end
  end
end

-- A curve over iterations 1..n from fn(i); deterministic noise of amplitude `noise`.
local function curve(n, fn, noise, id)
  local x, y = {}, {}
  local s = 12345
  for i = 1, n do
    s = (s * 1103515245 + 12345) % 2147483648
    x[i] = i
    y[i] = fn(i) + (noise or 0) * (s / 2147483648 - 0.5)
  end
  return { x = x, y = y, id = id or 'c' }
end

local function learning(i)
  return 6 + 5.9 * math.exp(-i / 30)
end

describe('tp.convergence.check', function()
  it('finds nothing in an ordinary training curve', function()
    assert.are.same({}, convergence.check(curve(200, learning, 0.04), { vocab = 128256 }))
  end)

  it('finds a plateau at ln(vocab) and says what it measured', function()
    local c = curve(200, function(i)
      return LN_V + 0.2 * math.exp(-i / 5)
    end, 0.01, 'flat')
    local f = convergence.check(c, { vocab = 128256 })
    assert.are.same({ 'random_plateau' }, kinds(f))
    local p = f[1]
    assert.are.equal('warning', p.severity)
    assert.are.same({ 'flat' }, { table.unpack(p.runs) })
    assert.is_true(math.abs(p.values.median - LN_V) < 0.01)
    assert.are.equal(128256, p.values.vocab)
    assert.is_truthy(p.message:find('= ln(128256) = 11.762', 1, true))
    assert.is_truthy(p.message:find('iterations 111..200', 1, true))
  end)

  it('does not call a plateau without a vocabulary, or a curve that keeps learning', function()
    local flat = curve(200, function()
      return LN_V
    end)
    assert.are.same({}, convergence.check(flat))
    assert.are.same({}, convergence.check(curve(200, learning), { vocab = 128256 }))
  end)

  it('finds a collapse towards 0 within a few dozen steps (memorisation)', function()
    local c = curve(100, function(i)
      return 12.6 * math.exp(-(i - 1) / 2.5) + 0.002
    end)
    local f = convergence.check(c)
    local col = assert(find(f, 'loss_collapse'))
    assert.are.equal('warning', col.severity)
    assert.is_truthy(col.message:find('falls from 12.6 (iteration 1) below 1 by iteration 8',
      1, true))
    assert.is_true(col.values.lowest < 0.01)
  end)

  it('finds a loss that ends near 0 even when it gets there slowly', function()
    local c = curve(1000, function(i)
      return 8 * math.exp(-i / 150)
    end)
    local col = assert(find(convergence.check(c), 'loss_collapse'))
    assert.are.equal(312, col.values.below_collapse_at) -- 8 exp(-i/150) < 1 from i = 312
    assert.is_falsy(col.message:find('below 1 by', 1, true))
    assert.is_truthy(col.message:find('reaches 0.0102 (iteration 1000)', 1, true))
  end)

  it('reports NaN and infinite losses as errors with their iterations', function()
    local c = curve(50, learning)
    c.y[20] = 0 / 0
    c.y[30] = math.huge
    local f = convergence.check(c)
    local nf = assert(find(f, 'nonfinite_loss'))
    assert.are.equal('error', nf.severity)
    assert.are.equal(2, nf.values.count)
    assert.is_truthy(nf.message:find('iteration 20; iteration 30', 1, true))
  end)

  it('finds divergence: the smoothed loss climbs after its minimum and stays up', function()
    local c = curve(200, function(i)
      if i < 120 then
        return learning(i)
      end
      return learning(120) + (i - 120) * 0.05
    end, 0.02)
    local f = convergence.check(c, { warmup = 20 })
    local d = assert(find(f, 'divergence'))
    assert.are.equal('error', d.severity)
    assert.is_true(d.values.rise > 3)
    assert.is_true(d.values.minimum_iteration >= 110 and d.values.minimum_iteration <= 125)
  end)

  it('finds spikes that come back down, and not divergence', function()
    local c = curve(200, function(i)
      if i >= 100 and i <= 102 then
        return learning(i) + 3
      end
      return learning(i)
    end, 0.02)
    local f = convergence.check(c, { vocab = 128256 })
    assert.are.same({ 'loss_spike' }, kinds(f))
    assert.is_truthy(f[1].message:find('iterations 100..102', 1, true))
  end)

  it('checks runs loaded from records and tprimat files', function()
    local set = assert(results.load({ ROOT .. '/mock', ROOT .. '/tprimat' }))
    local by = {}
    for _, r in ipairs(set.runs) do
      by[r.id] = convergence.check(r)
    end
    local p = assert(find(by['amd-primus-mock'], 'random_plateau'))
    assert.is_truthy(p.message:find('vocabulary from args padded_vocab_size', 1, true))
    assert.are.same({}, by['nvd-megatron-real'])
    local nemo = by['train_nvd_nemo_llama']
    assert.are.same({ 'loss_collapse', 'loss_spike', 'nonfinite_loss' }, kinds(nemo))
    assert.is_truthy(find(nemo, 'nonfinite_loss').message:find('iteration 150', 1, true))
    assert.are.same({}, by['benchmark_cuda_llama']) -- no loss recorded: nothing to say
  end)

  it('takes the vocabulary from tp.models when the log has no padded size', function()
    local set = assert(results.load(ROOT .. '/random/amd'))
    local run = set[1]
    local c = convergence.curve(run)
    assert.are.equal(128256, c.vocab)
    assert.are.equal('args padded_vocab_size', c.vocab_source)
    assert.are.equal(20, c.warmup)
    assert.are.equal('recipe training.warmup', c.warmup_source)
    run.args.padded_vocab_size = nil
    c = convergence.curve(run)
    assert.are.equal('tp.models llama3.1-8b', c.vocab_source)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      convergence.check(5)
    end, 'tp.convergence.check: run or curve table expected, got number')
    assert.has_error(function()
      convergence.check({ x = { 1 }, y = {} })
    end, 'tp.convergence: curve has 1 x and 0 y values')
    assert.has_error(function()
      convergence.check(curve(5, learning), { smoth = 3 })
    end, "tp.convergence.check: unknown option 'smoth'")
    assert.has_error(function()
      convergence.check(curve(5, learning), { vocab = '1' })
    end, "tp.convergence.check: option 'vocab' must be a number, got string")
  end)
end)

describe('tp.convergence.agreement', function()
  it('finds two groups that agree within the stated tolerance when there are no repeats',
    function()
      local f, d = convergence.agreement({
        amd = { curve(100, learning, 0.02, 'a') },
        nvd = { curve(100, function(i)
          return learning(i) + 0.01
        end, 0.02, 'n') },
      }, { warmup = 10 })
      assert.are.equal(1, #f)
      assert.are.equal('curves_agree', f[1].kind)
      assert.are.equal(0.1, d.envelope)
      assert.is_truthy(d.envelope_basis:find('stated tolerance 0.1', 1, true))
      assert.is_true(d.pairs[1].rms < 0.02)
      assert.are.equal(90, d.pairs[1].common)
      assert.are.same({ 'a', 'n' }, { table.unpack(f[1].runs) })
    end)

  it('finds curves that differ by more than the envelope', function()
    local f = convergence.agreement({
      a = { curve(100, learning, 0, 'a') },
      b = { curve(100, function(i)
        return learning(i) + 0.5
      end, 0, 'b') },
    }, { warmup = 10 })
    assert.are.equal('curves_differ', f[1].kind)
    assert.are.equal('warning', f[1].severity)
    assert.is_true(math.abs(f[1].values.rms - 0.5) < 1e-9)
  end)

  it('builds the envelope from repeats', function()
    local function shifted(d, id)
      return curve(100, function(i)
        return learning(i) + d
      end, 0, id)
    end
    local f, d = convergence.agreement({
      amd = { shifted(0, 'a1'), shifted(0.03, 'a2') },
      nvd = { shifted(0.04, 'n1'), shifted(0.05, 'n2') },
    }, { warmup = 10 })
    assert.is_true(math.abs(d.envelope - 0.06) < 1e-9) -- 2 x 0.03
    assert.are.equal(2, #d.within)
    assert.are.equal('curves_agree', f[1].kind) -- means 0.015 vs 0.045: 0.03 apart
    local f2 = convergence.agreement({
      amd = { shifted(0, 'a1'), shifted(0.01, 'a2') },
      nvd = { shifted(0.2, 'n1') },
    }, { warmup = 10 })
    assert.are.equal('curves_differ', f2[1].kind)
  end)

  it('says when curves share too few iterations', function()
    local a = { x = { 1, 2, 3, 4 }, y = { 5, 4, 3, 2 }, id = 'a' }
    local b = { x = { 10, 20, 30, 40 }, y = { 5, 4, 3, 2 }, id = 'b' }
    local f = convergence.agreement({ a = { a }, b = { b } }, { warmup = 0 })
    assert.are.equal('curves_not_comparable', f[1].kind)
  end)
end)

describe('tp.convergence.check_set', function()
  it('checks each run and the agreement between platforms', function()
    local set = assert(results.load(ROOT .. '/fair'))
    local res = convergence.check_set(set)
    assert.are.equal(1, #res.findings)
    assert.are.equal('curves_agree', res.findings[1].kind)
    assert.are.equal(6, #res.agreement.within)
    assert.are.same({}, res.by_run['amd-primus-r1'])
    local unfair = convergence.check_set(assert(results.load(ROOT .. '/unfair')))
    assert.are.equal('curves_differ', unfair.findings[1].kind)
  end)
end)
