// tp._trace: profiler traces read by the engine's streaming reader (engine/trace.h) and broken
// down per step once Lua has given each op name a class. Plain tables out; times in ns.
#include <lauxlib.h>
#include <lua.h>

#include <string.h>

#include "lutil.h"
#include "trace.h"

#define TRACE_MT "tp.Trace"

typedef struct Box {
  TpTrace *t;
} Box;

static TpTrace *check_trace(lua_State *L) {
  Box *b = luaL_checkudata(L, 1, TRACE_MT);
  if (!b->t) {
    luaL_error(L, "attempt to use a closed trace");
  }
  return b->t;
}

static void set_int(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

// trace.open(path) -> Trace | nil, err, code
static int trace_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  Box *b = lua_newuserdatauv(L, sizeof(Box), 0);  // closed until the read succeeds
  b->t = NULL;
  luaL_setmetatable(L, TRACE_MT);
  TpError err = {0};
  TpTrace *t = NULL;
  int rc = tp_trace_read(path, &t, &err);
  if (rc != 0) {
    return tpl_pusherror(L, &err);
  }
  b->t = t;
  return 1;
}

static void push_cat(const char *cat, size_t len, uint64_t count, void *ud) {
  lua_State *L = ud;
  lua_pushinteger(L, (lua_Integer)count);
  lua_setfield(L, -2, len ? cat : "(none)");  // cat is NUL-terminated in the arena
}

static const char *const sync_kinds[TP_TRACE_SYNC_KINDS] = {"call",  "copy",    "stream",
                                                            "event", "context", "stream_wait"};

static const char *const cause_names[TP_TRACE_CAUSES] = {"host", "sync", "dataloader", "latency",
                                                         "other"};

// trace:info() -> { path, bytes, compressed, truncated, warning, warnings, events, ops, ... }
static int t_info(lua_State *L) {
  TpTrace *t = check_trace(L);
  lua_createtable(L, 0, 20);
  lua_pushstring(L, t->path);
  lua_setfield(L, -2, "path");
  set_int(L, "bytes", (lua_Integer)t->bytes);
  set_int(L, "events", (lua_Integer)t->events);
  set_int(L, "ops", (lua_Integer)t->nops);
  set_int(L, "names", (lua_Integer)t->nnames);
  set_int(L, "launches", (lua_Integer)t->launches);
  set_int(L, "flows", (lua_Integer)t->flows);
  set_int(L, "ignored", (lua_Integer)t->ignored);
  set_int(L, "bad", (lua_Integer)t->bad);
  set_int(L, "unassigned", (lua_Integer)t->unassigned);
  set_int(L, "steps", t->stepless ? 0 : (lua_Integer)t->nsteps);
  set_int(L, "cpu_ranges", (lua_Integer)t->cpu_ranges);
  set_int(L, "op_keys", (lua_Integer)t->nkeys);
  set_int(L, "linked", (lua_Integer)t->linked);
  set_int(L, "unordered", (lua_Integer)t->unordered);
  set_int(L, "args_long", (lua_Integer)t->args_long);
  set_int(L, "graph_launches", (lua_Integer)t->graph_launches);
  set_int(L, "graph_ops", (lua_Integer)t->graph_ops);
  lua_createtable(L, 0, TP_TRACE_SYNC_KINDS);  // [info, syncs]
  for (int k = 0; k < TP_TRACE_SYNC_KINDS; k++) {
    set_int(L, sync_kinds[k], (lua_Integer)t->syncs[k]);
  }
  lua_setfield(L, -2, "syncs");
  lua_pushboolean(L, t->compressed);
  lua_setfield(L, -2, "compressed");
  lua_pushboolean(L, t->truncated);
  lua_setfield(L, -2, "truncated");
  lua_pushboolean(L, t->stepless);
  lua_setfield(L, -2, "stepless");
  set_int(L, "warnings", (lua_Integer)t->warnings);
  if (t->warnings) {
    lua_pushstring(L, t->warning);
    lua_setfield(L, -2, "warning");
  }
  lua_newtable(L);  // [info, categories]
  tp_trace_categories(t, push_cat, L);
  lua_setfield(L, -2, "categories");
  lua_createtable(L, 0, (int)t->nmeta);  // [info, meta]
  for (size_t i = 0; i < t->nmeta; i++) {
    const TpTraceMeta *m = &t->meta[i];
    lua_pushlstring(L, t->arena + m->key_at, m->key_len);
    lua_pushlstring(L, t->arena + m->at, m->len);
    lua_rawset(L, -3);
  }
  lua_setfield(L, -2, "meta");
  return 1;
}

