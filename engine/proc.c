// Process supervision: fork+exec into a new process group, pipes polled by one loop with timers,
// line splitting, tee to logs, timeouts and group kill, signal forwarding, and a guard process
// that kills the registered groups when this process dies.
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum {
  READ_CHUNK = 64 * 1024,  // one read per ready pipe per loop step
  GUARD_MAX = 4096,        // groups the guard process can hold at once
  ABANDON_MIN_MS = 1000,   // least time given to output pipes after the leader died
  MEMBERS_MAX = 256,       // group members waited for after the leader died
};

// ---------------------------------------------------------------------------------------------
// Line splitting

int tp_proc_lines_push(TpProcLines *ls, const void *data, size_t n) {
  if (ls->start > 0) {
    size_t rest = ls->buf.len - ls->start;
    memmove(ls->buf.data, ls->buf.data + ls->start, rest);
    ls->buf.len = rest;
    ls->scan = ls->scan > ls->start ? ls->scan - ls->start : 0;
    ls->start = 0;
  }
  return tp_buf_append(&ls->buf, data, n);
}

static size_t lines_max(const TpProcLines *ls) {
  return ls->max ? ls->max : TP_PROC_LINE_MAX;
}

bool tp_proc_lines_next(TpProcLines *ls, const char **line, size_t *len, bool *partial) {
  size_t avail = ls->buf.len - ls->start;
  if (avail == 0) {
    return false;
  }
  size_t max = lines_max(ls);
  char *base = ls->buf.data + ls->start;
  if (ls->scan < ls->start) {
    ls->scan = ls->start;
  }
  // A newline further than max bytes away cannot end this piece: search no further.
  size_t limit = avail <= max ? avail : max + 1;
  size_t from = ls->scan - ls->start;
  char *nl = from < limit ? memchr(base + from, '\n', limit - from) : NULL;
  if (nl) {
    *line = base;
    *len = (size_t)(nl - base);
    *partial = false;
    ls->start += *len + 1;
    ls->scan = ls->start;
    return true;
  }
  ls->scan = ls->start + limit;
  if (avail > max) {
    *line = base;
    *len = max;
    *partial = true;
    ls->start += max;
    return true;
  }
  if (ls->eof) {
    *line = base;
    *len = avail;
    *partial = false;
    ls->start = ls->buf.len;
    ls->scan = ls->start;
    return true;
  }
  return false;
}

bool tp_proc_lines_pending(const TpProcLines *ls) {
  size_t avail = ls->buf.len - ls->start;
  if (avail == 0) {
    return false;
  }
  if (ls->eof || avail > lines_max(ls)) {
    return true;
  }
  size_t from = ls->scan > ls->start ? ls->scan : ls->start;
  return from < ls->buf.len && memchr(ls->buf.data + from, '\n', ls->buf.len - from) != NULL;
}

void tp_proc_lines_free(TpProcLines *ls) {
  tp_buf_free(&ls->buf);
  ls->start = 0;
  ls->scan = 0;
  ls->eof = false;
}

// ---------------------------------------------------------------------------------------------
// Types

typedef struct Timer {
  uint64_t id;
  int64_t due_ns;
  int64_t interval_ns;
  bool repeat;
  bool dead;
} Timer;

struct TpProc {
  TpProcLoop *loop;
  pid_t pid;
  int fd[2];      // read ends of the stdout/stderr pipes, -1 once closed
  int log_fd[2];  // tee targets, -1 when none; equal when both streams share one file
  int *pidfds;    // group members still dying after the leader's exit (-1: gone)
  size_t npidfds;
  TpProcLines lines[2];
  TpBuf capture[2];
  size_t capture_max;
  bool want_lines;
  int64_t start_ns;
  int64_t grace_ns;
  int64_t deadline_ns;       // timeout, 0 when none or already fired
  int64_t term_at_ns;        // pending SIGTERM after a forwarded SIGINT, 0 when none
  int64_t kill_at_ns;        // pending SIGKILL of the group, 0 when none
  int64_t abandon_at_ns;     // when to stop waiting for pipes held outside the group, 0 when none
  int64_t rest_until_ns[2];  // a stream is not polled before this (output coalescing)
  bool reaped;               // the leader was waited for
  bool done;                 // the exit event was delivered
  bool destroyed;            // released by the caller; memory freed when the loop is idle
  bool guarded;              // registered with the guard process
  bool group_killed;         // SIGKILL was sent to the group
  TpProcResult res;
  void *user;
};

struct TpProcLoop {
  TpProc **procs;
  size_t nprocs, capprocs;
  size_t active;  // spawned, not destroyed, exit not delivered
  Timer *timers;
  size_t ntimers, captimers;
  uint64_t next_timer_id;
  struct pollfd *pfds;
  TpProc **pfd_proc;
  int *pfd_kind;  // 0/1: stdout/stderr; k >= 2: pidfds[k - 2]
  size_t cappfds;
  char *scratch;
  int64_t coalesce_ns;
  int depth;  // > 0 while running (callbacks may be on the stack)
  bool destroyed_pending;
  bool reap_needed;
  // Signal counts already handled by this loop: taken at creation, so that a signal caught while
  // another loop ran (a tp.proc.run inside a callback, say) is forwarded by this one too.
  sig_atomic_t seen_int, seen_term;
  int interrupted;
  int interrupt_count;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t ms_to_ns(int64_t ms) {
  if (ms > INT64_MAX / 1000000) {
    return INT64_MAX / 2;
  }
  return ms * 1000000;
}

static void close_fd(int *fd) {
  if (*fd >= 0) {
    close(*fd);
    *fd = -1;
  }
}

// ---------------------------------------------------------------------------------------------
// Signals: the handler only counts and writes one byte to a self-pipe (the one piece of global
// state besides the guard, as STYLE.md allows for signal targets). Callbacks never run in it.
// The state is the process's, shared by the loops of every thread: the counters are lock-free
// atomics (safe in the handler); the pipe, the installed handlers and the guard change under
// g_signals_lock. The handlers are installed while at least one loop runs, in any thread.

static const int k_loop_signals[3] = {SIGCHLD, SIGINT, SIGTERM};
static pthread_mutex_t g_signals_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_sigpipe[2] = {-1, -1};
static _Atomic int g_sigint_count;
static _Atomic int g_sigterm_count;
static _Atomic int g_first_interrupt;  // see tp_proc_interrupted
static int g_loops_running;            // loops with the handlers installed (under the lock)
static struct sigaction g_saved[3];    // the handlers they replaced

static void on_signal(int sig) {
  int saved = errno;
  if (sig == SIGINT) {
    g_sigint_count++;
  } else if (sig == SIGTERM) {
    g_sigterm_count++;
  }
  if ((sig == SIGINT || sig == SIGTERM) && !g_first_interrupt) {
    g_first_interrupt = sig;
  }
  unsigned char b = (unsigned char)sig;
  ssize_t r = write(g_sigpipe[1], &b, 1);  // a full pipe already guarantees a wake-up
  (void)r;
  errno = saved;
}

static int sigpipe_init(TpError *err) {
  pthread_mutex_lock(&g_signals_lock);
  int rc = 0;
  if (g_sigpipe[0] < 0) {
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
      rc = tp_error_errno(err, "proc loop: self-pipe");
    } else {
      g_sigpipe[1] = p[1];
      g_sigpipe[0] = p[0];
    }
  }
  pthread_mutex_unlock(&g_signals_lock);
  return rc;
}

