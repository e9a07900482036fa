-- `tplua history` through the binary: add, list, show, note, check and their exit statuses,
-- --db and TPLUA_HISTORY and the default file, several adders at once, and runs of a campaign and
-- of a recipe adding themselves when a history is configured.
local h = require('helper')
local json = require('tp.json')
local fs = require('tp.fs')
local proc = require('tp.proc')
local db = require('tp._db')

local EXAMPLES = 'examples/runs'

local function has(s, text)
  return tostring(s):find(text, 1, true) ~= nil
end

local function history(args, env)
  local argv = { 'history' }
  for _, a in ipairs(args) do
    argv[#argv + 1] = a
  end
  -- TPLUA_HISTORY empty unless the test sets it: the machine's own is never touched.
  local e = { TPLUA_HISTORY = '' }
  for k, v in pairs(env or {}) do
    e[k] = v
  end
  return h.run(argv, { env = e, cwd = h.source_dir })
end

local function count_runs(target)
  local c <close> = assert(db.open(target))
  return assert(c:query('SELECT COUNT(*) AS n FROM runs'))[1].n
end

-- `n` nights of one series, a day apart from 2026-10-01; from night `drop_at` on, tokens/s is
-- `drop` lower and torch is 2.5.1 instead of 2.4.1. Noise: 0.5%, seeded.
local function nightly(dir, n, drop_at, drop)
  fs.mkdir_p(dir)
  local seed = 7
  local function uniform()
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed / 2147483648
  end
  for i = 1, n do
    local later = i >= drop_at
    local noise = (uniform() + uniform() + uniform() - 1.5) * 0.01
    local tps = 10000 * (later and (1 - drop) or 1) * (1 + noise)
    local rec = {
      schema = 'tplua.run/2', run_id = string.format('nightly-%02d', i), platform = 'amd',
      framework = 'primus', model = 'llama3.1-8b', methodology = 'identical_config',
      status = 'completed', gpu_info = { hardware = 'mi300x', device_count = 8 },
      training_config = { global_batch_size = 128, sequence_length = 2048, num_gpus = 8 },
      performance_metrics = { tokens_per_second = tps * 8, tokens_per_second_per_gpu = tps },
      source = { started_at = os.date('!%Y-%m-%dT02:00:00Z', 1790812800 + (i - 1) * 86400) },
      environment = { python = { torch = later and '2.5.1' or '2.4.1' },
        framework = { name = 'primus', version = '0.3.0' } },
    }
    h.write(string.format('%s/nightly-%02d.json', dir, i), assert(json.encode(rec)))
  end
end

-- Three `tplua history add` at the same moment into `target`, each adding its own third of 600
-- generated records and the third of another (so every record is offered twice, by adders that
-- race). Returns the number of runs stored.
local function concurrent_adders(dir, target)
  local gen = h.run({ h.source_dir .. '/bench/history/records.lua', dir .. '/recs', '600' })
  assert.are.equal(0, gen.code, gen.stderr)
  local files = assert(fs.glob(dir .. '/recs/*.json'))
  table.sort(files)
  for i, f in ipairs(files) do
    local part = dir .. '/part' .. (i % 3 + 1)
    fs.mkdir_p(part)
    assert(os.rename(f, part .. '/' .. fs.basename(f)))
  end
  local loop = proc.loop()
  local procs = {}
  for k = 1, 3 do
    procs[k] = assert(loop:spawn({ argv = { h.bin, 'history', 'add', dir .. '/part' .. k,
      dir .. '/part' .. (k % 3 + 1), '--db', target }, cwd = h.source_dir }))
  end
  for k = 1, 3 do
    local r = procs[k]:wait()
    assert.are.equal(0, r.code, 'adder ' .. k)
  end
  loop:close()
  return count_runs(target)
end

describe('tplua history', function()
  it('adds examples/runs, then lists, shows, notes and checks them', function()
    local dbp = h.tmpdir() .. '/h.db'
    local add = history({ 'add', EXAMPLES, '--db', dbp })
    assert.are.equal(0, add.code, add.stdout .. add.stderr)
    assert.is_true(has(add.stdout, 'history: 6 runs added, 0 already stored, 0 skipped ('
      .. dbp .. ')'), add.stdout)
    local again = history({ 'add', EXAMPLES, '--db', dbp })
    assert.are.equal(0, again.code)
    assert.is_true(has(again.stdout, 'history: 0 runs added, 6 already stored'), again.stdout)

    local list = history({ 'list', '--db', dbp })
    assert.are.equal(0, list.code, list.stderr)
    assert.is_truthy(list.stdout:find('amd/%-/primus@%-/llama3%.1%-8b/%x+/identical_config +3 +'
      .. '10193%.4 +[%+%-]%d%.%d%%'), list.stdout)
    assert.is_truthy(list.stdout:find('nvd/%-/megatron@%-/llama3%.1%-8b/%x+/identical_config +3'),
      list.stdout)
    assert.is_true(has(list.stdout, '2 series'))

    local show = history({ 'show', 'amd/', '--db', dbp })
    assert.are.equal(0, show.code, show.stderr)
    assert.is_true(has(show.stdout, 'tokens/s/GPU'), show.stdout)
    assert.is_true(has(show.stdout, 'amd-primus-e84adbb11776-r2'), show.stdout)
    assert.is_true(has(show.stdout, '[10243.5, 10263.1]'), show.stdout)
    assert.is_truthy(show.stdout:find('[▁▂▃▄▅▆▇█][▁▂▃▄▅▆▇█][▁▂▃▄▅▆▇█]  10193%.4 %.%. 10253%.2 '
      .. 'over 3 runs'), show.stdout)
    assert.is_true(has(show.stdout, "file's modification time stands for it"))

    local note = history({ 'note', 'nvd/', '2026-11-20', 'new', 'cooling', '--db', dbp })
    assert.are.equal(0, note.code, note.stderr)
    local shown = history({ 'show', 'nvd', '--db', dbp, '--metric', 'step_time_s' })
    assert.are.equal(0, shown.code, shown.stderr)
    assert.is_true(has(shown.stdout, '2026-11-20  new cooling'), shown.stdout)
    assert.is_true(has(shown.stdout, 'step time (s)'), shown.stdout)

    local check = history({ 'check', '--db', dbp })
    assert.are.equal(0, check.code, check.stdout .. check.stderr)
    assert.is_true(has(check.stdout, '0 regressions'), check.stdout)
    local cj = history({ 'check', '--json', '--db', dbp, 'amd/' })
    assert.are.equal(0, cj.code, cj.stderr)
    local doc = assert(json.decode(cj.stdout))
    assert.are.equal(1, #doc.results)
    assert.are.equal(false, doc.failed)
  end)

  it('exits 4 when check finds a regression beyond --fail-on, naming what changed', function()
    local dir = h.tmpdir()
    nightly(dir .. '/runs', 30, 21, 0.05)
    local dbp = dir .. '/h.db'
    assert.are.equal(0, history({ 'add', dir .. '/runs', '--db', dbp }).code)
    local r = history({ 'check', '--fail-on', '3', '--db', dbp })
    assert.are.equal(4, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'torch'), r.stdout)
    assert.is_true(has(r.stdout, 'nightly-21'), r.stdout)
    -- Below the threshold asked for: reported, not failed.
    local lax = history({ 'check', '--fail-on', '20', '--db', dbp })
    assert.are.equal(0, lax.code, lax.stdout)
    local plain = history({ 'check', '--db', dbp })
    assert.are.equal(0, plain.code, plain.stdout)
    assert.is_true(has(plain.stdout, '1 regression'), plain.stdout)
  end)

  it('uses --db, else TPLUA_HISTORY, else the file under XDG_DATA_HOME', function()
    local dir = h.tmpdir()
    local env_db = dir .. '/env.db'
    local a = history({ 'add', EXAMPLES .. '/llama3.1-8b-identical/amd' },
      { TPLUA_HISTORY = env_db })
    assert.are.equal(0, a.code, a.stderr)
    assert.are.equal(3, count_runs(env_db))
    local data = dir .. '/data'
    local b = history({ 'add', EXAMPLES .. '/llama3.1-8b-identical/nvd/' ..
      'nvd-megatron-2b8ed7d97d77-r1.json' }, { XDG_DATA_HOME = data })
    assert.are.equal(0, b.code, b.stderr)
    assert.is_true(has(b.stdout, data .. '/tplua/history.db'), b.stdout)
    assert.are.equal(1, count_runs(data .. '/tplua/history.db'))
    -- --db wins over the environment.
    local flag_db = dir .. '/flag.db'
    local c = history({ 'add', EXAMPLES, '--db', flag_db }, { TPLUA_HISTORY = env_db })
    assert.are.equal(0, c.code, c.stderr)
    assert.are.equal(6, count_runs(flag_db))
    assert.are.equal(3, count_runs(env_db))
  end)

  it('names each file it cannot add, adds the others, and exits 1 for a bad one', function()
    local dir = h.tmpdir()
    os.execute(string.format('cp %s %s/', h.shquote(h.source_dir .. '/' .. EXAMPLES
      .. '/llama3.1-8b-identical/amd/amd-primus-e84adbb11776-r1.json'), h.shquote(dir)))
    h.write(dir .. '/summary.json', '{"schema": "tplua.compare/1"}')
    h.write(dir .. '/broken.json', '{"schema": "tplua.run/2", ')
    local r = history({ 'add', dir, '--db', dir .. '/h.db' })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, 'history: not added: ' .. dir .. "/summary.json: not a run "
      .. "record: schema 'tplua.compare/1'"), r.stdout)
    assert.is_true(has(r.stderr, 'tplua history: skipped ' .. dir .. '/broken.json:'), r.stderr)
    assert.is_true(has(r.stdout, 'history: 1 run added, 0 already stored, 2 skipped'), r.stdout)
    -- Other JSON in a directory alone is no error; named on the command line, it is.
    os.remove(dir .. '/broken.json')
    local ok = history({ 'add', dir, '--db', dir .. '/h.db' })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    assert.is_true(has(ok.stdout, 'summary.json: not a run record'), ok.stdout)
    local named = history({ 'add', dir .. '/summary.json', '--db', dir .. '/h.db' })
    assert.are.equal(1, named.code, named.stdout .. named.stderr)
    assert.is_true(has(named.stderr, 'tplua history: skipped ' .. dir .. '/summary.json: not a '
      .. 'run record'), named.stderr)
  end)

  it('refuses a newer schema, an unknown series and bad usage with clear messages', function()
    local dir = h.tmpdir()
    local dbp = dir .. '/h.db'
    assert.are.equal(0, history({ 'add', EXAMPLES, '--db', dbp }).code)
    local s = history({ 'show', 'mi999x', '--db', dbp })
    assert.are.equal(1, s.code)
    assert.is_true(has(s.stderr, "tplua history: no series matches 'mi999x'"), s.stderr)
    local amb = history({ 'show', 'llama', '--db', dbp })
    assert.are.equal(1, amb.code)
    assert.is_true(has(amb.stderr, "'llama' matches 2 series"), amb.stderr)
    do
      local c <close> = assert(db.open(dbp))
      assert(c:exec("UPDATE meta SET value = '7' WHERE key = 'schema_version'"))
    end
    local n = history({ 'list', '--db', dbp })
    assert.are.equal(1, n.code)
    assert.is_true(has(n.stderr, dbp .. ': the history has schema version 7, newer than this '
      .. 'tplua reads (1)'), n.stderr)
    for _, args in ipairs({ {}, { 'frobnicate' }, { 'add' }, { 'show' }, { 'note', 'x', 'y' },
      { 'list', '--metric', 'speed' }, { 'list', '--fail-on', '3' }, { 'check', '--since',
        'yesterday' }, { 'dashboard' } }) do
      local u = history(args, { TPLUA_HISTORY = dir .. '/never.db' })
      assert.are.equal(2, u.code, table.concat(args, ' ') .. ': ' .. u.stderr)
      assert.is_true(has(u.stderr, 'tplua history: '), u.stderr)
    end
    assert.is_false(fs.exists(dir .. '/never.db'))
    assert.are.equal(0, history({ '--help' }).code)
  end)

  it('refuses a missing, empty or mistyped history for list, show, check and dashboard', function()
    local dir = h.tmpdir()
    local reads = { { 'list' }, { 'show', 'amd/' }, { 'check' }, { 'check', '--fail-on', '2' },
      { 'check', '--json', '--fail-on', '2' }, { 'dashboard', '--out', dir .. '/site' } }
    h.write(dir .. '/empty.db', '')
    for _, target in ipairs({ dir .. '/typo.db', dir .. '/empty.db' }) do
      for _, args in ipairs(reads) do
        local what = target .. ' ' .. table.concat(args, ' ')
        local argv = { table.unpack(args) }
        argv[#argv + 1] = '--db'
        argv[#argv + 1] = target
        local r = history(argv)
        assert.are.equal(1, r.code, what .. ': ' .. r.stdout .. r.stderr)
        assert.are.equal('', r.stdout, what)
        assert.is_true(has(r.stderr, 'tplua history: no history at ' .. target .. ': '), what
          .. ': ' .. r.stderr)
        assert.is_true(has(r.stderr, "'tplua history add' creates one"), r.stderr)
        -- Mistyped in TPLUA_HISTORY: the message says where the name came from.
        local e = history(args, { TPLUA_HISTORY = target })
        assert.are.equal(1, e.code, what)
        assert.is_true(has(e.stderr, 'no history at ' .. target .. ' (TPLUA_HISTORY): '), e.stderr)
      end
    end
    assert.is_false(fs.exists(dir .. '/typo.db'))
    assert.are.equal(0, fs.stat(dir .. '/empty.db').size)
    assert.is_false(fs.exists(dir .. '/site'))
    -- The default file under XDG_DATA_HOME is not made by a read either.
    local data = dir .. '/data'
    local d = history({ 'check', '--fail-on', '2' }, { XDG_DATA_HOME = data })
    assert.are.equal(1, d.code, d.stderr)
    assert.is_true(has(d.stderr, 'no history at ' .. data .. '/tplua/history.db (the default '
      .. 'history): no such file'), d.stderr)
    assert.is_false(fs.exists(data))
    -- add and note create it.
    local n = history({ 'note', '*', '2026-11-20', 'new', 'cooling', '--db', dir .. '/typo.db' })
    assert.are.equal(0, n.code, n.stderr)
    assert.are.equal(0, history({ 'list', '--db', dir .. '/typo.db' }).code)
    assert.are.equal(0, history({ 'add', EXAMPLES, '--db', dir .. '/empty.db' }).code)
    assert.are.equal(6, count_runs(dir .. '/empty.db'))
  end)

  it('fails check --fail-on when it checked no series, saying why', function()
    local dir = h.tmpdir()
    -- A history with no series: made by an add that found no record.
    fs.mkdir_p(dir .. '/nothing')
    local a = history({ 'add', dir .. '/nothing', '--db', dir .. '/none.db' })
    assert.are.equal(0, a.code, a.stderr)
    local r = history({ 'check', '--fail-on', '2', '--db', dir .. '/none.db' })
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stderr, 'tplua history: check --fail-on 2: no series was checked: the '
      .. 'history has no series'), r.stderr)
    assert.is_true(has(r.stdout, '--fail-on 2%: FAILED: no series was checked'), r.stdout)
    -- Without --fail-on the report gates nothing.
    assert.are.equal(0, history({ 'check', '--db', dir .. '/none.db' }).code)
    -- Series with 3 runs each: too few for either test.
    local few = dir .. '/few.db'
    assert.are.equal(0, history({ 'add', EXAMPLES, '--db', few }).code)
    local f = history({ 'check', '--fail-on', '2', '--db', few })
    assert.are.equal(1, f.code, f.stdout .. f.stderr)
    assert.is_true(has(f.stderr, 'no series was checked: each of the 2 series has too few runs '
      .. 'with tokens_per_s_per_gpu (the latest-runs test needs 4, change points 10)'), f.stderr)
    local j = history({ 'check', '--fail-on', '2', '--json', '--db', few })
    assert.are.equal(1, j.code)
    local doc = assert(json.decode(j.stdout))
    assert.are.equal(0, doc.checked)
    assert.are.equal(true, doc.failed)
    assert.is_truthy(doc.nothing_checked:find('no series was checked', 1, true))
    -- 30 nights, but a --since that leaves none of them.
    nightly(dir .. '/runs', 30, 31, 0)
    local db30 = dir .. '/n.db'
    assert.are.equal(0, history({ 'add', dir .. '/runs', '--db', db30 }).code)
    local ok = history({ 'check', '--fail-on', '2', '--db', db30 })
    assert.are.equal(0, ok.code, ok.stdout .. ok.stderr)
    local late = history({ 'check', '--fail-on', '2', '--since', '2030-01-01', '--db', db30 })
    assert.are.equal(1, late.code, late.stdout .. late.stderr)
    assert.is_true(has(late.stderr, 'the only series has too few runs with tokens_per_s_per_gpu '
      .. 'since 2030-01-01'), late.stderr)
  end)

  it('says in its help what the dashboard draws', function()
    local r = history({ '--help' })
    assert.are.equal(0, r.code)
    assert.is_false(has(r.stdout, 'plot per series'), r.stdout)
    assert.is_true(has(r.stdout, 'one chart per group of comparable series (same model, config '
      .. 'hash and'), r.stdout)
  end)

  it('gives the REPL the history: H = tp.history.open(); H:series{...} prints as a table',
    function()
      local dir = h.tmpdir()
      local dbp = dir .. '/h.db'
      assert.are.equal(0, history({ 'add', EXAMPLES, '--db', dbp }).code)
      local r = h.run({ 'repl' }, { env = { TPLUA_HISTORY = dbp }, stdin = table.concat({
        'H = tp.history.open()', 'H', "S = H:series{ platform = 'nvd' }", 'S', '#S',
        'S:show(1)', "H:points(S[1].key, { metric = 'step_time_s' })[1].value > 1" }, '\n')
        .. '\n' })
      assert.are.equal(0, r.code, r.stderr)
      assert.is_true(has(r.stdout, 'tp.history.History ' .. dbp .. ' (sqlite, 6 runs)'), r.stdout)
      assert.is_truthy(r.stdout:find('1  nvd/%-/megatron@%-/llama3%.1%-8b/%x+/identical_config +3'),
        r.stdout)
      assert.is_true(has(r.stdout, '1 series; S:show(i) shows one'), r.stdout)
      assert.is_true(has(r.stdout, 'nvd-megatron-2b8ed7d97d77-r3'), r.stdout)
      assert.is_true(has(r.stdout, 'tplua> true'), r.stdout)
    end)

  it('loses nothing when several adders write at once', function()
    local dir = h.tmpdir()
    assert.are.equal(600, concurrent_adders(dir, dir .. '/h.db'))
  end)
