// tp._digest: SHA-256 of strings and of files (engine/digest) for Lua.
#include <lauxlib.h>
#include <lua.h>

#include "digest.h"
#include "lutil.h"

// digest.sha256(s) -> hex string (64 lowercase hex digits) | nil, err, code
static int l_sha256(lua_State *L) {
  size_t len = 0;
  const char *s = luaL_checklstring(L, 1, &len);
  char hex[TP_DIGEST_SHA256_HEX + 1];
  TpError err;
  if (tp_digest_sha256(s, len, hex, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushlstring(L, hex, TP_DIGEST_SHA256_HEX);
  return 1;
}

// digest.sha256_file(path) -> hex, size_bytes | nil, err, code
static int l_sha256_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char hex[TP_DIGEST_SHA256_HEX + 1];
  uint64_t size = 0;
  TpError err;
  if (tp_digest_sha256_file(path, hex, &size, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushlstring(L, hex, TP_DIGEST_SHA256_HEX);
  lua_pushinteger(L, (lua_Integer)size);
  return 2;
}

int luaopen_tp__digest(lua_State *L);
int luaopen_tp__digest(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"sha256", l_sha256},
      {"sha256_file", l_sha256_file},
      {NULL, NULL},
  };
  luaL_newlib(L, funcs);
  return 1;
}
