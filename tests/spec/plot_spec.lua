-- tp.plot: gnuplot scripts generated from chart tables, run for real; PNG checked by signature
-- and IHDR size, SVG parsed as XML (python3's xml.etree), dumb text read back.
local h = require('helper')
local plot = require('tp.plot')
local fs = require('tp.fs')

local have_gnuplot = plot.available() ~= nil

local function need_gnuplot()
  if not have_gnuplot then
    pending('gnuplot is not installed (apt-get install gnuplot-nox)')
    return false
  end
  return true
end

-- PNG (W3C PNG specification, 2nd ed., 5.2 signature, 11.2.2 IHDR): 8-byte signature, then
-- the IHDR chunk: 4-byte length, 'IHDR', width and height as 4-byte big-endian integers.
local function png_size(path)
  local data = h.read(path)
  assert(data, path .. ': not written')
  assert.are.equal('\137PNG\r\n\26\n', data:sub(1, 8), path .. ': no PNG signature')
  assert.are.equal('IHDR', data:sub(13, 16), path .. ': first chunk is not IHDR')
  return string.unpack('>I4', data, 17), string.unpack('>I4', data, 21)
end

local function have_python()
  local r = h.run({ '-c', 'import xml.etree.ElementTree' }, { bin = 'python3' })
  return r.code == 0
end

-- Parses `path` as XML with python3; returns root tag, width, height (nil, message when invalid).
local function svg_root(path)
  local r = h.run({ '-c', 'import sys, xml.etree.ElementTree as ET\n' ..
    'root = ET.parse(sys.argv[1]).getroot()\n' ..
    'print(root.tag, root.get("width"), root.get("height"))', path }, { bin = 'python3' })
  if r.code ~= 0 then
    return nil, r.stderr
  end
  local tag, w, hh = r.stdout:match('^(%S+) (%S+) (%S+)')
  return tag, tonumber(w), tonumber(hh)
end

local function bars(extra)
  local c = { kind = 'bars', title = 'tokens/s/GPU', ylabel = 'tokens/s',
    categories = { 'nvd', 'amd' },
    series = { { title = 'mean', values = { 11912.9, 13651.7 }, lo = { 11897.8, 13624.9 },
      hi = { 11937.3, 13686.3 }, points = { { 11937.3, 11897.8, 11903.7 },
        { 13643.8, 13686.3, 13624.9 } }, colors = { '#76b900', '#ed1c24' } } } }
  for k, v in pairs(extra or {}) do
    c[k] = v
  end
  return c
end

local function temp_files(dir)
  local out = {}
  for _, e in ipairs(assert(fs.list(dir))) do
    if e.name:find('^%.tplua%-plot') then
      out[#out + 1] = e.name
    end
  end
  return out
end

describe('tp.plot.quote', function()
  it('doubles single quotes and keeps backslashes, backquotes and @ literal', function()
    assert.are.equal("'it''s `x` @y \\n'", plot.quote("it's `x` @y \\n"))
  end)

  it('turns control characters into spaces and cuts long text', function()
    assert.are.equal("'a b c'", plot.quote('a\nb\0c'))
    local q = plot.quote(string.rep('x', 500), 50)
    assert.are.equal(52, #q)
    assert.truthy(q:find('...', 1, true))
  end)
end)

describe('tp.plot.script', function()
  local term = 'set terminal dumb size 80,24 noenhanced'

  it('puts the data inline as datablocks and the labels as quoted strings', function()
    local s = plot.script(bars(), term)
    assert.truthy(s:find('$bar1_1 << EOD\n1 11912.9\nEOD', 1, true))
    assert.truthy(s:find("$err1 << EOD\n1 11912.9 11897.8 11937.3\n2 13651.7 13624.9 13686.3\nEOD",
      1, true))
    assert.truthy(s:find("set xtics ('nvd' 1, 'amd' 2)", 1, true))
    assert.truthy(s:find("lc rgb '#ed1c24'", 1, true))
  end)

  it('stacks the series of stacked bars: running sums, the tallest drawn first', function()
    local s = plot.script({ kind = 'bars', stacked = true, categories = { 'nvd', 'amd' },
      series = { { title = 'gemm', color = '#1f77b4', values = { 8.5, 11.5 } },
        { title = 'attention', color = '#ff7f0e', values = { 2.5, 0 / 0 } },
        { title = 'idle', color = '#c7c7c7', values = { 3, 3.5 } } } }, term)
    -- One bar per category at its tick (no cluster offsets), sums of the series below.
    assert.truthy(s:find('$bar1_1 << EOD\n1 14\n2 15\nEOD', 1, true), s)
    assert.truthy(s:find('$bar2_1 << EOD\n1 11\nEOD', 1, true), s)
    assert.truthy(s:find('$bar3_1 << EOD\n1 8.5\n2 11.5\nEOD', 1, true), s)
    local idle = s:find("$bar1_1 using 1:2 with boxes lc rgb '#c7c7c7' title 'idle'", 1, true)
    local gemm = s:find("$bar3_1 using 1:2 with boxes lc rgb '#1f77b4' title 'gemm'", 1, true)
    assert.truthy(idle and gemm and idle < gemm, s)
    assert.truthy(s:find('set key outside right top vertical', 1, true))
    assert.truthy(s:find('set boxwidth 0.54 absolute', 1, true), s)
  end)

  it('returns nil when nothing finite is left to draw', function()
    assert.is_nil(plot.script({ kind = 'bars', categories = { 'a' },
      series = { { values = { 0 / 0 } } } }, term))
    assert.is_nil(plot.script({ kind = 'lines', series = { { x = { 1, 2 },
      y = { math.huge, -math.huge } } } }, term))
    assert.is_nil(plot.script({ kind = 'boxes', categories = { { label = 'r', samples = {} } } },
      term))
  end)

  it('keeps the first, the last and the extremes of a long curve', function()
    local xs, ys = {}, {}
    for i = 1, 100000 do
      xs[i], ys[i] = i, 5 + math.sin(i / 100)
    end
    ys[54321] = 99  -- a spike decimation must not hide
    local s = plot.script({ kind = 'lines', series = { { x = xs, y = ys } } }, term)
    local block = s:match('%$line1 << EOD\n(.-)\nEOD')
    local n = select(2, block:gsub('\n', '')) + 1
    assert.is_true(n <= plot.MAX_POINTS, 'rows: ' .. n)
    assert.truthy(block:find('^1 5%.0099'))
    assert.truthy(block:find('\n54321 99\n', 1, true))
    assert.truthy(block:find('\n100000 [%d.]+$'))
  end)

  it('cuts long tick labels to fit a text terminal, keeping their ends', function()
    local cats = {}
    for i = 1, 6 do
      cats[i] = { label = 'nvd-megatron-2b8ed7d97d77-r' .. i, samples = { 1, 2, 3 } }
    end
    local s = plot.script({ kind = 'boxes', categories = cats },
      'set terminal dumb size 100,30 noenhanced')
    local tics = s:match('set xtics %((.-)%)\n')
    assert.truthy(tics:find("'..d7d97d77-r1' 1", 1, true), tics)
    assert.truthy(tics:find("'..d7d97d77-r6' 6", 1, true), tics)
    -- Graphic terminals slant the labels, cut to plot.MAX_LABEL characters.
    s = plot.script({ kind = 'boxes', categories = cats }, 'set terminal svg size 900,500')
    assert.truthy(s:find("'..megatron-2b8ed7d97d77-r1' 1", 1, true))
    cats[1].label = 'short'
    s = plot.script({ kind = 'boxes', categories = cats }, 'set terminal svg size 900,500')
    assert.truthy(s:find("'short' 1", 1, true))
    assert.truthy(s:find('set xtics rotate by -20 left', 1, true))
  end)

  it('raises on malformed charts', function()
    assert.has_error(function()
      plot.script({ kind = 'pie' }, term)
    end, "tp.plot: chart.kind must be 'bars', 'lines' or 'boxes', got pie")
    assert.has_error(function()
      plot.script({ kind = 'lines', series = { { x = { 1, 2 }, y = { 1 } } } }, term)
    end, 'tp.plot: chart.series[1] has 2 x and 1 y values')
    assert.has_error(function()
      plot.script({ kind = 'bars', categories = { 'a' }, series = { { values = { 'x' } } } }, term)
    end, 'tp.plot: chart.series[1].values[1] must be a number, got string')
    assert.has_error(function()
      plot.script({ kind = 'boxes', categories = { { samples = {} } } }, term)
    end, 'tp.plot: chart.categories[1].label must be a string, got nil')
  end)
end)

describe('tp.plot.render', function()
  local dir

  before_each(function()
    dir = h.tmpdir()
  end)

  it('lists the terminals gnuplot has', function()
    if not need_gnuplot() then
      return
    end
    local t = assert(plot.terminals())
    assert.is_true(t.dumb)
    assert.is_true(t.svg)
    assert.is_true(t.png or t.pngcairo)
  end)

  it('writes a PNG of the requested size', function()
    if not need_gnuplot() then
      return
    end
    local path = dir .. '/bars.png'
    local r = assert(plot.render(bars(), { format = 'png', path = path, width = 640,
      height = 360 }))
    assert.are.equal(path, r.path)
    assert.is_true(r.terminal == 'pngcairo' or r.terminal == 'png')
    local w, hh = png_size(path)
    assert.are.equal(640, w)
    assert.are.equal(360, hh)
    assert.are.same({}, temp_files(dir))
  end)

  it('writes an SVG that parses as XML', function()
    if not need_gnuplot() then
      return
    end
    if not have_python() then
      pending('python3 (xml.etree) is not installed: cannot parse the SVG')
      return
    end
    local path = dir .. '/curve.svg'
    assert(plot.render({ kind = 'lines', title = 'a <b> & "c"', xlabel = 'iteration',
      series = { { title = "run '1' <x>", x = { 1, 2, 3 }, y = { 3, 2, 1 } } } },
      { format = 'svg', path = path }))
    local tag, w, hh = svg_root(path)
    assert.are.equal('{http://www.w3.org/2000/svg}svg', tag, w)
    assert.are.equal(900, w)
    assert.are.equal(500, hh)
  end)

  it('draws box plots on every terminal', function()
    if not need_gnuplot() then
      return
    end
    local chart = { kind = 'boxes', title = 'step time', categories = {
      { label = 'r1', samples = { 2.4, 2.41, 2.39, 2.5, 2.38 }, legend = 'amd' },
      { label = 'r2', samples = { 2.7, 2.75, 2.74, 2.73 }, legend = 'nvd' } } }
    local w, hh = png_size(assert(plot.render(chart, { format = 'png', path = dir .. '/b.png' }))
      .path)
    assert.are.equal(900, w)
    assert.are.equal(500, hh)
    local t = assert(plot.render(chart, { format = 'dumb', width = 70, height = 20 })).text
    assert.truthy(t:find('step time', 1, true))
    assert.truthy(t:find('r1', 1, true) and t:find('r2', 1, true))
  end)

  it('returns text from the dumb terminal', function()
    if not need_gnuplot() then
      return
    end
    local r = assert(plot.render({ kind = 'lines', title = 'loss', xlabel = 'iteration',
      series = { { title = 'amd', x = { 0, 50, 100 }, y = { 11, 7, 6 } } } },
      { format = 'dumb', width = 60, height = 18 }))
    assert.are.equal('dumb', r.format)
    assert.truthy(r.text:find('loss', 1, true))
    assert.truthy(r.text:find('iteration', 1, true))
    assert.truthy(r.text:find('100', 1, true))
    assert.is_nil(r.text:find('\f', 1, true))
    for line in r.text:gmatch('[^\n]+') do
      assert.is_true(#line <= 60, line)
    end
  end)

  it('runs no command hidden in a label', function()
    if not need_gnuplot() then
      return
    end
    local marker = dir .. '/pwned'
    local evil = "x' `touch " .. marker .. "` @A \\' $(touch " .. marker .. ")\n'"
    assert(plot.render({ kind = 'bars', title = evil, ylabel = evil, categories = { evil },
      series = { { title = evil, values = { 1 } } } }, { format = 'png', path = dir .. '/e.png' }))
    assert.is_false(fs.exists(marker))
    png_size(dir .. '/e.png')
  end)

  it('names the script line when gnuplot fails, and leaves no file behind', function()
    if not need_gnuplot() then
      return
    end
    local path = dir .. '/bad.png'
    local r, err, code = plot.render(bars({ yformat = '%Q' }), { format = 'png', path = path })
    assert.is_nil(r)
    assert.are.equal('EPLOT', code)
    assert.truthy(err:find('gnuplot failed at script line %d+%-%d+ %(plot %$bar1_1 '), err)
    assert.truthy(err:find('Bad format character', 1, true), err)
    assert.is_false(fs.exists(path))
    assert.are.same({}, temp_files(dir))
  end)

  it('keeps the old file when a new plot fails', function()
    if not need_gnuplot() then
      return
    end
    local path = dir .. '/keep.png'
    assert(plot.render(bars(), { format = 'png', path = path }))
    local before = h.read(path)
    assert.is_nil(plot.render(bars({ yformat = '%Q' }), { format = 'png', path = path }))
    assert.are.equal(before, h.read(path))
  end)

  it('fails with ENODATA when nothing can be drawn', function()
    if not need_gnuplot() then
      return
    end
    local r, err, code = plot.render({ kind = 'lines', title = 'empty', series = {} },
      { format = 'svg', path = dir .. '/x.svg' })
    assert.is_nil(r)
    assert.are.equal('ENODATA', code)
    assert.are.equal('plot: empty: no data to plot', err)
    assert.are.same({}, temp_files(dir))
  end)

  it('fails with ENOENT when the output directory is missing', function()
    if not need_gnuplot() then
      return
    end
    local r, err, code = plot.render(bars(), { format = 'png', path = dir .. '/no/such/x.png' })
    assert.is_nil(r)
    assert.are.equal('ENOENT', code)
    assert.truthy(err:find('does not exist', 1, true))
  end)

  it('raises on bad options', function()
    assert.has_error(function()
      plot.render(bars(), { format = 'jpeg', path = 'x' })
    end, "tp.plot: option format must be 'png', 'svg' or 'dumb', got jpeg")
    assert.has_error(function()
      plot.render(bars(), { format = 'png' })
    end, 'tp.plot: option path (the output file) is required for png')
    assert.has_error(function()
      plot.render(bars(), { format = 'dumb', colour = true })
    end, "tp.plot: unknown option 'colour'")
    assert.has_error(function()
      plot.render(bars(), { format = 'dumb', width = 2.5 })
    end, 'tp.plot: option width must be an integer in [10, 20000], got 2.5')
  end)
end)
