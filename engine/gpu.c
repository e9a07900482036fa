// GPU probe orchestration: one child process per library (gpu_probe.c runs in it), and the
// line-based report a child writes back, parsed here.
//
// Report format (one line per fact, written by engine/gpu_probe.c, parsed here):
//   b<TAB>key<TAB>value     a fact about the library (status, library, reason, ...)
//   <n><TAB>key<TAB>value   a fact about its device n (0 <= n < TP_GPU_DEVICES_MAX)
//   end                     the child finished; a report without it was cut short
// Values escape '\\' '\n' '\t' '\r' as \\ \n \t \r and other control bytes as \xHH.
#include "gpu.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_probe.h"

#define DEFAULT_TIMEOUT_S 20.0

const char *tp_gpu_status_name(TpGpuStatus status) {
  switch (status) {
    case TP_GPU_OK:
      return "ok";
    case TP_GPU_ABSENT:
      return "absent";
    case TP_GPU_NODEVICE:
      return "no_device";
    case TP_GPU_FAILED:
      return "error";
    case TP_GPU_TIMEOUT:
      return "timeout";
    case TP_GPU_CRASHED:
      return "crashed";
  }
  return "?";
}

static int status_from_name(const char *s) {
  for (int st = TP_GPU_OK; st <= TP_GPU_CRASHED; st++) {
    if (strcmp(s, tp_gpu_status_name((TpGpuStatus)st)) == 0) {
      return st;
    }
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Report parsing

void tp_gpu_probe_init(TpGpuProbe *p) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < TP_GPU_API_COUNT; i++) {
    TpGpuBackend *b = &p->backends[i];
    b->api = (TpGpuApi)i;
    b->status = TP_GPU_ABSENT;
    b->device_count = -1;
  }
}

void tp_gpu_probe_free(TpGpuProbe *p) {
  for (int i = 0; i < TP_GPU_API_COUNT; i++) {
    tp_buf_free(&p->backends[i].tried);
    tp_buf_free(&p->backends[i].output);
  }
  free(p->devices);
  memset(p, 0, sizeof *p);
}

static TpGpuDevice *device_slot(TpGpuProbe *p, TpGpuApi api, int index) {
  for (size_t i = 0; i < p->ndevices; i++) {
    if (p->devices[i].api == api && p->devices[i].index == index) {
      return &p->devices[i];
    }
  }
  if (p->ndevices == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 16;
    TpGpuDevice *d = realloc(p->devices, cap * sizeof *d);
    if (!d) {
      return NULL;
    }
    p->devices = d;
    p->cap = cap;
  }
  TpGpuDevice *d = &p->devices[p->ndevices++];
  memset(d, 0, sizeof *d);
  d->api = api;
  d->index = index;
  d->cc_major = d->cc_minor = -1;
  d->sm_count = d->clock_khz = d->memory_clock_khz = d->memory_bus_width = -1;
  d->power_limit_mw = -1;
  d->memory_used = -1;
  d->clock_now_khz = d->app_clock_khz = -1;
  d->ecc = d->persistence = d->nprocesses = -1;
  return d;
}

// Parses a decimal integer value in [lo, hi]. Returns 0 or -1.
static int parse_int(const char *s, long long lo, long long hi, long long *out) {
  if (!*s) {
    return -1;
  }
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) {
    return -1;
  }
  *out = v;
  return 0;
}

