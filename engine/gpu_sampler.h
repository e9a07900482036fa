// GPU telemetry: a child process reads NVML and ROCm SMI at a fixed interval and streams the
// readings back; the energy of a device over a window from the readings.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "gpu_lib.h"

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
