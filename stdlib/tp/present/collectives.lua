-- tp.present.collectives: collective bandwidth shown: nccl-tests/rccl-tests results side by side
-- (busbw per message size, one column per platform, with confidence intervals) as text and
-- Markdown, the gate's verdicts, the busbw-by-size chart (tp.present.plot: one line per platform,
-- the interval dashed around it), and the collectives of profiler traces (tplua trace
-- --collectives: per collective kind, per message-size bucket, skew across ranks).
local tbl = require('tp.present._table')
local coll = require('tp.analyse.collectives')

local M = {}

local function gbps(v)
  if type(v) ~= 'number' then
    return '-'
  end
  return string.format('%.2f', v)
end

local function cell_text(c)
  if not c then
    return '-'
  end
  if c.lo then
    return string.format('%s [%s, %s] n=%d', gbps(c.mean), gbps(c.lo), gbps(c.hi), c.n)
  end
  return string.format('%s n=%d', gbps(c.mean), c.n)
end

local function title_of(tb)
  return string.format('%s over %s ranks (%s)', tb.collective, tostring(tb.ranks or '?'),
    tostring(tb.dtype or '?'))
end

--- The side-by-side text of M.compare's result (tp.analyse.collectives.compare), with the gates'
--- verdicts when given.
---@param cmp table
---@param gates? table[] tp.analyse.collectives.gate's results
---@return string
function M.compare_text(cmp, gates)
  local out = {}
  out[#out + 1] = string.format('%d result%s (nccl-tests / rccl-tests)', #cmp.runs,
    #cmp.runs == 1 and '' or 's')
  local rows = {}
  for _, r in ipairs(cmp.runs) do
    rows[#rows + 1] = { r.path, r.label, r.tool or '-', r.collective, tostring(r.ranks or '-'),
      tostring(r.dtype or '-'), tostring(r.tables), gbps(r.avg_busbw) }
  end
  tbl.text(out, { 'result', 'platform', 'tool', 'collective', 'ranks', 'type', 'runs',
    'avg busbw' }, rows)
  for _, tb in ipairs(cmp.tables) do
    out[#out + 1] = ''
    out[#out + 1] = string.format('%s: busbw GB/s by message size (%s; mean [%d%% CI over the '
      .. 'runs, seeded bootstrap] n=runs)', title_of(tb), cmp.section == 'in' and 'in-place'
      or 'out-of-place', math.floor(cmp.level * 100 + 0.5))
    local header = { 'size' }
    for _, l in ipairs(tb.labels) do
      header[#header + 1] = l
    end
    if #tb.labels == 2 then
      header[#header + 1] = tb.labels[2] .. '/' .. tb.labels[1]
    end
    rows = {}
    for _, r in ipairs(tb.rows) do
      local row = { coll.size_text(r.size) }
      for _, l in ipairs(tb.labels) do
        row[#row + 1] = cell_text(r.cells[l])
      end
      if #tb.labels == 2 then
        local a, b = r.cells[tb.labels[1]], r.cells[tb.labels[2]]
        row[#row + 1] = (a and b and a.mean > 0) and string.format('%.3f', b.mean / a.mean) or '-'
      end
      rows[#rows + 1] = row
    end
    tbl.text(out, header, rows)
  end
  for _, gate in ipairs(gates or {}) do
    out[#out + 1] = ''
    out[#out + 1] = string.format('gate --min-busbw %s: %s', tostring(gate.gate.text),
      gate.ok and 'passed' or 'FAILED')
    for _, c in ipairs(gate.checks) do
      out[#out + 1] = string.format('  %s %s, %s: %s', c.ok and 'ok  ' or 'FAIL', c.label,
        title_of(c), c.why)
    end
  end
  return table.concat(out, '\n') .. '\n'
end

local function md(s)
  return (tostring(s):gsub('|', '\\|'))
end

--- The same as Markdown tables (report.md).
---@param cmp table
---@return string
function M.markdown(cmp)
  local out = {}
  for _, tb in ipairs(cmp.tables) do
    out[#out + 1] = string.format('**%s**: busbw GB/s by message size (%s, mean [%d%% CI] '
      .. 'n=runs)', md(title_of(tb)), cmp.section == 'in' and 'in-place' or 'out-of-place',
      math.floor(cmp.level * 100 + 0.5))
    out[#out + 1] = ''
    local header = { 'size' }
    for _, l in ipairs(tb.labels) do
      header[#header + 1] = md(l)
    end
    out[#out + 1] = '| ' .. table.concat(header, ' | ') .. ' |'
    out[#out + 1] = '|' .. string.rep(' --- |', #header)
    for _, r in ipairs(tb.rows) do
      local row = { coll.size_text(r.size) }
      for _, l in ipairs(tb.labels) do
        row[#row + 1] = cell_text(r.cells[l])
      end
      out[#out + 1] = '| ' .. table.concat(row, ' | ') .. ' |'
    end
    out[#out + 1] = ''
  end
  return table.concat(out, '\n')
end

--- The side-by-side table of one comparison table as a title, a header and rows of text (the
--- HTML report).
---@param cmp table
---@param tb table one entry of cmp.tables
---@return string title, string[] header, string[][] rows
function M.table_rows(cmp, tb)
  local header = { 'size' }
  for _, l in ipairs(tb.labels) do
    header[#header + 1] = l
  end
  local rows = {}
  for _, r in ipairs(tb.rows) do
    local row = { coll.size_text(r.size) }
    for _, l in ipairs(tb.labels) do
      row[#row + 1] = cell_text(r.cells[l])
    end
    rows[#rows + 1] = row
  end
  return string.format('%s: busbw GB/s (%s, mean [%d%% CI] n=runs)', title_of(tb),
    cmp.section == 'in' and 'in-place' or 'out-of-place', math.floor(cmp.level * 100 + 0.5)),
    header, rows
end

--- The busbw-by-size chart of one table of a comparison (tp.present.plot 'lines': x the message
--- size in bytes on a log scale, y busbw GB/s; one solid line per platform, its interval's
--- bounds dashed in the same colour), or nil when nothing can be drawn.
---@param tb table one entry of cmp.tables
---@return table|nil chart
function M.chart(tb)
  local series = {}
  local palette = require('tp.present.plot').PALETTE
  for i, label in ipairs(tb.labels) do
    local x, y, lo, hi, xci = {}, {}, {}, {}, {}
    for _, r in ipairs(tb.rows) do
      local c = r.cells[label]
      if c then
        x[#x + 1], y[#y + 1] = r.size, c.mean
        if c.lo then
          xci[#xci + 1], lo[#lo + 1], hi[#hi + 1] = r.size, c.lo, c.hi
        end
      end
    end
    local color = palette[(i - 1) % #palette + 1]
    if #x > 0 then
      series[#series + 1] = { title = label, x = x, y = y, color = color }
      if #xci > 0 then
        series[#series + 1] = { title = label .. ' CI', x = xci, y = lo, color = color, dash = 2,
          width = 1 }
        series[#series + 1] = { x = xci, y = hi, color = color, dash = 2, width = 1 }
      end
    end
  end
  if #series == 0 then
    return nil
  end
  return { kind = 'lines', title = 'busbw by message size: ' .. title_of(tb),
    xlabel = 'message size (bytes)', ylabel = 'busbw (GB/s)', xlog = true, series = series }
end

--- One chart of every table of a comparison (the report's 'collectives' plot): M.chart of the
--- one table, or each table's lines labelled with its collective and rank count.
---@param cmp table
---@return table|nil chart
function M.chart_all(cmp)
  if #cmp.tables == 1 then
    return M.chart(cmp.tables[1])
  end
  local series = {}
  local palette = require('tp.present.plot').PALETTE
  local k = 0
  for _, tb in ipairs(cmp.tables) do
    for _, label in ipairs(tb.labels) do
      local x, y = {}, {}
      for _, r in ipairs(tb.rows) do
        local c = r.cells[label]
        if c then
          x[#x + 1], y[#y + 1] = r.size, c.mean
        end
      end
      if #x > 0 then
        k = k + 1
        series[#series + 1] = { title = string.format('%s %s x%s', label, tb.collective,
          tostring(tb.ranks or '?')), x = x, y = y, color = palette[(k - 1) % #palette + 1],
          dash = math.min(#series // #palette + 1, 5) }
      end
    end
  end
  if #series == 0 then
    return nil
  end
  return { kind = 'lines', title = 'busbw by message size', xlabel = 'message size (bytes)',
    ylabel = 'busbw (GB/s)', xlog = true, series = series }
end

-- ---------------------------------------------------------------------------------------------
-- Collectives of profiler traces (tp.analyse._trace_comm through tp.analyse.trace).

local function ms(ns)
  return type(ns) == 'number' and string.format('%.3f', ns / 1e6) or '-'
end

local function us(ns)
  return type(ns) == 'number' and string.format('%.1f', ns / 1e3) or '-'
end

local function bucket_text(b)
  if b < 0 then
    return 'unknown'
  end
  return coll.size_text(b) .. '+'
end

local function kinds_rows(t)
  local rows = {}
  for _, k in ipairs(t.kinds) do
    rows[#rows + 1] = { k.kind, tostring(k.count), tostring(k.sized), ms(k.time),
      k.sized > 0 and string.format('%.1f', k.bytes / 2 ^ 20) or '-', gbps(k.algbw),
      gbps(k.busbw) }
  end
  return rows
end

local function bucket_rows(t)
  local rows = {}
  for _, b in ipairs(t.buckets) do
    rows[#rows + 1] = { b.kind, bucket_text(b.bucket), tostring(b.count), ms(b.time),
      gbps(b.algbw), gbps(b.busbw) }
  end
  return rows
end

--- The collectives of one run of tp.analyse.trace.analyse(paths, {collectives = true}) as text:
--- per rank, by collective and by message-size bucket; across ranks, latency, skew and the late
--- rank per collective.
---@param run table
---@return string
function M.trace_text(run)
  local out = {}
  local several = #run.ranks > 1
  for _, a in ipairs(run.ranks) do
    local c = a.collectives
    if c and several then
      local parts = {}
      for _, k in ipairs(c.table.kinds) do
        parts[#parts + 1] = string.format('%s %d ops %s ms busbw %s', k.kind, k.count, ms(k.time),
          gbps(k.busbw))
      end
      out[#out + 1] = string.format('%s%s: %d NCCL/RCCL ops%s%s', a.path,
        a.rank and string.format(' (rank %d)', a.rank) or '', c.count, #parts > 0 and '; ' or '',
        table.concat(parts, '; '))
    elseif c then
      out[#out + 1] = string.format('collectives of %s%s: %d NCCL/RCCL ops', a.path,
        a.rank and string.format(' (rank %d)', a.rank) or '', c.count)
      if c.count > 0 then
        out[#out + 1] = '  by collective (time: the kernels\' own; GB/s: bytes over that time, '
          .. 'busbw with nccl-tests\' bus factor)'
        tbl.text(out, { 'collective', 'ops', 'sized', 'time ms', 'MiB', 'algbw', 'busbw' },
          kinds_rows(c.table))
        out[#out + 1] = '  by message size (powers of 2)'
        tbl.text(out, { 'collective', 'size', 'ops', 'time ms', 'algbw', 'busbw' },
          bucket_rows(c.table))
      end
    end
  end
  local x = run.collectives
  if x and #run.ranks > 1 then
    out[#out + 1] = ''
    out[#out + 1] = string.format('across %d ranks: %d collectives matched (by process group and '
      .. 'sequence number, else by order within the group)', x.ranks, #x.instances)
    local rows = {}
    for _, k in ipairs(x.kinds) do
      rows[#rows + 1] = { k.kind, tostring(k.instances), ms(k.data_time), ms(k.skew_time),
        string.format('%.1f%%', 100 * k.skew_share), us(k.mean_skew), us(k.max_skew),
        string.format('%s (%d of %d)', tostring(k.late_rank), k.late_count, k.instances),
        gbps(k.latency_busbw) }
    end
    tbl.text(out, { 'collective', 'instances', 'moving data ms', 'lost to skew ms', 'skew share',
      'mean skew us', 'max skew us', 'last to arrive', 'busbw' }, rows)
    out[#out + 1] = '  moving data: the shortest kernel of each instance (its last rank waited '
      .. 'for no one); lost to skew: each rank\'s kernel time beyond it, averaged over the ranks'
    if x.late_rank then
      out[#out + 1] = string.format('  the rank that arrives last most often: %d (%d of %d '
        .. 'collectives)', x.late_rank, x.late_count, #x.instances)
    end
    out[#out + 1] = '  by message size, at the latency'
    tbl.text(out, { 'collective', 'size', 'instances', 'latency ms', 'algbw', 'busbw' },
      bucket_rows(x.table))
    for _, w in ipairs(x.warnings) do
      out[#out + 1] = '  warning: ' .. w
    end
  end
  return table.concat(out, '\n') .. '\n'
end

-- The table of a run: across its ranks when it has several, else its one rank's.
local function run_table(run)
  if run.collectives and #run.ranks > 1 then
    return run.collectives.table, 'latency'
  end
  local a = run.ranks[1]
  return a and a.collectives and a.collectives.table, 'kernel time'
end

--- Two runs' collectives side by side by collective and message-size bucket (tplua trace
--- --compare --collectives): busbw of each and their ratio.
---@param a table run
---@param b table run
---@param labels string[]
---@return string
function M.trace_compare_text(a, b, labels)
  local ta, basis_a = run_table(a)
  local tb, basis_b = run_table(b)
  local out = { string.format('collectives side by side: busbw GB/s by collective and message '
    .. 'size (%s: over %s; %s: over %s)', labels[1], basis_a, labels[2], basis_b) }
  local keys, seen = {}, {}
  local function index(t)
    local m = {}
    for _, r in ipairs(t and t.buckets or {}) do
      local k = r.kind .. '|' .. r.bucket
      m[k] = r
      if not seen[k] then
        seen[k] = true
        keys[#keys + 1] = { kind = r.kind, bucket = r.bucket, key = k }
      end
    end
    return m
  end
  local ma, mb = index(ta), index(tb)
  table.sort(keys, function(x, y)
    if x.kind ~= y.kind then
      return x.kind < y.kind
    end
    return x.bucket < y.bucket
  end)
  local rows = {}
  for _, k in ipairs(keys) do
    local x, y = ma[k.key], mb[k.key]
    rows[#rows + 1] = { k.kind, bucket_text(k.bucket), x and tostring(x.count) or '-',
      gbps(x and x.busbw), y and tostring(y.count) or '-', gbps(y and y.busbw),
      (x and y and x.busbw and y.busbw and x.busbw > 0)
        and string.format('%.3f', y.busbw / x.busbw) or '-' }
  end
  tbl.text(out, { 'collective', 'size', labels[1] .. ' ops', labels[1] .. ' busbw',
    labels[2] .. ' ops', labels[2] .. ' busbw', labels[2] .. '/' .. labels[1] }, rows)
  return table.concat(out, '\n') .. '\n'
end

return M
