// The log scanner's record store: see logscan_rec.h. Records are packed: the values of the
// present fields in dpool, the timestamp and the key/value entries in spool.
#include "logscan_rec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logscan_num.h"
#include "logscan_state.h"

// --- Fields -----------------------------------------------------------------------------------

static const char *const field_names[TP_LOG_F_COUNT] = {
    "iteration",
    "train_iters",
    "epoch",
    "epoch_iteration",
    "step_time_s",
    "loss",
    "lr",
    "grad_norm",
    "loss_scale",
    "params_norm",
    "num_zeros",
    "skipped_iterations",
    "nan_iterations",
    "consumed_samples",
    "consumed_tokens",
    "skipped_samples",
    "global_batch_size",
    "tflops_per_gpu",
    "tokens_per_s_per_gpu",
    "mfu_pct",
    "mem_allocated_gib",
    "mem_max_allocated_gib",
    "mem_reserved_gib",
    "mem_max_reserved_gib",
    "mem_device_used_gib",
    "mem_device_total_gib",
    "mem_usage_fraction",
    "energy_j_per_gpu",
    "power_w_per_gpu",
    "time_s",
    "rank",
    "line",
};

static const uint64_t int_fields =
    (UINT64_C(1) << TP_LOG_F_ITERATION) | (UINT64_C(1) << TP_LOG_F_TRAIN_ITERS) |
    (UINT64_C(1) << TP_LOG_F_EPOCH) | (UINT64_C(1) << TP_LOG_F_EPOCH_ITERATION) |
    (UINT64_C(1) << TP_LOG_F_SKIPPED_ITERATIONS) | (UINT64_C(1) << TP_LOG_F_NAN_ITERATIONS) |
    (UINT64_C(1) << TP_LOG_F_CONSUMED_SAMPLES) | (UINT64_C(1) << TP_LOG_F_CONSUMED_TOKENS) |
    (UINT64_C(1) << TP_LOG_F_SKIPPED_SAMPLES) | (UINT64_C(1) << TP_LOG_F_GLOBAL_BATCH_SIZE) |
    (UINT64_C(1) << TP_LOG_F_RANK) | (UINT64_C(1) << TP_LOG_F_LINE);

const char *tp_logscan_field_name(int f) {
  return f >= 0 && f < TP_LOG_F_COUNT ? field_names[f] : NULL;
}

int tp_logscan_field_index(const char *name, size_t len) {
  for (int f = 0; f < TP_LOG_F_COUNT; f++) {
    if (strlen(field_names[f]) == len && memcmp(field_names[f], name, len) == 0) {
      return f;
    }
  }
  return -1;
}

bool tp_logscan_field_is_int(int f) {
  return f >= 0 && f < TP_LOG_F_COUNT && (int_fields >> f & 1);
}

// --- Records ----------------------------------------------------------------------------------

static void pend_reset(LsPend *p) {
  TpBuf kv = p->kv;
  kv.len = 0;
  memset(p, 0, sizeof *p);
  p->kv = kv;
}

int tp_logscan_rec_begin(TpLogScan *s) {
  pend_reset(&s->pend);
  s->pend.active = true;
  return 0;
}

int tp_logscan_rec_set(TpLogScan *s, TpLogField f, double v) {
  if ((int)f < 0 || f >= TP_LOG_F_COUNT) {
    return TP_EINVAL;
  }
  if ((int_fields >> f & 1) && !(fabs(v) < 9007199254740992.0)) {
    return 0;  // a count that is NaN, infinite or beyond 2^53 is not a count: left absent
  }
  s->pend.present |= UINT64_C(1) << f;
  s->pend.v[f] = v;
  return 0;
}

// kv entry: [u8 kind][u16 name_len][name][payload]; payload: loss = 8-byte double, extra =
// [u32 len][bytes].
static int kv_put(TpBuf *b, uint8_t kind, const char *name, size_t nlen, const void *payload,
                  size_t plen) {
  if (nlen > 0xffff) {
    nlen = 0xffff;
  }
  uint16_t l16 = (uint16_t)nlen;
  if (tp_buf_reserve(b, 3 + nlen + plen + 4) != 0) {
    return TP_ENOMEM;
  }
  tp_buf_append(b, &kind, 1);
  tp_buf_append(b, &l16, 2);
  tp_buf_append(b, name, nlen);
  if (kind == TP_LOG_KV_EXTRA) {
    uint32_t l32 = (uint32_t)plen;
    tp_buf_append(b, &l32, 4);
  }
  tp_buf_append(b, payload, plen);
  return 0;
}

