// Unit tests of engine/stats: each statistic against a value worked out by hand (the working is in
// the comment) or against a published output of R, SciPy or NumPy (cited where it is used).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "stats.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

// R's `sleep` data set (datasets package, Cushny & Peebles 1905): extra hours of sleep, 10
// patients per drug. Used by R's own examples of t.test and wilcox.test.
static const double sleep1[] = {0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0};
static const double sleep2[] = {1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};

static void test_location_spread(void) {
  // x = 2 4 4 4 5 5 7 9: sum 40, mean 5; squared deviations 9 1 1 1 0 0 4 16 = 32;
  // sample variance 32 / 7 = 4.571428..., stddev sqrt(32/7) = 2.138089935...; cv = 2.138.../5;
  // sorted middle pair 4, 5 -> median 4.5.
  const double x[] = {2, 4, 4, 4, 5, 5, 7, 9};
  double v = 0;
  TpError err = {0};
  CHECK_INT(tp_stats_mean(x, N_OF(x), &v, &err), 0);
  CHECK_NUM(v, 5.0, 1e-15);
  CHECK_INT(tp_stats_variance(x, N_OF(x), &v, &err), 0);
  CHECK_NUM(v, 32.0 / 7.0, 1e-15);
  CHECK_INT(tp_stats_stddev(x, N_OF(x), &v, &err), 0);
  CHECK_NUM(v, sqrt(32.0 / 7.0), 1e-15);
  CHECK_INT(tp_stats_cv(x, N_OF(x), &v, &err), 0);
  CHECK_NUM(v, sqrt(32.0 / 7.0) / 5.0, 1e-15);
  CHECK_INT(tp_stats_median(x, N_OF(x), &v, &err), 0);
  CHECK_NUM(v, 4.5, 1e-15);
  CHECK_INT(tp_stats_min(x, N_OF(x), &v, &err), 0);
  CHECK_NUM(v, 2.0, 0);
  CHECK_INT(tp_stats_max(x, N_OF(x), &v, &err), 0);
  CHECK_NUM(v, 9.0, 0);

  // Odd count: median is the middle value. 3 1 2 -> 2.
  const double odd[] = {3, 1, 2};
  CHECK_INT(tp_stats_median(odd, 3, &v, &err), 0);
  CHECK_NUM(v, 2.0, 0);

  // Large offset: 1e9 + {4, 7, 13, 16} has variance 30 (deviations -6 -3 3 6: 90 / 3); a one-pass
  // sum-of-squares formula loses every digit here.
  const double off[] = {1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16};
  CHECK_INT(tp_stats_variance(off, 4, &v, &err), 0);
  CHECK_NUM(v, 30.0, 1e-9);

  // R: with(sleep, sd(extra[group == 2])^2) = 4.009 (var of sleep2: sum of squares of deviations
  // from 2.33 is 36.081, / 9).
  CHECK_INT(tp_stats_variance(sleep2, N_OF(sleep2), &v, &err), 0);
  CHECK_NUM(v, 4.009, 1e-12);
}

static void test_percentile(void) {
  double v = 0;
  TpError err = {0};
  // NumPy docs, numpy.percentile example: a = [[10, 7, 4], [3, 2, 1]]; np.percentile(a, 50) = 3.5.
  const double a[] = {10, 7, 4, 3, 2, 1};
  CHECK_INT(tp_stats_percentile(a, N_OF(a), 50, &v, &err), 0);
  CHECK_NUM(v, 3.5, 1e-15);
  // 1..10: h = 9 p / 100. p5: h = 0.45 -> 1 + 0.45 * (2 - 1) = 1.45; p25: h = 2.25 -> 3.25;
  // p95: h = 8.55 -> 9.55; p0 = 1, p100 = 10 (np.percentile(np.arange(1, 11), [5, 25, 95])).
  const double ten[] = {7, 3, 10, 1, 5, 2, 9, 8, 6, 4};
  CHECK_INT(tp_stats_percentile(ten, 10, 5, &v, &err), 0);
  CHECK_NUM(v, 1.45, 1e-14);
  CHECK_INT(tp_stats_percentile(ten, 10, 25, &v, &err), 0);
  CHECK_NUM(v, 3.25, 1e-14);
  CHECK_INT(tp_stats_percentile(ten, 10, 95, &v, &err), 0);
  CHECK_NUM(v, 9.55, 1e-14);
  CHECK_INT(tp_stats_percentile(ten, 10, 0, &v, &err), 0);
  CHECK_NUM(v, 1.0, 0);
  CHECK_INT(tp_stats_percentile(ten, 10, 100, &v, &err), 0);
  CHECK_NUM(v, 10.0, 0);
  // One value: every percentile is that value.
  CHECK_INT(tp_stats_percentile(ten, 1, 37, &v, &err), 0);
  CHECK_NUM(v, 7.0, 0);
  // Out of range p.
  CHECK_INT(tp_stats_percentile(ten, 10, 101, &v, &err), TP_EINVAL);
  CHECK_STR(err.msg, "percentile: percentile 101 outside [0, 100]");
  CHECK_INT(tp_stats_percentile(ten, 10, NAN, &v, &err), TP_EINVAL);
}

