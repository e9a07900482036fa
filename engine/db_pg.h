// The PostgreSQL backend of the database face (engine/db.h), on libpq: a postgresql:// URL,
// statements with $1..$n text parameters, result values typed by their column's type.
#pragma once

#include "db_types.h"

/// The operations of the PostgreSQL backend; its target is a postgresql:// or postgres:// URL.
extern const TpDbOps tp_db_pg_ops;
