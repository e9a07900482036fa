-- tp.efficiency: a run's MFU and GPU energy per token, and the catalog GPU both divide by. The
-- one computation behind tp.compare (so tplua compare, tplua report and the prompt) and a
-- recipe's built-in summary (tp.experiment.summarize): the same run gives the same numbers
-- with the same basis everywhere. docs/analysis.md "tp.compare" describes the rules.
local hardware = require('tp.catalog.hardware')
local metrics = require('tp.parse.metrics')
local models = require('tp.catalog.models')

local M = {}

--- The catalog GPU of a platform whose records name none: what a recipe plans with when its
--- platform names no hardware (tp.experiment.DEFAULT_HARDWARE). Used last, and said so.
M.PLATFORM_HARDWARE = { amd = 'mi300x', nvd = 'h100-sxm' }

local PRECISIONS = { bf16 = true, fp16 = true, fp8 = true, fp32 = true, tf32 = true, fp4 = true }

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function str(v)
  return type(v) == 'string' and v ~= '' and v or nil
end

local function tbl(v)
  return type(v) == 'table' and v or nil
end

--- The fields this module reads, from a raw run record (a decoded tplua.run file, as
--- tp.experiment.load_results gives them): the same names as a tp.results run's summary.
---@param rec table
---@param opts? {model?: string, platform?: string} defaults when the record names none
---@return table run {platform, model, gpus, seq_len, precision, tokens_per_s, mfu, gpu,
---  gpu_info, energy_metrics}
function M.run_fields(rec, opts)
  opts = opts or {}
  local tc = tbl(rec.training_config) or {}
  local pm = tbl(rec.performance_metrics) or {}
  local gi = tbl(rec.gpu_info)
  local devices = gi and tbl(gi.devices)
  return {
    id = str(rec.run_id),
    platform = str(rec.platform) or opts.platform,
    model = str(rec.model) or (tbl(rec.model) and str(rec.model.id)) or opts.model,
    gpus = tc.num_gpus,
    seq_len = tc.sequence_length,
    precision = str(tc.precision),
    tokens_per_s = pm.tokens_per_second,
    mfu = pm.mfu,
    gpu = gi and (str(gi.device_name) or str(gi.name) or (devices and devices[1]
      and str(devices[1].name))),
    gpu_info = gi,
    energy_metrics = tbl(rec.energy_metrics),
  }
end

--- The catalog row of a run's GPU: `opts.hardware` (an id given for the run or its group)
--- wins, then the id the record names (gpu_info.hardware), then the match of the recorded
--- device name, and only for a record that names no GPU at all, the platform's
--- (M.PLATFORM_HARDWARE). A recorded id or device name the catalog does not know is reported,
--- never replaced by a guess. Returns the row and how it was found ('given', 'recorded',
--- 'device name', 'assumed from the platform'), or nil and why.
---```lua
---local row, how = tp.efficiency.hardware(run, { hardware = 'mi300x' })
---```
---@param run table a tp.results run or M.run_fields(record)
---@param opts? {hardware?: string, group?: any} `group` names the group in messages
---@return table|nil row
---@return string how_or_why
function M.hardware(run, opts)
  opts = opts or {}
  local group = tostring(opts.group or run.platform or run.id)
  if opts.hardware then
    local row, why = hardware.get(opts.hardware)
    return row, row and 'given' or why
  end
  local gi = tbl(run.gpu_info)
  local recorded = gi and str(gi.hardware)
  if recorded then
    local row = hardware.get(recorded)
    if not row then
      return nil, string.format("the record's gpu_info.hardware '%s' is not in tp.hardware (give "
        .. 'hardware = {%s = id})', recorded, group)
    end
    return row, 'recorded'
  end
  if type(run.gpu) == 'string' then
    local row, why = hardware.match({ name = run.gpu })
    return row, row and 'device name' or why
  end
  local default = M.PLATFORM_HARDWARE[run.platform]
  if default then
    return hardware.get(default), 'assumed from the platform'
  end
  return nil, string.format('the record names no GPU (gpu_info); give its catalog id: hardware = '
    .. '{%s = id} (tplua compare --hardware %s=ID; ids: %s)', group, group,
    table.concat(hardware.ids(), ', '))
