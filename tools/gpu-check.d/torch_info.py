#!/usr/bin/env python3
"""What this interpreter's torch offers tools/gpu-check: Python and torch versions, the build's
CUDA or HIP version, the GPU torch sees, and one bf16 matrix product run on it (on the CPU with
--device cpu), so that a torch without kernels for this GPU fails here in seconds rather than
minutes into training. Prints one JSON object on stdout; what failed is in it ("error",
"matmul_error"). Exit status 0, 2 on bad arguments. Standard library and torch only.
"""

import argparse
import json
import platform
import sys
import time


def main(argv):
    p = argparse.ArgumentParser(prog="torch_info", allow_abbrev=False)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = p.parse_args(argv)
    out = {"python": platform.python_version(), "executable": sys.executable}
    try:
        import torch
    except Exception as e:  # an import error of any kind is the answer, not a crash
        out["error"] = "import torch: %s: %s" % (type(e).__name__, e)
        print(json.dumps(out))
        return 0
    out["torch"] = torch.__version__
    out["cuda_build"] = torch.version.cuda
    out["hip_build"] = getattr(torch.version, "hip", None)
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["threads"] = torch.get_num_threads()
    if out["cuda_available"]:
        out["device_count"] = torch.cuda.device_count()
        prop = torch.cuda.get_device_properties(0)
        out["device_name"] = prop.name
        out["capability"] = "%d.%d" % (prop.major, prop.minor)
        out["memory_bytes"] = prop.total_memory
        out["sm_count"] = prop.multi_processor_count
        out["bf16_supported"] = bool(torch.cuda.is_bf16_supported())
    out["matmul_device"] = a.device
    try:
        if a.device == "cuda" and not out["cuda_available"]:
            raise RuntimeError("torch.cuda.is_available() is False")
        dev = torch.device(a.device)
        x = torch.randn(1024, 1024, device=dev).to(torch.bfloat16)
        y = torch.randn(1024, 1024, device=dev).to(torch.bfloat16)
        z = x @ y  # the first call loads the library's kernels
        if a.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        z = x @ y
        if a.device == "cuda":
            torch.cuda.synchronize()
        out["matmul_ms"] = (time.perf_counter() - t0) * 1000.0
        ref = x.float() @ y.float()
        err = float((z.float() - ref).abs().max() / ref.abs().max())
        out["matmul_ok"] = bool(torch.isfinite(z.float()).all()) and err < 0.05
        if not out["matmul_ok"]:
            out["matmul_error"] = "result off by %.3g of its largest entry" % err
    except Exception as e:  # reported in the JSON: the check goes on and says why
        out["matmul_ok"] = False
        out["matmul_error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
