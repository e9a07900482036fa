// Outcome detection of the log scanner: failure signatures, crash naming, end-of-training and
// exit markers, and the end-of-log diagnostics (table in logscan_parse.c).
#pragma once

#include <stddef.h>

#include "logscan_line.h"
#include "logscan_types.h"

// The failure signatures: their count and the text of signature i (< count), an anchor each.
size_t ls_outcome_nsigs(void);
const char *ls_outcome_sig_text(size_t i);

// A line holding signatures (L->sigs): one diagnostic per kind (the most severe signature of the
// kind names it), the exit code torchelastic prints, restarts counted as new epochs of records.
int ls_outcome_signatures_line(TpLogScan *s, const LsLine *L);
// "<module.>Name(Error|Exception): message" after a traceback names the crash.
int ls_outcome_exception_line(TpLogScan *s, const LsLine *L);
// End-of-training markers: the run completed.
int ls_outcome_completed_line(TpLogScan *s, const LsLine *L);
// torchelastic's "worker group successfully finished": exit status 0.
int ls_outcome_worker_ok_line(TpLogScan *s, const LsLine *L);

// At the end of the log: skipped iterations summed up, truncation, empty or unrecognised log.
int ls_outcome_finish(TpLogScan *s);
