// The memory side of a profiler trace (trace_mem.h). One pass in the order of the file: each event
// updates its device's totals, peaks and curve, its step's and its op's figures, and the map of
// live allocations (address and device to size, time, op, phase, step, the event's number). What
// was live at the peak is found without copying the map: an allocation freed after the peak
// event that was made at or before it was live then, so its bytes go to the peak's figures when
// it is freed (or at the end), and those figures start again whenever the peak moves.
#include "trace_mem.h"

#include <stdlib.h>
#include <string.h>

#include "trace_cpu.h"
#include "hashidx.h"
#include "trace_store.h"

enum {
  CURVE_CAP = 4096,      // buckets of a device's curve (each the lowest and highest event)
  LIVE_MAX = 1 << 22,    // allocations the live map holds at most
  NO_SLOT = UINT32_MAX,  // no step
};

typedef struct Live {
  uint64_t addr;  // 0: empty slot
  int64_t bytes, ts, call_end;
  uint64_t seq;   // the device's event number of the allocation
  uint32_t key;   // owner key id + 1, 0: none
  uint32_t slot;  // the step slot, NO_SLOT
  uint8_t dev, phase;
} Live;

// A bucket of consecutive events of a device's curve: its lowest and highest Total Allocated.
typedef struct Bucket {
  TpTraceMemPoint lo, hi;
  uint64_t lo_seq, hi_seq;  // the order of the file, to keep points of one time in order
} Bucket;

typedef struct Dev {
  TpTraceMemDevice pub;
  uint64_t seq;       // events of this device so far
  uint64_t peak_seq;  // the peak event's number (0: no peak yet)
  uint32_t gen;       // bumped when the peak moves: op figures of an older one are stale
  int64_t last_total, last_reserved;
  bool has_total, has_reserved;
  int64_t latest_ts;  // the latest event by time (its totals are the end's)
  Bucket *curve;
  size_t nbuckets;
  uint64_t stride, in_bucket;
  TpTraceMemPoint *points;
} Dev;

// A step as the memory side knows it: the steps read so far, sorted by start.
typedef struct MStep {
  int64_t number, ts, dur;
} MStep;

typedef struct TpTraceMemStore {
  TpTraceMem pub;
  Dev devs[TP_TRACE_MEM_DEVICES];
  TpTraceMemDevice pub_devs[TP_TRACE_MEM_DEVICES];
  size_t ndevs;
  Live *live;  // open addressing, linear probing, deletion by backward shift
  size_t live_cap, nlive;
  MStep *msteps;
  size_t nmsteps, msteps_cap, steps_seen;
  bool steps_sorted;
  TpTraceMemStep *steps;  // per (slot, device)
  uint32_t *step_slot;    // each entry's slot (NO_SLOT: no step)
  int64_t *step_latest;   // each entry's latest event by time (its totals are the step's end)
  size_t nsteps, steps_cap;
  uint64_t *step_map_key;  // (slot + 1) << 8 | device, + 1 (0: empty) -> index + 1
  uint32_t *step_map_at;
  size_t step_map_cap;
  TpTraceMemOp *ops;
  uint32_t *op_gen;  // the device's peak generation each op's at_peak belongs to
  size_t nops, ops_cap;
  uint64_t *op_map_key;
  uint32_t *op_map_at;
  size_t op_map_cap;
  bool finished;
} Store;

static bool grow(void **arr, size_t *cap, size_t n, size_t elem) {
  return tp_grow_array(arr, cap, n, elem, 64);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  return x ^ (x >> 33);
}

static Store *store_of(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  if (!pv->mem) {
    pv->mem = calloc(1, sizeof(Store));
  }
  return pv->mem;
}

void tp_trace_mem_free(TpTrace *t) {
  if (!t || !t->priv) {
    return;
  }
  TpTraceStore *pv = t->priv;
  Store *s = pv->mem;
  if (!s) {
    return;
  }
  for (size_t d = 0; d < s->ndevs; d++) {
    free(s->devs[d].curve);
    free(s->devs[d].points);
  }
  free(s->live);
  free(s->msteps);
  free(s->steps);
  free(s->step_slot);
  free(s->step_latest);
  free(s->step_map_key);
  free(s->step_map_at);
  free(s->ops);
  free(s->op_gen);
  free(s->op_map_key);
  free(s->op_map_at);
  free(s);
  pv->mem = NULL;
}

