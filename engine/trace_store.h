// The trace store: the compact arrays a trace is kept in while it is read (GPU ops, launches,
// steps, dataloader spans, interned names, category counts, kept top-level members) and the
// step each op belongs to. Private to engine/trace*.c.
#pragma once

#include <stdbool.h>

#include "common.h"
#include "trace_types.h"

/// The times (ns) the store takes: any end (ts + dur) and any difference of two starts or ends
/// fits 63 bits. A reader skips an event outside them as out of range.
#define TP_TRACE_TS_MIN  (-((int64_t)1 << 60))     ///< 36 years before the clock's zero
#define TP_TRACE_TS_MAX  (((int64_t)1 << 62) - 1)  ///< the year 2116 in ns since the epoch
#define TP_TRACE_DUR_MAX ((int64_t)1 << 60)        ///< 36 years

/// a + b, for sums of non-negative durations and sizes: INT64_MAX instead of an overflow.
static inline int64_t tp_trace_add_capped(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

/// No thread: a launch whose CPU thread is unknown.
#define TP_TRACE_NO_THREAD UINT16_MAX

/// No External id (or one that does not fit 32 bits: nothing can be linked through it).
#define TP_TRACE_NO_EXT UINT32_MAX

/// What a runtime call is, by its name (tp_trace_call_of): the few kinds the idle causes and the
/// graph warning need; every other call is TP_TRACE_CALL_OTHER.
typedef enum TpTraceCall {
  TP_TRACE_CALL_OTHER,
  TP_TRACE_CALL_SYNC,  ///< {cuda,hip}{Device,Stream,Event}Synchronize, cu{Ctx,Stream,Event}...
  TP_TRACE_CALL_COPY,  ///< a synchronous copy (cudaMemcpy, hipMemcpy, hipMemcpyWithStream...)
  TP_TRACE_CALL_COPY_ASYNC,  ///< cudaMemcpyAsync, hipMemcpyAsync: blocking into pageable memory
  TP_TRACE_CALL_GRAPH,       ///< cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch
} TpTraceCall;

/// The kind of the runtime call named name[0, len).
TpTraceCall tp_trace_call_of(const char *name, size_t len);

/// A runtime call that launched a GPU op (the op has the same args.correlation).
typedef struct TpTraceLaunch {
  int64_t ts;
  uint32_t corr;
  uint32_t dur;     ///< ns, at most UINT32_MAX (only its end is used: a launch is never that long)
  uint32_t ext;     ///< args "External id": the CPU op it ran in, or TP_TRACE_NO_EXT
  uint16_t thread;  ///< its CPU thread (trace_cpu.h), or TP_TRACE_NO_THREAD
  uint8_t call;     ///< TpTraceCall
} TpTraceLaunch;

/// A synchronisation span: the host blocked (or, for a stream wait, a stream), ns.
typedef struct TpTraceSync {
  int64_t ts, dur;
  uint32_t corr;   ///< args.correlation, or UINT32_MAX
  int16_t stream;  ///< args.stream of a cuda_sync event (-1: none)
  uint8_t kind;    ///< TpTraceSyncKind
} TpTraceSync;

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
  bool has_ext;   ///< args "External id" present
  uint64_t ext;
} TpTraceOpIn;

/// What a CPU range is by its name, as the PyTorch profiler names them: a profiler step
/// (`ProfilerStep#N`), the dataloader (`enumerate(DataLoader)...`), a `ProfilerStep#` whose N is
/// not a number of at most 18 digits, or nothing the breakdowns use.
typedef enum TpTraceRange {
  TP_TRACE_RANGE_OTHER,
  TP_TRACE_RANGE_STEP,
  TP_TRACE_RANGE_BAD_STEP,
  TP_TRACE_RANGE_LOADER,
} TpTraceRange;

/// The kind of the CPU range named name[0, len); a step's number goes to *number.
TpTraceRange tp_trace_range_of(const char *name, size_t len, int64_t *number);

/// A new, empty trace named `path`; NULL when out of memory.
TpTrace *tp_trace_new(const char *path);
/// Adds a GPU op; returns 0 or TP_ENOMEM.
int tp_trace_add_op(TpTrace *t, const TpTraceOpIn *op);
/// Adds a launch (`ext` UINT64_MAX: no External id; `thread` TP_TRACE_NO_THREAD: unknown);
/// returns 0 or TP_ENOMEM.
int tp_trace_add_launch(TpTrace *t, uint64_t corr, int64_t ts, int64_t dur, uint64_t ext,
                        uint16_t thread);
