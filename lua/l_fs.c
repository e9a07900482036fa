// tp._fs: file-system primitives (engine/fs, engine/store) for Lua.
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>

#include "fs.h"
#include "lutil.h"
#include "store.h"

static const char *const type_names[] = {"file", "directory", "link", "other"};

// fs.stat(path, nofollow) -> {type=, size=, mode=, mtime=} | nil, err, code
static int fs_stat(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int nofollow = lua_toboolean(L, 2);
  TpFsStat st;
  TpError err;
  if (tp_fs_stat(path, nofollow, &st, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, 0, 4);
  lua_pushstring(L, type_names[st.type]);
  lua_setfield(L, -2, "type");
  lua_pushinteger(L, (lua_Integer)st.size);
  lua_setfield(L, -2, "size");
  lua_pushinteger(L, st.mode);
  lua_setfield(L, -2, "mode");
  lua_pushnumber(L, st.mtime);
  lua_setfield(L, -2, "mtime");
  return 1;
}

// fs.space(path) -> {available =, total =} (bytes) | nil, err, code
static int fs_space(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  uint64_t avail = 0, total = 0;
  TpError err;
  if (tp_fs_space(path, &avail, &total, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)avail);
  lua_setfield(L, -2, "available");
  lua_pushinteger(L, (lua_Integer)total);
  lua_setfield(L, -2, "total");
  return 1;
}

// fs.mkdir_p(path, mode) -> true | nil, err, code
static int fs_mkdir_p(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer mode = luaL_optinteger(L, 2, 0755);
  luaL_argcheck(L, mode >= 0 && mode <= 07777, 2, "mode out of range");
  TpError err;
  if (tp_fs_mkdir_p(path, (int)mode, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

typedef struct ListCtx {
  lua_State *L;
  lua_Integer n;
} ListCtx;

static void list_one(const char *name, TpFsType type, void *ud) {
  ListCtx *c = ud;
  // [result]
  lua_createtable(c->L, 0, 2);
  lua_pushstring(c->L, name);
  lua_setfield(c->L, -2, "name");
  lua_pushstring(c->L, type_names[type]);
  lua_setfield(c->L, -2, "type");
  lua_rawseti(c->L, -2, ++c->n);
}

// fs.list(path) -> {{name=, type=}, ...} (sorted) | nil, err, code
static int fs_list(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_newtable(L);
  ListCtx c = {L, 0};
  TpError err;
  if (tp_fs_list(path, list_one, &c, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  return 1;
}

static void glob_one(const char *path, void *ud) {
  ListCtx *c = ud;
  lua_pushstring(c->L, path);
  lua_rawseti(c->L, -2, ++c->n);
}

// fs.glob(pattern) -> {path, ...} (sorted; empty when nothing matches) | nil, err, code
static int fs_glob(lua_State *L) {
  const char *pattern = luaL_checkstring(L, 1);
  lua_newtable(L);
  ListCtx c = {L, 0};
  TpError err;
  if (tp_fs_glob(pattern, glob_one, &c, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  return 1;
}

// fs.realpath(path) -> string | nil, err, code
static int fs_realpath(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  TpError err;
  char *r = tp_fs_realpath(path, &err);
  if (!r) {
    return tpl_pusherror(L, &err);
  }
  lua_pushstring(L, r);  // may raise on memory error: r is freed first below
  free(r);
  return 1;
}

// fs.write_atomic(path, data, mode) -> true | nil, err, code
static int fs_write_atomic(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  lua_Integer mode = luaL_optinteger(L, 3, 0644);
  luaL_argcheck(L, mode >= 0 && mode <= 07777, 3, "mode out of range");
  TpError err;
  if (tp_store_write_atomic(path, data, len, (int)mode, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// fs.append_line(path, line) -> true | nil, err, code  (fsync'd journal line)
static int fs_append_line(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  size_t len;
  const char *line = luaL_checklstring(L, 2, &len);
  TpError err;
  if (tp_store_append_line(path, line, len, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

int luaopen_tp__fs(lua_State *L);
int luaopen_tp__fs(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"append_line", fs_append_line},
      {"glob", fs_glob},
      {"list", fs_list},
      {"mkdir_p", fs_mkdir_p},
      {"realpath", fs_realpath},
      {"stat", fs_stat},
      {"space", fs_space},
      {"write_atomic", fs_write_atomic},
      {NULL, NULL},
  };
  luaL_newlib(L, funcs);
  return 1;
}
