// libFuzzer target for engine/trace: the input is a profiler trace (plain JSON or gzip) read from
// memory. A refusal must be one of the reader's codes with a message naming the input; an
// accepted trace must be consistent (names, steps, counts), and its breakdown, with name id % 3
// picking the class (compute, communication, memory), must fill each window exactly: the
// classes' exclusive time plus idle is the window. A second breakdown gives the same figures.
// The CPU side: op keys within the arena, and the op figures (key id % 2 wanted) consistent:
// each linked GPU op has one owner, calls have ops, per-call times in order; twice the same.
// The memory side ([memory] events): every event counted once, per device the peak the highest
// point of its curve (in time order, bounded), the peak's categories adding up to it, the steps'
// and the ops' figures adding up to the device's.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// a + b, or INT64_MAX past it (as the engine sums sizes).
static int64_t tp_trace_add_capped_(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

#define REQUIRE(c)                                                                                 \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static void count_cat(const char *cat, size_t len, uint64_t count, void *ud) {
  REQUIRE(cat != NULL && strlen(cat) == len && count > 0);
  *(uint64_t *)ud += count;
}

static void check_breakdown(const TpTrace *t, const TpTraceBreakdown *b) {
  REQUIRE(b->nclasses == 3 && b->nsteps <= t->nsteps);
  for (size_t k = 0; k < b->nsteps; k++) {
    const TpTraceStepTime *st = &b->steps[k];
    REQUIRE(st->step < t->nsteps);
    REQUIRE(st->window >= 0 && st->busy >= 0 && st->busy <= st->window);
    REQUIRE(st->idle == st->window - st->busy);
    REQUIRE(st->compute >= 0 && st->compute <= st->busy);
    REQUIRE(st->non_compute == st->busy - st->compute);
    REQUIRE(st->comm >= 0 && st->comm <= st->busy);
    REQUIRE(st->comm_overlapped >= 0 && st->comm_overlapped <= st->comm);
    REQUIRE(st->comm_overlapped <= st->compute);
    REQUIRE(st->host_wait >= 0 && st->host_wait <= st->idle);
    REQUIRE(st->ops == t->steps[st->step].ops);
    double excl = 0;
    uint64_t count = 0;
    for (size_t c = 0; c < b->nclasses; c++) {
      const TpTraceClassTime *ct = &st->cls[c];
      REQUIRE(ct->time >= 0 && ct->time <= st->busy && ct->sum >= 0);
      REQUIRE(ct->exclusive >= 0 && ct->exclusive <= (double)ct->time * (1 + 1e-9) + 1e-6);
      excl += ct->exclusive;
      count += ct->count;
    }
    REQUIRE(count == st->ops);
    // Idle per cause adds up to idle; launch figures and queues stay in range.
    int64_t causes = 0;
    for (int c = 0; c < TP_TRACE_CAUSES; c++) {
      REQUIRE(st->cause[c] >= 0 && st->cause[c] <= st->idle);
      causes += st->cause[c];
    }
    REQUIRE(causes == st->idle);
    REQUIRE(st->launch.shorter <= st->launch.count && st->launch.count <= st->ops);
    REQUIRE(st->launch.count == 0 || (st->launch.delay_min <= st->launch.delay_p50 &&
                                      st->launch.delay_p50 <= st->launch.delay_p90 &&
                                      st->launch.delay_p90 <= st->launch.delay_p99 &&
                                      st->launch.delay_p99 <= st->launch.delay_max));
    REQUIRE(st->longest_name == UINT32_MAX ? st->ops == 0 : st->longest_name < t->nnames);
    for (size_t q = 0; st->queue && q < b->nstreams; q++) {
      REQUIRE(st->queue[q].empty >= 0 && st->queue[q].empty <= st->window);
      REQUIRE(st->queue[q].mean >= 0 && (st->queue[q].max > 0 || st->queue[q].mean == 0));
    }
    REQUIRE(fabs(excl + (double)st->idle - (double)st->window) <=
            1e-9 * (double)st->window + 1e-6 * (double)(st->ops + 1));
  }
  REQUIRE(b->whole.ops <= t->nops && b->whole.span >= 0);
  REQUIRE(b->whole.idle >= 0 && b->whole.idle <= b->whole.span);
  REQUIRE(b->whole.compute >= 0 && b->whole.non_compute >= 0);
  REQUIRE(b->whole.compute + b->whole.non_compute + b->whole.idle == b->whole.span);
  uint64_t hta_ops = 0;
  for (size_t q = 0; q < b->nstreams; q++) {
    hta_ops += b->hta_idle[q].ops;
  }
  REQUIRE(hta_ops == b->whole.ops);  // HTA's idle breakdown takes the ops of its whole view
  REQUIRE(b->gap > 0);
  uint64_t assigned = 0;
  for (size_t i = 0; i < t->nnames; i++) {
    REQUIRE(b->name_count[i] <= t->names[i].count && b->name_sum[i] >= 0);
    assigned += b->name_count[i];
  }
  REQUIRE(assigned == t->nops - t->unassigned);
}

