-- tplua compare: load run records and tprimat-era results, audit the comparison's fairness,
-- check the loss curves, and print the ratios between groups with their uncertainty and basis.
local cli = require('tp.cli')

local M = {}

M.summary = 'audit and compare runs across platforms or frameworks (ratios with CIs)'

M.usage = [[
usage: tplua compare DIR|FILE... [--by KEY] [--baseline VALUE] [--json] [--csv FILE|-]
                     [--metrics LIST] [--methodology NAME] [--price GROUP=USD]...
                     [--hardware GROUP=ID]... [--tokens N] [--convention C]
                     [--seed N] [--n-boot N] [--no-recursive] [--index]
                     [--min-busbw GBPS@SIZE]... [--plot PATH]

Loads every run record (tplua.run/2) and tprimat-era result file (train_*.json,
benchmark_*.json) found in the DIRs (recursively) or named as FILEs, then prints:
  - the runs, and the files that could not be loaded (each with its reason);
  - each group's software stack side by side (GPU driver, CUDA/ROCm runtime, NCCL/RCCL,
    Python, torch, framework commit, container image; '-' where the records do not say);
  - the fairness audit: intended vs effective configuration of each run (read back from
    the framework's argument dump), every key that differs between runs under the
    methodology's rules, mock or random data, GPU count, unfinished runs;
  - the loss-curve checks: plateau at ln(vocab), collapse towards 0, NaN, divergence,
    spikes, and whether the groups' curves agree after warm-up;
  - the comparison: per group mean, sd and bootstrap CI; ratio to the baseline with its
    CI and Welch p; warnings (variation, outliers, slow first run, few repeats); the basis
    (methodology, steady-state window, FLOPs convention, peak, prices);
  - for profiled runs (their records' profile.analysis, or the PyTorch profiler traces
    they list): each group's mean step on the GPU (idle, compute, non-compute, time per
    class of kernel) and, between the baseline and each other group, the explanation of
    the gap in step time from the traces of one run per group (docs/analysis.md);
  - when a DIR holds a configuration search (search-<platform>.json): each rung, its
    candidates kept and dropped and why (tokens/s and interval against the bound), the
    best, the GPU-time against the full grid's (docs/search.md).
Given MLPerf Training submission directories (results/<system>/<benchmark>/ of result_*.txt)
instead, it prints what `tplua mlperf compare` prints for them (docs/mlperf.md).
Given nccl-tests or rccl-tests results instead (their logs, or the records tplua extract and
recipes/collectives.lua write), it sets busbw by message size side by side per collective,
rank count and type, one column per platform, with a bootstrap CI over the repeated runs
(docs/collectives.md); --min-busbw GBPS[@SIZE] is then a gate (exit 4 below it), --plot
PATH (.png or .svg) draws busbw by size, all platforms on one chart.

options:
  --by KEY             group runs by this field (default platform; e.g. framework, gbs)
  --baseline VALUE     the group ratios are taken against (default nvd when grouping by
                       platform, else the first group)
  --json               print one JSON document with everything instead of text
  --csv FILE|-         also write the comparison as CSV to FILE (replaced atomically), one
                       row per group: runs, tokens/s, tokens/s/GPU, MFU, J/token and its
                       basis, ... each with n, mean, sd, CV, min, max, CI, ratio, p; '-'
                       prints the CSV instead of the text
  --metrics LIST       comma-separated: tokens_per_s_per_gpu, tokens_per_s, step_time,
                       mfu, tflops_per_gpu, memory, memory_device, energy_per_token,
                       cost_per_1t_tokens, time_to_train
  --methodology NAME   audit under this methodology instead of the records' own
  --price GROUP=USD    price per GPU-hour for a group or hardware id (an assumption;
                       repeatable), e.g. --price amd=2.10 --price h100-sxm=2.99
  --hardware GROUP=ID  catalog id of a group's GPU when its name is not recognised (records
                       naming no GPU: the platform's usual one, amd mi300x, nvd h100-sxm,
                       said in the basis and the warnings)
  --tokens N           tokens for "time to train" and the cost basis (default 1e12)
  --convention C       FLOPs convention for MFU: megatron (default), palm, 6n
  --seed N             bootstrap seed (default 42)
  --n-boot N           bootstrap resamples (default 10000)
  --no-recursive       do not descend into subdirectories of DIR
  --index              keep a summary index (.tplua-results-index.json) in each DIR so that
                       loading it again decodes only the files that changed
  --min-busbw GBPS[@SIZE]  collective results: exit 4 when a platform's busbw (at SIZE:
                       8, 64K, 128M, 8G; else at its best size) is below GBPS (repeatable)
  --plot PATH          collective results: draw busbw by message size (.png or .svg)
  -h, --help           show this help

