-- tp.analyse._results_output: the result set as text: an aligned table, CSV and JSON (the
-- columns checked against the known fields), and a run's plain summary.
local json = require('tp.json')
local decode = require('tp.analyse._results_decode')
local ResultSet = require('tp.analyse._results_load').ResultSet
local get = require('tp.analyse._results_query').get

local M = {}

local is_null, is_finite = decode.is_null, decode.is_finite
local SUMMARY_FIELDS, DETAIL_FIELDS = decode.SUMMARY_FIELDS, decode.DETAIL_FIELDS
local KEPT_TABLES = decode.KEPT_TABLES

local DEFAULT_COLUMNS = { 'id', 'platform', 'framework', 'model', 'gpus', 'gbs', 'seq_len',
  'precision', 'step_time', 'tokens_per_s_per_gpu', 'status' }

local function fmt_value(v, fmt)
  if v == nil or is_null(v) then
    return ''
  end
  if type(v) == 'number' then
    if fmt then
      return string.format(fmt, v)
    end
    if math.type(v) == 'integer' then
      return tostring(v)
    end
    if v ~= v or v == math.huge or v == -math.huge then
      return tostring(v)
    end
    return string.format('%.6g', v)
  end
  if type(v) == 'boolean' then
    return tostring(v)
  end
  if type(v) == 'table' then
    local t = json.encode(v, { allow_nan = true })
    return t or '<table>'
  end
  return tostring(v)
end

-- Field names a column may name whether or not any run has a value: the summary fields, the
-- per-iteration arrays, the kept tables and the summary's extras.
local KNOWN_FIELDS = {}
for _, list in ipairs({ SUMMARY_FIELDS, DETAIL_FIELDS, KEPT_TABLES, { 'run_id',
  'dataset_info', 'nonfinite_values', 'recorded_tokens_per_s_per_gpu', 'recorded_step_time' } }) do
  for _, k in ipairs(list) do
    KNOWN_FIELDS[k] = true
  end
end

