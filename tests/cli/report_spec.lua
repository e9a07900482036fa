-- tplua report: the command on the result fixtures and the recorded example runs; the files it
-- writes (PNG signature and size, SVG as XML), usage errors, bad input, no gnuplot, and the
-- HTML page rendered by headless Chromium without console errors, with the profile analysis of
-- profiled runs (real H100 and MI300X traces) in it.
local h = require('helper')

local CHROMIUM = '/usr/bin/chromium'
local PLOTS = { 'throughput', 'step_time', 'loss', 'memory', 'mfu' }

local function exists(path)
  local f = io.open(path, 'rb')
  if f then
    f:close()
    return true
  end
  return false
end

-- PNG (W3C PNG specification, 2nd ed., 5.2 signature, 11.2.2 IHDR): 8-byte signature, then
-- the IHDR chunk: 4-byte length, 'IHDR', width and height as 4-byte big-endian integers.
local function png_size(path)
  local data = assert(h.read(path), path .. ': not written')
  assert.are.equal('\137PNG\r\n\26\n', data:sub(1, 8), path .. ': no PNG signature')
  assert.are.equal('IHDR', data:sub(13, 16), path .. ': first chunk is not IHDR')
  return string.unpack('>I4', data, 17), string.unpack('>I4', data, 21)
end

local function have_python()
  return h.run({ '-c', 'import xml.etree.ElementTree' }, { bin = 'python3' }).code == 0
end

