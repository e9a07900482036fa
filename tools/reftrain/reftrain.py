#!/usr/bin/env python3
"""tplua reference trainer: a small GPT-style (Llama-shaped) model trained with PyTorch DDP.

It reads Megatron-LM's argument names for the settings tplua's unified config covers and prints
what Megatron-LM's pretrain_gpt.py prints (argument dump, parameter count, one iteration line per
log interval, memory reports on GPUs, the closing datetime lines), so that tplua parses it with
its Megatron parser. Formats: docs/reftrain.md; Megatron's are described in
megatron/training/training.py (training_log) and arguments.py (_print_args).

Ranks come from the environment, whoever starts them: torchrun (RANK, LOCAL_RANK, WORLD_SIZE),
srun (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS) or `tplua ranks`; MASTER_ADDR and MASTER_PORT
name the rendezvous. Backend: nccl on GPUs, gloo on CPU. Global rank 0 prints the log.
With --profile it traces a window of steps, as Megatron does: torch.profiler, one Chrome trace per
rank (--use-pytorch-profiler), or between cudaProfilerStart and cudaProfilerStop for nsys.
Exit status: 0 done, 1 a failure (the reason on stderr), 2 bad arguments.
"""

import argparse
import contextlib
import datetime
import json
import math
import os
import re
import struct
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
except ImportError as e:  # pragma: no cover - reported to the user
    sys.stderr.write("reftrain: PyTorch is not installed for %s: %s\n" % (sys.executable, e))
    sys.exit(1)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="reftrain", allow_abbrev=False)
    a = p.add_argument
    # Model (Megatron _add_network_size_args names).
    a("--num-layers", type=int, default=2)
    a("--hidden-size", type=int, default=64)
    a("--ffn-hidden-size", type=int, default=None)
    a("--num-attention-heads", type=int, default=4)
    a("--num-query-groups", type=int, default=None)
    a("--padded-vocab-size", type=int, default=256)
    a("--max-position-embeddings", type=int, default=None)
    a("--rotary-base", type=float, default=10000.0)
    a("--norm-epsilon", type=float, default=1e-5)
    a("--untie-embeddings-and-output-weights", action="store_true")
    # Schedule and optimiser (_add_training_args, _add_learning_rate_args, regularization).
    a("--seq-length", type=int, default=64)
    a("--micro-batch-size", type=int, default=4)
    a("--global-batch-size", type=int, default=None)
    a("--train-iters", type=int, default=50)
    a("--lr", type=float, default=1e-3)
    a("--min-lr", type=float, default=0.0)
    a("--lr-warmup-iters", type=int, default=0)
    a("--lr-decay-style", choices=["cosine", "linear", "constant"], default="cosine")
    a("--lr-decay-iters", type=int, default=None)
    a("--weight-decay", type=float, default=0.1)
    a("--adam-beta1", type=float, default=0.9)
    a("--adam-beta2", type=float, default=0.95)
    a("--adam-eps", type=float, default=1e-8)
    a("--clip-grad", type=float, default=1.0)
    a("--init-method-std", type=float, default=0.02)
    a("--seed", type=int, default=1234)
    a("--log-interval", type=int, default=1)
    a("--bf16", action="store_true")
    a("--fp16", action="store_true")
    a("--tensor-model-parallel-size", type=int, default=1)
    a("--pipeline-model-parallel-size", type=int, default=1)
    # Data: synthetic tokens (no file needed), the same for every world layout.
    a("--mock-data", action="store_true", help="synthetic tokens (the default)")
    a("--synthetic-kind", choices=["repeat", "random"], default="repeat",
      help="repeat: a fixed token pattern (learnable); random: uniform tokens (loss stays near ln V)")
    a("--data-path", default=None,
      help="PREFIX of a Megatron indexed dataset (PREFIX.bin, PREFIX.idx) instead of synthetic data")
    # Runtime.
    a("--device", choices=["auto", "cpu", "cuda"], default="auto")
    a("--distributed-backend", choices=["auto", "gloo", "nccl"], default="auto")
    a("--inject-nan-at", type=int, default=0, help="make the loss NaN from this iteration on")
    a("--fail-at", type=int, default=0, help="exit 1 with an error at this iteration (rank 0)")
    a("--sleep-ms", type=float, default=0.0, help="extra time per iteration (slow runs in tests)")
    # Profiling (Megatron's _add_training_args names and meaning: the steps after
    # --profile-step-start completed iterations, up to iteration --profile-step-end).
    a("--profile", action="store_true", help="profile the steps of the range below")
    a("--use-pytorch-profiler", action="store_true",
      help="torch.profiler, a Chrome trace per rank; else cudaProfilerStart/Stop (for nsys)")
    a("--profile-step-start", type=int, default=10)
    a("--profile-step-end", type=int, default=12)
    a("--profile-ranks", type=int, nargs="+", default=None, help="the ranks that profile (all)")
    a("--profile-dir", default="profile", help="where rank<r>_trace.json are written")
    a("--profile-memory", action="store_true",
      help="with --use-pytorch-profiler: also the allocator's events (profile_memory=True)")
    args = p.parse_args(argv)
    if args.tensor_model_parallel_size != 1 or args.pipeline_model_parallel_size != 1:
        p.error("only tensor and pipeline parallel size 1 are supported (data parallel only)")
    if args.ffn_hidden_size is None:
        args.ffn_hidden_size = 4 * args.hidden_size
    if args.num_query_groups is None:
        args.num_query_groups = args.num_attention_heads
    if args.max_position_embeddings is None:
        args.max_position_embeddings = args.seq_length
    if args.lr_decay_iters is None:
        args.lr_decay_iters = args.train_iters
    if args.hidden_size % args.num_attention_heads:
        p.error("--hidden-size must be a multiple of --num-attention-heads")
    if args.num_attention_heads % args.num_query_groups:
        p.error("--num-attention-heads must be a multiple of --num-query-groups")
    if args.seq_length > args.max_position_embeddings:
        p.error("--seq-length exceeds --max-position-embeddings")
    if args.profile and not 0 <= args.profile_step_start < args.profile_step_end:
        p.error("--profile-step-end must be greater than --profile-step-start (at least 0)")
    for name in ("num_layers", "hidden_size", "seq_length", "micro_batch_size", "train_iters",
                 "log_interval", "padded_vocab_size"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    return args


def env_int(*names, default=None):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            return int(v)
    return default


def world_from_env():
    """Rank, local rank and world size from torchrun's, Slurm's or tplua's variables."""
    rank = env_int("RANK", "SLURM_PROCID", default=0)
    local = env_int("LOCAL_RANK", "SLURM_LOCALID", default=0)
    world = env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
    return rank, local, world


# ------------------------------------------------------------------------------------------------
# The model: token embedding, RoPE, pre-norm blocks of grouped-query attention and SwiGLU.


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq, head_dim, base, device):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    t = torch.arange(seq, device=device).float()
    freqs = torch.outer(t, inv)
    return freqs.cos(), freqs.sin()


