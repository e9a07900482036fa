// Test double of ROCm SMI (librocm_smi64): FAKE_COUNT devices of FAKE_MODEL. FAKE_RSMI_NEW plays
// ROCm >= 6.0 (rsmi_dev_power_get, rsmi_frequencies_t with has_deep_sleep); otherwise the 5.x
// calls. Device i draws (600 + i) W; its energy counter counts 15.3 uJ steps of that power over
// CLOCK_MONOTONIC. FAKE_NO_ENERGY makes the counter unsupported; the old variant has no junction
// temperature (edge only). FAKE_BUSY_DEVICE=k puts a compute process (pid 4343, 40 GiB) on
// device k. ECC is on.
#include "fake_gpus.h"

enum { RSMI_STATUS_SUCCESS = 0, RSMI_STATUS_INVALID_ARGS = 1, RSMI_STATUS_NOT_SUPPORTED = 2 };
#define RESOLUTION_UJ 15.3f

static int check(uint32_t dv) {
  return dv < FAKE_COUNT ? 0 : RSMI_STATUS_INVALID_ARGS;
}

static uint64_t power_uw(uint32_t dv) {
  return 600000000ull + 1000000ull * dv;
}

typedef struct {
  uint32_t major, minor, patch;
  const char *build;
} rsmi_version_t;

FAKE_API(int, rsmi_version_get, (rsmi_version_t * v)) {
#ifdef FAKE_RSMI_NEW
  v->major = 7;
  v->minor = 3;
#else
  v->major = 1;
  v->minor = 0;
#endif
  v->patch = 0;
  v->build = "fake";
  return 0;
}

FAKE_API(int, rsmi_init, (uint64_t flags)) {
  (void)flags;
  return 0;
}

FAKE_API(int, rsmi_shut_down, (void)) {
  return 0;
}

FAKE_API(int, rsmi_status_string, (int s, const char **out)) {
  *out = s == 0 ? "RSMI_STATUS_SUCCESS" : "RSMI_STATUS_NOT_SUPPORTED";
  return 0;
}

FAKE_API(int, rsmi_num_monitor_devices, (uint32_t * n)) {
  *n = FAKE_COUNT;
  return 0;
}

FAKE_API(int, rsmi_version_str_get, (int comp, char *buf, uint32_t len)) {
  (void)comp;
  fake_copy(buf, (int)len, "6.8.5");
  return 0;
}

FAKE_API(int, rsmi_dev_name_get, (uint32_t dv, char *buf, size_t len)) {
  int rc = check(dv);
  if (!rc) {
    fake_copy(buf, (int)len, fake_model()->name);
  }
  return rc;
}

FAKE_API(int, rsmi_dev_pci_id_get, (uint32_t dv, uint64_t *bdfid)) {
  int rc = check(dv);
  if (!rc) {
    *bdfid = (uint64_t)fake_bus((int)dv) << 8;
  }
  return rc;
}

FAKE_API(int, rsmi_dev_unique_id_get, (uint32_t dv, uint64_t *id)) {
  int rc = check(dv);
  if (!rc) {
    *id = 0x5eed000000000000ull + dv;
  }
  return rc;
}

FAKE_API(int, rsmi_dev_memory_total_get, (uint32_t dv, int type, uint64_t *total)) {
  int rc = check(dv);
  if (!rc) {
    *total = type == 0 ? fake_model()->memory : 0;
  }
  return rc;
}

FAKE_API(int, rsmi_dev_memory_usage_get, (uint32_t dv, int type, uint64_t *used)) {
  int rc = check(dv);
  if (!rc) {
    *used = type == 0 ? (2ull << 30) * (dv + 1) : 0;
  }
  return rc;
}

FAKE_API(int, rsmi_dev_power_cap_get, (uint32_t dv, uint32_t sensor, uint64_t *cap)) {
  (void)sensor;
  int rc = check(dv);
  if (!rc) {
    *cap = 750000000ull;
  }
  return rc;
}