// trace:names() -> { { name, kind, count, total, collective?, bytes, group? }, ... } (by id)
static int t_names(lua_State *L) {
  TpTrace *t = check_trace(L);
  luaL_checkstack(L, 4, NULL);
  lua_createtable(L, (int)(t->nnames > INT32_MAX ? INT32_MAX : t->nnames), 0);
  for (size_t i = 0; i < t->nnames; i++) {
    const TpTraceName *n = &t->names[i];
    lua_createtable(L, 0, 7);
    lua_pushlstring(L, t->arena + n->at, n->len);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, tp_trace_kind_names[n->kind]);
    lua_setfield(L, -2, "kind");
    set_int(L, "count", (lua_Integer)n->count);
    set_int(L, "total", n->total);
    set_int(L, "bytes", n->bytes);
    if (n->coll_at != SIZE_MAX) {
      lua_pushlstring(L, t->arena + n->coll_at, n->coll_len);
      lua_setfield(L, -2, "collective");
    }
    if (n->group > 0) {
      set_int(L, "group", n->group);
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

// trace:steps() -> { { step, cpu_ts, cpu_dur, dataloader, ops }, ... } in time order
static int t_steps(lua_State *L) {
  TpTrace *t = check_trace(L);
  lua_createtable(L, (int)(t->nsteps > INT32_MAX ? INT32_MAX : t->nsteps), 0);
  for (size_t i = 0; i < t->nsteps; i++) {
    const TpTraceStep *s = &t->steps[i];
    lua_createtable(L, 0, 5);
    set_int(L, "step", s->number);
    if (!t->stepless) {
      set_int(L, "cpu_ts", s->ts);
      set_int(L, "cpu_dur", s->dur);
    }
    set_int(L, "dataloader", s->dataloader);
    set_int(L, "ops", (lua_Integer)s->ops);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

// Reads array `idx` of n small integers in [lo, hi] into out (a userdata-owned buffer).
static void read_bytes(lua_State *L, int idx, uint8_t *out, size_t n, lua_Integer lo,
                       lua_Integer hi, const char *what) {
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i + 1);
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || v < lo || v > hi) {
      luaL_error(L, "breakdown: %s[%d] must be an integer in [%d, %d]", what, (int)i + 1, (int)lo,
                 (int)hi);
    }
    out[i] = (uint8_t)(v - lo);
  }
}

static const char *const class_kinds[] = {"compute", "communication", "memory", NULL};

typedef struct Scratch {
  TpTraceBreakdown b;
  uint8_t *class_of;
  bool used;
} Scratch;

static int scratch_gc(lua_State *L) {
  Scratch *s = lua_touserdata(L, 1);
  if (s->used) {
    tp_trace_breakdown_free(&s->b);
    s->used = false;
  }
  return 0;
}

// Pushes launch figures as a table.
static void push_launch(lua_State *L, const TpTraceLaunchStats *l) {
  lua_createtable(L, 0, 10);
  set_int(L, "count", (lua_Integer)l->count);
  set_int(L, "shorter", (lua_Integer)l->shorter);
  set_int(L, "cpu", l->cpu);
  set_int(L, "gpu", l->gpu);
  set_int(L, "delay_sum", l->delay_sum);
  if (l->count > 0) {
    set_int(L, "delay_min", l->delay_min);
    set_int(L, "delay_p50", l->delay_p50);
    set_int(L, "delay_p90", l->delay_p90);
    set_int(L, "delay_p99", l->delay_p99);
    set_int(L, "delay_max", l->delay_max);
  }
}

// Pushes a step's idle causes, launch figures, longest op and queues into the table on top.
static void push_idle(lua_State *L, const TpTraceBreakdown *b, const TpTraceStepTime *st) {
  lua_createtable(L, 0, TP_TRACE_CAUSES);  // [.., step, cause]
  for (int c = 0; c < TP_TRACE_CAUSES; c++) {
    set_int(L, cause_names[c], st->cause[c]);
  }
  lua_setfield(L, -2, "cause");
  push_launch(L, &st->launch);  // [.., step, launch]
  lua_setfield(L, -2, "launch");
  if (st->longest_name != UINT32_MAX) {
    lua_createtable(L, 0, 2);  // [.., step, longest]
    set_int(L, "dur", st->longest);
    set_int(L, "name", (lua_Integer)st->longest_name + 1);
    lua_setfield(L, -2, "longest");
  }
  lua_createtable(L, (int)b->nstreams, 0);  // [.., step, queue]
  for (size_t s = 0; st->queue && s < b->nstreams; s++) {
    const TpTraceQueueStat *q = &st->queue[s];
    lua_createtable(L, 0, 4);
    set_int(L, "stream", q->stream);
    set_int(L, "max", (lua_Integer)q->max);
    lua_pushnumber(L, q->mean);
    lua_setfield(L, -2, "mean");
    set_int(L, "empty", q->empty);
    lua_rawseti(L, -2, (lua_Integer)s + 1);
  }
  lua_setfield(L, -2, "queue");
}

// trace:breakdown(class_of, kinds[, opts]) -> { steps = {...}, whole = {...}, names = {...},
// hta_idle = {...}, gap } | nil, err, code. opts: { gap = ns } (the latency threshold)
static int t_breakdown(lua_State *L) {
  TpTrace *t = check_trace(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  TpTraceBreakdownOpts opts = {0};
  if (!lua_isnoneornil(L, 4)) {
    luaL_checktype(L, 4, LUA_TTABLE);
    lua_getfield(L, 4, "gap");
    if (!lua_isnil(L, -1)) {
      lua_Integer gap = luaL_checkinteger(L, -1);
      luaL_argcheck(L, gap > 0, 4, "gap must be a positive number of ns");
      opts.gap = gap;
    }
    lua_pop(L, 1);
  }
  lua_settop(L, 3);
  lua_Integer nclasses = luaL_len(L, 3);
  luaL_argcheck(L, nclasses >= 1 && nclasses <= TP_TRACE_MAX_CLASSES, 3,
                "between 1 and 64 class kinds");
  luaL_argcheck(L, (size_t)luaL_len(L, 2) == t->nnames, 2, "one class per name");
  uint8_t kinds[TP_TRACE_MAX_CLASSES];
  for (lua_Integer c = 0; c < nclasses; c++) {
    lua_rawgeti(L, 3, c + 1);
    kinds[c] = (uint8_t)luaL_checkoption(L, -1, NULL, class_kinds);
    lua_pop(L, 1);
  }
  // The class table and the result live in a userdata with __gc: a raise frees them.
  Scratch *s = lua_newuserdatauv(L, sizeof(Scratch), 0);  // [.., scratch]
  memset(s, 0, sizeof(*s));
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, scratch_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  uint8_t *class_of = lua_newuserdatauv(L, t->nnames + 1, 0);  // [.., scratch, class_of]
  read_bytes(L, 2, class_of, t->nnames, 1, nclasses, "class_of");
  TpError err = {0};
  if (tp_trace_breakdown_with(t, class_of, kinds, (size_t)nclasses, &opts, &s->b, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  s->used = true;
  const TpTraceBreakdown *b = &s->b;
  lua_createtable(L, 0, 3);               // [.., result]
  lua_createtable(L, (int)b->nsteps, 0);  // [.., result, steps]
  for (size_t k = 0; k < b->nsteps; k++) {
    const TpTraceStepTime *st = &b->steps[k];
    const TpTraceStep *cpu = &t->steps[st->step];
    lua_createtable(L, 0, 16);
    set_int(L, "step", cpu->number);
    set_int(L, "start", st->start);
    set_int(L, "window", st->window);
    set_int(L, "busy", st->busy);
    set_int(L, "idle", st->idle);
    set_int(L, "compute", st->compute);
    set_int(L, "non_compute", st->non_compute);
    set_int(L, "comm", st->comm);
    set_int(L, "comm_overlapped", st->comm_overlapped);
    set_int(L, "host_wait", st->host_wait);
    set_int(L, "ops", (lua_Integer)st->ops);
    set_int(L, "dataloader", cpu->dataloader);
    if (!t->stepless) {
      set_int(L, "cpu_step", cpu->dur);
    }
    lua_createtable(L, (int)nclasses, 0);  // [.., step, cls]
    for (lua_Integer c = 0; c < nclasses; c++) {
      const TpTraceClassTime *ct = &st->cls[c];
      lua_createtable(L, 0, 4);
      set_int(L, "count", (lua_Integer)ct->count);
      set_int(L, "sum", ct->sum);
      set_int(L, "time", ct->time);
      lua_pushnumber(L, ct->exclusive);
      lua_setfield(L, -2, "exclusive");
      lua_rawseti(L, -2, c + 1);
    }
    lua_setfield(L, -2, "class");
    push_idle(L, b, st);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  lua_setfield(L, -2, "steps");
  set_int(L, "gap", b->gap);
  push_launch(L, &b->launch);  // [.., result, launch]
  lua_setfield(L, -2, "launch");
  lua_createtable(L, (int)b->nstreams, 0);  // [.., result, hta_idle]
  for (size_t i = 0; b->hta_idle && i < b->nstreams; i++) {
    const TpTraceIdleStream *h = &b->hta_idle[i];
    lua_createtable(L, 0, 5);
    set_int(L, "stream", h->stream);
    set_int(L, "ops", (lua_Integer)h->ops);
    set_int(L, "host", h->host);
    set_int(L, "kernel", h->kernel);
    set_int(L, "other", h->other);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "hta_idle");
  lua_createtable(L, 0, 5);  // [.., result, whole]
  set_int(L, "span", b->whole.span);
  set_int(L, "idle", b->whole.idle);
  set_int(L, "compute", b->whole.compute);
  set_int(L, "non_compute", b->whole.non_compute);
  set_int(L, "ops", (lua_Integer)b->whole.ops);
  lua_createtable(L, 0, 4);  // [.., result, whole, rounded]
  set_int(L, "span", b->whole.rounded.span);
  set_int(L, "idle", b->whole.rounded.idle);
  set_int(L, "compute", b->whole.rounded.compute);
  set_int(L, "non_compute", b->whole.rounded.non_compute);
  set_int(L, "syncs", (lua_Integer)b->whole.rounded.syncs);
  lua_setfield(L, -2, "rounded");
  lua_setfield(L, -2, "whole");
  lua_createtable(L, (int)t->nnames, 0);  // [.., result, names]
  for (size_t i = 0; i < t->nnames; i++) {
    lua_createtable(L, 0, 2);
    set_int(L, "count", (lua_Integer)b->name_count[i]);
    set_int(L, "sum", b->name_sum[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "names");
  tp_trace_breakdown_free(&s->b);
  s->used = false;
  return 1;
}

static void set_text(lua_State *L, const TpTrace *t, const char *k, uint32_t id) {
  if (id) {
    size_t len = 0;
    const char *p = tp_trace_coll_text(t, id, &len);
    lua_pushlstring(L, p, len);
    lua_setfield(L, -2, k);
  }
}

static const char *const coll_sources[] = {"none", "kernel", "cpu"};

// trace:collectives() -> { { ts, dur, name, step?, stream, corr?, collective?, dtype?,
// dtype_size?, in_nelems?, out_nelems?, group?, seq?, rank?, pg?, pg_ranks?, source }, ... }
// (each NCCL/RCCL GPU op in read order; name: its name id (1-based); step: the profiler step
// number of its launch)
static int t_collectives(lua_State *L) {
  TpTrace *t = check_trace(L);
  size_t n = 0;
  const TpTraceColl *cs = tp_trace_collectives(t, &n);
  luaL_checkstack(L, 4, NULL);
  lua_createtable(L, (int)(n > INT32_MAX ? INT32_MAX : n), 0);
  for (size_t i = 0; i < n; i++) {
    const TpTraceColl *c = &cs[i];
    lua_createtable(L, 0, 17);
    set_int(L, "ts", c->ts);
    set_int(L, "dur", c->dur);
    set_int(L, "name", (lua_Integer)c->name + 1);
    set_int(L, "stream", c->stream);
    if (c->step != TP_TRACE_NO_STEP && c->step < t->nsteps) {
      set_int(L, "step", t->steps[c->step].number);
    }
    if (c->corr != UINT32_MAX) {
      set_int(L, "corr", (lua_Integer)c->corr);
    }
    set_text(L, t, "collective", c->coll);
    set_text(L, t, "dtype", c->dtype);
    set_text(L, t, "pg", c->pg);
    set_text(L, t, "pg_ranks", c->ranks);
    if (c->dtype_size) {
      set_int(L, "dtype_size", c->dtype_size);
    }
    if (c->in_nelems >= 0) {
      set_int(L, "in_nelems", c->in_nelems);
    }
    if (c->out_nelems >= 0) {
      set_int(L, "out_nelems", c->out_nelems);
    }
    if (c->group > 0) {
      set_int(L, "group", c->group);
    }
    if (c->seq >= 0) {
      set_int(L, "seq", c->seq);
    }
    if (c->rank >= 0) {
      set_int(L, "rank", c->rank);
    }
    lua_pushstring(L, coll_sources[c->source < 3 ? c->source : 0]);
    lua_setfield(L, -2, "source");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

static const char *const cpu_kinds[] = {"op", "annotation", "module"};
static const char *const arg_fields[TP_TRACE_OP_ARGS] = {"dims", "types", "strides", "concrete"};
static const char *const phase_names[TP_TRACE_PHASES] = {"forward", "backward", "optimizer"};

// trace:op_keys() -> { { name, kind, count, dims?, types?, strides?, concrete? }, ... } (by key
// id; the shape arguments as the JSON text the trace has)
static int t_op_keys(lua_State *L) {
  TpTrace *t = check_trace(L);
  luaL_checkstack(L, 4, NULL);
  lua_createtable(L, (int)(t->nkeys > INT32_MAX ? INT32_MAX : t->nkeys), 0);
  for (size_t i = 0; i < t->nkeys; i++) {
    const TpTraceOpKey *k = &t->keys[i];
    lua_createtable(L, 0, 8);
    lua_pushlstring(L, t->arena + k->at, k->len[0]);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, cpu_kinds[k->kind]);
    lua_setfield(L, -2, "kind");
    set_int(L, "count", (lua_Integer)k->count);
    if (k->phase != TP_TRACE_PHASE_FWD) {
      lua_pushstring(L, phase_names[k->phase]);
      lua_setfield(L, -2, "phase");
    }
    size_t at = k->at + k->len[0] + 1;
    for (int a = 0; a < TP_TRACE_OP_ARGS; a++) {
      if (k->has >> a & 1) {
        lua_pushlstring(L, t->arena + at, k->len[a + 1]);
        lua_setfield(L, -2, arg_fields[a]);
        at += k->len[a + 1] + 1;
      }
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

static const char *const mem_cats[TP_TRACE_MEM_CATS] = {
    "before", "temporary", "activation", "gradient", "autograd", "optimizer", "other"};

// Sets field `key` of the table on top to the profiler step number of step index `step`, when
// the trace has that step (a stepless trace numbers none).
static void set_step(lua_State *L, const TpTrace *t, const char *key, uint32_t step) {
  if (step != TP_TRACE_NO_STEP && step < t->nsteps && !t->stepless) {
    set_int(L, key, t->steps[step].number);
  }
}

// Sets where a peak was: peak_key (op key + 1, when one ran), peak_phase and, under `step_key`
// (NULL: not set), its step.
static void set_peak_at(lua_State *L, const TpTrace *t, uint32_t key, uint8_t phase,
                        const char *step_key, uint32_t step) {
  if (key) {
    set_int(L, "peak_key", (lua_Integer)key);
  }
  lua_pushstring(L, phase_names[phase < TP_TRACE_PHASES ? phase : 0]);
  lua_setfield(L, -2, "peak_phase");
  if (step_key) {
    set_step(L, t, step_key, step);
  }
}

// Pushes { forward =, backward =, optimizer = } of n-element int64 array v.
static void push_phases(lua_State *L, const int64_t *v) {
  lua_createtable(L, 0, TP_TRACE_PHASES);
  for (int p = 0; p < TP_TRACE_PHASES; p++) {
    set_int(L, phase_names[p], v[p]);
  }
}

// Pushes a device's curve as three arrays { ts = {...}, allocated = {...}, reserved = {...} }.
static void push_curve(lua_State *L, const TpTraceMemDevice *d) {
  int n = (int)(d->ncurve > INT32_MAX ? INT32_MAX : d->ncurve);
  lua_createtable(L, 0, 4);  // [.., curve]
  static const char *const fields[3] = {"ts", "allocated", "reserved"};
  for (int f = 0; f < 3; f++) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
      const TpTraceMemPoint *p = &d->curve[i];
      lua_pushinteger(L, f == 0 ? p->ts : f == 1 ? p->allocated : p->reserved);
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, fields[f]);
  }
  set_int(L, "stride", (lua_Integer)d->curve_stride);
}

// trace:memory() -> { events, skipped, other_devices, unattributed, late_ranges, late_steps,
// devices = {...}, steps = {...}, ops = {...} } (docs/memory.md; bytes, ns; key ids and device
// indices 1-based, steps by their number)
static int t_memory(lua_State *L) {
  TpTrace *t = check_trace(L);
  const TpTraceMem *m = tp_trace_memory(t);
  luaL_checkstack(L, 8, NULL);
  lua_createtable(L, 0, 9);  // [result]
  set_int(L, "events", (lua_Integer)m->events);
  set_int(L, "skipped", (lua_Integer)m->skipped);
  set_int(L, "other_devices", (lua_Integer)m->other_devices);
  set_int(L, "unattributed", (lua_Integer)m->unattributed);
  set_int(L, "late_ranges", (lua_Integer)m->late_ranges);
  set_int(L, "late_steps", (lua_Integer)m->late_steps);
  lua_createtable(L, (int)m->ndevices, 0);  // [result, devices]
  for (size_t i = 0; i < m->ndevices; i++) {
    const TpTraceMemDevice *d = &m->devices[i];
    lua_createtable(L, 0, 40);
    set_int(L, "type", d->type);
    set_int(L, "id", d->id);
    set_int(L, "events", (lua_Integer)d->events);
    set_int(L, "allocs", (lua_Integer)d->allocs);
    set_int(L, "frees", (lua_Integer)d->frees);
    set_int(L, "alloc_bytes", d->alloc_bytes);
    set_int(L, "free_bytes", d->free_bytes);
    set_int(L, "before", d->before);
    set_int(L, "first_ts", d->first_ts);
    set_int(L, "last_ts", d->last_ts);
    set_int(L, "peak", d->peak);
    set_int(L, "peak_ts", d->peak_ts);
    set_int(L, "peak_reserved", d->peak_reserved);
    set_peak_at(L, t, d->peak_key, d->peak_phase, "peak_step", d->peak_step);
    set_int(L, "reserved_max", d->reserved_max);
    set_int(L, "reserved_max_ts", d->reserved_max_ts);
    set_int(L, "slack_max", d->slack_max);
    set_int(L, "end_allocated", d->end_allocated);
    set_int(L, "end_reserved", d->end_reserved);
    set_int(L, "live_end", d->live_end);
    lua_createtable(L, 0, TP_TRACE_MEM_CATS);  // [.., device, at_peak]
    for (int c = 0; c < TP_TRACE_MEM_CATS; c++) {
      set_int(L, mem_cats[c], d->at_peak[c]);
    }
    lua_setfield(L, -2, "at_peak");
    lua_createtable(L, 0, TP_TRACE_MEM_CATS);  // [.., device, categories]
    for (int c = 0; c < TP_TRACE_MEM_CATS; c++) {
      if (c != TP_TRACE_MEM_BEFORE) {
        set_int(L, mem_cats[c], d->cat_bytes[c]);
      }
    }
    lua_setfield(L, -2, "categories");
    set_int(L, "unpaired_frees", (lua_Integer)d->unpaired_frees);
    set_int(L, "size_mismatch", (lua_Integer)d->size_mismatch);
    set_int(L, "realloc", (lua_Integer)d->realloc);
    set_int(L, "no_addr", (lua_Integer)d->no_addr);
    set_int(L, "derived_total", (lua_Integer)d->derived_total);
    set_int(L, "bad_total", (lua_Integer)d->bad_total);
    set_int(L, "no_reserved", (lua_Integer)d->no_reserved);
    set_int(L, "untracked", (lua_Integer)d->untracked);
    push_curve(L, d);
    lua_setfield(L, -2, "curve");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "devices");
  lua_createtable(L, (int)(m->nsteps > INT32_MAX ? INT32_MAX : m->nsteps), 0);  // [.., steps]
  for (size_t i = 0; i < m->nsteps; i++) {
    const TpTraceMemStep *st = &m->steps[i];
    lua_createtable(L, 0, 20);
    set_step(L, t, "step", st->step);
    set_int(L, "device", (lua_Integer)st->device + 1);
    set_int(L, "events", (lua_Integer)st->events);
    set_int(L, "allocs", (lua_Integer)st->allocs);
    set_int(L, "frees", (lua_Integer)st->frees);
    set_int(L, "alloc_bytes", st->alloc_bytes);
    set_int(L, "free_bytes", st->free_bytes);
    set_int(L, "start", st->start);
    set_int(L, "end", st->end);
    set_int(L, "peak", st->peak);
    set_int(L, "peak_ts", st->peak_ts);
    set_peak_at(L, t, st->peak_key, st->peak_phase, NULL, 0);
    push_phases(L, st->phase_peak);
    lua_setfield(L, -2, "phase_peak");
    push_phases(L, st->phase_bytes);
    lua_setfield(L, -2, "phase_bytes");
    set_int(L, "reserved_max", st->reserved_max);
    set_int(L, "held", st->held);
    set_int(L, "temporary", st->temporary);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "steps");
  lua_createtable(L, (int)(m->nops > INT32_MAX ? INT32_MAX : m->nops), 0);  // [.., ops]
  for (size_t i = 0; i < m->nops; i++) {
    const TpTraceMemOp *o = &m->ops[i];
    lua_createtable(L, 0, 11);
    if (o->key) {
      set_int(L, "key", (lua_Integer)o->key);
    }
    set_int(L, "device", (lua_Integer)o->device + 1);
    set_int(L, "allocs", (lua_Integer)o->allocs);
    set_int(L, "frees", (lua_Integer)o->frees);
    set_int(L, "bytes", o->bytes);
    set_int(L, "freed", o->freed);
    set_int(L, "temporary", o->temporary);
    set_int(L, "at_peak", o->at_peak);
    set_int(L, "live_end", o->live_end);
    lua_createtable(L, 0, TP_TRACE_PHASES);
    for (int p = 0; p < TP_TRACE_PHASES; p++) {
      set_int(L, phase_names[p], (lua_Integer)o->phase_allocs[p]);
    }
    lua_setfield(L, -2, "phase_allocs");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "ops");
  return 1;
}

typedef struct OpsScratch {
  TpTraceOps o;
  bool used;
} OpsScratch;

static int ops_scratch_gc(lua_State *L) {
  OpsScratch *s = lua_touserdata(L, 1);
  if (s->used) {
    tp_trace_ops_free(&s->o);
    s->used = false;
  }
  return 0;
}

// trace:ops(wanted[, step]) -> { stats = { [key id] = {...} }, kernels = { {...}, ... },
// linked, unlinked } | nil, err, code. wanted: one boolean per key; step: a profiler step number
// (ProfilerStep#N), nil for every step.
static int t_ops(lua_State *L) {
  TpTrace *t = check_trace(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_argcheck(L, (size_t)luaL_len(L, 2) == t->nkeys, 2, "one boolean per op key");
  uint32_t step = TP_TRACE_NO_STEP;
  if (!lua_isnoneornil(L, 3)) {
    lua_Integer number = luaL_checkinteger(L, 3);
    for (size_t i = 0; i < t->nsteps; i++) {
      if (t->steps[i].number == number) {
        step = (uint32_t)i;
        break;
      }
    }
    luaL_argcheck(L, step != TP_TRACE_NO_STEP, 3, "no such profiler step");
  }
  OpsScratch *s = lua_newuserdatauv(L, sizeof(OpsScratch), 0);  // [.., scratch]
  memset(s, 0, sizeof(*s));
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, ops_scratch_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  uint8_t *wanted = lua_newuserdatauv(L, t->nkeys + 1, 0);  // [.., scratch, wanted]
  for (size_t i = 0; i < t->nkeys; i++) {
    lua_rawgeti(L, 2, (lua_Integer)i + 1);
    wanted[i] = (uint8_t)lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  TpError err = {0};
  if (tp_trace_ops(t, wanted, step, &s->o, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  s->used = true;
  const TpTraceOps *o = &s->o;
  lua_createtable(L, 0, 4);  // [.., result]
  set_int(L, "linked", (lua_Integer)o->linked);
  set_int(L, "unlinked", (lua_Integer)o->unlinked);
  lua_newtable(L);  // [.., result, stats]
  for (size_t i = 0; i < o->nstats; i++) {
    const TpTraceOpStat *st = &o->stats[i];
    if (st->calls == 0 && st->own_ops == 0) {
      continue;
    }
    lua_createtable(L, 0, 14);
    set_int(L, "calls", (lua_Integer)st->calls);
    set_int(L, "ops", (lua_Integer)st->ops);
    set_int(L, "time", st->time);
    set_int(L, "min", st->min);
    set_int(L, "max", st->max);
    lua_pushnumber(L, st->time_sq);
    lua_setfield(L, -2, "time_sq");
    lua_pushnumber(L, st->inv);
    lua_setfield(L, -2, "inv");
    set_int(L, "own", st->own);
    set_int(L, "own_ops", (lua_Integer)st->own_ops);
    for (int p = 0; p < TP_TRACE_PHASES; p++) {
      set_int(L, phase_names[p], (lua_Integer)st->phase[p]);
    }
    for (int k = 0; k < TP_TRACE_KINDS; k++) {
      lua_pushfstring(L, "%s_sum", tp_trace_kind_names[k]);  // [.., stat, key]
      lua_pushinteger(L, st->kind_sum[k]);
      lua_rawset(L, -3);
    }
    if (st->module) {
      set_int(L, "module", (lua_Integer)st->module);
    }
    if (st->module_parent) {
      set_int(L, "module_parent", (lua_Integer)st->module_parent);
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "stats");
  lua_createtable(L, (int)(o->nkernels > INT32_MAX ? INT32_MAX : o->nkernels), 0);
  for (size_t i = 0; i < o->nkernels; i++) {
    const TpTraceOpKernel *k = &o->kernels[i];
    lua_createtable(L, 0, 4);
    set_int(L, "key", (lua_Integer)k->key + 1);
    set_int(L, "name", (lua_Integer)k->name + 1);
    set_int(L, "count", (lua_Integer)k->count);
    set_int(L, "total", k->total);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "kernels");
  tp_trace_ops_free(&s->o);
  s->used = false;
  return 1;
}

// trace:close() / __gc / __close: frees the trace; idempotent.
static int t_close(lua_State *L) {
  Box *b = luaL_checkudata(L, 1, TRACE_MT);
  TpTrace *t = b->t;
  b->t = NULL;
  tp_trace_free(t);
  return 0;
}

static int t_tostring(lua_State *L) {
  Box *b = luaL_checkudata(L, 1, TRACE_MT);
  if (b->t) {
    lua_pushfstring(L, "tp.Trace (%s, %d ops)", b->t->path, (int)b->t->nops);
  } else {
    lua_pushliteral(L, "tp.Trace (closed)");
  }
  return 1;
}

typedef struct TextScratch {
  TpBuf b;
} TextScratch;

static int text_scratch_gc(lua_State *L) {
  TextScratch *s = lua_touserdata(L, 1);
  tp_buf_free(&s->b);
  return 0;
}

// trace.read_text(path[, max]) -> string, truncated | nil, err, code: a whole file, plain or
// gzip (inflated), at most `max` bytes once inflated (default 1 GiB)
static int trace_read_text(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer max = luaL_optinteger(L, 2, (lua_Integer)1 << 30);
  luaL_argcheck(L, max > 0, 2, "max must be positive");
  TextScratch *s = lua_newuserdatauv(L, sizeof(TextScratch), 0);  // [.., scratch]
  memset(s, 0, sizeof(*s));
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, text_scratch_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  TpError err = {0};
  bool truncated = false;
  if (tp_trace_read_text(path, (size_t)max, &s->b, &truncated, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushlstring(L, s->b.data ? s->b.data : "", s->b.len);
  lua_pushboolean(L, truncated);
  tp_buf_free(&s->b);
  return 2;
}

int luaopen_tp__trace(lua_State *L);
int luaopen_tp__trace(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"breakdown", t_breakdown}, {"collectives", t_collectives},
      {"close", t_close},         {"info", t_info},
      {"memory", t_memory},       {"names", t_names},
      {"op_keys", t_op_keys},     {"ops", t_ops},
      {"steps", t_steps},         {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
      {"__close", t_close},
      {"__gc", t_close},
      {"__tostring", t_tostring},
      {NULL, NULL},
  };
  tpl_newclass(L, TRACE_MT, methods, meta);
  static const luaL_Reg funcs[] = {
      {"open", trace_open},
      {"read_text", trace_read_text},
      {NULL, NULL},
  };
  luaL_newlib(L, funcs);
  return 1;
}
