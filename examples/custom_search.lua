-- A search strategy of your own (docs/search.md, "Your own strategy"): micro-batch x tensor
-- parallelism of Llama 3.1 8B on 8 x H100 (Megatron-LM), raced in two rounds instead of run as
-- a grid. Round 1 runs every candidate for 20 iterations; every candidate whose tokens/s
-- interval still reaches the best one's low end goes on to the recipe's 100 iterations (so no
-- fixed fraction: as many as the measurements cannot tell apart), the others are dropped with
-- the figures that decided it. The runs are journaled and resumed like any campaign's, and
-- `tplua report` shows both rounds.
--   tplua plan examples/custom_search.lua        round 1's runs and the strategy
--   tplua plan examples/custom_search.lua --search halving    the built-in successive halving
local tp = require('tp')

-- ctx: the search context (tp.plan.search): ctx:alive(), ctx:measure(list, iters),
-- ctx:drop(c, reason, detail), ctx:keep(c, why), ctx.spec. Deterministic given the
-- measurements, so that a resumed search decides the same.
local function race(ctx)
  local all = ctx:alive()
  ctx:measure(all, ctx.spec.min_iters)  -- round 1: what the plan lists
  local best
  for _, c in ipairs(all) do
    if not c.failed and (not best or c.estimate > best.estimate) then
      best = c
    end
  end
  if not best then
    return nil
  end
  local finalists = {}
  for _, c in ipairs(all) do
    if c.failed then
      ctx:drop(c, 'failed', c.failed)
    elseif c == best or c.hi >= best.lo then
      ctx:keep(c, c == best and 'best so far' or string.format(
        'its high end %.0f reaches the best low end, %.0f', c.hi, best.lo))
      finalists[#finalists + 1] = c
    else
      ctx:drop(c, 'worse', string.format('its high end %.0f is below the best low end, %.0f',
        c.hi, best.lo))
    end
  end
  ctx:measure(finalists, ctx.spec.max_iters - ctx.spec.min_iters)
  table.sort(finalists, function(a, b)
    return (a.estimate or -1) > (b.estimate or -1)
  end)
  for i, c in ipairs(finalists) do
    ctx:keep(c, i == 1 and 'best' or 'finalist')
  end
  return finalists[1]
end

return tp.experiment.main({
  name = 'llama3.1-8b-race',
  description = 'micro-batch x tensor parallelism raced in two rounds (a strategy of the recipe)',
  model = 'llama3.1-8b',
  methodology = 'maximum_performance',
  platforms = {
    nvd = { framework = 'megatron', hardware = 'h100-sxm', sweep = tp.sweep({
      axes = { { 'training.mbs', { 1, 2 } } },
      zip = { { { 'parallelism.tp', { 1, 2, 4 } },
                { 'parallelism.sequence_parallel', { false, true, true } } } },
    }) },
  },
  search = { strategy = race, min_iters = 20 },
  training = {
    seed = 42, gbs = 64, mbs = 1, seq_len = 2048, iters = 100,
    lr = 3e-4, min_lr = 3e-5, warmup = 10, decay = 'cosine', precision = 'bf16',
    dataset = 'bc',
  },
  parallelism = { tp = 1, pp = 1 },
  nodes = 1,
  gpus_per_node = 8,
  results = 'output/llama3.1-8b-race',
})
