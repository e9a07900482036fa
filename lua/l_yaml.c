// tp._yaml: YAML text <-> Lua values with libyaml (yaml/libyaml 0.2.5, include/yaml.h): parser
// events (yaml_parser_parse) become Lua tables (YAML 1.2 core schema, anchors and aliases, merge
// keys, limits), and Lua values become emitter events (yaml_emitter_emit: block style, sorted
// keys, quoting that keeps every scalar's type).
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "lutil.h"

// The null sentinel and the array marker are shared with tp._json (lua/l_json.c) by these names.
#define LOADER_MT "tp.yaml.loader"
#define DUMPER_MT "tp.yaml.dumper"

#define DEFAULT_MAX_DEPTH       512
#define DEFAULT_MAX_ALIAS_NODES 1000000
#define DUMP_MAX_DEPTH          1000

// The tags of the YAML 1.2.2 core schema (§10.3), as libyaml expands the "!!" shorthand.
#define TAG_STR   "tag:yaml.org,2002:str"
#define TAG_NULL  "tag:yaml.org,2002:null"
#define TAG_BOOL  "tag:yaml.org,2002:bool"
#define TAG_INT   "tag:yaml.org,2002:int"
#define TAG_FLOAT "tag:yaml.org,2002:float"
#define TAG_SEQ   "tag:yaml.org,2002:seq"
#define TAG_MAP   "tag:yaml.org,2002:map"

// A private value standing for a null node while the loader builds its tables.
static const char null_node = 0;

// ---------------------------------------------------------------------------------------------
// Text helpers (the null sentinel, array marker, UTF-8 and positions are in lutil.c).

static bool utf8_valid(const char *s, size_t n, size_t *bad) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t k = tp_utf8_len(p + i, n - i);
    if (k == 0) {
      *bad = i;
      return false;
    }
    i += k;
  }
  return true;
}

static bool is_digit(unsigned c) {
  return c >= '0' && c <= '9';
}

