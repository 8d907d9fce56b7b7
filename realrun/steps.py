"""One training step of one configuration on one rank: wrap, optimise, step.

A configuration is ``{"strategy": name, "bucket_mb": MB or None}`` (realrun/configs.py; a
sharded one may add ``"shard_unit_mb"``). :func:`wrap` puts a module under the implementation
the strategy names (simddp's ``Strategy.implementation``): torch's DistributedDataParallel
for ``ddp`` and every hooked strategy (``ddp+fp16``, ``bucketed+powersgd:2``: the hook is
registered by realrun/comm_hooks.py), torch FSDP2 for ``fsdp`` and ``zero2``
(realrun/sharded.py), realrun.DDP for the rest, nothing for compute-only. :class:`Trainer` is one rank's model, optimizer and batch
(a realrun.workload.Workload: a preset or the user's own module), with the step that realrun
bench times.
"""
from __future__ import annotations

import inspect
from typing import Callable, NamedTuple

import torch
from torch.nn.parallel import DistributedDataParallel

from realrun import comm_hooks
from realrun.ddp import DDP
from realrun.precision import autocast
from realrun.sharded import shard_module
from realrun.timing import phase
from realrun.workload import Workload, forward, loss_of
from simddp.result import COMPUTE_ONLY
from simddp.hooks import hook_cost
from simddp.strategy import DDP_FIRST_BUCKET_MB, make_strategy, split_name

LEARNING_RATES = {"sgd": 1e-3, "adam": 1e-4}  # small: the same batch is seen hundreds of times


def make_optimizer(name: str, params) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=LEARNING_RATES["sgd"])
    if name == "adam":
        return torch.optim.Adam(params, lr=LEARNING_RATES["adam"])
    raise ValueError(f"optimizer {name!r}: expected sgd or adam")


def torch_ddp_bucket_args(bucket_mb: float) -> dict:
    """torch DDP arguments giving simddp's ``ddp`` plan: a 1 MiB first bucket, then the cap.

    Since torch 2.x a plain ``bucket_cap_mb=X`` makes the first bucket X as well (the 1 MiB
    first bucket is kept only when the cap is left at its default), which is simddp's
    ``bucketed`` plan. ``bucket_cap_mb_list=[1, X]`` (in recent releases, e.g. 2.13) restores
    torch's default rule at any cap; older releases always used 1 MiB, so ``bucket_cap_mb``
    alone is right there.
    """
    if "bucket_cap_mb_list" in inspect.signature(DistributedDataParallel.__init__).parameters:
        return {"bucket_cap_mb_list": [DDP_FIRST_BUCKET_MB, bucket_mb]}
    return {"bucket_cap_mb": bucket_mb}


class Wrapped(NamedTuple):
    """What :func:`wrap` made: the model to train, realrun.DDP's ``sync`` (None otherwise:
    torch DDP and FSDP2 wait inside backward), the DistributedDataParallel if torch's DDP runs
    it, and ``calls_per_bucket`` (torch DDP: calls per bucket of its hook, else 1) or
    ``calls`` (the plan's collective calls per step, when nothing reports them at run time)."""

    model: torch.nn.Module
    sync: Callable[[], None] | None
    torch_ddp: DistributedDataParallel | None
    calls: int | None = None
    calls_per_bucket: int = 1


def wrap(module: torch.nn.Module, config: dict, ctx, process_group=None) -> Wrapped:
    """``module`` under the configuration's implementation (see the module text)."""
    name, mb = config["strategy"], config["bucket_mb"]
    if name == COMPUTE_ONLY:
        return Wrapped(module, None, None, 0)
    strategy = make_strategy(name, *(() if mb is None else (mb,)),
                             shard_unit_mb=config.get("shard_unit_mb"))
    if strategy.implementation == "fsdp":
        model, plan = shard_module(module, strategy, ctx.device, process_group)
        return Wrapped(model, None, None, plan.calls)
    if strategy.implementation == "torch":
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        # ddp (+hook): torch's 1 MiB first bucket, then the cap; bucketed+hook: one cap for all
        buckets = (torch_ddp_bucket_args(mb) if split_name(name)[0] != "bucketed"
                   else {"bucket_cap_mb": mb})
        model = DistributedDataParallel(module, device_ids=device_ids,
                                        process_group=process_group, **buckets)
        hook, per_bucket = strategy.comm_hook, 1
        if hook is not None:
            comm_hooks.register(model, hook, process_group)
            per_bucket = len(hook_cost(hook, [4]).wire_bytes)  # PowerSGD: 3 calls per bucket
        return Wrapped(model, None, model, None, per_bucket)
    model = DDP(module, strategy=name, process_group=process_group,
                **({} if mb is None else {"bucket_mb": mb}))
    return Wrapped(model, model.finish_gradient_synchronization, None, None)


class Trainer:
    """One configuration on one rank: its model, optimizer and the step it times."""

    def __init__(self, config: dict, workload: Workload, ctx, payload: dict,
                 process_group=None) -> None:
        module, self.inputs, self.loss_fn = workload.build(payload["seed"], ctx.rank,
                                                           ctx.device)
        self.wrapped = wrap(module, config, ctx, process_group)
        self.model, self.sync, self.torch_ddp = self.wrapped[:3]
        self.optimizer = make_optimizer(payload["optimizer"], self.model.parameters())
        self.precision = payload.get("precision", "fp32")
        self.device = ctx.device

    def loss(self):
        """Forward and loss, in the run's precision (realrun/precision.py)."""
        with autocast(self.precision, self.device):
            return loss_of(forward(self.model, self.inputs), self.loss_fn)

    def step(self, ranges: bool = False) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with phase("forward", ranges):
            loss = self.loss()
        with phase("backward", ranges):
            loss.backward()
        with phase("sync", ranges):
            if self.sync is not None:
                self.sync()
        with phase("optimizer", ranges):
            self.optimizer.step()

    def collectives(self) -> int:
        """Collective calls per step: the plan's, or what torch DDP reports after its rebuild
        (times the calls its comm hook makes per bucket)."""
        if self.torch_ddp is not None:
            data = self.torch_ddp._get_ddp_logging_data()
            sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
            buckets = len([s for s in str(sizes).split(",") if s.strip()])
            return buckets * self.wrapped.calls_per_bucket
        if self.wrapped.calls is not None:
            return self.wrapped.calls
        return len(self.model.plan.collectives)
