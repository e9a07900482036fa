// torchtitan: the step record line (with step times derived from tps when it prints none) and
// the run facts of its start-up lines (device mesh, batch and sequence sizes, device, version).
// Its job config ("Running with args: {...}") is read with the other argument dumps
// (logscan_args.c).
#include "logscan_torchtitan.h"

#include <stddef.h>
#include <string.h>

#include "logscan_lex.h"
#include "logscan_num.h"
#include "logscan_rec.h"
#include "logscan_state.h"

// --- torchtitan step line ---------------------------------------------------------------------
// torchtitan/components/metrics.py, MetricsProcessor.log: "step: N  loss: X  grad_norm: G
// memory: MGiB(P%)  tps: T  tflops: F  mfu: U%" (fields separated by two spaces; colour codes
// already removed). tps is per device, rounded, with ',' separators.

static void tt_derive(TpLogScan *s) {
  LsPend *p = &s->pend;
  if ((p->present >> TP_LOG_F_STEP_TIME_S & 1) ||
      !(p->present >> TP_LOG_F_TOKENS_PER_S_PER_GPU & 1)) {
    return;
  }
  double tps = p->v[TP_LOG_F_TOKENS_PER_S_PER_GPU];
  if (!(tps > 0)) {
    return;
  }
  // LOG_FORMATS.md 5.1: tokens per step per data-parallel rank / (tps x non-DP degree).
  double non_dp = s->tt_non_dp > 0 ? s->tt_non_dp : 1;
  double t = 0;
  if (s->tt_tokens_per_rank > 0) {
    t = s->tt_tokens_per_rank / (tps * non_dp);
  } else if (s->tt_local_bs > 0 && s->tt_seq_len > 0) {
    double ga = s->tt_grad_accum > 0 ? s->tt_grad_accum : 1;
    t = s->tt_local_bs * s->tt_seq_len * ga / (tps * non_dp);
  } else if (s->opts.gbs > 0 && s->opts.seq_len > 0 && s->opts.gpus > 0) {
    t = s->opts.gbs * s->opts.seq_len / (tps * s->opts.gpus);
  }
  if (t > 0) {
    tp_logscan_rec_set(s, TP_LOG_F_STEP_TIME_S, t);
    tp_logscan_rec_derived(s, true);
  }
}

