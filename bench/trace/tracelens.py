#!/usr/bin/env python3
"""The TraceLens baseline of the trace benchmark: what a user of TraceLens runs to get the
per-op performance report (GFLOPs, bytes, TFLOP/s per op and shapes) of a trace.

Usage: TRACELENS_DIR=CHECKOUT tracelens.py TRACE OUT_DIR

CHECKOUT is a copy of AMD-AGI/TraceLens's source (the directory that holds TraceLens/); TRACE a
PyTorch profiler trace (.json or .json.gz). Runs generate_perf_report_pytorch with its defaults,
writing the report's CSVs to OUT_DIR, and prints the sheets it wrote on one line. TraceLens's
own output goes to stderr. Needs pandas and openpyxl (Debian: python3-pandas python3-openpyxl
python3-tqdm python3-tabulate).
"""
import contextlib
import os
import sys


def main():
    if len(sys.argv) != 3 or not os.environ.get("TRACELENS_DIR"):
        sys.stderr.write(__doc__)
        return 2
    sys.path.insert(0, os.environ["TRACELENS_DIR"])
    from TraceLens.Reporting.generate_perf_report_pytorch import (  # noqa: E402 (its dir first)
        generate_perf_report_pytorch,
    )

    with contextlib.redirect_stdout(sys.stderr):
        sheets = generate_perf_report_pytorch(profile_json_path=sys.argv[1],
                                              output_csvs_dir=sys.argv[2])
    print("sheets: %s" % " ".join(sorted(sheets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
