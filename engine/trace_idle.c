// Why the GPU is idle. Each idle gap of a step window gets a cause from the op that ends it and
// what the host did meanwhile: the op's launch call started after the gap began (the host was
// late: blocked in a synchronisation, in the dataloader, or simply launching), else the op was
// queued and the gap is launch latency (below the threshold) or other. The rule for the host is
// Holistic Trace Analysis' (hta/analyzers/breakdown_analysis.py, _analyze_idle_time_for_stream:
// the runtime call's start after the previous kernel's end), whose per-stream breakdown is also
// repeated here to be set against HTA's figures. Besides: launch figures per step (HTA's
// get_cuda_kernel_launch_stats: launch call against kernel duration, launch delay) and the queue
// of each stream (launched ops not yet finished) over each step window. docs/trace.md.
#include "trace_idle.h"

#include <stdlib.h>
#include <string.h>

#include "trace_store.h"

bool tp_trace_hta_filter(const TpTrace *t, int64_t *limit) {
  bool filter = !t->stepless && t->nsteps >= 2;
  *limit = INT64_MAX;
  if (filter) {
    *limit = t->steps[t->nsteps - 1].ts;
    if (t->gpu_step_last > *limit) {
      *limit = t->gpu_step_last;
    }
  }
  return filter;
}

TpTraceCause tp_trace_idle_cause(const TpTrace *t, size_t first, int64_t a, int64_t b,
                                 int64_t gap) {
  // The earliest launch of the ops that end the gap: the host was late when even that one
  // started after the gap began (nothing that runs next was queued).
  bool any = false;
  int64_t launched = INT64_MAX;
  for (size_t j = first; j < t->nops && t->ops[j].ts == b; j++) {
    const TpTraceLaunch *l = tp_trace_store_launch(t, t->ops[j].corr);
    if (l) {
      any = true;
      launched = l->ts < launched ? l->ts : launched;
    }
  }
  if (any && launched > a) {
    if (tp_trace_store_overlaps(t, false, a, b)) {
      return TP_TRACE_CAUSE_SYNC;
    }
    return tp_trace_store_overlaps(t, true, a, b) ? TP_TRACE_CAUSE_LOADER : TP_TRACE_CAUSE_HOST;
  }
  return b - a < gap ? TP_TRACE_CAUSE_LATENCY : TP_TRACE_CAUSE_OTHER;
}

// a + b of any signs, held at the ends of the range instead of overflowing (hostile traces).
static int64_t add_sat(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? INT64_MAX : INT64_MIN;
  }
  return sum;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

// The value of rank ceil(p * n) of n sorted values (the nearest-rank percentile).
static int64_t rank_of(const int64_t *v, size_t n, double p) {
  size_t r = (size_t)(p * (double)n);
  if ((double)r < p * (double)n) {
    r++;
  }
  return v[r > 0 ? r - 1 : 0];
}

// Each window's launch figures, over the kernels of its step that have a launch.
static int fill_launches(const TpTrace *t, const TpTraceLaunch *const *launch_of,
                         const size_t *win_of, TpTraceBreakdown *b) {
  size_t nwin = b->nsteps;
  size_t *start = calloc(nwin + 1, sizeof(size_t));
  if (!start) {
    return TP_ENOMEM;
  }
  for (size_t i = 0; i < t->nops; i++) {
    const TpTraceOp *op = &t->ops[i];
    if (op->kind != TP_TRACE_KERNEL || op->step == TP_TRACE_NO_STEP || !win_of[op->step]) {
      continue;
    }
    const TpTraceLaunch *l = launch_of[i];
    if (!l) {
      continue;
    }
    TpTraceLaunchStats *s = &b->steps[win_of[op->step] - 1].launch;
    int64_t dur = tp_trace_store_op_dur(t, i), delay = op->ts - l->ts;
    s->count++;
    s->shorter += dur < (int64_t)l->dur;
    s->cpu = tp_trace_add_capped(s->cpu, l->dur);
    s->gpu = tp_trace_add_capped(s->gpu, dur);
    s->delay_sum = add_sat(s->delay_sum, delay);
    start[win_of[op->step]]++;
  }
  for (size_t k = 0; k < nwin; k++) {
    start[k + 1] += start[k];
  }
  int64_t *delays = malloc((start[nwin] + 1) * sizeof(int64_t));
  size_t *fill = calloc(nwin + 1, sizeof(size_t));
  if (!delays || !fill) {
    free(delays);
    free(fill);
    free(start);
    return TP_ENOMEM;
  }
  for (size_t i = 0; i < t->nops; i++) {
    const TpTraceOp *op = &t->ops[i];
    if (op->kind != TP_TRACE_KERNEL || op->step == TP_TRACE_NO_STEP || !win_of[op->step]) {
      continue;
    }
    const TpTraceLaunch *l = launch_of[i];
    if (l) {
      size_t k = win_of[op->step] - 1;
      delays[start[k] + fill[k]++] = op->ts - l->ts;
    }
  }
  // The steady windows together: their delays lie first (windows are in time order).
  size_t steady = nwin > 1 ? nwin - 1 : nwin;
  TpTraceLaunchStats *all = &b->launch;
  for (size_t k = 0; k < steady; k++) {
    const TpTraceLaunchStats *s = &b->steps[k].launch;
    all->count += s->count;
    all->shorter += s->shorter;
    all->cpu = tp_trace_add_capped(all->cpu, s->cpu);
    all->gpu = tp_trace_add_capped(all->gpu, s->gpu);
    all->delay_sum = add_sat(all->delay_sum, s->delay_sum);
  }
  for (size_t k = 0; k <= nwin; k++) {
    size_t from = k < nwin ? start[k] : 0, n = k < nwin ? start[k + 1] - start[k] : start[steady];
    if (n == 0) {
      continue;
    }
    int64_t *v = delays + from;
    qsort(v, n, sizeof(int64_t), cmp_i64);
    TpTraceLaunchStats *s = k < nwin ? &b->steps[k].launch : all;
    s->delay_min = v[0];
    s->delay_max = v[n - 1];
    s->delay_p50 = rank_of(v, n, 0.50);
    s->delay_p90 = rank_of(v, n, 0.90);
    s->delay_p99 = rank_of(v, n, 0.99);
  }
  free(delays);
  free(fill);
  free(start);
  return 0;
}

