"""Rank function of tests/realrun/test_profile_memory.py: the job a profile stands for.

    run_world("tests.realrun._memory_targets:torch_ddp_peak", {"workload": w.to_json(),
              "steps": 5}, world_size=2)

Plain torch DDP (model, gradients, its buckets, SGD) on the rank's device, nothing of
realrun's wrappers; its peak memory over what the rank used before building it, read the way
``realrun profile`` reads its own (realrun.peak_memory.PeakMemory).
"""
from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

from realrun.peak_memory import PeakMemory
from realrun.workload import Workload, forward, loss_of


def torch_ddp_peak(payload: dict, ctx) -> dict:
    memory = PeakMemory(ctx.device)
    model, inputs, loss_fn = Workload(**payload["workload"]).build(0, ctx.rank, ctx.device)
    cuda = ctx.device.type == "cuda"
    ddp = DistributedDataParallel(model, device_ids=[ctx.device.index] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    for _ in range(payload["steps"]):
        opt.zero_grad(set_to_none=True)
        loss_of(forward(ddp, inputs), loss_fn).backward()
        opt.step()
    memory.mark("torch_ddp")
    return {"peak_bytes": memory.phases["torch_ddp"]}
