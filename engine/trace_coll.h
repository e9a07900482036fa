// The collectives of a profiler trace: a compact side array with one entry per NCCL or RCCL GPU
// op (its times, and the message it moved: collective, element counts, type, process group,
// sequence number), filled while the trace streams in from the kernel's own args and from the
// `record_param_comms` CPU op that launched it. Private to engine/trace*.c; trace.h hands the
// array out (tp_trace_collectives). docs/collectives.md.
#pragma once

#include <stdbool.h>

#include "common.h"
#include "trace_types.h"

/// A collective as a reader hands it over: a GPU op (after tp_trace_add_op added it) or a
/// `record_param_comms` CPU range. Texts are borrowed for the call; counts are -1 when absent.
typedef struct TpTraceCollIn {
  bool cpu;       ///< a record_param_comms CPU range (else a GPU op)
  bool own_args;  ///< a GPU op whose own args name the collective or its size
  int64_t ts, dur;
  uint32_t name;  ///< the GPU op's name id
  uint64_t corr;  ///< the GPU op's args.correlation (UINT64_MAX: none)
  int64_t stream;
  bool has_ext;  ///< args "External id" present
  uint64_t ext;
  uint16_t thread;  ///< the CPU range's thread (trace_cpu.h), or TP_TRACE_NO_THREAD
  const char *coll, *dtype, *pg, *ranks;  ///< NULL: absent
  size_t coll_len, dtype_len, pg_len, ranks_len;
  int64_t dtype_size;  ///< bytes per element, 0 unknown
  int64_t in_nelems, out_nelems, group, seq, rank;
} TpTraceCollIn;

/// Whether a GPU op's name is an NCCL or RCCL kernel's: it starts with "nccl" or "rccl" (any
/// case), after an optional "void ".
bool tp_trace_coll_name(const char *name, size_t len);

/// Keeps a collective; returns 0 or TP_ENOMEM.
int tp_trace_coll_add(TpTrace *t, const TpTraceCollIn *in);

/// After reading (and tp_trace_finish): gives each GPU collective its step (its launch's) and
/// the metadata of the record_param_comms range it was launched in (its launch's External id,
/// else its own, else the range around the launch on its thread) where its own args lack them.
/// Returns 0 or TP_ENOMEM.
int tp_trace_coll_finish(TpTrace *t);

/// The collectives kept (trace.h: tp_trace_collectives).
const TpTraceColl *tp_trace_coll_list(const TpTrace *t, size_t *n);

/// An interned text of the collectives (trace.h: tp_trace_coll_text).
const char *tp_trace_coll_string(const TpTrace *t, uint32_t id, size_t *len);

/// Frees the collectives (NULL is fine).
void tp_trace_coll_free(TpTrace *t);
