// Test double of the CUDA driver API (libcuda.so.1): FAKE_COUNT devices of FAKE_MODEL.
// FAKE_STUB answers 34 (CUDA_ERROR_STUB_LIBRARY) like the toolkit's stub.
#include "fake_gpus.h"

static int initialised;

#ifdef FAKE_STUB
#define STUB_RC 34
#else
#define STUB_RC 0
#endif

FAKE_API(int, cuInit, (unsigned flags)) {
  (void)flags;
  initialised = STUB_RC == 0;
  return STUB_RC;
}

FAKE_API(int, cuDriverGetVersion, (int *v)) {
  *v = 12040;
  return 0;
}

FAKE_API(int, cuGetErrorName, (int e, const char **s)) {
  *s = e == 34  ? "CUDA_ERROR_STUB_LIBRARY"
       : e == 3 ? "CUDA_ERROR_NOT_INITIALIZED"
                : "CUDA_ERROR_UNKNOWN";
  return 0;
}

FAKE_API(int, cuGetErrorString, (int e, const char **s)) {
  *s = e == 34 ? "CUDA driver is a stub library" : "unknown error";
  return 0;
}

FAKE_API(int, cuDeviceGetCount, (int *n)) {
  if (!initialised) {
    return 3;
  }
  *n = FAKE_COUNT;
  return 0;
}

FAKE_API(int, cuDeviceGet, (int *dev, int ordinal)) {
  if (ordinal < 0 || ordinal >= FAKE_COUNT) {
    return 101;
  }
  *dev = ordinal;
  return 0;
}

FAKE_API(int, cuDeviceGetName, (char *buf, int len, int dev)) {
  (void)dev;
  fake_copy(buf, len, fake_model()->name);
  return 0;
}

FAKE_API(int, cuDeviceTotalMem_v2, (size_t * bytes, int dev)) {
  (void)dev;
  *bytes = (size_t)fake_model()->memory;
  return 0;
}

FAKE_API(int, cuDeviceGetAttribute, (int *v, int attr, int dev)) {
  (void)dev;
  const FakeModel *m = fake_model();
  switch (attr) {
    case 13:
      *v = m->clock_khz;
      return 0;
    case 16:
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
      return 1;
  }
}

FAKE_API(int, cuDeviceGetPCIBusId, (char *buf, int len, int dev)) {
  char s[32];
  snprintf(s, sizeof s, "0000:%02x:00.0", fake_bus(dev));
  fake_copy(buf, len, s);
  return 0;
}

FAKE_API(int, cuDeviceGetUuid_v2, (unsigned char *u, int dev)) {
  fake_uuid(dev, u);
  return 0;
}