int ls_torchtitan_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  if (!ls_family_allows(s, LS_FAM_TORCHTITAN)) {
    return 0;
  }
  // "step:" at a word start, not "validate step:" nor "micro_step:".
  const char *q = NULL;
  size_t from = 0;
  while (from < n) {
    const char *c = memmem(p + from, n - from, "step:", 5);
    if (!c) {
      break;
    }
    from = (size_t)(c - p) + 5;
    if (c > p && !ls_is_space(c[-1])) {
      continue;
    }
    if (c - p >= 9 && memcmp(c - 9, "validate ", 9) == 0) {
      return 0;
    }
    q = c;
    break;
  }
  if (!q || !LS_FIND(q, n - (size_t)(q - p), "loss:")) {
    return 0;
  }
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  bool got_loss = false, got_tps = false, got_step = false;
  size_t i = (size_t)(q - p);
  while (i < n && rc == 0) {
    i = ls_skip_spaces(p, n, i);
    const char *colon = memchr(p + i, ':', n - i);
    if (!colon) {
      break;
    }
    LsText key = ls_trim(p + i, (size_t)(colon - p) - i);
    size_t vs = ls_skip_spaces(p, n, (size_t)(colon - p) + 1);
    const char *sep = LS_FIND(p + vs, n - vs, "  ");
    size_t ve = sep ? (size_t)(sep - p) : n;
    LsText val = ls_trim(p + vs, ve - vs);
    i = ve;
    if (!sep && !L->terminated) {
      // The value runs into the cut end of the log: it is unknown (`grad_norm:  2` may be the
      // first digit of 2.2490), and only the complete fields before it are kept.
      got_loss = got_loss || LS_TEQ(key, "loss");
      break;
    }
    double v;
    bool num = ls_value_num(val, &v);
    if (LS_TEQ(key, "step") && num) {
      got_step = true;
      tp_logscan_rec_set(s, TP_LOG_F_ITERATION, v);
    } else if (LS_TEQ(key, "loss") && num) {
      // With pipeline parallelism only the last stage computes the loss; the other stages log
      // a placeholder (torchtitan/train.py: -1.0, averaged over the DP mesh): a cross-entropy
      // loss is never negative, so a negative one is no loss.
      got_loss = true;
      if (v < 0) {
        s->tt_pp_seen = true;
      } else {
        tp_logscan_rec_set(s, TP_LOG_F_LOSS, v);
      }
    } else if ((LS_TEQ(key, "grad_norm") || LS_TEQ(key, "gnorm")) && num) {
      tp_logscan_rec_set(s, TP_LOG_F_GRAD_NORM, v);
    } else if (LS_TEQ(key, "memory") && num) {
      // Peak reserved memory since the previous line (GiB) and its share of the device.
      tp_logscan_rec_set(s, TP_LOG_F_MEM_MAX_RESERVED_GIB, v);
      const char *par = memchr(val.p, '(', val.n);
      double pct;
      if (par && ls_value_num((LsText){par + 1, val.n - (size_t)(par - val.p) - 1}, &pct)) {
        tp_logscan_rec_set(s, TP_LOG_F_MEM_USAGE_FRACTION, pct / 100.0);
      }
    } else if ((LS_TEQ(key, "tps") || LS_TEQ(key, "wps")) && num) {
      got_tps = true;
      tp_logscan_rec_set(s, TP_LOG_F_TOKENS_PER_S_PER_GPU, v);
    } else if (LS_TEQ(key, "tflops") && num) {
      tp_logscan_rec_set(s, TP_LOG_F_TFLOPS_PER_GPU, v);
    } else if (LS_TEQ(key, "mfu") && num) {
      tp_logscan_rec_set(s, TP_LOG_F_MFU_PCT, v);
    } else if (LS_TEQ(key, "lr") && num) {
      tp_logscan_rec_set(s, TP_LOG_F_LR, v);
    } else if (LS_TEQ(key, "elapsed_time_per_step") && num) {
      tp_logscan_rec_set(s, TP_LOG_F_STEP_TIME_S, v);
    } else if (key.n > 0) {
      rc = tp_logscan_rec_extra(s, key.p, key.n, val.p, val.n);
    }
  }
  if (rc) {
    return rc;
  }
  if (!got_step || !got_loss) {
    s->pend.active = false;
    return 0;
  }
  // A placeholder loss proves pipeline parallelism: without a stated degree the non-data-
  // parallel degree is unknown, and a step time derived with 1 would be pp times too long.
  if (!s->tt_pp_seen || s->tt_non_dp > 0) {
    tt_derive(s);
  }
  const LsText *ts = L->ts_titan.p    ? &L->ts_titan
                     : L->ts_primus.p ? &L->ts_primus
                                      : (L->ts_iso.p ? &L->ts_iso : NULL);
  if (ts) {
    tp_logscan_rec_timestamp(s, ts->p, ts->n);
  }
  if (L->has_primus) {
    s->primus_seen = true;
    ls_meta_str(s, TP_LOG_MS_BACKEND, "torchtitan", 10, false);
  }
  return ls_line_rec_store(s, L, !got_tps || !L->terminated, LS_FAM_TORCHTITAN);
}

// --- Run facts --------------------------------------------------------------------------------

