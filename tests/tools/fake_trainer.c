// Test double of a training process: replays a log file or generates Megatron-LM iteration lines
// at a chosen pace, and on request crashes, hangs, goes NaN, floods, ignores SIGTERM or forks
// children that do, and records the signals it receives, so that the supervisor can be tested
// without a GPU.
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const char k_usage[] =
    "usage: fake_trainer [options]\n"
    "  --file F              replay the lines of F\n"
    "  --megatron-gen N      print an argument dump, then N Megatron iteration lines\n"
    "  --lines-per-sec N     pace: N lines per second\n"
    "  --interval MS         pace: MS milliseconds between lines (fractions allowed)\n"
    "  --crash-at N          abort (SIGABRT) right after the Nth line\n"
    "  --exit-code C         exit status at the end (default 0)\n"
    "  --hang-after N        after the Nth line print nothing more and keep running\n"
    "  --nan-at N            from the Nth iteration line on, the loss is NaN\n"
    "  --nan-style S         drop (the loss segment disappears, as Megatron does; default)\n"
    "                        or nan (the value is printed as nan)\n"
    "  --flood B             after the lines, print filler lines at B bytes/s (0: no limit)\n"
    "  --duration S          stop flooding after S seconds (default: never)\n"
    "  --long-line N         first print one line of N 'x' characters\n"
    "  --ignore-sigterm      ignore SIGTERM and SIGINT\n"
    "  --ignore-sigint       ignore SIGINT only\n"
    "  --signal-log F        append 'SIGINT' or 'SIGTERM' to F (a line each) for every one\n"
    "                        received, then ignore it or die of it as told above\n"
    "  --fork-children N     fork N children (same process group) that ignore SIGTERM and\n"
    "                        SIGINT and sleep until killed\n"
    "  --escape              fork a child that leaves the process group (setsid), keeps\n"
    "                        stdout open and exits after 120 s; print 'escaped <pid>'\n"
    "  --stderr              write every line to stderr too\n"
    "  --print-env NAME      first print NAME=value, or 'NAME is unset' (repeatable)\n"
    "generated lines: --step-ms F (1000), --gbs N (64), --lr F (3e-4), --loss-start F (11),\n"
    "  --loss-end F (2), --tflops F (0: segment omitted), --seed N (1234)\n";

typedef struct Opts {
  const char *file;
  long gen;
  double interval_ms;
  long crash_at, hang_after, nan_at, fork_children;
  int exit_code;
  bool nan_drop, ignore_sigterm, ignore_sigint, to_stderr, escape;
  const char *signal_log;
  double flood;  // bytes per second, < 0: off
  double duration_s;
  long long_line;
  const char *env_names[32];
  int n_env;
  double step_ms, lr, loss_start, loss_end, tflops;
  long gbs, seed;
} Opts;

static long printed;  // lines written so far
static int64_t start_ns;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t) {
  struct timespec ts = {.tv_sec = (time_t)(t / 1000000000), .tv_nsec = (long)(t % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

static _Noreturn void hang(void) {
  for (;;) {
    pause();
  }
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      exit(3);  // reader gone (when SIGPIPE is ignored) or disk full
    }
    p += w;
    n -= (size_t)w;
  }
}

// Writes one line (a '\n' is added) in a single write, waiting first for its turn when paced;
// then applies --crash-at and --hang-after.
static void emit(const Opts *o, const char *line, size_t len) {
  if (o->interval_ms > 0) {
    // Line i is due at start + i * interval; lines due within 1 ms are written at once, so
    // that high rates come out in small bursts instead of one sleep per line.
    int64_t due = start_ns + (int64_t)((double)printed * o->interval_ms * 1e6);
    if (due - now_ns() > 1000000) {
      sleep_until(due);
    }
  }
  char *buf = malloc(len + 1);
  if (!buf) {
    exit(4);
  }
  memcpy(buf, line, len);
  buf[len] = '\n';
  write_all(1, buf, len + 1);
  if (o->to_stderr) {
    write_all(2, buf, len + 1);
  }
  free(buf);
  printed++;
  if (o->crash_at > 0 && printed == o->crash_at) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    abort();
  }
  if (o->hang_after > 0 && printed == o->hang_after) {
    hang();
  }
}

