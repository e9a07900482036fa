-- tplua repl DIR...: the results as `R` at a prompt on a real pseudo-terminal (tests/tools/ptyrun):
-- tables, filters, text plots, compare/audit/convergence, and Tab completion of methods and of
-- run fields.
local h = require('helper')

local P = 'tplua> '

local function session(steps, dirs, env)
  local args = { '-t', '30' }
  for _, s in ipairs(steps) do
    args[#args + 1] = s[1]
    args[#args + 1] = s[2]
  end
  args[#args + 1] = '--'
  args[#args + 1] = h.bin
  args[#args + 1] = 'repl'
  for _, d in ipairs(dirs) do
    args[#args + 1] = d
  end
  return h.run(args, { bin = h.tools_dir .. '/ptyrun', env = env })
end

-- The transcript between two markers, printed as `print("==M" .. n .. "==")` (the echoed input
-- does not contain the printed text).
local function mark(n)
  return { '-s', 'print("==M" .. ' .. n .. ' .. "==")\n' }
end

local function between(text, a, b)
  local i = select(2, text:find('==M' .. a .. '==', 1, true))
  local j = text:find('==M' .. b .. '==', i or 1, true)
  assert(i and j, 'markers ' .. a .. '/' .. b .. ' not found')
  return text:sub(i, j)
end

describe('tplua repl DIR', function()
  local r, state

  setup(function()
    state = h.tmpdir()
    r = session({
      { '-x', 'R = result set: 6 runs (amd 3, nvd 3)' },
      { '-x', P }, mark(1), { '-x', P }, { '-s', 'R:table()\n' },
      { '-x', 'nvd-megatron-r3' },
      { '-x', P }, mark(2), { '-x', P },
      { '-s', "R:where{platform = 'amd'}:table()\n" }, { '-x', 'amd-primus-r3' },
      { '-x', P }, mark(3), { '-x', P }, { '-s', "R:plot('loss')\n" },
      { '-x', 'Training loss' }, { '-x', 'iteration' },
      { '-x', P }, mark(4), { '-x', P }, { '-s', "compare(R, 'platform')\n" },
      { '-x', 'comparison by platform, baseline nvd' }, { '-x', 'warnings:' },
      { '-x', P }, mark(5), { '-x', P }, { '-s', 'audit(R)\n' },
      { '-x', 'audit under identical_config' },
      { '-x', P }, mark(6), { '-x', P }, { '-s', 'R:wh\t' },
      { '-x', 'R:where(' }, { '-s', "{platform = 'nvd'}):ids()\n" }, { '-x', 'nvd-megatron-r3' },
      { '-x', P }, mark(7), { '-x', P }, { '-s', 'r = R[1]\n' },
      { '-x', P }, { '-s', 'r.tokens_per_s_p\t' }, { '-x', 'r.tokens_per_s_per_gpu' },
      { '-s', '\n' }, { '-x', '13643.79' },
      -- Fields loaded on first access, and methods, complete too (the run's __index is a
      -- function; its metatable lists them in __complete).
      { '-x', P }, { '-s', 'n = r.loss_v\t' }, { '-x', 'n = r.loss_values' },
      { '-s', "\nprint(type(n) .. '/' .. tostring(r:details_loaded()))\n" }, { '-x', 'table/true' },
      { '-x', P }, { '-s', 'r:drop_d\t' }, { '-x', 'r:drop_details(' }, { '-s', ')\n' },
      { '-x', P }, { '-s', "print('loaded:' .. tostring(r:details_loaded()))\n" },
      { '-x', 'loaded:false' },
      { '-x', P }, mark(8), { '-x', P }, { '-s', 'convergence(R)\n' },
      { '-x', 'curves_agree' },
      { '-x', P }, mark(9), { '-x', P }, { '-s', "R:plot('pie')\n" },
      { '-x', "unknown chart 'pie'" },
      { '-x', P }, mark(10), { '-x', P }, { '-s', '\x04' },
    }, { h.fixture('results/fair') }, { XDG_STATE_HOME = state, HOME = state })
  end)

  it('exits 0 at end of input', function()
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
  end)

  it('says what it loaded and how to start', function()
    assert.truthy(r.stdout:find('loaded from ' .. h.fixture('results/fair'), 1, true))
    assert.truthy(r.stdout:find("try: R:table()", 1, true))
  end)

  it('lists the runs, and only the matching ones after where', function()
    local all = between(r.stdout, 1, 2)
    for _, id in ipairs({ 'amd-primus-r1', 'amd-primus-r2', 'amd-primus-r3', 'nvd-megatron-r1',
      'nvd-megatron-r2', 'nvd-megatron-r3' }) do
      assert.truthy(all:find(id, 1, true), id)
    end
    local amd = between(r.stdout, 2, 3)
    assert.truthy(amd:find('amd-primus-r1', 1, true))
    assert.is_nil(amd:find('nvd-megatron', 1, true))
  end)

  it('draws the loss curves as text', function()
    local p = between(r.stdout, 3, 4)
    assert.truthy(p:find('loss', 1, true))
    assert.truthy(p:find('amd-primus-r1', 1, true), 'the key names the runs')
    assert.truthy(p:find('200', 1, true), 'the x axis reaches iteration 200')
    local axis = 0
    for _ in p:gmatch('[|+]%-%-%-%-%-') do
      axis = axis + 1
    end
    assert.is_true(axis > 0, 'no axis drawn')
  end)

  it('prints the comparison with its ratio and basis', function()
    local c = between(r.stdout, 4, 5)
    assert.truthy(c:find('1.146 better', 1, true))
    assert.truthy(c:find('basis:', 1, true))
  end)

  it('prints the audit', function()
    local a = between(r.stdout, 5, 6)
    assert.truthy(a:find('audit under identical_config (records): valid', 1, true))
  end)

  it('completes methods of R and fields of a run', function()
    local w = between(r.stdout, 6, 7)
    assert.truthy(w:find("R:where({platform = 'nvd'}):ids()", 1, true))
    assert.is_nil(w:find('amd-primus', 1, true))
    local f = between(r.stdout, 7, 8)
    assert.truthy(f:find('r.tokens_per_s_per_gpu', 1, true))
  end)

  it('prints the loss checks and keeps going after a bad call', function()
    assert.truthy(between(r.stdout, 8, 9):find('loss checks: 1 findings', 1, true))
    assert.truthy(between(r.stdout, 9, 10):find(
      "R:plot: unknown chart 'pie' (known: throughput, step_time, loss, memory, mfu, lr, "
      .. 'profile, roofline, idle)', 1, true))
  end)
end)

describe('tplua repl DIR with profiled runs', function()
  local r

  setup(function()
    local state = h.tmpdir()
    r = session({
      { '-x', P }, { '-s', "r = R:run('amd-primus-prof')\n" },
      { '-x', P }, mark(1), { '-x', P }, { '-s', 'r:profile_a\t' },
      { '-x', 'r:profile_analysis(' }, { '-s', ')\n' }, { '-x', 'traces' },
      { '-x', P }, mark(2), { '-x', P }, { '-s', 'R:prof\t' }, { '-x', 'R:profile(' },
      { '-s', ')\n' }, { '-x', 'largest contributors' },
      { '-x', P }, mark(3), { '-x', P }, { '-s', '\x04' },
    }, { h.fixture('results/profiled') }, { XDG_STATE_HOME = state, HOME = state })
  end)

  it('completes the run\'s method and prints its trace summary, read from its traces', function()
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local f = between(r.stdout, 1, 2)
    assert.truthy(f:find('window_ms = 33.131', 1, true), f)
    assert.truthy(f:find('idle_ms = 3.387', 1, true), f)
  end)

  it("prints each platform's breakdown and the explanation of the gap", function()
    local f = between(r.stdout, 2, 3)
    assert.truthy(f:find('nvd runs: nvd-megatron-prof', 1, true), f)
    assert.truthy(f:find('why amd and nvd differ: amd 5.0% faster per step: 33.131 vs 34.892 ms',
      1, true), f)
  end)
end)

describe('tplua repl (no terminal)', function()
  it('prints its usage', function()
    local r = h.run({ 'repl', '--help' })
    assert.are.equal(0, r.code)
    assert.truthy(r.stdout:find("R:plot('loss')", 1, true))
  end)

  it('fails with status 1 when no directory exists', function()
    local r = h.run({ 'repl', '/nonexistent/results' })
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('tplua repl: ', 1, true))
    assert.truthy(r.stderr:find('/nonexistent/results', 1, true))
  end)

  it('rejects options it does not know', function()
    local r = h.run({ 'repl', '--colour' })
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("unknown option '--colour'", 1, true))
  end)

  it('runs statements from standard input with R loaded', function()
    local r = h.run({ 'repl', h.fixture('results/fair') },
      { stdin = 'print(#R, R:run("nvd-megatron-r2").platform)\nprint(R[1].id)\n' })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('6\tnvd', 1, true), r.stdout)
    assert.truthy(r.stdout:find('amd-primus-r1', 1, true), r.stdout)
  end)

  it("exposes each run's trace analysis, the group breakdown and its chart", function()
    local r = h.run({ 'repl', h.fixture('results/profiled'), h.fixture('results/fair') },
      { stdin = table.concat({
        "s, from = R:run('nvd-megatron-prof'):profile_analysis()",
        "print('nvd', s.window_ms, s.gpu, from)",
        "s, from = R:run('amd-primus-prof'):profile_analysis()",
        "print('amd', s.window_ms, s.classes.gemm.exclusive_ms, from)",
        "a = R:run('amd-primus-prof'):trace()",
        "print('ranks', #a.ranks, a.ranks[1].mean.steps)",
        "print('none', R:run('nvd-megatron-r1'):profile_analysis())",
        'print(R:profile())',
        "print(R:where{ platform = 'nvd' }:profile('platform').groups[1].runs[1])",
        "print(R:where{ framework = 'nothing' }:profile())",
        "print(R:plot('profile', { width = 90, height = 24 }))",
      }, '\n') .. '\n' })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    assert.truthy(out:find("R:report('out')  R:profile()\n", 1, true), out)
    assert.truthy(out:find('nvd\t34.892\ttrue\trecord', 1, true), out)
    assert.truthy(out:find('amd\t33.131\t11.646\ttraces', 1, true), out)
    assert.truthy(out:find('ranks\t1\t1', 1, true), out)
    assert.truthy(out:find('none\tnil\tthe run was not profiled (its record has no profile '
      .. 'member)', 1, true), out)
    assert.truthy(out:find('  nvd          1      1   34.892', 1, true), out)
    assert.truthy(out:find('amd against nvd, from the traces of nvd-megatron-prof (nvd) and '
      .. 'amd-primus-prof (amd):', 1, true), out)
    assert.truthy(out:find('> nvd-megatron-prof\n', 1, true), out)
    assert.truthy(out:find('nil\tR:profile: no run of this set was profiled', 1, true), out)
    assert.truthy(out:find('GPU time per step by class (ms)', 1, true), out)
    assert.truthy(out:find('elementwise', 1, true), out)
  end)

  it("prints a run's ops against its GPU's limit, and the roofline as text", function()
    local r = h.run({ 'repl', h.fixture('results/profiled') },
      { stdin = table.concat({
        "print(R:run('nvd-megatron-prof'):ops())",
        "o = R:run('amd-primus-prof'):ops()",
        "print('first', o.rows[1].name, o.rows[1].precision, o.device.catalog)",
        "print(R:plot('roofline', { width = 90, height = 24 }))",
      }, '\n') .. '\n' })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    assert.truthy(out:find('ops: 1198 GPU ops linked to the CPU op that launched them', 1, true),
      out)
    assert.truthy(out:find('\n  aten::mm +%[8944,1024%] %[1024,2816%] +bf16 +48 '), out)
    assert.truthy(out:find('first\taten::mm\tbf16\tmi300x', 1, true), out)
    assert.truthy(out:find('FLOPs per byte moved', 1, true), out)
  end)

  it("prints where a run's memory went, beside the plan's estimate", function()
    local r = h.run({ 'repl', h.fixture('results/profiled') },
      { stdin = table.concat({
        "print(R:run('amd-primus-prof'):memory())",
        "m = R:run('nvd-megatron-prof'):memory()",
        "print('peak', m.primary.label, m.primary.peak, m.primary.peak_op.name)",
        "print(R:run('nvd-megatron-prof').memory.measured.source)",
      }, '\n') .. '\n' })
    assert.are.equal(0, r.code, r.stderr)
    local out = r.stdout
    assert.truthy(out:find('hip:0: peak 2.067 GiB, ', 1, true), out)
    assert.truthy(out:find('against the plan\'s estimate (tp.plan.memory; measured from the '
      .. 'profiler trace):', 1, true), out)
    assert.truthy(out:find('total (the peak) 2.067 GiB measured vs 75.126 GiB estimated', 1,
      true), out)
    assert.truthy(out:find('peak\tcuda:0\t2088508416\taten::mul', 1, true), out)
    assert.truthy(out:find('> trace\n', 1, true), out)
  end)

  it('names an unknown column of R:table and lists the known ones, then carries on', function()
    local r = h.run({ 'repl', h.fixture('results/fair') },
      { stdin = "R:table{'id', 'tokens'}\nprint(R:table{'id', 'mfu'})\n" })
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stderr:find("R:table: unknown column 'tokens': no run has it; did you mean "
      .. 'tokens_per_s, tokens_per_s_per_gpu? (known: id, path, kind, platform', 1, true),
      r.stderr)
    assert.truthy(r.stdout:find('nvd-megatron-r3', 1, true), r.stdout)
  end)
end)
