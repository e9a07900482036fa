-- libtplua installed as libraries are: `cmake --install` into a temporary prefix, the tree then
-- moved elsewhere (it is relocatable), and used from outside with nothing but what it installed:
-- C and C++ hosts built with `pkg-config --cflags --libs tplua` (shared and static), the example
-- host running a recipe, Debian's lua5.4 and busted requiring 'tp', Python through ctypes. Each
-- record must equal the one the installed `tplua extract` writes for the same log.
local h = require('helper')

local LOG = h.fixture('logs/megatron/issue756_mixtral_memory_report.log')
local SANITIZE_FLAGS = os.getenv('TPLUA_SANITIZE_FLAGS') or ''
local SANITIZE_PRELOAD = os.getenv('TPLUA_SANITIZE_PRELOAD') or ''
local CC = os.getenv('TPLUA_CC') or 'cc'
local CXX = CC:find('clang') and 'clang++' or 'c++'

local function has(s, text)
  return s:find(text, 1, true) ~= nil
end

-- Runs a /bin/sh command line; `env` as h.run's (false unsets). TPLUA_PATH is always unset, so
-- that whatever runs finds the stdlib by itself.
local function sh(cmd, env)
  env = env or {}
  env.TPLUA_PATH = false
  return h.run({ '-c', cmd }, { bin = '/bin/sh', env = env })
end

-- The environment of an interpreter loading the (possibly sanitized) library.
local function interp_env(env)
  env = env or {}
  if SANITIZE_PRELOAD ~= '' then
    env.LD_PRELOAD = SANITIZE_PRELOAD
    env.ASAN_OPTIONS = 'detect_leaks=0'
  end
  return env
end

-- The fake trainer a recipe starts. Under a sanitized build the interpreter runs with the
-- sanitizer's runtime preloaded, which its children inherit: the trainer (with its own runtime
-- linked in) is then started through a wrapper that drops it.
local function fake_trainer()
  local path = h.tools_dir .. '/fake_trainer'
  if SANITIZE_PRELOAD == '' then
    return path
  end
  local wrapper = h.tmpdir() .. '/fake_trainer'
  h.write(wrapper, '#!/bin/sh\nunset LD_PRELOAD\nexec ' .. h.shquote(path) .. ' "$@"\n')
  assert(os.execute('chmod +x ' .. h.shquote(wrapper)))
  return wrapper
end

