// The SQLite backend: opens a file in WAL mode with a busy timeout and foreign keys on, and
// finds a damaged or foreign file at open by reading its header with a first statement.
#include "db_sqlite.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct Sq {
  sqlite3 *db;
  const char *label;  // owned by the face, outlives this
} Sq;

typedef struct SqCursor {
  Sq *q;
  sqlite3_stmt *st;
} SqCursor;

// Fills err from the connection's last error (`rc` is the result code that failed).
static int fail(sqlite3 *db, const char *label, int rc, TpError *err) {
  int code = TP_EDB;
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      code = TP_ENOTDB;
      break;
    case SQLITE_NOMEM:
      code = TP_ENOMEM;
      break;
    default:
      break;
  }
  const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return tp_error_set(err, code, "%s: %s", label, msg);
}

// Why a file cannot be opened for writing: SQLite's last errno is that of its read-only retry,
// so ask the file system (the file, else its directory) without creating anything.
static int open_errno(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return EISDIR;
    }
    return access(path, R_OK | W_OK) == 0 ? 0 : errno;
  }
  if (errno != ENOENT) {
    return errno;
  }
  const char *slash = strrchr(path, '/');
  char dir[4096];
  if (!slash) {
    snprintf(dir, sizeof dir, ".");
  } else if (slash == path) {
    snprintf(dir, sizeof dir, "/");
  } else {
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  }
  if (stat(dir, &st) != 0) {
    return errno;
  }
  if (!S_ISDIR(st.st_mode)) {
    return ENOTDIR;
  }
  return access(dir, W_OK | X_OK) == 0 ? 0 : errno;
}

// Runs a statement that needs no parameters, discarding its rows.
static int run_simple(Sq *q, const char *sql, TpError *err) {
  int rc = sqlite3_exec(q->db, sql, NULL, NULL, NULL);
  return rc == SQLITE_OK ? 0 : fail(q->db, q->label, rc, err);
}

static int sq_open(const char *target, const TpDbOpenOpts *opts, const char *label, void **impl,
                   TpError *err) {
  *impl = NULL;
  Sq *q = calloc(1, sizeof *q);
  if (!q) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", label);
  }
  q->label = label;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(target, &q->db, flags, NULL);
  if (rc != SQLITE_OK) {
    int sys = (rc & 0xff) == SQLITE_CANTOPEN ? open_errno(target) : 0;
    int r = fail(q->db, label, rc, err);
    if (sys != 0) {
      r = tp_error_set(err, r, "%s: unable to open database file (%s)", label, strerror(sys));
    }
    sqlite3_close_v2(q->db);
    free(q);
    return r;
  }
  sqlite3_extended_result_codes(q->db, 1);
  sqlite3_busy_timeout(q->db, opts->timeout_ms);
  // The first statement reads the header: a file that is not a database, or a damaged one,
  // fails here, before anything could be written to it.
  int r = run_simple(q, "PRAGMA schema_version", err);
  if (r == 0) {
    r = run_simple(q, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON",
                   err);
  }
  if (r != 0) {
    sqlite3_close_v2(q->db);
    free(q);
    return r;
  }
  *impl = q;
  return 0;
}

static void sq_close(void *impl) {
  Sq *q = impl;
  if (!q) {
    return;
  }
  sqlite3_close_v2(q->db);  // a zombie until the last cursor is finalized
  free(q);
}

// Says whether s holds nothing but blanks, semicolons and comments.
static bool only_blank(const char *s) {
  while (*s) {
    if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == ';') {
      s++;
    } else if (s[0] == '-' && s[1] == '-') {
      s += strcspn(s, "\n");
    } else if (s[0] == '/' && s[1] == '*') {
      const char *end = strstr(s + 2, "*/");
      if (!end) {
        return true;  // an unterminated comment runs to the end (SQLite reads it so)
      }
      s = end + 2;
    } else {
      return false;
    }
  }
  return true;
}

