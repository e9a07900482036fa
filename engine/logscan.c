// Log scanner driver: chunked input and line splitting (the anchor filter keeps the lines without
// an anchor on a fast path), file reading with the SHA-256 computed by a second thread, the
// scanner's lifetime and the accessors of what it found. The line parsers are behind
// logscan_parse.h; the state they share is in logscan_state.c, the records in logscan_rec.c.
#include "logscan.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "fs.h"
#include "logscan_index.h"
#include "logscan_parse.h"
#include "logscan_state.h"

#define LONG_BLOCK (TP_LOGSCAN_MAX_LINE / 2)
#define HEAD_CHECK 65536u
#define READ_CHUNK (1u << 20)

static const char *const meta_names[TP_LOG_M_COUNT] = {
    "global_batch_size",
    "seq_len",
    "world_size",
    "train_iters",
    "micro_batch_size",
    "local_batch_size",
    "grad_accum",
    "tp",
    "pp",
    "cp",
    "dp",
    "ep",
    "lr",
    "seed",
    "peak_flops",
    "exit_code",
    "tokens_per_step",
};

static const char *const meta_str_names[TP_LOG_MS_COUNT] = {
    "precision", "framework_version", "backend", "backend_version", "device_name",
};

static const char *const diag_names[TP_LOG_D_COUNT] = {
    "oom",      "memory_pressure",    "nccl_timeout", "nccl_error", "nccl_warning", "gpu_fault",
    "nan_loss", "skipped_iterations", "loss_spike",   "preempted",  "crash",        "truncated",
    "restart",  "long_line",          "binary",       "empty",      "unrecognised", "bad_args",
    "timeout",  "cancelled",          "node_failure", "signal",
};

const char *tp_logscan_meta_name(TpLogMetaKey k) {
  return (int)k >= 0 && k < TP_LOG_M_COUNT ? meta_names[k] : NULL;
}

const char *tp_logscan_meta_str_name(TpLogMetaStr k) {
  return (int)k >= 0 && k < TP_LOG_MS_COUNT ? meta_str_names[k] : NULL;
}

bool tp_logscan_meta_is_int(TpLogMetaKey k) {
  return k != TP_LOG_M_LR && k != TP_LOG_M_PEAK_FLOPS;
}

const char *tp_logscan_diag_kind_name(TpLogDiagKind k) {
  return (int)k >= 0 && k < TP_LOG_D_COUNT ? diag_names[k] : "unknown";
}

const char *tp_logscan_severity_name(TpLogSeverity sev) {
  switch (sev) {
    case TP_LOG_SEV_INFO:
      return "info";
    case TP_LOG_SEV_WARNING:
      return "warning";
    case TP_LOG_SEV_ERROR:
      return "error";
  }
  return "error";
}

const char *tp_logscan_format_name(TpLogFormat f) {
  switch (f) {
    case TP_LOG_FORMAT_NONE:
      return NULL;
    case TP_LOG_FORMAT_MEGATRON:
      return "megatron";
    case TP_LOG_FORMAT_PRIMUS:
      return "primus";
    case TP_LOG_FORMAT_NEMO:
      return "nemo";
    case TP_LOG_FORMAT_TORCHTITAN:
      return "torchtitan";
    case TP_LOG_FORMAT_CUSTOM:
      return "custom";
  }
  return NULL;
}

void tp_logscan_opts_init(TpLogScanOpts *o) {
  memset(o, 0, sizeof *o);
  o->format = TP_LOG_FORMAT_NONE;
  o->rank = -1;
}

// --- Line splitting helpers ---------------------------------------------------------------

