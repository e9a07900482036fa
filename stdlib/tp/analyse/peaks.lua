-- tp.analyse.peaks: measured peaks (what the peaks microbenchmark measured on a machine: GEMM
-- TFLOP/s per precision, memory bandwidth; tools/peaks, recipes/peaks.lua, docs/peaks.md)
-- loaded from run records, directories of them or the tool's own JSON files, and looked up by
-- device, so that a figure can be put against the measured limit beside the datasheet's.
local json = require('tp.json')
local fs = require('tp.fs')

local M = {}

--- The schema of a peaks section (a record's `peaks` member, the tool's file).
M.SCHEMA = 'tplua.peaks/1'

--- The peaks schemas this version reads.
M.READABLE = { 'tplua.peaks/1' }

-- A record's per-iteration members, left undecoded (a record's peaks need none of them).
local SKIP = { 'records', 'args', 'step_times', 'raw_step_times', 'loss_values',
  'learning_rates', 'iterations' }

local function is_null(v)
  return rawequal(v, json.null)
end

local function kind_of(v)
  if v == nil or is_null(v) then
    return 'null'
  end
  if type(v) == 'table' then
    if json.is_skipped(v) then
      return v.kind
    end
    return json.is_array(v) and 'array' or 'object'
  end
  return math.type(v) or type(v)
end

