-- tp.plot: charts drawn by gnuplot, driven through tp.proc by argv (never a shell string). A chart
-- is a plain table (bars with confidence whiskers, line curves, box plots); the gnuplot script is
-- generated here with the data inline as datablocks, written next to the output, run, and the
-- output replaced atomically. Terminals: pngcairo (or png), svg, dumb (text, for the REPL).
--
-- gnuplot facts used below come from the gnuplot 5.4 manual
-- (gnuplot.info/docs_5.4/Gnuplot_5_4.pdf): "Datablocks" ($name << EOD ... EOD, 5.0+), the
-- "boxplot", "boxes" and "yerrorbars" plotting styles, "set terminal" pngcairo/png/svg/dumb
-- options (size, noenhanced, font, background), GPVAL_TERMINALS, and strings: single-quoted
-- strings take no backslash escapes, a doubled '' is a quote, and neither macro (@name) nor
-- backquote command substitution happens inside quotes.
local proc = require('tp.proc')
local fs = require('tp.fs')

local M = {}

--- Default sizes: pixels for png and svg, characters for dumb.
M.DEFAULT_SIZE = { png = { 900, 500 }, svg = { 900, 500 }, dumb = { 100, 30 } }
--- Seconds gnuplot may run before it is killed.
M.DEFAULT_TIMEOUT = 60
--- Points per line series above which a curve is decimated (min and max of each bucket kept).
M.MAX_POINTS = 2000
--- Samples per box above which box plots leave out the outlier dots (unless chart.outliers).
M.MAX_OUTLIER_SAMPLES = 5000
--- Characters of a category label on graphic terminals (longer ones keep their end: '..-r1').
M.MAX_LABEL = 26

--- The palette used when a series names no colour.
M.PALETTE = { '#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
  '#7f7f7f', '#bcbd22', '#17becf' }

local KINDS = { bars = true, lines = true, boxes = true }
local FORMATS = { png = true, svg = true, dumb = true }

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function misuse(level, fmt, ...)
  error('tp.plot: ' .. string.format(fmt, ...), level + 1)
end

-- ---------------------------------------------------------------------------------------------
-- gnuplot itself.

local cache = {}

--- Returns the gnuplot found in PATH: {version = '5.4 patchlevel 4'}, or nil, message, 'ENOENT'
--- when there is none (or it does not run).
---@return table|nil info, string? err, string? code
function M.available()
  if cache.info ~= nil then
    if cache.info == false then
      return nil, cache.err, cache.code
    end
    return cache.info
  end
  local r, err, code = proc.run({ 'gnuplot', '--version' }, { timeout = 20 })
  if not r then
    cache.info, cache.err, cache.code = false, 'gnuplot: ' .. tostring(err) ..
      ' (install gnuplot-nox)', code == 'ENOENT' and 'ENOENT' or (code or 'EIO')
    return nil, cache.err, cache.code
  end
  if r.code ~= 0 then
    cache.info, cache.err, cache.code = false, string.format('gnuplot --version exited with ' ..
      'status %d: %s', r.code, (r.stderr or ''):gsub('%s+$', '')), 'EIO'
    return nil, cache.err, cache.code
  end
  cache.info = { version = (r.stdout:match('gnuplot%s+(.-)%s*$')) or r.stdout }
  return cache.info
end

--- Returns the set of terminals this gnuplot has ({pngcairo = true, svg = true, ...}), read from
--- its GPVAL_TERMINALS variable (`set terminal` pages its list and waits for a key); nil,
--- message, code without gnuplot.
---@return table<string, boolean>|nil terminals, string? err, string? code
function M.terminals()
  if cache.terminals then
    return cache.terminals
  end
  local ok, err, code = M.available()
  if not ok then
    return nil, err, code
  end
  local r, rerr, rcode = proc.run({ 'gnuplot', '-e', 'print GPVAL_TERMINALS' }, { timeout = 20 })
  if not r then
    return nil, 'gnuplot: ' .. tostring(rerr), rcode
  end
  if r.code ~= 0 then
    return nil, 'gnuplot: cannot list its terminals: ' .. (r.stderr or ''):gsub('%s+$', ''), 'EIO'
  end
  -- `print` writes to stderr: " cairolatex canvas ... xterm".
  local set = {}
  for name in ((r.stderr or '') .. ' ' .. (r.stdout or '')):gmatch('[%w_]+') do
    set[name] = true
  end
  cache.terminals = set
  return set
