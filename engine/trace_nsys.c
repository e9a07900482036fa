// The reader of Nsight Systems' SQLite export (docs.nvidia.com/nsight-systems, "SQLite Schema
// Reference"), with libsqlite3. Tables read, each when present:
//   CUPTI_ACTIVITY_KIND_KERNEL   start, end (ns), deviceId, globalPid, streamId, correlationId,
//                                demangledName (or shortName) -> StringIds.value;
//   CUPTI_ACTIVITY_KIND_MEMCPY   the same times and ids, copyKind, srcKind, dstKind;
//   CUPTI_ACTIVITY_KIND_MEMSET   the same times and ids, memKind;
//   CUPTI_ACTIVITY_KIND_RUNTIME  start, end, correlationId, globalTid: the launches;
//   NVTX_EVENTS                  start, end, globalTid, text or textId -> StringIds.value: ranges
//                                named ProfilerStep#N are the steps;
//   TARGET_INFO_GPU, META_DATA_EXPORT (EXPORT_META_DATA before 2023): the GPU and the tool's
//   version.
// A globalTid is its process's globalPid with the thread id in the low 24 bits. The database is
// opened read-only and immutable, with views, triggers and functions in its schema disabled, so a
// hostile file can only be data.
#include "trace_nsys.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jsonw.h"
#include "trace_store.h"

enum {
  MAX_TEXT = 1 << 20,     // bytes of a kept name
  MAX_LENGTH = 16 << 20,  // the longest string or blob SQLite will hand over
};

#define MAX_MEMORY ((sqlite3_int64)1 << 30)  // bytes of a database read into memory

typedef struct Db {
  sqlite3 *db;
  TpTrace *t;
  TpError *err;
  const char *label;
  bool has_dev, has_pid;
  int64_t dev, pid;  // the GPU whose ops are kept, and its process (globalPid)
  uint64_t left_out;
  bool string_ids;    // the StringIds table is there
  uint64_t declared;  // the database's size as its header gives it (0: unknown)
} Db;

bool tp_trace_nsys_sniff(const unsigned char *p, size_t n) {
  return n >= 16 && memcmp(p, "SQLite format 3", 16) == 0;  // the 16th byte is the NUL
}