static void signals_install(TpProcLoop *loop) {
  pthread_mutex_lock(&g_signals_lock);
  if (g_loops_running++ == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < 3; i++) {
      sigaddset(&sa.sa_mask, k_loop_signals[i]);
    }
    for (size_t i = 0; i < 3; i++) {
      sigaction(k_loop_signals[i], &sa, &g_saved[i]);
    }
  }
  pthread_mutex_unlock(&g_signals_lock);
  loop->reap_needed = true;  // a child may have exited while our handler was not installed
}

static void signals_restore(TpProcLoop *loop) {
  (void)loop;
  pthread_mutex_lock(&g_signals_lock);
  if (--g_loops_running == 0) {
    for (size_t i = 0; i < 3; i++) {
      sigaction(k_loop_signals[i], &g_saved[i], NULL);
    }
  }
  pthread_mutex_unlock(&g_signals_lock);
}

static void sigpipe_drain(TpProcLoop *loop) {
  unsigned char buf[64];
  for (;;) {
    ssize_t n = read(g_sigpipe[0], buf, sizeof buf);
    if (n <= 0) {
      break;
    }
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == SIGCHLD) {
        loop->reap_needed = true;
      }
    }
  }
}

static const struct {
  int sig;
  const char *name;
} k_signal_names[] = {
    {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},   {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"},     {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},     {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"},     {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"},   {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},   {SIGCHLD, "SIGCHLD"},
    {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},   {SIGTTIN, "SIGTTIN"},
    {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"},   {SIGXFSZ, "SIGXFSZ"},
    {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},
    {SIGPWR, "SIGPWR"},       {SIGSYS, "SIGSYS"},
};

const char *tp_proc_signal_name(int sig) {
  for (size_t i = 0; i < sizeof k_signal_names / sizeof k_signal_names[0]; i++) {
    if (k_signal_names[i].sig == sig) {
      return k_signal_names[i].name;
    }
  }
  return NULL;
}

int tp_proc_signal_number(const char *name) {
  if (!name) {
    return 0;
  }
  for (size_t i = 0; i < sizeof k_signal_names / sizeof k_signal_names[0]; i++) {
    const char *full = k_signal_names[i].name;
    if (strcasecmp(name, full) == 0 || strcasecmp(name, full + 3) == 0) {
      return k_signal_names[i].sig;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Guard: one helper process per supervising process, forked on first spawn. It reads 32-bit
// records from a socket (+pgid when a group starts, -pgid when it is gone); when the socket
// reaches end-of-file, i.e. when this process has exited or was killed, it sends SIGKILL to
// every group still registered and exits. PR_SET_PDEATHSIG covers only each group's leader;
// the guard covers the rest of the group (e.g. workers of a launcher killed with it).

static int g_guard_fd = -1;
static pid_t g_guard_pid = -1;
static pid_t g_guard_owner = -1;

// Runs in the forked guard: async-signal-safe calls only (the parent may have threads).
static _Noreturn void guard_main(int sock) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; s++) {
    sigaction(s, &sa, NULL);
  }
  // Survive terminal hang-up and job-control signals aimed at the session: the guard must
  // outlive its parent by the time it takes to clean up.
  sa.sa_handler = SIG_IGN;
  const int ignored[] = {SIGINT, SIGQUIT, SIGHUP, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU};
  for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
    sigaction(ignored[i], &sa, NULL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setpgid(0, 0);
  // Keep only the socket (moved high) and /dev/null on 0-2, so that the guard never holds a
  // pipe or terminal of the parent open.
  int fd = fcntl(sock, F_DUPFD, 100);
  if (fd < 0) {
    fd = sock;
  }
  for (int i = 0; i < 3; i++) {
    close(i);
  }
  if (close_range(3, (unsigned)fd - 1, 0) != 0 || close_range((unsigned)fd + 1, ~0U, 0) != 0) {
    for (int i = 3; i < 1024; i++) {
      if (i != fd) {
        close(i);
      }
    }
  }
  int nul = open("/dev/null", O_RDWR);
  if (nul >= 0) {
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(nul, 2);
    if (nul > 2) {
      close(nul);
    }
  }
  if (chdir("/") != 0) {
    // stay where we are; nothing depends on it
  }
  pid_t groups[GUARD_MAX];
  size_t n = 0;
  unsigned char rec[4];
  size_t have = 0;
  for (;;) {
    unsigned char buf[256];
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      break;
    }
    for (ssize_t i = 0; i < r; i++) {
      rec[have++] = buf[i];
      if (have < sizeof rec) {
        continue;
      }
      have = 0;
      int32_t v;
      memcpy(&v, rec, sizeof v);
      if (v > 0 && n < GUARD_MAX) {
        groups[n++] = (pid_t)v;
      } else if (v < 0) {
        for (size_t k = 0; k < n; k++) {
          if (groups[k] == (pid_t)-v) {
            groups[k] = groups[--n];
            break;
          }
        }
      }
    }
  }
  for (size_t k = 0; k < n; k++) {
    kill(-groups[k], SIGKILL);
  }
  _exit(0);
}

static void guard_drop(void) {
  close_fd(&g_guard_fd);
  if (g_guard_pid > 0 && g_guard_owner == getpid()) {
    waitpid(g_guard_pid, NULL, WNOHANG);  // reap it if it died; it exits on EOF otherwise
  }
  g_guard_pid = -1;
  g_guard_owner = -1;
}

static int guard_start_locked(TpError *err) {
  if (g_guard_fd >= 0 && g_guard_owner == getpid()) {
    return 0;
  }
  if (g_guard_fd >= 0) {
    // Inherited through a fork without exec: that guard watches our parent, not us.
    close_fd(&g_guard_fd);
    g_guard_pid = -1;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return tp_error_errno(err, "proc guard: socketpair");
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    guard_main(sv[1]);
  }
  int saved = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    errno = saved;
    return tp_error_errno(err, "proc guard: fork");
  }
  g_guard_fd = sv[0];
  g_guard_pid = pid;
  g_guard_owner = getpid();
  return 0;
}

static int guard_start(TpError *err) {
  pthread_mutex_lock(&g_signals_lock);
  int rc = guard_start_locked(err);
  pthread_mutex_unlock(&g_signals_lock);
  return rc;
}

static bool guard_send(int32_t v) {
  pthread_mutex_lock(&g_signals_lock);
  bool ok = g_guard_fd >= 0 && g_guard_owner == getpid();
  if (ok) {
    ssize_t r;
    do {
      r = send(g_guard_fd, &v, sizeof v, MSG_NOSIGNAL);
    } while (r < 0 && errno == EINTR);
    if (r != (ssize_t)sizeof v) {
      guard_drop();  // the guard died: the next spawn starts a new one
      ok = false;
    }
  }
  pthread_mutex_unlock(&g_signals_lock);
  return ok;
}

static void guard_unregister(TpProc *p) {
  if (p->guarded) {
    p->guarded = false;
    guard_send(-(int32_t)p->pid);
  }
}

// ---------------------------------------------------------------------------------------------
// Process groups

int tp_proc_cpu_count(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) {
      return n;
    }
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 && n < 1 << 20 ? (int)n : 1;
}

int tp_proc_group_members(pid_t pgid, pid_t *pids, size_t cap, size_t *count, TpError *err) {
  *count = 0;
  DIR *d = opendir("/proc");
  if (!d) {
    return tp_error_errno(err, "/proc");
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *s = e->d_name;
    if (*s < '1' || *s > '9' || strspn(s, "0123456789") != strlen(s)) {
      continue;
    }
    long pid = strtol(s, NULL, 10);
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      continue;  // exited meanwhile
    }
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
      continue;
    }
    buf[n] = '\0';
    // Format of /proc/<pid>/stat: "pid (comm) state ppid pgrp ...", from torvalds/linux
    // fs/proc/array.c, do_task_stat. comm may hold spaces and ')': search the last ')'.
    char *rp = strrchr(buf, ')');
    char state;
    int ppid, pgrp;
    if (!rp || sscanf(rp + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) {
      continue;
    }
    if (pgrp != pgid || state == 'Z' || state == 'X' || state == 'x') {
      continue;
    }
    if (*count < cap) {
      pids[*count] = (pid_t)pid;
    }
    (*count)++;
  }
  closedir(d);
  return 0;
}

