// Unit tests of engine/proc: line splitting, spawn, env/cwd, logs, timeouts and group kill,
// signal forwarding, timers, idle CPU and the parent-death guard. Uses tests/tools/fake_trainer.
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "proc.h"

static char g_trainer[4096];
static char g_tmp[256];

// ----------------------------------------------------------------------------------------------
// Helpers

typedef struct Collect {
  int lines[2];     // complete lines per stream (pieces count once, on their last piece)
  int pieces;       // partial pieces seen
  size_t bytes[2];  // bytes handed out per stream
  TpBuf text[2];    // lines joined with '\n' (only when keep_text)
  bool keep_text;
  int exits;
  TpProcResult last;
  int stop_after_lines;  // > 0: ask the loop to stop after this many lines
  int timer_order[16];
  int ntimers;
  uint64_t timer_ids[16];
  uint64_t sigint_timer;
  int64_t timer_ns[16];
  size_t group_seen;  // live members of the group seen at the first line
  bool check_group;
  pid_t first_pid;
} Collect;

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double cpu_self_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int on_line(void *ctx, TpProc *p, TpProcStream s, const char *line, size_t len,
                   bool partial) {
  Collect *c = ctx;
  if (partial) {
    c->pieces++;
  } else {
    c->lines[s]++;
  }
  c->bytes[s] += len;
  if (c->keep_text) {
    tp_buf_append(&c->text[s], line, len);
    if (!partial) {
      tp_buf_append(&c->text[s], "\n", 1);
    }
  }
  if (c->check_group && c->lines[0] + c->lines[1] == 1) {
    pid_t pids[16];
    tp_proc_group_members(tp_proc_pid(p), pids, 16, &c->group_seen, NULL);
  }
  return c->stop_after_lines > 0 && c->lines[0] + c->lines[1] >= c->stop_after_lines;
}

static int on_exit_cb(void *ctx, TpProc *p, const TpProcResult *r) {
  (void)p;
  Collect *c = ctx;
  c->exits++;
  c->last = *r;
  return 0;
}

static int on_timer(void *ctx, uint64_t id) {
  Collect *c = ctx;
  if (id == c->sigint_timer && id != 0) {
    kill(getpid(), SIGINT);
    return 0;
  }
  if (c->ntimers < 16) {
    c->timer_ids[c->ntimers] = id;
    c->timer_ns[c->ntimers] = mono_ns();
    c->ntimers++;
  }
  return 0;
}

static TpProcEvents events(Collect *c) {
  return (TpProcEvents){.ctx = c, .on_line = on_line, .on_exit = on_exit_cb, .on_timer = on_timer};
}

static void collect_free(Collect *c) {
  tp_buf_free(&c->text[0]);
  tp_buf_free(&c->text[1]);
}

// Spawns argv with opts (argv filled in), runs the loop until it exits, returns the result.
static TpProcResult run_argv(const char *const *argv, TpProcOpts o, Collect *c) {
  TpProcLoop *loop = NULL;
  TpError err = {0};
  TpProcResult none = {.code = -1};
  CHECK_INT(tp_proc_loop_new(&loop, &err), 0);
  o.argv = argv;
  o.want_lines = true;
  TpProc *p = NULL;
  int rc = tp_proc_spawn(loop, &o, &p, &err);
  CHECK_INT(rc, 0);
  if (rc != 0) {
    fprintf(stderr, "spawn: %s\n", err.msg);
    tp_proc_loop_free(loop);
    return none;
  }
  c->first_pid = tp_proc_pid(p);
  TpProcEvents ev = events(c);
  CHECK_INT(tp_proc_wait(p, &ev, &err), 0);
  TpProcResult r = *tp_proc_result(p);
  tp_proc_loop_free(loop);
  return r;
}

static size_t live_members(pid_t pgid) {
  pid_t pids[64];
  size_t n = 0;
  TpError err = {0};
  CHECK_INT(tp_proc_group_members(pgid, pids, 64, &n, &err), 0);
  return n;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  TpBuf b = {0};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    tp_buf_append(&b, buf, n);
  }
  fclose(f);
  *len = b.len;
  tp_buf_cstr(&b);
  return b.data;
}

static void write_file(const char *path, const char *data) {
  FILE *f = fopen(path, "wb");
  fputs(data, f);
  fclose(f);
}

// Live members of a group, to wait for them with tp_proc_wait_gone.
static size_t members(pid_t pgid, pid_t *pids, size_t cap) {
  size_t n = 0;
  CHECK_INT(tp_proc_group_members(pgid, pids, cap, &n, NULL), 0);
  return n;
}