static int db_fail(Db *d, const char *what) {
  int code = sqlite3_errcode(d->db) == SQLITE_NOMEM ? TP_ENOMEM : TP_EPARSE;
  if (d->declared > d->t->bytes) {
    return tp_error_set(d->err, code,
                        "%s: %s: %s (the file is cut short: %llu of the %llu bytes "
                        "its header gives)",
                        d->label, what, sqlite3_errmsg(d->db), (unsigned long long)d->t->bytes,
                        (unsigned long long)d->declared);
  }
  return tp_error_set(d->err, code, "%s: %s: %s", d->label, what, sqlite3_errmsg(d->db));
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

// The size the database header (its first 100 bytes) gives: page size x page count, when the
// count is valid (its "version-valid-for" number equals the change counter); 0 when unknown.
static uint64_t declared_size(const unsigned char *p, size_t n) {
  if (n < 100 || be32(p + 24) != be32(p + 92)) {
    return 0;
  }
  uint32_t page = (uint32_t)p[16] << 8 | p[17];
  if (page == 1) {
    page = 65536;
  }
  return (uint64_t)page * be32(p + 28);
}

static int prepare(Db *d, const char *sql, sqlite3_stmt **st, const char *what) {
  if (sqlite3_prepare_v2(d->db, sql, -1, st, NULL) != SQLITE_OK) {
    sqlite3_finalize(*st);
    *st = NULL;
    return db_fail(d, what);
  }
  return 0;
}

// 1 when the query with text arguments a and b has a row, 0 when not, or a negative code.
static int exists(Db *d, const char *sql, const char *a, const char *b) {
  sqlite3_stmt *st = NULL;
  int rc = prepare(d, sql, &st, "cannot read the SQLite database");
  if (rc != 0) {
    return rc;
  }
  sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
  if (b) {
    sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
  }
  int r = sqlite3_step(st);
  rc = r == SQLITE_ROW ? 1 : r == SQLITE_DONE ? 0 : db_fail(d, "cannot read the SQLite database");
  sqlite3_finalize(st);
  return rc;
}

static int has_table(Db *d, const char *table) {
  return exists(d, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", table, NULL);
}

static int has_column(Db *d, const char *table, const char *column) {
  return exists(d, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", table, column);
}

static bool int_at(sqlite3_stmt *st, int i, int64_t *v) {
  if (sqlite3_column_type(st, i) != SQLITE_INTEGER) {
    return false;
  }
  *v = sqlite3_column_int64(st, i);
  return true;
}

// A name is kept when it is UTF-8 without control characters, at most 1 MiB.
static bool good_text(const unsigned char *p, size_t n) {
  if (n > MAX_TEXT) {
    return false;
  }
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

static void bad_row(Db *d, const char *table, uint64_t row, const char *field, const char *why) {
  d->t->bad++;
  tp_trace_warn(d->t, "%s: %s row %llu: field %s: %s; the row was skipped", d->label, table,
                (unsigned long long)row, field, why);
}

// Whether [start, end) is a time span the store takes; a bad row otherwise.
static bool times_ok(Db *d, const char *table, uint64_t row, int64_t start, int64_t end) {
  if (end < start) {
    bad_row(d, table, row, "end", "before start");
    return false;
  }
  if (start < TP_TRACE_TS_MIN || end > TP_TRACE_TS_MAX || end - start > TP_TRACE_DUR_MAX) {
    bad_row(d, table, row, start < TP_TRACE_TS_MIN ? "start" : "end", "out of range");
    return false;
  }
  return true;
}

// After a table's rows: SQLITE_DONE is the end; damage stops the table with a warning.
static int table_end(Db *d, const char *table, int r, uint64_t row) {
  if (r == SQLITE_DONE) {
    return 0;
  }
  if (r == SQLITE_NOMEM) {
    return tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
  }
  d->t->truncated = true;
  tp_trace_warn(d->t, "%s: %s: reading stopped at row %llu: %s (the file is damaged or cut short)",
                d->label, table, (unsigned long long)row + 1, sqlite3_errmsg(d->db));
  return 0;
}

// Picks the GPU whose ops are kept: the device and process with the most rows in `table`.
static int choose_device(Db *d, const char *table) {
  if (d->has_dev) {
    return 0;
  }
  int rc = has_table(d, table);
  if (rc <= 0) {
    return rc;
  }
  int pid = has_column(d, table, "globalPid");
  if (pid < 0) {
    return pid;
  }
  char sql[256];
  snprintf(sql, sizeof(sql),
           "SELECT deviceId, %s, COUNT(*) AS n FROM %s GROUP BY 1, 2 ORDER BY n DESC, 1, 2 "
           "LIMIT 1",
           pid ? "globalPid" : "NULL", table);
  sqlite3_stmt *st = NULL;
  if ((rc = prepare(d, sql, &st, table)) != 0) {
    return rc;
  }
  int r = sqlite3_step(st);
  if (r == SQLITE_ROW) {
    d->has_dev = int_at(st, 0, &d->dev);
    d->has_pid = d->has_dev && int_at(st, 1, &d->pid);
    r = SQLITE_DONE;
  }
  rc = r == SQLITE_DONE ? 0 : db_fail(d, table);
  sqlite3_finalize(st);
  return rc;
}

// The names Nsight Systems gives copy and memory kinds (its ENUM_CUDA_MEMCPY_OPER and
// ENUM_CUDA_MEM_KIND tables), in the PyTorch profiler's form "Memcpy HtoD (Pinned -> Device)".
static const char *const copy_kinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD",
                                         "DtoA",    "DtoD", "HtoH", "PtoP", "HtoD", "DtoH", "DtoD"};
static const char *const mem_kinds[] = {"Pageable", "Pinned",        "Device",         "Array",
                                        "Managed",  "Device Static", "Managed Static", "Unknown"};

static const char *kind_name(sqlite3_stmt *st, int i, const char *const *names, size_t n) {
  int64_t v;
  return int_at(st, i, &v) && v >= 0 && (uint64_t)v < n ? names[v] : "Unknown";
}

// Reads the GPU ops of one table (kind: which one).
static int read_ops(Db *d, TpTraceKind kind) {
  static const char *const tables[TP_TRACE_KINDS] = {
      "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"};
  static const char *const cats[TP_TRACE_KINDS] = {"kernel", "gpu_memcpy", "gpu_memset"};
  const char *table = tables[kind];
  int rc = has_table(d, table);
  if (rc <= 0) {
    return rc;
  }
  int pid = has_column(d, table, "globalPid");
  if (pid < 0) {
    return pid;
  }
  char sql[512];
  switch (kind) {
    case TP_TRACE_KERNEL: {
      int demangled = has_column(d, table, "demangledName");
      if (demangled < 0) {
        return demangled;
      }
      if (!d->string_ids) {
        return tp_error_set(d->err, TP_EPARSE, "%s: no StringIds table for the kernel names",
                            d->label);
      }
      snprintf(sql, sizeof(sql),
               "SELECT k.start, k.\"end\", k.deviceId, %s, k.streamId, k.correlationId, s.value "
               "FROM %s AS k LEFT JOIN StringIds AS s ON s.id = k.%s",
               pid ? "k.globalPid" : "NULL", table, demangled ? "demangledName" : "shortName");
      break;
    }
    case TP_TRACE_MEMCPY: {
      int src = has_column(d, table, "srcKind"), dst = has_column(d, table, "dstKind");
      if (src < 0 || dst < 0) {
        return src < 0 ? src : dst;
      }
      snprintf(sql, sizeof(sql),
               "SELECT start, \"end\", deviceId, %s, streamId, correlationId, copyKind, %s, %s "
               "FROM %s",
               pid ? "globalPid" : "NULL", src ? "srcKind" : "NULL", dst ? "dstKind" : "NULL",
               table);
      break;
    }
    case TP_TRACE_MEMSET: {
      int mem = has_column(d, table, "memKind");
      if (mem < 0) {
        return mem;
      }
      snprintf(sql, sizeof(sql),
               "SELECT start, \"end\", deviceId, %s, streamId, correlationId, %s FROM %s",
               pid ? "globalPid" : "NULL", mem ? "memKind" : "NULL", table);
      break;
    }
    case TP_TRACE_KINDS:
      return 0;
  }
  sqlite3_stmt *st = NULL;
  if ((rc = prepare(d, sql, &st, table)) != 0) {
    return rc;
  }
  TpTrace *t = d->t;
  uint64_t row = 0;
  int r;
  while ((r = sqlite3_step(st)) == SQLITE_ROW) {
    row++;
    t->events++;
    if (tp_trace_count_cat(t, cats[kind], strlen(cats[kind])) != 0) {
      rc = tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
      break;
    }
    int64_t start, end, dev, v;
    if (!int_at(st, 0, &start) || !int_at(st, 1, &end)) {
      bad_row(d, table, row, int_at(st, 0, &v) ? "end" : "start", "not an integer");
      continue;
    }
    if (!times_ok(d, table, row, start, end)) {
      continue;
    }
    if (!int_at(st, 2, &dev)) {
      bad_row(d, table, row, "deviceId", "not an integer");
      continue;
    }
    if (d->has_dev && (dev != d->dev || (d->has_pid && int_at(st, 3, &v) && v != d->pid))) {
      d->left_out++;
      t->ignored++;
      continue;
    }
    TpTraceOpIn op = {.ts = start, .dur = end - start, .kind = kind, .corr = UINT64_MAX};
    if (int_at(st, 5, &v) && v >= 0) {
      op.corr = (uint64_t)v;
    }
    op.stream = int_at(st, 4, &v) ? v : 0;
    char name[64];
    if (kind == TP_TRACE_KERNEL) {
      const unsigned char *s = sqlite3_column_text(st, 6);
      size_t n = (size_t)sqlite3_column_bytes(st, 6);
      if (!s) {
        if (sqlite3_errcode(d->db) == SQLITE_NOMEM) {
          rc = tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
          break;
        }
        bad_row(d, table, row, "demangledName", "no such string in StringIds");
        continue;
      }
      if (!good_text(s, n)) {
        bad_row(d, table, row, "demangledName", "not UTF-8 text of at most 1 MiB");
        continue;
      }
      op.name = (const char *)s;
      op.name_len = n;
    } else if (kind == TP_TRACE_MEMCPY) {
      snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)",
               kind_name(st, 6, copy_kinds, sizeof(copy_kinds) / sizeof(copy_kinds[0])),
               kind_name(st, 7, mem_kinds, sizeof(mem_kinds) / sizeof(mem_kinds[0])),
               kind_name(st, 8, mem_kinds, sizeof(mem_kinds) / sizeof(mem_kinds[0])));
      op.name = name;
      op.name_len = strlen(name);
    } else {
      snprintf(name, sizeof(name), "Memset (%s)",
               kind_name(st, 6, mem_kinds, sizeof(mem_kinds) / sizeof(mem_kinds[0])));
      op.name = name;
      op.name_len = strlen(name);
    }
    if (tp_trace_add_op(t, &op) != 0) {
      rc = tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
      break;
    }
  }
  if (rc == 0) {
    rc = table_end(d, table, r, row);
  }
  sqlite3_finalize(st);
  return rc;
}

// Whether globalTid `tid` belongs to the kept process.
static bool same_process(const Db *d, sqlite3_stmt *st, int i) {
  int64_t tid;
  return !d->has_pid || !int_at(st, i, &tid) || (tid & ~(int64_t)0xFFFFFF) == d->pid;
}

// Reads the CUDA runtime calls: those with a correlation id are the launches.
static int read_launches(Db *d) {
  const char *table = "CUPTI_ACTIVITY_KIND_RUNTIME";
  int rc = has_table(d, table);
  if (rc <= 0) {
    return rc;
  }
  int tid = has_column(d, table, "globalTid");
  if (tid < 0) {
    return tid;
  }
  char sql[256];
  snprintf(sql, sizeof(sql), "SELECT start, \"end\", correlationId, %s FROM %s",
           tid ? "globalTid" : "NULL", table);
  sqlite3_stmt *st = NULL;
  if ((rc = prepare(d, sql, &st, table)) != 0) {
    return rc;
  }
  TpTrace *t = d->t;
  uint64_t row = 0;
  int r;
  while ((r = sqlite3_step(st)) == SQLITE_ROW) {
    row++;
    t->events++;
    if (tp_trace_count_cat(t, "cuda_runtime", 12) != 0) {
      rc = tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
      break;
    }
    int64_t start, end, corr;
    if (!int_at(st, 0, &start) || !int_at(st, 1, &end)) {
      bad_row(d, table, row, int_at(st, 0, &corr) ? "end" : "start", "not an integer");
      continue;
    }
    if (!times_ok(d, table, row, start, end)) {
      continue;
    }
    if (!int_at(st, 2, &corr) || corr < 0 || !same_process(d, st, 3)) {
      t->ignored++;
      continue;
    }
    if (tp_trace_add_launch(t, (uint64_t)corr, start, end - start, UINT64_MAX,
                            TP_TRACE_NO_THREAD) != 0) {
      rc = tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
      break;
    }
  }
  if (rc == 0) {
    rc = table_end(d, table, r, row);
  }
  sqlite3_finalize(st);
  return rc;
}

// Reads the NVTX ranges: ProfilerStep#N are the steps, enumerate(DataLoader)... the dataloader.
static int read_ranges(Db *d) {
  const char *table = "NVTX_EVENTS";
  int rc = has_table(d, table);
  if (rc <= 0) {
    return rc;
  }
  int tid = has_column(d, table, "globalTid");
  int text_id = tid < 0 ? tid : has_column(d, table, "textId");
  if (text_id < 0) {
    return text_id;
  }
  text_id = text_id && d->string_ids;
  char sql[320];
  snprintf(sql, sizeof(sql), "SELECT n.start, n.\"end\", %s, %s FROM %s AS n%s",
           tid ? "n.globalTid" : "NULL", text_id ? "COALESCE(n.text, s.value)" : "n.text", table,
           text_id ? " LEFT JOIN StringIds AS s ON s.id = n.textId" : "");
  sqlite3_stmt *st = NULL;
  if ((rc = prepare(d, sql, &st, table)) != 0) {
    return rc;
  }
  TpTrace *t = d->t;
  uint64_t row = 0;
  int r;
  while ((r = sqlite3_step(st)) == SQLITE_ROW) {
    row++;
    t->events++;
    if (tp_trace_count_cat(t, "nvtx", 4) != 0) {
      rc = tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
      break;
    }
    const unsigned char *s = sqlite3_column_text(st, 3);
    size_t n = (size_t)sqlite3_column_bytes(st, 3);
    int64_t number = 0;
    TpTraceRange kind = s ? tp_trace_range_of((const char *)s, n, &number) : TP_TRACE_RANGE_OTHER;
    if (kind == TP_TRACE_RANGE_OTHER || !same_process(d, st, 2)) {
      t->ignored++;
      continue;
    }
    int64_t start, end;
    if (!int_at(st, 0, &start) || !int_at(st, 1, &end)) {
      bad_row(d, table, row, int_at(st, 0, &end) ? "end" : "start", "not an integer");
      continue;
    }
    if (!times_ok(d, table, row, start, end)) {
      continue;
    }
    if (kind == TP_TRACE_RANGE_LOADER) {
      t->ignored++;
      rc = tp_trace_add_loader(t, start, end - start);
    } else if (kind == TP_TRACE_RANGE_BAD_STEP) {
      bad_row(d, table, row, "text", "a ProfilerStep# range without a step number");
      continue;
    } else {
      rc = tp_trace_add_step(t, number, start, end - start);
    }
    if (rc != 0) {
      rc = tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
      break;
    }
  }
  if (rc == 0) {
    rc = table_end(d, table, r, row);
  }
  sqlite3_finalize(st);
  return rc;
}

// Appends "key": value-of-column-i (an integer) to the JSON in `b`; nothing when it is not one.
static int json_int(TpBuf *b, const char *key, sqlite3_stmt *st, int i) {
  int64_t v;
  if (!int_at(st, i, &v)) {
    return 0;
  }
  return tp_buf_printf(b, ", \"%s\": %lld", key, (long long)v);
}

// Appends "key": text (JSON-escaped) when the text is UTF-8.
static int json_text(TpBuf *b, const char *key, const unsigned char *s, size_t n) {
  if (!s || !good_text(s, n) || n > 256) {
    return 0;
  }
  size_t bad = 0;
  int rc = tp_buf_printf(b, ", \"%s\": ", key);
  return rc != 0 ? rc : tp_jsonw_string(b, (const char *)s, n, &bad);
}

// Keeps the GPU's properties as the PyTorch profiler's deviceProperties (an array of one object),
// and the tool as "profiler". Missing tables or columns leave members out.
static int add_meta(Db *d) {
  TpBuf b = {0};
  int rc = 0;
  sqlite3_stmt *st = NULL;
  if (d->has_dev && has_table(d, "TARGET_INFO_GPU") == 1 &&
      sqlite3_prepare_v2(d->db,
                         "SELECT name, totalMemory, computeMajor, computeMinor, smCount FROM "
                         "TARGET_INFO_GPU WHERE id = ?1 LIMIT 1",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, d->dev);
    if (sqlite3_step(st) == SQLITE_ROW) {
      rc = tp_buf_printf(&b, "[{\"id\": %lld", (long long)d->dev);
      if (rc == 0) {
        rc = json_text(&b, "name", sqlite3_column_text(st, 0), (size_t)sqlite3_column_bytes(st, 0));
      }
      static const char *const keys[] = {"totalGlobalMem", "computeMajor", "computeMinor",
                                         "numSms"};
      for (int i = 0; i < 4 && rc == 0; i++) {
        rc = json_int(&b, keys[i], st, i + 1);
      }
      if (rc == 0) {
        rc = tp_buf_printf(&b, "}]");
      }
      if (rc == 0) {
        rc = tp_trace_add_meta(d->t, "deviceProperties", 16, b.data, b.len);
      }
    }
  }
  sqlite3_finalize(st);
  st = NULL;
  b.len = 0;
  if (rc == 0) {
    rc = tp_buf_printf(&b, "{\"tool\": \"nsys\", \"format\": \"sqlite\"");
  }
  const char *meta = has_table(d, "META_DATA_EXPORT") == 1   ? "META_DATA_EXPORT"
                     : has_table(d, "EXPORT_META_DATA") == 1 ? "EXPORT_META_DATA"
                                                             : NULL;
  char sql[160];
  snprintf(sql, sizeof(sql),
           "SELECT name, value FROM %s WHERE name IN ('EXPORT_PRODUCT_VERSION', "
           "'EXPORT_SCHEMA_VERSION')",
           meta ? meta : "");
  if (rc == 0 && meta && sqlite3_prepare_v2(d->db, sql, -1, &st, NULL) == SQLITE_OK) {
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char *k = sqlite3_column_text(st, 0);
      bool product = k && strcmp((const char *)k, "EXPORT_PRODUCT_VERSION") == 0;
      rc = json_text(&b, product ? "version" : "schema", sqlite3_column_text(st, 1),
                     (size_t)sqlite3_column_bytes(st, 1));
    }
  }
  sqlite3_finalize(st);
  if (rc == 0 && d->has_dev) {
    rc = tp_buf_printf(&b, ", \"device\": %lld", (long long)d->dev);
  }
  if (rc == 0) {
    rc = tp_buf_printf(&b, "}");
  }
  if (rc == 0) {
    rc = tp_trace_add_meta(d->t, "profiler", 8, b.data, b.len);
  }
  tp_buf_free(&b);
  return rc == 0 ? 0 : tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
}