const TpTraceMem *tp_trace_mem_get(const TpTrace *t) {
  static const TpTraceMem none = {0};
  const TpTraceStore *pv = t->priv;
  const Store *s = pv ? pv->mem : NULL;
  return s ? &s->pub : &none;
}

// --- small maps: (slot, device) -> step entry, (key, device) -> op entry ------------------------

// The index of `key` in a map (uint64 keys + 1 -> index + 1), added by `add` when new; SIZE_MAX
// when out of memory.
typedef bool (*AddFn)(Store *s, uint64_t key);

static bool map_rehash(uint64_t **keys, uint32_t **at, size_t *cap) {
  return tp_hashidx_grow(keys, at, cap, 64, mix);
}

// The slot of `key` (+1 stored) in a map with n entries; *found says whether it holds one.
static size_t map_find(const uint64_t *keys, size_t cap, uint64_t key, bool *found) {
  size_t j = mix(key + 1) & (cap - 1);
  while (keys[j] && keys[j] != key + 1) {
    j = (j + 1) & (cap - 1);
  }
  *found = keys[j] != 0;
  return j;
}

// The step entry of (slot, device), added when new; NULL when out of memory.
static TpTraceMemStep *step_entry(Store *s, uint32_t slot, uint8_t dev) {
  uint64_t key = ((uint64_t)slot + 1) << 8 | dev;
  if ((s->nsteps + 1) * 2 > s->step_map_cap &&
      !map_rehash(&s->step_map_key, &s->step_map_at, &s->step_map_cap)) {
    return NULL;
  }
  bool found = false;
  size_t j = map_find(s->step_map_key, s->step_map_cap, key, &found);
  if (found) {
    return &s->steps[s->step_map_at[j] - 1];
  }
  if (!grow((void **)&s->steps, &s->steps_cap, s->nsteps, sizeof(TpTraceMemStep))) {
    return NULL;
  }
  size_t cap = s->steps_cap;
  uint32_t *slots = realloc(s->step_slot, cap * sizeof(uint32_t));
  if (!slots) {
    return NULL;
  }
  s->step_slot = slots;
  int64_t *latest = realloc(s->step_latest, cap * sizeof(int64_t));
  if (!latest) {
    return NULL;
  }
  s->step_latest = latest;
  s->step_latest[s->nsteps] = INT64_MIN;
  TpTraceMemStep *e = &s->steps[s->nsteps];
  memset(e, 0, sizeof(*e));
  e->step = TP_TRACE_NO_STEP;
  e->device = dev;
  e->peak = -1;
  e->reserved_max = -1;
  for (int p = 0; p < TP_TRACE_PHASES; p++) {
    e->phase_peak[p] = -1;
  }
  s->step_slot[s->nsteps] = slot;
  s->step_map_key[j] = key + 1;
  s->step_map_at[j] = (uint32_t)++s->nsteps;
  return e;
}

// The op entry of (key + 1, device), added when new; NULL when out of memory.
static TpTraceMemOp *op_entry(Store *s, uint32_t key1, uint8_t dev, uint32_t **gen) {
  uint64_t key = (uint64_t)key1 << 8 | dev;
  if ((s->nops + 1) * 2 > s->op_map_cap &&
      !map_rehash(&s->op_map_key, &s->op_map_at, &s->op_map_cap)) {
    return NULL;
  }
  bool found = false;
  size_t j = map_find(s->op_map_key, s->op_map_cap, key, &found);
  if (!found) {
    if (!grow((void **)&s->ops, &s->ops_cap, s->nops, sizeof(TpTraceMemOp))) {
      return NULL;
    }
    uint32_t *g = realloc(s->op_gen, s->ops_cap * sizeof(uint32_t));
    if (!g) {
      return NULL;
    }
    s->op_gen = g;
    memset(&s->ops[s->nops], 0, sizeof(TpTraceMemOp));
    s->ops[s->nops].key = key1;
    s->ops[s->nops].device = dev;
    s->op_gen[s->nops] = 0;
    s->op_map_key[j] = key + 1;
    s->op_map_at[j] = (uint32_t)++s->nops;
  }
  size_t i = s->op_map_at[j] - 1;
  *gen = &s->op_gen[i];
  return &s->ops[i];
}

