// File-system primitives the stdlib needs beyond ISO C: stat, mkdir -p, directory listing,
// glob and realpath.
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common.h"

typedef enum TpFsType {
  TP_FS_FILE,
  TP_FS_DIR,
  TP_FS_LINK,
  TP_FS_OTHER,
} TpFsType;

typedef struct TpFsStat {
  TpFsType type;
  int64_t size;
  int mode;      ///< permission bits
  double mtime;  ///< seconds since the epoch, with nanoseconds
} TpFsStat;

/// Fills `out` from what stat(2) / fstat(2) gave (the one conversion every caller shares).
void tp_fs_from_stat(const struct stat *s, TpFsStat *out);

/// Fills `st` for `path` (following symbolic links unless `nofollow`).
/// @return 0, or -errno with `err` filled ("<path>: <reason>").
int tp_fs_stat(const char *path, bool nofollow, TpFsStat *st, TpError *err);

/// The space of the file system holding `path`: bytes an unprivileged writer may still use
/// (statvfs f_bavail) and its size.
/// @return 0, or -errno with `err` filled ("<path>: <reason>").
int tp_fs_space(const char *path, uint64_t *avail, uint64_t *total, TpError *err);

/// Opens `path` for reading (O_RDONLY | O_CLOEXEC) and fstats it into `st`; a directory is refused
/// with -EISDIR ("<path>: Is a directory"), as are failures of open or fstat ("<path>:
/// <strerror>").
/// @return the descriptor (the caller closes it), or -errno (err filled).
int tp_fs_open_read(const char *path, struct stat *st, TpError *err);

/// Reads the whole file at `path` into a new buffer: `*out` (NUL-terminated after `*len` bytes;
/// the caller frees it) and, when `st` is not NULL, the stat of the descriptor that was read. A
/// regular file is read in one read(2) of its size; a stream (pipe, FIFO) grows the buffer as it
/// goes. More than `max` bytes fails with TP_ELIMIT ("<path>: file is N bytes, above max_size
/// (M bytes)", or "<path>: more than max_size (M bytes)" for a stream or a file that grew); a
/// directory with -EISDIR.
/// @return 0, -errno, TP_ELIMIT or TP_ENOMEM (err filled, *out NULL).
int tp_fs_read_file(const char *path, size_t max, char **out, size_t *len, TpFsStat *st,
                    TpError *err);

/// Creates `path` and any missing parents (like `mkdir -p`) with `mode` (e.g. 0755).
/// An existing directory is success; an existing non-directory is -EEXIST.
int tp_fs_mkdir_p(const char *path, int mode, TpError *err);

/// Calls `fn(name, type, ud)` for each entry of directory `path` except "." and "..", in
/// sorted order (bytewise). Returns 0, -errno, or TP_ENOMEM.
int tp_fs_list(const char *path, void (*fn)(const char *name, TpFsType type, void *ud), void *ud,
               TpError *err);

/// Calls `fn(path, ud)` for each path matching the shell pattern `pattern` (glob(3), sorted,
/// no match = no call). Returns 0, or a negative code for a read error.
int tp_fs_glob(const char *pattern, void (*fn)(const char *path, void *ud), void *ud, TpError *err);

/// Returns the canonical absolute path of `path` in a malloc'd string (caller frees), or NULL
/// with `err` filled.
char *tp_fs_realpath(const char *path, TpError *err);
