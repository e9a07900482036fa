// Unit tests of engine/changepoint: E-divisive means with the t test and merge step, and with the
// permutation test. Series are built from the engine's seeded generator, so every run sees the
// same values; the statistic and the p-value are checked against direct sums and the t test
// worked out here.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "changepoint.h"
#include "check.h"
#include "stats.h"

#define MAXN 1000

static double gauss(TpStatsRng *rng) {
  double u = (double)(tp_stats_rng_next(rng) >> 11) * 0x1.0p-53;
  double v = (double)(tp_stats_rng_next(rng) >> 11) * 0x1.0p-53;
  return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * 3.14159265358979323846 * v);
}

// x[i] = level * (1 + cv * noise), the level multiplied by (1 + sizes[j]) from steps[j] on.
static void series(double *x, size_t n, double cv, const size_t *steps, const double *sizes,
                   size_t nsteps, uint64_t seed) {
  TpStatsRng rng;
  tp_stats_rng_seed(&rng, seed);
  double level = 1000.0;
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (j < nsteps && i == steps[j]) {
      level *= 1.0 + sizes[j];
      j++;
    }
    x[i] = level * (1.0 + cv * gauss(&rng));
  }
}

static double mean(const double *x, size_t a, size_t b) {
  double s = 0.0;
  for (size_t i = a; i < b; i++) {
    s += x[i];
  }
  return s / (double)(b - a);
}

// Q^ of x[a..b) against x[b..c) straight from the definition (Matteson & James 2014, eq. 3-4).
static double q_direct(const double *x, size_t a, size_t b, size_t c) {
  double between = 0.0;
  double left = 0.0;
  double right = 0.0;
  for (size_t i = a; i < c; i++) {
    for (size_t j = i + 1; j < c; j++) {
      double d = fabs(x[i] - x[j]);
      if (j < b) {
        left += d;
      } else if (i >= b) {
        right += d;
      } else {
        between += d;
      }
    }
  }
  double n = (double)(b - a);
  double m = (double)(c - b);
  return n * m / (n + m) *
         (2.0 * between / (n * m) - left / (n * (n - 1.0) / 2.0) - right / (m * (m - 1.0) / 2.0));
}

// Student's t (pooled) of x[a..b) against x[b..c) and its two-sided p, multiplied by the number of
// positions between a and c (c - a - 2 min_size + 1), capped at 1.
static double p_direct(const double *x, size_t a, size_t b, size_t c, size_t min_size,
                       double *t_out) {
  double m1 = mean(x, a, b);
  double m2 = mean(x, b, c);
  double ss = 0.0;
  for (size_t i = a; i < c; i++) {
    double d = x[i] - (i < b ? m1 : m2);
    ss += d * d;
  }
  double n1 = (double)(b - a);
  double n2 = (double)(c - b);
  double df = n1 + n2 - 2.0;
  double t = (m2 - m1) / sqrt(ss / df * (1.0 / n1 + 1.0 / n2));
  *t_out = t;
  double p = tp_stats_t_p2(t, df) * (double)(c - a - 2 * min_size + 1);
  return p > 1.0 ? 1.0 : p;
}

static void test_hand_worked(void) {
  // 0 0 1 1, min_size 2: one split, tau = 2. Between: four distances of 1, 2 / (2 * 2) * 4 = 2;
  // within both sides 0; Q^ = 2 * 2 / 4 * 2 = 2. No spread on either side and a difference: p 0.
  const double x[] = {0, 0, 1, 1};
  TpChangepointOptions opt;
  tp_changepoint_defaults(&opt);
  opt.min_size = 2;
  TpChangepoint out[4];
  size_t count = 9;
  TpError err = {0};
  CHECK_INT(tp_changepoint_detect(x, 4, &opt, out, &count, &err), 0);
  CHECK_INT(count, 1);
  CHECK_INT(out[0].index, 2);
  CHECK_NUM(out[0].stat, 2.0, 1e-15);
  CHECK_NUM(out[0].p, 0.0, 0);
  CHECK(isinf(out[0].t) && out[0].t > 0);
  CHECK_NUM(out[0].mean_before, 0.0, 0);
  CHECK_NUM(out[0].mean_after, 1.0, 0);
}

