// Helpers shared by the Lua bindings: engine errors to Lua values, option checks.
#include "lutil.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

int tpl_pusherror(lua_State *L, const TpError *err) {
  luaL_pushfail(L);
  lua_pushstring(L, err->msg);
  lua_pushstring(L, tp_error_name(err->code));
  return 3;
}

int tpl_pusherrno(lua_State *L, const char *subject) {
  int saved = errno;
  luaL_pushfail(L);
  lua_pushfstring(L, "%s: %s", subject, strerror(saved));
  lua_pushstring(L, tp_error_name(-saved));
  return 3;
}

int tpl_pushfail(lua_State *L, const char *code, const char *fmt, ...) {
  luaL_pushfail(L);
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_pushstring(L, code);
  return 3;
}

static int getfield(lua_State *L, int idx, const char *field) {
  if (lua_isnoneornil(L, idx)) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  luaL_checktype(L, idx, LUA_TTABLE);
  return lua_getfield(L, idx, field);
}

lua_Integer tpl_optfield_integer(lua_State *L, int idx, const char *field, lua_Integer def) {
  idx = lua_absindex(L, idx);
  int t = getfield(L, idx, field);
  lua_Integer v = def;
  if (t != LUA_TNIL) {
    int isnum = 0;
    v = lua_tointegerx(L, -1, &isnum);
    if (!isnum) {
      luaL_error(L, "option '%s': integer expected, got %s", field, luaL_typename(L, -1));
    }
  }
  lua_pop(L, 1);
  return v;
}

lua_Number tpl_optfield_number(lua_State *L, int idx, const char *field, lua_Number def) {
  idx = lua_absindex(L, idx);
  int t = getfield(L, idx, field);
  lua_Number v = def;
  if (t != LUA_TNIL) {
    int isnum = 0;
    v = lua_tonumberx(L, -1, &isnum);
    if (!isnum) {
      luaL_error(L, "option '%s': number expected, got %s", field, luaL_typename(L, -1));
    }
  }
  lua_pop(L, 1);
  return v;
}

int tpl_optfield_boolean(lua_State *L, int idx, const char *field, int def) {
  idx = lua_absindex(L, idx);
  int t = getfield(L, idx, field);
  int v = def;
  if (t != LUA_TNIL) {
    if (t != LUA_TBOOLEAN) {
      luaL_error(L, "option '%s': boolean expected, got %s", field, luaL_typename(L, -1));
    }
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

const char *tpl_optfield_string(lua_State *L, int idx, const char *field, const char *def) {
  idx = lua_absindex(L, idx);
  int t = getfield(L, idx, field);
  const char *v = def;
  if (t != LUA_TNIL) {
    if (t != LUA_TSTRING) {
      luaL_error(L, "option '%s': string expected, got %s", field, luaL_typename(L, -1));
    }
    v = lua_tostring(L, -1);  // anchored by the options table
  }
  lua_pop(L, 1);
  return v;
}

void tpl_newclass(lua_State *L, const char *tname, const luaL_Reg *methods, const luaL_Reg *meta) {
  if (!luaL_newmetatable(L, tname)) {
    lua_pop(L, 1);
    return;
  }
  // [mt]
  if (meta) {
    luaL_setfuncs(L, meta, 0);
  }
  if (methods) {
    lua_newtable(L);  // [mt, methods]
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}
