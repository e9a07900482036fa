-- tplua mlperf score: the RCP check, one case per rule (tests/fixtures/mlperf/rcp/cases.json:
-- each case's result files are written here from its runs, the same lines from which MLPerf's
-- own rcp_checker gave the expected verdict, SOURCES.md), and the real AMD and NVIDIA v5.1
-- submissions of llama2_70b_lora and llama31_8b (all pass, RCP found, with the normalisation
-- factor MLPerf's checker gives: that of their scaling.json, or 1 where there is none).
local h = require('helper')
local json = require('tp.json')
local materialise = require('cli.mlperf_cases').materialise

local RCP = h.fixture('mlperf/rcp')
local AMD = h.fixture('mlperf/amd_MI355X_EPYC_9575F_pytorch_llama2_70b_lora')
local NVIDIA = h.fixture('mlperf/nvidia_theia_ngpu8_ngc25.09_nemo_llama2_70b_lora')
local function score(dir, extra)
  local args = { 'mlperf', 'score', dir, '--json' }
  table.move(extra or {}, 1, #(extra or {}), #args + 1, args)
  local r = h.run(args)
  assert.are.equal('', r.stderr)
  return json.decode(r.stdout), r
end

local function near(want, got, tol, what)
  assert(type(got) == 'number', what .. ': no number')
  assert(math.abs(want - got) <= tol, string.format('%s: want %.12g, got %.12g', what, want, got))
end

local cases = require('cli.mlperf_cases').cases()

describe('tplua mlperf score: the RCP check, rule by rule', function()
  it('has a case for each rule', function()
    assert.is_true(#cases >= 19)
  end)
  for _, case in ipairs(cases) do
    it(case.name .. ': ' .. case.rule, function()
      local dir = materialise(case)
      local extra = { '--ruleset', case.ruleset }
      if case.rcp_file then
        extra[#extra + 1] = '--rcp-file'
        extra[#extra + 1] = RCP .. '/' .. case.rcp_file
      end
      local doc = score(dir, extra)
      local v, want = doc.rcp, case.expected
      assert.is_table(v)
      if want.kind then
        assert.are.equal(want.kind, v.kind)
      end
      if want.pass ~= nil then
        assert.are.equal(want.pass, v.pass)
      else
        assert.is_nil(v.pass)
      end
      if want.message then
        assert.are.equal(want.message, v.message)
      end
      if want.rcp_bs and v.rcp then
        assert.are.equal(want.rcp_bs, v.rcp.bs)
        near(want.rcp_mean, v.rcp.mean, 1e-9, 'RCP mean')
        near(want.min_mean, v.min_mean, 1e-3, 'least accepted mean')
        near(want.mean, v.mean, 1e-4, 'submission mean')
        near(want.norm_factor, v.norm_factor, 1e-12, 'normalisation factor')
      else
        assert.is_nil(want.rcp_bs)
      end
      -- Without a scaling.json, a passed check's factor above 1 scales the score.
      if want.pass and want.norm_factor and want.norm_factor > 1 then
        assert.are.equal('rcp', doc.scaling_source)
        near(want.norm_factor, doc.scaling_factor, 1e-12, 'scaling factor')
        if doc.olympic then
          near(doc.olympic * want.norm_factor, doc.score, 1e-9, 'score')
        end
      else
        assert.is_nil(doc.scaling_source)
        assert.are.equal(1, doc.scaling_factor)
      end
      if want.pass == false then
        local found = false
        for _, f in ipairs(doc.findings) do
          found = found or f:find('RCP check failed', 1, true) ~= nil
        end
        assert.is_true(found)
      end
    end)
  end

  it('prints the verdict, the reference and the submission in text', function()
    local case
    for _, c in ipairs(cases) do
      if c.name == 'found_too_fast' then
        case = c
      end
    end
    local r = h.run({ 'mlperf', 'score', materialise(case) })
    assert.is_truthy(r.stdout:find('RCP check (training 5.1.0, pruned RCPs): FAILED, RCP found',
      1, true))
    assert.is_truthy(r.stdout:find('reference: llama2_70b_lora_ref_8, BS 8: mean samples to '
      .. 'converge 3178.67, stdev 299.91, least accepted mean 2960.63', 1, true))
    assert.is_truthy(r.stdout:find('submission: BS 8, mean samples to converge 2688.00 (olympic) '
      .. '< 2960.63; normalisation factor 1.182540', 1, true))
  end)

  it('refuses a ruleset it carries no RCPs of, naming those it does, and a malformed one',
    function()
    -- The rulesets tplua carries: the training_<V> folders of stdlib/tp/analyse/mlperf_rcp.
    local known = {}
    for _, e in ipairs(assert(require('tp.fs').list(h.source_dir
      .. '/stdlib/tp/analyse/mlperf_rcp'))) do
      local v = e.name:match('^training_(.+)$')
      if v then
        known[#known + 1] = v
      end
    end
    table.sort(known)
    assert.are.same({ '5.0.0', '5.1.0', '6.0.0', '6.1.0' }, known)
    for _, args in ipairs({ { 'score', AMD }, { 'score', AMD, '--json' },
      { 'compare', AMD, NVIDIA } }) do
      for _, v in ipairs({ '9.9.9', '4.1.0' }) do
        local argv = { 'mlperf' }
        table.move(args, 1, #args, 2, argv)
        argv[#argv + 1] = '--ruleset'
        argv[#argv + 1] = v
        local r = h.run(argv)
        assert.are.equal(2, r.code, r.stdout .. r.stderr)
        assert.are.equal('', r.stdout)
        assert.is_truthy(r.stderr:find("tplua mlperf: option '--ruleset': unknown MLPerf "
          .. 'Training ruleset ' .. v .. ': tplua carries the RCPs of '
          .. table.concat(known, ', ') .. ' (or give an RCP file with --rcp-file)', 1, true),
          r.stderr)
      end
    end
    local r = h.run({ 'mlperf', 'score', AMD, '--ruleset', 'v5' })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("option '--ruleset': 'v5' is not a version like 5.1.0", 1,
      true))
    -- Any version with an RCP file of the user's: the file is the data, and the check runs.
    local doc = score(AMD, { '--ruleset', '4.1.0', '--rcp-file',
      h.source_dir .. '/stdlib/tp/analyse/mlperf_rcp/training_5.1.0/rcps_llama2_70b_lora.json' })
    assert.is_true(doc.rcp.pass)
    assert.are.equal('4.1.0', doc.rcp.ruleset)
    -- A carried ruleset without the benchmark's RCPs (llama31_8b is not in 5.0.0): the check
    -- says it could not run, and why.
    doc = score(h.fixture('mlperf/amd_MI355X_EPYC_9575F_pytorch_llama31_8b'),
      { '--ruleset', '5.0.0' })
    assert.are.equal('error', doc.rcp.kind)
    assert.is_truthy(doc.rcp.reason:find('no RCP data for llama31_8b in training ruleset 5.0.0 '
      .. '(tplua carries ' .. table.concat(known, ', ') .. ')', 1, true), doc.rcp.reason)
    local noted = false
    for _, f in ipairs(doc.findings) do
      noted = noted or f:find('RCP check not run: no RCP data', 1, true) ~= nil
    end
    assert.is_true(noted)
  end)

  it('names a damaged RCP file', function()
    local dir = h.tmpdir()
    h.write(dir .. '/bad.json', '{"x": {"Benchmark": "llama2_70b_lora", "BS": 8}}')
    local doc = score(AMD, { '--rcp-file', dir .. '/bad.json' })
    assert.are.equal('error', doc.rcp.kind)
    assert.is_truthy(doc.rcp.reason:find(dir .. '/bad.json: record x: needs a number BS and a '
      .. 'list "samples to converge"', 1, true))
  end)
end)

describe('tplua mlperf score: the RCP check of the real v5.1 submissions', function()
  -- MLPerf's rcp_checker (training 5.1.0, pruned RCPs) on these directories: all four "RCP
  -- found, RCP test PASSED" (EXPECTED.md). llama2_70b_lora: factors 3178.6666666666665 / 3168.0
  -- and / 3072.0. llama31_8b: AMD (BS 32) 178858.66666666666 / 178144.0; NVIDIA (BS 16) converges
  -- slower than its reference (179712.0 > 161109.33333333334): factor 1, and no scaling.json.
  local AMD8 = h.fixture('mlperf/amd_MI355X_EPYC_9575F_pytorch_llama31_8b')
  local NVIDIA8 = h.fixture('mlperf/nvidia_theia_ngpu8_ngc25.09_nemo_llama31_8b')
  for _, s in ipairs({
    { 'AMD MI355X llama2_70b_lora', AMD, 8, 'llama2_70b_lora_ref_8', 3178.6666666666665,
      2960.6339616775513, 3168.0, 1.0033670033670032, true },
    { 'NVIDIA 8-GPU llama2_70b_lora', NVIDIA, 8, 'llama2_70b_lora_ref_8', 3178.6666666666665,
      2960.6339616775513, 3072.0, 1.034722222222222, true },
    { 'AMD MI355X llama31_8b', AMD8, 32, 'llama31_8b_ref_32', 178858.66666666666,
      173649.76494948068, 178144.0, 1.004011735824202, true },
    { 'NVIDIA 8-GPU llama31_8b', NVIDIA8, 16, 'llama31_8b_ref_16', 161109.33333333334,
      157919.5454909007, 179712.0, 1.0, false },
  }) do
    it(s[1] .. ' passes, RCP found, with the normalisation of MLPerf\'s checker', function()
      local doc = score(s[2])
      assert.is_true(doc.rcp.pass)
      assert.are.equal('found', doc.rcp.kind)
      assert.are.equal('RCP found', doc.rcp.message)
      assert.are.equal(s[3], doc.rcp.bs)
      assert.are.equal(s[4], doc.rcp.rcp.name)
      near(s[5], doc.rcp.rcp.mean, 1e-9, 'RCP mean')
      near(s[6], doc.rcp.min_mean, 1e-3, 'least accepted mean')
      near(s[7], doc.rcp.mean, 1e-9, 'mean')
      near(s[8], doc.rcp.norm_factor, 1e-12, 'factor')
      if s[9] then
        assert.are.equal('scaling.json', doc.scaling_source)
        near(s[8], doc.scaling_factor, 1e-15, 'scaling.json factor')
      else
        assert.is_nil(doc.scaling_source)
        assert.are.equal(1, doc.scaling_factor)
      end
      assert.are.equal(0, #doc.findings)
    end)
  end

  it('gives AMD llama31_8b without its scaling.json the same score, from the RCP check',
    function()
      local dir = h.tmpdir()
      for i = 0, 9 do
        h.write(dir .. '/result_' .. i .. '.txt', h.read(AMD8 .. '/result_' .. i .. '.txt'))
      end
      local doc = score(dir)
      assert.are.equal('rcp', doc.scaling_source)
      near(1.004011735824202, doc.scaling_factor, 1e-12, 'factor')
      near(99.70854353631518, doc.score, 1e-9, 'score')
    end)

  it('scales by the RCP normalisation when the directory has no scaling.json', function()
    local dir = h.tmpdir()
    for i = 0, 9 do
      h.write(dir .. '/result_' .. i .. '.txt', h.read(NVIDIA .. '/result_' .. i .. '.txt'))
    end
    local doc = score(dir)
    assert.are.equal('rcp', doc.scaling_source)
    near(5.971267693865741, doc.score, 1e-9, 'score')
  end)

  it('names a scaling.json factor that is not the RCP normalisation', function()
    local dir = h.tmpdir()
    for i = 0, 9 do
      h.write(dir .. '/result_' .. i .. '.txt', h.read(AMD .. '/result_' .. i .. '.txt'))
    end
    h.write(dir .. '/scaling.json', '{"scaling_factor": 1.5}')
    local doc = score(dir)
    assert.are.equal('scaling.json', doc.scaling_source)
    assert.is_truthy(doc.findings[1]:find("scaling.json's factor 1.500000 is not the RCP "
      .. 'normalisation 1.003367', 1, true))
  end)
end)

describe('tplua mlperf score: the RCP check on edge cases of the rules', function()
  local base = require('cli.mlperf_cases').case('found_faster_normalised')
  local function variant(changes)
    local c = {}
    for k, v in pairs(base) do
      c[k] = v
    end
    for k, v in pairs(changes) do
      c[k] = v
    end
    return c
  end

  it('takes a first file without global_batch_size as a mismatch, as get_submission_epochs does',
    function()
      -- MLPerf's checker keeps the first file's batch size (-1 when absent) and fails on the
      -- next file's 8: "Could not detect global_batch_size".
      local gbs = {}
      for i = 2, 10 do
        gbs[i] = 8
      end
      local doc = score(materialise(variant({ gbs = gbs })))
      assert.is_false(doc.rcp.pass)
      assert.are.equal('no_bs', doc.rcp.kind)
      assert.is_truthy(doc.rcp.message:find('Batch sizes in files do not match', 1, true))
    end)

  it('fails, without a NaN, a directory with too few runs for the olympic mean', function()
    local doc = score(materialise(variant({ samples = { 3072, 3072 },
      status = { 'success', 'success' } })))
    assert.is_false(doc.rcp.pass)
    assert.are.equal('insufficient', doc.rcp.kind)
    assert.are.equal('Insufficient convergence: 2 result files, the olympic mean needs 3 or '
      .. 'more', doc.rcp.message)
  end)

  it('rounds epoch_num to 3 decimals as Python round() does (halves to even)', function()
    local rcp = require('tp.analyse._mlperf_rcp')
    local function epochs(e)
      return rcp.run_epochs({ status = 'success', conv = { epoch_num = e }, file = 'r' }, 'bert')
    end
    -- round(2.0625, 3) == 2.062 and round(2.0635, 3) == 2.063 in Python 3.
    assert.are.equal(2.062, epochs(2.0625))
    assert.are.equal(2.063, epochs(2.0635))
    assert.are.equal(0.001, epochs(0.0005))
    assert.are.equal(rcp.NOT_CONVERGED, rcp.run_epochs({ status = 'aborted' }, 'bert'))
  end)
end)

describe('tplua mlperf score: files of different benchmarks', function()
  it('fails the RCP check and names the odd file, as get_submission_epochs refuses them',
    function()
      local c = require('cli.mlperf_cases').case('found_faster_normalised')
      local dir = materialise(c)
      local odd = h.read(dir .. '/result_3.txt'):gsub('"llama2_70b_lora"', '"llama31_8b"', 1)
      h.write(dir .. '/result_3.txt', odd)
      local doc = score(dir)
      assert.is_false(doc.rcp.pass)
      assert.are.equal('no_bs', doc.rcp.kind)
      assert.are.equal('Benchmark names in files do not match (result_3.txt: llama31_8b, '
        .. 'llama2_70b_lora)', doc.rcp.message)
      assert.are.equal("result_3.txt: submission_benchmark llama31_8b, not llama2_70b_lora (the "
        .. "first file's): files of different benchmarks", doc.findings[1])
    end)
end)