// The index of `stream` among the sorted distinct streams.
static size_t stream_index(const int16_t *streams, size_t n, int16_t stream) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (streams[mid] < stream) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

typedef struct QEdge {
  int64_t time;
  uint32_t stream;  // index among the distinct streams
  int32_t delta;    // +1 launched, -1 finished
} QEdge;

static int cmp_qedge(const void *a, const void *b) {
  const QEdge *x = a, *y = b;
  if (x->time != y->time) {
    return (x->time > y->time) - (x->time < y->time);
  }
  return (x->delta > y->delta) - (x->delta < y->delta);  // finished first
}

// Per stream while sweeping one window: its length and since when it holds it.
typedef struct QState {
  int64_t len, since;
  double area;  // length x ns
} QState;

// Closes the stretch [since, now) of a stream at its current length (`base` more: the ops queued
// across the whole window).
static void q_close(QState *q, TpTraceQueueStat *st, int64_t base, int64_t now) {
  int64_t d = now - q->since;
  if (d > 0) {
    int64_t len = q->len + base;
    q->area += (double)len * (double)d;
    if (len == 0) {
      st->empty += d;
    } else if ((uint64_t)len > st->max) {
      st->max = len > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)len;
    }
  }
  q->since = now;
}

// A change of the ops queued on a stream for whole windows: from window `win` on, `delta` more.
typedef struct QCover {
  uint32_t win, stream;
  int32_t delta;
} QCover;

static int cmp_qcover(const void *a, const void *b) {
  const QCover *x = a, *y = b;
  return (x->win > y->win) - (x->win < y->win);
}

