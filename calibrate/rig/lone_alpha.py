"""The α of overlapped collectives from lone small all-reduces, and whether they decide it.

α is the median of the sequence step's lone 4 KiB all-reduces (each its slowest rank) less
the bytes term. On a shared CPU the samples have two modes, one a 4 ms scheduler tick slower;
where the slow one holds near half, the median jumps between them, so its bootstrap interval
is measured and, where wide, α is the fast mode's (docs/FINDINGS.md#lone-alpha).
"""
from __future__ import annotations

import numpy as np

from calibrate.spreads import spread
from simddp.cost import ALL_REDUCE, bytes_s as law_bytes_s

# Enough that the interval's p95/p5 barely moves between seeds (docs/FINDINGS.md#lone-alpha).
BOOTSTRAP_RESAMPLES = 5000
# In the gap between resolved and unresolved medians' intervals (docs/FINDINGS.md#lone-alpha).
UNRESOLVED_RATIO = 1.6


def sampled_lone_alpha(per_rank: list[dict], busbw_gbps: float, world_size: int
                       ) -> dict | None:
    """α from every rank's lone samples (``lone_s``, ``lone_bytes``); ``spread`` over the
    repeats' medians; ``interval_s`` the median's bootstrap p5 and p95. Where that spans
    ``UNRESOLVED_RATIO``, ``alpha_s`` is the fast mode's, with ``median_alpha_s`` and
    ``modes`` (:func:`two_modes`). None without samples.

    >>> r = {"lone_s": [4e-4, 3e-4, 5e-4, 4e-4] * 3, "lone_bytes": 4096}
    >>> a = sampled_lone_alpha([r, r], 1.0, 2)
    >>> round(a["alpha_s"] * 1e6), a["sizes"], a["spread"]
    (396, 12, (1.0, 1.0))
    >>> [round(t * 1e6) for t in a["interval_s"]]
    [346, 446]
    >>> r = {"lone_s": [6e-4, 3.6e-3] * 10, "lone_bytes": 4096}   # two modes, half each
    >>> a = sampled_lone_alpha([r, r], 1.0, 2)
    >>> round(a["median_alpha_s"] * 1e6), round(a["alpha_s"] * 1e6), a["modes"]["slow_share"]
    (2096, 596, 0.5)
    """
    if not all(r.get("lone_s") for r in per_rank):
        return None
    n = min(len(r["lone_s"]) for r in per_rank)
    slowest = np.max([r["lone_s"][:n] for r in per_rank], axis=0)
    bytes_s = law_bytes_s(ALL_REDUCE, per_rank[0]["lone_bytes"], world_size, busbw_gbps)
    alpha_s = max(0.0, float(np.median(slowest)) - bytes_s)
    repeats = [float(np.median(slowest[i:i + 4])) - bytes_s for i in range(0, n - 3, 4)]
    low, high = (max(0.0, t - bytes_s) for t in median_interval(slowest))
    out = {"alpha_s": alpha_s, "sizes": n, "spread": spread(repeats), "interval_s": [low, high],
           # every sample kept (µs-rounded), for a second look at the modes
           "samples_s": [round(float(t), 6) for t in slowest]}
    if low > 0 and high / low >= UNRESOLVED_RATIO:
        fast, slow = two_modes(slowest)
        out.update(median_alpha_s=alpha_s, alpha_s=max(0.0, float(np.median(fast)) - bytes_s),
                   modes={"fast_s": float(np.median(fast)), "slow_s": float(np.median(slow)),
                          "slow_share": round(len(slow) / n, 3)})
    return out


def two_modes(values) -> tuple[np.ndarray, np.ndarray]:
    """``values`` split in two where the sum of squared log-distances to each side's mean is
    least (two-means in one dimension, exact): (the lower side, the upper side).

    >>> low, high = two_modes([0.6, 0.7, 3.5, 0.5, 3.9])
    >>> low.tolist(), high.tolist()
    ([0.5, 0.6, 0.7], [3.5, 3.9])
    """
    v = np.sort(np.asarray(values, dtype=float))
    x = np.log(v)
    k = np.arange(1, x.size)                       # the lower side's size at each cut
    s, s2 = np.cumsum(x)[:-1], np.cumsum(x * x)[:-1]
    total, total2 = x.sum(), (x * x).sum()
    sse = (s2 - s * s / k) + ((total2 - s2) - (total - s) ** 2 / (x.size - k))
    cut = int(k[np.argmin(sse)])
    return v[:cut], v[cut:]


def median_interval(values, resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """(p5, p95) of the median of ``values`` over bootstrap resamples (fixed seed: the same
    samples give the same interval).

    >>> median_interval([1.0] * 9)
    (1.0, 1.0)
    >>> low, high = median_interval([1.0] * 5 + [4.0] * 5)    # two modes, half each
    >>> low <= 1.0 and high >= 4.0
    True
    """
    v = np.asarray(values, dtype=float)
    medians = np.median(np.random.default_rng(0).choice(v, (resamples, v.size)), axis=1)
    return float(np.percentile(medians, 5)), float(np.percentile(medians, 95))


def alpha_unresolved(seq: dict) -> str | None:
    """One phrase for the report and the link file where the lone samples' median did not
    decide α; None where it did, or α was not sampled.

    >>> print(alpha_unresolved({"alpha_interval_s": [9e-4, 2.1e-3], "alpha_s": 6e-4,
    ...     "median_alpha_s": 1.5e-3, "alpha_modes": {"slow_s": 3.6e-3, "slow_share": 0.48}}))
    α unresolved by the lone all-reduces' median (1500 µs, moving 900-2100 µs between resamples: 48 % of them took a scheduler tick more, ~3600 µs): α is their fast mode's, 600 µs; calibrate again to check
    """
    modes = seq.get("alpha_modes")
    if not modes:
        return None
    low, high = seq["alpha_interval_s"]
    return (f"α unresolved by the lone all-reduces' median ({seq['median_alpha_s'] * 1e6:.0f}"
            f" µs, moving {low * 1e6:.0f}-{high * 1e6:.0f} µs between resamples: "
            f"{modes['slow_share'] * 100:.0f} % of them took a scheduler tick more, "
            f"~{modes['slow_s'] * 1e6:.0f} µs): α is their fast mode's, "
            f"{seq['alpha_s'] * 1e6:.0f} µs; calibrate again to check")
