"""Rank function for tests/realrun/test_netns.py's two-level cluster (2 emulated hosts x 2).

    run_world("tests.realrun._two_level_targets:host_layout", {"n_bytes": 4 << 20},
              world_size=4, emulate_hosts=2, link_gbit=1.0)

Each rank reports where it runs (its network namespace's inode, LOCAL_RANK,
LOCAL_WORLD_SIZE, the NIC Gloo was told to use), the median seconds of an all-reduce with the
other rank of its host and with its peer on the other host, and the node groups realrun.DDP's
hierarchical strategy builds from the launcher's LOCAL_WORLD_SIZE alone.
"""
from __future__ import annotations

import os
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn

from realrun.ddp import DDP


def _median_allreduce_s(tensor: torch.Tensor, group, repeats: int = 3) -> float:
    dist.all_reduce(tensor, group=group)  # warm-up: connections
    seconds = []
    for _ in range(repeats):
        dist.barrier(group=group)
        start_s = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        seconds.append(time.perf_counter() - start_s)
    return statistics.median(seconds)


def host_layout(payload: dict, ctx) -> dict:
    """Where this rank runs, intra- and inter-host all-reduce seconds, DDP's node groups."""
    world = ctx.world_size
    # every rank makes every group, in the same order: hosts {0,1} {2,3}, pairs {0,2} {1,3}
    hosts = [dist.new_group([r, r + 1]) for r in range(0, world, 2)]
    pairs = [dist.new_group([r, r + 2]) for r in range(2)]
    tensor = torch.ones(payload["n_bytes"] // 4)
    intra_s = _median_allreduce_s(tensor, hosts[ctx.rank // 2])
    inter_s = _median_allreduce_s(tensor, pairs[ctx.rank % 2])
    total = torch.full((4,), float(ctx.rank + 1))
    dist.all_reduce(total)  # the world, across both hosts: 1 + 2 + 3 + 4
    ddp = DDP(nn.Linear(4, 4), strategy="hierarchical", bucket_mb=1)  # G from the launcher
    groups = [dist.get_process_group_ranks(g) for g in (ddp.two_level.intra,
                                                        ddp.two_level.inter)]
    ddp.remove_hooks()
    return {"netns": os.stat("/proc/self/ns/net").st_ino, "local_rank": ctx.local_rank,
            "local_world_size": int(os.environ["LOCAL_WORLD_SIZE"]),
            "ifname": os.environ["GLOO_SOCKET_IFNAME"], "sum": total[0].item(),
            "intra_s": intra_s, "inter_s": inter_s, "groups": groups}
