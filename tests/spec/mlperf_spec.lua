-- tp.analyse.mlperf: MLPerf's scoring rules, one small hand-built result file or directory per
-- rule (docs/mlperf.md), and the failure modes (no result file, no run_start, damaged JSON).
local h = require('helper')
local mlperf = require('tp.analyse.mlperf')

-- One MLLOG line.
local function ev(key, ms, value, meta)
  local json = require('tp.json')
  return ':::MLLOG ' .. json.encode({ namespace = '', time_ms = ms, event_type = 'POINT_IN_TIME',
    key = key, value = value == nil and json.null or value, metadata = meta or {} }) .. '\n'
end

-- A result file whose run takes `minutes`, ending with `status` (default success).
local function result(minutes, status, benchmark)
  local start = 1700000000000
  local stop = start + math.floor(minutes * 60000 + 0.5)
  return ev('submission_benchmark', start - 10, benchmark or 'llama2_70b_lora')
    .. ev('run_start', start)
    .. ev('eval_accuracy', stop - 2, 0.93, { samples_count = 3072 })
    .. ev('eval_accuracy', stop - 1, 0.92, { samples_count = 3456 })
    .. ev('run_stop', stop, nil, { status = status or 'success', samples_count = 3456 })
end

-- Runs parsed from a list of minutes (a string for a run that did not converge: its status).
local function runs(list, benchmark)
  local out = {}
  for i, m in ipairs(list) do
    local text = type(m) == 'number' and result(m, 'success', benchmark) or result(99, m, benchmark)
    out[i] = mlperf.parse_text(text, 'result_' .. (i - 1) .. '.txt')
  end
  return out
end

local TEN = { 10, 11, 12, 13, 14, 15, 16, 17, 18, 100 }

local function has(list, text)
  for _, f in ipairs(list) do
    if f:find(text, 1, true) then
      return true
    end
  end
  return false
end

