"""What an executor hands back: :class:`Wrapped`, the model to train and how to sync it."""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch.nn.parallel import DistributedDataParallel


class Wrapped(NamedTuple):
    """What an executor made: the model to train, realrun.DDP's ``sync`` (None otherwise:
    torch DDP and FSDP2 wait inside backward), the DistributedDataParallel if torch's DDP runs
    it, and ``calls_per_bucket`` (torch DDP: calls per bucket of its hook, else 1) or
    ``calls`` (the plan's collective calls per step, when nothing reports them at run time)."""

    model: torch.nn.Module
    sync: Callable[[], None] | None
    torch_ddp: DistributedDataParallel | None
    calls: int | None = None
    calls_per_bucket: int = 1
