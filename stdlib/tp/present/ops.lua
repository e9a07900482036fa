-- tp.present.ops: the op tables of tp.analyse.ops as text (tplua trace --ops, --compare) and as
-- Markdown (report.md), and the roofline chart (tp.present.plot: achieved TFLOP/s against FLOPs
-- per byte, each platform's ceilings, both vendors on one chart in a comparison).

local tbl = require('tp.present._table')
local analyse_ops = require('tp.analyse.ops')

local M = {}

local function num(v, fmt)
  if v == nil or v ~= v then
    return '-'
  end
  return string.format(fmt, v)
end

local function pct(v)
  return v and string.format('%.0f%%', 100 * v) or '-'
end

-- "bf16 989.4 TFLOP/s dense, 3.35 TB/s" for a table's device.
local function device_text(t)
  local d = t.device or {}
  if not d.name then
    return 'no device named in the trace: no limits'
  end
  if not d.catalog then
    return string.format('%s: %s', d.name, d.why or 'not in the catalog: no limits')
  end
  local pk = d.peak_tflops or {}
  local parts = {}
  for _, p in ipairs({ 'bf16', 'fp16', 'fp8', 'fp32' }) do
    if pk[p] then
      parts[#parts + 1] = string.format('%s %.1f', p, pk[p])
    end
  end
  return string.format('%s = catalog %s (dense TFLOP/s: %s; %s TB/s)', d.name, d.catalog,
    table.concat(parts, ', '), num(d.bandwidth_tbs, '%.2f'))
end

local function measured(t)
  return t.peaks ~= nil
end

--- The text of one op table (tp.analyse.ops.from_trace / merge): the `top` ops by time, then
--- each class's time-weighted efficiency, then the warnings.
function M.table_text(t, opts)
  opts = opts or {}
  local top = opts.top or 15
  local out = {}
  out[#out + 1] = string.format('  ops: %d GPU ops linked to the CPU op that launched them, %d '
    .. 'not%s; %s', t.linked, t.unlinked, t.ranks and string.format(' (%d ranks)', t.ranks) or '',
    device_text(t))
  if t.peaks then
    out[#out + 1] = string.format('  measured peaks: %s (%s)', t.peaks.source or '?',
      t.peaks.gpu or 'cpu')
  end
  if #t.rows == 0 then
    out[#out + 1] = '  no GPU op could be linked to a CPU op: the trace needs CPU ops '
      .. '(torch.profiler with record_shapes=True) and launch events'
    return table.concat(out, '\n') .. '\n'
  end
  local header = { 'op', 'shapes', 'dtype', 'calls', 'ms/step', 'mean us', 'GFLOP', 'MB',
    'FLOP/B', 'TFLOP/s', 'TB/s', '% limit', 'bound' }
  if measured(t) then
    header[#header + 1] = '% meas.'
  end
  header[#header + 1] = 'kernel'
  local rows = {}
  for i = 1, math.min(top, #t.rows) do
    local r = t.rows[i]
    local row = { tbl.short(r.name, 40), tbl.short(r.shapes or '-', 34), r.precision or '-',
      tostring(r.calls), num(r.per_step / 1e6, '%.3f'), num(r.mean and r.mean / 1e3, '%.2f'),
      num(r.gflops, '%.3f'), num(r.mb, '%.2f'), num(r.intensity, '%.1f'), num(r.tflops, '%.1f'),
      num(r.tbs, '%.2f'), pct(r.pct), r.bound or (r.skipped and 'skipped') or '-' }
    if measured(t) then
      row[#row + 1] = pct(r.measured_pct)
    end
    row[#row + 1] = r.kernels[1] and tbl.short(r.kernels[1].name, 44) or '-'
    rows[#rows + 1] = row
  end
  out[#out + 1] = string.format('  top %d ops of %d by GPU time (ms/step: the GPU ops each op '
    .. 'owns, per step; mean us: busy time per call; %% limit: the time the roofline allows '
    .. 'over the time taken)', math.min(top, #t.rows), #t.rows)
  tbl.text(out, header, rows, nil, true)
  local crow = {}
  for _, c in ipairs(t.classes or {}) do
    if c.own > 0 then
      crow[#crow + 1] = { c.class, num(c.own / t.steps / 1e6, '%.3f'), pct(c.coverage),
        pct(c.efficiency), c.main_bound and (c.main_bound .. (c.main_bound == 'compute'
          and c.main_precision and (' (' .. c.main_precision .. ')') or '')) or '-',
        measured(t) and pct(c.efficiency_measured) or nil }
    end
  end
  if #crow > 0 then
    out[#out + 1] = '  per class: % of the roofline limit, weighted by time, over its modelled '
      .. 'ops'
    local h = { 'class', 'ms/step', 'modelled', 'efficiency', 'bound' }
    if measured(t) then
      h[#h + 1] = '% meas.'
    end
    tbl.text(out, h, crow)
  end
  for _, w in ipairs(t.warnings or {}) do
    out[#out + 1] = '  warning: ' .. w
  end
  return table.concat(out, '\n') .. '\n'
end

local function side_cells(e)
  if not e then
    return '-', '-', '-'
  end
  return num(e.per_step / 1e6, '%.3f'), num(e.tflops, '%.1f'), pct(e.pct)
end

local function who_saves(p, la, lb)
  if p.save <= 0 then
    return '-'
  end
  if p.save_b >= p.save_a then
    return string.format('%s %.3f', lb, p.save_b / 1e6)
  end
  return string.format('%s %.3f', la, p.save_a / 1e6)
end

--- The text of a pairing (tp.analyse.ops.compare): the paired ops by the time each side would
--- save at the other's efficiency, each class's verdict, the explanation's class rows with their
--- top pairs, and the ops found on one side only.
function M.compare_text(c, e, opts)
  opts = opts or {}
  local top = opts.top or 15
  local la, lb = c.labels[1], c.labels[2]
  local out = {}
  out[#out + 1] = string.format('the same ops on both: %d ops (op, shapes, dtype) on both sides, '
    .. '%s of %s\'s op time, %s of %s\'s', #c.pairs, pct(c.matched_a), la, pct(c.matched_b), lb)
  if #c.pairs > 0 then
    local rows = {}
    for i = 1, math.min(top, #c.pairs) do
      local p = c.pairs[i]
      local a1, a2, a3 = side_cells(p.a)
      local b1, b2, b3 = side_cells(p.b)
      rows[#rows + 1] = { tbl.short(p.name, 40), tbl.short(p.shapes or '-', 30),
        p.precision or '-', a1, b1, a2, b2, a3, b3, who_saves(p, la, lb) }
    end
    tbl.text(out, { 'op', 'shapes', 'dtype', la .. ' ms/step', lb .. ' ms/step',
      la .. ' TFLOP/s', lb .. ' TFLOP/s', la .. ' % limit', lb .. ' % limit',
      'saves ms/step at the other\'s efficiency' }, rows, nil, true)
  end
  if #c.verdicts > 0 then
    out[#out + 1] = '  hardware or software, per class (paired ops, % of each side\'s own limit):'
    for _, v in ipairs(c.verdicts) do
      out[#out + 1] = '    ' .. v
    end
  end
  if e then
    local lines = {}
    for _, row in ipairs(e.rows) do
      if row.ops and #row.ops > 0 then
        lines[#lines + 1] = string.format('    %s %+.3f ms/step:', row.label, row.diff / 1e6)
        for _, p in ipairs(row.ops) do
          lines[#lines + 1] = string.format('      %s %s: %s %s ms/step at %s, %s %s at %s',
            tbl.short(p.name, 48), tbl.short(p.shapes or '-', 30), la,
            num(p.a.per_step / 1e6, '%.3f'), pct(p.a.pct), lb, num(p.b.per_step / 1e6, '%.3f'),
            pct(p.b.pct))
        end
      end
    end
    if #lines > 0 then
      out[#out + 1] = '  the explanation\'s classes and their largest paired ops:'
      for _, l in ipairs(lines) do
        out[#out + 1] = l
      end
    end
  end
  for _, s in ipairs({ { la, c.only_a }, { lb, c.only_b } }) do
    if #s[2] > 0 then
      local parts = {}
      for i = 1, math.min(5, #s[2]) do
        local x = s[2][i]
        parts[#parts + 1] = string.format('%s %s %.3f ms/step', x.name, x.shapes or '-',
          x.per_step / 1e6)
      end
      out[#out + 1] = string.format('  only on %s (%d): %s', s[1], #s[2],
        table.concat(parts, '; '))
    end
  end
  return table.concat(out, '\n') .. '\n'
end

local function md(s)
  return (tostring(s):gsub('|', '\\|'))
end

--- The Markdown of one op table: the top ops and the per-class efficiency.
function M.markdown(t, label, opts)
  opts = opts or {}
  local out = {}
  out[#out + 1] = string.format('#### Ops: %s', md(label or '?'))
  out[#out + 1] = ''
  out[#out + 1] = md(device_text(t)) .. string.format('; %d GPU ops linked, %d not.', t.linked,
    t.unlinked)
  out[#out + 1] = ''
  local m = measured(t)
  out[#out + 1] = '| op | shapes | dtype | calls | ms/step | TFLOP/s | TB/s | % of limit |'
    .. (m and ' % of measured peak |' or '') .. ' bound |'
  out[#out + 1] = '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |'
    .. (m and ' ---: |' or '') .. ' --- |'
  for i = 1, math.min(opts.top or 10, #t.rows) do
    local r = t.rows[i]
    out[#out + 1] = string.format('| %s | %s | %s | %d | %s | %s | %s | %s |%s %s |', md(r.name),
      md(r.shapes or '-'), r.precision or '-', r.calls, num(r.per_step / 1e6, '%.3f'),
      num(r.tflops, '%.1f'), num(r.tbs, '%.2f'), pct(r.pct),
      m and (' ' .. pct(r.measured_pct) .. ' |') or '', r.bound or '-')
  end
  out[#out + 1] = ''
  for _, c in ipairs(t.classes or {}) do
    if c.efficiency then
      out[#out + 1] = string.format('- %s: %s of the roofline limit (time-weighted, %s of its '
        .. 'time modelled, mostly %s-bound)%s', c.class, pct(c.efficiency), pct(c.coverage),
        c.main_bound or '?', c.efficiency_measured and
          string.format('; %s of the measured limit', pct(c.efficiency_measured)) or '')
    end
  end
  out[#out + 1] = ''
  return table.concat(out, '\n')
end

--- The Markdown of a pairing: verdicts and the top pairs.
function M.compare_markdown(c, opts)
  opts = opts or {}
  local la, lb = c.labels[1], c.labels[2]
  local out = { '#### The same ops on both platforms', '' }
  for _, v in ipairs(c.verdicts) do
    out[#out + 1] = '- ' .. md(v)
  end
  out[#out + 1] = ''
  out[#out + 1] = string.format('| op | shapes | %s ms/step | %s ms/step | %s %% of limit | %s %% '
    .. 'of limit |', md(la), md(lb), md(la), md(lb))
  out[#out + 1] = '| --- | --- | ---: | ---: | ---: | ---: |'
  for i = 1, math.min(opts.top or 10, #c.pairs) do
    local p = c.pairs[i]
    out[#out + 1] = string.format('| %s | %s | %s | %s | %s | %s |', md(p.name), md(p.shapes),
      num(p.a.per_step / 1e6, '%.3f'), num(p.b.per_step / 1e6, '%.3f'), pct(p.a.pct),
      pct(p.b.pct))
  end
  out[#out + 1] = ''
  return table.concat(out, '\n')
end

-- The ceiling of a table's device for its main precision: { peak = TFLOP/s, bw = TB/s }.
local function ceiling(t)
  local d = t.device or {}
  local prec = 'bf16'
  local best = 0
  local by = {}
  for _, r in ipairs(t.rows) do
    if r.compute == 'matrix' and r.precision then
      by[r.precision] = (by[r.precision] or 0) + r.own
    end
  end
  for p, v in pairs(by) do
    if v > best or (v == best and p < prec) then
      prec, best = p, v
    end
  end
  local peak = d.peak_tflops and d.peak_tflops[prec]
  return peak and d.bandwidth_tbs and { peak = peak, bw = d.bandwidth_tbs, precision = prec }
    or nil
end

--- The roofline chart of one or more op tables (`sides`: { { label =, table = } ... }) for
--- tp.present.plot.render: each side's modelled ops as points (FLOPs per byte, achieved TFLOP/s)
--- and its ceiling (min(peak, bandwidth x intensity)) for its main precision; nil when no op has
--- both figures.
function M.roofline_chart(sides, title)
  local series = {}
  local lo, hi = math.huge, 0
  for _, s in ipairs(sides) do
    for _, r in ipairs(s.table.rows) do
      if r.intensity and r.intensity > 0 and r.tflops and r.tflops > 0 then
        lo, hi = math.min(lo, r.intensity), math.max(hi, r.intensity)
      end
    end
  end
  if hi == 0 then
    return nil
  end
  lo, hi = lo / 4, hi * 4
  local palette = { { '#1f77b4', '#aec7e8' }, { '#d62728', '#ff9896' }, { '#2ca02c', '#98df8a' } }
  for i, s in ipairs(sides) do
    local colors = palette[(i - 1) % #palette + 1]
    local c = ceiling(s.table)
    if c then
      local ridge = c.peak / c.bw
      local xs, ys = { lo }, { math.min(c.peak, c.bw * lo) }
      if ridge > lo and ridge < hi then
        xs[#xs + 1], ys[#ys + 1] = ridge, c.peak
      end
      xs[#xs + 1], ys[#ys + 1] = hi, math.min(c.peak, c.bw * hi)
      series[#series + 1] = { title = string.format('%s limit (%s %.0f TFLOP/s, %.2f TB/s)',
        s.label, c.precision, c.peak, c.bw), color = colors[1], x = xs, y = ys, dash = 2 }
    end
    local xs, ys = {}, {}
    for _, r in ipairs(s.table.rows) do
      if r.intensity and r.intensity > 0 and r.tflops and r.tflops > 0 then
        xs[#xs + 1], ys[#ys + 1] = r.intensity, r.tflops
      end
    end
    if #xs > 0 then
      series[#series + 1] = { title = s.label .. ' ops', color = colors[1], x = xs, y = ys,
        style = 'points' }
    end
  end
  return { kind = 'lines', title = title or 'roofline: each op against its GPU\'s limits',
    xlabel = 'FLOPs per byte moved', ylabel = 'TFLOP/s', xlog = true, ylog = true,
    series = series }
end

analyse_ops.set_text(function(t)
  return M.table_text(t)
end)

return M
