// Unit tests of engine/lock: exclusion between open file descriptions, the holder's pid, release
// on close and on the holder's death, bounded waits, bad paths.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "lock.h"

static char g_dir[256];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void path_in(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", g_dir, name);
}

static void test_exclusive(void) {
  char p[300];
  path_in(p, sizeof p, "a.lock");
  TpError err = {0};
  int fd1 = -1, fd2 = -1;
  CHECK_INT(tp_lock_acquire(p, 0, &fd1, &err), 0);
  CHECK(fd1 >= 0);
  // A second open file description in the same process conflicts with flock(2).
  double t0 = now_s();
  CHECK_INT(tp_lock_acquire(p, 0, &fd2, &err), -EBUSY);
  CHECK_INT(fd2, -1);
  CHECK(strstr(err.msg, "a.lock: locked by process ") != NULL);
  char pidtext[32];
  snprintf(pidtext, sizeof pidtext, "process %ld", (long)getpid());
  CHECK(strstr(err.msg, pidtext) != NULL);
  // A bounded wait really waits, and no longer than asked by much.
  t0 = now_s();
  CHECK_INT(tp_lock_acquire(p, 150, &fd2, &err), -EBUSY);
  double waited = now_s() - t0;
  CHECK(waited >= 0.14 && waited < 2.0);
  pid_t holder = 0;
  CHECK_INT(tp_lock_holder(p, &holder, &err), 0);
  CHECK_INT(holder, getpid());
  CHECK(tp_lock_pid_alive(holder));
  tp_lock_release(fd1);
  CHECK_INT(tp_lock_acquire(p, 0, &fd2, &err), 0);
  tp_lock_release(fd2);
  tp_lock_release(-1);  // ignored
}

// The lock of a process that dies is released by the kernel; a waiter gets it as soon as that
// happens.
static void test_holder_dies(void) {
  char p[300];
  path_in(p, sizeof p, "b.lock");
  int ready[2];
  CHECK_INT(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    TpError e;
    int fd;
    if (tp_lock_acquire(p, 0, &fd, &e) != 0) {
      _exit(3);
    }
    ssize_t w = write(ready[1], "x", 1);
    (void)w;
    pause();
    _exit(0);
  }
  close(ready[1]);
  char b;
  CHECK_INT(read(ready[0], &b, 1), 1);
  close(ready[0]);
  TpError err = {0};
  int fd = -1;
  CHECK_INT(tp_lock_acquire(p, 0, &fd, &err), -EBUSY);
  char want[64];
  snprintf(want, sizeof want, "locked by process %ld", (long)child);
  CHECK(strstr(err.msg, want) != NULL);
  CHECK_INT(kill(child, SIGKILL), 0);
  int st;
  CHECK_INT(waitpid(child, &st, 0), child);
  CHECK(!tp_lock_pid_alive(child));
  CHECK_INT(tp_lock_acquire(p, 5000, &fd, &err), 0);
  pid_t holder = 0;
  CHECK_INT(tp_lock_holder(p, &holder, &err), 0);
  CHECK_INT(holder, getpid());
  tp_lock_release(fd);
}

// A child forked without exec shares the description: the lock outlives the parent's close
// until the child exits, and the message says its named holder is gone.
static void test_inherited(void) {
  char p[300];
  path_in(p, sizeof p, "c.lock");
  TpError err = {0};
  int fd = -1;
  CHECK_INT(tp_lock_acquire(p, 0, &fd, &err), 0);
  int go[2];
  CHECK_INT(pipe(go), 0);
  pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    char b;
    ssize_t r = read(go[0], &b, 1);  // until the parent closes its end
    (void)r;
    _exit(0);
  }
  close(go[0]);
  tp_lock_release(fd);
  int fd2 = -1;
  CHECK_INT(tp_lock_acquire(p, 0, &fd2, &err), -EBUSY);
  close(go[1]);  // lets the child exit, which drops the last reference
  int st;
  CHECK_INT(waitpid(child, &st, 0), child);
  CHECK_INT(tp_lock_acquire(p, 2000, &fd2, &err), 0);
  tp_lock_release(fd2);
}

static void test_bad_paths(void) {
  TpError err = {0};
  int fd = -1;
  CHECK_INT(tp_lock_acquire("/nonexistent-dir-xyz/x.lock", 0, &fd, &err), -ENOENT);
  CHECK(strstr(err.msg, "/nonexistent-dir-xyz/x.lock: ") == err.msg);
  CHECK_INT(tp_lock_acquire("", 0, &fd, &err), TP_EINVAL);
  CHECK_INT(tp_lock_acquire("x", -1, &fd, &err), TP_EINVAL);
  // A symbolic link is refused rather than followed.
  char link[300], target[300];
  path_in(link, sizeof link, "link.lock");
  path_in(target, sizeof target, "target");
  CHECK_INT(symlink(target, link), 0);
  CHECK_INT(tp_lock_acquire(link, 0, &fd, &err), -ELOOP);
  CHECK(access(target, F_OK) != 0);
  pid_t holder = 1;
  CHECK_INT(tp_lock_holder("/nonexistent-dir-xyz/x.lock", &holder, &err), -ENOENT);
  CHECK_INT(holder, 0);
  // A lock file with garbage in it names no holder.
  char junk[300];
  path_in(junk, sizeof junk, "junk.lock");
  FILE *f = fopen(junk, "w");
  CHECK(f != NULL);
  if (f) {
    fputs("12ab\n", f);
    fclose(f);
  }
  CHECK_INT(tp_lock_holder(junk, &holder, &err), 0);
  CHECK_INT(holder, 0);
  CHECK(!tp_lock_pid_alive(0));
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/tplua-lock.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_exclusive();
  test_holder_dies();
  test_inherited();
  test_bad_paths();
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "could not remove %s\n", g_dir);
  }
  return CHECK_DONE();
}
