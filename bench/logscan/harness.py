#!/usr/bin/env python3
"""Times commands side by side, alternating, and prints min/median/max, ratios and peak RSS.

Usage: harness.py RUNS [--ratio A/B ...] [--goal GOAL ...] NAME=COMMAND [NAME=COMMAND ...]

Each COMMAND is run through /bin/sh (so `grep -c X FILE | cat` keeps its pipe) under
`/usr/bin/time -o FILE -f %M`, its standard output sent to a pipe that is read to the end.
Wall time comes from time.perf_counter around each run; the runs of the commands alternate
(A B C A B C ...) so that machine noise hits them alike. Exit status must be 0.
With --ratio A/B (repeatable) only those ratios of medians are printed, with the min/max range
of the run-by-run ratios (run i of A over run i of B); without it, every pair's ratio.
With --goal (repeatable) one goal is checked and printed after the ratios, "met" or "MISSED":
"ratio A/B <= X" (or <, >=, >) on the ratio of the medians, or "rss A < X" on A's peak RSS in
MB (2^20 bytes, the largest of the runs). Goals missed do not change the exit status.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(cmd, rss_file):
    wrapped = ["/usr/bin/time", "-o", rss_file, "-f", "%M", "/bin/sh", "-c", cmd]
    t0 = time.perf_counter()
    proc = subprocess.Popen(wrapped, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write("command failed (%d): %s\n%s" % (proc.returncode, cmd,
                                                           err.decode(errors="replace")))
        sys.exit(1)
    with open(rss_file) as fh:
        rss_kib = int(fh.read().strip().splitlines()[-1])
    return elapsed, rss_kib, out.decode(errors="replace").strip()


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    runs = int(sys.argv[1])
    cmds = []
    wanted = []
    goals = []
    args = sys.argv[2:]
    while args:
        spec = args.pop(0)
        if spec == "--ratio" and args:
            a, _, b = args.pop(0).partition("/")
            wanted.append((a, b))
            continue
        if spec == "--goal" and args:
            g = args.pop(0).split()
            if len(g) != 4 or g[0] not in ("ratio", "rss") or g[2] not in ("<", "<=", ">", ">="):
                sys.stderr.write("harness: --goal %s: not 'ratio A/B OP X' or 'rss A OP X'\n"
                                 % " ".join(g))
                return 2
            goals.append(g)
            continue
        name, _, cmd = spec.partition("=")
        cmds.append((name, cmd))
    for a, b in wanted:
        if a not in dict(cmds) or b not in dict(cmds):
            sys.stderr.write("harness: --ratio %s/%s names an unknown command\n" % (a, b))
            return 2
    for g in goals:
        named = g[1].split("/") if g[0] == "ratio" else [g[1]]
        if len(named) != (2 if g[0] == "ratio" else 1) or not all(n in dict(cmds) for n in named):
            sys.stderr.write("harness: --goal %s names an unknown command\n" % " ".join(g))
            return 2
    times = {name: [] for name, _ in cmds}
    rss = {name: 0 for name, _ in cmds}
    outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = os.path.join(tmp, "rss")
        for _ in range(runs):
            for name, cmd in cmds:
                t, r, out = run_once(cmd, rss_file)
                times[name].append(t)
                rss[name] = max(rss[name], r)
                outputs[name] = out
    width = max(len(n) for n, _ in cmds)
    print("%-*s  %9s %9s %9s  %10s  output" % (width, "command", "min s", "median s", "max s",
                                                "peak RSS"))
    for name, _ in cmds:
        ts = times[name]
        print("%-*s  %9.3f %9.3f %9.3f  %7.1f MB  %s" % (
            width, name, min(ts), statistics.median(ts), max(ts), rss[name] / 1024.0,
            outputs[name].splitlines()[-1][:60] if outputs[name] else ""))
    med = {name: statistics.median(times[name]) for name, _ in cmds}
    names = [n for n, _ in cmds]
    print("ratios of medians:")
    if wanted:
        width = max(len("%s / %s" % (a, b)) for a, b in wanted)
        for a, b in wanted:
            per_run = [x / y for x, y in zip(times[a], times[b])]
            print("  %-*s = %.2f  (run by run %.2f .. %.2f)" % (
                width, "%s / %s" % (a, b), med[a] / med[b], min(per_run), max(per_run)))
    else:
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                print("  %s / %s = %.2f" % (a, b, med[a] / med[b]))
    for kind, what, op, limit in goals:
        limit = float(limit)
        if kind == "ratio":
            a, _, b = what.partition("/")
            value, unit = med[a] / med[b], "x"
        else:
            value, unit = rss[what] / 1024.0, " MB"
        ok = {"<": value < limit, "<=": value <= limit, ">": value > limit,
              ">=": value >= limit}[op]
        print("goal %s %s %s %g: %.2f%s, %s" % (kind, what, op, limit, value, unit,
                                                 "met" if ok else "MISSED"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
