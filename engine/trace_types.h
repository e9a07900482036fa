// Types of the trace reader's API (engine/trace.h): GPU ops, steps, names, the kept top-level
// members, the trace itself and its breakdown. Declarations only.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// What a GPU op is, from its event category.
typedef enum TpTraceKind {
  TP_TRACE_KERNEL,  ///< cat "kernel"
  TP_TRACE_MEMCPY,  ///< cat "gpu_memcpy"
  TP_TRACE_MEMSET,  ///< cat "gpu_memset"
  TP_TRACE_KINDS,
} TpTraceKind;

/// How a class of GPU ops counts in the temporal breakdown.
typedef enum TpTraceClassKind {
  TP_TRACE_COMPUTE,
  TP_TRACE_COMMUNICATION,
  TP_TRACE_MEMORY,
} TpTraceClassKind;

/// The most classes a breakdown takes.
#define TP_TRACE_MAX_CLASSES 64

/// No step (an op with no launch, or launched outside every profiler step).
#define TP_TRACE_NO_STEP UINT32_MAX

/// No CPU range (an op whose launch is missing or names no CPU op the trace holds).
#define TP_TRACE_NO_CPU UINT32_MAX

/// The shape arguments of a CPU op kept in its key, in this order: "Input Dims", "Input type",
/// "Input Strides", "Concrete Inputs".
#define TP_TRACE_OP_ARGS 4

/// What a kept CPU range is, from its event category and name.
typedef enum TpTraceCpuKind {
  TP_TRACE_CPU_OP,          ///< cat "cpu_op": an operator (aten::mm, autograd::engine::...)
  TP_TRACE_CPU_ANNOTATION,  ///< cat "user_annotation" other than ProfilerStep#N
  TP_TRACE_CPU_MODULE,      ///< cat "python_function" named "nn.Module: ..."
  TP_TRACE_CPU_KINDS,
} TpTraceCpuKind;

/// What a host synchronisation span is (TpTrace.syncs): a runtime call that blocks the host, a
/// blocking device-to-host copy, or one of the `cuda_sync` events recent PyTorch writes on the
/// GPU timeline.
typedef enum TpTraceSyncKind {
  TP_TRACE_SYNC_CALL,  ///< cuda/hip Device, Stream or Event Synchronize (runtime or driver)
  TP_TRACE_SYNC_COPY,  ///< a blocking device-to-host copy: from the copy's start to the call's end
  TP_TRACE_SYNC_STREAM,       ///< cuda_sync "Stream Sync"
  TP_TRACE_SYNC_EVENT,        ///< cuda_sync "Event Sync"
  TP_TRACE_SYNC_CONTEXT,      ///< cuda_sync "Context Sync"
  TP_TRACE_SYNC_STREAM_WAIT,  ///< cuda_sync "Stream Wait Event" (the GPU waits; not the host)
  TP_TRACE_SYNC_KINDS,
} TpTraceSyncKind;

/// The phase of training a CPU range runs in, from the ranges around it.
enum {
  TP_TRACE_PHASE_FWD,  ///< neither of the others
  TP_TRACE_PHASE_BWD,  ///< under the autograd engine (autograd::engine::evaluate_function: ...)
  TP_TRACE_PHASE_OPT,  ///< under an optimizer step (Optimizer.step#..., Optimizer.zero_grad#...)
  TP_TRACE_PHASES,
};

/// One distinct CPU range: an op with its shape arguments (the op key), an annotation or an
/// nn.Module frame. Its texts lie in the arena, NUL-terminated, one after the other: the name,
/// then each argument present (its JSON text as the trace has it).
typedef struct TpTraceOpKey {
  size_t at;                           ///< the name's offset in the arena
  uint32_t len[1 + TP_TRACE_OP_ARGS];  ///< lengths of the name and of each argument
  uint8_t has;                         ///< bit i: argument i present
  uint8_t kind;                        ///< TpTraceCpuKind
  uint8_t phase;                       ///< the TP_TRACE_PHASE_* its name starts, or FWD
  uint64_t count;                      ///< ranges with this key
} TpTraceOpKey;

