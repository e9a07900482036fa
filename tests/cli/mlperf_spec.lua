-- tplua mlperf score: the real binary on real published MLPerf Training v5.1 results of AMD and
-- NVIDIA (llama2_70b_lora and llama31_8b, tests/fixtures/mlperf, SOURCES.md): the score MLPerf's
-- own result summarizer gives (EXPECTED.md), and bad directories (clear errors, exit 1).
local h = require('helper')
local json = require('tp.json')

local AMD = h.fixture('mlperf/amd_MI355X_EPYC_9575F_pytorch_llama2_70b_lora')
local NVIDIA = h.fixture('mlperf/nvidia_theia_ngpu8_ngc25.09_nemo_llama2_70b_lora')

describe('tplua mlperf score', function()
  it('scores AMD MI355X llama2_70b_lora as MLPerf does (10.1847 minutes)', function()
    local r = h.run({ 'mlperf', 'score', AMD })
    assert.are.equal('', r.stderr)
    assert.are.equal(0, r.code)
    local out = r.stdout
    assert.is_truthy(out:find('MLPerf Training llama2_70b_lora, ', 1, true))
    assert.is_truthy(out:find('10 result files, 10 required', 1, true))
    assert.is_truthy(out:find('\n  result_0.txt  success     11.1132       3456      6  0.9222\n',
      1, true))
    assert.is_truthy(out:find('\n  result_7.txt  success      9.7849       3072      5  0.9250\n',
      1, true))
    assert.is_truthy(out:find('olympic mean: 10.1506 minutes (1 fastest and 1 slowest dropped)',
      1, true))
    assert.is_truthy(out:find('scaling factor: 1.003367 (scaling.json)', 1, true))
    assert.is_truthy(out:find('\nscore: 10.1847 minutes\n', 1, true))
  end)

  it('scores NVIDIA 8-GPU llama2_70b_lora as MLPerf does (5.9713 minutes)', function()
    local r = h.run({ 'mlperf', 'score', NVIDIA, '--curve' })
    assert.are.equal(0, r.code)
    local out = r.stdout
    assert.is_truthy(out:find('\n  result_6.txt  success      7.0352       3456      6  0.9228\n',
      1, true))
    assert.is_truthy(out:find('\n  result_0.txt  1536:0.9570 1920:0.9528 2304:0.9460 2688:0.9388 '
      .. '3072:0.9222\n', 1, true))
    assert.is_truthy(out:find('scaling factor: 1.034722 (scaling.json)', 1, true))
    assert.is_truthy(out:find('\nscore: 5.9713 minutes\n', 1, true))
  end)

  it('prints JSON with the runs, the olympic mean and the score', function()
    local r = h.run({ 'mlperf', 'score', NVIDIA, '--json' })
    assert.are.equal(0, r.code)
    local doc = json.decode(r.stdout)
    assert.are.equal('llama2_70b_lora', doc.benchmark)
    assert.are.equal(10, #doc.runs)
    assert.are.equal(0, #doc.findings)
    assert.is_true(math.abs(doc.score - 5.971267693865741) < 1e-9)
    assert.are.equal(3072, doc.runs[1].samples_to_converge)
    assert.are.equal(5, #doc.runs[1].evals)
  end)

  it('prints throughput as the logs track it (AMD throughput, NVIDIA train_step_time)',
    function()
      -- The mean of each run's logged values, read here from the file's text.
      local function mean_of(path, name)
        local sum, n = 0, 0
        for v in h.read(path):gmatch('"tracked_stats", "value": {"' .. name
          .. '": ([%d.eE+-]+)}') do
          sum, n = sum + tonumber(v), n + 1
        end
        return sum / n, n
      end
      -- Their units: AMD's throughput is samples per second, NVIDIA's train_step_time seconds
      -- per step (docs/mlperf.md says how the logs show it).
      for _, s in ipairs({ { AMD, 'throughput', 'samples/s' },
        { NVIDIA, 'train_step_time', 's/step' } }) do
        local r = h.run({ 'mlperf', 'score', s[1] })
        assert.is_truthy(r.stdout:find('\nthroughput as the logs track it (tracked_stats: mean, '
          .. 'count)\n', 1, true))
        for i = 0, 9 do
          local m, n = mean_of(string.format('%s/result_%d.txt', s[1], i), s[2])
          assert.is_true(n >= 5)
          assert.is_truthy(r.stdout:find(string.format('\n  result_%d.txt  %s %.4f %s (%d)\n',
            i, s[2], m, s[3], n), 1, true))
        end
        local doc = json.decode(h.run({ 'mlperf', 'score', s[1], '--json' }).stdout)
        assert.are.equal(s[3], doc.tracked_stats_units[s[2]])
        local m, n = mean_of(s[1] .. '/result_0.txt', s[2])
        assert.are.equal(n, #doc.runs[1].tracked_stats[s[2]])
        local sum = 0
        for _, v in ipairs(doc.runs[1].tracked_stats[s[2]]) do
          sum = sum + v
        end
        assert.is_true(math.abs(sum / n - m) < 1e-12)
      end
    end)

  it('says that llama2_70b_lora\'s eval accuracy is a loss, lower being better', function()
    local r = h.run({ 'mlperf', 'score', AMD, '--curve' })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('\n  file          status      minutes    samples  evals  last '
      .. 'eval loss (lower is better)\n', 1, true), r.stdout)
    -- MLPerf's target is the closed division's compliance check (v['value'] <= 0.925).
    assert.is_truthy(r.stdout:find("\neval loss, lower is better (MLPerf's target: <= 0.925; "
      .. 'samples_count or epoch_num:loss)\n  result_0.txt  1536:0.9434 ', 1, true), r.stdout)
    local doc = json.decode(h.run({ 'mlperf', 'score', AMD, '--json' }).stdout)
    assert.are.same({ name = 'eval loss', lower_is_better = true, target = 0.925 },
      doc.eval_metric)
    assert.is_true(doc.official)
    -- An accuracy benchmark (retinanet, an RCP case) keeps the word: higher is better there.
    local cases = require('cli.mlperf_cases')
    r = h.run({ 'mlperf', 'score', cases.materialise(cases.case('retinanet_epochs')), '--curve' })
    assert.is_truthy(r.stdout:find('evals  last eval accuracy\n', 1, true), r.stdout)
    assert.is_truthy(r.stdout:find('\neval accuracy (samples_count or epoch_num:accuracy)\n', 1,
      true), r.stdout)
  end)

  it('says on the score line when a score is not of all the runs required', function()
    local cases = require('cli.mlperf_cases')
    -- Ten files, one not converged: MLPerf's score of nine, the tenth the dropped slowest.
    local dir = cases.materialise(cases.case('one_not_converged'))
    local r = h.run({ 'mlperf', 'score', dir })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('\nscore: [%d.]+ minutes %(official, from 9 scored runs of '
      .. 'the 10 required: 1 not converged, counted as the slowest dropped%)\n'), r.stdout)
    local doc = json.decode(h.run({ 'mlperf', 'score', dir, '--json' }).stdout)
    assert.is_true(doc.official)
    assert.are.equal('official, from 9 scored runs of the 10 required: 1 not converged, '
      .. 'counted as the slowest dropped', doc.score_note)
    -- A benchmark whose required runs are unknown: a score, not an official one.
    local other = h.tmpdir()
    for i = 0, 2 do
      h.write(string.format('%s/result_%d.txt', other, i), table.concat({
        ':::MLLOG {"key": "submission_benchmark", "value": "mybench", "time_ms": 0}',
        ':::MLLOG {"key": "run_start", "value": null, "time_ms": 1000}',
        string.format(':::MLLOG {"key": "run_stop", "value": null, "time_ms": %d, '
          .. '"metadata": {"status": "success"}}', 61000 + 6000 * i) }, '\n') .. '\n')
    end
    r = h.run({ 'mlperf', 'score', other })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('\nscore: 1.1000 minutes (3 runs; the runs mybench requires '
      .. 'are unknown: not an official score)\n', 1, true), r.stdout)
    doc = json.decode(h.run({ 'mlperf', 'score', other, '--json' }).stdout)
    assert.is_false(doc.official)
    -- compare names the side without a score, and why.
    local five = h.tmpdir()
    for i = 0, 4 do
      h.write(five .. '/result_' .. i .. '.txt', h.read(AMD .. '/result_' .. i .. '.txt'))
    end
    r = h.run({ 'mlperf', 'compare', five, NVIDIA })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stdout:find('runs scored (required)' .. string.rep(' ', 17) .. '5 of 10',
      1, true), r.stdout)
    assert.is_truthy(r.stdout:find('\nscore ratio B/A: none (A: 5 result files, llama2_70b_lora '
      .. 'needs 10; the olympic mean of these is ', 1, true), r.stdout)
  end)

  it('gives no score, with a finding, when runs are missing or damaged', function()
    local dir = h.tmpdir()
    for i = 0, 3 do
      h.write(dir .. '/result_' .. i .. '.txt', h.read(AMD .. '/result_' .. i .. '.txt'))
    end
    local bad = h.read(AMD .. '/result_4.txt'):gsub('"run_start"', '"run_start', 1)
    h.write(dir .. '/result_4.txt', bad)
    local r = h.run({ 'mlperf', 'score', dir })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stdout:find('5 result files, llama2_70b_lora needs 10: no official score',
      1, true))
    assert.is_truthy(r.stdout:find('result_4.txt:%d+: damaged MLLOG line'))
    assert.is_truthy(r.stdout:find('result_4.txt: run_start not recorded', 1, true))
    -- The score line says why there is none, and what the olympic mean above is.
    assert.is_truthy(r.stdout:find('\nscore: none (5 result files, llama2_70b_lora needs 10; the '
      .. 'olympic mean of these is ', 1, true), r.stdout)
    assert.is_truthy(r.stdout:find(' minutes, not a score)\n', 1, true))
  end)

  it('names the file and line of truncated, binary, empty and hostile MLLOG files', function()
    local dir = h.tmpdir()
    local good = h.read(AMD .. '/result_0.txt')
    -- Cut in the middle of a line: the JSON ends early.
    local cut = good:sub(1, good:find('"run_stop"', 1, true) + 20)
    h.write(dir .. '/result_0.txt', cut)
    local bytes = {}
    for i = 1, 4096 do
      bytes[i] = string.char((i * 7919) % 256)
    end
    h.write(dir .. '/result_1.txt', table.concat(bytes))
    h.write(dir .. '/result_2.txt', '')
    h.write(dir .. '/result_3.txt', table.concat({
      ':::MLLOG {"key": "submission_benchmark", "value": {"x": 1}, "time_ms": 1}',
      ':::MLLOG {"key": "run_start", "value": null, "time_ms": 1e400}',
      ':::MLLOG {"key": "accelerators_per_node", "value": -8, "time_ms": 2}',
      ':::MLLOG {"key": "eval_accuracy", "value": 0.9, "time_ms": 3, '
        .. '"metadata": {"samples_count": "many", "epoch_num": [1]}}',
      ':::MLLOG {"key": "run_stop", "value": null, "time_ms": 4, "metadata": {"status": [1]}}',
      ':::MLLOG [1, 2]',
      ':::MLLOG ' .. string.rep('[', 100000),
      ':::MLLOG {"key": "x", "time_ms": 5, "value": "a\\u0000b"}\0\0',
    }, '\n') .. '\n')
    local r = h.run({ 'mlperf', 'score', dir })
    assert.are.equal(1, r.code)
    assert.are.equal('', r.stderr)
    local out = r.stdout
    local line = select(2, cut:gsub('\n', '')) + 1
    local col = tonumber(out:match(string.format('result_0.txt:%d: damaged MLLOG line %%(column '
      .. '(%%d+): unexpected end of input%%): run not scored', line)))
    assert.is_truthy(col, out)
    -- The column counts from the start of the line, and points near its (early) end.
    local last = #cut:match('[^\n]*$')
    assert.is_true(col > last - 5 and col <= last + 1, out)
    assert.is_truthy(out:find('result_1.txt: 1', 1, true), out)
    assert.is_truthy(out:find(': no ":::MLLOG " line: not an MLLOG result file', 1, true), out)
    assert.is_truthy(out:find('result_2.txt: empty: no ":::MLLOG " line', 1, true), out)
    assert.is_truthy(out:find('result_3.txt:1: submission_benchmark: a string value expected, '
      .. 'got list or object (ignored)', 1, true), out)
    assert.is_truthy(out:find('result_3.txt:2: damaged MLLOG line (time_ms is not a finite '
      .. 'number)', 1, true), out)
    assert.is_truthy(out:find('result_3.txt:5: run_stop: metadata.status is a list or object, '
      .. 'not a string', 1, true), out)
    assert.is_truthy(out:find('result_3.txt:6: damaged MLLOG line (not a JSON object)', 1, true))
    assert.is_truthy(out:find('result_3.txt:7: damaged MLLOG line (column ', 1, true), out)
    assert.is_truthy(out:find('\nscore: none (', 1, true))
    -- The same directory in JSON: the hostile values are not taken as numbers or names.
    r = h.run({ 'mlperf', 'score', dir, '--json' })
    assert.are.equal(1, r.code)
    local doc = json.decode(r.stdout)
    assert.are.equal(4, #doc.runs)
    assert.is_nil(doc.runs[4].samples_to_converge)
    assert.is_nil(doc.runs[4].status)
    assert.is_nil(doc.runs[4].minutes)
    -- Compared with a real submission: refused with a message, not a crash.
    r = h.run({ 'mlperf', 'compare', AMD, dir })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find(dir .. ': no scored run to compare', 1, true), r.stderr)
  end)

  it('fails on a directory without result files, and on usage errors', function()
    local dir = h.tmpdir()
    local r = h.run({ 'mlperf', 'score', dir })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find(dir .. ': no result_*.txt file', 1, true))
    r = h.run({ 'mlperf' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find('no subcommand given (score, compare, export)', 1, true))
    r = h.run({ 'mlperf', 'rank', dir })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("unknown subcommand 'rank'", 1, true))
    r = h.run({ 'mlperf', '--help' })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('usage: tplua mlperf score DIR', 1, true))
  end)
