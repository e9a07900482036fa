-- LuaRocks: tplua as a Lua module for the system's Lua 5.4 (`local tp = require 'tp'`): the C
-- engine and bindings built by CMake into tp.so, the standard library (tp/*.lua) beside it.
--   luarocks --lua-version=5.4 make                      (from a checkout; needs the -dev
--   luarocks --lua-version=5.4 --tree=DIR make            packages of scripts/install-deps)
rockspec_format = '3.0'
package = 'tplua'
version = '0.1.0-1'
source = {
  url = 'git+file://.',
}
description = {
  summary = 'LLM training benchmarks across GPU platforms: the tplua engine as a Lua module',
  detailed = [[
tplua's engine (log scanning, statistics, process supervision, GPU probing, YAML/JSON, traces)
and its standard library (plan, run, parse, analyse, present) for any Lua 5.4: require 'tp'.
See docs/embedding.md.]],
  license = 'MIT',
}
dependencies = {
  'lua >= 5.4, < 5.5',
}
build = {
  type = 'cmake',
  variables = {
    CMAKE_BUILD_TYPE = 'Release',
    CMAKE_INSTALL_PREFIX = '$(PREFIX)',
    BUILD_TESTING = 'OFF',
    TPLUA_MODULE_ONLY = 'ON',
    TPLUA_SOURCE_STDLIB_FALLBACK = 'OFF',
    TPLUA_LUA_CMOD_DIR = '$(LIBDIR)',
    TPLUA_STDLIB_DIR = '$(LUADIR)',
  },
}
