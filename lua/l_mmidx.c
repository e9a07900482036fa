// tp._mmidx: Megatron indexed datasets (engine/mmidx) for Lua: facts and checks of a PREFIX,
// fingerprints, synthetic datasets, and a writer of byte-token documents.
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "lutil.h"
#include "mmidx.h"

#define WRITER "tp.MmidxWriter"

static void set_int(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

// The facts of an opened dataset, as a new table on the stack.
static void push_info(lua_State *L, const TpMmidx *m) {
  lua_createtable(L, 0, 12);
  lua_pushstring(L, tp_mmidx_dtype_name(m->ix.dtype));
  lua_setfield(L, -2, "dtype");
  set_int(L, "itemsize", (lua_Integer)m->ix.itemsize);
  set_int(L, "sequences", (lua_Integer)m->ix.sequences);
  set_int(L, "documents", (lua_Integer)(m->ix.doc_entries - 1));
  set_int(L, "tokens", (lua_Integer)m->ix.tokens);
  set_int(L, "idx_bytes", (lua_Integer)m->idx_len);
  set_int(L, "bin_bytes", (lua_Integer)m->bin_len);
}

// mmidx.info(prefix) -> {dtype, itemsize, sequences, documents, tokens, idx_bytes, bin_bytes}
//   | nil, err, code
static int l_info(lua_State *L) {
  const char *prefix = luaL_checkstring(L, 1);
  TpMmidx m;
  TpError err;
  if (tp_mmidx_open(prefix, &m, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  push_info(L, &m);
  tp_mmidx_close(&m);
  return 1;
}

// mmidx.stats(prefix) -> info + {min_token, max_token, min_len, max_len, empty_sequences,
//   length_histogram = {[bits] = count}} | nil, err, code
static int l_stats(lua_State *L) {
  const char *prefix = luaL_checkstring(L, 1);
  TpMmidx m;
  TpError err;
  if (tp_mmidx_open(prefix, &m, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  TpMmidxStats st;
  tp_mmidx_stats(&m, &st);
  uint64_t hist[33];
  tp_mmidx_length_histogram(&m.ix, hist);
  push_info(L, &m);
  tp_mmidx_close(&m);
  set_int(L, "min_token", st.min_token);
  set_int(L, "max_token", st.max_token);
  set_int(L, "min_len", (lua_Integer)st.min_len);
  set_int(L, "max_len", (lua_Integer)st.max_len);
  set_int(L, "empty_sequences", (lua_Integer)st.empty_sequences);
  lua_createtable(L, 33, 0);
  for (int k = 0; k < 33; k++) {
    lua_pushinteger(L, (lua_Integer)hist[k]);
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "length_histogram");
  return 1;
}

// mmidx.out_of_vocab(prefix, vocab) -> false | position, value | nil, err, code
static int l_out_of_vocab(lua_State *L) {
  const char *prefix = luaL_checkstring(L, 1);
  lua_Integer vocab = luaL_checkinteger(L, 2);
  luaL_argcheck(L, vocab >= 1, 2, "vocabulary size must be at least 1");
  TpMmidx m;
  TpError err;
  if (tp_mmidx_open(prefix, &m, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  uint64_t pos = 0;
  int64_t value = 0;
  bool found = tp_mmidx_find_out_of_vocab(&m, (int64_t)vocab, &pos, &value);
  tp_mmidx_close(&m);
  if (!found) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)pos);
  lua_pushinteger(L, (lua_Integer)value);
  return 2;
}

// mmidx.fingerprint(prefix, seq_len, samples) -> {tokens_sha256, samples_sha256, samples, ...}
//   | nil, err, code. seq_len = 0: no sample digest.
static int l_fingerprint(lua_State *L) {
  const char *prefix = luaL_checkstring(L, 1);
  lua_Integer seq_len = luaL_checkinteger(L, 2);
  lua_Integer samples = luaL_checkinteger(L, 3);
  luaL_argcheck(L, seq_len >= 0, 2, "sequence length must be >= 0");
  luaL_argcheck(L, samples >= 0, 3, "sample count must be >= 0");
  TpMmidx m;
  TpError err;
  if (tp_mmidx_open(prefix, &m, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  char tokens[65], sample_hex[65];
  uint64_t made = 0;
  int rc = tp_mmidx_sha256_tokens(&m, tokens, &err);
  if (rc == 0 && seq_len > 0) {
    rc = tp_mmidx_sha256_samples(&m, (uint64_t)seq_len, (uint64_t)samples, sample_hex, &made, &err);
  }
  if (rc != 0) {
    tp_mmidx_close(&m);
    return tpl_pusherror(L, &err);
  }
  push_info(L, &m);
  tp_mmidx_close(&m);
  lua_pushlstring(L, tokens, 64);
  lua_setfield(L, -2, "tokens_sha256");
  if (seq_len > 0) {
    lua_pushlstring(L, sample_hex, 64);
    lua_setfield(L, -2, "samples_sha256");
    set_int(L, "samples", (lua_Integer)made);
    set_int(L, "seq_len", seq_len);
  }
  return 1;
}

// mmidx.synth(prefix, tokens, vocab, seed, kind, doc_len) -> true | nil, err, code
static int l_synth(lua_State *L) {
  static const char *const kinds[] = {"random", "repeat", "zipf", NULL};
  const char *prefix = luaL_checkstring(L, 1);
  lua_Integer tokens = luaL_checkinteger(L, 2);
  lua_Integer vocab = luaL_checkinteger(L, 3);
  lua_Integer seed = luaL_checkinteger(L, 4);
  int kind = luaL_checkoption(L, 5, NULL, kinds);
  lua_Integer doc_len = luaL_checkinteger(L, 6);
  luaL_argcheck(L, tokens >= 0, 2, "token count must be >= 0");
  luaL_argcheck(L, vocab >= 1, 3, "vocabulary size must be at least 1");
  luaL_argcheck(L, doc_len >= 1, 6, "document length must be at least 1");
  TpError err;
  if (tp_mmidx_synth(prefix, (uint64_t)tokens, (uint64_t)vocab, (uint64_t)seed,
                     (TpMmidxSynthKind)kind, (uint64_t)doc_len, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// A writer userdata: created closed, opened after (so an error never leaks the engine object).
typedef struct LWriter {
  TpMmidxWriter w;
  bool open;
} LWriter;

static LWriter *check_writer(lua_State *L) {
  LWriter *lw = luaL_checkudata(L, 1, WRITER);
  if (!lw->open) {
    luaL_error(L, "attempt to use a closed dataset writer");
  }
  return lw;
}

// mmidx.writer(prefix, dtype) -> Writer | nil, err, code
static int l_writer(lua_State *L) {
  static const char *const dtypes[] = {"uint8", "int8", "int16", "int32", "int64", "uint16", NULL};
  static const int codes[] = {TP_MMIDX_UINT8, TP_MMIDX_INT8,  TP_MMIDX_INT16,
                              TP_MMIDX_INT32, TP_MMIDX_INT64, TP_MMIDX_UINT16};
  const char *prefix = luaL_checkstring(L, 1);
  int dtype = codes[luaL_checkoption(L, 2, "uint16", dtypes)];
  LWriter *lw = lua_newuserdatauv(L, sizeof *lw, 0);
  memset(lw, 0, sizeof *lw);
  luaL_setmetatable(L, WRITER);
  TpError err;
  if (tp_mmidx_writer_open(&lw->w, prefix, dtype, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lw->open = true;
  return 1;
}

// writer:add_bytes(s, end_document) -> true | nil, err, code: each byte of s is one token.
static int w_add_bytes(lua_State *L) {
  LWriter *lw = check_writer(L);
  size_t n = 0;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 2, &n);
  bool end = lua_toboolean(L, 3);
  TpError err;
  if (n == 0) {
    if (end && tp_mmidx_writer_end_document(&lw->w, &err) != 0) {
      return tpl_pusherror(L, &err);
    }
    lua_pushboolean(L, 1);
    return 1;
  }
  // One sequence per call.
  luaL_argcheck(L, n <= INT32_MAX, 2, "a sequence holds at most 2^31-1 tokens");
  int64_t *all = lua_newuserdatauv(L, n * sizeof *all, 0);
  for (size_t i = 0; i < n; i++) {
    all[i] = s[i];
  }
  if (tp_mmidx_writer_add(&lw->w, all, n, end, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// writer:add(tokens, end_document) -> true | nil, err, code: tokens a list of integers.
static int w_add(lua_State *L) {
  LWriter *lw = check_writer(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  bool end = lua_toboolean(L, 3);
  lua_Integer n = luaL_len(L, 2);
  int64_t *all = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *all, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 2, i);
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok) {
      return luaL_error(L, "tokens[%d]: integer expected, got %s", (int)i, luaL_typename(L, -1));
    }
    all[i - 1] = v;
    lua_pop(L, 1);
  }
  TpError err;
  if (tp_mmidx_writer_add(&lw->w, all, (size_t)n, end, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// writer:commit() -> true | nil, err, code (the writer is closed either way)
static int w_commit(lua_State *L) {
  LWriter *lw = check_writer(L);
  lw->open = false;
  TpError err;
  if (tp_mmidx_writer_commit(&lw->w, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// writer:abort() / __gc / __close: discards what was written; idempotent.
static int w_abort(lua_State *L) {
  LWriter *lw = luaL_checkudata(L, 1, WRITER);
  if (lw->open) {
    lw->open = false;
    tp_mmidx_writer_abort(&lw->w);
  }
  return 0;
}

static int w_tostring(lua_State *L) {
  LWriter *lw = luaL_checkudata(L, 1, WRITER);
  lua_pushfstring(L, "tp.MmidxWriter (%s)", lw->open ? "open" : "closed");
  return 1;
}

int luaopen_tp__mmidx(lua_State *L);
int luaopen_tp__mmidx(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"abort", w_abort},   {"add", w_add}, {"add_bytes", w_add_bytes},
      {"commit", w_commit}, {NULL, NULL},
  };
  static const luaL_Reg meta[] = {
      {"__close", w_abort},
      {"__gc", w_abort},
      {"__tostring", w_tostring},
      {NULL, NULL},
  };
  tpl_newclass(L, WRITER, methods, meta);
  static const luaL_Reg funcs[] = {
      {"fingerprint", l_fingerprint},
      {"info", l_info},
      {"out_of_vocab", l_out_of_vocab},
      {"stats", l_stats},
      {"synth", l_synth},
      {"writer", l_writer},
      {NULL, NULL},
  };
  luaL_newlib(L, funcs);
  return 1;
}
