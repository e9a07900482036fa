// Test double of the CUDA runtime (libcudart): FAKE_COUNT devices of FAKE_MODEL. Variants:
// FAKE_CUDART_MAJOR 12 exports cudaGetDeviceProperties_v2 (new layout) beside a legacy plain
// symbol, 13 exports only the plain symbol; FAKE_INSUFFICIENT_DRIVER makes every device query
// fail with 35 like a runtime newer than the driver; FAKE_FAIL_DEVICE makes that device's PCI
// bus id and SM count queries fail with 999.
#include "fake_gpus.h"

#ifndef FAKE_CUDART_MAJOR
#define FAKE_CUDART_MAJOR 12
#endif

enum {
  cudaSuccess = 0,
  cudaErrorInvalidDevice = 101,
  cudaErrorInsufficientDriver = 35,
  cudaErrorUnknown = 999
};

static int check(int dev) {
#ifdef FAKE_INSUFFICIENT_DRIVER
  (void)dev;
  return cudaErrorInsufficientDriver;
#else
  return dev >= 0 && dev < FAKE_COUNT ? cudaSuccess : cudaErrorInvalidDevice;
#endif
}

FAKE_API(int, cudaRuntimeGetVersion, (int *v)) {
  *v = FAKE_CUDART_MAJOR * 1000 + 20;
  return cudaSuccess;
}

FAKE_API(int, cudaDriverGetVersion, (int *v)) {
  *v = 12020;  // a 12.2 driver
  return cudaSuccess;
}

FAKE_API(const char *, cudaGetErrorName, (int e)) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    default:
      return "cudaErrorUnknown";
  }
}

FAKE_API(const char *, cudaGetErrorString, (int e)) {
  return e == cudaErrorInsufficientDriver
             ? "CUDA driver version is insufficient for CUDA runtime version"
             : "unknown error";
}

FAKE_API(int, cudaGetDeviceCount, (int *n)) {
#ifdef FAKE_INSUFFICIENT_DRIVER
  *n = -1;
  return cudaErrorInsufficientDriver;
#else
  *n = FAKE_COUNT;
  return cudaSuccess;
#endif
}

FAKE_API(int, cudaDeviceGetAttribute, (int *v, int attr, int dev)) {
  int rc = check(dev);
  if (rc) {
    return rc;
  }
  const FakeModel *m = fake_model();
  switch (attr) {
    case 13:
      *v = m->clock_khz;
      return 0;
    case 16:
#ifdef FAKE_FAIL_DEVICE
      if (dev == FAKE_FAIL_DEVICE) {
        return cudaErrorUnknown;
      }
#endif
      *v = m->units;
      return 0;
    case 36:
      *v = m->mem_clock_khz;
      return 0;
    case 37:
      *v = m->bus_width;
      return 0;
    case 75:
      *v = m->cc_major;
      return 0;
    case 76:
      *v = m->cc_minor;
      return 0;
    default:
      return 1;  // cudaErrorInvalidValue
  }
}

FAKE_API(int, cudaDeviceGetPCIBusId, (char *buf, int len, int dev)) {
  int rc = check(dev);
  if (rc) {
    return rc;
  }
#ifdef FAKE_FAIL_DEVICE
  if (dev == FAKE_FAIL_DEVICE) {
    return cudaErrorUnknown;
  }
#endif
  char s[32];
  snprintf(s, sizeof s, "0000:%02x:00.0", fake_bus(dev));
  fake_copy(buf, len, s);
  return 0;
}

// Fills name (0), uuid (256) and totalGlobalMem (288), as the CUDA 12 _v2 and CUDA 13 layouts do.
static int fill_props(unsigned char *p, int dev, const char *name) {
  int rc = check(dev);
  if (rc) {
    return rc;
  }
  fake_copy((char *)p, 256, name);
  fake_uuid(dev, p + 256);
  unsigned long long mem = fake_model()->memory;
  size_t m = (size_t)mem;
  memcpy(p + 288, &m, sizeof m);
  return 0;
}

#if FAKE_CUDART_MAJOR == 12
FAKE_API(int, cudaGetDeviceProperties_v2, (void *p, int dev)) {
  return fill_props(p, dev, fake_model()->name);
}

// The legacy symbol of a CUDA 12 runtime: a name that shows if the probe picked it.
FAKE_API(int, cudaGetDeviceProperties, (void *p, int dev)) {
  return fill_props(p, dev, "legacy cudaGetDeviceProperties layout");
}
#else
FAKE_API(int, cudaGetDeviceProperties, (void *p, int dev)) {
  return fill_props(p, dev, fake_model()->name);
}
#endif
