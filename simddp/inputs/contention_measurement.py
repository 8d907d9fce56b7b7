"""Contention from four measured times: the engine's model of two lanes, inverted.

Given compute alone (W), comm alone (T), and both started together (compute ends at D, comm
at Ts), which two factors reproduce them under the engine's model (simddp/sim/lanes.py).
``calibrate`` and ``realrun`` measure; this is the arithmetic::

    >>> slowdowns(0.020, 0.020, 0.030, 0.035)       # compute x1.5, comm x2
    (1.5, 2.0)
"""
from __future__ import annotations

import numpy as np

# Contention needs the compute and the all-reduce stream to overlap: the shorter of the two
# (alone) should be at least this fraction of the longer, or the factors are guesses.
MIN_OVERLAP = 0.3


def slowdowns(compute_alone_s: float, comm_alone_s: float, compute_end_s: float,
              comm_end_s: float) -> tuple[float, float]:
    """(compute_slowdown, comm_slowdown) from one overlap measurement, ``*_end_s`` from the
    common start. W = T = 20 ms alone; together compute ends at D = 30 ms (x1.5), comm at
    Ts = 35 ms: it did 30/s_m ms of work by 30 ms, so s_m = 30 / (30 + 20 − 35) = 2::

    >>> slowdowns(0.020, 0.020, 0.030, 0.035)
    (1.5, 2.0)
    >>> slowdowns(0.020, 0.020, 0.035, 0.030)      # the same, comm finishing first
    (2.0, 1.5)
    """
    W, T, D, Ts = compute_alone_s, comm_alone_s, compute_end_s, comm_end_s
    if Ts >= D:  # compute ended first: it was slowed the whole time
        rest_s = D + T - Ts       # the comm work done during the overlap, at full speed
        return D / W, D / rest_s if rest_s > 0.1 * D else Ts / T
    rest_s = Ts + W - D           # the compute work done during the overlap, at full speed
    # A noisy repeat can leave less compute than the overlap explains: then the whole
    # compute counts as slowed (an upper bound) rather than a division by ~0.
    return (Ts / rest_s if rest_s > 0.1 * Ts else D / W), Ts / T


def combine_contention(per_rank: list[dict]) -> dict:
    """The factors for the link or host: the median over every repeat of every rank of that
    repeat's :func:`slowdowns` (``repeats_s``: (W, T, D, Ts) each), at least 1.0, and their
    p10/p90 spread. Per repeat, because comm alone drifts between repeats and comm's factor
    is a difference (docs/FINDINGS.md#contention); without repeats, each rank's medians,
    the mean over ranks.

    >>> r = {"compute_alone_s": 0.02, "comm_alone_s": 0.02, "compute_together_s": 0.03,
    ...      "comm_together_s": 0.035, "repeats": 5, "stream_bytes": 8, "stream_count": 1}
    >>> c = combine_contention([r, r]); (c["compute_slowdown"], c["comm_slowdown"], c["notes"])
    (1.5, 2.0, [])
    >>> reps = [(0.05, 0.05, 0.08, 0.10), (0.05, 0.07, 0.08, 0.12), (0.05, 0.05, 0.08, 0.11)]
    >>> c = combine_contention([{**r, "repeats_s": reps}])     # comm x2.67, x2.67, x4
    >>> round(c["compute_slowdown"], 2), round(c["comm_slowdown"], 2)
    (1.6, 2.67)
    """
    repeats = [tuple(rep) for r in per_rank for rep in r.get("repeats_s") or ()]
    if repeats:
        compute, comm = (float(v) for v in
                         np.median(np.array([slowdowns(*rep) for rep in repeats]), axis=0))
    else:
        factors = [slowdowns(r["compute_alone_s"], r["comm_alone_s"], r["compute_together_s"],
                             r["comm_together_s"]) for r in per_rank]
        compute = sum(f[0] for f in factors) / len(factors)
        comm = sum(f[1] for f in factors) / len(factors)
    notes = [f"{name} measured {v:.3f} < 1.0 (noise), clamped to 1.0"
             for name, v in (("compute_slowdown", compute), ("comm_slowdown", comm)) if v < 1.0]
    # The two lanes must overlap for most of the shorter one, or the factors are guesses.
    r0 = per_rank[0]
    shorter = min(r0["compute_alone_s"], r0["comm_alone_s"])
    longer = max(r0["compute_alone_s"], r0["comm_alone_s"])
    if shorter < MIN_OVERLAP * longer:
        notes.append(f"compute alone {r0['compute_alone_s'] * 1e3:.1f} ms and comm alone "
                     f"{r0['comm_alone_s'] * 1e3:.1f} ms overlap little: the factors are coarse")
    return {"compute_slowdown": max(1.0, compute), "comm_slowdown": max(1.0, comm),
            "compute_slowdown_raw": compute, "comm_slowdown_raw": comm,
            "clamped": [n for n, v in (("compute_slowdown", compute), ("comm_slowdown", comm))
                        if v < 1.0], "notes": notes, "per_rank": per_rank,
            "spread": contention_spread(per_rank)}


def contention_spread(per_rank: list[dict]) -> tuple[tuple[float, float], ...] | None:
    """((compute, comm) low, (compute, comm) high): the p10 and p90 of each factor over every
    repeat of every rank, at least 1.0, bracketing the point estimate; None without repeats.

    >>> reps = [(0.02, 0.02, 0.03, 0.035), (0.02, 0.02, 0.036, 0.04)]    # x1.5/x2, x1.8/x2.25
    >>> contention_spread([{"repeats_s": reps}])
    ((1.53, 2.02), (1.77, 2.23))
    """
    repeats = [tuple(rep) for r in per_rank for rep in r.get("repeats_s") or ()]
    if not repeats:
        return None
    factors = np.array([slowdowns(*rep) for rep in repeats])
    low, high = (np.maximum(1.0, np.percentile(factors, q, axis=0)) for q in (10, 90))
    return tuple(round(float(v), 2) for v in low), tuple(round(float(v), 2) for v in high)
