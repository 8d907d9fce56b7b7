"""How a fitted line is judged, once: its intervals over what a rerun reads
(calibrate/intervals.py), its held-out errors and R² over the sizes it makes its claim on,
and the degenerate-fit warnings taken from those same figures::

    held = finished(held, rows, alpha_s)      # alpha_s: the step's α the line goes through
    held["median_rel_err"], held["r2_log"], held["judged_on"], held["fit"].busbw_ci_gbps
    problems_of(held["fit"], held)            # ['held-out median error 67% > 50% on ...']

The report, the link's source and allreduce.json all carry these: one number per quantity.
"""
from __future__ import annotations

import numpy as np

import calibrate.fit as fitting
from calibrate.intervals import rerun_intervals

# What a line is judged on, in words (the report, the link's source, fit_problems' warnings)
ALL_SIZES = "every size"
BANDWIDTH_BOUND = "the sizes taking at least 2α"   # bandwidth-bound: where the line claims


def judged(fit, held: dict, rows: list[dict], alpha_s: float | None) -> dict:
    """``held`` with its held-out errors and ``r2_log`` (R² on log time) over the sizes the
    line makes its claim on (``judged_on``). A line through the step's α (``alpha_s``) misses
    lone small all-reduces by design, so it is judged on the sizes taking at least 2α (R² needs
    3); without, every size counts. The sizes held out of the fit stay the same.

    >>> from calibrate.fit import heldout_error, predict_s
    >>> sizes = [2 ** k for k in range(10, 27, 2)]
    >>> held = heldout_error(sizes, predict_s(1e-3, 1.0, sizes, 2), 2, every=2)
    >>> j = judged(held["fit"], held, [{"size_bytes": n, "time_s": t} for n, t in zip(
    ...     sizes, predict_s(1e-3, 1.0, sizes, 2))], alpha_s=1e-3)
    >>> held["heldout_bytes"], j["heldout_bytes"], round(j["r2_log"], 6)
    ([4096, 65536, 1048576, 16777216], [1048576, 16777216], 1.0)
    """
    if alpha_s is None:
        return {**held, "r2_log": fit.r2, "judged_on": ALL_SIZES}
    big = [r for r in rows if r["time_s"] >= 2 * alpha_s]
    sizes = {r["size_bytes"] for r in big}
    kept = [(n, e) for n, e in zip(held["heldout_bytes"], held["rel_err"]) if n in sizes]
    errs = [e for _, e in kept]
    out = {**held, "heldout_bytes": [n for n, _ in kept], "rel_err": errs,
           "median_rel_err": float(np.median(errs)) if errs else float("nan"),
           "max_rel_err": float(np.max(errs)) if errs else float("nan"),
           "r2_log": float("nan"), "judged_on": BANDWIDTH_BOUND}
    if len(big) >= fitting.MIN_POINTS:
        log_t = np.log10([r["time_s"] for r in big])
        log_m = np.log10(fit.predict_s([r["size_bytes"] for r in big]))
        ss_tot = float(np.sum((log_t - log_t.mean()) ** 2))
        if ss_tot > 0:
            out["r2_log"] = 1.0 - float(np.sum((log_t - log_m) ** 2)) / ss_tot
    return out


def problems_of(fit, held: dict) -> list[str]:
    """fit_problems on the judged figures (:func:`judged`), each naming the sizes it is
    judged on where that is not every size."""
    where = "" if held["judged_on"] == ALL_SIZES else f" on {held['judged_on']}"
    return [p + where if not p.startswith("busbw") else p
            for p in fitting.fit_problems(fit, held, held["r2_log"])]


def finished(held: dict, rows: list[dict], alpha_s: float | None) -> dict:
    """A fitted line's held-out dict, final: its rerun intervals (calibrate/intervals.py),
    then judged (:func:`judged`)."""
    fit = rerun_intervals(held["fit"], rows, held["mask"], alpha_held=alpha_s is not None,
                          busbw_held=bool(held.get("busbw_from")))
    return judged(fit, {**held, "fit": fit}, rows, alpha_s)
