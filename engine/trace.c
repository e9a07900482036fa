// Profiler traces: reading one (trace_src for the bytes; trace_read for Kineto's JSON,
// trace_rocprof for rocprofv3's CSV, trace_nsys for Nsight Systems' SQLite export, chosen by the
// first bytes; trace_store for what is kept) and the per-step breakdowns: step windows on the GPU,
// the union of busy time, compute and non-compute time as Holistic Trace Analysis defines them
// (hta/analyzers/breakdown_analysis.py, get_temporal_breakdown), per-class times, communication
// hidden behind compute, host-wait gaps. docs/trace.md defines each figure.
#include "trace.h"

#include <stdlib.h>
#include <string.h>

#include "trace_coll.h"
#include "trace_cpu.h"
#include "trace_idle.h"
#include "trace_mem.h"
#include "trace_nsys.h"
#include "trace_read.h"
#include "trace_rocprof.h"
#include "trace_src.h"
#include "trace_store.h"

const char *const tp_trace_kind_names[TP_TRACE_KINDS] = {"kernel", "memcpy", "memset"};

// Reads a trace in the format its first bytes show: an SQLite database (Nsight Systems), a CSV
// whose header names rocprofv3's columns, else JSON. `path` is the file (NULL: memory).
static int parse_any(TpTraceSrc *src, const char *path, TpTrace *t, TpError *err) {
  const unsigned char *p = NULL;
  size_t n = 0;
  int rc = tp_trace_src_peek(src, &p, &n, err);
  if (rc < 0) {
    return rc;
  }
  if (rc > 0 && tp_trace_nsys_sniff(p, n)) {
    return tp_trace_parse_nsys(src, path, t, err);
  }
  if (rc > 0 && tp_trace_rocprof_sniff(p, n)) {
    return path ? tp_trace_read_rocprof(src, path, t, err)
                : tp_trace_parse_rocprof_csv(src, t, err);
  }
  return tp_trace_parse(src, t, err);
}

