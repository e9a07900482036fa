-- tp.run._journal: a campaign's journal (<results>/journal.jsonl): reading it back, tolerant of a
-- crash mid-write, and appending stamped, scrubbed events, one fsync'd line each.
local fs = require('tp.fs')
local json = require('tp.json')
local run_mod = require('tp.run')
local digest = require('tp._digest')

local M = {}

--- The journal's file name inside the results directory.
M.JOURNAL = 'journal.jsonl'
--- Journal format version, written in every line as `v`.
M.JOURNAL_VERSION = 1
--- Largest journal read (bytes); a line is ~300 bytes, so this is about a million events.
M.JOURNAL_MAX = 256 * 1024 * 1024

--- Reads a journal. A last line without its newline (a crash in the middle of a write) is
--- ignored and reported; an undecodable complete line is skipped and reported with its line
--- number. A missing file is an empty journal.
---@param path string
---@return table|nil journal {events = {...}, notes = {string...}, partial = bool,
---  good_bytes = n, size = n}
---@return string? err
---@return string? code
function M.read_journal(path)
  if type(path) ~= 'string' then
    error('read_journal: path: string expected, got ' .. type(path), 2)
  end
  local out = { events = {}, notes = {}, partial = false, good_bytes = 0, size = 0 }
  local st = fs.stat(path)
  if not st then
    return out
  end
  if st.type ~= 'file' then
    return nil, string.format('%s: not a regular file', path), 'EINVAL'
  end
  if st.size > M.JOURNAL_MAX then
    return nil, string.format('%s: %d bytes, more than a journal can be (%d): not a journal?',
      path, st.size, M.JOURNAL_MAX), 'ELIMIT'
  end
  local data, err = fs.read(path)
  if not data then
    return nil, tostring(err), 'EIO'
  end
  out.size = #data
  local lineno, pos = 0, 1
  while pos <= #data do
    local nl = data:find('\n', pos, true)
    lineno = lineno + 1
    if not nl then
      out.partial = true
      out.notes[#out.notes + 1] = string.format(
        '%s: line %d is incomplete (%d bytes without a newline, left by a crash during a ' ..
        'write): ignored', path, lineno, #data - pos + 1)
      break
    end
    local line = data:sub(pos, nl - 1)
    out.good_bytes = nl
    if line ~= '' then
      local ev, derr = json.decode(line)
      -- The decoder's position is within the line: keep only its description of the problem.
      derr = derr and (tostring(derr):match('^<string>:%d+:%d+: (.*)$') or tostring(derr))
      if type(ev) == 'table' and type(ev.event) == 'string' then
        ev._line = lineno
        out.events[#out.events + 1] = ev
      else
        out.notes[#out.notes + 1] = string.format('%s: line %d: not a journal event (%s): ' ..
          'skipped', path, lineno, derr or 'no "event" field')
      end
    end
    pos = nl + 1
  end
  return out
end

-- Writer of journal lines: stamps, scrubs and appends each event (one write + fsync each).
function M.writer(path, scrubber, session)
  return function(ev)
    ev.v = M.JOURNAL_VERSION
    ev.time = run_mod.iso_time()
    ev.session = session
    local line = assert(json.encode(scrubber:value(ev), { sort_keys = true }))
    local ok, err = fs.append_line(path, line)
    if not ok then
      error(string.format('journal: %s', tostring(err)), 0)
    end
  end
end

-- The id of one execution of a campaign, written in each of its journal lines.
function M.session_id()
  local seed = table.concat({ tostring(os.time()), tostring(run_mod.clock()), tostring({}),
    tostring(run_mod.boot_id()), tostring(math.random()) }, '|')
  return assert(digest.sha256(seed)):sub(1, 12)
end

return M
