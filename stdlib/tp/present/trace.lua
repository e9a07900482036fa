-- tp.present.trace: the trace breakdowns of tp.analyse.trace as text (tplua trace) and as
-- Markdown (report.md): per rank the temporal breakdown per step and its mean, time per class,
-- communication hidden behind compute, the host side and the top kernels; stragglers across
-- ranks; the explanation of the gap in step time between two runs; the profile section of
-- tplua compare and the REPL (tp.analyse.profiled.section).

local profiled = require('tp.analyse.profiled')
local tbl = require('tp.present._table')

local M = {}

local function ms(ns)
  if ns == nil then
    return '-'
  end
  return string.format('%.3f', ns / 1e6)
end

local function pct(part, whole)
  if not part or not whole or whole == 0 then
    return '-'
  end
  return string.format('%.1f%%', 100 * part / whole)
end

local short = tbl.short
local table_text = tbl.text

local function who(a)
  local parts = {}
  if a.rank then
    parts[#parts + 1] = string.format('rank %d of %s', a.rank, tostring(a.world_size or '?'))
  end
  if a.backend then
    parts[#parts + 1] = a.backend
  end
  local dev = a.devices and a.devices[1]
  if type(dev) == 'table' and type(dev.name) == 'string' then
    parts[#parts + 1] = dev.name
  end
  return table.concat(parts, ', ')
end

local function step_row(label, s)
  return { label, ms(s.window), ms(s.idle), pct(s.idle, s.window), ms(s.compute),
    pct(s.compute, s.window), ms(s.non_compute), pct(s.non_compute, s.window),
    ms(s.comm), ms(s.comm_exposed), ms(s.host_wait), ms(s.cpu_step) }
end

local STEP_HEADER = { 'step', 'window ms', 'idle', '%', 'compute', '%', 'non-compute', '%',
  'comm', 'comm exposed', 'host wait', 'cpu step' }

--- The text of one trace's analysis (tp.analyse.trace.open). opts.step: show only that step.
function M.analysis_text(a, opts)
  opts = opts or {}
  local out = {}
  local info = a.info
  out[#out + 1] = string.format('trace %s%s', a.path, who(a) ~= '' and ('  (' .. who(a) .. ')')
    or '')
  out[#out + 1] = string.format('  %d events, %d GPU ops (%d distinct names), %d launches, '
    .. '%d profiler steps%s, %d ops in no step, %.1f MB read%s', info.events, info.ops,
    info.names, info.launches, info.steps, info.stepless and ' (none: one step holds every op)'
    or '', info.unassigned, info.bytes / 1e6, info.compressed and ' (gzip)' or '')
  for _, w in ipairs(a.warnings) do
    out[#out + 1] = '  warning: ' .. w
  end
  if not a.gpu then
    return table.concat(out, '\n') .. '\n'
  end
  out[#out + 1] = ''
  out[#out + 1] = '  temporal breakdown per step (ms; idle / compute / non-compute as Holistic '
    .. 'Trace Analysis defines them)'
  local rows = {}
  for _, s in ipairs(a.steps) do
    if not opts.step or s.step == opts.step then
      rows[#rows + 1] = step_row(tostring(s.step), s)
    end
  end
  if opts.step and #rows == 0 then
    out[#out + 1] = string.format('  (no step %d in this trace)', opts.step)
  end
  local m = a.mean
  if not opts.step and m.steps > 0 then
    rows[#rows + 1] = step_row(string.format('mean of %d', m.steps), m)
  end
  table_text(out, STEP_HEADER, rows)
  local s = m
  if opts.step then
    for _, st in ipairs(a.steps) do
      if st.step == opts.step then
        s = st
      end
    end
  end
  if s.window and s.window > 0 then
    out[#out + 1] = ''
    out[#out + 1] = string.format('  time per class (%s, ms per step; exclusive: the step\'s time '
      .. 'given to the class, these and idle add up to the step)', s == m and
      string.format('mean of %d steady steps', m.steps) or ('step ' .. opts.step))
    rows = {}
    for _, c in ipairs(a.classes) do
      local v = s.class[c.name]
      if v.count > 0 or v.time > 0 then
        local n = math.tointeger(v.count) and string.format('%d', math.tointeger(v.count))
          or string.format('%.1f', v.count)
        rows[#rows + 1] = { c.name, c.kind, n, ms(v.sum),
          ms(v.time), ms(v.exclusive), pct(v.exclusive, s.window) }
      end
    end
    rows[#rows + 1] = { 'idle', '', '', '', '', ms(s.idle), pct(s.idle, s.window) }
    table_text(out, { 'class', 'kind', 'ops', 'kernel ms', 'busy ms', 'exclusive', '% step' },
      rows)
    if (s.comm or 0) > 0 then
      out[#out + 1] = string.format('  communication: %s ms per step, %s hidden behind compute, '
        .. '%s ms exposed', ms(s.comm), pct(s.comm_overlapped, s.comm), ms(s.comm -
        s.comm_overlapped))
    end
    out[#out + 1] = string.format('  host: the GPU waited %s ms per step for the CPU to launch '
      .. 'work (%s of idle)%s', ms(s.host_wait), pct(s.host_wait, s.idle),
      (s.dataloader or 0) > 0 and string.format('; dataloader %s ms', ms(s.dataloader)) or '')
    if #a.cpu.launch_bound > 0 and info.stepless then
      out[#out + 1] = '  launch-bound: idle is over 10% of the trace and mostly host wait'
    elseif #a.cpu.launch_bound > 0 then
      local steps = {}
      for i, n in ipairs(a.cpu.launch_bound) do
        steps[i] = tostring(n)
      end
      out[#out + 1] = '  launch-bound steps (idle over 10% of the step, mostly host wait): '
        .. table.concat(steps, ', ')
    end
  end
  if #a.top > 0 then
    out[#out + 1] = ''
    out[#out + 1] = string.format('  top %d kernels of %d (over the steps\' ops)', #a.top,
      a.kernels)
    rows = {}
    for _, k in ipairs(a.top) do
      rows[#rows + 1] = { short(k.name, 70), k.class, tostring(k.count), ms(k.total),
        string.format('%.2f', k.mean / 1e3) }
    end
    table_text(out, { 'name', 'class', 'count', 'total ms', 'mean us' }, rows)
  end
  local w = a.whole
  if w and w.ops > 0 then
    out[#out + 1] = ''
    out[#out + 1] = string.format('  whole trace as HTA takes it (%d ops): span %s ms, idle %s, '
      .. 'compute %s, non-compute %s', w.ops, ms(w.span), pct(w.idle, w.span),
      pct(w.compute, w.span), pct(w.non_compute, w.span))
    local r = w.rounded
    if r and (r.syncs or 0) > 0 then
      out[#out + 1] = string.format('  HTA also counts %d cuda_sync rows as GPU rows (tplua does '
        .. 'not: they are waits, not work): its span %s ms, idle %s (microseconds, as HTA '
        .. 'rounds)', r.syncs, ms(r.span), pct(r.idle, r.span))
    end
  end
  return table.concat(out, '\n') .. '\n'
end

--- The text of a run's analysis (tp.analyse.trace.analyse): each rank, then stragglers.
function M.run_text(run, opts)
  local parts = {}
  for _, a in ipairs(run.ranks) do
    parts[#parts + 1] = M.analysis_text(a, opts)
  end
  for _, e in ipairs(run.errors) do
    parts[#parts + 1] = 'error: ' .. e .. '\n'
  end
  for _, w in ipairs(run.warnings or {}) do
    parts[#parts + 1] = 'warning: ' .. w .. '\n'
  end
  if run.mixed then
    parts[#parts + 1] = string.format('ranks: %d files, not the ranks of one run (above): no '
      .. 'stragglers looked for\n', #run.ranks)
  elseif #run.ranks > 1 then
    local out = {}
    if #run.stragglers == 0 then
      out[#out + 1] = string.format('ranks: %d; no straggler (idle and exposed communication '
        .. 'agree across ranks)', #run.ranks)
    else
      out[#out + 1] = string.format('ranks: %d; stragglers:', #run.ranks)
      for _, s in ipairs(run.stragglers) do
        out[#out + 1] = '  ' .. s.message
      end
    end
    parts[#parts + 1] = table.concat(out, '\n') .. '\n'
  end
  return table.concat(parts, '\n')
end

--- The text of why the GPU is idle in a run's traces (tplua trace --idle): per rank and step
--- the idle time of each cause, launch figures, each stream's queue and HTA's per-stream view.
---@param run table tp.analyse.trace.analyse's
---@param opts? { step?: integer }
---@return string
function M.idle_text(run, opts)
  return require('tp.present._trace_idle').run_text(run, opts)
end

--- The JSON document of `tplua trace --json` made from its tables (`doc`, changed in place): the
--- schema and time unit named, every time an integer number of ns, every list an array even
--- when empty (docs/trace.md, "JSON output").
---@param doc table
---@return table doc
function M.json_doc(doc)
  return require('tp.present._trace_json').doc(doc)
end

--- The sentence that says which side of an explanation is faster ('MI300X 10.5% faster per
--- step: 3.496 vs 3.908 ms'), from its `faster` (tp.analyse.trace.explain); works on the
--- record's brief too.
function M.faster_text(e)
  local f = e.faster
  if not f then
    return string.format('%s and %s take the same time per step: %s ms', e.labels[1],
      e.labels[2], ms(e.step_a))
  end
  return string.format('%s %.1f%% faster per step: %s vs %s ms', f.label, f.pct, ms(f.fast),
    ms(f.slow))
end

--- How to read the difference column, in words.
function M.sign_text(e)
  return string.format('difference = %s - %s, ms per step: negative where %s spends less time, '
    .. 'positive where it spends more; "of all movement": the row\'s share of the sum of every '
    .. '|difference| (%s ms), so rows moving in opposite directions stay readable', e.labels[2],
    e.labels[1], e.labels[2], ms(e.moved))
end

local function host_side(label, h)
  if not h or not h.window then
    return label .. ' -'
  end
  return string.format('%s waited %s ms/step for launches (%s of idle%s)', label, ms(h.host_wait),
    pct(h.host_wait, h.idle), h.launch_bound and ', launch-bound' or '')
end

local function causes_side(label, c)
  if not c then
    return label .. ' -'
  end
  local trace = require('tp.analyse.trace')
  local parts = {}
  for _, k in ipairs(trace.CAUSES) do
    if (c[k] or 0) >= 0.5e3 then  -- half a microsecond per step and more
      parts[#parts + 1] = string.format('%s %s', trace.CAUSE_LABELS[k], ms(c[k]))
    end
  end
  return label .. ' ' .. (#parts > 0 and table.concat(parts, ', ') or 'none')
end

--- The text of an explanation (tp.analyse.trace.explain).
function M.explain_text(e)
  local out = {}
  local la, lb = e.labels[1], e.labels[2]
  out[#out + 1] = string.format('why %s and %s differ: %s', lb, la, M.faster_text(e))
  out[#out + 1] = string.format('  columns: %s (A), %s (B); %s', la, lb, M.sign_text(e))
  local rows = {}
  for _, r in ipairs(e.rows) do
    rows[#rows + 1] = { r.label, ms(r.a), ms(r.b), string.format('%+.3f', r.diff / 1e6),
      r.moved and string.format('%.0f%%', 100 * r.moved) or '-' }
  end
  rows[#rows + 1] = { 'step (sum of the rows)', ms(e.step_a), ms(e.step_b),
    string.format('%+.3f', e.sum / 1e6), '' }
  table_text(out, { 'ms per step', la, lb, 'difference', 'of all movement' }, rows)
  out[#out + 1] = string.format('  communication hidden behind compute: %s %s, %s %s', la,
    e.overlap_a and string.format('%.0f%%', 100 * e.overlap_a) or '-', lb,
    e.overlap_b and string.format('%.0f%%', 100 * e.overlap_b) or '-')
  if e.host then
    out[#out + 1] = string.format('  host: %s; %s', host_side(la, e.host[1]),
      host_side(lb, e.host[2]))
    if e.host[1].launch_bound and e.host[2].launch_bound then
      out[#out + 1] = '  both are launch-bound: the GPU mostly waits for the host, so the step '
        .. 'time says more about the host (CPU, launch overhead) than about the GPUs'
    end
    out[#out + 1] = string.format('  idle by cause (ms/step): %s; %s', causes_side(la,
      e.host[1].cause), causes_side(lb, e.host[2].cause))
  end
  if #e.lines > 0 then
    out[#out + 1] = '  largest contributors: ' .. table.concat(e.lines, '; ', 1,
      math.min(3, #e.lines))
  end
  for _, w in ipairs(e.warnings) do
    out[#out + 1] = '  warning: ' .. w
  end
  return table.concat(out, '\n') .. '\n'
end

local function md_escape(s)
  return (tostring(s):gsub('|', '\\|'))
end

--- Markdown for report.md: one table of the mean step per run (rows: the runs' labels and
--- their summaries from tp.analyse.trace.summary), then each explanation's table.
function M.markdown(entries, explanations)
  local out = {}
  out[#out + 1] = '| run | ranks | step ms | idle | compute | non-compute | comm exposed | '
    .. 'comm hidden | host wait | largest classes |'
  out[#out + 1] = '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|'
  for _, e in ipairs(entries) do
    local s = e.summary
    if not s.gpu then
      out[#out + 1] = string.format('| %s | %d | - | - | - | - | - | - | - | no GPU ops in the '
        .. 'trace (CPU-only profile) |', md_escape(e.label), s.ranks)
    else
      local cls = {}
      for name, c in pairs(s.classes) do
        cls[#cls + 1] = { name = name, v = c.exclusive_ms or 0 }
      end
      table.sort(cls, function(x, y)
        return x.v > y.v or (x.v == y.v and x.name < y.name)
      end)
      local top = {}
      for i = 1, math.min(3, #cls) do
        top[i] = string.format('%s %.3f', cls[i].name, cls[i].v)
      end
      local function p(v)
        return s.window_ms and s.window_ms > 0 and v and string.format('%.1f%%',
          100 * v / s.window_ms) or '-'
      end
      out[#out + 1] = string.format('| %s | %d | %.3f | %s | %s | %s | %.3f | %s | %.3f | %s |',
        md_escape(e.label), s.ranks, s.window_ms, p(s.idle_ms), p(s.compute_ms),
        p(s.non_compute_ms), s.comm_exposed_ms or 0, s.overlap and string.format('%.0f%%',
          100 * s.overlap) or '-', s.host_wait_ms or 0, md_escape(table.concat(top, ', ')))
    end
  end
  for _, x in ipairs(explanations or {}) do
    local e = x.explanation
    out[#out + 1] = ''
    out[#out + 1] = string.format('Why %s and %s differ: %s. Sides: %s (A), %s (B); %s.',
      md_escape(e.labels[2]), md_escape(e.labels[1]), md_escape(M.faster_text(e)),
      md_escape(e.labels[1]), md_escape(e.labels[2]), md_escape(M.sign_text(e)))
    out[#out + 1] = ''
    out[#out + 1] = string.format('| ms per step | %s | %s | difference | of all movement |',
      md_escape(e.labels[1]), md_escape(e.labels[2]))
    out[#out + 1] = '|---|---:|---:|---:|---:|'
    for _, r in ipairs(e.rows) do
      out[#out + 1] = string.format('| %s | %s | %s | %+.3f | %s |', md_escape(r.label), ms(r.a),
        ms(r.b), r.diff / 1e6, r.moved and string.format('%.0f%%', 100 * r.moved) or '-')
    end
    out[#out + 1] = string.format('| step (sum of the rows) | %s | %s | %+.3f | |',
      ms(e.step_a), ms(e.step_b), e.sum / 1e6)
  end
  return table.concat(out, '\n') .. '\n'
end

--- A figure already in ms as text ('-' when absent), as the profile tables print it.
function M.ms_text(v)
  return type(v) == 'number' and string.format('%.3f', v) or '-'
end

--- A share as text ('12.3%'; '-' when either part is absent or the whole is 0).
function M.pct_text(part, whole)
  if type(part) ~= 'number' or type(whole) ~= 'number' or whole == 0 then
    return '-'
  end
  return string.format('%.1f%%', 100 * part / whole)
end

local FROM = { record = "its record's profile.analysis", traces = 'read from its traces' }

--- The profile section of tp.analyse.profiled.section as text (tplua compare, the REPL): each
--- group's mean step, where its figures come from, and each explanation's table.
---```lua
---io.write(tp.present.trace.section_text(tp.analyse.profiled.section(R)))
---```
---@param sec tp.analyse.profiled.Section
---@return string
function M.section_text(sec)
  if type(sec) ~= 'table' or type(sec.groups) ~= 'table' then
    error('tp.present.trace.section_text: profile section expected, got ' .. type(sec), 2)
  end
  local out = { string.format('profile: where the step time goes, from the profiler traces '
    .. '(ms per step on the GPU, the mean of each %s\'s profiled runs)', sec.by) }
  local rows = { { sec.by, 'runs', 'ranks', 'step ms', 'idle', 'compute', 'non-compute',
    'comm exposed', 'host wait', 'largest classes' } }
  local notes = {}
  for _, g in ipairs(sec.groups) do
    local s = g.summary
    if s and s.gpu then
      local top = {}
      for i, c in ipairs(profiled.classes_by_time(s)) do
        if i > 3 then
          break
        end
        top[i] = string.format('%s %.3f', c.name, c.ms)
      end
      rows[#rows + 1] = { tostring(g.value), tostring(s.runs), tostring(s.ranks),
        M.ms_text(s.window_ms), M.pct_text(s.idle_ms, s.window_ms),
        M.pct_text(s.compute_ms, s.window_ms), M.pct_text(s.non_compute_ms, s.window_ms),
        M.ms_text(s.comm_exposed_ms), M.ms_text(s.host_wait_ms),
        table.concat(top, ', ') }
    elseif s then
      notes[#notes + 1] = string.format('%s: no GPU ops in the traces (a CPU-only profile): no '
        .. 'GPU breakdown', tostring(g.value))
    end
    if #g.runs > 0 then
      local used = {}
      for i, id in ipairs(g.runs) do
        used[i] = string.format('%s (%s)', id, FROM[g.from[id]] or tostring(g.from[id]))
      end
      notes[#notes + 1] = string.format('%s runs: %s', tostring(g.value),
        table.concat(used, ', '))
    end
    for _, e in ipairs(g.errors) do
      notes[#notes + 1] = string.format('%s: not analysed: %s', tostring(g.value), e)
    end
    for _, w in ipairs(s and s.warnings or {}) do
      notes[#notes + 1] = 'warning: ' .. w
    end
  end
  if #rows > 1 then
    table_text(out, rows[1], { table.unpack(rows, 2) }, '  ', true)
  end
  for _, n in ipairs(notes) do
    out[#out + 1] = '  ' .. n
  end
  for _, x in ipairs(sec.explanations) do
    out[#out + 1] = ''
    if x.explanation then
      out[#out + 1] = string.format('%s against %s, from the traces of %s (%s) and %s (%s):',
        tostring(x.group), tostring(x.baseline), x.runs[1], tostring(x.baseline), x.runs[2],
        tostring(x.group))
      out[#out + 1] = (M.explain_text(x.explanation):gsub('\n$', ''))
      if x.ops and #x.ops.verdicts > 0 then
        out[#out + 1] = '  the same ops on both, hardware or software (% of each side\'s own '
          .. 'limit; tplua trace --compare for the ops):'
        for _, v in ipairs(x.ops.verdicts) do
          out[#out + 1] = '    ' .. v
        end
      end
    else
      out[#out + 1] = string.format('%s against %s: no explanation: %s', tostring(x.group),
        tostring(x.baseline), x.missing)
    end
  end
  return table.concat(out, '\n') .. '\n'
end

return M
