// The GPU libraries the module asks (CUDA driver and runtime, NVML, HIP, ROCm SMI, NCCL, RCCL):
// their names, where each is looked for, opening them with dlopen in a child, and the formats of
// the versions and PCI bus ids they report. Nothing here links against a GPU library.
#pragma once

#include <stdbool.h>
#include <stddef.h>

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

/// Rewrites a PCI bus id ("00000000:18:00.0", "0000:C1:00.0") as "dddd:bb:dd.f" in lowercase.
/// @return 0, or TP_EINVAL when `in` is not a bus id (out is then "").
int tp_gpu_pci_normalize(const char *in, char *out, size_t outsz);

/// Formats a CUDA version number (1000 * major + 10 * minor) as "major.minor".
void tp_gpu_format_cuda_version(int v, char *out, size_t outsz);
/// Formats a HIP version number (major * 10000000 + minor * 100000 + patch) as "M.m.p".
void tp_gpu_format_hip_version(int v, char *out, size_t outsz);
/// Formats an NCCL/RCCL version code as "M.m.p" (two encodings, see gpu_lib.c).
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

/// A library opened in a child.
typedef struct TpGpuLib {
  void *handle;
  char soname[64];  ///< the candidate's base name
  char path[512];   ///< resolved path of the file
} TpGpuLib;

/// Walks the candidates of one api (tp_gpu_candidates), skipping files already tried.
typedef struct TpGpuOpenIter {
  TpGpuApi api;
  TpGpuList cands;
  size_t next;
  TpGpuList seen;  ///< resolved paths opened so far
  TpBuf tried;     ///< "<candidate>: <why>\n" lines
  int phase_fd;    ///< report descriptor for "phase dlopen <file>" lines, or -1
} TpGpuOpenIter;

/// Starts iterating the candidates of `api`. @return 0 or TP_ENOMEM.
int tp_gpu_open_begin(TpGpuOpenIter *it, TpGpuApi api, const char *libpath);
/// Opens the next loadable candidate with RTLD_NOW | RTLD_LOCAL into `lib`.
/// @return true when one was opened; false when the candidates are exhausted.
bool tp_gpu_open_next(TpGpuOpenIter *it, TpGpuLib *lib);
/// Frees the iterator (the libraries stay loaded).
void tp_gpu_open_end(TpGpuOpenIter *it);

/// The sonames tried for `api`, newest first, NULL-terminated.
const char *const *tp_gpu_sonames(TpGpuApi api);

/// Resolves `name` in `lib`, or NULL.
void *tp_gpu_sym(const TpGpuLib *lib, const char *name);
