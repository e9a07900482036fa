-- tplua extract, driven as a user runs it: every fixture log under tests/fixtures/logs is
-- extracted with --json, the record is read back, and the values of the folder's EXPECTED.md that
-- survive into a record are checked within EXPECTED.md's tolerances (1e-9 relative for values
-- copied from the log, 1e-6 for means, 0.5 % for torchtitan step times derived from tps).
-- Then the exit statuses, usage errors, and that a failed write leaves no file behind.
-- TPLUA_LOG_FIXTURES may point at another copy of the fixture logs (default tests/fixtures/logs).
local h = require('helper')

local FIXTURES = os.getenv('TPLUA_LOG_FIXTURES') or h.fixture('logs')

local NONE = setmetatable({}, { __tostring = function()
  return 'absent'
end })

local LOG = 1e-9 -- values copied from the log
local MEAN = 1e-6 -- means
local DERIVED = 5e-3 -- torchtitan step times derived from the rounded tps

local json_ok, json = pcall(require, 'tp.json')

local function is_null(v)
  return v == nil or (json_ok and v == json.null)
end

local function check_value(what, got, want, tol)
  if want == NONE then
    assert(is_null(got), string.format('%s: expected absent (null), got %s', what, tostring(got)))
    return
  end
  if type(want) == 'number' then
    assert(type(got) == 'number', string.format('%s: expected %.17g, got %s', what, want,
      tostring(got)))
    local scale = math.abs(want) > 0 and math.abs(want) or 1
    assert(math.abs(got - want) <= (tol or LOG) * scale,
      string.format('%s: expected %.17g, got %.17g', what, want, got))
    return
  end
  assert(got == want, string.format('%s: expected %s, got %s', what, tostring(want),
    tostring(got)))
end

