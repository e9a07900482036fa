-- tp.history._views: the history as text: the series with their last value and trend
-- (`tplua history list`), one series' runs with the software stack beside each and a sparkline
-- (`tplua history show`), aligned tables.
local stats = require('tp.stats')
local times = require('tp.parse.time')

local M = {}

--- How each metric is written.
M.FORMATS = { tokens_per_s = '%.0f', tokens_per_s_per_gpu = '%.1f', step_time_s = '%.4f',
  mfu = '%.4f', joules_per_token = '%.4g', final_loss = '%.4f', peak_memory_gb = '%.2f' }

--- What each metric is called in headers.
M.LABELS = { tokens_per_s = 'tokens/s', tokens_per_s_per_gpu = 'tokens/s/GPU',
  step_time_s = 'step time (s)', mfu = 'MFU', joules_per_token = 'J/token',
  final_loss = 'final loss', peak_memory_gb = 'peak memory (GB)' }

--- Runs the trend of `list` and the sparkline of `show` cover unless told otherwise.
M.TREND_RUNS = 10

local function fmt(metric, v)
  if v == nil then
    return '-'
  end
  return string.format(M.FORMATS[metric] or '%.4g', v)
end

-- Display width of a UTF-8 string (one column per code point).
local function width(s)
  return utf8.len(s) or #s
end

