// Sets a Lua state up for tplua's standard library: C modules in package.preload, the stdlib
// directory on package.path, the searcher of moved names, tp._host. Used by libtplua's engines
// and by the Lua module; no global state (everything lives in the state's registry).
#include "tplua_setup.h"

#include <dlfcn.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#include "proc.h"
#include "tplua.h"

// Registered C modules (generated from lua/l_*.c).
#define TPLUA_MODULE(name) int luaopen_tp__##name(lua_State *L);
#include "tplua_modules.h"
#undef TPLUA_MODULE

static const struct {
  const char *name;
  lua_CFunction open;
} k_modules[] = {
#define TPLUA_MODULE(name) {"tp._" #name, luaopen_tp__##name},
#include "tplua_modules.h"
#undef TPLUA_MODULE
    {"tp._host", luaopen_tp__host},
    {NULL, NULL},
};

// Registry keys: the stdlib directory in use (a string; present once set up) and the engine's
// interrupt flag (a light userdata).
static const char k_stdlib_key = 0;
static const char k_interrupt_key = 0;

// ---------------------------------------------------------------------------------------------
// Finding the stdlib

static int has_stdlib(const char *dir) {
  char probe[PATH_MAX];
  int n = snprintf(probe, sizeof probe, "%s/tp/init.lua", dir);
  struct stat st;
  return n > 0 && (size_t)n < sizeof probe && stat(probe, &st) == 0 && S_ISREG(st.st_mode);
}

// Directory part of `path` into out; 0 when it has none or does not fit.
static int dirname_of(const char *path, char *out, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash || path[0] != '/') {
    return 0;
  }
  size_t n = (size_t)(slash - path);
  if (n + 1 > cap) {
    return 0;
  }
  memcpy(out, path, n);
  out[n] = '\0';
  return 1;
}

static int exe_path(char *out, size_t cap) {
  ssize_t n = readlink("/proc/self/exe", out, cap - 1);
  if (n <= 0) {
    return 0;
  }
  out[n] = '\0';
  return 1;
}

// The directory of the shared object this code was loaded from (libtplua.so, the Lua module),
// or of the executable it is linked into.
static int object_dir(char *out, size_t cap) {
  Dl_info info;
  if (dladdr((void *)tpl_setup, &info) == 0 || info.dli_fname == NULL) {
    return 0;
  }
  char *real = realpath(info.dli_fname, NULL);
  if (!real) {
    return 0;
  }
  int ok = dirname_of(real, out, cap);
  free(real);
  return ok;
}

// `base`/`rel` resolved (realpath) into out when it holds the stdlib.
static int try_stdlib(const char *base, const char *rel, char *out, size_t cap) {
  char candidate[PATH_MAX];
  int n = snprintf(candidate, sizeof candidate, "%s/%s", base, rel);
  if (n <= 0 || (size_t)n >= sizeof candidate || !has_stdlib(candidate)) {
    return 0;
  }
  char *real = realpath(candidate, NULL);
  n = snprintf(out, cap, "%s", real ? real : candidate);
  free(real);
  return n > 0 && (size_t)n < cap;
}

// A tp/init.lua that package.path already reaches (a LuaRocks tree): its directory.
static int stdlib_on_path(lua_State *L, char *out, size_t cap) {
  int top = lua_gettop(L);
  int ok = 0;
  lua_getglobal(L, "package");  // [package]
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "searchpath");  // [package, searchpath]
    lua_pushliteral(L, "tp");
    lua_getfield(L, -3, "path");  // [package, searchpath, 'tp', path]
    if (lua_isfunction(L, -3) && lua_isstring(L, -1) && lua_pcall(L, 2, 1, 0) == LUA_OK &&
        lua_isstring(L, -1)) {
      const char *file = lua_tostring(L, -1);
      static const char tail[] = "/tp/init.lua";
      size_t n = strlen(file);
      if (n > sizeof tail - 1 && strcmp(file + n - (sizeof tail - 1), tail) == 0 &&
          n - (sizeof tail - 1) < cap) {
        memcpy(out, file, n - (sizeof tail - 1));
        out[n - (sizeof tail - 1)] = '\0';
        ok = 1;
      }
    }
  }
  lua_settop(L, top);
  return ok;
}

