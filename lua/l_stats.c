// tp._stats: the statistics of engine/stats for Lua: arrays of numbers in, numbers or flat tables
// out. Expected failures (too few values, NaN, no common x) return nil, err, code.
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdint.h>

#include "changepoint.h"
#include "lutil.h"
#include "stats.h"

// Copies the array at `arg` (indices 1..#t, every element a number) into a block of doubles owned
// by a userdata pushed on the stack, so a later raise frees it with the GC. Returns the block.
static double *checkarray(lua_State *L, int arg, size_t *n) {
  luaL_checktype(L, arg, LUA_TTABLE);
  lua_Unsigned len = lua_rawlen(L, arg);
  if (len > (lua_Unsigned)(SIZE_MAX / sizeof(double))) {
    luaL_argerror(L, arg, "array too long");
  }
  double *x = lua_newuserdatauv(L, (size_t)len * sizeof(double), 0);
  for (lua_Unsigned i = 0; i < len; i++) {
    if (lua_rawgeti(L, arg, (lua_Integer)i + 1) != LUA_TNUMBER) {
      const char *msg = lua_pushfstring(L, "number expected at index %I, got %s",
                                        (LUAI_UACINT)(i + 1), luaL_typename(L, -1));
      luaL_argerror(L, arg, msg);
    }
    x[i] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  *n = (size_t)len;
  return x;
}

// Pushes a new scratch block of n doubles (a userdata) and returns it.
static double *newarray(lua_State *L, size_t n) {
  if (n > SIZE_MAX / sizeof(double)) {
    luaL_error(L, "array too long");
  }
  return lua_newuserdatauv(L, n * sizeof(double), 0);
}

static void pushlist(lua_State *L, const double *x, size_t n) {
  lua_createtable(L, n <= INT32_MAX ? (int)n : 0, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushnumber(L, x[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static void setnum(lua_State *L, const char *field, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, field);
}

// Sets field only when v is not NaN (undefined statistics are absent, never NaN).
static void setnum_defined(lua_State *L, const char *field, double v) {
  if (!isnan(v)) {
    setnum(L, field, v);
  }
}

typedef int (*UnaryFn)(const double *, size_t, double *, TpError *);

static int unary(lua_State *L, UnaryFn fn) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  double v = 0.0;
  TpError err;
  if (fn(x, n, &v, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushnumber(L, v);
  return 1;
}

// stats.mean(xs) -> number | nil, err, code (and the same for the six below)
static int l_mean(lua_State *L) {
  return unary(L, tp_stats_mean);
}
static int l_variance(lua_State *L) {
  return unary(L, tp_stats_variance);
}
static int l_stddev(lua_State *L) {
  return unary(L, tp_stats_stddev);
}
static int l_min(lua_State *L) {
  return unary(L, tp_stats_min);
}
static int l_max(lua_State *L) {
  return unary(L, tp_stats_max);
}
static int l_median(lua_State *L) {
  return unary(L, tp_stats_median);
}
static int l_cv(lua_State *L) {
  return unary(L, tp_stats_cv);
}

// stats.percentile(xs, p) -> number | nil, err, code; p a number in [0, 100]
static int l_percentile(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  double p = luaL_checknumber(L, 2);
  double v = 0.0;
  TpError err;
  if (tp_stats_percentile(x, n, p, &v, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushnumber(L, v);
  return 1;
}

// stats.summary(xs) -> {n=, mean=, median=, variance=, stddev=, min=, max=, p5=, p25=, p75=, p95=,
// cv=} | nil, err, code; variance, stddev and cv are absent when undefined (n < 2, mean 0)
static int l_summary(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  TpStatsSummary s;
  TpError err;
  if (tp_stats_summary(x, n, &s, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, 0, 12);
  lua_pushinteger(L, (lua_Integer)s.n);
  lua_setfield(L, -2, "n");
  setnum(L, "mean", s.mean);
  setnum(L, "median", s.median);
  setnum_defined(L, "variance", s.variance);
  setnum_defined(L, "stddev", s.stddev);
  setnum(L, "min", s.min);
  setnum(L, "max", s.max);
  setnum(L, "p5", s.p5);
  setnum(L, "p25", s.p25);
  setnum(L, "p75", s.p75);
  setnum(L, "p95", s.p95);
  setnum_defined(L, "cv", s.cv);
  return 1;
}

// stats.mser(xs, batch) -> {start=, batch=, batches=, truncated=, statistic=} | nil, err, code;
// start is the 1-based index of the first value of the steady window
static int l_mser(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  lua_Integer batch = luaL_checkinteger(L, 2);
  luaL_argcheck(L, batch >= 1, 2, "batch size must be at least 1");
  TpStatsMser m;
  TpError err;
  if (tp_stats_mser(x, n, (size_t)batch, &m, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, (lua_Integer)m.start + 1);
  lua_setfield(L, -2, "start");
  lua_pushinteger(L, (lua_Integer)m.batch);
  lua_setfield(L, -2, "batch");
  lua_pushinteger(L, (lua_Integer)m.batches);
  lua_setfield(L, -2, "batches");
  lua_pushinteger(L, (lua_Integer)m.truncated);
  lua_setfield(L, -2, "truncated");
  setnum(L, "statistic", m.statistic);
  return 1;
}

static void pushci(lua_State *L, const TpStatsCi *ci) {
  lua_createtable(L, 0, 3);
  setnum(L, "estimate", ci->estimate);
  setnum(L, "lo", ci->lo);
  setnum(L, "hi", ci->hi);
}

static size_t checkresamples(lua_State *L, int arg) {
  lua_Integer r = luaL_checkinteger(L, arg);
  luaL_argcheck(L, r >= 1 && r <= 100000000, arg, "resamples outside [1, 100000000]");
  return (size_t)r;
}

// stats.bootstrap_mean_ci(xs, level, resamples, seed) -> {estimate=, lo=, hi=} | nil, err, code
static int l_bootstrap_mean_ci(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  double level = luaL_checknumber(L, 2);
  size_t resamples = checkresamples(L, 3);
  uint64_t seed = (uint64_t)luaL_checkinteger(L, 4);
  TpStatsCi ci;
  TpError err;
  if (tp_stats_bootstrap_mean_ci(x, n, level, resamples, seed, &ci, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  pushci(L, &ci);
  return 1;
}

// stats.bootstrap_ratio_ci(xs, ys, level, resamples, seed) -> {estimate=, lo=, hi=} | nil, err,
// code; the ratio is mean(xs) / mean(ys)
static int l_bootstrap_ratio_ci(lua_State *L) {
  size_t nx = 0;
  size_t ny = 0;
  double *x = checkarray(L, 1, &nx);
  double *y = checkarray(L, 2, &ny);
  double level = luaL_checknumber(L, 3);
  size_t resamples = checkresamples(L, 4);
  uint64_t seed = (uint64_t)luaL_checkinteger(L, 5);
  TpStatsCi ci;
  TpError err;
  if (tp_stats_bootstrap_ratio_ci(x, nx, y, ny, level, resamples, seed, &ci, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  pushci(L, &ci);
  return 1;
}

// stats.welch(xs, ys) -> {t=, df=, p=, mean_diff=} | nil, err, code
static int l_welch(lua_State *L) {
  size_t nx = 0;
  size_t ny = 0;
  double *x = checkarray(L, 1, &nx);
  double *y = checkarray(L, 2, &ny);
  TpStatsWelch w;
  TpError err;
  if (tp_stats_welch(x, nx, y, ny, &w, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, 0, 4);
  setnum(L, "t", w.t);
  setnum(L, "df", w.df);
  setnum(L, "p", w.p);
  setnum(L, "mean_diff", w.mean_diff);
  return 1;
}

// stats.mann_whitney(xs, ys, continuity) -> {u1=, u2=, z=, p=} | nil, err, code
static int l_mann_whitney(lua_State *L) {
  size_t nx = 0;
  size_t ny = 0;
  double *x = checkarray(L, 1, &nx);
  double *y = checkarray(L, 2, &ny);
  bool continuity = lua_isnoneornil(L, 3) ? true : lua_toboolean(L, 3);
  TpStatsMannWhitney m;
  TpError err;
  if (tp_stats_mann_whitney(x, nx, y, ny, continuity, &m, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, 0, 4);
  setnum(L, "u1", m.u1);
  setnum(L, "u2", m.u2);
  setnum(L, "z", m.z);
  setnum(L, "p", m.p);
  return 1;
}

// stats.modified_z(xs) -> {score, ...} | nil, err, code
static int l_modified_z(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  double *out = newarray(L, n);
  TpError err;
  if (tp_stats_modified_z(x, n, out, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  pushlist(L, out, n);
  return 1;
}

// stats.moving_average(xs, window) -> {value, ...} | nil, err, code
static int l_moving_average(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  lua_Integer w = luaL_checkinteger(L, 2);
  luaL_argcheck(L, w >= 1, 2, "window must be at least 1");
  double *out = newarray(L, n);
  TpError err;
  if (tp_stats_moving_average(x, n, (size_t)w, out, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  pushlist(L, out, n);
  return 1;
}

// stats.ema(xs, alpha) -> {value, ...} | nil, err, code
static int l_ema(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  double alpha = luaL_checknumber(L, 2);
  double *out = newarray(L, n);
  TpError err;
  if (tp_stats_ema(x, n, alpha, out, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  pushlist(L, out, n);
  return 1;
}

// stats.curve_distance(x1, y1, x2, y2) -> rms, common | nil, err, code
static int l_curve_distance(lua_State *L) {
  size_t n1 = 0;
  size_t m1 = 0;
  size_t n2 = 0;
  size_t m2 = 0;
  double *x1 = checkarray(L, 1, &n1);
  double *y1 = checkarray(L, 2, &m1);
  double *x2 = checkarray(L, 3, &n2);
  double *y2 = checkarray(L, 4, &m2);
  luaL_argcheck(L, n1 == m1, 2, "x and y of the first curve differ in length");
  luaL_argcheck(L, n2 == m2, 4, "x and y of the second curve differ in length");
  double rms = 0.0;
  size_t common = 0;
  TpError err;
  if (tp_stats_curve_distance(x1, y1, n1, x2, y2, n2, &rms, &common, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_pushnumber(L, rms);
  lua_pushinteger(L, (lua_Integer)common);
  return 2;
}

// stats.batch_means_ci(xs, batches, level) -> {mean=, half_width=, lo=, hi=, se=, df=, batches=,
// batch_size=, first=} | nil, err, code; first is the 1-based index of the first value used
static int l_batch_means_ci(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  lua_Integer batches = luaL_checkinteger(L, 2);
  double level = luaL_checknumber(L, 3);
  luaL_argcheck(L, batches >= 2, 2, "at least 2 batches");
  TpStatsBatchCi ci;
  TpError err;
  if (tp_stats_batch_means_ci(x, n, (size_t)batches, level, &ci, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, 0, 9);
  setnum(L, "mean", ci.mean);
  setnum(L, "half_width", ci.half_width);
  setnum(L, "lo", ci.lo);
  setnum(L, "hi", ci.hi);
  setnum(L, "se", ci.se);
  setnum(L, "df", ci.df);
  lua_pushinteger(L, (lua_Integer)ci.batches);
  lua_setfield(L, -2, "batches");
  lua_pushinteger(L, (lua_Integer)ci.batch_size);
  lua_setfield(L, -2, "batch_size");
  lua_pushinteger(L, (lua_Integer)ci.first + 1);
  lua_setfield(L, -2, "first");
  return 1;
}

// stats.t_quantile(p, df) -> t with P(T <= t) = p (NaN outside the domain)
static int l_t_quantile(lua_State *L) {
  double p = luaL_checknumber(L, 1);
  double df = luaL_checknumber(L, 2);
  lua_pushnumber(L, tp_stats_t_quantile(p, df));
  return 1;
}

// stats.betainc(a, b, x) -> number (NaN outside the domain)
static int l_betainc(lua_State *L) {
  double a = luaL_checknumber(L, 1);
  double b = luaL_checknumber(L, 2);
  double x = luaL_checknumber(L, 3);
  lua_pushnumber(L, tp_stats_betainc(a, b, x));
  return 1;
}

// stats.t_p2(t, df) -> two-sided p-value of Student's t
static int l_t_p2(lua_State *L) {
  double t = luaL_checknumber(L, 1);
  double df = luaL_checknumber(L, 2);
  lua_pushnumber(L, tp_stats_t_p2(t, df));
  return 1;
}

// stats.change_points(xs, alpha, min_size, max_points, permutations, seed) -> {{index=, stat=, p=,
// t=, mean_before=, mean_after=}, ...} | nil, err, code; index is 1-based (the first point after
// the change); max_points 0 means no limit, permutations 0 the t test
static int l_change_points(lua_State *L) {
  size_t n = 0;
  double *x = checkarray(L, 1, &n);
  TpChangepointOptions opt;
  tp_changepoint_defaults(&opt);
  opt.alpha = luaL_checknumber(L, 2);
  lua_Integer min_size = luaL_checkinteger(L, 3);
  lua_Integer max_points = luaL_checkinteger(L, 4);
  lua_Integer permutations = luaL_checkinteger(L, 5);
  luaL_argcheck(L, min_size >= 2 && min_size <= 1000000000, 3, "min_size outside [2, 1e9]");
  luaL_argcheck(L, max_points >= 0 && max_points <= 1000000000, 4, "max_points outside [0, 1e9]");
  luaL_argcheck(L, permutations >= 0 && permutations <= 1000000, 5,
                "permutations outside [0, 1000000]");
  opt.min_size = (size_t)min_size;
  opt.max_points = (size_t)max_points;
  opt.permutations = (size_t)permutations;
  opt.seed = (uint64_t)luaL_checkinteger(L, 6);
  size_t cap = tp_changepoint_capacity(n, &opt);
  if (cap > SIZE_MAX / sizeof(TpChangepoint)) {
    luaL_error(L, "array too long");
  }
  TpChangepoint *cps = lua_newuserdatauv(L, (cap > 0 ? cap : 1) * sizeof(TpChangepoint), 0);
  size_t count = 0;
  TpError err;
  if (tp_changepoint_detect(x, n, &opt, cps, &count, &err) != 0) {
    return tpl_pusherror(L, &err);
  }
  lua_createtable(L, count <= INT32_MAX ? (int)count : 0, 0);
  for (size_t i = 0; i < count; i++) {
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, (lua_Integer)cps[i].index + 1);
    lua_setfield(L, -2, "index");
    setnum(L, "stat", cps[i].stat);
    setnum(L, "p", cps[i].p);
    setnum(L, "t", cps[i].t);
    setnum(L, "mean_before", cps[i].mean_before);
    setnum(L, "mean_after", cps[i].mean_after);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

static const luaL_Reg funcs[] = {
    {"mean", l_mean},
    {"variance", l_variance},
    {"stddev", l_stddev},
    {"min", l_min},
    {"max", l_max},
    {"median", l_median},
    {"cv", l_cv},
    {"percentile", l_percentile},
    {"summary", l_summary},
    {"mser", l_mser},
    {"bootstrap_mean_ci", l_bootstrap_mean_ci},
    {"bootstrap_ratio_ci", l_bootstrap_ratio_ci},
    {"welch", l_welch},
    {"mann_whitney", l_mann_whitney},
    {"modified_z", l_modified_z},
    {"moving_average", l_moving_average},
    {"ema", l_ema},
    {"curve_distance", l_curve_distance},
    {"betainc", l_betainc},
    {"t_p2", l_t_p2},
    {"batch_means_ci", l_batch_means_ci},
    {"t_quantile", l_t_quantile},
    {"change_points", l_change_points},
    {NULL, NULL},
};

int luaopen_tp__stats(lua_State *L);

int luaopen_tp__stats(lua_State *L) {
  luaL_newlib(L, funcs);
  return 1;
}
