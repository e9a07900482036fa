// Helpers shared by the Lua bindings: engine errors to Lua values, option checks.
#include "lutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tpl_pusherror(lua_State *L, const TpError *err) {
  luaL_pushfail(L);
  lua_pushstring(L, err->msg);
  lua_pushstring(L, tp_error_name(err->code));
  return 3;
}

int tpl_pusherrno(lua_State *L, const char *subject) {
  int saved = errno;
  luaL_pushfail(L);
  lua_pushfstring(L, "%s: %s", subject, strerror(saved));
  lua_pushstring(L, tp_error_name(-saved));
  return 3;
}

int tpl_pushfail(lua_State *L, const char *code, const char *fmt, ...) {
  luaL_pushfail(L);
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_pushstring(L, code);
  return 3;
}

static int getfield(lua_State *L, int idx, const char *field) {
  if (lua_isnoneornil(L, idx)) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  luaL_checktype(L, idx, LUA_TTABLE);
  return lua_getfield(L, idx, field);
}

lua_Integer tpl_optfield_integer(lua_State *L, int idx, const char *field, lua_Integer def) {
  idx = lua_absindex(L, idx);
  int t = getfield(L, idx, field);
  lua_Integer v = def;
  if (t != LUA_TNIL) {
    int isnum = 0;
    v = lua_tointegerx(L, -1, &isnum);
    if (!isnum) {
      luaL_error(L, "option '%s': integer expected, got %s", field, luaL_typename(L, -1));
    }
  }
  lua_pop(L, 1);
  return v;
}

lua_Number tpl_optfield_number(lua_State *L, int idx, const char *field, lua_Number def) {
  idx = lua_absindex(L, idx);
  int t = getfield(L, idx, field);
  lua_Number v = def;
  if (t != LUA_TNIL) {
    int isnum = 0;
    v = lua_tonumberx(L, -1, &isnum);
    if (!isnum) {
      luaL_error(L, "option '%s': number expected, got %s", field, luaL_typename(L, -1));
    }
  }
  lua_pop(L, 1);
  return v;
}

int tpl_optfield_boolean(lua_State *L, int idx, const char *field, int def) {
  idx = lua_absindex(L, idx);
  int t = getfield(L, idx, field);
  int v = def;
  if (t != LUA_TNIL) {
    if (t != LUA_TBOOLEAN) {
      luaL_error(L, "option '%s': boolean expected, got %s", field, luaL_typename(L, -1));
    }
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

const char *tpl_optfield_string(lua_State *L, int idx, const char *field, const char *def) {
  idx = lua_absindex(L, idx);
  int t = getfield(L, idx, field);
  const char *v = def;
  if (t != LUA_TNIL) {
    if (t != LUA_TSTRING) {
      luaL_error(L, "option '%s': string expected, got %s", field, luaL_typename(L, -1));
    }
    v = lua_tostring(L, -1);  // anchored by the options table
  }
  lua_pop(L, 1);
  return v;
}

void tpl_newclass(lua_State *L, const char *tname, const luaL_Reg *methods, const luaL_Reg *meta) {
  if (!luaL_newmetatable(L, tname)) {
    lua_pop(L, 1);
    return;
  }
  // [mt]
  if (meta) {
    luaL_setfuncs(L, meta, 0);
  }
  if (methods) {
    lua_newtable(L);  // [mt, methods]
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}

// ---------------------------------------------------------------------------------------------
// tp.json.null, the array marker, UTF-8 and positions: shared by lua/l_json.c and lua/l_yaml.c.

static int null_tostring(lua_State *L) {
  lua_pushliteral(L, "null");
  return 1;
}

// Pushes the null sentinel (a zero-size userdata created once per state).
void tpl_push_null(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, NULL_FIELD) == LUA_TUSERDATA) {
    return;
  }
  lua_pop(L, 1);
  lua_newuserdatauv(L, 0, 0);  // [null]
  if (luaL_newmetatable(L, NULL_MT)) {
    lua_pushcfunction(L, null_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "null");
    lua_setfield(L, -2, "__metatable");  // getmetatable(null) == 'null'; nobody can change it
  }
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, NULL_FIELD);
}

// Pushes the metatable that marks a table as an array (also set on every decoded array).
void tpl_push_array_mt(lua_State *L) {
  luaL_newmetatable(L, ARRAY_MT);
}

