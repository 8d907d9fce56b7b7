"""torch DDP's bucket rule, implemented once for the simulator and the real wrapper.

Walk gradients in ready order; add a tensor to the current bucket, *then* close the bucket
when its size reaches the limit; limits are ``[first, cap, cap, …]``; a tensor is never
split. This is ``torch.distributed._compute_bucket_assignment_by_size`` with explicit tensor
indices (the rebuilt buckets torch DDP uses from iteration 2 on)::

    >>> assign_buckets([600, 600, 600, 600], limits_bytes=(1000, 1500))
    [[0, 1], [2, 3]]

Buckets come back as lists of positions into ``sizes_bytes``, in launch order.
"""
from __future__ import annotations

from collections.abc import Sequence


def assign_buckets(sizes_bytes: Sequence[int], limits_bytes: Sequence[int]) -> list[list[int]]:
    """Group tensors (given in ready order) into buckets under ``[first, cap, cap, …]`` limits."""
    if not limits_bytes or any(limit <= 0 for limit in limits_bytes):
        raise ValueError(f"bucket limits must be > 0 bytes, got {list(limits_bytes)}")
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for position, size in enumerate(sizes_bytes):
        current.append(position)
        filled += size
        limit = limits_bytes[min(len(buckets), len(limits_bytes) - 1)]
        if filled >= limit:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets
