// The trace store (compact arrays, interned names) and the per-step breakdowns: step windows on
// the GPU, the union of busy time, compute and non-compute time as Holistic Trace Analysis
// defines them (hta/analyzers/breakdown_analysis.py, get_temporal_breakdown), per-class times,
// communication hidden behind compute, host-wait gaps. docs/trace.md defines each figure.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_priv.h"

const char *const tp_trace_kind_names[TP_TRACE_KINDS] = {"kernel", "memcpy", "memset"};

enum { CAT_SLOTS = 512 };

typedef struct Cat {
  size_t at, len;
  uint64_t count;
  uint64_t hash;
  bool used;
} Cat;

typedef struct Priv {
  uint32_t *slots;  // name id + 1, open addressing (0: empty)
  uint64_t *slot_hash;
  size_t slots_cap;
  TpTraceLaunch *launches;
  size_t nlaunch, launch_cap;
  int64_t *longs;  // durations that do not fit 32 bits
  size_t nlong, long_cap;
  TpTraceSpan *loaders;
  size_t nloader, loader_cap;
  Cat cats[CAT_SLOTS];
  uint64_t other_cats;
  bool ops_sorted;
} Priv;

static uint64_t hash_bytes(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ULL;
  }
  return h ^ (n * 0x9E3779B97F4A7C15ULL);
}

// Grows an array to hold one more element; returns false when out of memory.
static bool grow(void **arr, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) {
    return true;
  }
  size_t nc = *cap ? *cap * 2 : 256;
  if (nc > SIZE_MAX / elem) {
    return false;
  }
  void *p = realloc(*arr, nc * elem);
  if (!p) {
    return false;
  }
  *arr = p;
  *cap = nc;
  return true;
}

// Copies bytes into the arena; returns their offset, or SIZE_MAX when out of memory.
static size_t arena_put(TpTrace *t, const char *p, size_t n) {
  if (t->arena_len + n + 1 > t->arena_cap) {
    size_t nc = t->arena_cap ? t->arena_cap : 4096;
    while (nc < t->arena_len + n + 1) {
      if (nc > SIZE_MAX / 2) {
        return SIZE_MAX;
      }
      nc *= 2;
    }
    char *a = realloc(t->arena, nc);
    if (!a) {
      return SIZE_MAX;
    }
    t->arena = a;
    t->arena_cap = nc;
  }
  size_t at = t->arena_len;
  memcpy(t->arena + at, p, n);
  t->arena[at + n] = '\0';
  t->arena_len += n + 1;
  return at;
}

TpTrace *tp_trace_new(const char *path) {
  TpTrace *t = calloc(1, sizeof(*t));
  Priv *pv = calloc(1, sizeof(*pv));
  if (!t || !pv || !(t->path = strdup(path))) {
    free(t);
    free(pv);
    return NULL;
  }
  t->priv = pv;
  t->gpu_step_last = INT64_MIN;
  return t;
}

void tp_trace_free(TpTrace *t) {
  if (!t) {
    return;
  }
  Priv *pv = t->priv;
  if (pv) {
    free(pv->slots);
    free(pv->slot_hash);
    free(pv->launches);
    free(pv->longs);
    free(pv->loaders);
    free(pv);
  }
  free(t->path);
  free(t->arena);
  free(t->ops);
  free(t->names);
  free(t->steps);
  free(t->meta);
  free(t);
}

void tp_trace_warn(TpTrace *t, const char *fmt, ...) {
  if (t->warnings++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->warning, sizeof(t->warning), fmt, ap);
    va_end(ap);
  }
}

static bool rehash(Priv *pv, const TpTrace *t) {
  size_t nc = pv->slots_cap ? pv->slots_cap * 2 : 1024;
  uint32_t *slots = calloc(nc, sizeof(*slots));
  uint64_t *hashes = calloc(nc, sizeof(*hashes));
  if (!slots || !hashes) {
    free(slots);
    free(hashes);
    return false;
  }
  for (size_t i = 0; i < pv->slots_cap; i++) {
    if (pv->slots[i]) {
      size_t j = pv->slot_hash[i] & (nc - 1);
      while (slots[j]) {
        j = (j + 1) & (nc - 1);
      }
      slots[j] = pv->slots[i];
      hashes[j] = pv->slot_hash[i];
    }
  }
  (void)t;
  free(pv->slots);
  free(pv->slot_hash);
  pv->slots = slots;
  pv->slot_hash = hashes;
  pv->slots_cap = nc;
  return true;
}

