// Unit tests of engine/jsonscan: string literals (each failure at its byte, with its message),
// top-level objects cut into members (spans, kinds, children's kinds) or refused (invalid JSON,
// duplicate keys at any level, escaped keys, too deep), and the file reader: order, read errors,
// byte order marks, more files than it reads ahead, one thread or several, closed early.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "jsonscan.h"

static const unsigned char *u(const char *s) {
  return (const unsigned char *)s;
}

// tp_jsonscan_string on s (which starts with the quote): true, or the failure's offset and
// message must be these.
static void check_string(const char *s, bool ok, size_t off, const char *why) {
  size_t pos = 0;
  TpJsonScanError e = {0};
  bool got = tp_jsonscan_string(u(s), strlen(s), &pos, &e);
  CHECK_REPORT_(got == ok, "string %s: %s expected", s, ok ? "accepted" : "refused");
  if (ok && got) {
    CHECK_INT(pos, strlen(s));
  } else if (!ok && !got) {
    CHECK_INT(e.code, TP_EPARSE);
    CHECK_INT(e.off, off);
    CHECK_REPORT_(strstr(e.why, why) != NULL, "string %s: '%s' in '%s'", s, why, e.why);
  }
}

static void test_strings(void) {
  check_string("\"plain ascii, long enough for two words\"", true, 0, NULL);
  check_string("\"caf\xC3\xA9 \\u00e9 \\ud83d\\ude00 \\n\\t\\\\\\\"\\/\"", true, 0, NULL);
  check_string("\"abc", false, 0, "unterminated string");
  check_string("\"a\\x\"", false, 2, "invalid escape '\\x'");
  check_string("\"a\\u12G4\"", false, 2, "invalid \\u escape");
  check_string("\"\\u0000\"", false, 1, "\\u0000 (NUL)");
  check_string("\"\\ud83d x\"", false, 1, "unpaired UTF-16 surrogate \\uD83D");
  check_string("\"\\ude00\"", false, 1, "unpaired UTF-16 surrogate \\uDE00");
  check_string("\"tab\there\"", false, 4, "unescaped control character U+0009");
  check_string("\"bad \xC0\xAF utf8\"", false, 5, "invalid UTF-8 (byte 0xC0)");
  check_string("\"surrogate \xED\xA0\x80\"", false, 11, "invalid UTF-8 (byte 0xED)");
  // The word-at-a-time run stops at the right byte wherever the quote falls in the word.
  for (int k = 0; k < 20; k++) {
    char buf[64];
    memset(buf, 'x', sizeof buf);
    buf[0] = '"';
    buf[1 + k] = '"';
    buf[2 + k] = '\0';
    size_t pos = 0;
    CHECK(tp_jsonscan_string(u(buf), strlen(buf), &pos, NULL));
    CHECK_INT(pos, 2 + k);
  }
}

// Scans s: the result must be `want`; with 1, `n` members.
static TpJsonScan scan_of(const char *s, int want, size_t n) {
  TpJsonScan sc = {0};
  int rc = tp_jsonscan_object(&sc, u(s), strlen(s), 512);
  CHECK_REPORT_(rc == want, "scan of %s: %d expected, got %d", s, want, rc);
  if (want == 1) {
    CHECK_INT(sc.n, n);
  }
  return sc;
}