// Counts '\n' bytes. With GCC/clang vector extensions (SSE2 on x86-64, NEON on arm64): 16
// bytes per step, per-lane counters summed every 255 steps; otherwise eight bytes per step in a
// 64-bit word.
#if defined(__GNUC__) || defined(__clang__)
typedef unsigned char LsV16 __attribute__((vector_size(16)));
static uint64_t count_nl(const char *p, size_t n) {
  const LsV16 nlv = {'\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n',
                     '\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n'};
  uint64_t c = 0;
  size_t i = 0;
  while (i + 16 <= n) {
    LsV16 acc = {0};
    size_t lim = i + 16 * 255;
    if (lim > n) {
      lim = n;
    }
    for (; i + 16 <= lim; i += 16) {
      LsV16 v;
      memcpy(&v, p + i, 16);
      acc -= (LsV16)(v == nlv);  // lanes equal to '\n' are all ones: subtracting adds 1
    }
    for (int k = 0; k < 16; k++) {
      c += acc[k];
    }
  }
  for (; i < n; i++) {
    c += p[i] == '\n';
  }
  return c;
}
#else
static uint64_t count_nl(const char *p, size_t n) {
  const uint64_t ones = UINT64_C(0x0101010101010101);
  const uint64_t nlw = ones * '\n';
  const uint64_t low7 = UINT64_C(0x7f7f7f7f7f7f7f7f);
  uint64_t c = 0;
  size_t i = 0;
  while (i + 8 <= n) {
    uint64_t acc = 0;
    size_t lim = i + 8 * 255;
    if (lim > n) {
      lim = n;
    }
    for (; i + 8 <= lim; i += 8) {
      uint64_t v;
      memcpy(&v, p + i, 8);
      v ^= nlw;
      uint64_t t = ((v & low7) + low7) | v;  // high bit set where the byte is not '\n'
      acc += (~t >> 7) & ones;
    }
    c += (acc * ones) >> 56;
  }
  for (; i < n; i++) {
    c += p[i] == '\n';
  }
  return c;
}
#endif

// Index of the first '\n' or '\r' in b[from, n), or n.
static size_t next_sep(const char *b, size_t from, size_t n) {
  const char *q = memchr(b + from, '\n', n - from);
  size_t lim = q ? (size_t)(q - b) : n;
  const char *r = memchr(b + from, '\r', lim - from);
  return r ? (size_t)(r - b) : lim;
}

// Index just after the last '\n' or '\r' in b[from, to), or `from` when there is none.
static size_t seg_start_before(const char *b, size_t from, size_t to) {
  const char *q = memrchr(b + from, '\n', to - from);
  size_t lo = q ? (size_t)(q - b) + 1 : from;
  const char *r = memrchr(b + lo, '\r', to - lo);
  return r ? (size_t)(r - b) + 1 : lo;
}

static bool all_lines(const TpLogScan *s) {
  if (s->mode != LS_MODE_NORMAL) {
    return true;
  }
  if (s->opts.line && s->family == LS_FAM_CUSTOM) {
    return true;
  }
  return s->opts.detect && s->family == LS_FAM_NONE && s->opts.format == TP_LOG_FORMAT_NONE;
}

static int long_line(TpLogScan *s, uint64_t line, uint64_t len) {
  char what[128];
  snprintf(what, sizeof what, "line longer than %u bytes skipped (%llu bytes)", TP_LOGSCAN_MAX_LINE,
           (unsigned long long)len);
  return ls_diag(s, TP_LOG_D_LONG_LINE, TP_LOG_SEV_WARNING, line, what, NULL, 0);
}

static bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// A segment assembled from pieces (or the last one): examined like the segments of a region,
// i.e. only when it holds an anchor, so that results never depend on the chunking.
static int segment(TpLogScan *s, const char *p, size_t n, bool terminated) {
  if (n > TP_LOGSCAN_MAX_LINE) {
    return long_line(s, s->nl + 1, n);
  }
  size_t k = 0;
  while (k < n && blank(p[k])) {
    k++;
  }
  if (k < n) {
    s->last_content_line = s->nl + 1;
  }
  size_t ai, probe = 0;
  // The unterminated last segment is always examined: a cut may have taken its anchor.
  if (terminated && !all_lines(s) &&
      ls_index_find(&s->index, p, &probe, n, 0, n, &ai) == SIZE_MAX) {
    return 0;
  }
  return ls_process_segment(s, p, n, s->nl + 1, terminated);
}

// Line number of the last non-blank line of b[0, n), given that s->nl counts its '\n' bytes.
static void note_last_content(TpLogScan *s, const char *b, size_t n) {
  uint64_t after = 0;
  size_t j = n;
  while (j > 0 && blank(b[j - 1])) {
    after += b[j - 1] == '\n';
    j--;
  }
  if (j > 0) {
    s->last_content_line = s->nl - after + 1;
  }
}

