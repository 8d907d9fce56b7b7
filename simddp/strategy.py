"""Gradient-sync strategies as data: what to group, when it may launch, how many micro-steps.

A strategy is not a class hierarchy: :func:`simddp.plans.plan` reads these fields, and the
simulator and the real wrapper only ever execute the plan::

    >>> s = make_strategy("ddp", bucket_mb=25)
    >>> s.first_bucket_bytes, s.implementation
    (1048576, 'torch')

``bucket_mb`` follows torch's ``bucket_cap_mb``: 1 MB = 2**20 bytes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simddp.errors import InputError
from simddp.host import IMPLEMENTATIONS

MB = 2**20                 # torch's bucket_cap_mb counts MiB
DDP_FIRST_BUCKET_MB = 1.0  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES: "1MB is a reasonable value"
DDP_DEFAULT_BUCKET_MB = 25.0

STRATEGIES = ("naive", "flat", "overlap", "bucketed", "ddp", "no_sync")
BUCKETED = ("bucketed", "ddp", "no_sync")   # strategies whose rows carry a bucket size
# The baseline no_sync is reported against: the same K micro-steps, DDP-synced every time.
ACCUM_BASELINE = "sync_each"


@dataclass(frozen=True)
class Strategy:
    """Which gradients go together (granularity), whether they may launch during backward.

    granularity: "tensor" (one collective per gradient), "all" (one flat collective) or
    "bucket" (torch DDP's size rule with ``first_bucket_bytes`` then ``bucket_bytes``).
    accum_steps: micro-steps per optimizer step; ``sync_last_only`` skips the others' syncs.
    implementation: which DDP implementation runs it, so whose host costs apply
      (:class:`simddp.host.Host`): "torch" (DistributedDataParallel) or "realrun" (realrun.DDP).
    """

    name: str
    granularity: str
    overlap: bool
    bucket_bytes: int | None = None
    first_bucket_bytes: int | None = None
    accum_steps: int = 1
    sync_last_only: bool = False
    implementation: str = "realrun"

    def __post_init__(self) -> None:
        if self.granularity not in ("tensor", "all", "bucket"):
            raise InputError(f"strategy {self.name!r}: granularity must be tensor, all or bucket")
        if self.granularity == "bucket" and not (self.bucket_bytes and self.first_bucket_bytes
                                                 and self.bucket_bytes > 0
                                                 and self.first_bucket_bytes > 0):
            raise InputError(f"strategy {self.name!r}: a bucketed strategy needs bucket sizes > 0")
        if not isinstance(self.accum_steps, int) or self.accum_steps < 1:
            raise InputError(f"--accum-steps must be an integer >= 1, got {self.accum_steps!r}")
        if self.implementation not in IMPLEMENTATIONS:
            raise InputError(f"strategy {self.name!r}: implementation must be one of "
                             f"{', '.join(IMPLEMENTATIONS)}, got {self.implementation!r}")

    @property
    def bucket_mb(self) -> float | None:
        # rounded so 0.1 MB (104857 bytes after truncation) reads back as 0.1, matching files
        return None if self.bucket_bytes is None else round(self.bucket_bytes / MB, 6)


def mb_to_bytes(mb: float, flag: str = "--bucket-mb") -> int:
    if isinstance(mb, bool) or not isinstance(mb, (int, float)) or not math.isfinite(mb) or mb <= 0:
        raise InputError(f"{flag}: {mb!r} is not a number > 0 (MB, e.g. 25)")
    if mb * MB > 2**62:  # beyond any real model; int() of 1e308 would overflow
        raise InputError(f"{flag}: {mb!r} MB is too large")
    return max(1, int(mb * MB))


def make_strategy(name: str, bucket_mb: float = DDP_DEFAULT_BUCKET_MB,
                  accum_steps: int = 1, first_bucket_mb: float | None = None) -> Strategy:
    """The named strategy. ``bucket_mb`` matters for bucketed, ddp, no_sync and sync_each.

    ``no_sync`` and ``sync_each`` always run ``accum_steps`` micro-steps (default 1 elsewhere).
    ``ddp``, ``no_sync`` and ``sync_each`` are torch's DistributedDataParallel (its bucket rule,
    its ``no_sync()``); the others are realrun's wrapper.
    """
    if name in ("naive", "flat", "overlap"):
        gran = {"naive": "tensor", "flat": "all", "overlap": "tensor"}[name]
        return Strategy(name, gran, overlap=(name == "overlap"), accum_steps=accum_steps)
    if name == "bucketed":
        cap = mb_to_bytes(bucket_mb)
        first = cap if first_bucket_mb is None else mb_to_bytes(first_bucket_mb, "--first-bucket-mb")
        return Strategy(name, "bucket", True, cap, first, accum_steps)
    if name in ("ddp", "no_sync", ACCUM_BASELINE):
        first_mb = DDP_FIRST_BUCKET_MB if first_bucket_mb is None else first_bucket_mb
        return Strategy(name, "bucket", True, mb_to_bytes(bucket_mb),
                        mb_to_bytes(first_mb, "--first-bucket-mb"), accum_steps,
                        sync_last_only=(name == "no_sync"), implementation="torch")
    raise InputError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}")
