// The PostgreSQL backend: connects with libpq from a URL, runs statements with text parameters
// typed by the value's kind, types result values by their column's type OID and keeps every
// password out of its messages. libpq is loaded with dlopen on the first connection: its
// dependencies (Kerberos, LDAP, GnuTLS...) cost every tplua start about 3 ms when linked.
#include "db_pg.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The libpq functions used, resolved from libpq.so.5 (prototypes from libpq-fe.h).
#define PQ_FUNCS(X)                                                                                \
  X(PQconnectdbParams)                                                                             \
  X(PQstatus)                                                                                      \
  X(PQpass)                                                                                        \
  X(PQerrorMessage)                                                                                \
  X(PQconnectionNeedsPassword)                                                                     \
  X(PQsetNoticeProcessor)                                                                          \
  X(PQfinish)                                                                                      \
  X(PQexec)                                                                                        \
  X(PQexecParams)                                                                                  \
  X(PQresultStatus)                                                                                \
  X(PQresultErrorMessage)                                                                          \
  X(PQresultErrorField)                                                                            \
  X(PQclear)                                                                                       \
  X(PQntuples)                                                                                     \
  X(PQnfields)                                                                                     \
  X(PQfname)                                                                                       \
  X(PQftype)                                                                                       \
  X(PQgetvalue)                                                                                    \
  X(PQgetlength)                                                                                   \
  X(PQgetisnull)                                                                                   \
  X(PQcmdTuples)                                                                                   \
  X(PQcmdStatus)

typedef struct PqApi {
#define PQ_MEMBER(f) __typeof__(f) *f;
  PQ_FUNCS(PQ_MEMBER)
#undef PQ_MEMBER
} PqApi;

// Loaded once per process (the dynamic linker's own state is per process too).
static PqApi pq;
static pthread_once_t pq_once = PTHREAD_ONCE_INIT;
static char pq_failure[200];  // "" once loaded

static void pq_load_once(void) {
  void *h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(pq_failure, sizeof pq_failure, "libpq.so.5 cannot be loaded (%s): install libpq5",
             e ? e : "not found");
    return;
  }