/// One key's figures over the GPU ops under its ranges (tp_trace_ops). Times in ns.
typedef struct TpTraceOpStat {
  uint64_t calls;    ///< ranges with at least one GPU op under them
  uint64_t ops;      ///< GPU ops under them, over all calls
  int64_t time;      ///< GPU busy time per call (the union of its ops), summed over calls
  int64_t min, max;  ///< smallest and largest busy time of a call
  double time_sq;    ///< sum over calls of the squared busy time (ns^2)
  double inv;        ///< sum over calls of 1 / busy time (1/ns)
  int64_t own;       ///< durations of the GPU ops it owns (each op has one owner: docs/trace.md)
  uint64_t own_ops;  ///< GPU ops it owns
  uint64_t phase[TP_TRACE_PHASES];   ///< calls per phase
  int64_t kind_sum[TP_TRACE_KINDS];  ///< durations of the GPU ops under its calls, per kind
  uint32_t module;  ///< key id + 1 of the innermost nn.Module frame around its first owned op, or 0
  uint32_t module_parent;  ///< key id + 1 of that frame's enclosing nn.Module frame, or 0
} TpTraceOpStat;

/// GPU ops of one name owned by one key.
typedef struct TpTraceOpKernel {
  uint32_t key, name;
  uint64_t count;
  int64_t total;  ///< ns
} TpTraceOpKernel;

/// The result of tp_trace_ops.
typedef struct TpTraceOps {
  TpTraceOpStat *stats;  ///< one per key (t->nkeys)
  size_t nstats;
  TpTraceOpKernel *kernels;  ///< (owner key, op name) pairs, in no particular order
  size_t nkernels;
  uint64_t linked;    ///< GPU ops counted (linked to a CPU range, in the step asked for)
  uint64_t unlinked;  ///< GPU ops of that step with no CPU range
} TpTraceOps;

/// One GPU op (kernel, memcpy, memset). Times in nanoseconds.
typedef struct TpTraceOp {
  int64_t ts;
  uint32_t dur;   ///< ns; when `pad` is 1, an index into the trace's table of longer ones
  uint32_t name;  ///< name id (0-based)
  uint32_t corr;  ///< args.correlation, or UINT32_MAX when absent or out of range
  uint32_t step;  ///< index into the steps, or TP_TRACE_NO_STEP
  uint32_t cpu;   ///< the CPU range that launched it (trace_cpu.h), or TP_TRACE_NO_CPU
  int16_t stream;
  uint8_t kind;  ///< TpTraceKind
  uint8_t pad;   ///< 1: `dur` indexes the long durations (use tp_trace_op_dur)
} TpTraceOp;

/// A profiler step (a `ProfilerStep#N` annotation) on the CPU.
typedef struct TpTraceStep {
  int64_t number;
  int64_t ts, dur;
  int64_t dataloader;  ///< ns of `enumerate(DataLoader)` events inside it
  size_t ops;          ///< GPU ops launched inside it
} TpTraceStep;

/// One distinct GPU op name, with the facts gathered over its ops.
typedef struct TpTraceName {
  size_t at, len;  ///< the name's bytes in the trace's string arena
  size_t coll_at;  ///< args "Collective name" of its first op that has one (arena), or SIZE_MAX
  size_t coll_len;
  uint8_t kind;    ///< TpTraceKind of its first op
  uint64_t count;  ///< ops
  int64_t total;   ///< ns, all ops
  int64_t bytes;   ///< message bytes of a collective ("In msg nelems" x dtype size), summed
  int64_t group;   ///< args "Group size" of its first op that has one, or 0
} TpTraceName;

/// A top-level member of the trace other than traceEvents, kept as its JSON text.
typedef struct TpTraceMeta {
  size_t key_at, key_len;
  size_t at, len;
} TpTraceMeta;

