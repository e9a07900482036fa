// Telemetry sampling: a child process reads power, energy counter, memory used, utilisation,
// SM clock and temperature of every device through NVML and ROCm SMI (no GPU context) at a fixed
// interval and streams the readings to the parent over a pipe; the parent collects them in bulk.
//
// Stream (one line each, tab-separated, values escaped by tp_gpu_escape, gpu_child.c):
//   note<TAB>text                    something the child could not do
//   dev<TAB>i<TAB>api<TAB>index<TAB>pci<TAB>uuid<TAB>memory_total<TAB>name
//   ready<TAB>n                      the device list is complete
//   s<TAB>t<TAB>wall<TAB>dev<TAB>power_w<TAB>energy_j<TAB>mem_used<TAB>util<TAB>clock<TAB>temp
//                                    one reading; "-" marks a quantity not reported
//   end                              the child stopped cleanly
#include "gpu_sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_child.h"
#include "gpu_lib.h"

#define MAX_QUEUE    (64u << 20)  // readings the child holds while the parent does not read
#define LINE_MAX_LEN 4096

struct TpGpuSampler {
  pid_t pid;
  int data_fd;  // read end of the readings pipe, -1 when closed
  int ctl_fd;   // write end of the control pipe; closing it asks the child to stop
  bool running;
  bool ended;  // "end" seen
  int lineno;
  TpGpuSamplerDevice *devices;
  size_t ndevices;
  TpGpuSample *samples;
  size_t nsamples, cap;
  TpBuf pending;  // an incomplete line
  TpBuf notes;
  double interval;
};

// ---------------------------------------------------------------------------------------------
// Child

typedef int (*fn_void)(void);
typedef int (*fn_count)(unsigned *);
typedef int (*fn_handle)(unsigned, void **);
typedef int (*fn_dev_str)(void *, char *, unsigned);
typedef int (*fn_dev_ptr)(void *, void *);
typedef int (*fn_dev_uint)(void *, unsigned *);
typedef int (*fn_dev_ull)(void *, unsigned long long *);
typedef int (*fn_dev_clock)(void *, int, unsigned *);

typedef int (*fn_rsmi_init)(uint64_t);
typedef int (*fn_rsmi_u32p)(uint32_t *);
typedef int (*fn_rsmi_name)(uint32_t, char *, size_t);
typedef int (*fn_rsmi_u64)(uint32_t, uint64_t *);
typedef int (*fn_rsmi_mem)(uint32_t, int, uint64_t *);
typedef int (*fn_rsmi_power)(uint32_t, uint64_t *, int *);
typedef int (*fn_rsmi_power_ave)(uint32_t, uint32_t, uint64_t *);
typedef int (*fn_rsmi_energy)(uint32_t, uint64_t *, float *, uint64_t *);
typedef int (*fn_rsmi_busy)(uint32_t, uint32_t *);
typedef int (*fn_rsmi_clk)(uint32_t, int, void *);
typedef int (*fn_rsmi_temp)(uint32_t, uint32_t, int, int64_t *);

// NVML telemetry calls [nvml.h; GPU_PROBING.md §7.1]: power in mW, energy in mJ since the
// driver loaded, memory in bytes, utilisation in percent, clocks in MHz, temperature in C.
typedef struct NvmlT {
  fn_dev_uint power;
  fn_dev_ull energy;
  fn_dev_ptr memory;
  fn_dev_ptr util;
  fn_dev_clock clock;
  fn_dev_ptr tempv;
  fn_dev_clock temp;
} NvmlT;

// ROCm SMI telemetry calls [rocm_smi.h; GPU_PROBING.md §7.2]: power in microwatts, energy
// counter x resolution in microjoules, memory in bytes, busy percent, clock in Hz, temperature
// in millidegrees.
typedef struct RsmiT {
  fn_rsmi_power power;
  fn_rsmi_power_ave power_ave;
  fn_rsmi_energy energy;
  fn_rsmi_mem memory;
  fn_rsmi_busy busy;
  fn_rsmi_clk clk;
  bool clk_v6;  // rsmi_frequencies_t with the leading has_deep_sleep (ROCm >= 6.0)
  fn_rsmi_temp temp;
} RsmiT;

typedef struct ChildDev {
  TpGpuApi api;
  int index;
  void *nvml_handle;
  bool noted[8];  // one note per unsupported metric
} ChildDev;

typedef struct ChildState {
  int out;  // descriptor 3
  TpBuf queue;
  size_t dropped;
  NvmlT nvml;
  RsmiT rsmi;
  ChildDev devs[TP_GPU_DEVICES_MAX];
  int ndevs;
} ChildState;

typedef struct SamplerArg {
  double interval;
  unsigned apis;
  const char *libpath;
  pid_t parent;
} SamplerArg;

