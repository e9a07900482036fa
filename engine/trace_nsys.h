// The reader of Nsight Systems' SQLite export (`nsys export --type sqlite`), through libsqlite3:
// the CUPTI activity tables of kernels, copies and memsets (GPU ops), of CUDA runtime calls
// (launches) and the NVTX ranges named ProfilerStep#N (steps). Private to engine/trace*.c.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common.h"
#include "trace_src.h"
#include "trace_types.h"

/// Whether data starting with p[0, n) is an SQLite database: its 16-byte header string
/// "SQLite format 3\0" (sqlite.org/fileformat.html §1.3).
bool tp_trace_nsys_sniff(const unsigned char *p, size_t n);

/// Reads an Nsight Systems SQLite export into `t` (an empty trace from tp_trace_new). When `path`
/// is given and `src` is not gzip, SQLite reads the file itself (read-only); otherwise the bytes of
/// `src` (at most 1 GiB) are read into memory first. The ops of one GPU are kept (the device and
/// process with the most kernels), with a warning when others were left out. Returns 0 or a
/// negative code with `err` naming the file, and the table, row and field where one is at fault:
/// TP_EPARSE (not a readable database, no Nsight Systems tables), TP_ELIMIT, TP_ENOMEM.
int tp_trace_parse_nsys(TpTraceSrc *src, const char *path, TpTrace *t, TpError *err);
