// Unit tests of engine/trace_rocprof on real rocprofv3 CSV files (tests/fixtures/traces,
// SOURCES.md): three generations of the kernel trace header, a memory copy trace read beside its
// kernel trace, an API trace, gzip. Expected figures were computed by another route (Python's csv
// module, interval unions and sums in Python), never from tplua's output. Then damaged and hostile
// input made from those files: every cut, bad fields, quoting errors, limits, other agents, CRLF,
// chunk boundaries and a large file through the reader thread.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "trace.h"
#include "trace_check.h"

static char fixtures[1024];

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  *n = 0;
  CHECK_REPORT_(f != NULL, "cannot open %s", path);
  if (!f) {
    return NULL;
  }
  char *buf = NULL;
  size_t cap = 0;
  for (;;) {
    if (*n + 65536 > cap) {
      cap = cap ? cap * 2 : 1 << 17;
      buf = realloc(buf, cap);
    }
    size_t r = fread(buf + *n, 1, cap - *n, f);
    if (r == 0) {
      break;
    }
    *n += r;
  }
  fclose(f);
  return buf;
}

static char *fixture(const char *name, size_t *n) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s", fixtures, name);
  return slurp(path, n);
}

static void fixture_path(const char *name, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", fixtures, name);
}

// The figures of the one (stepless) window, kernels as compute and copies as memory.
typedef struct Figures {
  int64_t window, busy, idle, compute, non_compute, host_wait;
} Figures;

static Figures breakdown(TpTrace *t) {
  Figures f = {0};
  uint8_t *class_of = calloc(t->nnames + 1, 1);
  for (size_t i = 0; i < t->nnames; i++) {
    class_of[i] = t->names[i].kind == TP_TRACE_KERNEL ? 0 : 1;
  }
  static const uint8_t kinds[2] = {TP_TRACE_COMPUTE, TP_TRACE_MEMORY};
  TpTraceBreakdown b;
  TpError err = {0};
  int rc = tp_trace_breakdown(t, class_of, kinds, 2, &b, &err);
  CHECK_REPORT_(rc == 0, "breakdown: %s", err.msg);
  if (rc == 0) {
    CHECK_INT(b.nsteps, 1);
    if (b.nsteps == 1) {
      const TpTraceStepTime *s = &b.steps[0];
      f = (Figures){s->window, s->busy, s->idle, s->compute, s->non_compute, s->host_wait};
    }
    tp_trace_breakdown_free(&b);
  }
  free(class_of);
  return f;
}

