// The reader of rocprofv3's CSV output (`rocprofv3 --kernel-trace --output-format csv`): the
// kernel trace (GPU kernels), the memory copy trace (copies) and the API traces (the runtime calls
// a kernel's Correlation_Id points to, read as launches). Columns are found by their header name,
// so the header generations seen so far (18, 19 and 22 columns) all read. Private to
// engine/trace*.c.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common.h"
#include "trace_src.h"
#include "trace_types.h"

/// Whether data starting with p[0, n) looks like a rocprofv3 CSV: its first line names the columns
/// Kind (or Domain), Start_Timestamp and End_Timestamp.
bool tp_trace_rocprof_sniff(const unsigned char *p, size_t n);

/// Reads one rocprofv3 CSV from `src` into `t` (an empty trace from tp_trace_new). Ops on a GPU
/// agent other than the first kernel's are left out, with a warning. Returns 0 (a file cut short
/// is read up to the cut, with t->truncated and a warning) or a negative code with `err` naming
/// the file and the line: TP_EPARSE (not a rocprofv3 CSV, a damaged line), TP_ELIMIT (a field
/// over 1 MiB, a line of more than 256 fields), TP_ENOMEM, or the source's read error.
int tp_trace_parse_rocprof_csv(TpTraceSrc *src, TpTrace *t, TpError *err);

/// Same as tp_trace_parse_rocprof_csv for the file `path`, and then, when its name ends with
/// `kernel_trace.csv` (or `.csv.gz`), the files rocprofv3 wrote beside it for the same process:
/// `<prefix>memory_copy_trace.csv` and `<prefix>hip_api_trace.csv` (or `.csv.gz`), when present.
int tp_trace_read_rocprof(TpTraceSrc *src, const char *path, TpTrace *t, TpError *err);
