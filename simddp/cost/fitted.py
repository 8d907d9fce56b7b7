"""The α–β a closed form uses: the link's own, or one fitted to its curve over DDP's buckets.

The bucket optimum needs a line, α + β·b; for a curve link it takes the line fitted to the
curve where buckets live (1–100 MB, least squares on relative error, α ≥ 0), and says so::

    >>> from simddp.inputs.link import Link
    >>> line = closed_form_law(Link("eth", 40e-6, 11.0), 2)
    >>> line.segments[0][2:], line.note                   # (α s, β s/byte) and nothing to say
    ((4e-05, 9.090909090909091e-11), '')

A curve sampled from that line at 1, 10 and 100 MB reads back close to it::

    >>> curved = Link("c", 40e-6, 11.0, curves=[{"kind": "all_reduce", "ranks": 2,
    ...     "bytes": [10**6, 10**7, 10**8], "seconds": [130.9e-6, 949.1e-6, 9.131e-3]}])
    >>> fit = closed_form_law(curved, 2)
    >>> round(fit.alpha_s * 1e6, 1), round(fit.busbw_gbps, 2)
    (47.2, 10.85)
    >>> fit.note
    "α–β fitted to the link's all_reduce curve over 1–100 MB: α 47.2 µs, busbw 10.9 GB/s"
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simddp.cost.factors import ALL_REDUCE, GB, bus_factor
from simddp.cost.single import collective_s, pick_curves

BUCKET_RANGE_BYTES = (1e6, 1e8)   # 1 MB (DDP's first bucket, 1 MiB) to 100 MB (4× its cap)
_POINTS = 41                      # 20 a decade: the curve's kinks between its points show


@dataclass(frozen=True)
class ClosedFormLaw:
    """The lines a closed form reads: ``segments`` (lowest bytes, highest bytes, α seconds,
    β seconds per byte at these ranks), ``note`` saying where a fitted one came from ('' for
    the link's own α–β), and that line's ``alpha_s`` and ``busbw_gbps`` (its first segment's)."""

    segments: tuple[tuple[float, float, float, float], ...]
    alpha_s: float
    busbw_gbps: float
    note: str = ""


def _beta(busbw_gbps: float, world_size: int) -> float:
    return bus_factor(world_size) / (busbw_gbps * GB)


def closed_form_law(link, world_size: int) -> ClosedFormLaw:
    """The all-reduce line(s) for a closed form on ``link`` at ``world_size`` ranks."""
    if link.curves and pick_curves(link, ALL_REDUCE, world_size):
        alpha_s, beta = fit_line(link, world_size)
        busbw = bus_factor(world_size) / (beta * GB)
        lo, hi = BUCKET_RANGE_BYTES
        note = (f"α–β fitted to the link's all_reduce curve over {lo / 1e6:g}–{hi / 1e6:g} MB: "
                f"α {alpha_s * 1e6:.3g} µs, busbw {busbw:.3g} GB/s")
        return ClosedFormLaw(((0.0, math.inf, alpha_s, beta),), alpha_s, busbw, note)
    if not link.pieces:
        return ClosedFormLaw(((0.0, math.inf, link.alpha_s, _beta(link.busbw_gbps, world_size)),),
                             link.alpha_s, link.busbw_gbps)
    out, lo = [], 0.0
    for p in link.pieces:
        hi = math.inf if p.up_to_bytes is None else p.up_to_bytes
        out.append((lo, hi, p.alpha_s, _beta(p.busbw_gbps, world_size)))
        lo = hi
    return ClosedFormLaw(tuple(out), link.alpha_s, link.busbw_gbps)


def fit_line(link, world_size: int, lo_bytes: float = BUCKET_RANGE_BYTES[0],
             hi_bytes: float = BUCKET_RANGE_BYTES[1], kind: str = ALL_REDUCE
             ) -> tuple[float, float]:
    """(α seconds, β seconds per byte) of the ``kind`` law on ``link`` over
    [lo_bytes, hi_bytes]: least squares on relative error at log-spaced sizes, α ≥ 0."""
    step = math.log(hi_bytes / lo_bytes) / (_POINTS - 1)
    sizes = [lo_bytes * math.exp(i * step) for i in range(_POINTS)]
    return relative_line(sizes, [collective_s(link, kind, n, world_size) for n in sizes])


def relative_line(sizes, times) -> tuple[float, float]:
    """(α, β) of the line α + β·n minimising Σ ((α + β·n − t)/t)²; where α would be negative
    (or β not positive), the line through the origin (or, flat, α alone)::

        >>> a, b = relative_line([1e6, 1e7], [1.1e-4, 5.1e-4])
        >>> round(a * 1e6, 1), round(1 / b / 1e9, 2)          # α µs, bytes per ns
        (65.6, 22.5)
    """
    a11 = sum(1 / t ** 2 for t in times)
    a12 = sum(n / t ** 2 for n, t in zip(sizes, times))
    a22 = sum((n / t) ** 2 for n, t in zip(sizes, times))
    b1 = sum(1 / t for t in times)
    b2 = sum(n / t for n, t in zip(sizes, times))
    det = a11 * a22 - a12 * a12
    alpha_s, beta = (a22 * b1 - a12 * b2) / det, (a11 * b2 - a12 * b1) / det
    if alpha_s < 0 or beta <= 0:   # a line through the origin instead (or flat: α alone)
        alpha_s, beta = (0.0, b2 / a22) if b2 > 0 else (b1 / a11, 0.0)
    return alpha_s, max(beta, 1e-30)
