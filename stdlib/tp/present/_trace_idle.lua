-- tp.present._trace_idle: why the GPU is idle, as text (tplua trace --idle): per step the idle
-- time of each cause, the launch figures, each stream's queue, and HTA's per-stream view.
local trace = require('tp.analyse.trace')
local tbl = require('tp.present._table')

local M = {}

local function ms(ns)
  return ns and string.format('%.3f', ns / 1e6) or '-'
end

local function us(ns)
  return ns and string.format('%.1f', ns / 1e3) or '-'
end

local function pct(part, whole)
  if not part or not whole or whole == 0 then
    return '-'
  end
  return string.format('%.0f%%', 100 * part / whole)
end

local function who(a)
  local parts = {}
  if a.rank then
    parts[#parts + 1] = string.format('rank %d of %s', a.rank, tostring(a.world_size or '?'))
  end
  local dev = a.devices and a.devices[1]
  if type(dev) == 'table' and type(dev.name) == 'string' then
    parts[#parts + 1] = dev.name
  end
  return #parts > 0 and ('  (' .. table.concat(parts, ', ') .. ')') or ''
end

local function cause_row(label, s)
  local row = { label, ms(s.window), ms(s.idle) }
  for _, c in ipairs(trace.CAUSES) do
    row[#row + 1] = ms(s.cause and s.cause[c])
  end
  return row
end

local function launch_row(label, l)
  if not l or (l.count or 0) == 0 then
    return { label, '0', '-', '-', '-', '-', '-', '-', '-' }
  end
  return { label, tostring(l.count), pct(l.shorter, l.count), us(l.cpu / l.count),
    us(l.gpu / l.count), us(l.delay_p50), us(l.delay_p90), us(l.delay_p99), us(l.delay_max) }
end

--- The text of one trace's idle analysis (tp.analyse.trace.open's). opts.step: that step only.
---@param a table
---@param opts? { step?: integer }
---@return string
function M.analysis_text(a, opts)
  opts = opts or {}
  local out = { string.format('trace %s%s', a.path, who(a)) }
  for _, w in ipairs(a.warnings) do
    out[#out + 1] = '  warning: ' .. w
  end
  if not a.gpu then
    return table.concat(out, '\n') .. '\n'
  end
  local id = a.idle
  out[#out + 1] = ''
  out[#out + 1] = string.format('  why the GPU is idle, per step (ms; the causes add up to idle; '
    .. 'a gap with its op already queued is launch latency under %s us, else other)',
    us(id.gap))
  local head = { 'step', 'window', 'idle' }
  for _, c in ipairs(trace.CAUSES) do
    head[#head + 1] = trace.CAUSE_LABELS[c]
  end
  local rows = {}
  for _, s in ipairs(a.steps) do
    if not opts.step or s.step == opts.step then
      rows[#rows + 1] = cause_row(tostring(s.step), s)
    end
  end
  if not opts.step and a.mean.steps > 0 then
    local m = { window = a.mean.window, idle = a.mean.idle, cause = a.mean.cause }
    rows[#rows + 1] = cause_row(string.format('mean of %d', a.mean.steps), m)
  end
  tbl.text(out, head, rows)
  for _, c in ipairs(trace.CAUSES) do
    out[#out + 1] = string.format('    %s: %s', trace.CAUSE_LABELS[c], trace.CAUSE_MEANING[c])
  end
  out[#out + 1] = ''
  out[#out + 1] = '  launches (kernels with a launch call; us: launch call and kernel, mean; '
    .. 'delay: kernel start - call start)'
  rows = {}
  for _, s in ipairs(a.steps) do
    if not opts.step or s.step == opts.step then
      rows[#rows + 1] = launch_row(tostring(s.step), s.launch)
    end
  end
  if not opts.step and #a.steps > 1 then
    rows[#rows + 1] = launch_row('steady', id.launch)
  end
  tbl.text(out, { 'step', 'kernels', 'shorter than call', 'call us', 'kernel us', 'delay p50',
    'p90', 'p99', 'max' }, rows)
  local l = id.launch
  if (l.count or 0) > 0 then
    out[#out + 1] = string.format('  %d of %d kernels (%s) ran shorter than their launch call: '
      .. 'the host spends %s us launching each against %s us of GPU work', l.shorter, l.count,
      pct(l.shorter, l.count), us(l.cpu_mean), us(l.gpu_mean))
  end
  out[#out + 1] = ''
  out[#out + 1] = '  queue per stream (ops launched and not finished), over the steady steps'
  rows = {}
  for _, q in ipairs(id.queues) do
    rows[#rows + 1] = { tostring(q.stream), string.format('%.2f', q.mean), tostring(q.max),
      q.empty and string.format('%.0f%%', 100 * q.empty) or '-' }
  end
  tbl.text(out, { 'stream', 'mean', 'max', 'time empty' }, rows)
  out[#out + 1] = ''
  out[#out + 1] = '  per stream as Holistic Trace Analysis\' idle-time breakdown takes it (its '
    .. 'whole-trace ops, times rounded to the microsecond; ms)'
  rows = {}
  for _, h in ipairs(id.hta) do
    rows[#rows + 1] = { tostring(h.stream), tostring(h.ops), ms(h.host), ms(h.kernel),
      ms(h.other) }
  end
  tbl.text(out, { 'stream', 'ops', 'host wait', 'kernel wait', 'other' }, rows)
  return table.concat(out, '\n') .. '\n'
end

--- The text of a run's idle analysis: each rank, then the run's warnings.
---@param run table tp.analyse.trace.analyse's
---@param opts? { step?: integer }
---@return string
function M.run_text(run, opts)
  local parts = {}
  for _, a in ipairs(run.ranks) do
    parts[#parts + 1] = M.analysis_text(a, opts)
  end
  for _, w in ipairs(run.warnings or {}) do
    parts[#parts + 1] = 'warning: ' .. w .. '\n'
  end
  for _, e in ipairs(run.errors) do
    parts[#parts + 1] = 'error: ' .. e .. '\n'
  end
  return table.concat(parts, '\n')
end

return M