// --- the live map -------------------------------------------------------------------------------

static size_t live_home(const Store *s, uint64_t addr, uint8_t dev) {
  return mix(addr ^ ((uint64_t)dev << 56)) & (s->live_cap - 1);
}

static Live *live_find(Store *s, uint64_t addr, uint8_t dev) {
  if (s->live_cap == 0) {
    return NULL;
  }
  for (size_t j = live_home(s, addr, dev);; j = (j + 1) & (s->live_cap - 1)) {
    Live *e = &s->live[j];
    if (e->addr == 0) {
      return NULL;
    }
    if (e->addr == addr && e->dev == dev) {
      return e;
    }
  }
}

static bool live_rehash(Store *s) {
  size_t nc = s->live_cap ? s->live_cap * 2 : 1024;
  Live *n = calloc(nc, sizeof(Live));
  if (!n) {
    return false;
  }
  Live *old = s->live;
  size_t oc = s->live_cap;
  s->live = n;
  s->live_cap = nc;
  for (size_t i = 0; i < oc; i++) {
    if (old[i].addr) {
      size_t j = live_home(s, old[i].addr, old[i].dev);
      while (n[j].addr) {
        j = (j + 1) & (nc - 1);
      }
      n[j] = old[i];
    }
  }
  free(old);
  return true;
}

// Removes an entry, shifting the entries after it back (no tombstones).
static void live_remove(Store *s, Live *e) {
  size_t i = (size_t)(e - s->live), mask = s->live_cap - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (s->live[j].addr == 0) {
      break;
    }
    size_t home = live_home(s, s->live[j].addr, s->live[j].dev);
    // Move j back to i when its home is not in (i, j] (cyclically).
    bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!between) {
      s->live[i] = s->live[j];
      i = j;
    }
  }
  s->live[i].addr = 0;
  s->nlive--;
}

// --- steps --------------------------------------------------------------------------------------

static int cmp_mstep(const void *a, const void *b) {
  const MStep *x = a, *y = b;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

// Brings the sorted copy of the steps up to date with the steps read so far. Entries already
// made keep their slot by the step's start: a step read after memory events is counted.
static bool sync_steps(TpTrace *t, Store *s) {
  if (t->nsteps == s->steps_seen) {
    return true;
  }
  if (s->pub.events > 0) {
    s->pub.late_steps += t->nsteps - s->steps_seen;
  }
  MStep *old = NULL;
  size_t nold = s->nmsteps;
  if (s->nsteps > 0 && nold > 0) {
    old = malloc(nold * sizeof(MStep));
    if (!old) {
      return false;
    }
    memcpy(old, s->msteps, nold * sizeof(MStep));
  }
  while (s->msteps_cap < t->nsteps) {
    if (!grow((void **)&s->msteps, &s->msteps_cap, s->msteps_cap, sizeof(MStep))) {
      free(old);
      return false;
    }
  }
  for (size_t i = 0; i < t->nsteps; i++) {
    s->msteps[i] = (MStep){t->steps[i].number, t->steps[i].ts, t->steps[i].dur};
  }
  s->nmsteps = t->nsteps;
  s->steps_seen = t->nsteps;
  if (s->nmsteps > 1) {
    qsort(s->msteps, s->nmsteps, sizeof(MStep), cmp_mstep);
  }
  if (old) {
    // The slots of the entries made so far move with their steps.
    for (size_t i = 0; i < s->nsteps; i++) {
      uint32_t slot = s->step_slot[i];
      if (slot == NO_SLOT || slot >= nold) {
        continue;
      }
      for (size_t k = 0; k < s->nmsteps; k++) {
        if (s->msteps[k].ts == old[slot].ts && s->msteps[k].number == old[slot].number) {
          s->step_slot[i] = (uint32_t)k;
          break;
        }
      }
    }
    for (size_t j = 0; j < s->live_cap; j++) {
      Live *e = &s->live[j];
      if (e->addr && e->slot != NO_SLOT && e->slot < nold) {
        for (size_t k = 0; k < s->nmsteps; k++) {
          if (s->msteps[k].ts == old[e->slot].ts && s->msteps[k].number == old[e->slot].number) {
            e->slot = (uint32_t)k;
            break;
          }
        }
      }
    }
    // The map's keys name slots: build it again.
    memset(s->step_map_key, 0, s->step_map_cap * sizeof(uint64_t));
    for (size_t i = 0; i < s->nsteps; i++) {
      uint64_t key = ((uint64_t)s->step_slot[i] + 1) << 8 | s->steps[i].device;
      bool found = false;
      size_t j = map_find(s->step_map_key, s->step_map_cap, key, &found);
      s->step_map_key[j] = key + 1;
      s->step_map_at[j] = (uint32_t)i + 1;
    }
    free(old);
  }
  return true;
}

// The slot of the step holding ts, or NO_SLOT.
static uint32_t slot_at(const Store *s, int64_t ts) {
  size_t lo = 0, hi = s->nmsteps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->msteps[mid].ts <= ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) {
    return NO_SLOT;
  }
  const MStep *m = &s->msteps[lo - 1];
  return ts - m->ts < m->dur ? (uint32_t)(lo - 1) : NO_SLOT;
}

