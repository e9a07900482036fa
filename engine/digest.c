// SHA-256 through OpenSSL EVP (openssl/openssl, include/openssl/evp.h: EVP_MD_CTX_new,
// EVP_DigestInit_ex, EVP_DigestUpdate, EVP_DigestFinal_ex; EVP_sha256): libcrypto picks its
// fastest implementation for the CPU behind that interface (the x86 SHA extensions where the CPU
// has them). The pipe's and the follower's threads use POSIX threads (pthread_create,
// pthread_cond_wait; POSIX.1-2017 <pthread.h>); the follower reads with pread (POSIX.1-2017).
#include "digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"

static void to_hex(const unsigned char *md, unsigned int len, char *hex) {
  static const char digits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < len; i++) {
    hex[2 * i] = digits[md[i] >> 4];
    hex[2 * i + 1] = digits[md[i] & 0x0f];
  }
  hex[2 * len] = '\0';
}

static int start(EVP_MD_CTX **out, const char *subject, TpError *err) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx) {
    return tp_error_set(err, TP_ENOMEM, "%s: cannot allocate a digest context", subject);
  }
  if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(ctx);
    return tp_error_set(err, TP_EINVAL, "%s: SHA-256 is not available in libcrypto", subject);
  }
  *out = ctx;
  return 0;
}

static int finish(EVP_MD_CTX *ctx, const char *subject, char *hex, TpError *err) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  int ok = EVP_DigestFinal_ex(ctx, md, &len) == 1 && len * 2 == TP_DIGEST_SHA256_HEX;
  EVP_MD_CTX_free(ctx);
  if (!ok) {
    return tp_error_set(err, TP_EINVAL, "%s: SHA-256 finalisation failed", subject);
  }
  to_hex(md, len, hex);
  return 0;
}

int tp_digest_sha256(const void *data, size_t len, char hex[TP_DIGEST_SHA256_HEX + 1],
                     TpError *err) {
  EVP_MD_CTX *ctx = NULL;
  int rc = start(&ctx, "sha256", err);
  if (rc != 0) {
    return rc;
  }
  if (len > 0 && EVP_DigestUpdate(ctx, data, len) != 1) {
    EVP_MD_CTX_free(ctx);
    return tp_error_set(err, TP_EINVAL, "sha256: digest update failed");
  }
  return finish(ctx, "sha256", hex, err);
}

int tp_digest_sha256_file(const char *path, char hex[TP_DIGEST_SHA256_HEX + 1], uint64_t *size,
                          TpError *err) {
  struct stat st;
  int fd = tp_fs_open_read(path, &st, err);
  if (fd < 0) {
    return fd;
  }
  EVP_MD_CTX *ctx = NULL;
  int rc = start(&ctx, path, err);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  unsigned char buf[65536];
  uint64_t total = 0;
  for (;;) {
    ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      rc = tp_error_errno(err, "%s", path);
      EVP_MD_CTX_free(ctx);
      close(fd);
      return rc;
    }
    if (got == 0) {
      break;
    }
    if (EVP_DigestUpdate(ctx, buf, (size_t)got) != 1) {
      EVP_MD_CTX_free(ctx);
      close(fd);
      return tp_error_set(err, TP_EINVAL, "%s: digest update failed", path);
    }
    total += (uint64_t)got;
  }
  close(fd);
  if (size) {
    *size = total;
  }
  return finish(ctx, path, hex, err);
}

// --- Pipe -------------------------------------------------------------------------------------

#define PIPE_QUEUE 16

typedef struct PipeBlock {
  const void *data;
  size_t len;
} PipeBlock;

struct TpDigestPipe {
  EVP_MD_CTX *ctx;
  char subject[128];
  bool threaded;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;  // signalled when a block is queued, hashed, or the pipe stops
  PipeBlock queue[PIPE_QUEUE];
  uint64_t pushed;  // tickets handed out
  uint64_t hashed;  // blocks hashed (tickets 1..hashed are done)
  bool stop;
  bool failed;  // EVP_DigestUpdate failed
};

static void *pipe_main(void *arg) {
  TpDigestPipe *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->hashed == p->pushed && !p->stop) {
      pthread_cond_wait(&p->cv, &p->mu);
    }
    if (p->hashed == p->pushed) {
      break;
    }
    PipeBlock b = p->queue[p->hashed % PIPE_QUEUE];
    pthread_mutex_unlock(&p->mu);
    bool ok = b.len == 0 || EVP_DigestUpdate(p->ctx, b.data, b.len) == 1;
    pthread_mutex_lock(&p->mu);
    p->failed = p->failed || !ok;
    p->hashed++;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

