// Unit tests of engine/trace: a hand-made trace whose every figure is worked out by hand (steps,
// launches, windows, classes, overlap, host wait, HTA's whole view), number forms, malformed and
// cut input, gzip in memory and through the reader thread, chunk boundaries at every byte of an
// event, a large generated trace, and traces with no ProfilerStep.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "trace.h"
#include "trace_check.h"

// Two ProfilerSteps on the CPU, [100, 200) and [200, 300) us. GPU ops (us, file order is not
// time order): relu [305, 315) launched at 260 (ends 300: host wait), gemm [150, 180), nccl
// [160, 240) on stream 13 (crosses into step 2's window), memcpy [185, 190), orphan [200, 210)
// (no launch), gemm [230, 250), memset [250, 252), gemm [270, 275) (launched at 225, long before
// the gap before it), late [400, 401) (launched at 50, before every step). The GPU's own copy of
// ProfilerStep#2 (gpu_user_annotation) is not a step.
static const char hand[] =
    "{\n"
    "  \"schemaVersion\": 1,\n"
    "  \"deviceProperties\": [{\"id\": 0, \"name\": \"Fake GPU\"}],\n"
    "  \"traceEvents\": [\n"
    "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, "
    "\"tid\": 1, \"ts\": 100, \"dur\": 100},\n"
    "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#2\", \"pid\": 1, "
    "\"tid\": 1, \"ts\": 200, \"dur\": 100},\n"
    "  {\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#2\", \"pid\": 0, "
    "\"tid\": 7, \"ts\": 230, \"dur\": 85},\n"
    "  {\"ph\": \"X\", \"cat\": \"user_annotation\", "
    "\"name\": \"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__\", \"ts\": 101, "
    "\"dur\": 4},\n"
    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"ts\": 109, \"dur\": 10, "
    "\"args\": {\"External id\": 3, \"Input Dims\": [[64, 64], [64, 64]]}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 110, "
    "\"dur\": 5, \"args\": {\"correlation\": 1}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_driver\", \"name\": \"cuLaunchKernel\", \"ts\": 120, "
    "\"dur\": 5, \"args\": {\"correlation\": 2}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaMemcpyAsync\", \"ts\": 130, "
    "\"dur\": 2, \"args\": {\"correlation\": 3}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 205, "
    "\"dur\": 3, \"args\": {\"correlation\": 4}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaMemsetAsync\", \"ts\": 220, "
    "\"dur\": 3, \"args\": {\"correlation\": 5}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 225, "
    "\"dur\": 2, \"args\": {\"correlation\": 8}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 260, "
    "\"dur\": 40, \"args\": {\"correlation\": 6}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": 50, "
    "\"dur\": 1, \"args\": {\"correlation\": 9}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaDeviceSynchronize\", "
    "\"ts\": 290, \"dur\": 5, \"args\": {}},\n"
    "  {\"ph\": \"s\", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 110, \"cat\": \"ac2g\", "
    "\"name\": \"ac2g\"},\n"
    "  {\"ph\": \"f\", \"id\": 1, \"pid\": 0, \"tid\": 7, \"ts\": 150, \"cat\": \"ac2g\", "
    "\"name\": \"ac2g\", \"bp\": \"e\"},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"relu_kernel\", \"pid\": 0, \"tid\": 7, "
    "\"ts\": 305, \"dur\": 10, \"args\": {\"stream\": 7, \"correlation\": 6}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_kernel\", \"pid\": 0, \"tid\": 7, "
    "\"ts\": 150, \"dur\": 30, \"args\": {\"stream\": 7, \"correlation\": 1}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
    "\"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)\", "
    "\"pid\": 0, \"tid\": 13, \"ts\": 160, \"dur\": 80, \"args\": {\"stream\": 13, "
    "\"correlation\": 2, \"Collective name\": \"allreduce\", \"In msg nelems\": 1048576, "
    "\"Out msg nelems\": 1048576, \"dtype\": \"Float\", \"Group size\": 8, "
    "\"Process Group Ranks\": \"[0, 1, 2, 3, 4, 5, 6, 7]\"}},\n"
    "  {\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD (Pageable -> Device)\", "
    "\"ts\": 185, \"dur\": 5, \"args\": {\"stream\": 7, \"correlation\": 3}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"orphan_kernel\", \"ts\": 200, \"dur\": 10, "
    "\"args\": {\"stream\": 7}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_kernel\", \"ts\": 230, \"dur\": 20, "
    "\"args\": {\"stream\": 7, \"correlation\": 4}},\n"
    "  {\"ph\": \"X\", \"cat\": \"gpu_memset\", \"name\": \"Memset (Device)\", \"ts\": 250, "
    "\"dur\": 2, \"args\": {\"stream\": 7, \"correlation\": 5}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_kernel\", \"ts\": 270, \"dur\": 5, "
    "\"args\": {\"stream\": 7, \"correlation\": 8}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"late_kernel\", \"ts\": 400, \"dur\": 1, "
    "\"args\": {\"stream\": 7, \"correlation\": 9}},\n"
    "  {\"ph\": \"i\", \"cat\": \"\", \"name\": \"marker\", \"ts\": 150, \"s\": \"g\"},\n"
    "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"python\"}},\n"
    "  {\"ph\": \"Q\", \"name\": \"a phase nobody writes\"}\n"
    "  ],\n"
    "  \"traceName\": \"hand.json\"\n"
    "}\n";

static const char nccl_name[] =
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";

// --- helpers ---------------------------------------------------------------------------------

static TpTrace *read_str(const char *label, const char *s) {
  return read_mem(label, s, strlen(s));
}

static void check_fails_str(const char *label, const char *s, int code, const char *want) {
  check_fails(label, s, strlen(s), code, want);
}

// The id of a GPU op name, or UINT32_MAX.
static uint32_t name_id(const TpTrace *t, const char *name) {
  for (size_t i = 0; i < t->nnames; i++) {
    if (t->names[i].len == strlen(name) && memcmp(name_of(t, i), name, strlen(name)) == 0) {
      return (uint32_t)i;
    }
  }
  return UINT32_MAX;
}

// The index of the first op starting at `ts` ns, or SIZE_MAX.
static size_t op_at(const TpTrace *t, int64_t ts) {
  for (size_t i = 0; i < t->nops; i++) {
    if (t->ops[i].ts == ts) {
      return i;
    }
  }
  return SIZE_MAX;
}

static const uint8_t kinds3[3] = {TP_TRACE_COMPUTE, TP_TRACE_COMMUNICATION, TP_TRACE_MEMORY};

// Breaks t down with three classes: 0 compute (kernels), 1 communication (kernels whose name
// starts with "nccl"), 2 memory (memcpy, memset). Returns tp_trace_breakdown's code.
static int breakdown3(TpTrace *t, TpTraceBreakdown *b) {
  uint8_t *class_of = malloc(t->nnames + 1);
  for (size_t i = 0; i < t->nnames; i++) {
    class_of[i] = t->names[i].kind != TP_TRACE_KERNEL      ? 2
                  : strncmp(name_of(t, i), "nccl", 4) == 0 ? 1
                                                           : 0;
  }
  TpError err = {0};
  int rc = tp_trace_breakdown(t, class_of, kinds3, 3, b, &err);
  CHECK_REPORT_(rc == 0, "breakdown: %d %s", rc, err.msg);
  free(class_of);
  return rc;
}

// gzip of p[0, n) at `level` (deflate with the gzip wrapper, windowBits 15 + 16: compress2
// writes the zlib wrapper instead). Caller frees.
static unsigned char *gzip(const void *p, size_t n, int level, size_t *len) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  *len = 0;
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    CHECK(!"deflateInit2");
    return NULL;
  }
  size_t cap = deflateBound(&z, (uLong)n) + 64;
  unsigned char *out = malloc(cap);
  z.next_in = (Bytef *)p;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  CHECK_INT(deflate(&z, Z_FINISH), Z_STREAM_END);
  *len = z.total_out;
  deflateEnd(&z);
  return out;
}

static bool same_text(const TpTrace *a, size_t at_a, const TpTrace *b, size_t at_b, size_t n) {
  return memcmp(a->arena + at_a, b->arena + at_b, n) == 0;
}

// a and b (read from the same JSON by different paths) hold the same ops, names, steps and meta.
static void check_same(const TpTrace *a, const TpTrace *b, const char *what) {
  if (!a || !b) {
    CHECK_REPORT_(false, "%s: no trace", what);
    return;
  }
  CHECK_REPORT_(a->events == b->events && a->launches == b->launches && a->flows == b->flows &&
                    a->ignored == b->ignored && a->bad == b->bad &&
                    a->unassigned == b->unassigned && a->nops == b->nops &&
                    a->nnames == b->nnames && a->nsteps == b->nsteps && a->nmeta == b->nmeta &&
                    a->stepless == b->stepless && a->warnings == b->warnings,
                "%s: counts differ (events %llu/%llu, ops %zu/%zu, names %zu/%zu)", what,
                (unsigned long long)a->events, (unsigned long long)b->events, a->nops, b->nops,
                a->nnames, b->nnames);
  if (a->nops != b->nops || a->nnames != b->nnames || a->nsteps != b->nsteps ||
      a->nmeta != b->nmeta) {
    return;
  }
  size_t differ = 0;
  for (size_t i = 0; i < a->nops; i++) {
    const TpTraceOp *x = &a->ops[i], *y = &b->ops[i];
    differ += x->ts != y->ts || tp_trace_op_dur(a, i) != tp_trace_op_dur(b, i) ||
              x->name != y->name || x->corr != y->corr || x->step != y->step ||
              x->stream != y->stream || x->kind != y->kind;
  }
  for (size_t i = 0; i < a->nnames; i++) {
    const TpTraceName *x = &a->names[i], *y = &b->names[i];
    differ += x->len != y->len || !same_text(a, x->at, b, y->at, x->len) || x->kind != y->kind ||
              x->count != y->count || x->total != y->total || x->bytes != y->bytes ||
              x->group != y->group || (x->coll_at == SIZE_MAX) != (y->coll_at == SIZE_MAX) ||
              x->coll_len != y->coll_len ||
              (x->coll_at != SIZE_MAX && !same_text(a, x->coll_at, b, y->coll_at, x->coll_len));
  }
  for (size_t i = 0; i < a->nsteps; i++) {
    const TpTraceStep *x = &a->steps[i], *y = &b->steps[i];
    differ += x->number != y->number || x->ts != y->ts || x->dur != y->dur ||
              x->dataloader != y->dataloader || x->ops != y->ops;
  }
  for (size_t i = 0; i < a->nmeta; i++) {
    const TpTraceMeta *x = &a->meta[i], *y = &b->meta[i];
    differ += x->key_len != y->key_len || x->len != y->len ||
              !same_text(a, x->key_at, b, y->key_at, x->key_len) ||
              !same_text(a, x->at, b, y->at, x->len);
  }
  CHECK_REPORT_(differ == 0, "%s: %zu ops, names, steps or meta differ", what, differ);
}

