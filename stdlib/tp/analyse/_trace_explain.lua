-- tp.analyse._trace_explain: the parts of tp.analyse.trace that look across traces: the mean
-- step of a run's ranks, stragglers among the ranks, the explanation of the difference in step
-- time between two runs (rows that add up to it), and the summary a run record keeps.
local idle = require('tp.analyse._trace_idle')
local median = require('tp.analyse._trace_checks').median -- nil for none

local M = {}

local FIELDS = { 'window', 'busy', 'idle', 'compute', 'non_compute', 'comm', 'comm_overlapped',
  'comm_exposed', 'host_wait', 'dataloader', 'cpu_step' }

local CLASS_FIELDS = { 'count', 'sum', 'time', 'exclusive' }

--- The mean step over the ranks that have GPU ops (each rank's mean over its steady steps), or
--- nil when none has.
function M.mean_of_ranks(ranks)
  local with = {}
  for _, a in ipairs(ranks) do
    if a.gpu and a.mean.steps > 0 then
      with[#with + 1] = a
    end
  end
  if #with == 0 then
    return nil
  end
  local m = { ranks = #with, steps = 0, class = {}, classes = with[1].classes }
  for _, f in ipairs(FIELDS) do
    local s, n = 0, 0
    for _, a in ipairs(with) do
      if a.mean[f] then
        s, n = s + a.mean[f], n + 1
      end
    end
    m[f] = n > 0 and s / n or nil
  end
  for _, a in ipairs(with) do
    m.steps = m.steps + a.mean.steps
  end
  for _, c in ipairs(m.classes) do
    local agg = {}
    for _, f in ipairs(CLASS_FIELDS) do
      local s = 0
      for _, a in ipairs(with) do
        s = s + a.mean.class[c.name][f]
      end
      agg[f] = s / #with
    end
    m.class[c.name] = agg
  end
  m.overlap = (m.comm or 0) > 0 and m.comm_overlapped / m.comm or nil
  m.cause = idle.mean_of_ranks(with)
  return m
end


--- Ranks whose idle time or exposed communication per step stands out: with three ranks or
--- more, further from the median than 3 scaled MADs and than 2% of the step; with two, a gap
--- over 5% of the step between them. Returns a list of
--- { rank =, metric =, value =, median =, message = }.
function M.stragglers(ranks)
  local with = {}
  for _, a in ipairs(ranks) do
    if a.gpu and a.mean.steps > 0 then
      with[#with + 1] = a
    end
  end
  local out = {}
  if #with < 2 then
    return out
  end
  local windows = {}
  for i, a in ipairs(with) do
    windows[i] = a.mean.window
  end
  local step = median(windows)
  for _, metric in ipairs({ 'idle', 'comm_exposed' }) do
    local xs = {}
    for i, a in ipairs(with) do
      xs[i] = a.mean[metric] or 0
    end
    local med = median(xs)
    local dev = {}
    for i, x in ipairs(xs) do
      dev[i] = math.abs(x - med)
    end
    local mad = 1.4826 * median(dev)
    for i, a in ipairs(with) do
      local d = math.abs(xs[i] - med)
      local flagged
      if #with >= 3 then
        flagged = d > 3 * mad and d > 0.02 * step
      else
        flagged = d * 2 > 0.05 * step and xs[i] > med
      end
      if flagged then
        local label = a.rank and ('rank ' .. a.rank) or a.path
        out[#out + 1] = { rank = a.rank, path = a.path, metric = metric, value = xs[i],
          median = med, message = string.format('%s: %s %.3f ms/step against a median of %.3f '
            .. 'ms over %d ranks (step %.3f ms)', label, metric:gsub('_', ' '), xs[i] / 1e6,
            med / 1e6, #with, step / 1e6) }
      end
    end
  end
  return out
end

-- A run's mean step: from M.analyse's result, or one analysis of tp.analyse.trace.open.
local function step_of(x)
  if x.ranks then
    return x.mean, #x.ranks
  end
  return x.mean.steps > 0 and x.mean or nil, 1
end

-- The rows of one side: each class's share of the step, then idle; they add up to the window.
local function rows_of(m)
  local rows = {}
  for _, c in ipairs(m.classes) do
    rows[#rows + 1] = { key = c.name, kind = c.kind, value = m.class[c.name].exclusive }
  end
  rows[#rows + 1] = { key = 'idle', kind = 'idle', value = m.idle }
  return rows
end

local function row_label(key, kind)
  if kind == 'communication' or kind == 'memory' then
    return key .. ' exposed'
  end
  return key
end

--- Explains the difference in step time between two runs (a: the baseline, b: the other).
--- Returns { a =, b =, labels =, step_a =, step_b =, diff =, ratio =, rows = { { key, label,
--- kind, a, b, diff, share } ... } largest |diff| first, sum =, overlap_a, overlap_b,
--- lines = { 'attention +38.000 ms/step (62% of the gap)', ... }, warnings = {...} }, or nil
--- and a message when a side has no GPU steps.
function M.explain(a, b, labels)
  labels = labels or { 'A', 'B' }
  local ma = step_of(a)
  local mb = step_of(b)
  if not ma or not mb then
    return nil, string.format('trace explain: %s has no GPU steps to compare',
      not ma and labels[1] or labels[2])
  end
  local ra, rb = rows_of(ma), rows_of(mb)
  local by_key = {}
  local rows = {}
  for _, r in ipairs(ra) do
    local row = { key = r.key, kind = r.kind, label = row_label(r.key, r.kind), a = r.value,
      b = 0 }
    by_key[r.key] = row
    rows[#rows + 1] = row
  end
  for _, r in ipairs(rb) do
    local row = by_key[r.key]
    if not row then
      row = { key = r.key, kind = r.kind, label = row_label(r.key, r.kind), a = 0 }
      by_key[r.key] = row
      rows[#rows + 1] = row
    end
    row.b = r.value
  end
  local diff = mb.window - ma.window
  local kept, sum, moved = {}, 0, 0
  for _, row in ipairs(rows) do
    row.diff = row.b - row.a
    sum = sum + row.diff
    moved = moved + math.abs(row.diff)
    if row.a ~= 0 or row.b ~= 0 then
      row.share = diff ~= 0 and row.diff / diff or nil
      kept[#kept + 1] = row
    end
  end
  -- Each row's share of all the movement (the sum of |difference|): meaningful when rows move
  -- in opposite directions, where a share of the net gap is not (300% and -150%).
  for _, row in ipairs(kept) do
    row.moved = moved > 0 and math.abs(row.diff) / moved or nil
  end
  table.sort(kept, function(x, y)
    if math.abs(x.diff) ~= math.abs(y.diff) then
      return math.abs(x.diff) > math.abs(y.diff)
    end
    return x.key < y.key
  end)
  local e = { labels = labels, step_a = ma.window, step_b = mb.window, diff = diff,
    ratio = ma.window > 0 and mb.window / ma.window or nil, rows = kept, sum = sum,
    moved = moved, overlap_a = ma.overlap, overlap_b = mb.overlap, mean_a = ma, mean_b = mb,
    lines = {}, warnings = {},
    sign = 'difference = ' .. labels[2] .. ' - ' .. labels[1] .. ' (ms per step): positive where '
      .. labels[2] .. ' spends longer, negative where it spends less' }
  -- Which side is faster, and by how much of the slower side's step.
  if diff ~= 0 and ma.window > 0 and mb.window > 0 then
    local fast, slow = diff < 0 and 2 or 1, diff < 0 and 1 or 2
    local t = { ma.window, mb.window }
    e.faster = { side = fast, label = labels[fast], other = labels[slow], fast = t[fast],
      slow = t[slow], pct = 100 * (t[slow] - t[fast]) / t[slow] }
  end
  for _, row in ipairs(kept) do
    if moved > 0 and row.moved >= 0.01 then
      e.lines[#e.lines + 1] = string.format('%s %+.3f ms/step (%.0f%% of all movement)',
        row.label, row.diff / 1e6, 100 * row.moved)
    end
  end
  -- The host side of each: host wait and the idle causes, and whether it is launch-bound.
  e.host = {}
  for i, m in ipairs({ ma, mb }) do
    local bound = (m.idle or 0) > 0.1 * m.window and (m.host_wait or 0) > 0.5 * m.idle
    e.host[i] = { host_wait = m.host_wait or 0, idle = m.idle or 0, window = m.window,
      launch_bound = bound, cause = m.cause }
  end
  local n = {}
  for i, m in ipairs({ ma, mb }) do
    n[i] = 0
    for _, c in ipairs(m.classes) do
      n[i] = n[i] + m.class[c.name].count
    end
  end
  e.ops_per_step_a, e.ops_per_step_b = n[1], n[2]
  return e
end

local function ms(ns)
  return ns and math.floor(ns / 1e3 + 0.5) / 1e3 or nil
end

--- The compact summary of a run's traces kept in its record (profile.analysis): per-step means
--- in ms, the classes' exclusive time, the top kernels, stragglers and warnings.
function M.summary(run)
  local s = { ranks = #run.ranks, gpu = run.gpu == true, warnings = {}, errors = run.errors }
  for _, a in ipairs(run.ranks) do
    for _, w in ipairs(a.warnings) do
      s.warnings[#s.warnings + 1] = w
    end
  end
  for _, w in ipairs(run.warnings or {}) do
    s.warnings[#s.warnings + 1] = w
  end
  local m = run.mean
  if not m then
    return s
  end
  s.steps = m.steps
  for _, f in ipairs(FIELDS) do
    s[f .. '_ms'] = ms(m[f])
  end
  s.overlap = m.overlap
  if m.cause then
    s.idle_causes_ms = {}
    for _, c in ipairs(idle.CAUSES) do
      s.idle_causes_ms[c] = ms(m.cause[c])
    end
  end
  s.classes = {}
  for _, c in ipairs(m.classes) do
    local v = m.class[c.name]
    if v.exclusive > 0 or v.count > 0 then
      s.classes[c.name] = { kind = c.kind, exclusive_ms = ms(v.exclusive), time_ms = ms(v.time),
        sum_ms = ms(v.sum), count = v.count }
    end
  end
  s.top = {}
  local first = run.ranks[1]
  for i = 1, math.min(5, #first.top) do
    local k = first.top[i]
    s.top[i] = { name = k.name, class = k.class, count = k.count, total_ms = ms(k.total),
      mean_us = math.floor(k.mean / 10 + 0.5) / 100 }
  end
  s.stragglers = {}
  for _, st in ipairs(run.stragglers or {}) do
    s.stragglers[#s.stragglers + 1] = st.message
  end
  return s
end

return M
