"""Fit the ring law ``t(n) = α + 2(p−1)/p · n / busbw`` to measured all-reduce times, and
``t(n) = α + (p−1)/p · n / busbw`` to reduce-scatter and all-gather times (``kind=``; n is
the full, unsharded size, as nccl-tests counts it).

Pure numpy/scipy, no torch, so tests run in milliseconds::

    fit = fit_alpha_beta(sizes_bytes, times_s, world_size=2)       # relative residuals
    fit.alpha_s, fit.busbw_gbps, fit.alpha_ci_s, fit.busbw_ci_gbps, fit.r2
    pw = fit_piecewise(sizes_bytes, times_s, world_size=2)         # one breakpoint
    pw.breakpoint_bytes, pw.lower.busbw_gbps, pw.upper.busbw_gbps
    err = heldout_error(sizes_bytes, times_s, 2, every=3)          # fit 2/3, score the rest
    rs = fit_alpha_beta(sizes_bytes, rs_times_s, 2, kind="reduce_scatter")  # (p−1)/p factor

Relative residuals by default: the times span about 3 decades, and plain least squares would
let the biggest sizes alone decide, leaving α as noise. R² is on log10(time) for the same
reason: the log-log plot is what users judge.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from calibrate.settings import MIN_POINTS, heldout_mask
from simddp.cost import alpha_beta_s
from simddp.cost.factors import ALL_REDUCE, GB, kind_factor
from simddp.inputs.link import Link, LinkPiece

# Suggest --piecewise above this rms relative miss: a shape, not noise
# (docs/FINDINGS.md#measurement-noise).
SUGGEST_PIECEWISE_RMS = 0.15
# busbw's upper bound, 1000x NVLink: where a flat (latency-bound) segment ends up, unresolved.
MAX_BUSBW_GBPS = 1e6
# A held-out median error above this flags a fit as degenerate (:func:`fit_problems`).
MAX_HELDOUT_REL_ERR = 0.5


@dataclass(frozen=True)
class AlphaBetaFit:
    """One α–β line over ``[min_bytes, max_bytes]``; intervals are 95% (Student t)."""

    alpha_s: float
    busbw_gbps: float
    alpha_ci_s: tuple[float, float]
    busbw_ci_gbps: tuple[float, float]
    r2: float
    rms_rel_err: float
    max_rel_err: float
    min_bytes: int
    max_bytes: int
    n_points: int
    world_size: int
    weights: str
    kind: str = ALL_REDUCE  # the collective: its bytes per rank, kind_factor(kind, p)

    def predict_s(self, sizes_bytes) -> np.ndarray:
        return predict_s(self.alpha_s, self.busbw_gbps, sizes_bytes, self.world_size,
                         self.kind)


@dataclass(frozen=True)
class PiecewiseFit:
    """Two α–β lines: ``lower`` for sizes <= ``breakpoint_bytes``, ``upper`` above."""

    breakpoint_bytes: int
    lower: AlphaBetaFit
    upper: AlphaBetaFit
    r2: float
    rms_rel_err: float
    max_rel_err: float

    def predict_s(self, sizes_bytes) -> np.ndarray:
        sizes = np.asarray(sizes_bytes, dtype=float)
        return np.where(sizes <= self.breakpoint_bytes, self.lower.predict_s(sizes),
                        self.upper.predict_s(sizes))


def predict_s(alpha_s: float, busbw_gbps: float, sizes_bytes, world_size: int,
              kind: str = ALL_REDUCE) -> np.ndarray:
    """Seconds of a ``kind`` collective of each size: α + factor · n / busbw.

    >>> predict_s(0.0, 1.0, [1e6], 4).tolist(), predict_s(0.0, 1.0, [1e6], 4, "all_gather").tolist()
    ([0.0015], [0.00075])
    """
    return alpha_beta_s(alpha_s, busbw_gbps, kind, np.asarray(sizes_bytes, dtype=float),
                        world_size)


def fit_alpha_beta(sizes_bytes, times_s, world_size: int,
                   weights: str | np.ndarray = "relative",
                   fixed_alpha_s: float | None = None, kind: str = ALL_REDUCE,
                   fixed_busbw_gbps: float | None = None) -> AlphaBetaFit:
    """Weighted least squares for α >= 0 and busbw > 0. ``weights``: "relative" (residual /
    measured time), "absolute" or one per point. ``fixed_alpha_s`` / ``fixed_busbw_gbps`` pin
    that parameter (its interval one value); ``kind`` sets the bytes per rank, so busbw is
    comparable between kinds.
    """
    sizes, times = _check(sizes_bytes, times_s)
    w = _weights(weights, times)
    x = kind_factor(kind, world_size) * sizes / GB  # GB moved per rank; its coefficient is 1/busbw
    # Unknowns in µs and ns/byte-ish units (s/GB) so both are O(1)-O(1000) for the solver.
    design = np.column_stack([np.full_like(x, 1e-6), x])
    lower = [0.0, 1 / MAX_BUSBW_GBPS]
    upper = [np.inf, np.inf]
    if fixed_alpha_s is not None:  # pin α by its bounds; the solver then fits busbw alone
        alpha_us = max(0.0, float(fixed_alpha_s)) * 1e6
        lower[0], upper[0] = alpha_us, alpha_us * (1 + 1e-12) + 1e-12
    if fixed_busbw_gbps is not None:
        inv = 1.0 / min(float(fixed_busbw_gbps), MAX_BUSBW_GBPS)
        lower[1], upper[1] = inv, inv * (1 + 1e-12)
    start, *_ = np.linalg.lstsq(design * w[:, None], times * w, rcond=None)
    start = np.clip(start, [lower[0], max(lower[1], 2 / MAX_BUSBW_GBPS)], upper)
    res = optimize.least_squares(lambda p: (design @ p - times) * w, start,
                                 bounds=(lower, upper), x_scale="jac",
                                 method="trf", xtol=1e-15, ftol=1e-15, gtol=1e-15)
    alpha_us, inv_busbw = (float(v) for v in res.x)
    free = [i for i, pinned in enumerate((fixed_alpha_s, fixed_busbw_gbps)) if pinned is None]
    n_free = len(free)
    dof = len(times) - n_free
    half = np.zeros(2)
    half[free] = np.nan
    if dof > 0 and free:
        jac = res.jac[:, free]
        sigma2 = float(res.fun @ res.fun) / dof
        try:
            cov = np.linalg.inv(jac.T @ jac) * sigma2
            half[free] = (float(stats.t.ppf(0.975, dof))
                          * np.sqrt(np.clip(np.diag(cov), 0.0, None)))
        except np.linalg.LinAlgError:
            pass
    busbw = 1.0 / inv_busbw
    lo_inv, hi_inv = inv_busbw - half[1], inv_busbw + half[1]
    busbw_ci = (1.0 / hi_inv if np.isfinite(hi_inv) else np.nan,
                1.0 / lo_inv if lo_inv > 0 else np.inf)
    model = design @ res.x
    return AlphaBetaFit(
        alpha_s=alpha_us * 1e-6, busbw_gbps=float(busbw),
        alpha_ci_s=(float(alpha_us - half[0]) * 1e-6, float(alpha_us + half[0]) * 1e-6),
        busbw_ci_gbps=(float(busbw_ci[0]), float(busbw_ci[1])),
        **_quality(times, model), min_bytes=int(sizes.min()), max_bytes=int(sizes.max()),
        n_points=len(times), world_size=world_size,
        weights=weights if isinstance(weights, str) else "custom", kind=kind)


def fit_piecewise(sizes_bytes, times_s, world_size: int, weights: str = "relative",
                  min_points: int = MIN_POINTS, kind: str = ALL_REDUCE) -> PiecewiseFit:
    """Best single breakpoint: try every split leaving ``min_points`` on each side."""
    sizes, times = _check(sizes_bytes, times_s)
    order = np.argsort(sizes)
    sizes, times = sizes[order], times[order]
    if len(sizes) < 2 * min_points:
        raise ValueError(f"a piecewise fit needs >= {2 * min_points} sizes, got {len(sizes)}")
    best = None
    for k in range(min_points, len(sizes) - min_points + 1):
        lower = fit_alpha_beta(sizes[:k], times[:k], world_size, weights, kind=kind)
        upper = fit_alpha_beta(sizes[k:], times[k:], world_size, weights, kind=kind)
        model = np.concatenate([lower.predict_s(sizes[:k]), upper.predict_s(sizes[k:])])
        cost = float(np.sum(((model - times) * _weights(weights, times)) ** 2))
        if best is None or cost < best[0]:
            best = (cost, k, lower, upper, model)
    _, k, lower, upper, model = best
    return PiecewiseFit(breakpoint_bytes=int(sizes[k - 1]), lower=lower, upper=upper,
                        **_quality(times, model))


def heldout_error(sizes_bytes, times_s, world_size: int, every: int = 3,
                  piecewise: bool = False, weights: str = "relative",
                  fixed_alpha_s: float | None = None, kind: str = ALL_REDUCE,
                  fixed_busbw_gbps: float | None = None) -> dict:
    """Fit on the kept sizes, predict the held-out ones: relative errors there."""
    sizes, times = _check(sizes_bytes, times_s)
    mask = heldout_mask(len(sizes), every)
    if (fixed_alpha_s is not None or fixed_busbw_gbps is not None) and not piecewise:
        fit = fit_alpha_beta(sizes[~mask], times[~mask], world_size, weights, fixed_alpha_s,
                             kind, fixed_busbw_gbps)
    else:
        fit = fit_any(sizes[~mask], times[~mask], world_size, piecewise, weights, kind)
    rel = np.abs(fit.predict_s(sizes[mask]) - times[mask]) / times[mask]
    return {"fit": fit, "mask": mask.tolist(), "heldout_bytes": sizes[mask].astype(int).tolist(),
            "rel_err": rel.tolist(),
            "median_rel_err": float(np.median(rel)) if rel.size else float("nan"),
            "max_rel_err": float(rel.max()) if rel.size else float("nan")}


def fit_any(sizes_bytes, times_s, world_size: int, piecewise: bool = False,
            weights: str = "relative", kind: str = ALL_REDUCE) -> AlphaBetaFit | PiecewiseFit:
    if piecewise:
        return fit_piecewise(sizes_bytes, times_s, world_size, weights, kind=kind)
    return fit_alpha_beta(sizes_bytes, times_s, world_size, weights, kind=kind)


def busbw_unresolved(fit: AlphaBetaFit | PiecewiseFit) -> bool:
    """Whether the (large-message) line's busbw sits at its bound: no slope was measured."""
    main = fit.upper if isinstance(fit, PiecewiseFit) else fit
    return main.busbw_gbps >= MAX_BUSBW_GBPS / 2


