// Argument dumps of the log scanner (Megatron / NeMo driver, Primus, torchtitan job config). The
// line functions return 1 when the line was a dump entry (nothing else is read from it), 0 when
// not, or a negative TP_E* code.
#pragma once

#include <stdbool.h>

#include "logscan_lex.h"
#include "logscan_line.h"
#include "logscan_types.h"

// A rule line "---- <title> ----" (the title in *title): Megatron's "arguments" and "end of
// arguments", the NeMo driver's "nemo recipe arguments".
bool ls_args_rule(LsText t, LsText *title);

// One "  <name> <dots> <value>" entry of a `_print_args`-layout dump. `strict`: only the exact
// layout (48 - len(name) dots, or two spaces for longer names), for lines that also look like
// something else: Megatron's own `iteration` argument reads like a record.
int ls_args_line(TpLogScan *s, const LsLine *L, bool strict);

// One "  <key><pad> : <value> (<type>)" entry of a Primus dump.
int ls_args_primus_line(TpLogScan *s, const LsLine *L);

// "Running with args: {...}": torchtitan's job config flattened into the main argument dump.
// Another rank's identical copy is skipped; a different one (a new run in the same log) is added
// after the first, so its values win. What cannot be read gives a bad_args warning naming the
// line and column; the values read before the fault are kept.
int ls_args_job_config_line(TpLogScan *s, const LsLine *L);

// At the end of the log: run facts (batch sizes, parallel degrees, lr, seed, precision) from the
// dumps, where nothing else stated them.
int ls_args_finish(TpLogScan *s);