// The id of a name, added when new; UINT32_MAX when out of memory.
static uint32_t intern(TpTrace *t, const char *name, size_t len, TpTraceKind kind) {
  Priv *pv = t->priv;
  if ((t->nnames + 1) * 2 > pv->slots_cap && !rehash(pv, t)) {
    return UINT32_MAX;
  }
  uint64_t h = hash_bytes(name, len);
  size_t j = h & (pv->slots_cap - 1);
  while (pv->slots[j]) {
    if (pv->slot_hash[j] == h) {
      const TpTraceName *nm = &t->names[pv->slots[j] - 1];
      if (nm->len == len && memcmp(t->arena + nm->at, name, len) == 0) {
        return pv->slots[j] - 1;
      }
    }
    j = (j + 1) & (pv->slots_cap - 1);
  }
  if (t->nnames >= UINT32_MAX - 1 ||
      !grow((void **)&t->names, &t->names_cap, t->nnames, sizeof(TpTraceName))) {
    return UINT32_MAX;
  }
  size_t at = arena_put(t, name, len);
  if (at == SIZE_MAX) {
    return UINT32_MAX;
  }
  TpTraceName *nm = &t->names[t->nnames];
  memset(nm, 0, sizeof(*nm));
  nm->at = at;
  nm->len = len;
  nm->coll_at = SIZE_MAX;
  nm->kind = (uint8_t)kind;
  pv->slots[j] = (uint32_t)(t->nnames + 1);
  pv->slot_hash[j] = h;
  return (uint32_t)t->nnames++;
}

int tp_trace_add_op(TpTrace *t, const TpTraceOpIn *in) {
  Priv *pv = t->priv;
  uint32_t id = intern(t, in->name, in->name_len, in->kind);
  if (id == UINT32_MAX || !grow((void **)&t->ops, &t->ops_cap, t->nops, sizeof(TpTraceOp))) {
    return TP_ENOMEM;
  }
  TpTraceOp *op = &t->ops[t->nops];
  op->ts = in->ts;
  op->pad = 0;
  if (in->dur >= (int64_t)UINT32_MAX) {
    if (!grow((void **)&pv->longs, &pv->long_cap, pv->nlong, sizeof(int64_t))) {
      return TP_ENOMEM;
    }
    pv->longs[pv->nlong] = in->dur;
    op->dur = (uint32_t)pv->nlong++;
    op->pad = 1;
  } else {
    op->dur = (uint32_t)in->dur;
  }
  op->name = id;
  op->corr = in->corr < UINT32_MAX ? (uint32_t)in->corr : UINT32_MAX;
  op->step = TP_TRACE_NO_STEP;
  op->stream = (int16_t)(in->stream > INT16_MAX   ? INT16_MAX
                         : in->stream < INT16_MIN ? INT16_MIN
                                                  : in->stream);
  op->kind = (uint8_t)in->kind;
  t->nops++;
  TpTraceName *nm = &t->names[id];
  nm->count++;
  nm->total += in->dur;
  nm->bytes += in->bytes;
  if (in->coll && nm->coll_at == SIZE_MAX) {
    size_t at = arena_put(t, in->coll, in->coll_len);
    if (at == SIZE_MAX) {
      return TP_ENOMEM;
    }
    nm = &t->names[id];
    nm->coll_at = at;
    nm->coll_len = in->coll_len;
  }
  if (in->group > 0 && nm->group == 0) {
    nm->group = in->group;
  }
  pv->ops_sorted = false;
  return 0;
}

int64_t tp_trace_op_dur(const TpTrace *t, size_t i) {
  const TpTraceOp *op = &t->ops[i];
  if (op->pad) {
    return ((const Priv *)t->priv)->longs[op->dur];
  }
  return op->dur;
}

int tp_trace_add_launch(TpTrace *t, uint64_t corr, int64_t ts, int64_t dur) {
  Priv *pv = t->priv;
  if (corr >= UINT32_MAX) {
    return 0;  // no op can name it (ops keep 32-bit correlations)
  }
  if (!grow((void **)&pv->launches, &pv->launch_cap, pv->nlaunch, sizeof(TpTraceLaunch))) {
    return TP_ENOMEM;
  }
  TpTraceLaunch *l = &pv->launches[pv->nlaunch++];
  l->corr = (uint32_t)corr;
  l->ts = ts;
  l->dur = dur < 0 ? 0 : dur > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)dur;
  t->launches++;
  return 0;
}