static bool is_hex(unsigned c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool eq(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// ---------------------------------------------------------------------------------------------
// YAML 1.2.2 §10.3.2 "Tag Resolution" of the core schema, for plain (unquoted, untagged)
// scalars. The regular expressions of the spec, in order:
//   null  | Null | NULL | ~ | (empty)                                     -> null
//   true | True | TRUE | false | False | FALSE                           -> bool
//   [-+]? [0-9]+                                                         -> int (base 10)
//   0o [0-7]+                                                            -> int (base 8)
//   0x [0-9a-fA-F]+                                                      -> int (base 16)
//   [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?   -> float
//   [-+]? ( \.inf | \.Inf | \.INF )                                      -> float (infinity)
//   \.nan | \.NaN | \.NAN                                                -> float (not a number)
//   anything else                                                        -> str
// yes/no/on/off and 0b/1_000/sexagesimal forms are YAML 1.1 (§10.3 does not list them): strings.
// A base-10 integer outside 64 bits becomes a float (as Lua's own lexer does); a base-8 or
// base-16 one above 0x7fffffffffffffff is refused (SK_RANGE).

typedef enum ScalarKind { SK_STR, SK_NULL, SK_BOOL, SK_INT, SK_FLOAT, SK_RANGE } ScalarKind;

typedef struct Scalar {
  bool b;
  lua_Integer i;
  double f;
} Scalar;

static ScalarKind resolve_radix(const char *s, size_t n, unsigned base, Scalar *out) {
  uint64_t acc = 0;
  for (size_t k = 2; k < n; k++) {
    unsigned c = (unsigned char)s[k];
    unsigned dg = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
    if (acc > ((uint64_t)INT64_MAX - dg) / base) {
      return SK_RANGE;
    }
    acc = acc * base + dg;
  }
  out->i = (lua_Integer)acc;
  return SK_INT;
}

// `s` must have a NUL at s[n] (libyaml values and Lua strings do): floats go through strtod.
static ScalarKind resolve_plain(const char *s, size_t n, Scalar *out) {
  if (n == 0 || eq(s, n, "null") || eq(s, n, "Null") || eq(s, n, "NULL") || eq(s, n, "~")) {
    return SK_NULL;
  }
  if (eq(s, n, "true") || eq(s, n, "True") || eq(s, n, "TRUE")) {
    out->b = true;
    return SK_BOOL;
  }
  if (eq(s, n, "false") || eq(s, n, "False") || eq(s, n, "FALSE")) {
    out->b = false;
    return SK_BOOL;
  }
  if (n > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'x')) {
    bool ok = true;
    for (size_t k = 2; k < n && ok; k++) {
      unsigned c = (unsigned char)s[k];
      ok = s[1] == 'o' ? (c >= '0' && c <= '7') : is_hex(c);
    }
    if (ok) {
      return resolve_radix(s, n, s[1] == 'o' ? 8 : 16, out);
    }
    return SK_STR;
  }
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  bool neg = s[0] == '-';
  if (eq(s + i, n - i, ".inf") || eq(s + i, n - i, ".Inf") || eq(s + i, n - i, ".INF")) {
    out->f = neg ? -HUGE_VAL : HUGE_VAL;
    return SK_FLOAT;
  }
  if (eq(s, n, ".nan") || eq(s, n, ".NaN") || eq(s, n, ".NAN")) {
    out->f = NAN;
    return SK_FLOAT;
  }
  size_t j = i;
  while (j < n && is_digit((unsigned char)s[j])) {
    j++;
  }
  size_t int_digits = j - i;
  if (j == n && int_digits > 0) {
    uint64_t acc = 0;
    bool overflow = false;
    for (size_t k = i; k < n; k++) {
      unsigned dg = (unsigned char)s[k] - '0';
      if (acc > (UINT64_MAX - dg) / 10) {
        overflow = true;
        break;
      }
      acc = acc * 10 + dg;
    }
    if (!overflow && !neg && acc <= (uint64_t)INT64_MAX) {
      out->i = (lua_Integer)acc;
      return SK_INT;
    }
    if (!overflow && neg && acc <= (uint64_t)INT64_MAX + 1) {
      out->i = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(lua_Integer)acc;
      return SK_INT;
    }
    out->f = strtod(s, NULL);
    return SK_FLOAT;
  }
  size_t frac_digits = 0;
  if (j < n && s[j] == '.') {
    j++;
    while (j < n && is_digit((unsigned char)s[j])) {
      j++;
      frac_digits++;
    }
  }
  if (int_digits == 0 && frac_digits == 0) {
    return SK_STR;
  }
  if (j < n && (s[j] == 'e' || s[j] == 'E')) {
    j++;
    if (j < n && (s[j] == '-' || s[j] == '+')) {
      j++;
    }
    size_t e0 = j;
    while (j < n && is_digit((unsigned char)s[j])) {
      j++;
    }
    if (j == e0) {
      return SK_STR;
    }
  }
  if (j != n) {
    return SK_STR;
  }
  out->f = strtod(s, NULL);
  return SK_FLOAT;
}

// ---------------------------------------------------------------------------------------------
// Loading.

typedef struct LoadBox {
  yaml_parser_t parser;
  yaml_event_t event;
  bool has_parser, has_event;
} LoadBox;

static void loadbox_release(LoadBox *b) {
  if (b->has_event) {
    b->has_event = false;
    yaml_event_delete(&b->event);
  }
  if (b->has_parser) {
    b->has_parser = false;
    yaml_parser_delete(&b->parser);
  }
}

static int loadbox_gc(lua_State *L) {
  loadbox_release(luaL_checkudata(L, 1, LOADER_MT));
  return 0;
}

typedef struct Loader {
  lua_State *L;
  LoadBox *box;
  const unsigned char *src;
  size_t len;
  int max_depth;
  uint64_t max_alias_nodes;
  uint64_t alias_nodes;  // nodes reached through aliases so far (anchor sizes added up)
  int anchors;           // stack index: anchor name -> value
  int sizes;             // stack index: anchor name -> node count, -1 while the node is open
  int seq_null;          // stack index: what null becomes in sequences and as a document
  int map_null;          // stack index of opts.null, or 0: a null value leaves its key out
  int array_mt;          // stack index of the array metatable
  int code;              // TP_EPARSE, TP_ELIMIT or TP_ENOMEM once failed
  bool at_offset;        // the position is `offset` (bytes), else `mark`
  size_t offset;
  yaml_mark_t mark;
  char why[256];
} Loader;

static bool ld_fail(Loader *ld, int code, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool ld_fail(Loader *ld, int code, yaml_mark_t mark, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ld->why, sizeof ld->why, fmt, ap);
  va_end(ap);
  ld->code = code;
  ld->at_offset = false;
  ld->mark = mark;
  return false;
}

static bool ld_fail_at(Loader *ld, size_t offset, const char *why) {
  snprintf(ld->why, sizeof ld->why, "%s", why);
  ld->code = TP_EPARSE;
  ld->at_offset = true;
  ld->offset = offset;
  return false;
}

// Turns libyaml's error record (yaml.h yaml_parser_t: error, problem, problem_offset,
// problem_value, problem_mark, context, context_mark) into ours.
static bool ld_fail_parser(Loader *ld) {
  const yaml_parser_t *p = &ld->box->parser;
  const char *problem = p->problem ? p->problem : "unknown error";
  switch (p->error) {
    case YAML_MEMORY_ERROR:
      return ld_fail(ld, TP_ENOMEM, p->mark, "out of memory");
    case YAML_READER_ERROR:
      ld->code = TP_EPARSE;
      ld->at_offset = true;
      ld->offset = p->problem_offset;
      if (p->problem_value >= 0) {
        snprintf(ld->why, sizeof ld->why, "%s (0x%02X)", problem, (unsigned)p->problem_value);
      } else {
        snprintf(ld->why, sizeof ld->why, "%s", problem);
      }
      return false;
    case YAML_SCANNER_ERROR:
    case YAML_PARSER_ERROR:
      if (p->context) {
        return ld_fail(ld, TP_EPARSE, p->problem_mark, "%s (%s at line %zu, column %zu)", problem,
                       p->context, p->context_mark.line + 1, p->context_mark.column + 1);
      }
      return ld_fail(ld, TP_EPARSE, p->problem_mark, "%s", problem);
    case YAML_NO_ERROR:
    case YAML_COMPOSER_ERROR:
    case YAML_WRITER_ERROR:
    case YAML_EMITTER_ERROR:
      break;
  }
  return ld_fail(ld, TP_EPARSE, p->problem_mark, "%s", problem);
}

static bool ld_next(Loader *ld) {
  LoadBox *b = ld->box;
  if (b->has_event) {
    b->has_event = false;
    yaml_event_delete(&b->event);
  }
  if (!yaml_parser_parse(&b->parser, &b->event)) {
    return ld_fail_parser(ld);
  }
  b->has_event = true;
  return true;
}

static bool is_null_node(lua_State *L, int idx) {
  return lua_touserdata(L, idx) == (void *)&null_node && lua_islightuserdata(L, idx);
}

// Pushes the scalar of the current event: typed by its tag, or by §10.3.2 when plain and
// untagged; quoted and block scalars without a tag are strings.
static bool ld_scalar(Loader *ld) {
  lua_State *L = ld->L;
  const yaml_event_t *ev = &ld->box->event;
  const char *v = (const char *)ev->data.scalar.value;
  size_t n = ev->data.scalar.length;
  const char *tag = (const char *)ev->data.scalar.tag;
  Scalar sc;
  ScalarKind k;
  if (!tag) {
    k = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? resolve_plain(v, n, &sc) : SK_STR;
  } else if (strcmp(tag, "!") == 0 || strcmp(tag, TAG_STR) == 0) {
    k = SK_STR;
  } else {
    k = resolve_plain(v, n, &sc);
    bool fits = (strcmp(tag, TAG_NULL) == 0 && k == SK_NULL) ||
                (strcmp(tag, TAG_BOOL) == 0 && k == SK_BOOL) ||
                (strcmp(tag, TAG_INT) == 0 && (k == SK_INT || k == SK_RANGE)) ||
                (strcmp(tag, TAG_FLOAT) == 0 && (k == SK_FLOAT || k == SK_INT));
    char what[64];
    tpl_snippet(what, sizeof what, v, n, 40);
    if (strcmp(tag, TAG_NULL) != 0 && strcmp(tag, TAG_BOOL) != 0 && strcmp(tag, TAG_INT) != 0 &&
        strcmp(tag, TAG_FLOAT) != 0) {
      char t[64];
      tpl_snippet(t, sizeof t, tag, strlen(tag), 40);
      return ld_fail(ld, TP_EPARSE, ev->start_mark, "unsupported tag '%s'", t);
    }
    if (!fits) {
      return ld_fail(ld, TP_EPARSE, ev->start_mark, "'%s' is not a valid !!%s", what,
                     tag + strlen("tag:yaml.org,2002:"));
    }
    if (strcmp(tag, TAG_FLOAT) == 0 && k == SK_INT) {
      sc.f = (double)sc.i;
      k = SK_FLOAT;
    }
  }
  switch (k) {
    case SK_STR:
      lua_pushlstring(L, v, n);
      return true;
    case SK_NULL:
      lua_pushlightuserdata(L, (void *)&null_node);
      return true;
    case SK_BOOL:
      lua_pushboolean(L, sc.b);
      return true;
    case SK_INT:
      lua_pushinteger(L, sc.i);
      return true;
    case SK_FLOAT:
      lua_pushnumber(L, sc.f);
      return true;
    case SK_RANGE: {
      char what[64];
      tpl_snippet(what, sizeof what, v, n, 40);
      return ld_fail(ld, TP_EPARSE, ev->start_mark, "integer '%s' does not fit in 64 bits", what);
    }
  }
  return false;
}

// Records the anchor named at stack index name_idx for the value at the top, `size` nodes.
static void ld_anchor_set(Loader *ld, int name_idx, lua_Integer size) {
  lua_State *L = ld->L;
  lua_pushvalue(L, name_idx);
  lua_pushvalue(L, -2);
  lua_rawset(L, ld->anchors);
  lua_pushvalue(L, name_idx);
  lua_pushinteger(L, size);
  lua_rawset(L, ld->sizes);
}

static lua_Integer size_to_int(uint64_t n) {
  return n > (uint64_t)LUA_MAXINTEGER ? LUA_MAXINTEGER : (lua_Integer)n;
}

static bool ld_node(Loader *ld, int depth, uint64_t *size);

static bool ld_alias(Loader *ld, uint64_t *size) {
  lua_State *L = ld->L;
  const yaml_event_t *ev = &ld->box->event;
  const char *name = (const char *)ev->data.alias.anchor;
  char what[64];
  tpl_snippet(what, sizeof what, name, strlen(name), 40);
  if (lua_getfield(L, ld->sizes, name) == LUA_TNIL) {
    lua_pop(L, 1);
    return ld_fail(ld, TP_EPARSE, ev->start_mark, "undefined alias *%s", what);
  }
  lua_Integer n = lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (n < 0) {
    return ld_fail(ld, TP_EPARSE, ev->start_mark,
                   "alias *%s refers to a node that contains it (recursive alias)", what);
  }
  ld->alias_nodes = sat_add(ld->alias_nodes, (uint64_t)n);
  if (ld->alias_nodes > ld->max_alias_nodes) {
    return ld_fail(ld, TP_ELIMIT, ev->start_mark,
                   "aliases expand to more than %llu nodes (max_alias_nodes)",
                   (unsigned long long)ld->max_alias_nodes);
  }
  lua_getfield(L, ld->anchors, name);
  *size = (uint64_t)n;
  return true;
}

// Pushes the key at the current event: a scalar resolving to an integer stays an integer, any
// other scalar key is its text (`true:` and `1.5:` give the keys "true" and "1.5").
static bool ld_key(Loader *ld, int depth, uint64_t *size) {
  lua_State *L = ld->L;
  const yaml_event_t *ev = &ld->box->event;
  yaml_mark_t mark = ev->start_mark;
  if (ev->type == YAML_SEQUENCE_START_EVENT || ev->type == YAML_MAPPING_START_EVENT) {
    return ld_fail(ld, TP_EPARSE, mark, "a sequence or mapping as a mapping key is not supported");
  }
  if (!ld_node(ld, depth, size)) {
    return false;
  }
  int t = lua_type(L, -1);
  if (t == LUA_TSTRING || (t == LUA_TNUMBER && lua_isinteger(L, -1))) {
    return true;
  }
  if (ev->type != YAML_SCALAR_EVENT) {
    return ld_fail(ld, TP_EPARSE, mark, "alias *%s used as a key is not a string or an integer",
                   (const char *)ev->data.alias.anchor);
  }
  lua_pop(L, 1);
  lua_pushlstring(L, (const char *)ev->data.scalar.value, ev->data.scalar.length);
  return true;
}

static bool ld_check_tag(Loader *ld, const yaml_char_t *tag, const char *want) {
  if (!tag || strcmp((const char *)tag, "!") == 0 || strcmp((const char *)tag, want) == 0) {
    return true;
  }
  char t[64];
  tpl_snippet(t, sizeof t, (const char *)tag, strlen((const char *)tag), 40);
  return ld_fail(ld, TP_EPARSE, ld->box->event.start_mark, "unsupported tag '%s'", t);
}

// Merges the mapping(s) listed in the table at `merges` into the table at `t`: a key already
// present (explicit, or from an earlier mapping) wins. This is the YAML 1.1 merge key
// (yaml.org/type/merge.html); YAML 1.2 dropped it from the schema but configs rely on it.
static void ld_apply_merges(Loader *ld, int t, int merges) {
  lua_State *L = ld->L;
  lua_Integer n = (lua_Integer)lua_rawlen(L, merges);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, merges, i);  // [src]
    int src = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, src)) {  // [src, k, v]
      lua_pushvalue(L, -2);
      if (lua_rawget(L, t) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);  // [src, k, k, v]
        lua_rawset(L, t);
      } else {
        lua_pop(L, 2);
      }
    }
    lua_pop(L, 1);
  }
}

