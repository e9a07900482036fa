// A file written as a stream and put in place atomically: the bytes go to a temporary file in
// the target's directory, which is fsynced and renamed over the target only once everything was
// written (then the directory is fsynced). Until that commit the target is untouched; any failure
// removes the temporary file. The streaming counterpart of tp_store_write_atomic (store.h).
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

/// Bytes gathered before they are handed to write(2).
#define TP_ATOMICFILE_FLUSH (1u << 20)

typedef struct TpAtomicFile {
  int fd;          ///< temporary file, -1 when closed
  char *path;      ///< target path
  char *tmp;       ///< temporary path (NULL once renamed or removed)
  TpBuf buf;       ///< pending bytes; callers may append to it and then call tp_atomicfile_pump
  int failed;      ///< sticky error code of a failed write (0: none)
  bool committed;  ///< the file was renamed into place
} TpAtomicFile;

/// Creates the temporary file "<path>.tmp.XXXXXX" with permission bits `mode`.
/// @return 0 or -errno (err names `path`); on failure `f` needs no abort.
int tp_atomicfile_open(TpAtomicFile *f, const char *path, int mode, TpError *err);

/// Appends `n` bytes (written out whenever TP_ATOMICFILE_FLUSH bytes are pending).
/// @return 0, TP_ENOMEM or -errno of the failed write (err filled); the failure is sticky.
int tp_atomicfile_write(TpAtomicFile *f, const void *p, size_t n, TpError *err);

/// Writes out the pending bytes of `buf` when there are at least TP_ATOMICFILE_FLUSH of them
/// (for callers that append to `buf` directly). @return as tp_atomicfile_write.
int tp_atomicfile_pump(TpAtomicFile *f, TpError *err);

/// Writes what is pending, fsyncs and closes the temporary file, renames it over the target and
/// fsyncs the directory. On failure the temporary file is removed and the target is untouched.
/// @return 0 or -errno / TP_ENOMEM (err filled). The object is then only fit for abort.
int tp_atomicfile_commit(TpAtomicFile *f, TpError *err);

/// Closes and removes the temporary file unless committed, and frees the object's memory.
/// Idempotent; safe after a failed open (when `f` was zeroed first) and after commit.
void tp_atomicfile_abort(TpAtomicFile *f);
