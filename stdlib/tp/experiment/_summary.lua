-- tp.experiment._summary: the run records of a results directory (records, and logs that have
-- none), the built-in summary by platform, and each platform's best configuration of a sweep.
local config = require('tp.plan.config')

local M = {}

local function walk(dir, depth, out)
  local fs = require('tp.fs')
  local entries = fs.list(dir)
  if not entries or depth > 8 then
    return out
  end
  for _, e in ipairs(entries) do
    local path = dir .. '/' .. e.name
    if e.type == 'directory' then
      if e.name ~= '.' and e.name ~= '..' then
        walk(path, depth + 1, out)
      end
    elseif e.type == 'file' or e.type == 'link' then
      out[#out + 1] = path
    end
  end
  return out
end

-- The platform of a record: its own field, else an ancestor directory or the file name, else
-- the GPU name it recorded.
local function infer_platform(rec, path)
  if type(rec.platform) == 'string' then
    return rec.platform
  end
  for part in path:gmatch('[^/]+') do
    if part == 'amd' or part == 'nvd' then
      return part
    end
  end
  local base = path:match('([^/]+)$') or path
  local prefix = base:match('^(%a+)[-_]')
  if prefix == 'amd' or prefix == 'nvd' then
    return prefix
  end
  local gi = type(rec.gpu_info) == 'table' and rec.gpu_info.device_name
  if type(gi) == 'string' then
    if gi:find('MI%d') or gi:find('AMD') then
      return 'amd'
    elseif gi:find('NVIDIA') or gi:find('H100') or gi:find('H200') then
      return 'nvd'
    end
  end
  return 'unknown'
end

local function is_record(t)
  return type(t) == 'table' and (require('tp.parse.record').readable(t.schema)
    or (t.performance_metrics ~= nil and (t.step_times ~= nil or t.training_config ~= nil)))
end

local function stem(path)
  local base = path:match('([^/]+)$') or path
  return base:match('^(.+)%.[^.]+$') or base
end

--- Loads the run records under a results directory: JSON run records (schema tplua.run/2 or /1, or
--- tprimat-era result files) and training logs that have no record yet, parsed with tp.log.
--- Returns `{records = {...}, notes = {...}}`; every record gets `_path` and `_platform`.
--- Files that are neither are skipped with a note; a damaged file never stops the analysis.
---@param dir string
---@return table result
function M.load_results(dir)
  local fs = require('tp.fs')
  local res = { records = {}, notes = {} }
  if not fs.is_dir(dir) then
    res.notes[#res.notes + 1] = string.format('%s: not a directory', dir)
    return res
  end
  local files = walk(dir, 0, {})
  table.sort(files)
  local json = require('tp.json')
  local covered = {}
  local logs = {}
  for _, path in ipairs(files) do
    if path:match('%.json$') and not require('tp.plan.profile').is_trace_name(path) then
      local t, err = json.load_file(path)
      if t == nil then
        res.notes[#res.notes + 1] = string.format('%s: skipped: %s', path, tostring(err))
      elseif is_record(t) then
        t._path = path
        t._platform = infer_platform(t, path)
        res.records[#res.records + 1] = t
        covered[stem(path)] = true
        local src = type(t.source) == 'table' and t.source.path
        if type(src) == 'string' then
          covered[stem(src)] = true
        end
      end
    elseif path:match('%.log$') then
      logs[#logs + 1] = path
    end
  end
  local pending = {}
  for _, path in ipairs(logs) do
    if not covered[stem(path)] then
      pending[#pending + 1] = path
    end
  end
  if #pending > 0 then
    local ok_log, log_mod = pcall(require, 'tp.parse.log')
    if not ok_log then
      res.notes[#res.notes + 1] = string.format('%d log(s) without a run record not analysed: '
        .. 'tp.log is not available', #pending)
    else
      local record = require('tp.parse.record')
      for _, path in ipairs(pending) do
        local log, err = log_mod.parse(path)
        if not log then
          res.notes[#res.notes + 1] = string.format('%s: skipped: %s', path, tostring(err))
        else
          local platform = infer_platform({}, path)
          local rec = record.from_log(log, { path = path,
                                             platform = platform ~= 'unknown' and platform
                                               or nil })
          if #rec.records > 0 then
            rec._path = path
            rec._staged = true
            rec._platform = platform
            res.records[#res.records + 1] = rec
          else
            res.notes[#res.notes + 1] = string.format('%s: no iteration record', path)
          end
        end
      end
    end
  end
  return res
end

local function num(v)
  if type(v) == 'number' and v == v then
    return v
  end
  return nil
end

local function mean_sd(xs)
  local stats = require('tp.stats')
  if #xs == 0 then
    return nil
  end
  local m = stats.mean(xs)
  local sd = #xs > 1 and stats.stddev(xs) or nil
  return m, sd
end

-- Mean of the last k finite values of an array.
local function tail_mean(xs, k)
  local vals = {}
  for i = #xs, 1, -1 do
    if num(xs[i]) then
      vals[#vals + 1] = xs[i]
      if #vals == k then
        break
      end
    end
  end
  if #vals == 0 then
    return nil
  end
  local s = 0
  for _, v in ipairs(vals) do
    s = s + v
  end
  return s / #vals
end

-- A record's MFU and GPU energy per token (with its basis), computed as tp.compare does
-- (tp.efficiency): `hardware` is the catalog id given for its platform, if any.
local function record_efficiency(rec, model, hardware, platform)
  local efficiency = require('tp.analyse.efficiency')
  local run = efficiency.run_fields(rec, { model = model, platform = platform })
  local o = { hardware = hardware, group = platform }
  local joules, basis = efficiency.energy(run, o)
  return (efficiency.mfu(run, o)), joules, joules and basis
end

--- Summarises run records by platform: runs, framework, tokens/s/GPU (mean, stddev), step time,
--- MFU, GPU energy per token (measured, else the TDP estimate; tp.efficiency), final loss; with
--- two platforms, the ratio of tokens/s/GPU with a seeded bootstrap CI and Welch's test, and the
--- RMS difference of the mean loss curves.
---@param records table[] run records with `_platform`
---@param opts? {model?: string, hardware?: table<string, string>} model id and platform ->
---  catalog id, for MFU when a record lacks it
---@return table summary {platforms = {...}, order = {...}, ratio = ..., loss = ...}
function M.summarize(records, opts)
  opts = opts or {}
  local stats = require('tp.stats')
  local groups, order = {}, {}
  for _, rec in ipairs(records) do
    local p = rec._platform or 'unknown'
    if not groups[p] then
      groups[p] = { platform = p, records = {}, tps = {}, step = {}, mfu = {}, loss = {},
                    frameworks = {}, energy = {}, energy_bases = {} }
      order[#order + 1] = p
    end
    local g = groups[p]
    g.records[#g.records + 1] = rec
    local pm = rec.performance_metrics or {}
    local fw = type(rec.framework) == 'string' and rec.framework or nil
    if fw then
      g.frameworks[fw] = true
    end
    if num(pm.tokens_per_second_per_gpu) then
      g.tps[#g.tps + 1] = pm.tokens_per_second_per_gpu
    end
    if num(pm.avg_step_time_seconds) then
      g.step[#g.step + 1] = pm.avg_step_time_seconds
    end
    local model = type(rec.model) == 'string' and rec.model or opts.model
    local mfu, joules, basis = record_efficiency(rec, model,
      opts.hardware and opts.hardware[p], p)
    if mfu then
      g.mfu[#g.mfu + 1] = mfu
    end
    if joules then
      g.energy[#g.energy + 1] = joules
      g.energy_bases[basis] = true
    end
    local final = tail_mean(rec.loss_values or {}, 10)
    if final then
      g.loss[#g.loss + 1] = final
    end
  end
  table.sort(order)
  local summary = { platforms = groups, order = order }
  for _, p in ipairs(order) do
    local g = groups[p]
    g.tps_mean, g.tps_sd = mean_sd(g.tps)
    g.step_mean = mean_sd(g.step)
    g.mfu_mean = mean_sd(g.mfu)
    g.energy_mean = mean_sd(g.energy)
    g.energy_basis = table.concat(config.sorted_keys(g.energy_bases), '; ')
    g.loss_mean = mean_sd(g.loss)
    g.framework = table.concat(config.sorted_keys(g.frameworks), '+')
  end
  -- Two platforms: the ratio first / second (amd / nvd in name order).
  if #order == 2 then
    local a, b = groups[order[1]], groups[order[2]]
    if #a.tps > 0 and #b.tps > 0 then
      local ratio = { numerator = order[1], denominator = order[2],
                      estimate = a.tps_mean / b.tps_mean }
      if #a.tps >= 2 and #b.tps >= 2 then
        local ci = stats.bootstrap_ratio_ci(a.tps, b.tps, { seed = 1, resamples = 10000 })
        if ci then
          ratio.lo, ratio.hi = ci.lo, ci.hi
        end
        local w = stats.welch(a.tps, b.tps)
        if w then
          ratio.p = w.p
        end
      end
      summary.ratio = ratio
    end
    -- Loss curves: the mean curve of each platform over the iterations they all have.
    local function mean_curve(g)
      local sum, count = {}, {}
      for _, rec in ipairs(g.records) do
        local its = rec.iterations or {}
        local ls = rec.loss_values or {}
        if #its == #ls then
          for i, it in ipairs(its) do
            if num(ls[i]) then
              sum[it] = (sum[it] or 0) + ls[i]
              count[it] = (count[it] or 0) + 1
            end
          end
        end
      end
      local xs = {}
      for it, n in pairs(count) do
        if n == #g.records then
          xs[#xs + 1] = it
        end
      end
      table.sort(xs)
      local ys = {}
      for i, it in ipairs(xs) do
        ys[i] = sum[it] / count[it]
      end
      return { x = xs, y = ys }
    end
    local ca, cb = mean_curve(a), mean_curve(b)
    if #ca.x > 0 and #cb.x > 0 then
      local rms, common = stats.curve_distance(ca, cb)
      if rms then
        summary.loss = { rms = rms, common = common, numerator = order[1],
                         denominator = order[2] }
        -- The same over the last tenth of the common iterations.
        local lastx = {}
        local set = {}
        for _, x in ipairs(cb.x) do
          set[x] = true
        end
        for _, x in ipairs(ca.x) do
          if set[x] then
            lastx[#lastx + 1] = x
          end
        end
        local from = lastx[math.max(1, #lastx - #lastx // 10 + 1)]
        local function cut(c)
          local out = { x = {}, y = {} }
          for i, x in ipairs(c.x) do
            if x >= from then
              out.x[#out.x + 1] = x
              out.y[#out.y + 1] = c.y[i]
            end
          end
          return out
        end
        local rms_tail, n_tail = stats.curve_distance(cut(ca), cut(cb))
        if rms_tail then
          summary.loss.tail_rms, summary.loss.tail_common = rms_tail, n_tail
          summary.loss.tail_from = from
        end
      end
    end
  end
  return summary
end

local function fmt(v, spec)
  if v == nil then
    return '-'
  end
  return string.format(spec, v)
end

--- Prints a summary (M.summarize) as a table.
---@param summary table
---@param out? file* default io.stdout
function M.print_summary(summary, out)
  out = out or io.stdout
  if #summary.order > 0 then
    out:write(string.format('%-9s %-10s %5s  %-22s %-14s %-7s %-9s %s\n', 'platform',
      'framework', 'runs', 'tokens/s/GPU', 'step time (s)', 'MFU', 'J/token', 'final loss'))
  end
  for _, p in ipairs(summary.order) do
    local g = summary.platforms[p]
    local tps = '-'
    if g.tps_mean then
      tps = string.format('%.1f', g.tps_mean)
      if g.tps_sd then
        tps = tps .. string.format(' ± %.1f', g.tps_sd)
      end
    end
    out:write(string.format('%-9s %-10s %5d  %-22s %-14s %-7s %-9s %s\n', p,
      g.framework ~= '' and g.framework or '-', #g.records, tps, fmt(g.step_mean, '%.4f'),
      g.mfu_mean and string.format('%.1f%%', g.mfu_mean * 100) or '-',
      fmt(g.energy_mean, '%.4g'), fmt(g.loss_mean, '%.3f')))
  end
  local r = summary.ratio
  if r then
    local extra = {}
    if r.lo then
      extra[#extra + 1] = string.format('95%% bootstrap CI %.3f..%.3f', r.lo, r.hi)
    end
    if r.p then
      extra[#extra + 1] = string.format('Welch p = %.2g', r.p)
    end
    out:write(string.format('\n%s / %s tokens/s/GPU: %.3f%s\n', r.numerator, r.denominator,
      r.estimate, #extra > 0 and (' (' .. table.concat(extra, '; ') .. ')') or ''))
  end
  local l = summary.loss
  if l then
    out:write(string.format('loss curves %s vs %s: RMS difference %.4f over %d iterations',
      l.numerator, l.denominator, l.rms, l.common))
    if l.tail_rms then
      out:write(string.format(' (from iteration %d: %.4f)', l.tail_from, l.tail_rms))
    end
    out:write('\n')
  end
end


-- The configuration a record ran: its run id without the repeat suffix, else the file stem.
local function config_key(rec)
  local id = type(rec.run_id) == 'string' and rec.run_id or stem(rec._path or '')
  return (id:gsub('%-r%d+$', ''))
end

--- Picks each platform's best configuration: records are grouped by configuration (run id
--- without its repeat suffix), and the group with the highest mean tokens/s/GPU wins. Returns
--- `{ [platform] = {key =, records =, tps_mean =, configs = n} }`.
---@param records table[] records with `_platform`
---@return table best
function M.best_per_platform(records)
  local groups = {}
  for _, rec in ipairs(records) do
    local p = rec._platform or 'unknown'
    local key = config_key(rec)
    groups[p] = groups[p] or {}
    local g = groups[p][key]
    if not g then
      g = { key = key, records = {}, tps = {} }
      groups[p][key] = g
    end
    g.records[#g.records + 1] = rec
    local v = num((rec.performance_metrics or {}).tokens_per_second_per_gpu)
    if v then
      g.tps[#g.tps + 1] = v
    end
  end
  local best = {}
  for p, by_key in pairs(groups) do
    local n = 0
    for _, key in ipairs(config.sorted_keys(by_key)) do
      local g = by_key[key]
      n = n + 1
      g.tps_mean = #g.tps > 0 and mean_sd(g.tps) or nil
      local b = best[p]
      if b == nil or (g.tps_mean or -1) > (b.tps_mean or -1) then
        best[p] = g
      end
    end
    best[p].configs = n
  end
  return best
end

M.infer_platform = infer_platform
M.stem = stem
M.num = num

return M
