-- tp.parse._record_base: what the parts of tp.record share: JSON null and arrays, the record
-- fields and precisions, small helpers (finite numbers, diagnostics, peaks), and the conversion
-- of one parser record into a record object (every field, null where absent).
local M = {}

-- JSON null: tp.json's sentinel, so tp.json.encode writes null.
local function load_json()
  local ok, mod = pcall(require, 'tp.json')
  if ok then
    return mod
  end
  if not tostring(mod):find("module 'tp.json' not found", 1, true) then
    error(mod, 0)
  end
  return nil
end

local json = load_json()

--- The value that stands for JSON null in a record (tp.json.null).
M.null = json and json.null
  or setmetatable({}, {
    __name = 'tp.record.null',
    __tostring = function()
      return 'null'
    end,
  })
local null = M.null

-- Marks `t` as a JSON array (so an empty one encodes as [] rather than {}), when tp.json can.
function M.array(t)
  if json and type(json.array) == 'function' then
    return json.array(t)
  end
  return t
end

-- The iteration-record fields of the parsed-log contract, in the order they are documented.
M.RECORD_FIELDS = {
  'iteration', 'train_iters', 'epoch', 'epoch_iteration', 'step_time_s', 'step_time_derived',
  'loss', 'losses', 'lr', 'grad_norm', 'loss_scale', 'params_norm', 'num_zeros',
  'skipped_iterations', 'nan_iterations', 'consumed_samples', 'consumed_tokens',
  'skipped_samples', 'global_batch_size', 'tflops_per_gpu', 'tokens_per_s_per_gpu', 'mfu_pct',
  'mem_allocated_gib', 'mem_max_allocated_gib', 'mem_reserved_gib', 'mem_max_reserved_gib',
  'mem_device_used_gib', 'mem_device_total_gib', 'mem_usage_fraction', 'energy_j_per_gpu',
  'power_w_per_gpu', 'timestamp', 'time_s', 'rank', 'line', 'extra',
}

--- The precisions a record's training_config.precision and MFU know (tp.metrics.mfu takes a
--- peak for each: tp.hardware.PRECISIONS and fp4).
M.PRECISIONS = { 'fp32', 'tf32', 'bf16', 'fp16', 'fp8', 'fp4' }
local MFU_PRECISIONS = {}
for _, p in ipairs(M.PRECISIONS) do
  MFU_PRECISIONS[p] = true
end
local PRECISION_LIST = table.concat(M.PRECISIONS, ', ')

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function diag(list, kind, severity, message, line)
  list[#list + 1] = { kind = kind, severity = severity, message = message, line = line or null }
end

-- Copies a table of scalars, turning non-finite numbers into null; returns copy, had_nonfinite.
local function copy_scalars(t)
  local out, bad = {}, false
  for k, v in pairs(t) do
    if type(v) == 'number' and not is_finite(v) then
      out[k] = null
      bad = true
    else
      out[k] = v
    end
  end
  return out, bad
end

local function fmt_num(v)
  if v ~= v then
    return 'nan'
  end
  return tostring(v)
end

-- One contract record -> one record object with every field (null where absent). Non-finite
-- numbers become null and are reported once per record.
local HUGE = math.huge

local IS_FIELD = {}
for _, f in ipairs(M.RECORD_FIELDS) do
  IS_FIELD[f] = true
end

-- Returns a new record with every field null. Built from a table constructor (compiled once from
-- RECORD_FIELDS) so the table is allocated at its final size: filling a table key by key rehashes
-- it six times on the way to 36 fields, which dominated from_log on long logs.
local new_record = (function()
  local parts = {}
  for i, f in ipairs(M.RECORD_FIELDS) do
    parts[i] = f .. ' = null'
  end
  local src = 'local null = ...\nreturn function() return { ' .. table.concat(parts, ', ')
    .. ' } end'
  return assert(load(src, '=tp.record.new_record', 't', {}))(null)
end)()

function M.convert_record(r, diags)
  local out = new_record()
  local bad
  for f, v in pairs(r) do
    if IS_FIELD[f] then
      local t = type(v)
      if t == 'number' and (v ~= v or v == HUGE or v == -HUGE) then
        bad = bad or {}
        bad[#bad + 1] = f .. '=' .. fmt_num(v)
      elseif t == 'table' then
        local c, nonfinite = copy_scalars(v)
        out[f] = c
        if nonfinite then
          bad = bad or {}
          bad[#bad + 1] = f .. ' (a value is not finite)'
        end
      else
        out[f] = v
      end
    end
  end
  if bad then
    table.sort(bad)
    diag(diags, 'nonfinite_value', 'warning',
      string.format('iteration %s: %s written as null', tostring(r.iteration or '?'),
        table.concat(bad, ', ')), r.line)
  end
  return out
end

-- Raises best[g] to the finite numbers found in t[fields[..]].
function M.raise_peak(best, g, t, fields)
  for k = 1, #fields do
    local v = t[fields[k]]
    if type(v) == 'number' and v == v and v < HUGE and v > -HUGE
      and (best[g] == nil or v > best[g]) then
      best[g] = v
    end
  end
end

-- For the other parts and the face.
M.json, M.MFU_PRECISIONS, M.PRECISION_LIST = json, MFU_PRECISIONS, PRECISION_LIST
M.is_finite, M.diag, M.copy_scalars = is_finite, diag, copy_scalars

return M
