-- tplua compare: the real binary on the result fixtures; exit status 0 for a valid comparison,
-- 3 when the audit finds errors, 1 when nothing loads, 2 on usage errors; --json.
local h = require('helper')
local json = require('tp.json')

local ROOT = h.fixture('results')

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do
    n = n + 1
  end
  return n
end

describe('tplua compare', function()
  it('prints the runs, audit, convergence and comparison and exits 0 for the fair pair',
    function()
      local r = h.run({ 'compare', ROOT .. '/fair' })
      assert.are.equal('', r.stderr)
      assert.are.equal(0, r.code)
      local out = r.stdout
      assert.is_truthy(out:find('6 runs loaded from ', 1, true))
      assert.is_truthy(out:find('audit (identical_config, records): 0 errors, 0 warnings, 0 notes',
        1, true))
      assert.is_truthy(out:find('[info]    loss curves of amd and nvd agree after warm-up', 1,
        true))
      assert.is_truthy(out:find('comparison by platform, baseline nvd', 1, true))
      assert.is_truthy(out:find('\n  amd  3  13651.7 ', 1, true))
      assert.is_truthy(out:find('1.146 better  [1.143, 1.149]  <0.0001 *', 1, true))
      assert.is_truthy(out:find('peak nvd: h100-sxm bf16 989.4 TFLOP/s dense', 1, true))
      assert.is_truthy(out:find('verdict: the comparison is valid', 1, true))
    end)

  it('exits 3 for the seeded unfair pair and still prints everything', function()
    local r = h.run({ 'compare', ROOT .. '/unfair' })
    assert.are.equal(3, r.code)
    local out = r.stdout
    assert.is_truthy(out:find('audit (identical_config, records): 5 errors', 1, true))
    assert.is_truthy(out:find('[error]   training.lr differs: amd 1e-05 (amd-primus-lr: primus ' ..
      'args lr=1e-05) vs nvd 0.0003', 1, true))
    assert.is_truthy(out:find('[error]   training.seed differs', 1, true))
    assert.is_truthy(out:find('[warning] loss curves of amd and nvd differ', 1, true))
    assert.is_truthy(out:find('comparison by platform', 1, true))
    assert.is_truthy(out:find('verdict: the comparison is NOT valid: 5 audit errors above', 1,
      true))
  end)

  it('exits 3 for mock data, a killed run and mismatched configurations', function()
    for _, d in ipairs({ 'mock', 'random', 'truncated', 'mismatch' }) do
      local r = h.run({ 'compare', ROOT .. '/' .. d })
      assert.are.equal(3, r.code, d)
    end
  end)

  it('prints one JSON document with --json', function()
    local r = h.run({ 'compare', ROOT .. '/unfair', '--json' })
    assert.are.equal(3, r.code)
    local doc = assert(json.decode(r.stdout))
    assert.are.equal('tplua.compare/1', doc.schema)
    assert.is_false(doc.valid)
    assert.are.equal(3, doc.exit_status)
    assert.are.equal(2, #doc.runs)
    assert.are.equal(5, doc.audit.counts.error)
    assert.are.equal('config_differs', doc.audit.findings[1].kind)
    assert.are.equal('curves_differ', doc.convergence.findings[1].kind)
    assert.are.equal('nvd', doc.comparison.baseline)
    assert.are.equal('tokens_per_s_per_gpu', doc.comparison.metrics[1].name)
    assert.are.equal(1e-05, doc.audit.effective['amd-primus-lr']['training.lr'])
    local ok = h.run({ 'compare', ROOT .. '/fair', '--json' })
    assert.are.equal(0, ok.code)
    local d2 = assert(json.decode(ok.stdout))
    assert.is_true(d2.valid)
    local rt = d2.comparison.metrics[1].ratios[1]
    assert.is_true(rt.ci.lo < rt.ratio and rt.ratio < rt.ci.hi)
  end)

  it('adds the profiled runs\' trace breakdown and the explanation of the gap', function()
    -- Two records of one configuration whose traces are real H100 and MI300X profiles; the nvd
    -- record keeps its profile.analysis, the amd record only lists its trace.
    local r = h.run({ 'compare', ROOT .. '/profiled' })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    local at = out:find('\nprofile: where the step time goes, from the profiler traces', 1, true)
    assert.is_truthy(at, out)
    assert.is_true(at > out:find('comparison by platform', 1, true))
    assert.is_truthy(out:find('  nvd          1      1   34.892   8.6%    91.0%         0.4%', 1,
      true), out)
    assert.is_truthy(out:find('  amd          1      1   33.131  10.2%    89.8%', 1, true), out)
    assert.is_truthy(out:find("nvd runs: nvd-megatron-prof (its record's profile.analysis)", 1,
      true))
    assert.is_truthy(out:find('amd runs: amd-primus-prof (read from its traces)', 1, true))
    assert.is_truthy(out:find('amd against nvd, from the traces of nvd-megatron-prof (nvd) and '
      .. 'amd-primus-prof (amd):\nwhy amd and nvd differ: amd 5.0% faster per step: 33.131 vs '
      .. '34.892 ms', 1, true), out)
    assert.is_truthy(out:find('  elementwise             18.110  12.812      -5.298              '
      .. '50%', 1, true), out)
    assert.is_truthy(out:find('  step (sum of the rows)  34.892  33.131      -1.761\n', 1, true),
      out)
    -- --json: the same section; the explanation's times in ns.
    local j = h.run({ 'compare', ROOT .. '/profiled', '--json' })
    assert.are.equal(0, j.code, j.stderr)
    local p = assert(json.decode(j.stdout)).profile
    assert.are.equal('nvd', p.baseline)
    assert.are.equal('nvd', p.groups[1].value)
    assert.are.equal(34.892, p.groups[1].summary.window_ms)
    assert.are.equal('traces', p.groups[2].from['amd-primus-prof'])
    assert.are.equal(33.131, p.groups[2].summary.window_ms)
    local x = p.explanations[1]
    assert.are.same({ 'nvd-megatron-prof', 'amd-primus-prof' }, x.runs)
    assert.are.equal('ns', x.explanation.unit)
    assert.are.equal(-1761085, x.explanation.diff)
    assert.are.equal('elementwise', x.explanation.rows[1].key)
    -- Runs without a profile: no section, and null in the JSON.
    local fair = h.run({ 'compare', ROOT .. '/fair' })
    assert.is_nil(fair.stdout:find('profile: where the step time goes', 1, true))
    local fj = assert(json.decode(h.run({ 'compare', ROOT .. '/fair', '--json' }).stdout,
      { null = json.null }))
    assert.are.equal(json.null, fj.profile)
  end)

  it('lists files that could not be loaded and compares the rest', function()
    local r = h.run({ 'compare', ROOT .. '/bad', ROOT .. '/fair' })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('7 runs loaded from', 1, true))
    assert.is_truthy(r.stdout:find('6 files not loaded', 1, true))
    assert.is_truthy(r.stdout:find('bad/truncated.json:24:5: unterminated string', 1, true))
  end)

  it('takes --by, --baseline, --metrics, --price and tprimat files', function()
    local r = h.run({ 'compare', ROOT .. '/tprimat', '--baseline', 'amd', '--metrics',
      'tokens_per_s_per_gpu,cost_per_1t_tokens', '--price', 'amd=2.5', '--price', 'nvd=3' })
    assert.are.equal(3, r.code) -- benchmark and train files mix batch sizes
    assert.is_truthy(r.stdout:find('comparison by platform, baseline amd', 1, true))
    assert.is_truthy(r.stdout:find('price amd: 2.5 USD per GPU-hour (given; an assumption)', 1,
      true))
    assert.are.equal(0, count(r.stdout, 'MFU %('))
    local fw = h.run({ 'compare', ROOT .. '/fair', '--by', 'framework', '--json' })
    assert.are.equal('megatron', assert(json.decode(fw.stdout)).comparison.baseline)
  end)

  it('keeps a summary index with --index and gives the same result from it', function()
    local dir = h.tmpdir()
    assert(os.execute('cp -r ' .. h.shquote(ROOT .. '/fair') .. ' ' .. h.shquote(dir)))
    local first = h.run({ 'compare', dir .. '/fair', '--index', '--json' })
    assert.are.equal(0, first.code)
    assert.is_truthy(h.read(dir .. '/fair/amd/.tplua-results-index.json'))
    local again = h.run({ 'compare', dir .. '/fair', '--index', '--json' })
    assert.are.equal(first.stdout, again.stdout)
  end)

  it('exits 1 when nothing can be loaded', function()
    local r = h.run({ 'compare', ROOT .. '/no-such-dir' })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find('no-such-dir', 1, true))
    local dir = h.tmpdir()
    h.write(dir .. '/broken.json', '{"schema": ')
    local r2 = h.run({ 'compare', dir })
    assert.are.equal(1, r2.code)
    assert.is_truthy(r2.stderr:find('no run could be loaded', 1, true))
    assert.is_truthy(r2.stderr:find('broken.json:1:', 1, true))
  end)

  it('exits 2 on usage errors', function()
    local cases = {
      { {}, 'no DIR or FILE given' },
      { { ROOT .. '/fair', '--colour' }, "unknown option '--colour'" },
      { { ROOT .. '/fair', '--price', 'amd' }, "option '--price': GROUP=VALUE expected" },
      { { ROOT .. '/fair', '--price', 'amd=cheap' }, "'cheap' is not a non-negative number" },
      { { ROOT .. '/fair', '--metrics', 'speed' }, "unknown metric 'speed'" },
      { { ROOT .. '/fair', '--baseline', 'tpu' }, "no group 'tpu' for platform" },
      { { ROOT .. '/fair', '--methodology', 'fastest' }, "unknown methodology 'fastest'" },
      { { ROOT .. '/fair', '--convention', 'mine' }, "unknown convention 'mine'" },
      { { ROOT .. '/fair', '--seed', 'x' }, "option '--seed': integer expected" },
    }
    for _, c in ipairs(cases) do
      local args = { 'compare' }
      for _, a in ipairs(c[1]) do
        args[#args + 1] = a
      end
      local r = h.run(args)
      assert.are.equal(2, r.code, c[2])
      assert.is_truthy(r.stderr:find(c[2], 1, true), r.stderr)
      assert.is_truthy(r.stderr:find('usage: tplua compare', 1, true))
    end
  end)

  -- Records extracted from the published fixture logs by the binary, then compared: what a user
  -- does with logs from two machines.
  describe('on records extracted from the fixture logs', function()
    local LOGS = h.fixture('logs')
    local function extract(dir, log, args)
      local argv = { 'extract', LOGS .. '/' .. log, '--json-dir', dir, '--quiet' }
      for _, a in ipairs(args) do
        argv[#argv + 1] = a
      end
      local r = h.run(argv)
      assert.are.equal(0, r.code, r.stderr)
    end

    it('finds the batch, the expert parallelism, the model and the mock data that differ',
      function()
        local dir = h.tmpdir()
        -- Primus on MI355X with mock data (loss flat at ln(vocab)); torchtitan on B200 with
        -- real data (loss 12.55 -> 6.92).
        extract(dir, 'primus/dsv4_smoke_ep8_pp1_full.log', { '--gpu', 'mi355x', '--run-id',
          'amd-dsv4', '--model', 'llama3.1-8b' })
        extract(dir, 'torchtitan/qwen3_14b_b200_nocolor_logfreq1.log', { '--gpu', 'b200',
          '--run-id', 'nvd-qwen3', '--model', 'qwen2.5-14b' })
        local r = h.run({ 'compare', dir })
        assert.are.equal(3, r.code, r.stderr)
        local out = r.stdout
        assert.is_truthy(out:find('audit (identical_config, assumed (the records name none)): '
          .. '4 errors', 1, true), out)
        assert.is_truthy(out:find('[error]   model differs: amd llama3.1-8b (amd-dsv4: record '
          .. 'model) vs nvd qwen2.5-14b (nvd-qwen3: record model)', 1, true), out)
        assert.is_truthy(out:find('[error]   training.gbs differs: amd 16 (amd-dsv4: primus args '
          .. 'global_batch_size=16) vs nvd 1280', 1, true), out)
        assert.is_truthy(out:find('[error]   parallelism.ep differs: amd 8', 1, true), out)
        assert.is_truthy(out:find('[error]   the loss curves show different data: amd-dsv4 stays '
          .. 'at 11.664 = ln(129280), while nvd-qwen3 learns (loss 12.552 -> 6.922)', 1, true),
          out)
        -- torchtitan prints no argument dump: what cannot be checked is said, as a warning.
        assert.is_truthy(out:find('[warning] training.seed is not known for nvd-qwen3 (no '
          .. 'argument dump or record value): it cannot be checked against 1234', 1, true), out)
        assert.is_truthy(out:find('verdict: the comparison is NOT valid: 4 audit errors above', 1,
          true), out)
      end)

    it('does not call a one-point loss curve learning', function()
      local dir = h.tmpdir()
      extract(dir, 'primus/dsv4_smoke_ep8_pp1_full.log', { '--gpu', 'mi355x', '--run-id',
        'amd-dsv4' })
      -- torchtitan's pull request log: one step line with a loss, no step time.
      extract(dir, 'torchtitan/pr1884_llama3_8b_multirank.log', { '--gpu', 'h100-sxm',
        '--run-id', 'nvd-pr1884' })
      local r = h.run({ 'compare', dir })
      local out = r.stdout
      assert.is_nil(out:find(' learns (loss', 1, true), out)
      assert.is_nil(out:find('show different data', 1, true), out)
      assert.is_truthy(out:find("[warning] the amd-dsv4 run's loss points to random or mock data "
        .. '(amd-dsv4 stays at 11.664 = ln(129280)): throughput may be compared, convergence '
        .. 'cannot; the loss of nvd-pr1884 shows too few points (or no fall) to tell what data '
        .. 'it read', 1, true), out)
      assert.are.equal(0, r.code, out)
      assert.is_truthy(out:find('verdict: the comparison is valid (no audit errors; ', 1, true),
        out)
    end)
  end)

  it('prints its usage with --help and exits 0', function()
    local r = h.run({ 'compare', '--help' })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('usage: tplua compare DIR|FILE...', 1, true))
    assert.is_truthy(r.stdout:find('exit status: 0 when the comparison is valid, 3 when', 1,
      true))
  end)
end)

