-- tp.run._base: what the parts of tp.run share: its clocks (wall-clock ISO times, monotonic
-- seconds), a finiteness test, a dotted-path lookup and where a run's generated files go.
local fs = require('tp.fs')

local M = {}

-- Whether v is a number other than NaN and +-Inf.
function M.is_finite(v)
  return type(v) == 'number' and v == v and v ~= math.huge and v ~= -math.huge
end

-- Wall-clock time for the journal and records: os.time (whole seconds) at load plus the
-- monotonic time since, so that times are ordered and millisecond-resolved within a process
-- (and within a second of the system clock).
local mono = require('tp.gpu').now
local EPOCH0, MONO0 = os.time(), mono()

local function wall_now()
  return EPOCH0 + (mono() - MONO0)
end

--- Formats epoch seconds as '2026-01-31T12:00:00.250Z'.
---@param t? number epoch seconds (default now)
---@return string
function M.iso_time(t)
  t = t or wall_now()
  local s = math.floor(t)
  return os.date('!%Y-%m-%dT%H:%M:%S', s) .. string.format('.%03dZ', math.floor((t - s) * 1000))
end

--- Seconds on the monotonic clock (for durations).
M.clock = mono

-- The value at a dotted path of a table, or nil.
function M.dig(t, ...)
  for _, k in ipairs({ ... }) do
    if type(t) ~= 'table' then
      return nil
    end
    t = t[k]
  end
  return t
end

-- Where a run's generated files go: files_dir, the config's paths.output, its cwd, or
-- <results>/<id>.files.
function M.files_dir(run, results)
  return run.files_dir or M.dig(run.config, 'paths', 'output') or run.cwd
    or fs.join(results, run.id .. '.files')
end

return M
