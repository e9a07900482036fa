// Megatron-LM and Primus (which prints Megatron's lines, rewritten, and its own): the iteration
// record line, memory reports, and the run facts of their start-up and runner lines. The
// dispatcher (logscan_parse.c) calls these on the lines whose anchors name them.
#include "logscan_megatron.h"

#include <stddef.h>
#include <string.h>

#include "logscan_lex.h"
#include "logscan_nemo.h"
#include "logscan_num.h"
#include "logscan_rec.h"
#include "logscan_state.h"

// --- Megatron-LM / Primus iteration line ------------------------------------------------------
// megatron/training/training.py, training_log (NVIDIA/Megatron-LM); Primus rewrites it in
// primus/backends/megatron/patches/training_log/print_rank_last_patches.py
// (patch_training_log_unified) and, for its legacy trainer,
// primus/modules/trainer/megatron/trainer.py (MegatronTrainer.training_log).

enum { K_NUM, K_MS, K_HIPMEM };

typedef struct MgLabel {
  const char *label;
  size_t len;
  int field;
  int kind;
  bool primus;  // only Primus (or AMD's fork) prints it
} MgLabel;

#define LBL(lit) lit, sizeof(lit) - 1
static const MgLabel mg_labels[] = {
    {LBL("consumed samples"), TP_LOG_F_CONSUMED_SAMPLES, K_NUM, false},
    {LBL("consumed tokens"), TP_LOG_F_CONSUMED_TOKENS, K_NUM, false},
    {LBL("skipped samples"), TP_LOG_F_SKIPPED_SAMPLES, K_NUM, false},
    {LBL("elapsed time per iteration (ms)"), TP_LOG_F_STEP_TIME_S, K_MS, false},
    {LBL("throughput per GPU (TFLOP/s/GPU)"), TP_LOG_F_TFLOPS_PER_GPU, K_NUM, false},
    {LBL("compute per GPU (TFLOP/s/GPU)"), TP_LOG_F_TFLOPS_PER_GPU, K_NUM, true},
    {LBL("tokens per GPU (tokens/s/GPU)"), TP_LOG_F_TOKENS_PER_S_PER_GPU, K_NUM, true},
    {LBL("tokens/s/GPU inst/harmonic mean"), TP_LOG_F_TOKENS_PER_S_PER_GPU, K_NUM, true},
    {LBL("Tokens per second per GPU (Tok/s/GPU)"), TP_LOG_F_TOKENS_PER_S_PER_GPU, K_NUM, false},
    {LBL("energy per GPU (J/iter/GPU)"), TP_LOG_F_ENERGY_J_PER_GPU, K_NUM, false},
    {LBL("power per GPU (W/GPU)"), TP_LOG_F_POWER_W_PER_GPU, K_NUM, false},
    {LBL("learning rate"), TP_LOG_F_LR, K_NUM, false},
    {LBL("global batch size"), TP_LOG_F_GLOBAL_BATCH_SIZE, K_NUM, false},
    {LBL("loss scale"), TP_LOG_F_LOSS_SCALE, K_NUM, false},
    {LBL("grad norm"), TP_LOG_F_GRAD_NORM, K_NUM, false},
    {LBL("num zeros"), TP_LOG_F_NUM_ZEROS, K_NUM, false},
    {LBL("params norm"), TP_LOG_F_PARAMS_NORM, K_NUM, false},
    {LBL("number of skipped iterations"), TP_LOG_F_SKIPPED_ITERATIONS, K_NUM, false},
    {LBL("number of nan iterations"), TP_LOG_F_NAN_ITERATIONS, K_NUM, false},
    {LBL("mem usages"), TP_LOG_F_MEM_USAGE_FRACTION, K_NUM, true},
    {LBL("hip mem usage/free/total/usage_ratio"), -1, K_HIPMEM, true},
};

