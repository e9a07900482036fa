-- tplua mlperf export: run records written as MLPerf `:::MLLOG` lines, read back by
-- `tplua mlperf score` and by the MLLOG reader (tp.analyse.mlperf.parse_text): the same run
-- (iterations, samples, time to train, eval points, status). Real records: the three AMD runs
-- of examples/runs (the log's clock), and records extracted from real NeMo logs of
-- tests/fixtures/logs/nemo (step times only, a validation loss, a run cut short).
local h = require('helper')
local json = require('tp.json')
local mlperf = require('tp.analyse.mlperf')

local RUNS = h.source_dir .. '/examples/runs/llama3.1-8b-identical/amd'
local NEMO = h.fixture('logs/nemo')

local function extract(log)
  local out = h.tmpdir() .. '/run.json'
  local r = h.run({ 'extract', NEMO .. '/' .. log, '--json', out })
  assert.are.equal(0, r.code, r.stderr)
  return out, json.decode(h.read(out))
end

local function loss_records(rec)
  local out = {}
  for _, r in ipairs(rec.records) do
    if type(r.loss) == 'number' then
      out[#out + 1] = r
    end
  end
  return out
end

-- The run as the MLLOG reader sees it, checked against the record it was made from.
local function same_run(text, rec, name)
  local run = mlperf.parse_text(text, name)
  local recs = rec.records
  local last = recs[#recs]
  for _, f in ipairs(run.findings) do
    assert.is_truthy(f:find('run_stop status is aborted', 1, true), f)
  end
  -- Iterations: one train_loss per record with a loss, the same losses, step numbers, samples.
  local losses = loss_records(rec)
  assert.are.equal(#losses, #run.train_losses)
  for i, r in ipairs(losses) do
    assert.are.equal(r.loss, run.train_losses[i].value)
    assert.are.equal(r.iteration, run.train_losses[i].step_num)
  end
  assert.are.equal(last.iteration, run.train_losses[#run.train_losses].step_num)
  assert.are.equal(last.consumed_samples, run.stop_samples)
  assert.are.equal(last.consumed_samples, run.train_losses[#run.train_losses].samples_count)
  return run
end

describe('tplua mlperf export', function()
  it('round-trips the AMD runs of examples/runs: iterations, samples, times to train',
    function()
      local out = h.tmpdir() .. '/amd'
      local r = h.run({ 'mlperf', 'export', RUNS, '--out', out })
      assert.are.equal('', r.stderr)
      assert.are.equal(0, r.code)
      assert.is_truthy(r.stdout:find('amd-primus-e84adbb11776-r1.json -> ' .. out
        .. '/result_0.txt: 500 iterations, 32000 samples, 0 evals, success', 1, true))
      -- A result file left in the directory from before is named.
      h.write(out .. '/result_7.txt', '')
      r = h.run({ 'mlperf', 'export', RUNS, '--out', out })
      assert.are.equal(0, r.code)
      assert.is_truthy(r.stderr:find('warning: ' .. out .. '/result_7.txt is not from ' .. RUNS,
        1, true))
      os.remove(out .. '/result_7.txt')
      local s = h.run({ 'mlperf', 'score', out, '--json' })
      assert.are.equal(0, s.code)
      local doc = json.decode(s.stdout)
      assert.are.equal('llama3.1-8b', doc.benchmark)
      assert.are.equal(3, #doc.runs)
      assert.are.equal('not_applied', doc.rcp.kind)
      for i, n in ipairs({ 'r1', 'r2', 'r3' }) do
        local rec = json.decode(h.read(RUNS .. '/amd-primus-e84adbb11776-' .. n .. '.json'))
        local run = doc.runs[i]
        assert.are.equal('success', run.status)
        -- Time to train: from the start of the first step (its time minus its step time) to
        -- the last record's time, on the log's clock; time_ms is whole milliseconds.
        local first, last = rec.records[1], rec.records[#rec.records]
        local minutes = (last.time_s - (first.time_s - first.step_time_s)) / 60
        assert.is_true(math.abs(run.minutes - minutes) < 2 / 60000,
          string.format('%s: %.9f vs %.9f', n, run.minutes, minutes))
        same_run(h.read(string.format('%s/result_%d.txt', out, i - 1)), rec, n)
      end
    end)

  it('round-trips a NeMo run with a validation loss: the eval point, step-time clock',
    function()
      local path, rec = extract('bionemo_geneformer_sanity_check_validation.log')
      local out = h.tmpdir() .. '/result_0.txt'
      local r = h.run({ 'mlperf', 'export', path, '--out', out, '--benchmark', 'llama2_70b_lora',
        '--org', 'tplua', '--platform', '1xcpu' })
      assert.are.equal(0, r.code, r.stderr)
      local text = h.read(out)
      local run = same_run(text, rec, 'result_0.txt')
      assert.are.equal('llama2_70b_lora', run.benchmark)
      assert.are.equal('tplua', run.org)
      assert.are.equal('open', run.division)
      assert.are.equal('1xcpu', run.platform)
      assert.are.equal('success', run.status)
      assert.are.equal(rec.training_config.global_batch_size, run.global_batch_size)
      -- The eval points: where the printed val_loss first appears or changes.
      local want, prev = {}, nil
      for _, x in ipairs(rec.records) do
        local v = x.extra ~= json.null and type(x.extra) == 'table' and tonumber(x.extra.val_loss)
        if v and v ~= prev then
          want[#want + 1] = { value = v, samples = x.consumed_samples }
        end
        prev = v or prev
      end
      assert.is_true(#want >= 1)
      assert.are.equal(#want, #run.evals)
      for i, w in ipairs(want) do
        assert.are.equal(w.value, run.evals[i].value)
        assert.are.equal(w.samples, run.evals[i].samples_count)
      end
      -- No clock in the log: time to train is the sum of the step times.
      local sum = 0
      for _, x in ipairs(rec.records) do
        sum = sum + x.step_time_s
      end
      assert.is_true(math.abs(run.minutes - sum / 60) < 2 / 60000)
      -- MLPerf's keys in their order, metadata as mllog writes it.
      assert.is_truthy(text:find('^:::MLLOG {"namespace": "", "time_ms": %d+, "event_type": '
        .. '"INTERVAL_START", "key": "init_start", "value": null, "metadata": {"file": '))
      assert.is_truthy(text:find('"event_type": "POINT_IN_TIME", "key": "eval_accuracy", '
        .. '"value": 8.696, "metadata": {"file": "' .. NEMO, 1, true))
      -- One block from run_start, and one more after each eval before the last step.
      local last = rec.records[#rec.records].consumed_samples
      local blocks = 1
      for _, w in ipairs(want) do
        blocks = blocks + (w.samples < last and 1 or 0)
      end
      assert.are.equal(blocks, run.counts.block_start)
      assert.are.equal(#text:gsub('[^\n]', ''), select(2, text:gsub(':::MLLOG {', '')))
    end)

  it('writes run_stop aborted for a run cut short, which score counts as not converged',
    function()
      local path, rec = extract('bionemo_esm2_srun_label_val_loss.log')
      assert.are_not.equal('completed', rec.outcome)
      local r = h.run({ 'mlperf', 'export', path })
      assert.are.equal(0, r.code, r.stderr)
      local run = same_run(r.stdout, rec, 'stdout')
      assert.are.equal('aborted', run.status)
      assert.is_false(run.ok)
      local dir = h.tmpdir()
      h.write(dir .. '/result_0.txt', r.stdout)
      local s = json.decode(h.run({ 'mlperf', 'score', dir, '--json' }).stdout)
      assert.are.equal(0, s.scored)
      assert.are.equal('aborted', s.runs[1].status)
    end)

  it('fails clearly: not a record, a directory without --out, bad values, an unwritable out',
    function()
      local dir = h.tmpdir()
      h.write(dir .. '/x.json', '{"a": 1}')
      local r = h.run({ 'mlperf', 'export', dir .. '/x.json' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(dir .. '/x.json: not a tplua run record', 1, true))
      r = h.run({ 'mlperf', 'export', dir, '--out', dir .. '/o' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(dir .. '/x.json: not a run record, left out', 1, true))
      assert.is_truthy(r.stderr:find(dir .. ': no run record', 1, true))
      r = h.run({ 'mlperf', 'export', RUNS })
      assert.are.equal(2, r.code)
      assert.is_truthy(r.stderr:find('export of a directory needs --out DIR', 1, true))
      r = h.run({ 'mlperf', 'export', RUNS, '--out', dir, '--division', 'closedish' })
      assert.are.equal(2, r.code)
      assert.is_truthy(r.stderr:find("option '--division': 'closedish' is not allowed", 1, true))
      local rec = RUNS .. '/amd-primus-e84adbb11776-r1.json'
      r = h.run({ 'mlperf', 'export', rec, '--out', dir .. '/missing/result_0.txt' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(dir .. '/missing/result_0.txt: ', 1, true))
      assert.is_nil(h.read(dir .. '/missing/result_0.txt'))
    end)

  it('writes nothing of a directory when one of its records cannot be exported', function()
    local src, out = h.tmpdir(), h.tmpdir()
    h.write(src .. '/a.json', h.read(RUNS .. '/amd-primus-e84adbb11776-r1.json'))
    -- A record (sorted after a.json) with no iteration at all, and one whose clock is absurd.
    local rec = json.decode(h.read(RUNS .. '/amd-primus-e84adbb11776-r2.json'))
    local records = rec.records
    rec.records = {}
    h.write(src .. '/b.json', json.encode(rec))
    local r = h.run({ 'mlperf', 'export', src, '--out', out })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find(src .. '/b.json: no iteration record: nothing to export',
      1, true), r.stderr)
    assert.are.equal('', r.stdout)
    assert.is_nil(h.read(out .. '/result_0.txt'))
    rec.records = records
    for _, x in ipairs(records) do
      x.time_s = 1e300
    end
    h.write(src .. '/b.json', json.encode(rec))
    r = h.run({ 'mlperf', 'export', src, '--out', out })
    assert.are.equal(1, r.code)
    assert.is_truthy(r.stderr:find(src .. '/b.json: the start time ', 1, true), r.stderr)
    assert.is_truthy(r.stderr:find(' s is out of range: nothing written', 1, true), r.stderr)
    assert.is_nil(h.read(out .. '/result_0.txt'))
  end)
end)