static int64_t slot_end(const Store *s, uint32_t slot) {
  return slot == NO_SLOT ? INT64_MAX : s->msteps[slot].ts + s->msteps[slot].dur;
}

// --- devices and curves -------------------------------------------------------------------------

// The device index of (type, id), added when new; -1 past TP_TRACE_MEM_DEVICES.
static int dev_of(Store *s, int64_t type, int64_t id) {
  int16_t ty = type >= -1 && type <= INT16_MAX ? (int16_t)type : -1;
  int16_t di = id >= -1 && id <= INT16_MAX ? (int16_t)id : -1;
  for (size_t d = 0; d < s->ndevs; d++) {
    if (s->devs[d].pub.type == ty && s->devs[d].pub.id == di) {
      return (int)d;
    }
  }
  if (s->ndevs == TP_TRACE_MEM_DEVICES) {
    return -1;
  }
  Dev *v = &s->devs[s->ndevs];
  memset(v, 0, sizeof(*v));
  v->pub.type = ty;
  v->pub.id = di;
  v->pub.peak = -1;
  v->pub.peak_step = TP_TRACE_NO_STEP;
  v->pub.reserved_max = -1;
  v->stride = 1;
  return (int)s->ndevs++;
}

// Adds one event's totals to its device's curve: buckets of `stride` events, each keeping its
// lowest and highest point; when the buckets are full, pairs of them merge and the stride doubles.
static bool curve_add(Dev *v, int64_t ts, int64_t total, int64_t reserved) {
  TpTraceMemPoint p = {ts, total, reserved};
  if (v->in_bucket == 0) {
    if (v->nbuckets == CURVE_CAP) {
      for (size_t i = 0; i < CURVE_CAP / 2; i++) {
        Bucket *a = &v->curve[2 * i], *b = &v->curve[2 * i + 1];
        Bucket m = *a;
        if (b->hi.allocated > m.hi.allocated) {
          m.hi = b->hi;
          m.hi_seq = b->hi_seq;
        }
        if (b->lo.allocated < m.lo.allocated) {
          m.lo = b->lo;
          m.lo_seq = b->lo_seq;
        }
        v->curve[i] = m;
      }
      v->nbuckets = CURVE_CAP / 2;
      v->stride *= 2;
      // the last bucket now holds `stride` events: the next event opens a new one
    }
    if (!v->curve) {
      v->curve = malloc(CURVE_CAP * sizeof(Bucket));
      if (!v->curve) {
        return false;
      }
    }
    v->curve[v->nbuckets++] = (Bucket){p, p, v->seq, v->seq};
    v->in_bucket = 1;
  } else {
    Bucket *b = &v->curve[v->nbuckets - 1];
    if (total > b->hi.allocated) {
      b->hi = p;
      b->hi_seq = v->seq;
    }
    if (total < b->lo.allocated) {
      b->lo = p;
      b->lo_seq = v->seq;
    }
    v->in_bucket++;
  }
  if (v->in_bucket >= v->stride) {
    v->in_bucket = 0;
  }
  return true;
}

