// libFuzzer target for tp._json: decodes arbitrary bytes in protected mode. Whatever decodes must
// encode, and that text must decode and encode again to the same bytes. Decoding with `skip`
// (every member of the object, or a few names when it is not one) must fail with the same
// message, or give the same members, each skipped one decoding from its text to the same value.
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int luaopen_tp__json(lua_State *L);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void oracle_failed(lua_State *L, const char *what) {
  fprintf(stderr, "fuzz_json: %s: %s\n", what, lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
  abort();
}

// Calls json[fn](value at idx, opts): decode keeps nulls (null = json.null), encode sorts keys
// and writes non-finite numbers as null (allow_nan); leaves 2 results.
static void call(lua_State *L, int json, const char *fn, int idx) {
  lua_getfield(L, json, fn);
  lua_pushvalue(L, idx);
  lua_createtable(L, 0, 2);
  if (strcmp(fn, "encode") == 0) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "allow_nan");
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "sort_keys");
  } else {
    lua_getfield(L, json, "null");
    lua_setfield(L, -2, "null");
  }
  lua_call(L, 2, 2);
}

static const char skip_oracle[] =
    "local json, input = ...\n"
    "local opts = { null = json.null }\n"
    "local full, ferr = json.decode(input, opts)\n"
    "local is_obj = type(full) == 'table' and getmetatable(full) ~= json.array_mt\n"
    "local keys = { 'a', 'b', 'records' }\n"
    "if is_obj then\n"
    "  keys = {}\n"
    "  for k in pairs(full) do keys[#keys + 1] = k end\n"
    "end\n"
    "local part, perr = json.decode(input, { null = json.null, skip = keys })\n"
    "if (full == nil) ~= (part == nil) or ferr ~= perr then\n"
    "  return 'outcome differs: ' .. tostring(ferr) .. ' / ' .. tostring(perr)\n"
    "end\n"
    "if full == nil then return nil end\n"
    "local enc = { allow_nan = true, sort_keys = true }\n"
    "if not is_obj then\n"
    "  if json.encode(full, enc) ~= json.encode(part, enc) then return 'value differs' end\n"
    "  return nil\n"
    "end\n"
    "for k, v in pairs(full) do\n"
    "  local p = part[k]\n"
    "  if getmetatable(p) == json.skipped_mt then\n"
    "    p = json.decode(input:sub(p.first, p.last), opts)\n"
    "  end\n"
    "  if json.encode(v, enc) ~= json.encode(p, enc) then return 'member differs: ' .. k end\n"
    "end\n"
    "for k in pairs(part) do\n"
    "  if full[k] == nil then return 'extra member: ' .. k end\n"
    "end\n"
    "return nil\n";

static int run(lua_State *L) {
  // [input]
  lua_pushcfunction(L, luaopen_tp__json);
  lua_call(L, 0, 1);        // [input, json]
  call(L, 2, "decode", 1);  // [input, json, value, err]
  if (!lua_isnil(L, 4)) {
    return 0;  // rejected: fine, as long as nothing crashed
  }
  call(L, 2, "encode", 3);  // [..., text1, err]
  if (!lua_isstring(L, 5)) {
    oracle_failed(L, "a decoded value did not encode");
  }
  call(L, 2, "decode", 5);  // [..., value2, err]
  if (!lua_isnil(L, 8)) {
    oracle_failed(L, "encoded text did not decode");
  }
  call(L, 2, "encode", 7);  // [..., text2, err]
  if (!lua_isstring(L, 9) || lua_compare(L, 5, 9, LUA_OPEQ) != 1) {
    oracle_failed(L, "encoding is not stable");
  }
  return 0;
}

static int run_skip(lua_State *L) {
  // [input]
  luaL_openlibs(L);
  if (luaL_loadstring(L, skip_oracle) != LUA_OK) {
    oracle_failed(L, "skip oracle does not load");
  }
  lua_pushcfunction(L, luaopen_tp__json);
  lua_call(L, 0, 1);
  lua_pushvalue(L, 1);  // [input, oracle, json, input]
  lua_call(L, 2, 1);
  if (!lua_isnil(L, -1)) {
    oracle_failed(L, "decoding with skip");
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
  lua_settop(L, 0);
  lua_pushcfunction(L, run_skip);
  lua_pushlstring(L, (const char *)data, size);
  lua_pcall(L, 1, 0, 0);
  lua_close(L);
  return 0;
}
