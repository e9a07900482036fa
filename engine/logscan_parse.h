// The log scanner's line dispatch: the anchors that make a line worth reading, and the one table
// of line parsers (by framework family) that a line holding them is handed to. Used by the
// driver (logscan.c), which finds the lines and feeds them here.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "logscan_index.h"
#include "logscan_types.h"

// The anchors of every parser: fixed strings, then one per failure signature.
size_t ls_anchor_count(void);
LsAnchor ls_anchor_get(size_t i);

// Reads one segment (a line without its separator) that holds an anchor, or any line while a
// mode needs them all (argument dumps, line hooks). Returns 0 or a negative TP_E* code.
int ls_process_segment(TpLogScan *s, const char *seg, size_t n, uint64_t lineno, bool terminated);

// The end of the log: the parsers' end-of-stream work, in table order.
int ls_finish_parse(TpLogScan *s);