static void test_summary(void) {
  TpError err = {0};
  TpStatsSummary s;
  const double ten[] = {7, 3, 10, 1, 5, 2, 9, 8, 6, 4};
  CHECK_INT(tp_stats_summary(ten, 10, &s, &err), 0);
  CHECK_INT(s.n, 10);
  CHECK_NUM(s.mean, 5.5, 1e-15);
  CHECK_NUM(s.median, 5.5, 1e-15);
  // 1..10: sum of squared deviations from 5.5 = 82.5, variance 82.5 / 9 = 9.1666...
  CHECK_NUM(s.variance, 82.5 / 9.0, 1e-14);
  CHECK_NUM(s.stddev, sqrt(82.5 / 9.0), 1e-14);
  CHECK_NUM(s.min, 1.0, 0);
  CHECK_NUM(s.max, 10.0, 0);
  CHECK_NUM(s.p5, 1.45, 1e-14);
  CHECK_NUM(s.p25, 3.25, 1e-14);
  CHECK_NUM(s.p75, 7.75, 1e-14);
  CHECK_NUM(s.p95, 9.55, 1e-14);
  CHECK_NUM(s.cv, sqrt(82.5 / 9.0) / 5.5, 1e-14);
  // n = 1: location defined, spread NaN.
  CHECK_INT(tp_stats_summary(ten, 1, &s, &err), 0);
  CHECK_NUM(s.mean, 7.0, 0);
  CHECK(isnan(s.stddev) && isnan(s.variance) && isnan(s.cv));
}

static void test_errors(void) {
  TpError err = {0};
  double v = 123;
  const double bad[] = {1, 2, NAN, 4};
  const double inf[] = {1, INFINITY};
  CHECK_INT(tp_stats_mean(bad, 4, &v, &err), TP_EINVAL);
  CHECK_STR(err.msg, "mean: value #3 is NaN");
  CHECK_NUM(v, 123, 0);  // untouched on failure
  CHECK_INT(tp_stats_max(inf, 2, &v, &err), TP_EINVAL);
  CHECK_STR(err.msg, "max: value #2 is infinite");
  CHECK_INT(tp_stats_mean(bad, 0, &v, &err), TP_EINVAL);
  CHECK_STR(err.msg, "mean: needs at least 1 value, got 0");
  CHECK_INT(tp_stats_stddev(bad, 1, &v, &err), TP_EINVAL);
  CHECK_STR(err.msg, "stddev: needs at least 2 values, got 1");
  const double zero_mean[] = {-1, 1};
  CHECK_INT(tp_stats_cv(zero_mean, 2, &v, &err), TP_EINVAL);
  CHECK_STR(err.msg, "cv: mean is 0");
  TpStatsSummary s;
  CHECK_INT(tp_stats_summary(bad, 4, &s, &err), TP_EINVAL);
  CHECK_STR(err.msg, "summary: value #3 is NaN");
  TpStatsWelch w;
  CHECK_INT(tp_stats_welch(sleep1, 10, bad, 4, &w, &err), TP_EINVAL);
  CHECK_STR(err.msg, "welch: value #3 of the second sample is NaN");
}

