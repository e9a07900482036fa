// luaopen_tp: tplua as a Lua C module, so that a stock Lua 5.4 can `local tp = require 'tp'`.
// The module (tp.so) holds the engine and every tp._* binding; the standard library is found as
// the binary finds it (or through TPLUA_PATH) and put on package.path, then tp/init.lua runs.
// The bindings load on their own too (`require 'tp._json'` finds luaopen_tp__json in tp.so).
#include <lauxlib.h>
#include <lua.h>

#include "tplua.h"
#include "tplua_setup.h"

// require 'tp' -> the table of stdlib/tp/init.lua, with tplua's C modules and stdlib reachable.
TPLUA_API int luaopen_tp(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");  // lua5.4 -E
  int noenv = lua_toboolean(L, -1);
  lua_pop(L, 1);
  tpl_setup(L, NULL, noenv);
  const char *dir = tpl_setup_stdlib_dir(L);
  const char *file = lua_pushfstring(L, "%s/tp/init.lua", dir ? dir : ".");  // [file]
  if (luaL_loadfilex(L, file, "t") != LUA_OK) {
    return luaL_error(L,
                      "tplua: cannot load its standard library (set TPLUA_PATH to the "
                      "directory that holds tp/init.lua): %s",
                      lua_tostring(L, -1));
  }
  lua_pushliteral(L, "tp");
  lua_pushvalue(L, -3);  // [file, chunk, 'tp', file]: as require calls a Lua loader
  lua_call(L, 2, 1);
  return 1;
}
