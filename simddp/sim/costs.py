"""What one plan costs on one scenario's inputs, worked out once: host work, comm seconds, factors.

The engine's schedule, the closed form and the predictor read this and nothing else. It is
also the one hook where a host's own effects (``Inputs.effects``, simddp/rig/) act; without
them each collective takes the law's seconds under the resolved contention::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> from simddp.inputs.resolved import Inputs
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> pc = plan_costs(plan(toy, make_strategy("overlap")), Inputs(toy, Link("l", 0.0, 1.0), 2))
    >>> pc.comm_s, pc.compute_factor, pc.copy_out
    ([0.001, 0.001], 1.0, [])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simddp.inputs.contention import Contention
from simddp.inputs.host import HostCosts, after_comm_factor
from simddp.inputs.resolved import Inputs
from simddp.planning.plans import Plan
from simddp.planning.sharding import shard_ranks
from simddp.sim.comm import comm_seconds
from simddp.sim.overheads import host_copies


def shard_ranks_of(strategy, inputs: Inputs) -> int:
    """The ranks each unit of ``strategy`` is sharded over on ``inputs``
    (:func:`simddp.planning.sharding.shard_ranks`)."""
    topology = inputs.topology
    return shard_ranks(strategy, inputs.world_size,
                       None if topology is None else topology.gpus_per_node)


@dataclass(frozen=True)
class CommLane:
    """The comm lane of one plan, as a host's effects hand it back: each collective's
    seconds and own comm factor under contention (``slowdowns`` None: the contention's), a
    shaped link's token ``bucket`` (None: a wire), and the ``wake_s`` a micro-step's first
    collective after compute waits.
    """

    comm_s: list[float]
    contention: Contention
    slowdowns: list[float] | None = None
    bucket: Any = None
    wake_s: float = 0.0


@dataclass(frozen=True)
class PlanCosts:
    """One plan on one scenario's inputs: the implementation's host costs and host work
    (``copy_in``, ``copy_out``: simddp/sim/overheads.py), the comm lane and the factor every
    compute second takes in a step that communicates (``compute_factor``)."""

    costs: HostCosts
    copy_in: list[dict[int, float]]
    copy_out: list[float]
    compute_factor: float
    lane: CommLane

    @property
    def comm_s(self) -> list[float]:
        return self.lane.comm_s


def plan_costs(plan: Plan, inputs: Inputs) -> PlanCosts:
    """What ``plan`` costs on ``inputs``."""
    costs = inputs.costs(plan.strategy.implementation)
    copy_in, copy_out = host_copies(inputs.profile, costs, plan,
                                     shard_ranks_of(plan.strategy, inputs))
    if inputs.effects is None:   # every preset and NCCL link: the law's seconds as they are
        lane = CommLane(comm_seconds(plan, inputs.link, inputs.world_size, costs,
                                     inputs.topology), inputs.contention)
    else:                        # the one hook where a host's own effects act
        lane = inputs.effects.comm_lane(plan, inputs, costs)
    return PlanCosts(costs, copy_in, copy_out, after_comm_factor(inputs.host, plan), lane)
