"""How long each collective of a plan occupies the communication lane.

The engine asks one question of the network: for collective i of this plan, how many seconds
on the comm lane? The answer is the collective law per call (:mod:`simddp.cost.single`: a
measured curve where the link has one, else its α–β; :mod:`simddp.cost.hierarchical` on two
levels), issued overlapped when the plan overlaps its collectives and waited for (blocking)
when each is waited for before the next, plus a comm hook's work between its calls
(PowerSGD's Q = Mᵀ·P) and FSDP2's cast of the shard before a mixed-precision all-gather::

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

A lane that pipelines two collectives in flight was tried and predicted small-collective steps
too fast (docs/FINDINGS.md#small-collective-queues). What Gloo on a shared CPU host adds on top
(a blocking α, a token bucket, a wake after idle, split contention) is :mod:`simddp.rig`,
applied at one hook (simddp/sim/costs.py), which passes its ``hosts`` here.
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
    """Whether each collective is waited for before the next is issued: plans that do not
    overlap (naive, flat), or an implementation whose collectives hold the training thread
    (``blocking_collectives``: FSDP2 on Gloo/CPU). Such collectives pay their host's blocking
    α, where it has one (simddp/inputs/gloo_host.py)."""
    return not plan.strategy.overlap or costs.blocking_collectives


def comm_seconds(plan: Plan, link: Link, world_size: int, costs: HostCosts = FREE,
                 topology: Topology | None = None, hosts: LevelHosts = NO_HOSTS) -> list[float]:
    """Seconds each collective of ``plan`` occupies the comm lane, in launch order.

    ``topology``: nodes × GPUs with an intra-node link (``link`` is then the one between
    nodes); each collective crosses it by ``plan.strategy.algorithm``, on its process group
    (simddp/cost/hierarchical.py; without a topology every rank is one node, so HSDP's
    all-reduce across nodes has one rank and takes 0 s). ``hosts``: what each link's host
    adds to a waited-for call (only the CPU rig passes any)."""
    blocking = issued_blocking(plan, costs)
    if (not plan.units and plan.strategy.comm_hook is None and topology is None
            and plan.strategy.grad_dtype is None):
        # plain all-reduces on one link: the common case, kept lean (bench/bench_sim.py)
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
