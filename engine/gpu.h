// GPU probing and telemetry by dlopen of the CUDA driver and runtime, NVML, the HIP runtime,
// ROCm SMI and NCCL/RCCL. Nothing here links against a GPU library; every query runs in a
// short-lived child process, so the calling process never holds a GPU context.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/// The libraries the probe asks, in the order they are reported.
typedef enum TpGpuApi {
  TP_GPU_NVML,    ///< NVIDIA management library (libnvidia-ml.so.1), no context
  TP_GPU_CUDA,    ///< CUDA driver API (libcuda.so.1)
  TP_GPU_CUDART,  ///< CUDA runtime (libcudart.so.13, .12, .11.0)
  TP_GPU_HIP,     ///< HIP runtime (libamdhip64.so.7, .6, .5)
  TP_GPU_RSMI,    ///< ROCm SMI (librocm_smi64.so.7 ... .1), no context
  TP_GPU_NCCL,    ///< NCCL (libnccl.so.2): version only
  TP_GPU_RCCL,    ///< RCCL (librccl.so.1): version only
  TP_GPU_API_COUNT
} TpGpuApi;

/// Returns the short name of `api` ("nvml", "cuda", "cudart", "hip", "rsmi", "nccl", "rccl").
const char *tp_gpu_api_name(TpGpuApi api);

/// Returns the api called `name`, or -1 when there is none.
int tp_gpu_api_from_name(const char *name);

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

/// Rewrites a PCI bus id ("00000000:18:00.0", "0000:C1:00.0") as "dddd:bb:dd.f" in lowercase.
/// @return 0, or TP_EINVAL when `in` is not a bus id (out is then "").
int tp_gpu_pci_normalize(const char *in, char *out, size_t outsz);

/// Formats a CUDA version number (1000 * major + 10 * minor) as "major.minor".
void tp_gpu_format_cuda_version(int v, char *out, size_t outsz);
/// Formats a HIP version number (major * 10000000 + minor * 100000 + patch) as "M.m.p".
void tp_gpu_format_hip_version(int v, char *out, size_t outsz);
/// Formats an NCCL/RCCL version code as "M.m.p" (two encodings, see gpu.c).
void tp_gpu_format_nccl_version(int v, char *out, size_t outsz);

/// A list of strings (library candidates, directories).
typedef struct TpGpuList {
  char **items;
  size_t n;
  size_t cap;
} TpGpuList;

/// Frees the list's strings and storage.
void tp_gpu_list_free(TpGpuList *l);

/// Lists the files to try for `api`, in order: the file named by the api's override variable
/// (TPLUA_CUDART, TPLUA_CUDA, TPLUA_NVML, TPLUA_HIP, TPLUA_RSMI, TPLUA_NCCL, TPLUA_RCCL); then,
/// for each soname (newest first): with `libpath`, that soname in each of its directories and
/// nowhere else; without, the bare soname (the dynamic loader's search), then the toolkit
/// directories of $CUDA_HOME, $CUDA_PATH (CUDA libraries) or $ROCM_PATH, $HIP_PATH (ROCm
/// libraries), then /usr/local/cuda{,-X.Y} or /opt/rocm{,-X.Y.Z}, newest version first. The
/// driver's own libraries (libcuda, NVML) are never taken from a toolkit (it ships stubs).
/// @param libpath ':'-separated directories, or NULL/"" for the system search.
/// @return 0 or TP_ENOMEM.
int tp_gpu_candidates(TpGpuApi api, const char *libpath, TpGpuList *out, TpError *err);

/// Appends to `out` the directories "<parent>/<prefix>-<version><suffix>" that exist, highest
/// version first (versions compare numerically field by field: 12.10 > 12.9).
/// @return 0 or TP_ENOMEM; a missing `parent` adds nothing.
int tp_gpu_versioned_dirs(const char *parent, const char *prefix, const char *suffix,
                          TpGpuList *out, TpError *err);

// ---------------------------------------------------------------------------------------------
// Telemetry

/// One reading of one device. Quantities a device does not report are NaN.
typedef struct TpGpuSample {
  double t;              ///< CLOCK_MONOTONIC seconds (same clock as tp_gpu_monotonic)
  double wall;           ///< CLOCK_REALTIME seconds since the epoch
  int device;            ///< index into the sampler's devices
  double power_w;        ///< board/socket power
  double energy_j;       ///< the device's energy counter (arbitrary origin)
  double memory_used;    ///< bytes
  double utilization;    ///< percent of time busy
  double sm_clock_mhz;   ///< current SM / system clock
  double temperature_c;  ///< GPU (NVML) or junction/edge (ROCm SMI) temperature
} TpGpuSample;