// torchtitan before the "with parallelism:" form (parallel_dims.py, build_mesh): "Building 2-D
// device mesh with ['pp', 'dp_shard'], [2, 4]" (names then sizes; older names dp and sp).
// Fills the degrees (every data-parallel dimension multiplied into *dp) and returns true.
static bool mesh_dims(const char *p, size_t n, double *pp, double *dp, double *cp, double *tp,
                      double *ep) {
  const char *q = LS_FIND(p, n, "device mesh with [");
  if (!q) {
    return false;
  }
  size_t i = (size_t)(q - p) + 18;
  const char *ce = memchr(p + i, ']', n - i);
  if (!ce) {
    return false;
  }
  size_t ne = (size_t)(ce - p);
  const char *vo = memchr(ce, '[', n - ne);
  if (!vo) {
    return false;
  }
  size_t j = (size_t)(vo - p) + 1;
  *pp = *dp = *cp = *tp = *ep = 1;
  int dims = 0;
  while (i < ne && dims < 8) {
    while (i < ne && (p[i] == '\'' || p[i] == '"' || p[i] == ',' || ls_is_space(p[i]))) {
      i++;
    }
    size_t b = i;
    while (i < ne && p[i] != '\'' && p[i] != '"' && p[i] != ',') {
      i++;
    }
    LsText name = {p + b, i - b};
    if (name.n == 0) {
      break;
    }
    j = ls_skip_spaces(p, n, j);
    long v;
    if (!ls_read_uint(p, n, &j, &v)) {
      return false;
    }
    if (j < n && p[j] == ',') {
      j++;
    }
    dims++;
    if (LS_TEQ(name, "pp")) {
      *pp = (double)v;
    } else if (LS_TEQ(name, "tp") || LS_TEQ(name, "sp")) {
      *tp *= (double)v;
    } else if (LS_TEQ(name, "cp")) {
      *cp = (double)v;
    } else if (LS_TEQ(name, "ep")) {
      *ep = (double)v;
    } else if (LS_STARTS(name.p, name.n, "dp")) {
      *dp *= (double)v;
    }
  }
  return dims > 0;
}

int ls_torchtitan_mesh_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  // torchtitan/distributed/parallel_dims.py via trainer: "Building device mesh with
  // parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=1", or the older
  // "Building 2-D device mesh with ['pp', 'dp_shard'], [2, 4]".
  double pp = 1, dpr = 1, dps = 1, cp = 1, tp = 1, ep = 1;
  bool any = mesh_dims(p, n, &pp, &dpr, &cp, &tp, &ep);
  any |= ls_kv_num(p, n, "pp=", &pp);
  any |= ls_kv_num(p, n, "dp_replicate=", &dpr);
  any |= ls_kv_num(p, n, "dp_shard=", &dps);
  any |= ls_kv_num(p, n, "cp=", &cp);
  any |= ls_kv_num(p, n, "tp=", &tp);
  any |= ls_kv_num(p, n, "ep=", &ep);
  if (!any) {
    return 0;
  }
  if (dps < 0) {
    dps = 1;  // -1: all remaining ranks; the world size is unknown here
  }
  ls_meta_set(s, TP_LOG_M_PP, pp, true);
  ls_meta_set(s, TP_LOG_M_CP, cp, true);
  ls_meta_set(s, TP_LOG_M_TP, tp, true);
  ls_meta_set(s, TP_LOG_M_EP, ep, true);
  ls_meta_set(s, TP_LOG_M_DP, dpr * dps, true);
  ls_meta_set(s, TP_LOG_M_WORLD_SIZE, pp * dpr * dps * cp * tp, true);
  s->tt_non_dp = pp * cp * tp;
  return 0;
}

