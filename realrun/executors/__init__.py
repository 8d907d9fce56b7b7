"""One executor per DDP implementation, chosen by data: ``Strategy.implementation``.

    wrapped = executor_for(strategy)(module, strategy, ctx, process_group)

Each module here puts a torch module under one implementation (simddp.inputs.host.IMPLEMENTATIONS)
and returns a :class:`~realrun.executors.wrapped.Wrapped`: ``realrun_ddp`` (realrun.DDP),
``torch_ddp`` (torch's DistributedDataParallel, comm hooks) and ``fsdp`` (torch FSDP2). A new
implementation is a new module and a new key of :data:`EXECUTORS`; nothing here or in
realrun/steps.py reads a strategy's name.
"""
from __future__ import annotations

from typing import Callable

from realrun.executors import fsdp, realrun_ddp, torch_ddp
from realrun.executors.wrapped import Wrapped
from simddp.planning.registry import REALRUN_DDP, TORCH_DDP, TORCH_FSDP
from simddp.planning.strategy import Strategy

Executor = Callable[..., Wrapped]
# one per simddp.planning.registry.IMPLEMENTATIONS (the registry's rows name theirs)
EXECUTORS: dict[str, Executor] = {REALRUN_DDP: realrun_ddp.wrap, TORCH_DDP: torch_ddp.wrap,
                                  TORCH_FSDP: fsdp.wrap}


def executor_for(strategy: Strategy) -> Executor:
    """The ``wrap(module, strategy, ctx, process_group)`` of the strategy's implementation."""
    try:
        return EXECUTORS[strategy.implementation]
    except KeyError:
        raise ValueError(f"strategy {strategy.name!r}: no executor for implementation "
                         f"{strategy.implementation!r}; realrun has {', '.join(EXECUTORS)}"
                         ) from None