// rocprofv3_sdk_docs_kernel_trace.csv and the memory copy trace beside it: one run of
// ROCprofiler-SDK's documentation sample (8 kernels on 2 streams, 4 host-to-device copies).
static void test_sdk_docs(void) {
  char path[1200];
  fixture_path("rocprofv3_sdk_docs_kernel_trace.csv", path, sizeof(path));
  TpTrace *t = read_path(path);
  if (!t) {
    return;
  }
  CHECK_INT(t->events, 12);
  CHECK_INT(t->nops, 12);
  CHECK_INT(t->nnames, 5);
  CHECK_INT(t->launches, 0);
  CHECK_INT(t->bad, 0);
  CHECK_INT(t->ignored, 0);
  CHECK_INT(t->bytes, 1595 + 473);
  CHECK(!t->compressed && !t->truncated && t->stepless);
  CHECK_INT(t->warnings, 0);
  CHECK_INT(cat_count(t, "KERNEL_DISPATCH"), 8);
  CHECK_INT(cat_count(t, "MEMORY_COPY"), 4);
  check_name(t, "Memcpy HtoD (Host -> Device)", 4, 402766);
  check_name(t, "void addition_kernel<float>(float*, float const*, float const*, int, int)", 2,
             28987);
  check_name(t, "divide_kernel(float*, float const*, float const*, int, int)", 2, 21650);
  check_name(t, "subtract_kernel(float*, float const*, float const*, int, int)", 2, 21369);
  check_name(t, "multiply_kernel(float*, float const*, float const*, int, int)", 2, 21328);
  const TpTraceName *nm = name_named(t, "Memcpy HtoD (Host -> Device)");
  CHECK(nm && nm->kind == TP_TRACE_MEMCPY);
  // the first kernel: stream 1, correlation 1937, [2414192765353337, 2414192765369494)
  CHECK_INT(t->ops[0].ts, 2414192765353337LL);
  CHECK_INT(tp_trace_op_dur(t, 0), 16157);
  CHECK_INT(t->ops[0].corr, 1937);
  CHECK_INT(t->ops[0].stream, 1);
  CHECK_INT(t->ops[4].stream, 2);
  CHECK_INT(t->ops[8].corr, 952);  // the first copy
  const char *prof = meta_text(t, "profiler", NULL);
  CHECK(has(prof, "\"rocprofv3\"") && has(prof, "rocprofv3_sdk_docs_kernel_trace.csv") &&
        has(prof, "rocprofv3_sdk_docs_memory_copy_trace.csv") && has(prof, "\"agent\": \"2\""));
  Figures f = breakdown(t);
  CHECK_INT(f.window, 81175884);
  CHECK_INT(f.busy, 496100);
  CHECK_INT(f.idle, 80679784);
  CHECK_INT(f.compute, 93334);
  CHECK_INT(f.non_compute, 402766);
  CHECK_INT(f.host_wait, 0);
  tp_trace_free(t);

  // From memory there is no file beside it: the kernels only.
  size_t n;
  char *csv = fixture("rocprofv3_sdk_docs_kernel_trace.csv", &n);
  t = csv ? read_mem("mem", csv, n) : NULL;
  if (t) {
    CHECK_INT(t->nops, 8);
    CHECK_INT(t->bytes, 1595);
    Figures g = breakdown(t);
    CHECK_INT(g.busy, 93334);
    CHECK_INT(g.window, 2414192765784969LL - 2414192765353337LL);
    tp_trace_free(t);
  }
  // CRLF line ends read the same.
  if (csv) {
    char *crlf = malloc(2 * n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      if (csv[i] == '\n') {
        crlf[m++] = '\r';
      }
      crlf[m++] = csv[i];
    }
    t = read_mem("crlf", crlf, m);
    if (t) {
      CHECK_INT(t->nops, 8);
      CHECK_INT(t->warnings, 0);
      check_name(t, "divide_kernel(float*, float const*, float const*, int, int)", 2, 21650);
      tp_trace_free(t);
    }
    free(crlf);
  }
  free(csv);
}

// rocprofv3_vcopy_mi300x_kernel_trace.csv: the newest header (22 columns, "Agent 2").
static void test_vcopy(void) {
  char path[1200];
  fixture_path("rocprofv3_vcopy_mi300x_kernel_trace.csv", path, sizeof(path));
  TpTrace *t = read_path(path);
  if (!t) {
    return;
  }
  CHECK_INT(t->nops, 3);
  CHECK_INT(t->nnames, 1);
  CHECK_INT(t->warnings, 0);
  check_name(t, "vecCopy(double*, double*, double*, int, int)", 3, 19308);
  CHECK_INT(t->ops[2].corr, 3);
  CHECK_INT(t->ops[2].stream, 0);
  CHECK(has(meta_text(t, "profiler", NULL), "\"agent\": \"2\""));
  Figures f = breakdown(t);
  CHECK_INT(f.window, 68139);
  CHECK_INT(f.busy, 19308);
  CHECK_INT(f.idle, 48831);
  tp_trace_free(t);
}

