-- `tplua history add` killed with SIGKILL in the middle of a 10,000-record import, 20 times at
-- seeded random moments: after each kill the SQLite database passes PRAGMA integrity_check and
-- holds no run twice; a last import completes it, with exactly 10,000 runs.
local h = require('helper')
local fs = require('tp.fs')
local proc = require('tp.proc')
local db = require('tp._db')

local N = 10000

-- The state of the database: integrity_check's answer, runs, distinct sha256, series.
local function inspect(target)
  local c <close> = assert(db.open(target))
  local ic = assert(c:query('PRAGMA integrity_check'))
  local counts = assert(c:query('SELECT COUNT(*) AS n, COUNT(DISTINCT sha256) AS d, '
    .. 'COUNT(DISTINCT run_id) AS ids FROM runs'))[1]
  local fk = assert(c:query('SELECT COUNT(*) AS n FROM runs r LEFT JOIN series s ON '
    .. 's.id = r.series_id WHERE s.id IS NULL'))[1].n
  return { integrity = ic[1].integrity_check, runs = counts.n, distinct = counts.d,
    ids = counts.ids, orphans = fk }
end

describe('tplua history add killed with SIGKILL #slow', function()
  it('leaves a sound database every time, and a re-run completes the import', function()
    local dir = h.tmpdir()
    -- The 10,000 input files on a memory file system when there is one (making and removing
    -- them is most of the time on a disk); the databases stay on the disk.
    local recs = dir .. '/recs'
    if fs.is_dir('/dev/shm') then
      local p = io.popen('mktemp -d /dev/shm/tplua-history.XXXXXX 2>/dev/null')
      local shm = p:read('l')
      p:close()
      if shm and shm ~= '' then
        recs = shm
        finally(function()
          fs.remove_tree(shm)
        end)
      end
    end
    local gen = h.run({ h.source_dir .. '/bench/history/records.lua', recs, tostring(N), '3' })
    assert.are.equal(0, gen.code, gen.stderr)
    assert.are.equal(N, #assert(fs.glob(recs .. '/*.json')))
    local target = dir .. '/h.db'
    -- How long a whole import takes here: kill moments are drawn as fractions of it.
    local now = require('tp.gpu').now
    local t0 = now()
    local ref = h.run({ 'history', 'add', recs, '--db', dir .. '/reference.db' })
    local total = now() - t0
    assert.are.equal(0, ref.code, ref.stderr)
    math.randomseed(20261127)
    local landed, partial, last = 0, 0, 0
    for i = 1, 20 do
      local delay = total * (0.05 + math.random() * 0.9)
      local loop = proc.loop()
      local p = assert(loop:spawn({ argv = { h.bin, 'history', 'add', recs, '--db', target },
        cwd = h.source_dir, env = { TPLUA_HISTORY = '' } }))
      loop:after(delay, function()
        if not p:done() then
          p:kill('SIGKILL')
        end
      end)
      local r = p:wait()
      loop:close()
      assert.is_true(r.code == 137 or r.code == 0, 'attempt ' .. i .. ': exit ' .. r.code)
      if r.code == 137 then
        landed = landed + 1
      end
      if fs.exists(target) then
        local s = inspect(target)
        assert.are.equal('ok', s.integrity, 'attempt ' .. i)
        assert.are.equal(s.runs, s.distinct, 'attempt ' .. i .. ': a run stored twice')
        assert.are.equal(s.runs, s.ids, 'attempt ' .. i .. ': a run id stored twice')
        assert.are.equal(0, s.orphans, 'attempt ' .. i)
        assert.is_true(s.runs >= last, 'attempt ' .. i .. ': runs were lost')
        assert.is_true(s.runs <= N)
        if s.runs > 0 and s.runs < N then
          partial = partial + 1
        end
        last = s.runs
      end
    end
    assert.is_true(landed >= 10, landed .. ' of 20 kills landed before the import ended')
    assert.is_true(partial >= 3, 'only ' .. partial .. ' kills left a partial import')
    local r = h.run({ 'history', 'add', recs, '--db', target })
    assert.are.equal(0, r.code, r.stderr)
    local s = inspect(target)
    assert.are.equal('ok', s.integrity)
    assert.are.equal(N, s.runs)
    assert.are.equal(N, s.distinct)
    assert.are.equal(20, #assert(db.open(target):query('SELECT id FROM series')))
  end)
end)
