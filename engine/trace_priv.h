// What the trace reader (trace_read.c) and the trace store (trace.c) share. Private to
// engine/trace*.c.
#pragma once

#include "trace.h"

/// A runtime call that launched a GPU op (the op has the same args.correlation).
typedef struct TpTraceLaunch {
  uint32_t corr;
  uint32_t dur;  ///< ns, at most UINT32_MAX (only its end is used: a launch is never that long)
  int64_t ts;
} TpTraceLaunch;

/// A CPU interval (the dataloader's events).
typedef struct TpTraceSpan {
  int64_t ts, dur;
} TpTraceSpan;

/// A GPU op as the reader hands it over.
typedef struct TpTraceOpIn {
  int64_t ts, dur;
  const char *name;
  size_t name_len;
  uint64_t corr;  ///< UINT64_MAX: none
  int64_t stream;
  TpTraceKind kind;
  const char *coll;  ///< args "Collective name", or NULL
  size_t coll_len;
  int64_t bytes;  ///< collective message bytes, 0 when unknown
  int64_t group;  ///< args "Group size", 0 when unknown
} TpTraceOpIn;

/// A new, empty trace named `path`; NULL when out of memory.
TpTrace *tp_trace_new(const char *path);
/// Adds a GPU op; returns 0 or TP_ENOMEM.
int tp_trace_add_op(TpTrace *t, const TpTraceOpIn *op);
/// Adds a launch; returns 0 or TP_ENOMEM.
int tp_trace_add_launch(TpTrace *t, uint64_t corr, int64_t ts, int64_t dur);
/// Adds a ProfilerStep; returns 0 or TP_ENOMEM.
int tp_trace_add_step(TpTrace *t, int64_t number, int64_t ts, int64_t dur);
/// Adds a dataloader interval; returns 0 or TP_ENOMEM.
int tp_trace_add_loader(TpTrace *t, int64_t ts, int64_t dur);
/// Counts one event of category cat[0, len); returns 0 or TP_ENOMEM.
int tp_trace_count_cat(TpTrace *t, const char *cat, size_t len);
/// Keeps a top-level member's key and JSON text; returns 0 or TP_ENOMEM.
int tp_trace_add_meta(TpTrace *t, const char *key, size_t key_len, const char *text, size_t len);
/// Records a warning (the first one is kept whole; the rest are counted).
void tp_trace_warn(TpTrace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/// After reading: sorts the launches and steps, gives each op its step, the steps their
/// dataloader time. Returns 0 or TP_ENOMEM.
int tp_trace_finish(TpTrace *t);
