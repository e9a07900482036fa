// Log scanner machinery: chunked input and line splitting, the anchor filter that keeps the
// non-matching lines on a fast path, record storage with the multi-rank rule, and accessors.
// The per-framework line parsers are in logscan_parse.c.
#include "logscan.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "fs.h"
#include "logscan_int.h"

#define LONG_BLOCK (TP_LOGSCAN_MAX_LINE / 2)
#define HEAD_CHECK 65536u
#define READ_CHUNK (1u << 20)

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

static const char *const meta_names[TP_LOG_M_COUNT] = {
    "global_batch_size",
    "seq_len",
    "world_size",
    "train_iters",
    "micro_batch_size",
    "local_batch_size",
    "grad_accum",
    "tp",
    "pp",
    "cp",
    "dp",
    "ep",
    "lr",
    "seed",
    "peak_flops",
    "exit_code",
    "tokens_per_step",
};

static const char *const meta_str_names[TP_LOG_MS_COUNT] = {
    "precision", "framework_version", "backend", "backend_version", "device_name",
};

static const char *const diag_names[TP_LOG_D_COUNT] = {
    "oom",      "memory_pressure",    "nccl_timeout", "nccl_error", "nccl_warning", "gpu_fault",
    "nan_loss", "skipped_iterations", "loss_spike",   "preempted",  "crash",        "truncated",
    "restart",  "long_line",          "binary",       "empty",      "unrecognised", "bad_args",
    "timeout",  "cancelled",          "node_failure", "signal",
};

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

const char *tp_logscan_meta_name(TpLogMetaKey k) {
  return (int)k >= 0 && k < TP_LOG_M_COUNT ? meta_names[k] : NULL;
}

const char *tp_logscan_meta_str_name(TpLogMetaStr k) {
  return (int)k >= 0 && k < TP_LOG_MS_COUNT ? meta_str_names[k] : NULL;
}

bool tp_logscan_meta_is_int(TpLogMetaKey k) {
  return k != TP_LOG_M_LR && k != TP_LOG_M_PEAK_FLOPS;
}

const char *tp_logscan_diag_kind_name(TpLogDiagKind k) {
  return (int)k >= 0 && k < TP_LOG_D_COUNT ? diag_names[k] : "unknown";
}

const char *tp_logscan_severity_name(TpLogSeverity sev) {
  switch (sev) {
    case TP_LOG_SEV_INFO:
      return "info";
    case TP_LOG_SEV_WARNING:
      return "warning";
    case TP_LOG_SEV_ERROR:
      return "error";
  }
  return "error";
}

const char *tp_logscan_format_name(TpLogFormat f) {
  switch (f) {
    case TP_LOG_FORMAT_NONE:
      return NULL;
    case TP_LOG_FORMAT_MEGATRON:
      return "megatron";
    case TP_LOG_FORMAT_PRIMUS:
      return "primus";
    case TP_LOG_FORMAT_NEMO:
      return "nemo";
    case TP_LOG_FORMAT_TORCHTITAN:
      return "torchtitan";
    case TP_LOG_FORMAT_CUSTOM:
      return "custom";
  }
  return NULL;
}

void tp_logscan_opts_init(TpLogScanOpts *o) {
  memset(o, 0, sizeof *o);
  o->format = TP_LOG_FORMAT_NONE;
  o->rank = -1;
}

// --- Anchor index -------------------------------------------------------------------------

// Rough frequency (per mille) of a byte in English-like log text: used to register, for each
// anchor and stride residue, the rarest 4-byte gram, which keeps false candidates few.
static int byte_weight(unsigned char c) {
  static const char common[] = " etaoinsrhldcum";  // most frequent first
  const char *q = memchr(common, c, sizeof common - 1);
  if (q) {
    return 120 - (int)(q - common) * 6;
  }
  if (c >= 'a' && c <= 'z') {
    return 20;
  }
  if (c >= '0' && c <= '9') {
    return 25;
  }
  if (c == '.' || c == '/' || c == '_' || c == ':' || c == '-' || c == ',') {
    return 30;
  }
  return 5;
}

static uint32_t gram_hash(const char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return (v * 2654435761u) >> (32 - LS_HASH_BITS);
}

// Registers, for each anchor and stride residue, the gram to probe: the rarest by the sampled
// counts when there are any, else by the static byte weights.
static void index_select(LsIndex *ix) {
  memset(ix->hit, 0, sizeof ix->hit);
  for (size_t i = 0; i < LS_HASH_SIZE; i++) {
    ix->head[i] = -1;
  }
  ix->nents = 0;
  for (size_t a = 0; a < ix->nanchors; a++) {
    const LsAnchor *an = &ix->anchors[a];
    for (size_t r = 0; r < LS_STRIDE; r++) {
      size_t best = SIZE_MAX;
      uint64_t best_w = 0;
      for (size_t o = r; o + LS_GRAM <= an->len; o += LS_STRIDE) {
        uint64_t w = 0;
        for (size_t k = 0; k < LS_GRAM; k++) {
          w += (uint64_t)byte_weight((unsigned char)an->text[o + k]);
        }
        if (ix->counts) {
          w += (uint64_t)ix->counts[gram_hash(an->text + o)] << 10;
        }
        if (best == SIZE_MAX || w < best_w) {
          best = o;
          best_w = w;
        }
      }
      if (best == SIZE_MAX) {
        continue;  // cannot happen for anchors of LS_MIN_ANCHOR bytes or more
      }
      uint32_t h = gram_hash(an->text + best);
      LsGramEnt *e = &ix->ents[ix->nents];
      e->anchor = (uint16_t)a;
      e->off = (uint8_t)best;
      e->next = ix->head[h];
      ix->head[h] = (int16_t)ix->nents;
      ix->nents++;
      ix->hit[h] = 1;
    }
  }
}

