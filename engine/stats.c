// Summary statistics, MSER steady-state detection, bootstrap intervals, Welch and Mann-Whitney
// tests, outlier scores, smoothing and curve distance (see stats.h for the definitions).
#include "stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- validation and helpers ------------------------------------------------------------------

// Rejects NaN and infinities; `what` names the sample in the message ("" for a single sample).
static int check_finite(const char *fn, const char *what, const double *x, size_t n, TpError *err) {
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) {
      return tp_error_set(err, TP_EINVAL, "%s: value #%zu%s is %s", fn, i + 1, what,
                          isnan(x[i]) ? "NaN" : "infinite");
    }
  }
  return 0;
}

static int check_sample(const char *fn, const char *what, const double *x, size_t n, size_t min_n,
                        TpError *err) {
  if (n < min_n) {
    return tp_error_set(err, TP_EINVAL, "%s: needs at least %zu value%s%s, got %zu", fn, min_n,
                        min_n == 1 ? "" : "s", what, n);
  }
  if (n > 0 && !x) {
    return tp_error_set(err, TP_EINVAL, "%s: NULL data", fn);
  }
  return check_finite(fn, what, x, n, err);
}

static int cmp_double(const void *pa, const void *pb) {
  double a = *(const double *)pa;
  double b = *(const double *)pb;
  return (a > b) - (a < b);
}

// Returns a sorted copy of x (caller frees) or NULL with err set.
static double *sorted_copy(const char *fn, const double *x, size_t n, TpError *err) {
  if (n > SIZE_MAX / sizeof(double)) {
    tp_error_set(err, TP_ENOMEM, "%s: %zu values: too many", fn, n);
    return NULL;
  }
  double *s = malloc(n * sizeof(double));
  if (!s) {
    tp_error_set(err, TP_ENOMEM, "%s: out of memory for %zu values", fn, n);
    return NULL;
  }
  memcpy(s, x, n * sizeof(double));
  qsort(s, n, sizeof(double), cmp_double);
  return s;
}

static double *alloc_doubles(const char *fn, size_t n, TpError *err) {
  if (n == 0) {
    n = 1;
  }
  if (n > SIZE_MAX / sizeof(double)) {
    tp_error_set(err, TP_ENOMEM, "%s: %zu values: too many", fn, n);
    return NULL;
  }
  double *p = malloc(n * sizeof(double));
  if (!p) {
    tp_error_set(err, TP_ENOMEM, "%s: out of memory for %zu values", fn, n);
  }
  return p;
}

static double sum_of(const double *x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) {
    s += x[i];
  }
  return s;
}

// Corrected two-pass sum of squared deviations (Chan, Golub & LeVeque 1983, eq. 1.7): the second
// term removes most of the rounding error of the computed mean.
static double sum_sq_dev(const double *x, size_t n, double mean) {
  double ss = 0.0;
  double comp = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = x[i] - mean;
    ss += d * d;
    comp += d;
  }
  return ss - comp * comp / (double)n;
}

// --- location and spread ----------------------------------------------------------------------

int tp_stats_mean(const double *x, size_t n, double *out, TpError *err) {
  int rc = check_sample("mean", "", x, n, 1, err);
  if (rc != 0) {
    return rc;
  }
  *out = sum_of(x, n) / (double)n;
  return 0;
}

int tp_stats_variance(const double *x, size_t n, double *out, TpError *err) {
  int rc = check_sample("variance", "", x, n, 2, err);
  if (rc != 0) {
    return rc;
  }
  double mean = sum_of(x, n) / (double)n;
  double ss = sum_sq_dev(x, n, mean);
  *out = ss > 0.0 ? ss / (double)(n - 1) : 0.0;
  return 0;
}

int tp_stats_stddev(const double *x, size_t n, double *out, TpError *err) {
  int rc = check_sample("stddev", "", x, n, 2, err);
  if (rc != 0) {
    return rc;
  }
  double mean = sum_of(x, n) / (double)n;
  double ss = sum_sq_dev(x, n, mean);
  *out = ss > 0.0 ? sqrt(ss / (double)(n - 1)) : 0.0;
  return 0;
}

int tp_stats_min(const double *x, size_t n, double *out, TpError *err) {
  int rc = check_sample("min", "", x, n, 1, err);
  if (rc != 0) {
    return rc;
  }
  double m = x[0];
  for (size_t i = 1; i < n; i++) {
    if (x[i] < m) {
      m = x[i];
    }
  }
  *out = m;
  return 0;
}

