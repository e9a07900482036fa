-- The rockspec: `luarocks make` (Debian's luarocks, Lua 5.4) builds the module from a copy of the
-- sources against the system's Lua into a local tree, and the module it installs loads in
-- lua5.4 with nothing but `luarocks path`.
local h = require('helper')

local LOG = h.fixture('logs/megatron/issue756_mixtral_memory_report.log')

local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

local function sh(cmd, env)
  env = env or {}
  env.TPLUA_PATH = false
  return h.run({ '-c', cmd }, { bin = '/bin/sh', env = env })
end

local function header_version()
  local text = assert(h.read(h.source_dir .. '/include/tplua.h'))
  local v = {}
  for _, part in ipairs({ 'MAJOR', 'MINOR', 'PATCH' }) do
    v[#v + 1] = assert(text:match('#define TPLUA_VERSION_' .. part .. ' (%d+)'))
  end
  return table.concat(v, '.')
end

describe('luarocks make', function()
  it('builds and installs the module into a local tree, where lua5.4 loads it', function()
    if sh('command -v luarocks').code ~= 0 then
      pending('luarocks is not installed (scripts/install-deps installs it)')
      return
    end
    -- The rockspec's name and version follow the header's version.
    local rockspec = 'tplua-' .. header_version() .. '-1.rockspec'
    local text = h.read(h.source_dir .. '/' .. rockspec)
    assert.is_truthy(text, rockspec .. ' is missing (or names another version than tplua.h)')
    assert.is_true(has(text, "version = '" .. header_version() .. "-1'"))

    -- A copy of what the build reads: luarocks builds in the source directory.
    local dir = h.tmpdir()
    local src, rocks = dir .. '/src', dir .. '/rocks'
    local r = sh(string.format('mkdir %s && cd %s && cp -r CMakeLists.txt tplua.pc.in %s engine '
      .. 'lua include stdlib %s', h.shquote(src), h.shquote(h.source_dir), rockspec,
      h.shquote(src)))
    assert.are.equal(0, r.code, r.stderr)
    r = sh(string.format('cd %s && luarocks --lua-version=5.4 --tree=%s make %s', h.shquote(src),
      h.shquote(rocks), rockspec), { MAKEFLAGS = '-j2' })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)

    -- lua5.4 with the tree's paths (and the system's, after them).
    local script = dir .. '/use.lua'
    h.write(script, [[
local tp = require('tp')
print(tp.version)
print(require('tp._host').stdlib_dir())
local log = assert(tp.parse.log.parse(...))
print(table.concat(tp.parse.record.from_log(log, {}).iterations, ','))
]])
    r = sh(string.format('eval "$(luarocks --lua-version=5.4 --tree=%s path)" && '
      .. 'cd / && lua5.4 %s %s', h.shquote(rocks), h.shquote(script), h.shquote(LOG)))
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local version, stdlib, iterations = r.stdout:match('^([^\n]*)\n([^\n]*)\n([^\n]*)\n$')
    assert.are.equal(header_version(), version)
    -- The stdlib the rock installed (LuaRocks' Lua directory), not the source tree's.
    assert.is_truthy(stdlib and stdlib:find(rocks, 1, true) == 1, r.stdout)
    assert.is_truthy(h.read(stdlib .. '/tp/init.lua'))
    -- tests/fixtures/logs/megatron/EXPECTED.md: iterations 2 and 3.
    assert.are.equal('2,3', iterations)
  end)
end)
