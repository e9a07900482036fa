// libtplua's public API (include/tplua.h): engines, protected calls, files, strings and commands
// run as the tplua binary runs them, a log to its record and a trace to its breakdown, interrupts.
// Every Lua call runs protected; nothing here exits, aborts or keeps global state.
#include "tplua.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "proc.h"
#include "tplua_setup.h"

// A stream of the engine that copies what Lua writes to the host's FILE and hands each line to
// the log callback (a glibc cookie FILE).
typedef struct Sink {
  tplua_engine *T;
  int stream;  // TPLUA_STREAM_OUT or TPLUA_STREAM_ERR
  FILE *dest;  // the host's FILE (or stdout / stderr)
  char *line;  // the line being written, not yet ended
  size_t len, cap;
} Sink;

struct tplua_engine {
  lua_State *L;
  char *progname;
  char *stdlib_dir;
  char *errmsg;
  tplua_log_fn log;
  void *log_user;
  Sink sinks[2];     // output, error: used when the host set a stream or a callback
  FILE *out_file;    // the engine's output (a sink's FILE, or stdout)
  FILE *err_file;    // its error stream
  FILE *print_file;  // where print writes now (out_file, or a capture)
  int interrupted;   // the current (or last) call was stopped by tplua_interrupt
  int last_error;    // the last call's failure that was reported (TPLUA_ERROR, ...), or 0
  int depth;         // protected calls in progress
};

// Registry keys: the engine of a state (light userdata) and the metatable of os.exit's error.
static const char k_engine_key = 0;
static const char k_exit_key = 0;

static const char *const k_status_text[] = {"ok",
                                            "Lua error",
                                            "invalid argument",
                                            "no result",
                                            "not enough memory",
                                            "interrupted",
                                            "options of a newer library",
                                            "os.exit called"};

// ---------------------------------------------------------------------------------------------
// Small helpers