static int index_build(TpLogScan *s) {
  LsIndex *ix = &s->index;
  size_t na = ls_anchor_count();
  ix->anchors = calloc(na, sizeof *ix->anchors);
  ix->prefix = calloc(na, sizeof *ix->prefix);
  ix->ents = calloc(na * LS_STRIDE, sizeof *ix->ents);
  if (!ix->ents || !ix->anchors || !ix->prefix) {
    return TP_ENOMEM;
  }
  for (size_t a = 0; a < na; a++) {
    ix->anchors[a] = ls_anchor_get(a);
    if (ix->anchors[a].len < LS_MIN_ANCHOR) {
      return TP_EINVAL;  // the filter would miss it: a table error
    }
    memcpy(&ix->prefix[a], ix->anchors[a].text, 8);
  }
  ix->nanchors = na;
  index_select(ix);
  return 0;
}

// Samples the gram frequencies of b[0, n) (older samples count half) and re-selects the grams.
static void index_adapt(LsIndex *ix, const char *b, size_t n) {
  if (!ix->counts) {
    ix->counts = calloc(LS_HASH_SIZE, sizeof *ix->counts);
    if (!ix->counts) {
      return;  // keep the static choice
    }
  } else {
    for (size_t i = 0; i < LS_HASH_SIZE; i++) {
      ix->counts[i] >>= 1;
    }
  }
  if (n > LS_ADAPT_SAMPLE) {
    n = LS_ADAPT_SAMPLE;
  }
  for (size_t i = 0; i + LS_GRAM <= n; i++) {
    ix->counts[gram_hash(b + i)]++;
  }
  index_select(ix);
}

// Looks for the first anchor occurrence starting at or after `floor`, probing positions *pp,
// *pp + LS_STRIDE, ... below `to`; every byte up to `limit` may be read. Returns the start of
// the occurrence (its table index in *anchor) or SIZE_MAX; *pp is where probing stopped.
static size_t find_anchor(const TpLogScan *s, const char *b, size_t *pp, size_t to, size_t floor,
                          size_t limit, size_t *anchor) {
  const LsIndex *ix = &s->index;
  const LsAnchor *an = ix->anchors;
  const uint8_t *hit = ix->hit;
  size_t p = *pp;
  size_t end = limit >= LS_GRAM ? limit - LS_GRAM + 1 : 0;
  if (to > end) {
    to = end;
  }
  while (p < to) {
    // Four probes per round: most rounds find no gram of interest.
    while (p + 3 * LS_STRIDE < to) {
      uint32_t h0 = gram_hash(b + p), h1 = gram_hash(b + p + LS_STRIDE);
      uint32_t h2 = gram_hash(b + p + 2 * LS_STRIDE), h3 = gram_hash(b + p + 3 * LS_STRIDE);
      if (hit[h0] | hit[h1] | hit[h2] | hit[h3]) {
        break;
      }
      p += 4 * LS_STRIDE;
    }
    size_t stop = p + 4 * LS_STRIDE;
    for (; p < to && p < stop; p += LS_STRIDE) {
      uint32_t h = gram_hash(b + p);
      if (!hit[h]) {
        continue;
      }
      for (int e = ix->head[h]; e >= 0; e = ix->ents[e].next) {
        const LsGramEnt *g = &ix->ents[e];
        const LsAnchor *a = &an[g->anchor];
        if (p < floor + g->off) {
          continue;
        }
        size_t st = p - g->off;
        if (st + a->len > limit) {
          continue;
        }
        uint64_t head8;
        memcpy(&head8, b + st, 8);
        if (head8 == ix->prefix[g->anchor] && memcmp(b + st + 8, a->text + 8, a->len - 8u) == 0) {
          *pp = p;
          *anchor = g->anchor;
          return st;
        }
      }
    }
  }
  *pp = p;
  return SIZE_MAX;
}

size_t ls_find_anchor(const TpLogScan *s, const char *base, size_t from, size_t to, size_t limit,
                      size_t *anchor) {
  size_t p = from;
  return find_anchor(s, base, &p, to, from, limit, anchor);
}

void ls_each_anchor(const TpLogScan *s, const char *b, size_t n,
                    void (*fn)(void *ud, const LsAnchor *a, size_t start), void *ud) {
  const LsIndex *ix = &s->index;
  for (size_t p = 0; p + LS_GRAM <= n; p += LS_STRIDE) {
    uint32_t h = gram_hash(b + p);
    if (!ix->hit[h]) {
      continue;
    }
    for (int e = ix->head[h]; e >= 0; e = ix->ents[e].next) {
      const LsGramEnt *g = &ix->ents[e];
      const LsAnchor *a = &ix->anchors[g->anchor];
      if (p < g->off || p - g->off + a->len > n) {
        continue;
      }
      if (memcmp(b + p - g->off, a->text, a->len) == 0) {
        fn(ud, a, p - g->off);
      }
    }
  }
}

// --- Line splitting helpers ---------------------------------------------------------------

