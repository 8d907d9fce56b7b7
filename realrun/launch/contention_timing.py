"""Contention, on the ranks: a backward and the all-reduces in flight, alone and together.

In DDP the backward keeps computing while bucket all-reduces run, and the two compete (for
cores under Gloo, for SMs and memory bandwidth under NCCL). Each repeat, on every rank, after a
barrier each:

1. compute alone: a forward + backward (the model's own, or :func:`mlp_step`), ``W`` seconds;
2. comm alone: a stream of gradient-sized all-reduces queued at once (as an overlapping DDP
   queues them), then waited for, ``T`` seconds;
3. together: the stream queued, forward + backward (its end ``D``), the stream waited for
   (``Ts``, from the launch).

:func:`simddp.inputs.contention.slowdowns` turns them into the engine's two factors. A real
backward, not matmul chunks, which slowed the all-reduces far more (docs/FINDINGS.md#contention).
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
from torch import nn


def mlp_step(widths: list[int], rows: int, device):
    """A forward + backward of bias-free Linear+ReLU layers: backward-like work on ``device``."""
    gen = torch.Generator().manual_seed(0)
    layers = nn.Sequential(*(m for w in widths for m in (nn.Linear(w, w, bias=False), nn.ReLU())))
    layers.to(device)
    x = torch.randn(rows, widths[0], generator=gen).to(device)

    def step() -> None:
        layers.zero_grad(set_to_none=True)
        layers(x).square().mean().backward()
    return step


def overlap_times(compute, stream: list[torch.Tensor], ctx) -> tuple[float, float, float, float]:
    """(W, T, D, Ts) seconds of one repeat: compute alone, the stream alone, and together the
    compute's end and the stream's end, both from the stream's launch. The stream's end is
    stamped by the completion callbacks: read after the compute, a stream done during it
    would seem to end with it (docs/FINDINGS.md#contention)."""
    ctx.barrier()
    start_s = time.perf_counter()
    compute()
    _compute_done(ctx)
    alone_compute_s = time.perf_counter() - start_s
    ctx.barrier()
    start_s = time.perf_counter()
    for work in [dist.all_reduce(t, async_op=True) for t in stream]:
        work.wait()
    ctx.synchronize()
    alone_comm_s = time.perf_counter() - start_s
    ctx.barrier()
    ends: list[float] = []
    start_s = time.perf_counter()
    stamped = [dist.all_reduce(t, async_op=True).get_future().then(
        lambda _f: ends.append(time.perf_counter())) for t in stream]
    compute()
    _compute_done(ctx)
    compute_end_s = time.perf_counter() - start_s
    torch.futures.wait_all(stamped)  # each callback has run: every end is stamped
    ctx.synchronize()
    return alone_compute_s, alone_comm_s, compute_end_s, max(ends) - start_s


def _compute_done(ctx) -> None:
    """Wait for the compute stream only: on CUDA an event on the current stream (a device
    synchronize would also wait for NCCL's stream); on CPU the work is already done."""
    if ctx.device.type == "cuda":
        event = torch.cuda.Event()
        event.record()
        event.synchronize()


def median_overlap(compute, stream: list[torch.Tensor], ctx, repeats: int) -> dict:
    """Warm up, then :func:`overlap_times` ``repeats`` times; the medians, and what ran."""
    for _ in range(2):  # connections, allocator pages, autograd caches: untimed
        compute()
        for work in [dist.all_reduce(t, async_op=True) for t in stream]:
            work.wait()
    runs = [overlap_times(compute, stream, ctx) for _ in range(repeats)]
    keys = ("compute_alone_s", "comm_alone_s", "compute_together_s", "comm_together_s")
    out = {k: statistics.median(r[i] for r in runs) for i, k in enumerate(keys)}
    return {**out, "repeats": repeats, "repeats_s": [list(r) for r in runs],
            "stream_bytes": sum(t.numel() * t.element_size() for t in stream),
            "stream_count": len(stream)}


def compute_after_comm(per_rank: list[dict], compute_s: float) -> float | None:
    """How much slower the forward + backward ran after the model's all-reduces (the probe's
    compute alone follows the previous repeat's stream) than ``compute_s``, the layers' sum:
    the slowest rank's, at least 1 (``Host.compute_after_comm``); None without either.

    >>> compute_after_comm([{"compute_alone_s": 0.0245}, {"compute_alone_s": 0.0249}], 0.0214)
    1.163551
    """
    alone = [r.get("compute_alone_s") for r in per_rank or ()]
    if not alone or None in alone or not compute_s or compute_s <= 0:
        return None
    return round(max(1.0, max(alone) / compute_s), 6)