// Prepares one statement and binds its parameters.
static int prepare(Sq *q, const char *sql, const TpDbValue *params, size_t nparams,
                   sqlite3_stmt **out, TpError *err) {
  *out = NULL;
  sqlite3_stmt *st = NULL;
  const char *tail = NULL;
  int rc = sqlite3_prepare_v2(q->db, sql, -1, &st, &tail);
  if (rc != SQLITE_OK) {
    return fail(q->db, q->label, rc, err);
  }
  if (tail && !only_blank(tail)) {
    sqlite3_finalize(st);
    return tp_error_set(err, TP_EINVAL, "%s: several statements given: run them as a script",
                        q->label);
  }
  int want = st ? sqlite3_bind_parameter_count(st) : 0;
  if ((size_t)want != nparams) {
    sqlite3_finalize(st);
    return tp_error_set(err, TP_EINVAL,
                        "%s: %d placeholders in the statement, %zu parameters given", q->label,
                        want, nparams);
  }
  for (size_t k = 0; k < nparams; k++) {
    const TpDbValue *v = &params[k];
    int i = (int)k + 1;
    switch (v->type) {
      case TP_DB_NULL:
        rc = sqlite3_bind_null(st, i);
        break;
      case TP_DB_INT:
      case TP_DB_BOOL:
        rc = sqlite3_bind_int64(st, i, v->i);
        break;
      case TP_DB_FLOAT:
        rc = sqlite3_bind_double(st, i, v->f);
        break;
      case TP_DB_TEXT:
        rc = sqlite3_bind_text64(st, i, v->len ? v->s : "", v->len, SQLITE_TRANSIENT, SQLITE_UTF8);
        break;
    }
    if (rc != SQLITE_OK) {
      int r = fail(q->db, q->label, rc, err);
      sqlite3_finalize(st);
      return r;
    }
  }
  *out = st;
  return 0;
}

static int sq_exec(void *impl, const char *sql, const TpDbValue *params, size_t nparams,
                   int64_t *changed, TpError *err) {
  Sq *q = impl;
  *changed = 0;
  sqlite3_stmt *st = NULL;
  int r = prepare(q, sql, params, nparams, &st, err);
  if (r != 0 || !st) {
    return r;
  }
  sqlite3_int64 before = sqlite3_total_changes64(q->db);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
  }
  if (rc != SQLITE_DONE) {
    r = fail(q->db, q->label, rc, err);
  } else {
    *changed = sqlite3_total_changes64(q->db) - before;
  }
  sqlite3_finalize(st);
  return r;
}

static int sq_query(void *impl, const char *sql, const TpDbValue *params, size_t nparams,
                    void **cursor, TpError *err) {
  Sq *q = impl;
  *cursor = NULL;
  SqCursor *c = calloc(1, sizeof *c);
  if (!c) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", q->label);
  }
  c->q = q;
  int r = prepare(q, sql, params, nparams, &c->st, err);
  if (r != 0) {
    free(c);
    return r;
  }
  *cursor = c;
  return 0;
}

static size_t sq_columns(const void *cursor) {
  const SqCursor *c = cursor;
  return c->st ? (size_t)sqlite3_column_count(c->st) : 0;
}

static const char *sq_column_name(const void *cursor, size_t i) {
  const SqCursor *c = cursor;
  const char *name = sqlite3_column_name(c->st, (int)i);
  return name ? name : "?";
}

static int sq_step(void *cursor, TpError *err) {
  SqCursor *c = cursor;
  if (!c->st) {
    return 0;
  }
  int rc = sqlite3_step(c->st);
  if (rc == SQLITE_ROW) {
    return 1;
  }
  if (rc == SQLITE_DONE) {
    return 0;
  }
  return fail(c->q->db, c->q->label, rc, err);
}

static void sq_value(const void *cursor, size_t i, TpDbValue *v) {
  const SqCursor *c = cursor;
  memset(v, 0, sizeof *v);
  int col = (int)i;
  switch (sqlite3_column_type(c->st, col)) {
    case SQLITE_INTEGER:
      v->type = TP_DB_INT;
      v->i = sqlite3_column_int64(c->st, col);
      break;
    case SQLITE_FLOAT:
      v->type = TP_DB_FLOAT;
      v->f = sqlite3_column_double(c->st, col);
      break;
    case SQLITE_TEXT:
      v->type = TP_DB_TEXT;
      v->s = (const char *)sqlite3_column_text(c->st, col);
      v->len = (size_t)sqlite3_column_bytes(c->st, col);
      break;
    case SQLITE_BLOB:
      v->type = TP_DB_TEXT;
      v->s = sqlite3_column_blob(c->st, col);
      v->len = (size_t)sqlite3_column_bytes(c->st, col);
      break;
    default:
      v->type = TP_DB_NULL;
      break;
  }
  if (v->type == TP_DB_TEXT && !v->s) {
    v->s = "";  // an empty value, or memory ran out converting it
    v->len = 0;
  }
}

static void sq_cursor_close(void *cursor) {
  SqCursor *c = cursor;
  if (!c) {
    return;
  }
  sqlite3_finalize(c->st);
  free(c);
}

static int sq_script(void *impl, const char *sql, TpError *err) {
  return run_simple(impl, sql, err);
}

const TpDbOps tp_db_sqlite_ops = {
    .name = "sqlite",
    .dollar_params = false,
    .begin_sql = "BEGIN IMMEDIATE",
    .open = sq_open,
    .close = sq_close,
    .exec = sq_exec,
    .query = sq_query,
    .columns = sq_columns,
    .column_name = sq_column_name,
    .step = sq_step,
    .value = sq_value,
    .cursor_close = sq_cursor_close,
    .script = sq_script,
};
