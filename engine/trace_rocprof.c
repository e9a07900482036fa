// The reader of rocprofv3's CSV files (ROCprofiler-SDK's rocprofv3 tool, `--kernel-trace
// --output-format csv`): RFC 4180 CSV (fields quoted with '"', '""' inside a quoted field, CRLF or
// LF line ends), a header line naming the columns, then one row per record. The columns used:
//   kernel trace:      Kind, Agent_Id, Queue_Id, Stream_Id, Kernel_Name, Correlation_Id,
//                      Start_Timestamp, End_Timestamp (ns);
//   memory copy trace: Kind, Direction, Stream_Id, Source_Agent_Id, Destination_Agent_Id,
//                      Correlation_Id, Start_Timestamp, End_Timestamp;
//   API traces:        Domain, Function, Correlation_Id, Start_Timestamp, End_Timestamp.
// Agent ids are plain numbers in older files and "Agent N" in newer ones.
#include "trace_rocprof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonw.h"
#include "trace_store.h"

enum {
  MAX_FIELD = 1 << 20,  // bytes of one field (a kernel name)
  MAX_FIELDS = 256,     // fields of one line
  MAX_SNIFF = 1 << 16,  // bytes of the first line looked at to recognise the format
  MAX_AGENT = 64,       // bytes of an agent id kept to compare
};

// The columns the reader uses; COLS is their count.
typedef enum Col {
  C_KIND,
  C_DOMAIN,
  C_FUNCTION,
  C_AGENT,
  C_QUEUE,
  C_STREAM,
  C_NAME,
  C_CORR,
  C_START,
  C_END,
  C_DIRECTION,
  C_SRC_AGENT,
  C_DST_AGENT,
  COLS,
} Col;

static const char *const col_names[COLS] = {
    "Kind",
    "Domain",
    "Function",
    "Agent_Id",
    "Queue_Id",
    "Stream_Id",
    "Kernel_Name",
    "Correlation_Id",
    "Start_Timestamp",
    "End_Timestamp",
    "Direction",
    "Source_Agent_Id",
    "Destination_Agent_Id",
};

typedef enum FileKind {
  FILE_KERNEL,  // a kernel trace
  FILE_COPY,    // a memory copy trace
  FILE_API,     // an API trace (HIP, HSA, RCCL, markers)
} FileKind;

// The GPU agent whose ops are kept (the first kernel's); shared by the files of one process.
typedef struct Agent {
  bool chosen;
  char id[MAX_AGENT];
  size_t len;
  uint64_t left_out;  // ops on other agents
} Agent;

typedef struct Csv {
  TpTraceSrc *src;
  TpTrace *t;
  TpError *err;
  const char *label;
  const unsigned char *chunk, *p, *end;
  uint64_t base;  // bytes before the current chunk
  bool at_start;  // nothing read yet (a UTF-8 byte order mark may come)
  bool eof;
  uint64_t line;      // the physical line being read (1-based)
  uint64_t rec_line;  // the line the current record starts on
  TpBuf buf;          // the record's fields, back to back
  size_t at[MAX_FIELDS + 1];
  size_t nfields;
  bool newline;     // the record ended with a line end
  bool open_quote;  // the data ended inside a quoted field
  int col[COLS];    // field index of each column, or -1
  size_t ncols;     // fields of the header
  FileKind kind;
  Agent *agent;
} Csv;

bool tp_trace_rocprof_sniff(const unsigned char *p, size_t n) {
  if (n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) {
    p += 3;
    n -= 3;
  }
  size_t len = 0;
  while (len < n && len < MAX_SNIFF && p[len] != '\n') {
    len++;
  }
  const char *s = (const char *)p;
  bool first =
      (len >= 5 && memcmp(s, "Kind,", 5) == 0) || (len >= 7 && memcmp(s, "\"Kind\",", 7) == 0) ||
      (len >= 7 && memcmp(s, "Domain,", 7) == 0) || (len >= 9 && memcmp(s, "\"Domain\",", 9) == 0);
  if (!first) {
    return false;
  }
  bool start = false, end = false;
  for (size_t i = 0; i + 13 <= len; i++) {
    if (!start && i + 15 <= len && memcmp(s + i, "Start_Timestamp", 15) == 0) {
      start = true;
    }
    if (!end && memcmp(s + i, "End_Timestamp", 13) == 0) {
      end = true;
    }
  }
  return start && end;
}

