// Durable files: atomic replace (temp file, fsync, rename, fsync directory), whole or written as
// a stream, and an append-only, fsync'd journal of lines, so that a crash at any moment leaves
// either the old or the new file.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

/// Replaces `path` with `data` atomically: writes a temporary file in the same directory,
/// fsyncs it, renames it over `path`, then fsyncs the directory. On failure the temporary file
/// is removed and `path` is untouched. `mode` is the new file's permission bits (e.g. 0644).
/// @return 0, TP_ENOMEM or -errno (err filled).
int tp_store_write_atomic(const char *path, const void *data, size_t len, int mode, TpError *err);

// A file written as a stream and put in place atomically: the bytes go to a temporary file in
// the target's directory, which is fsynced and renamed over the target only once everything was
// written (then the directory is fsynced). Until that commit the target is untouched; any failure
// removes the temporary file.

/// Bytes gathered before they are handed to write(2).
#define TP_STORE_FILE_FLUSH (1u << 20)

typedef struct TpStoreFile {
  int fd;          ///< temporary file, -1 when closed
  char *path;      ///< target path
  char *tmp;       ///< temporary path (NULL once renamed or removed)
  TpBuf buf;       ///< pending bytes; callers may append to it and then call tp_store_file_pump
  int failed;      ///< sticky error code of a failed write (0: none)
  bool committed;  ///< the file was renamed into place
} TpStoreFile;

/// Creates the temporary file "<path>.tmp.XXXXXX" with permission bits `mode`.
/// @return 0 or -errno (err names `path`); on failure `f` needs no abort.
int tp_store_file_open(TpStoreFile *f, const char *path, int mode, TpError *err);

/// Appends `n` bytes (written out whenever TP_STORE_FILE_FLUSH bytes are pending).
/// @return 0, TP_ENOMEM or -errno of the failed write (err filled); the failure is sticky.
int tp_store_file_write(TpStoreFile *f, const void *p, size_t n, TpError *err);

/// Writes out the pending bytes of `buf` when there are at least TP_STORE_FILE_FLUSH of them
/// (for callers that append to `buf` directly). @return as tp_store_file_write.
int tp_store_file_pump(TpStoreFile *f, TpError *err);

/// Writes what is pending, fsyncs and closes the temporary file, renames it over the target and
/// fsyncs the directory. On failure the temporary file is removed and the target is untouched.
/// @return 0 or -errno / TP_ENOMEM (err filled). The object is then only fit for abort.
int tp_store_file_commit(TpStoreFile *f, TpError *err);

/// Closes and removes the temporary file unless committed, and frees the object's memory.
/// Idempotent; safe after a failed open (when `f` was zeroed first) and after commit.
void tp_store_file_abort(TpStoreFile *f);

/// Appends one line (a '\n' is added) to the journal at `path` with a single write(2) on an
/// O_APPEND descriptor and fsyncs it; creates the file (and fsyncs its directory) when new.
/// `line` must not contain '\n'. A crash can leave at most a partial last line, which readers
/// skip (a journal line is complete only when it ends with a newline).
/// @return 0, TP_EINVAL for an embedded newline, or -errno (err filled).
int tp_store_append_line(const char *path, const char *line, size_t len, TpError *err);

/// Fsyncs the directory that contains `path` (so a create or rename in it is durable).
int tp_store_sync_parent(const char *path, TpError *err);
