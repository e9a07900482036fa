// Line normalisation of the log scanner: see logscan_line.h.
#include "logscan_line.h"

#include <stdint.h>
#include <string.h>

#include "logscan_num.h"
#include "logscan_rec.h"
#include "logscan_state.h"

// --- Normalisation ----------------------------------------------------------------------------

// Length of the leading run of bytes that are neither C0 controls nor DEL; eight bytes at a
// time ("has less than" and "has zero" word tests, Bit Twiddling Hacks).
static size_t plain_run(const char *p, size_t n) {
  const uint64_t ones = UINT64_C(0x0101010101010101), high = UINT64_C(0x8080808080808080);
  size_t i = 0;
  while (i + 8 <= n) {
    uint64_t x;
    memcpy(&x, p + i, 8);
    uint64_t lt = (x - ones * 0x20) & ~x & high;
    uint64_t y = x ^ (ones * 0x7f);
    uint64_t del = (y - ones) & ~y & high;
    if (lt | del) {
      break;
    }
    i += 8;
  }
  while (i < n && (unsigned char)p[i] >= 0x20 && p[i] != 0x7f) {
    i++;
  }
  return i;
}

int ls_line_normalise(TpBuf *b, const char *seg, size_t n, bool *has_nul) {
  b->len = 0;
  if (tp_buf_reserve(b, n + 1) != 0) {
    return TP_ENOMEM;
  }
  char *out = b->data;
  size_t o = 0;
  *has_nul = false;
  for (size_t i = 0; i < n;) {
    size_t k = plain_run(seg + i, n - i);
    if (k > 0) {
      memcpy(out + o, seg + i, k);
      o += k;
      i += k;
      continue;
    }
    unsigned char c = (unsigned char)seg[i];
    if (c == 0x1b) {
      if (i + 1 < n && seg[i + 1] == '[') {
        size_t j = i + 2;
        while (j < n && (unsigned char)seg[j] >= 0x20 && (unsigned char)seg[j] <= 0x3f) {
          j++;  // parameter bytes
        }
        while (j < n && (unsigned char)seg[j] >= 0x20 && (unsigned char)seg[j] <= 0x2f) {
          j++;  // intermediate bytes
        }
        i = j < n ? j + 1 : n;  // final byte
        continue;
      }
      if (i + 1 < n && seg[i + 1] == ']') {
        size_t j = i + 2;
        while (j < n && seg[j] != 0x07 && !(seg[j] == 0x1b && j + 1 < n && seg[j + 1] == '\\')) {
          j++;
        }
        i = j >= n ? n : (seg[j] == 0x07 ? j + 1 : j + 2);
        continue;
      }
      if (i + 1 < n && (seg[i + 1] == '(' || seg[i + 1] == ')')) {
        i += i + 2 < n ? 3 : 2;
        continue;
      }
      i += i + 1 < n ? 2 : 1;
      continue;
    }
    if (c == 0) {
      *has_nul = true;
    }
    if (c == 0x7f) {
      i++;
      continue;
    }
    out[o++] = c == '\t' ? '\t' : ' ';
    i++;
  }
  out[o] = '\0';
  b->len = o;
  return 0;
}

// "[YYYY-MM-DD HH:MM:SS(.f)]" or with 'T' and a zone: returns the bracket length.
static size_t bracket_time(const char *p, size_t n, LsText *ts, bool *iso) {
  if (n < 21 || p[0] != '[') {
    return 0;
  }
  const char *close = memchr(p, ']', n < 48 ? n : 48);
  if (!close) {
    return 0;
  }
  size_t len = (size_t)(close - p) - 1;
  double t;
  if (len < 19 || p[5] != '-' || !tp_logscan_parse_time(p + 1, len, &t)) {
    return 0;
  }
  *iso = p[11] == 'T';
  *ts = (LsText){p + 1, len};
  return len + 2;
}

