-- tplua mlperf: MLPerf Training results scored by MLPerf's rules (tp.analyse.mlperf,
-- docs/mlperf.md).
local cli = require('tp.cli')

local M = {}

M.summary = 'MLPerf Training results: scores, RCP checks, comparisons; runs exported as MLLOG'

M.usage = [[
usage: tplua mlperf score DIR [--json] [--curve] [--ruleset V] [--rcp-file FILE]
       tplua mlperf compare A B [C...] [--json] [--seed N] [--ruleset V] [--rcp-file FILE]
       tplua mlperf export RECORD|DIR [--out FILE|DIR] [--benchmark B] [--org O]
                           [--division closed|open] [--status onprem|cloud|research]
                           [--platform P]

DIR is one results/<system>/<benchmark>/ directory of a published MLPerf Training submission:
its result_*.txt files (`:::MLLOG {json}` lines) and the scaling.json of the review when there
is one. score prints each run's time to train (run_start to run_stop, minutes, from time_ms),
its status (run_stop's), its samples to converge and eval accuracy curve, and the benchmark's
score by MLPerf's rules (mlcommons/logging's result summarizer): the runs the benchmark needs,
the olympic mean (the fastest and the slowest run dropped; 4 each for unet3d), a run that did
not converge counted as a dropped slowest one, times the scaling factor. Then the RCP check of
a closed-division submission (the rcp_checker's, with the pruned reference convergence points
of training ruleset V, default 5.1.0): pass or fail, the reference used (found, interpolated,
or the smallest batch size's), the submission's olympic mean samples (or epochs) to converge
against the least the RCP accepts, and the normalisation factor (RCP mean / submission mean,
at least 1), which scales the score when the directory has no scaling.json. The compliance
checker is not run (docs/mlperf.md).

compare scores two or more such directories of the same benchmark (A the baseline, each other
one compared with it; different benchmarks are refused) and prints each score, the ratio of
scores B/A, a seeded bootstrap 95% CI of the ratio of the mean times to train B/A over the
scored runs, the accelerator-minutes (score x accelerators, when the logs name the
accelerators; else unknown), the samples to converge (mean and range), the RCP check side by
side, and a flag for a side whose convergence falls outside the RCP band (or fails the check).
`tplua compare` and `tplua report` do the same on submission directories.

export writes a tplua run record (docs/record.md) as MLLOG lines, with mllog's keys: the
submission_* values (from the options, else the record: model, platform, open, onprem, GPUs x
GPU name), the configuration (seed, global_batch_size, opt_base_learning_rate, ...), init,
run, block and epoch starts and stops, eval_start/eval_accuracy/eval_stop where the record has
a validation loss, train_loss points, and run_stop with status success (the run completed) or
aborted. RECORD goes to FILE (or standard output); DIR's run records (*.json) go to
DIR/result_0.txt, result_1.txt, ... (--out required), which `tplua mlperf score` reads back.
Files are replaced atomically.

options:
  --json          print one JSON document instead of the text
  --curve         print every run's eval accuracy curve (samples_count or epoch_num: accuracy)
  --seed N        compare: the bootstrap's seed (default 1; the same seed, the same CI)
  --ruleset V     the training ruleset of the RCPs: one tplua carries (5.0.0, 5.1.0, 6.0.0,
                  6.1.0; default 5.1.0), or any with --rcp-file
  --rcp-file F    an RCP JSON file of the rcp_checker's layout instead of tplua's copy
  --out PATH      export: the file (RECORD) or directory (DIR) to write
  --benchmark B, --org O, --division D, --status S, --platform P
                  export: the submission_* values
  -h, --help      show this help

exit status: 0 when the benchmark has a score, 1 when it has none (too few runs, too many
runs not converged) or DIR cannot be read, 2 on a usage error. A failed RCP check is a
finding, not an exit status. compare: 0 when every pair has a score ratio, 1 when one has
none, a directory cannot be read or the benchmarks differ. export: 0 written, 1 a record
cannot be read or exported (nothing written for it), 2 usage.

examples:
  tplua mlperf score results/MI355X_EPYC_9575F_pytorch/llama2_70b_lora
  tplua mlperf compare results/MI355X_EPYC_9575F_pytorch/llama2_70b_lora \
    results/theia_ngpu8_ngc25.09_nemo/llama2_70b_lora --seed 7
  tplua mlperf export examples/runs/llama3.1-8b-identical/amd --out mllog/amd
]]

local SPEC = { json = 'boolean', curve = 'boolean', help = 'boolean', seed = 'integer',
  ruleset = 'string', rcp_file = 'string', out = 'string', benchmark = 'string',
  org = 'string', division = 'string', status = 'string', platform = 'string' }

local named = require('tp.analyse.mlperf').named

local function usage_error(msg)
  return cli.usage_error('mlperf', msg, M.usage)
end

-- The units of the tracked_stats values kept, as the logs give them: AMD's `throughput` is
-- samples per second (384 samples between two values 65.3 s apart, evaluation excluded, in its
-- llama2_70b_lora logs: 5.88), NVIDIA's `train_step_time` seconds per step (its train_loss
-- lines, 10 steps apart, are 7.4 s apart: 0.74 s per step).
local TRACKED_UNITS = { throughput = 'samples/s', train_step_time = 's/step' }

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

