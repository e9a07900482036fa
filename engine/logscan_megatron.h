// Megatron-LM and Primus line parsers of the log scanner (table in logscan_parse.c). Each takes
// a normalised line whose anchors name it and returns 1 when it stored a record, 0 when the line
// was not one of its own (or held only facts), or a negative TP_E* code.
#pragma once

#include "logscan_line.h"
#include "logscan_types.h"

// "iteration N/T | label: value | ..." (Megatron's training_log, Primus' rewrites of it).
int ls_megatron_line(TpLogScan *s, const LsLine *L);
// "[Rank R] (after N iterations) memory (MB) | allocated: ... " (report_memory).
int ls_megatron_memory_line(TpLogScan *s, const LsLine *L);
// "Theoretical memory footprints: weight and optimizer=... activation=... total=...".
int ls_megatron_theoretical_line(TpLogScan *s, const LsLine *L);

// Run facts of Megatron's start-up lines.
int ls_megatron_microbatches_line(TpLogScan *s, const LsLine *L);
int ls_megatron_mp_size_line(TpLogScan *s, const LsLine *L);
int ls_megatron_seeds_line(TpLogScan *s, const LsLine *L);
int ls_megatron_optimizer_line(TpLogScan *s, const LsLine *L);

// Run facts of Primus' own lines (patch runner, torchrun wrapper, node runner, GPU model).
int ls_primus_patch_line(TpLogScan *s, const LsLine *L);
int ls_primus_torchrun_line(TpLogScan *s, const LsLine *L);
int ls_primus_runner_line(TpLogScan *s, const LsLine *L);
int ls_primus_gpu_model_line(TpLogScan *s, const LsLine *L);

// At the end of the log: Primus' backend ("megatron" when a Megatron dump came with Primus
// markers) and the planned iterations from the last record's "iteration N/T".
int ls_megatron_finish(TpLogScan *s);
