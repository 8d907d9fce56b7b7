"""A fit's 95 % intervals as where a rerun reads: a bootstrap over the sizes and, within each
size, over its timed iterations (the repeats the sweep already ran), widened for a rerun::

    fit = rerun_intervals(fit, rows, mask, alpha_held=True)   # busbw_ci_gbps replaced

Not the fit's Student-t intervals: each size is timed in its own stretch of seconds and the
box runs fast or slow for seconds at a time, so they were too narrow for a rerun to fall inside
(docs/FINDINGS.md#bandwidth-from-the-large-sizes). Each resample draws the fitted sizes with
replacement and, per size, its iterations (each rank's median, then the slowest rank), and
refits the line the same way (docs/CALIBRATE.md, Intervals). tests/calibrate/test_intervals.py
checks that another run's busbw falls inside over 90 % of the time.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from calibrate.fit import MAX_BUSBW_GBPS, PiecewiseFit
from simddp.cost.factors import GB, kind_factor

RESAMPLES = 1000
RERUN = 2 ** 0.5   # a rerun's value vs this run's: two estimates' uncertainty, not one


def rerun_intervals(fit, rows: list[dict], mask, *, alpha_held: bool,
                    busbw_held: bool = False, resamples: int = RESAMPLES, seed: int = 0):
    """``fit`` (an AlphaBetaFit over the rows ``mask`` keeps, or a PiecewiseFit) with the
    bootstrap's busbw interval, and α's where α was fitted; a pinned parameter keeps its
    interval. ``seed`` fixes the resamples: the same measurement gives the same report.

    >>> from calibrate.fit import fit_alpha_beta, predict_s
    >>> sizes = [2 ** k for k in range(20, 27)]
    >>> rows = [{"size_bytes": n, "time_s": t, "times_s_per_rank": [[t * 0.98, t, t * 1.02]]}
    ...         for n, t in zip(sizes, predict_s(1e-3, 1.0, sizes, 2))]
    >>> f = fit_alpha_beta(sizes, [r["time_s"] for r in rows], 2, "absolute", 1e-3)
    >>> lo, hi = rerun_intervals(f, rows, [False] * 7, alpha_held=True).busbw_ci_gbps
    >>> 0.97 < lo < 1.0 < hi < 1.03
    True
    """
    if isinstance(fit, PiecewiseFit):   # each line over its own sizes
        return dataclasses.replace(fit, **{
            name: rerun_intervals(piece, rows, [held or (r["size_bytes"] > fit.breakpoint_bytes)
                                                 == (name == "lower")
                                                 for r, held in zip(rows, mask)],
                                  alpha_held=alpha_held, busbw_held=busbw_held,
                                  resamples=resamples, seed=seed)
            for name, piece in (("lower", fit.lower), ("upper", fit.upper))})
    if busbw_held and alpha_held:
        return fit
    kept = [r for r, held in zip(rows, mask) if not held]
    x = kind_factor(fit.kind, fit.world_size) * np.array(
        [r["size_bytes"] for r in kept], dtype=float) / GB
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(kept), (resamples, len(kept)))     # sizes, with replacement
    times = resampled_times(kept, rng, resamples)                 # (sizes, resamples)
    t = np.take_along_axis(times.T, pick, axis=1)                 # (resamples, picks)
    w = 1.0 / t if fit.weights == "relative" else np.ones_like(t)
    alpha, inv = _refit(x[pick], t, w, fit.alpha_s if alpha_held else None,
                        1.0 / fit.busbw_gbps if busbw_held else None)
    out = {}
    if not busbw_held:
        out["busbw_ci_gbps"] = _covering(np.percentile(1.0 / inv, [2.5, 97.5]),
                                         fit.busbw_ci_gbps, fit.busbw_gbps)
    if not alpha_held:
        out["alpha_ci_s"] = _covering(np.percentile(alpha, [2.5, 97.5]), fit.alpha_ci_s,
                                      fit.alpha_s)
    return dataclasses.replace(fit, **out)


def resampled_times(rows: list[dict], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """(sizes, resamples): per size, each resample's time from its iterations drawn with
    replacement, per rank its median, then the slowest rank; a row without per-iteration
    times keeps its ``time_s``.

    >>> rows = [{"time_s": 2.0}, {"time_s": 1.0, "times_s_per_rank": [[1.0, 1.0], [3.0, 3.0]]}]
    >>> resampled_times(rows, np.random.default_rng(0), 2).tolist()
    [[2.0, 2.0], [3.0, 3.0]]
    """
    out = np.empty((len(rows), resamples))
    for i, row in enumerate(rows):
        per_rank = np.asarray(row.get("times_s_per_rank") or [[]], dtype=float)
        if per_rank.size == 0:
            out[i] = row["time_s"]
            continue
        iters = rng.integers(0, per_rank.shape[1], (resamples, per_rank.shape[1]))
        out[i] = np.max(np.median(per_rank[:, iters], axis=2), axis=0)   # same iterations
    return out                                                             # on every rank


def _refit(x: np.ndarray, t: np.ndarray, w: np.ndarray, alpha_s: float | None,
           inv_busbw: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per row (one resample): weighted least squares of t = α + x·inv for α ≥ 0 and
    inv ≥ 1/MAX_BUSBW_GBPS, the unknowns not given (the bounds calibrate.fit holds)."""
    w2 = w * w
    floor = 1.0 / MAX_BUSBW_GBPS
    if inv_busbw is not None:   # busbw held: α alone
        a = np.sum(w2 * (t - x * inv_busbw), axis=1) / np.sum(w2, axis=1)
        return np.maximum(a, 0.0), np.full(len(t), inv_busbw)
    if alpha_s is not None:     # α held: busbw alone
        inv = np.sum(w2 * x * (t - alpha_s), axis=1) / np.sum(w2 * x * x, axis=1)
        return np.full(len(t), alpha_s), np.maximum(inv, floor)
    s0, s1, s2 = (np.sum(w2 * x ** k, axis=1) for k in (0, 1, 2))
    st, sxt = np.sum(w2 * t, axis=1), np.sum(w2 * x * t, axis=1)
    det = s0 * s2 - s1 * s1
    with np.errstate(divide="ignore", invalid="ignore"):
        a = (s2 * st - s1 * sxt) / det
        inv = (s0 * sxt - s1 * st) / det
    through_zero = ~np.isfinite(a) | (a < 0)        # the α ≥ 0 bound holds: α = 0 there
    inv = np.where(through_zero, sxt / s2, inv)
    a = np.where(through_zero, 0.0, a)
    low = inv < floor                              # no slope: busbw at its bound, α the mean
    a = np.where(low, np.sum(w2 * (t - x * floor), axis=1) / s0, a)
    return np.maximum(a, 0.0), np.maximum(inv, floor)


def _covering(interval: np.ndarray, student_t: tuple[float, float], value: float
              ) -> tuple[float, float]:
    """Where 95 % of reruns read: on each side the wider of the bootstrap's and the Student-t
    interval, times √2, as a rerun's value carries the same uncertainty again (a 95 % interval
    of the estimate holds another run's value only 83 % of the time).

    >>> [round(v, 4) for v in _covering(np.array([0.9, 1.2]), (0.95, 1.1), 1.0)]
    [0.8586, 1.2828]
    >>> [round(v, 4) for v in _covering(np.array([1.1, 1.2]), (float("nan"), 1.1), 1.0)]
    [1.0, 1.2828]
    """
    low_t, high_t = (v if np.isfinite(v) else value for v in student_t)
    below = max(0.0, value - interval[0], value - low_t)
    above = max(0.0, interval[1] - value, high_t - value)
    return float(max(0.0, value - RERUN * below)), float(value + RERUN * above)
