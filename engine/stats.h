// Summary statistics over arrays of doubles: location and spread, percentiles, MSER steady-state
// detection, seeded bootstrap confidence intervals, Welch's t-test, Mann-Whitney U, modified
// z-score outliers, smoothing and curve distance. Pure C11, no Lua.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

// Conventions for every fallible call below:
// - inputs are (pointer, count) pairs; a NaN or infinite element is rejected with TP_EINVAL and a
//   message naming its 1-based position ("mean: value #3 is NaN");
// - results are written through out-parameters only on success;
// - calls that sort or resample allocate scratch memory (TP_ENOMEM when that fails);
// - messages read "<function>: <reason>", positions in them are 1-based.

/// Mean and spread of one sample, computed in one call (one sort).
typedef struct TpStatsSummary {
  size_t n;         ///< number of values
  double mean;      ///< arithmetic mean
  double median;    ///< 50th percentile (linear interpolation)
  double variance;  ///< sample variance (divisor n - 1); NaN when n < 2
  double stddev;    ///< sample standard deviation; NaN when n < 2
  double min;
  double max;
  double p5;   ///< 5th percentile (linear interpolation, see tp_stats_percentile)
  double p25;  ///< 25th percentile
  double p75;  ///< 75th percentile
  double p95;  ///< 95th percentile
  double cv;   ///< stddev / |mean|; NaN when n < 2 or mean == 0
} TpStatsSummary;

/// Arithmetic mean of `x[0..n)`. @return 0, or TP_EINVAL (n == 0, non-finite value).
int tp_stats_mean(const double *x, size_t n, double *out, TpError *err);

/// Sample variance with divisor n - 1 (two-pass: mean first, then squared deviations).
/// @return 0, or TP_EINVAL (n < 2, non-finite value).
int tp_stats_variance(const double *x, size_t n, double *out, TpError *err);

/// Sample standard deviation, sqrt of tp_stats_variance. @return as tp_stats_variance.
int tp_stats_stddev(const double *x, size_t n, double *out, TpError *err);

/// Smallest value. @return 0, or TP_EINVAL (n == 0, non-finite value).
int tp_stats_min(const double *x, size_t n, double *out, TpError *err);

/// Largest value. @return 0, or TP_EINVAL (n == 0, non-finite value).
int tp_stats_max(const double *x, size_t n, double *out, TpError *err);

/// Median: the 50th percentile with linear interpolation (mean of the two middle values when n
/// is even). @return 0, TP_EINVAL (n == 0, non-finite value) or TP_ENOMEM.
int tp_stats_median(const double *x, size_t n, double *out, TpError *err);

/// Percentile `p` (0..100) by linear interpolation between closest ranks: with the values sorted
/// ascending as v[0..n), h = (n - 1) * p / 100 and result v[floor h] + (h - floor h) *
/// (v[floor h + 1] - v[floor h]). This is NumPy's default method "linear" (numpy/numpy,
/// numpy/lib/_function_base_impl.py, `_quantile`), Hyndman & Fan (1996) definition 7, R's
/// default `quantile(type = 7)`.
/// @return 0, TP_EINVAL (n == 0, p outside [0, 100] or NaN, non-finite value) or TP_ENOMEM.
int tp_stats_percentile(const double *x, size_t n, double p, double *out, TpError *err);

/// Same interpolation on values already sorted ascending and finite; `p` in [0, 100], n >= 1.
/// Does not validate (callers that sorted the data checked it).
double tp_stats_percentile_sorted(const double *sorted, size_t n, double p);

/// Coefficient of variation: sample stddev / |mean|.
/// @return 0, or TP_EINVAL (n < 2, mean == 0, non-finite value).
int tp_stats_cv(const double *x, size_t n, double *out, TpError *err);

/// Fills `out` with n, mean, median, variance, stddev, min, max, p5, p25, p75, p95 and cv.
/// Works from n = 1 (variance, stddev and cv are then NaN).
/// @return 0, TP_EINVAL (n == 0, non-finite value) or TP_ENOMEM.
int tp_stats_summary(const double *x, size_t n, TpStatsSummary *out, TpError *err);

/// Result of MSER steady-state detection.
typedef struct TpStatsMser {
  size_t start;      ///< 0-based index of the first value of the steady window (= batch * d*)
  size_t batch;      ///< batch size used (5 for MSER-5)
  size_t batches;    ///< m = floor(n / batch) complete batches
  size_t truncated;  ///< d*: number of leading batches removed
  double statistic;  ///< MSER(d*) = sum_{j>=d*} (Y_j - mean_{j>=d*} Y)^2 / (m - d*)^2
} TpStatsMser;

