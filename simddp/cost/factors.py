"""Bytes each rank sends per byte of a collective: nccl-tests' bus factors.

A ring all-reduce of n bytes over p ranks sends 2(p−1)/p·n per rank; a reduce-scatter, an
all-gather or an all-to-all of n bytes (the full, unsharded size, as nccl-tests counts it)
half that. nccl-tests defines ``busbw = algbw · factor`` so that busbw, not algbw, is what
stays put when p changes::

    >>> bus_factor(2), bus_factor(8), kind_factor("all_gather", 4)
    (1.0, 1.75, 0.75)
"""
from __future__ import annotations

from simddp.kinds import CollectiveKind

GB = 1e9  # nccl-tests' GB/s are 1e9 bytes per second
ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL = CollectiveKind    # simddp/kinds.py
COLLECTIVE_KINDS = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL)


def bus_factor(world_size: int) -> float:
    """Bytes each rank sends per byte all-reduced by a ring, 2(p−1)/p: nccl-tests' busbw
    factor, so ``busbw = algbw · bus_factor(p)``.

    >>> bus_factor(2), bus_factor(8)
    (1.0, 1.75)
    """
    return 2 * (world_size - 1) / world_size


def kind_factor(kind: str, world_size: int) -> float:
    """Bytes each rank sends per byte of a ``kind`` collective: 2(p−1)/p for an all-reduce,
    (p−1)/p for a reduce-scatter, an all-gather or an all-to-all (half of it: an all-reduce is
    a reduce-scatter and an all-gather).

    >>> kind_factor(ALL_REDUCE, 4), kind_factor(ALL_GATHER, 4)
    (1.5, 0.75)
    """
    if kind == ALL_REDUCE:
        return bus_factor(world_size)
    if kind in (REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL):
        return (world_size - 1) / world_size
    raise ValueError(f"unknown collective kind {kind!r}; expected {', '.join(COLLECTIVE_KINDS)}")