// ----------------------------------------------------------------------------------------------
// Line splitter

static void feed(TpProcLines *ls, const char *s, Collect *c) {
  tp_proc_lines_push(ls, s, strlen(s));
  const char *line;
  size_t len;
  bool partial;
  while (tp_proc_lines_next(ls, &line, &len, &partial)) {
    on_line(c, NULL, TP_PROC_STDOUT, line, len, partial);
  }
}

static void test_lines(void) {
  Collect c = {.keep_text = true};
  TpProcLines ls = {0};
  feed(&ls, "ab", &c);
  CHECK_INT(c.lines[0], 0);
  feed(&ls, "c\nde", &c);
  feed(&ls, "f\n\n", &c);
  feed(&ls, "g\r\nh", &c);
  CHECK_INT(c.lines[0], 4);
  CHECK(!tp_proc_lines_pending(&ls));
  ls.eof = true;
  CHECK(tp_proc_lines_pending(&ls));
  feed(&ls, "", &c);
  CHECK_INT(c.lines[0], 5);
  tp_buf_cstr(&c.text[0]);
  CHECK_STR(c.text[0].data, "abc\ndef\n\ng\r\nh\n");
  tp_proc_lines_free(&ls);
  collect_free(&c);

  // Overlong lines come in pieces of `max` bytes; the last piece is not partial.
  Collect d = {.keep_text = true};
  TpProcLines small = {.max = 4};
  feed(&small, "0123", &d);
  CHECK_INT(d.pieces + d.lines[0], 0);  // exactly max bytes: the '\n' may still follow
  feed(&small, "\n0123456789\nabcd", &d);
  CHECK_INT(d.lines[0], 2);
  CHECK_INT(d.pieces, 2);
  feed(&small, "e", &d);
  CHECK_INT(d.pieces, 3);
  small.eof = true;
  feed(&small, "", &d);
  CHECK_INT(d.lines[0], 3);
  tp_buf_cstr(&d.text[0]);
  CHECK_STR(d.text[0].data, "0123\n0123456789\nabcde\n");
  CHECK(small.buf.cap <= 64);  // memory stays bounded
  tp_proc_lines_free(&small);
  collect_free(&d);

  // Byte at a time: same lines.
  Collect e = {.keep_text = true};
  TpProcLines one = {0};
  const char *text = "alpha\nbeta\n\ngamma\n";
  for (const char *q = text; *q; q++) {
    char b[2] = {*q, 0};
    feed(&one, b, &e);
  }
  tp_buf_cstr(&e.text[0]);
  CHECK_STR(e.text[0].data, text);
  CHECK_INT(e.lines[0], 4);
  tp_proc_lines_free(&one);
  collect_free(&e);
}

// ----------------------------------------------------------------------------------------------
// Spawning

static void test_spawn_lines_rusage(void) {
  Collect c = {0};
  const char *argv[] = {g_trainer, "--megatron-gen", "5", "--stderr", NULL};
  TpProcResult r = run_argv(argv, (TpProcOpts){0}, &c);
  CHECK_INT(r.code, 0);
  CHECK_INT(r.signal, 0);
  CHECK_INT(c.lines[0], 13);  // 8 lines of argument dump + 5 iterations
  CHECK_INT(c.lines[1], 13);
  CHECK_INT(c.exits, 1);
  CHECK(r.wall_s > 0 && r.wall_s < 30);
  CHECK(r.rusage.ru_maxrss > 0);
  CHECK(!r.timed_out && !r.escaped && r.stragglers == 0);

  // CPU burnt by the child shows in its rusage.
  Collect d = {0};
  const char *busy[] = {"/bin/sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done", NULL};
  r = run_argv(busy, (TpProcOpts){0}, &d);
  CHECK_INT(r.code, 0);
  double cpu = (double)r.rusage.ru_utime.tv_sec + (double)r.rusage.ru_utime.tv_usec / 1e6;
  CHECK(cpu > 0.01);
}

static void test_exit_status(void) {
  Collect c = {0};
  const char *argv[] = {g_trainer, "--megatron-gen", "2", "--exit-code", "3", NULL};
  TpProcResult r = run_argv(argv, (TpProcOpts){0}, &c);
  CHECK_INT(r.code, 3);
  CHECK_INT(r.signal, 0);

  Collect d = {0};
  const char *crash[] = {g_trainer, "--megatron-gen", "5", "--crash-at", "9", NULL};
  r = run_argv(crash, (TpProcOpts){0}, &d);
  CHECK_INT(r.signal, SIGABRT);
  CHECK_INT(r.code, 128 + SIGABRT);
  CHECK_INT(d.lines[0], 9);  // every line written before the crash is delivered

  // A last line without '\n' is delivered at end of file.
  Collect e = {.keep_text = true};
  const char *printf_argv[] = {"printf", "a\\nb", NULL};
  r = run_argv(printf_argv, (TpProcOpts){0}, &e);
  CHECK_INT(r.code, 0);
  tp_buf_cstr(&e.text[0]);
  CHECK_STR(e.text[0].data, "a\nb\n");
  collect_free(&e);
}

