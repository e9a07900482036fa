-- tp.convergence: loss-curve checks for one run (random-data plateau near ln(vocab), loss
-- collapsing towards 0, NaN/Inf, divergence and spikes) and agreement of several runs' curves
-- after warm-up within a noise envelope. Every finding says what was measured, with numbers.
-- Thresholds and their reasons: docs/analysis.md "Convergence".
local stats = require('tp.stats')
local json = require('tp.json')

local M = {}

--- Default thresholds (all overridable through `opts`).
M.DEFAULTS = {
  plateau_tolerance = 0.3, -- nats around ln(V) that count as "at the plateau"
  min_points = 5, -- post-warm-up points needed before judging a plateau
  collapse_loss = 1.0, -- a loss below this ...
  collapse_iters = 100, -- ... within this many iterations of the first record is memorisation
  near_zero = 0.1, -- a loss below this at any point is memorisation too
  divergence_rise = 0.5, -- nats the smoothed loss must climb above its minimum
  spike_rise = 0.5, -- nats a single point must jump above the preceding median
  spike_z = 3.5, -- and its modified z-score among all jumps (Iglewicz & Hoaglin)
  smooth = 5, -- moving-average window (points) for divergence and agreement
  tolerance = 0.1, -- RMS nats two curves may differ by when no repeats give an envelope
  envelope_factor = 2, -- envelope = factor x the largest repeat-to-repeat RMS distance ...
  envelope_floor = 0.02, -- ... but never below this
  warmup_fraction = 0.1, -- warm-up when no config says: this share of the iterations
}

local OPT_TYPES = { vocab = 'number', warmup = 'number', by = 'string', id = 'string' }
for k in pairs(M.DEFAULTS) do
  OPT_TYPES[k] = 'number'
end

local null = json.null

local function is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

local function options(fname, opts)
  if opts == nil then
    opts = {}
  end
  if type(opts) ~= 'table' then
    error(string.format('tp.convergence.%s: options must be a table, got %s', fname, type(opts)),
      3)
  end
  local o = {}
  for k, v in pairs(opts) do
    local want = OPT_TYPES[k]
    if not want then
      error(string.format("tp.convergence.%s: unknown option '%s'", fname, tostring(k)), 3)
    end
    if type(v) ~= want then
      error(string.format("tp.convergence.%s: option '%s' must be a %s, got %s", fname, k, want,
        type(v)), 3)
    end
    o[k] = v
  end
  for k, v in pairs(M.DEFAULTS) do
    if o[k] == nil then
      o[k] = v
    end
  end
  return o
end

local function g(v)
  if math.type(v) == 'integer' then
    return tostring(v)
  end
  return string.format('%.4g', v)
end

local function it(v)
  if math.type(v) == 'float' and v == math.floor(v) then
    return string.format('%d', math.tointeger(v))
  end
  return g(v)
end

local function finding(severity, kind, id, message, values)
  return { severity = severity, kind = kind, key = 'loss', message = message,
    runs = json.array({ id }), values = values or {} }
end

-- ---------------------------------------------------------------------------------------------
-- Curves.

local function lookup(t, ...)
  local cur = t
  for i = 1, select('#', ...) do
    if type(cur) ~= 'table' or rawequal(cur, null) then
      return nil
    end
    cur = cur[select(i, ...)]
  end
  if rawequal(cur, null) then
    return nil
  end
  return cur
end

-- The vocabulary a run's model predicts over: the caller's, the padded size the framework
-- printed, the model catalog's, or the one in the recipe's model table.
local function vocab_of(run, opts)
  if opts.vocab then
    return opts.vocab, 'given'
  end
  local args = type(run.args) == 'table' and run.args or {}
  local v = tonumber(args.padded_vocab_size or '')
  if v then
    return v, 'args padded_vocab_size'
  end
  v = tonumber(args.vocab_size or '')
  if v then
    return v, 'args vocab_size'
  end
  local model = run.model
  if type(model) == 'string' then
    local ok, models = pcall(require, 'tp.catalog.models')
    local row = ok and models.get(model)
    if row and row.vocab_size then
      return row.vocab_size, 'tp.models ' .. model
    end
  end
  local u = lookup(run, 'training_config', 'unified', 'model')
  if type(u) == 'table' and is_finite(u.vocab_size) then
    return u.vocab_size, 'recipe model'
  end
  return nil