// "iteration <spaces> N/<spaces> T" anywhere in the payload; returns the position after T. The
// progress lines of NeMo's and Lightning's evaluation loops ("Validation: iteration 1/2",
// LOG_FORMATS.md 4.1) count evaluation batches: no iteration, whatever follows.
static bool find_iteration(const char *p, size_t n, size_t *after, double *iter, double *total) {
  size_t from = 0;
  while (from < n) {
    const char *q = memmem(p + from, n - from, "iteration", 9);
    if (!q) {
      return false;
    }
    size_t i = (size_t)(q - p) + 9;
    from = i;
    if (q > p && ls_is_ident(q[-1])) {
      continue;
    }
    size_t j = ls_skip_spaces(p, n, i);
    if (j == i) {
      continue;
    }
    long it, tot;
    if (!ls_read_uint(p, n, &j, &it) || j >= n || p[j] != '/') {
      continue;
    }
    j = ls_skip_spaces(p, n, j + 1);
    if (!ls_read_uint(p, n, &j, &tot)) {
      continue;
    }
    if (q > p && ls_nemo_eval_progress(p, (size_t)(q - p))) {
      return false;
    }
    *iter = (double)it;
    *total = (double)tot;
    *after = j;
    return true;
  }
  return false;
}

static bool label_has_loss(LsText l) {
  return memmem(l.p, l.n, "loss", 4) != NULL;
}

// "33.81GB/254.18GB/287.98GB/11.74%": used, free, total (GiB), usage percentage.
static int parse_hipmem(TpLogScan *s, LsText v) {
  double vals[4];
  size_t i = 0;
  for (int k = 0; k < 4; k++) {
    i = ls_skip_spaces(v.p, v.n, i);
    size_t used = tp_logscan_parse_number(v.p + i, v.n - i, &vals[k]);
    if (used == 0) {
      return k;
    }
    i += used;
    while (i < v.n && v.p[i] != '/') {
      i++;
    }
    i++;
  }
  tp_logscan_rec_set(s, TP_LOG_F_MEM_DEVICE_USED_GIB, vals[0]);
  tp_logscan_rec_set(s, TP_LOG_F_MEM_DEVICE_TOTAL_GIB, vals[2]);
  tp_logscan_rec_set(s, TP_LOG_F_MEM_USAGE_FRACTION, vals[3] / 100.0);
  return 4;
}

