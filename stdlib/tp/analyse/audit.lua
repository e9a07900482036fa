-- tp.audit: the fairness audit. Per run: the configuration the recipe asked for against the one
-- the framework printed in its log (read back through the adapter's `effective(args)`), and
-- whether the run reached its last iteration. Across the runs of a comparison: every key of the
-- effective configurations diffed under the methodology's rules, data identity (mock data, loss
-- plateau, fingerprints) and the GPU count. Findings are plain tables a person can act on.
local json = require('tp.json')
local results = require('tp.analyse.results')

local M = {}

local SEVERITY_ORDER = { error = 1, warning = 2, info = 3 }

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function is_null(v)
  return rawequal(v, json.null)
end

-- ---------------------------------------------------------------------------------------------
-- Methodology rules.

-- Returns the methodology table for `name` (tp.methodology.get), or nil and a message.
local function methodology(name)
  return require('tp.plan.methodology').get(name)
end

-- True when `key` is listed in `list` itself or under a listed prefix ('model' covers
-- 'model.hidden_size').
local function listed(list, key)
  for _, k in ipairs(list or {}) do
    if k == key or key:sub(1, #k + 1) == k .. '.' then
      return true
    end
  end
  return false
end

-- The GPU count is not a unified key: it is nodes x gpus_per_node, classed as they are.
local GPU_KEYS = { 'gpus', 'nodes', 'gpus_per_node' }

-- 'algorithmic' | 'fixed' | 'free' | 'other' (not compared: tp.methodology leaves keys in
-- neither list alone).
local function class_of(m, key)
  if key == 'gpus' then
    for _, k in ipairs(GPU_KEYS) do
      if listed(m.fixed, k) then
        return 'fixed'
      end
    end
    for _, k in ipairs(GPU_KEYS) do
      if listed(m.free, k) then
        return 'free'
      end
    end
    return 'other'
  end
  if listed(m.algorithmic, key) then
    return 'algorithmic'
  elseif listed(m.fixed, key) then
    return 'fixed'
  elseif listed(m.free, key) then
    return 'free'
  end
  return 'other'
end

local CLASS_SEVERITY = { algorithmic = 'error', fixed = 'error', free = 'info' }

-- ---------------------------------------------------------------------------------------------
-- Formatting.

local function fmt(v)
  if v == nil then
    return 'unknown'
  end
  if type(v) == 'number' then
    if math.type(v) == 'integer' then
      return tostring(v)
    end
    return string.format('%.6g', v)
  end
  if type(v) == 'table' then
    return json.encode(v) or '<table>'
  end
  return tostring(v)
end

local LABELS = { gpus = 'number of GPUs' }

local function label(key)
  return LABELS[key] and (LABELS[key] .. ' (' .. key .. ')') or key
end

local function same(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    if a == b then
      return true
    end
    return math.abs(a - b) <= 1e-9 * math.max(math.abs(a), math.abs(b))
  end
  if type(a) == 'table' and type(b) == 'table' then
    return json.encode(a) == json.encode(b)
  end
  return a == b
end

-- ---------------------------------------------------------------------------------------------
-- Effective and intended configurations.

local function flatten(t, prefix, out)
  out = out or {}
  for k, v in pairs(t) do
    local key = prefix and (prefix .. '.' .. k) or k
    if type(v) == 'table' and not is_null(v) and not json.is_array(v) and next(v) ~= nil
      and key ~= 'training.dataset' then
      flatten(v, key, out)
    elseif not is_null(v) then
      out[key] = v
    end
  end
  return out
end

-- tprimat's training_config names -> unified key paths.
local TPRIMAT_KEYS = {
  global_batch_size = 'training.gbs', sequence_length = 'training.seq_len',
  micro_batch_size = 'training.mbs', max_steps = 'training.iters',
  learning_rate = 'training.lr', seed = 'training.seed', precision = 'training.precision',
  tensor_parallel_size = 'parallelism.tp', pipeline_parallel_size = 'parallelism.pp',
  context_parallel_size = 'parallelism.cp', data_parallel_size = 'parallelism.dp',
  expert_parallel_size = 'parallelism.ep', num_gpus = 'gpus',
}

local function adapter(name)
  if type(name) ~= 'string' then
    return nil
  end
  local ok, fw = pcall(require, 'tp.frameworks')
  if not ok then
    return nil
  end
  return (fw.get(name))
end

-- "primus args lr=1e-05" for key `key`, from the adapter's keymap.
local function arg_provenance(ad, key, args)
  for _, e in ipairs(ad.keymap or {}) do
    if e.key == key then
      local shown = {}
      for _, n in ipairs(e.names or {}) do
        if args[n] ~= nil and #shown < 3 then
          shown[#shown + 1] = n .. '=' .. tostring(args[n])
        end
      end
      if #shown > 0 then
        return string.format('%s args %s', ad.name or '?', table.concat(shown, ' '))
      end
    end
  end
  return string.format('%s args', ad.name or '?')
end

local function intended_model(id)
  local ok, models = pcall(require, 'tp.models')
  if not ok or type(id) ~= 'string' then
    return nil
  end
  local row = models.get(id)
  if not row then
    return nil
  end
  local out = {}
  for _, k in ipairs({ 'num_layers', 'hidden_size', 'ffn_hidden_size', 'num_attention_heads',
    'num_kv_heads', 'head_dim', 'vocab_size', 'max_position_embeddings', 'tie_embeddings',
    'qkv_bias' }) do
    out['model.' .. k] = row[k]
  end
  return out
end

local function basename(p)
  return (tostring(p):gsub('/+$', ''):match('([^/]*)$'))
end

--- Returns the effective configuration of a run, flattened to unified key paths
--- ({['training.lr'] = 3e-4, gpus = 8, ...}), where each value was read (`provenance`, e.g.
--- "primus args lr=0.0003"), and the intended configuration when the record carries one (the
--- recipe's `training_config.unified`, plus values given on the command line).
---```lua
---local e = tp.audit.effective(run)
---print(e.config['training.lr'], e.provenance['training.lr'])
---```
---@param run table a tp.results run
---@return table {config, provenance, intended, intended_source, framework, has_args, notes}
function M.effective(run)
  if type(run) ~= 'table' then
    error('tp.audit.effective: run expected, got ' .. type(run), 2)
  end
  local out = { config = {}, provenance = {}, notes = {} }
  local tc = type(run.training_config) == 'table' and run.training_config or {}
  local sources = type(tc.sources) == 'table' and tc.sources or {}
  local from_tprimat = run.kind == 'tprimat'
  -- 1. What the record's training_config says (tprimat's configuration, or the log's values).
  for name, key in pairs(TPRIMAT_KEYS) do
    local v = tc[name]
    if v ~= nil and not is_null(v) then
      out.config[key] = v
      out.provenance[key] = string.format('%s training_config.%s', from_tprimat and 'tprimat'
        or (sources[name] or 'record'), name)
    end
  end
  -- The model the record names (a tp.models id): two runs of different models do not do the
  -- same work, whatever their arguments say.
  if type(run.model) == 'string' and run.model ~= '' then
    out.config.model = run.model
    out.provenance.model = 'record model'
  end
  if out.config.gpus == nil then
    local gi = type(run.gpu_info) == 'table' and run.gpu_info or {}
    local n = gi.device_count or gi.count
    if is_finite(n) then
      out.config.gpus = n
      out.provenance.gpus = 'gpu_info.device_count'
    end
  end
  -- 2. What the framework printed, through its adapter.
  local args = run.args
  out.has_args = type(args) == 'table' and next(args) ~= nil
  local ad = adapter(run.framework)
  out.framework = ad and ad.name or run.framework
  if out.has_args and ad and type(ad.effective) == 'function' then
    local ok, eff = pcall(ad.effective, args)
    if ok then
      for key, v in pairs(flatten(eff)) do
        out.config[key] = v
        out.provenance[key] = arg_provenance(ad, key, args)
      end
    else
      out.notes[#out.notes + 1] = string.format('%s: the %s adapter cannot read the argument ' ..
        'dump: %s', run.id or '?', ad.name, tostring(eff))
    end
    -- world_size is in every Megatron argument dump (megatron/training/arguments.py,
    -- parse_args sets args.world_size; _print_args prints the namespace).
    local ws = tonumber(args.world_size or '')
    if ws then
      out.config.gpus = math.tointeger(ws) or ws
      out.provenance.gpus = string.format('%s args world_size=%s', ad.name, args.world_size)
    end
  elseif out.has_args and not ad then
    out.notes[#out.notes + 1] = string.format("%s: no adapter for framework '%s': the argument " ..
      'dump is not read back', run.id or '?', tostring(run.framework))
  end
  -- 3. The intent: the recipe's unified config, and values given as flags.
  local u = type(tc.unified) == 'table' and tc.unified or nil
  if u then
    local intended = flatten({ training = u.training, parallelism = u.parallelism,
      system = u.system })
    local model = u.model
    if type(model) == 'string' then
      for k, v in pairs(intended_model(model) or {}) do
        intended[k] = v
      end
    elseif type(model) == 'table' then
      for k, v in pairs(flatten(model, 'model')) do
        intended[k] = v
      end
    end
    if is_finite(u.nodes) and is_finite(u.gpus_per_node) then
      intended.gpus = u.nodes * u.gpus_per_node
    end
    out.intended = intended
    out.intended_source = 'recipe'
  end
  local from_flags = false
  for name, key in pairs(TPRIMAT_KEYS) do
    if sources[name] == 'flag' and tc[name] ~= nil then
      out.intended = out.intended or {}
      out.intended[key] = tc[name]
      from_flags = true
    end
  end
  if from_flags then
    -- Named once, however many keys the flags gave.
    out.intended_source = out.intended_source and (out.intended_source .. ' and flags') or 'flags'
  end
  -- The dataset as a comparable label: 'mock', the recipe's name when the path matches it, else
  -- the last two components of the path (the root differs between machines).
  local d = out.config['training.dataset']
  local want = out.intended and out.intended['training.dataset']
  if type(d) == 'string' and d ~= 'mock' then
    if type(want) == 'string' and (d:find('/' .. want .. '/', 1, true) or basename(d) == want) then
      out.dataset = want
    else
      out.dataset = d:match('([^/]+/[^/]+)/*$') or d
    end
  elseif d == 'mock' then
    out.dataset = 'mock'
  elseif type(want) == 'string' then
    out.dataset = want
  elseif type(run.dataset) == 'string' then
    out.dataset = run.dataset
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- Per-run findings.

local function new_finding(severity, kind, key, message, runs, values)
  return { severity = severity, kind = kind, key = key, message = message,
    runs = json.array(runs or {}), values = values or {} }
end

local function sort_findings(list)
  table.sort(list, function(a, b)
    local sa, sb = SEVERITY_ORDER[a.severity] or 9, SEVERITY_ORDER[b.severity] or 9
    if sa ~= sb then
      return sa < sb
    end
    if a.kind ~= b.kind then
      return a.kind < b.kind
    end
    if (a.key or '') ~= (b.key or '') then
      return (a.key or '') < (b.key or '')
    end
    return a.message < b.message
  end)
  return list
end

local function keys_sorted(t)
  local ks = {}
  for k in pairs(t) do
    ks[#ks + 1] = k
  end
  table.sort(ks)
  return ks
end

local function same_dataset(want, got)
  if type(want) == 'string' and type(got) == 'string' then
    if want == got then
      return true
    end
    if want ~= 'mock' and got ~= 'mock' then
      return got:find('/' .. want .. '/', 1, true) ~= nil or basename(got) == want
    end
    return false
  end
  if type(want) == 'table' and type(got) == 'string' then
    return want.path == got
  end
  return same(want, got)
end

local function run_findings(run, e, m, out)
  local id = run.id or '?'
  -- Intended vs effective.
  if e.intended then
    for _, key in ipairs(keys_sorted(e.intended)) do
      local want, got = e.intended[key], e.config[key]
      if got ~= nil and want ~= nil then
        local ok
        if key == 'training.dataset' then
          ok = same_dataset(want, got)
        else
          ok = same(want, got)
        end
        if not ok then
          local class = class_of(m, key)
          local sev = (class == 'algorithmic' or class == 'fixed') and 'error' or 'warning'
          out[#out + 1] = new_finding(sev,
            'intended_vs_effective', key, string.format(
              '%s: %s is %s in the log (%s) but the %s asked for %s — the framework did not ' ..
              'run the configuration it was given (an override in its own config files, a ' ..
              'default, or a flag it ignores)', id, label(key), fmt(got),
              e.provenance[key] or '?', e.intended_source, fmt(want)),
            { id }, { intended = want, effective = got, class = class })
        end
      end
    end
  end
  -- Completion.
  local last = run.last_iteration
  local total = e.config['training.iters'] or run.train_iters
  if is_finite(last) and is_finite(total) and last < total then
    out[#out + 1] = new_finding('error', 'incomplete', 'training.iters', string.format(
      '%s stopped at iteration %s of %s: it was killed, crashed or is still running; its ' ..
      'figures describe part of a run — rerun it or leave it out of the comparison', id,
      fmt(last), fmt(total)), { id }, { last_iteration = last, train_iters = total })
  end
  if run.status == 'failed' then
    local why = {}
    for _, d in ipairs(type(run.diagnostics) == 'table' and run.diagnostics or {}) do
      if d.severity == 'error' and #why < 3 then
        why[#why + 1] = tostring(d.kind) .. ': ' .. tostring(d.message)
      end
    end
    out[#out + 1] = new_finding('error', 'run_failed', nil, string.format('%s failed%s', id,
      #why > 0 and (' (' .. table.concat(why, '; ') .. ')') or ''), { id })
  end
  if not e.has_args then
    out[#out + 1] = new_finding('info', 'no_argument_dump', nil, string.format(
      '%s: no argument dump in the record (%s): its effective configuration comes from the ' ..
      'record\'s training_config only, so fewer keys can be checked', id,
      run.kind == 'tprimat' and 'a tprimat-era file' or 'the log shows none'), { id })
  end
  for _, n in ipairs(e.notes) do
    out[#out + 1] = new_finding('warning', 'adapter', nil, n, { id })
  end
  if e.dataset == 'mock' then
    out[#out + 1] = new_finding('info', 'mock_data', 'training.dataset', string.format(
      '%s trains on mock data (%s): throughput is measured without the data pipeline and the ' ..
      'loss says nothing about convergence', id, e.provenance['training.dataset'] or '?'), { id })
  end
end

local function resolve_methodology(name, level)
  local m, err = methodology(name)
  if not m then
    error('tp.audit: ' .. tostring(err), level)
  end
  return m
end

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
    local keys = {}
    for k in pairs(values) do
      keys[#keys + 1] = k
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local vals = {}
      for v in pairs(values[k]) do
        vals[#vals + 1] = v
      end
      table.sort(vals)
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