static char *dup_text(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

static void set_errmsg(tplua_engine *T, const char *msg, size_t n) {
  free(T->errmsg);
  T->errmsg = msg ? dup_text(msg, n) : NULL;
}

static void set_errmsg_text(tplua_engine *T, const char *msg) {
  set_errmsg(T, msg, strlen(msg));
}

// Writes the engine's own message (an error report) to its error stream.
static void report(tplua_engine *T, const char *msg) {
  if (T->progname && *T->progname) {
    fprintf(T->err_file, "%s: ", T->progname);
  }
  fprintf(T->err_file, "%s\n", msg);
  fflush(T->err_file);
}

// ---------------------------------------------------------------------------------------------
// Streams: sinks (cookie FILEs) and Lua file handles over C FILEs the engine owns.

static void sink_emit(Sink *s, const char *p, size_t n) {
  if (s->T->log) {
    s->T->log(s->T->log_user, s->stream, p, n);
  }
}

static ssize_t sink_write(void *cookie, const char *buf, size_t n) {
  Sink *s = cookie;
  if (s->dest && n > 0) {
    fwrite(buf, 1, n, s->dest);
    fflush(s->dest);
  }
  if (!s->T->log) {
    return (ssize_t)n;
  }
  size_t start = 0;
  for (size_t i = 0; i < n; i++) {
    if (buf[i] != '\n') {
      continue;
    }
    if (s->len > 0) {  // the end of a line begun earlier
      size_t add = i - start;
      char *grown = s->len + add <= s->cap ? s->line : realloc(s->line, s->len + add);
      if (grown) {
        s->line = grown;
        s->cap = s->len + add > s->cap ? s->len + add : s->cap;
        memcpy(s->line + s->len, buf + start, add);
        s->len += add;
      }
      sink_emit(s, s->line, s->len);
      s->len = 0;
    } else {
      sink_emit(s, buf + start, i - start);
    }
    start = i + 1;
  }
  size_t rest = n - start;
  if (rest > 0) {
    if (s->len + rest > s->cap) {
      size_t cap = (s->len + rest) * 2;
      char *grown = realloc(s->line, cap);
      if (!grown) {
        return (ssize_t)n;  // out of memory: the callback misses this piece, the stream not
      }
      s->line = grown;
      s->cap = cap;
    }
    memcpy(s->line + s->len, buf + start, rest);
    s->len += rest;
  }
  return (ssize_t)n;
}

static int sink_close(void *cookie) {
  Sink *s = cookie;
  if (s->len > 0) {
    sink_emit(s, s->line, s->len);  // a last line without its newline
  }
  free(s->line);
  s->line = NULL;
  s->len = s->cap = 0;
  return 0;
}

static FILE *sink_open(tplua_engine *T, Sink *s, int stream, FILE *dest) {
  *s = (Sink){.T = T, .stream = stream, .dest = dest};
  cookie_io_functions_t io = {.read = NULL, .write = sink_write, .seek = NULL, .close = sink_close};
  FILE *f = fopencookie(s, "w", io);
  if (f) {
    setvbuf(f, NULL, _IOLBF, 0);
  }
  return f;
}

// io handles over FILEs the engine owns: Lua may not close them (as io.stdout).
static int stream_noclose(lua_State *L) {
  luaL_Stream *p = (luaL_Stream *)luaL_checkudata(L, 1, LUA_FILEHANDLE);
  p->closef = &stream_noclose;  // keep it open
  luaL_pushfail(L);
  lua_pushliteral(L, "cannot close standard file");
  return 2;
}

static luaL_Stream *push_stream(lua_State *L, FILE *f) {
  luaL_Stream *p = (luaL_Stream *)lua_newuserdatauv(L, sizeof *p, 0);
  p->closef = NULL;  // closed until complete
  luaL_setmetatable(L, LUA_FILEHANDLE);
  p->f = f;
  p->closef = &stream_noclose;
  return p;
}

// Makes the handles on top of the stack ([out, err]) io.stdout, the default output and
// io.stderr; pops them.
static void set_io_streams(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);  // [out, err, loaded]
  lua_getfield(L, -1, LUA_IOLIBNAME);                        // [out, err, loaded, io]
  lua_pushvalue(L, -4);
  lua_setfield(L, -2, "stdout");
  lua_pushvalue(L, -3);
  lua_setfield(L, -2, "stderr");
  lua_pushvalue(L, -4);
  lua_setfield(L, LUA_REGISTRYINDEX, "_IO_output");  // liolib's IO_OUTPUT: io.write's target
  lua_pop(L, 4);
}

// Pushes the current [io.stdout, io.stderr].
static void get_io_streams(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, LUA_IOLIBNAME);  // [loaded, io]
  lua_getfield(L, -1, "stdout");
  lua_getfield(L, -2, "stderr");  // [loaded, io, out, err]
  lua_remove(L, -3);
  lua_remove(L, -3);
}

// print, writing to the engine's output (lbaselib's luaB_print, with its FILE).
static int engine_print(lua_State *L) {
  tplua_engine *T = lua_touserdata(L, lua_upvalueindex(1));
  FILE *f = T->print_file;
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *s = luaL_tolstring(L, i, &len);
    if (i > 1) {
      fputc('\t', f);
    }
    fwrite(s, 1, len, f);
    lua_pop(L, 1);
  }
  fputc('\n', f);
  fflush(f);
  return 0;
}

// os.exit([code [, close]]): ends the engine's call with the status instead of the process
// (the host closes the engine). Raises an exit object that the call turns into its status.
static int engine_exit(lua_State *L) {
  int status;
  if (lua_isboolean(L, 1)) {
    status = lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE;
  } else {
    status = (int)luaL_optinteger(L, 1, EXIT_SUCCESS);
  }
  lua_createtable(L, 0, 1);
  lua_pushinteger(L, status);
  lua_setfield(L, -2, "status");
  lua_rawgetp(L, LUA_REGISTRYINDEX, &k_exit_key);
  lua_setmetatable(L, -2);
  return lua_error(L);
}