end)

describe('tplua history on PostgreSQL', function()
  it('adds, lists, shows, notes and checks on a real server, chosen by --db or TPLUA_HISTORY',
    function()
      local pg = require('pg_server')
      local ok, why = pg.available()
      if not ok then
        pending(why)
        return
      end
      local srv = pg.start()
      finally(function()
        srv:stop()
      end)
      local url = srv:new_database('history_cli')
      local add = history({ 'add', EXAMPLES, '--db', url })
      assert.are.equal(0, add.code, add.stdout .. add.stderr)
      assert.is_true(has(add.stdout, 'history: 6 runs added'), add.stdout)
      local again = history({ 'add', EXAMPLES }, { TPLUA_HISTORY = url })
      assert.are.equal(0, again.code, again.stderr)
      assert.is_true(has(again.stdout, '0 runs added, 6 already stored'), again.stdout)
      local list = history({ 'list' }, { TPLUA_HISTORY = url })
      assert.are.equal(0, list.code, list.stderr)
      assert.is_true(has(list.stdout, '2 series'), list.stdout)
      assert.are.equal(0, history({ 'note', '*', '2026-11-20', 'new', 'cooling', '--db', url })
        .code)
      local show = history({ 'show', 'nvd/', '--db', url })
      assert.are.equal(0, show.code, show.stderr)
      assert.is_true(has(show.stdout, 'nvd-megatron-2b8ed7d97d77-r1'), show.stdout)
      assert.is_true(has(show.stdout, 'new cooling  (every series)'), show.stdout)
      -- Three runs a series: too few to check, so a gate on it does not pass.
      local check = history({ 'check', '--fail-on', '3', '--db', url })
      assert.are.equal(1, check.code, check.stdout .. check.stderr)
      assert.is_true(has(check.stderr, 'no series was checked'), check.stderr)
      -- Three adders at once, racing for the same new series and runs.
      local dir = h.tmpdir()
      local race = srv:new_database('history_race')
      assert.are.equal(600, concurrent_adders(dir, race))
      -- A refused password: a clear message, no password in it.
      local refused = history({ 'list', '--db', srv:secure_url('wrong-pw') })
      assert.are.equal(1, refused.code)
      assert.is_false(has(refused.stderr, 'wrong-pw'), refused.stderr)
      assert.is_true(has(refused.stderr, 'tplua history: '), refused.stderr)
      -- A database without the history's tables is no history for the commands that read:
      -- named without its password, and left without tables.
      local pw = pg.GUARDED_PASSWORD
      local bare = srv:secure_url(pw)
      for _, args in ipairs({ { 'list' }, { 'check', '--fail-on', '2' }, { 'show', 'amd/' },
        { 'dashboard', '--out', dir .. '/site' } }) do
        local r = history(args, { TPLUA_HISTORY = bare })
        assert.are.equal(1, r.code, table.concat(args, ' ') .. ': ' .. r.stdout .. r.stderr)
        assert.is_false(has(r.stderr, pw), r.stderr)
        assert.is_true(has(r.stderr, 'no history at postgresql://guarded:***@/postgres?host='),
          r.stderr)
        assert.is_true(has(r.stderr, '(TPLUA_HISTORY): the database has no history tables'),
          r.stderr)
      end
      local c <close> = assert(db.open(srv:database_url('postgres')))
      local tables = assert(c:query('SELECT COUNT(*) AS n FROM information_schema.tables WHERE '
        .. "table_schema = 'public'"))
      assert.are.equal(0, math.tointeger(tables[1].n))
    end)
end)