int tp_stats_max(const double *x, size_t n, double *out, TpError *err) {
  int rc = check_sample("max", "", x, n, 1, err);
  if (rc != 0) {
    return rc;
  }
  double m = x[0];
  for (size_t i = 1; i < n; i++) {
    if (x[i] > m) {
      m = x[i];
    }
  }
  *out = m;
  return 0;
}

double tp_stats_percentile_sorted(const double *sorted, size_t n, double p) {
  if (n == 1) {
    return sorted[0];
  }
  double h = (double)(n - 1) * p / 100.0;
  size_t lo = (size_t)floor(h);
  if (lo >= n - 1) {
    return sorted[n - 1];
  }
  double frac = h - (double)lo;
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

static int percentile_of(const char *fn, const double *x, size_t n, double p, double *out,
                         TpError *err) {
  int rc = check_sample(fn, "", x, n, 1, err);
  if (rc != 0) {
    return rc;
  }
  if (!(p >= 0.0 && p <= 100.0)) {
    return tp_error_set(err, TP_EINVAL, "%s: percentile %g outside [0, 100]", fn, p);
  }
  double *s = sorted_copy(fn, x, n, err);
  if (!s) {
    return TP_ENOMEM;
  }
  *out = tp_stats_percentile_sorted(s, n, p);
  free(s);
  return 0;
}

int tp_stats_median(const double *x, size_t n, double *out, TpError *err) {
  return percentile_of("median", x, n, 50.0, out, err);
}

int tp_stats_percentile(const double *x, size_t n, double p, double *out, TpError *err) {
  return percentile_of("percentile", x, n, p, out, err);
}

int tp_stats_cv(const double *x, size_t n, double *out, TpError *err) {
  int rc = check_sample("cv", "", x, n, 2, err);
  if (rc != 0) {
    return rc;
  }
  double mean = sum_of(x, n) / (double)n;
  if (mean == 0.0) {
    return tp_error_set(err, TP_EINVAL, "cv: mean is 0");
  }
  double ss = sum_sq_dev(x, n, mean);
  double sd = ss > 0.0 ? sqrt(ss / (double)(n - 1)) : 0.0;
  *out = sd / fabs(mean);
  return 0;
}

int tp_stats_summary(const double *x, size_t n, TpStatsSummary *out, TpError *err) {
  int rc = check_sample("summary", "", x, n, 1, err);
  if (rc != 0) {
    return rc;
  }
  double *s = sorted_copy("summary", x, n, err);
  if (!s) {
    return TP_ENOMEM;
  }
  TpStatsSummary r;
  r.n = n;
  r.mean = sum_of(x, n) / (double)n;
  r.min = s[0];
  r.max = s[n - 1];
  r.median = tp_stats_percentile_sorted(s, n, 50.0);
  r.p5 = tp_stats_percentile_sorted(s, n, 5.0);
  r.p25 = tp_stats_percentile_sorted(s, n, 25.0);
  r.p75 = tp_stats_percentile_sorted(s, n, 75.0);
  r.p95 = tp_stats_percentile_sorted(s, n, 95.0);
  free(s);
  if (n >= 2) {
    double ss = sum_sq_dev(x, n, r.mean);
    r.variance = ss > 0.0 ? ss / (double)(n - 1) : 0.0;
    r.stddev = sqrt(r.variance);
    r.cv = r.mean != 0.0 ? r.stddev / fabs(r.mean) : NAN;
  } else {
    r.variance = NAN;
    r.stddev = NAN;
    r.cv = NAN;
  }
  *out = r;
  return 0;
}

// --- MSER steady state --------------------------------------------------------------------------

int tp_stats_mser(const double *x, size_t n, size_t batch, TpStatsMser *out, TpError *err) {
  if (batch == 0) {
    return tp_error_set(err, TP_EINVAL, "mser: batch size must be at least 1");
  }
  int rc = check_finite("mser", "", x, n, err);
  if (rc != 0) {
    return rc;
  }
  size_t m = n / batch;
  if (m < 2) {
    return tp_error_set(err, TP_EINVAL,
                        "mser: needs at least 2 batches of %zu values (%zu values), got %zu", batch,
                        2 * batch, n);
  }
  double *y = alloc_doubles("mser", m, err);
  if (!y) {
    return TP_ENOMEM;
  }
  for (size_t j = 0; j < m; j++) {
    y[j] = sum_of(x + j * batch, batch) / (double)batch;
  }
  // Walk d from the end towards 0, adding Y_d to a running mean and sum of squared deviations
  // (Welford 1962), so each MSER(d) costs O(1) and no suffix sum is subtracted from another.
  size_t dmax = m / 2;
  double mean = 0.0;
  double m2 = 0.0;
  size_t best_d = 0;
  double best = INFINITY;
  for (size_t k = 1; k <= m; k++) {
    size_t d = m - k;
    double v = y[d];
    double delta = v - mean;
    mean += delta / (double)k;
    m2 += delta * (v - mean);
    if (d <= dmax) {
      double stat = (m2 > 0.0 ? m2 : 0.0) / ((double)k * (double)k);
      if (stat <= best) {  // walking downwards: ties go to the smaller d
        best = stat;
        best_d = d;
      }
    }
  }
  free(y);
  out->start = best_d * batch;
  out->batch = batch;
  out->batches = m;
  out->truncated = best_d;
  out->statistic = best;
  return 0;
}

// --- batch means ---------------------------------------------------------------------------------

int tp_stats_batch_means_ci(const double *x, size_t n, size_t batches, double level,
                            TpStatsBatchCi *out, TpError *err) {
  const char *fn = "batch_means_ci";
  if (batches < 2) {
    return tp_error_set(err, TP_EINVAL, "%s: needs at least 2 batches, got %zu", fn, batches);
  }
  if (!(level > 0.0 && level < 1.0)) {
    return tp_error_set(err, TP_EINVAL, "%s: level must be in (0, 1), got %g", fn, level);
  }
  int rc = check_sample(fn, "", x, n, batches, err);
  if (rc != 0) {
    return rc;
  }
  double *y = alloc_doubles(fn, batches, err);
  if (!y) {
    return TP_ENOMEM;
  }
  size_t b = n / batches;
  size_t first = n - b * batches;
  for (size_t j = 0; j < batches; j++) {
    y[j] = sum_of(x + first + j * b, b) / (double)b;
  }
  double mean = sum_of(y, batches) / (double)batches;
  double ss = sum_sq_dev(y, batches, mean);
  free(y);
  double k = (double)batches;
  double se = sqrt((ss > 0.0 ? ss : 0.0) / (k - 1.0) / k);
  double half = tp_stats_t_quantile((1.0 + level) / 2.0, k - 1.0) * se;
  *out = (TpStatsBatchCi){.mean = mean,
                          .half_width = half,
                          .lo = mean - half,
                          .hi = mean + half,
                          .se = se,
                          .df = k - 1.0,
                          .batches = batches,
                          .batch_size = b,
                          .first = first};
  return 0;
}

// --- reproducible generator
// -----------------------------------------------------------------------

// splitmix64 (Steele, Lea & Flood 2014; constants as published by Vigna at prng.di.unimi.it).
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void tp_stats_rng_seed(TpStatsRng *rng, uint64_t seed) {
  uint64_t st = seed;
  for (int i = 0; i < 4; i++) {
    rng->s[i] = splitmix64(&st);
  }
}

static uint64_t rotl64(uint64_t v, int k) {
  return (v << k) | (v >> (64 - k));
}

// xoshiro256** 1.0: result = rotl(s1 * 5, 7) * 9, then the xor-shift state update.
uint64_t tp_stats_rng_next(TpStatsRng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl64(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64(s[3], 45);
  return result;
}

uint64_t tp_stats_rng_below(TpStatsRng *rng, uint64_t n) {
  if (n <= 1) {
    return 0;
  }
  // Accept only draws below the largest multiple of n that fits, so every residue is equally
  // likely; at most half the range is rejected, usually far less.
  uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
  uint64_t r;
  do {
    r = tp_stats_rng_next(rng);
  } while (r >= limit);
  return r % n;
}

// --- bootstrap
// --------------------------------------------------------------------------------------

static double resampled_mean(TpStatsRng *rng, const double *x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) {
    s += x[tp_stats_rng_below(rng, n)];
  }
  return s / (double)n;
}

static int check_boot(const char *fn, double level, size_t resamples, TpError *err) {
  if (!(level > 0.0 && level < 1.0)) {
    return tp_error_set(err, TP_EINVAL, "%s: level %g outside (0, 1)", fn, level);
  }
  if (resamples < 1 || resamples > 100000000) {
    return tp_error_set(err, TP_EINVAL, "%s: resamples %zu outside [1, 100000000]", fn, resamples);
  }
  return 0;
}

// Sorts the B replicate statistics and reads the two percentile bounds.
static void boot_bounds(double *stats, size_t b, double level, TpStatsCi *out) {
  qsort(stats, b, sizeof(double), cmp_double);
  double tail = (1.0 - level) / 2.0 * 100.0;
  out->lo = tp_stats_percentile_sorted(stats, b, tail);
  out->hi = tp_stats_percentile_sorted(stats, b, 100.0 - tail);
}

int tp_stats_bootstrap_mean_ci(const double *x, size_t n, double level, size_t resamples,
                               uint64_t seed, TpStatsCi *out, TpError *err) {
  const char *fn = "bootstrap_mean_ci";
  int rc = check_boot(fn, level, resamples, err);
  if (rc == 0) {
    rc = check_sample(fn, "", x, n, 1, err);
  }
  if (rc != 0) {
    return rc;
  }
  double *stats = alloc_doubles(fn, resamples, err);
  if (!stats) {
    return TP_ENOMEM;
  }
  TpStatsRng rng;
  tp_stats_rng_seed(&rng, seed);
  for (size_t b = 0; b < resamples; b++) {
    stats[b] = resampled_mean(&rng, x, n);
  }
  TpStatsCi r;
  r.estimate = sum_of(x, n) / (double)n;
  boot_bounds(stats, resamples, level, &r);
  free(stats);
  *out = r;
  return 0;
}

int tp_stats_bootstrap_ratio_ci(const double *x, size_t nx, const double *y, size_t ny,
                                double level, size_t resamples, uint64_t seed, TpStatsCi *out,
                                TpError *err) {
  const char *fn = "bootstrap_ratio_ci";
  int rc = check_boot(fn, level, resamples, err);
  if (rc == 0) {
    rc = check_sample(fn, " of the first sample", x, nx, 1, err);
  }
  if (rc == 0) {
    rc = check_sample(fn, " of the second sample", y, ny, 1, err);
  }
  if (rc != 0) {
    return rc;
  }
  double my = sum_of(y, ny) / (double)ny;
  if (my == 0.0) {
    return tp_error_set(err, TP_EINVAL, "%s: mean of the second sample is 0", fn);
  }
  double *stats = alloc_doubles(fn, resamples, err);
  if (!stats) {
    return TP_ENOMEM;
  }
  TpStatsRng rng;
  tp_stats_rng_seed(&rng, seed);
  for (size_t b = 0; b < resamples; b++) {
    double a = resampled_mean(&rng, x, nx);
    double d = resampled_mean(&rng, y, ny);
    if (d == 0.0) {
      free(stats);
      return tp_error_set(err, TP_EINVAL,
                          "%s: resample %zu of the second sample has mean 0 (ratio undefined)", fn,
                          b + 1);
    }
    stats[b] = a / d;
  }
  TpStatsCi r;
  r.estimate = (sum_of(x, nx) / (double)nx) / my;
  boot_bounds(stats, resamples, level, &r);
  free(stats);
  *out = r;
  return 0;
}

// --- special functions
// ------------------------------------------------------------------------------

// Continued fraction of A&S 26.5.8: I_x(a, b) = x^a (1 - x)^b / (a B(a, b)) / G with
//   G = 1 + d_1 / (1 + d_2 / (1 + d_3 / ...)),
//   d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)),
//   d_{2m}   = m (b - m) x / ((a + 2m - 1)(a + 2m)).
// G is evaluated with the modified Lentz method (b_0 = 1, all b_k = 1, a_k = d_k): G_k = G_{k-1}
// C_k D_k with D_k = 1 / (1 + d_k D_{k-1}), C_k = 1 + d_k / C_{k-1}, C_0 = 1, D_0 = 0, tiny values
// standing in for zeros. Converges fast for x < (a + 1) / (a + b + 2). Returns 1 / G.
static double beta_fraction(double a, double b, double x) {
  const double tiny = 1e-300;
  const double eps = 1e-16;
  double g = 1.0;
  double c = 1.0;
  double d = 0.0;
  for (int k = 1; k <= 20000; k++) {
    int m = k / 2;
    double dk;
    if (k % 2 == 1) {
      dk = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    } else {
      dk = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    }
    d = 1.0 + dk * d;
    if (fabs(d) < tiny) {
      d = tiny;
    }
    c = 1.0 + dk / c;
    if (fabs(c) < tiny) {
      c = tiny;
    }
    d = 1.0 / d;
    double delta = c * d;
    g *= delta;
    if (fabs(delta - 1.0) < eps) {
      break;
    }
  }
  return 1.0 / g;
}

double tp_stats_betainc(double a, double b, double x) {
  if (!(a > 0.0) || !(b > 0.0) || !(x >= 0.0 && x <= 1.0) || isinf(a) || isinf(b)) {
    return NAN;
  }
  if (x == 0.0) {
    return 0.0;
  }
  if (x == 1.0) {
    return 1.0;
  }
  // x^a (1 - x)^b / B(a, b), in logs.
  double lfront = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0)) {
    return exp(lfront) * beta_fraction(a, b, x) / a;
  }
  return 1.0 - exp(lfront) * beta_fraction(b, a, 1.0 - x) / b;
}