static void test_env_cwd(void) {
  setenv("TP_TEST_INHERITED", "yes", 1);
  setenv("TP_TEST_REMOVED", "no", 1);
  TpProcEnv env[] = {{"TP_TEST_SET", "v=1 2"}, {"TP_TEST_REMOVED", NULL}};
  const char *argv[] = {g_trainer,         "--print-env", "TP_TEST_SET",       "--print-env",
                        "TP_TEST_REMOVED", "--print-env", "TP_TEST_INHERITED", NULL};
  Collect c = {.keep_text = true};
  TpProcResult r = run_argv(argv, (TpProcOpts){.env = env, .env_count = 2}, &c);
  CHECK_INT(r.code, 0);
  tp_buf_cstr(&c.text[0]);
  CHECK_STR(c.text[0].data, "TP_TEST_SET=v=1 2\nTP_TEST_REMOVED is unset\nTP_TEST_INHERITED=yes\n");
  collect_free(&c);

  // clear_env: only what we set; PATH lookup then uses the default path.
  TpProcEnv only[] = {{"ONLY", "1"}};
  Collect d = {.keep_text = true};
  const char *envp_argv[] = {"env", NULL};
  r = run_argv(envp_argv, (TpProcOpts){.env = only, .env_count = 1, .clear_env = true}, &d);
  CHECK_INT(r.code, 0);
  tp_buf_cstr(&d.text[0]);
  CHECK_STR(d.text[0].data, "ONLY=1\n");
  collect_free(&d);

  Collect e = {.keep_text = true};
  const char *pwd[] = {"pwd", NULL};
  r = run_argv(pwd, (TpProcOpts){.cwd = "/"}, &e);
  tp_buf_cstr(&e.text[0]);
  CHECK_STR(e.text[0].data, "/\n");
  collect_free(&e);
}

static void test_spawn_failures(void) {
  TpProcLoop *loop = NULL;
  TpError err = {0};
  CHECK_INT(tp_proc_loop_new(&loop, &err), 0);
  TpProc *p = NULL;
  const char *missing[] = {"tp-no-such-program", NULL};
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = missing}, &p, &err), -ENOENT);
  CHECK_STR(err.msg, "tp-no-such-program: No such file or directory");
  CHECK_STR(tp_error_name(err.code), "ENOENT");
  CHECK(p == NULL);

  const char *abs_missing[] = {"/nonexistent/prog", NULL};
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = abs_missing}, &p, &err), -ENOENT);
  CHECK_STR(err.msg, "/nonexistent/prog: No such file or directory");

  const char *not_exec[] = {"/etc/passwd", NULL};
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = not_exec}, &p, &err), -EACCES);
  CHECK_STR(err.msg, "/etc/passwd: Permission denied");

  const char *ok[] = {"true", NULL};
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = ok, .cwd = "/nonexistent-dir"}, &p, &err),
            -ENOENT);
  CHECK_STR(err.msg, "cwd /nonexistent-dir: No such file or directory");

  // A spawn that fails leaves an existing log untouched and creates none.
  char kept[512], fresh[512];
  snprintf(kept, sizeof kept, "%s/kept.log", g_tmp);
  snprintf(fresh, sizeof fresh, "%s/fresh.log", g_tmp);
  write_file(kept, "previous run\n");
  CHECK_INT(tp_proc_spawn(loop,
                          &(TpProcOpts){.argv = ok,
                                        .cwd = "/nonexistent-dir",
                                        .log_path = kept,
                                        .log_stderr_path = fresh},
                          &p, &err),
            -ENOENT);
  size_t kept_len = 0;
  char *kept_data = read_file(kept, &kept_len);
  CHECK_STR(kept_data, "previous run\n");
  free(kept_data);
  CHECK(access(fresh, F_OK) != 0);

  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = ok, .log_path = "/nonexistent-dir/x.log"}, &p,
                          &err),
            -ENOENT);
  CHECK_STR(err.msg, "/nonexistent-dir/x.log: No such file or directory");

  const char *empty[] = {NULL};
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = empty}, &p, &err), TP_EINVAL);
  TpProcEnv bad[] = {{"A=B", "x"}};
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = ok, .env = bad, .env_count = 1}, &p, &err),
            TP_EINVAL);
  CHECK_INT(tp_proc_loop_size(loop), 0);
  CHECK_INT(tp_proc_loop_active(loop), 0);
  tp_proc_loop_free(loop);
}