-- The expectations, transcribed from tests/fixtures/logs/<framework>/EXPECTED.md. `rows` lists
-- per-record values by record field name (step_time_s, loss, lr, grad_norm,
-- skipped_iterations, ...); NONE means the record must not carry the field.
local CASES = {
  {
    file = 'megatron/awsome_gpt3_abbrev_startup_skipped.log',
    records = 3, first_it = 1, last_it = 3, first_loss = NONE, last_loss = NONE,
    mean_step = 247.5744, last_lr = 0.0,
    rows = {
      { iteration = 1, step_time_s = 255.9405, loss = NONE, lr = 0.0, grad_norm = NONE,
        skipped_iterations = 1, loss_scale = 4294967296.0 },
      { iteration = 2, step_time_s = 243.4383, loss = NONE, lr = 0.0, grad_norm = NONE,
        skipped_iterations = 1, loss_scale = 2147483648.0 },
      { iteration = 3, step_time_s = 243.3444, loss = NONE, lr = 0.0, grad_norm = NONE,
        skipped_iterations = 1, loss_scale = 1073741824.0 },
    },
    args = { accumulate_allreduce_grads_in_fp32 = 'False', adam_beta1 = '0.9',
      adam_beta2 = '0.95' },
    shard = { tp = 4, pp = 0, count = 941594624 },
    config = { global_batch_size = 288 },
  },
  {
    file = 'megatron/issue756_mixtral_memory_report.log',
    records = 2, first_it = 2, last_it = 3, first_loss = 2.02153, last_loss = 2.003316,
    mean_step = 5.52035, last_lr = 6e-07,
    rows = {
      { iteration = 2, step_time_s = 5.6301, loss = 2.02153, lr = 4e-07, grad_norm = 6.895,
        skipped_iterations = 0, tflops_per_gpu = 231.9,
        losses = { ['load_balancing_loss'] = 1.087362, ['lm loss'] = 2.02153 } },
      { iteration = 3, step_time_s = 5.4106, loss = 2.003316, lr = 6e-07, grad_norm = 6.603,
        skipped_iterations = 0, tflops_per_gpu = 241.4,
        losses = { ['load_balancing_loss'] = 1.085377, ['lm loss'] = 2.003316 } },
    },
    timestamps = { '2024-04-06 02:55:45', '2024-04-06 02:55:50' },
    -- MiB as printed, / 1024 -> GiB.
    memory = { { rank = 1, after_iterations = 1, allocated_gib = 54250.97802734375 / 1024,
      max_allocated_gib = 54250.98583984375 / 1024, reserved_gib = 61480.0 / 1024,
      max_reserved_gib = 61480.0 / 1024 } },
    peak_allocated = 54250.98583984375 / 1024,
    peak_reserved = 61480.0 / 1024,
  },
  {
    file = 'megatron/issue673_nine_digit_train_iters.log',
    records = 2, first_it = 1, last_it = 2, first_loss = 6.612992, last_loss = 6.158036,
    mean_step = 5.4777, last_lr = 1e-05,
    rows = {
      { iteration = 1, step_time_s = 10.5851, loss = 6.612992, lr = 1e-05, grad_norm = 111.173,
        skipped_iterations = 0, train_iters = 250000000, tflops_per_gpu = 0.0 },
      { iteration = 2, step_time_s = 0.3703, loss = 6.158036, lr = 1e-05, grad_norm = 110.614,
        skipped_iterations = 0, train_iters = 250000000, tflops_per_gpu = 0.6 },
    },
  },
  {
    file = 'megatron/megatronllm33_nan_loss_missing.log',
    records = 3, first_it = 3383, last_it = 3385, first_loss = 0.7334521, last_loss = NONE,
    mean_step = 7.6943, last_lr = 6.676e-06,
    rows = {
      { iteration = 3383, step_time_s = 7.6131, loss = 0.7334521, lr = 6.68e-06,
        grad_norm = 0.752, skipped_iterations = 0 },
      { iteration = 3384, step_time_s = 7.8455, loss = 0.7072597, lr = 6.678e-06,
        grad_norm = 0.741, skipped_iterations = 0 },
      { iteration = 3385, step_time_s = 7.6243, loss = NONE, lr = 6.676e-06, grad_norm = NONE,
        skipped_iterations = NONE, global_batch_size = 64, loss_scale = 1.0 },
    },
    failures = { 'nan_loss', 'truncated' },
  },
  {
    file = 'megatron/nccl743_bert_old_timers_skipped.log',
    records = 1, first_it = 10, last_it = 10, first_loss = NONE, last_loss = NONE,
    mean_step = 0.3562, last_lr = 0.0,
    rows = {
      { iteration = 10, step_time_s = 0.3562, loss = NONE, lr = 0.0, grad_norm = NONE,
        skipped_iterations = 10, loss_scale = 8388608.0 },
    },
  },
  {
    file = 'nemo/resiliency_llama3_54m_crash_restart.log',
    records = 26, first_it = 0, last_it = 19, first_loss = 11.03, last_loss = 11.03,
    mean_step = 7.808808, last_lr = 2.999e-06,
    -- global_step, step time, loss, lr per EXPECTED.md (epoch 0, iteration = global_step).
    table_rows = {
      { 0, 10.51, 11.03, 1.499e-07 }, { 1, 7.667, 11.03, 2.999e-07 },
      { 2, 7.582, 11.03, 4.498e-07 }, { 3, 7.585, 11.03, 5.997e-07 },
      { 4, 7.588, 11.03, 7.496e-07 }, { 5, 7.587, 11.03, 8.996e-07 },
      { 6, 7.588, 11.03, 1.049e-06 }, { 7, 7.584, 11.03, 1.199e-06 },
      { 8, 7.589, 11.03, 1.349e-06 }, { 9, 7.588, 11.03, 1.499e-06 },
      { 10, 7.589, 11.03, 1.649e-06 }, { 11, 7.59, 11.03, 1.799e-06 },
      { 12, 7.59, 11.03, 1.949e-06 }, { 13, 7.63, 11.03, 2.099e-06 },
      { 14, 7.587, 11.03, 2.249e-06 }, { 15, 7.589, 11.03, 2.399e-06 },
      { 10, 10.26, 11.03, 1.649e-06 }, { 11, 7.581, 11.03, 1.799e-06 },
      { 12, 7.593, 11.03, 1.949e-06 }, { 13, 7.592, 11.03, 2.099e-06 },
      { 14, 7.591, 11.03, 2.249e-06 }, { 15, 7.593, 11.03, 2.399e-06 },
      { 16, 7.603, 11.03, 2.549e-06 }, { 17, 7.59, 11.03, 2.699e-06 },
      { 18, 7.591, 11.03, 2.849e-06 }, { 19, 7.592, 11.03, 2.999e-06 },
    },
    epoch = 0,
    failures = { 'crash', 'restart' },
    shard = { tp = 0, pp = 0, count = 54663936 },
  },
  {
    file = 'nemo/awsome_k8s_nemo2_pid_prefix.log',
    records = 3, first_it = 45, last_it = 48, first_loss = 11.02, last_loss = 11.02,
    mean_step = 47.026667, last_lr = 7.346e-06,
    rows = {
      { iteration = 45, epoch = 2, epoch_iteration = 7, step_time_s = 47.12, loss = 11.02,
        lr = 6.897e-06, consumed_samples = 23552 },
      { iteration = 46, epoch = 2, epoch_iteration = 8, step_time_s = 47.15, loss = 11.02,
        lr = 7.046e-06, consumed_samples = 24064 },
      { iteration = 48, epoch = 2, epoch_iteration = 10, step_time_s = 46.81, loss = 11.02,
        lr = 7.346e-06, consumed_samples = 25088 },
    },
  },
  {
    file = 'nemo/deeplink_llama3_8b_timestamp_prefix.log',
    records = 3, first_it = 97, last_it = 99, first_loss = 6.265, last_loss = 6.218,
    mean_step = 12.213333, last_lr = 1.499e-05,
    rows = {
      { iteration = 97, epoch = 0, epoch_iteration = 97, step_time_s = 12.22, loss = 6.265,
        lr = 1.469e-05, tokens_per_s_per_gpu = 1.073e+04, consumed_samples = 12544 },
      { iteration = 98, epoch = 0, epoch_iteration = 98, step_time_s = 12.21, loss = 6.181,
        lr = 1.484e-05, tokens_per_s_per_gpu = 1.074e+04, consumed_samples = 12672 },
      { iteration = 99, epoch = 0, epoch_iteration = 99, step_time_s = 12.21, loss = 6.218,
        lr = 1.499e-05, tokens_per_s_per_gpu = 1.073e+04, consumed_samples = 12800 },
    },
  },
  {
    file = 'nemo/issue14850_srun_prefix_blank_lines.log',
    records = 4, first_it = 8, last_it = 11, first_loss = 10.22, last_loss = 9.924,
    mean_step = 27.1125, last_lr = 7.186e-06,
    rows = {
      { iteration = 8, step_time_s = 27.01, loss = 10.22, lr = 5.389e-06, tflops_per_gpu = 48.58,
        mem_max_reserved_gib = 57466159104 / 2 ^ 30, mem_max_allocated_gib = 53930270720 / 2 ^ 30 },
      { iteration = 9, step_time_s = 27.88, loss = 10.1, lr = 5.988e-06, tflops_per_gpu = 85.8,
        mem_max_reserved_gib = 57466159104 / 2 ^ 30, mem_max_allocated_gib = 53930270720 / 2 ^ 30 },
      { iteration = 10, step_time_s = 26.63, loss = 10.06, lr = 6.587e-06, tflops_per_gpu = 85.8,
        mem_max_reserved_gib = 57466159104 / 2 ^ 30, mem_max_allocated_gib = 53930270720 / 2 ^ 30 },
      { iteration = 11, step_time_s = 26.93, loss = 9.924, lr = 7.186e-06, tflops_per_gpu = 85.8,
        mem_max_reserved_gib = 57675874304 / 2 ^ 30, mem_max_allocated_gib = 53930270720 / 2 ^ 30 },
    },
    peak_allocated = 53930270720 / 2 ^ 30,
    peak_reserved = 57675874304 / 2 ^ 30,
  },
  {
    file = 'nemo/awsome_nemo1_eks_progressbar_overwrite.log',
    records = 1, first_it = 2000, last_it = 2000, first_loss = 2.6, last_loss = 2.6,
    mean_step = 1.9, last_lr = NONE,
    rows = {
      { iteration = 2000, step_time_s = 1.9, loss = 2.6, lr = NONE, consumed_samples = 1280000 },
    },
  },
  {
    file = 'primus/dsv4_smoke_ep8_pp1_full.log',
    records = 10, first_it = 1, last_it = 10, first_loss = 11.91332, last_loss = 11.62793,
    mean_step = 5.04042, last_lr = 0.0,
    -- iteration, step time, loss, lr, TFLOP/s/GPU, tokens/s/GPU (NONE: not printed), grad norm
    table_rows = {
      { 1, 30.4974, 11.91332, 9.755283e-06, 0.3, NONE, 7.105 },
      { 2, 15.6247, 11.88956, 9.045085e-06, 0.6, NONE, 7.249 },
      { 3, 0.7295, 11.82674, 7.938927e-06, 12.6, 350.9, 7.271 },
      { 4, 0.4858, 11.81328, 6.545085e-06, 18.9, 527, 7.145 },
      { 5, 0.5053, 11.75917, 5e-06, 18.2, 506.6, 7.549 },
      { 6, 0.5152, 11.66608, 3.454915e-06, 17.8, 496.9, 7.657 },
      { 7, 0.5288, 11.65579, 2.061074e-06, 17.4, 484.1, 7.445 },
      { 8, 0.5076, 11.70033, 9.54915e-07, 18.1, 504.3, 8.084 },
      { 9, 0.4974, 11.66434, 2.447174e-07, 18.5, 514.7, 7.719 },
      { 10, 0.5125, 11.62793, 0.0, 17.9, 499.5, 8.433 },
    },
    all_rows = { mem_device_used_gib = 33.81, mem_device_total_gib = 287.98,
      mem_usage_fraction = 0.1174 },
    memory = {
      { rank = 0, after_iterations = 1, allocated_gib = 11928.82 / 1024,
        max_allocated_gib = 14246.97 / 1024, reserved_gib = 17598.00 / 1024,
        max_reserved_gib = 17598.00 / 1024 },
      { rank = 0, after_iterations = 2, allocated_gib = 11928.82 / 1024,
        max_allocated_gib = 14534.99 / 1024, reserved_gib = 17598.00 / 1024,
        max_reserved_gib = 17598.00 / 1024 },
    },
    shard = { tp = 0, pp = 0, count = 2236518197 },
    config = { global_batch_size = 16, sequence_length = 128, num_gpus = 8, micro_batch_size = 1,
      tensor_parallel_size = 1, pipeline_parallel_size = 1, expert_parallel_size = 8,
      data_parallel_size = 8, max_steps = 10, learning_rate = 1e-05, precision = 'bf16' },
    args = { num_layers = '8', hidden_size = '4096', seq_length = '128' },
    completed = true,
    -- Steady state 0.5 s: with gbs 16 x seq 128 the tokens/s must be 2048 / mean window time.
    tokens = true,
  },
  {
    file = 'primus/dsv4_p34_iter_lines.txt',
    records = 10, first_it = 1, last_it = 10, first_loss = 11.89968, last_loss = 9.258817,
    mean_step = 5.94794, last_lr = 0.0,
    table_rows = {
      { 1, 35.8091, 11.89968, 9.755283e-06, 7.5, NONE, 3.574 },
      { 2, 18.2519, 11.75117, 9.045085e-06, 14.7, NONE, 3.566 },
      { 3, 0.6874, 11.16451, 7.938927e-06, 389.8, 5958.7, 4.168 },
      { 4, 0.5363, 10.94455, 6.545085e-06, 499.7, 7637.5, 4.487 },
      { 5, 0.5288, 10.38233, 5e-06, 506.8, 7745.8, 5.600 },
      { 6, 0.5476, 10.0786, 3.454915e-06, 489.4, 7479.9, 7.335 },
      { 7, 1.5293, 9.81568, 2.061074e-06, 175.2, 2678.3, 7.214 },
      { 8, 0.5333, 9.447577, 9.54915e-07, 502.5, 7680.5, 7.712 },
      { 9, 0.5273, 9.288863, 2.447174e-07, 508.2, 7767.9, 7.920 },
      { 10, 0.5284, 9.258817, 0.0, 507.2, 7751.7, 8.018 },
    },
    device_used = { 134.59, 170.91, 170.91, 170.91, 170.91, 170.91, 170.91, 170.91, 170.91,
      170.91 },
  },
  {
    file = 'primus/issue349_torchtitan_backend_hip_oom.log',
    records = 1, first_it = 1, last_it = 1, first_loss = 12.2674, last_loss = 12.2674,
    mean_step = NONE, last_lr = NONE,
    rows = {
      { iteration = 1, loss = 12.2674, grad_norm = 3.9375, mem_max_reserved_gib = 240.17,
        mem_usage_fraction = 0.9531, tokens_per_s_per_gpu = 531, tflops_per_gpu = 30.75,
        mfu_pct = 9.86, lr = NONE, step_time_s = NONE },
    },
    failures = { 'oom' },
  },
  {
    file = 'torchtitan/qwen3_14b_b200_nocolor_logfreq1.log',
    records = 10, first_it = 1, last_it = 10, first_loss = 12.55223, last_loss = 6.92163,
    mean_step = 3.919526, mean_tol = DERIVED, last_lr = NONE,
    -- step, loss, tps, derived step time, memory GiB, grad_norm, mfu %
    tt_rows = {
      { 1, 12.55223, 968, 21.157, 160.86, 21.375, 3.63 },
      { 2, 10.60813, 9891, 2.0706, 169.1, 49.25, 37.04 },
      { 3, 15.82324, 9893, 2.0702, 169.1, 26.25, 37.05 },
      { 4, 12.13735, 10139, 2.0199, 169.1, 51.75, 37.97 },
      { 5, 11.69579, 10280, 1.9922, 169.1, 33, 38.50 },
      { 6, 10.92376, 10231, 2.0018, 169.1, 59, 38.31 },
      { 7, 8.50657, 10318, 1.9849, 169.1, 43.5, 38.64 },
      { 8, 7.25867, 10332, 1.9822, 169.1, 32.25, 38.69 },
      { 9, 5.66325, 10368, 1.9753, 169.1, 25.75, 38.83 },
      { 10, 6.92163, 10550, 1.9412, 169.1, 60.5, 39.51 },
    },
    config = { global_batch_size = 1280, sequence_length = 128, local_batch_size = 160 },
    completed = true,
    tokens = true,
  },
  {
    file = 'torchtitan/qwen3_14b_b200_oom_after_step1.log',
    records = 1, first_it = 1, last_it = 1, first_loss = 12.4352, last_loss = 12.4352,
    mean_step = 40.96, mean_tol = DERIVED, last_lr = NONE,
    tt_rows = { { 1, 12.4352, 475, 40.96, 173.94, 25.75, NONE } },
    all_rows = { mem_usage_fraction = 0.9753 },
    failures = { 'oom' },
  },
  {
    file = 'torchtitan/pr1884_llama3_8b_multirank.log',
    records = 1, first_it = 1, last_it = 1, first_loss = 12.2465, last_loss = 12.2465,
    mean_step = NONE, last_lr = NONE,
    rows = {
      { iteration = 1, loss = 12.2465, grad_norm = 4.5253, mem_max_reserved_gib = 33.21,
        mem_usage_fraction = 0.3495, tokens_per_s_per_gpu = 87, tflops_per_gpu = 5.02,
        mfu_pct = 0.51, lr = NONE, rank = 0 },
    },
  },
}