end)

describe('tplua mlperf compare', function()
  it('compares NVIDIA (B) to AMD (A): scores, their ratio, a seeded CI of the time ratio',
    function()
      local r = h.run({ 'mlperf', 'compare', AMD, NVIDIA })
      assert.are.equal('', r.stderr)
      assert.are.equal(0, r.code)
      local out = r.stdout
      assert.is_truthy(out:find('MLPerf Training llama2_70b_lora: B vs A', 1, true))
      assert.is_truthy(out:find('score (minutes)' .. string.rep(' ', 24) .. '10.1847'
        .. string.rep(' ', 16) .. '5.9713\n', 1, true))
      -- Units, and the runs scored against those required.
      assert.is_truthy(out:find('mean time to train (min)' .. string.rep(' ', 15) .. '10.2112'
        .. string.rep(' ', 16) .. '5.8881\n', 1, true), out)
      assert.is_truthy(out:find('runs scored (required)' .. string.rep(' ', 16) .. '10 of 10'
        .. string.rep(' ', 14) .. '10 of 10\n', 1, true), out)
      assert.is_truthy(out:find(string.format('score ratio B/A: %.4f (5.9713 / 10.1847)',
        5.971267693865741 / 10.18474574915825), 1, true))
      assert.is_truthy(out:find('accelerators' .. string.rep(' ', 27) .. 'unknown'
        .. string.rep(' ', 15) .. 'unknown\n', 1, true))
      assert.is_truthy(out:find('accelerator-minutes B/A: unknown', 1, true))
      assert.is_truthy(out:find('3187.2 (3072..3456)   3110.4 (3072..3456)', 1, true))
      assert.is_truthy(out:find('(bootstrap, 10000 resamples, seed 1)', 1, true))
    end)

  it('gives a CI that holds the ratio of mean times, the same for the same seed', function()
    local function doc(seed)
      local r = h.run({ 'mlperf', 'compare', AMD, NVIDIA, '--json', '--seed', seed })
      assert.are.equal(0, r.code)
      return json.decode(r.stdout)
    end
    local d = doc('7')
    assert.are.equal('llama2_70b_lora', d.benchmark)
    assert.is_true(math.abs(d.ratio - 5.971267693865741 / 10.18474574915825) < 1e-12)
    local means = d.b.mean_minutes / d.a.mean_minutes
    assert.is_true(math.abs(d.time_ratio_ci.estimate - means) < 1e-12)
    assert.is_true(d.time_ratio_ci.lo < means and means < d.time_ratio_ci.hi)
    assert.are.equal(10, #d.a.minutes)
    assert.are.equal(3072, d.b.samples_to_converge.min)
    local again = doc('7')
    assert.are.equal(d.time_ratio_ci.lo, again.time_ratio_ci.lo)
    assert.are.equal(d.time_ratio_ci.hi, again.time_ratio_ci.hi)
    local other = doc('8')
    assert.are_not.equal(d.time_ratio_ci.lo, other.time_ratio_ci.lo)
  end)

  it('refuses two different benchmarks, and wants two directories or more', function()
    local dir = h.tmpdir()
    local text = h.read(AMD .. '/result_0.txt'):gsub('"value": "llama2_70b_lora"',
      '"value": "llama31_8b"')
    h.write(dir .. '/result_0.txt', text)
    local r = h.run({ 'mlperf', 'compare', AMD, dir })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find('different benchmarks: ' .. AMD .. ' is llama2_70b_lora, '
      .. dir .. ' is llama31_8b', 1, true))
    r = h.run({ 'mlperf', 'compare', AMD })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find('compare takes two or more directories, A (the baseline) and '
      .. 'B...', 1, true))
  end)
