// Exact number and timestamp parsing for the log scanner (the text as the frameworks print it).
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logscan_num.h"

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static bool ieq(const char *p, const char *lit, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    if (c >= 'A' && c <= 'Z') {
      c = (char)(c - 'A' + 'a');
    }
    if (c != lit[i]) {
      return false;
    }
  }
  return true;
}

// strtod_l in the C locale on p[0, n) without its thousands separators.
static double slow_convert(const char *p, size_t n) {
  char small[128];
  char *buf = n < sizeof small ? small : malloc(n + 1);
  if (!buf) {
    return NAN;
  }
  size_t b = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] != ',') {
      buf[b++] = p[i];
    }
  }
  buf[b] = '\0';
  double d;
  locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (c) {
    d = strtod_l(buf, NULL, c);
    freelocale(c);
  } else {
    d = strtod(buf, NULL);
  }
  if (buf != small) {
    free(buf);
  }
  return d;
}

// True when a thousands separator starts at p[i]: ',' then exactly three digits.
static bool thousands_sep(const char *p, size_t n, size_t i) {
  return i + 4 <= n && p[i] == ',' && is_digit(p[i + 1]) && is_digit(p[i + 2]) &&
         is_digit(p[i + 3]) && (i + 4 == n || !is_digit(p[i + 4]));
}

// Reads the number in one pass. The value is exact: with at most 19 significant digits, a
// mantissa up to 2^53 and |exponent| <= 22, one IEEE multiplication or division of two exact
// doubles is the correctly rounded result (Clinger's fast path, the one strtod takes too);
// anything else goes to strtod_l in the C locale, so the result never depends on the locale.
size_t tp_logscan_parse_number(const char *p, size_t n, double *out) {
  static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  size_t i = 0;
  bool neg = false;
  if (i < n && (p[i] == '-' || p[i] == '+')) {
    neg = p[i] == '-';
    i++;
  }
  if (i < n && (p[i] == 'n' || p[i] == 'N' || p[i] == 'i' || p[i] == 'I')) {
    // nan / inf / infinity in any case (Python prints "nan", "inf", "-inf").
    if (i + 3 > n || !(ieq(p + i, "nan", 3) || ieq(p + i, "inf", 3))) {
      return 0;
    }
    bool is_nan = ieq(p + i, "nan", 3);
    size_t j = i + 3;
    if (!is_nan && j + 5 <= n && ieq(p + j, "inity", 5)) {
      j += 5;
    }
    if (j < n && ((p[j] >= 'a' && p[j] <= 'z') || (p[j] >= 'A' && p[j] <= 'Z') || p[j] == '_')) {
      return 0;
    }
    *out = is_nan ? NAN : (neg ? -INFINITY : INFINITY);
    return j;
  }
  uint64_t mant = 0;
  int nd = 0;         // significant digits in mant
  bool more = false;  // significant digits beyond 19: only strtod rounds them right
  long e10 = 0;       // value = mant * 10^e10 (when !more)
  size_t int_digits = 0, frac_digits = 0, group = 0;
  bool grouped = false;
  while (i < n) {
    char c = p[i];
    if (is_digit(c)) {
      if (mant || c != '0') {
        if (nd < 19) {
          mant = mant * 10 + (uint64_t)(c - '0');
          nd++;
        } else {
          more = true;
          e10++;
        }
      }
      int_digits++;
      group++;
      i++;
    } else if (c == ',' && int_digits > 0 && (grouped || group <= 3) && thousands_sep(p, n, i)) {
      grouped = true;
      group = 0;
      i++;
    } else {
      break;
    }
  }
  if (i < n && p[i] == '.') {
    size_t j = i + 1;
    while (j < n && is_digit(p[j])) {
      char c = p[j];
      if (mant || c != '0') {
        if (nd < 19) {
          mant = mant * 10 + (uint64_t)(c - '0');
          nd++;
          e10--;
        } else {
          more = true;
        }
      } else {
        e10--;
      }
      j++;
    }
    frac_digits = j - i - 1;
    if (int_digits > 0 || frac_digits > 0) {
      i = j;
    }
  }
  if (int_digits == 0 && frac_digits == 0) {
    return 0;
  }
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    size_t j = i + 1;
    bool eneg = false;
    if (j < n && (p[j] == '+' || p[j] == '-')) {
      eneg = p[j] == '-';
      j++;
    }
    if (j < n && is_digit(p[j])) {
      long e = 0;
      while (j < n && is_digit(p[j])) {
        if (e < 100000) {
          e = e * 10 + (p[j] - '0');
        }
        j++;
      }
      e10 += eneg ? -e : e;
      i = j;
    }
  }
  if (mant == 0 && !more) {
    *out = neg ? -0.0 : 0.0;
    return i;
  }
  if (!more && mant <= (UINT64_C(1) << 53) && e10 >= -22 && e10 <= 22) {
    double d = (double)mant;
    d = e10 < 0 ? d / pow10[-e10] : d * pow10[e10];
    *out = neg ? -d : d;
    return i;
  }
  *out = slow_convert(p, i);
  return i;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static bool digits(const char *p, size_t n, size_t at, size_t count, int *out) {
  if (at + count > n) {
    return false;
  }
  int v = 0;
  for (size_t i = 0; i < count; i++) {
    if (!is_digit(p[at + i])) {
      return false;
    }
    v = v * 10 + (p[at + i] - '0');
  }
  *out = v;
  return true;
}

bool tp_logscan_parse_time(const char *p, size_t n, double *out) {
  int y, mo, d, h, mi, sec;
  size_t i;
  // Date: YYYY-MM-DD or YYYYMMDD.
  if (!digits(p, n, 0, 4, &y)) {
    return false;
  }
  if (n > 4 && p[4] == '-') {
    if (!digits(p, n, 5, 2, &mo) || n < 8 || p[7] != '-' || !digits(p, n, 8, 2, &d)) {
      return false;
    }
    i = 10;
  } else {
    if (!digits(p, n, 4, 2, &mo) || !digits(p, n, 6, 2, &d)) {
      return false;
    }
    i = 8;
  }
  if (i >= n || (p[i] != ' ' && p[i] != 'T' && p[i] != '_')) {
    return false;
  }
  i++;
  if (!digits(p, n, i, 2, &h) || i + 2 >= n || p[i + 2] != ':' || !digits(p, n, i + 3, 2, &mi) ||
      i + 5 >= n || p[i + 5] != ':' || !digits(p, n, i + 6, 2, &sec)) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 24 || mi > 59 || sec > 60) {
    return false;
  }
  i += 8;
  double frac = 0.0;
  if (i < n && (p[i] == '.' || p[i] == ',')) {
    size_t j = i + 1;
    double scale = 0.1;
    while (j < n && is_digit(p[j])) {
      frac += (p[j] - '0') * scale;
      scale /= 10;
      j++;
    }
    if (j == i + 1) {
      return false;
    }
    i = j;
  }
  double offset = 0.0;
  if (i < n && (p[i] == '+' || p[i] == '-')) {
    int oh, om = 0;
    if (digits(p, n, i + 1, 2, &oh)) {
      size_t j = i + 3;
      if (j < n && p[j] == ':') {
        j++;
      }
      if (digits(p, n, j, 2, &om)) {
        offset = (oh * 3600.0 + om * 60.0) * (p[i] == '-' ? -1.0 : 1.0);
      }
    }
  }
  int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
  *out = (double)(days * 86400 + h * 3600 + mi * 60 + sec) + frac - offset;
  return true;
}
