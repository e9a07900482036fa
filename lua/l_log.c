// tp._log: the streaming log scanner (engine/logscan) for Lua: a Scanner object fed with bytes
// or a file, records handed over as tables, and hooks that let Lua-registered parsers claim a log.
#include <lauxlib.h>
#include <lua.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "jsonw.h"
#include "logscan.h"
#include "lutil.h"
#include "store.h"

#define SCANNER "tp.log.Scanner"
#define OUTPUT  "tp.log.Output"

// User values of a Scanner: 1 = the registered parsers ({ {name=, detect=, line=}, ... }) the
// hooks call, 2 = the error a hook raised (re-raised once the engine has returned).
typedef struct Scanner {
  TpLogScan *s;  // NULL once closed
  lua_State *L;  // set while the engine runs (feed/finish), for the hooks
  int uidx;      // stack index of the Scanner during that call
  int pidx;      // stack index of the parsers table during that call
  bool hook_failed;
  bool finished;
  TpDigestFollow *digest;  // feed_file(path, 'later'): the file's SHA-256 being computed
  uint64_t digest_size;    // the bytes it covers
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

// scanner:feed_file(path [, sha256]) -> true [, hex, size] | nil, err, code
// With sha256 true, the file's SHA-256 is computed in the same read (engine/digest.h pipe: a
// second thread hashes the chunks the scanner reads), returned with the byte count. With sha256
// 'later', a second thread reads and hashes the file behind the scanner (engine/digest.h
// follower), and it returns true, size as soon as the file is scanned, the digest still being
// computed: scanner:digest() waits for it.
static int scan_feed_file(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  const char *path = luaL_checkstring(L, 2);
  bool later = lua_type(L, 3) == LUA_TSTRING;
  if (later) {
    luaL_argcheck(L, strcmp(lua_tostring(L, 3), "later") == 0, 3, "true, false or 'later'");
    luaL_argcheck(L, u->digest == NULL, 3, "the scanner already follows a file's digest");
  }
  bool sha = later || lua_toboolean(L, 3);
  lua_settop(L, 2);
  enter(L, u);
  TpError err;
  char hex[TP_DIGEST_SHA256_HEX + 1];
  uint64_t size = 0;
  TpDigestFollow *follow = NULL;
  int rc = later ? tp_logscan_feed_file_digest(u->s, path, &follow, &size, &err)
           : sha ? tp_logscan_feed_file_sha256(u->s, path, hex, &size, &err)
                 : tp_logscan_feed_file(u->s, path, &err);
  u->L = NULL;
  if (rc) {
    return engine_failure(L, u, &err);
  }
  if (later) {
    // Anchored before anything that may raise; a hook that started one meanwhile (feed_file from
    // a parser's hook) loses its follower, stopped here, rather than leaving its thread running.
    tp_digest_follow_free(u->digest);
    u->digest = follow;
    u->digest_size = size;
  }
  tp_logscan_take_new(u->s);
  lua_pushboolean(L, 1);
  if (!sha) {
    return 1;
  }
  if (later) {
    lua_pushinteger(L, (lua_Integer)size);
    return 2;
  }
  lua_pushstring(L, hex);
  lua_pushinteger(L, (lua_Integer)size);
  return 3;
}

// scanner:digest() -> hex, size | nil, err, code: waits for the SHA-256 that feed_file(path,
// 'later') started (the same answer on each call).
static int scan_digest(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  if (!u->digest) {
    return luaL_error(L, "the scanner computes no digest (feed_file(path, 'later') starts one)");
  }
  TpError err;
  char hex[TP_DIGEST_SHA256_HEX + 1];
  if (tp_digest_follow_wait(u->digest, hex, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushstring(L, hex);
  lua_pushinteger(L, (lua_Integer)u->digest_size);
  return 2;
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

// --- Column queries for tp.record (records are not materialised) ------------------------------

static bool is_finite_num(double v) {
  return isfinite(v);
}

// Field number of the name at idx (a numeric record field), or raises.
static int check_field(lua_State *L, int idx) {
  size_t nl;
  const char *name = luaL_checklstring(L, idx, &nl);
  int f = tp_logscan_field_index(name, nl);
  if (f < 0) {
    luaL_argerror(L, idx, lua_pushfstring(L, "unknown record field '%s'", name));
  }
  return f;
}

// Clamped 0-based range [*lo, *hi) from the optional 1-based inclusive first (idx), last.
static void check_range(lua_State *L, int idx, size_t n, size_t *lo, size_t *hi) {
  lua_Integer first = luaL_optinteger(L, idx, 1);
  lua_Integer last = luaL_optinteger(L, idx + 1, (lua_Integer)n);
  if (first < 1) {
    first = 1;
  }
  if (last > (lua_Integer)n) {
    last = (lua_Integer)n;
  }
  *lo = (size_t)(first - 1);
  *hi = last >= first ? (size_t)last : *lo;
}

// scanner:values(name [, first, last [, positions]]) -> values [, positions]: the finite values
// of numeric field `name` in records first..last (1-based, inclusive), in record order, as the
// records hold them (integers for count fields); with `positions` true, also the position of
// each such record.
static int scan_values(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  int f = check_field(L, 2);
  size_t lo, hi;
  check_range(L, 3, tp_logscan_nrecords(u->s), &lo, &hi);
  bool want_pos = lua_toboolean(L, 5);
  bool is_int = tp_logscan_field_is_int(f);
  size_t span = hi - lo;
  lua_settop(L, 4);
  lua_createtable(L, (int)(span < 1000000 ? span : 1000000), 0);  // [.., values]
  if (want_pos) {
    lua_createtable(L, (int)(span < 1000000 ? span : 1000000), 0);  // [.., values, positions]
  }
  lua_Integer k = 0;
  for (size_t i = lo; i < hi; i++) {
    double v;
    if (tp_logscan_record_field(u->s, i, f, &v) && is_finite_num(v)) {
      k++;
      push_num(L, v, is_int);
      lua_rawseti(L, 5, k);
      if (want_pos) {
        lua_pushinteger(L, (lua_Integer)i + 1);
        lua_rawseti(L, -2, k);
      }
    }
  }
  return want_pos ? 2 : 1;
}

// scanner:peak(names) -> the largest finite value of the fields `names` (a list) over all
// records, or nil. Records are visited in order and each record's fields in list order; a value
// replaces the peak only when larger, so the first of equal values stays (as tp.record's loop).
static int scan_peak(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  int fields[TP_LOG_F_COUNT];
  lua_Integer nf = luaL_len(L, 2);
  luaL_argcheck(L, nf <= TP_LOG_F_COUNT, 2, "too many fields");
  for (lua_Integer j = 0; j < nf; j++) {
    lua_geti(L, 2, j + 1);
    fields[j] = check_field(L, -1);
    lua_pop(L, 1);
  }
  size_t n = tp_logscan_nrecords(u->s);
  bool have = false;
  double best = 0;
  int best_f = 0;
  for (size_t i = 0; i < n; i++) {
    for (lua_Integer j = 0; j < nf; j++) {
      int f = fields[j];
      double v;
      if (tp_logscan_record_field(u->s, i, f, &v) && is_finite_num(v) && (!have || v > best)) {
        have = true;
        best = v;
        best_f = f;
      }
    }
  }
  if (!have) {
    lua_pushnil(L);
  } else {
    push_num(L, best, tp_logscan_field_is_int(best_f));
  }
  return 1;
}

// True when record r has a value a record table would hold as a non-finite number: a numeric
// field, or a loss of its `losses` table (present with two losses or more).
static bool has_nonfinite(const TpLogRecord *r) {
  for (int f = 0; f < TP_LOG_F_COUNT; f++) {
    if ((r->present >> f & 1) && !is_finite_num(r->v[f])) {
      return true;
    }
  }
  if (r->nlosses >= 2) {
    size_t pos = 0;
    TpLogKv kv;
    while (tp_logscan_kv_next(r, &pos, &kv)) {
      if (kv.kind == TP_LOG_KV_LOSS && !is_finite_num(kv.num)) {
        return true;
      }
    }
  }
  return false;
}

// scanner:nonfinite() -> positions of the records that hold a non-finite number (a field, or a
// loss when the record has several).
static int scan_nonfinite(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  size_t n = tp_logscan_nrecords(u->s);
  lua_newtable(L);
  lua_Integer k = 0;
  for (size_t i = 0; i < n; i++) {
    TpLogRecord r;
    tp_logscan_record(u->s, i, &r);
    if (has_nonfinite(&r)) {
      lua_pushinteger(L, (lua_Integer)i + 1);
      lua_rawseti(L, -2, ++k);
    }
  }
  return 1;
}

// scanner:derived_any() -> true when a record with a finite step time has it derived.
static int scan_derived_any(lua_State *L) {
  Scanner *u = check_scanner(L, 1);
  size_t n = tp_logscan_nrecords(u->s);
  bool any = false;
  for (size_t i = 0; i < n && !any; i++) {
    TpLogRecord r;
    tp_logscan_record(u->s, i, &r);
    any = r.step_time_derived && (r.present >> TP_LOG_F_STEP_TIME_S & 1) &&
          is_finite_num(r.v[TP_LOG_F_STEP_TIME_S]);
  }
  lua_pushboolean(L, any);
  return 1;
}

// --- Records as JSON --------------------------------------------------------------------------
//
// The `records` array of a run record, written the way tp.json's encoder (lua/l_json.c, pretty,
// sort_keys, indent 2) writes the tables tp.record builds from push_record: every field of the
// record contract present, null where the log has no value or a non-finite one; count fields as
// integers when integral; losses (two or more) and extra labels as objects whose repeated names
// keep the last value.

// The record's members: numeric fields 0..TP_LOG_F_COUNT-1, then these.
enum {
  RM_DERIVED = TP_LOG_F_COUNT,
  RM_LOSSES,
  RM_TIMESTAMP,
  RM_EXTRA,
  RM_COUNT,
};

typedef struct Member {
  const char *name;
  int id;
  size_t name_len;
  // What precedes the value: ",\n      \"<name>\": " (the first member without ','); text_len
  // is 0 when the name is too long for text (then it is written in pieces).
  char text[64];
  size_t text_len;
} Member;

static int member_cmp(const void *a, const void *b) {
  return strcmp(((const Member *)a)->name, ((const Member *)b)->name);
}

// Fills m with the members in key order.
static void sorted_members(Member m[RM_COUNT]) {
  for (int f = 0; f < TP_LOG_F_COUNT; f++) {
    m[f] = (Member){.name = tp_logscan_field_name(f), .id = f};
  }
  m[RM_DERIVED] = (Member){.name = "step_time_derived", .id = RM_DERIVED};
  m[RM_LOSSES] = (Member){.name = "losses", .id = RM_LOSSES};
  m[RM_TIMESTAMP] = (Member){.name = "timestamp", .id = RM_TIMESTAMP};
  m[RM_EXTRA] = (Member){.name = "extra", .id = RM_EXTRA};
  qsort(m, RM_COUNT, sizeof m[0], member_cmp);
  for (int k = 0; k < RM_COUNT; k++) {
    int n =
        snprintf(m[k].text, sizeof m[k].text, "%s\n      \"%s\": ", k > 0 ? "," : "", m[k].name);
    m[k].text_len = n > 0 && (size_t)n < sizeof m[k].text ? (size_t)n : 0;
    m[k].name_len = strlen(m[k].name);
  }
}

typedef struct RecWriter {
  TpBuf *out;
  Member members[RM_COUNT];  // in key order
  TpBuf kvs;                 // scratch: the entries of one losses/extra object (KvEnt)
  size_t record;             // 1-based, for error paths
  const char *key;           // member (and object key) being written, for error paths
  size_t key_len;
  const char *subkey;
  size_t subkey_len;
  char why[160];
  bool nomem;
  uint64_t int_mask;  // bit f: field f is a count (tp_logscan_field_is_int)
  size_t fixed_room;  // rw_fixed_room
} RecWriter;

typedef struct KvEnt {
  TpLogKv kv;
  size_t order;
} KvEnt;

// Same order as tp.json's sorted keys (bytewise, a prefix first); equal names by position.
static int kvent_cmp(const void *a, const void *b) {
  const KvEnt *x = a, *y = b;
  size_t m = x->kv.name_len < y->kv.name_len ? x->kv.name_len : y->kv.name_len;
  int c = memcmp(x->kv.name, y->kv.name, m);
  if (c == 0) {
    c = (x->kv.name_len > y->kv.name_len) - (x->kv.name_len < y->kv.name_len);
  }
  if (c == 0) {
    c = (x->order > y->order) - (x->order < y->order);
  }
  return c;
}

static bool rw_nomem(RecWriter *w) {
  w->nomem = true;
  snprintf(w->why, sizeof w->why, "out of memory");
  return false;
}

static bool rw_put(RecWriter *w, const char *p, size_t n) {
  return tp_buf_append(w->out, p, n) == 0 || rw_nomem(w);
}

static bool rw_string(RecWriter *w, const char *s, size_t n) {
  size_t bad = 0;
  int rc = tp_jsonw_string(w->out, s, n, &bad);
  if (rc == TP_EINVAL) {
    snprintf(w->why, sizeof w->why, "string is not valid UTF-8 (byte 0x%02X at offset %zu)",
             (unsigned char)s[bad], bad);
    return false;
  }
  if (rc != 0) {
    w->nomem = true;
    snprintf(w->why, sizeof w->why, "out of memory");
    return false;
  }
  return true;
}

// Writes the JSON text of v at d (room for TP_JSONW_NUM_MAX bytes): null when not finite, the
// integer's digits (as "%lld" writes them, without printf's cost) when as_int and integral, else
// tp_jsonw_float's shortest round-trip text. Returns the end.
static char *put_number(char *d, double v, bool as_int) {
  if (!is_finite_num(v)) {
    memcpy(d, "null", 4);
    return d + 4;
  }
  // An integral non-count below 10^15 (a loss scale of 1.0, a zero count as 0.0): its digits and
  // ".0", the text tp_jsonw_float gives it (%.15g prints such an integer exactly and it reads
  // back), without its printf and strtod calls; "-0.0" for negative zero.
  if (!as_int && v == floor(v) && v > -1e15 && v < 1e15) {
    long long x = (long long)v;
    unsigned long long m = x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x;
    char tmp[24];
    char *e = tmp + sizeof tmp, *p = e;
    *--p = '0';
    *--p = '.';
    do {
      *--p = (char)('0' + m % 10);
      m /= 10;
    } while (m > 0);
    if (signbit(v)) {
      *--p = '-';
    }
    memcpy(d, p, (size_t)(e - p));
    return d + (e - p);
  }
  if (as_int && v == floor(v) && v >= -9007199254740992.0 && v <= 9007199254740992.0) {
    long long x = (long long)v;
    unsigned long long m = x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x;
    char tmp[24];
    char *e = tmp + sizeof tmp, *p = e;
    do {
      *--p = (char)('0' + m % 10);
      m /= 10;
    } while (m > 0);
    if (x < 0) {
      *--p = '-';
    }
    memcpy(d, p, (size_t)(e - p));
    return d + (e - p);
  }
  return d + tp_jsonw_float(d, TP_JSONW_NUM_MAX, v);
}

static bool rw_number(RecWriter *w, double v, bool as_int) {
  char buf[TP_JSONW_NUM_MAX];
  return rw_put(w, buf, (size_t)(put_number(buf, v, as_int) - buf));
}

// Writes the losses (kind TP_LOG_KV_LOSS) or extra entries of r as an object at depth 4.
static bool rw_object(RecWriter *w, const TpLogRecord *r, TpLogKvKind kind) {
  w->kvs.len = 0;
  size_t pos = 0, n = 0;
  TpLogKv kv;
  while (tp_logscan_kv_next(r, &pos, &kv)) {
    if (kv.kind == kind) {
      KvEnt e = {kv, n++};
      if (tp_buf_append(&w->kvs, &e, sizeof e) != 0) {
        w->nomem = true;
        snprintf(w->why, sizeof w->why, "out of memory");
        return false;
      }
    }
  }
  KvEnt *ents = (KvEnt *)(void *)w->kvs.data;
  qsort(ents, n, sizeof *ents, kvent_cmp);
  if (!rw_put(w, "{", 1)) {
    return false;
  }
  bool first = true;
  for (size_t k = 0; k < n; k++) {
    // A repeated name keeps its last value: skip an entry followed by the same name.
    if (k + 1 < n && ents[k + 1].kv.name_len == ents[k].kv.name_len &&
        memcmp(ents[k + 1].kv.name, ents[k].kv.name, ents[k].kv.name_len) == 0) {
      continue;
    }
    const TpLogKv *e = &ents[k].kv;
    w->subkey = e->name;
    w->subkey_len = e->name_len;
    if (!rw_put(w, first ? "\n        " : ",\n        ", first ? 9 : 10) ||
        !rw_string(w, e->name, e->name_len) || !rw_put(w, ": ", 2)) {
      return false;
    }
    first = false;
    bool ok =
        kind == TP_LOG_KV_LOSS ? rw_number(w, e->num, false) : rw_string(w, e->str, e->str_len);
    if (!ok) {
      return false;
    }
  }
  w->subkey = NULL;
  return rw_put(w, first ? "}" : "\n      }", first ? 1 : 8);
}

static bool has_kind(const TpLogRecord *r, TpLogKvKind kind) {
  size_t pos = 0;
  TpLogKv kv;
  while (tp_logscan_kv_next(r, &pos, &kv)) {
    if (kv.kind == kind) {
      return true;
    }
  }
  return false;
}

// Room the members written in place need (each one's text and a number, true or null).
static size_t rw_fixed_room(const RecWriter *w) {
  size_t room = 16;
  for (int k = 0; k < RM_COUNT; k++) {
    room += w->members[k].text_len + TP_JSONW_NUM_MAX;
  }
  return room;
}

// Writes record r as an object at depth 2. The members whose text is a number, true or null are
// written in place into room reserved once per record; the others (strings, objects) through
// rw_put, with the room reserved again after them.
static bool rw_record(RecWriter *w, const TpLogRecord *r) {
  const Member *m = w->members;
  TpBuf *out = w->out;
  if (tp_buf_reserve(out, w->fixed_room) != 0) {
    return rw_nomem(w);
  }
  char *d = out->data + out->len;
  *d++ = '{';
  for (int k = 0; k < RM_COUNT; k++) {
    int id = m[k].id;
    if (m[k].text_len > 0 && (id < TP_LOG_F_COUNT || id == RM_DERIVED)) {
      memcpy(d, m[k].text, m[k].text_len);
      d += m[k].text_len;
      if (id == RM_DERIVED) {
        memcpy(d, r->step_time_derived ? "true" : "null", 4);
        d += 4;
      } else if (r->present >> id & 1) {
        d = put_number(d, r->v[id], w->int_mask >> id & 1);
      } else {
        memcpy(d, "null", 4);
        d += 4;
      }
      continue;
    }
    out->len = (size_t)(d - out->data);
    w->key = m[k].name;
    w->key_len = m[k].name_len;
    bool put;
    if (m[k].text_len > 0) {
      put = rw_put(w, m[k].text, m[k].text_len);
    } else {
      put = rw_put(w, k > 0 ? ",\n      \"" : "\n      \"", k > 0 ? 9 : 8) &&
            rw_put(w, w->key, w->key_len) && rw_put(w, "\": ", 3);
    }
    if (!put) {
      return false;
    }
    bool ok;
    if (id < TP_LOG_F_COUNT) {
      ok = (r->present >> id & 1) ? rw_number(w, r->v[id], w->int_mask >> id & 1)
                                  : rw_put(w, "null", 4);
    } else if (id == RM_DERIVED) {
      ok = r->step_time_derived ? rw_put(w, "true", 4) : rw_put(w, "null", 4);
    } else if (id == RM_TIMESTAMP) {
      ok = r->timestamp ? rw_string(w, r->timestamp, r->timestamp_len) : rw_put(w, "null", 4);
    } else if (id == RM_LOSSES) {
      ok = r->nlosses >= 2 ? rw_object(w, r, TP_LOG_KV_LOSS) : rw_put(w, "null", 4);
    } else {
      ok = has_kind(r, TP_LOG_KV_EXTRA) ? rw_object(w, r, TP_LOG_KV_EXTRA) : rw_put(w, "null", 4);
    }
    w->key = NULL;
    if (!ok) {
      return false;
    }
    if (tp_buf_reserve(out, w->fixed_room) != 0) {
      return rw_nomem(w);
    }
    d = out->data + out->len;
  }
  memcpy(d, "\n    }", 6);
  d += 6;
  out->len = (size_t)(d - out->data);
  return true;
}

// "$.records[i].key.sub" as tp.json's encoder names a place (tpl_format_path in lua/lutil.c): .name
// for identifier-like keys, ["name"] for the others.
static void rw_path(const RecWriter *w, char *out, size_t cap) {
  size_t o = (size_t)snprintf(out, cap, "$.records[%zu]", w->record);
  const char *keys[2] = {w->key, w->subkey};
  size_t lens[2] = {w->key_len, w->subkey_len};
  for (int j = 0; j < 2 && keys[j] && o + 8 < cap; j++) {
    const char *p = keys[j];
    size_t n = lens[j];
    bool ident = n > 0 && n <= 40 && !(p[0] >= '0' && p[0] <= '9');
    for (size_t k = 0; ident && k < n; k++) {
      unsigned char c = (unsigned char)p[k];
      ident =
          c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }
    char what[64];
    tpl_snippet(what, sizeof what, p, n, 40);
    o += (size_t)snprintf(out + o, cap - o, ident ? ".%s" : "[\"%s\"]", what);
    if (o >= cap) {
      o = cap - 1;
    }
  }
}

// --- Output: a file written as a stream, put in place atomically -------------------------------

typedef struct Output {
  TpStoreFile f;
  bool open;
  size_t unsynced;  // bytes written out since the last writeback was started
} Output;

// Bytes written out between two starts of writeback (output_pump).
#define OUTPUT_KICK (4u << 20)

// tp_store_file_pump, and every OUTPUT_KICK bytes written out, starts the writeback of the file's
// dirty pages (Linux sync_file_range(2), SYNC_FILE_RANGE_WRITE: asynchronous), so that the disk
// writes go on while the rest is produced and the fsync of commit waits only for the last ones.
static void output_kick(Output *o) {
#ifdef SYNC_FILE_RANGE_WRITE
  (void)sync_file_range(o->f.fd, 0, 0, SYNC_FILE_RANGE_WRITE);  // a hint: failures ignored
#endif
  o->unsynced = 0;
}

static int output_pump(Output *o, TpError *err) {
  size_t pending = o->f.buf.len;
  int rc = tp_store_file_pump(&o->f, err);
  if (rc == 0 && o->f.buf.len < pending) {
    o->unsynced += pending - o->f.buf.len;
    if (o->unsynced >= OUTPUT_KICK) {
      output_kick(o);
    }
  }
  return rc;
}

static Output *check_output(lua_State *L, int idx) {
  Output *o = luaL_checkudata(L, idx, OUTPUT);
  if (!o->open) {
    luaL_error(L, "attempt to use a closed output file");
  }
  return o;
}

// log.output(path [, mode]) -> Output | nil, err, code: starts "<path>.tmp.XXXXXX".
static int log_output(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer mode = luaL_optinteger(L, 2, 0644);
  luaL_argcheck(L, mode >= 0 && mode <= 07777, 2, "mode out of range");
  Output *o = lua_newuserdatauv(L, sizeof *o, 0);
  memset(o, 0, sizeof *o);
  o->f.fd = -1;
  luaL_setmetatable(L, OUTPUT);
  TpError err;
  if (tp_store_file_open(&o->f, path, (int)mode, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  o->open = true;
  return 1;
}

// Aborts the file after a failure and pushes nil, err, code.
static int output_failure(lua_State *L, Output *o, const TpError *err) {
  tp_store_file_abort(&o->f);
  o->open = false;
  return tpl_pusherror(L, err);
}

// output:write(text [, indent]) -> true | nil, err, code (the file is then removed). With indent,
// each newline of text is followed by that many spaces: a pretty JSON text written as a member
// nested one level deeper (a JSON text has newlines only between tokens).
static int output_write(lua_State *L) {
  Output *o = check_output(L, 1);
  size_t n;
  const char *p = luaL_checklstring(L, 2, &n);
  lua_Integer indent = luaL_optinteger(L, 3, 0);
  luaL_argcheck(L, indent >= 0 && indent <= 16, 3, "indent out of range (0..16)");
  static const char pad[] = "\n                ";  // a newline and 16 spaces
  TpError err;
  int rc = 0;
  const char *end = p + n;
  while (rc == 0 && p < end) {
    const char *nl = indent > 0 ? memchr(p, '\n', (size_t)(end - p)) : NULL;
    size_t seg = nl ? (size_t)(nl - p) : (size_t)(end - p);
    rc = tp_store_file_write(&o->f, p, seg, &err);
    if (rc == 0 && nl) {
      rc = tp_store_file_write(&o->f, pad, 1 + (size_t)indent, &err);
      seg++;
    }
    p += seg;
  }
  if (rc != 0) {
    return output_failure(L, o, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// output:records(scanner) -> true | nil, err, code: writes the scanner's records as the JSON
// array tp.record's `records` member holds (at depth 1 of a pretty record). A string that is
// not UTF-8 fails with "$.records[i]...: string is not valid UTF-8 (...)" (code EINVAL).
static int output_records(lua_State *L) {
  Output *o = check_output(L, 1);
  Scanner *u = check_scanner(L, 2);
  size_t n = tp_logscan_nrecords(u->s);
  RecWriter w;
  memset(&w, 0, sizeof w);
  w.out = &o->f.buf;
  sorted_members(w.members);
  for (int f = 0; f < TP_LOG_F_COUNT; f++) {
    w.int_mask |= (uint64_t)tp_logscan_field_is_int(f) << f;
  }
  w.fixed_room = rw_fixed_room(&w);
  TpError err;
  bool ok = rw_put(&w, "[", 1);
  for (size_t i = 0; ok && i < n; i++) {
    TpLogRecord r;
    tp_logscan_record(u->s, i, &r);
    w.record = i + 1;
    ok = rw_put(&w, i > 0 ? ",\n    " : "\n    ", i > 0 ? 6 : 5) && rw_record(&w, &r);
    if (ok && output_pump(o, &err) != 0) {
      tp_buf_free(&w.kvs);
      return output_failure(L, o, &err);
    }
  }
  ok = ok && rw_put(&w, n > 0 ? "\n  ]" : "]", n > 0 ? 4 : 1);
  tp_buf_free(&w.kvs);
  if (!ok) {
    char where[256];
    rw_path(&w, where, sizeof where);
    tp_store_file_abort(&o->f);
    o->open = false;
    return tpl_pushfail(L, w.nomem ? "ENOMEM" : "EINVAL", "%s: %s", where, w.why);
  }
  if (output_pump(o, &err) != 0) {
    return output_failure(L, o, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// output:writeback(): starts the writeback of what has been written out so far (the bytes still
// buffered, under 1 MiB, excepted), so that commit's fsync waits for less: for a writer about to
// wait for something else (tp.record.save before a pending member).
static int output_writeback(lua_State *L) {
  Output *o = check_output(L, 1);
  output_kick(o);
  return 0;
}

// output:commit() -> true | nil, err, code: fsync, rename over the path, fsync the directory.
static int output_commit(lua_State *L) {
  Output *o = check_output(L, 1);
  TpError err;
  int rc = tp_store_file_commit(&o->f, &err);
  tp_store_file_abort(&o->f);  // frees; the committed file stays
  o->open = false;
  if (rc != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// output:close(): removes the temporary file unless committed; idempotent.
static int output_close(lua_State *L) {
  Output *o = luaL_checkudata(L, 1, OUTPUT);
  if (o->open) {
    o->open = false;
    tp_store_file_abort(&o->f);
  }
  return 0;
}

static int output_tostring(lua_State *L) {
  Output *o = luaL_checkudata(L, 1, OUTPUT);
  if (o->open) {
    lua_pushfstring(L, "tp.log.Output (%s)", o->f.path);
  } else {
    lua_pushstring(L, "tp.log.Output (closed)");
  }
  return 1;
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
  tp_digest_follow_free(u->digest);  // stops its thread when the digest was never asked for
  u->digest = NULL;
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
      {"values", scan_values},
      {"peak", scan_peak},
      {"nonfinite", scan_nonfinite},
      {"derived_any", scan_derived_any},
      {"digest", scan_digest},
      {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
      {"__gc", scan_close},
      {"__close", scan_close},
      {"__tostring", scan_tostring},
      {NULL, NULL},
  };
  tpl_newclass(L, SCANNER, methods, meta);
  static const luaL_Reg out_methods[] = {
      {"write", output_write},   {"records", output_records}, {"writeback", output_writeback},
      {"commit", output_commit}, {"close", output_close},     {NULL, NULL},
  };
  static const luaL_Reg out_meta[] = {
      {"__gc", output_close},
      {"__close", output_close},
      {"__tostring", output_tostring},
      {NULL, NULL},
  };
  tpl_newclass(L, OUTPUT, out_methods, out_meta);
  static const luaL_Reg funcs[] = {
      {"new", log_new},
      {"parse_number", log_parse_number},
      {"output", log_output},
      {NULL, NULL},
  };
  luaL_newlib(L, funcs);
  lua_pushstring(L, TP_LOGSCAN_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushinteger(L, TP_LOGSCAN_MAX_LINE);
  lua_setfield(L, -2, "max_line");
  return 1;
}
