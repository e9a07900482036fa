-- tp.present.search: what a configuration search decided (the tplua.search/1 documents a
-- recipe's search writes as <results>/search-<platform>.json): found in results directories,
-- and shown as text (tplua compare, the end of a search) and Markdown (tplua report): each
-- rung, its candidates kept and dropped and why (their tokens/s and interval against the
-- bound), the best and whether it is separated from the runner-up at the intervals' level, and
-- the GPU-time (start-up included) and GPU-iterations (excluded) spent against the full grid's.
local M = {}

M.SCHEMA = 'tplua.search/1'

local function num(v)
  if type(v) ~= 'number' then
    return '?'
  end
  if v == math.huge then
    return 'inf'
  end
  if math.abs(v) >= 100 then
    return string.format('%.0f', v)
  end
  return string.format('%.4g', v)
end

local function interval(e)
  if e.estimate == nil then
    return 'no estimate'
  end
  return string.format('%s [%s, %s]', num(e.estimate), num(e.lo), e.hi and num(e.hi) or 'inf')
end

local METRIC_LABEL = { tokens_per_second = 'tokens/s',
  tokens_per_second_per_gpu = 'tokens/s/GPU' }

--- Finds the search documents in results directories (search-*.json at their top): a list of
--- {path, doc}, in path order; unreadable files and other schemas are left out and named in the
--- second list ({path, message}).
---@param dirs string[]
---@return table[] found
---@return table[] problems
function M.find(dirs)
  local fs = require('tp.fs')
  local json = require('tp.json')
  local found, problems = {}, {}
  for _, d in ipairs(dirs or {}) do
    if fs.is_dir(d) then
      local paths = fs.glob(fs.join(d, 'search-*.json')) or {}
      table.sort(paths)
      for _, p in ipairs(paths) do
        local doc, err = json.load_file(p)
        if type(doc) == 'table' and doc.schema == M.SCHEMA then
          found[#found + 1] = { path = p, doc = doc }
        elseif type(doc) == 'table' then
          problems[#problems + 1] = { path = p, message = string.format(
            "%s: schema '%s' is not %s", p, tostring(doc.schema), M.SCHEMA) }
        else
          problems[#problems + 1] = { path = p, message = tostring(err) }
        end
      end
    end
  end
  return found, problems
end

-- The heading line of a search and its settings.
local function heading(doc)
  local st = doc.settings or {}
  local state = ''
  if doc.state ~= 'complete' then
    state = string.format(' (%s: run it again to resume)', tostring(doc.state))
  end
  return string.format('search %s: %s, eta %s, %s to %s iterations, budget %s%% of the grid\'s '
    .. 'GPU-time, %s with %s%% intervals%s', tostring(doc.platform), doc.strategy == 'halving'
    and 'successive halving' or tostring(doc.strategy), num(st.eta), num(st.min_iters),
    num(st.max_iters), num((st.budget or 0) * 100), METRIC_LABEL[doc.metric] or
    tostring(doc.metric), num((st.level or 0) * 100), state)
end

-- The run-to-run variation a rung's intervals count (docs/search.md, "Ranking"), or ''.
local function run_to_run(r)
  local v = r.run_to_run
  if type(v) ~= 'table' or type(v.cv) ~= 'number' then
    return ''
  end
  return string.format('; intervals with a run-to-run variation of %.2f%% (%s df)', 100 * v.cv,
    num(v.df))
end

-- One entry per candidate of a rung: {status ('kept', 'dropped', 'failed', 'measured'),
-- candidate, figures, why}.
local function rung_rows(r)
  local rows, seen = {}, {}
  for _, k in ipairs(r.kept or {}) do
    rows[#rows + 1] = { status = 'kept', candidate = k.candidate, figures = interval(k),
      why = k.why }
    seen[k.candidate] = true
  end
  for _, d in ipairs(r.dropped or {}) do
    local status = d.reason == 'failed' and 'failed' or 'dropped'
    local why = d.reason == 'failed' and tostring(d.detail)
      or string.format('%s: %s', tostring(d.reason), tostring(d.detail))
    rows[#rows + 1] = { status = status, candidate = d.candidate, figures = d.reason == 'failed'
      and '' or interval(d), why = why }
    seen[d.candidate] = true
  end
  for _, e in ipairs(r.ranking or {}) do
    if not seen[e.candidate] then
      rows[#rows + 1] = { status = 'measured', candidate = e.candidate,
        figures = e.failed and '' or interval(e), why = e.failed and tostring(e.failed)
        or 'no decision recorded' }
    end
  end
  return rows
end

-- Whether the best is separated from the runner-up at the intervals' level (tp.plan.search
-- .separation over the document's candidates), as one line; nil when there is no runner-up.
local function separation_line(doc, best)
  local sep = require('tp.plan.search').separation(best, doc.candidates)
  if not sep then
    return nil
  end
  local level = num(((doc.settings or {}).level or 0) * 100)
  local runner = string.format('[%s] %s', tostring(sep.candidate), interval(sep))
  if sep.separated then
    return string.format('separated from the runner-up at %s%%: %s, its high end below the '
      .. 'best\'s low end %s', level, runner, num(best.lo))
  end
  return string.format('NOT separated from the runner-up at %s%%: %s reaches the best\'s low '
    .. 'end %s (%d candidate%s in all): the measurements cannot tell which is faster', level,
    runner, num(best.lo), sep.overlapping, sep.overlapping == 1 and '' or 's')
end

-- The closing lines: the best, whether it is separated from the runner-up, and the GPU-time
-- against the budget.
local function totals(doc)
  local out = {}
  local unit = METRIC_LABEL[doc.metric] or tostring(doc.metric)
  if doc.best then
    for _, c in ipairs(doc.candidates or {}) do
      if c.candidate == doc.best then
        out[#out + 1] = string.format('best: [%s] %s %s over %s measured iterations', c.candidate,
          interval(c), unit, num(c.iters))
        out[#out + 1] = separation_line(doc, c)
      end
    end
  elseif doc.state == 'complete' then
    out[#out + 1] = 'best: none (no candidate could be measured)'
  end
  if doc.spent_gpu_seconds then
    local line = string.format('GPU-time (GPUs x wall time, start-up included): %s GPU-s',
      num(doc.spent_gpu_seconds))
    local budget = (doc.settings or {}).budget
    if doc.grid_gpu_seconds and doc.grid_gpu_seconds > 0 then
      local share = doc.spent_gpu_seconds / doc.grid_gpu_seconds
      line = line .. string.format(', %.1f%% of the full grid\'s %s GPU-s (estimated from what '
        .. 'the runs measured)', 100 * share, num(doc.grid_gpu_seconds))
      if type(budget) == 'number' then
        line = line .. (share <= budget + 1e-9 and string.format(', within the %s%% budget',
          num(budget * 100)) or string.format(', over the %s%% budget: the nominal schedule '
          .. 'is never cut', num(budget * 100)))
      end
    end
    out[#out + 1] = line
    if doc.spent_gpu_iters and doc.grid_gpu_iters and doc.grid_gpu_iters > 0 then
      out[#out + 1] = string.format('GPU-iterations (measured iterations x GPUs, start-up and '
        .. 'warm-up excluded): %s of the grid\'s %s (%.1f%%)', num(doc.spent_gpu_iters),
        num(doc.grid_gpu_iters), 100 * doc.spent_gpu_iters / doc.grid_gpu_iters)
    end
  end
  return out
end

--- The search as text lines (what tplua compare and the end of a search print).
---@param doc table a tplua.search/1 document
---@return string[]
function M.lines(doc)
  local out = { heading(doc) }
  for _, r in ipairs(doc.rungs or {}) do
    out[#out + 1] = string.format('  rung %s: %d candidate%s, %s more iterations each (%s in '
      .. 'all)%s', num(r.rung), #(r.ranking or {}), #(r.ranking or {}) == 1 and '' or 's',
      num(r.iters), num(r.budget), run_to_run(r))
    for _, row in ipairs(rung_rows(r)) do
      out[#out + 1] = string.format('    %-8s [%s] %s%s%s', row.status, tostring(row.candidate),
        row.figures, row.figures ~= '' and ': ' or '', row.why)
    end
  end
  for _, l in ipairs(totals(doc)) do
    out[#out + 1] = '  ' .. l
  end
  return out
end

local function md_text(s)
  s = tostring(s):gsub('[%c]', ' ')
  return (s:gsub('([\\`*_{}%[%]<>#|~])', '\\%1'))
end

--- The search as Markdown lines (a section of tplua report's report.md): a table per rung.
---@param doc table
---@return string[]
function M.markdown(doc)
  local out = { '### ' .. md_text(heading(doc)), '' }
  for _, r in ipairs(doc.rungs or {}) do
    out[#out + 1] = string.format('Rung %s: %d candidates, %s more iterations each (%s in all)%s.',
      num(r.rung), #(r.ranking or {}), num(r.iters), num(r.budget), run_to_run(r))
    out[#out + 1] = ''
    out[#out + 1] = '| decision | candidate | ' .. md_text(METRIC_LABEL[doc.metric] or 'metric')
      .. ' [interval] | why |'
    out[#out + 1] = '| --- | --- | --- | --- |'
    for _, row in ipairs(rung_rows(r)) do
      out[#out + 1] = string.format('| %s | %s | %s | %s |', row.status, md_text(row.candidate),
        md_text(row.figures), md_text(row.why))
    end
    out[#out + 1] = ''
  end
  for _, l in ipairs(totals(doc)) do
    out[#out + 1] = '- ' .. md_text(l)
  end
  out[#out + 1] = ''
  return out
end

return M
