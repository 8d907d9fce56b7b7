"""Rank functions for tests/realrun/test_hierarchical.py: realrun.DDP's two-level all-reduce
against one process, on 4 ranks seen as nodes of G.

    run_world("tests.realrun._hierarchical_targets:train_and_compare",
              {"cases": {"2x2": {"strategy": "hierarchical", "bucket_mb": 0.25,
                                 "gpus_per_node": 2}}}, world_size=4)

The Net cases reuse tests/_ddp_targets.py (tied embedding/head, a frozen layer, a branch used
on rank 0 only, a layer never used, zero_grad both ways, no_sync accumulation over 2 and 4
micro-steps), so the hierarchical strategy is held to exactly what the ring strategies are.
The odd case trains a net whose every gradient has an odd number of elements, one bucket
each, so every bucket is padded to a multiple of G.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from realrun.ddp import DDP
from tests._ddp_targets import _accumulate, _train

ODD_STEPS = 4
ODD_LR = 0.1
# 1e-5 MiB is 10 bytes: every gradient closes its own bucket (35, 5, 15 and 3 elements).
ODD_BUCKET_MB = 1e-5


def _odd_net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(7, 5), nn.Tanh(), nn.Linear(5, 3))


def _odd_batch(step: int, world_size: int):
    gen = torch.Generator().manual_seed(2000 + step)
    return torch.randn(world_size * 2, 7, generator=gen), torch.randn(world_size * 2, 3,
                                                                      generator=gen)


def _odd(ctx, gpus_per_node: int) -> dict:
    """4 SGD steps of the odd-sized net: max abs difference to one process after each."""
    ddp = DDP(_odd_net(7 + ctx.rank), strategy="hierarchical", bucket_mb=ODD_BUCKET_MB,
              gpus_per_node=gpus_per_node)
    ref = _odd_net(7)
    diffs = []
    for step in range(ODD_STEPS):
        x, y = _odd_batch(step, ctx.world_size)
        mine = slice(2 * ctx.rank, 2 * ctx.rank + 2)
        ddp.zero_grad(set_to_none=True)
        F.mse_loss(ddp(x[mine]), y[mine]).backward()
        ddp.finish_gradient_synchronization()
        ref.zero_grad(set_to_none=True)
        (sum(F.mse_loss(ref(x[2 * r:2 * r + 2]), y[2 * r:2 * r + 2])
             for r in range(ctx.world_size)) / ctx.world_size).backward()
        with torch.no_grad():
            for a, b in zip(ddp.module.parameters(), ref.parameters()):
                a.sub_(ODD_LR * a.grad)
                b.sub_(ODD_LR * b.grad)
        diffs.append(max((a - b).abs().max().item()
                         for a, b in zip(ddp.module.parameters(), ref.parameters())))
    padded = [bucket.buffer.numel() for bucket in ddp._flat]
    ddp.remove_hooks()
    return {"diffs": diffs, "buckets": [list(b) for b in ddp.buckets], "padded": padded}


def _groups(ddp_kwargs: dict) -> dict:
    """The global ranks of this rank's node group and cross-node group."""
    ddp = DDP(nn.Linear(2, 2), **ddp_kwargs)
    two = ddp.two_level
    ddp.remove_hooks()
    return {name: None if g is None else dist.get_process_group_ranks(g)
            for name, g in (("intra", two.intra), ("inter", two.inter))}


def train_and_compare(payload: dict, ctx) -> dict:
    """payload: {"cases": {name: DDP kwargs}, "accumulate": [names], "odd": [G, ...],
    "subgroup": name or None}. One world runs everything (starting one costs seconds)."""
    out: dict = {"cases": {}, "odd": {}}
    for name, kwargs in payload["cases"].items():
        result = {"train": _train(ctx, ctx.rank, ctx.world_size, kwargs, seed=100),
                  "groups": _groups(kwargs)}
        if name in payload.get("accumulate", ()):
            result["accum"] = {str(k): _accumulate(ctx, ctx.rank, ctx.world_size, kwargs, k)
                               for k in (2, 4)}
        out["cases"][name] = result
    for g in payload.get("odd", ()):
        out["odd"][str(g)] = _odd(ctx, g)
    name = payload.get("subgroup")
    if name:  # the same ranks as a group of their own: its node groups made locally
        group = dist.new_group(list(range(ctx.world_size)))
        kwargs = dict(payload["cases"][name], process_group=group)
        out["subgroup"] = {"train": _train(ctx, ctx.rank, ctx.world_size, kwargs, seed=500),
                           "groups": _groups(kwargs)}
    return out
