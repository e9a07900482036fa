// The streaming reader of Chrome-trace JSON (the Trace Event Format: a top-level object with
// `traceEvents`, or a bare array of events) as the PyTorch profiler (Kineto) writes it on CUDA and
// ROCm. It pulls bytes chunk by chunk, keeps the fields of each event it needs (ph, cat, name,
// ts, dur and a few args) and drops the rest while checking the JSON's structure (RFC 8259).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_coll.h"
#include "trace_cpu.h"
#include "trace_mem.h"
#include "trace_read.h"
#include "trace_store.h"

enum {
  MAX_DEPTH = 1000,    // nesting a skipped value may have
  MAX_NAME = 1 << 20,  // bytes of a kept string (a kernel name)
  MAX_META = 4 << 20,  // bytes of a top-level member kept as text
  MAX_ARG = 64 << 10,  // bytes of a shape argument (Input Dims...) kept in an op's key
  MAX_NUMBER = 64,     // characters of a number that is read
  EV_EOF = 1,          // the data ended inside the JSON
  EV_ERR = 2,          // an error was set
};

// A string the parser keeps for the event at hand: borrowed from the current chunk when it lies
// there whole and has no escape (no copy), else decoded into `buf`. Borrowed strings are copied
// into their buffers before the chunk changes (pin).
typedef struct Str {
  const char *data;
  size_t len;
  bool borrowed;
  TpBuf buf;
} Str;

typedef struct Parser {
  TpTraceSrc *src;
  TpTrace *t;
  TpError *err;
  const unsigned char *chunk, *p, *end;
  uint64_t base;  // offset of chunk[0] in the uncompressed data
  int fail;       // EV_EOF or EV_ERR once failed
  Str key, name, cat, coll, dtype, ph, id, pg, ranks;
  TpBuf text;
  TpBuf args[TP_TRACE_OP_ARGS];  // the event's shape arguments' JSON text
  TpBuf *capture;                // when set, every byte consumed is appended here (a member's text)
  size_t capture_from, capture_max;
  bool capture_over;
} Parser;

static uint64_t offset(const Parser *x) {
  return x->base + (uint64_t)(x->p - x->chunk);
}

// "byte" for plain data; for gzip, the offset is in the inflated text and says so.
static const char *byte_word(const Parser *x) {
  return tp_trace_src_compressed(x->src) ? "decompressed byte" : "byte";
}

static bool fail_at(Parser *x, int code, const char *why) {
  if (!x->fail) {
    x->fail = EV_ERR;
    tp_error_set(x->err, code, "%s: %s %llu: %s", x->t->path, byte_word(x),
                 (unsigned long long)offset(x), why);
  }
  return false;
}

static void capture_flush(Parser *x) {
  if (x->capture && !x->capture_over) {
    size_t n = (size_t)(x->p - x->chunk) - x->capture_from;
    if (x->capture->len + n > x->capture_max) {
      x->capture_over = true;
    } else if (tp_buf_append(x->capture, x->chunk + x->capture_from, n) != 0) {
      x->capture_over = true;
    }
  }
  x->capture_from = 0;
}

// Moves to the next chunk; false at the end of the data (fail = EV_EOF) or on an error.
static bool pin(Parser *x, Str *s) {
  if (!s->borrowed) {
    return true;
  }
  s->buf.len = 0;
  s->borrowed = false;
  if (s->len > 0 && tp_buf_append(&s->buf, s->data, s->len) != 0) {
    s->data = "";
    s->len = 0;
    x->fail = EV_ERR;
    tp_error_set(x->err, TP_ENOMEM, "%s: out of memory", x->t->path);
    return false;
  }
  s->data = s->len > 0 ? s->buf.data : "";
  return true;
}

static bool fill(Parser *x) {
  if (x->fail) {
    return false;
  }
  if (!pin(x, &x->key) || !pin(x, &x->name) || !pin(x, &x->cat) || !pin(x, &x->coll) ||
      !pin(x, &x->dtype) || !pin(x, &x->ph) || !pin(x, &x->pg) || !pin(x, &x->ranks)) {
    return false;
  }
  capture_flush(x);
  const unsigned char *p = NULL;
  size_t n = 0;
  x->base += (uint64_t)(x->end - x->chunk);
  int rc = tp_trace_src_next(x->src, &p, &n, x->err);
  if (rc < 0) {
    x->fail = EV_ERR;
    x->chunk = x->p = x->end;
    return false;
  }
  if (rc == 0) {
    x->fail = EV_EOF;
    x->chunk = x->p = x->end;
    return false;
  }
  x->chunk = x->p = p;
  x->end = p + n;
  return true;
}

static inline int peek(Parser *x) {
  if (x->p == x->end && !fill(x)) {
    return -1;
  }
  return *x->p;
}

static inline int skip_ws(Parser *x) {
  for (;;) {
    while (x->p < x->end) {
      unsigned char c = *x->p;
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        return c;
      }
      x->p++;
    }
    if (!fill(x)) {
      return -1;
    }
  }
}