// rocprofv3_sdk_docs_2024_kernel_trace.csv.gz: the 18-column header (no Stream_Id: the queue is
// the stream), 4 queues overlapping, a blank line at the end; gzip.
static void test_sdk_2024(void) {
  char path[1200];
  fixture_path("rocprofv3_sdk_docs_2024_kernel_trace.csv.gz", path, sizeof(path));
  TpTrace *t = read_path(path);
  if (!t) {
    return;
  }
  CHECK(t->compressed && !t->truncated);
  CHECK_INT(t->bytes, 1417);
  CHECK_INT(t->events, 7);
  CHECK_INT(t->nops, 7);
  CHECK_INT(t->warnings, 0);
  check_name(t, "void addition_kernel<float>(float*, float const*, float const*, int, int)", 4,
             413506);
  check_name(t, "subtract_kernel(float*, float const*, float const*, int, int)", 2, 242384);
  check_name(t, "multiply_kernel(float*, float const*, float const*, int, int)", 1, 139563);
  CHECK_INT(t->ops[3].stream, 3);
  CHECK_INT(t->ops[4].stream, 4);
  Figures f = breakdown(t);
  CHECK_INT(f.window, 301795);
  CHECK_INT(f.busy, 299425);
  CHECK_INT(f.idle, 2370);
  CHECK_INT(f.compute, 299425);
  tp_trace_free(t);
}

// rocprofv3_sdk_docs_hip_runtime_trace.csv: an API trace alone: launches, no GPU op.
static void test_api(void) {
  char path[1200];
  fixture_path("rocprofv3_sdk_docs_hip_runtime_trace.csv", path, sizeof(path));
  TpTrace *t = read_path(path);
  if (!t) {
    return;
  }
  CHECK_INT(t->events, 8);
  CHECK_INT(t->launches, 8);
  CHECK_INT(t->nops, 0);
  CHECK_INT(cat_count(t, "HIP_RUNTIME_API_EXT"), 8);
  tp_trace_free(t);

  // A kernel trace with an API trace beside it under rocprofv3's names: the launches are found
  // by correlation (the sample's API trace is of another run, so its times are not the kernels').
  size_t n, m;
  char *k = fixture("rocprofv3_vcopy_mi300x_kernel_trace.csv", &n);
  char *a = fixture("rocprofv3_sdk_docs_hip_runtime_trace.csv", &m);
  if (k && a) {
    char kp[1200], ap[1200];
    write_file("123_kernel_trace.csv", k, n, kp, sizeof(kp));
    write_file("123_hip_api_trace.csv", a, m, ap, sizeof(ap));
    t = read_path(kp);
    if (t) {
      CHECK_INT(t->nops, 3);
      CHECK_INT(t->launches, 8);
      CHECK_INT(t->events, 11);
      CHECK(has(meta_text(t, "profiler", NULL), "123_hip_api_trace.csv"));
      tp_trace_free(t);
    }
    // A sibling that is damaged fails, naming the sibling.
    const char *broken = "\"Domain\",\"Start_Timestamp\",\"End_Timestamp\"\n";
    write_file("123_hip_api_trace.csv", broken, strlen(broken), ap, sizeof(ap));
    TpError err = {0};
    t = NULL;
    CHECK_INT(tp_trace_read(kp, &t, &err), TP_EPARSE);
    CHECK_REPORT_(has(err.msg, "123_hip_api_trace.csv: line 1: not a rocprofv3"), "%s", err.msg);
    CHECK(t == NULL);
    unlink(kp);
    unlink(ap);
  }
  free(k);
  free(a);
}

// Every cut of a real file: an error naming the input, or the rows before the cut with a warning.
static void test_cuts(void) {
  size_t n;
  char *csv = fixture("rocprofv3_sdk_docs_kernel_trace.csv", &n);
  if (!csv) {
    return;
  }
  size_t header = (size_t)(strchr(csv, '\n') - csv) + 1;
  int read = 0, failed = 0;
  for (size_t cut = 0; cut < n; cut++) {
    TpTrace *t = NULL;
    TpError err = {0};
    int rc = tp_trace_read_mem("cut", csv, cut, &t, &err);
    if (rc != 0) {
      failed++;
      CHECK_REPORT_(rc == TP_EPARSE && strncmp(err.msg, "cut: ", 5) == 0, "cut %zu: %d %s", cut, rc,
                    err.msg);
      CHECK_REPORT_(cut < header, "cut %zu inside the rows failed: %s", cut, err.msg);
      continue;
    }
    read++;
    CHECK(t->nops <= 8 && t->events <= 8);
    bool at_line_end = csv[cut - 1] == '\n';
    CHECK_REPORT_(at_line_end ? t->warnings == 0 : t->warnings > 0, "cut %zu: %llu warnings", cut,
                  (unsigned long long)t->warnings);
    if (!at_line_end && t->truncated) {
      CHECK_REPORT_(has(t->warning, "cut: truncated at line"), "cut %zu: %s", cut, t->warning);
    }
    tp_trace_free(t);
  }
  CHECK(read > 0 && failed > 0);
  free(csv);
}

