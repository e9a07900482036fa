-- tplua extract: parse training logs into unified run records (tp.record), print a summary of
-- each and optionally write the records as JSON.
local cli = require('tp.cli')

local M = {}

M.summary = 'parse training logs into run records (step time, tokens/s, loss, diagnostics)'

M.usage = [[
usage: tplua extract LOG... [--format F] [--gbs N] [--seq-len N] [--gpus N]
                            [--json OUT | --json-dir DIR] [--quiet]

Parses each LOG (Megatron-LM, Primus, NeMo, torchtitan; detected unless --format is given),
builds its run record (schema tplua.run/1) and prints a summary: format, records, the
steady-state window (MSER-5), step-time statistics over it, tokens/s = global batch x sequence
length / mean step time, tokens/s/GPU, loss first -> last, and the diagnostics.

options:
  --format F      parse with this parser instead of detecting the format
  --gbs N         global batch size (overrides the log)
  --seq-len N     sequence length (overrides the log)
  --gpus N        number of GPUs (overrides the log)
  --json OUT      write the run record to OUT (one LOG only), atomically
  --json-dir DIR  write DIR/<log name without extension>.json for each LOG (DIR is created)
  --quiet         print nothing but errors
  -h, --help      show this help

exit status: 0 when every LOG gave iteration records (a failed run with records included: its
diagnostics say it failed), 1 when a LOG has no iteration record or cannot be read or written,
2 on a usage error.
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
}

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

-- Parses one log, returns the record (or nil after printing the error) and the exit status.
local function extract_one(path, opts)
  local log_mod = require('tp.log')
  local record = require('tp.record')
  local digest = require('tp._digest')
  local sha, size = digest.sha256_file(path)
  if not sha then
    io.stderr:write(string.format('tplua extract: %s\n', size))
    return nil, 1
  end
  local log, err = log_mod.parse(path, {
    format = opts.format,
    gbs = opts.gbs,
    seq_len = opts.seq_len,
    gpus = opts.gpus,
    is_string = false,
  })
  if not log then
    io.stderr:write(string.format('tplua extract: %s\n', err))
    return nil, 1
  end
  local rec = record.from_log(log, {
    gbs = opts.gbs,
    seq_len = opts.seq_len,
    gpus = opts.gpus,
    path = path,
    sha256 = sha,
    size_bytes = size,
  })
  return rec, #rec.records > 0 and 0 or 1
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
  for _, k in ipairs({ 'gbs', 'seq_len', 'gpus' }) do
    if opts[k] and opts[k] < 1 then
      return usage_error(string.format("option '--%s' must be at least 1, got %d",
        k:gsub('_', '-'), opts[k]))
    end
  end
  if opts.format then
    local known = require('tp.log').formats()
    local found = false
    for _, f in ipairs(known) do
      found = found or f == opts.format
    end
    if not found then
      return usage_error(string.format("unknown format '%s' (known: %s)", opts.format,
        table.concat(known, ', ')))
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

  local status = 0
  local record = require('tp.record')
  for i, path in ipairs(logs) do
    local rec, code = extract_one(path, opts)
    if rec then
      if not opts.quiet then
        print_summary(io.stdout, path, rec)
      end
      if outputs[i] then
        local ok, err = record.save(rec, outputs[i])
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
  end
  return status
end

return M