int tp_trace_add_step(TpTrace *t, int64_t number, int64_t ts, int64_t dur) {
  if (!grow((void **)&t->steps, &t->steps_cap, t->nsteps, sizeof(TpTraceStep))) {
    return TP_ENOMEM;
  }
  TpTraceStep *s = &t->steps[t->nsteps++];
  memset(s, 0, sizeof(*s));
  s->number = number;
  s->ts = ts;
  s->dur = dur;
  return 0;
}

int tp_trace_add_loader(TpTrace *t, int64_t ts, int64_t dur) {
  Priv *pv = t->priv;
  if (!grow((void **)&pv->loaders, &pv->loader_cap, pv->nloader, sizeof(TpTraceSpan))) {
    return TP_ENOMEM;
  }
  pv->loaders[pv->nloader++] = (TpTraceSpan){ts, dur};
  return 0;
}

int tp_trace_count_cat(TpTrace *t, const char *cat, size_t len) {
  Priv *pv = t->priv;
  uint64_t h = hash_bytes(cat, len);
  size_t j = h & (CAT_SLOTS - 1);
  for (size_t probe = 0; probe < CAT_SLOTS / 2; probe++) {
    Cat *c = &pv->cats[j];
    if (!c->used) {
      size_t at = arena_put(t, cat, len);
      if (at == SIZE_MAX) {
        return TP_ENOMEM;
      }
      *c = (Cat){.at = at, .len = len, .count = 1, .hash = h, .used = true};
      return 0;
    }
    if (c->hash == h && c->len == len && memcmp(t->arena + c->at, cat, len) == 0) {
      c->count++;
      return 0;
    }
    j = (j + 1) & (CAT_SLOTS - 1);
  }
  pv->other_cats++;  // hostile input with hundreds of categories: counted together
  return 0;
}

void tp_trace_categories(const TpTrace *t,
                         void (*fn)(const char *cat, size_t len, uint64_t count, void *ud),
                         void *ud) {
  const Priv *pv = t->priv;
  for (size_t j = 0; j < CAT_SLOTS; j++) {
    if (pv->cats[j].used) {
      fn(t->arena + pv->cats[j].at, pv->cats[j].len, pv->cats[j].count, ud);
    }
  }
  if (pv->other_cats) {
    fn("(other)", 7, pv->other_cats, ud);
  }
}

int tp_trace_add_meta(TpTrace *t, const char *key, size_t key_len, const char *text, size_t len) {
  if (!grow((void **)&t->meta, &t->meta_cap, t->nmeta, sizeof(TpTraceMeta))) {
    return TP_ENOMEM;
  }
  size_t ka = arena_put(t, key, key_len);
  size_t va = ka == SIZE_MAX ? SIZE_MAX : arena_put(t, text, len);
  if (va == SIZE_MAX) {
    return TP_ENOMEM;
  }
  t->meta[t->nmeta++] = (TpTraceMeta){ka, key_len, va, len};
  return 0;
}

static int cmp_launch(const void *a, const void *b) {
  const TpTraceLaunch *x = a, *y = b;
  return (x->corr > y->corr) - (x->corr < y->corr);
}