end

-- The terminal line for a format; nil, message when this gnuplot has none for it.
local function terminal_line(format, w, h)
  local terms, err, code = M.terminals()
  if not terms then
    return nil, err, code
  end
  if format == 'png' then
    if terms.pngcairo then
      return string.format("set terminal pngcairo size %d,%d noenhanced font 'Sans,10' " ..
        "background rgb '#ffffff'", w, h), 'pngcairo'
    elseif terms.png then
      return string.format("set terminal png size %d,%d noenhanced background '#ffffff'", w, h),
        'png'
    end
    return nil, 'gnuplot has neither the pngcairo nor the png terminal', 'ENOTSUP'
  elseif format == 'svg' then
    if terms.svg then
      return string.format("set terminal svg size %d,%d noenhanced font 'Sans,11' " ..
        "background rgb '#ffffff'", w, h), 'svg'
    end
    return nil, 'gnuplot has no svg terminal', 'ENOTSUP'
  end
  if terms.dumb then
    return string.format('set terminal dumb size %d,%d noenhanced', w, h), 'dumb'
  end
  return nil, 'gnuplot has no dumb terminal', 'ENOTSUP'
end

-- ---------------------------------------------------------------------------------------------
-- Script text.

--- Quotes `s` as a gnuplot single-quoted string: control characters become spaces, a quote is
--- doubled, and the text is cut at `max` bytes (default 200).
---@param s any
---@param max? integer
---@return string
function M.quote(s, max)
  s = tostring(s):gsub('%c', ' ')
  max = max or 200
  if #s > max then
    s = s:sub(1, max - 3) .. '...'
  end
  return "'" .. s:gsub("'", "''") .. "'"
end

local quote = M.quote

local function num(v)
  if math.type(v) == 'integer' then
    return tostring(v)
  end
  return string.format('%.10g', v)
end

