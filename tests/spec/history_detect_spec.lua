-- tp.history._detect and _stackdiff on plain data: steps found where they are with their size,
-- CI and direction by the metric's sense, the stack change named, nothing on flat noise, the
-- latest runs against the baseline, --fail-on, notes near a change, the text and JSON shapes.
local detect = require('tp.history._detect')
local stackdiff = require('tp.history._stackdiff')
local json = require('tp.json')

local DAY = 86400
local T0 = 1772330400 -- 2026-03-01T02:00:00Z

local rng = require('tp.stats').rng

local OLD = { gpu_stack = { hip_runtime = '6.2.41134', rccl = '2.20.5' },
  python = { python = '3.10.14', torch = '2.4.1' }, container = { rocm_version = '6.2.4' } }
local NEW = { gpu_stack = { hip_runtime = '6.3.42131', rccl = '2.20.5' },
  python = { python = '3.10.14', torch = '2.5.0' }, container = { rocm_version = '6.3.1' } }

-- Points of one series: `n` nights, level 10000 with noise `cv`, the value times `factor` from
-- night `step_at` on, the stack from OLD to NEW at night `stack_at` (default step_at).
local function series(o)
  local g = rng(o.seed or 1)
  local pts = {}
  local stack_at = o.stack_at or o.step_at
  for i = 1, o.n or 40 do
    local t = T0 + (i - 1) * DAY
    local v = (o.level or 10000) * (1 + (o.cv or 0.01) * g.normal())
    if o.step_at and i >= o.step_at then
      v = v * o.factor
    end
    pts[i] = { time = os.date('!%Y-%m-%dT%H:%M:%SZ', t), time_epoch = t, value = v,
      run_id = 'night-' .. i, sha256 = string.format('%064x', i),
      environment = (stack_at and i >= stack_at) and NEW or OLD }
  end
  return pts
end

