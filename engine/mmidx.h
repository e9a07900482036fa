// Megatron-LM indexed datasets (PREFIX.idx + PREFIX.bin): the index parsed and checked against
// the real file sizes without reading outside them, the token file memory-mapped, statistics,
// vocabulary checks, SHA-256 fingerprints, and a streaming writer.
//
// Format (NVIDIA/Megatron-LM megatron/core/datasets/indexed_dataset.py, _IndexWriter and
// _IndexReader; all integers little-endian):
//   magic      9 bytes  "MMIDIDX\0\0"
//   version    uint64   1
//   dtype      uint8    DType code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
//                       7 float32, 8 uint16
//   sequences  uint64   S, the number of sequences
//   documents  uint64   D, the number of entries of the document index (documents + 1)
//   sizes      int32[S] tokens per sequence
//   pointers   int64[S] byte offset of each sequence in the .bin
//   doc_index  int64[D] first sequence of each document, then S: 0 = d[0] <= d[1] <= ... = S
// (multimodal datasets append int8[S] modes; they are not read here).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "store.h"

/// Bytes of the fixed header.
#define TP_MMIDX_HEADER 34

/// DType codes of the format.
enum {
  TP_MMIDX_UINT8 = 1,
  TP_MMIDX_INT8 = 2,
  TP_MMIDX_INT16 = 3,
  TP_MMIDX_INT32 = 4,
  TP_MMIDX_INT64 = 5,
  TP_MMIDX_FLOAT64 = 6,
  TP_MMIDX_FLOAT32 = 7,
  TP_MMIDX_UINT16 = 8,
};

/// The parsed index. Array pointers point into the index bytes (unaligned, little-endian: read
/// them with tp_mmidx_size / tp_mmidx_pointer / tp_mmidx_doc).
typedef struct TpMmidxIndex {
  int dtype;             ///< DType code (integer types only)
  size_t itemsize;       ///< bytes per token
  uint64_t sequences;    ///< S
  uint64_t doc_entries;  ///< D (documents + 1)
  uint64_t tokens;       ///< sum of the sizes
  const uint8_t *sizes;
  const uint8_t *pointers;
  const uint8_t *docs;
} TpMmidxIndex;

/// Name of a DType code ("uint16", ...), or NULL for an unknown one.
const char *tp_mmidx_dtype_name(int dtype);
/// Bytes per item of a DType code, or 0 for an unknown one.
size_t tp_mmidx_itemsize(int dtype);

/// Parses and checks an index held in memory against the size of its .bin: magic, version,
/// dtype (an integer type), counts that fit the index exactly, every size >= 0, the sequences
/// laid out one after the other from offset 0 (as Megatron's writer does), and ending exactly at
/// `bin_len`, the document index from 0 to S without going back. `name` prefixes messages,
/// which name the field ("sizes[12]", "document index[3]").
/// @return 0, or TP_EPARSE (err filled).
int tp_mmidx_parse(const uint8_t *idx, size_t idx_len, uint64_t bin_len, const char *name,
                   TpMmidxIndex *out, TpError *err);

int64_t tp_mmidx_size(const TpMmidxIndex *ix, uint64_t i);
int64_t tp_mmidx_pointer(const TpMmidxIndex *ix, uint64_t i);
int64_t tp_mmidx_doc(const TpMmidxIndex *ix, uint64_t i);

/// Token `k` of a .bin of `dtype` (bounds are the caller's).
int64_t tp_mmidx_token(const uint8_t *bin, int dtype, uint64_t k);

/// A dataset opened from its prefix: both files mapped read-only.
typedef struct TpMmidx {
  TpMmidxIndex ix;
  const uint8_t *idx;  ///< the mapped index
  size_t idx_len;
  const uint8_t *bin;  ///< the mapped tokens (NULL when the .bin is empty)
  size_t bin_len;
  bool mapped;  ///< bin is a file mapping: scanned pages are released as scans go on
} TpMmidx;

/// Opens PREFIX.idx and PREFIX.bin, maps them and checks the index (tp_mmidx_parse).
/// @return 0, -errno (err names the file), TP_EPARSE or TP_ELIMIT (a file too large to map).
int tp_mmidx_open(const char *prefix, TpMmidx *m, TpError *err);
/// Unmaps; safe on a zeroed or closed struct.
void tp_mmidx_close(TpMmidx *m);

