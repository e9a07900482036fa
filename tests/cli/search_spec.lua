-- A recipe's `search = {...}` through the real binary: `tplua plan` shows the rungs and the
-- budget (--search none the grid, bad specs and flags refused), and a real search on the
-- reference trainer (micro-batch x sequence length x ranks, started by `tplua ranks` on this
-- machine's CPU; the fake NVIDIA libraries make the machine 'nvd'): tplua is killed with
-- SIGKILL during rung 1, run again, resumes without rerunning a finished run and makes the same
-- decisions; compare and report show each rung's kept and dropped candidates.
local h = require('helper')
local json = require('tp.json')
local fs = require('tp.fs')
local proc = require('tp.proc')
local campaign = require('tp.campaign')
local search_mod = require('tp.plan.search')

local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

-- The search recipe: 2 x 2 x 2 candidates, 4 sequences per step, 80 iterations in the grid;
-- halving with eta 2 from 20 iterations: rungs of 20, 20 and 40 more iterations. `extra` is
-- Lua put into the definition (a `search = ...` of its own replaces the default one).
local function recipe(dir, extra)
  local path = dir .. '/search.lua'
  h.write(path, string.format([[
local tp = require('tp')
local def = {
  name = 'reftrain-search',
  model = 'ref-tiny',
  methodology = 'maximum_performance',
  platforms = { nvd = { framework = 'reference', sweep = tp.sweep({
    axes = { { 'gpus_per_node', { 1, 2 } }, { 'training.mbs', { 1, 2 } },
             { 'training.seq_len', { 16, 64 } } },
  }) } },
  search = { strategy = 'halving', eta = 2, min_iters = 20, budget = 0.6 },
  gpus_per_node = 1,
  training = { seed = 1, mbs = 1, gbs = 4, seq_len = 16, iters = 80, lr = 3e-3,
               dataset = 'mock', log_interval = 1 },
  parallelism = { tp = 1, pp = 1 },
  launcher = 'ranks',
  timeout = 600,
}
%s
return tp.experiment.main(def)
]], extra or ''))
  return path
end

describe('tplua plan with a search', function()
  local dir = h.tmpdir()
  local path = recipe(dir)

  it('shows the rungs and the budget, and rung 0 as the runs', function()
    local r = h.run({ 'plan', path, '--results', dir .. '/res' })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'search: successive halving over 8 candidates, eta 2 (the '
      .. 'better 1/2 go on at each rung), ranked by tokens/s with 95% intervals'), r.stdout)
    -- 4 candidates on 1 rank and 4 on 2: 12 GPUs in all, 1.5 per candidate.
    assert.is_true(has(r.stdout, 'rung 0: 8 candidates x 20 iterations (20 in all)  240 '
      .. 'GPU-iterations'), r.stdout)
    assert.is_true(has(r.stdout, 'rung 1: at least 4 candidates x 20 iterations (40 in all)'),
      r.stdout)
    assert.is_true(has(r.stdout, 'rung 2: at least 2 candidates x 40 iterations (80 in all)'),
      r.stdout)
    assert.is_true(has(r.stdout, 'budget: 480 GPU-iterations = 50% of the full grid (8 x 80 '
      .. 'iterations: 960); at most 60% of its GPU-time'), r.stdout)
    -- What each budget counts.
    assert.is_true(has(r.stdout, "(GPU-iterations: measured iterations x GPUs, each run's "
      .. 'start-up and warm-up excluded; GPU-time: GPUs x wall time, start-up included'),
      r.stdout)
    assert.is_true(has(r.stdout, 'runs (8):'), r.stdout)
    local j = assert(json.decode(h.run({ 'plan', path, '--json', '--results', '/r' }).stdout))
    local p = j.platforms.nvd
    assert.are.equal('halving', p.search.strategy)
    assert.are.same({ 20, 20, 40 }, { p.search.rungs[1].iters, p.search.rungs[2].iters,
      p.search.rungs[3].iters })
    assert.are.equal(8, #p.runs)
    for _, run in ipairs(p.runs) do
      assert.are.equal(20, run.config.training.iters)
      assert.are.equal(1, run['repeat'])
    end
  end)

  it('plans the grid with --search none', function()
    local r = h.run({ 'plan', path, '--search', 'none', '--json', '--results', '/r' })
    assert.are.equal(0, r.code, r.stderr)
    local p = assert(json.decode(r.stdout)).platforms.nvd
    assert.is_nil(p.search)
    assert.are.equal(8, #p.runs)
    assert.are.equal(80, p.runs[1].config.training.iters)
  end)

  it('plans a strategy written in the recipe (examples/custom_search.lua)', function()
    local r = h.run({ 'plan', 'examples/custom_search.lua', '--results', dir .. '/race' },
      { cwd = h.source_dir })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, "search: a strategy of the recipe over 6 candidates; the runs "
      .. "below are rung 0's (20 iterations), the strategy chooses the rest"), r.stdout)
    assert.is_true(has(r.stdout, 'runs (6):'), r.stdout)
    assert.is_true(has(r.stdout, '--train-iters 20 '), r.stdout)
  end)

  it('refuses a bad search, flag or recipe field, naming it', function()
    local r = h.run({ 'plan', path, '--search', 'bogus' })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stdout, "--search: 'bogus' is not one of halving, none"), r.stdout)
    r = h.run({ 'plan', recipe(h.tmpdir(), 'def.search = { eta = 1 }') })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stderr, "experiment 'reftrain-search': search: eta: a whole number >= 2 "
      .. 'expected, got 1'), r.stderr)
    r = h.run({ 'plan', recipe(h.tmpdir(), 'def.platforms.nvd.sweep = nil') })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stdout, 'search: no platform of the plan has a sweep to search (nvd)'),
      r.stdout)
    r = h.run({ 'plan', recipe(h.tmpdir(), "def.platforms.nvd.sweep = nil\n"
      .. "def.platforms.nvd.search = 'halving'") })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stdout, 'nvd: search: the platform has no sweep to search'), r.stdout)
  end)