void tpl_push_decode_marks(lua_State *L, int opts_idx) {
  opts_idx = lua_absindex(L, opts_idx);
  tpl_push_null(L);  // [sentinel]
  if (lua_isnoneornil(L, opts_idx)) {
    lua_pushnil(L);
  } else {
    lua_getfield(L, opts_idx, "null");
  }
  tpl_push_array_mt(L);  // [sentinel, opts.null, array_mt]
}

void tpl_set_null_fields(lua_State *L) {
  tpl_push_null(L);
  lua_setfield(L, -2, "null");
  tpl_push_array_mt(L);
  lua_setfield(L, -2, "array_mt");
}

void tpl_line_col(const unsigned char *s, size_t n, size_t off, size_t *line, size_t *col) {
  size_t ln = 1, bol = 0;
  if (off > n) {
    off = n;
  }
  for (size_t i = 0; i < off; i++) {
    if (s[i] == '\n') {
      ln++;
      bol = i + 1;
    }
  }
  size_t c = 1;
  for (size_t i = bol; i < off; i++) {
    if ((s[i] & 0xC0) != 0x80) {
      c++;
    }
  }
  *line = ln;
  *col = c;
}

// Copies at most `max` bytes of s into out as printable text: UTF-8 characters stay, control
// characters, backslashes and invalid bytes become \xNN.
void tpl_snippet(char *out, size_t cap, const char *s, size_t n, size_t max) {
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0, i = 0;
  while (i < n && i < max && o + 5 < cap) {
    unsigned c = p[i];
    size_t k = c >= 0x80 ? tp_utf8_len(p + i, n - i) : 1;
    if (c >= 0x80 && k > 0 && o + k + 1 < cap) {
      memcpy(out + o, p + i, k);
      o += k;
      i += k;
    } else if (c >= 0x20 && c < 0x7F && c != '\\') {
      out[o++] = (char)c;
      i++;
    } else {
      o += (size_t)snprintf(out + o, cap - o, "\\x%02X", c);
      i++;
    }
  }
  if (i < n && o + 4 < cap) {
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o] = '\0';
}

static bool is_digit(unsigned c) {
  return c >= '0' && c <= '9';
}

void tpl_format_path(char *out, size_t cap, const TplPathElem *path, int depth) {
  size_t o = (size_t)snprintf(out, cap, "$");
  for (int i = 1; i <= depth && o + 8 < cap; i++) {
    const TplPathElem *p = &path[i];
    if (!p->key) {
      o += (size_t)snprintf(out + o, cap - o, "[%lld]", (long long)p->index);
      continue;
    }
    bool ident = p->key_len > 0 && p->key_len <= 40 && !is_digit((unsigned char)p->key[0]);
    for (size_t k = 0; ident && k < p->key_len; k++) {
      unsigned char c = (unsigned char)p->key[k];
      ident = c == '_' || is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }
    char what[64];
    tpl_snippet(what, sizeof what, p->key, p->key_len, 40);
    o += (size_t)snprintf(out + o, cap - o, ident ? ".%s" : "[\"%s\"]", what);
    if (o >= cap) {
      o = cap - 1;
    }
  }
}

bool tpl_table_shape(lua_State *L, int idx, int array_mt_idx, TplTableShape *s) {
  idx = lua_absindex(L, idx);
  array_mt_idx = lua_absindex(L, array_mt_idx);
  *s = (TplTableShape){0};
  if (lua_getmetatable(L, idx)) {
    s->marked = lua_rawequal(L, -1, array_mt_idx);
    lua_pop(L, 1);
  }
  lua_Integer imin = LUA_MAXINTEGER, imax = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);  // [key]
    s->total++;
    if (lua_type(L, -1) == LUA_TSTRING) {
      s->nstr++;
    } else if (lua_isinteger(L, -1)) {
      lua_Integer k = lua_tointeger(L, -1);
      s->nint++;
      imin = k < imin ? k : imin;
      imax = k > imax ? k : imax;
    } else {
      const char *tn = luaL_typename(L, -1);
      s->bad_key = strcmp(tn, "number") == 0 ? "float" : tn;
      lua_pop(L, 1);
      return false;
    }
  }
  s->is_array = (s->total == 0 && s->marked) ||
                (s->total > 0 && s->nint == s->total && imin == 1 && imax == s->total);
  return true;
}
