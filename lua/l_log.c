// tp._log: the streaming log scanner (engine/logscan) for Lua: a Scanner object fed with bytes
// or a file, records handed over as tables, and hooks that let Lua-registered parsers claim a log.
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "logscan.h"
#include "lutil.h"

#define SCANNER "tp.log.Scanner"

// User values of a Scanner: 1 = the registered parsers ({ {name=, detect=, line=}, ... }) the
// hooks call, 2 = the error a hook raised (re-raised once the engine has returned).
typedef struct Scanner {
  TpLogScan *s;  // NULL once closed
  lua_State *L;  // set while the engine runs (feed/finish), for the hooks
  int uidx;      // stack index of the Scanner during that call
  int pidx;      // stack index of the parsers table during that call
  bool hook_failed;
  bool finished;
} Scanner;

static Scanner *check_scanner(lua_State *L, int idx) {
  Scanner *u = luaL_checkudata(L, idx, SCANNER);
  if (!u->s) {
    luaL_error(L, "attempt to use a closed log scanner");
  }
  return u;
}

// --- Records to tables ------------------------------------------------------------------------

static void push_num(lua_State *L, double v, bool as_int) {
  if (as_int && v == floor(v) && v >= -9007199254740992.0 && v <= 9007199254740992.0) {
    lua_pushinteger(L, (lua_Integer)v);
  } else {
    lua_pushnumber(L, v);
  }
}

// Pushes record i as a table (fields absent when the log does not carry them).
static void push_record(lua_State *L, const TpLogScan *s, size_t i) {
  TpLogRecord r;
  if (!tp_logscan_record(s, i, &r)) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 20);
  for (int f = 0; f < TP_LOG_F_COUNT; f++) {
    if (r.present >> f & 1) {
      push_num(L, r.v[f], tp_logscan_field_is_int(f));
      lua_setfield(L, -2, tp_logscan_field_name(f));
    }
  }
  if (r.step_time_derived) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "step_time_derived");
  }
  if (r.timestamp) {
    lua_pushlstring(L, r.timestamp, r.timestamp_len);
    lua_setfield(L, -2, "timestamp");
  }
  size_t pos = 0;
  TpLogKv kv;
  bool has_extra = false;
  if (r.nlosses >= 2) {
    lua_createtable(L, 0, (int)r.nlosses);  // [rec, losses]
    while (tp_logscan_kv_next(&r, &pos, &kv)) {
      if (kv.kind == TP_LOG_KV_LOSS) {
        lua_pushlstring(L, kv.name, kv.name_len);
        lua_pushnumber(L, kv.num);
        lua_rawset(L, -3);
      } else {
        has_extra = true;
      }
    }
    lua_setfield(L, -2, "losses");
  } else {
    while (!has_extra && tp_logscan_kv_next(&r, &pos, &kv)) {
      has_extra = kv.kind == TP_LOG_KV_EXTRA;
    }
  }
  if (has_extra) {
    lua_newtable(L);  // [rec, extra]
    pos = 0;
    while (tp_logscan_kv_next(&r, &pos, &kv)) {
      if (kv.kind == TP_LOG_KV_EXTRA) {
        lua_pushlstring(L, kv.name, kv.name_len);
        lua_pushlstring(L, kv.str, kv.str_len);
        lua_rawset(L, -3);
      }
    }
    lua_setfield(L, -2, "extra");
  }
}

// --- Hooks for registered parsers -------------------------------------------------------------

typedef struct HookCall {
  Scanner *u;
  const char *line;
  size_t len;
  int parser_id;
  int result;
} HookCall;

// (call, parsers) -> sets call->result to the id of the first parser whose detect(line) is
// true, else 0.
static int detect_protected(lua_State *L) {
  HookCall *c = lua_touserdata(L, 1);
  lua_Integer n = luaL_len(L, 2);
  c->result = 0;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 2, i);                    // [c, parsers, parser]
    lua_getfield(L, -1, "detect");        // [c, parsers, parser, detect]
    lua_pushlstring(L, c->line, c->len);  // [c, parsers, parser, detect, line]
    lua_call(L, 1, 1);                    // [c, parsers, parser, ok]
    int ok = lua_toboolean(L, -1);
    lua_pop(L, 2);
    if (ok) {
      c->result = (int)i;
      break;
    }
  }
  return 0;
}

