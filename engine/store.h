// Durable files: atomic replace (temp file, fsync, rename, fsync directory) and an append-only,
// fsync'd journal of lines, so that a crash at any moment leaves either the old or the new file.
#pragma once

#include <stddef.h>

#include "common.h"

/// Replaces `path` with `data` atomically: writes a temporary file in the same directory,
/// fsyncs it, renames it over `path`, then fsyncs the directory. On failure the temporary file
/// is removed and `path` is untouched. `mode` is the new file's permission bits (e.g. 0644).
/// @return 0 or -errno (err filled).
int tp_store_write_atomic(const char *path, const void *data, size_t len, int mode, TpError *err);

/// Appends one line (a '\n' is added) to the journal at `path` with a single write(2) on an
/// O_APPEND descriptor and fsyncs it; creates the file (and fsyncs its directory) when new.
/// `line` must not contain '\n'. A crash can leave at most a partial last line, which readers
/// skip (a journal line is complete only when it ends with a newline).
/// @return 0, TP_EINVAL for an embedded newline, or -errno (err filled).
int tp_store_append_line(const char *path, const char *line, size_t len, TpError *err);

/// Fsyncs the directory that contains `path` (so a create or rename in it is durable).
int tp_store_sync_parent(const char *path, TpError *err);