static bool is_iteration_line(const char *line) {
  // Megatron-LM megatron/training/training.py, training_log: the line carries "iteration N/T"
  // and "elapsed time per iteration (ms)" in every version (LOG_FORMATS.md 2.1, 2.3).
  return strstr(line, "iteration") && strstr(line, "elapsed time per iteration");
}

static bool label_is_loss(const char *seg, size_t n) {
  const char *colon = memchr(seg, ':', n);
  if (!colon) {
    return false;
  }
  const char *end = colon;
  while (end > seg && end[-1] == ' ') {
    end--;
  }
  return end - seg >= 4 && memcmp(end - 4, "loss", 4) == 0;
}

// Rewrites every "<...loss>: value" segment of an iteration line: dropped (Megatron omits a loss
// whose interval mean fails its "> 0" test, which NaN fails; training.py, training_log) or
// printed as nan. Segments are the '|'-separated fields; "loss scale" is not a loss label.
static size_t rewrite_nan(const char *line, char *out, bool drop) {
  size_t o = 0, n = strlen(line);
  const char *seg = line;
  for (;;) {
    const char *bar = memchr(seg, '|', n - (size_t)(seg - line));
    size_t len = bar ? (size_t)(bar - seg) : n - (size_t)(seg - line);
    if (label_is_loss(seg, len)) {
      if (!drop) {
        const char *colon = memchr(seg, ':', len);
        size_t head = (size_t)(colon - seg) + 1;
        memcpy(out + o, seg, head);
        o += head;
        memcpy(out + o, " nan ", 5);
        o += 5;
        if (bar) {
          out[o++] = '|';
        }
      }
    } else {
      memcpy(out + o, seg, len);
      o += len;
      if (bar) {
        out[o++] = '|';
      }
    }
    if (!bar) {
      break;
    }
    seg = bar + 1;
  }
  out[o] = '\0';
  return o;
}

static long iteration_lines;

static void emit_log_line(const Opts *o, const char *line, size_t len) {
  if (o->nan_at > 0 && is_iteration_line(line)) {
    iteration_lines++;
    if (iteration_lines >= o->nan_at) {
      char *out = malloc(len + 64 * 8);
      if (!out) {
        exit(4);
      }
      size_t n = rewrite_nan(line, out, o->nan_drop);
      emit(o, out, n);
      free(out);
      return;
    }
  }
  emit(o, line, len);
}

static void replay(const Opts *o) {
  FILE *f = fopen(o->file, "rb");
  if (!f) {
    fprintf(stderr, "fake_trainer: %s: %s\n", o->file, strerror(errno));
    exit(2);
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, f)) >= 0) {
    if (n > 0 && line[n - 1] == '\n') {
      line[--n] = '\0';
    }
    emit_log_line(o, line, (size_t)n);
  }
  free(line);
  fclose(f);
}

// Megatron-LM's argument dump (megatron/training/arguments.py, _print_args): a header of 24
// dashes, names sorted case-insensitively, each "  name <48 - len dots> value", a footer.
static void print_args(const Opts *o) {
  char values[6][64];
  snprintf(values[0], sizeof values[0], "%ld", o->gbs);
  snprintf(values[1], sizeof values[1], "%d", 1);
  snprintf(values[2], sizeof values[2], "%g", o->lr);
  snprintf(values[3], sizeof values[3], "%d", 1);
  snprintf(values[4], sizeof values[4], "%ld", o->seed);
  snprintf(values[5], sizeof values[5], "%ld", o->gen);
  const char *names[6] = {"global_batch_size", "log_interval", "lr",
                          "micro_batch_size",  "seed",         "train_iters"};
  const char *h = "------------------------ arguments ------------------------";
  emit(o, h, strlen(h));
  for (int i = 0; i < 6; i++) {
    char line[160];
    size_t nl = strlen(names[i]);
    char dots[49];
    size_t nd = nl < 48 ? 48 - nl : 0;
    memset(dots, '.', nd);
    dots[nd] = '\0';
    int len = snprintf(line, sizeof line, "  %s %s %s", names[i], dots, values[i]);
    emit(o, line, (size_t)len);
  }
  const char *f = "-------------------- end of arguments ---------------------";
  emit(o, f, strlen(f));
}

