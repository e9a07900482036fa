// Durable files: atomic replace and an append-only fsync'd journal.
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

int tp_store_write_atomic(const char *path, const void *data, size_t len, int mode, TpError *err) {
  char tmp[PATH_MAX];
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  if (n < 0 || (size_t)n >= sizeof tmp) {
    return tp_error_set(err, -ENAMETOOLONG, "%s: path too long", path);
  }
  int fd = mkstemp(tmp);
  if (fd < 0) {
    return tp_error_errno(err, "%s: cannot create temporary file", path);
  }
  int rc = 0;
  if (fchmod(fd, (mode_t)(mode & 07777)) != 0) {
    rc = tp_error_errno(err, "%s: chmod", tmp);
  } else if (write_all(fd, data, len) != 0) {
    rc = tp_error_errno(err, "%s: write", path);
  } else if (fsync(fd) != 0) {
    rc = tp_error_errno(err, "%s: fsync", path);
  }
  if (close(fd) != 0 && rc == 0) {
    rc = tp_error_errno(err, "%s: close", path);
  }
  if (rc == 0 && rename(tmp, path) != 0) {
    rc = tp_error_errno(err, "%s: rename", path);
  }
  if (rc != 0) {
    unlink(tmp);
    return rc;
  }
  return tp_store_sync_parent(path, err);
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