static void test_objects(void) {
  const char *doc = " {\"a\": [1, 2.5e-3, null, \"x\", {}], \"b\": {\"k\": true, \"j\": [false]},\n"
                    "  \"c\": -0, \"d\": \"s\", \"e\": null} ";
  TpJsonScan sc = scan_of(doc, 1, 5);
  if (sc.n == 5) {
    const TpJsonMember *m = sc.members;
    CHECK_INT(m[0].key_len, 1);
    CHECK(memcmp(doc + m[0].key_at, "a", 1) == 0);
    CHECK(memcmp(doc + m[0].at, "[1, 2.5e-3, null, \"x\", {}]", m[0].end - m[0].at) == 0);
    CHECK_INT(m[0].info.kind, TP_JSON_ARRAY);
    CHECK_INT(m[0].info.count, 5);
    CHECK_INT(m[0].info.kinds[TP_JSON_NUMBER], 2);
    CHECK_INT(m[0].info.kinds[TP_JSON_NULL], 1);
    CHECK_INT(m[0].info.kinds[TP_JSON_STRING], 1);
    CHECK_INT(m[0].info.kinds[TP_JSON_OBJECT], 1);
    CHECK_INT(m[1].info.kind, TP_JSON_OBJECT);
    CHECK_INT(m[1].info.count, 2);
    CHECK_INT(m[1].info.kinds[TP_JSON_BOOLEAN], 1);
    CHECK_INT(m[1].info.kinds[TP_JSON_ARRAY], 1);
    CHECK_INT(m[2].info.kind, TP_JSON_NUMBER);
    CHECK_INT(m[3].info.kind, TP_JSON_STRING);
    CHECK_INT(m[4].info.kind, TP_JSON_NULL);
    CHECK_STR(tp_json_kind_names[m[4].info.kind], "null");
  }
  // The scratch is reused by the next scan.
  CHECK_INT(tp_jsonscan_object(&sc, u("{}"), 2, 512), 1);
  CHECK_INT(sc.n, 0);
  tp_jsonscan_free(&sc);

  // Refused: the caller's ordinary decode says why.
  const char *refused[] = {
      "[1, 2]",                         // not an object
      "{\"a\": 1,}",                    // trailing comma
      "{\"a\": 01}",                    // leading zero
      "{\"a\": 1.}",                    // no digit after the point
      "{\"a\": tru}",                   // truncated literal
      "{\"a\": [1 2]}",                 // missing comma
      "{\"a\": 1} x",                   // text after the object
      "{\"a\": 1, \"a\": 2}",           // duplicate top-level key
      "{\"a\": {\"k\": 1, \"k\": 2}}",  // duplicate nested key
      "{\"\\u0061\": 1}",               // escaped key
      "{\"a\": \"\\x\"}",               // bad escape in a value
      "{\"a\": [1, 2]",                 // unterminated
      "",                               // empty
  };
  for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
    TpJsonScan r = scan_of(refused[k], 0, 0);
    CHECK_INT(r.n, 0);
    tp_jsonscan_free(&r);
  }
  // Many keys in one object (the hashed duplicate check), one of them twice.
  char big[8192];
  size_t o = 0;
  o += (size_t)snprintf(big + o, sizeof big - o, "{\"m\": {");
  for (int k = 0; k < 300; k++) {
    o += (size_t)snprintf(big + o, sizeof big - o, "%s\"key_%d\": %d", k ? ", " : "", k, k);
  }
  snprintf(big + o, sizeof big - o, "}}");
  TpJsonScan ok = scan_of(big, 1, 1);
  CHECK_INT(ok.members[0].info.count, 300);
  tp_jsonscan_free(&ok);
  char *dup = strstr(big, "\"key_299\"");
  memcpy(dup, "\"key_000\"", 9);  // key_000 is not key_0: still unique
  ok = scan_of(big, 1, 1);
  tp_jsonscan_free(&ok);
  memcpy(dup, "\"key_10\" ", 9);  // now key_10 appears twice
  ok = scan_of(big, 0, 0);
  tp_jsonscan_free(&ok);

  // Depth: the object is level 1; max_depth 3 allows two nested levels below it.
  TpJsonScan d = {0};
  CHECK_INT(tp_jsonscan_object(&d, u("{\"a\": [[1]]}"), 12, 3), 1);
  CHECK_INT(tp_jsonscan_object(&d, u("{\"a\": [[[1]]]}"), 14, 3), 0);
  CHECK_INT(tp_jsonscan_object(&d, u("{}"), 2, 0), 0);
  CHECK_INT(tp_jsonscan_object(&d, u("{}"), 2, TP_JSONSCAN_MAX_DEPTH + 1), 0);
  tp_jsonscan_free(&d);
}

static char tmpdir[64];

static void write_file(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f) {
    fwrite(text, 1, strlen(text), f);
    fclose(f);
  }
}

