-- tp.history's store on both backends, a SQLite file and the real PostgreSQL server the spec
-- starts (tests/pg_server.lua): adding records (each once), series, points, notes, records;
-- databases it must refuse (a newer schema, not a history, a damaged file, a server that is
-- down or refuses the password), each with a clear message and nothing written.
local h = require('helper')
local pg = require('pg_server')
local history = require('tp.history')
local json = require('tp.json')
local fs = require('tp.fs')
local db = require('tp._db')

local EXAMPLES = h.source_dir .. '/examples/runs/llama3.1-8b-identical'
local TPRIMAT = h.fixture('results/tprimat')

local function has(s, text)
  return tostring(s):find(text, 1, true) ~= nil
end

-- A small valid record (the shape tp.run writes, without per-iteration arrays).
local function record(i, opts)
  opts = opts or {}
  return {
    schema = 'tplua.run/2', run_id = opts.run_id or string.format('night-%02d', i),
    platform = 'amd', framework = 'primus', model = 'llama3.1-8b',
    methodology = 'identical_config', status = opts.status or 'completed', ['repeat'] = 1,
    gpu_info = { device_name = 'AMD Instinct MI300X', device_count = 8, hardware = 'mi300x' },
    training_config = { global_batch_size = 128, sequence_length = 2048, num_gpus = 8,
      micro_batch_size = 2, precision = 'bf16' },
    performance_metrics = { avg_step_time_seconds = 3.2, std_step_time_seconds = 0.032,
      tokens_per_second = 81920 + i, tokens_per_second_per_gpu = (81920 + i) / 8,
      steady_state = { method = 'mser-5', records = 100 } },
    source = { started_at = string.format('2026-11-%02dT02:00:00Z', i) },
    environment = { python = { torch = i < 5 and '2.4.1' or '2.5.1' },
      framework = { name = 'primus', version = '0.3.0' } },
    diagnostics = json.array(),
  }
end

local function file_sha(path)
  return (require('tp._digest').sha256_file(path))
end