int ls_megatron_line(TpLogScan *s, const LsLine *L) {
  size_t after;
  double iter, total;
  if (!ls_family_allows(s, LS_FAM_MEGATRON) || !find_iteration(L->p, L->n, &after, &iter, &total)) {
    return 0;
  }
  // A Megatron line continues with " |"; anything else ("iteration 3/10 done") is not one.
  size_t k = ls_skip_spaces(L->p, L->n, after);
  if (k < L->n && L->p[k] != '|') {
    return 0;
  }
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  LsPend *pd = &s->pend;
  pd->megatron = true;
  tp_logscan_rec_set(s, TP_LOG_F_ITERATION, iter);
  if (L->terminated || after < L->n) {
    tp_logscan_rec_set(s, TP_LOG_F_TRAIN_ITERS, total);  // else T runs into the cut end
  }
  const LsText *ts = L->ts_bracket.p  ? &L->ts_bracket
                     : L->ts_primus.p ? &L->ts_primus
                                      : (L->ts_iso.p ? &L->ts_iso : NULL);
  if (ts) {
    tp_logscan_rec_timestamp(s, ts->p, ts->n);
  }
  bool primus_line = L->has_primus;
  bool seen_gbs = false, seen_scale = false;
  bool last_bad = false;
  LsText primary = {NULL, 0};
  double primary_v = 0;
  const char *p = L->p + after;
  size_t n = L->n - after;
  bool ends_pipe = n > 0 && p[n - 1] == '|';
  size_t i = 0;
  while (i < n && rc == 0) {
    const char *bar = memchr(p + i, '|', n - i);
    size_t e = bar ? (size_t)(bar - p) : n;
    LsText seg = ls_trim(p + i, e - i);
    i = e + 1;
    if (seg.n == 0) {
      continue;
    }
    if (!bar && !L->terminated) {
      last_bad = true;  // the segment runs into the cut end of the log: its value is unknown
      continue;
    }
    const char *colon = NULL;
    for (size_t c = 0; c < seg.n; c++) {
      if (seg.p[c] == ':' && (c + 1 == seg.n || seg.p[c + 1] == ' ')) {
        colon = seg.p + c;
        break;
      }
    }
    if (!colon) {
      last_bad = true;
      continue;
    }
    LsText label = ls_trim(seg.p, (size_t)(colon - seg.p));
    LsText value = ls_trim(colon + 1, seg.n - (size_t)(colon - seg.p) - 1);
    last_bad = value.n == 0;
    if (value.n == 0) {
      continue;
    }
    const MgLabel *ml = NULL;
    for (size_t m = 0; m < sizeof mg_labels / sizeof mg_labels[0]; m++) {
      if (label.n == mg_labels[m].len && memcmp(label.p, mg_labels[m].label, label.n) == 0) {
        ml = &mg_labels[m];
        break;
      }
    }
    double v;
    if (ml) {
      if (ml->primus) {
        primus_line = true;
      }
      if (ml->field == TP_LOG_F_GLOBAL_BATCH_SIZE) {
        seen_gbs = true;
      } else if (ml->field == TP_LOG_F_LOSS_SCALE || ml->field == TP_LOG_F_GRAD_NORM ||
                 ml->field == TP_LOG_F_SKIPPED_ITERATIONS || ml->field == TP_LOG_F_NAN_ITERATIONS ||
                 ml->field == TP_LOG_F_NUM_ZEROS || ml->field == TP_LOG_F_PARAMS_NORM) {
        seen_scale = true;
      }
      if (ml->kind == K_HIPMEM) {
        if (parse_hipmem(s, value) < 4) {
          rc = tp_logscan_rec_extra(s, label.p, label.n, value.p, value.n);
        }
      } else if (ls_value_num(value, &v)) {
        if (memchr(value.p, '/', value.n) ||
            (memchr(value.p, '(', value.n) && LS_FIND(value.p, value.n, "(avg"))) {
          primus_line = true;  // "X/Y" and "X (avg Y)": Primus' instant / running mean
        }
        tp_logscan_rec_set(s, (TpLogField)ml->field, ml->kind == K_MS ? v / 1000.0 : v);
      } else {
        rc = tp_logscan_rec_extra(s, label.p, label.n, value.p, value.n);
      }
      continue;
    }
    if (LS_STARTS(label.p, label.n, "rocm mem usage") ||
        LS_FIND(label.p, label.n, "rocm max mem")) {
      primus_line = true;
      rc = tp_logscan_rec_extra(s, label.p, label.n, value.p, value.n);
      continue;
    }
    // Losses: every "<name>: <number>" between global batch size and loss scale, and any
    // label naming a loss (LOG_FORMATS.md 2.1, loss keys).
    if (!seen_scale && ls_value_only_num(value, &v) && ((seen_gbs) || label_has_loss(label))) {
      rc = tp_logscan_rec_loss(s, label.p, label.n, v);
      if (!primary.p || LS_TEQ(label, "lm loss")) {
        if (!primary.p || !LS_TEQ(primary, "lm loss")) {
          primary = label;
          primary_v = v;
        }
      }
      continue;
    }
    rc = tp_logscan_rec_extra(s, label.p, label.n, value.p, value.n);
  }
  if (rc) {
    return rc;
  }
  if (primary.p) {
    tp_logscan_rec_set(s, TP_LOG_F_LOSS, primary_v);
  }
  if (primus_line) {
    s->primus_seen = true;
  }
  pd->loss_region = seen_scale;
  // A complete Megatron line ends with '|'; Primus' rewritten line ends with its memory
  // segment. A last segment without "label: value" means the line was cut.
  bool cut = last_bad || (!ends_pipe && !primus_line) || !L->terminated;
  return ls_line_rec_store(s, L, cut, LS_FAM_MEGATRON);
}

