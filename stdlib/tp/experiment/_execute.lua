-- tp.experiment._execute: running a plan: this machine's platform (tp.gpu.probe) or the one a
-- Slurm plan submits, the runs in tp.campaign's shape, and their execution through it.
local config = require('tp.plan.config')

local M = {}

--- Finds this machine's platform with tp.gpu.probe: 'nvd' (NVIDIA), 'amd', or nil and a reason.
---@return string|nil platform
---@return string reason what the probe found
---@return table|nil probe
function M.local_platform()
  local ok, gpu = pcall(require, 'tp.gpu')
  if not ok then
    return nil, 'tp.gpu cannot be loaded: ' .. tostring(gpu)
  end
  local probe, err = gpu.probe({ timeout = 60 })
  if not probe then
    return nil, 'GPU probe failed: ' .. tostring(err)
  end
  local d = probe.devices[1]
  if not d then
    return nil, 'the NVIDIA and AMD libraries report no device', probe
  end
  local p = d.vendor == 'nvidia' and 'nvd' or (d.vendor == 'amd' and 'amd' or nil)
  local names = {}
  for _, dev in ipairs(probe.devices) do
    names[dev.name or '?'] = (names[dev.name or '?'] or 0) + 1
  end
  local parts = {}
  for _, n in ipairs(config.sorted_keys(names)) do
    parts[#parts + 1] = string.format('%d x %s', names[n], n)
  end
  return p, table.concat(parts, ', '), probe
end

--- The platform whose runs a Slurm plan submits: --only's, else the plan's only platform; the
--- machine tplua runs on (a login node) need not have its GPUs.
---@param plan table
---@param opts table the parsed flags
---@return string|nil platform
---@return string reason
function M.slurm_platform(plan, opts)
  if opts.only then
    return opts.only, 'submitted through Slurm (--only)'
  end
  if #plan.order == 1 then
    return plan.order[1], 'submitted through Slurm'
  end
  return nil, string.format('--launcher slurm: the plan has %d platforms (%s); choose the one '
    .. "this cluster has with --only", #plan.order, table.concat(plan.order, ', '))
end

--- A run's `profile` (tp.profile.for_run's) with the trace analysis the record writer calls on
--- the traces the run left (tp.analyse.profiled.summarise): its record gets `profile.analysis`.
--- A copy: the plan's own entry is left as it is.
---@param profile table
---@return table
function M.with_analysis(profile)
  local out = {}
  for k, v in pairs(profile) do
    out[k] = v
  end
  out.analyse = require('tp.analyse.profiled').summarise
  return out
end

--- The runs of a plan in the shape tp.campaign takes (docs/recipes.md, "Running"); a profiled
--- run's `profile` carries the trace analysis (M.with_analysis).
---@param plan table
---@param platform? string only this platform's runs
---@param extra? table {preflight?, on_record?} what every run's record carries besides (the
---  preflight's summary, tp.preflight.summary), and what is called with each record written
---  (M.history_hook's function)
---@return table[]
function M.campaign_runs(plan, platform, extra)
  local out = {}
  for _, r in ipairs(plan.runs) do
    if platform == nil or r.platform == platform then
      local dataset = r.config.training and r.config.training.dataset
      out[#out + 1] = {
        id = r.id, argv = r.argv, env = r.env, cwd = r.cwd, parser = r.parser,
        timeout = r.timeout, stop = r.stop, gbs = r.gbs, seq_len = r.seq_len, gpus = r.gpus,
        platform = r.platform, framework = r.framework, model = r.model,
        methodology = r.methodology, ['repeat'] = r['repeat'], config = r.config,
        files = r.files, files_dir = r.output, hardware = r.hardware,
        launcher = r.launcher == 'slurm' and 'slurm' or nil,
        experiment = plan.experiment,
        dataset = type(dataset) == 'string' and dataset or nil,
        profile = r.profile and M.with_analysis(r.profile),
        preflight = extra and extra.preflight,
        on_record = extra and extra.on_record,
      }
    end
  end
  return out
end

--- Runs the plan's runs of `platform` through tp.campaign. Returns the campaign's result, or
--- nil, message, code: 'ENOSYS' when tp.campaign is not available in this installation.
---@param plan table
---@param platform string
---@param opts? table passed to campaign:execute
---@param extra? table passed to M.campaign_runs
---@return any|nil result
---@return string? err
---@return string? code
function M.execute(plan, platform, opts, extra)
  local ok, campaign = pcall(require, 'tp.run.campaign')
  if not ok then
    if tostring(campaign):find("module 'tp.run.campaign' not found", 1, true) then
      return nil, 'tp.campaign is not available: runs cannot be started by this installation',
        'ENOSYS'
    end
    error(campaign, 0)
  end
  local spec = { results = plan.results_abs, runs = M.campaign_runs(plan, platform, extra) }
  local c
  local mt = getmetatable(campaign)
  if type(campaign) == 'function' or (mt and mt.__call) then
    c = campaign(spec)
  elseif type(campaign) == 'table' and type(campaign.new) == 'function' then
    c = campaign.new(spec)
  else
    return nil, 'tp.campaign: neither callable nor has new()', 'ENOSYS'
  end
  return c:execute(opts or {})
end

-- The history runs are added to: `target`, else $TPLUA_HISTORY; nil when neither is set.
local function history_target(target)
  if target == nil or target == '' then
    target = os.getenv('TPLUA_HISTORY')
  end
  if target == nil or target == '' then
    return nil
  end
  return target
end

-- Adds the record files `paths` to the history `target`, one line to `out` per run added.
local function add_paths(target, paths, out)
  local history = require('tp.history')
  local h, err = history.open(target)
  if not h then
    io.stderr:write('history: runs not added: ', tostring(err), '\n')
    return nil, err
  end
  local shown = history.display(h.target)
  local res, aerr = h:add(paths, { on_run = function(info)
    if info.added then
      out:write(string.format('history: added %s to %s\n', info.run_id, shown))
    end
  end })
  h:close()
  if not res then
    io.stderr:write('history: runs not added: ', tostring(aerr), '\n')
    return nil, aerr
  end
  for _, f in ipairs(res.failed) do
    io.stderr:write('history: not added: ', tostring(f.error), '\n')
  end
  if #res.failed > 0 then
    return nil, res.failed[1].error
  end
  return true
end

--- The function a run calls once its record is written (the campaign run's `on_record`) that
--- adds the record to the history `target` (a recipe's `history`), else the one $TPLUA_HISTORY
--- names, printing one line to `out`; nil when neither is set. A history that cannot be
--- written is said on stderr; the run stays as it ended (M.add_to_history, at the end of the
--- campaign, tries again and sets the exit status).
---@param target? string a path or postgresql:// URL
---@param out? file* (default io.stdout)
---@return function|nil on_record
function M.history_hook(target, out)
  target = history_target(target)
  if not target then
    return nil
  end
  out = out or io.stdout
  return function(path)
    add_paths(target, { path }, out)
  end
end

--- Adds the records of the runs a campaign's execution left finished (`summary`, what
--- campaign:execute returned: runs finished now or before) to the history `target` (a recipe's
--- `history`), else the one $TPLUA_HISTORY names; nothing when neither is set. Prints one line
--- per run added to `out` ('history: added <run id> to <db>'); a run stored already is not
--- added again. Returns true, or nil and the message (printed to stderr) when the history
--- cannot be opened or written.
---@param target? string a path or postgresql:// URL
---@param summary table
---@param out? file* (default io.stdout)
---@return true|nil ok, string? err
function M.add_to_history(target, summary, out)
  out = out or io.stdout
  target = history_target(target)
  if target == nil or type(summary) ~= 'table'
    or type(summary.runs) ~= 'table' or type(summary.results) ~= 'string' then
    return true
  end
  local fs = require('tp.fs')
  local paths = {}
  for id, r in pairs(summary.runs) do
    if r.status == 'finished' or (r.status == 'skipped' and r.state == 'finished') then
      local p = fs.join(summary.results, id .. '.json')
      if fs.is_file(p) then
        paths[#paths + 1] = p
      end
    end
  end
  if #paths == 0 then
    return true
  end
  table.sort(paths)
  return add_paths(target, paths, out)
end

return M