local function color_of(c, i)
  if type(c) == 'string' and c:match('^#%x%x%x%x%x%x$') then
    return c
  end
  return M.PALETTE[(i - 1) % #M.PALETTE + 1]
end

-- Keeps at most `max` points of a curve: the first and last, and the lowest and highest y of
-- each bucket in between, in x order.
local function decimate(xs, ys, max)
  local n = #xs
  if n <= max then
    return xs, ys
  end
  local ox, oy = { xs[1] }, { ys[1] }
  local buckets = math.max(1, (max - 2) // 2)
  local size = (n - 2) / buckets
  for b = 0, buckets - 1 do
    local from = 2 + math.floor(b * size)
    local to = math.min(n - 1, 1 + math.floor((b + 1) * size))
    local lo, hi = from, from
    for i = from, to do
      if ys[i] < ys[lo] then
        lo = i
      end
      if ys[i] > ys[hi] then
        hi = i
      end
    end
    local a, c = math.min(lo, hi), math.max(lo, hi)
    ox[#ox + 1], oy[#oy + 1] = xs[a], ys[a]
    if c ~= a then
      ox[#ox + 1], oy[#oy + 1] = xs[c], ys[c]
    end
  end
  ox[#ox + 1], oy[#oy + 1] = xs[n], ys[n]
  return ox, oy
end

local function check_string(v, what, level, optional)
  if v == nil and optional then
    return
  end
  if type(v) ~= 'string' then
    misuse(level + 1, '%s must be a string, got %s', what, type(v))
  end
end

local function check_numbers(v, what, level)
  if type(v) ~= 'table' then
    misuse(level + 1, '%s must be a list of numbers, got %s', what, type(v))
  end
  for i = 1, #v do
    if type(v[i]) ~= 'number' then
      misuse(level + 1, '%s[%d] must be a number, got %s', what, i, type(v[i]))
    end
  end
end

-- The series of a chart, in order, each checked to be a table with an optional string title:
-- `for s, w in each_series(chart, level)`, w naming it in messages ('chart.series[i]').
local function each_series(chart, level)
  if type(chart.series) ~= 'table' then
    misuse(level + 1, 'chart.series must be a list')
  end
  local i = 0
  return function()
    i = i + 1
    local s = chart.series[i]
    if s == nil then
      return nil
    end
    local w = 'chart.series[' .. i .. ']'
    if type(s) ~= 'table' then
      misuse(level + 1, '%s must be a table', w)
    end
    check_string(s.title, w .. '.title', level + 1, true)
    return s, w
  end
end

-- Raises on a malformed chart (misuse); returns nothing.
local function validate(chart, level)
  if type(chart) ~= 'table' then
    misuse(level + 1, 'chart must be a table, got %s', type(chart))
  end
  if not KINDS[chart.kind] then
    misuse(level + 1, "chart.kind must be 'bars', 'lines' or 'boxes', got %s",
      tostring(chart.kind))
  end
  for _, k in ipairs({ 'title', 'xlabel', 'ylabel', 'yformat' }) do
    check_string(chart[k], 'chart.' .. k, level + 1, true)
  end
  if chart.kind == 'bars' then
    if type(chart.categories) ~= 'table' then
      misuse(level + 1, 'chart.categories must be a list of labels')
    end
    for s, w in each_series(chart, level + 1) do
      check_numbers(s.values or {}, w .. '.values', level + 1)
      for _, k in ipairs({ 'lo', 'hi' }) do
        if s[k] ~= nil then
          check_numbers(s[k], w .. '.' .. k, level + 1)
        end
      end
      if s.points ~= nil and type(s.points) ~= 'table' then
        misuse(level + 1, '%s.points must be a list of lists of numbers', w)
      end
    end
  elseif chart.kind == 'lines' then
    for s, w in each_series(chart, level + 1) do
      check_numbers(s.x, w .. '.x', level + 1)
      check_numbers(s.y, w .. '.y', level + 1)
      if #s.x ~= #s.y then
        misuse(level + 1, '%s has %d x and %d y values', w, #s.x, #s.y)
      end
    end
  else
    if type(chart.categories) ~= 'table' then
      misuse(level + 1, 'chart.categories must be a list of {label=, samples=}')
    end
    for i, c in ipairs(chart.categories) do
      local w = 'chart.categories[' .. i .. ']'
      if type(c) ~= 'table' then
        misuse(level + 1, '%s must be a table', w)
      end
      check_string(c.label, w .. '.label', level + 1)
      check_numbers(c.samples, w .. '.samples', level + 1)
    end
  end
end

local function datablock(lines, name, rows)
  lines[#lines + 1] = '$' .. name .. ' << EOD'
  for _, r in ipairs(rows) do
    lines[#lines + 1] = r
  end
  lines[#lines + 1] = 'EOD'
end

local function common_head(lines, chart, dumb)
  if chart.title then
    lines[#lines + 1] = 'set title ' .. quote(chart.title) .. ' font ",12"'
  end
  if chart.xlabel then
    lines[#lines + 1] = 'set xlabel ' .. quote(chart.xlabel)
  end
  if chart.ylabel then
    lines[#lines + 1] = 'set ylabel ' .. quote(chart.ylabel)
  end
  if chart.yformat then
    lines[#lines + 1] = 'set format y ' .. quote(chart.yformat, 40)
  end
  lines[#lines + 1] = 'set border 3 lc rgb "#555555"'
  lines[#lines + 1] = 'set tics nomirror'
  if not dumb then  -- dumb draws a grid as rows of dots
    lines[#lines + 1] = 'set grid ytics lc rgb "#dddddd" lw 1 dt 1'
  end
  lines[#lines + 1] = 'set style fill solid 0.85 border -1'
end

-- On a text terminal the tick labels sit side by side on one line: cut each to the room it has,
-- keeping its end (run ids differ in their last characters: "...-r1", "...-r2").
-- On graphic terminals labels are slanted; beyond MAX_LABEL characters gnuplot cannot make room
-- for them ("difficulty making room for xtic labels"), so they are cut the same way.
local function fit_labels(labels, text_width)
  local room = M.MAX_LABEL
  if text_width then
    room = math.max(4, (text_width - 14) // math.max(#labels, 1) - 1)
  end
  local out = {}
  for i, l in ipairs(labels) do
    out[i] = #l > room and ('..' .. l:sub(-(room - 2))) or l
  end
  return out
end

local function xtics(cats)
  local parts = {}
  for i, label in ipairs(cats) do
    parts[i] = quote(label, 40) .. ' ' .. i
  end
  return 'set xtics (' .. table.concat(parts, ', ') .. ')'
end

-- Stacked bars (chart.stacked): one bar per category, the series on top of each other. Drawn
-- as bars of the running sums, the tallest first so that each lower part is drawn over it; the
-- key then lists the series top down, as they are stacked. No whiskers or dots.
local function stacked_series(chart)
  local out, sums = {}, {}
  for _, s in ipairs(chart.series) do
    local values = {}
    for i = 1, #chart.categories do
      local v = s.values and s.values[i]
      if is_finite(v) then
        sums[i] = (sums[i] or 0) + v
        values[i] = sums[i]
      end
    end
    table.insert(out, 1, { title = s.title, color = s.color, colors = s.colors, values = values })
  end
  return out
end

-- Bars: one cluster per category, one bar per series, optional CI whiskers (lo, hi) and the
-- individual values as dots (points); or stacked (stacked_series).
local function bars_script(chart, lines, text_width)
  local cats = chart.categories
  local series = chart.stacked and stacked_series(chart) or chart.series
  local ns = #series
  local width = chart.stacked and 0.6 or 0.8 / math.max(ns, 1)
  local plots, any = {}, false
  local ymax = 0
  for j, s in ipairs(series) do
    local off = chart.stacked and 0 or (j - (ns + 1) / 2) * width
    local bar_rows, err_rows, pt_rows = {}, {}, {}
    for i = 1, #cats do
      local v = s.values and s.values[i]
      local x = i + off
      if is_finite(v) then
        bar_rows[#bar_rows + 1] = num(x) .. ' ' .. num(v)
        ymax = math.max(ymax, v)
        local lo, hi = s.lo and s.lo[i], s.hi and s.hi[i]
        if is_finite(lo) and is_finite(hi) then
          err_rows[#err_rows + 1] = string.format('%s %s %s %s', num(x), num(v), num(lo), num(hi))
          ymax = math.max(ymax, hi)
        end
      end
      local pts = s.points and s.points[i]
      if type(pts) == 'table' then
        for _, p in ipairs(pts) do
          if is_finite(p) then
            pt_rows[#pt_rows + 1] = num(x) .. ' ' .. num(p)
            ymax = math.max(ymax, p)
          end
        end
      end
    end
    if #bar_rows > 0 then
      any = true
      -- One clause per colour: a series may colour each category (s.colors) or be uniform.
      local by_color, colors = {}, {}
      for i = 1, #cats do
        local v = s.values and s.values[i]
        if is_finite(v) then
          local c = color_of(s.colors and s.colors[i] or s.color, j)
          if not by_color[c] then
            by_color[c] = {}
            colors[#colors + 1] = c
          end
          table.insert(by_color[c], num(i + off) .. ' ' .. num(v))
        end
      end
      for k, c in ipairs(colors) do
        local name = 'bar' .. j .. '_' .. k
        datablock(lines, name, by_color[c])
        plots[#plots + 1] = string.format('$%s using 1:2 with boxes lc rgb %s %s', name,
          quote(c), k == 1 and s.title and ns > 1 and ('title ' .. quote(s.title, 60))
          or 'notitle')
      end
    end
    if #err_rows > 0 then
      local name = 'err' .. j
      datablock(lines, name, err_rows)
      plots[#plots + 1] = string.format('$%s using 1:2:3:4 with yerrorbars lc rgb "#222222" ' ..
        'lw 1.5 pt 0 notitle', name)
    end
    if #pt_rows > 0 then
      local name = 'pts' .. j
      datablock(lines, name, pt_rows)
      plots[#plots + 1] = string.format('$%s using 1:2 with points pt 7 ps 0.5 ' ..
        'lc rgb "#333333" notitle', name)
    end
  end
  if not any then
    return nil
  end
  lines[#lines + 1] = string.format('set xrange [0.4:%s]', num(#cats + 0.6))
  lines[#lines + 1] = string.format('set yrange [0:%s]', num(ymax > 0 and ymax * 1.12 or 1))
  lines[#lines + 1] = xtics(fit_labels(cats, text_width))
  lines[#lines + 1] = string.format('set boxwidth %s absolute', num(width * 0.9))
  lines[#lines + 1] = ns > 1 and (chart.stacked and 'set key outside right top vertical'
    or 'set key top left horizontal') or 'unset key'
  lines[#lines + 1] = 'plot ' .. table.concat(plots, ', \\\n  ')
  return true
end

local function lines_script(chart, lines)
  local plots = {}
  local max = chart.max_points or M.MAX_POINTS
  for j, s in ipairs(chart.series) do
    local xs, ys = {}, {}
    for i = 1, #s.x do
      if is_finite(s.x[i]) and is_finite(s.y[i]) then
        xs[#xs + 1], ys[#ys + 1] = s.x[i], s.y[i]
      end
    end
    xs, ys = decimate(xs, ys, max)
    if #xs > 0 then
      local rows = {}
      for i = 1, #xs do
        rows[i] = num(xs[i]) .. ' ' .. num(ys[i])
      end
      local name = 'line' .. j
      datablock(lines, name, rows)
      local dash = math.tointeger(s.dash) or 1
      local style = s.style == 'points' and string.format('points pt 7 ps %s', num(s.width or 1))
        or string.format('lines lw %s dt %d', num(s.width or 1.5), math.max(1, math.min(dash, 5)))
      plots[#plots + 1] = string.format('$%s using 1:2 with %s lc rgb %s %s', name, style,
        quote(color_of(s.color, j)), s.title and ('title ' .. quote(s.title, 60)) or 'notitle')
    end
  end
  if #plots == 0 then
    return nil
  end
  lines[#lines + 1] = 'set key outside below center horizontal Left reverse'
  for _, axis in ipairs({ 'x', 'y' }) do
    if chart[axis .. 'log'] then
      lines[#lines + 1] = 'set logscale ' .. axis
    end
  end
  lines[#lines + 1] = 'plot ' .. table.concat(plots, ', \\\n  ')
  return true
end

local function boxes_script(chart, lines, text_width)
  local plots, labels, legend = {}, {}, {}
  local k = 0
  for j, c in ipairs(chart.categories) do
    local rows = {}
    for _, v in ipairs(c.samples) do
      if is_finite(v) then
        rows[#rows + 1] = num(v)
      end
    end
    if #rows > 0 then
      k = k + 1
      labels[k] = c.label
      local name = 'box' .. j
      datablock(lines, name, rows)
      local title = 'notitle'
      if c.legend and not legend[c.legend] then
        legend[c.legend] = true
        title = 'title ' .. quote(c.legend, 60)
      end
      plots[#plots + 1] = string.format('$%s using (%d):1 with boxplot lc rgb %s %s', name, k,
        quote(color_of(c.color, j)), title)
    end
  end
  if k == 0 then
    return nil
  end
  -- Outliers are drawn one by one: beyond a few thousand samples a box they would swamp the
  -- output (an SVG of tens of thousands of dots), so large sets hide them unless asked.
  local outliers = chart.outliers
  if outliers == nil then
    outliers = true
    for _, c in ipairs(chart.categories) do
      if #c.samples > M.MAX_OUTLIER_SAMPLES then
        outliers = false
      end
    end
  end
  lines[#lines + 1] = outliers and 'set style boxplot outliers pointtype 7 fraction 0.95'
    or 'set style boxplot nooutliers fraction 0.95'
  lines[#lines + 1] = 'set boxwidth 0.5 absolute'
  lines[#lines + 1] = string.format('set xrange [0.4:%s]', num(k + 0.6))
  labels = fit_labels(labels, text_width)
  lines[#lines + 1] = xtics(labels)
  -- Slant the labels when they would not fit side by side (about 1/70 of the width a char).
  local longest = 0
  for _, l in ipairs(labels) do
    longest = math.max(longest, #l)
  end
  if not text_width and k * (longest + 2) > 70 then
    lines[#lines + 1] = 'set xtics rotate by -20 left'
    lines[#lines + 1] = 'set rmargin 16'
  end
  lines[#lines + 1] = next(legend) and 'set key top right' or 'unset key'
  lines[#lines + 1] = 'plot ' .. table.concat(plots, ', \\\n  ')
  return true
end

--- Returns the gnuplot script for `chart` on a terminal (`term`: the full `set terminal` line)
--- writing to `output` (a file name, nil for standard output), or nil when the chart has no
--- finite value to draw. Charts:
--- `{kind = 'bars', categories = {label...}, series = {{title=, color=, values=, lo=, hi=,
--- points = {{v...}...}}}, stacked = false}` (stacked: one bar per category, the series on top
--- of each other, no whiskers or dots), `{kind = 'lines', series = {{title=, color=, dash=, x=,
--- y=, style = 'lines'|'points'}}, xlog =, ylog =}`, `{kind = 'boxes', categories = {{label=,
--- samples=, color=, legend=}}}`; all take `title`, `xlabel`, `ylabel`, `yformat`.
---@param chart table
---@param term string
---@param output? string
---@return string|nil script
function M.script(chart, term, output)
  validate(chart, 2)
  check_string(term, 'term', 2)
  check_string(output, 'output', 2, true)
  local lines = { '# generated by tplua (tp.plot)', term }
  if output then
    lines[#lines + 1] = 'set output ' .. quote(output, 4096)
  end
  lines[#lines + 1] = 'set encoding utf8'
  local dumb = term:match('^set terminal dumb') ~= nil
  local text_width = dumb and tonumber(term:match('size (%d+)')) or nil
  common_head(lines, chart, dumb)
  local ok
  if chart.kind == 'bars' then
    ok = bars_script(chart, lines, text_width)
  elseif chart.kind == 'lines' then
    ok = lines_script(chart, lines)
  else
    ok = boxes_script(chart, lines, text_width)
  end
  if not ok then
    return nil
  end
  if output then
    lines[#lines + 1] = 'unset output'
  end
  return table.concat(lines, '\n') .. '\n'
end

-- ---------------------------------------------------------------------------------------------
-- Running gnuplot.

local function try_remove(path)
  if path then
    os.remove(path)
  end
end

local seq = 0

-- A fresh hidden name in `dir` for this process: ".tplua-plot-<time>-<n>-<rand>".
local function temp_base(dir, stem)
  seq = seq + 1
  for _ = 1, 100 do
    local name = string.format('.tplua-plot-%s-%d-%d-%06d', stem, os.time(), seq,
      math.random(0, 999999))
    if not fs.exists(fs.join(dir, name .. '.gp')) then
      return name
    end
    seq = seq + 1
  end
  return nil
end

-- Turns gnuplot's stderr into a message naming the script line, e.g.
-- '"x.gp" line 12: undefined variable: foo' -> 'line 12 (plot $d ...): undefined variable: foo'.
local function explain(stderr, script, script_name)
  local lines = {}
  for l in (script .. '\n'):gmatch('([^\n]*)\n') do
    lines[#lines + 1] = l
  end
  local msg
  for l in stderr:gmatch('[^\n]+') do
    local name, n, text = l:match('^"(.-)" line (%d+): (.*)$')
    if name and (name == script_name or name:sub(-#script_name) == script_name) then
      -- gnuplot counts the last physical line of a command continued with '\'; name the
      -- line the command starts on.
      local last = tonumber(n)
      local first = last
      while first > 1 and (lines[first - 1] or ''):sub(-1) == '\\' do
        first = first - 1
      end
      local src = (lines[first] or ''):gsub('%s*\\$', '')
      if #src > 120 then
        src = src:sub(1, 117) .. '...'
      end
      msg = string.format('script line %s (%s): %s', first == last and n or
        (first .. '-' .. last), src, text)
    end
  end
  if msg then
    return msg
  end
  local s = stderr:gsub('%s+$', ''):gsub('^%s+', '')
  if #s > 400 then
    s = s:sub(1, 397) .. '...'
  end
  return s ~= '' and s or 'no message'
end

local function warnings_of(stderr)
  local out = {}
  for l in stderr:gmatch('[^\n]+') do
    local w = l:match('[Ww]arning:%s*(.*)$')
    if w then
      out[#out + 1] = w
    end
  end
  return out
end

---@class tp.plot.RenderOpts
---@field format 'png'|'svg'|'dumb' output kind
---@field path? string output file (png, svg: required); its directory holds the temp files
---@field width? integer pixels (png, svg; default 900) or characters (dumb; default 100)
---@field height? integer pixels (default 500) or lines (dumb; default 30)
---@field timeout? number seconds gnuplot may run (default 60)
---@field keep_script? boolean keep the generated script as <path>.gp (default false)

--- Draws `chart` (see `script`) with gnuplot. png and svg go to `opts.path`, replaced
--- atomically (gnuplot writes a hidden temp file in the same directory, which is then renamed);
--- dumb returns the text. The script (with its data inline) is written as a hidden temp file in
--- the output directory (dumb: in the system temp directory) and removed afterwards. Fails
--- with nil, message, code: 'ENOENT' without gnuplot, 'ENODATA' when the chart has nothing
--- finite to draw, 'EPLOT' when gnuplot fails (the message names the script line), 'EIO'.
---```lua
---local r = assert(tp.plot.render({ kind = 'lines', title = 'loss',
---  series = { { title = 'run 1', x = { 1, 2, 3 }, y = { 11.2, 9.8, 8.1 } } } },
---  { format = 'svg', path = 'out/loss.svg' }))
---print(tp.plot.render(chart, { format = 'dumb' }).text)
---```
---@param chart table
---@param opts tp.plot.RenderOpts
---@return table|nil result {format, terminal, path?, bytes?, text?, warnings}
---@return string? err
---@return string? code
function M.render(chart, opts)
  validate(chart, 2)
  if type(opts) ~= 'table' then
    misuse(2, 'options must be a table with a format, got %s', type(opts))
  end
  local known = { format = true, path = true, width = true, height = true, timeout = true,
    keep_script = true }
  for k in pairs(opts) do
    if not known[k] then
      misuse(2, "unknown option '%s'", tostring(k))
    end
  end
  local format = opts.format
  if not FORMATS[format] then
    misuse(2, "option format must be 'png', 'svg' or 'dumb', got %s", tostring(format))
  end
  if format ~= 'dumb' and type(opts.path) ~= 'string' then
    misuse(2, 'option path (the output file) is required for %s', format)
  end
  for _, k in ipairs({ 'width', 'height' }) do
    local v = opts[k]
    if v ~= nil and (math.type(v) ~= 'integer' or v < 10 or v > 20000) then
      misuse(2, 'option %s must be an integer in [10, 20000], got %s', k, tostring(v))
    end
  end
  if opts.timeout ~= nil and (type(opts.timeout) ~= 'number' or opts.timeout <= 0) then
    misuse(2, 'option timeout must be a positive number of seconds')
  end
  local size = M.DEFAULT_SIZE[format]
  local w, h = opts.width or size[1], opts.height or size[2]
  local term, tname, tcode = terminal_line(format, w, h)
  if not term then
    return nil, tname, tcode
  end
  local label = chart.title or chart.kind

  local dir, out_name, tmp_out, gp_path, gp_name
  if format == 'dumb' then
    gp_path = os.tmpname()
    dir, gp_name = fs.dirname(gp_path), fs.basename(gp_path)
  else
    dir, out_name = fs.dirname(opts.path), fs.basename(opts.path)
    if not fs.is_dir(dir) then
      return nil, string.format('plot: %s: the directory %s does not exist', opts.path, dir),
        'ENOENT'
    end
    local base = temp_base(dir, (out_name:gsub('[^%w_-]', '_')):sub(1, 40))
    if not base then
      return nil, 'plot: ' .. dir .. ': cannot find a free temporary name', 'EIO'
    end
    gp_name = base .. '.gp'
    gp_path = fs.join(dir, gp_name)
    tmp_out = base .. '.' .. format
  end
  local script = M.script(chart, term, tmp_out)
  if not script then
    try_remove(format == 'dumb' and gp_path or nil)
    return nil, string.format('plot: %s: no data to plot', label), 'ENODATA'
  end
  local f, oerr = io.open(gp_path, 'wb')
  if not f then
    return nil, 'plot: ' .. tostring(oerr), 'EIO'
  end
  local okw, werr = f:write(script)
  f:close()
  if not okw then
    try_remove(gp_path)
    return nil, string.format('plot: %s: %s', gp_path, tostring(werr)), 'EIO'
  end
  local r, rerr, rcode = proc.run({ 'gnuplot', gp_name }, { cwd = dir,
    timeout = opts.timeout or M.DEFAULT_TIMEOUT })
  local tmp_path = tmp_out and fs.join(dir, tmp_out)
  local function cleanup()
    try_remove(tmp_path)
    if opts.keep_script and format ~= 'dumb' then
      os.rename(gp_path, opts.path .. '.gp')
    else
      try_remove(gp_path)
    end
  end
  if not r then
    cleanup()
    return nil, 'gnuplot: ' .. tostring(rerr) .. ' (install gnuplot-nox)', rcode
  end
  if r.timed_out then
    cleanup()
    return nil, string.format('plot: %s: gnuplot did not finish within %s s', label,
      tostring(opts.timeout or M.DEFAULT_TIMEOUT)), 'ETIMEDOUT'
  end
  if r.code ~= 0 then
    local msg = explain(r.stderr or '', script, gp_name)
    cleanup()
    return nil, string.format('plot: %s: gnuplot failed at %s', label, msg), 'EPLOT'
  end
  local res = { format = format, terminal = tname, warnings = warnings_of(r.stderr or '') }
  if format == 'dumb' then
    cleanup()
    -- dumb pads with blank lines and trailing spaces; keep the drawing only.
    local text = (r.stdout or ''):gsub('\f', ''):gsub('[ \t]+\n', '\n'):gsub('^\n+', '')
    res.text = text:gsub('\n+$', '\n')
    return res
  end
  local data = fs.read(tmp_path)
  if not data or #data == 0 then
    cleanup()
    return nil, string.format('plot: %s: gnuplot wrote no %s output', label, format), 'EPLOT'
  end
  local ok, err, code = fs.write_atomic(opts.path, data)
  cleanup()
  if not ok then
    return nil, string.format('plot: %s', tostring(err)), code or 'EIO'
  end
  res.path = opts.path
  res.bytes = #data
  return res
end

return M
