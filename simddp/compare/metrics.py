"""How good a prediction is: absolute percentage error, rank agreement, best-bucket regret.

    >>> round(spearman([1, 2, 3, 4], [10, 20, 40, 30]), 3)    # one pair swapped
    0.8
    >>> rank_average([10, 20, 20, 30]).tolist()
    [1.0, 2.5, 2.5, 4.0]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from simddp.compare.text import config_sort_key
from simddp.errors import InputError
from simddp.predict.scenarios import robust_pick
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB
from simddp.predict.recommend import RECOMMEND_FROM


@dataclass(frozen=True)
class Summary:
    """Percentages are in %: ``median_ape`` 4.0 and ``regret`` 1.5 mean 4 % and 1.5 %."""

    model: str
    world_size: int
    predicted_link: str
    measured_link: str
    configs: int                      # matched configurations (= measured results)
    unmeasured_predictions: int       # predicted configurations nobody measured (not compared)
    median_ape: float
    max_ape: float
    spearman: float | None            # None: fewer than 2 configs, or one side all equal
    spearman_by_strategy: dict[str, float | None] = field(default_factory=dict)
    bucket_strategy: str | None = None  # whose buckets the best-bucket numbers are about
    bucket_accum_steps: int | None = None
    predicted_best_bucket_mb: float | None = None
    measured_best_bucket_mb: float | None = None
    regret: float | None = None       # % slower, measured, at the predicted-best bucket
    regret_ci: tuple[float, float] | None = None   # 95 % bootstrap interval of regret, in %
    # rows whose prediction has a range, and how many measured medians fall inside it
    with_range: int = 0
    in_range: int = 0
    # bucket sizes of bucket_strategy that make the same buckets, one group each, e.g.
    # ((1.0, 4.0),): scored as one configuration (simddp/predict/layouts.py)
    same_layout: tuple[tuple[float, ...], ...] = ()
    # each same_layout group's pooled measured median, in ms: the figure it is judged on
    same_layout_ms: tuple[float, ...] = ()
    # every size of the predicted-best and measured-best groups (one size unless pooled)
    predicted_best_bucket_mbs: tuple[float, ...] = ()
    measured_best_bucket_mbs: tuple[float, ...] = ()

    def to_json(self) -> dict:
        return dict(self.__dict__)


def summarize(rows: list, *, model: str = "", world_size: int = 0,
              predicted_link: str = "", measured_link: str = "", unmeasured: int = 0) -> Summary:
    """APE, Spearman ρ and the best-bucket regret of matched rows (at least one)."""
    if not rows:
        raise InputError("no matched configurations to compare (empty grid)")
    ape = [abs(r.error_pct) for r in rows]
    by_strategy = {}
    for s in sorted({r.strategy for r in rows}, key=lambda s: config_sort_key((s, None, 1))):
        mine = [r for r in rows if r.strategy == s]
        if len(mine) >= 3:  # two points always rank-agree or disagree: ±1 says nothing
            by_strategy[s] = spearman([r.predicted_s for r in mine], [r.measured_s for r in mine])
    best = best_bucket(rows)
    ranged = [r.in_range for r in rows if r.in_range is not None]
    return Summary(with_range=len(ranged), in_range=sum(ranged), model=model,
                   world_size=world_size, predicted_link=predicted_link,
                   measured_link=measured_link, configs=len(rows),
                   unmeasured_predictions=unmeasured,
                   median_ape=float(np.median(ape)), max_ape=float(max(ape)),
                   spearman=spearman([r.predicted_s for r in rows], [r.measured_s for r in rows]),
                   spearman_by_strategy=by_strategy, **best)


def best_bucket(rows: list) -> dict:
    """Predicted-best and measured-best bucket of the strategy ``simddp sweep`` recommends a
    size for (RECOMMEND_FROM; the smallest accumulation), and the regret in %. Only measured
    buckets are candidates; the predicted best is sweep's robust choice; sizes that make the
    same buckets are one candidate, pooled (``same_layout_ms``: each group's median).
    """
    candidates = []
    for s in RECOMMEND_FROM:
        mine = [r for r in rows if r.strategy == s and r.bucket_mb is not None]
        if mine:
            accum = min(r.accum_steps for r in mine)
            groups: dict[tuple, list] = {}
            for r in (r for r in mine if r.accum_steps == accum):
                groups.setdefault(r.layout or (r.bucket_mb,), []).append(r)
            candidates.append((s, accum, groups))
    # a strategy measured at one layout only has no bucket size to choose: the next one
    if not candidates:
        return {}
    s, accum, groups = min(candidates, key=lambda c: len(c[2]) < 2)  # stable: the first
    pooled = [(_one_configuration(g), g) for g in groups.values()]
    pooled.sort(key=lambda p: (p[0].predicted_s, p[0].bucket_mb))
    mine = [p[0] for p in pooled]
    k_pred = robust_pick([(r.predicted_s, r.predicted_scenarios_s) for r in mine])[0]
    k_meas = min(range(len(mine)), key=lambda k: (mine[k].measured_s, mine[k].bucket_mb))
    (pred_best, pred_group), (meas_best, meas_group) = pooled[k_pred], pooled[k_meas]
    ci = None
    if k_pred != k_meas and all(r.steps_s for r in (*pred_group, *meas_group)):
        ci = paired_interval([r.steps_s for r in pred_group],
                             [r.steps_s for r in meas_group])[1:]
    same = [(tuple(sorted(r.bucket_mb for r in g)), p.measured_s * 1e3)
            for p, g in pooled if len(g) > 1]
    same.sort()
    return {"bucket_strategy": s, "bucket_accum_steps": accum,
            "predicted_best_bucket_mb": pred_best.bucket_mb,
            "measured_best_bucket_mb": meas_best.bucket_mb,
            "regret": (pred_best.measured_s / meas_best.measured_s - 1.0) * 100.0,
            "regret_ci": ci,
            "same_layout": tuple(mbs for mbs, _ in same),
            "same_layout_ms": tuple(ms for _, ms in same),
            "predicted_best_bucket_mbs": tuple(sorted(r.bucket_mb for r in pred_group)),
            "measured_best_bucket_mbs": tuple(sorted(r.bucket_mb for r in meas_group))}


def _one_configuration(group: list):
    """Rows of one layout as one Row: named by the size closest to torch's 25 MB default, the
    prediction (the same plan: the same number) and the measured steps pooled."""
    if len(group) == 1:
        return group[0]
    name = min(group, key=lambda r: (abs(math.log(r.bucket_mb / DDP_DEFAULT_BUCKET_MB)),
                                     r.bucket_mb))
    steps = tuple(t for r in group for t in r.steps_s)
    pooled = (float(np.median(steps)) if all(r.steps_s for r in group)
              else float(np.median([r.measured_s for r in group])))
    return replace(name, predicted_s=min(r.predicted_s for r in group), measured_s=pooled,
                   steps_s=steps if all(r.steps_s for r in group) else (),
                   samples=sum(r.samples for r in group))


def paired_interval(a_runs, b_runs) -> tuple[float, float, float]:
    """:func:`ratio_interval` of two configurations each measured as one or more rows of
    steps: every row of ``a`` paired step by step with every row of ``b``, so each pair still
    ran in the same round (docs/FINDINGS.md#measurement-noise).

    >>> a = [0.110, 0.112, 0.108, 0.111]
    >>> point, low, high = paired_interval([a], [[0.100] * 4, [0.104] * 4])
    >>> round(point, 1)      # 110.5 over the pool's 102 ms
    8.3
    """
    a_cat, b_cat = [], []
    for a in a_runs:
        for b in b_runs:
            n = min(len(a), len(b))
            a_cat += a[:n]
            b_cat += b[:n]
    return ratio_interval(a_cat, b_cat)


def ratio_interval(a_s, b_s, resamples: int = 2000, seed: int = 0
                   ) -> tuple[float, float, float]:
    """(point, low, high): how much slower ``a`` is than ``b`` in %, median over median − 1,
    with a 95 % bootstrap interval over pairs of steps (step i of each ran in the same
    round-robin round and shares its drift); unpaired leftovers are dropped.

    >>> a, b = [0.110, 0.112, 0.108, 0.111], [0.100, 0.101, 0.099, 0.100]
    >>> point, low, high = ratio_interval(a, b)
    >>> round(point, 1), low > 5, high < 15
    (10.5, True, True)
    """
    n = min(len(a_s), len(b_s))
    if n < 2:
        raise ValueError(f"a bootstrap needs >= 2 paired steps, got {n}")
    a, b = np.asarray(a_s[:n], dtype=float), np.asarray(b_s[:n], dtype=float)
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    ratios = np.median(a[picks], axis=1) / np.median(b[picks], axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    point = np.median(a) / np.median(b)
    return (float(point - 1) * 100, float(low - 1) * 100, float(high - 1) * 100)


def rank_average(values) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank: [10, 20, 20, 30] -> [1, 2.5, 2.5, 4]."""
    x = np.asarray(values, dtype=float)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse.ravel()]


def spearman(x, y) -> float | None:
    """Spearman ρ: Pearson correlation of the average ranks. None when undefined (n < 2, or
    one side has a single distinct value)."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} vs {len(y)} values")
    if len(x) < 2:
        return None
    rx, ry = rank_average(x), rank_average(y)
    dx, dy = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return None if denom == 0 else float(dx @ dy) / denom
