// The memory side of a profiler trace: Kineto's `[memory]` instant events (an allocation or a
// free: Addr, Bytes, Total Allocated, Total Reserved, Device Type, Device Id) taken as they stream
// in, each given the op, phase and step it ran in (trace_cpu.h), with a map of the live
// allocations only (not every event): per device the allocated and reserved curves and their
// peaks, what was live at the peak by op and category, per step and per op what was allocated,
// held and short-lived. Private to engine/trace*.c; trace.h hands the figures out
// (tp_trace_memory). docs/memory.md defines them.
#pragma once

#include <stdbool.h>

#include "common.h"
#include "trace_types.h"

/// A `[memory]` event as the reader hands it over: each field with whether it was present and
/// valid (a number of the right kind, in range).
typedef struct TpTraceMemIn {
  int64_t ts;
  uint16_t thread;  ///< tp_trace_cpu_thread's index, or TP_TRACE_NO_THREAD
  bool has_addr, has_bytes, has_total, has_reserved;
  bool bad_bytes, bad_total, bad_reserved;  ///< present, but not an integer in range
  uint64_t addr;
  int64_t bytes, total, reserved;
  int64_t type, id;  ///< Device Type, Device Id; -1 when absent or out of range
} TpTraceMemIn;

/// Bytes a `Bytes`, `Total Allocated` or `Total Reserved` may hold: 2^60 (an exbibyte).
#define TP_TRACE_MEM_MAX ((int64_t)1 << 60)

/// Takes one memory event (its thread's ranges read so far give its op and phase; the steps read
/// so far its step). Returns 0 or TP_ENOMEM.
int tp_trace_mem_add(TpTrace *t, const TpTraceMemIn *in);

/// After reading (and tp_trace_finish: the steps sorted): what is still live at the end, the
/// steps' indices, the curves in time order. Returns 0 or TP_ENOMEM.
int tp_trace_mem_finish(TpTrace *t);

/// The figures (after tp_trace_mem_finish); all zero for a trace without memory events.
const TpTraceMem *tp_trace_mem_get(const TpTrace *t);

/// Frees the memory side (NULL is fine).
void tp_trace_mem_free(TpTrace *t);
