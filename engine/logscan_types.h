// Types of the log scanner's public API (engine/logscan.h): the record contract, diagnostics,
// run facts, parameter counts, memory reports, argument dumps, hooks and options. Declarations
// only: every module of the scanner includes it, from the record store up to the driver.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Log families the scanner knows. TP_LOG_FORMAT_CUSTOM means a line hook (a parser registered
/// by the caller) produced the records.
typedef enum TpLogFormat {
  TP_LOG_FORMAT_NONE = 0,
  TP_LOG_FORMAT_MEGATRON,
  TP_LOG_FORMAT_PRIMUS,
  TP_LOG_FORMAT_NEMO,
  TP_LOG_FORMAT_TORCHTITAN,
  TP_LOG_FORMAT_CUSTOM,
} TpLogFormat;

/// Numeric fields of an iteration record, in the order of the shared record contract.
typedef enum TpLogField {
  TP_LOG_F_ITERATION,
  TP_LOG_F_TRAIN_ITERS,
  TP_LOG_F_EPOCH,
  TP_LOG_F_EPOCH_ITERATION,
  TP_LOG_F_STEP_TIME_S,
  TP_LOG_F_LOSS,
  TP_LOG_F_LR,
  TP_LOG_F_GRAD_NORM,
  TP_LOG_F_LOSS_SCALE,
  TP_LOG_F_PARAMS_NORM,
  TP_LOG_F_NUM_ZEROS,
  TP_LOG_F_SKIPPED_ITERATIONS,
  TP_LOG_F_NAN_ITERATIONS,
  TP_LOG_F_CONSUMED_SAMPLES,
  TP_LOG_F_CONSUMED_TOKENS,
  TP_LOG_F_SKIPPED_SAMPLES,
  TP_LOG_F_GLOBAL_BATCH_SIZE,
  TP_LOG_F_TFLOPS_PER_GPU,
  TP_LOG_F_TOKENS_PER_S_PER_GPU,
  TP_LOG_F_MFU_PCT,
  TP_LOG_F_MEM_ALLOCATED_GIB,
  TP_LOG_F_MEM_MAX_ALLOCATED_GIB,
  TP_LOG_F_MEM_RESERVED_GIB,
  TP_LOG_F_MEM_MAX_RESERVED_GIB,
  TP_LOG_F_MEM_DEVICE_USED_GIB,
  TP_LOG_F_MEM_DEVICE_TOTAL_GIB,
  TP_LOG_F_MEM_USAGE_FRACTION,
  TP_LOG_F_ENERGY_J_PER_GPU,
  TP_LOG_F_POWER_W_PER_GPU,
  TP_LOG_F_TIME_S,
  TP_LOG_F_RANK,
  TP_LOG_F_LINE,
  TP_LOG_F_COUNT
} TpLogField;

/// One iteration record as seen through the accessors. Pointers stay valid until the next call
/// that feeds, finishes or frees the scanner.
typedef struct TpLogRecord {
  uint64_t present;          ///< bit f set when field f is in v[f]
  double v[TP_LOG_F_COUNT];  ///< values; meaningless where the bit is clear
  bool step_time_derived;    ///< step_time_s was computed, not printed (torchtitan)
  const char *timestamp;     ///< timestamp text as printed, or NULL
  size_t timestamp_len;
  const unsigned char *kv;  ///< packed losses and unknown labels (tp_logscan_kv_next)
  size_t kv_len;
  size_t nlosses;  ///< number of loss entries in kv
} TpLogRecord;

/// Kinds of the key/value entries attached to a record.
typedef enum TpLogKvKind {
  TP_LOG_KV_LOSS,   ///< a loss: name and numeric value
  TP_LOG_KV_EXTRA,  ///< a label the parser does not know: name and the raw value text
} TpLogKvKind;

typedef struct TpLogKv {
  TpLogKvKind kind;
  const char *name;
  size_t name_len;
  double num;       ///< TP_LOG_KV_LOSS
  const char *str;  ///< TP_LOG_KV_EXTRA
  size_t str_len;
} TpLogKv;

