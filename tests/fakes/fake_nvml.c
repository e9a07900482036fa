// Test double of NVML (libnvidia-ml.so.1): FAKE_COUNT devices of FAKE_MODEL. Telemetry is
// synthetic and exact: device i draws (400 + 10 i) W constantly, so its energy counter (mJ) is
// that power times CLOCK_MONOTONIC; FAKE_NO_ENERGY makes the counter unsupported.
// FAKE_BUSY_DEVICE=k puts a compute process (pid 4242, 30 GiB) on device k; the others have
// none. ECC is on, persistence mode on, the applications clock 1980 MHz.
#include "fake_gpus.h"

typedef struct FakeDev {
  int index;
} FakeDev;

static FakeDev devs[FAKE_COUNT];
static int initialised;

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3
};

static int check(void *h) {
  if (!initialised) {
    return NVML_ERROR_UNINITIALIZED;
  }
  FakeDev *d = h;
  return d >= devs && d < devs + FAKE_COUNT ? 0 : NVML_ERROR_INVALID_ARGUMENT;
}

static int idx(void *h) {
  return ((FakeDev *)h)->index;
}

static unsigned power_mw(int i) {
  return 400000u + 10000u * (unsigned)i;
}

FAKE_API(int, nvmlInit_v2, (void)) {
  for (int i = 0; i < FAKE_COUNT; i++) {
    devs[i].index = i;
  }
  initialised = 1;
  return 0;
}

FAKE_API(int, nvmlShutdown, (void)) {
  initialised = 0;
  return 0;
}

FAKE_API(const char *, nvmlErrorString, (int rc)) {
  return rc == 0 ? "Success" : rc == 3 ? "Not Supported" : "Unknown Error";
}

FAKE_API(int, nvmlSystemGetDriverVersion, (char *buf, unsigned len)) {
  fake_copy(buf, (int)len, "535.161.08");
  return 0;
}

FAKE_API(int, nvmlSystemGetCudaDriverVersion_v2, (int *v)) {
  *v = 12020;
  return 0;
}

FAKE_API(int, nvmlDeviceGetCount_v2, (unsigned *n)) {
  if (!initialised) {
    return NVML_ERROR_UNINITIALIZED;
  }
  *n = FAKE_COUNT;
  return 0;
}

FAKE_API(int, nvmlDeviceGetHandleByIndex_v2, (unsigned i, void **h)) {
  if (!initialised) {
    return NVML_ERROR_UNINITIALIZED;
  }
  if (i >= FAKE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *h = &devs[i];
  return 0;
}

FAKE_API(int, nvmlDeviceGetName, (void *h, char *buf, unsigned len)) {
  int rc = check(h);
  if (!rc) {
    fake_copy(buf, (int)len, fake_model()->name);
  }
  return rc;
}

FAKE_API(int, nvmlDeviceGetUUID, (void *h, char *buf, unsigned len)) {
  int rc = check(h);
  if (rc) {
    return rc;
  }
  unsigned char u[16];
  fake_uuid(idx(h), u);
  char s[64];
  snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
           u[14], u[15]);
  fake_copy(buf, (int)len, s);
  return 0;
}

// nvmlPciInfo_t as in nvml.h: busIdLegacy[16], domain, bus, device, pciDeviceId,
// pciSubSystemId, busId[32]. NVML writes an 8-digit domain.
FAKE_API(int, nvmlDeviceGetPciInfo_v3, (void *h, void *p)) {
  int rc = check(h);
  if (rc) {
    return rc;
  }
  struct {
    char legacy[16];
    unsigned domain, bus, device, id, subsys;
    char busid[32];
  } *pci = p;
  memset(pci, 0, sizeof *pci);
  pci->bus = (unsigned)fake_bus(idx(h));
  snprintf(pci->busid, sizeof pci->busid, "00000000:%02X:00.0", pci->bus);
  snprintf(pci->legacy, sizeof pci->legacy, "0000:%02X:00.0", pci->bus);
  return 0;
}