// Scans b[0, n), which ends with a separator, so every segment in it is complete.
static int scan_region(TpLogScan *s, const char *b, size_t n) {
  ls_index_sample(&s->index, b, n);
  size_t floor = 0;  // start of the first segment not yet handled
  size_t p = 0;      // next probe position
  size_t cnt = 0;    // '\n' counted up to here
  size_t next_check = 0;
  int rc = 0;
  while (floor < n && rc == 0) {
    if (all_lines(s)) {
      size_t e = next_sep(b, floor, n);
      s->nl += count_nl(b + cnt, floor - cnt);
      cnt = floor;
      if (e > floor) {
        rc = segment(s, b + floor, e - floor, true);
      }
      floor = p = e + 1;
      continue;
    }
    if (p >= next_check) {
      // A segment longer than TP_LOGSCAN_MAX_LINE covers a whole block without separators.
      if (n - p >= LONG_BLOCK && !memchr(b + p, '\n', LONG_BLOCK) &&
          !memchr(b + p, '\r', LONG_BLOCK)) {
        size_t ss = seg_start_before(b, floor, p);
        size_t se = next_sep(b, p, n);
        if (se - ss > TP_LOGSCAN_MAX_LINE) {
          s->nl += count_nl(b + cnt, ss - cnt);
          cnt = ss;
          rc = long_line(s, s->nl + 1, se - ss);
          floor = p = se + 1;
          next_check = p;
          continue;
        }
      }
      next_check = p + LONG_BLOCK;
    }
    size_t ai;
    size_t to = next_check < n ? next_check : n;
    size_t hit = ls_index_find(&s->index, b, &p, to, floor, n, &ai);
    if (hit == SIZE_MAX) {
      if (p + LS_GRAM > n) {
        break;
      }
      continue;
    }
    size_t lo = hit > floor + TP_LOGSCAN_MAX_LINE + 1 ? hit - TP_LOGSCAN_MAX_LINE - 1 : floor;
    size_t ss = seg_start_before(b, lo, hit);
    if (ss == lo && lo > floor) {
      ss = seg_start_before(b, floor, hit);  // the segment is long: find its real start
    }
    size_t se = next_sep(b, hit, n);
    s->nl += count_nl(b + cnt, ss - cnt);
    cnt = ss;
    if (se - ss > TP_LOGSCAN_MAX_LINE) {
      rc = long_line(s, s->nl + 1, se - ss);
    } else {
      rc = ls_process_segment(s, b + ss, se - ss, s->nl + 1, true);  // holds an anchor
    }
    floor = p = se + 1;
    if (next_check < p) {
      next_check = p;
    }
  }
  if (rc == 0 && cnt < n) {
    s->nl += count_nl(b + cnt, n - cnt);
  }
  if (rc == 0) {
    note_last_content(s, b, n);
  }
  return rc;
}

// Binary detection on the first HEAD_CHECK bytes: NUL bytes or many control bytes.
static int head_check(TpLogScan *s, const char *data, size_t len) {
  if (s->head_seen >= HEAD_CHECK || s->head_binary) {
    return 0;
  }
  size_t n = HEAD_CHECK - s->head_seen;
  if (n > len) {
    n = len;
  }
  const char *z = memchr(data, '\0', n);
  if (z) {
    s->head_binary = true;
    uint64_t line = s->nl + count_nl(data, (size_t)(z - data)) + 1;
    return ls_diag(s, TP_LOG_D_BINARY, TP_LOG_SEV_WARNING, line, "input looks binary (NUL byte)",
                   NULL, 0);
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)data[i];
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != 0x1b && c != '\f' && c != '\v' &&
         c != '\b' && c != 0x07) ||
        c == 0x7f) {
      s->head_ctrl++;
    }
  }
  s->head_seen += n;
  return 0;
}

static int head_finish(TpLogScan *s) {
  if (!s->head_binary && s->head_seen >= 64 && s->head_ctrl * 10 > s->head_seen) {
    s->head_binary = true;
    return ls_diag(s, TP_LOG_D_BINARY, TP_LOG_SEV_WARNING, 1, "input looks binary (control bytes)",
                   NULL, 0);
  }
  return 0;
}

