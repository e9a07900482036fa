// What a probe child asks each library (NVML, CUDA driver, CUDA runtime, HIP, ROCm SMI,
// NCCL/RCCL) and how it reports the answers, one line per fact (format in gpu.c). Runs only in
// the child made by tp_gpu_probe; every prototype is declared here (no vendor headers).
#include "gpu_probe.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_child.h"

// Emits a backend fact.
#define B(fd, key, ...) tp_gpu_emit((fd), -1, (key), __VA_ARGS__)
// Emits a device fact.
#define D(fd, dev, key, ...) tp_gpu_emit((fd), (dev), (key), __VA_ARGS__)

static void emit_library(int fd, const TpGpuLib *lib) {
  B(fd, "library", "%s", lib->path);
  B(fd, "soname", "%s", lib->soname);
}

static void emit_tried(int fd, TpBuf *tried) {
  size_t pos = 0;
  while (pos < tried->len) {
    const char *line = tried->data + pos;
    const char *nl = memchr(line, '\n', tried->len - pos);
    size_t len = nl ? (size_t)(nl - line) : tried->len - pos;
    B(fd, "tried", "%.*s", (int)len, line);
    pos += len + 1;
  }
  tried->len = 0;
}

// Reports that no candidate could be opened: "absent" when none exists, "error" when one exists
// but would not load (its dlopen message is the reason).
static void report_unopened(int fd, TpGpuOpenIter *it, const char *libpath) {
  if (it->tried.len > 0) {
    const char *nl = memchr(it->tried.data, '\n', it->tried.len);
    int len = (int)(nl ? (size_t)(nl - it->tried.data) : it->tried.len);
    B(fd, "reason", "%.*s", len, it->tried.data);
    emit_tried(fd, &it->tried);
    B(fd, "status", "error");
    return;
  }
  TpBuf names = {0};
  const char *const *sonames = tp_gpu_sonames(it->api);
  for (size_t i = 0; sonames[i]; i++) {
    tp_buf_printf(&names, "%s%s", i ? ", " : "", sonames[i]);
  }
  size_t ndirs = 0;
  for (size_t i = 0; i < it->cands.n; i++) {
    ndirs += strchr(it->cands.items[i], '/') != NULL;
  }
  bool restricted = libpath && libpath[0];
  B(fd, "reason", "%s: not found (searched %s%s)", tp_buf_cstr(&names) ? names.data : "library",
    restricted ? libpath : "the loader path",
    ndirs && !restricted ? " and toolkit directories" : "");
  B(fd, "status", "absent");
  tp_buf_free(&names);
}

// Opens the first loadable candidate of `api`; reports and returns false when there is none.
static bool open_first(int fd, TpGpuApi api, const char *libpath, TpGpuOpenIter *it,
                       TpGpuLib *lib) {
  if (tp_gpu_open_begin(it, api, libpath) != 0) {
    B(fd, "reason", "%s probe: out of memory", tp_gpu_api_name(api));
    B(fd, "status", "error");
    return false;
  }
  it->phase_fd = fd;
  if (!tp_gpu_open_next(it, lib)) {
    report_unopened(fd, it, libpath);
    return false;
  }
  emit_library(fd, lib);
  emit_tried(fd, &it->tried);
  return true;
}

static void report_missing_symbol(int fd, const TpGpuLib *lib, const char *sym) {
  B(fd, "call", "%s", sym);
  B(fd, "reason", "%s: symbol %s not exported (not a supported version)", lib->soname, sym);
  B(fd, "status", "error");
}

// Reports the library-level failure of `call`.
static void report_failure(int fd, const TpGpuLib *lib, const char *call, long code,
                           const char *name, const char *text, const char *hint) {
  B(fd, "call", "%s", call);
  B(fd, "code", "%ld", code);
  B(fd, "code_name", "%s", name ? name : "");
  B(fd, "code_text", "%s", text ? text : "");
  B(fd, "reason", "%s: %s: error %ld (%s)%s%s%s%s", lib->soname, call, code,
    name && name[0] ? name : "?", text && text[0] ? ": " : "", text ? text : "", hint ? "; " : "",
    hint ? hint : "");
  B(fd, "status", "error");
}

// Formats 16 UUID bytes as NVML does: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
// [nvml.h nvmlDeviceGetUUID: "GPU-" followed by the 16-byte UUID in 8-4-4-4-12 hex groups].
static void format_uuid(const unsigned char *u, char *out, size_t outsz) {
  snprintf(out, outsz, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
           u[14], u[15]);
}

