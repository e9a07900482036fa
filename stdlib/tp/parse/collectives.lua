-- tp.parse.collectives: the output of NVIDIA's nccl-tests and AMD's rccl-tests (all_reduce_perf
-- and the other *_perf programs) read into plain tables: the header (the tool and its version,
-- the run's parameters, the devices, the library's version), each table's rows (size, count,
-- type, redop, root, then time, algbw, busbw and #wrong out-of-place and in-place), the summary
-- lines; lines of other programs between them (NCCL INFO, MPI warnings, srun/mpirun prefixes)
-- are passed over. The bus factors nccl-tests defines per collective (its doc/PERFORMANCE.md)
-- and the check that each row's printed figures fit them. docs/collectives.md.
local record_part = require('tp.parse._collectives_record')

local M = {}

--- The collectives, by the names the trace classes use.
M.KINDS = { 'all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all', 'broadcast', 'reduce',
  'send_recv', 'gather', 'scatter', 'hypercube' }

-- Names of each collective in program names (all_reduce_perf), NCCL kernel names
-- (ncclDevKernel_AllReduce_...) and the profiler's "Collective name" (allreduce, _allgather_base,
-- reduce_scatter_tensor, all_to_all_single...): lower-cased with '_' removed, first match wins.
local NAMES = {
  { 'allreduce', 'all_reduce' }, { 'allgather', 'all_gather' },
  { 'reducescatter', 'reduce_scatter' }, { 'alltoall', 'all_to_all' },
  { 'broadcast', 'broadcast' }, { 'sendrecv', 'send_recv' }, { 'hypercube', 'hypercube' },
  { 'gather', 'gather' }, { 'scatter', 'scatter' }, { 'send', 'send_recv' },
  { 'recv', 'send_recv' }, { 'reduce', 'reduce' },
}

--- The collective a name stands for ('all_reduce_perf', 'AllReduce', '_allgather_base',
--- 'reduce_scatter_tensor'), or nil.
---@param text string
---@return string|nil
function M.kind_of(text)
  if type(text) ~= 'string' then
    return nil
  end
  local t = text:lower():gsub('[_%-]', '')
  for _, n in ipairs(NAMES) do
    if t:find(n[1], 1, true) then
      return n[2]
    end
  end
  return nil
end

