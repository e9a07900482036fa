// Validating JSON scans (RFC 8259 §2-§8) and a reader that reads and scans files on worker threads
// (POSIX threads: pthread_create, pthread_cond_wait; POSIX.1-2017 <pthread.h>).
#include "jsonscan.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const tp_json_kind_names[TP_JSON_KINDS] = {"null",   "boolean", "number",
                                                       "string", "array",   "object"};

static bool is_digit(unsigned c) {
  return c >= '0' && c <= '9';
}

// --- Runs of bytes ------------------------------------------------------------------------------
//
// Word-at-a-time scans (eight bytes per step) for the runs that make up most of a pretty record:
// the plain bytes of a string, the indentation and the digits of numbers. The byte tests are the
// classic "has a zero byte" / "has a byte less than n" expressions (Sean Eron Anderson, Bit
// Twiddling Hacks, "Determine if a word has a byte less than n"): the lowest flagged byte is
// always a true one, so on a little-endian machine the count of trailing zero bits, / 8, is the
// offset of the first byte that ends the run. Elsewhere the scans go byte by byte.
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR_SCAN 1
#define ONES      0x0101010101010101u
#define HIGHS     0x8080808080808080u

static inline uint64_t load8(const unsigned char *p) {
  uint64_t w;
  memcpy(&w, p, 8);
  return w;
}

// High bit set in each byte of w that is zero (and possibly in bytes after one).
static inline uint64_t zero_bytes(uint64_t w) {
  return (w - ONES) & ~w & HIGHS;
}
#endif

// Offset of the first byte at or after s[i] that is not plain string content: '"', '\\', a
// control character (< 0x20) or a byte >= 0x80 (UTF-8, checked by the caller).
static inline size_t plain_run(const unsigned char *s, size_t n, size_t i) {
#ifdef SWAR_SCAN
  while (i + 8 <= n) {
    uint64_t w = load8(s + i);
    uint64_t stop = (w & HIGHS) | ((w - 0x20 * ONES) & ~w & HIGHS) | zero_bytes(w ^ (0x22 * ONES)) |
                    zero_bytes(w ^ (0x5C * ONES));
    if (stop) {
      return i + ((size_t)__builtin_ctzll(stop) >> 3);
    }
    i += 8;
  }
#endif
  while (i < n && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\') {
    i++;
  }
  return i;
}

// Offset of the first byte at or after s[i] that is not an ASCII digit.
static inline size_t digit_run(const unsigned char *s, size_t n, size_t i) {
#ifdef SWAR_SCAN
  while (i + 8 <= n) {
    uint64_t w = load8(s + i);
    // A byte is a digit when its high nibble is 3 and adding 6 keeps it there ('0'..'9').
    uint64_t bad = ((w & (0xF0 * ONES)) ^ (0x30 * ONES)) |
                   (((w + 0x06 * ONES) & (0xF0 * ONES)) ^ (0x30 * ONES));
    if (bad) {
      return i + ((size_t)__builtin_ctzll(bad) >> 3);
    }
    i += 8;
  }
#endif
  while (i < n && is_digit(s[i])) {
    i++;
  }
  return i;
}

// Offset of the first byte at or after s[i] that is not JSON whitespace (RFC 8259 §2).
static size_t ws_run(const unsigned char *s, size_t n, size_t i) {
  while (i < n) {
    unsigned c = s[i];
    if (c > ' ') {
      break;  // the usual end of a run: one comparison
    }
    if (c == ' ') {
#ifdef SWAR_SCAN
      if (i + 8 <= n) {  // a run of spaces (indentation) in one step
        uint64_t other = load8(s + i) ^ (0x20 * ONES);
        i += other ? (size_t)__builtin_ctzll(other) >> 3 : 8;
        continue;
      }
#endif
      i++;
    } else if (c == '\n' || c == '\t' || c == '\r') {
      i++;
    } else {
      break;
    }
  }
  return i;
}

// --- Strings -----------------------------------------------------------------------------------

static bool fail(TpJsonScanError *e, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(TpJsonScanError *e, size_t off, const char *fmt, ...) {
  if (e) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
    e->code = TP_EPARSE;
    e->off = off;
  }
  return false;
}