static void queue_line(ChildState *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void queue_line(ChildState *c, const char *fmt, ...) {
  char line[LINE_MAX_LEN];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) {
    return;
  }
  size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  if (c->queue.len + len + 1 > MAX_QUEUE) {
    c->dropped++;
    return;
  }
  if (tp_buf_append(&c->queue, line, len) != 0 || tp_buf_append(&c->queue, "\n", 1) != 0) {
    c->dropped++;
  }
}

// Queues "note<TAB><escaped text>".
static void note(ChildState *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(ChildState *c, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  TpBuf esc = {0};
  if (tp_gpu_escape(&esc, text, strlen(text)) == 0 && tp_buf_cstr(&esc)) {
    queue_line(c, "note\t%s", esc.data);
  }
  tp_buf_free(&esc);
}

static void queue_dev(ChildState *c, int i, const char *pci, const char *uuid,
                      unsigned long long mem, const char *name) {
  TpBuf a = {0}, b = {0}, e = {0};
  if (tp_gpu_escape(&a, pci, strlen(pci)) == 0 && tp_gpu_escape(&b, uuid, strlen(uuid)) == 0 &&
      tp_gpu_escape(&e, name, strlen(name)) == 0 && tp_buf_cstr(&a) && tp_buf_cstr(&b) &&
      tp_buf_cstr(&e)) {
    queue_line(c, "dev\t%d\t%s\t%d\t%s\t%s\t%llu\t%s", i, tp_gpu_api_name(c->devs[i].api),
               c->devs[i].index, a.data, b.data, mem, e.data);
  }
  tp_buf_free(&a);
  tp_buf_free(&b);
  tp_buf_free(&e);
}

static void open_nvml(ChildState *c, const char *libpath) {
  TpGpuOpenIter it;
  TpGpuLib lib;
  if (tp_gpu_open_begin(&it, TP_GPU_NVML, libpath) != 0) {
    return;
  }
  if (!tp_gpu_open_next(&it, &lib)) {
    note(c, "nvml: libnvidia-ml.so.1: not found");
    tp_gpu_open_end(&it);
    return;
  }
  fn_void init = (fn_void)tp_gpu_sym(&lib, "nvmlInit_v2");
  fn_count count = (fn_count)tp_gpu_sym(&lib, "nvmlDeviceGetCount_v2");
  fn_handle handle = (fn_handle)tp_gpu_sym(&lib, "nvmlDeviceGetHandleByIndex_v2");
  int rc;
  unsigned n = 0;
  if (!init || !count || !handle) {
    note(c,
         "nvml: %s: nvmlInit_v2, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2 "
         "missing",
         lib.path);
  } else if ((rc = init()) != 0) {
    note(c, "nvml: %s: nvmlInit_v2: error %d", lib.soname, rc);
  } else if ((rc = count(&n)) != 0) {
    note(c, "nvml: %s: nvmlDeviceGetCount_v2: error %d", lib.soname, rc);
    n = 0;
  } else if (n == 0) {
    note(c, "nvml: %s: no device", lib.soname);
  }
  fn_dev_str name = (fn_dev_str)tp_gpu_sym(&lib, "nvmlDeviceGetName");
  fn_dev_str uuid = (fn_dev_str)tp_gpu_sym(&lib, "nvmlDeviceGetUUID");
  fn_dev_ptr pci = (fn_dev_ptr)tp_gpu_sym(&lib, "nvmlDeviceGetPciInfo_v3");
  c->nvml.power = (fn_dev_uint)tp_gpu_sym(&lib, "nvmlDeviceGetPowerUsage");
  c->nvml.energy = (fn_dev_ull)tp_gpu_sym(&lib, "nvmlDeviceGetTotalEnergyConsumption");
  c->nvml.memory = (fn_dev_ptr)tp_gpu_sym(&lib, "nvmlDeviceGetMemoryInfo");
  c->nvml.util = (fn_dev_ptr)tp_gpu_sym(&lib, "nvmlDeviceGetUtilizationRates");
  c->nvml.clock = (fn_dev_clock)tp_gpu_sym(&lib, "nvmlDeviceGetClockInfo");
  // The versioned temperature call first; the legacy one is deprecated in CUDA 13.0.
  c->nvml.tempv = (fn_dev_ptr)tp_gpu_sym(&lib, "nvmlDeviceGetTemperatureV");
  c->nvml.temp = (fn_dev_clock)tp_gpu_sym(&lib, "nvmlDeviceGetTemperature");
  for (unsigned i = 0; i < n && c->ndevs < TP_GPU_DEVICES_MAX; i++) {
    void *h = NULL;
    if (handle(i, &h) != 0) {
      note(c, "nvml: device %u: no handle", i);
      continue;
    }
    char nb[128] = "", ub[128] = "", pcib[32] = "";
    unsigned char pb[256] = {0};
    unsigned long long m[3] = {0};
    if (name) {
      name(h, nb, 96);
    }
    if (uuid) {
      uuid(h, ub, 96);
    }
    if (pci && pci(h, pb) == 0) {
      pb[36 + 31] = '\0';  // nvmlPciInfo_t.busId at offset 36 [nvml.h]
      tp_gpu_pci_normalize((const char *)pb + 36, pcib, sizeof pcib);
    }
    if (c->nvml.memory) {
      c->nvml.memory(h, m);
    }
    ChildDev *d = &c->devs[c->ndevs];
    d->api = TP_GPU_NVML;
    d->index = (int)i;
    d->nvml_handle = h;
    nb[sizeof nb - 1] = ub[sizeof ub - 1] = '\0';
    queue_dev(c, c->ndevs, pcib, ub, m[0], nb);
    c->ndevs++;
  }
  tp_gpu_open_end(&it);
}

static void open_rsmi(ChildState *c, const char *libpath) {
  TpGpuOpenIter it;
  TpGpuLib lib;
  if (tp_gpu_open_begin(&it, TP_GPU_RSMI, libpath) != 0) {
    return;
  }
  if (!tp_gpu_open_next(&it, &lib)) {
    note(c, "rsmi: librocm_smi64: not found");
    tp_gpu_open_end(&it);
    return;
  }
  fn_rsmi_init init = (fn_rsmi_init)tp_gpu_sym(&lib, "rsmi_init");
  fn_rsmi_u32p count = (fn_rsmi_u32p)tp_gpu_sym(&lib, "rsmi_num_monitor_devices");
  int rc;
  uint32_t n = 0;
  if (!init || !count) {
    note(c, "rsmi: %s: rsmi_init or rsmi_num_monitor_devices missing", lib.path);
  } else if ((rc = init(0)) != 0) {
    note(c, "rsmi: %s: rsmi_init: error %d", lib.soname, rc);
  } else if ((rc = count(&n)) != 0) {
    note(c, "rsmi: %s: rsmi_num_monitor_devices: error %d", lib.soname, rc);
    n = 0;
  } else if (n == 0) {
    note(c, "rsmi: %s: no device", lib.soname);
  }
  fn_rsmi_name name = (fn_rsmi_name)tp_gpu_sym(&lib, "rsmi_dev_name_get");
  fn_rsmi_u64 pci = (fn_rsmi_u64)tp_gpu_sym(&lib, "rsmi_dev_pci_id_get");
  fn_rsmi_u64 uid = (fn_rsmi_u64)tp_gpu_sym(&lib, "rsmi_dev_unique_id_get");
  fn_rsmi_mem total = (fn_rsmi_mem)tp_gpu_sym(&lib, "rsmi_dev_memory_total_get");
  c->rsmi.power = (fn_rsmi_power)tp_gpu_sym(&lib, "rsmi_dev_power_get");
  c->rsmi.power_ave = (fn_rsmi_power_ave)tp_gpu_sym(&lib, "rsmi_dev_power_ave_get");
  c->rsmi.energy = (fn_rsmi_energy)tp_gpu_sym(&lib, "rsmi_dev_energy_count_get");
  c->rsmi.memory = (fn_rsmi_mem)tp_gpu_sym(&lib, "rsmi_dev_memory_usage_get");
  c->rsmi.busy = (fn_rsmi_busy)tp_gpu_sym(&lib, "rsmi_dev_busy_percent_get");
  c->rsmi.clk = (fn_rsmi_clk)tp_gpu_sym(&lib, "rsmi_dev_gpu_clk_freq_get");
  // rsmi_frequencies_t gained a leading bool in ROCm 6.0, together with rsmi_dev_power_get
  // (GPU_PROBING.md §7.2): the symbol tells the layout, the version number does not.
  c->rsmi.clk_v6 = c->rsmi.power != NULL;
  c->rsmi.temp = (fn_rsmi_temp)tp_gpu_sym(&lib, "rsmi_dev_temp_metric_get");
  for (uint32_t i = 0; i < n && c->ndevs < TP_GPU_DEVICES_MAX; i++) {
    char nb[256] = "", pcib[32] = "", ub[32] = "";
    uint64_t v = 0, mem = 0;
    if (name) {
      name(i, nb, sizeof nb - 1);
    }
    if (pci && pci(i, &v) == 0) {
      snprintf(pcib, sizeof pcib, "%04x:%02x:%02x.%x", (unsigned)(v >> 32),
               (unsigned)((v >> 8) & 0xff), (unsigned)((v >> 3) & 0x1f), (unsigned)(v & 7));
    }
    if (uid && uid(i, &v) == 0) {
      snprintf(ub, sizeof ub, "0x%016llx", (unsigned long long)v);
    }
    if (total) {
      total(i, 0, &mem);
    }
    ChildDev *d = &c->devs[c->ndevs];
    d->api = TP_GPU_RSMI;
    d->index = (int)i;
    queue_dev(c, c->ndevs, pcib, ub, (unsigned long long)mem, nb);
    c->ndevs++;
  }
  tp_gpu_open_end(&it);
}

static double mono_now(void) {
  return tp_gpu_monotonic();
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { M_POWER, M_ENERGY, M_MEMORY, M_UTIL, M_CLOCK, M_TEMP };
static const char *const metric_names[] = {"power",       "energy counter", "memory used",
                                           "utilisation", "SM clock",       "temperature"};

static void unsupported(ChildState *c, ChildDev *d, int metric, int rc) {
  if (!d->noted[metric]) {
    d->noted[metric] = true;
    note(c, "%s device %d: %s not available (error %d)", tp_gpu_api_name(d->api), d->index,
         metric_names[metric], rc);
  }
}

static void read_nvml(ChildState *c, ChildDev *d, double v[6]) {
  void *h = d->nvml_handle;
  int rc;
  unsigned u = 0;
  unsigned long long e = 0;
  if (c->nvml.power && (rc = c->nvml.power(h, &u)) == 0) {
    v[M_POWER] = u / 1000.0;
  } else {
    unsupported(c, d, M_POWER, c->nvml.power ? rc : -1);
  }
  if (c->nvml.energy && (rc = c->nvml.energy(h, &e)) == 0) {
    v[M_ENERGY] = (double)e / 1000.0;
  } else {
    unsupported(c, d, M_ENERGY, c->nvml.energy ? rc : -1);
  }
  unsigned long long m[3] = {0};
  if (c->nvml.memory && (rc = c->nvml.memory(h, m)) == 0) {
    v[M_MEMORY] = (double)m[2];
  } else {
    unsupported(c, d, M_MEMORY, c->nvml.memory ? rc : -1);
  }
  unsigned ut[2] = {0};  // nvmlUtilization_t {gpu, memory}
  if (c->nvml.util && (rc = c->nvml.util(h, ut)) == 0) {
    v[M_UTIL] = ut[0];
  } else {
    unsupported(c, d, M_UTIL, c->nvml.util ? rc : -1);
  }
  if (c->nvml.clock && (rc = c->nvml.clock(h, 1, &u)) == 0) {  // NVML_CLOCK_SM = 1
    v[M_CLOCK] = u;
  } else {
    unsupported(c, d, M_CLOCK, c->nvml.clock ? rc : -1);
  }
  // nvmlTemperature_t {unsigned version; sensorType; int temperature}, version =
  // sizeof | 1 << 24; NVML_TEMPERATURE_GPU = 0 [nvml.h].
  struct {
    unsigned version;
    int sensor;
    int temperature;
  } t = {(unsigned)sizeof t | (1u << 24), 0, 0};
  if (c->nvml.tempv && c->nvml.tempv(h, &t) == 0) {
    v[M_TEMP] = t.temperature;
  } else if (c->nvml.temp && (rc = c->nvml.temp(h, 0, &u)) == 0) {
    v[M_TEMP] = u;
  } else {
    unsupported(c, d, M_TEMP, -1);
  }
}

static void read_rsmi(ChildState *c, ChildDev *d, double v[6]) {
  uint32_t i = (uint32_t)d->index;
  uint64_t u = 0;
  int rc = -1;
  int type = 0;
  if (c->rsmi.power && (rc = c->rsmi.power(i, &u, &type)) == 0) {
    v[M_POWER] = (double)u / 1e6;
  } else if (c->rsmi.power_ave && (rc = c->rsmi.power_ave(i, 0, &u)) == 0) {
    v[M_POWER] = (double)u / 1e6;
  } else {
    unsupported(c, d, M_POWER, rc);
  }
  float res = 0;
  uint64_t ts = 0;
  if (c->rsmi.energy && (rc = c->rsmi.energy(i, &u, &res, &ts)) == 0 && res > 0) {
    v[M_ENERGY] = (double)u * (double)res / 1e6;
  } else {
    unsupported(c, d, M_ENERGY, c->rsmi.energy ? rc : -1);
  }
  if (c->rsmi.memory && (rc = c->rsmi.memory(i, 0, &u)) == 0) {  // RSMI_MEM_TYPE_VRAM
    v[M_MEMORY] = (double)u;
  } else {
    unsupported(c, d, M_MEMORY, c->rsmi.memory ? rc : -1);
  }
  uint32_t busy = 0;
  if (c->rsmi.busy && (rc = c->rsmi.busy(i, &busy)) == 0) {
    v[M_UTIL] = busy;
  } else {
    unsupported(c, d, M_UTIL, c->rsmi.busy ? rc : -1);
  }
  // rsmi_frequencies_t: {num_supported, current, frequency[32]} at 0/4/8 up to ROCm 5.7;
  // {has_deep_sleep, num_supported, current, frequency[33]} at 0/4/8/16 from 6.0.
  _Alignas(8) unsigned char fb[512] = {0};
  if (c->rsmi.clk && (rc = c->rsmi.clk(i, 0, fb)) == 0) {  // RSMI_CLK_TYPE_SYS = 0
    uint32_t num = 0, cur = 0;
    size_t off_num = c->rsmi.clk_v6 ? 4 : 0, off_freq = c->rsmi.clk_v6 ? 16 : 8;
    memcpy(&num, fb + off_num, 4);
    memcpy(&cur, fb + off_num + 4, 4);
    if (cur < num && cur < 32) {
      uint64_t hz = 0;
      memcpy(&hz, fb + off_freq + 8 * cur, 8);
      v[M_CLOCK] = (double)hz / 1e6;
    }
  } else {
    unsupported(c, d, M_CLOCK, c->rsmi.clk ? rc : -1);
  }
  int64_t mc = 0;
  // Junction (hotspot) first: MI300-class parts have no edge sensor [rocm_smi.h sensor types].
  if (c->rsmi.temp &&
      ((rc = c->rsmi.temp(i, 1, 0, &mc)) == 0 || (rc = c->rsmi.temp(i, 0, 0, &mc)) == 0)) {
    v[M_TEMP] = (double)mc / 1000.0;
  } else {
    unsupported(c, d, M_TEMP, c->rsmi.temp ? rc : -1);
  }
}

static void fmt_num(char *out, size_t outsz, double v) {
  if (isnan(v)) {
    snprintf(out, outsz, "-");
  } else {
    snprintf(out, outsz, "%.17g", v);
  }
}

static void sample_all(ChildState *c) {
  for (int i = 0; i < c->ndevs; i++) {
    double v[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    double t = mono_now(), wall = wall_now();
    if (c->devs[i].api == TP_GPU_NVML) {
      read_nvml(c, &c->devs[i], v);
    } else {
      read_rsmi(c, &c->devs[i], v);
    }
    char f[6][32];
    for (int k = 0; k < 6; k++) {
      fmt_num(f[k], sizeof f[k], v[k]);
    }
    queue_line(c, "s\t%.9f\t%.6f\t%d\t%s\t%s\t%s\t%s\t%s\t%s", t, wall, i, f[0], f[1], f[2], f[3],
               f[4], f[5]);
  }
}

// Writes as much of the queue as the pipe takes. Returns false when the parent is gone.
static bool flush_some(ChildState *c) {
  size_t off = 0;
  bool ok = true;
  while (off < c->queue.len) {
    ssize_t w = write(c->out, c->queue.data + off, c->queue.len - off);
    if (w > 0) {
      off += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) {
      continue;
    }
    ok = w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    break;
  }
  memmove(c->queue.data, c->queue.data + off, c->queue.len - off);
  c->queue.len -= off;
  return ok;
}

static void flush_all(ChildState *c) {
  fcntl(c->out, F_SETFL, fcntl(c->out, F_GETFL) & ~O_NONBLOCK);
  flush_some(c);
}

static int sampler_child_main(void *arg) {
  const SamplerArg *a = arg;
  // Die with the parent even if the control pipe is somehow kept open.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != a->parent) {
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);
  static ChildState c;
  memset(&c, 0, sizeof c);
  c.out = 3;
  unsigned apis = a->apis ? a->apis : (1u << TP_GPU_NVML) | (1u << TP_GPU_RSMI);
  if (apis & (1u << TP_GPU_NVML)) {
    open_nvml(&c, a->libpath);
  }
  if (apis & (1u << TP_GPU_RSMI)) {
    open_rsmi(&c, a->libpath);
  }
  queue_line(&c, "ready\t%d", c.ndevs);
  if (c.ndevs == 0) {
    queue_line(&c, "end");
    flush_all(&c);
    return 0;
  }
  fcntl(c.out, F_SETFL, fcntl(c.out, F_GETFL) | O_NONBLOCK);
  double next = mono_now();
  for (;;) {
    double now = mono_now();
    if (now >= next) {
      sample_all(&c);
      next += a->interval;
      if (next <= now) {
        next = now + a->interval;  // fell behind: keep the cadence, skip the missed ticks
      }
    }
    struct pollfd p[2] = {{.fd = 4, .events = POLLIN},
                          {.fd = 3, .events = c.queue.len ? POLLOUT : 0}};
    double left = next - mono_now();
    struct timespec ts = {0, 0};
    if (left > 0) {
      ts.tv_sec = (time_t)left;
      ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
    }
    int r = ppoll(p, 2, &ts, NULL);
    if (r < 0 && errno != EINTR) {
      break;
    }
    if (r > 0 && p[0].revents) {
      break;  // the parent closed the control pipe (or died): stop
    }
    if (r > 0 && (p[1].revents & (POLLERR | POLLHUP))) {
      return 0;  // nobody reads any more
    }
    if (r > 0 && (p[1].revents & POLLOUT) && !flush_some(&c)) {
      return 0;
    }
  }
  if (c.dropped) {
    note(&c, "sampler: %zu readings dropped while nobody read them", c.dropped);
  }
  queue_line(&c, "end");
  flush_all(&c);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Parent

// Splits `line` (NUL-terminated, modified) at tabs into at most `max` fields.
static int split_tabs(char *line, char **fields, int max) {
  int n = 0;
  char *p = line;
  while (n < max) {
    fields[n++] = p;
    char *tab = strchr(p, '\t');
    if (!tab) {
      break;
    }
    *tab = '\0';
    p = tab + 1;
  }
  return n;
}

static int parse_num(const char *s, double *out) {
  if (strcmp(s, "-") == 0) {
    *out = NAN;
    return 0;
  }
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v)) {
    return -1;
  }
  *out = v;
  return 0;
}

static int sampler_line(TpGpuSampler *s, char *line, TpError *err) {
  s->lineno++;
  char *f[12];
  int n = split_tabs(line, f, 12);
  if (strcmp(f[0], "s") == 0 && n == 10) {
    TpGpuSample x;
    double dev = 0;
    if (parse_num(f[1], &x.t) != 0 || parse_num(f[2], &x.wall) != 0 || parse_num(f[3], &dev) != 0 ||
        isnan(x.t) || dev < 0 || dev >= (double)s->ndevices || parse_num(f[4], &x.power_w) != 0 ||
        parse_num(f[5], &x.energy_j) != 0 || parse_num(f[6], &x.memory_used) != 0 ||
        parse_num(f[7], &x.utilization) != 0 || parse_num(f[8], &x.sm_clock_mhz) != 0 ||
        parse_num(f[9], &x.temperature_c) != 0) {
      return tp_error_set(err, TP_EPARSE, "gpu sampler: line %d: bad reading", s->lineno);
    }
    x.device = (int)dev;
    if (s->nsamples == s->cap) {
      size_t cap = s->cap ? s->cap * 2 : 256;
      TpGpuSample *ns = realloc(s->samples, cap * sizeof *ns);
      if (!ns) {
        return tp_error_set(err, TP_ENOMEM, "gpu sampler: out of memory");
      }
      s->samples = ns;
      s->cap = cap;
    }
    s->samples[s->nsamples++] = x;
    return 0;
  }
  if (strcmp(f[0], "note") == 0 && n == 2) {
    char text[1024];
    if (tp_gpu_unescape(f[1], strlen(f[1]), text, sizeof text) != 0) {
      return tp_error_set(err, TP_EPARSE, "gpu sampler: line %d: bad note", s->lineno);
    }
    if (tp_buf_printf(&s->notes, "%s%s", s->notes.len ? "\n" : "", text) != 0) {
      return tp_error_set(err, TP_ENOMEM, "gpu sampler: out of memory");
    }
    return 0;
  }
  if (strcmp(f[0], "dev") == 0 && n == 8) {
    TpGpuSamplerDevice d;
    memset(&d, 0, sizeof d);
    int api = tp_gpu_api_from_name(f[2]);
    char *end = NULL;
    long idx = strtol(f[1], &end, 10);
    long index = strtol(f[3], NULL, 10);
    unsigned long long mem = strtoull(f[6], NULL, 10);
    if (api < 0 || *end != '\0' || idx != (long)s->ndevices || idx >= TP_GPU_DEVICES_MAX ||
        tp_gpu_unescape(f[4], strlen(f[4]), d.pci_bus_id, sizeof d.pci_bus_id) != 0 ||
        tp_gpu_unescape(f[5], strlen(f[5]), d.uuid, sizeof d.uuid) != 0 ||
        tp_gpu_unescape(f[7], strlen(f[7]), d.name, sizeof d.name) != 0) {
      return tp_error_set(err, TP_EPARSE, "gpu sampler: line %d: bad device", s->lineno);
    }
    d.api = (TpGpuApi)api;
    d.index = (int)index;
    d.memory_total = mem;
    TpGpuSamplerDevice *nd = realloc(s->devices, (s->ndevices + 1) * sizeof *nd);
    if (!nd) {
      return tp_error_set(err, TP_ENOMEM, "gpu sampler: out of memory");
    }
    s->devices = nd;
    s->devices[s->ndevices++] = d;
    return 0;
  }
  if (strcmp(f[0], "ready") == 0 && n == 2) {
    return 1;
  }
  if (strcmp(f[0], "end") == 0 && n == 1) {
    s->ended = true;
    return 0;
  }
  return tp_error_set(err, TP_EPARSE, "gpu sampler: line %d: unexpected '%.20s'", s->lineno, f[0]);
}

// Reads what is available and handles complete lines. With `wait_s` > 0 it blocks up to that
// long: until a "ready" line, or, when `any`, until some data has arrived.
// Returns 1 when a "ready" line was handled, 0 otherwise, or a negative error.
static int sampler_read(TpGpuSampler *s, double wait_s, bool any, TpError *err) {
  int got_ready = 0;
  bool got_data = false;
  double deadline = tp_gpu_monotonic() + (wait_s > 0 ? wait_s : 0);
  while (s->data_fd >= 0) {
    char buf[65536];
    ssize_t n = read(s->data_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      double left = deadline - tp_gpu_monotonic();
      if (wait_s <= 0 || left <= 0 || got_ready || (any && got_data)) {
        break;
      }
      struct pollfd p = {.fd = s->data_fd, .events = POLLIN};
      poll(&p, 1, (int)(left * 1000.0) + 1);
      continue;
    }
    if (n < 0) {
      return tp_error_errno(err, "gpu sampler: read");
    }
    if (n == 0) {
      close(s->data_fd);
      s->data_fd = -1;
      break;
    }
    got_data = true;
    if (tp_buf_append(&s->pending, buf, (size_t)n) != 0) {
      return tp_error_set(err, TP_ENOMEM, "gpu sampler: out of memory");
    }
    size_t start = 0;
    for (;;) {
      char *nl = memchr(s->pending.data + start, '\n', s->pending.len - start);
      if (!nl) {
        break;
      }
      *nl = '\0';
      int rc = sampler_line(s, s->pending.data + start, err);
      start = (size_t)(nl - s->pending.data) + 1;
      if (rc < 0) {
        return rc;
      }
      got_ready |= rc;
    }
    memmove(s->pending.data, s->pending.data + start, s->pending.len - start);
    s->pending.len -= start;
    if (s->pending.len > LINE_MAX_LEN * 4) {
      return tp_error_set(err, TP_EPARSE, "gpu sampler: line %d: line too long", s->lineno + 1);
    }
  }
  return got_ready;
}

static void sampler_kill(TpGpuSampler *s) {
  if (s->ctl_fd >= 0) {
    close(s->ctl_fd);
    s->ctl_fd = -1;
  }
  if (s->pid > 0) {
    int status = 0;
    bool killed = false;
    tp_gpu_reap(s->pid, 0.0, &status, &killed);
    s->pid = 0;
  }
  if (s->data_fd >= 0) {
    close(s->data_fd);
    s->data_fd = -1;
  }
  s->running = false;
}

int tp_gpu_sampler_start(const TpGpuSamplerOpts *opts, TpGpuSampler **out, TpError *err) {
  TpGpuSamplerOpts o = opts ? *opts : (TpGpuSamplerOpts){0};
  *out = NULL;
  double interval = o.interval_s > 0 ? o.interval_s : 1.0;
  if (interval < 0.001) {
    interval = 0.001;
  }
  double start_timeout = o.start_timeout_s > 0 ? o.start_timeout_s : 20.0;
  TpGpuSampler *s = calloc(1, sizeof *s);
  if (!s) {
    return tp_error_set(err, TP_ENOMEM, "gpu sampler: out of memory");
  }
  s->data_fd = s->ctl_fd = -1;
  s->interval = interval;
  int data[2], ctl[2];
  if (pipe2(data, O_CLOEXEC) != 0) {
    int rc = tp_error_errno(err, "gpu sampler: pipe");
    free(s);
    return rc;
  }
  if (pipe2(ctl, O_CLOEXEC) != 0) {
    int rc = tp_error_errno(err, "gpu sampler: pipe");
    close(data[0]);
    close(data[1]);
    free(s);
    return rc;
  }
  int outfd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  SamplerArg arg = {interval, o.apis, o.libpath ? o.libpath : getenv("TPLUA_GPU_LIBPATH"),
                    getpid()};
  pid_t pid = outfd < 0 ? -1 : tp_gpu_fork(sampler_child_main, &arg, outfd, data[1], ctl[0], err);
  int saved = errno;
  if (outfd >= 0) {
    close(outfd);
  }
  close(data[1]);
  close(ctl[0]);
  if (pid < 0) {
    close(data[0]);
    close(ctl[1]);
    free(s);
    if (outfd < 0) {
      errno = saved;
      return tp_error_errno(err, "gpu sampler: /dev/null");
    }
    return pid;
  }
  s->pid = pid;
  s->data_fd = data[0];
  s->ctl_fd = ctl[1];
  s->running = true;
  fcntl(s->data_fd, F_SETFL, fcntl(s->data_fd, F_GETFL) | O_NONBLOCK);
  int rc = sampler_read(s, start_timeout, false, err);
  if (rc < 0) {
    tp_gpu_sampler_free(s);
    return rc;
  }
  if (rc == 0) {
    tp_gpu_sampler_free(s);
    return tp_error_set(err, TP_ETIMEOUT, "gpu sampler: no device list within %.1f s",
                        start_timeout);
  }
  if (s->ndevices == 0) {
    char notes[200];
    const char *n = tp_gpu_sampler_notes(s);
    snprintf(notes, sizeof notes, "%s", n[0] ? n : "no library answered");
    for (char *p = notes; *p; p++) {
      if (*p == '\n') {
        *p = ';';
      }
    }
    tp_gpu_sampler_free(s);
    return tp_error_set(err, TP_ENOGPU, "gpu sampler: no device to sample (%s)", notes);
  }
  *out = s;
  return 0;
}

int tp_gpu_sampler_poll(TpGpuSampler *s, TpError *err) {
  int rc = sampler_read(s, 0, false, err);
  return rc < 0 ? rc : 0;
}

int tp_gpu_sampler_wait(TpGpuSampler *s, size_t count, double timeout_s, TpError *err) {
  double deadline = tp_gpu_monotonic() + timeout_s;
  for (;;) {
    int rc = sampler_read(s, 0, false, err);
    if (rc < 0) {
      return rc;
    }
    if (s->nsamples >= count) {
      return 0;
    }
    double left = deadline - tp_gpu_monotonic();
    if (s->data_fd < 0 || left <= 0) {
      return tp_error_set(err, TP_ETIMEOUT, "gpu sampler: %zu of %zu readings after %.1f s%s",
                          s->nsamples, count, timeout_s,
                          s->data_fd < 0 ? " (the sampler has stopped)" : "");
    }
    rc = sampler_read(s, left, true, err);
    if (rc < 0) {
      return rc;
    }
  }
}

int tp_gpu_sampler_stop(TpGpuSampler *s, TpError *err) {
  if (!s->running) {
    return 0;
  }
  close(s->ctl_fd);  // the child sees the hang-up, sends what it holds and "end"
  s->ctl_fd = -1;
  double deadline = tp_gpu_monotonic() + s->interval + 10.0;
  int rc = 0;
  while (s->data_fd >= 0 && tp_gpu_monotonic() < deadline) {
    rc = sampler_read(s, deadline - tp_gpu_monotonic(), true, err);
    if (rc < 0) {
      break;
    }
    rc = 0;
  }
  int status = 0;
  bool killed = false;
  tp_gpu_reap(s->pid, s->data_fd >= 0 ? 0.0 : tp_gpu_monotonic() + 2.0, &status, &killed);
  s->pid = 0;
  if (s->data_fd >= 0) {
    close(s->data_fd);
    s->data_fd = -1;
  }
  s->running = false;
  if (rc == 0 && !s->ended) {
    tp_buf_printf(&s->notes, "%ssampler child ended without a clean stop",
                  s->notes.len ? "\n" : "");
  }
  return rc;
}

bool tp_gpu_sampler_running(const TpGpuSampler *s) {
  return s->running;
}

const TpGpuSamplerDevice *tp_gpu_sampler_devices(const TpGpuSampler *s, size_t *n) {
  *n = s->ndevices;
  return s->devices;
}

const TpGpuSample *tp_gpu_sampler_samples(const TpGpuSampler *s, size_t *n) {
  *n = s->nsamples;
  return s->samples;
}

const char *tp_gpu_sampler_notes(const TpGpuSampler *s) {
  return s->notes.len ? s->notes.data : "";
}

void tp_gpu_sampler_free(TpGpuSampler *s) {
  if (!s) {
    return;
  }
  sampler_kill(s);
  free(s->devices);
  free(s->samples);
  tp_buf_free(&s->pending);
  tp_buf_free(&s->notes);
  free(s);
}

// ---------------------------------------------------------------------------------------------
// Energy

int tp_gpu_energy(const TpGpuSample *samples, size_t n, int device, double t0, double t1,
                  TpGpuEnergy *out, TpError *err) {
  memset(out, 0, sizeof *out);
  out->method = TP_GPU_ENERGY_NONE;
  if (t1 < t0) {
    return tp_error_set(err, TP_EINVAL, "gpu energy: window ends (%g) before it starts (%g)", t1,
                        t0);
  }
  const TpGpuSample *first = NULL, *last = NULL, *prev = NULL;
  bool counter_ok = true;
  double trap = 0;
  bool have_pair = false;
  for (size_t i = 0; i < n; i++) {
    const TpGpuSample *x = &samples[i];
    if (x->device != device || x->t < t0 || x->t > t1) {
      continue;
    }
    out->nsamples++;
    if (!first) {
      first = x;
    }
    if (isnan(x->energy_j) || (last && !isnan(last->energy_j) && x->energy_j < last->energy_j)) {
      counter_ok = false;  // missing, or reset / wrapped: the counter cannot be trusted here
    }
    if (prev && !isnan(prev->power_w) && !isnan(x->power_w) && x->t > prev->t) {
      trap += 0.5 * (prev->power_w + x->power_w) * (x->t - prev->t);
      have_pair = true;
    }
    prev = x;
    last = x;
  }
  if (out->nsamples < 2) {
    return 0;
  }
  out->t_first = first->t;
  out->t_last = last->t;
  if (counter_ok) {
    out->joules = last->energy_j - first->energy_j;
    out->method = TP_GPU_ENERGY_COUNTER;
  } else if (have_pair) {
    out->joules = trap;
    out->method = TP_GPU_ENERGY_TRAPEZOID;
  }
  return 0;
}
