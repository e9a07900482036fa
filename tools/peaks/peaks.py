#!/usr/bin/env python3
"""tplua's peaks microbenchmark: what this machine achieves, measured with torch.

It times GEMMs (the shapes given with --gemm, each forward and, with --backward, its dX and dW
GEMMs; a large square GEMM per precision, fp8 through torch._scaled_mm where the device has it)
and the device memory bandwidth (a device-to-device copy, bytes counted read + write, and a
read-only sum), on the first GPU torch sees (CUDA or ROCm) or else on the CPU, where every GEMM
dimension is capped at --cpu-cap and the record says so (scaled_down). Each figure: warm-up
calls, then repeated timed samples (CUDA events on a GPU, time.perf_counter on the CPU, the
device synchronised), the best and the median per-call time of the samples; TFLOP/s =
2 * M * N * K / time.

Progress goes to stdout, one line per figure; the results go to --out as JSON (schema
tplua.peaks/1, docs/peaks.md), written atomically (a temporary file in the same directory,
fsync, rename). Standard library and torch only; no network.
Exit status: 0 results written, 1 a failure (the reason on stderr), 2 bad arguments.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time

SCHEMA = "tplua.peaks/1"
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
SQUARE_DEFAULT = "bf16,fp16,fp32,tf32,fp8"
CPU_CAP = 1024
GIB = 1024 ** 3
MIB = 1024 ** 2

# Timing defaults per device: warm-up calls, timed samples, the shortest sample (calls are
# batched into one sample until it lasts this long: a GPU launch costs microseconds), and the
# time one figure may take (fewer samples when one is slow, never fewer than MIN_SAMPLES).
DEFAULTS = {
    "cuda": {"warmup": 10, "repeats": 20, "min_sample_ms": 20.0, "budget_s": 2.0,
             "memory_mib": 2048},
    "cpu": {"warmup": 1, "repeats": 5, "min_sample_ms": 10.0, "budget_s": 1.0,
            "memory_mib": 128},
}
MIN_SAMPLES = 3


def shape_arg(text):
    """LABEL=MxNxK -> (label, m, n, k)."""
    m = re.match(r"^([A-Za-z][\w.-]*)=(\d+)x(\d+)x(\d+)$", text)
    if not m or min(int(m.group(i)) for i in (2, 3, 4)) < 1:
        raise argparse.ArgumentTypeError(
            "'%s': LABEL=MxNxK expected (positive whole numbers, e.g. qkv=4096x6144x4096)" % text)
    return m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))


def precision_list(text):
    out = [p.strip() for p in text.split(",") if p.strip()]
    for p in out:
        if p not in PRECISIONS:
            raise argparse.ArgumentTypeError(
                "'%s': unknown precision (%s)" % (p, ", ".join(PRECISIONS)))
    return out


def positive(kind):
    def conv(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError("'%s': a number expected" % text)
        if not v > 0:
            raise argparse.ArgumentTypeError("'%s': a positive number expected" % text)
        return v
    return conv


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="peaks", allow_abbrev=False,
        description="Measure achievable GEMM TFLOP/s and memory bandwidth with torch.")
    a = p.add_argument
    a("--out", required=True, help="where to write the results (JSON, tplua.peaks/1)")
    a("--device", choices=["auto", "cpu", "cuda"], default="auto",
      help="auto: the first GPU torch sees (CUDA or ROCm), else the CPU")
    a("--gemm", type=shape_arg, action="append", default=[], metavar="LABEL=MxNxK",
      help="a GEMM of the model: Y[M,N] = X[M,K] W[N,K]^T, as a linear layer computes it")
    a("--dtype", choices=PRECISIONS, default="bf16", help="precision of the --gemm shapes")
    a("--backward", action="store_true",
      help="also each --gemm shape's backward GEMMs: dX = dY W and dW = dY^T X")
    a("--square", type=precision_list, default=precision_list(SQUARE_DEFAULT),
      help="precisions of the square GEMM (default %s; empty for none)" % SQUARE_DEFAULT)
    a("--square-n", type=positive(int), default=8192, help="size of the square GEMM")
    a("--memory-mib", type=positive(int), default=None,
      help="size of each buffer of the bandwidth test (default: %d MiB on a GPU, %d on the "
           "CPU)" % (DEFAULTS["cuda"]["memory_mib"], DEFAULTS["cpu"]["memory_mib"]))
    a("--no-memory", action="store_true", help="skip the bandwidth test")
    a("--warmup", type=positive(int), default=None,
      help="calls before timing, the last one timed to size the samples (default: 10 GPU, "
           "1 CPU)")
    a("--repeats", type=positive(int), default=None,
      help="timed samples per figure (default: 20 GPU, 5 CPU)")
    a("--min-sample-ms", type=float, default=None,
      help="calls are batched until a sample lasts this long (default: 20 GPU, 10 CPU)")
    a("--budget-s", type=positive(float), default=None,
      help="time one figure may take; fewer samples when a call is slow (default: 2 GPU, 1 CPU)")
    a("--cpu-cap", type=positive(int), default=CPU_CAP,
      help="on the CPU, the largest GEMM dimension (default %d)" % CPU_CAP)
    a("--model", default=None, help="the model the shapes come from (kept in the results)")
    a("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.min_sample_ms is not None and args.min_sample_ms < 0:
        p.error("argument --min-sample-ms: a number >= 0 expected")
    labels = [g[0] for g in args.gemm]
    for lab in labels:
        if labels.count(lab) > 1:
            p.error("argument --gemm: label '%s' given twice" % lab)
    return args


def say(fmt, *values):
    sys.stdout.write("peaks: " + (fmt % values if values else fmt) + "\n")
    sys.stdout.flush()


def first_line(e):
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


def is_oom(e):
    return "out of memory" in str(e).lower() or type(e).__name__ == "OutOfMemoryError"


class Unsupported(Exception):
    """A figure this device or this torch cannot give; the message is ours, safe to print."""


def why_failed(e):
    """Why a figure was not measured: the reason kept in the results, and the words for the
    progress line. tplua's log reader watches that line for failure signatures ("CUDA error: ",
    "out of memory", ...), which one figure's failure must not pass for: the run goes on. So
    the line names torch's exceptions by their kind only; the results keep their message."""
    if isinstance(e, Unsupported):
        return str(e), str(e)
    if is_oom(e):
        return ("not enough device memory for this shape (%s)" % first_line(e),
                "not enough device memory for this shape")
    return first_line(e), "%s raised by torch (its message is in the results)" % type(e).__name__


