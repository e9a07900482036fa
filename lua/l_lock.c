// tp._lock: exclusive file locks (engine/lock) for Lua: a Lock object held until closed, and
// who holds a lock file. Policy (where the lock lives, how long to wait) is in tp.campaign.
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <string.h>

#include "lock.h"
#include "lutil.h"

#define LOCK_MT "tp.Lock"

// Lock userdata. User value 1: the path (a string), for messages.
typedef struct LLock {
  int fd;  // -1 once closed
} LLock;

// _lock.acquire(path, wait_s) -> Lock | nil, err, code
static int l_acquire(lua_State *L) {
  size_t len = 0;
  const char *path = luaL_checklstring(L, 1, &len);
  luaL_argcheck(L, strlen(path) == len && len > 0, 1, "a non-empty path without NUL expected");
  lua_Number wait = luaL_optnumber(L, 2, 0);
  luaL_argcheck(L, wait >= 0 && wait <= 86400, 2, "seconds in [0, 86400] expected");
  // The userdata exists before the lock, so that nothing can raise while the fd is unowned.
  LLock *lk = lua_newuserdatauv(L, sizeof *lk, 1);
  lk->fd = -1;
  luaL_setmetatable(L, LOCK_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  TpError err = {0};
  int fd = -1;
  if (tp_lock_acquire(path, (int64_t)ceil(wait * 1000.0), &fd, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lk->fd = fd;
  return 1;
}

// _lock.holder(path) -> pid | false, alive | nil, err, code
// pid is false when the file holds no pid; alive says whether that process still exists.
static int l_holder(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  pid_t pid = 0;
  TpError err = {0};
  if (tp_lock_holder(path, &pid, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  if (pid <= 0) {
    lua_pushboolean(L, 0);
    lua_pushboolean(L, 0);
  } else {
    lua_pushinteger(L, pid);
    lua_pushboolean(L, tp_lock_pid_alive(pid));
  }
  return 2;
}

// lock:close(): releases the lock; idempotent.
static int lock_close(lua_State *L) {
  LLock *lk = luaL_checkudata(L, 1, LOCK_MT);
  int fd = lk->fd;
  lk->fd = -1;  // closed before releasing (STYLE.md)
  tp_lock_release(fd);
  return 0;
}

// lock:held() -> boolean
static int lock_held(lua_State *L) {
  LLock *lk = luaL_checkudata(L, 1, LOCK_MT);
  lua_pushboolean(L, lk->fd >= 0);
  return 1;
}

// lock:path() -> string
static int lock_path(lua_State *L) {
  luaL_checkudata(L, 1, LOCK_MT);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

static int lock_tostring(lua_State *L) {
  LLock *lk = luaL_checkudata(L, 1, LOCK_MT);
  lua_getiuservalue(L, 1, 1);
  lua_pushfstring(L, "tp.Lock (%s, %s)", lua_tostring(L, -1), lk->fd >= 0 ? "held" : "released");
  return 1;
}

int luaopen_tp__lock(lua_State *L);
int luaopen_tp__lock(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"close", lock_close},
      {"held", lock_held},
      {"path", lock_path},
      {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
      {"__close", lock_close},
      {"__gc", lock_close},
      {"__tostring", lock_tostring},
      {NULL, NULL},
  };
  static const luaL_Reg funcs[] = {
      {"acquire", l_acquire},
      {"holder", l_holder},
      {NULL, NULL},
  };
  tpl_newclass(L, LOCK_MT, methods, meta);
  luaL_newlib(L, funcs);
  return 1;
}
