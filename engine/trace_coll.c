// The collectives of a profiler trace (trace_coll.h): one entry per NCCL or RCCL GPU op, kept
// apart from the op array (which is sorted later), and one per record_param_comms CPU range, the
// latter only until each GPU collective has taken the metadata of the range that launched it.
// Texts (collective names, types, process groups) are interned in the trace's arena.
#include "trace_coll.h"

#include <stdlib.h>
#include <string.h>

#include "hashidx.h"
#include "trace_store.h"

// A record_param_comms range while the trace is read.
typedef struct CpuColl {
  TpTraceColl c;  // its metadata (ts, dur: the range's)
  uint64_t ext;   // UINT64_MAX: none
  uint16_t thread;
} CpuColl;

typedef struct TpTraceCollStore {
  TpTraceColl *gpu;
  uint64_t *gpu_ext;  // each GPU entry's own External id (UINT64_MAX: none), until finish
  size_t ngpu, gpu_cap, gpu_ext_cap;
  CpuColl *cpu;
  size_t ncpu, cpu_cap;
  size_t *text_at;  // interned texts: arena offset, by id - 1
  size_t *text_len;
  size_t ntext, text_cap;
  uint32_t *slots;  // id, open addressing (0: empty)
  uint64_t *slot_hash;
  size_t slots_cap;
} Store;

static Store *store_of(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  if (!pv->coll) {
    pv->coll = calloc(1, sizeof(Store));
  }
  return pv->coll;
}

static const Store *store_get(const TpTrace *t) {
  const TpTraceStore *pv = t->priv;
  return pv ? pv->coll : NULL;
}

void tp_trace_coll_free(TpTrace *t) {
  if (!t || !t->priv) {
    return;
  }
  TpTraceStore *pv = t->priv;
  Store *s = pv->coll;
  if (!s) {
    return;
  }
  free(s->gpu);
  free(s->gpu_ext);
  free(s->cpu);
  free(s->text_at);
  free(s->text_len);
  free(s->slots);
  free(s->slot_hash);
  free(s);
  pv->coll = NULL;
}

static bool grow(void **arr, size_t *cap, size_t n, size_t elem) {
  return tp_grow_array(arr, cap, n, elem, 16);
}

