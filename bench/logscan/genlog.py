#!/usr/bin/env python3
"""Generates a synthetic Megatron-LM training log for the logscan benchmark.

Usage: genlog.py OUT SIZE_MB ITER_PERCENT [SEED]

The iteration lines follow Megatron-LM's `training_log` layout (NVIDIA/Megatron-LM,
megatron/training/training.py, function `training_log`; core_v0.16 form with the microsecond
timestamp), the noise lines imitate what surrounds them in real runs: NCCL INFO chatter,
Python warnings with their source line, timer blocks (megatron/core/timers.py), memory reports
(report_memory), checkpoint messages, torch C++ warnings and the odd traceback frame. The
share of iteration lines among all lines is ITER_PERCENT (e.g. 1 or 50). Deterministic for a
given seed.
"""
import random
import sys

# (weight, template): NCCL chatter, warnings and timers are common; checkpoint messages,
# memory reports and traceback frames are rare, as in real runs.
NOISE_TEMPLATES = [
    (12, "node{n:03d}:{pid}:{tid} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> {r2}[{r2}] "
         "via P2P/IPC/read"),
    (6, "node{n:03d}:{pid}:{tid} [{r}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1"),
    (6, "node{n:03d}:{pid}:{tid} [{r}] NCCL INFO comm 0x{h:x} rank {r} nRanks 64 nNodes 8 "
        "localRanks 8 localRank {r} MNNVL 0"),
    (6, "node{n:03d}:{pid}:{tid} [{r}] NCCL INFO NET/IB : Using [0]mlx5_{r}:1/IB "
        "[1]mlx5_{r2}:1/IB ; OOB ib0:10.0.{n}.{r}<0>"),
    (8, "/usr/local/lib/python3.10/dist-packages/torch/distributed/fsdp/_init_utils.py:{ln}: "
        "UserWarning: FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.FULL_SHARD"),
    (8, "/usr/local/lib/python3.10/dist-packages/transformer_engine/pytorch/attention.py:{ln}: "
        "DeprecationWarning: fused_attention backend selection is deprecated"),
    (8, "  warnings.warn("),
    (4, "  File \"/workspace/megatron/core/pipeline_parallel/schedules.py\", line {ln}, "
        "in forward_step"),
    (4, "    output_tensor, loss_func = forward_step_func(data_iterator, model)"),
    (6, "[rank{r}]:[W{md} {hh:02d}:{mm:02d}:{ss:02d}.{us} ProcessGroupNCCL.cpp:{ln}] Warning: "
        "TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point collectives."),
    (4, "(min, max) time across ranks (ms):"),
    (4, "    forward-backward ...............................: ({a:.2f}, {b:.2f})"),
    (4, "    forward-compute ................................: ({a:.2f}, {b:.2f})"),
    (4, "    backward-compute ...............................: ({a:.2f}, {b:.2f})"),
    (4, "    optimizer ......................................: ({a:.2f}, {b:.2f})"),
    (4, "    all-grads-sync .................................: ({a:.2f}, {b:.2f})"),
    (3, "INFO:megatron.core.dist_checkpointing.strategies.torch:Global metadata computed in "
        "{a:.3f} s"),
    (3, "WARNING:megatron.core.rerun_state_machine:Result validation enabled"),
    (2, "> building train, validation, and test datasets for GPT ..."),
    (2, "    reading sizes... done {a:.2f} seconds"),
    (0.1, " [{y}-{mo:02d}-{d:02d} {hh:02d}:{mm:02d}:{ss:02d}.{us}] saving checkpoint at iteration "
          "{it:7d} to /checkpoints/llama3-8b in torch_dist format"),
    (0.1, "  successfully saved checkpoint from iteration {it:7d} to /checkpoints/llama3-8b "
          "[ t 1/8, p 1/1 ]"),
    (0.1, "[Rank {r}] (after {it} iterations) memory (MB) | allocated: {a:.2f} | max allocated: "
          "{b:.2f} | reserved: {b:.2f} | max reserved: {b:.2f}"),
    (0.05, "Traceback (most recent call last):"),
]

ITER_TEMPLATE = (
    " [{y}-{mo:02d}-{d:02d} {hh:02d}:{mm:02d}:{ss:02d}.{us}] iteration {it:8d}/{total:8d} |"
    " consumed samples: {cs:12d} | elapsed time per iteration (ms): {ms:.1f} |"
    " throughput per GPU (TFLOP/s/GPU): {tf:.1f} | learning rate: {lr:.6E} |"
    " global batch size: {gbs:5d} | lm loss: {loss:.6E} | loss scale: 1.0 |"
    " grad norm: {gn:.3f} | num zeros: 0.0 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 |"
)


def fields(rng, it):
    return dict(
        n=rng.randrange(64), pid=rng.randrange(1000, 99999), tid=rng.randrange(1000, 99999),
        r=rng.randrange(8), r2=rng.randrange(8), c=rng.randrange(32), h=rng.getrandbits(44),
        ln=rng.randrange(10, 2000), md=rng.randrange(100, 1231), hh=rng.randrange(24),
        mm=rng.randrange(60), ss=rng.randrange(60), us=rng.randrange(10**5, 10**6),
        a=rng.uniform(0.1, 900.0), b=rng.uniform(900.0, 2000.0), y=2026, mo=rng.randrange(1, 13),
        d=rng.randrange(1, 29), it=it,
    )


def main():
    if len(sys.argv) not in (4, 5):
        sys.stderr.write(__doc__)
        return 2
    out, size_mb, pct = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) == 5 else 1234)
    target = int(size_mb * 1024 * 1024)
    # A pool of pre-rendered noise lines keeps generation fast and the text varied.
    pool = []
    weights = [w for w, _ in NOISE_TEMPLATES]
    templates = [t for _, t in NOISE_TEMPLATES]
    for tmpl in rng.choices(templates, weights, k=20000):
        f = fields(rng, rng.randrange(1, 10**6))
        pool.append(tmpl.format(**f) + "\n")
    total_iters = 10**7
    written = 0
    it = 0
    lines = 0
    iters = 0
    with open(out, "w", encoding="ascii") as fh:
        buf = []
        while written < target:
            if rng.random() * 100.0 < pct:
                it += 1
                f = fields(rng, it)
                f.update(total=total_iters, cs=it * 512, ms=rng.uniform(400.0, 9000.0),
                         tf=rng.uniform(100.0, 500.0), lr=rng.uniform(1e-6, 3e-4), gbs=512,
                         loss=rng.uniform(1.5, 11.0), gn=rng.uniform(0.1, 10.0))
                line = ITER_TEMPLATE.format(**f) + "\n"
                iters += 1
            else:
                line = pool[rng.randrange(len(pool))]
            buf.append(line)
            written += len(line)
            lines += 1
            if len(buf) >= 65536:
                fh.write("".join(buf))
                buf = []
        fh.write("".join(buf))
    sys.stdout.write("%d %d %d\n" % (written, lines, iters))
    return 0


if __name__ == "__main__":
    sys.exit(main())
