// Unit tests of engine/db on SQLite files: parameters of every type, NULL, NUL bytes and long
// text, transactions, a waiting writer, damaged and unreachable files; the `?` rewriter used for
// PostgreSQL and the redaction of passwords in URLs (the PostgreSQL server itself is exercised
// by tests/spec/db_spec.lua).
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "db.h"

static char g_dir[256];

static void path_in(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", g_dir, name);
}

static TpDb *open_fresh(const char *name) {
  char p[300];
  path_in(p, sizeof p, name);
  TpDb *db = NULL;
  TpError err = {0};
  CHECK_INT(tp_db_open(p, NULL, &db, &err), 0);
  CHECK(db != NULL);
  return db;
}

static TpDbValue v_int(int64_t i) {
  return (TpDbValue){.type = TP_DB_INT, .i = i};
}
static TpDbValue v_float(double f) {
  return (TpDbValue){.type = TP_DB_FLOAT, .f = f};
}
static TpDbValue v_text(const char *s, size_t len) {
  return (TpDbValue){.type = TP_DB_TEXT, .s = s, .len = len};
}
static TpDbValue v_null(void) {
  return (TpDbValue){.type = TP_DB_NULL};
}
static TpDbValue v_bool(bool b) {
  return (TpDbValue){.type = TP_DB_BOOL, .i = b};
}

static int64_t count_rows(TpDb *db, const char *table) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  TpDbRows *rows = NULL;
  TpError err = {0};
  int64_t n = -1;
  if (tp_db_query(db, sql, NULL, 0, &rows, &err) == 0 && tp_db_rows_next(rows, &err) == 1) {
    TpDbValue v;
    tp_db_rows_value(rows, 0, &v);
    n = v.i;
  }
  tp_db_rows_close(rows);
  return n;
}

static void test_types(void) {
  TpDb *db = open_fresh("types.db");
  TpError err = {0};
  CHECK_STR(tp_db_backend(db), "sqlite");
  CHECK_INT(tp_db_script(db, "CREATE TABLE t (i INTEGER, f REAL, s TEXT, b INTEGER, n TEXT)", &err),
            0);
  size_t big = 3u << 20;  // 3 MiB with NUL bytes spread in it
  char *text = malloc(big);
  for (size_t k = 0; k < big; k++) {
    text[k] = (char)(k % 251);
  }
  TpDbValue p[5] = {v_int(INT64_MIN), v_float(-0.1), v_text(text, big), v_bool(true), v_null()};
  int64_t changed = -1;
  CHECK_INT(tp_db_exec(db, "INSERT INTO t VALUES (?, ?, ?, ?, ?)", p, 5, &changed, &err), 0);
  CHECK_INT(changed, 1);
  TpDbValue q[5] = {v_int(INT64_MAX), v_float(1e308), v_text("", 0), v_bool(false),
                    v_text("a\0b", 3)};
  CHECK_INT(tp_db_exec(db, "INSERT INTO t VALUES (?, ?, ?, ?, ?)", q, 5, &changed, &err), 0);

  TpDbRows *rows = NULL;
  CHECK_INT(tp_db_query(db, "SELECT i, f, s, b, n FROM t ORDER BY i", NULL, 0, &rows, &err), 0);
  CHECK_INT(tp_db_rows_columns(rows), 5);
  CHECK_STR(tp_db_rows_name(rows, 0), "i");
  CHECK_STR(tp_db_rows_name(rows, 4), "n");
  TpDbValue v;
  CHECK_INT(tp_db_rows_next(rows, &err), 1);
  tp_db_rows_value(rows, 0, &v);
  CHECK_INT(v.type, TP_DB_INT);
  CHECK(v.i == INT64_MIN);
  tp_db_rows_value(rows, 1, &v);
  CHECK_INT(v.type, TP_DB_FLOAT);
  CHECK(v.f == -0.1);
  tp_db_rows_value(rows, 2, &v);
  CHECK_INT(v.type, TP_DB_TEXT);
  CHECK_INT(v.len, big);
  CHECK(v.len == big && memcmp(v.s, text, big) == 0);
  tp_db_rows_value(rows, 3, &v);
  CHECK_INT(v.type, TP_DB_INT);  // SQLite keeps a boolean as 1 or 0
  CHECK_INT(v.i, 1);
  tp_db_rows_value(rows, 4, &v);
  CHECK_INT(v.type, TP_DB_NULL);
  CHECK_INT(tp_db_rows_next(rows, &err), 1);
  tp_db_rows_value(rows, 0, &v);
  CHECK(v.i == INT64_MAX);
  tp_db_rows_value(rows, 1, &v);
  CHECK(v.f == 1e308);
  tp_db_rows_value(rows, 2, &v);
  CHECK_INT(v.type, TP_DB_TEXT);
  CHECK_INT(v.len, 0);
  tp_db_rows_value(rows, 3, &v);
  CHECK_INT(v.i, 0);
  tp_db_rows_value(rows, 4, &v);
  CHECK_INT(v.len, 3);
  CHECK(memcmp(v.s, "a\0b", 3) == 0);
  CHECK_INT(tp_db_rows_next(rows, &err), 0);
  tp_db_rows_close(rows);
  free(text);

  // Parameter counts are checked; one statement at a time.
  CHECK_INT(tp_db_exec(db, "INSERT INTO t (i) VALUES (?)", p, 2, NULL, &err), TP_EINVAL);
  CHECK(strstr(err.msg, "types.db: 1 placeholders in the statement, 2 parameters given") != NULL);
  CHECK_INT(tp_db_exec(db, "INSERT INTO t (i) VALUES (1); INSERT INTO t (i) VALUES (2)", NULL, 0,
                       NULL, &err),
            TP_EINVAL);
  CHECK(strstr(err.msg, "several statements") != NULL);
  CHECK_INT(count_rows(db, "t"), 2);
  // A trailing semicolon and comment are one statement.
  CHECK_INT(tp_db_exec(db, "DELETE FROM t WHERE i = ?; -- done", p, 1, &changed, &err), 0);
  CHECK_INT(changed, 1);
  CHECK_INT(tp_db_exec(db, "SELECT * FROM nowhere", NULL, 0, NULL, &err), TP_EDB);
  CHECK(strstr(err.msg, "types.db: no such table: nowhere") != NULL);
  tp_db_close(db);
}