// Copies `src` into `dst`, cut to fit; fields of a report may be longer than their slot.
static void copy_cut(char *dst, size_t dstsz, const char *src) {
  size_t n = strlen(src);
  if (n >= dstsz) {
    n = dstsz - 1;
  }
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static void append_joined(char *dst, size_t dstsz, const char *sep, const char *s) {
  size_t len = strlen(dst);
  if (len + 1 >= dstsz) {
    return;
  }
  if (len > 0) {
    copy_cut(dst + len, dstsz - len, sep);
    len = strlen(dst);
  }
  copy_cut(dst + len, dstsz - len, s);
}

static int backend_field(TpGpuBackend *b, const char *key, const char *value) {
  long long v = 0;
#define STR_FIELD(name)                                                                            \
  if (strcmp(key, #name) == 0) {                                                                   \
    copy_cut(b->name, sizeof b->name, value);                                                      \
    return 0;                                                                                      \
  }
  STR_FIELD(library)
  STR_FIELD(soname)
  STR_FIELD(reason)
  STR_FIELD(call)
  STR_FIELD(code_name)
  STR_FIELD(code_text)
  STR_FIELD(driver_version)
  STR_FIELD(runtime_version)
  STR_FIELD(version)
  STR_FIELD(cuda_version)
  STR_FIELD(phase)
#undef STR_FIELD
  if (strcmp(key, "status") == 0) {
    int st = status_from_name(value);
    if (st < 0) {
      return -1;
    }
    b->status = (TpGpuStatus)st;
    return 0;
  }
  if (strcmp(key, "code") == 0) {
    if (parse_int(value, -2147483648LL, 4294967295LL, &v) != 0) {
      return -1;
    }
    b->code = (int)v;  // ROCm SMI's 0xFFFFFFFF reads as -1
    return 0;
  }
  if (strcmp(key, "device_count") == 0) {
    if (parse_int(value, -1, 1000000, &v) != 0) {
      return -1;
    }
    b->device_count = (int)v;
    return 0;
  }
  if (strcmp(key, "tried") == 0) {
    if (tp_buf_append(&b->tried, value, strlen(value)) != 0 ||
        tp_buf_append(&b->tried, "\n", 1) != 0) {
      return -2;
    }
    return 0;
  }
  return -1;
}

static int device_field(TpGpuDevice *d, const char *key, const char *value) {
  long long v = 0;
#define STR_FIELD(name)                                                                            \
  if (strcmp(key, #name) == 0) {                                                                   \
    copy_cut(d->name, sizeof d->name, value);                                                      \
    return 0;                                                                                      \
  }
  STR_FIELD(vendor)
  STR_FIELD(name)
  STR_FIELD(arch)
  STR_FIELD(arch_full)
  STR_FIELD(uuid)
#undef STR_FIELD
#define INT_FIELD(name, lo, hi)                                                                    \
  if (strcmp(key, #name) == 0) {                                                                   \
    if (parse_int(value, lo, hi, &v) != 0) {                                                       \
      return -1;                                                                                   \
    }                                                                                              \
    d->name = (int)v;                                                                              \
    return 0;                                                                                      \
  }
  INT_FIELD(cc_major, -1, 1000)
  INT_FIELD(cc_minor, -1, 1000)
  INT_FIELD(sm_count, -1, 1000000)
  INT_FIELD(clock_khz, -1, 1000000000)
  INT_FIELD(memory_clock_khz, -1, 1000000000)
  INT_FIELD(memory_bus_width, -1, 1000000)
  INT_FIELD(power_limit_mw, -1, 1000000000)
  INT_FIELD(clock_now_khz, -1, 1000000000)
  INT_FIELD(app_clock_khz, -1, 1000000000)
  INT_FIELD(ecc, -1, 1)
  INT_FIELD(persistence, -1, 1)
  INT_FIELD(nprocesses, -1, 1000000)
#undef INT_FIELD
  if (strcmp(key, "memory_used") == 0) {
    if (parse_int(value, -1, (long long)1 << 60, &v) != 0) {
      return -1;
    }
    d->memory_used = (int64_t)v;
    return 0;
  }
  if (strcmp(key, "process") == 0) {
    // "pid bytes": one line per process, kept as "pid:bytes" words.
    long long pid = 0, bytes = 0;
    char extra = 0;
    if (sscanf(value, "%lld %lld %c", &pid, &bytes, &extra) != 2 || pid < 0 || bytes < -1) {
      return -1;
    }
    char word[48];
    snprintf(word, sizeof word, "%lld:%lld", pid, bytes);
    if (strlen(d->processes) + strlen(word) + 2 <= sizeof d->processes) {  // whole words only
      append_joined(d->processes, sizeof d->processes, " ", word);
    }
    return 0;
  }
  if (strcmp(key, "memory_total") == 0) {
    if (parse_int(value, 0, (long long)1 << 60, &v) != 0) {
      return -1;
    }
    d->memory_total = (uint64_t)v;
    return 0;
  }
  if (strcmp(key, "pci_bus_id") == 0) {
    // A malformed id is kept out of the normalised field but not fatal.
    if (tp_gpu_pci_normalize(value, d->pci_bus_id, sizeof d->pci_bus_id) != 0) {
      append_joined(d->error, sizeof d->error, "; ", "unreadable PCI bus id");
    }
    return 0;
  }
  if (strcmp(key, "error") == 0) {
    append_joined(d->error, sizeof d->error, "; ", value);
    return 0;
  }
  return -1;
}

int tp_gpu_probe_parse(TpGpuProbe *p, TpGpuApi api, const char *data, size_t len,
                       const char *subject, TpError *err) {
  if ((unsigned)api >= TP_GPU_API_COUNT) {
    return tp_error_set(err, TP_EINVAL, "%s: unknown api %d", subject, (int)api);
  }
  if (len > TP_GPU_REPORT_MAX) {
    return tp_error_set(err, TP_ELIMIT, "%s: report of %zu bytes exceeds %u", subject, len,
                        TP_GPU_REPORT_MAX);
  }
  TpGpuBackend *b = &p->backends[api];
  size_t pos = 0;
  int lineno = 0;
  bool ended = false;
  while (pos < len) {
    lineno++;
    const char *line = data + pos;
    const char *nl = memchr(line, '\n', len - pos);
    if (!nl) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: truncated (no newline)", subject, lineno);
    }
    size_t llen = (size_t)(nl - line);
    pos += llen + 1;
    if (ended) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: data after 'end'", subject, lineno);
    }
    if (llen == 3 && memcmp(line, "end", 3) == 0) {
      ended = true;
      continue;
    }
    if (memchr(line, '\0', llen)) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: NUL byte", subject, lineno);
    }
    const char *t1 = memchr(line, '\t', llen);
    const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(line + llen - (t1 + 1))) : NULL;
    if (!t1 || !t2) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: expected <tag>\\t<key>\\t<value>", subject,
                          lineno);
    }
    char tag[16], key[32], value[1024];
    size_t taglen = (size_t)(t1 - line), keylen = (size_t)(t2 - t1 - 1);
    if (taglen == 0 || taglen >= sizeof tag || keylen == 0 || keylen >= sizeof key) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: bad tag or key", subject, lineno);
    }
    memcpy(tag, line, taglen);
    tag[taglen] = '\0';
    memcpy(key, t1 + 1, keylen);
    key[keylen] = '\0';
    if (tp_gpu_unescape(t2 + 1, (size_t)(line + llen - (t2 + 1)), value, sizeof value) != 0) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: bad escape in value of '%s'", subject,
                          lineno, key);
    }
    int rc;
    if (strcmp(tag, "b") == 0) {
      rc = backend_field(b, key, value);
    } else {
      long long idx = 0;
      if (parse_int(tag, 0, TP_GPU_DEVICES_MAX - 1, &idx) != 0) {
        return tp_error_set(err, TP_EPARSE, "%s: line %d: bad device index '%s'", subject, lineno,
                            tag);
      }
      TpGpuDevice *d = device_slot(p, api, (int)idx);
      if (!d) {
        return tp_error_set(err, TP_ENOMEM, "%s: out of memory", subject);
      }
      rc = device_field(d, key, value);
    }
    if (rc == -2) {
      return tp_error_set(err, TP_ENOMEM, "%s: out of memory", subject);
    }
    if (rc != 0) {
      return tp_error_set(err, TP_EPARSE, "%s: line %d: bad field '%s' = '%.60s'", subject, lineno,
                          key, value);
    }
  }
  if (!ended) {
    return tp_error_set(err, TP_EPARSE, "%s: report ends before 'end' (line %d)", subject, lineno);
  }
  b->device_errors = 0;
  for (size_t i = 0; i < p->ndevices; i++) {
    if (p->devices[i].api == api && p->devices[i].error[0]) {
      b->device_errors++;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The probe

typedef struct ChildArg {
  TpGpuApi api;
  const char *libpath;
} ChildArg;

static int probe_child_main(void *arg) {
  const ChildArg *a = arg;
  tp_gpu_probe_child(a->api, a->libpath, 3);
  static const char end[] = "end\n";
  ssize_t w = write(3, end, sizeof end - 1);
  return w == (ssize_t)(sizeof end - 1) ? 0 : 1;
}

typedef struct Running {
  TpGpuApi api;
  pid_t pid;
  int rfd;    // report pipe, read end; -1 once at EOF
  int outfd;  // memfd with the child's stdout/stderr
  TpBuf report;
  bool overflow;
  double started, ended;
} Running;

// Reads what is available on r->rfd; closes it at EOF. Returns 0, or -errno.
static int drain(Running *r) {
  char buf[16384];
  for (;;) {
    ssize_t n = read(r->rfd, buf, sizeof buf);
    if (n > 0) {
      if (r->report.len + (size_t)n > TP_GPU_REPORT_MAX) {
        r->overflow = true;
      } else if (tp_buf_append(&r->report, buf, (size_t)n) != 0) {
        return TP_ENOMEM;
      }
      continue;
    }
    if (n == 0) {
      close(r->rfd);
      r->rfd = -1;
      r->ended = tp_gpu_monotonic();
      return 0;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    }
    return -errno;
  }
}

// Copies at most TP_GPU_OUTPUT_MAX bytes of the child's captured output into `b`.
static void collect_output(int fd, TpBuf *b) {
  off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0) {
    return;
  }
  size_t want = (size_t)size < TP_GPU_OUTPUT_MAX ? (size_t)size : TP_GPU_OUTPUT_MAX;
  if (tp_buf_reserve(b, want) != 0) {
    return;
  }
  ssize_t n = pread(fd, b->data + b->len, want, 0);
  if (n > 0) {
    b->len += (size_t)n;
  }
  if ((size_t)size > want) {
    tp_buf_printf(b, "\n[%jd more bytes not kept]\n", (intmax_t)size - (intmax_t)want);
  }
}

static void finish_one(TpGpuProbe *p, Running *r, double deadline, bool timed_out) {
  TpGpuBackend *b = &p->backends[r->api];
  int status = 0;
  bool killed = false;
  int reaped = tp_gpu_reap(r->pid, timed_out ? 0.0 : deadline, &status, &killed);
  if (r->ended == 0) {
    r->ended = tp_gpu_monotonic();
  }
  char subject[64];
  snprintf(subject, sizeof subject, "%s probe", tp_gpu_api_name(r->api));
  TpError perr = {0};
  int prc = r->overflow ? tp_error_set(&perr, TP_ELIMIT, "%s: report larger than %u bytes", subject,
                                       TP_GPU_REPORT_MAX)
                        : tp_gpu_probe_parse(p, r->api, r->report.data ? r->report.data : "",
                                             r->report.len, subject, &perr);
  collect_output(r->outfd, &b->output);
  b->elapsed_s = r->ended - r->started;
  if (prc == 0 && !timed_out) {
    return;
  }
  const char *during = b->phase[0] ? b->phase : "start-up";
  const char *lib = b->soname[0] ? b->soname : subject;
  if (timed_out) {
    b->status = TP_GPU_TIMEOUT;
    snprintf(b->reason, sizeof b->reason, "%s: no answer within %.1f s during %s (child killed)",
             lib, deadline - r->started, during);
    return;
  }
  b->status = TP_GPU_CRASHED;
  bool abnormal = reaped == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (abnormal) {
    char how[96];
    tp_gpu_describe_status(status, how, sizeof how);
    snprintf(b->reason, sizeof b->reason, "%s: probe child %s during %s", lib, how, during);
  } else {
    snprintf(b->reason, sizeof b->reason, "%s: malformed probe report: %s", lib, perr.msg);
  }
}

int tp_gpu_probe(const TpGpuProbeOpts *opts, TpGpuProbe *out, TpError *err) {
  TpGpuProbeOpts o = opts ? *opts : (TpGpuProbeOpts){0};
  double timeout = o.timeout_s > 0 ? o.timeout_s : DEFAULT_TIMEOUT_S;
  unsigned apis = o.apis ? o.apis : (1u << TP_GPU_API_COUNT) - 1;
  const char *libpath = o.libpath ? o.libpath : getenv("TPLUA_GPU_LIBPATH");
  tp_gpu_probe_init(out);
  double t0 = tp_gpu_monotonic();
  double deadline = t0 + timeout;
  Running run[TP_GPU_API_COUNT];
  size_t nrun = 0;
  int rc = 0;
  for (int api = 0; api < TP_GPU_API_COUNT; api++) {
    if (!(apis & (1u << api))) {
      continue;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
      rc = tp_error_errno(err, "gpu probe: pipe");
      break;
    }
    int outfd = memfd_create("tplua-gpu-probe", MFD_CLOEXEC);
    if (outfd < 0) {
      rc = tp_error_errno(err, "gpu probe: memfd_create");
      close(pfd[0]);
      close(pfd[1]);
      break;
    }
    ChildArg arg = {(TpGpuApi)api, libpath};
    Running *r = &run[nrun];
    memset(r, 0, sizeof *r);
    r->api = (TpGpuApi)api;
    r->outfd = outfd;
    r->rfd = pfd[0];
    r->started = tp_gpu_monotonic();
    r->pid = tp_gpu_fork(probe_child_main, &arg, outfd, pfd[1], -1, err);
    close(pfd[1]);
    if (r->pid < 0) {
      rc = r->pid;
      close(pfd[0]);
      close(outfd);
      break;
    }
    fcntl(r->rfd, F_SETFL, fcntl(r->rfd, F_GETFL) | O_NONBLOCK);
    nrun++;
  }
  if (rc != 0) {
    deadline = tp_gpu_monotonic();  // give up on the children already started
  }
  // Collect the reports until every pipe reaches EOF or the deadline passes.
  for (;;) {
    struct pollfd pfds[TP_GPU_API_COUNT];
    Running *who[TP_GPU_API_COUNT];
    nfds_t n = 0;
    for (size_t i = 0; i < nrun; i++) {
      if (run[i].rfd >= 0) {
        pfds[n] = (struct pollfd){.fd = run[i].rfd, .events = POLLIN};
        who[n++] = &run[i];
      }
    }
    double left = deadline - tp_gpu_monotonic();
    if (n == 0 || left <= 0) {
      break;
    }
    int ready = poll(pfds, n, (int)(left * 1000.0) + 1);
    if (ready < 0 && errno != EINTR) {
      if (rc == 0) {
        rc = tp_error_errno(err, "gpu probe: poll");
      }
      break;
    }
    for (nfds_t i = 0; ready > 0 && i < n; i++) {
      if (pfds[i].revents) {
        int drc = drain(who[i]);
        if (drc != 0 && rc == 0) {
          rc = tp_error_set(err, drc, "gpu probe: reading %s report: %s",
                            tp_gpu_api_name(who[i]->api),
                            drc == TP_ENOMEM ? "out of memory" : strerror(-drc));
        }
        if (drc != 0) {
          close(who[i]->rfd);
          who[i]->rfd = -1;
        }
      }
    }
  }
  for (size_t i = 0; i < nrun; i++) {
    bool timed_out = run[i].rfd >= 0;
    if (timed_out) {
      drain(&run[i]);  // whatever arrived last names the phase it hung in
      if (run[i].rfd >= 0) {
        close(run[i].rfd);
        run[i].rfd = -1;
      }
    }
    finish_one(out, &run[i], deadline, timed_out);
    close(run[i].outfd);
    tp_buf_free(&run[i].report);
  }
  out->elapsed_s = tp_gpu_monotonic() - t0;
  if (rc != 0) {
    tp_gpu_probe_free(out);
    tp_gpu_probe_init(out);
  }
  return rc;
}