static int check_state(TpLogScan *s, TpError *err) {
  if (s->failed) {
    return tp_error_set(err, s->failed, "%s", s->fail_msg);
  }
  if (s->finished) {
    return tp_error_set(err, TP_EINVAL, "log scanner: already finished");
  }
  return 0;
}

static int fail_from(TpLogScan *s, int rc, TpError *err) {
  if (!s->failed) {
    s->failed = rc;
    if (rc == TP_ENOMEM) {
      snprintf(s->fail_msg, sizeof s->fail_msg, "log scanner: out of memory");
    } else if (!s->fail_msg[0]) {
      snprintf(s->fail_msg, sizeof s->fail_msg, "log scanner: failed (%s)", tp_error_name(rc));
    }
  }
  return tp_error_set(err, s->failed, "%s", s->fail_msg);
}

int tp_logscan_fail(TpLogScan *s, int code, const char *msg) {
  if (!s->failed) {
    s->failed = code;
    snprintf(s->fail_msg, sizeof s->fail_msg, "%s", msg ? msg : "log scanner: failed");
  }
  return code;
}

int tp_logscan_feed(TpLogScan *s, const char *data, size_t len, TpError *err) {
  int rc = check_state(s, err);
  if (rc) {
    return rc;
  }
  if (len == 0) {
    return 0;
  }
  rc = head_check(s, data, len);
  s->bytes += len;
  s->last_byte = data[len - 1];
  while (rc == 0 && len > 0) {
    if (s->skipping) {
      size_t e = next_sep(data, 0, len);
      if (e == len) {
        s->skip_bytes += len;
        return 0;
      }
      s->skip_bytes += e;
      s->skipping = false;
      rc = long_line(s, s->skip_line, s->skip_bytes);
      if (data[e] == '\n') {
        s->nl++;
      }
      data += e + 1;
      len -= e + 1;
      continue;
    }
    if (s->carry.len > 0) {
      size_t e = next_sep(data, 0, len);
      if (e == len || s->carry.len + e > TP_LOGSCAN_MAX_LINE) {
        if (s->carry.len + e > TP_LOGSCAN_MAX_LINE) {
          s->skipping = true;
          s->skip_line = s->nl + 1;
          s->skip_bytes = s->carry.len;
          s->carry.len = 0;
          continue;
        }
        if (tp_buf_append(&s->carry, data, len) != 0) {
          rc = TP_ENOMEM;
        }
        break;
      }
      if (tp_buf_append(&s->carry, data, e) != 0) {
        rc = TP_ENOMEM;
        break;
      }
      rc = segment(s, s->carry.data, s->carry.len, true);
      s->carry.len = 0;
      if (data[e] == '\n') {
        s->nl++;
      }
      data += e + 1;
      len -= e + 1;
      continue;
    }
    const char *q = memrchr(data, '\n', len);
    size_t from = q ? (size_t)(q - data) + 1 : 0;
    const char *r = memrchr(data + from, '\r', len - from);
    size_t end = r ? (size_t)(r - data) + 1 : from;  // just past the last separator
    if (end > 0) {
      rc = scan_region(s, data, end);
      data += end;
      len -= end;
    }
    if (rc == 0 && len > 0) {
      if (len > TP_LOGSCAN_MAX_LINE) {
        s->skipping = true;
        s->skip_line = s->nl + 1;
        s->skip_bytes = len;
      } else if (tp_buf_append(&s->carry, data, len) != 0) {
        rc = TP_ENOMEM;
      }
    }
    break;
  }
  if (rc) {
    return fail_from(s, rc, err);
  }
  return 0;
}

// Buffers read ahead while the pipe's thread hashes the ones before (each READ_CHUNK bytes).
#define DIGEST_BUFFERS 4

// How feed_path computes the file's digest, if at all.
typedef struct FeedDigest {
  TpDigestPipe *pipe;       // every chunk read handed to the pipe's thread (the reader waits)
  TpDigestFollow **follow;  // a follower started on the file, put here (the reader never waits)
} FeedDigest;

