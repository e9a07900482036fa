-- tp.plan.search: searching a sweep's candidates instead of running every point of the grid.
-- Successive halving (every candidate a short run, the better 1/eta a run eta times longer, and
-- so on up to the recipe's iterations), ranked by steady-state tokens/s with confidence
-- intervals, so that a candidate is dropped only when it is worse with confidence than the ones
-- kept, within a budget of the grid's GPU-time; the schedule and its budget in GPU-iterations
-- for the plan; a strategy API that
-- user strategies written in Lua share with the built-in one. Nothing here starts a process: the
-- caller gives `measure` (tp.experiment runs the rung's runs through tp.campaign; bench/search
-- replays recorded throughputs). The intervals it ranks by are tp.plan._search_ci's.
-- docs/search.md is the guide.
local ci = require('tp.plan._search_ci')

local M = {}

--- Defaults of a search spec.
M.DEFAULTS = { eta = 3, level = 0.95, budget = 0.4, metric = 'tokens_per_second' }
--- The metrics a candidate can be ranked by (higher is better).
M.METRICS = { tokens_per_second = true, tokens_per_second_per_gpu = true }
-- Fewest iterations of a rung: MSER-5 needs two batches of 5 step times after the warm-up.
M.MIN_RUNG_ITERS = 10

local FIELDS = {
  strategy = true, eta = true, min_iters = true, max_iters = true, budget = true, level = true,
  metric = true, rank = true,
}

-- Raised by ctx:measure when the runs were interrupted (SIGINT, SIGTERM): the search stops
-- where it is and resumes from the campaign journal next time.
local INTERRUPTED = setmetatable({}, { __tostring = function()
  return 'search interrupted'
end })

local function misuse(fmt, ...)
  error('tp.plan.search: ' .. string.format(fmt, ...), 0)
end

---@class tp.plan.search.Spec
---@field strategy? 'halving'|fun(ctx: table): table? the built-in successive halving (default)
---  or a function of the search context (docs/search.md, "Your own strategy")
---@field eta? integer keep the better 1/eta of the candidates at each rung (default 3)
---@field min_iters? integer iterations of rung 0 (default max(10, ceil(max_iters / eta^2)):
---  three rungs)
---@field max_iters? integer iterations of the last rung (default the recipe's training.iters)
---@field budget? number the most GPU-time the search may spend, as a fraction of the full
---  grid's (default 0.4); uncertain rankings keep more candidates only within it
---@field level? number confidence level of the intervals (default 0.95)
---@field metric? string 'tokens_per_second' (default) or 'tokens_per_second_per_gpu'
---@field rank? fun(c: table, spec: table): number, number?, number? a candidate's estimate, and
---  the low and high ends of its interval (higher is better); default the metric with its
---  batch-means CI (M.default_rank)

--- Checks a search spec ('halving' or a table) and returns it normalized (defaults filled,
--- except max_iters and min_iters when they depend on the recipe: M.resolve fills them).
--- Raises 'tp.plan.search: <field>: <problem>' on a bad spec.
---```lua
---local s = require('tp.plan.search').normalize({ strategy = 'halving', eta = 2, min_iters = 20 })
---```
---@param spec string|tp.plan.search.Spec
---@return table
function M.normalize(spec)
  if type(spec) == 'string' or type(spec) == 'function' then
    spec = { strategy = spec }
  end
  if type(spec) ~= 'table' then
    misuse("'halving' or a table { strategy =, eta =, ... } expected, got %s", type(spec))
  end
  for k in pairs(spec) do
    if not FIELDS[k] then
      misuse("unknown field '%s' (strategy, eta, min_iters, max_iters, budget, level, metric, "
        .. 'rank)', tostring(k))
    end
  end
  local s = { strategy = spec.strategy or 'halving' }
  if s.strategy ~= 'halving' and type(s.strategy) ~= 'function' then
    misuse("strategy: 'halving' or a function(ctx) expected, got %s", type(s.strategy) ==
      'string' and ("'" .. s.strategy .. "'") or type(s.strategy))
  end
  s.name = type(s.strategy) == 'function' and 'custom' or s.strategy
  s.eta = spec.eta or M.DEFAULTS.eta
  if math.type(s.eta) ~= 'integer' or s.eta < 2 then
    misuse('eta: a whole number >= 2 expected, got %s', tostring(spec.eta))
  end
  for _, k in ipairs({ 'min_iters', 'max_iters' }) do
    local v = spec[k]
    if v ~= nil and (math.type(v) ~= 'integer' or v < M.MIN_RUNG_ITERS) then
      misuse('%s: a whole number >= %d expected (MSER-5 needs two batches of 5 step times), '
        .. 'got %s', k, M.MIN_RUNG_ITERS, tostring(v))
    end
    s[k] = v
  end
  if s.min_iters and s.max_iters and s.min_iters > s.max_iters then
    misuse('min_iters (%d) is more than max_iters (%d)', s.min_iters, s.max_iters)
  end
  s.budget = spec.budget or M.DEFAULTS.budget
  if type(s.budget) ~= 'number' or not (s.budget > 0 and s.budget <= 1) then
    misuse('budget: a fraction of the full grid in (0, 1] expected, got %s', tostring(spec.budget))
  end
  s.level = spec.level or M.DEFAULTS.level
  if type(s.level) ~= 'number' or not (s.level > 0 and s.level < 1) then
    misuse('level: a confidence level in (0, 1) expected, got %s', tostring(spec.level))
  end
  s.metric = spec.metric or M.DEFAULTS.metric
  if not M.METRICS[s.metric] then
    misuse("metric: 'tokens_per_second' or 'tokens_per_second_per_gpu' expected, got %s",
      tostring(s.metric))
  end
  if spec.rank ~= nil and type(spec.rank) ~= 'function' then
    misuse('rank: a function(candidate) -> estimate, lo, hi expected, got %s', type(spec.rank))
  end
  s.rank = spec.rank
  return s
end

--- Fills the iterations that depend on the recipe: max_iters (default `iters`, the recipe's
--- training.iters) and min_iters (default max(10, ceil(max_iters / eta^2))). Returns a copy, or
--- nil and a message when the recipe's iterations are too few for a search.
---@param s table normalized spec
---@param iters integer the recipe's training.iters
---@return table|nil spec
---@return string? err
function M.resolve(s, iters)
  local out = {}
  for k, v in pairs(s) do
    out[k] = v
  end
  out.max_iters = s.max_iters or iters
  if math.type(out.max_iters) ~= 'integer' or out.max_iters < M.MIN_RUNG_ITERS then
    return nil, string.format('max_iters: %s iterations, a search needs at least %d',
      tostring(out.max_iters), M.MIN_RUNG_ITERS)
  end
  out.min_iters = s.min_iters
    or math.max(M.MIN_RUNG_ITERS, math.ceil(out.max_iters / (s.eta * s.eta)))
  if out.min_iters > out.max_iters then
    return nil, string.format('min_iters (%d) is more than max_iters (%d)', out.min_iters,
      out.max_iters)
  end
  return out
end

--- The rungs of successive halving for `n` candidates: `{ {rung = 0, budget =, iters =,
--- candidates =}, ... }`. A candidate's budget at rung r is min_iters x eta^r measured
--- iterations (up to max_iters); its runs pool, so rung r runs each candidate left for the
--- difference, `iters` (at least M.MIN_RUNG_ITERS); 1/eta of the candidates (rounded up) go on
--- each time, and the last rung brings the candidates left to max_iters.
---@param s table resolved spec
---@param n integer candidates
---@return table[]
function M.schedule(s, n)
  local rungs = {}
  local budget, count, r, done = s.min_iters, n, 0, 0
  while true do
    local iters = math.max(M.MIN_RUNG_ITERS, budget - done)
    rungs[#rungs + 1] = { rung = r, budget = done + iters, iters = iters, candidates = count }
    done = done + iters
    if done >= s.max_iters or count <= 1 and r > 0 then
      break
    end
    budget = math.min(s.max_iters, budget * s.eta)
    count = math.max(1, math.ceil(count / s.eta))
    r = r + 1
  end
  return rungs
end

--- The budget of a search over `candidates` ({gpus =} each), before anything ran: the
--- GPU-iterations of the nominal schedule and of the full grid (every candidate max_iters),
--- their ratio, and the cap (s.budget of the grid). While it runs, the search keeps within
--- s.budget of the grid's GPU-time as estimated from what it measured (Ctx:cap).
---@param s table resolved spec
---@param candidates table[]
---@return table {rungs, nominal, grid, fraction, cap}
function M.budget(s, candidates)
  local n = #candidates
  local gpus = 0
  for _, c in ipairs(candidates) do
    gpus = gpus + (c.gpus or 1)
  end
  local avg = n > 0 and gpus / n or 1
  local grid = gpus * s.max_iters
  local rungs = M.schedule(s, n)
  local nominal = 0
  for i, r in ipairs(rungs) do
    -- Rung 0 runs every candidate with its own GPUs; later ones the average candidate.
    local v = i == 1 and gpus * r.iters or r.candidates * avg * r.iters
    r.gpu_iters = math.tointeger(v) or v
    nominal = nominal + r.gpu_iters
  end
  return { rungs = rungs, nominal = math.tointeger(nominal) or nominal, grid = grid,
    fraction = grid > 0 and nominal / grid or 0, cap = s.budget * grid }
end

--- Whether the best candidate is separated from the runner-up (the candidate with the next
--- highest estimate, measured at any rung) at the intervals' level: the runner-up's interval
--- lies wholly below the best's (its high end under the best's low end), the criterion a rung
--- drops a candidate as worse by. Returns nil when there is no best or no other estimate, else
--- {candidate (the runner-up), estimate, lo, hi, separated, overlapping (how many others'
--- intervals reach the best's low end)}. Candidates are {estimate, lo, hi (nil: unbounded),
--- and `label` or `candidate`}.
---@param best table|nil
---@param candidates table[]
---@return table|nil
function M.separation(best, candidates)
  if not best or type(best.estimate) ~= 'number' then
    return nil
  end
  local runner, overlapping = nil, 0
  for _, c in ipairs(candidates or {}) do
    if c ~= best and type(c.estimate) == 'number' and (c.label or c.candidate)
      ~= (best.label or best.candidate) then
      if not runner or c.estimate > runner.estimate then
        runner = c
      end
      if (c.hi or math.huge) >= (best.lo or -math.huge) then
        overlapping = overlapping + 1
      end
    end
  end
  if not runner then
    return nil
  end
  local hi = runner.hi or math.huge
  return { candidate = runner.label or runner.candidate, estimate = runner.estimate,
    lo = runner.lo, hi = hi ~= math.huge and hi or nil,
    separated = type(best.lo) == 'number' and hi < best.lo, overlapping = overlapping }
end

-- ---------------------------------------------------------------------------------------------
-- Estimates.

-- The intervals (tp.plan._search_ci).
M.t_quantile = ci.t_quantile
M.between_runs = ci.between_runs
M.step_time_ci = ci.step_time_ci

--- The default ranking of a candidate: its steady-state tokens/s (tokens per step / mean step
--- time; per GPU with metric 'tokens_per_second_per_gpu') with the interval the step-time
--- interval gives. Returns estimate, lo, hi (hi is math.huge when unbounded).
---@param c table a candidate with `runs` ({step_times, first?}) and tokens_per_step, gpus
---@param s table spec (metric, level)
---@return number|nil estimate
---@return number|string lo_or_err
---@return number? hi
function M.default_rank(c, s)
  local est, err = M.step_time_ci(c.runs, s.level, c.between)
  if not est then
    return nil, err
  end
  local tokens = c.tokens_per_step
  if s.metric == 'tokens_per_second_per_gpu' then
    tokens = tokens / (c.gpus or 1)
  end
  local hi = est.lo > 0 and tokens / est.lo or math.huge
  return tokens / est.mean, tokens / est.hi, hi
end

-- ---------------------------------------------------------------------------------------------
-- The search context (the API of strategies) and the driver.

local Ctx = {}
Ctx.__index = Ctx

local function fmt_num(v)
  if v == math.huge then
    return 'inf'
  end
  return string.format('%.6g', v)
end
M.fmt_num = fmt_num

-- Ranks `list` by estimate (best first; a candidate without one last), the order stable.
local function ranked(list)
  local out = table.move(list, 1, #list, 1, {})
  table.sort(out, function(a, b)
    local ea, eb = a.estimate or -math.huge, b.estimate or -math.huge
    if ea ~= eb then
      return ea > eb
    end
    return a.index < b.index
  end)
  return out
end

-- The GPU-seconds of a measured run: the caller's figure, else GPUs x the sum of its step times.
local function run_gpu_seconds(c, r)
  if type(r.gpu_seconds) == 'number' then
    return r.gpu_seconds
  end
  local t = 0
  for _, x in ipairs(r.step_times or {}) do
    t = t + x
  end
  return (c.gpus or 1) * t
end

--- Runs `list` (candidates) for `iters` more iterations each, as one rung: the caller's
--- measure adds a run (or several: repeats) to each candidate, whose estimate is then made
--- again over all its runs (steady-state step times pooled). Returns the rung ({rung, iters,
--- budget, candidates, ranking, kept, dropped}); raises when the runs were interrupted (the
--- search stops there; the campaign journal resumes it).
---@param list table[]
---@param iters integer
---@return table rung
function Ctx:measure(list, iters)
  local rung = { rung = #self.rungs, iters = iters, candidates = {}, kept = {}, dropped = {} }
  local out = self._measure(list, iters, rung.rung, self)
  if out == nil or out.interrupted then
    error(INTERRUPTED, 0)
  end
  for _, c in ipairs(list) do
    rung.candidates[#rung.candidates + 1] = c.key
    local m = out[c.key] or { failed = 'not measured' }
    local before = #c.runs
    for _, r in ipairs(m.runs or {}) do
      c.runs[#c.runs + 1] = r
      local gs = run_gpu_seconds(c, r)
      c.gpu_seconds = (c.gpu_seconds or 0) + gs
      self.spent_gpu_seconds = self.spent_gpu_seconds + gs
      self.spent_gpu_iters = self.spent_gpu_iters + (c.gpus or 1) * #(r.step_times or {})
    end
    if #c.runs > before then
      c.iters = (c.iters or 0) + iters
    end
    c.failed = m.failed
  end
  -- The run-to-run variation, from every candidate measured more than once so far (those
  -- dropped too: their runs still tell it), goes into each interval.
  self.between = M.between_runs(self.candidates)
  rung.between = self.between
  for _, c in ipairs(list) do
    c.between = self.between
    c.estimate, c.lo, c.hi = nil, nil, nil
    if not c.failed then
      local est = M.step_time_ci(c.runs, self.spec.level)
      if est then
        -- What a run costs: its steady steps, plus the rest (start-up, warm-up) per run.
        c.step = est.mean
        local steps = 0
        for _, r in ipairs(c.runs) do
          steps = steps + #(r.step_times or {})
        end
        c.overhead = math.max(0, (c.gpu_seconds - (c.gpus or 1) * steps * est.mean) / #c.runs)
      end
      local rank = self.spec.rank or M.default_rank
      local e, lo, hi = rank(c, self.spec)
      if type(e) == 'number' and e == e then
        c.estimate, c.lo, c.hi = e, (type(lo) == 'number' and lo or e),
          (type(hi) == 'number' and hi or e)
      else
        c.failed = type(lo) == 'string' and lo or 'no estimate'
      end
    end
  end
  self.rungs[#self.rungs + 1] = rung
  rung.budget = 0
  for _, c in ipairs(list) do
    rung.budget = math.max(rung.budget, c.iters or 0)
  end
  rung.ranking = {}
  for _, c in ipairs(ranked(list)) do
    rung.ranking[#rung.ranking + 1] = { key = c.key, estimate = c.estimate, lo = c.lo,
      hi = c.hi, failed = c.failed, iters = c.iters }
  end
  return rung
end

--- Drops a candidate at the current rung, with the reason and the figures behind it.
---@param c table candidate
---@param reason string 'worse', 'budget', 'failed', or the strategy's own word
---@param detail? string
---@param threshold? number
function Ctx:drop(c, reason, detail, threshold)
  local rung = self.rungs[#self.rungs]
  c.dropped = { rung = rung and rung.rung or 0, reason = reason, detail = detail }
  if rung then
    rung.dropped[#rung.dropped + 1] = { key = c.key, reason = reason, detail = detail,
      estimate = c.estimate, lo = c.lo, hi = c.hi, threshold = threshold }
  end
end

--- Marks a candidate kept at the current rung (it goes on), with why.
---@param c table
---@param why string
function Ctx:keep(c, why)
  local rung = self.rungs[#self.rungs]
  if rung then
    rung.kept[#rung.kept + 1] = { key = c.key, why = why, estimate = c.estimate, lo = c.lo,
      hi = c.hi }
  end
end

--- The candidates not dropped, in their original order.
---@return table[]
function Ctx:alive()
  local out = {}
  for _, c in ipairs(self.candidates) do
    if not c.dropped then
      out[#out + 1] = c
    end
  end
  return out
end

-- A run of `iters` iterations of candidate c, in GPU-seconds, from what was measured (the
-- average candidate's figures for one not measured yet).
function Ctx:run_cost(c, iters)
  if c.step then
    return (c.gpus or 1) * iters * c.step + (c.overhead or 0)
  end
  local n, step, overhead = 0, 0, 0
  for _, o in ipairs(self.candidates) do
    if o.step then
      n, step, overhead = n + 1, step + o.step, overhead + (o.overhead or 0)
    end
  end
  if n == 0 then
    return (c.gpus or 1) * iters
  end
  return (c.gpus or 1) * iters * step / n + overhead / n
end

--- The full grid's GPU-time as estimated from the measurements: every candidate one run of
--- max_iters (a failed candidate: what it cost).
---@return number gpu_seconds
function Ctx:grid_estimate()
  local total = 0
  for _, c in ipairs(self.candidates) do
    if c.failed and not c.step then
      total = total + (c.gpu_seconds or 0)
    else
      total = total + self:run_cost(c, self.spec.max_iters)
    end
  end
  return total
end

--- The GPU-seconds the search may spend: spec.budget of the grid's estimated GPU-time.
---@return number
function Ctx:cap()
  return self.spec.budget * self:grid_estimate()
end

--- What the rest of the schedule would cost, in GPU-seconds, if `list` went on from `done`
--- measured iterations to a budget of `budget`: its candidates' runs, then the best 1/eta of
--- them (by estimate) at each later rung, up to max_iters.
---@param list table[]
---@param done integer
---@param budget integer
---@return number
function Ctx:cost_from(list, done, budget)
  local s = self.spec
  local total = 0
  list = ranked(list)
  while true do
    local iters = math.max(M.MIN_RUNG_ITERS, budget - done)
    for _, c in ipairs(list) do
      total = total + self:run_cost(c, iters)
    end
    done = done + iters
    if done >= s.max_iters or #list <= 1 then
      return total
    end
    budget = math.min(s.max_iters, budget * s.eta)
    list = table.move(list, 1, math.max(1, math.ceil(#list / s.eta)), 1, {})
  end
end

--- The built-in strategy: successive halving with confident drops. Rung r brings every
--- candidate left to min_iters x eta^r measured iterations (its runs pooled); the candidates
--- are ranked, the best ceil(n / eta) go on, and so does every other candidate whose interval's
--- high end reaches the lowest low end of those (it is not worse with confidence), as far as
--- the rest of the schedule stays within the budget; a failed run drops its candidate. At
--- max_iters the best estimate is the answer.
---@param ctx table
---@return table best candidate
function M.halving(ctx)
  local s = ctx.spec
  local alive = ctx:alive()
  local budget, done = s.min_iters, 0
  while true do
    local iters = math.max(M.MIN_RUNG_ITERS, budget - done)
    ctx:measure(alive, iters)
    done = done + iters
    local order = ranked(alive)
    local ok = {}
    for _, c in ipairs(order) do
      if c.failed then
        ctx:drop(c, 'failed', c.failed)
      else
        ok[#ok + 1] = c
      end
    end
    if done >= s.max_iters or #ok <= 1 then
      for i, c in ipairs(ok) do
        ctx:keep(c, i == 1 and 'best' or 'measured to the end')
      end
      return ok[1]
    end
    budget = math.min(s.max_iters, budget * s.eta)
    local k = math.max(1, math.ceil(#ok / s.eta))
    local threshold = math.huge
    for i = 1, k do
      threshold = math.min(threshold, ok[i].lo)
    end
    local keep = {}
    for i, c in ipairs(ok) do
      if i <= k then
        keep[#keep + 1] = { c = c, why = string.format('among the best %d of %d', k, #ok) }
      elseif c.hi < threshold then
        ctx:drop(c, 'worse', string.format('its high end %s is below %s, the lowest low end of '
          .. 'those kept', fmt_num(c.hi), fmt_num(threshold)), threshold)
      else
        keep[#keep + 1] = { c = c, why = string.format('not worse with confidence: its high end '
          .. '%s reaches %s, the lowest low end of the best %d', fmt_num(c.hi), fmt_num(threshold),
          k) }
      end
    end
    -- Uncertain candidates go on only while the rest of the schedule stays within the budget.
    local left = ctx:cap() - ctx.spent_gpu_seconds
    local function list_of(entries)
      local out = {}
      for i, e in ipairs(entries) do
        out[i] = e.c
      end
      return out
    end
    while #keep > k and ctx:cost_from(list_of(keep), done, budget) > left do
      local last = table.remove(keep)
      ctx:drop(last.c, 'budget', string.format('its high end %s reaches %s, the lowest low end '
        .. 'of the best %d, but measuring it further would exceed the budget (%.0f%% of the '
        .. "grid's GPU-time)", fmt_num(last.c.hi), fmt_num(threshold), k, 100 * s.budget),
        threshold)
    end
    alive = {}
    for _, e in ipairs(keep) do
      ctx:keep(e.c, e.why)
      alive[#alive + 1] = e.c
    end
    -- Back to the sweep's order, so that the runs start in it.
    table.sort(alive, function(a, b)
      return a.index < b.index
    end)
  end
end

--- Runs a search. `candidates` are {key (unique), gpus, tokens_per_step, ...}; `measure(list,
--- iters, rung, ctx)` runs each candidate of `list` for `iters` iterations and returns
--- `{ [key] = { runs = { {step_times =, first? =, gpu_seconds? =} ... }, failed = reason? } }`
--- (a run's GPU-seconds default to gpus x the sum of its step times), or nil / {interrupted =
--- true} when interrupted. Returns the result: {best (a candidate or nil), rungs, candidates,
--- spent_gpu_seconds, spent_gpu_iters, grid_gpu_seconds, budget, interrupted}. The strategy is
--- s.strategy: 'halving' (M.halving) or a function(ctx) that returns the best candidate.
---@param s table normalized and resolved spec
---@param candidates table[]
---@param measure function
---@return table result
function M.run(s, candidates, measure)
  if type(measure) ~= 'function' then
    misuse('run: measure must be a function(list, iters, rung)')
  end
  local seen = {}
  for i, c in ipairs(candidates) do
    if c.key == nil or seen[c.key] then
      misuse('run: candidates[%d]: a unique key expected', i)
    end
    seen[c.key] = true
    c.index = c.index or i
    c.runs = c.runs or {}
  end
  local b = M.budget(s, candidates)
  local ctx = setmetatable({
    spec = s, candidates = candidates, rungs = {}, _measure = measure,
    spent_gpu_seconds = 0, spent_gpu_iters = 0,
  }, Ctx)
  local strategy = s.strategy == 'halving' and M.halving or s.strategy
  local ok, best = pcall(strategy, ctx)
  local result = { rungs = ctx.rungs, candidates = candidates, budget = b,
    spent_gpu_seconds = ctx.spent_gpu_seconds, spent_gpu_iters = ctx.spent_gpu_iters,
    grid_gpu_seconds = ctx:grid_estimate() }
  if not ok then
    if best == INTERRUPTED then
      result.interrupted = true
      return result
    end
    error(best, 0)
  end
  if best ~= nil and (type(best) ~= 'table' or not seen[best.key]) then
    misuse('the strategy must return one of the candidates (or nil), got %s', type(best))
  end
  result.best = best
  return result
end

-- ---------------------------------------------------------------------------------------------
-- The plan of a search.

local function thousands(v)
  local s = string.format('%.0f', v)
  local out = s:reverse():gsub('(%d%d%d)', '%1,'):reverse()
  return (out:gsub('^,', ''))
end

--- The lines `tplua plan` prints for a platform that searches (`info` as tp.experiment plans
--- it: {spec, candidates, rungs, budget}): the strategy, each rung with its candidates and
--- iterations, and the budget against the full grid.
---@param info table
---@return string[]
function M.plan_lines(info)
  local s, b = info.spec, info.budget
  local out = {}
  if s.name == 'halving' then
    out[1] = string.format('search: successive halving over %d candidates, eta %d (the better '
      .. '1/%d go on at each rung), ranked by %s with %g%% intervals; the runs below are rung '
      .. "0's, the later rungs' are chosen by what it measures", #info.candidates, s.eta, s.eta,
      s.metric == 'tokens_per_second' and 'tokens/s' or 'tokens/s/GPU', s.level * 100)
  else
    out[1] = string.format('search: a strategy of the recipe over %d candidates; the runs below '
      .. "are rung 0's (%d iterations), the strategy chooses the rest", #info.candidates,
      b.rungs[1].iters)
  end
  if s.name == 'halving' then
    for i, r in ipairs(b.rungs) do
      out[#out + 1] = string.format('  rung %d: %s%d candidate%s x %d iterations (%d in all)  '
        .. '%s GPU-iterations', r.rung, i > 1 and 'at least ' or '', r.candidates,
        r.candidates == 1 and '' or 's', r.iters, r.budget, thousands(r.gpu_iters))
    end
    out[#out + 1] = string.format('  budget: %s GPU-iterations = %.0f%% of the full grid (%d x '
      .. '%d iterations: %s); at most %.0f%% of its GPU-time when rankings are not confident',
      thousands(b.nominal), 100 * b.fraction, #info.candidates, s.max_iters, thousands(b.grid),
      100 * s.budget)
    out[#out + 1] = '    (GPU-iterations: measured iterations x GPUs, each run\'s start-up and '
      .. 'warm-up excluded; GPU-time: GPUs x wall time, start-up included, the grid\'s estimated '
      .. 'from what the runs measure; the nominal schedule is never cut)'
  end
  return out
end

--- The search part of `tplua plan --json`: strategy, settings, rungs, budget (plain data).
---@param info table
---@return table
function M.plan_data(info)
  local s, b = info.spec, info.budget
  local rungs = {}
  for i, r in ipairs(b.rungs) do
    rungs[i] = { rung = r.rung, iters = r.iters, budget = r.budget, candidates = r.candidates,
      gpu_iters = r.gpu_iters }
  end
  local json = require('tp.json')
  return {
    strategy = s.name, eta = s.eta, min_iters = s.min_iters, max_iters = s.max_iters,
    budget = s.budget, level = s.level, metric = s.metric, candidates = #info.candidates,
    rungs = json.array(rungs), nominal_gpu_iters = b.nominal, grid_gpu_iters = b.grid,
    fraction = b.fraction,
  }
end

M.Ctx = Ctx

return M
