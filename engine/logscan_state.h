// The log scanner's state (struct TpLogScan) and the mutators every line parser shares:
// diagnostics, argument dumps, parameter shards, memory reports and run facts (meta), plus the
// UTF-8 hygiene of every string handed out. Internal to the scanner (engine/logscan*.c).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "logscan_index.h"
#include "logscan_types.h"

// A record being built (by a built-in parser or a line hook).
typedef struct LsPend {
  bool active;
  uint64_t present;
  double v[TP_LOG_F_COUNT];
  bool derived;
  TpBuf kv;  // packed entries, see kv_put in logscan_rec.c
  size_t nlosses;
  char ts[64];
  size_t ts_len;
  bool has_key;
  int64_t key;        // rank key for the multi-rank rule
  bool cut;           // the line stops mid-field
  bool megatron;      // Megatron-family line (NaN rule of LOG_FORMATS.md 2.2 applies)
  bool loss_region;   // the segments after the losses were reached (loss absence is real)
  bool from_counter;  // the iteration was read from a progress bar's counter, not printed
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
  // The previous kept record's iteration came from a progress bar's counter: a later refresh
  // of the same bar with the same iteration replaces it (its postfix is the newer one).
  bool last_from_counter;
  uint64_t nstored;  // records stored so far, replacements included

  // NeMo / Lightning TQDM bar: global_step - counter, from the last record stored with both
  // (logscan_nemo.c), for the bar of epoch bar_ep within restart epoch bar_restart.
  bool bar_known;
  long bar_ep;
  uint32_t bar_restart;
  double bar_off;

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

// Appends p[0, n) as valid UTF-8: invalid sequences become U+FFFD, control bytes a space.
// Returns 0 or TP_ENOMEM.
int ls_utf8_append(TpBuf *b, const char *p, size_t n);

// Lines seen so far ('\n' count, plus one for an unterminated last line).
uint64_t ls_lines(const TpLogScan *s);

// Whether a record line of family `fam` may be read (the family is free or already that one,
// and the forced format allows it), and locking the family after its first record.
bool ls_family_allows(const TpLogScan *s, int fam);
void ls_family_lock(TpLogScan *s, int fam);

// Notes a diagnostic: the first match of the most severe kind keeps the message
// "<what>: <excerpt>" (excerpt cut, made valid UTF-8); every match counts.
int ls_diag(TpLogScan *s, TpLogDiagKind kind, TpLogSeverity sev, uint64_t line, const char *what,
            const char *excerpt, size_t excerpt_len);
// Replaces the message of an existing diagnostic ("<what>: <excerpt>").
int ls_diag_message(TpLogScan *s, TpLogDiagKind kind, const char *what, const char *excerpt,
                    size_t excerpt_len);

// Adds one argument to a dump (bounded by TP_LOGSCAN_MAX_ARGS_BYTES, diagnosed once).
int ls_arg_add(TpLogScan *s, TpLogArgDump which, const char *name, size_t nlen, const char *val,
               size_t vlen);
// Adds (or updates) the parameter count of one model-parallel shard.
int ls_shard_add(TpLogScan *s, long tp, long gtp, long pp, double count);
int ls_mem_add(TpLogScan *s, const TpLogMemReport *m);
// Sets a run fact; a finite value only, and without `override` only when it is not known yet.
void ls_meta_set(TpLogScan *s, TpLogMetaKey k, double v, bool override);
int ls_meta_str(TpLogScan *s, TpLogMetaStr k, const char *v, size_t n, bool override);
