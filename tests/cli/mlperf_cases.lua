-- The RCP rule cases of tests/fixtures/mlperf/rcp/cases.json, and their result files written
-- the way the generator of the expected verdicts wrote them (SOURCES.md): one line each of
-- submission_benchmark, submission_division, global_batch_size (when the case has one),
-- run_start, eval_accuracy (samples_count or epoch_num) and run_stop (status).
local h = require('helper')
local json = require('tp.json')

local M = {}

local T0 = 1700000000000

local function line(t, ev, key, value, meta)
  local parts = {}
  for _, k in ipairs({ 'samples_count', 'epoch_num', 'status' }) do
    if meta[k] ~= nil then
      parts[#parts + 1] = string.format('"%s": %s', k, json.encode(meta[k]))
    end
  end
  return string.format(':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "%s", '
    .. '"key": "%s", "value": %s, "metadata": {%s}}', t, ev, key,
    value == nil and 'null' or json.encode(value), table.concat(parts, ', '))
end

--- The result files of a case, as the generator of cases.json wrote them, in a new temporary
--- directory (returned).
function M.materialise(case)
  local dir = h.tmpdir()
  for i = 1, #case.status do
    local t = T0 + (i - 1) * 3600000
    local gbs = case.gbs
    if type(gbs) == 'table' then
      gbs = gbs[i]
    end
    local ls = { line(t, 'POINT_IN_TIME', 'submission_benchmark', case.benchmark, {}),
      line(t, 'POINT_IN_TIME', 'submission_division', case.division, {}) }
    if type(gbs) == 'number' then
      ls[#ls + 1] = line(t, 'POINT_IN_TIME', 'global_batch_size', gbs, {})
    end
    ls[#ls + 1] = line(t + 1000, 'INTERVAL_START', 'run_start', nil, {})
    ls[#ls + 1] = line(t + 60000 + (i - 1) * 1000, 'POINT_IN_TIME', 'eval_accuracy', 0.5,
      { samples_count = case.samples and case.samples[i], epoch_num = case.epochs
        and case.epochs[i] })
    ls[#ls + 1] = line(t + 61000 + (i - 1) * 1000, 'INTERVAL_END', 'run_stop', nil,
      { status = case.status[i] })
    h.write(string.format('%s/result_%d.txt', dir, i - 1), table.concat(ls, '\n') .. '\n')
  end
  return dir
end

--- The cases of cases.json.
function M.cases()
  return json.decode(h.read(h.fixture('mlperf/rcp') .. '/cases.json')).cases
end

--- The case named `name`.
function M.case(name)
  for _, c in ipairs(M.cases()) do
    if c.name == name then
      return c
    end
  end
  error('no RCP case ' .. name)
end

return M