--- Aligns `rows` (lists of strings) under `headers`: columns separated by two spaces, those in
--- `right` (set of column numbers) right-aligned; a rule under the headers.
---@param headers string[]
---@param rows string[][]
---@param right? table<integer, boolean>
---@return string
function M.align(headers, rows, right)
  right = right or {}
  local w = {}
  for i, hd in ipairs(headers) do
    w[i] = width(hd)
  end
  for _, r in ipairs(rows) do
    for i = 1, #headers do
      w[i] = math.max(w[i], width(r[i] or ''))
    end
  end
  local function line(cells)
    local parts = {}
    for i = 1, #headers do
      local c = cells[i] or ''
      local pad = string.rep(' ', w[i] - width(c))
      parts[i] = right[i] and (pad .. c) or (i == #headers and c or c .. pad)
    end
    return (table.concat(parts, '  '):gsub('%s+$', ''))
  end
  local out = { line(headers) }
  local rule = {}
  for i = 1, #headers do
    rule[i] = string.rep('-', w[i])
  end
  out[#out + 1] = table.concat(rule, '  ')
  for _, r in ipairs(rows) do
    out[#out + 1] = line(r)
  end
  return table.concat(out, '\n') .. '\n'
end

local BARS = { '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█' }

--- A sparkline of `values` (at most `max_width` characters: longer series are averaged into
--- that many buckets): one block per value, its height between the smallest and largest.
---@param values number[]
---@param max_width? integer (default 60)
---@return string
function M.sparkline(values, max_width)
  max_width = max_width or 60
  local xs = values
  if #values > max_width then
    xs = {}
    for b = 1, max_width do
      local from = (b - 1) * #values // max_width + 1
      local to = b * #values // max_width
      local sum = 0
      for i = from, to do
        sum = sum + values[i]
      end
      xs[b] = sum / (to - from + 1)
    end
  end
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(xs) do
    lo, hi = math.min(lo, v), math.max(hi, v)
  end
  local out = {}
  for i, v in ipairs(xs) do
    local k = 4
    if hi > lo then
      k = math.floor((v - lo) / (hi - lo) * 7 + 0.5) + 1
    end
    out[i] = BARS[k]
  end
  return table.concat(out)
end

-- The mean of xs[from..to].
local function mean(xs, from, to)
  return stats.mean(table.move(xs, from, to, 1, {}))
end

--- The trend of `values` (oldest first) in percent: the mean of the newer half against the
--- mean of the older half; nil with fewer than two values.
---@param values number[]
---@return number|nil pct
function M.trend(values)
  local n = #values
  if n < 2 then
    return nil
  end
  local half = n // 2
  local older = mean(values, 1, half)
  local newer = mean(values, half + 1, n)
  if older == 0 then
    return nil
  end
  return (newer / older - 1) * 100
end

local function pct_text(p)
  if p == nil then
    return '-'
  end
  return string.format('%+.1f%%', p)
end

local function day(t)
  return t and t:sub(1, 10) or '-'
end

--- The text of `tplua history list`: each series (key, runs, last value of `metric`, trend over
--- the last `last` runs, first and last date).
---@param h table the History
---@param opts {metric: string, last?: integer, rows?: table[]} rows: these series only
---@return string|nil text, string? err
function M.list(h, opts)
  local metric = opts.metric
  local n = opts.last or M.TREND_RUNS
  local rows = opts.rows
  if not rows then
    local err
    rows, err = h:series_list()
    if not rows then
      return nil, err
    end
  end
  if #rows == 0 then
    return string.format('%s: no runs yet (tplua history add DIR adds some)\n', h.shown)
  end
  local out = {}
  for _, s in ipairs(rows) do
    local pts, perr = h:points(s.key, { metric = metric, last = n })
    if not pts then
      return nil, perr
    end
    local values = {}
    for i, p in ipairs(pts) do
      values[i] = p.value
    end
    out[#out + 1] = { s.key, tostring(s.count), fmt(metric, values[#values]),
      pct_text(M.trend(values)), day(s.first_time), day(s.last_time) }
  end
  local headers = { 'series', 'runs', 'last ' .. (M.LABELS[metric] or metric),
    string.format('trend (last %d)', n), 'first', 'last run' }
  return M.align(headers, out, { [2] = true, [3] = true, [4] = true })
    .. string.format('%d series; trend: the mean of the newer half of the last %d runs against '
      .. 'the older half\n', #rows, n)
end

-- Short names of the stack items (tp.run.provenance.comparable's keys).
local SHORT = {
  ['gpu_stack.nvidia_driver'] = 'driver', ['gpu_stack.amdgpu_driver'] = 'amdgpu',
  ['gpu_stack.cuda_driver'] = 'CUDA driver', ['gpu_stack.cuda_runtime'] = 'CUDA',
  ['gpu_stack.hip_runtime'] = 'HIP', ['gpu_stack.nccl'] = 'NCCL', ['gpu_stack.rccl'] = 'RCCL',
  ['gpu_stack.rocm_smi'] = 'ROCm SMI', ['python.torch'] = 'torch', ['python.python'] = 'python',
  ['framework.commit'] = 'commit', ['framework.version'] = 'framework',
  ['container.image'] = 'image', ['container.rocm_version'] = 'ROCm',
  ['container.nvidia_pytorch_version'] = 'NGC PyTorch',
}

-- The items worth a column first, in this order.
local PREFERRED = { 'python.torch', 'gpu_stack.hip_runtime', 'gpu_stack.cuda_runtime',
  'container.rocm_version', 'gpu_stack.nvidia_driver', 'gpu_stack.amdgpu_driver',
  'gpu_stack.nccl', 'gpu_stack.rccl', 'framework.commit' }

--- The name a stack item is shown by: 'python.torch' -> 'torch'.
function M.short_name(k)
  return SHORT[k] or k:match('([^.]+)$')
end

-- The flattened stack of each point (tp.run.provenance.comparable), the items that differ
-- between runs, and those that are the same in every run.
local function stacks(points)
  local comparable = require('tp.run.provenance').comparable
  local flat, all = {}, {}
  for i, p in ipairs(points) do
    flat[i] = type(p.environment) == 'table' and comparable(p.environment) or {}
    for k in pairs(flat[i]) do
      all[k] = true
    end
  end
  local varying, constant = {}, {}
  for k in pairs(all) do
    local first, same = flat[1][k], true
    for i = 2, #flat do
      if flat[i][k] ~= first then
        same = false
        break
      end
    end
    if same and first ~= nil then
      constant[#constant + 1] = k
    elseif not same then
      varying[#varying + 1] = k
    end
  end
  local rank = {}
  for i, k in ipairs(PREFERRED) do
    rank[k] = i
  end
  local function before(a, b)
    local ra, rb = rank[a] or 1000, rank[b] or 1000
    if ra ~= rb then
      return ra < rb
    end
    return a < b
  end
  table.sort(varying, before)
  table.sort(constant, before)
  return flat, varying, constant
end

local function short_value(k, v)
  if v and k == 'framework.commit' then
    return v:sub(1, 10)
  end
  return v
end

--- The text of `tplua history show`: the runs of series `s` (a series_list row) with `metric`
--- and its CI, the stack items that change between them (else the main ones), a sparkline,
--- the notes.
---@param h table the History
---@param s table
---@param opts {metric: string, since?: string, last?: integer}
---@return string|nil text, string? err
function M.show(h, s, opts)
  local metric = opts.metric
  local pts, err = h:points(s.key, { metric = metric, since = opts.since, last = opts.last })
  if not pts then
    return nil, err
  end
  local out = { string.format('series %s (id %d)\n', s.key, s.id),
    string.format('  platform %s, GPU %s, framework %s %s, model %s, config %s, methodology %s\n',
      s.platform or '-', s.gpu or '-', s.framework or '-', s.framework_version or '-',
      s.model or '-', s.config_hash or '-', s.methodology or '-') }
  if #pts == 0 then
    out[#out + 1] = string.format('no run with %s%s\n', M.LABELS[metric] or metric,
      opts.since and (' since ' .. opts.since) or '')
    return table.concat(out)
  end
  local flat, varying, constant = stacks(pts)
  local cols = {}
  for i = 1, math.min(#varying, 5) do
    cols[i] = varying[i]
  end
  if #cols == 0 then
    for _, k in ipairs(PREFERRED) do
      if #cols < 3 and flat[1][k] ~= nil then
        cols[#cols + 1] = k
      end
    end
  end
  local headers = { 'date (UTC)', 'run', M.LABELS[metric] or metric, '95% CI' }
  for _, k in ipairs(cols) do
    headers[#headers + 1] = M.short_name(k)
  end
  local rows, values, mtime = {}, {}, false
  for i, p in ipairs(pts) do
    values[i] = p.value
    local ci = '-'
    if p.ci_lo and p.ci_hi then
      ci = string.format('[%s, %s]', fmt(metric, p.ci_lo), fmt(metric, p.ci_hi))
    end
    local date = times.minute(p.time_epoch)
    if p.time_basis == 'file mtime' then
      date = date .. '*'
      mtime = true
    end
    local row = { date, p.run_id or p.sha256:sub(1, 12), fmt(metric, p.value), ci }
    for _, k in ipairs(cols) do
      row[#row + 1] = short_value(k, flat[i][k]) or '-'
    end
    rows[i] = row
  end
  out[#out + 1] = '\n'
  out[#out + 1] = M.align(headers, rows, { [3] = true })
  if mtime then
    out[#out + 1] = '* the record has no time: its file\'s modification time stands for it\n'
  end
  local stack = {}
  for _, k in ipairs(constant) do
    local shown = false
    for _, c in ipairs(cols) do
      shown = shown or c == k
    end
    if not shown and #stack < 8 then
      stack[#stack + 1] = M.short_name(k) .. ' ' .. short_value(k, flat[1][k])
    end
  end
  if #stack > 0 then
    out[#out + 1] = 'same in every run: ' .. table.concat(stack, ', ') .. '\n'
  end
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(values) do
    lo, hi = math.min(lo, v), math.max(hi, v)
  end
  out[#out + 1] = string.format('\n%s  %s .. %s over %d run%s (%s to %s)\n',
    M.sparkline(values), fmt(metric, lo), fmt(metric, hi), #values, #values == 1 and '' or 's',
    day(pts[1].time), day(pts[#pts].time))
  local notes = h:notes(s.key) or {}
  if #notes > 0 then
    out[#out + 1] = '\nnotes:\n'
    for _, n in ipairs(notes) do
      out[#out + 1] = string.format('  %s  %s%s\n', day(n.time), n.text,
        n.series_key == '*' and '  (every series)' or '')
    end
  end
  return table.concat(out)
end

--- The series rows as a short table (key, runs, first, last): how a set prints at the prompt.
---@param rows table[]
---@return string
function M.series_table(rows)
  local out = {}
  for i, s in ipairs(rows) do
    out[i] = { tostring(i), s.key, tostring(s.count), day(s.first_time), day(s.last_time) }
  end
  return M.align({ '#', 'series', 'runs', 'first', 'last run' }, out, { [1] = true, [3] = true })
end

return M
