-- tp.experiment._paths: the paths of an experiment: made absolute against the current directory,
-- '.' and '..' folded, and the slug of a name (the default results directory).
local M = {}

local function cwd()
  local pwd = os.getenv('PWD')
  local fs = require('tp.fs')
  local real = fs.realpath('.')
  if pwd and real and fs.realpath(pwd) == real then
    return pwd
  end
  return real or pwd or '.'
end

local function normalize_path(p)
  local parts = {}
  local absolute = p:sub(1, 1) == '/'
  for part in p:gmatch('[^/]+') do
    if part == '..' and #parts > 0 and parts[#parts] ~= '..' then
      parts[#parts] = nil
    elseif part ~= '.' and not (part == '..' and absolute and #parts == 0) then
      parts[#parts + 1] = part
    end
  end
  local s = table.concat(parts, '/')
  if absolute then
    return '/' .. s
  end
  return s == '' and '.' or s
end

--- Returns `path` made absolute against the current directory (or `base` when given), with
--- '.' and '..' folded.
---@param path string
---@param base? string
---@return string
function M.absolute(path, base)
  if path:sub(1, 1) == '/' then
    return normalize_path(path)
  end
  return normalize_path((base or cwd()) .. '/' .. path)
end

local function dirname(path)
  return path:match('^(.*)/[^/]*$') or '.'
end

local function slug(s)
  local out = s:lower():gsub('[^%w%.]+', '-'):gsub('^%-+', ''):gsub('%-+$', '')
  return out ~= '' and out or 'experiment'
end

M.normalize_path = normalize_path
M.dirname = dirname
M.slug = slug

return M