--- Writes an RCP verdict (tp.analyse._mlperf_rcp.check's) as text lines to `out`.
---@param out file*
---@param v? table
function M.write_rcp(out, v)
  if not v then
    return
  end
  if v.kind == 'not_applied' or v.kind == 'error' then
    out:write(string.format('RCP check: not %s (%s)\n', v.kind == 'error' and 'run' or 'applied',
      v.reason))
    return
  end
  out:write(string.format('RCP check (training %s, pruned RCPs): %s, %s\n', v.ruleset,
    v.pass and 'passed' or 'FAILED', v.message))
  if v.rcp then
    local p = v.rcp
    out:write(string.format('  reference: %s, BS %s: mean %s %.2f, stdev %.2f, least accepted '
      .. 'mean %.2f (max speedup %.4f)\n', p.interpolated and ('interpolated between ' .. p.low
      .. ' and ' .. p.high) or p.name, tostring(p.bs), v.unit, p.mean, p.stdev, v.min_mean,
      p.max_speedup))
    out:write(string.format('  submission: BS %s, mean %s %.2f (olympic) %s %.2f; '
      .. 'normalisation factor %.6f\n', tostring(v.bs), v.unit, v.mean,
      v.pass and '>=' or '<', v.min_mean, v.norm_factor))
  end
end

local function print_text(r, opts)
  local out = io.stdout
  out:write(string.format('MLPerf Training %s, %s: %d result files, %s required\n', r.benchmark,
    r.dir, #r.runs, r.required and tostring(r.required) or 'unknown'))
  local width = 4
  for _, run in ipairs(r.runs) do
    width = math.max(width, #run.file)
  end
  local metric = require('tp.analyse.mlperf').eval_metric(r.benchmark)
  out:write(string.format('\n  %-' .. width .. 's  %-8s  %9s  %9s  %5s  %s\n', 'file', 'status',
    'minutes', 'samples', 'evals', 'last ' .. metric.label))
  for _, run in ipairs(r.runs) do
    local last = run.evals[#run.evals]
    out:write(string.format('  %-' .. width .. 's  %-8s  %9s  %9s  %5d  %s\n', run.file,
      run.ok and run.status or ('(' .. tostring(run.status or 'none') .. ')'),
      fmt_num(run.minutes, '%.4f'), tostring(run.samples_to_converge or '-'), #run.evals,
      last and type(last.value) == 'number' and string.format('%.4f', last.value) or '-'))
  end
  local tracked = false
  for _, run in ipairs(r.runs) do
    tracked = tracked or next(run.tracked) ~= nil
  end
  if tracked then
    out:write('\nthroughput as the logs track it (tracked_stats: mean, count)\n')
    for _, run in ipairs(r.runs) do
      local parts = {}
      for _, name in ipairs({ 'throughput', 'train_step_time' }) do
        local xs = run.tracked[name]
        if xs then
          local sum = 0
          for _, x in ipairs(xs) do
            sum = sum + x
          end
          parts[#parts + 1] = string.format('%s %.4f %s (%d)', name, sum / #xs,
            TRACKED_UNITS[name], #xs)
        end
      end
      out:write(string.format('  %-' .. width .. 's  %s\n', run.file,
        #parts > 0 and table.concat(parts, ', ') or '-'))
    end
  end
  if opts.curve then
    out:write(metric.loss and string.format('\neval loss, lower is better (MLPerf\'s target: '
      .. '<= %g; samples_count or epoch_num:loss)\n', metric.target)
      or '\neval accuracy (samples_count or epoch_num:accuracy)\n')
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
  M.write_rcp(out, r.rcp)
  if r.scaling_source == 'scaling.json' then
    out:write(string.format('scaling factor: %.6f (scaling.json)\n', r.scaling_factor))
  elseif r.scaling_source == 'rcp' then
    out:write(string.format('scaling factor: %.6f (RCP normalisation; no scaling.json)\n',
      r.scaling_factor))
  end
  local note = r.score_note and (' (' .. r.score_note .. ')') or ''
  if r.score then
    out:write(string.format('score: %.4f minutes%s\n', r.score, note))
  else
    out:write('score: none' .. note .. '\n')
  end
end

local function for_json(r)
  local json = require('tp.json')
  local runs = {}
  for i, run in ipairs(r.runs) do
    runs[i] = { file = run.file, status = run.status, ok = run.ok, minutes = run.minutes,
      start_ms = run.start_ms, stop_ms = run.stop_ms,
      samples_to_converge = run.samples_to_converge, evals = json.array(run.evals),
      tracked_stats = next(run.tracked) and run.tracked or nil }
  end
  local metric = require('tp.analyse.mlperf').eval_metric(r.benchmark)
  return { benchmark = r.benchmark, dir = r.dir, required = r.required, runs = runs,
    scored = r.scored, dropped = r.dropped, max_dropped = r.max_dropped, olympic = r.olympic,
    scaling_factor = r.scaling_factor, scaling_source = r.scaling_source,
    rcp = M.rcp_json(r.rcp), score = r.score, official = r.official, score_note = r.score_note,
    eval_metric = { name = metric.name, lower_is_better = metric.loss, target = metric.target },
    tracked_stats_units = TRACKED_UNITS, findings = json.array(r.findings) }
end

--- An RCP verdict as JSON (nil stays nil).
---@param v? table
---@return table|nil
function M.rcp_json(v)
  if not v then
    return nil
  end
  local json = require('tp.json')
  local p = v.rcp
  return { pass = v.pass, kind = v.kind, message = v.message, reason = v.reason,
    ruleset = v.ruleset, bs = v.bs, unit = v.unit, epochs = json.array(v.epochs),
    mean = v.mean, min_mean = v.min_mean, norm_factor = v.norm_factor,
    rcp = p and { name = p.name, bs = p.bs, mean = p.mean, stdev = p.stdev,
      min_epochs = p.min_epochs, max_speedup = p.max_speedup, interpolated = p.interpolated == true,
      low = p.low, high = p.high } }
end

local function fmt_count(v)
  return string.format('%.0f', v)
end

local function rcp_cell(v)
  if not v then
    return '-'
  elseif v.pass == nil then
    return v.kind == 'not_applied' and 'not applied' or 'not run'
  end
  return (v.pass and 'pass' or 'FAIL') .. (v.kind == 'interpolated' and ' (interp.)' or '')
end

local function scaling_cell(x)
  local src = x.scaling_source == 'scaling.json' and ' (json)' or x.scaling_source == 'rcp'
    and ' (rcp)' or ''
  return string.format('%.6f%s', x.scaling_factor or 1, src)
end

local function print_compare(c, out)
  out = out or io.stdout
  local a, b = c.a, c.b
  out:write(string.format('MLPerf Training %s: B vs A (A the baseline)\n  A  %s\n  B  %s\n\n',
    c.benchmark, a.dir, b.dir))
  local function scored(x)
    return x.required and string.format('%d of %d', x.scored, x.required) or tostring(x.scored)
  end
  local rows = {
    { 'score (minutes)', fmt_num(a.score, '%.4f'), fmt_num(b.score, '%.4f') },
    { 'runs scored (required)', scored(a), scored(b) },
    { 'mean time to train (min)', fmt_num(a.mean_minutes, '%.4f'),
      fmt_num(b.mean_minutes, '%.4f') },
    { 'accelerators', a.accelerators and tostring(a.accelerators) or 'unknown',
      b.accelerators and tostring(b.accelerators) or 'unknown' },
    { 'accelerator-minutes', fmt_num(a.accelerator_minutes, '%.2f'),
      fmt_num(b.accelerator_minutes, '%.2f') },
  }
  for _, s in ipairs({ a, b }) do
    local sm = s.samples
    s.samples_text = sm and string.format('%.1f (%s..%s)', sm.mean, fmt_count(sm.min),
      fmt_count(sm.max)) or '-'
  end
  rows[#rows + 1] = { 'samples to converge', a.samples_text, b.samples_text }
  rows[#rows + 1] = { 'RCP check', rcp_cell(a.rcp), rcp_cell(b.rcp) }
  rows[#rows + 1] = { 'RCP least accepted mean', fmt_num(a.rcp and a.rcp.min_mean, '%.1f'),
    fmt_num(b.rcp and b.rcp.min_mean, '%.1f') }
  rows[#rows + 1] = { 'RCP olympic mean', fmt_num(a.rcp and a.rcp.mean, '%.1f'),
    fmt_num(b.rcp and b.rcp.mean, '%.1f') }
  rows[#rows + 1] = { 'scaling factor', scaling_cell(a), scaling_cell(b) }
  out:write(string.format('  %-24s  %20s  %20s\n', '', 'A', 'B'))
  for _, row in ipairs(rows) do
    out:write(string.format('  %-24s  %20s  %20s\n', row[1], row[2], row[3]))
  end
  out:write('\n')
  if c.ratio then
    out:write(string.format('score ratio B/A: %.4f (%.4f / %.4f)\n', c.ratio, b.score, a.score))
  else
    local why = {}
    for _, x in ipairs({ { 'A', a }, { 'B', b } }) do
      if not x[2].score then
        why[#why + 1] = string.format('%s: %s', x[1], x[2].score_note or 'no score')
      end
    end
    out:write(string.format('score ratio B/A: none (%s)\n', table.concat(why, '; ')))
  end
  out:write(string.format('mean time to train B/A: %.4f, %g%% CI [%.4f, %.4f] (bootstrap, %d '
    .. 'resamples, seed %d)\n', c.ci.estimate, c.level * 100, c.ci.lo, c.ci.hi, c.resamples,
    c.seed))
  if c.accelerator_ratio then
    out:write(string.format('accelerator-minutes B/A: %.4f\n', c.accelerator_ratio))
  else
    out:write('accelerator-minutes B/A: unknown (no accelerators_per_node line in the logs)\n')
  end
  for _, f in ipairs(c.flags) do
    out:write('flag: ' .. f .. '\n')
  end
end
M.print_compare = print_compare

local function compare_json(c)
  local json = require('tp.json')
  local function s(x)
    return { dir = x.dir, score = x.score, olympic = x.olympic, scored = x.scored,
      dropped = x.dropped, mean_minutes = x.mean_minutes, minutes = json.array(x.minutes),
      accelerators = x.accelerators, accelerator_minutes = x.accelerator_minutes,
      samples_to_converge = x.samples, scaling_factor = x.scaling_factor,
      scaling_source = x.scaling_source, rcp = M.rcp_json(x.rcp) }
  end
  return { benchmark = c.benchmark, a = s(c.a), b = s(c.b), ratio = c.ratio,
    time_ratio_ci = c.ci, accelerator_ratio = c.accelerator_ratio, level = c.level,
    resamples = c.resamples, seed = c.seed, flags = json.array(c.flags) }
end
M.compare_json = compare_json

--- Compares submission directories: the first the baseline, each other one against it (one
--- comparison each, as `tplua mlperf compare A B`). Used by `tplua mlperf compare` and by
--- `tplua compare` on submission directories. Returns the exit status: 0 when every pair has
--- a score ratio, 1 otherwise (a message on stderr for a pair that cannot be compared).
---@param dirs string[] two or more
---@param opts {json?: boolean, seed?: integer, ruleset?: string, rcp_file?: string}
---@param prog string the command's name for messages
---@return integer
function M.compare_main(dirs, opts, prog)
  local mlperf = require('tp.analyse.mlperf')
  local json = require('tp.json')
  local docs, status = {}, 0
  for i = 2, #dirs do
    local c, err = mlperf.compare_dirs(dirs[1], dirs[i], { seed = opts.seed,
      ruleset = opts.ruleset, rcp_file = opts.rcp_file })
    if not c then
      io.stderr:write(prog .. ': ' .. err .. '\n')
      status = 1
    else
      if opts.json then
        docs[#docs + 1] = compare_json(c)
      else
        if i > 2 then
          io.stdout:write('\n')
        end
        print_compare(c)
      end
      if not c.ratio then
        status = 1
      end
    end
  end
  if opts.json and #docs > 0 then
    local doc = #dirs == 2 and docs[1] or { comparisons = json.array(docs) }
    io.stdout:write(json.encode(doc, { pretty = true }), '\n')
  end
  return status
end

local function run_compare(opts, rest)
  if #rest < 3 then
    return usage_error('compare takes two or more directories, A (the baseline) and B...')
  end
  return M.compare_main(table.move(rest, 2, #rest, 1, {}), opts, 'tplua mlperf')
end

local EXPORT_VALUES = { division = { closed = true, open = true },
  status = { onprem = true, cloud = true, research = true } }

-- The run records of a directory (its *.json files whose schema is tplua.run/N), sorted.
local function records_in(dir)
  local fs = require('tp.fs')
  local json = require('tp.json')
  local entries, err = fs.list(dir)
  if not entries then
    return nil, named(dir, err)
  end
  local names, skipped = {}, {}
  for _, e in ipairs(entries) do
    if e.name:match('%.json$') and e.type ~= 'directory' then
      local path = fs.join(dir, e.name)
      local doc = json.load_file(path)
      if type(doc) == 'table' and type(doc.schema) == 'string'
        and doc.schema:find('^tplua%.run/') then
        names[#names + 1] = path
      else
        skipped[#skipped + 1] = path
      end
    end
  end
  table.sort(names)
  return names, skipped
end

local function run_export(opts, rest)
  if #rest ~= 2 then
    return usage_error('export takes one RECORD or DIR')
  end
  local eopts = {}
  for _, k in ipairs({ 'benchmark', 'org', 'division', 'status', 'platform' }) do
    local v = opts[k]
    if v ~= nil then
      if v == '' or (EXPORT_VALUES[k] and not EXPORT_VALUES[k][v]) then
        return usage_error(string.format("option '--%s': '%s' is not allowed", k, v))
      end
      eopts[k] = v
    end
  end
  local fs = require('tp.fs')
  local mlperf = require('tp.analyse.mlperf')
  local src = rest[2]
  if fs.is_dir(src) then
    if not opts.out then
      return usage_error('export of a directory needs --out DIR')
    end
    local names, skipped = records_in(src)
    if not names then
      io.stderr:write('tplua mlperf: ' .. skipped .. '\n')
      return 1
    end
    for _, p in ipairs(skipped) do
      io.stderr:write('tplua mlperf: ' .. p .. ': not a run record, left out\n')
    end
    if #names == 0 then
      io.stderr:write('tplua mlperf: ' .. src .. ': no run record (*.json, tplua.run/N)\n')
      return 1
    end
    local ok, err = fs.mkdir_p(opts.out)
    if not ok then
      io.stderr:write('tplua mlperf: ' .. named(opts.out, err) .. '\n')
      return 1
    end
    -- Every record is read and exported before the first file is written, so that a bad
    -- record leaves no directory half exported.
    local json = require('tp.json')
    local done = {}
    for i, path in ipairs(names) do
      local rec, rerr = json.load_file(path)
      local lines, sum
      if rec ~= nil then
        lines, sum = mlperf.export_lines(rec, path, eopts)
      end
      if not lines then
        io.stderr:write('tplua mlperf: ' .. tostring(rec == nil and rerr or sum)
          .. ': nothing written\n')
        return 1
      end
      done[i] = { path = path, text = table.concat(lines, '\n') .. '\n', sum = sum,
        out = fs.join(opts.out, string.format('result_%d.txt', i - 1)) }
    end
    for _, d in ipairs(done) do
      local wok, werr = fs.write_atomic(d.out, d.text)
      if not wok then
        io.stderr:write('tplua mlperf: ' .. named(d.out, werr) .. '\n')
        return 1
      end
      io.stdout:write(string.format('%s -> %s: %d iterations, %d samples, %d evals, %s\n', d.path,
        d.out, d.sum.iterations, d.sum.samples, d.sum.evals, d.sum.status))
    end
    -- Result files of an earlier export stay (they are not ours to remove): say so.
    for _, e in ipairs(fs.list(opts.out) or {}) do
      local n = tonumber(e.name:match('^result_(%d+)%.txt$'))
      if e.name:match('^result_.*%.txt$') and not (n and n < #names) then
        io.stderr:write(string.format('tplua mlperf: warning: %s is not from %s: tplua mlperf '
          .. 'score %s reads it too\n', fs.join(opts.out, e.name), src, opts.out))
      end
    end
    return 0
  end
  if opts.out then
    local sum, err = mlperf.export(src, opts.out, eopts)
    if not sum then
      io.stderr:write('tplua mlperf: ' .. err .. '\n')
      return 1
    end
    io.stdout:write(string.format('%s -> %s: %d iterations, %d samples, %d evals, %s\n', src,
      opts.out, sum.iterations, sum.samples, sum.evals, sum.status))
    return 0
  end
  local json = require('tp.json')
  local rec, err = json.load_file(src)
  if rec == nil then
    io.stderr:write('tplua mlperf: ' .. tostring(err) .. '\n')
    return 1
  end
  local lines, sum = mlperf.export_lines(rec, src, eopts)
  if not lines then
    io.stderr:write('tplua mlperf: ' .. sum .. '\n')
    return 1
  end
  io.stdout:write(table.concat(lines, '\n'), '\n')
  return 0
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
  if opts.ruleset then
    -- Only a ruleset tplua carries the RCPs of (or any, with --rcp-file): an unknown one would
    -- leave the RCP check without data.
    local err = require('tp.analyse.mlperf').unknown_ruleset(opts.ruleset, opts.rcp_file ~= nil)
    if err then
      return usage_error("option '--ruleset': " .. err)
    end
  end
  if rest[1] == 'compare' then
    return run_compare(opts, rest)
  end
  if rest[1] == 'export' then
    return run_export(opts, rest)
  end
  if rest[1] ~= 'score' then
    return usage_error(rest[1] and string.format("unknown subcommand '%s'", rest[1])
      or 'no subcommand given (score, compare, export)')
  end
  if #rest ~= 2 then
    return usage_error('score takes one DIR')
  end
  local mlperf = require('tp.analyse.mlperf')
  local r, err = mlperf.score_dir(rest[2], { ruleset = opts.ruleset, rcp_file = opts.rcp_file })
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
