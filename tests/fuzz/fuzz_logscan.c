// libFuzzer target for engine/logscan: the input is fed whole and in a few chunk splits; every
// split must give the same records and diagnostics, and the results must be well formed (line
// numbers within the input, valid field bits, valid UTF-8 in every string handed out).
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                                 \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static int valid_utf8(const char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)p[i];
    size_t len = c < 0x80                   ? 1
                 : (c >= 0xc2 && c <= 0xdf) ? 2
                 : (c >= 0xe0 && c <= 0xef) ? 3
                 : (c >= 0xf0 && c <= 0xf4) ? 4
                                            : 0;
    if (len == 0 || i + len > n) {
      return 0;
    }
    for (size_t k = 1; k < len; k++) {
      if (((unsigned char)p[i + k] & 0xc0) != 0x80) {
        return 0;
      }
    }
    i += len;
  }
  return 1;
}

// Feeds data in pieces: sizes[k] bytes at a time (cycled), 0 meaning all at once.
static TpLogScan *scan(const uint8_t *data, size_t size, const size_t *sizes, size_t nsizes) {
  TpError err;
  TpLogScan *s = tp_logscan_new(NULL, &err);
  REQUIRE(s != NULL);
  size_t pos = 0, k = 0;
  while (pos < size) {
    size_t n = nsizes ? sizes[k++ % nsizes] : size;
    if (n == 0 || n > size - pos) {
      n = size - pos;
    }
    REQUIRE(tp_logscan_feed(s, (const char *)data + pos, n, &err) == 0);
    pos += n;
  }
  REQUIRE(tp_logscan_finish(s, &err) == 0);
  return s;
}

static void check_and_print(const TpLogScan *s, size_t size, TpBuf *out) {
  out->len = 0;
  uint64_t lines = tp_logscan_lines(s);
  REQUIRE(tp_logscan_bytes(s) == size);
  REQUIRE(lines <= size);
  size_t n = tp_logscan_nrecords(s);
  REQUIRE(n <= size);  // '\r'-separated refreshes can put several records on one line
  tp_buf_printf(out, "%zu %llu\n", n, (unsigned long long)lines);
  for (size_t i = 0; i < n; i++) {
    TpLogRecord r;
    REQUIRE(tp_logscan_record(s, i, &r));
    REQUIRE((r.present >> TP_LOG_F_COUNT) == 0);
    REQUIRE(r.present >> TP_LOG_F_LINE & 1);
    REQUIRE(r.v[TP_LOG_F_LINE] >= 1 && r.v[TP_LOG_F_LINE] <= (double)lines);
    REQUIRE(!r.timestamp || valid_utf8(r.timestamp, r.timestamp_len));
    size_t pos = 0, losses = 0;
    TpLogKv kv;
    while (tp_logscan_kv_next(&r, &pos, &kv)) {
      REQUIRE(kv.kind == TP_LOG_KV_LOSS || kv.kind == TP_LOG_KV_EXTRA);
      REQUIRE(valid_utf8(kv.name, kv.name_len));
      REQUIRE(kv.kind == TP_LOG_KV_LOSS || valid_utf8(kv.str, kv.str_len));
      losses += kv.kind == TP_LOG_KV_LOSS;
    }
    REQUIRE(pos == r.kv_len);
    REQUIRE(losses == r.nlosses);
    tp_buf_printf(out, "%llx", (unsigned long long)r.present);
    for (int f = 0; f < TP_LOG_F_COUNT; f++) {
      if (r.present >> f & 1) {
        tp_buf_printf(out, " %a", r.v[f]);
      }
    }
    tp_buf_printf(out, " %zu %d\n", r.kv_len, r.step_time_derived);
  }
  for (size_t i = 0; i < tp_logscan_ndiags(s); i++) {
    const TpLogDiag *d = tp_logscan_diag(s, i);
    REQUIRE(d->kind < TP_LOG_D_COUNT);
    REQUIRE(d->severity <= TP_LOG_SEV_ERROR);
    REQUIRE(d->line <= lines && d->first_line <= lines);
    REQUIRE(d->message && valid_utf8(d->message, strlen(d->message)));
    tp_buf_printf(out, "%d %d %llu %s\n", (int)d->kind, (int)d->severity,
                  (unsigned long long)d->line, d->message);
  }
  for (int w = 0; w < 2; w++) {
    for (size_t i = 0; i < tp_logscan_nargs(s, (TpLogArgDump)w); i++) {
      const char *name, *val;
      size_t nl, vl;
      REQUIRE(tp_logscan_arg(s, (TpLogArgDump)w, i, &name, &nl, &val, &vl));
      REQUIRE(valid_utf8(name, nl) && valid_utf8(val, vl));
      tp_buf_printf(out, "%.*s=%.*s\n", (int)nl, name, (int)vl, val);
    }
  }
  const TpLogMeta *m = tp_logscan_meta(s);
  for (int k = 0; k < TP_LOG_MS_COUNT; k++) {
    REQUIRE(!m->str[k] || valid_utf8(m->str[k], strlen(m->str[k])));
  }
  tp_buf_printf(out, "%x %zu\n", m->present, tp_logscan_nmemory(s));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  TpBuf want = {0}, got = {0};
  TpLogScan *s = scan(data, size, NULL, 0);
  check_and_print(s, size, &want);
  tp_logscan_free(s);
  // Splits derived from the input itself, so that the fuzzer explores the boundaries.
  size_t sizes[3][4] = {{1}, {size ? data[0] % 13 + 1 : 1, 3, 7, 64}, {size / 2 + 1}};
  size_t counts[3] = {1, 4, 1};
  for (int k = 0; k < 3; k++) {
    if (k == 0 && size > 4096) {
      continue;  // byte by byte only for small inputs
    }
    s = scan(data, size, sizes[k], counts[k]);
    check_and_print(s, size, &got);
    tp_logscan_free(s);
    REQUIRE(got.len == want.len && memcmp(got.data, want.data, got.len) == 0);
  }
  tp_buf_free(&want);
  tp_buf_free(&got);
  return 0;
}
