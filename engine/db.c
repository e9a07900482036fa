// The database face: picks the backend from the target, rewrites `?` placeholders for servers
// that number them, checks parameter counts and runs transactions.
#include "db.h"

#include <stdlib.h>
#include <string.h>

#include "db_pg.h"
#include "db_sqlite.h"

struct TpDb {
  const TpDbOps *ops;
  void *impl;
  char *label;  // the target without its password; outlives impl
};

struct TpDbRows {
  const TpDbOps *ops;
  void *cursor;
};

bool tp_db_is_url(const char *target) {
  return strncmp(target, "postgresql://", 13) == 0 || strncmp(target, "postgres://", 11) == 0;
}

// Appends s[0..n) to out at *pos, keeping room for the NUL.
static void put(char *out, size_t cap, size_t *pos, const char *s, size_t n) {
  if (*pos >= cap) {
    return;
  }
  size_t room = cap - 1 - *pos;
  if (n > room) {
    n = room;
  }
  memcpy(out + *pos, s, n);
  *pos += n;
  out[*pos] = '\0';
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
    return (c | 0x20) - 'a' + 10;
  }
  return -1;
}

// Says whether the query key k[0..n) names a password (password, sslpassword), read as libpq
// reads it: percent-decoded, so that `pass%77ord=` is one too.
static bool password_key(const char *k, size_t n) {
  char key[64];
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    char c = k[i];
    if (c == '%' && i + 2 < n && hex_value(k[i + 1]) >= 0 && hex_value(k[i + 2]) >= 0) {
      c = (char)(hex_value(k[i + 1]) * 16 + hex_value(k[i + 2]));
      i += 2;
    }
    if (m == sizeof key) {
      return false;  // longer than any libpq keyword
    }
    key[m++] = c;
  }
  return m >= 8 && memcmp(key + m - 8, "password", 8) == 0;
}

void tp_db_redact(const char *target, char *out, size_t cap) {
  if (cap == 0) {
    return;
  }
  out[0] = '\0';
  size_t pos = 0;
  if (!tp_db_is_url(target)) {
    put(out, cap, &pos, target, strlen(target));
    return;
  }
  const char *p = strstr(target, "://") + 3;
  put(out, cap, &pos, target, (size_t)(p - target));
  size_t auth = tp_db_url_userinfo(p);
  if (auth > 0) {
    const char *colon = memchr(p, ':', auth);
    if (colon) {
      put(out, cap, &pos, p, (size_t)(colon - p));
      put(out, cap, &pos, ":***@", 5);
    } else {
      put(out, cap, &pos, p, auth + 1);
    }
    p += auth + 1;
  }
  const char *q = strchr(p, '?');
  if (!q) {
    put(out, cap, &pos, p, strlen(p));
    return;
  }
  put(out, cap, &pos, p, (size_t)(q - p) + 1);
  p = q + 1;
  while (*p) {
    size_t n = strcspn(p, "&");
    size_t key = strcspn(p, "=&");
    // password=, and sslpassword= (the passphrase of a client key)
    if (p[key] == '=' && password_key(p, key)) {
      put(out, cap, &pos, p, key + 1);
      put(out, cap, &pos, "***", 3);
    } else {
      put(out, cap, &pos, p, n);
    }
    p += n;
    if (*p == '&') {
      put(out, cap, &pos, "&", 1);
      p++;
    }
  }
}

int tp_db_open(const char *target, const TpDbOpenOpts *opts, TpDb **out, TpError *err) {
  *out = NULL;
  TpDbOpenOpts def = {.timeout_ms = TP_DB_TIMEOUT_MS};
  if (!opts) {
    opts = &def;
  }
  if (target[0] == '\0') {
    return tp_error_set(err, TP_EINVAL, "database: empty target");
  }
  TpDb *db = calloc(1, sizeof *db);
  // "***" may be longer than what it hides (`password=&password=`: +3 for every 10 bytes).
  size_t len = strlen(target);
  size_t cap = len + len / 2 + 16;
  char *label = malloc(cap);
  if (!db || !label) {
    free(db);
    free(label);
    return tp_error_set(err, TP_ENOMEM, "database: out of memory");
  }
  tp_db_redact(target, label, cap);
  db->label = label;
  db->ops = tp_db_is_url(target) ? &tp_db_pg_ops : &tp_db_sqlite_ops;
  int rc = db->ops->open(target, opts, label, &db->impl, err);
  if (rc != 0) {
    free(label);
    free(db);
    return rc;
  }
  *out = db;
  return 0;
}