FAKE_API(int, nvmlDeviceGetMemoryInfo, (void *h, unsigned long long *m)) {
  int rc = check(h);
  if (rc) {
    return rc;
  }
  m[0] = fake_model()->memory;
  m[2] = (1ULL << 30) * (unsigned long long)(idx(h) + 1);
#ifdef FAKE_BUSY_DEVICE
  if (idx(h) == FAKE_BUSY_DEVICE) {
    m[2] += 30ULL << 30;
  }
#endif
  m[1] = m[0] - m[2];
  return 0;
}

FAKE_API(int, nvmlDeviceGetMaxClockInfo, (void *h, int type, unsigned *mhz)) {
  int rc = check(h);
  if (rc) {
    return rc;
  }
  *mhz = (unsigned)(type == 1 ? fake_model()->clock_khz : fake_model()->mem_clock_khz) / 1000u;
  return 0;
}

FAKE_API(int, nvmlDeviceGetCudaComputeCapability, (void *h, int *major, int *minor)) {
  int rc = check(h);
  if (!rc) {
    *major = fake_model()->cc_major;
    *minor = fake_model()->cc_minor;
  }
  return rc;
}

FAKE_API(int, nvmlDeviceGetEnforcedPowerLimit, (void *h, unsigned *mw)) {
  int rc = check(h);
  if (!rc) {
    *mw = 700000;
  }
  return rc;
}

FAKE_API(int, nvmlDeviceGetPowerUsage, (void *h, unsigned *mw)) {
  int rc = check(h);
  if (!rc) {
    *mw = power_mw(idx(h));
  }
  return rc;
}

FAKE_API(int, nvmlDeviceGetTotalEnergyConsumption, (void *h, unsigned long long *mj)) {
  int rc = check(h);
  if (rc) {
    return rc;
  }
#ifdef FAKE_NO_ENERGY
  (void)mj;
  return NVML_ERROR_NOT_SUPPORTED;
#else
  *mj = (unsigned long long)((double)power_mw(idx(h)) * fake_now());
  return 0;
#endif
}

FAKE_API(int, nvmlDeviceGetUtilizationRates, (void *h, unsigned *u)) {
  int rc = check(h);
  if (!rc) {
    u[0] = 50u + (unsigned)idx(h);
    u[1] = 20u;
  }
  return rc;
}

FAKE_API(int, nvmlDeviceGetClockInfo, (void *h, int type, unsigned *mhz)) {
  int rc = check(h);
  if (!rc) {
    *mhz = type == 1 ? 1755u : 2619u;
  }
  return rc;
}

FAKE_API(int, nvmlDeviceGetTemperatureV, (void *h, void *t)) {
  int rc = check(h);
  if (rc) {
    return rc;
  }
  struct {
    unsigned version;
    int sensor;
    int temperature;
  } *tv = t;
  if (tv->version != ((unsigned)sizeof *tv | (1u << 24))) {
    return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  }
  tv->temperature = 40 + idx(h);
  return 0;
}

FAKE_API(int, nvmlDeviceGetApplicationsClock, (void *h, int type, unsigned *mhz)) {
  int rc = check(h);
  if (!rc) {
    *mhz = (unsigned)(type == 1 ? fake_model()->clock_khz : fake_model()->mem_clock_khz) / 1000u;
  }
  return rc;
}

FAKE_API(int, nvmlDeviceGetEccMode, (void *h, int *current, int *pending)) {
  int rc = check(h);
  if (!rc) {
    *current = *pending = 1;
  }
  return rc;
}

FAKE_API(int, nvmlDeviceGetPersistenceMode, (void *h, int *mode)) {
  int rc = check(h);
  if (!rc) {
    *mode = 1;
  }
  return rc;
}

// nvmlProcessInfo_t of nvml.h: pid, usedGpuMemory, gpuInstanceId, computeInstanceId.
FAKE_API(int, nvmlDeviceGetComputeRunningProcesses_v3, (void *h, unsigned *count, void *infos)) {
  int rc = check(h);
  if (rc) {
    return rc;
  }
  struct {
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
  } *p = infos;
  unsigned n = 0;
#ifdef FAKE_BUSY_DEVICE
  n = idx(h) == FAKE_BUSY_DEVICE;
#endif
  if (*count < n) {
    *count = n;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  *count = n;
  if (n == 1) {
    p[0].pid = 4242;
    p[0].used = 30ULL << 30;
    p[0].gi = p[0].ci = 0xffffffffu;
  }
  return 0;
}
