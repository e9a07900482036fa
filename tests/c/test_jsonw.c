// Unit tests of engine/jsonw: numbers are byte for byte what the plain rule gives (the shortest of
// printf's %.15g, %.16g, %.17g that strtod reads back, ".0" after an integer) over half a million
// doubles of the kinds logs hold and of every bit pattern; string escapes.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common.h"
#include "jsonw.h"

// The rule tp_jsonw_float documents, with printf and strtod only.
static size_t plain_float(char *buf, size_t cap, double x) {
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

static uint64_t rng_state = 88172645463325252u;

// xorshift64 (G. Marsaglia, "Xorshift RNGs", 2003): deterministic, so a failure repeats.
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static double from_bits(uint64_t b) {
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
}

static uint64_t to_bits(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static double from_text(const char *fmt, double v) {
  char s[64];
  snprintf(s, sizeof s, fmt, v);
  return strtod(s, NULL);
}

static long mismatches;

static void same(double x) {
  char want[TP_JSONW_NUM_MAX], got[TP_JSONW_NUM_MAX];
  size_t nw = plain_float(want, sizeof want, x);
  size_t ng = tp_jsonw_float(got, sizeof got, x);
  if (ng != nw || strcmp(got, want) != 0) {
    if (mismatches++ < 10) {
      CHECK_STR(got, want);
    }
  }
}

static void test_known(void) {
  static const struct {
    double x;
    const char *text;
  } cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {-2.5, "-2.5"},
      {0.1, "0.1"},
      {2.654853, "2.654853"},
      {2.051594e-05, "2.051594e-05"},
      {0.0001, "0.0001"},
      {1e-5, "1e-05"},
      {123456789012345.0, "123456789012345.0"},
      {1e15, "1e+15"},
      {1786678911.190508, "1786678911.190508"},  // 16 digits
      {7124.8 / 1000.0, "7.1248000000000005"},   // 17 digits
      {1.0 / 3.0, "0.3333333333333333"},
      {DBL_MAX, "1.7976931348623157e+308"},
      {5e-324, "4.94065645841247e-324"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[TP_JSONW_NUM_MAX];
    size_t n = tp_jsonw_float(buf, sizeof buf, cases[i].x);
    CHECK_STR(buf, cases[i].text);
    CHECK_INT(n, strlen(cases[i].text));
    same(cases[i].x);
  }
}

// Doubles of the kinds logs hold (decimal text of 1 to 17 digits, milliseconds over 1000,
// timestamps, ratios), short binary fractions (where rounding ties sit), values next to powers
// of ten, and random bit patterns; each with its next double up.
static void test_against_printf(void) {
  for (long i = 0; i < 300000; i++) {
    uint64_t r = rng();
    double x;
    switch (i % 10) {
      case 0:
        x = from_bits(r);
        if (!isfinite(x)) {
          continue;
        }
        break;
      case 1: {
        char s[64];
        uint64_t digits = rng() % 100000000000000000u;
        uint64_t mod = 1;
        for (uint64_t k = r % 17; k > 0; k--) {
          mod *= 10;
        }
        snprintf(s, sizeof s, "%llue%d", (unsigned long long)(digits % (mod * 10)),
                 (int)(rng() % 40) - 25);
        x = strtod(s, NULL);
        break;
      }
      case 2:
        x = (double)(r % 100000) / (double)(1 + rng() % 1000);
        break;
      case 3:
        x = (double)(r % 100000000) / 1000.0;
        break;
      case 4:
        x = ldexp((double)(r % (1u << 20)), (int)(rng() % 80) - 60);
        break;
      case 5:
        x = from_bits(to_bits(pow(10, (int)(r % 40) - 20)) + (uint64_t)(rng() % 9) - 4u);
        break;
      case 6:
        x = 1786678911.0 + (double)(r % 1000000) / 1e6;
        break;
      case 7:
        x = from_text("%.6e", (double)(r % 1000000) * 1e-9);
        break;
      case 8:
        x = ldexp((double)(r & ((UINT64_C(1) << 53) - 1)), (int)(rng() % 120) - 100);
        break;
      default:
        x = from_text(r % 2 ? "%.15e" : "%.16e",
                      (double)rng() / 18446744073709551616.0 * pow(10, (int)(r % 30) - 15));
        break;
    }
    if (rng() & 1) {
      x = -x;
    }
    same(x);
    double up = from_bits(to_bits(x) + 1);
    if (isfinite(up)) {
      same(up);
    }
  }
  CHECK_INT(mismatches, 0);
}

static void test_strings(void) {
  TpBuf b = {0};
  const char s[] = "a\"b\\c\n\x01\xc3\xa9";
  CHECK_INT(tp_jsonw_string(&b, s, sizeof s - 1, NULL), 0);
  CHECK_INT(b.len, strlen("\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\""));
  CHECK(memcmp(b.data, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"", b.len) == 0);
  b.len = 0;
  size_t bad = 0;
  CHECK_INT(tp_jsonw_string(&b, "ok\xff", 3, &bad), TP_EINVAL);
  CHECK_INT(bad, 2);
  tp_buf_free(&b);
}

int main(void) {
  test_known();
  test_against_printf();
  test_strings();
  return CHECK_DONE();
}
