// Lua binding of engine/proc as tp._proc: a Loop of child processes with per-line and exit
// callbacks and timers, Proc handles, and a process-group scan. Policy lives in stdlib/tp/proc.lua.
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <signal.h>
#include <string.h>

#include "lutil.h"
#include "proc.h"

#define LOOP_MT "tp.ProcLoop"
#define PROC_MT "tp.Proc"

// Loop userdata. User values: 1 = procs table (LProc * as light userdata -> Proc userdata, held
// while the child's exit is pending), 2 = timer callbacks (id -> function), 3 = one-shot ids.
typedef struct LLoop {
  TpProcLoop *loop;  // NULL once closed
  int running;       // > 0 while one of the run functions is on the stack
} LLoop;

// Proc userdata. User values: 1 = its Loop, 2 = on_line, 3 = on_exit, 4 = result table.
typedef struct LProc {
  TpProc *proc;  // NULL once closed (or its loop closed)
  lua_Integer grace_ms;
} LProc;

// State of one run call, handed to the engine callbacks.
typedef struct Dispatch {
  lua_State *L;
  int loop_idx;  // absolute index of the Loop userdata
  bool failed;   // a Lua callback raised: its error object is on top of the stack
  // Arguments of the protected call in progress.
  TpProc *proc;
  TpProcStream stream;
  const char *line;
  size_t len;
  bool partial;
  uint64_t timer_id;
} Dispatch;

static const char *const k_stream_names[] = {"stdout", "stderr"};

static LLoop *check_loop(lua_State *L, int idx) {
  LLoop *ll = luaL_checkudata(L, idx, LOOP_MT);
  if (!ll->loop) {
    luaL_error(L, "attempt to use a closed proc loop");
  }
  return ll;
}

static LProc *check_proc(lua_State *L, int idx) {
  LProc *lp = luaL_checkudata(L, idx, PROC_MT);
  if (!lp->proc) {
    luaL_error(L, "attempt to use a closed proc");
  }
  return lp;
}

// Seconds (Lua number) to whole milliseconds, rounded up so that a tiny positive value still
// waits; `what` names the option in errors.
static lua_Integer seconds_to_ms(lua_State *L, lua_Number s, const char *what) {
  if (!(s >= 0) || s > 1e12) {
    luaL_error(L, "option '%s': expected seconds >= 0, got %f", what, (double)s);
  }
  return (lua_Integer)ceil(s * 1000.0);
}

static const char *signame_or_nil(int sig) {
  return sig ? tp_proc_signal_name(sig) : NULL;
}

static void setfield_number(lua_State *L, const char *k, lua_Number v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void setfield_integer(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

static double tv_s(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

// Pushes the result table of a finished process.
static void push_result(lua_State *L, TpProc *p, const TpProcResult *r) {
  lua_createtable(L, 0, 14);  // [result]
  setfield_integer(L, "code", r->code);
  if (r->signal) {
    const char *name = signame_or_nil(r->signal);
    if (name) {
      lua_pushstring(L, name);
    } else {
      lua_pushinteger(L, r->signal);
    }
    lua_setfield(L, -2, "signal");
  }
  if (r->core_dumped) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "core_dumped");
  }
  lua_pushboolean(L, r->timed_out);
  lua_setfield(L, -2, "timed_out");
  if (r->interrupted) {
    lua_pushstring(L, signame_or_nil(r->interrupted));
    lua_setfield(L, -2, "interrupted");
  }
  if (r->escaped) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "escaped");
  }
  setfield_integer(L, "stragglers", r->stragglers);
  setfield_number(L, "wall_s", r->wall_s);
  lua_createtable(L, 0, 9);  // [result, rusage]
  setfield_number(L, "utime", tv_s(r->rusage.ru_utime));
  setfield_number(L, "stime", tv_s(r->rusage.ru_stime));
  setfield_integer(L, "maxrss_kb", r->rusage.ru_maxrss);
  setfield_integer(L, "minflt", r->rusage.ru_minflt);
  setfield_integer(L, "majflt", r->rusage.ru_majflt);
  setfield_integer(L, "inblock", r->rusage.ru_inblock);
  setfield_integer(L, "oublock", r->rusage.ru_oublock);
  setfield_integer(L, "nvcsw", r->rusage.ru_nvcsw);
  setfield_integer(L, "nivcsw", r->rusage.ru_nivcsw);
  lua_setfield(L, -2, "rusage");  // [result]
  if (r->log_error) {
    lua_pushfstring(L, "log write: %s", strerror(-r->log_error));
    lua_setfield(L, -2, "log_error");
  }
  for (int s = 0; s < 2; s++) {
    size_t n = 0;
    const char *data = tp_proc_captured(p, (TpProcStream)s, &n);
    if (n > 0 || r->capture_truncated[s]) {
      lua_pushlstring(L, data, n);
      lua_setfield(L, -2, k_stream_names[s]);
    }
    if (r->capture_truncated[s]) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, s == 0 ? "stdout_truncated" : "stderr_truncated");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Engine callbacks. Each runs its Lua part under lua_pcall of a C function, so that no Lua error
