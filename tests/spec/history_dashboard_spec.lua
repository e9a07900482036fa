-- The dashboard's parts on plain data: escaping, data embedded so that it cannot end its script
-- element, round axis ticks, and a chart's SVG (a circle per run with its ids, the lines, the
-- change and note markers, nothing outside the drawing area).
local svg = require('tp.history._dashboard_svg')
local page = require('tp.history._dashboard_page')
local json = require('tp.json')

local DAY = 86400
local T0 = 1772330400 -- 2026-03-01T02:00:00Z

describe('tp.history._dashboard_svg', function()
  it('escapes text for HTML and SVG', function()
    assert.are.equal('a &lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;', svg.escape('a <b> & "c" \'d\''))
    assert.are.equal('12', svg.escape(12))
  end)

  it('chooses round ticks that cover the values', function()
    local ticks, lo, hi, step = svg.nice_ticks(9512, 10347, 5)
    assert.are.same({ 9400, 9600, 9800, 10000, 10200, 10400 }, ticks)
    assert.are.same({ 9400, 10400, 200 }, { lo, hi, step })
    ticks = svg.nice_ticks(9512, 10347, 3)
    assert.are.same({ 9500, 10000, 10500 }, ticks)
    ticks = svg.nice_ticks(0.3412, 0.3655, 5)
    assert.are.equal(0.34, ticks[1])
    assert.is_true(ticks[#ticks] >= 0.3655)
    -- One value: a small range around it.
    ticks, lo, hi = svg.nice_ticks(5, 5, 5)
    assert.is_true(lo < 5 and hi > 5 and #ticks >= 2)
  end)

  it('draws a circle per run, a line per series, the change and note markers', function()
    local pts_a, pts_b = {}, {}
    for i = 1, 10 do
      pts_a[i] = { T0 + (i - 1) * DAY, i <= 5 and 10000 or 9600 }
      pts_b[i] = { T0 + (i - 1) * DAY, 8700 }
    end
    local text = svg.chart({ id = 'chart-1', title = 'tokens/s/GPU: <x>', ylabel = 'tokens/s/GPU',
      series = {
        { label = 'amd', colour = '#c8102e', points = pts_a, index = 1, changes = {
          { t_before = T0 + 4 * DAY, t_after = T0 + 5 * DAY, kind = 'regression', text = '-4.0%',
            title = 'ROCm 6.2.4 -> 6.3.1: tokens/s/GPU -4.0% [-4.5, -3.5]' } } },
        { label = 'nvd', colour = '#5a8f00', points = pts_b, index = 2, changes = {} },
      },
      notes = { { t = T0 + 3 * DAY, text = 'new <cooling>' } } })
    assert.truthy(text:find('^<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart%-1"'))
    assert.truthy(text:find('aria-label="tokens/s/GPU: &lt;x&gt;"', 1, true))
    local _, circles = text:gsub('<circle class="run"', '')
    assert.are.equal(20, circles)
    assert.truthy(text:find('id="run-2-10"', 1, true))
    assert.truthy(text:find('data-s="1" data-i="6"', 1, true))
    local _, lines = text:gsub('<polyline ', '')
    assert.are.equal(2, lines)
    assert.truthy(text:find('<g class="change regression"><title>ROCm 6.2.4 -&gt; 6.3.1: '
      .. 'tokens/s/GPU -4.0% [-4.5, -3.5]</title>', 1, true))
    assert.truthy(text:find('>-4.0%</text>', 1, true))
    assert.truthy(text:find('<g class="note"><title>new &lt;cooling&gt;</title>', 1, true))
    assert.truthy(text:find('>2026-03-01</text>', 1, true))
    -- Every point inside the plot area (72..940 x 34..300).
    for cx, cy in text:gmatch('cx="([%d.]+)" cy="([%d.]+)"') do
      cx, cy = tonumber(cx), tonumber(cy)
      assert.is_true(cx >= 72 and cx <= 940 and cy >= 34 and cy <= 300, cx .. ',' .. cy)
    end
  end)

  it('says so when there is nothing to draw', function()
    local text = svg.chart({ id = 'c', title = 't', series = {} })
    assert.truthy(text:find('>no runs</text></svg>', 1, true))
  end)
end)

describe('tp.history._dashboard_page', function()
  it('embeds data that cannot end its script and reads back the same', function()
    local value = { text = '</script><script>alert(1)</script> & <!-- -->', n = 1.5 }
    local text = page.embed_json(value)
    assert.is_nil(text:find('<', 1, true))
    assert.is_nil(text:find('>', 1, true))
    assert.is_nil(text:find('&', 1, true))
    assert.are.same(value, json.decode(text))
  end)

  it('renders one page with its style, script and data inline', function()
    local html = page.render('t &amp; u', '<p>body</p>', { series = {} })
    assert.truthy(html:find('^<!DOCTYPE html>\n<html lang="en">'))
    assert.truthy(html:find('<title>t &amp; u</title>', 1, true))
    assert.truthy(html:find('<body data-dashboard="loading">\n<p>body</p>', 1, true))
    assert.truthy(html:find('<script type="application/json" id="dashboard-data">{"series":{}}'
      .. '</script>', 1, true))
    local _, scripts = html:gsub('</script>', '')
    assert.are.equal(2, scripts)
    assert.is_nil(html:find('src=', 1, true))
    assert.is_nil(html:find('<link', 1, true))
  end)
end)