end

--- The label of a GPU found by M.hardware, for a basis line: the id, and how it was found when
--- it was assumed ('mi300x (assumed from the platform amd: the records name no GPU;
--- --hardware amd=ID sets it)'; `group` is the key --hardware takes, default the platform).
---@param row table
---@param how string
---@param platform? string
---@param group? any
---@return string
function M.hardware_label(row, how, platform, group)
  if how == 'assumed from the platform' then
    return string.format('%s (assumed from the platform %s: the records name no GPU; '
      .. '--hardware %s=ID sets it)', row.id, tostring(platform), tostring(group or platform))
  end
  return row.id
end

--- A run's model FLOPs utilisation: the recorded MFU, else tp.metrics.mfu with the run's
--- model, sequence length, precision (bf16 when not recorded, said so), GPU count and the GPU
--- of M.hardware. Returns the value and its detail `{recorded = true}` or `{result = <mfu
--- result>, row =, how =, precision =, precision_assumed =}`, or nil and why.
---```lua
---local mfu, d = tp.efficiency.mfu(run)
---```
---@param run table
---@param opts? {hardware?: string, group?: any, convention?: string}
---@return number|nil mfu
---@return table|string detail_or_why
function M.mfu(run, opts)
  opts = opts or {}
  if is_finite(run.mfu) then
    return run.mfu, { recorded = true }
  end
  if not is_finite(run.tokens_per_s) or not is_finite(run.gpus) or not is_finite(run.seq_len)
  then
    return nil, 'tokens/s, GPU count or sequence length unknown'
  end
  if type(run.model) ~= 'string' then
    return nil, 'the record names no model'
  end
  if not models.get(run.model) then
    return nil, string.format("model '%s' is not in tp.models", run.model)
  end
  local row, how = M.hardware(run, opts)
  if not row then
    return nil, how
  end
  local precision, assumed = run.precision, false
  if not PRECISIONS[precision] then
    precision, assumed = 'bf16', true
  end
  local res, err = metrics.mfu({ tokens_per_s = run.tokens_per_s,
    gpus = math.tointeger(run.gpus) or math.floor(run.gpus), model = run.model,
    seq_len = math.tointeger(run.seq_len) or math.floor(run.seq_len), precision = precision,
    hardware = row, convention = opts.convention })
  if not res then
    return nil, err
  end
  return res.mfu, { result = res, row = row, how = how, precision = precision,
    precision_assumed = assumed }
end

--- A run's GPU energy per token in joules: the record's measured `energy_metrics.
--- joules_per_token` (labelled 'measured', or 'estimated' when the record says so), else the
--- TDP estimate GPUs x TDP / tokens/s with the GPU of M.hardware, an upper bound. Returns the
--- value, its basis text and (for an estimate) the GPU used, or nil and why.
---```lua
---local j, basis = tp.efficiency.energy(run)  --> 0.0734, 'estimated: 8 GPUs x mi300x TDP ...'
---```
---@param run table
---@param opts? {hardware?: string, group?: any}
---@return number|nil joules_per_token
---@return string basis_or_why
---@return table? detail {row =, how =} of an estimate (M.hardware's)
function M.energy(run, opts)
  local em = tbl(run.energy_metrics) or {}
  local jpt = em.joules_per_token or em.energy_per_token_j
  if is_finite(jpt) then
    return jpt, em.estimated == true and 'estimated' or 'measured'
  end
  if not is_finite(run.tokens_per_s) or not is_finite(run.gpus) then
    return nil, 'tokens/s or GPU count unknown'
  end
  opts = opts or {}
  local row, how = M.hardware(run, opts)
  if not row then
    return nil, how
  end
  if not is_finite(row.tdp_w) then
    return nil, row.id .. ' has no TDP in the catalog'
  end
  return run.gpus * row.tdp_w / run.tokens_per_s, string.format(
    'estimated: %d GPUs x %s TDP %d W x time (upper bound)', math.tointeger(run.gpus)
    or math.floor(run.gpus), M.hardware_label(row, how, run.platform, opts.group), row.tdp_w),
    { row = row, how = how }
end

return M
