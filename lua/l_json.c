// tp._json: JSON text <-> Lua values. cJSON (DaveGamble/cJSON, Debian's libcjson 1.7.15) parses;
// this file adds what cJSON does not keep (source positions, the text of numbers), strict
// RFC 8259 lexing, duplicate-key and depth checks, and encodes Lua values itself.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fs.h"
#include "jsonscan.h"
#include "jsonw.h"
#include "lutil.h"
#include "store.h"

// Registry field holding the null sentinel, and the names of its metatable and of the metatable
// that marks a table as an array. tp._yaml uses the same names, so both share one sentinel.
#define OWNED_MT   "tp.json.owned"
#define FILES_MT   "tp.json.Files"
#define FILE_MT    "tp.json.File"
#define TREE_MT    "tp.json.tree"
#define ENCODER_MT "tp.json.encoder"

// cJSON recurses once per level and refuses more than CJSON_NESTING_LIMIT levels (cJSON.h; checked
// in cJSON.c parse_array and parse_object; 1000 in 1.7.15): our own limit must stay within it.
#define DEFAULT_MAX_DEPTH 512
#define ENCODE_MAX_DEPTH  1000

// A private value standing for "null member" while an object is being built (see dec_object).
static const char null_member = 0;

// ---------------------------------------------------------------------------------------------
// Small character tests (the null sentinel, array marker, UTF-8 and positions are in lutil.c).

static bool is_digit(unsigned c) {
  return c >= '0' && c <= '9';
}

static bool is_ws(unsigned c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// ---------------------------------------------------------------------------------------------
// Decoding.

// What a decode holds while it runs (freed by __gc if a Lua error cuts it short): cJSON's tree,
// and the member scan of the skipping decoder.
typedef struct JsonTree {
  cJSON *root;
  TpJsonScan scan;
} JsonTree;

static int tree_gc(lua_State *L) {
  JsonTree *t = luaL_checkudata(L, 1, TREE_MT);
  tp_jsonscan_free(&t->scan);
  if (t->root) {
    cJSON *r = t->root;
    t->root = NULL;
    cJSON_Delete(r);
  }
  return 0;
}

typedef struct JsonDec {
  lua_State *L;
  const unsigned char *doc;  // the whole input, for positions
  size_t doc_len;
  const unsigned char *s;  // the input after a UTF-8 byte order mark
  size_t n;
  size_t cur;  // cursor into s, walked alongside cJSON's tree (see dec_next)
  int max_depth;
  int depth_left;  // unclosed brackets at the end of the pre-scan
  int seq_null;    // stack index: what null becomes in arrays and at the top level
  int map_null;    // stack index of opts.null, or 0: a null member is left out
  int array_mt;    // stack index of the array metatable
  int code;        // TP_EPARSE or TP_ELIMIT once failed
  size_t err_off;  // offset into doc
  char why[200];
} JsonDec;

static bool dec_fail(JsonDec *d, int code, size_t off_in_s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool dec_fail(JsonDec *d, int code, size_t off_in_s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->why, sizeof d->why, fmt, ap);
  va_end(ap);
  d->code = code;
  d->err_off = (size_t)(d->s - d->doc) + off_in_s;
  return false;
}

// Checks one string literal starting at the quote s[*pos] (engine/jsonscan.h) and advances *pos
// past it; on failure says why at the offending byte.
static bool scan_string(JsonDec *d, size_t *pos) {
  TpJsonScanError e;
  if (!tp_jsonscan_string(d->s, d->n, pos, &e)) {
    return dec_fail(d, e.code, e.off, "%s", e.why);
  }
  return true;
}

// Lexical pass over the whole input before cJSON sees it: strings (above), NUL and control
// bytes (cJSON.c buffer_skip_whitespace skips every byte <= 32 as if it were a space), UTF-8, and
// the nesting depth (so a 100k-deep input fails here, with a position).
static bool dec_prescan(JsonDec *d) {
  const unsigned char *s = d->s;
  size_t n = d->n, i = 0;
  int depth = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c == '"') {
      if (!scan_string(d, &i)) {
        return false;
      }
    } else if (c == '[' || c == '{') {
      if (++depth > d->max_depth) {
        return dec_fail(d, TP_ELIMIT, i, "nesting deeper than %d levels (max_depth)", d->max_depth);
      }
      i++;
    } else if (c == ']' || c == '}') {
      if (depth > 0) {
        depth--;
      }
      i++;
    } else if (c < 0x20 && !is_ws(c)) {
      if (c == 0) {
        return dec_fail(d, TP_EPARSE, i, "NUL byte");
      }
      return dec_fail(d, TP_EPARSE, i, "unexpected control character U+%04X", c);
    } else if (c >= 0x80) {
      size_t k = tp_utf8_len(s + i, n - i);
      if (k == 0) {
        return dec_fail(d, TP_EPARSE, i, "invalid UTF-8 (byte 0x%02X)", c);
      }
      return dec_fail(d, TP_EPARSE, i, "unexpected character '%.*s'", (int)k, (const char *)s + i);
    } else {
      i++;
    }
  }
  d->depth_left = depth;
  return true;
}

