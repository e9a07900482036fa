// The CPU side of a profiler trace (trace_cpu.h). Ranges are kept in 12 bytes each (key, parent,
// External id) in the order they arrive; their nesting is found while they stream in, from a
// stack of open ranges per thread, so no range keeps its times. GPU ops find their range by the
// External id of their launch. The per-key figures walk the GPU ops in launch order (correlation
// ids grow with launch time), keeping per thread only the chain of ranges open around the current
// op: a range's GPU ops are consecutive in that order, so its call ends when the chain leaves it.
#include "trace_cpu.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hashidx.h"
#include "trace_store.h"

enum {
  MAX_OPEN = 4096,   // ranges open at once on one thread that are kept as parents
  MAX_CHAIN = 256,   // ancestors walked above a GPU op's range
  MAX_REWINDS = 16,  // times a thread's memory events may step back in time (each a rescan)
};

#define NO_RANGE UINT32_MAX

// A range: its key, the range it runs in, its External id. Once the GPU ops are linked
// (tp_trace_cpu_finish) the External ids go: the array becomes one of KeyParent, in place.
typedef struct Range {
  uint32_t key, parent, ext;
} Range;

typedef struct KeyParent {
  uint32_t key, parent;
} KeyParent;

_Static_assert(offsetof(Range, key) == 0 && offsetof(Range, parent) == 4 &&
                   sizeof(KeyParent) == 8 && sizeof(Range) == 12,
               "a Range begins with its KeyParent");

// An nn.Module frame: kept with its times, few as they are, to find the module around a launch.
typedef struct Frame {
  int64_t ts, end;
  uint32_t key, parent;
  uint16_t thread;
} Frame;

// A range still open on its thread while the trace streams in.
typedef struct Open {
  uint32_t range;
  int64_t ts, end;
} Open;

// Where the memory events of a thread have got to in its ranges (tp_trace_cpu_at): the next
// range of the trace to look at and where its times are in the times stream, the start of the
// last one of this thread passed, and the ranges open at that point.
typedef struct Cursor {
  size_t pos, at;
  uint32_t who;   // the thread + 1 of the stream at `at` (the last range passed)
  int64_t start;  // start of the last range of the thread passed
  int64_t last;   // time of the last event looked up
  Open *open;
  size_t nopen, open_cap;
  uint32_t rewinds;
  bool used;
} Cursor;

typedef struct Thread {
  uint64_t hash;
  Open *open;
  size_t nopen, open_cap;
  int64_t last;  // start of the latest range on this thread
  bool any;
  Cursor mem;
} Thread;

struct TpTraceCpuStore {
  Range *ranges;  // while reading and linking; NULL after
  KeyParent *kp;  // after linking: each range's key and parent
  size_t nranges, ranges_cap;
  // Each range's thread and times, for the memory events' attribution (tp_trace_cpu_at), in
  // range order as unsigned LEB128 varints. A range whose thread is not the previous range's
  // starts with (thread + 1) << 1 | 1 (thread + 1 is 0 for none), then, with a thread, its start
  // code and its duration; a range on the previous range's thread has its start code << 1, then
  // its duration (none: a single 0). The start code: the time since the previous range's start
  // on its thread << 1, or the time itself zigzagged << 1 | 1. About 5 bytes a range; dropped
  // once the trace is read (tp_trace_cpu_drop_times).
  TpBuf times;
  uint32_t times_who;  // the thread + 1 (0: none) of the last range in the stream
  bool times_dropped;
  uint64_t late;     // ranges read after a memory event of their thread at or after their start
  uint32_t *by_ext;  // range indices in External id order, when the ranges are not (else NULL)
  bool ext_sorted;
  Frame *frames;
  size_t nframes, frames_cap;
  uint32_t *key_slots;  // key id + 1, open addressing (0: empty)
  uint64_t *key_hash;
  size_t key_cap;
  uint32_t *thread_slots;  // thread index + 1
  size_t thread_cap;
  Thread *threads;
  size_t nthreads, threads_cap;
};

typedef struct TpTraceCpuStore Store;

static bool grow(void **arr, size_t *cap, size_t n, size_t elem) {
  return tp_grow_array(arr, cap, n, elem, 64);
}

static Store *store_of(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  if (!pv->cpu) {
    pv->cpu = calloc(1, sizeof(Store));
    if (pv->cpu) {
      pv->cpu->ext_sorted = true;
    }
  }
  return pv->cpu;
}

static const Store *store_get(const TpTrace *t) {
  const TpTraceStore *pv = t->priv;
  return pv->cpu;
}