// Two breakdowns of traces read from the same JSON are equal.
static void check_same_breakdown(const TpTraceBreakdown *a, const TpTraceBreakdown *b,
                                 size_t nnames, const char *what) {
  CHECK_REPORT_(a->nsteps == b->nsteps && a->nclasses == b->nclasses, "%s: shapes differ", what);
  if (a->nsteps != b->nsteps || a->nclasses != b->nclasses) {
    return;
  }
  size_t differ = 0;
  for (size_t k = 0; k < a->nsteps; k++) {
    const TpTraceStepTime *x = &a->steps[k], *y = &b->steps[k];
    differ += x->step != y->step || x->start != y->start || x->window != y->window ||
              x->busy != y->busy || x->idle != y->idle || x->compute != y->compute ||
              x->non_compute != y->non_compute || x->comm != y->comm ||
              x->comm_overlapped != y->comm_overlapped || x->host_wait != y->host_wait ||
              x->ops != y->ops;
    for (size_t c = 0; c < a->nclasses; c++) {
      differ += x->cls[c].count != y->cls[c].count || x->cls[c].sum != y->cls[c].sum ||
                x->cls[c].time != y->cls[c].time || x->cls[c].exclusive != y->cls[c].exclusive;
    }
  }
  differ += a->whole.span != b->whole.span || a->whole.idle != b->whole.idle ||
            a->whole.compute != b->whole.compute || a->whole.non_compute != b->whole.non_compute ||
            a->whole.ops != b->whole.ops || a->whole.rounded.span != b->whole.rounded.span ||
            a->whole.rounded.idle != b->whole.rounded.idle ||
            a->whole.rounded.compute != b->whole.rounded.compute ||
            a->whole.rounded.non_compute != b->whole.rounded.non_compute;
  for (size_t i = 0; i < nnames; i++) {
    differ += a->name_count[i] != b->name_count[i] || a->name_sum[i] != b->name_sum[i];
  }
  CHECK_REPORT_(differ == 0, "%s: %zu figures differ", what, differ);
}

// Each window: exclusive times plus idle fill it; busy, compute, comm within bounds.
static void check_windows_add_up(const TpTraceBreakdown *b, const char *what) {
  for (size_t k = 0; k < b->nsteps; k++) {
    const TpTraceStepTime *st = &b->steps[k];
    double excl = 0;
    for (size_t c = 0; c < b->nclasses; c++) {
      excl += st->cls[c].exclusive;
    }
    CHECK_REPORT_(fabs(excl + (double)st->idle - (double)st->window) <= 1e-6 * (double)st->window,
                  "%s: window %zu: exclusive %.3f + idle %lld != %lld", what, k, excl,
                  (long long)st->idle, (long long)st->window);
    CHECK_REPORT_(st->busy + st->idle == st->window && st->compute + st->non_compute == st->busy &&
                      st->comm_overlapped <= st->comm && st->comm <= st->busy &&
                      st->host_wait <= st->idle,
                  "%s: window %zu: figures out of bounds", what, k);
  }
}

// --- the hand-made trace ---------------------------------------------------------------------

// What the reader keeps of `hand`: counts, names, ops, steps, meta.
static void check_hand_read(const TpTrace *t, const char *what) {
  if (!t) {
    CHECK_REPORT_(false, "%s: no trace", what);
    return;
  }
  CHECK_INT(t->bytes, strlen(hand));
  CHECK_INT(t->events, 28);
  CHECK_INT(t->nops, 9);
  CHECK_INT(t->nnames, 7);
  CHECK_INT(t->launches, 8);
  CHECK_INT(t->flows, 2);
  // the GPU's ProfilerStep#2, i, M, Q; aten::mm and the dataloader's annotation are CPU ranges;
  // cudaDeviceSynchronize (no correlation) is a synchronisation of the host
  CHECK_INT(t->ignored, 4);
  CHECK_INT(t->syncs[TP_TRACE_SYNC_CALL], 1);
  CHECK_INT(t->cpu_ranges, 2);
  CHECK_INT(t->bad, 0);
  CHECK_INT(t->unassigned, 2);  // orphan (no launch), late (launched before step 1)
  CHECK_INT(t->nsteps, 2);
  CHECK(!t->stepless && !t->truncated);
  CHECK_INT(t->warnings, 0);
  CHECK_STR(t->warning, "");
  if (t->nsteps == 2) {
    CHECK_INT(t->steps[0].number, 1);
    CHECK_INT(t->steps[0].ts, 100000);
    CHECK_INT(t->steps[0].dur, 100000);
    CHECK_INT(t->steps[0].dataloader, 4000);
    CHECK_INT(t->steps[0].ops, 3);
    CHECK_INT(t->steps[1].number, 2);
    CHECK_INT(t->steps[1].ts, 200000);
    CHECK_INT(t->steps[1].dur, 100000);
    CHECK_INT(t->steps[1].dataloader, 0);
    CHECK_INT(t->steps[1].ops, 4);
  }
  // names in order of their first op in the file
  static const char *const names[] = {
      "relu_kernel",   "gemm_kernel",     nccl_name,    "Memcpy HtoD (Pageable -> Device)",
      "orphan_kernel", "Memset (Device)", "late_kernel"};
  static const uint8_t kinds[] = {TP_TRACE_KERNEL, TP_TRACE_KERNEL, TP_TRACE_KERNEL,
                                  TP_TRACE_MEMCPY, TP_TRACE_KERNEL, TP_TRACE_MEMSET,
                                  TP_TRACE_KERNEL};
  static const uint64_t counts[] = {1, 3, 1, 1, 1, 1, 1};
  static const int64_t totals[] = {10000, 55000, 80000, 5000, 10000, 2000, 1000};
  for (size_t i = 0; i < 7 && t->nnames == 7; i++) {
    CHECK_STR(name_of(t, i), names[i]);
    CHECK_INT(t->names[i].len, strlen(names[i]));
    CHECK_INT(t->names[i].kind, kinds[i]);
    CHECK_INT(t->names[i].count, counts[i]);
    CHECK_INT(t->names[i].total, totals[i]);
    CHECK_INT(t->names[i].bytes, i == 2 ? 1048576 * 4 : 0);
    CHECK_INT(t->names[i].group, i == 2 ? 8 : 0);
    CHECK_INT(t->names[i].coll_at == SIZE_MAX, i != 2);
  }
  if (t->nnames == 7 && t->names[2].coll_at != SIZE_MAX) {
    CHECK_INT(t->names[2].coll_len, 9);
    CHECK_STR(t->arena + t->names[2].coll_at, "allreduce");
  }
  // ops in file order: ts, dur, name, correlation, stream, step
  static const int64_t ts[] = {305, 150, 160, 185, 200, 230, 250, 270, 400};
  static const int64_t dur[] = {10, 30, 80, 5, 10, 20, 2, 5, 1};
  static const uint32_t name[] = {0, 1, 2, 3, 4, 1, 5, 1, 6};
  static const uint32_t corr[] = {6, 1, 2, 3, UINT32_MAX, 4, 5, 8, 9};
  static const int16_t stream[] = {7, 7, 13, 7, 7, 7, 7, 7, 7};
  static const uint32_t step[] = {1, 0, 0, 0, TP_TRACE_NO_STEP, 1, 1, 1, TP_TRACE_NO_STEP};
  for (size_t i = 0; i < 9 && t->nops == 9; i++) {
    const TpTraceOp *op = &t->ops[i];
    CHECK_INT(op->ts, ts[i] * 1000);
    CHECK_INT(tp_trace_op_dur(t, i), dur[i] * 1000);
    CHECK_INT(op->name, name[i]);
    CHECK_INT(op->corr, corr[i]);
    CHECK_INT(op->stream, stream[i]);
    CHECK_INT(op->step, step[i]);
    CHECK_INT(op->kind, kinds[name[i]]);
  }
  CHECK_INT(cat_count(t, "kernel"), 7);
  CHECK_INT(cat_count(t, "gpu_memcpy"), 1);
  CHECK_INT(cat_count(t, "gpu_memset"), 1);
  CHECK_INT(cat_count(t, "cuda_runtime"), 8);
  CHECK_INT(cat_count(t, "cuda_driver"), 1);
  CHECK_INT(cat_count(t, "user_annotation"), 3);
  CHECK_INT(cat_count(t, "gpu_user_annotation"), 1);
  CHECK_INT(cat_count(t, "cpu_op"), 1);
  CHECK_INT(cat_count(t, "ac2g"), 2);
  CHECK_INT(cat_count(t, ""), 3);  // i (cat ""), M and Q (none)
  CHECK_INT(t->nmeta, 3);
  size_t len;
  const char *m = meta_text(t, "schemaVersion", &len);
  CHECK(m && len == 1 && memcmp(m, "1", 1) == 0);
  m = meta_text(t, "deviceProperties", &len);
  const char *dp = "[{\"id\": 0, \"name\": \"Fake GPU\"}]";
  CHECK(m && len == strlen(dp) && memcmp(m, dp, len) == 0);
  m = meta_text(t, "traceName", &len);
  CHECK(m && len == 11 && memcmp(m, "\"hand.json\"", len) == 0);
}

