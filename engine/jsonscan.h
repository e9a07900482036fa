// Validating scans of JSON text (RFC 8259) that build no values: string literals checked in full,
// and a whole top-level object checked and cut into members (key, value span, the value's kind
// and its children's kinds). tp.json's skipping decode (lua/l_json.c) converts only the members
// it wants; the file reader below does the scanning on worker threads, ahead of the caller.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fs.h"

/// The deepest nesting a scan accepts (cJSON's CJSON_NESTING_LIMIT in 1.7.15: callers that hand
/// the same text to cJSON stay within it).
#define TP_JSONSCAN_MAX_DEPTH 1000

/// Kinds of JSON values.
typedef enum TpJsonKind {
  TP_JSON_NULL,
  TP_JSON_BOOLEAN,
  TP_JSON_NUMBER,
  TP_JSON_STRING,
  TP_JSON_ARRAY,
  TP_JSON_OBJECT,
  TP_JSON_KINDS,
} TpJsonKind;

/// Lower-case names of the kinds ("null", "boolean", ...), indexed by TpJsonKind.
extern const char *const tp_json_kind_names[TP_JSON_KINDS];

/// Why a string literal is not valid: TP_EPARSE, the offset of the offending byte, a message.
typedef struct TpJsonScanError {
  int code;
  size_t off;
  char why[200];
} TpJsonScanError;

/// Checks the string literal whose opening quote is s[*pos] and moves *pos past its closing
/// quote. RFC 8259 §7: no unescaped code point below U+0020, escapes \" \\ \/ \b \f \n \r \t
/// \uXXXX only, UTF-16 surrogates paired, UTF-8 well formed (RFC 3629 §4); \u0000 is refused (a
/// NUL would cut the C strings cJSON hands back). On failure fills `e` and returns false.
bool tp_jsonscan_string(const unsigned char *s, size_t n, size_t *pos, TpJsonScanError *e);

/// A value's kind and, for an array or object, how many children it has of each kind.
typedef struct TpJsonInfo {
  TpJsonKind kind;
  size_t count;                 ///< elements (array) or members (object)
  size_t kinds[TP_JSON_KINDS];  ///< the children's kinds
} TpJsonInfo;

/// One member of a scanned object: the key's text between its quotes (it has no escapes) and the
/// value's text s[at, end).
typedef struct TpJsonMember {
  size_t key_at, key_len;
  size_t at, end;
  TpJsonInfo info;
} TpJsonMember;

/// A scan of one top-level object, and the scratch it reuses from one scan to the next.
typedef struct TpJsonScan {
  TpJsonMember *members;  ///< in document order
  size_t n;
  size_t cap;
  void *keys;  ///< scratch: the keys of the open objects (duplicate check)
  size_t keys_cap;
} TpJsonScan;

/// Scans s[0..n) as one JSON object with optional whitespace around it, checking every value in
/// full: the grammar of RFC 8259 (structure, numbers, literals, strings as tp_jsonscan_string),
/// nesting of at most `max_depth` levels (the object is level 1; at most TP_JSONSCAN_MAX_DEPTH)
/// and no key twice in one object. On success `sc` holds the members.
/// @return 1 when the text is such an object; 0 when it is not (another value, invalid JSON, or
///   a key written with escapes, whose spellings would compare unequal here): the caller then
///   decodes it the ordinary way to learn what is wrong; TP_ENOMEM.
int tp_jsonscan_object(TpJsonScan *sc, const unsigned char *s, size_t n, int max_depth);

/// Frees what a scan holds. `sc` may then be reused (it is left empty).
void tp_jsonscan_free(TpJsonScan *sc);

/// One file read (and scanned) by a TpJsonFiles reader.
typedef struct TpJsonFile {
  char *path;
  char *text;  ///< the whole file, NUL-terminated after len bytes; NULL when it could not be read
  size_t len;
  TpFsStat st;  ///< of the descriptor that was read
  TpError err;  ///< why it could not be read (text NULL)
  size_t skip;  ///< bytes of a UTF-8 byte order mark that start the text (RFC 8259 §8.1)
  int scanned;  ///< 1: the text after the mark is an object, members in `scan`; 0: it is not,
                ///< or it was not scanned (max_depth 0, out of memory)
  TpJsonScan scan;
} TpJsonFile;

/// Frees a file handed out by tp_jsonfiles_next. NULL is accepted.
void tp_jsonfile_free(TpJsonFile *f);

/// Reads files in order on worker threads, each read whole (tp_fs_read_file, at most `max_size`
/// bytes) and, when `max_depth` > 0, scanned as an object (tp_jsonscan_object), at most `ahead`
/// files ahead of the caller, so that a caller that spends its time on each file in turn finds
/// the next one ready.
typedef struct TpJsonFiles TpJsonFiles;

/// Starts reading `paths[0..n)` (copied) with `threads` worker threads (at least 1; when no
/// thread can be started, each file is read by tp_jsonfiles_next itself). `ahead` is at least
/// `threads`. @return the reader, or NULL (err filled) when out of memory.
TpJsonFiles *tp_jsonfiles_open(const char *const *paths, size_t n, size_t max_size, int max_depth,
                               size_t ahead, int threads, TpError *err);

/// The next file, in the order of `paths` (waiting until a worker has it); the caller owns it
/// (tp_jsonfile_free). NULL after the last (err->code 0; the workers are then gone), or when the
/// file's record could not be allocated (err TP_ENOMEM naming it: the next call goes on with the
/// file after).
TpJsonFile *tp_jsonfiles_next(TpJsonFiles *r, TpError *err);

/// Stops the workers (each finishes the file it is on), frees the files not handed out and the
/// reader. NULL is accepted.
void tp_jsonfiles_close(TpJsonFiles *r);
