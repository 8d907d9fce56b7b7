"""Rank functions of the gpu tier, run by realrun's launcher on NCCL at world size 1::

    run_world("tests.gpu._targets:trace_ddp", {"dir": "traces", "steps": 5},
              world_size=1, backend="nccl")

Plain torch DDP on the BIG preset (tests/gpu/_cuda.py), nothing of realrun's wrappers: these
are the reference jobs that realrun's profile and simddp's trace-import are checked against.
"""
from __future__ import annotations

from statistics import median

import torch
from torch.nn.parallel import DistributedDataParallel

from realrun.timing import timed
from realrun.workload import forward, loss_of
from tests.gpu._cuda import big_workload


def _job(ctx, workload=None, barrier: bool = False):
    """(model, one step). ``barrier``: each step ends with ``dist.barrier()`` and
    ``torch.cuda.synchronize()``, as tutorials time their steps (issue 52)."""
    import torch.distributed as dist
    model, inputs, loss_fn = (workload or big_workload()).build(0, ctx.rank, ctx.device)
    cuda = ctx.device.type == "cuda"    # Gloo/CPU too: the targets are checked on a CPU box
    ddp = DistributedDataParallel(model, device_ids=[ctx.device.index] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_of(forward(ddp, inputs), loss_fn).backward()
        opt.step()
        if barrier:
            dist.barrier(device_ids=[ctx.device.index]) if cuda else dist.barrier()
            if cuda:
                torch.cuda.synchronize(ctx.device)
    return model, step


def ddp_steps(payload: dict, ctx) -> dict:
    """``steps`` torch DDP steps; the allocator's peak (the job the profile stands for)."""
    _, step = _job(ctx)
    for _ in range(payload["steps"]):
        step()
    torch.cuda.synchronize(ctx.device)
    return {"max_reserved_mib": torch.cuda.max_memory_reserved(ctx.device) / 2**20}


def trace_ddp(payload: dict, ctx) -> dict:
    """A torch.profiler trace of torch DDP, as docs/TRACES.md records one: CPU and CUDA,
    shapes, 2 steps first (DDP rebuilds its buckets in the second), then wait 1, warm-up 1
    and ``steps`` active steps, written to ``dir``; the gradients' bytes, and the median
    of ``steps`` more steps timed without the profiler. ``workload``: a realrun Workload's
    JSON instead of BIG. As common tutorials record it (issue 52): ``memory`` adds
    ``profile_memory=True`` and ``with_stack=True``, ``barrier`` ends every step, traced or
    timed, with ``dist.barrier()`` and ``torch.cuda.synchronize()``."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    from realrun.workload import Workload
    model, step = _job(ctx, payload.get("workload") and Workload(**payload["workload"]),
                       barrier=payload.get("barrier", False))
    memory = payload.get("memory", False)
    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 profile_memory=memory, with_stack=memory,
                 schedule=schedule(wait=1, warmup=1, active=payload["steps"], repeat=1),
                 on_trace_ready=tensorboard_trace_handler(payload["dir"])) as prof:
        for _ in range(payload["steps"] + 2):
            step()
            prof.step()
    ctx.synchronize()
    plain_s = []   # the same steps without the profiler: what the import must come back to
    for _ in range(payload["steps"]):
        plain_s.append(timed(ctx, step))
    return {"grad_bytes": sum(p.numel() * p.element_size() for p in model.parameters()
                              if p.requires_grad), "plain_step_s": median(plain_s)}