static int fail(Csv *x, int code, const char *why) {
  return tp_error_set(x->err, code, "%s: line %llu: %s", x->label, (unsigned long long)x->rec_line,
                      why);
}

// Moves to the next chunk; false at the end of the data. A read error returns -1 through *rc.
static bool fill(Csv *x, int *rc) {
  if (x->eof) {
    return false;
  }
  x->base += (uint64_t)(x->end - x->chunk);
  const unsigned char *p = NULL;
  size_t n = 0;
  int r = tp_trace_src_next(x->src, &p, &n, x->err);
  if (r <= 0) {
    x->eof = true;
    x->chunk = x->p = x->end = NULL;
    if (r < 0) {
      *rc = r;
    }
    return false;
  }
  x->chunk = x->p = p;
  x->end = p + n;
  if (x->at_start) {
    x->at_start = false;
    if (n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) {
      x->p += 3;
    }
  }
  return true;
}

static int end_field(Csv *x) {
  if (x->nfields >= MAX_FIELDS) {
    return fail(x, TP_ELIMIT, "more than 256 fields");
  }
  x->at[++x->nfields] = x->buf.len;
  return 0;
}

typedef enum State {
  FIELD_START,
  UNQUOTED,
  QUOTED,
  AFTER_QUOTE,
} State;

// Reads one record (one line, or more when a quoted field holds line ends). Returns 1 with the
// fields in x->buf, 0 at the end of the data, or a negative code with the error set.
static int read_record(Csv *x) {
  x->buf.len = 0;
  x->nfields = 0;
  x->at[0] = 0;
  x->newline = false;
  x->open_quote = false;
  x->rec_line = x->line;
  State st = FIELD_START;
  bool any = false;
  int rc = 0;
  for (;;) {
    if (x->p == x->end && !fill(x, &rc)) {
      if (rc < 0) {
        return rc;
      }
      if (!any) {
        return 0;
      }
      x->open_quote = st == QUOTED;
      rc = end_field(x);
      return rc < 0 ? rc : 1;
    }
    // The bytes of a field up to the next byte that matters are copied at once.
    const unsigned char *s = x->p;
    if (st == UNQUOTED || st == QUOTED) {
      if (st == UNQUOTED) {
        while (x->p < x->end && *x->p != ',' && *x->p != '\n' && *x->p != '\r' && *x->p != '"') {
          x->p++;
        }
      } else {
        while (x->p < x->end && *x->p != '"' && *x->p != '\n') {
          x->p++;
        }
      }
      size_t n = (size_t)(x->p - s);
      if (n > 0) {
        if (x->buf.len - x->at[x->nfields] + n > MAX_FIELD) {
          return fail(x, TP_ELIMIT, "a field longer than 1 MiB");
        }
        if (tp_buf_append(&x->buf, s, n) != 0) {
          return fail(x, TP_ENOMEM, "out of memory");
        }
        continue;
      }
    }
    unsigned char c = *x->p++;
    any = true;
    switch (st) {
      case FIELD_START:
      case UNQUOTED:
        if (c == '"' && st == FIELD_START) {
          st = QUOTED;
        } else if (c == ',') {
          if ((rc = end_field(x)) < 0) {
            return rc;
          }
          st = FIELD_START;
        } else if (c == '\n') {
          x->line++;
          x->newline = true;
          rc = end_field(x);
          return rc < 0 ? rc : 1;
        } else if (c == '\r') {
          // the CR of a CRLF line end (a lone CR is dropped too)
        } else {
          if (tp_buf_append(&x->buf, &c, 1) != 0) {
            return fail(x, TP_ENOMEM, "out of memory");
          }
          st = UNQUOTED;
        }
        break;
      case QUOTED:
        if (c == '"') {
          st = AFTER_QUOTE;
        } else {  // a line end inside quotes is part of the field
          x->line++;
          if (tp_buf_append(&x->buf, &c, 1) != 0) {
            return fail(x, TP_ENOMEM, "out of memory");
          }
        }
        break;
      case AFTER_QUOTE:
        if (c == '"') {
          if (x->buf.len - x->at[x->nfields] + 1 > MAX_FIELD) {
            return fail(x, TP_ELIMIT, "a field longer than 1 MiB");
          }
          if (tp_buf_append(&x->buf, &c, 1) != 0) {
            return fail(x, TP_ENOMEM, "out of memory");
          }
          st = QUOTED;
        } else if (c == ',') {
          if ((rc = end_field(x)) < 0) {
            return rc;
          }
          st = FIELD_START;
        } else if (c == '\n') {
          x->line++;
          x->newline = true;
          rc = end_field(x);
          return rc < 0 ? rc : 1;
        } else if (c != '\r') {
          char why[96];
          snprintf(why, sizeof(why), "field %zu: a character after its closing quote",
                   x->nfields + 1);
          return fail(x, TP_EPARSE, why);
        }
        break;
    }
  }
}