static void test_logs_capture(void) {
  char src[512], log[512], log_err[512], log_both[512];
  snprintf(src, sizeof src, "%s/replay.log", g_tmp);
  snprintf(log, sizeof log, "%s/out.log", g_tmp);
  snprintf(log_err, sizeof log_err, "%s/err.log", g_tmp);
  snprintf(log_both, sizeof log_both, "%s/both.log", g_tmp);
  const char *content = "first line\n\xff\x01 binary bytes \r\n\nlast\n";
  write_file(src, content);
  const char *argv[] = {g_trainer, "--file", src, "--stderr", NULL};

  Collect c = {0};
  TpProcResult r = run_argv(
      argv, (TpProcOpts){.log_path = log, .log_stderr_path = log_err, .capture_max = 1 << 20}, &c);
  CHECK_INT(r.code, 0);
  CHECK_INT(r.log_error, 0);
  size_t n = 0;
  char *got = read_file(log, &n);
  CHECK_STR(got, content);
  free(got);
  got = read_file(log_err, &n);
  CHECK_STR(got, content);
  free(got);

  // One log for both streams holds every byte twice; append mode keeps what was there.
  write_file(log_both, "previous\n");
  Collect d = {0};
  r = run_argv(argv, (TpProcOpts){.log_path = log_both, .log_append = true}, &d);
  got = read_file(log_both, &n);
  CHECK_INT(n, strlen("previous\n") + 2 * strlen(content));
  free(got);

  // Capture keeps the exact bytes, up to the limit.
  TpProcLoop *loop = NULL;
  TpError err = {0};
  tp_proc_loop_new(&loop, &err);
  TpProc *p = NULL;
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = argv, .capture_max = 12}, &p, &err), 0);
  TpProcEvents ev = events(&d);
  CHECK_INT(tp_proc_wait(p, &ev, &err), 0);
  const char *cap = tp_proc_captured(p, TP_PROC_STDOUT, &n);
  CHECK_INT(n, 12);
  CHECK(memcmp(cap, content, 12) == 0);
  CHECK(tp_proc_result(p)->capture_truncated[TP_PROC_STDOUT]);
  tp_proc_loop_free(loop);
}

static void test_long_line(void) {
  Collect c = {0};
  const char *argv[] = {g_trainer, "--long-line", "3000000", "--megatron-gen", "1", NULL};
  TpProcResult r = run_argv(argv, (TpProcOpts){0}, &c);
  CHECK_INT(r.code, 0);
  CHECK_INT(c.pieces, 2);        // 1 MiB + 1 MiB flagged partial
  CHECK_INT(c.lines[0], 1 + 9);  // the rest of the long line, then dump and one iteration
  CHECK(c.bytes[0] > 3000000);
}

// ----------------------------------------------------------------------------------------------
// Timeouts, kills, stragglers

static void test_timeout_group_kill(void) {
  // clang-format off
  const char *argv[] = {g_trainer, "--megatron-gen", "3", "--hang-after", "9",
                        "--ignore-sigterm", "--fork-children", "2", NULL};
  // clang-format on
  Collect c = {.check_group = true};
  int64_t t0 = mono_ns();
  TpProcResult r = run_argv(argv, (TpProcOpts){.timeout_ms = 300, .kill_grace_ms = 300}, &c);
  double wall = (double)(mono_ns() - t0) / 1e9;
  CHECK_INT(c.group_seen, 3);  // leader and two children were alive in the group
  CHECK(r.timed_out);
  CHECK_INT(r.code, 124);
  CHECK_INT(r.signal, SIGKILL);  // SIGTERM was ignored: killed after the grace
  CHECK(wall >= 0.6);
  CHECK(r.wall_s >= 0.6 && r.wall_s < 10);
  CHECK_INT(c.lines[0], 9);
  CHECK_INT(r.stragglers, 0);  // they were killed with the group, not left behind
  // The exit event comes only once every member has terminated.
  CHECK_INT(live_members(c.first_pid), 0);
}

