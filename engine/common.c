// Error records, byte buffers and the UTF-8 check shared by every engine module.
#include "common.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tp_error_set(TpError *err, int code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

int tp_error_errno(TpError *err, const char *fmt, ...) {
  int saved = errno;
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof err->msg) {
      snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(saved));
    }
    err->code = -saved;
  }
  return -saved;
}

const char *tp_error_name(int code) {
  switch (code) {
    case 0:
      return "OK";
    case TP_EPARSE:
      return "EPARSE";
    case TP_ENOGPU:
      return "ENOGPU";
    case TP_ELIMIT:
      return "ELIMIT";
    case TP_ETIMEOUT:
      return "ETIMEDOUT";
    case TP_EINVAL:
      return "EINVAL";
    case TP_ENOMEM:
      return "ENOMEM";
    case TP_ENOTDB:
      return "ENOTDB";
    case TP_ECONNECT:
      return "ECONNECT";
    case TP_EAUTH:
      return "EAUTH";
    case TP_EDB:
      return "EDB";
    default:
      break;
  }
  if (code < 0 && code > -4096) {
    const char *name = strerrorname_np(-code);
    if (name) {
      return name;
    }
  }
  return "EUNKNOWN";
}

int tp_buf_reserve(TpBuf *b, size_t extra) {
  if (extra <= b->cap - b->len) {
    return 0;
  }
  if (extra > SIZE_MAX - b->len) {
    return TP_ENOMEM;
  }
  size_t need = b->len + extra;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) {
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  }
  char *p = realloc(b->data, cap);
  if (!p) {
    return TP_ENOMEM;
  }
  b->data = p;
  b->cap = cap;
  return 0;
}

int tp_buf_append(TpBuf *b, const void *p, size_t n) {
  if (n == 0) {
    return 0;
  }
  if (tp_buf_reserve(b, n) != 0) {
    return TP_ENOMEM;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

int tp_buf_printf(TpBuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || tp_buf_reserve(b, (size_t)n + 1) != 0) {
    va_end(ap2);
    return TP_ENOMEM;
  }
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  b->len += (size_t)n;
  return 0;
}

const char *tp_buf_cstr(TpBuf *b) {
  if (tp_buf_reserve(b, 1) != 0) {
    return NULL;
  }
  b->data[b->len] = '\0';
  return b->data;
}

void tp_buf_free(TpBuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

// RFC 3629 §4 (the table of well-formed byte sequences).
size_t tp_utf8_len(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  if (c < 0x80) {
    return 1;
  }
  if (c >= 0xC2 && c <= 0xDF) {
    return (n >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) {
      return 0;
    }
    // E0 A0..BF (no overlong form), ED 80..9F (no surrogates).
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F)) {
      return 0;
    }
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) {
      return 0;
    }
    // F0 90..BF (no overlong form), F4 80..8F (nothing above U+10FFFF).
    if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F)) {
      return 0;
    }
    return 4;
  }
  return 0;
}