for _, backend in ipairs(pg.backends()) do
  describe('tp.history on ' .. backend.name, function()
    if backend.skip then
      it('runs the store specs on ' .. backend.name, function()
        pending(backend.skip)
      end)
      return
    end
    setup(function()
      backend.start()
    end)
    teardown(function()
      backend.stop()
    end)

    it('adds records once each, with their series, points and records', function()
      local target = backend.target('adds')
      local H = assert(history.open(target))
      assert.are.equal(backend.name, H.backend)
      local r = assert(H:add({ EXAMPLES, TPRIMAT }))
      assert.are.equal(10, r.added)
      assert.are.equal(0, r.skipped)
      assert.are.same({}, r.failed)
      -- The same again: nothing added, everything found stored.
      local again = assert(H:add({ EXAMPLES }))
      assert.are.equal(0, again.added)
      assert.are.equal(6, again.skipped)
      local list = assert(H:series_list())
      local by_key = {}
      for _, s in ipairs(list) do
        by_key[s.key] = s
      end
      local amd = by_key['amd/-/primus@-/llama3.1-8b/3fc2f71e0f3b/identical_config']
      assert.is_table(amd, 'series keys: ' .. json.encode(H:series():keys()))
      assert.are.equal(3, amd.count)
      assert.are.equal('primus', amd.framework)
      assert.is_nil(amd.gpu)
      -- The same config on the other platform hashes alike.
      assert.is_table(by_key['nvd/-/megatron@-/llama3.1-8b/3fc2f71e0f3b/identical_config'])
      -- tprimat-era files keep their own timestamp as the time of the run.
      local tp_amd = H:series({ match = 'AMD Instinct MI300X/%-@%-/%-/74cc' })
      assert.are.equal(1, #tp_amd)
      assert.are.equal('2026-01-05T11:33:57Z', tp_amd[1].first_time)

      local pts = assert(H:points(amd.key))
      assert.are.equal(3, #pts)
      local ids = {}
      for i, p in ipairs(pts) do
        ids[i] = p.run_id
        assert.are.equal('file mtime', p.time_basis)
        assert.is_true(p.ci_lo < p.value and p.value < p.ci_hi)
        assert.are.equal(p.value, p.metrics.tokens_per_s_per_gpu)
        assert.are.equal(64, #p.sha256)
      end
      table.sort(ids)
      assert.are.same({ 'amd-primus-e84adbb11776-r1', 'amd-primus-e84adbb11776-r2',
        'amd-primus-e84adbb11776-r3' }, ids)
      -- tokens/s/GPU as the record has it (performance_metrics.tokens_per_second_per_gpu).
      local r1 = assert(json.load_file(EXAMPLES .. '/amd/amd-primus-e84adbb11776-r1.json'))
      local by_id = {}
      for _, p in ipairs(pts) do
        by_id[p.run_id] = p
      end
      assert.are.equal(r1.performance_metrics.tokens_per_second_per_gpu,
        by_id['amd-primus-e84adbb11776-r1'].value)
      -- The whole record comes back, by sha256 (or a prefix of it) and by run id.
      local rec, info = assert(H:record(pts[1].sha256))
      assert.are.equal(pts[1].run_id, rec.run_id)
      assert.are.equal(500, #rec.step_times)
      assert.are.equal(amd.key, info.key)
      assert.are.equal(pts[1].run_id, (H:record(pts[1].sha256:sub(1, 10))).run_id)
      assert.are.equal('amd-primus-e84adbb11776-r2',
        (H:record('amd-primus-e84adbb11776-r2')).run_id)
      local none, nerr, ncode = H:record('no-such-run')
      assert.is_nil(none)
      assert.are.equal('ENOENT', ncode)
      assert.is_true(has(nerr, "no run 'no-such-run'"), nerr)
      H:close()
      assert.has_error(function()
        H:series_list()
      end, 'History:series_list: the history is closed')
    end)

    it('keeps a nightly series in time order with its stack, metrics and notes', function()
      local H = assert(history.open(backend.target('nightly')))
      -- Added out of order, as tables.
      local recs = {}
      for _, i in ipairs({ 7, 2, 9, 1, 5, 3, 8, 4, 6 }) do
        recs[#recs + 1] = record(i)
      end
      recs[#recs + 1] = record(10, { status = 'failed' })
      recs[#recs + 1] = { schema = 'tplua.run/2', run_id = 'bad', step_times = 'fast' }
      -- Three records a transaction: the batches follow each other into one series.
      local r = assert(H:add(recs, { batch = 3 }))
      assert.are.equal(9, r.added)
      assert.are.equal(1, #r.ignored)
      assert.are.equal("records[10]: a failed run (status 'failed'): its figures are not kept",
        r.ignored[1].reason)
      assert.are.equal(1, #r.failed)
      assert.are.equal('records[11]', r.failed[1].path)
      assert.are.equal('records[11]: step_times is string, array expected', r.failed[1].error)
      local set = assert(H:series({ platform = 'amd', gpu = 'mi300x' }))
      assert.are.equal(1, #set)
      local key = set[1].key
      assert.are.equal(key, 'amd/mi300x/primus@0.3.0/llama3.1-8b/' .. set[1].config_hash
        .. '/identical_config')
      assert.is_true(has(tostring(set), key))
      local pts = assert(H:points(key))
      assert.are.equal(9, #pts)
      for i, p in ipairs(pts) do
        assert.are.equal(string.format('night-%02d', i), p.run_id)
        assert.are.equal(string.format('2026-11-%02dT02:00:00Z', i), p.time)
        assert.are.equal('record', p.time_basis)
        assert.are.equal(i < 5 and '2.4.1' or '2.5.1', p.environment.python.torch)
      end
      local since = assert(H:points(key, { since = '2026-11-06', metric = 'step_time_s' }))
      assert.are.equal(4, #since)
      assert.are.equal(3.2, since[1].value)
      assert.is_near(3.2 - 1.96 * 0.032 / 10, since[1].ci_lo, 1e-12)
      assert.are.equal(3, #assert(H:points(key, { last = 3 })))
      assert.are.equal('night-09', assert(H:points(key, { last = 3 }))[3].run_id)
      assert.are.same({}, assert(H:points(key, { metric = 'mfu' })))
      local _, merr = H:points(key, { metric = 'speed' })
      assert.is_true(has(merr, "unknown metric 'speed'"), merr)
      local _, serr = H:points('amd/nope')
      assert.is_true(has(serr, "no series 'amd/nope'"), serr)

      assert(H:note(key, '2026-11-05', 'ROCm 6.3 rolled out'))
      assert(H:note('*', '2026-11-02T08:00:00Z', 'new cooling'))
      local notes = assert(H:notes(key))
      assert.are.equal(2, #notes)
      assert.are.equal('new cooling', notes[1].text)
      assert.are.equal('*', notes[1].series_key)
      assert.are.equal('2026-11-05T00:00:00Z', notes[2].time)
      local ok, err = H:note('amd/nope', '2026-11-05', 'x')
      assert.is_nil(ok)
      assert.is_true(has(err, "no series 'amd/nope'"), err)
      ok, err = H:note(key, '5 Nov', 'x')
      assert.is_nil(ok)
      assert.is_true(has(err, "'5 Nov' is not a date"), err)
      -- A unique part of a key names its series; an ambiguous one says which match.
      assert.are.equal(key, (H:resolve('mi300x')).key)
      H:close()
    end)

    it('lists runs of the same time by run id, whatever order they were added in', function()
      local H = assert(history.open(backend.target('same_time')))
      local recs = {}
      for i, id in ipairs({ 'r-c', 'r-e', 'r-a', 'r-d', 'r-b' }) do
        recs[i] = record(1, { run_id = id })
      end
      assert.are.equal(5, assert(H:add(recs)).added)
      local key = assert(H:series_list())[1].key
      local ids = {}
      for i, p in ipairs(assert(H:points(key))) do
        ids[i] = p.run_id
      end
      assert.are.same({ 'r-a', 'r-b', 'r-c', 'r-d', 'r-e' }, ids)
      ids = {}
      for i, p in ipairs(assert(H:points(key, { last = 2 }))) do
        ids[i] = p.run_id
      end
      assert.are.same({ 'r-d', 'r-e' }, ids)
      H:close()
    end)

    it('names and skips a file that is not a run record, keeping the others', function()
      local dir = h.tmpdir()
      h.write(dir .. '/good.json', assert(json.encode(record(1))))
      h.write(dir .. '/plan.json', '{"schema": "tplua.plan/1", "runs": []}')
      h.write(dir .. '/notes.json', '{"title": "my notes"}')
      h.write(dir .. '/cut.json', '{"schema": "tplua.run/2", "run_id": "x", ')
      local other = h.tmpdir() .. '/settings.json'
      h.write(other, '{"theme": "dark"}')
      local H = assert(history.open(backend.target('bad_input')))
      local r = assert(H:add({ dir, dir .. '/missing.json', other }))
      assert.are.equal(1, r.added)
      -- Named by an argument, or damaged: failed. Other JSON found in a directory: passed by,
      -- and said so.
      local failed, ignored = {}, {}
      for _, f in ipairs(r.failed) do
        failed[fs.basename(f.path)] = f.error
      end
      for _, f in ipairs(r.ignored) do
        ignored[fs.basename(f.path)] = f.reason
      end
      assert.is_true(has(ignored['plan.json'], dir .. "/plan.json: not a run record: schema "
        .. "'tplua.plan/1'"), ignored['plan.json'])
      assert.is_true(has(ignored['notes.json'], dir .. '/notes.json: neither a run record'),
        ignored['notes.json'])
      assert.is_true(has(failed['settings.json'], other .. ': neither a run record'),
        failed['settings.json'])
      assert.is_true(has(failed['cut.json'], dir .. '/cut.json'), failed['cut.json'])
      assert.is_true(has(failed['missing.json'], 'missing.json'), failed['missing.json'])
      assert.are.equal(3, #r.failed)
      assert.are.equal(2, #r.ignored)
      assert.are.equal(1, #assert(H:series_list()))
      H:close()
    end)

    it('refuses a database of a newer schema, writing nothing', function()
      local target = backend.target('newer')
      local H = assert(history.open(target))
      assert(H:add({ record(1) }))
      H:close()
      do
        local c <close> = assert(db.open(target))
        assert(c:exec("UPDATE meta SET value = '2' WHERE key = 'schema_version'"))
      end
      local before = backend.name == 'sqlite' and file_sha(target)
      local H2, err, code = history.open(target)
      assert.is_nil(H2)
      assert.are.equal('ENEWER', code)
      assert.is_true(has(err, history.display(target) .. ': the history has schema version 2, '
        .. 'newer than this tplua reads (1)'), err)
      assert.is_true(has(err, 'nothing was changed'), err)
      if before then
        assert.are.equal(before, file_sha(target))
      end
      local c <close> = assert(db.open(target))
      assert.are.equal(1, assert(c:query('SELECT COUNT(*) AS n FROM runs'))[1].n)
      assert.are.equal('2', assert(c:query("SELECT value FROM meta WHERE key = "
        .. "'schema_version'"))[1].value)
    end)

    it('migrates an older schema in one transaction, keeping its runs; a failed one changes '
      .. 'nothing', function()
        local store = require('tp.history._store')
        local target = backend.target('migrate')
        local H = assert(history.open(target))
        assert(H:add({ record(1), record(2) }))
        H:close()
        local function version_and_runs()
          local c <close> = assert(db.open(target))
          local v = assert(c:query("SELECT value FROM meta WHERE key = 'schema_version'"))[1].value
          return v, assert(c:query('SELECT COUNT(*) AS n FROM runs'))[1].n
        end
        -- A version 2 whose migration fails half-way: rolled back, the database stays at 1.
        local saved_version = store.SCHEMA_VERSION
        finally(function()
          store.SCHEMA_VERSION = saved_version
          store.MIGRATIONS[saved_version + 1] = nil
        end)
        store.SCHEMA_VERSION = saved_version + 1
        store.MIGRATIONS[saved_version + 1] = function()
          return { 'ALTER TABLE runs ADD COLUMN host TEXT',
            'ALTER TABLE no_such_table ADD COLUMN x TEXT' }
        end
        local bad, err = history.open(target)
        assert.is_nil(bad)
        assert.is_true(has(err, 'no_such_table'), err)
        local v, n = version_and_runs()
        assert.are.equal('1', v)
        assert.are.equal(2, n)
        -- The same migration done right: version 2, the new column there, the runs kept.
        store.MIGRATIONS[saved_version + 1] = function()
          return { 'ALTER TABLE runs ADD COLUMN host TEXT' }
        end
        local M2 = assert(history.open(target))
        assert.are.equal(2, #assert(M2:points(assert(M2:series_list())[1].key)))
        M2:close()
        v, n = version_and_runs()
        assert.are.equal('2', v)
        assert.are.equal(2, n)
        local c <close> = assert(db.open(target))
        assert.are.same({}, assert(c:query('SELECT host FROM runs WHERE host IS NOT NULL')))
      end)

    it('opens a missing history with create = false as an error, making nothing', function()
      local target = backend.target('absent')
      local H, err, code = history.open(target, { create = false })
      assert.is_nil(H)
      assert.are.equal('ENOHISTORY', code)
      assert.is_true(has(err, 'no history at ' .. history.display(target) .. ': '), err)
      if backend.name == 'sqlite' then
        assert.is_false(fs.exists(target))
      else
        local c <close> = assert(db.open(target))
        assert.are.same({}, assert(c:query('SELECT table_name FROM information_schema.tables '
          .. 'WHERE table_schema = current_schema()')))
      end
      -- The default creates it; then create = false opens it.
      assert(history.open(target)):close()
      assert(history.open(target, { create = false })):close()
      assert.has_error(function()
        history.open(target, { create = 'no' })
      end, 'tp.history.open: option create must be a boolean, got string')
    end)

    it('refuses a database that is not a history', function()
      local target = backend.target('other_app')
      do
        local c <close> = assert(db.open(target))
        assert(c:exec('CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)'))
      end
      local H, err, code = history.open(target)
      assert.is_nil(H)
      assert.are.equal('ENOTHISTORY', code)
      assert.is_true(has(err, 'not a tplua history (it has the tables invoices and no table '
        .. 'meta)'), err)
      local c <close> = assert(db.open(target))
      local names = {}
      local sql = backend.name == 'sqlite' and "SELECT name FROM sqlite_master WHERE type = "
        .. "'table'" or 'SELECT table_name AS name FROM information_schema.tables WHERE '
        .. 'table_schema = current_schema()'
      for _, row in ipairs(assert(c:query(sql))) do
        names[#names + 1] = row.name
      end
      assert.are.same({ 'invoices' }, names)
    end)

    if backend.name == 'sqlite' then
      it('keeps the batches stored before the database fails, and rolls back the one it fails in',
        function()
          local target = backend.target('fails')
          local H = assert(history.open(target))
          -- The database refuses a sixth run (as a full disk or a quota would, half-way).
          assert(H.conn:exec('CREATE TRIGGER quota BEFORE INSERT ON runs WHEN (SELECT COUNT(*) '
            .. "FROM runs) >= 5 BEGIN SELECT RAISE(ABORT, 'quota exceeded'); END"))
          local recs = {}
          for i = 1, 9 do
            recs[i] = record(i)
          end
          local r, err, _, so_far = H:add(recs, { batch = 3 })
          assert.is_nil(r)
          assert.is_true(has(err, 'quota exceeded'), err)
          assert.are.equal(3, so_far.added)
          local pts = assert(H:points(assert(H:series_list())[1].key))
          assert.are.equal(3, #pts)
          assert(H.conn:exec('DROP TRIGGER quota'))
          local again = assert(H:add(recs, { batch = 3 }))
          assert.are.equal(6, again.added)
          assert.are.equal(3, again.skipped)
          H:close()
        end)

      it('refuses a damaged SQLite file with a clear error, its bytes unchanged', function()
        local dir = h.tmpdir()
        local garbage = dir .. '/garbage.db'
        h.write(garbage, string.rep('not a database, only text. ', 400))
        local before = file_sha(garbage)
        local H, err = history.open(garbage)
        assert.is_nil(H)
        assert.is_true(has(err, garbage), err)
        assert.is_true(has(err, 'not a database'), err)
        assert.are.equal(before, file_sha(garbage))
        -- A real history whose pages after the first were overwritten.
        local target = dir .. '/damaged.db'
        local G = assert(history.open(target))
        local recs = {}
        for i = 1, 9 do
          recs[i] = record(i)
        end
        assert(G:add(recs))
        G:close()
        local data = assert(h.read(target))
        assert.is_true(#data >= 8192, #data)
        h.write(target, data:sub(1, 4096) .. string.rep('\255', #data - 4096))
        before = file_sha(target)
        local D, oerr = history.open(target)
        local rows, qerr
        if D then
          rows, qerr = D:series_list()
          D:close()
        end
        local msg = oerr or qerr
        assert.is_nil(rows)
        assert.is_true(has(msg, 'malformed') or has(msg, 'not a database'), msg)
        assert.are.equal(before, file_sha(target))
      end)
    else
      it('says so when the server is down or refuses the password', function()
        local srv = backend.server()
        -- A history with runs in it, for the role that needs its password.
        local right = assert(history.open(srv:secure_url(pg.GUARDED_PASSWORD)))
        assert.is_true(has(tostring(right), '***'))
        assert.are.equal(3, assert(right:add({ record(1), record(2), record(3) })).added)
        right:close()
        local function stored()
          local G = assert(history.open(srv:secure_url(pg.GUARDED_PASSWORD)))
          local n = #assert(G:points(assert(G:series_list())[1].key))
          G:close()
          return n
        end
        local wrong = srv:secure_url('not-the-password')
        local H, err, code = history.open(wrong)
        assert.is_nil(H)
        assert.are.equal('EAUTH', code)
        assert.is_false(has(err, 'not-the-password'), err)
        assert.is_true(has(err, 'guarded'), err)
        assert.are.equal(3, stored())
        -- A port where nothing listens, in the server's socket directory.
        local down = srv.url:gsub('port=%d+', 'port=' .. (srv.port + 1))
        local D, derr, dcode = history.open(down)
        assert.is_nil(D)
        assert.are.equal('ECONNECT', dcode)
        assert.is_true(#derr > 0)
        assert.are.equal(3, stored())
      end)
    end
  end)
end

describe('tp.history targets', function()
  it('refuses a PostgreSQL keyword string, creating no file and showing no password', function()
    local dir = h.tmpdir()
    local target = 'host=' .. dir .. ' password=hunter2 dbname=perf'
    local H, err, code = history.open(target)
    assert.is_nil(H)
    assert.are.equal('EINVAL', code)
    assert.is_true(has(err, 'postgresql:// URL'), err)
    assert.is_false(has(err, 'hunter2'), err)
    assert.is_false(fs.exists(target))
  end)
end)
