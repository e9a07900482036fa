// Parameter counts of the log scanner (table in logscan_parse.c).
#pragma once

#include "logscan_line.h"
#include "logscan_types.h"

// A line with a "parameters" anchor: shard counts, totals, the parameter dtype, a Primus dump
// title (which opens the dump mode). Returns 0 or a negative TP_E* code.
int ls_params_line(TpLogScan *s, const LsLine *L);

// At the end of the log: the total from the shards (or dense + sparse) when none was printed.
int ls_params_finish(TpLogScan *s);
