// Unit tests of engine/trace_coll: the collectives' side array. NCCL/RCCL kernels kept by name
// (nccl*, rccl*, "void nccl*"), kernels whose own args describe a collective kept whatever their
// name, other kernels left out; the metadata of the record_param_comms CPU op that launched each
// one taken through its launch's External id, else its own, else the range around the launch on
// its thread; the kernel's own args winning; steps from the launch; the array unchanged when the
// breakdown sorts the ops; absent fields absent, not zero.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trace.h"
#include "trace_check.h"
#include "trace_coll.h"

static const char doc[] =
    "{\"traceEvents\": [\n"
    // step 3 on the CPU
    " {\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#3\",\"pid\":1,\"tid\":1,"
    "\"ts\":100,\"dur\":900},\n"
    // (1) record_param_comms ext 5 on thread 1, with Seq and Rank; its launch (corr 10) names ext 5
    " {\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":1,\"tid\":1,"
    "\"ts\":110,\"dur\":20,\"args\":{\"External id\":5,\"Collective name\":\"allreduce\","
    "\"In msg nelems\":1024,\"Out msg nelems\":1024,\"Group size\":4,\"dtype\":\"BFloat16\","
    "\"Process Group Name\":\"0\",\"Process Group Ranks\":\"[0, 1, 2, 3]\",\"Seq\":7,"
    "\"Rank\":2}},\n"
    " {\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
    "\"ts\":115,\"dur\":3,\"args\":{\"correlation\":10,\"External id\":5}},\n"
    " {\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_bf16_RING_LL\","
    "\"pid\":0,\"tid\":7,\"ts\":200,\"dur\":50.5,\"args\":{\"correlation\":10,\"stream\":7}},\n"
    // (2) a kernel with its own args (reduce_scatter), and a record_param_comms of another
    // collective with the same External id: the kernel's args win, Seq is taken from the range
    " {\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":1,\"tid\":1,"
    "\"ts\":300,\"dur\":20,\"args\":{\"External id\":6,\"Collective name\":\"broadcast\","
    "\"Seq\":8}},\n"
    " {\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
    "\"ts\":305,\"dur\":3,\"args\":{\"correlation\":11,\"External id\":6}},\n"
    " {\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"my_custom_reduce\",\"pid\":0,\"tid\":7,"
    "\"ts\":400,\"dur\":10,\"args\":{\"correlation\":11,\"stream\":7,\"External id\":6,"
    "\"Collective name\":\"reduce_scatter_tensor\",\"In msg nelems\":4096,"
    "\"Out msg nelems\":1024,\"Group size\":4,\"dtype\":\"Float\"}},\n"
    // (3) a launch whose External id names no record_param_comms, inside one on its thread
    " {\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":1,\"tid\":2,"
    "\"ts\":500,\"dur\":50,\"args\":{\"External id\":40,\"Collective name\":\"_allgather_base\","
    "\"In msg nelems\":8,\"Out msg nelems\":32,\"dtype\":\"Half\"}},\n"
    " {\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":2,"
    "\"ts\":520,\"dur\":3,\"args\":{\"correlation\":12,\"External id\":41}},\n"
    " {\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void ncclKernel_AllGather_RING_LL\","
    "\"pid\":0,\"tid\":8,\"ts\":600,\"dur\":5,\"args\":{\"correlation\":12,\"stream\":8}},\n"
    // (4) an RCCL kernel with no launch in the trace: kept, nothing known
    " {\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"RCCLkernel_generic\",\"pid\":0,\"tid\":7,"
    "\"ts\":50,\"dur\":40,\"args\":{\"stream\":7}},\n"
    // a GEMM: not a collective
    " {\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
    "\"ts\":700,\"dur\":3,\"args\":{\"correlation\":13}},\n"
    " {\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"sm90_xmma_gemm\",\"pid\":0,\"tid\":7,"
    "\"ts\":710,\"dur\":20,\"args\":{\"correlation\":13,\"stream\":7}}\n"
    "]}\n";

static const char *text(const TpTrace *t, uint32_t id) {
  return tp_trace_coll_text(t, id, NULL);
}