int ls_torchtitan_config_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // torchtitan/trainer.py: "Trainer is initialized with local batch size 160, global batch
  // size 1280, gradient accumulation steps 1, sequence length 128, total steps 10 (warmup
  // 600)", the older "Training starts at step 1, with local batch size 8, ...", and the
  // newest "... with N tokens per DP rank, M tokens per train step, ... maximum context
  // length L, total steps T".
  if (ls_number_after(p, n, "local batch size", &v)) {
    s->tt_local_bs = v;
    ls_meta_set(s, TP_LOG_M_LOCAL_BATCH_SIZE, v, true);
  }
  if (ls_number_after(p, n, "global batch size", &v)) {
    s->tt_gbs = v;
    ls_meta_set(s, TP_LOG_M_GLOBAL_BATCH_SIZE, v, true);
  }
  if (ls_number_after(p, n, "gradient accumulation steps", &v)) {
    s->tt_grad_accum = v;
    ls_meta_set(s, TP_LOG_M_GRAD_ACCUM, v, true);
  }
  if (ls_number_after(p, n, "sequence length", &v) ||
      ls_number_after(p, n, "maximum context length", &v)) {
    s->tt_seq_len = v;
    ls_meta_set(s, TP_LOG_M_SEQ_LEN, v, true);
  }
  if (ls_number_after(p, n, "total steps", &v)) {
    ls_meta_set(s, TP_LOG_M_TRAIN_ITERS, v, true);
  }
  const char *q = LS_FIND(p, n, " tokens per DP rank");
  if (q) {
    size_t b = (size_t)(q - p);
    while (b > 0 && (ls_is_digit(p[b - 1]) || p[b - 1] == ',')) {
      b--;
    }
    if (tp_logscan_parse_number(p + b, (size_t)(q - p) - b, &v) > 0) {
      s->tt_tokens_per_rank = v;
    }
  }
  q = LS_FIND(p, n, " tokens per train step");
  if (q) {
    size_t b = (size_t)(q - p);
    while (b > 0 && (ls_is_digit(p[b - 1]) || p[b - 1] == ',')) {
      b--;
    }
    if (tp_logscan_parse_number(p + b, (size_t)(q - p) - b, &v) > 0) {
      ls_meta_set(s, TP_LOG_M_TOKENS_PER_STEP, v, true);
    }
  }
  return 0;
}

int ls_torchtitan_capacity_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  // torchtitan: "CUDA capacity: NVIDIA B200 with 178.35GiB memory".
  const char *q = LS_FIND(p, n, " capacity: ");
  const char *w2 = q ? LS_FIND(q, n - (size_t)(q - p), " with ") : NULL;
  if (q && w2 && LS_FIND(w2, n - (size_t)(w2 - p), "memory")) {
    const char *name = q + 11;
    return ls_meta_str(s, TP_LOG_MS_DEVICE_NAME, name, (size_t)(w2 - name), false);
  }
  return 0;
}

// torchtitan: "Peak FLOPS used for computing MFU: 9.890e+14".
int ls_torchtitan_peak_flops_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  if (ls_number_after(p, n, "Peak FLOPS used for computing MFU:", &v)) {
    ls_meta_set(s, TP_LOG_M_PEAK_FLOPS, v, true);
  }
  return 0;
}

// torchtitan: "torchtitan version: 0.2.0".
int ls_torchtitan_version_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  const char *q = LS_FIND(p, n, "torchtitan version: ");
  if (q) {
    const char *vs = q + 20;
    size_t k = 0;
    while (vs + k < p + n && !ls_is_space(vs[k])) {
      k++;
    }
    return ls_meta_str(s, TP_LOG_MS_FRAMEWORK_VERSION, vs, k, false);
  }
  return 0;
}

// --- End of the log ---------------------------------------------------------------------------

int ls_torchtitan_finish(TpLogScan *s) {
  // Tokens per train step from the per-DP-rank figure and the data-parallel degree.
  if (s->tt_non_dp > 0 && s->tt_tokens_per_rank > 0) {
    double dp = s->meta.present >> TP_LOG_M_DP & 1 ? s->meta.num[TP_LOG_M_DP] : 0;
    if (dp > 0) {
      ls_meta_set(s, TP_LOG_M_TOKENS_PER_STEP, s->tt_tokens_per_rank * dp, false);
    }
  }
  return 0;
}
