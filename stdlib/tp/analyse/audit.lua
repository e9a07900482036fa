-- tp.audit: the fairness audit. Per run: the configuration the recipe asked for against the one
-- the framework printed in its log (read back through the adapter's `effective(args)`), and
-- whether the run reached its last iteration. Across the runs of a comparison: every key of the
-- effective configurations diffed under the methodology's rules, data identity (mock data, loss
-- plateau, fingerprints) and the GPU count. Findings are plain tables a person can act on.
-- The work is shared with private parts: _audit_config (methodology classes, formatting, the
-- effective and intended configurations) and _audit_run (findings on one run).
local results = require('tp.analyse.results')
local config = require('tp.analyse._audit_config')
local per_run = require('tp.analyse._audit_run')

local M = {}

local class_of, CLASS_SEVERITY = config.class_of, config.CLASS_SEVERITY
local fmt, label, same = config.fmt, config.label, config.same
local new_finding, sort_findings = per_run.new_finding, per_run.sort_findings
local keys_sorted, run_findings = per_run.keys_sorted, per_run.run_findings
local resolve_methodology = per_run.resolve_methodology

-- Documented where it is defined.
M.effective = config.effective

--- Audits one run: intended vs effective configuration (errors for algorithmic and fixed keys
--- of the methodology, warnings otherwise), completion (last iteration < train_iters), failure
--- status, and what could not be checked. Returns a list of findings
--- {severity, kind, key, message, runs = {id}, values = {...}}, errors first.
---@param run table a tp.results run
---@param opts? {methodology?: string}
---@return table[] findings
function M.run(run, opts)
  if type(run) ~= 'table' then
    error('tp.audit.run: run expected, got ' .. type(run), 2)
  end
  opts = opts or {}
  local name = opts.methodology or run.methodology or 'identical_config'
  local m = resolve_methodology(name, 3)
  local out = {}
  run_findings(run, M.effective(run), m, out)
  return sort_findings(out)
end

-- ---------------------------------------------------------------------------------------------
-- Across runs.

local function runs_of(subject)
  if type(subject) ~= 'table' then
    error('tp.audit.compare: result set or list of runs expected, got ' .. type(subject), 3)
  end
  if type(subject.runs) == 'table' then
    return subject.runs
  end
  return subject
end