// One iteration line as Megatron-LM core_v0.16+ prints it (training.py, training_log; field
// formats in LOG_FORMATS.md 2.1): timestamp with microseconds, then " label: value |" fields.
static void generate(const Opts *o) {
  print_args(o);
  const double pi = 3.14159265358979323846;
  long n = o->gen;
  long warmup = n / 10 > 0 ? n / 10 : 1;
  for (long i = 1; i <= n; i++) {
    double step = i == 1 ? 3.0 * o->step_ms
                         : o->step_ms * (1.0 + 0.01 * (double)((i * 37 + o->seed) % 7 - 3) / 3.0);
    double loss = o->loss_end + (o->loss_start - o->loss_end) * exp(-5.0 * (double)(i - 1) / n) +
                  0.01 * sin((double)(i + o->seed));
    double lr = i <= warmup ? o->lr * (double)i / (double)warmup
                            : o->lr * (0.1 + 0.45 * (1.0 + cos(pi * (double)(i - warmup) /
                                                               (double)(n - warmup + 1))));
    double gnorm = 1.0 + 2.0 * exp(-3.0 * (double)i / (double)n);
    bool nan = o->nan_at > 0 && i >= o->nan_at;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    char line[1024];
    int len = snprintf(line, sizeof line,
                       " [%s.%06ld] iteration %8ld/%8ld | consumed samples: %12ld | elapsed time "
                       "per iteration (ms): %.1f |",
                       stamp, ts.tv_nsec / 1000, i, n, i * o->gbs, step);
    if (o->tflops > 0) {
      len += snprintf(line + len, sizeof line - (size_t)len,
                      " throughput per GPU (TFLOP/s/GPU): %.1f |",
                      o->tflops * 1000.0 / step * o->step_ms / 1000.0);
    }
    len += snprintf(line + len, sizeof line - (size_t)len,
                    " learning rate: %.6E | global batch size: %5ld |", lr, o->gbs);
    if (!nan) {
      len += snprintf(line + len, sizeof line - (size_t)len, " lm loss: %.6E |", loss);
    } else if (!o->nan_drop) {
      len += snprintf(line + len, sizeof line - (size_t)len, " lm loss: nan |");
    }
    if (nan) {
      len += snprintf(line + len, sizeof line - (size_t)len, " loss scale: 1.0 | grad norm: nan |");
    } else {
      len += snprintf(line + len, sizeof line - (size_t)len, " loss scale: 1.0 | grad norm: %.3f |",
                      gnorm);
    }
    len += snprintf(line + len, sizeof line - (size_t)len,
                    " number of skipped iterations: %3d | number of nan iterations: %3d |", 0, 0);
    emit(o, line, (size_t)len);
  }
}

static void flood(const Opts *o) {
  enum { BLOCK = 64 * 1024, LINE = 128 };
  char *block = malloc(BLOCK);
  if (!block) {
    exit(4);
  }
  int64_t t0 = now_ns();
  double sent = 0;
  unsigned long long seq = 0;
  for (;;) {
    int64_t t = now_ns();
    double elapsed = (double)(t - t0) / 1e9;
    if (o->duration_s > 0 && elapsed >= o->duration_s) {
      break;
    }
    double budget = o->flood > 0 ? o->flood * elapsed - sent : (double)BLOCK;
    if (budget < LINE) {
      sleep_until(t + 5000000);  // 5 ms slices keep the rate smooth
      continue;
    }
    size_t fill = 0;
    while (fill + LINE <= BLOCK && (double)(fill + LINE) <= budget) {
      int k = snprintf(block + fill, LINE, "flood %012llu ", seq++);
      memset(block + fill + k, 'x', (size_t)(LINE - 1 - k));
      block[fill + LINE - 1] = '\n';
      fill += LINE;
    }
    write_all(1, block, fill);
    sent += (double)fill;
  }
  free(block);
}

static void ignore_term(void) {
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
}

// --signal-log: the file and which of SIGINT/SIGTERM to survive (signal-handler state).
static int g_signal_log = -1;
static volatile sig_atomic_t g_survive_int, g_survive_term;

// Records the signal with one write (async-signal-safe, O_APPEND: lines never interleave), then
// returns (ignored) or dies of it with the default action, as a program without a handler would.
static void record_signal(int sig) {
  int saved = errno;
  const char *line = sig == SIGINT ? "SIGINT\n" : "SIGTERM\n";
  ssize_t w = write(g_signal_log, line, strlen(line));
  (void)w;
  bool survive = sig == SIGINT ? g_survive_int : g_survive_term;
  if (!survive) {
    signal(sig, SIG_DFL);
    raise(sig);  // blocked until the handler returns, then fatal
  }
  errno = saved;
}