// --- categories ---------------------------------------------------------------------------------

// The category of a live allocation, freed at (free_ts, phase, slot) or never (freed false).
static TpTraceMemCat category(const Live *e, bool freed, int64_t free_ts, uint8_t phase,
                              uint32_t slot) {
  if (freed && e->call_end != INT64_MIN && free_ts < e->call_end) {
    return TP_TRACE_MEM_TEMPORARY;
  }
  if (e->key == 0) {
    return TP_TRACE_MEM_OTHER;
  }
  bool same = freed && slot == e->slot;
  switch (e->phase) {
    case TP_TRACE_PHASE_BWD:
      return same && phase == TP_TRACE_PHASE_BWD ? TP_TRACE_MEM_AUTOGRAD : TP_TRACE_MEM_GRADIENT;
    case TP_TRACE_PHASE_OPT:
      return same ? TP_TRACE_MEM_TEMPORARY : TP_TRACE_MEM_OPTIMIZER;
    default:
      break;
  }
  if (same && phase == TP_TRACE_PHASE_FWD) {
    return TP_TRACE_MEM_TEMPORARY;
  }
  if (same && phase == TP_TRACE_PHASE_BWD) {
    return TP_TRACE_MEM_ACTIVATION;
  }
  return TP_TRACE_MEM_OTHER;
}

// An allocation leaves the live set (freed, or still live at the end): its bytes go to its
// category, its op's figures, its step's held bytes, and the peak's when it was live then.
static bool settle(Store *s, const Live *e, bool freed, int64_t ts, uint8_t phase, uint32_t slot,
                   bool unknown) {
  Dev *v = &s->devs[e->dev];
  TpTraceMemCat cat = unknown ? TP_TRACE_MEM_OTHER : category(e, freed, ts, phase, slot);
  v->pub.cat_bytes[cat] = tp_trace_add_capped(v->pub.cat_bytes[cat], e->bytes);
  uint32_t *gen = NULL;
  TpTraceMemOp *op = op_entry(s, e->key, e->dev, &gen);
  if (!op) {
    return false;
  }
  bool temporary = freed && e->call_end != INT64_MIN && ts < e->call_end;
  if (freed) {
    op->frees++;
    op->freed = tp_trace_add_capped(op->freed, e->bytes);
  } else {
    op->live_end = tp_trace_add_capped(op->live_end, e->bytes);
  }
  if (temporary) {
    op->temporary = tp_trace_add_capped(op->temporary, e->bytes);
  }
  bool at_peak = v->peak_seq > 0 && e->seq <= v->peak_seq && (!freed || v->seq > v->peak_seq);
  if (at_peak) {
    v->pub.at_peak[cat] = tp_trace_add_capped(v->pub.at_peak[cat], e->bytes);
    if (*gen != v->gen) {
      *gen = v->gen;
      op->at_peak = 0;
    }
    op->at_peak = tp_trace_add_capped(op->at_peak, e->bytes);
  }
  TpTraceMemStep *st = step_entry(s, e->slot, e->dev);
  if (!st) {
    return false;
  }
  if (!freed || ts >= slot_end(s, e->slot)) {
    st->held = tp_trace_add_capped(st->held, e->bytes);
  }
  if (temporary) {
    st->temporary = tp_trace_add_capped(st->temporary, e->bytes);
  }
  return true;
}

// --- events -------------------------------------------------------------------------------------

