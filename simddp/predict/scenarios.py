"""Prediction ranges: each configuration's step time over the uncertainty of its inputs.

The spreads are the profile's ``compute_spread``, the link's ``time_spread`` and the
contention's; each *scenario* is a corner of that box (all fast, all slow, and the two mixed
corners that reorder bucket sizes), plus a measured contention at its two ends. A range is the
spread of a step from the spread of its inputs, not a confidence interval of the median
(docs/CLI.md, "Prediction ranges")::

    >>> from simddp import Layer, Link, ModelProfile
    >>> from simddp.inputs.contention import Contention
    >>> from simddp.inputs.resolved import Inputs
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002)
    ...                                 for i in range(2)), compute_spread=(0.9, 1.2))
    >>> point = Inputs(toy, Link("l", 0.0, 1.0, time_spread=(1.0, 1.2)), 2,
    ...                Contention(1.5, 1.5, source="link"))
    >>> {name: (s.compute_factor, s.comm_factor) for name, s in scenarios(point).items()}
    {'low': (0.9, 1.0), 'high': (1.2, 1.2), 'comm_bound': (0.9, 1.2), 'compute_bound': (1.2, 1.0)}
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from simddp.inputs.contention import PUBLISHED_GPU_SHORT, Contention
from simddp.inputs.resolved import Inputs, scaled_profile

# (compute, comm) slowdown at the high end when nothing measured contention off a GPU: the
# published GPU compute's maximum (docs/FINDINGS.md#gpu-contention-under-overlap).
UNCALIBRATED_CONTENTION = (1.4, 1.4)
# Scenario name -> (compute end, comm end): 0 the low end of a spread, 1 the high end.
SCENARIOS = {"low": (0, 0), "high": (1, 1), "comm_bound": (0, 1), "compute_bound": (1, 0)}
# Contention the user gave (--contention) is held where it was put, as a measurement is.
HELD_SOURCES = ("link", "model", "given")


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


def point_scenario(point: Inputs) -> Scenario:
    """The point itself, as a scenario: nothing scaled, the resolved contention."""
    return Scenario(1.0, 1.0, point.contention)


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


def scenarios(point: Inputs) -> dict[str, Scenario]:
    """Each scenario by name: the four corners of compute and all-reduce time, an assumed
    contention at its low end where all-reduces are fast and its high end where slow. A
    measured or given contention stays at the point; a measured spread adds
    ``contention_low`` and ``contention_high`` with the other inputs at the point."""
    compute = point.profile.compute_spread or (1.0, 1.0)
    comm = point.link.time_spread or (1.0, 1.0)
    contention = point.contention
    if contention.source in HELD_SOURCES:
        out = {name: Scenario(compute[c], comm[m], contention)
               for name, (c, m) in SCENARIOS.items()}
        ends = contention.ends()
        if ends is not None:
            out["contention_low"], out["contention_high"] = (Scenario(1.0, 1.0, e)
                                                             for e in ends)
        return out
    ends = assumed_ends(contention)
    return {name: Scenario(compute[c], comm[m], ends[m]) for name, (c, m) in SCENARIOS.items()}


@dataclass(frozen=True)
class ScenarioSet:
    """A prediction's inputs, each built once: ``names`` maps a scenario to its key,
    ``inputs`` a key (the point's included) to its inputs, shared by equal keys."""

    point: Inputs
    names: dict[str, tuple] = field(default_factory=dict)
    inputs: dict[tuple, Inputs] = field(default_factory=dict)

    @property
    def point_key(self) -> tuple:
        return point_scenario(self.point).key


def scenario_set(point: Inputs, ranges: bool = False) -> ScenarioSet:
    """The point's inputs and, with ``ranges``, each scenario's; a scaled profile is shared
    by every scenario with its compute factor."""
    named = scenarios(point) if ranges else {}
    profiles = {1.0: point.profile}
    built = {point_scenario(point).key: point}
    for scn in named.values():
        if scn.key in built:
            continue
        f = scn.compute_factor
        if f not in profiles:
            profiles[f] = scaled_profile(point.profile, f)
        built[scn.key] = replace(point.scaled(1.0, scn.comm_factor, scn.contention),
                                 profile=profiles[f])
    return ScenarioSet(point, {name: scn.key for name, scn in named.items()}, built)


def worst_regrets(rows: Sequence[tuple[float, dict[str, float] | None]]) -> list[float] | None:
    """Each row's worst-case regret from (point step, scenario steps) pairs: the max over
    the point and the corners of its step over the best row's in the same corner, minus 1;
    None unless every row has the same scenarios.

    The contention's ends are single repeats' noisy factors and steered the pick to buckets
    that never overlap, so they do not enter (docs/FINDINGS.md#contention)::

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
    """(index of the row to recommend, every row's worst-case regret or None): the lowest
    worst-case regret, ties within 0.1 % going to the earlier row (``rows`` come best point
    estimate first); without scenarios the first row."""
    regrets = worst_regrets(rows)
    if regrets is None:
        return 0, None
    return min(range(len(rows)), key=lambda i: (round(regrets[i], 3), i)), regrets


def range_sources(point: Inputs) -> str:
    """One line: what the ranges are made of, for the sweep's output and JSON::

        >>> from simddp import Layer, Link, ModelProfile
        >>> from simddp.inputs.contention import published_gpu
        >>> toy = ModelProfile("toy", (Layer("l0", (8,), 1e-3, 2e-3),))
        >>> range_sources(Inputs(toy, Link("l", 0.0, 1.0), 2))
        'contention none to x1.4 compute, x1.4 comm (not calibrated)'
        >>> text = range_sources(Inputs(toy, Link("l", 0.0, 1.0), 2, published_gpu()))
        >>> text[:text.index(" (")]
        'contention x1.19 compute, x2.22 comm, from none to x1.40 compute, x2.22 comm'
        >>> text[text.index(" (") + 2:-1]
        'not measured: published GPU figures, arXiv 2507.03114; comm derived from 2412.14335'
    """
    parts = []
    if point.profile.compute_spread is not None:
        lo, hi = point.profile.compute_spread
        parts.append(f"compute x{lo:.2f}–x{hi:.2f} (profile p5–p95)")
    if point.link.time_spread is not None:
        lo, hi = point.link.time_spread
        parts.append(f"all-reduce x{lo:.2f}–x{hi:.2f} (calibrate p5–p95)")
    contention = point.contention
    if contention.source == "published":
        (c1, m1) = assumed_ends(contention)[1].factors
        parts.append(f"contention x{contention.compute:.2f} compute, x{contention.comm:.2f} "
                     f"comm, from none to x{c1:.2f} compute, x{m1:.2f} comm (not measured: "
                     f"{PUBLISHED_GPU_SHORT})")
    elif contention.source == "given":
        parts.append(f"contention x{contention.compute:.2f} compute, x{contention.comm:.2f} "
                     "comm (given, held)")
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