static void test_mser(void) {
  TpError err = {0};
  TpStatsMser m;
  // Four batches of 5 with means Y = 10, 1, 1, 2 (m = 4, d in 0..2):
  //   d = 0: mean 3.5, SS = 6.5^2 + 2.5^2 + 2.5^2 + 1.5^2 = 57,   MSER = 57 / 16  = 3.5625
  //   d = 1: mean 4/3, SS = 2 (1/3)^2 + (2/3)^2 = 6/9,          MSER = (6/9) / 9 = 0.074074...
  //   d = 2: mean 1.5, SS = 0.5^2 + 0.5^2 = 0.5,                MSER = 0.5 / 4   = 0.125
  // -> d* = 1, steady window from index 5, statistic 2/27.
  const double x[] = {10, 10, 10, 10, 10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2};
  CHECK_INT(tp_stats_mser(x, N_OF(x), 5, &m, &err), 0);
  CHECK_INT(m.start, 5);
  CHECK_INT(m.truncated, 1);
  CHECK_INT(m.batches, 4);  // the two trailing values form no batch
  CHECK_INT(m.batch, 5);
  CHECK_NUM(m.statistic, 2.0 / 27.0, 1e-12);

  // A flat series keeps everything: all MSER(d) are 0, the smallest d wins.
  const double flat[] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
  CHECK_INT(tp_stats_mser(flat, 10, 5, &m, &err), 0);
  CHECK_INT(m.start, 0);
  CHECK_NUM(m.statistic, 0.0, 0);

  // Batch size 1 (MSER of White 1997): 9 1 1 1 1 1: d in 0..3; d = 1 removes the transient and
  // leaves zero variance (MSER(1) = 0), so d* = 1.
  const double warm[] = {9, 1, 1, 1, 1, 1};
  CHECK_INT(tp_stats_mser(warm, 6, 1, &m, &err), 0);
  CHECK_INT(m.start, 1);
  CHECK_NUM(m.statistic, 0.0, 0);

  // The truncation point is restricted to the first half, so a transient in the second half is
  // kept: 1 1 1 1 9 9 with batch 1, d in 0..3:
  //   d = 0: mean 11/3, SS = 4 (8/3)^2 + 2 (16/3)^2 = 768/9, MSER = (768/9) / 36 = 2.370
  //   d = 1: mean 4.2,  SS = 3 (3.2)^2 + 2 (4.8)^2 = 76.8,  MSER = 76.8 / 25     = 3.072
  //   d = 2: mean 5,    SS = 4 * 16 = 64,                   MSER = 64 / 16       = 4
  //   d = 3: mean 19/3, SS = (16/3)^2 + 2 (8/3)^2 = 384/9,  MSER = (384/9) / 9  = 4.74
  // -> d* = 0.
  const double late[] = {1, 1, 1, 1, 9, 9};
  CHECK_INT(tp_stats_mser(late, 6, 1, &m, &err), 0);
  CHECK_INT(m.start, 0);
  CHECK_NUM(m.statistic, (768.0 / 9.0) / 36.0, 1e-12);

  CHECK_INT(tp_stats_mser(x, 9, 5, &m, &err), TP_EINVAL);
  CHECK_STR(err.msg, "mser: needs at least 2 batches of 5 values (10 values), got 9");
  CHECK_INT(tp_stats_mser(x, 9, 0, &m, &err), TP_EINVAL);
}

static void test_rng(void) {
  // splitmix64 from state 0: first output 0xe220a8397b1dcdaf (Vigna's splitmix64.c; the value
  // every port checks). tp_stats_rng_seed(0) puts it in s[0].
  TpStatsRng r;
  tp_stats_rng_seed(&r, 0);
  CHECK(r.s[0] == 0xe220a8397b1dcdafULL);
  // xoshiro256** from the state {1, 2, 3, 4}: reference outputs of Blackman & Vigna's
  // xoshiro256starstar.c as checked by rust-random/rngs, rand_xoshiro/src/xoshiro256starstar.rs
  // (test `reference`). The first two by hand: rotl(2 * 5, 7) * 9 = 1280 * 9 = 11520; after the
  // update s1 = 2 ^ (3 ^ 1) = 0, so the second output is 0.
  TpStatsRng v = {{1, 2, 3, 4}};
  CHECK(tp_stats_rng_next(&v) == 11520ULL);
  CHECK(tp_stats_rng_next(&v) == 0ULL);
  CHECK(tp_stats_rng_next(&v) == 1509978240ULL);
  CHECK(tp_stats_rng_next(&v) == 1215971899390074240ULL);
  CHECK(tp_stats_rng_next(&v) == 1216172134540287360ULL);
  CHECK(tp_stats_rng_next(&v) == 607988272756665600ULL);
  // rng_below stays in range and reaches every value.
  TpStatsRng b;
  tp_stats_rng_seed(&b, 42);
  int seen[7] = {0};
  int in_range = 1;
  for (int i = 0; i < 7000; i++) {
    uint64_t k = tp_stats_rng_below(&b, 7);
    if (k >= 7) {
      in_range = 0;
    } else {
      seen[k]++;
    }
  }
  CHECK(in_range);
  for (int k = 0; k < 7; k++) {
    // 1000 expected per value; 6 sigma (sqrt(1000 * 6/7) = 29) either side.
    CHECK(seen[k] > 820 && seen[k] < 1180);
  }
  CHECK(tp_stats_rng_below(&b, 1) == 0);
}