exit status: 0 when the comparison is valid, 3 when the audit found errors (everything is
still printed), 4 when a collective result is below --min-busbw, 1 when no run could be
loaded, 2 on a usage error.
]]

local SPEC = {
  by = 'string', baseline = 'string', json = 'boolean', csv = 'string', metrics = 'string',
  methodology = 'string', price = 'list', hardware = 'list', tokens = 'number',
  convention = 'string', seed = 'integer', n_boot = 'integer', no_recursive = 'boolean',
  index = 'boolean', help = 'boolean', min_busbw = 'list', plot = 'string',
}

local function usage_error(msg)
  return cli.usage_error('compare', msg, M.usage)
end

-- "amd=2.5" pairs -> {amd = 2.5}; nil, message on a malformed one.
local function pairs_option(list, name, numeric)
  local out = {}
  for _, item in ipairs(list or {}) do
    local k, v = item:match('^([^=]+)=(.+)$')
    if not k then
      return nil, string.format("option '--%s': GROUP=VALUE expected, got '%s'", name, item)
    end
    if numeric then
      local n = tonumber(v)
      if not n or n < 0 or n ~= n or n == math.huge then
        return nil, string.format("option '--%s': '%s' is not a non-negative number", name, v)
      end
      v = n
    end
    out[k] = v
  end
  return out
end

local function sev_tag(s)
  return '[' .. s .. ']'
end

local function print_findings(out, title, findings)
  local counts = { error = 0, warning = 0, info = 0 }
  for _, f in ipairs(findings) do
    counts[f.severity] = (counts[f.severity] or 0) + 1
  end
  out:write(string.format('%s: %d error%s, %d warning%s, %d note%s\n', title, counts.error,
    counts.error == 1 and '' or 's', counts.warning, counts.warning == 1 and '' or 's',
    counts.info, counts.info == 1 and '' or 's'))
  for _, f in ipairs(findings) do
    out:write(string.format('  %-9s %s\n', sev_tag(f.severity), f.message))
  end
end

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

-- Convergence findings, most severe first, in run order within a severity.
local function sorted_by_severity(list)
  local order = { error = 1, warning = 2, info = 3 }
  local idx = {}
  for i, f in ipairs(list) do
    idx[f] = i
  end
  table.sort(list, function(a, b)
    local sa, sb = order[a.severity] or 9, order[b.severity] or 9
    if sa ~= sb then
      return sa < sb
    end
    return idx[a] < idx[b]
  end)
  return list
end

-- nccl-tests and rccl-tests results side by side (tp.analyse.collectives), the gates checked, the
-- chart drawn; the exit status.
local function compare_collectives(found, opts, gates)
  local coll = require('tp.analyse.collectives')
  local cmp = coll.compare(found.results, { seed = opts.seed, n_boot = opts.n_boot })
  local verdicts = {}
  local failed = false
  for i, g in ipairs(gates) do
    verdicts[i] = coll.gate(cmp, g)
    failed = failed or not verdicts[i].ok
  end
  local present = require('tp.present.collectives')
  if opts.plot then
    local format = opts.plot:match('%.(%w+)$')
    format = format and format:lower()
    if format ~= 'png' and format ~= 'svg' then
      return usage_error(string.format("option '--plot': %s must end in .png or .svg",
        opts.plot))
    end
    local plot = require('tp.present.plot')
    for i, tb in ipairs(cmp.tables) do
      local chart = present.chart(tb)
      local path = i == 1 and opts.plot or opts.plot:gsub('(%.%w+)$', '-' .. i .. '%1')
      if chart then
        local r, err = plot.render(chart, { format = format, path = path })
        if not r then
          io.stderr:write(string.format('tplua compare: --plot %s: %s\n', path, err))
          return 1
        end
      end
    end
  end
  if opts.json then
    local json = require('tp.json')
    io.stdout:write(json.encode({ schema = 'tplua.compare.collectives/1', comparison = cmp,
      gates = json.array(verdicts), errors = json.array(found.errors),
      exit_status = failed and 4 or 0 }, { pretty = true }), '\n')
  else
    io.stdout:write(present.compare_text(cmp, verdicts))
    for _, e in ipairs(found.errors) do
      io.stderr:write(string.format('tplua compare: %s\n', e))
    end
  end
  return failed and 4 or 0
end