static void check_entries(const TpTrace *t) {
  size_t n = 0;
  const TpTraceColl *c = tp_trace_collectives(t, &n);
  CHECK_INT(n, 4);
  if (n != 4) {
    return;
  }
  // in read order: (1), (2), (3), (4)
  CHECK_INT(c[0].ts, 200000);
  CHECK_INT(c[0].dur, 50500);
  CHECK_STR(t->arena + t->names[c[0].name].at, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  CHECK_INT(c[0].source, TP_TRACE_COLL_CPU);
  CHECK_STR(text(t, c[0].coll), "allreduce");
  CHECK_STR(text(t, c[0].dtype), "BFloat16");
  CHECK_INT(c[0].dtype_size, 2);
  CHECK_INT(c[0].in_nelems, 1024);
  CHECK_INT(c[0].out_nelems, 1024);
  CHECK_INT(c[0].group, 4);
  CHECK_INT(c[0].seq, 7);
  CHECK_INT(c[0].rank, 2);
  CHECK_STR(text(t, c[0].pg), "0");
  CHECK_STR(text(t, c[0].ranks), "[0, 1, 2, 3]");
  CHECK_INT(c[0].stream, 7);
  CHECK_INT(c[0].corr, 10);
  CHECK(c[0].step != TP_TRACE_NO_STEP && t->steps[c[0].step].number == 3);

  CHECK_INT(c[1].source, TP_TRACE_COLL_KERNEL);
  CHECK_STR(text(t, c[1].coll), "reduce_scatter_tensor");  // its own, not the range's
  CHECK_INT(c[1].in_nelems, 4096);
  CHECK_INT(c[1].out_nelems, 1024);
  CHECK_INT(c[1].dtype_size, 4);
  CHECK_INT(c[1].seq, 8);  // taken from the range: the kernel has none
  CHECK_INT(c[1].rank, -1);
  CHECK_INT(c[1].pg, 0);

  CHECK_INT(c[2].source, TP_TRACE_COLL_CPU);
  CHECK_STR(text(t, c[2].coll), "_allgather_base");
  CHECK_INT(c[2].in_nelems, 8);
  CHECK_INT(c[2].out_nelems, 32);
  CHECK_INT(c[2].dtype_size, 2);
  CHECK_INT(c[2].group, 0);
  CHECK_INT(c[2].seq, -1);

  CHECK_INT(c[3].source, TP_TRACE_COLL_NONE);
  CHECK_INT(c[3].coll, 0);
  CHECK_INT(c[3].in_nelems, -1);
  CHECK_INT(c[3].step, TP_TRACE_NO_STEP);
  CHECK_INT(c[3].corr, UINT32_MAX);
  CHECK_STR(text(t, 0), "");
  CHECK_STR(text(t, 999), "");
}

static void test_side_array(void) {
  TpTrace *t = read_mem("coll.json", doc, strlen(doc));
  if (!t) {
    return;
  }
  check_entries(t);
  // The breakdown sorts the op array; the side array keeps its own copy of each op.
  uint8_t class_of[16] = {0};
  uint8_t kinds[1] = {0};
  CHECK(t->nnames <= 16);
  TpTraceBreakdown b;
  TpError err = {0};
  CHECK_INT(tp_trace_breakdown(t, class_of, kinds, 1, &b, &err), 0);
  tp_trace_breakdown_free(&b);
  check_entries(t);
  tp_trace_free(t);
}

static void test_names(void) {
  CHECK(tp_trace_coll_name("ncclDevKernel_Generic", 21));
  CHECK(tp_trace_coll_name("NCCLKERNEL", 10));
  CHECK(tp_trace_coll_name("rcclKernel", 10));
  CHECK(tp_trace_coll_name("void ncclKernel_x(ncclWork)", 27));
  CHECK(!tp_trace_coll_name("nccl", 3));
  CHECK(!tp_trace_coll_name("void ", 5));
  CHECK(!tp_trace_coll_name("cross_device_reduce", 19));
  CHECK(!tp_trace_coll_name("ncc", 3));
}

// A trace with no collective: the array is empty, not missing.
static void test_none(void) {
  static const char plain[] = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\","
                              "\"ts\":1,\"dur\":2,\"args\":{\"stream\":7}}]}";
  TpTrace *t = read_mem("none.json", plain, strlen(plain));
  if (!t) {
    return;
  }
  size_t n = 99;
  CHECK(tp_trace_collectives(t, &n) == NULL);
  CHECK_INT(n, 0);
  tp_trace_free(t);
}

int main(void) {
  test_side_array();
  test_names();
  test_none();
  return CHECK_DONE();
}