static void test_bootstrap(void) {
  TpError err = {0};
  TpStatsCi a;
  TpStatsCi b;
  double x[100];
  for (int i = 0; i < 100; i++) {
    x[i] = i + 1;
  }
  // Reproducible: the same seed gives bit-identical bounds, another seed different ones.
  CHECK_INT(tp_stats_bootstrap_mean_ci(x, 100, 0.95, 4000, 7, &a, &err), 0);
  CHECK_INT(tp_stats_bootstrap_mean_ci(x, 100, 0.95, 4000, 7, &b, &err), 0);
  CHECK(a.lo == b.lo && a.hi == b.hi);
  CHECK_INT(tp_stats_bootstrap_mean_ci(x, 100, 0.95, 4000, 8, &b, &err), 0);
  CHECK(a.lo != b.lo || a.hi != b.hi);
  // 1..100: mean 50.5, population sd sqrt((100^2 - 1) / 12) = 28.866, bootstrap standard error
  // 28.866 / 10 = 2.8866; the percentile interval is close to 50.5 -+ 1.96 * 2.8866 = 44.84 ..
  // 56.16. With 4000 resamples each bound is within about 0.3 of that.
  CHECK_NUM(a.estimate, 50.5, 1e-15);
  CHECK(a.lo > 44.84 - 0.6 && a.lo < 44.84 + 0.6);
  CHECK(a.hi > 56.16 - 0.6 && a.hi < 56.16 + 0.6);
  // Constant sample: every resample has the same mean.
  const double c[] = {4, 4, 4};
  CHECK_INT(tp_stats_bootstrap_mean_ci(c, 3, 0.9, 100, 1, &a, &err), 0);
  CHECK_NUM(a.lo, 4.0, 0);
  CHECK_NUM(a.hi, 4.0, 0);

  // Ratio of means: constants 3 and 2 give exactly 1.5; x against 2x brackets 0.5.
  const double three[] = {3, 3};
  const double two[] = {2, 2, 2};
  CHECK_INT(tp_stats_bootstrap_ratio_ci(three, 2, two, 3, 0.95, 200, 3, &a, &err), 0);
  CHECK_NUM(a.estimate, 1.5, 0);
  CHECK_NUM(a.lo, 1.5, 1e-15);
  CHECK_NUM(a.hi, 1.5, 1e-15);
  double y[100];
  for (int i = 0; i < 100; i++) {
    y[i] = 2 * x[i];
  }
  CHECK_INT(tp_stats_bootstrap_ratio_ci(x, 100, y, 100, 0.95, 2000, 11, &a, &err), 0);
  CHECK_NUM(a.estimate, 0.5, 1e-15);
  CHECK(a.lo < 0.5 && a.hi > 0.5 && a.lo > 0.4 && a.hi < 0.6);
  CHECK_INT(tp_stats_bootstrap_ratio_ci(x, 100, y, 100, 0.95, 2000, 11, &b, &err), 0);
  CHECK(a.lo == b.lo && a.hi == b.hi);

  const double zero[] = {-1, 1};
  CHECK_INT(tp_stats_bootstrap_ratio_ci(x, 3, zero, 2, 0.95, 10, 1, &a, &err), TP_EINVAL);
  CHECK_STR(err.msg, "bootstrap_ratio_ci: mean of the second sample is 0");
  CHECK_INT(tp_stats_bootstrap_mean_ci(x, 3, 1.0, 10, 1, &a, &err), TP_EINVAL);
  CHECK_STR(err.msg, "bootstrap_mean_ci: level 1 outside (0, 1)");
  CHECK_INT(tp_stats_bootstrap_mean_ci(x, 3, 0.95, 0, 1, &a, &err), TP_EINVAL);
}

