-- tp.experiment._analyse: Experiment:analyse, the comparison of the platforms' results
-- (tp.compare, rendered by tp.report; else the built-in summary) with the fairness audit.
local config = require('tp.plan.config')
local sweep = require('tp.plan.sweep')
local paths = require('tp.experiment._paths')
local summarizer = require('tp.experiment._summary')

-- The methods this part gives experiments (tp.experiment sets them on their class).
local Experiment = {}

--- Where this experiment's results are read from: the results directory when it holds run
--- records, else the recorded runs the recipe ships (`recorded`, relative to the recipe file).
---@param plan table
---@return string dir
---@return boolean recorded true when the recorded runs are used
function Experiment:results_source(plan)
  local fs = require('tp.fs')
  if fs.is_dir(plan.results_abs) then
    local found = summarizer.load_results(plan.results_abs)
    if #found.records > 0 then
      return plan.results, false, found
    end
  end
  if self.recorded then
    local dir = self.recorded
    if dir:sub(1, 1) ~= '/' and self.source then
      dir = paths.normalize_path(paths.dirname(self.source) .. '/' .. dir)
    end
    return dir, true
  end
  return plan.results, false
end

-- Writes records built on the fly (logs without a record) to a temporary directory so that
-- tp.results can load them beside the others; returns the directory or nil.
local function stage_records(records)
  local any = false
  for _, rec in ipairs(records) do
    any = any or rec._staged == true
  end
  if not any then
    return nil
  end
  local fs = require('tp.fs')
  local base = os.tmpname()
  os.remove(base)
  local dir = base .. '.tplua-records'
  if not fs.mkdir_p(dir) then
    return nil
  end
  local record = require('tp.parse.record')
  for i, rec in ipairs(records) do
    if rec._staged then
      local copy = {}
      for k, v in pairs(rec) do
        if type(k) ~= 'string' or k:sub(1, 1) ~= '_' then
          copy[k] = v
        end
      end
      copy.platform = rec._platform ~= 'unknown' and rec._platform or copy.platform
      record.save(copy, string.format('%s/%d-%s.json', dir, i, summarizer.stem(rec._path)))
    end
  end
  return dir
end

local function remove_tree(dir)
  local fs = require('tp.fs')
  for _, e in ipairs(fs.list(dir) or {}) do
    os.remove(dir .. '/' .. e.name)
  end
  os.remove(dir)
end

