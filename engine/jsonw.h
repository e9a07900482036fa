// Pieces of JSON text shared by the encoders (tp.json's table encoder, the log scanner's record
// writer): numbers formatted so that they read back exactly, and strings escaped per RFC 8259.
#pragma once

#include <stddef.h>

#include "common.h"

/// Room a formatted number needs, terminating NUL included.
#define TP_JSONW_NUM_MAX 40

/// Writes finite `x` as the shortest of %.15g, %.16g, %.17g that reads back as the same double
/// (17 significant digits always do, IEEE 754 §5.12.2), plus ".0" when the text would read as an
/// integer, so that JSON readers keep it a float. Returns the length written (NUL-terminated);
/// `cap` must be at least TP_JSONW_NUM_MAX.
size_t tp_jsonw_float(char *buf, size_t cap, double x);

/// Appends `s` as a JSON string (quotes included) to `out`: '"', '\\' and U+0000..U+001F escaped
/// (RFC 8259 §7), everything else as is. @return 0, TP_ENOMEM, or TP_EINVAL when `s` is not UTF-8
/// (then `*bad` is the offset of the first byte that is not, and `out` holds a partial string).
int tp_jsonw_string(TpBuf *out, const char *s, size_t n, size_t *bad);