// Primus logger prefix (primus/core/utils/logger.py, setup_logger):
// "[YYYYMMDD HH:MM:SS][rank-R/W][LEVEL]<pad> [----file.py:N] : " (v0.6+) or
// "[YYYYMMDD HH:MM:SS][rank-R/W][INFO ] " (older; the location part is optional).
static size_t pfx_primus(const char *p, size_t n, LsLine *L) {
  if (n < 30 || p[0] != '[' || p[9] != ' ' || p[18] != ']' || p[19] != '[') {
    return 0;
  }
  for (size_t i = 1; i < 9; i++) {
    if (!ls_is_digit(p[i])) {
      return 0;
    }
  }
  if (!LS_STARTS(p + 20, n - 20, "rank-")) {
    return 0;
  }
  size_t i = 25;
  long r, w;
  if (!ls_read_uint(p, n, &i, &r) || i >= n || p[i] != '/') {
    return 0;
  }
  i++;
  if (!ls_read_uint(p, n, &i, &w) || i + 1 >= n || p[i] != ']' || p[i + 1] != '[') {
    return 0;
  }
  const char *close = memchr(p + i + 2, ']', n - i - 2 < 16 ? n - i - 2 : 16);
  if (!close) {
    return 0;
  }
  i = (size_t)(close - p) + 1;
  L->has_primus = true;
  L->primus_rank = r;
  L->primus_world = w;
  L->ts_primus = (LsText){p + 1, 17};
  size_t j = ls_skip_spaces(p, n, i);
  if (j < n && p[j] == '[') {
    const char *loc_end = memchr(p + j, ']', n - j);
    if (loc_end && (size_t)(loc_end - p) + 3 <= n && loc_end[1] == ' ' && loc_end[2] == ':') {
      j = (size_t)(loc_end - p) + 3;
      if (j < n && p[j] == ' ') {
        j++;  // the logger's own separator; Megatron's leading space stays
      }
      return j;
    }
  }
  return j;
}

// "[name N]:" as written by torchrun --tee (role + local rank) and by PyTorch (global rank).
static size_t pfx_rank(const char *p, size_t n, long *rank) {
  size_t i = 1;
  while (i < n && i < 24 && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z'))) {
    i++;
  }
  if (i == 1) {
    return 0;
  }
  if (!ls_read_uint(p, n, &i, rank) || i + 1 >= n || p[i] != ']' || p[i + 1] != ':') {
    return 0;
  }
  return i + 2;
}

// torchtitan logger (torchtitan/tools/logging.py, init_logger):
// "[titan] YYYY-MM-DD HH:MM:SS,mmm - name - LEVEL - ".
static size_t pfx_titan(const char *p, size_t n, LsLine *L) {
  if (!LS_STARTS(p, n, "[titan] ") || n < 8 + 23) {
    return 0;
  }
  double t;
  if (!tp_logscan_parse_time(p + 8, 23, &t)) {
    return 0;
  }
  L->ts_titan = (LsText){p + 8, 23};
  // Skip " - name - LEVEL - ".
  size_t i = 8 + 23;
  for (int k = 0; k < 3; k++) {
    const char *d = LS_FIND(p + i, n - i, " - ");
    if (!d) {
      return 8 + 23;
    }
    i = (size_t)(d - p) + 3;
  }
  return i;
}

// NeMo logger (nemo/utils/formatters/base.py, BaseNeMoFormatter):
// "[NeMo X YYYY-MM-DD HH:MM:SS module:line] ".
static size_t pfx_nemo(const char *p, size_t n, LsLine *L) {
  if (!LS_STARTS(p, n, "[NeMo ") || n < 8 + 20) {
    return 0;
  }
  const char *close = memchr(p, ']', n < 160 ? n : 160);
  if (!close) {
    return 0;
  }
  double t;
  if (tp_logscan_parse_time(p + 8, 19, &t)) {
    L->ts_nemo = (LsText){p + 8, 19};
  }
  size_t i = (size_t)(close - p) + 1;
  return i < n && p[i] == ' ' ? i + 1 : i;
}

// SkyPilot / Ray "(name, pid=N) " and Primus' launcher "(PrimusMaster  pid=N) ".
static size_t pfx_pid(const char *p, size_t n) {
  const char *close = memchr(p, ')', n < 96 ? n : 96);
  if (!close) {
    return 0;
  }
  size_t len = (size_t)(close - p);
  const char *pid = LS_FIND(p, len, "pid=");
  if (!pid) {
    return 0;
  }
  for (const char *q = pid + 4; q < close; q++) {
    if (!ls_is_digit(*q)) {
      return 0;
    }
  }
  size_t i = len + 1;
  return i < n && p[i] == ' ' ? i + 1 : i;
}

