"""Host work on the timeline: what the DDP implementation and a comm hook cost the compute lane.

Copies into and out of buckets and a comm hook's casts are time on the compute lane, at the
running implementation's measured rates (:class:`simddp.inputs.host.HostCosts`; where each
lands: docs/FORMATS.md, host costs). fp16 compression, copy-in and cast 2 MB each at 1 GB/s
before launch, cast back and copy-out after::

    >>> from simddp import HostCosts, Layer, ModelProfile, make_strategy, plan
    >>> toy = ModelProfile("toy", (Layer("l0", (10**6, 10**6)),))
    >>> copy_in, copy_out = host_copies(toy, HostCosts(copy_gbps=1.0), plan(toy, make_strategy(
    ...     "bucketed+fp16", 25)))
    >>> round(copy_in[0][0] * 1e3, 6), [round(s * 1e3, 6) for s in copy_out]   # ms
    (4.0, [4.0])
"""
from __future__ import annotations

from simddp.planning.hooks import HookCost
from simddp.inputs.host import LONE_IN_PLACE, HostCosts
from simddp.cost.factors import ALL_GATHER, ALL_REDUCE
from simddp.planning.plans import Collective, Plan
from simddp.inputs.profile import ModelProfile
from simddp.planning.sharding import AFTER_BACKWARD
from simddp.cost.hierarchical import WORLD


NO_HOOK = HookCost(())


def host_copies(profile: ModelProfile, costs: HostCosts, plan: Plan, world_size: int = 1
                ) -> tuple[list[dict[int, float]], list[float]]:
    """Host seconds on the compute lane: ([micro-step]{layer: copy-in, hook and cast s},
    [collective] copy-out and cast-back s); ([], []) when ``costs`` are free.

    A bucket's gradients are copied in from their hooks when the plan overlaps, else at
    launch, and the average copied out once done; a lone tensor is scaled in place unless
    ``costs.lone_in_place`` says otherwise; a comm hook's work runs at ``copy_gbps`` too. A
    reduce-scatter pays its call and copy-in where it is released; an all-gather pays
    nothing here (the engine charges :func:`shard_host_s` where it is waited for).
    ``world_size``: the ranks a sharded plan's units are sharded over.
    """
    if costs.free:
        return [], []
    rate = costs.copy_gbps * 1e9 if costs.copy_gbps else float("inf")
    scale_rate = (costs.scale_gbps or costs.copy_gbps or float("inf")) * 1e9
    hook_s, launch_s = costs.hook_s, costs.launch_s
    # A gradient launched after the backward is only noted by its hook and copied at the
    # launch, which costs less than a hook that fills a bucket (docs/FINDINGS.md#host-costs).
    late_s = hook_s if plan.strategy.overlap or costs.hook_after_backward_s is None \
        else costs.hook_after_backward_s
    lone_in_place = (costs.lone_in_place if costs.lone_in_place is not None
                     else LONE_IN_PLACE[plan.strategy.implementation])
    copy_in: list[dict[int, float]] = [{} for _ in range(plan.micro_steps)]
    copy_out = []
    for c in plan.collectives:
        if c.kind != ALL_REDUCE or c.group != WORLD:
            issue_s, done_s = shard_host_s(costs, c, world_size)
            if c.ready_at == AFTER_BACKWARD:   # a reduce-scatter, after its unit's backward
                per_layer = copy_in[c.micro_step]
                per_layer[c.ready_layer] = per_layer.get(c.ready_layer, 0.0) + issue_s
            copy_out.append(done_s if c.gates is None else 0.0)
            continue
        hook = c.hook or NO_HOOK
        per_layer = copy_in[c.micro_step]
        through_bucket = len(c.tensor_ids) > 1 or not lone_in_place
        per_layer[c.ready_layer] = (per_layer.get(c.ready_layer, 0.0) + launch_s * len(c.calls)
                                    + hook.pre_work_bytes / rate)
        hooked_in = through_bucket and plan.strategy.overlap   # copied in from its own hook
        tensor_rate = rate if through_bucket else scale_rate
        for t in c.tensor_ids:
            layer = profile.tensor_layer[t] if hooked_in else c.ready_layer
            per_layer[layer] = (per_layer.get(layer, 0.0) + late_s
                                + profile.tensor_bytes[t] / tensor_rate)
        copy_out.append((c.nbytes if through_bucket else 0.0) / rate + hook.post_work_bytes / rate)
    return copy_in, copy_out


def shard_host_s(costs: HostCosts, c: Collective, world_size: int) -> tuple[float, float]:
    """(at issue, once done) host seconds of one FSDP2 all-gather (shard n/p in, unit n out)
    or reduce-scatter (gradients n in, shard n/p out), the call's own cost at issue; HSDP's
    all-reduce of the shard runs in place. ``world_size``: the ranks the unit is sharded over::

        >>> c = Collective("u all-gather", (0,), 4 * 10**6, 0, 0, kind=ALL_GATHER)
        >>> [round(s * 1e3, 6) for s in shard_host_s(HostCosts(copy_gbps=1.0, gather_s=1e-3), c, 4)]
        [2.0, 4.0]
    """
    if c.kind == ALL_REDUCE:
        return 0.0, 0.0
    rate = costs.copy_gbps * 1e9 if costs.copy_gbps else float("inf")
    shard, whole = c.nbytes / world_size / rate, c.nbytes / rate
    if c.kind == ALL_GATHER:
        return costs.gather_s + shard, whole
    return costs.scatter_s + whole, shard


def comm_gaps_s(costs: HostCosts, plan: Plan) -> list[float]:
    """Seconds each collective's calls wait for a hook's work between them (PowerSGD's Q =
    Mᵀ·P), at ``costs.copy_gbps``, on the comm lane; [] if there is none."""
    if not costs.copy_gbps or not any(c.hook for c in plan.collectives):
        return []
    return [(c.hook or NO_HOOK).mid_work_bytes / (costs.copy_gbps * 1e9)
            for c in plan.collectives]
