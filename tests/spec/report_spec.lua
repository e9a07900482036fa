-- tp.report: the report model (verdict, headline ratio, findings), Markdown and HTML rendering,
-- inline SVG, and the files write() leaves (gnuplot run for real).
local h = require('helper')
local report = require('tp.report')
local results = require('tp.results')
local json = require('tp.json')
local fs = require('tp.fs')
local plot = require('tp.plot')
local stats = require('tp.stats')

local have_gnuplot = plot.available() ~= nil

-- Sets and models are built once per fixture: building runs the bootstrap, the audit and the
-- loss checks, which the GC-stress run of the suite makes slow.
local sets, models = {}, {}

local function load(name)
  sets[name] = sets[name] or assert(results.load(h.fixture('results/' .. name)))
  return sets[name]
end

local function model_of(name)
  models[name] = models[name] or assert(report.build(load(name)))
  return models[name]
end

-- PNG (W3C PNG specification, 2nd ed., 5.2 signature, 11.2.2 IHDR): 8-byte signature, then
-- the IHDR chunk: 4-byte length, 'IHDR', width and height as 4-byte big-endian integers.
local function png_size(path)
  local data = assert(h.read(path), path)
  assert.are.equal('\137PNG\r\n\26\n', data:sub(1, 8), path)
  assert.are.equal('IHDR', data:sub(13, 16), path)
  return string.unpack('>I4', data, 17), string.unpack('>I4', data, 21)
end

-- Copies the fair fixture's records into a fresh directory, changing fields of each (fn(doc)).
local function altered_copy(fn)
  local dir = h.tmpdir()
  local set = load('fair')
  for _, r in ipairs(set.runs) do
    local doc = assert(json.load_file(r.path))
    fn(doc)
    assert(json.save_file(dir .. '/' .. fs.basename(r.path), doc))
  end
  return dir
end

describe('tp.report.build', function()
  it('calls a fair comparison fair and puts the headline ratio first', function()
    local set = load('fair')
    local m = model_of('fair')
    assert.are.equal('fair', m.verdict.status)
    assert.is_true(m.verdict.fair)
    assert.are.equal('Fair comparison', m.verdict.label)
    assert.are.equal('nvd', m.baseline)
    local hl = m.verdict.headline[1]
    assert.are.equal('tokens_per_s_per_gpu', hl.metric)
    assert.are.equal('amd', hl.group)
    -- The ratio of the group means, computed here from the runs.
    local amd = stats.mean(set:where({ platform = 'amd' }):values('tokens_per_s_per_gpu', true))
    local nvd = stats.mean(set:where({ platform = 'nvd' }):values('tokens_per_s_per_gpu', true))
    assert.is_true(math.abs(hl.ratio - amd / nvd) < 1e-12)
    assert.is_true(hl.ci.lo <= hl.ratio and hl.ratio <= hl.ci.hi)
    assert.are.equal(0, m.verdict.counts.error)
    assert.are.equal('llama3.1-8b: amd vs nvd', m.title)
  end)

  it('calls a comparison with differing settings unfair and says why', function()
    local m = model_of('unfair')
    assert.are.equal('unfair', m.verdict.status)
    assert.is_false(m.verdict.fair)
    assert.is_true(m.verdict.counts.error >= 3)
    local all = table.concat(m.verdict.reasons, '\n')
    assert.truthy(all:find('training.lr differs', 1, true))
    assert.truthy(all:find('training.seed differs', 1, true))
    -- Errors come before warnings and notes.
    local seen_other = false
    for _, f in ipairs(m.findings) do
      if f.severity ~= 'error' then
        seen_other = true
      else
        assert.is_false(seen_other)
      end
    end
  end)

  it('flags mock data and a killed run', function()
    local mock = model_of('mock')
    assert.are.equal('unfair', mock.verdict.status)
    assert.truthy(table.concat(mock.verdict.reasons, '\n'):find('mock data', 1, true))
    local cut = model_of('truncated')
    assert.truthy(table.concat(cut.verdict.reasons, '\n'):find('stopped at iteration 135 of 200',
      1, true))
  end)

  it('has nothing to compare with one group', function()
    local set = load('fair'):where({ platform = 'amd' })
    local m = assert(report.build(set))
    assert.are.equal('single', m.verdict.status)
    assert.are.same({}, m.verdict.headline)
  end)

  it('splits by another key and takes the baseline given', function()
    local m = assert(report.build(load('fair'), { by = 'framework', baseline = 'primus',
      title = 'by framework' }))
    assert.are.equal('primus', m.baseline)
    assert.are.equal('megatron', m.verdict.headline[1].group)
    assert.are.equal('by framework', m.title)
  end)

  it('fails on an empty set and on a baseline that names no group', function()
    local empty = load('fair'):where({ platform = 'tpu' })
    local m, err, code = report.build(empty)
    assert.is_nil(m)
    assert.are.equal('ENODATA', code)
    assert.are.equal('report: no runs to report on', err)
    m, err, code = report.build(load('fair'), { baseline = 'tpu' })
    assert.is_nil(m)
    assert.are.equal('EINVAL', code)
    assert.truthy(err:find("no group 'tpu' for platform", 1, true), err)
  end)

  it('says which files could not be read', function()
    local set = load('bad')
    local m = assert(report.build(set))
    local found = false
    for _, f in ipairs(m.findings) do
      if f.source == 'input' and f.message:find('truncated.json:24:5: unterminated string', 1,
        true) then
        found = true
      end
    end
    assert.is_true(found)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      report.build('output')
    end, 'tp.report.build: result set (tp.results.load) expected, got string')
    assert.has_error(function()
      report.build(load('fair'), { colour = 'red' })
    end, "tp.report.build: unknown option 'colour'")
    assert.has_error(function()
      report.build(load('fair'), { seed = 1.5 })
    end, "tp.report.build: option 'seed' must be integer, got float")
  end)
