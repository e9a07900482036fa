-- tp.record: run records from parsed logs (built here by hand in the shape tp.log.parse returns,
-- so every rule of the record builder is checked on known input), and their atomic save.
local h = require('helper')
local record = require('tp.record')

local null = record.null

local function near(a, b, tol)
  tol = tol or 1e-12
  return math.abs(a - b) <= tol * math.max(math.abs(b), 1e-300)
end

-- A parsed log in the tp.log contract shape; `times` gives one record per step time.
local function fake_log(times, extra)
  local records = {}
  for i, t in ipairs(times) do
    records[i] = {
      iteration = i,
      train_iters = 100,
      step_time_s = t,
      loss = 10 - i * 0.1,
      lr = 1e-4 * i,
      global_batch_size = 16,
      tflops_per_gpu = 100 + i,
      line = 10 + i,
    }
  end
  local log = {
    format = 'megatron',
    parser_version = '1',
    records = records,
    args = { seq_length = '128', world_size = '8', micro_batch_size = '1',
      tensor_model_parallel_size = '1', pipeline_model_parallel_size = '2',
      data_parallel_size = '4', bf16 = 'True', train_iters = '100', lr = '0.0001' },
    params = { total = 1000, shards = { { tp = 0, pp = 0, count = 1000 } } },
    memory = {},
    diagnostics = {},
    meta = { global_batch_size = 16, world_size = 8 },
  }
  for k, v in pairs(extra or {}) do
    log[k] = v
  end
  return log
end

-- 12 step times: two warm-up records then a steady 0.5 s.
local TIMES = { 30.5, 15.6, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5 }

local function find_diag(rec, kind)
  for _, d in ipairs(rec.diagnostics) do
    if d.kind == kind then
      return d
    end
  end
end