// Appends the value at the top (the value of a "<<" key) to the merge list at *merges (created
// below the value when absent): a mapping, or a sequence of mappings taken in order.
static bool ld_add_merge(Loader *ld, int *merges, yaml_mark_t mark) {
  lua_State *L = ld->L;
  int v = lua_gettop(L);
  bool seq = false, ok = lua_type(L, v) == LUA_TTABLE;
  if (ok && lua_getmetatable(L, v)) {
    seq = lua_rawequal(L, -1, ld->array_mt);
    lua_pop(L, 1);
  }
  if (!*merges) {
    lua_newtable(L);
    lua_insert(L, v);
    *merges = v;
    v++;
  }
  lua_Integer n = (lua_Integer)lua_rawlen(L, *merges);
  if (ok && !seq) {
    lua_rawseti(L, *merges, n + 1);
    return true;
  }
  lua_Integer m = ok ? (lua_Integer)lua_rawlen(L, v) : 0;
  for (lua_Integer i = 1; ok && i <= m; i++) {
    lua_rawgeti(L, v, i);
    ok = lua_type(L, -1) == LUA_TTABLE;
    if (ok && lua_getmetatable(L, -1)) {
      ok = !lua_rawequal(L, -1, ld->array_mt);
      lua_pop(L, 1);
    }
    if (ok) {
      lua_rawseti(L, *merges, ++n);
    } else {
      lua_pop(L, 1);
    }
  }
  if (!ok) {
    return ld_fail(ld, TP_EPARSE, mark, "merge key '<<' needs a mapping or a sequence of mappings");
  }
  lua_pop(L, 1);
  return true;
}

