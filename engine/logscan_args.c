// Argument dumps: Megatron's `_print_args` layout (also the NeMo driver's dump of dotted recipe
// paths), Primus' `log_dict_aligned` dumps, torchtitan's job config printed as a Python dict; and,
// at the end of the log, the run facts the dumps state. The dispatcher (logscan_parse.c) owns
// the dump modes: which lines go here.
#include "logscan_args.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logscan_lex.h"
#include "logscan_state.h"

// --- Reading the dumps ------------------------------------------------------------------------

// The value of the last `name` in a dump.
static bool arg_get(const TpLogScan *s, TpLogArgDump which, const char *name, LsText *out) {
  size_t nl = strlen(name);
  bool found = false;
  for (size_t i = 0; i < s->args[which].n; i++) {
    const LsArgEnt *e = &s->args[which].ents[i];
    if (e->name_len == nl && memcmp(s->args[which].pool.data + e->name_ofs, name, nl) == 0) {
      *out = (LsText){s->args[which].pool.data + e->val_ofs, e->val_len};
      found = true;  // the last occurrence wins
    }
  }
  return found;
}

// A numeric value, from the main dump, else from Primus'.
static bool arg_num(const TpLogScan *s, const char *name, double *v) {
  LsText t;
  for (int w = 0; w < 2; w++) {
    if (arg_get(s, (TpLogArgDump)w, name, &t) && ls_value_only_num(t, v)) {
      return true;
    }
  }
  return false;
}

// Whether the first dump that has `name` says True.
static bool arg_true(const TpLogScan *s, const char *name) {
  LsText t;
  for (int w = 0; w < 2; w++) {
    if (arg_get(s, (TpLogArgDump)w, name, &t)) {
      return LS_TEQ(t, "True");
    }
  }
  return false;
}

// A positive numeric value (torchtitan prints -1 for "derived").
static bool arg_pos(const TpLogScan *s, const char *name, double *v) {
  return arg_num(s, name, v) && *v > 0;
}

// --- Argument dumps ---------------------------------------------------------------------------
// Megatron: megatron/training/arguments.py, _print_args: "---- arguments ----", then
// "  <name> <dots> <value>" (48 - len(name) dots, none for names of 48+ characters), then
// "---- end of arguments ----". Primus: primus/core/utils/module_utils.py, log_dict_aligned:
// "<title>: (N parameters)", then "  <key><pad> : <value> (<type>)".

bool ls_args_rule(LsText t, LsText *title) {
  if (t.n < 8 || !LS_STARTS(t.p, t.n, "---") || t.p[t.n - 1] != '-') {
    return false;
  }
  size_t a = 0, b = t.n;
  while (a < b && t.p[a] == '-') {
    a++;
  }
  while (b > a && t.p[b - 1] == '-') {
    b--;
  }
  *title = ls_trim(t.p + a, b - a);
  return title->n > 0;
}

// A name of a `_print_args`-layout line: Megatron's argparse destinations are identifiers; the
// NeMo driver (stdlib/tp/frameworks/nemo.lua, SCRIPT, print_arguments) prints dotted recipe
// paths ("optim.config.lr") in the same layout. Returns the name length (0: not a name) and
// whether it has dots.
static size_t dump_name(const char *p, size_t n, bool *dotted) {
  size_t i = 0;
  *dotted = false;
  while (i < n && (ls_is_ident(p[i]) || p[i] == '.')) {
    if (p[i] == '.') {
      if (i == 0 || p[i - 1] == '.') {
        return 0;
      }
      *dotted = true;
    }
    i++;
  }
  if (i == 0 || ls_is_digit(p[0]) || p[i - 1] == '.') {
    return 0;
  }
  return i;
}

int ls_args_line(TpLogScan *s, const LsLine *L, bool strict) {
  const char *p = L->p;
  size_t n = L->n;
  bool dotted;
  size_t i = dump_name(p, n, &dotted);
  if (i == 0 || i >= n || p[i] != ' ') {
    return 0;
  }
  size_t name_len = i;
  i++;
  size_t dots = i;
  while (i < n && p[i] == '.') {
    i++;
  }
  dots = i - dots;
  // A dotted name must come with the layout's separator: " <dots> " (48 - len(name) dots), or
  // two spaces for names of 48 characters or more. Identifiers keep Megatron's looser rule.
  if (dotted && dots == 0 && (name_len < 48 || i >= n || p[i] != ' ')) {
    return 0;
  }
  if (strict && (name_len < 48 ? dots != 48 - name_len : dots != 0 || i >= n || p[i] != ' ')) {
    return 0;
  }
  if (i < n) {
    if (p[i] != ' ') {
      return 0;
    }
    i++;
  }
  int rc = ls_arg_add(s, TP_LOG_ARGS_MEGATRON, p, name_len, p + i, n - i);
  return rc ? rc : 1;
}

