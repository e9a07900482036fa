// The bytes of a trace: plain or gzip (zlib's inflate with windowBits 15+16 reads the gzip
// wrapper, zlib.h; concatenated members are read one after another, as gzip -d does), from
// memory or from a file read and inflated on a second thread (POSIX threads) so that inflating
// and parsing share the two cores.
#include "trace_src.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum {
  CHUNK = 1 << 20,  // bytes of uncompressed data handed over at a time
  SLOTS = 4,        // chunks in flight between the reader thread and the parser
  INBUF = 1 << 18,  // compressed bytes read at a time
};

// Inflates gzip data pushed in pieces. `in` is owned by the caller.
typedef struct Inflater {
  z_stream z;
  bool active, ended;  // ended: the last member's end was seen and no data followed
  uint64_t in_total;
} Inflater;

struct TpTraceSrc {
  char *label;
  bool compressed, truncated;
  // memory source
  const unsigned char *mem;
  size_t mem_len, mem_pos;
  Inflater inf;
  unsigned char *out;  // memory gzip: the output chunk
  // file source: the reader thread fills slots in order; the parser takes them in order
  int fd;
  bool threaded;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned char *slot[SLOTS];
  size_t slot_len[SLOTS];
  bool slot_full[SLOTS];
  int next_read;    // slot the parser takes next
  int held;         // slot the parser holds (-1: none)
  bool done, stop;  // done: the thread has queued its last slot; stop: the parser is gone
  int rc;           // the thread's error (0: none)
  char msg[256];
  uint64_t in_queued;  // compressed bytes inflated into the chunks queued so far (under mu)
  // a peeked first chunk, handed out again by the next tp_trace_src_next
  bool replay;
  int replay_rc;
  const unsigned char *replay_p;
  size_t replay_n;
};

static int set_err(TpError *err, const TpTraceSrc *s, int code, const char *why) {
  return tp_error_set(err, code, "%s: %s", s->label, why);
}

static int inflater_start(Inflater *f) {
  memset(&f->z, 0, sizeof(f->z));
  if (inflateInit2(&f->z, 15 + 16) != Z_OK) {
    return TP_ENOMEM;
  }
  f->active = true;
  return 0;
}

// Inflates from (*in, *in_len) into out[0, cap); returns bytes written (0 with *need_more when
// the input is used up), or a negative code with `why` filled.
static long inflater_run(Inflater *f, const unsigned char **in, size_t *in_len, unsigned char *out,
                         size_t cap, bool *need_more, char *why, size_t why_len) {
  *need_more = false;
  size_t produced = 0;
  while (produced < cap) {
    if (f->ended) {
      // Bytes after a member's end: another member, or zero padding (gzip -d ignores those).
      while (*in_len > 0 && **in == 0) {
        (*in)++;
        (*in_len)--;
      }
      if (*in_len == 0) {
        *need_more = true;
        return (long)produced;
      }
      if (inflateReset(&f->z) != Z_OK) {
        snprintf(why, why_len, "gzip: cannot restart the inflater");
        return TP_EPARSE;
      }
      f->ended = false;
    }
    if (*in_len == 0) {
      *need_more = true;
      return (long)produced;
    }
    f->z.next_in = (unsigned char *)*in;
    f->z.avail_in = (uInt)(*in_len > UINT32_MAX ? UINT32_MAX : *in_len);
    f->z.next_out = out + produced;
    f->z.avail_out = (uInt)(cap - produced);
    uInt before_in = f->z.avail_in;
    uInt before_out = f->z.avail_out;
    int zr = inflate(&f->z, Z_NO_FLUSH);
    size_t used = before_in - f->z.avail_in;
    *in += used;
    *in_len -= used;
    f->in_total += used;
    produced += before_out - f->z.avail_out;
    if (zr == Z_STREAM_END) {
      f->ended = true;
      continue;
    }
    if (zr == Z_OK) {
      continue;
    }
    if (zr == Z_BUF_ERROR) {  // no progress possible: needs input
      *need_more = true;
      return (long)produced;
    }
    snprintf(why, why_len, "gzip: %s at compressed byte %llu",
             f->z.msg ? f->z.msg : (zr == Z_MEM_ERROR ? "out of memory" : "damaged data"),
             (unsigned long long)f->in_total);
    return zr == Z_MEM_ERROR ? TP_ENOMEM : TP_EPARSE;
  }
  return (long)produced;
}

