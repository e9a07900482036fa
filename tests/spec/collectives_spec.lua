-- tp.parse.collectives, tp.analyse.collectives and the collectives of traces
-- (tp.analyse._trace_comm): the bus factors per collective and world size; every figure of every
-- nccl-tests / rccl-tests fixture (real outputs, tests/fixtures/collectives/SOURCES.md) as the
-- tool printed it; the output's variants (srun and mpirun prefixes, interleaved lines, old
-- columns, in-place only, per-iteration columns, cycles); bad input; the comparison with its
-- seeded intervals and the gate; and the skew injected into the derived multi-rank traces
-- recovered exactly.
local h = require('helper')
local pc = require('tp.parse.collectives')
local ac = require('tp.analyse.collectives')

local DIR = h.fixture('collectives')

-- Rows read (size > 0 and a time) and the figures' columns, counted from the text by an
-- independent script (tests/fixtures/collectives/SOURCES.md, "Expected values").
local FIXTURES = {
  { 'a100_8r_all_gather_superbench.log', 'all_gather', 8, 34, 58, 58.2651 },
  { 'a100_8r_all_reduce_superbench.log', 'all_reduce', 8, 34, 64, 68.4048 },
  { 'a100_8r_alltoall_superbench.log', 'all_to_all', 8, 34, 58, 58.6481 },
  { 'a100_8r_broadcast_superbench.log', 'broadcast', 8, 34, 64, 64.8653 },
  { 'a100_8r_reduce_scatter_superbench.log', 'reduce_scatter', 8, 34, 58, 60.168 },
  { 'a100_8r_reduce_superbench.log', 'reduce', 8, 34, 64, 65.018 },
  { 'h100_16r_all_reduce_issue290_ring.log', 'all_reduce', 16, 11, 22, 85.5294 },
  { 'h100_16r_all_reduce_issue290_srun.log', 'all_reduce', 16, 11, 22, 142.735 },
  { 'h100_16r_all_reduce_issue309_2of8.log', 'all_reduce', 16, 14, 28, 276.999 },
  { 'h100_16r_all_reduce_issue309_mpirun.log', 'all_reduce', 16, 32, 64, 139.56 },
  { 'h100_8r_all_reduce_issue290.log', 'all_reduce', 8, 6, 12, 439.369 },
  { 'mi300x_16r_all_reduce_aac10.log', 'all_reduce', 16, 32, 64, 92.3318 },
  { 'mi300x_8r_all_reduce_aac8.log', 'all_reduce', 8, 31, 62, 110.464 },
  { 'mi300x_8r_all_reduce_rccl1562.log', 'all_reduce', 8, 25, 50, 54.8575 },
}