void tp_trace_cpu_free(TpTrace *t) {
  if (!t || !t->priv) {
    return;
  }
  TpTraceStore *pv = t->priv;
  Store *s = pv->cpu;
  if (!s) {
    return;
  }
  for (size_t i = 0; i < s->nthreads; i++) {
    free(s->threads[i].open);
    free(s->threads[i].mem.open);
  }
  free(s->threads);
  free(s->thread_slots);
  free(s->ranges);
  free(s->kp);
  tp_buf_free(&s->times);
  free(s->by_ext);
  free(s->frames);
  free(s->key_slots);
  free(s->key_hash);
  free(s);
  pv->cpu = NULL;
}

// A 64-bit hash of n bytes, eight at a time, continued from h.
static uint64_t hash_more(uint64_t h, const char *p, size_t n) {
  const uint64_t m = 0x9E3779B97F4A7C15ULL;
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = (h ^ w) * m;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  if (n > 0) {
    memcpy(&w, p, n);
  }
  h = (h ^ w ^ ((uint64_t)n << 56)) * m;
  return h ^ (h >> 29);
}

// --- threads ------------------------------------------------------------------------------------

static bool thread_rehash(Store *s) {
  size_t nc = s->thread_cap ? s->thread_cap * 2 : 64;
  uint32_t *slots = calloc(nc, sizeof(*slots));
  if (!slots) {
    return false;
  }
  for (size_t i = 0; i < s->nthreads; i++) {
    size_t j = s->threads[i].hash & (nc - 1);
    while (slots[j]) {
      j = (j + 1) & (nc - 1);
    }
    slots[j] = (uint32_t)i + 1;
  }
  free(s->thread_slots);
  s->thread_slots = slots;
  s->thread_cap = nc;
  return true;
}

uint16_t tp_trace_cpu_thread(TpTrace *t, uint64_t hash) {
  Store *s = store_of(t);
  if (!s) {
    return TP_TRACE_NO_THREAD;
  }
  if ((s->nthreads + 1) * 2 > s->thread_cap && !thread_rehash(s)) {
    return TP_TRACE_NO_THREAD;
  }
  size_t j = hash & (s->thread_cap - 1);
  while (s->thread_slots[j]) {
    uint32_t i = s->thread_slots[j] - 1;
    if (s->threads[i].hash == hash) {
      return (uint16_t)i;
    }
    j = (j + 1) & (s->thread_cap - 1);
  }
  if (s->nthreads >= TP_TRACE_NO_THREAD ||
      !grow((void **)&s->threads, &s->threads_cap, s->nthreads, sizeof(Thread))) {
    return TP_TRACE_NO_THREAD;
  }
  s->threads[s->nthreads] = (Thread){.hash = hash};
  s->thread_slots[j] = (uint32_t)++s->nthreads;
  return (uint16_t)(s->nthreads - 1);
}

// --- keys ---------------------------------------------------------------------------------------

// The phase a range of this name starts (docs/trace.md: phases).
static uint8_t phase_of(const char *name, size_t len) {
  static const struct {
    const char *prefix;
    uint8_t phase;
  } marks[] = {
      {"autograd::engine::evaluate_function", TP_TRACE_PHASE_BWD},
      {"Optimizer.step#", TP_TRACE_PHASE_OPT},
      {"Optimizer.zero_grad#", TP_TRACE_PHASE_OPT},
  };
  for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
    size_t n = strlen(marks[i].prefix);
    if (len >= n && memcmp(name, marks[i].prefix, n) == 0) {
      return marks[i].phase;
    }
  }
  return TP_TRACE_PHASE_FWD;
}

static bool key_rehash(Store *s) {
  return tp_hashidx_grow(&s->key_hash, &s->key_slots, &s->key_cap, 1024, NULL);
}

static bool key_equal(const TpTrace *t, const TpTraceOpKey *k, const TpTraceCpuIn *in,
                      uint8_t has) {
  if (k->kind != (uint8_t)in->kind || k->has != has || k->len[0] != in->name_len ||
      memcmp(t->arena + k->at, in->name, in->name_len) != 0) {
    return false;
  }
  size_t at = k->at + k->len[0] + 1;
  for (int a = 0; a < TP_TRACE_OP_ARGS; a++) {
    if (!(has >> a & 1)) {
      continue;
    }
    if (k->len[a + 1] != in->arg_len[a] ||
        (in->arg_len[a] > 0 && memcmp(t->arena + at, in->arg[a], in->arg_len[a]) != 0)) {
      return false;
    }
    at += k->len[a + 1] + 1;
  }
  return true;
}

