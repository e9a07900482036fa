// NeMo (2 and 1) and PyTorch Lightning: NeMo 2's ProgressPrinter record line, the TQDM progress
// bar of NeMo and Lightning, and the run facts of their start-up and end lines. NeMo's argument
// dumps (the driver's dotted recipe paths) are read with the other dumps (logscan_args.c).
#include "logscan_nemo.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "logscan_lex.h"
#include "logscan_num.h"
#include "logscan_rec.h"
#include "logscan_state.h"

// --- NeMo 2 ProgressPrinter line and NeMo / Lightning TQDM bar --------------------------------
// nemo/lightning/pytorch/callbacks/progress_printer.py (ProgressPrinter.format_string):
// "Training epoch E, iteration I/T | name: value | ...". Values are averaged over the
// interval; global_step is the 0-based step (megatron_strategy.py, training_step).

static int nemo_key(TpLogScan *s, LsText key, LsText val, bool *loss_set, bool *step_set) {
  double v;
  bool num = ls_value_only_num(val, &v);
  if (!num) {
    return tp_logscan_rec_extra(s, key.p, key.n, val.p, val.n);
  }
  static const struct {
    const char *key;
    int field;
    double scale;
  } map[] = {
      {"lr", TP_LOG_F_LR, 1},
      {"global_batch_size", TP_LOG_F_GLOBAL_BATCH_SIZE, 1},
      {"global_step", TP_LOG_F_ITERATION, 1},
      {"train_step_timing in s", TP_LOG_F_STEP_TIME_S, 1},
      {"consumed_samples", TP_LOG_F_CONSUMED_SAMPLES, 1},
      // megatron_strategy.py logs allocator peaks in bytes (NEMO_LOG_MEMORY_USAGE=1).
      {"max_memory_reserved", TP_LOG_F_MEM_MAX_RESERVED_GIB, 1.0 / 1073741824.0},
      {"max_memory_allocated", TP_LOG_F_MEM_MAX_ALLOCATED_GIB, 1.0 / 1073741824.0},
      {"TFLOPS_per_GPU", TP_LOG_F_TFLOPS_PER_GPU, 1},
      {"tokens_per_sec_per_gpu", TP_LOG_F_TOKENS_PER_S_PER_GPU, 1},
  };
  if (LS_TEQ(key, "reduced_train_loss")) {
    *loss_set = true;
    tp_logscan_rec_set(s, TP_LOG_F_LOSS, v);
    return tp_logscan_rec_loss(s, key.p, key.n, v);
  }
  if (LS_TEQ(key, "loss") || LS_TEQ(key, "train_loss")) {
    // Lightning's running mean: primary only when the step loss is absent (set at the end).
    return tp_logscan_rec_loss(s, key.p, key.n, v);
  }
  for (size_t m = 0; m < sizeof map / sizeof map[0]; m++) {
    if (ls_text_eq(key, map[m].key)) {
      if (map[m].field == TP_LOG_F_STEP_TIME_S) {
        *step_set = true;
      }
      tp_logscan_rec_set(s, (TpLogField)map[m].field, v * map[m].scale);
      return 0;
    }
  }
  return tp_logscan_rec_extra(s, key.p, key.n, val.p, val.n);
}

// When only Lightning's `loss=` is there, it becomes the primary loss.
static void nemo_fallback_loss(TpLogScan *s, bool loss_set) {
  if (loss_set || s->pend.nlosses == 0) {
    return;
  }
  size_t pos = 0;
  TpLogRecord r = {0};
  r.kv = (const unsigned char *)s->pend.kv.data;
  r.kv_len = s->pend.kv.len;
  TpLogKv kv;
  while (tp_logscan_kv_next(&r, &pos, &kv)) {
    if (kv.kind == TP_LOG_KV_LOSS) {
      tp_logscan_rec_set(s, TP_LOG_F_LOSS, kv.num);
      return;
    }
  }
}

static const LsText *nemo_ts(const LsLine *L) {
  return L->ts_iso.p       ? &L->ts_iso
         : L->ts_bracket.p ? &L->ts_bracket
         : L->ts_nemo.p    ? &L->ts_nemo
                           : NULL;
}