// Whether the value at idx is os.exit's error object; does not allocate.
static int is_exit(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) {
    return 0;
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &k_exit_key);
  int yes = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return yes;
}

// ---------------------------------------------------------------------------------------------
// Protected calls

static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &k_engine_key);
  tplua_engine *T = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (T) {
    T->interrupted = 1;
  }
  luaL_error(L, "interrupted");
}

// Message handler: any error object to a string with a traceback; os.exit's object unchanged.
static int msghandler(lua_State *L) {
  if (is_exit(L, 1)) {
    return 1;
  }
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
      return 1;  // an object with its own message: no traceback (as lua.c)
    }
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

// The exit status of os.exit's object on top of the stack, replacing it.
static int take_exit_status(lua_State *L) {
  lua_getfield(L, -1, "status");
  int status = (int)lua_tointeger(L, -1);
  lua_pop(L, 2);
  lua_pushinteger(L, status);
  return status;
}

// Calls the function below its narg arguments with the traceback handler; returns TPLUA_OK,
// TPLUA_ERROR, TPLUA_ENOMEM, TPLUA_EINTERRUPTED, or TPLUA_EXIT with os.exit's object on top.
static int docall(tplua_engine *T, int narg, int nres) {
  lua_State *L = T->L;
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  if (T->depth == 0) {
    T->interrupted = 0;
    tp_proc_interrupted_clear();  // process-wide: what tp.proc's loops caught (docs/embedding.md)
  }
  T->depth++;
  int status = lua_pcall(L, narg, nres, base);
  T->depth--;
  lua_remove(L, base);
  if (status == LUA_OK) {
    return TPLUA_OK;
  }
  if (is_exit(L, -1)) {
    return TPLUA_EXIT;
  }
  size_t len = 0;
  const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  if (msg) {
    set_errmsg(T, msg, len);
  } else {
    set_errmsg_text(T, "(error object is not a string)");
  }
  if (T->interrupted) {
    return TPLUA_EINTERRUPTED;
  }
  return status == LUA_ERRMEM ? TPLUA_ENOMEM : TPLUA_ERROR;
}

// The exit status the binary gives a docall result; reports errors on the error stream.
static int exit_status(tplua_engine *T, int status) {
  if (status != TPLUA_OK && status != TPLUA_EXIT) {
    T->last_error = status;
  }
  switch (status) {
    case TPLUA_OK:
      return EXIT_SUCCESS;
    case TPLUA_EXIT:
      return take_exit_status(T->L) & 0xFF;
    case TPLUA_EINTERRUPTED:
      report(T, T->errmsg ? T->errmsg : "interrupted");
      lua_pop(T->L, 1);
      return 130;
    default:
      report(T, T->errmsg ? T->errmsg : "error");
      lua_pop(T->L, 1);
      return EXIT_FAILURE;
  }
}

// Runs fn(T, arg) in protected mode, so that memory errors outside the inner calls are caught
// too; returns TPLUA_OK or TPLUA_ENOMEM / TPLUA_ERROR (message in errmsg). The stack is left
// as it was.
typedef struct Protected {
  tplua_engine *T;
  int (*fn)(tplua_engine *T, void *arg);
  void *arg;
  int result;
} Protected;

static int protected_body(lua_State *L) {
  Protected *p = lua_touserdata(L, 1);
  p->result = p->fn(p->T, p->arg);
  return 0;
}