#define PQ_RESOLVE(f)                                                                              \
  if (!pq_failure[0] && !(*(void **)&pq.f = dlsym(h, #f))) {                                       \
    snprintf(pq_failure, sizeof pq_failure, "libpq.so.5 has no %s", #f);                           \
  }
  PQ_FUNCS(PQ_RESOLVE)
#undef PQ_RESOLVE
}

// 0 when libpq is loaded, else TP_EDB with `label` and the reason.
static int pq_load(const char *label, TpError *err) {
  pthread_once(&pq_once, pq_load_once);
  return pq_failure[0] ? tp_error_set(err, TP_EDB, "%s: %s", label, pq_failure) : 0;
}

// The calls below go through the loaded table.
#define PQ_CALL(f)                pq.f
#define PQconnectdbParams         PQ_CALL(PQconnectdbParams)
#define PQstatus                  PQ_CALL(PQstatus)
#define PQpass                    PQ_CALL(PQpass)
#define PQerrorMessage            PQ_CALL(PQerrorMessage)
#define PQconnectionNeedsPassword PQ_CALL(PQconnectionNeedsPassword)
#define PQsetNoticeProcessor      PQ_CALL(PQsetNoticeProcessor)
#define PQfinish                  PQ_CALL(PQfinish)
#define PQexec                    PQ_CALL(PQexec)
#define PQexecParams              PQ_CALL(PQexecParams)
#define PQresultStatus            PQ_CALL(PQresultStatus)
#define PQresultErrorMessage      PQ_CALL(PQresultErrorMessage)
#define PQresultErrorField        PQ_CALL(PQresultErrorField)
#define PQclear                   PQ_CALL(PQclear)
#define PQntuples                 PQ_CALL(PQntuples)
#define PQnfields                 PQ_CALL(PQnfields)
#define PQfname                   PQ_CALL(PQfname)
#define PQftype                   PQ_CALL(PQftype)
#define PQgetvalue                PQ_CALL(PQgetvalue)
#define PQgetlength               PQ_CALL(PQgetlength)
#define PQgetisnull               PQ_CALL(PQgetisnull)
#define PQcmdTuples               PQ_CALL(PQcmdTuples)
#define PQcmdStatus               PQ_CALL(PQcmdStatus)

// Type OIDs (src/include/catalog/pg_type.dat; stable across releases).
enum {
  OID_BOOL = 16,
  OID_INT8 = 20,
  OID_INT2 = 21,
  OID_INT4 = 23,
  OID_FLOAT4 = 700,
  OID_FLOAT8 = 701,
  OID_NUMERIC = 1700,
};

typedef struct Pg {
  PGconn *conn;
  const char *label;  // owned by the face, outlives this
  char *secret;       // the password as libpq read it, or NULL
  char *secret_raw;   // the password as written in the URL (maybe percent-encoded), or NULL
  char *ssl_secret;   // sslpassword= of the URL, or NULL
} Pg;

typedef struct PgCursor {
  PGresult *res;
  int row;  // current row; -1 before the first
} PgCursor;

static void quiet(void *arg, const char *msg) {
  (void)arg;
  (void)msg;  // NOTICEs (such as "relation already exists, skipping") are not errors
}

// Replaces every occurrence of `secret` in the NUL-terminated *msg (a malloc'd string) by "***";
// on running out of memory, *msg becomes NULL (nothing of it may then be shown).
static void scrub(char **msg, const char *secret) {
  if (!*msg || !secret || !*secret || !strstr(*msg, secret)) {
    return;
  }
  size_t k = strlen(secret);
  char *out = malloc(3 * strlen(*msg) + 1);  // "***" for each byte at most
  if (out) {
    size_t n = 0;
    for (const char *s = *msg; *s;) {
      if (strncmp(s, secret, k) == 0) {
        memcpy(out + n, "***", 3);
        n += 3;
        s += k;
      } else {
        out[n++] = *s++;
      }
    }
    out[n] = '\0';
  }
  free(*msg);
  *msg = out;
}

// The value of query parameter `key` in a URL, copied, or NULL when absent or empty.
static char *url_param(const char *url, const char *key) {
  size_t k = strlen(key);
  const char *q = strchr(url, '?');
  while (q) {
    q++;
    if (strncmp(q, key, k) == 0 && q[k] == '=') {
      size_t n = strcspn(q + k + 1, "&");
      return n ? strndup(q + k + 1, n) : NULL;
    }
    q = strchr(q, '&');
  }
  return NULL;
}

// The password written in a URL (after `user:`, else as `password=`), copied, or NULL.
static char *url_password(const char *url) {
  const char *p = strstr(url, "://");
  if (!p) {
    return NULL;
  }
  p += 3;
  size_t auth = tp_db_url_userinfo(p);
  if (auth > 0) {
    const char *colon = memchr(p, ':', auth);
    if (colon && colon + 1 < p + auth) {
      return strndup(colon + 1, (size_t)(p + auth - colon - 1));
    }
  }
  return url_param(p, "password");
}

// Sets err to "<label>: <text>" with the text on one line and no password in it (the label is
// already redacted; the whole text is scrubbed before it is cut short, so no part of a password
// can be left at the cut).
static int pg_error(const Pg *g, int code, const char *text, TpError *err) {
  const char *src = text ? text : "unknown error";
  char *one = malloc(strlen(src) + 1);
  if (!one) {
    return tp_error_set(err, code, "%s: out of memory reading the server's message", g->label);
  }
  size_t n = 0;
  for (const char *s = src; *s; s++) {
    if (*s == '\n' || *s == '\t' || *s == '\r') {
      if (n > 0 && one[n - 1] != ' ') {
        one[n++] = ' ';
      }
    } else {
      one[n++] = *s;
    }
  }
  while (n > 0 && one[n - 1] == ' ') {
    n--;
  }
  one[n] = '\0';
  scrub(&one, g->secret);
  scrub(&one, g->secret_raw);
  scrub(&one, g->ssl_secret);
  int r = tp_error_set(err, code, "%s: %s", g->label,
                       one ? one : "out of memory reading the server's message");
  free(one);
  return r;
}

// What a failed connection attempt means: credentials refused, no such database, no server, or
// a malformed target.
static int connect_code(PGconn *conn) {
  const char *msg = PQerrorMessage(conn);
  if (PQconnectionNeedsPassword(conn) || strstr(msg, "authentication failed") ||
      strstr(msg, "no pg_hba.conf entry") ||
      (strstr(msg, "role \"") && strstr(msg, "does not exist"))) {
    return TP_EAUTH;
  }
  if (strstr(msg, "database \"") && strstr(msg, "does not exist")) {
    return TP_EDB;
  }
  // No server answered (libpq 15: "connection to server on socket|at ... failed: ...", a host
  // name that does not resolve, the connect timeout); anything else is a malformed target.
  if (strstr(msg, "connection to server") || strstr(msg, "could not translate host name") ||
      strstr(msg, "timeout expired")) {
    return TP_ECONNECT;
  }
  return TP_EDB;
}

static void pg_free(Pg *g) {
  PQfinish(g->conn);
  free(g->secret);
  free(g->secret_raw);
  free(g->ssl_secret);
  free(g);
}

static int pg_open(const char *target, const TpDbOpenOpts *opts, const char *label, void **impl,
                   TpError *err) {
  *impl = NULL;
  int lrc = pq_load(label, err);
  if (lrc != 0) {
    return lrc;
  }
  Pg *g = calloc(1, sizeof *g);
  if (!g) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", label);
  }
  g->label = label;
  g->secret_raw = url_password(target);
  g->ssl_secret = url_param(target, "sslpassword");
  char timeout[24];
  // Whole seconds, rounded up, without overflowing near INT_MAX.
  int seconds =
      opts->timeout_ms <= 0 ? 0 : opts->timeout_ms / 1000 + (opts->timeout_ms % 1000 != 0);
  snprintf(timeout, sizeof timeout, "%d", seconds < 2 && seconds > 0 ? 2 : seconds);
  // Keywords before dbname are defaults the URL may override (expand_dbname).
  const char *const keys[] = {"connect_timeout", "client_encoding", "dbname", NULL};
  const char *const vals[] = {timeout, "UTF8", target, NULL};
  g->conn = PQconnectdbParams(keys, vals, 1);
  if (!g->conn) {
    pg_free(g);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", label);
  }
  const char *pass = PQpass(g->conn);
  if (pass && *pass) {
    g->secret = strdup(pass);
  }
  if (PQstatus(g->conn) != CONNECTION_OK) {
    int r = pg_error(g, connect_code(g->conn), PQerrorMessage(g->conn), err);
    pg_free(g);
    return r;
  }
  PQsetNoticeProcessor(g->conn, quiet, NULL);
  *impl = g;
  return 0;
}

static void pg_close(void *impl) {
  if (impl) {
    pg_free(impl);
  }
}

// Fills err from a failed result (NULL: no result at all).
static int result_error(const Pg *g, const PGresult *res, TpError *err) {
  if (PQstatus(g->conn) == CONNECTION_BAD) {
    return pg_error(g, TP_ECONNECT, PQerrorMessage(g->conn), err);
  }
  if (!res) {
    return pg_error(g, TP_EDB, PQerrorMessage(g->conn), err);
  }
  const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
  return pg_error(g, TP_EDB, primary ? primary : PQresultErrorMessage(res), err);
}

// Text forms and types of the parameters; frees what it made on failure.
typedef struct Params {
  size_t n;
  Oid *types;
  char **values;
} Params;

static void params_free(Params *p) {
  for (size_t i = 0; i < p->n && p->values; i++) {
    free(p->values[i]);
  }
  free(p->types);
  free(p->values);
}

static char *float_text(double f) {
  char buf[32];
  if (isnan(f)) {
    snprintf(buf, sizeof buf, "NaN");
  } else if (isinf(f)) {
    snprintf(buf, sizeof buf, "%s", f > 0 ? "Infinity" : "-Infinity");
  } else {
    snprintf(buf, sizeof buf, "%.17g", f);
  }
  return strdup(buf);
}

static int params_make(const Pg *g, const TpDbValue *params, size_t n, Params *p, TpError *err) {
  p->n = n;
  p->types = calloc(n ? n : 1, sizeof *p->types);
  p->values = calloc(n ? n : 1, sizeof *p->values);
  if (!p->types || !p->values) {
    params_free(p);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", g->label);
  }
  for (size_t i = 0; i < n; i++) {
    const TpDbValue *v = &params[i];
    char num[32];
    switch (v->type) {
      case TP_DB_NULL:
        continue;
      case TP_DB_INT:
        p->types[i] = OID_INT8;
        snprintf(num, sizeof num, "%" PRId64, v->i);
        p->values[i] = strdup(num);
        break;
      case TP_DB_FLOAT:
        p->types[i] = OID_FLOAT8;
        p->values[i] = float_text(v->f);
        break;
      case TP_DB_BOOL:
        p->types[i] = OID_BOOL;
        p->values[i] = strdup(v->i ? "true" : "false");
        break;
      case TP_DB_TEXT:
        if (v->len > 0 && memchr(v->s, '\0', v->len)) {
          params_free(p);
          return tp_error_set(err, TP_EINVAL,
                              "%s: parameter %zu: PostgreSQL text cannot hold a NUL byte", g->label,
                              i + 1);
        }
        p->values[i] = strndup(v->len ? v->s : "", v->len);
        break;
    }
    if (!p->values[i]) {
      params_free(p);
      return tp_error_set(err, TP_ENOMEM, "%s: out of memory", g->label);
    }
  }
  return 0;
}

// Runs sql with the parameters; *out is a result whose status is COMMAND_OK, TUPLES_OK or
// EMPTY_QUERY (SQL of nothing but blanks and comments, as SQLite allows too).
static int run(Pg *g, const char *sql, const TpDbValue *params, size_t nparams, PGresult **out,
               TpError *err) {
  *out = NULL;
  if (nparams > 65535) {
    return tp_error_set(err, TP_EINVAL, "%s: more than 65535 parameters", g->label);
  }
  Params p = {0};
  int r = params_make(g, params, nparams, &p, err);
  if (r != 0) {
    return r;
  }
  PGresult *res = PQexecParams(g->conn, sql, (int)nparams, p.types, (const char *const *)p.values,
                               NULL, NULL, 0);
  params_free(&p);
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
    r = result_error(g, res, err);
    PQclear(res);
    return r;
  }
  *out = res;
  return 0;
}