// Damaged and hostile rows, from the real vcopy file.
static void test_damage(void) {
  const char *hdr = "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Kernel_Name\",\"Correlation_Id\","
                    "\"Start_Timestamp\",\"End_Timestamp\"\n";
  const char *row = "\"KERNEL_DISPATCH\",\"Agent 2\",2,\"vecCopy(double*, double*, double*, int, "
                    "int)\",1,1986623975868304,1986623975876596\n";
  char buf[4096];
  // bad fields are skipped, each named
  static const struct {
    const char *row, *want;
  } bad[] = {
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"k\",1,19866239758x,1986623975876596\n",
       "line 3: field Start_Timestamp: not a timestamp in ns"},
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"k\",1,1986623975868304,-5\n",
       "line 3: field End_Timestamp: not a timestamp in ns"},
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"k\",1,1986623975868304,1986623975868303\n",
       "line 3: field End_Timestamp: before Start_Timestamp"},
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"k\",1,1986623975868304,99999999999999999999\n",
       "line 3: field End_Timestamp: not a timestamp in ns"},
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"k\",1,1986623975868304,9223372036854775807\n",
       "line 3: field End_Timestamp: out of range"},
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"k\",x1,1986623975868304,1986623975868305\n",
       "line 3: field Correlation_Id: not a number"},
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"k\xff\",1,1986623975868304,1986623975868305\n",
       "line 3: field Kernel_Name: not UTF-8 text"},
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"a\x01\",1,1986623975868304,1986623975868305\n",
       "line 3: field Kernel_Name: not UTF-8 text"},
      {"\"KERNEL_DISPATCH\",\"Agent 2\",2,\"k\",1,1986623975868304\n",
       "line 3: 6 fields where the header has 7"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(buf, sizeof(buf), "%s%s%s%s", hdr, row, bad[i].row, row);
    TpTrace *t = read_mem("bad", buf, strlen(buf));
    if (t) {
      CHECK_INT(t->nops, 2);
      CHECK_INT(t->bad, 1);
      CHECK_INT(t->events, 3);
      CHECK_REPORT_(has(t->warning, bad[i].want), "%zu: '%s' in '%s'", i, bad[i].want, t->warning);
      tp_trace_free(t);
    }
  }
  // rows of another kind are counted and ignored; a quoted field may hold commas, quotes and
  // line ends (a name may not: control characters); lines are counted through quoted line ends
  const char *quoted = "\"KERNEL_DISPATCH\",\"Agent 2\",2,\"a\nb\",6,100,250\n"
                       "\"OTHER\",\"Agent 2\",2,\"z\",8,x,y\n"
                       "\"KERNEL_DISPATCH\",\"Agent 2\",2,\"a \"\"q\"\", b\",7,100,250\n";
  snprintf(buf, sizeof(buf), "%s%s", hdr, quoted);
  TpTrace *t = read_mem("quotes", buf, strlen(buf));
  if (t) {
    CHECK_INT(t->nops, 1);
    CHECK_INT(t->ignored, 1);
    CHECK_INT(t->bad, 1);
    CHECK_INT(t->events, 3);
    CHECK_INT(cat_count(t, "OTHER"), 1);
    CHECK_STR(name_of(t, 0), "a \"q\", b");
    CHECK_REPORT_(has(t->warning, "quotes: line 2: field Kernel_Name: not UTF-8 text"), "%s",
                  t->warning);
    tp_trace_free(t);
  }
  snprintf(buf, sizeof(buf), "%s%s\"KERNEL_DISPATCH\"x,\"Agent 2\",2,\"k\",1,5,6\n", hdr, quoted);
  check_fails("lines", buf, strlen(buf), TP_EPARSE,
              "lines: line 6: field 1: a character after its closing quote");
  // other agents are left out, with a warning
  snprintf(buf, sizeof(buf), "%s%s%s%s", hdr, row,
           "\"KERNEL_DISPATCH\",\"Agent 3\",2,\"k\",2,1986623975868304,1986623975876596\n", row);
  t = read_mem("agents", buf, strlen(buf));
  if (t) {
    CHECK_INT(t->nops, 2);
    CHECK_INT(t->ignored, 1);
    CHECK_REPORT_(has(t->warning, "1 ops on GPU agents other than agent 2 were left out"), "%s",
                  t->warning);
    tp_trace_free(t);
  }
  // structural errors fail, naming the line and the field
  snprintf(buf, sizeof(buf), "%s%s\"KERNEL_DISPATCH\"x,\"Agent 2\",2,\"k\",1,5,6\n", hdr, row);
  check_fails("quote", buf, strlen(buf), TP_EPARSE,
              "quote: line 3: field 1: a character after its closing quote");
  snprintf(buf, sizeof(buf),
           "\"Kind\",\"Kind\",\"Kernel_Name\",\"Start_Timestamp\","
           "\"End_Timestamp\"\n");
  check_fails("twice", buf, strlen(buf), TP_EPARSE,
              "twice: line 1: the header names column Kind twice");
  snprintf(buf, sizeof(buf), "\"Kind\",\"Agent_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n");
  check_fails("what", buf, strlen(buf), TP_EPARSE,
              "what: line 1: not a rocprofv3 kernel, memory copy or API trace");
  // an unterminated quote at the end: the file was cut
  snprintf(buf, sizeof(buf), "%s%s\"KERNEL_DISPATCH\",\"Agent 2\",2,\"vecCo", hdr, row);
  t = read_mem("open", buf, strlen(buf));
  if (t) {
    CHECK_INT(t->nops, 1);
    CHECK(t->truncated);
    CHECK_REPORT_(has(t->warning, "open: truncated at line 3: kept the 1 rows"), "%s", t->warning);
    tp_trace_free(t);
  }
  // binary bytes after the header
  unsigned char bin[512];
  size_t hl = strlen(hdr);
  memcpy(bin, hdr, hl);
  for (size_t i = hl; i < sizeof(bin); i++) {
    bin[i] = (unsigned char)(i * 37 + 11);
  }
  TpError err = {0};
  t = NULL;
  int rc = tp_trace_read_mem("binary", bin, sizeof(bin), &t, &err);
  CHECK_REPORT_(rc == 0 || (rc == TP_EPARSE && has(err.msg, "binary: line ")), "%d %s", rc,
                err.msg);
  if (t) {
    CHECK_INT(t->nops, 0);
    CHECK(t->warnings > 0);
    tp_trace_free(t);
  }
  // limits: a field over 1 MiB, a line of more than 256 fields
  size_t big = (1 << 20) + 100;
  char *huge = malloc(big + 512);
  size_t m = (size_t)snprintf(huge, 512, "%s\"KERNEL_DISPATCH\",1,2,\"", hdr);
  memset(huge + m, 'a', big);
  m += big;
  memcpy(huge + m, "\",1,2,3\n", 8);
  m += 8;
  check_fails("long", huge, m, TP_ELIMIT, "long: line 2: a field longer than 1 MiB");
  m = (size_t)snprintf(huge, 512, "%s", hdr);
  for (int i = 0; i < 300; i++) {
    huge[m++] = '1';
    huge[m++] = ',';
  }
  huge[m++] = '\n';
  check_fails("wide", huge, m, TP_ELIMIT, "wide: line 2: more than 256 fields");
  free(huge);
  // an empty file and a header alone
  check_fails("empty", "", 0, TP_EPARSE, "empty: empty file");
  t = read_mem("header", hdr, strlen(hdr));
  if (t) {
    CHECK_INT(t->nops, 0);
    CHECK_INT(t->events, 0);
    tp_trace_free(t);
  }
}

