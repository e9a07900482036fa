// A database connection behind one face: SQLite for a file path, PostgreSQL for a
// postgresql:// or postgres:// URL. Statements take `?` placeholders and typed parameters.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "db_types.h"

/// An open connection. Not thread-safe: one thread uses it at a time.
typedef struct TpDb TpDb;

/// Rows of a query, read one at a time.
typedef struct TpDbRows TpDbRows;

/// Default of TpDbOpenOpts.timeout_ms.
#define TP_DB_TIMEOUT_MS 5000

/// Says whether `target` names a PostgreSQL server (a postgresql:// or postgres:// URL).
bool tp_db_is_url(const char *target);

/// Writes `target` into out (capacity `cap`, always NUL-terminated) with the password of a URL
/// (`user:PASSWORD@`, the `password=` and `sslpassword=` query parameters) replaced by `***`;
/// a path is copied.
void tp_db_redact(const char *target, char *out, size_t cap);

/// Opens the database `target` (a path: SQLite, created when absent; a URL: PostgreSQL).
/// `opts` may be NULL (defaults). On success `*out` is the connection (caller closes it with
/// tp_db_close). Errors: TP_ENOTDB (not a database or a damaged one), TP_ECONNECT (server not
/// reachable), TP_EAUTH (credentials refused), TP_EDB, TP_ENOMEM. Messages name the target
/// without its password.
int tp_db_open(const char *target, const TpDbOpenOpts *opts, TpDb **out, TpError *err);

/// Closes the connection (an open transaction is rolled back). NULL is allowed.
void tp_db_close(TpDb *db);

/// "sqlite" or "postgresql".
const char *tp_db_backend(const TpDb *db);

/// The target as given to tp_db_open, without its password.
const char *tp_db_label(const TpDb *db);

/// Runs one statement with `nparams` parameters for its `?` placeholders. `*changed` (may be
/// NULL) gets the number of rows inserted, updated or deleted. Errors: TP_EINVAL (wrong number of
/// parameters, several statements), TP_ENOTDB, TP_ECONNECT, TP_EDB, TP_ENOMEM.
int tp_db_exec(TpDb *db, const char *sql, const TpDbValue *params, size_t nparams, int64_t *changed,
               TpError *err);

/// Runs one statement and opens its rows in `*out` (caller closes them with tp_db_rows_close
/// before closing the connection). Errors as tp_db_exec.
int tp_db_query(TpDb *db, const char *sql, const TpDbValue *params, size_t nparams, TpDbRows **out,
                TpError *err);

/// Number of columns of the rows.
size_t tp_db_rows_columns(const TpDbRows *rows);
/// Name of column i (0-based), valid until the rows are closed.
const char *tp_db_rows_name(const TpDbRows *rows, size_t i);
/// Moves to the next row: returns 1 when there is one, 0 after the last, or a negative code.
int tp_db_rows_next(TpDbRows *rows, TpError *err);
/// Value of column i of the current row; text stays valid until the next move or the close.
void tp_db_rows_value(const TpDbRows *rows, size_t i, TpDbValue *v);
/// Closes the rows. NULL is allowed.
void tp_db_rows_close(TpDbRows *rows);

/// Runs several statements separated by `;`, without parameters (schema migrations).
int tp_db_script(TpDb *db, const char *sql, TpError *err);

/// Starts a write transaction (SQLite: BEGIN IMMEDIATE, which waits for the write lock;
/// PostgreSQL: BEGIN).
int tp_db_begin(TpDb *db, TpError *err);
/// Commits the transaction.
int tp_db_commit(TpDb *db, TpError *err);
/// Rolls the transaction back.
int tp_db_rollback(TpDb *db, TpError *err);

/// Rewrites the `?` placeholders of `sql` (length `len`) into $1..$n, leaving alone those inside
/// single-quoted literals (also E'...' with backslash escapes), dollar-quoted strings,
/// double-quoted identifiers, `--` comments and nested block comments. Every other `?` is a
/// placeholder, so PostgreSQL's jsonb operators `?`, `?|`, `?&` must be written as the functions
/// jsonb_exists, jsonb_exists_any, jsonb_exists_all. Appends the result to
/// `out` (NUL-terminated) and sets `*count` to n. Returns 0 or TP_ENOMEM.
int tp_db_rewrite_placeholders(const char *sql, size_t len, TpBuf *out, size_t *count);
