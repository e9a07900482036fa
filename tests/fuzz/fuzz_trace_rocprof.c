// libFuzzer target for engine/trace_rocprof: the input is read as a rocprofv3 CSV (plain or
// gzip) from memory, whatever its first line, so that headers are fuzzed too. A refusal must be
// one of the reader's codes with a message naming the input; an accepted trace must be consistent
// (every row counted once, names, steps, ops), and its breakdown, with name id % 3 picking the
// class (compute, communication, memory), must fill each window exactly.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "trace_rocprof.h"
#include "trace_src.h"
#include "trace_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    REQUIRE(st->window >= 0 && st->busy >= 0 && st->busy <= st->window);
    REQUIRE(st->idle == st->window - st->busy);
    REQUIRE(st->compute >= 0 && st->compute <= st->busy);
    REQUIRE(st->non_compute == st->busy - st->compute);
    REQUIRE(st->comm_overlapped >= 0 && st->comm_overlapped <= st->comm);
    REQUIRE(st->host_wait >= 0 && st->host_wait <= st->idle);
    double excl = 0;
    uint64_t count = 0;
    for (size_t c = 0; c < b->nclasses; c++) {
      excl += st->cls[c].exclusive;
      count += st->cls[c].count;
    }
    REQUIRE(count == st->ops);
    REQUIRE(fabs(excl + (double)st->idle - (double)st->window) <=
            1e-9 * (double)st->window + 1e-6 * (double)(st->ops + 1));
  }
  REQUIRE(b->whole.compute + b->whole.non_compute + b->whole.idle == b->whole.span);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);  // its own block, so that an overread is caught
  memcpy(copy, data, size);
  TpError err = {0};
  TpTraceSrc *src = NULL;
  REQUIRE(tp_trace_src_mem("fuzz", copy, size, &src, &err) == 0);
  TpTrace *t = tp_trace_new("fuzz");
  REQUIRE(t != NULL);
  int rc = tp_trace_parse_rocprof_csv(src, t, &err);
  tp_trace_src_free(src);
  if (rc != 0) {
    REQUIRE(rc == TP_EPARSE || rc == TP_ELIMIT || rc == TP_ENOMEM);
    REQUIRE(err.code == rc && strncmp(err.msg, "fuzz: ", 6) == 0);
    tp_trace_free(t);
    free(copy);
    return 0;
  }
  REQUIRE(tp_trace_finish(t) == 0);
  REQUIRE(t->warnings > 0 ? t->warning[0] != '\0' : t->warning[0] == '\0');
  REQUIRE(!t->truncated || t->warnings > 0);
  REQUIRE(t->events >= t->ignored + t->bad + t->nops + t->launches);
  uint64_t cats = 0;
  tp_trace_categories(t, count_cat, &cats);
  REQUIRE(cats <= t->events);
  uint64_t named = 0;
  for (size_t i = 0; i < t->nnames; i++) {
    REQUIRE(t->names[i].at + t->names[i].len < t->arena_len);
    REQUIRE(strlen(t->arena + t->names[i].at) == t->names[i].len);  // no NUL in a name
    REQUIRE(t->names[i].kind == TP_TRACE_KERNEL || t->names[i].kind == TP_TRACE_MEMCPY);
    REQUIRE(t->names[i].count > 0 && t->names[i].total >= 0);
    named += t->names[i].count;
  }
  REQUIRE(named == t->nops);
  REQUIRE(t->stepless ? t->nsteps == 1 : t->nsteps == 0);
  for (size_t i = 0; i < t->nops; i++) {
    REQUIRE(t->ops[i].name < t->nnames && tp_trace_op_dur(t, i) >= 0);
    REQUIRE(t->ops[i].step == 0);
  }
  uint8_t *class_of = malloc(t->nnames + 1);
  for (size_t i = 0; i < t->nnames; i++) {
    class_of[i] = (uint8_t)(i % 3);
  }
  static const uint8_t kinds[3] = {TP_TRACE_COMPUTE, TP_TRACE_COMMUNICATION, TP_TRACE_MEMORY};
  TpTraceBreakdown b;
  REQUIRE(tp_trace_breakdown(t, class_of, kinds, 3, &b, &err) == 0);
  check_breakdown(t, &b);
  tp_trace_breakdown_free(&b);
  free(class_of);
  tp_trace_free(t);
  free(copy);
  return 0;
}
