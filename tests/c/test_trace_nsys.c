// Unit tests of engine/trace_nsys on two real Nsight Systems SQLite exports (tests/fixtures/traces,
// SOURCES.md): an MPI+CUDA saxpy exported by Nsight Systems 2022.2 and CloverLeaf exported by
// 2024.5, both on A100. Expected figures were computed by another route (Python's sqlite3 module:
// sums, interval unions and the host-wait rule in Python), never from tplua's output. Both read
// gzip (in memory) and plain (SQLite reads the file). Then copies of them changed on purpose:
// bad rows, a second GPU, ProfilerStep ranges, a database of another kind, every kind of cut and
// damaged bytes.
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "trace.h"
#include "trace_check.h"

static char fixtures[1024];

// Uncompresses a gzip fixture into memory.
static unsigned char *gunzip(const char *path, size_t *n) {
  gzFile f = gzopen(path, "rb");
  *n = 0;
  CHECK_REPORT_(f != NULL, "cannot open %s", path);
  if (!f) {
    return NULL;
  }
  size_t cap = 1 << 22;
  unsigned char *buf = malloc(cap);
  int r;
  while ((r = gzread(f, buf + *n, (unsigned)(cap - *n))) > 0) {
    *n += (size_t)r;
    if (*n == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
  }
  gzclose(f);
  return buf;
}

typedef struct Figures {
  int64_t start, window, busy, idle, compute, non_compute, host_wait;
  size_t ops;
} Figures;

// Breaks the trace down with kernels as compute and copies and memsets as memory; fills
// f[0, cap) with the windows; returns their number.
static size_t breakdown(TpTrace *t, Figures *f, size_t cap) {
  uint8_t *class_of = calloc(t->nnames + 1, 1);
  for (size_t i = 0; i < t->nnames; i++) {
    class_of[i] = t->names[i].kind == TP_TRACE_KERNEL ? 0 : 1;
  }
  static const uint8_t kinds[2] = {TP_TRACE_COMPUTE, TP_TRACE_MEMORY};
  TpTraceBreakdown b;
  TpError err = {0};
  size_t n = 0;
  int rc = tp_trace_breakdown(t, class_of, kinds, 2, &b, &err);
  CHECK_REPORT_(rc == 0, "breakdown: %s", err.msg);
  if (rc == 0) {
    for (size_t i = 0; i < b.nsteps && i < cap; i++) {
      const TpTraceStepTime *s = &b.steps[i];
      f[i] = (Figures){s->start,   s->window,      s->busy,      s->idle,
                       s->compute, s->non_compute, s->host_wait, s->ops};
    }
    n = b.nsteps;
    tp_trace_breakdown_free(&b);
  }
  free(class_of);
  return n;
}

// The saxpy export: 5 kernels, 15 copies, 95 runtime calls (each call twice: the API and its
// versioned entry point, one correlation id), 24 NVTX ranges (MPI, saxpy), no ProfilerStep.
static void check_saxpy(TpTrace *t, const char *what) {
  CHECK_REPORT_(t->events == 139 && t->nops == 20 && t->launches == 95 && t->nnames == 3,
                "%s: %llu events, %zu ops, %llu launches, %zu names", what,
                (unsigned long long)t->events, t->nops, (unsigned long long)t->launches, t->nnames);
  CHECK_INT(t->bad, 0);
  CHECK_INT(t->ignored, 24);
  CHECK_INT(t->bytes, 1613824);
  CHECK(t->stepless && !t->truncated);
  CHECK_INT(t->warnings, 0);
  CHECK_INT(cat_count(t, "kernel"), 5);
  CHECK_INT(cat_count(t, "gpu_memcpy"), 15);
  CHECK_INT(cat_count(t, "cuda_runtime"), 95);
  CHECK_INT(cat_count(t, "nvtx"), 24);
  check_name(t, "Memcpy HtoD (Pageable -> Device)", 10, 186001123);
  check_name(t, "Memcpy DtoH (Device -> Pageable)", 5, 98698477);
  check_name(t, "saxpy(double *, double *, double *, double, int)", 5, 88573480);
  CHECK_INT(t->ops[0].ts, 924922186);  // the first kernel, correlation 140, stream 7
  CHECK_INT(t->ops[0].corr, 140);
  CHECK_INT(t->ops[0].stream, 7);
  const char *dev = meta_text(t, "deviceProperties", NULL);
  CHECK_REPORT_(has(dev, "\"name\": \"NVIDIA A100-SXM4-40GB\"") &&
                    has(dev, "\"totalGlobalMem\": 42297524224") && has(dev, "\"numSms\": 108") &&
                    has(dev, "\"computeMajor\": 8"),
                "%s: %s", what, dev);
  const char *prof = meta_text(t, "profiler", NULL);
  CHECK_REPORT_(has(prof, "\"version\": \"2022.2.1.31\"") && has(prof, "\"schema\": \"2.9.1\"") &&
                    has(prof, "\"device\": 0"),
                "%s: %s", what, prof);
  Figures f[1];
  if (breakdown(t, f, 1) == 1) {
    CHECK_INT(f[0].start, 887857742);
    CHECK_INT(f[0].window, 1097327843);
    CHECK_INT(f[0].busy, 373273080);
    CHECK_INT(f[0].idle, 724054763);
    CHECK_INT(f[0].compute, 88573480);
    CHECK_INT(f[0].non_compute, 284699600);
    CHECK_INT(f[0].host_wait, 724054763);
  }
}

static void test_saxpy(const unsigned char *db, size_t n) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/nsys_saxpy_mpi_a100.sqlite.gz", fixtures);
  TpTrace *t = read_path(path);
  if (t) {
    CHECK(t->compressed);
    check_saxpy(t, "gzip");
    tp_trace_free(t);
  }
  write_file("saxpy.sqlite", db, n, path, sizeof(path));
  t = read_path(path);
  if (t) {
    CHECK(!t->compressed);
    check_saxpy(t, "plain");
    tp_trace_free(t);
  }
  TpError err = {0};
  t = NULL;
  CHECK_INT(tp_trace_read_mem("memory", db, n, &t, &err), 0);
  if (t) {
    check_saxpy(t, "memory");
    tp_trace_free(t);
  }
  unlink(path);
}