static bool all_zero(const unsigned char *u, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (u[i]) {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// NVML [nvml.h as in NVIDIA/go-nvml gen/nvml/nvml.h; GPU_PROBING.md §3.1, §5]

typedef int (*nvml_init_fn)(void);
typedef const char *(*nvml_errstr_fn)(int);
typedef int (*nvml_strbuf_fn)(char *, unsigned);
typedef int (*nvml_int_fn)(int *);
typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_dev_str_fn)(void *, char *, unsigned);
typedef int (*nvml_dev_ptr_fn)(void *, void *);
typedef int (*nvml_dev_clock_fn)(void *, int, unsigned *);
typedef int (*nvml_dev_cc_fn)(void *, int *, int *);
typedef int (*nvml_dev_uint_fn)(void *, unsigned *);
typedef int (*nvml_dev_int_fn)(void *, int *);
typedef int (*nvml_dev_int2_fn)(void *, int *, int *);
typedef int (*nvml_procs_fn)(void *, unsigned *, void *);

static const char *nvml_code_name(int rc);

// nvmlProcessInfo_t (the _v2/_v3 layout): pid, usedGpuMemory, gpuInstanceId,
// computeInstanceId [nvml.h]; usedGpuMemory is NVML_VALUE_NOT_AVAILABLE (all ones) when the
// driver cannot tell (e.g. under Windows WDDM or without privileges).
typedef struct NvmlProcess {
  unsigned pid;
  unsigned long long used;
  unsigned gpu_instance, compute_instance;
} NvmlProcess;
#define NVML_PROCESSES_MAX     64
#define NVML_INSUFFICIENT_SIZE 7

// Reports the compute processes of one device: their count, and "pid bytes" for each.
static void nvml_processes(int fd, int d, void *h, nvml_procs_fn procs) {
  NvmlProcess list[NVML_PROCESSES_MAX];
  unsigned n = NVML_PROCESSES_MAX;
  memset(list, 0, sizeof list);
  int rc = procs(h, &n, list);
  if (rc == NVML_INSUFFICIENT_SIZE) {
    D(fd, d, "nprocesses", "%u", n);  // more than the list holds: the count is enough
    return;
  }
  if (rc != 0) {
    D(fd, d, "error", "nvmlDeviceGetComputeRunningProcesses: error %d (%s)", rc,
      nvml_code_name(rc));
    return;
  }
  if (n > NVML_PROCESSES_MAX) {
    n = NVML_PROCESSES_MAX;
  }
  D(fd, d, "nprocesses", "%u", n);
  for (unsigned k = 0; k < n; k++) {
    long long used = list[k].used == ~0ULL ? -1 : (long long)list[k].used;
    D(fd, d, "process", "%u %lld", list[k].pid, used);
  }
}

// NVML_ERROR_* names by value [nvml.h enum nvmlReturn_enum].
static const char *nvml_code_name(int rc) {
  static const char *const names[] = {
      "NVML_SUCCESS",
      "NVML_ERROR_UNINITIALIZED",
      "NVML_ERROR_INVALID_ARGUMENT",
      "NVML_ERROR_NOT_SUPPORTED",
      "NVML_ERROR_NO_PERMISSION",
      "NVML_ERROR_ALREADY_INITIALIZED",
      "NVML_ERROR_NOT_FOUND",
      "NVML_ERROR_INSUFFICIENT_SIZE",
      "NVML_ERROR_INSUFFICIENT_POWER",
      "NVML_ERROR_DRIVER_NOT_LOADED",
      "NVML_ERROR_TIMEOUT",
      "NVML_ERROR_IRQ_ISSUE",
      "NVML_ERROR_LIBRARY_NOT_FOUND",
      "NVML_ERROR_FUNCTION_NOT_FOUND",
      "NVML_ERROR_CORRUPTED_INFOROM",
      "NVML_ERROR_GPU_IS_LOST",
      "NVML_ERROR_RESET_REQUIRED",
      "NVML_ERROR_OPERATING_SYSTEM",
      "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
      "NVML_ERROR_IN_USE",
      "NVML_ERROR_MEMORY",
      "NVML_ERROR_NO_DATA",
      "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
      "NVML_ERROR_INSUFFICIENT_RESOURCES",
      "NVML_ERROR_FREQ_NOT_SUPPORTED",
      "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
      "NVML_ERROR_DEPRECATED",
      "NVML_ERROR_NOT_READY",
      "NVML_ERROR_GPU_NOT_FOUND",
      "NVML_ERROR_INVALID_STATE",
  };
  if (rc >= 0 && (size_t)rc < sizeof names / sizeof names[0]) {
    return names[rc];
  }
  return rc == 999 ? "NVML_ERROR_UNKNOWN" : "NVML_ERROR_?";
}

// nvmlPciInfo_t: busIdLegacy[16], five unsigned ints, then busId[32] at offset 36 [nvml.h].
#define NVML_PCI_BUSID_OFFSET 36

static void probe_nvml(int fd, const char *libpath) {
  TpGpuOpenIter it;
  TpGpuLib lib;
  if (!open_first(fd, TP_GPU_NVML, libpath, &it, &lib)) {
    tp_gpu_open_end(&it);
    return;
  }
  nvml_init_fn init = (nvml_init_fn)tp_gpu_sym(&lib, "nvmlInit_v2");
  nvml_init_fn shutdown = (nvml_init_fn)tp_gpu_sym(&lib, "nvmlShutdown");
  nvml_errstr_fn errstr = (nvml_errstr_fn)tp_gpu_sym(&lib, "nvmlErrorString");
  nvml_count_fn count = (nvml_count_fn)tp_gpu_sym(&lib, "nvmlDeviceGetCount_v2");
  nvml_handle_fn handle = (nvml_handle_fn)tp_gpu_sym(&lib, "nvmlDeviceGetHandleByIndex_v2");
  const char *missing = !init     ? "nvmlInit_v2"
                        : !count  ? "nvmlDeviceGetCount_v2"
                        : !handle ? "nvmlDeviceGetHandleByIndex_v2"
                                  : NULL;
  if (missing) {
    report_missing_symbol(fd, &lib, missing);
    tp_gpu_open_end(&it);
    return;
  }
  B(fd, "phase", "nvmlInit_v2");
  int rc = init();
  if (rc != 0) {
    report_failure(fd, &lib, "nvmlInit_v2", rc, nvml_code_name(rc), errstr ? errstr(rc) : NULL,
                   NULL);
    tp_gpu_open_end(&it);
    return;
  }
  nvml_strbuf_fn drv = (nvml_strbuf_fn)tp_gpu_sym(&lib, "nvmlSystemGetDriverVersion");
  char buf[256] = "";
  if (drv && drv(buf, sizeof buf) == 0) {
    buf[sizeof buf - 1] = '\0';
    B(fd, "driver_version", "%s", buf);
  }
  nvml_int_fn cudadrv = (nvml_int_fn)tp_gpu_sym(&lib, "nvmlSystemGetCudaDriverVersion_v2");
  if (!cudadrv) {
    cudadrv = (nvml_int_fn)tp_gpu_sym(&lib, "nvmlSystemGetCudaDriverVersion");
  }
  int cv = 0;
  if (cudadrv && cudadrv(&cv) == 0 && cv > 0) {
    char s[32];
    tp_gpu_format_cuda_version(cv, s, sizeof s);
    B(fd, "cuda_version", "%s", s);
  }
  B(fd, "phase", "nvmlDeviceGetCount_v2");
  unsigned n = 0;
  rc = count(&n);
  if (rc != 0) {
    report_failure(fd, &lib, "nvmlDeviceGetCount_v2", rc, nvml_code_name(rc),
                   errstr ? errstr(rc) : NULL, NULL);
    tp_gpu_open_end(&it);
    return;
  }
  if (n > TP_GPU_DEVICES_MAX) {
    n = TP_GPU_DEVICES_MAX;
  }
  nvml_dev_str_fn name = (nvml_dev_str_fn)tp_gpu_sym(&lib, "nvmlDeviceGetName");
  nvml_dev_str_fn uuid = (nvml_dev_str_fn)tp_gpu_sym(&lib, "nvmlDeviceGetUUID");
  nvml_dev_ptr_fn pci = (nvml_dev_ptr_fn)tp_gpu_sym(&lib, "nvmlDeviceGetPciInfo_v3");
  nvml_dev_ptr_fn mem = (nvml_dev_ptr_fn)tp_gpu_sym(&lib, "nvmlDeviceGetMemoryInfo");
  nvml_dev_clock_fn maxclk = (nvml_dev_clock_fn)tp_gpu_sym(&lib, "nvmlDeviceGetMaxClockInfo");
  nvml_dev_cc_fn cc = (nvml_dev_cc_fn)tp_gpu_sym(&lib, "nvmlDeviceGetCudaComputeCapability");
  nvml_dev_uint_fn plimit = (nvml_dev_uint_fn)tp_gpu_sym(&lib, "nvmlDeviceGetEnforcedPowerLimit");
  nvml_dev_clock_fn clk = (nvml_dev_clock_fn)tp_gpu_sym(&lib, "nvmlDeviceGetClockInfo");
  nvml_dev_clock_fn appclk = (nvml_dev_clock_fn)tp_gpu_sym(&lib, "nvmlDeviceGetApplicationsClock");
  nvml_dev_int2_fn ecc = (nvml_dev_int2_fn)tp_gpu_sym(&lib, "nvmlDeviceGetEccMode");
  nvml_dev_int_fn persist = (nvml_dev_int_fn)tp_gpu_sym(&lib, "nvmlDeviceGetPersistenceMode");
  nvml_procs_fn procs = (nvml_procs_fn)tp_gpu_sym(&lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!procs) {
    procs = (nvml_procs_fn)tp_gpu_sym(&lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  }
  for (unsigned i = 0; i < n; i++) {
    int d = (int)i;
    void *h = NULL;
    B(fd, "phase", "nvmlDeviceGetHandleByIndex_v2(%u)", i);
    D(fd, d, "vendor", "nvidia");
    rc = handle(i, &h);
    if (rc != 0) {
      D(fd, d, "error", "nvmlDeviceGetHandleByIndex_v2: error %d (%s)", rc, nvml_code_name(rc));
      continue;
    }
    // NVML_DEVICE_NAME_V2_BUFFER_SIZE is 96, NVML_DEVICE_UUID_V2_BUFFER_SIZE 96 [nvml.h].
    if (name) {
      B(fd, "phase", "nvmlDeviceGetName(%u)", i);
      char nb[128] = "";
      rc = name(h, nb, 96);
      nb[sizeof nb - 1] = '\0';
      if (rc == 0) {
        D(fd, d, "name", "%s", nb);
      } else {
        D(fd, d, "error", "nvmlDeviceGetName: error %d (%s)", rc, nvml_code_name(rc));
      }
    }
    if (uuid) {
      char ub[128] = "";
      rc = uuid(h, ub, 96);
      ub[sizeof ub - 1] = '\0';
      if (rc == 0) {
        D(fd, d, "uuid", "%s", ub);
      } else {
        D(fd, d, "error", "nvmlDeviceGetUUID: error %d (%s)", rc, nvml_code_name(rc));
      }
    }
    if (pci) {
      unsigned char pb[256] = {0};
      rc = pci(h, pb);
      if (rc == 0) {
        pb[NVML_PCI_BUSID_OFFSET + 31] = '\0';
        D(fd, d, "pci_bus_id", "%s", (const char *)pb + NVML_PCI_BUSID_OFFSET);
      } else {
        D(fd, d, "error", "nvmlDeviceGetPciInfo_v3: error %d (%s)", rc, nvml_code_name(rc));
      }
    }
    if (mem) {
      unsigned long long m[3] = {0};  // nvmlMemory_t {total, free, used}, bytes
      rc = mem(h, m);
      if (rc == 0) {
        D(fd, d, "memory_total", "%llu", m[0]);
        D(fd, d, "memory_used", "%llu", m[2]);
      } else {
        D(fd, d, "error", "nvmlDeviceGetMemoryInfo: error %d (%s)", rc, nvml_code_name(rc));
      }
    }
    unsigned mhz = 0;
    if (maxclk && maxclk(h, 1, &mhz) == 0) {  // NVML_CLOCK_SM = 1
      D(fd, d, "clock_khz", "%u", mhz * 1000u);
    }
    if (maxclk && maxclk(h, 2, &mhz) == 0) {  // NVML_CLOCK_MEM = 2
      D(fd, d, "memory_clock_khz", "%u", mhz * 1000u);
    }
    int major = -1, minor = -1;
    if (cc && cc(h, &major, &minor) == 0 && major >= 0 && minor >= 0) {
      D(fd, d, "cc_major", "%d", major);
      D(fd, d, "cc_minor", "%d", minor);
      D(fd, d, "arch", "sm_%d%d", major, minor);
      D(fd, d, "arch_full", "sm_%d%d", major, minor);
    }
    unsigned mw = 0;
    if (plimit && plimit(h, &mw) == 0) {
      D(fd, d, "power_limit_mw", "%u", mw);
    }
    if (clk && clk(h, 1, &mhz) == 0) {  // NVML_CLOCK_SM: the clock now
      D(fd, d, "clock_now_khz", "%u", mhz * 1000u);
    }
    if (appclk && appclk(h, 1, &mhz) == 0) {  // the applications clock the GPU aims for
      D(fd, d, "app_clock_khz", "%u", mhz * 1000u);
    }
    int cur = -1, pending = -1;  // nvmlEnableState_t: 0 disabled, 1 enabled
    if (ecc && ecc(h, &cur, &pending) == 0 && (cur == 0 || cur == 1)) {
      D(fd, d, "ecc", "%d", cur);
    }
    int pm = -1;
    if (persist && persist(h, &pm) == 0 && (pm == 0 || pm == 1)) {
      D(fd, d, "persistence", "%d", pm);
    }
    if (procs) {
      B(fd, "phase", "nvmlDeviceGetComputeRunningProcesses(%u)", i);
      nvml_processes(fd, d, h, procs);
    }
  }
  B(fd, "device_count", "%u", n);
  if (shutdown) {
    shutdown();
  }
  B(fd, "status", n > 0 ? "ok" : "no_device");
  tp_gpu_open_end(&it);
}

// ---------------------------------------------------------------------------------------------
// CUDA driver API [CUDA 13.0 cuda.h; GPU_PROBING.md §3.1: attributes 13 clock kHz, 16 SMs,
// 36 memory clock kHz, 37 bus width, 75/76 compute capability; _v2 names are the current ABI]

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_int_fn)(int *);
typedef int (*cu_errstr_fn)(int, const char **);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_name_fn)(char *, int, int);
typedef int (*cu_mem_fn)(size_t *, int);
typedef int (*cu_attr_fn)(int *, int, int);
typedef int (*cu_uuid_fn)(unsigned char *, int);