static char lower(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

bool tp_trace_coll_name(const char *name, size_t len) {
  if (len >= 5 && memcmp(name, "void ", 5) == 0) {
    name += 5;
    len -= 5;
  }
  if (len < 4) {
    return false;
  }
  char a = lower(name[0]);
  return (a == 'n' || a == 'r') && lower(name[1]) == 'c' && lower(name[2]) == 'c' &&
         lower(name[3]) == 'l';
}

static bool rehash(Store *s) {
  return tp_hashidx_grow(&s->slot_hash, &s->slots, &s->slots_cap, 64, NULL);
}

// The id of a text (1-based; added when new), 0 for none (NULL), UINT32_MAX when out of memory.
static uint32_t intern(TpTrace *t, Store *s, const char *p, size_t n) {
  if (!p) {
    return 0;
  }
  if ((s->ntext + 1) * 2 > s->slots_cap && !rehash(s)) {
    return UINT32_MAX;
  }
  uint64_t h = tp_hash_bytes(p, n);
  size_t j = h & (s->slots_cap - 1);
  while (s->slots[j]) {
    uint32_t id = s->slots[j];
    if (s->slot_hash[j] == h && s->text_len[id - 1] == n &&
        memcmp(t->arena + s->text_at[id - 1], p, n) == 0) {
      return id;
    }
    j = (j + 1) & (s->slots_cap - 1);
  }
  if (s->ntext >= UINT32_MAX - 2 ||
      !grow((void **)&s->text_at, &s->text_cap, s->ntext, sizeof(size_t))) {
    return UINT32_MAX;
  }
  size_t cap = s->text_cap;
  size_t *lens = realloc(s->text_len, cap * sizeof(size_t));
  if (!lens) {
    return UINT32_MAX;
  }
  s->text_len = lens;
  size_t at = tp_trace_store_put(t, p, n);
  if (at == SIZE_MAX) {
    return UINT32_MAX;
  }
  s->text_at[s->ntext] = at;
  s->text_len[s->ntext] = n;
  uint32_t id = (uint32_t)++s->ntext;
  s->slots[j] = id;
  s->slot_hash[j] = h;
  return id;
}

const char *tp_trace_coll_string(const TpTrace *t, uint32_t id, size_t *len) {
  const Store *s = store_get(t);
  if (!s || id == 0 || id > s->ntext) {
    if (len) {
      *len = 0;
    }
    return "";
  }
  if (len) {
    *len = s->text_len[id - 1];
  }
  return t->arena + s->text_at[id - 1];
}

int tp_trace_coll_add(TpTrace *t, const TpTraceCollIn *in) {
  Store *s = store_of(t);
  if (!s) {
    return TP_ENOMEM;
  }
  TpTraceColl c = {
      .ts = in->ts,
      .dur = in->dur,
      .in_nelems = in->in_nelems,
      .out_nelems = in->out_nelems,
      .group = in->group > 0 ? in->group : 0,
      .seq = in->seq,
      .rank = in->rank,
      .name = in->cpu ? UINT32_MAX : in->name,
      .step = TP_TRACE_NO_STEP,
      .corr = in->corr < UINT32_MAX ? (uint32_t)in->corr : UINT32_MAX,
      .stream = (int16_t)(in->stream > INT16_MAX   ? INT16_MAX
                          : in->stream < INT16_MIN ? INT16_MIN
                                                   : in->stream),
      .dtype_size = (uint8_t)(in->dtype_size > 0 && in->dtype_size < 256 ? in->dtype_size : 0),
      .source = in->own_args ? TP_TRACE_COLL_KERNEL : TP_TRACE_COLL_NONE,
  };
  uint32_t ids[4] = {
      intern(t, s, in->coll, in->coll_len),
      intern(t, s, in->dtype, in->dtype_len),
      intern(t, s, in->pg, in->pg_len),
      intern(t, s, in->ranks, in->ranks_len),
  };
  for (int i = 0; i < 4; i++) {
    if (ids[i] == UINT32_MAX) {
      return TP_ENOMEM;
    }
  }
  c.coll = ids[0];
  c.dtype = ids[1];
  c.pg = ids[2];
  c.ranks = ids[3];
  if (in->cpu) {
    if (!grow((void **)&s->cpu, &s->cpu_cap, s->ncpu, sizeof(CpuColl))) {
      return TP_ENOMEM;
    }
    c.source = TP_TRACE_COLL_CPU;
    s->cpu[s->ncpu++] =
        (CpuColl){.c = c, .ext = in->has_ext ? in->ext : UINT64_MAX, .thread = in->thread};
    return 0;
  }
  if (!grow((void **)&s->gpu, &s->gpu_cap, s->ngpu, sizeof(TpTraceColl)) ||
      !grow((void **)&s->gpu_ext, &s->gpu_ext_cap, s->ngpu, sizeof(uint64_t))) {
    return TP_ENOMEM;
  }
  s->gpu_ext[s->ngpu] = in->has_ext ? in->ext : UINT64_MAX;
  s->gpu[s->ngpu++] = c;
  return 0;
}

static int cmp_ext(const void *a, const void *b) {
  const CpuColl *x = a, *y = b;
  return (x->ext > y->ext) - (x->ext < y->ext);
}

static int cmp_thread_ts(const void *a, const void *b) {
  const CpuColl *x = *(CpuColl *const *)a, *y = *(CpuColl *const *)b;
  if (x->thread != y->thread) {
    return (x->thread > y->thread) - (x->thread < y->thread);
  }
  return (x->c.ts > y->c.ts) - (x->c.ts < y->c.ts);
}

// The record_param_comms range with External id `ext`, or NULL (cpu sorted by ext).
static const CpuColl *by_ext(const Store *s, uint64_t ext) {
  if (ext == UINT64_MAX) {
    return NULL;
  }
  size_t lo = 0, hi = s->ncpu;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->cpu[mid].ext < ext) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < s->ncpu && s->cpu[lo].ext == ext ? &s->cpu[lo] : NULL;
}

