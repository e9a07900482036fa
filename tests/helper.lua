-- Shared helpers for the busted specs: where things are, temp dirs, running the tplua binary.
local M = {}

M.bin = os.getenv('TPLUA_BIN') or 'build/tplua'
M.source_dir = os.getenv('TPLUA_SOURCE_DIR') or '.'
M.build_dir = os.getenv('TPLUA_BUILD_DIR') or 'build'
M.tools_dir = os.getenv('TPLUA_TOOLS_DIR') or (M.build_dir .. '/tests/tools')
M.fakes_dir = os.getenv('TPLUA_FAKES_DIR') or (M.build_dir .. '/tests/fakes')

--- Returns the path of a file under tests/fixtures.
function M.fixture(rel)
  return M.source_dir .. '/tests/fixtures/' .. rel
end

--- Quotes a string for /bin/sh.
function M.shquote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

--- Reads a whole file, or returns nil.
function M.read(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local s = f:read('a')
  f:close()
  return s
end

--- Writes a whole file.
function M.write(path, data)
  local f = assert(io.open(path, 'wb'))
  assert(f:write(data))
  f:close()
end

local tmpdirs = {}

--- Creates a fresh temporary directory, removed when the spec file ends.
function M.tmpdir()
  local p = io.popen('mktemp -d "${TMPDIR:-/tmp}/tplua-spec.XXXXXX"')
  local dir = p:read('l')
  p:close()
  assert(dir and #dir > 0, 'mktemp failed')
  tmpdirs[#tmpdirs + 1] = dir
  return dir
end

--- Runs the tplua binary with `args` (a list), optional `opts.stdin` (string), `opts.env`
--- (table of NAME = value, prepended with env), `opts.cwd`. Returns {code=, stdout=, stderr=}.
function M.run(args, opts)
  opts = opts or {}
  local dir = M.tmpdir()
  local parts = {}
  if opts.cwd then
    parts[#parts + 1] = 'cd ' .. M.shquote(opts.cwd) .. ' &&'
  end
  if opts.env then
    parts[#parts + 1] = 'env'
    local names = {}
    for k in pairs(opts.env) do
      names[#names + 1] = k
    end
    table.sort(names)
    -- env(1) takes every -u option before the first NAME=VALUE assignment
    for _, k in ipairs(names) do
      if opts.env[k] == false then
        parts[#parts + 1] = '-u ' .. M.shquote(k)
      end
    end
    for _, k in ipairs(names) do
      local v = opts.env[k]
      if v ~= false then
        parts[#parts + 1] = M.shquote(k .. '=' .. v)
      end
    end
  end
  parts[#parts + 1] = M.shquote(opts.bin or M.bin)
  for _, a in ipairs(args) do
    parts[#parts + 1] = M.shquote(a)
  end
  local stdin = '/dev/null'
  if opts.stdin then
    stdin = dir .. '/stdin'
    M.write(stdin, opts.stdin)
  end
  local cmd = table.concat(parts, ' ')
    .. ' <' .. M.shquote(stdin)
    .. ' >' .. M.shquote(dir .. '/stdout')
    .. ' 2>' .. M.shquote(dir .. '/stderr')
  local ok, how, code = os.execute(cmd)
  if how == 'signal' then
    code = 128 + code
  end
  return {
    code = ok and 0 or code,
    stdout = M.read(dir .. '/stdout') or '',
    stderr = M.read(dir .. '/stderr') or '',
    cmd = cmd,
  }
end

--- Why a test of real training cannot run here (Debian's python3-torch missing for
--- /usr/bin/python3), or nil when it can. Asked once per spec file.
local torch_why
function M.torch_missing()
  if torch_why == nil then
    local r = require('tp.proc').run({ '/usr/bin/python3', '-c',
      'import torch, torch.distributed' }, { timeout = 120 })
    torch_why = false
    if not r then
      torch_why = '/usr/bin/python3 cannot be started'
    elseif r.code ~= 0 then
      torch_why = 'PyTorch is not installed for /usr/bin/python3 (scripts/install-deps '
        .. 'installs python3-torch)'
    end
  end
  return torch_why or nil
end

--- Why a real training run on the fake GPU libraries in `fakes` cannot run here (torch missing,
--- or those libraries not built), or nil when it can.
function M.trainer_missing(fakes)
  return M.torch_missing()
    or (not require('tp.fs').is_dir(fakes) and ('fake GPU libraries not built (' .. fakes .. ')'))
    or nil
end

--- Fails (at the caller's caller) unless |actual - expected| <= tol, naming `what`.
function M.near(actual, expected, tol, what)
  if math.abs(actual - expected) > tol then
    error(string.format('%s: %s against %s expected (tolerance %s)', what, tostring(actual),
      tostring(expected), tostring(tol)), 2)
  end
end

--- Runs tplua with `args` on a pseudo-terminal (tests/tools/ptyrun), driven by `steps`: a list of
--- {'-x', text} (wait for the text) and {'-s', text} (type it), within `timeout` seconds (10).
--- Returns what M.run returns.
function M.pty(steps, args, env, timeout)
  local argv = { '-t', tostring(timeout or 10) }
  for _, s in ipairs(steps) do
    argv[#argv + 1] = s[1]
    argv[#argv + 1] = s[2]
  end
  argv[#argv + 1] = '--'
  argv[#argv + 1] = M.bin
  for _, a in ipairs(args or {}) do
    argv[#argv + 1] = a
  end
  return M.run(argv, { bin = M.tools_dir .. '/ptyrun', env = env })
end

-- Remove the temporary directories when busted exits.
local function cleanup()
  for _, d in ipairs(tmpdirs) do
    os.execute('rm -rf ' .. M.shquote(d))
  end
end
setmetatable(tmpdirs, { __gc = cleanup })

package.loaded['helper'] = M
return M
