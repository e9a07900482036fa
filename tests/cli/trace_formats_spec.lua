-- tplua trace on other tools' outputs: rocprofv3's kernel-trace CSV (with the memory copy trace
-- beside it) and Nsight Systems' SQLite export, real files from tests/fixtures/traces (SOURCES.md).
-- The figures were computed by another route (Python's csv and sqlite3 modules), never from
-- tplua's output. Then damaged copies: clear errors naming the file and the line or the table.
local h = require('helper')
local json = require('tp.json')

local DIR = h.fixture('traces')

local function has(s, want)
  return s:find(want, 1, true) ~= nil
end

describe('tplua trace on rocprofv3 CSV and Nsight Systems SQLite', function()
  it('reads a rocprofv3 kernel trace and the memory copy trace beside it', function()
    local r = h.run({ 'trace', DIR .. '/rocprofv3_sdk_docs_kernel_trace.csv', '--top', '5' })
    assert.are.equal('', r.stderr)
    assert.are.equal(0, r.code)
    local out = r.stdout
    assert.is_truthy(has(out, '12 events, 12 GPU ops (5 distinct names), 0 launches, 0 profiler '
      .. 'steps (none: one step holds every op), 0 ops in no step'))
    -- window 81.176 ms, busy 0.496, compute 0.093 (the 8 kernels), non-compute 0.403 (4 copies)
    assert.is_truthy(has(out,
      '\n  0             81.176  80.680  99.4%    0.093  0.1%        0.403'))
    assert.is_truthy(has(out, '\n  memcpy_h2d   memory    4      0.403    0.403'))
    assert.is_truthy(has(out, 'Memcpy HtoD (Host -> Device)'))
    assert.is_truthy(has(out, 'divide_kernel(float*, float const*, float const*, int, int)'))
  end)

  it('reads the three header generations of rocprofv3 (gzip too)', function()
    local r = h.run({ 'trace', DIR .. '/rocprofv3_vcopy_mi300x_kernel_trace.csv' })
    assert.are.equal(0, r.code)
    assert.is_truthy(has(r.stdout, '3 events, 3 GPU ops (1 distinct names)'))
    assert.is_truthy(has(r.stdout, '\n  0              0.068  0.049  71.7%    0.019  28.3%'))
    assert.is_truthy(has(r.stdout, 'vecCopy(double*, double*, double*, int, int)'))
    r = h.run({ 'trace', DIR .. '/rocprofv3_sdk_docs_2024_kernel_trace.csv.gz', '--json' })
    assert.are.equal(0, r.code)
    local a = json.decode(r.stdout).ranks[1]
    assert.are.equal(7, a.info.ops)
    assert.is_true(a.info.compressed)
    assert.are.equal(301795, a.steps[1].window)
    assert.are.equal(2370, a.steps[1].idle)
    assert.are.equal(299425, a.steps[1].compute)
  end)

  it('breaks down a real Nsight Systems export (2022.2, MPI + CUDA saxpy on A100)', function()
    local r = h.run({ 'trace', DIR .. '/nsys_saxpy_mpi_a100.sqlite.gz' })
    assert.are.equal('', r.stderr)
    assert.are.equal(0, r.code)
    local out = r.stdout
    assert.is_truthy(has(out, '(NVIDIA A100-SXM4-40GB)'))
    assert.is_truthy(has(out, '139 events, 20 GPU ops (3 distinct names), 95 launches'))
    -- span 1097.328 ms, idle 724.055, compute 88.573, non-compute 284.700, host wait 724.055
    assert.is_truthy(has(out,
      '\n  0           1097.328  724.055  66.0%   88.573  8.1%      284.700'))
    assert.is_truthy(has(out, '724.055         -'))
    assert.is_truthy(has(out,
      'Memcpy HtoD (Pageable -> Device)                  memcpy_h2d     10'))
    assert.is_truthy(has(out, 'saxpy(double *, double *, double *, double, int)'))
  end)

  it('breaks down a real Nsight Systems export (2024.5, CloverLeaf on A100)', function()
    local r = h.run({ 'trace', DIR .. '/nsys_cloverleaf_a100.sqlite.gz', '--json' })
    assert.are.equal(0, r.code)
    local doc = json.decode(r.stdout)
    local a = doc.ranks[1]
    assert.are.equal(1591, a.info.ops)
    assert.are.equal(3048, a.info.launches)
    assert.are.equal(342407810, a.steps[1].window)
    assert.are.equal(303795463, a.steps[1].busy)
    assert.are.equal(294404540, a.steps[1].compute)
    assert.are.equal(38251364, a.steps[1].host_wait)
    assert.are.equal('NVIDIA A100-SXM4-80GB', a.devices[1].name)
  end)

  it('explains the gap between a rocprofv3 CSV and an Nsight Systems export', function()
    local r = h.run({ 'trace', '--compare', DIR .. '/nsys_cloverleaf_a100.sqlite.gz',
      DIR .. '/rocprofv3_sdk_docs_2024_kernel_trace.csv.gz', '--json' })
    assert.are.equal(0, r.code)
    local e = json.decode(r.stdout).explanation
    local sum = 0
    for _, row in ipairs(e.rows) do
      sum = sum + (row.b - row.a)
    end
    assert.is_true(math.abs(sum - e.diff) < 1e-6 * math.abs(e.diff))
  end)

  it('names the file and the line of a damaged CSV, the file of a damaged database', function()
    local dir = h.tmpdir()
    local csv = h.read(DIR .. '/rocprofv3_vcopy_mi300x_kernel_trace.csv')
    local p = dir .. '/bad_kernel_trace.csv'
    h.write(p, csv
      .. '"KERNEL_DISPATCH"x,"Agent 2",2,0,1,4,12,"k",4,1,2,0,0,4,4,16,256,1,1,1,1,1\n')
    local r = h.run({ 'trace', p })
    assert.are.equal(1, r.code)
    assert.is_truthy(has(r.stderr, p .. ': line 5: field 1: a character after its closing quote'))
    -- a row cut short: read up to it, with a warning
    h.write(p, csv:sub(1, #csv - 20))
    r = h.run({ 'trace', p })
    assert.are.equal(0, r.code)
    assert.is_truthy(has(r.stdout, '2 events, 2 GPU ops'))
    assert.is_truthy(has(r.stdout, 'warning: ' .. p .. ': truncated at line 4'))
    -- an SQLite database that is not an Nsight Systems export, and one cut short
    local db = dir .. '/other.sqlite'
    h.write(db, 'SQLite format 3\0' .. string.rep('\0', 200))
    r = h.run({ 'trace', db })
    assert.are.equal(1, r.code)
    assert.is_truthy(has(r.stderr, db .. ': '))
    os.execute('gzip -dc ' .. h.shquote(DIR .. '/nsys_saxpy_mpi_a100.sqlite.gz') .. ' | head -c '
      .. '500000 > ' .. h.shquote(db))
    r = h.run({ 'trace', db })
    assert.are.equal(1, r.code)
    assert.is_truthy(has(r.stderr, db .. ': cannot read the SQLite database: '))
    assert.is_truthy(has(r.stderr, '(the file is cut short: 500000 of the 1613824 bytes'))
  end)
end)
