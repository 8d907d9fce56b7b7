"""The all-reduce sweep that runs on every rank: warm up, then time each iteration alone.

Started by ``python -m calibrate`` through the launcher, never by hand::

    from realrun.launch import run_world
    ranks = run_world("calibrate.bench:run_rank",
                      {"sizes_bytes": [1024, 2048], "dtype": "float32", "warmup": 5,
                       "iters": 20, "contention": None}, world_size=2)
    ranks[r]["sweep"][i]["times_s"]      # rank r's iteration times at size i

Per iteration: a barrier (so every rank starts together; the skew it leaves is part of what
a real step sees), then one all-reduce between two clock reads, with ``ctx.synchronize()``
before each read so NCCL's asynchronous launch is not timed instead of the transfer. The
parent (``summarize``) takes each rank's median and p95 and reports the max over ranks,
because a step ends when the slowest rank ends.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import torch
import torch.distributed as dist

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
          "uint8": torch.uint8}


def element_bytes(dtype: str) -> int:
    return torch.tensor([], dtype=DTYPES[dtype]).element_size()


def sweep_sizes(min_bytes: int, max_bytes: int, factor: float, elem_bytes: int) -> list[int]:
    """Message sizes from min to max multiplying by ``factor``, rounded down to whole elements.

    >>> sweep_sizes(1024, 8192, 2, 4)
    [1024, 2048, 4096, 8192]
    """
    sizes: list[int] = []
    size = float(min_bytes)
    while size <= max_bytes * (1 + 1e-9):
        n = max(elem_bytes, int(size) // elem_bytes * elem_bytes)
        if not sizes or n > sizes[-1]:
            sizes.append(n)
        size *= factor
    return sizes


def run_rank(payload: dict, ctx) -> dict:
    """Rank function for run_world: the timed sweep, then (optionally) contention."""
    dtype = DTYPES[payload["dtype"]]
    elem = element_bytes(payload["dtype"])
    sizes = payload["sizes_bytes"]
    progress = _Progress(len(sizes) + (1 if payload.get("contention") else 0)
                         + (1 if payload.get("sequence") else 0),
                         show=ctx.rank == 0 and payload.get("progress", True),
                         what=f"all-reduce sweep, {ctx.world_size} ranks")
    sweep = []
    try:
        for n_bytes in sizes:
            tensor = torch.zeros(n_bytes // elem, dtype=dtype, device=ctx.device)
            times_s = time_allreduce(tensor, ctx, payload["warmup"], payload["iters"])
            sweep.append({"size_bytes": n_bytes, "count": tensor.numel(), "times_s": times_s})
            progress.advance(f"{n_bytes} B")
            del tensor
        out = {"rank": ctx.rank, "world_size": ctx.world_size, "sweep": sweep}
        if payload.get("sequence"):
            from calibrate.sequence import measure_sequence
            out["sequence"] = measure_sequence(payload["sequence"], ctx)
            progress.advance("sequence")
        if payload.get("contention"):
            from calibrate.contention import measure_contention
            out["contention"] = measure_contention(payload["contention"], ctx)
            progress.advance("contention")
        return out
    finally:
        progress.close()


def time_allreduce(tensor: torch.Tensor, ctx, warmup: int, iters: int) -> list[float]:
    """Seconds of ``iters`` all-reduces, each started together after a barrier."""
    for _ in range(warmup):  # connections, buffers and allocator pages, not timed
        dist.all_reduce(tensor)
    ctx.synchronize()
    times_s = []
    for _ in range(iters):
        barrier(ctx)
        ctx.synchronize()
        start_s = time.perf_counter()
        dist.all_reduce(tensor)
        ctx.synchronize()
        times_s.append(time.perf_counter() - start_s)
    return times_s


def barrier(ctx) -> None:
    if ctx.device.type == "cuda":
        dist.barrier(device_ids=[ctx.device.index])  # without it NCCL guesses the device
    else:
        dist.barrier()


def summarize(rank_results: list[dict]) -> list[dict]:
    """Per size: median and p95 on each rank, then the max over ranks (the slowest rank)."""
    rows = []
    for i, first in enumerate(rank_results[0]["sweep"]):
        per_rank = [np.asarray(r["sweep"][i]["times_s"]) for r in rank_results]
        rows.append({"size_bytes": first["size_bytes"], "count": first["count"],
                     "time_s": max(float(np.median(t)) for t in per_rank),
                     "p95_s": max(float(np.percentile(t, 95)) for t in per_rank),
                     "iters": len(per_rank[0]),
                     "times_s_per_rank": [t.tolist() for t in per_rank]})  # for the JSON
    return rows


class _Progress:
    """A rich progress bar on stderr (rank 0 only); a no-op elsewhere or if rich is absent."""

    def __init__(self, total: int, show: bool, what: str) -> None:
        self.bar = None
        if not (show and sys.stderr.isatty()):  # a log file gets the table, not a bar
            return
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
            from rich.progress import TimeElapsedColumn
        except ImportError:
            return
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[item]}"), TimeElapsedColumn(),
                            console=Console(file=sys.stderr), transient=True,
                            # Redraw only between sizes: rich's refresh thread would take the
                            # GIL 10 times a second, inside timed iterations of ~0.4 ms.
                            auto_refresh=False)
        self.task = self.bar.add_task(what, total=total, item="")
        self.bar.start()

    def advance(self, item: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, item=item, refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