/// MSER steady-state detection (White 1997, "An effective truncation heuristic for bias
/// reduction in simulation output", Simulation 69(6); White, Cobb & Spratt 2000 for MSER-5;
/// White & Robinson 2010, JOS 4(2)). The series is cut into m = floor(n / batch) batches whose
/// means are Y_0..Y_{m-1} (the n mod batch trailing values form no batch); for every truncation
/// d in 0..floor(m / 2) (the first half of the series) MSER(d) = sum_{j=d}^{m-1} (Y_j - Ybar_d)^2
/// / (m - d)^2, Ybar_d the mean of Y_d..Y_{m-1}; d* is the smallest d with the least MSER(d).
/// The steady window is x[batch * d* .. n), trailing values included.
/// @param batch batch size, >= 1 (5 for MSER-5).
/// @return 0, or TP_EINVAL (batch == 0, fewer than 2 complete batches, non-finite value).
int tp_stats_mser(const double *x, size_t n, size_t batch, TpStatsMser *out, TpError *err);

/// Result of a batch-means confidence interval of the mean.
typedef struct TpStatsBatchCi {
  double mean;        ///< grand mean of the values used (= mean of the batch means)
  double half_width;  ///< t quantile x standard error of the mean
  double lo;          ///< mean - half_width
  double hi;          ///< mean + half_width
  double se;          ///< standard error: stddev of the batch means / sqrt(batches)
  double df;          ///< degrees of freedom of the t quantile (batches - 1)
  size_t batches;     ///< number of batches k
  size_t batch_size;  ///< values per batch b = floor(n / k)
  size_t first;       ///< 0-based index of the first value used (n - k b: leading rest dropped)
} TpStatsBatchCi;

/// Confidence interval of the mean of an autocorrelated stationary series by non-overlapping batch
/// means with a fixed number of batches (Schmeiser 1982, "Batch size effects in the analysis of
/// simulation output", Operations Research 30(3), recommends 10 to 30 batches; Law & Kelton,
/// "Simulation Modeling and Analysis", section 9.5.3). The last k b values (b = floor(n / k))
/// are cut into k batches of b; their means Y_1..Y_k are nearly independent and normal when b is
/// long against the series' correlation time, so the interval is Ybar +- t_{k-1, (1+level)/2}
/// s_Y / sqrt(k), s_Y the sample standard deviation of the batch means.
/// @param batches k >= 2. @param level in (0, 1).
/// @return 0, or TP_EINVAL (k < 2, n < k, bad level, non-finite value) or TP_ENOMEM.
int tp_stats_batch_means_ci(const double *x, size_t n, size_t batches, double level,
                            TpStatsBatchCi *out, TpError *err);

/// A point estimate with a two-sided confidence interval.
typedef struct TpStatsCi {
  double estimate;  ///< the statistic on the original data
  double lo;        ///< lower bound
  double hi;        ///< upper bound
} TpStatsCi;

/// Percentile bootstrap confidence interval of the mean: `resamples` resamples of size n drawn
/// with replacement by the generator below seeded with `seed`; bounds are the (1 - level) / 2
/// and (1 + level) / 2 percentiles (linear interpolation) of the resampled means. The same seed
/// gives the same interval on every machine.
/// @param level confidence level in (0, 1), e.g. 0.95. @param resamples >= 1, <= 100000000.
/// @return 0, TP_EINVAL (n == 0, bad level or resamples, non-finite value) or TP_ENOMEM.
int tp_stats_bootstrap_mean_ci(const double *x, size_t n, double level, size_t resamples,
                               uint64_t seed, TpStatsCi *out, TpError *err);

/// Percentile bootstrap confidence interval of mean(x) / mean(y), the two samples resampled
/// independently (x first, then y, from one generator) in each of `resamples` rounds.
/// @return 0, TP_EINVAL (empty sample, mean(y) == 0 in the data or in a resample, bad level or
/// resamples, non-finite value) or TP_ENOMEM.
int tp_stats_bootstrap_ratio_ci(const double *x, size_t nx, const double *y, size_t ny,
                                double level, size_t resamples, uint64_t seed, TpStatsCi *out,
                                TpError *err);

/// Welch's unequal-variances t-test of mean(x) == mean(y).
typedef struct TpStatsWelch {
  double t;          ///< (mean x - mean y) / sqrt(var x / nx + var y / ny)
  double df;         ///< Welch-Satterthwaite degrees of freedom
  double p;          ///< two-sided p-value from Student's t with df degrees of freedom
  double mean_diff;  ///< mean x - mean y
} TpStatsWelch;

/// Welch's t-test (Welch 1947, Biometrika 34). p = I_{df/(df+t^2)}(df/2, 1/2), I the regularised
/// incomplete beta function (tp_stats_betainc).
/// @return 0, or TP_EINVAL (a sample with fewer than 2 values, both variances 0, non-finite).
int tp_stats_welch(const double *x, size_t nx, const double *y, size_t ny, TpStatsWelch *out,
                   TpError *err);