static const char *field(const Csv *x, size_t i, size_t *len) {
  *len = x->at[i + 1] - x->at[i];
  return x->buf.data ? x->buf.data + x->at[i] : "";
}

static bool field_is(const Csv *x, size_t i, const char *s) {
  size_t len;
  const char *f = field(x, i, &len);
  return len == strlen(s) && memcmp(f, s, len) == 0;
}

// The column `c`'s field in the current record, or NULL (no such column).
static const char *col(const Csv *x, Col c, size_t *len) {
  if (x->col[c] < 0) {
    *len = 0;
    return NULL;
  }
  return field(x, (size_t)x->col[c], len);
}

// Reads a non-negative decimal integer that fits int64_t.
static bool parse_int(const char *s, size_t n, int64_t *out) {
  if (n == 0 || n > 19) {
    return false;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') {
      return false;
    }
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (v > (uint64_t)INT64_MAX) {
    return false;
  }
  *out = (int64_t)v;
  return true;
}

// A name is kept when it is UTF-8 without control characters.
static bool good_text(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x20 || p[i] == 0x7F) {
      return false;
    }
    size_t k = tp_utf8_len(p + i, n - i);
    if (k == 0) {
      return false;
    }
    i += k;
  }
  return true;
}

// Skips the current row as bad, naming the line and the field.
static void bad_row(Csv *x, const char *col_name, const char *why) {
  x->t->bad++;
  tp_trace_warn(x->t, "%s: line %llu: field %s: %s; the row was skipped", x->label,
                (unsigned long long)x->rec_line, col_name, why);
}

// Reads the header: finds the columns and what kind of file this is.
static int read_header(Csv *x) {
  int rc = read_record(x);
  if (rc < 0) {
    return rc;
  }
  if (rc == 0) {
    return tp_error_set(x->err, TP_EPARSE, "%s: empty file", x->label);
  }
  for (int c = 0; c < COLS; c++) {
    x->col[c] = -1;
  }
  for (size_t i = 0; i < x->nfields; i++) {
    for (int c = 0; c < COLS; c++) {
      if (field_is(x, i, col_names[c])) {
        if (x->col[c] >= 0) {
          char why[96];
          snprintf(why, sizeof(why), "the header names column %s twice", col_names[c]);
          return fail(x, TP_EPARSE, why);
        }
        x->col[c] = (int)i;
      }
    }
  }
  x->ncols = x->nfields;
  if (!x->newline) {
    tp_trace_warn(x->t, "%s: line 1: the header has no line end (the file may be cut short)",
                  x->label);
  }
  if (x->col[C_START] < 0 || x->col[C_END] < 0) {
    return fail(x, TP_EPARSE, "not a rocprofv3 trace: no Start_Timestamp and End_Timestamp");
  }
  if (x->col[C_KIND] >= 0 && x->col[C_NAME] >= 0) {
    x->kind = FILE_KERNEL;
  } else if (x->col[C_KIND] >= 0 && x->col[C_DIRECTION] >= 0) {
    x->kind = FILE_COPY;
  } else if (x->col[C_DOMAIN] >= 0 && x->col[C_CORR] >= 0) {
    x->kind = FILE_API;
  } else {
    return fail(x, TP_EPARSE,
                "not a rocprofv3 kernel, memory copy or API trace (no Kernel_Name, Direction or "
                "Domain and Correlation_Id column)");
  }
  return 0;
}