// Counts '\n' bytes. With GCC/clang vector extensions (SSE2 on x86-64, NEON on arm64): 16
// bytes per step, per-lane counters summed every 255 steps; otherwise eight bytes per step in a
// 64-bit word.
#if defined(__GNUC__) || defined(__clang__)
typedef unsigned char LsV16 __attribute__((vector_size(16)));
static uint64_t count_nl(const char *p, size_t n) {
  const LsV16 nlv = {'\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n',
                     '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n'};
  uint64_t c = 0;
  size_t i = 0;
  while (i + 16 <= n) {
    LsV16 acc = {0};
    size_t lim = i + 16 * 255;
    if (lim > n) {
      lim = n;
    }
    for (; i + 16 <= lim; i += 16) {
      LsV16 v;
      memcpy(&v, p + i, 16);
      acc -= (LsV16)(v == nlv);  // lanes equal to '\n' are all ones: subtracting adds 1
    }
    for (int k = 0; k < 16; k++) {
      c += acc[k];
    }
  }
  for (; i < n; i++) {
    c += p[i] == '\n';
  }
  return c;
}
#else
static uint64_t count_nl(const char *p, size_t n) {
  const uint64_t ones = UINT64_C(0x0101010101010101);
  const uint64_t nlw = ones * '\n';
  const uint64_t low7 = UINT64_C(0x7f7f7f7f7f7f7f7f);
  uint64_t c = 0;
  size_t i = 0;
  while (i + 8 <= n) {
    uint64_t acc = 0;
    size_t lim = i + 8 * 255;
    if (lim > n) {
      lim = n;
    }
    for (; i + 8 <= lim; i += 8) {
      uint64_t v;
      memcpy(&v, p + i, 8);
      v ^= nlw;
      uint64_t t = ((v & low7) + low7) | v;  // high bit set where the byte is not '\n'
      acc += (~t >> 7) & ones;
    }
    c += (acc * ones) >> 56;
  }
  for (; i < n; i++) {
    c += p[i] == '\n';
  }
  return c;
}
#endif

// Index of the first '\n' or '\r' in b[from, n), or n.
static size_t next_sep(const char *b, size_t from, size_t n) {
  const char *q = memchr(b + from, '\n', n - from);
  size_t lim = q ? (size_t)(q - b) : n;
  const char *r = memchr(b + from, '\r', lim - from);
  return r ? (size_t)(r - b) : lim;
}

// Index just after the last '\n' or '\r' in b[from, to), or `from` when there is none.
static size_t seg_start_before(const char *b, size_t from, size_t to) {
  const char *q = memrchr(b + from, '\n', to - from);
  size_t lo = q ? (size_t)(q - b) + 1 : from;
  const char *r = memrchr(b + lo, '\r', to - lo);
  return r ? (size_t)(r - b) + 1 : lo;
}

static bool all_lines(const TpLogScan *s) {
  if (s->mode != LS_MODE_NORMAL) {
    return true;
  }
  if (s->opts.line && s->family == LS_FAM_CUSTOM) {
    return true;
  }
  return s->opts.detect && s->family == LS_FAM_NONE && s->opts.format == TP_LOG_FORMAT_NONE;
}

static int long_line(TpLogScan *s, uint64_t line, uint64_t len) {
  char what[128];
  snprintf(what, sizeof what, "line longer than %u bytes skipped (%llu bytes)", TP_LOGSCAN_MAX_LINE,
           (unsigned long long)len);
  return ls_diag(s, TP_LOG_D_LONG_LINE, TP_LOG_SEV_WARNING, line, what, NULL, 0);
}

static bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// A segment assembled from pieces (or the last one): examined like the segments of a region,
// i.e. only when it holds an anchor, so that results never depend on the chunking.
static int segment(TpLogScan *s, const char *p, size_t n, bool terminated) {
  if (n > TP_LOGSCAN_MAX_LINE) {
    return long_line(s, s->nl + 1, n);
  }
  size_t k = 0;
  while (k < n && blank(p[k])) {
    k++;
  }
  if (k < n) {
    s->last_content_line = s->nl + 1;
  }
  size_t ai;
  // The unterminated last segment is always examined: a cut may have taken its anchor.
  if (terminated && !all_lines(s) && ls_find_anchor(s, p, 0, n, n, &ai) == SIZE_MAX) {
    return 0;
  }
  return ls_process_segment(s, p, n, s->nl + 1, terminated);
}

// Line number of the last non-blank line of b[0, n), given that s->nl counts its '\n' bytes.
static void note_last_content(TpLogScan *s, const char *b, size_t n) {
  uint64_t after = 0;
  size_t j = n;
  while (j > 0 && blank(b[j - 1])) {
    after += b[j - 1] == '\n';
    j--;
  }
  if (j > 0) {
    s->last_content_line = s->nl - after + 1;
  }
}