-- RFC 4180 records: quoted fields (with "" for a quote, and commas and line breaks inside),
-- CRLF between records. Returns the records, or nil and why.
local function parse_csv(text)
  local rows, row, field, i, n = {}, {}, {}, 1, #text
  while i <= n do
    local c = text:sub(i, i)
    if c == '"' and #field == 0 then
      local j = i + 1
      while true do
        local q = text:find('"', j, true)
        if not q then
          return nil, 'unterminated quoted field'
        end
        field[#field + 1] = text:sub(j, q - 1)
        if text:sub(q + 1, q + 1) == '"' then
          field[#field + 1] = '"'
          j = q + 2
        else
          i = q + 1
          break
        end
      end
      local nxt = text:sub(i, i)
      if nxt ~= ',' and nxt ~= '\r' then
        return nil, 'text after a closing quote at byte ' .. i
      end
    elseif c == ',' then
      row[#row + 1] = table.concat(field)
      field = {}
      i = i + 1
    elseif c == '\r' then
      if text:sub(i + 1, i + 1) ~= '\n' then
        return nil, 'CR without LF at byte ' .. i
      end
      row[#row + 1] = table.concat(field)
      rows[#rows + 1] = row
      row, field = {}, {}
      i = i + 2
    elseif c == '\n' then
      return nil, 'LF without CR at byte ' .. i
    else
      field[#field + 1] = c
      i = i + 1
    end
  end
  if #row > 0 or #field > 0 then
    return nil, 'the last record does not end with CRLF'
  end
  return rows
end

-- The records as tables keyed by the header's names.
local function csv_records(text)
  local rows = assert(parse_csv(text))
  local out = {}
  for k = 2, #rows do
    assert.are.equal(#rows[1], #rows[k], 'row ' .. k .. ' has another width than the header')
    local t = {}
    for j, name in ipairs(rows[1]) do
      t[name] = rows[k][j]
    end
    out[#out + 1] = t
  end
  return out, rows[1]
end

local function near(a, b)
  return math.abs(tonumber(a) - b) <= 1e-12 * math.abs(b)
end

describe('tplua compare --csv', function()
  it('prints one RFC 4180 row per group with the numbers of the comparison', function()
    local r = h.run({ 'compare', ROOT .. '/fair', '--csv', '-' })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('', r.stderr)
    local recs, header = csv_records(r.stdout)
    assert.are.same({ 'platform', 'baseline', 'runs', 'run_ids', 'frameworks', 'models', 'gpu',
      'gpus', 'tokens_per_s_n' }, { table.unpack(header, 1, 9) })
    assert.are.equal(2, #recs)
    local nvd, amd = recs[1], recs[2]
    assert.are.same({ 'nvd', 'yes', '3', 'megatron', '8' }, { nvd.platform, nvd.baseline,
      nvd.runs, nvd.frameworks, nvd.gpus })
    assert.are.equal('amd-primus-r1 amd-primus-r2 amd-primus-r3', amd.run_ids)
    local doc = assert(json.decode(h.run({ 'compare', ROOT .. '/fair', '--json' }).stdout))
    local cmp = doc.comparison
    for _, m in ipairs(cmp.metrics) do
      local stem = ({ tokens_per_s_per_gpu = 'tokens_per_s_per_gpu', mfu = 'mfu_percent',
        energy_per_token = 'energy_j_per_token', step_time = 'step_time_s' })[m.name]
      if stem then
        for _, g in ipairs(m.groups) do
          local rec = g.value == 'amd' and amd or nvd
          assert.is_true(near(rec[stem .. '_mean'], g.mean * (m.scale or 1)), stem)
          assert.is_true(near(rec[stem .. '_sd'], g.stddev * (m.scale or 1)), stem)
          assert.is_true(near(rec[stem .. '_ci_lo'], g.ci.lo * (m.scale or 1)), stem)
        end
        assert.is_true(near(amd[stem .. '_ratio'], m.ratios[1].ratio), stem)
        assert.is_true(near(amd[stem .. '_p'], m.ratios[1].p), stem)
        assert.are.equal('1', nvd[stem .. '_ratio'])
      end
    end
    -- tokens/s (not among the text's metrics) is there too, and each basis.
    assert.is_true(near(amd.tokens_per_s_mean, 8 * tonumber(amd.tokens_per_s_per_gpu_mean)))
    assert.is_truthy(amd.energy_basis:find('estimated: 8 GPUs x mi300x TDP 750 W', 1, true))
    assert.are.equal('h100-sxm bf16 989.4 TFLOP/s dense', nvd.mfu_peak)
    assert.are.equal('0', amd.cost_usd_per_1t_tokens_n)
    assert.are.equal('', amd.cost_usd_per_1t_tokens_mean)
  end)

  it('quotes fields as RFC 4180 says', function()
    local dir = h.tmpdir()
    for i, exp in ipairs({ 'plain', 'with, comma', 'say "hi"', 'two\nlines' }) do
      local doc = assert(json.load_file(ROOT .. '/fair/nvd/megatron-r' .. (i % 3 + 1) .. '.json'))
      doc.experiment = exp
      doc.run_id = 'run' .. i
      h.write(string.format('%s/r%d.json', dir, i), assert(json.encode(doc)))
    end
    local r = h.run({ 'compare', dir, '--by', 'experiment', '--baseline', 'plain', '--csv', '-',
      '--metrics', 'step_time' })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find('\r\n"with, comma",no,1,', 1, true), r.stdout)
    assert.is_truthy(r.stdout:find('\r\n"say ""hi""",no,1,', 1, true), r.stdout)
    assert.is_truthy(r.stdout:find('\r\n"two\nlines",no,1,', 1, true), r.stdout)
    local recs, header = csv_records(r.stdout)
    assert.are.equal('experiment', header[1])
    local seen = {}
    for _, rec in ipairs(recs) do
      seen[rec.experiment] = rec.step_time_s_n
    end
    assert.are.same({ plain = '1', ['with, comma'] = '1', ['say "hi"'] = '1',
      ['two\nlines'] = '1' }, seen)
  end)

  it('writes the file atomically beside the text, and fails cleanly when it cannot', function()
    local dir = h.tmpdir()
    local path = dir .. '/cmp.csv'
    h.write(path, 'old contents\n')
    local r = h.run({ 'compare', ROOT .. '/fair', '--csv', path })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find('comparison by platform, baseline nvd', 1, true))
    assert.is_truthy(r.stderr:find('tplua compare: wrote ' .. path, 1, true))
    local text = h.read(path)
    assert.are.equal(2, #csv_records(text))
    assert.are.equal(text, h.run({ 'compare', ROOT .. '/fair', '--csv', '-' }).stdout)
    local p = io.popen('ls -A ' .. h.shquote(dir))
    local names = p:read('a')
    p:close()
    assert.are.equal('cmp.csv\n', names)
    local bad = h.run({ 'compare', ROOT .. '/fair', '--csv', dir .. '/no/such/dir/x.csv' })
    assert.are.equal(1, bad.code)
    assert.is_truthy(bad.stderr:find('tplua compare: cannot write the CSV: ' .. dir
      .. '/no/such/dir/x.csv: ', 1, true), bad.stderr)
    local both = h.run({ 'compare', ROOT .. '/fair', '--csv', '-', '--json' })
    assert.are.equal(2, both.code)
    assert.is_truthy(both.stderr:find("'--csv -' and '--json' both print to standard output", 1,
      true))
    local none = h.run({ 'compare', ROOT .. '/fair', '--csv' })
    assert.are.equal(2, none.code)
    assert.is_truthy(none.stderr:find("option '--csv' needs a value", 1, true), none.stderr)
  end)
end)

describe('tplua compare: software stacks side by side', function()
  -- The fair pair again, with the environment tp.provenance writes: one NVIDIA and one AMD
  -- stack; amd-primus-r3 keeps none (a record written before tplua recorded it).
  local function with_environments()
    local dir = h.tmpdir()
    local envs = {
      nvd = { schema = 'tplua.environment/1',
        gpu_stack = { nvidia_driver = '550.54.15', cuda_runtime = '12.4', nccl = '2.21.5' },
        python = { python = '3.10.12', torch = '2.5.1', torch_cuda = '12.4' },
        framework = { name = 'megatron', commit = '0123456789abcdef0123456789abcdef01234567' },
        container = { runtime = 'enroot', image = 'nvcr.io/nvidia/pytorch:24.10-py3' } },
      amd = { schema = 'tplua.environment/1',
        gpu_stack = { amdgpu_driver = '6.8.5', hip_runtime = '6.2.41134', rccl = '2.20.5' },
        python = { python = '3.10.14', torch = '2.5.0', torch_hip = '6.2.41133' },
        framework = { name = 'primus', describe = 'v0.4.0-12-gabcdef0' },
        container = { runtime = 'docker', rocm_version = '6.2.4' } },
    }
    for _, p in ipairs({ 'amd', 'nvd' }) do
      os.execute('mkdir -p ' .. h.shquote(dir .. '/' .. p))
      for i = 1, 3 do
        local name = string.format('%s/%s-r%d.json', p, p == 'amd' and 'primus' or 'megatron', i)
        local doc = assert(json.load_file(ROOT .. '/fair/' .. name))
        if not (p == 'amd' and i == 3) then
          doc.environment = envs[p]
        end
        h.write(dir .. '/' .. name, assert(json.encode(doc)))
      end
    end
    return dir
  end

  it('prints one column per platform, and - where a record does not say', function()
    local dir = with_environments()
    local r = h.run({ 'compare', dir })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    local want = {
      "software stack by platform (the records' environment)\n",
      '                       nvd                               amd\n',
      '  GPU driver           NVIDIA 550.54.15                  amdgpu 6.8.5 | -\n',
      '  CUDA / ROCm runtime  CUDA 12.4                         HIP 6.2.41134 | -\n',
      '  NCCL / RCCL          NCCL 2.21.5                       RCCL 2.20.5 | -\n',
      '  Python               3.10.12                           3.10.14 | -\n',
      '  torch                2.5.1 (CUDA 12.4)                 2.5.0 (HIP 6.2.41133) | -\n',
      '  framework            megatron 0123456789ab             primus v0.4.0-12-gabcdef0 | -\n',
      '  container image      nvcr.io/nvidia/pytorch:24.10-py3  ROCm 6.2.4 | -\n',
    }
    assert.is_truthy(out:find(table.concat(want), 1, true), out)
    -- The same in the JSON document.
    local doc = assert(json.decode(h.run({ 'compare', dir, '--json' }).stdout))
    assert.are.same({ 'nvd', 'amd' }, doc.stack.groups)
    assert.are.equal('torch', doc.stack.rows[5].label)
    assert.are.same({ '2.5.1 (CUDA 12.4)', '2.5.0 (HIP 6.2.41133) | -' }, doc.stack.rows[5].values)
  end)

  it('loads old records without an environment and shows - throughout', function()
    local r = h.run({ 'compare', ROOT .. '/fair' })
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find("software stack by platform (the records' environment): the "
      .. 'records carry none (written before tplua recorded it)\n                       nvd  amd\n'
      .. '  GPU driver           -    -\n', 1, true), r.stdout)
    assert.is_truthy(r.stdout:find('  container image      -    -\n', 1, true))
  end)
end)