local function lines_of(path)
  local out = {}
  for l in io.lines(path) do
    out[#out + 1] = l
  end
  return out
end

-- The printed (time, algbw, busbw) of a section of the row on `line`, split here from the text:
-- the last eight fields are out-of-place and in-place, four each.
local function printed(line, section)
  local t = {}
  for w in line:gsub('^%s*%d+: ', ''):gmatch('%S+') do
    t[#t + 1] = w
  end
  local at = section == 'out' and #t - 7 or #t - 3
  return t[at], t[at + 1], t[at + 2]
end

local function decimals(s)
  return #(s:match('%.(%d+)$') or '')
end

describe('bus factors', function()
  it('are those nccl-tests defines, per collective and world size', function()
    for _, n in ipairs({ 1, 2, 3, 8, 16, 64, 1024 }) do
      assert.are.equal(2 * (n - 1) / n, pc.bus_factor('all_reduce', n))
      for _, k in ipairs({ 'all_gather', 'reduce_scatter', 'all_to_all', 'gather', 'scatter' }) do
        assert.are.equal((n - 1) / n, pc.bus_factor(k, n), k)
      end
      for _, k in ipairs({ 'broadcast', 'reduce', 'send_recv', 'hypercube' }) do
        assert.are.equal(1, pc.bus_factor(k, n), k)
      end
    end
    assert.are.equal(1.75, pc.bus_factor('all_reduce', 8))
    assert.are.equal(0.9375, pc.bus_factor('all_gather', 16))
    local f, err = pc.bus_factor('barrier', 8)
    assert.is_nil(f)
    assert.truthy(err:find("unknown collective 'barrier'", 1, true))
    assert.is_nil((pc.bus_factor('all_reduce', 0)))
    assert.is_nil((pc.bus_factor('all_reduce', 2.5)))
  end)

  it('names the collectives of programs, kernels and the profiler', function()
    local cases = { all_reduce_perf = 'all_reduce', alltoall_perf = 'all_to_all',
      reduce_scatter_perf = 'reduce_scatter', sendrecv_perf = 'send_recv',
      ['ncclDevKernel_AllGather_RING_LL'] = 'all_gather', _allgather_base = 'all_gather',
      reduce_scatter_tensor = 'reduce_scatter', allreduce = 'all_reduce',
      broadcast = 'broadcast', reduce = 'reduce', all_to_all_single = 'all_to_all' }
    for name, kind in pairs(cases) do
      assert.are.equal(kind, pc.kind_of(name), name)
    end
    assert.is_nil(pc.kind_of('barrier'))
    assert.is_nil(pc.kind_of('ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)'))
  end)
end)

describe('nccl-tests and rccl-tests fixtures', function()
  for _, fx in ipairs(FIXTURES) do
    local name, kind, ranks, nrows, nfig, avg = table.unpack(fx)
    it(name .. ': tplua\'s algbw and busbw equal the printed figures', function()
      local path = DIR .. '/' .. name
      local r = assert(pc.parse(path))
      assert.are.equal(1, #r.tests)
      local t = r.tests[1]
      assert.are.equal(kind, t.collective)
      assert.are.equal(ranks, t.ranks)
      local text = lines_of(path)
      local rows, figures, sum, cols = 0, 0, 0, 0
      for _, row in ipairs(t.rows) do
        for _, sec in ipairs({ 'out', 'in' }) do
          local tm, al, bu = printed(text[row.line], sec)
          sum, cols = sum + tonumber(bu), cols + 1
          if row.size > 0 and tonumber(tm) > 0 then
            local ok, algbw, busbw = pc.check(kind, ranks, row.size, tm, al, bu)
            assert.is_true(ok, string.format('%s line %d %s', name, row.line, sec))
            assert.are.equal(al, string.format('%.' .. decimals(al) .. 'f', algbw))
            assert.are.equal(bu, string.format('%.' .. decimals(bu) .. 'f', busbw))
            figures = figures + 1
          end
        end
        rows = rows + (row.size > 0 and 1 or 0)
      end
      assert.are.equal(nfig, figures)
      assert.are.equal(nfig, t.checked)
      assert.are.equal(nfig, t.consistent)
      assert.is_true(rows <= nrows)
      assert.are.equal(nrows, #t.rows)
      -- nccl-tests' average is over every busbw it printed, both sections: every row was read.
      assert.are.equal(avg, t.avg_busbw)
      assert.is_true(math.abs(sum / cols - avg) < 0.002, tostring(sum / cols))
    end)
  end

  it('rejects a wrong bus factor on the figures that can tell', function()
    local rejected, seen = 0, 0
    for _, fx in ipairs(FIXTURES) do
      local t = assert(pc.parse(DIR .. '/' .. fx[1])).tests[1]
      local wrong = t.collective == 'all_reduce' and 'all_gather' or (pc.bus_factor(t.collective,
        t.ranks) == 1 and 'all_reduce' or 'broadcast')
      for _, row in ipairs(t.rows) do
        local c = row.out
        if row.size > 0 and c.algbw >= 10 then
          seen = seen + 1
          if not pc.check(wrong, t.ranks, row.size, c.text.time, c.text.algbw, c.text.busbw) then
            rejected = rejected + 1
          end
        end
      end
    end
    assert.is_true(seen > 150)
    assert.are.equal(seen, rejected)
  end)

  it('reads the header: tool, versions, devices, hosts, command', function()
    local r = assert(pc.parse(DIR .. '/mi300x_16r_all_reduce_aac10.log'))
    assert.are.equal('rccl-tests', r.tool)
    assert.are.equal('develop:448c4c7', r.tool_version)
    assert.are.equal('RCCL', r.library)
    assert.are.equal('2.22.3-HEAD:7d8d67c', r.library_version)
    assert.are.equal('6.4.2.0-120-e7d83f5', r.rocm_version)
    local t = r.tests[1]
    assert.are.equal(2, t.hosts)
    assert.are.equal('AMD Instinct MI300X', t.gpu)
    assert.are.same({ rank = 8, pid = 366643, host = 'gpu-56', device = 0, bus = '0000:05:00.0',
      name = 'AMD Instinct MI300X' }, t.devices[9])
    assert.are.equal('command', t.collective_source)
    assert.truthy(t.command:find('mpirun -np 16 -H gpu-53:8,gpu-56:8', 1, true))
    local tail = 'all_reduce_perf -b 8 -e 16G -f 2 -g 1'
    assert.are.equal(tail, t.command:sub(-#tail))
    assert.are.same({ nthread = 1, ngpus = 1, min_bytes = 8, max_bytes = 17179869184, step = 2,
      step_kind = 'factor', warmup_iters = 5, iters = 20, agg_iters = 1, validation = 1,
      graph = 0 }, t.params)
    assert.are.equal(0, t.oob)
    r = assert(pc.parse(DIR .. '/h100_16r_all_reduce_issue309_mpirun.log'))
    assert.are.equal('NCCL', r.library)
    assert.are.equal('2.26.2+cuda12.8', r.library_version)
    assert.are.equal('all_reduce_perf', r.tests[1].program)
    -- srun --label prefixes, no nThread line
    t = assert(pc.parse(DIR .. '/h100_16r_all_reduce_issue290_ring.log')).tests[1]
    assert.is_nil(t.params)
    assert.are.equal(16, t.ranks)
    assert.are.equal(179148, t.rows[#t.rows].out.time_us)
    assert.is_nil(t.rows[1].out.wrong)  -- N/A
  end)

  it('reads old columns: no root, an error column, a blank redop, NCCL INFO lines', function()
    local t = assert(pc.parse(DIR .. '/a100_8r_alltoall_superbench.log')).tests[1]
    assert.is_nil(t.rows[6].redop)
    assert.are.equal(32, t.rows[6].size)
    t = assert(pc.parse(DIR .. '/a100_8r_broadcast_superbench.log')).tests[1]
    assert.are.equal(0, t.rows[1].root)
    assert.is_nil(t.rows[1].redop)
    t = assert(pc.parse(DIR .. '/a100_8r_reduce_superbench.log')).tests[1]
    assert.are.equal('sum', t.rows[1].redop)
  end)
end)

-- A table as nccl-tests prints it, from a template's lines.
local HEADER = '#\n#                                                              out-of-place'
  .. '                       in-place          \n'
  .. '#       size         count      type   redop    root     time   algbw   busbw #wrong     '
  .. 'time   algbw   busbw #wrong\n'
  .. '#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            '
  .. '(us)  (GB/s)  (GB/s)       \n'
local ROW1 = '     8388608       2097152     float     sum      -1    215.3   38.96   73.04    N/A'
  .. '    180.0   46.60   87.38    N/A\n'
local ROW2 = '    16777216       4194304     float     sum      -1    262.9   63.81  119.65    N/A'
  .. '    261.9   64.05  120.10    N/A\n'
local DEVICES = ''
for i = 0, 15 do
  DEVICES = DEVICES .. string.format('#  Rank %2d Group  0 Pid 1 on h%d device %2d [0x18] '
    .. 'NVIDIA H100 80GB HBM3\n', i, i // 8, i % 8)
end

describe('output variants', function()
  it('counts cycles (-N): the sweep starting again', function()
    local text = '# Collective test starting: all_reduce_perf\n' .. DEVICES .. HEADER .. ROW1
      .. ROW2 .. ROW1 .. ROW2 .. '# Avg bus bandwidth    : 100\n'
    local t = assert(pc.parse(text, { text = true })).tests[1]
    assert.are.equal(2, t.cycles)
    assert.are.same({ 1, 1, 2, 2 }, { t.rows[1].cycle, t.rows[2].cycle, t.rows[3].cycle,
      t.rows[4].cycle })
    assert.are.equal('header', t.collective_source)
  end)

  it('reads an in-place-only table and per-iteration columns', function()
    local only = '# Collective test starting: all_reduce_perf\n' .. DEVICES .. '#\n'
      .. '#                                                              in-place          \n'
      .. '#       size         count      type   redop    root     time   algbw   busbw #wrong\n'
      .. '#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n'
      .. '     8388608       2097152     float     sum      -1    180.0   46.60   87.38      0\n'
    local t = assert(pc.parse(only, { text = true })).tests[1]
    assert.is_nil(t.rows[1].out)
    assert.are.equal(87.38, t.rows[1]['in'].busbw)
    assert.are.equal(1, t.consistent)
    local iter = '# Collective test starting: all_reduce_perf\n' .. DEVICES .. '#\n'
      .. '#        size         count      type   redop    root     time   algbw   busbw  #wrong'
      .. '    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max'
      .. '    i_p99    i_cv%\n'
      .. '     8388608       2097152     float     sum      -1    215.3   38.96   73.04       0'
      .. '   210.00   230.10   229.00     2.10    180.0   46.60   87.38       0   175.00   190.00'
      .. '   189.00     1.50\n'
    t = assert(pc.parse(iter, { text = true })).tests[1]
    assert.are.equal(230.1, t.rows[1].out.i_max)
    assert.are.equal(1.5, t.rows[1]['in'].i_cv)
    assert.are.equal(2, t.consistent)
  end)

  it('splits several tests of one log, each with its program', function()
    local text = '# Collective test starting: all_reduce_perf\n' .. DEVICES .. HEADER .. ROW1
      .. '# Avg bus bandwidth    : 80\n# Collective test concluded: all_reduce_perf\n'
      .. '# Collective test starting: broadcast_perf\n' .. DEVICES .. HEADER
      .. '     8388608       2097152     float    none       0    100.0   83.89   83.89      0'
      .. '    100.0   83.89   83.89      0\n'
    local r = assert(pc.parse(text, { text = true }))
    assert.are.equal(2, #r.tests)
    assert.are.equal('all_reduce', r.tests[1].collective)
    assert.are.equal('broadcast', r.tests[2].collective)
    assert.are.equal(2, r.tests[2].consistent)
  end)

  it('needs the collective when nothing says it, and takes it from the columns or the caller',
    function()
      local text = DEVICES .. HEADER .. ROW1
      local r, err, code = pc.parse(text, { text = true, name = 'x.log' })
      assert.is_nil(r)
      assert.are.equal('EPARSE', code)
      assert.truthy(err:find('x.log: line 21: cannot tell which collective', 1, true), err)
      r = assert(pc.parse(text, { text = true, name = 'x.log', collective = 'all_reduce' }))
      assert.are.equal('option', r.tests[1].collective_source)
      local bc = DEVICES .. HEADER .. '     8388608       2097152     float    none       0    '
        .. '100.0   83.89   83.89      0    100.0   83.89   83.89      0\n'
      r = assert(pc.parse(bc, { text = true, name = 'x.log' }))
      assert.are.equal('broadcast', r.tests[1].collective)
      assert.are.equal('columns', r.tests[1].collective_source)
      -- a wrong collective shows as figures that do not fit its bus factor
      r = assert(pc.parse(DEVICES .. HEADER .. ROW1 .. ROW2, { text = true,
        name = 'all_gather.log' }))
      assert.are.equal(0, r.tests[1].consistent)
      assert.truthy(r.tests[1].warnings[1]:find('4 of 4 figures do not fit all_gather', 1, true))
    end)
end)

describe('bad input', function()
  local function fails(text, want, opts)
    opts = opts or {}
    opts.text, opts.name = true, 'bad.log'
    local r, err, code = pc.parse(text, opts)
    assert.is_nil(r)
    assert.are.equal('EPARSE', code)
    assert.truthy(err:find(want, 1, true), err)
  end

  it('says what is wrong, naming the file and the line or field', function()
    fails('', 'bad.log: empty file')
    fails('# nThread 1 nGpus 8\n\0\1\2', 'bad.log: line 2: binary data')
    fails('hello\nworld\n', 'bad.log: no nccl-tests or rccl-tests result table')
    fails(DEVICES .. HEADER .. ROW1:gsub('38%.96', 'x38'), 'bad.log: line 21: out-of-place '
      .. "algbw: 'x38' is not what nccl-tests prints there", { collective = 'all_reduce' })
    fails(DEVICES .. HEADER .. ROW1:gsub('float', '12'), 'line 21: type', { collective =
      'all_reduce' })
    fails(DEVICES .. HEADER .. ROW1 .. ROW2:gsub('\n$', ' 7\n'), "line 22: end of row: '7'",
      { collective = 'all_reduce' })
  end)

  it('keeps the rows before a cut inside the last row, with a warning', function()
    local text = DEVICES .. HEADER .. ROW1 .. ROW2:sub(1, 60)
    local r = assert(pc.parse(text, { text = true, name = 'cut.log', collective = 'all_reduce' }))
    assert.are.equal(1, #r.tests[1].rows)
    assert.truthy(r.warnings[1]:find('cut.log: line 22: cut short inside a row', 1, true),
      r.warnings[1])
    local rec = pc.record(r)
    assert.are.equal('unknown', rec.status)
    assert.are.equal('truncated', rec.outcome)
  end)

  it('reads a huge output in bounded time', function()
    local rows = {}
    for i = 1, 100000 do
      rows[i] = ROW1
    end
    local text = DEVICES .. HEADER .. table.concat(rows)
    local t0 = os.clock()
    local r = assert(pc.parse(text, { text = true, name = 'big.log', collective = 'all_reduce' }))
    assert.are.equal(100000, #r.tests[1].rows)
    assert.are.equal(100000, r.tests[1].cycles)
    assert.is_true(os.clock() - t0 < 20)
  end)

  it('names a missing file', function()
    local r, err, code = pc.parse('/nonexistent/x.log')
    assert.is_nil(r)
    assert.are.equal('ENOENT', code)
    assert.truthy(err:find('/nonexistent/x.log', 1, true))
  end)
end)

describe('records', function()
  it('have kind collective_bench, schema tplua.run/2 and the collectives section', function()
    local r = assert(pc.parse(DIR .. '/mi300x_8r_all_reduce_aac8.log'))
    local rec = pc.record(r, { run_id = 'r1' })
    assert.are.equal('tplua.run/2', rec.schema)
    assert.are.equal('collective_bench', rec.kind)
    assert.are.equal('amd', rec.platform)
    assert.are.equal('rccl-tests', rec.framework)
    assert.are.equal('mi300x', rec.gpu_info.hardware)
    assert.are.equal(8, rec.gpu_info.device_count)
    assert.are.equal('completed', rec.status)
    local t = rec.collectives.tests[1]
    assert.are.equal(31, #t.rows)
    assert.are.equal(315.69, t.rows[31].out.busbw)
    assert.are.equal(47617, t.rows[31].out.time_us)
    assert.are.equal(62, t.consistent)
  end)

  it('fail on wrong elements and out-of-bounds values', function()
    local text = DEVICES .. HEADER .. ROW1:gsub('N/A', '3', 1)
      .. '# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 80\n'
    local rec = pc.record(assert(pc.parse(text, { text = true, collective = 'all_reduce' })))
    assert.are.equal('failed', rec.status)
    assert.are.equal('wrong_results', rec.diagnostics[1].kind)
    assert.are.equal('out_of_bounds', rec.diagnostics[2].kind)
  end)
end)

describe('comparison and gate', function()
  local function results(names)
    local out = {}
    for _, n in ipairs(names) do
      local path = DIR .. '/' .. n
      out[#out + 1] = { path = path, record = pc.record(assert(pc.parse(path)), { path = path }) }
    end
    return out
  end

  it('sets platforms side by side with seeded intervals over repeated runs', function()
    local res = results({ 'mi300x_8r_all_reduce_aac8.log', 'mi300x_8r_all_reduce_rccl1562.log',
      'h100_8r_all_reduce_issue290.log' })
    local cmp = ac.compare(res, { seed = 7, n_boot = 2000 })
    assert.are.equal(1, #cmp.tables)
    local tb = cmp.tables[1]
    assert.are.same({ 'h100-sxm', 'mi300x' }, tb.labels)
    local row
    for _, r in ipairs(tb.rows) do
      if r.size == 134217728 then
        row = r
      end
    end
    local m = row.cells['mi300x']
    assert.are.equal(2, m.n)
    assert.are.equal((293.50 + 293.07) / 2, m.mean)
    assert.is_true(m.lo >= 293.07 and m.hi <= 293.50 and m.lo < m.hi)
    local hcell = row.cells['h100-sxm']
    assert.are.equal(1, hcell.n)
    assert.are.equal(382.99, hcell.mean)
    assert.is_nil(hcell.lo)
    -- the same seed, the same interval
    local again = ac.compare(res, { seed = 7, n_boot = 2000 })
    for _, r in ipairs(again.tables[1].rows) do
      if r.size == 134217728 then
        assert.are.equal(m.lo, r.cells['mi300x'].lo)
        assert.are.equal(m.hi, r.cells['mi300x'].hi)
      end
    end
  end)

  it('gates on busbw at a size or at the best size', function()
    local res = results({ 'mi300x_8r_all_reduce_aac8.log', 'h100_8r_all_reduce_issue290.log' })
    local cmp = ac.compare(res, { seed = 1, n_boot = 100 })
    local g = ac.gate(cmp, assert(ac.parse_gate('300')))
    assert.is_true(g.ok)
    g = ac.gate(cmp, assert(ac.parse_gate('400')))
    assert.is_false(g.ok)
    assert.is_false(g.checks[2].ok)
    assert.are.equal('315.69 GB/s at 8 GiB < 400.00', g.checks[2].why)
    g = ac.gate(cmp, assert(ac.parse_gate('400@1G')))
    assert.is_true(g.checks[1].ok)
    assert.are.equal(465.25, g.checks[1].busbw)
    g = ac.gate(cmp, assert(ac.parse_gate('1@64')))
    assert.is_false(g.checks[1].ok)  -- H100's run starts at 128 MiB
    assert.are.equal('no result at 64 B', g.checks[1].why)
    assert.is_nil((ac.parse_gate('fast')))
    assert.is_nil((ac.parse_gate('0')))
    assert.truthy(select(2, ac.parse_gate('300@2X')):find("the size '2X'", 1, true))
    assert.are.equal(8 * 1024 ^ 3, ac.parse_size('8G'))
    assert.are.equal(65536, ac.parse_size('64K'))
    assert.are.equal(1024, ac.bucket(1500))
    assert.are.equal(0, ac.bucket(0))
  end)
end)

describe('collectives of traces', function()
  local trace = require('tp.analyse.trace')
  local json = require('tp.json')

  it('recovers the skew injected into the derived ranks, the latency and the late rank', function()
    local files = {}
    for r = 0, 7 do
      files[#files + 1] = DIR .. '/resnet_ddp8_derived/rank' .. r .. '.json.gz'
    end
    local run = assert(trace.analyse(files, { collectives = true }))
    local x = run.collectives
    local want = assert(json.load_file(DIR .. '/resnet_ddp8_derived_expected.json'))
    assert.are.equal(#want.instances, #x.instances)
    assert.are.same({}, x.warnings)
    -- The instances in time order (the groups' instances interleave).
    table.sort(x.instances, function(a, b)
      return a.starts[1] < b.starts[1]
    end)
    local late, per_kind = {}, {}
    for i, w in ipairs(want.instances) do
      local inst = x.instances[i]
      assert.are.equal(8, #inst.ranks)
      assert.are.equal(w.skew_ns, inst.skew, 'instance ' .. i)
      assert.are.equal(w.late_rank, inst.late_rank, 'instance ' .. i)
      assert.are.equal(w.latency_ns, inst.latency, 'instance ' .. i)
      assert.are.equal(w.wait_ns_mean, inst.wait, 'instance ' .. i)
      late[w.late_rank] = (late[w.late_rank] or 0) + 1
      per_kind[inst.kind] = (per_kind[inst.kind] or 0) + w.wait_ns_mean
    end
    assert.are.equal(5, x.late_rank)
    assert.are.equal(late[5], x.late_count)
    for _, k in ipairs(x.kinds) do
      assert.are.equal(per_kind[k.kind], k.skew_time, k.kind)
    end
    -- The all-reduces: 2.87 M and 8.82 M bf16 elements over 8 ranks.
    local ar
    for _, k in ipairs(x.kinds) do
      if k.kind == 'all_reduce' then
        ar = k
      end
    end
    assert.are.equal(6, ar.instances)
    local expect_t = 0
    for _, w in ipairs(want.instances) do
      if w.collective == 'allreduce' then
        expect_t = expect_t + w.latency_ns
      end
    end
    local expect_bus = 3 * (2873320 + 8816192) * 2 * 1.75 / expect_t
    assert.is_true(math.abs(ar.latency_busbw - expect_bus) < 1e-9)
    assert.are.equal(expect_t, ar.data_time)
  end)

  it('gives each collective op its size and bandwidth in one trace', function()
    local a = assert(trace.open(h.fixture('traces/vllm_b200_tp8_rank0.json.gz'),
      { collectives = true }))
    local op = a.collectives.ops[1]
    assert.are.equal('all_gather', op.kind)
    assert.are.equal(201088 * 2, op.bytes)
    assert.are.equal(8, op.ranks)
    assert.are.equal(21953, op.dur)
    assert.are.equal(201088 * 2 / 21953, op.algbw)
    assert.are.equal(201088 * 2 / 21953 * 7 / 8, op.busbw)
    assert.are.equal('kernel', op.source)
  end)
end)