def apply_rope(x, cos, sin):
    # x: [batch, heads, seq, head_dim]; rotate the two halves.
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads = a.num_attention_heads
        self.groups = a.num_query_groups
        self.head_dim = a.hidden_size // a.num_attention_heads
        h = a.hidden_size
        self.norm1 = RMSNorm(h, a.norm_epsilon)
        self.q = nn.Linear(h, self.heads * self.head_dim, bias=False)
        self.kv = nn.Linear(h, 2 * self.groups * self.head_dim, bias=False)
        self.o = nn.Linear(self.heads * self.head_dim, h, bias=False)
        self.norm2 = RMSNorm(h, a.norm_epsilon)
        self.w13 = nn.Linear(h, 2 * a.ffn_hidden_size, bias=False)
        self.w2 = nn.Linear(a.ffn_hidden_size, h, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        y = self.norm1(x)
        q = self.q(y).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(y).view(b, s, 2, self.groups, self.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.heads // self.groups
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        x = x + self.o(y)
        g, u = self.w13(self.norm2(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(g) * u)


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = nn.Embedding(a.padded_vocab_size, a.hidden_size)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.num_layers))
        self.norm = RMSNorm(a.hidden_size, a.norm_epsilon)
        self.head = nn.Linear(a.hidden_size, a.padded_vocab_size, bias=False)
        if not a.untie_embeddings_and_output_weights:
            self.head.weight = self.embed.weight
        self.head_dim = a.hidden_size // a.num_attention_heads
        self.rope_base = a.rotary_base
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, mean=0.0, std=a.init_method_std)

    def forward(self, tokens):
        s = tokens.shape[1]
        cos, sin = rope_tables(s, self.head_dim, self.rope_base, tokens.device)
        mask = torch.ones(s, s, dtype=torch.bool, device=tokens.device).triu(1)
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask)
        return self.head(self.norm(x))