static void test_special(void) {
  // I_x(2, 3) = sum_{j=2}^{4} C(4, j) x^j (1 - x)^(4 - j) (binomial identity); at x = 1/2:
  // (6 + 4 + 1) / 16 = 0.6875.
  CHECK_NUM(tp_stats_betainc(2, 3, 0.5), 0.6875, 1e-13);
  // I_x(a, 1) = x^a: 0.3^2.5.
  CHECK_NUM(tp_stats_betainc(2.5, 1, 0.3), pow(0.3, 2.5), 1e-13);
  // I_x(1/2, 1/2) = (2 / pi) asin(sqrt(x)) (arcsine distribution): x = 0.3.
  CHECK_NUM(tp_stats_betainc(0.5, 0.5, 0.3), 2.0 / M_PI * asin(sqrt(0.3)), 1e-13);
  // SciPy 1.10 scipy.special.betainc: (5, 0.5, 0.99) = 0.7571581091015623,
  // (100, 200, 0.3) = 0.10884306564491235, (0.01, 0.02, 0.5) = 0.6667194610412724.
  CHECK_NUM(tp_stats_betainc(5, 0.5, 0.99), 0.7571581091015623, 1e-12);
  CHECK_NUM(tp_stats_betainc(100, 200, 0.3), 0.10884306564491235, 1e-10);
  CHECK_NUM(tp_stats_betainc(0.01, 0.02, 0.5), 0.6667194610412724, 1e-12);
  CHECK_NUM(tp_stats_betainc(3, 4, 0), 0.0, 0);
  CHECK_NUM(tp_stats_betainc(3, 4, 1), 1.0, 0);
  CHECK(isnan(tp_stats_betainc(-1, 4, 0.5)));
  CHECK(isnan(tp_stats_betainc(1, 4, 1.5)));

  // Student t, two-sided: df = 1 is Cauchy, p = 1 - (2 / pi) atan|t|; t = 1 -> 0.5.
  CHECK_NUM(tp_stats_t_p2(1, 1), 0.5, 1e-13);
  // df = 2: p = 1 - |t| / sqrt(2 + t^2); t = 1 -> 1 - 1 / sqrt 3 = 0.42264973081037...
  CHECK_NUM(tp_stats_t_p2(1, 2), 1.0 - 1.0 / sqrt(3.0), 1e-13);
  // Table value: the 97.5 % quantile of t with 10 df is 2.2281388519649385
  // (scipy.stats.t.ppf(0.975, 10); R qt(0.975, 10) = 2.228139): two-sided p = 0.05.
  CHECK_NUM(tp_stats_t_p2(2.2281388519649385, 10), 0.05, 1e-9);
  CHECK_NUM(tp_stats_t_p2(-2.2281388519649385, 10), 0.05, 1e-9);
  CHECK_NUM(tp_stats_t_p2(0, 7), 1.0, 0);
  // Large df approaches the normal: 2 * scipy.stats.t.sf(3.5, 1000) = 0.0004857743459678319.
  CHECK_NUM(tp_stats_t_p2(3.5, 1000), 0.0004857743459678319, 1e-9);
  // Standard normal: P(Z > 1.959963984540054) = 0.025; P(Z > 0) = 0.5.
  CHECK_NUM(tp_stats_normal_sf(1.959963984540054), 0.025, 1e-12);
  CHECK_NUM(tp_stats_normal_sf(0), 0.5, 1e-15);
}

static void test_welch(void) {
  TpError err = {0};
  TpStatsWelch w;
  // R: t.test(extra ~ group, data = sleep) (Welch, the default):
  //   t = -1.8608, df = 17.776, p-value = 0.07939; mean of x 0.75, mean of y 2.33.
  // SciPy 1.10 ttest_ind(equal_var=False) gives t = -1.8608134674868526,
  // p = 0.07939414018735823; df by the Welch-Satterthwaite formula 17.776473516178495.
  CHECK_INT(tp_stats_welch(sleep1, 10, sleep2, 10, &w, &err), 0);
  CHECK_NUM(w.t, -1.8608134674868526, 1e-12);
  CHECK_NUM(w.df, 17.776473516178495, 1e-12);
  CHECK_NUM(w.p, 0.07939414018735823, 1e-9);
  CHECK_NUM(w.mean_diff, 0.75 - 2.33, 1e-12);
  // Symmetric: swapping the samples flips t only.
  TpStatsWelch s;
  CHECK_INT(tp_stats_welch(sleep2, 10, sleep1, 10, &s, &err), 0);
  CHECK_NUM(s.t, -w.t, 1e-14);
  CHECK_NUM(s.p, w.p, 1e-14);
  // By hand: x = 1 2 3 (mean 2, var 1), y = 4 5 6 (mean 5, var 1): se^2 = 1/3 + 1/3 = 2/3,
  // t = -3 / sqrt(2/3) = -3.674234614; df = (2/3)^2 / (2 (1/3)^2 / 2) = 4.
  const double a[] = {1, 2, 3};
  const double b[] = {4, 5, 6};
  CHECK_INT(tp_stats_welch(a, 3, b, 3, &w, &err), 0);
  CHECK_NUM(w.t, -3.0 / sqrt(2.0 / 3.0), 1e-14);
  CHECK_NUM(w.df, 4.0, 1e-14);
  // Two-sided p of t with 4 df in closed form: p = 1 - (|t| / sqrt(4 + t^2)) (1 + 2 / (4 + t^2))
  // = 0.0213116411287567 (SciPy: ttest_ind([1, 2, 3], [4, 5, 6], equal_var=False).pvalue).
  double t2 = w.t * w.t;
  double closed = 1.0 - (fabs(w.t) / sqrt(4.0 + t2)) * (1.0 + 2.0 / (4.0 + t2));
  CHECK_NUM(w.p, closed, 1e-12);
  const double c1[] = {2, 2};
  const double c2[] = {3, 3};
  CHECK_INT(tp_stats_welch(c1, 2, c2, 2, &w, &err), TP_EINVAL);
  CHECK_STR(err.msg, "welch: both samples have zero variance");
  CHECK_INT(tp_stats_welch(c1, 1, c2, 2, &w, &err), TP_EINVAL);
  CHECK_STR(err.msg, "welch: needs at least 2 values of the first sample, got 1");
}