describe('runs adding themselves to the history', function()
  -- A campaign of two fake-trainer runs (tests/tools/fake_trainer).
  local function campaign_file(dir)
    local path = dir .. '/campaign.lua'
    h.write(path, string.format([[
local tp = require('tp')
local FT = %q
local runs = {}
for i = 1, 2 do
  runs[i] = { id = 'fake-' .. i, parser = 'megatron', gbs = 32, seq_len = 1024, gpus = 4,
    framework = 'fake_trainer', methodology = 'identical_config', model = 'llama3.1-8b',
    argv = { FT, '--megatron-gen', '12', '--lines-per-sec', '1000', '--step-ms', '250',
      '--gbs', '32', '--seed', tostring(i) } }
end
return tp.campaign({ name = 'history-campaign', results = %q, runs = runs })
]], h.tools_dir .. '/fake_trainer', dir .. '/out'))
    return path
  end

  it('adds each finished run of a campaign when TPLUA_HISTORY is set, once', function()
    local dir = h.tmpdir()
    local dbp = dir .. '/h.db'
    local env = { TPLUA_HISTORY = dbp, TPLUA_GPU_LIBPATH = h.tmpdir() }
    local r = h.run({ 'run', campaign_file(dir), '--skip-preflight' }, { env = env })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local added1 = r.stdout:find('history: added fake-1 to ' .. dbp, 1, true)
    assert.is_truthy(added1, r.stdout)
    assert.is_true(has(r.stdout, 'history: added fake-2 to ' .. dbp), r.stdout)
    -- Each run is added as soon as its record is written, before the next run starts.
    local started2 = r.stdout:find('fake-2: started', 1, true)
    assert.is_truthy(started2, r.stdout)
    assert.is_true(added1 < started2, r.stdout)
    assert.are.equal(2, count_runs(dbp))
    -- Run again: both finished before, nothing new to add, nothing said.
    local again = h.run({ 'run', campaign_file(dir), '--skip-preflight', '--quiet' },
      { env = env })
    assert.are.equal(0, again.code, again.stdout .. again.stderr)
    assert.is_false(has(again.stdout, 'history: added'), again.stdout)
    assert.are.equal(2, count_runs(dbp))
    -- Without a history configured, nothing is added anywhere.
    local dir2 = h.tmpdir()
    local none = h.run({ 'run', campaign_file(dir2), '--skip-preflight', '--quiet' },
      { env = { TPLUA_HISTORY = '', TPLUA_GPU_LIBPATH = h.tmpdir(), XDG_DATA_HOME = dir2 } })
    assert.are.equal(0, none.code, none.stdout .. none.stderr)
    assert.is_false(has(none.stdout, 'history:'), none.stdout)
    assert.is_false(fs.exists(dir2 .. '/tplua'))
  end)

  it("adds a recipe's finished run to the recipe's history", function()
    local missing = h.torch_missing()
    if missing then
      pending(missing)
      return
    end
    local fake = h.fakes_dir .. '/h100x8'
    if not fs.is_dir(fake) then
      pending('fake GPU libraries not built (' .. fake .. ')')
      return
    end
    local dir = h.tmpdir()
    local dbp = dir .. '/recipe-history.db'
    local path = dir .. '/ref.lua'
    h.write(path, string.format([[
local tp = require('tp')
return tp.experiment.main({
  name = 'history-ref',
  model = 'ref-tiny',
  platforms = { nvd = { framework = 'reference', hardware = 'h100-sxm' } },
  gpus_per_node = 2,
  training = { seed = 1, mbs = 2, gbs = 4, seq_len = 32, iters = 4, lr = 3e-3,
               dataset = 'mock', log_interval = 1 },
  parallelism = { tp = 1, pp = 1, dp = 2 },
  launcher = 'ranks',
  results = %q,
  history = %q,
})
]], dir .. '/out', dbp))
    local r = h.run({ 'run', path, '--skip-preflight' },
      { env = { TPLUA_GPU_LIBPATH = fake, TPLUA_HISTORY = '' } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local id = r.stdout:match('history: added (%S+) to ' .. dbp:gsub('%p', '%%%0'))
    assert.is_string(id, r.stdout)
    local recs = assert(fs.glob(dir .. '/out/*.json'))
    assert.are.equal(1, #recs)
    assert.are.equal(id .. '.json', fs.basename(recs[1]))
    local l = history({ 'list', '--db', dbp })
    assert.are.equal(0, l.code, l.stderr)
    assert.is_true(has(l.stdout, 'nvd/h100-sxm/reference@'), l.stdout)
  end)
end)