/// Mann-Whitney U test, normal approximation.
typedef struct TpStatsMannWhitney {
  double u1;  ///< U of x: rank sum of x (average ranks for ties) - nx (nx + 1) / 2
  double u2;  ///< nx * ny - u1
  double z;   ///< (u1 - nx ny / 2 [-+ 0.5]) / sigma, sigma with the tie correction; 0 when all tie
  double p;   ///< two-sided p-value, 2 * (1 - Phi(|z|)), capped at 1
} TpStatsMannWhitney;

/// Mann-Whitney U (Wilcoxon rank-sum) test with tie correction: sigma^2 = nx ny / 12 * ((N + 1) -
/// sum(t^3 - t) / (N (N - 1))), N = nx + ny, t the size of each group of ties. With
/// `continuity` the statistic moves 0.5 towards the mean first (what R's `wilcox.test(correct =
/// TRUE)` and SciPy's `mannwhitneyu(method="asymptotic")` do by default).
/// @return 0, TP_EINVAL (empty sample, non-finite value) or TP_ENOMEM.
int tp_stats_mann_whitney(const double *x, size_t nx, const double *y, size_t ny, bool continuity,
                          TpStatsMannWhitney *out, TpError *err);

/// Modified z-scores (Iglewicz & Hoaglin 1993, "How to Detect and Handle Outliers", ASQC):
/// M_i = 0.6745 (x_i - median) / MAD, MAD the median absolute deviation from the median. When
/// MAD is 0 (more than half the values equal) the scale falls back to 1.253314 * mean absolute
/// deviation from the median (sqrt(pi / 2): the ratio of sigma to the mean absolute deviation of
/// a normal distribution, as 1 / 0.6745 is for the MAD); when that is 0 too, all scores are 0.
/// Values with |M_i| > 3.5 are the usual outliers. Writes n scores to `scores`.
/// @return 0, TP_EINVAL (n == 0, non-finite value) or TP_ENOMEM.
int tp_stats_modified_z(const double *x, size_t n, double *scores, TpError *err);

/// Trailing moving average: out[i] = mean of x[max(0, i - window + 1) .. i] (the window shrinks
/// at the start, so out has n values). `out` must not overlap `x`.
/// @return 0, or TP_EINVAL (window == 0, non-finite value).
int tp_stats_moving_average(const double *x, size_t n, size_t window, double *out, TpError *err);

/// Exponential moving average: out[0] = x[0], out[i] = alpha x[i] + (1 - alpha) out[i - 1].
/// `out` must not overlap `x`. @return 0, or TP_EINVAL (alpha not in (0, 1], non-finite value).
int tp_stats_ema(const double *x, size_t n, double alpha, double *out, TpError *err);

/// Root-mean-square difference of two curves (x1, y1) and (x2, y2) over the x values present in
/// both (exact equality, e.g. iteration numbers). When an x repeats within one curve (a restart
/// from a checkpoint), its last point wins. Writes the distance and the number of common x.
/// @return 0, TP_EINVAL (no common x value, non-finite value) or TP_ENOMEM.
int tp_stats_curve_distance(const double *x1, const double *y1, size_t n1, const double *x2,
                            const double *y2, size_t n2, double *rms, size_t *common, TpError *err);

/// Regularised incomplete beta function I_x(a, b), evaluated by the continued fraction of
/// Abramowitz & Stegun 26.5.8 with the modified Lentz algorithm (Lentz 1976; Thompson & Barnett
/// 1986), using I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges slowly.
/// @return the value, or NaN when a <= 0, b <= 0 or x outside [0, 1].
double tp_stats_betainc(double a, double b, double x);

/// Two-sided p-value of Student's t: P(|T| >= |t|) with df > 0 degrees of freedom.
double tp_stats_t_p2(double t, double df);

/// Quantile of Student's t with df > 0 degrees of freedom: the t with P(T <= t) = p, found by
/// bisection on tp_stats_t_p2 to a relative 1e-13. @return the value, NaN when p is outside
/// (0, 1) or df <= 0.
double tp_stats_t_quantile(double p, double df);

/// Upper tail of the standard normal distribution, P(Z > z).
double tp_stats_normal_sf(double z);

/// A small reproducible generator: xoshiro256** 1.0 (Blackman & Vigna, prng.di.unimi.it),
/// seeded through splitmix64 as its authors recommend.
typedef struct TpStatsRng {
  uint64_t s[4];
} TpStatsRng;

/// Seeds the generator: the four state words are successive splitmix64 outputs from `seed`.
void tp_stats_rng_seed(TpStatsRng *rng, uint64_t seed);
/// Next 64 random bits.
uint64_t tp_stats_rng_next(TpStatsRng *rng);
/// Uniform integer in [0, n), n >= 1, without modulo bias (rejection of the top partial range).
uint64_t tp_stats_rng_below(TpStatsRng *rng, uint64_t n);