static int detect_hook(void *ud, const char *line, size_t len) {
  Scanner *u = ud;
  lua_State *L = u->L;
  HookCall c = {u, line, len, 0, 0};
  lua_pushcfunction(L, detect_protected);
  lua_pushlightuserdata(L, &c);
  lua_pushvalue(L, u->pidx);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    lua_setiuservalue(L, u->uidx, 2);
    u->hook_failed = true;
    tp_logscan_fail(u->s, TP_EINVAL, "log parser: detect failed");
    return -1;
  }
  return c.result;
}

static void check_rc(lua_State *L, int rc) {
  if (rc != 0) {
    luaL_error(L, "log parser: out of memory");
  }
}

// Copies the Lua record table at idx into the scanner's pending record.
static void rec_from_table(lua_State *L, int idx, TpLogScan *s, const char *pname) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {  // [key, value]
    if (lua_type(L, -2) != LUA_TSTRING) {
      luaL_error(L, "log parser '%s': record keys must be strings", pname);
    }
    size_t kl;
    const char *k = lua_tolstring(L, -2, &kl);
    int f = tp_logscan_field_index(k, kl);
    if (f >= 0 && f != TP_LOG_F_LINE && f != TP_LOG_F_RANK) {
      if (!lua_isnumber(L, -1)) {
        luaL_error(L, "log parser '%s': field '%s' must be a number, got %s", pname, k,
                   luaL_typename(L, -1));
      }
      tp_logscan_rec_set(s, (TpLogField)f, lua_tonumber(L, -1));
    } else if (f == TP_LOG_F_RANK) {
      tp_logscan_rec_set(s, TP_LOG_F_RANK, luaL_checknumber(L, -1));
    } else if (strcmp(k, "timestamp") == 0) {
      size_t tl;
      const char *ts = luaL_checklstring(L, -1, &tl);
      check_rc(L, tp_logscan_rec_timestamp(s, ts, tl));
    } else if (strcmp(k, "step_time_derived") == 0) {
      tp_logscan_rec_derived(s, lua_toboolean(L, -1));
    } else if (strcmp(k, "losses") == 0 || strcmp(k, "extra") == 0) {
      bool losses = k[0] == 'l';
      luaL_checktype(L, -1, LUA_TTABLE);
      lua_pushnil(L);
      while (lua_next(L, -2) != 0) {  // [key, tbl, k2, v2]
        size_t nl, vl;
        lua_pushvalue(L, -2);
        const char *name = lua_tolstring(L, -1, &nl);
        if (!name) {
          luaL_error(L, "log parser '%s': %s names must be strings", pname, k);
        }
        if (losses) {
          if (!lua_isnumber(L, -2)) {
            luaL_error(L, "log parser '%s': loss '%s' must be a number", pname, name);
          }
          check_rc(L, tp_logscan_rec_loss(s, name, nl, lua_tonumber(L, -2)));
        } else {
          const char *v = luaL_tolstring(L, -2, &vl);
          check_rc(L, tp_logscan_rec_extra(s, name, nl, v, vl));
          lua_pop(L, 1);
        }
        lua_pop(L, 2);
      }
    } else if (strcmp(k, "line") == 0) {
      // The scanner sets the line number itself.
    } else {
      size_t vl;
      const char *v = luaL_tolstring(L, -1, &vl);
      check_rc(L, tp_logscan_rec_extra(s, k, kl, v, vl));
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

// (call, parsers) -> calls parsers[id].line(line, rec) and copies rec when it returns true.
static int line_protected(lua_State *L) {
  HookCall *c = lua_touserdata(L, 1);
  lua_geti(L, 2, c->parser_id);  // [c, parsers, parser]
  luaL_checktype(L, -1, LUA_TTABLE);
  lua_getfield(L, -1, "name");
  const char *pname = lua_tostring(L, -1);
  lua_pop(L, 1);                        // (the name stays anchored by the parser table)
  lua_getfield(L, -1, "line");          // [c, parsers, parser, line_fn]
  lua_pushlstring(L, c->line, c->len);  // [c, parsers, parser, line_fn, line]
  lua_newtable(L);                      // [c, parsers, parser, line_fn, line, rec]
  lua_pushvalue(L, -1);
  lua_insert(L, -4);  // [c, parsers, parser, rec, line_fn, line, rec]
  lua_call(L, 2, 1);  // [c, parsers, parser, rec, ok]
  c->result = lua_toboolean(L, -1);
  if (c->result) {
    rec_from_table(L, -2, c->u->s, pname ? pname : "?");
  }
  return 0;
}

static int line_hook(void *ud, TpLogScan *s, int parser_id, const char *line, size_t len,
                     uint64_t lineno) {
  (void)s;
  (void)lineno;
  Scanner *u = ud;
  lua_State *L = u->L;
  HookCall c = {u, line, len, parser_id, 0};
  lua_pushcfunction(L, line_protected);
  lua_pushlightuserdata(L, &c);
  lua_pushvalue(L, u->pidx);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    lua_setiuservalue(L, u->uidx, 2);
    u->hook_failed = true;
    tp_logscan_fail(u->s, TP_EINVAL, "log parser: line failed");
    return -1;
  }
  return c.result;
}

// Makes the hooks usable for an engine call: [u, ..., parsers] with u at index 1.
static void enter(lua_State *L, Scanner *u) {
  lua_getiuservalue(L, 1, 1);
  u->L = L;
  u->uidx = 1;
  u->pidx = lua_gettop(L);
}

// After an engine call that failed: re-raise a hook's error, else return nil, err, code.
static int engine_failure(lua_State *L, Scanner *u, const TpError *err) {
  if (u->hook_failed) {
    lua_getiuservalue(L, 1, 2);
    return lua_error(L);
  }
  return tpl_pusherror(L, err);
}

// --- Scanner ----------------------------------------------------------------------------------

static const char *const format_names[] = {"auto", "megatron",   "primus",
                                           "nemo", "torchtitan", NULL};

// log.new(opts) -> Scanner. opts: format, custom_id, rank, gbs, seq_len, gpus, parsers.
static int log_new(lua_State *L) {
  lua_settop(L, 1);
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
  }
  TpLogScanOpts o;
  tp_logscan_opts_init(&o);
  const char *fmt = tpl_optfield_string(L, 1, "format", "auto");
  lua_Integer custom = tpl_optfield_integer(L, 1, "custom_id", 0);
  lua_Integer rank = tpl_optfield_integer(L, 1, "rank", -1);
  o.gbs = tpl_optfield_number(L, 1, "gbs", 0);
  o.seq_len = tpl_optfield_number(L, 1, "seq_len", 0);
  o.gpus = tpl_optfield_number(L, 1, "gpus", 0);
  luaL_argcheck(L, rank >= -1 && rank <= 1000000000, 1, "option 'rank' out of range");
  luaL_argcheck(L, custom >= 0 && custom <= 1000000, 1, "option 'custom_id' out of range");
  o.rank = (long)rank;
  if (custom > 0) {
    o.format = TP_LOG_FORMAT_CUSTOM;
    o.custom_id = (int)custom;
  } else {
    int k = 0;
    while (format_names[k] && strcmp(format_names[k], fmt) != 0) {
      k++;
    }
    if (!format_names[k]) {
      return luaL_error(L, "option 'format': unknown format '%s'", fmt);
    }
    o.format = (TpLogFormat)k;
  }
  // [opts]
  Scanner *u = lua_newuserdatauv(L, sizeof *u, 2);  // [opts, u]
  memset(u, 0, sizeof *u);
  luaL_setmetatable(L, SCANNER);
  if (lua_isnil(L, 1)) {
    lua_newtable(L);
  } else if (lua_getfield(L, 1, "parsers") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
  }
  // [opts, u, parsers]
  if (luaL_len(L, -1) > 0) {
    o.detect = detect_hook;
    o.line = line_hook;
    o.hook_ud = u;
  }
  lua_setiuservalue(L, -2, 1);  // [opts, u]
  TpError err;
  u->s = tp_logscan_new(&o, &err);
  if (!u->s) {
    return luaL_error(L, "%s", err.msg);
  }
  return 1;
}