double tp_stats_t_p2(double t, double df) {
  if (isnan(t) || !(df > 0.0)) {
    return NAN;
  }
  if (isinf(t)) {
    return 0.0;
  }
  double p = tp_stats_betainc(df / 2.0, 0.5, df / (df + t * t));
  return p > 1.0 ? 1.0 : p;
}

double tp_stats_t_quantile(double p, double df) {
  if (!(p > 0.0 && p < 1.0) || !(df > 0.0)) {
    return NAN;
  }
  if (p == 0.5) {
    return 0.0;
  }
  // P(|T| > t) = t_p2(t) falls from 1 at 0: find t with t_p2(t) = 2 min(p, 1 - p) and give it
  // p's sign. The lower tail is taken from p itself, never from 1 - p, which would round to 1 for
  // p below about 1e-17 (and lose digits well before).
  double sign = p < 0.5 ? -1.0 : 1.0;
  double target = 2.0 * (p < 0.5 ? p : 1.0 - p);
  if (df > 1e7) {
    // The incomplete beta loses its digits for a huge df (and none is left at infinity): the
    // normal quantile with the first Cornish-Fisher term, z + (z^3 + z) / (4 df), whose next
    // term is of order 1/df^2 (Abramowitz & Stegun 26.7.5).
    double zlo = 0.0;
    double zhi = 40.0;
    for (int i = 0; i < 200 && zhi - zlo > 1e-15 * zhi; i++) {
      double mid = 0.5 * (zlo + zhi);
      if (2.0 * tp_stats_normal_sf(mid) > target) {
        zlo = mid;
      } else {
        zhi = mid;
      }
    }
    double z = 0.5 * (zlo + zhi);
    return sign * (isinf(df) ? z : z + (z * z * z + z) / (4.0 * df));
  }
  double lo = 0.0;
  double hi = 1.0;
  while (tp_stats_t_p2(hi, df) > target && hi < 1e300) {
    lo = hi;
    hi *= 2.0;
  }
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; i++) {
    double mid = 0.5 * (lo + hi);
    if (tp_stats_t_p2(mid, df) > target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return sign * 0.5 * (lo + hi);
}

double tp_stats_normal_sf(double z) {
  return 0.5 * erfc(z / sqrt(2.0));
}

// --- tests
// ------------------------------------------------------------------------------------------

int tp_stats_welch(const double *x, size_t nx, const double *y, size_t ny, TpStatsWelch *out,
                   TpError *err) {
  const char *fn = "welch";
  int rc = check_sample(fn, " of the first sample", x, nx, 2, err);
  if (rc == 0) {
    rc = check_sample(fn, " of the second sample", y, ny, 2, err);
  }
  if (rc != 0) {
    return rc;
  }
  double mx = sum_of(x, nx) / (double)nx;
  double my = sum_of(y, ny) / (double)ny;
  double vx = sum_sq_dev(x, nx, mx) / (double)(nx - 1);
  double vy = sum_sq_dev(y, ny, my) / (double)(ny - 1);
  vx = vx > 0.0 ? vx : 0.0;
  vy = vy > 0.0 ? vy : 0.0;
  double sx = vx / (double)nx;
  double sy = vy / (double)ny;
  double se2 = sx + sy;
  if (!(se2 > 0.0)) {
    return tp_error_set(err, TP_EINVAL, "%s: both samples have zero variance", fn);
  }
  TpStatsWelch r;
  r.mean_diff = mx - my;
  r.t = r.mean_diff / sqrt(se2);
  r.df = se2 * se2 / (sx * sx / (double)(nx - 1) + sy * sy / (double)(ny - 1));
  r.p = tp_stats_t_p2(r.t, r.df);
  *out = r;
  return 0;
}

typedef struct Tagged {
  double v;
  int group;  // 0: first sample, 1: second
} Tagged;

static int cmp_tagged(const void *pa, const void *pb) {
  double a = ((const Tagged *)pa)->v;
  double b = ((const Tagged *)pb)->v;
  return (a > b) - (a < b);
}

int tp_stats_mann_whitney(const double *x, size_t nx, const double *y, size_t ny, bool continuity,
                          TpStatsMannWhitney *out, TpError *err) {
  const char *fn = "mann_whitney";
  int rc = check_sample(fn, " of the first sample", x, nx, 1, err);
  if (rc == 0) {
    rc = check_sample(fn, " of the second sample", y, ny, 1, err);
  }
  if (rc != 0) {
    return rc;
  }
  if (nx > SIZE_MAX / sizeof(Tagged) - ny) {
    return tp_error_set(err, TP_ENOMEM, "%s: samples too large", fn);
  }
  size_t n = nx + ny;
  Tagged *all = malloc(n * sizeof(Tagged));
  if (!all) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory for %zu values", fn, n);
  }
  for (size_t i = 0; i < nx; i++) {
    all[i] = (Tagged){x[i], 0};
  }
  for (size_t i = 0; i < ny; i++) {
    all[nx + i] = (Tagged){y[i], 1};
  }
  qsort(all, n, sizeof(Tagged), cmp_tagged);
  // Ranks are 1-based; a run of t equal values [i, j) shares the average rank (i + 1 + j) / 2.
  double rank_sum_x = 0.0;
  double ties = 0.0;  // sum of t^3 - t over the runs
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && all[j].v == all[i].v) {
      j++;
    }
    double avg = ((double)(i + 1) + (double)j) / 2.0;
    for (size_t k = i; k < j; k++) {
      if (all[k].group == 0) {
        rank_sum_x += avg;
      }
    }
    double t = (double)(j - i);
    ties += t * t * t - t;
    i = j;
  }
  free(all);
  double dnx = (double)nx;
  double dny = (double)ny;
  double dn = (double)n;
  TpStatsMannWhitney r;
  r.u1 = rank_sum_x - dnx * (dnx + 1.0) / 2.0;
  r.u2 = dnx * dny - r.u1;
  double mu = dnx * dny / 2.0;
  double var = dnx * dny / 12.0 * ((dn + 1.0) - (n > 1 ? ties / (dn * (dn - 1.0)) : 0.0));
  if (!(var > 0.0)) {
    r.z = 0.0;
    r.p = 1.0;
  } else {
    double diff = r.u1 - mu;
    if (continuity) {
      diff -= diff > 0.0 ? 0.5 : (diff < 0.0 ? -0.5 : 0.0);
    }
    r.z = diff / sqrt(var);
    r.p = 2.0 * tp_stats_normal_sf(fabs(r.z));
    if (r.p > 1.0) {
      r.p = 1.0;
    }
  }
  *out = r;
  return 0;
}