// Megatron report_memory (megatron/training/utils.py, today utils/common_utils.py):
// "[Rank R] (after N iterations) memory (MB) | allocated: A | max allocated: B | reserved: C |
// max reserved: D [| total device memory used: E]"; MiB printed as "MB".
int ls_megatron_memory_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  const char *mb = LS_FIND(p, n, "memory (MB)");
  if (!mb) {
    return 0;
  }
  TpLogMemReport m = {0};
  m.line = L->lineno;
  const char *r = LS_FIND(p, (size_t)(mb - p), "[Rank ");
  if (r) {
    size_t i = (size_t)(r - p) + 6;
    if (ls_read_uint(p, n, &i, &m.rank)) {
      m.present |= TP_LOG_MEM_RANK;
    }
  }
  const char *a = LS_FIND(p, (size_t)(mb - p), "after ");
  if (a) {
    size_t i = (size_t)(a - p) + 6;
    if (ls_read_uint(p, n, &i, &m.after_iterations)) {
      m.present |= TP_LOG_MEM_AFTER;
    }
  }
  static const struct {
    const char *label;
    uint32_t bit;
    size_t off;
  } cols[] = {
      {"allocated", TP_LOG_MEM_ALLOCATED, offsetof(TpLogMemReport, allocated_gib)},
      {"max allocated", TP_LOG_MEM_MAX_ALLOCATED, offsetof(TpLogMemReport, max_allocated_gib)},
      {"reserved", TP_LOG_MEM_RESERVED, offsetof(TpLogMemReport, reserved_gib)},
      {"max reserved", TP_LOG_MEM_MAX_RESERVED, offsetof(TpLogMemReport, max_reserved_gib)},
      {"total device memory used", TP_LOG_MEM_DEVICE_USED,
       offsetof(TpLogMemReport, device_used_gib)},
  };
  size_t i = (size_t)(mb - p) + 11;
  while (i < n) {
    const char *bar = memchr(p + i, '|', n - i);
    size_t e = bar ? (size_t)(bar - p) : n;
    LsText seg = ls_trim(p + i, e - i);
    i = e + 1;
    const char *colon = memchr(seg.p, ':', seg.n);
    if (!colon) {
      continue;
    }
    LsText label = ls_trim(seg.p, (size_t)(colon - seg.p));
    LsText val = ls_trim(colon + 1, seg.n - (size_t)(colon - seg.p) - 1);
    double v;
    if (!ls_value_num(val, &v)) {
      continue;
    }
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
      if (ls_text_eq(label, cols[c].label)) {
        *(double *)((char *)&m + cols[c].off) = v / 1024.0;
        m.present |= cols[c].bit;
      }
    }
  }
  if (!(m.present & (TP_LOG_MEM_ALLOCATED | TP_LOG_MEM_RESERVED))) {
    return 0;
  }
  return ls_mem_add(s, &m);
}

// Megatron report_theoretical_memory (megatron/training/theoretical_memory_usage.py):
// "Theoretical memory footprints: weight and optimizer=A MB, activation=B MB, total=C MB".
int ls_megatron_theoretical_line(TpLogScan *s, const LsLine *L) {
  double w, a, t;
  if (ls_number_after(L->p, L->n, "weight and optimizer=", &w) &&
      ls_number_after(L->p, L->n, "activation=", &a) && ls_number_after(L->p, L->n, "total=", &t)) {
    s->theo.present = true;
    s->theo.weight_and_optimizer_mb = w;
    s->theo.activation_mb = a;
    s->theo.total_mb = t;
    s->theo.line = L->lineno;
  }
  return 0;
}

// --- Run facts --------------------------------------------------------------------------------

int ls_megatron_microbatches_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // Megatron num_microbatches_calculator: "setting number of micro(-)batches to constant N".
  if (ls_number_after(p, n, "to constant", &v)) {
    ls_meta_set(s, TP_LOG_M_GRAD_ACCUM, v, false);
  }
  return 0;
}

int ls_megatron_mp_size_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // Megatron initialize: "> initialized tensor model parallel with size 8".
  if (ls_number_after(p, n, "with size", &v)) {
    if (LS_FIND(p, n, "tensor model parallel")) {
      ls_meta_set(s, TP_LOG_M_TP, v, false);
    } else if (LS_FIND(p, n, "pipeline model parallel")) {
      ls_meta_set(s, TP_LOG_M_PP, v, false);
    }
  }
  return 0;
}

// Megatron initialize: "> setting random seeds to 1234 ...".
int ls_megatron_seeds_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  if (ls_number_after(p, n, "random seeds to", &v)) {
    ls_meta_set(s, TP_LOG_M_SEED, v, false);
  }
  return 0;
}

int ls_megatron_optimizer_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // megatron/core/optimizer/optimizer_config.py repr, logged by NeMo and Megatron:
  // "OptimizerConfig(optimizer='adam', lr=0.0003, ..., fp16=False, bf16=True, ...)".
  if (ls_kv_num(p, n, "lr=", &v)) {
    ls_meta_set(s, TP_LOG_M_LR, v, false);
  }
  const char *prec = LS_FIND(p, n, "bf16=True")   ? "bf16"
                     : LS_FIND(p, n, "fp16=True") ? "fp16"
                                                  : NULL;
  if (prec) {
    return ls_meta_str(s, TP_LOG_MS_PRECISION, prec, 4, false);
  }
  return 0;
}