static bool ld_sequence(Loader *ld, int depth, uint64_t *size) {
  lua_State *L = ld->L;
  const yaml_event_t *ev = &ld->box->event;
  int name_idx = 0;
  if (ev->data.sequence_start.anchor) {
    lua_pushstring(L, (const char *)ev->data.sequence_start.anchor);
    name_idx = lua_gettop(L);
    lua_pushvalue(L, name_idx);
    lua_pushinteger(L, -1);
    lua_rawset(L, ld->sizes);
  }
  lua_newtable(L);  // [name?, t]
  int t = lua_gettop(L);
  uint64_t total = 1;
  lua_Integer i = 0;
  for (;;) {
    if (!ld_next(ld)) {
      return false;
    }
    if (ev->type == YAML_SEQUENCE_END_EVENT) {
      break;
    }
    uint64_t n;
    if (!ld_node(ld, depth + 1, &n)) {
      return false;
    }
    if (is_null_node(L, -1)) {
      lua_pop(L, 1);
      lua_pushvalue(L, ld->seq_null);
    }
    lua_rawseti(L, t, ++i);
    total = sat_add(total, n);
  }
  lua_pushvalue(L, ld->array_mt);
  lua_setmetatable(L, t);
  if (name_idx) {
    ld_anchor_set(ld, name_idx, size_to_int(total));
    lua_remove(L, name_idx);
  }
  *size = total;
  return true;
}

static bool ld_mapping(Loader *ld, int depth, uint64_t *size) {
  lua_State *L = ld->L;
  const yaml_event_t *ev = &ld->box->event;
  int name_idx = 0;
  if (ev->data.mapping_start.anchor) {
    lua_pushstring(L, (const char *)ev->data.mapping_start.anchor);
    name_idx = lua_gettop(L);
    lua_pushvalue(L, name_idx);
    lua_pushinteger(L, -1);
    lua_rawset(L, ld->sizes);
  }
  lua_newtable(L);  // [name?, t]
  int t = lua_gettop(L);
  int merges = 0;
  bool nulls = false;
  uint64_t total = 1;
  for (;;) {
    if (!ld_next(ld)) {
      return false;
    }
    if (ev->type == YAML_MAPPING_END_EVENT) {
      break;
    }
    yaml_mark_t kmark = ev->start_mark;
    uint64_t kn, vn;
    if (ev->type == YAML_SCALAR_EVENT && !ev->data.scalar.tag &&
        ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        eq((const char *)ev->data.scalar.value, ev->data.scalar.length, "<<")) {
      if (!ld_next(ld) || !ld_node(ld, depth + 1, &vn) || !ld_add_merge(ld, &merges, kmark)) {
        return false;
      }
      total = sat_add(total, sat_add(1, vn));
      continue;
    }
    if (!ld_key(ld, depth + 1, &kn)) {  // [name?, t, merges?, k]
      return false;
    }
    lua_pushvalue(L, -1);
    if (lua_rawget(L, t) != LUA_TNIL) {
      char what[64];
      if (lua_type(L, -2) == LUA_TSTRING) {
        size_t kl;
        const char *ks = lua_tolstring(L, -2, &kl);
        tpl_snippet(what, sizeof what, ks, kl, 40);
      } else {
        snprintf(what, sizeof what, "%lld", (long long)lua_tointeger(L, -2));
      }
      return ld_fail(ld, TP_EPARSE, kmark, "duplicate key '%s'", what);
    }
    lua_pop(L, 1);
    if (!ld_next(ld) || !ld_node(ld, depth + 1, &vn)) {
      return false;
    }
    if (is_null_node(L, -1)) {
      if (ld->map_null) {
        lua_pop(L, 1);
        lua_pushvalue(L, ld->map_null);
      } else {
        nulls = true;  // the placeholder stays until the end, so a duplicate is still seen
      }
    }
    lua_rawset(L, t);
    total = sat_add(total, sat_add(kn, vn));
  }
  if (merges) {
    ld_apply_merges(ld, t, merges);
    lua_settop(L, t);
  }
  if (nulls) {
    lua_pushnil(L);
    while (lua_next(L, t)) {
      if (is_null_node(L, -1)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, t);  // clearing a field during traversal is allowed (Lua 5.4 manual, next)
      } else {
        lua_pop(L, 1);
      }
    }
  }
  if (name_idx) {
    ld_anchor_set(ld, name_idx, size_to_int(total));
    lua_remove(L, name_idx);
  }
  *size = total;
  return true;
}