// Describes why cJSON stopped at `off` (it reports only where).
static bool dec_fail_at(JsonDec *d, size_t off, const char *suffix) {
  const unsigned char *s = d->s;
  size_t n = d->n;
  // cJSON steps back onto the last byte when a container runs into the end of the input
  // (cJSON.c buffer_skip_whitespace), so "[1, 2" stops at the '2' with one bracket still open.
  if (off >= n || is_ws(s[off]) || (off + 1 == n && d->depth_left > 0)) {
    size_t end = n;
    while (end > 0 && is_ws(s[end - 1])) {
      end--;
    }
    return dec_fail(d, TP_EPARSE, end, "unexpected end of input%s", suffix);
  }
  // A number that strtod (in cJSON's parse_number) read only in part: "1.5e", "1.2.3" (or, with
  // upstream cJSON 1.7.15, which copies at most 63 bytes before strtod, a longer number).
  if (off > 0 && (is_digit(s[off - 1]) || s[off - 1] == '.') &&
      (is_digit(s[off]) || strchr("+-.eE", s[off]))) {
    size_t b = off, e = off;
    while (b > 0 && (is_digit(s[b - 1]) || strchr("+-.eE", s[b - 1]))) {
      b--;
    }
    while (e < n && (is_digit(s[e]) || strchr("+-.eE", s[e]))) {
      e++;
    }
    char what[64];
    tpl_snippet(what, sizeof what, (const char *)s + b, e - b, 40);
    return dec_fail(d, TP_EPARSE, b, "invalid number '%s'", what);
  }
  size_t k = 1;
  if ((s[off] >= 'a' && s[off] <= 'z') || (s[off] >= 'A' && s[off] <= 'Z') || is_digit(s[off]) ||
      s[off] == '-' || s[off] == '+' || s[off] == '.') {
    while (off + k < n && k < 24 &&
           ((s[off + k] >= 'a' && s[off + k] <= 'z') || (s[off + k] >= 'A' && s[off + k] <= 'Z') ||
            is_digit(s[off + k]) || strchr("+-.", s[off + k]))) {
      k++;
    }
  }
  char what[64];
  tpl_snippet(what, sizeof what, (const char *)s + off, k, 24);
  return dec_fail(d, TP_EPARSE, off, "unexpected '%s'%s", what, suffix);
}

// Moves the cursor to the next token of the (already validated) text and past it, except that
// it stops just inside '[' and '{'. cJSON's tree visited in document order (keys before their
// values) meets its nodes in the same order as these tokens, which gives every node its
// position and every number its text.
static size_t dec_next(JsonDec *d) {
  const unsigned char *s = d->s;
  size_t n = d->n, i = d->cur;
  while (i < n && (is_ws(s[i]) || s[i] == ',' || s[i] == ':' || s[i] == ']' || s[i] == '}')) {
    i++;
  }
  size_t start = i;
  if (i < n) {
    unsigned c = s[i];
    if (c == '"') {
      i++;
      while (i < n && s[i] != '"') {
        i += (s[i] == '\\') ? 2 : 1;
      }
      i++;
    } else if (c == '[' || c == '{') {
      i++;
    } else if (c == 't' || c == 'n') {
      i += 4;
    } else if (c == 'f') {
      i += 5;
    } else {
      while (i < n && (is_digit(s[i]) || s[i] == '-' || s[i] == '+' || s[i] == '.' || s[i] == 'e' ||
                       s[i] == 'E')) {
        i++;
      }
    }
  }
  d->cur = i > n ? n : i;
  return start;
}

// Pushes the number whose text is s[at, end). RFC 8259 §6: number = [ "-" ] int [ frac ] [ exp ],
// int = "0" / digit1-9 *DIGIT (cJSON hands anything strtod takes, "01", "1." or "-.5" included).
// Without frac and exp it is an integer: a Lua integer when it fits in 64 bits, else cJSON's
// double. Everything else is cJSON's double (strtod: correctly rounded).
static bool dec_number(JsonDec *d, const cJSON *it, size_t at, size_t end) {
  const unsigned char *p = d->s + at, *e = d->s + end;
  bool neg = false, integral = true, overflow = false;
  uint64_t acc = 0;
  if (p < e && *p == '-') {
    neg = true;
    p++;
  }
  if (p >= e || !is_digit(*p) || (*p == '0' && p + 1 < e && is_digit(p[1]))) {
    goto bad;
  }
  for (; p < e && is_digit(*p); p++) {
    unsigned dg = *p - '0';
    if (acc > (UINT64_MAX - dg) / 10) {
      overflow = true;
    } else {
      acc = acc * 10 + dg;
    }
  }
  if (p < e && *p == '.') {
    integral = false;
    if (++p >= e || !is_digit(*p)) {
      goto bad;
    }
    while (p < e && is_digit(*p)) {
      p++;
    }
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    integral = false;
    if (++p < e && (*p == '+' || *p == '-')) {
      p++;
    }
    if (p >= e || !is_digit(*p)) {
      goto bad;
    }
    while (p < e && is_digit(*p)) {
      p++;
    }
  }
  if (p != e) {
    goto bad;
  }
  if (integral && !overflow && !neg && acc <= (uint64_t)INT64_MAX) {
    lua_pushinteger(d->L, (lua_Integer)acc);
  } else if (integral && !overflow && neg && acc <= (uint64_t)INT64_MAX + 1) {
    lua_pushinteger(d->L, acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(lua_Integer)acc);
  } else {
    lua_pushnumber(d->L, it->valuedouble);
  }
  return true;
bad : {
  char what[64];
  tpl_snippet(what, sizeof what, (const char *)d->s + at, end - at, 40);
  return dec_fail(d, TP_EPARSE, at, "invalid number '%s'", what);
}
}

static bool dec_value(JsonDec *d, const cJSON *it);

// Number of children, as a size hint for lua_createtable.
static int child_count(const cJSON *it) {
  int n = 0;
  for (const cJSON *c = it->child; c && n < INT32_MAX; c = c->next) {
    n++;
  }
  return n;
}

