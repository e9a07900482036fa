-- The series query of the history's benchmark (run by bench/history/import): builds a database
-- of RUNS generated runs (100 series, one transaction) unless it exists, then times
-- History:points of one series (all its runs, with their environment decoded) and
-- History:series_list, each the median of 7 calls.
--
--   build/tplua bench/history/query.lua DB [RUNS]
local history = require('tp.history')
local fs = require('tp.fs')
local now = require('tp.gpu').now

local path, runs = arg[1], math.tointeger(tonumber(arg[2] or '100000'))
if not path or not runs then
  io.stderr:write('usage: tplua bench/history/query.lua DB [RUNS]\n')
  os.exit(2)
end
local SERIES = 100
local built = not fs.exists(path)
local H = assert(history.open(path))
if built then
  local t0 = now()
  local c = H.conn
  assert(c:begin())
  local ids = {}
  for s = 1, SERIES do
    ids[s] = assert(require('tp.history._store').series_id(c, { key = string.format(
      'amd/mi300x/primus@0.9.0/model-%03d/0123456789ab/identical_config', s), platform = 'amd',
      gpu = 'mi300x', framework = 'primus', framework_version = '0.9.0',
      model = string.format('model-%03d', s), config_hash = '0123456789ab',
      methodology = 'identical_config' }))
  end
  local sql = 'INSERT INTO runs (sha256, series_id, run_id, time, time_epoch, time_basis, '
    .. 'tokens_per_s, tokens_per_s_per_gpu, step_time_s, environment, record, source, added_at) '
    .. 'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)'
  local env = '{"framework":{"name":"primus","version":"0.9.0"},"gpu_stack":{"hip_runtime":'
    .. '"6.3.42131","amdgpu_driver":"6.10.5"},"python":{"python":"3.10.12","torch":"2.5.1"}}'
  local record = '{"schema":"tplua.run/2","status":"completed"}'
  local start = 1767225600
  for i = 1, runs do
    local s = (i - 1) % SERIES + 1
    local night = (i - 1) // SERIES
    local t = start + night * 86400 + s
    local tps = 10000 + (i * 7919 % 200) - 100
    assert(c:exec(sql, string.format('%064x', i), ids[s], string.format('run-%06d', i),
      os.date('!%Y-%m-%dT%H:%M:%SZ', t), t, 'record', tps * 8, tps, 2048 * 64 / (tps * 8),
      env, record, 'generated', '2026-11-27T00:00:00Z'))
  end
  assert(c:commit())
  print(string.format('built %s: %d runs in %d series in %.2f s', path, runs, SERIES, now() - t0))
end

local function median_ms(fn)
  local ts = {}
  for i = 1, 7 do
    local t0 = now()
    fn()
    ts[i] = (now() - t0) * 1000
  end
  table.sort(ts)
  return ts[4]
end

local key = string.format('amd/mi300x/primus@0.9.0/model-%03d/0123456789ab/identical_config', 42)
local n = 0
local points_ms = median_ms(function()
  n = #assert(H:points(key))
end)
local list_ms = median_ms(function()
  assert(H:series_list())
end)
print(string.format('series query: H:points(one series) %d runs of %d: %.1f ms (goal < 50 ms) %s',
  n, require('tp.history._store').count_runs(H.conn), points_ms, points_ms < 50 and 'PASS'
  or 'MISS'))
print(string.format('series list:  H:series_list() %d series: %.1f ms', SERIES, list_ms))
H:close()