// (a raising callback, or out of memory) can longjmp over the engine's frames. After a raise
// the engine is told to stop and the run function re-raises the error object left on top.

// Index of the Loop userdata inside the protected functions, called as f(dispatch, loop).
#define PLOOP 2

// Calls `f(d, loop)` protected; returns the engine's "stop" flag.
static int call_protected(Dispatch *d, lua_CFunction f) {
  lua_State *L = d->L;
  lua_pushcfunction(L, f);
  lua_pushlightuserdata(L, d);
  lua_pushvalue(L, d->loop_idx);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    d->failed = true;  // the error object stays on top of the stack
    return 1;
  }
  return 0;
}

// Pushes the Proc userdata of `proc`, or nil when the loop no longer holds it.
static void push_held_proc(lua_State *L, TpProc *proc) {
  LProc *lp = tp_proc_user(proc);
  lua_getiuservalue(L, PLOOP, 1);  // [procs]
  if (lp) {
    lua_rawgetp(L, -1, lp);  // [procs, proc]
  } else {
    lua_pushnil(L);
  }
  lua_remove(L, -2);
}

static int protected_line(lua_State *L) {
  Dispatch *d = lua_touserdata(L, 1);
  push_held_proc(L, d->proc);  // [d, loop, proc]
  if (lua_isnil(L, -1) || lua_getiuservalue(L, -1, 2) != LUA_TFUNCTION) {
    return 0;
  }
  lua_pushstring(L, k_stream_names[d->stream]);  // [d, loop, proc, fn, stream]
  lua_pushlstring(L, d->line, d->len);
  lua_pushboolean(L, d->partial);
  lua_call(L, 3, 0);
  return 0;
}

static int on_line(void *ctx, TpProc *proc, TpProcStream stream, const char *line, size_t len,
                   bool partial) {
  Dispatch *d = ctx;
  d->proc = proc;
  d->stream = stream;
  d->line = line;
  d->len = len;
  d->partial = partial;
  return call_protected(d, protected_line);
}

static int protected_exit(lua_State *L) {
  Dispatch *d = lua_touserdata(L, 1);
  push_held_proc(L, d->proc);  // [d, loop, proc]
  if (lua_isnil(L, -1)) {
    return 0;
  }
  push_result(L, d->proc, tp_proc_result(d->proc));  // [d, loop, proc, result]
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, -3, 4);
  // The loop no longer needs to hold the Proc: its owner decides its lifetime from now on.
  lua_getiuservalue(L, PLOOP, 1);  // [d, loop, proc, result, procs]
  lua_pushnil(L);
  lua_rawsetp(L, -2, tp_proc_user(d->proc));
  lua_pop(L, 1);
  if (lua_getiuservalue(L, -2, 3) == LUA_TFUNCTION) {  // [d, loop, proc, result, on_exit]
    lua_insert(L, -2);
    lua_call(L, 1, 0);
  }
  return 0;
}

static int on_exit_cb(void *ctx, TpProc *proc, const TpProcResult *r) {
  (void)r;
  Dispatch *d = ctx;
  d->proc = proc;
  return call_protected(d, protected_exit);
}

