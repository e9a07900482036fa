// Lexing helpers of the log scanner's line parsers: character classes, slices of a line
// ((pointer, length), never NUL-terminated), and the numbers and words the frameworks print.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

// A slice of a line.
typedef struct LsText {
  const char *p;
  size_t n;
} LsText;

static inline bool ls_is_digit(char c) {
  return c >= '0' && c <= '9';
}

static inline bool ls_is_space(char c) {
  return c == ' ' || c == '\t';
}

static inline bool ls_is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ls_is_digit(c) || c == '_';
}

// Literal-string helpers: the length comes from sizeof, not strlen.
#define LS_FIND(p, n, lit)   ((const char *)memmem((p), (n), (lit), sizeof(lit) - 1))
#define LS_STARTS(p, n, lit) ((n) >= sizeof(lit) - 1 && memcmp((p), (lit), sizeof(lit) - 1) == 0)
#define LS_TEQ(t, lit)       ((t).n == sizeof(lit) - 1 && memcmp((t).p, (lit), sizeof(lit) - 1) == 0)

// p[0, n) without leading and trailing blanks (spaces and tabs).
static inline LsText ls_trim(const char *p, size_t n) {
  while (n > 0 && ls_is_space(*p)) {
    p++;
    n--;
  }
  while (n > 0 && ls_is_space(p[n - 1])) {
    n--;
  }
  return (LsText){p, n};
}

// Index of the first non-blank at or after i (n when none).
static inline size_t ls_skip_spaces(const char *p, size_t n, size_t i) {
  while (i < n && ls_is_space(p[i])) {
    i++;
  }
  return i;
}

// First occurrence of the NUL-terminated `lit` in p[0, n), or NULL.
const char *ls_find(const char *p, size_t n, const char *lit);
// Whether the slice is exactly `lit`.
bool ls_text_eq(LsText t, const char *lit);
// Reads an unsigned decimal integer at p[*i] (capped near 10^13); false when there is none.
bool ls_read_uint(const char *p, size_t n, size_t *i, long *out);
// The first number in a value ("5630.1", "729.5/729.5", "17.9 (avg 17.4)", "9,891").
bool ls_value_num(LsText v, double *out);
// The whole value is one number.
bool ls_value_only_num(LsText v, double *out);
// The number after the first occurrence of `lit` (blanks skipped); false when either is missing.
bool ls_number_after(const char *p, size_t n, const char *lit, double *out);
// "key=number" with key at a word start (dataclass reprs, mesh lines).
bool ls_kv_num(const char *p, size_t n, const char *key, double *out);