int tp_trace_mem_add(TpTrace *t, const TpTraceMemIn *in) {
  Store *s = store_of(t);
  if (!s || !sync_steps(t, s)) {
    return TP_ENOMEM;
  }
  s->pub.events++;
  if (!in->has_bytes || in->bad_bytes) {
    if (s->pub.skipped++ == 0) {
      tp_trace_warn(t, "%s: a [memory] event %s Bytes was skipped", t->path,
                    in->has_bytes ? "with an out-of-range" : "without");
    }
    return 0;
  }
  int d = dev_of(s, in->type, in->id);
  if (d < 0) {
    s->pub.other_devices++;
    return 0;
  }
  Dev *v = &s->devs[d];
  TpTraceMemDevice *dv = &v->pub;
  v->seq++;
  dv->events++;
  // Where it ran: the op, phase and step.
  TpTraceCpuAt at;
  int rc = tp_trace_cpu_at(t, in->thread, in->ts, &at);
  if (rc < 0) {
    return rc;
  }
  if (rc > 0) {
    s->pub.unattributed++;
  }
  uint32_t key1 = at.owner == UINT32_MAX ? 0 : at.owner + 1;
  uint32_t slot = slot_at(s, in->ts);
  // The totals: the event's own when valid, else the last one moved by Bytes.
  int64_t total;
  if (in->has_total && !in->bad_total) {
    total = in->total;
  } else {
    dv->derived_total++;
    dv->bad_total += in->has_total;
    int64_t base = v->has_total ? v->last_total : 0;
    total = base + in->bytes;
    if (total < 0) {
      total = 0;
    }
    if (total > TP_TRACE_MEM_MAX) {
      total = TP_TRACE_MEM_MAX;
    }
  }
  int64_t reserved;
  if (in->has_reserved && !in->bad_reserved) {
    reserved = in->reserved;
    v->last_reserved = reserved;
    v->has_reserved = true;
  } else {
    dv->no_reserved++;
    reserved = v->has_reserved ? v->last_reserved : 0;
  }
  if (dv->events == 1) {
    dv->before = total - in->bytes;
    dv->first_ts = dv->last_ts = in->ts;
  }
  if (in->ts < dv->first_ts) {
    dv->first_ts = in->ts;
  }
  if (in->ts > dv->last_ts) {
    dv->last_ts = in->ts;
  }
  if (dv->events == 1 || in->ts >= v->latest_ts) {
    v->latest_ts = in->ts;
    dv->end_allocated = total;
    dv->end_reserved = reserved;
  }
  v->last_total = total;
  v->has_total = true;
  if (total > dv->peak) {
    dv->peak = total;
    dv->peak_ts = in->ts;
    dv->peak_reserved = reserved;
    dv->peak_key = key1;
    dv->peak_phase = at.phase;
    dv->peak_step = slot;  // a slot until tp_trace_mem_finish
    v->peak_seq = v->seq;
    v->gen++;
    memset(dv->at_peak, 0, sizeof(dv->at_peak));
  }
  if (reserved > dv->reserved_max) {
    dv->reserved_max = reserved;
    dv->reserved_max_ts = in->ts;
  }
  if (reserved - total > dv->slack_max) {
    dv->slack_max = reserved - total;
  }
  if (!curve_add(v, in->ts, total, reserved)) {
    return TP_ENOMEM;
  }
  // The step's figures.
  TpTraceMemStep *st = step_entry(s, slot, (uint8_t)d);
  if (!st) {
    return TP_ENOMEM;
  }
  if (st->events++ == 0) {
    st->start = total - in->bytes;
  }
  int64_t *latest = &s->step_latest[st - s->steps];
  if (in->ts >= *latest) {
    *latest = in->ts;
    st->end = total;
  }
  if (total > st->peak) {
    st->peak = total;
    st->peak_ts = in->ts;
    st->peak_key = key1;
    st->peak_phase = at.phase;
  }
  if (total > st->phase_peak[at.phase]) {
    st->phase_peak[at.phase] = total;
  }
  if (reserved > st->reserved_max) {
    st->reserved_max = reserved;
  }
  if (in->bytes > 0) {
    dv->allocs++;
    dv->alloc_bytes = tp_trace_add_capped(dv->alloc_bytes, in->bytes);
    st->allocs++;
    st->alloc_bytes = tp_trace_add_capped(st->alloc_bytes, in->bytes);
    st->phase_bytes[at.phase] = tp_trace_add_capped(st->phase_bytes[at.phase], in->bytes);
    uint32_t *gen = NULL;
    TpTraceMemOp *op = op_entry(s, key1, (uint8_t)d, &gen);
    if (!op) {
      return TP_ENOMEM;
    }
    op->allocs++;
    op->bytes = tp_trace_add_capped(op->bytes, in->bytes);
    op->phase_allocs[at.phase]++;
    if (!in->has_addr) {
      dv->no_addr++;
      dv->cat_bytes[TP_TRACE_MEM_OTHER] =
          tp_trace_add_capped(dv->cat_bytes[TP_TRACE_MEM_OTHER], in->bytes);
      return 0;
    }
    Live *e = live_find(s, in->addr, (uint8_t)d);
    if (e) {
      // Its free was never seen: it leaves the live set here, as if freed without a category.
      dv->realloc++;
      Live old = *e;
      live_remove(s, e);
      old.call_end = INT64_MIN;
      if (!settle(s, &old, true, in->ts, at.phase, slot, true)) {
        return TP_ENOMEM;
      }
    }
    if (s->nlive >= LIVE_MAX) {
      dv->untracked++;
      dv->cat_bytes[TP_TRACE_MEM_OTHER] =
          tp_trace_add_capped(dv->cat_bytes[TP_TRACE_MEM_OTHER], in->bytes);
      return 0;
    }
    if ((s->nlive + 1) * 2 > s->live_cap && !live_rehash(s)) {
      return TP_ENOMEM;
    }
    size_t j = live_home(s, in->addr, (uint8_t)d);
    while (s->live[j].addr) {
      j = (j + 1) & (s->live_cap - 1);
    }
    s->live[j] = (Live){.addr = in->addr,
                        .bytes = in->bytes,
                        .ts = in->ts,
                        .call_end = at.call_end,
                        .seq = v->seq,
                        .key = key1,
                        .slot = slot,
                        .dev = (uint8_t)d,
                        .phase = at.phase};
    s->nlive++;
  } else if (in->bytes < 0) {
    dv->frees++;
    dv->free_bytes = tp_trace_add_capped(dv->free_bytes, -in->bytes);
    st->frees++;
    st->free_bytes = tp_trace_add_capped(st->free_bytes, -in->bytes);
    if (!in->has_addr) {
      dv->no_addr++;
      return 0;
    }
    Live *e = live_find(s, in->addr, (uint8_t)d);
    if (!e) {
      dv->unpaired_frees++;
      return 0;
    }
    if (e->bytes != -in->bytes) {
      dv->size_mismatch++;
    }
    Live old = *e;
    live_remove(s, e);
    if (!settle(s, &old, true, in->ts, at.phase, slot, false)) {
      return TP_ENOMEM;
    }
  }
  return 0;
}

