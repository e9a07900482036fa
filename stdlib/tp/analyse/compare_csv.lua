-- tp.compare_csv: a comparison (tp.compare) as CSV for spreadsheets and scripts, one row per
-- group (platform, framework, configuration): its runs, frameworks and GPU, then for each metric
-- the numbers the text shows (n, mean, spread, confidence interval, ratio to the baseline and p)
-- and the basis of MFU and energy. RFC 4180; written to a file atomically, or to stdout.
local compare = require('tp.analyse.compare')
local results = require('tp.analyse.results')

local M = {}

--- The metrics in column order, with the stem of their columns (the unit in the name: values
--- are in that unit, MFU in percent as the text shows it). tokens_per_s is always there.
M.METRICS = {
  { 'tokens_per_s', 'tokens_per_s' },
  { 'tokens_per_s_per_gpu', 'tokens_per_s_per_gpu' },
  { 'step_time', 'step_time_s' },
  { 'mfu', 'mfu_percent' },
  { 'tflops_per_gpu', 'tflops_per_gpu' },
  { 'memory', 'memory_gib' },
  { 'memory_device', 'memory_device_gib' },
  { 'energy_per_token', 'energy_j_per_token' },
  { 'cost_per_1t_tokens', 'cost_usd_per_1t_tokens' },
  { 'time_to_train', 'time_to_train_h' },
}

--- The statistics of each metric, as column suffixes.
M.STATS = { 'n', 'mean', 'sd', 'cv', 'min', 'max', 'ci_lo', 'ci_hi', 'ratio', 'ratio_ci_lo',
  'ratio_ci_hi', 'p' }

-- Per metric, the basis column that follows its statistics.
local BASIS = { mfu = { 'mfu_peak', 'peak' }, energy_per_token = { 'energy_basis', 'energy' },
  cost_per_1t_tokens = { 'price_basis', 'price' } }

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

--- One CSV field (RFC 4180): numbers in their shortest exact form, text quoted when it holds a
--- comma, a quote or a line break (quotes doubled), nil as an empty field.
---@param v any
---@return string
function M.cell(v)
  if v == nil then
    return ''
  end
  if type(v) == 'number' then
    if math.type(v) == 'integer' then
      return tostring(v)
    end
    if not is_finite(v) then
      return ''
    end
    local s = string.format('%.15g', v)
    if tonumber(s) ~= v then
      s = string.format('%.17g', v)
    end
    return s
  end
  local s = tostring(v)
  if s:find('[",\r\n]') then
    return '"' .. s:gsub('"', '""') .. '"'
  end
  return s
end

--- Encodes rows as CSV text: comma separated, CRLF line ends (RFC 4180). `rows[1]` is the
--- header (its length is the width); a nil in a later row is an empty field.
---@param rows any[][]
---@return string
function M.encode(rows)
  local width = #rows[1]
  local out = {}
  for i, row in ipairs(rows) do
    local cells = {}
    for j = 1, width do
      cells[j] = M.cell(row[j])
    end
    out[i] = table.concat(cells, ',')
  end
  return table.concat(out, '\r\n') .. '\r\n'
end

