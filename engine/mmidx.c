// Megatron-LM indexed datasets: index parsing and checking, mapped tokens, statistics,
// fingerprints and the writer. The format is described in mmidx.h.
#include "mmidx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "fs.h"

static const uint8_t MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

// Bytes scanned before the pages behind them are released (keeps the resident set flat).
#define SCAN_CHUNK ((size_t)16 << 20)

static uint64_t rd_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) {
    v = (v << 8) | p[i];
  }
  return v;
}

static uint32_t rd_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void wr_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}

const char *tp_mmidx_dtype_name(int dtype) {
  switch (dtype) {
    case TP_MMIDX_UINT8:
      return "uint8";
    case TP_MMIDX_INT8:
      return "int8";
    case TP_MMIDX_INT16:
      return "int16";
    case TP_MMIDX_INT32:
      return "int32";
    case TP_MMIDX_INT64:
      return "int64";
    case TP_MMIDX_FLOAT64:
      return "float64";
    case TP_MMIDX_FLOAT32:
      return "float32";
    case TP_MMIDX_UINT16:
      return "uint16";
    default:
      return NULL;
  }
}

size_t tp_mmidx_itemsize(int dtype) {
  switch (dtype) {
    case TP_MMIDX_UINT8:
    case TP_MMIDX_INT8:
      return 1;
    case TP_MMIDX_INT16:
    case TP_MMIDX_UINT16:
      return 2;
    case TP_MMIDX_INT32:
    case TP_MMIDX_FLOAT32:
      return 4;
    case TP_MMIDX_INT64:
    case TP_MMIDX_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

int64_t tp_mmidx_size(const TpMmidxIndex *ix, uint64_t i) {
  return (int32_t)rd_u32(ix->sizes + 4 * i);
}

int64_t tp_mmidx_pointer(const TpMmidxIndex *ix, uint64_t i) {
  return (int64_t)rd_u64(ix->pointers + 8 * i);
}

int64_t tp_mmidx_doc(const TpMmidxIndex *ix, uint64_t i) {
  return (int64_t)rd_u64(ix->docs + 8 * i);
}

int64_t tp_mmidx_token(const uint8_t *bin, int dtype, uint64_t k) {
  const uint8_t *p;
  switch (dtype) {
    case TP_MMIDX_UINT8:
      return bin[k];
    case TP_MMIDX_INT8:
      return (int8_t)bin[k];
    case TP_MMIDX_INT16:
      p = bin + 2 * k;
      return (int16_t)(uint16_t)(p[0] | (p[1] << 8));
    case TP_MMIDX_UINT16:
      p = bin + 2 * k;
      return (uint16_t)(p[0] | (p[1] << 8));
    case TP_MMIDX_INT32:
      return (int32_t)rd_u32(bin + 4 * k);
    case TP_MMIDX_INT64:
      return (int64_t)rd_u64(bin + 8 * k);
    default:
      return 0;
  }
}

int tp_mmidx_parse(const uint8_t *idx, size_t idx_len, uint64_t bin_len, const char *name,
                   TpMmidxIndex *out, TpError *err) {
  memset(out, 0, sizeof *out);
  if (idx_len < TP_MMIDX_HEADER) {
    return tp_error_set(err, TP_EPARSE, "%s.idx: %zu bytes, shorter than the %d-byte header", name,
                        idx_len, TP_MMIDX_HEADER);
  }
  if (memcmp(idx, MAGIC, sizeof MAGIC) != 0) {
    return tp_error_set(err, TP_EPARSE,
                        "%s.idx: magic: not a Megatron indexed dataset (expected MMIDIDX\\0\\0)",
                        name);
  }
  uint64_t version = rd_u64(idx + 9);
  if (version != 1) {
    return tp_error_set(err, TP_EPARSE, "%s.idx: version: %llu, only version 1 is known", name,
                        (unsigned long long)version);
  }
  int dtype = idx[17];
  const char *dname = tp_mmidx_dtype_name(dtype);
  if (!dname) {
    return tp_error_set(err, TP_EPARSE, "%s.idx: dtype: unknown code %d (1-8)", name, dtype);
  }
  if (dtype == TP_MMIDX_FLOAT32 || dtype == TP_MMIDX_FLOAT64) {
    return tp_error_set(err, TP_EPARSE, "%s.idx: dtype: %s holds no token ids", name, dname);
  }
  uint64_t s = rd_u64(idx + 18);
  uint64_t d = rd_u64(idx + 26);
  // The arrays must fill the rest of the file exactly: 12 bytes per sequence, 8 per document
  // entry. Compared by division so that hostile counts cannot overflow.
  uint64_t rest = idx_len - TP_MMIDX_HEADER;
  if (s > rest / 12) {
    return tp_error_set(err, TP_EPARSE,
                        "%s.idx: sequence count: %llu sequences need 12 bytes each, more than the "
                        "%llu bytes after the header",
                        name, (unsigned long long)s, (unsigned long long)rest);
  }
  uint64_t left = rest - 12 * s;
  if (d > left / 8 || left - 8 * d != 0) {
    return tp_error_set(err, TP_EPARSE,
                        "%s.idx: document count: %llu entries (8 bytes each) after %llu sequences "
                        "(12 bytes each) do not fill the %llu bytes after the header exactly",
                        name, (unsigned long long)d, (unsigned long long)s,
                        (unsigned long long)rest);
  }
  if (d == 0) {
    return tp_error_set(err, TP_EPARSE,
                        "%s.idx: document count: 0 (the document index starts with 0)", name);
  }
  out->dtype = dtype;
  out->itemsize = tp_mmidx_itemsize(dtype);
  out->sequences = s;
  out->doc_entries = d;
  out->sizes = idx + TP_MMIDX_HEADER;
  out->pointers = out->sizes + 4 * s;
  out->docs = out->pointers + 8 * s;
  uint64_t offset = 0;
  for (uint64_t i = 0; i < s; i++) {
    int64_t size = tp_mmidx_size(out, i);
    if (size < 0) {
      return tp_error_set(err, TP_EPARSE, "%s.idx: sizes[%llu]: %lld is negative", name,
                          (unsigned long long)i, (long long)size);
    }
    int64_t ptr = tp_mmidx_pointer(out, i);
    if (ptr < 0 || (uint64_t)ptr != offset) {
      return tp_error_set(err, TP_EPARSE,
                          "%s.idx: pointers[%llu]: %lld, but the sequences before it end at byte "
                          "%llu",
                          name, (unsigned long long)i, (long long)ptr, (unsigned long long)offset);
    }
    uint64_t bytes = (uint64_t)size * out->itemsize;
    if (bytes > bin_len - offset) {
      return tp_error_set(err, TP_EPARSE,
                          "%s.bin: sequence %llu (%lld tokens at byte %llu) ends past the end of "
                          "the file (%llu bytes)",
                          name, (unsigned long long)i, (long long)size, (unsigned long long)offset,
                          (unsigned long long)bin_len);
    }
    offset += bytes;
    out->tokens += (uint64_t)size;
  }
  if (offset != bin_len) {
    return tp_error_set(err, TP_EPARSE,
                        "%s.bin: %llu bytes, but the index describes %llu (%llu tokens of %s)",
                        name, (unsigned long long)bin_len, (unsigned long long)offset,
                        (unsigned long long)out->tokens, dname);
  }
  int64_t prev = 0;
  for (uint64_t i = 0; i < d; i++) {
    int64_t v = tp_mmidx_doc(out, i);
    if (i == 0 && v != 0) {
      return tp_error_set(err, TP_EPARSE, "%s.idx: document index[0]: %lld, expected 0", name,
                          (long long)v);
    }
    if (v < prev || (uint64_t)v > s) {
      return tp_error_set(err, TP_EPARSE,
                          "%s.idx: document index[%llu]: %lld is outside %lld..%llu (the index "
                          "never goes back and ends at the sequence count)",
                          name, (unsigned long long)i, (long long)v, (long long)prev,
                          (unsigned long long)s);
    }
    prev = v;
  }
  if ((uint64_t)prev != s) {
    return tp_error_set(err, TP_EPARSE,
                        "%s.idx: document index[%llu]: %lld, but the last entry must be the "
                        "sequence count %llu",
                        name, (unsigned long long)(d - 1), (long long)prev, (unsigned long long)s);
  }
  return 0;
}

// Maps a whole file read-only; an empty file gives NULL and 0.
static int map_file(const char *path, const uint8_t **data, size_t *len, TpError *err) {
  struct stat st;
  int fd = tp_fs_open_read(path, &st, err);
  if (fd < 0) {
    return fd;
  }
  if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
    close(fd);
    return tp_error_set(err, TP_ELIMIT, "%s: too large to map", path);
  }
  *len = (size_t)st.st_size;
  *data = NULL;
  if (*len > 0) {
    void *p = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int rc = tp_error_errno(err, "%s: mmap", path);
      close(fd);
      return rc;
    }
    *data = p;
  }
  close(fd);
  return 0;
}

