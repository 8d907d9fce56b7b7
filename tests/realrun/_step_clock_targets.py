"""Rank function of tests/realrun/test_step_clock.py: torch DDP clocked by a comm hook."""
from __future__ import annotations

import copy
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from realrun.step_clock import clock_torch_ddp


def clocked_torch_ddp(payload: dict, ctx) -> dict:
    """Two untimed steps of torch's own path, then the clocking hook and one more step; the
    hooked step's gradients against the average of each rank's plain gradients."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Linear(64, 32),
                                torch.nn.Linear(32, 4))
    plain = copy.deepcopy(model)
    # 8 KiB buckets: the last layer's two tensors, then one bucket per larger tensor
    ddp = DistributedDataParallel(model, bucket_cap_mb=8 / 1024)
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(ctx.rank))
    for _ in range(2):
        ddp(x).sum().backward()
        ddp.zero_grad(set_to_none=True)
    comm: list = []
    first = clock_torch_ddp(ddp, comm, time.perf_counter)
    again = clock_torch_ddp(ddp, comm, time.perf_counter)   # torch takes one hook, once
    ddp(x).sum().backward()
    plain(x).sum().backward()
    for p in plain.parameters():   # what DDP's average must be
        dist.all_reduce(p.grad)
        p.grad /= ctx.world_size
    same = all(torch.allclose(p.grad, q.grad, atol=1e-6)
               for p, q in zip(model.parameters(), plain.parameters()))
    return {"first": first, "again": again, "same": same, "comm": comm,
            "bytes": sum(p.numel() * 4 for p in model.parameters())}