static bool dec_array(JsonDec *d, const cJSON *it) {
  lua_State *L = d->L;
  luaL_checkstack(L, 4, "json: nesting too deep");
  lua_createtable(L, child_count(it), 0);  // [t]
  lua_Integer i = 0;
  for (const cJSON *c = it->child; c; c = c->next) {
    if (!dec_value(d, c)) {
      return false;
    }
    lua_rawseti(L, -2, ++i);
  }
  lua_pushvalue(L, d->array_mt);
  lua_setmetatable(L, -2);
  return true;
}

// cJSON keeps duplicate members (cJSON.c parse_object appends them all): they are found here. A
// null member is stored as a private placeholder while the object is built (so that a later
// duplicate of it is still seen), then removed unless opts.null gave it a value.
static bool dec_object(JsonDec *d, const cJSON *it) {
  lua_State *L = d->L;
  luaL_checkstack(L, 6, "json: nesting too deep");
  lua_createtable(L, 0, child_count(it));  // [t]
  bool nulls = false;
  for (const cJSON *c = it->child; c; c = c->next) {
    size_t key_at = dec_next(d);
    lua_pushstring(L, c->string);  // [t, k]
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) != LUA_TNIL) {
      char what[64];
      tpl_snippet(what, sizeof what, c->string, strlen(c->string), 40);
      return dec_fail(d, TP_EPARSE, key_at, "duplicate key \"%s\"", what);
    }
    lua_pop(L, 1);
    if ((c->type & 0xFF) == cJSON_NULL) {
      dec_next(d);
      if (d->map_null) {
        lua_pushvalue(L, d->map_null);
      } else {
        lua_pushlightuserdata(L, (void *)&null_member);
        nulls = true;
      }
    } else if (!dec_value(d, c)) {
      return false;
    }
    lua_rawset(L, -3);  // [t]
  }
  if (nulls) {
    for (const cJSON *c = it->child; c; c = c->next) {
      if ((c->type & 0xFF) == cJSON_NULL) {
        lua_pushstring(L, c->string);
        lua_pushnil(L);
        lua_rawset(L, -3);
      }
    }
  }
  return true;
}

static bool dec_value(JsonDec *d, const cJSON *it) {
  lua_State *L = d->L;
  switch (it->type & 0xFF) {
    case cJSON_False:
      dec_next(d);
      lua_pushboolean(L, 0);
      return true;
    case cJSON_True:
      dec_next(d);
      lua_pushboolean(L, 1);
      return true;
    case cJSON_NULL:
      dec_next(d);
      lua_pushvalue(L, d->seq_null);
      return true;
    case cJSON_Number: {
      size_t at = dec_next(d);
      return dec_number(d, it, at, d->cur);
    }
    case cJSON_String:
      dec_next(d);
      lua_pushstring(L, it->valuestring);
      return true;
    case cJSON_Array:
      dec_next(d);
      return dec_array(d, it);
    case cJSON_Object:
      dec_next(d);
      return dec_object(d, it);
    default:
      return dec_fail(d, TP_EPARSE, d->cur, "unexpected JSON node type %d", it->type);
  }
}

// ---------------------------------------------------------------------------------------------
// Skipping members (opts.skip): a top-level object whose named members are checked but not
// converted. Loading thousands of run records only to summarise them spends most of its time
// turning per-iteration arrays into Lua tables that nobody reads; with skip, each such member
// becomes a small "skipped value" table (SKIPPED_MT) saying where its text is and what it holds,
// so that it can be decoded later from text:sub(first, last).
//
// The whole text is still checked, by one pass of engine/jsonscan.h's grammar (RFC 8259 §2-§7:
// structure, number syntax, literals, strings), so a file decoded with skip is accepted exactly
// when it is accepted without, duplicate keys included. Any failure on this path (bad input, a key
// written with escapes, a duplicate key) falls back to the ordinary decode, which then reports the
// problem with its usual message. The scan can come from a file reader's worker thread
// (json.read_files), so that only the conversion is left to the caller.

#define SKIPPED_MT "tp.json.skipped"

// Pushes the table that stands for a skipped array or object: kind, count (of its children),
// kinds (how many children of each kind), first and last (1-based byte positions of its text in
// the input, for string.sub).
static void push_skipped(JsonDec *d, const TpJsonMember *m) {
  lua_State *L = d->L;
  size_t base = (size_t)(d->s - d->doc);
  const TpJsonInfo *info = &m->info;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, tp_json_kind_names[info->kind]);
  lua_setfield(L, -2, "kind");
  lua_pushinteger(L, (lua_Integer)(base + m->at + 1));
  lua_setfield(L, -2, "first");
  lua_pushinteger(L, (lua_Integer)(base + m->end));
  lua_setfield(L, -2, "last");
  lua_pushinteger(L, (lua_Integer)info->count);
  lua_setfield(L, -2, "count");
  lua_createtable(L, 0, 2);
  for (int k = 0; k < TP_JSON_KINDS; k++) {
    if (info->kinds[k]) {
      lua_pushinteger(L, (lua_Integer)info->kinds[k]);
      lua_setfield(L, -2, tp_json_kind_names[k]);
    }
  }
  lua_setfield(L, -2, "kinds");
  luaL_setmetatable(L, SKIPPED_MT);
}

