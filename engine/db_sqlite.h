// The SQLite backend of the database face (engine/db.h), on libsqlite3: one file, WAL journal,
// a busy timeout for concurrent writers, foreign keys on.
#pragma once

#include "db_types.h"

/// The operations of the SQLite backend; its target is a file path (created when absent).
extern const TpDbOps tp_db_sqlite_ops;
