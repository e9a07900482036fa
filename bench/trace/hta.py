#!/usr/bin/env python3
"""The Holistic Trace Analysis baseline of the trace benchmark: what a user of HTA runs to get
the temporal breakdown (idle / compute / non-compute) of a trace.

Usage: HTA_DIR=CHECKOUT hta.py TRACE_DIR

TRACE_DIR holds the trace (one file per rank, .json or .json.gz, as HTA wants); CHECKOUT is a
checkout of facebookresearch/HolisticTraceAnalysis (the directory that holds hta/). Runs
TraceAnalysis(trace_dir=TRACE_DIR) (HTA's parse, with its defaults) and
get_temporal_breakdown(visualize=False), and prints the breakdown's last row on one line.
HTA's own log lines go to stderr. Needs pandas, plotly, networkx and pydot (Debian:
python3-pandas python3-plotly python3-networkx python3-pydot).
"""
import os
import sys


def main():
    if len(sys.argv) != 2 or not os.environ.get("HTA_DIR"):
        sys.stderr.write(__doc__)
        return 2
    sys.path.insert(0, os.environ["HTA_DIR"])
    from hta.trace_analysis import TraceAnalysis  # noqa: E402 (HTA_DIR first)

    analysis = TraceAnalysis(trace_dir=sys.argv[1])
    df = analysis.get_temporal_breakdown(visualize=False)
    row = df.iloc[-1]
    print("rank %d idle %s us compute %s us non_compute %s us" % (
        int(row["rank"]), row["idle_time(us)"], row["compute_time(us)"], row["non_compute_time(us)"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