/// A read trace. Opaque arrays are public so the binding can walk them; treat them as read-only.
typedef struct TpTrace {
  char *path;
  char *arena;  ///< names, collective names, meta keys and texts
  size_t arena_len, arena_cap;
  TpTraceOp *ops;
  size_t nops, ops_cap;
  TpTraceName *names;
  size_t nnames, names_cap;
  TpTraceStep *steps;  ///< sorted by ts
  size_t nsteps, steps_cap;
  TpTraceMeta *meta;
  size_t nmeta, meta_cap;
  TpTraceOpKey *keys;  ///< CPU ranges' keys, by key id (trace_cpu.h)
  size_t nkeys, keys_cap;
  // counts of what was read
  uint64_t bytes;       ///< uncompressed bytes read
  uint64_t events;      ///< elements of traceEvents
  uint64_t launches;    ///< runtime calls with a correlation
  uint64_t flows;       ///< flow events (ph s/f/t)
  uint64_t ignored;     ///< events not used (other phases and categories)
  uint64_t bad;         ///< events skipped for a bad field (see warnings)
  uint64_t unassigned;  ///< GPU ops in no step
  uint64_t cpu_ranges;  ///< CPU ranges kept (cpu_op, user_annotation, nn.Module frames)
  uint64_t linked;      ///< GPU ops linked to the CPU range that launched them
  uint64_t unordered;   ///< CPU ranges that start before an earlier one on their thread
  uint64_t args_long;   ///< shape arguments over 64 KiB, left out of their op's key
  uint64_t syncs[TP_TRACE_SYNC_KINDS];  ///< synchronisation spans kept, per kind
  uint64_t graph_launches;              ///< cudaGraphLaunch / hipGraphLaunch calls
  uint64_t graph_ops;  ///< GPU ops whose launch is a graph launch (no CPU op of their own)
  bool compressed, truncated;
  bool stepless;          ///< no ProfilerStep in the trace: one step (number 0) holds every op
  int64_t gpu_step_last;  ///< start of the latest ProfilerStep on the GPU timeline, or INT64_MIN
  char warning[512];      ///< the first warning, "" when none
  uint64_t warnings;      ///< how many warnings there were
  // private: categories seen, launch table, long durations, name hash
  void *priv;
} TpTrace;

/// Why the GPU sat idle in a gap: the cause of each idle interval (docs/trace.md, "Why the GPU is
/// idle"). The first three are gaps the host left (the next op's launch call started after the
/// gap began), split by what the host was doing; the last two are gaps with work already queued.
typedef enum TpTraceCause {
  TP_TRACE_CAUSE_HOST,     ///< the host was late to launch the next op
  TP_TRACE_CAUSE_SYNC,     ///< ... while it was blocked in a synchronisation (or a blocking copy)
  TP_TRACE_CAUSE_LOADER,   ///< ... while the dataloader ran
  TP_TRACE_CAUSE_LATENCY,  ///< launched before the gap, and the gap is below the threshold
  TP_TRACE_CAUSE_OTHER,    ///< launched before the gap, a longer gap (another stream, an event)
  TP_TRACE_CAUSES,
} TpTraceCause;

/// Launch figures over a step's kernels that have a launch (docs/trace.md, "Launches"). ns.
typedef struct TpTraceLaunchStats {
  uint64_t count;     ///< kernels with a launch
  uint64_t shorter;   ///< kernels that ran shorter than their launch call took
  int64_t cpu;        ///< launch call durations, summed
  int64_t gpu;        ///< kernel durations, summed
  int64_t delay_sum;  ///< kernel start - launch start, summed
  int64_t delay_p50, delay_p90, delay_p99, delay_max, delay_min;  ///< of those delays
} TpTraceLaunchStats;

/// The queue of one stream over one step window: ops launched and not yet finished.
typedef struct TpTraceQueueStat {
  int16_t stream;
  uint32_t max;   ///< the largest length held for a while inside the window
  double mean;    ///< the time-weighted mean length over the window
  int64_t empty;  ///< ns of the window with nothing queued on the stream
} TpTraceQueueStat;