static int protect(tplua_engine *T, int (*fn)(tplua_engine *, void *), void *arg, int *result) {
  lua_State *L = T->L;
  int top = lua_gettop(L);
  if (!lua_checkstack(L, 4)) {
    set_errmsg_text(T, "not enough memory");
    return TPLUA_ENOMEM;
  }
  Protected p = {.T = T, .fn = fn, .arg = arg, .result = 0};
  if (T->depth == 0) {
    T->interrupted = 0;
    tp_proc_interrupted_clear();  // process-wide: what tp.proc's loops caught (docs/embedding.md)
  }
  T->depth++;  // the calls inside are not the outermost: they keep the interrupted flag
  lua_pushcfunction(L, protected_body);
  lua_pushlightuserdata(L, &p);
  int status = lua_pcall(L, 1, 0, 0);
  T->depth--;
  int code = TPLUA_OK;
  if (status != LUA_OK) {
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";
    set_errmsg_text(T, msg);
    code =
        T->interrupted ? TPLUA_EINTERRUPTED : (status == LUA_ERRMEM ? TPLUA_ENOMEM : TPLUA_ERROR);
  }
  lua_settop(L, top);
  *result = p.result;
  return code;
}

// ---------------------------------------------------------------------------------------------
// Engines

void tplua_options_init(tplua_options *opts) {
  if (opts) {
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
  }
}

typedef struct NewArgs {
  const tplua_options *o;
} NewArgs;

static int new_body(tplua_engine *T, void *arg) {
  const tplua_options *o = ((NewArgs *)arg)->o;
  lua_State *L = T->L;
  luaL_checkversion(L);
  if (o->ignore_env) {
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");  // luaopen_package reads it
  }
  luaL_openlibs(L);
  lua_pushlightuserdata(L, T);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &k_engine_key);
  lua_newtable(L);  // the metatable of os.exit's object
  lua_rawsetp(L, LUA_REGISTRYINDEX, &k_exit_key);
  tpl_setup(L, o->stdlib_dir, o->ignore_env);
  tpl_setup_interrupt_flag(L, &T->interrupted);
  const char *dir = tpl_setup_stdlib_dir(L);
  T->stdlib_dir = dir ? dup_text(dir, strlen(dir)) : NULL;
  if (!T->stdlib_dir) {
    luaL_error(L, "not enough memory");
  }

  lua_pushlightuserdata(L, T);
  lua_pushcclosure(L, engine_print, 1);
  lua_setglobal(L, "print");
  lua_getglobal(L, "os");
  lua_pushcfunction(L, engine_exit);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
  if (T->sinks[0].T) {  // the host gave streams or a callback: Lua writes through the sinks
    push_stream(L, T->out_file);
    push_stream(L, T->err_file);
    set_io_streams(L);
  }

  const char *stress = o->ignore_env ? NULL : getenv("TPLUA_GC_STRESS");
  if (stress && *stress && strcmp(stress, "0") != 0) {
    lua_gc(L, LUA_GCINC, 1, 1000, 0);  // about one cycle per allocation: flushes missing anchors
  } else {
    lua_gc(L, LUA_GCGEN, 0, 0);
  }
  return 0;
}

static void engine_free(tplua_engine *T) {
  if (T->L) {
    lua_close(T->L);
  }
  for (int i = 0; i < 2; i++) {
    if (T->sinks[i].T) {
      fclose(i == 0 ? T->out_file : T->err_file);
    }
  }
  free(T->progname);
  free(T->stdlib_dir);
  free(T->errmsg);
  free(T);
}

