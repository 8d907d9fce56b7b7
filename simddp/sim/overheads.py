"""Host work on the timeline: what the DDP implementation and a comm hook cost the compute lane.

Picture one rank's backward under torch DDP with fp16 compression. Each gradient's hook copies
it into its bucket; when the bucket is full the comm hook casts it to fp16 and launches the
all-reduce; when that is done the result is cast back and copied out to the gradients. The
copies and casts are CPU or GPU time on the compute lane, not the network's::

    >>> from simddp import HostCosts, Layer, ModelProfile, make_strategy, plan
    >>> toy = ModelProfile("toy", (Layer("l0", (10**6, 10**6)),))
    >>> copy_in, copy_out = host_copies(toy, HostCosts(copy_gbps=1.0), plan(toy, make_strategy(
    ...     "bucketed+fp16", 25)))
    >>> round(copy_in[0][0] * 1e3, 6), [round(s * 1e3, 6) for s in copy_out]   # ms
    (4.0, [4.0])

(Copy-in 2 MB and the cast 2 MB at 1 GB/s before launch; cast back 2 MB and copy-out 2 MB.)
All host work is timed at the implementation's measured rates (:class:`simddp.inputs.host.HostCosts`,
the one that runs the plan: ``strategy.implementation``); free costs charge nothing.
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

    Copies at ``costs.copy_gbps`` (a lone tensor's in-place scaling at ``scale_gbps``), as
    realrun.DDP (flat_bucket.py) and torch's reducer do them: a bucket of several tensors
    copies each gradient in (scaled by 1/p) from its gradient hook when the plan overlaps,
    else at launch after the backward, and copies the average back out once its all-reduce is
    done; a lone tensor is scaled in place at launch and needs no copy-out, unless the
    implementation copies it through a bucket too (``costs.lone_in_place``, by default
    :data:`simddp.inputs.host.LONE_IN_PLACE`: torch's reducer does). Each gradient's hook costs
    ``costs.hook_s`` where its copy-in is (``costs.hook_after_backward_s``, when measured,
    where the plan launches after the backward), and each collective
    ``costs.launch_s`` at its launch. A comm hook's work (``Collective.hook``:
    ``pre_work_bytes`` at launch, ``post_work_bytes`` with the copy-out) runs at
    ``copy_gbps`` too. A reduce-scatter
    (FSDP2's, :func:`shard_host_s`) pays its call and copy-in where it is released, its
    copy-out with the others; an all-gather pays nothing here: it is issued and waited for
    at the start of a forward or backward, where the engine charges :func:`shard_host_s`.
    ``world_size``: the ranks a sharded plan's units are sharded over
    (:func:`simddp.planning.sharding.shard_ranks`).
    """
    if costs.free:
        return [], []
    rate = costs.copy_gbps * 1e9 if costs.copy_gbps else float("inf")
    scale_rate = (costs.scale_gbps or costs.copy_gbps or float("inf")) * 1e9
    hook_s, launch_s = costs.hook_s, costs.launch_s
    # A gradient launched after the backward (flat's bucket, naive's lone tensors): its hook
    # only notes it; it is copied in or scaled at the launch (realrun.DDP._on_grad_ready
    # returns early), so it costs less than a hook that fills a bucket
    # (docs/FINDINGS.md#host-costs).
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
    """(at issue, once done) host seconds of one all-gather or reduce-scatter, as torch FSDP2
    does them: an all-gather copies this rank's shard (n/p) into the gather buffer and, once
    gathered, the whole unit (n) out to the parameters; a reduce-scatter copies the gradients
    (n) into its input and the reduced shard (n/p) out to the sharded gradient. The call's
    own cost (``gather_s``/``scatter_s``) is charged at issue. HSDP's all-reduce of the
    shard across nodes runs in place on the reduce-scatter's output: nothing to copy.
    ``world_size``: the ranks the unit is sharded over::

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
    Mᵀ·P between the P and the Q all-reduce), at ``costs.copy_gbps``; [] if there is none.
    The work runs on the comm lane: nothing else can use the link before the Q all-reduce."""
    if not costs.copy_gbps or not any(c.hook for c in plan.collectives):
        return []
    return [(c.hook or NO_HOOK).mid_work_bytes / (costs.copy_gbps * 1e9)
            for c in plan.collectives]