# ------------------------------------------------------------------------------------------------
# Synthetic data: sample i of the run is the same tokens whatever the world size.


class Indexed:
    """A Megatron indexed dataset (megatron/core/datasets/indexed_dataset.py layout: a 34-byte
    header, int32 sizes, int64 pointers, int64 document index). Sample i is tokens
    [i*seq, i*seq + seq + 1) of the documents in order, wrapping around at the end: the sample
    tplua's `data fingerprint --seq-len` hashes."""

    DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 8: "uint16"}

    def __init__(self, prefix, vocab, seq):
        import numpy as np
        with open(prefix + ".idx", "rb") as f:
            head = f.read(34)
        if len(head) < 34 or head[:9] != b"MMIDIDX\x00\x00":
            raise ValueError("%s.idx: not a Megatron indexed dataset" % prefix)
        version, code, count = struct.unpack("<QBQ", head[9:26])
        if version != 1 or code not in self.DTYPES:
            raise ValueError("%s.idx: version %d, dtype %d not supported" % (prefix, version, code))
        self.tokens = np.memmap(prefix + ".bin", dtype=np.dtype(self.DTYPES[code]).newbyteorder("<"),
                                mode="r")
        self.seq = seq
        self.count = (len(self.tokens) - 1) // seq
        if self.count < 1:
            raise ValueError("%s: %d tokens, fewer than one sample of %d" % (prefix, len(self.tokens),
                                                                           seq + 1))
        top = int(self.tokens.max())
        if top >= vocab:
            raise ValueError("%s: token id %d is not below --padded-vocab-size %d" % (prefix, top,
                                                                                     vocab))

    def sample(self, i):
        j = (i % self.count) * self.seq
        return torch.from_numpy(self.tokens[j:j + self.seq + 1].astype("int64"))

    def batch(self, first, count):
        return torch.stack([self.sample(first + j) for j in range(count)])


class Synthetic:
    PERIOD = 61  # a prime, so that windows of the pattern differ by their offset

    def __init__(self, kind, vocab, seq, seed):
        self.kind, self.vocab, self.seq, self.seed = kind, vocab, seq, seed
        g = torch.Generator().manual_seed(seed)
        self.pattern = torch.randint(0, vocab, (self.PERIOD,), generator=g)

    def sample(self, i):
        n = self.seq + 1
        if self.kind == "random":
            g = torch.Generator().manual_seed(self.seed * 1000003 + i)
            return torch.randint(0, self.vocab, (n,), generator=g)
        idx = (torch.arange(n) + (i * 7) % self.PERIOD) % self.PERIOD
        return self.pattern[idx]

    def batch(self, first, count):
        return torch.stack([self.sample(first + j) for j in range(count)])


