// Outcome of a run as its log tells it: failure signatures (OOM, NCCL errors and timeouts, GPU
// faults, NaN losses, crashes, preemption, Slurm and Kubernetes stops, signals, restarts), the
// exception that names a crash, end-of-training and exit markers, and, at the end of the log,
// the diagnostics of the whole stream (skipped iterations, truncation, empty or unrecognised).
#include "logscan_outcome.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logscan_lex.h"
#include "logscan_num.h"
#include "logscan_rec.h"
#include "logscan_state.h"

// --- Failure signatures -----------------------------------------------------------------------

// Failure signatures (their anchors carry their index here). Fragments and their origin:
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

size_t ls_outcome_nsigs(void) {
  return NSIGS;
}

const char *ls_outcome_sig_text(size_t i) {
  return sigs[i].text;
}

// torchelastic's exit code of a worker killed by a stopping signal (-1, -2, -15).
static bool signal_exit(double v) {
  return v == -1 || v == -2 || v == -15;
}

// The signal a stop line names ("Received 15 death signal", "got signal: 15", "Received
// SIGTERM", "exitcode: -15"), as the diagnostic's text; tp.log.outcome reads the name.
static const char *signal_what(const char *p, size_t n) {
  double v = 0;
  const char *q = LS_FIND(p, n, " death signal");
  if (q) {
    size_t b = (size_t)(q - p);
    while (b > 0 && ls_is_digit(p[b - 1])) {
      b--;
    }
    tp_logscan_parse_number(p + b, (size_t)(q - p) - b, &v);
  } else if (!ls_number_after(p, n, "got signal:", &v) &&
             !ls_number_after(p, n, "exitcode  : ", &v) &&
             !ls_number_after(p, n, "(exitcode: ", &v)) {
    v = LS_FIND(p, n, "SIGTERM")  ? 15
        : LS_FIND(p, n, "SIGINT") ? 2
        : LS_FIND(p, n, "SIGHUP") ? 1
                                  : 0;
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
      i = ls_skip_spaces(p, n, i);
      return tp_logscan_parse_number(p + i, n - i, &v) > 0 && v != 0 && !signal_exit(v);
    case CK_RESULT_NAN:
      return LS_STARTS(p + i, n - i, "nan") || LS_STARTS(p + i, n - i, "inf") ||
             LS_STARTS(p + i, n - i, "-inf");
    case CK_RESTART_COUNT:
      return tp_logscan_parse_number(p + i, n - i, &v) > 0 && v > 0;
    case CK_EXIT_SIGTERM:
      return LS_FIND(p + i, n - i, "SIGTERM") != NULL;
    case CK_EXIT_MINUTES:
      return LS_FIND(p + i, n - i, "minutes") != NULL;
    case CK_CANCELLED:
      return LS_FIND(p + i, n - i, " DUE TO ") == NULL;
    default:
      return true;
  }
}

int ls_outcome_signatures_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  bool kinds[TP_LOG_D_COUNT] = {false};
  size_t first[TP_LOG_D_COUNT];
  for (size_t i = 0; i < NSIGS; i++) {
    if (!(L->sigs[i / 64] >> (i % 64) & 1)) {
      continue;
    }
    const char *at = ls_find(p, n, sigs[i].text);
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
  if (ls_number_after(p, n, "exitcode  : ", &v) || ls_number_after(p, n, "(exitcode: ", &v)) {
    ls_meta_set(s, TP_LOG_M_EXIT_CODE, v, true);
    if (signal_exit(v) && !kinds[TP_LOG_D_SIGNAL]) {
      return ls_diag(s, TP_LOG_D_SIGNAL, TP_LOG_SEV_WARNING, L->lineno, signal_what(p, n), p, n);
    }
  }
  return 0;
}

// --- Run facts --------------------------------------------------------------------------------

int ls_outcome_exception_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  // "<module.>Name(Error|Exception): message" as the last line of a traceback: it names the
  // crash better than "Traceback (most recent call last):".
  size_t i = 0;
  while (i < n && (ls_is_ident(p[i]) || p[i] == '.')) {
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

// An end-of-training marker: Megatron's "[after training is done]" and "exiting program at
// iteration", torchtitan's "Training completed".
int ls_outcome_completed_line(TpLogScan *s, const LsLine *L) {
  (void)L;
  s->meta.completed = true;
  return 0;
}

// torchelastic: "... worker group successfully finished ...": the exit status is 0.
int ls_outcome_worker_ok_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  if (LS_FIND(p, n, "worker group successfully finished")) {
    ls_meta_set(s, TP_LOG_M_EXIT_CODE, 0, true);
  }
  return 0;
}

// --- End of the log ---------------------------------------------------------------------------

static double rec_value(const TpLogScan *s, size_t i, TpLogField f, bool *has) {
  TpLogRecord r;
  *has = false;
  if (!tp_logscan_record(s, i, &r) || !(r.present >> f & 1)) {
    return 0;
  }
  *has = true;
  return r.v[f];
}

int ls_outcome_finish(TpLogScan *s) {
  int rc = 0;
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
  uint64_t nlines = ls_lines(s);
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
             (unsigned long long)ls_lines(s));
    rc = ls_diag(s, TP_LOG_D_UNRECOGNISED, TP_LOG_SEV_WARNING, 0, what, NULL, 0);
  }
  return rc;
}