end)

describe('tplua compare on results with a finished search', function()
  it('says whether the best is separated from the runner-up, and what the budget counts',
    function()
    local res = h.tmpdir() .. '/res'
    assert(fs.mkdir_p(res))
    for _, name in ipairs({ 'megatron-r1.json', 'megatron-r2.json' }) do
      h.write(res .. '/' .. name, h.read(h.fixture('results/fair/nvd/' .. name)))
    end
    local function write_doc(hi_a)
      h.write(res .. '/search-nvd.json', json.encode({ schema = 'tplua.search/1',
        experiment = 'x', platform = 'nvd', state = 'complete', strategy = 'halving',
        metric = 'tokens_per_second', best = 'b', settings = { eta = 2, min_iters = 20,
        max_iters = 80, budget = 0.6, level = 0.95 }, candidates = json.array({
          { candidate = 'a', estimate = 5996, lo = 4916, hi = hi_a, iters = 80 },
          { candidate = 'b', estimate = 8593, lo = 6788, hi = 11708, iters = 80 } }),
        rungs = json.array({}), spent_gpu_seconds = 75.41, grid_gpu_seconds = 85.69,
        spent_gpu_iters = 560, grid_gpu_iters = 960 }))
    end
    write_doc(7683)
    local r = h.run({ 'compare', res })
    assert.is_true(has(r.stdout, "search nvd: successive halving, eta 2, 20 to 80 iterations, "
      .. "budget 60% of the grid's GPU-time"), r.stdout)
    assert.is_true(has(r.stdout, 'NOT separated from the runner-up at 95%: [a] 5996 [4916, '
      .. "7683] reaches the best's low end 6788"), r.stdout)
    assert.is_true(has(r.stdout, 'GPU-time (GPUs x wall time, start-up included): 75.41 GPU-s, '
      .. "88.0% of the full grid's 85.69 GPU-s (estimated from what the runs measured), over "
      .. 'the 60% budget'), r.stdout)
    assert.is_true(has(r.stdout, 'GPU-iterations (measured iterations x GPUs, start-up and '
      .. "warm-up excluded): 560 of the grid's 960 (58.3%)"), r.stdout)
    write_doc(6500)
    r = h.run({ 'compare', res })
    assert.is_true(has(r.stdout, 'separated from the runner-up at 95%: [a] 5996 [4916, 6500], '
      .. "its high end below the best's low end 6788"), r.stdout)
  end)
end)

describe('tplua report on results with a search document', function()
  it('reads search-<platform>.json as the search, not as a skipped foreign file', function()
    local res = h.tmpdir() .. '/res'
    assert(fs.mkdir_p(res))
    for _, name in ipairs({ 'megatron-r1.json', 'megatron-r2.json' }) do
      h.write(res .. '/' .. name, h.read(h.fixture('results/fair/nvd/' .. name)))
    end
    h.write(res .. '/search-nvd.json', json.encode({ schema = 'tplua.search/1',
      experiment = 'x', platform = 'nvd', state = 'running', strategy = 'halving',
      metric = 'tokens_per_second', settings = { eta = 3, min_iters = 12, max_iters = 100,
      budget = 0.4, level = 0.95 }, candidates = json.array({}), rungs = json.array({}) }))
    h.write(res .. '/other.json', '{"schema": "something.else/1"}\n')
    local out = h.tmpdir() .. '/rep'
    local r = h.run({ 'report', res, '--out', out, '--no-plots' })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local md = h.read(out .. '/report.md')
    assert.is_true(has(md, '## Search'), md)
    -- Only other.json is foreign.
    assert.is_true(has(md, '1 JSON file in the result directories are not results and were '
      .. 'skipped.'), md)
  end)
end)

