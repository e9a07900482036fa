// What the trace readers' unit tests share (test_trace.c, test_trace_nsys.c,
// test_trace_rocprof.c): a temporary directory, reading a trace that must be read or must fail,
// and looking up names, categories and kept members of a read trace. Include after check.h.
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

static char tmpdir[64];

// Makes tmpdir from a mkdtemp(3) template ("/tmp/NAME.XXXXXX"); false (reported) when it fails.
static inline bool make_tmpdir(const char *name) {
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/%s.XXXXXX", name);
  if (!mkdtemp(tmpdir)) {
    CHECK_REPORT_(0, "mkdtemp %s failed", tmpdir);
    return false;
  }
  return true;
}

static inline bool has(const char *text, const char *want) {
  return text && strstr(text, want) != NULL;
}

// Writes p[0, n) to tmpdir/name; `path` receives its path.
static inline void write_file(const char *name, const void *p, size_t n, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f) {
    CHECK_INT(fwrite(p, 1, n, f), n);
    CHECK_INT(fclose(f), 0);
  }
}

static inline TpTrace *read_mem(const char *label, const void *p, size_t n) {
  TpTrace *t = NULL;
  TpError err = {0};
  int rc = tp_trace_read_mem(label, p, n, &t, &err);
  CHECK_REPORT_(rc == 0 && t != NULL, "%s: read failed: %d %s", label, rc, err.msg);
  return rc == 0 ? t : NULL;
}

static inline TpTrace *read_path(const char *path) {
  TpTrace *t = NULL;
  TpError err = {0};
  int rc = tp_trace_read(path, &t, &err);
  CHECK_REPORT_(rc == 0 && t != NULL, "%s: read failed: %d %s", path, rc, err.msg);
  return rc == 0 ? t : NULL;
}

// Reading p[0, n) must fail with `code` and a message "label: ..." holding `want`.
static inline void check_fails(const char *label, const void *p, size_t n, int code,
                               const char *want) {
  TpTrace *t = NULL;
  TpError err = {0};
  int rc = tp_trace_read_mem(label, p, n, &t, &err);
  CHECK_REPORT_(rc == code, "%s: code %d expected, got %d (%s)", label, code, rc, err.msg);
  CHECK_REPORT_(has(err.msg, want), "%s: '%s' in '%s'", label, want, err.msg);
  CHECK_REPORT_(strncmp(err.msg, label, strlen(label)) == 0, "%s: message '%s'", label, err.msg);
  CHECK(t == NULL);
  tp_trace_free(t);
}

static inline const char *name_of(const TpTrace *t, size_t id) {
  return t->arena + t->names[id].at;
}

static inline const TpTraceName *name_named(const TpTrace *t, const char *name) {
  for (size_t i = 0; i < t->nnames; i++) {
    if (strcmp(name_of(t, i), name) == 0) {
      return &t->names[i];
    }
  }
  CHECK_REPORT_(0, "no name %s", name);
  return NULL;
}

static inline void check_name(const TpTrace *t, const char *name, uint64_t count, int64_t total) {
  const TpTraceName *nm = name_named(t, name);
  if (nm) {
    CHECK_REPORT_(nm->count == count && nm->total == total,
                  "%s: %llu ops, %lld ns (want %llu, %lld)", name, (unsigned long long)nm->count,
                  (long long)nm->total, (unsigned long long)count, (long long)total);
  }
}

// The JSON text of a kept top-level member (its length in *len when len is not NULL), or NULL.
static inline const char *meta_text(const TpTrace *t, const char *key, size_t *len) {
  for (size_t i = 0; i < t->nmeta; i++) {
    if (t->meta[i].key_len == strlen(key) &&
        memcmp(t->arena + t->meta[i].key_at, key, strlen(key)) == 0) {
      if (len) {
        *len = t->meta[i].len;
      }
      return t->arena + t->meta[i].at;
    }
  }
  if (len) {
    *len = 0;
  }
  return NULL;
}

typedef struct CatCount {
  const char *cat;
  uint64_t count;
} CatCount;

static inline void find_cat(const char *cat, size_t len, uint64_t count, void *ud) {
  CatCount *want = ud;
  if (strlen(want->cat) == len && memcmp(cat, want->cat, len) == 0) {
    want->count = count;
  }
}

// How many events of category `cat` the trace counted.
static inline uint64_t cat_count(const TpTrace *t, const char *cat) {
  CatCount c = {cat, 0};
  tp_trace_categories(t, find_cat, &c);
  return c.count;
}
