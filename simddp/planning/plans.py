"""The plan: which gradients go into which collective, ready when, launched in what order.

The one place strategy semantics live: the engine, the closed form and the real executors
all run a :class:`Plan` (docs/FORMATS.md, "Plans") and never branch on a strategy name::

    >>> from simddp import Layer, ModelProfile, make_strategy
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 * 2**20,), 0.01, 0.02) for i in range(3)))
    >>> [(c.tensor_ids, c.ready_layer) for c in plan(toy, make_strategy("bucketed", 8)).collectives]
    [((2, 1), 1), ((0,), 0)]

``ready_layer`` is the forward index of the layer after whose backward the collective is
ready (0: the whole backward). A comm hook's calls, and sharded plans' kinds::

    >>> c = plan(toy, make_strategy("ddp+fp16", 8)).collectives[0]
    >>> c.nbytes, c.calls, c.hook.pre_work_bytes
    (4194304, (2097152,), 4194304)
    >>> [(c.kind, c.ready_at, c.gates) for c in plan(toy, make_strategy("fsdp")).collectives][:2]
    [('all_gather', 'forward', ('forward', 0)), ('all_gather', 'forward', ('forward', 1))]
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.planning.buckets import assign_buckets
from simddp.planning.grad_dtype import bucket_widening, reduced_in
from simddp.planning.hooks import HookCost, hook_cost
from simddp.cost.factors import ALL_REDUCE
from simddp.inputs.profile import ModelProfile
from simddp.cost.hierarchical import WORLD
from simddp.planning.sharding import (AFTER_BACKWARD, ShardUnit, hybrid_steps, shard_units,
                                      sharded_steps)
from simddp.planning.registry import Name
from simddp.planning.strategy import Strategy


@dataclass(frozen=True, slots=True)   # slots: quicker to build, and plans build thousands
class Collective:
    """One collective: its gradients (tensor ids, in bucket order), bytes and readiness
    (fields: docs/FORMATS.md, "Plans"). ``nbytes`` are fp32 bytes, a sharded collective's
    the whole unit's; ``gates`` is the (pass, layer) whose compute waits for it (None: the
    micro-step's end); ``hook`` its calls in another dtype or a comm hook's (None: one call
    of ``nbytes``); ``group`` the ranks it runs among.
    """

    label: str
    tensor_ids: tuple[int, ...]
    nbytes: int
    ready_layer: int
    launch_index: int
    micro_step: int = 0
    kind: str = ALL_REDUCE
    ready_at: str = AFTER_BACKWARD
    gates: tuple[str, int] | None = None
    hook: HookCost | None = None
    group: str = WORLD

    @property
    def calls(self) -> tuple[int, ...]:
        """Bytes of each call on the wire, in order (one call of ``nbytes`` without a hook)."""
        return (self.nbytes,) if self.hook is None else self.hook.wire_bytes


@dataclass(frozen=True)
class Plan:
    """Collectives in launch order, over ``micro_steps`` forward+backward passes per step."""

    strategy: Strategy
    collectives: tuple[Collective, ...]
    micro_steps: int = 1
    units: tuple[ShardUnit, ...] = ()   # sharded plans: what each fully_shard call groups

    @property
    def shards_optimizer(self) -> bool:
        """Whether each rank's optimizer updates only its 1/p shard of the parameters."""
        return self.strategy.shards_optimizer

    @property
    def calls(self) -> int:
        """Collective calls per optimizer step (a PowerSGD bucket makes three)."""
        if self.strategy.comm_hook is None:
            return len(self.collectives)
        return sum(len(c.calls) for c in self.collectives)

    def per_micro_step(self, micro_step: int) -> tuple[Collective, ...]:
        return tuple(c for c in self.collectives if c.micro_step == micro_step)

    @property
    def buckets(self) -> list[tuple[int, ...]]:
        """Tensor ids of each collective of the synced micro-step, in launch order."""
        last = self.micro_steps - 1
        return [c.tensor_ids for c in self.collectives if c.micro_step == last]


def group_tensors(profile: ModelProfile, strategy: Strategy) -> list[tuple[int, ...]]:
    """Tensor ids grouped into collectives, in launch order, for one synced micro-step."""
    order = profile.ready_order_ids()
    if strategy.granularity == "all":
        return [order] if order else []
    if strategy.granularity == "tensor":
        return [(tid,) for tid in order]
    sizes = [profile.tensor_bytes[tid] for tid in order]
    widen = bucket_widening(strategy.grad_dtype)   # a cap counts 16-bit gradients' bytes
    limits = (strategy.first_bucket_bytes * widen, strategy.bucket_bytes * widen)
    return [tuple(order[i] for i in bucket) for bucket in assign_buckets(sizes, limits)]


def plan(profile: ModelProfile, strategy: Strategy) -> Plan:
    """The collectives ``strategy`` issues for ``profile``, in launch order."""
    if strategy.reshard_after_forward is not None:
        return _sharded_plan(profile, strategy)
    groups = group_tensors(profile, strategy)
    synced = range(strategy.accum_steps)
    if strategy.sync_last_only:
        synced = [strategy.accum_steps - 1]
    names, layer_of, size_of = profile.tensor_names, profile.tensor_layer, profile.tensor_bytes
    hook = strategy.comm_hook
    buckets = []  # (label, tensor ids, bytes, ready layer, hook cost): the same every micro-step
    for i, ids in enumerate(groups):
        sizes = [size_of[t] for t in ids]
        # Ready when the last of its gradients is: the lowest owning layer ends backward last.
        ready = min([layer_of[t] for t in ids]) if strategy.overlap else 0
        buckets.append((_label(strategy.granularity, i, ids, names), ids, sum(sizes), ready,
                        None if hook is None else hook_cost(hook, sizes)))
    # Positional arguments: a sweep builds thousands of these, and keywords cost more.
    collectives = tuple(
        Collective(label, ids, nbytes, ready, k * len(buckets) + i, micro) if cost is None
        else Collective(label, ids, nbytes, ready, k * len(buckets) + i, micro, hook=cost)
        for k, micro in enumerate(synced)
        for i, (label, ids, nbytes, ready, cost) in enumerate(buckets))
    return Plan(strategy, reduced_in(collectives, strategy.grad_dtype), strategy.accum_steps)


def _sharded_plan(profile: ModelProfile, strategy: Strategy) -> Plan:
    """fsdp/zero2/hsdp: every micro-step gathers and reduce-scatters, hsdp all-reduces the
    shards across nodes too (simddp/planning/sharding.py)."""
    units = shard_units(profile, strategy.shard_unit_bytes)
    steps = sharded_steps(units, strategy.reshard_after_forward, strategy.param_dtype)
    if strategy.hybrid:
        steps = hybrid_steps(steps)
    collectives = tuple(Collective(**fields, launch_index=k * len(steps) + i, micro_step=k)
                        for k in range(strategy.accum_steps) for i, fields in enumerate(steps))
    return Plan(strategy, reduced_in(collectives, strategy.grad_dtype), strategy.accum_steps,
                units)


def _label(granularity: str, index: int, tensor_ids: tuple[int, ...], names: list[str]) -> str:
    """What a timeline shows: the gradient's name, "bucket3" or "flat"."""
    if granularity == "all":
        return Name.FLAT   # the one collective of the flat strategy
    if granularity == "bucket":
        return f"bucket{index}"
    return names[tensor_ids[0]] or f"grad{tensor_ids[0]}"