// Builds the top-level object of d->s from its member scan `sc` (tp_jsonscan_object over d->s,
// d->n), leaving the members named in the set at stack index `skip` undecoded when they are arrays
// or objects; the tree userdata `tree` holds each member's cJSON tree while it is converted.
// Pushes the object and returns true, or returns false (the caller then falls back to the
// ordinary decode) with the stack as it found it plus whatever it pushed.
static bool dec_members(JsonDec *d, int skip, JsonTree *tree, const TpJsonScan *sc) {
  lua_State *L = d->L;
  const unsigned char *s = d->s;
  lua_createtable(L, 0, (int)(sc->n < 64 ? sc->n : 64));  // [obj]
  for (size_t k = 0; k < sc->n; k++) {
    const TpJsonMember *m = &sc->members[k];
    lua_pushlstring(L, (const char *)s + m->key_at, m->key_len);  // [obj, key]
    lua_pushvalue(L, -1);
    bool skipped = lua_rawget(L, skip) != LUA_TNIL;
    lua_pop(L, 1);
    if (skipped && (m->info.kind == TP_JSON_ARRAY || m->info.kind == TP_JSON_OBJECT)) {
      push_skipped(d, m);
    } else if (m->info.kind == TP_JSON_NULL) {
      if (!d->map_null) {
        lua_pop(L, 1);  // a null member is left out (keys are unique: nothing to hide it from)
        continue;
      }
      lua_pushvalue(L, d->map_null);
    } else {
      const char *end = NULL;
      tree->root = cJSON_ParseWithLengthOpts((const char *)s + m->at, m->end - m->at, &end, 0);
      if (!tree->root || !end || (const unsigned char *)end != s + m->end) {
        return false;  // cJSON read less than the grammar did (a number of 64+ characters)
      }
      d->cur = m->at;
      bool ok = dec_value(d, tree->root);
      cJSON *r = tree->root;
      tree->root = NULL;
      cJSON_Delete(r);
      if (!ok) {
        return false;
      }
    }
    lua_rawset(L, -3);  // [obj]
  }
  return true;
}

// A member scan made before the decode (by a file reader's worker): valid for the text it was
// made of, with the depth limit it was made with. `scanned` false: the text is not an object the
// scan accepts, so the ordinary decode runs at once.
typedef struct PreScan {
  const TpJsonScan *scan;
  bool scanned;
  int max_depth;
} PreScan;

// The decode behind json.decode and file:decode, on text[0..len) with the options at index 2
// (opts.name, else `name`, names the input in messages).
static int decode(lua_State *L, const char *text, size_t len, const PreScan *pre,
                  const char *name) {
  name = tpl_optfield_string(L, 2, "name", name);
  lua_Integer max_depth = tpl_optfield_integer(L, 2, "max_depth", DEFAULT_MAX_DEPTH);
  luaL_argcheck(L, max_depth >= 1 && max_depth <= CJSON_NESTING_LIMIT, 2,
                "max_depth out of range (1..1000)");
  lua_settop(L, 2);
  tpl_push_decode_marks(L, 2);  // [text, opts, sentinel, opts.null, array_mt]
  JsonTree *tree = lua_newuserdatauv(L, sizeof *tree, 0);
  tree->root = NULL;
  memset(&tree->scan, 0, sizeof tree->scan);
  luaL_setmetatable(L, TREE_MT);  // [text, opts, sentinel, opts.null, array_mt, tree]

  JsonDec d = {
      .L = L, .doc = (const unsigned char *)text, .doc_len = len, .max_depth = (int)max_depth};
  d.map_null = lua_isnil(L, 4) ? 0 : 4;
  d.seq_null = d.map_null ? 4 : 3;
  d.array_mt = 5;
  d.s = d.doc;
  d.n = len;
  if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {  // RFC 8259 §8.1: may be ignored
    d.s += 3;
    d.n -= 3;
  }
  if (lua_istable(L, 2) && lua_getfield(L, 2, "skip") != LUA_TNIL) {  // [..., tree, list]
    luaL_argcheck(L, lua_istable(L, -1), 2, "skip must be a list of member names");
    lua_Integer k = (lua_Integer)lua_rawlen(L, -1);
    lua_createtable(L, 0, (int)(k < 64 ? k : 64));  // [..., tree, list, set]
    for (lua_Integer j = 1; j <= k; j++) {
      if (lua_rawgeti(L, -2, j) != LUA_TSTRING) {
        return luaL_argerror(L, 2, "skip must be a list of member names");
      }
      lua_pushboolean(L, 1);
      lua_rawset(L, -3);
    }
    const TpJsonScan *sc = NULL;
    if (pre && pre->max_depth == (int)max_depth) {
      sc = pre->scanned ? pre->scan : NULL;
    } else {
      int rc = tp_jsonscan_object(&tree->scan, d.s, d.n, (int)max_depth);
      if (rc == TP_ENOMEM) {
        lua_settop(L, 6);
        return tpl_pushfail(L, "ENOMEM", "%s: out of memory", name);
      }
      sc = rc == 1 ? &tree->scan : NULL;
    }
    JsonDec ds = d;
    if (sc && dec_members(&ds, 8, tree, sc)) {
      return 1;
    }
    lua_settop(L, 6);  // anything wrong: the ordinary decode says what
  }
  lua_settop(L, 6);
  bool ok = dec_prescan(&d);
  if (ok) {
    size_t k = 0;
    while (k < d.n && is_ws(d.s[k])) {
      k++;
    }
    if (k == d.n) {
      ok = dec_fail(&d, TP_EPARSE, k, len == 0 ? "empty input" : "unexpected end of input");
    }
  }
  if (ok) {
    const char *end = NULL;
    tree->root = cJSON_ParseWithLengthOpts((const char *)d.s, d.n, &end, 0);
    size_t off = end ? (size_t)((const unsigned char *)end - d.s) : 0;
    if (!tree->root) {
      ok = dec_fail_at(&d, off, "");
    } else {
      while (off < d.n && is_ws(d.s[off])) {
        off++;
      }
      if (off < d.n) {
        ok = dec_fail_at(&d, off, " after the JSON value");
      }
    }
  }
  if (ok) {
    ok = dec_value(&d, tree->root);
  }
  cJSON *root = tree->root;
  tree->root = NULL;
  cJSON_Delete(root);
  if (!ok) {
    lua_settop(L, 6);
    size_t line, col;
    tpl_line_col(d.doc, d.doc_len, d.err_off, &line, &col);
    return tpl_pushfail(L, d.code == TP_ELIMIT ? "ELIMIT" : "EPARSE", "%s:%d:%d: %s", name,
                        (int)(line > INT32_MAX ? INT32_MAX : line),
                        (int)(col > INT32_MAX ? INT32_MAX : col), d.why);
  }
  return 1;
}

