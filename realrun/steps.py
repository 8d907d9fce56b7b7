"""One training step of one configuration on one rank: wrap, optimise, step.

A configuration is ``{"strategy": name, "bucket_mb": MB, "spec": Strategy as a dict}``
(realrun/configs.py). :func:`wrap` reads the Strategy back (``Strategy.from_dict``) and puts
the module under the implementation it names, ``Strategy.implementation``, through that
implementation's executor (realrun/executors/): torch's DistributedDataParallel (``ddp`` and
every hooked strategy, ``ddp+fp16``), torch FSDP2 (``fsdp``, ``zero2``), realrun.DDP (the
rest); nothing for compute-only (no Strategy). Nothing here reads a strategy's name.
:class:`Trainer` is one rank's model, optimizer and batch (a realrun.workload.Workload: a
preset or the user's own module), with the step that realrun bench times.
"""
from __future__ import annotations

import torch

from realrun.configs import spec_of
from realrun.executors import executor_for
from realrun.executors.wrapped import Wrapped
from realrun.precision import autocast
from realrun.timing import phase
from realrun.workload import Workload, forward, loss_of

LEARNING_RATES = {"sgd": 1e-3, "adam": 1e-4}  # small: the same batch is seen hundreds of times


def make_optimizer(name: str, params) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=LEARNING_RATES["sgd"])
    if name == "adam":
        return torch.optim.Adam(params, lr=LEARNING_RATES["adam"])
    raise ValueError(f"optimizer {name!r}: expected sgd or adam")


def wrap(module: torch.nn.Module, config: dict, ctx, process_group=None) -> Wrapped:
    """``module`` under the implementation of the configuration's Strategy (module text)."""
    strategy = spec_of(config)
    if strategy is None:  # compute-only: no communication at all
        return Wrapped(module, None, None, 0)
    return executor_for(strategy)(module, strategy, ctx, process_group)


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