// Chooses the stdlib directory; *on_path is set when package.path already reaches it.
static void find_stdlib(lua_State *L, const char *given, int ignore_env, char *out, size_t cap,
                        int *on_path) {
  *on_path = 0;
  const char *env = ignore_env ? NULL : getenv("TPLUA_PATH");
  if (given && *given) {
    snprintf(out, cap, "%s", given);
    return;
  }
  if (env && *env) {
    snprintf(out, cap, "%s", env);  // trusted as given, even without tp/ (tests use fixtures)
    return;
  }
  char dir[PATH_MAX];
  // Installed: <libdir>/libtplua.so or <libdir>/lua/5.4/tp.so, <datadir>/tplua/lua.
  if (object_dir(dir, sizeof dir) && (try_stdlib(dir, TPLUA_REL_LIB_STDLIB, out, cap) ||
                                      try_stdlib(dir, TPLUA_REL_MOD_STDLIB, out, cap))) {
    return;
  }
  // A host linked with the static library: <bindir>/host, <datadir>/tplua/lua.
  char exe[PATH_MAX];
  if (exe_path(exe, sizeof exe) && dirname_of(exe, dir, sizeof dir) &&
      try_stdlib(dir, TPLUA_REL_BIN_STDLIB, out, cap)) {
    return;
  }
#ifdef TPLUA_SOURCE_STDLIB
  if (has_stdlib(TPLUA_SOURCE_STDLIB)) {
    snprintf(out, cap, "%s", TPLUA_SOURCE_STDLIB);
    return;
  }
#endif
  if (stdlib_on_path(L, out, cap)) {
    *on_path = 1;
    return;
  }
  snprintf(out, cap, "%s", TPLUA_INSTALL_STDLIB);
}

// ---------------------------------------------------------------------------------------------
// Moved module names (stdlib/tp/_moved.lua maps old name -> new name): `require 'tp.config'`
// loads 'tp.plan.config', the same table. The searcher comes right after the preload one, so an
// old name never finds a stale file of that name further down the user's path.

static int moved_loader(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_call(L, 1, 1);
  return 1;
}

static int moved_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (strncmp(name, "tp.", 3) != 0 || strcmp(name, "tp._moved") == 0) {
    return 0;
  }
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tp._moved");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
    return 0;  // a stdlib without the map (TPLUA_PATH at a test tree): nothing moved
  }
  if (lua_getfield(L, -1, name) != LUA_TSTRING) {
    lua_pushfstring(L, "no module '%s' in tp._moved", name);
    return 1;
  }
  lua_pushcclosure(L, moved_loader, 1);  // the loader closes over the new name
  lua_getfield(L, -2, name);             // its second value: the new name
  return 2;
}

static void add_moved_searcher(lua_State *L) {
  lua_getglobal(L, "package");       // [package]
  lua_getfield(L, -1, "searchers");  // [package, searchers]
  if (!lua_istable(L, -1)) {
    lua_pop(L, 2);
    return;
  }
  for (lua_Integer i = (lua_Integer)lua_rawlen(L, -1); i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushcfunction(L, moved_searcher);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
}

// ---------------------------------------------------------------------------------------------
// Setup

void tpl_setup(lua_State *L, const char *stdlib_dir, int ignore_env) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &k_stdlib_key) == LUA_TSTRING) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  luaL_checkstack(L, 8, "tplua setup");
  char dir[PATH_MAX];
  int on_path = 0;
  find_stdlib(L, stdlib_dir, ignore_env, dir, sizeof dir, &on_path);
  lua_pushstring(L, dir);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &k_stdlib_key);

  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);  // [preload]
  for (int i = 0; k_modules[i].name; i++) {
    if (lua_getfield(L, -1, k_modules[i].name) == LUA_TNIL) {
      lua_pushcfunction(L, k_modules[i].open);
      lua_setfield(L, -3, k_modules[i].name);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);

  if (!on_path) {
    lua_getglobal(L, "package");  // [package]
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "path");  // [package, path]
      const char *path = lua_tostring(L, -1);
      lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, path ? path : "");
      lua_setfield(L, -3, "path");
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  add_moved_searcher(L);
}