static void test_transactions(void) {
  TpDb *db = open_fresh("tx.db");
  TpError err = {0};
  CHECK_INT(
      tp_db_script(db, "CREATE TABLE t (k TEXT PRIMARY KEY); CREATE TABLE u (x INTEGER)", &err), 0);
  TpDbValue k = v_text("key", 3);
  CHECK_INT(tp_db_begin(db, &err), 0);
  CHECK_INT(tp_db_exec(db, "INSERT INTO t VALUES (?)", &k, 1, NULL, &err), 0);
  CHECK_INT(tp_db_rollback(db, &err), 0);
  CHECK_INT(count_rows(db, "t"), 0);
  CHECK_INT(tp_db_begin(db, &err), 0);
  CHECK_INT(tp_db_exec(db, "INSERT INTO t VALUES (?)", &k, 1, NULL, &err), 0);
  CHECK_INT(tp_db_commit(db, &err), 0);
  CHECK_INT(count_rows(db, "t"), 1);
  int64_t changed = -1;
  CHECK_INT(
      tp_db_exec(db, "INSERT INTO t VALUES (?) ON CONFLICT (k) DO NOTHING", &k, 1, &changed, &err),
      0);
  CHECK_INT(changed, 0);
  CHECK_INT(tp_db_exec(db, "INSERT INTO t VALUES (?)", &k, 1, NULL, &err), TP_EDB);
  CHECK(strstr(err.msg, "UNIQUE constraint failed") != NULL);
  // A failing statement of a script leaves the earlier ones in place outside a transaction, and
  // nothing of them inside one that is rolled back.
  CHECK_INT(tp_db_begin(db, &err), 0);
  CHECK_INT(tp_db_script(db, "INSERT INTO u VALUES (1); INSERT INTO nowhere VALUES (2)", &err),
            TP_EDB);
  CHECK_INT(tp_db_rollback(db, &err), 0);
  CHECK_INT(count_rows(db, "u"), 0);

  // A second connection waits for the write lock for its timeout, then gives up.
  char p[300];
  path_in(p, sizeof p, "tx.db");
  TpDb *other = NULL;
  TpDbOpenOpts opts = {.timeout_ms = 200};
  CHECK_INT(tp_db_open(p, &opts, &other, &err), 0);
  CHECK_INT(tp_db_begin(db, &err), 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_INT(tp_db_begin(other, &err), TP_EDB);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  CHECK(waited >= 0.18 && waited < 5.0);
  CHECK(strstr(err.msg, "database is locked") != NULL);
  CHECK_INT(tp_db_commit(db, &err), 0);
  CHECK_INT(tp_db_begin(other, &err), 0);
  CHECK_INT(tp_db_rollback(other, &err), 0);
  tp_db_close(other);
  tp_db_close(db);
  tp_db_close(NULL);
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  char *buf = malloc(1 << 20);
  *len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

static void write_file(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  fclose(f);
}

static void test_damaged(void) {
  char p[300];
  path_in(p, sizeof p, "damaged.db");
  TpDb *db = open_fresh("damaged.db");
  TpError err = {0};
  CHECK_INT(tp_db_script(db,
                         "CREATE TABLE t (x); INSERT INTO t VALUES (1);"
                         "PRAGMA wal_checkpoint(TRUNCATE)",
                         &err),
            0);
  tp_db_close(db);
  size_t len = 0;
  char *bytes = read_file(p, &len);
  CHECK(bytes != NULL && len >= 4096);
  memcpy(bytes, "Not an SQLite file", 18);
  write_file(p, bytes, len);
  db = NULL;
  CHECK_INT(tp_db_open(p, NULL, &db, &err), TP_ENOTDB);
  CHECK(db == NULL);
  char want[400];
  snprintf(want, sizeof want, "%s: file is not a database", p);
  CHECK_STR(err.msg, want);
  CHECK_STR(tp_error_name(err.code), "ENOTDB");
  size_t len2 = 0;
  char *after = read_file(p, &len2);
  CHECK(after && len2 == len && memcmp(after, bytes, len) == 0);
  free(after);
  free(bytes);
  char wal[320];
  snprintf(wal, sizeof wal, "%s-wal", p);
  CHECK(access(wal, F_OK) != 0);  // nothing was created beside it
}

// Damage past the header is found by the statement that reads the damaged page.
static void test_damaged_page(void) {
  char p[300];
  path_in(p, sizeof p, "pages.db");
  TpDb *db = open_fresh("pages.db");
  TpError err = {0};
  CHECK_INT(tp_db_script(db,
                         "PRAGMA page_size=4096; CREATE TABLE t (x TEXT);"
                         "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                         "WHERE i < 2000) INSERT INTO t SELECT printf('%0100d', i) FROM n;"
                         "PRAGMA wal_checkpoint(TRUNCATE)",
                         &err),
            0);
  tp_db_close(db);
  size_t len = 0;
  char *bytes = read_file(p, &len);
  CHECK(bytes != NULL && len > 3 * 4096);
  memset(bytes + 4096 + 512, 0xA5, 4096);  // into pages 2 and 3
  write_file(p, bytes, len);
  free(bytes);
  db = NULL;
  CHECK_INT(tp_db_open(p, NULL, &db, &err), 0);
  TpDbRows *rows = NULL;
  int rc = tp_db_query(db, "SELECT count(*), max(x) FROM t", NULL, 0, &rows, &err);
  if (rc == 0) {
    rc = tp_db_rows_next(rows, &err);
  }
  CHECK_INT(rc, TP_ENOTDB);
  CHECK(strstr(err.msg, "pages.db: database disk image is malformed") != NULL);
  tp_db_rows_close(rows);
  tp_db_close(db);
}

static void test_unreachable(void) {
  TpDb *db = NULL;
  TpError err = {0};
  char p[300];
  path_in(p, sizeof p, "missing-dir/x.db");
  CHECK_INT(tp_db_open(p, NULL, &db, &err), TP_EDB);
  CHECK(strstr(err.msg, "missing-dir/x.db: unable to open database file (No such file or "
                        "directory)") != NULL);
  // A parent that is a file.
  char file[300];
  path_in(file, sizeof file, "plain");
  write_file(file, "x", 1);
  path_in(p, sizeof p, "plain/x.db");
  CHECK_INT(tp_db_open(p, NULL, &db, &err), TP_EDB);
  CHECK(strstr(err.msg, "plain/x.db: unable to open database file (Not a directory)") != NULL);
  // A directory without write permission (root writes anywhere, so only checked as a user).
  if (geteuid() != 0) {
    char ro[300];
    path_in(ro, sizeof ro, "readonly");
    mkdir(ro, 0500);
    path_in(p, sizeof p, "readonly/x.db");
    CHECK_INT(tp_db_open(p, NULL, &db, &err), TP_EDB);
    CHECK(strstr(err.msg, "Permission denied") != NULL);
  }
  CHECK_INT(tp_db_open("", NULL, &db, &err), TP_EINVAL);
  CHECK(db == NULL);
}

// Rewrites sql and compares with want and the count.
static void rewrite_is(const char *sql, const char *want, size_t want_count) {
  TpBuf out = {0};
  size_t count = 99;
  CHECK_INT(tp_db_rewrite_placeholders(sql, strlen(sql), &out, &count), 0);
  CHECK_STR(out.data, want);
  CHECK_INT(count, want_count);
  tp_buf_free(&out);
}

static void test_rewrite(void) {
  rewrite_is("SELECT 1", "SELECT 1", 0);
  rewrite_is("", "", 0);
  rewrite_is("INSERT INTO t VALUES (?, ?, ?)", "INSERT INTO t VALUES ($1, $2, $3)", 3);
  rewrite_is("SELECT '?' , ?", "SELECT '?' , $1", 1);
  rewrite_is("SELECT 'it''s ?', ?", "SELECT 'it''s ?', $1", 1);
  rewrite_is("SELECT E'\\'?', ?", "SELECT E'\\'?', $1", 1);
  rewrite_is("SELECT '\\', ?", "SELECT '\\', $1", 1);  // no backslash escapes without E
  rewrite_is("SELECT \"a?b\" FROM t WHERE x = ?", "SELECT \"a?b\" FROM t WHERE x = $1", 1);
  rewrite_is("SELECT ? -- why?\n, ?", "SELECT $1 -- why?\n, $2", 2);
  rewrite_is("SELECT /* ? /* ? */ ? */ ?", "SELECT /* ? /* ? */ ? */ $1", 1);
  rewrite_is("SELECT $$a ? b$$, $tag$ ? $tag$, ?", "SELECT $$a ? b$$, $tag$ ? $tag$, $1", 1);
  rewrite_is("SELECT a$b, ?", "SELECT a$b, $1", 1);
  rewrite_is("SELECT 'unterminated ?", "SELECT 'unterminated ?", 0);
  char many[64 * 3 + 1] = {0};
  for (int i = 0; i < 64; i++) {
    strcat(many, "?, ");
  }
  TpBuf out = {0};
  size_t count = 0;
  CHECK_INT(tp_db_rewrite_placeholders(many, strlen(many), &out, &count), 0);
  CHECK_INT(count, 64);
  CHECK(strstr(out.data, "$9, $10, ") != NULL);
  CHECK(strstr(out.data, "$64, ") != NULL);
  tp_buf_free(&out);
}

static void redact_is(const char *target, const char *want) {
  char out[256];
  tp_db_redact(target, out, sizeof out);
  CHECK_STR(out, want);
}

static void test_redact(void) {
  CHECK(tp_db_is_url("postgresql://h/db"));
  CHECK(tp_db_is_url("postgres://h/db"));
  CHECK(!tp_db_is_url("/var/lib/history.db"));
  CHECK(!tp_db_is_url("postgresql:/h"));
  redact_is("/tmp/a.db", "/tmp/a.db");
  redact_is("postgresql://u:secret@host:5432/db", "postgresql://u:***@host:5432/db");
  redact_is("postgres://u@host/db", "postgres://u@host/db");
  redact_is("postgresql://u:p%40ss@/db?host=/tmp/s&port=5",
            "postgresql://u:***@/db?host=/tmp/s&port=5");
  redact_is("postgresql:///db?user=u&password=secret&port=5",
            "postgresql:///db?user=u&password=***&port=5");
  redact_is("postgresql://host/db?password=x", "postgresql://host/db?password=***");
  redact_is("postgresql://host/db?sslpassword=k&sslmode=require",
            "postgresql://host/db?sslpassword=***&sslmode=require");
  redact_is("postgresql://host/db?passwords_are=x&user=password",
            "postgresql://host/db?passwords_are=x&user=password");
  // A password written with an unencoded '@' or '/' is hidden whole.
  redact_is("postgresql://u:p@ss/w@host/db", "postgresql://u:***@host/db");
  redact_is("postgresql://u:pa/ss@host:5/db?port=5", "postgresql://u:***@host:5/db?port=5");
  redact_is("postgresql://@host/db", "postgresql://@host/db");
  // libpq percent-decodes query keys: an encoded "password" key is one too.
  redact_is("postgresql://h/db?pass%77ord=secret&sslpass%57ORD=k",
            "postgresql://h/db?pass%77ord=***&sslpass%57ORD=k");
  redact_is("postgresql://h/db?%70%61%73%73%77%6f%72%64=secret",
            "postgresql://h/db?%70%61%73%73%77%6f%72%64=***");
  redact_is("postgresql://host/db?options=a@b", "postgresql://host/db?options=a@b");
  char small[12];
  tp_db_redact("postgresql://u:secret@h/db", small, sizeof small);
  CHECK_STR(small, "postgresql:");
  // Empty passwords in the query grow the text: the label keeps all of it (no cut).
  TpDb *db = NULL;
  TpError err = {0};
  const char *url = "postgresql:///db?password=&password=&password=&password=&password=&"
                    "password=&password=&host=/nonexistent-dir&port=1";
  CHECK(tp_db_open(url, NULL, &db, &err) != 0);
  CHECK(db == NULL);
  CHECK(strstr(err.msg, "password=***&password=***&password=***&password=***&password=***&"
                        "password=***&password=***&host=/nonexistent-dir&port=1: ") != NULL);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/tplua-test-db.XXXXXX");
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_types();
  test_transactions();
  test_damaged();
  test_damaged_page();
  test_unreachable();
  test_rewrite();
  test_redact();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' && rm -rf '%s'", g_dir, g_dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "could not remove %s\n", g_dir);
  }
  return CHECK_DONE();
}
