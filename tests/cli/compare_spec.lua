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
