"""How long each collective of a plan occupies the communication lane.

The collective law per call (:mod:`simddp.cost`), blocking where each is waited for before the
next, plus a comm hook's work between its calls and FSDP2's cast before a mixed-precision
all-gather::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> from simddp.inputs.gloo_host import GlooHost
    >>> link, host = Link("l", 50e-6, 1.0), LevelHosts(inter=GlooHost(blocking_alpha_s=80e-6))
    >>> [round(s * 1e3, 3) for s in comm_seconds(plan(toy, make_strategy("overlap")), link, 2,
    ...                                           hosts=host)]
    [1.05, 1.05]
    >>> [round(s * 1e3, 3) for s in comm_seconds(plan(toy, make_strategy("naive")), link, 2,
    ...                                           hosts=host)]
    [1.08, 1.08]

One collective at a time: two in flight predicted small-collective steps too fast
(docs/FINDINGS.md#small-collective-queues). The CPU rig (:mod:`simddp.rig`) passes ``hosts``.
"""
from __future__ import annotations

from simddp.cost.hierarchical import ACROSS, NO_HOSTS, LevelHosts, group_s
from simddp.cost.single import all_reduce_law, collective_s
from simddp.inputs.host import FREE, HostCosts
from simddp.inputs.link import Link
from simddp.inputs.topology import Topology
from simddp.kinds import CollectiveKind, SpanKind
from simddp.planning.plans import Plan
from simddp.planning.sharding import cast_seconds, shard_ranks
from simddp.sim.overheads import comm_gaps_s


def issued_blocking(plan: Plan, costs: HostCosts = FREE) -> bool:
    """Whether each collective is waited for before the next is issued (and pays a host's
    blocking α): plans that do not overlap, or ``blocking_collectives``."""
    return not plan.strategy.overlap or costs.blocking_collectives


def comm_seconds(plan: Plan, link: Link, world_size: int, costs: HostCosts = FREE,
                 topology: Topology | None = None, hosts: LevelHosts = NO_HOSTS) -> list[float]:
    """Seconds each collective of ``plan`` occupies the comm lane, in launch order. With
    ``topology`` (``link`` is then the one between nodes) each runs on its process group by
    the strategy's algorithm; without, every rank is one node."""
    blocking = issued_blocking(plan, costs)
    if (not plan.units and plan.strategy.comm_hook is None and topology is None
            and plan.strategy.grad_dtype is None):
        # plain all-reduces on one link: the common case, kept lean
        law = all_reduce_law(link, world_size, blocking, hosts.inter)
        return [law(c.nbytes) for c in plan.collectives]
    if topology is not None:
        algorithm = plan.strategy.algorithm

        def call_s(kind: str, n_bytes: float, group: str) -> float:
            return group_s(topology, link, kind, n_bytes, group, algorithm, blocking, hosts)
    else:
        def call_s(kind: str, n_bytes: float, group: str) -> float:
            if group == ACROSS:   # one node: nothing to all-reduce across nodes
                return 0.0
            return collective_s(link, kind, n_bytes, world_size, blocking, host=hosts.inter)
    gaps_s = comm_gaps_s(costs, plan) or [0.0] * len(plan.collectives)
    # FSDP2's mixed precision casts each shard before its all-gather (simddp/planning/sharding.py)
    casts_s = cast_seconds(plan, shard_ranks(plan.strategy, world_size,
                                             topology and topology.gpus_per_node))
    return [sum(call_s(c.kind, n, c.group) for n in c.calls) + gap_s + cast_s
            for c, gap_s, cast_s in zip(plan.collectives, gaps_s, casts_s)]


def span_kinds(plan: Plan) -> list[SpanKind]:
    """Each collective's kind on the timeline."""
    return [CollectiveKind(c.kind).span_kind for c in plan.collectives]
