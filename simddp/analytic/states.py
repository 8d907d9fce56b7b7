"""Model states per device, per strategy: what sharding saves and what a comm hook adds.

Parameters, gradients and optimizer state, plus what the strategy keeps on top (the table:
docs/ACCOUNT.md, "Model states per rank, per strategy"), read from the plan so the units and
buckets are the simulator's. 16 MiB over 4 ranks, fp32 and Adam::

    >>> from simddp import Layer, ModelProfile, make_strategy, plan
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 * 2**20,)) for i in range(4)))
    >>> {k: v // 2**20 for k, v in state_bytes(plan(toy, make_strategy("fsdp")), 4).items()}
    {'params': 4, 'grads': 4, 'optimizer': 8, 'gathered': 12}

Gathered: the unit computing and the one prefetched, and one unit's full gradient. Other
precisions: :class:`PerParam`.
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.planning.hooks import GRAD_ELEM_BYTES, hook_memory_bytes
from simddp.planning.plans import Plan

ADAM_STATES = 2   # moments per parameter (exp_avg, exp_avg_sq); SGD without momentum: 0


@dataclass(frozen=True)
class PerParam:
    """Bytes per parameter of each state: stored parameters, gradients, optimizer state, and
    the parameters FSDP gathers (the compute copy's dtype if there is one)."""

    params: int = 4
    grads: int = 4
    optimizer: int = 4 * ADAM_STATES
    gathered: int = 4

    @classmethod
    def of(cls, prec) -> "PerParam":
        """From a :class:`simddp.analytic.memory.Precision`."""
        return cls(prec.master_bytes, prec.grad_bytes, prec.optim_bytes, prec.gather_bytes)


FP32_ADAM = PerParam()


def state_bytes(plan: Plan, world_size: int, per: PerParam = FP32_ADAM) -> dict[str, int]:
    """Bytes per device of each model state under ``plan`` (of fp32 gradients, as profiles
    hold them) over ``world_size`` ranks."""
    if plan.units:
        units = [u.nbytes // GRAD_ELEM_BYTES for u in plan.units]   # elements
        shard = sum(-(-n // world_size) for n in units)
        largest = max(units)
        # fsdp: the unit computing and the one prefetched; zero2: every unit, forward to
        # backward. Both: one unit's full gradient until its reduce-scatter.
        params = 2 * largest if plan.strategy.reshard_after_forward else sum(units)
        return {"params": shard * per.params, "grads": shard * per.grads,
                "optimizer": shard * per.optimizer,
                "gathered": params * per.gathered + largest * per.grads}
    synced = plan.per_micro_step(plan.micro_steps - 1)   # every gradient, once
    total = sum(c.nbytes for c in synced) // GRAD_ELEM_BYTES
    out = {"params": total * per.params, "grads": total * per.grads,
           "optimizer": total * per.optimizer}
    hook = plan.strategy.comm_hook
    if hook is not None:
        out.update(hook_memory_bytes(hook, [(c.nbytes, c.hook) for c in synced]))
    return out