end)

describe('tp.report charts', function()
  it('gives the five plots of a report, with data', function()
    local m = model_of('fair')
    local charts = report.charts(m)
    local names = {}
    for i, c in ipairs(charts) do
      names[i] = c.name
      assert.is_nil(c.missing, c.name)
      assert.truthy(c.chart and c.caption, c.name)
    end
    assert.are.same(report.PLOTS, names)
    local tput = charts[1].chart.series[1]
    assert.are.same({ 'nvd', 'amd' }, charts[1].chart.categories)
    assert.are.equal(3, #tput.points[1])
    assert.are.same({ '#76b900', '#ed1c24' }, tput.colors)
  end)

  it('keeps only the steady-state window in the step-time boxes', function()
    local set = load('fair')
    local run = set.runs[1]
    local steady = report.steady_step_times(run)
    local n = 0
    for i, it in ipairs(run.iterations) do
      if it >= run.steady_first_iteration and run.step_times[i] == run.step_times[i] then
        n = n + 1
      end
    end
    assert.are.equal(n, #steady)
    assert.is_true(#steady < #run.step_times)
    -- The first record (warm-up, 8.4 s) is outside the window.
    assert.is_true(stats.max(steady) < 3)
  end)

  it('names what is missing instead of drawing an empty plot', function()
    local set = load('tprimat')
    local c = report.chart(set, 'mfu')
    assert.truthy(c.missing, 'tprimat records name no model: no MFU')
    assert.truthy(c.missing:find('MFU: ', 1, true))
    local lr = report.chart(load('fair'), 'lr')
    assert.is_nil(lr.missing)
    assert.are.equal(6, #lr.chart.series)
    assert.has_error(function()
      report.chart(set, 'pie')
    end, "tp.report.chart: unknown chart 'pie' (known: throughput, step_time, loss, memory, " ..
      'mfu, lr, profile, roofline, idle)')
    -- Without a profiled run, 'profile' says so (and a report leaves it out).
    assert.are.equal('no run was profiled', report.chart(load('fair'), 'profile').missing)
  end)
end)

describe('tp.report.markdown and html', function()
  local hostile_dir

  setup(function()
    hostile_dir = altered_copy(function(doc)
      doc.run_id = '<script>alert(1)</script>|' .. doc.run_id .. '*_`'
    end)
  end)

  it('writes the verdict, findings, comparison, basis and runs in Markdown', function()
    local m = model_of('unfair')
    local md = report.markdown(m, {})
    local pos = {}
    for _, head in ipairs({ '# llama3.1-8b: amd vs nvd', '## Verdict: Not a fair comparison',
      '## Findings', '## Comparison', '### Basis', '## Plots', '## Runs' }) do
      pos[#pos + 1] = md:find(head, 1, true)
      assert.truthy(pos[#pos], head)
    end
    for i = 2, #pos do
      assert.is_true(pos[i] > pos[i - 1])
    end
    assert.truthy(md:find('**amd / nvd = ', 1, true))
    assert.truthy(md:find('| Methodology | identical', 1, true))
    assert.truthy(md:find('| Steady-state window (amd) | mser-5', 1, true))
    assert.truthy(md:find('| FLOPs convention | megatron: ', 1, true))
    assert.truthy(md:find('| Peak divisor (nvd) | h100-sxm bf16 989.4 TFLOP/s dense |', 1, true))
    assert.truthy(md:find('**ERROR** (audit, config\\_differs): training.lr differs', 1, true))
    assert.truthy(md:find('Not drawn: plots were not rendered.', 1, true))
  end)

  it('escapes run ids in Markdown tables and in HTML', function()
    local set = assert(results.load(hostile_dir))
    local m = assert(report.build(set))
    local md = report.markdown(m, {})
    assert.is_nil(md:find('<script>', 1, true))
    assert.truthy(md:find('\\<script\\>alert(1)\\</script\\>\\|amd-primus-r1\\*\\_\\`', 1, true))
    local html = report.html(m, {}, {})
    assert.is_nil(html:find('<script', 1, true))
    assert.truthy(html:find('&lt;script&gt;alert(1)&lt;/script&gt;|amd-primus-r1*_`', 1, true))
  end)

  it('makes a page with no script and no external resource', function()
    local m = model_of('fair')
    local html = report.html(m, {}, {})
    assert.truthy(html:find('^<!DOCTYPE html>'))
    assert.truthy(html:find('<style>', 1, true))
    assert.is_nil(html:lower():find('<script', 1, true))
    assert.is_nil(html:find('src=', 1, true))
    assert.is_nil(html:find('https?://'))
    assert.is_nil(html:find('<link rel="stylesheet"', 1, true))
    -- The verdict comes before the findings, the comparison and the plots.
    local v = html:find('id="verdict"', 1, true)
    assert.is_true(v < html:find('id="findings"', 1, true))
    assert.is_true(html:find('id="findings"', 1, true) < html:find('id="comparison"', 1, true))
    assert.is_true(html:find('id="comparison"', 1, true) < html:find('id="plots"', 1, true))
    assert.truthy(html:find('1.146×', 1, true))
  end)
end)

describe('tp.report.svg_inline', function()
  it('drops the XML prolog and prefixes every id and reference', function()
    local svg = '<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg width="9" height="9">' ..
      "<defs><path id='gpPt1' d='M0,0'/><filter id=\"tb\"/></defs>" ..
      "<use xlink:href='#gpPt1'/><g filter=\"url(#tb)\" id=\"gnuplot_plot_1\"/>" ..
      '<a href="#elsewhere"/></svg>'
    local out = assert(report.svg_inline(svg, 'p3-'))
    assert.truthy(out:find('^<svg '))
    assert.truthy(out:find("id='p3-gpPt1'", 1, true))
    assert.truthy(out:find("xlink:href='#p3-gpPt1'", 1, true))
    assert.truthy(out:find('url(#p3-tb)', 1, true))
    assert.truthy(out:find('id="p3-gnuplot_plot_1"', 1, true))
    assert.truthy(out:find('href="#elsewhere"', 1, true))
  end)

  it('refuses anything that could run', function()
    local r, err = report.svg_inline('<svg><script>x()</script></svg>', 'p-')
    assert.is_nil(r)
    assert.are.equal('the SVG holds script or event attributes', err)
    assert.is_nil(report.svg_inline('<svg onload="x()"></svg>', 'p-'))
    assert.is_nil(report.svg_inline('<svg><a href="javascript:x()"/></svg>', 'p-'))
    local none, why = report.svg_inline('<html></html>', 'p-')
    assert.is_nil(none)
    assert.are.equal('not an SVG document (no <svg> element)', why)
  end)
end)

describe('tp.report.write #slow', function()
  it('writes report.md, report.html and a PNG and an SVG per plot', function()
    if not have_gnuplot then
      pending('gnuplot is not installed (apt-get install gnuplot-nox)')
      return
    end
    local out = h.tmpdir() .. '/report'
    local r = assert(report.write(load('fair'), out, { sources = { 'fair' } }))
    assert.are.same({}, r.warnings)
    for _, name in ipairs(report.PLOTS) do
      local w, hh = png_size(out .. '/' .. name .. '.png')
      assert.are.equal(900, w)
      assert.are.equal(500, hh)
      assert.truthy(h.read(out .. '/' .. name .. '.svg'):find('<svg', 1, true))
      assert.are.same({ png = name .. '.png', svg = name .. '.svg' }, r.plots[name])
    end
    local md = h.read(out .. '/report.md')
    assert.truthy(md:find('![Throughput per GPU](throughput.png)', 1, true))
    local html = h.read(out .. '/report.html')
    local _, nsvg = html:gsub('<svg ', '')
    assert.are.equal(#report.PLOTS, nsvg)
    -- Ids stay unique on the page although every plot came from gnuplot with the same ids.
    local ids = {}
    for id in html:gmatch('%sid=[\'"]([^\'"]+)[\'"]') do
      assert.is_nil(ids[id], 'duplicate id ' .. id)
      ids[id] = true
    end
    for _, e in ipairs(assert(fs.list(out))) do
      assert.is_nil(e.name:find('^%.'), 'temporary file left: ' .. e.name)
    end
    assert.are.equal(#report.PLOTS * 2 + 2, #r.files)
  end)

  it('keeps hostile run ids as text in the plots and the page', function()
    if not have_gnuplot then
      pending('gnuplot is not installed (apt-get install gnuplot-nox)')
      return
    end
    local dir = altered_copy(function(doc)
      doc.run_id = '<script>alert(1)</script>&"\'`touch x`' .. doc.run_id
    end)
    local out = h.tmpdir()
    local r = assert(report.write(assert(results.load(dir)), out))
    assert.are.same({}, r.warnings)
    local html = h.read(out .. '/report.html')
    assert.is_nil(html:lower():find('<script', 1, true))
    assert.truthy(html:find('&lt;script&gt;alert(1)', 1, true))
    local svg = h.read(out .. '/loss.svg')
    assert.is_nil(svg:find('<script', 1, true))
    assert.truthy(svg:find('&lt;script>alert(1)&lt;/script>&amp;', 1, true))
    assert.is_false(fs.exists(out .. '/x'))
  end)

  it('writes the text files without plots when asked', function()
    local out = h.tmpdir()
    local r = assert(report.write(load('unfair'), out, { plots = false }))
    assert.are.same({ out .. '/report.md', out .. '/report.html' }, r.files)
    assert.truthy(h.read(out .. '/report.md'):find('Not drawn: plots were turned off.', 1, true))
    assert.is_false(fs.exists(out .. '/loss.png'))
  end)

  it('fails when the output is a file, and when there is nothing to report', function()
    local file = h.tmpdir() .. '/f'
    h.write(file, 'x')
    local r, err, code = report.write(load('fair'), file, { plots = false })
    assert.is_nil(r)
    assert.are.equal('ENOTDIR', code)
    assert.truthy(err:find('exists and is not a directory', 1, true))
    assert.are.equal('x', h.read(file))
    local bad = assert(results.load(h.fixture('results/bad/empty.json')))
    r, err, code = report.write(bad, h.tmpdir(), { plots = false })
    assert.is_nil(r)
    assert.are.equal('ENODATA', code)
    assert.truthy(err:find('1 file could not be read', 1, true), err)
  end)
end)
