#!/usr/bin/env python3
"""Baseline for the logscan benchmark: what hand-written extraction scripts do.

Usage: baseline.py LOG

Modelled on a real one, AMD-AGI/Primus tools/perf/extract_results.py (parse_megatron_iterations):
every line has its ANSI colour codes removed with re.sub, then several re.search run on it
(iteration, step time, loss, learning rate, grad norm) and the values of the Megatron-LM
iteration lines are collected. Prints the number of records and the mean step time.
"""
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
ITERATION = re.compile(r"iteration\s+(\d+)/\s*(\d+)")
ELAPSED = re.compile(r"elapsed time per iteration \(ms\): ([0-9.]+)")
LOSS = re.compile(r"lm loss: ([0-9.Ee+-]+)")
LR = re.compile(r"learning rate: ([0-9.Ee+-]+)")
GRAD = re.compile(r"grad norm: ([0-9.]+|nan|inf)")


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    iterations, times, losses, lrs, grads = [], [], [], [], []
    with open(sys.argv[1], "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            clean = ANSI.sub("", line)
            it = ITERATION.search(clean)
            el = ELAPSED.search(clean)
            lo = LOSS.search(clean)
            lr = LR.search(clean)
            gr = GRAD.search(clean)
            if it and el:
                iterations.append(int(it.group(1)))
                times.append(float(el.group(1)) / 1000.0)
                losses.append(float(lo.group(1)) if lo else None)
                lrs.append(float(lr.group(1)) if lr else None)
                grads.append(float(gr.group(1)) if gr else None)
    mean = sum(times) / len(times) if times else float("nan")
    sys.stdout.write("%d records, mean step time %.6f s\n" % (len(iterations), mean))
    return 0


if __name__ == "__main__":
    sys.exit(main())
