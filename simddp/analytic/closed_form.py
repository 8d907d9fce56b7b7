"""The same plan evaluated without events: a recurrence the engine must match to 1e-9.

Per micro-step, layer i's backward ends at ``t_fwd_end + Σ_{j ≥ i} backward_j``. Collectives
run back to back in launch order, each starting at ``max(ready, previous end)``. The step
ends when both the backward and the last collective are done, plus the optimizer::

    start_c = max(bwd_end[ready_layer_c], end_{c-1});   end_c = start_c + α + 2(p−1)/p·n_c/busbw
    step    = Σ_k max(bwd_end_k, end_last_k) + optimizer

Each collective's seconds are the comm lane's (simddp/sim/costs.py). A sharded plan's gated
compute starts at ``max(compute time, end_c)``; one walk down the compute lane, advancing the
comm lane as far as each gate needs, is the whole evaluation. Contention and host costs have
no such recurrence: such inputs are refused rather than silently wrong::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> from simddp.inputs.resolved import Inputs
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> round(closed_form_step_s(plan(toy, make_strategy("overlap")),
    ...                          Inputs(toy, Link("l", 0.0, 1.0), 2)) * 1e3, 6)
    7.0
"""
from __future__ import annotations

from simddp.inputs.resolved import Inputs
from simddp.planning.plans import Plan
from simddp.planning.sharding import AFTER_BACKWARD, BACKWARD, FORWARD
from simddp.sim.costs import plan_costs, shard_ranks_of
from simddp.sim.schedule import optimizer_share_s


def closed_form_step_s(plan: Plan, inputs: Inputs) -> float:
    """``plan``'s step seconds on ``inputs`` by the recurrence (see the module text)."""
    pc = plan_costs(plan, inputs)
    if (pc.lane.contention.active or pc.lane.bucket is not None or pc.lane.wake_s
            or not pc.costs.free or pc.compute_factor != 1.0):
        raise ValueError("the closed form models neither contention, host costs, compute "
                         "after communication, a shaped link's bucket nor the wake after "
                         "compute; use the engine")
    profile = inputs.profile
    colls = plan.collectives
    dur_s = pc.comm_s
    ready_s: list[float | None] = [None] * len(colls)
    end_s = [0.0] * len(colls)
    lane = {"next": 0, "end": 0.0}   # the comm lane: next collective to run, when it is free

    def run_comm_through(j: int) -> None:
        while lane["next"] <= j:
            i = lane["next"]
            if ready_s[i] is None:
                raise ValueError(f"collective {colls[i].label!r} is needed before it is issued")
            lane["end"] = end_s[i] = max(ready_s[i], lane["end"]) + dur_s[i]
            lane["next"] += 1

    points: dict[tuple[int, str, int], tuple[list[int], list[int]]] = {}
    for i, c in enumerate(colls):
        points.setdefault((c.micro_step, c.ready_at, c.ready_layer), ([], []))[0].append(i)
        if c.gates:
            points.setdefault((c.micro_step, *c.gates), ([], []))[1].append(i)

    def reach(t_s: float, key: tuple[int, str, int]) -> float:
        """Release what is issued at ``key`` at ``t_s``; the time the compute there may start."""
        released, gated = points.get(key, ((), ()))
        for i in released:
            ready_s[i] = t_s
        for i in gated:
            run_comm_through(i)
            t_s = max(t_s, end_s[i])
        return t_s

    t_s = 0.0
    n_layers = len(profile.layers)
    for k in range(plan.micro_steps):
        for li in range(n_layers):
            t_s = reach(t_s, (k, FORWARD, li)) + profile.layers[li].forward_s
        for li in range(n_layers - 1, -1, -1):
            t_s = reach(t_s, (k, BACKWARD, li)) + profile.layers[li].backward_s
            reach(t_s, (k, AFTER_BACKWARD, li))
        mine = [i for i, c in enumerate(colls) if c.micro_step == k]
        if mine:
            run_comm_through(mine[-1])
            t_s = max(t_s, end_s[mine[-1]])
    return t_s + optimizer_share_s(profile, plan, shard_ranks_of(plan.strategy, inputs))