static void test_single_step(void) {
  // 60 nights, CV 1 %, tokens/s down 4 % from night 31 (index 30).
  double x[MAXN];
  const size_t steps[] = {30};
  const double sizes[] = {-0.04};
  series(x, 60, 0.01, steps, sizes, 1, 11);
  TpChangepointOptions opt;
  tp_changepoint_defaults(&opt);
  TpChangepoint out[MAXN];
  size_t count = 0;
  TpError err = {0};
  CHECK_INT(tp_changepoint_detect(x, 60, &opt, out, &count, &err), 0);
  CHECK_INT(count, 1);
  CHECK_INT(out[0].index, 30);
  CHECK_NUM(out[0].mean_before, mean(x, 0, 30), 1e-13);
  CHECK_NUM(out[0].mean_after, mean(x, 30, 60), 1e-13);
  CHECK_NUM(out[0].stat, q_direct(x, 0, 30, 60), 1e-10);
  double t = 0.0;
  CHECK_NUM(out[0].p, p_direct(x, 0, 30, 60, opt.min_size, &t), 1e-10);
  CHECK_NUM(out[0].t, t, 1e-12);
  CHECK(out[0].t < -5.0);
  CHECK(out[0].p < 1e-6);
  CHECK(out[0].mean_after < 0.97 * out[0].mean_before);

  // The same series detected again gives the same answer, bit for bit.
  TpChangepoint again[MAXN];
  size_t count2 = 0;
  CHECK_INT(tp_changepoint_detect(x, 60, &opt, again, &count2, &err), 0);
  CHECK_INT(count2, 1);
  CHECK(again[0].index == out[0].index && again[0].stat == out[0].stat && again[0].p == out[0].p);
}

static void test_two_steps(void) {
  // 120 nights, CV 1.5 %: up 5 % at index 40, down 3 % at index 80.
  double x[MAXN];
  const size_t steps[] = {40, 80};
  const double sizes[] = {0.05, -0.03};
  series(x, 120, 0.015, steps, sizes, 2, 5);
  TpChangepointOptions opt;
  tp_changepoint_defaults(&opt);
  TpChangepoint out[MAXN];
  size_t count = 0;
  TpError err = {0};
  CHECK_INT(tp_changepoint_detect(x, 120, &opt, out, &count, &err), 0);
  CHECK_INT(count, 2);
  // Within a point of the truth (the noise decides the exact night of a 3-sigma step).
  CHECK(out[0].index >= 39 && out[0].index <= 41);
  CHECK(out[1].index >= 79 && out[1].index <= 81);
  // Adjacent segments: [0, i1) | [i1, i2) for the first, [i1, i2) | [i2, 120) for the second.
  size_t i1 = out[0].index;
  size_t i2 = out[1].index;
  CHECK_NUM(out[0].mean_before, mean(x, 0, i1), 1e-13);
  CHECK_NUM(out[0].mean_after, mean(x, i1, i2), 1e-13);
  CHECK_NUM(out[1].mean_before, mean(x, i1, i2), 1e-13);
  CHECK_NUM(out[1].mean_after, mean(x, i2, 120), 1e-13);
  CHECK_NUM(out[0].stat, q_direct(x, 0, i1, i2), 1e-10);
  CHECK_NUM(out[1].stat, q_direct(x, i1, i2, 120), 1e-10);
  double t = 0.0;
  CHECK_NUM(out[0].p, p_direct(x, 0, i1, i2, opt.min_size, &t), 1e-10);
  CHECK_NUM(out[1].p, p_direct(x, i1, i2, 120, opt.min_size, &t), 1e-10);
  CHECK(out[0].t > 0 && out[1].t < 0);

  // max_points 1 keeps the stronger change (5 % in 1.5 % noise, against 3 %).
  opt.max_points = 1;
  CHECK_INT(tp_changepoint_capacity(120, &opt), 1);
  CHECK_INT(tp_changepoint_detect(x, 120, &opt, out, &count, &err), 0);
  CHECK_INT(count, 1);
  CHECK_INT(out[0].index, i1);
}

static void test_noise(void) {
  // Pure noise: 100 series of 100 points and 5 of 1,000 (CV 2 %). At alpha 0.01 with the p-values
  // adjusted for the positions searched, about 1 % of series may alarm; more than 4 of 100 (or any
  // of the long ones, where unadjusted p-values alarm on most) is a failure.
  double x[MAXN];
  TpChangepointOptions opt;
  tp_changepoint_defaults(&opt);
  TpChangepoint out[MAXN];
  TpError err = {0};
  size_t alarmed = 0;
  for (uint64_t seed = 1; seed <= 100; seed++) {
    series(x, 100, 0.02, NULL, NULL, 0, 1000 + seed);
    size_t count = 0;
    CHECK_INT(tp_changepoint_detect(x, 100, &opt, out, &count, &err), 0);
    alarmed += count > 0;
  }
  CHECK(alarmed <= 4);
  size_t long_alarms = 0;
  for (uint64_t seed = 1; seed <= 5; seed++) {
    series(x, 1000, 0.02, NULL, NULL, 0, 2000 + seed);
    size_t count = 0;
    CHECK_INT(tp_changepoint_detect(x, 1000, &opt, out, &count, &err), 0);
    long_alarms += count;
  }
  CHECK_INT(long_alarms, 0);
}