function M.run(args)
  local opts, inputs = cli.parse(args, SPEC)
  if not opts then
    return usage_error(inputs)
  end
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #inputs == 0 then
    return usage_error('no DIR or FILE given')
  end
  -- MLPerf Training submission directories (result_*.txt): compared as `tplua mlperf compare`.
  local n_mlperf = require('tp.analyse.mlperf').count_submission_dirs(inputs)
  if n_mlperf > 0 then
    for k in pairs(opts) do
      if k ~= 'json' and k ~= 'seed' then
        return usage_error(string.format("option '--%s' is not for MLPerf submission "
          .. 'directories (they take --json and --seed)', k:gsub('_', '-')))
      end
    end
    if n_mlperf < #inputs or #inputs < 2 then
      return usage_error('MLPerf submission directories are compared with each other: give two '
        .. 'or more of them and no run records')
    end
    return require('tp.cmd.mlperf').compare_main(inputs, opts, 'tplua compare')
  end
  -- nccl-tests and rccl-tests results: busbw side by side (docs/collectives.md).
  local gates = {}
  for _, g in ipairs(opts.min_busbw or {}) do
    local gate, gerr = require('tp.analyse.collectives').parse_gate(g)
    if not gate then
      return usage_error("option '--min-busbw': " .. gerr)
    end
    gates[#gates + 1] = gate
  end
  local found = require('tp.analyse.collectives').find(inputs,
    { recursive = not opts.no_recursive })
  if #found.results > 0 and found.others == 0 then
    local allowed = { json = true, seed = true, n_boot = true, min_busbw = true, plot = true,
      no_recursive = true }
    for k in pairs(opts) do
      if not allowed[k] then
        return usage_error(string.format("option '--%s' is not for nccl-tests or rccl-tests "
          .. 'results (they take --json, --seed, --n-boot, --min-busbw, --plot, --no-recursive)',
          (k:gsub('_', '-'))))
      end
    end
    return compare_collectives(found, opts, gates)
  end
  if #gates > 0 or opts.plot then
    return usage_error(string.format("'--min-busbw' and '--plot' are for nccl-tests or "
      .. 'rccl-tests results; %s holds none', table.concat(inputs, ', ')))
  end
  if opts.csv == '' then
    return usage_error("option '--csv' needs a FILE (or - for standard output)")
  end
  if opts.csv == '-' and opts.json then
    return usage_error("'--csv -' and '--json' both print to standard output: choose one")
  end
  local prices, err = pairs_option(opts.price, 'price', true)
  if not prices then
    return usage_error(err)
  end
  local hw
  hw, err = pairs_option(opts.hardware, 'hardware', false)
  if not hw then
    return usage_error(err)
  end
  local metrics_list
  if opts.metrics then
    metrics_list = {}
    for m in opts.metrics:gmatch('[^,%s]+') do
      metrics_list[#metrics_list + 1] = m
    end
    local compare = require('tp.analyse.compare')
    for _, m in ipairs(metrics_list) do
      if not compare.METRICS[m] then
        return usage_error(string.format("unknown metric '%s' in --metrics", m))
      end
    end
    if #metrics_list == 0 then
      return usage_error('--metrics is empty')
    end
  end
  if opts.convention and not ({ megatron = true, palm = true, ['6n'] = true })[opts.convention]
  then
    return usage_error(string.format("unknown convention '%s' (megatron, palm, 6n)",
      opts.convention))
  end
  if opts.methodology then
    local m, merr = require('tp.plan.methodology').get(opts.methodology)
    if not m then
      return usage_error(merr)
    end
  end
  if opts.tokens and not (opts.tokens > 0 and is_finite(opts.tokens)) then
    return usage_error('--tokens must be a positive number')
  end
  if opts.n_boot and (opts.n_boot < 1 or opts.n_boot > 10000000) then
    return usage_error('--n-boot must be between 1 and 10000000')
  end

  local results = require('tp.analyse.results')
  local set, lerr = results.load(inputs, { recursive = not opts.no_recursive,
    index = opts.index == true })
  if not set then
    io.stderr:write(string.format('tplua compare: %s\n', lerr))
    return 1
  end
  if #set == 0 then
    io.stderr:write(string.format('tplua compare: no run could be loaded from %s\n',
      table.concat(inputs, ', ')))
    for _, e in ipairs(set.errors) do
      io.stderr:write(string.format('  %s\n', e.message))
    end
    return 1
  end
  local by = opts.by or 'platform'
  local convergence = require('tp.analyse.convergence')
  local conv = convergence.check_set(set, { by = by })
  local audit = require('tp.analyse.audit').compare(set, { by = by, methodology = opts.methodology,
    loss_findings = conv.by_run })
  local cmp, cerr = require('tp.analyse.compare').compare(set, {
    by = by, baseline = opts.baseline, metrics = metrics_list, seed = opts.seed,
    n_boot = opts.n_boot, train_tokens = opts.tokens, convention = opts.convention,
    prices = prices, hardware = hw, methodology = opts.methodology,
  })
  if not cmp then
    return usage_error(cerr)
  end
  local status = audit.valid and 0 or 3
  local order = {}
  for i, gr in ipairs(cmp.groups) do
    order[i] = gr.value
  end
  local stack = require('tp.analyse.stack').table(set, { by = by, order = order })
  -- The profiled runs' trace analysis: each group's breakdown, the explanation of each gap.
  local profiled = require('tp.analyse.profiled')
  local profile = profiled.section(set, cmp)
  -- Memory per GPU: measured (traces, else logs) beside the plan's estimate (docs/memory.md).
  local memory = profiled.memory_section(set, cmp)

  if opts.csv then
    local csv = require('tp.analyse.compare_csv')
    local ok, werr = csv.write(opts.csv, csv.format(set, cmp))
    if not ok then
      io.stderr:write(string.format('tplua compare: cannot write the CSV: %s\n', werr))
      return 1
    end
    if opts.csv == '-' then
      return status
    end
    io.stderr:write(string.format('tplua compare: wrote %s\n', opts.csv))
  end

  -- What a configuration search in the directories decided (tp.present.search).
  local searches = {}
  for i, s in ipairs((require('tp.present.search').find(inputs))) do
    searches[i] = s.doc
  end
  if opts.json then
    local json = require('tp.json')
    local runs = json.array()
    for i, r in ipairs(set.runs) do
      runs[i] = results.summary(r)
    end
    local errors = json.array()
    for i, e in ipairs(set.errors) do
      errors[i] = { path = e.path, message = e.message, code = e.code }
    end
    local skipped = json.array()
    for i, e in ipairs(set.skipped) do
      skipped[i] = { path = e.path, reason = e.reason }
    end
    local doc = {
      schema = 'tplua.compare/1',
      inputs = json.array(inputs),
      runs = runs,
      load_errors = errors,
      skipped = skipped,
      audit = {
        methodology = audit.methodology,
        methodology_source = audit.methodology_source,
        counts = audit.counts,
        valid = audit.valid,
        findings = json.array(audit.findings),
        effective = audit.effective,
      },
      convergence = { findings = json.array(sorted_by_severity(conv.findings)),
        agreement = conv.agreement },
      comparison = cmp,
      stack = stack,
      profile = profile or json.null,
      memory = memory and profiled.memory_section_for_json(memory) or json.null,
      searches = json.array(searches),
      valid = audit.valid,
      exit_status = status,
    }
    local text, jerr = json.encode(doc, { pretty = true, allow_nan = true })
    if not text then
      io.stderr:write(string.format('tplua compare: cannot encode the result: %s\n', jerr))
      return 1
    end
    io.stdout:write(text, '\n')
    return status
  end

  local out = io.stdout
  out:write(string.format('%d run%s loaded from %s', #set, #set == 1 and '' or 's',
    table.concat(inputs, ' ')))
  if #set.errors > 0 then
    out:write(string.format(', %d file%s not loaded', #set.errors,
      #set.errors == 1 and '' or 's'))
  end
  out:write('\n\n')
  out:write(set:sort(by):table({ 'id', 'platform', 'framework', 'model', 'gpus', 'gbs',
    'seq_len', 'precision', { key = 'step_time', title = 'step_s', format = '%.4f' },
    { key = 'tokens_per_s_per_gpu', title = 'tok/s/GPU', format = '%.1f' },
    { key = 'loss_last', title = 'loss', format = '%.3f' }, 'status' }))
  if #set.errors > 0 then
    out:write('\nfiles not loaded:\n')
    for _, e in ipairs(set.errors) do
      out:write(string.format('  %s\n', e.message))
    end
  end
  out:write('\n')
  out:write(require('tp.analyse.stack').format(stack))
  out:write('\n')
  print_findings(out, string.format('audit (%s, %s)', audit.methodology,
    audit.methodology_source), audit.findings)
  out:write('\n')
  print_findings(out, 'convergence', sorted_by_severity(conv.findings))
  out:write('\n')
  out:write(require('tp.analyse.compare').format(cmp))
  out:write('\n')
  if profile then
    out:write(require('tp.present.trace').section_text(profile))
    out:write('\n')
  end
  if memory then
    out:write(require('tp.present.memory').section_text(memory))
    out:write('\n')
  end
  for _, doc in ipairs(searches) do
    out:write(table.concat(require('tp.present.search').lines(doc), '\n'), '\n\n')
  end
  if audit.valid then
    local nw = audit.counts.warning or 0
    out:write(string.format('verdict: the comparison is valid (no audit errors%s)\n', nw > 0
      and string.format('; %d warning%s above', nw, nw == 1 and '' or 's') or ''))
  else
    out:write(string.format('verdict: the comparison is NOT valid: %d audit error%s above\n',
      audit.counts.error, audit.counts.error == 1 and '' or 's'))
  end
  return status
end

return M
