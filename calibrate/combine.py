"""The parent's side of a calibration: each rank's raw timings combined into one number.

A step ends when its slowest rank ends, so every combination takes each rank's median and
then the max over ranks. Pure numpy (no torch), so reading a calibration needs no GPU stack.
"""
from __future__ import annotations

import numpy as np

from simddp.link import ALL_REDUCE, GB, bus_factor, kind_factor


def summarize(rank_results: list[dict], kind: str = ALL_REDUCE) -> list[dict]:
    """Per size: median and p95 on each rank, then the max over ranks (the slowest rank).
    ``kind``: the all-reduce sweep (``"sweep"``) or another kind's (``"kinds"``)."""
    sweeps = [r["sweep"] if kind == ALL_REDUCE else r["kinds"][kind] for r in rank_results]
    rows = []
    for i, first in enumerate(sweeps[0]):
        per_rank = [np.asarray(sweep[i]["times_s"]) for sweep in sweeps]
        rows.append({"size_bytes": first["size_bytes"], "count": first["count"],
                     "time_s": max(float(np.median(t)) for t in per_rank),
                     "p95_s": max(float(np.percentile(t, 95)) for t in per_rank),
                     "iters": len(per_rank[0]),
                     "times_s_per_rank": [t.tolist() for t in per_rank]})  # for the JSON
    return rows


def time_spread(rows: list[dict], alpha_s: float) -> tuple[float, float] | None:
    """(p5, p95) over the median of an all-reduce's time, where a step's bytes go: per size,
    each iteration's slowest rank, as ratios to their median; the median of those over the
    sizes whose median is at least 2α (bandwidth-bound; the small sizes' scheduling jitter,
    often 2× here, would dominate otherwise). None without per-iteration times.

    >>> rows = [{"time_s": 0.01, "times_s_per_rank": [[0.009, 0.01, 0.012], [0.01, 0.01, 0.01]]}]
    >>> [round(v, 2) for v in time_spread(rows, 0.001)]
    [1.0, 1.18]
    """
    ratios = []
    big = [r for r in rows if r["time_s"] >= 2 * alpha_s] or rows
    for row in big:
        per_iter = np.max(np.asarray(row.get("times_s_per_rank") or [[]]), axis=0)
        if per_iter.size == 0:
            continue
        median = float(np.median(per_iter))
        ratios.append([float(np.percentile(per_iter, q)) / median for q in (5, 95)])
    if not ratios:
        return None
    low, high = np.median(ratios, axis=0)
    return min(1.0, float(low)), max(1.0, float(high))


def combine_sequence(per_rank: list[dict], sizes_bytes: list[int], busbw_gbps: float,
            world_size: int) -> dict:
    """Parent side: the sequence totals (max over ranks of each rank's median) and both αs.

    >>> r = combine_sequence([{"blocking_s": [0.05], "async_s": [0.03]}], [10 ** 6] * 10, 1.0, 2)
    >>> round(r["blocking_alpha_s"], 6), round(r["alpha_s"], 6)    # 10 x 1 ms of bandwidth
    (0.004, 0.002)
    """
    out = {"count": len(sizes_bytes), "bytes": int(sum(sizes_bytes)),
           "repeats": len(per_rank[0]["async_s"]),
           "bandwidth_s": sum(bus_factor(world_size) * n / (busbw_gbps * GB)
                              for n in sizes_bytes)}
    for pattern, alpha in (("blocking", "blocking_alpha_s"), ("async", "alpha_s")):
        total_s = max(float(np.median(r[f"{pattern}_s"])) for r in per_rank)
        out[f"{pattern}_s"] = total_s
        out[alpha] = max(0.0, (total_s - out["bandwidth_s"]) / len(sizes_bytes))
        # Each repeat's α (its slowest rank): on this box they spread x0.2-x2 around the
        # median within one run, in stretches of seconds (docs/results/
        # 2026-11-24-calibrate-repeatability.md), so the spread is reported and carried
        # into the prediction ranges (analysis.py widens the link's time_spread with it).
        repeats = min(len(r[f"{pattern}_s"]) for r in per_rank)
        slowest = np.max([r[f"{pattern}_s"][:repeats] for r in per_rank], axis=0)
        per_repeat = np.maximum(0.0, (slowest - out["bandwidth_s"]) / len(sizes_bytes))
        out[f"{alpha[:-2]}_per_repeat_s"] = per_repeat.tolist()
        out[f"{alpha[:-2]}_spread"] = spread(per_repeat)
    return out


def spread(values) -> tuple[float, float] | None:
    """(p5, p95) of ``values`` over their median, the low end ≤ 1 ≤ the high end (a floor of
    0.01 keeps it a valid ``Link.time_spread``); None for fewer than 3 values or a median 0.

    >>> spread([1.0, 1.0, 2.0, 0.5, 1.0])
    (0.6, 1.8)
    """
    v = np.asarray(values, dtype=float)
    median = float(np.median(v)) if v.size else 0.0
    if v.size < 3 or median <= 0:
        return None
    low, high = (float(np.percentile(v, q)) / median for q in (5, 95))
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


def combine_kind_sequence(per_rank: list[dict], kind: str, busbw_gbps: float,
                          world_size: int) -> dict:
    """Parent side, for a reduce-scatter or all-gather queued back to back in the sequence
    step (ranks/sequence.py): its total (max over ranks of each rank's median) and α.

    >>> seq = {"kinds": {"all_gather": {"async_s": [0.03], "sizes_bytes": [10 ** 6] * 10}}}
    >>> round(combine_kind_sequence([seq], "all_gather", 1.0, 2)["alpha_s"], 6)   # 10 x 0.5 ms
    0.0025
    """
    runs = [r["kinds"][kind] for r in per_rank]
    sizes = runs[0]["sizes_bytes"]
    out = {"count": len(sizes), "bytes": int(sum(sizes)), "repeats": len(runs[0]["async_s"]),
           "bandwidth_s": sum(kind_factor(kind, world_size) * n / (busbw_gbps * GB)
                              for n in sizes),
           "async_s": max(float(np.median(r["async_s"])) for r in runs)}
    out["alpha_s"] = max(0.0, (out["async_s"] - out["bandwidth_s"]) / len(sizes))
    return out