// The key id of a range, added when new; UINT32_MAX when out of memory.
static uint32_t key_intern(TpTrace *t, Store *s, const TpTraceCpuIn *in) {
  uint8_t has = 0;
  uint64_t h = hash_more((uint64_t)in->kind + 1, in->name, in->name_len);
  for (int a = 0; a < TP_TRACE_OP_ARGS; a++) {
    if (in->arg[a]) {
      has |= (uint8_t)(1u << a);
      h = hash_more(h ^ (uint64_t)(a + 1), in->arg[a], in->arg_len[a]);
    }
  }
  if ((t->nkeys + 1) * 2 > s->key_cap && !key_rehash(s)) {
    return UINT32_MAX;
  }
  size_t j = h & (s->key_cap - 1);
  while (s->key_slots[j]) {
    if (s->key_hash[j] == h && key_equal(t, &t->keys[s->key_slots[j] - 1], in, has)) {
      return s->key_slots[j] - 1;
    }
    j = (j + 1) & (s->key_cap - 1);
  }
  if (t->nkeys >= UINT32_MAX - 2 ||
      !grow((void **)&t->keys, &t->keys_cap, t->nkeys, sizeof(TpTraceOpKey))) {
    return UINT32_MAX;
  }
  TpTraceOpKey k = {
      .kind = (uint8_t)in->kind, .has = has, .phase = phase_of(in->name, in->name_len)};
  if (in->name_len > UINT32_MAX) {
    return UINT32_MAX;
  }
  k.len[0] = (uint32_t)in->name_len;
  k.at = tp_trace_store_put(t, in->name, in->name_len);
  if (k.at == SIZE_MAX) {
    return UINT32_MAX;
  }
  for (int a = 0; a < TP_TRACE_OP_ARGS; a++) {
    if (has >> a & 1) {
      if (in->arg_len[a] > UINT32_MAX ||
          tp_trace_store_put(t, in->arg[a], in->arg_len[a]) == SIZE_MAX) {
        return UINT32_MAX;
      }
      k.len[a + 1] = (uint32_t)in->arg_len[a];
    }
  }
  t->keys[t->nkeys] = k;
  s->key_slots[j] = (uint32_t)++t->nkeys;
  s->key_hash[j] = h;
  return (uint32_t)(t->nkeys - 1);
}

// --- ranges -------------------------------------------------------------------------------------

// Appends an unsigned LEB128 varint.
static bool put_varint(TpBuf *b, uint64_t v) {
  unsigned char tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (unsigned char)(v & 0x7F);
    v >>= 7;
    tmp[n] |= v ? 0x80 : 0;
    n++;
  } while (v);
  return tp_buf_append(b, tmp, n) == 0;
}

// Reads an unsigned LEB128 varint at *at (advanced).
static uint64_t get_varint(const TpBuf *b, size_t *at) {
  uint64_t v = 0;
  for (int shift = 0; *at < b->len && shift < 64; shift += 7) {
    unsigned char c = (unsigned char)b->data[(*at)++];
    v |= (uint64_t)(c & 0x7F) << shift;
    if (!(c & 0x80)) {
      break;
    }
  }
  return v;
}

static uint64_t zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

// Nests range r (starting at ts, ending at end) under the ranges open on its thread; returns its
// parent, or NO_RANGE. false when out of memory.
static bool nest(TpTrace *t, Store *s, Thread *th, uint32_t r, int64_t ts, int64_t end,
                 uint32_t *parent) {
  *parent = NO_RANGE;
  if (th->any && ts < th->last) {
    // Out of time order on its thread: the open ranges say nothing about this one.
    if (t->unordered++ == 0) {
      tp_trace_warn(t,
                    "%s: a CPU range starts before the one before it on its thread: the ranges "
                    "around such ones are not known",
                    t->path);
    }
    th->nopen = 0;
    th->last = ts;
    return true;
  }
  th->any = true;
  th->last = ts;
  while (th->nopen > 0 && th->open[th->nopen - 1].end <= ts) {
    th->nopen--;
  }
  // Ranges that start with this one but end first lie inside it (written before their parent).
  size_t m = 0;
  while (m < th->nopen && th->open[th->nopen - 1 - m].ts == ts &&
         th->open[th->nopen - 1 - m].end < end) {
    m++;
  }
  size_t at = th->nopen - m;  // where r goes on the stack
  *parent = at > 0 ? th->open[at - 1].range : NO_RANGE;
  if (m > 0) {
    s->ranges[th->open[at].range].parent = r;
  }
  if (th->nopen >= MAX_OPEN) {
    return true;  // kept unnested below this depth
  }
  if (!grow((void **)&th->open, &th->open_cap, th->nopen, sizeof(Open))) {
    return false;
  }
  memmove(&th->open[at + 1], &th->open[at], m * sizeof(Open));
  th->open[at] = (Open){r, ts, end};
  th->nopen++;
  return true;
}

