"""DDP communication hooks as data: what a hook puts on the wire and what it computes.

torch DDP hands every bucket to its comm hook (``model.register_comm_hook(state, hook)``), and
the hook decides what travels. simddp plans three of torch's, for a bucket of N fp32 gradient
bytes (``Collective.wire_bytes`` and the three ``*_work_bytes``, docs/FORMATS.md)::

    >>> parse_comm_hook("powersgd:2")
    CommHook(kind='powersgd', rank=2, start_iter=1000)
    >>> hook_cost(parse_comm_hook("fp16"), [4 * 2**20]).wire_bytes    # a 4 MiB bucket
    (2097152,)

- ``fp16`` / ``bf16``: cast the bucket to 16 bits, all-reduce N/2 bytes, copy it back.
- ``powersgd:R``: gradients worth compressing (torch's ``min_compression_rate`` 2) go as
  P = M·Q and Q = Mᵀ·P, the rest uncompressed: three all-reduces per bucket, one after the
  other. A plan is the step after torch's ``start_powerSGD_iter``.

A profile holds bytes, not shapes, so PowerSGD takes each gradient as a square matrix; P and
Q are so much smaller than M that the shape moves the wire bytes by little. The compute, in
bytes of gradient memory passed over, is timed at the host's copy rate (free on presets).
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from simddp.errors import InputError

HOOKS = ("fp16", "bf16", "powersgd")
HOOK_HELP = "fp16, bf16 or powersgd:R (R >= 1; powersgd:R:S starts at step S >= 2)"
GRAD_ELEM_BYTES = 4           # profiles hold fp32 gradients
PSGD_MIN_COMPRESSION = 2      # torch's PowerSGDState.min_compression_rate
PSGD_START_ITER = 1000        # torch's PowerSGDState.start_powerSGD_iter
PSGD_MIN_START = 2            # torch refuses less with error feedback or warm start (both on)


@dataclass(frozen=True)
class CommHook:
    """One comm hook: ``kind`` fp16, bf16 or powersgd; PowerSGD's ``rank`` and ``start_iter``."""

    kind: str
    rank: int = 0
    start_iter: int | None = None   # powersgd: torch's default 1000; others: 0

    def __post_init__(self) -> None:
        if self.kind not in HOOKS:
            raise InputError(f"--comm-hook: unknown {self.kind!r}; choose {HOOK_HELP}")
        if self.start_iter is None:
            object.__setattr__(self, "start_iter",
                               PSGD_START_ITER if self.kind == "powersgd" else 0)
        if self.kind == "powersgd":
            for what, value, low in (("rank", self.rank, 1),
                                     ("start step", self.start_iter, PSGD_MIN_START)):
                if isinstance(value, bool) or not isinstance(value, int) or value < low:
                    raise InputError(f"--comm-hook: powersgd {what} must be an integer >= {low}, "
                                     f"got {value!r}")
        elif self.rank or self.start_iter:
            raise InputError(f"--comm-hook: {self.kind} takes no rank or start step")

    @property
    def name(self) -> str:
        """As typed: 'fp16', 'powersgd:2', or 'powersgd:2:10' for a non-default start."""
        if self.kind != "powersgd":
            return self.kind
        start = "" if self.start_iter == PSGD_START_ITER else f":{self.start_iter}"
        return f"powersgd:{self.rank}{start}"


def parse_comm_hook(text: str) -> CommHook:
    """'fp16', 'bf16', 'powersgd:R' or 'powersgd:R:S' -> CommHook; one-line InputError else."""
    m = re.fullmatch(r"powersgd:([^:]*)(?::(.*))?", text.strip())
    if m is None:
        return CommHook(text.strip())
    try:
        rank, start = int(m.group(1)), None if m.group(2) is None else int(m.group(2))
    except ValueError:
        raise InputError(f"--comm-hook: {text!r}: powersgd takes an integer rank >= 1 "
                         "(e.g. powersgd:2)") from None
    return CommHook("powersgd", rank, start)


@dataclass(frozen=True)
class HookCost:
    """What a hook does with one bucket: bytes of each call on the wire, in order, and bytes
    of gradient memory it passes over before launch, between calls and after completion."""

    wire_bytes: tuple[int, ...]
    pre_work_bytes: int = 0
    mid_work_bytes: int = 0
    post_work_bytes: int = 0


def matrix_view(numel: int) -> tuple[int, int]:
    """(n, m) of a gradient of ``numel`` elements taken as a square matrix.

    >>> matrix_view(1024 * 1024), matrix_view(10)
    ((1024, 1024), (3, 4))
    """
    n = max(1, math.isqrt(numel))
    return n, -(-numel // n)


def powersgd_split(rank: int, tensor_bytes: Sequence[int]) -> tuple[int, int, int, int]:
    """(uncompressed bytes, compressed bytes, P bytes, Q bytes) of one bucket."""
    unc = comp = p_bytes = q_bytes = 0
    for nbytes in tensor_bytes:
        n, m = matrix_view(nbytes // GRAD_ELEM_BYTES)
        r = min(n, m, rank)
        if (n + m) * r * PSGD_MIN_COMPRESSION < n * m:
            comp += nbytes
            p_bytes += n * r * GRAD_ELEM_BYTES
            q_bytes += m * r * GRAD_ELEM_BYTES
        else:
            unc += nbytes
    return unc, comp, p_bytes, q_bytes


def hook_cost(hook: CommHook, tensor_bytes: Sequence[int]) -> HookCost:
    """The wire calls and compute of ``hook`` on one bucket of these fp32 gradients."""
    n_bytes = sum(tensor_bytes)
    if hook.kind in ("fp16", "bf16"):
        # cast + 1/p into a 16-bit copy (one pass), all-reduce it, copy back (one pass)
        return HookCost((n_bytes // 2,), n_bytes, 0, n_bytes)
    unc, comp, p_bytes, q_bytes = powersgd_split(hook.rank, tensor_bytes)
    # before: error feedback add (N), copy for the next error (N), P = M·Q (C)
    # between P and Q: unpack the uncompressed (U), orthogonalise P (R passes over P), Q = Mᵀ·P (C)
    # after: M = P·Qᵀ (C), error = copy − M (N)
    return HookCost((unc, p_bytes, q_bytes), 2 * n_bytes + comp,
                    unc + hook.rank * p_bytes + comp, comp + n_bytes)


def hook_memory_bytes(hook: CommHook, buckets: Sequence[tuple[int, HookCost]]) -> dict[str, int]:
    """Extra device bytes ``hook`` holds, from each bucket's (fp32 bytes, :func:`hook_cost`):
    fp16/bf16 at most half the gradients in 16-bit copies; PowerSGD its error-feedback buffer
    (fp32 of every bucket), P and Q (warm start), and the largest bucket's copy.
    """
    if hook.kind in ("fp16", "bf16"):
        return {"16_bit_copies": sum(sum(cost.wire_bytes) for _, cost in buckets)}
    return {"error_feedback": sum(n for n, _ in buckets),
            "p_and_q": sum(sum(cost.wire_bytes[1:]) for _, cost in buckets),
            "bucket_copy": max((n for n, _ in buckets), default=0)}