int ls_nemo_printer_line(TpLogScan *s, const LsLine *L) {
  const char *q = LS_FIND(L->p, L->n, "Training epoch ");
  if (!q || !ls_family_allows(s, LS_FAM_NEMO)) {
    return 0;
  }
  const char *p = L->p;
  size_t n = L->n;
  size_t i = (size_t)(q - p) + 15;
  long ep, it, tot;
  if (!ls_read_uint(p, n, &i, &ep) || !LS_STARTS(p + i, n - i, ", iteration ")) {
    return 0;
  }
  i += 12;
  if (!ls_read_uint(p, n, &i, &it) || i >= n || p[i] != '/') {
    return 0;
  }
  i++;
  if (!ls_read_uint(p, n, &i, &tot)) {
    return 0;
  }
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  tp_logscan_rec_set(s, TP_LOG_F_EPOCH, (double)ep);
  tp_logscan_rec_set(s, TP_LOG_F_EPOCH_ITERATION, (double)it);
  if (L->terminated || i < n) {
    tp_logscan_rec_set(s, TP_LOG_F_TRAIN_ITERS, (double)tot);  // else T runs into the cut end
  }
  const LsText *ts = nemo_ts(L);
  if (ts) {
    tp_logscan_rec_timestamp(s, ts->p, ts->n);
  }
  bool loss_set = false, step_set = false;
  while (i < n && rc == 0) {
    const char *bar = memchr(p + i, '|', n - i);
    size_t e = bar ? (size_t)(bar - p) : n;
    LsText seg = ls_trim(p + i, e - i);
    i = e + 1;
    if (!bar && !L->terminated) {
      break;  // the last segment runs into the cut end of the log: its value is unknown
    }
    const char *colon = LS_FIND(seg.p, seg.n, ": ");
    if (!colon && seg.n > 0 && seg.p[seg.n - 1] == ':') {
      colon = seg.p + seg.n - 1;
    }
    if (seg.n == 0 || !colon) {
      continue;
    }
    LsText key = ls_trim(seg.p, (size_t)(colon - seg.p));
    LsText val = ls_trim(colon + 1, seg.n - (size_t)(colon - seg.p) - 1);
    if (val.n > 0) {
      rc = nemo_key(s, key, val, &loss_set, &step_set);
    }
  }
  if (rc) {
    return rc;
  }
  nemo_fallback_loss(s, loss_set);
  return ls_line_rec_store(s, L, !L->terminated, LS_FAM_NEMO);
}

// A postfix value printed rounded: tqdm's format_num writes a number with 3 significant digits
// ('{:.3g}', exponent without leading zeros) when that is shorter than str(n), so a step of 5
// digits or more may print as "3.1e+4" (any of 30950..31050) or "3.41e+5". True, with the half
// width of the values it may stand for, when `val` (read as `v`) has an exponent and fewer
// significant digits than its magnitude needs (never fewer than tqdm's 3 counted).
static bool bar_rounded(LsText val, double v, double *half) {
  const char *e = memchr(val.p, 'e', val.n);
  if (!e) {
    e = memchr(val.p, 'E', val.n);
  }
  if (!e || !(v >= 0 && v < 9007199254740992.0)) {
    return false;
  }
  int digits = 0;
  bool leading = true;
  for (const char *q = val.p; q < e; q++) {
    if (*q >= '1' && *q <= '9') {
      leading = false;
    }
    if (*q >= '0' && *q <= '9' && !leading) {
      digits++;
    }
  }
  size_t i = (size_t)(e - val.p) + 1;
  bool neg = i < val.n && val.p[i] == '-';
  if (i < val.n && (val.p[i] == '+' || val.p[i] == '-')) {
    i++;
  }
  long x = 0;
  while (i < val.n && val.p[i] >= '0' && val.p[i] <= '9' && x < 100) {
    x = x * 10 + (val.p[i++] - '0');
  }
  int unit = (int)(neg ? -x : x) - ((digits > 3 ? digits : 3) - 1);
  if (unit <= 0) {
    return false;  // the digits shown reach the units: the value is exact
  }
  double h = 0.5;
  for (int k = 0; k < unit && h < 1e300; k++) {
    h *= 10;
  }
  *half = h;
  return true;
}