// Pushes the records from `first` to the end as an array.
static void push_records_from(lua_State *L, const TpLogScan *s, size_t first) {
  size_t n = tp_logscan_nrecords(s);
  lua_createtable(L, n > first ? (int)(n - first) : 0, 0);
  for (size_t i = first; i < n; i++) {
    push_record(L, s, i);
    lua_rawseti(L, -2, (lua_Integer)(i - first + 1));
  }
}

// scanner:feed(bytes) -> {new records...} | nil, err, code
static int scan_feed(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  lua_settop(L, 2);
  enter(L, u);  // [u, data, parsers]
  TpError err;
  int rc = tp_logscan_feed(u->s, data, len, &err);
  u->L = NULL;
  if (rc) {
    return engine_failure(L, u, &err);
  }
  push_records_from(L, u->s, tp_logscan_take_new(u->s));
  return 1;
}

// scanner:feed_file(path) -> true | nil, err, code
static int scan_feed_file(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  const char *path = luaL_checkstring(L, 2);
  lua_settop(L, 2);
  enter(L, u);
  TpError err;
  int rc = tp_logscan_feed_file(u->s, path, &err);
  u->L = NULL;
  if (rc) {
    return engine_failure(L, u, &err);
  }
  tp_logscan_take_new(u->s);
  lua_pushboolean(L, 1);
  return 1;
}

