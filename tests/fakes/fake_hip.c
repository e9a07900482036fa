// Test double of the HIP runtime (libamdhip64): FAKE_COUNT devices of FAKE_MODEL. FAKE_HIP_MAJOR
// 6 exports hipGetDevicePropertiesR0600 (gcnArchName at 1160) and R0000 beside the plain symbol,
// which fills the old layout (gcnArchName at 396) as ROCm's does; 5 exports only the plain one.
// FAKE_HANG blocks hipGetDeviceCount forever; FAKE_CRASH_DEVICE aborts in hipDeviceGetName of
// that device; FAKE_CHATTY prints to stderr and stdout like a verbose runtime.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "fake_gpus.h"

#ifndef FAKE_HIP_MAJOR
#define FAKE_HIP_MAJOR 6
#endif

enum { hipSuccess = 0, hipErrorInvalidDevice = 101, hipErrorInvalidValue = 1 };

static int check(int dev) {
  return dev >= 0 && dev < FAKE_COUNT ? hipSuccess : hipErrorInvalidDevice;
}

FAKE_API(int, hipRuntimeGetVersion, (int *v)) {
#ifdef FAKE_CHATTY
  fprintf(stderr, "fake hip: runtime starting\n");
  printf("fake hip: stdout chatter\n");
  fflush(stdout);
#endif
  *v = FAKE_HIP_MAJOR == 6 ? 60241134 : 50221153;
  return 0;
}

FAKE_API(int, hipDriverGetVersion, (int *v)) {
  *v = FAKE_HIP_MAJOR == 6 ? 60241134 : 50221153;
  return 0;
}

FAKE_API(const char *, hipGetErrorName, (int e)) {
  return e == 0 ? "hipSuccess" : e == 101 ? "hipErrorInvalidDevice" : "hipErrorUnknown";
}

FAKE_API(const char *, hipGetErrorString, (int e)) {
  return e == 0 ? "no error" : "invalid device ordinal";
}

FAKE_API(int, hipGetDeviceCount, (int *n)) {
#ifdef FAKE_HANG
  for (;;) {
    pause();
  }
#endif
  *n = FAKE_COUNT;
  return 0;
}

FAKE_API(int, hipDeviceGetAttribute, (int *v, int attr, int dev)) {
  int rc = check(dev);
  if (rc) {
    return rc;
  }
  const FakeModel *m = fake_model();
  switch (attr) {
    case 5:
      *v = m->clock_khz;
      return 0;
    case 23:
      *v = m->cc_major;
      return 0;
    case 59:
      *v = m->bus_width;
      return 0;
    case 60:
      *v = m->mem_clock_khz;
      return 0;
    case 61:
      *v = m->cc_minor;
      return 0;
    case 63:
      *v = m->units;
      return 0;
    default:
      return hipErrorInvalidValue;
  }
}

FAKE_API(int, hipDeviceGetName, (char *buf, int len, int dev)) {
  int rc = check(dev);
  if (rc) {
    return rc;
  }
#ifdef FAKE_CRASH_DEVICE
  if (dev == FAKE_CRASH_DEVICE) {
    fprintf(stderr, "fake hip: device %d fell off the bus\n", dev);
    abort();
  }
#endif
  fake_copy(buf, len, fake_model()->name);
  return 0;
}

FAKE_API(int, hipDeviceTotalMem, (size_t * bytes, int dev)) {
  int rc = check(dev);
  if (!rc) {
    *bytes = (size_t)fake_model()->memory;
  }
  return rc;
}

FAKE_API(int, hipDeviceGetPCIBusId, (char *buf, int len, int dev)) {
  int rc = check(dev);
  if (rc) {
    return rc;
  }
  char s[32];
  snprintf(s, sizeof s, "0000:%02x:00.0", fake_bus(dev));
  fake_copy(buf, len, s);
  return 0;
}

// ROCm's UUID bytes are printable characters.
FAKE_API(int, hipDeviceGetUuid, (unsigned char *u, int dev)) {
  int rc = check(dev);
  if (rc) {
    return rc;
  }
  char s[17];
  snprintf(s, sizeof s, "%012x%04x", 0x5eedu + (unsigned)FAKE_MODEL, (unsigned)dev);
  memcpy(u, s, 16);
  return 0;
}

// Fills name (0), totalGlobalMem and gcnArchName at the offsets of one layout.
static int fill_props(unsigned char *p, int dev, size_t mem_off, size_t arch_off) {
  int rc = check(dev);
  if (rc) {
    return rc;
  }
  fake_copy((char *)p, 256, fake_model()->name);
  size_t m = (size_t)fake_model()->memory;
  memcpy(p + mem_off, &m, sizeof m);
  fake_copy((char *)p + arch_off, 256, fake_model()->arch);
  return 0;
}

FAKE_API(int, hipGetDeviceProperties, (void *p, int dev)) {
  return fill_props(p, dev, 256, 396);
}

#if FAKE_HIP_MAJOR >= 6
FAKE_API(int, hipGetDevicePropertiesR0000, (void *p, int dev)) {
  return fill_props(p, dev, 256, 396);
}

FAKE_API(int, hipGetDevicePropertiesR0600, (void *p, int dev)) {
  return fill_props(p, dev, 288, 1160);
}
#endif
