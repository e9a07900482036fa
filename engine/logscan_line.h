// One line of a log as the log scanner's parsers see it: terminal escape sequences removed,
// launcher and logger prefixes (srun, torchrun, Ray, TorchX, Primus, NeMo, torchtitan) stripped,
// with the rank and the timestamps those prefixes carried.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "logscan_lex.h"
#include "logscan_types.h"

// One normalised line (segment).
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
  // What the anchor filter found in the payload (filled by the dispatcher, logscan_parse.c).
  uint32_t anchors;  // bit per anchor id
  uint64_t facts;    // bit per run fact
  uint64_t sigs[2];  // bit per failure signature
} LsLine;

// Copies seg[0, n) into `norm` without terminal escape sequences (CSI "ESC [ ... final", OSC
// "ESC ] ... BEL|ESC \", two-byte ESC sequences), other control bytes turned into spaces, and
// NUL-terminated; *has_nul tells whether seg held a NUL byte. Returns 0 or TP_ENOMEM.
int ls_line_normalise(TpBuf *norm, const char *seg, size_t n, bool *has_nul);

// Sets L->p, L->n to L->full without the prefixes, noting their ranks and timestamps in L.
void ls_line_strip_prefixes(LsLine *L);

// Stores the pending record of line L: the fields every record takes from its line (rank, the
// rank key, line number), `cut` (the line was cut short), the record family locked to `family`
// (LS_FAM_NONE: none). Returns 1 (a record stored) or an error code.
int ls_line_rec_store(TpLogScan *s, const LsLine *L, bool cut, int family);