// scanner:finish() -> {records not returned by feed yet...} | nil, err, code
static int scan_finish(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  lua_settop(L, 1);
  enter(L, u);
  TpError err;
  int rc = tp_logscan_finish(u->s, &err);
  u->L = NULL;
  if (rc) {
    return engine_failure(L, u, &err);
  }
  u->finished = true;
  push_records_from(L, u->s, tp_logscan_take_new(u->s));
  return 1;
}

// scanner:count() -> number of records
static int scan_count(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  lua_pushinteger(L, (lua_Integer)tp_logscan_nrecords(u->s));
  return 1;
}

// scanner:record(i) -> table | nil (1-based)
static int scan_record(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  lua_Integer i = luaL_checkinteger(L, 2);
  if (i < 1 || (lua_Unsigned)i > tp_logscan_nrecords(u->s)) {
    lua_pushnil(L);
    return 1;
  }
  push_record(L, u->s, (size_t)(i - 1));
  return 1;
}

// scanner:column(name) -> values, iterations: the records that have `name` (a field,
// "timestamp", "step_time_derived", a loss name or an extra label); iterations holds each
// record's iteration, or its position when it has none.
static int scan_column(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  size_t nl;
  const char *name = luaL_checklstring(L, 2, &nl);
  int f = tp_logscan_field_index(name, nl);
  size_t n = tp_logscan_nrecords(u->s);
  lua_createtable(L, (int)(n < 1000000 ? n : 1000000), 0);  // [.., values]
  lua_createtable(L, (int)(n < 1000000 ? n : 1000000), 0);  // [.., values, iterations]
  lua_Integer k = 0;
  bool is_int = f >= 0 && tp_logscan_field_is_int(f);
  for (size_t i = 0; i < n; i++) {
    TpLogRecord r;
    tp_logscan_record(u->s, i, &r);
    int pushed = 0;
    if (f >= 0) {
      if (r.present >> f & 1) {
        push_num(L, r.v[f], is_int);
        pushed = 1;
      }
    } else if (strcmp(name, "timestamp") == 0) {
      if (r.timestamp) {
        lua_pushlstring(L, r.timestamp, r.timestamp_len);
        pushed = 1;
      }
    } else if (strcmp(name, "step_time_derived") == 0) {
      if (r.present >> TP_LOG_F_STEP_TIME_S & 1) {
        lua_pushboolean(L, r.step_time_derived);
        pushed = 1;
      }
    } else {
      size_t pos = 0;
      TpLogKv kv;
      while (!pushed && tp_logscan_kv_next(&r, &pos, &kv)) {
        if (kv.name_len == nl && memcmp(kv.name, name, nl) == 0) {
          if (kv.kind == TP_LOG_KV_LOSS) {
            lua_pushnumber(L, kv.num);
          } else {
            lua_pushlstring(L, kv.str, kv.str_len);
          }
          pushed = 1;
        }
      }
    }
    if (pushed) {
      k++;
      lua_rawseti(L, -3, k);
      if (r.present >> TP_LOG_F_ITERATION & 1) {
        push_num(L, r.v[TP_LOG_F_ITERATION], true);
      } else {
        lua_pushinteger(L, (lua_Integer)i + 1);
      }
      lua_rawseti(L, -2, k);
    }
  }
  return 2;
}

static void set_num(lua_State *L, const char *k, double v, bool as_int) {
  push_num(L, v, as_int);
  lua_setfield(L, -2, k);
}

