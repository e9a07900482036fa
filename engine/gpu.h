// GPU probing and telemetry by dlopen of the CUDA driver and runtime, NVML, the HIP runtime,
// ROCm SMI and NCCL/RCCL. Nothing here links against a GPU library; every query runs in a
// short-lived child process, so the calling process never holds a GPU context.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "gpu_child.h"
#include "gpu_lib.h"
#include "gpu_sampler.h"

/// How one library answered.
typedef enum TpGpuStatus {
  TP_GPU_OK,        ///< answered: devices found (or, for NCCL/RCCL, a version)
  TP_GPU_ABSENT,    ///< no library file found
  TP_GPU_NODEVICE,  ///< answered without error and reported zero devices
  TP_GPU_FAILED,    ///< a call returned an error (code, name and text in the record)
  TP_GPU_TIMEOUT,   ///< the probe child was killed after the timeout
  TP_GPU_CRASHED,   ///< the probe child died before it finished its report
} TpGpuStatus;

/// Returns "ok", "absent", "no_device", "error", "timeout" or "crashed".
const char *tp_gpu_status_name(TpGpuStatus status);

/// What one library said, as reported by its probe child.
typedef struct TpGpuBackend {
  TpGpuApi api;
  TpGpuStatus status;
  char library[512];         ///< resolved path of the file that answered, "" when none
  char soname[64];           ///< the name it was found under (e.g. "libcudart.so.12")
  char reason[768];          ///< one line saying why status is not ok, "" when ok
  char call[64];             ///< the call that failed, "" when none
  int code;                  ///< that call's return code (library's own numbering), 0 if none
  char code_name[64];        ///< e.g. "cudaErrorInsufficientDriver", from the library
  char code_text[256];       ///< the library's description of `code`
  char driver_version[64];   ///< e.g. "12.2" (CUDA), "535.161.08" (NVML), "" unknown
  char runtime_version[64];  ///< e.g. "13.0", "6.2.41134", "" unknown
  char version[64];          ///< the library's own version (ROCm SMI, NCCL, RCCL), "" unknown
  char cuda_version[32];     ///< NVML: the CUDA version the driver supports, e.g. "12.2"
  int device_count;          ///< as reported, -1 unknown
  int device_errors;         ///< devices with at least one failed query
  char phase[96];            ///< the last step the child announced (names a hang or crash)
  TpBuf tried;               ///< lines "<file>: <why not used>" for each candidate passed over
  TpBuf output;              ///< what the library printed on stdout/stderr in the child
  double elapsed_s;          ///< wall time of the child
} TpGpuBackend;

/// One device as one library sees it. Unknown numbers are -1 (0 for memory).
typedef struct TpGpuDevice {
  TpGpuApi api;     ///< the library that listed it
  int index;        ///< its index in that library
  char vendor[16];  ///< "nvidia" or "amd"
  char name[256];
  char arch[32];           ///< "sm_90", "gfx942"
  char arch_full[128];     ///< "gfx942:sramecc+:xnack-"; same as arch on NVIDIA
  int cc_major, cc_minor;  ///< compute capability (NVIDIA) or gfx major/minor (AMD)
  uint64_t memory_total;   ///< bytes
  int sm_count;            ///< streaming multiprocessors (NVIDIA) or compute units (AMD)
  int clock_khz;           ///< peak SM/engine clock
  int memory_clock_khz;
  int memory_bus_width;  ///< bits
  char pci_bus_id[32];   ///< normalised "dddd:bb:dd.f", lowercase hex
  char uuid[64];         ///< "GPU-..." text
  int power_limit_mw;    ///< enforced power limit (NVML) or power cap (ROCm SMI)
  // The device's state when probed (preflight and the run record's environment).
  int64_t memory_used;  ///< bytes in use, -1 unknown
  int clock_now_khz;    ///< SM clock now (NVML), -1 unknown
  int app_clock_khz;    ///< applications (target) SM clock (NVML), -1 unknown
  int ecc;              ///< ECC mode now: 1 on, 0 off, -1 unknown
  int persistence;      ///< persistence mode (NVML): 1 on, 0 off, -1 unknown
  int nprocesses;       ///< compute processes on the device, -1 unknown (list not readable)
  char processes[256];  ///< "pid:bytes" of each, space-joined, cut to fit (bytes -1 unknown)
  char error[512];      ///< "; "-joined failed queries, "" when none
} TpGpuDevice;

/// The whole probe: one record per api and the devices they listed.
typedef struct TpGpuProbe {
  TpGpuBackend backends[TP_GPU_API_COUNT];
  TpGpuDevice *devices;
  size_t ndevices;
  size_t cap;
  double elapsed_s;
} TpGpuProbe;

/// Options of tp_gpu_probe. Zero-initialise, then set what you need.
typedef struct TpGpuProbeOpts {
  double timeout_s;     ///< kill a probe child after this; <= 0 means 20 s
  unsigned apis;        ///< bit (1u << api) per library to ask; 0 means all
  const char *libpath;  ///< ':'-separated directories searched instead of the system's; NULL
                        ///< reads $TPLUA_GPU_LIBPATH (unset or empty: the system search)
} TpGpuProbeOpts;

/// Probes every requested library, each in its own child process, in parallel. A library that
/// is absent, reports no device, fails, hangs or crashes is described in its backend record;
/// none of that is an error of this call. Nothing is printed: the children's stdout and stderr
/// are captured into TpGpuBackend.output.
/// @param out zeroed or freed probe; filled on success, caller frees with tp_gpu_probe_free.
/// @return 0, or -errno / TP_ENOMEM when a pipe or child could not be made (err filled).
int tp_gpu_probe(const TpGpuProbeOpts *opts, TpGpuProbe *out, TpError *err);

/// Frees what tp_gpu_probe allocated and zeroes `p`. Safe on a zeroed probe.
void tp_gpu_probe_free(TpGpuProbe *p);

/// Prepares `p` to receive reports: every backend absent, no devices. Used by tp_gpu_probe and
/// by tests that feed tp_gpu_probe_parse directly.
void tp_gpu_probe_init(TpGpuProbe *p);

/// Parses the report a probe child wrote for `api` (the line format of gpu.c) into `p`.
/// `subject` names the report in messages ("cudart probe").
/// @return 0, TP_EPARSE (message names the line), TP_ELIMIT or TP_ENOMEM.
int tp_gpu_probe_parse(TpGpuProbe *p, TpGpuApi api, const char *data, size_t len,
                       const char *subject, TpError *err);