void tp_db_close(TpDb *db) {
  if (!db) {
    return;
  }
  db->ops->close(db->impl);
  free(db->label);
  free(db);
}

const char *tp_db_backend(const TpDb *db) {
  return db->ops->name;
}

const char *tp_db_label(const TpDb *db) {
  return db->label;
}

static bool several_statements(const char *s, size_t len);

// The statement the backend runs: `sql` itself, or its rewrite into `buf` with the number of
// placeholders checked against `nparams`.
static int statement(TpDb *db, const char *sql, size_t nparams, TpBuf *buf, const char **out,
                     TpError *err) {
  *out = sql;
  if (!db->ops->dollar_params) {
    return 0;
  }
  size_t count = 0;
  if (tp_db_rewrite_placeholders(sql, strlen(sql), buf, &count) != 0) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", db->label);
  }
  if (several_statements(sql, strlen(sql))) {
    return tp_error_set(err, TP_EINVAL, "%s: several statements given: run them as a script",
                        db->label);
  }
  if (count != nparams) {
    return tp_error_set(err, TP_EINVAL,
                        "%s: %zu placeholders in the statement, %zu parameters given", db->label,
                        count, nparams);
  }
  *out = buf->data;
  return 0;
}

int tp_db_exec(TpDb *db, const char *sql, const TpDbValue *params, size_t nparams, int64_t *changed,
               TpError *err) {
  int64_t n = 0;
  TpBuf buf = {0};
  const char *text = NULL;
  int rc = statement(db, sql, nparams, &buf, &text, err);
  if (rc == 0) {
    rc = db->ops->exec(db->impl, text, params, nparams, &n, err);
  }
  tp_buf_free(&buf);
  if (changed) {
    *changed = rc == 0 ? n : 0;
  }
  return rc;
}

int tp_db_query(TpDb *db, const char *sql, const TpDbValue *params, size_t nparams, TpDbRows **out,
                TpError *err) {
  *out = NULL;
  TpDbRows *rows = calloc(1, sizeof *rows);
  if (!rows) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", db->label);
  }
  rows->ops = db->ops;
  TpBuf buf = {0};
  const char *text = NULL;
  int rc = statement(db, sql, nparams, &buf, &text, err);
  if (rc == 0) {
    rc = db->ops->query(db->impl, text, params, nparams, &rows->cursor, err);
  }
  tp_buf_free(&buf);
  if (rc != 0) {
    free(rows);
    return rc;
  }
  *out = rows;
  return 0;
}

size_t tp_db_rows_columns(const TpDbRows *rows) {
  return rows->ops->columns(rows->cursor);
}

const char *tp_db_rows_name(const TpDbRows *rows, size_t i) {
  return rows->ops->column_name(rows->cursor, i);
}

int tp_db_rows_next(TpDbRows *rows, TpError *err) {
  return rows->ops->step(rows->cursor, err);
}

void tp_db_rows_value(const TpDbRows *rows, size_t i, TpDbValue *v) {
  rows->ops->value(rows->cursor, i, v);
}

void tp_db_rows_close(TpDbRows *rows) {
  if (!rows) {
    return;
  }
  rows->ops->cursor_close(rows->cursor);
  free(rows);
}

int tp_db_script(TpDb *db, const char *sql, TpError *err) {
  return db->ops->script(db->impl, sql, err);
}

int tp_db_begin(TpDb *db, TpError *err) {
  return db->ops->script(db->impl, db->ops->begin_sql, err);
}

int tp_db_commit(TpDb *db, TpError *err) {
  return db->ops->script(db->impl, "COMMIT", err);
}

