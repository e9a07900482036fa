-- tp.present.memory: the memory of profiler traces (tp.analyse.memory) as text (tplua trace
-- --memory, --memory --compare, the REPL's run:memory()), the chart of one step's allocated and
-- reserved curves of two runs on one plot (tp.present.plot), and the pieces of the report's
-- memory section: each side's peaks and headroom, the measured peak against the plan's estimate
-- (tp.analyse._memory_plan) with where each figure came from. docs/memory.md.
local tbl = require('tp.present._table')
local analyse_memory = require('tp.analyse.memory')

local M = {}

local GIB, MIB, KIB = 1024 ^ 3, 1024 ^ 2, 1024

local SOURCE = { trace = 'profiler trace', log = 'framework log' }

--- Bytes as text: '1.945 GiB', '82.4 MiB', '3.0 KiB', '392 B'; '-' for nil.
---@param b? number
---@return string
function M.bytes(b)
  if type(b) ~= 'number' or b ~= b then
    return '-'
  end
  local a = math.abs(b)
  if a >= GIB then
    return string.format('%.3f GiB', b / GIB)
  elseif a >= MIB then
    return string.format('%.1f MiB', b / MIB)
  elseif a >= KIB then
    return string.format('%.1f KiB', b / KIB)
  end
  return string.format('%d B', math.floor(b))
end

local bytes = M.bytes

local function ms(ns)
  return type(ns) == 'number' and string.format('%.3f', ns / 1e6) or '-'
end

local function pct(part, whole)
  if type(part) ~= 'number' or type(whole) ~= 'number' or whole == 0 then
    return '-'
  end
  return string.format('%.0f%%', 100 * part / whole)
end

-- "aten::mm [8944,1024] [1024,2816]"
local function op_text(op, width)
  if not op then
    return '-'
  end
  local s = op.shapes and op.shapes ~= '-' and (op.name .. ' ' .. op.shapes) or op.name
  return width and tbl.short(s, width) or s
end

-- When the peak happened: "31.704 ms into step 6" (else since the first event).
local function when(mem, d)
  for _, s in ipairs(analyse_memory.steps_of(mem, d.label)) do
    if s.step ~= nil and s.step == d.peak_step and s.cpu_ts then
      return string.format('%s ms into step %d', ms(d.peak_ts - s.cpu_ts), s.step)
    end
  end
  return string.format('%s ms after the first memory event', ms(d.peak_time))
end

--- The categories of a peak as text: "held before the trace 0.917 GiB, temporaries 1.028 GiB".
---@param at table
---@return string
function M.categories_text(at)
  local parts = {}
  for _, c in ipairs(analyse_memory.CATEGORIES) do
    if (at[c] or 0) > 0 then
      parts[#parts + 1] = string.format('%s %s', analyse_memory.CATEGORY_LABELS[c], bytes(at[c]))
    end
  end
  return #parts > 0 and table.concat(parts, ', ') or 'nothing'
end

local function device_rows(mem)
  local rows = {}
  for _, d in ipairs(mem.devices) do
    rows[#rows + 1] = { d.label, tostring(d.events), tostring(d.allocs), bytes(d.alloc_bytes),
      bytes(d.peak), d.peak_step and tostring(d.peak_step) or '-', d.peak_phase,
      op_text(d.peak_op, 40), bytes(d.reserved_max), bytes(d.slack), bytes(d.live_end),
      d.capacity and bytes(d.capacity) or '-', d.headroom and bytes(d.headroom) or '-' }
  end
  return rows
end

--- The text of one trace's memory (tp.analyse.memory.of_trace's). opts.top: ops listed (15).
---@param mem table
---@param opts? {top?: integer, path?: string, step?: integer}
---@return string
function M.trace_text(mem, opts)
  opts = opts or {}
  local out = {}
  out[#out + 1] = string.format('  memory: %d [memory] events on %d device%s (bytes; '
    .. 'docs/memory.md)', mem.events, #mem.devices, #mem.devices == 1 and '' or 's')
  tbl.text(out, { 'device', 'events', 'allocs', 'allocated', 'peak allocated', 'step', 'phase',
    'op at the peak', 'reserved peak', 'slack at peak', 'live at end', 'capacity', 'headroom' },
    device_rows(mem), '  ', false)
  for _, d in ipairs(mem.devices) do
    out[#out + 1] = string.format('  %s: peak %s, %s, %s, in %s%s; reserved %s then (slack '
      .. '%s), at most %s', d.label, bytes(d.peak), when(mem, d), d.peak_phase,
      op_text(d.peak_op), d.name and (' (' .. d.name .. ')') or '', bytes(d.peak_reserved),
      bytes(d.slack), bytes(d.reserved_max))
    out[#out + 1] = string.format('    at the peak: %s', M.categories_text(d.at_peak))
    out[#out + 1] = string.format('    before the trace %s; at its end %s allocated, %s '
      .. 'reserved, %s of it allocated in the trace%s', bytes(d.before),
      bytes(d.end_allocated), bytes(d.end_reserved), bytes(d.live_end),
      d.capacity and string.format('; capacity %s (%s), headroom %s over the reserved peak',
        bytes(d.capacity), d.capacity_from, bytes(d.headroom)) or '')
  end
  -- Per step, on each device.
  for _, d in ipairs(mem.devices) do
    local rows = {}
    for _, s in ipairs(analyse_memory.steps_of(mem, d.label)) do
      if not opts.step or s.step == opts.step then
        local pp = s.phase_peak
        rows[#rows + 1] = { s.step and tostring(s.step) or (mem.devices and '-'),
          tostring(s.allocs), bytes(s.alloc_bytes), bytes(s.start), bytes(s.peak),
          s.peak_phase, op_text(s.peak_op, 36),
          pp.forward >= 0 and bytes(pp.forward) or '-',
          pp.backward >= 0 and bytes(pp.backward) or '-',
          pp.optimizer >= 0 and bytes(pp.optimizer) or '-', bytes(s['end']), bytes(s.held),
          bytes(s.temporary) }
      end
    end
    if #rows > 0 then
      out[#out + 1] = ''
      out[#out + 1] = string.format('  per step on %s (step -: events in no profiler step; '
        .. 'held: allocated in the step, live at its end; short-lived: freed inside the op '
        .. 'call that made it)', d.label)
      tbl.text(out, { 'step', 'allocs', 'allocated', 'at start', 'peak', 'phase', 'op at peak',
        'fwd peak', 'bwd peak', 'opt peak', 'at end', 'held', 'short-lived' }, rows, '  ')
    end
  end
  -- The ops that allocate most, on the primary device.
  local d = mem.primary
  local top = opts.top or 15
  local rows = {}
  local n, total = 0, 0
  for _, r in ipairs(mem.ops) do
    if r.device == d.label then
      n = n + 1
      total = total + r.bytes
      if #rows < top then
        rows[#rows + 1] = { tbl.short(r.name, 40), tbl.short(r.shapes, 36), r.dtype,
          tostring(r.allocs), bytes(r.bytes), pct(r.bytes, d.alloc_bytes), bytes(r.at_peak),
          bytes(r.temporary), bytes(r.live_end), r.phase or '-' }
      end
    end
  end
  if #rows > 0 then
    out[#out + 1] = ''
    out[#out + 1] = string.format('  top %d ops of %d by bytes allocated on %s (they add up '
      .. 'to %s, all its allocations)', #rows, n, d.label, bytes(total))
    tbl.text(out, { 'op', 'shapes', 'dtype', 'allocs', 'allocated', '%', 'live at peak',
      'short-lived', 'live at end', 'phase' }, rows, '  ')
  end
  if mem.against_plan then
    out[#out + 1] = ''
    out[#out + 1] = string.format('  against the plan\'s estimate (tp.plan.memory; measured from '
      .. 'the %s):', SOURCE[mem.against_plan.source] or mem.against_plan.source)
    for _, l in ipairs(M.plan_lines(mem.against_plan)) do
      out[#out + 1] = '    ' .. l
    end
    for _, note in ipairs(mem.against_plan.notes or {}) do
      out[#out + 1] = '    note: ' .. note
    end
  end
  for _, w in ipairs(mem.warnings) do
    out[#out + 1] = '  warning: ' .. w
  end
  return table.concat(out, '\n') .. '\n'
end

--- The text of a run's memory (tp.analyse.trace.analyse's, each rank with `memory`).
---@param run table
---@param opts? table as M.trace_text
---@return string
function M.run_text(run, opts)
  local out = {}
  for _, a in ipairs(run.ranks) do
    local dev = a.devices and a.devices[1]
    out[#out + 1] = string.format('memory of %s%s', a.path,
      type(dev) == 'table' and type(dev.name) == 'string' and ('  (' .. dev.name .. ')') or '')
    if a.info and a.info.truncated then
      out[#out + 1] = string.format('  warning: %s: truncated: read up to the cut (%d bytes); '
        .. 'what follows stops there', a.path, a.info.bytes)
    end
    if a.memory then
      out[#out + 1] = M.trace_text(a.memory, opts)
    else
      out[#out + 1] = '  no [memory] events in this trace (profile with profile_memory=True; '
        .. 'docs/memory.md)\n'
    end
  end
  return table.concat(out, '\n')
end

--- The text of a memory timeline export (tp.analyse._memory_timeline.read's).
---@param t table
---@return string
function M.timeline_text(t)
  local out = { string.format('memory timeline %s (PyTorch\'s export_memory_timeline, %s: %d '
    .. 'points)', t.path, t.format == 'raw' and 'raw events' or 'plot points', #t.times) }
  local first = t.times[1]
  local scale = t.time_unit == 'ns' and 1e6 or 1e3
  out[#out + 1] = string.format('  peak %s, %.3f ms after its first point; by PyTorch\'s '
    .. 'categories:', bytes(t.peak), (t.peak_time - first) / scale)
  local rows = {}
  for _, c in ipairs(analyse_memory.TIMELINE_CATEGORIES) do
    rows[#rows + 1] = { analyse_memory.TIMELINE_LABELS[c], bytes(t.at_peak[c]),
      pct(t.at_peak[c], t.peak) }
  end
  tbl.text(out, { 'category', 'at the peak', '%' }, rows, '  ')
  return table.concat(out, '\n') .. '\n'
end

--- The text of two runs' memory side by side (tp.analyse.memory.compare's).
---@param c table
---@param opts? {top?: integer}
---@return string
function M.compare_text(c, opts)
  local top = opts and opts.top or 10
  local a, b = c.sides[1], c.sides[2]
  local out = { string.format('memory: %s and %s side by side (their main device; bytes)',
    a.label, b.label) }
  local function row(label, f)
    return { label, f(a), f(b) }
  end
  local rows = {
    row('device', function(s)
      return s.name and (s.device .. ' ' .. s.name) or s.device
    end),
    row('peak allocated', function(s)
      return bytes(s.peak)
    end),
    row('  when', function(s)
      return string.format('step %s, %s', tostring(s.peak_step or '-'), s.peak_phase)
    end),
    row('  in op', function(s)
      return op_text(s.peak_op, 44)
    end),
    row('reserved at that peak', function(s)
      return bytes(s.peak_reserved)
    end),
    row('reserved peak', function(s)
      return bytes(s.reserved_max)
    end),
    row('slack (reserved - allocated)', function(s)
      return bytes(s.slack)
    end),
    row('held before the trace', function(s)
      return bytes(s.before)
    end),
    row('capacity', function(s)
      return s.capacity and string.format('%s (%s)', bytes(s.capacity), s.capacity_from) or '-'
    end),
    row('headroom over reserved peak', function(s)
      return s.headroom and string.format('%s (%s)', bytes(s.headroom),
        pct(s.headroom, s.capacity)) or '-'
    end),
    row('allocated in the trace', function(s)
      return string.format('%s in %d allocations', bytes(s.alloc_bytes), s.allocs)
    end),
  }
  for _, cat in ipairs(analyse_memory.CATEGORIES) do
    if (a.at_peak[cat] or 0) > 0 or (b.at_peak[cat] or 0) > 0 then
      rows[#rows + 1] = row('  at peak: ' .. analyse_memory.CATEGORY_LABELS[cat], function(s)
        return bytes(s.at_peak[cat])
      end)
    end
  end
  tbl.text(out, { '', a.label, b.label }, rows, '  ')
  if c.ratio then
    out[#out + 1] = string.format('  %s\'s peak is %.2fx %s\'s (%s against %s)', b.label,
      c.ratio, a.label, bytes(b.peak), bytes(a.peak))
  end
  out[#out + 1] = ''
  out[#out + 1] = string.format('  the ops that allocate, matched by op, shapes and dtype: %d '
    .. 'pairs, %s of %s\'s allocated bytes and %s of %s\'s', #c.pairs, pct(c.matched[1], 1),
    a.label, pct(c.matched[2], 1), b.label)
  local prs = {}
  for i = 1, math.min(top, #c.pairs) do
    local p = c.pairs[i]
    prs[i] = { tbl.short(p.name, 34), tbl.short(p.shapes, 34), p.dtype, bytes(p.a.bytes),
      bytes(p.b.bytes), tostring(p.a.allocs), tostring(p.b.allocs), bytes(p.a.at_peak),
      bytes(p.b.at_peak) }
  end
  if #prs > 0 then
    tbl.text(out, { 'op', 'shapes', 'dtype', a.label .. ' allocated', b.label .. ' allocated',
      a.label .. ' allocs', b.label .. ' allocs', a.label .. ' at peak',
      b.label .. ' at peak' }, prs, '  ')
  end
  for i = 1, 2 do
    local only = c.only[i]
    if #only > 0 then
      local names = {}
      for j = 1, math.min(5, #only) do
        names[j] = string.format('%s %s', op_text(only[j], 50), bytes(only[j].bytes))
      end
      out[#out + 1] = string.format('  only on %s (%d): %s', c.labels[i], #only,
        table.concat(names, '; '))
    end
  end
  return table.concat(out, '\n') .. '\n'
end

--- The chart of one step's allocated (solid) and reserved (dashed) memory of each side, GiB
--- against ms from the step's start; nil when neither side has a curve.
---@param c table tp.analyse.memory.compare's
---@return table|nil chart
function M.step_chart(c)
  local colors = { '#1f77b4', '#d62728' }
  local series = {}
  for i, s in ipairs(c.sides) do
    local cv = s.curve
    if cv then
      local x, ya, yr = {}, {}, {}
      for j, t in ipairs(cv.x) do
        x[j] = t / 1e6
        ya[j] = cv.allocated[j] / GIB
        yr[j] = cv.reserved[j] / GIB
      end
      local step = cv.step and (' step ' .. cv.step) or ''
      series[#series + 1] = { title = s.label .. step .. ' allocated', color = colors[i], x = x,
        y = ya, width = 2 }
      series[#series + 1] = { title = s.label .. step .. ' reserved', color = colors[i], x = x,
        y = yr, dash = 2 }
    end
  end
  if #series == 0 then
    return nil
  end
  return { kind = 'lines', title = 'GPU memory over one step (allocated solid, reserved dashed)',
    xlabel = 'ms from the step\'s start', ylabel = 'GiB', series = series }
end

--- The rows of a measurement against the plan's estimate (tp.analyse._memory_plan.compare's) as
--- text lines: "activations 38.200 GiB measured vs 35.000 GiB estimated (+3.200 GiB)".
---@param cmp table
---@return string[]
function M.plan_lines(cmp)
  local out = {}
  for _, r in ipairs(cmp.rows) do
    local diff = '-'
    if type(r.diff) == 'number' then
      diff = (r.diff >= 0 and '+' or '-') .. bytes(math.abs(r.diff))
    end
    out[#out + 1] = string.format('%s %s measured vs %s estimated (%s%s)', r.label,
      bytes(r.measured), bytes(r.estimated), diff, r.note and ('; ' .. r.note) or '')
  end
  return out
end


local function err_text(e)
  return type(e) == 'number' and string.format('%+.0f%%', 100 * e) or '-'
end

-- The rows of a section's runs: measured beside estimated, with the source of each.
local function section_rows(sec)
  local rows = {}
  for _, r in ipairs(sec.runs) do
    rows[#rows + 1] = { r.id, tostring(r.group), r.source and SOURCE[r.source] or '-',
      r.device or '-', bytes(r.peak_allocated), bytes(r.peak_reserved),
      r.capacity and bytes(r.capacity) or '-', r.headroom and bytes(r.headroom) or '-',
      r.estimate and bytes(r.estimate) or '-', r.estimate_status or '-', err_text(r.error) }
  end
  return rows
end

local SECTION_HEAD = { 'run', 'group', 'measured from', 'device', 'peak allocated',
  'peak reserved', 'capacity', 'headroom', 'estimate', 'fit', 'estimate error' }

--- The lines of a section's measurement against the plan for one group (its g.plan).
local function plan_text(g)
  local out = {}
  for _, l in ipairs(M.plan_lines(g.plan)) do
    out[#out + 1] = l
  end
  for _, n in ipairs(g.plan.notes or {}) do
    out[#out + 1] = 'note: ' .. n
  end
  return out
end

--- The text of a memory section (tp.analyse.memory.section's): tplua compare, the REPL.
---@param sec table
---@return string
function M.section_text(sec)
  local out = { 'memory per GPU (measured: the allocator\'s events in the profiler traces, else '
    .. 'the peak the framework printed in its log; estimate: tp.plan.memory for the run\'s '
    .. 'configuration; error: estimate / measured - 1)' }
  tbl.text(out, SECTION_HEAD, section_rows(sec), '  ')
  for _, r in ipairs(sec.runs) do
    if r.timeline then
      out[#out + 1] = '  ' .. M.timeline_line(r)
    end
  end
  for _, g in ipairs(sec.groups) do
    if g.plan then
      out[#out + 1] = string.format('  %s against the plan (%s, from its %s):', tostring(g.value),
        g.plan_run, SOURCE[g.plan.source] or g.plan.source)
      for _, l in ipairs(plan_text(g)) do
        out[#out + 1] = '    ' .. l
      end
    end
  end
  for _, x in ipairs(sec.comparisons) do
    if x.comparison then
      out[#out + 1] = ''
      for l in M.compare_text(x.comparison, { top = 5 }):gmatch('[^\n]+') do
        out[#out + 1] = '  ' .. l
      end
    else
      out[#out + 1] = string.format('  %s against %s: no side by side: %s', tostring(x.group),
        tostring(x.baseline), x.missing)
    end
  end
  for _, n in ipairs(sec.notes) do
    out[#out + 1] = '  warning: ' .. n
  end
  return table.concat(out, '\n') .. '\n'
end

--- A run's PyTorch memory timeline (a section row's `timeline`) as one line.
---@param r table
---@return string
function M.timeline_line(r)
  local t = r.timeline
  if t.error then
    return string.format('%s: PyTorch\'s memory timeline %s not read: %s', r.id, t.path, t.error)
  end
  local parts = {}
  for _, c in ipairs(analyse_memory.TIMELINE_CATEGORIES) do
    if (t.at_peak[c] or 0) > 0 then
      parts[#parts + 1] = string.format('%s %s', analyse_memory.TIMELINE_LABELS[c],
        bytes(t.at_peak[c]))
    end
  end
  return string.format('%s: PyTorch\'s memory timeline (%s): peak %s: %s', r.id, t.path,
    bytes(t.peak), table.concat(parts, ', '))
end

--- The chart of a memory section: one step of the baseline and of the first other group with
--- traces, allocated and reserved; nil when there is none.
---@param sec? table
---@return table|nil {caption =, chart =}
function M.section_chart(sec)
  for _, x in ipairs(sec and sec.comparisons or {}) do
    local chart = x.comparison and M.step_chart(x.comparison)
    if chart then
      return { chart = chart, caption = string.format('GPU memory over one profiled step of '
        .. '%s and %s (their runs %s and %s): allocated (solid) and reserved by the caching '
        .. 'allocator (dashed), GiB against ms from the step\'s start, from the allocator\'s '
        .. 'events in their traces.', tostring(x.baseline), tostring(x.group), x.runs[1],
        x.runs[2]) }
    end
  end
  return nil
end

-- The matched ops of a comparison as rows.
local function pair_rows(c, top)
  local rows = {}
  for i = 1, math.min(top, #c.pairs) do
    local p = c.pairs[i]
    rows[i] = { p.name, p.shapes, p.dtype, bytes(p.a.bytes), bytes(p.b.bytes),
      bytes(p.a.at_peak), bytes(p.b.at_peak) }
  end
  return rows
end

-- The sides of a comparison as rows: peaks, slack, headroom, the peak's categories.
local function side_rows(c)
  local a, b = c.sides[1], c.sides[2]
  local rows = {
    { 'device', a.name or a.device, b.name or b.device },
    { 'peak allocated', bytes(a.peak), bytes(b.peak) },
    { 'reserved peak', bytes(a.reserved_max), bytes(b.reserved_max) },
    { 'slack at the peak (reserved - allocated)', bytes(a.slack), bytes(b.slack) },
    { 'capacity', a.capacity and bytes(a.capacity) or '-', b.capacity and bytes(b.capacity)
      or '-' },
    { 'headroom over the reserved peak', a.headroom and bytes(a.headroom) or '-',
      b.headroom and bytes(b.headroom) or '-' },
    { 'the peak: step, phase, op', string.format('%s, %s, %s', tostring(a.peak_step or '-'),
      a.peak_phase, op_text(a.peak_op, 40)), string.format('%s, %s, %s',
      tostring(b.peak_step or '-'), b.peak_phase, op_text(b.peak_op, 40)) },
  }
  for _, cat in ipairs(analyse_memory.CATEGORIES) do
    if (a.at_peak[cat] or 0) > 0 or (b.at_peak[cat] or 0) > 0 then
      rows[#rows + 1] = { 'at the peak: ' .. analyse_memory.CATEGORY_LABELS[cat],
        bytes(a.at_peak[cat]), bytes(b.at_peak[cat]) }
    end
  end
  return rows
end

local INTRO = 'Memory per GPU: the peak measured from the allocator\'s events in the profiler '
  .. 'traces (profile_memory=True), else the peak the framework printed in its log, beside '
  .. 'the plan\'s estimate for the run\'s configuration (tp.plan.memory); then each side\'s '
  .. 'traces side by side. docs/memory.md.'

--- The lines of report.md's memory section (none without a section).
---@param sec? table
---@param plot table the rendered plot ({png=, svg=} or {error=})
---@param md_text fun(s: string): string Markdown escaping
---@return string[]
function M.markdown(sec, plot, md_text)
  if not sec then
    return {}
  end
  local L = { '## Memory', '', md_text(INTRO), '' }
  local function md_table(head, rows)
    L[#L + 1] = '| ' .. table.concat(head, ' | ') .. ' |'
    L[#L + 1] = '|' .. string.rep(' --- |', #head)
    for _, r in ipairs(rows) do
      local cells = {}
      for i, c in ipairs(r) do
        cells[i] = md_text(tostring(c))
      end
      L[#L + 1] = '| ' .. table.concat(cells, ' | ') .. ' |'
    end
    L[#L + 1] = ''
  end
  md_table(SECTION_HEAD, section_rows(sec))
  for _, r in ipairs(sec.runs) do
    if r.timeline then
      L[#L + 1] = '- ' .. md_text(M.timeline_line(r))
      L[#L + 1] = ''
    end
  end
  for _, g in ipairs(sec.groups) do
    if g.plan then
      L[#L + 1] = md_text(string.format('%s against the plan (%s, from its %s):',
        tostring(g.value), g.plan_run, SOURCE[g.plan.source] or g.plan.source))
      L[#L + 1] = ''
      for _, l in ipairs(plan_text(g)) do
        L[#L + 1] = '- ' .. md_text(l)
      end
      L[#L + 1] = ''
    end
  end
  for _, x in ipairs(sec.comparisons) do
    if x.comparison then
      local c = x.comparison
      L[#L + 1] = '### ' .. md_text(string.format('%s and %s side by side', c.labels[1],
        c.labels[2]))
      L[#L + 1] = ''
      md_table({ '', c.labels[1], c.labels[2] }, side_rows(c))
      md_table({ 'op', 'shapes', 'dtype', c.labels[1] .. ' allocated',
        c.labels[2] .. ' allocated', c.labels[1] .. ' live at peak',
        c.labels[2] .. ' live at peak' }, pair_rows(c, 10))
    else
      L[#L + 1] = md_text(string.format('%s against %s: no side by side: %s.',
        tostring(x.group), tostring(x.baseline), x.missing))
      L[#L + 1] = ''
    end
  end
  local ch = M.section_chart(sec)
  if ch and plot and plot.png then
    L[#L + 1] = string.format('![%s](%s)', md_text(M.CHART_TITLE), plot.png)
    L[#L + 1] = ''
    L[#L + 1] = md_text(ch.caption) .. (plot.svg and string.format(' ([SVG](%s))', plot.svg)
      or '')
    L[#L + 1] = ''
  elseif ch then
    L[#L + 1] = 'Not drawn: ' .. md_text(plot and plot.error or 'plots were not rendered') .. '.'
    L[#L + 1] = ''
  end
  for _, n in ipairs(sec.notes) do
    L[#L + 1] = '- Warning: ' .. md_text(n)
  end
  L[#L + 1] = ''
  return L
end

--- The title of the section's chart.
M.CHART_TITLE = 'GPU memory over one step (profiler traces)'

--- The HTML of report.html's memory section ('' without a section).
---@param sec? table
---@param plot table the rendered plot
---@param svg? string its inline SVG
---@param esc fun(s: any): string
---@param html_table fun(head: string[], rows: table[], numeric: boolean[]): string
---@return string
function M.html(sec, plot, svg, esc, html_table)
  if not sec then
    return ''
  end
  local H = { '<section id="memory-analysis"><h2>Memory</h2>',
    '<p class="missing">' .. esc(INTRO) .. '</p>' }
  H[#H + 1] = html_table(SECTION_HEAD, section_rows(sec),
    { false, false, false, false, true, true, true, true, true, false, true })
  for _, r in ipairs(sec.runs) do
    if r.timeline then
      H[#H + 1] = '<p class="missing">' .. esc(M.timeline_line(r)) .. '</p>'
    end
  end
  for _, g in ipairs(sec.groups) do
    if g.plan then
      H[#H + 1] = string.format('<h3>%s against the plan</h3><p class="missing">%s, from its '
        .. '%s.</p><ul class="reasons">', esc(g.value), esc(g.plan_run),
        esc(SOURCE[g.plan.source] or g.plan.source))
      for _, l in ipairs(plan_text(g)) do
        H[#H + 1] = '<li>' .. esc(l) .. '</li>'
      end
      H[#H + 1] = '</ul>'
    end
  end
  for _, x in ipairs(sec.comparisons) do
    local c = x.comparison
    if c then
      H[#H + 1] = string.format('<h3>%s and %s side by side</h3>', esc(c.labels[1]),
        esc(c.labels[2]))
      H[#H + 1] = html_table({ '', c.labels[1], c.labels[2] }, side_rows(c),
        { false, true, true })
      H[#H + 1] = html_table({ 'op', 'shapes', 'dtype', c.labels[1] .. ' allocated',
        c.labels[2] .. ' allocated', c.labels[1] .. ' live at peak',
        c.labels[2] .. ' live at peak' }, pair_rows(c, 10),
        { false, false, false, true, true, true, true })
    else
      H[#H + 1] = '<p class="missing">' .. esc(string.format('%s against %s: no side by side: '
        .. '%s.', tostring(x.group), tostring(x.baseline), x.missing)) .. '</p>'
    end
  end
  local ch = M.section_chart(sec)
  if ch and svg then
    local links = {}
    for _, fmt in ipairs({ 'png', 'svg' }) do
      if plot[fmt] then
        links[#links + 1] = string.format('<a href="%s">%s</a>', esc(plot[fmt]), fmt:upper())
      end
    end
    H[#H + 1] = '<figure>' .. svg .. '<figcaption>' .. esc(ch.caption)
      .. (#links > 0 and (' (' .. table.concat(links, ', ') .. ')') or '')
      .. '</figcaption></figure>'
  elseif ch then
    H[#H + 1] = '<p class="missing">Not drawn: ' .. esc(plot and plot.error
      or 'plots were not rendered') .. '.</p>'
  end
  if #sec.notes > 0 then
    H[#H + 1] = '<ul class="reasons">'
    for _, n in ipairs(sec.notes) do
      H[#H + 1] = '<li>Warning: ' .. esc(n) .. '</li>'
    end
    H[#H + 1] = '</ul>'
  end
  H[#H + 1] = '</section>'
  return table.concat(H, '\n')
end

analyse_memory.set_text(function(mem)
  return M.trace_text(mem)
end)

return M
