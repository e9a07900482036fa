-- tplua mlperf: MLPerf Training results scored by MLPerf's rules (tp.analyse.mlperf,
-- docs/mlperf.md).
local cli = require('tp.cli')

local M = {}

M.summary = 'score MLPerf Training result files (time to train, olympic mean) by MLPerf\'s rules'

M.usage = [[
usage: tplua mlperf score DIR [--json] [--curve]

DIR is one results/<system>/<benchmark>/ directory of a published MLPerf Training submission:
its result_*.txt files (`:::MLLOG {json}` lines) and the scaling.json of the review when there
is one. Prints each run's time to train (run_start to run_stop, minutes, from time_ms), its
status (run_stop's), its samples to converge and eval accuracy curve, and the benchmark's score
by MLPerf's rules (mlcommons/logging's result summarizer): the runs the benchmark needs, the
olympic mean (the fastest and the slowest run dropped; 4 each for unet3d), a run that did not
converge counted as a dropped slowest one, times the scaling factor. RCP checks and the
compliance checker are not run (docs/mlperf.md).

options:
  --json       print one JSON document instead of the text
  --curve      print every run's eval accuracy curve (samples_count or epoch_num: accuracy)
  -h, --help   show this help

exit status: 0 when the benchmark has a score, 1 when it has none (too few runs, too many
runs not converged) or DIR cannot be read, 2 on a usage error.

example:
  tplua mlperf score results/MI355X_EPYC_9575F_pytorch/llama2_70b_lora
]]

local SPEC = { json = 'boolean', curve = 'boolean', help = 'boolean' }

local function usage_error(msg)
  return cli.usage_error('mlperf', msg, M.usage)
end

local function fmt_num(v, f)
  return v and string.format(f, v) or '-'
end

local function curve_text(run)
  local parts = {}
  for _, e in ipairs(run.evals) do
    local at = e.samples_count or e.epoch_num
    parts[#parts + 1] = string.format('%s:%s', tostring(at or '?'),
      type(e.value) == 'number' and string.format('%.4f', e.value) or tostring(e.value))
  end
  return table.concat(parts, ' ')
end

local function print_text(r, opts)
  local out = io.stdout
  out:write(string.format('MLPerf Training %s, %s: %d result files, %s required\n', r.benchmark,
    r.dir, #r.runs, r.required and tostring(r.required) or 'unknown'))
  local width = 4
  for _, run in ipairs(r.runs) do
    width = math.max(width, #run.file)
  end
  out:write(string.format('\n  %-' .. width .. 's  %-8s  %9s  %9s  %5s  %s\n', 'file', 'status',
    'minutes', 'samples', 'evals', 'last accuracy'))
  for _, run in ipairs(r.runs) do
    local last = run.evals[#run.evals]
    out:write(string.format('  %-' .. width .. 's  %-8s  %9s  %9s  %5d  %s\n', run.file,
      run.ok and run.status or ('(' .. tostring(run.status or 'none') .. ')'),
      fmt_num(run.minutes, '%.4f'), tostring(run.samples_to_converge or '-'), #run.evals,
      last and type(last.value) == 'number' and string.format('%.4f', last.value) or '-'))
  end
  if opts.curve then
    out:write('\neval accuracy (samples_count or epoch_num:accuracy)\n')
    for _, run in ipairs(r.runs) do
      out:write(string.format('  %-' .. width .. 's  %s\n', run.file, curve_text(run)))
    end
  end
  if #r.findings > 0 then
    out:write('\nfindings\n')
    for _, f in ipairs(r.findings) do
      out:write('  ' .. f .. '\n')
    end
  end
  out:write(string.format('\n%d runs scored, %d not (at most %d may be)\n', r.scored, r.dropped,
    r.max_dropped))
  if r.olympic then
    out:write(string.format('olympic mean: %.4f minutes (%d fastest and %d slowest dropped)\n',
      r.olympic, r.max_dropped, r.max_dropped - r.dropped))
  end
  if r.has_scaling then
    out:write(string.format('scaling factor: %.6f (scaling.json)\n', r.scaling_factor))
  end
  if r.score then
    out:write(string.format('score: %.4f minutes\n', r.score))
  else
    out:write('score: none\n')
  end
end

local function for_json(r)
  local json = require('tp.json')
  local runs = {}
  for i, run in ipairs(r.runs) do
    runs[i] = { file = run.file, status = run.status, ok = run.ok, minutes = run.minutes,
      start_ms = run.start_ms, stop_ms = run.stop_ms,
      samples_to_converge = run.samples_to_converge, evals = json.array(run.evals) }
  end
  return { benchmark = r.benchmark, dir = r.dir, required = r.required, runs = runs,
    scored = r.scored, dropped = r.dropped, max_dropped = r.max_dropped, olympic = r.olympic,
    scaling_factor = r.scaling_factor, score = r.score, findings = json.array(r.findings) }
end

function M.run(args)
  local opts, rest = cli.parse(args, SPEC)
  if not opts then
    return usage_error(rest)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if rest[1] ~= 'score' then
    return usage_error(rest[1] and string.format("unknown subcommand '%s'", rest[1])
      or 'no subcommand given (score)')
  end
  if #rest ~= 2 then
    return usage_error('score takes one DIR')
  end
  local mlperf = require('tp.analyse.mlperf')
  local r, err = mlperf.score_dir(rest[2])
  if not r then
    io.stderr:write('tplua mlperf: ' .. err .. '\n')
    return 1
  end
  if opts.json then
    local json = require('tp.json')
    io.stdout:write(json.encode(for_json(r), { pretty = true }), '\n')
  else
    print_text(r, opts)
  end
  return r.score and 0 or 1
end

return M