int tp_db_rollback(TpDb *db, TpError *err) {
  return db->ops->script(db->impl, "ROLLBACK", err);
}

static bool ident_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c >= 0x80;
}

// Length of the dollar-quote tag at s[i] ("$$" or "$tag$"), or 0 when there is none there.
static size_t dollar_tag(const char *s, size_t len, size_t i) {
  if (i > 0 && ident_char((unsigned char)s[i - 1])) {
    return 0;  // part of an identifier such as a$b
  }
  size_t j = i + 1;
  if (j < len && s[j] >= '0' && s[j] <= '9') {
    return 0;  // a $1 parameter
  }
  while (j < len && ident_char((unsigned char)s[j])) {
    j++;
  }
  return j < len && s[j] == '$' ? j - i + 1 : 0;
}

// Index just past the quoted or commented part that starts at s[i], or i when none starts there.
static size_t skip_quoted(const char *s, size_t len, size_t i) {
  char c = s[i];
  if (c == '\'') {
    bool backslash = i > 0 && (s[i - 1] == 'E' || s[i - 1] == 'e') &&
                     (i < 2 || !ident_char((unsigned char)s[i - 2]));
    size_t j = i + 1;
    while (j < len) {
      if (backslash && s[j] == '\\' && j + 1 < len) {
        j += 2;
      } else if (s[j] == '\'') {
        if (j + 1 < len && s[j + 1] == '\'') {
          j += 2;
        } else {
          return j + 1;
        }
      } else {
        j++;
      }
    }
    return len;
  }
  if (c == '"') {
    const char *end = memchr(s + i + 1, '"', len - i - 1);
    return end ? (size_t)(end - s) + 1 : len;
  }
  if (c == '-' && i + 1 < len && s[i + 1] == '-') {
    const char *end = memchr(s + i, '\n', len - i);
    return end ? (size_t)(end - s) + 1 : len;
  }
  if (c == '/' && i + 1 < len && s[i + 1] == '*') {
    size_t depth = 1, j = i + 2;  // PostgreSQL nests block comments
    while (j < len && depth > 0) {
      if (s[j] == '/' && j + 1 < len && s[j + 1] == '*') {
        depth++;
        j += 2;
      } else if (s[j] == '*' && j + 1 < len && s[j + 1] == '/') {
        depth--;
        j += 2;
      } else {
        j++;
      }
    }
    return j;
  }
  if (c == '$') {
    size_t tag = dollar_tag(s, len, i);
    if (tag == 0) {
      return i;
    }
    for (size_t j = i + tag; j + tag <= len; j++) {
      if (s[j] == '$' && memcmp(s + j, s + i, tag) == 0) {
        return j + tag;
      }
    }
    return len;
  }
  return i;
}

int tp_db_rewrite_placeholders(const char *sql, size_t len, TpBuf *out, size_t *count) {
  *count = 0;
  size_t i = 0, from = 0;
  while (i < len) {
    size_t next = skip_quoted(sql, len, i);
    if (next != i) {
      i = next;
      continue;
    }
    if (sql[i] == '?') {
      if (tp_buf_append(out, sql + from, i - from) != 0 ||
          tp_buf_printf(out, "$%zu", ++*count) != 0) {
        return TP_ENOMEM;
      }
      from = i + 1;
    }
    i++;
  }
  if (tp_buf_append(out, sql + from, len - from) != 0 || !tp_buf_cstr(out)) {
    return TP_ENOMEM;
  }
  return 0;
}

// Says whether anything but blanks and comments follows a `;` outside quotes.
static bool several_statements(const char *s, size_t len) {
  bool ended = false;
  size_t i = 0;
  while (i < len) {
    size_t next = skip_quoted(s, len, i);
    if (next != i) {
      if (ended && s[i] != '-' && s[i] != '/') {
        return true;  // a literal or an identifier after the end
      }
      i = next;
      continue;
    }
    char c = s[i];
    if (c == ';') {
      ended = true;
    } else if (ended && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f') {
      return true;
    }
    i++;
  }
  return false;
}
