"""The "torch" implementation: torch's DistributedDataParallel with the Strategy's buckets
(ddp; every strategy with a comm hook, registered by realrun/comm_hooks.py)."""
from __future__ import annotations

import inspect

from torch.nn.parallel import DistributedDataParallel

from realrun import comm_hooks
from realrun.executors.wrapped import Wrapped
from simddp.planning.hooks import hook_cost
from simddp.planning.strategy import MB, Strategy


def torch_ddp_bucket_args(strategy: Strategy) -> dict:
    """torch DDP arguments giving the Strategy's plan: its first bucket, then its cap.

    Since torch 2.x a plain ``bucket_cap_mb=X`` makes the first bucket X as well (the 1 MiB
    first bucket is kept only when the cap is left at its default): simddp's ``bucketed``
    plan, first bucket = cap. ``bucket_cap_mb_list=[1, X]`` (in recent releases, e.g. 2.13)
    restores torch's default rule (``ddp``) at any cap; older releases always used 1 MiB, so
    ``bucket_cap_mb`` alone is right there. Sizes go in as bytes / 2**20 exactly: torch takes
    ``int(mb * 2**20)``, the strategy's own bytes.

    >>> from simddp.planning.strategy import make_strategy
    >>> torch_ddp_bucket_args(make_strategy("ddp", 4)), torch_ddp_bucket_args(make_strategy("bucketed", 4))
    ({'bucket_cap_mb_list': [1.0, 4.0]}, {'bucket_cap_mb': 4.0})
    """
    cap_mb, first_mb = strategy.bucket_bytes / MB, strategy.first_bucket_bytes / MB
    if first_mb == cap_mb:
        return {"bucket_cap_mb": cap_mb}
    if "bucket_cap_mb_list" in inspect.signature(DistributedDataParallel.__init__).parameters:
        return {"bucket_cap_mb_list": [first_mb, cap_mb]}
    return {"bucket_cap_mb": cap_mb}


def wrap(module, strategy: Strategy, ctx, process_group=None) -> Wrapped:
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    model = DistributedDataParallel(module, device_ids=device_ids, process_group=process_group,
                                    **torch_ddp_bucket_args(strategy))
    hook, per_bucket = strategy.comm_hook, 1
    if hook is not None:
        comm_hooks.register(model, hook, process_group)
        per_bucket = len(hook_cost(hook, [4]).wire_bytes)  # PowerSGD: 3 calls per bucket
    return Wrapped(model, None, model, None, per_bucket)