# ---------------------------------------------------------------------------------------------
# The device.

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags():
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    flags.update(value.split())
    except OSError:
        pass
    return flags


# Matrix instructions that make bf16 and fp16 matrix products native on a CPU (x86 AVX-512 /
# AMX, Arm BF16 / FP16); without them torch falls back to slow generic code or refuses.
CPU_NATIVE = {
    "bf16": ({"avx512_bf16", "amx_bf16", "bf16"}, "avx512_bf16, amx_bf16 or Arm bf16"),
    "fp16": ({"avx512_fp16", "amx_fp16", "asimdhp"}, "avx512_fp16, amx_fp16 or Arm asimdhp"),
}


class Device:
    def __init__(self, torch, want):
        self.torch = torch
        cuda = torch.cuda.is_available()
        if want == "cuda" and not cuda:
            raise RuntimeError("--device cuda: torch sees no GPU (torch.cuda.is_available() is "
                               "false)")
        self.kind = "cuda" if cuda and want != "cpu" else "cpu"
        self.info = {"device": self.kind, "torch": torch.__version__}
        hip = getattr(torch.version, "hip", None)
        if self.kind == "cuda":
            self.dev = torch.device("cuda", torch.cuda.current_device())
            props = torch.cuda.get_device_properties(self.dev)
            self.info["gpu"] = torch.cuda.get_device_name(self.dev)
            self.info["device_count"] = torch.cuda.device_count()
            self.info["sm_count"] = props.multi_processor_count
            self.info["memory_bytes"] = props.total_memory
            self.arch = None
            if hip:
                self.info["runtime"] = "HIP " + hip
                arch = getattr(props, "gcnArchName", "") or ""
                self.arch = arch.split(":")[0] or None
            else:
                self.info["runtime"] = "CUDA " + str(torch.version.cuda)
                self.arch = "sm_%d%d" % (props.major, props.minor)
                self.info["capability"] = "%d.%d" % (props.major, props.minor)
            if self.arch:
                self.info["arch"] = self.arch
        else:
            self.dev = torch.device("cpu")
            self.arch = None
            self.flags = cpu_flags()
            self.info["cpu"] = cpu_name()
            self.info["threads"] = torch.get_num_threads()
            blas = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
            if blas:
                self.info["blas"] = blas.group(1)
        self.hip = bool(hip) and self.kind == "cuda"

    def sync(self):
        if self.kind == "cuda":
            self.torch.cuda.synchronize(self.dev)

    def release(self):
        if self.kind == "cuda":
            self.torch.cuda.empty_cache()

    def cpu_native(self, precision):
        """None when the CPU multiplies `precision` natively, else why not."""
        if precision == "fp32":
            return None
        if precision in ("tf32", "fp8"):
            return "%s is a GPU tensor-core format" % precision
        names, said = CPU_NATIVE[precision]
        if self.flags & names:
            return None
        return "the CPU has no %s matrix instructions (%s)" % (precision, said)