// CloverLeaf: 1312 kernels (104 names with the copies), 279 copies, 3048 runtime calls.
static void test_cloverleaf(void) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/nsys_cloverleaf_a100.sqlite.gz", fixtures);
  TpTrace *t = read_path(path);
  if (!t) {
    return;
  }
  CHECK_INT(t->events, 4639);
  CHECK_INT(t->nops, 1591);
  CHECK_INT(t->launches, 3048);
  CHECK_INT(t->nnames, 104);
  CHECK_INT(t->bytes, 2154496);
  CHECK_INT(t->warnings, 0);
  CHECK_INT(cat_count(t, "kernel"), 1312);
  check_name(t, "Memcpy HtoD (Pageable -> Device)", 254, 9346285);
  check_name(t, "Memcpy DtoH (Device -> Pageable)", 25, 44638);
  int64_t kernels = 0;
  uint64_t count = 0;
  for (size_t i = 0; i < t->nnames; i++) {
    if (t->names[i].kind == TP_TRACE_KERNEL) {
      kernels += t->names[i].total;
      count += t->names[i].count;
    }
  }
  CHECK_INT(count, 1312);
  CHECK_INT(kernels, 294404540);
  CHECK(has(meta_text(t, "deviceProperties", NULL), "\"name\": \"NVIDIA A100-SXM4-80GB\""));
  const char *prof = meta_text(t, "profiler", NULL);
  CHECK_REPORT_(has(prof, "\"version\": \"2024.5.1.113\"") && has(prof, "\"schema\": \"3.13.2\""),
                "%s", prof);
  Figures f[1];
  if (breakdown(t, f, 1) == 1) {
    CHECK_INT(f[0].start, 533338240);
    CHECK_INT(f[0].window, 342407810);
    CHECK_INT(f[0].busy, 303795463);
    CHECK_INT(f[0].idle, 38612347);
    CHECK_INT(f[0].compute, 294404540);
    CHECK_INT(f[0].non_compute, 9390923);
    CHECK_INT(f[0].host_wait, 38251364);
  }
  tp_trace_free(t);
}

static void exec(sqlite3 *db, const char *sql) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  CHECK_REPORT_(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "");
  sqlite3_free(msg);
}