// A file: URI for `path` (RFC 3986 percent-encoding), read-only and immutable: no locks, no
// journal, no change expected while it is read.
static char *file_uri(const char *path) {
  size_t n = strlen(path);
  char *uri = malloc(8 + 3 * n + 16);
  if (!uri) {
    return NULL;
  }
  char *o = uri;
  o += sprintf(o, "%s", path[0] == '/' ? "file://" : "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        *p == '/' || *p == '.' || *p == '-' || *p == '_' || *p == '~') {
      *o++ = (char)*p;
    } else {
      o += sprintf(o, "%%%02X", *p);
    }
  }
  sprintf(o, "?immutable=1");
  return uri;
}

// Reads all of `src` into memory SQLite owns.
static int slurp(TpTraceSrc *src, const char *label, unsigned char **out, sqlite3_int64 *len,
                 TpError *err) {
  unsigned char *buf = NULL;
  sqlite3_int64 n = 0, cap = 0;
  for (;;) {
    const unsigned char *p = NULL;
    size_t k = 0;
    int rc = tp_trace_src_next(src, &p, &k, err);
    if (rc < 0) {
      sqlite3_free(buf);
      return rc;
    }
    if (rc == 0) {
      break;
    }
    if ((sqlite3_int64)k > MAX_MEMORY - n) {
      sqlite3_free(buf);
      return tp_error_set(err, TP_ELIMIT,
                          "%s: an SQLite database read from gzip or memory is over 1 GiB "
                          "(uncompress it first)",
                          label);
    }
    if (n + (sqlite3_int64)k > cap) {
      sqlite3_int64 nc = cap ? cap : 1 << 20;
      while (nc < n + (sqlite3_int64)k) {
        nc *= 2;
      }
      unsigned char *b = sqlite3_realloc64(buf, (sqlite3_uint64)nc);
      if (!b) {
        sqlite3_free(buf);
        return tp_error_set(err, TP_ENOMEM, "%s: out of memory", label);
      }
      buf = b;
      cap = nc;
    }
    memcpy(buf + n, p, k);
    n += (sqlite3_int64)k;
  }
  *out = buf;
  *len = n;
  return 0;
}