int tplua_new(tplua_engine **out, const tplua_options *opts) {
  if (!out) {
    return TPLUA_EINVAL;
  }
  *out = NULL;
  tplua_options o;
  tplua_options_init(&o);
  if (opts) {
    if (opts->size < sizeof(size_t)) {
      return TPLUA_EINVAL;
    }
    if (opts->size > sizeof o) {  // a newer host: fine while the fields we lack are unset
      const unsigned char *extra = (const unsigned char *)opts + sizeof o;
      for (size_t i = 0; i < opts->size - sizeof o; i++) {
        if (extra[i]) {
          return TPLUA_EVERSION;
        }
      }
    }
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
    o.size = sizeof o;
  }
  tplua_engine *T = calloc(1, sizeof *T);
  if (!T) {
    return TPLUA_ENOMEM;
  }
  const char *name = o.progname ? o.progname : "tplua";
  T->progname = dup_text(name, strlen(name));
  T->log = o.log;
  T->log_user = o.log_user;
  T->out_file = o.out ? o.out : stdout;
  T->err_file = o.err ? o.err : stderr;
  if (o.out || o.err || o.log) {
    FILE *fo = sink_open(T, &T->sinks[0], TPLUA_STREAM_OUT, T->out_file);
    FILE *fe = fo ? sink_open(T, &T->sinks[1], TPLUA_STREAM_ERR, T->err_file) : NULL;
    if (!fe) {
      if (fo) {
        fclose(fo);
      }
      T->sinks[0].T = NULL;
      free(T->progname);
      free(T);
      return TPLUA_ENOMEM;
    }
    T->out_file = fo;
    T->err_file = fe;
  }
  T->print_file = T->out_file;
  T->L = T->progname ? luaL_newstate() : NULL;
  if (!T->L) {
    engine_free(T);
    return TPLUA_ENOMEM;
  }
  NewArgs a = {.o = &o};
  int ignored;
  int code = protect(T, new_body, &a, &ignored);
  if (code != TPLUA_OK) {
    engine_free(T);
    return code == TPLUA_ENOMEM ? TPLUA_ENOMEM : TPLUA_ERROR;
  }
  *out = T;
  return TPLUA_OK;
}

void tplua_close(tplua_engine *T) {
  if (T) {
    engine_free(T);
  }
}

struct lua_State *tplua_state(tplua_engine *T) {
  return T ? T->L : NULL;
}

const char *tplua_stdlib_dir(const tplua_engine *T) {
  return T && T->stdlib_dir ? T->stdlib_dir : "";
}

const char *tplua_errmsg(const tplua_engine *T) {
  return T && T->errmsg ? T->errmsg : "";
}

int tplua_pcall(tplua_engine *T, int nargs, int nresults) {
  if (!T || nargs < 0 || lua_gettop(T->L) < nargs + 1) {
    return TPLUA_EINVAL;
  }
  int status = docall(T, nargs, nresults);
  if (status == TPLUA_EXIT) {
    take_exit_status(T->L);  // the status where the message would be
    set_errmsg_text(T, "os.exit called");
  }
  return status;
}

void tplua_interrupt(tplua_engine *T) {
  // lua_sethook is safe to call asynchronously (a signal handler, as lua.c does; another
  // thread likewise): the hook raises the error on the engine's own thread.
  if (T && T->L) {
    lua_sethook(T->L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
  }
}

void tplua_free(void *p) {
  free(p);
}

const char *tplua_strerror(int code) {
  if (code >= 0 && (size_t)code < sizeof k_status_text / sizeof k_status_text[0]) {
    return k_status_text[code];
  }
  return "unknown status";
}

int tplua_version_number(void) {
  return TPLUA_VERSION_NUMBER;
}

const char *tplua_version(void) {
  return TPLUA_VERSION_STRING;
}

// ---------------------------------------------------------------------------------------------
// Files, strings, commands

// Sets arg[0] = path (when given) and arg[1..argc] = argv, creating `arg` when absent; entries
// beyond argc are cleared, those at negative indices kept.
static void set_arg(lua_State *L, const char *path, int argc, const char *const *argv) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, argc, 1);
    lua_pushvalue(L, -1);
    lua_setglobal(L, "arg");
  }
  lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
  for (lua_Integer i = argc + 1; i <= n; i++) {
    lua_pushnil(L);
    lua_rawseti(L, -2, i);
  }
  if (path) {
    lua_pushstring(L, path);
    lua_rawseti(L, -2, 0);
  }
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pop(L, 1);
}