// Opens pidfds (pidfd_open(2), Linux 5.3) for the live members of group `pgid`; a pidfd becomes
// readable once its process has terminated (zombie or gone). Returns the count opened.
static size_t open_member_pidfds(pid_t pgid, int *fds, size_t cap) {
  pid_t pids[MEMBERS_MAX];
  size_t n = 0, k = 0;
  if (tp_proc_group_members(pgid, pids, MEMBERS_MAX, &n, NULL) != 0) {
    return 0;
  }
  for (size_t i = 0; i < n && i < MEMBERS_MAX && k < cap; i++) {
    int fd = pidfd_open(pids[i], 0);
    if (fd >= 0) {
      fds[k++] = fd;
    }
  }
  return k;
}

int tp_proc_wait_gone(const pid_t *pids, size_t n, int64_t timeout_ms, TpError *err) {
  struct pollfd *pf = calloc(n ? n : 1, sizeof *pf);
  if (!pf) {
    return tp_error_set(err, TP_ENOMEM, "wait: out of memory");
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int fd = pidfd_open(pids[i], 0);
    if (fd >= 0) {
      pf[k++] = (struct pollfd){.fd = fd, .events = POLLIN};
    } else if (errno != ESRCH) {
      int rc = tp_error_errno(err, "pidfd_open %d", (int)pids[i]);
      for (size_t j = 0; j < k; j++) {
        close(pf[j].fd);
      }
      free(pf);
      return rc;
    }
  }
  int64_t end = now_ns() + ms_to_ns(timeout_ms);
  size_t left = k;
  int rc = 0;
  while (left > 0) {
    int64_t wait = end - now_ns();
    if (wait <= 0) {
      rc = tp_error_set(err, TP_ETIMEOUT, "%zu of %zu processes still alive after %lld ms", left, n,
                        (long long)timeout_ms);
      break;
    }
    struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000),
                          .tv_nsec = (long)(wait % 1000000000)};
    int r = ppoll(pf, (nfds_t)k, &ts, NULL);
    if (r < 0 && errno != EINTR) {
      rc = tp_error_errno(err, "wait: poll");
      break;
    }
    for (size_t i = 0; r > 0 && i < k; i++) {
      if (pf[i].fd >= 0 && pf[i].revents) {
        close(pf[i].fd);
        pf[i].fd = -1;  // poll ignores negative descriptors
        left--;
      }
    }
  }
  for (size_t i = 0; i < k; i++) {
    if (pf[i].fd >= 0) {
      close(pf[i].fd);
    }
  }
  free(pf);
  return rc;
}

// ---------------------------------------------------------------------------------------------
// Loop

int tp_proc_loop_new(TpProcLoop **out, TpError *err) {
  *out = NULL;
  int rc = sigpipe_init(err);
  if (rc != 0) {
    return rc;
  }
  TpProcLoop *loop = calloc(1, sizeof *loop);
  char *scratch = malloc(READ_CHUNK);
  if (!loop || !scratch) {
    free(loop);
    free(scratch);
    return tp_error_set(err, TP_ENOMEM, "proc loop: out of memory");
  }
  loop->scratch = scratch;
  loop->next_timer_id = 1;
  loop->seen_int = g_sigint_count;
  loop->seen_term = g_sigterm_count;
  loop->coalesce_ns = ms_to_ns(TP_PROC_COALESCE_MS);
  *out = loop;
  return 0;
}

static void close_pidfds(TpProc *p) {
  for (size_t i = 0; i < p->npidfds; i++) {
    close_fd(&p->pidfds[i]);
  }
  free(p->pidfds);
  p->pidfds = NULL;
  p->npidfds = 0;
}

static void proc_release(TpProc *p) {
  close_pidfds(p);
  for (int s = 0; s < 2; s++) {
    close_fd(&p->fd[s]);
    tp_proc_lines_free(&p->lines[s]);
    tp_buf_free(&p->capture[s]);
  }
  if (p->log_fd[1] == p->log_fd[0]) {
    p->log_fd[1] = -1;
  }
  close_fd(&p->log_fd[0]);
  close_fd(&p->log_fd[1]);
}

static void loop_compact(TpProcLoop *loop) {
  if (loop->destroyed_pending) {
    size_t k = 0;
    for (size_t i = 0; i < loop->nprocs; i++) {
      TpProc *p = loop->procs[i];
      if (p->destroyed) {
        free(p);
      } else {
        loop->procs[k++] = p;
      }
    }
    loop->nprocs = k;
    loop->destroyed_pending = false;
  }
  size_t k = 0;
  for (size_t i = 0; i < loop->ntimers; i++) {
    if (!loop->timers[i].dead) {
      loop->timers[k++] = loop->timers[i];
    }
  }
  loop->ntimers = k;
}

void tp_proc_loop_free(TpProcLoop *loop) {
  if (!loop) {
    return;
  }
  loop->depth++;  // defers the frees of tp_proc_destroy, so that the array stays put
  for (size_t i = 0; i < loop->nprocs; i++) {
    tp_proc_destroy(loop->procs[i]);
  }
  loop->depth--;
  loop_compact(loop);
  free(loop->procs);
  free(loop->timers);
  free(loop->pfds);
  free(loop->pfd_proc);
  free(loop->pfd_kind);
  free(loop->scratch);
  free(loop);
}

void tp_proc_loop_set_coalesce(TpProcLoop *loop, int64_t ms) {
  loop->coalesce_ns = ms > 0 ? ms_to_ns(ms) : 0;
}

size_t tp_proc_loop_active(const TpProcLoop *loop) {
  return loop->active;
}

size_t tp_proc_loop_size(const TpProcLoop *loop) {
  size_t n = 0;
  for (size_t i = 0; i < loop->nprocs; i++) {
    n += !loop->procs[i]->destroyed;
  }
  return n;
}

TpProc *tp_proc_loop_get(const TpProcLoop *loop, size_t i) {
  for (size_t k = 0; k < loop->nprocs; k++) {
    if (!loop->procs[k]->destroyed && i-- == 0) {
      return loop->procs[k];
    }
  }
  return NULL;
}

