"""How much compute and an all-reduce slow each other down when they run at the same time.

In DDP the backward keeps computing while bucket all-reduces are in flight. On a CPU box Gloo
runs the collective on its own thread (copies, reductions, loopback TCP), so it competes with
the backward for cores; on GPUs NCCL kernels take SMs and memory bandwidth. simddp's engine
slows a lane by ``compute_slowdown``/``comm_slowdown`` while the other lane is busy; this
module measures both on the real ranks (run by ``python -m calibrate``, skipped with
``--no-contention``). Each repeat, on every rank, after a barrier each:

1. comm alone: one all-reduce of ``size_bytes``, timed.
2. compute alone: a fixed chunk of backward-like work (one square matmul) repeated for about
   as long as step 1 took; rate = chunks per second.
3. together: ``work = dist.all_reduce(t, async_op=True)``, then chunks until
   ``work.is_completed()``; the comm time is launch to the first chunk end that sees it
   done (late by < 1 chunk, ~0.3 ms here against ~20 ms of comm), the compute rate is chunks
   over that time, so every chunk counted overlapped the collective.

``compute_slowdown = rate alone / rate together`` and ``comm_slowdown = together / alone``,
each from medians over repeats, then the max over ranks (the slowest rank sets the step).
Values below 1.0 are noise (nothing speeds up under contention) and are clamped to 1.0.
"""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from calibrate.combine import MIN_CHUNKS
from calibrate.ranks.allreduce import zeros

# One chunk of "backward": a 256x256 float32 matmul is ~0.3 ms on one core here, small enough
# to poll the collective often, big enough that the loop overhead (~5 µs) is noise. On a GPU
# that is nothing, so chunks there are 4096x4096: 137 GFLOP, ~1-10 ms on current GPUs.
_CPU_MATMUL_N = 256
_GPU_MATMUL_N = 4096


def measure_contention(cfg: dict, ctx) -> dict:
    """Rank-side measurement; ``cfg`` has size_bytes, dtype, repeats. Returns medians."""
    tensor = zeros(cfg["size_bytes"], cfg["dtype"], ctx.device)
    n = _GPU_MATMUL_N if ctx.device.type == "cuda" else _CPU_MATMUL_N
    gen = torch.Generator(device="cpu").manual_seed(ctx.rank)
    a = torch.randn(n, n, generator=gen).to(ctx.device)
    b = torch.randn(n, n, generator=gen).to(ctx.device)

    def chunk() -> None:
        torch.mm(a, b)
        ctx.synchronize()

    for _ in range(3):  # warm-up: connections, allocator, BLAS thread pools
        dist.all_reduce(tensor)
        chunk()
    ctx.synchronize()
    comm_alone, rate_alone, comm_together, rate_together, chunks_together = [], [], [], [], []
    for _ in range(cfg["repeats"]):
        ctx.barrier()
        start_s = time.perf_counter()
        dist.all_reduce(tensor)
        ctx.synchronize()
        comm_alone.append(time.perf_counter() - start_s)

        ctx.barrier()
        start_s = time.perf_counter()
        chunks = 0
        while chunks < MIN_CHUNKS or time.perf_counter() - start_s < comm_alone[-1]:
            chunk()
            chunks += 1
        rate_alone.append(chunks / (time.perf_counter() - start_s))

        ctx.barrier()
        start_s = time.perf_counter()
        work = dist.all_reduce(tensor, async_op=True)
        chunks = 0
        while True:
            chunk()
            chunks += 1
            if work.is_completed():
                end_s = time.perf_counter()
                break
        work.wait()
        ctx.synchronize()
        comm_together.append(end_s - start_s)
        rate_together.append(chunks / (end_s - start_s))
        chunks_together.append(chunks)
    return {"size_bytes": tensor.numel() * tensor.element_size(), "matmul_n": n,
            "repeats": cfg["repeats"],
            "comm_alone_s": float(np.median(comm_alone)),
            "comm_together_s": float(np.median(comm_together)),
            "compute_rate_alone_hz": float(np.median(rate_alone)),
            "compute_rate_together_hz": float(np.median(rate_together)),
            "chunks_together": int(np.median(chunks_together))}