static int protected_timer(lua_State *L) {
  Dispatch *d = lua_touserdata(L, 1);
  lua_Integer id = (lua_Integer)d->timer_id;
  lua_getiuservalue(L, PLOOP, 2);  // [d, loop, fns]
  lua_rawgeti(L, -1, id);          // [d, loop, fns, fn]
  lua_getiuservalue(L, PLOOP, 3);  // [d, loop, fns, fn, once]
  if (lua_rawgeti(L, -1, id) != LUA_TNIL) {
    // A one-shot timer is done: drop its callback before calling it.
    lua_pushnil(L);  // [d, loop, fns, fn, once, true, nil]
    lua_rawseti(L, -5, id);
    lua_pushnil(L);  // [d, loop, fns, fn, once, true, nil]
    lua_rawseti(L, -3, id);
  }
  lua_pop(L, 2);  // [d, loop, fns, fn]
  if (lua_isfunction(L, -1)) {
    lua_pushinteger(L, id);
    lua_call(L, 1, 0);
  }
  return 0;
}

static int on_timer(void *ctx, uint64_t id) {
  Dispatch *d = ctx;
  d->timer_id = id;
  return call_protected(d, protected_timer);
}

static TpProcEvents make_events(Dispatch *d) {
  return (TpProcEvents){.ctx = d, .on_line = on_line, .on_exit = on_exit_cb, .on_timer = on_timer};
}

// After a run call: re-raises a callback's error, or turns an engine failure into a raise
// (misuse: running a loop from its own callback) or nil, msg, code. Returns the count to push,
// or 0 when the run went well.
static int after_run(lua_State *L, Dispatch *d, int rc, const TpError *err) {
  if (d->failed) {
    lua_error(L);  // error object on top
  }
  if (rc == TP_EINVAL) {
    luaL_error(L, "%s", err->msg);
  }
  if (rc < 0) {
    return tpl_pusherror(L, err);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Loop

// _proc.loop([coalesce]) -> Loop; coalesce: output coalescing window in seconds (0: off)
static int proc_loop(lua_State *L) {
  lua_Number coalesce = luaL_optnumber(L, 1, -1);
  lua_Integer coalesce_ms = coalesce < 0 ? -1 : seconds_to_ms(L, coalesce, "coalesce");
  LLoop *ll = lua_newuserdatauv(L, sizeof *ll, 3);
  ll->loop = NULL;
  ll->running = 0;
  luaL_setmetatable(L, LOOP_MT);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 1);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 2);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 3);
  TpError err = {0};
  if (tp_proc_loop_new(&ll->loop, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  if (coalesce_ms >= 0) {
    tp_proc_loop_set_coalesce(ll->loop, coalesce_ms);
  }
  return 1;
}

// Reads the list of strings at t[field] into a NULL-terminated array kept in a scratch userdata
// pushed on the stack (freed by the GC, so a raise cannot leak it).
static const char **check_argv(lua_State *L, int opts) {
  if (lua_getfield(L, opts, "argv") != LUA_TTABLE) {
    luaL_error(L, "option 'argv': table expected, got %s", luaL_typename(L, -1));
  }
  int argv_idx = lua_gettop(L);
  lua_Integer n = luaL_len(L, argv_idx);
  if (n < 1 || n > 100000) {
    luaL_error(L, "option 'argv': expected 1 to 100000 strings, got %d", (int)n);
  }
  const char **argv = lua_newuserdatauv(L, ((size_t)n + 1) * sizeof *argv, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, argv_idx, i) != LUA_TSTRING) {
      luaL_error(L, "option 'argv': item %d: string expected, got %s", (int)i,
                 luaL_typename(L, -1));
    }
    size_t len;
    argv[i - 1] = lua_tolstring(L, -1, &len);  // anchored by the argv table
    if (strlen(argv[i - 1]) != len) {
      luaL_error(L, "option 'argv': item %d contains a NUL byte", (int)i);
    }
    lua_pop(L, 1);
  }
  argv[n] = NULL;
  lua_remove(L, argv_idx);  // [.., scratch]
  return argv;
}