class Profiler:
    """Megatron's profiling window: from the step after --profile-step-start completed
    iterations to the end of iteration --profile-step-end, with torch.profiler (one Chrome trace
    per rank, <--profile-dir>/rank<r>_trace.json) or between cudaProfilerStart and
    cudaProfilerStop, which nsys --capture-range=cudaProfilerApi records. Each profiled
    iteration runs inside a ProfilerStep#<iteration> annotation, as torch.profiler's schedule
    marks its steps. With --profile-memory the profiler also records the allocator's events
    (profile_memory=True): Kineto writes them as [memory] events; a torch built without Kineto
    (Debian's 1.13) still collects them, and the trace is then written here in Kineto's format
    from the profiler's own records (KinetoWriter)."""

    def __init__(self, a, rank, device):
        self.on = a.profile and (a.profile_ranks is None or rank in a.profile_ranks)
        self.torch = a.use_pytorch_profiler
        self.memory = a.profile_memory
        self.first, self.last = a.profile_step_start + 1, a.profile_step_end
        self.path = os.path.join(a.profile_dir, "rank%d_trace.json" % rank)
        self.device, self.rank, self.prof, self.step = device, rank, None, None
        if self.on and not self.torch and device.type != "cuda":
            say(rank, "WARNING: reftrain: --profile without --use-pytorch-profiler marks the "
                "steps for nsys (cudaProfilerStart/Stop): nothing is traced on CPU")

    def begin(self, it):
        if not self.on or not self.first <= it <= self.last:
            return
        if it == self.first:
            self.start()
        if self.prof is not None and self.prof != "cuda":
            self.step = torch.autograd.profiler.record_function("ProfilerStep#%d" % it)
            self.step.__enter__()

    def start(self):
        if not self.torch:
            if self.device.type == "cuda":
                torch.cuda.profiler.start()
            self.prof = "cuda"
            return
        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        if self.memory and not torch.autograd.kineto_available():
            self.prof = KinetoWriter(self.rank)
        else:
            self.prof = torch.profiler.profile(activities=acts, record_shapes=True,
                                               profile_memory=self.memory)
        self.prof.start()

    def end(self, it, last=False):
        if self.step is not None:
            self.step.__exit__(None, None, None)
            self.step = None
        if self.prof is None or (it != self.last and not last):
            return
        if self.prof == "cuda":
            if self.device.type == "cuda":
                torch.cuda.profiler.stop()
        else:
            self.prof.stop()
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self.prof.export_chrome_trace(self.path)
            say(self.rank, "> profiler: steps %d-%d traced, rank 0 trace %s"
                % (self.first, it, self.path))
        self.prof = None


class KinetoWriter:
    """The PyTorch profiler's CPU collection (record_shapes, profile_memory) where torch has no
    Kineto to write its trace: the profiler's own records (torch._C._autograd: the ops with
    their thread, times, scope and input shapes; the allocator's events with address, bytes,
    totals and device) written as Kineto writes them: cpu_op / user_annotation complete events,
    [memory] instant events (cat cpu_instant_event: Addr, Bytes, Total Allocated, Total
    Reserved, Device Type, Device Id), times in microseconds with nanoseconds."""

    DEVICE_TYPES = {"cpu": 0, "cuda": 1, "hip": 6}

    def __init__(self, rank):
        self.rank, self.result = rank, None
        from torch._C._profiler import (ProfilerActivity, ProfilerConfig, ProfilerState,
                                        _ExperimentalConfig)
        self.config = ProfilerConfig(ProfilerState.KINETO, True, True, False, False, False,
                                     _ExperimentalConfig())
        self.acts = {ProfilerActivity.CPU}

    def start(self):
        from torch._C._autograd import _enable_profiler, _prepare_profiler
        _prepare_profiler(self.config, self.acts)
        _enable_profiler(self.config, self.acts)

    def stop(self):
        from torch._C._autograd import _disable_profiler
        self.result = _disable_profiler()

    @staticmethod
    def us(ns):
        return "%d.%03d" % divmod(ns, 1000)

    def events(self):
        pid = os.getpid()
        out = []
        stack = list(reversed(self.result.experimental_event_tree()))
        while stack:
            n = stack.pop()
            stack.extend(reversed(n.children))
            ef = n.extra_fields
            kind = type(ef).__name__
            if kind == "_ExtraFields_TorchOp":
                user = ef.scope == torch._C._profiler.RecordScope.USER_SCOPE
                args = {"External id": n.correlation_id, "Sequence number": ef.sequence_number}
                if not user:
                    args["Input Dims"] = ef.inputs.shapes
                    args["Input type"] = ef.inputs.dtypes
                out.append((n.start_time_ns, {
                    "ph": "X", "cat": "user_annotation" if user else "cpu_op", "name": n.name,
                    "pid": pid, "tid": n.start_tid, "ts": self.us(n.start_time_ns),
                    "dur": self.us(max(0, n.duration_time_ns)), "args": args}))
            elif kind == "_ExtraFields_Allocation":
                dev = ef.device
                out.append((n.start_time_ns, {
                    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                    "pid": pid, "tid": n.start_tid, "ts": self.us(n.start_time_ns),
                    "args": {"Total Reserved": ef.total_reserved,
                             "Total Allocated": ef.total_allocated, "Bytes": ef.alloc_size,
                             "Addr": ef.ptr,
                             "Device Id": -1 if dev.index is None else dev.index,
                             "Device Type": self.DEVICE_TYPES.get(dev.type, -1)}}))
        out.sort(key=lambda e: (e[1]["ph"] == "i", e[0]))  # ops first, then memory, as Kineto
        return [e for _, e in out]

    def export_chrome_trace(self, path):
        doc = {"schemaVersion": 1, "traceEvents": self.events(), "traceName": path,
               "displayTimeUnit": "ms"}
        text = json.dumps(doc)
        # Times as Kineto writes them: numbers in microseconds with three decimals.
        text = re.sub(r'"(ts|dur)": "(-?\d+\.\d{3})"', r'"\1": \2', text)
        with open(path, "w") as f:
            f.write(text)