#define CU_ATTR_CLOCK     13
#define CU_ATTR_SMS       16
#define CU_ATTR_MEM_CLOCK 36
#define CU_ATTR_BUS_WIDTH 37
#define CU_ATTR_CC_MAJOR  75
#define CU_ATTR_CC_MINOR  76

// CUDA_ERROR_STUB_LIBRARY / cudaErrorStubLibrary = 34 [CUDA 13.0 cuda.h, driver_types.h].
#define CUDA_STUB 34
static const char stub_hint[] =
    "a stub library answered: the NVIDIA driver's libcuda.so.1 is missing or a toolkit stubs/ "
    "directory is on the library path";

static void cu_error(cu_errstr_fn getname, cu_errstr_fn getstr, int rc, const char **name,
                     const char **text) {
  *name = NULL;
  *text = NULL;
  if (getname && getname(rc, name) != 0) {
    *name = NULL;
  }
  if (getstr && getstr(rc, text) != 0) {
    *text = NULL;
  }
}

static void probe_cuda(int fd, const char *libpath) {
  TpGpuOpenIter it;
  TpGpuLib lib;
  if (!open_first(fd, TP_GPU_CUDA, libpath, &it, &lib)) {
    tp_gpu_open_end(&it);
    return;
  }
  cu_init_fn init = (cu_init_fn)tp_gpu_sym(&lib, "cuInit");
  cu_errstr_fn getname = (cu_errstr_fn)tp_gpu_sym(&lib, "cuGetErrorName");
  cu_errstr_fn getstr = (cu_errstr_fn)tp_gpu_sym(&lib, "cuGetErrorString");
  cu_int_fn drvver = (cu_int_fn)tp_gpu_sym(&lib, "cuDriverGetVersion");
  cu_int_fn count = (cu_int_fn)tp_gpu_sym(&lib, "cuDeviceGetCount");
  cu_get_fn get = (cu_get_fn)tp_gpu_sym(&lib, "cuDeviceGet");
  const char *missing = !init    ? "cuInit"
                        : !count ? "cuDeviceGetCount"
                        : !get   ? "cuDeviceGet"
                                 : NULL;
  if (missing) {
    report_missing_symbol(fd, &lib, missing);
    tp_gpu_open_end(&it);
    return;
  }
  const char *ename, *etext;
  B(fd, "phase", "cuInit");
  int rc = init(0);
  int v = 0;
  if (drvver && drvver(&v) == 0 && v > 0) {
    char s[32];
    tp_gpu_format_cuda_version(v, s, sizeof s);
    B(fd, "driver_version", "%s", s);
  }
  if (rc != 0) {
    cu_error(getname, getstr, rc, &ename, &etext);
    report_failure(fd, &lib, "cuInit", rc, ename, etext, rc == CUDA_STUB ? stub_hint : NULL);
    tp_gpu_open_end(&it);
    return;
  }
  int n = 0;
  B(fd, "phase", "cuDeviceGetCount");
  rc = count(&n);
  if (rc != 0) {
    cu_error(getname, getstr, rc, &ename, &etext);
    report_failure(fd, &lib, "cuDeviceGetCount", rc, ename, etext, NULL);
    tp_gpu_open_end(&it);
    return;
  }
  if (n < 0) {
    n = 0;
  }
  if (n > TP_GPU_DEVICES_MAX) {
    n = TP_GPU_DEVICES_MAX;
  }
  cu_name_fn name = (cu_name_fn)tp_gpu_sym(&lib, "cuDeviceGetName");
  cu_mem_fn mem = (cu_mem_fn)tp_gpu_sym(&lib, "cuDeviceTotalMem_v2");
  cu_attr_fn attr = (cu_attr_fn)tp_gpu_sym(&lib, "cuDeviceGetAttribute");
  cu_name_fn pci = (cu_name_fn)tp_gpu_sym(&lib, "cuDeviceGetPCIBusId");
  cu_uuid_fn uuid = (cu_uuid_fn)tp_gpu_sym(&lib, "cuDeviceGetUuid_v2");
  if (!uuid) {
    uuid = (cu_uuid_fn)tp_gpu_sym(&lib, "cuDeviceGetUuid");
  }
  static const struct {
    int attr;
    const char *key;
  } attrs[] = {{CU_ATTR_SMS, "sm_count"},
               {CU_ATTR_CLOCK, "clock_khz"},
               {CU_ATTR_MEM_CLOCK, "memory_clock_khz"},
               {CU_ATTR_BUS_WIDTH, "memory_bus_width"},
               {CU_ATTR_CC_MAJOR, "cc_major"},
               {CU_ATTR_CC_MINOR, "cc_minor"}};
  for (int i = 0; i < n; i++) {
    D(fd, i, "vendor", "nvidia");
    int dev = 0;
    B(fd, "phase", "cuDeviceGet(%d)", i);
    rc = get(&dev, i);
    if (rc != 0) {
      cu_error(getname, getstr, rc, &ename, &etext);
      D(fd, i, "error", "cuDeviceGet: error %d (%s)", rc, ename ? ename : "?");
      continue;
    }
    if (name) {
      char nb[256] = "";
      B(fd, "phase", "cuDeviceGetName(%d)", i);
      rc = name(nb, (int)sizeof nb - 1, dev);
      if (rc == 0) {
        D(fd, i, "name", "%s", nb);
      } else {
        cu_error(getname, getstr, rc, &ename, &etext);
        D(fd, i, "error", "cuDeviceGetName: error %d (%s)", rc, ename ? ename : "?");
      }
    }
    if (mem) {
      size_t bytes = 0;
      rc = mem(&bytes, dev);
      if (rc == 0) {
        D(fd, i, "memory_total", "%zu", bytes);
      } else {
        cu_error(getname, getstr, rc, &ename, &etext);
        D(fd, i, "error", "cuDeviceTotalMem_v2: error %d (%s)", rc, ename ? ename : "?");
      }
    }
    int major = -1, minor = -1;
    for (size_t a = 0; attr && a < sizeof attrs / sizeof attrs[0]; a++) {
      int value = -1;
      B(fd, "phase", "cuDeviceGetAttribute(%d, %d)", attrs[a].attr, i);
      rc = attr(&value, attrs[a].attr, dev);
      if (rc != 0) {
        cu_error(getname, getstr, rc, &ename, &etext);
        D(fd, i, "error", "cuDeviceGetAttribute(%d): error %d (%s)", attrs[a].attr, rc,
          ename ? ename : "?");
        continue;
      }
      D(fd, i, attrs[a].key, "%d", value);
      major = attrs[a].attr == CU_ATTR_CC_MAJOR ? value : major;
      minor = attrs[a].attr == CU_ATTR_CC_MINOR ? value : minor;
    }
    if (major >= 0 && minor >= 0) {
      D(fd, i, "arch", "sm_%d%d", major, minor);
      D(fd, i, "arch_full", "sm_%d%d", major, minor);
    }
    if (pci) {
      char pb[64] = "";
      rc = pci(pb, (int)sizeof pb - 1, dev);
      if (rc == 0) {
        D(fd, i, "pci_bus_id", "%s", pb);
      } else {
        cu_error(getname, getstr, rc, &ename, &etext);
        D(fd, i, "error", "cuDeviceGetPCIBusId: error %d (%s)", rc, ename ? ename : "?");
      }
    }
    if (uuid) {
      unsigned char u[16] = {0};
      if (uuid(u, dev) == 0 && !all_zero(u, sizeof u)) {
        char s[64];
        format_uuid(u, s, sizeof s);
        D(fd, i, "uuid", "%s", s);
      }
    }
  }
  B(fd, "device_count", "%d", n);
  B(fd, "status", n > 0 ? "ok" : "no_device");
  tp_gpu_open_end(&it);
}

