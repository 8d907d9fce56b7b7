"""Whether a measurement proves or refutes the recommended bucket size: ``realrun validate``'s
verdict, from Results alone (no torch).

A claim (PROVEN, PROVEN within 3 %, REFUTED) needs a **margin** larger than the measurement's
**spread**: the rows' split halves (simddp/compare/noise.py) or, where wider, a 95 %
paired-bootstrap interval, which alone is too narrow (docs/FINDINGS.md#measurement-noise);
else CANNOT TELL. The words and their margins: docs/VALIDATION.md. Sizes that make the same
buckets are one configuration, their steps pooled.

    >>> judge(-8.0, -9.5, -6.5, halves_pct=2.0)["claim"]        # 8 % ahead, 2 % spread
    'fastest'
    >>> j = judge(0.3, -5.7, 3.9, halves_pct=12.5)                # 0.3 % behind, 12.5 % spread
    >>> j["claim"], round(j["margin_pct"], 1), j["spread_pct"]
    (None, 2.7, 12.5)
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from simddp.compare.metrics import paired_interval
from simddp.compare.noise import halves_apart_pct
from simddp.predict.layouts import group_by_layout, sizes_text
from simddp.inputs.profile import ModelProfile
from simddp.report.recommendation import recommendation_text
from simddp.result import Result
from simddp.predict.sweep import naive_of
from simddp.predict.recommend import recommend

# How much slower than the measured best a recommendation may measure and still count as
# right: the validation target for regret (docs/VALIDATION.md).
MARGIN_PCT = 3.0

# The claims, strongest first, and the word each prints.
WORDS = {"fastest": "PROVEN", "within": f"PROVEN within {MARGIN_PCT:g} %",
         "refuted": "REFUTED", None: "CANNOT TELL"}
SPLIT_HALVES, INTERVAL, P5_P95 = "split halves", "95 % interval", "p5-p95"


def verdict(predicted: Sequence[Result], measured: Sequence[Result],
            profile: ModelProfile | None = None, turn_steps: int | None = None) -> dict:
    """simddp's recommendation from ``predicted`` and what ``measured`` says of it: a dict
    with ``text`` (lines to print), ``word``, ``proven`` (True, False or None) and the
    numbers behind them (validate.json's fields: docs/VALIDATION.md). ``turn_steps``: the
    bench's turn, to split each row into its odd and even turns (None: no split)."""
    rec = recommend(predicted, profile)
    naive = naive_of(predicted)
    out = {"recommendation": recommendation_text(rec, naive, results=predicted, profile=profile),
           "proven": None, "text": "",
           "word": None}
    if rec is None:
        return out
    out.update(recommended_strategy=rec.strategy, recommended_mb=rec.bucket_mb)
    rows = [r for r in measured if r.strategy == rec.strategy and r.bucket_mb is not None]
    configs = [_Config(g, turn_steps) for g in group_by_layout(rows, profile)]
    at_rec = next((c for c in configs if c.has(rec.bucket_mb)), None)
    if at_rec is None:
        out.update(word="NOT MEASURED", text=(
            f"NOT MEASURED: {rec.strategy} at {rec.bucket_mb:g} MB did not run, so the "
            "recommendation is neither proven nor refuted."))
        return out
    best = min(configs, key=lambda c: c.step_s)
    same = ("" if len(at_rec.mbs) == 1 else
            f" ({sizes_text(at_rec.mbs)} make the same buckets: one configuration, "
            f"{at_rec.samples} steps pooled)")
    out.update(measured_best_mb=rec.bucket_mb if best is at_rec else best.name_mb,
               measured_best_mbs=list(best.mbs), measured_best_ms=best.step_s * 1e3,
               recommended_ms=at_rec.step_s * 1e3, margin_pct=MARGIN_PCT,
               same_layout_mb=list(at_rec.mbs), turn_steps=turn_steps)
    what = f"{rec.strategy} at {rec.bucket_mb:g} MB{same}"
    fastest = best is at_rec
    other = (min((c for c in configs if c is not at_rec), key=lambda c: c.step_s, default=None)
             if fastest else best)
    if other is None:
        out.update(word="NOT JUDGED", regret_pct=0.0, regret_ci_pct=None, text=(
            f"NOT JUDGED: {what} is the only bucket layout measured "
            f"({at_rec.step_s * 1e3:.2f} ms median): nothing to compare it with."))
        return out
    if fastest:   # the lead in % of the recommendation's time, as "the next is X % slower"
        gap, glow, ghigh = _slower(other, at_rec)
        regret, low, high = -gap, -ghigh, -glow
    else:
        regret, low, high = _slower(at_rec, other)
    halves = _max(at_rec.halves_pct, other.halves_pct)
    noise, source = ((halves, SPLIT_HALVES) if halves is not None else
                     (_max(at_rec.p5_p95_pct, other.p5_p95_pct), P5_P95))
    j = judge(regret, low, high, noise, source,
              interval_from=INTERVAL if _paired(at_rec, other) else P5_P95)
    word = WORDS[j["claim"]]
    out.update(word=word, proven={"fastest": True, "within": True, "refuted": False}.get(
        j["claim"]), claim=j["claim"], verdict_margin_pct=j["margin_pct"],
        spread_pct=j["spread_pct"], spread_from=j["spread_from"], halves_apart_pct=halves)
    clears = _clears(j, regret)
    if fastest:
        out.update(regret_pct=0.0, regret_ci_pct=None, runner_up_mb=other.name_mb,
                   runner_up_pct=gap, runner_up_ci_pct=[glow, ghigh])
        lead = (f"measured, {what} is the fastest bucket size ({at_rec.step_s * 1e3:.2f} ms "
                "median)" if j["claim"] == "fastest" else
                f"measured, {what} has the lowest median ({at_rec.step_s * 1e3:.2f} ms)")
        facts = (f"{lead}; the next, {sizes_text(other.mbs)} ({other.step_s * 1e3:.2f} ms), "
                 f"is {gap:.1f} % slower (95 % interval {glow:+.1f} … {ghigh:+.1f} %)")
        tail = {"fastest": f": {clears}.",
                "within": (f", too little to rank the two, but following the recommendation "
                           f"costs at most {MARGIN_PCT:g} %: {clears}."),
                None: f"; this run cannot tell: {clears}. {_MORE}"}
    else:
        out.update(regret_pct=regret, regret_ci_pct=[low, high])
        facts = (f"the measured best is {sizes_text(other.mbs)} ({other.step_s * 1e3:.2f} ms); "
                 f"{what} is {regret:.1f} % slower (95 % interval {low:+.1f} … {high:+.1f} %, "
                 f"{at_rec.samples} steps)")
        tail = {"within": f": {clears}.",
                "refuted": (f": {clears}: following the recommendation costs more than "
                            f"{MARGIN_PCT:g} %."),
                None: f"; this run cannot tell: {clears}. {_MORE}"}
    out["text"] = f"{word}: {facts}{tail[j['claim']]}"
    return out


_MORE = "More --steps, or a quieter machine, would decide."


def judge(regret_pct: float, low_pct: float, high_pct: float, halves_pct: float | None,
          source: str = SPLIT_HALVES, margin_pct: float = MARGIN_PCT,
          interval_from: str = INTERVAL) -> dict:
    """The strongest claim the numbers carry: ``claim`` (``"fastest"``, ``"within"``,
    ``"refuted"`` or None), the ``margin_pct`` it rests on, the ``spread_pct`` it had to
    clear and ``spread_from``. ``regret_pct`` (negative: ahead) has the 95 % interval
    ``low_pct`` … ``high_pct``; the spread towards a line is the larger of ``halves_pct``
    and the interval's reach that way.

    >>> judge(1.0, 0.5, 1.5, halves_pct=1.2)["claim"]      # 1 % behind, well inside 3 %
    'within'
    >>> judge(1.0, 0.5, 1.5, halves_pct=2.5)["claim"] is None   # 1 + 2.5 reaches past 3 %
    True
    >>> judge(9.0, 8.0, 10.0, halves_pct=None)["spread_from"]   # no split: the interval
    '95 % interval'
    """
    up = max(high_pct - regret_pct, halves_pct or 0.0)      # how much worse it may read
    down = max(regret_pct - low_pct, halves_pct or 0.0)     # how much better
    up_from = (source if halves_pct is not None and halves_pct >= high_pct - regret_pct
               else interval_from)
    down_from = (source if halves_pct is not None and halves_pct >= regret_pct - low_pct
                 else interval_from)
    if halves_pct is None and high_pct == low_pct:   # a point and nothing else: no spread
        return {"claim": None, "margin_pct": abs(margin_pct - regret_pct), "spread_pct": None,
                "spread_from": None}
    for claim, margin, spread, where in (
            ("fastest", -regret_pct, up, up_from),
            ("within", margin_pct - regret_pct, up, up_from),
            ("refuted", regret_pct - margin_pct, down, down_from)):
        if margin > spread:
            return {"claim": claim, "margin_pct": margin, "spread_pct": spread,
                    "spread_from": where}
    if regret_pct < margin_pct:
        return {"claim": None, "margin_pct": margin_pct - regret_pct, "spread_pct": up,
                "spread_from": up_from}
    return {"claim": None, "margin_pct": regret_pct - margin_pct, "spread_pct": down,
            "spread_from": down_from}


def _clears(j: dict, regret_pct: float) -> str:
    """'margin 2.7 % (3 % − 0.3 %) < spread 12.5 % (the rows' split halves)'."""
    m = MARGIN_PCT
    how = {"fastest": "",
           "within": (f" ({m:g} % − {regret_pct:.1f} %)" if regret_pct >= 0
                      else f" ({m:g} % + {-regret_pct:.1f} %)"),
           "refuted": f" ({regret_pct:.1f} % − {m:g} %)"}
    if j["claim"] is None:
        how[None] = (how["within"] if regret_pct < m else how["refuted"])
    if j["spread_pct"] is None:
        return (f"margin {j['margin_pct']:.1f} %{how[j['claim']]}, but no spread was measured "
                "(no steps, no p5-p95)")
    sign = (">" if j["claim"] is not None else
            "<" if round(j["margin_pct"], 1) < round(j["spread_pct"], 1) else "≤")
    where = {SPLIT_HALVES: "the rows' split halves: their odd and even turns",
             INTERVAL: "the steps' 95 % interval",
             P5_P95: "the rows' p5-p95 width: no split halves"}[j["spread_from"]]
    return (f"margin {j['margin_pct']:.1f} %{how[j['claim']]} {sign} spread "
            f"{j['spread_pct']:.1f} % ({where})")


def _max(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


class _Config:
    """Measured Results of one layout as one configuration: sizes, pooled steps, median,
    and its spread (the larger of its rows' split halves, and of their p5–p95 widths)."""

    def __init__(self, results: list[Result], turn_steps: int | None = None) -> None:
        self.mbs = tuple(sorted(r.bucket_mb for r in results))
        fastest = min(results, key=lambda r: r.step_s)
        self.name_mb = fastest.bucket_mb
        self.runs = [r.steps_s for r in results] if all(r.steps_s for r in results) else []
        steps = [t for run in self.runs for t in run]
        self.step_s = (float(np.median(steps)) if steps and len(results) > 1
                       else fastest.step_s if len(results) == 1
                       else float(np.median([r.step_s for r in results])))
        self.samples = sum(r.samples for r in results)
        self.p5_s = min((r.step_p5_s for r in results if r.step_p5_s is not None), default=None)
        self.p95_s = max((r.step_p95_s for r in results if r.step_p95_s is not None),
                         default=None)
        self.halves_pct = _max(*(halves_apart_pct(r.steps_s, turn_steps) for r in results
                                 if turn_steps is not None and r.steps_s))
        self.p5_p95_pct = _max(*(100 * (r.step_p95_s - r.step_p5_s) / r.step_s
                                 for r in results if r.step_p5_s is not None
                                 and r.step_p95_s is not None and r.step_s > 0))

    def has(self, bucket_mb: float) -> bool:
        return any(math.isclose(mb, bucket_mb, rel_tol=1e-3) for mb in self.mbs)


def _paired(a: _Config, b: _Config) -> bool:
    """Whether both have steps enough for the bootstrap (two or more per row)."""
    return bool(a.runs and b.runs and min(len(r) for r in (*a.runs, *b.runs)) >= 2)


def _slower(a: _Config, b: _Config) -> tuple[float, float, float]:
    """(point, low, high) % that ``a`` is slower than ``b``: a bootstrap over their steps,
    each row of one paired with each of the other (metrics.paired_interval); without steps,
    the medians, and the p5–p95 spreads as the interval when both have them."""
    if _paired(a, b):
        return paired_interval(a.runs, b.runs)
    point = 100 * (a.step_s / b.step_s - 1)
    if None in (a.p5_s, a.p95_s, b.p5_s, b.p95_s):
        return point, point, point
    return point, 100 * (a.p5_s / b.p95_s - 1), 100 * (a.p95_s / b.p5_s - 1)