int tp_trace_cpu_add(TpTrace *t, const TpTraceCpuIn *in) {
  Store *s = store_of(t);
  if (!s) {
    return TP_ENOMEM;
  }
  uint32_t key = key_intern(t, s, in);
  if (key == UINT32_MAX) {
    return TP_ENOMEM;
  }
  t->keys[key].count++;
  t->cpu_ranges++;
  int64_t end = in->dur > 0 && in->ts <= INT64_MAX - in->dur ? in->ts + in->dur : in->ts;
  if (in->kind == TP_TRACE_CPU_MODULE) {
    if (!grow((void **)&s->frames, &s->frames_cap, s->nframes, sizeof(Frame))) {
      return TP_ENOMEM;
    }
    s->frames[s->nframes++] =
        (Frame){.ts = in->ts, .end = end, .key = key, .parent = NO_RANGE, .thread = in->thread};
    return 0;
  }
  if (s->nranges >= NO_RANGE - 1 ||
      !grow((void **)&s->ranges, &s->ranges_cap, s->nranges, sizeof(Range))) {
    return TP_ENOMEM;
  }
  uint32_t r = (uint32_t)s->nranges;
  uint32_t ext = in->has_ext && in->ext < TP_TRACE_NO_EXT ? (uint32_t)in->ext : TP_TRACE_NO_EXT;
  bool threaded = in->thread != TP_TRACE_NO_THREAD && in->thread < s->nthreads;
  Thread *th = threaded ? &s->threads[in->thread] : NULL;
  if (!s->times_dropped) {
    // Its thread, when not the previous range's, and its times (the stream's format: Store).
    uint32_t who = threaded ? (uint32_t)in->thread + 1 : 0;
    bool switched = s->nranges == 0 || who != s->times_who;
    bool ok = true;
    if (switched) {
      ok = put_varint(&s->times, (uint64_t)who << 1 | 1);
    }
    if (ok && th) {
      bool delta = th->any && in->ts >= th->last;
      uint64_t code = delta ? (uint64_t)(in->ts - th->last) << 1 : zigzag(in->ts) << 1 | 1;
      ok = (switched ? put_varint(&s->times, code) : put_varint(&s->times, code << 1)) &&
           put_varint(&s->times, (uint64_t)(end - in->ts));
    } else if (ok && !switched) {
      ok = put_varint(&s->times, 0);
    }
    if (!ok) {
      return TP_ENOMEM;
    }
    s->times_who = who;
  }
  if (th && th->mem.used && in->ts <= th->mem.last) {
    s->late++;  // a memory event already looked up may have run inside it
  }
  s->ranges[r] = (Range){key, NO_RANGE, ext};
  s->nranges++;
  if (r > 0 && ext < s->ranges[r - 1].ext) {
    s->ext_sorted = false;
  }
  if (th) {
    uint32_t parent = NO_RANGE;
    if (!nest(t, s, th, r, in->ts, end, &parent)) {
      return TP_ENOMEM;
    }
    s->ranges[r].parent = parent;
  }
  return 0;
}

// --- the ranges around a memory event -----------------------------------------------------------

// Ops that only allocate for the op that called them: their memory is that caller's.
static bool is_allocator(const TpTrace *t, uint32_t key) {
  static const char *const names[] = {
      "aten::empty",         "aten::empty_strided",     "aten::empty_like",
      "aten::new_empty",     "aten::new_empty_strided", "aten::resize_",
      "aten::empty_permuted"};
  const TpTraceOpKey *k = &t->keys[key];
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    size_t n = strlen(names[i]);
    if (k->len[0] == n && memcmp(t->arena + k->at, names[i], n) == 0) {
      return true;
    }
  }
  return false;
}

// Moves a thread's cursor over its ranges that start at or before ts, keeping those open.
static bool cursor_advance(Store *s, Cursor *c, uint16_t thread, int64_t ts) {
  while (c->pos < s->nranges) {
    size_t at = c->at;
    uint64_t head = get_varint(&s->times, &at);
    uint32_t who = c->who;
    uint64_t code = 0, dur = 0;
    if (head & 1) {
      who = (uint32_t)(head >> 1);
      if (who) {
        code = get_varint(&s->times, &at);
        dur = get_varint(&s->times, &at);
      }
    } else if (who) {
      code = head >> 1;
      dur = get_varint(&s->times, &at);
    }
    if (who != (uint32_t)thread + 1) {
      c->who = who;
      c->pos++;
      c->at = at;
      continue;
    }
    int64_t start = code & 1 ? unzigzag(code >> 1) : c->start + (int64_t)(code >> 1);
    if (start > ts) {
      break;
    }
    uint32_t r = (uint32_t)c->pos;
    c->who = who;
    c->start = start;
    c->pos++;
    c->at = at;
    int64_t end = start + (int64_t)dur;
    while (c->nopen > 0 && c->open[c->nopen - 1].end <= start) {
      c->nopen--;
    }
    // Ranges that start with this one but end first lie inside it (as nest() has it).
    size_t m = 0;
    while (m < c->nopen && c->open[c->nopen - 1 - m].ts == start &&
           c->open[c->nopen - 1 - m].end < end) {
      m++;
    }
    if (c->nopen >= MAX_OPEN) {
      continue;
    }
    if (!grow((void **)&c->open, &c->open_cap, c->nopen, sizeof(Open))) {
      return false;
    }
    size_t k = c->nopen - m;
    memmove(&c->open[k + 1], &c->open[k], m * sizeof(Open));
    c->open[k] = (Open){r, start, end};
    c->nopen++;
  }
  return true;
}

