-- The steps of tools/gpu-check, run by tplua from the repository root: the probe, the torch of
-- the machine, a 10 Hz GPU sampler over what follows, a profiled training run of the reference
-- trainer stopped by its stop rule, the trace and op tables of its Kineto trace, the peaks
-- microbenchmark, a report. Each step is time-boxed inside one budget and keeps its outcome
-- whatever happens to it; summary.json is rewritten (atomically) after every step.
-- docs/gpu.md, "The GPU check". Started by tools/gpu-check, which parses the user's flags.
local json = require('tp.json')
local fs = require('tp.fs')
local proc = require('tp.proc')
local gpu = require('tp.gpu')
local models = require('tp.catalog.models')
local hardware = require('tp.catalog.hardware')

local HERE = assert(arg[0]:match('^(.*)/[^/]*$'), 'check.lua: run it by its path')
local figures = dofile(HERE .. '/figures.lua')

local null = json.null

-- ------------------------------------------------------------------------------------------
-- Arguments (tools/gpu-check passes them checked; these are the same checks for a direct run).

local function usage_error(msg)
  io.stderr:write('gpu-check: ' .. msg .. '\n')
  os.exit(2)
end

local opt = { mode = 'gpu', mbs = 4 }
do
  local known = { root = true, out = true, tplua = true, mode = true, expect = true,
    budget = true, python = true, mbs = true }
  local i = 1
  while i <= #arg do
    local a = arg[i]
    local name = a:match('^%-%-([%w-]+)$')
    local v = arg[i + 1]
    if not name or not known[name] or v == nil then
      usage_error('bad argument: ' .. a)
    end
    opt[name] = v
    i = i + 2
  end
end
for _, k in ipairs({ 'root', 'out', 'tplua' }) do
  if not opt[k] then
    usage_error('--' .. k .. ' is required')
  end
end
if opt.mode ~= 'gpu' and opt.mode ~= 'cpu' then
  usage_error('--mode: gpu or cpu, got ' .. opt.mode)
end
local CPU = opt.mode == 'cpu'
opt.budget = tonumber(opt.budget or (CPU and 175 or 420))
opt.mbs = math.tointeger(tonumber(opt.mbs))
if not opt.budget or opt.budget < 60 or opt.budget > 3600 then
  usage_error('--budget: seconds in [60, 3600] expected')
end
if not opt.mbs or opt.mbs < 1 or opt.mbs > 64 then
  usage_error('--mbs: a whole number in [1, 64] expected')
end
if opt.expect and not hardware.get(opt.expect) then
  usage_error(string.format("--expect: '%s' is not a hardware catalog id (%s)", opt.expect,
    table.concat(hardware.ids(), ', ')))
end

-- ------------------------------------------------------------------------------------------
-- The workload: a Llama-shaped model whose layers have Llama 3.2 1B's shapes (so the peaks
-- microbenchmark measures its own GEMMs: TPLUA_PEAKS_MODEL=llama3.2-1b), 4 of them, embeddings
-- tied, plain RoPE (the reference trainer has no Llama 3 RoPE scaling): 505,956,352
-- parameters. In cpu mode a small one of the same family, on the CPU in seconds.

local MODEL = CPU and {
  id = 'gpu-check-cpu', family = 'llama', hf_name = 'none',
  num_layers = 2, hidden_size = 128, ffn_hidden_size = 512, num_attention_heads = 4,
  num_kv_heads = 2, head_dim = 32, vocab_size = 512, max_position_embeddings = 64,
  rope_theta = 10000.0, norm_eps = 1e-5, tie_embeddings = true, qkv_bias = false,
} or {
  id = 'gpu-check-506m', family = 'llama', hf_name = 'none',
  num_layers = 4, hidden_size = 2048, ffn_hidden_size = 8192, num_attention_heads = 32,
  num_kv_heads = 8, head_dim = 64, vocab_size = 128256, max_position_embeddings = 2048,
  rope_theta = 500000.0, norm_eps = 1e-5, tie_embeddings = true, qkv_bias = false,
}
local SEQ = CPU and 64 or 2048
local MBS = CPU and 4 or opt.mbs
local PEAKS_MODEL = 'llama3.2-1b'
-- Two profiled steps, with the allocator's events (docs/memory.md).
local PROFILE = 'torch:10-11,memory'
-- The stop rule: 1% at 95% on a GPU (docs/stopping.md); on shared CPU cores, whose step times
-- vary by tens of percent, 20% over batches of 4, as the suite's stopping tests ask.
local STOP = CPU and '{ ci = 0.2, batches = 4, min_iters = 20 }' or '{ ci = 0.01 }'
local TRAIN_SECONDS = 120 -- planned length of the run on the GPU, before the stop rule
local INTERVAL = 0.1      -- the sampler: 10 Hz

