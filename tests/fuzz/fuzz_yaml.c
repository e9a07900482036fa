// libFuzzer target for tp._yaml: loads arbitrary bytes (every document) in protected mode.
// Whatever loads must dump (the list of documents as one sequence), and that text must load and
// dump again to the same bytes.
#include <lauxlib.h>
#include <lua.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int luaopen_tp__yaml(lua_State *L);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void oracle_failed(lua_State *L, const char *what) {
  fprintf(stderr, "fuzz_yaml: %s: %s\n", what, lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
  abort();
}

// Calls yaml[fn](value at idx, opts) with a small alias budget, so that inputs stay cheap to
// dump; leaves 2 results.
static void load(lua_State *L, int yaml, const char *fn, int idx) {
  lua_getfield(L, yaml, fn);
  lua_pushvalue(L, idx);
  lua_createtable(L, 0, 2);
  lua_getfield(L, yaml, "null");
  lua_setfield(L, -2, "null");
  lua_pushinteger(L, 10000);
  lua_setfield(L, -2, "max_alias_nodes");
  lua_call(L, 2, 2);
}

static void dump(lua_State *L, int yaml, int idx) {
  lua_getfield(L, yaml, "dump");
  lua_pushvalue(L, idx);
  lua_createtable(L, 0, 1);
  lua_pushboolean(L, 1);
  lua_setfield(L, -2, "sort_keys");
  lua_call(L, 2, 2);
}

static int run(lua_State *L) {
  // [input]
  lua_pushcfunction(L, luaopen_tp__yaml);
  lua_call(L, 0, 1);          // [input, yaml]
  load(L, 2, "load_all", 1);  // [input, yaml, docs, err]
  if (!lua_istable(L, 3) || lua_rawlen(L, 3) == 0) {
    return 0;  // rejected (fine, as long as nothing crashed), or no document
  }
  dump(L, 2, 3);  // [..., text1, err]
  if (!lua_isstring(L, 5)) {
    oracle_failed(L, "loaded documents did not dump");
  }
  load(L, 2, "load", 5);  // [..., docs2, err]: the list of documents, as one sequence
  if (!lua_istable(L, 7)) {
    oracle_failed(L, "dumped text did not load");
  }
  dump(L, 2, 7);  // [..., text2, err]
  if (!lua_isstring(L, 9) || lua_compare(L, 5, 9, LUA_OPEQ) != 1) {
    oracle_failed(L, "dumping is not stable");
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lua_State *L = luaL_newstate();
  if (!L) {
    return 0;
  }
  lua_pushcfunction(L, run);
  lua_pushlstring(L, (const char *)data, size);
  lua_pcall(L, 1, 0, 0);  // a raise (out of memory, stack) is an answer, not a crash
  lua_close(L);
  return 0;
}
