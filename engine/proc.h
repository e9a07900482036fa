// Process supervision: spawn by argv into a process group of its own, pipes for stdout/stderr
// teed to log files and split into lines, one poll loop for many children and timers, timeouts,
// group kill, SIGINT/SIGTERM forwarding, parent-death protection and rusage.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "common.h"

/// Longest line handed to the caller in one piece; longer lines arrive in pieces of this size
/// flagged `partial` (every piece but the last).
#define TP_PROC_LINE_MAX ((size_t)1 << 20)

/// Default output coalescing: after a read that did not fill the read buffer, a stream is polled
/// again only this many milliseconds later (signals, exits and timers are not delayed).
#define TP_PROC_COALESCE_MS 10

/// After a forwarded SIGINT, SIGTERM follows this many milliseconds later (or after the child's
/// kill grace when that is shorter) if the leader still runs; SIGKILL follows one grace later.
#define TP_PROC_INTERRUPT_TERM_MS 1000

/// Which output stream of a child a line came from.
typedef enum TpProcStream {
  TP_PROC_STDOUT = 0,
  TP_PROC_STDERR = 1,
} TpProcStream;

// ---------------------------------------------------------------------------------------------
// Line splitting (used by the loop; public so that it can be tested on its own)

/// Splits a byte stream into lines on '\n'. Bytes are kept unchanged (a '\r' before the '\n'
/// stays in the line); the '\n' itself is not part of the line. Memory stays below
/// `max + the largest push`, whatever the input.
typedef struct TpProcLines {
  TpBuf buf;     ///< unconsumed bytes: [start, buf.len)
  size_t start;  ///< first byte not yet handed out
  size_t scan;   ///< bytes before this offset are known to hold no '\n'
  size_t max;    ///< longest piece handed out (0 means TP_PROC_LINE_MAX)
  bool eof;      ///< no more input will come: the rest is handed out as a last line
} TpProcLines;

/// Appends input bytes. @return 0 or TP_ENOMEM.
int tp_proc_lines_push(TpProcLines *ls, const void *data, size_t n);

/// Hands out the next line or piece. `*line` points into the splitter's memory and stays valid
/// until the next push or free. `*partial` is true for a piece of an overlong line that more
/// pieces of the same line follow. After `ls->eof` is set, a last line without '\n' is handed
/// out too. @return true when a line was handed out, false when more input is needed.
bool tp_proc_lines_next(TpProcLines *ls, const char **line, size_t *len, bool *partial);

/// True while complete lines (or, after eof, any bytes) wait to be handed out.
bool tp_proc_lines_pending(const TpProcLines *ls);

/// Frees the splitter's memory and resets it (keeps `max`).
void tp_proc_lines_free(TpProcLines *ls);

// ---------------------------------------------------------------------------------------------
// Loop and processes

typedef struct TpProcLoop TpProcLoop;
typedef struct TpProc TpProc;

/// One change to the child's environment.
typedef struct TpProcEnv {
  const char *name;   ///< variable name (non-empty, no '=')
  const char *value;  ///< new value, or NULL to remove the variable
} TpProcEnv;

/// What to run and how. Zero-initialise, then fill what you need.
typedef struct TpProcOpts {
  const char *const *argv;  ///< NULL-terminated; argv[0] is searched in PATH when it has no '/'
  const TpProcEnv *env;     ///< changes applied in order to the inherited (or empty) environment
  size_t env_count;
  bool clear_env;               ///< start from an empty environment instead of ours
  const char *cwd;              ///< working directory of the child, NULL for ours
  const char *log_path;         ///< tee of stdout (and of stderr unless log_stderr_path), or NULL
  const char *log_stderr_path;  ///< separate tee of stderr, or NULL
  bool log_append;              ///< append to the log files instead of truncating them
  int64_t timeout_ms;     ///< > 0: SIGTERM to the group after this long, SIGKILL after the grace
  int64_t kill_grace_ms;  ///< delay between SIGTERM (or a forwarded SIGTERM) and SIGKILL
  bool want_lines;        ///< split output into lines for on_line (else only tee and capture)
  size_t capture_max;     ///< > 0: keep up to this many bytes of each stream for the result
  void *user;             ///< caller's pointer, returned by tp_proc_user
} TpProcOpts;