static void test_kill_tree_and_signal(void) {
  TpProcLoop *loop = NULL;
  TpError err = {0};
  tp_proc_loop_new(&loop, &err);
  const char *argv[] = {g_trainer, "--megatron-gen", "1", "--hang-after", "9", NULL};
  TpProc *p = NULL;
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = argv, .want_lines = true}, &p, &err), 0);
  Collect c = {.stop_after_lines = 1};
  TpProcEvents ev = events(&c);
  while (c.lines[0] < 1) {
    CHECK(tp_proc_loop_run_once(loop, 5000, &ev, &err) >= 0);
  }
  // The stop left the rest of the chunk queued; it comes with the next calls.
  c.stop_after_lines = 0;
  while (c.lines[0] < 9) {
    CHECK(tp_proc_loop_run_once(loop, 5000, &ev, &err) >= 0);
  }
  CHECK_INT(tp_proc_signal_group(p, 0, &err), 0);
  int64_t t0 = mono_ns();
  CHECK_INT(tp_proc_kill_tree(p, 20000, &err), 0);  // SIGTERM suffices: no wait for SIGKILL
  CHECK_INT(tp_proc_wait(p, &ev, &err), 0);
  CHECK((double)(mono_ns() - t0) / 1e9 < 10);
  const TpProcResult *r = tp_proc_result(p);
  CHECK_INT(r->signal, SIGTERM);
  CHECK_INT(r->code, 128 + SIGTERM);
  CHECK_INT(c.lines[0], 9);
  // Signalling a finished process is a no-op, never a stale pgid.
  CHECK_INT(tp_proc_signal_group(p, SIGKILL, &err), 0);
  tp_proc_loop_free(loop);
}

static void test_stragglers_and_escape(void) {
  // The leader exits normally; its children still in the group are killed.
  const char *argv[] = {g_trainer, "--megatron-gen", "1", "--fork-children", "2", NULL};
  Collect c = {0};
  TpProcResult r = run_argv(argv, (TpProcOpts){.kill_grace_ms = 100}, &c);
  CHECK_INT(r.code, 0);
  CHECK_INT(r.stragglers, 2);
  CHECK(!r.escaped);
  CHECK_INT(live_members(c.first_pid), 0);

  // A process that left the group and holds the pipe: the exit comes after the grace anyway.
  Collect d = {.keep_text = true};
  const char *esc[] = {g_trainer, "--escape", "--megatron-gen", "1", NULL};
  int64_t t0 = mono_ns();
  r = run_argv(esc, (TpProcOpts){.kill_grace_ms = 100}, &d);
  CHECK_INT(r.code, 0);
  CHECK(r.escaped);
  CHECK_INT(r.stragglers, 0);
  CHECK((double)(mono_ns() - t0) / 1e9 >= 0.9);
  CHECK_INT(d.lines[0], 10);
  tp_buf_cstr(&d.text[0]);
  const char *at = d.text[0].data ? strstr(d.text[0].data, "escaped ") : NULL;
  long escaped = at ? strtol(at + 8, NULL, 10) : 0;
  CHECK(escaped > 1);
  if (escaped > 1) {
    pid_t e = (pid_t)escaped;
    kill(e, SIGKILL);
    CHECK_INT(tp_proc_wait_gone(&e, 1, 10000, NULL), 0);
  }
  collect_free(&d);
}

static void test_destroy_running(void) {
  TpProcLoop *loop = NULL;
  TpError err = {0};
  tp_proc_loop_new(&loop, &err);
  // clang-format off
  const char *argv[] = {g_trainer, "--megatron-gen", "1", "--hang-after", "1",
                        "--ignore-sigterm", "--fork-children", "1", NULL};
  // clang-format on
  TpProc *p = NULL;
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = argv, .want_lines = true}, &p, &err), 0);
  pid_t pid = tp_proc_pid(p);
  Collect c = {.stop_after_lines = 1};  // the first line comes after the fork
  TpProcEvents ev = events(&c);
  while (c.lines[0] < 1) {
    CHECK(tp_proc_loop_run_once(loop, 5000, &ev, &err) >= 0);
  }
  pid_t pids[8];
  size_t n = members(pid, pids, 8);
  CHECK_INT(n, 2);
  CHECK_INT(tp_proc_loop_size(loop), 1);
  CHECK_INT(tp_proc_loop_active(loop), 1);
  tp_proc_destroy(p);
  CHECK_INT(tp_proc_loop_size(loop), 0);
  CHECK_INT(tp_proc_loop_active(loop), 0);
  CHECK(kill(pid, 0) != 0);  // the leader was reaped before destroy returned
  CHECK_INT(tp_proc_wait_gone(pids, n, 10000, &err), 0);  // its child got SIGKILL too
  CHECK_INT(live_members(pid), 0);
  tp_proc_loop_free(loop);
}

