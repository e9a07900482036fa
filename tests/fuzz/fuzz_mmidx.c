// libFuzzer target for engine/mmidx: the input is a .bin length (its first 4 bytes, at most
// 1 MiB) and an .idx (the rest). The index is parsed against that length; when it is accepted
// every array entry it describes must lie inside the index, the sequences inside the .bin, and
// statistics, the vocabulary scan and both digests run over a .bin of that length (copied to an
// exactly sized heap block, so that ASan catches a read past its end).
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mmidx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c)                                                                                 \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);                   \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) {
    return 0;
  }
  uint64_t bin_len = ((uint64_t)data[0] | (uint64_t)data[1] << 8 | (uint64_t)data[2] << 16 |
                      (uint64_t)data[3] << 24) &
                     ((1u << 20) - 1);
  // The index in a block of its own size, so that an overread is caught.
  size_t idx_len = size - 4;
  uint8_t *idx = malloc(idx_len ? idx_len : 1);
  memcpy(idx, data + 4, idx_len);
  TpMmidxIndex ix;
  TpError err = {0};
  int rc = tp_mmidx_parse(idx, idx_len, bin_len, "fuzz", &ix, &err);
  if (rc != 0) {
    REQUIRE(rc == TP_EPARSE);
    REQUIRE(strncmp(err.msg, "fuzz.", 5) == 0);
    free(idx);
    return 0;
  }
  REQUIRE(ix.tokens * ix.itemsize == bin_len);
  uint64_t total = 0;
  for (uint64_t i = 0; i < ix.sequences; i++) {
    int64_t s = tp_mmidx_size(&ix, i), p = tp_mmidx_pointer(&ix, i);
    REQUIRE(s >= 0 && p >= 0 && (uint64_t)p + (uint64_t)s * ix.itemsize <= bin_len);
    total += (uint64_t)s;
  }
  REQUIRE(total == ix.tokens);
  for (uint64_t i = 0; i < ix.doc_entries; i++) {
    REQUIRE((uint64_t)tp_mmidx_doc(&ix, i) <= ix.sequences);
  }
  uint8_t *bin = malloc(bin_len ? bin_len : 1);
  for (uint64_t i = 0; i < bin_len; i++) {
    bin[i] = (uint8_t)(i * 31 + 7);
  }
  TpMmidx m = {
      .ix = ix, .idx = idx, .idx_len = idx_len, .bin = bin_len ? bin : NULL, .bin_len = bin_len};
  TpMmidxStats st;
  tp_mmidx_stats(&m, &st);
  REQUIRE(st.min_token <= st.max_token);
  uint64_t pos;
  int64_t value;
  if (tp_mmidx_find_out_of_vocab(&m, 100, &pos, &value)) {
    REQUIRE(pos < ix.tokens && (value < 0 || value >= 100));
  }
  char hex[65];
  REQUIRE(tp_mmidx_sha256_tokens(&m, hex, &err) == 0);
  uint64_t made = 0;
  REQUIRE(tp_mmidx_sha256_samples(&m, 1 + (bin_len % 7), 50, hex, &made, &err) == 0);
  REQUIRE(made <= 50);
  free(bin);
  free(idx);
  return 0;
}