int tp_proc_loop_timer_add(TpProcLoop *loop, int64_t interval_ms, bool repeat, uint64_t *id,
                           TpError *err) {
  if (interval_ms < 1) {
    return tp_error_set(err, TP_EINVAL, "timer: interval must be at least 1 ms");
  }
  if (loop->ntimers == loop->captimers) {
    size_t cap = loop->captimers ? loop->captimers * 2 : 8;
    Timer *t = realloc(loop->timers, cap * sizeof *t);
    if (!t) {
      return tp_error_set(err, TP_ENOMEM, "timer: out of memory");
    }
    loop->timers = t;
    loop->captimers = cap;
  }
  Timer *t = &loop->timers[loop->ntimers++];
  t->id = loop->next_timer_id++;
  t->interval_ns = ms_to_ns(interval_ms);
  t->due_ns = now_ns() + t->interval_ns;
  t->repeat = repeat;
  t->dead = false;
  *id = t->id;
  return 0;
}

bool tp_proc_loop_timer_cancel(TpProcLoop *loop, uint64_t id) {
  for (size_t i = 0; i < loop->ntimers; i++) {
    if (loop->timers[i].id == id && !loop->timers[i].dead) {
      loop->timers[i].dead = true;
      if (loop->depth == 0) {
        loop_compact(loop);
      }
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Spawning

typedef struct EnvPlan {
  char **envp;
  char *arena;
} EnvPlan;

static bool env_name_matches(const char *entry, const char *name, size_t n) {
  return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static int env_build(const TpProcOpts *o, EnvPlan *plan, TpError *err) {
  size_t base = 0;
  if (!o->clear_env && environ) {
    while (environ[base]) {
      base++;
    }
  }
  size_t arena_len = 0;
  for (size_t i = 0; i < o->env_count; i++) {
    const TpProcEnv *e = &o->env[i];
    if (!e->name || !*e->name || strchr(e->name, '=')) {
      return tp_error_set(err, TP_EINVAL, "env: invalid variable name '%s'",
                          e->name ? e->name : "(null)");
    }
    if (e->value) {
      arena_len += strlen(e->name) + strlen(e->value) + 2;
    }
  }
  plan->envp = malloc((base + o->env_count + 1) * sizeof *plan->envp);
  plan->arena = malloc(arena_len ? arena_len : 1);
  if (!plan->envp || !plan->arena) {
    free(plan->envp);
    free(plan->arena);
    plan->envp = NULL;
    plan->arena = NULL;
    return tp_error_set(err, TP_ENOMEM, "env: out of memory");
  }
  size_t n = 0;
  for (size_t i = 0; i < base; i++) {
    plan->envp[n++] = environ[i];
  }
  char *a = plan->arena;
  for (size_t i = 0; i < o->env_count; i++) {
    const TpProcEnv *e = &o->env[i];
    size_t nl = strlen(e->name);
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
      if (!env_name_matches(plan->envp[j], e->name, nl)) {
        plan->envp[k++] = plan->envp[j];
      }
    }
    n = k;
    if (e->value) {
      size_t vl = strlen(e->value);
      memcpy(a, e->name, nl);
      a[nl] = '=';
      memcpy(a + nl + 1, e->value, vl + 1);
      plan->envp[n++] = a;
      a += nl + vl + 2;
    }
  }
  plan->envp[n] = NULL;
  return 0;
}

static void env_free(EnvPlan *plan) {
  free(plan->envp);
  free(plan->arena);
}

// Resolves argv[0] as execvp would (POSIX execvp: search PATH when the name has no '/'; glibc
// posix/execvpe.c uses "/bin:/usr/bin" when PATH is unset), but before fork, so that a missing
// program is reported by the parent and the child only calls execve.
static int resolve_program(const char *file, char *const *envp, TpBuf *out) {
  if (strchr(file, '/')) {
    return tp_buf_append(out, file, strlen(file) + 1);
  }
  const char *path = "/bin:/usr/bin";
  for (char *const *e = envp; *e; e++) {
    if (strncmp(*e, "PATH=", 5) == 0) {
      path = *e + 5;
      break;
    }
  }
  int result = -ENOENT;
  size_t flen = strlen(file);
  for (const char *p = path;; p++) {
    const char *end = strchr(p, ':');
    size_t dlen = end ? (size_t)(end - p) : strlen(p);
    out->len = 0;
    int rc = 0;
    if (dlen == 0) {
      rc = tp_buf_append(out, ".", 1);  // an empty PATH entry means the current directory
    } else {
      rc = tp_buf_append(out, p, dlen);
    }
    if (rc == 0) {
      rc = tp_buf_append(out, "/", 1);
    }
    if (rc == 0) {
      rc = tp_buf_append(out, file, flen + 1);
    }
    if (rc != 0) {
      return rc;
    }
    struct stat st;
    if (stat(out->data, &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(out->data, X_OK) == 0) {
        return 0;
      }
      result = -EACCES;
    }
    if (!end) {
      break;
    }
    p = end;
  }
  return result;
}

// Moves a descriptor above 2, so that dup2 onto 0-2 in the child can never clobber another.
static int fd_above_stdio(int fd) {
  if (fd > 2) {
    return fd;
  }
  int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return nfd;
}

// Opens a log file without truncating it yet (see log_commit): if the spawn fails, an existing
// log keeps its contents and a log created here is removed. `*created` tells which case it was.
static int open_log(const char *path, bool append, bool *created, TpError *err) {
  int flags = O_WRONLY | O_CLOEXEC | (append ? O_APPEND : 0);
  int fd = open(path, flags | O_CREAT | O_EXCL, 0644);
  *created = fd >= 0;
  if (fd < 0 && errno == EEXIST) {
    fd = open(path, flags);
  }
  if (fd < 0) {
    return tp_error_errno(err, "%s", path);
  }
  int moved = fd_above_stdio(fd);
  if (moved < 0) {
    return tp_error_errno(err, "%s", path);
  }
  return moved;
}

enum { STAGE_EXEC = 1, STAGE_CHDIR = 2, STAGE_PARENT = 3 };

typedef struct ChildPlan {
  const char *path;
  char *const *argv;
  char *const *envp;
  const char *cwd;
  pid_t parent;
  int in_fd, out_fd, err_fd, report_fd;
} ChildPlan;

static _Noreturn void child_fail(int report_fd, int stage) {
  int msg[2] = {stage, errno};
  ssize_t r = write(report_fd, msg, sizeof msg);
  (void)r;
  _exit(127);
}

// Runs in the child between fork and exec: async-signal-safe calls only.
static _Noreturn void child_exec(const ChildPlan *cp) {
  // Reset every disposition, as libuv does before exec (libuv src/unix/process.c,
  // uv__process_child_init): our handlers must not run here, and an inherited SIG_IGN for
  // SIGINT/SIGTERM would defeat forwarding.
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int s = 1; s < NSIG; s++) {
    sigaction(s, &sa, NULL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setpgid(0, 0);
  // prctl(2): the signal is sent when the parent *thread* exits; getppid() after setting it
  // closes the race with a parent that died before the prctl call.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != cp->parent) {
    child_fail(cp->report_fd, STAGE_PARENT);
  }
  if (dup2(cp->in_fd, 0) < 0 || dup2(cp->out_fd, 1) < 0 || dup2(cp->err_fd, 2) < 0) {
    child_fail(cp->report_fd, STAGE_EXEC);
  }
#ifdef CLOSE_RANGE_CLOEXEC
  // Descriptors inherited without O_CLOEXEC from whoever started us are not passed on.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
#endif
  if (cp->cwd && chdir(cp->cwd) != 0) {
    child_fail(cp->report_fd, STAGE_CHDIR);
  }
  execve(cp->path, cp->argv, cp->envp);
  child_fail(cp->report_fd, STAGE_EXEC);
}

// Makes room for one more process, so that adding it after the fork cannot fail.
static int loop_reserve(TpProcLoop *loop) {
  if (loop->nprocs == loop->capprocs) {
    size_t cap = loop->capprocs ? loop->capprocs * 2 : 8;
    TpProc **a = realloc(loop->procs, cap * sizeof *a);
    if (!a) {
      return TP_ENOMEM;
    }
    loop->procs = a;
    loop->capprocs = cap;
  }
  return 0;
}

int tp_proc_spawn(TpProcLoop *loop, const TpProcOpts *o, TpProc **out, TpError *err) {
  *out = NULL;
  if (!o->argv || !o->argv[0] || !o->argv[0][0]) {
    return tp_error_set(err, TP_EINVAL, "proc: argv must hold at least a program name");
  }
  const char *argv0 = o->argv[0];
  TpProc *p = calloc(1, sizeof *p);
  if (!p || loop_reserve(loop) != 0) {
    free(p);
    return tp_error_set(err, TP_ENOMEM, "proc: out of memory");
  }
  p->loop = loop;
  p->fd[0] = p->fd[1] = -1;
  p->log_fd[0] = p->log_fd[1] = -1;
  p->want_lines = o->want_lines;
  p->capture_max = o->capture_max;
  p->grace_ns = ms_to_ns(o->kill_grace_ms > 0 ? o->kill_grace_ms : 0);
  p->user = o->user;

  EnvPlan env = {0};
  TpBuf path = {0};
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, report[2] = {-1, -1}, nul = -1;
  bool created[2] = {false, false};
  int rc = env_build(o, &env, err);
  if (rc != 0) {
    goto fail;
  }
  rc = resolve_program(argv0, env.envp, &path);
  if (rc == TP_ENOMEM) {
    tp_error_set(err, rc, "proc: out of memory");
    goto fail;
  }
  if (rc != 0) {
    tp_error_set(err, rc, "%s: %s", argv0, strerror(-rc));
    goto fail;
  }
  if (o->log_path) {
    rc = p->log_fd[0] = open_log(o->log_path, o->log_append, &created[0], err);
    if (rc < 0) {
      p->log_fd[0] = -1;
      goto fail;
    }
    p->log_fd[1] = p->log_fd[0];
  }
  if (o->log_stderr_path) {
    rc = open_log(o->log_stderr_path, o->log_append, &created[1], err);
    if (rc < 0) {
      goto fail;
    }
    p->log_fd[1] = rc;
  }
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(report, O_CLOEXEC) != 0) {
    rc = tp_error_errno(err, "proc: pipe");
    goto fail;
  }
  nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (nul < 0) {
    rc = tp_error_errno(err, "/dev/null");
    goto fail;
  }
  int *fds[] = {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1], &report[1], &nul};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
    *fds[i] = fd_above_stdio(*fds[i]);
    if (*fds[i] < 0) {
      rc = tp_error_errno(err, "proc: fcntl");
      goto fail;
    }
  }
  rc = guard_start(err);
  if (rc != 0) {
    goto fail;
  }

  ChildPlan cp = {
      .path = path.data,
      .argv = (char *const *)o->argv,
      .envp = env.envp,
      .cwd = o->cwd,
      .parent = getpid(),
      .in_fd = nul,
      .out_fd = out_pipe[1],
      .err_fd = err_pipe[1],
      .report_fd = report[1],
  };
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // no handler of ours may run in the child
  p->start_ns = now_ns();
  pid_t pid = fork();
  if (pid == 0) {
    child_exec(&cp);
  }
  int saved = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    errno = saved;
    rc = tp_error_errno(err, "%s: fork", argv0);
    goto fail;
  }
  // Both sides call setpgid so that the group exists before either may signal it; EACCES
  // here only means the child has already exec'd.
  setpgid(pid, pid);
  close_fd(&out_pipe[1]);
  close_fd(&err_pipe[1]);
  close_fd(&report[1]);
  close_fd(&nul);
  int msg[2];
  ssize_t got;
  do {
    got = read(report[0], msg, sizeof msg);
  } while (got < 0 && errno == EINTR);
  close_fd(&report[0]);
  if (got == (ssize_t)sizeof msg) {
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (msg[0] == STAGE_CHDIR) {
      rc = tp_error_set(err, -msg[1], "cwd %s: %s", o->cwd, strerror(msg[1]));
    } else if (msg[0] == STAGE_PARENT) {
      rc = tp_error_set(err, TP_EINVAL, "%s: parent exited during spawn", argv0);
    } else {
      rc = tp_error_set(err, -msg[1], "%s: %s", argv0, strerror(msg[1]));
    }
    goto fail;
  }
  // The child runs: now a log opened without O_APPEND starts empty. Nothing was written to it
  // yet (output reaches it only through the loop).
  if (!o->log_append) {
    for (int s = 0; s < 2; s++) {
      if (p->log_fd[s] >= 0 && (s == 0 || p->log_fd[1] != p->log_fd[0]) &&
          ftruncate(p->log_fd[s], 0) != 0) {
        p->res.log_error = -errno;
      }
    }
  }
  p->pid = pid;
  p->fd[0] = out_pipe[0];
  p->fd[1] = err_pipe[0];
  for (int s = 0; s < 2; s++) {
    fcntl(p->fd[s], F_SETFL, fcntl(p->fd[s], F_GETFL) | O_NONBLOCK);
  }
  p->guarded = guard_send((int32_t)pid);
  if (!p->guarded && guard_start(NULL) == 0) {
    p->guarded = guard_send((int32_t)pid);  // the old guard had died: retry with a new one
  }
  if (o->timeout_ms > 0) {
    p->deadline_ns = p->start_ns + ms_to_ns(o->timeout_ms);
  }
  loop->procs[loop->nprocs++] = p;  // room reserved above
  loop->active++;
  env_free(&env);
  tp_buf_free(&path);
  *out = p;
  return 0;

