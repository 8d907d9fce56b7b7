"""Prediction ranges: each configuration's step time over the uncertainty of its inputs.

A prediction is only as sure as the measurements behind it. Two of them carry a measured
spread, the p5 and p95 over the median of many repeats:

- ``ModelProfile.compute_spread``: the compute-only step (``realrun profile`` on all ranks);
- ``Link.time_spread``: an all-reduce of the bandwidth-bound sizes (``python -m calibrate``).

Contention, when nothing measured it (a link preset, or α/busbw given by hand, and no
``Host.contention``), ranges from none to :data:`UNCALIBRATED_CONTENTION` around a point of
none; where the compute runs on a GPU (the sweep's ``device``) the point is the published
GPU contention and the range none to its high end
(:func:`simddp.inputs.contention.default_contention`). When the profile measured it, it ranges
over its repeats' p10–p90 (``Host.contention_spread``).

Each *scenario* is a corner of that box: all fast (``low``), all slow (``high``), and the
two mixed corners, where compute and communication err in opposite directions; then the
measured contention at its two ends (``contention_low``, ``contention_high``). The mixed
corners are what reorder bucket sizes: a job that is really more communication-bound than
measured wants larger buckets. A row's range is the min and max over the point and the
scenarios (``Result.step_range_s``); the recommendation's worst-case regret is over the
corners only (:func:`worst_regrets` says why)::

    >>> from simddp import Layer, Link, ModelProfile
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002)
    ...                                 for i in range(2)), compute_spread=(0.9, 1.2))
    >>> link = Link("l", 0.0, 1.0, compute_slowdown=1.5, comm_slowdown=1.5,
    ...             time_spread=(1.0, 1.2))
    >>> {name: (s.compute_factor, s.comm_factor) for name, s in scenarios(toy, link).items()}
    {'low': (0.9, 1.0), 'high': (1.2, 1.2), 'comm_bound': (0.9, 1.2), 'compute_bound': (1.2, 1.0)}

This module says what each scenario is; :mod:`simddp.predict.predictor` simulates them, each
distinct input once per sweep, and works out rows that need no engine run.

docs/CLI.md ("Prediction ranges") says what a range is and is not: it is the spread
of a step from the spread of its inputs, not a confidence interval of the median.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simddp.inputs.contention import Contention, default_contention, with_contention
from simddp.inputs.contention import PUBLISHED_GPU_SHORT
from simddp.inputs.host import Host
from simddp.inputs.link import Link
from simddp.inputs.profile import ModelProfile

# (compute_slowdown, comm_slowdown) at the high end when no contention was measured and the
# compute is not known to run on a GPU (on one: simddp.inputs.contention.PUBLISHED_GPU_HIGH): compute
# slows by at most 40.0 % while NCCL collectives overlap it (arXiv 2507.03114), the comm side
# bounded the same way. CPU Gloo here measures more (x1.6 / x2.0): calibrate it.
UNCALIBRATED_CONTENTION = (1.4, 1.4)
# Scenario name -> (compute end, comm end): 0 the low end of a spread, 1 the high end.
SCENARIOS = {"low": (0, 0), "high": (1, 1), "comm_bound": (0, 1), "compute_bound": (1, 0)}


@dataclass(frozen=True)
class Scenario:
    """What one scenario changes from the point: every compute second x ``compute_factor``,
    every all-reduce x ``comm_factor``, and the contention both run under."""

    compute_factor: float
    comm_factor: float
    contention: Contention

    @property
    def key(self) -> tuple:
        """Equal keys, equal inputs: one engine run serves every scenario with this key."""
        return self.compute_factor, self.comm_factor, self.contention.factors


def point_scenario(link: Link, host: Host | None = None, device: str | None = None
                   ) -> Scenario:
    """The point itself, as a scenario: nothing scaled, the contention measured, else the
    default for ``device`` (:func:`simddp.inputs.contention.default_contention`)."""
    return Scenario(1.0, 1.0, default_contention(link, host, device))


def contention_measured(link: Link, host: Host | None) -> bool:
    """Whether a measurement set the contention: calibrate's link, or the model's own."""
    return default_contention(link, host).measured


def assumed_ends(point: Contention) -> tuple[Contention, Contention]:
    """The fast and slow end of a contention nothing measured: the published GPU spread's
    (none … x1.40 compute, x2.22 comm), else none … :data:`UNCALIBRATED_CONTENTION`::

        >>> from simddp.inputs.contention import published_gpu
        >>> [e.factors for e in assumed_ends(Contention())]
        [(1.0, 1.0), (1.4, 1.4)]
        >>> [e.factors for e in assumed_ends(published_gpu())]
        [(1.0, 1.0), (1.4, 2.22)]
    """
    return point.ends() or (point, Contention(*UNCALIBRATED_CONTENTION))


def scenarios(profile: ModelProfile, link: Link, host: Host | None = None,
              device: str | None = None) -> dict[str, Scenario]:
    """Each scenario by name: the four corners of compute and all-reduce time. When no
    contention was measured, the corners with all-reduces at their fast end take its
    assumed low end and those at their slow end its high end (:func:`assumed_ends`; on a GPU
    ``device`` the point between them is the published one). When the model's own
    contention was measured with its spread, the corners take it at the point, and two more
    scenarios put it at its low and high end with the other inputs at the point
    (``contention_low``, ``contention_high``): whether an overlapped bucket pays off hinges
    on it."""
    compute = profile.compute_spread or (1.0, 1.0)
    comm = link.time_spread or (1.0, 1.0)
    point = default_contention(link, host, device)
    if point.measured:
        out = {name: Scenario(compute[c], comm[m], point) for name, (c, m) in SCENARIOS.items()}
        ends = point.ends()
        if ends is not None:
            out["contention_low"], out["contention_high"] = (Scenario(1.0, 1.0, e)
                                                             for e in ends)
        return out
    ends = assumed_ends(point)
    return {name: Scenario(compute[c], comm[m], ends[m]) for name, (c, m) in SCENARIOS.items()}


def scaled_profile(profile: ModelProfile, factor: float) -> ModelProfile:
    """``profile`` with every compute second x ``factor`` (itself at 1.0)."""
    if factor == 1.0:
        return profile
    return profile.scaled(forward_s=profile.forward_s * factor if profile.forward_s else None,
                          backward_s=profile.backward_s * factor if profile.backward_s
                          else None, optimizer_s=profile.optimizer_s * factor)


def build_inputs(profile: ModelProfile, link: Link, host: Host | None,
                 wanted: Iterable[Scenario]) -> dict[tuple, tuple[ModelProfile, Link, Host | None]]:
    """Scenario key -> the profile, link and host it simulates with (host costs held at
    their measurement), each built once: a scaled profile is shared by every scenario with
    its compute factor (it rebuilds every layer: 321,694 of them when built per row, issue
    21)."""
    profiles = {1.0: profile}
    out = {}
    for scn in wanted:
        if scn.key in out:
            continue
        f = scn.compute_factor
        if f not in profiles:
            profiles[f] = scaled_profile(profile, f)
        out[scn.key] = (profiles[f], *with_contention(link.time_scaled(scn.comm_factor), host,
                                                      scn.contention))
    return out


def scenario_inputs(profile: ModelProfile, link: Link, host: Host | None = None,
                    device: str | None = None
                    ) -> dict[str, tuple[ModelProfile, Link, Host | None]]:
    """The profile, link and host of each scenario (:func:`scenarios`) by name."""
    named = scenarios(profile, link, host, device)
    built = build_inputs(profile, link, host, named.values())
    return {name: built[scn.key] for name, scn in named.items()}


def worst_regrets(rows: Sequence[tuple[float, dict[str, float] | None]]) -> list[float] | None:
    """Each row's worst-case regret over the input corners, from (point step, scenario
    steps) pairs: in each corner (:data:`SCENARIOS`) its step over the best row's in the same
    corner, minus 1; the max over the point and the corners. The scenarios move every row
    together (one profile, one link), so rows are compared within a scenario, not across.
    None unless every row has the same scenarios.

    The contention's two ends widen the ranges but do not enter the regret. They are the
    p10 and p90 of single repeats' factors, and a comm factor of one repeat is a difference
    of four times (×1.0 to ×6.0 on the transformer in one profile), while the point takes
    the median over every repeat. Their worst case steered the pick to buckets that never
    overlap: over 115 kept grid cells (bench/workflow_grid.py, 2026-11-25..27, each scored
    against its own bench) the pick regretted 3.23 % on average with them, 2.43 % over the
    corners alone and 2.83 % at the point estimate (both halves of the cells agree:
    docs/FINDINGS.md#contention)::

        >>> a = (0.100, {"low": 0.09, "high": 0.13})
        >>> b = (0.101, {"low": 0.09, "high": 0.11})
        >>> [round(x, 3) for x in worst_regrets([a, b])]     # a: 18 % behind b in "high"
        [0.182, 0.01]
        >>> c = (0.100, {"low": 0.09, "contention_high": 0.20})
        >>> d = (0.101, {"low": 0.09, "contention_high": 0.11})
        >>> [round(x, 3) for x in worst_regrets([c, d])]     # the end widens c's range only
        [0.0, 0.01]
    """
    keys = {k for k in rows[0][1] or () if k in SCENARIOS} if rows else set()
    if not keys or any({k for k in scen or () if k in SCENARIOS} != keys for _, scen in rows):
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


def range_sources(profile: ModelProfile, link: Link, host: Host | None = None,
                  device: str | None = None) -> str:
    """One line: what the ranges are made of, for the sweep's output and JSON; on a GPU
    with nothing measured, the contention the point takes, its range and where it comes
    from::

        >>> from simddp import Layer
        >>> toy = ModelProfile("toy", (Layer("l0", (8,), 1e-3, 2e-3),))
        >>> range_sources(toy, Link("l", 0.0, 1.0), device="cpu")
        'contention none to x1.4 compute, x1.4 comm (not calibrated)'
        >>> text = range_sources(toy, Link("l", 0.0, 1.0), device="h100")
        >>> text[:text.index(" (")]
        'contention x1.19 compute, x2.22 comm, from none to x1.40 compute, x2.22 comm'
        >>> text[text.index(" (") + 2:-1]
        'not measured: published GPU figures, arXiv 2507.03114; comm derived from 2412.14335'
    """
    parts = []
    if profile.compute_spread is not None:
        lo, hi = profile.compute_spread
        parts.append(f"compute x{lo:.2f}–x{hi:.2f} (profile p5–p95)")
    if link.time_spread is not None:
        lo, hi = link.time_spread
        parts.append(f"all-reduce x{lo:.2f}–x{hi:.2f} (calibrate p5–p95)")
    contention = default_contention(link, host, device)
    if contention.source == "published":
        (c1, m1) = assumed_ends(contention)[1].factors
        parts.append(f"contention x{contention.compute:.2f} compute, x{contention.comm:.2f} "
                     f"comm, from none to x{c1:.2f} compute, x{m1:.2f} comm (not measured: "
                     f"{PUBLISHED_GPU_SHORT})")
    elif not contention.measured:
        c, m = UNCALIBRATED_CONTENTION
        parts.append(f"contention none to x{c:g} compute, x{m:g} comm (not calibrated)")
    elif contention.spread is not None:
        (c0, m0), (c1, m1) = contention.spread
        parts.append(f"contention x{c0:.2f}–x{c1:.2f} compute, x{m0:.2f}–x{m1:.2f} comm "
                     "(profile p10–p90)")
    if not parts:
        return "none: the profile and link carry no measured spread"
    return "; ".join(parts)
