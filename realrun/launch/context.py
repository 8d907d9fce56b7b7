"""Who a rank is and where its tensors live: the one place mapping a backend to a device.

    ctx = make_context(rank=0, world_size=2, local_rank=0, backend="gloo")   # device cpu
    ctx.barrier()          # every rank here; on NCCL with the rank's own device
    ctx.synchronize()      # wait for queued CUDA work before reading a clock; no-op on CPU

Workers and torchrun ranks both come through :func:`make_context`, so the CPU path tested on
this box is the path that runs on a GPU cluster: Gloo -> cpu, NCCL -> cuda:local_rank.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from realrun.launch.allocator import pin_thresholds


@dataclass(frozen=True)
class RankContext:
    """Who this rank is and where its tensors live; handed to every target function."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: "torch.device"
    allocator: str = ""   # what realrun did to the host allocator (realrun/launch/allocator.py)

    def synchronize(self) -> None:
        """Wait for queued device work (CUDA kernels, NCCL collectives); no-op on CPU."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def barrier(self, group=None) -> None:
        """Every rank of ``group`` (default: the world) gets here before any goes on."""
        if self.device.type == "cuda":
            dist.barrier(group=group, device_ids=[self.device.index])  # else NCCL guesses
        else:
            dist.barrier(group=group)


def make_context(rank: int, world_size: int, local_rank: int, backend: str) -> RankContext:
    """The rank's context: gloo -> cpu, nccl -> cuda:local_rank (set as current device)."""
    if backend == "nccl":
        require_gpus(local_rank + 1)
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        return RankContext(rank, world_size, local_rank, backend, device)
    # A CPU step frees and re-allocates its tensors: keep them in the heap (allocator.py).
    return RankContext(rank, world_size, local_rank, backend, torch.device("cpu"),
                       pin_thresholds())


def init_group(ctx: RankContext, timeout_s: float) -> None:
    """init_process_group from the env (MASTER_ADDR/PORT), with `timeout_s` for every collective."""
    dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world_size,
                            timeout=timedelta(seconds=timeout_s))


def require_gpus(n_gpus: int) -> None:
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found == 0:
        raise ValueError("backend nccl needs CUDA GPUs; none found (torch "
                         f"{torch.__version__}); on CPU use --backend gloo")
    if found < n_gpus:
        raise ValueError(f"backend nccl needs {n_gpus} GPUs on this host (one per rank); "
                         f"found {found}")