int tp_trace_cpu_at(TpTrace *t, uint16_t thread, int64_t ts, TpTraceCpuAt *out) {
  *out = (TpTraceCpuAt){.owner = UINT32_MAX, .phase = TP_TRACE_PHASE_FWD, .call_end = INT64_MIN};
  Store *s = store_of(t);
  if (!s) {
    return TP_ENOMEM;
  }
  if (thread == TP_TRACE_NO_THREAD || thread >= s->nthreads) {
    return 0;
  }
  Cursor *c = &s->threads[thread].mem;
  if (s->times_dropped) {
    return 1;
  }
  if (c->used && ts < c->last) {
    // Back in time: walk the thread's ranges again from the first, a bounded number of times.
    if (c->rewinds >= MAX_REWINDS) {
      return 1;
    }
    c->rewinds++;
    c->pos = c->at = 0;
    c->who = 0;
    c->nopen = 0;
    c->start = 0;
  }
  c->used = true;
  c->last = ts;
  if (!cursor_advance(s, c, thread, ts)) {
    return TP_ENOMEM;
  }
  while (c->nopen > 0 && c->open[c->nopen - 1].end <= ts) {
    c->nopen--;
  }
  // The phase as the op table has it; the op that asked: the innermost op that is not an
  // allocator, else the innermost op, else the innermost range; the outermost op's end.
  uint32_t op = UINT32_MAX, alloc = UINT32_MAX, any = UINT32_MAX;
  for (size_t k = 0; k < c->nopen; k++) {
    uint32_t key = s->ranges[c->open[k].range].key;
    const TpTraceOpKey *kk = &t->keys[key];
    if (kk->phase != TP_TRACE_PHASE_FWD) {
      out->phase = kk->phase;
    }
    any = key;
    if (kk->kind == TP_TRACE_CPU_OP) {
      if (out->call_end == INT64_MIN) {
        out->call_end = c->open[k].end;
      }
      if (is_allocator(t, key)) {
        alloc = key;
      } else {
        op = key;
      }
    }
  }
  out->owner = op != UINT32_MAX ? op : alloc != UINT32_MAX ? alloc : any;
  return 0;
}

void tp_trace_cpu_drop_times(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  Store *s = pv->cpu;
  if (!s) {
    return;
  }
  tp_buf_free(&s->times);
  s->times_dropped = true;
  for (size_t i = 0; i < s->nthreads; i++) {
    free(s->threads[i].mem.open);
    s->threads[i].mem.open = NULL;
    s->threads[i].mem.nopen = s->threads[i].mem.open_cap = 0;
  }
}

uint64_t tp_trace_cpu_late(const TpTrace *t) {
  const Store *s = store_get(t);
  return s ? s->late : 0;
}

// --- linking ------------------------------------------------------------------------------------

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

// Sorts n 64-bit keys in place (heap sort: no scratch, not stable, which unique keys need not).
static void heap_sort_u64(uint64_t *a, size_t n) {
  if (n < 2) {
    return;
  }
  for (size_t start = n / 2; start-- > 0;) {
    for (size_t root = start;;) {
      size_t child = 2 * root + 1;
      if (child >= n) {
        break;
      }
      if (child + 1 < n && a[child + 1] > a[child]) {
        child++;
      }
      if (a[root] >= a[child]) {
        break;
      }
      uint64_t tmp = a[root];
      a[root] = a[child];
      a[child] = tmp;
      root = child;
    }
  }
  for (size_t end = n - 1; end > 0; end--) {
    uint64_t tmp = a[0];
    a[0] = a[end];
    a[end] = tmp;
    for (size_t root = 0;;) {
      size_t child = 2 * root + 1;
      if (child >= end) {
        break;
      }
      if (child + 1 < end && a[child + 1] > a[child]) {
        child++;
      }
      if (a[root] >= a[child]) {
        break;
      }
      tmp = a[root];
      a[root] = a[child];
      a[child] = tmp;
      root = child;
    }
  }
}

// The range whose External id is ext, or NO_RANGE.
static uint32_t range_of_ext(const Store *s, uint32_t ext) {
  if (ext == TP_TRACE_NO_EXT || s->nranges == 0) {
    return NO_RANGE;
  }
  size_t lo = 0, hi = s->nranges;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint32_t r = s->by_ext ? s->by_ext[mid] : (uint32_t)mid;
    if (s->ranges[r].ext < ext) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == s->nranges) {
    return NO_RANGE;
  }
  uint32_t r = s->by_ext ? s->by_ext[lo] : (uint32_t)lo;
  return s->ranges[r].ext == ext ? r : NO_RANGE;
}