// Pushes the node that starts at the current event; *size is its node count with every alias
// counted as the size of the node it names.
static bool ld_node(Loader *ld, int depth, uint64_t *size) {
  lua_State *L = ld->L;
  const yaml_event_t *ev = &ld->box->event;
  luaL_checkstack(L, 12, "yaml: nesting too deep");
  switch (ev->type) {
    case YAML_ALIAS_EVENT:
      return ld_alias(ld, size);
    case YAML_SCALAR_EVENT: {
      if (!ld_scalar(ld)) {
        return false;
      }
      if (ev->data.scalar.anchor) {
        int v = lua_gettop(L);
        lua_pushstring(L, (const char *)ev->data.scalar.anchor);
        lua_pushvalue(L, v);
        ld_anchor_set(ld, v + 1, 1);
        lua_settop(L, v);
      }
      *size = 1;
      return true;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
      bool seq = ev->type == YAML_SEQUENCE_START_EVENT;
      if (depth >= ld->max_depth) {
        return ld_fail(ld, TP_ELIMIT, ev->start_mark, "nesting deeper than %d levels (max_depth)",
                       ld->max_depth);
      }
      if (!ld_check_tag(ld, seq ? ev->data.sequence_start.tag : ev->data.mapping_start.tag,
                        seq ? TAG_SEQ : TAG_MAP)) {
        return false;
      }
      return seq ? ld_sequence(ld, depth, size) : ld_mapping(ld, depth, size);
    }
    case YAML_NO_EVENT:
    case YAML_STREAM_START_EVENT:
    case YAML_STREAM_END_EVENT:
    case YAML_DOCUMENT_START_EVENT:
    case YAML_DOCUMENT_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      break;
  }
  return ld_fail(ld, TP_EPARSE, ev->start_mark, "unexpected parser event %d", (int)ev->type);
}

// Checks done before libyaml sees the input, for clearer messages than its reader gives (src/
// reader.c: yaml_parser_determine_encoding would switch to UTF-16 on a BOM, and
// yaml_parser_update_buffer reports a NUL as "control characters are not allowed").
static bool ld_precheck(Loader *ld) {
  const unsigned char *s = ld->src;
  if (ld->len >= 2 && ((s[0] == 0xFE && s[1] == 0xFF) || (s[0] == 0xFF && s[1] == 0xFE))) {
    return ld_fail_at(ld, 0, "UTF-16 input is not supported (convert it to UTF-8)");
  }
  const unsigned char *nul = memchr(s, 0, ld->len);
  if (nul) {
    return ld_fail_at(ld, (size_t)(nul - s), "NUL byte");
  }
  return true;
}

static int ld_push_failure(lua_State *L, const Loader *ld, const char *name) {
  size_t line, col;
  if (ld->at_offset) {
    tpl_line_col(ld->src, ld->len, ld->offset, &line, &col);
  } else {
    line = ld->mark.line + 1;
    col = ld->mark.column + 1;
  }
  char msg[512];
  snprintf(msg, sizeof msg, "%s:%zu:%zu: %s", name, line, col, ld->why);
  const char *code = ld->code == TP_ELIMIT ? "ELIMIT" : ld->code == TP_ENOMEM ? "ENOMEM" : "EPARSE";
  return tpl_pushfail(L, code, "%s", msg);
}

// Parses every document of the stream into a list; returns the list, or its first document.
static int yaml_load_impl(lua_State *L, bool all) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  const char *name = tpl_optfield_string(L, 2, "name", "<string>");
  lua_Integer max_depth = tpl_optfield_integer(L, 2, "max_depth", DEFAULT_MAX_DEPTH);
  luaL_argcheck(L, max_depth >= 1 && max_depth <= 100000, 2, "max_depth out of range");
  lua_Integer max_alias = tpl_optfield_integer(L, 2, "max_alias_nodes", DEFAULT_MAX_ALIAS_NODES);
  luaL_argcheck(L, max_alias >= 0, 2, "max_alias_nodes must be >= 0");
  lua_settop(L, 2);
  tpl_push_decode_marks(L, 2);  // [text, opts, sentinel, opts.null, array_mt]
  LoadBox *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->has_parser = box->has_event = false;
  luaL_setmetatable(L, LOADER_MT);
  lua_newtable(L);
  lua_newtable(L);
  lua_newtable(L);  // [text, opts, sentinel, opts.null, array_mt, box, anchors, sizes, docs]

  Loader ld = {.L = L, .box = box, .src = (const unsigned char *)text, .len = len};
  ld.max_depth = (int)max_depth;
  ld.max_alias_nodes = (uint64_t)max_alias;
  ld.map_null = lua_isnil(L, 4) ? 0 : 4;
  ld.seq_null = ld.map_null ? 4 : 3;
  ld.array_mt = 5;
  ld.anchors = 7;
  ld.sizes = 8;
  lua_Integer ndocs = 0;
  bool ok = ld_precheck(&ld);
  if (ok) {
    if (!yaml_parser_initialize(&box->parser)) {
      return luaL_error(L, "yaml: out of memory");
    }
    box->has_parser = true;
    yaml_parser_set_input_string(&box->parser, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&box->parser, YAML_UTF8_ENCODING);
    ok = ld_next(&ld);  // STREAM-START
  }
  while (ok) {
    if (!ld_next(&ld) || box->event.type == YAML_STREAM_END_EVENT) {
      break;
    }
    // DOCUMENT-START: an alias names an anchor earlier in the same document (YAML 1.2.2 §7.1).
    lua_newtable(L);
    lua_replace(L, ld.anchors);
    lua_newtable(L);
    lua_replace(L, ld.sizes);
    uint64_t n;
    ok = ld_next(&ld) && ld_node(&ld, 0, &n);
    if (!ok) {
      break;
    }
    if (is_null_node(L, -1)) {
      lua_pop(L, 1);
      lua_pushvalue(L, ld.seq_null);
    }
    lua_rawseti(L, 9, ++ndocs);
    ok = ld_next(&ld);  // DOCUMENT-END
  }
  loadbox_release(box);
  if (!ok) {
    lua_settop(L, 9);
    return ld_push_failure(L, &ld, name);
  }
  if (all) {
    lua_pushvalue(L, 9);
    return 1;
  }
  if (ndocs == 0) {
    ld_fail_at(&ld, 0, len == 0 ? "empty input" : "no document in the input");
    return ld_push_failure(L, &ld, name);
  }
  lua_rawgeti(L, 9, 1);
  return 1;
}

