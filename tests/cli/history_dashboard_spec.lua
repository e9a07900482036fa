-- tplua history dashboard: the page written for a history of two vendors' nightly runs
-- (examples/history/nightly.lua), self-contained (no reference outside it, data embedded so that
-- no text ends its script), one chart for both vendors with the change point and the note
-- marked; rendered by headless Chromium with no console error, its script run (a DOM marker),
-- a linked run's metrics and stack shown, and a screenshot whose chart area is drawn
-- (tests/tools/png_pixels.py decodes the PNG). An empty history, another metric, bad output
-- directories.
local h = require('helper')
local proc = require('tp.proc')
local fs = require('tp.fs')
local json = require('tp.json')
local nightly = dofile(h.source_dir .. '/examples/history/nightly.lua')

local CHROMIUM = '/usr/bin/chromium'
local PYTHON = '/usr/bin/python3'
local PNG_PIXELS = h.source_dir .. '/tests/tools/png_pixels.py'
local WINDOW = '--window-size=1280,1400'
local EVIL_IMAGE = 'rocm/megatron-lm:v25.3</script><script>document.title="owned"</script>'

local function has(s, text)
  return tostring(s):find(text, 1, true) ~= nil
end

-- The names in a directory.
local function names(dir)
  local out = {}
  for _, e in ipairs(assert(fs.list(dir))) do
    out[#out + 1] = e.name
  end
  table.sort(out)
  return out
end

local function count(s, text)
  local n, at = 0, 1
  while true do
    local i = s:find(text, at, true)
    if not i then
      return n
    end
    n, at = n + 1, i + #text
  end
end

-- Headless Chromium on `url` (a temp profile, no sandbox: the tests run as root), stopped with
-- its process group after 90 s. Returns {code, stdout, stderr}.
local function chromium(extra, url)
  local argv = { CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
    '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--user-data-dir=' .. h.tmpdir(), '--enable-logging=stderr', '--v=0',
    WINDOW }
  for _, a in ipairs(extra) do
    argv[#argv + 1] = a
  end
  argv[#argv + 1] = url
  local r = assert(proc.run(argv, { timeout = 90 }))
  assert.are_not.equal(124, r.code, 'chromium did not finish in 90 s')
  return r
end

-- Console messages (console.*, uncaught exceptions, failed loads) in Chromium's log.
local function console_lines(stderr)
  local out = {}
  for line in stderr:gmatch('[^\n]+') do
    if line:find('CONSOLE', 1, true) or line:find('Uncaught', 1, true) then
      out[#out + 1] = line
    end
  end
  return out
end

-- {width, height, ink, coloured} of the box of a PNG (tests/tools/png_pixels.py).
local function pixels(png, box)
  local r = assert(proc.run({ PYTHON, PNG_PIXELS, png, tostring(box[1]), tostring(box[2]),
    tostring(box[3]), tostring(box[4]) }, { timeout = 120 }))
  assert.are.equal(0, r.code, r.stderr)
  local w, hh, ink, col = r.stdout:match('^(%d+) (%d+) (%d+) (%d+)')
  assert.truthy(w, r.stdout)
  return { tonumber(w), tonumber(hh), tonumber(ink), tonumber(col) }
end

-- A history that holds no run: made by an add that finds no record (a history that does not
-- exist is refused by the dashboard).
local function empty_history()
  local dir = h.tmpdir()
  local target = dir .. '/empty.db'
  local r = h.run({ 'history', 'add', dir, '--db', target })
  assert.are.equal(0, r.code, r.stderr)
  return target
end

describe('tplua history dashboard', function()
  local db, out, amd, nvd
  setup(function()
    local amd_dir, nvd_dir = h.tmpdir(), h.tmpdir()
    amd = nightly.write(amd_dir, { platform = 'amd', nights = 40, change_at = 26, drop = 0.04 })
    nvd = nightly.write(nvd_dir, { platform = 'nvd', nights = 40, change_at = 20, drop = 0,
      seed = 7 })
    -- The last AMD night's image name tries to end the page's script.
    local last = amd.paths[40]
    local rec = assert(json.load_file(last))
    rec.environment.container.image = EVIL_IMAGE
    assert(require('tp.parse.record').save(rec, last))
    db = h.tmpdir() .. '/history.db'
    local r = h.run({ 'history', 'add', amd_dir, nvd_dir, '--db', db })
    assert.are.equal(0, r.code, r.stderr)
    r = h.run({ 'history', 'note', '*', '2026-03-12', 'new cooling </script><b>loop</b>',
      '--db', db })
    assert.are.equal(0, r.code, r.stderr)
    out = h.tmpdir() .. '/site'
  end)

  it('writes one self-contained page with a chart for both vendors', function()
    local r = h.run({ 'history', 'dashboard', '--out', out, '--db', db })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('history: dashboard written to ' .. out .. '/index.html\n', r.stdout)
    assert.are.same({ 'index.html' }, names(out))
    local html = assert(h.read(out .. '/index.html'))
    assert.truthy(html:find('^<!DOCTYPE html>'))
    -- Nothing fetched at view time: no external script, style, image or link.
    assert.is_nil(html:find('<link', 1, true))
    assert.is_nil(html:find('src=', 1, true))
    assert.is_nil(html:find('@import', 1, true))
    assert.is_nil(html:find('href="[a-z]+:'))
    assert.is_nil(html:find('url%('))
    -- Text from the records cannot end a script: escaped in the page, \u003c in the data.
    assert.are.equal(2, count(html, '</script>'))
    assert.truthy(has(html, 'new cooling &lt;/script&gt;&lt;b&gt;loop&lt;/b&gt;'))
    assert.truthy(has(html, 'rocm/megatron-lm:v25.3\\u003c/script\\u003e\\u003cscript'))
    -- One chart (same model, config hash and methodology), one line per vendor.
    assert.are.equal(1, count(html, '<svg '))
    assert.are.equal(2, count(html, '<polyline '))
    assert.are.equal(80, count(html, '<circle class="run"'))
    assert.truthy(has(html, 'amd mi300x megatron 0.10.0 (40 runs)'))
    assert.truthy(has(html, 'nvd h100-sxm megatron 0.10.0 (40 runs)'))
    -- The change point marked with its size and the stack change; the NVIDIA stack change
    -- without a change in speed is not a change point.
    assert.are.equal(1, count(html, '<g class="change regression">'))
    assert.truthy(html:find('<text x="[%d.]+" y="%d+" fill="#c8102e">%-%d%.%d%%</text>'))
    assert.truthy(html:find('<li class="regression">2026%-03%-26 amd mi300x megatron 0%.10%.0: '
      .. 'regression ROCm 6%.2%.4 %-&gt; 6%.3%.1, '))
    assert.truthy(has(html, 'first run after: ' .. amd.change_run_id))
    assert.are.equal(1, count(html, '<g class="note">'))
    -- The embedded data: each run's metrics and stack.
    local data = html:match('<script type="application/json" id="dashboard%-data">(.-)</script>')
    local doc = assert(json.decode(data))
    assert.are.equal(2, #doc.series)
    assert.are.equal(40, #doc.series[1].points)
    local p = doc.series[1].points[26]
    assert.are.equal(amd.change_run_id, p.run_id)
    assert.is_true(p.metrics.tokens_per_s_per_gpu > 9000)
    assert.truthy(has(json.encode(doc.stacks[p.stack + 1]), 'rocm/megatron-lm:v25.3'))
    assert.are.equal(nvd.run_ids[1], doc.series[2].points[1].run_id)
  end)

  it('renders in headless Chromium: no console error, its script run, a run shown', function()
    if not fs.is_file(CHROMIUM) then
      pending('chromium is not installed: cannot render the HTML')
      return
    end
    if not fs.is_file(PYTHON) then
      pending('python3 is not installed: cannot read the screenshot')
      return
    end
    assert.are.equal(0, h.run({ 'history', 'dashboard', '--out', out, '--db', db }).code)
    local url = 'file://' .. out .. '/index.html'
    -- The check itself: a page with a script error must show up in the log.
    local bad = h.tmpdir() .. '/bad.html'
    h.write(bad, '<!DOCTYPE html><title>t</title><script>missing_fn()</script>')
    assert.is_true(#console_lines(chromium({ '--dump-dom' }, 'file://' .. bad).stderr) > 0,
      'console errors are not detected')

    local d = chromium({ '--dump-dom' }, url)
    assert.are.equal(0, d.code, d.stderr)
    assert.are.same({}, console_lines(d.stderr))
    assert.truthy(has(d.stdout, 'data-dashboard="ready"'), 'the script did not run')
    assert.truthy(has(d.stdout, '<title>tplua history: tokens/s/GPU</title>'))
    assert.truthy(has(d.stdout, 'data-runs="80"'))
    assert.truthy(has(d.stdout, '<div id="detail" aria-live="polite"></div>'))

    -- A link to a run opens with its metrics and software stack shown.
    local l = chromium({ '--dump-dom' }, url .. '#run-1-26')
    assert.are.same({}, console_lines(l.stderr))
    local panel = l.stdout:match('<div id="detail"[^>]*class="shown">(.-)</div>%s*<script')
    assert.truthy(panel, 'no run shown')
    assert.truthy(has(panel, 'run ' .. amd.change_run_id), panel)
    assert.truthy(has(panel, '<th>tokens/s/GPU</th><td class="num">'), panel)
    assert.truthy(has(panel, '<th>container image</th><td>rocm/megatron-lm:v25.3</td>'), panel)
    assert.truthy(has(panel, '<th>CUDA / ROCm runtime</th><td>HIP 6.3.42131-fa1d09cbd</td>'),
      panel)
    -- The image name that tried to end the script is shown as text.
    local last = chromium({ '--dump-dom' }, url .. '#run-1-40')
    assert.truthy(has(last.stdout, '<td>rocm/megatron-lm:v25.3&lt;/script&gt;&lt;script&gt;'
      .. 'document.title="owned"&lt;/script&gt;</td>'), last.stdout:sub(-3000))

    -- The screenshot: the first chart's box (the script measured it) is drawn, in colour.
    local box = {}
    for v in d.stdout:match('data%-chart%-box="([%d,]+)"'):gmatch('%d+') do
      box[#box + 1] = tonumber(v)
    end
    assert.are.equal(4, #box)
    assert.are.same({ 960, 340 }, { box[3], box[4] })
    local shot = h.tmpdir() .. '/shot.png'
    local s = chromium({ '--screenshot=' .. shot }, url)
    assert.are.same({}, console_lines(s.stderr))
    local px = pixels(shot, box)
    assert.are.same({ 1280, 1400 }, { px[1], px[2] })
    assert.is_true(px[3] > 5000, 'chart area almost blank: ' .. px[3] .. ' pixels drawn')
    assert.is_true(px[4] > 1500, 'few coloured pixels in the chart: ' .. px[4])

    -- The counter on a page with nothing drawn there: an empty history's dashboard.
    local empty_out = h.tmpdir() .. '/empty'
    local e = h.run({ 'history', 'dashboard', '--out', empty_out, '--db', empty_history() })
    assert.are.equal(0, e.code, e.stderr)
    local eshot = h.tmpdir() .. '/empty.png'
    chromium({ '--screenshot=' .. eshot }, 'file://' .. empty_out .. '/index.html')
    assert.are.equal(0, pixels(eshot, box)[4])
  end)

  it('says so for an empty history, and draws another metric', function()
    local empty_out = h.tmpdir() .. '/e'
    local r = h.run({ 'history', 'dashboard', '--out', empty_out, '--db', empty_history() })
    assert.are.equal(0, r.code, r.stderr)
    local html = h.read(empty_out .. '/index.html')
    assert.truthy(has(html, 'The history holds no runs with this metric yet'))
    assert.are.equal(0, count(html, '<svg '))

    local m_out = h.tmpdir() .. '/m'
    r = h.run({ 'history', 'dashboard', '--out', m_out, '--db', db, '--metric', 'step_time_s',
      '--since', '2026-03-20' })
    assert.are.equal(0, r.code, r.stderr)
    html = h.read(m_out .. '/index.html')
    assert.truthy(has(html, '<h1>Run history: step time</h1>'))
    assert.truthy(has(html, 'lower is better'))
    assert.truthy(has(html, ', since 2026-03-20'))
    assert.are.equal(42, count(html, '<circle class="run"'))
    -- The note of 2026-03-12 is before the runs shown.
    assert.are.equal(0, count(html, '<g class="note">'))
    assert.is_nil(html:find('new cooling', 1, true))
    -- Slower steps are the regression here too.
    assert.are.equal(1, count(html, '<g class="change regression">'))
    assert.truthy(html:find('fill="#c8102e">%+%d%.%d%%</text>'))
  end)

  it('fails with the path when the directory cannot be written, leaving nothing', function()
    local file = h.tmpdir() .. '/plain'
    h.write(file, 'x')
    local r = h.run({ 'history', 'dashboard', '--out', file .. '/site', '--db', db })
    assert.are.equal(1, r.code, r.stdout)
    assert.truthy(has(r.stderr, file), r.stderr)
    assert.are.equal('x', h.read(file))
    -- An existing page is replaced whole.
    local site = h.tmpdir() .. '/site'
    fs.mkdir_p(site)
    h.write(site .. '/index.html', 'old')
    r = h.run({ 'history', 'dashboard', '--out', site, '--db', db })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(h.read(site .. '/index.html'):find('^<!DOCTYPE html>'))
    assert.are.same({ 'index.html' }, names(site))
  end)
end)