local function distinct(runs, key)
  local seen, out = {}, {}
  for _, r in ipairs(runs) do
    local v = results.get(r, key)
    if v ~= nil and not seen[v] then
      seen[v] = true
      out[#out + 1] = tostring(v)
    end
  end
  table.sort(out)
  return #out > 0 and table.concat(out, ' ') or nil
end

-- The comparison entries by metric name; tokens_per_s computed with the same settings when the
-- comparison left it out (it is not among tp.compare's default metrics).
local function entries(set, cmp)
  local by_name = {}
  for _, m in ipairs(cmp.metrics) do
    by_name[m.name] = m
  end
  if not by_name.tokens_per_s then
    local s = cmp.settings or {}
    local extra = compare.compare(set, { by = cmp.by, baseline = cmp.baseline,
      metrics = { 'tokens_per_s' }, seed = s.seed, n_boot = s.n_boot, level = s.level,
      alpha = s.alpha })
    by_name.tokens_per_s = extra and extra.metrics[1]
  end
  return by_name
end

--- The rows of a comparison: a header, then one row per group in the comparison's order
--- (baseline first): the group, whether it is the baseline, its runs, frameworks, models, GPU
--- names and counts; per metric of M.METRICS compared, `<stem>_<stat>` for each of M.STATS (and
--- the basis of MFU, energy and cost); the steady-state window. Rows are lists (nil = empty).
---```lua
---local cmp = assert(tp.compare.compare(set))
---local rows = tp.compare_csv.rows(set, cmp)
---io.write(tp.compare_csv.encode(rows))
---```
---@param set table the tp.results ResultSet compared
---@param cmp table tp.compare.compare's result
---@return table[] rows
function M.rows(set, cmp)
  if type(set) ~= 'table' or type(set.runs) ~= 'table' then
    error('tp.compare_csv.rows: result set expected, got ' .. type(set), 2)
  end
  if type(cmp) ~= 'table' or type(cmp.metrics) ~= 'table' or type(cmp.groups) ~= 'table' then
    error('tp.compare_csv.rows: comparison (tp.compare.compare) expected', 2)
  end
  local by_name = entries(set, cmp)
  local header = { cmp.by, 'baseline', 'runs', 'run_ids', 'frameworks', 'models', 'gpu',
    'gpus' }
  local used = {}
  for _, spec in ipairs(M.METRICS) do
    if by_name[spec[1]] then
      used[#used + 1] = spec
      for _, st in ipairs(M.STATS) do
        header[#header + 1] = spec[2] .. '_' .. st
      end
      if BASIS[spec[1]] then
        header[#header + 1] = BASIS[spec[1]][1]
      end
    end
  end
  header[#header + 1] = 'steady_state'
  local rows = { header }
  local by_id = {}
  for _, r in ipairs(set.runs) do
    by_id[r.id] = r
  end
  local basis = cmp.basis or {}
  for _, gr in ipairs(cmp.groups) do
    local runs = {}
    for _, id in ipairs(gr.runs) do
      runs[#runs + 1] = by_id[id]
    end
    local key = tostring(gr.value)
    local cells, k = {}, 0
    local function add(v)
      k = k + 1
      cells[k] = v
    end
    for _, v in ipairs({ key, gr.value == cmp.baseline and 'yes' or 'no', gr.n,
      table.concat(gr.runs, ' ') }) do
      add(v)
    end
    add(distinct(runs, 'framework'))
    add(distinct(runs, 'model'))
    add(distinct(runs, 'gpu'))
    add(distinct(runs, 'gpus'))
    for _, spec in ipairs(used) do
      local m = by_name[spec[1]]
      local scale = m.scale or 1
      local s, ratio = {}, nil
      for _, x in ipairs(m.groups) do
        if x.value == gr.value then
          s = x
        end
      end
      for _, x in ipairs(m.ratios) do
        if x.group == gr.value then
          ratio = x
        end
      end
      local function scaled(v)
        return is_finite(v) and v * scale or nil
      end
      local ci = s.ci or {}
      local rci = ratio and ratio.ci or {}
      add(s.n or 0)
      add(scaled(s.mean))
      add(scaled(s.stddev))
      add(s.cv)
      add(scaled(s.min))
      add(scaled(s.max))
      add(scaled(ci.lo))
      add(scaled(ci.hi))
      add(gr.value == cmp.baseline and (s.n or 0) > 0 and 1 or (ratio and ratio.ratio))
      add(rci.lo)
      add(rci.hi)
      add(ratio and ratio.p)
      local b = BASIS[spec[1]]
      if b then
        add((basis[b[2]] or {})[key])
      end
    end
    add((basis.steady_state or {})[key])
    rows[#rows + 1] = cells
  end
  return rows
end

--- The comparison as CSV text (M.rows, M.encode).
---@param set table
---@param cmp table
---@return string
function M.format(set, cmp)
  return M.encode(M.rows(set, cmp))
end

--- Writes CSV text to `target`: '-' is standard output, anything else a file replaced
--- atomically (tp.fs.write_atomic: temporary file, fsync, rename). Fails with nil, err, code.
---@param target string
---@param text string
---@return true|nil ok
---@return string? err
---@return string? code
function M.write(target, text)
  if type(target) ~= 'string' or target == '' then
    error('tp.compare_csv.write: a file name or - expected', 2)
  end
  if target == '-' then
    io.stdout:write(text)
    io.stdout:flush()
    return true
  end
  local ok, err, code = require('tp.fs').write_atomic(target, text)
  if not ok then
    return nil, string.format('%s: %s', target, tostring(err):gsub('^' .. target:gsub('%p',
      '%%%0') .. ': ', '')), code
  end
  return true
end

return M