// An agent id without the "Agent " newer files put before the number.
static const char *agent_id(const char *s, size_t *n) {
  if (*n > 6 && memcmp(s, "Agent ", 6) == 0) {
    *n -= 6;
    return s + 6;
  }
  return s;
}

// Whether an op on agent s[0, n) is kept; the first kernel's agent is chosen.
static bool keep_agent(Agent *a, const char *s, size_t n, bool choose) {
  if (!s) {
    return true;
  }
  s = agent_id(s, &n);
  if (!a->chosen) {
    if (!choose || n >= MAX_AGENT) {
      return true;
    }
    memcpy(a->id, s, n);
    a->len = n;
    a->chosen = true;
    return true;
  }
  return n == a->len && memcmp(s, a->id, n) == 0;
}

// The name of a copy, as the PyTorch profiler names them on ROCm ("Memcpy HtoD (Host ->
// Device)"), from rocprofv3's direction.
static const char *copy_name(const char *dir, size_t n, char *buf, size_t cap) {
  static const struct {
    const char *dir, *name;
  } names[] = {
      {"MEMORY_COPY_HOST_TO_DEVICE", "Memcpy HtoD (Host -> Device)"},
      {"MEMORY_COPY_DEVICE_TO_HOST", "Memcpy DtoH (Device -> Host)"},
      {"MEMORY_COPY_DEVICE_TO_DEVICE", "Memcpy DtoD (Device -> Device)"},
      {"MEMORY_COPY_HOST_TO_HOST", "Memcpy HtoH (Host -> Host)"},
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (n == strlen(names[i].dir) && memcmp(dir, names[i].dir, n) == 0) {
      return names[i].name;
    }
  }
  snprintf(buf, cap, "Memcpy %.*s", (int)(n > 64 ? 64 : n), dir);
  return buf;
}