static void push_params(lua_State *L, const TpLogScan *s) {
  const TpLogParams *p = tp_logscan_params(s);
  if (!p->present) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 8);
  if (p->has_total) {
    set_num(L, "total", p->total, true);
  }
  if (p->has_trainable) {
    set_num(L, "trainable", p->trainable, true);
  }
  if (p->has_dense) {
    set_num(L, "dense", p->dense, true);
    set_num(L, "sparse", p->sparse, true);
    set_num(L, "active", p->active, true);
  }
  if (p->has_billions) {
    set_num(L, "billions", p->billions, false);
  }
  lua_createtable(L, (int)p->nshards, 0);
  for (size_t i = 0; i < p->nshards; i++) {
    lua_createtable(L, 0, 4);
    set_num(L, "tp", (double)p->shards[i].tp, true);
    if (p->shards[i].gtp >= 0) {
      set_num(L, "gtp", (double)p->shards[i].gtp, true);
    }
    set_num(L, "pp", (double)p->shards[i].pp, true);
    set_num(L, "count", p->shards[i].count, true);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "shards");
}

static void push_memory(lua_State *L, const TpLogScan *s) {
  size_t n = tp_logscan_nmemory(s);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    const TpLogMemReport *m = tp_logscan_memory(s, i);
    lua_createtable(L, 0, 8);
    if (m->present & TP_LOG_MEM_RANK) {
      set_num(L, "rank", (double)m->rank, true);
    }
    if (m->present & TP_LOG_MEM_AFTER) {
      set_num(L, "after_iterations", (double)m->after_iterations, true);
    }
    if (m->present & TP_LOG_MEM_ALLOCATED) {
      set_num(L, "allocated_gib", m->allocated_gib, false);
    }
    if (m->present & TP_LOG_MEM_MAX_ALLOCATED) {
      set_num(L, "max_allocated_gib", m->max_allocated_gib, false);
    }
    if (m->present & TP_LOG_MEM_RESERVED) {
      set_num(L, "reserved_gib", m->reserved_gib, false);
    }
    if (m->present & TP_LOG_MEM_MAX_RESERVED) {
      set_num(L, "max_reserved_gib", m->max_reserved_gib, false);
    }
    if (m->present & TP_LOG_MEM_DEVICE_USED) {
      set_num(L, "device_used_gib", m->device_used_gib, false);
    }
    set_num(L, "line", (double)m->line, true);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static void push_args(lua_State *L, const TpLogScan *s, TpLogArgDump which) {
  size_t n = tp_logscan_nargs(s, which);
  lua_createtable(L, 0, (int)(n < 100000 ? n : 100000));
  for (size_t i = 0; i < n; i++) {
    const char *name, *val;
    size_t nl, vl;
    tp_logscan_arg(s, which, i, &name, &nl, &val, &vl);
    lua_pushlstring(L, name, nl);
    lua_pushlstring(L, val, vl);
    lua_rawset(L, -3);
  }
}

static void push_diagnostics(lua_State *L, const TpLogScan *s) {
  size_t nd = tp_logscan_ndiags(s);
  lua_createtable(L, (int)nd, 0);
  for (size_t i = 0; i < nd; i++) {
    const TpLogDiag *d = tp_logscan_diag(s, i);
    lua_createtable(L, 0, 6);
    lua_pushstring(L, tp_logscan_diag_kind_name(d->kind));
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, tp_logscan_severity_name(d->severity));
    lua_setfield(L, -2, "severity");
    lua_pushstring(L, d->message);
    lua_setfield(L, -2, "message");
    if (d->line > 0) {
      set_num(L, "line", (double)d->line, true);
      set_num(L, "first_line", (double)d->first_line, true);
    }
    set_num(L, "count", (double)d->count, true);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

// scanner:diagnostics() -> {{kind=, severity=, message=, line=, first_line=, count=}, ...}
// in order of first occurrence (a kind seen later is appended).
static int scan_diagnostics(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  push_diagnostics(L, u->s);
  return 1;
}

// scanner:result() -> {format=, args=, args_primus=, params=, memory=, theoretical_memory=,
// diagnostics=, meta=, lines=, bytes=, custom_id=} (records are read with record/column)
static int scan_result(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  const TpLogScan *s = u->s;
  lua_createtable(L, 0, 12);
  int custom = 0;
  const char *fmt = tp_logscan_format_name(tp_logscan_format(s, &custom));
  if (fmt) {
    lua_pushstring(L, fmt);
    lua_setfield(L, -2, "format");
  }
  if (custom > 0) {
    set_num(L, "custom_id", custom, true);
  }
  set_num(L, "records", (double)tp_logscan_nrecords(s), true);
  set_num(L, "lines", (double)tp_logscan_lines(s), true);
  set_num(L, "bytes", (double)tp_logscan_bytes(s), true);
  push_args(L, s, TP_LOG_ARGS_MEGATRON);
  lua_setfield(L, -2, "args");
  push_args(L, s, TP_LOG_ARGS_PRIMUS);
  lua_setfield(L, -2, "args_primus");
  push_params(L, s);
  lua_setfield(L, -2, "params");
  push_memory(L, s);
  lua_setfield(L, -2, "memory");
  const TpLogTheoretical *t = tp_logscan_theoretical(s);
  if (t->present) {
    lua_createtable(L, 0, 7);
    set_num(L, "weight_and_optimizer_mb", t->weight_and_optimizer_mb, false);
    set_num(L, "activation_mb", t->activation_mb, false);
    set_num(L, "total_mb", t->total_mb, false);
    set_num(L, "weight_and_optimizer_gib", t->weight_and_optimizer_mb / 1024.0, false);
    set_num(L, "activation_gib", t->activation_mb / 1024.0, false);
    set_num(L, "total_gib", t->total_mb / 1024.0, false);
    set_num(L, "line", (double)t->line, true);
    lua_setfield(L, -2, "theoretical_memory");
  }
  push_diagnostics(L, s);
  lua_setfield(L, -2, "diagnostics");
  const TpLogMeta *m = tp_logscan_meta(s);
  lua_createtable(L, 0, 16);
  for (int k = 0; k < TP_LOG_M_COUNT; k++) {
    if (m->present >> k & 1) {
      set_num(L, tp_logscan_meta_name((TpLogMetaKey)k), m->num[k],
              tp_logscan_meta_is_int((TpLogMetaKey)k));
    }
  }
  for (int k = 0; k < TP_LOG_MS_COUNT; k++) {
    if (m->str[k]) {
      lua_pushstring(L, m->str[k]);
      lua_setfield(L, -2, tp_logscan_meta_str_name((TpLogMetaStr)k));
    }
  }
  if (m->completed) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "completed");
  }
  lua_setfield(L, -2, "meta");
  return 1;
}

