// E-divisive means change points with a t test and merge step (Hunter) or a permutation test
// (Matteson & James); see changepoint.h for the definitions.
//
// Sources: D. S. Matteson and N. A. James, "A nonparametric approach for multiple change point
// analysis of multivariate data", JASA 109(505), 2014 (arXiv 1306.4933): the divergence Q^, the
// bisection over (tau, kappa), the permutation test within the current segments. M. Fleming et al.,
// "Hunter: Using Change Point Detection to Hunt for Performance Regressions", ICPE 2023 (arXiv
// 2301.03034) and Apache Otava (https://github.com/apache/otava, docs/MATH.md): Student's t test
// instead of permutations (fast, deterministic), a relaxed first level and a merge step that
// re-tests each change point against its neighbours. D. Daly et al., "The Use of Change Point
// Detection to Identify Software Performance Regressions in a Continuous Integration System",
// ICPE 2020 (arXiv 2003.00584): E-divisive with permutations in MongoDB's CI.
//
// Defaults (chosen with bench/history/detect on 2,000 seeded series of 30-120 nightly points,
// noise CV 1-2 %, steps of 2-5 % up and down, none, one or two steps): alpha 0.01, min_size 5.
// alpha 0.02 finds 0.6 % more steps for 1.2 % more false alarms, 0.05 3 % more for 6 % more;
// 0.005 misses 1 % more steps for 0.6 % fewer false alarms. min_size 3 or 4 finds no more steps
// and raises false alarms; 6 and 8 find fewer of the steps 5-9 points before the end (76 % and
// 58 % instead of 80 %), which is what a nightly check sees first.
#include "changepoint.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

void tp_changepoint_defaults(TpChangepointOptions *opt) {
  opt->alpha = 0.01;
  opt->min_size = 5;
  opt->max_points = 0;
  opt->permutations = 0;
  opt->seed = 1;
}

size_t tp_changepoint_capacity(size_t n, const TpChangepointOptions *opt) {
  if (opt->min_size < 2 || n < 2 * opt->min_size) {
    return 0;
  }
  size_t cap = n / opt->min_size - 1;
  if (opt->max_points > 0 && opt->max_points < cap) {
    cap = opt->max_points;
  }
  return cap;
}

// A segment [s, e) of the current partition and its best split (when `has`).
typedef struct Segment {
  size_t s;
  size_t e;
  bool has;
  size_t tau;
  size_t kappa;
  double q;
} Segment;

// Scratch memory of one detection.
typedef struct Work {
  const double *x;  // the series
  size_t n;
  size_t min_size;
  double *within;    // within[b - s] = sum_{s <= i < j < b} |x_i - x_j|, b in [s, e]
  double *colsum;    // colsum[k - s] = sum_{tau <= i < k} |x_i - x_k| for the current tau
  double *shuffled;  // a permuted copy of x (permutation test)
  Segment *seg;      // the partition, in index order
  size_t nseg;
  size_t *cp;    // change points (first index after each), in index order
  double *cp_p;  // permutation p-value of each change point
  size_t ncp;
} Work;

// Finds the (tau, kappa) of [s, e) with the largest Q^ over x, both sides at least min_size long.
// Returns false when the segment is too short or no split has Q^ > 0 (a constant segment).
static bool best_split(const double *x, size_t s, size_t e, size_t min_size, double *within,
                       double *colsum, size_t *tau_out, size_t *kappa_out, double *q_out) {
  if (e - s < 2 * min_size) {
    return false;
  }
  size_t len = e - s;
  within[0] = 0.0;
  for (size_t b = s; b < e; b++) {
    double acc = 0.0;
    for (size_t i = s; i < b; i++) {
      acc += fabs(x[i] - x[b]);
    }
    within[b + 1 - s] = within[b - s] + acc;
  }
  for (size_t k = 0; k <= len; k++) {
    colsum[k] = 0.0;
  }
  bool found = false;
  double best = 0.0;
  size_t best_tau = 0;
  size_t best_kappa = 0;
  // tau runs down so that colsum[k] (distances from x[k] to x[tau..k)) grows by one term per step;
  // then W(tau, kappa), the within sum of x[tau..kappa), grows along kappa by colsum.
  for (size_t tau = e - 1; tau >= s + min_size; tau--) {
    double xt = x[tau];
    for (size_t k = tau + 1; k < e; k++) {
      colsum[k - s] += fabs(xt - x[k]);
    }
    if (tau + min_size > e) {
      continue;
    }
    double n = (double)(tau - s);
    double w_left = within[tau - s];
    double left_term = 2.0 * w_left / (n * (n - 1.0));
    double w_right = 0.0;  // W(tau, kappa) for kappa = k + 1
    for (size_t k = tau + 1; k < e; k++) {
      w_right += colsum[k - s];
      size_t kappa = k + 1;
      if (kappa - tau < min_size) {
        continue;
      }
      double m = (double)(kappa - tau);
      double between = within[kappa - s] - w_left - w_right;
      double energy = 2.0 * between / (n * m) - left_term - 2.0 * w_right / (m * (m - 1.0));
      double q = n * m / (n + m) * energy;
      if (q > best) {
        best = q;
        best_tau = tau;
        best_kappa = kappa;
        found = true;
      }
    }
  }
  if (found) {
    *tau_out = best_tau;
    *kappa_out = best_kappa;
    *q_out = best;
  }
  return found;
}