// Acts on one data row.
static int use_row(Csv *x) {
  TpTrace *t = x->t;
  size_t kn = 0;
  const char *kind = col(x, x->kind == FILE_API ? C_DOMAIN : C_KIND, &kn);
  bool kind_ok = kn <= 64 && good_text(kind, kn);
  if (tp_trace_count_cat(t, kind_ok ? kind : "?", kind_ok ? kn : 1) != 0) {
    return fail(x, TP_ENOMEM, "out of memory");
  }
  bool is_kernel = x->kind == FILE_KERNEL;
  if (x->kind != FILE_API &&
      !(kn == (is_kernel ? 15u : 11u) &&
        memcmp(kind, is_kernel ? "KERNEL_DISPATCH" : "MEMORY_COPY", kn) == 0)) {
    t->ignored++;
    return 0;
  }
  size_t n;
  const char *s;
  int64_t start, end;
  s = col(x, C_START, &n);
  if (!parse_int(s, n, &start)) {
    bad_row(x, "Start_Timestamp", "not a timestamp in ns");
    return 0;
  }
  s = col(x, C_END, &n);
  if (!parse_int(s, n, &end)) {
    bad_row(x, "End_Timestamp", "not a timestamp in ns");
    return 0;
  }
  if (end < start) {
    bad_row(x, "End_Timestamp", "before Start_Timestamp");
    return 0;
  }
  if (end > TP_TRACE_TS_MAX || end - start > TP_TRACE_DUR_MAX) {
    bad_row(x, "End_Timestamp", "out of range");
    return 0;
  }
  uint64_t corr = UINT64_MAX;
  s = col(x, C_CORR, &n);
  if (s && n > 0) {
    int64_t v;
    if (!parse_int(s, n, &v)) {
      bad_row(x, "Correlation_Id", "not a number");
      return 0;
    }
    corr = (uint64_t)v;
  }
  if (x->kind == FILE_API) {
    if (corr == UINT64_MAX) {
      bad_row(x, "Correlation_Id", "empty");
      return 0;
    }
    if (tp_trace_add_launch(t, corr, start, end - start, UINT64_MAX, TP_TRACE_NO_THREAD) != 0) {
      return fail(x, TP_ENOMEM, "out of memory");
    }
    return 0;
  }
  TpTraceOpIn op = {.ts = start, .dur = end - start, .corr = corr};
  char buf[96];
  if (is_kernel) {
    op.kind = TP_TRACE_KERNEL;
    op.name = col(x, C_NAME, &op.name_len);
    if (!good_text(op.name, op.name_len)) {
      bad_row(x, "Kernel_Name", "not UTF-8 text without control characters");
      return 0;
    }
    s = col(x, C_AGENT, &n);
    if (!keep_agent(x->agent, s, n, true)) {
      x->agent->left_out++;
      t->ignored++;
      return 0;
    }
  } else {
    op.kind = TP_TRACE_MEMCPY;
    const char *dir = col(x, C_DIRECTION, &n);
    op.name = copy_name(dir, n, buf, sizeof(buf));
    op.name_len = strlen(op.name);
    if (!good_text(op.name, op.name_len)) {
      bad_row(x, "Direction", "not UTF-8 text without control characters");
      return 0;
    }
    size_t sn, dn;
    const char *src = col(x, C_SRC_AGENT, &sn);
    const char *dst = col(x, C_DST_AGENT, &dn);
    if (x->agent->chosen && src && dst && !keep_agent(x->agent, src, sn, false) &&
        !keep_agent(x->agent, dst, dn, false)) {
      x->agent->left_out++;
      t->ignored++;
      return 0;
    }
  }
  s = col(x, C_STREAM, &n);
  if (!s || n == 0) {
    s = col(x, C_QUEUE, &n);
  }
  int64_t stream = 0;
  if (s && !parse_int(s, n, &stream)) {
    stream = 0;
  }
  op.stream = stream;
  if (tp_trace_add_op(t, &op) != 0) {
    return fail(x, TP_ENOMEM, "out of memory");
  }
  return 0;
}

static int parse(TpTraceSrc *src, TpTrace *t, Agent *agent, TpError *err) {
  Csv x = {.src = src,
           .t = t,
           .err = err,
           .label = tp_trace_src_label(src),
           .at_start = true,
           .line = 1,
           .agent = agent};
  int rc = read_header(&x);
  uint64_t rows = 0;
  while (rc == 0) {
    rc = read_record(&x);
    if (rc <= 0) {
      break;
    }
    if (x.nfields == 1 && x.at[1] == 0 && !x.open_quote) {
      rc = 0;  // a blank line
      continue;
    }
    if (x.open_quote || x.nfields != x.ncols) {
      if (x.open_quote || !x.newline) {  // the last line, cut short: not a row
        t->truncated = true;
        tp_trace_warn(t, "%s: truncated at line %llu: kept the %llu rows read before it", x.label,
                      (unsigned long long)x.rec_line, (unsigned long long)rows);
        rc = 0;
        break;
      }
      t->events++;
      t->bad++;
      tp_trace_warn(t, "%s: line %llu: %zu fields where the header has %zu; the row was skipped",
                    x.label, (unsigned long long)x.rec_line, x.nfields, x.ncols);
      rc = 0;
      continue;
    }
    t->events++;
    if (!x.newline) {
      tp_trace_warn(t, "%s: line %llu: the last line has no line end (the file may be cut short)",
                    x.label, (unsigned long long)x.rec_line);
    }
    rc = use_row(&x);
    rows++;
  }
  t->bytes += x.base + (uint64_t)(x.p - x.chunk);
  tp_buf_free(&x.buf);
  return rc;
}