// scanner:close(): frees the engine state; idempotent.
static int scan_close(lua_State *L) {
  Scanner *u = luaL_checkudata(L, 1, SCANNER);
  TpLogScan *s = u->s;
  u->s = NULL;  // closed before releasing
  tp_logscan_free(s);
  return 0;
}

static int scan_tostring(lua_State *L) {
  Scanner *u = luaL_checkudata(L, 1, SCANNER);
  if (!u->s) {
    lua_pushstring(L, "tp.log.Scanner (closed)");
  } else {
    lua_pushfstring(L, "tp.log.Scanner (%d records%s)", (int)tp_logscan_nrecords(u->s),
                    u->finished ? ", finished" : "");
  }
  return 1;
}

// log.parse_number(text) -> number | nil: the scanner's number reader (exposed for tests).
static int log_parse_number(lua_State *L) {
  size_t n;
  const char *p = luaL_checklstring(L, 1, &n);
  double v;
  if (tp_logscan_parse_number(p, n, &v) != n || n == 0) {
    lua_pushnil(L);
  } else {
    lua_pushnumber(L, v);
  }
  return 1;
}

int luaopen_tp__log(lua_State *L);
int luaopen_tp__log(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"feed", scan_feed},
      {"feed_file", scan_feed_file},
      {"finish", scan_finish},
      {"count", scan_count},
      {"record", scan_record},
      {"column", scan_column},
      {"result", scan_result},
      {"close", scan_close},
      {"diagnostics", scan_diagnostics},
      {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
      {"__gc", scan_close},
      {"__close", scan_close},
      {"__tostring", scan_tostring},
      {NULL, NULL},
  };
  tpl_newclass(L, SCANNER, methods, meta);
  static const luaL_Reg funcs[] = {
      {"new", log_new},
      {"parse_number", log_parse_number},
      {NULL, NULL},
  };
  luaL_newlib(L, funcs);
  lua_pushstring(L, TP_LOGSCAN_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushinteger(L, TP_LOGSCAN_MAX_LINE);
  lua_setfield(L, -2, "max_line");
  return 1;
}