static bool hex4(const unsigned char *s, size_t n, size_t i, unsigned *out) {
  if (i + 4 > n) {
    return false;
  }
  unsigned v = 0;
  for (size_t k = i; k < i + 4; k++) {
    unsigned c = s[k], h;
    if (c >= '0' && c <= '9') {
      h = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      h = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      h = c - 'A' + 10;
    } else {
      return false;
    }
    v = v * 16 + h;
  }
  *out = v;
  return true;
}

// cJSON.c parse_string copies control bytes as they are, and a bad hex digit (parse_hex4 returns
// 0) or \u0000 becomes a NUL byte (utf16_literal_to_utf8) that silently cuts the C string it
// returns: all of it is checked here.
bool tp_jsonscan_string(const unsigned char *s, size_t n, size_t *pos, TpJsonScanError *e) {
  size_t start = *pos, i = start + 1;
  for (;;) {
    if (i >= n) {
      return fail(e, start, "unterminated string");
    }
    unsigned c = s[i];
    if (c == '"') {
      *pos = i + 1;
      return true;
    }
    if (c == '\\') {
      if (i + 1 >= n) {
        return fail(e, start, "unterminated string");
      }
      unsigned x = s[i + 1];
      if (x == 'u') {
        unsigned cp, lo;
        if (!hex4(s, n, i + 2, &cp)) {
          return fail(e, i, "invalid \\u escape (four hex digits expected)");
        }
        if (cp == 0) {
          return fail(e, i, "\\u0000 (NUL) in a string is not supported");
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return fail(e, i, "unpaired UTF-16 surrogate \\u%04X", cp);
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (i + 7 >= n || s[i + 6] != '\\' || s[i + 7] != 'u' || !hex4(s, n, i + 8, &lo) ||
              lo < 0xDC00 || lo > 0xDFFF) {
            return fail(e, i, "unpaired UTF-16 surrogate \\u%04X", cp);
          }
          i += 12;
        } else {
          i += 6;
        }
        continue;
      }
      if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' || x == 'r' ||
          x == 't') {
        i += 2;
        continue;
      }
      if (x >= 0x21 && x < 0x7F) {
        return fail(e, i, "invalid escape '\\%c'", (int)x);
      }
      return fail(e, i, "invalid escape (byte 0x%02X after '\\')", x);
    }
    if (c < 0x20) {
      if (c == 0) {
        return fail(e, i, "NUL byte in a string");
      }
      return fail(e, i, "unescaped control character U+%04X in a string", c);
    }
    if (c < 0x80) {
      i = plain_run(s, n, i + 1);  // the common case: printable ASCII but '"' and '\\'
      continue;
    }
    size_t k = tp_utf8_len(s + i, n - i);
    if (k == 0) {
      return fail(e, i, "invalid UTF-8 (byte 0x%02X)", c);
    }
    i += k;
  }
}

// tp_jsonscan_string with a shortcut for the common string: printable ASCII without escapes.
static inline bool scan_string(const unsigned char *s, size_t n, size_t *pos) {
  size_t j = plain_run(s, n, *pos + 1);
  if (j < n && s[j] == '"') {
    *pos = j + 1;
    return true;
  }
  return tp_jsonscan_string(s, n, pos, NULL);
}

// Checks the number starting at s[i] (RFC 8259 §6) and returns the offset after it, or 0.
static size_t scan_number(const unsigned char *s, size_t n, size_t i) {
  if (i < n && s[i] == '-') {
    i++;
  }
  if (i >= n || !is_digit(s[i])) {
    return 0;
  }
  i = s[i] == '0' ? i + 1 : digit_run(s, n, i);
  if (i < n && s[i] == '.') {
    i++;
    if (i >= n || !is_digit(s[i])) {
      return 0;
    }
    i = digit_run(s, n, i);
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) {
      i++;
    }
    if (i >= n || !is_digit(s[i])) {
      return 0;
    }
    i = digit_run(s, n, i);
  }
  return i;
}

// --- Keys --------------------------------------------------------------------------------------

// A key: its raw text (between its quotes) and a hash of it.
typedef struct KeyEnt {
  uint64_t hash;
  size_t at, len;
} KeyEnt;

// The keys of the objects open in a value (ents, n, cap: the scan's scratch); start[k] is where
// the keys of the object open at depth k begin.
typedef struct Keys {
  KeyEnt *ents;
  size_t n, cap;
  size_t start[TP_JSONSCAN_MAX_DEPTH + 1];
} Keys;