int ls_primus_patch_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  // Primus patch runner: "[Patch] Executing patches: backend=megatron, phase=...,
  // backend_version=0.16.0rc0, primus_version=None, ...".
  static const struct {
    const char *key;
    TpLogMetaStr k;
  } keys[] = {{"backend_version=", TP_LOG_MS_BACKEND_VERSION},
              {"primus_version=", TP_LOG_MS_FRAMEWORK_VERSION},
              {"backend=", TP_LOG_MS_BACKEND}};
  s->primus_seen = true;
  for (size_t k = 0; k < 3; k++) {
    const char *q = ls_find(p, n, keys[k].key);
    while (q && q > p && ls_is_ident(q[-1])) {
      q = ls_find(q + 1, n - (size_t)(q + 1 - p), keys[k].key);
    }
    if (!q) {
      continue;
    }
    const char *vs = q + strlen(keys[k].key);
    size_t len = 0;
    while (vs + len < p + n && vs[len] != ',' && !ls_is_space(vs[len])) {
      len++;
    }
    if (len > 0 && !(len == 4 && memcmp(vs, "None", 4) == 0)) {
      int rc = ls_meta_str(s, keys[k].k, vs, len, false);
      if (rc) {
        return rc;
      }
    }
  }
  return 0;
}

int ls_primus_torchrun_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // Primus runner (runner/primus-cli-direct.sh): "torchrun finished successfully (code 0)".
  // It names the format even without an iteration line (Primus' MLPerf logs).
  if (ls_number_after(p, n, "(code ", &v)) {
    s->primus_seen = true;
    ls_meta_set(s, TP_LOG_M_EXIT_CODE, v, true);
  } else if (ls_number_after(p, n, "code ", &v)) {
    ls_meta_set(s, TP_LOG_M_EXIT_CODE, v, true);
  }
  return 0;
}

int ls_primus_runner_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  // Primus runner (runner/lib/common.sh): "[NODE-0(host)] [INFO] ...", after the launcher's
  // "[date] ": a Primus run even when no iteration line follows.
  size_t i = 0;
  long node;
  if (LS_STARTS(p, n, "[NODE-")) {
    i = 6;
    if (ls_read_uint(p, n, &i, &node) && i < n && p[i] == '(' &&
        LS_FIND(p + i, n - i, ")] [INFO] ")) {
      s->primus_seen = true;
    }
  }
  return 0;
}

// Primus: "Detected GPU model: <name>".
int ls_primus_gpu_model_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  const char *q = LS_FIND(p, n, "Detected GPU model: ");
  if (q) {
    const char *vs = q + 20;
    LsText t = ls_trim(vs, n - (size_t)(vs - p));
    return ls_meta_str(s, TP_LOG_MS_DEVICE_NAME, t.p, t.n, false);
  }
  return 0;
}

// --- End of the log ---------------------------------------------------------------------------

int ls_megatron_finish(TpLogScan *s) {
  int rc = 0;
  if (s->args[TP_LOG_ARGS_MEGATRON].n > 0 || s->args[TP_LOG_ARGS_PRIMUS].n > 0) {
    if (s->family == LS_FAM_MEGATRON || s->family == LS_FAM_NONE) {
      if (s->primus_seen && !s->meta_str[TP_LOG_MS_BACKEND]) {
        rc = ls_meta_str(s, TP_LOG_MS_BACKEND, "megatron", 8, false);
      }
    }
  }
  if (rc) {
    return rc;
  }
  // Megatron's "iteration N/T" prints --train-iters as T (NeMo's T is max_steps - 1).
  if (s->nrecs > 0 && s->family == LS_FAM_MEGATRON) {
    TpLogRecord r;
    if (tp_logscan_record(s, s->nrecs - 1, &r) && (r.present >> TP_LOG_F_TRAIN_ITERS & 1)) {
      ls_meta_set(s, TP_LOG_M_TRAIN_ITERS, r.v[TP_LOG_F_TRAIN_ITERS], false);
    }
  }
  return 0;
}