describe('tp.analyse.mlperf', function()
  it('takes time to train from run_start to run_stop time_ms, in minutes', function()
    local run = mlperf.parse_text(result(12.5), 'r.txt')
    assert.are.equal(12.5, run.minutes)
    assert.are.equal('success', run.status)
    assert.is_true(run.ok)
    assert.are.equal('llama2_70b_lora', run.benchmark)
  end)

  it('reads MLLOG lines after a prefix, as MLPerf\'s parser strips it', function()
    local text = result(3):gsub(':::MLLOG', '[1,0]<stdout>::::MLLOG')
    assert.are.equal(3, mlperf.parse_text(text, 'r.txt').minutes)
  end)

  it('keeps the eval accuracy curve and the samples to converge', function()
    local run = mlperf.parse_text(result(5), 'r.txt')
    assert.are.equal(2, #run.evals)
    assert.are.equal(0.93, run.evals[1].value)
    assert.are.equal(3072, run.evals[1].samples_count)
    assert.are.equal(3456, run.samples_to_converge)
    local by_epoch = ev('run_start', 0) .. ev('eval_accuracy', 5, 0.7, { epoch_num = 4 })
      .. ev('run_stop', 60000, nil, { status = 'success' })
    assert.are.equal(4, mlperf.parse_text(by_epoch, 'e.txt').samples_to_converge)
  end)

  it('knows the runs each benchmark needs', function()
    assert.are.equal(10, mlperf.RUN_COUNTS.llama2_70b_lora)
    assert.are.equal(3, mlperf.RUN_COUNTS.llama31_405b)
    assert.are.equal(40, mlperf.RUN_COUNTS.unet3d)
    assert.are.equal(5, mlperf.RUN_COUNTS.retinanet)
  end)

  it('scores the olympic mean: the fastest and the slowest run dropped', function()
    local r = mlperf.score(runs(TEN))
    assert.are.equal(10, r.scored)
    assert.are.equal(0, r.dropped)
    assert.are.equal(14.5, r.olympic)
    assert.are.equal(14.5, r.score)
    assert.are.equal(0, #r.findings)
    assert.are.equal(2.5, mlperf.olympic_mean({ 3, 1, 2, 9 }, 0, 1))
  end)

  it('counts a run that did not converge as the slowest, dropped', function()
    local list = { 10, 11, 12, 13, 14, 15, 16, 17, 18, 'aborted' }
    local r = mlperf.score(runs(list))
    assert.are.equal(9, r.scored)
    assert.are.equal(1, r.dropped)
    assert.are.equal(14.5, r.score) -- 11..18: only the fastest dropped
    assert.is_true(has(r.findings, 'result_9.txt: run_stop status is aborted, not success'))
  end)

  it('gives no score when more runs did not converge than may be dropped', function()
    local list = { 10, 11, 12, 13, 14, 15, 16, 17, 'aborted', 'aborted' }
    local r = mlperf.score(runs(list))
    assert.is_nil(r.score)
    assert.is_true(has(r.findings, '2 runs not scored, at most 1 may be'))
  end)

  it('drops 4 runs at each end for unet3d', function()
    assert.are.equal(4, mlperf.max_dropped('unet3d'))
    assert.are.equal(1, mlperf.max_dropped('llama2_70b_lora'))
    local list = {}
    for i = 1, 40 do
      list[i] = i
    end
    list[40], list[39] = 'aborted', 'aborted'
    local r = mlperf.score(runs(list, 'unet3d'))
    assert.are.equal(4, r.max_dropped)
    -- runs 5..36 (the 4 fastest dropped, and 2 slowest besides the 2 aborted)
    assert.are.equal(20.5, r.score)
  end)

  it('gives no official score with fewer runs than required', function()
    local r = mlperf.score(runs({ 10, 11, 12 }))
    assert.are.equal(11, r.olympic)
    assert.is_nil(r.score)
    assert.is_true(has(r.findings, '3 result files, llama2_70b_lora needs 10: no official score'))
  end)

  it('multiplies by the scaling factor of scaling.json', function()
    local dir = h.tmpdir()
    for i, m in ipairs(TEN) do
      h.write(dir .. '/result_' .. (i - 1) .. '.txt', result(m))
    end
    h.write(dir .. '/scaling.json', '{"scaling_factor": 1.5}')
    local r = assert(mlperf.score_dir(dir))
    assert.are.equal(14.5, r.olympic)
    assert.are.equal(1.5, r.scaling_factor)
    assert.are.equal(21.75, r.score)
    assert.are.equal('result_0.txt', r.runs[1].file)
    assert.are.equal('result_9.txt', r.runs[10].file)
  end)

  it('raises on a ruleset it carries no RCPs of, naming those it does', function()
    assert.are.same({ '5.0.0', '5.1.0', '6.0.0', '6.1.0' }, mlperf.rulesets())
    local list = runs({ 10, 11, 12 })
    local ok, err = pcall(mlperf.score, list, { ruleset = '9.9.9' })
    assert.is_false(ok)
    assert.are.equal('tp.analyse.mlperf: ruleset: unknown MLPerf Training ruleset 9.9.9: tplua '
      .. 'carries the RCPs of 5.0.0, 5.1.0, 6.0.0, 6.1.0 (or give an RCP file with --rcp-file)',
      (err:gsub('^[^:]+:%d+: ', '')))
    assert.has_error(function()
      mlperf.score_dir(h.tmpdir(), { ruleset = '5.1' })
    end)
    -- Known, with an RCP file of the user's, or no RCP check at all: scored.
    assert.is_table(mlperf.score(list, { ruleset = '6.1.0' }))
    assert.is_table(mlperf.score(list, { ruleset = '9.9.9', rcp_file = 'rcps.json' }))
    assert.is_table(mlperf.score(list, { ruleset = '9.9.9', rcp = false }))
    assert.is_nil(mlperf.unknown_ruleset('5.1.0'))
  end)

  it('fails on a directory without result files, naming it', function()
    local dir = h.tmpdir()
    local r, err = mlperf.score_dir(dir)
    assert.is_nil(r)
    assert.is_truthy(err:find(dir .. ': no result_*.txt file', 1, true))
    r, err = mlperf.score_dir(dir .. '/missing')
    assert.is_nil(r)
    assert.is_truthy(err:find(dir .. '/missing', 1, true))
  end)

  it('fails on a scaling.json without a number scaling_factor', function()
    local dir = h.tmpdir()
    h.write(dir .. '/result_0.txt', result(1))
    h.write(dir .. '/scaling.json', '{"factor": 2}')
    local r, err = mlperf.score_dir(dir)
    assert.is_nil(r)
    assert.is_truthy(err:find('scaling.json: no number scaling_factor', 1, true))
  end)

  it('does not score a run without run_start, naming the file', function()
    local text = result(5):gsub(':::MLLOG [^\n]*"run_start"[^\n]*\n', '')
    local run = mlperf.parse_text(text, 'result_3.txt')
    assert.is_false(run.ok)
    assert.is_nil(run.minutes)
    assert.is_true(has(run.findings, 'result_3.txt: run_start not recorded'))
    text = result(5):gsub(':::MLLOG [^\n]*"run_stop"[^\n]*\n', '')
    assert.is_true(has(mlperf.parse_text(text, 'r.txt').findings, 'r.txt: run_stop not recorded'))
  end)

  it('does not score a run with a damaged MLLOG line, naming file and line', function()
    local text = result(5):gsub('"eval_accuracy"', '"eval_accuracy', 1)
    local run = mlperf.parse_text(text, 'result_7.txt')
    assert.is_false(run.ok)
    assert.are.equal(5, run.minutes)
    assert.is_true(has(run.findings, 'result_7.txt:3: damaged MLLOG line'))
    run = mlperf.parse_text(':::MLLOG {"key": "run_start"}\n', 'x.txt')
    assert.is_true(has(run.findings, 'x.txt:1: damaged MLLOG line (no time_ms or key)'))
  end)

  it('warns when run_start is logged twice and keeps the first', function()
    local text = result(5) .. ev('run_start', 1800000000000)
    local run = mlperf.parse_text(text, 'r.txt')
    assert.are.equal(5, run.minutes)
    assert.is_true(has(run.findings, 'r.txt:6: run_start logged again'))
  end)

  it('says when the benchmark is not in the run counts', function()
    local r = mlperf.score(runs({ 1, 2, 3 }, 'no_such_bench'))
    assert.are.equal(2, r.score)
    assert.is_true(has(r.findings, 'benchmark no_such_bench: not in MLPerf Training'))
  end)

  describe('compare', function()
    -- A directory's score result from a list of minutes, logging `accel` accelerators per node
    -- on `nodes` nodes when given.
    local function side(list, benchmark, accel, nodes)
      local rs = runs(list, benchmark)
      if accel then
        local text = ev('accelerators_per_node', 1, accel) .. ev('number_of_nodes', 1, nodes)
          .. result(list[1], 'success', benchmark)
        rs[1] = mlperf.parse_text(text, 'result_0.txt')
      end
      local r = mlperf.score(rs)
      r.dir = benchmark or 'dir'
      return r
    end

    it('gives the score ratio, the time ratio CI, accelerator-minutes and samples', function()
      local a = side(TEN, nil, 8, 1)
      local b = side({ 5, 5.5, 6, 6.5, 7, 7.5, 8, 8.5, 9, 50 }, nil, 4, 4)
      local c = assert(mlperf.compare(a, b, { seed = 3 }))
      assert.are.equal('llama2_70b_lora', c.benchmark)
      assert.are.equal(14.5, c.a.score)
      assert.are.equal(7.25, c.b.score)
      assert.are.equal(0.5, c.ratio)
      assert.are.equal(8, c.a.accelerators)
      assert.are.equal(16, c.b.accelerators)
      assert.are.equal(116, c.a.accelerator_minutes)
      assert.are.equal(1, c.accelerator_ratio)
      assert.is_true(math.abs(c.ci.estimate - 11.3 / 22.6) < 1e-12) -- mean B / mean A
      assert.is_true(c.ci.lo <= c.ci.estimate and c.ci.estimate <= c.ci.hi)
      assert.are.same({ mean = 3456, min = 3456, max = 3456, n = 10 }, c.a.samples)
      local again = mlperf.compare(a, b, { seed = 3 })
      assert.are.same(c.ci, again.ci)
    end)

    it('says the accelerators are unknown when no line names them', function()
      local c = assert(mlperf.compare(side(TEN), side(TEN)))
      assert.is_nil(c.a.accelerators)
      assert.is_nil(c.a.accelerator_minutes)
      assert.is_nil(c.accelerator_ratio)
      assert.are.equal(1, c.ratio)
    end)

    it('refuses different benchmarks, naming both', function()
      local c, err = mlperf.compare(side(TEN, 'bert'), side(TEN, 'llama31_8b'))
      assert.is_nil(c)
      assert.are.equal('different benchmarks: bert is bert, llama31_8b is llama31_8b; compare '
        .. 'needs the same benchmark', err)
      assert.has_error(function()
        mlperf.compare(side(TEN), side(TEN), { sead = 1 })
      end, 'tp.analyse.mlperf.compare: unknown option sead')
    end)

    it('fails when a side has no scored run', function()
      local c, err = mlperf.compare(side(TEN), side({ 'aborted' }))
      assert.is_nil(c)
      assert.are.equal('dir: no scored run to compare', err)
    end)
  end)
end)
