// Child processes of the GPU module and the report lines they write back: a child runs one
// probe or the sampler with a clean descriptor table and is reaped with a deadline; everything it
// reports travels as escaped, tab-separated lines (formats in gpu.c and gpu_sampler.c).
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common.h"

/// Upper bound of a child's report; a longer one is refused as malformed.
#define TP_GPU_REPORT_MAX (1u << 20)
/// Upper bound of the output a child's libraries printed that is kept.
#define TP_GPU_OUTPUT_MAX (64u << 10)
/// Most devices one library may report.
#define TP_GPU_DEVICES_MAX 1024

/// Returns CLOCK_MONOTONIC in seconds, the clock of TpGpuSample.t.
double tp_gpu_monotonic(void);

/// Writes one report line "<tag>\t<key>\t<escaped value>\n" with a single write(2) on `fd`
/// (tag "b" for the backend, or the device index). Errors are ignored: the parent notices a
/// truncated report.
void tp_gpu_emit(int fd, int device, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/// Appends `s` to `b` with '\\', '\n', '\t', '\r' and other control bytes escaped.
int tp_gpu_escape(TpBuf *b, const char *s, size_t len);
/// Decodes an escaped value of `len` bytes into `out` (size `outsz`, truncated, NUL-ended).
/// @return 0 or -1 for a malformed escape.
int tp_gpu_unescape(const char *s, size_t len, char *out, size_t outsz);

/// Forks a child that runs `fn(arg)` with stdin on /dev/null, stdout and stderr on `out_fd`,
/// `fd3` as descriptor 3 and `fd4` (or -1) as descriptor 4, every other descriptor closed,
/// default signal dispositions and an empty signal mask, in its own process group; the child
/// _exits with fn's return value. @return the pid, or -errno (err filled).
pid_t tp_gpu_fork(int (*fn)(void *), void *arg, int out_fd, int fd3, int fd4, TpError *err);

/// Waits for `pid` until `deadline` (CLOCK_MONOTONIC s); kills its process group with SIGKILL
/// when it is still there and reaps it. Sets *status (waitpid format) and returns 0, or -1
/// when the child could not be reaped (already reaped elsewhere: ECHILD).
int tp_gpu_reap(pid_t pid, double deadline, int *status, bool *killed);

/// Describes a wait status as "exit status N" / "killed by signal N (SIGSEGV)".
void tp_gpu_describe_status(int status, char *out, size_t outsz);
