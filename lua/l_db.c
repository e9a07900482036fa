// tp._db: a database connection (engine/db) for Lua: SQLite for a path, PostgreSQL for a
// postgresql:// URL; statements with `?` parameters, query rows as tables keyed by column name.
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <string.h>

#include "db.h"
#include "lutil.h"

#define DB_MT   "tp.Db"
#define ROWS_MT "tp.DbRows"

typedef struct LDb {
  TpDb *db;  // NULL once closed
} LDb;

// Rows being read: closed by their __gc if building the result raises.
typedef struct LRows {
  TpDbRows *rows;
} LRows;

static TpDb *check_open(lua_State *L) {
  LDb *d = luaL_checkudata(L, 1, DB_MT);
  if (!d->db) {
    luaL_error(L, "attempt to use a closed database");
  }
  return d->db;
}

// The SQL text at index 2: a string without NUL bytes.
static const char *check_sql(lua_State *L) {
  size_t len = 0;
  const char *sql = luaL_checklstring(L, 2, &len);
  luaL_argcheck(L, strlen(sql) == len, 2, "SQL text without NUL bytes expected");
  return sql;
}

// Reads the parameters at indices 3..top into an array kept in a userdata pushed on the stack
// (strings point into the Lua strings on the stack). Returns the array; *n gets its length.
static TpDbValue *check_params(lua_State *L, size_t *n) {
  int top = lua_gettop(L);
  *n = top > 2 ? (size_t)(top - 2) : 0;
  TpDbValue *v = lua_newuserdatauv(L, (*n ? *n : 1) * sizeof *v, 0);
  tpl_push_null(L);  // [..., values, null]
  for (int i = 3; i <= top; i++) {
    TpDbValue *p = &v[i - 3];
    memset(p, 0, sizeof *p);
    switch (lua_type(L, i)) {
      case LUA_TNIL:
        p->type = TP_DB_NULL;
        break;
      case LUA_TBOOLEAN:
        p->type = TP_DB_BOOL;
        p->i = lua_toboolean(L, i);
        break;
      case LUA_TNUMBER:
        if (lua_isinteger(L, i)) {
          p->type = TP_DB_INT;
          p->i = (int64_t)lua_tointeger(L, i);
        } else {
          p->type = TP_DB_FLOAT;
          p->f = (double)lua_tonumber(L, i);
        }
        break;
      case LUA_TSTRING:
        p->type = TP_DB_TEXT;
        p->s = lua_tolstring(L, i, &p->len);
        break;
      default:
        if (!lua_rawequal(L, i, -1)) {
          luaL_typeerror(L, i, "nil, db.NULL, boolean, number or string");
        }
        p->type = TP_DB_NULL;
        break;
    }
  }
  lua_pop(L, 1);  // [..., values]
  return v;
}

