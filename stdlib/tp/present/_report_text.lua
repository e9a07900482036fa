-- tp.present._report_text: the text pieces Markdown and HTML share: headline lines, the basis,
-- the comparison, run and profile tables, as rows of plain strings.
local results = require('tp.analyse.results')
local compare = require('tp.analyse.compare')
local base = require('tp.present._report_base')

local g, fmt_p = base.g, base.fmt_p

local M = {}

local function ratio_text(h, level)
  local ci = h.ci and string.format('%d%% CI %.3f–%.3f', level, h.ci.lo, h.ci.hi)
    or 'no CI (fewer than 2 runs a side)'
  local p = h.p and string.format('Welch p %s%s', fmt_p(h.p),
    h.significant and '' or ', not significant') or 'no test'
  return string.format('%s, %s, %s vs %s runs', ci, p, g(h.n), g(h.n_baseline))
end

-- One line per headline ratio: "amd / nvd = 1.146x tokens/s/GPU (higher is better)".
function M.headline_lines(model)
  local out = {}
  for _, h in ipairs(model.verdict.headline) do
    out[#out + 1] = {
      main = string.format('%s / %s = %.3f× %s', tostring(h.group), tostring(h.baseline),
        h.ratio, h.label),
      detail = ratio_text(h, model.level) .. string.format(' (%s is better)', h.better),
      better = h.is_better,
    }
  end
  return out
end