end

local function warmup_of(run, opts, last_x)
  if opts.warmup then
    return opts.warmup, 'given'
  end
  local w = lookup(run, 'training_config', 'unified', 'training', 'warmup')
  if is_finite(w) then
    return w, 'recipe training.warmup'
  end
  local args = type(run.args) == 'table' and run.args or {}
  w = tonumber(args.lr_warmup_iters or '')
  if w then
    return w, 'args lr_warmup_iters'
  end
  if last_x then
    return math.floor(last_x * opts.warmup_fraction), string.format('%d%% of the iterations',
      math.floor(opts.warmup_fraction * 100 + 0.5))
  end
  return 0, 'none'
end

local function iteration_of_diag(d)
  return tonumber((tostring(d.message or ''):match('^iteration (%d+):')))
end

-- Builds {id, x, y, nonfinite = {{x=, line=}}, vocab, vocab_source, warmup, warmup_source}.
local function curve_of_run(run, opts)
  local c = { id = opts.id or run.id or '?', x = {}, y = {}, nonfinite = {} }
  local records = run.records
  if type(records) == 'table' and #records > 0 then
    for i, r in ipairs(records) do
      local x = r.iteration
      if not is_finite(x) then
        x = i
      end
      local y = r.loss
      if is_finite(y) then
        c.x[#c.x + 1], c.y[#c.y + 1] = x, y
      elseif type(y) == 'number' then
        c.nonfinite[#c.nonfinite + 1] = { x = x, line = r.line }
      end
      local nan = r.nan_iterations
      if is_finite(nan) and nan > 0 then
        c.nonfinite[#c.nonfinite + 1] = { x = x, line = r.line, count = nan }
      end
    end
    for _, d in ipairs(type(run.diagnostics) == 'table' and run.diagnostics or {}) do
      local msg = tostring(d.message or '')
      if d.kind == 'nonfinite_value' and msg:find('loss=', 1, true) or d.kind == 'nan_loss' then
        local x = iteration_of_diag(d)
        c.nonfinite[#c.nonfinite + 1] = { x = x, line = d.line ~= null and d.line or nil }
      end
    end
  else
    local xs, ys = run.iterations or {}, run.loss_values or {}
    for i = 1, #ys do
      local x = xs[i]
      if not is_finite(x) then
        x = i
      end
      local y = ys[i]
      if is_finite(y) then
        c.x[#c.x + 1], c.y[#c.y + 1] = x, y
      else
        c.nonfinite[#c.nonfinite + 1] = { x = x }
      end
    end
  end
  c.vocab, c.vocab_source = vocab_of(run, opts)
  c.warmup, c.warmup_source = warmup_of(run, opts, c.x[#c.x])
  return c
end

local function curve_of_table(t, opts)
  if type(t.x) ~= 'table' or type(t.y) ~= 'table' then
    error('tp.convergence: a curve needs x and y arrays', 4)
  end
  if #t.x ~= #t.y then
    error(string.format('tp.convergence: curve has %d x and %d y values', #t.x, #t.y), 4)
  end
  local c = { id = opts.id or t.id or 'curve', x = {}, y = {}, nonfinite = {} }
  for i = 1, #t.y do
    local x, y = t.x[i], t.y[i]
    if type(x) ~= 'number' or type(y) ~= 'number' then
      error(string.format('tp.convergence: curve point %d is not a pair of numbers', i), 4)
    end
    if is_finite(y) then
      c.x[#c.x + 1], c.y[#c.y + 1] = x, y
    else
      c.nonfinite[#c.nonfinite + 1] = { x = x }
    end
  end
  c.vocab = opts.vocab or t.vocab
  c.vocab_source = c.vocab and 'given' or nil
  if opts.warmup or t.warmup then
    c.warmup, c.warmup_source = opts.warmup or t.warmup, 'given'
  else
    local last = c.x[#c.x]
    c.warmup = last and math.floor(last * opts.warmup_fraction) or 0
    c.warmup_source = string.format('%d%% of the iterations',
      math.floor(opts.warmup_fraction * 100 + 0.5))
  end
  return c
end

--- Extracts the loss curve of a run (a tp.results run, or any table with `records` or
--- `loss_values`) or normalises a plain curve {x=, y=, id=, vocab=, warmup=}: returns
--- {id, x, y (finite points, in order), nonfinite = {{x=, line=}}, vocab, vocab_source, warmup,
--- warmup_source}.
---@param subject table
---@param opts? table
---@return table curve
function M.curve(subject, opts)
  opts = options('curve', opts)
  if type(subject) ~= 'table' then
    error('tp.convergence.curve: run or curve table expected, got ' .. type(subject), 2)
  end
  if subject.records ~= nil or subject.loss_values ~= nil then
    return curve_of_run(subject, opts)
  end
  return curve_of_table(subject, opts)
end

local function post_warmup(c)
  local xs, ys = {}, {}
  for i = 1, #c.x do
    if c.x[i] > c.warmup then
      xs[#xs + 1], ys[#ys + 1] = c.x[i], c.y[i]
    end
  end
  return xs, ys
end

-- ---------------------------------------------------------------------------------------------
-- Single-run checks.

local function check_nonfinite(c, out)
  local n = #c.nonfinite
  if n == 0 then
    return
  end
  local where = {}
  for i = 1, math.min(n, 5) do
    local p = c.nonfinite[i]
    where[i] = (is_finite(p.x) and ('iteration ' .. it(p.x)) or '?')
      .. (is_finite(p.line) and (', line ' .. it(p.line)) or '')
  end
  out[#out + 1] = finding('error', 'nonfinite_loss', c.id, string.format(
    '%s: the loss is NaN or infinite at %d point%s (%s%s): the run broke down numerically; ' ..
    'its later figures are not comparable', c.id, n, n == 1 and '' or 's',
    table.concat(where, '; '), n > 5 and '; ...' or ''), { count = n })
end

-- Uniformly random tokens carry ln(V) nats each and nothing to learn: NVIDIA/NeMo
-- nemo/collections/llm/gpt/data/mock.py (_MockGPTDataset.__getitem__ draws
-- np_gen.integers(vocab_size, ...)) trains at that plateau.
local function check_plateau(c, o, out)
  if not c.vocab or c.vocab < 2 then
    return
  end
  local lnv = math.log(c.vocab)
  local xs, ys = post_warmup(c)
  if #ys < o.min_points then
    return
  end
  local half = #ys - math.ceil(#ys / 2) + 1
  local tail = table.move(ys, half, #ys, 1, {})
  local med = stats.median(tail)
  local lo = stats.min(ys)
  if math.abs(med - lnv) <= o.plateau_tolerance and lo >= lnv - o.plateau_tolerance then
    out[#out + 1] = finding('warning', 'random_plateau', c.id, string.format(
      '%s: the loss stays at %.3f (median of the last %d points, iterations %s..%s; lowest ' ..
      '%.3f after warm-up) = ln(%d) = %.3f within %.2f: the model learns nothing — uniformly ' ..
      'random tokens (a mock dataset such as NeMo\'s MockDataModule) or labels unrelated to ' ..
      'the inputs (vocabulary from %s)', c.id, med, #tail, it(xs[half]), it(xs[#xs]), lo,
      c.vocab, lnv, o.plateau_tolerance, c.vocab_source or '?'),
      { median = med, ln_vocab = lnv, vocab = c.vocab, points = #tail, lowest = lo })
  end
end

-- Megatron's mock data is the opposite: NVIDIA/Megatron-LM megatron/core/datasets/
-- gpt_dataset.py MockGPTLowLevelDataset.__getitem__ returns arange(length - 1) + 1 then EOD,
-- sequences a model predicts perfectly, so the loss collapses towards 0 as on repeated data.
local function check_collapse(c, o, out)
  if #c.y == 0 then
    return
  end
  local x0 = c.x[1]
  local first_low, min_i
  for i = 1, #c.y do
    if not first_low and c.y[i] < o.collapse_loss then
      first_low = i
    end
    if not min_i or c.y[i] < c.y[min_i] then
      min_i = i
    end
  end
  local early = first_low and (c.x[first_low] - x0) <= o.collapse_iters
  if early or c.y[min_i] < o.near_zero then
    local how
    if early then
      how = string.format('falls from %.4g (iteration %s) below %s by iteration %s (%.4g)',
        c.y[1], it(x0), g(o.collapse_loss), it(c.x[first_low]), c.y[first_low])
    else
      how = string.format('falls from %.4g (iteration %s)', c.y[1], it(x0))
    end
    out[#out + 1] = finding('warning', 'loss_collapse', c.id, string.format(
      '%s: the loss %s and reaches %.3g (iteration %s): the model memorises its data — ' ..
      'repeated samples, a tiny dataset or synthetic sequences (Megatron\'s mock dataset ' ..
      'emits ascending token runs); pretraining on real text does not go below ~1 nat so soon',
      c.id, how, c.y[min_i], it(c.x[min_i])),
      { first = c.y[1], lowest = c.y[min_i], lowest_iteration = c.x[min_i],
        below_collapse_at = first_low and c.x[first_low] or nil })
  end
end

-- Trailing median of ys[i-w .. i-1].
local function prev_median(ys, i, w)
  local from = math.max(1, i - w)
  return stats.median(table.move(ys, from, i - 1, 1, {}))
end

local function check_spikes(c, o, out, xs, ys)
  local w = math.max(3, math.floor(o.smooth))
  if #ys < w + 3 then
    return
  end
  local jumps, idx = {}, {}
  for i = w + 1, #ys do
    jumps[#jumps + 1] = ys[i] - prev_median(ys, i, w)
    idx[#idx + 1] = i
  end
  local z = stats.modified_z(jumps)
  if not z then
    return
  end
  local events, cur = {}, nil
  for k, j in ipairs(jumps) do
    local i = idx[k]
    if j > o.spike_rise and z[k] > o.spike_z then
      if cur and cur.last == i - 1 then
        cur.last = i
        if ys[i] > cur.peak then
          cur.peak, cur.peak_x = ys[i], xs[i]
        end
      else
        cur = { first = i, last = i, peak = ys[i], peak_x = xs[i], base = ys[i] - j }
        events[#events + 1] = cur
      end
    end
  end
  if #events == 0 then
    return
  end
  local parts = {}
  for k = 1, math.min(#events, 5) do
    local e = events[k]
    local span = e.first == e.last and ('iteration ' .. it(xs[e.first]))
      or string.format('iterations %s..%s', it(xs[e.first]), it(xs[e.last]))
    parts[k] = string.format('%s (up to %.4g at %s, from %.4g)', span, e.peak, it(e.peak_x),
      e.base)
  end
  out[#out + 1] = finding('warning', 'loss_spike', c.id, string.format(
    '%s: %d loss spike%s after warm-up, each more than %s nats above the median of the %d ' ..
    'points before it and an outlier among all such jumps (modified z > %s): %s%s', c.id,
    #events, #events == 1 and '' or 's', g(o.spike_rise), w, g(o.spike_z),
    table.concat(parts, '; '), #events > 5 and '; ...' or ''), { spikes = #events })
end

local function check_divergence(c, o, out)
  local xs, ys = post_warmup(c)
  local w = math.max(1, math.floor(o.smooth))
  if #ys < 2 * w + 3 then
    return xs, ys
  end
  local s = assert(stats.moving_average(ys, w))
  local k = w
  for i = w, #s do
    if s[i] < s[k] then
      k = i
    end
  end
  local persist = math.max(3, math.ceil(0.15 * #s))
  local n = #s
  if n - k < persist or s[n] - s[k] <= o.divergence_rise then
    return xs, ys
  end
  for i = n - persist + 1, n do
    if s[i] <= s[k] + o.divergence_rise / 2 then
      return xs, ys
    end
  end
  out[#out + 1] = finding('error', 'divergence', c.id, string.format(
    '%s: the loss diverges after warm-up: its %d-point moving average bottoms out at %.4g ' ..
    '(iteration %s) and climbs to %.4g by iteration %s (+%.3g nats), staying above %.4g for ' ..
    'the last %d points — lower the learning rate or check the data and precision settings',
    c.id, w, s[k], it(xs[k]), s[n], it(xs[n]), s[n] - s[k], s[k] + o.divergence_rise / 2,
    persist), { minimum = s[k], minimum_iteration = xs[k], final = s[n], rise = s[n] - s[k] })
  return xs, ys
end

--- Checks one run's (or one curve's) loss: NaN/Inf, random-data plateau near ln(vocab), collapse
--- towards 0 (memorisation), divergence after warm-up and loss spikes. Returns a list of
--- findings {severity, kind, key = 'loss', message, runs = {id}, values = {...}}; empty when
--- the curve looks like ordinary training.
---```lua
---for _, f in ipairs(tp.convergence.check(run)) do print(f.severity, f.message) end
---tp.convergence.check({ x = its, y = losses, vocab = 128256, id = 'try' })
---```
---@param subject table a tp.results run or {x=, y=, id=, vocab=, warmup=}
---@param opts? table thresholds (see DEFAULTS), vocab, warmup, id
---@return table[] findings
function M.check(subject, opts)
  local o = options('check', opts)
  if type(subject) ~= 'table' then
    error('tp.convergence.check: run or curve table expected, got ' .. type(subject), 2)
  end
  local c
  if subject.records ~= nil or subject.loss_values ~= nil then
    c = curve_of_run(subject, o)
  else
    c = curve_of_table(subject, o)
  end
  local out = {}
  check_nonfinite(c, out)
  if #c.y == 0 then
    return out, c
  end
  check_plateau(c, o, out)
  check_collapse(c, o, out)
  local xs, ys = check_divergence(c, o, out)
  check_spikes(c, o, out, xs, ys)
  return out, c
end

-- ---------------------------------------------------------------------------------------------
-- Agreement between runs.

local function smoothed(c, w)
  local xs, ys = post_warmup(c)
  if #ys == 0 then
    return { x = xs, y = ys }
  end
  return { x = xs, y = assert(stats.moving_average(ys, w)) }
end

-- Mean of the curves over the x every curve has.
local function mean_curve(curves)
  local count, sum = {}, {}
  for _, cv in ipairs(curves) do
    local seen = {}
    for i, x in ipairs(cv.x) do
      if not seen[x] then
        seen[x] = true
        count[x] = (count[x] or 0) + 1
        sum[x] = (sum[x] or 0) + cv.y[i]
      end
    end
  end
  local xs = {}
  for x, n in pairs(count) do
    if n == #curves then
      xs[#xs + 1] = x
    end
  end
  table.sort(xs)
  local ys = {}
  for i, x in ipairs(xs) do
    ys[i] = sum[x] / #curves
  end
  return { x = xs, y = ys }
end

local function common_range(a, b)
  local in_b = {}
  for _, x in ipairs(b.x) do
    in_b[x] = true
  end
  local lo, hi
  for _, x in ipairs(a.x) do
    if in_b[x] then
      lo = lo and math.min(lo, x) or x
      hi = hi and math.max(hi, x) or x
    end
  end
  return lo, hi
end

--- Compares the loss curves of groups of runs after warm-up. `groups` maps a group name to a
--- list of runs (or curves). Each curve is smoothed (moving average of `smooth` points), each
--- group averaged over the iterations all its runs have, and every pair of groups compared by
--- RMS distance (tp.stats.curve_distance). The noise envelope is `envelope_factor` x the largest
--- RMS distance between repeats of one group (at least `envelope_floor`) when a group has
--- repeats, else the stated `tolerance`. Returns findings ('curves_agree' info,
--- 'curves_differ' warning, 'curves_not_comparable' info) and the measurements.
---@param groups table<string, table[]>
---@param opts? table
---@return table[] findings, table details
function M.agreement(groups, opts)
  local o = options('agreement', opts)
  if type(groups) ~= 'table' then
    error('tp.convergence.agreement: table of groups expected, got ' .. type(groups), 2)
  end
  local names = {}
  for name in pairs(groups) do
    names[#names + 1] = name
  end
  table.sort(names, function(a, b)
    return tostring(a) < tostring(b)
  end)
  local w = math.max(1, math.floor(o.smooth))
  local per, ids = {}, {}
  local within = {}
  local max_within
  for _, name in ipairs(names) do
    local curves = {}
    ids[name] = {}
    for _, subject in ipairs(groups[name]) do
      local c = M.curve(subject, { warmup = o.warmup, warmup_fraction = o.warmup_fraction })
      ids[name][#ids[name] + 1] = c.id
      local sc = smoothed(c, w)
      sc.id = c.id
      if #sc.x > 0 then
        curves[#curves + 1] = sc
      end
    end
    for i = 1, #curves do
      for j = i + 1, #curves do
        local rms, n = stats.curve_distance(curves[i], curves[j])
        if rms and n >= 3 then
          within[#within + 1] = { group = name, a = curves[i].id, b = curves[j].id, rms = rms,
            common = n }
          max_within = math.max(max_within or 0, rms)
        end
      end
    end
    per[name] = #curves > 0 and mean_curve(curves) or nil
  end
  local envelope, basis
  if max_within then
    envelope = math.max(o.envelope_factor * max_within, o.envelope_floor)
    basis = string.format('%s x the largest repeat-to-repeat RMS distance (%.3g nats), at ' ..
      'least %s', g(o.envelope_factor), max_within, g(o.envelope_floor))
  else
    envelope = o.tolerance
    basis = string.format('stated tolerance %s nats RMS (no repeats to measure the noise)',
      g(o.tolerance))
  end
  local findings, pairs_out = {}, {}
  for i = 1, #names do
    for j = i + 1, #names do
      local a, b = names[i], names[j]
      local runs = json.array()
      for _, id in ipairs(ids[a]) do
        runs[#runs + 1] = id
      end
      for _, id in ipairs(ids[b]) do
        runs[#runs + 1] = id
      end
      local ca, cb = per[a], per[b]
      local rms, n
      if ca and cb and #ca.x > 0 and #cb.x > 0 then
        rms, n = stats.curve_distance(ca, cb)
      end
      if not rms or n < 3 then
        findings[#findings + 1] = { severity = 'info', kind = 'curves_not_comparable',
          key = 'loss', runs = runs, values = { common = rms and n or 0 },
          message = string.format('loss curves of %s and %s share %d iterations after warm-up: ' ..
            'too few to compare (different log intervals, or runs too short)', tostring(a),
            tostring(b), rms and n or 0) }
      else
        local lo, hi = common_range(ca, cb)
        local agree = rms <= envelope
        local pair = { a = a, b = b, rms = rms, common = n, from = lo, to = hi,
          envelope = envelope, agree = agree }
        pairs_out[#pairs_out + 1] = pair
        findings[#findings + 1] = {
          severity = agree and 'info' or 'warning',
          kind = agree and 'curves_agree' or 'curves_differ',
          key = 'loss', runs = runs,
          values = { rms = rms, common = n, from = lo, to = hi, envelope = envelope },
          message = string.format('loss curves of %s and %s %s after warm-up: RMS distance %.3g ' ..
            'nats over %d common iterations (%s..%s, %d-point moving average) %s envelope %.3g ' ..
            '(%s)', tostring(a), tostring(b), agree and 'agree' or 'differ', rms, n, it(lo),
            it(hi), w, agree and '<=' or '>', envelope, basis),
        }
      end
    end
  end
  return findings, { envelope = envelope, envelope_basis = basis, within = within,
    pairs = pairs_out, smooth = w }
end

--- Runs `check` on every run of a result set and `agreement` between its groups (`opts.by`,
--- default 'platform'). Returns {findings = {...}, by_run = {[id] = findings}, agreement =
--- details}; findings of the runs come first, then those of the agreement.
---@param set table a tp.results ResultSet
---@param opts? table
---@return table result
function M.check_set(set, opts)
  local o = options('check_set', opts)
  if type(set) ~= 'table' or type(set.runs) ~= 'table' then
    error('tp.convergence.check_set: result set expected', 2)
  end
  local by = o.by or 'platform'
  local all, by_run = {}, {}
  local per_run_opts = {}
  for k, v in pairs(o) do
    if k ~= 'by' and k ~= 'id' then
      per_run_opts[k] = v
    end
  end
  for _, run in ipairs(set.runs) do
    local fs = M.check(run, per_run_opts)
    by_run[run.id or tostring(run)] = fs
    for _, f in ipairs(fs) do
      all[#all + 1] = f
    end
  end
  local groups = {}
  local results = require('tp.analyse.results')
  for _, run in ipairs(set.runs) do
    local key = results.get(run, by)
    key = key == nil and '(none)' or tostring(key)
    groups[key] = groups[key] or {}
    table.insert(groups[key], run)
  end
  local agree_opts = {}
  for k, v in pairs(per_run_opts) do
    if k ~= 'vocab' then
      agree_opts[k] = v
    end
  end
  local n = 0
  for _ in pairs(groups) do
    n = n + 1
  end
  local details
  if n >= 2 then
    local fs
    fs, details = M.agreement(groups, agree_opts)
    for _, f in ipairs(fs) do
      all[#all + 1] = f
    end
  end
  return { findings = all, by_run = by_run, agreement = details }
end

return M
