-- Collective bandwidth through the commands a user runs: `tplua extract` on nccl-tests and
-- rccl-tests outputs (real ones, tests/fixtures/collectives), `tplua compare` of MI300X and H100
-- results side by side with intervals and its --min-busbw gate, `tplua trace --collectives` on
-- the derived multi-rank traces (the injected skew recovered exactly) and with --compare,
-- recipes/collectives.lua planned, checked before launch and run (a stand-in for the program on
-- this machine without GPUs, printing a real output), the history, and `tplua report`'s busbw
-- chart rendered in headless Chromium.
local h = require('helper')
local json = require('tp.json')

local DIR = h.fixture('collectives')
local CHROMIUM = '/usr/bin/chromium'

local function exists(path)
  local f = io.open(path, 'rb')
  if f then
    f:close()
    return true
  end
  return false
end

local function copy_records(out, names)
  assert(os.execute('mkdir -p ' .. h.shquote(out)))
  for _, n in ipairs(names) do
    local r = h.run({ 'extract', DIR .. '/' .. n .. '.log', '--json', out .. '/' .. n .. '.json',
      '--quiet' })
    assert.are.equal(0, r.code, r.stderr)
  end
end

describe('tplua extract on nccl-tests and rccl-tests output', function()
  it('writes a collective_bench record and says what it read', function()
    local out = h.tmpdir() .. '/r.json'
    local r = h.run({ 'extract', DIR .. '/mi300x_8r_all_reduce_aac8.log', '--json', out,
      '--run-id', 'mi300x-ar-1' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('rccl-tests all_reduce over 8 ranks (AMD Instinct MI300X), float, '
      .. '31 sizes 8..8589934592 B, busbw max 315.69 GB/s at 8589934592 B, avg bus bandwidth '
      .. '110.464, status completed', 1, true), r.stdout)
    assert.truthy(r.stdout:find("figures that fit all_reduce's bus factor over 8 ranks: 62 of 62",
      1, true))
    local rec = assert(json.load_file(out))
    assert.are.equal('tplua.run/2', rec.schema)
    assert.are.equal('collective_bench', rec.kind)
    assert.are.equal('mi300x-ar-1', rec.run_id)
    assert.are.equal(64, #rec.source.sha256)
    assert.are.equal(315.69, rec.collectives.tests[1].rows[31].out.busbw)
  end)

  it('reads every fixture, each figure fitting its bus factor', function()
    for _, f in ipairs({ 'a100_8r_all_gather_superbench', 'a100_8r_alltoall_superbench',
      'a100_8r_reduce_scatter_superbench', 'h100_16r_all_reduce_issue290_srun',
      'h100_16r_all_reduce_issue309_mpirun' }) do
      local r = h.run({ 'extract', DIR .. '/' .. f .. '.log' })
      assert.are.equal(0, r.code, r.stderr)
      local fit, total = r.stdout:match('over %d+ ranks: (%d+) of (%d+)')
      assert.are.equal(fit, total, f)
    end
  end)

  it('fails clearly on bad input and bad options', function()
    local tmp = h.tmpdir()
    h.write(tmp .. '/all_reduce_perf.log', '# nThread 1 nGpus 8 minBytes 8\n'
      .. '#       size         count      type   redop    root     time   algbw   busbw #wrong\n'
      .. '           8             2     float     sum      -1    19.x8    0.00    0.00      0\n')
    local r = h.run({ 'extract', tmp .. '/all_reduce_perf.log' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find(tmp .. "/all_reduce_perf.log: line 3: in-place time: '19.x8' "
      .. 'is not what nccl-tests prints there', 1, true), r.stderr)
    r = h.run({ 'extract', DIR .. '/mi300x_8r_all_reduce_aac8.log', '--collective', 'barrier' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("unknown collective 'barrier'", 1, true), r.stderr)
    r = h.run({ 'extract', DIR .. '/mi300x_8r_all_reduce_aac8.log', '--framework', 'megatron' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('not a training framework', 1, true), r.stderr)
  end)
end)

describe('tplua compare on collective results', function()
  local rdir

  setup(function()
    rdir = h.tmpdir() .. '/results'
    copy_records(rdir .. '/mi300x', { 'mi300x_8r_all_reduce_aac8', 'mi300x_8r_all_reduce_rccl1562',
      'mi300x_16r_all_reduce_aac10' })
    copy_records(rdir .. '/h100', { 'h100_8r_all_reduce_issue290',
      'h100_16r_all_reduce_issue290_srun', 'h100_16r_all_reduce_issue290_ring',
      'h100_16r_all_reduce_issue309_mpirun', 'h100_16r_all_reduce_issue309_2of8' })
  end)

  it('prints MI300X and H100 busbw side by side with confidence intervals', function()
    local r = h.run({ 'compare', rdir .. '/mi300x', rdir .. '/h100' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('all_reduce over 8 ranks (float): busbw GB/s by message size',
      1, true), r.stdout)
    -- 128 MiB over 8 ranks: H100 one run (382.99), MI300X two (293.50 and 293.07)
    local line = r.stdout:match('\n  128 MiB[^\n]*382%.99[^\n]*')
    assert.truthy(line, r.stdout)
    assert.truthy(line:find('382.99 n=1', 1, true), line)
    assert.truthy(line:find(string.format('%.2f [293.07, 293.50] n=2', (293.50 + 293.07) / 2), 1,
      true), line)
    assert.truthy(line:find('0.766', 1, true), line)
    -- 8 GiB over 16 ranks: H100 four runs with an interval, MI300X one
    line = r.stdout:match('\n  8 GiB[^\n]*n=4[^\n]*')
    assert.truthy(line, r.stdout)
    assert.truthy(line:find('356.14 n=1', 1, true), line)
    local mean, lo, hi = line:match('(%d+%.%d+) %[(%d+%.%d+), (%d+%.%d+)%] n=4')
    assert.is_true(math.abs(tonumber(mean) - (155.57 + 89.90 + 468.46 + 466.73) / 4) < 0.0051)
    assert.is_true(tonumber(lo) < tonumber(mean) and tonumber(mean) < tonumber(hi))
  end)

  it('gates: exit 4 below --min-busbw, 0 above', function()
    local r = h.run({ 'compare', rdir .. '/mi300x', rdir .. '/h100', '--min-busbw', '500' })
    assert.are.equal(4, r.code, r.stderr)
    assert.truthy(r.stdout:find('gate --min-busbw 500: FAILED', 1, true))
    assert.truthy(r.stdout:find('FAIL mi300x, all_reduce over 8 ranks (float): 315.69 GB/s at 8 '
      .. 'GiB < 500.00', 1, true), r.stdout)
    assert.truthy(r.stdout:find('FAIL h100-sxm, all_reduce over 8 ranks (float): 473.60 GB/s at '
      .. '4 GiB < 500.00', 1, true), r.stdout)
    r = h.run({ 'compare', rdir .. '/mi300x', rdir .. '/h100', '--min-busbw', '250@1G' })
    assert.are.equal(0, r.code, r.stdout)
    assert.truthy(r.stdout:find('gate --min-busbw 250@1G: passed', 1, true))
    r = h.run({ 'compare', rdir, '--min-busbw', 'fast' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("option '--min-busbw': 'fast': GBPS[@SIZE] expected", 1, true))
    r = h.run({ 'compare', rdir, '--by', 'framework' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("option '--by' is not for nccl-tests or rccl-tests results", 1,
      true), r.stderr)
    r = h.run({ 'compare', h.fixture('results/fair'), '--min-busbw', '100' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('are for nccl-tests or rccl-tests results', 1, true), r.stderr)
  end)

  it('compares the tools\' own logs and writes JSON and the chart', function()
    local out = h.tmpdir()
    local r = h.run({ 'compare', DIR .. '/mi300x_8r_all_reduce_aac8.log',
      DIR .. '/h100_8r_all_reduce_issue290.log', '--json', '--plot', out .. '/busbw.svg' })
    assert.are.equal(0, r.code, r.stderr)
    local doc = assert(json.decode(r.stdout))
    assert.are.equal('tplua.compare.collectives/1', doc.schema)
    assert.are.same({ 'h100-sxm', 'mi300x' }, doc.comparison.tables[1].labels)
    local svg = assert(h.read(out .. '/busbw.svg'))
    assert.truthy(svg:find('<svg', 1, true))
    assert.truthy(svg:find('mi300x', 1, true) and svg:find('h100-sxm', 1, true))
  end)
end)

describe('tplua trace --collectives', function()
  it('recovers the injected skew and the late rank across the derived ranks', function()
    local r = h.run({ 'trace', DIR .. '/resnet_ddp8_derived', '--collectives', '--json' })
    assert.are.equal(0, r.code, r.stderr)
    local doc = assert(json.decode(r.stdout))
    local x = doc.collectives
    local want = assert(json.load_file(DIR .. '/resnet_ddp8_derived_expected.json'))
    assert.are.equal(#want.instances, #x.instances)
    local by_start = {}
    for _, inst in ipairs(x.instances) do
      by_start[#by_start + 1] = inst
    end
    table.sort(by_start, function(a, b)
      return a.starts[1] < b.starts[1]
    end)
    for i, w in ipairs(want.instances) do
      assert.are.equal(w.skew_ns, by_start[i].skew)
      assert.are.equal(w.late_rank, by_start[i].late_rank)
      assert.are.equal(w.latency_ns, by_start[i].latency)
    end
    assert.are.equal(5, x.late_rank)
    r = h.run({ 'trace', DIR .. '/resnet_ddp8_derived', '--collectives' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('the rank that arrives last most often: 5 (11 of 17 collectives)',
      1, true), r.stdout)
    assert.truthy(r.stdout:find('across 8 ranks: 17 collectives matched', 1, true))
    -- one profiler step: its collectives only (two broadcasts and two all-reduces)
    r = h.run({ 'trace', DIR .. '/resnet_ddp8_derived/rank3.json.gz', '--collectives', '--step',
      '16', '--json' })
    assert.are.equal(0, r.code, r.stderr)
    doc = assert(json.decode(r.stdout))
    assert.are.equal(4, doc.ranks[1].collectives.count)
  end)

  it('sets two runs side by side by collective and message size', function()
    local r = h.run({ 'trace', '--compare', DIR .. '/resnet_ddp8_derived',
      h.fixture('traces/vllm_b200_tp8_rank0.json.gz'), '--collectives', '--label-a', 'MI300X',
      '--label-b', 'B200' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('collectives side by side: busbw GB/s by collective and message '
      .. 'size (MI300X: over latency; B200: over kernel time)', 1, true), r.stdout)
    assert.truthy(r.stdout:find('\n  all_gather  256 KiB+', 1, true), r.stdout)
    assert.truthy(r.stdout:find('\n  all_reduce   16 MiB+', 1, true), r.stdout)
  end)
end)

describe('recipes/collectives.lua', function()
  local function stand_in(dir, fixture)
    assert(os.execute('mkdir -p ' .. h.shquote(dir)))
    -- A stand-in for rccl-tests' program (this machine has no GPU): it prints a real output.
    h.write(dir .. '/all_reduce_perf', '#!/bin/sh\ncat ' .. h.shquote(DIR .. '/' .. fixture)
      .. '\n')
    assert(os.execute('chmod +x ' .. h.shquote(dir .. '/all_reduce_perf')))
  end

  it('plans one run per collective, refuses the ranks launcher', function()
    local r = h.run({ 'plan', h.source_dir .. '/recipes/collectives.lua' },
      { env = { TPLUA_COLLECTIVES = 'all_reduce,broadcast', TPLUA_COLLECTIVES_DIR = '/x/build',
        TPLUA_COLLECTIVES_GPUS = '4' } })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('/x/build/all_reduce_perf -b 8 -e 8G -f 2 -g 4 -n 20 -w 5 -d '
      .. 'float -o sum -c 1 -N 1', 1, true), r.stdout)
    assert.truthy(r.stdout:find('/x/build/broadcast_perf', 1, true))
    r = h.run({ 'plan', h.source_dir .. '/recipes/collectives.lua' },
      { env = { TPLUA_COLLECTIVES_LAUNCHER = 'ranks' } })
    assert.are_not.equal(0, r.code)
    assert.truthy(r.stderr:find('ranks cannot start nccl-tests or rccl-tests', 1, true), r.stderr)
  end)

  it('fails its preflight when the program is not there', function()
    local r = h.run({ 'preflight', h.source_dir .. '/recipes/collectives.lua' },
      { env = { TPLUA_COLLECTIVES = 'all_reduce', TPLUA_COLLECTIVES_DIR = '/nonexistent/build',
        TPLUA_COLLECTIVES_GPUS = '1' } })
    assert.are_not.equal(0, r.code)
    assert.truthy((r.stdout .. r.stderr):find('/nonexistent/build/all_reduce_perf does not '
      .. 'exist or cannot be executed', 1, true), r.stdout .. r.stderr)
  end)

  it('runs it, its record of kind collective_bench landing in the history', function()
    local tmp = h.tmpdir()
    stand_in(tmp .. '/bin', 'mi300x_8r_all_reduce_aac8.log')
    local env = { TPLUA_COLLECTIVES = 'all_reduce', TPLUA_COLLECTIVES_DIR = tmp .. '/bin',
      TPLUA_COLLECTIVES_VENDOR = 'amd', TPLUA_COLLECTIVES_GPUS = '8',
      TPLUA_HISTORY = tmp .. '/history.db' }
    local r = h.run({ 'run', h.source_dir .. '/recipes/collectives.lua', '--results',
      tmp .. '/out', '--skip-preflight' }, { env = env })
    assert.are.equal(0, r.code, r.stderr)
    local rec = assert(json.load_file(tmp .. '/out/rccl-all_reduce-1x8.json'))
    assert.are.equal('collective_bench', rec.kind)
    assert.are.equal('rccl-tests', rec.framework)
    assert.are.equal('completed', rec.status)
    assert.are.equal(62, rec.collectives.tests[1].consistent)
    r = h.run({ 'history', 'list', '--db', tmp .. '/history.db' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('rccl-tests@-/all_reduce float/', 1, true), r.stdout)
    r = h.run({ 'compare', tmp .. '/out', DIR .. '/h100_8r_all_reduce_issue290.log' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('mi300x/h100-sxm', 1, true))
  end)
end)

describe('recipes/collectives.lua through Slurm', function()
  local cluster_mod = require('slurm_cluster')
  local ok, why = cluster_mod.available()
  if not ok then
    it('runs one task per GPU across two nodes', function()
      pending(why)
    end)
    return
  end
  local cluster
  setup(function()
    cluster = cluster_mod.start()
  end)
  teardown(function()
    if cluster then
      cluster:stop()
    end
  end)

  it('runs one task per GPU across two nodes', function()
    local tmp = h.tmpdir()
    assert(os.execute('mkdir -p ' .. h.shquote(tmp .. '/bin')))
    -- Each task a stand-in for rccl-tests' program (no GPU here) printing a real two-node output.
    h.write(tmp .. '/bin/all_reduce_perf', '#!/bin/sh\ncat '
      .. h.shquote(DIR .. '/mi300x_16r_all_reduce_aac10.log') .. '\n')
    assert(os.execute('chmod +x ' .. h.shquote(tmp .. '/bin/all_reduce_perf')))
    local env = { SLURM_CONF = cluster.conf, TPLUA_COLLECTIVES = 'all_reduce',
      TPLUA_COLLECTIVES_DIR = tmp .. '/bin', TPLUA_COLLECTIVES_VENDOR = 'amd',
      TPLUA_COLLECTIVES_LAUNCHER = 'slurm', TPLUA_COLLECTIVES_NODES = '2',
      TPLUA_COLLECTIVES_GPUS = '1', TPLUA_SLURM_DIR = tmp .. '/slurm', TPLUA_SLURM_GPUS = '0' }
    local r = h.run({ 'run', h.source_dir .. '/recipes/collectives.lua', '--results',
      tmp .. '/out', '--skip-preflight' }, { env = env, timeout = 300 })
    assert.are.equal(0, r.code, r.stdout .. r.stderr .. cluster:logs())
    local rec = assert(json.load_file(tmp .. '/out/rccl-all_reduce-2x1.json'))
    assert.are.equal('COMPLETED', rec.slurm.state)
    assert.are.same({ 'n1', 'n2' }, rec.slurm.nodes)
    assert.are.equal('collective_bench', rec.kind)
    local t = rec.collectives.tests[1]
    assert.are.equal(16, t.ranks)
    assert.are.equal(64, t.consistent)
  end)
end)

describe('tplua report on collective results', function()
  it('draws busbw by size, both vendors on one chart, in a page that renders', function()
    local rdir = h.tmpdir() .. '/results'
    copy_records(rdir, { 'mi300x_8r_all_reduce_aac8', 'h100_8r_all_reduce_issue290' })
    local out = h.tmpdir() .. '/report'
    local r = h.run({ 'report', rdir, '--out', out })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('Collective benchmarks', 1, true), r.stdout)
    local md = assert(h.read(out .. '/report.md'))
    assert.truthy(md:find('## Collectives', 1, true))
    assert.truthy(md:find('| 128 MiB | 382.99 n=1 | 293.50 n=1 |', 1, true), md)
    assert.truthy(exists(out .. '/collectives.png'))
    local svg = assert(h.read(out .. '/collectives.svg'))
    assert.truthy(svg:find('mi300x', 1, true) and svg:find('h100-sxm', 1, true))
    if not exists(CHROMIUM) then
      pending('chromium is not installed: cannot render the HTML')
      return
    end
    local args = { '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--user-data-dir=' .. h.tmpdir(),
      '--enable-logging=stderr', '--v=0', '--dump-dom', 'file://' .. out .. '/report.html' }
    local d = h.run(args, { bin = CHROMIUM })
    for line in d.stderr:gmatch('[^\n]+') do
      assert.is_nil(line:find('CONSOLE', 1, true) or line:find('Uncaught', 1, true), line)
    end
    local sec = d.stdout:match('<section id="collectives">(.-)</section>')
    assert.truthy(sec, 'no collectives section in the rendered page')
    assert.truthy(sec:find('all_reduce over 8 ranks (float)', 1, true))
    assert.truthy(d.stdout:find('Collective bandwidth (busbw by message size)', 1, true))
  end)
end)
