#!/usr/bin/env python3
"""Times commands side by side for the trace benchmark: bench/logscan/harness.py's runs
(each command a whole process through /bin/sh under `/usr/bin/time -f %M`, wall time from
time.perf_counter, the commands alternating A B C A B C ...), with throughput and goals.

Usage: harness.py RUNS [--bytes NAME=N] [--ratio A/B] [--goal GOAL] NAME=COMMAND ...

  --bytes NAME=N   N bytes of (uncompressed) input: prints NAME's MB/s (10^6 bytes per second)
                   at its median and at its best run
  --ratio A/B      prints the ratio of the medians, the ratio of the best runs and the range of
                   the run-by-run ratios (run i of A over run i of B)
  --goal GOAL      checks and prints one goal, one of:
                     "ratio A/B <= X"   (or >=): ratio of the medians
                     "mbps A >= X"      MB/s at the median (needs --bytes A=N)
                     "rss A < X"        peak RSS in MB (2^20 bytes), the largest of the runs
Exit status 1 when a command fails (it is shown with its stderr); goals missed do not change it.
"""
import importlib.util
import os
import statistics
import sys
import tempfile

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "logscan_harness", os.path.join(_here, "..", "logscan", "harness.py"))
_logscan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_logscan)
run_once = _logscan.run_once


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    runs = int(sys.argv[1])
    cmds, ratios, goals, nbytes = [], [], [], {}
    args = sys.argv[2:]
    while args:
        spec = args.pop(0)
        if spec in ("--ratio", "--goal", "--bytes") and args:
            val = args.pop(0)
            if spec == "--ratio":
                a, _, b = val.partition("/")
                ratios.append((a, b))
            elif spec == "--goal":
                goals.append(val.split())
            else:
                name, _, n = val.partition("=")
                nbytes[name] = int(n)
            continue
        name, _, cmd = spec.partition("=")
        cmds.append((name, cmd))
    names = [n for n, _ in cmds]
    for a, b in ratios:
        if a not in names or b not in names:
            sys.stderr.write("harness: --ratio %s/%s names an unknown command\n" % (a, b))
            return 2
    times = {n: [] for n in names}
    rss = {n: 0 for n in names}
    outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = os.path.join(tmp, "rss")
        for _ in range(runs):
            for name, cmd in cmds:
                t, r, out = run_once(cmd, rss_file)
                times[name].append(t)
                rss[name] = max(rss[name], r)
                outputs[name] = out
    med = {n: statistics.median(times[n]) for n in names}
    width = max(len(n) for n in names)
    print("%-*s  %9s %9s %9s  %10s  %10s  output" % (
        width, "command", "min s", "median s", "max s", "peak RSS", "MB/s"))
    for n in names:
        ts = times[n]
        mbps = "%10.1f" % (nbytes[n] / 1e6 / med[n]) if n in nbytes else "%10s" % "-"
        lines = outputs[n].splitlines()
        if len(lines) > 1:  # a JSON document: its size says more than its last "}"
            last = "%d lines, %d bytes" % (len(lines), len(outputs[n]))
        else:
            last = lines[0][:70] if lines else ""
        print("%-*s  %9.4f %9.4f %9.4f  %7.1f MB  %s  %s" % (
            width, n, min(ts), med[n], max(ts), rss[n] / 1024.0, mbps, last))
    if nbytes:
        print("throughput (MB = 10^6 bytes of uncompressed JSON):")
        for n in names:
            if n in nbytes:
                print("  %-*s  %.1f MB/s at the median, %.1f MB/s at the best run (%d bytes)" % (
                    width, n, nbytes[n] / 1e6 / med[n], nbytes[n] / 1e6 / min(times[n]),
                    nbytes[n]))
    if ratios:
        print("ratios of medians:")
        w = max(len("%s / %s" % r) for r in ratios)
        for a, b in ratios:
            per_run = [x / y for x, y in zip(times[a], times[b])]
            print("  %-*s = %.2f  (best runs %.2f, run by run %.2f .. %.2f)" % (
                w, "%s / %s" % (a, b), med[a] / med[b], min(times[a]) / min(times[b]),
                min(per_run), max(per_run)))
    for g in goals:
        kind, what, op, limit = g[0], g[1], g[2], float(g[3])
        if kind == "ratio":
            a, _, b = what.partition("/")
            value, unit = med[a] / med[b], "x"
        elif kind == "mbps":
            value, unit = nbytes[what] / 1e6 / med[what], " MB/s"
        elif kind == "rss":
            value, unit = rss[what] / 1024.0, " MB"
        else:
            sys.stderr.write("harness: unknown goal %s\n" % " ".join(g))
            return 2
        ok = {"<": value < limit, "<=": value <= limit, ">": value > limit,
              ">=": value >= limit}[op]
        print("goal %s %s %s %g: %.2f%s, %s" % (kind, what, op, limit, value, unit,
                                                 "met" if ok else "MISSED"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
