-- tp.analyse.collectives: nccl-tests and rccl-tests results set side by side: the results found in
-- records (kind "collective_bench", tp.parse.collectives.record) or in the tools' own logs, grouped
-- by collective, rank count and type, one column per platform; busbw per message size with a
-- seeded bootstrap confidence interval over the repeated runs (each table of each result is one
-- run); and the gate `--min-busbw GBPS[@SIZE]`. docs/collectives.md.
local fs = require('tp.fs')
local json = require('tp.json')
local stats = require('tp.stats')
local parse = require('tp.parse.collectives')

local M = {}

--- Files of a directory read as results: records and the tools' logs.
M.RECORD_FILE = '%.json$'
M.LOG_FILES = { '%.log$', '%.txt$', '%.out$' }

local function is_table(v)
  return type(v) == 'table' and not json.is_null(v)
end

--- Whether a decoded JSON document is a collective_bench record.
---@param doc any
---@return boolean
function M.is_record(doc)
  return is_table(doc) and doc.kind == 'collective_bench' and is_table(doc.collectives)
end

local function head_of(path, n)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local s = f:read(n or 65536)
  f:close()
  return s
end

-- One input file: a collective_bench record, a nccl-tests/rccl-tests log, another run record
-- (counted in `others`), or nothing of ours.
-- Keys of the first bytes of a run record of another kind (training records, tprimat-era
-- results): such a file is counted, not decoded.
local OTHER_KEYS = { '"schema"', '"performance_metrics"', '"records"', '"step_times"',
  '"training_config"', '"args"' }