fail:
  close_fd(&out_pipe[0]);
  close_fd(&out_pipe[1]);
  close_fd(&err_pipe[0]);
  close_fd(&err_pipe[1]);
  close_fd(&report[0]);
  close_fd(&report[1]);
  close_fd(&nul);
  proc_release(p);
  free(p);
  if (created[0]) {
    unlink(o->log_path);
  }
  if (created[1]) {
    unlink(o->log_stderr_path);
  }
  env_free(&env);
  tp_buf_free(&path);
  return rc;
}

// ---------------------------------------------------------------------------------------------
// Signalling and releasing

static bool proc_running(const TpProc *p) {
  return !p->reaped && !p->destroyed;
}

int tp_proc_signal_group(TpProc *p, int sig, TpError *err) {
  if (!proc_running(p)) {
    return 0;
  }
  if (kill(-p->pid, sig) != 0) {
    return tp_error_errno(err, "process group %d", (int)p->pid);
  }
  return 0;
}

static void kill_group(TpProc *p) {
  kill(-p->pid, SIGKILL);
  p->group_killed = true;
  p->term_at_ns = 0;
  p->kill_at_ns = 0;
}

static void schedule_kill(TpProc *p, int64_t at) {
  if (p->kill_at_ns == 0 || at < p->kill_at_ns) {
    p->kill_at_ns = at;
  }
}