// A copy of the saxpy export, changed by `sql`.
static void changed_copy(const unsigned char *db, size_t n, const char *name, const char *sql,
                         char *path, size_t cap) {
  write_file(name, db, n, path, cap);
  sqlite3 *s = NULL;
  CHECK_INT(sqlite3_open(path, &s), SQLITE_OK);
  exec(s, sql);
  sqlite3_close(s);
}

static void test_changed(const unsigned char *db, size_t n) {
  char path[1200];
  // bad rows: each skipped and named
  changed_copy(
      db, n, "bad.sqlite",
      "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 1 WHERE correlationId = 156;"
      "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 999999 WHERE "
      "correlationId = 172;"
      "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET start = 'x' WHERE correlationId = 141;",
      path, sizeof(path));
  TpTrace *t = read_path(path);
  if (t) {
    CHECK_INT(t->nops, 17);
    CHECK_INT(t->bad, 3);
    CHECK_INT(t->events, 139);
    CHECK_REPORT_(has(t->warning, "bad.sqlite: CUPTI_ACTIVITY_KIND_KERNEL row 2: field end: before "
                                  "start; the row was skipped"),
                  "%s", t->warning);
    CHECK_INT(t->warnings, 3);
    tp_trace_free(t);
  }
  unlink(path);
  // a second GPU: its ops are left out, with a warning
  changed_copy(db, n, "gpus.sqlite",
               "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET deviceId = 1 WHERE correlationId = 141", path,
               sizeof(path));
  t = read_path(path);
  if (t) {
    CHECK_INT(t->nops, 19);
    CHECK_INT(t->ignored, 25);
    CHECK_REPORT_(has(t->warning, "1 ops of other GPUs or processes than device 0 were left out"),
                  "%s", t->warning);
    tp_trace_free(t);
  }
  unlink(path);
  // the saxpy ranges renamed ProfilerStep#1..5: each holds the launch of one kernel
  changed_copy(db, n, "steps.sqlite",
               "CREATE TEMP TABLE r AS SELECT rowid AS id, ROW_NUMBER() OVER (ORDER BY start) AS k "
               "FROM NVTX_EVENTS WHERE text = 'saxpy';"
               "UPDATE NVTX_EVENTS SET text = 'ProfilerStep#' || (SELECT k FROM r WHERE r.id = "
               "NVTX_EVENTS.rowid) WHERE rowid IN (SELECT id FROM r);",
               path, sizeof(path));
  t = read_path(path);
  if (t) {
    CHECK(!t->stepless);
    CHECK_INT(t->nsteps, 5);
    CHECK_INT(t->unassigned, 15);
    CHECK_INT(t->ignored, 19);
    for (size_t i = 0; i < t->nsteps && i < 5; i++) {
      CHECK_INT(t->steps[i].number, (int64_t)i + 1);
      CHECK_INT(t->steps[i].ops, 1);
    }
    if (t->nsteps == 5) {
      CHECK_INT(t->steps[0].ts, 924881857);
      CHECK_INT(t->steps[0].dur, 924940911 - 924881857);
    }
    // windows (Python over the same rows): start, length, busy
    static const int64_t want[5][3] = {{924922186, 271136056, 74805744},
                                       {1196058242, 253119315, 74708689},
                                       {1449177557, 247098397, 74718225},
                                       {1696275954, 251506663, 74702096},
                                       {1947782617, 17713960, 17713960}};
    Figures f[5];
    if (breakdown(t, f, 5) == 5) {
      for (int i = 0; i < 5; i++) {
        CHECK_INT(f[i].start, want[i][0]);
        CHECK_INT(f[i].window, want[i][1]);
        CHECK_INT(f[i].busy, want[i][2]);
      }
    }
    tp_trace_free(t);
  }
  unlink(path);
  // hostile schema: the kernel table is a view (views are off: no such table), a trigger
  changed_copy(db, n, "view.sqlite",
               "CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL;"
               "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;"
               "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE c(x) AS (SELECT 1 UNION "
               "ALL SELECT x + 1 FROM c) SELECT * FROM k2, c;",
               path, sizeof(path));
  t = read_path(path);
  if (t) {
    CHECK_INT(t->nops, 15);  // the copies only
    tp_trace_free(t);
  }
  unlink(path);
}

