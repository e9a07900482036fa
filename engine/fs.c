// File-system primitives: stat, whole-file read, mkdir -p, sorted directory listing, glob,
// realpath.
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static TpFsType mode_type(mode_t m) {
  if (S_ISREG(m)) {
    return TP_FS_FILE;
  }
  if (S_ISDIR(m)) {
    return TP_FS_DIR;
  }
  if (S_ISLNK(m)) {
    return TP_FS_LINK;
  }
  return TP_FS_OTHER;
}

void tp_fs_from_stat(const struct stat *s, TpFsStat *out) {
  out->type = mode_type(s->st_mode);
  out->size = (int64_t)s->st_size;
  out->mode = (int)(s->st_mode & 07777);
  out->mtime = (double)s->st_mtim.tv_sec + (double)s->st_mtim.tv_nsec * 1e-9;
}

int tp_fs_stat(const char *path, bool nofollow, TpFsStat *st, TpError *err) {
  struct stat s;
  if ((nofollow ? lstat(path, &s) : stat(path, &s)) != 0) {
    return tp_error_errno(err, "%s", path);
  }
  tp_fs_from_stat(&s, st);
  return 0;
}

int tp_fs_space(const char *path, uint64_t *avail, uint64_t *total, TpError *err) {
  struct statvfs v;
  if (statvfs(path, &v) != 0) {
    return tp_error_errno(err, "%s", path);
  }
  uint64_t unit = v.f_frsize ? (uint64_t)v.f_frsize : (uint64_t)v.f_bsize;
  *avail = (uint64_t)v.f_bavail * unit;
  *total = (uint64_t)v.f_blocks * unit;
  return 0;
}

int tp_fs_open_read(const char *path, struct stat *st, TpError *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return tp_error_errno(err, "%s", path);
  }
  if (fstat(fd, st) != 0) {
    int rc = tp_error_errno(err, "%s", path);
    close(fd);
    return rc;
  }
  if (S_ISDIR(st->st_mode)) {
    close(fd);
    errno = EISDIR;
    return tp_error_errno(err, "%s", path);
  }
  return fd;
}

int tp_fs_read_file(const char *path, size_t max, char **out, size_t *len, TpFsStat *st,
                    TpError *err) {
  *out = NULL;
  *len = 0;
  struct stat s;
  int fd = tp_fs_open_read(path, &s, err);
  if (fd < 0) {
    return fd;
  }
  bool regular = S_ISREG(s.st_mode);
  if (regular && (uint64_t)s.st_size > (uint64_t)max) {
    close(fd);
    return tp_error_set(err, TP_ELIMIT, "%s: file is %lld bytes, above max_size (%llu bytes)", path,
                        (long long)s.st_size, (unsigned long long)max);
  }
  // A regular file: one buffer of its size, +1 to see the end without growing it.
  size_t cap = regular ? (size_t)s.st_size + 2 : 65536, n = 0;
  char *buf = malloc(cap);
  int rc = 0;
  for (;;) {
    if (!buf) {
      rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
      break;
    }
    if (cap - n < 2) {
      char *bigger = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (!bigger) {
        rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      rc = tp_error_errno(err, "%s", path);
      break;
    }
    if (r == 0) {
      break;
    }
    n += (size_t)r;
    if (n > max) {
      rc = tp_error_set(err, TP_ELIMIT, "%s: more than max_size (%llu bytes)", path,
                        (unsigned long long)max);
      break;
    }
  }
  close(fd);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  if (st) {
    tp_fs_from_stat(&s, st);
  }
  return 0;
}

int tp_fs_mkdir_p(const char *path, int mode, TpError *err) {
  size_t n = strlen(path);
  if (n == 0) {
    return tp_error_set(err, -ENOENT, "mkdir: empty path");
  }
  if (n >= PATH_MAX) {
    return tp_error_set(err, -ENAMETOOLONG, "%s: path too long", path);
  }
  char buf[PATH_MAX];
  memcpy(buf, path, n + 1);
  for (char *p = buf + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char saved = *p;
      *p = '\0';
      if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST) {
        return tp_error_errno(err, "%s", buf);
      }
      *p = saved;
      if (saved == '\0') {
        break;
      }
    }
  }
  struct stat s;
  if (stat(path, &s) != 0) {
    return tp_error_errno(err, "%s", path);
  }
  if (!S_ISDIR(s.st_mode)) {
    return tp_error_set(err, -EEXIST, "%s: exists and is not a directory", path);
  }
  return 0;
}

typedef struct Entry {
  char *name;
  TpFsType type;
} Entry;

static int entry_cmp(const void *a, const void *b) {
  return strcmp(((const Entry *)a)->name, ((const Entry *)b)->name);
}

int tp_fs_list(const char *path, void (*fn)(const char *name, TpFsType type, void *ud), void *ud,
               TpError *err) {
  DIR *d = opendir(path);
  if (!d) {
    return tp_error_errno(err, "%s", path);
  }
  Entry *items = NULL;
  size_t count = 0, cap = 0;
  int rc = 0;
  struct dirent *e;
  errno = 0;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
      continue;
    }
    if (count == cap) {
      size_t ncap = cap ? cap * 2 : 32;
      Entry *p = realloc(items, ncap * sizeof *p);
      if (!p) {
        rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
        break;
      }
      items = p;
      cap = ncap;
    }
    TpFsType type = TP_FS_OTHER;
    switch (e->d_type) {
      case DT_REG:
        type = TP_FS_FILE;
        break;
      case DT_DIR:
        type = TP_FS_DIR;
        break;
      case DT_LNK:
        type = TP_FS_LINK;
        break;
      default: {
        // DT_UNKNOWN on some file systems: ask stat
        struct stat s;
        char full[PATH_MAX];
        int n = snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (n > 0 && (size_t)n < sizeof full && lstat(full, &s) == 0) {
          type = mode_type(s.st_mode);
        }
        break;
      }
    }
    items[count].name = strdup(e->d_name);
    if (!items[count].name) {
      rc = tp_error_set(err, TP_ENOMEM, "%s: out of memory", path);
      break;
    }
    items[count].type = type;
    count++;
    errno = 0;
  }
  if (rc == 0 && errno != 0) {
    rc = tp_error_errno(err, "%s", path);
  }
  closedir(d);
  if (rc == 0 && count > 0) {
    qsort(items, count, sizeof *items, entry_cmp);
    for (size_t i = 0; i < count; i++) {
      fn(items[i].name, items[i].type, ud);
    }
  }
  for (size_t i = 0; i < count; i++) {
    free(items[i].name);
  }
  free(items);
  return rc;
}

int tp_fs_glob(const char *pattern, void (*fn)(const char *path, void *ud), void *ud,
               TpError *err) {
  glob_t g;
  memset(&g, 0, sizeof g);
  int rc = glob(pattern, 0, NULL, &g);
  if (rc == GLOB_NOMATCH) {
    globfree(&g);
    return 0;
  }
  if (rc == GLOB_NOSPACE) {
    globfree(&g);
    return tp_error_set(err, TP_ENOMEM, "%s: out of memory", pattern);
  }
  if (rc != 0) {
    globfree(&g);
    return tp_error_set(err, -EIO, "%s: read error while matching", pattern);
  }
  for (size_t i = 0; i < g.gl_pathc; i++) {
    fn(g.gl_pathv[i], ud);
  }
  globfree(&g);
  return 0;
}

char *tp_fs_realpath(const char *path, TpError *err) {
  char *r = realpath(path, NULL);
  if (!r) {
    tp_error_errno(err, "%s", path);
  }
  return r;
}