-- The journal's events of `id`, by kind: {started = n, finished = n, ...}.
local function counts(res, id)
  local out = {}
  for _, ev in ipairs(assert(campaign.read_journal(res .. '/journal.jsonl')).events) do
    if ev.id == id then
      out[ev.event] = (out[ev.event] or 0) + 1
    end
  end
  return out
end

local function decisions(rung)
  local out = {}
  for _, k in ipairs(rung.kept) do
    out[#out + 1] = 'kept ' .. k.candidate
  end
  for _, d in ipairs(rung.dropped) do
    out[#out + 1] = d.reason .. ' ' .. d.candidate
  end
  table.sort(out)
  return out
end

describe('a real search on the reference trainer #slow', function()
  local fake = h.fakes_dir .. '/h100x8'
  local missing = h.trainer_missing(fake)

  it('survives kill -9 in rung 1, resumes, and the report shows the rungs', function()
    if missing then
      pending(missing)
      return
    end
    local dir = h.tmpdir()
    local path = recipe(dir)
    local res = dir .. '/res'
    local env = { TPLUA_GPU_LIBPATH = fake }
    -- First attempt: SIGKILL to tplua once the first run of rung 1 has started.
    local loop = proc.loop()
    local out, in_rung1, killed = {}, false, false
    local p
    p = assert(loop:spawn({
      argv = { h.bin, 'run', path, '--results', res, '--skip-preflight' },
      env = env,
      timeout = 900,
      on_line = function(_, line)
        out[#out + 1] = line
        if line:find('search rung 1:', 1, true) then
          in_rung1 = true
        elseif in_rung1 and not killed and line:match('%-r2: started') then
          killed = true
          p:kill('SIGKILL')
        end
      end,
    }))
    local r = p:wait()
    loop:close()
    local text = table.concat(out, '\n')
    assert.is_true(killed, text)
    assert.are.equal(128 + 9, r.code, text)
    -- What rung 0 decided is on disk, written before rung 1's runs started.
    local partial = assert(json.load_file(res .. '/search-nvd.json'))
    assert.are.equal('running', partial.state)
    assert.are.equal(1, #partial.rungs)
    local rung0 = partial.rungs[1]
    assert.are.equal(8, #rung0.ranking)
    assert.are.equal(8, #rung0.kept + #rung0.dropped)
    -- The rung-0 records, to check that the resumed search does not run them again.
    local before, ids = {}, {}
    for _, c in ipairs(partial.candidates) do
      ids[#ids + 1] = c.runs[1]
      before[c.runs[1]] = assert(h.read(res .. '/' .. c.runs[1] .. '.json'))
    end
    assert.are.equal(8, #ids)
    -- The run killed with tplua: started, never finished; its process group found later.
    local killed_id, killed_pgid
    for _, ev in ipairs(assert(campaign.read_journal(res .. '/journal.jsonl')).events) do
      if ev.event == 'started' and ev.id:match('%-r2$') and not killed_id then
        killed_id, killed_pgid = ev.id, ev.pgid
      end
    end
    assert.is_truthy(killed_id)
    assert.is_truthy(killed_pgid)

    -- Second attempt: resumes and finishes.
    r = h.run({ 'run', path, '--results', res, '--skip-preflight' }, { env = env })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    for _, id in ipairs(ids) do
      assert.are.equal(before[id], h.read(res .. '/' .. id .. '.json'), id)
      local c = counts(res, id)
      assert.are.equal(1, c.started, id)
      assert.are.equal(1, c.finished, id)
    end
    local k = counts(res, killed_id)
    assert.are.equal(2, k.started)
    assert.are.equal(1, k.finished)
    -- The ranks that outlived tplua were stopped by the resume before the run started again.
    assert.are.same({}, assert(proc.group_members(killed_pgid)))
    local doc = assert(json.load_file(res .. '/search-nvd.json'))
    assert.are.equal('complete', doc.state)
    assert.are.same(decisions(rung0), decisions(doc.rungs[1]))
    assert.is_true(#doc.rungs >= 2)
    assert.is_truthy(doc.best)
    assert.is_true(doc.spent_gpu_iters < doc.grid_gpu_iters)
    local best
    for _, c in ipairs(doc.candidates) do
      if c.candidate == doc.best then
        best = c
      end
      -- Each candidate dropped once at most, with the rung and reason.
      if c.dropped then
        assert.is_truthy(({ worse = 1, budget = 1, failed = 1 })[c.dropped.reason])
      end
    end
    assert.are.equal(80, best.iters)
    -- A high end that is absent is unbounded (the step-time interval reaches 0, as it does when
    -- a loaded machine makes the runs noisy).
    assert.is_true(best.lo <= best.estimate and best.estimate <= (best.hi or math.huge),
      json.encode(best, { allow_nan = true }))
    assert.is_true(has(r.stdout, 'search nvd: successive halving, eta 2, 20 to 80 iterations'),
      r.stdout)
    assert.is_true(has(r.stdout, 'best: [' .. doc.best .. ']'), r.stdout)
    -- Whether the best is separated from the runner-up, in the document and the output.
    local sep = search_mod.separation(best, doc.candidates)
    assert.are.equal(sep.candidate, doc.runner_up.candidate)
    assert.are.equal(sep.separated, doc.runner_up.separated)
    assert.is_true(has(r.stdout, (sep.separated and 'separated' or 'NOT separated')
      .. ' from the runner-up at 95%: [' .. sep.candidate .. ']'), r.stdout)

    -- Once more, the recipe as the main script (plan, run, analyse): nothing runs again, every
    -- rung decides the same, and the analysis names the search's best.
    local again = h.run({ path, '--results', res, '--skip-preflight' }, { env = env })
    assert.are.equal(0, again.code, again.stdout .. again.stderr)
    assert.is_true(has(again.stdout, 'campaign: 0 finished, 0 failed, 8 skipped'), again.stdout)
    local doc2 = assert(json.load_file(res .. '/search-nvd.json'))
    assert.are.equal(#doc.rungs, #doc2.rungs)
    for i = 1, #doc.rungs do
      assert.are.same(decisions(doc.rungs[i]), decisions(doc2.rungs[i]))
    end
    assert.are.equal(doc.best, doc2.best)
    assert.is_true(has(again.stdout, 'found by the search ('), again.stdout)

    -- compare and report show the rungs.
    local c = h.run({ 'compare', res })
    assert.is_true(has(c.stdout, 'search nvd: successive halving'), c.stdout)
    assert.is_true(has(c.stdout, '  rung 0: 8 candidates, 20 more iterations each (20 in all)'),
      c.stdout)
    local rep = h.run({ 'report', res, '--out', dir .. '/report', '--no-plots' })
    assert.are.equal(0, rep.code, rep.stdout .. rep.stderr)
    local md = h.read(dir .. '/report/report.md')
    assert.is_true(has(md, '## Search'), md)
    assert.is_false(has(md, 'were skipped'), md)
    -- From rung 1 on, the intervals count the run-to-run variation of the candidates run twice.
    local rr = doc.rungs[2].run_to_run
    assert.is_true(rr.df >= 1 and rr.df <= 4 and rr.cv >= 0, json.encode(rr))
    assert.is_true(has(md, 'intervals with a run-to-run variation of'), md)
    assert.is_true(has(md, 'Rung 0: 8 candidates, 20 more iterations each (20 in all).'), md)
    for _, d in ipairs(doc.rungs[1].dropped) do
      assert.is_true(has(md, '| ' .. (d.reason == 'failed' and 'failed' or 'dropped') .. ' | '),
        md)
    end
    assert.is_true(has(h.read(dir .. '/report/report.html'), '<section id="search">'))
  end)

  it('stops on Ctrl-C with exit 130 and says the search is to be resumed', function()
    if missing then
      pending(missing)
      return
    end
    local dir = h.tmpdir()
    local res = dir .. '/res'
    local loop = proc.loop()
    local out, sent, started = {}, false, 0
    local p
    p = assert(loop:spawn({
      argv = { h.bin, 'run', recipe(dir), '--results', res, '--skip-preflight' },
      env = { TPLUA_GPU_LIBPATH = fake },
      timeout = 600,
      on_line = function(_, line)
        out[#out + 1] = line
        if line:match('%-r1: started') then
          started = started + 1
        end
        -- While rung 0's second run starts or runs.
        if not sent and started == 2 then
          sent = true
          p:kill('SIGINT')
        end
      end,
    }))
    local r = p:wait()
    loop:close()
    local text = table.concat(out, '\n')
    assert.is_true(sent, text)
    assert.are.equal(130, r.code, text)
    assert.is_true(has(text, '(interrupted: run it again to resume)'), text)
    local doc = assert(json.load_file(res .. '/search-nvd.json'))
    assert.are.equal('interrupted', doc.state)
    assert.are.equal(0, #doc.rungs)
    assert.is_nil(doc.best)
  end)
end)
