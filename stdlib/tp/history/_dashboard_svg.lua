-- tp.history._dashboard_svg: one time-series chart of the dashboard as inline SVG text: axes with
-- round ticks (values) and dates, one line per series with a circle per run (data-s, data-i
-- name the series and the run for the page's script), a vertical marker at each change point
-- labelled with its size, and one at each note. No script and no external reference.
local M = {}

local W, H = 960, 340
local LEFT, RIGHT, TOP, BOTTOM = 72, 20, 34, 40
local DAY = 86400

--- HTML/XML text with &, <, >, " and ' escaped.
---@param s any
---@return string
function M.escape(s)
  return (tostring(s):gsub('[&<>"\']', { ['&'] = '&amp;', ['<'] = '&lt;', ['>'] = '&gt;',
    ['"'] = '&quot;', ["'"] = '&#39;' }))
end
local esc = M.escape

-- Round tick values covering [lo, hi], about `count` of them (1, 2, 2.5, 5 x 10^k steps).
local function nice_ticks(lo, hi, count)
  if hi <= lo then
    local pad = math.abs(lo) * 0.01 + 1e-9
    lo, hi = lo - pad, hi + pad
  end
  local raw = (hi - lo) / count
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step = mag
  for _, m in ipairs({ 1, 2, 2.5, 5, 10 }) do
    if raw <= m * mag then
      step = m * mag
      break
    end
  end
  local first = math.floor(lo / step) * step
  local last = math.ceil(hi / step) * step
  local ticks = {}
  for i = 0, math.floor((last - first) / step + 0.5) do
    ticks[#ticks + 1] = first + i * step
  end
  return ticks, first, last, step
end
M.nice_ticks = nice_ticks

local function fmt_tick(v, step)
  if step >= 1 then
    return string.format('%.0f', v)
  end
  local digits = math.max(0, math.ceil(-math.log(step, 10)))
  return string.format('%.' .. digits .. 'f', v)
end

-- Date ticks: whole days at a step of 1, 2, 7, 14, 28, 56... days, at most about 9.
local function date_ticks(t0, t1)
  local days = math.max(1, (t1 - t0) / DAY)
  local step = 1
  for _, s in ipairs({ 1, 2, 7, 14, 28, 56, 91, 182, 364 }) do
    step = s
    if days / s <= 9 then
      break
    end
  end
  local ticks = {}
  local t = math.ceil(t0 / DAY) * DAY
  while t <= t1 do
    ticks[#ticks + 1] = t
    t = t + step * DAY
  end
  return ticks
end

local function num(x)
  return string.format('%.1f', x)
end

--- Draws a chart. `chart` = {id, title, series = {{label, colour, points = {{t, v}...},
--- changes = {{t_before, t_after, text, title, kind}...}}...}, notes = {{t, text}...}}.
--- Returns the SVG element's text.
---@param chart table
---@return string
function M.chart(chart)
  local t0, t1, v0, v1 = math.huge, -math.huge, math.huge, -math.huge
  for _, s in ipairs(chart.series) do
    for _, p in ipairs(s.points) do
      t0, t1 = math.min(t0, p[1]), math.max(t1, p[1])
      v0, v1 = math.min(v0, p[2]), math.max(v1, p[2])
    end
  end
  local out = {}
  local function add(fmt, ...)
    out[#out + 1] = string.format(fmt, ...)
  end
  add('<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="%s" viewBox="0 0 %d %d" '
    .. 'width="%d" height="%d" role="img" aria-label="%s">', esc(chart.id), W, H, W, H,
    esc(chart.title))
  add('<rect class="plot" x="%d" y="%d" width="%d" height="%d"/>', LEFT, TOP, W - LEFT - RIGHT,
    H - TOP - BOTTOM)
  if t0 > t1 then
    add('<text class="empty" x="%d" y="%d">no runs</text></svg>', W // 2, H // 2)
    return table.concat(out, '\n')
  end
  if t1 - t0 < DAY then
    t0, t1 = t0 - DAY / 2, t1 + DAY / 2
  else
    local pad = (t1 - t0) * 0.02
    t0, t1 = t0 - pad, t1 + pad
  end
  local ticks, lo, hi, step = nice_ticks(v0, v1, 5)
  local function x(t)
    return LEFT + (t - t0) / (t1 - t0) * (W - LEFT - RIGHT)
  end
  local function y(v)
    return H - BOTTOM - (v - lo) / (hi - lo) * (H - TOP - BOTTOM)
  end
  for _, v in ipairs(ticks) do
    add('<line class="grid" x1="%d" x2="%d" y1="%s" y2="%s"/>', LEFT, W - RIGHT, num(y(v)),
      num(y(v)))
    add('<text class="ytick" x="%d" y="%s">%s</text>', LEFT - 6, num(y(v) + 4),
      fmt_tick(v, step))
  end
  for _, t in ipairs(date_ticks(t0, t1)) do
    add('<line class="xgrid" x1="%s" x2="%s" y1="%d" y2="%d"/>', num(x(t)), num(x(t)), TOP,
      H - BOTTOM)
    add('<text class="xtick" x="%s" y="%d">%s</text>', num(x(t)), H - BOTTOM + 16,
      os.date('!%Y-%m-%d', t))
  end
  add('<text class="ylabel" x="14" y="%d" transform="rotate(-90 14 %d)">%s</text>',
    (TOP + H - BOTTOM) // 2, (TOP + H - BOTTOM) // 2, esc(chart.ylabel or ''))
  for _, n in ipairs(chart.notes or {}) do
    if n.t >= t0 and n.t <= t1 then
      add('<g class="note"><title>%s</title><line x1="%s" x2="%s" y1="%d" y2="%d"/>'
        .. '<text x="%s" y="%d">note</text></g>', esc(n.text), num(x(n.t)), num(x(n.t)), TOP,
        H - BOTTOM, num(x(n.t) + 3), H - BOTTOM - 4)
    end
  end
  for _, s in ipairs(chart.series) do
    for _, c in ipairs(s.changes or {}) do
      local cx = (x(c.t_before) + x(c.t_after)) / 2
      add('<g class="change %s"><title>%s</title><line x1="%s" x2="%s" y1="%d" y2="%d" '
        .. 'stroke="%s"/><text x="%s" y="%d" fill="%s">%s</text></g>', esc(c.kind or 'change'),
        esc(c.title), num(cx), num(cx), TOP - 4, H - BOTTOM, esc(s.colour), num(cx + 3), TOP - 8,
        esc(s.colour), esc(c.text))
    end
  end
  for si, s in ipairs(chart.series) do
    local pts = {}
    for _, p in ipairs(s.points) do
      pts[#pts + 1] = num(x(p[1])) .. ',' .. num(y(p[2]))
    end
    add('<polyline class="line" points="%s" stroke="%s"/>', table.concat(pts, ' '),
      esc(s.colour))
    local dots = {}
    for i, p in ipairs(s.points) do
      local sidx = s.index or si
      dots[#dots + 1] = string.format('<circle class="run" id="run-%d-%d" cx="%s" cy="%s" '
        .. 'r="3.5" fill="%s" data-s="%d" data-i="%d" tabindex="0"/>', sidx, i, num(x(p[1])),
        num(y(p[2])), esc(s.colour), sidx, i)
    end
    add('<g class="runs">%s</g>', table.concat(dots))
  end
  add('</svg>')
  return table.concat(out, '\n')
end

return M