static void check_fails_path(const char *path, int code, const char *want) {
  TpTrace *t = NULL;
  TpError err = {0};
  int rc = tp_trace_read(path, &t, &err);
  CHECK_REPORT_(rc == code, "%s: code %d expected, got %d (%s)", path, code, rc, err.msg);
  CHECK_REPORT_(has(err.msg, want), "'%s' in '%s'", want, err.msg);
  CHECK_REPORT_(strncmp(err.msg, path, strlen(path)) == 0, "message '%s'", err.msg);
  CHECK(t == NULL);
  tp_trace_free(t);
}

// Other databases, cuts and damaged bytes: an error naming the file, or what could be read with
// a warning; never a crash.
static void test_damage(const unsigned char *db, size_t n) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/other.sqlite", tmpdir);
  sqlite3 *s = NULL;
  CHECK_INT(sqlite3_open(path, &s), SQLITE_OK);
  exec(s, "CREATE TABLE foo(a INTEGER); INSERT INTO foo VALUES (1)");
  sqlite3_close(s);
  check_fails_path(path, TP_EPARSE, "without the tables of an Nsight Systems export");
  unlink(path);
  // the magic alone, the first page alone
  write_file("magic.sqlite", db, 16, path, sizeof(path));
  check_fails_path(path, TP_EPARSE, "magic.sqlite: ");
  unlink(path);
  int failed = 0, read = 0;
  static const size_t cuts[] = {100, 4096, 8192, 65536, 500000, 1000000, 1613823};
  for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
    write_file("cut.sqlite", db, cuts[i], path, sizeof(path));
    for (int gz = 0; gz < 2; gz++) {
      TpTrace *t = NULL;
      TpError err = {0};
      int rc;
      if (gz) {
        rc = tp_trace_read_mem("cut", db, cuts[i], &t, &err);
      } else {
        rc = tp_trace_read(path, &t, &err);
      }
      const char *label = gz ? "cut" : path;
      if (rc != 0) {
        failed++;
        CHECK_REPORT_(rc == TP_EPARSE && strncmp(err.msg, label, strlen(label)) == 0 &&
                          has(err.msg, "(the file is cut short: "),
                      "cut %zu: %d %s", cuts[i], rc, err.msg);
      } else {
        read++;
        CHECK(t->nops <= 20 && t->launches <= 95);
        CHECK_REPORT_(t->truncated && has(t->warning, "the file is cut short: "), "cut %zu: %s",
                      cuts[i], t->warning);
        tp_trace_free(t);
      }
    }
  }
  unlink(path);
  CHECK(failed > 0);
  // damaged bytes (a deterministic spread over the file)
  unsigned char *bad = malloc(n);
  uint32_t x = 12345;
  for (int round = 0; round < 40; round++) {
    memcpy(bad, db, n);
    for (int k = 0; k < 64; k++) {
      x = x * 1664525u + 1013904223u;
      size_t at = 100 + (x % (uint32_t)(n - 100));
      bad[at] ^= (unsigned char)(x >> 24 | 1);
    }
    TpTrace *t = NULL;
    TpError err = {0};
    int rc = tp_trace_read_mem("flip", bad, n, &t, &err);
    CHECK_REPORT_(rc == 0 || ((rc == TP_EPARSE || rc == TP_ELIMIT) && has(err.msg, "flip: ")),
                  "round %d: %d %s", round, rc, err.msg);
    tp_trace_free(t);
  }
  free(bad);
  printf("damage: %d cuts read, %d refused\n", read, failed);
}

int main(void) {
  const char *src = getenv("TPLUA_SOURCE_DIR");
  snprintf(fixtures, sizeof(fixtures), "%s/tests/fixtures/traces", src ? src : ".");
  if (!make_tmpdir("test_trace_nsys")) {
    return 1;
  }
  char path[1200];
  snprintf(path, sizeof(path), "%s/nsys_saxpy_mpi_a100.sqlite.gz", fixtures);
  size_t n = 0;
  unsigned char *db = gunzip(path, &n);
  CHECK_INT(n, 1613824);
  if (db) {
    test_saxpy(db, n);
    test_changed(db, n);
    test_damage(db, n);
  }
  test_cloverleaf();
  free(db);
  CHECK_INT(rmdir(tmpdir), 0);
  return CHECK_DONE();
}
