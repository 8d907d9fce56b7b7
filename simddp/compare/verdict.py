"""Whether a measurement proves or refutes the recommended bucket size: ``realrun validate``'s
verdict, from Results alone (no torch).

Picture the recommended size and the one that measured fastest, each run for 30 steps. The
verdict is one of four words, decided by a 95 % bootstrap interval of how much slower one
is than the other (:func:`simddp.compare.metrics.ratio_interval`), never by the medians
alone:

- ``PROVEN``: the recommended size measured fastest, and the next size is slower beyond the
  noise (its interval lies above 0);
- ``PROVEN within noise``: the recommended size measured fastest but the next one cannot be
  told apart from it (56.12 vs 56.64 ms once printed "PROVEN ... the fastest", issue 23),
  or it is slower than the best by less than :data:`MARGIN_PCT` for sure;
- ``REFUTED``: it costs more than the margin for sure;
- ``WITHIN NOISE``: the interval straddles the margin.

Sizes that make the same buckets are one configuration (simddp/layouts.py): their
steps are pooled, and neither is the other's "next size".
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from simddp.layouts import group_by_layout, sizes_text
from simddp.compare.metrics import ratio_interval
from simddp.profile import ModelProfile
from simddp.report.recommendation import recommendation_text
from simddp.result import Result
from simddp.sweeps import naive_of, recommend

# How much slower than the measured best a recommendation may measure and still count as
# right: the validation target for regret (docs/VALIDATION.md).
MARGIN_PCT = 3.0


def verdict(predicted: Sequence[Result], measured: Sequence[Result],
            profile: ModelProfile | None = None) -> dict:
    """simddp's recommendation from ``predicted`` and what ``measured`` says of it: a dict
    with ``recommendation`` and ``text`` (lines to print), ``proven`` (True, False or None)
    and the numbers behind them (``regret_pct``, ``regret_ci_pct``, ``measured_best_mb``,
    ``runner_up_pct`` and ``runner_up_ci_pct`` when the recommendation measured fastest)."""
    rec = recommend(predicted, profile)
    naive = naive_of(predicted)
    out = {"recommendation": recommendation_text(rec, naive), "proven": None, "text": ""}
    if rec is None:
        return out
    rows = [r for r in measured if r.strategy == rec.strategy and r.bucket_mb is not None]
    configs = [_Config(g) for g in group_by_layout(rows, profile)]
    at_rec = next((c for c in configs if c.has(rec.bucket_mb)), None)
    if at_rec is None:
        out["text"] = (f"Not measured: {rec.strategy} at {rec.bucket_mb:g} MB did not run, "
                       "so the recommendation is neither proven nor refuted.")
        return out
    best = min(configs, key=lambda c: c.step_s)
    same = ("" if len(at_rec.mbs) == 1 else
            f" ({sizes_text(at_rec.mbs)} make the same buckets: one configuration, "
            f"{at_rec.samples} steps pooled)")
    out.update(measured_best_mb=rec.bucket_mb if best is at_rec else best.name_mb,
               margin_pct=MARGIN_PCT, same_layout_mb=list(at_rec.mbs))
    what = f"{rec.strategy} at {rec.bucket_mb:g} MB{same}"
    if best is at_rec:
        return _fastest(out, what, at_rec, configs)
    regret, low, high = _slower(at_rec, best)
    out.update(regret_pct=regret, regret_ci_pct=[low, high])
    said = (f"the measured best is {sizes_text(best.mbs)} ({best.step_s * 1e3:.2f} ms); "
            f"{what} is {regret:.1f} % slower (95 % interval {low:+.1f} … {high:+.1f} %, "
            f"{at_rec.samples} steps")
    if high <= MARGIN_PCT:
        out["proven"] = True
        out["text"] = (f"PROVEN within noise: {said}), inside the {MARGIN_PCT:g} % margin a "
                       "recommendation may cost.")
    elif low > MARGIN_PCT:
        out["proven"] = False
        out["text"] = (f"REFUTED: {said}): following the recommendation costs more than "
                       f"the {MARGIN_PCT:g} % margin.")
    else:
        out["text"] = (f"WITHIN NOISE: {said}), which straddles the {MARGIN_PCT:g} % "
                       "margin: at this many steps the bucket sizes cannot be told apart; "
                       "more --steps would decide.")
    return out


def _fastest(out: dict, what: str, at_rec: "_Config", configs: list["_Config"]) -> dict:
    """The verdict when the recommendation measured fastest: PROVEN, or PROVEN within noise
    when the next layout's interval reaches it."""
    out.update(proven=True, regret_pct=0.0, regret_ci_pct=None)
    runner = min((c for c in configs if c is not at_rec), key=lambda c: c.step_s, default=None)
    if runner is None:
        out["text"] = (f"PROVEN: measured, {what} is the fastest bucket size "
                       f"({at_rec.step_s * 1e3:.2f} ms median).")
        return out
    gap, low, high = _slower(runner, at_rec)
    out.update(runner_up_mb=runner.name_mb, runner_up_pct=gap, runner_up_ci_pct=[low, high])
    next_one = (f"{sizes_text(runner.mbs)} ({runner.step_s * 1e3:.2f} ms) is {gap:.1f} % "
                f"slower (95 % interval {low:+.1f} … {high:+.1f} %)")
    if low > 0:
        out["text"] = (f"PROVEN: measured, {what} is the fastest bucket size "
                       f"({at_rec.step_s * 1e3:.2f} ms median); the next, {next_one}.")
    else:
        out["text"] = (f"PROVEN within noise: measured, {what} has the lowest median "
                       f"({at_rec.step_s * 1e3:.2f} ms), but {next_one}: below the noise "
                       "of this many steps the two cannot be told apart; either is fine.")
    return out


class _Config:
    """Measured Results of one layout as one configuration: sizes, pooled steps, median."""

    def __init__(self, results: list[Result]) -> None:
        self.mbs = tuple(sorted(r.bucket_mb for r in results))
        fastest = min(results, key=lambda r: r.step_s)
        self.name_mb = fastest.bucket_mb
        self.steps_s = (tuple(t for r in results for t in r.steps_s)
                        if all(r.steps_s for r in results) else ())
        self.step_s = (float(np.median(self.steps_s)) if self.steps_s and len(results) > 1
                       else fastest.step_s if len(results) == 1
                       else float(np.median([r.step_s for r in results])))
        self.samples = sum(r.samples for r in results)
        self.p5_s = min((r.step_p5_s for r in results if r.step_p5_s is not None), default=None)
        self.p95_s = max((r.step_p95_s for r in results if r.step_p95_s is not None),
                         default=None)

    def has(self, bucket_mb: float) -> bool:
        return any(math.isclose(mb, bucket_mb, rel_tol=1e-3) for mb in self.mbs)


def _slower(a: _Config, b: _Config) -> tuple[float, float, float]:
    """(point, low, high) % that ``a`` is slower than ``b``: a bootstrap over their steps;
    without steps, the medians, and the p5–p95 spreads as the interval when both have them."""
    if a.steps_s and b.steps_s:
        return ratio_interval(a.steps_s, b.steps_s)
    point = 100 * (a.step_s / b.step_s - 1)
    if None in (a.p5_s, a.p95_s, b.p5_s, b.p95_s):
        return point, point, point
    return point, 100 * (a.p5_s / b.p95_s - 1), 100 * (a.p95_s / b.p5_s - 1)