static bool same_key(const unsigned char *s, const KeyEnt *x, const KeyEnt *y) {
  return x->hash == y->hash && x->len == y->len && memcmp(s + x->at, s + y->at, x->len) == 0;
}

// True when the k keys at e are all different: compared in pairs when there are few, else through
// an open-addressing table of their indices. False also when memory runs out, or when keys made to
// collide would make the check quadratic (past a linear number of probes): the caller's ordinary
// decode then decides.
static bool keys_unique(const unsigned char *s, const KeyEnt *e, size_t k) {
  if (k <= 8) {
    for (size_t a = 1; a < k; a++) {
      for (size_t b = 0; b < a; b++) {
        if (same_key(s, &e[a], &e[b])) {
          return false;
        }
      }
    }
    return true;
  }
  uint32_t local[256];
  size_t cap = 32;
  while (cap < 2 * k) {
    cap *= 2;
  }
  uint32_t *slot = cap <= 256 ? local : malloc(cap * sizeof *slot);
  if (!slot) {
    return false;
  }
  memset(slot, 0xFF, cap * sizeof *slot);  // UINT32_MAX: empty (k < 2^32: the input is < 1 GiB)
  bool ok = true;
  size_t probes = 0, budget = 8 * k + 64;
  for (size_t a = 0; a < k && ok; a++) {
    size_t h = (size_t)e[a].hash & (cap - 1);
    while (slot[h] != UINT32_MAX) {
      if (same_key(s, &e[slot[h]], &e[a]) || ++probes > budget) {
        ok = false;
        break;
      }
      h = (h + 1) & (cap - 1);
    }
    slot[h] = (uint32_t)a;
  }
  if (slot != local) {
    free(slot);
  }
  return ok;
}