// Names and values handed out must be valid UTF-8 (labels come straight from the log).
int tp_logscan_rec_loss(TpLogScan *s, const char *name, size_t name_len, double v) {
  TpBuf clean = {0};
  int rc = ls_utf8_append(&clean, name, name_len > 1024 ? 1024 : name_len);
  if (rc == 0) {
    rc = kv_put(&s->pend.kv, TP_LOG_KV_LOSS, clean.data ? clean.data : "", clean.len, &v, sizeof v);
  }
  if (rc == 0) {
    s->pend.nlosses++;
  }
  tp_buf_free(&clean);
  return rc;
}

int tp_logscan_rec_extra(TpLogScan *s, const char *name, size_t name_len, const char *value,
                         size_t value_len) {
  TpBuf cname = {0}, cval = {0};
  int rc = ls_utf8_append(&cname, name, name_len > 1024 ? 1024 : name_len);
  if (rc == 0) {
    rc = ls_utf8_append(&cval, value, value_len > 4096 ? 4096 : value_len);
  }
  if (rc == 0) {
    rc = kv_put(&s->pend.kv, TP_LOG_KV_EXTRA, cname.data ? cname.data : "", cname.len,
                cval.data ? cval.data : "", cval.len);
  }
  tp_buf_free(&cname);
  tp_buf_free(&cval);
  return rc;
}

int tp_logscan_rec_timestamp(TpLogScan *s, const char *ts, size_t len) {
  if (len >= sizeof s->pend.ts) {
    len = sizeof s->pend.ts - 1;
  }
  for (size_t i = 0; i < len; i++) {
    if ((unsigned char)ts[i] < 0x20 || (unsigned char)ts[i] >= 0x7f) {
      len = i;  // timestamps are printable ASCII: keep what precedes anything else
    }
  }
  memcpy(s->pend.ts, ts, len);
  s->pend.ts_len = len;
  double t;
  if (tp_logscan_parse_time(ts, len, &t)) {
    tp_logscan_rec_set(s, TP_LOG_F_TIME_S, t);
  }
  return 0;
}

int tp_logscan_rec_derived(TpLogScan *s, bool derived) {
  s->pend.derived = derived;
  return 0;
}

void ls_rec_set_key(TpLogScan *s, bool has_key, int64_t key) {
  s->pend.has_key = has_key;
  s->pend.key = key;
}

// Drops the kept records of other ranks after the selection moved to a lower rank.
static void compact_ranks(TpLogScan *s) {
  size_t j = 0, reported = 0;
  for (size_t i = 0; i < s->nrecs; i++) {
    if (!s->recs[i].has_key || s->recs[i].key == s->sel_key) {
      if (i < s->reported) {
        reported++;
      }
      s->recs[j++] = s->recs[i];
    }
  }
  s->nrecs = j;
  s->reported = reported;
  s->last_has = false;
  s->last_from_counter = false;
  for (size_t i = s->nrecs; i-- > 0;) {
    const LsRec *r = &s->recs[i];
    if (r->present >> TP_LOG_F_ITERATION & 1) {
      size_t k = 0;
      for (int f = 0; f < TP_LOG_F_ITERATION; f++) {
        k += r->present >> f & 1;
      }
      s->last_has = true;
      s->last_iter = s->dpool[r->dofs + k];
      s->last_epoch = r->epoch;
      s->last_loss = r->present >> TP_LOG_F_LOSS & 1;
    }
    break;
  }
}

static int nan_checks(TpLogScan *s, const LsPend *p, uint64_t line) {
  char what[160];
  int rc = 0;
  bool has_iter = p->present >> TP_LOG_F_ITERATION & 1;
  long long it = has_iter ? (long long)p->v[TP_LOG_F_ITERATION] : -1;  // finite, < 2^53
  if (p->present >> TP_LOG_F_LOSS & 1) {
    if (!isfinite(p->v[TP_LOG_F_LOSS])) {
      snprintf(what, sizeof what, "loss is %s at iteration %lld",
               isnan(p->v[TP_LOG_F_LOSS]) ? "nan" : "inf", it);
      rc = ls_diag(s, TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR, line, what, NULL, 0);
    }
  } else if (p->megatron && p->loss_region) {
    // LOG_FORMATS.md 2.2: Megatron drops the loss segment when the interval mean is NaN or
    // inf; "number of skipped iterations" > 0 means loss-scale search instead.
    double skipped = (p->present >> TP_LOG_F_SKIPPED_ITERATIONS & 1)
                         ? p->v[TP_LOG_F_SKIPPED_ITERATIONS]
                         : s->prev_skipped;
    if (skipped == 0) {
      snprintf(what, sizeof what,
               "loss missing at iteration %lld while no iteration was skipped (NaN or inf loss)",
               it);
      rc = ls_diag(s, TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR, line, what, NULL, 0);
    }
  }
  if (rc == 0 && (p->present >> TP_LOG_F_NAN_ITERATIONS & 1) && p->v[TP_LOG_F_NAN_ITERATIONS] > 0) {
    snprintf(what, sizeof what, "%.0f iterations with a NaN loss at iteration %lld",
             p->v[TP_LOG_F_NAN_ITERATIONS], it);
    rc = ls_diag(s, TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR, line, what, NULL, 0);
  }
  if (rc == 0 && (p->present >> TP_LOG_F_GRAD_NORM & 1) && !isfinite(p->v[TP_LOG_F_GRAD_NORM])) {
    snprintf(what, sizeof what, "grad norm is %s at iteration %lld",
             isnan(p->v[TP_LOG_F_GRAD_NORM]) ? "nan" : "inf", it);
    rc = ls_diag(s, TP_LOG_D_NAN_LOSS, TP_LOG_SEV_ERROR, line, what, NULL, 0);
  }
  if (rc == 0 && (p->present >> TP_LOG_F_SKIPPED_ITERATIONS & 1) &&
      p->v[TP_LOG_F_SKIPPED_ITERATIONS] > 0) {
    s->skipped_total += (uint64_t)p->v[TP_LOG_F_SKIPPED_ITERATIONS];
    if (s->loss_seen) {
      s->skipped_after_loss = true;
    }
    snprintf(what, sizeof what, "iterations skipped by the optimizer");
    rc = ls_diag(s, TP_LOG_D_SKIPPED_ITERATIONS, TP_LOG_SEV_INFO, line, what, NULL, 0);
  }
  return rc;
}