local function load_file(path, found, explicit)
  if path:find(M.RECORD_FILE) then
    -- A collective record names its section early (keys are sorted): other files are only
    -- counted from their first bytes, not decoded (tplua compare reads them next).
    local head = head_of(path) or ''
    if not head:find('"collectives"', 1, true) then
      for _, k in ipairs(OTHER_KEYS) do
        if head:find(k, 1, true) then
          found.others = found.others + 1
          return
        end
      end
      if not explicit then
        return
      end
    end
    local doc, err = json.load_file(path)
    if doc == nil then
      if explicit then
        found.errors[#found.errors + 1] = err
      end
      return
    end
    if M.is_record(doc) then
      found.results[#found.results + 1] = { path = path, record = doc }
    elseif is_table(doc) and (doc.schema or doc.records or doc.performance_metrics) then
      found.others = found.others + 1
    end
    return
  end
  local head = head_of(path)
  if head and parse.sniff(head) then
    local r, err = parse.parse(path)
    if not r then
      found.errors[#found.errors + 1] = err
      return
    end
    found.results[#found.results + 1] = { path = path, record = parse.record(r, { path = path }) }
  elseif explicit then
    found.unread[#found.unread + 1] = path
  end
end

local function walk(dir, found, recursive, depth)
  for _, e in ipairs(fs.list(dir) or {}) do
    local p = dir .. '/' .. e.name
    if e.type == 'directory' and recursive and depth < 16 and e.name:sub(1, 1) ~= '.' then
      walk(p, found, recursive, depth + 1)
    elseif e.type ~= 'directory' and e.name:sub(1, 1) ~= '.'
      and (fs.stat(p) or {}).type == 'file' then  -- never a FIFO: reading it would take its data
      local ours = p:find(M.RECORD_FILE)
      for _, pat in ipairs(M.LOG_FILES) do
        ours = ours or p:find(pat)
      end
      if ours then
        load_file(p, found, false)
      end
    end
  end
end

--- Finds the collective results among files and directories (recursively unless
--- opts.recursive == false): { results = { {path, record} }, others = count of other run
--- records, errors = { message }, unread = { path } }.
---@param inputs string[]
---@param opts? { recursive?: boolean }
---@return table
function M.find(inputs, opts)
  opts = opts or {}
  local found = { results = {}, others = 0, errors = {}, unread = {} }
  for _, p in ipairs(inputs) do
    local st = fs.stat(p)
    if st and st.type == 'directory' then
      walk(p:gsub('/+$', ''), found, opts.recursive ~= false, 0)
    elseif st and st.type == 'file' then
      load_file(p, found, true)
    elseif st then
      found.unread[#found.unread + 1] = p
    else
      found.errors[#found.errors + 1] = p .. ': no such file or directory'
    end
  end
  table.sort(found.results, function(a, b)
    return a.path < b.path
  end)
  return found
end

--- The label of a result's platform: its GPU's catalog id (else its name) and the tool.
function M.label_of(rec, test)
  local gi = is_table(rec.gpu_info) and rec.gpu_info or {}
  return (type(gi.hardware) == 'string' and gi.hardware)
    or (type(test.gpu) == 'string' and test.gpu)
    or (type(rec.platform) == 'string' and rec.platform) or '?'
end

--- The power-of-two bucket of a message size: 2^floor(log2 size) (0 for 0).
---@param size integer bytes
---@return integer
function M.bucket(size)
  if size < 1 then
    return 0
  end
  local b = 1
  while b * 2 <= size do
    b = b * 2
  end
  return b
end

--- Sizes as nccl-tests takes them on its command line: 8, 64K, 128M, 8G (K, M, G, T binary).
---@param text string
---@return integer|nil bytes
function M.parse_size(text)
  local n, unit = tostring(text):match('^(%d+)([KkMmGgTt]?)[Bb]?$')
  if not n then
    return nil
  end
  local mul = ({ [''] = 1, k = 1024, m = 1024 ^ 2, g = 1024 ^ 3, t = 1024 ^ 4 })[unit:lower()]
  return math.tointeger(tonumber(n) * mul)
end

--- Sizes as text: 8 B, 64 KiB, 128 MiB, 8 GiB (exact powers of 1024 only, else bytes).
function M.size_text(size)
  for _, u in ipairs({ { 1024 ^ 4, 'TiB' }, { 1024 ^ 3, 'GiB' }, { 1024 ^ 2, 'MiB' },
    { 1024, 'KiB' } }) do
    if size >= u[1] and size % math.tointeger(u[1]) == 0 then
      return string.format('%d %s', size // math.tointeger(u[1]), u[2])
    end
  end
  return string.format('%d B', size)
end

--- Parses a gate `GBPS[@SIZE]` ('300', '350@1G'): { gbps, size? }, or nil and a message.
---@param text string
---@return table|nil gate, string? err
function M.parse_gate(text)
  local g, s = tostring(text):match('^([%d.]+)@(%S+)$')
  if not g then
    g = tostring(text):match('^([%d.]+)$')
  end
  local gbps = g and tonumber(g)
  if not gbps or gbps <= 0 or gbps == math.huge then
    return nil, string.format("'%s': GBPS[@SIZE] expected, a positive number of GB/s and "
      .. 'optionally a message size (8, 64K, 128M, 8G)', tostring(text))
  end
  local size
  if s then
    size = M.parse_size(s)
    if not size or size < 1 then
      return nil, string.format("'%s': the size '%s' is not a message size (8, 64K, 128M, 8G)",
        tostring(text), s)
    end
  end
  return { gbps = gbps, size = size, text = text }
end

local function group_key(test)
  return string.format('%s|%s|%s', test.collective, tostring(test.ranks), tostring(test.dtype))
end

--- Sets the results side by side. `results` are M.find's; opts: section ('out' or 'in', default
--- 'out': out-of-place), seed (default 42), n_boot (default 10000), level (0.95).
--- Returns { tables = { { collective, ranks, dtype, labels = {label...}, rows = { { size,
--- cells = { [label] = { n, mean, lo, hi, samples } } } } } }, runs = { {path, label,
--- collective, ranks, dtype, tables} } }.
---@param results table[]
---@param opts? table
---@return table
function M.compare(results, opts)
  opts = opts or {}
  local section = opts.section or 'out'
  if section ~= 'out' and section ~= 'in' then
    error("collectives.compare: section must be 'out' or 'in'", 2)
  end
  local boot = { seed = opts.seed or 42, resamples = opts.n_boot or 10000,
    level = opts.level or 0.95 }
  local tables, order, runs = {}, {}, {}
  for _, res in ipairs(results) do
    local rec = res.record
    for _, t in ipairs(rec.collectives.tests or {}) do
      local key = group_key(t)
      local tb = tables[key]
      if not tb then
        tb = { collective = t.collective, ranks = t.ranks, dtype = t.dtype, labels = {},
          by_label = {}, sizes = {} }
        tables[key] = tb
        order[#order + 1] = key
      end
      local label = M.label_of(rec, t)
      if not tb.by_label[label] then
        tb.by_label[label] = {}
        tb.labels[#tb.labels + 1] = label
      end
      local samples = tb.by_label[label]
      local cycles = 0
      for _, r in ipairs(t.rows or {}) do
        local c = r[section]
        if is_table(c) and type(c.busbw) == 'number' and r.size > 0 then
          local per = samples[r.size] or {}
          per[#per + 1] = { busbw = c.busbw, algbw = c.algbw, time_us = c.time_us,
            path = res.path }
          samples[r.size] = per
          tb.sizes[r.size] = true
        end
        cycles = math.max(cycles, math.tointeger(r.cycle) or 1)
      end
      runs[#runs + 1] = { path = res.path, label = label, collective = t.collective,
        ranks = t.ranks, dtype = t.dtype, tables = cycles, tool = rec.collectives.tool,
        avg_busbw = t.avg_busbw }
    end
  end
  local out = { tables = {}, runs = runs, section = section, level = boot.level,
    seed = boot.seed, n_boot = boot.resamples }
  for _, key in ipairs(order) do
    local tb = tables[key]
    table.sort(tb.labels)
    local sizes = {}
    for s in pairs(tb.sizes) do
      sizes[#sizes + 1] = s
    end
    table.sort(sizes)
    local rows = {}
    for _, size in ipairs(sizes) do
      local cells = {}
      for _, label in ipairs(tb.labels) do
        local per = tb.by_label[label][size]
        if per then
          local xs = {}
          for i, p in ipairs(per) do
            xs[i] = p.busbw
          end
          local cell = { n = #xs, mean = stats.mean(xs), samples = xs }
          if #xs >= 2 then
            local ci = stats.bootstrap_ci(xs, boot)
            cell.lo, cell.hi = ci.lo, ci.hi
          end
          cells[label] = cell
        end
      end
      rows[#rows + 1] = { size = size, bucket = M.bucket(size), cells = cells }
    end
    out.tables[#out.tables + 1] = { collective = tb.collective, ranks = tb.ranks,
      dtype = tb.dtype, labels = tb.labels, rows = rows }
  end
  return out
end

--- Checks a comparison against a gate ({gbps, size?}, M.parse_gate): each platform of each table
--- must reach `gbps` of busbw: at the message size given (the mean over its runs; a platform that
--- did not measure it fails), else at its best size. Returns { ok, checks = { {collective,
--- ranks, dtype, label, size, busbw, ok, why} } }.
---@param cmp table M.compare's result
---@param gate table
---@return table
function M.gate(cmp, gate)
  local checks, ok = {}, true
  for _, tb in ipairs(cmp.tables) do
    for _, label in ipairs(tb.labels) do
      local best, at
      for _, r in ipairs(tb.rows) do
        local c = r.cells[label]
        if c and (gate.size == nil and (not best or c.mean > best)
          or gate.size ~= nil and r.size == gate.size) then
          best, at = c.mean, r.size
        end
      end
      local pass = best ~= nil and best >= gate.gbps
      local why
      if best == nil then
        why = string.format('no result at %s', M.size_text(gate.size))
      else
        why = string.format('%.2f GB/s at %s %s %.2f', best, M.size_text(at),
          pass and '>=' or '<', gate.gbps)
      end
      checks[#checks + 1] = { collective = tb.collective, ranks = tb.ranks, dtype = tb.dtype,
        label = label, size = at, busbw = best, ok = pass, why = why }
      ok = ok and pass
    end
  end
  return { ok = ok, checks = checks, gate = gate }
end

return M
