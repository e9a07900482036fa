// Change points in a series of measurements (one metric of one benchmark, run after run):
// E-divisive means (Matteson & James 2014) with the Student's t significance test and the merge
// step of Hunter (Fleming et al. 2023), or the permutation test of the original method. Pure C11,
// no Lua.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/// Options of tp_changepoint_detect. Fill with tp_changepoint_defaults, then change fields.
typedef struct TpChangepointOptions {
  double alpha;         ///< significance level in (0, 1): a change point is kept when p <= alpha
  size_t min_size;      ///< fewest points on each side of a change, >= 2
  size_t max_points;    ///< most change points to report; 0 = no limit
  size_t permutations;  ///< 0: Student's t test (Hunter); >= 1: permutation test with that many
                        ///< permutations (Matteson & James)
  uint64_t seed;        ///< seed of the permutations (xoshiro256**, tp_stats_rng_seed)
} TpChangepointOptions;

/// One change point.
typedef struct TpChangepoint {
  size_t index;        ///< 0-based index of the first point after the change
  double stat;         ///< E-divisive divergence Q^ of the two adjacent segments (alpha = 1)
  double p;            ///< p-value: t test of the adjacent segments (adjusted for the positions
                       ///< searched), or the permutation p-value
  double t;            ///< Student's t of the adjacent segments (after - before), pooled variance
  double mean_before;  ///< mean of the segment before (from the previous change point)
  double mean_after;   ///< mean of the segment after (up to the next change point)
} TpChangepoint;

/// The defaults: alpha 0.01, min_size 5, no limit on points, t test, seed 1 (the values chosen
/// with bench/history/detect; see changepoint.c).
void tp_changepoint_defaults(TpChangepointOptions *opt);

/// Largest number of change points tp_changepoint_detect can report for n values with `opt`
/// (size the `out` array with it).
size_t tp_changepoint_capacity(size_t n, const TpChangepointOptions *opt);

/// Finds the change points of x[0..n), in index order, writing *count of them to `out` (which
/// holds at least tp_changepoint_capacity(n, opt) entries). Deterministic: the same input and
/// options give the same result on every machine.
///
/// Divergence (Matteson & James 2014, eq. 3-4, univariate, alpha = 1): for a segment [s, e), a
/// split tau and an end kappa (s < tau < kappa <= e), with X = x[s..tau) (n values) and
/// Y = x[tau..kappa) (m values),
///   Q^ = n m / (n + m) * (2 / (n m) sum |X_i - Y_j| - 2 / (n (n - 1)) sum_{i<k} |X_i - X_k|
///                         - 2 / (m (m - 1)) sum_{j<k} |Y_j - Y_k|).
/// Every (tau, kappa) with n, m >= min_size is tried, in O(L^2) time and O(L) memory per segment
/// of length L by running sums of the pairwise distances.
///
/// t test (default; Hunter, arXiv 2301.03034, and Apache Otava use Student's t test instead of
/// permutations): bisection, the segment with the largest Q^ is cut at its tau while Student's t
/// test of x[s..tau) against x[tau..kappa) gives p <= alpha; then Hunter's merge step repeatedly
/// drops the change point with the largest p above alpha, each p recomputed on the two segments
/// adjacent to it; each survivor moves to the best split between its neighbours (Q^ with kappa at
/// the next change point) and the merge step runs again. Every t-test p is multiplied by the
/// number of positions the split could have taken in the segment tested (Bonferroni, capped at
/// 1), so the false-alarm rate does not grow with the length of the series.
/// Permutation test (permutations >= 1; Matteson & James, as MongoDB's signal processing): a
/// candidate is kept when p = (1 + #{permuted max Q^ >= Q^}) / (permutations + 1) <= alpha, each
/// permutation shuffling the values within every current segment; no merge step.
///
/// @return 0; no change point (count 0) when n < 2 min_size or the series is constant;
///   TP_EINVAL (a NaN or infinite value, alpha outside (0, 1), min_size < 2), TP_ENOMEM.
int tp_changepoint_detect(const double *x, size_t n, const TpChangepointOptions *opt,
                          TpChangepoint *out, size_t *count, TpError *err);
