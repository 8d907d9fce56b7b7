"""The parent's side of a calibration: each rank's raw timings combined into one number.

A step ends when its slowest rank ends: each rank's median, then the max over ranks, except
what a step adds up call by call (the waited-for chain's α, the wake after compute), which
are means over repeats of the slowest rank. No torch (docs/CALIBRATE.md, Method).
"""
from __future__ import annotations

import numpy as np

from calibrate.rig.chain_first import calls_after_first, slowest_calls, wake_mean_s
from calibrate.rig.shaped_chain import blocking_alpha_s, chain_refill_share
from calibrate.spreads import factors, spread
from simddp.cost import bytes_s as law_bytes_s
from simddp.cost.factors import ALL_REDUCE, GB


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
    """(p5, p95) over the median of an all-reduce's time: each iteration's slowest rank,
    medianed over the bandwidth-bound sizes (≥ 2α); None without per-iteration times
    (docs/CALIBRATE.md, The spread).

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
                     world_size: int, burst_bytes: float | None = None) -> dict:
    """The sequence step's totals and both αs: the queued chain's from each rank's median,
    the waited-for chain's from the **mean** over repeats of the slowest rank, since a step's
    N waited-for calls add up to N mean calls (docs/FINDINGS.md#blocking-alpha). With the
    first call timed apart, ``idle_wake_s`` is what it paid over its law; ``burst_bytes``: a
    shaped link's bucket, which serves part of the chain (calibrate/rig/shaped_chain.py).

    >>> r = combine_sequence([{"blocking_s": [0.05], "async_s": [0.03]}], [10 ** 6] * 10, 1.0, 2)
    >>> round(r["blocking_alpha_s"], 6), round(r["alpha_s"], 6)    # 10 x 1 ms of bandwidth
    (0.004, 0.002)
    >>> r = combine_sequence([{"blocking_s": [0.053], "blocking_first_s": [0.008],
    ...                        "async_s": [0.03]}], [10 ** 6] * 10, 1.0, 2)
    >>> round(r["blocking_alpha_s"], 6), round(r["idle_wake_s"], 6)   # 9 calls of 5 ms each
    (0.004, 0.003)
    """
    bytes_s = [law_bytes_s(ALL_REDUCE, n, world_size, busbw_gbps) for n in sizes_bytes]
    burst_s = None if burst_bytes is None else burst_bytes / (busbw_gbps * GB)
    out = {"count": len(sizes_bytes), "bytes": int(sum(sizes_bytes)),
           "repeats": len(per_rank[0]["async_s"]), "bandwidth_s": sum(bytes_s)}
    after_first = calls_after_first(per_rank, len(bytes_s))
    split = after_first is not None
    chain = bytes_s[1:] if split else bytes_s   # the calls after the first, where timed
    series = {"blocking": after_first if split else [r["blocking_s"] for r in per_rank],
              "async": [r["async_s"] for r in per_rank]}
    slowest = _slowest_totals(series)
    share = _clocked_calls(per_rank, slowest["blocking"], chain, burst_s, out)
    laws = {"blocking": lambda total_s: blocking_alpha_s(total_s, chain, burst_s, share),
            "async": lambda total_s: blocking_alpha_s(total_s, bytes_s, None)}   # every byte
    # Each repeat's α is kept: they spread widely within one run, and the spread widens the
    # prediction ranges (docs/FINDINGS.md#bandwidth-from-the-large-sizes).
    _blocking_alpha(per_rank, slowest["blocking"], laws["blocking"], out)
    _queued_alpha(series["async"], slowest["async"], laws["async"], out)
    if "blocking_call_median_s" in out and burst_s is not None:   # calls clocked, shaped
        out["blocking_refill_s"] = share * out["blocking_alpha_s"]
    if split:
        _first_call(per_rank, bytes_s[0], burst_s, out)
    # The chain's bytes that the bucket left to the link at that α (on a wire, all of them)
    out["blocking_bytes_s"] = (out["bandwidth_s"] if burst_s is None else
                               out["blocking_s"] - len(bytes_s) * out["blocking_alpha_s"]
                               - out.get("idle_wake_s", 0.0))
    return out


def _slowest_totals(series: dict[str, list]) -> dict[str, np.ndarray]:
    """Per pattern, each repeat's total on its slowest rank (over the repeats every rank ran)."""
    slowest = {}
    for pattern, totals in series.items():
        repeats = min(len(t) for t in totals)
        slowest[pattern] = np.max([t[:repeats] for t in totals], axis=0)
    return slowest


def _clocked_calls(per_rank: list[dict], slowest_blocking: np.ndarray, chain: list[float],
                   burst_s: float | None, out: dict) -> float:
    """The clocked calls' median and mean into ``out``; returns the share of α that refills
    a shaped link's bucket (1.0 unless measured)."""
    calls = slowest_calls(per_rank)
    if calls is None:
        return 1.0
    out["blocking_call_median_s"] = float(np.median(calls))
    out["blocking_call_mean_s"] = float(np.mean(calls))
    if burst_s is None:
        return 1.0
    return chain_refill_share(float(np.mean(slowest_blocking)), chain, burst_s, calls)


def _blocking_alpha(per_rank: list[dict], slowest: np.ndarray, law, out: dict) -> None:
    """The waited-for chain's α from the mean slowest-rank total; per repeat and spread."""
    per_repeat = np.array([law(float(t)) for t in slowest])
    out["blocking_alpha_per_repeat_s"] = per_repeat.tolist()
    totals = [r["blocking_s"][:len(per_repeat)] for r in per_rank]
    out["blocking_s"] = float(np.mean(np.max(totals, axis=0)))
    out["blocking_alpha_s"] = center = law(float(np.mean(slowest)))
    out["blocking_alpha_spread"] = spread(per_repeat, center=center)


def _queued_alpha(totals: list[list[float]], slowest: np.ndarray, law, out: dict) -> None:
    """The queued chain's α from each rank's median total; per repeat and spread."""
    per_repeat = np.array([law(float(t)) for t in slowest])
    out["alpha_per_repeat_s"] = per_repeat.tolist()
    out["async_s"] = max(float(np.median(t)) for t in totals)
    out["alpha_s"] = law(out["async_s"])
    out["alpha_spread"] = spread(per_repeat, center=None)


def _first_call(per_rank: list[dict], first_bytes_s: float, burst_s: float | None,
                out: dict) -> None:
    """The first call after compute, over its law (a full bucket, if shaped): the wake."""
    first_s = wake_mean_s([r["blocking_first_s"] for r in per_rank])
    law_s = out["blocking_alpha_s"] + max(0.0, first_bytes_s - (burst_s or 0.0))
    out["blocking_first_s"] = first_s
    out["idle_wake_s"] = max(0.0, first_s - law_s)


# Sizes whose lone time is mostly α, on Gloo as on NCCL.
SMALL_BYTES = 64 * 1024


def small_message_alpha(rows: list[dict], busbw_gbps: float, world_size: int,
                        kind: str = ALL_REDUCE) -> dict | None:
    """α of a collective a step overlaps: the median over the sizes up to :data:`SMALL_BYTES`
    of (time − bytes term), a lone call's cost, not a queue's total / N
    (docs/FINDINGS.md#small-collective-queues). ``spread``: (min, max) over that median;
    None when no size is that small.

    >>> rows = [{"size_bytes": n, "time_s": t} for n, t in
    ...         ((1024, 400e-6), (4096, 380e-6), (65536, 480e-6), (2 ** 20, 1.3e-3))]
    >>> a = small_message_alpha(rows, 1.0, 2)     # 1 GB/s: 1 KiB's bytes take ~1 µs
    >>> round(a["alpha_s"] * 1e6), a["sizes"], a["spread"]
    (399, 3, (0.942172, 1.038819))
    """
    per_size = [r["time_s"] - law_bytes_s(kind, r["size_bytes"], world_size, busbw_gbps)
                for r in rows if r["size_bytes"] <= SMALL_BYTES]
    if not per_size:
        return None
    alpha_s = max(0.0, float(np.median(per_size)))
    if alpha_s <= 0:
        return {"alpha_s": 0.0, "sizes": len(per_size), "spread": None}
    low, high = min(per_size) / alpha_s, max(per_size) / alpha_s
    return {"alpha_s": alpha_s, "sizes": len(per_size),
            "spread": factors(low, high)}


def combine_kind_sequence(per_rank: list[dict], kind: str, busbw_gbps: float,
                          world_size: int) -> dict:
    """:func:`combine_sequence` for a reduce-scatter or all-gather: the queued α and, where
    timed, the blocking α of the calls after the first. Every byte is taken out, shaped link
    or not, since the kind's busbw was fitted with the bucket inside.

    >>> seq = {"kinds": {"all_gather": {"async_s": [0.03], "sizes_bytes": [10 ** 6] * 10,
    ...                                 "blocking_s": [0.04], "blocking_first_s": [0.004]}}}
    >>> r = combine_kind_sequence([seq], "all_gather", 1.0, 2)      # bytes 0.5 ms a call
    >>> round(r["alpha_s"], 6), round(r["blocking_alpha_s"], 6)     # 9 calls of 4 ms each
    (0.0025, 0.0035)
    """
    runs = [r["kinds"][kind] for r in per_rank]
    sizes = runs[0]["sizes_bytes"]
    bytes_s = [law_bytes_s(kind, n, world_size, busbw_gbps) for n in sizes]
    out = {"count": len(sizes), "bytes": int(sum(sizes)), "repeats": len(runs[0]["async_s"]),
           "bandwidth_s": sum(bytes_s),
           "async_s": max(float(np.median(r["async_s"])) for r in runs)}
    out["alpha_s"] = max(0.0, (out["async_s"] - out["bandwidth_s"]) / len(sizes))
    after_first = calls_after_first(runs, len(sizes))
    if after_first is not None:
        out["blocking_s"] = max(float(np.median(t)) for t in after_first)   # calls 2..N
        out["blocking_alpha_s"] = blocking_alpha_s(out["blocking_s"], bytes_s[1:], None)
    return out


def overlapped_alpha(seq: dict, rows: list[dict], busbw_gbps: float, world_size: int,
                      kind: str = ALL_REDUCE, sampled: dict | None = None) -> None:
    """Set ``seq``'s α to a small collective's lone α: ``sampled`` across the sequence step
    if given, else the sweep's small sizes capped at the queue's total / N (kept as
    ``queued_alpha_s``); without either the queue's α stays (docs/FINDINGS.md#lone-alpha)."""
    small = small_message_alpha(rows, busbw_gbps, world_size, kind)
    seq["queued_alpha_s"], seq["queued_alpha_spread"] = seq["alpha_s"], seq.get("alpha_spread")
    if sampled is not None:   # sampled in every repeat: no one slow stretch decides it
        seq["alpha_s"], seq["alpha_spread"] = sampled["alpha_s"], sampled["spread"]
        seq["alpha_interval_s"] = sampled["interval_s"]
        seq["alpha_from"] = (f"{sampled['sizes']} lone 4 KiB all-reduces sampled across the "
                             "sequence step")
        if "modes" in sampled:   # their median was unresolved: calibrate/rig/lone_alpha.py
            seq["alpha_modes"], seq["median_alpha_s"] = sampled["modes"], sampled["median_alpha_s"]
            seq["alpha_from"] += ", their fast mode (the median between two modes)"
        seq["sweep_small_alpha_s"] = small["alpha_s"] if small is not None else None
        seq["lone_samples_s"] = sampled["samples_s"]   # the slower rank's, for a second look
        # Not capped: the sampled median has its own guard, and the cap made every overlapped
        # row fast (docs/FINDINGS.md#lone-alpha).
        return
    if small is None:
        seq["alpha_from"] = f"{seq['count']} queued after compute"
        return
    seq["alpha_s"], seq["alpha_spread"] = small["alpha_s"], small["spread"]
    seq["alpha_from"] = f"{small['sizes']} lone sizes up to {SMALL_BYTES // 1024} KiB"
    # The sweep's small sizes are one stretch with no interval: a lone α above the queue's
    # total / N was a slow stretch (docs/FINDINGS.md#lone-alpha); a queue's α of 0 (its bytes
    # term exceeded its time) is no measurement, so nothing is capped then.
    if seq["queued_alpha_s"] <= 0:
        seq["alpha_from"] += ", not capped (the queue's α is not resolved above its bytes)"
    elif seq["alpha_s"] > seq["queued_alpha_s"]:
        seq["lone_above_queue_s"] = seq["alpha_s"]
        seq["alpha_from"] += (f", {seq['alpha_s'] * 1e6:.0f} µs, above the queue's "
                              f"{seq['queued_alpha_s'] * 1e6:.0f} µs: capped at it (a slow "
                              "stretch while the lone ones ran; calibrate again to check)")
        seq["alpha_s"], seq["alpha_spread"] = seq["queued_alpha_s"], seq["queued_alpha_spread"]
