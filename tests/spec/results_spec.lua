-- tp.results: loading run records and tprimat-era files (tests/fixtures/results, written by
-- tests/fixtures/results/generate.lua from real-format logs), broken files, lazy per-iteration
-- arrays, and the result-set queries and renderings.
local h = require('helper')
local results = require('tp.results')
local json = require('tp.json')

local ROOT = h.fixture('results')

local function by_id(set, id)
  for _, r in ipairs(set.runs) do
    if r.id == id then
      return r
    end
  end
end

local function near(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-12) * math.max(math.abs(b), 1e-300)
end

local function error_for(set, name)
  for _, e in ipairs(set.errors) do
    if e.path:sub(-#name) == name then
      return e
    end
  end
end

-- Writes a minimal run record to dir/name.json.
local function write_record(dir, name, fields)
  local doc = { schema = 'tplua.run/1', platform = 'amd', framework = 'megatron' }
  for k, v in pairs(fields or {}) do
    doc[k] = v
  end
  h.write(dir .. '/' .. name .. '.json', assert(json.encode(doc)))
  return dir .. '/' .. name .. '.json'
end

describe('tp.results energy per token', function()
  it('prefers the measured value of a record and labels which it took', function()
    local dir = h.tmpdir()
    local perf = { tokens_per_second = 100000, tokens_per_second_per_gpu = 12500 }
    write_record(dir, 'measured', { schema = 'tplua.run/2', run_id = 'm', performance_metrics =
      perf, training_config = { num_gpus = 8 }, gpu_info = { hardware = 'mi300x' },
      energy_metrics = { measured = true, joules_per_token = 0.05 } })
    write_record(dir, 'tdp', { run_id = 't', performance_metrics = perf,
      training_config = { num_gpus = 8 }, gpu_info = { hardware = 'mi300x' } })
    local set = assert(results.load(dir))
    local by = {}
    for _, r in ipairs(set.runs) do
      by[r.id] = r
    end
    assert.are.equal(0.05, by.m.joules_per_token)
    assert.are.equal('measured', by.m.energy_basis)
    -- 8 x 750 W over 100,000 tokens/s: the TDP upper bound.
    assert.are.equal(8 * 750 / 100000, by.t.joules_per_token)
    assert.are.equal('estimated', by.t.energy_basis)
    assert.truthy(set:table({ 'id', 'joules_per_token', 'energy_basis' }):find('measured', 1,
      true))
  end)
end)

describe('tp.results.load', function()
  local set

  setup(function()
    set = assert(results.load(ROOT))
  end)

  it('loads every record and tprimat file below the directory, recursively', function()
    -- 17 records written by the generator, 2 derived from them by generate_profiled.lua, and
    -- 4 tprimat-era files.
    assert.are.equal(23, #set)
    assert.are.equal(19, #set:where({ kind = 'run' }))
    assert.are.equal(4, #set:where({ kind = 'tprimat' }))
  end)

  it('lists each bad file with its path and reason, and loads the rest', function()
    assert.are.equal(6, #set.errors)
    local e = error_for(set, 'bad/truncated.json')
    assert.is_truthy(e.message:find('bad/truncated.json:', 1, true))
    assert.is_truthy(e.message:find('unterminated string', 1, true))
    assert.are.equal('EPARSE', e.code)
    assert.is_truthy(error_for(set, 'bad/garbage.json').message:find('invalid UTF-8', 1, true))
    assert.is_truthy(error_for(set, 'bad/empty.json').message:find('empty file', 1, true))
    assert.is_truthy(error_for(set, 'bad/array.json').message
      :find('top level is array, a JSON object (run record) expected', 1, true))
    assert.is_truthy(error_for(set, 'bad/wrong_types.json').message
      :find('step_times is string, array expected', 1, true))
    assert.is_truthy(error_for(set, 'bad/future_schema.json').message
      :find("schema 'tplua.run/9' is not supported", 1, true))
    assert.is_not_nil(by_id(set, 'bad/primus-ok')) -- its run_id clashes with truncated/'s
  end)

  it('skips JSON files of another schema, and never reads files not named *.json', function()
    assert.are.equal(1, #set.skipped)
    assert.is_truthy(set.skipped[1].path:find('bad/plan.json', 1, true))
    assert.is_truthy(set.skipped[1].reason:find("schema 'tplua.plan/1'", 1, true))
    for _, e in ipairs(set.errors) do
      assert.is_falsy(e.path:find('notes.txt', 1, true))
    end
  end)

  it('does not descend into subdirectories when recursive is false', function()
    local flat = assert(results.load(ROOT .. '/fair', { recursive = false }))
    assert.are.equal(0, #flat)
    local deep = assert(results.load(ROOT .. '/fair'))
    assert.are.equal(6, #deep)
  end)

  it('reads files named explicitly, whatever the directory holds', function()
    local s = assert(results.load({ ROOT .. '/fair/amd/primus-r1.json',
      ROOT .. '/tprimat/train_amd_prim_llama.json' }))
    assert.are.equal(2, #s)
    assert.are.equal('amd-primus-r1', s[1].id)
    assert.are.equal('train_amd_prim_llama', s[2].id)
  end)

  it('names an explicit file that is not a result as an error', function()
    local dir = h.tmpdir()
    h.write(dir .. '/x.json', '{"hello": 1}')
    local s = assert(results.load(dir .. '/x.json'))
    assert.are.equal(0, #s)
    assert.is_truthy(s.errors[1].message:find('x.json: neither a run record', 1, true))
  end)

  it('fails when nothing named exists, and lists a missing path among others', function()
    local s, err, code = results.load({ ROOT .. '/no-such-dir' })
    assert.is_nil(s)
    assert.are.equal('ENOENT', code)
    assert.is_truthy(err:find('no-such-dir', 1, true))
    local s2 = assert(results.load({ ROOT .. '/fair', ROOT .. '/no-such-dir' }))
    assert.are.equal(6, #s2)
    assert.is_truthy(s2.errors[1].message:find('no-such-dir', 1, true))
  end)

  it('loads a file given twice once', function()
    local p = ROOT .. '/fair/amd/primus-r1.json'
    local s = assert(results.load({ p, p }))
    assert.are.equal(1, #s)
    assert.is_truthy(s.skipped[1].reason:find('already loaded', 1, true))
  end)

  it('gives clashing run ids the path below the directory they were found in', function()
    assert.is_not_nil(by_id(set, 'mock/nvd/megatron-real'))
    assert.is_not_nil(by_id(set, 'random/nvd/megatron-real'))
    assert.is_not_nil(by_id(set, 'amd-primus-r1'))
  end)

  it('exposes the summary fields of a record as stored in the file', function()
    local r = by_id(set, 'amd-primus-r1')
    local doc = assert(json.load_file(ROOT .. '/fair/amd/primus-r1.json'))
    local pm = doc.performance_metrics
    assert.are.equal('amd', r.platform)
    assert.are.equal('primus', r.framework)
    assert.are.equal('llama3.1-8b', r.model)
    assert.are.equal(1, r['repeat'])
    assert.are.equal(8, r.gpus)
    assert.are.equal(128, r.gbs)
    assert.are.equal(2048, r.seq_len)
    assert.are.equal('bf16', r.precision)
    assert.are.equal(3e-4, r.lr)
    assert.are.equal(42, r.seed)
    assert.are.equal(200, r.train_iters)
    assert.are.equal(200, r.last_iteration)
    assert.are.equal(pm.avg_step_time_seconds, r.step_time)
    assert.are.equal(pm.tokens_per_second_per_gpu, r.tokens_per_s_per_gpu)
    assert.are.equal(pm.steady_state.first_iteration, r.steady_first_iteration)
    assert.are.equal('mser-5', r.steady_method)
    assert.are.equal(doc.loss_values[1], r.loss_first)
    assert.are.equal(doc.loss_values[#doc.loss_values], r.loss_last)
    assert.is_true(near(r.memory_gib, doc.memory_metrics.peak_memory_allocated_gib))
    assert.are.equal('AMD Instinct MI300X', r.gpu)
  end)

  it('recomputes the steady state of tprimat files with MSER-5 and keeps their own figures',
    function()
      local r = by_id(set, 'train_nvd_nemo_llama')
      -- Not JSON (a bare NaN): read tprimat's own mean from the text.
      local text = assert(h.read(ROOT .. '/tprimat/train_nvd_nemo_llama.json'))
      local avg = tonumber(text:match('"avg_step_time_seconds": ([%d.]+)'))
      -- 8 slow start-up steps: tprimat's mean (all but the first) includes 7 of them.
      assert.are.equal(avg, r.recorded_step_time)
      assert.is_true(r.step_time < r.recorded_step_time)
      assert.are.equal('mser-5 (recomputed)', r.steady_method)
      assert.is_true(r.steady_first_iteration > 8)
      assert.is_true(near(r.tokens_per_s_per_gpu, 64 * 2048 / r.step_time / 8, 1e-12))
      assert.are.equal(1, r.nonfinite_values) -- the bare NaN Python's json.dump wrote
      assert.are.equal(200, r.last_iteration)
    end)

  it('rejects hostile shapes with the path and the field, never crashing', function()
    local dir = h.tmpdir()
    h.write(dir .. '/recs.json', '{"schema": "tplua.run/1", "records": [1, "x"]}')
    h.write(dir .. '/pm.json', '{"schema": "tplua.run/1", "performance_metrics": ' ..
      '{"tokens_per_second": "fast"}}')
    h.write(dir .. '/deep.json', string.rep('[', 600) .. string.rep(']', 600))
    h.write(dir .. '/nul.json', '{"schema": "tplua.run/1", "platform": "a\\u0000b"}')
    -- Members left undecoded while loading are still checked in full.
    h.write(dir .. '/steps.json', '{"schema": "tplua.run/1", "step_times": [1.5, null, "x"]}')
    h.write(dir .. '/comma.json', '{"schema": "tplua.run/1",\n "records": [{}, {},]}')
    h.write(dir .. '/args.json', '{"schema": "tplua.run/1", "args": [1]}')
    local s = assert(results.load(dir))
    local msgs = {}
    for _, e in ipairs(s.errors) do
      msgs[e.path:match('[^/]+$')] = e.message
    end
    assert.is_truthy(msgs['recs.json']:find('recs.json: records[1] is integer, object expected',
      1, true))
    assert.is_truthy(msgs['pm.json']:find('performance_metrics.tokens_per_second is string, ' ..
      'number expected', 1, true))
    assert.is_truthy(msgs['deep.json']:find('deep.json:', 1, true))
    assert.is_truthy(msgs['nul.json']:find('nul.json:1:41:', 1, true))
    assert.is_truthy(msgs['steps.json']:find('step_times[3] is string, number expected', 1, true))
    assert.is_truthy(msgs['comma.json']:find("comma.json:2:21: unexpected ']'", 1, true))
    assert.is_truthy(msgs['args.json']:find('args is array, object expected', 1, true))
    assert.are.equal(7, #s.errors)
    assert.are.equal(0, #s)
  end)

  it('keeps a tprimat source label', function()
    assert.are.equal('primus_log_extraction', by_id(set, 'benchmark_rocm_llama').source.label)
  end)
end)

describe('tp.results.load with the summary index', function()
  local function copy_fair()
    local dir = h.tmpdir()
    assert(os.execute('cp -r ' .. h.shquote(ROOT .. '/fair/amd') .. ' ' .. h.shquote(dir)))
    return dir .. '/amd'
  end

  local function summaries(set)
    local out = {}
    for _, r in ipairs(set.runs) do
      out[r.id] = results.summary(r)
      out[r.id].path = nil
    end
    return out
  end

  it('writes an index, and gives the same summaries from it as from the files', function()
    local dir = copy_fair()
    local plain = assert(results.load(dir))
    local first = assert(results.load(dir, { index = true }))
    local idx = dir .. '/' .. results.INDEX_NAME
    assert.is_truthy(h.read(idx))
    local second = assert(results.load(dir, { index = true }))
    assert.are.same(summaries(plain), summaries(first))
    assert.are.same(summaries(plain), summaries(second))
    assert.are.equal(40, #second[1].step_times) -- details still come from the file
  end)

  it('reuses a summary while the file keeps its size and mtime, and re-reads it after',
    function()
      local dir = copy_fair()
      assert(results.load(dir, { index = true }))
      local idx = dir .. '/' .. results.INDEX_NAME
      local doc = assert(json.load_file(idx))
      doc.entries['primus-r2.json'].outcome.summary.tokens_per_s_per_gpu = 1.5
      h.write(idx, assert(json.encode(doc)))
      local cached = assert(results.load(dir, { index = true }))
      assert.are.equal(1.5, by_id(cached, 'amd-primus-r2').tokens_per_s_per_gpu)
      assert(os.execute('touch -d "2001-01-01" ' .. h.shquote(dir .. '/primus-r2.json')))
      local fresh = assert(results.load(dir, { index = true }))
      assert.is_true(by_id(fresh, 'amd-primus-r2').tokens_per_s_per_gpu > 13000)
    end)

  it('ignores a damaged index and remembers bad files as errors', function()
    local dir = copy_fair()
    h.write(dir .. '/' .. results.INDEX_NAME, '{"schema": "tplua.results-index/1", "entr')
    h.write(dir .. '/broken.json', '{"schema": ')
    local s = assert(results.load(dir, { index = true }))
    assert.are.equal(3, #s)
    assert.are.equal(1, #s.errors)
    local again = assert(results.load(dir, { index = true }))
    assert.are.equal(3, #again)
    assert.are.same(s.errors[1].message, again.errors[1].message)
    assert.is_truthy(again.errors[1].message:find('broken.json:1:', 1, true))
  end)
end)

describe('tp.results runs', function()
  it('load their per-iteration arrays on first access only', function()
    local s = assert(results.load(ROOT .. '/fair/nvd/megatron-r2.json'))
    local r = s[1]
    assert.is_false(r:details_loaded())
    assert.is_nil(rawget(r, 'records'))
    assert.are.equal(40, #r.step_times)
    assert.is_true(r:details_loaded())
    assert.are.equal(40, #r.records)
    assert.are.equal(40, #r.loss_values)
    assert.are.equal('0.0003', r.args.lr)
    r:drop_details()
    assert.is_false(r:details_loaded())
    assert.are.equal(5, r.iterations[1])
  end)

  it('synthesise iteration numbers for tprimat files (one step time per iteration)', function()
    local s = assert(results.load(ROOT .. '/tprimat/benchmark_cuda_llama.json'))
    local r = s[1]
    assert.are.equal(10, #r.step_times)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, { table.unpack(r.iterations) })
    assert.are.equal(0, #r.records)
  end)

  it('refuse to read back a file that changed since it was loaded', function()
    local dir = h.tmpdir()
    local p = write_record(dir, 'r', { step_times = json.array({ 1.0, 2.0 }) })
    local s = assert(results.load(p))
    h.write(p, assert(json.encode({ schema = 'tplua.run/1', step_times = { 1, 2, 3, 4 } })))
    local ok, err = pcall(function()
      return s[1].step_times
    end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('changed since it was loaded', 1, true))
  end)

  it('print as their id', function()
    local s = assert(results.load(ROOT .. '/fair/amd/primus-r1.json'))
    assert.are.equal('tp.results.Run amd-primus-r1 (amd, primus)', tostring(s[1]))
    assert.is_true(results.is_run(s[1]))
    assert.is_false(results.is_run({}))
  end)
end)

describe('tp.results ResultSet', function()
  local set

  setup(function()
    set = assert(results.load({ ROOT .. '/fair', ROOT .. '/tprimat' }))
  end)

  it('has a length, integer indexing and iteration', function()
    assert.are.equal(10, #set)
    local n = 0
    for i, r in ipairs(set) do
      n = n + 1
      assert.are.equal(set.runs[i], r)
    end
    assert.are.equal(10, n)
    local m = 0
    for _ in set:iter() do
      m = m + 1
    end
    assert.are.equal(10, m)
  end)

  it('filters with values, lists of values, predicates and dotted paths', function()
    assert.are.equal(5, #set:where({ platform = 'amd' }))
    assert.are.equal(3, #set:where({ platform = 'amd', framework = 'primus' }))
    assert.are.equal(10, #set:where({ platform = { 'amd', 'nvd' } }))
    assert.are.equal(8, #set:where({ gbs = function(v)
      return v == 128
    end }))
    assert.are.equal(6, #set:where({ ['training_config.seed'] = 42 }))
    assert.are.equal(2, #set:where(function(r)
      return r.kind == 'tprimat' and r.platform == 'nvd'
    end))
    assert.are.same(set.errors, set:where({ platform = 'amd' }).errors)
  end)

  it('groups by a key, with sorted group keys', function()
    local g = set:group('platform')
    assert.are.equal(5, #g.amd)
    assert.are.equal(5, #g.nvd)
    assert.are.same({ 'amd', 'nvd' }, set:group_keys('platform'))
    local by_fw = set:group('framework')
    assert.are.equal(4, #by_fw['(none)']) -- tprimat files name no framework
    assert.are.same({ 64, 128 }, set:group_keys('gbs'))
  end)

  it('sorts by a key, stable, missing values last, descending on request', function()
    local s = set:sort('tokens_per_s_per_gpu')
    for i = 2, #s do
      assert.is_true(s[i - 1].tokens_per_s_per_gpu <= s[i].tokens_per_s_per_gpu)
    end
    local d = set:sort('tokens_per_s_per_gpu', { desc = true })
    assert.is_true(d[1].tokens_per_s_per_gpu >= d[#d].tokens_per_s_per_gpu)
    local m = set:sort('framework')
    assert.is_nil(m[#m].framework)
    assert.are.equal('megatron', m[1].framework)
  end)

  it('maps and collects values', function()
    local ids = set:where({ platform = 'nvd', kind = 'run' }):map(function(r)
      return r.id
    end)
    assert.are.same({ 'nvd-megatron-r1', 'nvd-megatron-r2', 'nvd-megatron-r3' }, ids)
    assert.are.equal(10, #set:values('step_time', true))
    assert.are.equal(6, #set:values('framework'))
  end)

  it('renders an aligned table with chosen columns and formats', function()
    local t = set:where({ kind = 'run' }):sort('id'):table({ 'id',
      { key = 'tokens_per_s_per_gpu', title = 'tok/s/GPU', format = '%.1f' } })
    local lines = {}
    for l in t:gmatch('[^\n]+') do
      lines[#lines + 1] = l
    end
    assert.are.equal(8, #lines)
    assert.is_truthy(lines[1]:find('^id%s+tok/s/GPU$'))
    assert.is_truthy(lines[2]:find('^%-+%s+%-+$'))
    assert.is_truthy(lines[3]:find('^amd%-primus%-r1%s+%d+%.%d$'))
    assert.are.equal(#lines[3], #lines[1])
  end)

  it('renders CSV with a header, RFC 4180 quoting and full precision', function()
    local dir = h.tmpdir()
    local p = write_record(dir, 'q', { run_id = 'a,"b"', performance_metrics = {
      tokens_per_second_per_gpu = 1234.5678901234 } })
    local s = assert(results.load(p))
    local csv = s:to_csv({ 'id', 'tokens_per_s_per_gpu', 'gbs' })
    assert.are.equal('id,tokens_per_s_per_gpu,gbs\r\n"a,""b""",1234.5678901234,\r\n', csv)
    local full = set:to_csv()
    local header = full:match('^([^\r]+)')
    assert.are.equal(table.concat(results.SUMMARY_FIELDS, ','), header)
  end)

  it('renders JSON of the summaries, errors and skipped files', function()
    local all = assert(results.load(ROOT .. '/bad'))
    local doc = assert(json.decode(all:to_json()))
    assert.are.equal(1, #doc.runs)
    assert.are.equal('amd-primus-ok', doc.runs[1].id)
    assert.is_nil(doc.runs[1].records)
    assert.are.equal(6, #doc.errors)
    assert.are.equal(1, #doc.skipped)
  end)

  it('builds a set from runs of other sets', function()
    local s = results.from_runs({ set[1], set[2] })
    assert.are.equal(2, #s)
    assert.has_error(function()
      results.from_runs({ {} })
    end, 'tp.results.from_runs: runs[1] is not a loaded run')
  end)
end)

describe('tp.results misuse', function()
  it('raises on bad arguments', function()
    assert.has_error(function()
      results.load(42)
    end, 'tp.results.load: path or list of paths expected, got number')
    assert.has_error(function()
      results.load({ 'x', 3 })
    end, 'tp.results.load: sources[2] is number, string expected')
    assert.has_error(function()
      results.load('x', { deep = true })
    end, "tp.results.load: unknown option 'deep'")
    local s = assert(results.load(ROOT .. '/fair'))
    assert.has_error(function()
      s:where(5)
    end, 'ResultSet:where: filter must be a table or a function, got number')
    assert.has_error(function()
      s:sort(nil)
    end, 'ResultSet:sort: key must be a string or a function, got nil')
    assert.has_error(function()
      s:map('x')
    end, 'ResultSet:map: function expected, got string')
    assert.has_error(function()
      s:table({ 42 })
    end, 'ResultSet:table: column 1 must be a key or {key=, title=, format=}')
  end)

  it('raises on a column no run has, naming it and the known ones', function()
    local s = assert(results.load(ROOT .. '/fair'))
    local ok, err = pcall(s.table, s, { 'id', 'tokens' })
    assert.is_false(ok)
    assert.is_truthy(err:find("ResultSet:table: unknown column 'tokens': no run has it; did you "
      .. 'mean tokens_per_s, tokens_per_s_per_gpu?', 1, true), err)
    assert.is_truthy(err:find('known: id, path, kind, platform,', 1, true), err)
    assert.is_truthy(err:find('dotted path into training_config, performance_metrics', 1, true))
    ok, err = pcall(s.to_csv, s, { 'id', 'training_config.sed' })
    assert.is_false(ok)
    assert.is_truthy(err:find("ResultSet:to_csv: unknown column 'training_config.sed'", 1, true))
    -- Known fields print even when blank, and dotted paths some run has print their values.
    assert.is_truthy(s:table({ 'id', 'energy_metrics', 'training_config.seed' }):find('42', 1,
      true))
    local empty = s:where({ platform = 'tpu' })
    assert.is_truthy(empty:table({ 'id', 'gpu_info.hardware' }):find('gpu_info.hardware', 1, true))
  end)
end)

describe('the result fixtures', function()
  it('are what tp.record.from_log makes of their logs today', function()
    local log = require('tp.log')
    local record = require('tp.record')
    for _, name in ipairs({ 'fair/amd/primus-r1', 'fair/nvd/megatron-r1',
      'truncated/nvd/megatron-killed', 'unfair/amd/primus-lr' }) do
      local stored = assert(json.load_file(ROOT .. '/' .. name .. '.json'))
      local rec = record.from_log(assert(log.parse(ROOT .. '/' .. name .. '.log')))
      assert.are.same(stored.iterations, rec.iterations, name)
      assert.are.same(stored.step_times, rec.step_times, name)
      assert.are.same(stored.loss_values, rec.loss_values, name)
      assert.are.equal(stored.args.lr, rec.args.lr, name)
      assert.are.equal(stored.args.seed, rec.args.seed, name)
      assert.are.equal(stored.performance_metrics.tokens_per_second,
        rec.performance_metrics.tokens_per_second, name)
    end
  end)
end)