function M.basis_rows(model)
  local b = model.compare.basis or {}
  local rows = {}
  rows[#rows + 1] = { 'Methodology', string.format('%s (audit: %s; %s)', tostring(b.methodology),
    tostring(model.audit.methodology), tostring(model.audit.methodology_source)) }
  rows[#rows + 1] = { 'Throughput', tostring(b.tokens) }
  local keys = {}
  for k in pairs(b.steady_state or {}) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    rows[#rows + 1] = { 'Steady-state window (' .. k .. ')', tostring(b.steady_state[k]) }
  end
  if b.flops then
    local per = {}
    local fk = {}
    for k in pairs(b.flops.flops_per_token or {}) do
      fk[#fk + 1] = k
    end
    table.sort(fk)
    for _, k in ipairs(fk) do
      per[#per + 1] = string.format('%s: %.4g FLOPs/token', k, b.flops.flops_per_token[k])
    end
    rows[#rows + 1] = { 'FLOPs convention', string.format('%s: %s%s%s', tostring(b.flops
      .convention), tostring(b.flops.formula), #per > 0 and ('; ' .. table.concat(per, '; '))
      or '', b.flops.note and ('; ' .. b.flops.note) or '') }
  end
  for _, section in ipairs({ { 'peak', 'Peak divisor' }, { 'energy', 'Energy basis' },
    { 'price', 'Price basis' } }) do
    local t = b[section[1]] or {}
    local ks = {}
    for k in pairs(t) do
      ks[#ks + 1] = k
    end
    table.sort(ks)
    for _, k in ipairs(ks) do
      rows[#rows + 1] = { section[2] .. ' (' .. k .. ')', tostring(t[k]) }
    end
  end
  if b.train_tokens then
    rows[#rows + 1] = { 'Time to train', string.format('%.4g tokens at the measured rate',
      b.train_tokens) }
  end
  rows[#rows + 1] = { 'Statistics', tostring(b.statistics) }
  return rows
end

-- Rows of the comparison table: {metric label, group, n, mean, sd, CI, ratio, ratio CI, p}.
function M.comparison_rows(model)
  local level = model.level
  local rows = {}
  for _, m in ipairs(model.compare.metrics) do
    local has = false
    for _, s in ipairs(m.groups) do
      if s.n > 0 then
        has = true
      end
    end
    if has then
      local spec = compare.METRICS[m.name] or {}
      local fmtspec = spec.fmt or '%.4g'
      local scale = m.scale or 1
      local function f(v)
        return v and string.format(fmtspec, v * scale) or '-'
      end
      local ratio_of = {}
      for _, r in ipairs(m.ratios) do
        ratio_of[r.group] = r
      end
      for k, s in ipairs(m.groups) do
        local r = ratio_of[s.value]
        local row = {
          metric = k == 1 and string.format('%s (%s, %s is better)', m.label, m.unit, m.better)
            or '',
          group = tostring(s.value), n = tostring(s.n), mean = f(s.mean),
          sd = s.stddev and f(s.stddev) or '-',
          ci = s.ci and string.format('%s – %s', f(s.ci.lo), f(s.ci.hi)) or '-',
          ratio = '', ratio_ci = '', p = '', better = nil,
        }
        if s.value == model.compare.baseline then
          row.ratio = s.n > 0 and 'baseline' or ''
        elseif r then
          row.ratio = string.format('%.3f', r.ratio)
          row.better = r.better
          row.ratio_ci = r.ci and string.format('%.3f – %.3f', r.ci.lo, r.ci.hi) or 'n/a'
          row.p = r.p and (fmt_p(r.p) .. (r.significant and ' *' or '')) or 'n/a'
        end
        rows[#rows + 1] = row
      end
    end
  end
  return rows, level
end

-- A run's MFU and energy per token as the comparison computes them (tp.efficiency).
local function run_mfu(r, model)
  return (model.efficiency[r.id] or {}).mfu
end

local function run_joules(r, model)
  return (model.efficiency[r.id] or {}).joules
end

local RUN_COLUMNS = {
  { 'run', 'id' }, { 'platform', 'platform' }, { 'framework', 'framework' },
  { 'model', 'model' }, { 'GPU', 'gpu' }, { 'GPUs', 'gpus' }, { 'GBS', 'gbs' },
  { 'seq', 'seq_len' }, { 'precision', 'precision' }, { 'steady from', 'steady_first_iteration' },
  { 'step time (s)', 'step_time', '%.4f' }, { 'tokens/s/GPU', 'tokens_per_s_per_gpu', '%.1f' },
  { 'MFU (%)', run_mfu, '%.2f', 100 }, { 'J/token', run_joules, '%.4g' },
  { 'memory (GiB)', 'memory_gib', '%.2f' }, { 'last iter', 'last_iteration' },
  { 'status', 'status' },
}

-- The runs that were profiled (their record's `profile` member, tp.profile): {run, tool,
-- steps, links = {{label, href}}}, hrefs relative to the report's directory (model.dir, set by
-- write) or absolute.
function M.profile_rows(model)
  local rows = {}
  local profile = require('tp.plan.profile')
  for _, r in ipairs(model.set:sort(model.by).runs) do
    local p = type(r.profile) == 'table' and r.profile or nil
    if p and type(p.tool) == 'string' then
      local s = type(p.steps) == 'table' and p.steps or {}
      local ok, path = pcall(r.file, r)
      rows[#rows + 1] = { run = tostring(r.id), tool = p.tool,
        steps = s[2] and string.format('%s-%s', g(s[1]), g(s[2])) or 'all',
        links = profile.links(p, ok and path or '.', model.dir) }
    end
  end
  return rows
end

function M.run_rows(model)
  local rows = {}
  local runs = model.set:sort(model.by).runs
  for _, r in ipairs(runs) do
    local row = {}
    for j, c in ipairs(RUN_COLUMNS) do
      local v
      if type(c[2]) == 'function' then
        v = c[2](r, model)
      else
        v = results.get(r, c[2])
      end
      if type(v) == 'number' and c[4] then
        v = v * c[4]
      end
      if type(v) == 'number' and math.type(v) == 'float' and v == math.floor(v) and not c[3]
        and math.abs(v) < 2 ^ 53 then
        v = math.tointeger(v)
      end
      row[j] = v == nil and '' or g(v, type(v) == 'number' and c[3] or nil)
    end
    rows[#rows + 1] = row
  end
  return rows
end

M.RUN_COLUMNS = RUN_COLUMNS

return M
