// Helpers shared by the Lua bindings: engine errors to Lua values, option checks.
#pragma once

#include <lauxlib.h>
#include <lua.h>

#include "common.h"

/// Pushes the "expected failure" triple nil, err->msg, code name; returns 3.
int tpl_pusherror(lua_State *L, const TpError *err);

/// Pushes nil, "<subject>: <strerror>", errno name for the current errno; returns 3.
int tpl_pusherrno(lua_State *L, const char *subject);

/// Pushes nil, msg, code (a literal code string such as "EPARSE"); returns 3.
int tpl_pushfail(lua_State *L, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/// Reads an optional field of the options table at `idx` (absent or nil -> `def`).
lua_Integer tpl_optfield_integer(lua_State *L, int idx, const char *field, lua_Integer def);
lua_Number tpl_optfield_number(lua_State *L, int idx, const char *field, lua_Number def);
int tpl_optfield_boolean(lua_State *L, int idx, const char *field, int def);
/// Returns the string field or `def`; the string stays valid while the options table lives.
const char *tpl_optfield_string(lua_State *L, int idx, const char *field, const char *def);

/// Creates (once per state) the metatable `tname` with the methods `methods` in __index and the
/// metamethods `meta`; leaves the stack as it found it.
void tpl_newclass(lua_State *L, const char *tname, const luaL_Reg *methods, const luaL_Reg *meta);
