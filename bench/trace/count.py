#!/usr/bin/env python3
"""Counts what a Kineto trace holds, for the benchmark's labels (independent of tplua).

Usage: count.py FILE   (plain .json or gzip)
Prints one line: BYTES EVENTS GPU_OPS LAUNCHES STEPS
(uncompressed bytes, traceEvents entries, X events of cat kernel/gpu_memcpy/gpu_memset,
X events of cat cuda_runtime/cuda_driver with args.correlation, ProfilerStep#N X events of cat
user_annotation or cpu_op), as bench/trace/gentrace.py prints for what it writes.
Loads the whole file with json: meant for the fixtures, not for the generated gigabytes.
"""
import gzip
import json
import sys


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    with open(sys.argv[1], "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    ops = launches = steps = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            ops += 1
        elif cat in ("cuda_runtime", "cuda_driver"):
            if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
                launches += 1
        elif cat in ("user_annotation", "cpu_op") and \
                str(e.get("name", "")).startswith("ProfilerStep#"):
            steps += 1
    print("%d %d %d %d %d" % (len(data), len(events), ops, launches, steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
