-- tp.parse.time: the times records, logs and command lines carry: ISO-8601 text read into epoch
-- seconds (UTC unless the text names an offset, never the local time zone) and written back as
-- UTC. Used by the history (times of runs, --since dates) and the MLPerf writer.
local M = {}

-- Days from 1970-01-01 to a civil date (proleptic Gregorian; H. Hinnant's days_from_civil,
-- https://howardhinnant.github.io/date_algorithms.html).
local function days_from_civil(y, m, d)
  if m <= 2 then
    y = y - 1
  end
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = (153 * mp + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

local DAYS_IN = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

--- Reads 'YYYY-MM-DD', 'YYYY-MM-DDTHH:MM[:SS[.fff]][Z|+HH:MM|-HHMM]' (a space may stand for the
--- T; no offset: UTC) into epoch seconds; nil for anything else.
---@param s string|nil
---@return number|nil epoch
function M.parse(s)
  if type(s) ~= 'string' then
    return nil
  end
  local y, mo, d, rest = s:match('^%s*(%d%d%d%d)%-(%d%d)%-(%d%d)(.-)%s*$')
  if not y then
    return nil
  end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  if mo < 1 or mo > 12 or d < 1 or d > DAYS_IN[mo] then
    return nil
  end
  local hh, mm, ss, frac, zone = 0, 0, 0, 0, ''
  if rest ~= '' then
    local h_, m_, tail = rest:match('^[T ](%d%d):(%d%d)(.*)$')
    if not h_ then
      return nil
    end
    hh, mm = tonumber(h_), tonumber(m_)
    local s_, tail2 = tail:match('^:(%d%d)(.*)$')
    if s_ then
      ss, tail = tonumber(s_), tail2
      local f_, tail3 = tail:match('^[%.,](%d+)(.*)$')
      if f_ then
        frac, tail = tonumber('0.' .. f_), tail3
      end
    end
    zone = tail
  end
  if hh > 23 or mm > 59 or ss > 60 then
    return nil
  end
  local offset = 0
  if zone ~= '' and zone ~= 'Z' and zone ~= 'z' then
    local sign, oh, om = zone:match('^([%+%-])(%d%d):?(%d%d)$')
    if not sign then
      return nil
    end
    offset = (tonumber(oh) * 3600 + tonumber(om) * 60) * (sign == '-' and -1 or 1)
  end
  local epoch = days_from_civil(y, mo, d) * 86400 + hh * 3600 + mm * 60 + ss - offset
  if frac ~= 0 then
    return epoch + frac
  end
  return epoch
end

--- The UTC ISO-8601 text of epoch seconds, to the second: '2026-11-27T01:30:00Z'.
---@param epoch number
---@return string
function M.iso(epoch)
  return os.date('!%Y-%m-%dT%H:%M:%SZ', math.floor(epoch))
end

--- The UTC date of epoch seconds: '2026-11-27'.
function M.date(epoch)
  return os.date('!%Y-%m-%d', math.floor(epoch))
end

--- The UTC date and minute of epoch seconds: '2026-11-27 01:30'.
function M.minute(epoch)
  return os.date('!%Y-%m-%d %H:%M', math.floor(epoch))
end

return M