// The breakdown of `hand`, worked out by hand (ns). Classes: 0 compute, 1 communication,
// 2 memory.
static void check_hand_breakdown(TpTrace *t, const char *what) {
  if (!t) {
    return;
  }
  TpTraceBreakdown b;
  if (breakdown3(t, &b) != 0) {
    return;
  }
  CHECK_INT(b.nclasses, 3);
  CHECK_INT(b.nsteps, 2);
  check_windows_add_up(&b, what);
  if (b.nsteps == 2) {
    // Step 1's window [150, 230): the next window's start ends it. gemm [150, 180), nccl
    // [160, 230) (clipped), memcpy [185, 190), orphan [200, 210): busy all 80, compute 40,
    // comm 70 of which 30 under compute. Exclusive: compute 10 + 20 + 10, comm 5 + 5 + 10 + 20,
    // memory 0 (comm is active while the copy runs).
    const TpTraceStepTime *s = &b.steps[0];
    CHECK_INT(s->step, 0);
    CHECK_INT(s->start, 150000);
    CHECK_INT(s->window, 80000);
    CHECK_INT(s->busy, 80000);
    CHECK_INT(s->idle, 0);
    CHECK_INT(s->compute, 40000);
    CHECK_INT(s->non_compute, 40000);
    CHECK_INT(s->comm, 70000);
    CHECK_INT(s->comm_overlapped, 30000);
    CHECK_INT(s->host_wait, 0);
    CHECK_INT(s->ops, 3);
    CHECK_INT(s->cls[0].count, 1);  // gemm; orphan has no step
    CHECK_INT(s->cls[0].sum, 30000);
    CHECK_INT(s->cls[0].time, 40000);
    CHECK_NUM(s->cls[0].exclusive, 40000, 1e-12);
    CHECK_INT(s->cls[1].count, 1);
    CHECK_INT(s->cls[1].sum, 80000);  // not clipped
    CHECK_INT(s->cls[1].time, 70000);
    CHECK_NUM(s->cls[1].exclusive, 40000, 1e-12);
    CHECK_INT(s->cls[2].count, 1);
    CHECK_INT(s->cls[2].sum, 5000);
    CHECK_INT(s->cls[2].time, 5000);
    CHECK_NUM(s->cls[2].exclusive, 0, 1e-12);
    // Step 2's window [230, 315): the last one ends at its ops' last end (relu). nccl [230, 240)
    // (clipped), gemm [230, 250), memset [250, 252), gemm [270, 275), relu [305, 315). The gap
    // [252, 270) ends with a gemm launched at 225..227: not host wait; [275, 305) ends with relu,
    // whose launch ended at 300: host wait.
    s = &b.steps[1];
    CHECK_INT(s->step, 1);
    CHECK_INT(s->start, 230000);
    CHECK_INT(s->window, 85000);
    CHECK_INT(s->busy, 37000);
    CHECK_INT(s->idle, 48000);
    CHECK_INT(s->compute, 35000);
    CHECK_INT(s->non_compute, 2000);
    CHECK_INT(s->comm, 10000);
    CHECK_INT(s->comm_overlapped, 10000);
    CHECK_INT(s->host_wait, 30000);
    CHECK_INT(s->ops, 4);
    CHECK_INT(s->cls[0].count, 3);
    CHECK_INT(s->cls[0].sum, 35000);
    CHECK_INT(s->cls[0].time, 35000);
    CHECK_NUM(s->cls[0].exclusive, 35000, 1e-12);
    CHECK_INT(s->cls[1].count, 0);
    CHECK_INT(s->cls[1].sum, 0);
    CHECK_INT(s->cls[1].time, 10000);
    CHECK_NUM(s->cls[1].exclusive, 0, 1e-12);
    CHECK_INT(s->cls[2].count, 1);
    CHECK_INT(s->cls[2].sum, 2000);
    CHECK_INT(s->cls[2].time, 2000);
    CHECK_NUM(s->cls[2].exclusive, 2000, 1e-12);
  }
  // HTA's view: with two steps or more, the ops launched before the latest ProfilerStep row
  // starts, on the CPU (200) or the GPU (230): gemm [150, 180), nccl [160, 240), memcpy
  // [185, 190), gemm [230, 250), memset [250, 252), gemm [270, 275), late [400, 401); not orphan
  // (no launch) nor relu (launched at 260). Span 251, union 102 + 5 + 1, compute 30 + 20 + 5 + 1.
  // Whole microseconds: rounding changes nothing.
  CHECK_INT(b.whole.ops, 7);
  CHECK_INT(b.whole.span, 251000);
  CHECK_INT(b.whole.idle, 143000);
  CHECK_INT(b.whole.compute, 56000);
  CHECK_INT(b.whole.non_compute, 52000);
  CHECK_INT(b.whole.rounded.span, 251000);
  CHECK_INT(b.whole.rounded.idle, 143000);
  CHECK_INT(b.whole.rounded.compute, 56000);
  CHECK_INT(b.whole.rounded.non_compute, 52000);
  // per name, over the ops with a step
  static const uint64_t count[] = {1, 3, 1, 1, 0, 1, 0};
  static const int64_t sum[] = {10000, 55000, 80000, 5000, 0, 2000, 0};
  for (size_t i = 0; i < 7 && t->nnames == 7; i++) {
    CHECK_INT(b.name_count[i], count[i]);
    CHECK_INT(b.name_sum[i], sum[i]);
  }
  // A second breakdown (the ops are sorted now) gives the same figures.
  TpTraceBreakdown again;
  if (breakdown3(t, &again) == 0) {
    check_same_breakdown(&b, &again, t->nnames, what);
    tp_trace_breakdown_free(&again);
  }
  tp_trace_breakdown_free(&b);
}

static void test_hand(void) {
  TpTrace *t = read_str("hand.json", hand);
  check_hand_read(t, "hand (memory)");
  if (t) {
    CHECK_STR(t->path, "hand.json");
    CHECK(!t->compressed);
  }
  check_hand_breakdown(t, "hand (memory)");
  tp_trace_free(t);

  char path[256];
  write_file("hand.json", hand, strlen(hand), path, sizeof(path));
  t = read_path(path);
  check_hand_read(t, "hand (file)");
  if (t) {
    CHECK_STR(t->path, path);
    CHECK(!t->compressed);
  }
  check_hand_breakdown(t, "hand (file)");
  tp_trace_free(t);

  // Bad class tables are refused.
  t = read_str("hand.json", hand);
  if (t) {
    TpTraceBreakdown b;
    TpError err = {0};
    uint8_t class_of[7] = {0, 0, 1, 2, 0, 2, 0};
    uint8_t bad_kind[3] = {TP_TRACE_COMPUTE, 7, TP_TRACE_MEMORY};
    CHECK_INT(tp_trace_breakdown(t, class_of, kinds3, 0, &b, &err), TP_EINVAL);
    CHECK_INT(tp_trace_breakdown(t, class_of, kinds3, TP_TRACE_MAX_CLASSES + 1, &b, &err),
              TP_EINVAL);
    CHECK_INT(tp_trace_breakdown(t, class_of, bad_kind, 3, &b, &err), TP_EINVAL);
    CHECK(has(err.msg, "class 2 has no kind"));
    class_of[6] = 3;
    CHECK_INT(tp_trace_breakdown(t, class_of, kinds3, 3, &b, &err), TP_EINVAL);
    CHECK(has(err.msg, "name 7 has class 4 of 3"));
    // One class for everything: all compute.
    uint8_t one[7] = {0};
    uint8_t compute = TP_TRACE_COMPUTE;
    CHECK_INT(tp_trace_breakdown(t, one, &compute, 1, &b, &err), 0);
    if (b.nsteps == 2) {
      CHECK_INT(b.steps[0].compute, 80000);
      CHECK_INT(b.steps[0].comm, 0);
      CHECK_NUM(b.steps[0].cls[0].exclusive, 80000, 1e-12);
      CHECK_INT(b.steps[0].cls[0].count, 3);
      CHECK_INT(b.steps[1].compute, 37000);
      CHECK_INT(b.whole.compute, 108000);
    }
    check_windows_add_up(&b, "one class");
    tp_trace_breakdown_free(&b);
  }
  tp_trace_free(t);
  tp_trace_free(NULL);

  TpError err = {0};
  char missing[256];
  snprintf(missing, sizeof(missing), "%s/missing.json", tmpdir);
  CHECK_INT(tp_trace_read(missing, &t, &err), -ENOENT);
  CHECK(has(err.msg, missing));
  // A directory opens but does not read; an empty file is empty through the thread too.
  CHECK_INT(tp_trace_read(tmpdir, &t, &err), -EISDIR);
  CHECK(has(err.msg, tmpdir) && has(err.msg, "read"));
  write_file("empty.json", "", 0, missing, sizeof(missing));
  CHECK_INT(tp_trace_read(missing, &t, &err), TP_EPARSE);
  CHECK(has(err.msg, "empty.json: empty file"));
  unlink(missing);
  unlink(path);
}

// --- numbers ----------------------------------------------------------------------------------

static void test_numbers(void) {
  const char *doc =
      "{\"traceEvents\": [\n"
      // 1000.5 ns -> 1001 (half away from zero); 12345.6789 -> 12346; huge numbers, deep
      // arrays and exponents in args are skipped
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1.0005, \"dur\": 12.3456789,"
      " \"args\": {\"big\": 123456789012345678901234567890, \"tiny\": -1e-400, \"e\": 1E+400,"
      " \"deep\": [1, [2.5e-3, [true, false, null]]], \"neg\": -0}},\n"
      // -1000.5 -> -1001; 0.4445 ns -> 0 (rounding digit by digit would give 1)
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": -1.0005, "
      "\"dur\": 0.0004445},\n"
      // 1.5e3 us; 1.5E-3 us = 1.5 ns -> 2
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1.5e3, \"dur\": 1.5E-3},\n"
      // 12345.4999 ns -> 12345 (rounding digit by digit would give 12346); 2e0 us
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 12.3454999, \"dur\": 2e0},\n"
      // more than 18 significant digits; exactly half a ns
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
      "\"ts\": 3.00000000000000000000000005, \"dur\": 0.0005},\n"
      // an epoch-based timestamp with its ns digits, and one read as an integer
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1700000000000000.123, "
      "\"dur\": 1},\n"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1419247332972313, "
      "\"dur\": 0.001},\n"
      // negative dur: no time
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 5, \"dur\": -3},\n"
      // out of range: skipped, counted, warned about
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
      "\"ts\": 123456789012345678901234567890, \"dur\": 1},\n"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1e30, \"dur\": 1},\n"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": 1e300},\n"
      // no ts
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"dur\": 1}\n"
      "]}";
  TpTrace *t = read_str("numbers.json", doc);
  if (!t) {
    return;
  }
  static const int64_t ts[] = {
      1001, -1001, 1500000, 12345, 3000, 1700000000000000123LL, 1419247332972313000LL, 5000};
  static const int64_t dur[] = {12346, 0, 2, 2000, 1, 1000, 1, 0};
  CHECK_INT(t->nops, 8);
  for (size_t i = 0; i < 8 && t->nops == 8; i++) {
    CHECK_INT(t->ops[i].ts, ts[i]);
    CHECK_INT(tp_trace_op_dur(t, i), dur[i]);
  }
  CHECK_INT(t->events, 12);
  CHECK_INT(t->bad, 4);
  CHECK_INT(t->warnings, 4);
  CHECK(has(t->warning, "numbers.json: byte "));
  CHECK(has(t->warning, "an out-of-range ts or dur was skipped"));
  tp_trace_free(t);
}

// A kernel longer than 2^32 ns keeps its duration, in the op and in the breakdown.
static void test_long_kernel(void) {
  const char *doc = "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"short\", \"ts\": 6000000, "
                    "\"dur\": 1000},\n"
                    " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"long\", \"ts\": 0, "
                    "\"dur\": 5000000},\n"
                    " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"inside\", \"ts\": 1000000, "
                    "\"dur\": 1},\n"
                    " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"max32\", \"ts\": 7000000, "
                    "\"dur\": 4294967.295}]";
  TpTrace *t = read_str("long.json", doc);
  if (!t) {
    return;
  }
  CHECK_INT(t->nops, 4);
  CHECK(t->stepless);
  CHECK_INT(tp_trace_op_dur(t, 1), 5000000000LL);
  CHECK_INT(tp_trace_op_dur(t, 3), 4294967295LL);
  CHECK_INT(t->names[name_id(t, "long")].total, 5000000000LL);
  TpTraceBreakdown b;
  if (breakdown3(t, &b) == 0) {
    size_t i = op_at(t, 0);  // sorted now: the long kernel first
    CHECK_INT(i, 0);
    CHECK_INT(tp_trace_op_dur(t, i), 5000000000LL);
    CHECK_INT(tp_trace_op_dur(t, op_at(t, 7000000000LL)), 4294967295LL);
    CHECK_INT(b.nsteps, 1);
    if (b.nsteps == 1) {
      // [0, 5e9) + [6e9, 6.001e9) + [7e9, 7e9 + 4294967295)
      CHECK_INT(b.steps[0].start, 0);
      CHECK_INT(b.steps[0].window, 7000000000LL + 4294967295LL);
      CHECK_INT(b.steps[0].busy, 5000000000LL + 1000000 + 4294967295LL);
      CHECK_INT(b.steps[0].cls[0].count, 4);
      CHECK_INT(b.steps[0].cls[0].sum, 5000000000LL + 1000000 + 1000 + 4294967295LL);
      CHECK_INT(b.steps[0].cls[0].time, 5000000000LL + 1000000 + 4294967295LL);
    }
    CHECK_INT(b.name_sum[name_id(t, "long")], 5000000000LL);
    CHECK_INT(b.whole.span, 7000000000LL + 4294967295LL);
    check_windows_add_up(&b, "long");
    tp_trace_breakdown_free(&b);
  }
  tp_trace_free(t);
}