// yaml.load(text, opts) -> value | nil, err, code
// opts: name (source in messages, default "<string>"), max_depth (default 512),
// max_alias_nodes (default 1e6), null (value for null; absent: a null mapping value leaves its
// key out, a null in a sequence or as a document is the null sentinel).
static int yaml_load(lua_State *L) {
  return yaml_load_impl(L, false);
}

// yaml.load_all(text, opts) -> {document...} | nil, err, code
static int yaml_load_all(lua_State *L) {
  return yaml_load_impl(L, true);
}

// ---------------------------------------------------------------------------------------------
// Dumping.

typedef struct Dumper {
  yaml_emitter_t emitter;
  bool has_emitter;
  TpBuf out;
  bool sort_keys;
  bool nomem;
  int depth;
  int null_idx, array_mt_idx, seen_idx;
  char why[200];
  TplPathElem path[DUMP_MAX_DEPTH + 1];
} Dumper;

static void dumper_release(Dumper *d) {
  if (d->has_emitter) {
    d->has_emitter = false;
    yaml_emitter_delete(&d->emitter);
  }
  tp_buf_free(&d->out);
}

static int dumper_gc(lua_State *L) {
  dumper_release(luaL_checkudata(L, 1, DUMPER_MT));
  return 0;
}

static int dm_write(void *data, unsigned char *buffer, size_t size) {
  Dumper *d = data;
  if (tp_buf_append(&d->out, buffer, size) != 0) {
    d->nomem = true;
    return 0;
  }
  return 1;
}

static bool dm_fail(Dumper *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool dm_fail(Dumper *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->why, sizeof d->why, fmt, ap);
  va_end(ap);
  return false;
}

// Emits an initialized event; yaml.h yaml_emitter_emit: "The event object is destroyed even if
// the function fails".
static bool dm_emit(Dumper *d, yaml_event_t *ev, int init_ok) {
  if (!init_ok) {
    d->nomem = true;
    return dm_fail(d, "out of memory");
  }
  if (!yaml_emitter_emit(&d->emitter, ev)) {
    if (d->nomem || d->emitter.error == YAML_MEMORY_ERROR) {
      d->nomem = true;
      return dm_fail(d, "out of memory");
    }
    return dm_fail(d, "libyaml: %s", d->emitter.problem ? d->emitter.problem : "emitter error");
  }
  return true;
}

static bool dm_scalar(Dumper *d, const char *s, size_t n, yaml_scalar_style_t style) {
  yaml_event_t ev;
  int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, 1, 1, style);
  return dm_emit(d, &ev, ok);
}

// A string any YAML 1.1 reader (PyYAML, for one) would take for another type: its booleans
// (yaml.org/type/bool.html), "=" (yaml.org/type/value.html), timestamps (yaml.org/type/
// timestamp.html: anything starting with YYYY-), and anything made of number characters only
// (ints with '_', 0b binary, sexagesimal 1:30, floats without a dot before the exponent).
static bool yaml11_special(const char *s, size_t n) {
  static const char *const words[] = {"y",  "Y",  "yes", "Yes", "YES", "n",   "N",   "no",
                                      "No", "NO", "on",  "On",  "ON",  "off", "Off", "OFF"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
    if (eq(s, n, words[i])) {
      return true;
    }
  }
  if (eq(s, n, "=")) {
    return true;
  }
  if (n >= 5 && is_digit((unsigned char)s[0]) && is_digit((unsigned char)s[1]) &&
      is_digit((unsigned char)s[2]) && is_digit((unsigned char)s[3]) && s[4] == '-') {
    return true;
  }
  if (n == 0 || !strchr("0123456789+-.", s[0])) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    if (!s[i] || !strchr("0123456789abcdefABCDEFxXoObB_.+-:", s[i])) {
      return false;
    }
  }
  return true;
}

// Emits a string so that it reads back as the same string: single-quoted when it would resolve
// to another type (§10.3.2, or YAML 1.1), literal block style when it has line breaks, else as
// libyaml sees fit: src/emitter.c yaml_emitter_select_scalar_style writes plain when nothing
// forbids it and falls back to quoting (or from a block to double quotes) by itself.
static bool dm_string(Dumper *d, const char *s, size_t n) {
  size_t bad;
  if (!utf8_valid(s, n, &bad)) {
    return dm_fail(d, "string is not valid UTF-8 (byte 0x%02X at offset %zu)",
                   (unsigned char)s[bad], bad);
  }
  if (n > INT32_MAX) {
    return dm_fail(d, "string longer than 2 GiB");
  }
  Scalar sc;
  yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;
  if (resolve_plain(s, n, &sc) != SK_STR || yaml11_special(s, n) || eq(s, n, "<<")) {
    style = YAML_SINGLE_QUOTED_SCALAR_STYLE;
  } else if (memchr(s, '\n', n)) {
    style = YAML_LITERAL_SCALAR_STYLE;
  }
  return dm_scalar(d, s, n, style);
}