// ---------------------------------------------------------------------------------------------
// CUDA runtime [CUDA 13.0 cuda_runtime_api.h, driver_types.h; GPU_PROBING.md §3.1, §3.3, §8]

typedef int (*cuda_int_fn)(int *);
typedef const char *(*cuda_errstr_fn)(int);
typedef int (*cuda_attr_fn)(int *, int, int);
typedef int (*cuda_pci_fn)(char *, int, int);
typedef int (*cuda_props_fn)(void *, int);

// cudaErrorInsufficientDriver: the runtime is newer than the driver [driver_types.h].
#define CUDART_INSUFFICIENT_DRIVER 35
// cudaDeviceProp offsets shared by the CUDA 11-era prefix, 12.x (_v2) and 13.0 layouts
// [GPU_PROBING.md §3.3, derived from the headers]: name[256] at 0, uuid[16] at 256,
// totalGlobalMem (size_t) at 288.
#define CUDAPROP_UUID     256
#define CUDAPROP_TOTALMEM 288
#define PROPS_BUFFER      8192

typedef struct CudartLib {
  TpGpuLib lib;
  cuda_int_fn rtver, drvver, count;
  cuda_errstr_fn errname, errstr;
  cuda_attr_fn attr;
  cuda_pci_fn pci;
  cuda_props_fn props;
  char runtime[32], driver[32];
} CudartLib;

// Resolves what the probe uses; false when a required symbol is missing (reported in `why`).
static bool cudart_bind(CudartLib *c, char *why, size_t whysz) {
  c->rtver = (cuda_int_fn)tp_gpu_sym(&c->lib, "cudaRuntimeGetVersion");
  c->drvver = (cuda_int_fn)tp_gpu_sym(&c->lib, "cudaDriverGetVersion");
  c->count = (cuda_int_fn)tp_gpu_sym(&c->lib, "cudaGetDeviceCount");
  c->errname = (cuda_errstr_fn)tp_gpu_sym(&c->lib, "cudaGetErrorName");
  c->errstr = (cuda_errstr_fn)tp_gpu_sym(&c->lib, "cudaGetErrorString");
  c->attr = (cuda_attr_fn)tp_gpu_sym(&c->lib, "cudaDeviceGetAttribute");
  c->pci = (cuda_pci_fn)tp_gpu_sym(&c->lib, "cudaDeviceGetPCIBusId");
  // CUDA 12 exports the new layout as _v2 and the plain name with the old one; CUDA 13 exports
  // only the plain name (new layout). The fields read here sit at the same offsets in all.
  c->props = (cuda_props_fn)tp_gpu_sym(&c->lib, "cudaGetDeviceProperties_v2");
  if (!c->props) {
    c->props = (cuda_props_fn)tp_gpu_sym(&c->lib, "cudaGetDeviceProperties");
  }
  const char *missing = !c->count  ? "cudaGetDeviceCount"
                        : !c->attr ? "cudaDeviceGetAttribute"
                                   : NULL;
  if (missing) {
    snprintf(why, whysz, "%s: symbol %s not exported", c->lib.soname, missing);
    return false;
  }
  int v = 0;
  c->runtime[0] = c->driver[0] = '\0';
  if (c->rtver && c->rtver(&v) == 0 && v > 0) {
    tp_gpu_format_cuda_version(v, c->runtime, sizeof c->runtime);
  } else {
    // CUDA 11.8 fails even cudaRuntimeGetVersion without a device (GPU_PROBING.md §8): take
    // the major version from the soname, "libcudart.so.12" -> "12".
    const char *dot = strstr(c->lib.soname, ".so.");
    if (dot) {
      snprintf(c->runtime, sizeof c->runtime, "%s", dot + 4);
    }
  }
  v = 0;
  if (c->drvver && c->drvver(&v) == 0 && v > 0) {
    tp_gpu_format_cuda_version(v, c->driver, sizeof c->driver);
  }
  return true;
}

