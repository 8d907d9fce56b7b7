"""The "realrun" implementation: :class:`realrun.ddp.DDP` executes the Strategy's plan
(naive, flat, overlap, bucketed), one all-reduce per planned collective."""
from __future__ import annotations

from realrun.ddp import DDP
from realrun.executors.wrapped import Wrapped
from simddp.strategy import Strategy


def wrap(module, strategy: Strategy, ctx, process_group=None) -> Wrapped:
    model = DDP(module, strategy=strategy, process_group=process_group)
    return Wrapped(model, model.finish_gradient_synchronization, None, None)
