// Durable files: atomic replace and an append-only fsync'd journal. The replace is mkstemp(3) in
// the target's directory, write(2), fsync(2), rename(2) (atomic within one file system,
// POSIX.1-2017 rename), then fsync of the directory.
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int tp_store_sync_parent(const char *path, TpError *err) {
  char copy[PATH_MAX];
  if (strlen(path) >= sizeof copy) {
    return tp_error_set(err, -ENAMETOOLONG, "%s: path too long", path);
  }
  strcpy(copy, path);
  const char *dir = dirname(copy);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return tp_error_errno(err, "%s", dir);
  }
  int rc = 0;
  if (fsync(fd) != 0 && errno != EINVAL) {  // some file systems cannot fsync directories
    rc = tp_error_errno(err, "%s: fsync", dir);
  }
  close(fd);
  return rc;
}

// --- Streamed atomic file ------------------------------------------------------------------------

int tp_store_file_open(TpStoreFile *f, const char *path, int mode, TpError *err) {
  memset(f, 0, sizeof *f);
  f->fd = -1;
  size_t len = strlen(path);
  f->path = malloc(len + 1);
  f->tmp = malloc(len + sizeof ".tmp.XXXXXX");
  if (!f->path || !f->tmp) {
    tp_store_file_abort(f);
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
    tp_store_file_abort(f);
    return rc;
  }
  if (fchmod(f->fd, (mode_t)(mode & 07777)) != 0) {
    int rc = tp_error_errno(err, "%s: chmod", f->tmp);
    tp_store_file_abort(f);
    return rc;
  }
  return 0;
}

static int file_fail(TpStoreFile *f, TpError *err) {
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
// Writes the pending bytes, then n bytes at p (which may be 0 of them).
static int file_flush(TpStoreFile *f, const void *p, size_t n, TpError *err) {
  if (f->failed) {
    return file_fail(f, err);
  }
  if (write_all(f->fd, f->buf.data, f->buf.len) != 0 || write_all(f->fd, p, n) != 0) {
    f->failed = -errno;
    return file_fail(f, err);
  }
  f->buf.len = 0;
  return 0;
}

int tp_store_file_pump(TpStoreFile *f, TpError *err) {
  if (f->failed) {
    return file_fail(f, err);
  }
  return f->buf.len >= TP_STORE_FILE_FLUSH ? file_flush(f, NULL, 0, err) : 0;
}

int tp_store_file_write(TpStoreFile *f, const void *p, size_t n, TpError *err) {
  if (f->failed) {
    return file_fail(f, err);
  }
  if (f->buf.len + n >= TP_STORE_FILE_FLUSH) {  // large: written from where it is, not copied
    return file_flush(f, p, n, err);
  }
  if (tp_buf_append(&f->buf, p, n) != 0) {
    f->failed = TP_ENOMEM;
    return file_fail(f, err);
  }
  return 0;
}

int tp_store_file_commit(TpStoreFile *f, TpError *err) {
  if (f->fd < 0 || !f->tmp) {
    return tp_error_set(err, TP_EINVAL, "%s: file already closed", f->path ? f->path : "?");
  }
  int rc = file_flush(f, NULL, 0, err);
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

void tp_store_file_abort(TpStoreFile *f) {
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

int tp_store_write_atomic(const char *path, const void *data, size_t len, int mode, TpError *err) {
  TpStoreFile f;
  int rc = tp_store_file_open(&f, path, mode, err);
  if (rc == 0) {
    rc = tp_store_file_write(&f, data, len, err);
  }
  if (rc == 0) {
    rc = tp_store_file_commit(&f, err);
  }
  tp_store_file_abort(&f);
  return rc;
}

int tp_store_append_line(const char *path, const char *line, size_t len, TpError *err) {
  if (memchr(line, '\n', len)) {
    return tp_error_set(err, TP_EINVAL, "%s: journal line contains a newline", path);
  }
  struct stat st;
  int existed = stat(path, &st) == 0;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return tp_error_errno(err, "%s", path);
  }
  char *buf = malloc(len + 1);
  if (!buf) {
    close(fd);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
  }
  memcpy(buf, line, len);
  buf[len] = '\n';
  int rc = 0;
  if (write_all(fd, buf, len + 1) != 0) {
    rc = tp_error_errno(err, "%s: write", path);
  } else if (fsync(fd) != 0) {
    rc = tp_error_errno(err, "%s: fsync", path);
  }
  free(buf);
  if (close(fd) != 0 && rc == 0) {
    rc = tp_error_errno(err, "%s: close", path);
  }
  if (rc == 0 && !existed) {
    rc = tp_store_sync_parent(path, err);
  }
  return rc;
}
