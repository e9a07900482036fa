-- tp.analyse._trace_checks: the warnings that keep a trace's figures from misleading: in one
-- trace (steps without GPU ops or ops in few of many steps, one op holding most of a step, ops
-- launched through graphs, a multi-rank trace without communication, a first step far longer
-- than the rest), across the files given as one run (traces of different runs mixed), between
-- two runs set side by side (one profiled step, not the same workload), and between a run's log
-- and its traces (step times far apart). docs/trace.md, "Warnings".

local M = {}

local function ms(ns)
  return string.format('%.3f', ns / 1e6)
end

local function median(xs)
  local s = {}
  for i, x in ipairs(xs) do
    s[i] = x
  end
  table.sort(s)
  local n = #s
  if n == 0 then
    return nil
  end
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

M.median = median

local function short(s, n)
  return #s > n and (s:sub(1, n - 3) .. '...') or s
end

-- "12, 13, 14" (the first eight, then how many more).
local function list_text(xs)
  local out = {}
  for i = 1, math.min(8, #xs) do
    out[i] = tostring(xs[i])
  end
  if #xs > 8 then
    out[#out + 1] = string.format('and %d more', #xs - 8)
  end
  return table.concat(out, ', ')
end

--- The thresholds the checks use (documented in docs/trace.md).
M.LIMITS = {
  long_op = 0.5,        -- one op over this share of a step window
  few_steps = 1 / 3,    -- 90% of the ops in at most this share of the steps (3 steps or more)
  first_step = 2,       -- the first window over this many times the median of the other steady
  overlap = 0.5,        -- kernel (or op) time shared by two traces below this share
  model = 1.5,          -- modelled FLOPs (or GPU ops) per step this many times apart
  step_time = 2,        -- the log's step time and the traced step this many times apart
  time_apart = 60e9,    -- ns between the profiles of files given as one run
}

--- The warnings of one trace: `a` its analysis (steps, steady, info, world_size, classes),
--- `cpu_steps` the engine's profiler steps (each with its `ops`), `kinds` the kind of each
--- class. Returns a list of { code =, message = }.
---@param a table
---@param cpu_steps table[]
---@return table[]
function M.trace(a, cpu_steps)
  local out = {}
  local function warn(code, msg)
    out[#out + 1] = { code = code, message = a.path .. ': ' .. msg }
  end
  if not a.gpu then
    return out
  end
  -- Steps without GPU ops, or the ops in a few of many steps.
  if not a.info.stepless and #cpu_steps > 0 then
    local empty, counts, total = {}, {}, 0
    for _, s in ipairs(cpu_steps) do
      if s.ops == 0 then
        empty[#empty + 1] = s.step
      end
      counts[#counts + 1] = s.ops
      total = total + s.ops
    end
    table.sort(counts, function(x, y)
      return x > y
    end)
    local held, k = 0, 0
    while k < #counts and held < 0.9 * total do
      k = k + 1
      held = held + counts[k]
    end
    if #cpu_steps >= 3 and k <= math.floor(M.LIMITS.few_steps * #cpu_steps) then
      warn('few_steps', string.format('the GPU ops fall in few of the profiled steps: %d of %d '
        .. 'steps hold 90%% of them%s: the mean step is not the run\'s (work launched outside '
        .. 'the steps, or steps that differ)', k, #cpu_steps, #empty > 0 and
        string.format(', and steps %s have none', list_text(empty)) or ''))
    elseif #empty > 0 then
      warn('empty_step', string.format('profiler step%s %s ha%s no GPU op: %s GPU work ran '
        .. 'outside the steps (or not on the GPU), and %s no breakdown', #empty > 1 and 's' or '',
        list_text(empty), #empty > 1 and 've' or 's', #empty > 1 and 'their' or 'its',
        #empty > 1 and 'they have' or 'it has'))
    end
  end
  -- One op holding more than half of a step.
  local long = {}
  for _, s in ipairs(a.steady) do
    if s.longest and s.window > 0 and s.longest.dur > M.LIMITS.long_op * s.window then
      long[#long + 1] = s
    end
  end
  if #long > 0 then
    local worst = long[1]
    for _, s in ipairs(long) do
      if s.longest.dur / s.window > worst.longest.dur / worst.window then
        worst = s
      end
    end
    local steps = {}
    for i, s in ipairs(long) do
      steps[i] = s.step
    end
    warn('long_op', string.format('one op holds more than half of step%s %s: %s runs %s ms of '
      .. 'step %s\'s %s ms (%.0f%%); the step is that op\'s time, and the classes and idle '
      .. 'describe only the rest', #long > 1 and 's' or '', list_text(steps),
      short(worst.longest.name or '?', 60), ms(worst.longest.dur), tostring(worst.step),
      ms(worst.window), 100 * worst.longest.dur / worst.window))
  end
  -- Graph launches.
  if (a.info.graph_ops or 0) > 0 then
    warn('graph', string.format('%d GPU ops ran from %d CUDA/HIP graph launches: each graph '
      .. 'replay is one launch, so these ops cannot be attributed to the CPU ops that recorded '
      .. 'them (the op table and host-side figures see the graph launch only)', a.info.graph_ops,
      a.info.graph_launches))
  end
  -- A rank of a multi-rank run with no communication kernel.
  if (a.world_size or 1) > 1 then
    local comm = 0
    for _, c in ipairs(a.classes) do
      if c.kind == 'communication' then
        for _, s in ipairs(a.steps) do
          comm = comm + s.class[c.name].count
        end
      end
    end
    if comm == 0 then
      warn('no_comm', string.format('rank %s of %d, but no communication kernel in its steps: '
        .. 'the collectives were not traced (or ran elsewhere), so communication and its overlap '
        .. 'read 0', tostring(a.rank or '?'), a.world_size))
    end
  end
  -- A first step far longer than the rest: the profiler's own start-up.
  if #a.steady >= 2 then
    local rest = {}
    for i = 2, #a.steady do
      rest[#rest + 1] = a.steady[i].window
    end
    local med = median(rest)
    local first = a.steady[1]
    if med and med > 0 and first.window > M.LIMITS.first_step * med then
      warn('first_step', string.format('the first profiled step (%s) took %s ms on the GPU '
        .. 'against a median of %s ms for the other steady steps (%.1fx): profiler start-up or '
        .. 'warm-up; it weighs on the mean (profile later steps, or look at one with --step)',
        tostring(first.step), ms(first.window), ms(med), first.window / med))
    end
  end
  return out
end

-- Time per kernel name of an analysis (its steps' ops).
local function kernel_share(a, b)
  local ta, tb, both_a, both_b = 0, 0, 0, 0
  for n, v in pairs(a.kernel_time or {}) do
    ta = ta + v
    if b.kernel_time and b.kernel_time[n] then
      both_a = both_a + v
    end
  end
  for n, v in pairs(b.kernel_time or {}) do
    tb = tb + v
    if a.kernel_time and a.kernel_time[n] then
      both_b = both_b + v
    end
  end
  if ta == 0 or tb == 0 then
    return nil
  end
  return math.min(both_a / ta, both_b / tb)
end

M.kernel_share = kernel_share

local function device_of(a)
  local d = a.devices and a.devices[1]
  return type(d) == 'table' and type(d.name) == 'string' and d.name or nil
end

local function base_of(a)
  local meta = a.info and a.info.meta or {}
  local v = tonumber(meta.baseTimeNanoseconds)
  return v and math.tointeger(v) or nil
end

-- The wall-clock interval (ns since the epoch) of a trace's steps, when its start is known.
local function wall_span(a)
  local base = base_of(a)
  if not base or #a.steps == 0 then
    return nil
  end
  local first, last = a.steps[1], a.steps[#a.steps]
  return base + first.start, base + last.start + last.window
end

local function utc(ns)
  return os.date('!%Y-%m-%d %H:%M:%S UTC', ns // 1000000000)
end

--- The warnings of the files given as the ranks of one run, when they are not: different world
--- sizes, devices, models (little shared kernel time) or times, or several files claiming one
--- rank. Returns the list of { code =, message = } and whether the files are mixed.
---@param ranks table[] analyses
---@return table[], boolean
function M.run(ranks)
  local out = {}
  local mixed = false
  local function warn(code, msg)
    out[#out + 1] = { code = code, message = msg }
    mixed = true
  end
  if #ranks < 2 then
    return out, false
  end
  local function names(list)
    local p = {}
    for i, a in ipairs(list) do
      p[i] = a.path
    end
    return table.concat(p, ', ')
  end
  -- Several files claiming the same rank.
  local by_rank, order = {}, {}
  for _, a in ipairs(ranks) do
    if a.rank then
      if not by_rank[a.rank] then
        by_rank[a.rank] = {}
        order[#order + 1] = a.rank
      end
      table.insert(by_rank[a.rank], a)
    end
  end
  table.sort(order)
  for _, r in ipairs(order) do
    if #by_rank[r] > 1 then
      warn('same_rank', string.format('%d files claim rank %d: %s: they are not the ranks of '
        .. 'one run', #by_rank[r], r, names(by_rank[r])))
    end
  end
  -- Different world sizes, devices.
  local function differ(what, get, code)
    local seen, keys = {}, {}
    for _, a in ipairs(ranks) do
      local v = get(a)
      if v ~= nil then
        local k = tostring(v)
        if not seen[k] then
          seen[k] = {}
          keys[#keys + 1] = k
        end
        table.insert(seen[k], a)
      end
    end
    if #keys > 1 then
      local parts = {}
      for i, k in ipairs(keys) do
        parts[i] = string.format('%s %s in %s', what, k, names(seen[k]))
      end
      warn(code, 'the files are not the ranks of one run: ' .. table.concat(parts, '; '))
    end
  end
  differ('world size', function(a)
    return a.world_size
  end, 'world_size')
  differ('device', device_of, 'device')
  -- Little shared kernel time between files on the same device: another model.
  local first = ranks[1]
  for i = 2, #ranks do
    local a = ranks[i]
    if device_of(a) == device_of(first) and a.gpu and first.gpu then
      local share = kernel_share(first, a)
      if share and share < M.LIMITS.overlap then
        warn('model', string.format('the files are not the ranks of one run: %s and %s share '
          .. 'only %.0f%% of their kernel time by kernel name (another model or configuration)',
          first.path, a.path, 100 * share))
        break
      end
    end
  end
  -- Profiled at different times.
  local spans = {}
  for _, a in ipairs(ranks) do
    local s, e = wall_span(a)
    if s then
      spans[#spans + 1] = { a = a, s = s, e = e }
    end
  end
  if #spans > 1 then
    local lo, hi = spans[1], spans[1]
    for _, x in ipairs(spans) do
      if x.s > lo.s then
        lo = x  -- the latest start
      end
      if x.e < hi.e then
        hi = x  -- the earliest end
      end
    end
    if lo.s - hi.e > M.LIMITS.time_apart then
      warn('time', string.format('the files are not the ranks of one run: %s was profiled at '
        .. '%s, %.0f s after %s ended (%s)', lo.a.path, utc(lo.s), (lo.s - hi.e) / 1e9,
        hi.a.path, utc(hi.e)))
    end
  end
  return out, mixed
end

-- The analyses of a side (M.analyse's run, or one analysis).
local function ranks_of(x)
  return x.ranks or { x }
end

-- Modelled GFLOP per step of an op table (nil without one).
local function gflop_per_step(t)
  if not t or not t.rows or (t.steps or 0) == 0 then
    return nil
  end
  local s, any = 0, false
  for _, r in ipairs(t.rows) do
    if r.gflops and r.calls then
      s = s + r.gflops * r.calls
      any = true
    end
  end
  return any and s / t.steps or nil
end

M.gflop_per_step = gflop_per_step

--- The warnings of two runs set side by side (`e` the explanation, `labels` their names): a
--- side resting on one profiled step; not the same workload (world size, modelled FLOPs or GPU
--- ops per step, little shared op or kernel time). A list of { code =, message = }.
---@return table[]
function M.compare(a, b, e, labels)
  local out = {}
  local function warn(code, msg)
    out[#out + 1] = { code = code, message = msg }
  end
  for i, side in ipairs({ a, b }) do
    local one = {}
    for _, r in ipairs(ranks_of(side)) do
      if r.gpu and r.mean and r.mean.steps == 1 then
        one[#one + 1] = r
      end
    end
    if #one > 0 then
      warn('one_step', string.format('%s rests on one profiled step%s: one step may not be '
        .. 'typical (profile several steps)', labels[i], #ranks_of(side) > 1 and
        string.format(' (%d of its %d ranks)', #one, #ranks_of(side)) or ''))
    end
  end
  local ra, rb = ranks_of(a)[1], ranks_of(b)[1]
  local wa, wb = ra.world_size or 1, rb.world_size or 1
  if wa ~= wb then
    warn('world_size', string.format('not the same workload: %s ran on %d ranks, %s on %d '
      .. '(world size); the step times are not comparable as they stand', labels[1], wa,
      labels[2], wb))
  end
  local fa, fb = gflop_per_step(a.ops), gflop_per_step(b.ops)
  if fa and fb and fa > 0 and fb > 0 and math.max(fa / fb, fb / fa) > M.LIMITS.model then
    warn('model', string.format('not the same workload: %s does %.1f GFLOP per step in its '
      .. 'modelled ops, %s %.1f (%.1fx): a different model size, batch or sequence length',
      labels[1], fa, labels[2], fb, math.max(fa / fb, fb / fa)))
  elseif e.ops_per_step_a and e.ops_per_step_b and e.ops_per_step_a > 0 and
    e.ops_per_step_b > 0 and math.max(e.ops_per_step_a / e.ops_per_step_b,
      e.ops_per_step_b / e.ops_per_step_a) > 2 then
    warn('model', string.format('not the same workload?: %s launches %.0f GPU ops per step, '
      .. '%s %.0f', labels[1], e.ops_per_step_a, labels[2], e.ops_per_step_b))
  end
  local c = e.ops
  if c and (c.matched_a or c.matched_b) and (a.ops and (a.ops.linked or 0) > 0)
    and (b.ops and (b.ops.linked or 0) > 0) then
    local share = math.min(c.matched_a or 0, c.matched_b or 0)
    if share < M.LIMITS.overlap then
      warn('overlap', string.format('not the same workload?: the ops (name, shapes, dtype) '
        .. 'found on both sides hold only %.0f%% of %s\'s op time and %.0f%% of %s\'s',
        100 * (c.matched_a or 0), labels[1], 100 * (c.matched_b or 0), labels[2]))
    end
  elseif device_of(ra) and device_of(ra) == device_of(rb) then
    local share = kernel_share(ra, rb)
    if share and share < M.LIMITS.overlap then
      warn('overlap', string.format('not the same workload?: on the same GPU, the two share '
        .. 'only %.0f%% of their kernel time by kernel name', 100 * share))
    end
  end
  return out
end

--- The warning for a run whose logged step time and traced step are more than
--- M.LIMITS.step_time apart, or nil. `log_s`: the record's step time (s); `traced_ms`: the
--- mean GPU step of its traces.
---@param id string
---@param log_s number|nil
---@param traced_ms number|nil
---@return string|nil
function M.step_time(id, log_s, traced_ms)
  if type(log_s) ~= 'number' or type(traced_ms) ~= 'number' or log_s <= 0 or traced_ms <= 0 then
    return nil
  end
  local log_ms = log_s * 1e3
  local r = math.max(log_ms / traced_ms, traced_ms / log_ms)
  if r <= M.LIMITS.step_time then
    return nil
  end
  return string.format('%s: the log\'s step time (%.3f ms) and its traced step (%.3f ms) '
    .. 'differ by %.1fx: the traces are of other steps, of part of a step, or of another run',
    id, log_ms, traced_ms, r)
end

return M