// The first window whose end is after `ts` (the windows tile the timeline in order).
static size_t window_after(const TpTraceBreakdown *b, int64_t ts) {
  size_t lo = 0, hi = b->nsteps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b->steps[mid].start + b->steps[mid].window <= ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The first window starting at or after `ts`.
static size_t window_from(const TpTraceBreakdown *b, int64_t ts) {
  size_t lo = 0, hi = b->nsteps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b->steps[mid].start < ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The windows an op's queued interval [launch call's start, op's end) meets: [*k1, *k2]; false
// when it meets none.
static bool op_windows(const TpTrace *t, const TpTraceLaunch *l, const TpTraceBreakdown *b,
                       size_t i, size_t *k1, size_t *k2) {
  if (!l) {
    return false;
  }
  int64_t a = l->ts, e = t->ops[i].ts + tp_trace_store_op_dur(t, i);
  if (a >= e) {
    return false;
  }
  *k1 = window_after(b, a);
  size_t last = window_from(b, e);
  if (last == 0 || *k1 >= last) {
    return false;
  }
  *k2 = last - 1;
  return true;
}

// Sweeps one window's edges: each stream's queue over it (`base`: its whole-window ops).
static void sweep_queue(TpTraceStepTime *st, QEdge *edges, size_t n, QState *q, const int64_t *base,
                        const int16_t *streams, size_t ns) {
  int64_t ws = st->start, we = st->start + st->window;
  if (n > 1) {
    qsort(edges, n, sizeof(QEdge), cmp_qedge);
  }
  for (size_t s = 0; s < ns; s++) {
    q[s] = (QState){0, ws, 0.0};
    st->queue[s].stream = streams[s];
  }
  for (size_t j = 0; j < n; j++) {
    uint32_t s = edges[j].stream;
    q_close(&q[s], &st->queue[s], base[s], edges[j].time);
    q[s].len += edges[j].delta;
  }
  for (size_t s = 0; s < ns; s++) {
    q_close(&q[s], &st->queue[s], base[s], we);
    st->queue[s].mean = st->window > 0 ? q[s].area / (double)st->window : 0;
  }
}

// The queue of each stream over each window: an op is queued from its launch call's start to its
// end. An op's queued interval is swept in the windows where it begins and ends; the windows it
// covers whole count it throughout (`QCover`), so the work is the ops' and not ops x windows.
// Left out (each step's `queue` NULL) when streams x windows passes 2^24.
static int fill_queues(const TpTrace *t, const TpTraceLaunch *const *launch_of,
                       const int16_t *streams, size_t ns, TpTraceBreakdown *b) {
  size_t nwin = b->nsteps;
  if (nwin == 0 || ns == 0 || (uint64_t)nwin * ns > ((uint64_t)1 << 24)) {
    return 0;
  }
  for (size_t k = 0; k < nwin; k++) {
    b->steps[k].queue = calloc(ns, sizeof(TpTraceQueueStat));
    if (!b->steps[k].queue) {
      return TP_ENOMEM;
    }
  }
  // The ops of each window where an interval begins or ends, as lists (CSR), and the covers.
  size_t *at = calloc(nwin + 1, sizeof(size_t));
  size_t ncover = 0;
  if (!at) {
    return TP_ENOMEM;
  }
  for (size_t i = 0; i < t->nops; i++) {
    size_t k1, k2;
    if (op_windows(t, launch_of[i], b, i, &k1, &k2)) {
      at[k1 + 1]++;
      at[k2 + 1] += k2 != k1;
      ncover += k2 > k1 + 1 ? 2 : 0;
    }
  }
  for (size_t k = 0; k < nwin; k++) {
    at[k + 1] += at[k];
  }
  uint32_t *list = malloc((at[nwin] + 1) * sizeof(uint32_t));
  size_t *fill = calloc(nwin + 1, sizeof(size_t));
  QCover *cover = malloc((ncover + 1) * sizeof(QCover));
  QState *q = calloc(ns + 1, sizeof(QState));
  int64_t *base = calloc(ns + 1, sizeof(int64_t));
  QEdge *edges = NULL;
  size_t cap = 0, nc = 0;
  int rc = list && fill && cover && q && base ? 0 : TP_ENOMEM;
  for (size_t i = 0; i < t->nops && rc == 0; i++) {
    size_t k1, k2;
    if (op_windows(t, launch_of[i], b, i, &k1, &k2)) {
      list[at[k1] + fill[k1]++] = (uint32_t)i;
      if (k2 != k1) {
        list[at[k2] + fill[k2]++] = (uint32_t)i;
      }
      if (k2 > k1 + 1) {
        uint32_t s = (uint32_t)stream_index(streams, ns, t->ops[i].stream);
        cover[nc++] = (QCover){(uint32_t)(k1 + 1), s, +1};
        cover[nc++] = (QCover){(uint32_t)k2, s, -1};
      }
    }
  }
  if (rc == 0 && nc > 1) {
    qsort(cover, nc, sizeof(QCover), cmp_qcover);
  }
  size_t c = 0;
  for (size_t k = 0; k < nwin && rc == 0; k++) {
    for (; c < nc && cover[c].win <= k; c++) {
      base[cover[c].stream] += cover[c].delta;
    }
    TpTraceStepTime *st = &b->steps[k];
    int64_t ws = st->start, we = st->start + st->window;
    size_t n = 0;
    for (size_t j = at[k]; j < at[k + 1]; j++) {
      size_t i = list[j];
      const TpTraceLaunch *l = launch_of[i];
      int64_t a = l->ts > ws ? l->ts : ws;
      int64_t e = t->ops[i].ts + tp_trace_store_op_dur(t, i);
      e = e < we ? e : we;
      if (a >= e) {
        continue;
      }
      if (n + 2 > cap) {
        size_t ncap = cap ? cap * 2 : 1024;
        QEdge *p = realloc(edges, ncap * sizeof(QEdge));
        if (!p) {
          rc = TP_ENOMEM;
          break;
        }
        edges = p;
        cap = ncap;
      }
      uint32_t s = (uint32_t)stream_index(streams, ns, t->ops[i].stream);
      edges[n++] = (QEdge){a, s, +1};
      edges[n++] = (QEdge){e, s, -1};
    }
    if (rc == 0) {
      sweep_queue(st, edges, n, q, base, streams, ns);
    }
  }
  free(edges);
  free(base);
  free(q);
  free(cover);
  free(fill);
  free(list);
  free(at);
  return rc;
}

static int64_t ceil_us(int64_t ns) {
  int64_t q = ns / 1000, r = ns % 1000;
  return (r > 0 ? q + 1 : q) * 1000;
}

static int64_t floor_us(int64_t ns) {
  int64_t q = ns / 1000, r = ns % 1000;
  return (r < 0 ? q - 1 : q) * 1000;
}

// HTA's idle-time breakdown per stream (TpTraceIdleStream), over its whole-trace view's ops.
static int fill_hta_idle(const TpTrace *t, const TpTraceLaunch *const *launch_of,
                         const int16_t *streams, size_t ns, TpTraceBreakdown *b) {
  b->hta_idle = calloc(ns + 1, sizeof(TpTraceIdleStream));
  int64_t *prev_end = malloc((ns + 1) * sizeof(int64_t));
  if (!b->hta_idle || !prev_end) {
    free(prev_end);
    return TP_ENOMEM;
  }
  int64_t limit;
  bool filter = tp_trace_hta_filter(t, &limit);
  for (size_t s = 0; s < ns; s++) {
    b->hta_idle[s].stream = streams[s];
  }
  for (size_t i = 0; i < t->nops; i++) {  // in order of start, as HTA sorts each stream's rows
    const TpTraceOp *op = &t->ops[i];
    const TpTraceLaunch *l = launch_of[i];
    if (filter && (!l || l->ts >= limit)) {
      continue;
    }
    TpTraceIdleStream *s = &b->hta_idle[stream_index(streams, ns, op->stream)];
    size_t si = (size_t)(s - b->hta_idle);
    int64_t start = ceil_us(op->ts), end = floor_us(op->ts + tp_trace_store_op_dur(t, i));
    if (s->ops++ > 0) {
      int64_t interval = start - prev_end[si];
      if (l && ceil_us(l->ts) > prev_end[si]) {
        s->host = add_sat(s->host, interval);
      } else if (interval < b->gap) {
        s->kernel = add_sat(s->kernel, interval);
      } else {
        s->other = add_sat(s->other, interval);
      }
    }
    prev_end[si] = end;
  }
  free(prev_end);
  return 0;
}

int tp_trace_idle_fill(const TpTrace *t, const size_t *win_of, TpTraceBreakdown *b) {
  int16_t *streams = malloc((t->nops + 1) * sizeof(int16_t));
  const TpTraceLaunch **launch_of = malloc((t->nops + 1) * sizeof(*launch_of));
  if (!streams || !launch_of) {
    free(streams);
    free(launch_of);
    return TP_ENOMEM;
  }
  for (size_t i = 0; i < t->nops; i++) {  // each op's launch, looked up once
    launch_of[i] = tp_trace_store_launch(t, t->ops[i].corr);
  }
  // The distinct streams, in order: a bit per possible stream number.
  uint64_t seen[65536 / 64] = {0};
  for (size_t i = 0; i < t->nops; i++) {
    unsigned v = (unsigned)(t->ops[i].stream + 32768);
    seen[v / 64] |= 1ULL << (v % 64);
  }
  size_t ns = 0;
  for (unsigned w = 0; w < 65536 / 64; w++) {
    for (uint64_t m = seen[w]; m; m &= m - 1) {
      streams[ns++] = (int16_t)((int)(w * 64 + (unsigned)__builtin_ctzll(m)) - 32768);
    }
  }
  b->nstreams = ns;
  int rc = fill_launches(t, launch_of, win_of, b);
  if (rc == 0) {
    rc = fill_queues(t, launch_of, streams, ns, b);
  }
  if (rc == 0) {
    rc = fill_hta_idle(t, launch_of, streams, ns, b);
  }
  free(launch_of);
  free(streams);
  return rc;
}

void tp_trace_idle_free(TpTraceBreakdown *b) {
  for (size_t k = 0; b->steps && k < b->nsteps; k++) {
    free(b->steps[k].queue);
    b->steps[k].queue = NULL;
  }
  free(b->hta_idle);
  b->hta_idle = NULL;
}
