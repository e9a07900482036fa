-- tp.analyse.mlperf: MLPerf Training results (`:::MLLOG {json}` result_*.txt files of a
-- submission's results/<system>/<benchmark>/ directory) read and scored by MLPerf's own rules:
-- time to train per run (run_start to run_stop), the runs each benchmark needs, the olympic
-- mean, non-converged runs dropped, the review's scaling.json, the reference convergence point
-- (RCP) check and its normalisation (_mlperf_rcp); and tplua's run records written as MLLOG
-- lines (_mlperf_export). The rules and their sources in mlcommons/logging are in
-- docs/mlperf.md.
local json = require('tp.json')
local fs = require('tp.fs')
local stats = require('tp.stats')
local rcp = require('tp.analyse._mlperf_rcp')
local export = require('tp.analyse._mlperf_export')
local named = require('tp.analyse._mlperf_base').named

local M = {}

--- `err` prefixed with `path` unless it names the path already (the command's messages).
M.named = named

--- Result files a benchmark needs (mlcommons/logging, mlperf_logging/benchmark_meta.py,
--- `_ALL_RESULT_FILE_COUNTS['training']`).
M.RUN_COUNTS = {
  bert = 10, dlrm = 5, dlrm_dcnv2 = 10, gnmt = 10, gpt3 = 3, maskrcnn = 5, minigo = 10,
  resnet = 5, ssd = 5, retinanet = 5, stable_diffusion = 10, transformer = 10, ncf = 10,
  rnnt = 10, unet3d = 40, gnn = 10, rgat = 10, llama2_70b_lora = 10, llama31_405b = 3,
  llama31_8b = 10, flux1 = 10, gpt_oss_20b = 10, deepseekv3_671b = 3, qwen35_397b_grpo = 3,
}

local TOKEN <const> = ':::MLLOG '

--- Benchmarks whose `eval_accuracy` is a loss (the language models' evaluation loss, log
--- perplexity; flux1's validation loss): lower is better, and the quality target is an upper
--- bound. The targets are the closed division's compliance checks of mlcommons/logging
--- (mlperf_logging/compliance_checker/training_<V>/closed_<benchmark>.yaml, ATLEAST_ONE_CHECK
--- `v['value'] <= T`; gpt3 from training_4.0.0, the others from the newest ruleset that has
--- them). Other benchmarks log an accuracy, higher is better.
M.EVAL_LOSS_TARGETS = { llama2_70b_lora = 0.925, llama31_8b = 3.3, llama31_405b = 5.6,
  gpt3 = 2.69, gpt_oss_20b = 3.34, deepseekv3_671b = 3.6, flux1 = 0.586 }

--- What a benchmark's `eval_accuracy` holds: {loss = true, name = 'eval loss', target = T,
--- label = 'eval loss (lower is better)'} for the benchmarks of EVAL_LOSS_TARGETS, else
--- {loss = false, name = 'eval accuracy', label = 'eval accuracy'}.
---@param benchmark? string
---@return table
function M.eval_metric(benchmark)
  local target = M.EVAL_LOSS_TARGETS[benchmark or '']
  if target then
    return { loss = true, name = 'eval loss', target = target,
      label = 'eval loss (lower is better)' }
  end
  return { loss = false, name = 'eval accuracy', label = 'eval accuracy' }
end

-- The tracked_stats values a run keeps: throughput as the submitters' code logs it (AMD's
-- `throughput`, NVIDIA's `train_step_time`; MLPerf defines neither, so they stay as logged).
local TRACKED <const> = { throughput = true, train_step_time = true }

-- The submission_* keys a run keeps (the first of each), and the field each goes to.
local SUBMISSION <const> = { submission_benchmark = 'benchmark', submission_org = 'org',
  submission_division = 'division', submission_status = 'submission_status',
  submission_platform = 'platform' }

--- Runs dropped at each end by the olympic mean: 4 for unet3d, 1 for every other benchmark
--- (result_summarizer.py, `max_dropped_scores`).
---@param benchmark string
---@return integer
function M.max_dropped(benchmark)
  return benchmark == 'unet3d' and 4 or 1
end

local function finding(file, line, fmt, ...)
  local where = line and string.format('%s:%d', file, line) or file
  return where .. ': ' .. string.format(fmt, ...)
end

-- A finite number, or nil (JSON's 1e400 decodes as inf).
local function finite(v)
  v = tonumber(v)
  return v and v == v and v ~= math.huge and v ~= -math.huge and v or nil
end

-- What a JSON value is, for messages.
local function kind_of(v)
  if v == nil or v == json.null then
    return 'null'
  end
  return type(v) == 'table' and 'list or object' or type(v)
end

-- A number of the metadata (samples_count, epoch_num), or nil.
local function meta_num(v)
  return type(v) == 'number' and finite(v) or nil
end

-- Why an MLLOG line's JSON does not decode: tp.json's "<string>:1:COL: reason", with the column
-- counted from the start of the line.
local function decode_reason(err, offset)
  local col, reason = tostring(err):match('^<string>:%d+:(%d+): (.*)$')
  if col then
    return string.format('column %d: %s', tonumber(col) + offset, reason)
  end
  return tostring(err)
end


--- Reads the MLLOG events of one result file's text. Returns the run: `file`, `benchmark`
--- (submission_benchmark), `start_ms`, `stop_ms`, `minutes` (time to train), `status`
--- (run_stop's metadata), `accelerators_per_node` and `number_of_nodes` (the system
--- description's fields, when logged as MLLOG keys), `evals` ({value=, epoch_num=,
--- samples_count=, time_ms=} in order),
--- `samples_to_converge` (the last eval's samples_count, else its epoch_num), `findings` (each
--- naming the file and line) and `ok` (scored: both ends found, no damaged line, status
--- success). Also `org`, `division`, `submission_status`, `platform` (the other submission_*
--- keys), `global_batch_size` and `opt_base_learning_rate` (the last logged), `train_losses`
--- ({value=, samples_count=, step_num=, time_ms=} of the train_loss events), `counts`
--- (block_start and epoch_start events), `tracked` ({throughput = {...}, train_step_time =
--- {...}}: the tracked_stats values as logged), `stop_samples` (run_stop's samples_count) and
--- `conv` ({samples_count=, epoch_num=} of the last eval_accuracy or eval_error before
--- run_stop: the RCP checker's convergence point). A damaged MLLOG line is a finding, not a raise.
---```lua
---local run = mlperf.parse_text(text, 'result_0.txt')
---print(run.minutes, run.status)
---```
---@param text string
---@param file string the name used in findings
---@return table run
function M.parse_text(text, file)
  local run = { file = file, evals = {}, findings = {}, train_losses = {}, counts = {},
    tracked = {} }
  local damaged, lineno, conv, mllog = false, 0, nil, 0
  for line in (text:sub(-1) == '\n' and text or text .. '\n'):gmatch('([^\n]*)\n') do
    lineno = lineno + 1
    local at = line:find(TOKEN, 1, true)
    if at then
      mllog = mllog + 1
      local ev, err = json.decode(line:sub(at + #TOKEN))
      local why
      if type(ev) ~= 'table' or #ev > 0 then
        why = err and decode_reason(err, at + #TOKEN - 1) or 'not a JSON object'
      elseif type(ev.key) ~= 'string' or ev.time_ms == nil then
        why = 'no time_ms or key'
      elseif not finite(ev.time_ms) then
        why = 'time_ms is not a finite number'
      end
      local ms = not why and finite(ev.time_ms)
      if why then
        damaged = true
        run.findings[#run.findings + 1] = finding(file, lineno,
          'damaged MLLOG line (%s): run not scored', why)
      else
        local meta = type(ev.metadata) == 'table' and ev.metadata or {}
        local sub = SUBMISSION[ev.key]
        if sub and type(ev.value) ~= 'string' then
          run.findings[#run.findings + 1] = finding(file, lineno,
            '%s: a string value expected, got %s (ignored)', ev.key, kind_of(ev.value))
        elseif sub then
          run[sub] = run[sub] or ev.value
        elseif ev.key == 'global_batch_size' or ev.key == 'opt_base_learning_rate' then
          run[ev.key] = ev.value
        elseif ev.key == 'train_loss' then
          run.train_losses[#run.train_losses + 1] = { value = ev.value,
            samples_count = meta.samples_count, step_num = meta.step_num, time_ms = ms }
        elseif ev.key == 'tracked_stats' and type(ev.value) == 'table' then
          for name, v in pairs(ev.value) do
            if TRACKED[name] and type(v) == 'number' then
              local t = run.tracked[name] or {}
              run.tracked[name] = t
              t[#t + 1] = v
            end
          end
        elseif ev.key == 'block_start' or ev.key == 'epoch_start' then
          run.counts[ev.key] = (run.counts[ev.key] or 0) + 1
        elseif (ev.key == 'accelerators_per_node' or ev.key == 'number_of_nodes')
          and math.type(ev.value) and math.tointeger(ev.value) and ev.value > 0
          and not run[ev.key] then
          run[ev.key] = math.tointeger(ev.value)
        elseif ev.key == 'run_start' or ev.key == 'run_stop' then
          local field = ev.key == 'run_start' and 'start_ms' or 'stop_ms'
          if run[field] then
            run.findings[#run.findings + 1] = finding(file, lineno,
              '%s logged again (the first is used)', ev.key)
          else
            run[field] = ms
            if ev.key == 'run_stop' then
              run.status = meta.status
              if run.status ~= nil and type(run.status) ~= 'string' then
                run.findings[#run.findings + 1] = finding(file, lineno,
                  'run_stop: metadata.status is a %s, not a string', kind_of(run.status))
                run.status = nil
              end
              run.stop_samples = meta_num(meta.samples_count)
              run.conv = conv
            end
          end
        elseif ev.key == 'eval_accuracy' or ev.key == 'eval_error' then
          conv = { epoch_num = meta_num(meta.epoch_num),
            samples_count = meta_num(meta.samples_count) }
          if ev.key == 'eval_accuracy' then
            run.evals[#run.evals + 1] = { value = ev.value, epoch_num = conv.epoch_num,
              samples_count = conv.samples_count, time_ms = ms }
          end
        end
      end
    end
  end
  if mllog == 0 then
    run.findings[#run.findings + 1] = finding(file, nil, '%s: no %q line: not an MLLOG result '
      .. 'file', #text == 0 and 'empty' or string.format('%d lines', lineno), TOKEN)
  end
  if not run.start_ms then
    run.findings[#run.findings + 1] = finding(file, nil, 'run_start not recorded: run not scored')
  end
  if not run.stop_ms then
    run.findings[#run.findings + 1] = finding(file, nil, 'run_stop not recorded: run not scored')
  elseif run.status ~= 'success' then
    run.findings[#run.findings + 1] = finding(file, nil,
      'run_stop status is %s, not success: a non-converged run', tostring(run.status))
  end
  if run.start_ms and run.stop_ms then
    -- Divided as MLPerf's summarizer divides (`time_to_train_ms / 60 / 1000`): one division by
    -- 60000 rounds differently in the last bit for some runs (95.96895 for its
    -- 95.96894999999999).
    run.minutes = (run.stop_ms - run.start_ms) / 60 / 1000
  end
  local last = run.evals[#run.evals]
  if last then
    run.samples_to_converge = last.samples_count or last.epoch_num
  end
  run.ok = not damaged and run.minutes ~= nil and run.status == 'success'
  return run
end

--- The olympic mean of the scored runs' `scores`: sorted, the `max_dropped` fastest dropped and
--- `max_dropped - dropped` of the slowest (the runs not scored count as the slowest). Returns
--- nil when nothing is left or when more than `max_dropped` runs were not scored.
---```lua
---mlperf.olympic_mean({ 3, 1, 2, 9 }, 0, 1) --> 2.5
---```
---@param scores number[]
---@param dropped integer runs not scored
---@param max_dropped integer
---@return number|nil
function M.olympic_mean(scores, dropped, max_dropped)
  if dropped > max_dropped then
    return nil
  end
  local sorted = table.move(scores, 1, #scores, 1, {})
  table.sort(sorted)
  local first, last = max_dropped + 1, #sorted - (max_dropped - dropped)
  if last < first then
    return nil
  end
  local sum = 0
  for i = first, last do
    sum = sum + sorted[i]
  end
  return sum / (last - first + 1)
end

--- Scores parsed runs by MLPerf's rules. `opts.benchmark` names the benchmark when the files do
--- not; `opts.scaling_factor` is the review's scaling.json factor (nil: none). The RCP check
--- (tp.analyse._mlperf_rcp, `opts.ruleset` — one tplua carries, `rulesets()`, else it raises,
--- unless `opts.rcp_file` gives the data —, `opts.rcp_file`; `opts.rcp = false` skips it)
--- gives `rcp`; without a scaling.json, a passed check's normalisation factor (RCP mean /
--- the submission's mean samples to converge, when above 1) scales the score, as the
--- summarizer's scaling.json would. Returns `benchmark`, `required` (nil when the benchmark
--- is unknown), `runs`, `scored`, `dropped`, `max_dropped`, `olympic` (minutes, before
--- scaling), `scaling_factor`, `scaling_source` ('scaling.json', 'rcp' or nil), `rcp`,
--- `score` (nil when there is none) and `findings` (the runs' and the directory's).
---@param runs table[] from parse_text
---@param opts? {benchmark?: string, scaling_factor?: number, ruleset?: string,
---  rcp_file?: string, rcp?: boolean}
---@return table result
function M.score(runs, opts)
  opts = opts or {}
  if opts.ruleset ~= nil and opts.rcp ~= false then
    -- A ruleset tplua does not carry would leave the check without data: a misuse, named.
    local err = rcp.unknown_ruleset(opts.ruleset, opts.rcp_file ~= nil)
    if err then
      error('tp.analyse.mlperf: ruleset: ' .. err, 2)
    end
  end
  local r = { runs = runs, findings = {}, scaling_factor = 1 }
  local scores = {}
  for _, run in ipairs(runs) do
    if r.benchmark and run.benchmark and run.benchmark ~= r.benchmark then
      r.findings[#r.findings + 1] = string.format('%s: submission_benchmark %s, not %s (the '
        .. 'first file\'s): files of different benchmarks', run.file, run.benchmark, r.benchmark)
    end
    r.benchmark = r.benchmark or run.benchmark
    if run.ok then
      scores[#scores + 1] = run.minutes
    end
    table.move(run.findings, 1, #run.findings, #r.findings + 1, r.findings)
  end
  r.benchmark = r.benchmark or opts.benchmark or '?'
  if r.benchmark == 'mask' then
    r.benchmark = 'maskrcnn'
  end
  r.scored, r.dropped = #scores, #runs - #scores
  r.max_dropped = M.max_dropped(r.benchmark)
  r.required = M.RUN_COUNTS[r.benchmark]
  if not r.required then
    r.findings[#r.findings + 1] = string.format(
      'benchmark %s: not in MLPerf Training\'s run counts, the runs required are unknown',
      r.benchmark)
  elseif #runs < r.required then
    r.findings[#r.findings + 1] = string.format(
      '%d result files, %s needs %d: no official score', #runs, r.benchmark, r.required)
  end
  if r.dropped > r.max_dropped then
    r.findings[#r.findings + 1] = string.format(
      '%d runs not scored, at most %d may be: too many non-converged runs, no score',
      r.dropped, r.max_dropped)
  end
  if opts.rcp ~= false then
    r.rcp = rcp.check(runs, r.benchmark, r.required, { ruleset = opts.ruleset,
      file = opts.rcp_file })
    M.rcp_findings(r)
  end
  if opts.scaling_factor then
    r.scaling_factor, r.scaling_source = opts.scaling_factor, 'scaling.json'
  elseif r.rcp and r.rcp.pass and r.rcp.norm_factor > 1 then
    r.scaling_factor, r.scaling_source = r.rcp.norm_factor, 'rcp'
  end
  r.olympic = M.olympic_mean(scores, r.dropped, r.max_dropped)
  if r.olympic and (not r.required or #runs >= r.required) then
    r.score = r.olympic * r.scaling_factor
  end
  r.official = r.score ~= nil and r.required ~= nil
  r.score_note = M.score_note(r)
  return r
end

--- What the score line says of the runs behind a score (nil for a score of all the runs the
--- benchmark requires): an official score of fewer scored runs (the others not converged), a
--- score of a benchmark whose required runs are unknown (not official), or why there is none.
---@param r table from score
---@return string|nil
function M.score_note(r)
  local files = #r.runs
  if r.score then
    if not r.required then
      return string.format('%d run%s; the runs %s requires are unknown: not an official score',
        files, files == 1 and '' or 's', r.benchmark)
    elseif r.scored < r.required then
      return string.format('official, from %d scored runs of the %d required: %d not converged, '
        .. 'counted as the slowest dropped', r.scored, r.required, r.dropped)
    end
    return nil
  end
  if r.required and files < r.required then
    return string.format('%d result file%s, %s needs %d%s', files, files == 1 and '' or 's',
      r.benchmark, r.required, r.olympic and string.format('; the olympic mean of these is '
        .. '%.4f minutes, not a score', r.olympic) or '')
  elseif r.dropped > r.max_dropped then
    return string.format('%d runs not converged, at most %d may be', r.dropped, r.max_dropped)
  end
  return 'no run scored'
end

--- Adds the findings of `r.rcp` to `r.findings`: a failed check, a check that could not run,
--- a scaling.json factor that is not the RCP normalisation.
---@param r table from score
function M.rcp_findings(r)
  local v = r.rcp
  if v.pass == false then
    r.findings[#r.findings + 1] = string.format('RCP check failed (training %s): %s: MLPerf '
      .. 'does not accept this result unless its review bypasses the check', v.ruleset,
      v.message)
  elseif v.kind == 'error' then
    r.findings[#r.findings + 1] = 'RCP check not run: ' .. v.reason
  end
end

-- The result_*.txt files of a submission directory, in run order (result_2 before result_10),
-- or nil and the listing's error.
local function result_files(dir)
  local entries, err = fs.list(dir)
  if not entries then
    return nil, err
  end
  local names = {}
  for _, e in ipairs(entries) do
    if e.name:match('^result_.*%.txt$') and e.type ~= 'directory' then
      names[#names + 1] = e.name
    end
  end
  table.sort(names, function(a, b)
    local na = tonumber(a:match('^result_(%d+)%.txt$'))
    local nb = tonumber(b:match('^result_(%d+)%.txt$'))
    if na and nb then
      return na < nb
    end
    return a < b
  end)
  return names
end

--- Reads and scores one results/<system>/<benchmark>/ directory: its result_*.txt files and
--- its scaling.json when present. Returns the result of `score` with `dir`, or nil and a
--- message when the directory has no result file or a file cannot be read.
---```lua
---local r = assert(mlperf.score_dir('results/MI355X/llama2_70b_lora'))
---print(r.score)
---```
---@param dir string
---@param opts? {ruleset?: string, rcp_file?: string, rcp?: boolean} as for score
---@return table|nil result
---@return string? err
function M.score_dir(dir, opts)
  opts = opts or {}
  if opts.ruleset ~= nil and opts.rcp ~= false then
    local err = rcp.unknown_ruleset(opts.ruleset, opts.rcp_file ~= nil)
    if err then
      error('tp.analyse.mlperf: ruleset: ' .. err, 2)
    end
  end
  local names, lerr = result_files(dir)
  if not names then
    return nil, named(dir, lerr)
  end
  if #names == 0 then
    return nil, dir .. ': no result_*.txt file'
  end
  local runs = {}
  for _, name in ipairs(names) do
    local text, err = fs.read(fs.join(dir, name))
    if not text then
      return nil, named(fs.join(dir, name), err)
    end
    runs[#runs + 1] = M.parse_text(text, name)
  end
  local factor
  local scaling = fs.join(dir, 'scaling.json')
  if fs.is_file(scaling) then
    local doc, err = json.load_file(scaling)
    if type(doc) ~= 'table' or type(doc.scaling_factor) ~= 'number' then
      return nil, err and named(scaling, err) or (scaling .. ': no number scaling_factor')
    end
    factor = doc.scaling_factor
  end
  local base = dir:gsub('/+$', ''):match('([^/]+)$')
  local r = M.score(runs, { benchmark = base, scaling_factor = factor, ruleset = opts.ruleset,
    rcp_file = opts.rcp_file, rcp = opts.rcp })
  r.dir = dir
  local v = r.rcp
  if factor and v and v.pass and math.abs(v.norm_factor - factor) > 1e-9 * factor then
    r.findings[#r.findings + 1] = string.format('scaling.json\'s factor %.6f is not the RCP '
      .. 'normalisation %.6f (training %s): the published factor is used', factor,
      v.norm_factor, v.ruleset)
  end
  return r
end

local function scored_values(r, field)
  local out = {}
  for _, run in ipairs(r.runs) do
    if run.ok and run[field] then
      out[#out + 1] = run[field]
    end
  end
  return out
end

--- The accelerators of a scored directory: `accelerators_per_node` x `number_of_nodes` (1 when
--- not logged) of the first run that logs `accelerators_per_node`, else nil (unknown; the
--- `submission_platform` string names nodes x system, not accelerators, and is not used).
---@param r table from score or score_dir
---@return integer|nil
function M.accelerators(r)
  for _, run in ipairs(r.runs) do
    if run.accelerators_per_node then
      return run.accelerators_per_node * (run.number_of_nodes or 1)
    end
  end
  return nil
end

local function side(r)
  local minutes = scored_values(r, 'minutes')
  local samples = scored_values(r, 'samples_to_converge')
  local s = { dir = r.dir, score = r.score, olympic = r.olympic, scored = r.scored,
    dropped = r.dropped, required = r.required, files = #r.runs, score_note = r.score_note,
    minutes = minutes, accelerators = M.accelerators(r), rcp = r.rcp,
    scaling_factor = r.scaling_factor, scaling_source = r.scaling_source, result = r }
  if #minutes > 0 then
    s.mean_minutes = stats.mean(minutes)
  end
  if s.accelerators and s.score then
    s.accelerator_minutes = s.score * s.accelerators
  end
  if #samples > 0 then
    s.samples = { mean = stats.mean(samples), min = stats.min(samples), max = stats.max(samples),
      n = #samples }
  end
  return s
end

--- Compares two scored directories of the same benchmark (A the baseline). Returns `benchmark`,
--- `a` and `b` (each `dir`, `score`, `olympic`, `minutes` of the scored runs, `mean_minutes`,
--- `accelerators` (nil: unknown), `accelerator_minutes` (score x accelerators), `samples`
--- {mean, min, max, n} of the scored runs' samples to converge), `ratio` (score B / score A,
--- nil without both scores), `ci` (tp.stats.bootstrap_ratio_ci of the mean times to train
--- B / A: {estimate, lo, hi}, seeded), `accelerator_ratio`, `level`, `resamples`, `seed`.
--- Returns nil and a message when the benchmarks differ or a side has no scored run.
---```lua
---local c = assert(mlperf.compare(mlperf.score_dir(a), mlperf.score_dir(b), { seed = 1 }))
---print(c.ratio, c.ci.lo, c.ci.hi)
---```
---@param a table from score or score_dir
---@param b table from score or score_dir
---@param opts? {seed?: integer, level?: number, resamples?: integer} defaults 1, 0.95, 10000
---@return table|nil comparison
---@return string? err
function M.compare(a, b, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= 'seed' and k ~= 'level' and k ~= 'resamples' then
      error(string.format('tp.analyse.mlperf.compare: unknown option %s', tostring(k)), 2)
    end
  end
  if a.benchmark ~= b.benchmark then
    return nil, string.format('different benchmarks: %s is %s, %s is %s; compare needs the same '
      .. 'benchmark', a.dir or 'A', a.benchmark, b.dir or 'B', b.benchmark)
  end
  local c = { benchmark = a.benchmark, a = side(a), b = side(b), seed = opts.seed or 1,
    level = opts.level or 0.95, resamples = opts.resamples or 10000 }
  for _, name in ipairs({ 'a', 'b' }) do
    if #c[name].minutes == 0 then
      return nil, string.format('%s: no scored run to compare', c[name].dir or name:upper())
    end
  end
  if c.a.score and c.b.score then
    c.ratio = c.b.score / c.a.score
  end
  if c.a.accelerator_minutes and c.b.accelerator_minutes then
    c.accelerator_ratio = c.b.accelerator_minutes / c.a.accelerator_minutes
  end
  c.ci = stats.bootstrap_ratio_ci(c.b.minutes, c.a.minutes,
    { seed = c.seed, level = c.level, resamples = c.resamples })
  c.flags = {}
  for _, name in ipairs({ 'a', 'b' }) do
    local flag = M.rcp_flag(c[name].rcp)
    if flag then
      c.flags[#c.flags + 1] = string.format('%s (%s): %s', name:upper(), c[name].dir or '?', flag)
    end
  end
  return c
end

--- Why a side's convergence is flagged, from its RCP verdict: outside the band (its mean
--- samples to converge below the smallest the RCP accepts), a failed check of another kind,
--- or a check that could not run; nil when it passed or does not apply (open division).
---@param v? table an RCP verdict (score's `rcp`)
---@return string|nil
function M.rcp_flag(v)
  if not v then
    return nil
  end
  if v.pass == false and v.min_mean then
    return string.format('convergence outside the RCP band: mean %s %.1f < %.1f, the least '
      .. 'the RCP (BS %s, mean %.1f) accepts (%s)', v.unit or 'samples to converge', v.mean,
      v.min_mean, tostring(v.rcp.bs), v.rcp.mean, v.message)
  elseif v.pass == false then
    return 'RCP check failed: ' .. v.message
  elseif v.kind == 'error' then
    return 'RCP check not run: ' .. v.reason
  end
  return nil
end

--- Reads, scores and compares two results/<system>/<benchmark>/ directories (see compare).
---@param dir_a string the baseline
---@param dir_b string
---@param opts? {seed?: integer, level?: number, resamples?: integer, ruleset?: string,
---  rcp_file?: string}
---@return table|nil comparison
---@return string? err
function M.compare_dirs(dir_a, dir_b, opts)
  opts = opts or {}
  local sopts = { ruleset = opts.ruleset, rcp_file = opts.rcp_file }
  local a, aerr = M.score_dir(dir_a, sopts)
  if not a then
    return nil, aerr
  end
  local b, berr = M.score_dir(dir_b, sopts)
  if not b then
    return nil, berr
  end
  return M.compare(a, b, { seed = opts.seed, level = opts.level, resamples = opts.resamples })
end

--- The training rulesets whose RCPs tplua carries (tp.analyse._mlperf_rcp.rulesets), and the
--- message for one it does not (nil when it does, or when an RCP file stands for its data).
M.rulesets = rcp.rulesets
M.unknown_ruleset = rcp.unknown_ruleset

--- Whether `path` is an MLPerf submission directory: a directory whose result_*.txt files
--- (the first of them, read up to 64 KiB) hold `:::MLLOG ` lines.
---@param path string
---@return boolean
function M.is_submission_dir(path)
  if not fs.is_dir(path) then
    return false
  end
  local names = result_files(path) or {}
  if #names == 0 then
    return false
  end
  local f = io.open(fs.join(path, names[1]), 'rb')
  if not f then
    return false
  end
  local head = f:read(65536) or ''
  f:close()
  return head:find(TOKEN, 1, true) ~= nil
end

--- How many of `paths` are MLPerf submission directories (is_submission_dir).
---@param paths string[]
---@return integer
function M.count_submission_dirs(paths)
  local n = 0
  for _, p in ipairs(paths) do
    if M.is_submission_dir(p) then
      n = n + 1
    end
  end
  return n
end

--- The MLLOG lines of a run record, and writing them (tp.analyse._mlperf_export): `export_lines
--- (rec, name, opts)` returns the lines and a summary; `export(record_path, out_path, opts)`
--- writes them atomically. `opts`: benchmark, org, division, status, platform (the
--- submission_* values).
M.export_lines = export.lines
M.export = export.write
M.export_status = export.status

return M
