-- tp.present._report_data: the report model: everything a report says (comparison, audit, loss
-- checks, findings, verdict, headline ratio), computed once and rendered by the other parts.
local results = require('tp.analyse.results')
local compare = require('tp.analyse.compare')
local audit = require('tp.analyse.audit')
local convergence = require('tp.analyse.convergence')
local efficiency = require('tp.analyse.efficiency')
local stack = require('tp.analyse.stack')
local profiled = require('tp.analyse.profiled')
local base = require('tp.present._report_base')

local misuse, plural = base.misuse, base.plural
local group_colors, metric_entry = base.group_colors, base.metric_entry

local M = {}

local SEVERITY_ORDER = { error = 1, warning = 2, info = 3 }

local BUILD_OPTS = {
  by = 'string', baseline = 'any', title = 'string', methodology = 'string', seed = 'integer',
  n_boot = 'integer', level = 'number', convention = 'string', prices = 'table',
  hardware = 'table', sources = 'table', generated = 'string', peaks = 'table',
}

local function check_opts(fname, opts, extra)
  if opts == nil then
    return {}
  end
  if type(opts) ~= 'table' then
    misuse(fname, 'options must be a table, got %s', type(opts))
  end
  for k, v in pairs(opts) do
    local want = BUILD_OPTS[k] or (extra and extra[k])
    if not want then
      misuse(fname, "unknown option '%s'", tostring(k))
    end
    local ok = want == 'any' or type(v) == want or (want == 'integer' and math.type(v) == 'integer')
    if not ok then
      misuse(fname, "option '%s' must be %s, got %s", k, want, math.type(v) or type(v))
    end
  end
  return opts
end

local function headline(cmp)
  for _, name in ipairs(base.HEADLINE_METRICS) do
    local m = metric_entry(cmp, name)
    if m and #m.ratios > 0 then
      local out = {}
      for _, r in ipairs(m.ratios) do
        out[#out + 1] = { metric = name, label = m.label, better = m.better, group = r.group,
          baseline = r.baseline, ratio = r.ratio, ci = r.ci, p = r.p,
          significant = r.significant, n = r.n, n_baseline = r.n_baseline,
          is_better = r.better }
      end
      return out
    end
  end
  return {}
end

local function add_findings(list, source, findings)
  for _, f in ipairs(findings or {}) do
    list[#list + 1] = { severity = f.severity or 'info', source = source, kind = f.kind or '?',
      message = tostring(f.message) }
  end
end

---@class tp.report.BuildOpts
---@field by? string key that splits the runs (default 'platform')
---@field baseline? any the group the others are divided by (default nvd, else the first)
---@field title? string report title (default: the models and the groups)
---@field methodology? string audit under this methodology instead of the records' own
---@field seed? integer bootstrap seed (default 42)
---@field n_boot? integer bootstrap resamples (default 10000)
---@field level? number confidence level (default 0.95)
---@field convention? string FLOPs convention for MFU (default 'megatron')
---@field prices? table USD per GPU-hour by group or hardware id (tp.compare)
---@field hardware? table hardware id by group (tp.compare)
---@field sources? string[] the directories the results came from (shown in the header)
---@field generated? string the date line (default: now, UTC)