// Sends `sig` to a running group and schedules the SIGKILL that follows after the grace.
static void term_then_kill(TpProc *p, int sig, int64_t grace_ns, int64_t now) {
  kill(-p->pid, sig);
  if (sig == SIGTERM) {
    p->term_at_ns = 0;  // a SIGTERM still pending after a forwarded SIGINT has been sent now
  }
  if (grace_ns <= 0) {
    kill_group(p);
    return;
  }
  schedule_kill(p, now + grace_ns);
}

// The escalation for a signal that stopped tplua: `sig` to the group now; after a SIGINT,
// SIGTERM follows after min(TP_PROC_INTERRUPT_TERM_MS, grace), then SIGKILL one grace after the
// SIGTERM. Launchers tell the two apart: torchrun's agent turns either into SignalException and
// shuts its workers down with the signal it got, escalating to SIGKILL after its own timeout
// (pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py, PContext.start installs
// _terminate_process_handler for SIGINT and SIGTERM, SubprocessContext._close sends the death
// signal then SIGKILL; torch/distributed/elastic/agent/server/api.py, SimpleElasticAgent.run
// calls _shutdown(e.sigval)), while Python programs without a handler get KeyboardInterrupt for
// SIGINT, which training loops may catch and ignore. SIGTERM is the request every launcher and
// batch system honours, so every run gets it whatever it did with the SIGINT.
static void escalate(TpProc *p, int sig, int64_t now) {
  if (sig != SIGINT) {
    term_then_kill(p, sig, p->grace_ns, now);
    return;
  }
  kill(-p->pid, SIGINT);
  if (p->grace_ns <= 0) {
    kill_group(p);
    return;
  }
  int64_t delay = ms_to_ns(TP_PROC_INTERRUPT_TERM_MS);
  if (p->grace_ns < delay) {
    delay = p->grace_ns;
  }
  if (p->term_at_ns == 0 || now + delay < p->term_at_ns) {
    p->term_at_ns = now + delay;
  }
  schedule_kill(p, now + delay + p->grace_ns);
}

int tp_proc_kill_tree(TpProc *p, int64_t grace_ms, TpError *err) {
  if (!proc_running(p)) {
    return 0;
  }
  if (kill(-p->pid, 0) != 0) {
    return tp_error_errno(err, "process group %d", (int)p->pid);
  }
  term_then_kill(p, SIGTERM, ms_to_ns(grace_ms > 0 ? grace_ms : 0), now_ns());
  return 0;
}

void tp_proc_destroy(TpProc *p) {
  if (!p || p->destroyed) {
    return;
  }
  TpProcLoop *loop = p->loop;
  if (!p->reaped) {
    kill(-p->pid, SIGKILL);
    int st;
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {
    }
    p->reaped = true;
  }
  guard_unregister(p);
  proc_release(p);
  if (!p->done) {
    loop->active--;
  }
  p->destroyed = true;
  p->user = NULL;
  loop->destroyed_pending = true;
  if (loop->depth == 0) {
    loop_compact(loop);
  }
}

pid_t tp_proc_pid(const TpProc *p) {
  return p->pid;
}

TpProcLoop *tp_proc_loop_of(const TpProc *p) {
  return p->loop;
}

void *tp_proc_user(const TpProc *p) {
  return p->user;
}

bool tp_proc_done(const TpProc *p) {
  return p->done;
}

const TpProcResult *tp_proc_result(const TpProc *p) {
  return p->done ? &p->res : NULL;
}

const char *tp_proc_captured(const TpProc *p, TpProcStream s, size_t *len) {
  *len = p->capture[s].len;
  return p->capture[s].len ? p->capture[s].data : "";
}

// ---------------------------------------------------------------------------------------------
// One loop step

static void forward_signal(TpProcLoop *loop, int sig, int64_t now) {
  if (!loop->interrupted) {
    loop->interrupted = sig;
  }
  loop->interrupt_count++;
  for (size_t i = 0; i < loop->nprocs; i++) {
    TpProc *p = loop->procs[i];
    if (!proc_running(p)) {
      continue;
    }
    if (!p->res.interrupted) {
      p->res.interrupted = sig;
    }
    if (loop->interrupt_count > 1) {
      kill_group(p);  // asked twice: no more grace
    } else {
      escalate(p, sig, now);
    }
  }
}

static void check_signals(TpProcLoop *loop, int64_t now) {
  sig_atomic_t ci = g_sigint_count, ct = g_sigterm_count;
  if (ci != loop->seen_int) {
    loop->seen_int = ci;
    forward_signal(loop, SIGINT, now);
  }
  if (ct != loop->seen_term) {
    loop->seen_term = ct;
    forward_signal(loop, SIGTERM, now);
  }
}

int tp_proc_loop_interrupted(TpProcLoop *loop) {
  check_signals(loop, now_ns());
  return loop->interrupted;
}

int tp_proc_loop_interrupt(TpProcLoop *loop, int sig, TpError *err) {
  if (sig != SIGINT && sig != SIGTERM) {
    return tp_error_set(err, TP_EINVAL, "proc loop: interrupt: SIGINT or SIGTERM expected, got %d",
                        sig);
  }
  int64_t now = now_ns();
  check_signals(loop, now);  // a signal caught meanwhile is the first one, not a second
  if (!loop->interrupted) {
    forward_signal(loop, sig, now);
  }
  return 0;
}

int tp_proc_interrupted(void) {
  return g_first_interrupt;
}

void tp_proc_interrupted_clear(void) {
  g_first_interrupt = 0;
}

static void on_reaped(TpProc *p, int status, const struct rusage *ru, int64_t now) {
  p->reaped = true;
  p->term_at_ns = 0;
  p->kill_at_ns = 0;
  p->deadline_ns = 0;
  p->res.wall_s = (double)(now - p->start_ns) / 1e9;
  p->res.rusage = *ru;
  if (WIFEXITED(status)) {
    p->res.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    p->res.signal = WTERMSIG(status);
    p->res.code = 128 + p->res.signal;
    p->res.core_dumped = WCOREDUMP(status);
  }
  if (p->res.timed_out) {
    p->res.code = 124;
  }
  // The run ends with its leader: whatever is left in the group is killed now. kill(pgid, 0)
  // is the cheap test; the /proc scan tells live members from zombies awaiting their reaper.
  // After a group SIGKILL, members still dying are not counted as stragglers.
  // The exit is delivered only once those members have terminated too (pidfds in the poll set).
  if (kill(-p->pid, 0) == 0) {
    pid_t pids[1];
    size_t n = 0;
    if (!p->group_killed && tp_proc_group_members(p->pid, pids, 1, &n, NULL) == 0) {
      p->res.stragglers = (int)n;
    }
    kill_group(p);
    p->pidfds = malloc(MEMBERS_MAX * sizeof *p->pidfds);
    if (p->pidfds) {
      p->npidfds = open_member_pidfds(p->pid, p->pidfds, MEMBERS_MAX);
    }
  }
  if (p->fd[0] >= 0 || p->fd[1] >= 0 || p->npidfds > 0) {
    int64_t wait = p->grace_ns > ms_to_ns(ABANDON_MIN_MS) ? p->grace_ns : ms_to_ns(ABANDON_MIN_MS);
    p->abandon_at_ns = now + wait;
  }
}