int tp_mmidx_open(const char *prefix, TpMmidx *m, TpError *err) {
  memset(m, 0, sizeof *m);
  size_t n = strlen(prefix);
  char *path = malloc(n + 5);
  if (!path) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", prefix);
  }
  memcpy(path, prefix, n);
  memcpy(path + n, ".idx", 5);
  int rc = map_file(path, &m->idx, &m->idx_len, err);
  if (rc == 0) {
    memcpy(path + n, ".bin", 5);
    rc = map_file(path, &m->bin, &m->bin_len, err);
  }
  free(path);
  if (rc == 0) {
    m->mapped = true;
    rc = tp_mmidx_parse(m->idx, m->idx_len, m->bin_len, prefix, &m->ix, err);
  }
  if (rc != 0) {
    tp_mmidx_close(m);
  }
  return rc;
}

void tp_mmidx_close(TpMmidx *m) {
  if (m->idx) {
    munmap((void *)m->idx, m->idx_len);
  }
  if (m->bin) {
    munmap((void *)m->bin, m->bin_len);
  }
  memset(m, 0, sizeof *m);
}

// Calls fn over the tokens [first, first + count) in chunks, releasing the pages behind.
typedef bool (*TokenFn)(const uint8_t *bin, int dtype, uint64_t k, uint64_t n, void *ud);

