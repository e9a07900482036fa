// Exact number and timestamp parsing for the log scanner (the text as the frameworks print it).
#pragma once

#include <stdbool.h>
#include <stddef.h>

/// Parses a number the way the logs print them: optional sign, digits with optional ','
/// thousands separators, fraction, exponent of any width ("2e+3"), "nan", "inf", "-inf".
/// Exact (correctly rounded, identical to strtod in the C locale). Returns the number of bytes
/// consumed from [p, p+n), or 0 when no number starts at p.
size_t tp_logscan_parse_number(const char *p, size_t n, double *out);

/// Parses "YYYY-MM-DD HH:MM:SS[.ffffff|,mmm]", "YYYYMMDD HH:MM:SS" or ISO 8601 with 'T' and an
/// optional zone, into seconds since 1970 (the zone offset applied when printed). Returns false
/// when the text is not such a timestamp.
bool tp_logscan_parse_time(const char *p, size_t n, double *out);