-- The steps in order: the most each may take (box) and the least it needs (floor), seconds.
local STEPS = {
  { name = 'probe', box = 60, floor = 10, cpu = { 30, 5 } },
  { name = 'torch', box = 90, floor = 20, cpu = { 60, 10 } },
  { name = 'sampler', box = 0, floor = 0, cpu = { 0, 0 } },
  { name = 'train', box = 240, floor = 90, cpu = { 120, 30 } },
  { name = 'trace', box = 60, floor = 10, cpu = { 30, 5 } },
  { name = 'peaks', box = 150, floor = 45, cpu = { 60, 15 } },
  { name = 'ops', box = 60, floor = 10, cpu = { 30, 5 } },
  { name = 'memory', box = 45, floor = 5, cpu = { 30, 5 } },
  { name = 'report', box = 60, floor = 10, cpu = { 30, 5 } },
}
local FINAL = 5 -- kept for the last summary
for _, s in ipairs(STEPS) do
  if CPU then
    s.box, s.floor = s.cpu[1], s.cpu[2]
  end
  s.cpu = nil
end
do
  local floors = FINAL
  for _, s in ipairs(STEPS) do
    floors = floors + s.floor
  end
  if opt.budget < floors + 30 then
    usage_error(string.format('--budget: at least %d s in %s mode (the least the steps need)',
      floors + 30, opt.mode))
  end
end

local OUT = opt.out
local function path(rel)
  return OUT .. '/' .. rel
end
assert(fs.mkdir_p(path('logs')))

-- ------------------------------------------------------------------------------------------
-- The summary, saved after every step.

local T0 = gpu.now()
local DEADLINE = T0 + opt.budget
local function now()
  return gpu.now()
end
local function utc()
  return os.date('!%Y-%m-%dT%H:%M:%SZ')
end

local summary = {
  schema = 'tplua.gpu_check/1',
  mode = opt.mode,
  ok = false,
  started_at = utc(),
  finished_at = null,
  elapsed_s = null,
  budget_s = opt.budget,
  expect = opt.expect or null,
  root = opt.root,
  tplua = null,
  host = null,
  workload = {
    model = MODEL.id, params = (models.params(MODEL)), layers = MODEL.num_layers,
    hidden = MODEL.hidden_size, vocab = MODEL.vocab_size, seq_len = SEQ, mbs = MBS,
    precision = 'bf16', stop = STOP, profile = PROFILE, peaks_model = PEAKS_MODEL,
    sampler_hz = 1 / INTERVAL, iterations_planned = null,
  },
  steps = json.array({}),
  figures = {},
  notes = json.array({}),
}
for _, s in ipairs(STEPS) do
  summary.steps[#summary.steps + 1] = { name = s.name, status = 'pending', seconds = null,
    limit_s = null, reason = null, problems = json.array({}), notes = json.array({}),
    files = json.array({}), exit_code = null }
  summary.figures[s.name] = null
end

local function save()
  summary.elapsed_s = figures.round(now() - T0, 1)
  local ok, err = json.save_file(path('summary.json'), summary, { pretty = true,
    sort_keys = true })
  if not ok then
    io.stderr:write('gpu-check: ' .. tostring(err) .. '\n')
  end
end

local function say(fmt, ...)
  io.stdout:write(string.format('gpu-check: ' .. fmt .. '\n', ...))
  io.stdout:flush()
end

-- ------------------------------------------------------------------------------------------
-- Commands: tplua's own, each with its output kept under logs/.

local PY_SHIM = opt.root .. '/tools/gpu-check.d/python'

