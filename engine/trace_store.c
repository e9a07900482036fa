// The trace store: compact arrays filled while a trace is read, names interned in an
// open-addressing table (FNV-1a hashes), and, once read, the step each GPU op belongs to (its
// launch's step).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashidx.h"
#include "trace_store.h"

// Grows an array to hold one more element; returns false when out of memory.
static bool grow(void **arr, size_t *cap, size_t n, size_t elem) {
  return tp_grow_array(arr, cap, n, elem, 256);
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
  if (n > 0) {  // p may be NULL then (an empty buffer's data)
    memcpy(t->arena + at, p, n);
  }
  t->arena[at + n] = '\0';
  t->arena_len += n + 1;
  return at;
}

size_t tp_trace_store_put(TpTrace *t, const char *p, size_t n) {
  return arena_put(t, p, n);
}

TpTrace *tp_trace_new(const char *path) {
  TpTrace *t = calloc(1, sizeof(*t));
  TpTraceStore *pv = calloc(1, sizeof(*pv));
  if (!t || !pv || !(t->path = strdup(path))) {
    free(t);
    free(pv);
    return NULL;
  }
  t->priv = pv;
  t->gpu_step_last = INT64_MIN;
  return t;
}

void tp_trace_store_free(TpTrace *t) {
  if (!t) {
    return;
  }
  TpTraceStore *pv = t->priv;
  if (pv) {
    free(pv->slots);
    free(pv->slot_hash);
    free(pv->launches);
    free(pv->longs);
    free(pv->loaders);
    free(pv->syncs);
    free(pv->sync_end);
    free(pv->loader_end);
    free(pv);
  }
  free(t->path);
  free(t->arena);
  free(t->ops);
  free(t->names);
  free(t->steps);
  free(t->meta);
  free(t->keys);
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

static bool rehash(TpTraceStore *pv) {
  return tp_hashidx_grow(&pv->slot_hash, &pv->slots, &pv->slots_cap, 1024, NULL);
}

// The id of a name, added when new; UINT32_MAX when out of memory.
static uint32_t intern(TpTrace *t, const char *name, size_t len, TpTraceKind kind) {
  TpTraceStore *pv = t->priv;
  if ((t->nnames + 1) * 2 > pv->slots_cap && !rehash(pv)) {
    return UINT32_MAX;
  }
  uint64_t h = tp_hash_bytes(name, len);
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
  TpTraceStore *pv = t->priv;
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
  // Until tp_trace_cpu_finish links it: the op's own External id.
  op->cpu = in->has_ext && in->ext < TP_TRACE_NO_EXT ? (uint32_t)in->ext : TP_TRACE_NO_CPU;
  op->stream = (int16_t)(in->stream > INT16_MAX   ? INT16_MAX
                         : in->stream < INT16_MIN ? INT16_MIN
                                                  : in->stream);
  op->kind = (uint8_t)in->kind;
  t->nops++;
  TpTraceName *nm = &t->names[id];
  nm->count++;
  nm->total = tp_trace_add_capped(nm->total, in->dur);
  nm->bytes = tp_trace_add_capped(nm->bytes, in->bytes);
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

int64_t tp_trace_store_op_dur(const TpTrace *t, size_t i) {
  const TpTraceOp *op = &t->ops[i];
  if (op->pad) {
    return ((const TpTraceStore *)t->priv)->longs[op->dur];
  }
  return op->dur;
}

int tp_trace_add_launch(TpTrace *t, uint64_t corr, int64_t ts, int64_t dur, uint64_t ext,
                        uint16_t thread) {
  return tp_trace_add_launch_call(t, corr, ts, dur, ext, thread, TP_TRACE_CALL_OTHER);
}

int tp_trace_add_launch_call(TpTrace *t, uint64_t corr, int64_t ts, int64_t dur, uint64_t ext,
                             uint16_t thread, TpTraceCall call) {
  TpTraceStore *pv = t->priv;
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
  l->ext = ext < TP_TRACE_NO_EXT ? (uint32_t)ext : TP_TRACE_NO_EXT;
  l->thread = thread;
  l->call = (uint8_t)call;
  t->launches++;
  if (call == TP_TRACE_CALL_GRAPH) {
    t->graph_launches++;
  }
  return 0;
}

int tp_trace_add_sync(TpTrace *t, TpTraceSyncKind kind, int64_t ts, int64_t dur, uint64_t corr,
                      int64_t stream) {
  TpTraceStore *pv = t->priv;
  if (!grow((void **)&pv->syncs, &pv->sync_cap, pv->nsync, sizeof(TpTraceSync))) {
    return TP_ENOMEM;
  }
  pv->syncs[pv->nsync++] = (TpTraceSync){
      .ts = ts,
      .dur = dur < 0 ? 0 : dur,
      .corr = corr < UINT32_MAX ? (uint32_t)corr : UINT32_MAX,
      .stream = (int16_t)(stream > INT16_MAX ? INT16_MAX
                          : stream < -1      ? -1
                                             : stream),
      .kind = (uint8_t)kind,
  };
  t->syncs[kind]++;
  return 0;
}

// Whether name[0, len) is one of the NULL-terminated names.
static bool name_in(const char *name, size_t len, const char *const *names) {
  for (; *names; names++) {
    if (strlen(*names) == len && memcmp(name, *names, len) == 0) {
      return true;
    }
  }
  return false;
}

TpTraceCall tp_trace_call_of(const char *name, size_t len) {
  // The CUDA runtime and driver APIs and HIP's (the names Kineto and rocprofv3 write).
  static const char *const sync[] = {
      "cudaDeviceSynchronize", "cudaStreamSynchronize",
      "cudaEventSynchronize",  "cuCtxSynchronize",
      "cuStreamSynchronize",   "cuEventSynchronize",
      "hipDeviceSynchronize",  "hipStreamSynchronize",
      "hipEventSynchronize",   NULL,
  };
  static const char *const copy[] = {
      "cudaMemcpy",          "cudaMemcpy2D",  "cuMemcpyDtoH",
      "cuMemcpyDtoH_v2",     "hipMemcpy",     "hipMemcpy2D",
      "hipMemcpyWithStream", "hipMemcpyDtoH", NULL,
  };
  static const char *const copy_async[] = {"cudaMemcpyAsync",    "hipMemcpyAsync",
                                           "cuMemcpyDtoHAsync",  "cuMemcpyDtoHAsync_v2",
                                           "hipMemcpyDtoHAsync", NULL};
  static const char *const graph[] = {"cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch", NULL};
  if (len < 8 || len > 32) {
    return TP_TRACE_CALL_OTHER;
  }
  // Every launch call goes through here: a look at the name's tail first.
  if (len >= 11 && memcmp(name + len - 11, "Synchronize", 11) == 0) {
    return name_in(name, len, sync) ? TP_TRACE_CALL_SYNC : TP_TRACE_CALL_OTHER;
  }
  if (len >= 11 && memcmp(name + len - 11, "GraphLaunch", 11) == 0) {
    return name_in(name, len, graph) ? TP_TRACE_CALL_GRAPH : TP_TRACE_CALL_OTHER;
  }
  if (!memmem(name, len, "Memcpy", 6)) {
    return TP_TRACE_CALL_OTHER;
  }
  if (name_in(name, len, copy)) {
    return TP_TRACE_CALL_COPY;
  }
  return name_in(name, len, copy_async) ? TP_TRACE_CALL_COPY_ASYNC : TP_TRACE_CALL_OTHER;
}

static bool name_starts(const char *name, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && memcmp(name, prefix, n) == 0;
}

TpTraceRange tp_trace_range_of(const char *name, size_t len, int64_t *number) {
  static const char step[] = "ProfilerStep#";
  const size_t at = sizeof(step) - 1;
  if (name_starts(name, len, step)) {
    if (len == at || len > at + 18) {
      return TP_TRACE_RANGE_BAD_STEP;
    }
    int64_t n = 0;
    for (size_t i = at; i < len; i++) {
      if (name[i] < '0' || name[i] > '9') {
        return TP_TRACE_RANGE_BAD_STEP;
      }
      n = n * 10 + (name[i] - '0');
    }
    *number = n;
    return TP_TRACE_RANGE_STEP;
  }
  return name_starts(name, len, "enumerate(DataLoader)") ? TP_TRACE_RANGE_LOADER
                                                         : TP_TRACE_RANGE_OTHER;
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
  TpTraceStore *pv = t->priv;
  if (!grow((void **)&pv->loaders, &pv->loader_cap, pv->nloader, sizeof(TpTraceSpan))) {
    return TP_ENOMEM;
  }
  pv->loaders[pv->nloader++] = (TpTraceSpan){ts, dur};
  return 0;
}

int tp_trace_count_cat(TpTrace *t, const char *cat, size_t len) {
  TpTraceStore *pv = t->priv;
  uint64_t h = tp_hash_bytes(cat, len);
  size_t j = h & (TP_TRACE_CAT_SLOTS - 1);
  for (size_t probe = 0; probe < TP_TRACE_CAT_SLOTS / 2; probe++) {
    TpTraceCat *c = &pv->cats[j];
    if (!c->used) {
      size_t at = arena_put(t, cat, len);
      if (at == SIZE_MAX) {
        return TP_ENOMEM;
      }
      *c = (TpTraceCat){.at = at, .len = len, .count = 1, .hash = h, .used = true};
      return 0;
    }
    if (c->hash == h && c->len == len && memcmp(t->arena + c->at, cat, len) == 0) {
      c->count++;
      return 0;
    }
    j = (j + 1) & (TP_TRACE_CAT_SLOTS - 1);
  }
  pv->other_cats++;  // hostile input with hundreds of categories: counted together
  return 0;
}

void tp_trace_store_categories(const TpTrace *t,
                               void (*fn)(const char *cat, size_t len, uint64_t count, void *ud),
                               void *ud) {
  const TpTraceStore *pv = t->priv;
  for (size_t j = 0; j < TP_TRACE_CAT_SLOTS; j++) {
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

// The launch with correlation `corr`, or NULL.
static const TpTraceLaunch *find_launch(const TpTraceStore *pv, uint32_t corr) {
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

static int cmp_span(const void *a, const void *b) {
  const TpTraceSpan *x = a, *y = b;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

static int cmp_sync(const void *a, const void *b) {
  const TpTraceSync *x = a, *y = b;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

// Whether a device-to-host copy (by its name, "Memcpy DtoH (Device -> Pageable)") lands in
// pageable host memory, which makes even an async copy call wait for it.
static bool is_pageable_dtoh(const char *name, size_t len) {
  bool dtoh = false, pageable = false;
  for (size_t i = 0; i + 4 <= len; i++) {
    dtoh = dtoh || memcmp(name + i, "DtoH", 4) == 0;
    pageable = pageable || (i + 8 <= len && memcmp(name + i, "Pageable", 8) == 0);
  }
  return dtoh && pageable;
}

static bool is_dtoh(const char *name, size_t len) {
  for (size_t i = 0; i + 4 <= len; i++) {
    if (memcmp(name + i, "DtoH", 4) == 0) {
      return true;
    }
  }
  return false;
}

// After the ops have their steps: the blocking copies as sync spans, the graph launches' ops,
// then the sync and dataloader spans sorted with their running latest end.
static int finish_spans(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  t->graph_ops = 0;
  for (size_t i = 0; i < t->nops; i++) {
    const TpTraceOp *op = &t->ops[i];
    if (op->kind != TP_TRACE_MEMCPY && t->graph_launches == 0) {
      continue;  // only copies can block, and only graph launches' ops are counted
    }
    const TpTraceLaunch *l = find_launch(pv, op->corr);
    if (!l || l->call == TP_TRACE_CALL_OTHER || l->call == TP_TRACE_CALL_SYNC) {
      continue;
    }
    if (l->call == TP_TRACE_CALL_GRAPH) {
      t->graph_ops++;
      continue;
    }
    const TpTraceName *nm = &t->names[op->name];
    const char *name = t->arena + nm->at;
    bool blocking =
        op->kind == TP_TRACE_MEMCPY &&
        (l->call == TP_TRACE_CALL_COPY ? is_dtoh(name, nm->len) : is_pageable_dtoh(name, nm->len));
    // The host waits from when the copy starts on the GPU (before it, the call only launches
    // it, and the GPU may still run earlier work) to when the call returns.
    int64_t from = op->ts > l->ts ? op->ts : l->ts, to = l->ts + (int64_t)l->dur;
    if (blocking && to > from &&
        tp_trace_add_sync(t, TP_TRACE_SYNC_COPY, from, to - from, l->corr, -1) != 0) {
      return TP_ENOMEM;
    }
  }
  if (pv->nsync > 1) {
    qsort(pv->syncs, pv->nsync, sizeof(TpTraceSync), cmp_sync);
  }
  if (pv->nloader > 1) {
    qsort(pv->loaders, pv->nloader, sizeof(TpTraceSpan), cmp_span);
  }
  free(pv->sync_end);
  free(pv->loader_end);
  pv->sync_end = malloc((pv->nsync + 1) * sizeof(int64_t));
  pv->loader_end = malloc((pv->nloader + 1) * sizeof(int64_t));
  if (!pv->sync_end || !pv->loader_end) {
    return TP_ENOMEM;
  }
  int64_t end = INT64_MIN;
  for (size_t i = 0; i < pv->nsync; i++) {
    const TpTraceSync *y = &pv->syncs[i];
    if (y->kind != TP_TRACE_SYNC_STREAM_WAIT && y->ts + y->dur > end) {
      end = y->ts + y->dur;  // a stream wait blocks a stream, not the host
    }
    pv->sync_end[i] = end;
  }
  end = INT64_MIN;
  for (size_t i = 0; i < pv->nloader; i++) {
    if (pv->loaders[i].ts + pv->loaders[i].dur > end) {
      end = pv->loaders[i].ts + pv->loaders[i].dur;
    }
    pv->loader_end[i] = end;
  }
  return 0;
}

bool tp_trace_store_overlaps(const TpTrace *t, bool loader, int64_t a, int64_t b) {
  const TpTraceStore *pv = t->priv;
  size_t n = loader ? pv->nloader : pv->nsync;
  const int64_t *ends = loader ? pv->loader_end : pv->sync_end;
  if (n == 0 || !ends) {
    return false;
  }
  size_t lo = 0, hi = n;  // the first span starting at or after b
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int64_t ts = loader ? pv->loaders[mid].ts : pv->syncs[mid].ts;
    if (ts < b) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo > 0 && ends[lo - 1] > a;  // a span starting before b ends after a
}

int tp_trace_store_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  if (n < 2) {
    return 0;
  }
  if (n > UINT32_MAX) {
    return TP_ENOMEM;
  }
  unsigned char *a = base;
  bool sorted = true;
  for (size_t i = 1; i < n && sorted; i++) {
    sorted = cmp(a + (i - 1) * size, a + i * size) <= 0;
  }
  if (sorted) {
    return 0;
  }
  // A stable merge sort of the indices, bottom up, then the permutation applied in place.
  uint32_t *idx = malloc(n * sizeof(uint32_t));
  uint32_t *tmp = malloc(n * sizeof(uint32_t));
  unsigned char *hold = malloc(size);
  if (!idx || !tmp || !hold) {
    free(idx);
    free(tmp);
    free(hold);
    return TP_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    idx[i] = (uint32_t)i;
  }
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = lo + width < n ? lo + width : n;
      size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        // ties keep the left run's first: stable
        tmp[k++] =
            cmp(a + (size_t)idx[j] * size, a + (size_t)idx[i] * size) < 0 ? idx[j++] : idx[i++];
      }
      while (i < mid) {
        tmp[k++] = idx[i++];
      }
      while (j < hi) {
        tmp[k++] = idx[j++];
      }
    }
    uint32_t *swap = idx;
    idx = tmp;
    tmp = swap;
  }
  free(tmp);
  // idx[k] is the element that goes to place k: follow each cycle once.
  for (size_t i = 0; i < n; i++) {
    if (idx[i] == i) {
      continue;
    }
    memcpy(hold, a + i * size, size);
    size_t j = i;
    while (idx[j] != i) {
      size_t from = idx[j];
      memcpy(a + j * size, a + from * size, size);
      idx[j] = (uint32_t)j;
      j = from;
    }
    memcpy(a + j * size, hold, size);
    idx[j] = (uint32_t)j;
  }
  free(idx);
  free(hold);
  return 0;
}

int tp_trace_finish(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  if (tp_trace_store_sort(pv->launches, pv->nlaunch, sizeof(TpTraceLaunch), cmp_launch) != 0) {
    return TP_ENOMEM;
  }
  if (t->nsteps > 1) {  // qsort's array must not be NULL, even when empty
    qsort(t->steps, t->nsteps, sizeof(TpTraceStep), cmp_step);
  }
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
      t->steps[s].dataloader = tp_trace_add_capped(t->steps[s].dataloader, pv->loaders[i].dur);
    }
  }
  return finish_spans(t);
}

const TpTraceLaunch *tp_trace_store_launch(const TpTrace *t, uint32_t corr) {
  return find_launch(t->priv, corr);
}
