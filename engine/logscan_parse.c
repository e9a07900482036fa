// Log scanner line handling: escape and prefix removal, and the parsers of each framework's
// lines (iteration records, argument dumps, parameter counts, memory reports, run facts,
// failure signatures). Formats follow the upstream code cited at each parser; the shared
// summary is LOG_FORMATS.md.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logscan_int.h"

// --- Anchors ----------------------------------------------------------------------------------

// Run facts (LA_FACT sub numbers).
enum {
  F_MESH,
  F_TT_INIT,
  F_TT_START,
  F_CAPACITY,
  F_PEAK_FLOPS,
  F_TT_VERSION,
  F_BACKEND_VERSION,
  F_TRAINING_DONE,
  F_TRAINING_COMPLETED,
  F_FIT_STOPPED,
  F_MAX_STEPS,
  F_TORCHRUN_FINISHED,
  F_TORCHRUN_FAILED,
  F_PRIMUS_RUNNER,
  F_JOB_FINISHED,
  F_MICROBATCHES,
  F_MP_SIZE,
  F_SEEDS,
  F_GLOBAL_RANK,
  F_PROCESSES,
  F_OPTIMIZER_CONFIG,
  F_GPU_MODEL,
  F_WORKER_OK,
  F_EXIT_AT_ITERATION,
  F_RESTORING,
  F_EXCEPTION,
  F_TT_ARGS,
};

// Failure signatures (LA_SIGNATURE sub numbers index this table). Fragments and their origin:
// LOG_FORMATS.md section 6 (c10 CUDA/HIP caching allocator messages, ProcessGroupNCCL.cpp,
// torch.distributed.elastic, megatron/core/rerun_state_machine.py, Slurm, NeMo preemption).
typedef struct Sig {
  const char *text;
  TpLogDiagKind kind;
  TpLogSeverity sev;
  const char *what;
  int check;  // extra verification, see sig_check
} Sig;

enum {
  CK_NONE,
  CK_EXITCODE,
  CK_EXITCODE_NONZERO,
  CK_RESULT_NAN,
  CK_RESTART_COUNT,
  CK_EXIT_SIGTERM,
  CK_EXIT_MINUTES,
  CK_CANCELLED,
};