// Reads the file at `path` to the end and feeds it. With d->pipe, every chunk is also handed to
// the pipe's thread (engine/digest.h), from a ring of DIGEST_BUFFERS buffers, a buffer reused
// only once the thread is done with it: the bytes are read once, and the scan goes at the pace of
// the hash. With d->follow, a follower is started on the file: for a regular file its thread
// reads and hashes the file itself behind the scanner, told only how far the scanner has read
// (a pipe's bytes are hashed as they are read), so the scan ends without waiting for the hash;
// *d->follow receives it (NULL when the scan fails).
static int feed_path(TpLogScan *s, const char *path, const FeedDigest *d, uint64_t *size,
                     TpError *err) {
  int rc = check_state(s, err);
  if (rc) {
    return rc;
  }
  struct stat st;
  int fd = tp_fs_open_read(path, &st, err);
  if (fd < 0) {
    return fd;
  }
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  TpDigestPipe *pipe = d ? d->pipe : NULL;
  size_t nbuf = pipe ? DIGEST_BUFFERS : 1;
  char *bufs = malloc(nbuf * READ_CHUNK);
  if (!bufs) {
    close(fd);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
  }
  TpDigestFollow *follow = NULL;
  if (d && d->follow) {
    follow = tp_digest_follow_new(fd, path, err);
    if (!follow) {
      free(bufs);
      close(fd);
      return err ? err->code : TP_ENOMEM;
    }
  }
  uint64_t tickets[DIGEST_BUFFERS] = {0};
  uint64_t total = 0;
  for (size_t k = 0;; k = (k + 1) % nbuf) {
    char *buf = bufs + k * READ_CHUNK;
    if (pipe && tickets[k]) {
      tp_digest_pipe_wait(pipe, tickets[k]);
    }
    ssize_t got = read(fd, buf, READ_CHUNK);
    if (got < 0) {
      if (errno == EINTR) {
        k = (k + nbuf - 1) % nbuf;  // same buffer again
        continue;
      }
      rc = tp_error_errno(err, "%s", path);
      break;
    }
    if (got == 0) {
      break;
    }
    total += (uint64_t)got;
    if (pipe) {
      tickets[k] = tp_digest_pipe_push(pipe, buf, (size_t)got);
    }
    if (follow) {
      tp_digest_follow_advance(follow, buf, (size_t)got);
    }
    rc = tp_logscan_feed(s, buf, (size_t)got, err);
    if (rc) {
      break;
    }
  }
  if (pipe) {
    // The thread may still read the buffers: wait for every block before freeing them.
    for (size_t k = 0; k < nbuf; k++) {
      if (tickets[k]) {
        tp_digest_pipe_wait(pipe, tickets[k]);
      }
    }
  }
  free(bufs);
  close(fd);
  if (follow) {
    if (rc) {
      tp_digest_follow_free(follow);
    } else {
      tp_digest_follow_end(follow);
      *d->follow = follow;
    }
  }
  if (size) {
    *size = total;
  }
  return rc;
}

int tp_logscan_feed_file(TpLogScan *s, const char *path, TpError *err) {
  return feed_path(s, path, NULL, NULL, err);
}

int tp_logscan_feed_file_digest(TpLogScan *s, const char *path, TpDigestFollow **digest,
                                uint64_t *size, TpError *err) {
  *digest = NULL;
  FeedDigest d = {.follow = digest};
  return feed_path(s, path, &d, size, err);
}

int tp_logscan_feed_file_sha256(TpLogScan *s, const char *path, char hex[TP_DIGEST_SHA256_HEX + 1],
                                uint64_t *size, TpError *err) {
  TpDigestPipe *pipe = tp_digest_pipe_new(path, err);
  if (!pipe) {
    return err ? err->code : TP_ENOMEM;
  }
  FeedDigest d = {.pipe = pipe};
  int rc = feed_path(s, path, &d, size, err);
  if (rc) {
    tp_digest_pipe_free(pipe);
    return rc;
  }
  return tp_digest_pipe_finish(pipe, hex, err);
}