static bool is_gzip(const unsigned char *p, size_t n) {
  return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

static TpTraceSrc *src_new(const char *label) {
  TpTraceSrc *s = calloc(1, sizeof(*s));
  if (!s) {
    return NULL;
  }
  s->label = strdup(label);
  if (!s->label) {
    free(s);
    return NULL;
  }
  s->fd = -1;
  s->held = -1;
  return s;
}

int tp_trace_src_mem(const char *label, const void *data, size_t n, TpTraceSrc **out,
                     TpError *err) {
  TpTraceSrc *s = src_new(label);
  if (!s) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", label);
  }
  s->mem = data;
  s->mem_len = n;
  if (is_gzip(data, n)) {
    s->compressed = true;
    s->out = malloc(CHUNK);
    if (!s->out || inflater_start(&s->inf) != 0) {
      tp_trace_src_free(s);
      return tp_error_set(err, TP_ENOMEM, "%s: out of memory", label);
    }
  }
  *out = s;
  return 0;
}

// The reader thread: reads the file, inflates it when gzip, and queues uncompressed chunks.
static void *reader_main(void *arg) {
  TpTraceSrc *s = arg;
  unsigned char *in = malloc(INBUF);
  const unsigned char *in_p = NULL;
  size_t in_len = 0;
  bool at_eof = false, first = true;
  int rc = 0;
  char why[256] = "";
  int w = 0;  // the slot this thread fills next
  while (!rc) {
    // wait for an empty slot
    pthread_mutex_lock(&s->mu);
    while (s->slot_full[w] && !s->stop) {
      pthread_cond_wait(&s->cv, &s->mu);
    }
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    if (stop) {
      break;
    }
    if (!in) {
      rc = TP_ENOMEM;
      snprintf(why, sizeof(why), "out of memory");
      break;
    }
    unsigned char *dst = s->slot[w];
    size_t len = 0;
    while (len < CHUNK) {
      if (in_len == 0 && !at_eof) {
        ssize_t r = read(s->fd, in, INBUF);
        if (r < 0) {
          if (errno == EINTR) {
            continue;
          }
          rc = -errno;
          snprintf(why, sizeof(why), "read: %s", strerror(errno));
          break;
        }
        if (r == 0) {
          at_eof = true;
        }
        in_p = in;
        in_len = (size_t)r;
        if (first && r > 0) {
          first = false;
          if (is_gzip(in, (size_t)r)) {
            s->compressed = true;
            if (inflater_start(&s->inf) != 0) {
              rc = TP_ENOMEM;
              snprintf(why, sizeof(why), "out of memory");
              break;
            }
          }
        }
      }
      if (in_len == 0 && at_eof) {
        if (s->compressed && !s->inf.ended) {
          s->truncated = true;  // the gzip stream stopped inside a member
        }
        break;
      }
      if (!s->compressed) {
        size_t take = in_len < CHUNK - len ? in_len : CHUNK - len;
        memcpy(dst + len, in_p, take);
        in_p += take;
        in_len -= take;
        len += take;
        continue;
      }
      bool need_more = false;
      long got = inflater_run(&s->inf, &in_p, &in_len, dst + len, CHUNK - len, &need_more, why,
                              sizeof(why));
      if (got < 0) {
        rc = (int)got;
        break;
      }
      len += (size_t)got;
    }
    bool last = rc != 0 || (in_len == 0 && at_eof);
    pthread_mutex_lock(&s->mu);
    s->in_queued = s->compressed ? s->inf.in_total : 0;
    if (len > 0) {
      s->slot_len[w] = len;
      s->slot_full[w] = true;
      w = (w + 1) % SLOTS;
    }
    if (last) {
      s->done = true;
      s->rc = rc;
      snprintf(s->msg, sizeof(s->msg), "%s", why);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (last) {
      break;
    }
  }
  pthread_mutex_lock(&s->mu);  // stopped by the parser, or failed before queueing anything
  if (!s->done) {
    s->done = true;
    s->rc = rc;
    snprintf(s->msg, sizeof(s->msg), "%s", why);
  }
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  free(in);
  return NULL;
}

int tp_trace_src_file(const char *path, TpTraceSrc **out, TpError *err) {
  TpTraceSrc *s = src_new(path);
  if (!s) {
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
  }
  s->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (s->fd < 0) {
    int rc = tp_error_errno(err, "%s", path);
    tp_trace_src_free(s);
    return rc;
  }
  for (int i = 0; i < SLOTS; i++) {
    s->slot[i] = malloc(CHUNK);
    if (!s->slot[i]) {
      tp_trace_src_free(s);
      return tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
    }
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (pthread_create(&s->thread, NULL, reader_main, s) != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    tp_trace_src_free(s);
    return tp_error_set(err, TP_ENOMEM, "%s: cannot start the reader thread", path);
  }
  s->threaded = true;
  *out = s;
  return 0;
}

int tp_trace_src_next(TpTraceSrc *s, const unsigned char **p, size_t *n, TpError *err) {
  if (s->replay) {
    s->replay = false;
    *p = s->replay_p;
    *n = s->replay_n;
    return s->replay_rc;
  }
  if (!s->threaded) {
    if (!s->compressed) {
      if (s->mem_pos >= s->mem_len) {
        return 0;
      }
      *p = s->mem + s->mem_pos;
      *n = s->mem_len - s->mem_pos;
      s->mem_pos = s->mem_len;
      return 1;
    }
    const unsigned char *in = s->mem + s->mem_pos;
    size_t in_len = s->mem_len - s->mem_pos;
    bool need_more = false;
    char why[256] = "";
    long got = inflater_run(&s->inf, &in, &in_len, s->out, CHUNK, &need_more, why, sizeof(why));
    s->mem_pos = s->mem_len - in_len;
    if (got < 0) {
      return set_err(err, s, (int)got, why);
    }
    if (got == 0) {
      if (!s->inf.ended) {
        s->truncated = true;
      }
      return 0;
    }
    *p = s->out;
    *n = (size_t)got;
    return 1;
  }
  pthread_mutex_lock(&s->mu);
  if (s->held >= 0) {  // hand the previous chunk back
    s->slot_full[s->held] = false;
    s->held = -1;
    pthread_cond_broadcast(&s->cv);
  }
  while (!s->slot_full[s->next_read] && !s->done) {
    pthread_cond_wait(&s->cv, &s->mu);
  }
  int rc = 0;
  if (s->slot_full[s->next_read]) {
    s->held = s->next_read;
    s->next_read = (s->next_read + 1) % SLOTS;
    *p = s->slot[s->held];
    *n = s->slot_len[s->held];
    rc = 1;
  } else if (s->rc != 0) {
    rc = set_err(err, s, s->rc, s->msg);
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int tp_trace_src_peek(TpTraceSrc *s, const unsigned char **p, size_t *n, TpError *err) {
  *p = NULL;
  *n = 0;
  int rc = tp_trace_src_next(s, p, n, err);
  if (rc >= 0) {  // an error is not replayed: the reader gives up on it
    s->replay = true;
    s->replay_rc = rc;
    s->replay_p = *p;
    s->replay_n = *n;
  }
  return rc;
}

const char *tp_trace_src_label(const TpTraceSrc *s) {
  return s->label;
}

bool tp_trace_src_compressed(const TpTraceSrc *s) {
  return s->compressed;
}

bool tp_trace_src_truncated(const TpTraceSrc *s) {
  return s->truncated;
}

uint64_t tp_trace_src_compressed_offset(TpTraceSrc *s) {
  if (!s->compressed) {
    return 0;
  }
  if (!s->threaded) {
    return s->inf.in_total;
  }
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->in_queued;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void tp_trace_src_free(TpTraceSrc *s) {
  if (!s) {
    return;
  }
  if (s->threaded) {
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
  }
  if (s->inf.active) {
    inflateEnd(&s->inf.z);
  }
  if (s->fd >= 0) {
    close(s->fd);
  }
  for (int i = 0; i < SLOTS; i++) {
    free(s->slot[i]);
  }
  free(s->out);
  free(s->label);
  free(s);
}
