// Helpers shared by the Lua bindings: engine errors to Lua values, option checks.
#pragma once

#include <lauxlib.h>
#include <lua.h>

#include <stdbool.h>

#include "common.h"

/// Pushes the "expected failure" triple nil, err->msg, code name; returns 3.
int tpl_pusherror(lua_State *L, const TpError *err);

/// Pushes nil, "<subject>: <strerror>", errno name for the current errno; returns 3.
int tpl_pusherrno(lua_State *L, const char *subject);

/// Pushes nil, msg, code (a literal code string such as "EPARSE"); returns 3.
int tpl_pushfail(lua_State *L, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/// Reads an optional field of the options table at `idx` (absent or nil -> `def`).
lua_Integer tpl_optfield_integer(lua_State *L, int idx, const char *field, lua_Integer def);
lua_Number tpl_optfield_number(lua_State *L, int idx, const char *field, lua_Number def);
int tpl_optfield_boolean(lua_State *L, int idx, const char *field, int def);
/// Returns the string field or `def`; the string stays valid while the options table lives.
const char *tpl_optfield_string(lua_State *L, int idx, const char *field, const char *def);

/// Creates (once per state) the metatable `tname` with the methods `methods` in __index and the
/// metamethods `meta`; leaves the stack as it found it.
void tpl_newclass(lua_State *L, const char *tname, const luaL_Reg *methods, const luaL_Reg *meta);

/// Registry field of the null sentinel and the metatable names shared by tp.json and tp.yaml.
#define NULL_FIELD "tp.json.null.value"
#define NULL_MT    "tp.json.null"
#define ARRAY_MT   "tp.json.array"

/// Pushes the null sentinel `tp.json.null` (a zero-size userdata created once per state).
void tpl_push_null(lua_State *L);
/// Pushes the metatable that marks a table as a JSON/YAML array.
void tpl_push_array_mt(lua_State *L);
/// Pushes what a decoder builds values with: the null sentinel, the `null` field of the
/// options table at `opts_idx` (nil when the options are absent) and the array marker.
void tpl_push_decode_marks(lua_State *L, int opts_idx);
/// Sets the fields `null` (the sentinel) and `array_mt` of the module table on top of the stack.
void tpl_set_null_fields(lua_State *L);
/// 1-based line and column (counted in characters, as libyaml's marks count them) of byte
/// offset `off` in s.
void tpl_line_col(const unsigned char *s, size_t n, size_t off, size_t *line, size_t *col);
/// Copies at most `max` bytes of s into out (capacity `cap`) as printable text: UTF-8
/// characters stay; control characters, backslashes and invalid bytes become \xNN.
void tpl_snippet(char *out, size_t cap, const char *s, size_t n, size_t max);

/// One step of the path from the value being encoded or dumped down to the current one.
typedef struct TplPathElem {
  const char *key;  ///< string key (anchored by its table during the walk), or NULL
  size_t key_len;
  lua_Integer index;  ///< array index or integer key when key is NULL
} TplPathElem;

/// Writes path[1..depth] into out (capacity `cap`) as "$", then .name for identifier-like keys,
/// ["other key"] for the rest and [i] for integer keys (1-based, as the Lua table is indexed);
/// stops early when out is nearly full.
void tpl_format_path(char *out, size_t cap, const TplPathElem *path, int depth);

/// The key shape of a table, as tp.json's encoder and tp.yaml's dumper classify it.
typedef struct TplTableShape {
  lua_Integer total;    ///< number of keys
  lua_Integer nint;     ///< integer keys
  lua_Integer nstr;     ///< string keys
  bool marked;          ///< carries the array marker metatable
  bool is_array;        ///< keys exactly 1..total, or empty and marked
  const char *bad_key;  ///< type name of the first key neither string nor integer ("float"...)
} TplTableShape;

/// Scans the keys of the table at `idx` (raw, no metamethods) into `s`; `array_mt_idx` is the
/// stack index of the array marker metatable. Returns false when a key is neither a string nor
/// an integer (then `s->bad_key` names its type and the scan stopped there).
bool tpl_table_shape(lua_State *L, int idx, int array_mt_idx, TplTableShape *s);