// --- shapes and damage ------------------------------------------------------------------------

static void test_shapes(void) {
  // A bare array of events; elements that are not objects, and empty objects, are events too.
  TpTrace *t = read_str("bare.json", "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
                                     "\"ts\": 1, \"dur\": 2}, {}, 3, \"x\", [1], null]");
  if (t) {
    CHECK_INT(t->nops, 1);
    CHECK_INT(t->events, 6);
    CHECK_INT(t->ignored, 5);
    CHECK(t->stepless);
    CHECK_INT(t->nmeta, 0);
    CHECK(!t->truncated);
  }
  tp_trace_free(t);
  t = read_str("empty-events.json", " {\"traceEvents\": []} ");
  if (t) {
    CHECK_INT(t->nops, 0);
    CHECK_INT(t->events, 0);
    CHECK_INT(t->nsteps, 0);
    CHECK(!t->stepless);
  }
  tp_trace_free(t);
  t = read_str("empty-array.json", "[]");
  tp_trace_free(t);
  // Members after traceEvents are kept too; non-string ph, name, cat are ignored.
  t = read_str("after.json", "{\"traceEvents\": [{\"ph\": 1, \"name\": [2], \"cat\": {}}], "
                             "\"displayTimeUnit\": \"ns\", \"x\": {\"a\": [1, {\"b\": null}]}}");
  if (t) {
    CHECK_INT(t->events, 1);
    CHECK_INT(t->ignored, 1);
    CHECK_INT(t->nmeta, 2);
    size_t len;
    const char *m = meta_text(t, "x", &len);
    CHECK(m && len == 23 && memcmp(m, "{\"a\": [1, {\"b\": null}]}", len) == 0);
  }
  tp_trace_free(t);

  // An empty key at the top level is kept like any other.
  t = read_str("emptykey.json", "{\"\": {\"a\": 1}, \"traceEvents\": []}");
  if (t) {
    CHECK_INT(t->nmeta, 1);
    CHECK_INT(t->meta[0].key_len, 0);
    CHECK_INT(t->meta[0].len, 8);
  }
  tp_trace_free(t);
  // Only ops of no length: one window of none, nothing busy.
  t = read_str("zero.json", "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"z\", "
                            "\"ts\": 5, \"dur\": 0}, {\"ph\": \"X\", \"cat\": \"kernel\", "
                            "\"name\": \"z\", \"ts\": 5}]");
  TpTraceBreakdown b;
  if (t && breakdown3(t, &b) == 0) {
    CHECK_INT(b.nsteps, 1);
    CHECK(b.nsteps == 1 && b.steps[0].window == 0 && b.steps[0].busy == 0);
    CHECK(b.nsteps == 1 && b.steps[0].cls[0].count == 2 && b.steps[0].cls[0].sum == 0);
    CHECK_INT(b.whole.ops, 2);
    CHECK_INT(b.whole.span, 0);
    tp_trace_breakdown_free(&b);
  }
  tp_trace_free(t);

  check_fails_str("meta.json", "{\"schemaVersion\": 1, \"traceName\": \"x\"}", TP_EPARSE,
                  "meta.json: no traceEvents");
  check_fails_str("empty.json", "{}", TP_EPARSE, "no traceEvents");
  check_fails_str("empty.json", "", TP_EPARSE, "empty.json: empty file");
  check_fails_str("blank.json", " \n\t\r ", TP_EPARSE, "blank.json: byte 5: the file ends");
  check_fails("garbage.bin", "\x7f\x45\x4c\x46\x02\x01\x01\x00\xff\xfe", 10, TP_EPARSE,
              "garbage.bin: byte 0: not a JSON trace");
  check_fails_str("garbage2.json", "  \n\x01\x02", TP_EPARSE, "byte 3: not a JSON trace");
  check_fails_str("number.json", "42", TP_EPARSE, "byte 0: not a JSON trace");
  check_fails_str("string.json", "\"traceEvents\"", TP_EPARSE, "byte 0: not a JSON trace");
  check_fails_str("notarray.json", "{\"traceEvents\": {}}", TP_EPARSE,
                  "byte 16: traceEvents is not an array");
  check_fails_str("after.json", "{\"traceEvents\": []} {}", TP_EPARSE,
                  "byte 20: data after the end of the trace");
  check_fails_str("after2.json", "[] x", TP_EPARSE, "byte 3: data after the end of the trace");
  check_fails_str("comma.json", "{\"traceEvents\": [{}, ]}", TP_EPARSE, "byte 21:");
  check_fails_str("colon.json", "{\"traceEvents\" []}", TP_EPARSE, "expected ':' after a key");
  check_fails_str("key.json", "{traceEvents: []}", TP_EPARSE, "byte 1: expected a string");
  check_fails_str("event.json", "[{\"ph\": \"X\" \"cat\": \"kernel\"}]", TP_EPARSE,
                  "byte 12: expected ',' or '}' in an event");
  check_fails_str("events.json", "[{} {}]", TP_EPARSE, "byte 4: expected ',' or ']' after");
  check_fails_str("args.json", "[{\"args\": {\"a\": 1 \"b\": 2}}]", TP_EPARSE,
                  "expected ',' or '}' in args");
  check_fails_str("top.json", "{\"traceEvents\": [] \"x\": 1}", TP_EPARSE,
                  "expected ',' or '}' at the top level");
  check_fails_str("word.json", "[{\"args\": {\"a\": nul}}]", TP_EPARSE,
                  "byte 19: not a JSON value");
  check_fails_str("num.json", "[{\"args\": {\"a\": 01}}]", TP_EPARSE, "not a JSON value");
  check_fails_str("num2.json", "[{\"x\": [1.]}]", TP_EPARSE, "not a JSON value");
  check_fails_str("num3.json", "[{\"x\": -}]", TP_EPARSE, "not a JSON value");
  // A read field that is not a JSON number is damage too, not an out-of-range time.
  check_fails_str("ts.json", "[{\"ph\": \"X\", \"ts\": 1.2.3}]", TP_EPARSE, "not a JSON value");
  check_fails_str("corr.json", "[{\"args\": {\"correlation\": 12abc}}]", TP_EPARSE,
                  "not a JSON value");
  check_fails_str("close.json", "[{\"x\": [1}]", TP_EPARSE,
                  "expected ',' or the end of an object or array");
}

static void test_cut(void) {
  // Cut in the middle of late_kernel's event: the 8 ops before it are kept.
  const char *at = strstr(hand, "\"late_kernel\"");
  size_t cut = (size_t)(at - hand) + 5;
  TpTrace *t = read_mem("cut.json", hand, cut);
  if (t) {
    CHECK(t->truncated);
    CHECK_INT(t->nops, 8);
    CHECK_INT(t->bytes, cut);
    CHECK_INT(t->warnings, 1);
    char want[96];
    snprintf(want, sizeof(want), "cut.json: truncated at byte %zu", cut);
    CHECK_REPORT_(has(t->warning, want), "'%s' in '%s'", want, t->warning);
    CHECK_INT(t->nsteps, 2);
    CHECK_INT(t->launches, 8);
    TpTraceBreakdown b;
    if (breakdown3(t, &b) == 0) {
      check_windows_add_up(&b, "cut");
      tp_trace_breakdown_free(&b);
    }
  }
  tp_trace_free(t);
  // Cut at each byte: an error until the first event is whole (nothing was read: a damaged file,
  // not an empty profile), never one after it, and the ops only grow.
  size_t events_at = (size_t)(strstr(hand, "\"traceEvents\": [") - hand) + 16;
  size_t first_event = (size_t)(strchr(hand + events_at, '}') - hand) + 1;
  size_t prev_ops = 0;
  size_t wrong = 0;
  for (size_t n = 1; n + 1 < strlen(hand); n++) {  // the last byte is a newline
    TpTrace *c = NULL;
    TpError err = {0};
    int rc = tp_trace_read_mem("cut.json", hand, n, &c, &err);
    if (n < events_at) {
      wrong += rc != TP_EPARSE || !has(err.msg, "the file ends before any traceEvents");
    } else if (n < first_event) {
      char want[96];
      snprintf(want, sizeof(want), "cut.json: truncated at byte %zu: no event before the cut", n);
      wrong += rc != TP_EPARSE || !has(err.msg, want);
    } else {
      wrong += rc != 0 || !c->truncated || c->nops < prev_ops;
      prev_ops = c ? c->nops : prev_ops;
    }
    tp_trace_free(c);
  }
  CHECK_INT(wrong, 0);
  CHECK_INT(prev_ops, 9);
  // Cut inside the header, before traceEvents.
  const char *header = "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\"";
  check_fails_str("header.json", header, TP_EPARSE,
                  "header.json: byte 47: the file ends before any traceEvents");
  check_fails_str("header2.json", "{\"traceEve", TP_EPARSE, "ends before any traceEvents");
}