/// Token statistics over the whole .bin.
typedef struct TpMmidxStats {
  int64_t min_token, max_token;  ///< 0, 0 when there are no tokens
  uint64_t min_len, max_len;     ///< shortest and longest sequence (0 without sequences)
  uint64_t empty_sequences;
} TpMmidxStats;

void tp_mmidx_stats(const TpMmidx *m, TpMmidxStats *st);

/// Finds the first token outside [0, vocab). @return true and its position and value, or false.
bool tp_mmidx_find_out_of_vocab(const TpMmidx *m, int64_t vocab, uint64_t *pos, int64_t *value);

/// SHA-256 of the token stream: the .bin bytes of every sequence, in order (the whole file, as
/// checked by tp_mmidx_parse). Hashed on a second thread while this one reads ahead.
int tp_mmidx_sha256_tokens(const TpMmidx *m, char hex[65], TpError *err);

/// SHA-256 of the first `samples` training samples for sequence length `seq_len`: sample j is
/// tokens [j*seq_len, j*seq_len + seq_len + 1) of the documents concatenated in order (the
/// input and its shifted labels, as Megatron's GPT dataset assembles them before shuffling),
/// each token as an int64 little-endian, so that the digest does not depend on the dtype.
/// Fewer samples when the data runs out; `*made` says how many.
int tp_mmidx_sha256_samples(const TpMmidx *m, uint64_t seq_len, uint64_t samples, char hex[65],
                            uint64_t *made, TpError *err);

/// Streaming writer: sequences are appended to PREFIX.bin (a temporary file until commit),
/// the index is written at commit; both files appear atomically, .bin first.
typedef struct TpMmidxWriter {
  TpStoreFile bin;
  TpBuf sizes;  ///< int32 LE per sequence
  TpBuf docs;   ///< int64 LE document index
  char *idx_path;
  int dtype;
  size_t itemsize;
  uint64_t sequences;
  uint64_t tokens;
  bool open;
} TpMmidxWriter;

/// @return 0, TP_EINVAL (unknown or float dtype) or -errno (err filled).
int tp_mmidx_writer_open(TpMmidxWriter *w, const char *prefix, int dtype, TpError *err);
/// Appends one sequence of `n` tokens; `end_document` closes the current document after it.
/// A token that does not fit the dtype is TP_EINVAL (nothing is appended).
int tp_mmidx_writer_add(TpMmidxWriter *w, const int64_t *tokens, size_t n, bool end_document,
                        TpError *err);
/// Closes a document made of the sequences added since the last one (nothing when none).
int tp_mmidx_writer_end_document(TpMmidxWriter *w, TpError *err);
/// Writes PREFIX.idx and puts both files in place. The writer is closed either way.
int tp_mmidx_writer_commit(TpMmidxWriter *w, TpError *err);
/// Discards everything written; idempotent.
void tp_mmidx_writer_abort(TpMmidxWriter *w);

/// Kinds of synthetic token streams.
typedef enum TpMmidxSynthKind {
  TP_MMIDX_SYNTH_RANDOM,  ///< uniform ids in [0, vocab): a model cannot learn them
  TP_MMIDX_SYNTH_REPEAT,  ///< a 61-token pattern (uniform ids) repeated: a model learns it
  TP_MMIDX_SYNTH_ZIPF,    ///< ids drawn with probability proportional to 1 / (rank + 1)
} TpMmidxSynthKind;

/// Writes PREFIX.bin/.idx of `tokens` synthetic tokens in documents of `doc_len` tokens (the
/// last one shorter), each document one sequence, the smallest dtype that holds `vocab` ids
/// (uint16 up to 65536, else int32). The same arguments give the same bytes (splitmix64 seeded
/// with `seed`). @return 0, TP_EINVAL, TP_ENOMEM or -errno (err filled).
int tp_mmidx_synth(const char *prefix, uint64_t tokens, uint64_t vocab, uint64_t seed,
                   TpMmidxSynthKind kind, uint64_t doc_len, TpError *err);

/// Histogram of sequence lengths by bit length: counts[0] = empty sequences, counts[k] =
/// sequences with 2^(k-1) <= length < 2^k (k = 1..32).
void tp_mmidx_length_histogram(const TpMmidxIndex *ix, uint64_t counts[33]);