#ifdef FAKE_RSMI_NEW
FAKE_API(int, rsmi_dev_power_get, (uint32_t dv, uint64_t *power, int *type)) {
  int rc = check(dv);
  if (!rc) {
    *power = power_uw(dv);
    *type = 1;  // current socket power
  }
  return rc;
}
#else
FAKE_API(int, rsmi_dev_power_ave_get, (uint32_t dv, uint32_t sensor, uint64_t *power)) {
  (void)sensor;
  int rc = check(dv);
  if (!rc) {
    *power = power_uw(dv);
  }
  return rc;
}
#endif

FAKE_API(int, rsmi_dev_energy_count_get,
         (uint32_t dv, uint64_t *counter, float *res, uint64_t *ts)) {
  int rc = check(dv);
  if (rc) {
    return rc;
  }
#ifdef FAKE_NO_ENERGY
  (void)counter;
  (void)res;
  (void)ts;
  return RSMI_STATUS_NOT_SUPPORTED;
#else
  double now = fake_now();
  *counter = (uint64_t)((double)power_uw(dv) * now / RESOLUTION_UJ);
  *res = RESOLUTION_UJ;
  *ts = (uint64_t)(now * 1e9);
  return 0;
#endif
}

FAKE_API(int, rsmi_dev_busy_percent_get, (uint32_t dv, uint32_t *busy)) {
  int rc = check(dv);
  if (!rc) {
    *busy = 90 + dv;
  }
  return rc;
}

FAKE_API(int, rsmi_dev_gpu_clk_freq_get, (uint32_t dv, int type, void *f)) {
  int rc = check(dv);
  if (rc) {
    return rc;
  }
  (void)type;
#ifdef FAKE_RSMI_NEW
  struct {
    _Bool has_deep_sleep;
    uint32_t num_supported, current;
    uint64_t frequency[33];
  } *fr = f;
#else
  struct {
    uint32_t num_supported, current;
    uint64_t frequency[32];
  } *fr = f;
#endif
  memset(fr, 0, sizeof *fr);
  fr->num_supported = 3;
  fr->current = 2;
  fr->frequency[0] = 500000000ull;
  fr->frequency[1] = 1000000000ull;
  fr->frequency[2] = 2100000000ull;
  return 0;
}

FAKE_API(int, rsmi_dev_temp_metric_get, (uint32_t dv, uint32_t sensor, int metric, int64_t *t)) {
  int rc = check(dv);
  if (rc) {
    return rc;
  }
  (void)metric;
#ifndef FAKE_RSMI_NEW
  if (sensor == 1) {
    return RSMI_STATUS_NOT_SUPPORTED;  // no junction sensor in this variant
  }
#endif
  *t = (sensor == 1 ? 70000 : 50000) + 1000 * (int64_t)dv;
  return 0;
}

FAKE_API(int, rsmi_dev_ecc_enabled_get, (uint32_t dv, uint64_t *mask)) {
  int rc = check(dv);
  if (!rc) {
    *mask = 0x3fffull;
  }
  return rc;
}

// rsmi_process_info_t of rocm_smi.h: process_id, pasid, vram_usage, sdma_usage, cu_occupancy.
typedef struct {
  uint32_t process_id, pasid;
  uint64_t vram_usage, sdma_usage;
  uint32_t cu_occupancy;
} fake_process_t;

FAKE_API(int, rsmi_compute_process_info_get, (fake_process_t * procs, uint32_t *num)) {
  uint32_t n = 0;
#ifdef FAKE_BUSY_DEVICE
  n = 1;
#endif
  if (procs == NULL || *num < n) {
    *num = n;
    return procs == NULL ? 0 : 0x10;  // RSMI_STATUS_INSUFFICIENT_SIZE
  }
  *num = n;
  if (n == 1) {
    memset(procs, 0, sizeof *procs);
    procs[0].process_id = 4343;
    procs[0].vram_usage = 40ull << 30;
  }
  return 0;
}

FAKE_API(int, rsmi_compute_process_gpus_get, (uint32_t pid, uint32_t *idx, uint32_t *num)) {
#ifdef FAKE_BUSY_DEVICE
  if (pid == 4343 && *num >= 1) {
    idx[0] = FAKE_BUSY_DEVICE;
    *num = 1;
    return 0;
  }
#else
  (void)idx;
  (void)num;
#endif
  (void)pid;
  return 1;  // RSMI_STATUS_INVALID_ARGS: no such process
}