static void check_ops(const TpTrace *t, const TpTraceOps *o, uint32_t step) {
  REQUIRE(o->nstats == t->nkeys);
  uint64_t in_step = 0, linked = 0, owned = 0;
  int64_t dur = 0, own = 0;
  for (size_t i = 0; i < t->nops; i++) {
    if (step == TP_TRACE_NO_STEP || t->ops[i].step == step) {
      in_step++;
      if (t->ops[i].cpu != TP_TRACE_NO_CPU) {
        linked++;
        dur += tp_trace_op_dur(t, i);
      }
    }
  }
  REQUIRE(o->linked == linked && o->linked + o->unlinked == in_step);
  for (size_t k = 0; k < o->nstats; k++) {
    const TpTraceOpStat *st = &o->stats[k];
    REQUIRE(st->ops >= st->calls && st->time >= 0 && st->own >= 0);
    REQUIRE(st->calls == 0 || (st->min >= 0 && st->min <= st->max && st->max <= st->time));
    REQUIRE(st->phase[0] + st->phase[1] + st->phase[2] == st->calls);
    REQUIRE(st->module <= t->nkeys && st->module_parent <= t->nkeys);
    owned += st->own_ops;
    own += st->own;
  }
  REQUIRE(owned == linked);
  REQUIRE(own == dur || dur < 0 || own == INT64_MAX);
  uint64_t pairs = 0;
  for (size_t i = 0; i < o->nkernels; i++) {
    REQUIRE(o->kernels[i].key < t->nkeys && o->kernels[i].name < t->nnames);
    REQUIRE(o->kernels[i].count > 0);
    pairs += o->kernels[i].count;
  }
  REQUIRE(pairs == linked);
}

static void check_cpu(TpTrace *t) {
  REQUIRE(t->linked <= t->nops);
  for (size_t k = 0; k < t->nkeys; k++) {
    const TpTraceOpKey *key = &t->keys[k];
    size_t end = key->at + key->len[0] + 1;
    for (int a = 0; a < TP_TRACE_OP_ARGS; a++) {
      if (key->has >> a & 1) {
        end += key->len[a + 1] + 1;
      }
    }
    REQUIRE(end <= t->arena_len && key->kind < TP_TRACE_CPU_KINDS && key->count > 0);
    REQUIRE(key->phase < TP_TRACE_PHASES);
  }
  uint8_t *wanted = malloc(t->nkeys + 1);
  for (size_t k = 0; k < t->nkeys; k++) {
    wanted[k] = (uint8_t)(k % 2);
  }
  TpError err = {0};
  TpTraceOps o, again;
  REQUIRE(tp_trace_ops(t, wanted, TP_TRACE_NO_STEP, &o, &err) == 0);
  check_ops(t, &o, TP_TRACE_NO_STEP);
  REQUIRE(tp_trace_ops(t, wanted, TP_TRACE_NO_STEP, &again, &err) == 0);
  REQUIRE(o.nkernels == again.nkernels);
  REQUIRE(memcmp(o.stats, again.stats, o.nstats * sizeof(TpTraceOpStat)) == 0);
  tp_trace_ops_free(&o);
  tp_trace_ops_free(&again);
  if (t->nsteps > 0) {
    REQUIRE(tp_trace_ops(t, wanted, 0, &o, &err) == 0);
    check_ops(t, &o, 0);
    tp_trace_ops_free(&o);
  }
  free(wanted);
}

