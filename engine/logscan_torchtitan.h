// torchtitan line parsers of the log scanner (table in logscan_parse.c). Each takes a normalised
// line whose anchors name it and returns 1 when it stored a record, 0 when the line was not one
// of its own (or held only facts), or a negative TP_E* code.
#pragma once

#include "logscan_line.h"
#include "logscan_types.h"

// "step: N  loss: X  grad_norm: G  memory: MGiB(P%)  tps: T  tflops: F  mfu: U%".
int ls_torchtitan_line(TpLogScan *s, const LsLine *L);

// Run facts: the device mesh, the trainer's sizes ("Trainer is initialized with ..." and the
// older "Training starts at step ..."), the device and its capacity, the MFU peak, the version.
int ls_torchtitan_mesh_line(TpLogScan *s, const LsLine *L);
int ls_torchtitan_config_line(TpLogScan *s, const LsLine *L);
int ls_torchtitan_capacity_line(TpLogScan *s, const LsLine *L);
int ls_torchtitan_peak_flops_line(TpLogScan *s, const LsLine *L);
int ls_torchtitan_version_line(TpLogScan *s, const LsLine *L);

// At the end of the log: tokens per step from tokens per DP rank and the data-parallel degree.
int ls_torchtitan_finish(TpLogScan *s);