// The iteration of a bar refresh whose global_step printed rounded (`approx`, +-`half`), from
// its exact counter `cur`: the counter plus the offset global_step - counter of the last record
// of this bar stored with both; without one, the counter itself (as for a bar without
// global_step), moved to the nearest step the printed value may stand for when it is outside
// (a counter that restarted with a new epoch), and that offset then kept for the bar.
static double bar_iteration(const TpLogScan *s, long ep, long cur, double approx, double half) {
  if (s->bar_known && s->bar_ep == ep && s->bar_restart == s->epoch) {
    return (double)cur + s->bar_off;
  }
  double it = (double)cur, lo = ceil(approx - half), hi = floor(approx + half);
  return it < lo ? lo : it > hi ? hi : it;
}

// TQDM bar (nemo/lightning/pytorch/callbacks/progress_bar.py, MegatronProgressBar; NeMo 1 uses
// Lightning's TQDMProgressBar): "Epoch E: <pct>%|<bar>| n/total [elapsed<remaining, rate,
// key=value, ...]". Postfix values are tqdm's 3-significant-digit forms ("2e+3", "1.28e+6").
// A global_step printed rounded is no step number: consecutive refreshes repeat it. Such a
// record takes its iteration from the bar's exact counter (bar_iteration), keeps the printed
// value as the text global_step_approx, and is replaced by a later refresh of the same counter
// (Lightning redraws the bar with the new counter first, then with the step's postfix).
int ls_nemo_bar_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  const char *q = LS_FIND(p, n, "Epoch ");
  if (!q || !ls_family_allows(s, LS_FAM_NEMO)) {
    return 0;
  }
  size_t i = (size_t)(q - p) + 6;
  long ep;
  if (!ls_read_uint(p, n, &i, &ep) || i >= n || p[i] != ':') {
    return 0;
  }
  const char *open = memchr(p + i, '[', n - i);
  if (!open) {
    return 0;
  }
  size_t ob = (size_t)(open - p);
  const char *close = memchr(open, ']', n - ob);
  size_t cb = close ? (size_t)(close - p) : n;
  // The counter just before '[': "2000/603000" or "51it".
  size_t k = ob;
  while (k > i && ls_is_space(p[k - 1])) {
    k--;
  }
  size_t cs = k;
  while (cs > i && !ls_is_space(p[cs - 1]) && p[cs - 1] != '|') {
    cs--;
  }
  int rc = tp_logscan_rec_begin(s);
  if (rc) {
    return rc;
  }
  tp_logscan_rec_set(s, TP_LOG_F_EPOCH, (double)ep);
  size_t c = cs;
  long cur = -1, tot;
  if (ls_read_uint(p, k, &c, &cur)) {
    tp_logscan_rec_set(s, TP_LOG_F_EPOCH_ITERATION, (double)cur);
    if (c < k && p[c] == '/') {
      c++;
      if (ls_read_uint(p, k, &c, &tot)) {
        tp_logscan_rec_set(s, TP_LOG_F_TRAIN_ITERS, (double)tot);
      }
    }
  }
  const LsText *ts = nemo_ts(L);
  if (ts) {
    tp_logscan_rec_timestamp(s, ts->p, ts->n);
  }
  bool loss_set = false, step_set = false, have_step = false, rounded = false;
  double rate_step = 0, approx = 0, half = 0;
  size_t j = ob + 1;
  bool first_item = true;
  while (j < cb && rc == 0) {
    const char *comma = memchr(p + j, ',', cb - j);
    size_t e = comma ? (size_t)(comma - p) : cb;
    LsText item = ls_trim(p + j, e - j);
    j = e + 1;
    if (!comma && !close && !L->terminated) {
      break;  // the last item runs into the cut end of the log: its value is unknown
    }
    bool is_first = first_item;
    first_item = false;
    const char *eq = memchr(item.p, '=', item.n);
    double v;
    if (eq) {
      LsText key = ls_trim(item.p, (size_t)(eq - item.p));
      LsText val = ls_trim(eq + 1, item.n - (size_t)(eq - item.p) - 1);
      if (LS_TEQ(key, "v_num") && val.n == 0) {
        continue;
      }
      if (LS_TEQ(key, "global_step") && ls_value_only_num(val, &v) && bar_rounded(val, v, &half)) {
        rounded = true;
        approx = v;
        rc = tp_logscan_rec_extra(s, "global_step_approx", 18, val.p, val.n);
        continue;
      }
      if (val.n > 0) {
        rc = nemo_key(s, key, val, &loss_set, &step_set);
      }
    } else if (is_first && memchr(item.p, '<', item.n) && memchr(item.p, ':', item.n)) {
      // The first item: "elapsed<remaining" (tqdm's {elapsed}<{remaining}).
      const char *lt = memchr(item.p, '<', item.n);
      LsText el = ls_trim(item.p, (size_t)(lt - item.p));
      LsText rem = ls_trim(lt + 1, item.n - (size_t)(lt - item.p) - 1);
      rc = tp_logscan_rec_extra(s, "elapsed", 7, el.p, el.n);
      if (rc == 0) {
        rc = tp_logscan_rec_extra(s, "remaining", 9, rem.p, rem.n);
      }
    } else if (item.n > 4 && memcmp(item.p + item.n - 4, "it/s", 4) == 0 &&
               tp_logscan_parse_number(item.p, item.n - 4, &v) == item.n - 4 && v > 0) {
      rate_step = 1.0 / v;
      have_step = true;
    } else if (item.n > 4 && memcmp(item.p + item.n - 4, "s/it", 4) == 0 &&
               tp_logscan_parse_number(item.p, item.n - 4, &v) == item.n - 4) {
      rate_step = v;
      have_step = true;
    }
  }
  if (rc) {
    return rc;
  }
  bool has_step = s->pend.present >> TP_LOG_F_ITERATION & 1;
  if (!has_step && !rounded && !loss_set && s->pend.nlosses == 0) {
    s->pend.active = false;  // a bar without training metrics (validation, sanity check)
    return 0;
  }
  if (rounded && cur >= 0) {
    tp_logscan_rec_set(s, TP_LOG_F_ITERATION, bar_iteration(s, ep, cur, approx, half));
    s->pend.from_counter = true;
  } else if (!has_step && !rounded && cur >= 0) {
    // No global_step in the postfix: the bar's counter (batches done in this epoch) is the step.
    tp_logscan_rec_set(s, TP_LOG_F_ITERATION, (double)cur);
  }
  if (!step_set && have_step) {
    tp_logscan_rec_set(s, TP_LOG_F_STEP_TIME_S, rate_step);
    tp_logscan_rec_derived(s, true);
  }
  nemo_fallback_loss(s, loss_set);
  bool calibrates =
      cur >= 0 && (rounded || has_step) && (s->pend.present >> TP_LOG_F_ITERATION & 1);
  double off = calibrates ? s->pend.v[TP_LOG_F_ITERATION] - (double)cur : 0;
  uint64_t stored = s->nstored;
  rc = ls_line_rec_store(s, L, !L->terminated, LS_FAM_NEMO);
  if (calibrates && s->nstored != stored) {
    // Stored (not dropped as a copy): its global_step - counter holds for this bar from now on.
    s->bar_known = true;
    s->bar_ep = ep;
    s->bar_restart = s->epoch;
    s->bar_off = off;
  }
  return rc;
}

