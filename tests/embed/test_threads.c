// One engine per thread: two threads, each with its own engine, extract different logs and read
// different traces at the same time, round after round. Each result must equal the one a third
// engine computed alone beforehand, and hold the fixtures' expected values (EXPECTED.md,
// expected.json). Built twice: against libtplua.so, and with ThreadSanitizer from the sources.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tplua.h"

#define ROUNDS 10

typedef struct Job {
  const char *log;
  const char *trace;
  const char *want_log[2];    // squeezed JSON pieces the record must hold
  const char *want_trace[2];  // ... and the breakdown
  char *ref_log, *ref_trace;  // computed alone, before the threads start
  int log_ok, trace_ok;       // rounds whose results equal the references
  int failures;
} Job;

static pthread_barrier_t g_start;
static pthread_mutex_t g_report = PTHREAD_MUTEX_INITIALIZER;

static char *squeeze(const char *s) {
  char *out = malloc(strlen(s) + 1);
  size_t o = 0;
  for (; *s; s++) {
    if (*s != ' ' && *s != '\n') {
      out[o++] = *s;
    }
  }
  out[o] = '\0';
  return out;
}

static int holds(const char *json, const char *const want[2]) {
  char *sq = squeeze(json);
  int ok = strstr(sq, want[0]) != NULL && strstr(sq, want[1]) != NULL;
  free(sq);
  return ok;
}

static void fail(Job *j, const char *what, tplua_engine *T, int code) {
  pthread_mutex_lock(&g_report);
  fprintf(stderr, "%s: %s: %s (%s)\n", j->log, what, tplua_strerror(code), tplua_errmsg(T));
  pthread_mutex_unlock(&g_report);
  j->failures++;
}

static void *worker(void *arg) {
  Job *j = arg;
  tplua_engine *T = NULL;
  int code = tplua_new(&T, NULL);
  if (code != TPLUA_OK) {
    j->failures++;
    pthread_barrier_wait(&g_start);
    return NULL;
  }
  pthread_barrier_wait(&g_start);  // both engines exist: from here on they run at once
  for (int round = 0; round < ROUNDS; round++) {
    char *json = NULL;
    code = tplua_extract(T, j->log, NULL, &json);
    if (code != TPLUA_OK) {
      fail(j, "extract", T, code);
    } else if (strcmp(json, j->ref_log) == 0) {
      j->log_ok++;
    }
    tplua_free(json);
    code = tplua_trace(T, j->trace, NULL, &json);
    if (code != TPLUA_OK) {
      fail(j, "trace", T, code);
    } else if (strcmp(json, j->ref_trace) == 0) {
      j->trace_ok++;
    }
    tplua_free(json);
  }
  tplua_close(T);
  return NULL;
}

int main(void) {
  const char *src = getenv("TPLUA_SOURCE_DIR");
  src = src ? src : ".";
  char paths[4][4096];
  snprintf(paths[0], sizeof paths[0], "%s/tests/fixtures/logs/megatron/%s", src,
           "issue756_mixtral_memory_report.log");
  snprintf(paths[1], sizeof paths[1], "%s/tests/fixtures/traces/bert_small_h100.json.gz", src);
  snprintf(paths[2], sizeof paths[2], "%s/tests/fixtures/logs/torchtitan/%s", src,
           "pr1884_llama3_8b_multirank.log");
  snprintf(paths[3], sizeof paths[3], "%s/tests/fixtures/traces/bert_small_mi300.json.gz", src);
  Job jobs[2] = {
      {.log = paths[0],
       .trace = paths[1],
       .want_log = {"\"iterations\":[2,3]", "\"loss_values\":[2.02153,2.003316]"},
       .want_trace = {"\"busy\":309437", "\"idle\":3598388"}},
      {.log = paths[2],
       .trace = paths[3],
       .want_log = {"\"iterations\":[1]", "\"loss_values\":[12.2465]"},
       .want_trace = {"\"busy\":390748", "\"idle\":3105228"}},
  };

  // The references: one engine, one thing at a time.
  tplua_engine *T = NULL;
  CHECK_INT(tplua_new(&T, NULL), TPLUA_OK);
  for (int i = 0; i < 2 && T; i++) {
    CHECK_INT(tplua_extract(T, jobs[i].log, NULL, &jobs[i].ref_log), TPLUA_OK);
    CHECK_INT(tplua_trace(T, jobs[i].trace, NULL, &jobs[i].ref_trace), TPLUA_OK);
    CHECK(jobs[i].ref_log && holds(jobs[i].ref_log, jobs[i].want_log));
    CHECK(jobs[i].ref_trace && holds(jobs[i].ref_trace, jobs[i].want_trace));
  }
  tplua_close(T);
  if (!jobs[0].ref_log || !jobs[0].ref_trace || !jobs[1].ref_log || !jobs[1].ref_trace) {
    return CHECK_DONE();
  }
  CHECK(strcmp(jobs[0].ref_log, jobs[1].ref_log) != 0);
  CHECK(strcmp(jobs[0].ref_trace, jobs[1].ref_trace) != 0);

  pthread_barrier_init(&g_start, NULL, 2);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    CHECK_INT(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    pthread_join(th[i], NULL);
  }
  pthread_barrier_destroy(&g_start);
  for (int i = 0; i < 2; i++) {
    CHECK_INT(jobs[i].failures, 0);
    CHECK_INT(jobs[i].log_ok, ROUNDS);
    CHECK_INT(jobs[i].trace_ok, ROUNDS);
    free(jobs[i].ref_log);
    free(jobs[i].ref_trace);
  }
  return CHECK_DONE();
}
