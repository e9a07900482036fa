// JSON text pieces shared by the encoders. Number text follows IEEE 754-2008 §5.12.2 (17
// significant digits round-trip a binary64); string escapes follow RFC 8259 §7.
#include "jsonw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t tp_jsonw_float(char *buf, size_t cap, double x) {
  int n = 0;
  for (int prec = 15; prec <= 17; prec++) {
    n = snprintf(buf, cap, "%.*g", prec, x);
    if (strtod(buf, NULL) == x) {
      break;
    }
  }
  if (n > 0 && (size_t)n + 2 < cap && !strpbrk(buf, ".eEni")) {
    memcpy(buf + n, ".0", 3);
    n += 2;
  }
  return n > 0 ? (size_t)n : 0;
}

int tp_jsonw_string(TpBuf *out, const char *str, size_t n, size_t *bad) {
  static const char hexd[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)str;
  if (tp_buf_reserve(out, n + 2) != 0 || tp_buf_append(out, "\"", 1) != 0) {
    return TP_ENOMEM;
  }
  size_t run = 0, i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0x80) {
      size_t k = tp_utf8_len(s + i, n - i);
      if (k == 0) {
        if (bad) {
          *bad = i;
        }
        return TP_EINVAL;
      }
      i += k;
      continue;
    }
    if (tp_buf_append(out, s + run, i - run) != 0) {
      return TP_ENOMEM;
    }
    char esc[6] = {'\\', 0, 0, 0, 0, 0};
    size_t elen = 2;
    switch (c) {
      case '"':
        esc[1] = '"';
        break;
      case '\\':
        esc[1] = '\\';
        break;
      case '\n':
        esc[1] = 'n';
        break;
      case '\r':
        esc[1] = 'r';
        break;
      case '\t':
        esc[1] = 't';
        break;
      case '\b':
        esc[1] = 'b';
        break;
      case '\f':
        esc[1] = 'f';
        break;
      default:
        memcpy(esc + 1, "u00", 3);
        esc[4] = hexd[c >> 4];
        esc[5] = hexd[c & 15];
        elen = 6;
        break;
    }
    if (tp_buf_append(out, esc, elen) != 0) {
      return TP_ENOMEM;
    }
    run = ++i;
  }
  if (tp_buf_append(out, s + run, n - run) != 0 || tp_buf_append(out, "\"", 1) != 0) {
    return TP_ENOMEM;
  }
  return 0;
}
