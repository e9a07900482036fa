// Minimal assertions for the engine's C unit tests: each failure prints file:line and values;
// CHECK_DONE() prints "N passed, M failed" and gives main's exit status.
#pragma once

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_passed;
static int check_failed;

#define CHECK_REPORT_(ok, ...)                                                                     \
  do {                                                                                             \
    if (ok) {                                                                                      \
      check_passed++;                                                                              \
    } else {                                                                                       \
      check_failed++;                                                                              \
      fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);                                \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

#define CHECK(cond) CHECK_REPORT_((cond), "%s", #cond)
#define CHECK_INT(a, b)                                                                            \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    CHECK_REPORT_(a_ == b_, "%s == %s (%lld vs %lld)", #a, #b, a_, b_);                            \
  } while (0)
#define CHECK_NUM(a, b, reltol)                                                                    \
  do {                                                                                             \
    double a_ = (double)(a), b_ = (double)(b);                                                     \
    double d_ = fabs(a_ - b_), s_ = fabs(b_) > 1e-300 ? fabs(b_) : 1.0;                            \
    CHECK_REPORT_(d_ <= (reltol)*s_, "%s ~= %s (%.17g vs %.17g)", #a, #b, a_, b_);                 \
  } while (0)
#define CHECK_STR(a, b)                                                                            \
  do {                                                                                             \
    const char *a_ = (a), *b_ = (b);                                                               \
    CHECK_REPORT_(a_ &&b_ &&strcmp(a_, b_) == 0, "%s == %s (\"%s\" vs \"%s\")", #a, #b,            \
                  a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                         \
  } while (0)

#define CHECK_DONE()                                                                               \
  (printf("%d passed, %d failed\n", check_passed, check_failed),                                   \
   (check_failed == 0 && check_passed > 0) ? 0 : 1)
