// Unit tests of engine/trace_cpu: CPU ops kept by key (name and shape arguments, whitespace
// squeezed), nested per thread as they stream in (a parent written after its child at the same
// start, ranges out of time order), GPU ops linked through their launch's External id (or their
// own), and the per-key figures: calls, busy time per call (the union of its ops), owners, the
// nn.Module around an op, phases, steps, threads interleaved in launch order.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trace.h"
#include "trace_check.h"

static TpTrace *read_str(const char *label, const char *doc) {
  return read_mem(label, doc, strlen(doc));
}

static const char *key_name(const TpTrace *t, size_t k) {
  return t->arena + t->keys[k].at;
}

// The text of argument a (0: Input Dims ...) of key k, or NULL when absent.
static const char *key_arg(const TpTrace *t, size_t k, int a) {
  const TpTraceOpKey *key = &t->keys[k];
  if (!(key->has >> a & 1)) {
    return NULL;
  }
  size_t at = key->at + key->len[0] + 1;
  for (int i = 0; i < a; i++) {
    if (key->has >> i & 1) {
      at += key->len[i + 1] + 1;
    }
  }
  return t->arena + at;
}

// The id of the key named `name` whose Input Dims text is `dims` (NULL: any), or -1.
static long key_id(const TpTrace *t, const char *name, const char *dims) {
  for (size_t k = 0; k < t->nkeys; k++) {
    if (strcmp(key_name(t, k), name) == 0 &&
        (!dims || (key_arg(t, k, 0) && strcmp(key_arg(t, k, 0), dims) == 0))) {
      return (long)k;
    }
  }
  return -1;
}

// Runs tp_trace_ops with the keys named in `names` (NULL-terminated) wanted.
static bool ops_with(TpTrace *t, const char *const *names, uint32_t step, TpTraceOps *o) {
  uint8_t *wanted = calloc(t->nkeys + 1, 1);
  for (size_t k = 0; k < t->nkeys; k++) {
    for (const char *const *n = names; n && *n; n++) {
      wanted[k] |= strcmp(key_name(t, k), *n) == 0;
    }
  }
  TpError err = {0};
  int rc = tp_trace_ops(t, wanted, step, o, &err);
  free(wanted);
  CHECK_REPORT_(rc == 0, "tp_trace_ops: %d %s", rc, err.msg);
  return rc == 0;
}

#define EV(cat, name, ts, dur, args)                                                               \
  "{\"ph\": \"X\", \"cat\": \"" cat "\", \"name\": \"" name "\", \"pid\": 7, \"tid\": 1, "         \
  "\"ts\": " #ts ", \"dur\": " #dur ", \"args\": {" args "}},\n"
#define EV_T(tid, cat, name, ts, dur, args)                                                        \
  "{\"ph\": \"X\", \"cat\": \"" cat "\", \"name\": \"" name "\", \"pid\": 7, \"tid\": " #tid       \
  ", \"ts\": " #ts ", \"dur\": " #dur ", \"args\": {" args "}},\n"
#define GPU(name, ts, dur, corr)                                                                   \
  "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" name "\", \"pid\": 0, \"tid\": 7, "          \
  "\"ts\": " #ts ", \"dur\": " #dur ", \"args\": {\"correlation\": " #corr "}},\n"