# ---------------------------------------------------------------------------------------------
# Timing.

def measure(dev, fn, opts):
    """Times fn(): warm-up calls, then samples of `calls` calls each. Returns the per-call
    seconds (best, median), the number of samples and the calls per sample."""
    torch = dev.torch
    for _ in range(opts["warmup"] - 1):
        fn()
    dev.sync()
    if dev.kind == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)

        def sample(calls):
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
    else:
        def sample(calls):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            return time.perf_counter() - t0

    # The last warm-up call, timed, says how many calls make a sample and how many samples fit
    # in the budget.
    one = max(sample(1), 1e-9)
    calls = max(1, int(math.ceil(opts["min_sample_ms"] / 1000.0 / one)))
    samples = int(opts["budget_s"] / (one * calls))
    samples = max(MIN_SAMPLES, min(opts["repeats"], samples))
    times = [sample(calls) / calls for _ in range(samples)]
    return min(times), statistics.median(times), samples, calls


# ---------------------------------------------------------------------------------------------
# GEMMs.

def torch_dtype(torch, precision):
    return {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
            "fp16": torch.float16}[precision]


class Tf32:
    """matmul's TF32 switch, set for the block and restored after."""

    def __init__(self, torch, on):
        self.torch, self.on = torch, on

    def __enter__(self):
        m = self.torch.backends.cuda.matmul
        self.saved = m.allow_tf32
        m.allow_tf32 = self.on

    def __exit__(self, *exc):
        self.torch.backends.cuda.matmul.allow_tf32 = self.saved
        return False


def fp8_dtypes(dev):
    """The e4m3 formats to try, the device's own first (MI300's gfx942 has the fnuz variant)."""
    torch = dev.torch
    names = ["float8_e4m3fn", "float8_e4m3fnuz"]
    if dev.hip and (dev.arch or "").startswith("gfx94"):
        names.reverse()
    return [getattr(torch, n) for n in names if hasattr(torch, n)]


def product_dims(pass_, M, N, K):
    """The m, n, k of the GEMM a pass of the linear layer Y[M,N] = X[M,K] W[N,K]^T computes:
    forward Y = X W^T (M, N, K); dX[M,K] = dY W (M, K, N); dW[N,K] = dY^T X (N, K, M)."""
    return {"fwd": (M, N, K), "dx": (M, K, N), "dw": (N, K, M)}[pass_]