static int cmp_frame(const void *a, const void *b) {
  const Frame *x = a, *y = b;
  if (x->thread != y->thread) {
    return (x->thread > y->thread) - (x->thread < y->thread);
  }
  if (x->ts != y->ts) {
    return (x->ts > y->ts) - (x->ts < y->ts);
  }
  return (x->end < y->end) - (x->end > y->end);  // the longer one first: it holds the other
}

// Gives each frame its enclosing frame on its thread (frames sorted by thread, start, length).
static int nest_frames(Store *s) {
  if (tp_trace_store_sort(s->frames, s->nframes, sizeof(Frame), cmp_frame) != 0) {
    return TP_ENOMEM;
  }
  uint32_t *stack = NULL;
  size_t n = 0, cap = 0;
  for (size_t i = 0; i < s->nframes; i++) {
    Frame *f = &s->frames[i];
    if (i > 0 && s->frames[i - 1].thread != f->thread) {
      n = 0;
    }
    while (n > 0 && s->frames[stack[n - 1]].end <= f->ts) {
      n--;
    }
    f->parent = n > 0 ? stack[n - 1] : NO_RANGE;
    if (n < MAX_OPEN) {
      if (!grow((void **)&stack, &cap, n, sizeof(uint32_t))) {
        free(stack);
        return TP_ENOMEM;
      }
      stack[n++] = (uint32_t)i;
    }
  }
  free(stack);
  return 0;
}

int tp_trace_cpu_finish(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  Store *s = pv->cpu;
  t->linked = 0;
  if (!s) {
    for (size_t i = 0; i < t->nops; i++) {
      t->ops[i].cpu = TP_TRACE_NO_CPU;
    }
    return 0;
  }
  for (size_t i = 0; i < s->nthreads; i++) {  // the open stacks served the reading only
    free(s->threads[i].open);
    s->threads[i].open = NULL;
    s->threads[i].nopen = s->threads[i].open_cap = 0;
  }
  if (!s->ext_sorted && s->nranges > 0) {
    // Sorted as (External id, index) pairs packed in 64 bits, then only the indices kept.
    uint64_t *pairs = malloc(s->nranges * sizeof(uint64_t));
    free(s->by_ext);
    s->by_ext = malloc(s->nranges * sizeof(uint32_t));
    if (!pairs || !s->by_ext) {
      free(pairs);
      return TP_ENOMEM;
    }
    for (size_t i = 0; i < s->nranges; i++) {
      pairs[i] = (uint64_t)s->ranges[i].ext << 32 | i;
    }
    heap_sort_u64(pairs, s->nranges);  // in place: the pairs are unique, order is all
    for (size_t i = 0; i < s->nranges; i++) {
      s->by_ext[i] = (uint32_t)pairs[i];
    }
    free(pairs);
  }
  for (size_t i = 0; i < t->nops; i++) {
    TpTraceOp *op = &t->ops[i];
    const TpTraceLaunch *l = tp_trace_store_launch(t, op->corr);
    uint32_t ext = TP_TRACE_NO_EXT;
    if (l) {
      ext = l->ext != TP_TRACE_NO_EXT ? l->ext : op->cpu;  // the launch's, else the op's own
    }
    op->cpu = range_of_ext(s, ext);
    t->linked += op->cpu != TP_TRACE_NO_CPU;
  }
  // The External ids served the linking only: keys and parents stay, in the same block.
  free(s->by_ext);
  s->by_ext = NULL;
  unsigned char *block = (unsigned char *)s->ranges;
  for (size_t i = 0; i < s->nranges; i++) {
    // Entry i moves from byte 12 i to byte 8 i: nothing not yet moved is overwritten.
    KeyParent v;
    memcpy(&v, block + i * sizeof(Range), sizeof(v));  // key and parent lead a Range
    memcpy(block + i * sizeof(KeyParent), &v, sizeof(v));
  }
  KeyParent *kp = (KeyParent *)(void *)block;
  s->ranges = NULL;
  s->kp = s->nranges > 0 ? realloc(kp, s->nranges * sizeof(KeyParent)) : kp;
  if (!s->kp) {
    s->kp = kp;  // a block that did not shrink is still the same data
  }
  s->ranges_cap = s->nranges;
  return nest_frames(s);
}

// --- per-key figures ----------------------------------------------------------------------------

typedef struct Entry {
  uint32_t range, key;
  int64_t busy, covered;
  int64_t kind_sum[TP_TRACE_KINDS];
  uint64_t ops;
  uint8_t phase;
} Entry;

typedef struct Chain {
  Entry *e;
  size_t n, cap;
} Chain;

