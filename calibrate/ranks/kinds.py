"""Reduce-scatter and all-gather on one rank: the size sweep, timed as the all-reduce's is.

A size n is the full, unsharded bytes (nccl-tests' S, and simddp's Link.collective_s): a
reduce-scatter sums every rank's n bytes and leaves each rank its n/p share; an all-gather
collects every rank's n/p shard into n bytes on each. Each moves (p−1)/p·n bytes per rank, half
an all-reduce. n is rounded down to a multiple of p elements so the shards are equal::

    op = collective("all_gather")
    out, inp = kind_tensors("all_gather", 1 << 20, "float32", 2, ctx.device)
    op(out, inp, async_op=False)

torch 2.13's ``reduce_scatter_single`` and ``all_gather_single`` (what FSDP2 issues), else the
older ``*_tensor`` names; the NCCL path is this same code on ``ctx.device``. Gloo's
reduce-scatter is a clone plus a full all-reduce, so its busbw is at most half the
all-reduce's, which is what FSDP2 gets on Gloo (docs/CALIBRATE.md, Reduce-scatter and all-gather).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from calibrate.ranks.allreduce import time_collective
from calibrate.settings import DTYPE_BYTES

_NAMES = {"reduce_scatter": ("reduce_scatter_single", "reduce_scatter_tensor"),
          "all_gather": ("all_gather_single", "all_gather_into_tensor")}


def collective(kind: str):
    """torch.distributed's function for ``kind``: ``f(output, input, async_op=...)``."""
    for name in _NAMES[kind]:
        fn = getattr(dist, name, None)
        if fn is not None:
            return fn
    raise RuntimeError(f"this torch has none of {', '.join(_NAMES[kind])} for {kind}")


def kind_tensors(kind: str, n_bytes: int, dtype: str, world_size: int, device
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, input) of one ``kind`` collective of about ``n_bytes`` in all (at least one
    element per rank, a multiple of ``world_size`` elements)."""
    elem = DTYPE_BYTES[dtype]
    shard = max(1, n_bytes // elem // world_size)
    full = torch.zeros(shard * world_size, dtype=getattr(torch, dtype), device=device)
    part = torch.zeros(shard, dtype=full.dtype, device=device)
    return (part, full) if kind == "reduce_scatter" else (full, part)


def full_bytes(kind: str, tensors: tuple[torch.Tensor, torch.Tensor]) -> int:
    """The collective's n: the larger of its two tensors, in bytes."""
    return max(t.numel() * t.element_size() for t in tensors)


def measure_kind_sweep(kinds: list[str], sizes_bytes: list[int], dtype: str, warmup: int,
                       iters: int, ctx, progress, group=None, label: str = ""
                       ) -> dict[str, list[dict]]:
    """Per kind, per size: the bytes actually moved (n), the element count of n and each
    timed iteration's seconds, as :func:`calibrate.ranks.allreduce.measure_sweep` returns.
    ``group``: within this rank's subgroup (its size shards n), the world's barrier kept."""
    ranks = ctx.world_size if group is None else dist.get_world_size(group)
    out = {}
    for kind in kinds:
        op, rows = collective(kind), []
        for n_bytes in sizes_bytes:
            output, inp = kind_tensors(kind, n_bytes, dtype, ranks, ctx.device)
            times_s = time_collective(lambda o=output, i=inp: op(o, i, group=group), ctx,
                                      warmup, iters)
            n = full_bytes(kind, (output, inp))
            rows.append({"size_bytes": n, "count": n // DTYPE_BYTES[dtype], "times_s": times_s})
            progress.advance(f"{label}{kind} {n_bytes} B")
            del output, inp
        out[kind] = rows
    return out
