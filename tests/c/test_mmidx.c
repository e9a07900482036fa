// Unit tests of engine/mmidx: the writer's files read back by an independent decoder written
// here from the format description (and by the engine's reader), every dtype, the checks of
// the index against the real file sizes, statistics, vocabulary checks and fingerprints.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "digest.h"
#include "mmidx.h"

static char dir[] = "/tmp/tplua-test-mmidx.XXXXXX";

static char *path_of(const char *name, const char *ext) {
  static char buf[4][512];
  static int n;
  char *p = buf[n++ % 4];
  snprintf(p, 512, "%s/%s%s", dir, name, ext);
  return p;
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)n + 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

static void spit(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  fclose(f);
}

// Little-endian readers of the test's own.
static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) {
    v = v << 8 | p[i];
  }
  return v;
}

// Three documents: {5 tokens}, {3 tokens, 2 tokens}, {0 tokens}.
static const int64_t TOK[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

static int write_three(const char *name, int dtype, const int64_t *tok) {
  TpMmidxWriter w;
  TpError err = {0};
  int rc = tp_mmidx_writer_open(&w, path_of(name, ""), dtype, &err);
  if (rc != 0) {
    return rc;
  }
  rc = tp_mmidx_writer_add(&w, tok, 5, true, &err);
  rc = rc ? rc : tp_mmidx_writer_add(&w, tok + 5, 3, false, &err);
  rc = rc ? rc : tp_mmidx_writer_add(&w, tok + 8, 2, true, &err);
  rc = rc ? rc : tp_mmidx_writer_add(&w, tok, 0, true, &err);
  if (rc != 0) {
    tp_mmidx_writer_abort(&w);
    return rc;
  }
  return tp_mmidx_writer_commit(&w, &err);
}

static void test_round_trip(void) {
  const int dtypes[] = {TP_MMIDX_UINT8, TP_MMIDX_INT8,  TP_MMIDX_INT16,
                        TP_MMIDX_INT32, TP_MMIDX_INT64, TP_MMIDX_UINT16};
  int64_t tok[10];
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
    int dtype = dtypes[d];
    size_t item = tp_mmidx_itemsize(dtype);
    for (int i = 0; i < 10; i++) {
      // Values near each type's edges where they fit.
      tok[i] = (dtype == TP_MMIDX_INT8 || dtype == TP_MMIDX_INT16) ? TOK[i] - 5
               : (dtype == TP_MMIDX_UINT16)                        ? 65535 - TOK[i]
               : (dtype == TP_MMIDX_INT64)                         ? ((int64_t)1 << 40) + TOK[i]
                                                                   : TOK[i] * 20;
    }
    CHECK_INT(write_three("rt", dtype, tok), 0);
    // The independent decoder.
    size_t il = 0, bl = 0;
    uint8_t *idx = slurp(path_of("rt", ".idx"), &il);
    uint8_t *bin = slurp(path_of("rt", ".bin"), &bl);
    CHECK(idx != NULL && bin != NULL);
    CHECK(memcmp(idx, "MMIDIDX\0\0", 9) == 0);
    CHECK_INT(le(idx + 9, 8), 1);
    CHECK_INT(idx[17], dtype);
    CHECK_INT(le(idx + 18, 8), 4);  // sequences
    CHECK_INT(le(idx + 26, 8), 4);  // document entries: 0, 1, 3, 4
    CHECK_INT(il, 34 + 4 * 4 + 8 * 4 + 8 * 4);
    const int64_t sizes[] = {5, 3, 2, 0}, ptrs[] = {0, 5, 8, 10}, docs[] = {0, 1, 3, 4};
    for (int i = 0; i < 4; i++) {
      CHECK_INT(le(idx + 34 + 4 * i, 4), sizes[i]);
      CHECK_INT(le(idx + 50 + 8 * i, 8), ptrs[i] * (int64_t)item);
      CHECK_INT(le(idx + 82 + 8 * i, 8), docs[i]);
    }
    CHECK_INT(bl, 10 * item);
    for (int i = 0; i < 10; i++) {
      uint64_t raw = le(bin + i * item, (int)item);
      int64_t v = (int64_t)(raw << (64 - 8 * item)) >> (64 - 8 * item);  // sign-extend
      if (dtype == TP_MMIDX_UINT8 || dtype == TP_MMIDX_UINT16) {
        v = (int64_t)raw;
      }
      CHECK_INT(v, tok[i]);
    }
    free(idx);
    free(bin);
    // The engine's reader.
    TpMmidx m;
    TpError err = {0};
    CHECK_INT(tp_mmidx_open(path_of("rt", ""), &m, &err), 0);
    CHECK_INT(m.ix.sequences, 4);
    CHECK_INT(m.ix.doc_entries, 4);
    CHECK_INT(m.ix.tokens, 10);
    for (int i = 0; i < 10; i++) {
      CHECK_INT(tp_mmidx_token(m.bin, dtype, (uint64_t)i), tok[i]);
    }
    TpMmidxStats st;
    tp_mmidx_stats(&m, &st);
    CHECK_INT(st.min_len, 0);
    CHECK_INT(st.max_len, 5);
    CHECK_INT(st.empty_sequences, 1);
    CHECK_INT(st.min_token, tok[0] < tok[9] ? tok[0] : tok[9]);
    CHECK_INT(st.max_token, tok[0] < tok[9] ? tok[9] : tok[0]);
    tp_mmidx_close(&m);
  }
}

