-- tp._db, the same behaviour on both backends: a real SQLite file and a real PostgreSQL server
-- (started by tests/pg_server.lua, stopped by pid; pending where it cannot run). Values of every
-- type round-trip, `?` inside literals is left alone, conflicts are skipped, transactions commit
-- and roll back; then what each backend adds: concurrent writers to one SQLite file lose
-- nothing and a damaged file is refused untouched; a PostgreSQL that is down or refuses the
-- password is a clear error with no password in it.
local h = require('helper')
local db = require('tp._db')
local proc = require('tp.proc')
local pg_server = require('pg_server')

local TABLE = [[
CREATE TABLE t (
  id BIGINT PRIMARY KEY,
  i BIGINT,
  f DOUBLE PRECISION,
  s TEXT,
  k TEXT UNIQUE
)]]

for _, b in ipairs(pg_server.backends()) do
  describe('tp._db on ' .. b.name .. (b.name == 'postgresql' and ' #slow' or ''), function()
    if b.skip then
      it('runs the database specs', function()
        pending(b.skip)
      end)
      return
    end
    setup(b.start)
    teardown(b.stop)

    local count = 0
    local function fresh()
      count = count + 1
      local c = assert(db.open(b.target('db' .. count)))
      assert(c:script(TABLE))
      return c
    end

    it('opens the backend the target names', function()
      local c <close> = fresh()
      assert.are.equal(b.name, c:backend())
      assert.truthy(tostring(c):find('tp.Db (' .. b.name, 1, true))
    end)

    it('round-trips integers, floats, text and NULL with their types', function()
      local c <close> = fresh()
      local long = string.rep('0123456789abcdef', 65536)  -- 1 MiB
      local values = {
        { 1, math.maxinteger, 0.1, 'plain' },
        { 2, math.mininteger, -1e300, "it's a 'quote' and a ? mark" },
        { 3, 0, 2.0, 'héllo ✓ 日本' },
        { 4, -7, 1.5, long },
      }
      for _, v in ipairs(values) do
        assert.are.equal(1, c:exec('INSERT INTO t (id, i, f, s) VALUES (?, ?, ?, ?)', v[1], v[2],
          v[3], v[4]))
      end
      -- A NULL in the middle, as nil and as db.NULL.
      assert.are.equal(1, c:exec('INSERT INTO t (id, i, f, s) VALUES (?, ?, ?, ?)', 5, nil, 2.5,
        'x'))
      assert.are.equal(1, c:exec('INSERT INTO t (id, i, f, s) VALUES (?, ?, ?, ?)', 6, db.NULL,
        require('tp.json').null, 'y'))  -- one sentinel: db.NULL is tp.json.null
      local rows, cols = c:query('SELECT id, i, f, s FROM t WHERE id <= ? ORDER BY id', 6)
      assert.are.same({ 'id', 'i', 'f', 's' }, cols)
      assert.are.equal(6, #rows)
      for n, v in ipairs(values) do
        local r = rows[n]
        assert.are.equal('integer', math.type(r.id))
        assert.are.equal(v[2], r.i)
        assert.are.equal('integer', math.type(r.i))
        assert.are.equal(v[3], r.f)
        assert.are.equal('float', math.type(r.f))
        assert.are.equal(v[4], r.s)
      end
      assert.is_nil(rows[5].i)
      assert.are.equal(2.5, rows[5].f)
      assert.is_nil(rows[6].i)
      assert.is_nil(rows[6].f)
      assert.are.equal('y', rows[6].s)
      -- Parameters come back typed from a bare SELECT too.
      local r = assert(c:query('SELECT ? AS a, ? AS b, ? AS c', 42, 0.25, 'txt'))[1]
      assert.are.same({ a = 42, b = 0.25, c = 'txt' }, r)
      assert.are.equal('integer', math.type(r.a))
    end)

    it('takes booleans as parameters', function()
      local c <close> = fresh()
      local r = assert(c:query('SELECT ? AS yes, ? AS no', true, false))[1]
      if b.name == 'postgresql' then
        assert.are.same({ yes = true, no = false }, r)
      else
        assert.are.same({ yes = 1, no = 0 }, r)
      end
    end)

    it('leaves ? inside literals, identifiers and comments alone', function()
      local c <close> = fresh()
      local rows = assert(c:query([[SELECT '?' AS "why?", ? AS p -- a comment?
        , 'it''s ?' AS q /* ? */]], 7))
      assert.are.same({ ['why?'] = '?', p = 7, q = "it's ?" }, rows[1])
    end)

    it('returns no rows as an empty list with the column names', function()
      local c <close> = fresh()
      local rows, cols = c:query('SELECT id, s FROM t WHERE id = ?', -1)
      assert.are.same({}, rows)
      assert.are.same({ 'id', 's' }, cols)
    end)

    it('skips a conflicting row with ON CONFLICT DO NOTHING and counts changes', function()
      local c <close> = fresh()
      local ins = 'INSERT INTO t (id, k) VALUES (?, ?) ON CONFLICT (k) DO NOTHING'
      assert.are.equal(1, c:exec(ins, 1, 'same'))
      assert.are.equal(0, c:exec(ins, 2, 'same'))
      assert.are.equal(1, c:exec(ins, 3, 'other'))
      assert.are.equal(2, c:exec('UPDATE t SET i = ? WHERE i IS NULL', 5))
      assert.are.equal(0, c:exec('SELECT * FROM t'))
      assert.are.equal(1, c:exec('DELETE FROM t WHERE k = ?', 'other'))
      assert.are.equal(1, c:exec(ins, 3, 'other'))
      assert.are.equal(2, c:query('SELECT count(*) AS n FROM t')[1].n)
      -- Without ON CONFLICT the duplicate is an error, and nothing changes.
      local ok, err, code = c:exec('INSERT INTO t (id, k) VALUES (?, ?)', 4, 'same')
      assert.is_nil(ok)
      assert.are.equal('EDB', code)
      assert.truthy(err:lower():find('unique', 1, true), err)
      assert.are.equal(2, c:query('SELECT count(*) AS n FROM t')[1].n)
    end)

    it('commits and rolls back transactions', function()
      local c <close> = fresh()
      assert.is_true(c:begin())
      c:exec('INSERT INTO t (id) VALUES (?)', 1)
      assert.is_true(c:rollback())
      assert.are.equal(0, c:query('SELECT count(*) AS n FROM t')[1].n)
      assert.is_true(c:begin())
      for i = 1, 100 do
        assert(c:exec('INSERT INTO t (id) VALUES (?)', i))
      end
      assert.is_true(c:commit())
      assert.are.equal(100, c:query('SELECT count(*) AS n FROM t')[1].n)
      -- A failed statement inside a transaction, then a rollback: nothing of it stays.
      assert.is_true(c:begin())
      assert(c:exec('INSERT INTO t (id) VALUES (?)', 1000))
      assert.is_nil(c:exec('INSERT INTO t (id) VALUES (?)', 1))
      assert.is_true(c:rollback())
      assert.are.equal(100, c:query('SELECT count(*) AS n FROM t')[1].n)
      -- Committing with no transaction: SQLite's error, returned; PostgreSQL only warns.
      if b.name == 'sqlite' then
        local ok, _, code = c:commit()
        assert.is_nil(ok)
        assert.are.equal('EDB', code)
      else
        assert.is_true(c:commit())
      end
    end)

    it('runs a script of several statements, and stops at a failing one', function()
      local c <close> = fresh()
      assert.is_true(c:script([[
        CREATE TABLE a (x BIGINT);
        INSERT INTO a VALUES (1);
        INSERT INTO a VALUES (2);
      ]]))
      assert.are.equal(2, c:query('SELECT count(*) AS n FROM a')[1].n)
      local ok, err, code = c:script('INSERT INTO a VALUES (3); SELECT * FROM missing_table;')
      assert.is_nil(ok)
      assert.are.equal('EDB', code)
      assert.truthy(err:find('missing_table', 1, true), err)
    end)

    it('refuses several statements and wrong parameter counts in exec and query', function()
      local c <close> = fresh()
      local ok, err, code = c:exec('INSERT INTO t (id) VALUES (1); INSERT INTO t (id) VALUES (2)')
      assert.is_nil(ok)
      assert.are.equal('EINVAL', code)
      assert.truthy(err:find('several statements', 1, true), err)
      assert.are.equal(0, c:query('SELECT count(*) AS n FROM t')[1].n)
      ok, err, code = c:query('SELECT ? AS a', 1, 2)
      assert.is_nil(ok)
      assert.are.equal('EINVAL', code)
      assert.truthy(err:find('1 placeholders in the statement, 2 parameters given', 1, true), err)
      ok, err, code = c:exec('SELEC 1')
      assert.is_nil(ok)
      assert.are.equal('EDB', code)
      assert.truthy(err:find('syntax error', 1, true), err)
    end)

    it('raises on misuse: a bad parameter type, a closed connection, bad options', function()
      local c = fresh()
      assert.has_error(function()
        c:exec('SELECT ?', {})
      end, "bad argument #2 to 'exec' (nil, db.NULL, boolean, number or string expected, "
        .. 'got table)')
      c:close()
      c:close()  -- idempotent
      assert.are.equal('tp.Db (closed)', tostring(c))
      assert.has_error(function()
        c:query('SELECT 1')
      end, 'attempt to use a closed database')
      assert.has_error(function()
        db.open(b.target('opts'), { timeout = 1 })
      end, "bad option 'timeout' to 'open'")
      -- The function's name in the message depends on the call; the reason does not.
      local function raises(want, f, ...)
        local ok, e = pcall(f, ...)
        assert.is_false(ok)
        assert.truthy(tostring(e):find(want, 1, true), e)
      end
      raises("bad argument #1 to '", db.open, '')
      raises('(a non-empty target without NUL expected)', db.open, '')
      raises('(a non-empty target without NUL expected)', db.open, 'a\0b')
      raises('(timeout_ms out of range)', db.open, b.target('range1'), { timeout_ms = -1 })
      raises('(timeout_ms out of range)', db.open, b.target('range2'),
        { timeout_ms = math.maxinteger })
      local d <close> = fresh()
      assert.has_error(function()
        d:exec('SELECT 1\0; DROP TABLE t')
      end, "bad argument #1 to 'exec' (SQL text without NUL bytes expected)")
    end)

    it('stops reading rows when a finalizer closes the connection mid-query', function()
      local c = fresh()
      assert(c:exec([[WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n
        WHERE i < 50000) INSERT INTO t (id, s) SELECT i, ? FROM n]], string.rep('y', 64)))
      -- A collection while the rows are built runs this finalizer, which closes c: the rows
      -- (which point into the connection) must not be read further.
      local ran = 0
      collectgarbage()
      setmetatable({}, { __gc = function()
        ran = ran + 1
        c:close()
      end })
      collectgarbage('incremental', 1, 1000)  -- a step on about every allocation
      local ok, err = pcall(c.query, c, 'SELECT id, s FROM t ORDER BY id')
      collectgarbage('incremental', 200, 100)
      assert.are.equal(1, ran)
      assert.is_false(ok)
      assert.truthy(tostring(err):find('attempt to use a closed database', 1, true), err)
      assert.are.equal('tp.Db (closed)', tostring(c))
    end)

    it('closes on leaving a <close> scope', function()
      local kept
      do
        local c <close> = fresh()
        kept = c
      end
      assert.are.equal('tp.Db (closed)', tostring(kept))
    end)

    it('loses nothing when two tplua processes add 2,000 rows each at once', function()
      local path = b.target('concurrent')
      do
        local c <close> = assert(db.open(path))
        assert(c:script('CREATE TABLE r (who TEXT, i BIGINT, PRIMARY KEY (who, i))'))
      end
      local code = [[
        local who, path = %q, %q
        local now = require('tp.gpu').now
        local c = assert(require('tp._db').open(path))
        local first = now()
        for i = 1, 2000 do
          assert(c:exec('INSERT INTO r (who, i) VALUES (?, ?)', who, i))
        end
        print(first, now())
        c:close()
      ]]
      local a = assert(proc.spawn({ argv = { h.bin, '-e', code:format('a', path) },
        capture = true }))
      local z = assert(proc.spawn({ argv = { h.bin, '-e', code:format('z', path) },
        capture = true }))
      local ra, rz = a:wait(), z:wait()
      a:close()
      z:close()
      assert.are.equal(0, ra.code, ra.stderr)
      assert.are.equal(0, rz.code, rz.stderr)
      -- The two really wrote at the same time: their first and last inserts interleave.
      local a0, a1 = ra.stdout:match('(%S+)%s+(%S+)')
      local z0, z1 = rz.stdout:match('(%S+)%s+(%S+)')
      assert.is_true(tonumber(a0) < tonumber(z1) and tonumber(z0) < tonumber(a1), ra.stdout
        .. rz.stdout)
      local c <close> = assert(db.open(path))
      local rows = c:query('SELECT who, count(*) AS n FROM r GROUP BY who ORDER BY who')
      assert.are.same({ { who = 'a', n = 2000 }, { who = 'z', n = 2000 } }, rows)
      if b.name == 'sqlite' then
        assert.are.equal('wal', c:query('PRAGMA journal_mode')[1].journal_mode)
      end
    end)

    if b.name == 'sqlite' then
      it('keeps text with NUL bytes whole', function()
        local c <close> = fresh()
        local s = 'a\0b\0\0c'
        c:exec('INSERT INTO t (id, s) VALUES (?, ?)', 1, s)
        assert.are.equal(s, c:query('SELECT s FROM t')[1].s)
      end)

      it('refuses a damaged file as ENOTDB, naming it, and leaves its bytes alone', function()
        local good = b.target('damaged')
        do
          local c <close> = assert(db.open(good))
          assert(c:script(TABLE))
          assert(c:exec('INSERT INTO t (id, s) VALUES (?, ?)', 1, 'kept'))
          assert(c:script('PRAGMA wal_checkpoint(TRUNCATE)'))
        end
        local bytes = assert(h.read(good))
        -- Overwrite the header's magic string: no longer an SQLite file.
        local damaged = 'This is not SQLite' .. bytes:sub(19)
        h.write(good, damaged)
        local c, err, code = db.open(good)
        assert.is_nil(c)
        assert.are.equal('ENOTDB', code)
        assert.are.equal(good .. ': file is not a database', err)
        assert.are.equal(damaged, h.read(good))
        -- A text file is refused the same way.
        local text = b.target('notes')
        h.write(text, 'just some notes\n')
        c, err, code = db.open(text)
        assert.is_nil(c)
        assert.are.equal('ENOTDB', code)
        assert.truthy(err:find(text, 1, true))
        assert.are.equal('just some notes\n', h.read(text))
      end)

      it('says why a file in an unwritable place cannot be opened', function()
        local c, err, code = db.open('/proc/no-such-dir/history.db')
        assert.is_nil(c)
        assert.are.equal('EDB', code)
        assert.are.equal('/proc/no-such-dir/history.db: unable to open database file '
          .. '(No such file or directory)', err)
      end)
    end

    if b.name == 'postgresql' then
      it('refuses text with a NUL byte as a parameter', function()
        local c <close> = fresh()
        local ok, err, code = c:exec('INSERT INTO t (id, s) VALUES (?, ?)', 1, 'a\0b')
        assert.is_nil(ok)
        assert.are.equal('EINVAL', code)
        assert.truthy(err:find('parameter 2', 1, true), err)
      end)

      it('refuses a wrong password as EAUTH without the password in the message', function()
        local server = b.server()
        local c, err, code = db.open(server:secure_url('Wrong-pass-7x'))
        assert.is_nil(c)
        assert.are.equal('EAUTH', code)
        assert.truthy(err:find('password authentication failed', 1, true), err)
        assert.falsy(err:find('Wrong-pass-7x', 1, true), err)
        assert.truthy(err:find('guarded:***@', 1, true), err)
        -- A password with an unencoded '/' or '@' (not a password libpq can read) is hidden whole.
        for _, pw in ipairs({ 'Sl/ash-pw-93', 'At@sign-pw-93' }) do
          local url = string.format('postgresql://guarded:%s@/postgres?host=%s&port=%d', pw,
            server.dir, server.port)
          c, err = db.open(url)
          assert.is_nil(c)
          for piece in pw:gmatch('[%w-]+') do
            if #piece > 3 then
              assert.falsy(err:find(piece, 1, true), err)
            end
          end
        end
        -- The right password is let in.
        local ok = assert(db.open(server:secure_url(pg_server.GUARDED_PASSWORD)))
        assert.are.equal(1, ok:query('SELECT 1 AS one')[1].one)
        ok:close()
      end)

      it('says ECONNECT when the server is down, also for an open connection', function()
        local other = pg_server.start()
        local c = assert(db.open(other.url))
        assert.are.equal(1, c:query('SELECT 1 AS one')[1].one)
        other:stop()
        local ok, err, code = c:query('SELECT 1 AS one')
        assert.is_nil(ok)
        assert.are.equal('ECONNECT', code)
        assert.truthy(err:find(other.url, 1, true), err)
        c:close()
        ok, err, code = db.open(other.url)
        assert.is_nil(ok)
        assert.are.equal('ECONNECT', code)
        assert.truthy(err:find(other.url .. ': ', 1, true), err)
      end)

      it('maps numeric, smallint and boolean columns to Lua types', function()
        local c <close> = fresh()
        local r = c:query([[SELECT 2.5::numeric AS n, 3::smallint AS s, 4::int AS i,
          1.25::real AS r, true AS t, 'x'::varchar AS v, NULL::int AS z]])[1]
        assert.are.same({ n = 2.5, s = 3, i = 4, r = 1.25, t = true, v = 'x' }, r)
        assert.are.equal('integer', math.type(r.s))
        assert.are.equal('float', math.type(r.n))
      end)
    end
  end)
end
