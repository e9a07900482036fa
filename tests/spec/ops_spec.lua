-- tp.analyse.ops on the real trace fixtures, against TraceLens's own numbers for the same traces
-- (tests/fixtures/traces/tracelens: the CSVs TraceLens ships for the Qwen and BERT pairs and its
-- reports run on every fixture): per (op, shapes, dtype) the calls, the GPU time per call, FLOPs,
-- bytes and TFLOP/s; the pairing of the Qwen pair against TraceLens's H100-vs-MI300 comparison;
-- the limits from the catalog and from measured peaks; the per-class efficiency; user models.
local h = require('helper')
local json = require('tp.json')
local trace = require('tp.analyse.trace')
local ops = require('tp.analyse.ops')

local DIR = h.fixture('traces')
local TL = DIR .. '/tracelens'

local function load_tl(name)
  return json.decode(assert(h.read(TL .. '/' .. name)))
end

local function rel(a, b)
  if a == b then
    return 0
  end
  return math.abs(a - b) / math.max(math.abs(b), 1e-300)
end

local function deep_equal(a, b)
  if type(a) ~= type(b) then
    return false
  end
  if type(a) ~= 'table' then
    return a == b or (math.type(a) == 'float' and a == b)
  end
  if #a ~= #b then
    return false
  end
  for i = 1, #a do
    if not deep_equal(a[i], b[i]) then
      return false
    end
  end
  return true
end

local function decode(text)
  return text and json.decode(text) or nil
end

-- The CPU ranges of each op key of a fixture, GPU work or not: { {name, dims, types, strides,
-- concrete (decoded), count} ... }.
local key_cache = {}
local function keys_of(fixture)
  if not key_cache[fixture] then
    local tr = assert(require('tp._trace').open(DIR .. '/' .. fixture .. '.json.gz'))
    local out = {}
    for _, k in ipairs(tr:op_keys()) do
      if k.kind == 'op' then
        out[#out + 1] = { name = k.name, dims = decode(k.dims), types = decode(k.types),
          strides = decode(k.strides), concrete = decode(k.concrete), count = k.count,
          dims_text = k.dims, types_text = k.types, strides_text = k.strides,
          concrete_text = k.concrete }
      end
    end
    tr:close()
    key_cache[fixture] = out
  end
  return key_cache[fixture]
end