static bool expect(Parser *x, char c, const char *why) {
  if (skip_ws(x) != c) {
    return x->fail ? false : fail_at(x, TP_EPARSE, why);
  }
  x->p++;
  return true;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

static bool read_hex4(Parser *x, unsigned *u) {
  *u = 0;
  for (int i = 0; i < 4; i++) {
    int c = peek(x);
    int v = c < 0 ? -1 : hexval(c);
    if (v < 0) {
      return x->fail ? false : fail_at(x, TP_EPARSE, "bad \\u escape in a string");
    }
    *u = *u * 16 + (unsigned)v;
    x->p++;
  }
  return true;
}

static bool put_utf8(Parser *x, TpBuf *out, unsigned u) {
  char b[4];
  size_t n;
  if (u < 0x80) {
    b[0] = (char)u;
    n = 1;
  } else if (u < 0x800) {
    b[0] = (char)(0xC0 | (u >> 6));
    b[1] = (char)(0x80 | (u & 0x3F));
    n = 2;
  } else if (u < 0x10000) {
    b[0] = (char)(0xE0 | (u >> 12));
    b[1] = (char)(0x80 | ((u >> 6) & 0x3F));
    b[2] = (char)(0x80 | (u & 0x3F));
    n = 3;
  } else {
    b[0] = (char)(0xF0 | (u >> 18));
    b[1] = (char)(0x80 | ((u >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((u >> 6) & 0x3F));
    b[3] = (char)(0x80 | (u & 0x3F));
    n = 4;
  }
  if (tp_buf_append(out, b, n) != 0) {
    return fail_at(x, TP_ENOMEM, "out of memory");
  }
  return true;
}

// The first byte in [p, end) that ends a run of plain string bytes: a quote, a backslash or a
// control character. Eight bytes at a time: for a byte b of word w, ((w - 0x01..) & ~w & 0x80..)
// flags a zero byte, and the lowest flagged byte is exact (little-endian: borrows run upwards);
// bytes below 0x20 are flagged by subtracting 0x20.. instead (exact for the lowest one too, as
// every flagged byte's high bit is clear in w).
static const unsigned char *string_run(const unsigned char *p, const unsigned char *end) {
  const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
  while (end - p >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t hit = ((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w);
    hit &= highs;
    if (hit) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return p + (__builtin_ctzll(hit) >> 3);
#else
      break;
#endif
    }
    p += 8;
  }
  while (p < end && *p != '"' && *p != '\\' && *p >= 0x20) {
    p++;
  }
  return p;
}

// Reads the string whose opening quote is next; appends its decoded bytes to `out` (NULL: drop).
static bool read_string_body(Parser *x, TpBuf *out);

static bool read_string(Parser *x, TpBuf *out) {
  if (skip_ws(x) != '"') {
    return x->fail ? false : fail_at(x, TP_EPARSE, "expected a string");
  }
  x->p++;
  return read_string_body(x, out);
}

// Reads a string into `s`, borrowing it from the chunk when it can.
static bool read_str(Parser *x, Str *s) {
  if (skip_ws(x) != '"') {
    return x->fail ? false : fail_at(x, TP_EPARSE, "expected a string");
  }
  x->p++;
  const unsigned char *start = x->p;
  const unsigned char *q = string_run(start, x->end);
  if (q < x->end && *q == '"') {
    if ((size_t)(q - start) > MAX_NAME) {
      return fail_at(x, TP_ELIMIT, "a name longer than 1 MiB");
    }
    s->data = (const char *)start;
    s->len = (size_t)(q - start);
    s->borrowed = true;
    x->p = q + 1;
    return true;
  }
  s->buf.len = 0;
  s->borrowed = false;
  s->data = "";
  s->len = 0;
  if (!read_string_body(x, &s->buf)) {
    return false;
  }
  s->data = s->buf.len > 0 ? s->buf.data : "";
  s->len = s->buf.len;
  return true;
}

static void str_clear(Str *s) {
  s->data = "";
  s->len = 0;
  s->borrowed = false;
}

// The rest of a string whose opening quote was read; its decoded bytes go to `out` (NULL: drop).
static bool read_string_body(Parser *x, TpBuf *out) {
  for (;;) {
    const unsigned char *s = x->p;
    x->p = string_run(x->p, x->end);
    if (out && x->p > s) {
      if (out->len + (size_t)(x->p - s) > MAX_NAME) {
        return fail_at(x, TP_ELIMIT, "a name longer than 1 MiB");
      }
      if (tp_buf_append(out, s, (size_t)(x->p - s)) != 0) {
        return fail_at(x, TP_ENOMEM, "out of memory");
      }
    }
    if (x->p == x->end) {
      if (!fill(x)) {
        return false;
      }
      continue;
    }
    unsigned char c = *x->p;
    if (c == '"') {
      x->p++;
      return true;
    }
    if (c < 0x20) {
      return fail_at(x, TP_EPARSE, "control character in a string");
    }
    x->p++;  // backslash
    int e = peek(x);
    if (e < 0) {
      return false;
    }
    x->p++;
    char lit = 0;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        lit = (char)e;
        break;
      case 'b':
        lit = '\b';
        break;
      case 'f':
        lit = '\f';
        break;
      case 'n':
        lit = '\n';
        break;
      case 'r':
        lit = '\r';
        break;
      case 't':
        lit = '\t';
        break;
      case 'u': {
        unsigned u;
        if (!read_hex4(x, &u)) {
          return false;
        }
        if (u >= 0xD800 && u < 0xDC00) {  // a surrogate pair's first half
          unsigned lo = 0;
          if (peek(x) == '\\') {
            x->p++;
            if (peek(x) == 'u') {
              x->p++;
              if (!read_hex4(x, &lo)) {
                return false;
              }
            }
          }
          if (lo < 0xDC00 || lo > 0xDFFF) {
            return x->fail ? false : fail_at(x, TP_EPARSE, "unpaired surrogate in a string");
          }
          u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        } else if (u >= 0xDC00 && u <= 0xDFFF) {
          return fail_at(x, TP_EPARSE, "unpaired surrogate in a string");
        }
        if (u == 0) {
          u = '?';  // a NUL would cut the C strings downstream
        }
        if (out && !put_utf8(x, out, u)) {
          return false;
        }
        continue;
      }
      default:
        return fail_at(x, TP_EPARSE, "bad escape in a string");
    }
    if (out && tp_buf_append(out, &lit, 1) != 0) {
      return fail_at(x, TP_ENOMEM, "out of memory");
    }
  }
}

// Reads a number, true, false or null token into buf (NUL-terminated; *len its length, which
// may exceed the buffer when the token is longer); false at the end of the data.
static bool read_token(Parser *x, char *buf, size_t cap, size_t *len) {
  *len = 0;
  for (;;) {
    while (x->p < x->end) {
      unsigned char c = *x->p;
      if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || (c >= 'a' && c <= 'z') ||
            (c >= 'A' && c <= 'Z'))) {
        if (*len == 0) {
          return fail_at(x, TP_EPARSE, "expected a value");
        }
        buf[*len < cap ? *len : cap - 1] = '\0';
        return true;
      }
      if (*len + 1 < cap) {
        buf[*len] = (char)c;
      }
      (*len)++;
      x->p++;
    }
    if (!fill(x)) {
      return false;
    }
  }
}