int tp_logscan_finish(TpLogScan *s, TpError *err) {
  if (s->failed) {
    return tp_error_set(err, s->failed, "%s", s->fail_msg);
  }
  if (s->finished) {
    return 0;
  }
  int rc = 0;
  if (s->skipping) {
    s->skipping = false;
    rc = long_line(s, s->skip_line, s->skip_bytes);
  } else if (s->carry.len > 0) {
    rc = segment(s, s->carry.data, s->carry.len, false);
    s->carry.len = 0;
  }
  if (rc == 0) {
    rc = head_finish(s);
  }
  if (rc == 0) {
    rc = ls_finish_parse(s);
  }
  if (rc) {
    return fail_from(s, rc, err);
  }
  s->finished = true;
  s->diag_dirty = true;
  return 0;
}

uint64_t tp_logscan_lines(const TpLogScan *s) {
  return ls_lines(s);
}

uint64_t tp_logscan_bytes(const TpLogScan *s) {
  return s->bytes;
}

// --- Lifetime -------------------------------------------------------------------------------

TpLogScan *tp_logscan_new(const TpLogScanOpts *opts, TpError *err) {
  TpLogScan *s = calloc(1, sizeof *s);
  if (!s) {
    tp_error_set(err, TP_ENOMEM, "log scanner: out of memory");
    return NULL;
  }
  if (opts) {
    s->opts = *opts;
  } else {
    tp_logscan_opts_init(&s->opts);
  }
  int rc = ls_index_build(&s->index, ls_anchor_count(), ls_anchor_get);
  if (rc != 0) {
    ls_index_free(&s->index);
    free(s);
    tp_error_set(err, rc,
                 rc == TP_ENOMEM ? "log scanner: out of memory" : "log scanner: bad anchor table");
    return NULL;
  }
  s->prev_skipped = -1;
  s->family = LS_FAM_NONE;
  // A forced format limits the record families; Primus runs Megatron or torchtitan.
  switch (s->opts.format) {
    case TP_LOG_FORMAT_MEGATRON:
      s->families = 1u << LS_FAM_MEGATRON;
      break;
    case TP_LOG_FORMAT_PRIMUS:
      s->families = (1u << LS_FAM_MEGATRON) | (1u << LS_FAM_TORCHTITAN);
      s->primus_seen = true;
      break;
    case TP_LOG_FORMAT_NEMO:
      s->families = 1u << LS_FAM_NEMO;
      break;
    case TP_LOG_FORMAT_TORCHTITAN:
      s->families = 1u << LS_FAM_TORCHTITAN;
      break;
    case TP_LOG_FORMAT_CUSTOM:
      s->family = LS_FAM_CUSTOM;
      s->families = 1u << LS_FAM_CUSTOM;
      s->custom_id = s->opts.custom_id;
      break;
    case TP_LOG_FORMAT_NONE:
      s->families = ~0u;
      break;
  }
  return s;
}

void tp_logscan_free(TpLogScan *s) {
  if (!s) {
    return;
  }
  ls_index_free(&s->index);
  tp_buf_free(&s->carry);
  tp_buf_free(&s->norm);
  tp_buf_free(&s->pend.kv);
  free(s->recs);
  free(s->dpool);
  tp_buf_free(&s->spool);
  for (int i = 0; i < 2; i++) {
    tp_buf_free(&s->args[i].pool);
    free(s->args[i].ents);
  }
  free(s->shards);
  free(s->mem);
  for (int i = 0; i < TP_LOG_MS_COUNT; i++) {
    free(s->meta_str[i]);
  }
  for (int i = 0; i < TP_LOG_D_COUNT; i++) {
    free(s->diags[i].msg);
  }
  free(s->diag_view);
  free(s);
}
static int build_diag_view(TpLogScan *s) {
  size_t n = 0;
  for (int k = 0; k < TP_LOG_D_COUNT; k++) {
    n += s->diags[k].seen;
  }
  TpLogDiag *v = n ? calloc(n, sizeof *v) : NULL;
  if (n && !v) {
    return TP_ENOMEM;
  }
  size_t j = 0;
  for (int k = 0; k < TP_LOG_D_COUNT; k++) {
    const LsDiagAcc *d = &s->diags[k];
    if (!d->seen) {
      continue;
    }
    v[j].kind = (TpLogDiagKind)k;
    v[j].severity = d->sev;
    v[j].line = d->line;
    v[j].first_line = d->first_line;
    v[j].count = d->count;
    v[j].message = d->msg ? d->msg : diag_names[k];
    j++;
  }
  // Insertion sort by first line (few entries), stable on kind order.
  for (size_t i = 1; i < n; i++) {
    TpLogDiag t = v[i];
    size_t k = i;
    while (k > 0 && v[k - 1].first_line > t.first_line) {
      v[k] = v[k - 1];
      k--;
    }
    v[k] = t;
  }
  free(s->diag_view);
  s->diag_view = v;
  s->ndiag_view = n;
  s->diag_dirty = false;
  return 0;
}