static void cudart_devices(int fd, const CudartLib *c, int n) {
  static const struct {
    int attr;
    const char *key;
  } attrs[] = {{CU_ATTR_SMS, "sm_count"},
               {CU_ATTR_CLOCK, "clock_khz"},
               {CU_ATTR_MEM_CLOCK, "memory_clock_khz"},
               {CU_ATTR_BUS_WIDTH, "memory_bus_width"},
               {CU_ATTR_CC_MAJOR, "cc_major"},
               {CU_ATTR_CC_MINOR, "cc_minor"}};
  static _Alignas(16) unsigned char props[PROPS_BUFFER];
  for (int i = 0; i < n; i++) {
    D(fd, i, "vendor", "nvidia");
    int rc;
    if (c->props) {
      memset(props, 0, sizeof props);
      B(fd, "phase", "cudaGetDeviceProperties(%d)", i);
      rc = c->props(props, i);
      if (rc == 0) {
        props[255] = '\0';
        D(fd, i, "name", "%s", (const char *)props);
        if (!all_zero(props + CUDAPROP_UUID, 16)) {
          char s[64];
          format_uuid(props + CUDAPROP_UUID, s, sizeof s);
          D(fd, i, "uuid", "%s", s);
        }
        size_t total = 0;
        memcpy(&total, props + CUDAPROP_TOTALMEM, sizeof total);
        D(fd, i, "memory_total", "%zu", total);
      } else {
        D(fd, i, "error", "cudaGetDeviceProperties: error %d (%s)", rc,
          c->errname ? c->errname(rc) : "?");
      }
    }
    int major = -1, minor = -1;
    for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++) {
      int value = -1;
      B(fd, "phase", "cudaDeviceGetAttribute(%d, %d)", attrs[a].attr, i);
      rc = c->attr(&value, attrs[a].attr, i);
      if (rc != 0) {
        D(fd, i, "error", "cudaDeviceGetAttribute(%d): error %d (%s)", attrs[a].attr, rc,
          c->errname ? c->errname(rc) : "?");
        continue;
      }
      D(fd, i, attrs[a].key, "%d", value);
      major = attrs[a].attr == CU_ATTR_CC_MAJOR ? value : major;
      minor = attrs[a].attr == CU_ATTR_CC_MINOR ? value : minor;
    }
    if (major >= 0 && minor >= 0) {
      D(fd, i, "arch", "sm_%d%d", major, minor);
      D(fd, i, "arch_full", "sm_%d%d", major, minor);
    }
    if (c->pci) {
      char pb[64] = "";
      B(fd, "phase", "cudaDeviceGetPCIBusId(%d)", i);
      rc = c->pci(pb, (int)sizeof pb - 1, i);
      if (rc == 0) {
        D(fd, i, "pci_bus_id", "%s", pb);
      } else {
        D(fd, i, "error", "cudaDeviceGetPCIBusId: error %d (%s): %s", rc,
          c->errname ? c->errname(rc) : "?", c->errstr ? c->errstr(rc) : "");
      }
    }
  }
}

static void probe_cudart(int fd, const char *libpath) {
  TpGpuOpenIter it;
  CudartLib c;
  CudartLib first;  // the newest runtime that refused for an old driver, kept for the report
  int first_rc = 0;
  bool have_first = false;
  memset(&c, 0, sizeof c);
  memset(&first, 0, sizeof first);
  if (!open_first(fd, TP_GPU_CUDART, libpath, &it, &c.lib)) {
    tp_gpu_open_end(&it);
    return;
  }
  for (;;) {
    char why[256];
    int n = 0, rc = -1;
    if (!cudart_bind(&c, why, sizeof why)) {
      tp_buf_printf(&it.tried, "%s: %s\n", c.lib.path, why);
    } else {
      B(fd, "phase", "cudaGetDeviceCount (%s)", c.lib.soname);
      rc = c.count(&n);
      if (rc == CUDART_INSUFFICIENT_DRIVER) {
        // A runtime newer than the driver: try the next older one before concluding.
        tp_buf_printf(&it.tried, "%s: cudaGetDeviceCount: error %d (%s): runtime %s, driver %s",
                      c.lib.path, rc, c.errname ? c.errname(rc) : "?", c.runtime,
                      c.driver[0] ? c.driver : "none");
        tp_buf_append(&it.tried, "\n", 1);
        if (!have_first) {
          first = c;
          first_rc = rc;
          have_first = true;
        }
      }
    }
    if (rc >= 0 && rc != CUDART_INSUFFICIENT_DRIVER) {
      // This runtime answered (devices, none, or another error): it speaks for the stack.
      emit_library(fd, &c.lib);
      emit_tried(fd, &it.tried);
      if (c.runtime[0]) {
        B(fd, "runtime_version", "%s", c.runtime);
      }
      if (c.driver[0]) {
        B(fd, "driver_version", "%s", c.driver);
      }
      if (rc != 0) {
        report_failure(fd, &c.lib, "cudaGetDeviceCount", rc, c.errname ? c.errname(rc) : NULL,
                       c.errstr ? c.errstr(rc) : NULL, rc == CUDA_STUB ? stub_hint : NULL);
      } else {
        if (n < 0) {
          n = 0;
        }
        if (n > TP_GPU_DEVICES_MAX) {
          n = TP_GPU_DEVICES_MAX;
        }
        cudart_devices(fd, &c, n);
        B(fd, "device_count", "%d", n);
        B(fd, "status", n > 0 ? "ok" : "no_device");
      }
      break;
    }
    memset(&c, 0, sizeof c);
    if (!tp_gpu_open_next(&it, &c.lib)) {
      if (have_first) {
        emit_library(fd, &first.lib);
        emit_tried(fd, &it.tried);
        if (first.runtime[0]) {
          B(fd, "runtime_version", "%s", first.runtime);
        }
        if (first.driver[0]) {
          B(fd, "driver_version", "%s", first.driver);
        }
        char hint[160];
        if (first.driver[0]) {
          snprintf(hint, sizeof hint,
                   "driver %s is older than runtime %s and no older runtime "
                   "answered",
                   first.driver, first.runtime);
        } else {
          snprintf(hint, sizeof hint, "%s",
                   "no NVIDIA driver found (cudaDriverGetVersion "
                   "reports none) and no older runtime answered");
        }
        report_failure(fd, &first.lib, "cudaGetDeviceCount", first_rc,
                       first.errname ? first.errname(first_rc) : NULL,
                       first.errstr ? first.errstr(first_rc) : NULL, hint);
      } else {
        emit_tried(fd, &it.tried);
        B(fd, "reason", "no usable CUDA runtime (see tried)");
        B(fd, "status", "error");
      }
      break;
    }
  }
  tp_gpu_open_end(&it);
}