static int pg_exec(void *impl, const char *sql, const TpDbValue *params, size_t nparams,
                   int64_t *changed, TpError *err) {
  *changed = 0;
  PGresult *res = NULL;
  int r = run(impl, sql, params, nparams, &res, err);
  if (r == 0) {
    // Rows changed, as SQLite counts them: a SELECT's (or CREATE TABLE AS's) rows are not.
    const char *tag = PQcmdStatus(res);
    const char *n = PQcmdTuples(res);
    bool dml = tag && (strncmp(tag, "INSERT ", 7) == 0 || strncmp(tag, "UPDATE ", 7) == 0 ||
                       strncmp(tag, "DELETE ", 7) == 0 || strncmp(tag, "MERGE ", 6) == 0);
    *changed = dml && n && *n ? strtoll(n, NULL, 10) : 0;
    PQclear(res);
  }
  return r;
}

static int pg_query(void *impl, const char *sql, const TpDbValue *params, size_t nparams,
                    void **cursor, TpError *err) {
  Pg *g = impl;
  *cursor = NULL;
  PgCursor *c = calloc(1, sizeof *c);
  if (!c) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", g->label);
  }
  c->row = -1;
  int r = run(g, sql, params, nparams, &c->res, err);
  if (r != 0) {
    free(c);
    return r;
  }
  *cursor = c;
  return 0;
}