// --- the end ------------------------------------------------------------------------------------

// The index in t->steps (sorted) of a memory step slot, or TP_TRACE_NO_STEP.
static uint32_t step_index(const TpTrace *t, const Store *s, uint32_t slot) {
  if (slot == NO_SLOT) {
    return t->stepless && t->nsteps == 1 ? 0 : TP_TRACE_NO_STEP;
  }
  const MStep *m = &s->msteps[slot];
  size_t lo = 0, hi = t->nsteps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->steps[mid].ts < m->ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (size_t i = lo; i < t->nsteps && t->steps[i].ts == m->ts; i++) {
    if (t->steps[i].number == m->number) {
      return (uint32_t)i;
    }
  }
  return TP_TRACE_NO_STEP;
}

static int cmp_step_entry(const void *a, const void *b) {
  const TpTraceMemStep *x = a, *y = b;
  if (x->step != y->step) {
    return (x->step > y->step) - (x->step < y->step);
  }
  return (x->device > y->device) - (x->device < y->device);
}

typedef struct SortPoint {
  TpTraceMemPoint p;
  uint64_t seq;
} SortPoint;

static int cmp_point(const void *a, const void *b) {
  const SortPoint *x = a, *y = b;
  if (x->p.ts != y->p.ts) {
    return (x->p.ts > y->p.ts) - (x->p.ts < y->p.ts);
  }
  return (x->seq > y->seq) - (x->seq < y->seq);
}

