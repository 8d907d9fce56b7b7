"""The blocking α of a shaped link: what a chain of waited-for all-reduces pays its bucket.

On realrun's emulated link tbf serves ``burst`` bytes at memory speed and refills during each
call's hand-off, and simddp charges a chain that way (simddp.rig.gloo_shared_cpu.TokenBucket);
subtracting every byte at busbw charged the bucket twice (docs/FINDINGS.md#token-bucket). So α
is solved so that the chain, as simddp charges it, takes the measured total::

    >>> bucket = 1e-3                        # 1 ms of the link's busbw
    >>> round(chain_s(5e-4, [2e-4] * 4, bucket) * 1e3, 6)   # each 0.2 ms of bytes: free
    2.0
    >>> round(blocking_alpha_s(2e-3, [2e-4] * 4, bucket) * 1e6)   # so all 2 ms is α
    500
    >>> round(blocking_alpha_s(2e-3, [2e-4] * 4, None) * 1e6)     # a wire: 0.2 ms of bytes each
    300
"""
from __future__ import annotations

import numpy as np

from simddp.rig.gloo_shared_cpu import TokenBucket
from simddp.cost.factors import GB, bus_factor


def chain_s(alpha_s: float, bytes_s: list[float], burst_s: float,
            refill_s: float | None = None) -> float:
    """Seconds of a waited-for chain as simddp charges it: each call α plus the bytes (seconds
    at busbw) the bucket does not serve; full at the start, refilled by ``refill_s`` (None: α)
    at each hand-off."""
    refill_s = alpha_s if refill_s is None else refill_s
    bucket = TokenBucket(burst_s, [refill_s] * len(bytes_s), list(bytes_s))
    now_s = 0.0
    for i, b in enumerate(bytes_s):
        now_s += alpha_s + b - bucket.unshaped_s(i, now_s)
        bucket.done(now_s)
    return now_s


def blocking_alpha_s(total_s: float, bytes_s: list[float], burst_s: float | None,
                     refill_share: float = 1.0) -> float:
    """The α per call that makes the chain take ``total_s`` (0.0 if even α = 0 takes longer);
    ``burst_s``: the bucket in seconds of busbw, None for a wire (every byte at busbw);
    ``refill_share``: the share of α the bucket refills by (:func:`chain_refill_share`)."""
    n = len(bytes_s)
    if burst_s is None:
        return max(0.0, (total_s - sum(bytes_s)) / n)

    def over_s(a: float) -> float:
        return chain_s(a, bytes_s, burst_s, a * refill_share) - total_s

    if over_s(0.0) >= 0:
        return 0.0
    # chain_s grows with α, and at α = total/n the α alone takes the total: the root is below.
    high_s = total_s / n
    if over_s(high_s) <= 0:
        return high_s
    # imported here: slow to import, and ranks that import this module never solve
    # (docs/FINDINGS.md#what-a-world-costs-before-its-first-step)
    from scipy.optimize import brentq
    return float(brentq(over_s, 0.0, high_s, xtol=1e-9))


def hand_off_refill_s(calls_s: np.ndarray, alpha_s: float, burst_s: float) -> float:
    """What a waited-for call's hand-off refills the bucket by, on average: each call's share
    of ``alpha_s`` (by its seconds in ``calls_s`` over their mean), capped at the burst, since
    a tick's stall overflows the bucket (docs/FINDINGS.md#token-bucket)::

        >>> calls = np.array([0.4e-3] * 9 + [4.4e-3])      # one call waits a tick
        >>> round(hand_off_refill_s(calls, 0.8e-3, 1e-3) * 1e6)   # 9 × 400 + 1 × 1000 µs
        460
    """
    shares = calls_s / float(np.mean(calls_s))
    return float(np.mean(np.minimum(burst_s, alpha_s * shares)))


def chain_and_whole(chain_total_s: float, whole_s: float, sizes_bytes: list[int],
                    world_size: int, burst_bytes: float | None, busbw_gbps: float,
                    refill_share: float = 1.0) -> tuple[float, float | None]:
    """(blocking α, busbw GB/s or None) from a waited-for chain of ``sizes_bytes`` and one
    all-reduce of them all (``realrun validate``'s probes). On a wire whole = α + b and chain =
    N·α + b; through a bucket, α from the chain at a busbw and busbw from the whole at that α,
    in turn from ``busbw_gbps`` until they settle; hand-offs refill by ``refill_share`` of α::

        >>> alpha, busbw = chain_and_whole(6e-3, 4.5e-3, [10 ** 6] * 4, 2, 500_000, 0.8)
        >>> round(alpha * 1e3, 4), round(busbw, 4)     # a wire's formulas: 0.5 ms, 1.0 GB/s
        (1.0, 1.0)
    """
    n, total = len(sizes_bytes), bus_factor(world_size) * sum(sizes_bytes)
    if burst_bytes is None:
        alpha_s = (chain_total_s - whole_s) / (n - 1)
        bytes_s = whole_s - max(alpha_s, 0.0)
        return alpha_s, (total / bytes_s / GB if bytes_s > 0 else None)
    shaped_bytes = total - burst_bytes   # what the whole sends at busbw
    for _ in range(50):
        s_per_byte = 1 / (busbw_gbps * GB)
        alpha_s = blocking_alpha_s(chain_total_s, [bus_factor(world_size) * b * s_per_byte
                                                   for b in sizes_bytes], burst_bytes * s_per_byte,
                                   refill_share)
        if shaped_bytes <= 0 or whole_s <= alpha_s:
            return alpha_s, None
        previous, busbw_gbps = busbw_gbps, shaped_bytes / (whole_s - alpha_s) / GB
        if abs(busbw_gbps - previous) < 1e-9 * previous:
            break
    return alpha_s, busbw_gbps


def chain_refill_share(total_s: float, bytes_s: list[float], burst_s: float,
                       calls_s: np.ndarray) -> float:
    """The share of the chain's α that its hand-offs refill the bucket by
    (:func:`hand_off_refill_s`), with α solved under that share; a few rounds settle.

    >>> calls = np.array([0.4e-3] * 9 + [4.4e-3])
    >>> round(chain_refill_share(0.01, [0.1e-3] * 10, 1e-3, calls), 4)   # α 1 ms: 9 × 0.5 + 1
    0.55
    """
    share = 1.0
    for _ in range(4):
        alpha_s = blocking_alpha_s(total_s, bytes_s, burst_s, share)
        if alpha_s <= 0:
            return 1.0
        share = hand_off_refill_s(calls_s, alpha_s, burst_s) / alpha_s
    return share