// Shortest of %.15g..%.17g that reads back as x, written so that it resolves as a float in YAML
// 1.2 and 1.1 alike: "1.0" rather than "1", "1.0e+20" rather than "1e+20".
static bool dm_float(Dumper *d, double x) {
  if (isnan(x)) {
    return dm_scalar(d, ".nan", 4, YAML_PLAIN_SCALAR_STYLE);
  }
  if (isinf(x)) {
    return x > 0 ? dm_scalar(d, ".inf", 4, YAML_PLAIN_SCALAR_STYLE)
                 : dm_scalar(d, "-.inf", 5, YAML_PLAIN_SCALAR_STYLE);
  }
  char buf[48];
  int n = 0;
  for (int prec = 15; prec <= 17; prec++) {
    n = snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (strtod(buf, NULL) == x) {
      break;
    }
  }
  if (!strchr(buf, '.')) {
    char *e = strpbrk(buf, "eE");
    size_t at = e ? (size_t)(e - buf) : (size_t)n;
    memmove(buf + at + 2, buf + at, (size_t)n - at + 1);
    memcpy(buf + at, ".0", 2);
    n += 2;
  }
  return dm_scalar(d, buf, (size_t)n, YAML_PLAIN_SCALAR_STYLE);
}

typedef struct KeyRef {
  const char *s;  // NULL for an integer key
  size_t n;
  lua_Integer i;
} KeyRef;

// Integer keys first (ascending), then string keys (bytewise).
static int keyref_cmp(const void *a, const void *b) {
  const KeyRef *x = a, *y = b;
  if (!x->s || !y->s) {
    if (!x->s && !y->s) {
      return (x->i > y->i) - (x->i < y->i);
    }
    return x->s ? 1 : -1;
  }
  size_t m = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->s, y->s, m);
  return c != 0 ? c : (x->n > y->n) - (x->n < y->n);
}

static bool dm_value(lua_State *L, Dumper *d, int idx);

// A sequence when the keys are exactly 1..n (or the table is empty and carries the array
// marker); otherwise a mapping, whose keys must be strings or integers.
static bool dm_table(lua_State *L, Dumper *d, int idx) {
  if (d->depth >= DUMP_MAX_DEPTH) {
    return dm_fail(d, "nesting deeper than %d levels", DUMP_MAX_DEPTH);
  }
  luaL_checkstack(L, 8, "yaml.dump: nesting too deep");
  lua_pushvalue(L, idx);
  if (lua_rawget(L, d->seen_idx) != LUA_TNIL) {
    lua_pop(L, 1);
    return dm_fail(d, "table contains itself (cycle)");
  }
  lua_pop(L, 1);
  TplTableShape shape;
  if (!tpl_table_shape(L, idx, d->array_mt_idx, &shape)) {
    return dm_fail(d, "table key of type %s (YAML keys here are strings or integers)",
                   shape.bad_key);
  }
  lua_Integer total = shape.total;
  bool marked = shape.marked, is_seq = shape.is_array;
  if (!is_seq && marked) {
    return dm_fail(d, "table marked as an array has keys other than 1..n");
  }
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, d->seen_idx);
  int depth = ++d->depth;
  TplPathElem *pe = &d->path[depth];
  yaml_event_t ev;
  if (is_seq) {
    if (!dm_emit(
            d, &ev,
            yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE))) {
      return false;
    }
    for (lua_Integer i = 1; i <= total; i++) {
      pe->key = NULL;
      pe->index = i;
      lua_rawgeti(L, idx, i);
      if (!dm_value(L, d, lua_gettop(L))) {
        return false;
      }
      lua_pop(L, 1);
    }
    if (!dm_emit(d, &ev, yaml_sequence_end_event_initialize(&ev))) {
      return false;
    }
  } else {
    KeyRef *keys = lua_newuserdatauv(L, (size_t)total * sizeof *keys + 1, 0);
    int keys_idx = lua_gettop(L);
    size_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      if (lua_isinteger(L, -1)) {
        keys[k].s = NULL;
        keys[k].i = lua_tointeger(L, -1);
      } else {
        keys[k].s = lua_tolstring(L, -1, &keys[k].n);
      }
      k++;
    }
    if (d->sort_keys && total > 1) {
      qsort(keys, (size_t)total, sizeof *keys, keyref_cmp);
    }
    if (!dm_emit(
            d, &ev,
            yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE))) {
      return false;
    }
    for (k = 0; k < (size_t)total; k++) {
      pe->key = keys[k].s;
      pe->key_len = keys[k].n;
      pe->index = keys[k].i;
      if (keys[k].s) {
        if (!dm_string(d, keys[k].s, keys[k].n)) {
          return false;
        }
        lua_pushlstring(L, keys[k].s, keys[k].n);
      } else {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%lld", (long long)keys[k].i);
        if (!dm_scalar(d, buf, (size_t)n, YAML_PLAIN_SCALAR_STYLE)) {
          return false;
        }
        lua_pushinteger(L, keys[k].i);
      }
      lua_rawget(L, idx);
      if (!dm_value(L, d, lua_gettop(L))) {
        return false;
      }
      lua_pop(L, 1);
    }
    lua_settop(L, keys_idx - 1);
    if (!dm_emit(d, &ev, yaml_mapping_end_event_initialize(&ev))) {
      return false;
    }
  }
  d->depth--;
  lua_pushvalue(L, idx);
  lua_pushnil(L);
  lua_rawset(L, d->seen_idx);
  return true;
}