// Scans b[0, n), which ends with a separator, so every segment in it is complete.
static int scan_region(TpLogScan *s, const char *b, size_t n) {
  LsIndex *ix = &s->index;
  if (ix->scanned >= ix->next_adapt && n >= LS_ADAPT_SAMPLE / 4) {
    index_adapt(ix, b, n);
    ix->next_adapt = ix->scanned + LS_ADAPT_EVERY;
  }
  ix->scanned += n;
  size_t floor = 0;  // start of the first segment not yet handled
  size_t p = 0;      // next probe position
  size_t cnt = 0;    // '\n' counted up to here
  size_t next_check = 0;
  int rc = 0;
  while (floor < n && rc == 0) {
    if (all_lines(s)) {
      size_t e = next_sep(b, floor, n);
      s->nl += count_nl(b + cnt, floor - cnt);
      cnt = floor;
      if (e > floor) {
        rc = segment(s, b + floor, e - floor, true);
      }
      floor = p = e + 1;
      continue;
    }
    if (p >= next_check) {
      // A segment longer than TP_LOGSCAN_MAX_LINE covers a whole block without separators.
      if (n - p >= LONG_BLOCK && !memchr(b + p, '\n', LONG_BLOCK) &&
          !memchr(b + p, '\r', LONG_BLOCK)) {
        size_t ss = seg_start_before(b, floor, p);
        size_t se = next_sep(b, p, n);
        if (se - ss > TP_LOGSCAN_MAX_LINE) {
          s->nl += count_nl(b + cnt, ss - cnt);
          cnt = ss;
          rc = long_line(s, s->nl + 1, se - ss);
          floor = p = se + 1;
          next_check = p;
          continue;
        }
      }
      next_check = p + LONG_BLOCK;
    }
    size_t ai;
    size_t to = next_check < n ? next_check : n;
    size_t hit = find_anchor(s, b, &p, to, floor, n, &ai);
    if (hit == SIZE_MAX) {
      if (p + LS_GRAM > n) {
        break;
      }
      continue;
    }
    size_t lo = hit > floor + TP_LOGSCAN_MAX_LINE + 1 ? hit - TP_LOGSCAN_MAX_LINE - 1 : floor;
    size_t ss = seg_start_before(b, lo, hit);
    if (ss == lo && lo > floor) {
      ss = seg_start_before(b, floor, hit);  // the segment is long: find its real start
    }
    size_t se = next_sep(b, hit, n);
    s->nl += count_nl(b + cnt, ss - cnt);
    cnt = ss;
    if (se - ss > TP_LOGSCAN_MAX_LINE) {
      rc = long_line(s, s->nl + 1, se - ss);
    } else {
      rc = ls_process_segment(s, b + ss, se - ss, s->nl + 1, true);  // holds an anchor
    }
    floor = p = se + 1;
    if (next_check < p) {
      next_check = p;
    }
  }
  if (rc == 0 && cnt < n) {
    s->nl += count_nl(b + cnt, n - cnt);
  }
  if (rc == 0) {
    note_last_content(s, b, n);
  }
  return rc;
}

// Binary detection on the first HEAD_CHECK bytes: NUL bytes or many control bytes.
static int head_check(TpLogScan *s, const char *data, size_t len) {
  if (s->head_seen >= HEAD_CHECK || s->head_binary) {
    return 0;
  }
  size_t n = HEAD_CHECK - s->head_seen;
  if (n > len) {
    n = len;
  }
  const char *z = memchr(data, '\0', n);
  if (z) {
    s->head_binary = true;
    uint64_t line = s->nl + count_nl(data, (size_t)(z - data)) + 1;
    return ls_diag(s, TP_LOG_D_BINARY, TP_LOG_SEV_WARNING, line, "input looks binary (NUL byte)",
                   NULL, 0);
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)data[i];
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != 0x1b && c != '\f' && c != '\v' &&
         c != '\b' && c != 0x07) ||
        c == 0x7f) {
      s->head_ctrl++;
    }
  }
  s->head_seen += n;
  return 0;
}

static int head_finish(TpLogScan *s) {
  if (!s->head_binary && s->head_seen >= 64 && s->head_ctrl * 10 > s->head_seen) {
    s->head_binary = true;
    return ls_diag(s, TP_LOG_D_BINARY, TP_LOG_SEV_WARNING, 1, "input looks binary (control bytes)",
                   NULL, 0);
  }
  return 0;
}

static int check_state(TpLogScan *s, TpError *err) {
  if (s->failed) {
    return tp_error_set(err, s->failed, "%s", s->fail_msg);
  }
  if (s->finished) {
    return tp_error_set(err, TP_EINVAL, "log scanner: already finished");
  }
  return 0;
}

static int fail_from(TpLogScan *s, int rc, TpError *err) {
  if (!s->failed) {
    s->failed = rc;
    if (rc == TP_ENOMEM) {
      snprintf(s->fail_msg, sizeof s->fail_msg, "log scanner: out of memory");
    } else if (!s->fail_msg[0]) {
      snprintf(s->fail_msg, sizeof s->fail_msg, "log scanner: failed (%s)", tp_error_name(rc));
    }
  }
  return tp_error_set(err, s->failed, "%s", s->fail_msg);
}

int tp_logscan_fail(TpLogScan *s, int code, const char *msg) {
  if (!s->failed) {
    s->failed = code;
    snprintf(s->fail_msg, sizeof s->fail_msg, "%s", msg ? msg : "log scanner: failed");
  }
  return code;
}

