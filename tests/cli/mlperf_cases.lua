-- The RCP rule cases of tests/fixtures/mlperf/rcp/cases.json, and their result files written
-- the way the generator of the expected verdicts wrote them (SOURCES.md): one line each of
-- submission_benchmark, submission_division, global_batch_size (when the case has one),
-- run_start, eval_accuracy (samples_count or epoch_num) and run_stop (status).
--
-- Also a script, from the repository root (docs/mlperf.md shows it): writes the result files of
-- case CASE into DIR (created; its result_*.txt files replaced), and lists the cases without
-- arguments.
--
--   tplua tests/cli/mlperf_cases.lua [CASE DIR]
local json = require('tp.json')
local fs = require('tp.fs')

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

--- The result files of a case, as the generator of cases.json wrote them, in `dir` (default a
--- new temporary directory of the specs), which is returned.
function M.materialise(case, dir)
  dir = dir or require('helper').tmpdir()
  assert(fs.mkdir_p(dir))
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
    assert(fs.write_atomic(string.format('%s/result_%d.txt', dir, i - 1),
      table.concat(ls, '\n') .. '\n'))
  end
  return dir
end

local function fixtures()
  local ok, h = pcall(require, 'helper')
  if ok then
    return h.fixture('mlperf/rcp')
  end
  return 'tests/fixtures/mlperf/rcp'
end

--- The cases of cases.json.
function M.cases()
  return assert(json.load_file(fixtures() .. '/cases.json')).cases
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

-- Run as a script: tplua tests/cli/mlperf_cases.lua [CASE DIR].
if arg and arg[0] and arg[0]:match('mlperf_cases%.lua$') and not package.loaded['helper'] then
  if not arg[1] then
    for _, c in ipairs(M.cases()) do
      io.stdout:write(string.format('%-26s %s\n', c.name, c.rule))
    end
    os.exit(0)
  end
  if not arg[2] then
    io.stderr:write('usage: tplua tests/cli/mlperf_cases.lua [CASE DIR]\n')
    os.exit(2)
  end
  local ok, case = pcall(M.case, arg[1])
  if not ok then
    io.stderr:write(string.format("tests/cli/mlperf_cases.lua: no RCP case '%s' (run it without "
      .. 'arguments for the list)\n', arg[1]))
    os.exit(1)
  end
  M.materialise(case, arg[2])
  io.stdout:write(string.format('%s: %d result files of case %s (%s)\n', arg[2], #case.status,
    case.name, case.rule))
end

return M
