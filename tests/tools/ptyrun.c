// ptyrun: runs a command on a real pseudo-terminal and drives it like a person would, with
// expect/send steps, then prints the whole transcript. A test tool for the REPL.
//
//   ptyrun [-t SECONDS] STEP... -- COMMAND [ARGS...]
//   STEP: -x TEXT   wait until TEXT appears in the output (since the previous -x match)
//         -s TEXT   send TEXT (C escapes: \n \t \r \x04 \\ \e)
//
// Exit status: the command's exit status (128+signal when killed); 124 when an expect step
// timed out (the transcript so far is printed, with a note on stderr).
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

typedef struct Step {
  char kind;  // 'x' expect, 's' send
  char *text;
  size_t len;
} Step;

static char *transcript;
static size_t tlen, tcap;

static void append(const char *p, size_t n) {
  if (tlen + n + 1 > tcap) {
    size_t ncap = tcap ? tcap * 2 : 4096;
    while (ncap < tlen + n + 1) {
      ncap *= 2;
    }
    char *q = realloc(transcript, ncap);
    if (!q) {
      perror("ptyrun: realloc");
      exit(2);
    }
    transcript = q;
    tcap = ncap;
  }
  memcpy(transcript + tlen, p, n);
  tlen += n;
  transcript[tlen] = '\0';
}

static size_t unescape(char *s) {
  char *w = s;
  for (char *r = s; *r; r++) {
    if (*r != '\\' || r[1] == '\0') {
      *w++ = *r;
      continue;
    }
    r++;
    switch (*r) {
      case 'n':
        *w++ = '\n';
        break;
      case 't':
        *w++ = '\t';
        break;
      case 'r':
        *w++ = '\r';
        break;
      case 'e':
        *w++ = '\033';
        break;
      case 'x': {
        char hex[3] = {0, 0, 0};
        if (r[1] && r[2]) {
          hex[0] = r[1];
          hex[1] = r[2];
          *w++ = (char)strtol(hex, NULL, 16);
          r += 2;
        }
        break;
      }
      default:
        *w++ = *r;
        break;
    }
  }
  *w = '\0';
  return (size_t)(w - s);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Reads whatever is available within `ms` milliseconds; returns 0 at EOF.
static int pump(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  int r = poll(&p, 1, ms);
  if (r <= 0) {
    return 1;
  }
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n <= 0) {
    return 0;  // EIO when the child side closed
  }
  append(buf, (size_t)n);
  return 1;
}

int main(int argc, char **argv) {
  double timeout = 10.0;
  Step *steps = calloc((size_t)argc, sizeof *steps);
  int nsteps = 0;
  int i = 1;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "ptyrun: option %s needs a value\n", argv[i]);
      return 2;
    }
    if (strcmp(argv[i], "-t") == 0) {
      timeout = atof(argv[++i]);
    } else if (strcmp(argv[i], "-x") == 0 || strcmp(argv[i], "-s") == 0) {
      steps[nsteps].kind = argv[i][1];
      steps[nsteps].text = argv[++i];
      steps[nsteps].len = unescape(steps[nsteps].text);
      nsteps++;
    } else {
      fprintf(stderr, "ptyrun: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (i >= argc) {
    fprintf(stderr, "usage: ptyrun [-t SECONDS] [-x TEXT | -s TEXT]... -- COMMAND [ARGS...]\n");
    return 2;
  }
  struct winsize ws = {.ws_row = 40, .ws_col = 120};
  int master;
  pid_t pid = forkpty(&master, NULL, NULL, &ws);
  if (pid < 0) {
    perror("ptyrun: forkpty");
    return 2;
  }
  if (pid == 0) {
    execvp(argv[i], argv + i);
    fprintf(stderr, "ptyrun: %s: %s\n", argv[i], strerror(errno));
    _exit(127);
  }
  size_t matched = 0;  // expectations search after the previous match
  int status = 0;
  int open = 1;
  for (int s = 0; s < nsteps; s++) {
    if (steps[s].kind == 's') {
      if (write(master, steps[s].text, steps[s].len) < 0) {
        perror("ptyrun: write");
      }
      continue;
    }
    double deadline = now() + timeout;
    for (;;) {
      char *hit = tlen > matched ? strstr(transcript + matched, steps[s].text) : NULL;
      if (hit) {
        matched = (size_t)(hit - transcript) + steps[s].len;
        break;
      }
      double left = deadline - now();
      if (left <= 0 || !open) {
        fwrite(transcript, 1, tlen, stdout);
        fprintf(stderr, "\nptyrun: timed out waiting for \"%s\" (step %d)\n", steps[s].text, s + 1);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 124;
      }
      open = pump(master, (int)(left * 1000) + 1);
    }
  }
  // Drain until the child closes the terminal, then reap it.
  double deadline = now() + timeout;
  while (open && now() < deadline) {
    open = pump(master, 100);
  }
  if (open) {
    kill(pid, SIGKILL);
  }
  waitpid(pid, &status, 0);
  close(master);
  if (transcript) {
    fwrite(transcript, 1, tlen, stdout);
  }
  free(steps);
  if (open) {
    fprintf(stderr, "ptyrun: the command did not exit within %g s\n", timeout);
    return 124;
  }
  free(transcript);
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}