// Two calls of aten::linear -> aten::addmm (the second with its dims on several lines), a
// GEMM and a memset under each; a view op that launches nothing; module frames written after the
// ops, as Kineto writes python_function events.
static const char linear[] = "{\"traceEvents\": [\n"                         //
    EV("user_annotation", "ProfilerStep#5", 100, 400, "\"External id\": 1")  //
    EV("cpu_op", "aten::linear", 110, 50,
       "\"External id\": 2, \"Input Dims\": [[8, 16], [32, 16], [32]]")                //
    EV("cpu_op", "aten::t", 111, 2, "\"External id\": 3, \"Input Dims\": [[32, 16]]")  //
    EV("cpu_op", "aten::addmm", 115, 40,
       "\"External id\": 4, \"Input Dims\": [[32], [8, 16], [16, 32], [], []], \"Input type\": "
       "[\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", \"Scalar\", \"Scalar\"]")    //
    EV("cuda_runtime", "cudaMemsetAsync", 120, 2, "\"External id\": 4, \"correlation\": 10")   //
    EV("cuda_runtime", "cudaLaunchKernel", 130, 5, "\"External id\": 4, \"correlation\": 11")  //
    EV("cpu_op", "aten::linear", 210, 50,
       "\"External id\": 5, \"Input Dims\": [[8, 16], [32, 16], [32]]")  //
    EV("cpu_op", "aten::addmm", 215, 40,
       "\"External id\": 6, \"Input Dims\": [\n  [32],\n  [8, 16], [16, 32], [], []], \"Input "
       "type\": [\"c10::BFloat16\", \"c10::BFloat16\", \"c10::BFloat16\", \"Scalar\", \"Scalar\"]")  //
    EV("cuda_runtime", "cudaMemsetAsync", 220, 2, "\"External id\": 6, \"correlation\": 12")   //
    EV("cuda_runtime", "cudaLaunchKernel", 230, 5, "\"External id\": 6, \"correlation\": 13")  //
    EV("python_function", "nn.Module: Block_0", 105, 200, "")                                  //
    EV("python_function", "nn.Module: Linear_0", 108, 60, "")                                  //
    EV("python_function", "nn.Module: Linear_1", 208, 60, "")                                  //
    EV("python_function", "torch/nn/modules/linear.py(114): forward", 108, 60, "")             //
    GPU("Memset (Device)", 300, 1, 10)                                                         //
    GPU("gemm_a", 302, 20, 11)                                                                 //
    GPU("Memset (Device)", 330, 1, 12)                                                         //
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_a\", \"pid\": 0, \"tid\": 7, "
    "\"ts\": 332, \"dur\": 30, \"args\": {\"correlation\": 13}}\n"
    "]}";

