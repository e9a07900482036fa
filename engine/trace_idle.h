// Why the GPU is idle: the cause of each idle gap of a step window, the launch figures of each
// step, the queue of each stream over each step window, and Holistic Trace Analysis' idle-time
// breakdown per stream. Private to engine/trace*.c; docs/trace.md, "Why the GPU is idle".
#pragma once

#include "common.h"
#include "trace_types.h"

/// The latency threshold when none is given: 30 us, HTA's consecutive_kernel_delay.
#define TP_TRACE_GAP_DEFAULT 30000

/// The cause of the idle gap [a, b) on the GPU, which op `first` (the first op of the trace's
/// sorted ops starting at b) ends. `gap`: the latency threshold (ns).
TpTraceCause tp_trace_idle_cause(const TpTrace *t, size_t first, int64_t a, int64_t b, int64_t gap);

/// Whether HTA's whole-trace view drops ops by their launch (two profiler steps or more), and the
/// time before which an op's launch must start to be kept (*limit).
bool tp_trace_hta_filter(const TpTrace *t, int64_t *limit);

/// Fills each step window's launch figures (`win_of[step index]`: its window's index + 1, or 0),
/// the streams' queues over each window, and HTA's idle-time breakdown per stream (b->nstreams,
/// b->hta_idle). The ops must be sorted by start. Returns 0 or TP_ENOMEM.
int tp_trace_idle_fill(const TpTrace *t, const size_t *win_of, TpTraceBreakdown *b);

/// Frees what tp_trace_idle_fill allocated (each step's `queue`, `hta_idle`).
void tp_trace_idle_free(TpTraceBreakdown *b);