static void test_constant_and_short(void) {
  double x[MAXN];
  for (size_t i = 0; i < 50; i++) {
    x[i] = 1234.5;
  }
  TpChangepointOptions opt;
  tp_changepoint_defaults(&opt);
  TpChangepoint out[MAXN];
  size_t count = 7;
  TpError err = {0};
  CHECK_INT(tp_changepoint_detect(x, 50, &opt, out, &count, &err), 0);
  CHECK_INT(count, 0);

  // Fewer than 2 min_size values: nothing to split, no error (n = 0 included).
  const double y[] = {1, 1, 1, 1, 1, 9, 9, 9, 9};
  CHECK_INT(tp_changepoint_capacity(9, &opt), 0);
  CHECK_INT(tp_changepoint_detect(y, 9, &opt, out, &count, &err), 0);
  CHECK_INT(count, 0);
  CHECK_INT(tp_changepoint_detect(NULL, 0, &opt, out, &count, &err), 0);
  CHECK_INT(count, 0);
  // Exactly 2 min_size: one split is possible, and this one is certain.
  const double z[] = {1, 1, 1, 1, 1, 9, 9, 9, 9, 9};
  CHECK_INT(tp_changepoint_capacity(10, &opt), 1);
  CHECK_INT(tp_changepoint_detect(z, 10, &opt, out, &count, &err), 0);
  CHECK_INT(count, 1);
  CHECK_INT(out[0].index, 5);
}

static void test_bad_input(void) {
  double x[20];
  for (size_t i = 0; i < 20; i++) {
    x[i] = (double)i;
  }
  TpChangepointOptions opt;
  tp_changepoint_defaults(&opt);
  TpChangepoint out[20];
  size_t count = 5;
  TpError err = {0};
  x[2] = NAN;
  CHECK_INT(tp_changepoint_detect(x, 20, &opt, out, &count, &err), TP_EINVAL);
  CHECK_STR(err.msg, "change_points: value #3 is NaN");
  CHECK_INT(count, 0);
  x[2] = 2.0;
  x[19] = -INFINITY;
  CHECK_INT(tp_changepoint_detect(x, 20, &opt, out, &count, &err), TP_EINVAL);
  CHECK_STR(err.msg, "change_points: value #20 is infinite");
  // A NaN in a series too short to split is still rejected.
  CHECK_INT(tp_changepoint_detect(x + 15, 5, &opt, out, &count, &err), TP_EINVAL);
  x[19] = 19.0;
  opt.alpha = 0.0;
  CHECK_INT(tp_changepoint_detect(x, 20, &opt, out, &count, &err), TP_EINVAL);
  CHECK_STR(err.msg, "change_points: significance level 0 outside (0, 1)");
  opt.alpha = 0.01;
  opt.min_size = 1;
  CHECK_INT(tp_changepoint_detect(x, 20, &opt, out, &count, &err), TP_EINVAL);
  CHECK_STR(err.msg, "change_points: minimum segment size 1 below 2");
}

static void test_permutations(void) {
  double x[MAXN];
  const size_t steps[] = {25};
  const double sizes[] = {0.05};
  series(x, 50, 0.01, steps, sizes, 1, 21);
  TpChangepointOptions opt;
  tp_changepoint_defaults(&opt);
  opt.alpha = 0.05;
  opt.permutations = 99;
  opt.seed = 7;
  TpChangepoint out[MAXN];
  size_t count = 0;
  TpError err = {0};
  CHECK_INT(tp_changepoint_detect(x, 50, &opt, out, &count, &err), 0);
  CHECK_INT(count, 1);
  CHECK_INT(out[0].index, 25);
  // No permutation reaches the observed divergence of a 5-sigma step: p = 1 / (99 + 1).
  CHECK_NUM(out[0].p, 0.01, 1e-15);
  CHECK_NUM(out[0].stat, q_direct(x, 0, 25, 50), 1e-10);
  // Seeded: the same seed gives the same result.
  TpChangepoint again[MAXN];
  size_t count2 = 0;
  CHECK_INT(tp_changepoint_detect(x, 50, &opt, again, &count2, &err), 0);
  CHECK(count2 == 1 && again[0].p == out[0].p && again[0].index == out[0].index);

  // On noise the permutation p-value is not small: a flat series gets no change point.
  series(x, 50, 0.01, NULL, NULL, 0, 22);
  CHECK_INT(tp_changepoint_detect(x, 50, &opt, out, &count, &err), 0);
  CHECK_INT(count, 0);
}

int main(void) {
  test_hand_worked();
  test_single_step();
  test_two_steps();
  test_noise();
  test_constant_and_short();
  test_bad_input();
  test_permutations();
  return CHECK_DONE();
}