static void test_refused_tokens(void) {
  TpMmidxWriter w;
  TpError err = {0};
  CHECK_INT(tp_mmidx_writer_open(&w, path_of("bad", ""), TP_MMIDX_UINT16, &err), 0);
  int64_t big[] = {1, 70000};
  CHECK_INT(tp_mmidx_writer_add(&w, big, 2, true, &err), TP_EINVAL);
  CHECK(strstr(err.msg, "token 70000 (sequence 0, position 1) does not fit uint16") != NULL);
  tp_mmidx_writer_abort(&w);
  // Nothing was left behind.
  CHECK(access(path_of("bad", ".bin"), F_OK) != 0);
  CHECK_INT(tp_mmidx_writer_open(&w, path_of("bad", ""), TP_MMIDX_FLOAT32, &err), TP_EINVAL);
  CHECK(strstr(err.msg, "float32 is not a token type") != NULL);
}

// Builds an index in memory: header, then the arrays as given.
static size_t build(uint8_t *out, int dtype, uint64_t s, uint64_t d, const int32_t *sizes,
                    const int64_t *ptrs, const int64_t *docs) {
  memcpy(out, "MMIDIDX\0\0", 9);
  uint64_t v[3] = {1, s, d};
  memcpy(out + 9, &v[0], 8);
  out[17] = (uint8_t)dtype;
  memcpy(out + 18, &v[1], 8);
  memcpy(out + 26, &v[2], 8);
  size_t at = 34;
  memcpy(out + at, sizes, 4 * s);
  at += 4 * s;
  memcpy(out + at, ptrs, 8 * s);
  at += 8 * s;
  memcpy(out + at, docs, 8 * d);
  return at + 8 * d;
}

static void expect_error(const uint8_t *idx, size_t len, uint64_t bin_len, const char *text) {
  TpMmidxIndex ix;
  TpError err = {0};
  int rc = tp_mmidx_parse(idx, len, bin_len, "data/x", &ix, &err);
  CHECK_INT(rc, TP_EPARSE);
  CHECK_REPORT_(strstr(err.msg, text) != NULL, "message '%s' has '%s'", err.msg, text);
}

