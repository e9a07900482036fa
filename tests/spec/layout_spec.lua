-- The standard library's layout rules (tests/deps/stdlib_deps.lua, docs/DESIGN.md "Packages"):
-- the real tree keeps them, and the checker fails on each kind of breach, shown on small trees
-- and on a copy of the real one with one upward require added.
local h = require('helper')

local CHECKER = h.source_dir .. '/tests/deps/stdlib_deps.lua'
local STDLIB = h.source_dir .. '/stdlib'

local function check(dir)
  return h.run({ CHECKER, dir })
end

-- Writes a stdlib tree from { ['tp/plan/a.lua'] = source, ... } into a fresh directory.
local function tree(files)
  local dir = h.tmpdir()
  for rel, src in pairs(files) do
    local path = dir .. '/' .. rel
    assert(os.execute('mkdir -p ' .. h.shquote(path:match('^(.*)/'))))
    h.write(path, src)
  end
  return dir
end

local BASE = {
  ['tp/init.lua'] = 'return {}\n',
  ['tp/json.lua'] = "local host = require('tp._json')\nreturn host\n",
  ['tp/plan/init.lua'] = "return { config = require('tp.plan.config') }\n",
  ['tp/plan/config.lua'] = "local json = require('tp.json')\nreturn { json = json }\n",
  ['tp/present/init.lua'] = 'return {}\n',
  ['tp/present/report.lua'] = "local config = require('tp.plan.config')\nreturn config\n",
}

local function with(extra)
  local t = {}
  for k, v in pairs(BASE) do
    t[k] = v
  end
  for k, v in pairs(extra) do
    t[k] = v
  end
  return t
end

