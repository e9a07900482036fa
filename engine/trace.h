// Profiler traces: a streaming reader of PyTorch profiler (Kineto) Chrome-trace JSON, plain or
// gzip, that keeps only what the breakdowns need (GPU ops, their launches, the profiler steps,
// interned names) in compact arrays, never a tree; and the per-step breakdowns over those arrays
// once each name has a class. docs/trace.md defines every figure.
#pragma once

#include "common.h"
#include "trace_types.h"

/// Lower-case names of the kinds ("kernel", "memcpy", "memset").
extern const char *const tp_trace_kind_names[TP_TRACE_KINDS];

/// Reads a trace file: Kineto JSON, rocprofv3 CSV (with the memory copy and HIP API traces beside
/// a `*kernel_trace.csv`) or an Nsight Systems SQLite export, told apart by their first bytes
/// (gzip is recognised by its magic bytes; inflated on a second thread).
/// A file cut short gives what was read, `truncated` set and a warning. Returns 0 and sets
/// *out (free with tp_trace_free), or a negative code with `err` naming the file and the byte
/// offset: -errno, TP_EPARSE (not a trace, damaged), TP_ELIMIT (a string or nesting too big),
/// TP_ENOMEM.
int tp_trace_read(const char *path, TpTrace **out, TpError *err);

/// Reads a trace from memory (the fuzz target and the unit tests). `label` names it in messages.
int tp_trace_read_mem(const char *label, const void *data, size_t n, TpTrace **out, TpError *err);

/// Reads a whole file, plain or gzip (inflated), into `out` (appended; the caller frees it with
/// tp_buf_free): a companion of a trace such as PyTorch's memory-timeline export. *truncated says
/// a gzip stream ended early. Returns 0, or -errno, TP_EPARSE (damaged gzip), TP_ELIMIT (over
/// `max` bytes once inflated), TP_ENOMEM with `err` naming the file.
int tp_trace_read_text(const char *path, size_t max, TpBuf *out, bool *truncated, TpError *err);

/// Frees a trace (NULL is fine).
void tp_trace_free(TpTrace *t);

/// The real duration of op `i` in ns.
int64_t tp_trace_op_dur(const TpTrace *t, size_t i);

/// Category counts: calls fn(cat, len, count, ud) for each distinct `cat` seen ("" for none).
void tp_trace_categories(const TpTrace *t,
                         void (*fn)(const char *cat, size_t len, uint64_t count, void *ud),
                         void *ud);

/// Breaks the trace down per step window, given each name's class (`class_of[name id]`, below
/// `nclasses`) and each class's kind. Sorts the trace's ops by start time (the first call only).
/// Returns 0 and fills *out (free with tp_trace_breakdown_free), or TP_EINVAL / TP_ENOMEM.
int tp_trace_breakdown(TpTrace *t, const uint8_t *class_of, const uint8_t *class_kind,
                       size_t nclasses, TpTraceBreakdown *out, TpError *err);

/// tp_trace_breakdown with options (NULL: the defaults). Each step also gets its idle time per
/// cause, its launch figures, its longest op and each stream's queue; the breakdown, HTA's
/// idle-time breakdown per stream (docs/trace.md, "Why the GPU is idle").
int tp_trace_breakdown_with(TpTrace *t, const uint8_t *class_of, const uint8_t *class_kind,
                            size_t nclasses, const TpTraceBreakdownOpts *opts,
                            TpTraceBreakdown *out, TpError *err);

/// Frees what tp_trace_breakdown allocated.
void tp_trace_breakdown_free(TpTraceBreakdown *b);

/// The op-level figures: for each CPU range key (t->keys), its calls and the GPU busy time under
/// them, and the GPU ops it owns, over the ops linked to a CPU range in step `step` (an index into
/// t->steps) or in every step (TP_TRACE_NO_STEP). `wanted[key id]` (t->nkeys entries) marks the
/// keys that own the GPU ops under them: an op's owner is the innermost wanted range around it,
/// else the range that launched it. Sorts the trace's ops by start time (the first call only).
/// Returns 0 and fills *out (free with tp_trace_ops_free), or TP_ENOMEM.
int tp_trace_ops(TpTrace *t, const uint8_t *wanted, uint32_t step, TpTraceOps *out, TpError *err);

/// Frees what tp_trace_ops allocated.
void tp_trace_ops_free(TpTraceOps *o);

/// The collectives of a read trace: one entry per NCCL or RCCL GPU op (named nccl* or rccl*, or
/// carrying a collective's args), in the order they were read, with the metadata of the
/// record_param_comms CPU op that launched it (docs/collectives.md). *n gets their number; the
/// array lives as long as the trace.
const TpTraceColl *tp_trace_collectives(const TpTrace *t, size_t *n);

/// The text of a collective's interned field (TpTraceColl.coll, dtype, pg, ranks): "" for 0.
/// *len (when not NULL) gets its length.
const char *tp_trace_coll_text(const TpTrace *t, uint32_t id, size_t *len);

/// The memory figures of a read trace, from the profiler's `[memory]` events (docs/memory.md):
/// per device the allocated and reserved curves, their peaks and what was live at the peak by
/// category, per (step, device) and per (op, device) what was allocated, freed, held and
/// short-lived. All zero (no device) for a trace without memory events. Lives as long as the
/// trace.
const TpTraceMem *tp_trace_memory(const TpTrace *t);