static bool is_literal(const char *s, size_t len) {
  return (len == 4 && (!strcmp(s, "true") || !strcmp(s, "null"))) ||
         (len == 5 && !strcmp(s, "false"));
}

// A JSON number's text, checked (RFC 8259 §6).
static bool is_number(const char *s, size_t len) {
  size_t i = 0;
  if (i < len && s[i] == '-') {
    i++;
  }
  if (i >= len || s[i] < '0' || s[i] > '9') {
    return false;
  }
  if (s[i] == '0') {
    i++;
  } else {
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      i++;
    }
  }
  if (i < len && s[i] == '.') {
    i++;
    if (i >= len || s[i] < '0' || s[i] > '9') {
      return false;
    }
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      i++;
    }
  }
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < len && (s[i] == '+' || s[i] == '-')) {
      i++;
    }
    if (i >= len || s[i] < '0' || s[i] > '9') {
      return false;
    }
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      i++;
    }
  }
  return i == len;
}

// Skips one value of any kind, checking its structure; appends nothing.
static bool skip_value(Parser *x) {
  unsigned char stack[MAX_DEPTH];  // '{' or '['
  size_t depth = 0;
  for (;;) {
    // a value
    int c = skip_ws(x);
    if (c < 0) {
      return false;
    }
    if (c == '{' || c == '[') {
      if (depth == MAX_DEPTH) {
        return fail_at(x, TP_ELIMIT, "nesting deeper than 1000");
      }
      stack[depth++] = (unsigned char)c;
      x->p++;
      int d = skip_ws(x);
      if (d < 0) {
        return false;
      }
      if (d == (c == '{' ? '}' : ']')) {
        x->p++;
        depth--;
      } else if (c == '{') {
        if (!read_string(x, NULL) || !expect(x, ':', "expected ':' after a key")) {
          return false;
        }
        continue;
      } else {
        continue;
      }
    } else if (c == '"') {
      if (!read_string(x, NULL)) {
        return false;
      }
    } else {
      char tok[MAX_NUMBER];
      size_t len;
      if (!read_token(x, tok, sizeof(tok), &len)) {
        return false;
      }
      if (len >= sizeof(tok)) {
        return fail_at(x, TP_ELIMIT, "a number or literal longer than 63 characters");
      }
      if (!is_literal(tok, len) && !is_number(tok, len)) {
        return fail_at(x, TP_EPARSE, "not a JSON value");
      }
    }
    // after a value: close containers, or go on to the next element
    for (;;) {
      if (depth == 0) {
        return true;
      }
      int d = skip_ws(x);
      if (d < 0) {
        return false;
      }
      if (d == ',') {
        x->p++;
        if (stack[depth - 1] == '{' &&
            (!read_string(x, NULL) || !expect(x, ':', "expected ':' after a key"))) {
          return false;
        }
        break;
      }
      if ((d == '}' && stack[depth - 1] == '{') || (d == ']' && stack[depth - 1] == '[')) {
        x->p++;
        depth--;
        continue;
      }
      return fail_at(x, TP_EPARSE, "expected ',' or the end of an object or array");
    }
  }
}

// Reads a number as nanoseconds from microseconds text: exact decimal arithmetic on the first 19
// significant digits (ns since the epoch have 19), rounded once, half away from zero, at the
// nanosecond. false when it is not a number or out of range.
static bool us_to_ns(const char *s, size_t len, int64_t *out) {
  if (len >= MAX_NUMBER || !is_number(s, len)) {
    return false;
  }
  const char *p = s, *end = s + len;
  bool neg = *p == '-';
  p += neg;
  uint64_t mant = 0;
  int exp10 = 3;  // microseconds to nanoseconds
  int sig = 0;
  bool in_frac = false;
  for (; p < end && *p != 'e' && *p != 'E'; p++) {
    if (*p == '.') {
      in_frac = true;
      continue;
    }
    if (sig < 19) {  // below 10^19: fits 64 bits
      mant = mant * 10 + (uint64_t)(*p - '0');
      sig += mant != 0;
      exp10 -= in_frac;
    } else {
      exp10 += !in_frac;  // digits past the 19th: their place counts, their value does not
    }
  }
  if (p < end) {
    long e = strtol(p + 1, NULL, 10);
    if (e > 40) {
      return false;
    }
    exp10 += e < -40 ? -40 : (int)e;
  }
  for (; exp10 > 0; exp10--) {
    if (mant > (uint64_t)INT64_MAX / 10) {
      return false;
    }
    mant *= 10;
  }
  if (exp10 < 0) {
    if (exp10 < -19) {
      mant = 0;
    } else {
      uint64_t div = 1;
      for (int i = 0; i < -exp10; i++) {
        div *= 10;
      }
      uint64_t q = mant / div, r = mant % div;
      mant = q + (r >= div - r);
    }
  }
  if (mant > (uint64_t)INT64_MAX) {
    return false;
  }
  *out = neg ? -(int64_t)mant : (int64_t)mant;
  return true;
}

// Reads an integer (a plain decimal, or a float that is an integer); false otherwise.
static bool to_int(const char *s, size_t len, int64_t *out) {
  if (len >= MAX_NUMBER || !is_number(s, len)) {
    return false;
  }
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s + len && errno == 0) {
    *out = v;
    return true;
  }
  double d = strtod(s, NULL);
  if (d >= -9.2e18 && d <= 9.2e18 && (double)(int64_t)d == d) {
    *out = (int64_t)d;
    return true;
  }
  return false;
}

static bool to_u64(const char *s, size_t len, uint64_t *out) {
  if (len >= MAX_NUMBER || !is_number(s, len) || *s == '-') {
    return false;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end != s + len || errno != 0) {
    return false;
  }
  *out = v;
  return true;
}

static bool key_is(const Str *k, const char *lit) {
  size_t n = strlen(lit);
  return k->len == n && memcmp(k->data, lit, n) == 0;
}

static bool buf_is_ci(const Str *b, const char *lit) {
  size_t n = strlen(lit);
  if (b->len != n) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    char c = b->data[i];
    if (c >= 'A' && c <= 'Z') {
      c = (char)(c - 'A' + 'a');
    }
    if (c != lit[i]) {
      return false;
    }
  }
  return true;
}