// A device's curve in time order: each bucket's lowest and highest points (one when the same).
static bool curve_finish(Dev *v) {
  size_t n = 0;
  SortPoint *sp = malloc((2 * v->nbuckets + 1) * sizeof(SortPoint));
  if (!sp) {
    return false;
  }
  for (size_t i = 0; i < v->nbuckets; i++) {
    const Bucket *b = &v->curve[i];
    sp[n++] = (SortPoint){b->lo, b->lo_seq};
    if (b->hi_seq != b->lo_seq) {
      sp[n++] = (SortPoint){b->hi, b->hi_seq};
    }
  }
  if (n > 1) {
    qsort(sp, n, sizeof(SortPoint), cmp_point);
  }
  free(v->points);
  v->points = malloc((n + 1) * sizeof(TpTraceMemPoint));
  if (!v->points) {
    free(sp);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    v->points[i] = sp[i].p;
  }
  free(sp);
  v->pub.curve = v->points;
  v->pub.ncurve = n;
  v->pub.curve_stride = v->stride;
  free(v->curve);
  v->curve = NULL;
  v->nbuckets = 0;
  return true;
}

int tp_trace_mem_finish(TpTrace *t) {
  TpTraceStore *pv = t->priv;
  Store *s = pv->mem;
  if (!s || s->finished) {
    return 0;
  }
  s->finished = true;
  // What is still live at the end.
  for (size_t j = 0; j < s->live_cap; j++) {
    const Live *e = &s->live[j];
    if (e->addr) {
      Dev *v = &s->devs[e->dev];
      v->pub.live_end = tp_trace_add_capped(v->pub.live_end, e->bytes);
      if (!settle(s, e, false, 0, TP_TRACE_PHASE_FWD, NO_SLOT, false)) {
        return TP_ENOMEM;
      }
    }
  }
  free(s->live);
  s->live = NULL;
  s->live_cap = s->nlive = 0;
  for (size_t d = 0; d < s->ndevs; d++) {
    Dev *v = &s->devs[d];
    TpTraceMemDevice *dv = &v->pub;
    if (dv->peak >= 0) {
      int64_t tracked = 0;
      for (int c = 0; c < TP_TRACE_MEM_CATS; c++) {
        tracked = c == TP_TRACE_MEM_BEFORE ? tracked : tp_trace_add_capped(tracked, dv->at_peak[c]);
      }
      dv->at_peak[TP_TRACE_MEM_BEFORE] = dv->peak > tracked ? dv->peak - tracked : 0;
    } else {
      dv->peak = 0;
    }
    if (dv->reserved_max < 0) {
      dv->reserved_max = 0;
    }
    dv->peak_step = step_index(t, s, dv->peak_step);
    if (!curve_finish(v)) {
      return TP_ENOMEM;
    }
  }
  for (size_t i = 0; i < s->nops; i++) {
    if (s->op_gen[i] != s->devs[s->ops[i].device].gen) {
      s->ops[i].at_peak = 0;  // live at a peak that did not last
    }
  }
  for (size_t i = 0; i < s->nsteps; i++) {
    TpTraceMemStep *st = &s->steps[i];
    st->step = step_index(t, s, s->step_slot[i]);
    st->peak = st->peak < 0 ? 0 : st->peak;
    st->reserved_max = st->reserved_max < 0 ? 0 : st->reserved_max;
  }
  if (s->nsteps > 1) {
    qsort(s->steps, s->nsteps, sizeof(TpTraceMemStep), cmp_step_entry);
  }
  s->pub.late_ranges = tp_trace_cpu_late(t);
  for (size_t d = 0; d < s->ndevs; d++) {
    s->pub_devs[d] = s->devs[d].pub;
  }
  s->pub.devices = s->pub_devs;
  s->pub.ndevices = s->ndevs;
  s->pub.steps = s->steps;
  s->pub.nsteps = s->nsteps;
  s->pub.ops = s->ops;
  s->pub.nops = s->nops;
  return 0;
}