describe('stdlib layout', function()
  it('the real stdlib keeps the rules', function()
    local r = check(STDLIB)
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find('layers respected, no cycles', 1, true), r.stdout)
  end)

  it('every old module name loads the moved module, the same table', function()
    local moved = require('tp._moved')
    local n = 0
    for old, new in pairs(moved) do
      assert.are.equal(require(new), require(old), old .. ' -> ' .. new)
      n = n + 1
    end
    assert.is_true(n >= 28)
    -- through the lazy entry too, and a name nobody has still fails as before
    local tp = require('tp')
    assert.are.equal(require('tp.analyse.compare'), tp.compare)
    assert.are.equal(require('tp.analyse.compare'), tp.analyse.compare)
    assert.is_nil(tp.no_such_module)
    local ok, err = pcall(require, 'tp.no_such_module')
    assert.is_false(ok)
    assert.truthy(err:find("module 'tp.no_such_module' not found", 1, true))
    assert.truthy(err:find("no module 'tp.no_such_module' in tp._moved", 1, true))
  end)

  it('an old name is the moved module even with a stale file of that name on the path', function()
    local dir = h.tmpdir()
    assert(os.execute('mkdir -p ' .. h.shquote(dir .. '/tp')))
    h.write(dir .. '/tp/config.lua', "return 'stale'\n")
    local r = h.run({ '-e', "print(require('tp.config') == require('tp.plan.config'))" },
      { env = { LUA_PATH_5_4 = dir .. '/?.lua;;' } })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('true\n', r.stdout)
  end)

  it('a package face lists its modules and loads them on first use', function()
    local tp = require('tp')
    for _, pkg in ipairs({ 'catalog', 'parse', 'analyse', 'present', 'plan', 'run' }) do
      local face = tp[pkg]
      assert.is_table(face.MODULES, pkg)
      for _, m in ipairs(face.MODULES) do
        assert.are.equal(require('tp.' .. pkg .. '.' .. m), face[m], pkg .. '.' .. m)
      end
      assert.is_nil(face.no_such_module)
      -- the list is the package's public modules, no more and no fewer
      local files = {}
      local p = io.popen('ls ' .. h.shquote(STDLIB .. '/tp/' .. pkg))
      for f in p:lines() do
        local m = f:match('^([%a][%w_]*)%.lua$')
        if m and m ~= 'init' then
          files[#files + 1] = m
        end
      end
      p:close()
      local listed = { table.unpack(face.MODULES) }
      table.sort(files)
      table.sort(listed)
      assert.are.same(files, listed, pkg)
    end
    -- and tp. completes every package and every utility standing in stdlib/tp
    local complete = getmetatable(tp).__complete
    local p = io.popen('ls ' .. h.shquote(STDLIB .. '/tp'))
    for f in p:lines() do
      local m = f:match('^([%a][%w_]*)%.lua$') or f:match('^([%a][%w_]*)$')
      if m and m ~= 'init' and m ~= 'cmd' then
        assert.is_true(complete[m], m)
      end
    end
    p:close()
  end)

  it('an installed tplua finds the packages and the old names', function()
    if not h.build_dir:find('^/') then
      pending('TPLUA_BUILD_DIR is not set (run under ctest)')
      return
    end
    local prefix = h.tmpdir()
    assert(os.execute('cmake --install ' .. h.shquote(h.build_dir) .. ' --prefix '
      .. h.shquote(prefix) .. ' >/dev/null'))
    local code = "print(require('tp.config') == require('tp.plan.config'), "
      .. "require('tp').analyse.compare == require('tp.compare'))"
    local r = h.run({ '-e', code }, { bin = prefix .. '/bin/tplua', cwd = prefix,
      env = { TPLUA_PATH = false } })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('true\ttrue\n', r.stdout)
    r = h.run({ CHECKER, prefix .. '/share/tplua/lua' },
      { bin = prefix .. '/bin/tplua', env = { TPLUA_PATH = false } })
    assert.are.equal(0, r.code, r.stderr)
  end)

  it('a small tree with downward requires passes', function()
    local r = check(tree(BASE))
    assert.are.equal(0, r.code, r.stderr)
  end)

  it('fails on an upward require, naming both packages and the line', function()
    local r = check(tree(with({
      ['tp/plan/config.lua'] = "local json = require('tp.json')\n"
        .. "local report = require('tp.present.report')\nreturn { json, report }\n",
    })))
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find("tp/plan/config.lua:2: tp.plan.config (tp.plan) requires "
      .. "'tp.present.report' of tp.present, a package above it (upward)", 1, true), r.stderr)
  end)

  it('fails on a cycle inside a package, naming it', function()
    local r = check(tree(with({
      ['tp/plan/a.lua'] = "return require('tp.plan.b')\n",
      ['tp/plan/b.lua'] = "local x = 1\nreturn require 'tp.plan.a', x\n",
    })))
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('cycle: tp.plan.a -> tp.plan.b -> tp.plan.a', 1, true), r.stderr)
  end)

  it('fails on a private module required from another package', function()
    local r = check(tree(with({
      ['tp/plan/_keys.lua'] = 'return {}\n',
      ['tp/present/report.lua'] = "return require('tp.plan._keys')\n",
    })))
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find("requires 'tp.plan._keys', private to tp.plan", 1, true), r.stderr)
  end)

  it('fails on an old module name, a package with no layer, and an unknown module', function()
    local r = check(tree(with({
      ['tp/_moved.lua'] = "return { ['tp.config'] = 'tp.plan.config' }\n",
      ['tp/present/report.lua'] = "local a = require('tp.config')\nlocal b = require('tp.nope')\n"
        .. 'return a, b\n',
      ['tp/misc/x.lua'] = 'return {}\n',
    })))
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find("requires the old name 'tp.config'; it is 'tp.plan.config' now", 1,
      true), r.stderr)
    assert.truthy(r.stderr:find("requires 'tp.nope', which is no module", 1, true), r.stderr)
    assert.truthy(r.stderr:find('tp.misc.x is in package tp.misc, which has no layer', 1, true),
      r.stderr)
  end)

  it('ignores requires in comments and reads the dynamic adapter form', function()
    local r = check(tree(with({
      ['tp/plan/config.lua'] = "-- local r = require('tp.present.report')\n"
        .. "local function get(n) return require('tp.plan.' .. n) end\nreturn get\n",
    })))
    assert.are.equal(0, r.code, r.stderr)
  end)

  it('fails on too many modules directly in tp/ and on a module over 800 lines', function()
    local files = with({ ['tp/plan/long.lua'] = string.rep('local _ = 1\n', 801) .. 'return {}\n' })
    for i = 1, 10 do
      files['tp/util' .. i .. '.lua'] = 'return {}\n'
    end
    local r = check(tree(files))
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find('11 modules stand directly in tp/, at most 10', 1, true), r.stderr)
    assert.truthy(r.stderr:find('tp.plan.long has 802 lines, over 800', 1, true), r.stderr)
  end)

  it('fails when an upward require is added to a copy of the real stdlib', function()
    local dir = h.tmpdir()
    assert(os.execute('cp -r ' .. h.shquote(STDLIB .. '/tp') .. ' ' .. h.shquote(dir .. '/tp')))
    local path = dir .. '/tp/plan/memory.lua'
    h.write(path, "local _pretty = require('tp.present.pretty')\n" .. h.read(path))
    local r = check(dir)
    assert.are.equal(1, r.code)
    assert.truthy(r.stderr:find("memory.lua:1: tp.plan.memory (tp.plan) requires "
      .. "'tp.present.pretty' of tp.present, a package above it (upward)", 1, true), r.stderr)
    assert.truthy(r.stderr:find('1 breach(es)', 1, true), r.stderr)
  end)
end)

-- Through a real terminal (tests/tools/ptyrun): Tab after `tp.` offers the packages, and after a
-- package's name its modules, before any of them is loaded.
describe('the packages at the prompt', function()
  it('complete tp.anal<Tab>, and tp.analyse.conv<Tab> once the package was used', function()
    local state = h.tmpdir()
    local P = 'tplua> '
    local steps = {
      { '-x', P }, { '-s', 'tp.anal\t' }, { '-x', 'tp.analyse' },
      -- completion reads tables without running code: the package is there once it was used
      { '-s', '.MODULES[1]\n' }, { '-x', 'results' },
      { '-x', P }, { '-s', 'tp.analyse.conv\t' }, { '-x', 'tp.analyse.convergence' },
      { '-s', "\nprint(type(tp.analyse.convergence.check), tp.catalog.models == tp.models)\n" },
      { '-x', 'function\ttrue' },
      { '-x', P }, { '-s', '\x04' },
    }
    local r = h.pty(steps, { 'repl' }, { XDG_STATE_HOME = state, HOME = state })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
  end)
end)