-- "amd 1e-05 (amd-primus-lr: primus args lr=1e-05) vs nvd 0.0003 (2 runs: megatron args ...)"
local function describe_values(entries)
  -- entries: {{group=, id=, value=, prov=}}, grouped by (group, value)
  local order, byk = {}, {}
  for _, en in ipairs(entries) do
    local k = tostring(en.group) .. '\0' .. fmt(en.value)
    local b = byk[k]
    if not b then
      b = { group = en.group, value = en.value, ids = {}, prov = en.prov }
      byk[k] = b
      order[#order + 1] = b
    end
    b.ids[#b.ids + 1] = en.id
  end
  local parts = {}
  for _, b in ipairs(order) do
    local who = #b.ids == 1 and b.ids[1] or (#b.ids .. ' runs')
    parts[#parts + 1] = string.format('%s %s (%s: %s)', tostring(b.group), fmt(b.value), who,
      b.prov or '?')
  end
  return table.concat(parts, ' vs ')
end

local KEY_ADVICE = {
  model = 'different models do different work per token: no ratio between them means anything',
  ['training.seed'] = 'different seeds give different initialisations and data orders',
  ['training.lr'] = 'a different learning rate changes the loss curve and can hide or cause ' ..
    'divergence',
  ['training.gbs'] = 'tokens per step differ, and so does the work per step',
  ['training.seq_len'] = 'attention cost grows with sequence length: step times are not ' ..
    'comparable',
  ['training.precision'] = 'the matmuls run at different precisions and peaks',
  ['parallelism.tp'] = 'tensor parallelism changes communication and kernel shapes',
  gpus = 'the runs use different numbers of GPUs: per-GPU figures hide scaling effects',
}

local function diff_findings(runs, effs, by, m, mname, out)
  local keys = {}
  for _, e in pairs(effs) do
    for k in pairs(e.config) do
      keys[k] = true
    end
  end
  local critical = { 'model', 'training.lr', 'training.seed', 'training.gbs',
    'training.seq_len', 'training.precision', 'parallelism.tp', 'gpus' }
  for _, key in ipairs(keys_sorted(keys)) do
    if key ~= 'training.dataset' and key ~= 'training.tokenizer' then
      local entries, known, unknown = {}, {}, {}
      for _, r in ipairs(runs) do
        local e = effs[r]
        local v = e.config[key]
        if v ~= nil then
          entries[#entries + 1] = { group = results.get(r, by) or '(none)', id = r.id, value = v,
            prov = e.provenance[key] }
          known[#known + 1] = r.id
        else
          unknown[#unknown + 1] = r.id
        end
      end
      local differs = false
      for i = 2, #entries do
        if not same(entries[1].value, entries[i].value) then
          differs = true
          break
        end
      end
      local class = class_of(m, key)
      if differs and class ~= 'other' then
        local sev = CLASS_SEVERITY[class]
        local why = class == 'free' and (mname .. ' lets it differ per platform')
          or (mname .. ' requires the same value (' .. class .. ')')
        local advice = KEY_ADVICE[key]
        out[#out + 1] = new_finding(sev, 'config_differs', key, string.format(
          '%s differs: %s — %s%s', label(key), describe_values(entries), why,
          advice and ('; ' .. advice) or ''), known, { class = class })
      elseif not differs and #unknown > 0 and #known > 0 then
        for _, c in ipairs(critical) do
          if c == key then
            out[#out + 1] = new_finding('warning', 'not_checked', key, string.format(
              '%s is not known for %s (no argument dump or record value): it cannot be checked ' ..
              'against %s, so the comparison is not verified on it', label(key),
              table.concat(unknown, ', '), fmt(entries[1].value)), unknown)
          end
        end
      end
    end
  end
end

-- Loss behaviour of each run from tp.convergence: 'random' (plateau at ln V), 'memorised'
-- (collapse towards 0) or 'learning'.
-- A run is taken to learn only when its loss curve shows it: at least the points convergence
-- needs to judge a plateau, and a last loss below the first. One point, or a flat or rising
-- curve, says nothing about the data, so it is left out of the data-identity comparison.
local function shows_learning(r, cv)
  local y = cv.curve(r).y
  return #y >= cv.DEFAULTS.min_points and y[#y] < y[1]
end

-- What each run's loss says about its data: random (plateau at ln(vocab)), memorised (collapse
-- towards 0), learning, or unknown.
local function behaviours(runs, given)
  local cv = require('tp.analyse.convergence')
  local out = {}
  for _, r in ipairs(runs) do
    local fs = given and given[r.id]
    if not fs then
      fs = cv.check(r)
    end
    local b = { kind = shows_learning(r, cv) and 'learning' or 'unknown' }
    for _, f in ipairs(fs) do
      if f.kind == 'random_plateau' then
        b = { kind = 'random', finding = f }
      elseif f.kind == 'loss_collapse' and b.kind == 'learning' then
        b = { kind = 'memorised', finding = f }
      end
    end
    out[r] = b
  end
  return out
end

-- The software stacks (records' `environment`, tp.provenance) inside each group: a driver,
-- torch or framework commit that differs between repeats of one configuration is an error (the
-- repeats do not measure the same thing), between other runs of one side a warning; each side's
-- stack is stated as a note so that the two sides can be read side by side.
local function environment_findings(runs, by, out)
  local prov = require('tp.run.provenance')
  local groups, order = {}, {}
  for _, r in ipairs(runs) do
    local inv = r.environment
    if type(inv) == 'table' then
      local g = results.get(r, by) or '(none)'
      if not groups[g] then
        groups[g] = {}
        order[#order + 1] = g
      end
      local id = tostring(r.run_id or r.id)
      groups[g][#groups[g] + 1] = { id = r.id, config = id:gsub('%-r%d+$', ''),
        keys = prov.comparable(inv) }
    end
  end
  table.sort(order)
  for _, g in ipairs(order) do
    local list = groups[g]
    local values = {}
    for _, e in ipairs(list) do
      for k, v in pairs(e.keys) do
        values[k] = values[k] or {}
        values[k][v] = values[k][v] or {}
        table.insert(values[k][v], e)
      end
    end
    local stack = {}
    for _, k in ipairs(keys_sorted(values)) do
      local vals = keys_sorted(values[k])
      if #vals == 1 then
        stack[#stack + 1] = k .. ' ' .. vals[1]
      else
        local parts, repeats = {}, false
        local seen = {}
        for _, v in ipairs(vals) do
          local ids = {}
          for _, e in ipairs(values[k][v]) do
            ids[#ids + 1] = e.id
            if seen[e.config] and seen[e.config] ~= v then
              repeats = true
            end
            seen[e.config] = seen[e.config] or v
          end
          parts[#parts + 1] = string.format('%s (%s)', v, table.concat(ids, ', '))
        end
        stack[#stack + 1] = k .. ' ' .. table.concat(vals, ' | ')
        if repeats then
          out[#out + 1] = new_finding('error', 'environment_repeats', 'environment', string.format(
            '%s: %s differs between repeats of one configuration: %s — the repeats ran on '
              .. 'different software and do not measure the same thing', g, k,
            table.concat(parts, ' vs ')), {})
        else
          out[#out + 1] = new_finding('warning', 'environment_differs', 'environment',
            string.format('%s: %s differs between its runs: %s — compare each stack with the '
              .. 'same one on the other side', g, k, table.concat(parts, ' vs ')), {})
        end
      end
    end
    if #stack > 0 then
      out[#out + 1] = new_finding('info', 'environment', 'environment', string.format(
        '%s stack: %s', g, table.concat(stack, ', ')), {})
    end
  end
end

local function data_findings(runs, effs, by, opts, out)
  -- Mock data in the arguments, or dataset labels that differ.
  local labels, mock, real = {}, {}, {}
  for _, r in ipairs(runs) do
    local d = effs[r].dataset
    if d then
      labels[#labels + 1] = { group = results.get(r, by) or '(none)', id = r.id, value = d,
        prov = effs[r].provenance['training.dataset'] or 'record dataset' }
      if d == 'mock' then
        mock[#mock + 1] = r.id
      else
        real[#real + 1] = r.id
      end
    end
  end
  if #mock > 0 and #real > 0 then
    out[#out + 1] = new_finding('error', 'mock_data', 'training.dataset', string.format(
      'mock data on one side: %s — a mock dataset skips the data pipeline and its loss means ' ..
      'nothing, so throughput and convergence are not comparable; give every run the same ' ..
      'real dataset', describe_values(labels)), mock, { mock = mock, real = real })
  elseif #mock == 0 then
    local differ = false
    for i = 2, #labels do
      if labels[i].value ~= labels[1].value then
        differ = true
      end
    end
    -- Names say little when every run carries a fingerprint: the fingerprints decide below.
    local fingerprinted = 0
    for _, r in ipairs(runs) do
      local info = type(r.dataset_info) == 'table' and r.dataset_info or {}
      fingerprinted = fingerprinted + (type(info.fingerprint) == 'string' and 1 or 0)
    end
    if differ and fingerprinted < #runs then
      out[#out + 1] = new_finding('warning', 'dataset_differs', 'training.dataset',
        string.format('the datasets look different: %s — only their contents can prove they ' ..
          'hold the same tokens: give each record a dataset.fingerprint (a digest of the ' ..
          'tokenized files) and the audit compares them', describe_values(labels)),
        {})
    end
  end
  -- Synthetic data (tplua data synth) on some runs only.
  local synth, other = {}, {}
  for _, r in ipairs(runs) do
    local info = type(r.dataset_info) == 'table' and r.dataset_info or {}
    if type(info.synthetic) == 'table' then
      synth[#synth + 1] = string.format('%s (%s)', r.id, tostring(info.synthetic.kind))
    elseif info.fingerprint then
      other[#other + 1] = r.id
    end
  end
  if #synth > 0 and #other > 0 then
    out[#out + 1] = new_finding('warning', 'synthetic_data', 'training.dataset', string.format(
      'synthetic data on one side: %s, real data on %s — their losses and any data-bound speed '
        .. 'are not comparable', table.concat(synth, ', '), table.concat(other, ', ')), synth,
      { synthetic = synth, real = other })
  end
  -- Fingerprints, when the records carry them.
  local fps = {}
  for _, r in ipairs(runs) do
    local info = type(r.dataset_info) == 'table' and r.dataset_info or {}
    local fp = info.fingerprint or (type(r.source) == 'table' and r.source.dataset_fingerprint)
    if type(fp) == 'string' and fp ~= '' then
      fps[#fps + 1] = { group = results.get(r, by) or '(none)', id = r.id, value = fp,
        prov = 'dataset fingerprint' }
    end
  end
  if #fps >= 2 then
    local differ = false
    for i = 2, #fps do
      if fps[i].value ~= fps[1].value then
        differ = true
      end
    end
    if differ then
      out[#out + 1] = new_finding('error', 'data_identity', 'training.dataset', string.format(
        'the dataset fingerprints differ: %s — the runs read different tokens',
        describe_values(fps)), {})
    else
      out[#out + 1] = new_finding('info', 'data_identity', 'training.dataset', string.format(
        'the same data on every run that records it (fingerprint %s, %d runs)', fps[1].value,
        #fps), {})
    end
  end
  -- What the loss says about the data.
  if opts.convergence == false then
    return
  end
  local beh = behaviours(runs, opts.loss_findings)
  local kinds = {}
  for _, r in ipairs(runs) do
    local k = beh[r].kind
    if k ~= 'unknown' then
      kinds[k] = kinds[k] or {}
      table.insert(kinds[k], r)
    end
  end
  local n = 0
  for _ in pairs(kinds) do
    n = n + 1
  end
  local function names(list)
    local ids = {}
    for i, r in ipairs(list) do
      ids[i] = r.id
    end
    return ids
  end
  local function measured(list)
    local parts = {}
    for _, r in ipairs(list) do
      local f = beh[r].finding
      if f and f.kind == 'random_plateau' then
        parts[#parts + 1] = string.format('%s stays at %.3f = ln(%d)', r.id, f.values.median,
          f.values.vocab)
      elseif f and f.kind == 'loss_collapse' then
        parts[#parts + 1] = string.format('%s falls to %.3g', r.id, f.values.lowest)
      elseif type(r.loss_last) == 'number' then
        parts[#parts + 1] = string.format('%s learns (loss %.3f -> %.3f)', r.id,
          r.loss_first or r.loss_last, r.loss_last)
      end
    end
    return table.concat(parts, ', ')
  end
  if n > 1 then
    -- Learning runs are the reference; without any, the random-data runs are.
    local odd, rest = {}, kinds.learning or kinds.random
    for _, k in ipairs({ 'random', 'memorised' }) do
      if kinds[k] and kinds[k] ~= rest then
        for _, r in ipairs(kinds[k]) do
          odd[#odd + 1] = r
        end
      end
    end
    out[#out + 1] = new_finding('error', 'mock_data', 'loss', string.format(
      'the loss curves show different data: %s, while %s — one side trains on random, mock ' ..
      'or repeated data, so the runs do not do the same work', measured(odd), measured(rest)),
      names(odd), { odd = names(odd) })
  elseif kinds.random or kinds.memorised then
    local list = kinds.random or kinds.memorised
    local silent = {}
    for _, r in ipairs(runs) do
      if beh[r].kind == 'unknown' then
        silent[#silent + 1] = r.id
      end
    end
    out[#out + 1] = new_finding('warning', 'mock_data', 'loss', string.format(
      '%s loss points to %s data (%s): throughput may be compared, convergence cannot%s',
      #silent == 0 and 'every run\'s' or ('the ' .. table.concat(names(list), ', ')
        .. (#list == 1 and ' run\'s' or ' runs\'')),
      kinds.random and 'random or mock' or 'repeated or synthetic', measured(list),
      #silent == 0 and '' or string.format('; the loss of %s shows too few points (or no fall) '
        .. 'to tell what data it read', table.concat(silent, ', '))), names(list))
  end
end

---@class tp.audit.CompareOpts
---@field by? string key that separates the sides (default 'platform')
---@field methodology? string override the records' methodology
---@field convergence? boolean infer mock/random data from the loss curves (default true)
---@field loss_findings? table<string, table[]> tp.convergence.check results by run id, reused

--- Audits the runs of a comparison: each run on its own (see `run`), then every key of their
--- effective configurations across runs under the methodology's rules (an algorithmic or fixed
--- key that differs is an error, a key the methodology leaves free is info, an unlisted key a
--- warning), the GPU count, mock data (in the arguments, or a loss plateau at ln(vocab) / a
--- collapse on one side only) and dataset fingerprints. The methodology is the records' (or
--- `opts.methodology`), identical_config when they say nothing.
---```lua
---local a = tp.audit.compare(set, { by = 'platform' })
---if not a.valid then for _, f in ipairs(a.findings) do print(f.severity, f.message) end end
---```
---@param subject table a ResultSet or a list of runs
---@param opts? tp.audit.CompareOpts
---@return table {findings, counts = {error, warning, info}, valid, methodology,
---  methodology_source, methodology_description, effective = {[id] = {key = value}}}
function M.compare(subject, opts)
  local runs = runs_of(subject)
  opts = opts or {}
  if type(opts) ~= 'table' then
    error('tp.audit.compare: options must be a table', 2)
  end
  for k in pairs(opts) do
    if k ~= 'by' and k ~= 'methodology' and k ~= 'convergence' and k ~= 'loss_findings' then
      error(string.format("tp.audit.compare: unknown option '%s'", tostring(k)), 2)
    end
  end
  local by = opts.by or 'platform'
  local out = {}
  -- The methodology: given, else the records' own, else identical_config.
  local names, seen = {}, {}
  for _, r in ipairs(runs) do
    local n = r.methodology
    if type(n) == 'string' and not seen[n] then
      seen[n] = true
      names[#names + 1] = n
    end
  end
  table.sort(names)
  local mname, msource
  if opts.methodology then
    mname, msource = opts.methodology, 'option'
  elseif #names == 0 then
    mname, msource = 'identical_config', 'assumed (the records name none)'
  elseif #names == 1 then
    mname, msource = names[1], 'records'
  else
    mname = seen.identical_config and 'identical_config' or names[1]
    msource = 'records disagree'
    out[#out + 1] = new_finding('warning', 'methodology_mismatch', 'methodology', string.format(
      'the runs were planned under different methodologies (%s): audited under %s, the ' ..
      'strictest present', table.concat(names, ', '), mname), {})
  end
  local m = resolve_methodology(mname, 3)
  local effs = {}
  for _, r in ipairs(runs) do
    local e = M.effective(r)
    effs[r] = e
    run_findings(r, e, m, out)
  end
  if #runs >= 2 then
    diff_findings(runs, effs, by, m, mname, out)
    data_findings(runs, effs, by, opts, out)
  end
  environment_findings(runs, by, out)
  sort_findings(out)
  local counts = { error = 0, warning = 0, info = 0 }
  for _, f in ipairs(out) do
    counts[f.severity] = (counts[f.severity] or 0) + 1
  end
  local effective = {}
  for _, r in ipairs(runs) do
    effective[r.id] = effs[r].config
  end
  return {
    findings = out,
    counts = counts,
    valid = counts.error == 0,
    methodology = mname,
    methodology_source = msource,
    methodology_description = m.description,
    effective = effective,
  }
end

return M