// ---------------------------------------------------------------------------------------------
// HIP runtime [ROCm/HIP include/hip/hip_runtime_api.h; Debian 12 HIP 5.2.3 headers;
// GPU_PROBING.md §4: attributes 5 clock kHz, 23/61 gfx major/minor, 59 bus width, 60 memory
// clock kHz, 63 compute units; property layouts R0000 (gcnArchName at 396) and R0600 (1160)]

typedef int (*hip_int_fn)(int *);
typedef const char *(*hip_errstr_fn)(int);
typedef int (*hip_attr_fn)(int *, int, int);
typedef int (*hip_name_fn)(char *, int, int);
typedef int (*hip_mem_fn)(size_t *, int);
typedef int (*hip_uuid_fn)(unsigned char *, int);
typedef int (*hip_props_fn)(void *, int);

#define HIP_ATTR_CLOCK     5
#define HIP_ATTR_CC_MAJOR  23
#define HIP_ATTR_BUS_WIDTH 59
#define HIP_ATTR_MEM_CLOCK 60
#define HIP_ATTR_CC_MINOR  61
#define HIP_ATTR_CUS       63
#define HIP_GCNARCH_R0000  396
#define HIP_GCNARCH_R0600  1160

static void probe_hip(int fd, const char *libpath) {
  TpGpuOpenIter it;
  TpGpuLib lib;
  if (!open_first(fd, TP_GPU_HIP, libpath, &it, &lib)) {
    tp_gpu_open_end(&it);
    return;
  }
  hip_int_fn rtver = (hip_int_fn)tp_gpu_sym(&lib, "hipRuntimeGetVersion");
  hip_int_fn drvver = (hip_int_fn)tp_gpu_sym(&lib, "hipDriverGetVersion");
  hip_int_fn count = (hip_int_fn)tp_gpu_sym(&lib, "hipGetDeviceCount");
  hip_errstr_fn errname = (hip_errstr_fn)tp_gpu_sym(&lib, "hipGetErrorName");
  hip_errstr_fn errstr = (hip_errstr_fn)tp_gpu_sym(&lib, "hipGetErrorString");
  hip_attr_fn attr = (hip_attr_fn)tp_gpu_sym(&lib, "hipDeviceGetAttribute");
  const char *missing = !count ? "hipGetDeviceCount" : !attr ? "hipDeviceGetAttribute" : NULL;
  if (missing) {
    report_missing_symbol(fd, &lib, missing);
    tp_gpu_open_end(&it);
    return;
  }
  int v = 0;
  B(fd, "phase", "hipRuntimeGetVersion");
  if (rtver && rtver(&v) == 0 && v > 0) {
    char s[32];
    tp_gpu_format_hip_version(v, s, sizeof s);
    B(fd, "runtime_version", "%s", s);
  }
  v = 0;
  if (drvver && drvver(&v) == 0 && v > 0) {
    // HIP 5.2.3 returns the HIP version here (GPU_PROBING.md §8); other releases a plain number.
    char s[32];
    if (v >= 10000000) {
      tp_gpu_format_hip_version(v, s, sizeof s);
    } else {
      snprintf(s, sizeof s, "%d", v);
    }
    B(fd, "driver_version", "%s", s);
  }
  int n = 0;
  B(fd, "phase", "hipGetDeviceCount");
  int rc = count(&n);
  if (rc != 0) {
    report_failure(fd, &lib, "hipGetDeviceCount", rc, errname ? errname(rc) : NULL,
                   errstr ? errstr(rc) : NULL, NULL);
    tp_gpu_open_end(&it);
    return;
  }
  if (n < 0) {
    n = 0;
  }
  if (n > TP_GPU_DEVICES_MAX) {
    n = TP_GPU_DEVICES_MAX;
  }
  hip_name_fn name = (hip_name_fn)tp_gpu_sym(&lib, "hipDeviceGetName");
  hip_mem_fn mem = (hip_mem_fn)tp_gpu_sym(&lib, "hipDeviceTotalMem");
  hip_name_fn pci = (hip_name_fn)tp_gpu_sym(&lib, "hipDeviceGetPCIBusId");
  hip_uuid_fn uuid = (hip_uuid_fn)tp_gpu_sym(&lib, "hipDeviceGetUuid");
  // The plain hipGetDeviceProperties fills the old R0000 layout even in HIP 6
  // [ROCm/clr hipamd/src/hip_device.cpp]; R0600 is the HIP 6 layout.
  size_t arch_off = HIP_GCNARCH_R0600;
  hip_props_fn props = (hip_props_fn)tp_gpu_sym(&lib, "hipGetDevicePropertiesR0600");
  if (!props) {
    arch_off = HIP_GCNARCH_R0000;
    props = (hip_props_fn)tp_gpu_sym(&lib, "hipGetDevicePropertiesR0000");
    if (!props) {
      props = (hip_props_fn)tp_gpu_sym(&lib, "hipGetDeviceProperties");
    }
  }
  static const struct {
    int attr;
    const char *key;
  } attrs[] = {{HIP_ATTR_CUS, "sm_count"},
               {HIP_ATTR_CLOCK, "clock_khz"},
               {HIP_ATTR_MEM_CLOCK, "memory_clock_khz"},
               {HIP_ATTR_BUS_WIDTH, "memory_bus_width"},
               {HIP_ATTR_CC_MAJOR, "cc_major"},
               {HIP_ATTR_CC_MINOR, "cc_minor"}};
  static _Alignas(16) unsigned char pb[PROPS_BUFFER];
  for (int i = 0; i < n; i++) {
    D(fd, i, "vendor", "amd");
    if (name) {
      char nb[256] = "";
      B(fd, "phase", "hipDeviceGetName(%d)", i);
      rc = name(nb, (int)sizeof nb - 1, i);
      if (rc == 0) {
        D(fd, i, "name", "%s", nb);
      } else {
        D(fd, i, "error", "hipDeviceGetName: error %d (%s)", rc, errname ? errname(rc) : "?");
      }
    }
    if (mem) {
      size_t bytes = 0;
      B(fd, "phase", "hipDeviceTotalMem(%d)", i);
      rc = mem(&bytes, i);
      if (rc == 0) {
        D(fd, i, "memory_total", "%zu", bytes);
      } else {
        D(fd, i, "error", "hipDeviceTotalMem: error %d (%s)", rc, errname ? errname(rc) : "?");
      }
    }
    for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++) {
      int value = -1;
      B(fd, "phase", "hipDeviceGetAttribute(%d, %d)", attrs[a].attr, i);
      rc = attr(&value, attrs[a].attr, i);
      if (rc != 0) {
        D(fd, i, "error", "hipDeviceGetAttribute(%d): error %d (%s)", attrs[a].attr, rc,
          errname ? errname(rc) : "?");
        continue;
      }
      D(fd, i, attrs[a].key, "%d", value);
    }
    if (pci) {
      char b[64] = "";
      B(fd, "phase", "hipDeviceGetPCIBusId(%d)", i);
      rc = pci(b, (int)sizeof b - 1, i);
      if (rc == 0) {
        D(fd, i, "pci_bus_id", "%s", b);
      } else {
        D(fd, i, "error", "hipDeviceGetPCIBusId: error %d (%s)", rc, errname ? errname(rc) : "?");
      }
    }
    if (uuid) {
      unsigned char u[16] = {0};
      if (uuid(u, i) == 0 && !all_zero(u, sizeof u)) {
        // ROCm fills the 16 bytes with printable characters; keep them as text when they are.
        bool printable = true;
        for (size_t k = 0; k < sizeof u; k++) {
          printable = printable && isprint(u[k]);
        }
        char s[64];
        if (printable) {
          snprintf(s, sizeof s, "GPU-%.16s", (const char *)u);
        } else {
          format_uuid(u, s, sizeof s);
        }
        D(fd, i, "uuid", "%s", s);
      }
    }
    if (props) {
      memset(pb, 0, sizeof pb);
      B(fd, "phase", "hipGetDeviceProperties(%d)", i);
      rc = props(pb, i);
      if (rc == 0) {
        char arch[256];
        memcpy(arch, pb + arch_off, sizeof arch - 1);
        arch[sizeof arch - 1] = '\0';
        if (arch[0]) {
          D(fd, i, "arch_full", "%s", arch);
          char *colon = strchr(arch, ':');
          if (colon) {
            *colon = '\0';
          }
          D(fd, i, "arch", "%s", arch);
        }
      } else {
        D(fd, i, "error", "hipGetDeviceProperties: error %d (%s)", rc, errname ? errname(rc) : "?");
      }
    }
  }
  B(fd, "device_count", "%d", n);
  B(fd, "status", n > 0 ? "ok" : "no_device");
  tp_gpu_open_end(&it);
}

