"""Prediction ranges: each configuration's step time over the uncertainty of its inputs.

A prediction is only as sure as the measurements behind it. Two of them carry a measured
spread, the p5 and p95 over the median of many repeats:

- ``ModelProfile.compute_spread``: the compute-only step (``realrun profile`` on all ranks);
- ``Link.time_spread``: an all-reduce of the bandwidth-bound sizes (``python -m calibrate``).

Contention, when nothing measured it (a link preset, or α/busbw given by hand, and no
``Host.contention``), ranges from none to :data:`UNCALIBRATED_CONTENTION`; when the profile
measured it, over its repeats' p10–p90 (``Host.contention_spread``).

The simulator is run once per *scenario*, each a corner of that box: all fast (``low``),
all slow (``high``), and the two mixed corners, where compute and communication err in
opposite directions; then the measured contention at its two ends (``contention_low``,
``contention_high``). The mixed corners and the contention are what reorder bucket sizes: a
job that is really more communication-bound than measured wants larger buckets, and one
whose all-reduces slow the backward less wants smaller ones. A row's range is the min and
max over the point and the scenarios (``Result.step_range_s``)::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan, simulate
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002)
    ...                                 for i in range(2)), compute_spread=(0.9, 1.2))
    >>> link = Link("l", 0.0, 1.0, compute_slowdown=1.5, comm_slowdown=1.5,
    ...             time_spread=(1.0, 1.2))
    >>> overlap = make_strategy("overlap")
    >>> round(simulate(toy, link, plan(toy, overlap), 2).step_s * 1e3, 3)
    7.5
    >>> steps = scenario_steps(toy, link, 2, overlap)
    >>> {name: round(s * 1e3, 3) for name, s in steps.items()}
    {'low': 6.9, 'high': 9.0, 'comm_bound': 7.2, 'compute_bound': 8.7}

(The point: 2 ms forward, l1's backward ends at 4 ms, its 1 ms all-reduce runs 1.5 ms under
contention while l0's backward does 1 ms of its 2, which ends at 6.5 ms; l0's all-reduce 7.5.)

docs/CLI.md ("Prediction ranges") says what a range is and is not: it is the spread
of a step from the spread of its inputs, not a confidence interval of the median.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from simddp.engine import simulate
from simddp.host import Host
from simddp.link import Link
from simddp.plans import plan
from simddp.profile import ModelProfile
from simddp.strategy import Strategy

# (compute_slowdown, comm_slowdown) at the high end when no contention was measured: compute
# slows by 18.9 % on average and at most 40.0 % while NCCL collectives overlap it, on A100,
# H100, MI210 and MI250 (arXiv 2507.03114); the comm side is bounded the same way for lack of
# a published figure. CPU Gloo here measures more (x1.6 / x2.0): calibrate it.
UNCALIBRATED_CONTENTION = (1.4, 1.4)
# Scenario name -> (compute end, comm end): 0 the low end of a spread, 1 the high end.
SCENARIOS = {"low": (0, 0), "high": (1, 1), "comm_bound": (0, 1), "compute_bound": (1, 0)}


def contention_measured(link: Link, host: Host | None) -> bool:
    """Whether a measurement set the contention: calibrate's link, or the model's own."""
    return (host is not None and host.contention is not None) or \
        link.compute_slowdown != 1.0 or link.comm_slowdown != 1.0


def has_spread(profile: ModelProfile, link: Link, host: Host | None = None) -> bool:
    """Whether any input is uncertain, i.e. whether ranges differ from the point."""
    return (profile.compute_spread is not None or link.time_spread is not None
            or not contention_measured(link, host)
            or (host is not None and host.contention_spread is not None))


def scenario_inputs(profile: ModelProfile, link: Link, host: Host | None = None
                    ) -> dict[str, tuple[ModelProfile, Link, Host | None]]:
    """The profile, link and host of each scenario (host costs held at their measurement).

    The four corners of compute and all-reduce time; then, when the host carries the spread
    of its measured contention, that contention at its low and high end with the other
    inputs at the point (``contention_low``, ``contention_high``): whether an overlapped
    bucket pays off hinges on it."""
    compute = profile.compute_spread or (1.0, 1.0)
    comm = link.time_spread or (1.0, 1.0)
    out = {}
    for name, (c, m) in SCENARIOS.items():
        f = compute[c]
        p = profile.scaled(forward_s=profile.forward_s * f if profile.forward_s else None,
                           backward_s=profile.backward_s * f if profile.backward_s else None,
                           optimizer_s=profile.optimizer_s * f)
        lk = link.time_scaled(comm[m])
        if m == 1 and not contention_measured(link, host):
            lk = replace(lk, compute_slowdown=UNCALIBRATED_CONTENTION[0],
                         comm_slowdown=UNCALIBRATED_CONTENTION[1])
        out[name] = (p, lk, host)
    if host is not None and host.contention_spread is not None and host.contention:
        low, high = host.contention_spread
        point = host.contention
        out["contention_low"] = (profile, link, replace(
            host, contention=tuple(min(a, b) for a, b in zip(low, point))))
        out["contention_high"] = (profile, link, replace(
            host, contention=tuple(max(a, b) for a, b in zip(high, point))))
    return out


def scenario_steps(profile: ModelProfile, link: Link, world_size: int, strategy: Strategy,
                   host: Host | None = None) -> dict[str, float]:
    """Step seconds of ``strategy`` in each scenario (the point is the plain simulation)."""
    out = {}
    for name, (p, lk, h) in scenario_inputs(profile, link, host).items():
        out[name] = simulate(p, lk, plan(p, strategy), world_size, host=h,
                             record=False).step_s
    return out


def worst_regrets(rows: Sequence[tuple[float, dict[str, float] | None]]) -> list[float] | None:
    """Each row's worst-case regret over the input scenarios, from (point step, scenario
    steps) pairs: in each scenario its step over the best row's in the same scenario, minus
    1; the max over the point and the scenarios. The scenarios move every row together (one
    profile, one link), so rows are compared within a scenario, not across. None unless
    every row has the same scenarios.

    >>> a = (0.100, {"low": 0.09, "high": 0.13})
    >>> b = (0.101, {"low": 0.09, "high": 0.11})
    >>> [round(x, 3) for x in worst_regrets([a, b])]     # a: 18 % behind b in "high"
    [0.182, 0.01]
    """
    keys = set(rows[0][1] or ()) if rows else set()
    if not keys or any(set(scen or ()) != keys for _, scen in rows):
        return None
    table = [[point, *(scen[k] for k in sorted(keys))] for point, scen in rows]
    best = [min(col) for col in zip(*table)]
    return [max(v / b - 1.0 for v, b in zip(steps, best) if b > 0) for steps in table]


def robust_pick(rows: Sequence[tuple[float, dict[str, float] | None]]
                ) -> tuple[int, list[float] | None]:
    """(index of the row to recommend, every row's worst-case regret or None). ``rows`` come
    in preference order (the best point estimate first): without scenarios that first row;
    with them the lowest worst-case regret, ties within 0.1 % going to the earlier row."""
    regrets = worst_regrets(rows)
    if regrets is None:
        return 0, None
    return min(range(len(rows)), key=lambda i: (round(regrets[i], 3), i)), regrets


def range_sources(profile: ModelProfile, link: Link, host: Host | None = None) -> str:
    """One line: what the ranges are made of, for the sweep's output and JSON."""
    parts = []
    if profile.compute_spread is not None:
        lo, hi = profile.compute_spread
        parts.append(f"compute x{lo:.2f}–x{hi:.2f} (profile p5–p95)")
    if link.time_spread is not None:
        lo, hi = link.time_spread
        parts.append(f"all-reduce x{lo:.2f}–x{hi:.2f} (calibrate p5–p95)")
    if not contention_measured(link, host):
        c, m = UNCALIBRATED_CONTENTION
        parts.append(f"contention none to x{c:g} compute, x{m:g} comm (not calibrated)")
    elif host is not None and host.contention_spread is not None:
        (c0, m0), (c1, m1) = host.contention_spread
        parts.append(f"contention x{c0:.2f}–x{c1:.2f} compute, x{m0:.2f}–x{m1:.2f} comm "
                     "(profile p10–p90)")
    if not parts:
        return "none: the profile and link carry no measured spread"
    return "; ".join(parts)