/// Idle time on one stream as Holistic Trace Analysis' get_idle_time_breakdown takes it: over
/// the ops of its whole-trace view on that stream, each op's start rounded up and end down to a
/// microsecond, the interval before each op (its start - the previous op's end, negative when
/// they overlap) counted as host wait when the op's launch started after that end, else as kernel
/// wait when below the threshold, else other. ns.
typedef struct TpTraceIdleStream {
  int16_t stream;
  uint64_t ops;
  int64_t host, kernel, other;
} TpTraceIdleStream;

/// One class's figures in one step window (ns; count and sum over the ops of the step).
typedef struct TpTraceClassTime {
  uint64_t count;
  int64_t sum;       ///< durations of the step's ops of this class
  int64_t time;      ///< union of this class's ops inside the window
  double exclusive;  ///< the window's time given to this class (docs/trace.md)
} TpTraceClassTime;

/// The breakdown of one step window.
typedef struct TpTraceStepTime {
  size_t step;  ///< index into t->steps
  int64_t start, window, busy, idle, compute, non_compute, comm, comm_overlapped, host_wait;
  size_t ops;
  TpTraceClassTime *cls;           ///< nclasses entries
  int64_t cause[TP_TRACE_CAUSES];  ///< idle per cause; they add up to `idle`
  int64_t longest;                 ///< the longest of the step's own ops (ns)
  uint32_t longest_name;           ///< its name id (UINT32_MAX: the step has no op)
  TpTraceLaunchStats launch;
  TpTraceQueueStat *queue;  ///< one per stream of the trace (TpTraceBreakdown.nstreams)
} TpTraceStepTime;

/// Holistic Trace Analysis' whole-trace view (its Trace._filter_irrelevant_gpu_kernels): with two
/// profiler steps or more, the ops launched before the latest ProfilerStep row starts (on the CPU
/// or the GPU timeline, as HTA takes the latest of either); with fewer, every op. The span runs
/// from the first start to the last end.
/// `rounded` repeats the figures the way HTA computes them: each op's start rounded up and its end
/// down to a whole microsecond (its round_down_time_stamps), unions merged as its
/// merge_kernel_intervals does (a row whose rounded end falls before its start counts negative).
typedef struct TpTraceWhole {
  int64_t span, idle, compute, non_compute;
  size_t ops;
  struct {
    int64_t span, idle, compute, non_compute;
    size_t syncs;  ///< cuda_sync rows on a stream that HTA takes for GPU rows (counted as compute)
  } rounded;
} TpTraceWhole;

/// The result of tp_trace_breakdown.
typedef struct TpTraceBreakdown {
  size_t nclasses;
  TpTraceStepTime *steps;
  size_t nsteps;
  TpTraceWhole whole;
  uint64_t *name_count;  ///< per name id: ops assigned to a step
  int64_t *name_sum;     ///< per name id: their durations
  size_t nstreams;       ///< distinct streams of the ops (each step's `queue` has one per stream)
  TpTraceIdleStream *hta_idle;  ///< per stream, HTA's idle-time breakdown (nstreams entries)
  TpTraceLaunchStats launch;    ///< the launch figures over the steady windows together (every
                                ///< window but the last when there are several)
  int64_t gap;                  ///< the latency threshold the causes used (ns)
} TpTraceBreakdown;

/// Options of tp_trace_breakdown_with.
typedef struct TpTraceBreakdownOpts {
  int64_t gap;  ///< a queued gap shorter than this is launch latency (ns; <= 0: 30 us, as HTA)
} TpTraceBreakdownOpts;

