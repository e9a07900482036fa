#!/usr/bin/env python3
"""Baseline for the result-loading benchmark: what a hand-written script does.

Usage: baseline.py DIR

json.load of every *.json file in DIR (CPython's json module, a C decoder), then the same summary
as bench/results/load.lua: per platform the number of runs, median and mean tokens/s/GPU and the
mean step time.
"""
import json
import os
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    d = sys.argv[1]
    by = {}
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        with open(os.path.join(d, name), "rb") as fh:
            doc = json.load(fh)
        pm = doc.get("performance_metrics") or {}
        by.setdefault(doc.get("platform"), []).append(
            (pm.get("tokens_per_second_per_gpu"), pm.get("avg_step_time_seconds")))
    for p in sorted(by, key=str):
        tps = [t for t, _ in by[p] if t is not None]
        st = [s for _, s in by[p] if s is not None]
        print("%s: %d runs, tokens/s/GPU median %.1f mean %.1f, step time mean %.4f s" % (
            p, len(by[p]), statistics.median(tps), statistics.mean(tps), statistics.mean(st)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
