// tplua.h: the embedding API of libtplua. A host program creates an engine (a Lua 5.4 state
// with tplua's standard library and C modules), runs files, strings and built-in commands in it
// as the `tplua` binary would, or turns a training log into a run record and a profiler trace
// into its breakdown without writing any Lua. docs/embedding.md is the guide.
//
// Conventions:
// - One engine per thread. An engine may move between threads, but two threads never use one
//   engine at the same time; tplua_interrupt() alone may be called from any thread or from a
//   signal handler. Engines share nothing but what the header of each call below says.
// - Calls that can fail return a status: TPLUA_OK (0) or a TPLUA_E* code; tplua_errmsg() gives
//   the message of the engine's last failure. The tplua_run_* calls return an exit status
//   instead (0..255, as the binary would exit), or a negative TPLUA_E* code when the call
//   could not be made at all. No call exits the process, aborts or lets a Lua error escape.
// - Strings the library hands over are either borrowed (valid until the next call on the
//   same engine, never freed by the host) or owned by the host, which frees them with
//   tplua_free(); each declaration says which.
// - Compiles as C99 and C++; only tplua_* and luaopen_tp* symbols are exported.
#pragma once

#include <stddef.h>
#include <stdio.h>

/// The version of this header: major, minor, patch. The library's own is tplua_version_number().
#define TPLUA_VERSION_MAJOR 0
#define TPLUA_VERSION_MINOR 1
#define TPLUA_VERSION_PATCH 0
/// MAJOR * 10000 + MINOR * 100 + PATCH, e.g. 100 for 0.1.0.
#define TPLUA_VERSION_NUMBER                                                                       \
  (TPLUA_VERSION_MAJOR * 10000 + TPLUA_VERSION_MINOR * 100 + TPLUA_VERSION_PATCH)
#define TPLUA_VERSION_STRING "0.1.0"

#if defined(TPLUA_BUILDING) && defined(__GNUC__)
#define TPLUA_API __attribute__((visibility("default")))
#else
#define TPLUA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct lua_State;

/// An engine: one Lua state with tplua's standard library. Opaque.
typedef struct tplua_engine tplua_engine;

/// Status codes. New codes may be added; a host treats an unknown non-zero code as a failure.
enum {
  TPLUA_OK = 0,
  TPLUA_ERROR = 1,         ///< a Lua error (a script's error, a syntax error); see tplua_errmsg
  TPLUA_EINVAL = 2,        ///< a bad argument: NULL engine or path, a wrong flag of a command
  TPLUA_EFAIL = 3,         ///< the input gave no result (no such file, not a log, no records)
  TPLUA_ENOMEM = 4,        ///< out of memory
  TPLUA_EINTERRUPTED = 5,  ///< stopped by tplua_interrupt()
  TPLUA_EVERSION = 6,      ///< options written for a newer library than this one
  TPLUA_EXIT = 7           ///< Lua code called os.exit() (tplua_pcall: its status on the stack)
};

/// Which stream a line given to the log callback was written to.
enum { TPLUA_STREAM_OUT = 1, TPLUA_STREAM_ERR = 2 };

/// The progress and log callback: receives each line the engine writes to its output or error
/// stream (a run's progress lines, a command's summary, warnings, error reports), without its
/// newline; `line` is borrowed for the duration of the call. It runs on the thread that called
/// into the engine, and must not call back into the same engine.
typedef void (*tplua_log_fn)(void *user, int stream, const char *line, size_t len);

/// Options of tplua_new(). Initialise with tplua_options_init(), then set what you need: fields
/// are only ever added at the end, and `size` tells the library which ones a host knows.
typedef struct tplua_options {
  size_t size;             ///< sizeof(tplua_options) as the host was compiled; set by init
  const char *stdlib_dir;  ///< the directory holding tp/init.lua; NULL: found as the binary
                           ///< finds it ($TPLUA_PATH, beside the installed library, ...)
  FILE *out;               ///< standard output of Lua code (print, io.write); NULL: stdout
  FILE *err;               ///< error stream (io.stderr, error reports); NULL: stderr
  tplua_log_fn log;        ///< NULL: none
  void *log_user;          ///< passed to `log` as is
  int ignore_env;          ///< non-zero: as `tplua -E` (no TPLUA_PATH, LUA_PATH, LUA_CPATH, ...)
  const char *progname;    ///< prefix of error reports, "tplua" when NULL; copied
} tplua_options;

/// Fills `opts` with the defaults and sets opts->size.
TPLUA_API void tplua_options_init(tplua_options *opts);

/// Creates an engine. `opts` may be NULL (all defaults). On success stores it in *out and
/// returns TPLUA_OK; otherwise stores NULL and returns TPLUA_ENOMEM, TPLUA_EINVAL (out or opts
/// malformed) or TPLUA_EVERSION (opts->size larger than this library knows). The caller frees
/// the engine with tplua_close(). The FILEs in opts stay the host's: they must outlive the
/// engine and are never closed by it.
TPLUA_API int tplua_new(tplua_engine **out, const tplua_options *opts);

/// Closes the engine: runs the finalisers of the Lua state, flushes and releases its streams.
/// NULL is accepted. Child processes still supervised by Lua code are killed by their finalisers.
TPLUA_API void tplua_close(tplua_engine *T);

