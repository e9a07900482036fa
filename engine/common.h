// Shared engine vocabulary: the error record every engine call fills, a growable byte buffer and
// the UTF-8 check.
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/// Error codes of engine calls. Engine functions return 0 on success or a negative value:
/// either -errno (system errors) or one of these (always below -4095, so never an errno).
enum {
  TP_EPARSE = -5000,    ///< malformed input (log, YAML, JSON, dataset file)
  TP_ENOGPU = -5001,    ///< no GPU runtime or no device
  TP_ELIMIT = -5002,    ///< a size or depth limit was exceeded
  TP_ETIMEOUT = -5003,  ///< an operation ran past its deadline
  TP_EINVAL = -5004,    ///< invalid argument detected by the engine
  TP_ENOMEM = -5005,    ///< allocation failed
  TP_ENOTDB = -5006,    ///< a file that is not a database, or a damaged one
  TP_ECONNECT = -5007,  ///< a database server cannot be reached
  TP_EAUTH = -5008,     ///< a database server refused the credentials
  TP_EDB = -5009,       ///< any other error reported by a database
};

/// What went wrong, filled by engine calls that can fail. `msg` reads "<subject>: <reason>".
typedef struct TpError {
  int code;  ///< 0, -errno or TP_E*
  char msg[256];
} TpError;

/// Sets `err` (when not NULL) to `code` and a printf-formatted message; returns `code`.
int tp_error_set(TpError *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/// Same as tp_error_set with errno as the code and ": strerror(errno)" appended to the message.
/// Reads errno first, so it is safe to call right after the failing call.
int tp_error_errno(TpError *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/// Returns a stable short name for an error code: "ENOENT", "EPARSE", "ENOGPU", ...
const char *tp_error_name(int code);

/// A growable byte buffer with explicit length (contents are not NUL-terminated unless
/// tp_buf_cstr is called).
typedef struct TpBuf {
  char *data;
  size_t len;
  size_t cap;
} TpBuf;

/// Ensures room for `extra` more bytes. Returns 0 or TP_ENOMEM (also on size overflow).
int tp_buf_reserve(TpBuf *b, size_t extra);
/// Appends `n` bytes. Returns 0 or TP_ENOMEM.
int tp_buf_append(TpBuf *b, const void *p, size_t n);
/// Appends printf-formatted text. Returns 0 or TP_ENOMEM.
int tp_buf_printf(TpBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/// NUL-terminates the contents (not counted in len) and returns data, or NULL on ENOMEM.
const char *tp_buf_cstr(TpBuf *b);
/// Frees the storage and resets the buffer to empty.
void tp_buf_free(TpBuf *b);

/// Length of the well-formed UTF-8 sequence at p[0..n) (RFC 3629 §4: no overlongs, no
/// surrogates, nothing above U+10FFFF), or 0. `n` must be at least 1.
size_t tp_utf8_len(const unsigned char *p, size_t n);