static bool starts_with(const Str *b, const char *lit) {
  size_t n = strlen(lit);
  return b->len >= n && memcmp(b->data, lit, n) == 0;
}

// Bytes of one element of a tensor of this dtype (as the profiler names them), 0 if unknown.
static int64_t dtype_size(const Str *d) {
  static const struct {
    const char *name;
    int64_t size;
  } sizes[] = {
      {"Float", 4},
      {"float", 4},
      {"Double", 8},
      {"Half", 2},
      {"BFloat16", 2},
      {"Int", 4},
      {"Long", 8},
      {"Short", 2},
      {"Char", 1},
      {"Byte", 1},
      {"Bool", 1},
      {"Float8_e4m3fn", 1},
      {"Float8_e5m2", 1},
      {"Float8_e4m3fnuz", 1},
      {"Float8_e5m2fnuz", 1},
  };
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    if (key_is(d, sizes[i].name)) {
      return sizes[i].size;
    }
  }
  return 0;
}

typedef struct Event {
  char ph;
  bool has_ts, has_dur, bad_ts, bad_dur;
  int64_t ts, dur;
  uint64_t corr;
  int64_t stream, nelems, group;
  bool has_coll, has_dtype, has_ext, has_pid, has_tid;
  // a collective's args besides the above (docs/collectives.md)
  int64_t out_nelems, seq, rank;
  bool has_nelems, has_out, has_seq, has_rank, has_pg, has_ranks;
  uint64_t ext;
  uint64_t pid, tid;          // hashes of the pid and tid values' text
  uint8_t has_arg, long_arg;  // bit i: shape argument i read / dropped for its length
  // a [memory] event's args (trace_mem.h)
  bool has_addr, has_bytes, has_total, has_reserved, bad_bytes, bad_total, bad_reserved;
  uint64_t addr;
  int64_t bytes, total, reserved, dev_type, dev_id;
} Event;

// The shape arguments kept in an op's key, in TP_TRACE_OP_ARGS order.
static const char *const ARG_KEYS[TP_TRACE_OP_ARGS] = {"Input Dims", "Input type", "Input Strides",
                                                       "Concrete Inputs"};

// FNV-1a of a value's text (a thread's pid or tid).
static uint64_t text_hash(const char *p, size_t n, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ seed;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

// Reads the value of a pid or tid member (a number or a string) as the hash of its text; other
// kinds of value are skipped (*has stays false).
static bool read_id(Parser *x, uint64_t seed, uint64_t *out, bool *has) {
  int c = skip_ws(x);
  if (c < 0) {
    return false;
  }
  if (c == '"') {
    if (!read_str(x, &x->id)) {
      return false;
    }
    *out = text_hash(x->id.data, x->id.len, seed);
    *has = true;
    return true;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    char tok[MAX_NUMBER];
    size_t len = 0;
    if (!read_token(x, tok, sizeof(tok), &len)) {
      return false;
    }
    if (len >= sizeof(tok)) {
      return fail_at(x, TP_ELIMIT, "a number longer than 63 characters");
    }
    if (!is_number(tok, len)) {
      return fail_at(x, TP_EPARSE, "not a JSON value");
    }
    *out = text_hash(tok, len, seed);
    *has = true;
    return true;
  }
  return skip_value(x);
}

// Removes the whitespace outside strings from a JSON text, in place: the same value written on
// one line or on many gives one text.
static void squeeze_json(TpBuf *b) {
  size_t o = 0;
  bool in_str = false, esc = false;
  for (size_t i = 0; i < b->len; i++) {
    char c = b->data[i];
    if (in_str) {
      in_str = esc || c != '"';
      esc = !esc && c == '\\';
    } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      continue;
    } else {
      in_str = c == '"';
    }
    b->data[o++] = c;
  }
  b->len = o;
}

// Reads a value keeping its JSON text in `dst` (up to `max` bytes; *over when longer).
static bool capture_value(Parser *x, TpBuf *dst, size_t max, bool *over) {
  if (skip_ws(x) < 0) {
    return false;
  }
  dst->len = 0;
  x->capture = dst;
  x->capture_over = false;
  x->capture_max = max;
  x->capture_from = (size_t)(x->p - x->chunk);
  bool ok = skip_value(x);
  capture_flush(x);
  x->capture = NULL;
  *over = x->capture_over;
  return ok;
}

static bool read_number_field(Parser *x, char *tok, size_t *len, bool *is_num) {
  int c = skip_ws(x);
  if (c < 0) {
    return false;
  }
  *is_num = (c == '-' || (c >= '0' && c <= '9'));
  if (!*is_num) {
    return skip_value(x);
  }
  if (!read_token(x, tok, MAX_NUMBER, len)) {
    return false;
  }
  if (*len >= MAX_NUMBER) {
    return fail_at(x, TP_ELIMIT, "a number longer than 63 characters");
  }
  if (!is_number(tok, *len)) {  // as skip_value checks it
    return fail_at(x, TP_EPARSE, "not a JSON value");
  }
  return true;
}

// Reads a string value into `s`, or skips a value of another kind (leaving `s` as it was).
static bool read_str_or_skip(Parser *x, Str *s) {
  int c = skip_ws(x);
  if (c == '"') {
    return read_str(x, s);
  }
  return c < 0 ? false : skip_value(x);
}

// After a member or an element: 1 when a ',' follows (another one comes), 0 when `close` ends
// the container (consumed), -1 on failure (`why` when the byte is neither).
static int next_or_close(Parser *x, char close, const char *why) {
  int c = skip_ws(x);
  if (c == ',') {
    x->p++;
    return 1;
  }
  if (c == close) {
    x->p++;
    return 0;
  }
  if (!x->fail) {
    fail_at(x, TP_EPARSE, why);
  }
  return -1;
}

// The args of a [memory] event (trace_mem.h).
static bool is_mem_key(const Str *k) {
  return key_is(k, "Addr") || key_is(k, "Bytes") || key_is(k, "Total Allocated") ||
         key_is(k, "Total Reserved") || key_is(k, "Device Type") || key_is(k, "Device Id");
}