static int read_from(TpTraceSrc *src, const char *label, const char *path, TpTrace **out,
                     TpError *err) {
  TpTrace *t = tp_trace_new(label);
  if (!t) {
    tp_trace_src_free(src);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", label);
  }
  int rc = parse_any(src, path, t, err);
  tp_trace_cpu_drop_times(t);  // every memory event is taken: the ranges' times may go
  if (rc == 0) {
    t->compressed = tp_trace_src_compressed(src);
    if (tp_trace_src_truncated(src) && !t->truncated) {
      t->truncated = true;
      unsigned long long at = tp_trace_src_compressed_offset(src);
      tp_trace_warn(t,
                    "%s: the gzip stream ends early, at compressed byte %llu (decompressed %llu)",
                    label, at, (unsigned long long)t->bytes);
    }
    if (tp_trace_finish(t) != 0 || tp_trace_cpu_finish(t) != 0 || tp_trace_coll_finish(t) != 0 ||
        tp_trace_mem_finish(t) != 0) {
      rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", label);
    }
  }
  tp_trace_src_free(src);
  if (rc != 0) {
    tp_trace_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

int tp_trace_read(const char *path, TpTrace **out, TpError *err) {
  TpTraceSrc *src = NULL;
  int rc = tp_trace_src_file(path, &src, err);
  if (rc != 0) {
    return rc;
  }
  return read_from(src, path, path, out, err);
}

int tp_trace_read_mem(const char *label, const void *data, size_t n, TpTrace **out, TpError *err) {
  TpTraceSrc *src = NULL;
  int rc = tp_trace_src_mem(label, data, n, &src, err);
  if (rc != 0) {
    return rc;
  }
  return read_from(src, label, NULL, out, err);
}

void tp_trace_free(TpTrace *t) {
  tp_trace_mem_free(t);
  tp_trace_cpu_free(t);
  tp_trace_coll_free(t);
  tp_trace_store_free(t);
}

int64_t tp_trace_op_dur(const TpTrace *t, size_t i) {
  return tp_trace_store_op_dur(t, i);
}

void tp_trace_categories(const TpTrace *t,
                         void (*fn)(const char *cat, size_t len, uint64_t count, void *ud),
                         void *ud) {
  tp_trace_store_categories(t, fn, ud);
}

static int cmp_op(const void *a, const void *b) {
  const TpTraceOp *x = a, *y = b;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

// Sorts the ops by start time, once (stably, in place: tp_trace_store_sort).
static int sort_ops(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  if (!pv->ops_sorted) {
    if (tp_trace_store_sort(t->ops, t->nops, sizeof(TpTraceOp), cmp_op) != 0) {
      return TP_ENOMEM;
    }
    pv->ops_sorted = true;
  }
  return 0;
}

int tp_trace_ops(TpTrace *t, const uint8_t *wanted, uint32_t step, TpTraceOps *out, TpError *err) {
  if (sort_ops(t) != 0) {
    memset(out, 0, sizeof(*out));
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", t->path);
  }
  return tp_trace_cpu_ops(t, wanted, step, out, err);
}

void tp_trace_ops_free(TpTraceOps *o) {
  tp_trace_cpu_ops_free(o);
}

const TpTraceColl *tp_trace_collectives(const TpTrace *t, size_t *n) {
  return tp_trace_coll_list(t, n);
}

int tp_trace_read_text(const char *path, size_t max, TpBuf *out, bool *truncated, TpError *err) {
  TpTraceSrc *src = NULL;
  *truncated = false;
  int rc = tp_trace_src_file(path, &src, err);
  if (rc != 0) {
    return rc;
  }
  for (;;) {
    const unsigned char *p = NULL;
    size_t n = 0;
    rc = tp_trace_src_next(src, &p, &n, err);
    if (rc <= 0) {
      break;
    }
    if (out->len + n > max) {
      rc = tp_error_set(err, TP_ELIMIT, "%s: over %zu bytes once decompressed", path, max);
      break;
    }
    if (tp_buf_append(out, p, n) != 0) {
      rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
      break;
    }
  }
  *truncated = rc == 0 && tp_trace_src_truncated(src);
  tp_trace_src_free(src);
  return rc < 0 ? rc : 0;
}

const TpTraceMem *tp_trace_memory(const TpTrace *t) {
  return tp_trace_mem_get(t);
}

const char *tp_trace_coll_text(const TpTrace *t, uint32_t id, size_t *len) {
  return tp_trace_coll_string(t, id, len);
}

typedef struct Edge {
  int64_t time;
  uint32_t op;  // index into t->ops
  uint8_t cls;
  int8_t delta;  // +1 start, -1 end
} Edge;

static int cmp_edge(const void *a, const void *b) {
  const Edge *x = a, *y = b;
  if (x->time != y->time) {
    return (x->time > y->time) - (x->time < y->time);
  }
  return (x->delta > y->delta) - (x->delta < y->delta);  // ends first: no zero-length overlap
}

typedef struct Window {
  size_t step;
  int64_t start, end;
} Window;

static int cmp_window(const void *a, const void *b) {
  const Window *x = a, *y = b;
  return (x->start > y->start) - (x->start < y->start);
}

// Whether the op starting at `ops[i]` (and those starting at the same time) was launched after
// `since`: the GPU then waited for the host.
static bool launched_after(const TpTrace *t, size_t i, int64_t since) {
  int64_t ts = t->ops[i].ts;
  for (size_t j = i; j < t->nops && t->ops[j].ts == ts; j++) {
    const TpTraceLaunch *l = tp_trace_store_launch(t, t->ops[j].corr);
    if (l && l->ts + (int64_t)l->dur > since) {
      return true;
    }
  }
  return false;
}

static size_t first_op_at_or_after(const TpTrace *t, int64_t ts) {
  size_t lo = 0, hi = t->nops;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->ops[mid].ts < ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Spreads `len` ns equally over the classes set in `mask`.
static void spread(TpTraceClassTime *cls, uint64_t mask, int64_t len) {
  int n = __builtin_popcountll(mask);
  double share = (double)len / n;
  while (mask) {
    int c = __builtin_ctzll(mask);
    cls[c].exclusive += share;
    mask &= mask - 1;
  }
}

// Sweeps one window [w->start, w->end): fills st from the ops overlapping it; each idle gap gets
// its cause (trace_idle.h; `gap` the latency threshold).
static int sweep_window(const TpTrace *t, const Window *w, const uint8_t *class_of,
                        const uint64_t kind_mask[3], int64_t max_dur, int64_t gap, Edge **edges,
                        size_t *edges_cap, TpTraceStepTime *st) {
  size_t i =
      first_op_at_or_after(t, w->start > INT64_MIN + max_dur ? w->start - max_dur : INT64_MIN);
  size_t n = 0;
  for (; i < t->nops && t->ops[i].ts < w->end; i++) {
    int64_t a = t->ops[i].ts, b = a + tp_trace_op_dur(t, i);
    if (b <= w->start || b <= a) {
      continue;
    }
    if (a < w->start) {
      a = w->start;
    }
    if (b > w->end) {
      b = w->end;
    }
    if (n + 2 > *edges_cap) {
      size_t nc = *edges_cap ? *edges_cap * 2 : 1024;
      Edge *e = realloc(*edges, nc * sizeof(Edge));
      if (!e) {
        return TP_ENOMEM;
      }
      *edges = e;
      *edges_cap = nc;
    }
    uint8_t c = class_of[t->ops[i].name];
    (*edges)[n++] = (Edge){a, (uint32_t)i, c, +1};
    (*edges)[n++] = (Edge){b, (uint32_t)i, c, -1};
  }
  if (n > 1) {  // *edges is NULL before the first op
    qsort(*edges, n, sizeof(Edge), cmp_edge);
  }
  uint32_t active[TP_TRACE_MAX_CLASSES] = {0};
  uint64_t mask = 0;
  int64_t prev = w->start, gap_start = w->start;
  size_t nactive = 0;
  const Edge *e = *edges;
  for (size_t k = 0; k < n;) {
    int64_t now = e[k].time;
    int64_t len = now - prev;
    if (len > 0 && mask) {
      st->busy += len;
      bool compute = mask & kind_mask[TP_TRACE_COMPUTE];
      bool comm = mask & kind_mask[TP_TRACE_COMMUNICATION];
      if (compute) {
        st->compute += len;
        spread(st->cls, mask & kind_mask[TP_TRACE_COMPUTE], len);
      } else if (comm) {
        spread(st->cls, mask & kind_mask[TP_TRACE_COMMUNICATION], len);
      } else {
        spread(st->cls, mask & kind_mask[TP_TRACE_MEMORY], len);
      }
      if (comm) {
        st->comm += len;
        if (compute) {
          st->comm_overlapped += len;
        }
      }
      for (uint64_t m = mask; m; m &= m - 1) {
        st->cls[__builtin_ctzll(m)].time += len;
      }
    }
    bool was_idle = nactive == 0;
    for (; k < n && e[k].time == now; k++) {
      uint8_t c = e[k].cls;
      if (e[k].delta > 0) {
        if (active[c]++ == 0) {
          mask |= 1ULL << c;
        }
        nactive++;
      } else {
        if (--active[c] == 0) {
          mask &= ~(1ULL << c);
        }
        nactive--;
      }
    }
    if (was_idle && nactive > 0 && now > gap_start) {
      // A gap ends here: did the GPU wait for the host to launch what comes next?
      size_t first = first_op_at_or_after(t, now);
      if (first < t->nops && launched_after(t, first, gap_start)) {
        st->host_wait += now - gap_start;
      }
      st->cause[tp_trace_idle_cause(t, first, gap_start, now, gap)] += now - gap_start;
    }
    if (!was_idle && nactive == 0) {
      gap_start = now;
    }
    prev = now;
  }
  if (nactive == 0 && w->end > gap_start) {
    size_t first = first_op_at_or_after(t, w->end);
    if (n > 0 && first < t->nops && launched_after(t, first, gap_start)) {
      st->host_wait += w->end - gap_start;
    }
    st->cause[tp_trace_idle_cause(t, first, gap_start, w->end, gap)] += w->end - gap_start;
  }
  st->non_compute = st->busy - st->compute;
  st->idle = st->window - st->busy;
  return 0;
}

// Interval merging as HTA's merge_kernel_intervals does it, fed in order of start: a row opens a
// new group when it starts after every end seen so far; a group spans its first start to its
// largest end (negative for a lone row whose end precedes its start).
typedef struct Merge {
  bool any;
  int64_t first, g_start, g_end, max_end, total;
} Merge;

static void merge_add(Merge *m, int64_t a, int64_t b) {
  if (!m->any) {
    *m = (Merge){true, a, a, b, b, 0};
    return;
  }
  if (a > m->max_end) {
    m->total += m->g_end - m->g_start;
    m->g_start = a;
    m->g_end = b;
  } else if (b > m->g_end) {
    m->g_end = b;
  }
  if (b > m->max_end) {
    m->max_end = b;
  }
}

// Closes the last group; returns the merged time; *span: last group's end - first start.
static int64_t merge_end(Merge *m, int64_t *span) {
  if (!m->any) {
    *span = 0;
    return 0;
  }
  *span = m->g_end - m->first;
  return m->total + (m->g_end - m->g_start);
}

static int64_t ceil_us(int64_t ns) {
  int64_t q = ns / 1000, r = ns % 1000;
  return (r > 0 ? q + 1 : q) * 1000;
}

static int64_t floor_us(int64_t ns) {
  int64_t q = ns / 1000, r = ns % 1000;
  return (r < 0 ? q - 1 : q) * 1000;
}

// HTA's whole-trace view (trace.h, TpTraceWhole). HTA also takes the cuda_sync rows that carry a
// stream for GPU rows (neither compute nor communication there): only `rounded`, HTA's figures,
// counts them, merged in order of start with the ops.
static void whole_view(const TpTrace *t, const uint64_t kind_mask[3], const uint8_t *class_of,
                       TpTraceWhole *w) {
  int64_t limit;
  bool filter = tp_trace_hta_filter(t, &limit);
  const TpTraceStore *pv = t->priv;
  size_t y = 0;
  Merge all = {0}, comp = {0}, rall = {0}, rcomp = {0};
  for (size_t i = 0; i <= t->nops; i++) {  // ops are sorted by start, and so are the syncs
    for (; y < pv->nsync && (i == t->nops || pv->syncs[y].ts <= t->ops[i].ts); y++) {
      const TpTraceSync *sy = &pv->syncs[y];
      const TpTraceLaunch *l = tp_trace_store_launch(t, sy->corr);
      if (sy->kind < TP_TRACE_SYNC_STREAM || sy->stream < 0 || (filter && (!l || l->ts >= limit))) {
        continue;
      }
      w->rounded.syncs++;
      merge_add(&rall, ceil_us(sy->ts), floor_us(sy->ts + sy->dur));
    }
    if (i == t->nops) {
      break;
    }
    const TpTraceOp *op = &t->ops[i];
    const TpTraceLaunch *l = tp_trace_store_launch(t, op->corr);
    if (filter && (!l || l->ts >= limit)) {
      continue;
    }
    int64_t a = op->ts, b = a + tp_trace_op_dur(t, i);
    int64_t ra = ceil_us(a), rb = floor_us(b);
    bool is_compute = (kind_mask[TP_TRACE_COMPUTE] >> class_of[op->name]) & 1;
    w->ops++;
    merge_add(&all, a, b);
    merge_add(&rall, ra, rb);
    if (is_compute) {
      merge_add(&comp, a, b);
      merge_add(&rcomp, ra, rb);
    }
  }
  int64_t span = 0, rspan = 0, unused = 0;
  int64_t busy = merge_end(&all, &span), rbusy = merge_end(&rall, &rspan);
  w->span = span;
  w->idle = span - busy;
  w->compute = merge_end(&comp, &unused);
  w->non_compute = busy - w->compute;
  w->rounded.span = rspan;
  w->rounded.idle = rspan - rbusy;
  w->rounded.compute = merge_end(&rcomp, &unused);
  w->rounded.non_compute = rspan - w->rounded.compute - w->rounded.idle;
}

int tp_trace_breakdown(TpTrace *t, const uint8_t *class_of, const uint8_t *class_kind,
                       size_t nclasses, TpTraceBreakdown *out, TpError *err) {
  return tp_trace_breakdown_with(t, class_of, class_kind, nclasses, NULL, out, err);
}

int tp_trace_breakdown_with(TpTrace *t, const uint8_t *class_of, const uint8_t *class_kind,
                            size_t nclasses, const TpTraceBreakdownOpts *opts,
                            TpTraceBreakdown *out, TpError *err) {
  memset(out, 0, sizeof(*out));
  int64_t gap = opts && opts->gap > 0 ? opts->gap : TP_TRACE_GAP_DEFAULT;
  if (nclasses == 0 || nclasses > TP_TRACE_MAX_CLASSES) {
    return tp_error_set(err, TP_EINVAL, "%s: between 1 and %d classes, got %zu", t->path,
                        TP_TRACE_MAX_CLASSES, nclasses);
  }
  uint64_t kind_mask[3] = {0, 0, 0};
  for (size_t c = 0; c < nclasses; c++) {
    if (class_kind[c] > TP_TRACE_MEMORY) {
      return tp_error_set(err, TP_EINVAL, "%s: class %zu has no kind", t->path, c + 1);
    }
    kind_mask[class_kind[c]] |= 1ULL << c;
  }
  for (size_t n = 0; n < t->nnames; n++) {
    if (class_of[n] >= nclasses) {
      return tp_error_set(err, TP_EINVAL, "%s: name %zu has class %u of %zu", t->path, n + 1,
                          class_of[n] + 1u, nclasses);
    }
  }
  if (sort_ops(t) != 0) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", t->path);
  }
  out->nclasses = nclasses;
  out->gap = gap;
  out->name_count = calloc(t->nnames + 1, sizeof(uint64_t));
  out->name_sum = calloc(t->nnames + 1, sizeof(int64_t));
  Window *win = calloc(t->nsteps + 1, sizeof(Window));
  size_t *win_of = calloc(t->nsteps + 1, sizeof(size_t));
  if (!out->name_count || !out->name_sum || !win || !win_of) {
    free(win);
    free(win_of);
    tp_trace_breakdown_free(out);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", t->path);
  }
  // Each step's window: from its first op's start; its ops' last end (for the last window).
  int64_t max_dur = 0;
  for (size_t s = 0; s < t->nsteps; s++) {
    win[s] = (Window){s, INT64_MAX, INT64_MIN};
  }
  for (size_t i = 0; i < t->nops; i++) {
    const TpTraceOp *op = &t->ops[i];
    int64_t d = tp_trace_op_dur(t, i);
    if (d > max_dur) {
      max_dur = d;
    }
    if (op->step == TP_TRACE_NO_STEP) {
      continue;
    }
    Window *w = &win[op->step];
    if (op->ts < w->start) {
      w->start = op->ts;
    }
    if (op->ts + d > w->end) {
      w->end = op->ts + d;
    }
    out->name_count[op->name]++;
    out->name_sum[op->name] = tp_trace_add_capped(out->name_sum[op->name], d);
  }
  size_t nwin = 0;
  for (size_t s = 0; s < t->nsteps; s++) {
    if (win[s].start != INT64_MAX) {
      win[nwin++] = win[s];
    }
  }
  qsort(win, nwin, sizeof(Window), cmp_window);
  for (size_t k = 0; k + 1 < nwin; k++) {
    win[k].end = win[k + 1].start;
  }
  out->steps = calloc(nwin ? nwin : 1, sizeof(TpTraceStepTime));
  int rc = out->steps ? 0 : TP_ENOMEM;
  Edge *edges = NULL;
  size_t edges_cap = 0;
  for (size_t k = 0; k < nwin && rc == 0; k++) {
    TpTraceStepTime *st = &out->steps[k];
    out->nsteps++;
    st->cls = calloc(nclasses, sizeof(TpTraceClassTime));
    if (!st->cls) {
      rc = TP_ENOMEM;
      break;
    }
    st->step = win[k].step;
    st->start = win[k].start;
    st->window = win[k].end - win[k].start;
    st->ops = t->steps[win[k].step].ops;
    win_of[win[k].step] = k + 1;
    st->longest_name = UINT32_MAX;
    rc = sweep_window(t, &win[k], class_of, kind_mask, max_dur, gap, &edges, &edges_cap, st);
  }
  free(edges);
  if (rc == 0) {
    for (size_t i = 0; i < t->nops; i++) {  // the step's own ops, per class
      const TpTraceOp *op = &t->ops[i];
      if (op->step == TP_TRACE_NO_STEP || win_of[op->step] == 0) {
        continue;
      }
      TpTraceStepTime *st = &out->steps[win_of[op->step] - 1];
      TpTraceClassTime *c = &st->cls[class_of[op->name]];
      int64_t d = tp_trace_op_dur(t, i);
      c->count++;
      c->sum = tp_trace_add_capped(c->sum, d);
      if (st->longest_name == UINT32_MAX || d > st->longest) {
        st->longest = d;
        st->longest_name = op->name;
      }
    }
    whole_view(t, kind_mask, class_of, &out->whole);
    rc = tp_trace_idle_fill(t, win_of, out);
  }
  free(win);
  free(win_of);
  if (rc != 0) {
    tp_trace_breakdown_free(out);
    return tp_error_set(err, rc, "%s: out of memory", t->path);
  }
  return 0;
}

void tp_trace_breakdown_free(TpTraceBreakdown *b) {
  tp_trace_idle_free(b);
  if (b->steps) {
    for (size_t k = 0; k < b->nsteps; k++) {
      free(b->steps[k].cls);
    }
  }
  free(b->steps);
  free(b->name_count);
  free(b->name_sum);
  memset(b, 0, sizeof(*b));
}
