// Lexing helpers of the log scanner's line parsers: see logscan_lex.h.
#include "logscan_lex.h"

#include "logscan_num.h"

const char *ls_find(const char *p, size_t n, const char *lit) {
  return memmem(p, n, lit, strlen(lit));
}

bool ls_text_eq(LsText t, const char *lit) {
  size_t l = strlen(lit);
  return t.n == l && memcmp(t.p, lit, l) == 0;
}

bool ls_read_uint(const char *p, size_t n, size_t *i, long *out) {
  size_t j = *i;
  long v = 0;
  while (j < n && ls_is_digit(p[j])) {
    if (v < 1000000000000L) {
      v = v * 10 + (p[j] - '0');
    }
    j++;
  }
  if (j == *i) {
    return false;
  }
  *i = j;
  *out = v;
  return true;
}

bool ls_value_num(LsText v, double *out) {
  size_t i = ls_skip_spaces(v.p, v.n, 0);
  return tp_logscan_parse_number(v.p + i, v.n - i, out) > 0;
}

bool ls_value_only_num(LsText v, double *out) {
  size_t used = tp_logscan_parse_number(v.p, v.n, out);
  return used > 0 && used == v.n;
}

bool ls_number_after(const char *p, size_t n, const char *lit, double *out) {
  const char *q = ls_find(p, n, lit);
  if (!q) {
    return false;
  }
  size_t i = (size_t)(q - p) + strlen(lit);
  i = ls_skip_spaces(p, n, i);
  return tp_logscan_parse_number(p + i, n - i, out) > 0;
}

bool ls_kv_num(const char *p, size_t n, const char *key, double *out) {
  size_t from = 0, kl = strlen(key);
  while (from < n) {
    const char *q = memmem(p + from, n - from, key, kl);
    if (!q) {
      return false;
    }
    from = (size_t)(q - p) + kl;
    if (q > p && (ls_is_ident(q[-1]) || q[-1] == '.')) {
      continue;
    }
    return tp_logscan_parse_number(q + kl, n - from, out) > 0;
  }
  return false;
}