// The collectives' side array: each entry an NCCL/RCCL op or one with a collective's args, its
// name and step in range, its texts within the arena, counts -1 or more, a source it can have.
static void check_collectives(const TpTrace *t) {
  size_t n = 0;
  const TpTraceColl *c = tp_trace_collectives(t, &n);
  REQUIRE(n <= t->nops && (n == 0 || c != NULL));
  for (size_t i = 0; i < n; i++) {
    REQUIRE(c[i].name < t->nnames && c[i].dur >= 0);
    REQUIRE(c[i].step == TP_TRACE_NO_STEP || c[i].step < t->nsteps);
    REQUIRE(c[i].in_nelems >= -1 && c[i].out_nelems >= -1 && c[i].seq >= -1 && c[i].rank >= -1);
    REQUIRE(c[i].group >= 0 && c[i].source <= TP_TRACE_COLL_CPU);
    REQUIRE(c[i].source != TP_TRACE_COLL_NONE || (c[i].coll == 0 && c[i].in_nelems == -1));
    const uint32_t ids[4] = {c[i].coll, c[i].dtype, c[i].pg, c[i].ranks};
    for (int k = 0; k < 4; k++) {
      size_t len = 99;
      const char *p = tp_trace_coll_text(t, ids[k], &len);
      REQUIRE(p != NULL && (ids[k] != 0 || len == 0));
      REQUIRE(ids[k] == 0 || (p >= t->arena && p + len < t->arena + t->arena_len));
    }
  }
}

static void check_memory(const TpTrace *t) {
  const TpTraceMem *m = tp_trace_memory(t);
  REQUIRE(m->ndevices <= TP_TRACE_MEM_DEVICES);
  uint64_t events = m->skipped + m->other_devices;
  for (size_t d = 0; d < m->ndevices; d++) {
    const TpTraceMemDevice *dv = &m->devices[d];
    events += dv->events;
    REQUIRE(dv->events > 0 && dv->allocs + dv->frees <= dv->events);
    REQUIRE(dv->peak >= 0 && dv->reserved_max >= 0 && dv->live_end >= 0);
    REQUIRE(dv->peak_key <= t->nkeys && dv->peak_phase < TP_TRACE_PHASES);
    REQUIRE(dv->peak_step == TP_TRACE_NO_STEP || dv->peak_step < t->nsteps);
    REQUIRE(dv->ncurve > 0 && dv->ncurve <= 2 * 4096 && dv->curve_stride >= 1);
    int64_t top = INT64_MIN, tracked = 0, sum = 0;
    for (size_t i = 0; i < dv->ncurve; i++) {
      REQUIRE(i == 0 || dv->curve[i - 1].ts <= dv->curve[i].ts);
      top = dv->curve[i].allocated > top ? dv->curve[i].allocated : top;
    }
    REQUIRE(top == dv->peak);
    for (int c = 0; c < TP_TRACE_MEM_CATS; c++) {
      REQUIRE(dv->at_peak[c] >= 0 && dv->cat_bytes[c] >= 0);
      tracked += c == TP_TRACE_MEM_BEFORE ? 0 : dv->at_peak[c];
      sum += dv->at_peak[c];
    }
    REQUIRE(tracked > dv->peak || sum == dv->peak);
    uint64_t step_events = 0, step_allocs = 0;
    for (size_t i = 0; i < m->nsteps; i++) {
      const TpTraceMemStep *st = &m->steps[i];
      REQUIRE(st->device < m->ndevices);
      REQUIRE(st->step == TP_TRACE_NO_STEP || st->step < t->nsteps);
      REQUIRE(i == 0 || m->steps[i - 1].step <= st->step);
      if (st->device == d) {
        step_events += st->events;
        step_allocs += st->allocs;
        REQUIRE(st->held >= 0 && st->temporary >= 0 && st->peak >= 0);
        REQUIRE(st->alloc_bytes == INT64_MAX || st->held <= st->alloc_bytes);
      }
    }
    REQUIRE(step_events == dv->events && step_allocs == dv->allocs);
    int64_t op_bytes = 0;
    uint64_t op_allocs = 0;
    for (size_t i = 0; i < m->nops; i++) {
      const TpTraceMemOp *o = &m->ops[i];
      REQUIRE(o->device < m->ndevices && o->key <= t->nkeys);
      if (o->device == d) {
        op_bytes = tp_trace_add_capped_(op_bytes, o->bytes);
        op_allocs += o->allocs;
        REQUIRE(o->at_peak >= 0 && o->live_end >= 0 && o->temporary >= 0);
      }
    }
    REQUIRE(op_allocs == dv->allocs);
    REQUIRE(op_bytes == dv->alloc_bytes || dv->alloc_bytes == INT64_MAX);
  }
  REQUIRE(events == m->events);
}