// ---------------------------------------------------------------------------------------------
// ROCm SMI [ROCm/rocm_smi_lib include/rocm_smi/rocm_smi.h; GPU_PROBING.md §4.1, §7.2]

typedef int (*rsmi_init_fn)(uint64_t);
typedef int (*rsmi_void_fn)(void);
typedef int (*rsmi_errstr_fn)(int, const char **);
typedef int (*rsmi_u32p_fn)(uint32_t *);
typedef struct RsmiVersion {
  uint32_t major, minor, patch;
  const char *build;
} RsmiVersion;  // rsmi_version_t
typedef int (*rsmi_version_fn)(RsmiVersion *);
typedef int (*rsmi_verstr_fn)(int, char *, uint32_t);
typedef int (*rsmi_name_fn)(uint32_t, char *, size_t);
typedef int (*rsmi_u64_fn)(uint32_t, uint64_t *);
typedef int (*rsmi_memtotal_fn)(uint32_t, int, uint64_t *);
typedef int (*rsmi_cap_fn)(uint32_t, uint32_t, uint64_t *);
typedef int (*rsmi_procs_fn)(void *, uint32_t *);
typedef int (*rsmi_proc_gpus_fn)(uint32_t, uint32_t *, uint32_t *);

static const char *rsmi_code_name(int rc);

// rsmi_process_info_t: process_id, pasid, vram_usage, sdma_usage, cu_occupancy [rocm_smi.h].
// Slots are padded to 64 bytes so that a later, longer layout cannot overrun the list.
typedef struct RsmiProcess {
  uint32_t pid, pasid;
  uint64_t vram, sdma;
  uint32_t cu_occupancy;
  unsigned char spare[36];
} RsmiProcess;
#define RSMI_PROCESSES_MAX 64

// ROCm SMI lists processes for the whole machine; each process names the devices it uses.
// Reports, for every device, the count and "pid bytes" of those on it (bytes: the process's
// VRAM over all its devices; -1 when it uses several, as the share per device is unknown).
static void rsmi_processes(int fd, uint32_t ndev, rsmi_procs_fn procs, rsmi_proc_gpus_fn gpus) {
  RsmiProcess list[RSMI_PROCESSES_MAX];
  uint32_t n = RSMI_PROCESSES_MAX;
  memset(list, 0, sizeof list);
  B(fd, "phase", "rsmi_compute_process_info_get");
  int rc = procs(list, &n);
  if (rc != 0 && rc != 0x10) {  // RSMI_STATUS_INSUFFICIENT_SIZE: the first n are filled
    for (uint32_t i = 0; i < ndev; i++) {
      D(fd, (int)i, "error", "rsmi_compute_process_info_get: error %d (%s)", rc,
        rsmi_code_name(rc));
    }
    return;
  }
  if (n > RSMI_PROCESSES_MAX) {
    n = RSMI_PROCESSES_MAX;
  }
  unsigned counts[TP_GPU_DEVICES_MAX] = {0};
  for (uint32_t k = 0; k < n; k++) {
    uint32_t idx[TP_GPU_DEVICES_MAX];
    uint32_t nd = TP_GPU_DEVICES_MAX;
    if (!gpus || gpus(list[k].pid, idx, &nd) != 0) {
      continue;
    }
    for (uint32_t j = 0; j < nd && j < TP_GPU_DEVICES_MAX; j++) {
      if (idx[j] < ndev) {
        counts[idx[j]]++;
        D(fd, (int)idx[j], "process", "%u %lld", list[k].pid,
          nd == 1 ? (long long)list[k].vram : -1LL);
      }
    }
  }
  for (uint32_t i = 0; i < ndev; i++) {
    D(fd, (int)i, "nprocesses", "%u", gpus ? counts[i] : 0u);
  }
}

// rsmi_status_t names by value [rocm_smi.h].
static const char *rsmi_code_name(int rc) {
  static const char *const names[] = {
      "RSMI_STATUS_SUCCESS",
      "RSMI_STATUS_INVALID_ARGS",
      "RSMI_STATUS_NOT_SUPPORTED",
      "RSMI_STATUS_FILE_ERROR",
      "RSMI_STATUS_PERMISSION",
      "RSMI_STATUS_OUT_OF_RESOURCES",
      "RSMI_STATUS_INTERNAL_EXCEPTION",
      "RSMI_STATUS_INPUT_OUT_OF_BOUNDS",
      "RSMI_STATUS_INIT_ERROR",
      "RSMI_STATUS_NOT_YET_IMPLEMENTED",
      "RSMI_STATUS_NOT_FOUND",
      "RSMI_STATUS_INSUFFICIENT_SIZE",
      "RSMI_STATUS_INTERRUPT",
      "RSMI_STATUS_UNEXPECTED_SIZE",
      "RSMI_STATUS_NO_DATA",
      "RSMI_STATUS_UNEXPECTED_DATA",
      "RSMI_STATUS_BUSY",
      "RSMI_STATUS_REFCOUNT_OVERFLOW",
  };
  if (rc >= 0 && (size_t)rc < sizeof names / sizeof names[0]) {
    return names[rc];
  }
  return rc == -1 ? "RSMI_STATUS_UNKNOWN_ERROR" : "RSMI_STATUS_?";
}

