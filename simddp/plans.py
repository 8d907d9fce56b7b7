"""The plan: which gradients go into which all-reduce, ready when, launched in what order.

This is the one place strategy semantics live. The SimPy engine, the closed form and the
real wrapper (``realrun.DDP``) all execute a :class:`Plan` and never branch on a strategy
name, so a prediction and a measurement of "bucketed, 25 MB" are about the same thing::

    >>> from simddp import Layer, ModelProfile, make_strategy
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 * 2**20,), 0.01, 0.02) for i in range(3)))
    >>> [(c.tensor_ids, c.ready_layer) for c in plan(toy, make_strategy("bucketed", 8)).collectives]
    [((2, 1), 1), ((0,), 0)]

``ready_layer`` is the forward index of the layer after whose backward the collective is
ready: layer 0 ends backward, so strategies that wait for the whole backward use 0.
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.buckets import assign_buckets
from simddp.profile import ModelProfile
from simddp.strategy import Strategy


@dataclass(frozen=True)
class Collective:
    """One all-reduce: its gradients (tensor ids, in bucket order), bytes and readiness."""

    label: str
    tensor_ids: tuple[int, ...]
    nbytes: int
    ready_layer: int
    launch_index: int
    micro_step: int = 0


@dataclass(frozen=True)
class Plan:
    """Collectives in launch order, over ``micro_steps`` forward+backward passes per step."""

    strategy: Strategy
    collectives: tuple[Collective, ...]
    micro_steps: int = 1

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
    limits = (strategy.first_bucket_bytes, strategy.bucket_bytes)
    return [tuple(order[i] for i in bucket) for bucket in assign_buckets(sizes, limits)]


def plan(profile: ModelProfile, strategy: Strategy) -> Plan:
    """The collectives ``strategy`` issues for ``profile``, in launch order."""
    groups = group_tensors(profile, strategy)
    synced = range(strategy.accum_steps)
    if strategy.sync_last_only:
        synced = [strategy.accum_steps - 1]
    names = profile.tensor_names
    labels = [_label(strategy.granularity, i, ids, names) for i, ids in enumerate(groups)]
    collectives = []
    for micro in synced:
        for label, tensor_ids in zip(labels, groups):
            # Ready when the last of its gradients is: the lowest owning layer ends backward last.
            ready = min(profile.tensor_layer[t] for t in tensor_ids) if strategy.overlap else 0
            collectives.append(Collective(
                label=label,
                tensor_ids=tensor_ids,
                nbytes=sum(profile.tensor_bytes[t] for t in tensor_ids),
                ready_layer=ready, launch_index=len(collectives), micro_step=micro))
    return Plan(strategy, tuple(collectives), strategy.accum_steps)


def _label(granularity: str, index: int, tensor_ids: tuple[int, ...], names: list[str]) -> str:
    """What a timeline shows: the gradient's name, "bucket3" or "flat"."""
    if granularity == "all":
        return "flat"
    if granularity == "bucket":
        return f"bucket{index}"
    return names[tensor_ids[0]] or f"grad{tensor_ids[0]}"
