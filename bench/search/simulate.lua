-- Search benchmark: successive halving (tp.plan.search, the code a recipe's `search = 'halving'`
-- runs) over the 26 planned points of recipes/sweep_parallelism.lua (Llama 3.1 8B, 8 x H100,
-- Megatron-LM, 100 iterations each), with step times replayed from the throughput table below
-- with the noise and warm-up of recorded runs. 200 seeded repetitions; prints the GPU-time the
-- search spent against the full grid and how often it found the best configuration (or one
-- within 1% of it), with PASS/MISS goal lines.
--
--   tplua bench/search/simulate.lua [--reps N] [--seed S] [--eta E] [--budget F] [--launch-s S]
--                                   [--runner-up PCT]
--
-- THE TABLE IS A MODEL, NOT MEASUREMENTS. Its parts and their sources:
-- * Anchor: TP1 PP1 micro-batch 2 runs at 8,697.8 tokens/s/GPU (1.8838 s per step of 64 x 2048
--   tokens on 8 GPUs): 41% MFU of the H100's 989.4 TFLOP/s dense BF16, the lowest MFU of
--   NVIDIA's Megatron-LM weak-scaling study on H100 (NVIDIA/Megatron-LM README.md, "Weak Scaling
--   Results"), as the recorded runs of examples/runs/llama3.1-8b-identical use it
--   (examples/runs/generate.lua).
-- * Pipeline bubble: with p stages and m micro-batches per pipeline, the bubble adds (p - 1) / m
--   of the ideal step time (Narayanan et al., "Efficient Large-Scale Language Model Training on
--   GPU Clusters Using Megatron-LM", SC'21, arXiv:2104.04473, section 2.2.1), and each stage
--   boundary costs 2% for the point-to-point transfers (assumed).
-- * Tensor parallelism within a node (NVLink) costs its all-reduces: per-GPU throughput x0.95
--   at TP2, x0.88 at TP4, x0.78 at TP8 (the same paper's Fig. 13 shows throughput falling with
--   the tensor-parallel size; these factors are this model's assumption for an 8B model).
-- * Micro-batch size: x0.94 at 1, x1.00 at 2, x1.03 at 4 (larger GEMMs, the same paper's
--   Fig. 16 shows throughput rising with the micro-batch size; factors assumed).
--   The best point is then TP1 PP1 mbs 2; TP2 PP1 mbs 4 is within 2.2% of it.
-- * Noise and warm-up, per iteration, as the recorded runs (examples/runs/generate.lua): a
--   per-run offset (normal, 0.4%), per-iteration noise (normal, 0.8%; here made autocorrelated,
--   AR(1) with coefficient 0.3, as step times are), one iteration in 100 slower by 3-9%,
--   iteration 1 carrying the start-up (18-20 s), iterations 2 and 3 15% and 3% slower.
-- --runner-up PCT makes the search harder: the second-best configuration is set PCT% below the
-- best (1.5: a rival just outside the 1% that counts as found).
-- GPU-time is GPUs x the sum of the step times (start-up of iteration 1 included), plus
-- --launch-s seconds per run (process start before iteration 1; default 0, a second line shows
-- 60 s).
local tp = require('tp')
local search = require('tp.plan.search')
local sweep = require('tp.plan.sweep')

local args = require('tp.cli').parse(arg or {}, { reps = 'integer', seed = 'integer',
  eta = 'integer', budget = 'number', launch_s = 'number', runner_up = 'number',
  help = 'boolean' })
if not args then
  io.stderr:write('usage: tplua bench/search/simulate.lua [--reps N] [--seed S] [--eta E] '
    .. '[--budget F] [--launch-s S] [--runner-up PCT]\n')
  os.exit(2)
end
local REPS = args.reps or 200
local SEED = args.seed or 1
local LAUNCH = args.launch_s or 0

-- ---------------------------------------------------------------------------------------------
-- The candidates: the recipe's own plan with `--search halving` (the memory estimate pruned the
-- rest), as tplua run would search them.

local exp = assert(tp.experiment.load('recipes/sweep_parallelism.lua'))
local plan = exp:plan({ search = 'halving' })
assert(plan.ok, 'recipes/sweep_parallelism.lua: the plan has errors')
local info = assert(plan.platforms.nvd.search, 'recipes/sweep_parallelism.lua: no search planned')
local runs = info.grid_runs
local ITERS = runs[1].config.training.iters

local ANCHOR_TPS_GPU = 8697.8
local TP_FACTOR = { [1] = 1.0, [2] = 0.95, [4] = 0.88, [8] = 0.78 }
local MBS_FACTOR = { [1] = 0.94, [2] = 1.0, [4] = 1.03 }

local candidates, true_tps = info.candidates, {}
for _, r in ipairs(runs) do
  local p = r.config.parallelism
  local t = r.config.training
  local dp = r.gpus // (p.tp * p.pp)
  local micro = t.gbs // (t.mbs * dp)
  local bubble = (p.pp - 1) / micro
  local per_gpu = ANCHOR_TPS_GPU * TP_FACTOR[p.tp] * MBS_FACTOR[t.mbs]
    * (0.98 ^ (p.pp - 1)) / (1 + bubble)
  true_tps[sweep.canonical(r.point)] = per_gpu * r.gpus
end
for _, c in ipairs(candidates) do
  assert(true_tps[c.key], c.key)
end
local best_tps = 0
for _, v in pairs(true_tps) do
  best_tps = math.max(best_tps, v)
end
if args.runner_up then
  local second, second_tps
  for _, c in ipairs(candidates) do
    local v = true_tps[c.key]
    if v < best_tps and (not second_tps or v > second_tps) then
      second, second_tps = c.key, v
    end
  end
  true_tps[second] = best_tps * (1 - args.runner_up / 100)
end

-- ---------------------------------------------------------------------------------------------
-- Seeded generator (tp.stats.rng, seeds spread by a multiply-add) and the step-time model.

local function rng(seed)
  return tp.stats.rng(seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019)
end

local function simulate_run(g, c, iters, launch)
  local step = c.tokens_per_step / true_tps[c.key]
  local offset = 1 + 0.004 * g.normal()
  local times, e, total = {}, 0, 0
  for i = 1, iters do
    e = 0.3 * e + math.sqrt(1 - 0.09) * 0.008 * g.normal()
    local t = step * offset * (1 + e)
    if g.uniform() < 0.01 then
      t = t * (1.03 + 0.06 * g.uniform())
    end
    if i == 1 then
      t = t + 18 + 2 * g.uniform()
    elseif i == 2 then
      t = t * 1.15
    elseif i == 3 then
      t = t * 1.03
    end
    times[i] = t
    total = total + t
  end
  return times, c.gpus * (total + launch)
end

-- ---------------------------------------------------------------------------------------------
-- The repetitions.

-- The plan's spec (the defaults of search = 'halving'), or the one --eta / --budget ask for.
local spec = info.spec
if args.eta or args.budget then
  spec = assert(search.resolve(search.normalize({ strategy = 'halving', eta = args.eta,
    budget = args.budget }), ITERS))
end

local function grid_gpu_seconds(g, launch)
  local total = 0
  for _, c in ipairs(candidates) do
    local _, gs = simulate_run(g, c, ITERS, launch)
    total = total + gs
  end
  return total
end

-- REPS searches, each against a full grid of its own noise, with `launch` seconds of launch per
-- run: the GPU-time fractions, the GPU-iteration fractions, the rungs run, how often the best
-- (within 1%) was found, and the worst configuration chosen.
local function repetitions(launch)
  local found, fractions, fractions_iters, rungs_seen = 0, {}, {}, {}
  local worst
  for rep = 1, REPS do
    local g = rng(SEED * 100003 + rep)
    local cands = {}
    for i, c in ipairs(candidates) do
      cands[i] = { key = c.key, gpus = c.gpus, tokens_per_step = c.tokens_per_step }
    end
    local result = search.run(spec, cands, function(list, iters)
      local out = {}
      for _, c in ipairs(list) do
        local times, gs = simulate_run(g, c, iters, launch)
        out[c.key] = { runs = { { step_times = times, gpu_seconds = gs } } }
      end
      return out
    end)
    local grid = grid_gpu_seconds(rng(SEED * 100003 + rep + 7919), launch)
    fractions[rep] = result.spent_gpu_seconds / grid
    fractions_iters[rep] = result.spent_gpu_iters / result.budget.grid
    rungs_seen[#result.rungs] = (rungs_seen[#result.rungs] or 0) + 1
    local chosen = result.best and true_tps[result.best.key] or 0
    if chosen >= 0.99 * best_tps then
      found = found + 1
    end
    if not worst or chosen < worst then
      worst = chosen
    end
  end
  return fractions, fractions_iters, rungs_seen, found, worst
end

local fractions, fractions_iters, rungs_seen, found, worst = repetitions(LAUNCH)

local function mean(xs)
  local s = 0
  for _, x in ipairs(xs) do
    s = s + x
  end
  return s / #xs
end
local function max(xs)
  local m = -math.huge
  for _, x in ipairs(xs) do
    m = math.max(m, x)
  end
  return m
end

local b = search.budget(spec, candidates)
local sched = {}
for _, r in ipairs(b.rungs) do
  sched[#sched + 1] = string.format('%d x %d it', r.candidates, r.iters)
end
print(string.format('search benchmark: %d candidates of recipes/sweep_parallelism.lua, %d '
  .. 'iterations each in the grid; halving eta %d, rungs %s (nominal %.0f%% of the grid\'s '
  .. 'GPU-iterations, budget cap %.0f%%); %d repetitions, seed %d', #candidates, ITERS, spec.eta,
  table.concat(sched, ', '), 100 * b.fraction, 100 * spec.budget, REPS, SEED))
local best_label
for _, c in ipairs(candidates) do
  if true_tps[c.key] == best_tps then
    best_label = c.label
  end
end
local near = 0
for _, v in pairs(true_tps) do
  if v >= 0.99 * best_tps then
    near = near + 1
  end
end
print(string.format('true best: [%s] %.0f tokens/s (%d configuration(s) within 1%%); the worst '
  .. 'chosen in any repetition: %.0f tokens/s (%.1f%% below)', best_label, best_tps, near, worst,
  100 * (1 - worst / best_tps)))
local rs = {}
for n, count in pairs(rungs_seen) do
  rs[#rs + 1] = string.format('%d rungs: %d', n, count)
end
table.sort(rs)
print('rungs run: ' .. table.concat(rs, ', '))
local frac, frac_max = mean(fractions), max(fractions)
print(string.format('GPU-time of the search / full grid: mean %.1f%%, max %.1f%% (GPU-iterations: '
  .. 'mean %.1f%%)%s', 100 * frac, 100 * frac_max, 100 * mean(fractions_iters),
  LAUNCH > 0 and string.format(' with %g s of launch per run', LAUNCH) or ''))
local rate = found / REPS
print(string.format('best (or within 1%% of it) found: %d of %d (%.1f%%)', found, REPS,
  100 * rate))
print(string.format('%s  goal: GPU-time <= 40%% of the grid (mean %.1f%%)', frac <= 0.40 and 'PASS'
  or 'MISS', 100 * frac))
print(string.format('%s  goal: best within 1%% found >= 95%% of the time (%.1f%%)', rate >= 0.95
  and 'PASS' or 'MISS', 100 * rate))
if LAUNCH == 0 then
  -- Not a goal: what the same searches cost when every run also pays a minute of launch before
  -- its first iteration (a search makes more runs than the grid: 38 against 26 here).
  local f60, _, _, found60 = repetitions(60)
  print(string.format('(sensitivity, not a goal: with 60 s of launch per run, GPU-time mean '
    .. '%.1f%% of the grid, best within 1%% found %.1f%%)', 100 * mean(f60),
    100 * found60 / REPS))
end