// ----------------------------------------------------------------------------------------------
// Many children, timers, idle CPU

static void test_many_children(void) {
  enum { N = 16 };
  TpProcLoop *loop = NULL;
  TpError err = {0};
  tp_proc_loop_new(&loop, &err);
  Collect c = {0};
  for (int i = 0; i < N; i++) {
    const char *argv[] = {g_trainer, "--megatron-gen", "50", "--interval", "1", "--stderr", NULL};
    TpProc *p = NULL;
    CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = argv, .want_lines = true}, &p, &err), 0);
  }
  CHECK_INT(tp_proc_loop_active(loop), N);
  TpProcEvents ev = events(&c);
  CHECK_INT(tp_proc_loop_run(loop, &ev, &err), 0);
  CHECK_INT(c.exits, N);
  CHECK_INT(c.lines[0], N * 58);
  CHECK_INT(c.lines[1], N * 58);
  CHECK_INT(tp_proc_loop_active(loop), 0);
  CHECK_INT(tp_proc_loop_size(loop), N);
  CHECK_INT(tp_proc_loop_run_once(loop, -1, &ev, &err), 0);  // nothing left: returns at once
  for (size_t i = 0; i < N; i++) {
    CHECK_INT(tp_proc_result(tp_proc_loop_get(loop, i))->code, 0);
  }
  tp_proc_loop_free(loop);
}

static void test_timers(void) {
  TpProcLoop *loop = NULL;
  TpError err = {0};
  tp_proc_loop_new(&loop, &err);
  uint64_t t30, t10, t20, rep, gone;
  CHECK_INT(tp_proc_loop_timer_add(loop, 30, false, &t30, &err), 0);
  CHECK_INT(tp_proc_loop_timer_add(loop, 10, false, &t10, &err), 0);
  CHECK_INT(tp_proc_loop_timer_add(loop, 20, false, &t20, &err), 0);
  CHECK_INT(tp_proc_loop_timer_add(loop, 15, false, &gone, &err), 0);
  CHECK(tp_proc_loop_timer_cancel(loop, gone));
  CHECK(!tp_proc_loop_timer_cancel(loop, gone));
  CHECK_INT(tp_proc_loop_timer_add(loop, 0, false, &rep, &err), TP_EINVAL);
  Collect c = {0};
  TpProcEvents ev = events(&c);
  int64_t t0 = mono_ns();
  while (c.ntimers < 3) {
    CHECK_INT(tp_proc_loop_run_once(loop, -1, &ev, &err), 0);
  }
  CHECK_INT(c.ntimers, 3);
  CHECK_INT(c.timer_ids[0], t10);
  CHECK_INT(c.timer_ids[1], t20);
  CHECK_INT(c.timer_ids[2], t30);
  CHECK(c.timer_ns[0] - t0 >= 10 * 1000000);
  CHECK(c.timer_ns[2] - t0 >= 30 * 1000000);
  // One-shot timers are gone: with nothing left, run_once returns at once.
  CHECK_INT(tp_proc_loop_run_once(loop, -1, &ev, &err), 0);
  CHECK_INT(c.ntimers, 3);

  // A repeating timer keeps its schedule (tick k not before start + k * interval), whatever the
  // lateness of earlier ticks.
  int64_t t_rep = mono_ns();
  CHECK_INT(tp_proc_loop_timer_add(loop, 5, true, &rep, &err), 0);
  while (c.ntimers < 7) {
    CHECK_INT(tp_proc_loop_run_once(loop, -1, &ev, &err), 0);
  }
  for (int i = 3; i < 7; i++) {
    CHECK_INT(c.timer_ids[i], rep);
    CHECK(c.timer_ns[i] - t_rep >= (i - 2) * 5 * 1000000);
  }
  CHECK(tp_proc_loop_timer_cancel(loop, rep));
  tp_proc_loop_free(loop);
}

typedef struct Batches {
  int64_t last_ns;
  int n;
  int64_t min_gap_ns;
} Batches;

// Counts groups of lines delivered together (less than 2 ms apart) and the smallest gap between.
static int batch_line(void *ctx, TpProc *p, TpProcStream s, const char *line, size_t len,
                      bool partial) {
  (void)p, (void)s, (void)line, (void)len, (void)partial;
  Batches *b = ctx;
  int64_t t = mono_ns();
  if (b->n == 0 || t - b->last_ns > 2000000) {
    if (b->n > 0 && (b->min_gap_ns == 0 || t - b->last_ns < b->min_gap_ns)) {
      b->min_gap_ns = t - b->last_ns;
    }
    b->n++;
  }
  b->last_ns = t;
  return 0;
}

