// Child processes of the GPU module and their report lines: see gpu_child.h.
#include "gpu_child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double tp_gpu_monotonic(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Escaping and report lines

int tp_gpu_escape(TpBuf *b, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    int rc;
    if (c == '\\') {
      rc = tp_buf_append(b, "\\\\", 2);
    } else if (c == '\n') {
      rc = tp_buf_append(b, "\\n", 2);
    } else if (c == '\t') {
      rc = tp_buf_append(b, "\\t", 2);
    } else if (c == '\r') {
      rc = tp_buf_append(b, "\\r", 2);
    } else if (c < 0x20 || c == 0x7f) {
      rc = tp_buf_printf(b, "\\x%02x", c);
    } else {
      rc = tp_buf_append(b, &s[i], 1);
    }
    if (rc != 0) {
      return rc;
    }
  }
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

int tp_gpu_unescape(const char *s, size_t len, char *out, size_t outsz) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (c == '\\') {
      if (i + 1 >= len) {
        return -1;
      }
      char e = s[++i];
      if (e == '\\') {
        c = '\\';
      } else if (e == 'n') {
        c = '\n';
      } else if (e == 't') {
        c = '\t';
      } else if (e == 'r') {
        c = '\r';
      } else if (e == 'x' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
        c = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
        i += 2;
      } else {
        return -1;
      }
    }
    if (c == '\0') {
      return -1;  // a value never carries NUL: the fields are C strings
    }
    if (o + 1 < outsz) {
      out[o++] = c;
    }
  }
  if (outsz > 0) {
    out[o] = '\0';
  }
  return 0;
}

void tp_gpu_emit(int fd, int device, const char *key, const char *fmt, ...) {
  char value[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(value, sizeof value, fmt, ap);
  va_end(ap);
  if (n < 0) {
    return;
  }
  size_t vlen = (size_t)n < sizeof value ? (size_t)n : sizeof value - 1;
  TpBuf line = {0};
  int rc = device < 0 ? tp_buf_printf(&line, "b\t%s\t", key)
                      : tp_buf_printf(&line, "%d\t%s\t", device, key);
  if (rc == 0) {
    rc = tp_gpu_escape(&line, value, vlen);
  }
  if (rc == 0) {
    rc = tp_buf_append(&line, "\n", 1);
  }
  if (rc == 0) {
    size_t off = 0;
    while (off < line.len) {
      ssize_t w = write(fd, line.data + off, line.len - off);
      if (w < 0 && errno == EINTR) {
        continue;
      }
      if (w <= 0) {
        break;
      }
      off += (size_t)w;
    }
  }
  tp_buf_free(&line);
}

// ---------------------------------------------------------------------------------------------
// Children

pid_t tp_gpu_fork(int (*fn)(void *), void *arg, int out_fd, int fd3, int fd4, TpError *err) {
  pid_t pid = fork();
  if (pid < 0) {
    return tp_error_errno(err, "gpu probe: fork");
  }
  if (pid > 0) {
    setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
    return pid;
  }
  // Child. Only this thread exists here; it runs one probe and _exits.
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  for (int sig = 1; sig < NSIG; sig++) {
    if (sig != SIGKILL && sig != SIGSTOP) {
      signal(sig, SIG_DFL);
    }
  }
  // Move the descriptors we keep above 4 first, so dup2 never clobbers one of them.
  int keep[3] = {out_fd, fd3, fd4};
  for (int i = 0; i < 3; i++) {
    if (keep[i] >= 0 && keep[i] <= 4) {
      int moved = fcntl(keep[i], F_DUPFD, 5);
      if (moved < 0) {
        _exit(125);
      }
      keep[i] = moved;
    }
  }
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(keep[0], 1) < 0 || dup2(keep[0], 2) < 0 ||
      dup2(keep[1], 3) < 0 || (keep[2] >= 0 && dup2(keep[2], 4) < 0)) {
    _exit(125);
  }
  int first_closed = keep[2] >= 0 ? 5 : 4;
  if (close_range((unsigned)first_closed, ~0U, 0) != 0) {
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) {
      max = 65536;
    }
    for (int fd = first_closed; fd < max; fd++) {
      close(fd);
    }
  }
  // A program the library may start must not inherit the report pipes.
  fcntl(3, F_SETFD, FD_CLOEXEC);
  if (keep[2] >= 0) {
    fcntl(4, F_SETFD, FD_CLOEXEC);
  }
  _exit(fn(arg));
}

int tp_gpu_reap(pid_t pid, double deadline, int *status, bool *killed) {
  *killed = false;
  *status = 0;
  int pidfd = pidfd_open(pid, 0);
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) {
      break;
    }
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0) {
      if (pidfd >= 0) {
        close(pidfd);
      }
      return -1;  // ECHILD: someone else reaped it
    }
    double left = deadline - tp_gpu_monotonic();
    if (left <= 0 || *killed) {
      if (!*killed) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        *killed = true;
        deadline = tp_gpu_monotonic() + 5.0;  // grace for the kernel to deliver SIGKILL
        continue;
      }
      if (left <= 0) {
        if (pidfd >= 0) {
          close(pidfd);
        }
        return -1;  // stuck in the kernel (uninterruptible); left behind
      }
    }
    if (pidfd >= 0) {
      struct pollfd p = {.fd = pidfd, .events = POLLIN};
      int ms = (int)(left * 1000.0) + 1;
      poll(&p, 1, ms);
    } else {
      // No pidfd (old kernel): a blocking wait is the only portable way left.
      r = waitpid(pid, status, 0);
      if (r == pid) {
        break;
      }
    }
  }
  if (pidfd >= 0) {
    close(pidfd);
  }
  return 0;
}

void tp_gpu_describe_status(int status, char *out, size_t outsz) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *name = sigabbrev_np(sig);
    snprintf(out, outsz, "killed by signal %d (SIG%s)", sig, name ? name : "?");
  } else if (WIFEXITED(status)) {
    snprintf(out, outsz, "exit status %d", WEXITSTATUS(status));
  } else {
    snprintf(out, outsz, "wait status 0x%x", (unsigned)status);
  }
}