// --- outliers, smoothing, curve distance --------------------------------------------------------

int tp_stats_modified_z(const double *x, size_t n, double *scores, TpError *err) {
  const char *fn = "modified_z";
  int rc = check_sample(fn, "", x, n, 1, err);
  if (rc != 0) {
    return rc;
  }
  double *s = sorted_copy(fn, x, n, err);
  if (!s) {
    return TP_ENOMEM;
  }
  double med = tp_stats_percentile_sorted(s, n, 50.0);
  double mean_ad = 0.0;
  for (size_t i = 0; i < n; i++) {
    s[i] = fabs(x[i] - med);
    mean_ad += s[i];
  }
  mean_ad /= (double)n;
  qsort(s, n, sizeof(double), cmp_double);
  double mad = tp_stats_percentile_sorted(s, n, 50.0);
  free(s);
  // sigma estimates: MAD / 0.6745 (Iglewicz & Hoaglin), else 1.253314 * mean absolute deviation.
  double scale = mad > 0.0 ? mad / 0.6745 : 1.253314 * mean_ad;
  for (size_t i = 0; i < n; i++) {
    scores[i] = scale > 0.0 ? (x[i] - med) / scale : 0.0;
  }
  return 0;
}

int tp_stats_moving_average(const double *x, size_t n, size_t window, double *out, TpError *err) {
  if (window == 0) {
    return tp_error_set(err, TP_EINVAL, "moving_average: window must be at least 1");
  }
  int rc = check_finite("moving_average", "", x, n, err);
  if (rc != 0) {
    return rc;
  }
  // Recompute each window sum from its values: exact for any series (a running sum that adds
  // and subtracts drifts when values differ by orders of magnitude).
  for (size_t i = 0; i < n; i++) {
    size_t first = i + 1 >= window ? i + 1 - window : 0;
    out[i] = sum_of(x + first, i + 1 - first) / (double)(i + 1 - first);
  }
  return 0;
}

