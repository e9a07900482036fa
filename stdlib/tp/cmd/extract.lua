-- tplua extract: parse training logs into unified run records (tp.record), print a summary of
-- each and optionally write the records as JSON.
local cli = require('tp.cli')

local M = {}

M.summary = 'parse training logs into run records (step time, tokens/s, loss, diagnostics)'

M.usage = [[
usage: tplua extract LOG... [--format F] [--gbs N] [--seq-len N] [--gpus N]
                            [--platform P] [--framework F] [--model ID] [--gpu ID]
                            [--precision P]
                            [--methodology NAME] [--dataset NAME] [--repeat N]
                            [--run-id ID] [--experiment NAME]
                            [--json OUT | --json-dir DIR] [--quiet]

Parses each LOG (Megatron-LM, Primus, NeMo, torchtitan; detected unless --format is given),
builds its run record (schema tplua.run/2) and prints a summary: format, records, the
steady-state window (MSER-5), step-time statistics over it, tokens/s = global batch x sequence
length / mean step time, tokens/s/GPU, MFU (with --model and --gpu), loss first -> last, and
the diagnostics.
A LOG of nccl-tests or rccl-tests output (all_reduce_perf and the other *_perf programs,
told apart by their header) becomes a record of kind collective_bench instead: each table's
busbw and algbw per message size, each figure checked against the collective's bus factor
(docs/collectives.md); --collective names the collective when the log does not.

options:
  --format F      parse with this parser instead of detecting the format
  --gbs N         global batch size (overrides the log)
  --seq-len N     sequence length (overrides the log)
  --gpus N        number of GPUs (overrides the log)
  --json OUT      write the run record to OUT (one LOG only), atomically
  --json-dir DIR  write DIR/<log name without extension>.json for each LOG (DIR is created)
  --quiet         print nothing but errors
  --collective C  nccl-tests/rccl-tests output: the collective (all_reduce, all_gather,
                  reduce_scatter, all_to_all, broadcast, reduce, send_recv) when the log, its
                  command line and its file name do not say
  -h, --help      show this help

the run's identity (written at the top level of each record; the log does not say it):
  --platform P       amd, nvd or cpu (default: the vendor of --gpu, if given)
  --framework F      megatron, nemo, primus or torchtitan (default: the log's format); must
                     fit the log: a Primus run can log in Megatron-LM's or torchtitan's format
  --model ID         model catalog id (tp.models: llama3.1-8b, qwen2.5-7b, ...)
  --gpu ID           GPU catalog id (tp.hardware: h100-sxm, mi300x, ...): gpu_info, and MFU
                     against its dense peak at the log's precision (else --precision's,
                     else bf16, said so) when --model is given too
  --precision P      the precision the run was configured for (fp32, tf32, bf16, fp16, fp8,
                     fp4): used where the log does not show one; a log that shows another
                     wins, with a config_override warning
  --methodology M    identical_config or maximum_performance
  --dataset NAME     dataset name
  --repeat N         repeat number (1, 2, ...)
  --run-id ID        run id (letters, digits, '.', '_', '-'); with several LOGs it must
                     contain {n} (the LOG's position, 1, 2, ...) or {stem} (its file name
                     without extension), and the ids it gives must differ
  --experiment NAME  experiment name

exit status: 0 when every LOG gave iteration records (a failed run with records included: its
diagnostics say it failed), 1 when a LOG has no iteration record or cannot be read or written,
2 on a usage error (also when a LOG's format does not fit --framework: its record is not
written).
]]

local SPEC = {
  format = 'string',
  gbs = 'integer',
  seq_len = 'integer',
  gpus = 'integer',
  json = 'string',
  json_dir = 'string',
  quiet = 'boolean',
  help = 'boolean',
  platform = 'string',
  framework = 'string',
  model = 'string',
  gpu = 'string',
  methodology = 'string',
  dataset = 'string',
  ['repeat'] = 'integer',
  run_id = 'string',
  experiment = 'string',
  precision = 'string',
  collective = 'string',
}