static void test_mann_whitney(void) {
  TpError err = {0};
  TpStatsMannWhitney m;
  // SciPy docs, scipy.stats.mannwhitneyu example (Mann & Whitney's 1947 data):
  // males = [19, 22, 16, 29, 24], females = [20, 11, 17, 12]; U1 = 17;
  // method="asymptotic" p = 0.11134688653314041.
  const double males[] = {19, 22, 16, 29, 24};
  const double females[] = {20, 11, 17, 12};
  CHECK_INT(tp_stats_mann_whitney(males, 5, females, 4, true, &m, &err), 0);
  CHECK_NUM(m.u1, 17.0, 0);
  CHECK_NUM(m.u2, 3.0, 0);
  CHECK_NUM(m.p, 0.11134688653314041, 1e-12);
  // R: wilcox.test(extra ~ group, data = sleep): W = 25.5, p-value = 0.06933 (ties: normal
  // approximation with continuity and tie correction); SciPy gives 0.06932757543362658.
  CHECK_INT(tp_stats_mann_whitney(sleep1, 10, sleep2, 10, true, &m, &err), 0);
  CHECK_NUM(m.u1, 25.5, 0);
  CHECK_NUM(m.p, 0.06932757543362658, 1e-12);
  // By hand: x = 1 2, y = 3 4: ranks of x 1 + 2 = 3, U1 = 3 - 3 = 0, U2 = 4, mean 2,
  // var = 2*2/12 * 5 = 5/3 (no ties); with continuity z = (0 - 2 + 0.5) / sqrt(5/3) =
  // -1.161895003862225, p = 2 * Phi(-1.1619) = 0.2452781168067728.
  const double a[] = {1, 2};
  const double b[] = {3, 4};
  CHECK_INT(tp_stats_mann_whitney(a, 2, b, 2, true, &m, &err), 0);
  CHECK_NUM(m.u1, 0.0, 0);
  CHECK_NUM(m.z, -1.161895003862225, 1e-12);
  CHECK_NUM(m.p, 0.2452781168067728, 1e-12);
  // Without continuity: z = -2 / sqrt(5/3) = -1.549193338482967.
  CHECK_INT(tp_stats_mann_whitney(a, 2, b, 2, false, &m, &err), 0);
  CHECK_NUM(m.z, -2.0 / sqrt(5.0 / 3.0), 1e-12);
  // Everything tied: no information, p = 1.
  const double t[] = {5, 5, 5};
  CHECK_INT(tp_stats_mann_whitney(t, 2, t, 3, true, &m, &err), 0);
  CHECK_NUM(m.p, 1.0, 0);
  CHECK_NUM(m.u1, 3.0, 0);  // ranks all 3, rank sum 6, U1 = 6 - 3 = 3 = nx ny / 2
  CHECK_INT(tp_stats_mann_whitney(a, 0, b, 2, true, &m, &err), TP_EINVAL);
}

