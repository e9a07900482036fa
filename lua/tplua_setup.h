// What a Lua state needs to run tplua's standard library, whoever created it: the tp._* C
// modules in package.preload, the stdlib directory found and prepended to package.path, the
// searcher of moved module names, and tp._host. Shared by libtplua's engines (tplua_api.c) and
// the Lua module that stock Lua 5.4 loads (tplua_module.c).
#pragma once

#include <lua.h>

/// Sets up L once (a second call does nothing). `stdlib_dir` NULL: found as STYLE.md §1 says
/// ($TPLUA_PATH unless `ignore_env`, beside the installed library or executable, the source
/// tree, a tp/init.lua already on package.path, the compiled-in install directory). Raises on
/// memory errors: call it in protected mode.
void tpl_setup(lua_State *L, const char *stdlib_dir, int ignore_env);

/// The stdlib directory chosen by tpl_setup (a string in the registry), or NULL before it.
const char *tpl_setup_stdlib_dir(lua_State *L);

/// Tells tp._host where the engine keeps its interrupted flag (non-zero once its call was
/// interrupted; read on the engine's own thread only), or
/// NULL: tp._host.interrupted() then reports only the signals tp.proc's loops caught.
void tpl_setup_interrupt_flag(lua_State *L, const int *flag);

/// tp._host: what Lua code may ask of its host (version, stdlib_dir, exe_path, interrupted,
/// repl). Sets the state up first when nothing did (a Lua interpreter loading the module).
int luaopen_tp__host(lua_State *L);