static void test_strings(void) {
  // Escapes decode in names: \" \\ \/ \b \f \n \r \t, \u00e9, a surrogate pair, \u0000 as '?'.
  TpTrace *t = read_str("esc.json", "[{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1, "
                                    "\"name\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t"
                                    "\\u00e9\\ud83d\\ude00\\u0000\\u20AC\"}]");
  if (t && t->nnames == 1) {
    const char *want = "a\"b\\c/d\b\f\n\r\t\xC3\xA9\xF0\x9F\x98\x80?\xE2\x82\xAC";
    CHECK_INT(t->names[0].len, strlen(want));
    CHECK_STR(name_of(t, 0), want);
  }
  tp_trace_free(t);
  // Bad escapes, unpaired surrogates, control characters: TP_EPARSE at their byte.
  check_fails_str("esc1.json", "[{\"name\": \"a\\qb\"}]", TP_EPARSE,
                  "esc1.json: byte 14: bad escape in a string");
  check_fails_str("esc2.json", "[{\"name\": \"a\\u12G4\"}]", TP_EPARSE,
                  "byte 16: bad \\u escape in a string");
  check_fails_str("esc3.json", "[{\"name\": \"\\ud800x\"}]", TP_EPARSE,
                  "byte 17: unpaired surrogate in a string");
  check_fails_str("esc4.json", "[{\"name\": \"\\udc00\"}]", TP_EPARSE,
                  "byte 17: unpaired surrogate in a string");
  check_fails_str("esc5.json", "[{\"name\": \"\\ud800\\u0041\"}]", TP_EPARSE,
                  "byte 23: unpaired surrogate in a string");
  check_fails_str("esc6.json", "[{\"name\": \"\\ud800\\n\"}]", TP_EPARSE,
                  "unpaired surrogate in a string");
  check_fails_str("esc7.json", "[{\"args\": {\"x\": \"\\ud800\"}}]", TP_EPARSE,
                  "unpaired surrogate in a string");
  check_fails_str("ctl.json", "[{\"name\": \"tab\there\"}]", TP_EPARSE,
                  "ctl.json: byte 14: control character in a string");
  check_fails_str("ctl2.json", "[{\"args\": {\"x\": \"a\nb\"}}]", TP_EPARSE,
                  "byte 18: control character in a string");
  check_fails_str("ctl3.json", "{\"tra\x01\": []}", TP_EPARSE, "byte 5: control character");

  // Nesting: 1000 levels in a skipped arg are fine, 1001 are too deep.
  for (int depth = 1000; depth <= 1001; depth++) {
    TpBuf b = {0};
    tp_buf_printf(&b, "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, "
                      "\"dur\": 1, \"args\": {\"deep\": ");
    for (int i = 0; i < depth; i++) {
      tp_buf_append(&b, i % 2 ? "{\"k\": " : "[", i % 2 ? 6 : 1);
    }
    tp_buf_append(&b, "1", 1);
    for (int i = depth - 1; i >= 0; i--) {
      tp_buf_append(&b, i % 2 ? "}" : "]", 1);
    }
    tp_buf_printf(&b, "}}]");
    if (depth == 1000) {
      t = read_mem("deep.json", b.data, b.len);
      CHECK(t && t->nops == 1);
      tp_trace_free(t);
    } else {
      check_fails("deep.json", b.data, b.len, TP_ELIMIT, "nesting deeper than 1000");
    }
    tp_buf_free(&b);
  }
  // Deep nesting at the top level and in a meta member too.
  TpBuf b = {0};
  tp_buf_printf(&b, "{\"x\": ");
  for (int i = 0; i < 5000; i++) {
    tp_buf_append(&b, "[", 1);
  }
  check_fails("deepmeta.json", b.data, b.len, TP_ELIMIT, "nesting deeper than 1000");
  tp_buf_free(&b);

  // A 2 MiB kernel name is over the limit; a long string in a skipped arg is not.
  size_t big = 2u << 20;
  char *s = malloc(big + 256);
  int n = snprintf(s, 256,
                   "[{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1, "
                   "\"args\": {\"skipped\": \"");
  memset(s + n, 'x', big);
  size_t len = (size_t)n + big;
  len += (size_t)snprintf(s + len, 256, "\"}, \"name\": \"k\"}]");
  t = read_mem("longarg.json", s, len);
  CHECK(t && t->nops == 1);
  tp_trace_free(t);
  n = snprintf(s, 256,
               "[{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1, "
               "\"name\": \"");
  memset(s + n, 'k', big);
  len = (size_t)n + big;
  len += (size_t)snprintf(s + len, 256, "\"}]");
  check_fails("longname.json", s, len, TP_ELIMIT, "a name longer than 1 MiB");
  // exactly 1 MiB is fine
  len = (size_t)n + (1u << 20);
  len += (size_t)snprintf(s + len, 256, "\"}]");
  t = read_mem("mib.json", s, len);
  CHECK(t && t->nnames == 1 && t->names[0].len == (1u << 20));
  tp_trace_free(t);
  free(s);
}

// --- gzip -------------------------------------------------------------------------------------

static void test_gzip(void) {
  size_t zlen;
  unsigned char *z = gzip(hand, strlen(hand), 9, &zlen);
  if (!z) {
    return;
  }
  CHECK(zlen > 18 && z[0] == 0x1f && z[1] == 0x8b);
  TpTrace *t = read_mem("hand.json.gz", z, zlen);
  check_hand_read(t, "gzip (memory)");
  CHECK(t && t->compressed && !t->truncated);
  check_hand_breakdown(t, "gzip (memory)");
  tp_trace_free(t);
  char path[256];
  write_file("hand.json.gz", z, zlen, path, sizeof(path));
  t = read_path(path);
  check_hand_read(t, "gzip (file)");
  CHECK(t && t->compressed && !t->truncated);
  check_hand_breakdown(t, "gzip (file)");
  tp_trace_free(t);

  // Cut in half: what was inflated is kept, with a warning.
  t = read_mem("half.json.gz", z, zlen / 2);
  CHECK(t && t->compressed && t->truncated && t->nops < 9 && t->warnings >= 1);
  // the offsets of the cut: in the gzip stream, and in the text it inflated to, each named
  char want[128];
  snprintf(want, sizeof(want), "half.json.gz: truncated at compressed byte %zu (decompressed byte ",
           zlen / 2);
  CHECK_REPORT_(t && has(t->warning, want), "'%s' in '%s'", want, t ? t->warning : "");
  tp_trace_free(t);
  char half[256];
  write_file("half.json.gz", z, zlen / 2, half, sizeof(half));
  t = read_path(half);
  CHECK(t && t->compressed && t->truncated && t->nops < 9 && has(t->warning, "truncated at"));
  tp_trace_free(t);
  unlink(half);
  // Cut in the trailer only: the JSON is whole, the gzip stream is not.
  t = read_mem("trailer.json.gz", z, zlen - 4);
  CHECK(t && t->compressed && t->truncated && t->nops == 9);
  CHECK(t && has(t->warning, "trailer.json.gz: the gzip stream ends early"));
  tp_trace_free(t);
  write_file("trailer.json.gz", z, zlen - 4, half, sizeof(half));
  t = read_path(half);
  CHECK(t && t->compressed && t->truncated && t->nops == 9);
  CHECK(t && has(t->warning, "the gzip stream ends early"));
  tp_trace_free(t);
  unlink(half);
  // Only the magic bytes, or the header: a cut gzip stream, not an empty file.
  check_fails("magic.json.gz", z, 2, TP_EPARSE,
              "magic.json.gz: truncated at compressed byte 2 (decompressed byte 0): the gzip "
              "stream ends early");
  check_fails("header.json.gz", z, 10, TP_EPARSE,
              "header.json.gz: truncated at compressed byte 10 (decompressed byte 0)");
  // Cut before the first event is whole: nothing was read, an error naming both offsets.
  {
    size_t first = (size_t)(strchr(strstr(hand, "\"traceEvents\""), '}') - hand);
    uLongf n = compressBound(first) + 32;
    unsigned char *zz = malloc(n);
    z_stream zs = {0};
    deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    zs.next_in = (unsigned char *)hand;
    zs.avail_in = (uInt)first;
    zs.next_out = zz;
    zs.avail_out = (uInt)n;
    deflate(&zs, Z_SYNC_FLUSH);  // all of it out, no end of stream: a file cut there
    size_t zn = n - zs.avail_out;
    deflateEnd(&zs);
    char want2[160];
    snprintf(want2, sizeof(want2),
             "early.json.gz: truncated at compressed byte %zu (decompressed byte %zu): no event "
             "before the cut",
             zn, first);
    check_fails("early.json.gz", zz, zn, TP_EPARSE, want2);
    free(zz);
  }

  // A flipped byte in the middle: damaged gzip, named as such.
  unsigned char *bad = malloc(zlen);
  memcpy(bad, z, zlen);
  bad[zlen / 2] ^= 0xFF;
  check_fails("flip.json.gz", bad, zlen, TP_EPARSE, "flip.json.gz: gzip: ");
  char flipped[256];
  write_file("flip.json.gz", bad, zlen, flipped, sizeof(flipped));
  TpError err = {0};
  TpTrace *none = NULL;
  CHECK_INT(tp_trace_read(flipped, &none, &err), TP_EPARSE);
  CHECK(has(err.msg, ": gzip: ") && none == NULL);
  unlink(flipped);
  // A damaged CRC (the trailer's first byte): all the data inflates, then the check fails.
  memcpy(bad, z, zlen);
  bad[zlen - 8] ^= 0x01;
  check_fails("crc.json.gz", bad, zlen, TP_EPARSE, "gzip: incorrect data check");
  free(bad);

  // Two members, cut inside an event, then zero padding: read as one stream.
  size_t split = (size_t)(strstr(hand, "orphan_kernel") - hand) + 3;
  size_t l1, l2;
  unsigned char *z1 = gzip(hand, split, 6, &l1);
  unsigned char *z2 = gzip(hand + split, strlen(hand) - split, 1, &l2);
  unsigned char *two = calloc(l1 + l2 + 512, 1);
  memcpy(two, z1, l1);
  memcpy(two + l1, z2, l2);
  t = read_mem("two.json.gz", two, l1 + l2);
  check_hand_read(t, "two members (memory)");
  CHECK(t && t->compressed && !t->truncated);
  tp_trace_free(t);
  t = read_mem("pad.json.gz", two, l1 + l2 + 512);
  check_hand_read(t, "two members and padding (memory)");
  tp_trace_free(t);
  write_file("two.json.gz", two, l1 + l2 + 512, half, sizeof(half));
  t = read_path(half);
  check_hand_read(t, "two members and padding (file)");
  CHECK(t && t->compressed && !t->truncated);
  check_hand_breakdown(t, "two members (file)");
  tp_trace_free(t);
  unlink(half);
  // The second member cut short.
  t = read_mem("two-cut.json.gz", two, l1 + l2 / 2);
  CHECK(t && t->truncated && t->nops >= 4 && t->nops < 9);
  tp_trace_free(t);
  // Garbage after the first member is damage.
  memset(two + l1, 'x', 16);
  check_fails("junk.json.gz", two, l1 + 16, TP_EPARSE, "junk.json.gz: gzip: ");
  free(two);
  free(z1);
  free(z2);
  free(z);
  unlink(path);
}

// --- chunk boundaries -------------------------------------------------------------------------

