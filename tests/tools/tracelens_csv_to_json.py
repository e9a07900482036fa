#!/usr/bin/python3
"""Converts TraceLens performance-report CSVs into one JSON file for tplua's op-model tests.

    tracelens_csv_to_json.py [--git REPO --rev REV] [--meta KEY=VALUE ...] -o OUT.json DIR
    tracelens_csv_to_json.py --cases CASES.json --tracelens SRC [--meta ...] -o OUT.json

Reads every CSV of DIR that has a GFLOPS_first column (GEMM.csv, SDPA_fwd.csv,
Normalization.csv, ...; also the comparison CSVs, whose columns carry a "<label>::" prefix such
as "h100::GFLOPS_first"). DIR is a directory on disk, or, with --git, a directory of REPO at
revision REV (read with git show, so a bare repository works). For each CSV the JSON keeps
every row, with these columns when present (with or without a label prefix): name, the
"param: ..." columns, Input Dims_first, Input type_first, Input Strides_first, Concrete
Inputs_first, GFLOPS_first, Data Moved (MB)_first, FLOPS/Byte_first, TFLOPS/s_mean, TB/s_mean,
Kernel Time (µs)_mean/_sum/_min/_max, name_count, Compute Spec, and the "__<label>_diff" and
"__<label>_pct" columns of comparison CSVs. Cells hold Python reprs ("[[8944, 1024], [1024,
2816]]", "('c10::BFloat16', None)", "True"); they are read with ast.literal_eval, so lists,
tuples, strings, numbers, booleans and None become JSON arrays, strings, numbers, booleans and
null. An empty cell or "nan" becomes null; any other cell that is not a Python literal stays a
string. Each sheet records its file's git blob id (SHA-1 of "blob <size>\\0" + bytes) and size.

With --cases, the rows come from TraceLens's own op models instead of a report: CASES.json
holds synthetic profiler events ({"cases": [{"id", "name", "Input Dims", "Input type", "Input
Strides", "Concrete Inputs", "tracelens"?, "note"?}]}); each is given to the TraceLens model
class that TraceLens maps its name to (TraceLens.PerfModel.torch_op_mapping), imported from the
TraceLens source tree SRC, and its flops() and bytes() become the row's GFLOPS_first and Data
Moved (MB)_first, as TraceLens's report computes them. "tracelens" names another event or
class to ask ({"class", "name", "Input Dims", "Input type", "Concrete Inputs", "metric"}):
for an op TraceLens has no model of, the class of the op it stands for; with "metric": "bwd"
the class's flops_bwd() and bytes_bwd() on the forward event, as TraceLens's report models a
backward pass. A model that raises leaves the row's numbers null and its "error" set. The
sheet is named "cases".

Exit status 2 on a directory, revision or file it cannot read, with the reason on stderr.
"""
import argparse
import ast
import csv
import hashlib
import io
import json
import math
import os
import subprocess
import sys

KEEP = [
    "name",
    "Input Dims_first",
    "Input type_first",
    "Input Strides_first",
    "Concrete Inputs_first",
    "GFLOPS_first",
    "Data Moved (MB)_first",
    "FLOPS/Byte_first",
    "TFLOPS/s_mean",
    "TB/s_mean",
    "Kernel Time (\u00b5s)_mean",
    "Kernel Time (\u00b5s)_sum",
    "Kernel Time (\u00b5s)_min",
    "Kernel Time (\u00b5s)_max",
    "name_count",
    "Compute Spec",
]


def kept(column):
    """Whether a column is one the JSON keeps."""
    base = column.split("::", 1)[1] if "::" in column else column
    if base in KEEP or base.startswith("param: "):
        return True
    return "__" in base and (base.endswith("_diff") or base.endswith("_pct"))


def cell(text):
    """A CSV cell as a JSON value."""
    if text == "" or text.lower() == "nan":
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    return plain(value)