int tp_logscan_rec_commit(TpLogScan *s) {
  LsPend *p = &s->pend;
  if (!p->active) {
    return 0;
  }
  p->active = false;
  uint64_t line = (p->present >> TP_LOG_F_LINE & 1) ? (uint64_t)p->v[TP_LOG_F_LINE] : s->nl + 1;
  bool has_loss = p->present >> TP_LOG_F_LOSS & 1;
  // Rank selection (LOG_FORMATS.md 0.5): one rank's records are kept.
  if (s->opts.rank >= 0) {
    if ((p->present >> TP_LOG_F_RANK & 1) && p->v[TP_LOG_F_RANK] != (double)s->opts.rank) {
      return 0;
    }
  } else if (p->has_key) {
    // With pipeline parallelism only the last stage has the loss: a rank whose records carry
    // one is preferred to ranks whose records do not (placeholders), then the lowest rank.
    if (!s->have_sel) {
      s->have_sel = true;
      s->sel_key = p->key;
      s->sel_loss = has_loss;
    } else if (p->key != s->sel_key) {
      bool better = has_loss && !s->sel_loss;
      if (!better && (p->key > s->sel_key || (s->sel_loss && !has_loss))) {
        return 0;
      }
      s->sel_key = p->key;
      s->sel_loss = has_loss;
      compact_ranks(s);
    } else if (has_loss) {
      s->sel_loss = true;
    }
  }
  // Copies (other ranks without prefix, forwarded lines, several nodes' local rank 0): a record
  // with the iteration of the previous kept one, with no restart in between, is dropped, unless
  // the kept one had no loss and this one has (a PP non-last stage printed first), or the kept
  // one's iteration came from a progress bar's counter (a later refresh of the same step, with
  // the step's own postfix): then it replaces it.
  bool has_iter = p->present >> TP_LOG_F_ITERATION & 1;
  if (has_iter && s->last_has && s->last_epoch == s->epoch &&
      s->last_iter == p->v[TP_LOG_F_ITERATION]) {
    bool replace = s->last_from_counter || (has_loss && !s->last_loss);
    if (!replace || s->nrecs == 0) {
      return 0;
    }
    const LsRec *prev = &s->recs[s->nrecs - 1];
    s->ndpool = prev->dofs;
    s->spool.len = prev->sofs;
    s->nrecs--;
    if (s->reported > s->nrecs) {
      s->reported = s->nrecs;
    }
  }
  int rc = nan_checks(s, p, line);
  if (rc) {
    return rc;
  }
  if (p->megatron) {
    s->prev_skipped = (p->present >> TP_LOG_F_SKIPPED_ITERATIONS & 1)
                          ? p->v[TP_LOG_F_SKIPPED_ITERATIONS]
                          : s->prev_skipped;
  }
  if (p->present >> TP_LOG_F_LOSS & 1) {
    s->loss_seen = true;
  }
  s->last_rec_cut = p->cut;
  s->last_rec_line = line;
  // Store.
  size_t nv = 0;
  for (int f = 0; f < TP_LOG_F_COUNT; f++) {
    nv += p->present >> f & 1;
  }
  if (s->nrecs == s->caprecs) {
    size_t cap = s->caprecs ? s->caprecs * 2 : 256;
    LsRec *r = realloc(s->recs, cap * sizeof *r);
    if (!r) {
      return TP_ENOMEM;
    }
    s->recs = r;
    s->caprecs = cap;
  }
  if (s->ndpool + nv > s->capdpool) {
    size_t cap = s->capdpool ? s->capdpool * 2 : 4096;
    while (cap < s->ndpool + nv) {
      cap *= 2;
    }
    double *d = realloc(s->dpool, cap * sizeof *d);
    if (!d) {
      return TP_ENOMEM;
    }
    s->dpool = d;
    s->capdpool = cap;
  }
  LsRec *r = &s->recs[s->nrecs];
  r->present = p->present;
  r->dofs = s->ndpool;
  for (int f = 0; f < TP_LOG_F_COUNT; f++) {
    if (p->present >> f & 1) {
      s->dpool[s->ndpool++] = p->v[f];
    }
  }
  r->sofs = s->spool.len;
  uint8_t tl = (uint8_t)p->ts_len;
  if (tp_buf_append(&s->spool, &tl, 1) != 0 || tp_buf_append(&s->spool, p->ts, p->ts_len) != 0 ||
      tp_buf_append(&s->spool, p->kv.data, p->kv.len) != 0) {
    return TP_ENOMEM;
  }
  r->kv_len = (uint32_t)p->kv.len;
  r->nlosses = (uint16_t)(p->nlosses > 0xffff ? 0xffff : p->nlosses);
  r->derived = p->derived;
  r->has_key = p->has_key;
  r->key = p->key;
  r->epoch = s->epoch;
  s->nrecs++;
  s->nstored++;
  if (has_iter) {
    s->last_has = true;
    s->last_iter = p->v[TP_LOG_F_ITERATION];
    s->last_epoch = s->epoch;
    s->last_loss = has_loss;
    s->last_from_counter = p->from_counter;
  }
  return 0;
}

