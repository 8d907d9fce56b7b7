"""A waited-for chain's first call, apart from the others: the wake after compute.

The calls after the first give the blocking α (calibrate/combine.py); the first one's excess
over that law is the wake (``GlooHost.idle_wake_s``); on the CPU each other call is clocked too
(``blocking_calls_s``).
"""
from __future__ import annotations

import numpy as np
from scipy.stats import trim_mean


def calls_after_first(per_rank: list[dict], calls: int) -> list[list[float]] | None:
    """Per rank, each waited-for chain's seconds less its first call's, where every rank timed
    the first call of a chain of more than one; else None.

    >>> calls_after_first([{"blocking_s": [0.05], "blocking_first_s": [0.01]}], 10)
    [[0.04]]
    >>> calls_after_first([{"blocking_s": [0.05]}], 10) is None
    True
    """
    if calls < 2 or not all(r.get("blocking_first_s") and len(r["blocking_first_s"])
                            == len(r["blocking_s"]) for r in per_rank):
        return None
    return [[b - f for b, f in zip(r["blocking_s"], r["blocking_first_s"])] for r in per_rank]


# The share of a first call's samples trimmed at each end before averaging: a rank's first
# repeat can take many times the others (its connections' first use after the sweep).
WAKE_TRIM = 0.1


def wake_mean_s(firsts: list[list[float]]) -> float:
    """The first call's seconds a step pays on average: per repeat its slowest rank, then the
    trimmed mean; not the median, as the samples have two modes a tick apart
    (docs/FINDINGS.md#wake-after-idle).

    >>> round(wake_mean_s([[0.5e-3] * 6 + [3.5e-3] * 3 + [20e-3], [0.4e-3] * 10]) * 1e3, 3)
    1.625
    """
    n = min(len(f) for f in firsts)
    return float(trim_mean(np.max([f[:n] for f in firsts], axis=0), WAKE_TRIM))


def slowest_calls(per_rank: list[dict]) -> np.ndarray | None:
    """Every repeat's calls after the first, each's seconds on its slowest rank, pooled;
    None where a rank did not clock them (CUDA, an older rank).

    >>> slowest_calls([{"blocking_calls_s": [[1.0, 3.0]]}, {"blocking_calls_s": [[2.0, 1.0]]}])
    array([2., 3.])
    """
    if not all(r.get("blocking_calls_s") for r in per_rank):
        return None
    n = min(len(r["blocking_calls_s"]) for r in per_rank)
    return np.max([np.asarray(r["blocking_calls_s"][:n], dtype=float) for r in per_rank],
                  axis=0).ravel()