typedef struct Pairs {
  uint64_t *slot_key;  // key << 32 | name, + 1 (0: empty)
  uint32_t *slot_at;
  size_t cap;
} Pairs;

typedef struct Walk {
  const TpTrace *t;
  const Store *s;
  const uint8_t *wanted;
  TpTraceOps *out;
  Pairs pairs;
  size_t kernels_cap;
} Walk;

static void finalize(Walk *w, const Entry *e) {
  TpTraceOpStat *st = &w->out->stats[e->key];
  if (st->calls == 0 || e->busy < st->min) {
    st->min = e->busy;
  }
  if (st->calls == 0 || e->busy > st->max) {
    st->max = e->busy;
  }
  st->calls++;
  st->ops += e->ops;
  st->time = tp_trace_add_capped(st->time, e->busy);
  st->time_sq += (double)e->busy * (double)e->busy;
  if (e->busy > 0) {
    st->inv += 1.0 / (double)e->busy;
  }
  st->phase[e->phase]++;
  for (int k = 0; k < TP_TRACE_KINDS; k++) {
    st->kind_sum[k] = tp_trace_add_capped(st->kind_sum[k], e->kind_sum[k]);
  }
}

static uint64_t pair_home(uint64_t k) {
  return (k * 0x9E3779B97F4A7C15ULL) >> 20;
}

static bool pairs_rehash(Walk *w) {
  return tp_hashidx_grow(&w->pairs.slot_key, &w->pairs.slot_at, &w->pairs.cap, 256, pair_home);
}

// Adds one GPU op of name `name`, `dur` ns, to those `key` owns.
static bool add_pair(Walk *w, uint32_t key, uint32_t name, int64_t dur) {
  TpTraceOps *o = w->out;
  if ((o->nkernels + 1) * 2 > w->pairs.cap && !pairs_rehash(w)) {
    return false;
  }
  uint64_t k = ((uint64_t)key << 32 | name) + 1;
  size_t j = (size_t)pair_home(k) & (w->pairs.cap - 1);
  while (w->pairs.slot_key[j] && w->pairs.slot_key[j] != k) {
    j = (j + 1) & (w->pairs.cap - 1);
  }
  if (!w->pairs.slot_key[j]) {
    if (!grow((void **)&o->kernels, &w->kernels_cap, o->nkernels, sizeof(TpTraceOpKernel))) {
      return false;
    }
    o->kernels[o->nkernels] = (TpTraceOpKernel){key, name, 0, 0};
    w->pairs.slot_key[j] = k;
    w->pairs.slot_at[j] = (uint32_t)o->nkernels++;
  }
  TpTraceOpKernel *kp = &o->kernels[w->pairs.slot_at[j]];
  kp->count++;
  kp->total = tp_trace_add_capped(kp->total, dur);
  return true;
}

// The innermost nn.Module frame around time ts on `thread`, or NO_RANGE.
static uint32_t frame_at(const Store *s, uint16_t thread, int64_t ts) {
  size_t lo = 0, hi = s->nframes;  // first frame after (thread, ts)
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const Frame *f = &s->frames[mid];
    if (f->thread < thread || (f->thread == thread && f->ts <= ts)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) {
    return NO_RANGE;
  }
  uint32_t i = (uint32_t)(lo - 1);
  for (int depth = 0; i != NO_RANGE && depth < MAX_CHAIN; depth++) {
    const Frame *f = &s->frames[i];
    if (f->thread != thread) {
      return NO_RANGE;
    }
    if (ts < f->end) {
      return i;
    }
    i = f->parent;
  }
  return NO_RANGE;
}

