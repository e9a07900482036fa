// Test doubles of GPU libraries: the device tables the fake libraries share. Each fake is built
// once per scenario with compile definitions choosing the model, the device count and the
// misbehaviour to play (see CMakeLists.txt in this directory). These are test data, not facts.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
// Declares and starts defining an exported function: FAKE_API(int, f, (int *v)) { ... }
#define FAKE_API(ret, name, args)                                                                  \
  FAKE_EXPORT ret name args;                                                                       \
  FAKE_EXPORT ret name args

typedef struct FakeModel {
  const char *name;
  const char *arch;  // gcnArchName for AMD, "" for NVIDIA
  int cc_major, cc_minor;
  int units;  // SMs or CUs
  int clock_khz;
  int mem_clock_khz;
  int bus_width;
  unsigned long long memory;
  int pci_base;  // bus number of device 0
} FakeModel;

static const FakeModel fake_models[] = {
    {"NVIDIA H100 80GB HBM3", "", 9, 0, 132, 1980000, 2619000, 5120, 85520809984ULL, 0x18},
    {"NVIDIA A100-SXM4-80GB", "", 8, 0, 108, 1410000, 1593000, 5120, 85899345920ULL, 0x07},
    {"AMD Instinct MI300X", "gfx942:sramecc+:xnack-", 9, 4, 304, 2100000, 1300000, 8192,
     206141652992ULL, 0x85},
    {"AMD Instinct MI250X", "gfx90a:sramecc+:xnack-", 9, 0, 110, 1700000, 1600000, 4096,
     68702699520ULL, 0xc1},
};

enum { FAKE_H100 = 0, FAKE_A100 = 1, FAKE_MI300X = 2, FAKE_MI250X = 3 };

#ifndef FAKE_MODEL
#error "FAKE_MODEL must name one of the fake models"
#endif
#ifndef FAKE_COUNT
#define FAKE_COUNT 8
#endif

__attribute__((unused)) static const FakeModel *fake_model(void) {
  return &fake_models[FAKE_MODEL];
}

__attribute__((unused)) static int fake_bus(int i) {
  return fake_model()->pci_base + 0x10 * i;
}

// 16 UUID bytes that differ per device and per model.
__attribute__((unused)) static void fake_uuid(int i, unsigned char u[16]) {
  for (int k = 0; k < 16; k++) {
    u[k] = (unsigned char)(0x11 * (k + 1) + 7 * FAKE_MODEL);
  }
  u[15] = (unsigned char)i;
}

__attribute__((unused)) static double fake_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Writes `s` into a caller's buffer of `len` bytes, cut to fit.
__attribute__((unused)) static void fake_copy(char *dst, int len, const char *s) {
  if (len <= 0) {
    return;
  }
  size_t n = strlen(s);
  if (n >= (size_t)len) {
    n = (size_t)len - 1;
  }
  memcpy(dst, s, n);
  dst[n] = '\0';
}