/// Adds a launch with the kind of its call (tp_trace_call_of); returns 0 or TP_ENOMEM.
int tp_trace_add_launch_call(TpTrace *t, uint64_t corr, int64_t ts, int64_t dur, uint64_t ext,
                             uint16_t thread, TpTraceCall call);
/// Adds a synchronisation span (`corr` UINT64_MAX: none); returns 0 or TP_ENOMEM.
int tp_trace_add_sync(TpTrace *t, TpTraceSyncKind kind, int64_t ts, int64_t dur, uint64_t corr,
                      int64_t stream);
/// Adds a ProfilerStep; returns 0 or TP_ENOMEM.
int tp_trace_add_step(TpTrace *t, int64_t number, int64_t ts, int64_t dur);
/// Adds a dataloader interval; returns 0 or TP_ENOMEM.
int tp_trace_add_loader(TpTrace *t, int64_t ts, int64_t dur);
/// Counts one event of category cat[0, len); returns 0 or TP_ENOMEM.
int tp_trace_count_cat(TpTrace *t, const char *cat, size_t len);
/// Keeps a top-level member's key and JSON text; returns 0 or TP_ENOMEM.
int tp_trace_add_meta(TpTrace *t, const char *key, size_t key_len, const char *text, size_t len);
/// Copies n bytes and a NUL into the arena; returns their offset, or SIZE_MAX when out of memory.
size_t tp_trace_store_put(TpTrace *t, const char *p, size_t n);
/// Records a warning (the first one is kept whole; the rest are counted).
void tp_trace_warn(TpTrace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/// After reading: sorts the launches and steps, gives each op its step, the steps their
/// dataloader time; adds a sync span for each blocking device-to-host copy, counts the ops that
/// graph launches ran; sorts the sync and dataloader spans for tp_trace_store_overlaps. Returns 0
/// or TP_ENOMEM.
int tp_trace_finish(TpTrace *t);

enum { TP_TRACE_CAT_SLOTS = 512 };

/// One category of event, counted.
typedef struct TpTraceCat {
  size_t at, len;
  uint64_t count;
  uint64_t hash;
  bool used;
} TpTraceCat;

/// What a trace keeps besides its public arrays (TpTrace.priv).
typedef struct TpTraceStore {
  uint32_t *slots;  ///< name id + 1, open addressing (0: empty)
  uint64_t *slot_hash;
  size_t slots_cap;
  TpTraceLaunch *launches;  ///< sorted by correlation after tp_trace_finish
  size_t nlaunch, launch_cap;
  int64_t *longs;  ///< durations that do not fit 32 bits
  size_t nlong, long_cap;
  TpTraceSpan *loaders;
  size_t nloader, loader_cap;
  TpTraceSync *syncs;  ///< sorted by ts after tp_trace_finish
  size_t nsync, sync_cap;
  int64_t *sync_end;  ///< after tp_trace_finish: the latest end of syncs[0..i] that block the host
  int64_t *loader_end;  ///< likewise for the dataloader spans (sorted by ts)
  TpTraceCat cats[TP_TRACE_CAT_SLOTS];
  uint64_t other_cats;
  bool ops_sorted;
  struct TpTraceCpuStore *cpu;    ///< the CPU ranges (trace_cpu.c; freed by tp_trace_cpu_free)
  struct TpTraceCollStore *coll;  ///< the collectives (trace_coll.c; tp_trace_coll_free)
  struct TpTraceMemStore *mem;    ///< the memory events (trace_mem.c; tp_trace_mem_free)
} TpTraceStore;

/// Sorts n elements of `size` bytes in place by `cmp`, stably (as qsort's merge sort), with 8
/// bytes of scratch per element rather than a copy of the array (the big arrays of a trace stay
/// in bounded memory). Returns 0 or TP_ENOMEM (the array unchanged).
int tp_trace_store_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

/// Frees a trace and its store (NULL is fine).
void tp_trace_store_free(TpTrace *t);
/// The launch with correlation `corr`, or NULL (after tp_trace_finish).
const TpTraceLaunch *tp_trace_store_launch(const TpTrace *t, uint32_t corr);
/// The real duration of op `i` in ns.
int64_t tp_trace_store_op_dur(const TpTrace *t, size_t i);
/// Whether a span that blocks the host (loader false: a synchronisation; true: the dataloader)
/// overlaps [a, b) (after tp_trace_finish).
bool tp_trace_store_overlaps(const TpTrace *t, bool loader, int64_t a, int64_t b);
/// Calls fn for each category counted.
void tp_trace_store_categories(const TpTrace *t,
                               void (*fn)(const char *cat, size_t len, uint64_t count, void *ud),
                               void *ud);