// Reads t.env ({NAME = value | false}) into a scratch userdata pushed on the stack.
static TpProcEnv *check_env(lua_State *L, int opts, size_t *count) {
  *count = 0;
  int t = lua_getfield(L, opts, "env");
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushnil(L);  // keep one slot, as in the other case
    return NULL;
  }
  if (t != LUA_TTABLE) {
    luaL_error(L, "option 'env': table expected, got %s", luaL_typename(L, -1));
  }
  int env_idx = lua_gettop(L);
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, env_idx)) {
    n++;
    lua_pop(L, 1);
  }
  TpProcEnv *env = lua_newuserdatauv(L, (n ? n : 1) * sizeof *env, 0);
  lua_pushnil(L);  // [env, scratch, key]
  while (lua_next(L, env_idx)) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      luaL_error(L, "option 'env': names must be strings, got %s", luaL_typename(L, -2));
    }
    const char *value = NULL;
    if (lua_type(L, -1) == LUA_TSTRING) {
      value = lua_tostring(L, -1);  // anchored by the env table
    } else if (!(lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1))) {
      luaL_error(L, "option 'env': value of '%s' must be a string or false, got %s",
                 lua_tostring(L, -2), luaL_typename(L, -1));
    }
    env[*count].name = lua_tostring(L, -2);
    env[*count].value = value;
    (*count)++;
    lua_pop(L, 1);
  }
  lua_remove(L, env_idx);  // [.., scratch]
  return env;
}

static lua_Integer opt_ms(lua_State *L, int opts, const char *field) {
  lua_Number s = tpl_optfield_number(L, opts, field, 0);
  return seconds_to_ms(L, s, field);
}

static void check_callback(lua_State *L, int opts, const char *field) {
  int t = lua_getfield(L, opts, field);
  if (t != LUA_TNIL && t != LUA_TFUNCTION) {
    luaL_error(L, "option '%s': function expected, got %s", field, luaL_typename(L, -1));
  }
}