static const Sig sigs[] = {
    {"CUDA out of memory", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "GPU out of memory", CK_NONE},
    {"HIP out of memory", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "GPU out of memory", CK_NONE},
    {"OutOfMemoryError", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "GPU out of memory", CK_NONE},
    {"error: out of memory", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "GPU out of memory", CK_NONE},
    {"Out of memory: Kill", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "host out of memory", CK_NONE},
    {"Out Of Memory", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "host out of memory", CK_NONE},
    {"oom-kill event", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "host out of memory", CK_NONE},
    {"Signal 9 (SIGKILL) received", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "process killed (SIGKILL)",
     CK_NONE},
    {"exitcode  : -9", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "process killed (SIGKILL)", CK_NONE},
    {" Killed   ", TP_LOG_D_OOM, TP_LOG_SEV_ERROR, "process killed", CK_NONE},
    {"memory mapping failed with OOM", TP_LOG_D_MEMORY_PRESSURE, TP_LOG_SEV_WARNING,
     "GPU memory pressure (allocator)", CK_NONE},
    {"memory allocation retries", TP_LOG_D_MEMORY_PRESSURE, TP_LOG_SEV_WARNING,
     "GPU memory pressure (allocator retries)", CK_NONE},
    {"Watchdog caught collective operation timeout", TP_LOG_D_NCCL_TIMEOUT, TP_LOG_SEV_ERROR,
     "collective timeout", CK_NONE},
    {"NCCL operations have failed or timed out", TP_LOG_D_NCCL_TIMEOUT, TP_LOG_SEV_ERROR,
     "collective timeout", CK_NONE},
    {"taking the entire process down", TP_LOG_D_NCCL_TIMEOUT, TP_LOG_SEV_ERROR,
     "collective timeout", CK_NONE},
    {"instance of 'c10::DistBackendError'", TP_LOG_D_NCCL_TIMEOUT, TP_LOG_SEV_ERROR,
     "collective timeout", CK_NONE},
    {"NCCL error in:", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"ncclInternalError", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"ncclSystemError", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"ncclUnhandledCudaError", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"ncclInvalidUsage", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"ncclRemoteError", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"unhandled system error", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"DistBackendError", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"NCCL communicator was aborted", TP_LOG_D_NCCL_ERROR, TP_LOG_SEV_ERROR, "NCCL error", CK_NONE},
    {"NCCL WARN ", TP_LOG_D_NCCL_WARNING, TP_LOG_SEV_WARNING, "NCCL warning", CK_NONE},
    {"CUDA error: ", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault", CK_NONE},
    {"illegal memory access", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault", CK_NONE},
    {"CUBLAS_STATUS_", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault", CK_NONE},
    {"cuDNN error", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault", CK_NONE},
    {"CUDNN_STATUS_", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault", CK_NONE},
    {"HIP error", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault", CK_NONE},
    {": hipError", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault", CK_NONE},
    {"Memory access fault by GPU", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault",
     CK_NONE},
    {"HSA_STATUS_ERROR", TP_LOG_D_GPU_FAULT, TP_LOG_SEV_ERROR, "GPU runtime fault", CK_NONE},
    {"found NaN in local", TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR, "NaN detected", CK_NONE},
    {"found Inf in local", TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR, "inf detected", CK_NONE},
    {"Unexpected result ", TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR, "NaN detected", CK_RESULT_NAN},
    {"Spiky loss", TP_LOG_D_LOSS_SPIKE, TP_LOG_SEV_WARNING, "loss spike", CK_NONE},
    {"Traceback (most recent call last)", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR, "traceback", CK_NONE},
    {"ChildFailedError", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR, "worker failed", CK_NONE},
    {"Root Cause (first observed failure)", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR, "worker failed",
     CK_NONE},
    {"failed (exitcode: ", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR, "worker failed", CK_EXITCODE_NONZERO},
    {"exitcode  : ", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR, "worker failed", CK_EXITCODE},
    {"Segmentation fault", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR, "crash", CK_NONE},
    {"Fatal Python error", TP_LOG_D_CRASH, TP_LOG_SEV_ERROR, "crash", CK_NONE},
    {"Received signal 15", TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING, "preempted", CK_NONE},
    {"Preemption detected", TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING, "preempted", CK_NONE},
    {"exiting program after ", TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING, "stopped on SIGTERM",
     CK_EXIT_SIGTERM},
    {"exiting program after ", TP_LOG_D_TIMEOUT, TP_LOG_SEV_WARNING, "time budget reached",
     CK_EXIT_MINUTES},
    // Slurm's slurmstepd: "*** JOB 123 ON node1 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME
    // LIMIT ***" (also PREEMPTION, NODE FAILURE; without "DUE TO": scancel).
    {"DUE TO TIME LIMIT", TP_LOG_D_TIMEOUT, TP_LOG_SEV_WARNING, "Slurm time limit", CK_NONE},
    {"DUE TO PREEMPTION", TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING, "preempted (Slurm)", CK_NONE},
    {"DUE TO NODE FAILURE", TP_LOG_D_NODE_FAILURE, TP_LOG_SEV_WARNING, "node failure (Slurm)",
     CK_NONE},
    {"CANCELLED AT", TP_LOG_D_CANCELLED, TP_LOG_SEV_WARNING, "job cancelled (Slurm)", CK_CANCELLED},
    {"Node failure on ", TP_LOG_D_NODE_FAILURE, TP_LOG_SEV_WARNING, "node failure (srun)", CK_NONE},
    // Kubernetes: kubelet's node-pressure eviction, graceful node shutdown, Kueue preemption.
    {"The node was low on resource", TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING, "evicted (Kubernetes)",
     CK_NONE},
    {"imminent node shutdown", TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING, "evicted (Kubernetes)",
     CK_NONE},
    {"Preempted to accommodate", TP_LOG_D_PREEMPTED, TP_LOG_SEV_WARNING, "preempted (Kubernetes)",
     CK_NONE},
    // torch.distributed.elastic: the agent's "Received 15 death signal, shutting down workers" and
    // its "SignalException: Process N got signal: 15"; Lightning's "Received SIGTERM: 15".
    {"death signal", TP_LOG_D_SIGNAL, TP_LOG_SEV_WARNING, "stopped by a signal", CK_NONE},
    {"SignalException", TP_LOG_D_SIGNAL, TP_LOG_SEV_WARNING, "stopped by a signal", CK_NONE},
    {"Received SIGTERM", TP_LOG_D_SIGNAL, TP_LOG_SEV_WARNING, "stopped by a signal", CK_NONE},
    {"restart_count=", TP_LOG_D_RESTART, TP_LOG_SEV_WARNING, "workers restarted", CK_RESTART_COUNT},
    {"will restart worker group", TP_LOG_D_RESTART, TP_LOG_SEV_WARNING, "workers restarted",
     CK_NONE},
};
#define NSIGS (sizeof sigs / sizeof sigs[0])

#define A(t, id, sub)                                                                              \
  { t, (uint8_t)(sizeof(t) - 1), id, sub }
static const LsAnchor anchors_fixed[] = {
    A("iteration ", LA_ITERATION, 0),
    A("Training epoch ", LA_NEMO_EPOCH, 0),
    A("global_step", LA_NEMO_STEP, 0),
    A("reduced_train_loss", LA_NEMO_STEP, 0),
    A("train_loss=", LA_NEMO_STEP, 0),
    A(" memory: ", LA_TT_STEP, 0),
    A("mmemory: ", LA_TT_STEP, 0),  // after a colour code: "ESC[38;2;54;234;195mmemory: "
    A(" arguments ---", LA_ARGS_RULE, 0),
    A("parameters", LA_PARAMETERS, 0),
    A("parameter count", LA_PARAMETERS, 0),
    A("memory (MB)", LA_MEMORY_REPORT, 0),
    A("Theoretical memory footprints", LA_THEORETICAL, 0),
    A("device mesh", LA_FACT, F_MESH),
    A("is initialized with ", LA_FACT, F_TT_INIT),
    A("Training starts at step", LA_FACT, F_TT_START),
    A(" capacity: ", LA_FACT, F_CAPACITY),
    A("Peak FLOPS used", LA_FACT, F_PEAK_FLOPS),
    A("torchtitan version", LA_FACT, F_TT_VERSION),
    A("backend_version=", LA_FACT, F_BACKEND_VERSION),
    A("[after training is done]", LA_FACT, F_TRAINING_DONE),
    A("Training completed", LA_FACT, F_TRAINING_COMPLETED),
    A("Trainer.fit` stopped", LA_FACT, F_FIT_STOPPED),
    A("'max_steps' (", LA_FACT, F_MAX_STEPS),
    A("torchrun finished", LA_FACT, F_TORCHRUN_FINISHED),
    A("torchrun failed", LA_FACT, F_TORCHRUN_FAILED),
    A(")] [INFO] ", LA_FACT, F_PRIMUS_RUNNER),
    A(" finished: ", LA_FACT, F_JOB_FINISHED),
    A("microbatches to constant", LA_FACT, F_MICROBATCHES),
    A("micro-batches to constant", LA_FACT, F_MICROBATCHES),
    A("model parallel with size", LA_FACT, F_MP_SIZE),
    A("random seeds to", LA_FACT, F_SEEDS),
    A("GLOBAL_RANK: ", LA_FACT, F_GLOBAL_RANK),
    A("processes registered", LA_FACT, F_PROCESSES),
    A("OptimizerConfig(", LA_FACT, F_OPTIMIZER_CONFIG),
    A("Detected GPU model: ", LA_FACT, F_GPU_MODEL),
    A("successfully finished", LA_FACT, F_WORKER_OK),
    A("exiting program at iteration", LA_FACT, F_EXIT_AT_ITERATION),
    A("Restoring states from the checkpoint", LA_FACT, F_RESTORING),
    A("Running with args: ", LA_FACT, F_TT_ARGS),
    // The exception line that ends a Python traceback names the crash.
    A("Exception: ", LA_FACT, F_EXCEPTION),
    A("RuntimeError: ", LA_FACT, F_EXCEPTION),
    A("AssertionError", LA_FACT, F_EXCEPTION),
    A("ValueError: ", LA_FACT, F_EXCEPTION),
    A("TypeError: ", LA_FACT, F_EXCEPTION),
    A("KeyError: ", LA_FACT, F_EXCEPTION),
    A("IndexError: ", LA_FACT, F_EXCEPTION),
    A("AttributeError: ", LA_FACT, F_EXCEPTION),
    A("ImportError: ", LA_FACT, F_EXCEPTION),
    A("ModuleNotFoundError: ", LA_FACT, F_EXCEPTION),
    A("FileNotFoundError: ", LA_FACT, F_EXCEPTION),
    A("NotImplementedError", LA_FACT, F_EXCEPTION),
    A("ZeroDivisionError: ", LA_FACT, F_EXCEPTION),
    A("OutOfMemoryError: ", LA_FACT, F_EXCEPTION),
    A("DistBackendError: ", LA_FACT, F_EXCEPTION),
};
#undef A

#define NFIXED (sizeof anchors_fixed / sizeof anchors_fixed[0])

size_t ls_anchor_count(void) {
  return NFIXED + NSIGS;
}

LsAnchor ls_anchor_get(size_t i) {
  if (i < NFIXED) {
    return anchors_fixed[i];
  }
  const Sig *g = &sigs[i - NFIXED];
  return (LsAnchor){g->text, (uint8_t)strlen(g->text), LA_SIGNATURE, (uint8_t)(i - NFIXED)};
}

// --- Small text helpers -----------------------------------------------------------------------

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static bool is_space(char c) {
  return c == ' ' || c == '\t';
}

static bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

// Literal-string helpers: the length comes from sizeof, not strlen.
#define FIND(p, n, lit)   ((const char *)memmem((p), (n), (lit), sizeof(lit) - 1))
#define STARTS(p, n, lit) ((n) >= sizeof(lit) - 1 && memcmp((p), (lit), sizeof(lit) - 1) == 0)
#define TEQ(t, lit)       ((t).n == sizeof(lit) - 1 && memcmp((t).p, (lit), sizeof(lit) - 1) == 0)

static LsText trim(const char *p, size_t n) {
  while (n > 0 && is_space(*p)) {
    p++;
    n--;
  }
  while (n > 0 && is_space(p[n - 1])) {
    n--;
  }
  return (LsText){p, n};
}

static const char *find(const char *p, size_t n, const char *lit) {
  return memmem(p, n, lit, strlen(lit));
}

static bool text_eq(LsText t, const char *lit) {
  size_t l = strlen(lit);
  return t.n == l && memcmp(t.p, lit, l) == 0;
}

// Reads an unsigned decimal integer at p[*i]; false when there is none.
static bool read_uint(const char *p, size_t n, size_t *i, long *out) {
  size_t j = *i;
  long v = 0;
  while (j < n && is_digit(p[j])) {
    if (v < 1000000000000L) {
      v = v * 10 + (p[j] - '0');
    }
    j++;
  }
  if (j == *i) {
    return false;
  }
  *i = j;
  *out = v;
  return true;
}

static size_t skip_spaces(const char *p, size_t n, size_t i) {
  while (i < n && is_space(p[i])) {
    i++;
  }
  return i;
}

// The first number in a value ("5630.1", "729.5/729.5", "17.9 (avg 17.4)", "9,891").
static bool value_num(LsText v, double *out) {
  size_t i = skip_spaces(v.p, v.n, 0);
  return tp_logscan_parse_number(v.p + i, v.n - i, out) > 0;
}

// The whole value is one number (possibly with a unit suffix in `units`).
static bool value_only_num(LsText v, double *out) {
  size_t used = tp_logscan_parse_number(v.p, v.n, out);
  return used > 0 && used == v.n;
}

// --- Normalisation ----------------------------------------------------------------------------

// Length of the leading run of bytes that are neither C0 controls nor DEL; eight bytes at a
// time ("has less than" and "has zero" word tests, Bit Twiddling Hacks).
static size_t plain_run(const char *p, size_t n) {
  const uint64_t ones = UINT64_C(0x0101010101010101), high = UINT64_C(0x8080808080808080);
  size_t i = 0;
  while (i + 8 <= n) {
    uint64_t x;
    memcpy(&x, p + i, 8);
    uint64_t lt = (x - ones * 0x20) & ~x & high;
    uint64_t y = x ^ (ones * 0x7f);
    uint64_t del = (y - ones) & ~y & high;
    if (lt | del) {
      break;
    }
    i += 8;
  }
  while (i < n && (unsigned char)p[i] >= 0x20 && p[i] != 0x7f) {
    i++;
  }
  return i;
}

// Copies seg into s->norm without terminal escape sequences (CSI "ESC [ ... final", OSC
// "ESC ] ... BEL|ESC \", two-byte ESC sequences), other control bytes turned into spaces.
static int strip_escapes(TpLogScan *s, const char *seg, size_t n, bool *has_nul) {
  TpBuf *b = &s->norm;
  b->len = 0;
  if (tp_buf_reserve(b, n + 1) != 0) {
    return TP_ENOMEM;
  }
  char *out = b->data;
  size_t o = 0;
  *has_nul = false;
  for (size_t i = 0; i < n;) {
    size_t k = plain_run(seg + i, n - i);
    if (k > 0) {
      memcpy(out + o, seg + i, k);
      o += k;
      i += k;
      continue;
    }
    unsigned char c = (unsigned char)seg[i];
    if (c == 0x1b) {
      if (i + 1 < n && seg[i + 1] == '[') {
        size_t j = i + 2;
        while (j < n && (unsigned char)seg[j] >= 0x20 && (unsigned char)seg[j] <= 0x3f) {
          j++;  // parameter bytes
        }
        while (j < n && (unsigned char)seg[j] >= 0x20 && (unsigned char)seg[j] <= 0x2f) {
          j++;  // intermediate bytes
        }
        i = j < n ? j + 1 : n;  // final byte
        continue;
      }
      if (i + 1 < n && seg[i + 1] == ']') {
        size_t j = i + 2;
        while (j < n && seg[j] != 0x07 && !(seg[j] == 0x1b && j + 1 < n && seg[j + 1] == '\\')) {
          j++;
        }
        i = j >= n ? n : (seg[j] == 0x07 ? j + 1 : j + 2);
        continue;
      }
      if (i + 1 < n && (seg[i + 1] == '(' || seg[i + 1] == ')')) {
        i += i + 2 < n ? 3 : 2;
        continue;
      }
      i += i + 1 < n ? 2 : 1;
      continue;
    }
    if (c == 0) {
      *has_nul = true;
    }
    if (c == 0x7f) {
      i++;
      continue;
    }
    out[o++] = c == '\t' ? '\t' : ' ';
    i++;
  }
  out[o] = '\0';
  b->len = o;
  return 0;
}

// "[YYYY-MM-DD HH:MM:SS(.f)]" or with 'T' and a zone: returns the bracket length.
static size_t bracket_time(const char *p, size_t n, LsText *ts, bool *iso) {
  if (n < 21 || p[0] != '[') {
    return 0;
  }
  const char *close = memchr(p, ']', n < 48 ? n : 48);
  if (!close) {
    return 0;
  }
  size_t len = (size_t)(close - p) - 1;
  double t;
  if (len < 19 || p[5] != '-' || !tp_logscan_parse_time(p + 1, len, &t)) {
    return 0;
  }
  *iso = p[11] == 'T';
  *ts = (LsText){p + 1, len};
  return len + 2;
}

// Primus logger prefix (primus/core/utils/logger.py, setup_logger):
// "[YYYYMMDD HH:MM:SS][rank-R/W][LEVEL]<pad> [----file.py:N] : " (v0.6+) or
// "[YYYYMMDD HH:MM:SS][rank-R/W][INFO ] " (older; the location part is optional).
static size_t pfx_primus(const char *p, size_t n, LsLine *L) {
  if (n < 30 || p[0] != '[' || p[9] != ' ' || p[18] != ']' || p[19] != '[') {
    return 0;
  }
  for (size_t i = 1; i < 9; i++) {
    if (!is_digit(p[i])) {
      return 0;
    }
  }
  if (!STARTS(p + 20, n - 20, "rank-")) {
    return 0;
  }
  size_t i = 25;
  long r, w;
  if (!read_uint(p, n, &i, &r) || i >= n || p[i] != '/') {
    return 0;
  }
  i++;
  if (!read_uint(p, n, &i, &w) || i + 1 >= n || p[i] != ']' || p[i + 1] != '[') {
    return 0;
  }
  const char *close = memchr(p + i + 2, ']', n - i - 2 < 16 ? n - i - 2 : 16);
  if (!close) {
    return 0;
  }
  i = (size_t)(close - p) + 1;
  L->has_primus = true;
  L->primus_rank = r;
  L->primus_world = w;
  L->ts_primus = (LsText){p + 1, 17};
  size_t j = skip_spaces(p, n, i);
  if (j < n && p[j] == '[') {
    const char *loc_end = memchr(p + j, ']', n - j);
    if (loc_end && (size_t)(loc_end - p) + 3 <= n && loc_end[1] == ' ' && loc_end[2] == ':') {
      j = (size_t)(loc_end - p) + 3;
      if (j < n && p[j] == ' ') {
        j++;  // the logger's own separator; Megatron's leading space stays
      }
      return j;
    }
  }
  return j;
}

// "[name N]:" as written by torchrun --tee (role + local rank) and by PyTorch (global rank).
static size_t pfx_rank(const char *p, size_t n, long *rank) {
  size_t i = 1;
  while (i < n && i < 24 && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z'))) {
    i++;
  }
  if (i == 1) {
    return 0;
  }
  if (!read_uint(p, n, &i, rank) || i + 1 >= n || p[i] != ']' || p[i + 1] != ':') {
    return 0;
  }
  return i + 2;
}

// torchtitan logger (torchtitan/tools/logging.py, init_logger):
// "[titan] YYYY-MM-DD HH:MM:SS,mmm - name - LEVEL - ".
static size_t pfx_titan(const char *p, size_t n, LsLine *L) {
  if (!STARTS(p, n, "[titan] ") || n < 8 + 23) {
    return 0;
  }
  double t;
  if (!tp_logscan_parse_time(p + 8, 23, &t)) {
    return 0;
  }
  L->ts_titan = (LsText){p + 8, 23};
  // Skip " - name - LEVEL - ".
  size_t i = 8 + 23;
  for (int k = 0; k < 3; k++) {
    const char *d = FIND(p + i, n - i, " - ");
    if (!d) {
      return 8 + 23;
    }
    i = (size_t)(d - p) + 3;
  }
  return i;
}

// NeMo logger (nemo/utils/formatters/base.py, BaseNeMoFormatter):
// "[NeMo X YYYY-MM-DD HH:MM:SS module:line] ".
static size_t pfx_nemo(const char *p, size_t n, LsLine *L) {
  if (!STARTS(p, n, "[NeMo ") || n < 8 + 20) {
    return 0;
  }
  const char *close = memchr(p, ']', n < 160 ? n : 160);
  if (!close) {
    return 0;
  }
  double t;
  if (tp_logscan_parse_time(p + 8, 19, &t)) {
    L->ts_nemo = (LsText){p + 8, 19};
  }
  size_t i = (size_t)(close - p) + 1;
  return i < n && p[i] == ' ' ? i + 1 : i;
}

// SkyPilot / Ray "(name, pid=N) " and Primus' launcher "(PrimusMaster  pid=N) ".
static size_t pfx_pid(const char *p, size_t n) {
  const char *close = memchr(p, ')', n < 96 ? n : 96);
  if (!close) {
    return 0;
  }
  size_t len = (size_t)(close - p);
  const char *pid = FIND(p, len, "pid=");
  if (!pid) {
    return 0;
  }
  for (const char *q = pid + 4; q < close; q++) {
    if (!is_digit(*q)) {
      return 0;
    }
  }
  size_t i = len + 1;
  return i < n && p[i] == ' ' ? i + 1 : i;
}

// srun --label: "   1:  " (task id right-aligned, then ": ").
static size_t pfx_srun(const char *p, size_t n, long *task) {
  size_t i = 0;
  if (!read_uint(p, n, &i, task) || i >= n || p[i] != ':' || i > 6) {
    return 0;
  }
  i++;
  if (i < n && p[i] != ' ') {
    return 0;
  }
  return i < n ? i + 1 : i;
}

// TorchX (NeMo-Run local executor): the role name cut to its last 10 characters, '/', the
// replica index, one space: "ining-demo/0 ".
static size_t pfx_torchx(const char *p, size_t n) {
  size_t i = 0;
  while (i < n && i < 11 && (is_ident(p[i]) || p[i] == '-' || p[i] == '.')) {
    i++;
  }
  if (i == 0 || i > 10 || i >= n || p[i] != '/') {
    return 0;
  }
  i++;
  long idx;
  if (!read_uint(p, n, &i, &idx) || i >= n || p[i] != ' ') {
    return 0;
  }
  return i + 1;
}

static void strip_prefixes(LsLine *L) {
  const char *p = L->full;
  size_t n = L->full_n;
  for (int round = 0; round < 16; round++) {
    size_t i = skip_spaces(p, n, 0);
    p += i;
    n -= i;
    if (n == 0) {
      break;
    }
    size_t k = 0;
    long v;
    if (p[0] == '[') {
      bool iso = false;
      LsText ts;
      if ((k = pfx_primus(p, n, L)) > 0) {
      } else if ((k = bracket_time(p, n, &ts, &iso)) > 0) {
        if (iso) {
          L->ts_iso = ts;
        } else {
          L->ts_bracket = ts;
        }
      } else if ((k = pfx_titan(p, n, L)) > 0) {
      } else if ((k = pfx_nemo(p, n, L)) > 0) {
      } else if ((k = pfx_rank(p, n, &v)) > 0) {
        if (!L->has_local) {
          L->has_local = true;
          L->local = v;
        }
      }
    } else if (p[0] == '(') {
      k = pfx_pid(p, n);
    } else if (is_digit(p[0])) {
      if ((k = pfx_srun(p, n, &v)) > 0) {
        if (!L->has_task) {
          L->has_task = true;
          L->task = v;
        }
      } else {
        k = pfx_torchx(p, n);
      }
    } else {
      k = pfx_torchx(p, n);
    }
    if (k == 0) {
      break;
    }
    p += k;
    n -= k;
  }
  LsText t = trim(p, n);
  L->p = t.p;
  L->n = t.n;
}

// Rank reported with a record, and the key that orders ranks for the selection rule.
static void line_rank(const LsLine *L, bool *has_rank, long *rank, bool *has_key, int64_t *key) {
  *has_rank = *has_key = false;
  *rank = 0;
  *key = 0;
  if (L->has_primus) {
    *has_rank = *has_key = true;
    *rank = L->primus_rank;
    *key = L->primus_rank;
  } else if (L->has_local || L->has_task) {
    *has_rank = *has_key = true;
    *rank = L->has_local ? L->local : L->task;
    *key = (int64_t)(L->has_task ? L->task : 0) * 65536 + (L->has_local ? L->local : 0);
  }
}

static void rec_common(TpLogScan *s, const LsLine *L) {
  bool has_rank, has_key;
  long rank;
  int64_t key;
  line_rank(L, &has_rank, &rank, &has_key, &key);
  if (has_rank) {
    tp_logscan_rec_set(s, TP_LOG_F_RANK, (double)rank);
  }
  ls_rec_set_key(s, has_key, key);
  tp_logscan_rec_set(s, TP_LOG_F_LINE, (double)L->lineno);
}

static bool family_allows(const TpLogScan *s, int fam) {
  return (s->family == LS_FAM_NONE || s->family == fam) && (s->families >> fam & 1);
}

static void lock_family(TpLogScan *s, int fam) {
  if (s->family == LS_FAM_NONE) {
    s->family = fam;
  }
}

// --- Megatron-LM / Primus iteration line ------------------------------------------------------
// megatron/training/training.py, training_log (NVIDIA/Megatron-LM); Primus rewrites it in
// primus/backends/megatron/patches/training_log/print_rank_last_patches.py
// (patch_training_log_unified) and, for its legacy trainer,
// primus/modules/trainer/megatron/trainer.py (MegatronTrainer.training_log).

enum { K_NUM, K_MS, K_HIPMEM };

typedef struct MgLabel {
  const char *label;
  size_t len;
  int field;
  int kind;
  bool primus;  // only Primus (or AMD's fork) prints it
} MgLabel;

#define LBL(lit) lit, sizeof(lit) - 1
static const MgLabel mg_labels[] = {
    {LBL("consumed samples"), TP_LOG_F_CONSUMED_SAMPLES, K_NUM, false},
    {LBL("consumed tokens"), TP_LOG_F_CONSUMED_TOKENS, K_NUM, false},
    {LBL("skipped samples"), TP_LOG_F_SKIPPED_SAMPLES, K_NUM, false},
    {LBL("elapsed time per iteration (ms)"), TP_LOG_F_STEP_TIME_S, K_MS, false},
    {LBL("throughput per GPU (TFLOP/s/GPU)"), TP_LOG_F_TFLOPS_PER_GPU, K_NUM, false},
    {LBL("compute per GPU (TFLOP/s/GPU)"), TP_LOG_F_TFLOPS_PER_GPU, K_NUM, true},
    {LBL("tokens per GPU (tokens/s/GPU)"), TP_LOG_F_TOKENS_PER_S_PER_GPU, K_NUM, true},
    {LBL("tokens/s/GPU inst/harmonic mean"), TP_LOG_F_TOKENS_PER_S_PER_GPU, K_NUM, true},
    {LBL("Tokens per second per GPU (Tok/s/GPU)"), TP_LOG_F_TOKENS_PER_S_PER_GPU, K_NUM, false},
    {LBL("energy per GPU (J/iter/GPU)"), TP_LOG_F_ENERGY_J_PER_GPU, K_NUM, false},
    {LBL("power per GPU (W/GPU)"), TP_LOG_F_POWER_W_PER_GPU, K_NUM, false},
    {LBL("learning rate"), TP_LOG_F_LR, K_NUM, false},
    {LBL("global batch size"), TP_LOG_F_GLOBAL_BATCH_SIZE, K_NUM, false},
    {LBL("loss scale"), TP_LOG_F_LOSS_SCALE, K_NUM, false},
    {LBL("grad norm"), TP_LOG_F_GRAD_NORM, K_NUM, false},
    {LBL("num zeros"), TP_LOG_F_NUM_ZEROS, K_NUM, false},
    {LBL("params norm"), TP_LOG_F_PARAMS_NORM, K_NUM, false},
    {LBL("number of skipped iterations"), TP_LOG_F_SKIPPED_ITERATIONS, K_NUM, false},
    {LBL("number of nan iterations"), TP_LOG_F_NAN_ITERATIONS, K_NUM, false},
    {LBL("mem usages"), TP_LOG_F_MEM_USAGE_FRACTION, K_NUM, true},
    {LBL("hip mem usage/free/total/usage_ratio"), -1, K_HIPMEM, true},
};

// "iteration <spaces> N/<spaces> T" anywhere in the payload; returns the position after T.
static bool find_iteration(const char *p, size_t n, size_t *after, double *iter, double *total) {
  size_t from = 0;
  while (from < n) {
    const char *q = memmem(p + from, n - from, "iteration", 9);
    if (!q) {
      return false;
    }
    size_t i = (size_t)(q - p) + 9;
    from = i;
    if (q > p && is_ident(q[-1])) {
      continue;
    }
    size_t j = skip_spaces(p, n, i);
    if (j == i) {
      continue;
    }
    long it, tot;
    if (!read_uint(p, n, &j, &it) || j >= n || p[j] != '/') {
      continue;
    }
    j = skip_spaces(p, n, j + 1);
    if (!read_uint(p, n, &j, &tot)) {
      continue;
    }
    *iter = (double)it;
    *total = (double)tot;
    *after = j;
    return true;
  }
  return false;
}

static bool label_has_loss(LsText l) {
  return memmem(l.p, l.n, "loss", 4) != NULL;
}

// "33.81GB/254.18GB/287.98GB/11.74%": used, free, total (GiB), usage percentage.
static int parse_hipmem(TpLogScan *s, LsText v) {
  double vals[4];
  size_t i = 0;
  for (int k = 0; k < 4; k++) {
    i = skip_spaces(v.p, v.n, i);
    size_t used = tp_logscan_parse_number(v.p + i, v.n - i, &vals[k]);
    if (used == 0) {
      return k;
    }
    i += used;
    while (i < v.n && v.p[i] != '/') {
      i++;
    }
    i++;
  }
  tp_logscan_rec_set(s, TP_LOG_F_MEM_DEVICE_USED_GIB, vals[0]);
  tp_logscan_rec_set(s, TP_LOG_F_MEM_DEVICE_TOTAL_GIB, vals[2]);
  tp_logscan_rec_set(s, TP_LOG_F_MEM_USAGE_FRACTION, vals[3] / 100.0);
  return 4;
}

static int parse_megatron(TpLogScan *s, const LsLine *L) {
  size_t after;
  double iter, total;
  if (!family_allows(s, LS_FAM_MEGATRON) || !find_iteration(L->p, L->n, &after, &iter, &total)) {
    return 0;
  }
  // A Megatron line continues with " |"; anything else ("iteration 3/10 done") is not one.
  size_t k = skip_spaces(L->p, L->n, after);
  if (k < L->n && L->p[k] != '|') {
    return 0;
  }
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  LsPend *pd = &s->pend;
  pd->megatron = true;
  tp_logscan_rec_set(s, TP_LOG_F_ITERATION, iter);
  if (L->terminated || after < L->n) {
    tp_logscan_rec_set(s, TP_LOG_F_TRAIN_ITERS, total);  // else T runs into the cut end
  }
  const LsText *ts = L->ts_bracket.p  ? &L->ts_bracket
                     : L->ts_primus.p ? &L->ts_primus
                                      : (L->ts_iso.p ? &L->ts_iso : NULL);
  if (ts) {
    tp_logscan_rec_timestamp(s, ts->p, ts->n);
  }
  bool primus_line = L->has_primus;
  bool seen_gbs = false, seen_scale = false;
  bool last_bad = false;
  LsText primary = {NULL, 0};
  double primary_v = 0;
  const char *p = L->p + after;
  size_t n = L->n - after;
  bool ends_pipe = n > 0 && p[n - 1] == '|';
  size_t i = 0;
  while (i < n && rc == 0) {
    const char *bar = memchr(p + i, '|', n - i);
    size_t e = bar ? (size_t)(bar - p) : n;
    LsText seg = trim(p + i, e - i);
    i = e + 1;
    if (seg.n == 0) {
      continue;
    }
    if (!bar && !L->terminated) {
      last_bad = true;  // the segment runs into the cut end of the log: its value is unknown
      continue;
    }
    const char *colon = NULL;
    for (size_t c = 0; c < seg.n; c++) {
      if (seg.p[c] == ':' && (c + 1 == seg.n || seg.p[c + 1] == ' ')) {
        colon = seg.p + c;
        break;
      }
    }
    if (!colon) {
      last_bad = true;
      continue;
    }
    LsText label = trim(seg.p, (size_t)(colon - seg.p));
    LsText value = trim(colon + 1, seg.n - (size_t)(colon - seg.p) - 1);
    last_bad = value.n == 0;
    if (value.n == 0) {
      continue;
    }
    const MgLabel *ml = NULL;
    for (size_t m = 0; m < sizeof mg_labels / sizeof mg_labels[0]; m++) {
      if (label.n == mg_labels[m].len && memcmp(label.p, mg_labels[m].label, label.n) == 0) {
        ml = &mg_labels[m];
        break;
      }
    }
    double v;
    if (ml) {
      if (ml->primus) {
        primus_line = true;
      }
      if (ml->field == TP_LOG_F_GLOBAL_BATCH_SIZE) {
        seen_gbs = true;
      } else if (ml->field == TP_LOG_F_LOSS_SCALE || ml->field == TP_LOG_F_GRAD_NORM ||
                 ml->field == TP_LOG_F_SKIPPED_ITERATIONS || ml->field == TP_LOG_F_NAN_ITERATIONS ||
                 ml->field == TP_LOG_F_NUM_ZEROS || ml->field == TP_LOG_F_PARAMS_NORM) {
        seen_scale = true;
      }
      if (ml->kind == K_HIPMEM) {
        if (parse_hipmem(s, value) < 4) {
          rc = tp_logscan_rec_extra(s, label.p, label.n, value.p, value.n);
        }
      } else if (value_num(value, &v)) {
        if (memchr(value.p, '/', value.n) ||
            (memchr(value.p, '(', value.n) && FIND(value.p, value.n, "(avg"))) {
          primus_line = true;  // "X/Y" and "X (avg Y)": Primus' instant / running mean
        }
        tp_logscan_rec_set(s, (TpLogField)ml->field, ml->kind == K_MS ? v / 1000.0 : v);
      } else {
        rc = tp_logscan_rec_extra(s, label.p, label.n, value.p, value.n);
      }
      continue;
    }
    if (STARTS(label.p, label.n, "rocm mem usage") || FIND(label.p, label.n, "rocm max mem")) {
      primus_line = true;
      rc = tp_logscan_rec_extra(s, label.p, label.n, value.p, value.n);
      continue;
    }
    // Losses: every "<name>: <number>" between global batch size and loss scale, and any
    // label naming a loss (LOG_FORMATS.md 2.1, loss keys).
    if (!seen_scale && value_only_num(value, &v) && ((seen_gbs) || label_has_loss(label))) {
      rc = tp_logscan_rec_loss(s, label.p, label.n, v);
      if (!primary.p || TEQ(label, "lm loss")) {
        if (!primary.p || !TEQ(primary, "lm loss")) {
          primary = label;
          primary_v = v;
        }
      }
      continue;
    }
    rc = tp_logscan_rec_extra(s, label.p, label.n, value.p, value.n);
  }
  if (rc) {
    return rc;
  }
  if (primary.p) {
    tp_logscan_rec_set(s, TP_LOG_F_LOSS, primary_v);
  }
  if (primus_line) {
    s->primus_seen = true;
  }
  pd->loss_region = seen_scale;
  // A complete Megatron line ends with '|'; Primus' rewritten line ends with its memory
  // segment. A last segment without "label: value" means the line was cut.
  pd->cut = last_bad || (!ends_pipe && !primus_line) || !L->terminated;
  rec_common(s, L);
  lock_family(s, LS_FAM_MEGATRON);
  rc = tp_logscan_rec_commit(s);
  return rc ? rc : 1;
}

// --- NeMo 2 ProgressPrinter line and NeMo / Lightning TQDM bar --------------------------------
// nemo/lightning/pytorch/callbacks/progress_printer.py (ProgressPrinter.format_string):
// "Training epoch E, iteration I/T | name: value | ...". Values are averaged over the
// interval; global_step is the 0-based step (megatron_strategy.py, training_step).

static int nemo_key(TpLogScan *s, LsText key, LsText val, bool *loss_set, bool *step_set) {
  double v;
  bool num = value_only_num(val, &v);
  if (!num) {
    return tp_logscan_rec_extra(s, key.p, key.n, val.p, val.n);
  }
  static const struct {
    const char *key;
    int field;
    double scale;
  } map[] = {
      {"lr", TP_LOG_F_LR, 1},
      {"global_batch_size", TP_LOG_F_GLOBAL_BATCH_SIZE, 1},
      {"global_step", TP_LOG_F_ITERATION, 1},
      {"train_step_timing in s", TP_LOG_F_STEP_TIME_S, 1},
      {"consumed_samples", TP_LOG_F_CONSUMED_SAMPLES, 1},
      // megatron_strategy.py logs allocator peaks in bytes (NEMO_LOG_MEMORY_USAGE=1).
      {"max_memory_reserved", TP_LOG_F_MEM_MAX_RESERVED_GIB, 1.0 / 1073741824.0},
      {"max_memory_allocated", TP_LOG_F_MEM_MAX_ALLOCATED_GIB, 1.0 / 1073741824.0},
      {"TFLOPS_per_GPU", TP_LOG_F_TFLOPS_PER_GPU, 1},
      {"tokens_per_sec_per_gpu", TP_LOG_F_TOKENS_PER_S_PER_GPU, 1},
  };
  if (TEQ(key, "reduced_train_loss")) {
    *loss_set = true;
    tp_logscan_rec_set(s, TP_LOG_F_LOSS, v);
    return tp_logscan_rec_loss(s, key.p, key.n, v);
  }
  if (TEQ(key, "loss") || TEQ(key, "train_loss")) {
    // Lightning's running mean: primary only when the step loss is absent (set at the end).
    return tp_logscan_rec_loss(s, key.p, key.n, v);
  }
  for (size_t m = 0; m < sizeof map / sizeof map[0]; m++) {
    if (text_eq(key, map[m].key)) {
      if (map[m].field == TP_LOG_F_STEP_TIME_S) {
        *step_set = true;
      }
      tp_logscan_rec_set(s, (TpLogField)map[m].field, v * map[m].scale);
      return 0;
    }
  }
  return tp_logscan_rec_extra(s, key.p, key.n, val.p, val.n);
}

// When only Lightning's `loss=` is there, it becomes the primary loss.
static void nemo_fallback_loss(TpLogScan *s, bool loss_set) {
  if (loss_set || s->pend.nlosses == 0) {
    return;
  }
  size_t pos = 0;
  TpLogRecord r = {0};
  r.kv = (const unsigned char *)s->pend.kv.data;
  r.kv_len = s->pend.kv.len;
  TpLogKv kv;
  while (tp_logscan_kv_next(&r, &pos, &kv)) {
    if (kv.kind == TP_LOG_KV_LOSS) {
      tp_logscan_rec_set(s, TP_LOG_F_LOSS, kv.num);
      return;
    }
  }
}

static const LsText *nemo_ts(const LsLine *L) {
  return L->ts_iso.p       ? &L->ts_iso
         : L->ts_bracket.p ? &L->ts_bracket
         : L->ts_nemo.p    ? &L->ts_nemo
                           : NULL;
}

static int parse_nemo_printer(TpLogScan *s, const LsLine *L) {
  const char *q = FIND(L->p, L->n, "Training epoch ");
  if (!q || !family_allows(s, LS_FAM_NEMO)) {
    return 0;
  }
  const char *p = L->p;
  size_t n = L->n;
  size_t i = (size_t)(q - p) + 15;
  long ep, it, tot;
  if (!read_uint(p, n, &i, &ep) || !STARTS(p + i, n - i, ", iteration ")) {
    return 0;
  }
  i += 12;
  if (!read_uint(p, n, &i, &it) || i >= n || p[i] != '/') {
    return 0;
  }
  i++;
  if (!read_uint(p, n, &i, &tot)) {
    return 0;
  }
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  tp_logscan_rec_set(s, TP_LOG_F_EPOCH, (double)ep);
  tp_logscan_rec_set(s, TP_LOG_F_EPOCH_ITERATION, (double)it);
  if (L->terminated || i < n) {
    tp_logscan_rec_set(s, TP_LOG_F_TRAIN_ITERS, (double)tot);  // else T runs into the cut end
  }
  const LsText *ts = nemo_ts(L);
  if (ts) {
    tp_logscan_rec_timestamp(s, ts->p, ts->n);
  }
  bool loss_set = false, step_set = false;
  while (i < n && rc == 0) {
    const char *bar = memchr(p + i, '|', n - i);
    size_t e = bar ? (size_t)(bar - p) : n;
    LsText seg = trim(p + i, e - i);
    i = e + 1;
    if (!bar && !L->terminated) {
      break;  // the last segment runs into the cut end of the log: its value is unknown
    }
    const char *colon = FIND(seg.p, seg.n, ": ");
    if (!colon && seg.n > 0 && seg.p[seg.n - 1] == ':') {
      colon = seg.p + seg.n - 1;
    }
    if (seg.n == 0 || !colon) {
      continue;
    }
    LsText key = trim(seg.p, (size_t)(colon - seg.p));
    LsText val = trim(colon + 1, seg.n - (size_t)(colon - seg.p) - 1);
    if (val.n > 0) {
      rc = nemo_key(s, key, val, &loss_set, &step_set);
    }
  }
  if (rc) {
    return rc;
  }
  nemo_fallback_loss(s, loss_set);
  s->pend.cut = !L->terminated;
  rec_common(s, L);
  lock_family(s, LS_FAM_NEMO);
  rc = tp_logscan_rec_commit(s);
  return rc ? rc : 1;
}

// TQDM bar (nemo/lightning/pytorch/callbacks/progress_bar.py, MegatronProgressBar; NeMo 1 uses
// Lightning's TQDMProgressBar): "Epoch E: <pct>%|<bar>| n/total [elapsed<remaining, rate,
// key=value, ...]". Postfix values are tqdm's 3-significant-digit forms ("2e+3", "1.28e+6").
static int parse_nemo_bar(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  const char *q = FIND(p, n, "Epoch ");
  if (!q || !family_allows(s, LS_FAM_NEMO)) {
    return 0;
  }
  size_t i = (size_t)(q - p) + 6;
  long ep;
  if (!read_uint(p, n, &i, &ep) || i >= n || p[i] != ':') {
    return 0;
  }
  const char *open = memchr(p + i, '[', n - i);
  if (!open) {
    return 0;
  }
  size_t ob = (size_t)(open - p);
  const char *close = memchr(open, ']', n - ob);
  size_t cb = close ? (size_t)(close - p) : n;
  // The counter just before '[': "2000/603000" or "51it".
  size_t k = ob;
  while (k > i && is_space(p[k - 1])) {
    k--;
  }
  size_t cs = k;
  while (cs > i && !is_space(p[cs - 1]) && p[cs - 1] != '|') {
    cs--;
  }
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  tp_logscan_rec_set(s, TP_LOG_F_EPOCH, (double)ep);
  size_t c = cs;
  long cur = -1, tot;
  if (read_uint(p, k, &c, &cur)) {
    tp_logscan_rec_set(s, TP_LOG_F_EPOCH_ITERATION, (double)cur);
    if (c < k && p[c] == '/') {
      c++;
      if (read_uint(p, k, &c, &tot)) {
        tp_logscan_rec_set(s, TP_LOG_F_TRAIN_ITERS, (double)tot);
      }
    }
  }
  const LsText *ts = nemo_ts(L);
  if (ts) {
    tp_logscan_rec_timestamp(s, ts->p, ts->n);
  }
  bool loss_set = false, step_set = false, have_step = false;
  double rate_step = 0;
  size_t j = ob + 1;
  bool first_item = true;
  while (j < cb && rc == 0) {
    const char *comma = memchr(p + j, ',', cb - j);
    size_t e = comma ? (size_t)(comma - p) : cb;
    LsText item = trim(p + j, e - j);
    j = e + 1;
    if (!comma && !close && !L->terminated) {
      break;  // the last item runs into the cut end of the log: its value is unknown
    }
    bool is_first = first_item;
    first_item = false;
    const char *eq = memchr(item.p, '=', item.n);
    double v;
    if (eq) {
      LsText key = trim(item.p, (size_t)(eq - item.p));
      LsText val = trim(eq + 1, item.n - (size_t)(eq - item.p) - 1);
      if (TEQ(key, "v_num") && val.n == 0) {
        continue;
      }
      if (val.n > 0) {
        rc = nemo_key(s, key, val, &loss_set, &step_set);
      }
    } else if (is_first && memchr(item.p, '<', item.n) && memchr(item.p, ':', item.n)) {
      // The first item: "elapsed<remaining" (tqdm's {elapsed}<{remaining}).
      const char *lt = memchr(item.p, '<', item.n);
      LsText el = trim(item.p, (size_t)(lt - item.p));
      LsText rem = trim(lt + 1, item.n - (size_t)(lt - item.p) - 1);
      rc = tp_logscan_rec_extra(s, "elapsed", 7, el.p, el.n);
      if (rc == 0) {
        rc = tp_logscan_rec_extra(s, "remaining", 9, rem.p, rem.n);
      }
    } else if (item.n > 4 && memcmp(item.p + item.n - 4, "it/s", 4) == 0 &&
               tp_logscan_parse_number(item.p, item.n - 4, &v) == item.n - 4 && v > 0) {
      rate_step = 1.0 / v;
      have_step = true;
    } else if (item.n > 4 && memcmp(item.p + item.n - 4, "s/it", 4) == 0 &&
               tp_logscan_parse_number(item.p, item.n - 4, &v) == item.n - 4) {
      rate_step = v;
      have_step = true;
    }
  }
  if (rc) {
    return rc;
  }
  bool has_step = s->pend.present >> TP_LOG_F_ITERATION & 1;
  if (!has_step && !loss_set && s->pend.nlosses == 0) {
    s->pend.active = false;  // a bar without training metrics (validation, sanity check)
    return 0;
  }
  if (!has_step && cur >= 0) {
    // No global_step in the postfix: the bar's counter (batches done in this epoch) is the step.
    tp_logscan_rec_set(s, TP_LOG_F_ITERATION, (double)cur);
  }
  if (!step_set && have_step) {
    tp_logscan_rec_set(s, TP_LOG_F_STEP_TIME_S, rate_step);
    tp_logscan_rec_derived(s, true);
  }
  nemo_fallback_loss(s, loss_set);
  s->pend.cut = !L->terminated;
  rec_common(s, L);
  lock_family(s, LS_FAM_NEMO);
  rc = tp_logscan_rec_commit(s);
  return rc ? rc : 1;
}

// --- torchtitan step line ---------------------------------------------------------------------
// torchtitan/components/metrics.py, MetricsProcessor.log: "step: N  loss: X  grad_norm: G
// memory: MGiB(P%)  tps: T  tflops: F  mfu: U%" (fields separated by two spaces; colour codes
// already removed). tps is per device, rounded, with ',' separators.

static void tt_derive(TpLogScan *s) {
  LsPend *p = &s->pend;
  if ((p->present >> TP_LOG_F_STEP_TIME_S & 1) ||
      !(p->present >> TP_LOG_F_TOKENS_PER_S_PER_GPU & 1)) {
    return;
  }
  double tps = p->v[TP_LOG_F_TOKENS_PER_S_PER_GPU];
  if (!(tps > 0)) {
    return;
  }
  // LOG_FORMATS.md 5.1: tokens per step per data-parallel rank / (tps x non-DP degree).
  double non_dp = s->tt_non_dp > 0 ? s->tt_non_dp : 1;
  double t = 0;
  if (s->tt_tokens_per_rank > 0) {
    t = s->tt_tokens_per_rank / (tps * non_dp);
  } else if (s->tt_local_bs > 0 && s->tt_seq_len > 0) {
    double ga = s->tt_grad_accum > 0 ? s->tt_grad_accum : 1;
    t = s->tt_local_bs * s->tt_seq_len * ga / (tps * non_dp);
  } else if (s->opts.gbs > 0 && s->opts.seq_len > 0 && s->opts.gpus > 0) {
    t = s->opts.gbs * s->opts.seq_len / (tps * s->opts.gpus);
  }
  if (t > 0) {
    tp_logscan_rec_set(s, TP_LOG_F_STEP_TIME_S, t);
    tp_logscan_rec_derived(s, true);
  }
}

static int parse_torchtitan(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  if (!family_allows(s, LS_FAM_TORCHTITAN)) {
    return 0;
  }
  // "step:" at a word start, not "validate step:" nor "micro_step:".
  const char *q = NULL;
  size_t from = 0;
  while (from < n) {
    const char *c = memmem(p + from, n - from, "step:", 5);
    if (!c) {
      break;
    }
    from = (size_t)(c - p) + 5;
    if (c > p && !is_space(c[-1])) {
      continue;
    }
    if (c - p >= 9 && memcmp(c - 9, "validate ", 9) == 0) {
      return 0;
    }
    q = c;
    break;
  }
  if (!q || !FIND(q, n - (size_t)(q - p), "loss:")) {
    return 0;
  }
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  bool got_loss = false, got_tps = false, got_step = false;
  size_t i = (size_t)(q - p);
  while (i < n && rc == 0) {
    i = skip_spaces(p, n, i);
    const char *colon = memchr(p + i, ':', n - i);
    if (!colon) {
      break;
    }
    LsText key = trim(p + i, (size_t)(colon - p) - i);
    size_t vs = skip_spaces(p, n, (size_t)(colon - p) + 1);
    const char *sep = FIND(p + vs, n - vs, "  ");
    size_t ve = sep ? (size_t)(sep - p) : n;
    LsText val = trim(p + vs, ve - vs);
    i = ve;
    if (!sep && !L->terminated) {
      // The value runs into the cut end of the log: it is unknown (`grad_norm:  2` may be the
      // first digit of 2.2490), and only the complete fields before it are kept.
      got_loss = got_loss || TEQ(key, "loss");
      break;
    }
    double v;
    bool num = value_num(val, &v);
    if (TEQ(key, "step") && num) {
      got_step = true;
      tp_logscan_rec_set(s, TP_LOG_F_ITERATION, v);
    } else if (TEQ(key, "loss") && num) {
      // With pipeline parallelism only the last stage computes the loss; the other stages log
      // a placeholder (torchtitan/train.py: -1.0, averaged over the DP mesh): a cross-entropy
      // loss is never negative, so a negative one is no loss.
      got_loss = true;
      if (v < 0) {
        s->tt_pp_seen = true;
      } else {
        tp_logscan_rec_set(s, TP_LOG_F_LOSS, v);
      }
    } else if ((TEQ(key, "grad_norm") || TEQ(key, "gnorm")) && num) {
      tp_logscan_rec_set(s, TP_LOG_F_GRAD_NORM, v);
    } else if (TEQ(key, "memory") && num) {
      // Peak reserved memory since the previous line (GiB) and its share of the device.
      tp_logscan_rec_set(s, TP_LOG_F_MEM_MAX_RESERVED_GIB, v);
      const char *par = memchr(val.p, '(', val.n);
      double pct;
      if (par && value_num((LsText){par + 1, val.n - (size_t)(par - val.p) - 1}, &pct)) {
        tp_logscan_rec_set(s, TP_LOG_F_MEM_USAGE_FRACTION, pct / 100.0);
      }
    } else if ((TEQ(key, "tps") || TEQ(key, "wps")) && num) {
      got_tps = true;
      tp_logscan_rec_set(s, TP_LOG_F_TOKENS_PER_S_PER_GPU, v);
    } else if (TEQ(key, "tflops") && num) {
      tp_logscan_rec_set(s, TP_LOG_F_TFLOPS_PER_GPU, v);
    } else if (TEQ(key, "mfu") && num) {
      tp_logscan_rec_set(s, TP_LOG_F_MFU_PCT, v);
    } else if (TEQ(key, "lr") && num) {
      tp_logscan_rec_set(s, TP_LOG_F_LR, v);
    } else if (TEQ(key, "elapsed_time_per_step") && num) {
      tp_logscan_rec_set(s, TP_LOG_F_STEP_TIME_S, v);
    } else if (key.n > 0) {
      rc = tp_logscan_rec_extra(s, key.p, key.n, val.p, val.n);
    }
  }
  if (rc) {
    return rc;
  }
  if (!got_step || !got_loss) {
    s->pend.active = false;
    return 0;
  }
  // A placeholder loss proves pipeline parallelism: without a stated degree the non-data-
  // parallel degree is unknown, and a step time derived with 1 would be pp times too long.
  if (!s->tt_pp_seen || s->tt_non_dp > 0) {
    tt_derive(s);
  }
  const LsText *ts = L->ts_titan.p    ? &L->ts_titan
                     : L->ts_primus.p ? &L->ts_primus
                                      : (L->ts_iso.p ? &L->ts_iso : NULL);
  if (ts) {
    tp_logscan_rec_timestamp(s, ts->p, ts->n);
  }
  if (L->has_primus) {
    s->primus_seen = true;
    ls_meta_str(s, TP_LOG_MS_BACKEND, "torchtitan", 10, false);
  }
  s->pend.cut = !got_tps || !L->terminated;
  rec_common(s, L);
  lock_family(s, LS_FAM_TORCHTITAN);
  rc = tp_logscan_rec_commit(s);
  return rc ? rc : 1;
}

// --- Argument dumps ---------------------------------------------------------------------------
// Megatron: megatron/training/arguments.py, _print_args: "---- arguments ----", then
// "  <name> <dots> <value>" (48 - len(name) dots, none for names of 48+ characters), then
// "---- end of arguments ----". Primus: primus/core/utils/module_utils.py, log_dict_aligned:
// "<title>: (N parameters)", then "  <key><pad> : <value> (<type>)".

static bool rule_line(LsText t, LsText *title) {
  if (t.n < 8 || !STARTS(t.p, t.n, "---") || t.p[t.n - 1] != '-') {
    return false;
  }
  size_t a = 0, b = t.n;
  while (a < b && t.p[a] == '-') {
    a++;
  }
  while (b > a && t.p[b - 1] == '-') {
    b--;
  }
  *title = trim(t.p + a, b - a);
  return title->n > 0;
}

// A name of a `_print_args`-layout line: Megatron's argparse destinations are identifiers; the
// NeMo driver (stdlib/tp/frameworks/nemo.lua, SCRIPT, print_arguments) prints dotted recipe
// paths ("optim.config.lr") in the same layout. Returns the name length (0: not a name) and
// whether it has dots.
static size_t dump_name(const char *p, size_t n, bool *dotted) {
  size_t i = 0;
  *dotted = false;
  while (i < n && (is_ident(p[i]) || p[i] == '.')) {
    if (p[i] == '.') {
      if (i == 0 || p[i - 1] == '.') {
        return 0;
      }
      *dotted = true;
    }
    i++;
  }
  if (i == 0 || is_digit(p[0]) || p[i - 1] == '.') {
    return 0;
  }
  return i;
}

// `strict`: only the exact layout (48 - len(name) dots, or two spaces for longer names), for lines
// that also look like something else: Megatron's own `iteration` argument reads like a record.
static int args_line(TpLogScan *s, const LsLine *L, bool strict) {
  const char *p = L->p;
  size_t n = L->n;
  bool dotted;
  size_t i = dump_name(p, n, &dotted);
  if (i == 0 || i >= n || p[i] != ' ') {
    return 0;
  }
  size_t name_len = i;
  i++;
  size_t dots = i;
  while (i < n && p[i] == '.') {
    i++;
  }
  dots = i - dots;
  // A dotted name must come with the layout's separator: " <dots> " (48 - len(name) dots), or
  // two spaces for names of 48 characters or more. Identifiers keep Megatron's looser rule.
  if (dotted && dots == 0 && (name_len < 48 || i >= n || p[i] != ' ')) {
    return 0;
  }
  if (strict && (name_len < 48 ? dots != 48 - name_len : dots != 0 || i >= n || p[i] != ' ')) {
    return 0;
  }
  if (i < n) {
    if (p[i] != ' ') {
      return 0;
    }
    i++;
  }
  int rc = ls_arg_add(s, TP_LOG_ARGS_MEGATRON, p, name_len, p + i, n - i);
  return rc ? rc : 1;
}

static int primus_args_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  size_t i = 0;
  while (i < n && (is_ident(p[i]) || p[i] == '.')) {
    i++;
  }
  if (i == 0) {
    return 0;
  }
  size_t name_len = i;
  i = skip_spaces(p, n, i);
  if (i >= n || p[i] != ':' || (i + 1 < n && p[i + 1] != ' ')) {
    return 0;
  }
  LsText val = trim(p + i + 1, n - i - 1);
  // Strip the trailing " (<type>)".
  if (val.n > 2 && val.p[val.n - 1] == ')') {
    size_t o = val.n - 1;
    while (o > 0 && val.p[o - 1] != '(') {
      o--;
    }
    if (o > 0) {
      bool type_ok = o < val.n - 1;
      for (size_t k = o; k < val.n - 1; k++) {
        if (!is_ident(val.p[k]) && val.p[k] != '.') {
          type_ok = false;
        }
      }
      if (type_ok && (o == 1 || val.p[o - 2] == ' ')) {
        val = trim(val.p, o - 1);
      }
    }
  }
  int rc = ls_arg_add(s, TP_LOG_ARGS_PRIMUS, p, name_len, val.p, val.n);
  return rc ? rc : 1;
}

// --- torchtitan job config --------------------------------------------------------------------
// pytorch/torchtitan torchtitan/train.py, Trainer.__init__: with job.print_args it logs
// f"Running with args: {job_config.to_dict()}" (one line, on every rank);
// torchtitan/config/job_config.py, JobConfig.to_dict returns dataclasses.asdict(self), so the
// text is the Python repr of a dict of section dicts: {'job': {'config_file': None, ...,
// 'print_args': True}, 'optimizer': {'name': 'AdamW', 'lr': 0.0003, ...}, ...}. The same reader
// takes JSON (double quotes, true/false/null). Nested dicts flatten to dotted names
// ("optimizer.lr"); values are stored as Python str() prints them, as in `_print_args` dumps:
// strings decoded and unquoted, True/False/None (JSON's true/false/null too), numbers, lists,
// tuples and other reprs as printed. Decoded control characters keep their escape text.

#define TT_ANCHOR    "Running with args: "
#define TT_MAX_DEPTH 32

typedef struct TtArgs {
  TpLogScan *s;
  const char *p;  // the dict text
  size_t n, i;
  TpBuf name;       // dotted name of the value being read
  TpBuf val;        // decoded string value
  const char *err;  // first problem (NULL: none)
  size_t err_at;
  int rc;  // TP_ENOMEM from storage
  size_t nargs;
} TtArgs;

static bool tt_fail_at(TtArgs *t, size_t at, const char *why) {
  if (!t->err) {
    t->err = why;
    t->err_at = at;
  }
  return false;
}

static bool tt_nomem(TtArgs *t) {
  t->rc = TP_ENOMEM;
  return false;
}

static void tt_ws(TtArgs *t) {
  t->i = skip_spaces(t->p, t->n, t->i);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// Reads `digits` hex digits at t->p[t->i]; false (t->i unchanged) when they are not there.
static bool tt_hex(TtArgs *t, int digits, uint32_t *out) {
  if (t->n - t->i < (size_t)digits) {
    return false;
  }
  uint32_t v = 0;
  for (int k = 0; k < digits; k++) {
    int d = hex_digit(t->p[t->i + (size_t)k]);
    if (d < 0) {
      return false;
    }
    v = v << 4 | (uint32_t)d;
  }
  t->i += (size_t)digits;
  *out = v;
  return true;
}

static int put_utf8(TpBuf *b, uint32_t cp) {
  char u[4];
  size_t k;
  if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    cp = 0xfffd;
  }
  if (cp < 0x80) {
    u[0] = (char)cp;
    k = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xc0 | cp >> 6);
    u[1] = (char)(0x80 | (cp & 0x3f));
    k = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xe0 | cp >> 12);
    u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    u[2] = (char)(0x80 | (cp & 0x3f));
    k = 3;
  } else {
    u[0] = (char)(0xf0 | cp >> 18);
    u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    u[3] = (char)(0x80 | (cp & 0x3f));
    k = 4;
  }
  return tp_buf_append(b, u, k);
}

// Reads the quoted string at t->p[t->i] (' or ") and appends it decoded to `out`. Escapes:
// Python's string literal escapes (\\ \' \" \n \t \r \a \b \f \v \0 \xHH \uHHHH \UHHHHHHHH;
// an unknown one stays as written, as Python keeps it) and JSON's (\/ and \uHHHH surrogate
// pairs).
static bool tt_string(TtArgs *t, TpBuf *out) {
  const char q = t->p[t->i];
  const size_t start = t->i;
  t->i++;
  while (t->i < t->n) {
    const char c = t->p[t->i];
    if (c == q) {
      t->i++;
      return true;
    }
    if (c != '\\') {
      size_t j = t->i;
      while (j < t->n && t->p[j] != q && t->p[j] != '\\') {
        j++;
      }
      if (tp_buf_append(out, t->p + t->i, j - t->i) != 0) {
        return tt_nomem(t);
      }
      t->i = j;
      continue;
    }
    const size_t esc = t->i;
    if (t->i + 1 >= t->n) {
      break;
    }
    const char e = t->p[t->i + 1];
    t->i += 2;
    uint32_t cp = 0;
    bool known = true;
    switch (e) {
      case 'n':
        cp = '\n';
        break;
      case 't':
        cp = '\t';
        break;
      case 'r':
        cp = '\r';
        break;
      case 'a':
        cp = 7;
        break;
      case 'b':
        cp = 8;
        break;
      case 'f':
        cp = 12;
        break;
      case 'v':
        cp = 11;
        break;
      case '0':
        cp = 0;
        break;
      case '\\':
      case '\'':
      case '"':
      case '/':
        cp = (unsigned char)e;
        break;
      case 'x':
      case 'u':
      case 'U':
        if (!tt_hex(t, e == 'x' ? 2 : e == 'u' ? 4 : 8, &cp)) {
          return tt_fail_at(t, esc, "bad escape in a string");
        }
        if (e == 'u' && cp >= 0xd800 && cp < 0xdc00 && t->n - t->i >= 6 && t->p[t->i] == '\\' &&
            t->p[t->i + 1] == 'u') {
          size_t back = t->i;
          uint32_t lo;
          t->i += 2;
          if (tt_hex(t, 4, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else {
            t->i = back;  // a lone high surrogate: U+FFFD, the next escape read on its own
          }
        }
        break;
      default:
        known = false;
        break;
    }
    int rc;
    if (!known || cp < 0x20 || cp == 0x7f) {
      rc = tp_buf_append(out, t->p + esc, t->i - esc);  // kept as written: one line, no NUL
    } else {
      rc = put_utf8(out, cp);
    }
    if (rc != 0) {
      return tt_nomem(t);
    }
  }
  t->i = t->n;
  return tt_fail_at(t, start, "unterminated string");
}

// Skips a quoted string without decoding it.
static bool tt_skip_string(TtArgs *t) {
  const char q = t->p[t->i];
  const size_t start = t->i;
  t->i++;
  while (t->i < t->n) {
    if (t->p[t->i] == '\\') {
      t->i += 2;
    } else if (t->p[t->i++] == q) {
      return true;
    }
  }
  t->i = t->n;
  return tt_fail_at(t, start, "unterminated string");
}

// Skips a value other than a dict or a string: a list, tuple or set, a bare token (number,
// True, None, ...) or an object's repr ("PosixPath('/x')", "<Enum.A: 'a'>"), up to the ',' or
// closing bracket that ends it. Brackets must balance and strings end.
static bool tt_skip_value(TtArgs *t, int depth) {
  char closers[TT_MAX_DEPTH];
  int sp = 0;
  const size_t start = t->i;
  while (t->i < t->n) {
    const char c = t->p[t->i];
    if (c == '\'' || c == '"') {
      if (!tt_skip_string(t)) {
        return false;
      }
      continue;
    }
    if (c == '[' || c == '(' || c == '{' || (c == '<' && t->i == start)) {
      if (depth + sp >= TT_MAX_DEPTH) {
        return tt_fail_at(t, t->i, "nested too deep");
      }
      closers[sp++] = c == '[' ? ']' : c == '(' ? ')' : c == '{' ? '}' : '>';
    } else if (c == '>' && sp > 0 && closers[sp - 1] == '>') {
      sp--;
    } else if (c == ']' || c == ')' || c == '}') {
      if (sp == 0) {
        break;
      }
      if (closers[sp - 1] != c) {
        return tt_fail_at(t, t->i, "mismatched bracket");
      }
      sp--;
    } else if (c == ',' && sp == 0) {
      break;
    } else if (c == ':' && sp == 0) {
      // A key inside a value: a separator is missing ("{'a': 1 'b': 2}"). Reprs with a colon
      // are bracketed: "<KernelPreference.AUTO: 'auto'>".
      return tt_fail_at(t, t->i, "',' or '}' was expected");
    }
    t->i++;
  }
  if (sp > 0) {
    return tt_fail_at(t, start, "unterminated list or tuple");
  }
  if (trim(t->p + start, t->i - start).n == 0) {
    return tt_fail_at(t, start, "a value was expected");
  }
  return true;
}

static bool tt_emit(TtArgs *t, const char *v, size_t vn) {
  int rc = ls_arg_add(t->s, TP_LOG_ARGS_MEGATRON, t->name.data, t->name.len, v, vn);
  if (rc != 0) {
    t->rc = rc;
    return false;
  }
  t->nargs++;
  return true;
}

static bool tt_dict(TtArgs *t, int depth);

static bool tt_value(TtArgs *t, int depth) {
  tt_ws(t);
  if (t->i >= t->n) {
    return tt_fail_at(t, t->i, "a value was expected");
  }
  const char c = t->p[t->i];
  if (c == '{') {
    return tt_dict(t, depth + 1);
  }
  if (c == '\'' || c == '"') {
    t->val.len = 0;
    return tt_string(t, &t->val) && tt_emit(t, t->val.data, t->val.len);
  }
  const size_t start = t->i;
  if (!tt_skip_value(t, depth)) {
    return false;
  }
  LsText raw = trim(t->p + start, t->i - start);
  if (TEQ(raw, "true")) {
    raw = (LsText){"True", 4};
  } else if (TEQ(raw, "false")) {
    raw = (LsText){"False", 5};
  } else if (TEQ(raw, "null")) {
    raw = (LsText){"None", 4};
  }
  return tt_emit(t, raw.p, raw.n);
}

// Reads the dict at t->p[t->i] ('{'), emitting its leaves under t->name.
static bool tt_dict(TtArgs *t, int depth) {
  if (depth > TT_MAX_DEPTH) {
    return tt_fail_at(t, t->i, "nested too deep");
  }
  const size_t base = t->name.len;
  const size_t open = t->i;
  t->i++;
  tt_ws(t);
  if (t->i < t->n && t->p[t->i] == '}') {
    t->i++;
    return base == 0 || tt_emit(t, "{}", 2);
  }
  for (;;) {
    tt_ws(t);
    if (t->i >= t->n) {
      return tt_fail_at(t, open, "unterminated dict");
    }
    t->name.len = base;
    if (base > 0 && tp_buf_append(&t->name, ".", 1) != 0) {
      return tt_nomem(t);
    }
    const char c = t->p[t->i];
    if (c == '\'' || c == '"') {
      if (!tt_string(t, &t->name)) {
        return false;
      }
    } else {
      // A bare key (an int or a name): kept as printed.
      size_t j = t->i;
      while (j < t->n &&
             (is_ident(t->p[j]) || t->p[j] == '.' || t->p[j] == '-' || t->p[j] == '+')) {
        j++;
      }
      if (j == t->i) {
        return tt_fail_at(t, t->i, "a key was expected");
      }
      if (tp_buf_append(&t->name, t->p + t->i, j - t->i) != 0) {
        return tt_nomem(t);
      }
      t->i = j;
    }
    tt_ws(t);
    if (t->i >= t->n) {
      return tt_fail_at(t, open, "unterminated dict");
    }
    if (t->p[t->i] != ':') {
      return tt_fail_at(t, t->i, "':' was expected after a key");
    }
    t->i++;
    if (!tt_value(t, depth)) {
      return false;
    }
    tt_ws(t);
    if (t->i >= t->n) {
      return tt_fail_at(t, open, "unterminated dict");
    }
    const char d = t->p[t->i++];
    if (d == '}') {
      break;
    }
    if (d != ',') {
      return tt_fail_at(t, t->i - 1, "',' or '}' was expected");
    }
    tt_ws(t);
    if (t->i < t->n && t->p[t->i] == '}') {
      t->i++;  // a trailing comma
      break;
    }
  }
  t->name.len = base;
  return true;
}

static uint64_t fnv1a(const char *p, size_t n) {
  uint64_t h = UINT64_C(14695981039346656037);
  for (size_t i = 0; i < n; i++) {
    h = (h ^ (unsigned char)p[i]) * UINT64_C(1099511628211);
  }
  return h;
}

// "Running with args: {...}": the job config flattened into the main argument dump. Returns 1
// when the line was such a dump (nothing else is read from it), 0 when not, or TP_ENOMEM. Another
// rank's identical copy is skipped; a different one (a new run in the same log) is added after
// the first, so its values win. What cannot be read gives a bad_args warning naming the line
// and column; the values read before the fault are kept.
static bool arg_pos(const TpLogScan *s, const char *name, double *v);

static int tt_args_line(TpLogScan *s, const LsLine *L) {
  const char *at = FIND(L->p, L->n, TT_ANCHOR);
  if (!at) {
    return 0;
  }
  const char *p = at + sizeof(TT_ANCHOR) - 1;
  LsText body = trim(p, (size_t)(L->p + L->n - p));
  if (body.n == 0 || body.p[0] != '{') {
    return 0;  // not a dict: some other program's "Running with args: Namespace(...)"
  }
  uint64_t h = fnv1a(body.p, body.n);
  if (s->tt_args_seen && s->tt_args_hash == h) {
    return 1;
  }
  s->tt_args_seen = true;
  s->tt_args_hash = h;
  TtArgs t = {.s = s, .p = body.p, .n = body.n};
  bool ok = tt_dict(&t, 1);
  tp_buf_free(&t.name);
  tp_buf_free(&t.val);
  if (t.rc != 0) {
    return t.rc;
  }
  // Without a mesh line, the config's degrees give the non-data-parallel degree that the step
  // times derived from tps divide by (parallelism.pipeline_parallel_degree, ...).
  if (s->tt_non_dp <= 0) {
    double pp = 1, tp = 1, cp = 1;
    bool any = arg_pos(s, "parallelism.pipeline_parallel_degree", &pp);
    any |= arg_pos(s, "parallelism.tensor_parallel_degree", &tp);
    any |= arg_pos(s, "parallelism.context_parallel_degree", &cp);
    if (any) {
      s->tt_non_dp = pp * tp * cp;
    }
  }
  if (ok) {
    return 1;
  }
  size_t col = (size_t)(body.p - L->full) + t.err_at + 1;
  char what[240];
  snprintf(
      what, sizeof what,
      "torchtitan job config (\"Running with args\") unreadable at line %llu, column %zu: %s%s "
      "(%zu values kept)",
      (unsigned long long)L->lineno, col, t.err,
      L->terminated ? "" : " (the log ends inside the line)", t.nargs);
  size_t from = t.err_at > 40 ? t.err_at - 40 : 0;
  size_t len = t.n - from < 120 ? t.n - from : 120;
  int rc = ls_diag(s, TP_LOG_D_BAD_ARGS, TP_LOG_SEV_WARNING, L->lineno, what, t.p + from, len);
  return rc ? rc : 1;
}

// --- Parameter counts, memory reports ---------------------------------------------------------

// Reads "(a, b[, c])" allowing NeMo's "(a ,b)": returns the number of integers read.
static int read_tuple(const char *p, size_t n, size_t *i, long *v) {
  size_t j = *i;
  if (j >= n || p[j] != '(') {
    return 0;
  }
  j++;
  int k = 0;
  while (k < 3) {
    j = skip_spaces(p, n, j);
    if (!read_uint(p, n, &j, &v[k])) {
      return 0;
    }
    k++;
    j = skip_spaces(p, n, j);
    if (j < n && p[j] == ',') {
      j++;
      continue;
    }
    if (j < n && p[j] == ')') {
      *i = j + 1;
      return k;
    }
    return 0;
  }
  return 0;
}

static bool number_after(const char *p, size_t n, const char *lit, double *out) {
  const char *q = find(p, n, lit);
  if (!q) {
    return false;
  }
  size_t i = (size_t)(q - p) + strlen(lit);
  i = skip_spaces(p, n, i);
  return tp_logscan_parse_number(p + i, n - i, out) > 0;
}

static int handle_parameters(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // Megatron get_model (megatron/training/training.py) and NeMo MegatronParallel
  // (nemo/lightning/megatron_parallel.py): "number of parameters on (tensor, pipeline) model
  // parallel rank (T, P): N"; core_v0.19 adds gtp_weight_remat; NeMo 2.3 prints "(T ,P)".
  const char *q = FIND(p, n, "model parallel rank ");
  if (q && FIND(p, n, "number of parameters on")) {
    size_t i = (size_t)(q - p) + 20;
    long t[3];
    int k = read_tuple(p, n, &i, t);
    if (k >= 2 && i < n && p[i] == ':') {
      i = skip_spaces(p, n, i + 1);
      if (tp_logscan_parse_number(p + i, n - i, &v) > 0) {
        return k == 3 ? ls_shard_add(s, t[0], t[1], t[2], v) : ls_shard_add(s, t[0], -1, t[1], v);
      }
    }
    return 0;
  }
  if (number_after(p, n, "number of trainable parameters:", &v)) {
    s->params.present = s->params.has_trainable = true;
    s->params.trainable = v;
    return 0;
  }
  // torchtitan (torchtitan/trainer.py): "Model <name> <flavor> size: N total parameters" and
  // "Total parameter count: dense N, sparse N, active N".
  q = FIND(p, n, " total parameters");
  if (q) {
    const char *sz = NULL;
    for (const char *c = q; c > p; c--) {
      if (c[-1] == ':' && c[0] == ' ') {
        sz = c + 1;
        break;
      }
    }
    if (sz && tp_logscan_parse_number(sz, (size_t)(q - sz), &v) == (size_t)(q - sz)) {
      s->params.present = s->params.has_total = true;
      s->params.total = v;
    }
    return 0;
  }
  if (FIND(p, n, "Total parameter count:")) {
    double d, sp, a;
    if (number_after(p, n, "dense ", &d) && number_after(p, n, "sparse ", &sp) &&
        number_after(p, n, "active ", &a)) {
      s->params.present = s->params.has_dense = true;
      s->params.dense = d;
      s->params.sparse = sp;
      s->params.active = a;
    }
    return 0;
  }
  // megatron/training/theoretical_memory_usage.py, report_theoretical_memory.
  if (number_after(p, n, "Total number of parameters in billions:", &v)) {
    s->params.present = s->params.has_billions = true;
    s->params.billions = v;
    return 0;
  }
  // Megatron (megatron/training/utils.py): "using torch.float16 for parameters ...".
  q = FIND(p, n, "using torch.");
  if (q && FIND(p, n, " for parameters")) {
    const char *d = q + 12;
    size_t rest = n - (size_t)(d - p);
    const char *prec = STARTS(d, rest, "float16 ")    ? "fp16"
                       : STARTS(d, rest, "bfloat16 ") ? "bf16"
                       : STARTS(d, rest, "float32 ")  ? "fp32"
                                                      : NULL;
    if (prec) {
      return ls_meta_str(s, TP_LOG_MS_PRECISION, prec, 4, false);
    }
    return 0;
  }
  // Primus log_dict_aligned title "<title>: (N parameters)" starts its dump.
  if (n > 14 && p[n - 1] == ')' && FIND(p, n, ": (") && memmem(p, n, " parameters)", 12) &&
      (size_t)((const char *)memmem(p, n, " parameters)", 12) - p) + 12 == n) {
    s->mode = LS_MODE_PRIMUS_ARGS;
    s->mode_lines = 0;
  }
  return 0;
}

// Megatron report_memory (megatron/training/utils.py, today utils/common_utils.py):
// "[Rank R] (after N iterations) memory (MB) | allocated: A | max allocated: B | reserved: C |
// max reserved: D [| total device memory used: E]"; MiB printed as "MB".
static int handle_memory_report(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  const char *mb = FIND(p, n, "memory (MB)");
  if (!mb) {
    return 0;
  }
  TpLogMemReport m = {0};
  m.line = L->lineno;
  const char *r = FIND(p, (size_t)(mb - p), "[Rank ");
  if (r) {
    size_t i = (size_t)(r - p) + 6;
    if (read_uint(p, n, &i, &m.rank)) {
      m.present |= TP_LOG_MEM_RANK;
    }
  }
  const char *a = FIND(p, (size_t)(mb - p), "after ");
  if (a) {
    size_t i = (size_t)(a - p) + 6;
    if (read_uint(p, n, &i, &m.after_iterations)) {
      m.present |= TP_LOG_MEM_AFTER;
    }
  }
  static const struct {
    const char *label;
    uint32_t bit;
    size_t off;
  } cols[] = {
      {"allocated", TP_LOG_MEM_ALLOCATED, offsetof(TpLogMemReport, allocated_gib)},
      {"max allocated", TP_LOG_MEM_MAX_ALLOCATED, offsetof(TpLogMemReport, max_allocated_gib)},
      {"reserved", TP_LOG_MEM_RESERVED, offsetof(TpLogMemReport, reserved_gib)},
      {"max reserved", TP_LOG_MEM_MAX_RESERVED, offsetof(TpLogMemReport, max_reserved_gib)},
      {"total device memory used", TP_LOG_MEM_DEVICE_USED,
       offsetof(TpLogMemReport, device_used_gib)},
  };
  size_t i = (size_t)(mb - p) + 11;
  while (i < n) {
    const char *bar = memchr(p + i, '|', n - i);
    size_t e = bar ? (size_t)(bar - p) : n;
    LsText seg = trim(p + i, e - i);
    i = e + 1;
    const char *colon = memchr(seg.p, ':', seg.n);
    if (!colon) {
      continue;
    }
    LsText label = trim(seg.p, (size_t)(colon - seg.p));
    LsText val = trim(colon + 1, seg.n - (size_t)(colon - seg.p) - 1);
    double v;
    if (!value_num(val, &v)) {
      continue;
    }
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
      if (text_eq(label, cols[c].label)) {
        *(double *)((char *)&m + cols[c].off) = v / 1024.0;
        m.present |= cols[c].bit;
      }
    }
  }
  if (!(m.present & (TP_LOG_MEM_ALLOCATED | TP_LOG_MEM_RESERVED))) {
    return 0;
  }
  return ls_mem_add(s, &m);
}

static int handle_theoretical(TpLogScan *s, const LsLine *L) {
  double w, a, t;
  if (number_after(L->p, L->n, "weight and optimizer=", &w) &&
      number_after(L->p, L->n, "activation=", &a) && number_after(L->p, L->n, "total=", &t)) {
    s->theo.present = true;
    s->theo.weight_and_optimizer_mb = w;
    s->theo.activation_mb = a;
    s->theo.total_mb = t;
    s->theo.line = L->lineno;
  }
  return 0;
}

// --- Run facts --------------------------------------------------------------------------------

static bool kv_num(const char *p, size_t n, const char *key, double *out) {
  // "key=number" with key at a word start (dataclass reprs, mesh lines).
  size_t from = 0, kl = strlen(key);
  while (from < n) {
    const char *q = memmem(p + from, n - from, key, kl);
    if (!q) {
      return false;
    }
    from = (size_t)(q - p) + kl;
    if (q > p && (is_ident(q[-1]) || q[-1] == '.')) {
      continue;
    }
    return tp_logscan_parse_number(q + kl, n - from, out) > 0;
  }
  return false;
}

// torchtitan before the "with parallelism:" form (parallel_dims.py, build_mesh): "Building 2-D
// device mesh with ['pp', 'dp_shard'], [2, 4]" (names then sizes; older names dp and sp).
// Fills the degrees (every data-parallel dimension multiplied into *dp) and returns true.
static bool mesh_dims(const char *p, size_t n, double *pp, double *dp, double *cp, double *tp,
                      double *ep) {
  const char *q = FIND(p, n, "device mesh with [");
  if (!q) {
    return false;
  }
  size_t i = (size_t)(q - p) + 18;
  const char *ce = memchr(p + i, ']', n - i);
  if (!ce) {
    return false;
  }
  size_t ne = (size_t)(ce - p);
  const char *vo = memchr(ce, '[', n - ne);
  if (!vo) {
    return false;
  }
  size_t j = (size_t)(vo - p) + 1;
  *pp = *dp = *cp = *tp = *ep = 1;
  int dims = 0;
  while (i < ne && dims < 8) {
    while (i < ne && (p[i] == '\'' || p[i] == '"' || p[i] == ',' || is_space(p[i]))) {
      i++;
    }
    size_t b = i;
    while (i < ne && p[i] != '\'' && p[i] != '"' && p[i] != ',') {
      i++;
    }
    LsText name = {p + b, i - b};
    if (name.n == 0) {
      break;
    }
    j = skip_spaces(p, n, j);
    long v;
    if (!read_uint(p, n, &j, &v)) {
      return false;
    }
    if (j < n && p[j] == ',') {
      j++;
    }
    dims++;
    if (TEQ(name, "pp")) {
      *pp = (double)v;
    } else if (TEQ(name, "tp") || TEQ(name, "sp")) {
      *tp *= (double)v;
    } else if (TEQ(name, "cp")) {
      *cp = (double)v;
    } else if (TEQ(name, "ep")) {
      *ep = (double)v;
    } else if (STARTS(name.p, name.n, "dp")) {
      *dp *= (double)v;
    }
  }
  return dims > 0;
}

static int handle_fact(TpLogScan *s, const LsLine *L, int fact) {
  const char *p = L->p;
  size_t n = L->n;
  double v, w;
  switch (fact) {
    case F_MESH: {
      // torchtitan/distributed/parallel_dims.py via trainer: "Building device mesh with
      // parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=1", or the older
      // "Building 2-D device mesh with ['pp', 'dp_shard'], [2, 4]".
      double pp = 1, dpr = 1, dps = 1, cp = 1, tp = 1, ep = 1;
      bool any = mesh_dims(p, n, &pp, &dpr, &cp, &tp, &ep);
      any |= kv_num(p, n, "pp=", &pp);
      any |= kv_num(p, n, "dp_replicate=", &dpr);
      any |= kv_num(p, n, "dp_shard=", &dps);
      any |= kv_num(p, n, "cp=", &cp);
      any |= kv_num(p, n, "tp=", &tp);
      any |= kv_num(p, n, "ep=", &ep);
      if (!any) {
        return 0;
      }
      if (dps < 0) {
        dps = 1;  // -1: all remaining ranks; the world size is unknown here
      }
      ls_meta_set(s, TP_LOG_M_PP, pp, true);
      ls_meta_set(s, TP_LOG_M_CP, cp, true);
      ls_meta_set(s, TP_LOG_M_TP, tp, true);
      ls_meta_set(s, TP_LOG_M_EP, ep, true);
      ls_meta_set(s, TP_LOG_M_DP, dpr * dps, true);
      ls_meta_set(s, TP_LOG_M_WORLD_SIZE, pp * dpr * dps * cp * tp, true);
      s->tt_non_dp = pp * cp * tp;
      return 0;
    }
    case F_TT_INIT:
    case F_TT_START: {
      // torchtitan/trainer.py: "Trainer is initialized with local batch size 160, global batch
      // size 1280, gradient accumulation steps 1, sequence length 128, total steps 10 (warmup
      // 600)", the older "Training starts at step 1, with local batch size 8, ...", and the
      // newest "... with N tokens per DP rank, M tokens per train step, ... maximum context
      // length L, total steps T".
      if (number_after(p, n, "local batch size", &v)) {
        s->tt_local_bs = v;
        ls_meta_set(s, TP_LOG_M_LOCAL_BATCH_SIZE, v, true);
      }
      if (number_after(p, n, "global batch size", &v)) {
        s->tt_gbs = v;
        ls_meta_set(s, TP_LOG_M_GLOBAL_BATCH_SIZE, v, true);
      }
      if (number_after(p, n, "gradient accumulation steps", &v)) {
        s->tt_grad_accum = v;
        ls_meta_set(s, TP_LOG_M_GRAD_ACCUM, v, true);
      }
      if (number_after(p, n, "sequence length", &v) ||
          number_after(p, n, "maximum context length", &v)) {
        s->tt_seq_len = v;
        ls_meta_set(s, TP_LOG_M_SEQ_LEN, v, true);
      }
      if (number_after(p, n, "total steps", &v)) {
        ls_meta_set(s, TP_LOG_M_TRAIN_ITERS, v, true);
      }
      const char *q = FIND(p, n, " tokens per DP rank");
      if (q) {
        size_t b = (size_t)(q - p);
        while (b > 0 && (is_digit(p[b - 1]) || p[b - 1] == ',')) {
          b--;
        }
        if (tp_logscan_parse_number(p + b, (size_t)(q - p) - b, &v) > 0) {
          s->tt_tokens_per_rank = v;
        }
      }
      q = FIND(p, n, " tokens per train step");
      if (q) {
        size_t b = (size_t)(q - p);
        while (b > 0 && (is_digit(p[b - 1]) || p[b - 1] == ',')) {
          b--;
        }
        if (tp_logscan_parse_number(p + b, (size_t)(q - p) - b, &v) > 0) {
          ls_meta_set(s, TP_LOG_M_TOKENS_PER_STEP, v, true);
        }
      }
      return 0;
    }
    case F_CAPACITY: {
      // torchtitan: "CUDA capacity: NVIDIA B200 with 178.35GiB memory".
      const char *q = FIND(p, n, " capacity: ");
      const char *w2 = q ? FIND(q, n - (size_t)(q - p), " with ") : NULL;
      if (q && w2 && FIND(w2, n - (size_t)(w2 - p), "memory")) {
        const char *name = q + 11;
        return ls_meta_str(s, TP_LOG_MS_DEVICE_NAME, name, (size_t)(w2 - name), false);
      }
      return 0;
    }
    case F_PEAK_FLOPS:
      if (number_after(p, n, "Peak FLOPS used for computing MFU:", &v)) {
        ls_meta_set(s, TP_LOG_M_PEAK_FLOPS, v, true);
      }
      return 0;
    case F_TT_VERSION: {
      const char *q = FIND(p, n, "torchtitan version: ");
      if (q) {
        const char *vs = q + 20;
        size_t k = 0;
        while (vs + k < p + n && !is_space(vs[k])) {
          k++;
        }
        return ls_meta_str(s, TP_LOG_MS_FRAMEWORK_VERSION, vs, k, false);
      }
      return 0;
    }
    case F_BACKEND_VERSION: {
      // Primus patch runner: "[Patch] Executing patches: backend=megatron, phase=...,
      // backend_version=0.16.0rc0, primus_version=None, ...".
      static const struct {
        const char *key;
        TpLogMetaStr k;
      } keys[] = {{"backend_version=", TP_LOG_MS_BACKEND_VERSION},
                  {"primus_version=", TP_LOG_MS_FRAMEWORK_VERSION},
                  {"backend=", TP_LOG_MS_BACKEND}};
      s->primus_seen = true;
      for (size_t k = 0; k < 3; k++) {
        const char *q = find(p, n, keys[k].key);
        while (q && q > p && is_ident(q[-1])) {
          q = find(q + 1, n - (size_t)(q + 1 - p), keys[k].key);
        }
        if (!q) {
          continue;
        }
        const char *vs = q + strlen(keys[k].key);
        size_t len = 0;
        while (vs + len < p + n && vs[len] != ',' && !is_space(vs[len])) {
          len++;
        }
        if (len > 0 && !(len == 4 && memcmp(vs, "None", 4) == 0)) {
          int rc = ls_meta_str(s, keys[k].k, vs, len, false);
          if (rc) {
            return rc;
          }
        }
      }
      return 0;
    }
    case F_TRAINING_DONE:
    case F_TRAINING_COMPLETED:
    case F_EXIT_AT_ITERATION:
      s->meta.completed = true;
      return 0;
    case F_FIT_STOPPED:
      // Lightning: "`Trainer.fit` stopped: `max_steps=20` reached."
      s->meta.completed = true;
      if (kv_num(p, n, "max_steps=", &v)) {
        ls_meta_set(s, TP_LOG_M_TRAIN_ITERS, v, false);
      }
      return 0;
    case F_MAX_STEPS:
      // NeMo megatron_strategy: "Copying Trainer's 'max_steps' (20) to LR scheduler's ...".
      if (number_after(p, n, "'max_steps' (", &v)) {
        ls_meta_set(s, TP_LOG_M_TRAIN_ITERS, v, false);
      }
      return 0;
    case F_TORCHRUN_FINISHED:
    case F_TORCHRUN_FAILED:
      // Primus runner (runner/primus-cli-direct.sh): "torchrun finished successfully (code 0)".
      // It names the format even without an iteration line (Primus' MLPerf logs).
      if (number_after(p, n, "(code ", &v)) {
        s->primus_seen = true;
        ls_meta_set(s, TP_LOG_M_EXIT_CODE, v, true);
      } else if (number_after(p, n, "code ", &v)) {
        ls_meta_set(s, TP_LOG_M_EXIT_CODE, v, true);
      }
      return 0;
    case F_PRIMUS_RUNNER: {
      // Primus runner (runner/lib/common.sh): "[NODE-0(host)] [INFO] ...", after the launcher's
      // "[date] ": a Primus run even when no iteration line follows.
      size_t i = 0;
      long node;
      if (STARTS(p, n, "[NODE-")) {
        i = 6;
        if (read_uint(p, n, &i, &node) && i < n && p[i] == '(' &&
            FIND(p + i, n - i, ")] [INFO] ")) {
          s->primus_seen = true;
        }
      }
      return 0;
    }
    case F_JOB_FINISHED:
      // NeMo-Run: "Job <id> finished: SUCCEEDED".
      if (FIND(p, n, " finished: SUCCEEDED")) {
        ls_meta_set(s, TP_LOG_M_EXIT_CODE, 0, true);
      }
      return 0;
    case F_WORKER_OK:
      if (FIND(p, n, "worker group successfully finished")) {
        ls_meta_set(s, TP_LOG_M_EXIT_CODE, 0, true);
      }
      return 0;
    case F_MICROBATCHES:
      // Megatron num_microbatches_calculator: "setting number of micro(-)batches to constant N".
      if (number_after(p, n, "to constant", &v)) {
        ls_meta_set(s, TP_LOG_M_GRAD_ACCUM, v, false);
      }
      return 0;
    case F_MP_SIZE:
      // Megatron initialize: "> initialized tensor model parallel with size 8".
      if (number_after(p, n, "with size", &v)) {
        if (FIND(p, n, "tensor model parallel")) {
          ls_meta_set(s, TP_LOG_M_TP, v, false);
        } else if (FIND(p, n, "pipeline model parallel")) {
          ls_meta_set(s, TP_LOG_M_PP, v, false);
        }
      }
      return 0;
    case F_SEEDS:
      if (number_after(p, n, "random seeds to", &v)) {
        ls_meta_set(s, TP_LOG_M_SEED, v, false);
      }
      return 0;
    case F_GLOBAL_RANK:
      // Lightning: "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8".
      if (FIND(p, n, "MEMBER: ")) {
        const char *q = FIND(p, n, "MEMBER: ");
        size_t i = (size_t)(q - p) + 8;
        long a, b;
        if (read_uint(p, n, &i, &a) && i < n && p[i] == '/') {
          i++;
          if (read_uint(p, n, &i, &b)) {
            ls_meta_set(s, TP_LOG_M_WORLD_SIZE, (double)b, false);
          }
        }
      }
      return 0;
    case F_PROCESSES:
      // Lightning: "All distributed processes registered. Starting with 8 processes".
      if (number_after(p, n, "Starting with", &v)) {
        ls_meta_set(s, TP_LOG_M_WORLD_SIZE, v, false);
      }
      return 0;
    case F_OPTIMIZER_CONFIG: {
      // megatron/core/optimizer/optimizer_config.py repr, logged by NeMo and Megatron:
      // "OptimizerConfig(optimizer='adam', lr=0.0003, ..., fp16=False, bf16=True, ...)".
      if (kv_num(p, n, "lr=", &v)) {
        ls_meta_set(s, TP_LOG_M_LR, v, false);
      }
      const char *prec = FIND(p, n, "bf16=True") ? "bf16" : FIND(p, n, "fp16=True") ? "fp16" : NULL;
      if (prec) {
        return ls_meta_str(s, TP_LOG_MS_PRECISION, prec, 4, false);
      }
      return 0;
    }
    case F_GPU_MODEL: {
      const char *q = FIND(p, n, "Detected GPU model: ");
      if (q) {
        const char *vs = q + 20;
        LsText t = trim(vs, n - (size_t)(vs - p));
        return ls_meta_str(s, TP_LOG_MS_DEVICE_NAME, t.p, t.n, false);
      }
      return 0;
    }
    case F_RESTORING:
      s->epoch++;
      return 0;
    case F_EXCEPTION: {
      // "<module.>Name(Error|Exception): message" as the last line of a traceback: it names the
      // crash better than "Traceback (most recent call last):".
      size_t i = 0;
      while (i < n && (is_ident(p[i]) || p[i] == '.')) {
        i++;
      }
      if (i == 0 || i >= n || p[i] != ':' || !s->crash_from_traceback) {
        return 0;
      }
      s->crash_from_traceback = false;
      LsDiagAcc *d = &s->diags[TP_LOG_D_CRASH];
      if (i >= 15 && memcmp(p + i - 15, "SignalException", 15) == 0 && d->count == 1) {
        // torchelastic raises SignalException when the agent is stopped (SIGTERM from a
        // scheduler, Ctrl-C): a stopped run, not a crash; the signal signature reports it.
        free(d->msg);
        memset(d, 0, sizeof *d);
        s->diag_dirty = true;
        return 0;
      }
      return ls_diag_message(s, TP_LOG_D_CRASH, "traceback", p, n);
    }
    default:
      break;
  }
  (void)w;
  return 0;
}

// --- Failure signatures -----------------------------------------------------------------------

// torchelastic's exit code of a worker killed by a stopping signal (-1, -2, -15).
static bool signal_exit(double v) {
  return v == -1 || v == -2 || v == -15;
}

// The signal a stop line names ("Received 15 death signal", "got signal: 15", "Received
// SIGTERM", "exitcode: -15"), as the diagnostic's text; tp.log.outcome reads the name.
static const char *signal_what(const char *p, size_t n) {
  double v = 0;
  const char *q = FIND(p, n, " death signal");
  if (q) {
    size_t b = (size_t)(q - p);
    while (b > 0 && is_digit(p[b - 1])) {
      b--;
    }
    tp_logscan_parse_number(p + b, (size_t)(q - p) - b, &v);
  } else if (!number_after(p, n, "got signal:", &v) && !number_after(p, n, "exitcode  : ", &v) &&
             !number_after(p, n, "(exitcode: ", &v)) {
    v = FIND(p, n, "SIGTERM") ? 15 : FIND(p, n, "SIGINT") ? 2 : FIND(p, n, "SIGHUP") ? 1 : 0;
  }
  v = v < 0 ? -v : v;
  return v == 15  ? "stopped by SIGTERM"
         : v == 2 ? "stopped by SIGINT"
         : v == 1 ? "stopped by SIGHUP"
                  : "stopped by a signal";
}

static bool sig_check(const Sig *g, const char *p, size_t n, const char *at) {
  size_t i = (size_t)(at - p) + strlen(g->text);
  double v;
  switch (g->check) {
    case CK_EXITCODE:
    case CK_EXITCODE_NONZERO:
      // -N: killed by signal N; SIGHUP, SIGINT and SIGTERM stop a run, they are no crash.
      i = skip_spaces(p, n, i);
      return tp_logscan_parse_number(p + i, n - i, &v) > 0 && v != 0 && !signal_exit(v);
    case CK_RESULT_NAN:
      return STARTS(p + i, n - i, "nan") || STARTS(p + i, n - i, "inf") ||
             STARTS(p + i, n - i, "-inf");
    case CK_RESTART_COUNT:
      return tp_logscan_parse_number(p + i, n - i, &v) > 0 && v > 0;
    case CK_EXIT_SIGTERM:
      return FIND(p + i, n - i, "SIGTERM") != NULL;
    case CK_EXIT_MINUTES:
      return FIND(p + i, n - i, "minutes") != NULL;
    case CK_CANCELLED:
      return FIND(p + i, n - i, " DUE TO ") == NULL;
    default:
      return true;
  }
}

static int handle_signatures(TpLogScan *s, const LsLine *L, const uint64_t sigmask[2]) {
  const char *p = L->p;
  size_t n = L->n;
  bool kinds[TP_LOG_D_COUNT] = {false};
  size_t first[TP_LOG_D_COUNT];
  for (size_t i = 0; i < NSIGS; i++) {
    if (!(sigmask[i / 64] >> (i % 64) & 1)) {
      continue;
    }
    const char *at = find(p, n, sigs[i].text);
    if (!at || !sig_check(&sigs[i], p, n, at)) {
      continue;
    }
    TpLogDiagKind k = sigs[i].kind;
    if (!kinds[k] || sigs[i].sev > sigs[first[k]].sev) {
      first[k] = i;
    }
    kinds[k] = true;
  }
  // One line, one cause: "CUDA error: out of memory" is an OOM, a watchdog's
  // DistBackendError a timeout.
  if (kinds[TP_LOG_D_OOM]) {
    kinds[TP_LOG_D_GPU_FAULT] = kinds[TP_LOG_D_NCCL_ERROR] = false;
  }
  if (kinds[TP_LOG_D_NCCL_TIMEOUT]) {
    kinds[TP_LOG_D_NCCL_ERROR] = false;
  }
  for (int k = 0; k < TP_LOG_D_COUNT; k++) {
    if (!kinds[k]) {
      continue;
    }
    const Sig *g = &sigs[first[k]];
    bool first_crash = k == TP_LOG_D_CRASH && !s->diags[k].seen;
    const char *what = k == TP_LOG_D_SIGNAL ? signal_what(p, n) : g->what;
    int rc = ls_diag(s, (TpLogDiagKind)k, g->sev, L->lineno, what, p, n);
    if (rc) {
      return rc;
    }
    if (first_crash) {
      s->crash_from_traceback = strcmp(g->what, "traceback") == 0;
    }
    if (k == TP_LOG_D_RESTART || (k == TP_LOG_D_CRASH && g->check == CK_NONE)) {
      s->epoch++;  // records after this may repeat iteration numbers legitimately
    }
  }
  // Exit statuses printed by torchelastic ("exitcode  : 1", "failed (exitcode: 1)").
  double v;
  if (number_after(p, n, "exitcode  : ", &v) || number_after(p, n, "(exitcode: ", &v)) {
    ls_meta_set(s, TP_LOG_M_EXIT_CODE, v, true);
    if (signal_exit(v) && !kinds[TP_LOG_D_SIGNAL]) {
      return ls_diag(s, TP_LOG_D_SIGNAL, TP_LOG_SEV_WARNING, L->lineno, signal_what(p, n), p, n);
    }
  }
  return 0;
}

// --- Dispatch ---------------------------------------------------------------------------------

typedef struct Found {
  uint32_t ids;      // bit per LsAnchorId
  uint64_t facts;    // bit per F_*
  uint64_t sigs[2];  // bit per signature
} Found;

static void found_one(void *ud, const LsAnchor *a, size_t start) {
  Found *f = ud;
  (void)start;
  f->ids |= 1u << a->id;
  if (a->id == LA_FACT) {
    f->facts |= UINT64_C(1) << a->sub;
  } else if (a->id == LA_SIGNATURE) {
    f->sigs[a->sub / 64] |= UINT64_C(1) << (a->sub % 64);
  }
}

static void collect_anchors(const TpLogScan *s, const char *p, size_t n, Found *f) {
  memset(f, 0, sizeof *f);
  ls_each_anchor(s, p, n, found_one, f);
}

static int custom_line(TpLogScan *s, const LsLine *L) {
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  int r = s->opts.line(s->opts.hook_ud, s, s->custom_id, L->p, L->n, L->lineno);
  if (r < 0) {
    s->pend.active = false;
    return s->failed ? s->failed : TP_EINVAL;
  }
  if (r == 0) {
    s->pend.active = false;
    return 0;
  }
  rec_common(s, L);
  s->pend.cut = !L->terminated;
  rc = tp_logscan_rec_commit(s);
  return rc ? rc : 1;
}

int ls_process_segment(TpLogScan *s, const char *seg, size_t n, uint64_t lineno, bool terminated) {
  LsLine L;
  memset(&L, 0, sizeof L);
  int rc = strip_escapes(s, seg, n, &L.has_nul);
  if (rc) {
    return rc;
  }
  LsText full = trim(s->norm.data, s->norm.len);
  if (full.n == 0) {
    return 0;
  }
  L.full = full.p;
  L.full_n = full.n;
  L.lineno = lineno;
  L.terminated = terminated;
  if (L.has_nul) {
    rc = ls_diag(s, TP_LOG_D_BINARY, TP_LOG_SEV_WARNING, lineno, "NUL bytes in the log", NULL, 0);
    if (rc) {
      return rc;
    }
  }
  strip_prefixes(&L);
  if (L.has_primus) {
    s->primus_seen = true;
    ls_meta_set(s, TP_LOG_M_WORLD_SIZE, (double)L.primus_world, false);
  }
  if (L.n == 0) {
    return 0;
  }
  LsText t = {L.p, L.n};
  Found f;
  collect_anchors(s, L.p, L.n, &f);
  if (f.facts >> F_TT_ARGS & 1) {
    // A job-config line ends any dump in progress; the strings in it are not signatures.
    rc = tt_args_line(s, &L);
    if (rc != 0) {
      s->mode = LS_MODE_NORMAL;
      return rc < 0 ? rc : 0;
    }
  }
  const uint32_t record_ids =
      (1u << LA_ITERATION) | (1u << LA_NEMO_EPOCH) | (1u << LA_NEMO_STEP) | (1u << LA_TT_STEP);
  if (s->mode == LS_MODE_ARGS) {
    LsText title;
    if (rule_line(t, &title)) {
      s->mode = LS_MODE_NORMAL;
      return 0;
    }
    // A line with the anchor of a record or failure is an argument only in the exact layout
    // (`  iteration ........ 0` is one); otherwise the dump ended without its footer (a cut
    // log, a crash) and the line is read as usual.
    bool anchored = (f.ids & (record_ids | (1u << LA_SIGNATURE))) != 0;
    rc = args_line(s, &L, anchored);
    if (rc != 0) {
      return rc < 0 ? rc : 0;
    }
    if (++s->mode_lines > 100000 || anchored) {
      s->mode = LS_MODE_NORMAL;
    }
  } else if (s->mode == LS_MODE_PRIMUS_ARGS) {
    rc = primus_args_line(s, &L);
    if (rc != 0) {
      return rc < 0 ? rc : 0;
    }
    s->mode = LS_MODE_NORMAL;
  }
  bool custom = s->family == LS_FAM_CUSTOM && s->opts.line;
  int rec = 0;
  if (!L.terminated && !(f.ids & record_ids)) {
    // The last line of a cut log may have lost its anchor with the cut (torchtitan's
    // "  memory: " after a cut grad_norm): the record parsers check the line's shape themselves.
    f.ids |= (1u << LA_NEMO_STEP) | (1u << LA_ITERATION) | (1u << LA_TT_STEP);
  }
  if (custom) {
    rec = custom_line(s, &L);
  } else if (f.ids & record_ids) {
    if (f.ids & (1u << LA_NEMO_EPOCH)) {
      rec = parse_nemo_printer(s, &L);
    } else if (f.ids & (1u << LA_NEMO_STEP)) {
      rec = parse_nemo_bar(s, &L);
    }
    if (rec == 0 && (f.ids & (1u << LA_ITERATION)) && !(f.ids & (1u << LA_NEMO_EPOCH))) {
      rec = parse_megatron(s, &L);
    }
    if (rec == 0 && (f.ids & (1u << LA_TT_STEP))) {
      rec = parse_torchtitan(s, &L);
    }
  }
  if (rec < 0) {
    return rec;
  }
  if (rec == 0 && !custom && s->family == LS_FAM_NONE && s->opts.detect &&
      s->opts.format == TP_LOG_FORMAT_NONE) {
    int id = s->opts.detect(s->opts.hook_ud, L.p, L.n);
    if (id < 0) {
      return s->failed ? s->failed : TP_EINVAL;
    }
    if (id > 0) {
      s->family = LS_FAM_CUSTOM;
      s->custom_id = id;
      if (s->opts.line) {
        rec = custom_line(s, &L);
        if (rec < 0) {
          return rec;
        }
      }
    }
  }
  if (rec > 0) {
    return 0;  // record lines carry nothing else of interest
  }
  if (f.ids & (1u << LA_ARGS_RULE)) {
    LsText title;
    if (rule_line(t, &title) && !STARTS(title.p, title.n, "end of")) {
      if (s->args[TP_LOG_ARGS_MEGATRON].n > 0) {
        s->epoch++;  // a second dump: a new run appended to the same log
      }
      s->mode = LS_MODE_ARGS;
      s->mode_lines = 0;
      return 0;
    }
  }
  if ((f.ids & (1u << LA_PARAMETERS)) && (rc = handle_parameters(s, &L)) != 0) {
    return rc;
  }
  if ((f.ids & (1u << LA_MEMORY_REPORT)) && (rc = handle_memory_report(s, &L)) != 0) {
    return rc;
  }
  if ((f.ids & (1u << LA_THEORETICAL)) && (rc = handle_theoretical(s, &L)) != 0) {
    return rc;
  }
  if (f.ids & (1u << LA_FACT)) {
    for (int k = 0; k < 64; k++) {
      if ((f.facts >> k & 1) && (rc = handle_fact(s, &L, k)) != 0) {
        return rc;
      }
    }
  }
  if (f.ids & (1u << LA_SIGNATURE)) {
    rc = handle_signatures(s, &L, f.sigs);
  }
  return rc;
}

// --- End of stream ----------------------------------------------------------------------------

static bool arg_get(const TpLogScan *s, TpLogArgDump which, const char *name, LsText *out) {
  size_t nl = strlen(name);
  bool found = false;
  for (size_t i = 0; i < s->args[which].n; i++) {
    const LsArgEnt *e = &s->args[which].ents[i];
    if (e->name_len == nl && memcmp(s->args[which].pool.data + e->name_ofs, name, nl) == 0) {
      *out = (LsText){s->args[which].pool.data + e->val_ofs, e->val_len};
      found = true;  // the last occurrence wins
    }
  }
  return found;
}

static bool arg_num(const TpLogScan *s, const char *name, double *v) {
  LsText t;
  for (int w = 0; w < 2; w++) {
    if (arg_get(s, (TpLogArgDump)w, name, &t) && value_only_num(t, v)) {
      return true;
    }
  }
  return false;
}

static bool arg_true(const TpLogScan *s, const char *name) {
  LsText t;
  for (int w = 0; w < 2; w++) {
    if (arg_get(s, (TpLogArgDump)w, name, &t)) {
      return TEQ(t, "True");
    }
  }
  return false;
}

// Run facts from dotted dumps: the NeMo driver's recipe paths (stdlib/tp/frameworks/nemo.lua,
// _overrides) and torchtitan's job config (torchtitan/config/job_config.py: Training,
// Parallelism, Optimizer). Only positive values count: torchtitan prints -1 for "derived"
// (training.global_batch_size, parallelism.data_parallel_shard_degree).
static const struct {
  const char *arg;
  TpLogMetaKey k;
} dotted_meta[] = {
    {"data.global_batch_size", TP_LOG_M_GLOBAL_BATCH_SIZE},
    {"data.seq_length", TP_LOG_M_SEQ_LEN},
    {"model.config.seq_length", TP_LOG_M_SEQ_LEN},
    {"data.micro_batch_size", TP_LOG_M_MICRO_BATCH_SIZE},
    {"trainer.max_steps", TP_LOG_M_TRAIN_ITERS},
    {"trainer.strategy.tensor_model_parallel_size", TP_LOG_M_TP},
    {"trainer.strategy.pipeline_model_parallel_size", TP_LOG_M_PP},
    {"trainer.strategy.context_parallel_size", TP_LOG_M_CP},
    {"optim.config.lr", TP_LOG_M_LR},
    {"training.global_batch_size", TP_LOG_M_GLOBAL_BATCH_SIZE},
    {"training.seq_len", TP_LOG_M_SEQ_LEN},
    {"training.local_batch_size", TP_LOG_M_LOCAL_BATCH_SIZE},
    {"training.steps", TP_LOG_M_TRAIN_ITERS},
    {"parallelism.tensor_parallel_degree", TP_LOG_M_TP},
    {"parallelism.pipeline_parallel_degree", TP_LOG_M_PP},
    {"parallelism.context_parallel_degree", TP_LOG_M_CP},
    {"parallelism.expert_parallel_degree", TP_LOG_M_EP},
    {"optimizer.lr", TP_LOG_M_LR},
    {"training.seed", TP_LOG_M_SEED},
};

static bool arg_pos(const TpLogScan *s, const char *name, double *v) {
  return arg_num(s, name, v) && *v > 0;
}

static const char *dotted_precision(const TpLogScan *s) {
  LsText t;
  // NeMo: recipes/precision/mixed_precision.py preset names (nemo.lua PRECISION).
  if (arg_get(s, TP_LOG_ARGS_MEGATRON, "trainer.plugins", &t)) {
    return FIND(t.p, t.n, "fp8")  ? "fp8"
           : TEQ(t, "fp16_mixed") ? "fp16"
           : TEQ(t, "bf16_mixed") ? "bf16"
                                  : NULL;
  }
  // torchtitan: model.converters ["float8"] / ["mx"], else training.mixed_precision_param.
  if (arg_get(s, TP_LOG_ARGS_MEGATRON, "model.converters", &t) &&
      (FIND(t.p, t.n, "float8") || FIND(t.p, t.n, "'mx'") || FIND(t.p, t.n, "\"mx\""))) {
    return "fp8";
  }
  if (arg_get(s, TP_LOG_ARGS_MEGATRON, "training.mixed_precision_param", &t)) {
    return TEQ(t, "bfloat16") ? "bf16" : TEQ(t, "float32") ? "fp32" : NULL;
  }
  return NULL;
}

static int meta_from_args(TpLogScan *s) {
  static const struct {
    const char *arg;
    TpLogMetaKey k;
  } map[] = {
      {"global_batch_size", TP_LOG_M_GLOBAL_BATCH_SIZE},
      {"seq_length", TP_LOG_M_SEQ_LEN},
      {"world_size", TP_LOG_M_WORLD_SIZE},
      {"train_iters", TP_LOG_M_TRAIN_ITERS},
      {"micro_batch_size", TP_LOG_M_MICRO_BATCH_SIZE},
      {"tensor_model_parallel_size", TP_LOG_M_TP},
      {"pipeline_model_parallel_size", TP_LOG_M_PP},
      {"context_parallel_size", TP_LOG_M_CP},
      {"data_parallel_size", TP_LOG_M_DP},
      {"expert_model_parallel_size", TP_LOG_M_EP},
      {"lr", TP_LOG_M_LR},
      {"seed", TP_LOG_M_SEED},
  };
  double v;
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    if (arg_num(s, map[i].arg, &v)) {
      ls_meta_set(s, map[i].k, v, false);
    }
  }
  for (size_t i = 0; i < sizeof dotted_meta / sizeof dotted_meta[0]; i++) {
    if (dotted_meta[i].k == TP_LOG_M_SEED ? arg_num(s, dotted_meta[i].arg, &v)
                                          : arg_pos(s, dotted_meta[i].arg, &v)) {
      ls_meta_set(s, dotted_meta[i].k, v, false);
    }
  }
  double a, b;
  if (arg_pos(s, "recipe.num_nodes", &a) && arg_pos(s, "recipe.num_gpus_per_node", &b)) {
    ls_meta_set(s, TP_LOG_M_WORLD_SIZE, a * b, false);
  }
  if (arg_pos(s, "parallelism.data_parallel_shard_degree", &a)) {
    if (!arg_pos(s, "parallelism.data_parallel_replicate_degree", &b)) {
      b = 1;
    }
    ls_meta_set(s, TP_LOG_M_DP, a * b, false);
  }
  LsText t;
  bool have_fp8 = false;
  for (int w = 0; w < 2 && !have_fp8; w++) {
    if (arg_get(s, (TpLogArgDump)w, "fp8", &t) && t.n > 0 && !TEQ(t, "None") && !TEQ(t, "False")) {
      have_fp8 = true;
    }
  }
  const char *prec =
      have_fp8              ? "fp8"
      : arg_true(s, "bf16") ? "bf16"
      : arg_true(s, "fp16") ? "fp16"
      : (arg_get(s, TP_LOG_ARGS_MEGATRON, "bf16", &t) || arg_get(s, TP_LOG_ARGS_PRIMUS, "bf16", &t))
          ? "fp32"
          : dotted_precision(s);
  if (prec) {
    return ls_meta_str(s, TP_LOG_MS_PRECISION, prec, strlen(prec), false);
  }
  return 0;
}

static double rec_value(const TpLogScan *s, size_t i, TpLogField f, bool *has) {
  TpLogRecord r;
  *has = false;
  if (!tp_logscan_record(s, i, &r) || !(r.present >> f & 1)) {
    return 0;
  }
  *has = true;
  return r.v[f];
}

int ls_finish_parse(TpLogScan *s) {
  int rc = meta_from_args(s);
  if (rc) {
    return rc;
  }
  if (s->args[TP_LOG_ARGS_MEGATRON].n > 0 || s->args[TP_LOG_ARGS_PRIMUS].n > 0) {
    if (s->family == LS_FAM_MEGATRON || s->family == LS_FAM_NONE) {
      if (s->primus_seen && !s->meta_str[TP_LOG_MS_BACKEND]) {
        rc = ls_meta_str(s, TP_LOG_MS_BACKEND, "megatron", 8, false);
      }
    }
  }
  if (rc) {
    return rc;
  }
  // Parameter total: the printed one, else the sum over distinct shards.
  if (!s->params.has_total && s->nshards > 0) {
    double sum = 0;
    for (size_t i = 0; i < s->nshards; i++) {
      sum += s->shards[i].count;
    }
    s->params.has_total = true;
    s->params.total = sum;
  }
  if (!s->params.has_total && s->params.has_dense) {
    s->params.has_total = true;
    s->params.total = s->params.dense + s->params.sparse;
  }
  bool has;
  if (s->nrecs > 0) {
    double g = rec_value(s, 0, TP_LOG_F_GLOBAL_BATCH_SIZE, &has);
    if (has) {
      ls_meta_set(s, TP_LOG_M_GLOBAL_BATCH_SIZE, g, false);
    }
    // Megatron's "iteration N/T" prints --train-iters as T (NeMo's T is max_steps - 1).
    double t = rec_value(s, s->nrecs - 1, TP_LOG_F_TRAIN_ITERS, &has);
    if (has && s->family == LS_FAM_MEGATRON) {
      ls_meta_set(s, TP_LOG_M_TRAIN_ITERS, t, false);
    }
  }
  if (s->tt_non_dp > 0 && s->tt_tokens_per_rank > 0) {
    double dp = s->meta.present >> TP_LOG_M_DP & 1 ? s->meta.num[TP_LOG_M_DP] : 0;
    if (dp > 0) {
      ls_meta_set(s, TP_LOG_M_TOKENS_PER_STEP, s->tt_tokens_per_rank * dp, false);
    }
  }
  // Skipped iterations: normal during fp16 loss-scale search, a warning after losses appeared.
  if (s->diags[TP_LOG_D_SKIPPED_ITERATIONS].seen) {
    LsDiagAcc *d = &s->diags[TP_LOG_D_SKIPPED_ITERATIONS];
    char what[200];
    snprintf(what, sizeof what, "%llu iterations skipped by the optimizer in %llu records (%s)",
             (unsigned long long)s->skipped_total, (unsigned long long)d->count,
             s->skipped_after_loss ? "after training had started: overflow"
                                   : "start-up loss-scale search");
    uint64_t count = d->count, first = d->first_line;
    d->seen = false;
    rc =
        ls_diag(s, TP_LOG_D_SKIPPED_ITERATIONS,
                s->skipped_after_loss ? TP_LOG_SEV_WARNING : TP_LOG_SEV_INFO, first, what, NULL, 0);
    d->count = count;
    if (rc) {
      return rc;
    }
  }
  // Truncation: a last line without its line end (whatever the format, with or without
  // records: the file stops mid-line), a cut last record line, or records stopping before the
  // planned iterations without an end-of-training marker.
  uint64_t nlines = tp_logscan_lines(s);
  if (s->bytes > 0 && s->last_byte != '\n' && s->last_byte != '\r' &&
      s->last_content_line == nlines) {
    char what[200];
    snprintf(what, sizeof what, "the log stops mid-run: the last line is cut (line %llu)",
             (unsigned long long)nlines);
    rc = ls_diag(s, TP_LOG_D_TRUNCATED, TP_LOG_SEV_WARNING, nlines, what, NULL, 0);
    if (rc) {
      return rc;
    }
  } else if (s->nrecs > 0) {
    char what[200];
    if (s->last_rec_cut && s->last_rec_line >= s->last_content_line) {
      snprintf(what, sizeof what, "the log stops mid-run: the last line is cut (line %llu)",
               (unsigned long long)s->last_rec_line);
      rc = ls_diag(s, TP_LOG_D_TRUNCATED, TP_LOG_SEV_WARNING, s->last_rec_line, what, NULL, 0);
    } else if (!s->meta.completed) {
      size_t last = s->nrecs - 1;
      bool hi, ht;
      double it = rec_value(s, last, TP_LOG_F_ITERATION, &hi);
      double total = rec_value(s, last, TP_LOG_F_TRAIN_ITERS, &ht);
      double planned = 0;
      double done = it;
      if (s->family == LS_FAM_NEMO) {
        // global_step is 0-based; "iteration I/T" prints T = max_steps - 1.
        done = it + 1;
        planned = (s->meta.present >> TP_LOG_M_TRAIN_ITERS & 1) ? s->meta.num[TP_LOG_M_TRAIN_ITERS]
                  : ht                                          ? total + 1
                                                                : 0;
      } else if (ht) {
        planned = total;
      } else if (s->meta.present >> TP_LOG_M_TRAIN_ITERS & 1) {
        planned = s->meta.num[TP_LOG_M_TRAIN_ITERS];
      }
      if (hi && planned > 0 && done < planned) {
        snprintf(what, sizeof what,
                 "the log stops mid-run: records end at iteration %.0f of %.0f and no "
                 "end-of-training marker was seen",
                 it, s->family == LS_FAM_NEMO && ht ? total : planned);
        rc = ls_diag(s, TP_LOG_D_TRUNCATED, TP_LOG_SEV_WARNING, s->last_rec_line, what, NULL, 0);
      }
    }
    if (rc) {
      return rc;
    }
  }
  if (s->bytes == 0) {
    rc = ls_diag(s, TP_LOG_D_EMPTY, TP_LOG_SEV_WARNING, 0, "the log is empty", NULL, 0);
  } else if (s->nrecs == 0 && s->family == LS_FAM_NONE) {
    char what[160];
    snprintf(what, sizeof what, "no iteration records found in %llu lines",
             (unsigned long long)tp_logscan_lines(s));
    rc = ls_diag(s, TP_LOG_D_UNRECOGNISED, TP_LOG_SEV_WARNING, 0, what, NULL, 0);
  }
  return rc;
}