static bool dm_value(lua_State *L, Dumper *d, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return dm_scalar(d, "null", 4, YAML_PLAIN_SCALAR_STYLE);
    case LUA_TBOOLEAN:
      return lua_toboolean(L, idx) ? dm_scalar(d, "true", 4, YAML_PLAIN_SCALAR_STYLE)
                                   : dm_scalar(d, "false", 5, YAML_PLAIN_SCALAR_STYLE);
    case LUA_TNUMBER: {
      if (!lua_isinteger(L, idx)) {
        return dm_float(d, (double)lua_tonumber(L, idx));
      }
      char buf[32];
      int n = snprintf(buf, sizeof buf, "%lld", (long long)lua_tointeger(L, idx));
      return dm_scalar(d, buf, (size_t)n, YAML_PLAIN_SCALAR_STYLE);
    }
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      return dm_string(d, s, n);
    }
    case LUA_TTABLE:
      return dm_table(L, d, idx);
    case LUA_TUSERDATA:
    case LUA_TLIGHTUSERDATA:
      if (lua_rawequal(L, idx, d->null_idx)) {
        return dm_scalar(d, "null", 4, YAML_PLAIN_SCALAR_STYLE);
      }
      return dm_fail(d, "cannot dump a userdata (only tp.json.null)");
    default:
      return dm_fail(d, "cannot dump a %s", luaL_typename(L, idx));
  }
}

// yaml.dump(value, opts) -> text | nil, err, code
// opts: sort_keys (false here; the Lua face defaults it to true), indent (2..9, default 2),
// width (preferred line width; default -1: never fold long lines).
static int yaml_dump(lua_State *L) {
  luaL_checkany(L, 1);
  bool sort_keys = tpl_optfield_boolean(L, 2, "sort_keys", 0);
  lua_Integer indent = tpl_optfield_integer(L, 2, "indent", 2);
  luaL_argcheck(L, indent >= 2 && indent <= 9, 2, "indent out of range (2..9)");
  lua_Integer width = tpl_optfield_integer(L, 2, "width", -1);
  luaL_argcheck(L, width >= -1 && width <= INT32_MAX, 2, "width out of range");
  lua_settop(L, 2);
  tpl_push_null(L);
  tpl_push_array_mt(L);
  lua_newtable(L);  // [value, opts, null, array_mt, seen]
  Dumper *d = lua_newuserdatauv(L, sizeof *d, 0);
  memset(d, 0, sizeof *d);
  luaL_setmetatable(L, DUMPER_MT);  // [value, opts, null, array_mt, seen, dumper]
  d->sort_keys = sort_keys;
  d->null_idx = 3;
  d->array_mt_idx = 4;
  d->seen_idx = 5;
  if (!yaml_emitter_initialize(&d->emitter)) {
    return luaL_error(L, "yaml: out of memory");
  }
  d->has_emitter = true;
  yaml_emitter_set_output(&d->emitter, dm_write, d);
  yaml_emitter_set_unicode(&d->emitter, 1);
  yaml_emitter_set_indent(&d->emitter, (int)indent);
  yaml_emitter_set_width(&d->emitter, (int)width);
  yaml_emitter_set_break(&d->emitter, YAML_LN_BREAK);
  yaml_event_t ev;
  bool ok = dm_emit(d, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING)) &&
            dm_emit(d, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1)) &&
            dm_value(L, d, 1) && dm_emit(d, &ev, yaml_document_end_event_initialize(&ev, 1)) &&
            dm_emit(d, &ev, yaml_stream_end_event_initialize(&ev));
  if (ok && !yaml_emitter_flush(&d->emitter)) {
    d->nomem = true;
    ok = dm_fail(d, "out of memory");
  }
  if (!ok) {
    char where[512];
    tpl_format_path(where, sizeof where, d->path, d->depth);
    lua_settop(L, 6);
    bool nomem = d->nomem;
    char why[sizeof d->why];
    memcpy(why, d->why, sizeof why);
    dumper_release(d);
    return tpl_pushfail(L, nomem ? "ENOMEM" : "EINVAL", "%s: %s", where, why);
  }
  lua_pushlstring(L, d->out.data ? d->out.data : "", d->out.len);
  dumper_release(d);
  return 1;
}

// yaml.resolve(s) -> kind [, value]: how s reads as a plain scalar ("str", "null", "bool", "int",
// "float", or "range" for a base-8/16 integer beyond 64 bits).
static int yaml_resolve(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  Scalar sc;
  switch (resolve_plain(s, n, &sc)) {
    case SK_STR:
      lua_pushstring(L, "str");
      return 1;
    case SK_NULL:
      lua_pushstring(L, "null");
      return 1;
    case SK_BOOL:
      lua_pushstring(L, "bool");
      lua_pushboolean(L, sc.b);
      return 2;
    case SK_INT:
      lua_pushstring(L, "int");
      lua_pushinteger(L, sc.i);
      return 2;
    case SK_FLOAT:
      lua_pushstring(L, "float");
      lua_pushnumber(L, sc.f);
      return 2;
    case SK_RANGE:
      lua_pushstring(L, "range");
      return 1;
  }
  return 0;
}

static const luaL_Reg yaml_funcs[] = {
    {"dump", yaml_dump},       {"load", yaml_load}, {"load_all", yaml_load_all},
    {"resolve", yaml_resolve}, {NULL, NULL},
};

static const luaL_Reg loader_meta[] = {{"__gc", loadbox_gc}, {"__close", loadbox_gc}, {NULL, NULL}};
static const luaL_Reg dumper_meta[] = {{"__gc", dumper_gc}, {"__close", dumper_gc}, {NULL, NULL}};

int luaopen_tp__yaml(lua_State *L);

int luaopen_tp__yaml(lua_State *L) {
  tpl_newclass(L, LOADER_MT, NULL, loader_meta);
  tpl_newclass(L, DUMPER_MT, NULL, dumper_meta);
  luaL_newlib(L, yaml_funcs);
  tpl_set_null_fields(L);
  return 1;
}
