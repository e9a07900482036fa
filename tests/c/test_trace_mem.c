// Unit tests of engine/trace_mem: Kineto's [memory] events read with the trace, each given its op
// (the innermost op that is not an allocator), phase and step; per device the peak (its time,
// op, phase, step), the reserved peak and slack, the totals at the end, what was live at the peak
// by category (worked out by hand below), per step and per op; the peak that moves; bad fields
// counted, never fatal; events out of order; a long trace's curve kept bounded with its peak.
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trace.h"
#include "trace_check.h"

// A trace's text, built event by event.
typedef struct Doc {
  char *p;
  size_t len, cap;
} Doc;

static void put(Doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Doc *d, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->p ? d->p + d->len : NULL, d->p ? d->cap - d->len : 0, fmt, ap);
    va_end(ap);
    if (d->p && (size_t)n < d->cap - d->len) {
      d->len += (size_t)n;
      return;
    }
    d->cap = d->cap * 2 + (size_t)n + 4096;
    d->p = realloc(d->p, d->cap);
  }
}

// A CPU range on thread 1 ([ts, ts + dur) in us).
static void range(Doc *d, const char *cat, const char *name, double ts, double dur) {
  put(d,
      "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 1, \"tid\": 1, "
      "\"ts\": %.3f, \"dur\": %.3f, \"args\": {}},\n",
      cat, name, ts, dur);
}

// A [memory] event on thread 1 of device (type 1, id 0).
static void mem(Doc *d, double ts, long long bytes, unsigned long long addr, long long total,
                long long reserved) {
  put(d,
      "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", "
      "\"pid\": 1, \"tid\": 1, \"ts\": %.3f, \"args\": {\"Total Reserved\": %lld, "
      "\"Total Allocated\": %lld, \"Bytes\": %lld, \"Addr\": %llu, \"Device Id\": 0, "
      "\"Device Type\": 1}},\n",
      ts, reserved, total, bytes, addr);
}

static TpTrace *read_doc(const char *label, Doc *d) {
  put(d, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {}}]}");
  return read_mem(label, d->p, d->len);
}

static long key_named(const TpTrace *t, const char *name) {
  for (size_t k = 0; k < t->nkeys; k++) {
    if (strcmp(t->arena + t->keys[k].at, name) == 0) {
      return (long)k + 1;
    }
  }
  return -1;
}

static const TpTraceMemOp *op_of(const TpTraceMem *m, const TpTrace *t, const char *name) {
  long k = name ? key_named(t, name) : 0;
  for (size_t i = 0; i < m->nops; i++) {
    if ((long)m->ops[i].key == k) {
      return &m->ops[i];
    }
  }
  return NULL;
}