--- The bus factor of a collective over n ranks, as nccl-tests defines it (doc/PERFORMANCE.md;
--- src/*.cu, GetBw): all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all, gather and
--- scatter (n-1)/n; broadcast, reduce, send/recv and hypercube 1. busbw = algbw x factor.
---@param kind string
---@param n integer ranks
---@return number|nil factor, string? err
function M.bus_factor(kind, n)
  if math.type(n) ~= 'integer' or n < 1 then
    return nil, string.format('bus factor: ranks must be a whole number >= 1, got %s', tostring(n))
  end
  if kind == 'all_reduce' then
    return 2 * (n - 1) / n
  elseif kind == 'all_gather' or kind == 'reduce_scatter' or kind == 'all_to_all'
    or kind == 'gather' or kind == 'scatter' then
    return (n - 1) / n
  elseif kind == 'broadcast' or kind == 'reduce' or kind == 'send_recv' or kind == 'hypercube'
  then
    return 1.0
  end
  return nil, string.format("bus factor: unknown collective '%s'", tostring(kind))
end

--- The bytes algbw counts for a row of `size` bytes (the size column, which nccl-tests prints as
--- the larger of the send and receive buffers): the size itself, except for hypercube, whose
--- algbw counts the (n-1)/n of it each rank receives from the others.
function M.algbw_bytes(kind, size, n)
  if kind == 'hypercube' then
    return size * (n - 1) / n
  end
  return size
end

-- Bytes of one element of each type nccl-tests and rccl-tests name (src/common.cu test_typenames).
M.TYPE_SIZES = { int8 = 1, uint8 = 1, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8, half = 2,
  float = 4, double = 8, bfloat16 = 2, bf16 = 2, f8e4m3 = 1, f8e5m2 = 1, fp8_e4m3 = 1,
  fp8_e5m2 = 1, int = 4, char = 1 }

local REDOPS = { sum = true, prod = true, min = true, max = true, avg = true, none = true,
  premulsum = true, mulsum = true, ['-'] = true }

-- Half a unit of the last digit a number was printed with ('613.3' -> 0.05, '15870' -> 0.5,
-- '1.2e+05' -> 5000).
local function half_unit(text)
  local mant, exp = text:match('^[%d.]+'), tonumber(text:match('[eE]([%+%-]?%d+)$') or '0')
  local frac = mant and mant:match('%.(%d*)$') or ''
  return 0.5 * 10 ^ (exp - #frac)
end

--- Checks one printed (time, algbw, busbw) against the size, the ranks and the bus factor: the
--- exact bandwidth x = bytes / time that every printed figure allows (the time within the
--- rounding of its last digit, algbw and busbw within theirs) exists. Returns consistent, and
--- tplua's algbw (x) and busbw (x * factor) in GB/s; they print as the tool printed them when
--- consistent.
---@param kind string
---@param n integer ranks
---@param size integer bytes
---@param time_text string the time column as printed (us)
---@param algbw_text string
---@param busbw_text string
---@return boolean consistent, number algbw, number busbw
function M.check(kind, n, size, time_text, algbw_text, busbw_text)
  local f = assert(M.bus_factor(kind, n))
  local bytes = M.algbw_bytes(kind, size, n)
  local t, a, b = tonumber(time_text), tonumber(algbw_text), tonumber(busbw_text)
  local dt, da, db = half_unit(time_text), half_unit(algbw_text), half_unit(busbw_text)
  -- GB/s from bytes and microseconds: bytes / 1e9 / (t / 1e6).
  local lo = math.max(bytes / 1e3 / (t + dt), a - da, (b - db) / f)
  local hi_t = t - dt > 0 and bytes / 1e3 / (t - dt) or math.huge
  local hi = math.min(hi_t, a + da, (b + db) / f)
  local x = (lo <= hi) and (lo + hi) / 2 or bytes / 1e3 / t
  return lo <= hi * (1 + 1e-12), x, x * f
end

-- A line's text without what a launcher put in front of it: srun --label ('  3: '), Open MPI's
-- --tag-output ('[1,0]<stdout>:'), and the line ending.
local function strip(line)
  line = line:gsub('\r$', '')
  line = line:gsub('^%s*%d+: ?', '', 1)
  line = line:gsub('^%[%d+,%d+%]<%a+>:', '', 1)
  return line
end

-- Numbers as nccl-tests prints them (%g, %.2f, %.0f, %.1e).
local function number(s)
  if not s or not s:match('^[%+%-]?%d*%.?%d+[eE]?[%+%-]?%d*$') then
    return nil
  end
  local v = tonumber(s)
  if not v or v ~= v or v == math.huge or v == -math.huge then
    return nil
  end
  return v
end

local function integer(s)
  return s and s:match('^%d+$') and math.tointeger(tonumber(s)) or nil
end

local function fail(path, lineno, fmt, ...)
  return nil, string.format('%s: line %d: ', path, lineno) .. string.format(fmt, ...), 'EPARSE'
end

-- The header of a table: its column names, and which sections (out-of-place, in-place) they
-- hold with how many columns each.
local function table_header(names, above)
  local h = { left = {}, sections = {}, width = 0, timestamp = false }
  local i = 1
  while i <= #names and names[i] ~= 'time' and names[i] ~= 'cputime' do
    h.left[#h.left + 1] = names[i]
    i = i + 1
  end
  local starts = {}
  for j = i, #names do
    if names[j] == 'time' or names[j] == 'cputime' then
      starts[#starts + 1] = j
    elseif names[j] == 'timestamp' then
      h.timestamp = true
    end
  end
  if #starts == 0 then
    return nil
  end
  local width = (#starts > 1 and starts[2] or (#names - (h.timestamp and 1 or 0) + 1)) - starts[1]
  h.width = width
  h.cputime = names[starts[1]] == 'cputime'
  if #starts == 2 then
    h.sections = { 'out', 'in' }
  elseif above and above:find('out%-of%-place') then
    h.sections = { 'out' }
  else
    h.sections = { 'in' }
  end
  h.per_iter = width >= 8
  return h
end

-- A row of a table: { size, count, type, redop, root, out = {...}, ['in'] = {...} }, or nil and
-- the field at fault.
local function table_row(tokens, h)
  local size, count = integer(tokens[1]), integer(tokens[2])
  if not size then
    return nil, 'size', tokens[1]
  end
  if not count then
    return nil, 'count', tokens[2]
  end
  local row = { size = size, count = count }
  local k = 3
  local t = tokens[k]
  if not t or number(t) then
    return nil, 'type', t
  end
  row.type = t
  k = k + 1
  -- redop and root, when the header has them and the row prints them (an old alltoall row
  -- leaves its redop blank).
  local has_root = false
  for _, n in ipairs(h.left) do
    has_root = has_root or n == 'root'
  end
  if tokens[k] and REDOPS[tokens[k]:lower()] then
    row.redop = tokens[k]
    k = k + 1
  end
  if has_root and tokens[k] and tokens[k]:match('^%-?%d+$') and tokens[k + 1]
    and #tokens - k >= #h.sections * h.width then
    row.root = math.tointeger(tonumber(tokens[k]))
    k = k + 1
  end
  local names = { 'time', 'algbw', 'busbw', 'wrong', 'i_min', 'i_max', 'i_p99', 'i_cv' }
  for _, sec in ipairs(h.sections) do
    local cols = {}
    for j = 1, h.width do
      local s = tokens[k]
      if s == nil then
        return nil, sec == 'out' and 'out-of-place ' .. (names[j] or '?')
          or 'in-place ' .. (names[j] or '?'), '(missing)'
      end
      cols[j] = s
      k = k + 1
    end
    local time, algbw, busbw = number(cols[1]), number(cols[2]), number(cols[3])
    local label = sec == 'out' and 'out-of-place' or 'in-place'
    if not time or time < 0 then
      return nil, label .. ' time', cols[1]
    end
    if not algbw or algbw < 0 then
      return nil, label .. ' algbw', cols[2]
    end
    if not busbw or busbw < 0 then
      return nil, label .. ' busbw', cols[3]
    end
    local wrong = cols[4]
    if wrong ~= 'N/A' and not number(wrong) then
      return nil, label .. ' #wrong', wrong
    end
    local r = { time_us = time, algbw = algbw, busbw = busbw, wrong = number(wrong),
      text = { time = cols[1], algbw = cols[2], busbw = cols[3] } }
    if h.per_iter then
      r.i_min, r.i_max, r.i_p99, r.i_cv = number(cols[5]), number(cols[6]), number(cols[7]),
        number(cols[8])
    end
    row[sec] = r
  end
  if tokens[k] and not h.timestamp then
    return nil, 'end of row', tokens[k]
  end
  return row
end

-- '# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20
-- agg iters: 1 validation: 1 graph: 0' -> parameters.
local function params_of(line)
  local p = {}
  p.nthread = math.tointeger(tonumber(line:match('nThread%s+(%d+)')))
  p.ngpus = math.tointeger(tonumber(line:match('nGpus%s+(%d+)')))
  p.min_bytes = math.tointeger(tonumber(line:match('minBytes%s+(%d+)')))
  p.max_bytes = math.tointeger(tonumber(line:match('maxBytes%s+(%d+)')))
  local step, how = line:match('step:%s*(%d+)%((%a+)%)')
  p.step = math.tointeger(tonumber(step))
  p.step_kind = how
  p.warmup_iters = math.tointeger(tonumber(line:match('warmup iters:%s*(%d+)')))
  p.iters = math.tointeger(tonumber(line:match('[^%a]iters:%s*(%d+)%s+agg'))
    or tonumber(line:match('[^%a]iters:%s*(%d+)%s+validation')))
  p.agg_iters = math.tointeger(tonumber(line:match('agg iters:%s*(%d+)')))
  p.validation = math.tointeger(tonumber(line:match('validation:%s*(%d+)')))
  p.graph = math.tointeger(tonumber(line:match('graph:%s*(%d+)')))
  return p
end

-- '#  Rank  0 Group  0 Pid   7085 on host device  0 [0000:05:00] AMD Instinct MI300X' (nccl-tests
-- since 2.12; rccl-tests) and, older, '#   Rank  0 Pid 112424 on localhost device  0 [0x00]
-- A100-SXM4-40GB'.
local function device_of(line)
  local rank, rest = line:match('^#%s+Rank%s+(%d+)%s+(.*)$')
  if not rank then
    return nil
  end
  local d = { rank = math.tointeger(tonumber(rank)) }
  d.group = math.tointeger(tonumber(rest:match('^Group%s+(%d+)')))
  d.pid = math.tointeger(tonumber(rest:match('Pid%s+(%d+)')))
  d.host = rest:match('on%s+(%S+)%s+device')
  d.device = math.tointeger(tonumber(rest:match('device%s+(%d+)')))
  d.bus = rest:match('%[([^%]]*)%]')
  local name = rest:match('%][ \t]*(.-)%s*$')
  d.name = name ~= '' and name or nil
  return d
end

-- A command line that runs a *_perf program ('$ mpirun ... all_reduce_perf -b 8 ...', or the
-- bare path), with its continuation lines: the text and the program's name.
local function command_of(line)
  if line:match('^%s*#') then
    return nil
  end
  local prog = line:match('([%w_]+_perf)[%w_]*%f[%s%z]') or line:match('([%w_]+_perf)[%w_]*$')
  if not prog or not M.kind_of(prog) then
    return nil
  end
  return prog
end

--- Whether text (a log's first bytes) looks like nccl-tests or rccl-tests output: its header line
--- ('# nThread ... nGpus ...'), its table header ('#  size  count ... busbw'), or rccl-tests'
--- version line.
---@param text string
---@return boolean
function M.sniff(text)
  if type(text) ~= 'string' or text:find('\0', 1, true) then
    return false
  end
  return text:find('#%s*nThread%s+%d+%s+nGpus%s+%d+') ~= nil
    or text:find('#%s+size%s+count%s+type.-busbw') ~= nil
    or text:find('rccl%-tests: Version') ~= nil
    or text:find('# Collective test starting: [%w_]+_perf') ~= nil
end

local function new_test(st)
  return { rows = {}, devices = {}, params = nil, warnings = {}, program = st.program,
    command = st.command, cycles = 0 }
end

--- Parses nccl-tests or rccl-tests output. `source` is a file path, or the text itself with
--- opts.text = true (opts.name then names it in messages). A log may hold several tests one after
--- the other (one per *_perf program run); each is one entry of `tests`.
--- Returns { path, tool, tool_version, library, library_version, tests = { test... },
--- warnings }, or nil, message, code ('ENOENT', 'EPARSE': empty, binary, no table, a malformed
--- row, naming the line and the field). A file cut inside a row keeps the rows before it, with a
--- warning.
---
--- ```lua
--- local r = assert(tp.parse.collectives.parse('all_reduce_perf.log'))
--- for _, row in ipairs(r.tests[1].rows) do print(row.size, row.out.busbw) end
--- ```
---@param source string
---@param opts? { text?: boolean, name?: string, collective?: string, ranks?: integer }
---  collective: the collective when the log does not say (no 'Collective test starting' line,
---  no command line, no telling file name); ranks: the ranks when the log lists no devices
---@return table|nil, string?, string?
function M.parse(source, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= 'text' and k ~= 'name' and k ~= 'collective' and k ~= 'ranks' then
      error('collectives.parse: unknown option ' .. tostring(k), 2)
    end
  end
  if type(source) ~= 'string' then
    error('collectives.parse: source must be a string', 2)
  end
  if opts.collective ~= nil and not M.bus_factor(opts.collective, 2) then
    error("collectives.parse: unknown collective '" .. tostring(opts.collective) .. "'", 2)
  end
  local text, path = source, opts.name or 'collectives'
  if not opts.text then
    path = source
    local f, err = io.open(source, 'rb')
    if not f then
      return nil, err, 'ENOENT'
    end
    text = f:read('a')
    f:close()
    if not text then
      return nil, path .. ': cannot be read', 'EIO'
    end
  end
  if #text == 0 then
    return nil, path .. ': empty file', 'EPARSE'
  end
  local nul = text:find('\0', 1, true)
  if nul then
    local ln = select(2, text:sub(1, nul):gsub('\n', '')) + 1
    return nil, string.format('%s: line %d: binary data (a NUL byte), not nccl-tests or '
      .. 'rccl-tests output', path, ln), 'EPARSE'
  end
  local out = { path = path, tests = {}, warnings = {} }
  local st = {}
  local test = new_test(st)
  local header, above, prev_size
  local lines = {}
  for line in (text:sub(-1) == '\n' and text or text .. '\n'):gmatch('([^\n]*)\n') do
    lines[#lines + 1] = line
  end
  while #lines > 0 and lines[#lines]:match('^%s*$') do
    lines[#lines] = nil
  end
  local last_nonempty = #lines
  local ends_in_newline = text:sub(-1) == '\n'
  local function close_test()
    if #test.rows > 0 or test.params then
      out.tests[#out.tests + 1] = test
    end
    test = new_test(st)
    header, above, prev_size = nil, nil, nil
  end
  local cmd_lines
  local continued = {}
  for lineno, raw in ipairs(lines) do
    local line = strip(raw)
    if cmd_lines then
      cmd_lines[#cmd_lines + 1] = line:gsub('\\%s*$', '')
      if not line:match('\\%s*$') then
        st.command = table.concat(cmd_lines, ' '):gsub('%s+', ' ')
        cmd_lines = nil
      end
      goto next
    end
    do
      local prog = command_of(line)
      if prog then
        st.program = prog
        if #test.rows > 0 then
          close_test()
        end
        test.program = prog
        -- the lines before it that it continues ('mpirun ... \' on lines of their own)
        local parts = {}
        for _, c in ipairs(continued) do
          parts[#parts + 1] = (c:gsub('\\%s*$', ''))
        end
        parts[#parts + 1] = (line:gsub('\\%s*$', ''))
        local text_ = table.concat(parts, ' '):gsub('^%s*%$%s*', ''):gsub('%s+', ' ')
        if line:match('\\%s*$') then
          cmd_lines = { text_ }
        else
          st.command = text_
        end
        continued = {}
        test.command = st.command
        goto next
      end
      if line:match('\\%s*$') then
        continued[#continued + 1] = line
      else
        continued = {}
      end
    end
    if line:match('^#%s*nThread%s+%d+') then
      if #test.rows > 0 then
        close_test()
      end
      test.params = params_of(line)
      test.program = st.program
      test.command = st.command
    elseif line:match('^# Collective test starting:') then
      if #test.rows > 0 then
        close_test()
      end
      st.program = line:match(':%s*(%S+)')
      test.program = st.program
      test.starting = true
    elseif line:match('^# Collective test concluded:') then
      close_test()
    elseif line:match('^# nccl%-tests version') then
      out.tool, out.tool_version = 'nccl-tests', line:match('version%s+(%S+)')
    elseif line:match('^# rccl%-tests version') or line:match('^rccl%-tests: Version') then
      out.tool = 'rccl-tests'
      out.tool_version = line:match('[Vv]ersion%s+(%S+)')
    elseif line:match('^RCCL version%s*:') then
      out.library, out.library_version = 'RCCL', line:match(':%s*(%S+)')
    elseif line:match('^HIP version%s*:') then
      out.hip_version = line:match(':%s*(%S+)')
    elseif line:match('^ROCm version%s*:') then
      out.rocm_version = line:match(':%s*(%S+)')
    elseif line:match('NCCL version %d') and not out.library_version then
      out.library = out.library or 'NCCL'
      out.library_version = line:match('NCCL version (%S+)')
    elseif line:match('^#%s+Rank%s+%d+') then
      local d = device_of(line)
      if d and not header then
        test.devices[#test.devices + 1] = d
      end
    elseif line:match('^#') and line:find('size', 1, true) and line:find('busbw', 1, true) then
      local names = {}
      for w in line:sub(2):gmatch('%S+') do
        names[#names + 1] = w == 'error' and '#wrong' or w
      end
      if #test.rows > 0 then
        -- a second table without a header line of its own between: a new test
        local program = test.program
        close_test()
        test.program = program
      end
      header = table_header(names, above)
      if not header then
        return fail(path, lineno, 'a table header without a time column')
      end
      test.header = header
    elseif line:match('^# Testing %d+ cycle') then
      prev_size = nil
    elseif line:match('^# Out of bounds values') then
      test.oob = math.tointeger(tonumber(line:match(':%s*(%d+)')))
    elseif line:match('^# Avg bus bandwidth') then
      test.avg_busbw = tonumber(line:match(':%s*([%d.eE+%-]+)'))
      test.avg_line = lineno
    elseif header and line:match('^%s*%d') then
      local tokens = {}
      for w in line:gmatch('%S+') do
        tokens[#tokens + 1] = w
      end
      local row, field, value = table_row(tokens, header)
      if not row then
        if lineno == last_nonempty and not ends_in_newline or (lineno == last_nonempty
          and value == '(missing)') then
          out.warnings[#out.warnings + 1] = string.format('%s: line %d: cut short inside a row '
            .. '(%s missing): kept the %d rows before it', path, lineno, field, #test.rows)
          break
        end
        return fail(path, lineno, "%s: '%s' is not what nccl-tests prints there", field,
          tostring(value))
      end
      row.line = lineno
      -- A row no larger than the one before starts the sweep again (-N cycles); sizes below one
      -- element print as 0 at the start of a sweep, several times.
      if prev_size and (row.size < prev_size or (row.size == prev_size and row.size > 0)) then
        test.cycles = test.cycles + 1
      end
      if test.cycles == 0 then
        test.cycles = 1
      end
      row.cycle = test.cycles
      prev_size = row.size
      test.rows[#test.rows + 1] = row
    end
    above = line
    ::next::
  end
  close_test()
  if #out.tests == 0 or #out.tests[1].rows == 0 then
    local any_rows = false
    for _, t in ipairs(out.tests) do
      any_rows = any_rows or #t.rows > 0
    end
    if not any_rows then
      return nil, string.format('%s: no nccl-tests or rccl-tests result table (a header line '
        .. "'#  size  count  type ... busbw' followed by rows)", path), 'EPARSE'
    end
  end
  local kept = {}
  for _, t in ipairs(out.tests) do
    if #t.rows > 0 then
      kept[#kept + 1] = t
    end
  end
  out.tests = kept
  out.tool = out.tool or (out.library == 'RCCL' and 'rccl-tests') or 'nccl-tests'
  for _, t in ipairs(out.tests) do
    local ok, err = M._describe(out, t, path, opts)
    if not ok then
      return nil, err, 'EPARSE'
    end
  end
  return out
end

-- The collective of a test, and where it was read: the 'Collective test starting' line, the
-- command line's program, the file's name, the caller, else the redop and root columns when
-- they tell it alone (a root with no reduction: broadcast; with one: reduce).
local function collective_of(t, path, opts)
  if t.starting and M.kind_of(t.program) then
    return M.kind_of(t.program), 'header'
  end
  if t.program and M.kind_of(t.program) then
    return M.kind_of(t.program), 'command'
  end
  if opts.collective then
    return opts.collective, 'option'
  end
  local base = path:match('([^/]+)$') or path
  local from_name = M.kind_of((base:gsub('%.[^.]*$', '')))
  if from_name then
    return from_name, 'file name'
  end
  local r = t.rows[1]
  if r.root and r.root >= 0 then
    return (r.redop == nil or r.redop == 'none') and 'broadcast' or 'reduce', 'columns'
  end
  return nil
end

-- Fills a test's collective, ranks, hosts, GPU, dtype and the check of every row.
function M._describe(_out, t, path, opts)
  local kind, how = collective_of(t, path, opts)
  if not kind then
    return nil, string.format("%s: line %d: cannot tell which collective this table measured (no "
      .. "'# Collective test starting' line, no *_perf command line, no collective in the file's "
      .. "name); name it (tplua extract --collective all_reduce)", path, t.rows[1].line)
  end
  t.collective, t.collective_source = kind, how
  local hosts, names = {}, {}
  for _, d in ipairs(t.devices) do
    if d.host and not hosts[d.host] then
      hosts[d.host] = true
      hosts[#hosts + 1] = d.host
    end
    if d.name then
      names[d.name] = (names[d.name] or 0) + 1
    end
  end
  t.ranks = #t.devices > 0 and #t.devices or opts.ranks
  t.hosts = #hosts > 0 and #hosts or nil
  local best
  for name, c in pairs(names) do
    if not best or c > names[best] or (c == names[best] and name < best) then
      best = name
    end
  end
  t.gpu = best
  local first = t.rows[1]
  t.dtype, t.redop, t.root = first.type, first.redop, first.root
  local checked, consistent = 0, 0
  t.inconsistent = {}
  if not t.ranks then
    t.warnings[#t.warnings + 1] = string.format('%s: no device list and no --ranks: the bus factor '
      .. 'is unknown, busbw not checked', path)
    return true
  end
  for _, r in ipairs(t.rows) do
    for _, sec in ipairs({ 'out', 'in' }) do
      local c = r[sec]
      if c and r.size > 0 and c.time_us > 0 then
        local ok = M.check(kind, t.ranks, r.size, c.text.time, c.text.algbw, c.text.busbw)
        checked = checked + 1
        if ok then
          consistent = consistent + 1
        else
          c.inconsistent = true
          t.inconsistent[#t.inconsistent + 1] = r.line
        end
      end
    end
  end
  t.checked, t.consistent = checked, consistent
  if checked > consistent then
    t.warnings[#t.warnings + 1] = string.format('%s: %d of %d figures do not fit %s\'s bus factor '
      .. 'over %d ranks (first at line %d): the collective or the rank count is not what the '
      .. 'output says', path, checked - consistent, checked, kind, t.ranks, t.inconsistent[1])
  end
  return true
end

--- The run record of a parsed output (tp.parse._collectives_record.record; docs/record.md).
M.record = record_part.record

--- Completes the record a run of nccl-tests or rccl-tests left (tp.run: `path`, its log beside
--- it as <id>.log, else the Slurm node logs the record lists): its output parsed into the
--- `collectives` section, `kind = "collective_bench"`, the tool as its framework, the record
--- written again atomically. A log without a result table makes the record failed, saying why.
--- Returns true, or nil, message, code when the record cannot be read or written.
---@param path string the run record
---@return boolean|nil, string?, string?
function M.complete_record(path)
  local json = require('tp.json')
  local rec, err, code = json.load_file(path)
  if type(rec) ~= 'table' then
    return nil, err or (path .. ': not a run record'), code or 'EPARSE'
  end
  local dir = path:match('^(.*)/[^/]*$') or '.'
  local logs = { (path:gsub('%.json$', '.log')) }
  local sl = type(rec.slurm) == 'table' and rec.slurm or {}
  for _, l in ipairs(type(sl.node_logs) == 'table' and sl.node_logs or {}) do
    logs[#logs + 1] = l:sub(1, 1) == '/' and l or (dir .. '/' .. l)
  end
  local parsed, perr
  for _, l in ipairs(logs) do
    parsed, perr = M.parse(l)
    if parsed then
      break
    end
  end
  rec.diagnostics = type(rec.diagnostics) == 'table' and rec.diagnostics or json.array()
  if not parsed then
    rec.status = 'failed'
    rec.diagnostics[#rec.diagnostics + 1] = { kind = 'collectives_unread', severity = 'error',
      line = json.null, message = tostring(perr) }
  else
    local built = M.record(parsed, { path = parsed.path })
    rec.kind = 'collective_bench'
    rec.collectives = built.collectives
    rec.framework, rec.format = built.framework, built.format
    if type(rec.gpu_info) ~= 'table' then
      rec.gpu_info = built.gpu_info
    end
    if type(rec.platform) ~= 'string' then
      rec.platform = built.platform
    end
    for _, d in ipairs(built.diagnostics) do
      rec.diagnostics[#rec.diagnostics + 1] = d
    end
    if built.status == 'failed' then
      rec.status = 'failed'
    end
  end
  return json.save_file(path, rec, { pretty = true, sort_keys = true })
end

--- The version of this reader, kept in each record's source.parser_version.
M.VERSION = record_part.VERSION

return M