/// The categories of memory the trace lets one tell apart (docs/memory.md), from where an
/// allocation was made and freed: the phase (forward, backward, optimizer) and step of each, and
/// whether it was freed before the op call that made it returned. `BEFORE` is what the allocator
/// held before the trace began (parameters, optimizer state, ...): counted at the peak only.
typedef enum TpTraceMemCat {
  TP_TRACE_MEM_BEFORE,      ///< allocated before the trace (or by events the reader could not pair)
  TP_TRACE_MEM_TEMPORARY,   ///< freed inside its op call, or in the phase and step it was made in
  TP_TRACE_MEM_ACTIVATION,  ///< made in forward, freed in the backward of the same step
  TP_TRACE_MEM_GRADIENT,    ///< made in backward, held past it (freed later, or never)
  TP_TRACE_MEM_AUTOGRAD,    ///< made in backward, freed in it (autograd's intermediates)
  TP_TRACE_MEM_OPTIMIZER,   ///< made in the optimizer step, held past its step
  TP_TRACE_MEM_OTHER,       ///< the rest: outside every op, or held past a forward-only step
  TP_TRACE_MEM_CATS,
} TpTraceMemCat;

/// The most devices a trace's memory events are kept for (more are counted in `other_devices`).
#define TP_TRACE_MEM_DEVICES 16

/// One point of a device's allocated and reserved curves (bytes at time ts, ns).
typedef struct TpTraceMemPoint {
  int64_t ts, allocated, reserved;
} TpTraceMemPoint;

/// One device's memory over the trace, from the profiler's `[memory]` events (Kineto's instant
/// events with Addr, Bytes, Total Allocated, Total Reserved, Device Type, Device Id). Bytes; times
/// in ns. docs/memory.md defines each figure.
typedef struct TpTraceMemDevice {
  int16_t type, id;  ///< Device Type (c10::DeviceType: 0 CPU, 1 CUDA, 6 HIP...) and Device Id
  uint64_t events, allocs, frees;
  int64_t alloc_bytes, free_bytes;  ///< sums of the positive Bytes, and of the negative negated
  int64_t before;  ///< Total Allocated before the first event (its total - its Bytes)
  int64_t first_ts, last_ts;
  int64_t peak, peak_ts;                  ///< the largest Total Allocated, its first time
  int64_t peak_reserved;                  ///< Total Reserved at that event
  uint32_t peak_key;                      ///< key id + 1 of the op it happened in, 0: none
  uint32_t peak_step;                     ///< index into t->steps of its step, or TP_TRACE_NO_STEP
  uint8_t peak_phase;                     ///< TP_TRACE_PHASE_* at the peak
  int64_t reserved_max, reserved_max_ts;  ///< the largest Total Reserved, its first time
  int64_t slack_max;  ///< the largest Total Reserved - Total Allocated at one event
  int64_t end_allocated, end_reserved;   ///< the totals at the latest event (by time)
  int64_t live_end;                      ///< bytes allocated in the trace and not freed by its end
  int64_t at_peak[TP_TRACE_MEM_CATS];    ///< the peak's bytes by category (they add up to `peak`)
  int64_t cat_bytes[TP_TRACE_MEM_CATS];  ///< bytes allocated in the trace by category
  uint64_t unpaired_frees;  ///< frees of an address not allocated in the trace (or its events)
  uint64_t size_mismatch;   ///< frees whose size is not the size allocated at that address
  uint64_t realloc;         ///< allocations at an address still live (its free never seen)
  uint64_t no_addr;         ///< events without an address: not paired
  uint64_t derived_total;   ///< events without a valid Total Allocated: derived from the last one
  uint64_t bad_total;       ///< of those, events whose Total Allocated is negative or too large
  uint64_t no_reserved;     ///< events without a valid Total Reserved
  uint64_t untracked;       ///< allocations left out of the live map (over its bound)
  const TpTraceMemPoint *curve;  ///< the allocated and reserved curves, in time order
  size_t ncurve;                 ///< points (every event, or each bucket's highest when many)
  uint64_t curve_stride;         ///< events per point (1: every event)
} TpTraceMemDevice;

