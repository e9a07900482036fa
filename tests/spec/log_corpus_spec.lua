-- tp.log on every log of tests/fixtures/logs/<framework>/ (every folder that has an EXPECTED.md)
-- against the values written by hand in its EXPECTED.md section (tests/log_expected.lua reads
-- them): format, record count, first/last iteration, first/last loss, mean step time and its
-- record count, lr of the last record, the error kinds and, where a section lists them, the
-- warning kinds. One test per log, so a regression names the log; the table of expected against
-- got for every log is printed on stdout at the end (ctest --output-on-failure shows it).
--
-- A `| known | <quantity>: <reason> |` row in a section marks a disagreement with the parser that
-- is reported, not asserted: the table shows "known: <reason>" for it, and the test fails if the
-- parser comes to agree (so the row is removed, not forgotten). Tolerances are those of
-- log_fixtures_spec.lua: 1e-9 relative for values copied from the log, 1e-6 for means, 0.5 %
-- for torchtitan step times derived from the rounded tps.
local h = require('helper')
local expected = require('log_expected')
local tp = require('tp')

local REL_LOG = 1e-9
local REL_MEAN = 1e-6
local REL_DERIVED = 0.005
local ROOT = h.fixture('logs')

local function close(a, b, rel)
  if a == nil or b == nil then
    return a == b
  end
  if type(a) ~= 'number' or type(b) ~= 'number' then
    return false
  end
  local scale = math.abs(b) > 1e-300 and math.abs(b) or 1
  return math.abs(a - b) <= rel * scale
end

local kinds = expected.log_kinds