int tp_logscan_feed(TpLogScan *s, const char *data, size_t len, TpError *err) {
  int rc = check_state(s, err);
  if (rc) {
    return rc;
  }
  if (len == 0) {
    return 0;
  }
  rc = head_check(s, data, len);
  s->bytes += len;
  s->last_byte = data[len - 1];
  while (rc == 0 && len > 0) {
    if (s->skipping) {
      size_t e = next_sep(data, 0, len);
      if (e == len) {
        s->skip_bytes += len;
        return 0;
      }
      s->skip_bytes += e;
      s->skipping = false;
      rc = long_line(s, s->skip_line, s->skip_bytes);
      if (data[e] == '\n') {
        s->nl++;
      }
      data += e + 1;
      len -= e + 1;
      continue;
    }
    if (s->carry.len > 0) {
      size_t e = next_sep(data, 0, len);
      if (e == len || s->carry.len + e > TP_LOGSCAN_MAX_LINE) {
        if (s->carry.len + e > TP_LOGSCAN_MAX_LINE) {
          s->skipping = true;
          s->skip_line = s->nl + 1;
          s->skip_bytes = s->carry.len;
          s->carry.len = 0;
          continue;
        }
        if (tp_buf_append(&s->carry, data, len) != 0) {
          rc = TP_ENOMEM;
        }
        break;
      }
      if (tp_buf_append(&s->carry, data, e) != 0) {
        rc = TP_ENOMEM;
        break;
      }
      rc = segment(s, s->carry.data, s->carry.len, true);
      s->carry.len = 0;
      if (data[e] == '\n') {
        s->nl++;
      }
      data += e + 1;
      len -= e + 1;
      continue;
    }
    const char *q = memrchr(data, '\n', len);
    size_t from = q ? (size_t)(q - data) + 1 : 0;
    const char *r = memrchr(data + from, '\r', len - from);
    size_t end = r ? (size_t)(r - data) + 1 : from;  // just past the last separator
    if (end > 0) {
      rc = scan_region(s, data, end);
      data += end;
      len -= end;
    }
    if (rc == 0 && len > 0) {
      if (len > TP_LOGSCAN_MAX_LINE) {
        s->skipping = true;
        s->skip_line = s->nl + 1;
        s->skip_bytes = len;
      } else if (tp_buf_append(&s->carry, data, len) != 0) {
        rc = TP_ENOMEM;
      }
    }
    break;
  }
  if (rc) {
    return fail_from(s, rc, err);
  }
  return 0;
}

// Buffers read ahead while the digest thread hashes the ones before (each READ_CHUNK bytes).
#define DIGEST_BUFFERS 4

// Reads the file at `path` to the end and feeds it; with `pipe`, every chunk is also handed to
// the digest thread, and a buffer is reused only once the thread is done with it.
static int feed_path(TpLogScan *s, const char *path, TpDigestPipe *pipe, uint64_t *size,
                     TpError *err) {
  int rc = check_state(s, err);
  if (rc) {
    return rc;
  }
  struct stat st;
  int fd = tp_fs_open_read(path, &st, err);
  if (fd < 0) {
    return fd;
  }
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  size_t nbuf = pipe ? DIGEST_BUFFERS : 1;
  char *bufs = malloc(nbuf * READ_CHUNK);
  if (!bufs) {
    close(fd);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
  }
  uint64_t tickets[DIGEST_BUFFERS] = {0};
  uint64_t total = 0;
  for (size_t k = 0;; k = (k + 1) % nbuf) {
    char *buf = bufs + k * READ_CHUNK;
    if (pipe && tickets[k]) {
      tp_digest_pipe_wait(pipe, tickets[k]);
    }
    ssize_t got = read(fd, buf, READ_CHUNK);
    if (got < 0) {
      if (errno == EINTR) {
        k = (k + nbuf - 1) % nbuf;  // same buffer again
        continue;
      }
      rc = tp_error_errno(err, "%s", path);
      break;
    }
    if (got == 0) {
      break;
    }
    total += (uint64_t)got;
    if (pipe) {
      tickets[k] = tp_digest_pipe_push(pipe, buf, (size_t)got);
    }
    rc = tp_logscan_feed(s, buf, (size_t)got, err);
    if (rc) {
      break;
    }
  }
  if (pipe) {
    // The thread may still read the buffers: wait for every block before freeing them.
    for (size_t k = 0; k < nbuf; k++) {
      if (tickets[k]) {
        tp_digest_pipe_wait(pipe, tickets[k]);
      }
    }
  }
  free(bufs);
  close(fd);
  if (size) {
    *size = total;
  }
  return rc;
}

int tp_logscan_feed_file(TpLogScan *s, const char *path, TpError *err) {
  return feed_path(s, path, NULL, NULL, err);
}

int tp_logscan_feed_file_sha256(TpLogScan *s, const char *path, char hex[TP_DIGEST_SHA256_HEX + 1],
                                uint64_t *size, TpError *err) {
  TpDigestPipe *pipe = tp_digest_pipe_new(path, err);
  if (!pipe) {
    return err ? err->code : TP_ENOMEM;
  }
  int rc = feed_path(s, path, pipe, size, err);
  if (rc) {
    tp_digest_pipe_free(pipe);
    return rc;
  }
  return tp_digest_pipe_finish(pipe, hex, err);
}

int tp_logscan_finish(TpLogScan *s, TpError *err) {
  if (s->failed) {
    return tp_error_set(err, s->failed, "%s", s->fail_msg);
  }
  if (s->finished) {
    return 0;
  }
  int rc = 0;
  if (s->skipping) {
    s->skipping = false;
    rc = long_line(s, s->skip_line, s->skip_bytes);
  } else if (s->carry.len > 0) {
    rc = segment(s, s->carry.data, s->carry.len, false);
    s->carry.len = 0;
  }
  if (rc == 0) {
    rc = head_finish(s);
  }
  if (rc == 0) {
    rc = ls_finish_parse(s);
  }
  if (rc) {
    return fail_from(s, rc, err);
  }
  s->finished = true;
  s->diag_dirty = true;
  return 0;
}