def plain(value):
    """Tuples as lists, non-finite floats as null; other literals as they are."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (set, frozenset, bytes, complex)):
        return repr(value)
    return value


def blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def list_csvs(args):
    """(name, bytes) of every CSV in the directory, sorted by name."""
    if args.git:
        out = subprocess.run(
            ["git", "-C", args.git, "ls-tree", "--name-only", args.rev, args.dir.rstrip("/") + "/"],
            capture_output=True, check=True)
        names = [os.path.basename(p) for p in out.stdout.decode().split("\n") if p.endswith(".csv")]
        result = []
        for n in sorted(names):
            blob = subprocess.run(
                ["git", "-C", args.git, "show", "%s:%s/%s" % (args.rev, args.dir.rstrip("/"), n)],
                capture_output=True, check=True)
            result.append((n, blob.stdout))
        return result
    result = []
    for n in sorted(os.listdir(args.dir)):
        if n.endswith(".csv"):
            with open(os.path.join(args.dir, n), "rb") as f:
                result.append((n, f.read()))
    return result


def convert(name, data):
    """The sheet of one CSV, or None when it has no GFLOPS_first column (or is empty)."""
    text = data.decode("utf-8")
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None) or []
    if not any(h.split("::")[-1] == "GFLOPS_first" for h in header):
        return None
    cols = [(i, h) for i, h in enumerate(header) if kept(h)]
    rows = []
    for record in reader:
        if not record:
            continue
        rows.append({h: cell(record[i]) if i < len(record) else None for i, h in cols})
    return {"file": name, "rows": rows}


def contiguous_strides(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.insert(0, acc)
        acc *= d
    return out


def run_cases(path, src):
    """The "cases" sheet: each synthetic event given to TraceLens's own model class."""
    sys.path.insert(0, src)
    from TraceLens.PerfModel import perf_model  # noqa: E402 (imported from SRC)
    from TraceLens.PerfModel.torch_op_mapping import resolve_perf_model_class
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    rows = []
    for c in cases:
        ask = c.get("tracelens", {})
        dims = ask.get("Input Dims", c["Input Dims"])
        event = {"name": ask.get("name", c["name"]), "args": {
            "Input Dims": dims,
            "Input type": ask.get("Input type", c["Input type"]),
            "Input Strides": c["Input Strides"] if "Input Dims" not in ask else
            [contiguous_strides(d) if d and isinstance(d[0], int) else [] for d in dims],
            "Concrete Inputs": ask.get("Concrete Inputs", c["Concrete Inputs"])}}
        cls = getattr(perf_model, ask["class"]) if "class" in ask else \
            resolve_perf_model_class(event["name"])
        bwd = ask.get("metric") == "bwd"
        row = {"name": c["name"], "case": c["id"], "Input Dims_first": c["Input Dims"],
               "Input type_first": c["Input type"], "Input Strides_first": c["Input Strides"],
               "Concrete Inputs_first": c["Concrete Inputs"],
               "tracelens_class": cls.__name__ if cls else None,
               "tracelens_event": event["name"], "tracelens_metric": "bwd" if bwd else "fwd",
               "GFLOPS_first": None, "Data Moved (MB)_first": None, "Compute Spec": None}
        if c.get("note"):
            row["note"] = c["note"]
        try:
            model = cls(event)
            flops = model.flops_bwd() if bwd else model.flops()
            nbytes = model.bytes_bwd() if bwd else model.bytes()
            row["GFLOPS_first"] = flops / 1e9
            row["Data Moved (MB)_first"] = None if nbytes is None else nbytes / (1024 * 1024)
            maf = model.get_maf_type() if hasattr(model, "get_maf_type") else None
            prec = model.get_compute_precision() if hasattr(model, "get_compute_precision") \
                else None
            row["Compute Spec"] = "%s_%s" % (maf, prec) if maf and prec else ""
        except Exception as e:  # TraceLens's own failure is a result here
            row["error"] = "%s: %s" % (type(e).__name__, e)
        rows.append(plain(row))
    return {"file": os.path.basename(path), "rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", help="directory of TraceLens CSVs")
    ap.add_argument("--cases", help="synthetic events to give to TraceLens's op models")
    ap.add_argument("--tracelens", help="TraceLens source tree (with --cases)")
    ap.add_argument("-o", "--output", required=True, help="JSON file to write")
    ap.add_argument("--git", help="read DIR from this git repository")
    ap.add_argument("--rev", default="HEAD", help="revision of --git (default HEAD)")
    ap.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                    help="a string to record under origin (repeatable)")
    args = ap.parse_args()
    if args.cases:
        if not args.tracelens:
            ap.error("--cases needs --tracelens")
        try:
            sheet = run_cases(args.cases, args.tracelens)
        except (OSError, ValueError, KeyError, ImportError) as e:
            print("tracelens_csv_to_json: %s: %s" % (args.cases, e), file=sys.stderr)
            return 2
        origin = {"cases": args.cases}
        for m in args.meta:
            key, _, value = m.partition("=")
            origin[key] = value
        doc = {"converter": "tests/tools/tracelens_csv_to_json.py", "origin": origin,
               "sheets": {"cases": sheet}}
        write(args.output, doc)
        return 0
    if not args.dir:
        ap.error("a directory of CSVs (or --cases) is needed")
    try:
        files = list_csvs(args)
    except (OSError, subprocess.CalledProcessError) as e:
        print("tracelens_csv_to_json: %s: %s" % (args.dir, e), file=sys.stderr)
        return 2
    origin = {"directory": args.dir}
    if args.git:
        commit = subprocess.run(["git", "-C", args.git, "rev-parse", args.rev],
                                capture_output=True, check=True).stdout.decode().strip()
        origin["commit"] = commit
    for m in args.meta:
        key, _, value = m.partition("=")
        origin[key] = value
    sheets = {}
    for name, data in files:
        sheet = convert(name, data)
        if sheet is None:
            continue
        sheet["blob"] = blob_id(data)
        sheet["bytes"] = len(data)
        sheets[name[:-4]] = sheet
    doc = {"converter": "tests/tools/tracelens_csv_to_json.py", "origin": origin,
           "sheets": sheets}
    write(args.output, doc)
    return 0


def write(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
