-- tp.analyse._audit_run: findings and their order, and the findings on one run: intended vs
-- effective configuration, completion, failure, what could not be checked.
local json = require('tp.json')
local config = require('tp.analyse._audit_config')

local M = {}

local is_finite, basename, methodology = config.is_finite, config.basename, config.methodology
local class_of, fmt, label, same = config.class_of, config.fmt, config.label, config.same

local SEVERITY_ORDER = { error = 1, warning = 2, info = 3 }

local function new_finding(severity, kind, key, message, runs, values)
  return { severity = severity, kind = kind, key = key, message = message,
    runs = json.array(runs or {}), values = values or {} }
end

local function sort_findings(list)
  table.sort(list, function(a, b)
    local sa, sb = SEVERITY_ORDER[a.severity] or 9, SEVERITY_ORDER[b.severity] or 9
    if sa ~= sb then
      return sa < sb
    end
    if a.kind ~= b.kind then
      return a.kind < b.kind
    end
    if (a.key or '') ~= (b.key or '') then
      return (a.key or '') < (b.key or '')
    end
    return a.message < b.message
  end)
  return list
end

local function keys_sorted(t)
  local ks = {}
  for k in pairs(t) do
    ks[#ks + 1] = k
  end
  table.sort(ks)
  return ks
end

local function same_dataset(want, got)
  if type(want) == 'string' and type(got) == 'string' then
    if want == got then
      return true
    end
    if want ~= 'mock' and got ~= 'mock' then
      return got:find('/' .. want .. '/', 1, true) ~= nil or basename(got) == want
    end
    return false
  end
  if type(want) == 'table' and type(got) == 'string' then
    return want.path == got
  end
  return same(want, got)
end

local function run_findings(run, e, m, out)
  local id = run.id or '?'
  -- Intended vs effective.
  if e.intended then
    for _, key in ipairs(keys_sorted(e.intended)) do
      local want, got = e.intended[key], e.config[key]
      if got ~= nil and want ~= nil then
        local ok
        if key == 'training.dataset' then
          ok = same_dataset(want, got)
        else
          ok = same(want, got)
        end
        if not ok then
          local class = class_of(m, key)
          local sev = (class == 'algorithmic' or class == 'fixed') and 'error' or 'warning'
          out[#out + 1] = new_finding(sev,
            'intended_vs_effective', key, string.format(
              '%s: %s is %s in the log (%s) but the %s asked for %s — the framework did not ' ..
              'run the configuration it was given (an override in its own config files, a ' ..
              'default, or a flag it ignores)', id, label(key), fmt(got),
              e.provenance[key] or '?', e.intended_source, fmt(want)),
            { id }, { intended = want, effective = got, class = class })
        end
      end
    end
  end
  -- Completion.
  local last = run.last_iteration
  local total = e.config['training.iters'] or run.train_iters
  local by_rule = run.stopped_by == 'converged_ci' or run.stopped_by == 'drift'
    or run.stopped_by == 'max_iters'
  if by_rule and is_finite(last) and is_finite(total) and last < total then
    -- Stopped by its stop rule once its step time was known (docs/stopping.md): complete.
    out[#out + 1] = new_finding('info', 'stopped_early', 'training.iters', string.format(
      '%s stopped at iteration %s of %s by its stop rule (%s): its figures are those of its '
      .. 'steady state', id, fmt(last), fmt(total), run.stopped_by), { id },
      { last_iteration = last, train_iters = total, stopped_by = run.stopped_by })
  elseif is_finite(last) and is_finite(total) and last < total then
    out[#out + 1] = new_finding('error', 'incomplete', 'training.iters', string.format(
      '%s stopped at iteration %s of %s: it was killed, crashed or is still running; its ' ..
      'figures describe part of a run — rerun it or leave it out of the comparison', id,
      fmt(last), fmt(total)), { id }, { last_iteration = last, train_iters = total })
  end
  if run.status == 'failed' then
    local why = {}
    for _, d in ipairs(type(run.diagnostics) == 'table' and run.diagnostics or {}) do
      if d.severity == 'error' and #why < 3 then
        why[#why + 1] = tostring(d.kind) .. ': ' .. tostring(d.message)
      end
    end
    out[#out + 1] = new_finding('error', 'run_failed', nil, string.format('%s failed%s', id,
      #why > 0 and (' (' .. table.concat(why, '; ') .. ')') or ''), { id })
  end
  if not e.has_args then
    out[#out + 1] = new_finding('info', 'no_argument_dump', nil, string.format(
      '%s: no argument dump in the record (%s): its effective configuration comes from the ' ..
      'record\'s training_config only, so fewer keys can be checked', id,
      run.kind == 'tprimat' and 'a tprimat-era file' or 'the log shows none'), { id })
  end
  for _, n in ipairs(e.notes) do
    out[#out + 1] = new_finding('warning', 'adapter', nil, n, { id })
  end
  if e.dataset == 'mock' then
    out[#out + 1] = new_finding('info', 'mock_data', 'training.dataset', string.format(
      '%s trains on mock data (%s): throughput is measured without the data pipeline and the ' ..
      'loss says nothing about convergence', id, e.provenance['training.dataset'] or '?'), { id })
  end
end

local function resolve_methodology(name, level)
  local m, err = methodology(name)
  if not m then
    error('tp.audit: ' .. tostring(err), level)
  end
  return m
end

M.new_finding, M.sort_findings, M.keys_sorted = new_finding, sort_findings, keys_sorted
M.run_findings, M.resolve_methodology = run_findings, resolve_methodology

return M
