-- Reads the hand-written EXPECTED.md files of tests/fixtures/logs/<framework>/: one section per
-- log (`## \`file\``), whose first "| quantity | expected |" table gives the values every fixture
-- is checked against (tests/spec/log_corpus_spec.lua). Only the leading value of a cell is read;
-- the prose after it is for people.
local M = {}

-- The per-quantity keys a summary holds; `known` rows name one of them.
M.KEYS = { 'format', 'records', 'first', 'last', 'loss_first', 'loss_last', 'mean_step', 'lr_last',
  'errors', 'warnings', 'outcome' }

local function trim(s)
  return (s:gsub('^%s+', ''):gsub('%s+$', ''))
end

-- A leading number ("12.55223", "0.0", "6e-07"), or nil for "none", "—", "**absent**", "not ...".
local function leading_number(cell)
  local tok = cell:match('^%s*([%-+]?[%d.]+[eE]?[%-+]?%d*)')
  return tok and tonumber(tok) or nil
end

-- A comma-separated list of diagnostic kinds, sorted; "none" gives ''.
local function kinds(cell)
  local first = cell:match('^%s*`?([%w_,%s]-)`?%s*$') or cell:match('^%s*([%w_,]+)')
  if not first or first:match('^%s*none') then
    return ''
  end
  local list = {}
  for k in first:gmatch('[%w_]+') do
    list[#list + 1] = k
  end
  table.sort(list)
  return table.concat(list, ',')
end

--- Splits an EXPECTED.md text into sections: {file = {rows = {{quantity, expected}, ...},
--- order = n}}. Only the first two-column "quantity | expected" table of a section is read.
function M.sections(text)
  local out, cur, in_table, done, n = {}, nil, false, false, 0
  for line in (text .. '\n'):gmatch('(.-)\r?\n') do
    local name = line:match('^## `([^`]+)`')
    if name then
      n = n + 1
      cur = { rows = {}, order = n }
      out[name] = cur
      in_table, done = false, false
    elseif cur and not done then
      if line:match('^| quantity | expected |') then
        in_table = true
      elseif in_table and line:match('^|%-') then -- luacheck: ignore 542
        -- the table's rule line
      elseif in_table and line:match('^|') then
        local q, e = line:match('^|%s*(.-)%s*|%s*(.-)%s*|%s*$')
        if q then
          cur.rows[#cur.rows + 1] = { q, e }
        end
      elseif in_table then
        in_table, done = false, true
      end
    end
  end
  return out
end

--- Turns a section's rows into the summary the corpus spec checks:
--- {format, records, first, last, loss_first, loss_last, mean_step, mean_n, derived, lr_last,
---  errors (sorted kinds, '' for none, nil when the failure cell is prose), warnings (or nil),
---  known = {key = reason}}. `framework` (the folder name) is the format when no row names one.
function M.summary(section, framework)
  local e = { format = framework, format_from_folder = true, known = {}, known_order = {} }
  for _, row in ipairs(section.rows) do
    local q, v = row[1]:lower(), row[2]
    if q == 'format' then
      e.format, e.format_from_folder = v:match('^%s*`?([%w_]+)'), false
    elseif q == 'iteration records' then
      e.records = math.tointeger(leading_number(v))
    elseif q:match('^first / last') then
      local a, b = v:match('^%s*(%d+)%s*/%s*(%d+)')
      e.first, e.last = math.tointeger(tonumber(a)), math.tointeger(tonumber(b))
    elseif q == 'loss at first record' then
      e.loss_first = leading_number(v)
    elseif q == 'loss at last record' then
      e.loss_last = leading_number(v)
    elseif q == 'mean step time over all records' then
      local m = v:match('^%s*([%d.eE+-]+) s[%s%(]')
      local cnt = v:match('over (%d+) records?') or v:match('(%d+) records?')
      e.mean_step, e.mean_n = tonumber(m), math.tointeger(tonumber(cnt))
      e.derived = framework == 'torchtitan' or v:find('derived', 1, true) ~= nil
    elseif q == 'lr at last record' then
      e.lr_last = leading_number(v)
    elseif q == 'outcome' then
      e.outcome = v:match('^%s*`?([%w_]+)')
    elseif q == 'error kinds' then
      e.errors = kinds(v)
    elseif q == 'warning kinds' then
      e.warnings = kinds(v)
    elseif q == 'failure' and e.errors == nil then
      e.failure_text = v
      if v:match('^%s*none') then
        e.errors = ''
      end
    elseif q == 'known' then
      local key, reason = v:match('^%s*`?([%w_]+)`?%s*:%s*(.+)$')
      if key then
        e.known[key] = trim(reason)
        e.known_order[#e.known_order + 1] = key
      end
    end
  end
  return e
end

--- The diagnostic kinds a parsed log has (of `severity` when given), sorted, comma-joined.
---@param log table tp.log's result
---@param severity? string
---@return string
function M.log_kinds(log, severity)
  local out = {}
  for _, d in ipairs(log.diagnostics) do
    if not severity or d.severity == severity then
      out[#out + 1] = d.kind
    end
  end
  table.sort(out)
  return table.concat(out, ',')
end

--- Reads tests/fixtures/logs/<framework>/EXPECTED.md; returns {file = summary} or nil.
function M.read(path, framework)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local text = f:read('a')
  f:close()
  local out = {}
  for name, section in pairs(M.sections(text)) do
    out[name] = M.summary(section, framework)
    out[name].order = section.order
  end
  return out
end

return M
