// The bytes of a trace, chunk by chunk: a file or a memory block, plain or gzip (recognised by its
// magic bytes, RFC 1952 §2.3.1), inflated by zlib; a file is read and inflated on a second thread
// a few chunks ahead of the parser. Private to engine/trace*.c.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct TpTraceSrc TpTraceSrc;

/// Opens a file (path) and starts its reader thread. Returns 0 or -errno / TP_ENOMEM.
int tp_trace_src_file(const char *path, TpTraceSrc **out, TpError *err);

/// A source over memory the caller keeps alive until tp_trace_src_free.
int tp_trace_src_mem(const char *label, const void *data, size_t n, TpTraceSrc **out, TpError *err);

/// The next chunk of uncompressed bytes (valid until the next call). Returns 1 with *p, *n set,
/// 0 at the end of the data, or a negative code with `err` set (a read error, damaged gzip).
/// A gzip stream that ends early is the end of the data with *truncated set.
int tp_trace_src_next(TpTraceSrc *s, const unsigned char **p, size_t *n, TpError *err);

/// The first chunk, left in place: the next tp_trace_src_next returns it again (the readers
/// choose the format from it). Call before any tp_trace_src_next. Same returns as that call.
int tp_trace_src_peek(TpTraceSrc *s, const unsigned char **p, size_t *n, TpError *err);

/// The name the source was opened with (the file's path or the memory block's label).
const char *tp_trace_src_label(const TpTraceSrc *s);

/// Whether the data is gzip, and whether a gzip stream ended early (after the end of the data).
bool tp_trace_src_compressed(const TpTraceSrc *s);
bool tp_trace_src_truncated(const TpTraceSrc *s);

/// The compressed bytes inflated into the data handed out so far (0 when not gzip); at the end of
/// the data, where the gzip stream stopped.
uint64_t tp_trace_src_compressed_offset(TpTraceSrc *s);

/// Stops the reader thread and frees the source (NULL is fine).
void tp_trace_src_free(TpTraceSrc *s);