uint64_t tp_logscan_lines(const TpLogScan *s) {
  return s->nl + (s->bytes > 0 && s->last_byte != '\n' ? 1 : 0);
}

uint64_t tp_logscan_bytes(const TpLogScan *s) {
  return s->bytes;
}

// --- Lifetime -------------------------------------------------------------------------------

TpLogScan *tp_logscan_new(const TpLogScanOpts *opts, TpError *err) {
  TpLogScan *s = calloc(1, sizeof *s);
  if (!s) {
    tp_error_set(err, TP_ENOMEM, "log scanner: out of memory");
    return NULL;
  }
  if (opts) {
    s->opts = *opts;
  } else {
    tp_logscan_opts_init(&s->opts);
  }
  int rc = index_build(s);
  if (rc != 0) {
    free(s->index.anchors);
    free(s->index.prefix);
    free(s->index.ents);
    free(s);
    tp_error_set(err, rc,
                 rc == TP_ENOMEM ? "log scanner: out of memory" : "log scanner: bad anchor table");
    return NULL;
  }
  s->prev_skipped = -1;
  s->family = LS_FAM_NONE;
  // A forced format limits the record families; Primus runs Megatron or torchtitan.
  switch (s->opts.format) {
    case TP_LOG_FORMAT_MEGATRON:
      s->families = 1u << LS_FAM_MEGATRON;
      break;
    case TP_LOG_FORMAT_PRIMUS:
      s->families = (1u << LS_FAM_MEGATRON) | (1u << LS_FAM_TORCHTITAN);
      s->primus_seen = true;
      break;
    case TP_LOG_FORMAT_NEMO:
      s->families = 1u << LS_FAM_NEMO;
      break;
    case TP_LOG_FORMAT_TORCHTITAN:
      s->families = 1u << LS_FAM_TORCHTITAN;
      break;
    case TP_LOG_FORMAT_CUSTOM:
      s->family = LS_FAM_CUSTOM;
      s->families = 1u << LS_FAM_CUSTOM;
      s->custom_id = s->opts.custom_id;
      break;
    case TP_LOG_FORMAT_NONE:
      s->families = ~0u;
      break;
  }
  return s;
}

void tp_logscan_free(TpLogScan *s) {
  if (!s) {
    return;
  }
  free(s->index.anchors);
  free(s->index.prefix);
  free(s->index.ents);
  free(s->index.counts);
  tp_buf_free(&s->carry);
  tp_buf_free(&s->norm);
  tp_buf_free(&s->pend.kv);
  free(s->recs);
  free(s->dpool);
  tp_buf_free(&s->spool);
  for (int i = 0; i < 2; i++) {
    tp_buf_free(&s->args[i].pool);
    free(s->args[i].ents);
  }
  free(s->shards);
  free(s->mem);
  for (int i = 0; i < TP_LOG_MS_COUNT; i++) {
    free(s->meta_str[i]);
  }
  for (int i = 0; i < TP_LOG_D_COUNT; i++) {
    free(s->diags[i].msg);
  }
  free(s->diag_view);
  free(s);
}

// --- Text hygiene -----------------------------------------------------------------------------

// Appends p[0, n) as valid UTF-8: invalid sequences become U+FFFD, control bytes a space.
static int append_utf8(TpBuf *b, const char *p, size_t n) {
  static const char repl[] = "\xef\xbf\xbd";
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      char ch = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
      if (tp_buf_append(b, &ch, 1) != 0) {
        return TP_ENOMEM;
      }
      i++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; k++) {
      unsigned char cc = (unsigned char)p[i + k];
      if ((cc & 0xc0) != 0x80) {
        ok = false;
      }
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
               (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))) {
      ok = false;
    }
    if (ok) {
      if (tp_buf_append(b, p + i, len) != 0) {
        return TP_ENOMEM;
      }
      i += len;
    } else {
      // One U+FFFD for the lead byte and the continuation bytes that follow it (the maximal
      // ill-formed subpart), as decoders "with replacement" do.
      if (tp_buf_append(b, repl, 3) != 0) {
        return TP_ENOMEM;
      }
      size_t k = 1;
      while (len > 0 && k < len && i + k < n && ((unsigned char)p[i + k] & 0xc0) == 0x80) {
        k++;
      }
      i += k;
    }
  }
  return 0;
}

// --- Diagnostics ------------------------------------------------------------------------------

static int diag_set_message(LsDiagAcc *d, const char *what, const char *excerpt,
                            size_t excerpt_len);

int ls_diag(TpLogScan *s, TpLogDiagKind kind, TpLogSeverity sev, uint64_t line, const char *what,
            const char *excerpt, size_t excerpt_len) {
  LsDiagAcc *d = &s->diags[kind];
  s->diag_dirty = true;
  if (d->seen) {
    d->count++;
    if (sev <= d->sev) {
      return 0;
    }
  } else {
    d->seen = true;
    d->first_line = line;
    d->count = 1;
  }
  d->sev = sev;
  d->line = line;
  return diag_set_message(d, what, excerpt, excerpt_len);
}