-- Expands the compact per-framework tables into rows of record fields.
local function rows_of(case)
  if case.rows then
    return case.rows, {}
  end
  local rows, tol = {}, {}
  for i, t in ipairs(case.table_rows or {}) do
    if case.file:find('^nemo/') then
      rows[i] = { iteration = t[1], step_time_s = t[2], loss = t[3], lr = t[4],
        epoch = case.epoch, epoch_iteration = t[1] }
    else -- primus
      rows[i] = { iteration = t[1], step_time_s = t[2], loss = t[3], lr = t[4],
        tflops_per_gpu = t[5], tokens_per_s_per_gpu = t[6], grad_norm = t[7] }
    end
  end
  for i, t in ipairs(case.tt_rows or {}) do
    rows[i] = { iteration = t[1], loss = t[2], tokens_per_s_per_gpu = t[3], step_time_s = t[4],
      mem_max_reserved_gib = t[5], grad_norm = t[6], mfu_pct = t[7], lr = NONE,
      step_time_derived = true }
    tol.step_time_s = DERIVED
  end
  return rows, tol
end

local function extract_json(path, extra)
  local dir = h.tmpdir()
  local out = dir .. '/run.json'
  local args = { 'extract', path, '--json', out }
  for _, a in ipairs(extra or {}) do
    args[#args + 1] = a
  end
  local r = h.run(args)
  local text = h.read(out)
  local rec = text and json.decode(text, { null = json.null })
  return r, rec, out
end

describe('tplua extract', function()
  describe('fixture logs (EXPECTED.md)', function()
    for _, case in ipairs(CASES) do
      it(case.file, function()
        local path = FIXTURES .. '/' .. case.file
        if not h.read(path) then
          pending('fixture not present: ' .. path)
          return
        end
        if not json_ok then
          pending('tp.json is not built yet')
          return
        end
        local r, rec = extract_json(path)
        assert.are.equal(0, r.code, r.stderr)
        assert.is_table(rec, 'no JSON written: ' .. r.stderr)
        assert.are.equal('tplua.run/2', rec.schema)
        local name = case.file

        -- Counts, first / last iteration, first / last loss, lr at the last record.
        assert.are.equal(case.records, #rec.records, name .. ': record count')
        local first, last = rec.records[1], rec.records[#rec.records]
        check_value(name .. ': first iteration', first.iteration, case.first_it)
        check_value(name .. ': last iteration', last.iteration, case.last_it)
        check_value(name .. ': first loss', first.loss, case.first_loss)
        check_value(name .. ': last loss', last.loss, case.last_loss)
        check_value(name .. ': lr at last record', last.lr, case.last_lr)
        assert.are.equal(case.first_it, rec.iterations[1])
        assert.are.equal(case.last_it, rec.iterations[#rec.iterations])

        -- Mean step time over all records (the warm-up included).
        local all = rec.performance_metrics.all_records
        if case.mean_step == NONE then
          assert.is_true(is_null(all), name .. ': no step time expected')
          assert.are.equal(0, #rec.step_times)
        else
          check_value(name .. ': mean step time', all.avg_step_time_seconds, case.mean_step,
            case.mean_tol or MEAN)
          assert.are.equal(case.records, all.count)
        end

        -- Per-record values.
        local rows, tol = rows_of(case)
        for i, row in ipairs(rows) do
          for field, want in pairs(row) do
            local got = rec.records[i][field]
            local what = string.format('%s: record %d %s', name, i, field)
            if type(want) == 'table' and want ~= NONE then
              for k, v in pairs(want) do
                check_value(what .. '[' .. k .. ']', got and got[k], v)
              end
            else
              check_value(what, got, want, tol[field])
            end
          end
          for field, want in pairs(case.all_rows or {}) do
            check_value(string.format('%s: record %d %s', name, i, field), rec.records[i][field],
              want)
          end
          if case.device_used then
            check_value(string.format('%s: record %d device used', name, i),
              rec.records[i].mem_device_used_gib, case.device_used[i])
          end
        end
        if case.timestamps then
          for i, ts in ipairs(case.timestamps) do
            assert.is_truthy(tostring(rec.records[i].timestamp):find(ts, 1, true),
              name .. ': timestamp ' .. i)
          end
        end

        -- Every record carries every contract field, null where the log has no value.
        for i, r2 in ipairs(rec.records) do
          for _, f in ipairs(require('tp.record').RECORD_FIELDS) do
            assert(r2[f] ~= nil, string.format('%s: record %d lacks %s', name, i, f))
          end
        end

        -- Flat arrays: present values in order, consistent with the records.
        local n_loss, n_lr = 0, 0
        for _, r2 in ipairs(rec.records) do
          n_loss = n_loss + (type(r2.loss) == 'number' and 1 or 0)
          n_lr = n_lr + (type(r2.lr) == 'number' and 1 or 0)
        end
        assert.are.equal(n_loss, #rec.loss_values)
        assert.are.equal(n_lr, #rec.learning_rates)

        -- Memory reports (MiB in the log, GiB in the record) and peaks.
        for i, m in ipairs(case.memory or {}) do
          local got = rec.memory_metrics.reports[i]
          assert.is_table(got, name .. ': memory report ' .. i)
          for k, v in pairs(m) do
            check_value(string.format('%s: memory report %d %s', name, i, k), got[k], v)
          end
        end
        if case.peak_allocated then
          check_value(name .. ': peak allocated', rec.memory_metrics.peak_memory_allocated_gib,
            case.peak_allocated)
          check_value(name .. ': peak reserved', rec.memory_metrics.peak_memory_reserved_gib,
            case.peak_reserved)
        end

        -- Argument dump, parameter shard, training configuration.
        for k, v in pairs(case.args or {}) do
          assert.are.equal(v, rec.args[k], name .. ': argument ' .. k)
        end
        if case.shard then
          local found = false
          for _, s in ipairs(rec.params.shards) do
            found = found or (s.tp == case.shard.tp and s.pp == case.shard.pp
              and s.count == case.shard.count)
          end
          assert.is_true(found, name .. ': parameter shard')
        end
        for k, v in pairs(case.config or {}) do
          check_value(name .. ': training_config.' .. k, rec.training_config[k], v)
        end

        -- Failures: each expected kind among the diagnostics, with a line; none otherwise.
        local kinds = {}
        for _, d in ipairs(rec.diagnostics) do
          kinds[d.kind] = d
        end
        for _, k in ipairs(case.failures or {}) do
          assert.is_table(kinds[k], name .. ': diagnostic ' .. k)
          assert.is_number(kinds[k].line, name .. ': diagnostic ' .. k .. ' line')
        end
        if not case.failures then
          for _, d in ipairs(rec.diagnostics) do
            assert.are_not.equal('error', d.severity, name .. ': unexpected error ' .. d.kind
              .. ': ' .. d.message)
          end
        end
        if case.completed then
          assert.are.equal('completed', rec.status)
        end
        if case.failures and case.failures[1] ~= 'nan_loss' then
          assert.are.equal('failed', rec.status)
        end

        -- Tokens/s = gbs x seq_len / mean step time over the steady window, never guessed.
        local p = rec.performance_metrics
        if case.tokens then
          local c = rec.training_config
          check_value(name .. ': tokens/s', p.tokens_per_second,
            c.global_batch_size * c.sequence_length / p.avg_step_time_seconds)
        elseif case.mean_step ~= NONE and is_null(rec.training_config.sequence_length) then
          assert.is_nil(p.tokens_per_second, name .. ': tokens/s without a sequence length')
        end

        -- The source block: path, SHA-256 and size of the file that was read.
        assert.are.equal(path, rec.source.path)
        assert.are.equal(#h.read(path), rec.source.size_bytes)
        local p2 = io.popen('sha256sum ' .. h.shquote(path))
        local sum = p2:read('l'):match('^(%x+)')
        p2:close()
        assert.are.equal(sum, rec.source.sha256)
      end)
    end
  end)

  describe('summary and flags', function()
    local smoke = FIXTURES .. '/primus/dsv4_smoke_ep8_pp1_full.log'

    it('prints the human summary', function()
      if not h.read(smoke) then
        pending('fixture not present: ' .. smoke)
        return
      end
      local r = h.run({ 'extract', smoke })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_truthy(r.stdout:find(smoke .. ': primus, 10 records, iterations 1..10', 1, true))
      assert.is_truthy(r.stdout:find('steady state: records ', 1, true))
      assert.is_truthy(r.stdout:find('step time (s): mean ', 1, true))
      assert.is_truthy(r.stdout:find('tokens/s: ', 1, true))
      assert.is_truthy(r.stdout:find('tokens/s/GPU: ', 1, true))
      assert.is_truthy(r.stdout:find('loss: 11.9133 -> 11.6279 (10 values)', 1, true))
      assert.are.equal('', r.stderr)
      local q = h.run({ 'extract', '--quiet', smoke })
      assert.are.equal(0, q.code)
      assert.are.equal('', q.stdout)
    end)

    it('applies --gbs, --seq-len and --gpus, and reports overrides', function()
      if not (h.read(smoke) and json_ok) then
        pending('fixture or tp.json not present')
        return
      end
      local r, rec = extract_json(smoke, { '--gbs', '32', '--seq-len', '256', '--gpus', '4' })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(32, rec.training_config.global_batch_size)
      assert.are.equal(256, rec.training_config.sequence_length)
      assert.are.equal(4, rec.training_config.num_gpus)
      local p = rec.performance_metrics
      check_value('tokens/s', p.tokens_per_second, 32 * 256 / p.avg_step_time_seconds)
      check_value('tokens/s/GPU', p.tokens_per_second_per_gpu, p.tokens_per_second / 4)
      local overrides = 0
      for _, d in ipairs(rec.diagnostics) do
        overrides = overrides + (d.kind == 'config_override' and 1 or 0)
      end
      assert.are.equal(3, overrides)
    end)

    it('omits tokens/s with a diagnostic when the log lacks gbs or sequence length', function()
      local log = FIXTURES .. '/megatron/issue673_nine_digit_train_iters.log'
      if not (h.read(log) and json_ok) then
        pending('fixture or tp.json not present')
        return
      end
      local r, rec = extract_json(log)
      assert.are.equal(0, r.code)
      assert.is_nil(rec.performance_metrics.tokens_per_second)
      local found
      for _, d in ipairs(rec.diagnostics) do
        found = found or (d.kind == 'missing_config' and d.message)
      end
      assert.is_truthy(found and found:find('tokens/s not computed', 1, true))
      local r2 = h.run({ 'extract', log })
      assert.is_truthy(r2.stdout:find('missing_config', 1, true))
    end)

    it('writes one file per log with --json-dir', function()
      local a = FIXTURES .. '/megatron/issue673_nine_digit_train_iters.log'
      local b = FIXTURES .. '/primus/dsv4_p34_iter_lines.txt'
      if not (h.read(a) and h.read(b) and json_ok) then
        pending('fixtures or tp.json not present')
        return
      end
      local dir = h.tmpdir() .. '/new/records' -- created as needed
      local r = h.run({ 'extract', '--quiet', '--json-dir', dir, a, b })
      assert.are.equal(0, r.code, r.stderr)
      local ra = json.decode(h.read(dir .. '/issue673_nine_digit_train_iters.json'))
      local rb = json.decode(h.read(dir .. '/dsv4_p34_iter_lines.json'))
      assert.are.equal(2, #ra.records)
      assert.are.equal(10, #rb.records)
    end)
  end)

  describe('exit status', function()
    it('is 1 when no iteration record is found, naming what was recognised', function()
      local dir = h.tmpdir()
      local log = dir .. '/hang.log'
      h.write(log, table.concat({
        'some start-up line',
        '[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation '
          .. 'timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, '
          .. 'Timeout(ms)=600000) ran for 600123 milliseconds before timing out.',
        '',
      }, '\n'))
      local r = h.run({ 'extract', log, '--json', dir .. '/out.json' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(log .. ': no iteration record found', 1, true))
      assert.is_truthy(r.stdout:find('no_records', 1, true))
      assert.is_truthy(r.stdout:find('nccl_timeout', 1, true))
      if json_ok then
        local rec = json.decode(h.read(dir .. '/out.json'))
        assert.are.equal(0, #rec.records)
        assert.are.equal('failed', rec.status)
      end
    end)

    it('is 1 for empty, binary and missing files, without a crash', function()
      local dir = h.tmpdir()
      h.write(dir .. '/empty.log', '')
      local bytes = {}
      for i = 0, 4095 do
        bytes[#bytes + 1] = string.char((i * 131 + 7) % 256)
      end
      h.write(dir .. '/binary.log', table.concat(bytes))
      for _, name in ipairs({ 'empty.log', 'binary.log' }) do
        local r = h.run({ 'extract', dir .. '/' .. name })
        assert.are.equal(1, r.code, name .. ': ' .. r.stderr)
        assert.is_truthy(r.stderr:find('no iteration record found', 1, true))
      end
      local r = h.run({ 'extract', dir .. '/missing.log' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(dir .. '/missing.log: No such file or directory', 1, true))
    end)

    it('is 0 for a failed run that has records', function()
      local log = FIXTURES .. '/torchtitan/qwen3_14b_b200_oom_after_step1.log'
      if not h.read(log) then
        pending('fixture not present: ' .. log)
        return
      end
      local r = h.run({ 'extract', log })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_truthy(r.stdout:find('status failed', 1, true))
      assert.is_truthy(r.stdout:find('error oom', 1, true))
    end)
  end)

  describe('usage errors (exit 2)', function()
    local function usage(args, msg)
      local r = h.run(args)
      assert.are.equal(2, r.code, table.concat(args, ' '))
      assert.is_truthy(r.stderr:find(msg, 1, true), r.stderr)
      assert.is_truthy(r.stderr:find('usage: tplua extract', 1, true))
    end

    it('rejects unknown flags, missing and non-numeric values', function()
      usage({ 'extract', '--bogus', 'x.log' }, "unknown option '--bogus'")
      usage({ 'extract', 'x.log', '--gbs' }, "option '--gbs' needs a value")
      usage({ 'extract', 'x.log', '--gbs', 'lots' }, "option '--gbs': integer expected, got 'lots'")
      usage({ 'extract', 'x.log', '--seq-len', '2.5' }, "option '--seq-len': integer expected")
      usage({ 'extract', 'x.log', '--gpus', '0' }, "option '--gpus' must be at least 1, got 0")
      usage({ 'extract' }, 'no LOG given')
      usage({ 'extract', 'a.log', 'b.log', '--json', 'o.json' }, "'--json' takes one LOG")
      usage({ 'extract', 'a.log', '--json', 'o.json', '--json-dir', 'd' }, 'exclude each other')
      usage({ 'extract', 'a/x.log', 'b/x.log', '--json-dir', 'd' }, 'would both write d/x.json')
    end)

    it('prints its usage with --help and exits 0', function()
      local r = h.run({ 'extract', '--help' })
      assert.are.equal(0, r.code)
      assert.is_truthy(r.stdout:find('usage: tplua extract LOG...', 1, true))
      assert.are.equal('', r.stderr)
    end)
  end)

  describe('identity flags', function()
    local smoke = FIXTURES .. '/primus/dsv4_smoke_ep8_pp1_full.log'
    local titan = FIXTURES .. '/torchtitan/qwen3_14b_b200_nocolor_logfreq1.log'
    local bare = FIXTURES .. '/megatron/issue673_nine_digit_train_iters.log'

    -- Megatron FLOPs per token of Llama 3.1 8B (32 layers, hidden 4096): 46,638,563,328 at
    -- sequence length 2048 (tp.models' documented value), less the attention term
    -- 6 x layers x hidden x sequence length for the 1920 positions below 2048.
    local FPT_8B_128 = 46638563328 - 6 * 32 * 4096 * (2048 - 128)
    local FPT_8B_2048 = 46638563328
    -- Dense BF16 peaks of the catalog (AMD CDNA 4 whitepaper, derived as tp.hardware says;
    -- NVIDIA H100 whitepaper Table 3).
    local MI355X_BF16, H100_BF16 = 2516.6, 989.4

    local function diag_of(rec, kind, text)
      for _, d in ipairs(rec.diagnostics) do
        if d.kind == kind and (text == nil or d.message:find(text, 1, true)) then
          return d
        end
      end
      return nil
    end

    local function need(...)
      for _, p in ipairs({ ... }) do
        if not h.read(p) then
          pending('fixture not present: ' .. p)
          return false
        end
      end
      if not json_ok then
        pending('tp.json not present')
        return false
      end
      return true
    end

    it('writes every flag into the record, and MFU from --model and --gpu', function()
      if not need(smoke) then
        return
      end
      local r, rec = extract_json(smoke, { '--platform', 'amd', '--framework', 'primus',
        '--model', 'llama3.1-8b', '--gpu', 'mi355x', '--methodology', 'identical_config',
        '--repeat', '3', '--run-id', 'amd-primus-smoke-r3', '--experiment', 'smoke test',
        '--dataset', 'bc' })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal('amd', rec.platform)
      assert.are.equal('primus', rec.framework)
      assert.are.equal('primus', rec.format)
      assert.are.equal('llama3.1-8b', rec.model)
      assert.are.equal('identical_config', rec.methodology)
      assert.are.equal(3, rec['repeat'])
      assert.are.equal('amd-primus-smoke-r3', rec.run_id)
      assert.are.equal('smoke test', rec.experiment)
      assert.are.equal('bc', rec.dataset)
      assert.are.same({ device_name = 'AMD Instinct MI355X', device_count = 8,
        hardware = 'mi355x' }, rec.gpu_info)
      local p = rec.performance_metrics
      local tps = 16 * 128 / p.avg_step_time_seconds
      check_value('tokens/s', p.tokens_per_second, tps)
      check_value('MFU', p.mfu, tps * FPT_8B_128 / (8 * MI355X_BF16 * 1e12))
      check_value('model TFLOP/s/GPU', p.tflops_per_gpu, tps * FPT_8B_128 / 8 / 1e12)
      assert.are.equal('mi355x', p.mfu_basis.hardware)
      assert.are.equal('bf16', p.mfu_basis.precision) -- the log's own (--bf16)
      assert.is_false(p.mfu_basis.precision_assumed)
      assert.are.equal(MI355X_BF16, p.mfu_basis.peak_tflops)
      assert.are.equal(FPT_8B_128, p.mfu_basis.flops_per_token)
      assert.are.equal('megatron', p.mfu_basis.convention)
      assert.is_nil(diag_of(rec, 'missing_config'))
      assert.is_nil(diag_of(rec, 'config_override')) -- the log's "Detected GPU model: MI355X"
    end)

    it('warns when --gpu is not the GPU the log names', function()
      if not need(smoke) then
        return
      end
      local r, rec = extract_json(smoke, { '--gpu', 'mi300x', '--model', 'llama3.1-8b' })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal('mi300x', rec.gpu_info.hardware)
      assert.is_table(diag_of(rec, 'config_override', "GPU mi300x from the command line "
        .. "overrides the log's device 'MI355X' (mi355x)"))
    end)

    it('prints the identity, the GPU and MFU in the summary', function()
      if not h.read(smoke) then
        pending('fixture not present: ' .. smoke)
        return
      end
      local r = h.run({ 'extract', smoke, '--model', 'llama3.1-8b', '--gpu', 'mi355x',
        '--run-id', 'x1', '--repeat', '2' })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_truthy(r.stdout:find('  identity: run id x1, platform amd, model llama3.1-8b, '
        .. 'repeat 2\n', 1, true), r.stdout)
      assert.is_truthy(r.stdout:find('  GPU: AMD Instinct MI355X x 8 (mi355x)\n', 1, true))
      assert.is_truthy(r.stdout:find('  MFU: 0.9 % (model TFLOP/s/GPU 22.6 of the mi355x bf16 '
        .. 'peak 2516.6, megatron FLOPs/token 45128613888)\n', 1, true), r.stdout)
    end)

    it('leaves the identity null and computes no MFU without the flags', function()
      if not need(smoke) then
        return
      end
      local r, rec = extract_json(smoke)
      assert.are.equal(0, r.code, r.stderr)
      for _, k in ipairs({ 'platform', 'model', 'methodology', 'repeat', 'run_id', 'experiment',
        'dataset', 'gpu_info' }) do
        assert(is_null(rec[k]), k .. ' should be null')
      end
      assert.are.equal('primus', rec.framework) -- the log's format
      assert.is_nil(rec.performance_metrics.mfu)
      -- The model alone names no peak: no MFU and nothing to report.
      r, rec = extract_json(smoke, { '--model', 'llama3.1-8b' })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_nil(rec.performance_metrics.mfu)
      assert(is_null(rec.gpu_info))
      -- The GPU alone: gpu_info, and a warning that the model is needed for MFU.
      r, rec = extract_json(smoke, { '--gpu', 'mi355x' })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_nil(rec.performance_metrics.mfu)
      assert.are.equal('amd', rec.platform) -- the vendor of --gpu
      assert.are.equal(8, rec.gpu_info.device_count)
      assert.is_table(diag_of(rec, 'missing_config', 'MFU not computed: the model is not known; '
        .. 'give it (tplua extract --model)'))
    end)

    it('computes MFU once --gbs, --seq-len and --gpus make it computable', function()
      if not need(bare) then
        return
      end
      local r, rec = extract_json(bare, { '--model', 'llama3.1-8b', '--gpu', 'h100-sxm' })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_nil(rec.performance_metrics.mfu)
      assert(is_null(rec.gpu_info.device_count), 'the log shows no GPU count')
      assert.is_table(diag_of(rec, 'missing_config', 'MFU not computed: the GPU count and the '
        .. 'sequence length are not known; give them (tplua extract --gpus --seq-len)'))
      r, rec = extract_json(bare, { '--model', 'llama3.1-8b', '--gpu', 'h100-sxm', '--gbs', '16',
        '--seq-len', '2048', '--gpus', '8' })
      assert.are.equal(0, r.code, r.stderr)
      local p = rec.performance_metrics
      local tps = 16 * 2048 / p.avg_step_time_seconds
      check_value('MFU', p.mfu, tps * FPT_8B_2048 / (8 * H100_BF16 * 1e12))
      assert.are.equal(8, rec.gpu_info.device_count)
      assert.are.equal('NVIDIA H100 SXM5 80GB', rec.gpu_info.device_name)
      assert.are.equal('nvd', rec.platform)
      -- The log shows no precision: bf16 is assumed, and said so.
      assert.is_true(p.mfu_basis.precision_assumed)
      assert.is_table(diag_of(rec, 'precision_assumed'))
      assert.is_nil(diag_of(rec, 'missing_config', 'MFU'))
    end)

    it('uses the precision the log shows, or says bf16 is assumed', function()
      if not need(titan) then
        return
      end
      -- torchtitan on B200: the log prints no precision.
      local r, rec = extract_json(titan, { '--model', 'qwen2.5-14b', '--gpu', 'b200' })
      assert.are.equal(0, r.code, r.stderr)
      local p = rec.performance_metrics
      assert.is_number(p.mfu)
      assert.are.equal('bf16', p.mfu_basis.precision)
      assert.is_true(p.mfu_basis.precision_assumed)
      assert.are.equal('assumed', p.mfu_basis.precision_source)
      assert.is_table(diag_of(rec, 'precision_assumed', 'b200 bf16 peak'))
      -- --precision says what the run was configured for: fp8's peak, no assumption.
      local mfu_bf16 = p.mfu
      r, rec = extract_json(titan, { '--model', 'qwen2.5-14b', '--gpu', 'b200',
        '--precision', 'fp8' })
      assert.are.equal(0, r.code, r.stderr)
      p = rec.performance_metrics
      assert.are.equal('fp8', rec.training_config.precision)
      assert.are.equal('config', rec.training_config.sources.precision)
      assert.are.equal('fp8', p.mfu_basis.precision)
      assert.are.equal('config', p.mfu_basis.precision_source)
      assert.is_false(p.mfu_basis.precision_assumed)
      assert.is_nil(diag_of(rec, 'precision_assumed'))
      -- B200: fp8 dense peak twice the bf16 one, so half the MFU.
      check_value('MFU vs fp8', p.mfu, mfu_bf16 / 2)
      check_value('MFU vs bf16', p.mfu_basis.mfu_vs_bf16, mfu_bf16)
    end)

    it('keeps the precision the log shows over --precision, with a warning', function()
      if not need(smoke) then
        return
      end
      local r, rec = extract_json(smoke, { '--model', 'llama3.1-8b', '--gpu', 'mi355x',
        '--precision', 'fp8' })
      assert.are.equal(0, r.code, r.stderr)
      local p = rec.performance_metrics
      assert.are.equal('bf16', rec.training_config.precision)
      assert.are.equal('log', p.mfu_basis.precision_source) -- Primus prints its precision
      assert.are.equal(MI355X_BF16, p.mfu_basis.peak_tflops)
      assert.is_table(diag_of(rec, 'config_override', 'the run was configured for fp8 but the '
        .. "log shows bf16: the log's precision is used"))
      r = h.run({ 'extract', smoke, '--precision', 'bf17' })
      assert.are.equal(2, r.code)
      assert.is_truthy(r.stderr:find("option '--precision': unknown precision 'bf17'; close: "
        .. 'bf16', 1, true), r.stderr)
    end)

    it('accepts a framework whose runs print the log format, refuses one whose do not', function()
      if not need(smoke, bare) then
        return
      end
      -- Primus running Megatron-LM without its logger prefix logs in Megatron's format.
      local r, rec = extract_json(bare, { '--framework', 'primus' })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal('primus', rec.framework)
      assert.are.equal('megatron', rec.format)
      local dir = h.tmpdir()
      r = h.run({ 'extract', smoke, '--framework', 'nemo', '--json', dir .. '/x.json' })
      assert.are.equal(2, r.code)
      assert.are.equal("tplua extract: option '--framework': nemo does not fit " .. smoke
        .. ', whose format is primus (record not written)\n', r.stderr)
      assert.is_nil(h.read(dir .. '/x.json'))
      -- With several LOGs, the others are still extracted; the status is 2.
      r = h.run({ 'extract', '--quiet', smoke, bare, '--framework', 'megatron', '--json-dir',
        dir })
      assert.are.equal(2, r.code)
      assert.is_nil(h.read(dir .. '/dsv4_smoke_ep8_pp1_full.json'))
      assert.are.equal('megatron', json.decode(h.read(dir
        .. '/issue673_nine_digit_train_iters.json')).framework)
    end)

    it('gives each LOG its run id from {n} and {stem}', function()
      if not need(smoke, bare) then
        return
      end
      local dir = h.tmpdir()
      local r = h.run({ 'extract', '--quiet', '--json-dir', dir, '--run-id', 'run{n}-{stem}',
        smoke, bare })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal('run1-dsv4_smoke_ep8_pp1_full',
        json.decode(h.read(dir .. '/dsv4_smoke_ep8_pp1_full.json')).run_id)
      assert.are.equal('run2-issue673_nine_digit_train_iters',
        json.decode(h.read(dir .. '/issue673_nine_digit_train_iters.json')).run_id)
    end)

    it('refuses bad values with exit 2, naming the flag', function()
      local function usage(args, msg)
        local r = h.run(args)
        assert.are.equal(2, r.code, table.concat(args, ' '))
        local first = r.stderr:match('^[^\n]*')
        assert.are.equal('tplua extract: ' .. msg, first)
        assert.is_truthy(r.stderr:find('usage: tplua extract', 1, true))
      end
      usage({ 'extract', 'x.log', '--platform', 'AMD' },
        "option '--platform': unknown platform 'AMD'; close: amd, nvd")
      usage({ 'extract', 'x.log', '--platform', 'rocm' },
        "option '--platform': unknown platform 'rocm'; known: amd, nvd, cpu")
      usage({ 'extract', 'x.log', '--model', 'llama3-8b' },
        "option '--model': unknown model 'llama3-8b'; close: llama3.1-8b, llama3.2-1b, "
          .. 'llama3.2-3b')
      usage({ 'extract', 'x.log', '--model', 'qwen-7b' },
        "option '--model': unknown model 'qwen-7b'; close: qwen2.5-7b, qwen2.5-72b")
      usage({ 'extract', 'x.log', '--gpu', 'h100' },
        "option '--gpu': unknown GPU 'h100'; close: h100-sxm, h100-pcie, h200, b200")
      usage({ 'extract', 'x.log', '--gpu', 'mi300x', '--platform', 'nvd' },
        "option '--gpu': mi300x is an AMD GPU, but '--platform' is nvd")
      usage({ 'extract', 'x.log', '--gpu', 'h100-sxm', '--platform', 'cpu' },
        "option '--gpu': h100-sxm is an NVIDIA GPU, but '--platform' is cpu")
      usage({ 'extract', 'x.log', '--methodology', 'identical' },
        "option '--methodology': unknown methodology 'identical'; close: identical_config")
      usage({ 'extract', 'x.log', '--framework', 'megatron-lm' },
        "option '--framework': unknown framework 'megatron-lm'; close: megatron")
      usage({ 'extract', 'x.log', '--framework', 'megatron', '--format', 'nemo' },
        "option '--framework': megatron does not fit '--format nemo'")
      usage({ 'extract', 'x.log', '--repeat', '0' }, "option '--repeat' must be at least 1, got 0")
      usage({ 'extract', 'x.log', '--repeat', '1.5' },
        "option '--repeat': integer expected, got '1.5'")
      usage({ 'extract', 'x.log', '--seq-len', '-5' },
        "option '--seq-len' must be at least 1, got -5")
      usage({ 'extract', 'x.log', '--dataset', '' }, "option '--dataset' is empty")
      usage({ 'extract', 'x.log', '--experiment', 'a\tb' },
        "option '--experiment' contains a control character")
      usage({ 'extract', 'x.log', '--run-id', 'a/b' }, "option '--run-id': 'a/b' has a "
        .. "character other than letters, digits, '.', '_', '-' (and {n}, {stem})")
      usage({ 'extract', 'x.log', '--run-id', 'r{i}' },
        "option '--run-id': 'r{i}' has a placeholder other than {n} and {stem}")
      -- Terminal escapes are shown as \ddd, long values cut.
      local r = h.run({ 'extract', 'x.log', '--model', 'a\27[31mb' })
      assert.are.equal(2, r.code)
      assert.is_truthy(r.stderr:find("unknown model 'a\\027[31mb'; known: llama3.1-8b,", 1,
        true), r.stderr)
      r = h.run({ 'extract', 'x.log', '--gpu', string.rep('x', 5000) })
      assert.are.equal(2, r.code)
      assert.is_truthy(r.stderr:find("unknown GPU '" .. string.rep('x', 64) .. "...'; known: ",
        1, true), r.stderr)
    end)

    it('refuses one --run-id for several LOGs, and ids that collide', function()
      local function usage(args, msg)
        local r = h.run(args)
        assert.are.equal(2, r.code, table.concat(args, ' '))
        assert.are.equal('tplua extract: ' .. msg, r.stderr:match('^[^\n]*'))
      end
      usage({ 'extract', 'a.log', 'b.log', '--json-dir', 'd', '--run-id', 'r1' },
        "option '--run-id' names one run but 2 LOGs are given; put {n} or {stem} in it")
      usage({ 'extract', 'a/x.log', 'b/x.log', '--run-id', 'r-{stem}' },
        "option '--run-id': 'r-{stem}' gives 'r-x' for both a/x.log and b/x.log")
      usage({ 'extract', 'my run.log', '--run-id', '{stem}' },
        "option '--run-id': '{stem}' gives 'my run' for my run.log, not a valid run id")
    end)
  end)

  describe('writing', function()
    local log = FIXTURES .. '/megatron/issue673_nine_digit_train_iters.log'

    local function listing(dir)
      local p = io.popen('ls -A ' .. h.shquote(dir))
      local names = {}
      for name in p:lines() do
        names[#names + 1] = name
      end
      p:close()
      table.sort(names)
      return table.concat(names, ' ')
    end

    it('leaves no partial file when the output cannot be written', function()
      if not (h.read(log) and json_ok) then
        pending('fixture or tp.json not present')
        return
      end
      local dir = h.tmpdir()
      h.write(dir .. '/plain', 'x')
      -- The parent is a regular file (ENOTDIR), then the target is a directory (EISDIR): both
      -- fail even for root, which ignores permission bits.
      local r = h.run({ 'extract', '--quiet', log, '--json', dir .. '/plain/out.json' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(dir .. '/plain/out.json', 1, true), r.stderr)
      os.execute('mkdir ' .. h.shquote(dir .. '/taken'))
      r = h.run({ 'extract', '--quiet', log, '--json', dir .. '/taken' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(dir .. '/taken', 1, true), r.stderr)
      assert.are.equal('plain taken', listing(dir))
      assert.are.equal('', listing(dir .. '/taken'))
      r = h.run({ 'extract', '--quiet', log, '--json-dir', dir .. '/plain/sub' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(dir .. '/plain/sub', 1, true), r.stderr)
      assert.are.equal('plain taken', listing(dir))
    end)

    -- A Megatron log of `n` iteration lines exercising the record writer: timestamps, several
    -- losses (one repeated), labels the parser keeps as extra (one with escapes), non-finite
    -- values, integral values of float fields (loss scales, zero and negative-zero grad norms),
    -- a batch-size ramp-up and a memory line.
    local function long_log(n)
      local lines = {}
      for i = 1, n do
        local gbs = i > n // 10 and 64 or 32
        local lm = i % 997 == 0 and 'nan' or string.format('%.6E', 3 + (i % 89) / 97)
        local st = i == n // 2 and 'inf' or string.format('%.1f', 1000 + (i * 37) % 50)
        local extra = ''
        if i % 3 == 0 then
          extra = string.format(' weird label: %s |', i % 2 == 1 and 'x"\\y' or ('v' .. i))
        end
        lines[i] = string.format('[2025-02-20 11:%02d:%02d] iteration %8d/%8d | consumed '
          .. 'samples: %12d | elapsed time per iteration (ms): %s | throughput per GPU '
          .. '(TFLOP/s/GPU): %.1f | learning rate: %.6E | global batch size: %5d | lm loss: %s | '
          .. 'z loss: %.3E | lm loss: 2.0 | loss scale: %s | grad norm: %s | number of skipped '
          .. 'iterations:   0 | number of nan iterations:   0 |%s', (i // 60) % 60, i % 60, i, n,
          i * gbs, st, 400 + (i % 7) / 10, 1e-4 * (i % 13) / 13, gbs, lm, (i % 11) / 11,
          ({ '1.0', '65536.0', '4294967296.0', '999999999999999.0', '1e15' })[i % 5 + 1],
          i == 77 and 'nan' or i % 31 == 0 and '0.0' or i % 37 == 0 and '-0.0' or '1.5', extra)
      end
      lines[#lines + 1] = '[Rank 0] (after 10 iterations) memory (MB) | allocated: 1024.5 | '
        .. 'max allocated: 2048.25 | reserved: 4096.0 | max reserved: 4096.0'
      return table.concat(lines, '\n') .. '\n'
    end

    it('writes the same bytes as tp.record.from_log and tp.json.encode', function()
      if not json_ok then
        pending('tp.json not present')
        return
      end
      local dir = h.tmpdir()
      local path = dir .. '/long.log'
      h.write(path, long_log(4000))
      local r = h.run({ 'extract', '--quiet', path, '--json', dir .. '/out.json', '--gbs', '64',
        '--seq-len', '4096', '--gpus', '8', '--model', 'llama3.1-8b', '--gpu', 'mi300x' })
      assert.are.equal(0, r.code, r.stderr)
      local plog = assert(require('tp.log').parse(path))
      local sha, size = require('tp._digest').sha256_file(path)
      local rec = require('tp.record').from_log(plog, { path = path, sha256 = sha,
        size_bytes = size, gbs = 64, seq_len = 4096, gpus = 8, model = 'llama3.1-8b',
        hardware = 'mi300x', platform = 'amd' })
      assert.are.equal(4000, #rec.records)
      local want = assert(json.encode(rec, { pretty = true, sort_keys = true })) .. '\n'
      local got = h.read(dir .. '/out.json')
      assert.are.equal(#want, #got)
      assert.is_true(want == got, 'the streamed record differs from the encoded one')
      -- The digest computed in the scan's read is the file's.
      local p = io.popen('sha256sum ' .. h.shquote(path) .. ' 2>/dev/null')
      local line = p:read('a')
      p:close()
      if line:match('^%x+') then
        assert.are.equal(line:match('^%x+'), json.decode(got).source.sha256)
      end
      assert.are.equal(sha, json.decode(got).source.sha256)
    end)

    it('reads a log from a pipe, its digest that of the bytes read', function()
      if not json_ok then
        pending('tp.json not present')
        return
      end
      local dir = h.tmpdir()
      local path, fifo = dir .. '/long.log', dir .. '/fifo'
      h.write(path, long_log(4000))
      assert.is_true(os.execute('mkfifo ' .. h.shquote(fifo)))
      -- A writer into the named pipe while extract reads it (pread cannot: the bytes are hashed
      -- as the scanner reads them).
      local r = h.run({ '-c', 'cat "$1" > "$2" & exec "$0" extract "$2" --quiet --json "$3"',
        h.bin, path, fifo, dir .. '/piped.json' }, { bin = '/bin/sh' })
      assert.are.equal(0, r.code, r.stderr)
      r = h.run({ 'extract', '--quiet', path, '--json', dir .. '/file.json' })
      assert.are.equal(0, r.code, r.stderr)
      local piped = json.decode(h.read(dir .. '/piped.json'))
      local file = json.decode(h.read(dir .. '/file.json'))
      assert.are.equal(require('tp._digest').sha256(h.read(path)), piped.source.sha256)
      assert.are.equal(file.source.sha256, piped.source.sha256)
      assert.are.equal(file.source.size_bytes, piped.source.size_bytes)
      assert.are.equal(#file.records, #piped.records)
    end)

    it('leaves no file and no temporary file when a write fails', function()
      local dir = h.tmpdir()
      local path = dir .. '/long.log'
      h.write(path, long_log(3000))
      os.execute('mkdir ' .. h.shquote(dir .. '/out'))
      -- A file-size limit makes write(2) fail with EFBIG part-way through the records (SIGXFSZ
      -- ignored, so the failure is returned rather than fatal).
      local r = h.run({ '-c', "trap '' XFSZ; ulimit -f 64; exec \"$0\" \"$@\"", h.bin,
        'extract', '--quiet', path, '--json', dir .. '/out/run.json' }, { bin = '/bin/sh' })
      assert.are.equal(1, r.code, r.stderr)
      assert.is_truthy(r.stderr:find(dir .. '/out/run.json: write: File too large', 1, true),
        r.stderr)
      assert.are.equal('', listing(dir .. '/out'))
      -- An existing output stays as it was.
      h.write(dir .. '/out/run.json', 'old contents')
      r = h.run({ '-c', "trap '' XFSZ; ulimit -f 64; exec \"$0\" \"$@\"", h.bin,
        'extract', '--quiet', path, '--json', dir .. '/out/run.json' }, { bin = '/bin/sh' })
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal('old contents', h.read(dir .. '/out/run.json'))
      assert.are.equal('run.json', listing(dir .. '/out'))
    end)

    it('leaves no temporary file when the output directory is not writable', function()
      local dir = h.tmpdir()
      local path = dir .. '/long.log'
      h.write(path, long_log(50))
      os.execute('mkdir ' .. h.shquote(dir .. '/ro') .. ' && chmod 555 ' .. h.shquote(dir .. '/ro'))
      local probe = io.open(dir .. '/ro/probe', 'w')
      if probe then
        probe:close()
        os.remove(dir .. '/ro/probe')
        pending('running as root: permission bits do not stop writes')
        return
      end
      local r = h.run({ 'extract', '--quiet', path, '--json', dir .. '/ro/run.json' })
      assert.are.equal(1, r.code)
      assert.is_truthy(r.stderr:find(dir .. '/ro/run.json: cannot create temporary file: '
        .. 'Permission denied', 1, true), r.stderr)
      assert.are.equal('', listing(dir .. '/ro'))
    end)

    it('replaces an existing output atomically', function()
      if not (h.read(log) and json_ok) then
        pending('fixture or tp.json not present')
        return
      end
      local dir = h.tmpdir()
      h.write(dir .. '/run.json', 'old contents')
      local r = h.run({ 'extract', '--quiet', log, '--json', dir .. '/run.json' })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal('tplua.run/2', json.decode(h.read(dir .. '/run.json')).schema)
      assert.are.equal('run.json', listing(dir))
    end)
  end)
end)