typedef struct RunArgs {
  const char *path;  // file (NULL: stdin), code, or command name
  const char *chunkname;
  int argc;
  const char *const *argv;
} RunArgs;

// Turns a load status into a docall-like result (message in errmsg, on the stack).
static int load_result(tplua_engine *T, int status) {
  if (status == LUA_OK) {
    return TPLUA_OK;
  }
  size_t len = 0;
  const char *msg = lua_tolstring(T->L, -1, &len);
  set_errmsg(T, msg ? msg : "error", msg ? len : 5);
  return status == LUA_ERRMEM ? TPLUA_ENOMEM : TPLUA_ERROR;
}

static int run_file_body(tplua_engine *T, void *arg) {
  const RunArgs *a = arg;
  lua_State *L = T->L;
  set_arg(L, a->path, a->argc, a->argv);
  int status = load_result(T, luaL_loadfilex(L, a->path, "t"));
  if (status == TPLUA_OK) {
    luaL_checkstack(L, a->argc + 3, "too many arguments to script");
    for (int i = 0; i < a->argc; i++) {
      lua_pushstring(L, a->argv[i]);
    }
    status = docall(T, a->argc, LUA_MULTRET);
  }
  return exit_status(T, status);
}

static int run_string_body(tplua_engine *T, void *arg) {
  const RunArgs *a = arg;
  lua_State *L = T->L;
  int status = load_result(T, luaL_loadbufferx(L, a->path, strlen(a->path), a->chunkname, "t"));
  if (status == TPLUA_OK) {
    status = docall(T, 0, 0);
  }
  return exit_status(T, status);
}

