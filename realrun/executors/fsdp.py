"""The "fsdp" implementation: torch FSDP2, ``fully_shard`` per simddp unit (fsdp, zero2, hsdp;
realrun/sharded.py), under the Strategy's ``MixedPrecisionPolicy`` when it has a
``param_dtype`` (``--precision bf16``). It waits inside backward, so there is no ``sync``.
hsdp's node is :func:`realrun.executors.realrun_ddp.gpus_per_node` ranks, as hierarchical's."""
from __future__ import annotations

from realrun.executors.realrun_ddp import gpus_per_node
from realrun.executors.wrapped import Wrapped
from realrun.sharded import shard_module
from simddp.planning.strategy import Strategy


def wrap(module, strategy: Strategy, ctx, process_group=None) -> Wrapped:
    model, plan = shard_module(module, strategy, ctx.device, process_group,
                               gpus_per_node() if strategy.hybrid else None)
    return Wrapped(model, None, None, plan.calls)