int ls_args_primus_line(TpLogScan *s, const LsLine *L) {
  const char *p = L->p;
  size_t n = L->n;
  size_t i = 0;
  while (i < n && (ls_is_ident(p[i]) || p[i] == '.')) {
    i++;
  }
  if (i == 0) {
    return 0;
  }
  size_t name_len = i;
  i = ls_skip_spaces(p, n, i);
  if (i >= n || p[i] != ':' || (i + 1 < n && p[i + 1] != ' ')) {
    return 0;
  }
  LsText val = ls_trim(p + i + 1, n - i - 1);
  // Strip the trailing " (<type>)".
  if (val.n > 2 && val.p[val.n - 1] == ')') {
    size_t o = val.n - 1;
    while (o > 0 && val.p[o - 1] != '(') {
      o--;
    }
    if (o > 0) {
      bool type_ok = o < val.n - 1;
      for (size_t k = o; k < val.n - 1; k++) {
        if (!ls_is_ident(val.p[k]) && val.p[k] != '.') {
          type_ok = false;
        }
      }
      if (type_ok && (o == 1 || val.p[o - 2] == ' ')) {
        val = ls_trim(val.p, o - 1);
      }
    }
  }
  int rc = ls_arg_add(s, TP_LOG_ARGS_PRIMUS, p, name_len, val.p, val.n);
  return rc ? rc : 1;
}

// --- torchtitan job config --------------------------------------------------------------------
// pytorch/torchtitan torchtitan/train.py, Trainer.__init__: with job.print_args it logs
// f"Running with args: {job_config.to_dict()}" (one line, on every rank);
// torchtitan/config/job_config.py, JobConfig.to_dict returns dataclasses.asdict(self), so the
// text is the Python repr of a dict of section dicts: {'job': {'config_file': None, ...,
// 'print_args': True}, 'optimizer': {'name': 'AdamW', 'lr': 0.0003, ...}, ...}. The same reader
// takes JSON (double quotes, true/false/null). Nested dicts flatten to dotted names
// ("optimizer.lr"); values are stored as Python str() prints them, as in `_print_args` dumps:
// strings decoded and unquoted, True/False/None (JSON's true/false/null too), numbers, lists,
// tuples and other reprs as printed. Decoded control characters keep their escape text.

#define TT_ANCHOR    "Running with args: "
#define TT_MAX_DEPTH 32

typedef struct TtArgs {
  TpLogScan *s;
  const char *p;  // the dict text
  size_t n, i;
  TpBuf name;       // dotted name of the value being read
  TpBuf val;        // decoded string value
  const char *err;  // first problem (NULL: none)
  size_t err_at;
  int rc;  // TP_ENOMEM from storage
  size_t nargs;
} TtArgs;

static bool tt_fail_at(TtArgs *t, size_t at, const char *why) {
  if (!t->err) {
    t->err = why;
    t->err_at = at;
  }
  return false;
}

static bool tt_nomem(TtArgs *t) {
  t->rc = TP_ENOMEM;
  return false;
}

static void tt_ws(TtArgs *t) {
  t->i = ls_skip_spaces(t->p, t->n, t->i);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// Reads `digits` hex digits at t->p[t->i]; false (t->i unchanged) when they are not there.
static bool tt_hex(TtArgs *t, int digits, uint32_t *out) {
  if (t->n - t->i < (size_t)digits) {
    return false;
  }
  uint32_t v = 0;
  for (int k = 0; k < digits; k++) {
    int d = hex_digit(t->p[t->i + (size_t)k]);
    if (d < 0) {
      return false;
    }
    v = v << 4 | (uint32_t)d;
  }
  t->i += (size_t)digits;
  *out = v;
  return true;
}

static int put_utf8(TpBuf *b, uint32_t cp) {
  char u[4];
  size_t k;
  if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    cp = 0xfffd;
  }
  if (cp < 0x80) {
    u[0] = (char)cp;
    k = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xc0 | cp >> 6);
    u[1] = (char)(0x80 | (cp & 0x3f));
    k = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xe0 | cp >> 12);
    u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    u[2] = (char)(0x80 | (cp & 0x3f));
    k = 3;
  } else {
    u[0] = (char)(0xf0 | cp >> 18);
    u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    u[3] = (char)(0x80 | (cp & 0x3f));
    k = 4;
  }
  return tp_buf_append(b, u, k);
}

