"""The parent's side of a calibration: each rank's raw timings combined into one number.

A step ends when its slowest rank ends, so every combination takes each rank's median and
then the max over ranks. Pure numpy (no torch), so reading a calibration needs no GPU stack.
"""
from __future__ import annotations

import numpy as np

from simddp.link import GB, bus_factor

# Fewer compute chunks per collective than this and the contention ratios are coarse.
MIN_CHUNKS = 10


def summarize(rank_results: list[dict]) -> list[dict]:
    """Per size: median and p95 on each rank, then the max over ranks (the slowest rank)."""
    rows = []
    for i, first in enumerate(rank_results[0]["sweep"]):
        per_rank = [np.asarray(r["sweep"][i]["times_s"]) for r in rank_results]
        rows.append({"size_bytes": first["size_bytes"], "count": first["count"],
                     "time_s": max(float(np.median(t)) for t in per_rank),
                     "p95_s": max(float(np.percentile(t, 95)) for t in per_rank),
                     "iters": len(per_rank[0]),
                     "times_s_per_rank": [t.tolist() for t in per_rank]})  # for the JSON
    return rows


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
    return out


def combine_contention(per_rank: list[dict]) -> dict:
    """The factors for the link file: ratios of medians per rank, max over ranks, >= 1.0.

    >>> r = {"comm_alone_s": 0.01, "comm_together_s": 0.02, "compute_rate_alone_hz": 3000.0,
    ...      "compute_rate_together_hz": 2000.0, "chunks_together": 40}
    >>> c = combine_contention([r, r]); (c["compute_slowdown"], c["comm_slowdown"], c["clamped"])
    (1.5, 2.0, [])
    """
    compute = max(r["compute_rate_alone_hz"] / r["compute_rate_together_hz"] for r in per_rank)
    comm = max(r["comm_together_s"] / r["comm_alone_s"] for r in per_rank)
    clamped = [name for name, v in (("compute_slowdown", compute), ("comm_slowdown", comm))
               if v < 1.0]
    notes = [f"{name} measured {v:.3f} < 1.0 (noise), clamped to 1.0"
             for name, v in (("compute_slowdown", compute), ("comm_slowdown", comm)) if v < 1.0]
    # The comm time is read at chunk ends, so an all-reduce shorter than a few chunks alone
    # reads late by up to one chunk: its comm_slowdown is an upper bound, not a measurement.
    shortest = min(r["comm_alone_s"] * r["compute_rate_alone_hz"] for r in per_rank)
    if shortest < MIN_CHUNKS:
        notes.append(f"the all-reduce alone lasts only {shortest:.1f} compute chunks "
                     f"(< {MIN_CHUNKS}); factors are coarse: raise --contention-bytes")
    return {"compute_slowdown": max(1.0, compute), "comm_slowdown": max(1.0, comm),
            "compute_slowdown_raw": compute, "comm_slowdown_raw": comm,
            "clamped": clamped, "notes": notes, "per_rank": per_rank}
