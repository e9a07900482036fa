// The log scanner's record store: the record contract's field names, record building (by the
// built-in parsers and by line hooks) with the multi-rank rule and the copy filter, and the
// stored records. Part of the public API (engine/logscan.h includes it).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "logscan_types.h"

/// Record building, for line hooks (and used by the built-in parsers): begin a record, set
/// fields, add losses/extra entries and a timestamp, then commit (which applies the multi-rank
/// rule and the copy filter). Each returns 0 or TP_ENOMEM.
int tp_logscan_rec_begin(TpLogScan *s);
int tp_logscan_rec_set(TpLogScan *s, TpLogField f, double v);
int tp_logscan_rec_loss(TpLogScan *s, const char *name, size_t name_len, double v);
int tp_logscan_rec_extra(TpLogScan *s, const char *name, size_t name_len, const char *value,
                         size_t value_len);
int tp_logscan_rec_timestamp(TpLogScan *s, const char *ts, size_t len);
int tp_logscan_rec_derived(TpLogScan *s, bool derived);
int tp_logscan_rec_commit(TpLogScan *s);

/// Number of records kept so far (after the multi-rank rule).
size_t tp_logscan_nrecords(const TpLogScan *s);
/// Index of the first record not yet returned by tp_logscan_take_new; marks all as returned.
/// Records can be dropped when a lower rank starts printing (rule 0.5): the returned index is
/// then the position of the first kept record not returned before.
size_t tp_logscan_take_new(TpLogScan *s);
/// Fills `out` with record `i` (< nrecords). Returns false when out of range.
bool tp_logscan_record(const TpLogScan *s, size_t i, TpLogRecord *out);
/// Reads field `f` of record `i` alone into *v: true when the record has it (false when it does
/// not, or i or f is out of range), without decoding the rest of the record.
bool tp_logscan_record_field(const TpLogScan *s, size_t i, int f, double *v);
/// Iterates the key/value entries of a record: start with *pos = 0; false at the end.
bool tp_logscan_kv_next(const TpLogRecord *r, size_t *pos, TpLogKv *out);

/// Name of a record field ("iteration", ...), or NULL out of range.
const char *tp_logscan_field_name(int f);
/// Field number for a name, or -1.
int tp_logscan_field_index(const char *name, size_t len);
/// True for fields whose values are counts (pushed as integers when integral).
bool tp_logscan_field_is_int(int f);

/// Sets the rank key of the record being built (the multi-rank rule orders ranks by it).
void ls_rec_set_key(TpLogScan *s, bool has_key, int64_t key);