-- The version the header declares, read from the source (not from the build).
local function header_version()
  local text = assert(h.read(h.source_dir .. '/include/tplua.h'))
  local v = {}
  for _, part in ipairs({ 'MAJOR', 'MINOR', 'PATCH' }) do
    v[#v + 1] = assert(text:match('#define TPLUA_VERSION_' .. part .. ' (%d+)'))
  end
  return table.concat(v, '.'), v[1]
end

local tree  -- set up once: {prefix=, pc=, libdir=, includedir=, cmod=, stdlib=, bin=}

local function pkg(args)
  local r = sh('pkg-config ' .. args, { PKG_CONFIG_PATH = tree.pc })
  assert(r.code == 0, r.stderr)
  return (r.stdout:gsub('%s+$', ''))
end

local function realpath(p)
  return require('tp.fs').realpath(p) or p
end

local function install()
  if tree then
    return tree
  end
  local dir = h.tmpdir()
  local cmake = os.getenv('TPLUA_CMAKE') or 'cmake'
  local r = sh(string.format('%s --install %s --prefix %s/stage', h.shquote(cmake),
    h.shquote(h.build_dir), h.shquote(dir)))
  assert(r.code == 0, r.stdout .. r.stderr)
  assert(os.execute(string.format('mv %s/stage %s/moved', h.shquote(dir), h.shquote(dir))))
  local prefix = dir .. '/moved'
  local find = sh('find ' .. h.shquote(prefix) .. ' -name tplua.pc')
  local pcfile = assert(find.stdout:match('[^\n]+'), 'no tplua.pc installed')
  tree = { prefix = prefix, pc = pcfile:match('^(.*)/[^/]+$'), dir = dir }
  tree.libdir = realpath(pkg('--variable=libdir tplua'))
  tree.includedir = realpath(pkg('--variable=includedir tplua'))
  tree.cmod = realpath(pkg('--variable=luacmoddir tplua'))
  tree.stdlib = realpath(pkg('--variable=stdlibdir tplua'))
  tree.bin = prefix .. '/bin/tplua'
  return tree
end

-- The record the installed binary writes for `log`.
local function cli_record(log)
  local out = h.tmpdir() .. '/cli.json'
  local r = h.run({ 'extract', log, '--quiet', '--json', out }, { bin = install().bin,
    env = { TPLUA_PATH = false } })
  assert(r.code == 0, r.stderr)
  return assert(h.read(out))
end

-- Builds `source` (C or C++) against the installed tree with pkg-config; returns the binary.
local function build(source, lang, extra)
  local t = install()
  local dir = h.tmpdir()
  local src = dir .. (lang == 'c++' and '/host.cpp' or '/host.c')
  h.write(src, source)
  local exe = dir .. '/host'
  local cmd = string.format('%s %s %s %s -o %s %s', lang == 'c++' and CXX or CC,
    lang == 'c++' and '-std=c++11' or '-std=c99', '-Wall -Wextra -pedantic -Werror',
    SANITIZE_FLAGS, h.shquote(exe), h.shquote(src))
  local r = sh(cmd .. ' ' .. (extra or '$(pkg-config --cflags --libs tplua)'),
    { PKG_CONFIG_PATH = t.pc })
  assert(r.code == 0, r.stdout .. r.stderr)
  return exe
end

-- A host that writes the record of argv[1] to stdout and the stdlib directory to stderr.
local HOST_C = [[
#include <stdio.h>
#include <tplua.h>
int main(int argc, char **argv) {
  tplua_engine *T = NULL;
  char *json = NULL;
  if (argc != 2 || tplua_new(&T, NULL) != TPLUA_OK) {
    return 2;
  }
  int rc = tplua_extract(T, argv[1], NULL, &json);
  if (rc != TPLUA_OK) {
    fprintf(stderr, "%s: %s\n", tplua_strerror(rc), tplua_errmsg(T));
  } else {
    fputs(json, stdout);
    fprintf(stderr, "stdlib %s\n", tplua_stdlib_dir(T));
  }
  tplua_free(json);
  tplua_close(T);
  return rc;
}
]]

local HOST_CXX = [[
#include <cstdio>
#include <string>
#include <tplua.h>
// The engine owned by an object: closed when it goes out of scope.
class Engine {
 public:
  Engine() : T_(NULL) { ok_ = tplua_new(&T_, NULL) == TPLUA_OK; }
  ~Engine() { tplua_close(T_); }
  bool extract(const char *log, std::string *out) {
    char *json = NULL;
    if (!ok_ || tplua_extract(T_, log, NULL, &json) != TPLUA_OK) {
      return false;
    }
    out->assign(json);
    tplua_free(json);
    return true;
  }
  const char *stdlib() const { return tplua_stdlib_dir(T_); }
 private:
  tplua_engine *T_;
  bool ok_;
};
int main(int argc, char **argv) {
  Engine e;
  std::string json;
  if (argc != 2 || !e.extract(argv[1], &json)) {
    return 1;
  }
  std::fputs(json.c_str(), stdout);
  std::fprintf(stderr, "stdlib %s\n", e.stdlib());
  return TPLUA_VERSION_NUMBER == tplua_version_number() ? 0 : 3;
}
]]

describe('the installed tree', function()
  it('holds the shared and static library, the header, tplua.pc, the Lua module and the stdlib',
    function()
      local t = install()
      local version, major = header_version()
      for _, f in ipairs({ t.libdir .. '/libtplua.so.' .. version,
        t.libdir .. '/libtplua.so.' .. major, t.libdir .. '/libtplua.so',
        t.libdir .. '/libtplua.a', t.includedir .. '/tplua.h', t.cmod .. '/tp.so',
        t.stdlib .. '/tp/init.lua', t.bin }) do
        assert.is_truthy(h.read(f), f .. ' is missing')
      end
      assert.are.equal(version, pkg('--modversion tplua'))
      local r = sh('readelf -d ' .. h.shquote(t.libdir .. '/libtplua.so'))
      assert.is_true(has(r.stdout, 'Library soname: [libtplua.so.' .. major .. ']'), r.stdout)
      -- Every path in tplua.pc is relative to the file: the moved tree's own directories.
      assert.is_true(has(t.libdir, t.prefix) or has(t.libdir, realpath(t.prefix)), t.libdir)
    end)

  it('exports only tplua_* and luaopen_tp* (nm -D)', function()
    local t = install()
    for _, lib in ipairs({ t.libdir .. '/libtplua.so', t.cmod .. '/tp.so' }) do
      local r = sh('nm -D --defined-only ' .. h.shquote(lib))
      assert.are.equal(0, r.code, r.stderr)
      local names = {}
      for name in r.stdout:gmatch('%S+ %u (%S+)') do
        names[name] = true
        assert.is_truthy(name:match('^tplua_') or name:match('^luaopen_tp'),
          lib .. ' exports ' .. name)
      end
      for _, want in ipairs({ 'tplua_new', 'tplua_extract', 'tplua_trace', 'tplua_interrupt',
        'luaopen_tp', 'luaopen_tp__json', 'luaopen_tp__log' }) do
        assert.is_true(names[want] == true, lib .. ' lacks ' .. want)
      end
    end
  end)

  it('links Lua 5.4 and leaves no symbol undefined; the Lua module leaves Lua to its host',
    function()
      local t = install()
      local lib = t.libdir .. '/libtplua.so'
      local r = sh('readelf -d ' .. h.shquote(lib))
      assert.is_true(has(r.stdout, '[liblua5.4.so.0]'), r.stdout)
      r = sh('ldd -r ' .. h.shquote(lib), interp_env())
      assert.are.equal(0, r.code, r.stderr)
      assert.is_false(has(r.stdout .. r.stderr, 'undefined symbol'), r.stdout .. r.stderr)
      if SANITIZE_FLAGS == '' then
        local link = h.read(h.build_dir .. '/CMakeFiles/tplua_shared.dir/link.txt') or ''
        assert.is_true(has(link, '-Wl,--no-undefined'), link)
      end
      r = sh('readelf -d ' .. h.shquote(t.cmod .. '/tp.so'))
      assert.is_false(has(r.stdout, 'liblua'), r.stdout)
    end)

  it('has a header that compiles as C99 and as C++', function()
    local t = install()
    local dir = h.tmpdir()
    h.write(dir .. '/a.c', '#include <tplua.h>\nint main(void) { return TPLUA_OK; }\n')
    h.write(dir .. '/a.cpp', '#include <tplua.h>\nint main() { return TPLUA_OK; }\n')
    local inc = '-I' .. h.shquote(t.includedir)
    local r = sh(string.format('%s -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only %s %s',
      CC, inc, h.shquote(dir .. '/a.c')))
    assert.are.equal(0, r.code, r.stderr)
    r = sh(string.format('%s -std=c++98 -pedantic -Wall -Wextra -Werror -fsyntax-only %s %s',
      CXX, inc, h.shquote(dir .. '/a.cpp')))
    assert.are.equal(0, r.code, r.stderr)
  end)

  it('builds C and C++ hosts with only pkg-config; they write tplua extract\'s record', function()
    local t = install()
    local want = cli_record(LOG)
    for _, lang in ipairs({ 'c', 'c++' }) do
      local exe = build(lang == 'c' and HOST_C or HOST_CXX, lang)
      local r = h.run({ LOG }, { bin = exe, env = { LD_LIBRARY_PATH = t.libdir,
        TPLUA_PATH = false } })
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(want, r.stdout)
      -- The library found the stdlib beside itself, in the moved tree.
      assert.are.equal('stdlib ' .. t.stdlib .. '\n', r.stderr)
    end
  end)

  it('links statically too; such a host finds the stdlib beside its own binary', function()
    local t = install()
    local exe = build(HOST_C, 'c', '$(pkg-config --cflags tplua) -L' .. h.shquote(t.libdir)
      .. " -Wl,-Bstatic -ltplua -Wl,-Bdynamic $(pkg-config --static --libs tplua | sed "
      .. "'s/-ltplua//')")
    local r = sh('readelf -d ' .. h.shquote(exe))
    assert.is_false(has(r.stdout, 'libtplua'), r.stdout)
    local placed = t.prefix .. '/bin/host-static'
    assert(os.execute(string.format('cp %s %s', h.shquote(exe), h.shquote(placed))))
    r = h.run({ LOG }, { bin = placed, env = { TPLUA_PATH = false } })
    os.remove(placed)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(cli_record(LOG), r.stdout)
    assert.are.equal('stdlib ' .. t.stdlib .. '\n', r.stderr)
  end)

  it('runs a recipe from examples/embed/host.c, whose callback shows the progress', function()
    local t = install()
    local exe = build(assert(h.read(h.source_dir .. '/examples/embed/host.c')), 'c')
    local res = h.tmpdir() .. '/res'
    local r = h.run({ 'examples/campaign/fake.lua', '--results', res }, { bin = exe,
      cwd = h.source_dir, env = { LD_LIBRARY_PATH = t.libdir, TPLUA_PATH = false,
        TPLUA_FAKE_TRAINER = h.tools_dir .. '/fake_trainer', TPLUA_FAKE_PACE = '1000' } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    for _, id in ipairs({ 'gbs64-r1', 'gbs64-r2', 'gbs128-r1', 'gbs128-r2' }) do
      local pid = id:gsub('%-', '%%-')
      assert.is_truthy(r.stdout:find('\nprogress: [^\n]*' .. pid .. ': started'), r.stdout)
      assert.is_truthy(r.stdout:find('\nprogress: [^\n]*' .. pid .. ': finished'), r.stdout)
    end
    assert.is_true(has(r.stdout, 'host: exit status 0, '), r.stdout)
    -- The runs' records: the fake trainer printed 30 steps of 200 ms at gbs x 2048 tokens.
    local json = require('tp.json')
    for _, gbs in ipairs({ 64, 128 }) do
      local rec = assert(json.load_file(string.format('%s/gbs%d-r1.json', res, gbs)))
      assert.are.equal(30, #rec.iterations)
      local want = gbs * 2048 / 0.2
      local got = rec.performance_metrics.tokens_per_second
      assert.is_true(math.abs(got / want - 1) < 0.01, got .. ' vs ' .. want)
    end
  end)
end)

describe("Debian's lua5.4 with the installed module", function()
  -- A Lua script run by lua5.4 with the module's directory on its C path (and Debian's own).
  local function lua54(script, args, env)
    local t = install()
    local file = h.tmpdir() .. '/script.lua'
    h.write(file, script)
    env = interp_env(env)
    env.LUA_CPATH = t.cmod .. '/?.so;;'
    if env.TPLUA_PATH == nil then
      env.TPLUA_PATH = false
    end
    local argv = { file }
    for _, a in ipairs(args or {}) do
      argv[#argv + 1] = a
    end
    return h.run(argv, { bin = '/usr/bin/lua5.4', env = env, cwd = h.source_dir })
  end

  it("require 'tp' extracts a log and runs a small recipe", function()
    local t = install()
    local dir = h.tmpdir()
    local r = lua54([[
local log_path, out, res = ...
local tp = require('tp')
print(tp.version, require('tp._host').stdlib_dir())
local log = assert(require('tp.parse.log').parse(log_path))
local rec = require('tp.parse.record').from_log(log, { path = log_path })
print(table.concat(rec.iterations, ','), table.concat(rec.loss_values, ','))
local cmd = require('tp.cmd')
assert(cmd.main('extract', { log_path, '--quiet', '--json', out }) == 0)
print('run', cmd.main('run', { 'examples/campaign/fake.lua', '--results', res }))
]], { LOG, dir .. '/lua.json', dir .. '/res' }, {
      TPLUA_FAKE_TRAINER = fake_trainer(), TPLUA_FAKE_PACE = '1000' })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local lines = {}
    for line in r.stdout:gmatch('[^\n]+') do
      lines[#lines + 1] = line
    end
    assert.are.equal(header_version() .. '\t' .. t.stdlib, lines[1])
    -- tests/fixtures/logs/megatron/EXPECTED.md: iterations 2 and 3, loss 2.02153 -> 2.003316.
    assert.are.equal('2,3\t2.02153,2.003316', lines[2])
    assert.are.equal(cli_record(LOG), h.read(dir .. '/lua.json'))
    assert.are.equal('run\t0', lines[#lines])
    assert.is_true(has(r.stdout, 'campaign: 4 finished, 0 failed'), r.stdout)
    local rec = assert(require('tp.json').load_file(dir .. '/res/gbs128-r2.json'))
    assert.are.equal(30, #rec.iterations)
  end)

  it('loads a binding on its own from tp.so, and says where the stdlib is missing', function()
    local r = lua54([[
local json = require('tp._json')
print(json.encode({ 1, 2 }))
]])
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal('[1,2]\n', r.stdout)
    r = lua54("require('tp')", nil, { TPLUA_PATH = h.tmpdir() })
    assert.are_not.equal(0, r.code)
    assert.is_true(has(r.stderr, 'tplua: cannot load its standard library (set TPLUA_PATH'),
      r.stderr)
  end)

  it('runs specs under busted from the distribution', function()
    local t = install()
    local dir = h.tmpdir()
    h.write(dir .. '/tp_spec.lua', string.format([[
describe('tp under busted', function()
  it('extracts a log', function()
    local tp = require('tp')
    assert.are.equal(%q, tp.version)
    local log = assert(tp.parse.log.parse(%q))
    local rec = tp.parse.record.from_log(log, {})
    assert.are.same({ 2, 3 }, rec.iterations)
  end)
  it('reads YAML and computes statistics', function()
    local tp = require('tp')
    assert.are.same({ a = { 1, 2 } }, tp.yaml.load('a: [1, 2]'))
    assert.are.equal(2, tp.stats.summary({ 1, 2, 3 }).median)
  end)
end)
]], header_version(), LOG))
    local env = interp_env({ LUA_CPATH = t.cmod .. '/?.so;;', TPLUA_PATH = false })
    local r = h.run({ '/usr/bin/busted', '--output=plainTerminal', dir .. '/tp_spec.lua' },
      { bin = '/usr/bin/lua5.4', env = env, cwd = dir })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.is_true(has(r.stdout, '2 successes / 0 failures / 0 errors'), r.stdout)
  end)
end)

describe('Python through ctypes (examples/embed/extract.py)', function()
  it("writes tplua extract's record", function()
    local t = install()
    local r = h.run({ h.source_dir .. '/examples/embed/extract.py', '--lib',
      t.libdir .. '/libtplua.so.' .. select(2, header_version()), LOG },
      { bin = '/usr/bin/python3', env = interp_env({ TPLUA_PATH = false }) })
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(cli_record(LOG), r.stdout)
    r = h.run({ h.source_dir .. '/examples/embed/extract.py', '--lib',
      t.libdir .. '/libtplua.so.0', '/nonexistent/run.log' },
      { bin = '/usr/bin/python3', env = interp_env({ TPLUA_PATH = false }) })
    assert.are.equal(1, r.code)
    assert.is_true(has(r.stderr, '/nonexistent/run.log: No such file or directory (no result)'),
      r.stderr)
  end)
end)