static size_t pg_columns(const void *cursor) {
  const PgCursor *c = cursor;
  int n = PQnfields(c->res);
  return n > 0 ? (size_t)n : 0;
}

static const char *pg_column_name(const void *cursor, size_t i) {
  const PgCursor *c = cursor;
  const char *name = PQfname(c->res, (int)i);
  return name ? name : "?";
}

static int pg_step(void *cursor, TpError *err) {
  (void)err;
  PgCursor *c = cursor;
  if (c->row + 1 >= PQntuples(c->res)) {
    c->row = PQntuples(c->res);
    return 0;
  }
  c->row++;
  return 1;
}

static void pg_value(const void *cursor, size_t i, TpDbValue *v) {
  const PgCursor *c = cursor;
  memset(v, 0, sizeof *v);
  int col = (int)i;
  if (PQgetisnull(c->res, c->row, col)) {
    v->type = TP_DB_NULL;
    return;
  }
  const char *s = PQgetvalue(c->res, c->row, col);
  switch (PQftype(c->res, col)) {
    case OID_INT2:
    case OID_INT4:
    case OID_INT8:
      v->type = TP_DB_INT;
      v->i = strtoll(s, NULL, 10);
      return;
    case OID_FLOAT4:
    case OID_FLOAT8:
    case OID_NUMERIC:
      v->type = TP_DB_FLOAT;
      v->f = strtod(s, NULL);
      return;
    case OID_BOOL:
      v->type = TP_DB_BOOL;
      v->i = s[0] == 't';
      return;
    default:
      v->type = TP_DB_TEXT;
      v->s = s;
      v->len = (size_t)PQgetlength(c->res, c->row, col);
      return;
  }
}

static void pg_cursor_close(void *cursor) {
  PgCursor *c = cursor;
  if (!c) {
    return;
  }
  PQclear(c->res);
  free(c);
}

static int pg_script(void *impl, const char *sql, TpError *err) {
  Pg *g = impl;
  PGresult *res = PQexec(g->conn, sql);
  ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  int r = 0;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
    r = result_error(g, res, err);
  }
  PQclear(res);
  return r;
}

const TpDbOps tp_db_pg_ops = {
    .name = "postgresql",
    .dollar_params = true,
    .begin_sql = "BEGIN",
    .open = pg_open,
    .close = pg_close,
    .exec = pg_exec,
    .query = pg_query,
    .columns = pg_columns,
    .column_name = pg_column_name,
    .step = pg_step,
    .value = pg_value,
    .cursor_close = pg_cursor_close,
    .script = pg_script,
};