// loop:spawn(opts) -> Proc | nil, err, code
// opts: argv, env, clear_env, cwd, log, log_stderr, log_append, timeout, kill_grace (seconds),
// capture (bytes kept per stream, 0 = none), on_line(stream, line, partial), on_exit(result).
static int loop_spawn(lua_State *L) {
  LLoop *ll = check_loop(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  // Check every option before any side effect.
  TpProcOpts o = {0};
  o.argv = check_argv(L, 2);              // [loop, opts, argv*]
  o.env = check_env(L, 2, &o.env_count);  // [loop, opts, argv*, env*]
  o.clear_env = tpl_optfield_boolean(L, 2, "clear_env", 0);
  o.cwd = tpl_optfield_string(L, 2, "cwd", NULL);
  o.log_path = tpl_optfield_string(L, 2, "log", NULL);
  o.log_stderr_path = tpl_optfield_string(L, 2, "log_stderr", NULL);
  o.log_append = tpl_optfield_boolean(L, 2, "log_append", 0);
  o.timeout_ms = opt_ms(L, 2, "timeout");
  lua_Integer grace = opt_ms(L, 2, "kill_grace");
  o.kill_grace_ms = grace;
  lua_Integer capture = tpl_optfield_integer(L, 2, "capture", 0);
  luaL_argcheck(L, capture >= 0, 2, "option 'capture': expected bytes >= 0");
  o.capture_max = (size_t)capture;
  check_callback(L, 2, "on_line");  // [loop, opts, argv*, env*, on_line]
  check_callback(L, 2, "on_exit");  // [loop, opts, argv*, env*, on_line, on_exit]
  o.want_lines = !lua_isnil(L, -2);

  // Userdata first, closed; the child is started only once nothing can raise before it is
  // stored (STYLE.md: never longjmp over a C resource).
  LProc *lp = lua_newuserdatauv(L, sizeof *lp, 4);  // [.., on_line, on_exit, proc]
  lp->proc = NULL;
  lp->grace_ms = grace;
  luaL_setmetatable(L, PROC_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lua_rotate(L, -3, 1);  // [.., proc, on_line, on_exit]
  lua_setiuservalue(L, -3, 3);
  lua_setiuservalue(L, -2, 2);  // [.., proc]
  lua_getiuservalue(L, 1, 1);   // [.., proc, procs]
  lua_pushvalue(L, -2);
  lua_rawsetp(L, -2, lp);  // held by the loop from now on: its exit will find it
  lua_pop(L, 1);           // [.., proc]
  o.user = lp;
  TpError err = {0};
  if (tp_proc_spawn(ll->loop, &o, &lp->proc, &err) != 0) {
    lua_getiuservalue(L, 1, 1);
    lua_pushnil(L);
    lua_rawsetp(L, -2, lp);
    return tpl_pusherror(L, &err);
  }
  return 1;
}

// loop:timer(interval, fn, once) -> id: fn(id) every `interval` seconds (once: a single time).
static int loop_timer(lua_State *L) {
  LLoop *ll = check_loop(L, 1);
  lua_Number s = luaL_checknumber(L, 2);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  int once = lua_toboolean(L, 4);
  luaL_argcheck(L, s > 0 && s <= 1e9, 2, "interval in seconds > 0 expected");
  lua_Integer ms = seconds_to_ms(L, s, "interval");
  lua_getiuservalue(L, 1, 2);  // [.., fns]
  lua_getiuservalue(L, 1, 3);  // [.., fns, once]
  uint64_t id = 0;
  TpError err = {0};
  if (tp_proc_loop_timer_add(ll->loop, ms, !once, &id, &err) != 0) {
    return luaL_error(L, "%s", err.msg);
  }
  lua_pushvalue(L, 3);
  lua_rawseti(L, -3, (lua_Integer)id);
  if (once) {
    lua_pushboolean(L, 1);
    lua_rawseti(L, -2, (lua_Integer)id);
  }
  lua_pushinteger(L, (lua_Integer)id);
  return 1;
}

// loop:cancel(id) -> boolean
static int loop_cancel(lua_State *L) {
  LLoop *ll = check_loop(L, 1);
  lua_Integer id = luaL_checkinteger(L, 2);
  bool found = id > 0 && tp_proc_loop_timer_cancel(ll->loop, (uint64_t)id);
  lua_getiuservalue(L, 1, 2);
  lua_pushnil(L);
  lua_rawseti(L, -2, id);
  lua_getiuservalue(L, 1, 3);
  lua_pushnil(L);
  lua_rawseti(L, -2, id);
  lua_pushboolean(L, found);
  return 1;
}

static void push_run_summary(lua_State *L, const LLoop *ll) {
  lua_createtable(L, 0, 2);
  int sig = tp_proc_loop_interrupted(ll->loop);
  if (sig) {
    lua_pushstring(L, signame_or_nil(sig));
    lua_setfield(L, -2, "interrupted");
    lua_pushinteger(L, 128 + sig);
    lua_setfield(L, -2, "exit_code");
  }
}

// loop:run() -> {interrupted = 'SIGINT' | nil, exit_code = 130 | nil} | nil, err, code
static int loop_run(lua_State *L) {
  LLoop *ll = check_loop(L, 1);
  lua_settop(L, 1);
  Dispatch d = {.L = L, .loop_idx = 1};
  TpProcEvents ev = make_events(&d);
  TpError err = {0};
  ll->running++;
  int rc = tp_proc_loop_run(ll->loop, &ev, &err);
  ll->running--;
  int n = after_run(L, &d, rc, &err);
  if (n) {
    return n;
  }
  push_run_summary(L, ll);
  return 1;
}

// loop:run_once(timeout) -> active, interrupted | nil, err, code
// timeout in seconds; nil or negative waits until something happens.
static int loop_run_once(lua_State *L) {
  LLoop *ll = check_loop(L, 1);
  lua_Number s = luaL_optnumber(L, 2, -1);
  int64_t ms = s < 0 ? -1 : (int64_t)seconds_to_ms(L, s, "timeout");
  lua_settop(L, 1);
  Dispatch d = {.L = L, .loop_idx = 1};
  TpProcEvents ev = make_events(&d);
  TpError err = {0};
  ll->running++;
  int rc = tp_proc_loop_run_once(ll->loop, ms, &ev, &err);
  ll->running--;
  int n = after_run(L, &d, rc, &err);
  if (n) {
    return n;
  }
  lua_pushboolean(L, tp_proc_loop_active(ll->loop) > 0);
  int sig = tp_proc_loop_interrupted(ll->loop);
  if (sig) {
    lua_pushstring(L, signame_or_nil(sig));
    return 2;
  }
  return 1;
}

// loop:active() -> number of children whose exit is pending
static int loop_active(lua_State *L) {
  LLoop *ll = check_loop(L, 1);
  lua_pushinteger(L, (lua_Integer)tp_proc_loop_active(ll->loop));
  return 1;
}

// loop:interrupted() -> 'SIGINT' | 'SIGTERM' | nil: the first signal the loop forwarded (signals
// caught since its last step are forwarded first, so the answer is current inside callbacks)
static int loop_interrupted(lua_State *L) {
  LLoop *ll = check_loop(L, 1);
  int sig = tp_proc_loop_interrupted(ll->loop);
  if (!sig) {
    return 0;
  }
  lua_pushstring(L, signame_or_nil(sig));
  return 1;
}

// loop:interrupt(sig) -> true: forwards 'SIGINT' or 'SIGTERM' to every running group as if tplua
// had received it (nothing when the loop already forwarded a signal)
static int loop_interrupt(lua_State *L) {
  static const char *const names[] = {"SIGINT", "SIGTERM", NULL};
  static const int sigs[] = {SIGINT, SIGTERM};
  LLoop *ll = check_loop(L, 1);
  int which = luaL_checkoption(L, 2, NULL, names);
  TpError err = {0};
  if (tp_proc_loop_interrupt(ll->loop, sigs[which], &err) != 0) {
    return luaL_error(L, "%s", err.msg);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// Marks every Proc of the loop closed, then frees the loop (killing children still running).
static void loop_release(LLoop *ll) {
  TpProcLoop *loop = ll->loop;
  ll->loop = NULL;
  for (size_t i = 0; i < tp_proc_loop_size(loop); i++) {
    LProc *lp = tp_proc_user(tp_proc_loop_get(loop, i));
    if (lp) {
      lp->proc = NULL;
    }
  }
  tp_proc_loop_free(loop);
}

// loop:close(): kills and reaps every child still running; idempotent.
static int loop_close(lua_State *L) {
  LLoop *ll = luaL_checkudata(L, 1, LOOP_MT);
  if (ll->loop) {
    if (ll->running) {
      return luaL_error(L, "cannot close a proc loop from one of its callbacks");
    }
    loop_release(ll);
  }
  return 0;
}

static int loop_gc(lua_State *L) {
  LLoop *ll = luaL_checkudata(L, 1, LOOP_MT);
  if (ll->loop) {
    loop_release(ll);
  }
  return 0;
}

static int loop_tostring(lua_State *L) {
  LLoop *ll = luaL_checkudata(L, 1, LOOP_MT);
  if (!ll->loop) {
    lua_pushstring(L, "tp.ProcLoop (closed)");
  } else {
    lua_pushfstring(L, "tp.ProcLoop (%d active)", (int)tp_proc_loop_active(ll->loop));
  }
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Proc

// proc:wait() -> result
static int proc_wait(lua_State *L) {
  LProc *lp = check_proc(L, 1);
  lua_settop(L, 1);
  if (!tp_proc_done(lp->proc)) {
    lua_getiuservalue(L, 1, 1);  // [proc, loop]
    LLoop *ll = check_loop(L, 2);
    Dispatch d = {.L = L, .loop_idx = 2};
    TpProcEvents ev = make_events(&d);
    TpError err = {0};
    ll->running++;
    int rc = tp_proc_wait(lp->proc, &ev, &err);
    ll->running--;
    int n = after_run(L, &d, rc, &err);
    if (n) {
      return n;
    }
    if (!lp->proc) {
      return luaL_error(L, "proc closed while waiting for it");
    }
  }
  lua_getiuservalue(L, 1, 4);
  return 1;
}

static int check_signal(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    lua_Integer sig = luaL_checkinteger(L, idx);
    luaL_argcheck(L, sig >= 0 && sig < NSIG, idx, "signal number out of range");
    return (int)sig;
  }
  const char *name = luaL_checkstring(L, idx);
  int sig = tp_proc_signal_number(name);
  if (!sig) {
    return luaL_argerror(L, idx, lua_pushfstring(L, "unknown signal '%s'", name));
  }
  return sig;
}

// proc:kill([sig]) -> true | nil, err, code
// Without sig: SIGTERM to the group, SIGKILL after the spawn's kill_grace.
static int proc_kill(lua_State *L) {
  LProc *lp = check_proc(L, 1);
  TpError err = {0};
  int rc;
  if (lua_isnoneornil(L, 2)) {
    rc = tp_proc_kill_tree(lp->proc, lp->grace_ms, &err);
  } else {
    rc = tp_proc_signal_group(lp->proc, check_signal(L, 2), &err);
  }
  if (rc != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// proc:pid() -> integer; proc:pgid() -> integer (the same number: the child leads its group)
static int proc_pid(lua_State *L) {
  LProc *lp = check_proc(L, 1);
  lua_pushinteger(L, tp_proc_pid(lp->proc));
  return 1;
}

// proc:done() -> boolean: whether the exit was delivered (wait() then returns at once)
static int proc_done(lua_State *L) {
  LProc *lp = check_proc(L, 1);
  lua_pushboolean(L, tp_proc_done(lp->proc));
  return 1;
}

// proc:close(): a child still running has its group killed and is reaped; idempotent.
static int proc_close(lua_State *L) {
  LProc *lp = luaL_checkudata(L, 1, PROC_MT);
  TpProc *p = lp->proc;
  lp->proc = NULL;  // closed before releasing (STYLE.md)
  if (p) {
    tp_proc_destroy(p);
  }
  return 0;
}

static int proc_tostring(lua_State *L) {
  LProc *lp = luaL_checkudata(L, 1, PROC_MT);
  if (!lp->proc) {
    lua_pushstring(L, "tp.Proc (closed)");
  } else if (tp_proc_done(lp->proc)) {
    lua_pushfstring(L, "tp.Proc (pid %d, exited with %d)", (int)tp_proc_pid(lp->proc),
                    tp_proc_result(lp->proc)->code);
  } else {
    lua_pushfstring(L, "tp.Proc (pid %d, running)", (int)tp_proc_pid(lp->proc));
  }
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Module functions

// _proc.group_members(pgid) -> {pid...} | nil, err, code: live processes of a process group
static int proc_group_members(lua_State *L) {
  lua_Integer pgid = luaL_checkinteger(L, 1);
  luaL_argcheck(L, pgid > 0 && pgid <= INT32_MAX, 1, "process group id out of range");
  pid_t pids[1024];
  size_t n = 0;
  TpError err = {0};
  if (tp_proc_group_members((pid_t)pgid, pids, 1024, &n, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  if (n > 1024) {
    n = 1024;
  }
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushinteger(L, pids[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

// _proc.wait_gone(pids, timeout) -> true | nil, err, code: waits (seconds) until every process
// in the list has terminated, whoever its parent is
static int proc_wait_gone(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Number s = luaL_checknumber(L, 2);
  lua_Integer ms = seconds_to_ms(L, s, "timeout");
  lua_Integer n = luaL_len(L, 1);
  luaL_argcheck(L, n >= 0 && n <= 100000, 1, "too many pids");
  pid_t *pids = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *pids, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    int isint = 0;
    lua_Integer pid = lua_tointegerx(L, -1, &isint);
    luaL_argcheck(L, isint && pid > 0 && pid <= INT32_MAX, 1, "list of pids expected");
    pids[i - 1] = (pid_t)pid;
    lua_pop(L, 1);
  }
  TpError err = {0};
  if (tp_proc_wait_gone(pids, (size_t)n, ms, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static const luaL_Reg k_loop_methods[] = {
    {"active", loop_active},
    {"cancel", loop_cancel},
    {"close", loop_close},
    {"interrupt", loop_interrupt},
    {"interrupted", loop_interrupted},
    {"run", loop_run},
    {"run_once", loop_run_once},
    {"spawn", loop_spawn},
    {"timer", loop_timer},
    {NULL, NULL},
};

static const luaL_Reg k_loop_meta[] = {
    {"__close", loop_close},
    {"__gc", loop_gc},
    {"__tostring", loop_tostring},
    {NULL, NULL},
};

static const luaL_Reg k_proc_methods[] = {
    {"close", proc_close}, {"done", proc_done}, {"kill", proc_kill}, {"pgid", proc_pid},
    {"pid", proc_pid},     {"wait", proc_wait}, {NULL, NULL},
};

static const luaL_Reg k_proc_meta[] = {
    {"__close", proc_close},
    {"__gc", proc_close},
    {"__tostring", proc_tostring},
    {NULL, NULL},
};

// proc.cpu_count() -> integer: the CPUs this process may run on
static int proc_cpu_count(lua_State *L) {
  lua_pushinteger(L, tp_proc_cpu_count());
  return 1;
}

static const luaL_Reg k_functions[] = {
    {"cpu_count", proc_cpu_count},
    {"group_members", proc_group_members},
    {"loop", proc_loop},
    {"wait_gone", proc_wait_gone},
    {NULL, NULL},
};

int luaopen_tp__proc(lua_State *L);
int luaopen_tp__proc(lua_State *L) {
  tpl_newclass(L, LOOP_MT, k_loop_methods, k_loop_meta);
  tpl_newclass(L, PROC_MT, k_proc_methods, k_proc_meta);
  luaL_newlib(L, k_functions);
  return 1;
}