size_t tp_logscan_nrecords(const TpLogScan *s) {
  return s->nrecs;
}

size_t tp_logscan_take_new(TpLogScan *s) {
  size_t first = s->reported;
  s->reported = s->nrecs;
  return first;
}

bool tp_logscan_record(const TpLogScan *s, size_t i, TpLogRecord *out) {
  if (i >= s->nrecs) {
    return false;
  }
  const LsRec *r = &s->recs[i];
  out->present = r->present;
  size_t k = r->dofs;
  for (int f = 0; f < TP_LOG_F_COUNT; f++) {
    out->v[f] = (r->present >> f & 1) ? s->dpool[k++] : 0.0;
  }
  out->step_time_derived = r->derived;
  const unsigned char *sp = (const unsigned char *)s->spool.data + r->sofs;
  size_t tl = sp[0];
  out->timestamp = tl ? (const char *)sp + 1 : NULL;
  out->timestamp_len = tl;
  out->kv = sp + 1 + tl;
  out->kv_len = r->kv_len;
  out->nlosses = r->nlosses;
  return true;
}

bool tp_logscan_record_field(const TpLogScan *s, size_t i, int f, double *v) {
  if (i >= s->nrecs || f < 0 || f >= TP_LOG_F_COUNT) {
    return false;
  }
  const LsRec *r = &s->recs[i];
  if (!(r->present >> f & 1)) {
    return false;
  }
  // The values are stored for the present fields in field order: f's is after those below it.
  uint64_t below = r->present & ((UINT64_C(1) << f) - 1);
  *v = s->dpool[r->dofs + (size_t)__builtin_popcountll(below)];
  return true;
}

bool tp_logscan_kv_next(const TpLogRecord *r, size_t *pos, TpLogKv *out) {
  size_t p = *pos;
  if (p + 3 > r->kv_len) {
    return false;
  }
  uint8_t kind = r->kv[p];
  uint16_t nlen;
  memcpy(&nlen, r->kv + p + 1, 2);
  p += 3;
  if (p + nlen > r->kv_len) {
    return false;
  }
  out->name = (const char *)r->kv + p;
  out->name_len = nlen;
  p += nlen;
  if (kind == TP_LOG_KV_LOSS) {
    if (p + 8 > r->kv_len) {
      return false;
    }
    out->kind = TP_LOG_KV_LOSS;
    memcpy(&out->num, r->kv + p, 8);
    out->str = NULL;
    out->str_len = 0;
    p += 8;
  } else {
    uint32_t l32;
    if (p + 4 > r->kv_len) {
      return false;
    }
    memcpy(&l32, r->kv + p, 4);
    p += 4;
    if (p + l32 > r->kv_len) {
      return false;
    }
    out->kind = TP_LOG_KV_EXTRA;
    out->str = (const char *)r->kv + p;
    out->str_len = l32;
    out->num = 0;
    p += l32;
  }
  *pos = p;
  return true;
}