// One training step and the start of the next, worked out by hand.
static void test_step(void) {
  Doc d = {0};
  put(&d, "{\"traceEvents\": [\n");
  range(&d, "user_annotation", "ProfilerStep#1", 0, 1000);
  range(&d, "cpu_op", "aten::linear", 10, 100);
  range(&d, "cpu_op", "aten::addmm", 20, 80);
  range(&d, "cpu_op", "aten::empty", 30, 10);
  range(&d, "cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 200, 100);
  range(&d, "cpu_op", "AddmmBackward0", 205, 90);
  range(&d, "cpu_op", "aten::mm", 210, 80);
  range(&d, "cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 305,
        15);
  range(&d, "user_annotation", "Optimizer.step#AdamW.step", 400, 100);
  range(&d, "cpu_op", "aten::_fused_adamw_", 410, 80);
  range(&d, "user_annotation", "ProfilerStep#2", 1000, 1000);
  range(&d, "user_annotation", "Optimizer.zero_grad#AdamW.zero_grad", 1010, 40);
  mem(&d, 35, 1000, 0x100, 11000, 20000);    // A: in aten::empty, for aten::addmm
  mem(&d, 50, 50, 0x200, 11050, 20000);      // T: addmm's workspace
  mem(&d, 60, -50, 0x200, 11000, 20000);     //    freed inside the call: temporary
  mem(&d, 220, 400, 0x300, 11400, 20000);    // G: backward, the peak
  mem(&d, 230, -1000, 0x100, 10400, 20000);  // A freed in backward: activation
  mem(&d, 240, 10, 0x400, 10410, 20000);     // X: backward, freed after its call, in backward
  mem(&d, 310, -10, 0x400, 10400, 20000);    //    autograd intermediate
  mem(&d, 420, 800, 0x500, 11200, 21000);    // S: optimizer state, never freed
  mem(&d, 450, -64, 0x999, 11136, 21000);    // a free of what predates the trace
  mem(&d, 1020, -400, 0x300, 10736, 21000);  // G freed at the next step's zero_grad: gradient
  TpTrace *t = read_doc("step", &d);
  free(d.p);
  if (!t) {
    return;
  }
  const TpTraceMem *m = tp_trace_memory(t);
  CHECK_INT(m->events, 10);
  CHECK_INT(m->ndevices, 1);
  CHECK_INT(m->skipped + m->other_devices + m->unattributed + m->late_ranges + m->late_steps, 0);
  const TpTraceMemDevice *dv = &m->devices[0];
  CHECK_INT(dv->type, 1);
  CHECK_INT(dv->id, 0);
  CHECK_INT(dv->events, 10);
  CHECK_INT(dv->allocs, 5);
  CHECK_INT(dv->frees, 5);
  CHECK_INT(dv->alloc_bytes, 2260);
  CHECK_INT(dv->free_bytes, 1524);
  CHECK_INT(dv->before, 10000);
  CHECK_INT(dv->peak, 11400);
  CHECK_INT(dv->peak_ts, 220000);
  CHECK_INT(dv->peak_reserved, 20000);
  CHECK_INT(dv->peak_key, key_named(t, "aten::mm"));
  CHECK_INT(dv->peak_phase, TP_TRACE_PHASE_BWD);
  CHECK_INT(t->steps[dv->peak_step].number, 1);
  CHECK_INT(dv->reserved_max, 21000);
  CHECK_INT(dv->reserved_max_ts, 420000);
  CHECK_INT(dv->slack_max, 21000 - 10736);  // at the last event
  CHECK_INT(dv->end_allocated, 10736);
  CHECK_INT(dv->end_reserved, 21000);
  CHECK_INT(dv->live_end, 800);
  CHECK_INT(dv->unpaired_frees, 1);
  CHECK_INT(dv->size_mismatch + dv->realloc + dv->no_addr + dv->derived_total, 0);
  // Live at the peak: A (an activation) and G (a gradient); the rest was there before.
  CHECK_INT(dv->at_peak[TP_TRACE_MEM_ACTIVATION], 1000);
  CHECK_INT(dv->at_peak[TP_TRACE_MEM_GRADIENT], 400);
  CHECK_INT(dv->at_peak[TP_TRACE_MEM_BEFORE], 10000);
  CHECK_INT(dv->at_peak[TP_TRACE_MEM_TEMPORARY] + dv->at_peak[TP_TRACE_MEM_OPTIMIZER] +
                dv->at_peak[TP_TRACE_MEM_AUTOGRAD] + dv->at_peak[TP_TRACE_MEM_OTHER],
            0);
  CHECK_INT(dv->cat_bytes[TP_TRACE_MEM_TEMPORARY], 50);
  CHECK_INT(dv->cat_bytes[TP_TRACE_MEM_ACTIVATION], 1000);
  CHECK_INT(dv->cat_bytes[TP_TRACE_MEM_GRADIENT], 400);
  CHECK_INT(dv->cat_bytes[TP_TRACE_MEM_AUTOGRAD], 10);
  CHECK_INT(dv->cat_bytes[TP_TRACE_MEM_OPTIMIZER], 800);
  CHECK_INT(dv->cat_bytes[TP_TRACE_MEM_OTHER], 0);
  CHECK_INT(dv->ncurve, 10);
  CHECK_INT(dv->curve_stride, 1);
  for (size_t i = 1; i < dv->ncurve; i++) {
    CHECK(dv->curve[i - 1].ts <= dv->curve[i].ts);
  }
  CHECK_INT(dv->curve[3].allocated, 11400);
  // Per step.
  CHECK_INT(m->nsteps, 2);
  const TpTraceMemStep *s1 = &m->steps[0], *s2 = &m->steps[1];
  CHECK_INT(t->steps[s1->step].number, 1);
  CHECK_INT(s1->events, 9);
  CHECK_INT(s1->allocs, 5);
  CHECK_INT(s1->alloc_bytes, 2260);
  CHECK_INT(s1->start, 10000);
  CHECK_INT(s1->end, 11136);
  CHECK_INT(s1->peak, 11400);
  CHECK_INT(s1->peak_ts, 220000);
  CHECK_INT(s1->phase_peak[TP_TRACE_PHASE_FWD], 11050);
  CHECK_INT(s1->phase_peak[TP_TRACE_PHASE_BWD], 11400);
  CHECK_INT(s1->phase_peak[TP_TRACE_PHASE_OPT], 11200);
  CHECK_INT(s1->phase_bytes[TP_TRACE_PHASE_FWD], 1050);
  CHECK_INT(s1->phase_bytes[TP_TRACE_PHASE_BWD], 410);
  CHECK_INT(s1->phase_bytes[TP_TRACE_PHASE_OPT], 800);
  CHECK_INT(s1->held, 1200);  // G and S, allocated in step 1, live at its end
  CHECK_INT(s1->temporary, 50);
  CHECK_INT(t->steps[s2->step].number, 2);
  CHECK_INT(s2->events, 1);
  CHECK_INT(s2->start, 11136);
  CHECK_INT(s2->end, 10736);
  CHECK_INT(s2->peak, 10736);
  CHECK_INT(s2->phase_peak[TP_TRACE_PHASE_FWD], -1);
  // Per op: aten::empty's memory is aten::addmm's.
  CHECK(op_of(m, t, "aten::empty") == NULL);
  const TpTraceMemOp *addmm = op_of(m, t, "aten::addmm");
  const TpTraceMemOp *mm = op_of(m, t, "aten::mm");
  const TpTraceMemOp *adam = op_of(m, t, "aten::_fused_adamw_");
  CHECK(addmm && mm && adam);
  if (addmm && mm && adam) {
    CHECK_INT(addmm->allocs, 2);
    CHECK_INT(addmm->bytes, 1050);
    CHECK_INT(addmm->frees, 2);
    CHECK_INT(addmm->temporary, 50);
    CHECK_INT(addmm->at_peak, 1000);
    CHECK_INT(mm->bytes, 410);
    CHECK_INT(mm->at_peak, 400);
    CHECK_INT(mm->phase_allocs[TP_TRACE_PHASE_BWD], 2);
    CHECK_INT(adam->live_end, 800);
    CHECK_INT(adam->phase_allocs[TP_TRACE_PHASE_OPT], 1);
  }
  int64_t sum = 0;
  for (size_t i = 0; i < m->nops; i++) {
    sum += m->ops[i].bytes;
  }
  CHECK_INT(sum, dv->alloc_bytes);
  tp_trace_free(t);
}

// A peak that moves: what was live at the first one no longer counts.
static void test_peak_moves(void) {
  Doc d = {0};
  put(&d, "{\"traceEvents\": [\n");
  range(&d, "cpu_op", "aten::a", 0, 10);
  range(&d, "cpu_op", "aten::b", 20, 10);
  range(&d, "cpu_op", "aten::c", 40, 10);
  mem(&d, 5, 100, 0x10, 1100, 2000);  // first peak 1100 (A)
  mem(&d, 25, 50, 0x20, 1150, 2000);  // 1150: higher, B
  mem(&d, 26, -100, 0x10, 1050, 2000);
  mem(&d, 45, 80, 0x30, 1130, 2000);   // not higher
  mem(&d, 46, 200, 0x40, 1330, 2000);  // peak 1330: B, C, D live
  mem(&d, 47, -50, 0x20, 1280, 2000);
  TpTrace *t = read_doc("moves", &d);
  free(d.p);
  if (!t) {
    return;
  }
  const TpTraceMem *m = tp_trace_memory(t);
  const TpTraceMemDevice *dv = &m->devices[0];
  CHECK_INT(dv->peak, 1330);
  CHECK_INT(dv->peak_ts, 46000);
  CHECK_INT(dv->peak_key, key_named(t, "aten::c"));
  CHECK_INT(dv->before, 1000);
  int64_t tracked = 0;
  for (int c = 0; c < TP_TRACE_MEM_CATS; c++) {
    tracked += c == TP_TRACE_MEM_BEFORE ? 0 : dv->at_peak[c];
  }
  CHECK_INT(tracked, 50 + 80 + 200);
  CHECK_INT(dv->at_peak[TP_TRACE_MEM_BEFORE], 1000);
  CHECK_INT(op_of(m, t, "aten::a")->at_peak, 0);
  CHECK_INT(op_of(m, t, "aten::b")->at_peak, 50);
  CHECK_INT(op_of(m, t, "aten::c")->at_peak, 280);
  CHECK_INT(dv->live_end, 280);
  tp_trace_free(t);
}

// Bad fields are counted, and the rest of the trace is read.
static void test_bad_fields(void) {
  Doc d = {0};
  put(&d, "{\"traceEvents\": [\n");
  range(&d, "cpu_op", "aten::x", 0, 100);
  const char *ev = "{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": %d, "
                   "\"args\": {%s}},\n";
  put(&d, ev, 1, "\"Total Allocated\": 10, \"Addr\": 1, \"Device Type\": 1, \"Device Id\": 0");
  put(&d, ev, 2, "\"Bytes\": \"x\", \"Device Type\": 1, \"Device Id\": 0");
  put(&d, ev, 3, "\"Bytes\": 1e30, \"Device Type\": 1, \"Device Id\": 0");
  put(&d, ev, 4, "\"Bytes\": 100, \"Total Allocated\": 1100, \"Device Type\": 1, \"Device Id\": 0");
  put(&d, ev, 5,
      "\"Bytes\": 100, \"Addr\": -5, \"Total Allocated\": 1200, \"Total Reserved\": 4096, "
      "\"Device Type\": 1, \"Device Id\": 0");
  put(&d, ev, 6, "\"Bytes\": 10, \"Addr\": 77, \"Device Type\": 1, \"Device Id\": 0");
  put(&d, ev, 7,
      "\"Bytes\": 10, \"Addr\": 77, \"Total Allocated\": -3, \"Total Reserved\": -1, "
      "\"Device Type\": 1, \"Device Id\": 0");
  put(&d, ev, 8,
      "\"Bytes\": -9, \"Addr\": 77, \"Total Allocated\": 1211, \"Device Type\": 1, "
      "\"Device Id\": 0");
  put(&d, ev, 9, "\"Bytes\": 4, \"Addr\": 9, \"Total Allocated\": 4, \"Device Type\": \"cpu\"");
  for (int k = 0; k < 20; k++) {
    char args[128];
    snprintf(args, sizeof(args),
             "\"Bytes\": 1, \"Addr\": 5, \"Total Allocated\": 1, "
             "\"Device Type\": 1, \"Device Id\": %d",
             k + 1);
    put(&d, ev, 10 + k, args);
  }
  put(&d, "{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"args\": "
          "{\"Bytes\": 1}},\n");
  TpTrace *t = read_doc("bad", &d);
  free(d.p);
  if (!t) {
    return;
  }
  const TpTraceMem *m = tp_trace_memory(t);
  CHECK_INT(m->events, 29);  // the one without ts is the trace's bad event
  CHECK_INT(t->bad, 1);
  CHECK_INT(m->skipped, 3);  // no Bytes, a string, 1e30
  CHECK_INT(m->ndevices, TP_TRACE_MEM_DEVICES);
  CHECK_INT(m->other_devices, 20 - (TP_TRACE_MEM_DEVICES - 2));
  const TpTraceMemDevice *dv = &m->devices[0];
  CHECK_INT(dv->type, 1);
  CHECK_INT(dv->events, 5);
  CHECK_INT(dv->no_addr, 2);        // none, and -5
  CHECK_INT(dv->derived_total, 2);  // none, and -3
  CHECK_INT(dv->bad_total, 1);
  CHECK_INT(dv->no_reserved, 4);
  CHECK_INT(dv->realloc, 1);
  CHECK_INT(dv->size_mismatch, 1);
  CHECK_INT(dv->peak, 1220);  // 1200 + 10 + 10: the totals derived from the one before
  CHECK_INT(dv->reserved_max, 4096);
  CHECK(t->warnings > 0 && has(t->warning, "[memory] event"));
  const TpTraceMemDevice *unk = &m->devices[1];
  CHECK_INT(unk->type, -1);  // a Device Type that is not a number
  CHECK_INT(unk->peak, 4);
  tp_trace_free(t);
}

// Memory events before the ranges that hold them, and a thread that steps back in time.
static void test_order(void) {
  Doc d = {0};
  put(&d, "{\"traceEvents\": [\n");
  mem(&d, 5, 8, 0x1, 8, 0);
  range(&d, "cpu_op", "aten::late", 0, 10);
  for (int k = 0; k < 20; k++) {
    mem(&d, 100 - k, 8, 0x100 + k, 16 + 8 * k, 0);
  }
  TpTrace *t = read_doc("order", &d);
  free(d.p);
  if (!t) {
    return;
  }
  const TpTraceMem *m = tp_trace_memory(t);
  CHECK_INT(m->late_ranges, 1);
  CHECK_INT(m->unattributed, 19 - 16);  // 19 steps back, 16 rescans allowed
  CHECK_INT(m->devices[0].events, 21);
  tp_trace_free(t);
}

// A long trace: the curve stays bounded and keeps the peak.
static void test_long(void) {
  Doc d = {0};
  put(&d, "{\"traceEvents\": [\n");
  long long total = 0;
  int n = 30000;
  for (int k = 0; k < n; k++) {
    long long b = k == 12345 ? 1000000 : 100 + k % 7;
    total += b;
    mem(&d, k, b, 0x1000 + (unsigned long long)k, total, 1 << 30);
    total -= b;
    mem(&d, k + 0.5, -b, 0x1000 + (unsigned long long)k, total, 1 << 30);
  }
  TpTrace *t = read_doc("long", &d);
  free(d.p);
  if (!t) {
    return;
  }
  const TpTraceMemDevice *dv = &tp_trace_memory(t)->devices[0];
  CHECK_INT(dv->events, 2 * n);
  CHECK_INT(dv->peak, 1000000);
  CHECK_INT(dv->peak_ts, 12345000);
  CHECK(dv->ncurve <= 2 * 4096 && dv->ncurve > 4096);
  CHECK(dv->curve_stride >= 8);
  bool found = false;
  for (size_t i = 0; i < dv->ncurve; i++) {
    found = found || (dv->curve[i].allocated == 1000000 && dv->curve[i].ts == 12345000);
    CHECK(i == 0 || dv->curve[i - 1].ts <= dv->curve[i].ts);
  }
  CHECK(found);
  CHECK_INT(dv->live_end, 0);
  CHECK_INT(dv->at_peak[TP_TRACE_MEM_OTHER], 1000000);  // outside every op
  tp_trace_free(t);
}

// A whole file, plain or gzip, and the errors of one that is missing.
static void test_read_text(void) {
  const char text[] = "[[-1, 1, 512, 7]]";
  char path[256];
  write_file("t.json", text, sizeof(text) - 1, path, sizeof(path));
  TpBuf b = {0};
  bool trunc = true;
  TpError err = {0};
  CHECK_INT(tp_trace_read_text(path, 1 << 20, &b, &trunc, &err), 0);
  CHECK_INT(b.len, sizeof(text) - 1);
  CHECK(!trunc && memcmp(b.data, text, b.len) == 0);
  tp_buf_free(&b);
  CHECK_INT(tp_trace_read_text(path, 4, &b, &trunc, &err), TP_ELIMIT);
  CHECK(has(err.msg, "t.json"));
  tp_buf_free(&b);
  char missing[300];
  snprintf(missing, sizeof(missing), "%s/none.json.gz", tmpdir);
  CHECK(tp_trace_read_text(missing, 1 << 20, &b, &trunc, &err) < 0);
  CHECK(has(err.msg, "none.json.gz"));
  tp_buf_free(&b);
  unlink(path);
}

int main(void) {
  if (!make_tmpdir("tplua-trace-mem")) {
    return 1;
  }
  test_step();
  test_peak_moves();
  test_bad_fields();
  test_order();
  test_long();
  test_read_text();
  rmdir(tmpdir);
  return CHECK_DONE();
}