// tp.cmd.main(name, args) -> exit status (what the binary does for `tplua COMMAND ARGS...`).
static int run_command_body(tplua_engine *T, void *arg) {
  const RunArgs *a = arg;
  lua_State *L = T->L;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tp.cmd");
  int status = docall(T, 1, 1);
  if (status != TPLUA_OK) {
    return exit_status(T, status);
  }
  lua_getfield(L, -1, "main");
  lua_remove(L, -2);
  lua_pushstring(L, a->path);
  lua_createtable(L, a->argc, 0);
  for (int i = 0; i < a->argc; i++) {
    lua_pushstring(L, a->argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  status = docall(T, 2, 1);
  if (status != TPLUA_OK) {
    return exit_status(T, status);
  }
  int isnum = 0;
  lua_Integer code = lua_tointegerx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum) {
    return EXIT_SUCCESS;
  }
  return code < 0 || code > 255 ? EXIT_FAILURE : (int)code;
}

// Runs body protected; a failure of the protection itself (memory) is reported like a Lua error.
static int run_protected(tplua_engine *T, int (*body)(tplua_engine *, void *), RunArgs *a) {
  int result = EXIT_FAILURE;
  int code = protect(T, body, a, &result);
  if (code != TPLUA_OK) {
    report(T, T->errmsg ? T->errmsg : "error");
    return code == TPLUA_EINTERRUPTED ? 130 : EXIT_FAILURE;
  }
  return result;
}

int tplua_run_file(tplua_engine *T, const char *path, int argc, const char *const *argv) {
  if (!T || argc < 0 || (argc > 0 && !argv)) {
    return -TPLUA_EINVAL;
  }
  RunArgs a = {.path = path, .argc = argc, .argv = argv};
  return run_protected(T, run_file_body, &a);
}

int tplua_run_string(tplua_engine *T, const char *code, const char *chunkname) {
  if (!T || !code) {
    return -TPLUA_EINVAL;
  }
  RunArgs a = {.path = code, .chunkname = chunkname ? chunkname : "=(string)"};
  return run_protected(T, run_string_body, &a);
}

int tplua_run_command(tplua_engine *T, int argc, const char *const *argv) {
  if (!T || argc < 1 || !argv || !argv[0]) {
    return -TPLUA_EINVAL;
  }
  for (int i = 0; i < argc; i++) {
    if (!argv[i]) {
      return -TPLUA_EINVAL;
    }
  }
  RunArgs a = {.path = argv[0], .argc = argc - 1, .argv = argv + 1};
  return run_protected(T, run_command_body, &a);
}

// ---------------------------------------------------------------------------------------------
// A command run with its output and error streams captured (the record, the trace breakdown).

typedef struct Captured {
  RunArgs run;
  FILE *out, *err;  // memory streams
  int interrupted;
  int lua_error;
  int status;  // the command's exit status
} Captured;

static int captured_body(tplua_engine *T, void *arg) {
  Captured *c = arg;
  lua_State *L = T->L;
  get_io_streams(L);  // [old_out, old_err]
  int old = lua_gettop(L) - 1;
  luaL_Stream *so = push_stream(L, c->out);
  luaL_Stream *se = push_stream(L, c->err);  // [old_out, old_err, out, err]
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  set_io_streams(L);
  FILE *old_print = T->print_file;
  FILE *old_err = T->err_file;
  T->print_file = c->out;
  T->err_file = c->err;
  T->last_error = 0;

  c->status = run_command_body(T, &c->run);  // reports go to the captured error stream
  c->interrupted = T->interrupted;
  c->lua_error = T->last_error == TPLUA_ERROR || T->last_error == TPLUA_ENOMEM;

  T->print_file = old_print;
  T->err_file = old_err;
  lua_pushvalue(L, old);
  lua_pushvalue(L, old + 1);
  set_io_streams(L);
  so->closef = NULL;  // closed: Lua code that kept them gets an error, not a freed FILE
  se->closef = NULL;
  return 0;
}

// Trims trailing newlines of a malloc'd text in place.
static void chomp(char *s, size_t *len) {
  while (*len > 0 && (s[*len - 1] == '\n' || s[*len - 1] == '\r')) {
    s[--*len] = '\0';
  }
}

// Runs the command with its streams captured. Returns a TPLUA_* code; on TPLUA_OK *out_text
// holds its output (malloc'd); otherwise errmsg says why.
static int run_captured(tplua_engine *T, int argc, const char *const *argv, char **out_text) {
  char *obuf = NULL, *ebuf = NULL;
  size_t olen = 0, elen = 0;
  FILE *o = open_memstream(&obuf, &olen);
  FILE *e = o ? open_memstream(&ebuf, &elen) : NULL;
  if (!e) {
    if (o) {
      fclose(o);
    }
    free(obuf);
    set_errmsg_text(T, "not enough memory");
    return TPLUA_ENOMEM;
  }
  Captured c = {.run = {.path = argv[0], .argc = argc - 1, .argv = argv + 1}, .out = o, .err = e};
  char *saved_progname = T->progname;
  T->progname = NULL;  // reports inside go to the capture as they are
  int ignored;
  int code = protect(T, captured_body, &c, &ignored);
  T->progname = saved_progname;
  fclose(o);
  fclose(e);
  if (code == TPLUA_OK) {
    if (c.interrupted) {
      code = TPLUA_EINTERRUPTED;
    } else if (c.status == 0) {
      code = TPLUA_OK;
    } else if (c.status == 2) {
      code = TPLUA_EINVAL;
    } else {
      code = c.lua_error ? TPLUA_ERROR : TPLUA_EFAIL;
    }
    if (code != TPLUA_OK) {
      chomp(ebuf, &elen);
      if (code != TPLUA_ERROR) {  // the message, without the usage text that may follow it
        char *nl = strchr(ebuf, '\n');
        elen = nl ? (size_t)(nl - ebuf) : elen;
      }
      set_errmsg(T, elen ? ebuf : "failed", elen ? elen : 6);
    }
  }
  free(ebuf);
  if (code == TPLUA_OK && out_text) {
    *out_text = obuf;
  } else {
    free(obuf);
  }
  return code;
}

// NULL-terminated flags counted; -1 when too many.
static int count_flags(const char *const *flags) {
  int n = 0;
  while (flags && flags[n]) {
    if (++n > 1000) {
      return -1;
    }
  }
  return n;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 65536 + 1 > cap) {
      cap = (len + 65536 + 1) * 2;
      char *grown = realloc(buf, cap);
      if (!grown) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = grown;
    }
    size_t n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
    if (n == 0) {
      break;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return NULL;
  }
  buf[len] = '\0';
  return buf;
}

