// Streamed atomic replace: mkstemp(3) in the target's directory, write(2), fsync(2), rename(2)
// (atomic within one file system, POSIX.1-2017 rename), then fsync of the directory.
#include "atomicfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"

int tp_atomicfile_open(TpAtomicFile *f, const char *path, int mode, TpError *err) {
  memset(f, 0, sizeof *f);
  f->fd = -1;
  size_t len = strlen(path);
  f->path = malloc(len + 1);
  f->tmp = malloc(len + sizeof ".tmp.XXXXXX");
  if (!f->path || !f->tmp) {
    tp_atomicfile_abort(f);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
  }
  memcpy(f->path, path, len + 1);
  memcpy(f->tmp, path, len);
  memcpy(f->tmp + len, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
  f->fd = mkstemp(f->tmp);
  if (f->fd < 0) {
    int rc = tp_error_errno(err, "%s: cannot create temporary file", path);
    free(f->tmp);
    f->tmp = NULL;
    tp_atomicfile_abort(f);
    return rc;
  }
  if (fchmod(f->fd, (mode_t)(mode & 07777)) != 0) {
    int rc = tp_error_errno(err, "%s: chmod", f->tmp);
    tp_atomicfile_abort(f);
    return rc;
  }
  return 0;
}

static int fail(TpAtomicFile *f, TpError *err) {
  if (err) {
    if (f->failed == TP_ENOMEM) {
      tp_error_set(err, TP_ENOMEM, "%s: out of memory", f->path);
    } else {
      errno = -f->failed;
      tp_error_errno(err, "%s: write", f->path);
    }
  }
  return f->failed;
}

// Writes out all pending bytes.
static int flush(TpAtomicFile *f, TpError *err) {
  if (f->failed) {
    return fail(f, err);
  }
  const char *p = f->buf.data;
  size_t n = f->buf.len;
  while (n > 0) {
    ssize_t w = write(f->fd, p, n);
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      f->failed = -errno;
      return fail(f, err);
    }
    p += w;
    n -= (size_t)w;
  }
  f->buf.len = 0;
  return 0;
}

int tp_atomicfile_pump(TpAtomicFile *f, TpError *err) {
  if (f->failed) {
    return fail(f, err);
  }
  return f->buf.len >= TP_ATOMICFILE_FLUSH ? flush(f, err) : 0;
}

int tp_atomicfile_write(TpAtomicFile *f, const void *p, size_t n, TpError *err) {
  if (f->failed) {
    return fail(f, err);
  }
  if (tp_buf_append(&f->buf, p, n) != 0) {
    f->failed = TP_ENOMEM;
    return fail(f, err);
  }
  return tp_atomicfile_pump(f, err);
}

int tp_atomicfile_commit(TpAtomicFile *f, TpError *err) {
  if (f->fd < 0 || !f->tmp) {
    return tp_error_set(err, TP_EINVAL, "%s: file already closed", f->path ? f->path : "?");
  }
  int rc = flush(f, err);
  if (rc == 0 && fsync(f->fd) != 0) {
    rc = tp_error_errno(err, "%s: fsync", f->path);
  }
  int fd = f->fd;
  f->fd = -1;
  if (close(fd) != 0 && rc == 0) {
    rc = tp_error_errno(err, "%s: close", f->path);
  }
  if (rc == 0 && rename(f->tmp, f->path) != 0) {
    rc = tp_error_errno(err, "%s: rename", f->path);
  }
  if (rc != 0) {
    if (f->failed == 0) {
      f->failed = rc;
    }
    unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
    return rc;
  }
  free(f->tmp);
  f->tmp = NULL;
  f->committed = true;
  return tp_store_sync_parent(f->path, err);
}

void tp_atomicfile_abort(TpAtomicFile *f) {
  if (f->fd >= 0) {
    close(f->fd);
    f->fd = -1;
  }
  if (f->tmp) {
    unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
  }
  free(f->path);
  f->path = NULL;
  tp_buf_free(&f->buf);
}