// srun --label: "   1:  " (task id right-aligned, then ": ").
static size_t pfx_srun(const char *p, size_t n, long *task) {
  size_t i = 0;
  if (!ls_read_uint(p, n, &i, task) || i >= n || p[i] != ':' || i > 6) {
    return 0;
  }
  i++;
  if (i < n && p[i] != ' ') {
    return 0;
  }
  return i < n ? i + 1 : i;
}

// TorchX (NeMo-Run local executor): the role name cut to its last 10 characters, '/', the
// replica index, one space: "ining-demo/0 ".
static size_t pfx_torchx(const char *p, size_t n) {
  size_t i = 0;
  while (i < n && i < 11 && (ls_is_ident(p[i]) || p[i] == '-' || p[i] == '.')) {
    i++;
  }
  if (i == 0 || i > 10 || i >= n || p[i] != '/') {
    return 0;
  }
  i++;
  long idx;
  if (!ls_read_uint(p, n, &i, &idx) || i >= n || p[i] != ' ') {
    return 0;
  }
  return i + 1;
}

void ls_line_strip_prefixes(LsLine *L) {
  const char *p = L->full;
  size_t n = L->full_n;
  for (int round = 0; round < 16; round++) {
    size_t i = ls_skip_spaces(p, n, 0);
    p += i;
    n -= i;
    if (n == 0) {
      break;
    }
    size_t k = 0;
    long v;
    if (p[0] == '[') {
      bool iso = false;
      LsText ts;
      if ((k = pfx_primus(p, n, L)) > 0) {
      } else if ((k = bracket_time(p, n, &ts, &iso)) > 0) {
        if (iso) {
          L->ts_iso = ts;
        } else {
          L->ts_bracket = ts;
        }
      } else if ((k = pfx_titan(p, n, L)) > 0) {
      } else if ((k = pfx_nemo(p, n, L)) > 0) {
      } else if ((k = pfx_rank(p, n, &v)) > 0) {
        if (!L->has_local) {
          L->has_local = true;
          L->local = v;
        }
      }
    } else if (p[0] == '(') {
      k = pfx_pid(p, n);
    } else if (ls_is_digit(p[0])) {
      if ((k = pfx_srun(p, n, &v)) > 0) {
        if (!L->has_task) {
          L->has_task = true;
          L->task = v;
        }
      } else {
        k = pfx_torchx(p, n);
      }
    } else {
      k = pfx_torchx(p, n);
    }
    if (k == 0) {
      break;
    }
    p += k;
    n -= k;
  }
  LsText t = ls_trim(p, n);
  L->p = t.p;
  L->n = t.n;
}

// Rank reported with a record, and the key that orders ranks for the selection rule.
static void line_rank(const LsLine *L, bool *has_rank, long *rank, bool *has_key, int64_t *key) {
  *has_rank = *has_key = false;
  *rank = 0;
  *key = 0;
  if (L->has_primus) {
    *has_rank = *has_key = true;
    *rank = L->primus_rank;
    *key = L->primus_rank;
  } else if (L->has_local || L->has_task) {
    *has_rank = *has_key = true;
    *rank = L->has_local ? L->local : L->task;
    *key = (int64_t)(L->has_task ? L->task : 0) * 65536 + (L->has_local ? L->local : 0);
  }
}

static void line_rec_common(TpLogScan *s, const LsLine *L) {
  bool has_rank, has_key;
  long rank;
  int64_t key;
  line_rank(L, &has_rank, &rank, &has_key, &key);
  if (has_rank) {
    tp_logscan_rec_set(s, TP_LOG_F_RANK, (double)rank);
  }
  ls_rec_set_key(s, has_key, key);
  tp_logscan_rec_set(s, TP_LOG_F_LINE, (double)L->lineno);
}

int ls_line_rec_store(TpLogScan *s, const LsLine *L, bool cut, int family) {
  s->pend.cut = cut;
  line_rec_common(s, L);
  ls_family_lock(s, family);
  int rc = tp_logscan_rec_commit(s);
  return rc ? rc : 1;
}