-- A history of plain series (key -> points, notes) with the three methods check reads.
local function plain_history(list, notes)
  local H = {}
  function H.series_list()
    local out = {}
    for _, s in ipairs(list) do
      out[#out + 1] = { key = s.key, count = #s.points }
    end
    return out
  end
  function H.points(_, key, opts)
    for _, s in ipairs(list) do
      if s.key == key then
        local out = {}
        for _, p in ipairs(s.points) do
          if not opts.since or p.time >= opts.since then
            out[#out + 1] = p
          end
        end
        return out
      end
    end
    return nil, 'no series ' .. key, 'ENOSERIES'
  end
  function H.notes()
    return notes or {}
  end
  return H
end

describe('tp.history._stackdiff', function()
  it('names what changed between two environments, releases first', function()
    local items = stackdiff.diff(OLD, NEW)
    assert.are.same({
      { what = 'ROCm', from = '6.2.4', to = '6.3.1' },
      { what = 'HIP', from = '6.2.41134', to = '6.3.42131' },
      { what = 'torch', from = '2.4.1', to = '2.5.0' },
    }, items)
    assert.are.equal('ROCm 6.2.4 -> 6.3.1, HIP 6.2.41134 -> 6.3.42131, torch 2.4.1 -> 2.5.0',
      stackdiff.format(items))
  end)

  it('lists packages, GPU settings and variables, and what one side does not say', function()
    local a = { python = { packages = { ['transformer-engine'] = '1.11' } },
      gpu_state = { { power_limit_w = 750 } }, env = { NCCL_MIN_NCHANNELS = '112' },
      gpu_stack = { nvidia_driver = '550.54.15' } }
    local b = { python = { packages = { ['transformer-engine'] = '1.12' } },
      gpu_state = { { power_limit_w = 700 } }, env = { NCCL_ALGO = 'Ring' },
      gpu_stack = { nvidia_driver = '560.35.03' } }
    assert.are.equal('NVIDIA driver 550.54.15 -> 560.35.03, transformer-engine 1.11 -> 1.12, '
      .. 'GPU power limit (W) 750 -> 700, NCCL_ALGO (none) -> Ring, NCCL_MIN_NCHANNELS 112 -> '
      .. '(none)', stackdiff.format(stackdiff.diff(a, b)))
  end)

  it('names the CUDA runtime, the AMD driver and the framework commit by what they are', function()
    local a = { gpu_stack = { cuda_runtime = '12.4', amdgpu_driver = '6.8.5' },
      framework = { name = 'megatron', version = '0.10.0',
        commit = '6c6b2ae6d0c2c6cb1c1bdb5a8c4a7ea0f4fd1c2b' } }
    local b = { gpu_stack = { cuda_runtime = '12.6', amdgpu_driver = '6.10.5' },
      framework = { name = 'megatron', version = '0.10.0',
        commit = '0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6' } }
    assert.are.equal('CUDA 12.4 -> 12.6, amdgpu driver 6.8.5 -> 6.10.5, megatron 6c6b2ae6d0c2 -> '
      .. '0f1e2d3c4b5a', stackdiff.format(stackdiff.diff(a, b)))
  end)

  it('says nothing changed for equal stacks and cannot tell without an environment', function()
    assert.are.same({}, stackdiff.diff(OLD, OLD))
    assert.is_nil(stackdiff.diff(OLD, nil))
    assert.is_nil(stackdiff.diff({}, NEW))
  end)
end)

describe('tp.history._detect.analyse', function()
  it('finds a 4% drop of tokens/s at its night, with its CI and the stack change', function()
    local pts = series({ step_at = 26, factor = 0.96 })
    local r = detect.analyse(pts, { key = 'k' })
    assert.are.equal(1, #r.changes)
    local c = r.changes[1]
    assert.are.equal(26, c.index)
    assert.are.equal('night-26', c.run_id)
    assert.are.equal('night-25', c.before_run_id)
    assert.are.equal(pts[26].time, c.time)
    assert.are.equal('regression', c.kind)
    assert.is_true(c.pct < -3 and c.pct > -5, tostring(c.pct))
    assert.is_true(c.ci[1] < c.pct and c.pct < c.ci[2])
    assert.is_true(c.ci[2] < 0, 'the CI excludes 0')
    assert.is_true(c.p < 0.001)
    assert.are.equal('ROCm 6.2.4 -> 6.3.1, HIP 6.2.41134 -> 6.3.42131, torch 2.4.1 -> 2.5.0',
      stackdiff.format(c.stack))
    assert.are.equal('no change', r.latest.kind or 'no change')
  end)

  it('gives the same CI for the same seed and another for another seed', function()
    local pts = series({ step_at = 20, factor = 0.97 })
    local a = detect.analyse(pts, { seed = 3 }).changes[1]
    local b = detect.analyse(pts, { seed = 3 }).changes[1]
    local c = detect.analyse(pts, { seed = 4 }).changes[1]
    assert.are.same(a.ci, b.ci)
    assert.are_not.same(a.ci, c.ci)
  end)

  it('calls a change a regression or an improvement by the metric sense', function()
    local up = detect.analyse(series({ step_at = 20, factor = 1.05 }), {})
    assert.are.equal('improvement', up.changes[1].kind)
    local slower = detect.analyse(series({ step_at = 20, factor = 1.05, level = 1.6 }),
      { metric = 'step_time_s' })
    assert.are.equal('regression', slower.changes[1].kind)
    assert.are.equal('lower', slower.sense)
    local faster = detect.analyse(series({ step_at = 20, factor = 0.95, level = 1.6 }),
      { metric = 'step_time_s' })
    assert.are.equal('improvement', faster.changes[1].kind)
    local loss = detect.analyse(series({ step_at = 20, factor = 1.1, level = 6.1 }),
      { metric = 'final_loss' })
    assert.are.equal('regression', loss.changes[1].kind)
    assert.are.equal('regression',
      detect.analyse(series({ step_at = 20, factor = 0.9, level = 0.4 }), { metric = 'mfu' })
      .changes[1].kind)
  end)

  it('finds nothing on flat noise', function()
    for seed = 1, 30 do
      local r = detect.analyse(series({ seed = seed, cv = 0.015 }), { seed = seed })
      assert.are.equal(0, #r.changes, 'seed ' .. seed)
      assert.is_nil(r.latest.kind, 'seed ' .. seed)
    end
  end)

  it('finds two steps in one series, each against its own neighbours', function()
    local pts = series({ n = 60, step_at = 20, factor = 0.95 })
    for i = 40, 60 do
      pts[i].value = pts[i].value * 1.08
    end
    local r = detect.analyse(pts, {})
    assert.are.equal(2, #r.changes)
    assert.are.equal(20, r.changes[1].index)
    assert.are.equal(40, r.changes[2].index)
    assert.are.equal('regression', r.changes[1].kind)
    assert.are.equal('improvement', r.changes[2].kind)
    assert.is_true(r.changes[2].pct > 6 and r.changes[2].pct < 10, r.changes[2].pct)
    -- No stack change at night 40: the nearest one (night 20) is too far to be named.
    assert.are.same({}, r.changes[2].stack)
    assert.is_nil(r.changes[2].stack_near)
    assert.are.equal('no change in the recorded software stack', detect.stack_text(r.changes[2]))
  end)

  it('names a stack change one night before the change point', function()
    local r = detect.analyse(series({ step_at = 26, factor = 0.95, stack_at = 25 }), {})
    local c = r.changes[1]
    assert.are.equal(26, c.index)
    assert.are.same({}, c.stack)
    assert.are.equal(-1, c.stack_near.offset)
    assert.are.equal('night-25', c.stack_near.run_id)
    assert.truthy(detect.stack_text(c):find('no stack change at this run; 1 run earlier '
      .. '(night-25): ROCm 6.2.4 -> 6.3.1', 1, true), detect.stack_text(c))
  end)

  it('says when the runs carry no environment', function()
    local pts = series({ step_at = 26, factor = 0.95 })
    pts[25].environment = nil
    local c = detect.analyse(pts, {}).changes[1]
    assert.is_nil(c.stack)
    assert.are.equal('software stack not recorded for these runs', detect.stack_text(c))
  end)

  it('tests the latest runs against the baseline window before them', function()
    -- A young series, 9 nights (change points need 10), the last 4 nights 4% slower.
    local pts = series({ n = 9, step_at = 6, factor = 0.96, stack_at = 6 })
    local r = detect.analyse(pts, { latest = 4 })
    assert.are.equal(0, #r.changes)
    local l = r.latest
    assert.are.equal('regression', l.kind)
    assert.are.equal(4, l.n_latest)
    assert.are.equal(5, l.n_baseline)
    assert.is_true(l.ci[2] < 0 and l.pct < -2.5 and l.pct > -5.5, l.pct)
    assert.is_true(l.p <= 0.01, l.p)
    assert.are.equal(pts[6].time, l.latest_from)
    assert.are.equal(pts[1].time, l.baseline_from)
    -- The same rise of tokens/s is an improvement; of J/token a regression.
    local up = series({ n = 9, step_at = 6, factor = 1.04 })
    assert.are.equal('improvement', detect.analyse(up, { latest = 4 }).latest.kind)
    assert.are.equal('regression', detect.analyse(up, { latest = 4,
      metric = 'joules_per_token' }).latest.kind)
    -- The windows' lengths on a long flat series.
    local flat = series({ seed = 2 })
    local r2 = detect.analyse(flat, { latest = 3, baseline = 10 })
    assert.are.equal(3, r2.latest.n_latest)
    assert.are.equal(10, r2.latest.n_baseline)
    assert.are.equal(flat[28].time, r2.latest.baseline_from)
    assert.are.equal(flat[38].time, r2.latest.latest_from)
    assert.is_nil(r2.latest.kind)
  end)

  it('does not reach back past a change point for the baseline, nor restate one', function()
    local r = detect.analyse(series({ step_at = 26, factor = 0.96 }), {})
    assert.are.equal(26, r.changes[1].index)
    assert.are.equal(10, r.latest.n_baseline)  -- nights 26..35
    assert.is_nil(r.latest.change)
    -- A change point inside the latest runs: the latest test restates it.
    local r2 = detect.analyse(series({ step_at = 31, factor = 0.95 }), { latest = 10 })
    assert.are.equal(31, r2.changes[1].index)
    assert.are.equal(31, r2.latest.change)
  end)

  it('says when a series has too few runs', function()
    local r = detect.analyse(series({ n = 7 }), {})
    assert.are.equal('7 runs with tokens_per_s_per_gpu: change points need at least 10',
      r.too_few)
    assert.are.equal(0, #r.changes)
    assert.are.equal('regression', detect.analyse(series({ n = 9, step_at = 6, factor = 0.9 }),
      { latest = 4 }).latest.kind)
    assert.are.equal('3 runs: the latest-runs test needs at least 4',
      detect.analyse(series({ n = 3 }), {}).latest.skipped)
    -- 6 runs: 3 latest against 3.
    local six = detect.analyse(series({ n = 6 }), {}).latest
    assert.are.equal(3, six.n_latest)
    assert.are.equal(3, six.n_baseline)
    local none = detect.analyse({}, {})
    assert.are.equal('0 runs with tokens_per_s_per_gpu: change points need at least 10',
      none.too_few)
  end)

  it('leaves out runs without the metric, and counts them', function()
    local pts = series({ step_at = 26, factor = 0.96 })
    pts[3].value, pts[30].value = nil, 0 / 0
    local r = detect.analyse(pts, {})
    assert.are.equal(38, #r.points)
    assert.are.equal(2, r.skipped)
    assert.are.equal('night-26', r.changes[1].run_id)
  end)

  it('refuses an unknown metric and a non-list', function()
    assert.has_error(function()
      detect.analyse({}, { metric = 'speed' })
    end, "tp.history.analyse: unknown metric 'speed'")
    assert.has_error(function()
      detect.analyse('x')
    end, 'tp.history.analyse: points must be a list, got string')
  end)
end)

describe('tp.history._detect.check', function()
  local drop = { key = 'amd/mi300x/megatron@0.10.0/llama3.1-8b/abc/identical_config',
    points = series({ step_at = 26, factor = 0.96 }) }
  local flat = { key = 'nvd/h100-sxm/megatron@0.10.0/llama3.1-8b/abc/identical_config',
    points = series({ seed = 9, stack_at = 20 }) }
  local notes = { { time = '2026-03-26', time_epoch = T0 + 25 * DAY - 7200, text = 'new cooling' },
    { time = '2026-03-10', time_epoch = T0 + 9 * DAY, text = 'far away' } }

  it('counts regressions and fails beyond --fail-on only', function()
    local H = plain_history({ drop, flat }, notes)
    local rep = assert(detect.check(H, { fail_on = 2 }))
    assert.are.equal(1, rep.regressions)
    assert.are.equal(0, rep.improvements)
    assert.is_true(rep.failed)
    assert.are.equal(1, #rep.failing)
    assert.are.equal(drop.key, rep.failing[1].series)
    assert.are.equal(drop.points[26].time, rep.failing[1].time)
    assert.is_false(assert(detect.check(H, { fail_on = 5 })).failed)
    assert.is_false(assert(detect.check(H, {})).failed)
    -- Notes dated from the day of the last run before to the first run after the change.
    local c = rep.results[1].changes[1]
    assert.are.same({ { time = '2026-03-26', text = 'new cooling' } }, c.notes)
  end)

  it('fails on a regression of the latest runs too', function()
    local late = { key = 'late', points = series({ n = 9, step_at = 6, factor = 0.96 }) }
    local rep = assert(detect.check(plain_history({ late }), { fail_on = 2, latest = 4 }))
    assert.are.equal(1, rep.regressions)
    assert.is_true(rep.failed)
    assert.is_true(rep.failing[1].latest)
  end)

  it('selects series by key, substring or pattern, and limits the dates', function()
    local H = plain_history({ drop, flat })
    local rep = assert(detect.check(H, { series = { 'nvd/' } }))
    assert.are.equal(1, #rep.results)
    assert.are.equal(flat.key, rep.results[1].series)
    rep = assert(detect.check(H, { series = { '^amd/.*identical' } }))
    assert.are.equal(drop.key, rep.results[1].series)
    rep = assert(detect.check(H, { series = { drop.key }, since = '2026-03-20' }))
    assert.are.equal(21, #rep.results[1].points)
    assert.are.equal(7, rep.results[1].changes[1].index)
    local r, err, code = detect.check(H, { series = { 'tpu/' } })
    assert.is_nil(r)
    assert.are.equal("no series matches 'tpu/' (tplua history list shows them)", err)
    assert.are.equal('ENOSERIES', code)
  end)

  it('rejects bad options', function()
    local H = plain_history({})
    assert.has_error(function()
      detect.check(H, { colour = true })
    end, "tp.history.check: unknown option 'colour'")
    assert.has_error(function()
      detect.check(H, { since = 'yesterday' })
    end, "tp.history.check: option 'since' must be a date YYYY-MM-DD, got 'yesterday'")
    assert.has_error(function()
      detect.check(H, { fail_on = -1 })
    end, "tp.history.check: option 'fail_on' must be a percentage >= 0, got -1")
    assert.has_error(function()
      detect.check(H, { latest = 0 })
    end, "tp.history.check: option 'latest' must be a positive integer, got 0")
  end)

  it('prints one line per change with the stack, then the summary', function()
    local H = plain_history({ drop, flat }, notes)
    local text = detect.text(assert(detect.check(H, { fail_on = 2 })))
    local lines = {}
    for l in text:gmatch('[^\n]+') do
      if l:find('^  %d%d%d%d%-%d%d%-%d%d  ') then
        lines[#lines + 1] = l
      end
    end
    assert.are.equal(1, #lines, text)
    assert.truthy(lines[1]:find('^  2026%-03%-26  regression  ROCm 6%.2%.4 %-> 6%.3%.1, HIP '
      .. '6%.2%.41134 %-> 6%.3%.42131, torch 2%.4%.1 %-> 2%.5%.0: tokens/s/GPU %-%d%.%d%% '
      .. '%[%-%d%.%d, %-%d%.%d%]$'), lines[1])
    assert.truthy(text:find('first run after: night-26 (2026-03-26T02:00:00Z)', 1, true))
    assert.truthy(text:find('note 2026-03-26: new cooling', 1, true))
    assert.truthy(text:find(flat.key .. '\n  40 runs, 2026-03-01 .. 2026-04-09, last ', 1, true))
    assert.truthy(text:find('  no change point\n  latest 5 runs vs the 20 before: ', 1, true))
    assert.truthy(text:find('\n1 regression, 0 improvements in 2 series; --fail-on 2%: FAILED '
      .. '(-', 1, true), text)
  end)

  it('gives JSON of a fixed shape', function()
    local H = plain_history({ drop, flat }, notes)
    local rep = assert(detect.check(H, { fail_on = 2 }))
    local doc = assert(json.decode(assert(json.encode(detect.json(rep)))))
    assert.are.equal('tplua.history.check/1', doc.schema)
    assert.are.equal('tokens_per_s_per_gpu', doc.metric)
    assert.are.equal('higher', doc.sense)
    assert.are.equal(2, doc.fail_on)
    assert.is_true(doc.failed)
    assert.are.equal(1, doc.regressions)
    assert.are.equal(2, #doc.results)
    local r = doc.results[1]
    assert.are.equal(drop.key, r.series)
    assert.are.equal(40, r.runs)
    assert.are.equal(40, #r.points)
    assert.are.same({ 'run_id', 'sha256', 'time', 'value' }, (function()
      local ks = {}
      for k in pairs(r.points[1]) do
        ks[#ks + 1] = k
      end
      table.sort(ks)
      return ks
    end)())
    local c = r.changes[1]
    assert.are.equal(26, c.index)
    assert.are.equal('regression', c.kind)
    assert.are.equal('night-26', c.run_id)
    assert.are.equal(2, #c.ci)
    assert.is_true(c.stack_recorded)
    assert.are.same({ what = 'torch', from = '2.4.1', to = '2.5.0' }, c.stack[3])
    assert.are.same({ { time = '2026-03-26', text = 'new cooling' } }, c.notes)
    assert.are.equal(10, r.latest.n_baseline)
    assert.are.equal(0, #doc.results[2].changes)
    assert.is_true(json.is_array(doc.results[2].changes))
  end)
end)
