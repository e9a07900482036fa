// JSON text pieces shared by the encoders. Number text follows IEEE 754-2008 §5.12.2 (17
// significant digits round-trip a binary64); string escapes follow RFC 8259 §7.
#include "jsonw.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- Numbers ----------------------------------------------------------------------------------
//
// The text is the shortest of printf's %.15g, %.16g, %.17g that strtod reads back as x. Asking
// printf and strtod costs about a microsecond per number, most of a record writer's time, so the
// digits of %.15g and %.16g are first found with exact double arithmetic when that can decide:
// 10^s for s <= 22 and integers below 2^53 are exact doubles, and IEEE division is correctly
// rounded, so c / 10^s == x says exactly that strtod reads the decimal c * 10^-s as x (Clinger's
// fast path, W. D. Clinger, "How to read floating point numbers accurately", PLDI 1990). Where it
// cannot decide, printf and strtod do as before, so the text is the same byte for byte.

static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#define POW10_EXACT_MAX 22

typedef enum { SHORT_NO, SHORT_YES, SHORT_UNSURE } ShortResult;

// Index of the lowest set bit of m (not 0).
static int lowest_bit(uint64_t m) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_ctzll(m);
#else
  int k = 0;
  while ((m & 1) == 0) {
    m >>= 1;
    k++;
  }
  return k;
#endif
}

// Whether %.<prec>g of x (positive, normal; prec 15 or 16) reads back as x: SHORT_YES with its
// digits (*digits, prec of them, the value digits * 10^-*scale), SHORT_NO, or SHORT_UNSURE when
// exact double arithmetic cannot tell (x out of range, a rounding tie, two candidates). x is in
// [2^e2, 2^(e2+1)) and its lowest set bit is worth 2^low.
static ShortResult short_digits(double x, int e2, int low, int prec, uint64_t *digits, int *scale) {
#if FLT_EVAL_METHOD == 0  // x87 excess precision would break the exactness argument
  const double lo = pow10_exact[prec - 1], hi = pow10_exact[prec];
  // floor(log10(x)) is floor(e2 * log10(2)) or one more.
  int s = prec - 1 - (int)floor(e2 * 0.30102999566398120);
  double prod = 0;
  for (int k = 0; k < 3; k++) {
    if (s < 0 || s > POW10_EXACT_MAX) {
      return SHORT_UNSURE;
    }
    prod = x * pow10_exact[s];
    if (prod < lo) {
      s++;
    } else if (prod >= hi) {
      s--;
    } else {
      break;
    }
  }
  // Below 2^53 the product is within 0.5 of x * 10^s, so the prec-digit rounding printf gives is
  // one of round(prod) - 1 .. round(prod) + 1; the margins keep it prec digits long.
  if (!(prod >= lo + 1 && prod <= hi - 2 && prod <= 9007199254740990.0)) {
    return SHORT_UNSURE;
  }
  // x * 10^s halfway between two integers (x = odd * 2^-(s+1)): printf's tie rule would decide.
  if (low == -(s + 1)) {
    return SHORT_UNSURE;
  }
  // The nearest decimal reads back as x whenever any candidate does; with one that does, it is
  // that one. Decimals of DBL_DIG digits never share a double, so the first found is the one.
  const double p = pow10_exact[s];
  uint64_t near = (uint64_t)(prod + 0.5);
  const uint64_t cand[3] = {near, near - 1, near + 1};
  int found = 0;
  for (int k = 0; k < 3; k++) {
    if ((double)cand[k] / p == x) {
      if (found++ == 0) {
        *digits = cand[k];
      }
      if (prec <= DBL_DIG) {
        break;
      }
    }
  }
  if (found > 1) {
    return SHORT_UNSURE;
  }
  *scale = s;
  return found ? SHORT_YES : SHORT_NO;
#else
  (void)x;
  (void)e2;
  (void)low;
  (void)prec;
  (void)digits;
  (void)scale;
  return SHORT_UNSURE;
#endif
}

// "00" "01" ... "99"
static const char two_digits[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// Writes the 8 decimal digits of v (below 10^8, leading zeros included) to d.
static void put8(char *d, uint32_t v) {
  for (int i = 6; i >= 0; i -= 2) {
    uint32_t q = v / 100;
    memcpy(d + i, two_digits + 2 * (v - q * 100), 2);
    v = q;
  }
}

// Writes what printf's %.<prec>g writes for the value digits * 10^-scale (prec digits, scale
// 0..22, so the exponent is below prec), with "-" first when neg, and ".0" after an integer.
static size_t format_g(char *buf, bool neg, uint64_t digits, int prec, int scale) {
  char all[16];  // digits is below 10^16: two halves of 8 digits
  put8(all, (uint32_t)(digits / 100000000));
  put8(all + 8, (uint32_t)(digits % 100000000));
  const char *d = all + 16 - prec;
  int nd = prec;  // digits without the trailing zeros %g drops
  while (nd > 1 && d[nd - 1] == '0') {
    nd--;
  }
  int x10 = prec - 1 - scale;  // decimal exponent of the first digit
  char *p = buf;
  if (neg) {
    *p++ = '-';
  }
  if (x10 < -4) {  // %e style: d.ddde-XX
    *p++ = d[0];
    if (nd > 1) {
      *p++ = '.';
      memcpy(p, d + 1, (size_t)nd - 1);
      p += nd - 1;
    }
    int e = -x10;
    *p++ = 'e';
    *p++ = '-';
    *p++ = (char)('0' + e / 10);
    *p++ = (char)('0' + e % 10);
  } else if (x10 < 0) {  // 0.000ddd
    *p++ = '0';
    *p++ = '.';
    for (int i = 0; i < -x10 - 1; i++) {
      *p++ = '0';
    }
    memcpy(p, d, (size_t)nd);
    p += nd;
  } else {  // ddd.ddd, or ddd.0
    for (int i = 0; i <= x10; i++) {
      *p++ = i < nd ? d[i] : '0';
    }
    if (nd > x10 + 1) {
      *p++ = '.';
      memcpy(p, d + x10 + 1, (size_t)(nd - x10 - 1));
      p += nd - x10 - 1;
    } else {
      *p++ = '.';
      *p++ = '0';
    }
  }
  *p = '\0';
  return (size_t)(p - buf);
}

size_t tp_jsonw_float(char *buf, size_t cap, double x) {
  int start = 15;  // the first precision printf must try
  if (isnormal(x) && cap >= TP_JSONW_NUM_MAX) {
    bool neg = x < 0;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int biased = (int)(bits >> 52 & 0x7ff);
    uint64_t mant = (bits & ((UINT64_C(1) << 52) - 1)) | UINT64_C(1) << 52;
    int low = biased - 1075 + lowest_bit(mant);
    uint64_t digits;
    int scale;
    for (int prec = 15; prec <= 16; prec++) {
      ShortResult r = short_digits(neg ? -x : x, biased - 1023, low, prec, &digits, &scale);
      if (r == SHORT_YES) {
        return format_g(buf, neg, digits, prec, scale);
      }
      if (r == SHORT_UNSURE) {
        break;
      }
      start = prec + 1;
    }
  }
  int n = 0;
  for (int prec = start; prec <= 17; prec++) {
    n = snprintf(buf, cap, "%.*g", prec, x);
    if (prec == 17 || strtod(buf, NULL) == x) {
      break;  // 17 digits always read back
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
