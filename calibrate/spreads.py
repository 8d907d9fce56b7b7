"""How far a calibration's numbers spread, as the link's ``time_spread`` takes it: (low,
high) factors over the value the link keeps, from repeats, sizes or an interval. numpy only.
"""
from __future__ import annotations

import numpy as np


def spread(values, center: float | None = None) -> tuple[float, float] | None:
    """(p5, p95) of ``values`` over their median (or ``center``, the value the link keeps),
    as :func:`factors`; None for fewer than 3 values or a center of 0.

    >>> spread([1.0, 1.0, 2.0, 0.5, 1.0]), spread([1.0, 1.0, 2.0, 0.5, 1.0], center=1.1)
    ((0.6, 1.8), (0.545455, 1.636364))
    """
    v = np.asarray(values, dtype=float)
    median = float(np.median(v)) if v.size else 0.0
    center = median if center is None else center
    if v.size < 3 or center <= 0:
        return None
    low, high = (float(np.percentile(v, q)) / center for q in (5, 95))
    return factors(low, high)


def factors(low: float, high: float) -> tuple[float, float]:
    """(low, high) as a valid ``Link.time_spread``: 0.01 ≤ low ≤ 1 ≤ high, 6 places."""
    return round(max(0.01, min(1.0, low)), 6), round(max(1.0, high), 6)


def widen(a: tuple[float, float] | None, b: tuple[float, float] | None
          ) -> tuple[float, float] | None:
    """The spread covering both: the lower low and the higher high.

    >>> widen((0.9, 1.1), (0.5, 1.05)), widen(None, (0.9, 1.2)), widen(None, None)
    ((0.5, 1.1), (0.9, 1.2), None)
    """
    if a is None or b is None:
        return a or b
    return min(a[0], b[0]), max(a[1], b[1])


def alpha_uncertainty(seq: dict) -> tuple[float, float] | None:
    """How far the overlapped α itself may be off, over the α: the sampled median's bootstrap
    p5–p95 (``alpha_interval_s``), else the spread the α came with (``alpha_spread``). Not the
    samples' own spread: a step's many collectives see α's typical value, not one call's
    (docs/FINDINGS.md#lone-alpha).

    >>> alpha_uncertainty({"alpha_s": 5e-4, "alpha_interval_s": [4e-4, 6e-4],
    ...                    "alpha_spread": [0.5, 5.0]})
    (0.8, 1.2)
    >>> alpha_uncertainty({"alpha_s": 5e-4, "alpha_spread": (0.9, 1.3)})
    (0.9, 1.3)

    A low end clamped at 0 (samples under their bytes term, in a short run) keeps the 0.01
    floor of :func:`factors`:

    >>> alpha_uncertainty({"alpha_s": 5e-5, "alpha_interval_s": [0.0, 1.35e-3]})
    (0.01, 27.0)
    """
    interval, alpha_s = seq.get("alpha_interval_s"), seq.get("alpha_s") or 0.0
    if interval is None or alpha_s <= 0:
        return seq.get("alpha_spread")
    return factors(interval[0] / alpha_s, interval[1] / alpha_s)