static void reap(TpProcLoop *loop, int64_t now) {
  loop->reap_needed = false;
  for (size_t i = 0; i < loop->nprocs; i++) {
    TpProc *p = loop->procs[i];
    if (!proc_running(p)) {
      continue;
    }
    int status;
    struct rusage ru;
    pid_t r = wait4(p->pid, &status, WNOHANG, &ru);
    if (r == p->pid) {
      on_reaped(p, status, &ru, now);
    }
  }
}

static void stream_eof(TpProc *p, int s) {
  close_fd(&p->fd[s]);
  p->lines[s].eof = true;
}

static void check_deadlines(TpProcLoop *loop, int64_t now) {
  for (size_t i = 0; i < loop->nprocs; i++) {
    TpProc *p = loop->procs[i];
    if (p->destroyed) {
      continue;
    }
    if (!p->reaped) {
      if (p->deadline_ns && now >= p->deadline_ns) {
        p->deadline_ns = 0;
        p->res.timed_out = true;
        term_then_kill(p, SIGTERM, p->grace_ns, now);
      }
      if (p->term_at_ns && now >= p->term_at_ns) {
        p->term_at_ns = 0;
        kill(-p->pid, SIGTERM);  // the leader still runs: the SIGINT did not stop it
      }
      if (p->kill_at_ns && now >= p->kill_at_ns) {
        kill_group(p);
      }
    } else if (p->abandon_at_ns && now >= p->abandon_at_ns) {
      p->abandon_at_ns = 0;
      close_pidfds(p);  // members that do not die even of SIGKILL (D state) are not waited for
      if (p->fd[0] >= 0 || p->fd[1] >= 0) {
        p->res.escaped = true;
        for (int s = 0; s < 2; s++) {
          if (p->fd[s] >= 0) {
            stream_eof(p, s);
          }
        }
      }
    }
  }
}

static int64_t next_deadline(const TpProcLoop *loop) {
  int64_t best = 0;
  for (size_t i = 0; i < loop->nprocs; i++) {
    const TpProc *p = loop->procs[i];
    if (p->destroyed) {
      continue;
    }
    const int64_t ds[] = {p->reaped ? 0 : p->deadline_ns, p->reaped ? 0 : p->term_at_ns,
                          p->reaped ? 0 : p->kill_at_ns, p->reaped ? p->abandon_at_ns : 0};
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
      if (ds[k] && (!best || ds[k] < best)) {
        best = ds[k];
      }
    }
    for (int s = 0; s < 2; s++) {
      int64_t r = p->rest_until_ns[s];
      if (p->fd[s] >= 0 && r && (!best || r < best)) {
        best = r;
      }
    }
  }
  for (size_t i = 0; i < loop->ntimers; i++) {
    const Timer *t = &loop->timers[i];
    if (!t->dead && (!best || t->due_ns < best)) {
      best = t->due_ns;
    }
  }
  return best;
}

static bool members_gone(const TpProc *p) {
  for (size_t i = 0; i < p->npidfds; i++) {
    if (p->pidfds[i] >= 0) {
      return false;
    }
  }
  return true;
}

static bool proc_complete(const TpProc *p) {
  return p->reaped && !p->done && !p->destroyed && p->fd[0] < 0 && p->fd[1] < 0 &&
         members_gone(p) && !tp_proc_lines_pending(&p->lines[0]) &&
         !tp_proc_lines_pending(&p->lines[1]);
}

static bool ready_work(const TpProcLoop *loop, int64_t now) {
  if (loop->reap_needed) {
    return true;
  }
  for (size_t i = 0; i < loop->nprocs; i++) {
    const TpProc *p = loop->procs[i];
    if (p->destroyed) {
      continue;
    }
    if (proc_complete(p) || tp_proc_lines_pending(&p->lines[0]) ||
        tp_proc_lines_pending(&p->lines[1])) {
      return true;
    }
  }
  int64_t d = next_deadline(loop);
  return d && d <= now;
}

static void log_write(TpProc *p, int s, const char *data, size_t n) {
  int fd = p->log_fd[s];
  if (fd < 0 || p->res.log_error) {
    return;
  }
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      p->res.log_error = w < 0 ? -errno : -EIO;  // logging stops; supervision goes on
      return;
    }
    data += w;
    n -= (size_t)w;
  }
}

static int read_stream(TpProcLoop *loop, TpProc *p, int s, int64_t now, TpError *err) {
  ssize_t n = read(p->fd[s], loop->scratch, READ_CHUNK);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
    return 0;
  }
  if (n <= 0) {
    stream_eof(p, s);
    return 0;
  }
  size_t len = (size_t)n;
  // Coalescing: after a read that did not fill the buffer the stream rests a little, so that a
  // child printing many short lines costs a few wake-ups per second, not one per line. A full
  // buffer means output is pouring in: read on at once, so that the writer never blocks for us.
  p->rest_until_ns[s] = len < READ_CHUNK && loop->coalesce_ns ? now + loop->coalesce_ns : 0;
  log_write(p, s, loop->scratch, len);
  if (p->capture_max) {
    TpBuf *c = &p->capture[s];
    size_t room = c->len < p->capture_max ? p->capture_max - c->len : 0;
    size_t take = len < room ? len : room;
    if (take < len) {
      p->res.capture_truncated[s] = true;
    }
    if (tp_buf_append(c, loop->scratch, take) != 0) {
      return tp_error_set(err, TP_ENOMEM, "proc %d: out of memory", (int)p->pid);
    }
  }
  if (p->want_lines && tp_proc_lines_push(&p->lines[s], loop->scratch, len) != 0) {
    return tp_error_set(err, TP_ENOMEM, "proc %d: out of memory", (int)p->pid);
  }
  return 0;
}