static void test_hostile_indexes(void) {
  uint8_t idx[512];
  const int32_t sizes[] = {4, 2};
  const int64_t ptrs[] = {0, 8}, docs[] = {0, 2};
  size_t n = build(idx, TP_MMIDX_UINT16, 2, 2, sizes, ptrs, docs);
  TpMmidxIndex ix;
  TpError err = {0};
  CHECK_INT(tp_mmidx_parse(idx, n, 12, "data/x", &ix, &err), 0);
  CHECK_INT(ix.tokens, 6);

  expect_error(idx, 20, 12, "data/x.idx: 20 bytes, shorter than the 34-byte header");
  expect_error(idx, 0, 12, "shorter than the 34-byte header");
  expect_error(idx, n - 1, 12,
               "data/x.idx: document count: 2 entries (8 bytes each) after 2 "
               "sequences (12 bytes each) do not fill the 39 bytes");
  expect_error(idx, n, 10, "data/x.bin: sequence 1 (2 tokens at byte 8) ends past the end");
  expect_error(idx, n, 14, "data/x.bin: 14 bytes, but the index describes 12");

  uint8_t bad[512];
  memcpy(bad, idx, n);
  bad[0] = 'X';
  expect_error(bad, n, 12, "data/x.idx: magic: not a Megatron indexed dataset");
  memcpy(bad, idx, n);
  bad[9] = 2;
  expect_error(bad, n, 12, "data/x.idx: version: 2, only version 1 is known");
  memcpy(bad, idx, n);
  bad[17] = 9;
  expect_error(bad, n, 12, "data/x.idx: dtype: unknown code 9");
  bad[17] = TP_MMIDX_FLOAT64;
  expect_error(bad, n, 12, "dtype: float64 holds no token ids");
  // Huge counts: no overflow, no read outside.
  memcpy(bad, idx, n);
  memset(bad + 18, 0xff, 8);
  expect_error(bad, n, 12, "data/x.idx: sequence count: 18446744073709551615 sequences");
  memcpy(bad, idx, n);
  memset(bad + 26, 0xff, 8);
  expect_error(bad, n, 12, "data/x.idx: document count");
  // Zero document entries.
  const int64_t none[1] = {0};
  size_t z = build(bad, TP_MMIDX_UINT16, 0, 0, sizes, ptrs, none);
  expect_error(bad, z, 0, "document count: 0");
  // Negative size, pointer out of order, document index going back or not ending at S.
  const int32_t neg[] = {4, -2};
  z = build(bad, TP_MMIDX_UINT16, 2, 2, neg, ptrs, docs);
  expect_error(bad, z, 12, "data/x.idx: sizes[1]: -2 is negative");
  const int64_t gap[] = {0, 10};
  z = build(bad, TP_MMIDX_UINT16, 2, 2, sizes, gap, docs);
  expect_error(bad, z, 12,
               "data/x.idx: pointers[1]: 10, but the sequences before it end at byte 8");
  const int64_t back[] = {0, 2, 1};
  z = build(bad, TP_MMIDX_UINT16, 2, 3, sizes, ptrs, back);
  expect_error(bad, z, 12, "data/x.idx: document index[2]: 1 is outside 2..2");
  const int64_t short_end[] = {0, 1};
  z = build(bad, TP_MMIDX_UINT16, 2, 2, sizes, ptrs, short_end);
  expect_error(bad, z, 12, "document index[1]: 1, but the last entry must be the sequence count 2");
  const int64_t start[] = {1, 2};
  z = build(bad, TP_MMIDX_UINT16, 2, 2, sizes, ptrs, start);
  expect_error(bad, z, 12, "document index[0]: 1, expected 0");
}

static void test_files(void) {
  TpMmidx m;
  TpError err = {0};
  CHECK_INT(tp_mmidx_open(path_of("missing", ""), &m, &err), -ENOENT);
  CHECK(strstr(err.msg, "missing.idx") != NULL);
  // A .bin cut short: the error names the .bin and the sequence.
  CHECK_INT(write_three("cut", TP_MMIDX_INT32, TOK), 0);
  CHECK_INT(truncate(path_of("cut", ".bin"), 30), 0);
  CHECK_INT(tp_mmidx_open(path_of("cut", ""), &m, &err), TP_EPARSE);
  CHECK(strstr(err.msg, "cut.bin: sequence 1 (3 tokens at byte 20) ends past the end") != NULL);
  // Binary garbage as an index.
  spit(path_of("junk", ".idx"),
       "\x7f"
       "ELF\x02\x01\x01",
       7);
  spit(path_of("junk", ".bin"), "", 0);
  CHECK_INT(tp_mmidx_open(path_of("junk", ""), &m, &err), TP_EPARSE);
  CHECK(strstr(err.msg, "junk.idx: 7 bytes, shorter than the 34-byte header") != NULL);
}