// An integer of at most TP_TRACE_MEM_MAX in magnitude (bytes); false otherwise.
static bool mem_int(const char *tok, size_t len, int64_t *out) {
  return to_int(tok, len, out) && *out >= -TP_TRACE_MEM_MAX && *out <= TP_TRACE_MEM_MAX;
}

static bool read_mem_arg(Parser *x, Event *ev) {
  char tok[MAX_NUMBER];
  size_t len = 0;
  bool num = false;
  if (!read_number_field(x, tok, &len, &num)) {
    return false;
  }
  const Str *k = &x->key;
  int64_t v = 0;
  if (key_is(k, "Addr")) {
    ev->has_addr = num && to_u64(tok, len, &ev->addr) && ev->addr != 0;
  } else if (key_is(k, "Bytes")) {
    ev->has_bytes = true;
    ev->bad_bytes = !(num && mem_int(tok, len, &ev->bytes));
  } else if (key_is(k, "Total Allocated")) {
    ev->has_total = true;
    ev->bad_total = !(num && mem_int(tok, len, &ev->total) && ev->total >= 0);
  } else if (key_is(k, "Total Reserved")) {
    ev->has_reserved = true;
    ev->bad_reserved = !(num && mem_int(tok, len, &ev->reserved) && ev->reserved >= 0);
  } else if (key_is(k, "Device Type")) {
    ev->dev_type = num && to_int(tok, len, &v) && v >= -1 && v <= INT16_MAX ? v : -1;
  } else {
    ev->dev_id = num && to_int(tok, len, &v) && v >= -1 && v <= INT16_MAX ? v : -1;
  }
  return true;
}

static bool read_args(Parser *x, Event *ev) {
  if (skip_ws(x) != '{') {
    return x->fail ? false : skip_value(x);
  }
  x->p++;
  if (skip_ws(x) == '}') {
    x->p++;
    return true;
  }
  for (;;) {
    if (!read_str(x, &x->key) || !expect(x, ':', "expected ':' after a key")) {
      return false;
    }
    char tok[MAX_NUMBER];
    size_t len = 0;
    bool num = false;
    if (key_is(&x->key, "correlation")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      if (num && !to_u64(tok, len, &ev->corr)) {
        ev->corr = UINT64_MAX;
      }
    } else if (key_is(&x->key, "stream")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      if (num && !to_int(tok, len, &ev->stream)) {
        ev->stream = -1;
      }
    } else if (key_is(&x->key, "In msg nelems")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      ev->has_nelems = num && to_int(tok, len, &ev->nelems) && ev->nelems >= 0;
      if (!ev->has_nelems) {
        ev->nelems = 0;
      }
    } else if (key_is(&x->key, "Out msg nelems")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      ev->has_out = num && to_int(tok, len, &ev->out_nelems) && ev->out_nelems >= 0;
    } else if (key_is(&x->key, "Seq")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      ev->has_seq = num && to_int(tok, len, &ev->seq) && ev->seq >= 0;
    } else if (key_is(&x->key, "Rank")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      ev->has_rank = num && to_int(tok, len, &ev->rank) && ev->rank >= 0;
    } else if (key_is(&x->key, "Process Group Name") && skip_ws(x) == '"') {
      if (!read_str(x, &x->pg)) {
        return false;
      }
      ev->has_pg = true;
    } else if (key_is(&x->key, "Process Group Ranks") && skip_ws(x) == '"') {
      if (!read_str(x, &x->ranks)) {
        return false;
      }
      ev->has_ranks = true;
    } else if (key_is(&x->key, "Group size")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      if (num && !to_int(tok, len, &ev->group)) {
        ev->group = 0;
      }
    } else if (key_is(&x->key, "Collective name") && skip_ws(x) == '"') {
      if (!read_str(x, &x->coll)) {
        return false;
      }
      ev->has_coll = true;
    } else if (key_is(&x->key, "dtype") && skip_ws(x) == '"') {
      if (!read_str(x, &x->dtype)) {
        return false;
      }
      ev->has_dtype = true;
    } else if (x->key.len >= 4 &&
               (x->key.data[0] == 'A' || x->key.data[0] == 'B' || x->key.data[0] == 'T' ||
                x->key.data[0] == 'D') &&
               is_mem_key(&x->key)) {
      if (!read_mem_arg(x, ev)) {
        return false;
      }
    } else if (key_is(&x->key, "External id")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      ev->has_ext = num && to_u64(tok, len, &ev->ext);
    } else {
      int a = 0;
      while (a < TP_TRACE_OP_ARGS && !key_is(&x->key, ARG_KEYS[a])) {
        a++;
      }
      if (a < TP_TRACE_OP_ARGS) {
        bool over = false;
        if (!capture_value(x, &x->args[a], MAX_ARG, &over)) {
          return false;
        }
        squeeze_json(&x->args[a]);
        uint8_t bit = (uint8_t)(1u << a);
        ev->has_arg = over ? (uint8_t)(ev->has_arg & ~bit) : (uint8_t)(ev->has_arg | bit);
        ev->long_arg = over ? (uint8_t)(ev->long_arg | bit) : (uint8_t)(ev->long_arg & ~bit);
      } else if (!skip_value(x)) {
        return false;
      }
    }
    int more = next_or_close(x, '}', "expected ',' or '}' in args");
    if (more < 0) {
      return false;
    }
    if (more == 0) {
      return true;
    }
  }
}

static bool oom(Parser *x, int rc) {
  return rc == 0 ? true : fail_at(x, TP_ENOMEM, "out of memory");
}

// The thread of an event on the CPU, or TP_TRACE_NO_THREAD when it names none.
static uint16_t thread_of(Parser *x, const Event *ev) {
  if (!ev->has_tid) {
    return TP_TRACE_NO_THREAD;
  }
  uint64_t h = (ev->has_pid ? ev->pid : 0) * 1099511628211ULL ^ ev->tid;
  return tp_trace_cpu_thread(x->t, h);
}

