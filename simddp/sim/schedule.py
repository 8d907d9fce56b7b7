"""A plan turned into the tables one step runs from: who is ready when, what waits, what it costs.

Everything a strategy, a comm hook, sharding or the host changes about a step is decided
here, once, before any event; the engine only walks these tables. Per micro-step and layer a
:class:`Schedule` says which collectives the layer's finished backward releases, and which
compute releases or waits for where a forward or backward starts (FSDP's all-gathers)::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> from simddp.inputs.resolved import Inputs
    >>> from simddp.sim.costs import plan_costs
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> p = plan(toy, make_strategy("overlap"))
    >>> s = build_schedule(toy, p, 2, plan_costs(p, Inputs(toy, Link("l", 0.0, 1.0), 2)))
    >>> s.after_backward, [label for label, _, _ in s.backward], s.comm_s
    ([{1: [0], 0: [1]}], ['l1 bwd', 'l0 bwd'], [0.001, 0.001])
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.inputs.profile import ModelProfile
from simddp.kinds import Phase, SpanKind
from simddp.planning.plans import Collective, Plan
from simddp.planning.strategy import Strategy
from simddp.sim.comm import span_kinds
from simddp.sim.costs import PlanCosts
from simddp.sim.overheads import shard_host_s

# per micro-step: layer -> (collectives released there, collectives the compute waits for)
Points = list[dict[int, tuple[list[int], list[int]]]]


@dataclass
class Schedule:
    """One optimizer step of a plan, as tables (indices are launch order).

    forward: (first layer, seconds, label) of each stretch of forward between points;
    backward: (label, seconds, layer) in backward order;
    after_backward: per micro-step, layer -> collectives its finished backward releases;
    at_start: per phase (forward, backward), the points where compute releases or waits;
    comm_s, comm_kinds: each collective's seconds on the comm lane and its span kind;
    copy_in: per micro-step, layer -> host seconds after its backward, before launches;
    copy_out: per collective, host seconds once it is done ([] when the host is free);
    shard_s: per collective, FSDP2's host seconds at issue and once done (None: none);
    hold: compute waits for each collective where it releases it (FSDP2 on Gloo/CPU);
    waited: which collectives something waits for by name (a gate, a copy-out, hold);
    last_of: micro-step -> its last collective, whose end the step's end waits for.
    """

    collectives: tuple[Collective, ...]
    micro_steps: int
    forward: list[tuple[int, float, str]]
    backward: list[tuple[str, float, int]]
    after_backward: list[dict[int, list[int]]]
    at_start: dict[Phase, Points]
    comm_s: list[float]
    comm_kinds: list[SpanKind]
    copy_in: list[dict[int, float]]
    copy_in_label: str
    copy_out: list[float]
    shard_s: list[tuple[float, float]] | None
    hold: bool
    waited: list[bool]
    last_of: dict[int, int]
    optimizer_s: float

    @property
    def gated_backward(self) -> bool:
        return any(self.at_start[Phase.BACKWARD])


def build_schedule(profile: ModelProfile, plan: Plan, world_size: int, pc: PlanCosts
                   ) -> Schedule:
    """The tables of one step of ``plan`` with its costs ``pc``, every compute second times
    ``pc.compute_factor``; ``world_size``: the ranks a sharded plan's units are sharded over."""
    collectives, micro = plan.collectives, plan.micro_steps
    costs, copy_in, copy_out, compute_factor = pc.costs, pc.copy_in, pc.copy_out, pc.compute_factor
    hold = costs.blocking_collectives
    after_backward: list[dict[int, list[int]]] = [{} for _ in range(micro)]
    at_start: dict[Phase, Points] = {Phase.FORWARD: [{} for _ in range(micro)],
                                     Phase.BACKWARD: [{} for _ in range(micro)]}
    waited = [bool(copy_out) or hold] * len(collectives)
    for i, c in enumerate(collectives):
        if c.ready_at == Phase.AFTER_BACKWARD:
            after_backward[c.micro_step].setdefault(c.ready_layer, []).append(i)
        else:
            at_start[Phase(c.ready_at)][c.micro_step].setdefault(
                c.ready_layer, ([], []))[0].append(i)
        if c.gates:
            waited[i] = True
            at_start[Phase(c.gates[0])][c.micro_step].setdefault(
                c.gates[1], ([], []))[1].append(i)
    forward_points = {li for points in at_start[Phase.FORWARD] for li in points}
    return Schedule(
        collectives=collectives, micro_steps=micro,
        forward=[(a, sec * compute_factor, label)
                 for a, sec, label in forward_segments(profile, forward_points)],
        backward=[(f"{layer.name} bwd", layer.backward_s * compute_factor, li)
                  for li, layer in reversed(list(enumerate(profile.layers)))],
        after_backward=after_backward, at_start=at_start,
        comm_s=pc.comm_s,
        comm_kinds=span_kinds(plan),
        copy_in=copy_in,
        copy_in_label="hooks+copy-in" if costs.hook_s or costs.launch_s else "copy-in",
        copy_out=copy_out,
        shard_s=([shard_host_s(costs, c, world_size) for c in collectives]
                 if plan.units and not costs.free else None),
        hold=hold, waited=waited,
        last_of={c.micro_step: i for i, c in enumerate(collectives)},
        optimizer_s=optimizer_share_s(profile, plan, world_size) * compute_factor)


def forward_segments(profile: ModelProfile, points: set[int]) -> list[tuple[int, float, str]]:
    """(first layer, seconds, label) of each stretch of forward between the layers where
    compute waits or releases something; one "forward" span when no layer but 0 does."""
    layers = profile.layers
    if not points - {0}:
        return [(0, profile.forward_s, "forward")]
    starts = sorted(points | {0})
    ends = starts[1:] + [len(layers)]
    return [(a, sum(layer.forward_s for layer in layers[a:b]), f"{layers[a].name} fwd")
            for a, b in zip(starts, ends)]


def optimizer_share_s(profile: ModelProfile, plan: Plan | Strategy, world_size: int) -> float:
    """The optimizer's seconds on one rank of ``plan`` (or of its strategy): all of it, or
    1/``world_size`` when it updates a shard."""
    return profile.optimizer_s / (world_size if plan.shards_optimizer else 1)