-- The log formats each framework's runs print. Primus runs Megatron-LM or torchtitan as its
-- backend (AMD-AGI/Primus, primus/backends/megatron and primus/backends/torchtitan): behind
-- Primus' logger prefix the log reads as format primus, without it (the backend's own stdout) as
-- the backend's format. A log whose format was not recognised fits any framework.
local FRAMEWORK_FORMATS = {
  megatron = { megatron = true },
  primus = { primus = true, megatron = true, torchtitan = true },
  nemo = { nemo = true },
  torchtitan = { torchtitan = true },
  reference = { megatron = true },
}

-- The log formats a framework's output may have: the table above, else the adapter's parser
-- (an adapter a user registered).
local function formats_of(fw)
  local known = FRAMEWORK_FORMATS[fw]
  if known then
    return known
  end
  local adapter = require('tp.frameworks').get(fw)
  return adapter and { [adapter.parser] = true } or {}
end

-- Platform of a GPU vendor (tp.hardware rows' `vendor`), as tp.experiment pairs them.
local VENDOR_PLATFORM = { amd = 'amd', nvidia = 'nvd' }

local function usage_error(msg)
  return cli.usage_error('extract', msg, M.usage)
end

local function basename(path)
  return (path:gsub('/+$', ''):match('([^/]*)$'))
end

-- "x.log" -> "x", "a.b.txt" -> "a.b", ".hidden" -> ".hidden"
local function stem(path)
  local name = basename(path)
  local s = name:match('^(.+)%.[^.]*$')
  return s or name
end

-- Levenshtein distance between a and b, case-insensitive.
local function distance(a, b)
  a, b = a:lower(), b:lower()
  local prev = {}
  for j = 0, #b do
    prev[j] = j
  end
  for i = 1, #a do
    local cur = { [0] = i }
    local ca = a:byte(i)
    for j = 1, #b do
      local cost = ca == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

-- A value as it can be shown on one line: control bytes as \ddd, at most 64 bytes.
local function printable(v)
  local cut = #v > 64
  v = v:sub(1, 64):gsub('%c', function(c)
    return string.format('\\%03d', c:byte())
  end)
  return cut and (v .. '...') or v
end

-- "unknown model 'x'; close: a, b", else "...; known: <all>". Close: the ids that contain the
-- value or are contained in it, and those within half its length in edits that are at most one
-- edit further than the nearest.
local function unknown(what, value, ids)
  local close, best = {}, math.huge
  local lv = value:lower()
  if #value > 64 then
    return string.format("unknown %s '%s'; known: %s", what, printable(value),
      table.concat(ids, ', '))
  end
  for _, id in ipairs(ids) do
    local d = distance(value, id)
    local li = id:lower()
    local inside = (#lv >= 3 and li:find(lv, 1, true)) or (#li >= 3 and lv:find(li, 1, true))
    if inside or d <= math.max(2, (#value + 1) // 2) then
      close[#close + 1] = { id = id, d = d, inside = inside and 0 or 1 }
      if not inside and d < best then
        best = d
      end
    end
  end
  -- Ids that contain the value (or are contained in it) first, then by distance.
  table.sort(close, function(x, y)
    if x.inside ~= y.inside then
      return x.inside < y.inside
    end
    if x.d ~= y.d then
      return x.d < y.d
    end
    return x.id < y.id
  end)
  local names = {}
  for _, c in ipairs(close) do
    if c.inside == 0 or c.d <= best + 1 then
      names[#names + 1] = c.id
    end
  end
  if #names > 0 then
    return string.format("unknown %s '%s'; close: %s", what, printable(value),
      table.concat(names, ', '))
  end
  return string.format("unknown %s '%s'; known: %s", what, printable(value),
    table.concat(ids, ', '))
end

local function contains(list, v)
  for _, x in ipairs(list) do
    if x == v then
      return true
    end
  end
  return false
end

-- A free-text identity value: non-empty, printable, on one line.
local function check_text(flag, v)
  if v == '' then
    return string.format("option '--%s' is empty", flag)
  end
  if v:find('[%c]') then
    return string.format("option '--%s' contains a control character", flag)
  end
  if #v > 256 then
    return string.format("option '--%s' is longer than 256 bytes", flag)
  end
  return nil
end

-- Expands the --run-id template for each LOG; returns the list, or nil and the error.
local function run_ids(template, logs)
  local err = check_text('run-id', template)
  if err then
    return nil, err
  end
  local plain = template:gsub('{n}', ''):gsub('{stem}', '')
  if plain:find('[{}]') then
    return nil, string.format("option '--run-id': '%s' has a placeholder other than {n} and "
      .. '{stem}', template)
  end
  if plain:find('[^%w._%-]') then
    return nil, string.format("option '--run-id': '%s' has a character other than letters, "
      .. "digits, '.', '_', '-' (and {n}, {stem})", template)
  end
  if #logs > 1 and plain == template then
    return nil, string.format("option '--run-id' names one run but %d LOGs are given; put {n} "
      .. 'or {stem} in it', #logs)
  end
  local ids, seen = {}, {}
  for i, path in ipairs(logs) do
    local stem_ = stem(path)
    local id = template:gsub('{n}', tostring(i)):gsub('{stem}', function()
      return stem_
    end)
    if id == '' or id:find('[^%w._%-]') then
      return nil, string.format("option '--run-id': '%s' gives '%s' for %s, not a valid run id",
        template, id, path)
    end
    if seen[id] then
      return nil, string.format("option '--run-id': '%s' gives '%s' for both %s and %s",
        template, id, seen[id], path)
    end
    seen[id] = path
    ids[i] = id
  end
  return ids
end

local function num(v, fmtspec)
  if type(v) ~= 'number' then
    return '-'
  end
  if math.type(v) == 'integer' then
    return tostring(v)
  end
  return string.format(fmtspec or '%.6g', v)
end

local function present(v)
  return v ~= nil and type(v) ~= 'userdata' and type(v) ~= 'table'
end

local function print_summary(out, path, rec)
  local p = rec.performance_metrics
  local c = rec.training_config
  out:write(string.format('%s: %s, %d record%s', path, present(rec.format) and rec.format
    or 'format not recognised', #rec.records, #rec.records == 1 and '' or 's'))
  if #rec.iterations > 0 then
    out:write(string.format(', iterations %d..%d', rec.iterations[1],
      rec.iterations[#rec.iterations]))
  end
  out:write(string.format(', status %s\n', rec.status))
  local ids = {}
  for _, k in ipairs({ 'run_id', 'experiment', 'platform', 'framework', 'model', 'dataset',
    'methodology', 'repeat' }) do
    if present(rec[k]) and not (k == 'framework' and rec[k] == rec.format) then
      ids[#ids + 1] = string.format('%s %s', k:gsub('_', ' '), tostring(rec[k]))
    end
  end
  if #ids > 0 then
    out:write('  identity: ' .. table.concat(ids, ', ') .. '\n')
  end
  local gi = rec.gpu_info
  if type(gi) == 'table' and present(gi.device_name) then
    out:write(string.format('  GPU: %s x %s (%s)\n', gi.device_name, num(gi.device_count),
      present(gi.hardware) and gi.hardware or '?'))
  end
  local w = p.steady_state
  if w then
    local its = ''
    if present(w.first_iteration) and present(w.last_iteration) then
      its = string.format(' (iterations %d..%d)', w.first_iteration, w.last_iteration)
    end
    out:write(string.format('  steady state: records %d..%d%s, %d record%s, %s\n',
      w.first_record, w.last_record, its, w.records, w.records == 1 and '' or 's', w.method))
    out:write(string.format('  step time (s): mean %s  median %s  min %s  max %s  stddev %s' ..
      '  p5 %s  p95 %s\n', num(p.avg_step_time_seconds), num(p.median_step_time_seconds),
      num(p.min_step_time_seconds), num(p.max_step_time_seconds),
      num(p.std_step_time_seconds), num(p.p5_step_time_seconds),
      num(p.p95_step_time_seconds)))
    out:write(string.format('  all %d record%s: mean step time %s s%s\n', p.all_records.count,
      p.all_records.count == 1 and '' or 's',
      num(p.all_records.avg_step_time_seconds), p.step_time_derived and ' (derived from tps)'
      or ''))
  else
    out:write('  step time: none in the log\n')
  end
  if p.tokens_per_second then
    out:write(string.format('  tokens/s: %s (global batch %s x sequence length %s)',
      num(p.tokens_per_second, '%.1f'), num(c.global_batch_size), num(c.sequence_length)))
    if p.tokens_per_second_per_gpu then
      out:write(string.format('  tokens/s/GPU: %s (%s GPUs)',
        num(p.tokens_per_second_per_gpu, '%.1f'), num(c.num_gpus)))
    end
    out:write('\n')
  end
  if type(p.mfu) == 'number' and type(p.mfu_basis) == 'table' then
    local b = p.mfu_basis
    out:write(string.format('  MFU: %.1f %% (model TFLOP/s/GPU %.1f of the %s %s peak %s%s, %s '
      .. 'FLOPs/token %s)\n', p.mfu * 100, p.tflops_per_gpu, b.hardware, b.precision,
      num(b.peak_tflops), b.precision_assumed and ', precision assumed'
        or (b.precision_source == 'config' and ', precision from --precision' or ''), b.convention,
      num(b.flops_per_token)))
  end
  if present(p.framework_tokens_per_second_per_gpu) or present(p.framework_tflops_per_gpu) then
    out:write(string.format('  framework reports (window mean, per GPU): tokens/s %s  TFLOP/s %s\n',
      num(p.framework_tokens_per_second_per_gpu, '%.1f'),
      num(p.framework_tflops_per_gpu, '%.1f')))
  end
  local l = rec.loss_values
  if #l > 0 then
    out:write(string.format('  loss: %s -> %s (%d value%s)\n', num(l[1]), num(l[#l]), #l,
      #l == 1 and '' or 's'))
  else
    out:write('  loss: none in the log\n')
  end
  for _, d in ipairs(rec.diagnostics) do
    local line = present(d.line) and (' line ' .. tostring(d.line)) or ''
    out:write(string.format('  %s %s%s: %s\n', d.severity, d.kind, line, d.message))
  end
end

-- Parses one log, returns the record (or nil after printing the error), the exit status and
-- the parsed log. `ident` holds the identity options for this LOG (from_log's opts: platform,
-- framework, model, hardware, ...). With `digest`, the file's SHA-256 (source.sha256) is
-- computed by a second thread that reads the file behind the parser and goes on while the
-- record is built and written: source.sha256 is null until save_record fills it in.
local function extract_one(path, opts, ident, digest)
  local log_mod = require('tp.parse.log')
  local record = require('tp.parse.record')
  local log, err = log_mod.parse(path, {
    format = opts.format,
    gbs = opts.gbs,
    seq_len = opts.seq_len,
    gpus = opts.gpus,
    is_string = false,
    sha256 = digest and 'later' or nil,
  })
  if not log then
    io.stderr:write(string.format('tplua extract: %s\n', err))
    return nil, 1
  end
  local fw = ident.framework
  if fw and log.format and not formats_of(fw)[log.format] then
    io.stderr:write(string.format("tplua extract: option '--framework': %s does not fit %s, "
      .. 'whose format is %s (record not written)\n', fw, path, log.format))
    return nil, 2, log
  end
  local ropts = {
    gbs = opts.gbs,
    seq_len = opts.seq_len,
    gpus = opts.gpus,
    path = path,
    size_bytes = log.size_bytes,
    -- The records stay in the scanner and are written from it (record.save streams them).
    lazy_records = true,
  }
  for k, v in pairs(ident) do
    ropts[k] = v
  end
  local rec = record.from_log(log, ropts)
  -- The Megatron dataset the log names (--data-path in its argument dump): fingerprinted into
  -- the record when its files are readable here (docs/data.md); left as a label otherwise.
  local eff = require('tp.frameworks.megatron').effective(rec.args or {})
  local prefix = eff.training and eff.training.dataset
  if type(prefix) == 'string' and prefix ~= 'mock'
    and require('tp.fs').is_file(prefix .. '.idx') then
    local ok, info = pcall(require('tp.data').describe, prefix, {
      name = type(rec.dataset) == 'string' and rec.dataset or prefix:match('[^/]+$'),
      seq_len = math.tointeger(rec.training_config.sequence_length) })
    if ok and not info.error then
      rec.dataset = info
    end
  end
  return rec, #rec.records > 0 and 0 or 1, log
end

-- Whether a LOG is nccl-tests or rccl-tests output (its first 64 KiB). Only a regular file is
-- looked into: reading the start of a pipe or FIFO would take it from the log's parser.
local function is_collectives_log(path)
  local st = require('tp.fs').stat(path)
  if not st or st.type ~= 'file' then
    return false
  end
  local f = io.open(path, 'rb')
  if not f then
    return false
  end
  local head = f:read(65536) or ''
  f:close()
  return require('tp.parse.collectives').sniff(head)
end

-- Extracts a nccl-tests or rccl-tests LOG into a collective_bench record, prints its summary and
-- writes it to `out` (atomically); returns the exit status.
local function extract_collectives(path, opts, ident, out)
  local pc = require('tp.parse.collectives')
  if ident.framework then
    io.stderr:write(string.format("tplua extract: option '--framework': %s is nccl-tests or "
      .. 'rccl-tests output, not a training framework\'s log (record not written)\n', path))
    return 2
  end
  local parsed, err = pc.parse(path, { collective = opts.collective })
  if not parsed then
    io.stderr:write(string.format('tplua extract: %s\n', err))
    return 1
  end
  local sha = require('tp._digest').sha256_file(path)
  local st = require('tp.fs').stat(path)
  local rec = pc.record(parsed, { path = path, sha256 = sha, size_bytes = st and st.size,
    platform = ident.platform, hardware = ident.hardware, run_id = ident.run_id,
    experiment = ident.experiment, ['repeat'] = ident['repeat'] })
  if not opts.quiet then
    local w = io.stdout
    for _, t in ipairs(rec.collectives.tests) do
      local best, at = nil, nil
      for _, r in ipairs(t.rows) do
        local c = type(r.out) == 'table' and r.out or r['in']
        if type(c) == 'table' and (not best or c.busbw > best) then
          best, at = c.busbw, r.size
        end
      end
      w:write(string.format('%s: %s %s over %s ranks%s, %s, %d sizes %d..%d B, busbw max %.2f '
        .. 'GB/s at %d B, avg bus bandwidth %s, status %s\n', path, rec.collectives.tool,
        t.collective, tostring(t.ranks), type(t.gpu) == 'string' and (' (' .. t.gpu .. ')') or '',
        tostring(t.dtype), #t.rows, t.rows[1].size, t.rows[#t.rows].size, best or 0, at or 0,
        tostring(t.avg_busbw), rec.status))
      if type(t.checked) == 'number' then
        w:write(string.format('  figures that fit %s\'s bus factor over %d ranks: %d of %d '
          .. '(collective from the %s)\n', t.collective, t.ranks, t.consistent, t.checked,
          t.collective_source))
      end
    end
    for _, d in ipairs(rec.diagnostics) do
      w:write(string.format('  %s %s: %s\n', d.severity, d.kind, d.message))
    end
  end
  if out then
    local ok, werr = require('tp.json').save_file(out, rec, { pretty = true, sort_keys = true })
    if not ok then
      io.stderr:write(string.format('tplua extract: %s\n', werr))
      return 1
    end
  end
  return 0
end

-- Writes the record to `out`, the log's SHA-256 awaited only when the source member is written
-- (the members before it, the records among them, are written while it is computed).
local function save_record(rec, log, out)
  return require('tp.parse.record').save(rec, out, {
    pending = {
      source = function(r)
        local hex, err, code = log:digest()
        if not hex then
          return nil, err, code
        end
        r.source.sha256 = hex
        return true
      end,
    },
  })
end

-- Checks the identity flags; returns the from_log options they give (run_id excepted: it is
-- per LOG), or nil and the usage error.
local function identity(opts)
  local ident = {}
  if opts.platform then
    local known = require('tp.parse.record').PLATFORMS
    if not contains(known, opts.platform) then
      return nil, "option '--platform': " .. unknown('platform', opts.platform, known)
    end
    ident.platform = opts.platform
  end
  if opts.framework then
    local known = require('tp.frameworks').list()
    if not contains(known, opts.framework) then
      return nil, "option '--framework': " .. unknown('framework', opts.framework, known)
    end
    if opts.format and not formats_of(opts.framework)[opts.format] then
      return nil, string.format("option '--framework': %s does not fit '--format %s'",
        opts.framework, opts.format)
    end
    ident.framework = opts.framework
  end
  if opts.model then
    local models = require('tp.catalog.models')
    if not models.get(opts.model) then
      return nil, "option '--model': " .. unknown('model', opts.model, models.ids())
    end
    ident.model = opts.model
  end
  if opts.gpu then
    local hardware = require('tp.catalog.hardware')
    local row = hardware.get(opts.gpu)
    if not row then
      return nil, "option '--gpu': " .. unknown('GPU', opts.gpu, hardware.ids())
    end
    local platform = VENDOR_PLATFORM[row.vendor]
    if ident.platform and ident.platform ~= platform then
      return nil, string.format("option '--gpu': %s is an %s GPU, but '--platform' is %s",
        row.id, row.vendor == 'amd' and 'AMD' or 'NVIDIA', ident.platform)
    end
    ident.platform = platform
    ident.hardware = row.id
  end
  if opts.precision then
    local known = require('tp.parse.record').PRECISIONS
    if not contains(known, opts.precision) then
      return nil, "option '--precision': " .. unknown('precision', opts.precision, known)
    end
    ident.precision = opts.precision
  end
  if opts.methodology then
    local meth = require('tp.plan.methodology')
    if not meth.get(opts.methodology) then
      return nil, "option '--methodology': " .. unknown('methodology', opts.methodology,
        meth.list())
    end
    ident.methodology = opts.methodology
  end
  for _, k in ipairs({ 'dataset', 'experiment' }) do
    if opts[k] then
      local err = check_text(k, opts[k])
      if err then
        return nil, err
      end
      ident[k] = opts[k]
    end
  end
  ident['repeat'] = opts['repeat']
  return ident
end

function M.run(args)
  local opts, logs = cli.parse(args, SPEC)
  if not opts then
    return usage_error(logs)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #logs == 0 then
    return usage_error('no LOG given')
  end
  for _, k in ipairs({ 'gbs', 'seq_len', 'gpus', 'repeat' }) do
    if opts[k] and opts[k] < 1 then
      return usage_error(string.format("option '--%s' must be at least 1, got %d",
        (k:gsub('_', '-')), opts[k]))
    end
  end
  if opts.format then
    local known = require('tp.parse.log').formats()
    local found = false
    for _, f in ipairs(known) do
      found = found or f == opts.format
    end
    if not found then
      return usage_error(string.format("unknown format '%s' (known: %s)", opts.format,
        table.concat(known, ', ')))
    end
  end
  local ident, ierr = identity(opts)
  if not ident then
    return usage_error(ierr)
  end
  local ids
  if opts.run_id then
    local rerr
    ids, rerr = run_ids(opts.run_id, logs)
    if not ids then
      return usage_error(rerr)
    end
  end
  if opts.json and opts.json_dir then
    return usage_error("'--json' and '--json-dir' exclude each other")
  end
  if opts.json and #logs > 1 then
    return usage_error(string.format("'--json' takes one LOG (got %d); use '--json-dir'", #logs))
  end
  local outputs = {}
  if opts.json_dir then
    local seen = {}
    for i, path in ipairs(logs) do
      local out = opts.json_dir .. '/' .. stem(path) .. '.json'
      if seen[out] then
        return usage_error(string.format('%s and %s would both write %s', seen[out], path, out))
      end
      seen[out] = path
      outputs[i] = out
    end
  elseif opts.json then
    outputs[1] = opts.json
  end

  if opts.json_dir then
    local ok, err = require('tp.fs').mkdir_p(opts.json_dir)
    if not ok then
      io.stderr:write(string.format('tplua extract: %s\n', err))
      return 1
    end
  end

  if opts.collective and not require('tp.parse.collectives').bus_factor(opts.collective, 2) then
    return usage_error(string.format("option '--collective': unknown collective '%s' (%s)",
      opts.collective, table.concat(require('tp.parse.collectives').KINDS, ', ')))
  end
  local status = 0
  for i, path in ipairs(logs) do
    ident.run_id = ids and ids[i]
    if is_collectives_log(path) then
      local code = extract_collectives(path, opts, ident, outputs[i])
      status = math.max(status, code)
      goto continue
    end
    -- The digest is computed only for a record that is written (the summary does not show it).
    local rec, code, log = extract_one(path, opts, ident, outputs[i] ~= nil)
    if rec then
      if not opts.quiet then
        print_summary(io.stdout, path, rec)
      end
      if outputs[i] then
        local ok, err = save_record(rec, log, outputs[i])
        if not ok then
          io.stderr:write(string.format('tplua extract: %s\n', err))
          code = 1
        end
      end
      if #rec.records == 0 then
        io.stderr:write(string.format('tplua extract: %s: no iteration record found\n', path))
      end
    end
    if code > status then
      status = code
    end
    ::continue::
  end
  return status
end

return M