// Keeps a CPU range: an op with its shape arguments, an annotation, an nn.Module frame.
static bool use_range(Parser *x, const Event *ev, TpTraceCpuKind kind, int64_t dur) {
  TpTrace *t = x->t;
  TpTraceCpuIn in = {
      .kind = kind,
      .name = x->name.data,
      .name_len = x->name.len,
      .ts = ev->ts,
      .dur = dur,
      .thread = thread_of(x, ev),
      .has_ext = ev->has_ext,
      .ext = ev->ext,
  };
  if (kind == TP_TRACE_CPU_OP) {
    for (int a = 0; a < TP_TRACE_OP_ARGS; a++) {
      if (ev->has_arg >> a & 1) {
        in.arg[a] = x->args[a].len > 0 ? x->args[a].data : "";
        in.arg_len[a] = x->args[a].len;
      }
    }
    if (ev->long_arg) {
      if (t->args_long++ == 0) {
        tp_trace_warn(t, "%s: an op's shape argument over 64 KiB was left out of its key (%.*s)",
                      t->path, (int)(x->name.len > 80 ? 80 : x->name.len), x->name.data);
      }
    }
  }
  return oom(x, tp_trace_cpu_add(t, &in));
}

// Keeps a collective in the side array (trace_coll.h): an NCCL or RCCL kernel, or one whose args
// describe a collective (the op just added), or a record_param_comms CPU op (`cpu`).
static bool use_coll(Parser *x, const Event *ev, bool cpu, int64_t dur) {
  TpTrace *t = x->t;
  bool own = ev->has_coll || ev->has_nelems || ev->has_out || ev->has_pg;
  if (!cpu && !own && !tp_trace_coll_name(x->name.data, x->name.len)) {
    return true;
  }
  TpTraceCollIn in = {
      .cpu = cpu,
      .own_args = !cpu && own,
      .ts = ev->ts,
      .dur = dur,
      .name = cpu ? 0 : t->ops[t->nops - 1].name,
      .corr = ev->corr,
      .stream = ev->stream,
      .has_ext = ev->has_ext,
      .ext = ev->ext,
      .thread = cpu ? thread_of(x, ev) : TP_TRACE_NO_THREAD,
      .coll = ev->has_coll ? x->coll.data : NULL,
      .coll_len = ev->has_coll ? x->coll.len : 0,
      .dtype = ev->has_dtype ? x->dtype.data : NULL,
      .dtype_len = ev->has_dtype ? x->dtype.len : 0,
      .pg = ev->has_pg ? x->pg.data : NULL,
      .pg_len = ev->has_pg ? x->pg.len : 0,
      .ranks = ev->has_ranks ? x->ranks.data : NULL,
      .ranks_len = ev->has_ranks ? x->ranks.len : 0,
      .dtype_size = ev->has_dtype ? dtype_size(&x->dtype) : 0,
      .in_nelems = ev->has_nelems ? ev->nelems : -1,
      .out_nelems = ev->has_out ? ev->out_nelems : -1,
      .group = ev->group,
      .seq = ev->has_seq ? ev->seq : -1,
      .rank = ev->has_rank ? ev->rank : -1,
  };
  return oom(x, tp_trace_coll_add(t, &in));
}

// Hands a [memory] instant event to the memory side (trace_mem.h).
static bool use_mem(Parser *x, const Event *ev, uint64_t at) {
  TpTrace *t = x->t;
  if (!ev->has_ts || ev->bad_ts) {
    t->bad++;
    tp_trace_warn(t, "%s: byte %llu: a [memory] event with %s ts was skipped", t->path,
                  (unsigned long long)at, ev->has_ts ? "an out-of-range" : "no");
    return true;
  }
  TpTraceMemIn in = {
      .ts = ev->ts,
      .thread = thread_of(x, ev),
      .has_addr = ev->has_addr,
      .has_bytes = ev->has_bytes,
      .has_total = ev->has_total,
      .has_reserved = ev->has_reserved,
      .bad_bytes = ev->bad_bytes,
      .bad_total = ev->bad_total,
      .bad_reserved = ev->bad_reserved,
      .addr = ev->addr,
      .bytes = ev->bytes,
      .total = ev->total,
      .reserved = ev->reserved,
      .type = ev->dev_type,
      .id = ev->dev_id,
  };
  return oom(x, tp_trace_mem_add(t, &in));
}