/// How a child ended. Filled when its exit event is delivered.
typedef struct TpProcResult {
  int code;    ///< exit status; 128 + signal when killed by a signal; 124 when timed out
  int signal;  ///< terminating signal of the leader, 0 when it exited
  bool core_dumped;
  bool timed_out;        ///< the timeout fired (code is then 124)
  int interrupted;       ///< SIGINT or SIGTERM received by this process and forwarded, else 0
  bool escaped;          ///< after the leader died, a process outside the group kept the output
                         ///< pipes open; they were closed after the grace period
  int stragglers;        ///< live group members killed with SIGKILL when the leader exited
  double wall_s;         ///< from spawn to the leader's exit (monotonic clock)
  struct rusage rusage;  ///< of the leader and the descendants it waited for (wait4)
  int log_error;         ///< 0, or -errno of the first failed write to a log file
  bool capture_truncated[2];  ///< a stream produced more than capture_max bytes
} TpProcResult;

/// Events of tp_proc_loop_run_once. Every callback may be NULL; each returns 0 to go on or
/// non-zero to make the loop return at once (undelivered lines stay queued for the next call).
/// Callbacks run in normal context, never in a signal handler. They may spawn, signal and
/// destroy processes of the loop and add or cancel timers; they must not run or free the loop.
typedef struct TpProcEvents {
  void *ctx;
  /// A line (without '\n') or a piece of an overlong line (`partial`).
  int (*on_line)(void *ctx, TpProc *proc, TpProcStream stream, const char *line, size_t len,
                 bool partial);
  /// The leader was reaped, every member left in its group was killed and has terminated, and
  /// all output was delivered.
  int (*on_exit)(void *ctx, TpProc *proc, const TpProcResult *result);
  /// A timer fired.
  int (*on_timer)(void *ctx, uint64_t timer_id);
} TpProcEvents;

/// Creates an empty loop. Caller frees with tp_proc_loop_free.
/// @return 0 or -errno / TP_ENOMEM (err filled).
int tp_proc_loop_new(TpProcLoop **out, TpError *err);

/// Kills (SIGKILL to the group) and reaps every child still running, then frees the loop and all
/// its processes. Must not be called from one of the loop's callbacks. NULL is accepted.
void tp_proc_loop_free(TpProcLoop *loop);

/// Spawns a child in a new process group (its pid is the group id) with stdin from /dev/null
/// and stdout/stderr on pipes read by the loop. The child gets PR_SET_PDEATHSIG(SIGKILL) and its
/// group is registered with a guard process that kills it if this process dies.
/// @param out receives the process, owned by the loop (tp_proc_destroy releases it early).
/// @return 0, -errno (err: "<argv0>: <reason>", "<log path>: <reason>", "cwd <dir>: <reason>")
///   or TP_EINVAL / TP_ENOMEM.
int tp_proc_spawn(TpProcLoop *loop, const TpProcOpts *opts, TpProc **out, TpError *err);

/// Waits up to `timeout_ms` (< 0: until something happens; 0: no wait) for output, exits,
/// deadlines, timers or signals and delivers what is ready. While it runs, handlers for SIGINT,
/// SIGTERM and SIGCHLD are installed (the previous ones are restored on return). A SIGINT or
/// SIGTERM caught by them, or by another loop's while it ran after this loop was created, is
/// forwarded to every running group of this loop, which then escalates: a forwarded SIGINT is
/// followed by SIGTERM (see TP_PROC_INTERRUPT_TERM_MS) while the leader still runs, and SIGKILL
/// comes one kill grace after the SIGTERM (at once when the grace is 0). A second signal kills
/// at once.
/// @return 0, 1 when a callback asked to stop, or a negative code (err filled), TP_EINVAL when
///   called from one of the loop's own callbacks.
int tp_proc_loop_run_once(TpProcLoop *loop, int64_t timeout_ms, const TpProcEvents *ev,
                          TpError *err);

/// Runs until no child is active (every exit delivered), with the signal handlers installed
/// once for the whole run. Timers alone do not keep it running. @return as run_once.
int tp_proc_loop_run(TpProcLoop *loop, const TpProcEvents *ev, TpError *err);

/// Runs the loop of `proc` until the exit of `proc` is delivered. @return as run_once.
int tp_proc_wait(TpProc *proc, const TpProcEvents *ev, TpError *err);

/// Sets the output coalescing window (0 turns it off: every write of a child wakes the loop).
/// It bounds how late a line can be delivered; the default is TP_PROC_COALESCE_MS.
void tp_proc_loop_set_coalesce(TpProcLoop *loop, int64_t ms);

/// Number of children whose exit has not been delivered yet.
size_t tp_proc_loop_active(const TpProcLoop *loop);