--- Computes what a report says about `set` (a tp.results ResultSet): the comparison
--- (tp.compare), the audit (tp.audit.compare), the loss checks (tp.convergence.check_set), the
--- verdict and the headline ratio. Fails with nil, message, code when the set is empty
--- ('ENODATA') or the baseline names no group ('EINVAL').
---```lua
---local model = assert(tp.report.build(set, { by = 'platform', baseline = 'nvd' }))
---print(model.verdict.label, model.verdict.headline[1].ratio)
---```
---@param set table
---@param opts? tp.report.BuildOpts
---@return table|nil model, string? err, string? code
function M.build(set, opts)
  if type(set) ~= 'table' or type(set.runs) ~= 'table' then
    misuse('build', 'result set (tp.results.load) expected, got %s', type(set))
  end
  opts = check_opts('build', opts)
  if #set.runs == 0 then
    local why = ''
    if set.errors and #set.errors > 0 then
      why = string.format(' (%s could not be read: %s)', plural(#set.errors, 'file'),
        set.errors[1].message)
    end
    return nil, 'report: no runs to report on' .. why, 'ENODATA'
  end
  -- nccl-tests and rccl-tests results (docs/collectives.md) get a section of their own, out of
  -- the training comparison; a set of nothing else is a report of them alone.
  local collectives, coll_ids = M.collectives_of(set, opts.seed)
  local only_collectives = collectives ~= nil and #set.runs == #coll_ids
  if collectives and not only_collectives then
    set = set:where(function(r)
      return not coll_ids[r]
    end)
  end
  local by = opts.by or 'platform'
  local copts = { by = by, baseline = opts.baseline, methodology = opts.methodology,
    seed = opts.seed, n_boot = opts.n_boot, level = opts.level, convention = opts.convention,
    prices = opts.prices, hardware = opts.hardware }
  local cmp, cerr, ccode = compare.compare(set, copts)
  if not cmp then
    return nil, 'report: ' .. tostring(cerr):gsub('^compare: ', ''), ccode
  end
  local cv = convergence.check_set(set, { by = by })
  local per_run = {}
  for _, f in ipairs(cv.findings) do
    if #f.runs == 1 and not tostring(f.kind):match('^curves_') then
      per_run[f.runs[1]] = per_run[f.runs[1]] or {}
      table.insert(per_run[f.runs[1]], f)
    end
  end
  for _, r in ipairs(set.runs) do
    per_run[r.id] = per_run[r.id] or {}
  end
  local aud = audit.compare(set, { by = by, methodology = opts.methodology,
    loss_findings = per_run })

  local order = {}
  for i, gr in ipairs(cmp.groups) do
    order[i] = gr.value
  end
  local findings = {}
  if not only_collectives then
    add_findings(findings, 'audit', aud.findings)
    add_findings(findings, 'loss', cv.findings)
    add_findings(findings, 'statistics', cmp.warnings)
  end
  for _, e in ipairs(set.errors or {}) do
    findings[#findings + 1] = { severity = 'warning', source = 'input', kind = 'unreadable',
      message = tostring(e.message) .. ' (left out)' }
  end
  for i, f in ipairs(findings) do
    f.order = i
  end
  table.sort(findings, function(a, b)
    local sa, sb = SEVERITY_ORDER[a.severity] or 9, SEVERITY_ORDER[b.severity] or 9
    if sa ~= sb then
      return sa < sb
    end
    return a.order < b.order
  end)
  local counts = { error = 0, warning = 0, info = 0 }
  for _, f in ipairs(findings) do
    counts[f.severity] = (counts[f.severity] or 0) + 1
  end

  local verdict = { counts = counts, headline = headline(cmp), reasons = {} }
  for _, f in ipairs(findings) do
    if f.severity == 'error' then
      verdict.reasons[#verdict.reasons + 1] = f.message
    end
  end
  if only_collectives then
    verdict.status = 'collectives'
    verdict.label = 'Collective benchmarks'
    verdict.summary = string.format('%s of nccl-tests or rccl-tests: busbw by message size side '
      .. 'by side below (no training run)', plural(#collectives.runs, 'result'))
  elseif #order < 2 then
    verdict.status = 'single'
    verdict.label = 'Nothing to compare'
    verdict.summary = string.format('every run has %s = %s: a comparison needs two groups',
      by, tostring(order[1]))
  elseif counts.error > 0 then
    verdict.status = 'unfair'
    verdict.label = 'Not a fair comparison'
    verdict.summary = string.format('%s found: the ratios below are measured, but they do not ' ..
      'compare like with like until %s fixed', plural(counts.error, 'error'),
      counts.error == 1 and 'it is' or 'they are')
  else
    verdict.status = 'fair'
    verdict.label = 'Fair comparison'
    verdict.summary = string.format('the audit found no error under %s (%s); %s', aud.methodology,
      aud.methodology_source, counts.warning > 0 and (plural(counts.warning, 'warning') ..
      ' to read below') or 'no warnings')
  end
  verdict.fair = verdict.status == 'fair'
  verdict.summary = verdict.summary:sub(1, 1):upper() .. verdict.summary:sub(2)

  local models_seen = {}
  for _, r in ipairs(set.runs) do
    if r.model then
      models_seen[r.model] = true
    end
  end
  local mlist = {}
  for m in pairs(models_seen) do
    mlist[#mlist + 1] = m
  end
  table.sort(mlist)
  local title = opts.title
  if not title then
    -- "amd vs nvd": the groups measured against the baseline first, the baseline last.
    local names = {}
    for i = 2, #order do
      names[#names + 1] = tostring(order[i])
    end
    names[#names + 1] = tostring(order[1])
    title = string.format('%s: %s', #mlist > 0 and table.concat(mlist, ', ') or 'Results',
      table.concat(names, ' vs '))
  end
  local per_run_efficiency = {}
  for _, r in ipairs(set.runs) do
    local gv = results.get(r, by)
    if gv == nil then
      gv = '(none)'
    end
    local hw = opts.hardware and (opts.hardware[gv] or opts.hardware[r.id])
    local eopts = { hardware = hw, group = gv, convention = opts.convention }
    per_run_efficiency[r.id] = { mfu = (efficiency.mfu(r, eopts)),
      joules = (efficiency.energy(r, eopts)) }
  end
  return {
    title = title,
    generated = opts.generated or os.date('!%Y-%m-%d %H:%M UTC'),
    version = require('tp').version,
    sources = opts.sources or {},
    -- What a configuration search in those directories decided (tp.present.search).
    searches = (require('tp.present.search').find(opts.sources or {})),
    by = by,
    baseline = cmp.baseline,
    order = order,
    colors = group_colors(order),
    set = set,
    compare = cmp,
    audit = aud,
    convergence = cv,
    findings = findings,
    verdict = verdict,
    level = math.floor((cmp.settings.level or 0.95) * 100 + 0.5),
    hardware = opts.hardware,
    efficiency = per_run_efficiency,
    stack = stack.table(set, { by = by, order = order }),
    -- The profiled runs' trace analysis (nil when no run was profiled).
    profile = profiled.section(set, cmp, { peaks = opts.peaks }),
    -- Memory per GPU: measured (traces, else logs) beside the plan's estimate, or nil.
    memory = profiled.memory_section(set, cmp),
    -- nccl-tests / rccl-tests results side by side (tp.analyse.collectives), or nil.
    collectives = collectives,
  }
end

--- The nccl-tests and rccl-tests results among a set's runs (records of kind collective_bench,
--- docs/collectives.md) set side by side (tp.analyse.collectives.compare), and the runs they are
--- as a set {run = true} (with their count as its length); nil and {} when there are none.
function M.collectives_of(set, seed)
  local coll = require('tp.analyse.collectives')
  local json = require('tp.json')
  local found, ids = {}, {}
  for _, r in ipairs(set.runs) do
    if r.framework == 'nccl-tests' or r.framework == 'rccl-tests' then
      local doc = json.load_file(r.path)
      if coll.is_record(doc) then
        found[#found + 1] = { path = r.path, record = doc }
        ids[r] = true
        ids[#ids + 1] = r
      end
    end
  end
  if #found == 0 then
    return nil, {}
  end
  return coll.compare(found, { seed = seed }), ids
end

M.check_opts = check_opts

return M