// The latest-starting record_param_comms range on `thread` that holds time `ts`, or NULL
// (order: the ranges sorted by thread and start).
static const CpuColl *around(CpuColl *const *order, size_t n, uint16_t thread, int64_t ts) {
  size_t lo = 0, hi = n;  // first range after (thread, ts)
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const CpuColl *c = order[mid];
    if (c->thread < thread || (c->thread == thread && c->c.ts <= ts)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (size_t i = lo; i > 0; i--) {
    const CpuColl *c = order[i - 1];
    if (c->thread != thread) {
      break;
    }
    if (ts <= c->c.ts + c->c.dur) {
      return c;
    }
  }
  return NULL;
}

// The step whose CPU interval holds time `ts`, or TP_TRACE_NO_STEP (steps sorted by ts).
static uint32_t step_at(const TpTrace *t, int64_t ts) {
  size_t lo = 0, hi = t->nsteps;
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
  const TpTraceStep *st = &t->steps[lo - 1];
  return ts < st->ts + st->dur ? (uint32_t)(lo - 1) : TP_TRACE_NO_STEP;
}

// Fills what a GPU collective's own args lack from its record_param_comms range.
static void take(TpTraceColl *g, const TpTraceColl *c) {
  bool any = false;
#define TAKE(field, none)                                                                          \
  if (g->field == (none)) {                                                                        \
    any = any || c->field != (none);                                                               \
    g->field = c->field;                                                                           \
  }
  TAKE(in_nelems, -1)
  TAKE(out_nelems, -1)
  TAKE(group, 0)
  TAKE(seq, -1)
  TAKE(rank, -1)
  TAKE(coll, 0)
  TAKE(dtype, 0)
  TAKE(pg, 0)
  TAKE(ranks, 0)
  TAKE(dtype_size, 0)
#undef TAKE
  if (g->source == TP_TRACE_COLL_NONE && (any || c->coll)) {
    g->source = TP_TRACE_COLL_CPU;
  }
}

int tp_trace_coll_finish(TpTrace *t) {
  Store *s = t->priv ? ((TpTraceStore *)t->priv)->coll : NULL;
  if (!s) {
    return 0;
  }
  CpuColl **order = NULL;
  if (s->ncpu > 0) {
    qsort(s->cpu, s->ncpu, sizeof(CpuColl), cmp_ext);
    order = malloc(s->ncpu * sizeof(*order));
    if (!order) {
      return TP_ENOMEM;
    }
    for (size_t i = 0; i < s->ncpu; i++) {
      order[i] = &s->cpu[i];
    }
    qsort(order, s->ncpu, sizeof(*order), cmp_thread_ts);
  }
  for (size_t i = 0; i < s->ngpu; i++) {
    TpTraceColl *g = &s->gpu[i];
    const TpTraceLaunch *l = tp_trace_store_launch(t, g->corr);
    if (t->stepless) {
      g->step = 0;
    } else if (l) {
      g->step = step_at(t, l->ts);
    }
    if (s->ncpu == 0) {
      continue;
    }
    const CpuColl *c = l && l->ext != TP_TRACE_NO_EXT ? by_ext(s, l->ext) : NULL;
    if (!c) {
      c = by_ext(s, s->gpu_ext[i]);
    }
    if (!c && l && l->thread != TP_TRACE_NO_THREAD) {
      c = around(order, s->ncpu, l->thread, l->ts);
    }
    if (c) {
      take(g, &c->c);
    }
  }
  free(order);
  // The CPU ranges have given what they had.
  free(s->cpu);
  s->cpu = NULL;
  s->ncpu = s->cpu_cap = 0;
  free(s->gpu_ext);
  s->gpu_ext = NULL;
  return 0;
}

const TpTraceColl *tp_trace_coll_list(const TpTrace *t, size_t *n) {
  const Store *s = store_get(t);
  *n = s ? s->ngpu : 0;
  return s ? s->gpu : NULL;
}
