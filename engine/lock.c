// Exclusive advisory locks on a file with flock(2) (see lock.h).
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Parses "<pid>\n" from the start of a lock file; 0 when the text is not a positive number.
static pid_t parse_pid(const char *buf, size_t n) {
  long v = 0;
  size_t i = 0;
  while (i < n && buf[i] >= '0' && buf[i] <= '9') {
    if (v > 100000000L) {
      return 0;
    }
    v = v * 10 + (buf[i] - '0');
    i++;
  }
  if (i == 0 || v <= 0 || (i < n && buf[i] != '\n')) {
    return 0;
  }
  return (pid_t)v;
}

int tp_lock_holder(const char *path, pid_t *pid, TpError *err) {
  *pid = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return tp_error_errno(err, "%s", path);
  }
  char buf[32];
  ssize_t n;
  do {
    n = pread(fd, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  int rc = 0;
  if (n < 0) {
    rc = tp_error_errno(err, "%s: read", path);
  } else {
    *pid = parse_pid(buf, (size_t)n);
  }
  close(fd);
  return rc;
}

bool tp_lock_pid_alive(pid_t pid) {
  return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

// Writes "<pid>\n" over the whole file; a failure only loses the holder's name in messages.
static void write_pid(int fd) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) == 0 && n > 0) {
    ssize_t w;
    do {
      w = pwrite(fd, buf, (size_t)n, 0);
    } while (w < 0 && errno == EINTR);
  }
}

int tp_lock_acquire(const char *path, int64_t wait_ms, int *fd_out, TpError *err) {
  *fd_out = -1;
  if (!path || !*path || wait_ms < 0) {
    return tp_error_set(err, TP_EINVAL, "lock: a path and a wait >= 0 are needed");
  }
  // O_NOFOLLOW: a planted symbolic link must not redirect the truncate-and-write below.
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return tp_error_errno(err, "%s", path);
  }
  int64_t deadline = now_ms() + wait_ms;
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      break;
    }
    int e = errno;
    if (e == EINTR) {
      continue;
    }
    if (e != EWOULDBLOCK) {
      errno = e;
      int rc = tp_error_errno(err, "%s: flock", path);
      close(fd);
      return rc;
    }
    if (now_ms() >= deadline) {
      pid_t holder = 0;
      TpError ignored;
      tp_lock_holder(path, &holder, &ignored);
      close(fd);
      if (holder > 0) {
        return tp_error_set(err, -EBUSY, "%s: locked by process %ld%s", path, (long)holder,
                            tp_lock_pid_alive(holder) ? ""
                                                      : " (gone; a child of it still holds it)");
      }
      return tp_error_set(err, -EBUSY, "%s: locked by another process", path);
    }
    // flock(2) has no timed form; a short nap between attempts keeps the wait bounded.
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  write_pid(fd);
  *fd_out = fd;
  return 0;
}

void tp_lock_release(int fd) {
  if (fd >= 0) {
    close(fd);  // the last descriptor of the open file description drops the flock
  }
}
