// Types shared by the database face (engine/db.h) and its backends (engine/db_sqlite.h,
// engine/db_pg.h): values, open options and the table of backend operations. Declarations only.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common.h"

/// The type of a parameter or of a result value.
typedef enum TpDbType {
  TP_DB_NULL,
  TP_DB_INT,
  TP_DB_FLOAT,
  TP_DB_TEXT,
  TP_DB_BOOL,
} TpDbType;

/// One parameter or result value. `s` points at `len` bytes (not NUL-terminated, may hold NUL
/// bytes); for a result it stays valid until the next step of the cursor or its close.
typedef struct TpDbValue {
  TpDbType type;
  int64_t i;  ///< TP_DB_INT; TP_DB_BOOL as 0 or 1
  double f;   ///< TP_DB_FLOAT
  const char *s;
  size_t len;
} TpDbValue;

/// How a database is opened.
typedef struct TpDbOpenOpts {
  int timeout_ms;  ///< SQLite: how long a writer waits for a lock; PostgreSQL: connect timeout
} TpDbOpenOpts;

/// What a backend does, behind the neutral face. Every operation fills `err` on failure and
/// returns 0 or a negative TP_E* code. `label` is the subject of messages (a path or a URL
/// without its password).
typedef struct TpDbOps {
  const char *name;       ///< "sqlite" or "postgresql"
  bool dollar_params;     ///< placeholders must be $1..$n (the face rewrites `?`)
  const char *begin_sql;  ///< the statement that starts a write transaction
  int (*open)(const char *target, const TpDbOpenOpts *opts, const char *label, void **impl,
              TpError *err);
  void (*close)(void *impl);
  /// Runs one statement; `*changed` gets the rows it inserted, updated or deleted.
  int (*exec)(void *impl, const char *sql, const TpDbValue *params, size_t nparams,
              int64_t *changed, TpError *err);
  /// Runs one statement and opens a cursor over its rows.
  int (*query)(void *impl, const char *sql, const TpDbValue *params, size_t nparams, void **cursor,
               TpError *err);
  size_t (*columns)(const void *cursor);
  const char *(*column_name)(const void *cursor, size_t i);
  /// Moves to the next row: 1 when there is one, 0 at the end, or a negative TP_E* code.
  int (*step)(void *cursor, TpError *err);
  /// Value of column i of the current row.
  void (*value)(const void *cursor, size_t i, TpDbValue *v);
  void (*cursor_close)(void *cursor);
  /// Runs several statements, without parameters.
  int (*script)(void *impl, const char *sql, TpError *err);
} TpDbOps;

/// Length of the user information of a postgresql:// URL (`p` points just past "://"): the bytes
/// before the last '@' ahead of the query string, or 0 when there is none. libpq ends it at the
/// first '@' before any '/', so a password written with an unencoded '@' or '/' would reach
/// messages through the host or the path; ending it at the last '@' hides all of it (an '@' in a
/// database name only hides more than needed).
static inline size_t tp_db_url_userinfo(const char *p) {
  size_t end = strcspn(p, "?");
  const char *at = NULL;
  for (const char *s = p; s < p + end; s++) {
    if (*s == '@') {
      at = s;
    }
  }
  return at ? (size_t)(at - p) : 0;
}