// Acts on one parsed event.
static bool use_event(Parser *x, const Event *ev, uint64_t at) {
  TpTrace *t = x->t;
  if (!oom(x, tp_trace_count_cat(t, x->cat.data, x->cat.len))) {
    return false;
  }
  if (ev->ph == 's' || ev->ph == 'f' || ev->ph == 't') {
    t->flows++;
    return true;
  }
  if (ev->ph != 'X') {
    if ((ev->ph == 'i' || ev->ph == 'I') && key_is(&x->name, "[memory]")) {
      return use_mem(x, ev, at);
    }
    t->ignored++;
    return true;
  }
  if (!ev->has_ts || ev->bad_ts || ev->bad_dur) {
    t->bad++;
    tp_trace_warn(t, "%s: byte %llu: a complete event with %s ts or dur was skipped", t->path,
                  (unsigned long long)at, ev->has_ts ? "an out-of-range" : "no");
    return true;
  }
  int64_t dur = ev->has_dur && ev->dur > 0 ? ev->dur : 0;
  TpTraceKind kind = TP_TRACE_KINDS;
  if (buf_is_ci(&x->cat, "kernel")) {
    kind = TP_TRACE_KERNEL;
  } else if (buf_is_ci(&x->cat, "gpu_memcpy") || buf_is_ci(&x->cat, "memcpy")) {
    kind = TP_TRACE_MEMCPY;
  } else if (buf_is_ci(&x->cat, "gpu_memset") || buf_is_ci(&x->cat, "memset")) {
    kind = TP_TRACE_MEMSET;
  }
  if (kind != TP_TRACE_KINDS) {
    int64_t esize = ev->has_dtype ? dtype_size(&x->dtype) : 0;
    TpTraceOpIn in = {
        .ts = ev->ts,
        .dur = dur,
        .name = x->name.data,
        .name_len = x->name.len,
        .corr = ev->corr,
        .stream = ev->stream,
        .kind = kind,
        .coll = ev->has_coll && x->coll.len > 0 ? x->coll.data : NULL,
        .coll_len = ev->has_coll ? x->coll.len : 0,
        .bytes =
            ev->nelems > 0 && esize > 0 && ev->nelems < INT64_MAX / esize ? ev->nelems * esize : 0,
        .group = ev->group,
        .has_ext = ev->has_ext,
        .ext = ev->ext,
    };
    if (!oom(x, tp_trace_add_op(t, &in))) {
      return false;
    }
    return kind == TP_TRACE_KERNEL ? use_coll(x, ev, false, dur) : true;
  }
  if (buf_is_ci(&x->cat, "cuda_runtime") || buf_is_ci(&x->cat, "cuda_driver") ||
      buf_is_ci(&x->cat, "runtime")) {
    TpTraceCall call = tp_trace_call_of(x->name.data, x->name.len);
    if (call == TP_TRACE_CALL_SYNC &&
        !oom(x, tp_trace_add_sync(t, TP_TRACE_SYNC_CALL, ev->ts, dur, ev->corr, -1))) {
      return false;
    }
    if (ev->corr != UINT64_MAX) {
      return oom(x, tp_trace_add_launch_call(t, ev->corr, ev->ts, dur,
                                             ev->has_ext ? ev->ext : UINT64_MAX, thread_of(x, ev),
                                             call));
    }
    t->ignored += call != TP_TRACE_CALL_SYNC;
    return true;
  }
  if (buf_is_ci(&x->cat, "cuda_sync")) {
    // Recent PyTorch marks synchronisations on the GPU timeline (its own rows, with a stream and
    // the correlation of the call that waited).
    static const struct {
      const char *name;
      TpTraceSyncKind kind;
    } kinds[] = {{"Stream Sync", TP_TRACE_SYNC_STREAM},
                 {"Event Sync", TP_TRACE_SYNC_EVENT},
                 {"Context Sync", TP_TRACE_SYNC_CONTEXT},
                 {"Stream Wait Event", TP_TRACE_SYNC_STREAM_WAIT}};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
      if (key_is(&x->name, kinds[i].name)) {
        return oom(x, tp_trace_add_sync(t, kinds[i].kind, ev->ts, dur, ev->corr, ev->stream));
      }
    }
    t->ignored++;
    return true;
  }
  if (starts_with(&x->name, "ProfilerStep#") && starts_with(&x->cat, "gpu_")) {
    // The step's copy on the GPU timeline (gpu_user_annotation): only HTA's cut-off uses it.
    if (ev->ts > t->gpu_step_last) {
      t->gpu_step_last = ev->ts;
    }
    t->ignored++;
    return true;
  }
  int64_t number = 0;
  bool used = false;
  switch (tp_trace_range_of(x->name.data, x->name.len, &number)) {
    case TP_TRACE_RANGE_STEP:
      return oom(x, tp_trace_add_step(t, number, ev->ts, dur));
    case TP_TRACE_RANGE_LOADER:
      if (!oom(x, tp_trace_add_loader(t, ev->ts, dur))) {
        return false;
      }
      used = true;
      break;
    case TP_TRACE_RANGE_BAD_STEP:
    case TP_TRACE_RANGE_OTHER:
      break;
  }
  TpTraceCpuKind ckind = TP_TRACE_CPU_KINDS;
  if (buf_is_ci(&x->cat, "cpu_op")) {
    ckind = TP_TRACE_CPU_OP;
  } else if (buf_is_ci(&x->cat, "user_annotation")) {
    ckind = TP_TRACE_CPU_ANNOTATION;
  } else if (buf_is_ci(&x->cat, "python_function") && starts_with(&x->name, "nn.Module: ")) {
    ckind = TP_TRACE_CPU_MODULE;
  }
  if (ckind != TP_TRACE_CPU_KINDS) {
    if (ckind == TP_TRACE_CPU_OP && key_is(&x->name, "record_param_comms") &&
        !use_coll(x, ev, true, dur)) {
      return false;
    }
    return use_range(x, ev, ckind, dur);
  }
  t->ignored += !used;
  return true;
}

// Reads one element of traceEvents (the '{' is next).
static bool read_event(Parser *x) {
  uint64_t at = offset(x);
  Event ev = {.corr = UINT64_MAX, .stream = -1, .dev_type = -1, .dev_id = -1};
  str_clear(&x->name);
  str_clear(&x->cat);
  x->p++;  // '{'
  int c = skip_ws(x);
  if (c == '}') {
    x->p++;
    x->t->events++;  // an element of traceEvents like any other
    x->t->ignored++;
    return true;
  }
  for (;;) {
    if (!read_str(x, &x->key) || !expect(x, ':', "expected ':' after a key")) {
      return false;
    }
    char tok[MAX_NUMBER];
    size_t len = 0;
    bool num = false;
    if (key_is(&x->key, "pid")) {
      if (!read_id(x, 1, &ev.pid, &ev.has_pid)) {
        return false;
      }
    } else if (key_is(&x->key, "tid")) {
      if (!read_id(x, 2, &ev.tid, &ev.has_tid)) {
        return false;
      }
    } else if (key_is(&x->key, "ph")) {
      str_clear(&x->ph);
      if (!read_str_or_skip(x, &x->ph)) {
        return false;
      }
      ev.ph = x->ph.len == 1 ? x->ph.data[0] : 0;  // 0: no one-letter phase
    } else if (key_is(&x->key, "name")) {
      if (!read_str_or_skip(x, &x->name)) {
        return false;
      }
    } else if (key_is(&x->key, "cat")) {
      if (!read_str_or_skip(x, &x->cat)) {
        return false;
      }
    } else if (key_is(&x->key, "ts")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      ev.has_ts = num;
      ev.bad_ts = num && (!us_to_ns(tok, len, &ev.ts) || ev.ts < TP_TRACE_TS_MIN ||
                          ev.ts > TP_TRACE_TS_MAX);
    } else if (key_is(&x->key, "dur")) {
      if (!read_number_field(x, tok, &len, &num)) {
        return false;
      }
      ev.has_dur = num;
      ev.bad_dur = num && (!us_to_ns(tok, len, &ev.dur) || ev.dur > TP_TRACE_DUR_MAX);
    } else if (key_is(&x->key, "args")) {
      if (!read_args(x, &ev)) {
        return false;
      }
    } else if (!skip_value(x)) {
      return false;
    }
    int more = next_or_close(x, '}', "expected ',' or '}' in an event");
    if (more < 0) {
      return false;
    }
    if (more == 0) {
      break;
    }
  }
  x->t->events++;
  return use_event(x, &ev, at);
}