// --- Evaluation loops -------------------------------------------------------------------------
// ProgressPrinter prints the evaluation loops as "<description>: iteration i/n"
// (on_validation_batch_end, on_test_batch_end; on_sanity_check_start prepends "Sanity checking "
// to "Validation"), and Lightning names the same loops "Validation", "Sanity Checking",
// "Testing" and "Predicting", with " DataLoader N" when there are several dataloaders. Such a
// line counts evaluation batches (i restarts at 1 for every evaluation and may exceed n), never
// training iterations.

// p[0, n) ends with `lit` (ASCII letters in any case) and a word starts there.
static bool ends_with_word(const char *p, size_t n, const char *lit) {
  size_t l = strlen(lit);
  if (n < l || (n > l && ls_is_ident(p[n - l - 1]))) {
    return false;
  }
  for (size_t i = 0; i < l; i++) {
    char c = p[n - l + i];
    if (c >= 'A' && c <= 'Z') {
      c = (char)(c - 'A' + 'a');
    }
    char d = lit[i];
    if (d >= 'A' && d <= 'Z') {
      d = (char)(d - 'A' + 'a');
    }
    if (c != d) {
      return false;
    }
  }
  return true;
}

bool ls_nemo_eval_progress(const char *p, size_t n) {
  LsText t = ls_trim(p, n);
  if (t.n == 0 || t.p[t.n - 1] != ':') {
    return false;
  }
  size_t e = t.n - 1;
  size_t k = e;
  while (k > 0 && ls_is_digit(t.p[k - 1])) {
    k--;
  }
  if (k < e) {
    // " DataLoader N": the loop's name comes before it.
    while (k > 0 && ls_is_space(t.p[k - 1])) {
      k--;
    }
    if (!ends_with_word(t.p, k, "DataLoader")) {
      return false;
    }
    e = k - 10;
    while (e > 0 && ls_is_space(t.p[e - 1])) {
      e--;
    }
  }
  static const char *const loops[] = {"Validation", "Sanity Checking", "Testing", "Predicting"};
  for (size_t i = 0; i < sizeof loops / sizeof loops[0]; i++) {
    if (ends_with_word(t.p, e, loops[i])) {
      return true;
    }
  }
  return false;
}