static int poll_and_read(TpProcLoop *loop, int64_t wait_ns, int64_t now, TpError *err) {
  size_t need = 1;
  for (size_t i = 0; i < loop->nprocs; i++) {
    need += 2 + loop->procs[i]->npidfds;
  }
  if (need > loop->cappfds) {
    struct pollfd *pf = realloc(loop->pfds, need * sizeof *pf);
    if (pf) {
      loop->pfds = pf;
    }
    TpProc **pp = realloc(loop->pfd_proc, need * sizeof *pp);
    if (pp) {
      loop->pfd_proc = pp;
    }
    int *pk = realloc(loop->pfd_kind, need * sizeof *pk);
    if (pk) {
      loop->pfd_kind = pk;
    }
    if (!pf || !pp || !pk) {
      return tp_error_set(err, TP_ENOMEM, "proc loop: out of memory");
    }
    loop->cappfds = need;
  }
  size_t n = 0;
  loop->pfds[n++] = (struct pollfd){.fd = g_sigpipe[0], .events = POLLIN};
  for (size_t i = 0; i < loop->nprocs; i++) {
    TpProc *p = loop->procs[i];
    if (p->destroyed) {
      continue;
    }
    for (int s = 0; s < 2; s++) {
      if (p->rest_until_ns[s] && p->rest_until_ns[s] <= now) {
        p->rest_until_ns[s] = 0;  // rested: polled again (and no longer a deadline)
      }
      // Back-pressure: a stream whose lines wait for delivery is not read further.
      if (p->fd[s] >= 0 && !tp_proc_lines_pending(&p->lines[s]) && !p->rest_until_ns[s]) {
        loop->pfd_proc[n] = p;
        loop->pfd_kind[n] = s;
        loop->pfds[n++] = (struct pollfd){.fd = p->fd[s], .events = POLLIN};
      }
    }
    for (size_t k = 0; k < p->npidfds; k++) {
      if (p->pidfds[k] >= 0) {
        loop->pfd_proc[n] = p;
        loop->pfd_kind[n] = 2 + (int)k;
        loop->pfds[n++] = (struct pollfd){.fd = p->pidfds[k], .events = POLLIN};
      }
    }
  }
  struct timespec ts, *tsp = NULL;
  if (wait_ns >= 0) {
    ts.tv_sec = (time_t)(wait_ns / 1000000000);
    ts.tv_nsec = (long)(wait_ns % 1000000000);
    tsp = &ts;
  }
  int r = ppoll(loop->pfds, (nfds_t)n, tsp, NULL);
  if (r < 0) {
    if (errno != EINTR) {
      return tp_error_errno(err, "proc loop: poll");
    }
    sigpipe_drain(loop);
    return 0;
  }
  if (loop->pfds[0].revents) {
    sigpipe_drain(loop);
  }
  now = now_ns();  // the rest windows of the reads below start now, not before the wait
  for (size_t i = 1; i < n && r > 0; i++) {
    if (!loop->pfds[i].revents) {
      continue;
    }
    r--;
    TpProc *p = loop->pfd_proc[i];
    int kind = loop->pfd_kind[i];
    if (kind >= 2) {
      close_fd(&p->pidfds[kind - 2]);  // that member has terminated
      continue;
    }
    int rc = read_stream(loop, p, kind, now, err);
    if (rc != 0) {
      return rc;
    }
  }
  return 0;
}

static int deliver_lines(TpProc *p, const TpProcEvents *ev) {
  for (int s = 0; s < 2; s++) {
    const char *line;
    size_t len;
    bool partial;
    while (!p->destroyed && tp_proc_lines_next(&p->lines[s], &line, &len, &partial)) {
      if (ev && ev->on_line && ev->on_line(ev->ctx, p, (TpProcStream)s, line, len, partial)) {
        return 1;
      }
    }
  }
  return 0;
}

static int fire_timers(TpProcLoop *loop, const TpProcEvents *ev, int64_t now) {
  // Each due timer fires once per step, earliest first, ties in creation (id) order.
  uint64_t last_id = 0;
  int64_t last_due = INT64_MIN;
  for (;;) {
    Timer *next = NULL;
    for (size_t i = 0; i < loop->ntimers; i++) {
      Timer *t = &loop->timers[i];
      if (t->dead || t->due_ns > now) {
        continue;
      }
      if (t->due_ns < last_due || (t->due_ns == last_due && t->id <= last_id)) {
        continue;  // already fired in this step
      }
      if (!next || t->due_ns < next->due_ns || (t->due_ns == next->due_ns && t->id < next->id)) {
        next = t;
      }
    }
    if (!next) {
      return 0;
    }
    uint64_t id = next->id;
    last_due = next->due_ns;
    last_id = id;
    if (next->repeat) {
      next->due_ns += next->interval_ns;
      if (next->due_ns <= now) {
        next->due_ns = now + next->interval_ns;
      }
    } else {
      next->dead = true;
    }
    // `next` may move if the callback adds timers: only the id is used from here on.
    if (ev && ev->on_timer && ev->on_timer(ev->ctx, id)) {
      return 1;
    }
  }
}

static int deliver(TpProcLoop *loop, const TpProcEvents *ev, int64_t now) {
  // Index loops: callbacks may spawn (the array grows) or destroy (memory stays until idle).
  for (size_t i = 0; i < loop->nprocs; i++) {
    TpProc *p = loop->procs[i];
    if (!p->destroyed && deliver_lines(p, ev)) {
      return 1;
    }
    if (proc_complete(p)) {
      p->done = true;
      loop->active--;
      guard_unregister(p);
      if (ev && ev->on_exit && ev->on_exit(ev->ctx, p, &p->res)) {
        return 1;
      }
    }
  }
  return fire_timers(loop, ev, now);
}

static int loop_step(TpProcLoop *loop, int64_t timeout_ms, const TpProcEvents *ev, TpError *err) {
  int64_t now = now_ns();
  check_signals(loop, now);
  if (loop->reap_needed) {
    reap(loop, now);
  }
  check_deadlines(loop, now);
  if (loop->active == 0 && next_deadline(loop) == 0) {
    return 0;  // nothing to wait for: no running process, no timer
  }
  int64_t wait_ns = timeout_ms < 0 ? -1 : ms_to_ns(timeout_ms);
  if (ready_work(loop, now)) {
    wait_ns = 0;
  } else {
    int64_t d = next_deadline(loop);
    if (d) {
      int64_t until = d > now ? d - now : 0;
      if (wait_ns < 0 || until < wait_ns) {
        wait_ns = until;
      }
    }
  }
  int rc = poll_and_read(loop, wait_ns, now, err);
  if (rc != 0) {
    return rc;
  }
  now = now_ns();
  check_signals(loop, now);
  if (loop->reap_needed) {
    reap(loop, now);
  }
  check_deadlines(loop, now);
  int drc = deliver(loop, ev, now);
  // A signal that arrived while callbacks ran must be forwarded now: the next run_once
  // re-snapshots the counters when it installs the handlers and would not see it.
  check_signals(loop, now_ns());
  return drc;
}

static int loop_enter(TpProcLoop *loop, TpError *err) {
  if (loop->depth > 0) {
    return tp_error_set(err, TP_EINVAL, "proc loop: already running (called from its callback)");
  }
  loop->depth++;
  signals_install(loop);
  return 0;
}

static void loop_leave(TpProcLoop *loop) {
  signals_restore(loop);
  loop->depth--;
  loop_compact(loop);
}

int tp_proc_loop_run_once(TpProcLoop *loop, int64_t timeout_ms, const TpProcEvents *ev,
                          TpError *err) {
  int rc = loop_enter(loop, err);
  if (rc != 0) {
    return rc;
  }
  rc = loop_step(loop, timeout_ms, ev, err);
  loop_leave(loop);
  return rc;
}

int tp_proc_loop_run(TpProcLoop *loop, const TpProcEvents *ev, TpError *err) {
  int rc = loop_enter(loop, err);
  if (rc != 0) {
    return rc;
  }
  while (rc == 0 && loop->active > 0) {
    rc = loop_step(loop, -1, ev, err);
  }
  loop_leave(loop);
  return rc;
}

int tp_proc_wait(TpProc *p, const TpProcEvents *ev, TpError *err) {
  TpProcLoop *loop = p->loop;
  int rc = loop_enter(loop, err);
  if (rc != 0) {
    return rc;
  }
  while (rc == 0 && !p->done && !p->destroyed) {
    rc = loop_step(loop, -1, ev, err);
  }
  loop_leave(loop);
  return rc;
}