static void test_outliers(void) {
  TpError err = {0};
  double z[5];
  // 1 2 3 4 100: median 3, |x - 3| = 2 1 0 1 97 -> MAD = median(0 1 1 2 97) = 1;
  // M = 0.6745 (x - 3) / 1: -1.349, -0.6745, 0, 0.6745, 65.4265 -> only 100 exceeds 3.5.
  const double x[] = {1, 2, 3, 4, 100};
  CHECK_INT(tp_stats_modified_z(x, 5, z, &err), 0);
  CHECK_NUM(z[0], -1.349, 1e-12);
  CHECK_NUM(z[1], -0.6745, 1e-12);
  CHECK_NUM(z[2], 0.0, 0);
  CHECK_NUM(z[4], 65.4265, 1e-12);
  // MAD = 0: 5 5 5 5 6: mean absolute deviation 0.2, scale 1.253314 * 0.2 = 0.2506628;
  // M(6) = 1 / 0.2506628 = 3.98942...
  const double flat[] = {5, 5, 5, 5, 6};
  CHECK_INT(tp_stats_modified_z(flat, 5, z, &err), 0);
  CHECK_NUM(z[4], 1.0 / (1.253314 * 0.2), 1e-12);
  CHECK_NUM(z[0], 0.0, 0);
  const double same[] = {2, 2, 2};
  CHECK_INT(tp_stats_modified_z(same, 3, z, &err), 0);
  CHECK_NUM(z[1], 0.0, 0);
}

static void test_smoothing(void) {
  TpError err = {0};
  const double x[] = {1, 2, 3, 4, 5};
  double out[5];
  // Trailing window 3: 1, (1+2)/2, (1+2+3)/3, (2+3+4)/3, (3+4+5)/3.
  CHECK_INT(tp_stats_moving_average(x, 5, 3, out, &err), 0);
  CHECK_NUM(out[0], 1.0, 0);
  CHECK_NUM(out[1], 1.5, 0);
  CHECK_NUM(out[2], 2.0, 0);
  CHECK_NUM(out[3], 3.0, 0);
  CHECK_NUM(out[4], 4.0, 0);
  // EMA alpha 0.5: 1, 1.5, 2.25, 3.125, 4.0625.
  CHECK_INT(tp_stats_ema(x, 5, 0.5, out, &err), 0);
  CHECK_NUM(out[1], 1.5, 0);
  CHECK_NUM(out[2], 2.25, 0);
  CHECK_NUM(out[3], 3.125, 0);
  CHECK_NUM(out[4], 4.0625, 0);
  CHECK_INT(tp_stats_ema(x, 5, 0, out, &err), TP_EINVAL);
  CHECK_STR(err.msg, "ema: alpha 0 outside (0, 1]");
  CHECK_INT(tp_stats_moving_average(x, 5, 0, out, &err), TP_EINVAL);
}

static void test_curve_distance(void) {
  TpError err = {0};
  double rms = 0;
  size_t common = 0;
  // Common x = 2, 3: differences 2 - 1 = 1 and 3 - 1 = 2 -> sqrt((1 + 4) / 2) = 1.58113883...
  const double x1[] = {1, 2, 3, 4};
  const double y1[] = {1, 1, 1, 1};
  const double x2[] = {5, 3, 2};
  const double y2[] = {0, 3, 2};
  CHECK_INT(tp_stats_curve_distance(x1, y1, 4, x2, y2, 3, &rms, &common, &err), 0);
  CHECK_NUM(rms, sqrt(2.5), 1e-15);
  CHECK_INT(common, 2);
  // A repeated x (restart): the last point wins: x = 2 has y 5 then 1 -> |1 - 0| = 1.
  const double rx[] = {1, 2, 2};
  const double ry[] = {0, 5, 1};
  const double sx[] = {2};
  const double sy[] = {0};
  CHECK_INT(tp_stats_curve_distance(rx, ry, 3, sx, sy, 1, &rms, &common, &err), 0);
  CHECK_NUM(rms, 1.0, 0);
  CHECK_INT(common, 1);
  const double far[] = {10};
  CHECK_INT(tp_stats_curve_distance(rx, ry, 3, far, sy, 1, &rms, &common, &err), TP_EINVAL);
  CHECK_STR(err.msg, "curve_distance: the curves have no x value in common");
}

