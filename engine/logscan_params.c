// Parameter counts, as each framework prints them: Megatron's and NeMo's per-shard counts
// (get_model, MegatronParallel), trainable and theoretical totals, torchtitan's totals, the
// parameter dtype line, and the title that opens a Primus dump. One parser for all of them: the
// first form a line matches is the one read.
#include "logscan_params.h"

#include <stddef.h>
#include <string.h>

#include "logscan_lex.h"
#include "logscan_num.h"
#include "logscan_state.h"

// Reads "(a, b[, c])" allowing NeMo's "(a ,b)": returns the number of integers read.
static int read_tuple(const char *p, size_t n, size_t *i, long *v) {
  size_t j = *i;
  if (j >= n || p[j] != '(') {
    return 0;
  }
  j++;
  int k = 0;
  while (k < 3) {
    j = ls_skip_spaces(p, n, j);
    if (!ls_read_uint(p, n, &j, &v[k])) {
      return 0;
    }
    k++;
    j = ls_skip_spaces(p, n, j);
    if (j < n && p[j] == ',') {
      j++;
      continue;
    }
    if (j < n && p[j] == ')') {
      *i = j + 1;
      return k;
    }
    return 0;
  }
  return 0;
}

int ls_params_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  double v;
  // Megatron get_model (megatron/training/training.py) and NeMo MegatronParallel
  // (nemo/lightning/megatron_parallel.py): "number of parameters on (tensor, pipeline) model
  // parallel rank (T, P): N"; core_v0.19 adds gtp_weight_remat; NeMo 2.3 prints "(T ,P)".
  const char *q = LS_FIND(p, n, "model parallel rank ");
  if (q && LS_FIND(p, n, "number of parameters on")) {
    size_t i = (size_t)(q - p) + 20;
    long t[3];
    int k = read_tuple(p, n, &i, t);
    if (k >= 2 && i < n && p[i] == ':') {
      i = ls_skip_spaces(p, n, i + 1);
      if (tp_logscan_parse_number(p + i, n - i, &v) > 0) {
        return k == 3 ? ls_shard_add(s, t[0], t[1], t[2], v) : ls_shard_add(s, t[0], -1, t[1], v);
      }
    }
    return 0;
  }
  if (ls_number_after(p, n, "number of trainable parameters:", &v)) {
    s->params.present = s->params.has_trainable = true;
    s->params.trainable = v;
    return 0;
  }
  // torchtitan (torchtitan/trainer.py): "Model <name> <flavor> size: N total parameters" and
  // "Total parameter count: dense N, sparse N, active N".
  q = LS_FIND(p, n, " total parameters");
  if (q) {
    const char *sz = NULL;
    for (const char *c = q; c > p; c--) {
      if (c[-1] == ':' && c[0] == ' ') {
        sz = c + 1;
        break;
      }
    }
    // a number between the colon and the words; nothing there is no count (v stays unset)
    if (sz && q > sz && tp_logscan_parse_number(sz, (size_t)(q - sz), &v) == (size_t)(q - sz)) {
      s->params.present = s->params.has_total = true;
      s->params.total = v;
    }
    return 0;
  }
  if (LS_FIND(p, n, "Total parameter count:")) {
    double d, sp, a;
    if (ls_number_after(p, n, "dense ", &d) && ls_number_after(p, n, "sparse ", &sp) &&
        ls_number_after(p, n, "active ", &a)) {
      s->params.present = s->params.has_dense = true;
      s->params.dense = d;
      s->params.sparse = sp;
      s->params.active = a;
    }
    return 0;
  }
  // megatron/training/theoretical_memory_usage.py, report_theoretical_memory.
  if (ls_number_after(p, n, "Total number of parameters in billions:", &v)) {
    s->params.present = s->params.has_billions = true;
    s->params.billions = v;
    return 0;
  }
  // Megatron (megatron/training/utils.py): "using torch.float16 for parameters ...".
  q = LS_FIND(p, n, "using torch.");
  if (q && LS_FIND(p, n, " for parameters")) {
    const char *d = q + 12;
    size_t rest = n - (size_t)(d - p);
    const char *prec = LS_STARTS(d, rest, "float16 ")    ? "fp16"
                       : LS_STARTS(d, rest, "bfloat16 ") ? "bf16"
                       : LS_STARTS(d, rest, "float32 ")  ? "fp32"
                                                         : NULL;
    if (prec) {
      return ls_meta_str(s, TP_LOG_MS_PRECISION, prec, 4, false);
    }
    return 0;
  }
  // Primus log_dict_aligned title "<title>: (N parameters)" starts its dump.
  if (n > 14 && p[n - 1] == ')' && LS_FIND(p, n, ": (") && memmem(p, n, " parameters)", 12) &&
      (size_t)((const char *)memmem(p, n, " parameters)", 12) - p) + 12 == n) {
    s->mode = LS_MODE_PRIMUS_ARGS;
    s->mode_lines = 0;
  }
  return 0;
}

int ls_params_finish(TpLogScan *s) {
  // Parameter total: the printed one, else the sum over distinct shards.
  if (!s->params.has_total && s->nshards > 0) {
    double sum = 0;
    for (size_t i = 0; i < s->nshards; i++) {
      sum += s->shards[i].count;
    }
    s->params.has_total = true;
    s->params.total = sum;
  }
  if (!s->params.has_total && s->params.has_dense) {
    s->params.has_total = true;
    s->params.total = s->params.dense + s->params.sparse;
  }
  return 0;
}