// One group of events with every kind of token, as a boundary may cut it: a step, a launch, a
// kernel with escapes in its name (\", \\, \u00e9, a surrogate pair) and a collective's args,
// numbers with fractions and exponents, a nested arg, flows. Step `k`, kernel `k`.
static void put_group(TpBuf *b, int k) {
  int64_t base = 1000000 + (int64_t)k * 1000;
  tp_buf_printf(b,
                "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%d\", "
                "\"ts\": %lld.0005, \"dur\": 9.99e2},\n"
                "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                "\"ts\": %lld.25, \"dur\": 2.5E0, \"args\": {\"correlation\": %d, "
                "\"big\": 123456789012345678901234567890, \"deep\": [[1, {\"a\": [true]}], []]}},\n"
                "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\\u00e9rnel_%d \\\"q\\\" "
                "\\\\ \\ud83d\\ude00 \\/\", \"pid\": 0, \"tid\": 7, \"ts\": %lld.123456, "
                "\"dur\": %d.5, \"args\": {\"stream\": %d, \"correlation\": %d, "
                "\"Collective name\": \"all\\u0072educe\", \"In msg nelems\": %d, "
                "\"dtype\": \"BFloat16\", \"Group size\": 4}},\n"
                "{\"ph\": \"s\", \"id\": %d, \"cat\": \"ac2g\", \"ts\": %lld},\n"
                "{\"ph\": \"f\", \"id\": %d, \"cat\": \"ac2g\", \"ts\": %lld, \"bp\": \"e\"}",
                k, (long long)base, (long long)base + 1, k + 1, k % 97, (long long)base + 100,
                10 + k % 50, 7 + k % 3, k + 1, 1000 + k, k, (long long)base + 1, k,
                (long long)base + 100);
}

// A trace of `groups` groups, with `pad` spaces before the first one.
static void make_trace(TpBuf *b, size_t pad, int groups) {
  tp_buf_printf(b, "{\"schemaVersion\": 1, \"traceEvents\": [");
  tp_buf_reserve(b, pad);
  memset(b->data + b->len, ' ', pad);
  b->len += pad;
  for (int k = 0; k < groups; k++) {
    put_group(b, k);
    tp_buf_printf(b, k + 1 < groups ? ",\n" : "\n");
  }
  tp_buf_printf(b, "], \"traceName\": \"big\"}\n");
}

// The reader's paths: a file (its reader thread), gzip in memory, a gzip file.
enum { PATH_FILE = 1, PATH_GZIP_MEM = 2, PATH_GZIP_FILE = 4 };

// t, read from `doc` by another path, must equal `ref` (read from memory in one chunk, never
// broken down) and break down as `ref_b`. Frees t.
static void check_read(const TpTrace *ref, const TpTraceBreakdown *ref_b, TpTrace *t,
                       const TpBuf *doc, bool compressed, const char *what) {
  check_same(ref, t, what);
  if (!t) {
    return;
  }
  CHECK_REPORT_(t->bytes == doc->len && t->compressed == compressed, "%s: %llu bytes", what,
                (unsigned long long)t->bytes);
  TpTraceBreakdown b;
  if (breakdown3(t, &b) == 0) {
    check_same_breakdown(ref_b, &b, ref->nnames, what);
    tp_trace_breakdown_free(&b);
  }
  tp_trace_free(t);
}

// Reads `doc` by the chosen paths (gzip at `level`): each agrees with ref and ref_b.
static void check_paths_agree(const TpBuf *doc, const TpTrace *ref, const TpTraceBreakdown *ref_b,
                              int paths, int level, const char *what) {
  char path[256], label[128];
  if (paths & PATH_FILE) {
    write_file("chunks.json", doc->data, doc->len, path, sizeof(path));
    snprintf(label, sizeof(label), "%s: file", what);
    check_read(ref, ref_b, read_path(path), doc, false, label);
    unlink(path);
  }
  if (paths & (PATH_GZIP_MEM | PATH_GZIP_FILE)) {
    size_t zlen;
    unsigned char *z = gzip(doc->data, doc->len, level, &zlen);
    if (paths & PATH_GZIP_MEM) {
      snprintf(label, sizeof(label), "%s: gzip in memory", what);
      check_read(ref, ref_b, read_mem("zmem", z, zlen), doc, true, label);
    }
    if (paths & PATH_GZIP_FILE) {
      write_file("chunks.json.gz", z, zlen, path, sizeof(path));
      snprintf(label, sizeof(label), "%s: gzip file", what);
      check_read(ref, ref_b, read_path(path), doc, true, label);
      unlink(path);
    }
    free(z);
  }
}

// `doc` read from memory twice: once kept as it is read, once broken down. False when either
// read fails.
static bool read_ref(const TpBuf *doc, TpTrace **ref, TpTrace **sorted, TpTraceBreakdown *ref_b) {
  *ref = read_mem("mem", doc->data, doc->len);
  *sorted = read_mem("mem", doc->data, doc->len);
  if (*ref && *sorted && breakdown3(*sorted, ref_b) == 0) {
    check_windows_add_up(ref_b, "reference");
    return true;
  }
  tp_trace_free(*ref);
  tp_trace_free(*sorted);
  return false;
}

static void free_ref(TpTrace *ref, TpTrace *sorted, TpTraceBreakdown *ref_b) {
  tp_trace_breakdown_free(ref_b);
  tp_trace_free(ref);
  tp_trace_free(sorted);
}

static void test_boundaries(void) {
  // The reader hands over 1 MiB at a time: pad so that the first boundary falls on each byte of
  // the group that straddles it. The padding is whitespace: the events read stay the same.
  TpBuf one = {0};
  put_group(&one, 1);
  size_t group = one.len + 2;  // ",\n"
  tp_buf_free(&one);
  TpBuf probe = {0};
  make_trace(&probe, 0, 1);
  size_t head = (size_t)(strstr(probe.data, "[") - probe.data) + 1;
  tp_buf_free(&probe);
  size_t mib = 1u << 20;
  int groups = 4;
  TpBuf doc = {0};
  make_trace(&doc, 0, groups);
  TpTrace *ref, *sorted;
  TpTraceBreakdown ref_b;
  if (read_ref(&doc, &ref, &sorted, &ref_b)) {
    CHECK_INT(ref->nops, groups);
    size_t checked = 0;
    for (size_t at = 0; at <= group; at++) {
      // group 1 starts at head + pad + group; the boundary at `at` bytes into it
      size_t pad = mib - head - group - at;
      TpBuf padded = {0};
      make_trace(&padded, pad, groups);
      char what[64];
      snprintf(what, sizeof(what), "boundary at byte %zu of a group", at);
      // every path at every byte; the gzip file (the slowest) at every third
      int paths = PATH_FILE | PATH_GZIP_MEM | (at % 3 == 0 ? PATH_GZIP_FILE : 0);
      check_paths_agree(&padded, ref, &ref_b, paths, at % 2 ? 0 : 1, what);
      checked++;
      tp_buf_free(&padded);
    }
    CHECK_INT(checked, group + 1);
    free_ref(ref, sorted, &ref_b);
  }
  tp_buf_free(&doc);

  // 20000 events (over 2 MiB, several chunks), compressed well and not at all (more than the
  // reader's 256 KiB reads).
  make_trace(&doc, 0, 4000);
  CHECK_REPORT_(doc.len > 2 * mib, "%zu bytes", doc.len);
  TpTrace *t = read_mem("big", doc.data, doc.len);
  if (t) {
    CHECK_INT(t->events, 20000);
    CHECK_INT(t->nops, 4000);
    CHECK_INT(t->nsteps, 4000);
    CHECK_INT(t->launches, 4000);
    CHECK_INT(t->flows, 8000);
    CHECK_INT(t->unassigned, 0);
    CHECK_INT(t->nnames, 97);
    uint32_t id = name_id(t, "k\xC3\xA9rnel_5 \"q\" \\ \xF0\x9F\x98\x80 /");
    CHECK(id != UINT32_MAX);
    if (id != UINT32_MAX) {
      CHECK_STR(t->arena + t->names[id].coll_at, "allreduce");
      CHECK_INT(t->names[id].group, 4);
      CHECK_INT(t->names[id].count, 42);  // k % 97 == 5 for k < 4000
    }
    CHECK_INT(t->ops[3].ts, 1003100123);
    CHECK_INT(tp_trace_op_dur(t, 3), 13500);
    CHECK_INT(t->steps[3].ts, 1003000001);
    CHECK_INT(t->steps[3].dur, 999000);
    // kernel 3's name: k = 3 + 97j for j < 42, each 1000 + k BFloat16 elements
    CHECK_INT(t->names[t->ops[3].name].count, 42);
    CHECK_INT(t->names[t->ops[3].name].bytes, 2 * (42 * 1003 + 97 * 861));
  }
  tp_trace_free(t);
  if (read_ref(&doc, &ref, &sorted, &ref_b)) {
    int all = PATH_FILE | PATH_GZIP_MEM | PATH_GZIP_FILE;
    check_paths_agree(&doc, ref, &ref_b, all, 6, "20000 events, gzip -6");
    check_paths_agree(&doc, ref, &ref_b, PATH_GZIP_MEM | PATH_GZIP_FILE, 0,
                      "20000 events, gzip -0");
    free_ref(ref, sorted, &ref_b);
  }
  // The big gzip file cut in half: truncated, the events before the cut kept.
  size_t zlen;
  unsigned char *z = gzip(doc.data, doc.len, 0, &zlen);
  char path[256];
  write_file("cut.json.gz", z, zlen / 2, path, sizeof(path));
  t = read_path(path);
  CHECK(t && t->compressed && t->truncated && t->nops > 1000 && t->nops < 3000);
  tp_trace_free(t);
  unlink(path);
  free(z);
  tp_buf_free(&doc);
}

// A top-level member kept as text comes out byte for byte when a chunk boundary cuts it
// anywhere, escapes and nesting included.
static void test_meta_boundaries(void) {
  const char *member = "{\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8, "
                       "\"pg_config\": [{\"pg_name\": \"0\", \"ranks\": [0, 1, 2, 3]}], "
                       "\"note\": \"a\\\"b \\u00e9 \\ud83d\\ude00\", \"x\": -1.5e-3}";
  const char *head = "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
                     "\"ts\": 1, \"dur\": 1}], ";
  const char *key = "\"distributedInfo\": ";
  size_t mib = 1u << 20, len = strlen(member), wrong = 0;
  char *doc = malloc(mib + len + 256);
  char path[256];
  for (size_t at = 0; at <= len; at++) {
    // the boundary at byte `at` of the member's text
    size_t n = strlen(head);
    memcpy(doc, head, n);
    size_t pad = mib - n - strlen(key) - at;
    memset(doc + n, ' ', pad);
    n += pad;
    n += (size_t)sprintf(doc + n, "%s%s}", key, member);
    write_file("meta.json", doc, n, path, sizeof(path));
    TpTrace *t = read_path(path);
    size_t got = 0;
    const char *text = t ? meta_text(t, "distributedInfo", &got) : NULL;
    wrong += !text || got != len || memcmp(text, member, len) != 0 || t->nops != 1;
    tp_trace_free(t);
    unlink(path);
  }
  CHECK_INT(wrong, 0);
  free(doc);
}

// --- no ProfilerStep --------------------------------------------------------------------------