TpDigestPipe *tp_digest_pipe_new(const char *subject, TpError *err) {
  TpDigestPipe *p = calloc(1, sizeof *p);
  if (!p) {
    tp_error_set(err, TP_ENOMEM, "%s: out of memory", subject);
    return NULL;
  }
  snprintf(p->subject, sizeof p->subject, "%s", subject);
  if (start(&p->ctx, subject, err) != 0) {
    free(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->threaded = pthread_create(&p->thread, NULL, pipe_main, p) == 0;
  return p;
}

uint64_t tp_digest_pipe_push(TpDigestPipe *p, const void *data, size_t len) {
  if (!p->threaded) {
    p->failed = p->failed || (len > 0 && EVP_DigestUpdate(p->ctx, data, len) != 1);
    p->hashed = ++p->pushed;
    return p->pushed;
  }
  pthread_mutex_lock(&p->mu);
  while (p->pushed - p->hashed >= PIPE_QUEUE) {
    pthread_cond_wait(&p->cv, &p->mu);
  }
  p->queue[p->pushed % PIPE_QUEUE] = (PipeBlock){data, len};
  uint64_t ticket = ++p->pushed;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return ticket;
}

void tp_digest_pipe_wait(TpDigestPipe *p, uint64_t ticket) {
  if (!p->threaded) {
    return;
  }
  pthread_mutex_lock(&p->mu);
  while (p->hashed < ticket) {
    pthread_cond_wait(&p->cv, &p->mu);
  }
  pthread_mutex_unlock(&p->mu);
}

// Lets the thread hash what was pushed, then ends it.
static void pipe_stop(TpDigestPipe *p) {
  if (p->threaded) {
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    p->threaded = false;
  }
}

int tp_digest_pipe_finish(TpDigestPipe *p, char hex[TP_DIGEST_SHA256_HEX + 1], TpError *err) {
  pipe_stop(p);
  int rc;
  if (p->failed) {
    EVP_MD_CTX_free(p->ctx);
    rc = tp_error_set(err, TP_EINVAL, "%s: digest update failed", p->subject);
  } else {
    rc = finish(p->ctx, p->subject, hex, err);
  }
  p->ctx = NULL;
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return rc;
}

void tp_digest_pipe_free(TpDigestPipe *p) {
  if (!p) {
    return;
  }
  pipe_stop(p);
  EVP_MD_CTX_free(p->ctx);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

// --- Follower -------------------------------------------------------------------------------

// Bytes read and hashed at a time by the follower's thread: large enough that the pread calls
// cost little, small enough to stay in the core's cache between the copy and the hash.
#define FOLLOW_BLOCK (256u << 10)

struct TpDigestFollow {
  EVP_MD_CTX *ctx;
  int fd;    // the follower's own descriptor (-1 when fed)
  bool fed;  // not a regular file: the reader's bytes are hashed in tp_digest_follow_advance
  char subject[200];
  bool threaded;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;   // signalled when the reader advances or ends, and when the digest is done
  uint64_t avail;      // bytes the reader has read
  bool ended;          // avail is final
  bool sleeping;       // the thread waits for the reader
  bool done;           // rc, err and hex are final
  atomic_bool stop;    // tp_digest_follow_free: give up at the next block
  uint64_t hashed;     // bytes hashed (the thread's, or the waiter's without a thread)
  bool shrank;         // the file ended before the bytes reported (rc set)
  uint64_t shrunk_to;  // then its size
  int rc;
  TpError err;
  char hex[TP_DIGEST_SHA256_HEX + 1];
  unsigned char *buf;  // FOLLOW_BLOCK bytes
};

// Reads and hashes [f->hashed, upto). @return 0, 1 when stopped, or an error (f->err filled).
static int follow_hash(TpDigestFollow *f, uint64_t upto) {
  while (f->hashed < upto) {
    if (atomic_load_explicit(&f->stop, memory_order_relaxed)) {
      return 1;
    }
    uint64_t left = upto - f->hashed;
    size_t want = left < FOLLOW_BLOCK ? (size_t)left : FOLLOW_BLOCK;
    ssize_t got = pread(f->fd, f->buf, want, (off_t)f->hashed);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      return tp_error_errno(&f->err, "%s", f->subject);
    }
    if (got == 0) {
      // The message names the bytes the reader reported in all: tp_digest_follow_wait writes it
      // once the reader has ended (the thread may see only part of them now).
      struct stat st;
      f->shrunk_to = fstat(f->fd, &st) == 0 && (uint64_t)st.st_size < f->hashed
                         ? (uint64_t)st.st_size
                         : f->hashed;
      f->shrank = true;
      return TP_EINVAL;
    }
    if (EVP_DigestUpdate(f->ctx, f->buf, (size_t)got) != 1) {
      return tp_error_set(&f->err, TP_EINVAL, "%s: digest update failed", f->subject);
    }
    f->hashed += (uint64_t)got;
  }
  return 0;
}

// Hashes what is left up to `total` and finalises: f->rc, f->err, f->hex (f->done not set).
static void follow_complete(TpDigestFollow *f, uint64_t total) {
  int rc = follow_hash(f, total);
  if (rc == 0) {
    rc = finish(f->ctx, f->subject, f->hex, &f->err);
    f->ctx = NULL;
  }
  f->rc = rc;
}

static void *follow_main(void *arg) {
  TpDigestFollow *f = arg;
  (void)pthread_setname_np(pthread_self(), "tplua-sha256");  // in ps and perf; best effort
  pthread_mutex_lock(&f->mu);
  for (;;) {
    while (f->hashed == f->avail && !f->ended && !atomic_load(&f->stop)) {
      f->sleeping = true;
      pthread_cond_wait(&f->cv, &f->mu);
      f->sleeping = false;
    }
    if (atomic_load(&f->stop)) {
      f->rc = 1;  // abandoned: tp_digest_follow_free
      pthread_mutex_unlock(&f->mu);
      break;
    }
    uint64_t upto = f->avail;
    bool last = f->ended;
    pthread_mutex_unlock(&f->mu);
    if (last) {
      follow_complete(f, upto);
      break;
    }
    int rc = follow_hash(f, upto);
    if (rc != 0) {
      f->rc = rc;
      break;
    }
    pthread_mutex_lock(&f->mu);
  }
  pthread_mutex_lock(&f->mu);
  f->done = true;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

TpDigestFollow *tp_digest_follow_new(int fd, const char *subject, TpError *err) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    tp_error_errno(err, "%s", subject);
    return NULL;
  }
  bool fed = !S_ISREG(st.st_mode);
  TpDigestFollow *f = calloc(1, sizeof *f);
  unsigned char *buf = fed ? NULL : malloc(FOLLOW_BLOCK);
  if (!f || (!fed && !buf)) {
    free(f);
    free(buf);
    tp_error_set(err, TP_ENOMEM, "%s: out of memory", subject);
    return NULL;
  }
  f->buf = buf;
  f->fed = fed;
  snprintf(f->subject, sizeof f->subject, "%s", subject);
  f->fd = fed ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (!fed && f->fd < 0) {
    tp_error_errno(err, "%s", subject);
    free(buf);
    free(f);
    return NULL;
  }
  if (start(&f->ctx, subject, err) != 0) {
    if (f->fd >= 0) {
      close(f->fd);
    }
    free(buf);
    free(f);
    return NULL;
  }
  atomic_init(&f->stop, false);
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  f->threaded = !fed && pthread_create(&f->thread, NULL, follow_main, f) == 0;
  return f;
}

void tp_digest_follow_advance(TpDigestFollow *f, const void *data, size_t len) {
  if (f->fed) {
    // f->hashed counts the bytes hashed; an update that failed stops the hashing (rc kept).
    if (f->rc == 0 && len > 0 && EVP_DigestUpdate(f->ctx, data, len) != 1) {
      f->rc = tp_error_set(&f->err, TP_EINVAL, "%s: digest update failed", f->subject);
    }
    f->hashed += len;
  }
  if (!f->threaded) {
    f->avail += len;
    return;
  }
  pthread_mutex_lock(&f->mu);
  f->avail += len;
  if (f->sleeping) {
    pthread_cond_signal(&f->cv);
  }
  pthread_mutex_unlock(&f->mu);
}

void tp_digest_follow_end(TpDigestFollow *f) {
  if (!f->threaded) {
    f->ended = true;
    return;
  }
  pthread_mutex_lock(&f->mu);
  f->ended = true;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

int tp_digest_follow_wait(TpDigestFollow *f, char hex[TP_DIGEST_SHA256_HEX + 1], TpError *err) {
  // The reader has stopped when the digest is asked for: without this, a waiter that did not
  // report the end would wait for ever.
  tp_digest_follow_end(f);
  if (f->threaded) {
    pthread_mutex_lock(&f->mu);
    while (!f->done) {
      pthread_cond_wait(&f->cv, &f->mu);
    }
    pthread_mutex_unlock(&f->mu);
  } else if (!f->done) {
    if (f->rc == 0) {
      follow_complete(f, f->avail);  // fed: everything is hashed, only the end is left
    }
    f->done = true;
  }
  if (f->shrank) {
    f->shrank = false;  // the message is written once; rc stays
    tp_error_set(&f->err, TP_EINVAL,
                 "%s: the file shrank while it was read (it ends at byte %llu, %llu bytes were "
                 "read)",
                 f->subject, (unsigned long long)f->shrunk_to, (unsigned long long)f->avail);
  }
  if (f->rc != 0) {
    if (err) {
      *err = f->err;
    }
    return f->rc;
  }
  memcpy(hex, f->hex, sizeof f->hex);
  return 0;
}

void tp_digest_follow_free(TpDigestFollow *f) {
  if (!f) {
    return;
  }
  if (f->threaded) {
    pthread_mutex_lock(&f->mu);
    atomic_store(&f->stop, true);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
  }
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  EVP_MD_CTX_free(f->ctx);
  if (f->fd >= 0) {
    close(f->fd);
  }
  free(f->buf);
  free(f);
}
