"""How long each collective of a plan occupies the communication lane.

The engine asks one question of the network: for collective i of this plan, how many seconds
on the comm lane? The answer is the collective law per call (:mod:`simddp.cost.single`: a
measured curve where the link has one, else its α–β; :mod:`simddp.cost.hierarchical` on two
levels), issued overlapped when the plan overlaps its collectives and waited for (blocking)
when each is waited for before the next, plus a comm hook's work between its calls
(PowerSGD's Q = Mᵀ·P) and FSDP2's cast of the shard before a mixed-precision all-gather::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> link = Link("l", 50e-6, 1.0, blocking_alpha_s=80e-6)
    >>> [round(s * 1e3, 3) for s in comm_seconds(plan(toy, make_strategy("overlap")), link, 2)]
    [1.05, 1.05]
    >>> [round(s * 1e3, 3) for s in comm_seconds(plan(toy, make_strategy("naive")), link, 2)]
    [1.08, 1.08]

Gloo's two collectives in flight on a network link are measured; a lane that pipelines them
was tried and predicted the transformer's small-collective steps 20-35 points too fast
(docs/FINDINGS.md#small-collective-queues). What one kind of host adds on top
(a token bucket, a wake after idle, split contention) is :mod:`simddp.rig.gloo_cpu`, applied
at one hook in the engine.
"""
from __future__ import annotations

from simddp.inputs.host import FREE, HostCosts
from simddp.sim.overheads import comm_gaps_s
from simddp.kinds import CollectiveKind, SpanKind
from simddp.cost.factors import ALL_REDUCE
from simddp.cost.hierarchical import collective_s as topology_collective_s
from simddp.cost.single import all_reduce_law, collective_s, parts
from simddp.inputs.link import Link
from simddp.planning.plans import Plan
from simddp.inputs.profile import ModelProfile
from simddp.planning.sharding import cast_seconds
from simddp.inputs.topology import Topology


def issued_blocking(plan: Plan, costs: HostCosts = FREE) -> bool:
    """Whether each collective is waited for before the next is issued: plans that do not
    overlap (naive, flat), or an implementation whose collectives hold the training thread
    (``blocking_collectives``: FSDP2 on Gloo/CPU). Such collectives pay ``blocking_alpha_s``."""
    return not plan.strategy.overlap or costs.blocking_collectives


def comm_seconds(plan: Plan, link: Link, world_size: int, costs: HostCosts = FREE,
                 topology: Topology | None = None) -> list[float]:
    """Seconds each collective of ``plan`` occupies the comm lane, in launch order.

    ``topology``: nodes × GPUs with an intra-node link (``link`` is then the one between
    nodes); each collective crosses it by ``plan.strategy.algorithm`` (simddp/cost/hierarchical.py)."""
    blocking = issued_blocking(plan, costs)
    if not plan.units and plan.strategy.comm_hook is None and topology is None:
        # plain all-reduces on one link: the common case, kept lean (bench/bench_sim.py)
        law = all_reduce_law(link, world_size, blocking)
        return [law(c.nbytes) for c in plan.collectives]
    if topology is not None:
        algorithm = plan.strategy.algorithm

        def call_s(kind: str, n_bytes: float) -> float:
            return topology_collective_s(topology, link, kind, n_bytes, algorithm, blocking)
    else:
        def call_s(kind: str, n_bytes: float) -> float:
            return collective_s(link, kind, n_bytes, world_size, blocking)
    gaps_s = comm_gaps_s(costs, plan) or [0.0] * len(plan.collectives)
    # FSDP2's mixed precision casts each shard before its all-gather (simddp/planning/sharding.py)
    casts_s = cast_seconds(plan, world_size)
    return [sum(call_s(c.kind, n) for n in c.calls) + gap_s + cast_s
            for c, gap_s, cast_s in zip(plan.collectives, gaps_s, casts_s)]


def alpha_part_s(plan: Plan, link: Link, world_size: int, costs: HostCosts = FREE
                 ) -> list[float]:
    """Each collective's fixed part on one link, in launch order: its calls' α (the kind's,
    blocking or not, as :func:`comm_seconds` charges it; a curve's low-end α) and a comm
    hook's work between them (CPU work, like α)."""
    blocking = issued_blocking(plan, costs)
    gaps_s = comm_gaps_s(costs, plan) or [0.0] * len(plan.collectives)
    casts_s = cast_seconds(plan, world_size)   # device work ahead of the call, like a gap
    return [sum(parts(link, c.kind, n, world_size, blocking)[0] for n in c.calls) + gap_s
            + cast_s for c, gap_s, cast_s in zip(plan.collectives, gaps_s, casts_s)]


def stream_parts_s(profile: ModelProfile, link: Link, world_size: int) -> tuple[float, float]:
    """(α seconds, bytes seconds) of the stream realrun profile measures the model's
    contention with: one all-reduce per gradient tensor, queued at once, on ``link``."""
    alpha_s = bytes_s = 0.0
    for n in profile.tensor_bytes:
        a_s = parts(link, ALL_REDUCE, n, world_size)[0]
        alpha_s += a_s
        bytes_s += collective_s(link, ALL_REDUCE, n, world_size) - a_s
    return alpha_s, bytes_s


def span_kinds(plan: Plan) -> list[SpanKind]:
    """Each collective's kind on the timeline."""
    return [CollectiveKind(c.kind).span_kind for c in plan.collectives]