-- The fairness audit of the compared runs (tp.audit.compare), in a few lines; '' without
-- tp.audit.
local function audit_text(set, methodology_name)
  local ok, audit = pcall(require, 'tp.analyse.audit')
  if not ok or type(audit.compare) ~= 'function' then
    return ''
  end
  local oka, r = pcall(audit.compare, set, { methodology = methodology_name })
  if not oka or type(r) ~= 'table' then
    return string.format('\nfairness audit: not run (%s)\n', tostring(r))
  end
  local counts = { error = 0, warning = 0, info = 0 }
  for _, f in ipairs(r.findings or {}) do
    counts[f.severity] = (counts[f.severity] or 0) + 1
  end
  local lines = { string.format('\nfairness audit (%s): %s (%d error%s, %d warning%s)',
    r.methodology or methodology_name, r.valid and 'the comparison is fair'
    or 'the comparison is NOT fair', counts.error, counts.error == 1 and '' or 's',
    counts.warning, counts.warning == 1 and '' or 's') }
  local shown = 0
  for _, f in ipairs(r.findings or {}) do
    if f.severity ~= 'info' and shown < 8 then
      lines[#lines + 1] = string.format('  %s: %s', f.severity, f.message)
      shown = shown + 1
    end
  end
  return table.concat(lines, '\n') .. '\n', r.valid == true
end

-- Compares with tp.compare (rendered by tp.report when installed, else tp.compare.format).
-- Returns the rendered text, or nil and why it could not.
local function compare_text(dirs, found, self, keep)
  local ok_c, compare = pcall(require, 'tp.analyse.compare')
  local ok_r, results = pcall(require, 'tp.analyse.results')
  if not (ok_c and ok_r) then
    return nil, 'tp.compare or tp.results is not available'
  end
  local set, err = results.load(dirs)
  if not set then
    return nil, err
  end
  local by_path, staged_path = {}, {}
  for i, rec in ipairs(found.records) do
    by_path[rec._path] = rec._platform
    if rec._staged then
      staged_path[i] = rec._path
    end
  end
  local kept = {}
  for _, run in ipairs(set.runs) do
    local path = run:file()
    -- Records staged from logs are named '<n>-<log stem>.json': map them back to the log.
    local n = tostring(path):match('/(%d+)%-[^/]*%.json$')
    if n and staged_path[tonumber(n)] and tostring(path):find('.tplua-records/', 1, true) then
      path = staged_path[tonumber(n)]
    end
    if run.platform == nil then
      rawset(run, 'platform', by_path[path] or summarizer.infer_platform({}, tostring(path)))
    end
    if keep == nil or keep[path] then
      kept[#kept + 1] = run
    end
  end
  if keep then
    set = results.from_runs(kept)
  end
  local hardware, baseline = {}, nil
  for p, pd in pairs(self.platforms) do
    hardware[p] = pd.hardware.id
  end
  local present = {}
  for _, run in ipairs(set.runs) do
    present[run.platform] = true
  end
  if present.nvd then
    baseline = 'nvd'
  end
  local ok, result, cerr = pcall(compare.compare, set, { by = 'platform', baseline = baseline,
    hardware = hardware, methodology = self.methodology.name })
  if not ok then
    return nil, tostring(result)
  end
  if not result then
    return nil, cerr
  end
  local text
  local ok_rep, report = pcall(require, 'tp.present.report')
  if ok_rep and type(report) == 'table' and type(report.terminal) == 'function' then
    local okt, t = pcall(report.terminal, result)
    if okt and type(t) == 'string' then
      text = t
    end
  end
  if not text and type(compare.format) == 'function' then
    text = compare.format(result)
  end
  if not text then
    return nil, 'tp.compare has no formatter'
  end
  local atext, valid = audit_text(set, self.methodology.name)
  return text .. atext, nil, valid
end

-- The settings of a configuration for a person: the sweep point of the planned run with that
-- id, else what the record says about its layout and batch.
local function settings_of(plan, g)
  for _, r in ipairs(plan.runs) do
    if r.id:gsub('%-r%d+$', '') == g.key and r.point then
      return sweep.describe_point(r.point)
    end
  end
  local tc = g.records[1].training_config or {}
  local parts = {}
  for _, k in ipairs({ { 'tp', 'tensor_parallel_size' }, { 'pp', 'pipeline_parallel_size' },
    { 'dp', 'data_parallel_size' }, { 'mbs', 'micro_batch_size' } }) do
    if summarizer.num(tc[k[2]]) then
      parts[#parts + 1] = string.format('%s=%s', k[1], tostring(math.tointeger(tc[k[2]])
        or tc[k[2]]))
    end
  end
  local rg = (g.records[1].args or {}).recompute_granularity
  if type(rg) == 'string' and rg ~= 'None' then
    parts[#parts + 1] = 'recompute=' .. rg
  end
  return #parts > 0 and table.concat(parts, ' ') or g.key
end

--- Analyses the results: loads the run records (and builds records for logs that have none),
--- compares the platforms with tp.compare (rendered by tp.report when installed), else prints the
--- built-in summary, and reports how closely the loss curves agree. Returns the built-in summary
--- (or nil when there is nothing to compare), and whether the fairness audit passed (nil when
--- it did not run).
---@param plan table
---@param out? file*
---@return table|nil summary
---@return boolean|nil valid
function Experiment:analyse(plan, out)
  out = out or io.stdout
  local dir, recorded, found = self:results_source(plan)
  found = found or summarizer.load_results(dir)
  out:write(string.format('\nanalysis: %s%s\n', dir, recorded
    and ' (the recorded runs shipped with the recipe: illustrations derived from published '
    .. 'figures, not measurements; see its README.md)' or ''))
  for _, n in ipairs(found.notes) do
    out:write('  note: ' .. n .. '\n')
  end
  if #found.records == 0 then
    out:write('  no run records yet: nothing to compare\n')
    return nil
  end
  local counts = {}
  for _, rec in ipairs(found.records) do
    counts[rec._platform] = (counts[rec._platform] or 0) + 1
  end
  local parts = {}
  for _, p in ipairs(config.sorted_keys(counts)) do
    parts[#parts + 1] = string.format('%d %s', counts[p], p)
  end
  out:write(string.format('  %d run records (%s)\n\n', #found.records, table.concat(parts,
    ', ')))
  local hardware = {}
  local sweeping = self.sweep ~= nil
  for p, pd in pairs(self.platforms) do
    hardware[p] = pd.hardware.id
    sweeping = sweeping or pd.sweep ~= nil
  end
  local records = found.records
  local keep
  if sweeping then
    -- Each platform's best configuration, reported with its settings; only those are compared.
    local best = summarizer.best_per_platform(records)
    -- A platform whose sweep was searched: the search's answer, over that candidate's runs.
    for p, g in pairs(require('tp.experiment._search').best_records(dir, records)) do
      best[p] = g
    end
    out:write('best configuration per platform (highest mean tokens/s/GPU of its sweep):\n')
    records, keep = {}, {}
    for _, p in ipairs(config.sorted_keys(best)) do
      local g = best[p]
      out:write(string.format('  %-4s %s  %s tokens/s/GPU over %d run(s); best of %d '
        .. 'configuration(s)\n', p, settings_of(plan, g), g.tps_mean and string.format('%.1f',
        g.tps_mean) or '-', #g.records, g.configs))
      if g.search then
        local c = g.candidate
        out:write(string.format('       found by the search (%s; docs/search.md): %s [%s, %s] '
          .. 'tokens/s over its %d runs; its last rung\'s runs are compared\n', g.search,
          tostring(c.estimate and math.floor(c.estimate + 0.5)),
          tostring(c.lo and math.floor(c.lo + 0.5)), c.hi and tostring(math.floor(c.hi + 0.5))
          or 'inf', #(c.runs or {})))
      end
      for _, rec in ipairs(g.records) do
        records[#records + 1] = rec
        keep[rec._path] = true
      end
    end
    out:write('\n')
  end
  local model = type(self.common.model) == 'table' and self.common.model.id or self.common.model
  local summary = summarizer.summarize(records, { model = model, hardware = hardware })
  local staged = stage_records(found.records)
  local text, why, valid = compare_text(staged and { dir, staged } or { dir }, found, self, keep)
  if staged then
    remove_tree(staged)
  end
  if text then
    out:write(text)
    if text:sub(-1) ~= '\n' then
      out:write('\n')
    end
    local l = summary.loss
    if l then
      out:write('\n')
      summarizer.print_summary({ order = {}, platforms = {}, loss = l }, out)
    end
  else
    out:write(string.format('  note: %s; built-in summary follows\n\n', why))
    summarizer.print_summary(summary, out)
  end
  return summary, valid
end

return Experiment
