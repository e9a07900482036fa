// What a probe child asks each GPU library and how it reports the answers (gpu.c forks the
// children and parses their reports).
#pragma once

#include "gpu_lib.h"

/// Runs the probe of `api` in the current (child) process, writing its report to `fd`.
void tp_gpu_probe_child(TpGpuApi api, const char *libpath, int fd);