// Student's t quantile against mpmath 1.3 (40 digits: bisection of the regularised incomplete
// beta function's tail), including both far tails: the lower one must be found from p itself.
static void test_t_quantile(void) {
  CHECK_NUM(tp_stats_t_quantile(0.975, 1), 12.706204736174693, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(0.975, 2), 4.3026527297494618, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(0.975, 3.5), 2.9400886379827288, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(0.95, 3.5), 2.2224334936496007, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(0.975, 30), 2.0422724563012379, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(0.975, 1e6), 1.9599663568141067, 1e-9);
  // A huge df, where the incomplete beta has no digits left: the normal quantile at infinity
  // (1.959963984540054, mpmath) and z + (z^3 + z) / (4 df) below it, whose next term
  // (5z^5 + 16z^3 + 3z) / (96 df^2) is under 1e-15 from df = 1e8 on.
  CHECK_NUM(tp_stats_t_quantile(0.975, INFINITY), 1.959963984540054, 1e-13);
  CHECK_NUM(tp_stats_t_quantile(0.025, INFINITY), -1.959963984540054, 1e-13);
  CHECK_NUM(tp_stats_t_quantile(0.975, 1e8), 1.9599640082627663, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(0.975, 1e300), 1.959963984540054, 1e-13);
  CHECK_NUM(tp_stats_t_quantile(0.6, 0.5), 0.39797542678479059, 1e-12);
  // df = 1: tan(pi (p - 1/2)); p = 1 - 1e-10 as a double.
  CHECK_NUM(tp_stats_t_quantile(1 - 1e-10, 1), 3183098598.4671478, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(1 - 1e-10, 30), 9.3774897460797740, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(1e-10, 30), -9.3774897804071432, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(1e-20, 5), -15683.925454365776, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(1e-300, 3.5), -6.1068570315712630e85, 1e-12);
  CHECK_NUM(tp_stats_t_quantile(1e-12, 1e6), -7.0345726084112566, 1e-9);
  CHECK_NUM(tp_stats_t_quantile(0.5, 4), 0.0, 0);
  CHECK_INT(isnan(tp_stats_t_quantile(0.0, 4)) != 0, 1);
  CHECK_INT(isnan(tp_stats_t_quantile(1.0, 4)) != 0, 1);
  CHECK_INT(isnan(tp_stats_t_quantile(0.9, 0.0)) != 0, 1);
  CHECK_INT(isnan(tp_stats_t_quantile(NAN, 4)) != 0, 1);
}

// Batch means: a constant series has a zero-width interval; 2 batches is the least; NaN refused.
static void test_batch_means_ci(void) {
  TpError err = {0};
  TpStatsBatchCi ci;
  const double flat[] = {3, 3, 3, 3, 3, 3, 3};
  CHECK_INT(tp_stats_batch_means_ci(flat, N_OF(flat), 3, 0.95, &ci, &err), 0);
  CHECK_NUM(ci.mean, 3.0, 0);
  CHECK_NUM(ci.half_width, 0.0, 0);
  CHECK_INT(ci.first, 1);
  CHECK_INT(ci.batch_size, 2);
  // 1 2 | 3 4: batch means 1.5, 3.5; sd sqrt(2), se 1; t(0.975, 1) = 12.7062047361747.
  const double four[] = {1, 2, 3, 4};
  CHECK_INT(tp_stats_batch_means_ci(four, N_OF(four), 2, 0.95, &ci, &err), 0);
  CHECK_NUM(ci.mean, 2.5, 1e-15);
  CHECK_NUM(ci.se, 1.0, 1e-15);
  CHECK_NUM(ci.half_width, 12.706204736174693, 1e-12);
  CHECK_NUM(ci.df, 1.0, 0);
  CHECK_INT(tp_stats_batch_means_ci(four, N_OF(four), 1, 0.95, &ci, &err), TP_EINVAL);
  CHECK_STR(err.msg, "batch_means_ci: needs at least 2 batches, got 1");
  CHECK_INT(tp_stats_batch_means_ci(four, N_OF(four), 2, 1.0, &ci, &err), TP_EINVAL);
  const double nan_in[] = {1, 2, NAN, 4};
  CHECK_INT(tp_stats_batch_means_ci(nan_in, N_OF(nan_in), 2, 0.95, &ci, &err), TP_EINVAL);
  CHECK_STR(err.msg, "batch_means_ci: value #3 is NaN");
}

int main(void) {
  test_location_spread();
  test_percentile();
  test_summary();
  test_errors();
  test_mser();
  test_rng();
  test_bootstrap();
  test_special();
  test_welch();
  test_mann_whitney();
  test_outliers();
  test_smoothing();
  test_curve_distance();
  test_t_quantile();
  test_batch_means_ci();
  return CHECK_DONE();
}
