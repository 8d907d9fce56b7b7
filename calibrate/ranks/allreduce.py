"""The all-reduce sweep on one rank: warm up, then time each iteration alone.

Per iteration: a barrier (so every rank starts together; the skew it leaves is part of what
a real step sees), then one all-reduce between two clock reads, with ``ctx.synchronize()``
before each read so NCCL's asynchronous launch is not timed instead of the transfer. The
parent (``calibrate.analysis.summarize``) takes each rank's median and p95 and reports the
max over ranks, because a step ends when the slowest rank ends.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from calibrate.settings import DTYPE_BYTES


def zeros(n_bytes: int, dtype: str, device) -> torch.Tensor:
    """A tensor of ``n_bytes`` (at least one element) of the named dtype, on ``device``."""
    return torch.zeros(max(1, n_bytes // DTYPE_BYTES[dtype]), dtype=getattr(torch, dtype),
                       device=device)


def measure_sweep(sizes_bytes: list[int], dtype: str, warmup: int, iters: int, ctx,
                  progress, group=None, label: str = "") -> list[dict]:
    """Per size: the bytes, the element count and each timed iteration's seconds.
    ``group``: all-reduce within this rank's subgroup (calibrate/ranks/levels.py); the
    barrier before each iteration stays the world's, so every subgroup starts together."""
    sweep = []
    for n_bytes in sizes_bytes:
        tensor = zeros(n_bytes, dtype, ctx.device)
        times_s = time_allreduce(tensor, ctx, warmup, iters, group)
        sweep.append({"size_bytes": n_bytes, "count": tensor.numel(), "times_s": times_s})
        progress.advance(f"{label}{n_bytes} B")
        del tensor
    return sweep


def time_allreduce(tensor: torch.Tensor, ctx, warmup: int, iters: int,
                   group=None) -> list[float]:
    """Seconds of ``iters`` all-reduces (within ``group``, None: the world), each started
    together after a barrier."""
    return time_collective(lambda: dist.all_reduce(tensor, group=group), ctx, warmup, iters)


def time_collective(call, ctx, warmup: int, iters: int) -> list[float]:
    """Seconds of ``iters`` calls of ``call()`` (one blocking collective), each started
    together after a barrier; the reduce-scatter and all-gather sweeps time theirs so too."""
    for _ in range(warmup):  # connections, buffers and allocator pages, not timed
        call()
    ctx.synchronize()
    times_s = []
    for _ in range(iters):
        ctx.barrier()
        ctx.synchronize()
        start_s = time.perf_counter()
        call()
        ctx.synchronize()
        times_s.append(time.perf_counter() - start_s)
    return times_s