static int cmp_step(const void *a, const void *b) {
  const TpTraceStep *x = a, *y = b;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

static int cmp_op(const void *a, const void *b) {
  const TpTraceOp *x = a, *y = b;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

// The launch with correlation `corr`, or NULL.
static const TpTraceLaunch *find_launch(const Priv *pv, uint32_t corr) {
  if (corr == UINT32_MAX) {
    return NULL;
  }
  size_t lo = 0, hi = pv->nlaunch;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (pv->launches[mid].corr < corr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < pv->nlaunch && pv->launches[lo].corr == corr ? &pv->launches[lo] : NULL;
}

// The step whose CPU interval holds time `ts`, or TP_TRACE_NO_STEP.
static uint32_t step_at(const TpTrace *t, int64_t ts) {
  size_t lo = 0, hi = t->nsteps;  // first step starting after ts
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->steps[mid].ts <= ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) {
    return TP_TRACE_NO_STEP;
  }
  const TpTraceStep *s = &t->steps[lo - 1];
  return ts < s->ts + s->dur ? (uint32_t)(lo - 1) : TP_TRACE_NO_STEP;
}

int tp_trace_finish(TpTrace *t) {
  Priv *pv = t->priv;
  bool sorted = true;
  for (size_t i = 1; i < pv->nlaunch && sorted; i++) {
    sorted = pv->launches[i - 1].corr <= pv->launches[i].corr;
  }
  if (!sorted) {
    qsort(pv->launches, pv->nlaunch, sizeof(TpTraceLaunch), cmp_launch);
  }
  qsort(t->steps, t->nsteps, sizeof(TpTraceStep), cmp_step);
  if (t->nsteps == 0 && t->nops > 0) {
    // No ProfilerStep: one step that holds every op.
    if (tp_trace_add_step(t, 0, INT64_MIN / 4, INT64_MAX / 2) != 0) {
      return TP_ENOMEM;
    }
    t->stepless = true;
  }
  t->unassigned = 0;
  for (size_t i = 0; i < t->nops; i++) {
    TpTraceOp *op = &t->ops[i];
    if (t->stepless) {
      op->step = 0;
    } else {
      const TpTraceLaunch *l = find_launch(pv, op->corr);
      op->step = l ? step_at(t, l->ts) : TP_TRACE_NO_STEP;
    }
    if (op->step == TP_TRACE_NO_STEP) {
      t->unassigned++;
    } else {
      t->steps[op->step].ops++;
    }
  }
  for (size_t i = 0; i < pv->nloader; i++) {
    uint32_t s = step_at(t, pv->loaders[i].ts);
    if (s != TP_TRACE_NO_STEP) {
      t->steps[s].dataloader += pv->loaders[i].dur;
    }
  }
  return 0;
}

// --- breakdown -------------------------------------------------------------------------------

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
  const Priv *pv = t->priv;
  int64_t ts = t->ops[i].ts;
  for (size_t j = i; j < t->nops && t->ops[j].ts == ts; j++) {
    const TpTraceLaunch *l = find_launch(pv, t->ops[j].corr);
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

// Sweeps one window [w->start, w->end): fills st from the ops overlapping it.
static int sweep_window(const TpTrace *t, const Window *w, const uint8_t *class_of,
                        const uint64_t kind_mask[3], int64_t max_dur, Edge **edges,
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
  qsort(*edges, n, sizeof(Edge), cmp_edge);
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
    }
    if (!was_idle && nactive == 0) {
      gap_start = now;
    }
    prev = now;
  }
  if (nactive == 0 && w->end > gap_start && n > 0) {
    size_t first = first_op_at_or_after(t, w->end);
    if (first < t->nops && launched_after(t, first, gap_start)) {
      st->host_wait += w->end - gap_start;
    }
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

// HTA's whole-trace view (trace.h, TpTraceWhole).
static void whole_view(const TpTrace *t, const uint64_t kind_mask[3], const uint8_t *class_of,
                       TpTraceWhole *w) {
  const Priv *pv = t->priv;
  bool filter = !t->stepless && t->nsteps >= 2;
  int64_t limit = INT64_MAX;
  if (filter) {
    limit = t->steps[t->nsteps - 1].ts;
    if (t->gpu_step_last > limit) {
      limit = t->gpu_step_last;
    }
  }
  Merge all = {0}, comp = {0}, rall = {0}, rcomp = {0};
  for (size_t i = 0; i < t->nops; i++) {  // ops are sorted by start
    const TpTraceOp *op = &t->ops[i];
    const TpTraceLaunch *l = find_launch(pv, op->corr);
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
  memset(out, 0, sizeof(*out));
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
  Priv *pv = t->priv;
  if (!pv->ops_sorted) {
    qsort(t->ops, t->nops, sizeof(TpTraceOp), cmp_op);
    pv->ops_sorted = true;
  }
  out->nclasses = nclasses;
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
    out->name_sum[op->name] += d;
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
    rc = sweep_window(t, &win[k], class_of, kind_mask, max_dur, &edges, &edges_cap, st);
  }
  free(edges);
  if (rc == 0) {
    for (size_t i = 0; i < t->nops; i++) {  // the step's own ops, per class
      const TpTraceOp *op = &t->ops[i];
      if (op->step == TP_TRACE_NO_STEP || win_of[op->step] == 0) {
        continue;
      }
      TpTraceClassTime *c = &out->steps[win_of[op->step] - 1].cls[class_of[op->name]];
      c->count++;
      c->sum += tp_trace_op_dur(t, i);
    }
    whole_view(t, kind_mask, class_of, &out->whole);
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