/// A device the sampler reads.
typedef struct TpGpuSamplerDevice {
  TpGpuApi api;  ///< TP_GPU_NVML or TP_GPU_RSMI
  int index;     ///< index in that library
  char name[256];
  char pci_bus_id[32];
  char uuid[64];
  uint64_t memory_total;
} TpGpuSamplerDevice;

/// Options of tp_gpu_sampler_start. Zero-initialise, then set what you need.
typedef struct TpGpuSamplerOpts {
  double interval_s;       ///< time between readings; <= 0 means 1 s (minimum 1 ms)
  double start_timeout_s;  ///< how long to wait for the child to list devices; <= 0: 20 s
  unsigned apis;           ///< (1u << TP_GPU_NVML) | (1u << TP_GPU_RSMI); 0 means both
  const char *libpath;     ///< as in TpGpuProbeOpts
} TpGpuSamplerOpts;

/// A running (or stopped) sampler: a child process reading NVML / ROCm SMI at a fixed
/// interval and streaming readings back over a pipe.
typedef struct TpGpuSampler TpGpuSampler;

/// Starts a sampler child and waits until it has listed its devices.
/// @param out receives the sampler; caller frees with tp_gpu_sampler_free.
/// @return 0; TP_ENOGPU when no library lists a device (err names each library's answer);
///         TP_ETIMEOUT, -errno or TP_ENOMEM.
int tp_gpu_sampler_start(const TpGpuSamplerOpts *opts, TpGpuSampler **out, TpError *err);

/// Collects the readings the child has sent so far, without blocking.
/// @return 0, TP_EPARSE (malformed stream), TP_ENOMEM or -errno.
int tp_gpu_sampler_poll(TpGpuSampler *s, TpError *err);

/// Blocks until at least `count` readings have been collected in all, or `timeout_s` passes.
/// @return 0, TP_ETIMEOUT (also when the child stopped first), TP_EPARSE, TP_ENOMEM or -errno.
int tp_gpu_sampler_wait(TpGpuSampler *s, size_t count, double timeout_s, TpError *err);

/// Asks the child to stop, collects its remaining readings and reaps it. Idempotent.
/// @return 0, or an error from reading the stream (readings so far are kept).
int tp_gpu_sampler_stop(TpGpuSampler *s, TpError *err);

/// True while the child runs (between start and stop).
bool tp_gpu_sampler_running(const TpGpuSampler *s);

/// The devices being sampled; valid until tp_gpu_sampler_free.
const TpGpuSamplerDevice *tp_gpu_sampler_devices(const TpGpuSampler *s, size_t *n);

/// The readings collected so far, in time order per device; valid until the next poll/stop.
const TpGpuSample *tp_gpu_sampler_samples(const TpGpuSampler *s, size_t *n);

/// Notes from the child ("nvml: libnvidia-ml.so.1: not found", dropped readings), "\n"-joined.
const char *tp_gpu_sampler_notes(const TpGpuSampler *s);

/// Stops the child if it runs (SIGKILL, then reaps it) and frees everything. NULL is fine.
void tp_gpu_sampler_free(TpGpuSampler *s);

/// How an energy figure was obtained.
typedef enum TpGpuEnergyMethod {
  TP_GPU_ENERGY_NONE,       ///< fewer than two usable readings
  TP_GPU_ENERGY_COUNTER,    ///< difference of the device's energy counter
  TP_GPU_ENERGY_TRAPEZOID,  ///< trapezoidal integral of sampled power
} TpGpuEnergyMethod;

/// Energy of one device over a window.
typedef struct TpGpuEnergy {
  double joules;
  TpGpuEnergyMethod method;
  double t_first, t_last;  ///< the readings the figure spans (inside the window asked for)
  size_t nsamples;         ///< readings inside the window
} TpGpuEnergy;

/// Computes the energy of `device` between t0 and t1 (CLOCK_MONOTONIC seconds) from `samples`:
/// the counter difference between the first and last readings in the window when every reading
/// there has a counter and it never decreases, otherwise the trapezoid over power.
/// @return 0 (method NONE when fewer than two readings qualify) or TP_EINVAL (t1 < t0).
int tp_gpu_energy(const TpGpuSample *samples, size_t n, int device, double t0, double t1,
                  TpGpuEnergy *out, TpError *err);

/// Returns CLOCK_MONOTONIC in seconds, the clock of TpGpuSample.t.
double tp_gpu_monotonic(void);