/// Diagnostic kinds (failure signatures and input problems).
typedef enum TpLogDiagKind {
  TP_LOG_D_OOM,
  TP_LOG_D_MEMORY_PRESSURE,  ///< OOM precursors (allocator retries, mapping failures)
  TP_LOG_D_NCCL_TIMEOUT,
  TP_LOG_D_NCCL_ERROR,
  TP_LOG_D_NCCL_WARNING,  ///< "NCCL WARN" lines (often harmless, sometimes before a failure)
  TP_LOG_D_GPU_FAULT,
  TP_LOG_D_NAN_LOSS,
  TP_LOG_D_SKIPPED_ITERATIONS,
  TP_LOG_D_LOSS_SPIKE,
  TP_LOG_D_PREEMPTED,
  TP_LOG_D_CRASH,
  TP_LOG_D_TRUNCATED,
  TP_LOG_D_RESTART,
  TP_LOG_D_LONG_LINE,
  TP_LOG_D_BINARY,
  TP_LOG_D_EMPTY,
  TP_LOG_D_UNRECOGNISED,
  TP_LOG_D_BAD_ARGS,  ///< an argument dump that cannot be read (torchtitan job config), or too many
  TP_LOG_D_TIMEOUT,   ///< stopped at a time limit (Slurm, Megatron --exit-duration-in-mins)
  TP_LOG_D_CANCELLED,     ///< cancelled by a user or the scheduler (Slurm "CANCELLED AT")
  TP_LOG_D_NODE_FAILURE,  ///< a node of the job failed (Slurm)
  TP_LOG_D_SIGNAL,        ///< the launcher or a worker was stopped by a signal (SIGTERM, ...)
  TP_LOG_D_COUNT
} TpLogDiagKind;

typedef enum TpLogSeverity {
  TP_LOG_SEV_INFO,
  TP_LOG_SEV_WARNING,
  TP_LOG_SEV_ERROR,
} TpLogSeverity;

/// One diagnostic: the first match of the most severe signature of its kind.
typedef struct TpLogDiag {
  TpLogDiagKind kind;
  TpLogSeverity severity;
  uint64_t line;        ///< 1-based line of the match the message describes (0: none)
  uint64_t first_line;  ///< 1-based line of the first match of this kind (0: none)
  uint64_t count;       ///< number of matching lines (or records)
  const char *message;  ///< "<what>: <excerpt>", NUL-terminated UTF-8
} TpLogDiag;

/// Numeric run facts the log states (TpLogMeta.num).
typedef enum TpLogMetaKey {
  TP_LOG_M_GLOBAL_BATCH_SIZE,
  TP_LOG_M_SEQ_LEN,
  TP_LOG_M_WORLD_SIZE,
  TP_LOG_M_TRAIN_ITERS,
  TP_LOG_M_MICRO_BATCH_SIZE,
  TP_LOG_M_LOCAL_BATCH_SIZE,
  TP_LOG_M_GRAD_ACCUM,
  TP_LOG_M_TP,
  TP_LOG_M_PP,
  TP_LOG_M_CP,
  TP_LOG_M_DP,
  TP_LOG_M_EP,
  TP_LOG_M_LR,
  TP_LOG_M_SEED,
  TP_LOG_M_PEAK_FLOPS,
  TP_LOG_M_EXIT_CODE,
  TP_LOG_M_TOKENS_PER_STEP,
  TP_LOG_M_COUNT
} TpLogMetaKey;

/// String run facts the log states.
typedef enum TpLogMetaStr {
  TP_LOG_MS_PRECISION,          ///< "bf16", "fp16", "fp8" or "fp32"
  TP_LOG_MS_FRAMEWORK_VERSION,  ///< version the framework printed
  TP_LOG_MS_BACKEND,            ///< backend run by Primus ("megatron", "torchtitan")
  TP_LOG_MS_BACKEND_VERSION,    ///< version of that backend (Primus prints it)
  TP_LOG_MS_DEVICE_NAME,
  TP_LOG_MS_COUNT
} TpLogMetaStr;

typedef struct TpLogMeta {
  uint32_t present;  ///< bit k set when num[k] is known
  double num[TP_LOG_M_COUNT];
  const char *str[TP_LOG_MS_COUNT];  ///< NUL-terminated, or NULL
  bool completed;                    ///< an end-of-training marker was seen
} TpLogMeta;

