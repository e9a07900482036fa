-- tp.metrics: figures derived from a run: model FLOPs utilisation (against the peak of the
-- precision actually run), achieved TFLOP/s, energy per token, cost per tokens and time to
-- train. Definitions: HARDWARE.md §3 (MFU) and §4 (energy, cost) of the design notes.
local hardware = require('tp.catalog.hardware')
local models = require('tp.catalog.models')

local M = {}

local PRECISIONS = { fp32 = true, tf32 = true, bf16 = true, fp16 = true, fp8 = true, fp4 = true }
local CONVENTIONS = { megatron = true, palm = true, ['6n'] = true }

local function misuse(fname, fmt, ...)
  error(fname .. ': ' .. string.format(fmt, ...), 3)
end

-- Validates `args` against `spec` {field = {type, required}} and rejects unknown fields.
local function check_args(fname, args, spec)
  if type(args) ~= 'table' then
    misuse(fname, 'argument table expected, got %s', type(args))
  end
  for k in pairs(args) do
    if spec[k] == nil then
      misuse(fname, "unknown field '%s'", tostring(k))
    end
  end
  for k, s in pairs(spec) do
    local v = args[k]
    if v == nil then
      if s[2] then
        misuse(fname, "field '%s' is required", k)
      end
    else
      local kind = s[1]
      local ok
      if kind == 'positive' then
        ok = type(v) == 'number' and v > 0 and v < math.huge
      elseif kind == 'nonnegative' then
        ok = type(v) == 'number' and v >= 0 and v < math.huge
      elseif kind == 'count' then
        ok = math.type(v) == 'integer' and v > 0
      elseif kind == 'model' then
        ok = type(v) == 'string' or type(v) == 'table'
      elseif kind == 'hardware' then
        ok = type(v) == 'string' or type(v) == 'table'
      else
        ok = type(v) == kind
      end
      if not ok then
        misuse(fname, "field '%s': %s expected, got %s", k, kind, tostring(v))
      end
    end
  end
end

-- Resolves `hw` (a row, an id, or a matched device row) to a row; nil, err when unknown.
local function resolve_hardware(hw)
  if type(hw) == 'table' then
    if type(hw.peak_tflops) ~= 'table' then
      return nil, 'metrics: hardware table has no peak_tflops (pass a tp.hardware row)'
    end
    return hw
  end
  return hardware.get(hw)
end

--- Model FLOPs utilisation: tokens/s x model FLOPs per token / (gpus x peak dense FLOP/s of one
--- device at the precision the matmuls ran in). The peak is the catalog's (scaled for a
--- partition when `hardware` comes from tp.hardware.match). An fp8 (or fp4) run also reports
--- the MFU against the bf16 peak, since both are quoted in practice (HARDWARE.md §3).
--- Fails with `nil, err, 'ENOPEAK'` when the hardware is unknown or has no peak for `precision`.
---```lua
---local r = assert(tp.metrics.mfu { tokens_per_s = 40000, gpus = 8, model = 'llama3.1-8b',
---  seq_len = 8192, precision = 'bf16', hardware = 'h100-sxm', convention = 'palm' })
---print(r.mfu)  --> 0.2927...
---```
---@param args {tokens_per_s: number, gpus: integer, model: string|table, seq_len: integer,
---  precision?: string, hardware: string|table, convention?: string}
---@return table|nil result {mfu=, peak_tflops=, precision=, convention=, flops_per_token=,
---  basis='text', achieved_tflops_per_gpu=, hardware=, mfu_vs_bf16=?, peak_tflops_bf16=?}
---@return string? err
---@return string? code
function M.mfu(args)
  local fname = 'tp.metrics.mfu'
  check_args(fname, args, {
    tokens_per_s = { 'nonnegative', true }, gpus = { 'count', true }, model = { 'model', true },
    seq_len = { 'count', true }, precision = { 'string' }, hardware = { 'hardware' },
    convention = { 'string' },
  })
  local precision = args.precision or 'bf16'
  if not PRECISIONS[precision] then
    misuse(fname, "unknown precision '%s' (fp32, tf32, bf16, fp16, fp8, fp4)", precision)
  end
  local convention = args.convention or 'megatron'
  if not CONVENTIONS[convention] then
    misuse(fname, "unknown convention '%s' (megatron, palm, 6n)", convention)
  end
  if args.hardware == nil then
    return nil, 'metrics: no hardware row (GPU not in the catalog): MFU not computed', 'ENOPEAK'
  end
  local row, err = resolve_hardware(args.hardware)
  if not row then
    return nil, err, 'ENOPEAK'
  end
  local peak = row.peak_tflops[precision]
  if peak == nil then
    return nil, string.format('metrics: %s has no %s peak in the catalog: MFU not computed',
      row.id or '?', precision), 'ENOPEAK'
  end
  local fpt = models.flops_per_token(args.model, args.seq_len, { convention = convention })
  local achieved = args.tokens_per_s * fpt / args.gpus  -- FLOP/s per GPU
  local result = {
    mfu = achieved / (peak * 1e12),
    peak_tflops = peak,
    precision = precision,
    convention = convention,
    flops_per_token = fpt,
    basis = 'text',
    achieved_tflops_per_gpu = achieved / 1e12,
    hardware = row.id,
    partition = row.partition,
  }
  if (precision == 'fp8' or precision == 'fp4') and row.peak_tflops.bf16 then
    result.peak_tflops_bf16 = row.peak_tflops.bf16
    result.mfu_vs_bf16 = achieved / (row.peak_tflops.bf16 * 1e12)
  end
  return result
