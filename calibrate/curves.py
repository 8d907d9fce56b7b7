"""The sweep as the link's measured all-reduce curve, where the curve earns it.

The sweep (per size the slowest rank's median) goes into the link where, read between the
kept sizes as simddp reads a curve, it predicts the held-out sizes better than the line, on
the same sizes (calibrate/judged.py); NCCL is not a line (docs/FINDINGS.md#nccl-is-not-a-line).
Every point moves by (step α − lone α), as the line does, but never below its bytes at busbw
unless measured so. Only the all-reduce gets one: the other kinds' waited-for α is their own
(docs/CALIBRATE.md, The measured curve).

::

    >>> sizes = [2 ** k for k in range(10, 27, 2)]
    >>> held = {"mask": [i % 2 == 1 for i in range(9)],
    ...         "heldout_bytes": [2 ** 12, 2 ** 16, 2 ** 20, 2 ** 24], "median_rel_err": 0.0}
    >>> line = [{"size_bytes": n, "time_s": 1e-4 + n / 1e9} for n in sizes]
    >>> choose_curve(line, held, 2, 1, alpha_shift_s=0.0, busbw_gbps=1.0).why
    'the curve misses the held-out sizes by median 6.4%, no better than the line (0.0%)'
    >>> bent = [{"size_bytes": n, "time_s": 1e-4 * (n / 1024) ** 0.5} for n in sizes]
    >>> choice = choose_curve(bent, {**held, "median_rel_err": 0.3}, 2, 1, 0.0, 1.0)
    >>> choice.curve.bytes == tuple(sizes), choice.why
    (True, 'the curve misses the held-out sizes by median 0.0%, the line by 30.0%')
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simddp.cost import ALL_REDUCE, Curve, bytes_s

CURVE_SOURCE = "python -m calibrate's sweep: per size the slowest rank's median time"
# Backends whose sweep may become the link's curve: Gloo's laws on this box were validated
# against the line's charges (docs/FINDINGS.md#left-open); allreduce.json records both figures.
CURVE_BACKENDS = ("nccl",)


@dataclass(frozen=True)
class CurveChoice:
    """Whether the link carries the sweep's curve (``curve``; None: the line alone), with
    both held-out figures and the reason in words (the report and allreduce.json print it)."""

    curve: Curve | None
    curve_median_rel_err: float
    line_median_rel_err: float
    alpha_shift_s: float
    why: str

    def to_json(self) -> dict:
        return {"used": self.curve is not None, "why": self.why,
                "curve_median_rel_err": self.curve_median_rel_err,
                "line_median_rel_err": self.line_median_rel_err,
                "alpha_shift_s": self.alpha_shift_s}


def shifted_points(rows: list[dict], alpha_shift_s: float, busbw_gbps: float,
                   world_size: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(bytes, seconds) of the sweep's rows, each moved by ``alpha_shift_s`` (step α − lone α),
    and moved down to no less than its bytes at ``busbw_gbps`` (or its own time, if less)::

        >>> b, t = shifted_points([{"size_bytes": 1000, "time_s": 5e-5},
        ...                        {"size_bytes": 10**6, "time_s": 1.1e-3}], -1e-4, 1.0, 2)
        >>> b, [round(s * 1e6, 3) for s in t]    # the small one held at its bytes: 1 µs
        ((1000, 1000000), [1.0, 1000.0])
    """
    points = sorted({int(r["size_bytes"]): float(r["time_s"]) for r in rows
                     if r["time_s"] > 0 and r["size_bytes"] > 0}.items())
    return (tuple(n for n, _ in points),
            tuple(max(t + alpha_shift_s, min(t, bytes_s(ALL_REDUCE, n, world_size, busbw_gbps)))
                  for n, t in points))


def choose_curve(rows: list[dict], held: dict, world_size: int, nodes: int,
                 alpha_shift_s: float, busbw_gbps: float, backend: str = "nccl") -> CurveChoice:
    """The all-reduce curve for the link, or None where the line predicts the held-out sizes
    at least as well, or on a backend not in :data:`CURVE_BACKENDS`. ``held``: the line's
    judged figures (``mask``, ``heldout_bytes``, ``median_rel_err``)."""
    line_err = float(held.get("median_rel_err", float("nan")))
    kept = [r for r, out in zip(rows, held["mask"]) if not out]
    judged = set(held.get("heldout_bytes") or ())
    targets = [r for r in rows if r["size_bytes"] in judged and r["time_s"] > 0]
    b, t = shifted_points(kept, 0.0, busbw_gbps, world_size)
    if len(b) < 2 or not targets or not np.isfinite(line_err):
        return CurveChoice(None, float("nan"), line_err, alpha_shift_s,
                           "no held-out sizes to judge a curve on: the line stays")
    kept_curve = Curve(ALL_REDUCE, world_size, b, t, nodes)
    curve_err = float(np.median([abs(kept_curve.seconds_at(r["size_bytes"]) - r["time_s"])
                                 / r["time_s"] for r in targets]))
    if not curve_err < line_err:
        return CurveChoice(None, curve_err, line_err, alpha_shift_s,
                           f"the curve misses the held-out sizes by median {curve_err:.1%}, "
                           f"no better than the line ({line_err:.1%})")
    wins = (f"the curve misses the held-out sizes by median {curve_err:.1%}, the line by "
            f"{line_err:.1%}")
    if backend not in CURVE_BACKENDS:
        return CurveChoice(None, curve_err, line_err, alpha_shift_s,
                           f"{wins}, but on {backend} the link keeps the line: the box's "
                           f"laws were validated against the line's charges")
    b, t = shifted_points(rows, alpha_shift_s, busbw_gbps, world_size)
    source = CURVE_SOURCE + (f", moved by the step's α less a lone call's "
                             f"({alpha_shift_s * 1e6:+.1f} µs)" if alpha_shift_s else "")
    return CurveChoice(Curve(ALL_REDUCE, world_size, b, t, nodes, None, source), curve_err,
                       line_err, alpha_shift_s, wins)