static Batches run_batches(int64_t coalesce_ms) {
  TpProcLoop *loop = NULL;
  TpError err = {0};
  tp_proc_loop_new(&loop, &err);
  tp_proc_loop_set_coalesce(loop, coalesce_ms);
  const char *argv[] = {g_trainer, "--megatron-gen", "20", "--interval", "10", NULL};
  TpProc *p = NULL;
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = argv, .want_lines = true}, &p, &err), 0);
  Batches b = {0};
  TpProcEvents ev = {.ctx = &b, .on_line = batch_line};
  CHECK_INT(tp_proc_wait(p, &ev, &err), 0);
  tp_proc_loop_free(loop);
  return b;
}

static void test_coalescing(void) {
  // A line every 10 ms for ~0.28 s: with a 50 ms window, lines come in few batches, at least
  // 50 ms apart; without coalescing, nearly one wake-up per line.
  Batches slow = run_batches(50);
  CHECK(slow.n >= 2 && slow.n <= 12);
  CHECK(slow.min_gap_ns >= 45 * 1000000);
  Batches each = run_batches(0);
  printf("coalescing: %d batches (min gap %.1f ms) with 50 ms, %d without\n", slow.n,
         (double)slow.min_gap_ns / 1e6, each.n);
  CHECK(each.n >= 10);
}

static void test_idle_cpu(void) {
  // The child prints its first lines, then stays silent until the 1 s timeout.
  TpProcLoop *loop = NULL;
  TpError err = {0};
  tp_proc_loop_new(&loop, &err);
  const char *argv[] = {g_trainer, "--megatron-gen", "1", "--hang-after", "9", NULL};
  TpProc *p = NULL;
  uint64_t id;
  CHECK_INT(tp_proc_loop_timer_add(loop, 250, true, &id, &err), 0);  // a telemetry-like tick
  CHECK_INT(tp_proc_spawn(loop, &(TpProcOpts){.argv = argv, .want_lines = true, .timeout_ms = 1000},
                          &p, &err),
            0);
  Collect c = {0};
  TpProcEvents ev = events(&c);
  double cpu0 = cpu_self_s();
  int64_t t0 = mono_ns();
  CHECK_INT(tp_proc_wait(p, &ev, &err), 0);
  double wall = (double)(mono_ns() - t0) / 1e9;
  double cpu = cpu_self_s() - cpu0;
  CHECK(wall >= 0.9);
  CHECK_INT(c.lines[0], 9);
  CHECK(c.ntimers >= 3);
  CHECK(tp_proc_result(p)->timed_out);
  printf("idle wait: %.3f s wall, %.6f s CPU of this process (%.3f%%)\n", wall, cpu,
         100 * cpu / wall);
  CHECK(cpu < 0.02);
  tp_proc_loop_free(loop);
}

// ----------------------------------------------------------------------------------------------
// Signals

static void marker_handler(int sig) {
  (void)sig;
}

static void test_interrupt_forwarding(void) {
  struct sigaction mine = {.sa_handler = marker_handler}, old, now;
  sigemptyset(&mine.sa_mask);
  sigaction(SIGINT, &mine, &old);

  TpProcLoop *loop = NULL;
  TpError err = {0};
  tp_proc_loop_new(&loop, &err);
  // clang-format off
  const char *argv[] = {g_trainer, "--megatron-gen", "1", "--hang-after", "9",
                        "--ignore-sigterm", "--fork-children", "2", NULL};
  // clang-format on
  TpProc *p = NULL;
  CHECK_INT(tp_proc_spawn(loop,
                          &(TpProcOpts){.argv = argv, .kill_grace_ms = 200, .want_lines = true}, &p,
                          &err),
            0);
  pid_t pgid = tp_proc_pid(p);
  Collect c = {0};
  CHECK_INT(tp_proc_loop_timer_add(loop, 100, false, &c.sigint_timer, &err), 0);
  TpProcEvents ev = events(&c);
  CHECK_INT(tp_proc_loop_run(loop, &ev, &err), 0);
  CHECK_INT(tp_proc_loop_interrupted(loop), SIGINT);
  const TpProcResult *r = tp_proc_result(p);
  CHECK_INT(r->interrupted, SIGINT);
  CHECK_INT(r->signal, SIGKILL);  // SIGINT was ignored: killed after the grace
  CHECK(!r->timed_out);
  CHECK_INT(live_members(pgid), 0);
  // Our handler is back in place after the loop.
  sigaction(SIGINT, NULL, &now);
  CHECK(now.sa_handler == marker_handler);
  sigaction(SIGINT, &old, NULL);
  tp_proc_loop_free(loop);
}