// json.decode(text, opts) -> value | nil, err, code
// opts: name (source in messages, default "<string>"), max_depth (1..1000, default 512),
// null (value for null members; absent: members are left out; arrays get it too), skip.
static int json_decode(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  return decode(L, text, len, NULL, "<string>");
}

// ---------------------------------------------------------------------------------------------
// Encoding.

typedef struct JsonEnc {
  TpBuf out;
  bool pretty, sort_keys, allow_nan;
  int indent;
  int depth;
  int null_idx, array_mt_idx, seen_idx, skipped_mt_idx;
  bool nomem;
  char why[160];
  TplPathElem path[ENCODE_MAX_DEPTH + 1];
} JsonEnc;

static int encoder_gc(lua_State *L) {
  JsonEnc *e = luaL_checkudata(L, 1, ENCODER_MT);
  tp_buf_free(&e->out);
  return 0;
}

static bool enc_fail(JsonEnc *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool enc_fail(JsonEnc *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->why, sizeof e->why, fmt, ap);
  va_end(ap);
  return false;
}

static bool enc_put(JsonEnc *e, const void *p, size_t n) {
  if (tp_buf_append(&e->out, p, n) != 0) {
    e->nomem = true;
    return enc_fail(e, "out of memory");
  }
  return true;
}

static bool enc_putc(JsonEnc *e, char c) {
  return enc_put(e, &c, 1);
}

// RFC 8259 §7 escapes and the UTF-8 check (§8.1), by engine/jsonw.c.
static bool enc_string(JsonEnc *e, const char *str, size_t n) {
  size_t bad = 0;
  int rc = tp_jsonw_string(&e->out, str, n, &bad);
  if (rc == TP_EINVAL) {
    return enc_fail(e, "string is not valid UTF-8 (byte 0x%02X at offset %zu)",
                    (unsigned char)str[bad], bad);
  }
  if (rc != 0) {
    e->nomem = true;
    return enc_fail(e, "out of memory");
  }
  return true;
}

static bool enc_newline(JsonEnc *e, int depth) {
  if (!e->pretty) {
    return true;
  }
  if (!enc_putc(e, '\n')) {
    return false;
  }
  size_t n = (size_t)depth * (size_t)e->indent;
  if (tp_buf_reserve(&e->out, n) != 0) {
    e->nomem = true;
    return enc_fail(e, "out of memory");
  }
  memset(e->out.data + e->out.len, ' ', n);
  e->out.len += n;
  return true;
}

typedef struct KeyRef {
  const char *s;
  size_t n;
} KeyRef;

static int keyref_cmp(const void *a, const void *b) {
  const KeyRef *x = a, *y = b;
  size_t m = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->s, y->s, m);
  if (c != 0) {
    return c;
  }
  return (x->n > y->n) - (x->n < y->n);
}

static bool enc_value(lua_State *L, JsonEnc *e, int idx);

