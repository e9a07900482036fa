-- tp.analyse._ops_compare: the op tables of tp.analyse.ops across ranks and across platforms.
-- merge adds up the ranks of one run; compare pairs the same op (name, Input Dims, Input type)
-- on two platforms, where the kernels that ran it differ by vendor: time per step and % of each
-- side's own limit, the time each side would save at the other's efficiency, and one verdict per
-- class (hardware or software). docs/trace.md ("The same op on two platforms").

local M = {}

local SUMS = { 'calls', 'ops', 'own', 'own_ops', 'time', 'time_sq', 'inv', 'forward', 'backward',
  'optimizer', 'kernel_sum', 'memcpy_sum', 'memset_sum' }

local function copy_row(r)
  local out = {}
  for k, v in pairs(r) do
    out[k] = v
  end
  out.kernels = {}
  for i, k in ipairs(r.kernels or {}) do
    out.kernels[i] = { name = k.name, class = k.class, count = k.count, total = k.total }
  end
  return out
end

local function full_key(r)
  return table.concat({ r.name, r.dims_text or '', r.types_text or '', r.strides_text or '',
    r.concrete_text or '' }, '\t')
end

-- Adds the kernels of `from` to those of `into` (by name), keeping the four largest.
local function add_kernels(into, from)
  local by = {}
  for _, k in ipairs(into.kernels) do
    by[k.name] = k
  end
  for _, k in ipairs(from.kernels or {}) do
    local e = by[k.name]
    if e then
      e.count, e.total = e.count + k.count, e.total + k.total
    else
      e = { name = k.name, class = k.class, count = k.count, total = k.total }
      by[k.name] = e
      into.kernels[#into.kernels + 1] = e
    end
  end
  table.sort(into.kernels, function(x, y)
    if x.total ~= y.total then
      return x.total > y.total
    end
    return x.name < y.name
  end)
  for i = #into.kernels, 5, -1 do
    into.kernels[i] = nil
  end
end

--- One op table from several ranks' (same run): rows of the same key added up; the per-step
--- figures divide by steps x ranks, so they are each rank's mean. `efficiency` is
--- tp.analyse.ops.class_efficiency, `derive` tp.analyse.ops.derive.
function M.merge(tables, efficiency, derive)
  local by, rows = {}, {}
  local out = { linked = 0, unlinked = 0, own = 0, malformed = 0, warnings = {},
    ranks = #tables, device = tables[1].device, peaks = tables[1].peaks }
  local steps = 0
  for _, t in ipairs(tables) do
    steps = steps + t.steps
    out.linked, out.unlinked = out.linked + t.linked, out.unlinked + t.unlinked
    out.own, out.malformed = out.own + t.own, out.malformed + t.malformed
    for _, w in ipairs(t.warnings) do
      out.warnings[#out.warnings + 1] = w
    end
    for _, r in ipairs(t.rows) do
      local k = full_key(r)
      local m = by[k]
      if not m then
        m = copy_row(r)
        by[k] = m
        rows[#rows + 1] = m
      else
        for _, f in ipairs(SUMS) do
          m[f] = (m[f] or 0) + (r[f] or 0)
        end
        if r.min and (not m.min or r.min < m.min) then
          m.min = r.min
        end
        if r.max and (not m.max or r.max > m.max) then
          m.max = r.max
        end
        add_kernels(m, r)
      end
    end
  end
  out.steps = steps
  for _, r in ipairs(rows) do
    derive(r, steps)
  end
  table.sort(rows, function(x, y)
    if x.own ~= y.own then
      return x.own > y.own
    end
    return full_key(x) < full_key(y)
  end)
  out.rows = rows
  out.classes = efficiency(rows)
  return out
end

-- --- two platforms -----------------------------------------------------------------------------

local function pair_key(r)
  return table.concat({ r.name, r.dims_text or '', r.types_text or '' }, '\t')
end

-- The rows of one side by pair key: rows that differ only in strides or scalar inputs are one.
-- Each entry: per_step, time-weighted % of limit (datasheet and measured), TFLOP/s, bound.
local function side(t)
  local by, order = {}, {}
  for _, r in ipairs(t.rows) do
    if r.own > 0 then
      local k = pair_key(r)
      local e = by[k]
      if not e then
        e = { key = k, name = r.name, shapes = r.shapes, precision = r.precision,
          category = r.category, class = r.class, per_step = 0, own = 0, w_pct = 0, t_pct = 0,
          w_mpct = 0, t_mpct = 0, w_tflops = 0, t_tflops = 0, calls = 0 }
        by[k] = e
        order[#order + 1] = e
      end
      e.per_step = e.per_step + r.per_step
      e.own = e.own + r.own
      e.calls = e.calls + r.calls
      e.kernel = e.kernel or (r.kernels[1] and r.kernels[1].name)
      if r.pct then
        e.w_pct, e.t_pct = e.w_pct + r.pct * r.own, e.t_pct + r.own
        e.bound = e.bound or r.bound
      end
      if r.measured_pct then
        e.w_mpct, e.t_mpct = e.w_mpct + r.measured_pct * r.own, e.t_mpct + r.own
      end
      if r.tflops then
        e.w_tflops, e.t_tflops = e.w_tflops + r.tflops * r.own, e.t_tflops + r.own
      end
    end
  end
  for _, e in ipairs(order) do
    e.pct = e.t_pct > 0 and e.w_pct / e.t_pct or nil
    e.measured_pct = e.t_mpct > 0 and e.w_mpct / e.t_mpct or nil
    e.tflops = e.t_tflops > 0 and e.w_tflops / e.t_tflops or nil
    e.w_pct, e.t_pct, e.w_mpct, e.t_mpct, e.w_tflops, e.t_tflops = nil, nil, nil, nil, nil, nil
  end
  return by, order
end

-- Time per step one side would save at the other side's efficiency (0 when it is the better).
local function saving(per_step, mine, theirs)
  if not mine or not theirs or theirs <= mine or theirs <= 0 then
    return 0
  end
  return per_step * (1 - mine / theirs)
end

local function fmt_pct(x)
  return x and string.format('%.0f%%', 100 * x) or '-'
end

--- The share of a class's time (on each side) its paired, modelled ops must cover for a verdict.
M.MIN_COVERAGE = 0.5

-- One verdict per class from its paired ops: each side's time-weighted % of its own limit.
local function verdict(c, la, lb)
  local ea, eb = c.eff_a, c.eff_b
  if not ea or not eb then
    return nil
  end
  local cover = math.min(c.time_a > 0 and c.ta / c.time_a or 0, c.time_b > 0 and c.tb / c.time_b
    or 0)
  if cover < M.MIN_COVERAGE then
    return string.format('%s: no verdict, the paired ops with a model cover only %.0f%% of its '
      .. 'time', c.class, 100 * cover)
  end
  local what = c.bound == 'memory' and 'of its memory bandwidth'
    or string.format('of its %s peak', c.precision or 'compute')
  local slower_is_b = c.time_b > c.time_a
  local e_slow, e_fast = slower_is_b and eb or ea, slower_is_b and ea or eb
  local slow = slower_is_b and lb or la
  local cause
  if math.abs(ea - eb) <= 0.1 * math.max(ea, eb) then
    cause = c.bound == 'memory' and 'hardware: both reach the same share of their bandwidth, '
      .. 'the difference is the chips\' memory' or 'hardware: both reach the same share of '
      .. 'their peak, the difference is the chips\' peaks'
  elseif e_slow < e_fast then
    cause = string.format('software (kernel efficiency): %s reaches less of its own limit, not '
      .. 'the chip\'s peak', slow)
  else
    cause = string.format('hardware: %s reaches more of its own limit and is still slower',
      slow)
  end
  return string.format('%s: %s at %s %s, %s at %s: %s', c.class, lb, fmt_pct(eb), what, la,
    fmt_pct(ea), cause)
end

--- Pairs two runs' op tables (a: the baseline, b: the other), as tp.analyse.ops.compare says.
--- Returns { labels, pairs = { {name, shapes, a = side entry, b = side entry, save_a, save_b,
--- save} ... } largest saving first, only_a, only_b (unmatched, by time), classes = { [class] =
--- { class, time_a, time_b, eff_a, eff_b, bound, precision, verdict, top = pairs } }, verdicts,
--- matched_a, matched_b (share of each side's op time in pairs) }.
function M.compare(ta, tb, labels, explanation)
  local la, lb = labels[1], labels[2]
  local by_a, order_a = side(ta)
  local by_b, order_b = side(tb)
  local pairs_, only_a, only_b = {}, {}, {}
  local matched_a, matched_b, total_a, total_b = 0, 0, 0, 0
  for _, ea in ipairs(order_a) do
    total_a = total_a + ea.per_step
    local eb = by_b[ea.key]
    if eb then
      local p = { name = ea.name, shapes = ea.shapes, precision = ea.precision or eb.precision,
        category = ea.category or eb.category, class = ea.class, a = ea, b = eb,
        save_a = saving(ea.per_step, ea.pct, eb.pct),
        save_b = saving(eb.per_step, eb.pct, ea.pct) }
      p.save = math.max(p.save_a, p.save_b)
      p.diff = eb.per_step - ea.per_step
      pairs_[#pairs_ + 1] = p
      matched_a = matched_a + ea.per_step
    else
      only_a[#only_a + 1] = ea
    end
  end
  for _, eb in ipairs(order_b) do
    total_b = total_b + eb.per_step
    if by_a[eb.key] then
      matched_b = matched_b + eb.per_step
    else
      only_b[#only_b + 1] = eb
    end
  end
  table.sort(pairs_, function(x, y)
    if x.save ~= y.save then
      return x.save > y.save
    end
    if math.abs(x.diff) ~= math.abs(y.diff) then
      return math.abs(x.diff) > math.abs(y.diff)
    end
    return x.a.key < y.a.key
  end)
  local by_time = function(x, y)
    if x.per_step ~= y.per_step then
      return x.per_step > y.per_step
    end
    return x.key < y.key
  end
  table.sort(only_a, by_time)
  table.sort(only_b, by_time)
  -- Per class: the paired ops' efficiency on each side, weighted by each side's time.
  local classes, corder = {}, {}
  local function class_of(name)
    local c = classes[name]
    if not c then
      c = { class = name, time_a = 0, time_b = 0, wa = 0, ta = 0, wb = 0, tb = 0, top = {},
        bounds = {}, precisions = {} }
      classes[name] = c
      corder[#corder + 1] = c
    end
    return c
  end
  for _, e in ipairs(order_a) do
    local c = class_of(e.class)
    c.time_a = c.time_a + e.per_step
  end
  for _, e in ipairs(order_b) do
    local c = class_of(e.class)
    c.time_b = c.time_b + e.per_step
  end
  for _, p in ipairs(pairs_) do
    local c = class_of(p.class)
    if p.a.pct and p.b.pct then
      c.wa, c.ta = c.wa + p.a.pct * p.a.per_step, c.ta + p.a.per_step
      c.wb, c.tb = c.wb + p.b.pct * p.b.per_step, c.tb + p.b.per_step
      local bound = p.a.bound or p.b.bound
      if bound then
        c.bounds[bound] = (c.bounds[bound] or 0) + p.a.per_step + p.b.per_step
      end
      if p.precision and bound == 'compute' then
        c.precisions[p.precision] = (c.precisions[p.precision] or 0) + p.a.per_step
      end
    end
    if #c.top < 3 then
      c.top[#c.top + 1] = p
    end
  end
  local verdicts = {}
  for _, c in ipairs(corder) do
    c.eff_a = c.ta > 0 and c.wa / c.ta or nil
    c.eff_b = c.tb > 0 and c.wb / c.tb or nil
    c.bound = (c.bounds.compute or 0) >= (c.bounds.memory or 0) and 'compute' or 'memory'
    local best, bt
    for prec, t in pairs(c.precisions) do
      if not bt or t > bt or (t == bt and prec < best) then
        best, bt = prec, t
      end
    end
    c.precision = best
    c.verdict = verdict(c, la, lb)
    c.wa, c.ta, c.wb, c.tb, c.bounds, c.precisions = nil, nil, nil, nil, nil, nil
  end
  table.sort(corder, function(x, y)
    local dx, dy = math.abs(x.time_b - x.time_a), math.abs(y.time_b - y.time_a)
    if dx ~= dy then
      return dx > dy
    end
    return x.class < y.class
  end)
  for _, c in ipairs(corder) do
    if c.verdict then
      verdicts[#verdicts + 1] = c.verdict
    end
  end
  -- The explanation's class rows get their top pairs.
  if explanation then
    for _, row in ipairs(explanation.rows or {}) do
      local c = classes[row.key]
      if c then
        row.ops = c.top
        row.verdict = c.verdict
      end
    end
  end
  return { labels = labels, pairs = pairs_, only_a = only_a, only_b = only_b,
    classes = classes, class_order = corder, verdicts = verdicts,
    matched_a = total_a > 0 and matched_a / total_a or nil,
    matched_b = total_b > 0 and matched_b / total_b or nil,
    step_ops_a = total_a, step_ops_b = total_b }
end

return M