def lr_at(a, it):
    """Megatron's OptimizerParamScheduler.get_lr for linear warm-up then the decay style."""
    if a.lr_warmup_iters > 0 and it <= a.lr_warmup_iters:
        return a.lr * it / a.lr_warmup_iters
    if a.lr_decay_style == "constant":
        return a.lr
    if it > a.lr_decay_iters:
        return a.min_lr
    span = a.lr_decay_iters - a.lr_warmup_iters
    ratio = (it - a.lr_warmup_iters) / span if span > 0 else 1.0
    if a.lr_decay_style == "linear":
        coeff = 1.0 - ratio
    else:
        coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0)
    return a.min_lr + coeff * (a.lr - a.min_lr)


def stamp():
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")


def say(rank, text):
    if rank == 0:
        print(text, flush=True)


def print_args(a, world, dp, precision, device):
    # _print_args: header, "  name <dots> value" sorted case-insensitively, footer.
    shown = dict(vars(a))
    # As Megatron does, the flags show what was asked (bf16 True) and params_dtype what is used.
    shown.update(world_size=world, data_parallel_size=dp, params_dtype=precision,
                 device=device, tokenizer_type="NullTokenizer", vocab_size=a.padded_vocab_size,
                 kv_channels=a.hidden_size // a.num_attention_heads,
                 group_query_attention=a.num_query_groups != a.num_attention_heads)
    print("------------------------ arguments ------------------------")
    for k in sorted(shown, key=str.lower):
        print("  %s %s %s" % (k, "." * max(0, 48 - len(k)), shown[k]))
    print("-------------------- end of arguments ---------------------", flush=True)