/// The first signal (SIGINT or SIGTERM) this loop forwarded, or 0. Signals caught since the
/// loop's last step are forwarded first, so that from a callback the answer is current.
int tp_proc_loop_interrupted(TpProcLoop *loop);

/// Forwards `sig` (SIGINT or SIGTERM) to every running group with the escalation of a received
/// signal, as if it had been caught; for a signal that reached tplua outside the loop (the
/// host's SIGINT). Does nothing when the loop has already forwarded one.
/// @return 0 or TP_EINVAL (another signal).
int tp_proc_loop_interrupt(TpProcLoop *loop, int sig, TpError *err);

/// The first SIGINT or SIGTERM caught by a loop's handler in this process since start (or the
/// last tp_proc_interrupted_clear), or 0. Async-signal-safe to read.
int tp_proc_interrupted(void);
/// Forgets what tp_proc_interrupted reports (e.g. before a host runs its next chunk).
void tp_proc_interrupted_clear(void);

/// Adds a timer firing after `interval_ms` (>= 1), then every `interval_ms` when `repeat`.
/// Timers due at the same time fire in the order they were added; a late repeating timer fires
/// once and is rescheduled from now (missed ticks are not replayed).
/// @return 0 or TP_EINVAL / TP_ENOMEM; `*id` receives a non-zero id.
int tp_proc_loop_timer_add(TpProcLoop *loop, int64_t interval_ms, bool repeat, uint64_t *id,
                           TpError *err);

/// Cancels a timer. @return true when it existed.
bool tp_proc_loop_timer_cancel(TpProcLoop *loop, uint64_t id);

/// Number of processes the loop holds (running or exited, not destroyed).
size_t tp_proc_loop_size(const TpProcLoop *loop);
/// The i-th process held by the loop (i < tp_proc_loop_size), in spawn order.
TpProc *tp_proc_loop_get(const TpProcLoop *loop, size_t i);

/// Sends `sig` to the process group of a running child (0 checks that it exists).
/// Does nothing for a child whose exit was delivered (its group id may be reused).
/// @return 0 or -errno (err filled).
int tp_proc_signal_group(TpProc *proc, int sig, TpError *err);

/// Sends SIGTERM to the group of a running child, then SIGKILL after `grace_ms` (at once when
/// `grace_ms` <= 0); the loop carries out the second step. @return as tp_proc_signal_group.
int tp_proc_kill_tree(TpProc *proc, int64_t grace_ms, TpError *err);

/// Releases a process: a child still running has its group killed with SIGKILL and is reaped
/// (blocking until the kernel has delivered the signal); pipes and logs are closed. From a
/// callback of the loop the memory is released when the callback returns. NULL is accepted.
void tp_proc_destroy(TpProc *proc);

/// Process id of the child, which is also its process-group id.
pid_t tp_proc_pid(const TpProc *proc);
/// The loop that owns `proc`.
TpProcLoop *tp_proc_loop_of(const TpProc *proc);
/// The `user` pointer given at spawn.
void *tp_proc_user(const TpProc *proc);
/// True once the exit event was delivered.
bool tp_proc_done(const TpProc *proc);
/// The result once the exit event was delivered, else NULL.
const TpProcResult *tp_proc_result(const TpProc *proc);
/// Captured bytes of one stream (see capture_max); `*len` receives their number.
const char *tp_proc_captured(const TpProc *proc, TpProcStream stream, size_t *len);

// ---------------------------------------------------------------------------------------------
// Signals and process groups

/// "SIGINT" for SIGINT, ...; NULL for an unknown number.
const char *tp_proc_signal_name(int sig);
/// Parses "SIGTERM", "TERM" (any case) into a signal number; 0 when unknown.
int tp_proc_signal_number(const char *name);

/// Waits until every process in `pids` has terminated (is a zombie or gone), whoever its parent
/// is, using pidfds (Linux 5.3+); pids already gone count as terminated.
/// @return 0, TP_ETIMEOUT ("N of M processes still alive after T ms") or -errno (err filled).
int tp_proc_wait_gone(const pid_t *pids, size_t n, int64_t timeout_ms, TpError *err);

/// The CPUs this process may run on (sched_getaffinity(2); sysconf(_SC_NPROCESSORS_ONLN) when
/// that fails), at least 1.
int tp_proc_cpu_count(void);

/// Lists the live (not zombie) processes whose process group is `pgid`, by reading
/// /proc/<pid>/stat. Fills up to `cap` pids; `*count` receives the total found.
/// @return 0 or -errno (err filled).
int tp_proc_group_members(pid_t pgid, pid_t *pids, size_t cap, size_t *count, TpError *err);