static void test_stepless(void) {
  // Ops with and without launches, at negative times: one step holds them all.
  const char *doc =
      "{\"traceEvents\": [\n"
      "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"ts\": -20, "
      "\"dur\": 1, \"args\": {\"correlation\": 1}},\n"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"a\", \"ts\": -10, \"dur\": 5, "
      "\"args\": {\"correlation\": 1}},\n"
      "{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"m\", \"ts\": -4, \"dur\": 1},\n"
      "{\"ph\": \"X\", \"cat\": \"user_annotation\", "
      "\"name\": \"enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__\", "
      "\"ts\": -30, \"dur\": 3},\n"
      "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#x\", \"ts\": -30, "
      "\"dur\": 3}\n"
      "]}";
  TpTrace *t = read_str("nostep.json", doc);
  if (!t) {
    return;
  }
  CHECK(t->stepless);
  CHECK_INT(t->nsteps, 1);
  CHECK_INT(t->nops, 2);
  CHECK_INT(t->unassigned, 0);
  CHECK_INT(t->ignored, 0);     // "ProfilerStep#x" has no number: an annotation, not a step
  CHECK_INT(t->cpu_ranges, 2);  // it and the dataloader's annotation
  if (t->nsteps == 1) {
    CHECK_INT(t->steps[0].number, 0);
    CHECK_INT(t->steps[0].ops, 2);
    CHECK_INT(t->steps[0].dataloader, 3000);
  }
  CHECK(t->ops[0].step == 0 && t->ops[1].step == 0);
  TpTraceBreakdown b;
  if (breakdown3(t, &b) == 0) {
    CHECK_INT(b.nsteps, 1);
    if (b.nsteps == 1) {
      CHECK_INT(b.steps[0].start, -10000);
      CHECK_INT(b.steps[0].window, 7000);
      CHECK_INT(b.steps[0].busy, 6000);
      CHECK_INT(b.steps[0].compute, 5000);
      CHECK_INT(b.steps[0].ops, 2);
      CHECK_INT(b.steps[0].cls[2].count, 1);
      // The gap [-5, -4) ends with a copy that has no launch: not host wait.
      CHECK_INT(b.steps[0].host_wait, 0);
    }
    check_windows_add_up(&b, "stepless");
    // No step to drop: every op counts, the one without a launch too. Span [-10, -3).
    CHECK_INT(b.whole.ops, 2);
    CHECK_INT(b.whole.span, 7000);
    CHECK_INT(b.whole.idle, 1000);
    CHECK_INT(b.whole.compute, 5000);
    CHECK_INT(b.whole.non_compute, 1000);
    tp_trace_breakdown_free(&b);
  }
  tp_trace_free(t);
  // No GPU op at all: no step either.
  t = read_str("cpu.json", "[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"x\", \"ts\": 1}]");
  if (t) {
    CHECK_INT(t->nsteps, 0);
    CHECK(!t->stepless);
    TpTraceBreakdown e;
    if (breakdown3(t, &e) == 0) {
      CHECK_INT(e.nsteps, 0);
      CHECK_INT(e.whole.ops, 0);
      tp_trace_breakdown_free(&e);
    }
  }
  tp_trace_free(t);
}

// HTA's whole view with fewer than two steps takes every op; `rounded` moves starts up and ends
// down to whole microseconds, and a row left with its end before its start counts negative.
static void test_whole_rounded(void) {
  const char *doc =
      "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"a\", \"ts\": 1.2, \"dur\": 2.5},\n"
      " {\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"b\", \"ts\": 5.5, \"dur\": 3},\n"
      " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"c\", \"ts\": 4.5, \"dur\": 0.2}]";
  TpTrace *t = read_str("rounded.json", doc);
  TpTraceBreakdown b;
  if (t && breakdown3(t, &b) == 0) {
    // a [1.2, 3.7), c [4.5, 4.7), b [5.5, 8.5)
    CHECK_INT(b.whole.ops, 3);
    CHECK_INT(b.whole.span, 7300);
    CHECK_INT(b.whole.idle, 1600);
    CHECK_INT(b.whole.compute, 2700);
    CHECK_INT(b.whole.non_compute, 3000);
    // a [2, 3), c [5, 4) (negative), b [6, 8): busy 1 - 1 + 2, compute 1 - 1
    CHECK_INT(b.whole.rounded.span, 6000);
    CHECK_INT(b.whole.rounded.idle, 4000);
    CHECK_INT(b.whole.rounded.compute, 0);
    CHECK_INT(b.whole.rounded.non_compute, 2000);
    tp_trace_breakdown_free(&b);
  }
  tp_trace_free(t);
  // One step: every op, the one without a launch too.
  doc = "[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"ProfilerStep#3\", \"ts\": 0, "
        "\"dur\": 100},\n"
        " {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"l\", \"ts\": 1, \"dur\": 1, "
        "\"args\": {\"correlation\": 4}},\n"
        " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"a\", \"ts\": 10, \"dur\": 10, "
        "\"args\": {\"correlation\": 4}},\n"
        " {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"b\", \"ts\": 30, \"dur\": 10}]";
  t = read_str("onestep.json", doc);
  if (t && breakdown3(t, &b) == 0) {
    CHECK(!t->stepless);
    CHECK_INT(t->steps[0].number, 3);
    CHECK_INT(t->unassigned, 1);
    CHECK_INT(b.nsteps, 1);
    CHECK_INT(b.steps[0].window, 10000);
    CHECK_INT(b.whole.ops, 2);
    CHECK_INT(b.whole.span, 30000);
    CHECK_INT(b.whole.idle, 10000);
    tp_trace_breakdown_free(&b);
  }
  tp_trace_free(t);
}

// --- extremes ---------------------------------------------------------------------------------

// Times at the edge of what the reader takes (ns from -2^60 to 2^62 - 1, durations up to 2^60),
// and just past it: nothing overflows (UBSan checks), sums stop at INT64_MAX.
static void test_extremes(void) {
  const char *lo = "-1152921504606846.976", *hi = "4611686018427387.903";
  const char *dur = "1152921504606846.976";
  TpBuf b = {0};
  tp_buf_printf(&b, "{\"traceEvents\": [\n");
  tp_buf_printf(&b,
                "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"ProfilerStep#1\", "
                "\"ts\": %s, \"dur\": %s},\n"
                "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"ProfilerStep#2\", "
                "\"ts\": %s, \"dur\": %s},\n"
                "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"l\", \"ts\": %s, "
                "\"dur\": 1, \"args\": {\"correlation\": 1}},\n"
                "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"l\", \"ts\": %s, "
                "\"dur\": 1, \"args\": {\"correlation\": 2}},\n"
                "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": %s, "
                "\"dur\": %s, \"args\": {\"correlation\": 2}},\n",
                lo, dur, hi, dur, lo, hi, hi, dur);
  for (int i = 0; i < 9; i++) {
    tp_buf_printf(&b,
                  "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": %s, "
                  "\"dur\": %s, \"args\": {\"correlation\": 1, "
                  "\"In msg nelems\": 2000000000000000000, \"dtype\": \"Float\"}},\n"
                  "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"enumerate(DataLoader)\", "
                  "\"ts\": %s, \"dur\": %s},\n",
                  lo, dur, lo, dur);
  }
  // one ns past each limit
  tp_buf_printf(&b, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
                    "\"ts\": 4611686018427387.904, \"dur\": 1},\n"
                    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
                    "\"ts\": -1152921504606846.977, \"dur\": 1},\n"
                    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 0, "
                    "\"dur\": 1152921504606846.977}\n]}");
  TpTrace *t = read_mem("extreme.json", b.data, b.len);
  tp_buf_free(&b);
  if (!t) {
    return;
  }
  const int64_t tmin = -((int64_t)1 << 60), tmax = ((int64_t)1 << 62) - 1;
  const int64_t dmax = (int64_t)1 << 60;
  CHECK_INT(t->nops, 10);
  CHECK_INT(t->bad, 3);
  CHECK(has(t->warning, "an out-of-range ts or dur was skipped"));
  CHECK_INT(t->nsteps, 2);
  CHECK_INT(t->unassigned, 0);
  if (t->nnames == 1 && t->nsteps == 2) {
    CHECK_INT(t->names[0].count, 10);
    CHECK_INT(t->names[0].total, INT64_MAX);  // 10 x 2^60
    CHECK_INT(t->names[0].bytes, INT64_MAX);  // 9 x 8e18
    CHECK_INT(t->steps[0].ts, tmin);
    CHECK_INT(t->steps[0].dataloader, INT64_MAX);  // 9 x 2^60
    CHECK_INT(t->steps[1].ts, tmax);
    CHECK_INT(t->steps[1].dur, dmax);
    CHECK_INT(t->steps[0].ops, 9);
    CHECK_INT(t->steps[1].ops, 1);
  }
  TpTraceBreakdown bd;
  if (breakdown3(t, &bd) == 0) {
    check_windows_add_up(&bd, "extreme");
    CHECK_INT(bd.nsteps, 2);
    if (bd.nsteps == 2) {
      // [tmin, tmax): busy [tmin, 0), then idle until the kernel launched at tmax
      CHECK_INT(bd.steps[0].window, tmax - tmin);
      CHECK_INT(bd.steps[0].busy, dmax);
      CHECK_INT(bd.steps[0].host_wait, tmax);
      CHECK_INT(bd.steps[0].cls[0].count, 9);
      CHECK_INT(bd.steps[0].cls[0].sum, INT64_MAX);
      CHECK_INT(bd.steps[1].window, dmax);
      CHECK_INT(bd.steps[1].busy, dmax);
    }
    CHECK_INT(bd.name_sum[0], INT64_MAX);
    // the ops launched before step 2: the nine at tmin
    CHECK_INT(bd.whole.ops, 9);
    CHECK_INT(bd.whole.span, dmax);
    CHECK_INT(bd.whole.idle, 0);
    CHECK_INT(bd.whole.rounded.span, 1152921504606846000LL);  // tmin rounded up to a us
    tp_trace_breakdown_free(&bd);
  }
  tp_trace_free(t);
}