static void setup_signals(const Opts *o) {
  if (!o->signal_log) {
    if (o->ignore_sigterm) {
      ignore_term();
    } else if (o->ignore_sigint) {
      signal(SIGINT, SIG_IGN);
    }
    return;
  }
  g_signal_log = open(o->signal_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (g_signal_log < 0) {
    fprintf(stderr, "fake_trainer: %s: %s\n", o->signal_log, strerror(errno));
    exit(2);
  }
  g_survive_int = o->ignore_sigterm || o->ignore_sigint;
  g_survive_term = o->ignore_sigterm;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = record_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

// Forks a child that moves to a session of its own (so group kills miss it) while it keeps our
// stdout open; returns once the child has left the group.
static void escape(const Opts *o) {
  int p[2];
  if (pipe(p) != 0) {
    perror("fake_trainer: pipe");
    exit(2);
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("fake_trainer: fork");
    exit(2);
  }
  if (pid == 0) {
    close(p[0]);
    setsid();
    ssize_t w = write(p[1], "x", 1);
    (void)w;
    close(p[1]);
    alarm(120);  // never outlives a failed test by long
    hang();
  }
  close(p[1]);
  char b;
  ssize_t r = read(p[0], &b, 1);
  (void)r;
  close(p[0]);
  char line[64];
  int len = snprintf(line, sizeof line, "escaped %d", (int)pid);
  emit(o, line, (size_t)len);
}

static long parse_long(const char *s, const char *what) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < 0) {
    fprintf(stderr, "fake_trainer: %s: not a non-negative integer: %s\n", what, s);
    exit(2);
  }
  return v;
}

static double parse_double(const char *s, const char *what) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !(v >= 0)) {
    fprintf(stderr, "fake_trainer: %s: not a non-negative number: %s\n", what, s);
    exit(2);
  }
  return v;
}