static void test_vocab_and_fingerprints(void) {
  TpMmidx a, b;
  TpError err = {0};
  CHECK_INT(write_three("fa", TP_MMIDX_UINT16, TOK), 0);
  CHECK_INT(write_three("fb", TP_MMIDX_UINT16, TOK), 0);
  CHECK_INT(tp_mmidx_open(path_of("fa", ""), &a, &err), 0);
  CHECK_INT(tp_mmidx_open(path_of("fb", ""), &b, &err), 0);
  uint64_t pos = 0;
  int64_t val = 0;
  CHECK(!tp_mmidx_find_out_of_vocab(&a, 11, &pos, &val));
  CHECK(tp_mmidx_find_out_of_vocab(&a, 8, &pos, &val));
  CHECK_INT(pos, 7);
  CHECK_INT(val, 8);
  char ha[65], hb[65];
  CHECK_INT(tp_mmidx_sha256_tokens(&a, ha, &err), 0);
  CHECK_INT(tp_mmidx_sha256_tokens(&b, hb, &err), 0);
  CHECK_STR(ha, hb);
  // The token hash is the SHA-256 of the .bin bytes.
  char hf[65];
  CHECK_INT(tp_digest_sha256_file(path_of("fa", ".bin"), hf, NULL, &err), 0);
  CHECK_STR(ha, hf);
  // Samples: the same tokens in another dtype give the same sample digest.
  CHECK_INT(write_three("fc", TP_MMIDX_INT64, TOK), 0);
  TpMmidx c;
  CHECK_INT(tp_mmidx_open(path_of("fc", ""), &c, &err), 0);
  char sa[65], sc[65];
  uint64_t made = 0;
  CHECK_INT(tp_mmidx_sha256_samples(&a, 3, 100, sa, &made, &err), 0);
  CHECK_INT(made, 3);  // 10 tokens: samples start at 0, 3, 6 (each needs 4 tokens)
  CHECK_INT(tp_mmidx_sha256_samples(&c, 3, 100, sc, &made, &err), 0);
  CHECK_STR(sa, sc);
  // Independently: sample 0..2 are int64 LE of tokens [0,4), [3,7), [6,10).
  uint8_t raw[12 * 8];
  int k = 0;
  for (int j = 0; j < 3; j++) {
    for (int t = 0; t <= 3; t++, k++) {
      uint64_t v = (uint64_t)TOK[j * 3 + t];
      for (int i = 0; i < 8; i++) {
        raw[8 * k + i] = (uint8_t)(v >> (8 * i));
      }
    }
  }
  char want[65];
  CHECK_INT(tp_digest_sha256(raw, sizeof raw, want, &err), 0);
  CHECK_STR(sa, want);
  // One changed token changes both digests.
  int64_t other[10];
  memcpy(other, TOK, sizeof other);
  other[4] = 99;
  CHECK_INT(write_three("fb", TP_MMIDX_UINT16, other), 0);
  tp_mmidx_close(&b);
  CHECK_INT(tp_mmidx_open(path_of("fb", ""), &b, &err), 0);
  CHECK_INT(tp_mmidx_sha256_tokens(&b, hb, &err), 0);
  CHECK(strcmp(ha, hb) != 0);
  char sb[65];
  CHECK_INT(tp_mmidx_sha256_samples(&b, 3, 100, sb, &made, &err), 0);
  CHECK(strcmp(sa, sb) != 0);
  tp_mmidx_close(&a);
  tp_mmidx_close(&b);
  tp_mmidx_close(&c);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_round_trip();
  test_refused_tokens();
  test_hostile_indexes();
  test_files();
  test_vocab_and_fingerprints();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "could not remove %s\n", dir);
  }
  return CHECK_DONE();
}