/// The engine's Lua state, for hosts that speak Lua; borrowed, valid until tplua_close().
/// Errors raised outside a protected call follow Lua's rules (use tplua_pcall()).
TPLUA_API struct lua_State *tplua_state(tplua_engine *T);

/// The standard library directory in use (borrowed, valid until tplua_close()).
TPLUA_API const char *tplua_stdlib_dir(const tplua_engine *T);

/// The message of the last failed call on this engine ("" when none); borrowed, valid until the
/// next call on the engine. A Lua error's message carries its traceback.
TPLUA_API const char *tplua_errmsg(const tplua_engine *T);

/// Calls the function on the Lua stack below its `nargs` arguments, as lua_pcall() does, with
/// a traceback added to the error message and tplua_interrupt() armed. Returns TPLUA_OK,
/// TPLUA_ERROR, TPLUA_ENOMEM or TPLUA_EINTERRUPTED, with the error message on the stack (popped
/// by the caller) and in tplua_errmsg(); or TPLUA_EXIT when the code called os.exit(status):
/// in an engine os.exit ends the call, not the process, and the status (an integer) is on the
/// stack where the message would be. TPLUA_EINVAL when fewer than nargs + 1 values are there.
TPLUA_API int tplua_pcall(tplua_engine *T, int nargs, int nresults);

/// Runs the Lua file `path` (NULL: standard input) as `tplua path argv...` would: argv[0..argc-1]
/// are the chunk's `...` and arg[1..argc], path is arg[0] (entries of an existing `arg` at
/// negative indices stay). Returns the exit status: 0, 1 after an error (reported on the error
/// stream as `progname: message` with a traceback), 130 when interrupted, the code of
/// os.exit(code); or a negative TPLUA_E* code when the call could not be made.
TPLUA_API int tplua_run_file(tplua_engine *T, const char *path, int argc, const char *const *argv);

/// Runs the Lua code `code` under the chunk name `chunkname` (NULL: "=(string)"), as
/// `tplua -e code` would. Returns the exit status, as tplua_run_file().
TPLUA_API int tplua_run_string(tplua_engine *T, const char *code, const char *chunkname);

/// Runs the built-in command argv[0] with the arguments argv[1..argc-1], as
/// `tplua COMMAND ARGS...` would (`tplua help` lists them). Returns its exit status (2 for an
/// unknown command or a usage error, as the binary), or a negative TPLUA_E* code.
TPLUA_API int tplua_run_command(tplua_engine *T, int argc, const char *const *argv);

/// Turns the training log `log_path` into its run record (JSON, schema tplua.run/2), the same
/// record `tplua extract LOG --json OUT` writes. `flags` is NULL or a NULL-terminated list of
/// that command's flags (e.g. {"--platform", "nvd", "--gpu", "h100-sxm", NULL}). On success
/// stores the JSON text in *json (the host frees it with tplua_free()) and returns TPLUA_OK;
/// otherwise stores NULL and returns TPLUA_EFAIL (unreadable log, no iteration record),
/// TPLUA_EINVAL (a bad flag), TPLUA_EINTERRUPTED or TPLUA_ERROR, with tplua_errmsg() saying why.
/// Nothing is written to the engine's streams.
TPLUA_API int tplua_extract(tplua_engine *T, const char *log_path, const char *const *flags,
                            char **json);

/// Reads the profiler trace (or directory of traces) `trace_path` and stores its breakdown per
/// step and kernel class in *json: the document `tplua trace PATH --json` prints. `flags` as in
/// tplua_extract() (`--step N`, `--top K`, `--ops`, ...). Returns as tplua_extract().
TPLUA_API int tplua_trace(tplua_engine *T, const char *trace_path, const char *const *flags,
                          char **json);

/// Asks the call running on the engine to stop: Lua code raises the error "interrupted" at its
/// next instruction, and the call returns TPLUA_EINTERRUPTED (exit status 130). When no call is
/// running, the next one stops at its start. Safe from any thread and from a signal handler;
/// a call waiting in the engine's C code (a supervised child process) stops when it returns to
/// Lua, at its next output line or timer tick.
TPLUA_API void tplua_interrupt(tplua_engine *T);

/// The Lua module's entry: `require "tp"` in a Lua 5.4 state of the host's own (register it with
/// luaL_requiref(L, "tp", luaopen_tp, 1), or let Lua's C searcher find tp.so). Sets the state up
/// as an engine's (tp._* modules, the stdlib on package.path) and returns stdlib/tp/init.lua's
/// table; os.exit, print and the streams stay the state's own. Raises on failure.
TPLUA_API int luaopen_tp(struct lua_State *L);

/// Frees a string the library handed over (tplua_extract, tplua_trace). NULL is accepted.
TPLUA_API void tplua_free(void *p);

/// A short description of a status code ("interrupted", ...); static, never NULL.
TPLUA_API const char *tplua_strerror(int code);

/// The library's version as TPLUA_VERSION_NUMBER computes it, and as text ("0.1.0").
TPLUA_API int tplua_version_number(void);
TPLUA_API const char *tplua_version(void);

#ifdef __cplusplus
}
#endif
