"""Closing the import on what was measured: the traced step, and the job's own step time.

    inputs, comm_scale = close_link(traced_inputs, plan, measured_s)
    inputs, compute_scale = anchor_compute(inputs, plan, logged_s)

**The traced step.** The link is fitted to when each traced all-reduce ended
(simddp.ingest.trace.fit), step by step, with the ranks' own ready times; the engine then
runs a typical step (median compute), where queueing on the one communication lane need
not add up the same way. :func:`close_link` scales α and the bandwidth term by one factor
so that the traced configuration re-simulates to the traced median step, and the import
reports that factor and the error before it: a factor far from 1 says the link law fits
this trace badly.

**The job's step time** (``--step-ms``, from its log, without the profiler). On CPU the
profiler slows every op, by more than its per-event cost when the host is loaded
(docs/TRACES.md). :func:`anchor_compute` scales forward, backward and optimizer by one factor
so that the traced configuration simulates to that time; the link stays, as the profiler
does not slow the network.
"""
from __future__ import annotations

from typing import Callable

from dataclasses import replace

from simddp.errors import InputError
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.resolved import Inputs
from simddp.planning.plans import Plan
from simddp.sim.engine import simulate

_LIMIT = 1e3   # a scale beyond 1000x (or below 1/1000) says the inputs disagree, not noise


def close_link(inputs: Inputs, plan: Plan, target_s: float) -> tuple[Inputs, float]:
    """(``inputs`` with the link's α and bandwidth term scaled by one factor, the factor) so
    that ``plan`` simulates to ``target_s``; factor 1 where no factor can (compute alone
    exceeds the target, or comm is negligible)."""
    def at(k: float) -> Inputs:
        return replace(inputs, link=inputs.link.time_scaled(k))

    def step(k: float) -> float:
        return simulate(plan, at(k), record=False).step_s

    k = _solve(step, target_s, lower=1 / _LIMIT)
    return (inputs, 1.0) if k is None else (at(k), k)


def anchor_compute(inputs: Inputs, plan: Plan, step_s: float, host_too: bool = False
                   ) -> tuple[Inputs, float]:
    """(``inputs`` with forward, backward and optimizer scaled by one factor, the factor) so
    that ``plan`` simulates to ``step_s``; InputError if no factor can. ``host_too``: the
    host costs of the plan's implementation scale with them (FSDP2's host work is Python on
    the same thread, slowed by the profiler alike)."""
    profile = inputs.profile
    totals = {"forward_s": sum(layer.forward_s for layer in profile.layers),
              "backward_s": sum(layer.backward_s for layer in profile.layers)}

    def scaled(k: float) -> Inputs:
        # a zero total stays zero (ModelProfile.scaled refuses to rescale it)
        out = replace(inputs, profile=profile.scaled(
            **{name: total * k for name, total in totals.items() if total},
            optimizer_s=profile.optimizer_s * k))
        if host_too and inputs.host is not None and k > 0:
            out = replace(out, host=_host_scaled(inputs.host, k))
        return out

    def step(k: float) -> float:
        return simulate(plan, scaled(k), record=False).step_s

    k = _solve(step, step_s, lower=0.0)
    if k is None:
        low = step(0.0)
        raise InputError(f"--step-ms {step_s * 1e3:g}: " + (
            f"the traced all-reduces alone take {low * 1e3:.2f} ms per step in the import"
            if low > step_s else "is over 1000x the traced step") +
            "; is it the step time of the traced configuration?")
    return scaled(k), k


def _host_scaled(host: Host, k: float) -> Host:
    """``host`` with every implementation's host seconds ×k and copy rates ÷k."""
    def one(c: HostCosts) -> HostCosts:
        return replace(c, copy_gbps=None if c.copy_gbps is None else c.copy_gbps / k,
                       scale_gbps=None if c.scale_gbps is None else c.scale_gbps / k,
                       hook_s=c.hook_s * k, launch_s=c.launch_s * k, gather_s=c.gather_s * k,
                       scatter_s=c.scatter_s * k,
                       hook_after_backward_s=None if c.hook_after_backward_s is None
                       else c.hook_after_backward_s * k)
    return replace(host, implementations={n: one(c) for n, c in host.implementations.items()})


def _solve(step: Callable[[float], float], target_s: float, lower: float) -> float | None:
    """The factor k in [lower, 1000] with step(k) = target_s (step grows with k), by
    bisection to 2^-50 relative; None if the target is out of reach."""
    lo, hi = lower, 1.0
    if step(lo) > target_s:
        return None
    while step(hi) < target_s:
        lo, hi = hi, hi * 2
        if hi > _LIMIT:
            return None
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if step(mid) < target_s else (lo, mid)
    return (lo + hi) / 2