-- A string column is known when it names a field, or when some run has a value for it (a
-- dotted path into a kept table: 'training_config.seed'); in an empty set, any dotted path into
-- a kept table. Misspelt columns would otherwise print as blanks.
local function check_column(fname, key, runs, level)
  if KNOWN_FIELDS[key] then
    return
  end
  local head = key:match('^([^.]+)%.')
  if head and KNOWN_FIELDS[head] and #runs == 0 then
    return
  end
  for _, r in ipairs(runs) do
    if get(r, key) ~= nil then
      return
    end
  end
  local near = {}
  for _, k in ipairs(SUMMARY_FIELDS) do
    if k:find(key, 1, true) or key:find(k, 1, true) then
      near[#near + 1] = k
    end
  end
  error(string.format("ResultSet:%s: unknown column '%s': no run has it%s (known: %s; or a "
    .. 'dotted path into %s, e.g. training_config.seed)', fname, key, #near > 0
    and ('; did you mean ' .. table.concat(near, ', ') .. '?') or '',
    table.concat(SUMMARY_FIELDS, ', '), table.concat(KEPT_TABLES, ', ')), level + 1)
end

local function columns_of(opts, fname, runs)
  local cols = opts and (opts.columns or (opts[1] and opts)) or DEFAULT_COLUMNS
  local out = {}
  for i, c in ipairs(cols) do
    if type(c) == 'string' then
      out[i] = { key = c, title = c }
    elseif type(c) == 'table' and (type(c.key) == 'string' or type(c.key) == 'function') then
      out[i] = { key = c.key, title = c.title or tostring(c.key), format = c.format }
    else
      error(string.format('ResultSet:%s: column %d must be a key or {key=, title=, format=}',
        fname, i), 3)
    end
    if type(out[i].key) == 'string' then
      check_column(fname, out[i].key, runs, 3)
    end
  end
  return out
end

--- Renders the set as an aligned text table. `opts` is a list of columns or {columns = ...};
--- a column is a key (as in tp.results.get) or {key=, title=, format = '%.1f'}.
---```lua
---print(set:sort('tokens_per_s_per_gpu', { desc = true }):table({ 'id', 'platform',
---  { key = 'tokens_per_s_per_gpu', title = 'tok/s/GPU', format = '%.0f' } }))
---```
---@param opts? table
---@return string
function ResultSet:table(opts)
  local cols = columns_of(opts, 'table', self.runs)
  local rows, widths, numeric = {}, {}, {}
  for j, c in ipairs(cols) do
    widths[j] = #c.title
    numeric[j] = true
  end
  for i, r in ipairs(self.runs) do
    local row = {}
    for j, c in ipairs(cols) do
      local v = get(r, c.key)
      row[j] = fmt_value(v, c.format)
      if v ~= nil and type(v) ~= 'number' then
        numeric[j] = false
      end
      widths[j] = math.max(widths[j], #row[j])
    end
    rows[i] = row
  end
  local function line(cells)
    local parts = {}
    for j, cell in ipairs(cells) do
      local pad = string.rep(' ', widths[j] - #cell)
      parts[j] = numeric[j] and (pad .. cell) or (cell .. pad)
    end
    return (table.concat(parts, '  '):gsub('%s+$', ''))
  end
  local titles, rules = {}, {}
  for j, c in ipairs(cols) do
    titles[j] = c.title
    rules[j] = string.rep('-', widths[j])
  end
  local out = { line(titles), line(rules) }
  for _, row in ipairs(rows) do
    out[#out + 1] = line(row)
  end
  return table.concat(out, '\n') .. '\n'
end

local function csv_cell(s)
  if s:find('[",\r\n]') then
    return '"' .. s:gsub('"', '""') .. '"'
  end
  return s
end

--- Renders the set as CSV (RFC 4180: comma separated, quoted when needed, CRLF line ends), one
--- row per run, a header row first. Columns as for `table` (default: every summary field).
---@param opts? table
---@return string
function ResultSet:to_csv(opts)
  local cols = columns_of(opts or { columns = SUMMARY_FIELDS }, 'to_csv', self.runs)
  local out = {}
  local head = {}
  for j, c in ipairs(cols) do
    head[j] = csv_cell(c.title)
  end
  out[1] = table.concat(head, ',')
  for _, r in ipairs(self.runs) do
    local row = {}
    for j, c in ipairs(cols) do
      local v = get(r, c.key)
      if type(v) == 'number' and c.format == nil then
        row[j] = math.type(v) == 'integer' and tostring(v) or string.format('%.17g', v)
      else
        row[j] = csv_cell(fmt_value(v, c.format))
      end
    end
    out[#out + 1] = table.concat(row, ',')
  end
  return table.concat(out, '\r\n') .. '\r\n'
end

--- Returns the summary of `run` as a plain table (summary fields only, no per-iteration data).
---@param run table
---@return table
function M.summary(run)
  local out = {}
  for _, k in ipairs(SUMMARY_FIELDS) do
    local v = rawget(run, k)
    if v ~= nil and not (type(v) == 'number' and not is_finite(v)) then
      out[k] = v
    end
  end
  return out
end

--- Renders the set as JSON: {runs = [summary...], errors = [...], skipped = [...]}.
---@param opts? {pretty?: boolean}
---@return string
function ResultSet:to_json(opts)
  local runs = json.array()
  for i, r in ipairs(self.runs) do
    runs[i] = M.summary(r)
  end
  local errors = json.array()
  for i, e in ipairs(self.errors) do
    errors[i] = { path = e.path, message = e.message, code = e.code }
  end
  local skipped = json.array()
  for i, e in ipairs(self.skipped) do
    skipped[i] = { path = e.path, reason = e.reason }
  end
  local text, err = json.encode({ runs = runs, errors = errors, skipped = skipped },
    { pretty = opts and opts.pretty or false })
  if not text then
    error('ResultSet:to_json: ' .. tostring(err), 2)
  end
  return text
end

return M