-- What the parser gives, in the summary's terms.
local function got_summary(log)
  local recs = log.records
  local first, last = recs[1], recs[#recs]
  local sum, n = 0, 0
  for i = 1, #recs do
    local t = recs[i].step_time_s
    if t then
      sum, n = sum + t, n + 1
    end
  end
  return {
    format = log.format,
    records = #recs,
    first = first and first.iteration,
    last = last and last.iteration,
    loss_first = first and first.loss,
    loss_last = last and last.loss,
    mean_step = n > 0 and sum / n or nil,
    mean_n = n,
    lr_last = last and last.lr,
    errors = kinds(log, 'error'),
    warnings = kinds(log, 'warning'),
    outcome = log.outcome,
  }
end

-- Compares one quantity; returns true when it agrees.
local function agrees(key, e, g)
  if key == 'mean_step' then
    if e.mean_step == nil then
      return g.mean_step == nil
    end
    return close(g.mean_step, e.mean_step, e.derived and REL_DERIVED or REL_MEAN)
      and g.mean_n == e.mean_n
  elseif key == 'loss_first' or key == 'loss_last' or key == 'lr_last' then
    return close(g[key], e[key], REL_LOG)
  elseif key == 'errors' or key == 'warnings' or key == 'outcome' then
    return e[key] == nil or e[key] == g[key]
  end
  return e[key] == g[key]
end

local function show(v)
  if v == nil then
    return '—'
  elseif math.type(v) == 'float' then
    return string.format('%.10g', v)
  elseif v == '' then
    return 'none'
  end
  return tostring(v)
end

-- "expected/got" for a cell; one value when they agree.
local function cell(e, g)
  if show(e) == show(g) then
    return show(e)
  end
  return show(e) .. ' / ' .. show(g)
end

local function mean_cell(e, g)
  local ev = e.mean_step and string.format('%.6g s (%d)', e.mean_step, e.mean_n) or '—'
  local gv = g.mean_step and string.format('%.6g s (%d)', g.mean_step, g.mean_n) or '—'
  return ev == gv and ev or ev .. ' / ' .. gv
end

-- The fixture logs: {framework, file, expected summary or nil}, folders and files sorted.
local function corpus()
  local out, missing = {}, {}
  for _, dir in ipairs(assert(tp.fs.list(ROOT))) do
    if dir.type == 'directory' then
      local exp = expected.read(ROOT .. '/' .. dir.name .. '/EXPECTED.md', dir.name)
      if exp then
        for _, f in ipairs(assert(tp.fs.list(ROOT .. '/' .. dir.name))) do
          if f.type == 'file' and not f.name:match('%.md$') then
            local item = { framework = dir.name, file = f.name, expected = exp[f.name] }
            out[#out + 1] = item
            if not item.expected then
              missing[#missing + 1] = dir.name .. '/' .. f.name
            end
          end
        end
      end
    end
  end
  return out, missing
end

local rows = {}

local function print_table()
  local header = { 'file', 'format', 'records', 'first..last', 'loss first', 'loss last',
    'mean step (n)', 'lr last', 'errors', 'warnings', 'outcome', 'status' }
  local lines = { '', 'tp.log corpus: expected / got (one value when they agree)', '' }
  lines[#lines + 1] = '| ' .. table.concat(header, ' | ') .. ' |'
  lines[#lines + 1] = '|' .. string.rep('---|', #header)
  for _, r in ipairs(rows) do
    lines[#lines + 1] = '| ' .. table.concat(r, ' | ') .. ' |'
  end
  io.stdout:write(table.concat(lines, '\n'), '\n\n')
  io.stdout:flush()
end

describe('tp.log corpus (every fixture against its EXPECTED.md)', function()
  local items, missing = corpus()

  teardown(print_table)

  it('every fixture log has a section in its EXPECTED.md', function()
    assert(#missing == 0, 'no EXPECTED.md section for: ' .. table.concat(missing, ', '))
  end)

  for _, item in ipairs(items) do
    local name = item.framework .. '/' .. item.file
    if item.expected then
      it(name, function()
        local e = item.expected
        local log, err, code = tp.log.parse(ROOT .. '/' .. name)
        if not log then
          rows[#rows + 1] = { name, 'parse failed: ' .. tostring(err) .. ' ' .. tostring(code) }
          error(name .. ': ' .. tostring(err))
        end
        local g = got_summary(log)
        local failed, known_ok, notes = {}, {}, {}
        -- A 0-record log whose section names no format: the folder says nothing about it.
        local skip_format = e.format_from_folder and e.records == 0
        if skip_format then
          notes[#notes + 1] = 'format not checked (no records and no "format" row)'
        end
        for _, key in ipairs(expected.KEYS) do
          local ok = agrees(key, e, g)
          if key == 'format' and skip_format then -- luacheck: ignore 542
            -- reported in notes
          elseif e.known[key] then
            if ok then
              known_ok[#known_ok + 1] = key
            end
          elseif not ok then
            failed[#failed + 1] = key
          end
        end
        for _, key in ipairs(e.known_order) do
          notes[#notes + 1] = 'known ' .. key .. ': ' .. e.known[key]
        end
        if e.errors == nil then
          notes[#notes + 1] = 'errors not checked (failure cell is prose: add an "error kinds" row)'
        end
        local status = #failed == 0 and 'ok' or ('FAIL: ' .. table.concat(failed, ', '))
        if #known_ok > 0 then
          status = status .. '; known rows now agree: ' .. table.concat(known_ok, ', ')
        end
        if #notes > 0 then
          status = status .. '; ' .. table.concat(notes, '; ')
        end
        rows[#rows + 1] = {
          name, cell(e.format, g.format), cell(e.records, g.records),
          cell(e.first, g.first) .. '..' .. cell(e.last, g.last),
          cell(e.loss_first, g.loss_first), cell(e.loss_last, g.loss_last), mean_cell(e, g),
          cell(e.lr_last, g.lr_last), cell(e.errors, g.errors),
          e.warnings and cell(e.warnings, g.warnings) or show(g.warnings) .. ' (not listed)',
          e.outcome and cell(e.outcome, g.outcome) or show(g.outcome) .. ' (not listed)',
          status,
        }
        assert(#failed == 0 and #known_ok == 0, name .. ': ' .. status)
      end)
    end
  end
end)