// Removes the scratch directory and whatever a failed atomic write left in it.
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
        continue;
      }
      char p[PATH_MAX];
      int n = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      if (n > 0 && (size_t)n < sizeof p) {
        unlink(p);
      }
    }
    closedir(d);
  }
  rmdir(dir);
}

int tplua_extract(tplua_engine *T, const char *log_path, const char *const *flags, char **json) {
  if (json) {
    *json = NULL;
  }
  if (!T) {
    return TPLUA_EINVAL;
  }
  int nflags = count_flags(flags);
  if (!log_path || !json || nflags < 0) {
    set_errmsg_text(T, "tplua_extract: log_path and json must not be NULL");
    return TPLUA_EINVAL;
  }
  const char *tmp = getenv("TMPDIR");
  tmp = tmp && *tmp ? tmp : "/tmp";
  char dir[PATH_MAX];
  int n = snprintf(dir, sizeof dir, "%s/tplua-extract.XXXXXX", tmp);  // mkdtemp's template
  if (n <= 0 || (size_t)n >= sizeof dir || !mkdtemp(dir)) {
    char msg[PATH_MAX + 96];
    snprintf(msg, sizeof msg, "tplua_extract: cannot create a scratch directory in %s (TMPDIR): %s",
             tmp, n <= 0 || (size_t)n >= sizeof dir ? "path too long" : strerror(errno));
    set_errmsg_text(T, msg);
    return TPLUA_EFAIL;
  }
  char out[PATH_MAX + 16];
  snprintf(out, sizeof out, "%s/record.json", dir);
  const char **argv = calloc((size_t)nflags + 6, sizeof *argv);
  if (!argv) {
    rmdir(dir);
    set_errmsg_text(T, "not enough memory");
    return TPLUA_ENOMEM;
  }
  int argc = 0;
  argv[argc++] = "extract";
  argv[argc++] = log_path;
  for (int i = 0; i < nflags; i++) {
    argv[argc++] = flags[i];
  }
  argv[argc++] = "--quiet";
  argv[argc++] = "--json";
  argv[argc++] = out;
  int code = run_captured(T, argc, argv, NULL);
  free(argv);
  if (code == TPLUA_OK) {
    *json = read_file(out);
    if (!*json) {
      set_errmsg_text(T, "tplua_extract: cannot read the record back");
      code = TPLUA_EFAIL;
    }
  }
  remove_tree(dir);
  return code;
}

int tplua_trace(tplua_engine *T, const char *trace_path, const char *const *flags, char **json) {
  if (json) {
    *json = NULL;
  }
  if (!T) {
    return TPLUA_EINVAL;
  }
  int nflags = count_flags(flags);
  if (!trace_path || !json || nflags < 0) {
    set_errmsg_text(T, "tplua_trace: trace_path and json must not be NULL");
    return TPLUA_EINVAL;
  }
  const char **argv = calloc((size_t)nflags + 4, sizeof *argv);
  if (!argv) {
    set_errmsg_text(T, "not enough memory");
    return TPLUA_ENOMEM;
  }
  int argc = 0;
  argv[argc++] = "trace";
  argv[argc++] = trace_path;
  for (int i = 0; i < nflags; i++) {
    argv[argc++] = flags[i];
  }
  argv[argc++] = "--json";
  int code = run_captured(T, argc, argv, json);
  free(argv);
  return code;
}