// A supervisor killed with SIGKILL: the leader dies by PR_SET_PDEATHSIG, the rest of its group
// by the guard process.
static void test_parent_death(void) {
  int report[2];
  CHECK_INT(pipe(report), 0);
  pid_t sup = fork();
  if (sup == 0) {
    close(report[0]);
    TpProcLoop *loop = NULL;
    TpError err = {0};
    if (tp_proc_loop_new(&loop, &err) != 0) {
      _exit(1);
    }
    // clang-format off
    const char *argv[] = {g_trainer, "--megatron-gen", "1", "--hang-after", "1",
                          "--ignore-sigterm", "--fork-children", "2", NULL};
    // clang-format on
    TpProc *p = NULL;
    if (tp_proc_spawn(loop, &(TpProcOpts){.argv = argv, .want_lines = true}, &p, &err) != 0) {
      _exit(1);
    }
    Collect c = {.stop_after_lines = 1};
    TpProcEvents ev = events(&c);
    while (c.lines[0] < 1) {
      tp_proc_loop_run_once(loop, -1, &ev, &err);
    }
    pid_t pid = tp_proc_pid(p);
    ssize_t w = write(report[1], &pid, sizeof pid);
    (void)w;
    for (;;) {
      pause();  // killed by the test
    }
  }
  close(report[1]);
  pid_t trainer = 0;
  CHECK_INT(read(report[0], &trainer, sizeof trainer), (ssize_t)sizeof trainer);
  close(report[0]);
  pid_t pids[8];
  size_t n = members(trainer, pids, 8);
  CHECK_INT(n, 3);
  kill(sup, SIGKILL);
  int st;
  CHECK_INT(waitpid(sup, &st, 0), sup);
  TpError err = {0};
  CHECK_INT(tp_proc_wait_gone(pids, n, 10000, &err), 0);
  CHECK_INT(live_members(trainer), 0);

  // wait_gone itself: a live process makes it time out.
  pid_t sleeper = fork();
  if (sleeper == 0) {
    for (;;) {
      pause();
    }
  }
  CHECK_INT(tp_proc_wait_gone(&sleeper, 1, 50, &err), TP_ETIMEOUT);
  CHECK_STR(err.msg, "1 of 1 processes still alive after 50 ms");
  kill(sleeper, SIGKILL);
  CHECK_INT(tp_proc_wait_gone(&sleeper, 1, 10000, &err), 0);
  waitpid(sleeper, &st, 0);
}

static void test_signal_names(void) {
  CHECK_STR(tp_proc_signal_name(SIGINT), "SIGINT");
  CHECK_STR(tp_proc_signal_name(SIGKILL), "SIGKILL");
  CHECK(tp_proc_signal_name(0) == NULL);
  CHECK_INT(tp_proc_signal_number("SIGTERM"), SIGTERM);
  CHECK_INT(tp_proc_signal_number("term"), SIGTERM);
  CHECK_INT(tp_proc_signal_number("SIGNOPE"), 0);
}

int main(void) {
  const char *build = getenv("TPLUA_BUILD_DIR");
  snprintf(g_trainer, sizeof g_trainer, "%s/tests/tools/fake_trainer", build ? build : "build");
  if (access(g_trainer, X_OK) != 0) {
    fprintf(stderr, "test_proc: %s: not built (cmake --build <dir> --target fake_trainer)\n",
            g_trainer);
    return 1;
  }
  const char *tmpdir = getenv("TMPDIR");
  snprintf(g_tmp, sizeof g_tmp, "%s/tplua-proc.XXXXXX", tmpdir ? tmpdir : "/tmp");
  if (!mkdtemp(g_tmp)) {
    perror("mkdtemp");
    return 1;
  }
  test_lines();
  test_signal_names();
  test_spawn_lines_rusage();
  test_exit_status();
  test_env_cwd();
  test_spawn_failures();
  test_logs_capture();
  test_long_line();
  test_timeout_group_kill();
  test_kill_tree_and_signal();
  test_stragglers_and_escape();
  test_destroy_running();
  test_many_children();
  test_timers();
  test_coalescing();
  test_idle_cpu();
  test_interrupt_forwarding();
  test_parent_death();
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
  if (system(cmd) != 0) {
    fprintf(stderr, "test_proc: could not remove %s\n", g_tmp);
  }
  return CHECK_DONE();
}
