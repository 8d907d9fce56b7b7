"""Timing a training step on one rank: a wall clock around the step, and profiler traces.

Each clock read follows ``ctx.synchronize()``, so on CUDA it waits for queued kernels and
collectives instead of timing their launch (a no-op on CPU)::

    seconds = timed(ctx, lambda: run_step(ranges=False))

Inside a step, :func:`phase` opens a ``torch.profiler.record_function`` range named
``forward``, ``backward``, ``sync`` or ``optimizer`` when ranges are on; :func:`write_trace`
runs a few steps under ``torch.profiler.profile`` and writes one Chrome trace per rank,
openable in https://ui.perfetto.dev or chrome://tracing::

    write_trace(ctx, lambda: run_step(ranges=True), n_steps=3, path="traces/bucketed-25MB.rank0.json")

``sync`` is the wait in ``finish_gradient_synchronization``; torch DDP waits inside its own
autograd callback, so under ``ddp`` that wait is in ``backward`` and ``sync`` is empty.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import Callable, ContextManager

import torch
from torch.autograd.profiler import record_function

PHASES = ("forward", "backward", "sync", "optimizer")


def phase(name: str, ranges: bool) -> ContextManager:
    """A profiler range named ``name`` (one of PHASES) if ``ranges``, else nothing: timed
    steps run without, so every configuration pays the same."""
    if name not in PHASES:
        raise ValueError(f"phase {name!r}: expected one of {', '.join(PHASES)}")
    return record_function(name) if ranges else nullcontext()


def timed(ctx, step: Callable[[], None]) -> float:
    """Wall seconds of ``step()``, with the device synchronized before each clock read."""
    ctx.synchronize()
    start_s = time.perf_counter()
    step()
    ctx.synchronize()
    return time.perf_counter() - start_s


def write_trace(ctx, step: Callable[[], None], n_steps: int, path: str | Path) -> None:
    """Run ``n_steps`` steps under torch.profiler and export a Chrome trace to ``path``."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if ctx.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # record_shapes: tensor sizes in the trace, what `simddp trace-import` needs (docs/TRACES.md)
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        for _ in range(n_steps):
            step()
        ctx.synchronize()
    prof.export_chrome_trace(str(path))