// Q^ of x[a..b) against x[b..c), by direct sums (the statistic reported for a change point).
static double divergence(const double *x, size_t a, size_t b, size_t c) {
  double between = 0.0;
  double left = 0.0;
  double right = 0.0;
  for (size_t i = a; i < b; i++) {
    for (size_t j = i + 1; j < b; j++) {
      left += fabs(x[i] - x[j]);
    }
    for (size_t j = b; j < c; j++) {
      between += fabs(x[i] - x[j]);
    }
  }
  for (size_t i = b; i < c; i++) {
    for (size_t j = i + 1; j < c; j++) {
      right += fabs(x[i] - x[j]);
    }
  }
  double n = (double)(b - a);
  double m = (double)(c - b);
  double energy = 2.0 * between / (n * m) - (n > 1 ? 2.0 * left / (n * (n - 1.0)) : 0.0) -
                  (m > 1 ? 2.0 * right / (m * (m - 1.0)) : 0.0);
  return n * m / (n + m) * energy;
}

static double mean_of(const double *x, size_t a, size_t b) {
  double sum = 0.0;
  for (size_t i = a; i < b; i++) {
    sum += x[i];
  }
  return sum / (double)(b - a);
}

// Student's two-sample t test (pooled variance) of x[a..b) against x[b..c); both have >= 2
// values. Writes t (positive when the second mean is larger) and returns the two-sided p.
static double t_test(const double *x, size_t a, size_t b, size_t c, double *t_out) {
  double n1 = (double)(b - a);
  double n2 = (double)(c - b);
  double m1 = mean_of(x, a, b);
  double m2 = mean_of(x, b, c);
  double ss = 0.0;
  for (size_t i = a; i < b; i++) {
    ss += (x[i] - m1) * (x[i] - m1);
  }
  for (size_t i = b; i < c; i++) {
    ss += (x[i] - m2) * (x[i] - m2);
  }
  double df = n1 + n2 - 2.0;
  double se = sqrt(ss / df * (1.0 / n1 + 1.0 / n2));
  double diff = m2 - m1;
  if (!(se > 0.0) || fabs(diff) / se > 1e300) {
    // No spread on either side: any difference is certain, none is no evidence.
    *t_out = diff == 0.0 ? 0.0 : (diff > 0.0 ? INFINITY : -INFINITY);
    return diff == 0.0 ? 1.0 : 0.0;
  }
  *t_out = diff / se;
  return tp_stats_t_p2(*t_out, df);
}

// The t test's p-value made honest about the search: a change point is the best of the positions
// its segment [a, a + len) offered (len - 2 min_size + 1 of them), so its p is multiplied by that
// count (Bonferroni), capped at 1. Without it the chance of a false alarm grows with the length of
// the series (on 1,000 flat points, two thirds of series got one at p <= 0.001 unadjusted).
static double adjusted(double p, size_t len, size_t min_size) {
  double positions = (double)(len - 2 * min_size + 1);
  return p * positions > 1.0 ? 1.0 : p * positions;
}

// Permutation p-value of a candidate with divergence q_obs: each round shuffles the values within
// every current segment and takes the largest Q^ over the segments.
static double permutation_p(Work *w, double q_obs, size_t rounds, TpStatsRng *rng) {
  size_t extreme = 0;
  for (size_t r = 0; r < rounds; r++) {
    memcpy(w->shuffled, w->x, w->n * sizeof(double));
    double best = 0.0;
    for (size_t g = 0; g < w->nseg; g++) {
      size_t s = w->seg[g].s;
      size_t len = w->seg[g].e - s;
      for (size_t i = len; i > 1; i--) {
        size_t j = (size_t)tp_stats_rng_below(rng, i);
        double tmp = w->shuffled[s + i - 1];
        w->shuffled[s + i - 1] = w->shuffled[s + j];
        w->shuffled[s + j] = tmp;
      }
      size_t tau = 0;
      size_t kappa = 0;
      double q = 0.0;
      if (best_split(w->shuffled, s, w->seg[g].e, w->min_size, w->within, w->colsum, &tau, &kappa,
                     &q) &&
          q > best) {
        best = q;
      }
    }
    if (best >= q_obs) {
      extreme++;
    }
  }
  return (double)(extreme + 1) / (double)(rounds + 1);
}