int ls_diag_message(TpLogScan *s, TpLogDiagKind kind, const char *what, const char *excerpt,
                    size_t excerpt_len) {
  if (!s->diags[kind].seen) {
    return 0;
  }
  s->diag_dirty = true;
  return diag_set_message(&s->diags[kind], what, excerpt, excerpt_len);
}

static int diag_set_message(LsDiagAcc *d, const char *what, const char *excerpt,
                            size_t excerpt_len) {
  TpBuf b = {0};
  const size_t max_excerpt = 240;
  int rc = tp_buf_append(&b, what, strlen(what));
  if (rc == 0 && excerpt && excerpt_len > 0) {
    size_t n = excerpt_len;
    bool cut = false;
    if (n > max_excerpt) {
      n = max_excerpt;
      while (n > 0 && ((unsigned char)excerpt[n] & 0xc0) == 0x80) {
        n--;  // do not split a UTF-8 sequence
      }
      cut = true;
    }
    rc = tp_buf_append(&b, ": ", 2);
    if (rc == 0) {
      rc = append_utf8(&b, excerpt, n);
    }
    if (rc == 0 && cut) {
      rc = tp_buf_append(&b, "\xe2\x80\xa6", 3);
    }
  }
  if (rc == 0 && !tp_buf_cstr(&b)) {
    rc = TP_ENOMEM;
  }
  if (rc) {
    tp_buf_free(&b);
    return rc;
  }
  free(d->msg);
  d->msg = b.data;
  return 0;
}

static int build_diag_view(TpLogScan *s) {
  size_t n = 0;
  for (int k = 0; k < TP_LOG_D_COUNT; k++) {
    n += s->diags[k].seen;
  }
  TpLogDiag *v = n ? calloc(n, sizeof *v) : NULL;
  if (n && !v) {
    return TP_ENOMEM;
  }
  size_t j = 0;
  for (int k = 0; k < TP_LOG_D_COUNT; k++) {
    const LsDiagAcc *d = &s->diags[k];
    if (!d->seen) {
      continue;
    }
    v[j].kind = (TpLogDiagKind)k;
    v[j].severity = d->sev;
    v[j].line = d->line;
    v[j].first_line = d->first_line;
    v[j].count = d->count;
    v[j].message = d->msg ? d->msg : diag_names[k];
    j++;
  }
  // Insertion sort by first line (few entries), stable on kind order.
  for (size_t i = 1; i < n; i++) {
    TpLogDiag t = v[i];
    size_t k = i;
    while (k > 0 && v[k - 1].first_line > t.first_line) {
      v[k] = v[k - 1];
      k--;
    }
    v[k] = t;
  }
  free(s->diag_view);
  s->diag_view = v;
  s->ndiag_view = n;
  s->diag_dirty = false;
  return 0;
}

size_t tp_logscan_ndiags(const TpLogScan *s) {
  TpLogScan *m = (TpLogScan *)s;  // the view is a cache of the accumulators
  if (m->diag_dirty && build_diag_view(m) != 0) {
    return 0;
  }
  return m->ndiag_view;
}