-- The environment of every command: the interpreter the check chose (through the shim that
-- gives it the caller's loader path), runs kept out of the user's run history.
local ENV = {
  TPLUA_PYTHON = PY_SHIM,
  TPLUA_HISTORY = path('history.sqlite'),
  PYTHONUNBUFFERED = '1',
}

--- Runs argv within `limit` seconds; stdout captured (and kept in logs/<log>.out), stderr in
--- logs/<log>.err; `echo` prints each line as it comes. Returns the result, or nil and why.
local function command(argv, limit, logname, opts)
  opts = opts or {}
  local env = {}
  for k, v in pairs(ENV) do
    env[k] = v
  end
  for k, v in pairs(opts.env or {}) do
    env[k] = v
  end
  local o = { timeout = math.max(1, limit - 6), kill_grace = 5, env = env, cwd = opt.root,
    capture = true, log = path('logs/' .. logname .. '.out'),
    log_stderr = path('logs/' .. logname .. '.err') }
  if opts.echo then
    o.on_line = function(_, line)
      io.stdout:write('  | ' .. line .. '\n')
      io.stdout:flush()
    end
  end
  return proc.run(argv, o)
end

-- Why a command's result is not a success, or nil.
local function failure(r, what)
  if r.timed_out then
    return string.format('%s: out of time after %.0f s (killed)', what, r.wall_s)
  end
  if r.code ~= 0 then
    -- The last line on stderr, else the first error a tplua command printed (its preflight).
    local err = (r.stderr or ''):gsub('%s+$', ''):match('([^\n]*)$') or ''
    if err == '' then
      err = ('\n' .. (r.stdout or '')):match('\n%s*error%s+([^\n]*)') or ''
    end
    return string.format('%s: exit status %d%s', what, r.code, err ~= '' and (': ' .. err) or '')
  end
  return nil
end

local function save_text(rel, text)
  local ok, err = fs.write_atomic(path(rel), text)
  if not ok then
    error(err, 0)
  end
  return rel
end

local function decode(text, what)
  local doc, err = json.decode(text or '')
  if type(doc) ~= 'table' then
    error(what .. ': not JSON: ' .. tostring(err), 0)
  end
  return doc
end

-- The run record a `tplua run` wrote in `dir` (the one file with a schema).
local function record_in(dir)
  for _, p in ipairs(fs.glob(dir .. '/*.json') or {}) do
    local rec = json.load_file(p)
    if type(rec) == 'table' and rec.schema then
      return rec, p
    end
  end
  return nil
end

-- ------------------------------------------------------------------------------------------
-- The steps. Each returns figures, problems, notes (and raises on what it cannot handle).

local state = {}

local function step_probe(limit, step)
  local r = assert(command({ opt.tplua, 'probe', '--json' }, limit, 'probe'))
  local why = failure(r, 'tplua probe --json')
  if why then
    error(why, 0)
  end
  step.files[#step.files + 1] = save_text('probe.json', r.stdout)
  local text = command({ opt.tplua, 'probe' }, 30, 'probe-text')
  if text and text.code == 0 then
    step.files[#step.files + 1] = save_text('probe.txt', text.stdout)
  end
  local doc = decode(r.stdout, 'tplua probe --json')
  state.probe = doc
  local env = type(doc.environment) == 'table' and doc.environment.system or {}
  summary.host = env.host or null
  local f, problems, notes = figures.probe(doc, { mode = opt.mode, expect = opt.expect })
  state.hardware = f.catalog ~= null and f.catalog or nil
  state.platform = f.vendor == 'amd' and 'amd' or 'nvd'
  return f, problems, notes
end

-- The interpreters to try, in order: --python, $TPLUA_PYTHON, python3 on PATH, /usr/bin/python3.
local function python_candidates()
  local out, seen = {}, {}
  local function add(p)
    if p and p ~= '' and not seen[p] then
      seen[p] = true
      out[#out + 1] = p
    end
  end
  add(opt.python)
  add(os.getenv('TPLUA_PYTHON'))
  if CPU then
    add('/usr/bin/python3')
  end
  for dir in (os.getenv('PATH') or ''):gmatch('[^:]+') do
    if fs.is_file(dir .. '/python3') then
      add(dir .. '/python3')
      break
    end
  end
  add('/usr/bin/python3')
  return out
end

local function step_torch(limit, step)
  local tried = {}
  local chosen, info
  for _, py in ipairs(python_candidates()) do
    local left = limit - (now() - step.t0)
    if left < 10 then
      break
    end
    local r = command({ PY_SHIM, opt.root .. '/tools/gpu-check.d/torch_info.py', '--device',
      CPU and 'cpu' or 'cuda' }, left, 'torch', { env = { TPLUA_GPU_CHECK_PYTHON = py } })
    local doc = r and r.code == 0 and json.decode(r.stdout or '')
    if type(doc) == 'table' then
      tried[#tried + 1] = { python = py, torch = doc.torch or null,
        cuda_available = doc.cuda_available == true, error = doc.error or null }
      local usable = doc.torch and not doc.error and (CPU or doc.cuda_available == true)
      if usable then
        chosen, info = py, doc
        break
      end
      info = info or doc
    else
      tried[#tried + 1] = { python = py, error = r and failure(r, py) or 'cannot start' }
    end
  end
  step.tried = tried
  if not chosen then
    -- The steps after this one still run, with the first interpreter that has a torch (else
    -- the first one), so that each says for itself what it cannot do.
    local fallback = tried[1] and tried[1].python
    for _, t in ipairs(tried) do
      if t.torch ~= null and fallback == tried[1].python then
        fallback = t.python
      end
    end
    ENV.TPLUA_GPU_CHECK_PYTHON = fallback or '/usr/bin/python3'
    local f = figures.torch(info or { error = 'no interpreter with torch' }, { mode = opt.mode })
    f.tried = json.array(tried)
    return f, { string.format('no interpreter has a torch that can train here (tried %d: see '
      .. 'figures.torch.tried)', #tried) }, {}
  end
  ENV.TPLUA_GPU_CHECK_PYTHON = chosen
  save_text('torch.json', json.encode(info, { pretty = true }) .. '\n')
  step.files[#step.files + 1] = 'torch.json'
  local f, problems, notes = figures.torch(info, { mode = opt.mode })
  f.chosen = chosen
  f.tried = json.array(tried)
  if not CPU and state.probe then
    local d = state.probe.devices and state.probe.devices[1]
    if d and info.device_name and d.name ~= info.device_name then
      notes[#notes + 1] = string.format("torch names the GPU '%s', the probe '%s'",
        tostring(info.device_name), tostring(d.name))
    end
  end
  return f, problems, notes
end

-- The planned iterations: TRAIN_SECONDS at 15% of the GPU's bf16 peak, a low MFU for this
-- unfused trainer, so that a faster GPU ends sooner rather than a slower one later (the stop
-- rule usually ends the run long before); a fixed count on the CPU.
local function planned_iterations()
  if CPU then
    return 50
  end
  local row = state.hardware and hardware.get(state.hardware)
  local peak = row and row.peak_tflops and row.peak_tflops.bf16
  if not peak then
    return 800
  end
  local flops = models.flops_per_token(MODEL, SEQ) * MBS * SEQ
  local step_s = flops / (0.15 * peak * 1e12)
  return math.max(200, math.min(5000, math.floor(TRAIN_SECONDS / step_s)))
end

-- A Lua literal of a string or number of the model row: the shortest text that reads back.
local function lua_value(v)
  if type(v) == 'string' then
    return "'" .. v:gsub('[\\\']', '\\%0') .. "'"
  end
  if math.type(v) == 'float' then
    for digits = 1, 17 do
      local text = string.format('%.' .. digits .. 'g', v)
      if tonumber(text) == v then
        return text:find('[%.eni]') and text or (text .. '.0')
      end
    end
  end
  return tostring(v)
end

-- The recipe of the training run, written into the output folder (kept with the results).
local function train_recipe(iters, timeout)
  local keys = {}
  for k in pairs(MODEL) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  local fields = {}
  for _, k in ipairs(keys) do
    fields[#fields + 1] = string.format('    %s = %s,', k, lua_value(MODEL[k]))
  end
  local hw = state.hardware and (', hardware = ' .. lua_value(state.hardware)) or ''
  return string.format([[
-- Written by tools/gpu-check: the reference trainer on one GPU (%s mode), bf16, profiled,
-- stopped by its stop rule once its step time is known.
local tp = require('tp')
return tp.experiment.main({
  name = 'gpu-check',
  model = {
%s
  },
  platforms = { %s = { framework = 'reference'%s } },
  gpus_per_node = 1,
  training = { seed = 1234, mbs = %d, gbs = %d, seq_len = %d, iters = %d, lr = 3e-4,
               min_lr = 3e-5, warmup = 10, decay = 'cosine', precision = 'bf16',
               dataset = 'mock', log_interval = 1 },
  parallelism = { tp = 1, pp = 1, dp = 1 },
  launcher = 'local',
  stop = %s,
  timeout = %d,
})
]], opt.mode, table.concat(fields, '\n'), state.platform or 'nvd', hw, MBS, MBS, SEQ, iters,
    STOP, timeout)
end

local function step_train(limit, step)
  local iters = planned_iterations()
  summary.workload.iterations_planned = iters
  -- The run's own timeout leaves time to stop the trainer and write the record.
  local run_timeout = math.max(20, math.floor(limit - 30))
  step.files[#step.files + 1] = save_text('train.lua', train_recipe(iters, run_timeout))
  local argv = { opt.tplua, 'run', path('train.lua'), '--results', path('train'), '--profile',
    PROFILE }
  local r = assert(command(argv, limit, 'train', { echo = true,
    env = { TPLUA_REFTRAIN_DEVICE = CPU and 'cpu' or 'cuda' } }))
  step.exit_code = r.code
  local rec, rec_path = record_in(path('train'))
  if not rec then
    error(failure(r, 'tplua run') or 'tplua run wrote no run record', 0)
  end
  step.files[#step.files + 1] = rec_path:sub(#OUT + 2)
  state.train_record = rec
  local f, problems, notes = figures.train(rec, { mode = opt.mode, model = MODEL,
    hardware = state.hardware, device = CPU and 'cpu' or 'cuda', seq_len = SEQ, mbs = MBS,
    iterations_planned = iters })
  local why = failure(r, 'tplua run')
  if why then
    -- What the trainer said last (its reason, when it stopped itself).
    local log = fs.read((rec_path:gsub('%.json$', '.log'))) or ''
    local last = log:gsub('%s+$', ''):match('([^\n]*)$')
    if last and last ~= '' then
      why = why .. '; the log ends: ' .. last
    end
    table.insert(problems, 1, why)
  end
  local traces = rec.profile and rec.profile.traces or {}
  if traces[1] then
    state.trace = path('train/' .. traces[1])
  end
  return f, problems, notes
end

-- `tplua trace TRACE <args> --json` on the run's trace, saved as <name>.json, and the same
-- without --json as <name>.txt (kept when it runs); returns the decoded JSON. The step fails
-- when there is no trace or the JSON command fails.
local function trace_view(limit, step, name, args)
  if not state.trace then
    error('no trace: the training run wrote none', 0)
  end
  local what = table.concat({ 'tplua trace', table.unpack(args) }, ' ') .. ' --json'
  local text_argv = { opt.tplua, 'trace', state.trace, table.unpack(args) }
  local argv = table.move(text_argv, 1, #text_argv, 1, {})
  argv[#argv + 1] = '--json'
  local r = assert(command(argv, limit, name))
  local why = failure(r, what)
  if why then
    error(why, 0)
  end
  step.files[#step.files + 1] = save_text(name .. '.json', r.stdout)
  local text = command(text_argv, math.max(10, limit / 2), name .. '-text')
  if text and text.code == 0 then
    step.files[#step.files + 1] = save_text(name .. '.txt', text.stdout)
  end
  return decode(r.stdout, what)
end

local function step_trace(limit, step)
  return figures.trace(trace_view(limit, step, 'trace', {}), { mode = opt.mode })
end

local function step_peaks(limit, step)
  local argv = { opt.tplua, 'run', 'recipes/peaks.lua', '--results', path('peaks') }
  local r = assert(command(argv, limit, 'peaks', { echo = true, env = {
    TPLUA_PEAKS_MODEL = PEAKS_MODEL, TPLUA_PEAKS_MBS = tostring(MBS),
    TPLUA_PEAKS_SEQ_LEN = tostring(CPU and 2048 or SEQ), TPLUA_PEAKS_PRECISION = 'bf16' } }))
  step.exit_code = r.code
  local rec, rec_path = record_in(path('peaks'))
  if not rec then
    error(failure(r, 'tplua run recipes/peaks.lua') or 'no peaks record', 0)
  end
  step.files[#step.files + 1] = rec_path:sub(#OUT + 2)
  state.peaks = rec.status == 'completed' and path('peaks') or nil
  local f, problems, notes = figures.peaks(rec, { mode = opt.mode,
    hardware_row = state.hardware and hardware.get(state.hardware) or nil })
  local why = failure(r, 'tplua run recipes/peaks.lua')
  if why then
    table.insert(problems, 1, why)
  end
  return f, problems, notes
end

local function step_ops(limit, step)
  local args = { '--ops' }
  if state.peaks then
    args[#args + 1] = '--peaks'
    args[#args + 1] = state.peaks
  end
  return figures.ops(trace_view(limit, step, 'ops', args), { mode = opt.mode })
end

-- The memory the trace measured (`tplua trace --memory --json`), beside the run record's
-- measured memory and the plan's estimate.
local function step_memory(limit, step)
  return figures.memory(trace_view(limit, step, 'memory', { '--memory' }), state.train_record,
    { mode = opt.mode })
end

local function step_report(limit, step)
  if not state.train_record then
    error('no run record to report', 0)
  end
  local argv = { opt.tplua, 'report', path('train'), '--out', path('report') }
  if state.peaks then
    argv[#argv + 1] = '--peaks'
    argv[#argv + 1] = state.peaks
  end
  local r = assert(command(argv, limit, 'report'))
  local why = failure(r, 'tplua report')
  if why then
    error(why, 0)
  end
  local written = {}
  for _, p in ipairs(fs.glob(path('report/*')) or {}) do
    written[#written + 1] = p:sub(#OUT + 2)
    step.files[#step.files + 1] = p:sub(#OUT + 2)
  end
  local problems = {}
  if not fs.is_file(path('report/report.md')) then
    problems[1] = 'no report.md written'
  end
  return { files = json.array(written) }, problems, {}
end

-- ------------------------------------------------------------------------------------------
-- The sampler: started before the training run, read back after the last GPU step.

local sampler
local windows = {}

local function sampler_start(step)
  local s = gpu.sampler({ interval = INTERVAL })
  local ok, err = s:start()
  if not ok then
    error('the sampler did not start: ' .. tostring(err), 0)
  end
  sampler = s
  state.sampler_t0 = now()
  step.t0 = state.sampler_t0
end

local function sampler_finish()
  local step
  for i, s in ipairs(STEPS) do
    if s.name == 'sampler' then
      step = summary.steps[i]
    end
  end
  if not sampler then
    return
  end
  local t1 = now()
  for _, w in pairs(windows) do
    local j, details = sampler:energy_j({ from = w.t0, to = w.t1 })
    w.energy_j = j
    w.energy_method = type(details) == 'table' and details.method or nil
  end
  sampler:stop()
  local samples = sampler:samples() or {}
  local lines = { 't,wall,device,power_w,energy_j,memory_used_bytes,utilization_pct,'
    .. 'sm_clock_mhz,temperature_c' }
  local function cell(v)
    return v == nil and '' or tostring(v)
  end
  for _, x in ipairs(samples) do
    lines[#lines + 1] = table.concat({ string.format('%.3f', x.t - state.sampler_t0),
      cell(x.wall), cell(x.device), cell(x.power_w), cell(x.energy_j), cell(x.memory_used),
      cell(x.utilization), cell(x.sm_clock_mhz), cell(x.temperature_c) }, ',')
  end
  save_text('telemetry.csv', table.concat(lines, '\n') .. '\n')
  step.files[#step.files + 1] = 'telemetry.csv'
  local f, problems = figures.telemetry(samples, { interval = INTERVAL, t0 = state.sampler_t0,
    t1 = t1, windows = windows })
  local notes = sampler.notes and sampler:notes() or nil
  sampler:close()
  sampler = nil
  summary.figures.sampler = f
  step.seconds = figures.round(t1 - state.sampler_t0, 1)
  step.problems = json.array(problems)
  if type(notes) == 'table' then
    for _, n in ipairs(notes) do
      step.notes[#step.notes + 1] = tostring(n)
    end
  end
  step.status = #problems == 0 and 'ok' or 'failed'
  step.reason = problems[1] or null
  say('sampler: %s (%d readings over %.1f s)', step.status, #samples, t1 - state.sampler_t0)
end

-- ------------------------------------------------------------------------------------------
-- The loop.

local RUN = {
  probe = step_probe, torch = step_torch, train = step_train, trace = step_trace,
  peaks = step_peaks, ops = step_ops, memory = step_memory, report = step_report,
}

-- Seconds step i may take: its box, within what the budget leaves once the floors of the
-- steps after it are kept.
local function limit_of(i)
  local after = FINAL
  for j = i + 1, #STEPS do
    after = after + STEPS[j].floor
  end
  return math.min(STEPS[i].box, DEADLINE - now() - after)
end

do
  local v = proc.run({ opt.tplua, '-v' }, { timeout = 30, env = ENV })
  summary.tplua = v and v.code == 0 and v.stdout:gsub('%s+$', '') or null
end
say('%s mode, budget %d s, output %s', opt.mode, opt.budget, OUT)
save()

local all_ok = true
for i, s in ipairs(STEPS) do
  local step = summary.steps[i]
  step.t0 = now()
  if s.name == 'sampler' then
    local ok, err = pcall(sampler_start, step)
    if ok then
      step.status = 'running'
    else
      step.status, step.reason, step.seconds = 'failed', tostring(err), 0
      step.problems = json.array({ tostring(err) })
      summary.figures.sampler = null
      all_ok = false
      say('sampler: failed: %s', tostring(err))
    end
  else
    local limit = limit_of(i)
    step.limit_s = math.floor(limit)
    if limit < s.floor then
      step.status = 'skipped'
      step.reason = string.format('out of time: %.0f s of the %d s budget left', DEADLINE - now(),
        opt.budget)
    else
      step.status = 'running'
      save()
      say('%s: running (at most %.0f s)', s.name, limit)
      local ok, f, problems, notes = pcall(RUN[s.name], limit, step)
      if ok then
        summary.figures[s.name] = f
        step.problems = json.array(problems or {})
        for _, n in ipairs(notes or {}) do
          step.notes[#step.notes + 1] = n
        end
        step.status = #step.problems == 0 and 'ok' or 'failed'
        step.reason = step.problems[1] or null
      else
        step.status = 'failed'
        step.reason = tostring(f)
        step.problems = json.array({ tostring(f) })
      end
    end
    step.seconds = figures.round(now() - step.t0, 1)
    if s.name == 'train' or s.name == 'peaks' then
      windows[s.name] = { t0 = step.t0, t1 = now() }
    end
    say('%s: %s (%.1f s)%s', s.name, step.status, step.seconds,
      step.reason ~= null and (': ' .. tostring(step.reason)) or '')
  end
  if s.name == 'ops' then
    sampler_finish()
  end
  step.t0 = nil
  step.tried = nil
  save()
end

for _, step in ipairs(summary.steps) do
  all_ok = all_ok and step.status == 'ok'
end
summary.ok = all_ok
summary.finished_at = utc()
save()

-- What to read first, on the terminal.
local F = summary.figures
local function g(t, k)
  local v = type(t) == 'table' and t[k] or nil
  return (v == nil or v == null) and '-' or tostring(v)
end
say('%s in %.1f s: %s', all_ok and 'passed' or 'FAILED', now() - T0, path('summary.json'))
say('  device %s (catalog %s), torch %s', g(F.probe, 'name'), g(F.probe, 'catalog'),
  g(F.torch, 'torch'))
say('  train: %s, stopped by %s at iteration %s, %s s/step, %s tokens/s, MFU %s, %s J/token',
  g(F.train, 'status'), g(F.train, 'stopped_by'), g(F.train, 'iterations_done'),
  g(F.train, 'step_time_s'), g(F.train, 'tokens_per_s'), g(F.train, 'mfu'),
  g(F.train, 'joules_per_token'))
say('  peaks: bf16 %s TFLOP/s, %s TB/s; sampler %s readings at %s Hz',
  g(type(F.peaks) == 'table' and F.peaks.tflops or nil, 'bf16'), g(F.peaks, 'bandwidth_tbs'),
  g(F.sampler, 'readings'), g(F.sampler, 'rate_hz'))
os.exit(all_ok and 0 or 1)