const char *tpl_setup_stdlib_dir(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &k_stdlib_key);
  const char *dir = lua_tostring(L, -1);  // anchored by the registry
  lua_pop(L, 1);
  return dir;
}

void tpl_setup_interrupt_flag(lua_State *L, const int *flag) {
  if (flag) {
    lua_pushlightuserdata(L, (void *)flag);
  } else {
    lua_pushnil(L);
  }
  lua_rawsetp(L, LUA_REGISTRYINDEX, &k_interrupt_key);
}

// ---------------------------------------------------------------------------------------------
// tp._host

// host.stdlib_dir() -> string
static int host_stdlib_dir(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &k_stdlib_key);
  return 1;
}

// host.exe_path() -> string | nil: the tplua binary, for commands that start tplua again (the
// ranks launcher, Slurm scripts): this process when it is tplua, else the binary installed (or
// built) beside the library, else nil.
static int host_exe_path(lua_State *L) {
  char exe[PATH_MAX];
  if (exe_path(exe, sizeof exe)) {
    const char *base = strrchr(exe, '/');
    if (base && strcmp(base + 1, "tplua") == 0) {
      lua_pushstring(L, exe);
      return 1;
    }
  }
  char dir[PATH_MAX];
  if (object_dir(dir, sizeof dir)) {
    static const char *const rels[] = {"tplua", TPLUA_REL_LIB_BINDIR "/tplua",
                                       TPLUA_REL_MOD_BINDIR "/tplua"};
    for (size_t i = 0; i < sizeof rels / sizeof rels[0]; i++) {
      char candidate[PATH_MAX];
      int n = snprintf(candidate, sizeof candidate, "%s/%s", dir, rels[i]);
      if (n > 0 && (size_t)n < sizeof candidate && access(candidate, X_OK) == 0) {
        char *real = realpath(candidate, NULL);
        lua_pushstring(L, real ? real : candidate);
        free(real);
        return 1;
      }
    }
  }
  luaL_pushfail(L);
  return 1;
}

// host.interrupted() -> 'SIGINT' | 'SIGTERM' | false: whether the last call was interrupted, by
// tplua_interrupt (the binary's SIGINT) or by a signal a tp.proc loop caught and forwarded.
static int host_interrupted(lua_State *L) {
  int sig = 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &k_interrupt_key) == LUA_TLIGHTUSERDATA) {
    const int *flag = lua_touserdata(L, -1);
    sig = *flag ? SIGINT : 0;
  }
  lua_pop(L, 1);
  if (!sig) {
    sig = tp_proc_interrupted();
  }
  if (sig) {
    lua_pushstring(L, tp_proc_signal_name(sig));
  } else {
    lua_pushboolean(L, 0);
  }
  return 1;
}

// host.repl() -> never returns normally here: hosts with an interactive prompt (the tplua
// binary) replace this field.
static int host_repl(lua_State *L) {
  return luaL_error(L, "this host has no interactive prompt (run the tplua binary)");
}

TPLUA_API int luaopen_tp__host(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"exe_path", host_exe_path},
      {"interrupted", host_interrupted},
      {"repl", host_repl},
      {"stdlib_dir", host_stdlib_dir},
      {NULL, NULL},
  };
  // A Lua interpreter that found tp/init.lua on its path requires us first: set it up, with
  // its -E (LUA_NOENV) honoured.
  lua_getfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  int noenv = lua_toboolean(L, -1);
  lua_pop(L, 1);
  tpl_setup(L, NULL, noenv);
  luaL_newlib(L, funcs);
  lua_pushliteral(L, TPLUA_VERSION_STRING);
  lua_setfield(L, -2, "version");
  lua_pushliteral(L, LUA_RELEASE);
  lua_setfield(L, -2, "lua_version");
  return 1;
}