static void fill_segment(Work *w, Segment *g, size_t s, size_t e) {
  g->s = s;
  g->e = e;
  g->has = best_split(w->x, s, e, w->min_size, w->within, w->colsum, &g->tau, &g->kappa, &g->q);
}

// Bisection: cuts the segment with the largest Q^ while its candidate passes the test at `level`.
static void split_phase(Work *w, const TpChangepointOptions *opt, double level, size_t limit) {
  TpStatsRng rng;
  tp_stats_rng_seed(&rng, opt->seed);
  w->nseg = 1;
  fill_segment(w, &w->seg[0], 0, w->n);
  w->ncp = 0;
  while (w->ncp < limit) {
    size_t pick = w->nseg;
    for (size_t g = 0; g < w->nseg; g++) {
      if (w->seg[g].has && (pick == w->nseg || w->seg[g].q > w->seg[pick].q)) {
        pick = g;
      }
    }
    if (pick == w->nseg) {
      break;
    }
    Segment c = w->seg[pick];
    double p;
    if (opt->permutations > 0) {
      p = permutation_p(w, c.q, opt->permutations, &rng);
    } else {
      double t;
      p = adjusted(t_test(w->x, c.s, c.tau, c.kappa, &t), c.e - c.s, w->min_size);
    }
    if (p > level) {
      break;
    }
    // Record the change point (kept in index order) and cut the segment in two.
    size_t at = 0;
    while (at < w->ncp && w->cp[at] < c.tau) {
      at++;
    }
    memmove(&w->cp[at + 1], &w->cp[at], (w->ncp - at) * sizeof(size_t));
    memmove(&w->cp_p[at + 1], &w->cp_p[at], (w->ncp - at) * sizeof(double));
    w->cp[at] = c.tau;
    w->cp_p[at] = p;
    w->ncp++;
    memmove(&w->seg[pick + 2], &w->seg[pick + 1], (w->nseg - pick - 1) * sizeof(Segment));
    w->nseg++;
    fill_segment(w, &w->seg[pick], c.s, c.tau);
    fill_segment(w, &w->seg[pick + 1], c.tau, c.e);
  }
}

// Bounds of the segments next to change point i: [before, cp[i]) and [cp[i], after).
static void neighbours(const Work *w, size_t i, size_t *before, size_t *after) {
  *before = i == 0 ? 0 : w->cp[i - 1];
  *after = i + 1 == w->ncp ? w->n : w->cp[i + 1];
}

static void remove_point(Work *w, size_t i) {
  memmove(&w->cp[i], &w->cp[i + 1], (w->ncp - i - 1) * sizeof(size_t));
  memmove(&w->cp_p[i], &w->cp_p[i + 1], (w->ncp - i - 1) * sizeof(double));
  w->ncp--;
}

// Hunter's merge step: drops the change point with the largest p while it is above alpha (or
// while there are more than `limit`), each p from the t test of its two adjacent segments.
static void merge_phase(Work *w, double alpha, size_t limit) {
  while (w->ncp > 0) {
    size_t worst = 0;
    double worst_p = -1.0;
    for (size_t i = 0; i < w->ncp; i++) {
      size_t a = 0;
      size_t c = 0;
      neighbours(w, i, &a, &c);
      double t;
      double p = adjusted(t_test(w->x, a, w->cp[i], c, &t), c - a, w->min_size);
      if (p > worst_p) {
        worst_p = p;
        worst = i;
      }
    }
    if (worst_p <= alpha && w->ncp <= limit) {
      break;
    }
    remove_point(w, worst);
  }
}