/// One device in one profiler step (or the events in no step: TpTraceMemStep.step ==
/// TP_TRACE_NO_STEP). Bytes; times in ns.
typedef struct TpTraceMemStep {
  uint32_t step;   ///< index into t->steps, or TP_TRACE_NO_STEP
  uint8_t device;  ///< index into TpTraceMem.devices
  uint64_t events, allocs, frees;
  int64_t alloc_bytes, free_bytes;
  int64_t start, end;     ///< Total Allocated before its first event and after its last
  int64_t peak, peak_ts;  ///< the largest Total Allocated in it, its first time
  uint32_t peak_key;      ///< key id + 1 of the op it happened in, 0: none
  uint8_t peak_phase;
  int64_t phase_peak[TP_TRACE_PHASES];   ///< the largest Total Allocated in each phase (-1: none)
  int64_t phase_bytes[TP_TRACE_PHASES];  ///< bytes allocated in each phase
  int64_t reserved_max;
  int64_t held;       ///< bytes allocated in the step and still live at its end
  int64_t temporary;  ///< bytes allocated and freed inside one op call (short-lived)
} TpTraceMemStep;

/// The memory one op (a CPU range's key) asked for on one device: the allocations made while it
/// was the innermost op running (allocator ops such as aten::empty count for the op that called
/// them). Bytes.
typedef struct TpTraceMemOp {
  uint32_t key;    ///< key id + 1, 0: outside every range
  uint8_t device;  ///< index into TpTraceMem.devices
  uint64_t allocs, frees;
  int64_t bytes, freed;  ///< allocated; freed (of what it allocated)
  int64_t temporary;     ///< freed inside the op call that made it
  int64_t at_peak;       ///< live at the device's peak
  int64_t live_end;      ///< live at the end of the trace
  uint64_t phase_allocs[TP_TRACE_PHASES];
} TpTraceMemOp;

/// The memory figures of a trace (tp_trace_memory). Arrays live as long as the trace.
typedef struct TpTraceMem {
  uint64_t events;         ///< `[memory]` events read
  uint64_t skipped;        ///< events left out: no Bytes, or a Bytes, Total or Addr out of range
  uint64_t other_devices;  ///< events of devices past TP_TRACE_MEM_DEVICES
  uint64_t unattributed;   ///< events whose thread's ranges could not be walked in time order
  uint64_t late_ranges;    ///< CPU ranges read after memory events they may hold
  uint64_t late_steps;     ///< profiler steps read after memory events they may hold
  const TpTraceMemDevice *devices;
  size_t ndevices;
  const TpTraceMemStep *steps;  ///< per (step, device), steps in time order
  size_t nsteps;
  const TpTraceMemOp *ops;  ///< per (key, device), in no particular order
  size_t nops;
} TpTraceMem;

/// Where a collective's metadata came from.
enum {
  TP_TRACE_COLL_NONE,    ///< nowhere: an NCCL/RCCL kernel with no args and no record_param_comms
  TP_TRACE_COLL_KERNEL,  ///< the kernel's own args (Kineto copies them from record_param_comms)
  TP_TRACE_COLL_CPU,     ///< the record_param_comms CPU op that launched it
};

/// One NCCL or RCCL GPU op with the message it moved (docs/collectives.md): from its own args
/// ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group
/// Name", "Process Group Ranks", "Seq", "Rank") and those of the record_param_comms CPU op it was
/// launched in. Times in ns; -1 (0 for texts, group and dtype_size) where unknown.
typedef struct TpTraceColl {
  int64_t ts, dur;
  int64_t in_nelems, out_nelems;
  int64_t group;                    ///< ranks in its process group
  int64_t seq;                      ///< the process group's sequence number of the collective
  int64_t rank;                     ///< the rank that recorded it
  uint32_t name;                    ///< its op name id
  uint32_t step;                    ///< index into the steps (its launch's), or TP_TRACE_NO_STEP
  uint32_t coll, dtype, pg, ranks;  ///< texts (tp_trace_coll_text): collective, type, group
  uint32_t corr;                    ///< args.correlation, or UINT32_MAX
  int16_t stream;
  uint8_t dtype_size;  ///< bytes per element
  uint8_t source;      ///< TP_TRACE_COLL_*
} TpTraceColl;