def gemm_call(dev, precision, pass_, M, N, K):
    """The tensors and the call of one pass of a linear layer of forward shape M, N, K, in the
    layout training uses: forward torch.mm(X, W.t()), dX torch.mm(dY, W), dW torch.mm(dY.t(), X).
    For fp8, torch._scaled_mm's own layout (A row-major, B column-major) with the pass's m, n, k.
    Returns the call and what the result records about it."""
    torch = dev.torch
    d = dev.dev
    if precision == "fp8":
        return fp8_call(dev, *product_dims(pass_, M, N, K))
    dt = torch_dtype(torch, precision)
    if pass_ == "fwd":
        x = torch.randn(M, K, device=d, dtype=dt)
        w = torch.randn(N, K, device=d, dtype=dt)
        y = torch.empty(M, N, device=d, dtype=dt)
        return (lambda: torch.mm(x, w.t(), out=y)), {}
    dy = torch.randn(M, N, device=d, dtype=dt)
    if pass_ == "dx":
        w = torch.randn(N, K, device=d, dtype=dt)
        dx = torch.empty(M, K, device=d, dtype=dt)
        return (lambda: torch.mm(dy, w, out=dx)), {}
    x = torch.randn(M, K, device=d, dtype=dt)
    dw = torch.empty(N, K, device=d, dtype=dt)
    return (lambda: torch.mm(dy.t(), x, out=dw)), {}


def fp8_call(dev, m, n, k):
    """An e4m3 GEMM [m,k] x [k,n] through torch._scaled_mm (unit scales, bf16 output, fast
    accumulation where this torch offers it)."""
    torch = dev.torch
    d = dev.dev
    if dev.kind != "cuda":
        raise Unsupported("fp8 GEMMs need a GPU")
    if not hasattr(torch, "_scaled_mm"):
        raise Unsupported("torch %s has no torch._scaled_mm" % torch.__version__)
    if m % 16 or n % 16 or k % 16:
        raise Unsupported("torch._scaled_mm needs dimensions divisible by 16")
    last = None
    for f8 in fp8_dtypes(dev):
        try:
            a = torch.randn(m, k, device=d, dtype=torch.bfloat16).to(f8)
            b = torch.randn(n, k, device=d, dtype=torch.bfloat16).to(f8).t()
            one = torch.ones((), device=d, dtype=torch.float32)
            fast = {"use_fast_accum": True}

            def call():
                return torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16, **fast)
            try:
                call()
            except TypeError:
                fast = {}
                call()
            dev.sync()
            return call, {"fp8_format": str(f8).replace("torch.", ""), "fast_accum": bool(fast)}
        except Exception as e:  # noqa: BLE001 - the next format, or the reason
            if is_oom(e):
                raise
            last = e
    if last is None:
        raise Unsupported("this torch has no float8 e4m3 dtype")
    raise last


def run_gemm(dev, opts, entry, precision, pass_, forward):
    """Measures one pass of the linear layer of forward shape `forward` (M, N, K) into `entry`
    (its m, n, k already set): tflops, or skipped and why."""
    flops = 2.0 * entry["m"] * entry["n"] * entry["k"]
    try:
        with Tf32(dev.torch, precision == "tf32"):
            call, extra = gemm_call(dev, precision, pass_, *forward)
            best, median, samples, calls = measure(dev, call, opts)
    except Exception as e:  # noqa: BLE001 - one figure fails, the others are still measured
        entry["skipped"], entry["said"] = why_failed(e)
        dev.release()
        return entry
    entry.update(extra)
    entry["tflops"] = flops / best / 1e12
    entry["tflops_median"] = flops / median / 1e12
    entry["seconds"] = median
    entry["seconds_best"] = best
    entry["reps"] = samples
    entry["calls_per_rep"] = calls
    dev.release()
    return entry


def line_of(entry, what):
    if "skipped" in entry:
        return "%s: skipped: %s" % (what, entry.pop("said", entry["skipped"]))
    return "%s: %.4g TFLOP/s (median %.4g; %d x %d calls, %.4g ms each)" % (
        what, entry["tflops"], entry["tflops_median"], entry["reps"], entry["calls_per_rep"],
        entry["seconds"] * 1e3)


# ---------------------------------------------------------------------------------------------
# Memory bandwidth.