def fit_problems(fit: AlphaBetaFit | PiecewiseFit, heldout: dict | None = None,
                 r2: float | None = None) -> list[str]:
    """Why a fit is degenerate (busbw at its bound, R² on log time < 0, held-out median error
    over :data:`MAX_HELDOUT_REL_ERR`), one phrase each; [] when usable. ``r2``: the R² to judge
    instead of the fit's own.

    >>> sizes = [2 ** k for k in range(10, 17)]
    >>> flat = fit_alpha_beta(sizes, [1e-3] * 7, 2)     # time does not grow with size
    >>> fit_problems(flat)
    ['busbw at its 1e+06 GB/s bound: the time does not grow with size over 1024..65536 B']
    """
    main = fit.upper if isinstance(fit, PiecewiseFit) else fit
    out = []
    if busbw_unresolved(fit):
        out.append(f"busbw at its {MAX_BUSBW_GBPS:.0e} GB/s bound: the time does not grow "
                   f"with size over {main.min_bytes}..{main.max_bytes} B")
    r2 = fit.r2 if r2 is None else r2
    if np.isfinite(r2) and r2 < 0:
        out.append(f"R²(log t) {r2:.2f} < 0: the line fits worse than a constant")
    if heldout and heldout.get("heldout_bytes") and \
            heldout["median_rel_err"] > MAX_HELDOUT_REL_ERR:
        out.append(f"held-out median error {heldout['median_rel_err']:.0%} > "
                   f"{MAX_HELDOUT_REL_ERR:.0%}")
    return out


