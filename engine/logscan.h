// Streaming parser of LLM training logs (Megatron-LM, Primus, NeMo 2 / NeMo 1, torchtitan):
// iteration records, argument dumps, parameter counts, memory reports, run facts and failure
// signatures, fed as byte chunks of any size, with memory bounded by the records kept.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "digest.h"
#include "logscan_num.h"
#include "logscan_rec.h"
#include "logscan_types.h"

/// Version of the record layout and heuristics; changes when a parse result may change.
#define TP_LOGSCAN_VERSION "1.0"

/// Segments (lines split on '\n' and '\r') longer than this are skipped with a diagnostic.
#define TP_LOGSCAN_MAX_LINE (1024u * 1024u)

/// Fills `o` with the defaults (auto-detect, rank rule, nothing known, no hooks).
void tp_logscan_opts_init(TpLogScanOpts *o);

/// Creates a scanner. Returns NULL on allocation failure (err filled). Free with tp_logscan_free.
TpLogScan *tp_logscan_new(const TpLogScanOpts *opts, TpError *err);
/// Frees the scanner and everything the accessors returned. NULL is accepted.
void tp_logscan_free(TpLogScan *s);

/// Feeds `len` bytes (any chunking; a line may straddle calls). Returns 0, TP_ENOMEM, TP_EINVAL
/// after finish, or the hook's failure; after a failure the scanner only accepts free.
int tp_logscan_feed(TpLogScan *s, const char *data, size_t len, TpError *err);
/// Reads the file at `path` to the end in bounded chunks and feeds it. Errors name the path:
/// "<path>: No such file or directory" (-ENOENT), "<path>: Is a directory" (-EISDIR), ...
int tp_logscan_feed_file(TpLogScan *s, const char *path, TpError *err);
/// Like tp_logscan_feed_file, and computes the SHA-256 of the bytes read in the same read (by a
/// second thread hashing the chunks the scanner reads, engine/digest.h's pipe): 64 lowercase hex
/// digits in `hex`, the byte count in `*size` (when not NULL). The digest is that of the file as
/// read, identical to sha256sum's; the scan goes at the pace of the hash.
int tp_logscan_feed_file_sha256(TpLogScan *s, const char *path, char hex[65], uint64_t *size,
                                TpError *err);
/// Like tp_logscan_feed_file_sha256, but returns as soon as the scanner has read the file: the
/// digest of its `*size` bytes is still being computed by the follower put in `*digest` (NULL
/// on failure), which the caller waits for (tp_digest_follow_wait) and frees
/// (tp_digest_follow_free) when it needs the digest, doing other work meanwhile.
int tp_logscan_feed_file_digest(TpLogScan *s, const char *path, TpDigestFollow **digest,
                                uint64_t *size, TpError *err);
/// Ends the input: processes the last unterminated line, adds end-of-stream diagnostics
/// (truncated, ...) and settles the format, meta and parameter totals. Idempotent.
int tp_logscan_finish(TpLogScan *s, TpError *err);
/// Records `code`/`msg` as the scanner's failure (for hooks); returns code.
int tp_logscan_fail(TpLogScan *s, int code, const char *msg);
/// Detected (or forced) format; the parser id with CUSTOM.
TpLogFormat tp_logscan_format(const TpLogScan *s, int *custom_id);
/// "megatron", "primus", "nemo", "torchtitan", "custom" or NULL for NONE.
const char *tp_logscan_format_name(TpLogFormat f);

size_t tp_logscan_nargs(const TpLogScan *s, TpLogArgDump which);
/// Argument `i` of a dump in log order (a repeated name appears again): name and value text.
bool tp_logscan_arg(const TpLogScan *s, TpLogArgDump which, size_t i, const char **name,
                    size_t *name_len, const char **value, size_t *value_len);

const TpLogParams *tp_logscan_params(const TpLogScan *s);
size_t tp_logscan_nmemory(const TpLogScan *s);
const TpLogMemReport *tp_logscan_memory(const TpLogScan *s, size_t i);
const TpLogTheoretical *tp_logscan_theoretical(const TpLogScan *s);
const TpLogMeta *tp_logscan_meta(const TpLogScan *s);
const char *tp_logscan_meta_name(TpLogMetaKey k);
const char *tp_logscan_meta_str_name(TpLogMetaStr k);
bool tp_logscan_meta_is_int(TpLogMetaKey k);

/// Diagnostics in order of their first line. Pointers valid until the next feed/finish/free.
size_t tp_logscan_ndiags(const TpLogScan *s);
const TpLogDiag *tp_logscan_diag(const TpLogScan *s, size_t i);
const char *tp_logscan_diag_kind_name(TpLogDiagKind k);
const char *tp_logscan_severity_name(TpLogSeverity sev);

/// Total lines seen ('\n' count, plus one for an unterminated last line) and bytes fed.
uint64_t tp_logscan_lines(const TpLogScan *s);
uint64_t tp_logscan_bytes(const TpLogScan *s);