-- The entries of `list` whose `f` equals `want`; all of them when none does.
local function narrow(list, f, want)
  local out = {}
  for _, r in ipairs(list) do
    if deep_equal(r[f], want) then
      out[#out + 1] = r
    end
  end
  return #out > 0 and out or list
end

local function count_of(keys)
  local n = 0
  for _, k in ipairs(keys) do
    n = n + k.count
  end
  return n
end

-- The op keys TraceLens's row stands for. TraceLens groups calls by its model's parameters: the
-- op, Input Dims and Input type always; strides for most; scalar inputs only where the model
-- reads them (a causal flag, a dim). So: the same op, dims and types, narrowed to its strides,
-- then to its scalars unless the ranges already add up to its count. Returns the keys and our
-- rows of them.
local function ours(fixture, t, tl)
  local keys = {}
  for _, k in ipairs(keys_of(fixture)) do
    if k.name == tl.name and deep_equal(k.dims, tl['Input Dims_first'])
      and deep_equal(k.types, tl['Input type_first']) then
      keys[#keys + 1] = k
    end
  end
  if #keys > 1 then
    keys = narrow(keys, 'strides', tl['Input Strides_first'])
  end
  if #keys > 1 and count_of(keys) ~= tl.name_count then
    keys = narrow(keys, 'concrete', tl['Concrete Inputs_first'])
  end
  local rows = {}
  for _, k in ipairs(keys) do
    for _, r in ipairs(t.rows) do
      if r.name == k.name and r.dims_text == k.dims_text and r.types_text == k.types_text
        and r.strides_text == k.strides_text and r.concrete_text == k.concrete_text then
        rows[#rows + 1] = r
      end
    end
  end
  return keys, rows
end

-- The rows TraceLens groups together, added up: calls, busy time, mean TFLOP/s, memsets.
local function combined(rows)
  local c = { calls = 0, time = 0, rate = 0, memset = 0, gflops = rows[1].gflops,
    mb = rows[1].mb }
  for _, r in ipairs(rows) do
    c.calls = c.calls + r.calls
    c.time = c.time + r.time
    c.rate = c.rate + (r.tflops or 0) * r.calls
    c.memset = c.memset + r.memset_sum
  end
  c.mean_us = c.calls > 0 and c.time / c.calls / 1e3 or nil
  c.tflops = c.calls > 0 and c.rate / c.calls or nil
  return c
end

-- Rows where tplua's model counts differently from TraceLens on purpose (docs/ops.md, "Where
-- tplua differs"): reductions over a dim (TraceLens always counts one output element), the
-- gradients convolution_backward's output_mask leaves out, the size of bool and unsigned char.
local function documented_difference(tl)
  local n = tl.name
  local concrete = tl['Concrete Inputs_first'] or {}
  local types = tl['Input type_first'] or {}
  if n:match('^aten::') and (n == 'aten::sum' or n == 'aten::mean' or n == 'aten::amax'
    or n == 'aten::max' or n == 'aten::min' or n == 'aten::norm' or n == 'aten::amin')
    and type(concrete[2]) == 'string' and concrete[2]:match('%[') then
    return true
  end
  if n == 'aten::convolution_backward' then
    local mask = concrete[#concrete]
    return type(mask) == 'string' and mask:find('False', 1, true) ~= nil
  end
  for _, ty in ipairs(types) do
    if ty == 'bool' or ty == 'unsigned char' then
      return true
    end
  end
  return false
end

local cache = {}
local function analysed(fixture)
  if not cache[fixture] then
    cache[fixture] = assert(trace.open(DIR .. '/' .. fixture .. '.json.gz', { ops = true }))
  end
  return cache[fixture]
end

-- Checks every row of a TraceLens report on `fixture`; returns the counts checked.
local function check_report(fixture, report)
  local t = analysed(fixture).ops
  local n = { rows = 0, rates = 0, models = 0, differ = 0 }
  for sheet, s in pairs(report.sheets) do
    -- A `_bwd` sheet row named after a forward op holds TraceLens's backward of that op, timed
    -- over the autograd subtree linked to it; tplua times the backward ops themselves.
    local via_forward = sheet:find('_bwd$') ~= nil
    for _, tl in ipairs(s.rows) do
      local count = tl.name_count
      local kt = tl['Kernel Time (µs)_mean']
      if ops.has_model(tl.name) and count and count > 0 and kt and kt == kt and kt > 0
        and not (via_forward and not tl.name:find('backward', 1, true)) then
        local keys, rows = ours(fixture, t, tl)
        local where = string.format('%s %s %s %s', fixture, sheet, tl.name,
          json.encode(tl['Input Dims_first']))
        assert(#rows > 0, where .. ': no row')
        local c = combined(rows)
        n.rows = n.rows + 1
        -- TraceLens counts every range of the op; tplua's calls are those that ran GPU ops (its
        -- mean is over those; TraceLens's over all, with 0 us for the others)
        assert.are.equal(count, count_of(keys), where .. ': ranges')
        assert.is_true(c.calls <= count, where)
        local sum_us = c.time / 1e3
        local adjusted = false
        if rel(sum_us, tl['Kernel Time (µs)_sum']) > 0.01 and c.memset > 0 then
          -- TraceLens links GPU ops to launches by ac2g flows; ROCm writes a memset's flow as
          -- two flow ends, so TraceLens leaves the memsets out of their op (docs/trace.md)
          adjusted = true
          sum_us = sum_us - c.memset / 1e3
          n.memsets = (n.memsets or 0) + 1
        end
        assert(rel(sum_us, tl['Kernel Time (µs)_sum']) <= 0.01, string.format('%s: kernel time '
          .. '%.4f us in all against TraceLens %.4f us', where, sum_us,
          tl['Kernel Time (µs)_sum']))
        if c.calls == count and not adjusted then
          assert(rel(c.mean_us, kt) <= 0.01, where .. ': mean')
        end
        local gf, mb = tl.GFLOPS_first, tl['Data Moved (MB)_first']
        local same_model = c.gflops and gf and rel(c.gflops, gf) <= 1e-3
          and (mb == nil or (c.mb and rel(c.mb, mb) <= 1e-3))
        if same_model then
          n.models = n.models + 1
          local tf = tl['TFLOPS/s_mean']
          if tf and tf == tf and tf > 0 and not adjusted then
            n.rates = n.rates + 1
            assert(rel(c.tflops, tf) <= 0.01, string.format('%s: %.4f TFLOP/s against '
              .. 'TraceLens %.4f', where, c.tflops, tf))
          end
        else
          n.differ = n.differ + 1
          assert(documented_difference(tl), string.format('%s: GFLOPs %s / MB %s against '
            .. 'TraceLens %s / %s, not a documented difference', where, tostring(c.gflops),
            tostring(c.mb), tostring(gf), tostring(mb)))
        end
      end
    end
  end
  return n
end

describe('tp.analyse.ops on real traces against TraceLens', function()
  it('matches the reports TraceLens ships for the Qwen and BERT pairs', function()
    local total = 0
    for _, f in ipairs({ 'qwen05b_h100', 'qwen05b_mi300', 'bert_small_h100',
      'bert_small_mi300' }) do
      local n = check_report(f, load_tl('shipped_' .. f .. '.json'))
      assert.is_true(n.rows >= 9, f)
      assert.are.equal(n.rows, n.models, f .. ': every row with TraceLens\'s FLOPs and bytes')
      total = total + n.rows
    end
    assert.is_true(total >= 55)
  end)

  it('matches TraceLens run on every Kineto fixture (ResNet DDP, ResNet-18, vLLM too)',
    function()
      local total, differ = 0, 0
      for _, f in ipairs({ 'qwen05b_h100', 'qwen05b_mi300', 'bert_small_h100', 'bert_small_mi300',
        'resnet_ddp8_mi300_rank0', 'resnet18_mi300_nostep', 'vllm_b200_tp8_rank0' }) do
        local n = check_report(f, load_tl('run_' .. f .. '.json'))
        total, differ = total + n.rows, differ + n.differ
      end
      assert.is_true(total >= 150, tostring(total))
      assert.is_true(differ > 0 and differ < total / 5, tostring(differ))
    end)

  it('links every launched kernel of the pairs to its CPU op, none of the backlog', function()
    local a = analysed('qwen05b_h100')
    assert.are.equal(1198, a.ops.linked)
    assert.are.equal(509, a.ops.unlinked)
    assert.are.equal(a.info.ops - a.info.unassigned, a.ops.linked)
    local own = 0
    for _, r in ipairs(a.ops.rows) do
      own = own + r.own
    end
    -- every linked kernel has one owner: the owned time is the linked kernels' time
    local sum = 0
    for _, s in ipairs(a.steps) do
      for _, c in pairs(s.class) do
        sum = sum + c.sum
      end
    end
    assert.are.equal(sum, own)
  end)

  it('holds each op to its GPU\'s catalog limits, per precision and unit', function()
    local t = analysed('qwen05b_h100').ops
    assert.are.equal('h100-sxm', t.device.catalog)
    local mm
    for _, r in ipairs(t.rows) do
      if r.name == 'aten::mm' and r.dims_text == '[[8944,1024],[1024,2816]]' then
        mm = r
      end
    end
    assert.is_not_nil(mm)
    assert.are.equal('bf16', mm.precision)
    assert.are.equal('matrix', mm.compute)
    assert.are.equal(989.4, mm.limits.tflops)
    assert.are.equal(3.35, mm.limits.tbs)
    assert.are.equal('compute', mm.bound)
    -- % of the limit: the time the roofline allows over the time taken
    local allowed = math.max(mm.flops / 989.4e12, mm.bytes / 3.35e12)
    assert.is_true(rel(mm.pct, allowed / (mm.mean * 1e-9)) < 1e-12)
    assert.is_true(mm.pct > 0.55 and mm.pct < 0.7)
    -- memory-bound elementwise ops: their limit is the bandwidth
    local add
    for _, r in ipairs(t.rows) do
      if r.name == 'aten::add' and r.bound then
        add = r
        break
      end
    end
    assert.are.equal('memory', add.bound)
    assert.are.equal('vector', add.compute)
    assert.is_true(rel(add.pct, add.bytes / 3.35e12 / (add.mean * 1e-9)) < 1e-12)
    -- MI300X VF: the MI300X row
    assert.are.equal('mi300x', analysed('qwen05b_mi300').ops.device.catalog)
    -- per class: time-weighted, gemm over its whole time
    local gemm
    for _, c in ipairs(t.classes) do
      if c.class == 'gemm' then
        gemm = c
      end
    end
    assert.are.equal(1, gemm.coverage)
    assert.are.equal('compute', gemm.main_bound)
    assert.are.equal('bf16', gemm.main_precision)
    local w, tt = 0, 0
    for _, r in ipairs(t.rows) do
      if r.class == 'gemm' and r.pct then
        w, tt = w + r.pct * r.own, tt + r.own
      end
    end
    assert.is_true(rel(gemm.efficiency, w / tt) < 1e-12)
  end)

  it('adds a measured peak beside the datasheet one', function()
    local dir = h.tmpdir()
    local pk = dir .. '/peaks.json'
    h.write(pk, json.encode({ schema = 'tplua.peaks/1', device = 'cuda',
      gpu = 'NVIDIA H100 80GB HBM3', tflops = { bf16 = 700.0, fp32 = 50.0 },
      bandwidth_tbs = 2.9, gemm = {}, square = {}, memory = { tbs = 2.9 } }))
    local list = assert(require('tp.analyse.peaks').load(pk))
    local a = assert(trace.open(DIR .. '/qwen05b_h100.json.gz', { ops = true, peaks = list }))
    local mm = a.ops.rows[1]
    assert.are.equal('aten::mm', mm.name)
    assert.are.equal(700.0, mm.limits.measured_tflops)
    assert.is_true(rel(mm.measured_pct, math.max(mm.flops / 700e12, mm.bytes / 2.9e12)
      / (mm.mean * 1e-9)) < 1e-12)
    assert.is_true(mm.measured_pct > mm.pct)
    assert.is_not_nil(a.ops.peaks)
    -- a GPU the peaks do not cover: no measured figures
    local b = assert(trace.open(DIR .. '/qwen05b_mi300.json.gz', { ops = true, peaks = list }))
    assert.is_nil(b.ops.rows[1].measured_pct)
    assert.is_nil(b.ops.peaks)
  end)

  it('pairs the Qwen ops across H100 and MI300X as TraceLens\'s comparison does', function()
    local a = assert(trace.analyse({ DIR .. '/qwen05b_h100.json.gz' }, { ops = true }))
    local b = assert(trace.analyse({ DIR .. '/qwen05b_mi300.json.gz' }, { ops = true }))
    local e = assert(trace.explain(a, b, { 'H100', 'MI300X' }))
    local c = e.ops
    assert.is_not_nil(c)
    local cmp = load_tl('shipped_compare_qwen05b_h100_mi300.json')
    local checked = 0
    for _, row in ipairs(cmp.sheets.GEMM_intersect_mi300.rows) do
      local key = table.concat({ row.name, json.encode(row['h100::Input Dims_first']) }, ' ')
      local pair
      for _, p in ipairs(c.pairs) do
        local ra = p.a
        if ra.name == row.name and ra.key:find(json.encode(row['h100::Input Dims_first']):gsub(
          '%s', ''), 1, true) then
          pair = p
        end
      end
      assert(pair, 'no pair for ' .. key)
      assert(rel(pair.a.tflops, row['h100::TFLOPS/s_mean']) <= 0.01, key)
      assert(rel(pair.b.tflops, row['mi300::TFLOPS/s_mean']) <= 0.01, key)
      assert.are.equal(row['h100::name_count'], pair.a.calls)
      assert.are.equal(row['mi300::name_count'], pair.b.calls)
      checked = checked + 1
    end
    assert.are.equal(5, checked)
    -- savings: the side below the other's efficiency, at the other's efficiency
    for _, p in ipairs(c.pairs) do
      if p.a.pct and p.b.pct and p.b.pct < p.a.pct then
        assert.is_true(rel(p.save_b, p.b.per_step * (1 - p.b.pct / p.a.pct)) < 1e-9)
        assert.are.equal(0, p.save_a)
      end
    end
    for i = 2, #c.pairs do
      assert.is_true(c.pairs[i - 1].save >= c.pairs[i].save)
    end
    -- verdicts per class, and the explanation's class rows carry their pairs
    local gemm_verdict
    for _, v in ipairs(c.verdicts) do
      if v:find('^gemm: ') then
        gemm_verdict = v
      end
    end
    assert.is_truthy(gemm_verdict and gemm_verdict:find('MI300X at %d+%% of its bf16 peak, '
      .. 'H100 at %d+%%'))
    local with_ops = 0
    for _, row in ipairs(e.rows) do
      with_ops = with_ops + (row.ops and #row.ops > 0 and 1 or 0)
    end
    assert.is_true(with_ops >= 3)
    assert.is_true(c.matched_a > 0.9 and c.matched_b > 0.9)
  end)

  it('takes a user model in front of the built-in ones, and forgets it', function()
    ops.model { name = 'aten::mm', class = 'gemm', category = 'GEMM', fn = function(op)
      local m, k, n = op.dims[1][1], op.dims[1][2], op.dims[2][2]
      return { flops = 4 * m * n * k, bytes = 0, precision = 'bf16', compute = 'matrix' }
    end }
    local a = assert(trace.open(DIR .. '/qwen05b_h100.json.gz', { ops = true }))
    ops.reset_models()
    local mm = a.ops.rows[1]
    assert.are.equal('aten::mm', mm.name)
    assert.are.equal(4 * 8944 * 2816 * 1024 / 1e9, mm.gflops)
    assert.has_error(function()
      ops.model({ name = 'x' })
    end)
  end)
end)