def suggest_piecewise(fit: AlphaBetaFit) -> bool:
    return fit.rms_rel_err > SUGGEST_PIECEWISE_RMS


def to_link(fit: AlphaBetaFit | PiecewiseFit, name: str, world_size: int, backend: str,
            source: str = "") -> Link:
    """The simddp Link; a piecewise fit keeps the upper (large-message) line as α/busbw."""
    main = fit.upper if isinstance(fit, PiecewiseFit) else fit
    pieces = ()
    if isinstance(fit, PiecewiseFit):
        pieces = (LinkPiece(float(fit.breakpoint_bytes), fit.lower.alpha_s, fit.lower.busbw_gbps),
                  LinkPiece(None, fit.upper.alpha_s, fit.upper.busbw_gbps))
    return Link(name=name, alpha_s=main.alpha_s, busbw_gbps=main.busbw_gbps,
                world_size=world_size, backend=backend, pieces=pieces, source=source)


def _check(sizes_bytes, times_s) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    if sizes.shape != times.shape or sizes.ndim != 1:
        raise ValueError(f"sizes and times must be 1-D of equal length, got {sizes.shape} "
                         f"and {times.shape}")
    if len(sizes) < MIN_POINTS:
        raise ValueError(f"a fit needs >= {MIN_POINTS} sizes, got {len(sizes)}")
    if not (np.all(np.isfinite(times)) and np.all(times > 0) and np.all(sizes > 0)):
        raise ValueError("sizes and times must be finite and > 0")
    return sizes, times


def _weights(weights, times: np.ndarray) -> np.ndarray:
    if isinstance(weights, str):
        if weights == "relative":
            return 1.0 / times
        if weights == "absolute":
            return np.full_like(times, 1.0 / np.median(times))  # scale only, for the solver
        raise ValueError(f"weights={weights!r}: expected 'relative', 'absolute' or an array")
    w = np.asarray(weights, dtype=float)
    if w.shape != times.shape or np.any(~np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite, >= 0, one per size")
    return w


def _quality(times: np.ndarray, model: np.ndarray) -> dict:
    rel = (model - times) / times
    log_t = np.log10(times)
    ss_tot = float(np.sum((log_t - log_t.mean()) ** 2))
    ss_res = float(np.sum((log_t - np.log10(np.maximum(model, 1e-30))) ** 2))
    return {"r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
            "rms_rel_err": float(np.sqrt(np.mean(rel ** 2))),
            "max_rel_err": float(np.max(np.abs(rel)))}