def main(argv):
    a = parse_args(argv)
    rank, local, world = world_from_env()
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.stderr.write("reftrain: --device cuda but torch.cuda.is_available() is False\n")
        return 1
    backend = a.distributed_backend
    if backend == "auto":
        backend = "nccl" if a.device == "cuda" else "gloo"
    if a.global_batch_size is None:
        a.global_batch_size = a.micro_batch_size * world
    if a.global_batch_size % (a.micro_batch_size * world):
        sys.stderr.write("reftrain: --global-batch-size %d is not a multiple of micro batch "
                         "size x data parallel size = %d\n"
                         % (a.global_batch_size, a.micro_batch_size * world))
        return 2
    ga = a.global_batch_size // (a.micro_batch_size * world)

    if a.device == "cuda":
        torch.cuda.set_device(local % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
        # One rank per core is what a CPU smoke run wants; more threads only contend.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, env_int(
            "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", default=1))))
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group(backend=backend, init_method="env://", rank=rank,
                                world_size=world, timeout=datetime.timedelta(minutes=10))
    precision = "torch.float32"
    amp = None
    if a.device == "cuda" and a.bf16:
        precision, amp = "torch.bfloat16", torch.bfloat16
    elif a.device == "cuda" and a.fp16:
        precision, amp = "torch.float16", torch.float16
    if rank == 0:
        print_args(a, world, world, precision, a.device)
        print("> initialized data parallel with size %d (backend %s, %s)"
              % (world, backend, a.device), flush=True)
        if (a.bf16 or a.fp16) and amp is None:
            print("WARNING: reftrain: %s requested but training on CPU in float32"
                  % ("bf16" if a.bf16 else "fp16"), flush=True)

    torch.manual_seed(a.seed)
    model = GPT(a).to(device)
    nparams = sum(p.numel() for p in model.parameters())
    say(rank, " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): %d"
        % nparams)
    ddp = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.adam_beta1, a.adam_beta2), eps=a.adam_eps)
    scaler = torch.cuda.amp.GradScaler() if amp == torch.float16 else None
    try:
        data = (Indexed(a.data_path, a.padded_vocab_size, a.seq_length) if a.data_path
                else Synthetic(a.synthetic_kind, a.padded_vocab_size, a.seq_length, a.seed))
    except (OSError, ValueError) as e:
        sys.stderr.write("reftrain: --data-path: %s\n" % e)
        return 1
    say(rank, "[after dataloaders are built] datetime: %s" % stamp())
    say(rank, "[before the start of training step] datetime: %s" % stamp())

    profiler = Profiler(a, rank, device)
    acc_time, acc_loss, acc_n, nan_iters = 0.0, 0.0, 0, 0
    for it in range(1, a.train_iters + 1):
        if a.fail_at and it == a.fail_at:
            sys.stderr.write("reftrain: rank %d: failing at iteration %d as asked (--fail-at)\n"
                             % (rank, it))
            return 1
        profiler.begin(it)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        lr = lr_at(a, it)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        local_loss = torch.zeros((), device=device)
        base = (it - 1) * a.global_batch_size
        for m in range(ga):
            first = base + (m * world + rank) * a.micro_batch_size
            batch = data.batch(first, a.micro_batch_size).to(device)
            sync = m == ga - 1 or world == 1
            ctx = ddp.no_sync() if (world > 1 and not sync) else contextlib.nullcontext()
            with ctx:
                with torch.autocast(device_type=device.type, dtype=amp, enabled=amp is not None):
                    logits = ddp(batch[:, :-1])
                    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                           batch[:, 1:].reshape(-1))
                if a.inject_nan_at and it >= a.inject_nan_at:
                    loss = loss * float("nan")
                scaled = loss / ga
                (scaler.scale(scaled) if scaler else scaled).backward()
            local_loss += loss.detach() / ga
        if scaler:
            scaler.unscale_(opt)
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        if world > 1:
            dist.all_reduce(local_loss)
            local_loss /= world
        loss_v = float(local_loss)
        if a.sleep_ms > 0:
            time.sleep(a.sleep_ms / 1000.0)
        if device.type == "cuda":
            torch.cuda.synchronize()
        acc_time += time.perf_counter() - t0
        if math.isfinite(loss_v):
            acc_loss += loss_v
            acc_n += 1
        else:
            nan_iters += 1
        if it % a.log_interval == 0 or it == a.train_iters:
            n = a.log_interval if it % a.log_interval == 0 else it % a.log_interval
            ms = acc_time * 1000.0 / n
            parts = [" [%s] iteration %8d/%8d |" % (stamp(), it, a.train_iters),
                     " consumed samples: %12d |" % (it * a.global_batch_size),
                     " elapsed time per iteration (ms): %.1f |" % ms,
                     " learning rate: %.6E |" % lr,
                     " global batch size: %5d |" % a.global_batch_size]
            if acc_n > 0:
                # Megatron prints a loss only when its interval mean is a number.
                parts.append(" lm loss: %.6E |" % (acc_loss / acc_n))
            scale = scaler.get_scale() if scaler else 1.0
            parts.append(" loss scale: %.1f |" % scale)
            parts.append(" grad norm: %.3f |" % float(gnorm))
            parts.append(" number of skipped iterations: %3d |" % 0)
            parts.append(" number of nan iterations: %3d |" % nan_iters)
            say(rank, "".join(parts))
            if device.type == "cuda" and it == a.log_interval and rank == 0:
                mb = 1024.0 * 1024.0
                print("[Rank %d] (after %d iterations) memory (MB) | allocated: %.2f | max "
                      "allocated: %.2f | reserved: %.2f | max reserved: %.2f"
                      % (rank, it, torch.cuda.memory_allocated() / mb,
                         torch.cuda.max_memory_allocated() / mb,
                         torch.cuda.memory_reserved() / mb,
                         torch.cuda.max_memory_reserved() / mb), flush=True)
            acc_time, acc_loss, acc_n, nan_iters = 0.0, 0.0, 0, 0
        profiler.end(it)
    profiler.end(a.train_iters, last=True)
    say(rank, "[after training is done] datetime: %s" % stamp())
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