end

--- Energy per token from measured (or estimated) energy over the tokens processed in the same
--- window. GPU energy only: no CPU, memory, network or cooling.
---@param args {energy_j: number, tokens: number, estimated?: boolean}
---@return table {joules_per_token=, wh_per_million_tokens=, basis = 'measured'|'estimated'}
function M.energy_per_token(args)
  check_args('tp.metrics.energy_per_token', args, {
    energy_j = { 'nonnegative', true }, tokens = { 'positive', true }, estimated = { 'boolean' },
  })
  local jpt = args.energy_j / args.tokens
  return {
    joules_per_token = jpt,
    wh_per_million_tokens = jpt * 1e6 / 3600,
    basis = args.estimated and 'estimated' or 'measured',
  }
end

--- Estimates energy when no telemetry ran: gpus x TDP x seconds, labelled as an estimate (an
--- upper bound: boards rarely draw their TDP throughout).
---@param args {gpus: integer, seconds: number, hardware: string|table}
---@return number|nil joules
---@return string? err
---@return string? code
function M.estimated_energy_j(args)
  check_args('tp.metrics.estimated_energy_j', args, {
    gpus = { 'count', true }, seconds = { 'nonnegative', true }, hardware = { 'hardware', true },
  })
  local row, err = resolve_hardware(args.hardware)
  if not row then
    return nil, err, 'ENOENT'
  end
  if not row.tdp_w then
    return nil, string.format('metrics: %s has no TDP in the catalog', row.id or '?'), 'ENOENT'
  end
  return args.gpus * row.tdp_w * args.seconds
end

--- Cost of `per` tokens (default one million): gpus x price per GPU-hour x hours / tokens x
--- per. The price is `price_per_gpu_hour`, or the one set with tp.hardware.set_price for
--- `hardware`; it is always labelled as an assumption. Give either `tokens_per_s`, or `tokens`
--- and `seconds`. Fails with `nil, err, 'ENOPRICE'` when no price is known.
---@param args {gpus: integer, tokens_per_s?: number, tokens?: number, seconds?: number,
---  price_per_gpu_hour?: number, hardware?: string|table, per?: number}
---@return table|nil result {cost=, per=, price_per_gpu_hour=, assumption = true, price_note=}
---@return string? err
---@return string? code
function M.cost_per_tokens(args)
  local fname = 'tp.metrics.cost_per_tokens'
  check_args(fname, args, {
    gpus = { 'count', true }, tokens_per_s = { 'positive' }, tokens = { 'positive' },
    seconds = { 'nonnegative' }, price_per_gpu_hour = { 'nonnegative' },
    hardware = { 'hardware' }, per = { 'positive' },
  })
  local rate = args.tokens_per_s
  if rate == nil then
    if args.tokens == nil or args.seconds == nil then
      misuse(fname, 'give tokens_per_s, or tokens and seconds')
    end
    if args.seconds == 0 then
      misuse(fname, 'seconds must be positive')
    end
    rate = args.tokens / args.seconds
  elseif args.tokens ~= nil or args.seconds ~= nil then
    misuse(fname, 'give tokens_per_s, or tokens and seconds, not both')
  end
  local price, note = args.price_per_gpu_hour, 'given by the caller'
  if price == nil then
    if args.hardware == nil then
      return nil, 'metrics: no price per GPU-hour (pass price_per_gpu_hour or hardware)',
        'ENOPRICE'
    end
    local id = type(args.hardware) == 'table' and args.hardware.id or args.hardware
    local label
    price, label = hardware.price(id)
    if not price then
      return nil, string.format('metrics: no price set for %s (tp.hardware.set_price)',
        tostring(id)), 'ENOPRICE'
    end
    note = label.note
  end
  local per = args.per or 1e6
  return {
    cost = args.gpus * price / 3600 / rate * per,
    per = per,
    price_per_gpu_hour = price,
    assumption = true,
    price_note = note,
  }
end

--- Time to train on `tokens` tokens at `tokens_per_s`.
---@param args {tokens: number, tokens_per_s: number}
---@return table {seconds=, hours=, days=}
function M.time_to_train(args)
  check_args('tp.metrics.time_to_train', args, {
    tokens = { 'nonnegative', true }, tokens_per_s = { 'positive', true },
  })
  local s = args.tokens / args.tokens_per_s
  return { seconds = s, hours = s / 3600, days = s / 86400 }
end

return M