static void test_linear(void) {
  TpTrace *t = read_str("linear.json", linear);
  if (!t) {
    return;
  }
  CHECK_INT(t->cpu_ranges, 8);  // 5 ops and 3 module frames (the step is a step)
  CHECK_INT(t->linked, 4);
  CHECK_INT(t->unordered, 0);
  long lin = key_id(t, "aten::linear", NULL), addmm = key_id(t, "aten::addmm", NULL);
  long view = key_id(t, "aten::t", NULL);
  CHECK(lin >= 0 && addmm >= 0 && view >= 0);
  CHECK(key_id(t, "torch/nn/modules/linear.py(114): forward", NULL) < 0);  // not a module frame
  if (lin < 0 || addmm < 0 || view < 0) {
    tp_trace_free(t);
    return;
  }
  // One key per distinct op: the second addmm's dims, on several lines, are the same text.
  CHECK_INT(t->keys[addmm].count, 2);
  CHECK_INT(t->keys[lin].count, 2);
  CHECK_STR(key_arg(t, addmm, 0), "[[32],[8,16],[16,32],[],[]]");
  CHECK_STR(key_arg(t, addmm, 1),
            "[\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\",\"Scalar\"]");
  CHECK(key_arg(t, addmm, 2) == NULL && key_arg(t, addmm, 3) == NULL);
  CHECK_INT(t->keys[addmm].kind, TP_TRACE_CPU_OP);
  long mod = key_id(t, "nn.Module: Linear_0", NULL), block = key_id(t, "nn.Module: Block_0", NULL);
  CHECK(mod >= 0 && block >= 0);
  if (mod >= 0) {
    CHECK_INT(t->keys[mod].kind, TP_TRACE_CPU_MODULE);
  }

  // addmm wanted: it owns its memset and GEMM; linear's busy time is the same per call.
  static const char *const want_addmm[] = {"aten::addmm", NULL};
  TpTraceOps o;
  if (ops_with(t, want_addmm, TP_TRACE_NO_STEP, &o)) {
    CHECK_INT(o.nstats, t->nkeys);
    CHECK_INT(o.linked, 4);
    CHECK_INT(o.unlinked, 0);
    const TpTraceOpStat *a = &o.stats[addmm], *l = &o.stats[lin], *v = &o.stats[view];
    CHECK_INT(a->calls, 2);
    CHECK_INT(a->ops, 4);
    CHECK_INT(a->time, 21000 + 31000);
    CHECK_INT(a->min, 21000);
    CHECK_INT(a->max, 31000);
    CHECK_NUM(a->time_sq, 21000.0 * 21000 + 31000.0 * 31000, 1e-12);
    CHECK_NUM(a->inv, 1.0 / 21000 + 1.0 / 31000, 1e-12);
    CHECK_INT(a->own, 52000);
    CHECK_INT(a->own_ops, 4);
    CHECK_INT(a->phase[TP_TRACE_PHASE_FWD], 2);
    CHECK_INT(l->calls, 2);
    CHECK_INT(l->time, 52000);
    CHECK_INT(l->own, 0);    // its ops are addmm's
    CHECK_INT(v->calls, 0);  // launches nothing
    // The module around the first owned op, and the frame around that one.
    CHECK_INT(a->module, mod + 1);
    CHECK_INT(a->module_parent, block + 1);
    // Kernels by owner and name: two memsets, two GEMMs.
    CHECK_INT(o.nkernels, 2);
    for (size_t i = 0; i < o.nkernels; i++) {
      CHECK_INT(o.kernels[i].key, addmm);
      CHECK_INT(o.kernels[i].count, 2);
      const char *n = name_of(t, o.kernels[i].name);
      CHECK_INT(o.kernels[i].total, strcmp(n, "gemm_a") == 0 ? 50000 : 2000);
    }
    tp_trace_ops_free(&o);
  }
  // linear wanted, addmm not: linear owns them.
  static const char *const want_linear[] = {"aten::linear", NULL};
  if (ops_with(t, want_linear, TP_TRACE_NO_STEP, &o)) {
    CHECK_INT(o.stats[lin].own, 52000);
    CHECK_INT(o.stats[addmm].own, 0);
    CHECK_INT(o.stats[addmm].calls, 2);
    tp_trace_ops_free(&o);
  }
  // None wanted: the launcher (addmm) owns them; the step filter keeps all of them in step 5.
  if (ops_with(t, NULL, 0, &o)) {
    CHECK_INT(o.stats[addmm].own, 52000);
    CHECK_INT(o.linked, 4);
    tp_trace_ops_free(&o);
  }
  tp_trace_free(t);
}

// A parent written after its child at the same start; a range out of time order on its thread;
// a second thread whose launches interleave with the first's; phases from the autograd engine and
// an optimizer step; a launch without External id (the kernel's own is used); a kernel whose
// launch is missing; an External id past 32 bits; ranges not in External id order.
static const char nesting[] = "{\"traceEvents\": [\n"  //
    EV("cpu_op", "aten::native_layer_norm", 100, 10,
       "\"External id\": 21, \"Input Dims\": [[4, 8]]")  //
    EV("cpu_op", "aten::layer_norm", 100, 20,
       "\"External id\": 20, \"Input Dims\": [[4, 8], [8]]")                                   //
    EV("cuda_runtime", "cudaLaunchKernel", 102, 1, "\"External id\": 21, \"correlation\": 1")  //
    EV("cuda_runtime", "cudaLaunchKernel", 104, 1, "\"correlation\": 2")                       //
    EV_T(2, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", 100, 50,
         "\"External id\": 30")  //
    EV_T(2, "cpu_op", "aten::mm", 105, 40,
         "\"External id\": 31, \"Input Dims\": [[4, 8], [8, 4]]")  //
    EV_T(2, "cuda_runtime", "cudaLaunchKernel", 103, 1,
         "\"External id\": 31, \"correlation\": 3")  //
    EV_T(2, "cuda_runtime", "cudaLaunchKernel", 110, 1,
         "\"External id\": 31, \"correlation\": 5")                     //
    EV("cpu_op", "aten::late", 150, 5, "\"External id\": 99999999999")  //
    EV("cuda_runtime", "cudaLaunchKernel", 151, 1,
       "\"External id\": 99999999999, \"correlation\": 6")                                     //
    EV("user_annotation", "Optimizer.step#Adam.step", 200, 50, "\"External id\": 40")          //
    EV("cpu_op", "aten::_fused_adam_", 205, 40, "\"External id\": 41")                         //
    EV("cuda_runtime", "cudaLaunchKernel", 210, 1, "\"External id\": 41, \"correlation\": 4")  //
    GPU("ln_a", 300, 5, 1)                                                                     //
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ln_b\", \"pid\": 0, \"tid\": 7, \"ts\": 303, "
    "\"dur\": 5, \"args\": {\"correlation\": 2, \"External id\": 21}},\n"  //
    GPU("mm_a", 310, 10, 3)                                                //
    GPU("mm_b", 330, 10, 5)                                                //
    GPU("adam", 400, 10, 4)                                                //
    GPU("lost", 500, 10, 77)                                               //
    GPU("late_k", 600, 10, 6)                                              //
    EV("cpu_op", "aten::unordered", 50, 5, "\"External id\": 50")          //
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"end\", \"pid\": 0, \"tid\": 7, \"ts\": 700, "
    "\"dur\": 1, \"args\": {}}\n"
    "]}";