/// Shard line of a parameter count: (tensor, [gtp,] pipeline) rank and its count.
typedef struct TpLogShard {
  long tp;
  long gtp;  ///< -1 for the two-index form
  long pp;
  double count;
} TpLogShard;

typedef struct TpLogParams {
  bool present;  ///< any parameter count was seen
  bool has_total;
  double total;  ///< printed total, or sum over distinct shards
  bool has_trainable;
  double trainable;
  bool has_dense;  ///< torchtitan "Total parameter count: dense, sparse, active"
  double dense, sparse, active;
  bool has_billions;  ///< Megatron's theoretical "Total number of parameters in billions"
  double billions;
  size_t nshards;
  const TpLogShard *shards;
} TpLogParams;

/// Bits of TpLogMemReport.present.
enum {
  TP_LOG_MEM_RANK = 1u << 0,
  TP_LOG_MEM_AFTER = 1u << 1,
  TP_LOG_MEM_ALLOCATED = 1u << 2,
  TP_LOG_MEM_MAX_ALLOCATED = 1u << 3,
  TP_LOG_MEM_RESERVED = 1u << 4,
  TP_LOG_MEM_MAX_RESERVED = 1u << 5,
  TP_LOG_MEM_DEVICE_USED = 1u << 6,
};

/// Megatron's report_memory line, converted from MiB to GiB.
typedef struct TpLogMemReport {
  uint32_t present;
  long rank;
  long after_iterations;
  double allocated_gib, max_allocated_gib, reserved_gib, max_reserved_gib, device_used_gib;
  uint64_t line;
} TpLogMemReport;

/// Megatron's "Theoretical memory footprints" line (values in MiB as printed "MB", and GiB).
typedef struct TpLogTheoretical {
  bool present;
  double weight_and_optimizer_mb, activation_mb, total_mb;
  uint64_t line;
} TpLogTheoretical;

/// Which argument dump. TP_LOG_ARGS_MEGATRON holds the framework's own arguments: Megatron's
/// `_print_args` dump, any dump in that layout (the NeMo driver's "nemo recipe arguments", with
/// dotted names such as `optim.config.lr`), and torchtitan's printed job config flattened to
/// dotted names (`optimizer.lr`). TP_LOG_ARGS_PRIMUS holds Primus' own `log_dict_aligned` dumps.
typedef enum TpLogArgDump {
  TP_LOG_ARGS_MEGATRON,
  TP_LOG_ARGS_PRIMUS,
} TpLogArgDump;

/// Argument dumps (names and values together) beyond this many bytes are dropped with a
/// `bad_args` diagnostic, so that memory stays bounded whatever the log.
#define TP_LOGSCAN_MAX_ARGS_BYTES (16u * 1024u * 1024u)

typedef struct TpLogScan TpLogScan;

/// Called for every normalised line while no format is known, to let registered parsers claim
/// the log. Returns a positive parser id that recognised the line, 0 for none, negative to abort
/// the feed (the hook sets the reason with tp_logscan_fail).
typedef int (*TpLogDetectHook)(void *ud, const char *line, size_t len);

/// Called for every normalised line once a registered parser owns the log (format CUSTOM).
/// Fills a record with tp_logscan_rec_* and returns 1 when the line was a record, 0 when not,
/// negative to abort.
typedef int (*TpLogLineHook)(void *ud, TpLogScan *s, int parser_id, const char *line, size_t len,
                             uint64_t lineno);

typedef struct TpLogScanOpts {
  TpLogFormat format;  ///< TP_LOG_FORMAT_NONE: detect; CUSTOM: custom_id owns the log
  int custom_id;       ///< with TP_LOG_FORMAT_CUSTOM
  long rank;           ///< keep only this rank's records; -1: rule of LOG_FORMATS.md 0.5
  double gbs;          ///< global batch size for derived step times (0: unknown)
  double seq_len;      ///< sequence length for derived step times (0: unknown)
  double gpus;         ///< GPUs of the run for derived step times (0: unknown)
  TpLogDetectHook detect;
  TpLogLineHook line;
  void *hook_ud;
} TpLogScanOpts;
