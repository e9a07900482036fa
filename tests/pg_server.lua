-- A real, throw-away PostgreSQL 15 server for the specs: initdb and pg_ctl in a temp dir (as the
-- user `postgres` when run as root, which PostgreSQL refuses, else as the current user),
-- listening only on a Unix socket in that dir, on a free port number. `stop()` stops the
-- postmaster by its pid and removes the dir. Superuser `tplua` connects without a password; the
-- role `guarded` needs one (scram-sha-256), so refused passwords can be tested.
-- Needs Debian's postgresql-15; `available()` says why not.
local h = require('helper')
local fs = require('tp.fs')
local proc = require('tp.proc')

local M = {}

local BIN = '/usr/lib/postgresql/15/bin'
local BINARIES = { BIN .. '/initdb', BIN .. '/pg_ctl', BIN .. '/postgres' }

--- The password of the role `guarded`.
M.GUARDED_PASSWORD = 'Gu4rded-secret-pw'

-- Whether tplua runs as root (then the server runs as the user postgres: PostgreSQL refuses
-- root), else the server runs as the current user.
local function is_root()
  local id = proc.run({ 'id', '-u' })
  return id ~= nil and id.stdout:gsub('%s', '') == '0'
end

--- Returns true, or nil and why a real server cannot be started here.
function M.available()
  for _, b in ipairs(BINARIES) do
    if not fs.is_file(b) then
      return nil, b .. ' is missing: scripts/install-deps installs postgresql'
    end
  end
  if is_root() then
    local pw = proc.run({ 'id', '-u', 'postgres' })
    if not pw or pw.code ~= 0 then
      return nil, 'no user postgres to run the server as: scripts/install-deps installs '
        .. 'postgresql, which creates it'
    end
  end
  return true
end

-- Percent-encodes a URL component (RFC 3986 unreserved characters stay).
local function encode(s)
  return (s:gsub('[^%w%-%._~]', function(c)
    return string.format('%%%02X', c:byte())
  end))
end

local Server = {}
Server.__index = Server

local function run_checked(argv, what)
  local r, err = proc.run(argv, { timeout = 120 })
  if not r then
    error('pg server: ' .. what .. ': ' .. tostring(err), 0)
  end
  if r.code ~= 0 then
    error(string.format('pg server: %s exited %d: %s%s', what, r.code, r.stdout, r.stderr), 0)
  end
  return r
end

--- Starts a server. Returns it: { dir, port, url, pid }. Raises when it cannot start (after
--- removing what it made).
function M.start()
  local dir = h.tmpdir()
  local self = setmetatable({ dir = dir, data = dir .. '/data' }, Server)
  local root = is_root()
  -- argv run as the server's user.
  local function as_server(argv)
    if not root then
      return argv
    end
    return table.move(argv, 1, #argv, 5, { 'runuser', '-u', 'postgres', '--' })
  end
  local ok, err = pcall(function()
    if root then
      run_checked({ 'chown', 'postgres', dir }, 'chown')
    end
    run_checked(as_server({ BIN .. '/initdb', '-D', self.data, '-A', 'trust', '-U', 'tplua',
      '-E', 'UTF8', '--locale=C', '--no-sync' }), 'initdb')
    -- The first matching line wins: `guarded` must give its password, everyone else is trusted.
    h.write(self.data .. '/pg_hba.conf', 'local all guarded scram-sha-256\nlocal all all trust\n')
    if root then
      run_checked({ 'chown', 'postgres', self.data .. '/pg_hba.conf' }, 'chown')
    end
    self.port = require('tp.launch.ranks').free_port()
    -- setsid --wait: the postmaster leaves tplua's process group before pg_ctl returns, so that
    -- tp.proc's clean-up of the group does not reach it; pg_ctl -w returns once it accepts.
    local start = as_server({ BIN .. '/pg_ctl', '-D', self.data, '-l', dir .. '/log', '-w',
      '-t', '60', '-o',
      string.format("-p %d -k %s -c listen_addresses='' -c fsync=off", self.port, dir),
      'start' })
    table.insert(start, 1, '--wait')
    table.insert(start, 1, 'setsid')
    run_checked(start, 'pg_ctl start')
    local text = h.read(self.data .. '/postmaster.pid') or ''
    self.pid = math.tointeger(tonumber(text:match('^(%d+)')))
    assert(self.pid, 'pg server: no pid in ' .. self.data .. '/postmaster.pid')
    self.url = self:database_url('postgres')
    local db = require('tp._db')
    local c <close> = assert(db.open(self.url))
    assert(c:exec(string.format("CREATE ROLE guarded LOGIN PASSWORD '%s'", M.GUARDED_PASSWORD)))
    assert(c:exec('GRANT ALL ON SCHEMA public TO guarded'))
  end)
  if not ok then
    local log = h.read(dir .. '/log') or ''
    self:stop()
    error(tostring(err) .. '\n' .. log:sub(-2000), 0)
  end
  return self
end

--- The URL of database `name` for the trusted superuser tplua.
function Server:database_url(name)
  return string.format('postgresql://tplua@/%s?host=%s&port=%d', name, encode(self.dir),
    self.port)
end

--- The URL of the `postgres` database for the role `guarded` with `password`.
function Server:secure_url(password)
  return string.format('postgresql://guarded:%s@/postgres?host=%s&port=%d', encode(password),
    encode(self.dir), self.port)
end

--- Creates an empty database `name` (letters, digits, _) and returns its URL.
function Server:new_database(name)
  assert(type(name) == 'string' and name:match('^[%a_][%w_]*$'), 'database name expected')
  local db = require('tp._db')
  local c <close> = assert(db.open(self.url))
  assert(c:exec('CREATE DATABASE ' .. name))
  return self:database_url(name)
end

--- Stops the postmaster (fast shutdown: SIGINT, SIGKILL after 20 s) by its pid and removes the
--- dir. Idempotent.
function Server:stop()
  if self.stopped then
    return
  end
  self.stopped = true
  -- A start that failed after the postmaster came up (pg_ctl timed out, a later step raised)
  -- has no pid yet: the postmaster wrote it, so read it before the dir goes.
  if not self.pid and self.data then
    local text = h.read(self.data .. '/postmaster.pid') or ''
    self.pid = math.tointeger(tonumber(text:match('^(%d+)')))
  end
  if self.pid then
    proc.run({ 'kill', '-INT', tostring(self.pid) })
    if not proc.wait_gone({ self.pid }, 20) then
      proc.run({ 'kill', '-KILL', tostring(self.pid) })
      proc.wait_gone({ self.pid }, 5)
    end
  end
  proc.run({ 'rm', '-rf', self.dir })
end

-- A server nobody stopped (a spec file that died in the middle) is stopped when collected.
Server.__gc = function(self)
  pcall(Server.stop, self)
end

--- The backends a database spec runs on, each { name =, skip = why or nil, start = fn,
--- stop = fn, target = fn(name) -> a fresh empty database (a file path or a URL) }.
function M.backends()
  local sqlite_dir
  local sqlite = {
    name = 'sqlite',
    start = function()
      sqlite_dir = h.tmpdir()
    end,
    stop = function() end,
    target = function(name)
      return sqlite_dir .. '/' .. name .. '.db'
    end,
  }
  local server
  local ok, why = M.available()
  local pg = {
    name = 'postgresql',
    skip = not ok and why or nil,
    start = function()
      server = M.start()
    end,
    stop = function()
      if server then
        server:stop()
      end
    end,
    target = function(name)
      return server:new_database(name)
    end,
    server = function()
      return server
    end,
  }
  return { sqlite, pg }
end

return M
