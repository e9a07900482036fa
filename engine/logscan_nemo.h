// NeMo and PyTorch Lightning line parsers of the log scanner (table in logscan_parse.c). Each
// takes a normalised line whose anchors name it and returns 1 when it stored a record, 0 when the
// line was not one of its own (or held only facts), or a negative TP_E* code.
#pragma once

#include "logscan_line.h"
#include "logscan_types.h"

// NeMo 2 ProgressPrinter: "Training epoch E, iteration I/T | name: value | ...".
int ls_nemo_printer_line(TpLogScan *s, const LsLine *L);
// NeMo / Lightning TQDM bar: "Epoch E: <pct>%|<bar>| n/total [elapsed<remaining, ..., k=v]".
int ls_nemo_bar_line(TpLogScan *s, const LsLine *L);
// Whether p[0, n), the text before "iteration i/n", names an evaluation loop ("Validation:",
// "Sanity checking Validation:", "Testing:", "Predicting:", "Validation DataLoader 1:"): such a
// progress line counts evaluation batches and is never a training record.
bool ls_nemo_eval_progress(const char *p, size_t n);

// Run facts: Lightning's "`Trainer.fit` stopped", NeMo's max_steps copy, NeMo-Run's job end,
// Lightning's distributed start-up (world size) and checkpoint restore (a new epoch of records).
int ls_nemo_fit_stopped_line(TpLogScan *s, const LsLine *L);
int ls_nemo_max_steps_line(TpLogScan *s, const LsLine *L);
int ls_nemo_run_job_line(TpLogScan *s, const LsLine *L);
int ls_nemo_global_rank_line(TpLogScan *s, const LsLine *L);
int ls_nemo_processes_line(TpLogScan *s, const LsLine *L);
int ls_nemo_restoring_line(TpLogScan *s, const LsLine *L);
