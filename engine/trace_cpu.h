// The CPU side of a profiler trace: the ranges that say what ran on the GPU (operators with their
// shape arguments, user annotations, nn.Module frames), interned by key and nested per thread as
// they stream in; each GPU op linked through its launch to the innermost range it was launched
// in; and each key's figures over the GPU ops under its ranges. Private to engine/trace*.c;
// trace.h re-exports the figures (tp_trace_ops). docs/trace.md defines them.
#pragma once

#include <stdbool.h>

#include "common.h"
#include "trace_types.h"

/// A CPU range as a reader hands it over.
typedef struct TpTraceCpuIn {
  TpTraceCpuKind kind;
  const char *name;
  size_t name_len;
  const char *arg[TP_TRACE_OP_ARGS];  ///< each shape argument's JSON text, NULL when absent
  size_t arg_len[TP_TRACE_OP_ARGS];
  int64_t ts, dur;
  uint16_t thread;  ///< tp_trace_cpu_thread's index, or TP_TRACE_NO_THREAD
  bool has_ext;     ///< args "External id" present
  uint64_t ext;
} TpTraceCpuIn;

/// The index of the CPU thread whose pid and tid hash to `hash` (added when new), or
/// TP_TRACE_NO_THREAD past 65535 threads or when out of memory.
uint16_t tp_trace_cpu_thread(TpTrace *t, uint64_t hash);

/// Adds a CPU range: an op or annotation is kept and nested under the ranges open on its thread
/// (events of a thread arrive in time order, as Kineto writes them; one that does not is kept
/// unnested and counted in t->unordered); an nn.Module frame is kept for the module lookup.
/// Returns 0 or TP_ENOMEM.
int tp_trace_cpu_add(TpTrace *t, const TpTraceCpuIn *in);

/// After reading (and tp_trace_finish): links each GPU op to the innermost range it was launched
/// in (its launch's External id, else its own), and nests the nn.Module frames. Returns 0 or
/// TP_ENOMEM.
int tp_trace_cpu_finish(TpTrace *t);

/// The ranges open around a memory event (tp_trace_cpu_at).
typedef struct TpTraceCpuAt {
  uint32_t owner;    ///< key id of the op that asked for the memory (the innermost op that is not
                     ///< an allocator such as aten::empty, else the innermost range), UINT32_MAX:
                     ///< no range open
  uint8_t phase;     ///< TP_TRACE_PHASE_* of the ranges open (as the op table has it)
  int64_t call_end;  ///< end of the outermost op open (the call from Python), INT64_MIN: none
} TpTraceCpuAt;

/// Finds the ranges open at `ts` on `thread` among the ranges read so far: a cursor per thread
/// walks its ranges in order, so a thread's events must come in time order (as Kineto writes
/// them) to be cheap; a step back rescans the thread, at most 16 times. Returns 0 (*out filled;
/// owner UINT32_MAX when no range is open), 1 when the thread stepped back too often (nothing
/// found), or TP_ENOMEM.
int tp_trace_cpu_at(TpTrace *t, uint16_t thread, int64_t ts, TpTraceCpuAt *out);

/// Drops what tp_trace_cpu_at needs (each range's times, the cursors), once the trace is read.
void tp_trace_cpu_drop_times(TpTrace *t);

/// Ranges read after a memory event of their thread at or after their start (tp_trace_cpu_at
/// could not have seen them).
uint64_t tp_trace_cpu_late(const TpTrace *t);

/// Frees the CPU ranges (NULL is fine; the trace's own arrays stay).
void tp_trace_cpu_free(TpTrace *t);

/// Each key's figures over the GPU ops linked to a range, in step `step` (an index into the
/// steps) or in every step (TP_TRACE_NO_STEP). `wanted[key id]` marks the keys that may own a GPU
/// op: an op's owner is the innermost wanted range around it, else the range that launched it.
/// Returns 0 and fills *out (free with tp_trace_cpu_ops_free), or TP_ENOMEM.
int tp_trace_cpu_ops(const TpTrace *t, const uint8_t *wanted, uint32_t step, TpTraceOps *out,
                     TpError *err);

/// Frees what tp_trace_cpu_ops allocated.
void tp_trace_cpu_ops_free(TpTraceOps *o);