int tp_stats_ema(const double *x, size_t n, double alpha, double *out, TpError *err) {
  if (!(alpha > 0.0 && alpha <= 1.0)) {
    return tp_error_set(err, TP_EINVAL, "ema: alpha %g outside (0, 1]", alpha);
  }
  int rc = check_finite("ema", "", x, n, err);
  if (rc != 0) {
    return rc;
  }
  for (size_t i = 0; i < n; i++) {
    out[i] = i == 0 ? x[0] : alpha * x[i] + (1.0 - alpha) * out[i - 1];
  }
  return 0;
}

typedef struct Point {
  double x;
  double y;
  size_t idx;
} Point;

static int cmp_point(const void *pa, const void *pb) {
  const Point *a = pa;
  const Point *b = pb;
  if (a->x != b->x) {
    return (a->x > b->x) - (a->x < b->x);
  }
  return (a->idx > b->idx) - (a->idx < b->idx);
}

// Sorts a curve by x and keeps the last point (highest original index) of each x; returns the
// number of distinct x, or 0 with err set.
static Point *unique_curve(const double *x, const double *y, size_t n, size_t *out_n,
                           TpError *err) {
  if (n > SIZE_MAX / sizeof(Point)) {
    tp_error_set(err, TP_ENOMEM, "curve_distance: %zu points: too many", n);
    return NULL;
  }
  Point *p = malloc((n ? n : 1) * sizeof(Point));
  if (!p) {
    tp_error_set(err, TP_ENOMEM, "curve_distance: out of memory for %zu points", n);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    p[i] = (Point){x[i], y[i], i};
  }
  qsort(p, n, sizeof(Point), cmp_point);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (k > 0 && p[k - 1].x == p[i].x) {
      p[k - 1] = p[i];  // same x, later point: replaces the earlier one
    } else {
      p[k++] = p[i];
    }
  }
  *out_n = k;
  return p;
}