end)

-- The second benchmark: llama31_8b, the same two systems (tests/fixtures/mlperf, SOURCES.md).
-- Every number below is what MLPerf's own result summarizer gave on these files (EXPECTED.md).
local AMD8 = h.fixture('mlperf/amd_MI355X_EPYC_9575F_pytorch_llama31_8b')
local NVIDIA8 = h.fixture('mlperf/nvidia_theia_ngpu8_ngc25.09_nemo_llama31_8b')
local AMD8_SCORE, NVIDIA8_SCORE = 99.70854353631518, 67.37329375
local MINUTES8 = {
  [AMD8] = { 95.96894999999999, 102.68223333333334, 95.74425, 109.44045, 102.65991666666667,
    102.64596666666667, 102.73931666666667, 95.89005, 95.90068333333333, 95.99398333333333 },
  [NVIDIA8] = { 68.87821666666666, 64.2261, 68.742, 64.81073333333333, 64.83883333333334,
    64.56951666666667, 69.14031666666666, 69.0716, 69.0635, 69.01195 },
}

describe('tplua mlperf score and compare: llama31_8b', function()
  it('scores AMD MI355X llama31_8b as MLPerf does (99.7085 minutes, scaling.json)', function()
    local r = h.run({ 'mlperf', 'score', AMD8 })
    assert.are.equal('', r.stderr)
    assert.are.equal(0, r.code)
    local out = r.stdout
    assert.is_truthy(out:find('MLPerf Training llama31_8b, ', 1, true))
    assert.is_truthy(out:find('10 result files, 10 required', 1, true))
    assert.is_truthy(out:find('\n  result_3.txt  success    109.4404     196576     16  3.2818\n',
      1, true), out)
    -- result_9.txt ends its lines with CR LF, as published: read the same.
    assert.is_truthy(out:find('\n  result_9.txt  success     95.9940     172000     14  3.2909\n',
      1, true), out)
    assert.is_truthy(out:find('olympic mean: 99.3101 minutes (1 fastest and 1 slowest dropped)',
      1, true), out)
    assert.is_truthy(out:find('scaling factor: 1.004012 (scaling.json)', 1, true), out)
    assert.is_truthy(out:find('\nscore: 99.7085 minutes\n', 1, true), out)
  end)

  it('scores NVIDIA 8-GPU llama31_8b as MLPerf does (67.3733 minutes, no scaling.json)',
    function()
      local r = h.run({ 'mlperf', 'score', NVIDIA8 })
      assert.are.equal('', r.stderr)
      assert.are.equal(0, r.code)
      local out = r.stdout
      assert.is_truthy(out:find('\n  result_1.txt  success     64.2261     172032     14  3.2981\n',
        1, true), out)
      assert.is_truthy(out:find('olympic mean: 67.3733 minutes', 1, true), out)
      assert.is_falsy(out:find('scaling factor:', 1, true), out)
      assert.is_truthy(out:find('\nscore: 67.3733 minutes\n', 1, true), out)
    end)

  it('gives each run the time to train MLPerf gives, to the last bit', function()
    -- MLPerf's summarizer divides the milliseconds by 60, then by 1000; dividing by 60000 once
    -- gives 95.96895 for AMD's result_0 (its 95.96894999999999).
    for _, dir in ipairs({ AMD8, NVIDIA8 }) do
      local want = MINUTES8[dir]
      local doc = json.decode(h.run({ 'mlperf', 'score', dir, '--json' }).stdout)
      assert.are.equal('llama31_8b', doc.benchmark)
      assert.are.equal(10, #doc.runs)
      assert.are.equal(0, #doc.findings)
      for i, run in ipairs(doc.runs) do
        assert.are.equal(string.format('result_%d.txt', i - 1), run.file:match('[^/]+$'))
        assert.are.equal(want[i], run.minutes, run.file)
      end
      assert.are.equal(dir == AMD8 and AMD8_SCORE or NVIDIA8_SCORE, doc.score)
    end
  end)

  it('compares NVIDIA (B) to AMD (A): the ratio of the two scores, a CI of the time ratio',
    function()
      local r = h.run({ 'mlperf', 'compare', AMD8, NVIDIA8 })
      assert.are.equal('', r.stderr)
      assert.are.equal(0, r.code)
      local out = r.stdout
      assert.is_truthy(out:find('MLPerf Training llama31_8b: B vs A', 1, true))
      assert.is_truthy(out:find(string.format('score ratio B/A: %.4f (67.3733 / 99.7085)',
        NVIDIA8_SCORE / AMD8_SCORE), 1, true), out)
      local lo, hi = out:match('mean time to train B/A: [%d.]+, 95%% CI %[([%d.]+), ([%d.]+)%] '
        .. '%(bootstrap, 10000 resamples, seed 1%)')
      assert.is_truthy(lo, out)
      local d = json.decode(h.run({ 'mlperf', 'compare', AMD8, NVIDIA8, '--json' }).stdout)
      assert.are.equal('llama31_8b', d.benchmark)
      assert.is_true(math.abs(d.ratio - NVIDIA8_SCORE / AMD8_SCORE) < 1e-12)
      local function mean(t)
        local s = 0
        for _, v in ipairs(t) do
          s = s + v
        end
        return s / #t
      end
      local means = mean(MINUTES8[NVIDIA8]) / mean(MINUTES8[AMD8])
      assert.is_true(math.abs(d.time_ratio_ci.estimate - means) < 1e-12)
      assert.is_true(d.time_ratio_ci.lo < means and means < d.time_ratio_ci.hi)
      assert.are.equal(string.format('%.4f', d.time_ratio_ci.lo), lo)
      assert.are.equal(string.format('%.4f', d.time_ratio_ci.hi), hi)
    end)

  it('refuses to compare llama31_8b with llama2_70b_lora', function()
    local r = h.run({ 'mlperf', 'compare', AMD8, NVIDIA })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find('different benchmarks: ' .. AMD8 .. ' is llama31_8b, '
      .. NVIDIA .. ' is llama2_70b_lora', 1, true), r.stderr)
  end)
end)