static bool same_breakdown(const TpTraceBreakdown *a, const TpTraceBreakdown *b, size_t nnames) {
  if (a->nsteps != b->nsteps || memcmp(&a->whole, &b->whole, sizeof(a->whole)) != 0) {
    return false;
  }
  for (size_t k = 0; k < a->nsteps; k++) {
    const TpTraceStepTime *x = &a->steps[k], *y = &b->steps[k];
    if (x->step != y->step || x->start != y->start || x->window != y->window ||
        x->busy != y->busy || x->compute != y->compute || x->comm != y->comm ||
        x->comm_overlapped != y->comm_overlapped || x->host_wait != y->host_wait) {
      return false;
    }
    for (size_t c = 0; c < a->nclasses; c++) {
      if (x->cls[c].count != y->cls[c].count || x->cls[c].sum != y->cls[c].sum ||
          x->cls[c].time != y->cls[c].time || x->cls[c].exclusive != y->cls[c].exclusive) {
        return false;
      }
    }
  }
  return memcmp(a->name_count, b->name_count, nnames * sizeof(uint64_t)) == 0 &&
         memcmp(a->name_sum, b->name_sum, nnames * sizeof(int64_t)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The input in a block of its own size, so that an overread is caught.
  uint8_t *copy = malloc(size ? size : 1);
  memcpy(copy, data, size);
  TpTrace *t = NULL;
  TpError err = {0};
  int rc = tp_trace_read_mem("fuzz", copy, size, &t, &err);
  if (rc != 0) {
    REQUIRE(rc == TP_EPARSE || rc == TP_ELIMIT || rc == TP_ENOMEM);
    REQUIRE(t == NULL && err.code == rc && strncmp(err.msg, "fuzz: ", 6) == 0);
    free(copy);
    return 0;
  }
  REQUIRE(t != NULL && t->bytes > 0);
  REQUIRE(t->warnings > 0 ? t->warning[0] != '\0' : t->warning[0] == '\0');
  REQUIRE(!t->truncated || t->warnings > 0);
  REQUIRE(t->events >=
          t->flows + t->ignored + t->bad + t->nops + t->launches + (t->stepless ? 0 : t->nsteps));
  uint64_t cats = 0;
  tp_trace_categories(t, count_cat, &cats);
  REQUIRE(cats <= t->events);
  uint64_t named = 0, in_steps = 0;
  for (size_t i = 0; i < t->nnames; i++) {
    REQUIRE(t->names[i].at + t->names[i].len < t->arena_len);
    REQUIRE(t->names[i].kind < TP_TRACE_KINDS && t->names[i].count > 0);
    REQUIRE(t->names[i].total >= 0 && t->names[i].bytes >= 0);
    named += t->names[i].count;
  }
  REQUIRE(named == t->nops);
  for (size_t i = 0; i < t->nsteps; i++) {
    REQUIRE(t->steps[i].dur >= 0 && t->steps[i].dataloader >= 0);
    REQUIRE(i == 0 || t->steps[i - 1].ts <= t->steps[i].ts);
    in_steps += t->steps[i].ops;
  }
  REQUIRE(in_steps + t->unassigned == t->nops);
  REQUIRE(!t->stepless || (t->nsteps == 1 && t->unassigned == 0));
  for (size_t i = 0; i < t->nops; i++) {
    const TpTraceOp *op = &t->ops[i];
    REQUIRE(op->name < t->nnames && op->kind < TP_TRACE_KINDS);
    REQUIRE(op->step == TP_TRACE_NO_STEP || op->step < t->nsteps);
    REQUIRE(tp_trace_op_dur(t, i) >= 0);
  }
  for (size_t i = 0; i < t->nmeta; i++) {
    REQUIRE(t->meta[i].key_at + t->meta[i].key_len < t->arena_len);
    REQUIRE(t->meta[i].at + t->meta[i].len < t->arena_len);
  }
  uint8_t *class_of = malloc(t->nnames + 1);
  for (size_t i = 0; i < t->nnames; i++) {
    class_of[i] = (uint8_t)(i % 3);
  }
  static const uint8_t kinds[3] = {TP_TRACE_COMPUTE, TP_TRACE_COMMUNICATION, TP_TRACE_MEMORY};
  TpTraceBreakdown b, again;
  REQUIRE(tp_trace_breakdown(t, class_of, kinds, 3, &b, &err) == 0);
  check_breakdown(t, &b);
  REQUIRE(tp_trace_breakdown(t, class_of, kinds, 3, &again, &err) == 0);
  REQUIRE(same_breakdown(&b, &again, t->nnames));
  tp_trace_breakdown_free(&b);
  tp_trace_breakdown_free(&again);
  free(class_of);
  check_cpu(t);
  check_collectives(t);
  check_memory(t);
  tp_trace_free(t);
  free(copy);
  return 0;
}