int tp_stats_curve_distance(const double *x1, const double *y1, size_t n1, const double *x2,
                            const double *y2, size_t n2, double *rms, size_t *common,
                            TpError *err) {
  const char *fn = "curve_distance";
  int rc = check_finite(fn, " of the first curve's x", x1, n1, err);
  if (rc == 0) {
    rc = check_finite(fn, " of the first curve's y", y1, n1, err);
  }
  if (rc == 0) {
    rc = check_finite(fn, " of the second curve's x", x2, n2, err);
  }
  if (rc == 0) {
    rc = check_finite(fn, " of the second curve's y", y2, n2, err);
  }
  if (rc != 0) {
    return rc;
  }
  size_t k1 = 0;
  size_t k2 = 0;
  Point *a = unique_curve(x1, y1, n1, &k1, err);
  if (!a) {
    return TP_ENOMEM;
  }
  Point *b = unique_curve(x2, y2, n2, &k2, err);
  if (!b) {
    free(a);
    return TP_ENOMEM;
  }
  double ss = 0.0;
  size_t m = 0;
  for (size_t i = 0, j = 0; i < k1 && j < k2;) {
    if (a[i].x < b[j].x) {
      i++;
    } else if (a[i].x > b[j].x) {
      j++;
    } else {
      double d = a[i].y - b[j].y;
      ss += d * d;
      m++;
      i++;
      j++;
    }
  }
  free(a);
  free(b);
  if (m == 0) {
    return tp_error_set(err, TP_EINVAL, "%s: the curves have no x value in common", fn);
  }
  *rms = sqrt(ss / (double)m);
  *common = m;
  return 0;
}