// Notes the reader and the files read as the top-level member "profiler" (JSON text).
static int add_profiler_meta(TpTrace *t, const char *const *files, size_t nfiles,
                             const Agent *agent) {
  TpBuf b = {0};
  int rc = tp_buf_printf(&b, "{\"tool\": \"rocprofv3\", \"format\": \"csv\", \"files\": [");
  for (size_t i = 0; i < nfiles && rc == 0; i++) {
    size_t bad = 0;
    const char *base = strrchr(files[i], '/');
    base = base ? base + 1 : files[i];
    if (i > 0) {
      rc = tp_buf_append(&b, ", ", 2);
    }
    if (rc == 0 && tp_jsonw_string(&b, base, strlen(base), &bad) == TP_ENOMEM) {
      rc = TP_ENOMEM;
    }
  }
  if (rc == 0) {
    rc = tp_buf_printf(&b, "]");
  }
  if (rc == 0 && agent->chosen) {
    size_t bad = 0;
    rc = tp_buf_printf(&b, ", \"agent\": ");
    if (rc == 0 && tp_jsonw_string(&b, agent->id, agent->len, &bad) == TP_ENOMEM) {
      rc = TP_ENOMEM;
    }
  }
  if (rc == 0) {
    rc = tp_buf_printf(&b, "}");
  }
  if (rc == 0) {
    rc = tp_trace_add_meta(t, "profiler", 8, b.data, b.len);
  }
  tp_buf_free(&b);
  return rc;
}

static void warn_left_out(TpTrace *t, const Agent *agent) {
  if (agent->left_out > 0) {
    tp_trace_warn(t,
                  "%s: %llu ops on GPU agents other than agent %.*s were left out (one trace "
                  "holds one GPU)",
                  t->path, (unsigned long long)agent->left_out, (int)agent->len, agent->id);
  }
}

int tp_trace_parse_rocprof_csv(TpTraceSrc *src, TpTrace *t, TpError *err) {
  Agent agent = {0};
  int rc = parse(src, t, &agent, err);
  if (rc == 0) {
    const char *files[1] = {tp_trace_src_label(src)};
    warn_left_out(t, &agent);
    if (add_profiler_meta(t, files, 1, &agent) != 0) {
      rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", t->path);
    }
  }
  return rc;
}

// Whether `path` ends with `suffix`; sets *prefix_len to the length before it.
static bool ends_with(const char *path, const char *suffix, size_t *prefix_len) {
  size_t n = strlen(path), m = strlen(suffix);
  if (n < m || strcmp(path + n - m, suffix) != 0) {
    return false;
  }
  *prefix_len = n - m;
  return true;
}

int tp_trace_read_rocprof(TpTraceSrc *src, const char *path, TpTrace *t, TpError *err) {
  Agent agent = {0};
  int rc = parse(src, t, &agent, err);
  if (rc != 0) {
    return rc;
  }
  static const char *const siblings[] = {"memory_copy_trace.csv", "hip_api_trace.csv"};
  char *names[3] = {NULL, NULL, NULL};
  const char *files[3] = {path, NULL, NULL};
  size_t nfiles = 1, prefix = 0;
  if (ends_with(path, "kernel_trace.csv", &prefix) ||
      ends_with(path, "kernel_trace.csv.gz", &prefix)) {
    for (size_t i = 0; i < 2 && rc == 0; i++) {
      // the sibling with the same prefix, plain or gzip
      for (int z = 0; z < 2; z++) {
        size_t len = prefix + strlen(siblings[i]) + (z ? 3 : 0) + 1;
        char *name = malloc(len);
        if (!name) {
          rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
          break;
        }
        snprintf(name, len, "%.*s%s%s", (int)prefix, path, siblings[i], z ? ".gz" : "");
        if (access(name, F_OK) != 0) {
          free(name);
          continue;
        }
        TpTraceSrc *s = NULL;
        rc = tp_trace_src_file(name, &s, err);
        if (rc == 0) {
          rc = parse(s, t, &agent, err);
          if (rc == 0 && tp_trace_src_truncated(s)) {
            t->truncated = true;
            tp_trace_warn(t, "%s: the gzip stream ends early", name);
          }
          tp_trace_src_free(s);
        }
        names[nfiles] = name;
        files[nfiles++] = name;
        break;
      }
    }
  }
  warn_left_out(t, &agent);
  if (rc == 0 && add_profiler_meta(t, files, nfiles, &agent) != 0) {
    rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
  }
  for (size_t i = 0; i < 3; i++) {
    free(names[i]);
  }
  return rc;
}