def run_memory(dev, opts, mib):
    torch = dev.torch
    nbytes = mib * MIB
    if dev.kind == "cuda":
        free, _ = torch.cuda.mem_get_info(dev.dev)
        if 2 * nbytes > free // 2:
            nbytes = max(MIB, (free // 4) // MIB * MIB)
    n = nbytes // 4
    out = {"method": "copy", "counted": "read+write", "buffer_bytes": n * 4}
    try:
        src = torch.randn(n, device=dev.dev, dtype=torch.float32)
        dst = torch.empty_like(src)
        best, median, samples, calls = measure(dev, lambda: dst.copy_(src), opts)
        moved = 2 * n * 4
        out.update({"bytes": moved, "tbs": moved / best / 1e12, "tbs_median": moved / median / 1e12,
                    "seconds": median, "reps": samples, "calls_per_rep": calls})
        del dst
        dev.release()
        best, median, samples, calls = measure(dev, lambda: src.sum(), opts)
        read = n * 4
        out["reduction"] = {"method": "sum", "counted": "read", "bytes": read,
                            "tbs": read / best / 1e12, "tbs_median": read / median / 1e12,
                            "seconds": median, "reps": samples, "calls_per_rep": calls}
    except Exception as e:  # noqa: BLE001
        out["skipped"], out["said"] = why_failed(e)
    dev.release()
    return out


# ---------------------------------------------------------------------------------------------
# The whole measurement.

def cap(v, limit):
    return min(v, limit) if limit else v


def measure_all(torch, args):
    dev = Device(torch, args.device)
    d = DEFAULTS[dev.kind]
    opts = {
        "warmup": args.warmup or d["warmup"],
        "repeats": args.repeats or d["repeats"],
        "min_sample_ms": d["min_sample_ms"] if args.min_sample_ms is None else args.min_sample_ms,
        "budget_s": args.budget_s or d["budget_s"],
    }
    limit = args.cpu_cap if dev.kind == "cpu" else None
    torch.manual_seed(args.seed)
    res = {"schema": SCHEMA}
    res.update(dev.info)
    res["measured_at"] = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    res["python"] = platform.python_version()
    notes = []
    where = res.get("gpu") or res.get("cpu")
    say("device %s: %s (torch %s%s)", dev.kind, where, res["torch"],
        ", " + res["runtime"] if res.get("runtime") else "")
    if limit:
        notes.append("CPU: every GEMM dimension capped at %d" % limit)
    if res.get("blas") == "generic":
        notes.append("torch was built with generic BLAS (BLAS_INFO=generic): its fp32 matrix "
                     "products are far below what this CPU can do")
        say("on the CPU: every GEMM dimension capped at %d, timing with time.perf_counter", limit)

    # The precision the model's shapes are measured in: the requested one, or fp32 on a CPU
    # that lacks it.
    gemm_precision = args.dtype
    if dev.kind == "cpu":
        why = dev.cpu_native(args.dtype)
        if why:
            gemm_precision = "fp32"
            notes.append("%s requested: %s; the model's GEMMs measured in fp32" % (args.dtype, why))
            say("%s requested: %s: the model's GEMMs are measured in fp32", args.dtype, why)
    res["precision"] = args.dtype
    if args.model:
        res["model"] = args.model
    scaled = False
    gemms = []
    for label, m, n, k in args.gemm:
        forward = (cap(m, limit), cap(n, limit), cap(k, limit))
        for pass_ in ("fwd", "dx", "dw") if args.backward else ("fwd",):
            dims = product_dims(pass_, *forward)
            e = {"label": label if pass_ == "fwd" else label + "_" + pass_, "op": label,
                 "pass": pass_, "dtype": gemm_precision,
                 "m": dims[0], "n": dims[1], "k": dims[2]}
            if gemm_precision != args.dtype:
                e["dtype_requested"] = args.dtype
            e["scaled_down"] = forward != (m, n, k)
            if e["scaled_down"]:
                planned = product_dims(pass_, m, n, k)
                e["planned"] = {"m": planned[0], "n": planned[1], "k": planned[2]}
                scaled = True
            run_gemm(dev, opts, e, gemm_precision, pass_, forward)
            say(line_of(e, "gemm %s %dx%dx%d %s" % (e["label"], e["m"], e["n"], e["k"],
                                                     gemm_precision)))
            gemms.append(e)
    res["gemm"] = gemms

    square = {}
    n_sq = cap(args.square_n, limit)
    if n_sq != args.square_n:
        scaled = True
    for precision in args.square:
        if dev.kind == "cpu" and dev.cpu_native(precision):
            square[precision] = {"n": n_sq, "skipped": dev.cpu_native(precision)}
            say("square %s: skipped: %s", precision, square[precision]["skipped"])
            continue
        e = {"label": "square_" + precision, "m": n_sq, "n": n_sq, "k": n_sq}
        run_gemm(dev, opts, e, precision, "fwd", (n_sq, n_sq, n_sq))
        s = {"n": n_sq}
        if n_sq != args.square_n:
            s["planned"] = args.square_n
        for key in ("tflops", "tflops_median", "seconds", "reps", "calls_per_rep", "skipped",
                    "fp8_format", "fast_accum"):
            if key in e:
                s[key] = e[key]
        square[precision] = s
        say(line_of(e, "square %s %d^3" % (precision, n_sq)))
    res["square"] = square

    if not args.no_memory:
        mem = run_memory(dev, opts, args.memory_mib or d["memory_mib"])
        res["memory"] = mem
        if "skipped" in mem:
            say("memory: skipped: %s", mem.pop("said"))
        else:
            say("memory copy %.4g GiB x 2 (read+write): %.4g TB/s (median %.4g); read-only sum: "
                "%.4g TB/s", mem["buffer_bytes"] / GIB, mem["tbs"], mem["tbs_median"],
                mem["reduction"]["tbs"])
            res["bandwidth_tbs"] = mem["tbs"]

    # The measured peak per precision: the best of its figures.
    best = {}
    for e in gemms + [dict(v, dtype=p) for p, v in square.items()]:
        t = e.get("tflops")
        if t is not None and t > best.get(e["dtype"], 0):
            best[e["dtype"]] = t
    res["tflops"] = best
    res["scaled_down"] = scaled
    if limit:
        res["cpu_cap"] = limit
    res["timing"] = {
        "clock": "cuda events" if dev.kind == "cuda" else "time.perf_counter",
        "warmup": opts["warmup"], "repeats": opts["repeats"], "min_reps": MIN_SAMPLES,
        "min_sample_ms": opts["min_sample_ms"], "budget_s": opts["budget_s"],
        "statistic": "best and median per-call time over the timed samples",
    }
    res["notes"] = notes
    return res


# ---------------------------------------------------------------------------------------------
# Output.

def finite(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return v


def write_atomic(path, doc):
    """Writes `doc` as JSON to `path`: a temporary file beside it, fsync, rename, fsync of the
    directory; a reader sees the old file or the new one, never part of one."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=directory)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "w") as f:
            json.dump(finite(doc), f, indent=2, sort_keys=True, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError as e:
        sys.stderr.write("peaks: PyTorch is not installed for %s: %s\n" % (sys.executable, e))
        return 1
    t0 = time.perf_counter()
    try:
        res = measure_all(torch, args)
    except RuntimeError as e:
        sys.stderr.write("peaks: %s\n" % first_line(e))
        return 1
    res["elapsed_s"] = time.perf_counter() - t0
    try:
        write_atomic(args.out, res)
    except OSError as e:
        sys.stderr.write("peaks: cannot write %s: %s\n" % (args.out, e))
        return 1
    say("wrote %s", args.out)
    say("measured peaks: %s; memory %s TB/s", ", ".join(
        "%s %.4g TFLOP/s" % (p, res["tflops"][p]) for p in PRECISIONS if p in res["tflops"])
        or "none", "%.4g" % res["bandwidth_tbs"] if "bandwidth_tbs" in res else "-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
