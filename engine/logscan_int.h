// Internals of the log scanner shared by logscan.c (input, storage, accessors) and
// logscan_parse.c (line normalisation and the per-framework line parsers). Not a public API.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "logscan.h"

// Anchor search: every line worth a closer look contains one of the anchors (fixed strings).
// They are found with a strided 4-byte-gram filter: positions p, p+6, p+12, ... are hashed and
// looked up in a bitmap of the grams the anchors contain; any anchor of 9 bytes or more has a
// gram at one of these positions (one per residue class of the stride is registered, the rarest
// by a byte-frequency estimate), so only candidates are compared in full.
#define LS_GRAM       4
#define LS_MIN_ANCHOR 9
#define LS_STRIDE     (LS_MIN_ANCHOR - LS_GRAM + 1)
#define LS_HASH_BITS  15
#define LS_HASH_SIZE  (1u << LS_HASH_BITS)

typedef struct LsAnchor {
  const char *text;
  uint8_t len;
  uint8_t id;   // LsAnchorId
  uint8_t sub;  // signature or fact number for LA_SIGNATURE / LA_FACT
} LsAnchor;

typedef struct LsGramEnt {
  uint16_t anchor;  // index in the anchor table
  uint8_t off;      // offset of the gram inside the anchor
  int16_t next;     // next entry with the same hash, -1 at the end
} LsGramEnt;

typedef struct LsIndex {
  LsAnchor *anchors;  // fixed anchors, then one per failure signature
  uint64_t *prefix;   // first 8 bytes of each anchor, for a one-load pre-check
  size_t nanchors;
  uint8_t hit[LS_HASH_SIZE];  // 1 where some registered gram hashes
  int16_t head[LS_HASH_SIZE];
  LsGramEnt *ents;
  size_t nents;
  // Gram frequencies sampled from the input: the registered gram of each anchor and residue is
  // re-chosen as the rarest one in this log (every LS_ADAPT_EVERY bytes), so the filter stays
  // selective whatever the log's vocabulary (NCCL chatter, Python warnings, ...).
  uint32_t *counts;
  uint64_t scanned;
  uint64_t next_adapt;
} LsIndex;

#define LS_ADAPT_EVERY  (32u << 20)
#define LS_ADAPT_SAMPLE (256u << 10)

// A record being built (by a built-in parser or a line hook).
typedef struct LsPend {
  bool active;
  uint64_t present;
  double v[TP_LOG_F_COUNT];
  bool derived;
  TpBuf kv;  // packed entries, see kv_put in logscan.c
  size_t nlosses;
  char ts[64];
  size_t ts_len;
  bool has_key;
  int64_t key;       // rank key for the multi-rank rule
  bool cut;          // the line stops mid-field
  bool megatron;     // Megatron-family line (NaN rule of LOG_FORMATS.md 2.2 applies)
  bool loss_region;  // the segments after the losses were reached (loss absence is real)
} LsPend;

// A stored record: values of the present fields in field order in dpool, strings in spool.
typedef struct LsRec {
  uint64_t present;
  size_t dofs;
  size_t sofs;  // spool: [u8 ts_len][ts][kv bytes]
  uint32_t kv_len;
  uint16_t nlosses;
  uint8_t derived;
  uint8_t has_key;
  uint32_t epoch;  // restart epoch when stored (copies are only dropped within one)
  int64_t key;
} LsRec;

typedef struct LsArgEnt {
  size_t name_ofs, val_ofs;
  uint32_t name_len, val_len;
} LsArgEnt;

typedef struct LsArgs {
  TpBuf pool;
  LsArgEnt *ents;
  size_t n, cap;
} LsArgs;

typedef struct LsDiagAcc {
  bool seen;
  TpLogSeverity sev;
  uint64_t line, first_line, count;
  char *msg;
} LsDiagAcc;

// Line-handling modes: inside an argument dump every line is examined.
enum { LS_MODE_NORMAL, LS_MODE_ARGS, LS_MODE_PRIMUS_ARGS };

// Record families, locked by the first record line (auto-detection).
enum { LS_FAM_NONE, LS_FAM_MEGATRON, LS_FAM_NEMO, LS_FAM_TORCHTITAN, LS_FAM_CUSTOM };

struct TpLogScan {
  TpLogScanOpts opts;
  LsIndex index;
  bool finished;
  int failed;  // sticky failure code
  char fail_msg[256];

  // Input state.
  TpBuf carry;         // unterminated segment waiting for its separator
  bool skipping;       // inside an over-long segment: discard up to the next separator
  uint64_t skip_line;  // line where the skipped segment started
  uint64_t skip_bytes;
  uint64_t nl;  // '\n' seen so far (line of the current position = nl + 1)
  uint64_t bytes;
  size_t head_seen;  // bytes of the stream head checked for binary content
  size_t head_ctrl;  // control bytes among them
  bool head_binary;
  char last_byte;
  uint64_t last_content_line;  // last line with something other than blanks

  TpBuf norm;  // scratch: the current segment without escape sequences

  int mode;
  uint64_t mode_lines;

  // Detection.
  int family;
  unsigned families;  // record families allowed (bit per LS_FAM_*)
  bool primus_seen;   // Primus logger prefix or Primus-only segments seen
  int custom_id;