local function is_number(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function readable(schema)
  for _, s in ipairs(M.READABLE) do
    if s == schema then
      return true
    end
  end
  return false
end

-- Checks a peaks table read from `where` (a file, and the member path in it). Returns true, or
-- nil and a message naming the file and the member at fault.
local function check(p, where)
  local function bad(fmt, ...)
    return nil, where .. string.format(fmt, ...)
  end
  if type(p) ~= 'table' or json.is_array(p) then
    return bad(' is %s, an object expected', kind_of(p))
  end
  if type(p.schema) ~= 'string' then
    return bad('.schema is %s, a string expected', kind_of(p.schema))
  end
  if not readable(p.schema) then
    return bad(".schema '%s' is not supported (this version reads %s)", p.schema,
      table.concat(M.READABLE, ', '))
  end
  for _, k in ipairs({ 'device', 'gpu', 'cpu', 'torch', 'runtime', 'measured_at' }) do
    local v = p[k]
    if v ~= nil and not is_null(v) and type(v) ~= 'string' then
      return bad('.%s is %s, a string expected', k, kind_of(v))
    end
  end
  if p.device ~= 'cuda' and p.device ~= 'cpu' then
    return bad(".device is %s, 'cuda' or 'cpu' expected", kind_of(p.device) == 'string'
      and ("'" .. p.device .. "'") or kind_of(p.device))
  end
  if p.scaled_down ~= nil and type(p.scaled_down) ~= 'boolean' then
    return bad('.scaled_down is %s, a boolean expected', kind_of(p.scaled_down))
  end
  if type(p.tflops) ~= 'table' or json.is_array(p.tflops) and next(p.tflops) ~= nil then
    return bad('.tflops is %s, an object expected', kind_of(p.tflops))
  end
  for k, v in pairs(p.tflops) do
    if not is_number(v) then
      return bad('.tflops.%s is %s, a number expected', tostring(k), kind_of(v))
    end
  end
  local bw = p.bandwidth_tbs
  if bw ~= nil and not is_null(bw) and not is_number(bw) then
    return bad('.bandwidth_tbs is %s, a number expected', kind_of(bw))
  end
  for _, k in ipairs({ 'square', 'memory' }) do
    local v = p[k]
    if v ~= nil and not is_null(v) and (type(v) ~= 'table' or json.is_array(v) and next(v)) then
      return bad('.%s is %s, an object expected', k, kind_of(v))
    end
  end
  local gemm = p.gemm
  if gemm ~= nil and not is_null(gemm) then
    if type(gemm) ~= 'table' or (not json.is_array(gemm) and next(gemm) ~= nil) then
      return bad('.gemm is %s, an array expected', kind_of(gemm))
    end
    for i, g in ipairs(gemm) do
      if type(g) ~= 'table' or json.is_array(g) then
        return bad('.gemm[%d] is %s, an object expected', i, kind_of(g))
      end
      for _, k in ipairs({ 'm', 'n', 'k' }) do
        if math.type(g[k]) ~= 'integer' or g[k] < 1 then
          return bad('.gemm[%d].%s is %s, a positive whole number expected', i, k, kind_of(g[k]))
        end
      end
      for _, k in ipairs({ 'tflops', 'tflops_median', 'seconds' }) do
        if g[k] ~= nil and not is_null(g[k]) and not is_number(g[k]) then
          return bad('.gemm[%d].%s is %s, a number expected', i, k, kind_of(g[k]))
        end
      end
    end
  end
  return true
end

-- The catalog row id of the device the peaks were measured on (tp.catalog.hardware.match on
-- its name, architecture, unit count and memory), else the record's own (gpu_info.hardware).
local function catalog_id(p, rec)
  if type(p.gpu) == 'string' then
    local runtime = type(p.runtime) == 'string' and p.runtime or ''
    local row = require('tp.catalog.hardware').match({ name = p.gpu,
      arch = type(p.arch) == 'string' and p.arch or nil,
      sm_count = math.type(p.sm_count) == 'integer' and p.sm_count or nil,
      memory_bytes = is_number(p.memory_bytes) and p.memory_bytes or nil,
      vendor = runtime:match('^HIP') and 'amd' or 'nvidia' })
    if row then
      return row.id
    end
  end
  local info = rec and rec.gpu_info
  if type(info) == 'table' and type(info.hardware) == 'string' then
    return info.hardware
  end
  return nil
end

local function entry(path, p, rec)
  return { source = path, peaks = p, gpu = type(p.gpu) == 'string' and p.gpu or nil,
    catalog = catalog_id(p, rec), run_id = rec and type(rec.run_id) == 'string' and rec.run_id
      or nil }
end

-- One file: its entry, nil, nil and where it came from ('record' or 'file'); nil when it holds
-- no peaks (quiet unless `explicit`); nil, err, code when it cannot be read or its peaks are
-- damaged.
local function load_file(path, explicit)
  local doc, err, code = json.load_file(path, { skip = SKIP })
  if doc == nil then
    if code == 'EPARSE' and not tostring(err):find(path, 1, true) then
      err = path .. ': ' .. tostring(err)
    end
    return nil, err, code
  end
  if type(doc) ~= 'table' or json.is_array(doc) then
    if explicit then
      return nil, string.format('%s: top level is %s, a run record or peaks file expected', path,
        kind_of(doc)), 'EINVAL'
    end
    return nil
  end
  local schema = doc.schema
  if type(schema) == 'string' and schema:match('^tplua%.peaks/') then
    local ok, cerr = check(doc, path .. ': $')
    if not ok then
      return nil, cerr, 'EINVAL'
    end
    return entry(path, doc), nil, nil, 'file'
  end
  if type(schema) == 'string' and require('tp.parse.record').readable(schema) then
    if doc.peaks == nil or is_null(doc.peaks) then
      if explicit then
        return nil, string.format('%s: a run record without a peaks section (it is not a run '
          .. 'of recipes/peaks.lua)', path), 'ENOENT'
      end
      return nil
    end
    local ok, cerr = check(doc.peaks, path .. ': $.peaks')
    if not ok then
      return nil, cerr, 'EINVAL'
    end
    return entry(path, doc.peaks, doc), nil, nil, 'record'
  end
  if explicit then
    return nil, string.format('%s: neither a run record nor a peaks file (schema %s)', path,
      type(schema) == 'string' and ("'" .. schema .. "'") or 'missing'), 'EINVAL'
  end
  return nil
end

-- The JSON files under `dir`, recursively, sorted, hidden entries and profiler traces left out.
local function walk(dir, out, seen, errors)
  local real = fs.realpath(dir) or dir
  if seen[real] then
    return
  end
  seen[real] = true
  local entries, err, code = fs.list(dir)
  if not entries then
    errors[#errors + 1] = { path = dir, message = err, code = code }
    return
  end
  local profile = require('tp.plan.profile')
  for _, e in ipairs(entries) do
    if e.name:sub(1, 1) ~= '.' then
      local p = dir:gsub('/+$', '') .. '/' .. e.name
      local t = e.type
      if t == 'link' or t == 'other' or t == nil then
        local st = fs.stat(p)
        t = st and st.type
      end
      if t == 'directory' then
        walk(p, out, seen, errors)
      elseif t == 'file' and e.name:match('%.json$') and not profile.is_trace_name(e.name) then
        out[#out + 1] = p
      end
    end
  end
end

-- What tells one measurement from another: a record's peaks and the file the tool wrote for it
-- are the same measurement, found twice in a directory.
local function identity(p)
  return json.encode({ p.measured_at, p.gpu or p.cpu, p.tflops, p.bandwidth_tbs },
    { allow_nan = true }) or ''
end

--- Loads measured peaks: from a run record with a `peaks` section, from the tool's own file
--- (schema tplua.peaks/1), or from every such file under a directory (recursively, hidden
--- entries and profiler traces left out; records without peaks and other JSON are passed by;
--- the tool's file beside the record that holds the same measurement counts once). Each entry:
--- `{source = path, peaks = <the peaks table>, gpu = <device name, nil on a CPU>, catalog =
--- <tp.catalog.hardware id or nil>, run_id = <the record's, or nil>}`. A missing, unreadable,
--- empty, binary or truncated file, or one whose peaks are damaged, given by name: nil and a
--- message naming it; met in a directory: left out and listed in `list.errors` ({path,
--- message, code}). Never raises on bad input.
---```lua
---local peaks = require('tp.analyse.peaks')
---local list = assert(peaks.load('results/'))
---local p = peaks.for_device(list, 'NVIDIA H200')
---print(peaks.tflops(p, 'bf16'), peaks.bandwidth(p))
---```
---@param path string a record, a peaks file or a directory
---@return table|nil list, string? err, string? code
function M.load(path)
  if type(path) ~= 'string' then
    error('tp.analyse.peaks.load: path must be a string, got ' .. type(path), 2)
  end
  local st, err, code = fs.stat(path)
  if not st then
    return nil, err, code
  end
  local list = { errors = {} }
  if st.type ~= 'directory' then
    local e, ferr, fcode = load_file(path, true)
    if not e then
      return nil, ferr, fcode
    end
    list[1] = e
    return list
  end
  local files = {}
  walk(path, files, {}, list.errors)
  local found, in_records = {}, {}
  for _, f in ipairs(files) do
    local ok, e, ferr, fcode, kind = pcall(load_file, f, false)
    if not ok then
      list.errors[#list.errors + 1] = { path = f, message = f .. ': ' .. tostring(e),
        code = 'EINVAL' }
    elseif e then
      found[#found + 1] = { e, kind }
      if kind == 'record' then
        in_records[identity(e.peaks)] = true
      end
    elseif ferr then
      list.errors[#list.errors + 1] = { path = f, message = ferr, code = fcode }
    end
  end
  -- The tool's file of a measurement a record holds too counts once, as the record.
  for _, x in ipairs(found) do
    if not (x[2] == 'file' and in_records[identity(x[1].peaks)]) then
      list[#list + 1] = x[1]
    end
  end
  return list
end

--- The entry of `list` (from M.load) measured on `device`: a device name as torch or the
--- probe reports it ('NVIDIA H200'), matched through tp.catalog.hardware.match to the entries'
--- catalog rows, else compared with their device names as they are; a catalog id ('h200')
--- works too, and 'cpu' finds the CPU's. The latest measurement (`measured_at`) when several
--- match; nil when none does.
---```lua
---local p = peaks.for_device(list, 'NVIDIA H100 80GB HBM3')
---```
---@param list table
---@param device string
---@return table|nil entry
function M.for_device(list, device)
  if type(list) ~= 'table' then
    error('tp.analyse.peaks.for_device: a list from peaks.load expected, got ' .. type(list), 2)
  end
  if type(device) ~= 'string' then
    error('tp.analyse.peaks.for_device: device must be a string, got ' .. type(device), 2)
  end
  local hardware = require('tp.catalog.hardware')
  local row = hardware.match({ name = device })
  local id = row and row.id or (hardware.get(device) and device) or nil
  local best
  for _, e in ipairs(list) do
    local p = type(e) == 'table' and e.peaks
    if type(p) == 'table' then
      local hit = (id ~= nil and e.catalog == id) or (e.gpu ~= nil and e.gpu == device)
        or (e.gpu == nil and (device == 'cpu' and p.device == 'cpu' or p.cpu == device))
      if hit then
        local at = type(p.measured_at) == 'string' and p.measured_at or ''
        local best_at = best and type(best.peaks.measured_at) == 'string'
          and best.peaks.measured_at or ''
        if not best or at >= best_at then
          best = e
        end
      end
    end
  end
  return best
end

local function peaks_of(p, fname)
  if p == nil then
    return nil
  end
  if type(p) ~= 'table' then
    error(string.format('tp.analyse.peaks.%s: an entry or a peaks table expected, got %s', fname,
      type(p)), 3)
  end
  return type(p.peaks) == 'table' and p.peaks or p
end

--- The measured peak TFLOP/s of an entry (or a peaks table) at `precision` ('bf16', 'fp16',
--- 'fp32', 'tf32', 'fp8'): the best of the figures measured in it; nil when none was (or `p`
--- is nil, so that `peaks.tflops(peaks.for_device(list, name), 'bf16')` reads well).
---@param p table|nil
---@param precision string
---@return number|nil
function M.tflops(p, precision)
  local t = peaks_of(p, 'tflops')
  local v = t and type(t.tflops) == 'table' and t.tflops[precision]
  if is_number(v) and v > 0 then
    return v
  end
  return nil
end

--- The measured memory bandwidth of an entry (or a peaks table), TB/s (a device-to-device copy,
--- bytes read + written); nil when it was not measured.
---@param p table|nil
---@return number|nil
function M.bandwidth(p)
  local t = peaks_of(p, 'bandwidth')
  if not t then
    return nil
  end
  local v = t.bandwidth_tbs
  if not is_number(v) and type(t.memory) == 'table' then
    v = t.memory.tbs
  end
  if is_number(v) and v > 0 then
    return v
  end
  return nil
end

return M