static void test_nesting(void) {
  TpTrace *t = read_str("nesting.json", nesting);
  if (!t) {
    return;
  }
  CHECK_INT(t->unordered, 1);  // aten::unordered starts before aten::late on thread 1
  CHECK(has(t->warning, "nesting.json: a CPU range starts before"));
  CHECK_INT(t->linked, 5);  // not "lost" (no launch), "late_k" (id past 32 bits), "end"
  long ln = key_id(t, "aten::layer_norm", NULL), nln = key_id(t, "aten::native_layer_norm", NULL);
  long mm = key_id(t, "aten::mm", NULL), adam = key_id(t, "aten::_fused_adam_", NULL);
  long opt = key_id(t, "Optimizer.step#Adam.step", NULL);
  long bwd = key_id(t, "autograd::engine::evaluate_function: MmBackward0", NULL);
  CHECK(ln >= 0 && nln >= 0 && mm >= 0 && adam >= 0 && opt >= 0 && bwd >= 0);
  if (ln < 0 || nln < 0 || mm < 0 || adam < 0 || opt < 0 || bwd < 0) {
    tp_trace_free(t);
    return;
  }
  CHECK_INT(t->keys[opt].kind, TP_TRACE_CPU_ANNOTATION);
  CHECK_INT(t->keys[opt].phase, TP_TRACE_PHASE_OPT);
  CHECK_INT(t->keys[bwd].phase, TP_TRACE_PHASE_BWD);
  static const char *const want[] = {"aten::layer_norm", "aten::mm", NULL};
  TpTraceOps o;
  if (ops_with(t, want, TP_TRACE_NO_STEP, &o)) {
    CHECK_INT(o.linked, 5);
    CHECK_INT(o.unlinked, 3);
    // layer_norm holds native_layer_norm (written first): both calls see both kernels, the
    // second one (launch without External id) through the kernel's own id; layer_norm owns.
    CHECK_INT(o.stats[ln].calls, 1);
    CHECK_INT(o.stats[ln].time, 8000);  // [300, 305) and [303, 308): union 8 us
    CHECK_INT(o.stats[ln].own, 10000);  // durations
    CHECK_INT(o.stats[nln].calls, 1);
    CHECK_INT(o.stats[nln].own, 0);
    // Thread 2's mm: one call across the other thread's launches, in the backward phase.
    CHECK_INT(o.stats[mm].calls, 1);
    CHECK_INT(o.stats[mm].time, 20000);
    CHECK_INT(o.stats[mm].phase[TP_TRACE_PHASE_BWD], 1);
    CHECK_INT(o.stats[bwd].calls, 1);
    CHECK_INT(o.stats[bwd].own, 0);
    // The fused Adam step: not wanted, launcher, optimizer phase.
    CHECK_INT(o.stats[adam].own, 10000);
    CHECK_INT(o.stats[adam].phase[TP_TRACE_PHASE_OPT], 1);
    CHECK_INT(o.stats[opt].phase[TP_TRACE_PHASE_OPT], 1);
    tp_trace_ops_free(&o);
  }
  tp_trace_free(t);
}