  // Records.
  LsRec *recs;
  size_t nrecs, caprecs;
  double *dpool;
  size_t ndpool, capdpool;
  TpBuf spool;
  size_t reported;
  LsPend pend;
  bool have_sel;
  int64_t sel_key;
  uint32_t epoch;
  bool last_has;  // the previous kept record (copy filter)
  double last_iter;
  uint32_t last_epoch;
  bool last_rec_cut;  // the last record line stopped mid-field
  uint64_t last_rec_line;
  double prev_skipped;  // skipped counter of the previous Megatron record (-1 unknown)
  bool loss_seen;       // a record with a loss was kept
  uint64_t skipped_total;
  bool skipped_after_loss;

  // Start-up facts for derived torchtitan step times.
  double tt_local_bs, tt_seq_len, tt_grad_accum, tt_tokens_per_rank, tt_non_dp, tt_gbs;
  double tt_world;
  bool tt_pp_seen;  // a placeholder loss was seen: pipeline parallel, pp > 1
  bool sel_loss;    // the selected rank's kept records carry a loss (PP: the last stage)
  bool last_loss;   // the previous kept record has a loss

  // Other extracted data.
  LsArgs args[2];
  bool args_full[2];      // TP_LOGSCAN_MAX_ARGS_BYTES reached (diagnosed once)
  bool tt_args_seen;      // a torchtitan job config was read
  uint64_t tt_args_hash;  // FNV-1a of its text: copies printed by other ranks are skipped
  TpLogShard *shards;
  size_t nshards, capshards;
  TpLogParams params;
  TpLogMemReport *mem;
  size_t nmem, capmem;
  TpLogTheoretical theo;
  TpLogMeta meta;
  char *meta_str[TP_LOG_MS_COUNT];
  LsDiagAcc diags[TP_LOG_D_COUNT];
  bool crash_from_traceback;  // the crash message can still take the exception line
  TpLogDiag *diag_view;
  size_t ndiag_view;
  bool diag_dirty;
};

// One normalised line (segment) as the parsers see it.
typedef struct LsText {
  const char *p;
  size_t n;
} LsText;

typedef struct LsLine {
  const char *p;  // payload after launcher/logger prefixes (in s->norm)
  size_t n;
  const char *full;  // the whole line without escape sequences
  size_t full_n;
  uint64_t lineno;
  bool terminated;
  bool has_nul;
  // Rank: srun task id, torchrun/PyTorch "[xxxN]:" rank, Primus "[rank-R/W]".
  bool has_task, has_local, has_primus;
  long task, local, primus_rank, primus_world;
  // Timestamps found in prefixes.
  LsText ts_bracket;  // "[YYYY-MM-DD HH:MM:SS(.f)]" (Megatron's own, or a launcher's)
  LsText ts_primus;   // Primus logger "YYYYMMDD HH:MM:SS"
  LsText ts_iso;      // external "[YYYY-MM-DDTHH:MM:SS+zz:zz]"
  LsText ts_titan;    // torchtitan logger "YYYY-MM-DD HH:MM:SS,mmm"
  LsText ts_nemo;     // NeMo logger "YYYY-MM-DD HH:MM:SS"
} LsLine;

// Anchor identifiers (what a matched anchor announces).
typedef enum LsAnchorId {
  LA_ITERATION,
  LA_NEMO_EPOCH,
  LA_NEMO_STEP,
  LA_TT_STEP,
  LA_ARGS_RULE,
  LA_PARAMETERS,
  LA_MEMORY_REPORT,
  LA_THEORETICAL,
  LA_SIGNATURE,  // failure signature (table in logscan_parse.c)
  LA_FACT,       // run fact (meta) line
} LsAnchorId;

// logscan_parse.c
size_t ls_anchor_count(void);
LsAnchor ls_anchor_get(size_t i);
int ls_process_segment(TpLogScan *s, const char *seg, size_t n, uint64_t lineno, bool terminated);
int ls_finish_parse(TpLogScan *s);

// logscan.c
int ls_diag(TpLogScan *s, TpLogDiagKind kind, TpLogSeverity sev, uint64_t line, const char *what,
            const char *excerpt, size_t excerpt_len);
// Replaces the message of an existing diagnostic ("<what>: <excerpt>").
int ls_diag_message(TpLogScan *s, TpLogDiagKind kind, const char *what, const char *excerpt,
                    size_t excerpt_len);
int ls_arg_add(TpLogScan *s, TpLogArgDump which, const char *name, size_t nlen, const char *val,
               size_t vlen);
int ls_shard_add(TpLogScan *s, long tp, long gtp, long pp, double count);
int ls_mem_add(TpLogScan *s, const TpLogMemReport *m);
void ls_meta_set(TpLogScan *s, TpLogMetaKey k, double v, bool override);
int ls_meta_str(TpLogScan *s, TpLogMetaStr k, const char *v, size_t n, bool override);
size_t ls_find_anchor(const TpLogScan *s, const char *base, size_t from, size_t to, size_t limit,
                      size_t *anchor);
// Calls fn for every anchor occurrence in b[0, n) (in probe order, not position order).
void ls_each_anchor(const TpLogScan *s, const char *b, size_t n,
                    void (*fn)(void *ud, const LsAnchor *a, size_t start), void *ud);
void ls_rec_set_key(TpLogScan *s, bool has_key, int64_t key);