// db.open(target [, {timeout_ms=}]) -> Db | nil, err, code
static int l_open(lua_State *L) {
  size_t len = 0;
  const char *target = luaL_checklstring(L, 1, &len);
  luaL_argcheck(L, strlen(target) == len && len > 0, 1, "a non-empty target without NUL expected");
  TpDbOpenOpts opts = {.timeout_ms = TP_DB_TIMEOUT_MS};
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2)) {  // [target, opts, key, value]
      const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      if (!key || strcmp(key, "timeout_ms") != 0) {
        return luaL_error(L, "bad option '%s' to 'open'", key ? key : luaL_typename(L, -2));
      }
      lua_pop(L, 1);
    }
    lua_Integer ms = tpl_optfield_integer(L, 2, "timeout_ms", TP_DB_TIMEOUT_MS);
    luaL_argcheck(L, ms >= 0 && ms <= INT_MAX, 2, "timeout_ms out of range");
    opts.timeout_ms = (int)ms;
  }
  // The userdata exists before the connection, so that nothing can raise while it is unowned.
  LDb *d = lua_newuserdatauv(L, sizeof *d, 0);
  d->db = NULL;
  luaL_setmetatable(L, DB_MT);
  TpError err = {0};
  if (tp_db_open(target, &opts, &d->db, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  return 1;
}

// db:backend() -> 'sqlite' | 'postgresql'
static int db_backend(lua_State *L) {
  lua_pushstring(L, tp_db_backend(check_open(L)));
  return 1;
}

// db:exec(sql, ...) -> rows changed | nil, err, code
static int db_exec(lua_State *L) {
  TpDb *db = check_open(L);
  const char *sql = check_sql(L);
  size_t n = 0;
  const TpDbValue *params = check_params(L, &n);
  int64_t changed = 0;
  TpError err = {0};
  if (tp_db_exec(db, sql, params, n, &changed, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushinteger(L, (lua_Integer)changed);
  return 1;
}

static void push_value(lua_State *L, const TpDbValue *v) {
  switch (v->type) {
    case TP_DB_NULL:
      lua_pushnil(L);
      return;
    case TP_DB_INT:
      lua_pushinteger(L, (lua_Integer)v->i);
      return;
    case TP_DB_FLOAT:
      lua_pushnumber(L, (lua_Number)v->f);
      return;
    case TP_DB_TEXT:
      lua_pushlstring(L, v->s, v->len);
      return;
    case TP_DB_BOOL:
      lua_pushboolean(L, v->i != 0);
      return;
  }
}

// db:query(sql, ...) -> rows, columns | nil, err, code
// rows: array of tables keyed by column name (a NULL leaves its key out); columns: the names.
static int db_query(lua_State *L) {
  TpDb *db = check_open(L);
  const char *sql = check_sql(L);
  size_t n = 0;
  const TpDbValue *params = check_params(L, &n);
  LRows *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->rows = NULL;
  luaL_setmetatable(L, ROWS_MT);
  TpError err = {0};
  if (tp_db_query(db, sql, params, n, &box->rows, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  size_t ncol = tp_db_rows_columns(box->rows);
  luaL_argcheck(L, ncol <= INT_MAX / 2, 2, "too many columns");
  lua_createtable(L, (int)ncol, 0);  // [..., box, columns]
  for (size_t i = 0; i < ncol; i++) {
    lua_pushstring(L, tp_db_rows_name(box->rows, i));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_newtable(L);  // [..., box, columns, rows]
  int cols = lua_gettop(L) - 1;
  lua_Integer count = 0;
  int r = 0;
  // Building a row allocates, and a collection may run a finalizer that closes this connection:
  // its rows must not be stepped after that (they point into it), so look before each step.
  LDb *d = lua_touserdata(L, 1);
  while (d->db == db && (r = tp_db_rows_next(box->rows, &err)) == 1) {
    lua_createtable(L, 0, (int)ncol);  // [..., rows, row]
    for (size_t i = 0; i < ncol; i++) {
      TpDbValue v;
      tp_db_rows_value(box->rows, i, &v);
      if (v.type == TP_DB_NULL) {
        continue;
      }
      lua_rawgeti(L, cols, (lua_Integer)i + 1);
      push_value(L, &v);
      lua_rawset(L, -3);
    }
    lua_rawseti(L, -2, ++count);
  }
  TpDbRows *rows = box->rows;
  box->rows = NULL;
  tp_db_rows_close(rows);
  if (d->db != db) {
    return luaL_error(L, "attempt to use a closed database");
  }
  if (r < 0) {
    return tpl_pusherror(L, &err);
  }
  lua_insert(L, -2);  // [..., box, rows, columns]
  return 2;
}

// Runs a result of the engine: true | nil, err, code.
static int push_result(lua_State *L, int rc, const TpError *err) {
  if (rc != 0) {
    return tpl_pusherror(L, err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// db:script(sql) -> true | nil, err, code
static int db_script(lua_State *L) {
  TpDb *db = check_open(L);
  const char *sql = check_sql(L);
  TpError err = {0};
  return push_result(L, tp_db_script(db, sql, &err), &err);
}

// db:begin() -> true | nil, err, code
static int db_begin(lua_State *L) {
  TpError err = {0};
  return push_result(L, tp_db_begin(check_open(L), &err), &err);
}

// db:commit() -> true | nil, err, code
static int db_commit(lua_State *L) {
  TpError err = {0};
  return push_result(L, tp_db_commit(check_open(L), &err), &err);
}

// db:rollback() -> true | nil, err, code
static int db_rollback(lua_State *L) {
  TpError err = {0};
  return push_result(L, tp_db_rollback(check_open(L), &err), &err);
}

// db:close(): closes the connection (an open transaction is rolled back); idempotent.
static int db_close(lua_State *L) {
  LDb *d = luaL_checkudata(L, 1, DB_MT);
  TpDb *db = d->db;
  d->db = NULL;  // closed before releasing (STYLE.md)
  tp_db_close(db);
  return 0;
}

static int db_tostring(lua_State *L) {
  LDb *d = luaL_checkudata(L, 1, DB_MT);
  if (!d->db) {
    lua_pushliteral(L, "tp.Db (closed)");
  } else {
    lua_pushfstring(L, "tp.Db (%s %s)", tp_db_backend(d->db), tp_db_label(d->db));
  }
  return 1;
}

static int rows_gc(lua_State *L) {
  LRows *box = luaL_checkudata(L, 1, ROWS_MT);
  TpDbRows *rows = box->rows;
  box->rows = NULL;
  tp_db_rows_close(rows);
  return 0;
}

int luaopen_tp__db(lua_State *L);
int luaopen_tp__db(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"backend", db_backend},   {"begin", db_begin},   {"close", db_close},
      {"commit", db_commit},     {"exec", db_exec},     {"query", db_query},
      {"rollback", db_rollback}, {"script", db_script}, {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
      {"__close", db_close},
      {"__gc", db_close},
      {"__tostring", db_tostring},
      {NULL, NULL},
  };
  static const luaL_Reg rows_meta[] = {
      {"__gc", rows_gc},
      {NULL, NULL},
  };
  static const luaL_Reg funcs[] = {
      {"open", l_open},
      {NULL, NULL},
  };
  tpl_newclass(L, DB_MT, methods, meta);
  tpl_newclass(L, ROWS_MT, NULL, rows_meta);
  luaL_newlib(L, funcs);
  tpl_push_null(L);
  lua_setfield(L, -2, "NULL");
  return 1;
}
