// The streaming JSON reader of profiler traces (Trace Event Format, as Kineto writes it): it pulls
// chunks from a source and fills a trace's store. Private to engine/trace*.c.
#pragma once

#include "common.h"
#include "trace_src.h"
#include "trace_types.h"

/// Reads the JSON from `src` into `t` (an empty trace from tp_trace_new). Returns 0 (a trace cut
/// short is read up to the cut, with t->truncated and a warning) or a negative code with `err`
/// naming the trace and the byte offset.
int tp_trace_parse(TpTraceSrc *src, TpTrace *t, TpError *err);