// A hash of the key text p[0, len), eight bytes at a time.
static uint64_t key_hash(const unsigned char *p, size_t len) {
  uint64_t h = (uint64_t)len * 0x9E3779B97F4A7C15u, w;
  size_t k = 0;
  for (; k + 8 <= len; k += 8) {
    memcpy(&w, p + k, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDu;
    h ^= h >> 29;
  }
  if (k < len && len >= 8) {  // the last 1..7 bytes: the eight that end the key (overlapping)
    memcpy(&w, p + len - 8, 8);
  } else {
    for (w = 0; k < len; k++) {  // a key shorter than 8 bytes, one by one
      w = w << 8 | p[k];
    }
  }
  h = (h ^ w) * 0xC4CEB9FE1A85EC53u;
  return h ^ (h >> 32);
}

// Records the key whose text (between its quotes) is s[at, at + len); false when out of memory.
static bool add_key(Keys *keys, const unsigned char *s, size_t at, size_t len) {
  if (keys->n == keys->cap) {
    size_t cap = keys->cap ? keys->cap * 2 : 64;
    KeyEnt *e = realloc(keys->ents, cap * sizeof *e);
    if (!e) {
      return false;
    }
    keys->ents = e;
    keys->cap = cap;
  }
  keys->ents[keys->n++] = (KeyEnt){key_hash(s + at, len), at, len};
  return true;
}

// --- Values ------------------------------------------------------------------------------------

// Checks one JSON value starting at s[*pos] (no leading whitespace), a member of the top-level
// object (so its containers start at level 2), and moves *pos past it; fills *info with its kind
// and the kinds of its children. Iterative: the open containers are kept in `open`.
static bool scan_value(const unsigned char *s, size_t n, int max_depth, size_t *pos,
                       TpJsonInfo *info, Keys *keys) {
  size_t i = *pos;
  char open[TP_JSONSCAN_MAX_DEPTH + 1];
  int depth = 0;
  memset(info, 0, sizeof *info);
  keys->n = 0;
  for (;;) {
    // A value at s[i].
    if (i >= n) {
      return false;
    }
    unsigned c = s[i];
    TpJsonKind kind;
    if (c == '{' || c == '[') {
      kind = c == '{' ? TP_JSON_OBJECT : TP_JSON_ARRAY;
    } else if (c == '"') {
      kind = TP_JSON_STRING;
    } else if (c == 't' || c == 'f') {
      kind = TP_JSON_BOOLEAN;
    } else if (c == 'n') {
      kind = TP_JSON_NULL;
    } else {
      kind = TP_JSON_NUMBER;
    }
    if (depth == 0) {
      info->kind = kind;
    } else if (depth == 1) {
      info->count++;
      info->kinds[kind]++;
    }
    bool closed = true;  // false: a container was opened, its first child comes next
    switch (kind) {
      case TP_JSON_OBJECT:
      case TP_JSON_ARRAY:
        if (depth + 2 > max_depth) {  // the top-level object is level 1, this member 2
          return false;
        }
        keys->start[depth] = keys->n;
        open[depth++] = (char)c;
        i = ws_run(s, n, i + 1);
        if (i < n && s[i] == (kind == TP_JSON_OBJECT ? '}' : ']')) {
          i++;
          depth--;
        } else {
          closed = false;
        }
        break;
      case TP_JSON_STRING:
        if (!scan_string(s, n, &i)) {
          return false;
        }
        break;
      case TP_JSON_BOOLEAN:
      case TP_JSON_NULL: {
        // The three literals (RFC 8259 §3), compared four bytes at once ("fals" then 'e').
        const char *lit = c == 't' ? "true" : c == 'f' ? "fals" : "null";
        size_t k = c == 'f' ? 5 : 4;
        uint32_t want, got;
        memcpy(&want, lit, 4);
        if (n - i < k) {
          return false;
        }
        memcpy(&got, s + i, 4);
        if (got != want || (k == 5 && s[i + 4] != 'e')) {
          return false;
        }
        i += k;
        break;
      }
      case TP_JSON_NUMBER:
      case TP_JSON_KINDS:
        i = scan_number(s, n, i);
        if (i == 0) {
          return false;
        }
        break;
    }
    if (!closed && open[depth - 1] == '[') {
      continue;  // the array's first element
    }
    // After a value (or inside a new object, before its first key): close what ends here.
    for (;;) {
      if (!closed) {
        break;  // a new object: its first key follows
      }
      if (depth == 0) {
        *pos = i;
        return true;
      }
      i = ws_run(s, n, i);
      if (i >= n) {
        return false;
      }
      char top = open[depth - 1];
      if (s[i] == (top == '{' ? '}' : ']')) {
        i++;
        depth--;
        if (top == '{') {
          size_t first = keys->start[depth];
          if (!keys_unique(s, keys->ents + first, keys->n - first)) {
            return false;  // a duplicate key
          }
          keys->n = first;
        }
        continue;
      }
      if (s[i] != ',') {
        return false;
      }
      i = ws_run(s, n, i + 1);
      closed = top != '{';
      break;
    }
    if (!closed) {
      // A key and its colon. A key with escapes (two spellings of one key would compare unequal
      // here) or anything but printable ASCII is left to the caller's ordinary decode.
      size_t key_at = i++;
      if (key_at >= n || s[key_at] != '"') {
        return false;
      }
      i = plain_run(s, n, i);
      if (i >= n || s[i] != '"' || !add_key(keys, s, key_at + 1, i - key_at - 1)) {
        return false;
      }
      i = ws_run(s, n, i + 1);
      if (i >= n || s[i] != ':') {
        return false;
      }
      i++;
    }
    i = ws_run(s, n, i);
  }
}

// Appends a member to sc; false when out of memory.
static bool add_member(TpJsonScan *sc, const TpJsonMember *m) {
  if (sc->n == sc->cap) {
    size_t cap = sc->cap ? sc->cap * 2 : 32;
    TpJsonMember *p = realloc(sc->members, cap * sizeof *p);
    if (!p) {
      return false;
    }
    sc->members = p;
    sc->cap = cap;
  }
  sc->members[sc->n++] = *m;
  return true;
}

int tp_jsonscan_object(TpJsonScan *sc, const unsigned char *s, size_t n, int max_depth) {
  sc->n = 0;
  if (max_depth < 1 || max_depth > TP_JSONSCAN_MAX_DEPTH) {
    return 0;
  }
  Keys *keys = malloc(sizeof *keys);
  if (!keys) {
    return TP_ENOMEM;
  }
  keys->ents = sc->keys;
  keys->cap = sc->keys_cap;
  keys->n = 0;
  int rc = 0;
  bool nomem = false;
  size_t i = ws_run(s, n, 0);
  if (i >= n || s[i] != '{') {
    goto done;
  }
  i = ws_run(s, n, i + 1);
  if (i < n && s[i] == '}') {
    i++;
  } else {
    for (;;) {
      TpJsonMember m;
      size_t key_at = i;
      if (i >= n || s[i] != '"' || !tp_jsonscan_string(s, n, &i, NULL)) {
        goto done;
      }
      m.key_at = key_at + 1;
      m.key_len = i - key_at - 2;
      if (memchr(s + m.key_at, '\\', m.key_len)) {
        goto done;  // escaped keys: left to the ordinary decode
      }
      i = ws_run(s, n, i);
      if (i >= n || s[i] != ':') {
        goto done;
      }
      i = ws_run(s, n, i + 1);
      m.at = i;
      if (!scan_value(s, n, max_depth, &i, &m.info, keys)) {
        goto done;
      }
      m.end = i;
      if (!add_member(sc, &m)) {
        nomem = true;
        goto done;
      }
      i = ws_run(s, n, i);
      if (i < n && s[i] == ',') {
        i = ws_run(s, n, i + 1);
        continue;
      }
      if (i < n && s[i] == '}') {
        i++;
        break;
      }
      goto done;
    }
  }
  if (ws_run(s, n, i) != n) {
    goto done;
  }
  // The top-level keys, checked as the nested ones were.
  keys->n = 0;
  for (size_t k = 0; k < sc->n; k++) {
    if (!add_key(keys, s, sc->members[k].key_at, sc->members[k].key_len)) {
      nomem = true;
      goto done;
    }
  }
  rc = keys_unique(s, keys->ents, keys->n) ? 1 : 0;
done:
  sc->keys = keys->ents;  // add_key may have grown it
  sc->keys_cap = keys->cap;
  free(keys);
  if (nomem) {
    rc = TP_ENOMEM;
  }
  if (rc != 1) {
    sc->n = 0;
  }
  return rc;
}

void tp_jsonscan_free(TpJsonScan *sc) {
  free(sc->members);
  free(sc->keys);
  memset(sc, 0, sizeof *sc);
}

// --- Files read ahead ----------------------------------------------------------------------------

void tp_jsonfile_free(TpJsonFile *f) {
  if (!f) {
    return;
  }
  free(f->path);
  free(f->text);
  tp_jsonscan_free(&f->scan);
  free(f);
}

struct TpJsonFiles {
  char **paths;
  size_t n;
  size_t max_size;
  int max_depth;
  size_t ahead;       // ring size
  TpJsonFile **ring;  // ring[k % ahead]: file k once read, NULL before
  size_t next_claim;  // the next file a worker takes
  size_t next_out;    // the next file the caller gets
  pthread_t *threads;
  int nthreads;  // started
  pthread_mutex_t mu;
  pthread_cond_t work;  // a ring slot came free, or stop
  pthread_cond_t done;  // a file was read
  bool stop;
  TpJsonFile oom;  // its address in the ring: the file could not even be allocated
};

// Reads and scans file k (never NULL: failures are in the file's err).
static TpJsonFile *read_one(const TpJsonFiles *r, size_t k) {
  TpJsonFile *f = calloc(1, sizeof *f);
  if (!f) {
    return NULL;
  }
  f->path = strdup(r->paths[k]);
  if (!f->path) {
    free(f);
    return NULL;
  }
  if (tp_fs_read_file(f->path, r->max_size, &f->text, &f->len, &f->st, &f->err) != 0) {
    return f;
  }
  const unsigned char *s = (const unsigned char *)f->text;
  if (f->len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {  // RFC 8259 §8.1: may be ignored
    f->skip = 3;
  }
  if (r->max_depth > 0) {
    int rc = tp_jsonscan_object(&f->scan, s + f->skip, f->len - f->skip, r->max_depth);
    f->scanned = rc == 1;  // out of memory: not scanned, the caller decodes it the ordinary way
  }
  return f;
}

static void *worker_main(void *arg) {
  TpJsonFiles *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (!r->stop && r->next_claim < r->n && r->next_claim >= r->next_out + r->ahead) {
      pthread_cond_wait(&r->work, &r->mu);
    }
    if (r->stop || r->next_claim >= r->n) {
      break;
    }
    size_t k = r->next_claim++;
    pthread_mutex_unlock(&r->mu);
    TpJsonFile *f = read_one(r, k);
    pthread_mutex_lock(&r->mu);
    r->ring[k % r->ahead] = f ? f : &r->oom;  // a marker, not a hole the caller would wait on
    pthread_cond_broadcast(&r->done);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

TpJsonFiles *tp_jsonfiles_open(const char *const *paths, size_t n, size_t max_size, int max_depth,
                               size_t ahead, int threads, TpError *err) {
  if (threads < 1) {
    threads = 1;
  }
  if (ahead < (size_t)threads) {
    ahead = (size_t)threads;
  }
  TpJsonFiles *r = calloc(1, sizeof *r);
  if (!r || !(r->paths = calloc(n ? n : 1, sizeof *r->paths)) ||
      !(r->ring = calloc(ahead, sizeof *r->ring)) ||
      !(r->threads = calloc((size_t)threads, sizeof *r->threads))) {
    goto nomem;
  }
  for (size_t k = 0; k < n; k++) {
    if (!(r->paths[k] = strdup(paths[k]))) {
      goto nomem;
    }
  }
  r->n = n;
  r->max_size = max_size;
  r->max_depth = max_depth;
  r->ahead = ahead;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->work, NULL);
  pthread_cond_init(&r->done, NULL);
  for (int t = 0; t < threads && (size_t)t < n; t++) {
    if (pthread_create(&r->threads[t], NULL, worker_main, r) != 0) {
      break;  // fewer workers; with none, tp_jsonfiles_next reads each file itself
    }
    r->nthreads++;
  }
  return r;
nomem:
  if (r) {
    for (size_t k = 0; r->paths && k < n; k++) {
      free(r->paths[k]);
    }
    free(r->paths);
    free(r->ring);
    free(r->threads);
    free(r);
  }
  tp_error_set(err, TP_ENOMEM, "json files: out of memory");
  return NULL;
}

// Joins the workers (after setting stop when `stop`).
static void join_workers(TpJsonFiles *r, bool stop) {
  if (r->nthreads == 0) {
    return;
  }
  pthread_mutex_lock(&r->mu);
  r->stop = r->stop || stop;
  pthread_cond_broadcast(&r->work);
  pthread_mutex_unlock(&r->mu);
  for (int t = 0; t < r->nthreads; t++) {
    pthread_join(r->threads[t], NULL);
  }
  r->nthreads = 0;
}

TpJsonFile *tp_jsonfiles_next(TpJsonFiles *r, TpError *err) {
  tp_error_set(err, 0, "%s", "");
  if (r->next_out >= r->n) {
    join_workers(r, false);  // they have all ended: nothing left to claim
    return NULL;
  }
  size_t k = r->next_out;
  if (r->nthreads == 0) {
    r->next_out++;
    r->next_claim = r->next_out;
    TpJsonFile *f = read_one(r, k);
    if (!f) {
      tp_error_set(err, TP_ENOMEM, "%s: out of memory", r->paths[k]);
    }
    return f;
  }
  pthread_mutex_lock(&r->mu);
  while (r->ring[k % r->ahead] == NULL) {
    pthread_cond_wait(&r->done, &r->mu);
  }
  TpJsonFile *f = r->ring[k % r->ahead];
  r->ring[k % r->ahead] = NULL;
  r->next_out++;
  pthread_cond_broadcast(&r->work);
  pthread_mutex_unlock(&r->mu);
  if (r->next_out >= r->n) {
    join_workers(r, false);
  }
  if (f == &r->oom) {
    tp_error_set(err, TP_ENOMEM, "%s: out of memory", r->paths[k]);
    return NULL;
  }
  return f;
}

void tp_jsonfiles_close(TpJsonFiles *r) {
  if (!r) {
    return;
  }
  join_workers(r, true);
  for (size_t k = 0; k < r->ahead; k++) {
    if (r->ring[k] != &r->oom) {
      tp_jsonfile_free(r->ring[k]);
    }
  }
  for (size_t k = 0; k < r->n; k++) {
    free(r->paths[k]);
  }
  pthread_cond_destroy(&r->done);
  pthread_cond_destroy(&r->work);
  pthread_mutex_destroy(&r->mu);
  free(r->paths);
  free(r->ring);
  free(r->threads);
  free(r);
}