describe('tp.record.from_log', function()
  it('writes the schema, one record per iteration record with every field', function()
    local rec = record.from_log(fake_log(TIMES))
    assert.are.equal('tplua.run/2', rec.schema)
    assert.are.equal(12, #rec.records)
    local r = rec.records[3]
    assert.are.equal(3, r.iteration)
    assert.are.equal(0.5, r.step_time_s)
    assert.are.equal(null, r.grad_norm)
    assert.are.equal(null, r.mem_allocated_gib)
    for _, f in ipairs(record.RECORD_FIELDS) do
      assert.is_not_nil(r[f], f)
    end
    assert.are.equal('megatron', rec.framework)
    assert.are.equal('megatron', rec.source.parser)
    assert.are.equal('1', rec.source.parser_version)
  end)

  it('fills the tprimat flat arrays with the present values, in order', function()
    local log = fake_log({ 2, 1, 1 })
    log.records[2].loss = nil -- a record without loss (e.g. skipped iteration)
    log.records[3].lr = nil
    local rec = record.from_log(log)
    assert.are.same({ 1, 2, 3 }, rec.iterations)
    assert.are.same({ 2, 1, 1 }, rec.step_times)
    assert.are.same({ 9.9, 9.7 }, rec.loss_values)
    assert.are.same({ 1e-4, 2e-4 }, rec.learning_rates)
    assert.are.equal(null, rec.records[2].loss)
  end)

  it('finds the steady window with MSER-5 and computes tokens/s from gbs x seq_len', function()
    local rec = record.from_log(fake_log(TIMES))
    local p = rec.performance_metrics
    -- Batches of 5: (30.5 + 15.6 + 1.5) / 5 = 9.52 and 0.5; d* = 1: records 6..12.
    assert.are.equal('mser-5', p.steady_state.method)
    assert.are.equal(6, p.steady_state.first_record)
    assert.are.equal(12, p.steady_state.last_record)
    assert.are.equal(6, p.steady_state.first_iteration)
    assert.are.equal(7, p.steady_state.records)
    assert.are.equal(0.5, p.avg_step_time_seconds)
    assert.are.equal(0.5, p.median_step_time_seconds)
    assert.are.equal(0, p.std_step_time_seconds)
    -- 16 x 128 / 0.5 = 4096 tokens/s, / 8 GPUs = 512.
    assert.are.equal(4096, p.tokens_per_second)
    assert.are.equal(512, p.tokens_per_second_per_gpu)
    assert.are.equal(2048, p.tokens_per_step)
    -- The framework's own figure is kept, averaged over the same window: 100 + (6..12) -> 109.
    assert.are.equal(109, p.framework_tflops_per_gpu)
    assert.are.equal(null, p.framework_tokens_per_second_per_gpu)
    -- Mean over all records, first (warm-up) ones included: (30.5 + 15.6 + 10 * 0.5) / 12.
    assert.is_true(near(p.all_records.avg_step_time_seconds, 51.1 / 12))
    assert.are.equal(12, p.all_records.count)
  end)

  it('takes training_config from meta and the argument dump, with tprimat key names', function()
    local c = record.from_log(fake_log(TIMES)).training_config
    assert.are.equal(16, c.global_batch_size)
    assert.are.equal(128, c.sequence_length)
    assert.are.equal(8, c.num_gpus)
    assert.are.equal(1, c.micro_batch_size)
    assert.are.equal(1, c.tensor_parallel_size)
    assert.are.equal(2, c.pipeline_parallel_size)
    assert.are.equal(4, c.data_parallel_size)
    assert.are.equal('TP1_PP2_DP4', c.parallel_strategy)
    assert.are.equal(100, c.max_steps)
    assert.are.equal('bf16', c.precision)
    assert.are.equal(1e-4, c.learning_rate)
    assert.are.equal(null, c.expert_parallel_size)
    assert.are.equal('log', c.sources.global_batch_size)
    assert.are.equal('args', c.sources.sequence_length)
  end)

  it('lets flags override the log, and reports the disagreement', function()
    local rec = record.from_log(fake_log(TIMES), { gbs = 32, seq_len = 256, gpus = 16 })
    local c, p = rec.training_config, rec.performance_metrics
    assert.are.equal(32, c.global_batch_size)
    assert.are.equal('flag', c.sources.global_batch_size)
    assert.are.equal(32 * 256 / 0.5, p.tokens_per_second)
    assert.are.equal(32 * 256 / 0.5 / 16, p.tokens_per_second_per_gpu)
    local d = find_diag(rec, 'config_override')
    assert.is_truthy(d.message:find('global batch size 32 from the command line overrides 16',
      1, true))
  end)

  it('omits tokens/s with a diagnostic when gbs, seq_len or the GPU count is unknown', function()
    local log = fake_log(TIMES)
    log.args, log.meta = {}, {}
    for _, r in ipairs(log.records) do
      r.global_batch_size = nil
    end
    local rec = record.from_log(log)
    local p = rec.performance_metrics
    assert.is_nil(p.tokens_per_second)
    assert.is_nil(p.tokens_per_second_per_gpu)
    assert.are.equal(0.5, p.avg_step_time_seconds)
    local d = find_diag(rec, 'missing_config')
    assert.are.equal('warning', d.severity)
    assert.is_truthy(d.message:find('the global batch size or the sequence length; give them ' ..
      '(tplua extract --gbs --seq-len)', 1, true))
    -- With gbs and seq_len but no GPU count: tokens/s, not per GPU.
    rec = record.from_log(log, { gbs = 16, seq_len = 128 })
    assert.are.equal(4096, rec.performance_metrics.tokens_per_second)
    assert.is_nil(rec.performance_metrics.tokens_per_second_per_gpu)
    assert.is_truthy(find_diag(rec, 'missing_config').message:find('GPU count', 1, true))
  end)

  it('takes the batch size of the steady window when it ramps up earlier or inside', function()
    local log = fake_log(TIMES)
    log.meta, log.args = { world_size = 8 }, { seq_length = '128' }
    for i, r in ipairs(log.records) do
      r.global_batch_size = i <= 3 and 8 or 16 -- ramp-up before the window (records 6..12)
    end
    local rec = record.from_log(log)
    assert.are.equal(null, rec.training_config.global_batch_size)
    assert.are.equal(16 * 128 / 0.5, rec.performance_metrics.tokens_per_second)
    -- Inside the window: records 6..12 at 0.5 s with 16, 16, 16, 32, 32, 32, 32 samples:
    -- 176 samples in 3.5 s -> 176 x 128 / 3.5 tokens/s.
    for i, r in ipairs(log.records) do
      r.global_batch_size = i <= 8 and 16 or 32
    end
    rec = record.from_log(log)
    assert.is_true(near(rec.performance_metrics.tokens_per_second, 176 * 128 / 3.5))
    assert.are.equal('info', find_diag(rec, 'batch_size_ramp').severity)
  end)

  it('uses MSER with batches of 1 for short series and says so', function()
    local rec = record.from_log(fake_log({ 10.6, 0.37 }))
    local p = rec.performance_metrics
    assert.are.equal('mser-1', p.steady_state.method)
    assert.are.equal(2, p.steady_state.first_record)
    assert.are.equal(0.37, p.avg_step_time_seconds)
    assert.are.equal('info', find_diag(rec, 'steady_state').severity)
    rec = record.from_log(fake_log({ 41 }))
    assert.are.equal('single', rec.performance_metrics.steady_state.method)
    assert.are.equal(41, rec.performance_metrics.avg_step_time_seconds)
    assert.are.equal(null, rec.performance_metrics.std_step_time_seconds)
  end)

  it('writes non-finite values as null and reports them', function()
    local log = fake_log(TIMES)
    log.records[4].loss = 0 / 0
    log.records[5].grad_norm = math.huge
    log.records[6].losses = { ['lm loss'] = 0 / 0, ['z loss'] = 1.5 }
    local rec = record.from_log(log)
    assert.are.equal(null, rec.records[4].loss)
    assert.are.equal(null, rec.records[5].grad_norm)
    assert.are.equal(null, rec.records[6].losses['lm loss'])
    assert.are.equal(1.5, rec.records[6].losses['z loss'])
    assert.are.equal(11, #rec.loss_values)
    local d = find_diag(rec, 'nonfinite_value')
    assert.are.equal(14, d.line)
    assert.is_truthy(d.message:find('iteration 4: loss=nan written as null', 1, true))
  end)

  it('keeps allocated, reserved and device-used memory apart', function()
    local log = fake_log({ 1, 1 })
    log.records[1].mem_device_used_gib = 33.81
    log.records[1].mem_device_total_gib = 287.98
    log.records[2].mem_max_reserved_gib = 169.1
    log.memory = { { rank = 0, after_iterations = 1, allocated_gib = 11.6, max_allocated_gib = 13.9,
      reserved_gib = 17.2, max_reserved_gib = 17.2, line = 5 } }
    local m = record.from_log(log).memory_metrics
    assert.are.equal(13.9, m.peak_memory_allocated_gib)
    assert.are.equal(169.1, m.peak_memory_reserved_gib)
    assert.are.equal(33.81, m.peak_device_memory_used_gib)
    assert.are.equal(287.98, m.device_memory_total_gib)
    assert.is_true(near(m.peak_memory_allocated_gb, 13.9 * 1.073741824))
    assert.are.equal(1, #m.reports)
    local none = record.from_log(fake_log({ 1 })).memory_metrics
    assert.are.equal(null, none.peak_memory_allocated_gib)
    assert.are.equal(null, none.peak_memory_allocated_gb)
  end)

  it('merges the parser diagnostics and marks failed runs', function()
    local log = fake_log({ 1, 1 }, { diagnostics = {
      { kind = 'oom', severity = 'error', message = 'CUDA out of memory', line = 40 } } })
    local rec = record.from_log(log)
    assert.are.equal('failed', rec.status)
    assert.are.same({ kind = 'oom', severity = 'error', message = 'CUDA out of memory',
      line = 40 }, rec.diagnostics[1])
    log.diagnostics = {}
    log.meta.completed = true
    assert.are.equal('completed', record.from_log(log).status)
  end)

  it('says what was recognised when there is no iteration record', function()
    local log = fake_log({}, {
      diagnostics = { { kind = 'nccl_timeout', severity = 'error', message = 'Watchdog caught',
        line = 7 } },
    })
    log.format = nil
    local rec = record.from_log(log)
    assert.are.equal(0, #rec.records)
    assert.are.equal(0, #rec.step_times)
    local d = find_diag(rec, 'no_records')
    assert.are.equal('error', d.severity)
    assert.is_truthy(d.message:find('no iteration record found (format: not recognised); ' ..
      'the log shows: nccl_timeout (line 7)', 1, true))
    assert.are.equal('failed', rec.status)
    assert.is_nil(rec.performance_metrics.avg_step_time_seconds)
  end)

  it('passes source and identity options through', function()
    local rec = record.from_log(fake_log({ 1 }), { path = 'a.log', sha256 = string.rep('0', 64),
      size_bytes = 10, command = 'torchrun x', exit_status = 1, platform = 'amd', model = 'm' })
    assert.are.same({ 'a.log', string.rep('0', 64), 10, 'torchrun x', 1 }, { rec.source.path,
      rec.source.sha256, rec.source.size_bytes, rec.source.command, rec.source.exit_status })
    assert.are.equal('amd', rec.platform)
    assert.are.equal('m', rec.model)
    assert.are.equal(null, rec.dataset)
  end)

  it('raises on misuse', function()
    assert.has_error(function()
      record.from_log('x')
    end, 'tp.record.from_log: log must be a parsed log (tp.log.parse), got string')
    assert.has_error(function()
      record.from_log(fake_log({ 1 }), { gbs = 0 })
    end, "tp.record.from_log: option 'gbs' must be a positive integer, got 0")
    assert.has_error(function()
      record.from_log(fake_log({ 1 }), { bogus = 1 })
    end, "tp.record.from_log: unknown option 'bogus'")
    assert.has_error(function()
      record.from_log(fake_log({ 1 }), { gpus = '8' })
    end, "tp.record.from_log: option 'gpus' must be a number, got string")
    assert.has_error(function()
      record.from_log(fake_log({ 1 }), { precision = 'bfloat16' })
    end, "tp.record.from_log: option 'precision' must be one of fp32, tf32, bf16, fp16, fp8, "
      .. "fp4, got 'bfloat16'")
  end)

  it('fills the precision from opts.precision where the log shows none', function()
    local no_precision = { args = { seq_length = '128' } }
    local rec = record.from_log(fake_log({ 1, 1 }, no_precision), { precision = 'fp16' })
    assert.are.equal('fp16', rec.training_config.precision)
    assert.are.equal('config', rec.training_config.sources.precision)
    -- Without it the precision stays unknown.
    rec = record.from_log(fake_log({ 1, 1 }, no_precision))
    assert.are.equal(null, rec.training_config.precision)
    assert.is_nil(rec.training_config.sources.precision)
    -- A log that shows one (--bf16 in the argument dump) keeps it, and the disagreement is said.
    rec = record.from_log(fake_log({ 1, 1 }), { precision = 'fp16' })
    assert.are.equal('bf16', rec.training_config.precision)
    assert.are.equal('args', rec.training_config.sources.precision)
    local found
    for _, d in ipairs(rec.diagnostics) do
      if d.kind == 'config_override' then
        found = d
      end
    end
    assert.are.equal('warning', found.severity)
    assert.are.equal("the run was configured for fp16 but the log shows bf16: the log's "
      .. 'precision is used', found.message)
  end)
end)

describe('tp.record.save', function()
  local has_json = pcall(require, 'tp.json')

  it('writes pretty JSON that reads back', function()
    if not has_json then
      pending('tp.json is not built yet')
      return
    end
    local json = require('tp.json')
    local dir = h.tmpdir()
    local rec = record.from_log(fake_log(TIMES), { path = 'x.log' })
    assert.is_true(record.save(rec, dir .. '/run.json'))
    local back = assert(json.decode(h.read(dir .. '/run.json'), { null = json.null }))
    assert.are.equal('tplua.run/2', back.schema)
    assert.are.equal(12, #back.records)
    assert.are.equal(4096, back.performance_metrics.tokens_per_second)
    assert.are.equal(json.null, back.records[1].grad_norm)
  end)

  it('fills pending members just before they are written, and stops when one fails',
    function()
      if not has_json then
        pending('tp.json is not built yet')
        return
      end
      local json = require('tp.json')
      local dir = h.tmpdir()
      local log_path = dir .. '/run.log'
      h.write(log_path, string.rep(' iteration        1/     100 | consumed samples: 256 | '
        .. 'elapsed time per iteration (ms): 5630.1 | learning rate: 4.0E-07 | global batch '
        .. 'size:   128 | lm loss: 2.0E+00 | loss scale: 1.0 | grad norm: 6.9 |\n', 3))
      local plain = record.from_log({ format = 'megatron', records = {}, diagnostics = {} },
        { path = 'x.log' })
      -- A record of tables, and one whose records stay in the scanner (written streamed).
      local log = assert(require('tp.log').parse(log_path))
      local lazy = record.from_log(log, { path = log_path, lazy_records = true })
      for _, rec in ipairs({ plain, lazy }) do
        local seen = {}
        local ok = record.save(rec, dir .. '/r.json', { pending = {
          source = function(r)
            seen[#seen + 1] = 'source'
            r.source.sha256 = string.rep('a', 64)
            return true
          end,
        } })
        assert.is_true(ok)
        assert.are.same({ 'source' }, seen)
        local back = assert(json.decode(h.read(dir .. '/r.json')))
        assert.are.equal(string.rep('a', 64), back.source.sha256)
        -- A failing member: its error, and the old file stays, no temporary file is left.
        local err, code
        ok, err, code = record.save(rec, dir .. '/r.json', { pending = {
          source = function()
            return nil, 'x.log: the digest failed', 'EIO'
          end,
        } })
        assert.is_nil(ok)
        assert.are.equal('x.log: the digest failed', err)
        assert.are.equal('EIO', code)
        assert.are.equal(string.rep('a', 64),
          assert(json.decode(h.read(dir .. '/r.json'))).source.sha256)
        local p = io.popen('ls -A ' .. h.shquote(dir))
        assert.are.equal('r.json\nrun.log\n', p:read('a'))
        p:close()
      end
      assert.has_error(function()
        record.save(plain, dir .. '/r.json', { pending = { source = 'x' } })
      end)
      -- A pending member the record lacks is filled in (once) whether the records are streamed
      -- or not.
      for _, rec in ipairs({ plain, lazy }) do
        local calls = 0
        assert.is_true(record.save(rec, dir .. '/r.json', { pending = {
          zz_note = function(r)
            calls = calls + 1
            r.zz_note = 'late'
            return true
          end,
        } }))
        rec.zz_note = nil
        assert.are.equal(1, calls)
        assert.are.equal('late', assert(json.decode(h.read(dir .. '/r.json'))).zz_note)
      end
    end)

  it('leaves nothing behind when the directory is not writable', function()
    if not has_json then
      pending('tp.json is not built yet')
      return
    end
    local dir = h.tmpdir()
    local ok, err, code = record.save(record.from_log(fake_log({ 1 })), dir .. '/no/such/r.json')
    assert.is_nil(ok)
    assert.are.equal('ENOENT', code)
    assert.is_truthy(err:find(dir .. '/no/such/r.json', 1, true))
  end)
end)
