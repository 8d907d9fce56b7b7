"""Contention: how much compute and communication slow each other, and how sure that is.

A backward and an all-reduce in flight share the memory bus and the CPU threads (Gloo) or the
SMs (NCCL), so each runs slower than alone (docs/FINDINGS.md, "Contention").
:class:`Contention` holds the two factors, their measured spread and where they come from;
:func:`simddp.predict.resolve.resolve` decides once which one a prediction runs under::

    >>> c = Contention(1.5, 2.0, spread=((1.2, 1.5), (1.8, 2.4)), source="model")
    >>> c.measured, c.ends()[1].factors            # the high end of its measured spread
    (True, (1.8, 2.4))
    >>> published_gpu().factors                    # where nothing measured it, on a GPU
    (1.189, 2.22)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simddp.errors import InputError

SOURCES = ("", "link", "model", "published", "given")
MEASURED_SOURCES = ("link", "model")


# Published GPU contention, for compute on a GPU nobody measured
# (docs/FINDINGS.md#gpu-contention-under-overlap). Compute slows 18.9 % on average and 40 % at
# most under overlapping NCCL collectives (arXiv 2507.03114).
GPU_COMPUTE_MEAN = 1.189
GPU_COMPUTE_MAX = 1.40
# Overlap realises 21 % of the ideal speedup (arXiv 2412.14335); no paper prints the
# collective's own slowdown, so it is derived (:func:`comm_factor_from_speedup`).
C3_SHARE_OF_IDEAL = 0.21


def comm_factor_from_speedup(compute_factor: float, share_of_ideal: float) -> float:
    """The comm slowdown m that, with compute slowed c, makes equal lone compute and comm
    (serial 2, ideal 1) realise ``share_of_ideal`` of the ideal speedup under the engine's
    model: comm has done c/m when compute ends, so c + 1 − c/m = 2 / (1 + share)::

        >>> round(comm_factor_from_speedup(1.189, 0.21), 2)      # arXiv 2412.14335's 21 %
        2.22
        >>> comm_factor_from_speedup(1.0, 1.0)                   # the ideal: no contention
        1.0
    """
    overlapped = 2.0 / (1.0 + share_of_ideal)
    return compute_factor / (compute_factor + 1.0 - overlapped)


GPU_COMM_MEAN = round(comm_factor_from_speedup(GPU_COMPUTE_MEAN, C3_SHARE_OF_IDEAL), 2)
# (compute, comm) at the point and at the range's high end; one derived comm figure is no
# spread, so the high end keeps it.
PUBLISHED_GPU = (GPU_COMPUTE_MEAN, GPU_COMM_MEAN)
PUBLISHED_GPU_HIGH = (GPU_COMPUTE_MAX, GPU_COMM_MEAN)
PUBLISHED_GPU_SOURCE = ("compute x1.189 mean, x1.40 max while NCCL overlaps it (arXiv "
                        "2507.03114); comm x2.22, from 21 % of the ideal overlap speedup "
                        "(arXiv 2412.14335)")
# What the sweep's "prediction ranges" line says the default comes from.
PUBLISHED_GPU_SHORT = "published GPU figures, arXiv 2507.03114; comm derived from 2412.14335"


def _is_factor(value) -> bool:
    """A slowdown: a finite number >= 1.0 (1.0: none)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 1.0)


def check_factor(owner: str, name: str, value) -> None:
    """One slowdown (a link file's ``compute_slowdown``), else a one-line InputError."""
    if not _is_factor(value):
        raise InputError(f"{owner}: {name} must be >= 1.0, got {value!r}")


def check_factors(owner: str, what: str, value) -> tuple[float, float]:
    """A (compute, comm) pair of slowdowns as a tuple, else a one-line InputError."""
    pair = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if len(pair) != 2 or not all(_is_factor(v) for v in pair):
        raise InputError(f"{owner}: {what} must be two slowdowns >= 1.0 (compute, comm), "
                         f"got {value!r}")
    return pair


def check_spread(owner: str, value) -> tuple[tuple[float, float], tuple[float, float]]:
    """A (low, high) pair of (compute, comm) pairs, each checked by :func:`check_factors`."""
    if not isinstance(value, (list, tuple)) or len(tuple(value)) != 2:
        raise InputError(f"{owner}: contention_spread must be a low and a high (compute, "
                         f"comm) pair, got {value!r}")
    return tuple(check_factors(owner, "contention_spread", pair) for pair in value)


@dataclass(frozen=True)
class Contention:
    """How much each lane slows while the other is busy: compute runs at 1/``compute`` of its
    speed while a collective is in flight, a collective at 1/``comm`` while compute runs.

    spread: the (compute, comm) p10 and p90 over the measurement's repeats and ranks.
    source: "link" (calibrate's generic MLP), "model" (the model's own backward), "published"
    (the GPU figures above), "given" (the user's) or "" (none).
    """

    compute: float = 1.0
    comm: float = 1.0
    spread: tuple[tuple[float, float], tuple[float, float]] | None = None
    source: str = ""

    def __post_init__(self) -> None:
        check_factors("contention", "(compute, comm)", (self.compute, self.comm))
        if self.spread is not None:
            object.__setattr__(self, "spread", check_spread("contention", self.spread))
        if self.source not in SOURCES:
            raise InputError(f"contention: source must be one of {SOURCES}, got {self.source!r}")

    @property
    def active(self) -> bool:
        """Whether either lane slows at all (1.0 and 1.0: the engine's cheap path)."""
        return self.compute != 1.0 or self.comm != 1.0

    @property
    def measured(self) -> bool:
        """Whether a measurement of this job set these factors (published ones are not)."""
        return self.source in MEASURED_SOURCES

    @property
    def factors(self) -> tuple[float, float]:
        return self.compute, self.comm

    def ends(self) -> tuple["Contention", "Contention"] | None:
        """The low and high end of the measured spread, each bracketing the point (a spread
        from fewer repeats can miss it); None without a spread."""
        if self.spread is None:
            return None
        low, high = self.spread
        return (Contention(*(min(a, b) for a, b in zip(low, self.factors)), source=self.source),
                Contention(*(max(a, b) for a, b in zip(high, self.factors)), source=self.source))


def published_gpu() -> Contention:
    """The published GPU contention at the point, its spread none … :data:`PUBLISHED_GPU_HIGH`."""
    return Contention(*PUBLISHED_GPU, spread=((1.0, 1.0), PUBLISHED_GPU_HIGH),
                      source="published")
