-- tp.fs: the file-system operations Lua's io/os lack (stat, mkdir -p, list, glob, atomic
-- write, realpath). Expected failures return nil, message, code ("ENOENT", ...).
local C = require('tp._fs')

local M = {}

local function check(name, value, kind, optional)
  if value == nil and optional then
    return
  end
  if type(value) ~= kind then
    error(string.format('%s: %s expected, got %s', name, kind, type(value)), 3)
  end
end

--- Returns {type = 'file'|'directory'|'link'|'other', size=, mode=, mtime=} for `path`.
---@param path string
---@param opts? {nofollow?: boolean}  do not follow a final symbolic link (default false)
---@return table|nil stat, string? err, string? code
function M.stat(path, opts)
  check('path', path, 'string')
  check('opts', opts, 'table', true)
  return C.stat(path, opts and opts.nofollow or false)
end

--- Removes `path` and, for a directory, everything under it; symbolic links are removed, never
--- followed. Returns true, or nil and the first error (what could be removed is gone).
---@param path string
---@return true|nil ok, string? err
function M.remove_tree(path)
  check('path', path, 'string')
  local st = C.stat(path, true)
  if st and st.type == 'directory' then
    for _, e in ipairs(M.list(path) or {}) do
      local ok, err = M.remove_tree(path .. '/' .. e.name)
      if not ok then
        return nil, err
      end
    end
  end
  local ok, err = os.remove(path)
  if not ok and st then
    return nil, err
  end
  return true
end

--- The space of the file system that holds `path` (statvfs): `available` bytes an unprivileged
--- writer may still use and the `total` size.
---```lua
---local sp = tp.fs.space('/tmp'); print(sp.available / 2^30 .. ' GiB free')
---```
---@param path string
---@return table|nil space {available=, total=}, string? err, string? code
function M.space(path)
  check('path', path, 'string')
  return C.space(path)
end

--- Returns true when `path` exists (following links).
---@param path string
---@return boolean
function M.exists(path)
  check('path', path, 'string')
  return C.stat(path, false) ~= nil
end

--- Returns true when `path` is a directory.
function M.is_dir(path)
  check('path', path, 'string')
  local st = C.stat(path, false)
  return st ~= nil and st.type == 'directory'
end

--- Returns true when `path` is a regular file.
function M.is_file(path)
  check('path', path, 'string')
  local st = C.stat(path, false)
  return st ~= nil and st.type == 'file'
end

--- Creates a directory and its missing parents (mkdir -p).
---@param path string
---@param mode? integer permission bits (default 0755)
---@return true|nil ok, string? err, string? code
function M.mkdir_p(path, mode)
  check('path', path, 'string')
  check('mode', mode, 'number', true)
  return C.mkdir_p(path, mode)
end

--- Lists a directory, sorted by name: {{name=, type=}, ...}.
---@param path string
---@return table|nil entries, string? err, string? code
function M.list(path)
  check('path', path, 'string')
  return C.list(path)
end

--- Expands a shell pattern (glob(3)); returns a sorted list, empty when nothing matches.
---```lua
---for _, p in ipairs(tp.fs.glob('output/*.json')) do print(p) end
---```
---@param pattern string
---@return table|nil paths, string? err, string? code
function M.glob(pattern)
  check('pattern', pattern, 'string')
  return C.glob(pattern)
end

--- Returns the canonical absolute path.
---@param path string
---@return string|nil path, string? err, string? code
function M.realpath(path)
  check('path', path, 'string')
  return C.realpath(path)
end

--- Replaces `path` with `data` atomically (temporary file, fsync, rename, fsync directory):
--- readers see the old or the new contents, never a mix; nothing is left behind on failure.
---@param path string
---@param data string
---@param mode? integer permission bits (default 0644)
---@return true|nil ok, string? err, string? code
function M.write_atomic(path, data, mode)
  check('path', path, 'string')
  check('data', data, 'string')
  check('mode', mode, 'number', true)
  return C.write_atomic(path, data, mode)
end

--- Appends one line to a journal file with a single write and fsync.
---@param path string
---@param line string  must not contain a newline
---@return true|nil ok, string? err, string? code
function M.append_line(path, line)
  check('path', path, 'string')
  check('line', line, 'string')
  return C.append_line(path, line)
end

--- Reads a whole file.
---@param path string
---@return string|nil data, string? err
function M.read(path)
  check('path', path, 'string')
  local f, err = io.open(path, 'rb')
  if not f then
    return nil, err
  end
  local data, rerr = f:read('a')
  f:close()
  if not data then
    return nil, path .. ': ' .. tostring(rerr)
  end
  return data
end

--- Joins path segments with '/'.
function M.join(...)
  local parts = { ... }
  local out = {}
  for i, p in ipairs(parts) do
    check('segment ' .. i, p, 'string')
    if i > 1 then
      p = p:gsub('^/+', '')
    end
    if i < #parts then
      p = p:gsub('/+$', '')
    end
    if p ~= '' then
      out[#out + 1] = p
    end
  end
  return table.concat(out, '/')
end

--- Returns the last component of a path.
function M.basename(path)
  check('path', path, 'string')
  return (path:gsub('/+$', ''):match('[^/]*$'))
end

--- Returns the directory part of a path ('.' when none).
function M.dirname(path)
  check('path', path, 'string')
  local d = path:gsub('/+$', ''):match('^(.*)/[^/]*$')
  if d == nil then
    return '.'
  end
  return d == '' and '/' or d
end

return M
