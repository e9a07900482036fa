-- tplua history check, end to end through the binary, on a SQLite file and on the real
-- PostgreSQL server the spec starts (tests/pg_server.lua): 40 nightly run records
-- (examples/history/nightly.lua) whose software stack changes at one night (ROCm 6.2.4 -> 6.3.1,
-- torch 2.4.1 -> 2.5.0) are added, and check reports one regression at that night naming the
-- changed packages and exits 4 with --fail-on 2 when tokens/s dropped 4% there; nothing, and
-- exit 0, when it did not. The same as JSON, a note shown beside the change, --since.
local h = require('helper')
local pg = require('pg_server')
local json = require('tp.json')
local nightly = dofile(h.source_dir .. '/examples/history/nightly.lua')

local function has(s, text)
  return tostring(s):find(text, 1, true) ~= nil
end

-- The lines of the text report that announce a change ('  2026-03-26  regression  ...').
local function change_lines(text)
  local out = {}
  for line in text:gmatch('[^\n]+') do
    if line:find('^  %d%d%d%d%-%d%d%-%d%d  ') then
      out[#out + 1] = line
    end
  end
  return out
end

local drop_dir, flat_dir, drop

local function generate()
  if drop then
    return
  end
  drop_dir, flat_dir = h.tmpdir(), h.tmpdir()
  -- Same nights and noise; one set 4% slower from the night the stack changes.
  drop = nightly.write(drop_dir, { nights = 40, change_at = 26, drop = 0.04 })
  nightly.write(flat_dir, { nights = 40, change_at = 26, drop = 0 })
end

for _, backend in ipairs(pg.backends()) do
  describe('tplua history check on ' .. backend.name, function()
    if backend.skip then
      it('runs the end-to-end check on ' .. backend.name, function()
        pending(backend.skip)
      end)
      return
    end
    setup(function()
      generate()
      backend.start()
    end)
    teardown(function()
      backend.stop()
    end)

    it('reports the 4% drop at the night the stack changed, and exits 4', function()
      local db = backend.target('drop')
      local r = h.run({ 'history', 'add', drop_dir, '--db', db })
      assert.are.equal(0, r.code, r.stderr)
      assert.truthy(has(r.stdout, '40 runs added'), r.stdout)

      r = h.run({ 'history', 'check', '--db', db, '--fail-on', '2' })
      assert.are.equal(4, r.code, r.stdout .. r.stderr)
      local lines = change_lines(r.stdout)
      assert.are.equal(1, #lines, r.stdout)
      local line = lines[1]
      assert.truthy(line:find('^  2026%-03%-26  regression  '), line)
      assert.truthy(has(line, 'ROCm 6.2.4 -> 6.3.1'), line)
      assert.truthy(has(line, 'torch 2.4.1+rocm6.2.4 -> 2.5.0+rocm6.3.1'), line)
      assert.truthy(has(line, 'RCCL 2.20.5 -> 2.21.5'), line)
      assert.truthy(has(line, 'container image rocm/megatron-lm:v25.2 -> rocm/megatron-lm:v25.3'),
        line)
      -- Nothing that stayed the same is named.
      assert.is_false(has(line, 'amdgpu'), line)
      assert.is_false(has(line, 'Python'), line)
      local pct, lo, hi = line:match(': tokens/s/GPU (%-%d+%.%d)%% %[(%-%d+%.%d), (%-%d+%.%d)%]$')
      assert.truthy(pct, line)
      pct, lo, hi = tonumber(pct), tonumber(lo), tonumber(hi)
      assert.is_true(pct <= -3 and pct >= -5, line)
      assert.is_true(lo < pct and pct < hi and hi < 0, line)
      assert.truthy(has(r.stdout, 'first run after: ' .. drop.change_run_id .. ' ('
        .. drop.change_time .. ')'), r.stdout)
      assert.truthy(has(r.stdout, '  40 runs, 2026-03-01 .. 2026-04-09'), r.stdout)
      assert.truthy(has(r.stdout, '\n1 regression, 0 improvements in 1 series; --fail-on 2%: '
        .. 'FAILED ('), r.stdout)

      -- Without --fail-on the same report gates nothing; beyond the drop it passes.
      r = h.run({ 'history', 'check', '--db', db })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(1, #change_lines(r.stdout))
      r = h.run({ 'history', 'check', '--db', db, '--fail-on', '6' })
      assert.are.equal(0, r.code, r.stderr)
      assert.truthy(has(r.stdout, '--fail-on 6%: passed'), r.stdout)
    end)

    it('gives the same as JSON, and shows a note beside the change', function()
      local db = backend.target('json')
      assert.are.equal(0, h.run({ 'history', 'add', drop_dir, '--db', db }).code)
      local n = h.run({ 'history', 'note', 'amd/mi300x', '2026-03-26', 'new container image',
        '--db', db })
      assert.are.equal(0, n.code, n.stderr)
      local r = h.run({ 'history', 'check', '--db', db, '--fail-on', '2', '--json' })
      assert.are.equal(4, r.code, r.stderr)
      local doc = assert(json.decode(r.stdout))
      assert.are.equal('tplua.history.check/1', doc.schema)
      assert.is_true(doc.failed)
      assert.are.equal(1, doc.regressions)
      assert.are.equal(0, doc.improvements)
      assert.are.equal(1, #doc.results)
      local res = doc.results[1]
      assert.are.equal(40, res.runs)
      assert.are.equal(1, #res.changes)
      local c = res.changes[1]
      assert.are.equal(26, c.index)
      assert.are.equal('regression', c.kind)
      assert.are.equal(drop.change_run_id, c.run_id)
      assert.are.equal(drop.change_time, c.time)
      assert.are.equal(drop.run_ids[25], c.before_run_id)
      assert.are.same({ what = 'ROCm', from = '6.2.4', to = '6.3.1' }, c.stack[1])
      assert.are.same({ { time = '2026-03-26T00:00:00Z', text = 'new container image' } },
        c.notes)
      assert.is_true(c.ci[1] < c.pct and c.pct < c.ci[2] and c.ci[2] < 0)
      assert.are.equal(res.series, doc.failing[1].series)
      -- The text shows the note under the change.
      r = h.run({ 'history', 'check', '--db', db })
      assert.truthy(has(r.stdout, '      note 2026-03-26: new container image'), r.stdout)
    end)

    it('reports nothing and exits 0 when the stack changed but the speed did not', function()
      local db = backend.target('flat')
      assert.are.equal(0, h.run({ 'history', 'add', flat_dir, '--db', db }).code)
      local r = h.run({ 'history', 'check', '--db', db, '--fail-on', '2' })
      assert.are.equal(0, r.code, r.stdout .. r.stderr)
      assert.are.same({}, change_lines(r.stdout))
      assert.truthy(has(r.stdout, '  no change point\n'), r.stdout)
      assert.truthy(has(r.stdout, ': no change\n'), r.stdout)
      assert.truthy(has(r.stdout, '\n0 regressions, 0 improvements in 1 series; --fail-on 2%: '
        .. 'passed\n'), r.stdout)
      r = h.run({ 'history', 'check', '--db', db, '--fail-on', '2', '--json' })
      assert.are.equal(0, r.code, r.stderr)
      local doc = assert(json.decode(r.stdout))
      assert.is_false(doc.failed)
      assert.are.equal(0, doc.regressions)
      assert.are.same({}, doc.results[1].changes)
      assert.is_nil(doc.results[1].latest.kind)
    end)

    it('limits the runs with --since', function()
      local db = backend.target('since')
      assert.are.equal(0, h.run({ 'history', 'add', drop_dir, '--db', db }).code)
      -- From 2026-03-20: 21 runs, the change 7th among them.
      local r = h.run({ 'history', 'check', '--db', db, '--since', '2026-03-20', '--json' })
      assert.are.equal(0, r.code, r.stderr)
      local doc = assert(json.decode(r.stdout))
      assert.are.equal('2026-03-20', doc.since)
      assert.are.equal(21, doc.results[1].runs)
      assert.are.equal(7, doc.results[1].changes[1].index)
      assert.are.equal(drop.change_run_id, doc.results[1].changes[1].run_id)
      -- After the change only: too few runs for change points, and none found.
      r = h.run({ 'history', 'check', '--db', db, '--since', '2026-04-03' })
      assert.are.equal(0, r.code, r.stderr)
      assert.truthy(has(r.stdout, 'too few runs: 7 runs with tokens_per_s_per_gpu: change points '
        .. 'need at least 10'), r.stdout)
      assert.are.same({}, change_lines(r.stdout))
    end)
  end)
end