// Steps: the op figures of one step; two ProfilerSteps.
static const char steps[] = "{\"traceEvents\": [\n"                                            //
    EV("user_annotation", "ProfilerStep#1", 100, 100, "")                                      //
    EV("user_annotation", "ProfilerStep#2", 200, 100, "")                                      //
    EV("cpu_op", "aten::mm", 110, 10, "\"External id\": 1, \"Input Dims\": [[2, 2], [2, 2]]")  //
    EV("cuda_runtime", "cudaLaunchKernel", 111, 1, "\"External id\": 1, \"correlation\": 1")   //
    EV("cpu_op", "aten::mm", 210, 10, "\"External id\": 2, \"Input Dims\": [[2, 2], [2, 2]]")  //
    EV("cuda_runtime", "cudaLaunchKernel", 211, 1, "\"External id\": 2, \"correlation\": 2")   //
    GPU("mm", 150, 7, 1)                                                                       //
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"mm\", \"pid\": 0, \"tid\": 7, \"ts\": 250, "
    "\"dur\": 9, \"args\": {\"correlation\": 2}}\n"
    "]}";

static void test_steps(void) {
  TpTrace *t = read_str("steps.json", steps);
  if (!t) {
    return;
  }
  long mm = key_id(t, "aten::mm", "[[2,2],[2,2]]");
  CHECK(mm >= 0 && t->nsteps == 2);
  if (mm >= 0 && t->nsteps == 2) {
    static const char *const want[] = {"aten::mm", NULL};
    TpTraceOps o;
    for (uint32_t s = 0; s < 2; s++) {
      if (ops_with(t, want, s, &o)) {
        CHECK_INT(o.stats[mm].calls, 1);
        CHECK_INT(o.stats[mm].time, s == 0 ? 7000 : 9000);
        CHECK_INT(o.linked, 1);
        tp_trace_ops_free(&o);
      }
    }
    if (ops_with(t, want, TP_TRACE_NO_STEP, &o)) {
      CHECK_INT(o.stats[mm].calls, 2);
      CHECK_INT(o.stats[mm].time, 16000);
      tp_trace_ops_free(&o);
    }
  }
  tp_trace_free(t);
}

// Shape arguments: one over 64 KiB is left out of the key with a warning; strings with spaces
// and escapes keep them; pid and tid as strings; a missing tid; keys without arguments.
static void test_args(void) {
  size_t n = 70 * 1024;
  char *big = malloc(n + 1024);
  if (!big) {
    CHECK(false);
    return;
  }
  size_t at = (size_t)snprintf(
      big, 1024,
      "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::cat\", "
      "\"pid\": \"host 1\", \"tid\": \"thread a\", \"ts\": 1, \"dur\": 2, \"args\": "
      "{\"Concrete Inputs\": [\"a b\", \"\\\" x\"], \"Input Dims\": [");
  while (at < n) {
    at += (size_t)snprintf(big + at, 64, "[1, 2], ");
  }
  at += (size_t)snprintf(big + at, 256,
                         "[3]]}},\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::x\", "
                         "\"ts\": 5, \"dur\": 1}]}");
  TpTrace *t = read_mem("args.json", big, at);
  free(big);
  if (!t) {
    return;
  }
  CHECK_INT(t->args_long, 1);
  CHECK(has(t->warning, "args.json: an op's shape argument over 64 KiB"));
  long cat = key_id(t, "aten::cat", NULL), x = key_id(t, "aten::x", NULL);
  CHECK(cat >= 0 && x >= 0);
  if (cat >= 0) {
    CHECK(key_arg(t, cat, 0) == NULL);
    CHECK_STR(key_arg(t, cat, 3), "[\"a b\",\"\\\" x\"]");
  }
  if (x >= 0) {
    CHECK_INT(t->keys[x].has, 0);
  }
  tp_trace_free(t);
}

int main(void) {
  if (!make_tmpdir("tplua-trace-cpu")) {
    return 1;
  }
  test_linear();
  test_nesting();
  test_steps();
  test_args();
  rmdir(tmpdir);
  return CHECK_DONE();
}