const TpLogDiag *tp_logscan_diag(const TpLogScan *s, size_t i) {
  size_t n = tp_logscan_ndiags(s);
  return i < n ? &s->diag_view[i] : NULL;
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
  int rc = append_utf8(&clean, name, name_len > 1024 ? 1024 : name_len);
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
  int rc = append_utf8(&cname, name, name_len > 1024 ? 1024 : name_len);
  if (rc == 0) {
    rc = append_utf8(&cval, value, value_len > 4096 ? 4096 : value_len);
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
  // the kept one had no loss and this one has (a PP non-last stage printed first): it replaces it.
  bool has_iter = p->present >> TP_LOG_F_ITERATION & 1;
  if (has_iter && s->last_has && s->last_epoch == s->epoch &&
      s->last_iter == p->v[TP_LOG_F_ITERATION]) {
    if (!has_loss || s->last_loss || s->nrecs == 0) {
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
  if (has_iter) {
    s->last_has = true;
    s->last_iter = p->v[TP_LOG_F_ITERATION];
    s->last_epoch = s->epoch;
    s->last_loss = has_loss;
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

TpLogFormat tp_logscan_format(const TpLogScan *s, int *custom_id) {
  if (custom_id) {
    *custom_id = s->custom_id;
  }
  if (s->opts.format != TP_LOG_FORMAT_NONE) {
    if (s->opts.format == TP_LOG_FORMAT_MEGATRON && s->primus_seen) {
      return TP_LOG_FORMAT_MEGATRON;  // forced: the caller knows better
    }
    return s->opts.format;
  }
  switch (s->family) {
    case LS_FAM_MEGATRON:
      return s->primus_seen ? TP_LOG_FORMAT_PRIMUS : TP_LOG_FORMAT_MEGATRON;
    case LS_FAM_NEMO:
      return TP_LOG_FORMAT_NEMO;
    case LS_FAM_TORCHTITAN:
      return s->primus_seen ? TP_LOG_FORMAT_PRIMUS : TP_LOG_FORMAT_TORCHTITAN;
    case LS_FAM_CUSTOM:
      return TP_LOG_FORMAT_CUSTOM;
    default:
      break;
  }
  // No record line: Primus' own markers (logger prefix, runner lines) still name the format.
  return s->primus_seen ? TP_LOG_FORMAT_PRIMUS : TP_LOG_FORMAT_NONE;
}

// --- Arguments, parameters, memory, meta ------------------------------------------------------

int ls_arg_add(TpLogScan *s, TpLogArgDump which, const char *name, size_t nlen, const char *val,
               size_t vlen) {
  LsArgs *a = &s->args[which];
  if (vlen > 65536) {
    vlen = 65536;
  }
  if (a->pool.len + nlen + vlen > TP_LOGSCAN_MAX_ARGS_BYTES) {
    // A log repeating dumps without end: keep what was read, say so once per dump kind.
    if (s->args_full[which]) {
      return 0;
    }
    s->args_full[which] = true;
    char what[160];
    snprintf(what, sizeof what, "argument dumps exceed %u MiB; later arguments are dropped",
             TP_LOGSCAN_MAX_ARGS_BYTES >> 20);
    return ls_diag(s, TP_LOG_D_BAD_ARGS, TP_LOG_SEV_WARNING, s->nl + 1, what, name, nlen);
  }
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 256;
    LsArgEnt *e = realloc(a->ents, cap * sizeof *e);
    if (!e) {
      return TP_ENOMEM;
    }
    a->ents = e;
    a->cap = cap;
  }
  LsArgEnt *e = &a->ents[a->n];
  e->name_ofs = a->pool.len;
  if (append_utf8(&a->pool, name, nlen) != 0) {
    return TP_ENOMEM;
  }
  e->name_len = (uint32_t)(a->pool.len - e->name_ofs);
  e->val_ofs = a->pool.len;
  if (append_utf8(&a->pool, val, vlen) != 0) {
    return TP_ENOMEM;
  }
  e->val_len = (uint32_t)(a->pool.len - e->val_ofs);
  a->n++;
  return 0;
}

size_t tp_logscan_nargs(const TpLogScan *s, TpLogArgDump which) {
  return (int)which >= 0 && which <= TP_LOG_ARGS_PRIMUS ? s->args[which].n : 0;
}

bool tp_logscan_arg(const TpLogScan *s, TpLogArgDump which, size_t i, const char **name,
                    size_t *name_len, const char **value, size_t *value_len) {
  if ((int)which < 0 || which > TP_LOG_ARGS_PRIMUS || i >= s->args[which].n) {
    return false;
  }
  const LsArgs *a = &s->args[which];
  const LsArgEnt *e = &a->ents[i];
  *name = a->pool.data + e->name_ofs;
  *name_len = e->name_len;
  *value = a->pool.data + e->val_ofs;
  *value_len = e->val_len;
  return true;
}

int ls_shard_add(TpLogScan *s, long tp, long gtp, long pp, double count) {
  for (size_t i = 0; i < s->nshards; i++) {
    TpLogShard *sh = &s->shards[i];
    if (sh->tp == tp && sh->gtp == gtp && sh->pp == pp) {
      sh->count = count;  // a restart prints the same shard again
      return 0;
    }
  }
  if (s->nshards == s->capshards) {
    size_t cap = s->capshards ? s->capshards * 2 : 8;
    TpLogShard *n = realloc(s->shards, cap * sizeof *n);
    if (!n) {
      return TP_ENOMEM;
    }
    s->shards = n;
    s->capshards = cap;
  }
  s->shards[s->nshards++] = (TpLogShard){tp, gtp, pp, count};
  s->params.present = true;
  return 0;
}

int ls_mem_add(TpLogScan *s, const TpLogMemReport *m) {
  if (s->nmem == s->capmem) {
    size_t cap = s->capmem ? s->capmem * 2 : 8;
    TpLogMemReport *n = realloc(s->mem, cap * sizeof *n);
    if (!n) {
      return TP_ENOMEM;
    }
    s->mem = n;
    s->capmem = cap;
  }
  s->mem[s->nmem++] = *m;
  return 0;
}

void ls_meta_set(TpLogScan *s, TpLogMetaKey k, double v, bool override) {
  if (!isfinite(v)) {
    return;
  }
  if (override || !(s->meta.present >> k & 1)) {
    s->meta.present |= 1u << k;
    s->meta.num[k] = v;
  }
}

int ls_meta_str(TpLogScan *s, TpLogMetaStr k, const char *v, size_t n, bool override) {
  if (s->meta_str[k] && !override) {
    return 0;
  }
  TpBuf b = {0};
  if (n > 256) {
    n = 256;
  }
  if (append_utf8(&b, v, n) != 0 || !tp_buf_cstr(&b)) {
    tp_buf_free(&b);
    return TP_ENOMEM;
  }
  free(s->meta_str[k]);
  s->meta_str[k] = b.data;
  s->meta.str[k] = b.data;
  return 0;
}

const TpLogParams *tp_logscan_params(const TpLogScan *s) {
  TpLogParams *p = &((TpLogScan *)s)->params;  // shard pointer refreshed on access
  p->shards = s->shards;
  p->nshards = s->nshards;
  return p;
}

size_t tp_logscan_nmemory(const TpLogScan *s) {
  return s->nmem;
}

const TpLogMemReport *tp_logscan_memory(const TpLogScan *s, size_t i) {
  return i < s->nmem ? &s->mem[i] : NULL;
}

const TpLogTheoretical *tp_logscan_theoretical(const TpLogScan *s) {
  return &s->theo;
}

const TpLogMeta *tp_logscan_meta(const TpLogScan *s) {
  return &s->meta;
}