// A large file made of the real vcopy rows (times shifted), gzip, through the reader thread:
// chunk boundaries fall inside rows, quoted names and line ends; memory stays bounded.
static void test_large(void) {
  const char *hdr =
      "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Stream_Id\",\"Thread_Id\",\"Dispatch_Id\",\"Kernel_"
      "Id\","
      "\"Kernel_Name\",\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\",\"LDS_Block_Size\","
      "\"Scratch_Size\",\"VGPR_Count\",\"Accum_VGPR_Count\",\"SGPR_Count\",\"Workgroup_Size_X\","
      "\"Workgroup_Size_Y\",\"Workgroup_Size_Z\",\"Grid_Size_X\",\"Grid_Size_Y\",\"Grid_Size_Z\"\n";
  enum { ROWS = 200000 };
  size_t cap = strlen(hdr) + (size_t)ROWS * 200;
  char *csv = malloc(cap);
  size_t n = (size_t)snprintf(csv, cap, "%s", hdr);
  int64_t ts = 1986623975868304LL;
  for (int i = 0; i < ROWS; i++) {
    n += (size_t)snprintf(csv + n, cap - n,
                          "\"KERNEL_DISPATCH\",\"Agent 2\",2,0,281643,%d,12,\"vecCopy(double*, "
                          "double*, double*, int, int)\",%d,%lld,%lld,0,0,4,4,16,256,1,1,1048576,"
                          "1,1\n",
                          i + 1, i + 1, (long long)ts, (long long)(ts + 8292));
    ts += 10000;
  }
  uLongf zcap = compressBound((uLong)n) + 64;
  unsigned char *z = malloc(zcap);
  z_stream s;
  memset(&s, 0, sizeof(s));
  CHECK_INT(deflateInit2(&s, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  s.next_in = (Bytef *)csv;
  s.avail_in = (uInt)n;
  s.next_out = z;
  s.avail_out = (uInt)zcap;
  CHECK_INT(deflate(&s, Z_FINISH), Z_STREAM_END);
  size_t zn = s.total_out;
  deflateEnd(&s);
  char path[1200];
  write_file("large_kernel_trace.csv.gz", z, zn, path, sizeof(path));
  clock_t c0 = clock();
  TpTrace *t = read_path(path);
  double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
  if (t) {
    CHECK_INT(t->nops, ROWS);
    CHECK_INT(t->nnames, 1);
    CHECK_INT(t->bytes, n);
    CHECK_INT(t->warnings, 0);
    check_name(t, "vecCopy(double*, double*, double*, int, int)", ROWS, (int64_t)ROWS * 8292);
    CHECK_INT(t->ops[ROWS - 1].corr, ROWS);
    Figures f = breakdown(t);
    CHECK_INT(f.busy, (int64_t)ROWS * 8292);
    CHECK_INT(f.window, (int64_t)(ROWS - 1) * 10000 + 8292);
    tp_trace_free(t);
  }
  printf("large: %d rows, %.1f MB of CSV read in %.3f s of CPU\n", ROWS, (double)n / 1e6, secs);
  unlink(path);
  free(z);
  free(csv);
}

int main(void) {
  const char *src = getenv("TPLUA_SOURCE_DIR");
  snprintf(fixtures, sizeof(fixtures), "%s/tests/fixtures/traces", src ? src : ".");
  if (!make_tmpdir("test_trace_rocprof")) {
    return 1;
  }
  test_sdk_docs();
  test_vcopy();
  test_sdk_2024();
  test_api();
  test_cuts();
  test_damage();
  test_large();
  CHECK_INT(rmdir(tmpdir), 0);
  return CHECK_DONE();
}