static void probe_rsmi(int fd, const char *libpath) {
  TpGpuOpenIter it;
  TpGpuLib lib;
  if (!open_first(fd, TP_GPU_RSMI, libpath, &it, &lib)) {
    tp_gpu_open_end(&it);
    return;
  }
  rsmi_init_fn init = (rsmi_init_fn)tp_gpu_sym(&lib, "rsmi_init");
  rsmi_void_fn shutdown = (rsmi_void_fn)tp_gpu_sym(&lib, "rsmi_shut_down");
  rsmi_errstr_fn errstr = (rsmi_errstr_fn)tp_gpu_sym(&lib, "rsmi_status_string");
  rsmi_u32p_fn count = (rsmi_u32p_fn)tp_gpu_sym(&lib, "rsmi_num_monitor_devices");
  rsmi_version_fn version = (rsmi_version_fn)tp_gpu_sym(&lib, "rsmi_version_get");
  rsmi_verstr_fn verstr = (rsmi_verstr_fn)tp_gpu_sym(&lib, "rsmi_version_str_get");
  const char *missing = !init ? "rsmi_init" : !count ? "rsmi_num_monitor_devices" : NULL;
  if (missing) {
    report_missing_symbol(fd, &lib, missing);
    tp_gpu_open_end(&it);
    return;
  }
  RsmiVersion ver = {0};
  if (version && version(&ver) == 0) {
    B(fd, "version", "%u.%u.%u", ver.major, ver.minor, ver.patch);
  }
  B(fd, "phase", "rsmi_init");
  int rc = init(0);
  if (rc != 0) {
    const char *text = NULL;
    if (errstr && errstr(rc, &text) != 0) {
      text = NULL;
    }
    report_failure(fd, &lib, "rsmi_init", rc, rsmi_code_name(rc), text, NULL);
    tp_gpu_open_end(&it);
    return;
  }
  char buf[256] = "";
  if (verstr && verstr(0, buf, sizeof buf) == 0) {  // RSMI_SW_COMP_DRIVER = 0
    buf[sizeof buf - 1] = '\0';
    B(fd, "driver_version", "%s", buf);
  }
  uint32_t n = 0;
  B(fd, "phase", "rsmi_num_monitor_devices");
  rc = count(&n);
  if (rc != 0) {
    const char *text = NULL;
    if (errstr && errstr(rc, &text) != 0) {
      text = NULL;
    }
    report_failure(fd, &lib, "rsmi_num_monitor_devices", rc, rsmi_code_name(rc), text, NULL);
    tp_gpu_open_end(&it);
    return;
  }
  if (n > TP_GPU_DEVICES_MAX) {
    n = TP_GPU_DEVICES_MAX;
  }
  rsmi_name_fn name = (rsmi_name_fn)tp_gpu_sym(&lib, "rsmi_dev_name_get");
  rsmi_u64_fn pci = (rsmi_u64_fn)tp_gpu_sym(&lib, "rsmi_dev_pci_id_get");
  rsmi_u64_fn uid = (rsmi_u64_fn)tp_gpu_sym(&lib, "rsmi_dev_unique_id_get");
  rsmi_memtotal_fn memtotal = (rsmi_memtotal_fn)tp_gpu_sym(&lib, "rsmi_dev_memory_total_get");
  rsmi_cap_fn cap = (rsmi_cap_fn)tp_gpu_sym(&lib, "rsmi_dev_power_cap_get");
  rsmi_memtotal_fn memused = (rsmi_memtotal_fn)tp_gpu_sym(&lib, "rsmi_dev_memory_usage_get");
  rsmi_u64_fn ecc = (rsmi_u64_fn)tp_gpu_sym(&lib, "rsmi_dev_ecc_enabled_get");
  rsmi_procs_fn procs = (rsmi_procs_fn)tp_gpu_sym(&lib, "rsmi_compute_process_info_get");
  rsmi_proc_gpus_fn procgpus = (rsmi_proc_gpus_fn)tp_gpu_sym(&lib, "rsmi_compute_process_gpus_get");
  for (uint32_t i = 0; i < n; i++) {
    int d = (int)i;
    D(fd, d, "vendor", "amd");
    if (name) {
      char nb[256] = "";
      B(fd, "phase", "rsmi_dev_name_get(%u)", i);
      rc = name(i, nb, sizeof nb - 1);
      if (rc == 0) {
        D(fd, d, "name", "%s", nb);
      } else {
        D(fd, d, "error", "rsmi_dev_name_get: error %d (%s)", rc, rsmi_code_name(rc));
      }
    }
    uint64_t v = 0;
    if (pci) {
      rc = pci(i, &v);
      if (rc == 0) {
        // BDFID: domain [63:32], bus [15:8], device [7:3], function [2:0] [rocm_smi.h].
        D(fd, d, "pci_bus_id", "%04x:%02x:%02x.%x", (unsigned)(v >> 32),
          (unsigned)((v >> 8) & 0xff), (unsigned)((v >> 3) & 0x1f), (unsigned)(v & 0x7));
      } else {
        D(fd, d, "error", "rsmi_dev_pci_id_get: error %d (%s)", rc, rsmi_code_name(rc));
      }
    }
    if (uid && uid(i, &v) == 0) {
      D(fd, d, "uuid", "0x%016llx", (unsigned long long)v);  // ROCm SMI's unique id
    }
    if (memtotal) {
      rc = memtotal(i, 0, &v);  // RSMI_MEM_TYPE_VRAM = 0
      if (rc == 0) {
        D(fd, d, "memory_total", "%llu", (unsigned long long)v);
      } else {
        D(fd, d, "error", "rsmi_dev_memory_total_get: error %d (%s)", rc, rsmi_code_name(rc));
      }
    }
    if (cap && cap(i, 0, &v) == 0) {
      D(fd, d, "power_limit_mw", "%llu", (unsigned long long)(v / 1000));  // microwatts
    }
    if (memused && memused(i, 0, &v) == 0) {
      D(fd, d, "memory_used", "%llu", (unsigned long long)v);
    }
    if (ecc && ecc(i, &v) == 0) {  // a mask of the RAS blocks with ECC on
      D(fd, d, "ecc", "%d", v != 0);
    }
  }
  if (procs && n > 0) {
    rsmi_processes(fd, n, procs, procgpus);
  }
  B(fd, "device_count", "%u", n);
  if (shutdown) {
    shutdown();
  }
  B(fd, "status", n > 0 ? "ok" : "no_device");
  tp_gpu_open_end(&it);
}

// ---------------------------------------------------------------------------------------------
// NCCL / RCCL: the version only [NVIDIA/nccl src/nccl.h.in: ncclResult_t ncclGetVersion(int*)]

static void probe_ccl(int fd, TpGpuApi api, const char *libpath) {
  TpGpuOpenIter it;
  TpGpuLib lib;
  if (!open_first(fd, api, libpath, &it, &lib)) {
    tp_gpu_open_end(&it);
    return;
  }
  typedef int (*ver_fn)(int *);
  ver_fn ver = (ver_fn)tp_gpu_sym(&lib, "ncclGetVersion");
  if (!ver) {
    report_missing_symbol(fd, &lib, "ncclGetVersion");
    tp_gpu_open_end(&it);
    return;
  }
  int v = 0;
  B(fd, "phase", "ncclGetVersion");
  int rc = ver(&v);
  if (rc != 0 || v <= 0) {
    report_failure(fd, &lib, "ncclGetVersion", rc, NULL, NULL, NULL);
    tp_gpu_open_end(&it);
    return;
  }
  char s[32];
  tp_gpu_format_nccl_version(v, s, sizeof s);
  B(fd, "version", "%s", s);
  B(fd, "status", "ok");
  tp_gpu_open_end(&it);
}

void tp_gpu_probe_child(TpGpuApi api, const char *libpath, int fd) {
  switch (api) {
    case TP_GPU_NVML:
      probe_nvml(fd, libpath);
      return;
    case TP_GPU_CUDA:
      probe_cuda(fd, libpath);
      return;
    case TP_GPU_CUDART:
      probe_cudart(fd, libpath);
      return;
    case TP_GPU_HIP:
      probe_hip(fd, libpath);
      return;
    case TP_GPU_RSMI:
      probe_rsmi(fd, libpath);
      return;
    case TP_GPU_NCCL:
    case TP_GPU_RCCL:
      probe_ccl(fd, api, libpath);
      return;
    case TP_GPU_API_COUNT:
      break;
  }
}