// Classifies the table at idx: an array when its keys are exactly 1..n (or it is empty and
// carries the array marker), an object when all keys are strings; anything else is refused.
static bool enc_table(lua_State *L, JsonEnc *e, int idx) {
  if (e->depth >= ENCODE_MAX_DEPTH) {
    return enc_fail(e, "nesting deeper than %d levels", ENCODE_MAX_DEPTH);
  }
  luaL_checkstack(L, 8, "json.encode: nesting too deep");
  lua_pushvalue(L, idx);
  if (lua_rawget(L, e->seen_idx) != LUA_TNIL) {
    lua_pop(L, 1);
    return enc_fail(e, "table contains itself (cycle)");
  }
  lua_pop(L, 1);
  if (lua_getmetatable(L, idx)) {
    bool skipped = lua_rawequal(L, -1, e->skipped_mt_idx);
    lua_pop(L, 1);
    if (skipped) {  // writing it would replace the member's data with its description
      return enc_fail(e, "a member left undecoded by decode{skip} (decode_skipped gives its "
                         "value)");
    }
  }
  TplTableShape shape;
  if (!tpl_table_shape(L, idx, e->array_mt_idx, &shape)) {
    return enc_fail(e, "table key of type %s (JSON keys are strings)", shape.bad_key);
  }
  lua_Integer total = shape.total, nint = shape.nint, nstr = shape.nstr;
  bool marked = shape.marked, is_array = shape.is_array;
  if (!is_array && nint > 0) {
    if (nstr > 0) {
      return enc_fail(e, "table mixes integer and string keys");
    }
    return enc_fail(e, "integer keys are not 1..n (sparse array)");
  }
  if (!is_array && marked) {
    return enc_fail(e, "table marked as an array has string keys");
  }
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, e->seen_idx);
  int depth = ++e->depth;
  TplPathElem *pe = &e->path[depth];
  if (is_array) {
    if (!enc_putc(e, '[')) {
      return false;
    }
    for (lua_Integer i = 1; i <= total; i++) {
      pe->key = NULL;
      pe->index = i;
      if ((i > 1 && !enc_putc(e, ',')) || !enc_newline(e, depth)) {
        return false;
      }
      lua_rawgeti(L, idx, i);
      if (!enc_value(L, e, lua_gettop(L))) {
        return false;
      }
      lua_pop(L, 1);
    }
    if ((total > 0 && !enc_newline(e, depth - 1)) || !enc_putc(e, ']')) {
      return false;
    }
  } else {
    // Keys are collected in a userdata (freed by the collector if anything below raises); their
    // strings stay alive because the table holds them and nothing here runs Lua code.
    KeyRef *keys = lua_newuserdatauv(L, (size_t)total * sizeof *keys + 1, 0);
    int keys_idx = lua_gettop(L);
    size_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      keys[k].s = lua_tolstring(L, -1, &keys[k].n);
      k++;
    }
    if (e->sort_keys && total > 1) {
      qsort(keys, (size_t)total, sizeof *keys, keyref_cmp);
    }
    if (!enc_putc(e, '{')) {
      return false;
    }
    for (k = 0; k < (size_t)total; k++) {
      pe->key = keys[k].s;
      pe->key_len = keys[k].n;
      if ((k > 0 && !enc_putc(e, ',')) || !enc_newline(e, depth) ||
          !enc_string(e, keys[k].s, keys[k].n) || !enc_putc(e, ':') ||
          (e->pretty && !enc_putc(e, ' '))) {
        return false;
      }
      lua_pushlstring(L, keys[k].s, keys[k].n);
      lua_rawget(L, idx);
      if (!enc_value(L, e, lua_gettop(L))) {
        return false;
      }
      lua_pop(L, 1);
    }
    lua_settop(L, keys_idx - 1);
    if ((total > 0 && !enc_newline(e, depth - 1)) || !enc_putc(e, '}')) {
      return false;
    }
  }
  e->depth--;
  lua_pushvalue(L, idx);
  lua_pushnil(L);
  lua_rawset(L, e->seen_idx);
  return true;
}

static bool enc_value(lua_State *L, JsonEnc *e, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return enc_put(e, "null", 4);
    case LUA_TBOOLEAN:
      return lua_toboolean(L, idx) ? enc_put(e, "true", 4) : enc_put(e, "false", 5);
    case LUA_TNUMBER: {
      char buf[64];
      if (lua_isinteger(L, idx)) {
        int n = snprintf(buf, sizeof buf, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
        return enc_put(e, buf, (size_t)n);
      }
      double x = (double)lua_tonumber(L, idx);
      if (!isfinite(x)) {
        if (e->allow_nan) {
          return enc_put(e, "null", 4);
        }
        return enc_fail(e, "%s is not valid JSON (allow_nan = true writes null)",
                        isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf"));
      }
      return enc_put(e, buf, tp_jsonw_float(buf, sizeof buf, x));
    }
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      return enc_string(e, s, n);
    }
    case LUA_TTABLE:
      return enc_table(L, e, idx);
    case LUA_TUSERDATA:
    case LUA_TLIGHTUSERDATA:
      if (lua_rawequal(L, idx, e->null_idx)) {
        return enc_put(e, "null", 4);
      }
      return enc_fail(e, "cannot encode a userdata (only tp.json.null)");
    default:
      return enc_fail(e, "cannot encode a %s", luaL_typename(L, idx));
  }
}