// Reads the array of events (the '[' is next).
static bool read_events(Parser *x) {
  x->p++;
  int c = skip_ws(x);
  if (c == ']') {
    x->p++;
    return true;
  }
  for (;;) {
    c = skip_ws(x);
    if (c == '{') {
      if (!read_event(x)) {
        return false;
      }
    } else if (c < 0) {
      return false;
    } else {
      x->t->events++;
      x->t->ignored++;
      if (!skip_value(x)) {
        return false;
      }
    }
    int more = next_or_close(x, ']', "expected ',' or ']' after an event");
    if (more < 0) {
      return false;
    }
    if (more == 0) {
      return true;
    }
  }
}

// Skips a top-level member's value, keeping its text.
static bool keep_member(Parser *x) {
  if (skip_ws(x) < 0) {
    return false;
  }
  x->text.len = 0;
  x->capture = &x->text;
  x->capture_over = false;
  x->capture_max = MAX_META;
  x->capture_from = (size_t)(x->p - x->chunk);
  bool ok = skip_value(x);
  capture_flush(x);
  x->capture = NULL;
  if (!ok) {
    return false;
  }
  if (x->capture_over) {
    tp_trace_warn(x->t, "%s: top-level member \"%.*s\" over 4 MiB was not kept", x->t->path,
                  (int)(x->key.len > 64 ? 64 : x->key.len), x->key.data);
    return true;
  }
  return oom(x, tp_trace_add_meta(x->t, x->key.data, x->key.len, x->text.data ? x->text.data : "",
                                  x->text.len));
}

static bool read_top(Parser *x, bool *seen_events) {
  int c = skip_ws(x);
  if (c < 0) {
    return false;
  }
  if (c == '[') {
    *seen_events = true;
    return read_events(x);
  }
  if (c != '{') {
    return fail_at(x, TP_EPARSE, "not a JSON trace (expected '{' or '[')");
  }
  x->p++;
  if (skip_ws(x) == '}') {
    x->p++;
    return true;
  }
  for (;;) {
    if (!read_str(x, &x->key) || !expect(x, ':', "expected ':' after a key")) {
      return false;
    }
    if (key_is(&x->key, "traceEvents")) {
      if (skip_ws(x) != '[') {
        return x->fail ? false : fail_at(x, TP_EPARSE, "traceEvents is not an array");
      }
      *seen_events = true;
      if (!read_events(x)) {
        return false;
      }
    } else {
      if (!keep_member(x)) {
        return false;
      }
    }
    int more = next_or_close(x, '}', "expected ',' or '}' at the top level");
    if (more < 0) {
      return false;
    }
    if (more == 0) {
      return true;
    }
  }
}

int tp_trace_parse(TpTraceSrc *src, TpTrace *t, TpError *err) {
  Parser x = {.src = src, .t = t, .err = err};
  Str *strs[] = {&x.key, &x.name, &x.cat, &x.coll, &x.dtype, &x.ph, &x.id, &x.pg, &x.ranks};
  for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
    str_clear(strs[i]);
  }
  bool seen_events = false;
  bool ok = read_top(&x, &seen_events);
  if (ok && skip_ws(&x) >= 0) {
    ok = fail_at(&x, TP_EPARSE, "data after the end of the trace");
  }
  if (!ok && x.fail == EV_EOF) {
    x.fail = 0;
  }
  int rc = 0;
  uint64_t end = offset(&x);
  // Where the data stopped: for gzip, the compressed offset and the inflated one, labelled.
  char at[96];
  if (tp_trace_src_compressed(src)) {
    snprintf(at, sizeof(at), "compressed byte %llu (decompressed byte %llu)",
             (unsigned long long)tp_trace_src_compressed_offset(src), (unsigned long long)end);
  } else {
    snprintf(at, sizeof(at), "byte %llu", (unsigned long long)end);
  }
  bool cut = tp_trace_src_truncated(src);
  if (x.fail == EV_ERR) {
    rc = err->code ? err->code : TP_EPARSE;
  } else if (!ok) {
    // The data ended inside the JSON.
    if (end == 0 && cut) {
      rc = tp_error_set(err, TP_EPARSE, "%s: truncated at %s: the gzip stream ends early", t->path,
                        at);
    } else if (end == 0) {
      rc = tp_error_set(err, TP_EPARSE, "%s: empty file", t->path);
    } else if (!seen_events && t->events == 0) {
      rc =
          tp_error_set(err, TP_EPARSE, "%s: %s: the file ends before any traceEvents", t->path, at);
    } else if (t->events == 0) {
      // Nothing was read: a damaged file, not an empty profile.
      rc =
          tp_error_set(err, TP_EPARSE, "%s: truncated at %s: no event before the cut", t->path, at);
    } else {
      t->truncated = true;
      tp_trace_warn(t, "%s: truncated at %s: kept the %llu events read before it", t->path, at,
                    (unsigned long long)t->events);
    }
  } else if (end == 0 && cut) {
    rc = tp_error_set(err, TP_EPARSE, "%s: truncated at %s: the gzip stream ends early", t->path,
                      at);
  } else if (end == 0 || !seen_events) {
    rc = end == 0 ? tp_error_set(err, TP_EPARSE, "%s: empty file", t->path)
                  : tp_error_set(err, TP_EPARSE, "%s: no traceEvents in the trace", t->path);
  }
  t->bytes = end;
  tp_buf_free(&x.key.buf);
  tp_buf_free(&x.name.buf);
  tp_buf_free(&x.cat.buf);
  tp_buf_free(&x.coll.buf);
  tp_buf_free(&x.dtype.buf);
  tp_buf_free(&x.pg.buf);
  tp_buf_free(&x.ranks.buf);
  tp_buf_free(&x.ph.buf);
  tp_buf_free(&x.id.buf);
  tp_buf_free(&x.text);
  for (int a = 0; a < TP_TRACE_OP_ARGS; a++) {
    tp_buf_free(&x.args[a]);
  }
  return rc;
}