// Data only: no views, triggers or schema functions; no string over 16 MiB. Set before the
// schema is first read.
static void make_safe(sqlite3 *db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, (int *)NULL);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, MAX_LENGTH);
}

static int open_db(Db *d, TpTraceSrc *src, const char *path) {
  int r;
  if (path && !tp_trace_src_compressed(src)) {
    char *uri = file_uri(path);
    if (!uri) {
      return tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
    }
    const unsigned char *p = NULL;
    size_t k = 0;
    if (tp_trace_src_next(src, &p, &k, d->err) > 0) {  // the first chunk, peeked before
      d->declared = declared_size(p, k);
    }
    r = sqlite3_open_v2(uri, &d->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                        NULL);
    free(uri);
    if (r == SQLITE_OK) {
      make_safe(d->db);
    }
    struct stat sb;
    if (stat(path, &sb) == 0) {
      d->t->bytes = (uint64_t)sb.st_size;
    }
  } else {
    unsigned char *buf = NULL;
    sqlite3_int64 n = 0;
    int rc = slurp(src, d->label, &buf, &n, d->err);
    if (rc != 0) {
      return rc;
    }
    d->t->bytes = (uint64_t)n;
    d->declared = declared_size(buf, (size_t)n);
    r = sqlite3_open_v2(":memory:", &d->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (r == SQLITE_OK) {
      make_safe(d->db);
      // SQLite frees buf, also when this fails
      r = sqlite3_deserialize(d->db, "main", buf, n, n,
                              SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY);
    } else {
      sqlite3_free(buf);
    }
  }
  if (r != SQLITE_OK) {
    return d->db ? db_fail(d, "cannot open the SQLite database")
                 : tp_error_set(d->err, TP_ENOMEM, "%s: out of memory", d->label);
  }
  return 0;
}

int tp_trace_parse_nsys(TpTraceSrc *src, const char *path, TpTrace *t, TpError *err) {
  Db d = {.t = t, .err = err, .label = tp_trace_src_label(src)};
  int rc = open_db(&d, src, path);
  if (rc == 0 && d.declared > t->bytes) {
    t->truncated = true;
    tp_trace_warn(t, "%s: the file is cut short: %llu of the %llu bytes its header gives", d.label,
                  (unsigned long long)t->bytes, (unsigned long long)d.declared);
  }
  if (rc == 0) {
    // The schema is read first: a file that is not a database fails here.
    static const char *const wanted[] = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                         "CUPTI_ACTIVITY_KIND_MEMSET",
                                         "CUPTI_ACTIVITY_KIND_RUNTIME"};
    int found = 0;
    for (size_t i = 0; i < 4 && rc >= 0; i++) {
      rc = has_table(&d, wanted[i]);
      found += rc > 0;
    }
    if (rc >= 0) {
      rc = has_table(&d, "StringIds");
      d.string_ids = rc > 0;
    }
    if (rc >= 0 && found == 0) {
      rc = tp_error_set(err, TP_EPARSE,
                        "%s: an SQLite database without the tables of an Nsight Systems export "
                        "(CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _RUNTIME)",
                        d.label);
    }
    rc = rc < 0 ? rc : 0;
  }
  for (int k = 0; k < TP_TRACE_KINDS && rc == 0; k++) {
    static const char *const first[] = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                        "CUPTI_ACTIVITY_KIND_MEMSET"};
    rc = choose_device(&d, first[k]);
  }
  for (int k = 0; k < TP_TRACE_KINDS && rc == 0; k++) {
    rc = read_ops(&d, (TpTraceKind)k);
  }
  if (rc == 0) {
    rc = read_launches(&d);
  }
  if (rc == 0) {
    rc = read_ranges(&d);
  }
  if (rc == 0) {
    rc = add_meta(&d);
  }
  if (rc == 0 && d.left_out > 0) {
    tp_trace_warn(t,
                  "%s: %llu ops of other GPUs or processes than device %lld were left out (one "
                  "trace holds one GPU)",
                  d.label, (unsigned long long)d.left_out, (long long)d.dev);
  }
  sqlite3_close(d.db);
  return rc;
}