// Reads the files named in `names` with the given threads and look-ahead, checking each.
static void read_all(int threads, size_t ahead, size_t count) {
  char paths[64][256];
  const char *ptrs[64];
  for (size_t k = 0; k < count; k++) {
    if (k % 5 == 3) {
      snprintf(paths[k], sizeof paths[k], "%s/missing-%zu.json", tmpdir, k);
    } else if (k % 5 == 4) {
      snprintf(paths[k], sizeof paths[k], "%s/bom.json", tmpdir);
    } else {
      snprintf(paths[k], sizeof paths[k], "%s/f%zu.json", tmpdir, k);
    }
    ptrs[k] = paths[k];
  }
  TpError err;
  TpJsonFiles *r = tp_jsonfiles_open(ptrs, count, 1 << 20, 512, ahead, threads, &err);
  CHECK(r != NULL);
  if (!r) {
    return;
  }
  for (size_t k = 0; k < count; k++) {
    TpJsonFile *f = tp_jsonfiles_next(r, &err);
    CHECK(f != NULL);
    if (!f) {
      continue;
    }
    CHECK_STR(f->path, paths[k]);
    if (k % 5 == 3) {
      CHECK(f->text == NULL);
      CHECK_INT(f->err.code, -ENOENT);
    } else if (k % 5 == 4) {
      CHECK_INT(f->skip, 3);
      CHECK_INT(f->scanned, 1);
      CHECK_INT(f->scan.n, 1);
    } else {
      CHECK(f->text != NULL);
      CHECK_INT(f->st.type, TP_FS_FILE);
      int want_n = 0;
      CHECK(sscanf(f->text, "{\"n\": %d", &want_n) == 1);
      CHECK_INT(want_n, k);
      CHECK_INT(f->scanned, k % 5 == 2 ? 0 : 1);  // f2, f7, ...: not JSON
      if (f->scanned) {
        CHECK_INT(f->scan.n, 2);
      }
    }
    tp_jsonfile_free(f);
  }
  CHECK(tp_jsonfiles_next(r, &err) == NULL);
  CHECK_INT(err.code, 0);
  CHECK(tp_jsonfiles_next(r, &err) == NULL);
  tp_jsonfiles_close(r);
}

static void test_files(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_jsonscan.XXXXXX");
  CHECK(mkdtemp(tmpdir) != NULL);
  for (int k = 0; k < 40; k++) {
    char name[32], text[128];
    snprintf(name, sizeof name, "f%d.json", k);
    snprintf(text, sizeof text, k % 5 == 2 ? "{\"n\": %d, \"x\": ]" : "{\"n\": %d, \"x\": [1, 2]}",
             k);
    write_file(name, text);
  }
  write_file("bom.json", "\xEF\xBB\xBF{\"a\": 1}");
  read_all(1, 1, 40);
  read_all(1, 8, 40);
  read_all(3, 4, 40);
  read_all(4, 64, 7);

  // Closed before the end, with files read ahead and not handed out: they are freed.
  char paths[20][256];
  const char *ptrs[20];
  for (int k = 0; k < 20; k++) {
    snprintf(paths[k], sizeof paths[k], "%s/f%d.json", tmpdir, k);
    ptrs[k] = paths[k];
  }
  TpError err;
  TpJsonFiles *r = tp_jsonfiles_open(ptrs, 20, 1 << 20, 512, 8, 2, &err);
  TpJsonFile *f = tp_jsonfiles_next(r, &err);
  CHECK(f != NULL && f->text != NULL);
  tp_jsonfile_free(f);
  tp_jsonfiles_close(r);
  tp_jsonfiles_close(NULL);
  // Nothing to read, and reading without scanning (max_depth 0).
  r = tp_jsonfiles_open(ptrs, 0, 1 << 20, 512, 8, 2, &err);
  CHECK(tp_jsonfiles_next(r, &err) == NULL);
  tp_jsonfiles_close(r);
  r = tp_jsonfiles_open(ptrs, 1, 4, 0, 8, 2, &err);  // f0.json is longer than 4 bytes
  f = tp_jsonfiles_next(r, &err);
  CHECK(f != NULL && f->text == NULL && f->err.code == TP_ELIMIT);
  tp_jsonfile_free(f);
  tp_jsonfiles_close(r);

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  CHECK(system(cmd) == 0);
}

int main(void) {
  test_strings();
  test_objects();
  test_files();
  return CHECK_DONE();
}