// Moves change point i to the split of its two adjacent segments [a, c) with the largest Q^ (kappa
// fixed at c), each side still at least min_size long. The bisection placed it against the
// segments of its time; once its neighbours are final, this is the E-divisive estimate between
// them. O(L^2) by the same running sums as best_split.
static void relocate(Work *w, size_t i) {
  size_t a = 0;
  size_t c = 0;
  neighbours(w, i, &a, &c);
  const double *x = w->x;
  size_t len = c - a;
  // within[b - a] = W(a, b); colsum[t - a] = W(t, c), built from the end.
  w->within[0] = 0.0;
  for (size_t b = a; b < c; b++) {
    double acc = 0.0;
    for (size_t j = a; j < b; j++) {
      acc += fabs(x[j] - x[b]);
    }
    w->within[b + 1 - a] = w->within[b - a] + acc;
  }
  w->colsum[len] = 0.0;
  for (size_t t = c; t-- > a;) {
    double acc = 0.0;
    for (size_t j = t + 1; j < c; j++) {
      acc += fabs(x[t] - x[j]);
    }
    w->colsum[t - a] = w->colsum[t + 1 - a] + acc;
  }
  double total = w->within[len];
  size_t best = w->cp[i];
  double best_q = -INFINITY;
  for (size_t tau = a + w->min_size; tau + w->min_size <= c; tau++) {
    double n = (double)(tau - a);
    double m = (double)(c - tau);
    double left = w->within[tau - a];
    double right = w->colsum[tau - a];
    double between = total - left - right;
    double q =
        n * m / (n + m) *
        (2.0 * between / (n * m) - 2.0 * left / (n * (n - 1.0)) - 2.0 * right / (m * (m - 1.0)));
    if (q > best_q) {
      best_q = q;
      best = tau;
    }
  }
  w->cp[i] = best;
}

int tp_changepoint_detect(const double *x, size_t n, const TpChangepointOptions *opt,
                          TpChangepoint *out, size_t *count, TpError *err) {
  const char *fn = "change_points";
  *count = 0;
  if (!(opt->alpha > 0.0 && opt->alpha < 1.0)) {
    return tp_error_set(err, TP_EINVAL, "%s: significance level %g outside (0, 1)", fn, opt->alpha);
  }
  if (opt->min_size < 2) {
    return tp_error_set(err, TP_EINVAL, "%s: minimum segment size %zu below 2", fn, opt->min_size);
  }
  if (n > 0 && !x) {
    return tp_error_set(err, TP_EINVAL, "%s: NULL data", fn);
  }
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) {
      return tp_error_set(err, TP_EINVAL, "%s: value #%zu is %s", fn, i + 1,
                          isnan(x[i]) ? "NaN" : "infinite");
    }
  }
  size_t cap = tp_changepoint_capacity(n, opt);
  if (cap == 0) {
    return 0;
  }
  // At most n / min_size segments, whatever max_points says (the merge step may start from more
  // change points than it keeps).
  size_t most = n / opt->min_size - 1;
  if (n > SIZE_MAX / 64) {
    return tp_error_set(err, TP_ENOMEM, "%s: %zu values: too many", fn, n);
  }
  // One block: within, colsum (n + 1 each), shuffled (n), cp_p (most), then cp (most) and the
  // segments (most + 1).
  size_t doubles = 2 * (n + 1) + n + most;
  size_t bytes = doubles * sizeof(double) + most * sizeof(size_t) + (most + 1) * sizeof(Segment);
  char *block = malloc(bytes);
  if (!block) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory for %zu values", fn, n);
  }
  Work w = {.x = x, .n = n, .min_size = opt->min_size};
  w.within = (double *)block;
  w.colsum = w.within + (n + 1);
  w.shuffled = w.colsum + (n + 1);
  w.cp_p = w.shuffled + n;
  w.cp = (size_t *)(w.cp_p + most);
  w.seg = (Segment *)(block + doubles * sizeof(double) + most * sizeof(size_t));

  if (opt->permutations > 0) {
    split_phase(&w, opt, opt->alpha, cap);
  } else {
    // Apache Otava cuts first at a relaxed level (10 alpha) and lets the merge step apply alpha;
    // with p-values adjusted for the positions searched that added false alarms in
    // bench/history/detect without finding more steps, so both steps use alpha here.
    split_phase(&w, opt, opt->alpha, most);
    merge_phase(&w, opt->alpha, cap);
    // Refine each location between its final neighbours, then re-test: a moved point is kept
    // only while it still passes against them.
    for (int pass = 0; pass < 2; pass++) {
      for (size_t i = 0; i < w.ncp; i++) {
        relocate(&w, i);
      }
      merge_phase(&w, opt->alpha, cap);
    }
  }

  for (size_t i = 0; i < w.ncp; i++) {
    size_t a = 0;
    size_t c = 0;
    neighbours(&w, i, &a, &c);
    TpChangepoint r;
    r.index = w.cp[i];
    r.mean_before = mean_of(x, a, r.index);
    r.mean_after = mean_of(x, r.index, c);
    r.stat = divergence(x, a, r.index, c);
    double p_t = adjusted(t_test(x, a, r.index, c, &r.t), c - a, opt->min_size);
    r.p = opt->permutations > 0 ? w.cp_p[i] : p_t;
    out[i] = r;
  }
  *count = w.ncp;
  free(block);
  return 0;
}