// One GPU op: the chain of ranges around its launch replaces its thread's chain (the ranges left
// are finished calls), then each range of the chain takes its time.
static bool walk_op(Walk *w, Chain *c, size_t i, const TpTraceLaunch *l) {
  const TpTrace *t = w->t;
  const Store *s = w->s;
  const TpTraceOp *op = &t->ops[i];
  uint32_t chain[MAX_CHAIN];
  size_t depth = 0;
  for (uint32_t r = op->cpu; r != NO_RANGE && depth < MAX_CHAIN; r = s->kp[r].parent) {
    chain[depth++] = r;
  }
  // chain[depth - 1] is the outermost range: match the open chain from there.
  size_t same = 0;
  while (same < c->n && same < depth && c->e[same].range == chain[depth - 1 - same]) {
    same++;
  }
  while (c->n > same) {
    finalize(w, &c->e[--c->n]);
  }
  if (c->cap < depth) {
    Entry *e = realloc(c->e, MAX_CHAIN * sizeof(Entry));
    if (!e) {
      return false;
    }
    c->e = e;
    c->cap = MAX_CHAIN;
  }
  for (size_t k = same; k < depth; k++) {
    uint32_t r = chain[depth - 1 - k];
    uint32_t key = s->kp[r].key;
    uint8_t phase = t->keys[key].phase;
    if (phase == TP_TRACE_PHASE_FWD && k > 0) {
      phase = c->e[k - 1].phase;
    }
    c->e[k] = (Entry){.range = r, .key = key, .busy = 0, .covered = INT64_MIN, .phase = phase};
  }
  c->n = depth;
  int64_t dur = tp_trace_store_op_dur(t, i), a = op->ts, b = a + dur;
  size_t owner = depth > 0 ? depth - 1 : 0;
  for (size_t k = 0; k < depth; k++) {
    Entry *e = &c->e[k];
    if (a >= e->covered) {
      e->busy = tp_trace_add_capped(e->busy, b - a);
      e->covered = b;
    } else if (b > e->covered) {
      e->busy = tp_trace_add_capped(e->busy, b - e->covered);
      e->covered = b;
    }
    e->ops++;
    if (op->kind < TP_TRACE_KINDS) {
      e->kind_sum[op->kind] = tp_trace_add_capped(e->kind_sum[op->kind], dur);
    }
    if (w->wanted[e->key]) {
      owner = k;
    }
  }
  if (depth == 0) {
    return true;
  }
  TpTraceOpStat *st = &w->out->stats[c->e[owner].key];
  st->own = tp_trace_add_capped(st->own, dur);
  st->own_ops++;
  if (st->module == 0 && l && l->thread != TP_TRACE_NO_THREAD) {
    uint32_t f = frame_at(s, l->thread, l->ts);
    if (f != NO_RANGE) {
      st->module = s->frames[f].key + 1;
      uint32_t p = s->frames[f].parent;
      st->module_parent = p != NO_RANGE ? s->frames[p].key + 1 : 0;
    }
  }
  return add_pair(w, c->e[owner].key, op->name, dur);
}

void tp_trace_cpu_ops_free(TpTraceOps *o) {
  free(o->stats);
  free(o->kernels);
  memset(o, 0, sizeof(*o));
}

int tp_trace_cpu_ops(const TpTrace *t, const uint8_t *wanted, uint32_t step, TpTraceOps *out,
                     TpError *err) {
  memset(out, 0, sizeof(*out));
  const Store *s = store_get(t);
  out->stats = calloc(t->nkeys + 1, sizeof(TpTraceOpStat));
  if (!out->stats) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", t->path);
  }
  out->nstats = t->nkeys;
  size_t n = 0;
  for (size_t i = 0; i < t->nops; i++) {
    const TpTraceOp *op = &t->ops[i];
    if (step != TP_TRACE_NO_STEP && op->step != step) {
      continue;
    }
    if (op->cpu == TP_TRACE_NO_CPU || !s) {
      out->unlinked++;
    } else {
      n++;
    }
  }
  out->linked = n;
  if (n == 0) {
    return 0;
  }
  // Launch order: (correlation, index) packed in 64 bits; ops sorted by start (trace.c) keep
  // the ops of one launch (a graph) in the order they ran.
  uint64_t *order = malloc(n * sizeof(uint64_t));
  size_t nthreads = s->nthreads + 1;  // the last one for launches of no known thread
  Chain *chains = calloc(nthreads, sizeof(Chain));
  Walk w = {.t = t, .s = s, .wanted = wanted, .out = out};
  int rc = order && chains ? 0 : TP_ENOMEM;
  if (rc == 0) {
    size_t k = 0;
    for (size_t i = 0; i < t->nops; i++) {
      const TpTraceOp *op = &t->ops[i];
      if ((step == TP_TRACE_NO_STEP || op->step == step) && op->cpu != TP_TRACE_NO_CPU) {
        order[k++] = (uint64_t)op->corr << 32 | i;
      }
    }
    qsort(order, n, sizeof(uint64_t), cmp_u64);
    for (size_t k2 = 0; k2 < n && rc == 0; k2++) {
      size_t i = (uint32_t)order[k2];
      const TpTraceOp *op = &t->ops[i];
      const TpTraceLaunch *l = tp_trace_store_launch(t, op->corr);
      size_t th = l && l->thread < s->nthreads ? l->thread : s->nthreads;
      if (!walk_op(&w, &chains[th], i, l)) {
        rc = TP_ENOMEM;
      }
    }
    for (size_t th = 0; th < nthreads; th++) {
      while (chains[th].n > 0) {
        finalize(&w, &chains[th].e[--chains[th].n]);
      }
    }
  }
  if (chains) {
    for (size_t th = 0; th < nthreads; th++) {
      free(chains[th].e);
    }
  }
  free(chains);
  free(order);
  free(w.pairs.slot_key);
  free(w.pairs.slot_at);
  if (rc != 0) {
    tp_trace_cpu_ops_free(out);
    return tp_error_set(err, rc, "%s: out of memory", t->path);
  }
  return 0;
}