// --- Run facts --------------------------------------------------------------------------------

int ls_nemo_fit_stopped_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // Lightning: "`Trainer.fit` stopped: `max_steps=20` reached."
  s->meta.completed = true;
  if (ls_kv_num(p, n, "max_steps=", &v)) {
    ls_meta_set(s, TP_LOG_M_TRAIN_ITERS, v, false);
  }
  return 0;
}

int ls_nemo_max_steps_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // NeMo megatron_strategy: "Copying Trainer's 'max_steps' (20) to LR scheduler's ...".
  if (ls_number_after(p, n, "'max_steps' (", &v)) {
    ls_meta_set(s, TP_LOG_M_TRAIN_ITERS, v, false);
  }
  return 0;
}

int ls_nemo_run_job_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  // NeMo-Run: "Job <id> finished: SUCCEEDED".
  if (LS_FIND(p, n, " finished: SUCCEEDED")) {
    ls_meta_set(s, TP_LOG_M_EXIT_CODE, 0, true);
  }
  return 0;
}

int ls_nemo_global_rank_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  // Lightning: "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8".
  if (LS_FIND(p, n, "MEMBER: ")) {
    const char *q = LS_FIND(p, n, "MEMBER: ");
    size_t i = (size_t)(q - p) + 8;
    long a, b;
    if (ls_read_uint(p, n, &i, &a) && i < n && p[i] == '/') {
      i++;
      if (ls_read_uint(p, n, &i, &b)) {
        ls_meta_set(s, TP_LOG_M_WORLD_SIZE, (double)b, false);
      }
    }
  }
  return 0;
}

int ls_nemo_processes_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // Lightning: "All distributed processes registered. Starting with 8 processes".
  if (ls_number_after(p, n, "Starting with", &v)) {
    ls_meta_set(s, TP_LOG_M_WORLD_SIZE, v, false);
  }
  return 0;
}

// Lightning: "Restoring states from the checkpoint path at ...": the records after it may
// repeat iteration numbers legitimately.
int ls_nemo_restoring_line(TpLogScan *s, const LsLine *L) {
  (void)L;
  s->epoch++;
  return 0;
}