-- Parses each file as XML; returns nil or the first failure.
local function xml_errors(paths)
  local args = { '-c', 'import sys, xml.etree.ElementTree as ET\n' ..
    'for p in sys.argv[1:]:\n' ..
    '    r = ET.parse(p).getroot()\n' ..
    '    assert r.tag == "{http://www.w3.org/2000/svg}svg", p + ": root is " + r.tag\n' }
  for _, p in ipairs(paths) do
    args[#args + 1] = p
  end
  local r = h.run(args, { bin = 'python3' })
  if r.code ~= 0 then
    return r.stderr
  end
  return nil
end

local function check_outputs(out)
  for _, name in ipairs(PLOTS) do
    local w, hh = png_size(out .. '/' .. name .. '.png')
    assert.are.equal(900, w, name)
    assert.are.equal(500, hh, name)
  end
  assert.truthy(h.read(out .. '/report.md'):find('## Verdict: ', 1, true))
  assert.truthy(h.read(out .. '/report.html'):find('</html>', 1, true))
  if have_python() then
    local svgs = {}
    for _, name in ipairs(PLOTS) do
      svgs[#svgs + 1] = out .. '/' .. name .. '.svg'
    end
    assert.is_nil(xml_errors(svgs))
  end
end

-- Runs headless Chromium on `url` with `extra` arguments; returns {code, stdout, stderr}.
local function chromium(extra, url)
  local args = { '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
    '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--user-data-dir=' .. h.tmpdir(), '--enable-logging=stderr', '--v=0' }
  for _, a in ipairs(extra) do
    args[#args + 1] = a
  end
  args[#args + 1] = url
  return h.run(args, { bin = CHROMIUM })
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

describe('tplua report', function()
  it('prints its usage with --help', function()
    local r = h.run({ 'report', '--help' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('usage: tplua report DIR... --out DIR', 1, true))
  end)

  it('is listed among the commands', function()
    local r = h.run({ 'help' })
    assert.truthy((r.stdout .. r.stderr):find('report', 1, true))
  end)

  it('rejects bad usage with status 2', function()
    local r = h.run({ 'report', '--out', h.tmpdir() })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('tplua report: no result directory given', 1, true), r.stderr)
    r = h.run({ 'report', h.fixture('results/fair') })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('tplua report: --out DIR is required', 1, true), r.stderr)
    r = h.run({ 'report', h.fixture('results/fair'), '--out', h.tmpdir(), '--colour' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("unknown option '--colour'", 1, true), r.stderr)
    r = h.run({ 'report', h.fixture('results/fair'), '--out', h.tmpdir(), '--methodology',
      'nonesuch' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('nonesuch', 1, true), r.stderr)
    r = h.run({ 'report', h.fixture('results/fair'), '--out', h.tmpdir(), '--hardware', 'amd' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("--hardware 'amd': GROUP=ID expected", 1, true), r.stderr)
    r = h.run({ 'report', h.fixture('results/fair'), '--out', h.tmpdir(), '--hardware',
      'amd=tpu9' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("no catalog row 'tpu9'", 1, true), r.stderr)
  end)

  it('fails with status 1 on a missing directory and on one with no readable run', function()
    local out = h.tmpdir()
    local r = h.run({ 'report', out .. '/nowhere', '--out', out .. '/rep' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('nowhere', 1, true), r.stderr)
    assert.is_false(exists(out .. '/rep/report.md'))
    local only_bad = h.tmpdir()
    h.write(only_bad .. '/a.json', h.read(h.fixture('results/bad/truncated.json')))
    r = h.run({ 'report', only_bad, '--out', out .. '/rep' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('a.json:24:5: unterminated string', 1, true), r.stderr)
    assert.truthy(r.stderr:find('no runs to report on', 1, true), r.stderr)
    assert.is_false(exists(out .. '/rep/report.md'))
  end)

  it('writes every file for the fair fixtures', function()
    local out = h.tmpdir() .. '/fair'
    local r = h.run({ 'report', h.fixture('results/fair'), '--out', out })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('', r.stderr)
    assert.truthy(r.stdout:find('^Fair comparison%.'))
    assert.truthy(r.stdout:find('amd / nvd = 1.146x tokens/s/GPU (95% CI 1.143-1.149)', 1, true),
      r.stdout)
    check_outputs(out)
  end)

  for _, name in ipairs({ 'unfair', 'mock', 'random', 'truncated', 'mismatch', 'tprimat' }) do
    it('writes every file for the ' .. name .. ' fixtures and calls them unfair', function()
      local out = h.tmpdir() .. '/' .. name
      local r = h.run({ 'report', h.fixture('results/' .. name), '--out', out })
      assert.are.equal(0, r.code, r.stderr)
      assert.truthy(r.stdout:find('^Not a fair comparison%.'), r.stdout)
      for _, f in ipairs({ 'report.md', 'report.html', 'throughput.png', 'loss.svg' }) do
        assert.is_true(exists(out .. '/' .. f), f)
      end
    end)
  end

  it('writes every file for the recorded example runs', function()
    local dir = h.source_dir .. '/examples/runs'
    if not exists(dir .. '/llama3.1-8b-identical/README.md') then
      pending('examples/runs has no recorded runs yet')
      return
    end
    local out = h.tmpdir() .. '/examples'
    -- The recorded runs name no GPU (no probe ran): the catalog rows are given for MFU.
    local r = h.run({ 'report', dir, '--out', out, '--hardware', 'amd=mi300x', '--hardware',
      'nvd=h100-sxm' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('^Fair comparison%.'), r.stdout)
    check_outputs(out)
    local md = h.read(out .. '/report.md')
    assert.truthy(md:find('| Peak divisor (amd) | mi300x bf16 ', 1, true))
  end)

  it('names the unreadable files and reports on the rest', function()
    local out = h.tmpdir()
    local r = h.run({ 'report', h.fixture('results/bad'), '--out', out, '--no-plots' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stderr:find('garbage.json:1:1: invalid UTF-8 (byte 0xEC) (left out)', 1,
      true), r.stderr)
    assert.truthy(r.stdout:find('^Nothing to compare%.'), r.stdout)
    local md = h.read(out .. '/report.md')
    assert.truthy(md:find('empty.json: empty file (left out)', 1, true))
  end)

  it('splits by another key with --by and --baseline', function()
    local out = h.tmpdir()
    local r = h.run({ 'report', h.fixture('results/fair'), '--out', out, '--by', 'framework',
      '--baseline', 'primus', '--no-plots', '--title', 'Frameworks' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('megatron / primus = 0.873x', 1, true), r.stdout)
    assert.truthy(h.read(out .. '/report.html'):find('<title>Frameworks</title>', 1, true))
  end)

  it('writes the report without plots when gnuplot is missing', function()
    local out = h.tmpdir()
    local r = h.run({ 'report', h.fixture('results/fair'), '--out', out },
      { env = { PATH = '/nonexistent' } })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stderr:find('tplua report: warning: gnuplot: ', 1, true), r.stderr)
    assert.truthy(r.stderr:find('plots left out', 1, true), r.stderr)
    assert.truthy(h.read(out .. '/report.md'):find('Not drawn: gnuplot: ', 1, true))
    assert.is_false(exists(out .. '/loss.png'))
  end)

  it('renders in headless Chromium without console errors', function()
    if not exists(CHROMIUM) then
      pending('chromium is not installed: cannot render the HTML')
      return
    end
    local out = h.tmpdir() .. '/html'
    local r = h.run({ 'report', h.fixture('results/unfair'), '--out', out })
    assert.are.equal(0, r.code, r.stderr)
    local url = 'file://' .. out .. '/report.html'
    -- The check itself: a page with a script error must show up in the log.
    local bad = h.tmpdir() .. '/bad.html'
    h.write(bad, '<!DOCTYPE html><title>t</title><script>missing_fn()</script>')
    local control = chromium({ '--dump-dom' }, 'file://' .. bad)
    assert.is_true(#console_lines(control.stderr) > 0, 'console errors are not detected')

    local shot = out .. '/screenshot.png'
    local s = chromium({ '--screenshot=' .. shot, '--window-size=1280,2000' }, url)
    assert.are.same({}, console_lines(s.stderr))
    local w, hh = png_size(shot)
    assert.are.equal(1280, w)
    assert.are.equal(2000, hh)
    local d = chromium({ '--dump-dom' }, url)
    assert.are.same({}, console_lines(d.stderr))
    assert.truthy(d.stdout:find('Not a fair comparison', 1, true))
    local _, nsvg = d.stdout:gsub('<svg ', '')
    assert.are.equal(#PLOTS, nsvg)
    assert.is_nil(d.stdout:find('Profile analysis', 1, true))

    -- Profiled runs (real H100 and MI300X traces): the breakdown, the explanation of the gap
    -- and the stacked bars of each platform's step, in the rendered page.
    local pout = h.tmpdir() .. '/profiled'
    r = h.run({ 'report', h.fixture('results/profiled'), '--out', pout })
    assert.are.equal(0, r.code, r.stderr)
    local pw, ph = png_size(pout .. '/profile.png')
    assert.are.equal(900, pw)
    assert.are.equal(500, ph)
    if have_python() then
      assert.is_nil(xml_errors({ pout .. '/profile.svg' }))
    end
    local pd = chromium({ '--dump-dom' }, 'file://' .. pout .. '/report.html')
    assert.are.same({}, console_lines(pd.stderr))
    local dom = pd.stdout
    local sec = dom:match('<section id="profile%-analysis">(.-)</section>')
    assert.truthy(sec, 'no profile section in the rendered page')
    assert.truthy(sec:find('<h2>Profile analysis</h2>', 1, true))
    assert.truthy(sec:find('<td>nvd</td>\n<td class="num">1</td>\n<td class="num">34.892</td>',
      1, true), sec)
    assert.truthy(sec:find('<td>amd</td>\n<td class="num">1</td>\n<td class="num">33.131</td>',
      1, true), sec)
    assert.truthy(sec:find('<h3>Why amd and nvd differ</h3>', 1, true), sec)
    assert.truthy(sec:find('<td>elementwise</td>\n<td class="num">18.110</td>\n'
      .. '<td class="num">12.812</td>\n<td class="num">-5.298</td>', 1, true), sec)
    assert.truthy(sec:find('uses the traces of nvd-megatron-prof and amd-primus-prof', 1, true))
    -- The chart: inline SVG with one legend entry per class and idle, and its files linked.
    assert.truthy(sec:find('<svg ', 1, true), sec)
    for _, class in ipairs({ 'gemm', 'attention', 'elementwise', 'idle' }) do
      assert.truthy(sec:find('>' .. class .. '</text>', 1, true), class)
    end
    assert.truthy(sec:find('<a href="profile.png">PNG</a>', 1, true))
    assert.truthy(sec:find('<a href="profile.svg">SVG</a>', 1, true))
    -- Why the GPU is idle: stacked bars of the causes per platform, drawn by gnuplot.
    local iw, ih = png_size(pout .. '/idle.png')
    assert.are.equal(900, iw)
    assert.are.equal(500, ih)
    if have_python() then
      assert.is_nil(xml_errors({ pout .. '/idle.svg' }))
    end
    for _, cause in ipairs({ 'host launch', 'synchronisation', 'launch latency', 'other' }) do
      assert.truthy(sec:find('>' .. cause .. '</text>', 1, true), cause)
    end
    assert.truthy(sec:find('GPU idle time per step by cause (ms)', 1, true), sec)
    assert.truthy(sec:find('<a href="idle.png">PNG</a>', 1, true))
    assert.truthy(sec:find('amd 5.0% faster per step: 33.131 vs 34.892 ms', 1, true), sec)
    -- The ops of each platform against its GPU's limits, the verdicts, the roofline chart.
    assert.truthy(sec:find('<h3>Ops of nvd against the limits of NVIDIA H100 80GB HBM3</h3>', 1,
      true), sec)
    assert.truthy(sec:find('<td>aten::mm</td>\n<td>[8944,1024] [1024,2816]</td>\n<td>bf16</td>',
      1, true), sec)
    assert.truthy(sec:find('<h3>The same ops on nvd and amd: hardware or software?</h3>', 1,
      true), sec)
    assert.truthy(sec:find('gemm: amd at %d+%% of its bf16 peak, nvd at %d+%%: software'), sec)
    assert.truthy(sec:find('<a href="roofline.png">PNG</a>', 1, true), sec)
    assert.truthy(sec:find('>nvd ops</text>', 1, true), sec)
    assert.truthy(sec:find('>amd limit (bf16 1307 TFLOP/s, 5.30 TB/s)</text>', 1, true), sec)
    local rw, rh = png_size(pout .. '/roofline.png')
    assert.are.equal(900, rw)
    assert.are.equal(500, rh)
    if have_python() then
      assert.is_nil(xml_errors({ pout .. '/roofline.svg' }))
    end
    -- Memory: measured (the traces' allocator events) beside the plan's estimate, the two
    -- platforms side by side with their ops matched, one step of each on one plot.
    local memsec = dom:match('<section id="memory%-analysis">(.-)</section>')
    assert.truthy(memsec, 'no memory section in the rendered page')
    assert.truthy(memsec:find('<td>nvd-megatron-prof</td>\n<td>nvd</td>\n<td>profiler trace</td>'
      .. '\n<td>cuda:0</td>\n<td class="num">1.945 GiB</td>', 1, true), memsec)
    assert.truthy(memsec:find('<td>amd-primus-prof</td>\n<td>amd</td>\n<td>profiler trace</td>'
      .. '\n<td>hip:0</td>\n<td class="num">2.067 GiB</td>', 1, true), memsec)
    assert.truthy(memsec:find('<h3>nvd against the plan</h3>', 1, true), memsec)
    assert.truthy(memsec:find('total (the peak) 1.945 GiB measured vs 75.126 GiB estimated', 1,
      true), memsec)
    assert.truthy(memsec:find('<h3>nvd and amd side by side</h3>', 1, true), memsec)
    assert.truthy(memsec:find('<td>aten::addmm</td>\n<td>[1024] [8944,1024] [1024,1024]</td>', 1,
      true), memsec)
    assert.truthy(memsec:find('the traces may be of another run', 1, true), memsec)
    for _, series in ipairs({ 'nvd step 6 allocated', 'amd step 6 reserved' }) do
      assert.truthy(memsec:find('>' .. series .. '</text>', 1, true), series)
    end
    assert.truthy(memsec:find('<a href="memory_step.png">PNG</a>', 1, true), memsec)
    local mw, mh = png_size(pout .. '/memory_step.png')
    assert.are.equal(900, mw)
    assert.are.equal(500, mh)
    if have_python() then
      assert.is_nil(xml_errors({ pout .. '/memory_step.svg' }))
    end
    local _, psvg = dom:gsub('<svg ', '')
    assert.are.equal(#PLOTS + 4, psvg)
    local pshot = pout .. '/screenshot.png'
    local ps = chromium({ '--screenshot=' .. pshot, '--window-size=1280,2000' },
      'file://' .. pout .. '/report.html')
    assert.are.same({}, console_lines(ps.stderr))
    assert.are.equal(1280, (png_size(pshot)))
    local md = h.read(pout .. '/report.md')
    assert.truthy(md:find('## Profile analysis', 1, true))
    assert.truthy(md:find('| nvd | 1 | 34.892 | 8.6% | 91.0% | 0.4% |', 1, true), md)
    assert.truthy(md:find('| elementwise | 18.110 | 12.812 | -5.298 | 50% |', 1, true), md)
    assert.truthy(md:find('![Why the GPU is idle (profiler traces)](idle.png)', 1, true), md)
    -- what would mislead: logs and traces far apart, one profiled step per side
    assert.truthy(md:find('Warning: nvd-megatron-prof: the log\'s step time', 1, true), md)
    assert.truthy(md:find('Warning (amd against nvd): amd rests on one profiled step', 1, true),
      md)
    assert.truthy(md:find('![Where the step time goes (profiler traces)](profile.png)', 1, true))
    assert.truthy(md:find('| aten::mm | [8944,1024] [1024,2816] | bf16 | 48 | 4.055 | 610.7 |',
      1, true), md)
    assert.truthy(md:find("![Each op against its GPU's limits (roofline)](roofline.png)", 1,
      true), md)
    assert.truthy(md:find('| nvd-megatron-prof | nvd | profiler trace | cuda:0 | 1.945 GiB | '
      .. '2.449 GiB | 80.000 GiB | 77.551 GiB | 75.126 GiB | tight | +3762% |', 1, true), md)
    assert.truthy(md:find('![GPU memory over one step (profiler traces)](memory_step.png)', 1,
      true), md)
    assert.is_nil(md:find('% of measured peak', 1, true))

    -- With a peaks record of the H100: "% of measured peak" beside the datasheet's limit, for
    -- the H100 side only, in the page as Chromium renders it.
    local pk = h.tmpdir() .. '/peaks.json'
    h.write(pk, '{"schema": "tplua.peaks/1", "device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", '
      .. '"tflops": {"bf16": 720.5}, "bandwidth_tbs": 2.95}')
    local mout = h.tmpdir() .. '/measured'
    r = h.run({ 'report', h.fixture('results/profiled'), '--out', mout, '--peaks', pk })
    assert.are.equal(0, r.code, r.stderr)
    local mdom = chromium({ '--dump-dom' }, 'file://' .. mout .. '/report.html')
    assert.are.same({}, console_lines(mdom.stderr))
    local msec = mdom.stdout:match('<h3>Ops of nvd.-</table>')
    assert.truthy(msec and msec:find('>% of measured peak</th>', 1, true), msec)
    local asec = mdom.stdout:match('<h3>Ops of amd.-</table>')
    assert.truthy(asec and not asec:find('measured', 1, true), asec)
    assert.truthy(h.read(mout .. '/report.md'):find('% of measured peak', 1, true))
  end)
end)

describe('tplua report: MFU and energy per token', function()
  local EXAMPLES = 'examples/runs/llama3.1-8b-identical'

  -- The mean of `label`'s rows per group in a text comparison ("  nvd  3    40.95 ...").
  local function text_means(text, label)
    local out = {}
    local block = text:match('\n' .. label:gsub('%p', '%%%0') .. '[^\n]*\n(.-)\n%S')
    for group, mean in (block or ''):gmatch('%s+(%a+)%s+%d+%s+([%d.]+)') do
      out[group] = mean
    end
    return out
  end

  -- The same from the Markdown table: "| MFU (...) | nvd | 3 | 40.95 |", "|  | amd | 3 | 36.45 |".
  local function md_means(md, label)
    local out = {}
    local from = md:find('| ' .. label, 1, true)
    assert(from, label .. ' not in the report')
    for line in md:sub(from):gmatch('[^\n]+') do
      local first, group, mean = line:match('^| ([^|]-) ?| (%a+) | %d+ | ([%d.]+) |')
      if not group or (first ~= '' and not line:find('| ' .. label, 1, true)) then
        break
      end
      out[group] = mean
    end
    return out
  end

  it('shows what the recipe\'s own summary shows for the example runs, by the same code',
    function()
      local recipe = h.run({ 'recipes/llama_identical.lua', '--results', h.tmpdir() .. '/none' },
        { env = { TPLUA_GPU_LIBPATH = h.tmpdir() } })
      assert.are.equal(0, recipe.code, recipe.stderr)
      local out = h.tmpdir()
      local r = h.run({ 'report', EXAMPLES, '--out', out, '--no-plots' })
      assert.are.equal(0, r.code, r.stderr)
      local md = h.read(out .. '/report.md')
      for _, label in ipairs({ 'MFU (%, higher is better)',
        'GPU energy/token (J, lower is better)' }) do
        local want = text_means(recipe.stdout, label)
        assert.is_truthy(want.amd and want.nvd, label .. ' not in the recipe\'s summary')
        assert.are.same(want, md_means(md, label))
      end
      assert.are.same({ amd = '36.45', nvd = '40.95' }, md_means(md, 'MFU (%, higher is better)'))
      -- The GPU comes from the platform, and the report says so.
      assert.truthy(md:find('| Peak divisor (amd) | mi300x (assumed from the platform amd: the '
        .. 'records name no GPU; --hardware amd=ID sets it) bf16 1307.4 TFLOP/s dense |', 1, true),
        md)
      assert.truthy(md:find('| Energy basis (nvd) | estimated: 8 GPUs x h100-sxm (assumed from '
        .. 'the platform nvd', 1, true))
      assert.truthy(md:find('(statistics, assumed\\_hardware): amd: the records name no GPU', 1,
        true))
      -- Each run's own MFU and J/token in the runs table.
      assert.truthy(md:find('| amd-primus-e84adbb11776-r1 | amd | primus | llama3.1-8b |  | 8 | '
        .. '64 | 2048 | bf16 | 6 | 1.6054 | 10205.7 | 36.41 | 0.07349 |', 1, true), md)
      -- A GPU given with --hardware is the one used, and named as given.
      local given = h.run({ 'report', EXAMPLES, '--out', out, '--no-plots', '--hardware',
        'amd=mi325x' })
      assert.are.equal(0, given.code, given.stderr)
      assert.truthy(h.read(out .. '/report.md'):find('| Energy basis (amd) | estimated: 8 GPUs x '
        .. 'mi325x TDP 1000 W x time (upper bound) |', 1, true))
    end)

  it('prefers a measured energy per token to the TDP estimate, and labels it measured',
    function()
      local dir = h.tmpdir()
      local json = require('tp.json')
      for _, p in ipairs({ 'amd', 'nvd' }) do
        for i = 1, 3 do
          local name = string.format('%s/%s-r%d.json', p, p == 'amd' and 'primus' or 'megatron',
            i)
          local doc = assert(json.load_file(h.fixture('results/fair/' .. name)))
          if p == 'amd' then
            doc.energy_metrics = { joules_per_token = 0.05 + i / 1000 }
          end
          os.execute('mkdir -p ' .. h.shquote(dir .. '/' .. p))
          h.write(dir .. '/' .. name, assert(json.encode(doc)))
        end
      end
      local out = h.tmpdir()
      local r = h.run({ 'report', dir, '--out', out, '--no-plots' })
      assert.are.equal(0, r.code, r.stderr)
      local md = h.read(out .. '/report.md')
      assert.truthy(md:find('| Energy basis (amd) | measured |', 1, true), md)
      assert.are.same({ amd = '0.052', nvd = md_means(md,
        'GPU energy/token (J, lower is better)').nvd }, md_means(md,
        'GPU energy/token (J, lower is better)'))
      assert.truthy(md:find('mixed\\_energy\\_basis', 1, true))
    end)
end)

describe('tplua report --csv', function()
  it('writes the comparison as CSV beside the report, or on stdout with -', function()
    local out = h.tmpdir()
    local csv = out .. '/comparison.csv'
    local r = h.run({ 'report', h.fixture('results/fair'), '--out', out .. '/rep', '--no-plots',
      '--csv', csv })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('wrote:\n  ' .. out .. '/rep/report.md\n  ' .. out
      .. '/rep/report.html\n  ' .. csv .. '\n', 1, true), r.stdout)
    local text = assert(h.read(csv))
    local lines = {}
    for line in text:gmatch('([^\r\n]*)\r\n') do
      lines[#lines + 1] = line
    end
    assert.are.equal(3, #lines)
    assert.truthy(lines[1]:find('^platform,baseline,runs,run_ids,frameworks,models,gpu,gpus,'
      .. 'tokens_per_s_n,tokens_per_s_mean,'), lines[1])
    assert.truthy(lines[1]:find(',energy_j_per_token_mean,', 1, true))
    assert.truthy(lines[2]:find('^nvd,yes,3,'), lines[2])
    assert.truthy(lines[3]:find('^amd,no,3,'), lines[3])
    local dash = h.run({ 'report', h.fixture('results/fair'), '--out', out .. '/rep',
      '--no-plots', '--csv', '-' })
    assert.are.equal(0, dash.code, dash.stderr)
    assert.are.equal(text, dash.stdout)
    assert.truthy(dash.stderr:find('Fair comparison.', 1, true), dash.stderr)
    local bad = h.run({ 'report', h.fixture('results/fair'), '--out', out .. '/rep',
      '--no-plots', '--csv', out .. '/missing/x.csv' })
    assert.are.equal(1, bad.code)
    assert.truthy(bad.stderr:find('tplua report: cannot write the CSV: ' .. out
      .. '/missing/x.csv: ', 1, true), bad.stderr)
  end)
end)

describe('tplua report: software stacks', function()
  it('shows each platform\'s stack side by side, - where a record does not say', function()
    local json = require('tp.json')
    local dir = h.tmpdir()
    local envs = {
      nvd = { gpu_stack = { nvidia_driver = '550.54.15', cuda_runtime = '12.4', nccl = '2.21.5' },
        python = { python = '3.10.12', torch = '2.5.1' },
        framework = { name = 'megatron', commit = 'fedcba9876543210fedcba9876543210fedcba98' },
        container = { image = 'nvcr.io/nvidia/pytorch:24.10-py3' } },
      amd = { gpu_stack = { amdgpu_driver = '6.8.5', hip_runtime = '6.2.41134', rccl = '2.20.5' },
        python = { python = '3.10.14', torch = '2.5.0' } },
    }
    for _, p in ipairs({ 'amd', 'nvd' }) do
      os.execute('mkdir -p ' .. h.shquote(dir .. '/' .. p))
      for i = 1, 3 do
        local name = string.format('%s/%s-r%d.json', p, p == 'amd' and 'primus' or 'megatron', i)
        local doc = assert(json.load_file(h.fixture('results/fair/' .. name)))
        doc.environment = envs[p]
        h.write(dir .. '/' .. name, assert(json.encode(doc)))
      end
    end
    local out = h.tmpdir()
    local r = h.run({ 'report', dir, '--out', out, '--no-plots' })
    assert.are.equal(0, r.code, r.stderr)
    local md = h.read(out .. '/report.md')
    for _, line in ipairs({ '## Software stack', '|  | nvd | amd |',
      '| GPU driver | NVIDIA 550.54.15 | amdgpu 6.8.5 |',
      '| CUDA / ROCm runtime | CUDA 12.4 | HIP 6.2.41134 |',
      '| NCCL / RCCL | NCCL 2.21.5 | RCCL 2.20.5 |',
      '| torch | 2.5.1 | 2.5.0 |', '| framework | megatron fedcba987654 | - |',
      '| container image | nvcr.io/nvidia/pytorch:24.10-py3 | - |' }) do
      assert.truthy(md:find(line, 1, true), line .. '\n' .. md)
    end
    local html = h.read(out .. '/report.html')
    assert.truthy(html:find('<section id="stack"><h2>Software stack</h2>', 1, true))
    assert.truthy(html:find('<td>framework</td>\n<td>megatron fedcba987654</td>\n<td>-</td>', 1,
      true))
    -- Old records: the section says so and shows '-'.
    local old = h.run({ 'report', h.fixture('results/fair'), '--out', out, '--no-plots' })
    assert.are.equal(0, old.code, old.stderr)
    md = h.read(out .. '/report.md')
    assert.truthy(md:find('The records carry no environment', 1, true))
    assert.truthy(md:find('| GPU driver | - | - |', 1, true))
  end)
end)
