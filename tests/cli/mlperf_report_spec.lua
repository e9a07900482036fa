-- MLPerf submission directories in `tplua compare` (the comparison of `tplua mlperf compare`,
-- RCP flags included) and `tplua report` (the table and the plot of eval accuracy against
-- samples), on the real v5.1 AMD and NVIDIA llama2_70b_lora submissions and on RCP cases built
-- for it (tests/fixtures/mlperf/rcp).
local h = require('helper')
local json = require('tp.json')
local cases = require('cli.mlperf_cases')

local AMD = h.fixture('mlperf/amd_MI355X_EPYC_9575F_pytorch_llama2_70b_lora')
local NVIDIA = h.fixture('mlperf/nvidia_theia_ngpu8_ngc25.09_nemo_llama2_70b_lora')

local function gnuplot_missing()
  return not os.execute('gnuplot --version >/dev/null 2>&1')
end

describe('tplua compare on MLPerf submission directories', function()
  it('gives the comparison of tplua mlperf compare, text and JSON', function()
    local a = h.run({ 'compare', AMD, NVIDIA })
    local b = h.run({ 'mlperf', 'compare', AMD, NVIDIA })
    assert.are.equal('', a.stderr)
    assert.are.equal(0, a.code)
    assert.are.equal(b.stdout, a.stdout)
    assert.is_truthy(a.stdout:find('  RCP check' .. string.rep(' ', 33) .. 'pass'
      .. string.rep(' ', 18) .. 'pass\n', 1, true))
    assert.is_truthy(a.stdout:find('mean time to train B/A: 0.5766, 95% CI [0.5480, 0.6108]', 1,
      true))
    a = h.run({ 'compare', AMD, NVIDIA, '--json', '--seed', '3' })
    b = h.run({ 'mlperf', 'compare', AMD, NVIDIA, '--json', '--seed', '3' })
    assert.are.equal(b.stdout, a.stdout)
    local doc = json.decode(a.stdout)
    assert.are.equal(0, #doc.flags)
    assert.is_true(doc.a.rcp.pass)
    assert.are.equal('scaling.json', doc.b.scaling_source)
  end)

  it('flags a side whose convergence falls outside the RCP band', function()
    local ok = cases.materialise(cases.case('found_faster_normalised'))
    local fast = cases.materialise(cases.case('found_too_fast'))
    local r = h.run({ 'compare', ok, fast })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('  RCP check' .. string.rep(' ', 33) .. 'pass'
      .. string.rep(' ', 18) .. 'FAIL\n', 1, true))
    assert.is_truthy(r.stdout:find('\nflag: B (' .. fast .. '): convergence outside the RCP '
      .. 'band: mean samples to converge 2688.0 < 2960.6, the least the RCP (BS 8, mean 3178.7) '
      .. 'accepts (RCP found)\n', 1, true))
    assert.is_nil(r.stdout:find('flag: A', 1, true))
    -- The side that passes scales by the RCP normalisation (no scaling.json), the other not.
    assert.is_truthy(r.stdout:find('scaling factor' .. string.rep(' ', 18) .. '1.034722 (rcp)'
      .. string.rep(' ', 14) .. '1.000000\n', 1, true))
    local doc = json.decode(h.run({ 'compare', ok, fast, '--json' }).stdout)
    assert.are.equal(1, #doc.flags)
    assert.is_false(doc.b.rcp.pass)
  end)

  it('compares three or more against the first, and refuses mixing with run records',
    function()
      local r = h.run({ 'compare', AMD, NVIDIA, AMD, '--json' })
      assert.are.equal(0, r.code)
      local doc = json.decode(r.stdout)
      assert.are.equal(2, #doc.comparisons)
      assert.is_true(math.abs(doc.comparisons[2].ratio - 1) < 1e-12)
      local runs = h.source_dir .. '/examples/runs/llama3.1-8b-identical/amd'
      r = h.run({ 'compare', AMD, runs })
      assert.are.equal(2, r.code)
      assert.is_truthy(r.stderr:find('MLPerf submission directories are compared with each '
        .. 'other: give two or more of them and no run records', 1, true))
      r = h.run({ 'compare', AMD, NVIDIA, '--csv', '-' })
      assert.are.equal(2, r.code)
      assert.is_truthy(r.stderr:find("option '--csv' is not for MLPerf submission directories",
        1, true))
    end)
end)

describe('tplua report on MLPerf submission directories', function()
  it('writes the table and the plot of eval accuracy against samples', function()
    if gnuplot_missing() then
      pending('gnuplot is not installed: the plot cannot be drawn here')
      return
    end
    local out = h.tmpdir() .. '/rep'
    local r = h.run({ 'report', AMD, NVIDIA, '--out', out })
    assert.are.equal('', r.stderr)
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('B / A: score ratio 0.5863, mean time to train 0.5766 (95% '
      .. 'CI 0.5480-0.6108)', 1, true))
    local md = h.read(out .. '/report.md')
    assert.is_truthy(md:find('| score (minutes) | 10.1847 | 5.9713 |', 1, true))
    assert.is_truthy(md:find('| RCP check | pass, RCP found | pass, RCP found |', 1, true))
    assert.is_truthy(md:find('| samples to converge (mean, range) | 3187.2 (3072..3456) | '
      .. '3110.4 (3072..3456) |', 1, true))
    -- llama2_70b_lora's eval_accuracy is an evaluation loss: the section, the chart, its
    -- caption and the runs' column say lower is better, and the chart draws MLPerf's target.
    assert.is_truthy(md:find('## Eval loss against samples (lower is better)\n\n![Eval loss '
      .. 'against samples (lower is better)](eval_accuracy.png)', 1, true), md)
    assert.is_truthy(md:find("the dashed line is MLPerf's target (<= 0.925)", 1, true))
    assert.is_truthy(md:find('| file | status | minutes | samples | evals | last eval loss '
      .. '(lower is better) |', 1, true))
    assert.is_truthy(md:find('| runs scored / not (required) | 10 / 0 (10) | 10 / 0 (10) |', 1,
      true))
    assert.is_truthy(md:find('| result_6.txt | success | 7.0352 | 3456 | 6 | 0.9228 |', 1, true))
    local png = h.read(out .. '/eval_accuracy.png')
    assert.are.equal('\137PNG', png:sub(1, 4))
    local html = h.read(out .. '/report.html')
    assert.is_truthy(html:find('<svg', 1, true))
    assert.is_nil(html:find('<script', 1, true))
    assert.is_truthy(html:find('<td class="n">10.1847</td>', 1, true))
    -- One polyline per run that logs evals: 10 + 10 in the SVG's plot groups.
    local svg = h.read(out .. '/eval_accuracy.svg')
    local _, groups = svg:gsub('<g id="gnuplot_plot_%d+"', '')
    assert.are.equal(21, groups)  -- and the target
    assert.is_truthy(svg:find('Eval loss against samples, every run (lower is better)', 1, true))
    assert.is_truthy(svg:find('eval loss (eval_accuracy), lower is better', 1, true))
    assert.is_truthy(svg:find('MLPerf target: &lt;= 0.925', 1, true)
      or svg:find('MLPerf target: <= 0.925', 1, true))
  end)

  it('says why the plot is missing with --no-plots, and shows the RCP flag', function()
    local out = h.tmpdir() .. '/rep'
    local fast = cases.materialise(cases.case('found_too_fast'))
    local r = h.run({ 'report', AMD, fast, '--out', out, '--no-plots' })
    assert.are.equal(0, r.code)
    assert.is_truthy(r.stdout:find('flag: B (' .. fast .. '): convergence outside the RCP band',
      1, true))
    local md = h.read(out .. '/report.md')
    assert.is_truthy(md:find('Not drawn: plots were turned off', 1, true))
    assert.is_truthy(md:find('- **flag**: B (' .. fast .. '): convergence outside', 1, true))
    assert.is_nil(h.read(out .. '/eval_accuracy.png'))
    r = h.run({ 'report', AMD, fast, '--out', out, '--by', 'gbs' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("option '--by' is not for MLPerf submission directories", 1,
      true))
    r = h.run({ 'report', AMD, '--out', out })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find('give two or more of them and no run records', 1, true))
  end)

  it('shows a run without run_stop as (none) and an open-division side as not applied',
    function()
      local out = h.tmpdir() .. '/rep'
      local dir = h.tmpdir()
      for i = 0, 9 do
        local text = h.read(NVIDIA .. '/result_' .. i .. '.txt')
          :gsub('"submission_division", "value": "closed"', '"submission_division", "value": '
            .. '"open"')
        if i == 4 then
          text = text:gsub(':::MLLOG [^\n]*"run_stop"[^\n]*\n', '')
        end
        h.write(dir .. '/result_' .. i .. '.txt', text)
      end
      local r = h.run({ 'report', AMD, dir, '--out', out, '--no-plots' })
      assert.are.equal(0, r.code, r.stderr)
      local md = h.read(out .. '/report.md')
      assert.is_truthy(md:find('| RCP check | pass, RCP found | not applied (not the closed '
        .. 'division) |', 1, true), md)
      assert.is_truthy(md:find('\n| result_4.txt | (none) | - | ', 1, true), md)
      assert.is_nil(md:find('(nil)', 1, true))
    end)
end)