int main(int argc, char **argv) {
  Opts o = {.flood = -1,
            .nan_drop = true,
            .step_ms = 1000.0,
            .lr = 3e-4,
            .loss_start = 11.0,
            .loss_end = 2.0,
            .gbs = 64,
            .seed = 1234};
  enum {
    O_FILE = 256,
    O_GEN,
    O_LPS,
    O_INTERVAL,
    O_CRASH,
    O_EXIT,
    O_HANG,
    O_NAN,
    O_NANSTYLE,
    O_FLOOD,
    O_DURATION,
    O_LONG,
    O_IGNORE,
    O_IGNORE_INT,
    O_SIGLOG,
    O_FORK,
    O_ESCAPE,
    O_STDERR,
    O_ENV,
    O_STEP,
    O_GBS,
    O_LR,
    O_LOSS0,
    O_LOSS1,
    O_TFLOPS,
    O_SEED,
    O_HELP
  };
  static const struct option longopts[] = {
      {"file", required_argument, NULL, O_FILE},
      {"megatron-gen", required_argument, NULL, O_GEN},
      {"lines-per-sec", required_argument, NULL, O_LPS},
      {"interval", required_argument, NULL, O_INTERVAL},
      {"crash-at", required_argument, NULL, O_CRASH},
      {"exit-code", required_argument, NULL, O_EXIT},
      {"hang-after", required_argument, NULL, O_HANG},
      {"nan-at", required_argument, NULL, O_NAN},
      {"nan-style", required_argument, NULL, O_NANSTYLE},
      {"flood", required_argument, NULL, O_FLOOD},
      {"duration", required_argument, NULL, O_DURATION},
      {"long-line", required_argument, NULL, O_LONG},
      {"ignore-sigterm", no_argument, NULL, O_IGNORE},
      {"ignore-sigint", no_argument, NULL, O_IGNORE_INT},
      {"signal-log", required_argument, NULL, O_SIGLOG},
      {"fork-children", required_argument, NULL, O_FORK},
      {"escape", no_argument, NULL, O_ESCAPE},
      {"stderr", no_argument, NULL, O_STDERR},
      {"print-env", required_argument, NULL, O_ENV},
      {"step-ms", required_argument, NULL, O_STEP},
      {"gbs", required_argument, NULL, O_GBS},
      {"lr", required_argument, NULL, O_LR},
      {"loss-start", required_argument, NULL, O_LOSS0},
      {"loss-end", required_argument, NULL, O_LOSS1},
      {"tflops", required_argument, NULL, O_TFLOPS},
      {"seed", required_argument, NULL, O_SEED},
      {"help", no_argument, NULL, O_HELP},
      {NULL, 0, NULL, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
      case O_FILE:
        o.file = optarg;
        break;
      case O_GEN:
        o.gen = parse_long(optarg, "--megatron-gen");
        break;
      case O_LPS: {
        double lps = parse_double(optarg, "--lines-per-sec");
        o.interval_ms = lps > 0 ? 1000.0 / lps : 0;
        break;
      }
      case O_INTERVAL:
        o.interval_ms = parse_double(optarg, "--interval");
        break;
      case O_CRASH:
        o.crash_at = parse_long(optarg, "--crash-at");
        break;
      case O_EXIT:
        o.exit_code = (int)parse_long(optarg, "--exit-code");
        break;
      case O_HANG:
        o.hang_after = parse_long(optarg, "--hang-after");
        break;
      case O_NAN:
        o.nan_at = parse_long(optarg, "--nan-at");
        break;
      case O_NANSTYLE:
        if (strcmp(optarg, "drop") != 0 && strcmp(optarg, "nan") != 0) {
          fprintf(stderr, "fake_trainer: --nan-style: drop or nan expected: %s\n", optarg);
          return 2;
        }
        o.nan_drop = strcmp(optarg, "drop") == 0;
        break;
      case O_FLOOD:
        o.flood = parse_double(optarg, "--flood");
        break;
      case O_DURATION:
        o.duration_s = parse_double(optarg, "--duration");
        break;
      case O_LONG:
        o.long_line = parse_long(optarg, "--long-line");
        break;
      case O_IGNORE:
        o.ignore_sigterm = true;
        break;
      case O_IGNORE_INT:
        o.ignore_sigint = true;
        break;
      case O_SIGLOG:
        o.signal_log = optarg;
        break;
      case O_FORK:
        o.fork_children = parse_long(optarg, "--fork-children");
        break;
      case O_ESCAPE:
        o.escape = true;
        break;
      case O_STDERR:
        o.to_stderr = true;
        break;
      case O_ENV:
        if (o.n_env < 32) {
          o.env_names[o.n_env++] = optarg;
        }
        break;
      case O_STEP:
        o.step_ms = parse_double(optarg, "--step-ms");
        break;
      case O_GBS:
        o.gbs = parse_long(optarg, "--gbs");
        break;
      case O_LR:
        o.lr = parse_double(optarg, "--lr");
        break;
      case O_LOSS0:
        o.loss_start = parse_double(optarg, "--loss-start");
        break;
      case O_LOSS1:
        o.loss_end = parse_double(optarg, "--loss-end");
        break;
      case O_TFLOPS:
        o.tflops = parse_double(optarg, "--tflops");
        break;
      case O_SEED:
        o.seed = parse_long(optarg, "--seed");
        break;
      case O_HELP:
        fputs(k_usage, stdout);
        return 0;
      default:
        fputs(k_usage, stderr);
        return 2;
    }
  }
  if (optind < argc || (o.file && o.gen > 0)) {
    fputs(k_usage, stderr);
    return 2;
  }
  start_ns = now_ns();
  setup_signals(&o);
  for (long i = 0; i < o.fork_children; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fake_trainer: fork");
      return 2;
    }
    if (pid == 0) {
      ignore_term();
      hang();
    }
  }
  if (o.escape) {
    escape(&o);
  }
  for (int i = 0; i < o.n_env; i++) {
    const char *v = getenv(o.env_names[i]);
    char line[4096];
    int len = v ? snprintf(line, sizeof line, "%s=%s", o.env_names[i], v)
                : snprintf(line, sizeof line, "%s is unset", o.env_names[i]);
    emit(&o, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
  }
  if (o.long_line > 0) {
    char *big = malloc((size_t)o.long_line);
    if (!big) {
      return 4;
    }
    memset(big, 'x', (size_t)o.long_line);
    emit(&o, big, (size_t)o.long_line);
    free(big);
  }
  if (o.file) {
    replay(&o);
  } else if (o.gen > 0) {
    generate(&o);
  }
  if (o.flood >= 0) {
    flood(&o);
  }
  return o.exit_code;
}