// Why the GPU is idle, worked out by hand. Two ProfilerSteps, [0, 1000) and [1000, 2000) us;
// kernels on stream 7 (launch call -> kernel): k1 [10,15) -> [100,110), k2 [20,28) -> [115,120),
// k3 [200,205) -> [205,215), k4 [300,305) -> [310,320), k5 [400,405) -> [420,430), k6 [405,410)
// -> [480,490), k7 [1010,1015) -> [1020,1030); a pageable device-to-host copy whose call
// [1035,1070) blocks the host from its op's start [1045,1050) to the call's end; k8 [1080,1085)
// -> [1090,1100). The host: a
// cudaStreamSynchronize [130,190) (with its cuda_sync "Stream Sync" row [131,189) on stream 7),
// the dataloader [220,280), a cuda_sync "Context Sync" [600,700) (no stream). Gaps of step 1's
// window [100,1020): [110,115) k2 queued, 5 us: latency; [120,205) k3 launched late while the
// host synchronised: sync 85; [215,310) late, in the dataloader: 95; [320,420) late: host 100;
// [430,480) k6 queued, 50 us: other; [490,1020) k7 late, the context sync: sync 530. Step 2's
// window [1020,1100): [1030,1045) late, the copy's own launch: host 15; [1050,1090) late while
// the copy blocked the host: sync 40.
static const char idle_trace[] =
    "{\"traceEvents\": [\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"ts\":0,\"dur\":1000},"
    "\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"ts\":1000,"
    "\"dur\":1000},\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"enumerate(DataLoader)#_Iter.__next__\","
    "\"ts\":220,\"dur\":60},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":10,\"dur\":5,"
    "\"args\":{\"correlation\":1}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":20,\"dur\":8,"
    "\"args\":{\"correlation\":2}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaStreamSynchronize\",\"ts\":130,"
    "\"dur\":60,\"args\":{\"correlation\":50}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"Stream Sync\",\"ts\":131,\"dur\":58,"
    "\"args\":{\"stream\":7,\"correlation\":50,\"device\":0}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":200,\"dur\":5,"
    "\"args\":{\"correlation\":3}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":300,\"dur\":5,"
    "\"args\":{\"correlation\":4}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":400,\"dur\":5,"
    "\"args\":{\"correlation\":5}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":405,\"dur\":5,"
    "\"args\":{\"correlation\":6}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"Context Sync\",\"ts\":600,\"dur\":100,"
    "\"args\":{\"stream\":-1,\"correlation\":51,\"device\":0}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":1010,\"dur\":5,"
    "\"args\":{\"correlation\":7}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\",\"ts\":1035,\"dur\":35,"
    "\"args\":{\"correlation\":9}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":1080,\"dur\":5,"
    "\"args\":{\"correlation\":8}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k1\",\"ts\":100,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":1}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k2\",\"ts\":115,\"dur\":5,"
    "\"args\":{\"stream\":7,\"correlation\":2}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k3\",\"ts\":205,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":3}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k4\",\"ts\":310,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":4}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k5\",\"ts\":420,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":5}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k6\",\"ts\":480,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":6}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k7\",\"ts\":1020,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":7}},\n"
    "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoH (Device -> Pageable)\","
    "\"ts\":1045,\"dur\":5,\"args\":{\"stream\":7,\"correlation\":9}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k8\",\"ts\":1090,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":8}}\n"
    "]}\n";

static void test_idle(void) {
  TpTrace *t = read_mem("idle.json", idle_trace, strlen(idle_trace));
  if (!t) {
    return;
  }
  CHECK_INT(t->syncs[TP_TRACE_SYNC_CALL], 1);
  CHECK_INT(t->syncs[TP_TRACE_SYNC_STREAM], 1);
  CHECK_INT(t->syncs[TP_TRACE_SYNC_CONTEXT], 1);
  CHECK_INT(t->syncs[TP_TRACE_SYNC_COPY], 1);  // the pageable DtoH copy
  CHECK_INT(t->graph_launches, 0);
  CHECK_INT(t->nops, 9);
  uint8_t class_of[16] = {0};
  const uint8_t kinds[1] = {TP_TRACE_COMPUTE};
  TpTraceBreakdown b;
  TpError err = {0};
  TpTraceBreakdownOpts opts = {.gap = 0};  // the default: 30 us
  int rc = tp_trace_breakdown_with(t, class_of, kinds, 1, &opts, &b, &err);
  CHECK_REPORT_(rc == 0, "breakdown: %s", err.msg);
  if (rc != 0) {
    tp_trace_free(t);
    return;
  }
  CHECK_INT(b.gap, 30000);
  CHECK_INT(b.nsteps, 2);
  const TpTraceStepTime *s1 = &b.steps[0], *s2 = &b.steps[1];
  CHECK_INT(s1->window, 920000);
  CHECK_INT(s1->idle, 865000);
  CHECK_INT(s1->cause[TP_TRACE_CAUSE_LATENCY], 5000);
  CHECK_INT(s1->cause[TP_TRACE_CAUSE_SYNC], 85000 + 530000);
  CHECK_INT(s1->cause[TP_TRACE_CAUSE_LOADER], 95000);
  CHECK_INT(s1->cause[TP_TRACE_CAUSE_HOST], 100000);
  CHECK_INT(s1->cause[TP_TRACE_CAUSE_OTHER], 50000);
  CHECK_INT(s1->host_wait, 85000 + 95000 + 100000 + 530000);  // the launch call's end: k2, k6 not
  CHECK_INT(s2->window, 80000);
  CHECK_INT(s2->idle, 55000);
  CHECK_INT(s2->cause[TP_TRACE_CAUSE_HOST], 15000);
  CHECK_INT(s2->cause[TP_TRACE_CAUSE_SYNC], 40000);
  for (size_t k = 0; k < b.nsteps; k++) {
    int64_t sum = 0;
    for (int c = 0; c < TP_TRACE_CAUSES; c++) {
      sum += b.steps[k].cause[c];
    }
    CHECK_INT(sum, b.steps[k].idle);
  }
  // The same trace with a threshold of 60 us: k6's gap of 50 us is latency now.
  TpTraceBreakdown b60;
  opts.gap = 60000;
  if (tp_trace_breakdown_with(t, class_of, kinds, 1, &opts, &b60, &err) == 0) {
    CHECK_INT(b60.steps[0].cause[TP_TRACE_CAUSE_LATENCY], 55000);
    CHECK_INT(b60.steps[0].cause[TP_TRACE_CAUSE_OTHER], 0);
    tp_trace_breakdown_free(&b60);
  }
  // Launches of step 1: six kernels, k2 shorter than its call (5 us against 8); delays 90, 95,
  // 5, 10, 20, 75 us: the nearest-rank median is the third of six, 20.
  const TpTraceLaunchStats *l = &s1->launch;
  CHECK_INT(l->count, 6);
  CHECK_INT(l->shorter, 1);
  CHECK_INT(l->cpu, 33000);
  CHECK_INT(l->gpu, 55000);
  CHECK_INT(l->delay_sum, 295000);
  CHECK_INT(l->delay_min, 5000);
  CHECK_INT(l->delay_p50, 20000);
  CHECK_INT(l->delay_p90, 95000);
  CHECK_INT(l->delay_max, 95000);
  CHECK_INT(s2->launch.count, 2);  // k7, k8 (the copy is not a kernel)
  CHECK_INT(b.launch.count, 6);    // the steady windows: step 1's
  CHECK_INT(b.launch.delay_p50, 20000);
  CHECK_INT(b.launch.delay_max, 95000);
  // The longest op of step 1: 10 us, k1 first.
  CHECK_INT(s1->longest, 10000);
  CHECK(s1->longest_name < t->nnames && strcmp(name_of(t, s1->longest_name), "k1") == 0);
  // The queue of stream 7 over step 1's window [100, 1020): 2 in [100,110) and [405,430),
  // 1 for 10 + 15 + 20 + 5 + 60 + 10 us, empty 765 us; area 190 us.
  CHECK_INT(b.nstreams, 1);
  if (b.nstreams == 1) {
    const TpTraceQueueStat *q = &s1->queue[0];
    CHECK_INT(q->stream, 7);
    CHECK_INT(q->max, 2);
    CHECK_INT(q->empty, 765000);
    CHECK(q->mean > 190.0 / 920.0 - 1e-9 && q->mean < 190.0 / 920.0 + 1e-9);
    // HTA's per-stream breakdown over its view (the ops launched before step 2: k1..k6):
    // k2 5 us kernel wait, k3 85 + k4 95 + k5 100 host wait, k6 50 other.
    const TpTraceIdleStream *h = &b.hta_idle[0];
    CHECK_INT(h->stream, 7);
    CHECK_INT(h->ops, 6);
    CHECK_INT(h->host, 280000);
    CHECK_INT(h->kernel, 5000);
    CHECK_INT(h->other, 50000);
  }
  // HTA's whole view counts the Stream Sync row on stream 7 (launched in step 1) as a GPU row;
  // ours does not: span [100, 490) either way, busy 55 against 55 + 58 us.
  CHECK_INT(b.whole.ops, 6);
  CHECK_INT(b.whole.span, 390000);
  CHECK_INT(b.whole.idle, 335000);
  CHECK_INT(b.whole.rounded.syncs, 1);
  CHECK_INT(b.whole.rounded.span, 390000);
  CHECK_INT(b.whole.rounded.idle, 277000);
  CHECK_INT(b.whole.rounded.compute, 55000);
  CHECK_INT(b.whole.rounded.non_compute, 58000);
  tp_trace_breakdown_free(&b);
  tp_trace_free(t);
}

// A queue across windows: kernel b is launched at 2 us and runs [330, 340), so it is queued through
// the whole of steps 2 and 3's windows and into step 4's. Windows [10,110), [110,210), [210,310),
// [310,320); each has its own kernel (10 us) and the next one launched 9 us before its end.
static const char queue_trace[] =
    "{\"traceEvents\": [\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"ts\":0,\"dur\":100},\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"ts\":100,\"dur\":100},"
    "\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#3\",\"ts\":200,\"dur\":100},"
    "\n"
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#4\",\"ts\":300,\"dur\":100},"
    "\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":1,\"dur\":1,"
    "\"args\":{\"correlation\":1}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":2,\"dur\":1,"
    "\"args\":{\"correlation\":2}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":101,\"dur\":1,"
    "\"args\":{\"correlation\":3}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":201,\"dur\":1,"
    "\"args\":{\"correlation\":4}},\n"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":301,\"dur\":1,"
    "\"args\":{\"correlation\":5}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\",\"ts\":10,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":1}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"b\",\"ts\":330,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":2}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"c\",\"ts\":110,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":3}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"d\",\"ts\":210,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":4}},\n"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"e\",\"ts\":310,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":5}}\n"
    "]}\n";

static void test_queue(void) {
  TpTrace *t = read_mem("queue.json", queue_trace, strlen(queue_trace));
  if (!t) {
    return;
  }
  TpTraceBreakdown b;
  if (breakdown3(t, &b) == 0) {
    CHECK_INT(b.nsteps, 4);
    CHECK_INT(b.nstreams, 1);
    // per window (us): b queued throughout but where it is launched (step 1 from 10) and where
    // it ends (after step 4's window); the window's own kernel 10 us more; the next step's
    // kernel launched 9 us before the end. Areas 119, 119, 119 of 100 us, then 2 x 10 of 10.
    const double mean[4] = {1.19, 1.19, 1.19, 2.0};
    for (size_t k = 0; k < b.nsteps && k < 4 && b.nstreams == 1; k++) {
      const TpTraceQueueStat *q = &b.steps[k].queue[0];
      CHECK_INT(q->max, 2);
      CHECK_INT(q->empty, 0);
      CHECK_REPORT_(q->mean > mean[k] - 1e-9 && q->mean < mean[k] + 1e-9, "window %zu: mean %f", k,
                    q->mean);
    }
    tp_trace_breakdown_free(&b);
  }
  tp_trace_free(t);
}

int main(void) {
  if (!make_tmpdir("test_trace")) {
    return 1;
  }
  test_hand();
  test_numbers();
  test_long_kernel();
  test_shapes();
  test_cut();
  test_idle();
  test_queue();
  test_strings();
  test_gzip();
  test_boundaries();
  test_meta_boundaries();
  test_stepless();
  test_whole_rounded();
  test_extremes();
  CHECK_INT(rmdir(tmpdir), 0);
  return CHECK_DONE();
}
