"""The same plan evaluated without events: a recurrence the engine must match to 1e-9.

Per micro-step, layer i's backward ends at ``t_fwd_end + Σ_{j ≥ i} backward_j``. Collectives
run back to back in launch order, each starting at ``max(ready, previous end)``. The step
ends when both the backward and the last collective are done, plus the optimizer::

    start_c = max(bwd_end[ready_layer_c], end_{c-1});   end_c = start_c + α + 2(p−1)/p·n_c/busbw
    step    = Σ_k max(bwd_end_k, end_last_k) + optimizer

α is ``link.blocking_alpha_s`` for plans that don't overlap, when the link has one.

Contention makes the lanes' rates depend on each other and has no such recurrence, and the
DDP implementation's host costs (:class:`simddp.host.Host`: copies, hooks) are not in it; this
evaluator refuses such inputs instead of being silently wrong.
"""
from __future__ import annotations

from simddp.host import Host
from simddp.link import Link
from simddp.plans import Plan
from simddp.profile import ModelProfile


def closed_form_step_s(profile: ModelProfile, link: Link, plan: Plan, world_size: int,
                       host: Host | None = None) -> float:
    if host is not None:
        link = host.contended(link)
    if (link.compute_slowdown != 1.0 or link.comm_slowdown != 1.0
            or (host is not None and not host.costs(plan.strategy.implementation).free)):
        raise ValueError("the closed form models neither contention nor host costs; "
                         "use the engine")
    by_micro: dict[int, list] = {}
    for c in plan.collectives:
        by_micro.setdefault(c.micro_step, []).append(c)
    t_s = 0.0
    for k in range(plan.micro_steps):
        t_s += profile.forward_s
        bwd_end_s = [0.0] * len(profile.layers)
        for i in range(len(profile.layers) - 1, -1, -1):
            t_s += profile.layers[i].backward_s
            bwd_end_s[i] = t_s
        comm_end_s = 0.0
        for c in by_micro.get(k, ()):
            start_s = max(bwd_end_s[c.ready_layer], comm_end_s)
            comm_end_s = start_s + link.allreduce_s(c.nbytes, world_size,
                                                    blocking=not plan.strategy.overlap)
        t_s = max(t_s, comm_end_s)
    return t_s + profile.optimizer_s