// Reads the quoted string at t->p[t->i] (' or ") and appends it decoded to `out`. Escapes:
// Python's string literal escapes (\\ \' \" \n \t \r \a \b \f \v \0 \xHH \uHHHH \UHHHHHHHH;
// an unknown one stays as written, as Python keeps it) and JSON's (\/ and \uHHHH surrogate
// pairs).
static bool tt_string(TtArgs *t, TpBuf *out) {
  const char q = t->p[t->i];
  const size_t start = t->i;
  t->i++;
  while (t->i < t->n) {
    const char c = t->p[t->i];
    if (c == q) {
      t->i++;
      return true;
    }
    if (c != '\\') {
      size_t j = t->i;
      while (j < t->n && t->p[j] != q && t->p[j] != '\\') {
        j++;
      }
      if (tp_buf_append(out, t->p + t->i, j - t->i) != 0) {
        return tt_nomem(t);
      }
      t->i = j;
      continue;
    }
    const size_t esc = t->i;
    if (t->i + 1 >= t->n) {
      break;
    }
    const char e = t->p[t->i + 1];
    t->i += 2;
    uint32_t cp = 0;
    bool known = true;
    switch (e) {
      case 'n':
        cp = '\n';
        break;
      case 't':
        cp = '\t';
        break;
      case 'r':
        cp = '\r';
        break;
      case 'a':
        cp = 7;
        break;
      case 'b':
        cp = 8;
        break;
      case 'f':
        cp = 12;
        break;
      case 'v':
        cp = 11;
        break;
      case '0':
        cp = 0;
        break;
      case '\\':
      case '\'':
      case '"':
      case '/':
        cp = (unsigned char)e;
        break;
      case 'x':
      case 'u':
      case 'U':
        if (!tt_hex(t, e == 'x' ? 2 : e == 'u' ? 4 : 8, &cp)) {
          return tt_fail_at(t, esc, "bad escape in a string");
        }
        if (e == 'u' && cp >= 0xd800 && cp < 0xdc00 && t->n - t->i >= 6 && t->p[t->i] == '\\' &&
            t->p[t->i + 1] == 'u') {
          size_t back = t->i;
          uint32_t lo;
          t->i += 2;
          if (tt_hex(t, 4, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else {
            t->i = back;  // a lone high surrogate: U+FFFD, the next escape read on its own
          }
        }
        break;
      default:
        known = false;
        break;
    }
    int rc;
    if (!known || cp < 0x20 || cp == 0x7f) {
      rc = tp_buf_append(out, t->p + esc, t->i - esc);  // kept as written: one line, no NUL
    } else {
      rc = put_utf8(out, cp);
    }
    if (rc != 0) {
      return tt_nomem(t);
    }
  }
  t->i = t->n;
  return tt_fail_at(t, start, "unterminated string");
}

// Skips a quoted string without decoding it.
static bool tt_skip_string(TtArgs *t) {
  const char q = t->p[t->i];
  const size_t start = t->i;
  t->i++;
  while (t->i < t->n) {
    if (t->p[t->i] == '\\') {
      t->i += 2;
    } else if (t->p[t->i++] == q) {
      return true;
    }
  }
  t->i = t->n;
  return tt_fail_at(t, start, "unterminated string");
}

// Skips a value other than a dict or a string: a list, tuple or set, a bare token (number,
// True, None, ...) or an object's repr ("PosixPath('/x')", "<Enum.A: 'a'>"), up to the ',' or
// closing bracket that ends it. Brackets must balance and strings end.
static bool tt_skip_value(TtArgs *t, int depth) {
  char closers[TT_MAX_DEPTH];
  int sp = 0;
  const size_t start = t->i;
  while (t->i < t->n) {
    const char c = t->p[t->i];
    if (c == '\'' || c == '"') {
      if (!tt_skip_string(t)) {
        return false;
      }
      continue;
    }
    if (c == '[' || c == '(' || c == '{' || (c == '<' && t->i == start)) {
      if (depth + sp >= TT_MAX_DEPTH) {
        return tt_fail_at(t, t->i, "nested too deep");
      }
      closers[sp++] = c == '[' ? ']' : c == '(' ? ')' : c == '{' ? '}' : '>';
    } else if (c == '>' && sp > 0 && closers[sp - 1] == '>') {
      sp--;
    } else if (c == ']' || c == ')' || c == '}') {
      if (sp == 0) {
        break;
      }
      if (closers[sp - 1] != c) {
        return tt_fail_at(t, t->i, "mismatched bracket");
      }
      sp--;
    } else if (c == ',' && sp == 0) {
      break;
    } else if (c == ':' && sp == 0) {
      // A key inside a value: a separator is missing ("{'a': 1 'b': 2}"). Reprs with a colon
      // are bracketed: "<KernelPreference.AUTO: 'auto'>".
      return tt_fail_at(t, t->i, "',' or '}' was expected");
    }
    t->i++;
  }
  if (sp > 0) {
    return tt_fail_at(t, start, "unterminated list or tuple");
  }
  if (ls_trim(t->p + start, t->i - start).n == 0) {
    return tt_fail_at(t, start, "a value was expected");
  }
  return true;
}

static bool tt_emit(TtArgs *t, const char *v, size_t vn) {
  int rc = ls_arg_add(t->s, TP_LOG_ARGS_MEGATRON, t->name.data, t->name.len, v, vn);
  if (rc != 0) {
    t->rc = rc;
    return false;
  }
  t->nargs++;
  return true;
}

static bool tt_dict(TtArgs *t, int depth);

static bool tt_value(TtArgs *t, int depth) {
  tt_ws(t);
  if (t->i >= t->n) {
    return tt_fail_at(t, t->i, "a value was expected");
  }
  const char c = t->p[t->i];
  if (c == '{') {
    return tt_dict(t, depth + 1);
  }
  if (c == '\'' || c == '"') {
    t->val.len = 0;
    return tt_string(t, &t->val) && tt_emit(t, t->val.data, t->val.len);
  }
  const size_t start = t->i;
  if (!tt_skip_value(t, depth)) {
    return false;
  }
  LsText raw = ls_trim(t->p + start, t->i - start);
  if (LS_TEQ(raw, "true")) {
    raw = (LsText){"True", 4};
  } else if (LS_TEQ(raw, "false")) {
    raw = (LsText){"False", 5};
  } else if (LS_TEQ(raw, "null")) {
    raw = (LsText){"None", 4};
  }
  return tt_emit(t, raw.p, raw.n);
}

// Reads the dict at t->p[t->i] ('{'), emitting its leaves under t->name.
static bool tt_dict(TtArgs *t, int depth) {
  if (depth > TT_MAX_DEPTH) {
    return tt_fail_at(t, t->i, "nested too deep");
  }
  const size_t base = t->name.len;
  const size_t open = t->i;
  t->i++;
  tt_ws(t);
  if (t->i < t->n && t->p[t->i] == '}') {
    t->i++;
    return base == 0 || tt_emit(t, "{}", 2);
  }
  for (;;) {
    tt_ws(t);
    if (t->i >= t->n) {
      return tt_fail_at(t, open, "unterminated dict");
    }
    t->name.len = base;
    if (base > 0 && tp_buf_append(&t->name, ".", 1) != 0) {
      return tt_nomem(t);
    }
    const char c = t->p[t->i];
    if (c == '\'' || c == '"') {
      if (!tt_string(t, &t->name)) {
        return false;
      }
    } else {
      // A bare key (an int or a name): kept as printed.
      size_t j = t->i;
      while (j < t->n &&
             (ls_is_ident(t->p[j]) || t->p[j] == '.' || t->p[j] == '-' || t->p[j] == '+')) {
        j++;
      }
      if (j == t->i) {
        return tt_fail_at(t, t->i, "a key was expected");
      }
      if (tp_buf_append(&t->name, t->p + t->i, j - t->i) != 0) {
        return tt_nomem(t);
      }
      t->i = j;
    }
    tt_ws(t);
    if (t->i >= t->n) {
      return tt_fail_at(t, open, "unterminated dict");
    }
    if (t->p[t->i] != ':') {
      return tt_fail_at(t, t->i, "':' was expected after a key");
    }
    t->i++;
    if (!tt_value(t, depth)) {
      return false;
    }
    tt_ws(t);
    if (t->i >= t->n) {
      return tt_fail_at(t, open, "unterminated dict");
    }
    const char d = t->p[t->i++];
    if (d == '}') {
      break;
    }
    if (d != ',') {
      return tt_fail_at(t, t->i - 1, "',' or '}' was expected");
    }
    tt_ws(t);
    if (t->i < t->n && t->p[t->i] == '}') {
      t->i++;  // a trailing comma
      break;
    }
  }
  t->name.len = base;
  return true;
}

static uint64_t fnv1a(const char *p, size_t n) {
  uint64_t h = UINT64_C(14695981039346656037);
  for (size_t i = 0; i < n; i++) {
    h = (h ^ (unsigned char)p[i]) * UINT64_C(1099511628211);
  }
  return h;
}

int ls_args_job_config_line(TpLogScan *s, const LsLine *L) {
  const char *at = LS_FIND(L->p, L->n, TT_ANCHOR);
  if (!at) {
    return 0;
  }
  const char *p = at + sizeof(TT_ANCHOR) - 1;
  LsText body = ls_trim(p, (size_t)(L->p + L->n - p));
  if (body.n == 0 || body.p[0] != '{') {
    return 0;  // not a dict: some other program's "Running with args: Namespace(...)"
  }
  uint64_t h = fnv1a(body.p, body.n);
  if (s->tt_args_seen && s->tt_args_hash == h) {
    return 1;
  }
  s->tt_args_seen = true;
  s->tt_args_hash = h;
  TtArgs t = {.s = s, .p = body.p, .n = body.n};
  bool ok = tt_dict(&t, 1);
  tp_buf_free(&t.name);
  tp_buf_free(&t.val);
  if (t.rc != 0) {
    return t.rc;
  }
  // Without a mesh line, the config's degrees give the non-data-parallel degree that the step
  // times derived from tps divide by (parallelism.pipeline_parallel_degree, ...).
  if (s->tt_non_dp <= 0) {
    double pp = 1, tp = 1, cp = 1;
    bool any = arg_pos(s, "parallelism.pipeline_parallel_degree", &pp);
    any |= arg_pos(s, "parallelism.tensor_parallel_degree", &tp);
    any |= arg_pos(s, "parallelism.context_parallel_degree", &cp);
    if (any) {
      s->tt_non_dp = pp * tp * cp;
    }
  }
  if (ok) {
    return 1;
  }
  size_t col = (size_t)(body.p - L->full) + t.err_at + 1;
  char what[240];
  snprintf(
      what, sizeof what,
      "torchtitan job config (\"Running with args\") unreadable at line %llu, column %zu: %s%s "
      "(%zu values kept)",
      (unsigned long long)L->lineno, col, t.err,
      L->terminated ? "" : " (the log ends inside the line)", t.nargs);
  size_t from = t.err_at > 40 ? t.err_at - 40 : 0;
  size_t len = t.n - from < 120 ? t.n - from : 120;
  int rc = ls_diag(s, TP_LOG_D_BAD_ARGS, TP_LOG_SEV_WARNING, L->lineno, what, t.p + from, len);
  return rc ? rc : 1;
}

// --- Run facts from the dumps -----------------------------------------------------------------

// Run facts from dotted dumps: the NeMo driver's recipe paths (stdlib/tp/frameworks/nemo.lua,
// _overrides) and torchtitan's job config (torchtitan/config/job_config.py: Training,
// Parallelism, Optimizer). Only positive values count: torchtitan prints -1 for "derived"
// (training.global_batch_size, parallelism.data_parallel_shard_degree).
static const struct {
  const char *arg;
  TpLogMetaKey k;
} dotted_meta[] = {
    {"data.global_batch_size", TP_LOG_M_GLOBAL_BATCH_SIZE},
    {"data.seq_length", TP_LOG_M_SEQ_LEN},
    {"model.config.seq_length", TP_LOG_M_SEQ_LEN},
    {"data.micro_batch_size", TP_LOG_M_MICRO_BATCH_SIZE},
    {"trainer.max_steps", TP_LOG_M_TRAIN_ITERS},
    {"trainer.strategy.tensor_model_parallel_size", TP_LOG_M_TP},
    {"trainer.strategy.pipeline_model_parallel_size", TP_LOG_M_PP},
    {"trainer.strategy.context_parallel_size", TP_LOG_M_CP},
    {"optim.config.lr", TP_LOG_M_LR},
    {"training.global_batch_size", TP_LOG_M_GLOBAL_BATCH_SIZE},
    {"training.seq_len", TP_LOG_M_SEQ_LEN},
    {"training.local_batch_size", TP_LOG_M_LOCAL_BATCH_SIZE},
    {"training.steps", TP_LOG_M_TRAIN_ITERS},
    {"parallelism.tensor_parallel_degree", TP_LOG_M_TP},
    {"parallelism.pipeline_parallel_degree", TP_LOG_M_PP},
    {"parallelism.context_parallel_degree", TP_LOG_M_CP},
    {"parallelism.expert_parallel_degree", TP_LOG_M_EP},
    {"optimizer.lr", TP_LOG_M_LR},
    {"training.seed", TP_LOG_M_SEED},
};

static const char *dotted_precision(const TpLogScan *s) {
  LsText t;
  // NeMo: recipes/precision/mixed_precision.py preset names (nemo.lua PRECISION).
  if (arg_get(s, TP_LOG_ARGS_MEGATRON, "trainer.plugins", &t)) {
    return LS_FIND(t.p, t.n, "fp8")  ? "fp8"
           : LS_TEQ(t, "fp16_mixed") ? "fp16"
           : LS_TEQ(t, "bf16_mixed") ? "bf16"
                                     : NULL;
  }
  // torchtitan: model.converters ["float8"] / ["mx"], else training.mixed_precision_param.
  if (arg_get(s, TP_LOG_ARGS_MEGATRON, "model.converters", &t) &&
      (LS_FIND(t.p, t.n, "float8") || LS_FIND(t.p, t.n, "'mx'") || LS_FIND(t.p, t.n, "\"mx\""))) {
    return "fp8";
  }
  if (arg_get(s, TP_LOG_ARGS_MEGATRON, "training.mixed_precision_param", &t)) {
    return LS_TEQ(t, "bfloat16") ? "bf16" : LS_TEQ(t, "float32") ? "fp32" : NULL;
  }
  return NULL;
}

int ls_args_finish(TpLogScan *s) {
  static const struct {
    const char *arg;
    TpLogMetaKey k;
  } map[] = {
      {"global_batch_size", TP_LOG_M_GLOBAL_BATCH_SIZE},
      {"seq_length", TP_LOG_M_SEQ_LEN},
      {"world_size", TP_LOG_M_WORLD_SIZE},
      {"train_iters", TP_LOG_M_TRAIN_ITERS},
      {"micro_batch_size", TP_LOG_M_MICRO_BATCH_SIZE},
      {"tensor_model_parallel_size", TP_LOG_M_TP},
      {"pipeline_model_parallel_size", TP_LOG_M_PP},
      {"context_parallel_size", TP_LOG_M_CP},
      {"data_parallel_size", TP_LOG_M_DP},
      {"expert_model_parallel_size", TP_LOG_M_EP},
      {"lr", TP_LOG_M_LR},
      {"seed", TP_LOG_M_SEED},
  };
  double v;
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    if (arg_num(s, map[i].arg, &v)) {
      ls_meta_set(s, map[i].k, v, false);
    }
  }
  for (size_t i = 0; i < sizeof dotted_meta / sizeof dotted_meta[0]; i++) {
    if (dotted_meta[i].k == TP_LOG_M_SEED ? arg_num(s, dotted_meta[i].arg, &v)
                                          : arg_pos(s, dotted_meta[i].arg, &v)) {
      ls_meta_set(s, dotted_meta[i].k, v, false);
    }
  }
  double a, b;
  if (arg_pos(s, "recipe.num_nodes", &a) && arg_pos(s, "recipe.num_gpus_per_node", &b)) {
    ls_meta_set(s, TP_LOG_M_WORLD_SIZE, a * b, false);
  }
  if (arg_pos(s, "parallelism.data_parallel_shard_degree", &a)) {
    if (!arg_pos(s, "parallelism.data_parallel_replicate_degree", &b)) {
      b = 1;
    }
    ls_meta_set(s, TP_LOG_M_DP, a * b, false);
  }
  LsText t;
  bool have_fp8 = false;
  for (int w = 0; w < 2 && !have_fp8; w++) {
    if (arg_get(s, (TpLogArgDump)w, "fp8", &t) && t.n > 0 && !LS_TEQ(t, "None") &&
        !LS_TEQ(t, "False")) {
      have_fp8 = true;
    }
  }
  const char *prec =
      have_fp8              ? "fp8"
      : arg_true(s, "bf16") ? "bf16"
      : arg_true(s, "fp16") ? "fp16"
      : (arg_get(s, TP_LOG_ARGS_MEGATRON, "bf16", &t) || arg_get(s, TP_LOG_ARGS_PRIMUS, "bf16", &t))
          ? "fp32"
          : dotted_precision(s);
  if (prec) {
    return ls_meta_str(s, TP_LOG_MS_PRECISION, prec, strlen(prec), false);
  }
  return 0;
}