static void scan(const TpMmidx *m, TokenFn fn, void *ud) {
  uint64_t per = SCAN_CHUNK / m->ix.itemsize;
  for (uint64_t k = 0; k < m->ix.tokens; k += per) {
    uint64_t n = m->ix.tokens - k < per ? m->ix.tokens - k : per;
    bool more = fn(m->bin, m->ix.dtype, k, n, ud);
    if (m->mapped) {
      // Chunks start at multiples of SCAN_CHUNK bytes of a page-aligned mapping.
      size_t at = (size_t)(k * m->ix.itemsize);
      madvise((void *)(m->bin + at), (size_t)(n * m->ix.itemsize), MADV_DONTNEED);
    }
    if (!more) {
      return;
    }
  }
}

typedef struct MinMax {
  int64_t lo, hi;
} MinMax;

static bool minmax_fn(const uint8_t *bin, int dtype, uint64_t k, uint64_t n, void *ud) {
  MinMax *mm = ud;
  int64_t lo = mm->lo, hi = mm->hi;
  if (dtype == TP_MMIDX_UINT16) {
    const uint8_t *p = bin + 2 * k;
    for (uint64_t i = 0; i < n; i++, p += 2) {
      int64_t v = (uint16_t)(p[0] | (p[1] << 8));
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  } else if (dtype == TP_MMIDX_INT32) {
    const uint8_t *p = bin + 4 * k;
    for (uint64_t i = 0; i < n; i++, p += 4) {
      int64_t v = (int32_t)rd_u32(p);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  } else {
    for (uint64_t i = 0; i < n; i++) {
      int64_t v = tp_mmidx_token(bin, dtype, k + i);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  }
  mm->lo = lo;
  mm->hi = hi;
  return true;
}

void tp_mmidx_stats(const TpMmidx *m, TpMmidxStats *st) {
  memset(st, 0, sizeof *st);
  const TpMmidxIndex *ix = &m->ix;
  for (uint64_t i = 0; i < ix->sequences; i++) {
    uint64_t len = (uint64_t)tp_mmidx_size(ix, i);
    if (i == 0 || len < st->min_len) {
      st->min_len = len;
    }
    if (len > st->max_len) {
      st->max_len = len;
    }
    st->empty_sequences += len == 0;
  }
  if (ix->tokens > 0) {
    MinMax mm = {INT64_MAX, INT64_MIN};
    scan(m, minmax_fn, &mm);
    st->min_token = mm.lo;
    st->max_token = mm.hi;
  }
}

typedef struct Vocab {
  int64_t vocab;
  bool found;
  uint64_t pos;
  int64_t value;
} Vocab;

static bool vocab_fn(const uint8_t *bin, int dtype, uint64_t k, uint64_t n, void *ud) {
  Vocab *v = ud;
  MinMax mm = {INT64_MAX, INT64_MIN};
  minmax_fn(bin, dtype, k, n, &mm);
  if (mm.lo >= 0 && mm.hi < v->vocab) {
    return true;
  }
  for (uint64_t i = 0; i < n; i++) {
    int64_t t = tp_mmidx_token(bin, dtype, k + i);
    if (t < 0 || t >= v->vocab) {
      v->found = true;
      v->pos = k + i;
      v->value = t;
      return false;
    }
  }
  return true;
}

bool tp_mmidx_find_out_of_vocab(const TpMmidx *m, int64_t vocab, uint64_t *pos, int64_t *value) {
  Vocab v = {vocab, false, 0, 0};
  if (m->ix.tokens > 0) {
    scan(m, vocab_fn, &v);
  }
  if (v.found) {
    *pos = v.pos;
    *value = v.value;
  }
  return v.found;
}

typedef struct Hash {
  TpDigestPipe *pipe;
} Hash;

static bool hash_fn(const uint8_t *bin, int dtype, uint64_t k, uint64_t n, void *ud) {
  Hash *h = ud;
  size_t itemsize = tp_mmidx_itemsize(dtype);
  // The chunk's pages are released after this returns: wait for the hash to pass them.
  uint64_t ticket = tp_digest_pipe_push(h->pipe, bin + k * itemsize, (size_t)(n * itemsize));
  tp_digest_pipe_wait(h->pipe, ticket);
  return true;
}

int tp_mmidx_sha256_tokens(const TpMmidx *m, char hex[65], TpError *err) {
  TpDigestPipe *pipe = tp_digest_pipe_new("tokens", err);
  if (!pipe) {
    return err ? err->code : TP_ENOMEM;
  }
  Hash h = {pipe};
  if (m->ix.tokens > 0) {
    scan(m, hash_fn, &h);
  }
  return tp_digest_pipe_finish(pipe, hex, err);
}

int tp_mmidx_sha256_samples(const TpMmidx *m, uint64_t seq_len, uint64_t samples, char hex[65],
                            uint64_t *made, TpError *err) {
  *made = 0;
  if (seq_len == 0) {
    return tp_error_set(err, TP_EINVAL, "samples: the sequence length must be at least 1");
  }
  TpDigestPipe *pipe = tp_digest_pipe_new("samples", err);
  if (!pipe) {
    return err ? err->code : TP_ENOMEM;
  }
  enum { BLOCK = 8192 };
  uint8_t *buf[2] = {malloc(BLOCK * 8), malloc(BLOCK * 8)};
  uint64_t ticket[2] = {0, 0};
  if (!buf[0] || !buf[1]) {
    free(buf[0]);
    free(buf[1]);
    tp_digest_pipe_free(pipe);
    return tp_error_set(err, TP_ENOMEM, "samples: out of memory");
  }
  int cur = 0;
  size_t fill = 0;
  uint64_t j = 0;
  for (; j < samples; j++) {
    uint64_t start = j * seq_len;
    if (start > m->ix.tokens || m->ix.tokens - start < seq_len + 1) {
      break;
    }
    for (uint64_t t = 0; t <= seq_len; t++) {
      wr_u64(buf[cur] + 8 * fill, (uint64_t)tp_mmidx_token(m->bin, m->ix.dtype, start + t));
      if (++fill == BLOCK) {
        ticket[cur] = tp_digest_pipe_push(pipe, buf[cur], BLOCK * 8);
        cur ^= 1;
        if (ticket[cur]) {
          tp_digest_pipe_wait(pipe, ticket[cur]);
        }
        fill = 0;
      }
    }
  }
  if (fill > 0) {
    tp_digest_pipe_push(pipe, buf[cur], fill * 8);
  }
  int rc = tp_digest_pipe_finish(pipe, hex, err);
  free(buf[0]);
  free(buf[1]);
  *made = j;
  return rc;
}

// ---------------------------------------------------------------------------------------------
// Writer

int tp_mmidx_writer_open(TpMmidxWriter *w, const char *prefix, int dtype, TpError *err) {
  memset(w, 0, sizeof *w);
  w->bin.fd = -1;
  const char *name = tp_mmidx_dtype_name(dtype);
  if (!name || dtype == TP_MMIDX_FLOAT32 || dtype == TP_MMIDX_FLOAT64) {
    return tp_error_set(err, TP_EINVAL, "%s: dtype: %s is not a token type", prefix,
                        name ? name : "unknown code");
  }
  size_t n = strlen(prefix);
  char *bin = malloc(n + 5);
  w->idx_path = malloc(n + 5);
  if (!bin || !w->idx_path) {
    free(bin);
    free(w->idx_path);
    w->idx_path = NULL;
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", prefix);
  }
  memcpy(bin, prefix, n);
  memcpy(bin + n, ".bin", 5);
  memcpy(w->idx_path, prefix, n);
  memcpy(w->idx_path + n, ".idx", 5);
  int rc = tp_store_file_open(&w->bin, bin, 0644, err);
  free(bin);
  if (rc != 0) {
    free(w->idx_path);
    w->idx_path = NULL;
    return rc;
  }
  uint8_t zero[8] = {0};
  rc = tp_buf_append(&w->docs, zero, 8);
  if (rc != 0) {
    tp_mmidx_writer_abort(w);
    return tp_error_set(err, rc, "%s: out of memory", prefix);
  }
  w->dtype = dtype;
  w->itemsize = tp_mmidx_itemsize(dtype);
  w->open = true;
  return 0;
}

static bool fits(int dtype, int64_t v) {
  switch (dtype) {
    case TP_MMIDX_UINT8:
      return v >= 0 && v <= UINT8_MAX;
    case TP_MMIDX_INT8:
      return v >= INT8_MIN && v <= INT8_MAX;
    case TP_MMIDX_INT16:
      return v >= INT16_MIN && v <= INT16_MAX;
    case TP_MMIDX_UINT16:
      return v >= 0 && v <= UINT16_MAX;
    case TP_MMIDX_INT32:
      return v >= INT32_MIN && v <= INT32_MAX;
    default:
      return true;
  }
}

int tp_mmidx_writer_add(TpMmidxWriter *w, const int64_t *tokens, size_t n, bool end_document,
                        TpError *err) {
  if (!w->open) {
    return tp_error_set(err, TP_EINVAL, "mmidx writer: not open");
  }
  if (n > INT32_MAX) {
    return tp_error_set(err, TP_ELIMIT, "%s: a sequence of %zu tokens (at most %d)", w->bin.path, n,
                        INT32_MAX);
  }
  for (size_t i = 0; i < n; i++) {
    if (!fits(w->dtype, tokens[i])) {
      return tp_error_set(err, TP_EINVAL,
                          "%s: token %lld (sequence %llu, position %zu) does not "
                          "fit %s",
                          w->bin.path, (long long)tokens[i], (unsigned long long)w->sequences, i,
                          tp_mmidx_dtype_name(w->dtype));
    }
  }
  uint8_t item[8];
  for (size_t i = 0; i < n; i++) {
    wr_u64(item, (uint64_t)tokens[i]);
    int rc = tp_store_file_write(&w->bin, item, w->itemsize, err);
    if (rc != 0) {
      return rc;
    }
  }
  uint8_t size[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
  if (tp_buf_append(&w->sizes, size, 4) != 0) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", w->bin.path);
  }
  w->sequences++;
  w->tokens += n;
  return end_document ? tp_mmidx_writer_end_document(w, err) : 0;
}

int tp_mmidx_writer_end_document(TpMmidxWriter *w, TpError *err) {
  if (!w->open) {
    return tp_error_set(err, TP_EINVAL, "mmidx writer: not open");
  }
  uint64_t last = rd_u64((const uint8_t *)w->docs.data + w->docs.len - 8);
  if (last == w->sequences) {
    return 0;
  }
  uint8_t v[8];
  wr_u64(v, w->sequences);
  if (tp_buf_append(&w->docs, v, 8) != 0) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", w->bin.path);
  }
  return 0;
}

int tp_mmidx_writer_commit(TpMmidxWriter *w, TpError *err) {
  if (!w->open) {
    return tp_error_set(err, TP_EINVAL, "mmidx writer: not open");
  }
  int rc = tp_mmidx_writer_end_document(w, err);
  TpStoreFile idx = {.fd = -1};
  if (rc == 0) {
    rc = tp_store_file_commit(&w->bin, err);
  }
  if (rc == 0) {
    rc = tp_store_file_open(&idx, w->idx_path, 0644, err);
  }
  if (rc == 0) {
    uint8_t head[TP_MMIDX_HEADER];
    memcpy(head, MAGIC, sizeof MAGIC);
    wr_u64(head + 9, 1);
    head[17] = (uint8_t)w->dtype;
    wr_u64(head + 18, w->sequences);
    wr_u64(head + 26, w->docs.len / 8);
    rc = tp_store_file_write(&idx, head, sizeof head, err);
    if (rc == 0) {
      rc = tp_store_file_write(&idx, w->sizes.data, w->sizes.len, err);
    }
    uint8_t ptr[8];
    uint64_t off = 0;
    for (uint64_t i = 0; rc == 0 && i < w->sequences; i++) {
      wr_u64(ptr, off);
      rc = tp_store_file_write(&idx, ptr, 8, err);
      off += (uint64_t)rd_u32((const uint8_t *)w->sizes.data + 4 * i) * w->itemsize;
    }
    if (rc == 0) {
      rc = tp_store_file_write(&idx, w->docs.data, w->docs.len, err);
    }
    if (rc == 0) {
      rc = tp_store_file_commit(&idx, err);
    }
    // Removes the temporary file unless committed; frees the object's memory either way.
    tp_store_file_abort(&idx);
  }
  tp_mmidx_writer_abort(w);
  return rc;
}

void tp_mmidx_writer_abort(TpMmidxWriter *w) {
  tp_store_file_abort(&w->bin);
  tp_buf_free(&w->sizes);
  tp_buf_free(&w->docs);
  free(w->idx_path);
  w->idx_path = NULL;
  w->open = false;
}

// ---------------------------------------------------------------------------------------------
// Synthetic datasets

// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014).
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform integer in [0, n) without modulo bias (rejection of the top remainder).
static uint64_t uniform(uint64_t *state, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do {
    r = splitmix64(state);
  } while (r >= limit);
  return r % n;
}

int tp_mmidx_synth(const char *prefix, uint64_t tokens, uint64_t vocab, uint64_t seed,
                   TpMmidxSynthKind kind, uint64_t doc_len, TpError *err) {
  if (vocab < 1 || vocab > (uint64_t)INT32_MAX + 1) {
    return tp_error_set(err, TP_EINVAL, "%s: vocab %llu is outside 1..2^31", prefix,
                        (unsigned long long)vocab);
  }
  if (doc_len < 1 || doc_len > INT32_MAX) {
    return tp_error_set(err, TP_EINVAL, "%s: document length %llu is outside 1..2^31-1", prefix,
                        (unsigned long long)doc_len);
  }
  double *cdf = NULL;
  if (kind == TP_MMIDX_SYNTH_ZIPF) {
    cdf = malloc(sizeof *cdf * vocab);
    if (!cdf) {
      return tp_error_set(err, TP_ENOMEM, "%s: out of memory", prefix);
    }
    double sum = 0;
    for (uint64_t i = 0; i < vocab; i++) {
      sum += 1.0 / (double)(i + 1);
      cdf[i] = sum;
    }
    for (uint64_t i = 0; i < vocab; i++) {
      cdf[i] /= sum;
    }
  }
  uint64_t state = seed;
  int64_t pattern[61];
  for (int i = 0; i < 61; i++) {
    pattern[i] = (int64_t)uniform(&state, vocab);
  }
  TpMmidxWriter w;
  int rc = tp_mmidx_writer_open(&w, prefix, vocab <= 65536 ? TP_MMIDX_UINT16 : TP_MMIDX_INT32, err);
  enum { CHUNK = 65536 };
  int64_t *buf = rc == 0 ? malloc(sizeof *buf * CHUNK) : NULL;
  if (rc == 0 && !buf) {
    rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", prefix);
  }
  uint64_t made = 0, in_doc = 0;
  while (rc == 0 && made < tokens) {
    // One document at a time, written in chunks of at most CHUNK tokens as one sequence.
    uint64_t len = tokens - made < doc_len ? tokens - made : doc_len;
    if (len > CHUNK) {
      len = CHUNK;
    }
    for (uint64_t i = 0; i < len; i++) {
      uint64_t pos = made + i;
      if (kind == TP_MMIDX_SYNTH_RANDOM) {
        buf[i] = (int64_t)uniform(&state, vocab);
      } else if (kind == TP_MMIDX_SYNTH_REPEAT) {
        buf[i] = pattern[pos % 61];
      } else {
        double u = (double)(splitmix64(&state) >> 11) * 0x1.0p-53;
        uint64_t lo = 0, hi = vocab - 1;
        while (lo < hi) {
          uint64_t mid = lo + (hi - lo) / 2;
          if (cdf[mid] < u) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        buf[i] = (int64_t)lo;
      }
    }
    in_doc += len;
    made += len;
    bool end = in_doc == doc_len || made == tokens;
    rc = tp_mmidx_writer_add(&w, buf, (size_t)len, end, err);
    if (end) {
      in_doc = 0;
    }
  }
  free(buf);
  free(cdf);
  if (rc != 0) {
    tp_mmidx_writer_abort(&w);
    return rc;
  }
  return tp_mmidx_writer_commit(&w, err);
}

void tp_mmidx_length_histogram(const TpMmidxIndex *ix, uint64_t counts[33]) {
  memset(counts, 0, 33 * sizeof counts[0]);
  for (uint64_t i = 0; i < ix->sequences; i++) {
    uint32_t len = (uint32_t)tp_mmidx_size(ix, i);
    int bits = 0;
    while (len) {
      bits++;
      len >>= 1;
    }
    counts[bits]++;
  }
}
