-- tp.present._report_base: what every part of tp.report shares: the public lists (group colours,
-- plots, headline metrics), number formatting, group colouring, the metric look-up and misuse.
local plot = require('tp.present.plot')

local M = {}

--- Colours of well-known group values; other values take tp.plot.PALETTE in order.
M.COLORS = { nvd = '#76b900', amd = '#ed1c24', cpu = '#7f7f7f' }

--- The plots a report draws, in order (file stems).
M.PLOTS = { 'throughput', 'step_time', 'loss', 'memory', 'mfu' }

--- Metrics the headline ratio is taken from: the first with a ratio wins.
M.HEADLINE_METRICS = { 'tokens_per_s_per_gpu', 'tokens_per_s', 'step_time', 'mfu' }

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function misuse(fname, fmt, ...)
  error(string.format('tp.report.%s: ', fname) .. string.format(fmt, ...), 3)
end

local function g(v, fmtspec)
  if v == nil then
    return '-'
  end
  if type(v) ~= 'number' then
    return tostring(v)
  end
  if not is_finite(v) then
    return tostring(v)
  end
  if fmtspec then
    return string.format(fmtspec, v)
  end
  if math.type(v) == 'integer' then
    return tostring(v)
  end
  return string.format('%.4g', v)
end

local function fmt_p(p)
  if p == nil then
    return 'n/a'
  end
  if p < 0.0001 then
    return '< 0.0001'
  end
  return string.format('%.4f', p)
end

local function plural(n, word)
  return string.format('%d %s%s', n, word, n == 1 and '' or 's')
end

local function group_colors(order)
  local colors, k = {}, 0
  for _, v in ipairs(order) do
    local known = M.COLORS[tostring(v)]
    if known then
      colors[v] = known
    else
      k = k + 1
      colors[v] = plot.PALETTE[(k - 1) % #plot.PALETTE + 1]
    end
  end
  return colors
end

local function metric_entry(cmp, name)
  for _, m in ipairs(cmp and cmp.metrics or {}) do
    if m.name == name then
      return m
    end
  end
  return nil
end

M.is_finite = is_finite
M.misuse = misuse
M.g = g
M.fmt_p = fmt_p
M.plural = plural
M.group_colors = group_colors
M.metric_entry = metric_entry

return M
