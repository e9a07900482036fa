// Types shared by the database face (engine/db.h) and its backends (engine/db_sqlite.h,
// engine/db_pg.h): values, open options and the table of backend operations. Declarations only.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