size_t tp_logscan_ndiags(const TpLogScan *s) {
  TpLogScan *m = (TpLogScan *)s;  // the view is a cache of the accumulators
  if (m->diag_dirty && build_diag_view(m) != 0) {
    return 0;
  }
  return m->ndiag_view;
}

const TpLogDiag *tp_logscan_diag(const TpLogScan *s, size_t i) {
  size_t n = tp_logscan_ndiags(s);
  return i < n ? &s->diag_view[i] : NULL;
}
TpLogFormat tp_logscan_format(const TpLogScan *s, int *custom_id) {
  if (custom_id) {
    *custom_id = s->custom_id;
  }
  if (s->opts.format != TP_LOG_FORMAT_NONE) {
    if (s->opts.format == TP_LOG_FORMAT_MEGATRON && s->primus_seen) {
      return TP_LOG_FORMAT_MEGATRON;  // forced: the caller knows better
    }
    return s->opts.format;
  }
  switch (s->family) {
    case LS_FAM_MEGATRON:
      return s->primus_seen ? TP_LOG_FORMAT_PRIMUS : TP_LOG_FORMAT_MEGATRON;
    case LS_FAM_NEMO:
      return TP_LOG_FORMAT_NEMO;
    case LS_FAM_TORCHTITAN:
      return s->primus_seen ? TP_LOG_FORMAT_PRIMUS : TP_LOG_FORMAT_TORCHTITAN;
    case LS_FAM_CUSTOM:
      return TP_LOG_FORMAT_CUSTOM;
    default:
      break;
  }
  // No record line: Primus' own markers (logger prefix, runner lines) still name the format.
  return s->primus_seen ? TP_LOG_FORMAT_PRIMUS : TP_LOG_FORMAT_NONE;
}
// --- Arguments, parameters, memory, meta ------------------------------------------------------

size_t tp_logscan_nargs(const TpLogScan *s, TpLogArgDump which) {
  return (int)which >= 0 && which <= TP_LOG_ARGS_PRIMUS ? s->args[which].n : 0;
}

bool tp_logscan_arg(const TpLogScan *s, TpLogArgDump which, size_t i, const char **name,
                    size_t *name_len, const char **value, size_t *value_len) {
  if ((int)which < 0 || which > TP_LOG_ARGS_PRIMUS || i >= s->args[which].n) {
    return false;
  }
  const LsArgs *a = &s->args[which];
  const LsArgEnt *e = &a->ents[i];
  *name = a->pool.data + e->name_ofs;
  *name_len = e->name_len;
  *value = a->pool.data + e->val_ofs;
  *value_len = e->val_len;
  return true;
}
const TpLogParams *tp_logscan_params(const TpLogScan *s) {
  TpLogParams *p = &((TpLogScan *)s)->params;  // shard pointer refreshed on access
  p->shards = s->shards;
  p->nshards = s->nshards;
  return p;
}

size_t tp_logscan_nmemory(const TpLogScan *s) {
  return s->nmem;
}

const TpLogMemReport *tp_logscan_memory(const TpLogScan *s, size_t i) {
  return i < s->nmem ? &s->mem[i] : NULL;
}

const TpLogTheoretical *tp_logscan_theoretical(const TpLogScan *s) {
  return &s->theo;
}

const TpLogMeta *tp_logscan_meta(const TpLogScan *s) {
  return &s->meta;
}