// json.encode(value, opts) -> text | nil, err, code
// opts: pretty (false), indent (2, when pretty), sort_keys (false here; the Lua face defaults it
// to true), allow_nan (false).
static int json_encode(lua_State *L) {
  luaL_checkany(L, 1);
  bool pretty = tpl_optfield_boolean(L, 2, "pretty", 0);
  lua_Integer indent = tpl_optfield_integer(L, 2, "indent", 2);
  luaL_argcheck(L, indent >= 0 && indent <= 16, 2, "indent out of range (0..16)");
  bool sort_keys = tpl_optfield_boolean(L, 2, "sort_keys", 0);
  bool allow_nan = tpl_optfield_boolean(L, 2, "allow_nan", 0);
  lua_settop(L, 2);
  tpl_push_null(L);
  tpl_push_array_mt(L);
  lua_newtable(L);  // [value, opts, null, array_mt, seen]
  JsonEnc *e = lua_newuserdatauv(L, sizeof *e, 0);
  memset(e, 0, sizeof *e);
  luaL_setmetatable(L, ENCODER_MT);  // [value, opts, null, array_mt, seen, encoder]
  e->pretty = pretty;
  e->indent = (int)indent;
  e->sort_keys = sort_keys;
  e->allow_nan = allow_nan;
  e->null_idx = 3;
  e->array_mt_idx = 4;
  e->seen_idx = 5;
  luaL_getmetatable(L, SKIPPED_MT);  // [value, opts, null, array_mt, seen, encoder, skipped_mt]
  e->skipped_mt_idx = 7;
  if (!enc_value(L, e, 1)) {
    char where[512];
    tpl_format_path(where, sizeof where, e->path, e->depth);
    lua_settop(L, 7);
    tp_buf_free(&e->out);
    return tpl_pushfail(L, e->nomem ? "ENOMEM" : "EINVAL", "%s: %s", where, e->why);
  }
  lua_pushlstring(L, e->out.data ? e->out.data : "", e->out.len);
  tp_buf_free(&e->out);
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Files.

// A heap buffer owned by a userdata, so that a Lua error (out of memory) cannot leak it.
typedef struct Owned {
  char *p;
} Owned;

static int owned_gc(lua_State *L) {
  Owned *o = luaL_checkudata(L, 1, OWNED_MT);
  free(o->p);
  o->p = NULL;
  return 0;
}

static Owned *new_owned(lua_State *L) {
  Owned *o = lua_newuserdatauv(L, sizeof *o, 0);
  o->p = NULL;
  luaL_setmetatable(L, OWNED_MT);
  return o;
}

// json.read_file(path, max_size) -> contents [, mtime] | nil, err, code
// Reads a whole regular file or stream (engine/fs.h tp_fs_read_file); more than max_size bytes is
// an ELIMIT failure. A regular file also gives its mtime, as fs.stat does.
static int json_read_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer max = luaL_optinteger(L, 2, LUA_MAXINTEGER);
  luaL_argcheck(L, max >= 0, 2, "max_size must be >= 0");
  lua_settop(L, 2);
  Owned *box = new_owned(L);  // [path, max, box]: frees the buffer if pushing the copy raises
  size_t len;
  TpFsStat st;
  TpError err;
  if (tp_fs_read_file(path, (size_t)max, &box->p, &len, &st, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushlstring(L, box->p, len);
  free(box->p);
  box->p = NULL;
  if (st.type != TP_FS_FILE) {
    return 1;
  }
  lua_pushnumber(L, st.mtime);  // as fs.stat gives it, from the descriptor that was read
  return 2;
}

// json.write_file(path, data) -> true | nil, err, code
// Replaces path atomically (engine/store.h tp_store_write_atomic), mode 0644.
static int json_write_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  size_t n;
  const char *data = luaL_checklstring(L, 2, &n);
  TpError err;
  if (tp_store_write_atomic(path, data, n, 0644, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Files read ahead (engine/jsonscan.h TpJsonFiles).

// A reader. User value 1: the list of paths (for the files' names).
typedef struct Files {
  TpJsonFiles *r;
  lua_Integer next;  // 1-based index of the next file
  int max_depth;
} Files;

// A file handed out. User values: 1 = its path, 2 = its text once asked for.
typedef struct File {
  TpJsonFile *f;  // NULL once closed, or when its record could not be allocated
  TpError err;    // that failure
  int max_depth;  // of the reader's scan
} File;

static Files *check_files(lua_State *L, int idx) {
  Files *fs = luaL_checkudata(L, idx, FILES_MT);
  if (!fs->r) {
    luaL_error(L, "attempt to use a closed file reader");
  }
  return fs;
}

static int files_close(lua_State *L) {
  Files *fs = luaL_checkudata(L, 1, FILES_MT);
  TpJsonFiles *r = fs->r;
  fs->r = NULL;
  tp_jsonfiles_close(r);
  return 0;
}

static int files_tostring(lua_State *L) {
  Files *fs = luaL_checkudata(L, 1, FILES_MT);
  lua_pushstring(L, fs->r ? "tp.json.Files" : "tp.json.Files (closed)");
  return 1;
}

// json.read_files(paths, max_size, max_depth, ahead, threads) -> Files
// max_depth 0: files are read but not scanned.
static int json_read_files(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer max = luaL_checkinteger(L, 2);
  lua_Integer depth = luaL_checkinteger(L, 3);
  lua_Integer ahead = luaL_checkinteger(L, 4);
  lua_Integer threads = luaL_checkinteger(L, 5);
  luaL_argcheck(L, max >= 0, 2, "max_size must be >= 0");
  luaL_argcheck(L, depth >= 0 && depth <= TP_JSONSCAN_MAX_DEPTH, 3, "max_depth out of range");
  luaL_argcheck(L, ahead >= 1 && ahead <= 4096, 4, "ahead out of range (1..4096)");
  luaL_argcheck(L, threads >= 1 && threads <= 256, 5, "threads out of range (1..256)");
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  lua_settop(L, 5);
  // The paths, checked and kept in a box (freed by __gc if anything below raises).
  Owned *box = new_owned(L);  // [paths, max, depth, ahead, threads, box]
  box->p = calloc((size_t)(n > 0 ? n : 1), sizeof(const char *));
  if (!box->p) {
    return luaL_error(L, "not enough memory");
  }
  const char **paths = (const char **)(void *)box->p;
  for (lua_Integer k = 1; k <= n; k++) {
    if (lua_rawgeti(L, 1, k) != LUA_TSTRING) {
      return luaL_argerror(L, 1, lua_pushfstring(L, "paths[%d] is not a string", (int)k));
    }
    paths[k - 1] = lua_tostring(L, -1);  // anchored by the paths table
    lua_pop(L, 1);
  }
  Files *fs = lua_newuserdatauv(L, sizeof *fs, 1);
  fs->r = NULL;
  fs->next = 1;
  fs->max_depth = (int)depth;
  luaL_setmetatable(L, FILES_MT);  // [..., box, files]
  TpError err;
  fs->r = tp_jsonfiles_open(paths, (size_t)n, (size_t)max, (int)depth, (size_t)ahead, (int)threads,
                            &err);
  free(box->p);
  box->p = NULL;
  if (!fs->r) {
    return luaL_error(L, "%s", err.msg);
  }
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  return 1;
}

// files:next() -> File | nil (after the last)
static int files_next(lua_State *L) {
  Files *fs = check_files(L, 1);
  File *file = lua_newuserdatauv(L, sizeof *file, 2);  // first, so that nothing leaks
  file->f = NULL;
  file->err.code = 0;
  file->max_depth = fs->max_depth;
  luaL_setmetatable(L, FILE_MT);  // [files, file]
  TpError err;
  TpJsonFile *f = tp_jsonfiles_next(fs->r, &err);
  if (!f && err.code == 0) {
    return 0;
  }
  file->f = f;
  file->err = err;
  lua_getiuservalue(L, 1, 1);
  lua_rawgeti(L, -1, fs->next++);  // [files, file, paths, path]
  lua_setiuservalue(L, 2, 1);
  lua_pop(L, 1);
  return 1;
}

static File *check_file(lua_State *L, int idx) {
  return luaL_checkudata(L, idx, FILE_MT);
}

// The file's data, or raises when it was closed.
static TpJsonFile *file_data(lua_State *L, File *file) {
  if (!file->f && file->err.code == 0) {
    luaL_error(L, "attempt to use a closed file");
  }
  return file->f;
}

static int file_close(lua_State *L) {
  File *file = check_file(L, 1);
  TpJsonFile *f = file->f;
  file->f = NULL;
  file->err.code = 0;
  tp_jsonfile_free(f);
  return 0;
}

// file:path() -> string
static int file_path(lua_State *L) {
  check_file(L, 1);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

// file:error() -> nil | err, code: why the file could not be read
static int file_error(lua_State *L) {
  File *file = check_file(L, 1);
  TpJsonFile *f = file_data(L, file);
  const TpError *err = f ? &f->err : &file->err;
  if (f && f->text) {
    return 0;
  }
  lua_pushstring(L, err->msg);
  lua_pushstring(L, tp_error_name(err->code));
  return 2;
}

// file:text() -> string | nil (not read): the whole file, made a Lua string once
static int file_text(lua_State *L) {
  File *file = check_file(L, 1);
  TpJsonFile *f = file_data(L, file);
  if (lua_getiuservalue(L, 1, 2) != LUA_TNIL) {
    return 1;
  }
  if (!f || !f->text) {
    return 1;
  }
  lua_pushlstring(L, f->text, f->len);
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, 1, 2);
  return 1;
}

// file:stat() -> {size=, mtime=} | nil (not read): of the descriptor that was read; mtime only for
// a regular file, as fs.stat gives it
static int file_stat(lua_State *L) {
  File *file = check_file(L, 1);
  TpJsonFile *f = file_data(L, file);
  if (!f || !f->text) {
    return 0;
  }
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)f->len);
  lua_setfield(L, -2, "size");
  if (f->st.type == TP_FS_FILE) {
    lua_pushnumber(L, f->st.mtime);
    lua_setfield(L, -2, "mtime");
  }
  return 1;
}

// file:decode(opts) -> value | nil, err, code: json.decode of the file's text (opts.name defaults
// to its path), using the member scan the reader made when opts.skip asks for members
static int file_decode(lua_State *L) {
  File *file = check_file(L, 1);
  TpJsonFile *f = file_data(L, file);
  if (!f || !f->text) {
    return tpl_pusherror(L, f ? &f->err : &file->err);
  }
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
  }
  lua_settop(L, 2);
  PreScan pre = {&f->scan, f->scanned == 1, file->max_depth};
  return decode(L, f->text, f->len, file->max_depth > 0 ? &pre : NULL, f->path);
}

static int file_tostring(lua_State *L) {
  File *file = check_file(L, 1);
  lua_getiuservalue(L, 1, 1);
  lua_pushfstring(L, "tp.json.File (%s)%s", luaL_optstring(L, -1, "?"),
                  file->f || file->err.code ? "" : " closed");
  return 1;
}

static const luaL_Reg json_funcs[] = {
    {"decode", json_decode},         {"encode", json_encode},         {"read_file", json_read_file},
    {"read_files", json_read_files}, {"write_file", json_write_file}, {NULL, NULL},
};

static const luaL_Reg tree_meta[] = {{"__gc", tree_gc}, {"__close", tree_gc}, {NULL, NULL}};
static const luaL_Reg encoder_meta[] = {
    {"__gc", encoder_gc}, {"__close", encoder_gc}, {NULL, NULL}};

int luaopen_tp__json(lua_State *L);

int luaopen_tp__json(lua_State *L) {
  tpl_newclass(L, TREE_MT, NULL, tree_meta);
  tpl_newclass(L, ENCODER_MT, NULL, encoder_meta);
  static const luaL_Reg owned_meta[] = {{"__gc", owned_gc}, {NULL, NULL}};
  tpl_newclass(L, OWNED_MT, NULL, owned_meta);
  static const luaL_Reg files_methods[] = {
      {"close", files_close}, {"next", files_next}, {NULL, NULL}};
  static const luaL_Reg files_meta[] = {{"__gc", files_close},
                                        {"__close", files_close},
                                        {"__tostring", files_tostring},
                                        {NULL, NULL}};
  tpl_newclass(L, FILES_MT, files_methods, files_meta);
  static const luaL_Reg file_methods[] = {
      {"close", file_close}, {"decode", file_decode}, {"error", file_error}, {"path", file_path},
      {"stat", file_stat},   {"text", file_text},     {NULL, NULL}};
  static const luaL_Reg file_meta[] = {
      {"__gc", file_close}, {"__close", file_close}, {"__tostring", file_tostring}, {NULL, NULL}};
  tpl_newclass(L, FILE_MT, file_methods, file_meta);
  luaL_newmetatable(L, SKIPPED_MT);  // sets __name
  lua_pop(L, 1);
  luaL_newlib(L, json_funcs);
  luaL_getmetatable(L, SKIPPED_MT);
  lua_setfield(L, -2, "skipped_mt");
  luaL_getmetatable(L, FILE_MT);  // tp.json checks file:decode's options as decode's
  lua_setfield(L, -2, "file_mt");
  tpl_set_null_fields(L);
  return 1;
}
