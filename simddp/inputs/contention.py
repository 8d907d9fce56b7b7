"""Contention: how much compute and communication slow each other, and how sure that is.

Picture a backward running while an all-reduce is in flight: both share the memory bus and
the CPU threads (Gloo) or the SMs (NCCL), so each runs slower than alone. The engine
(simddp/sim/lanes.py) slows a lane while the other is busy: compute runs at 1/``compute`` of
its speed while a collective is in flight, a collective at 1/``comm`` while compute runs.
:class:`Contention` is the one type that holds those two factors, their measured spread and
where they come from. Files keep it where it was measured: a link file's ``contention``
section (calibrate, a generic MLP), a profile's ``host_costs.contention`` and
``contention_spread`` (the model's own backward: docs/FORMATS.md). Which one a prediction
runs under is decided once, by :func:`simddp.predict.resolve.resolve`::

    >>> c = Contention(1.5, 2.0, spread=((1.2, 1.5), (1.8, 2.4)), source="model")
    >>> c.measured, c.ends()[1].factors            # the high end of its measured spread
    (True, (1.8, 2.4))
    >>> published_gpu().factors                    # where nothing measured it, on a GPU
    (1.189, 2.22)

How measured times become these factors is simddp/inputs/contention_measurement.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simddp.errors import InputError

# Where factors come from: calibrate's generic MLP (a link file), the model's own backward
# (a profile's host_costs), the published GPU figures below (compute on a GPU, nothing
# measured), the user's own (given, not measured), or nothing ("").
SOURCES = ("", "link", "model", "published", "given")
MEASURED_SOURCES = ("link", "model")


# GPU contention from published measurements, for compute on a GPU that nobody measured
# contention for (docs/FINDINGS.md#gpu-contention-under-overlap).
# Compute: while NCCL collectives overlap it, compute slows 18.9 % on average and 40.0 % at
# most (GPT and LLaMA steps on 4 x A100, H100, MI250 and MI210: arXiv 2507.03114). The
# mechanism: NCCL's kernels hold SMs (one CTA per channel), so a layer's kernels take more
# waves (a 132-block GEMM next to a 24-block all-gather on an H100 nearly doubled: NVIDIA
# developer forum, "Compute-Communication Overlap Causes Severe GEMM Performance Degradation
# because of Tail Effect"), and both share memory bandwidth.
GPU_COMPUTE_MEAN = 1.189
GPU_COMPUTE_MAX = 1.40
# Communication: concurrent compute and collectives realise on average 21 % of the ideal
# speedup (serial / max(compute, comm), from isolated times; GEMMs beside NCCL/RCCL
# collectives on MI300X: arXiv 2412.14335). No paper found prints the collective's own
# slowdown, so :func:`comm_factor_from_speedup` derives it from that share under the
# engine's model (simddp/sim/lanes.py) at equal compute and comm and the mean compute factor.
C3_SHARE_OF_IDEAL = 0.21


def comm_factor_from_speedup(compute_factor: float, share_of_ideal: float) -> float:
    """The comm slowdown that, with compute slowed ``compute_factor`` while both run, turns
    equal lone compute and comm (1 and 1: serial 2, ideal 1) into an overlap realising
    ``share_of_ideal`` of the ideal speedup, under the engine's model: both start together,
    compute ends at c, the comm has then done c/m and runs the rest alone, ending at
    c + 1 − c/m = 2 / (1 + share)::

        >>> round(comm_factor_from_speedup(1.189, 0.21), 2)      # arXiv 2412.14335's 21 %
        2.22
        >>> comm_factor_from_speedup(1.0, 1.0)                   # the ideal: no contention
        1.0
    """
    overlapped = 2.0 / (1.0 + share_of_ideal)
    return compute_factor / (compute_factor + 1.0 - overlapped)


GPU_COMM_MEAN = round(comm_factor_from_speedup(GPU_COMPUTE_MEAN, C3_SHARE_OF_IDEAL), 2)
# The published point and the high end of a range for NCCL links without a measurement:
# (compute, comm). The comm side has one derived figure, not a spread: the high end keeps it.
PUBLISHED_GPU = (GPU_COMPUTE_MEAN, GPU_COMM_MEAN)
PUBLISHED_GPU_HIGH = (GPU_COMPUTE_MAX, GPU_COMM_MEAN)
PUBLISHED_GPU_SOURCE = ("compute x1.189 mean, x1.40 max while NCCL overlaps it (arXiv "
                        "2507.03114); comm x2.22, from 21 % of the ideal overlap speedup "
                        "(arXiv 2412.14335)")
# What the sweep's "prediction ranges" line says the default comes from.
PUBLISHED_GPU_SHORT = "published GPU figures, arXiv 2507.03114; comm derived from 2412.14335"


def _is_factor(value) -> bool:
    """A slowdown: a finite number >= 1.0 (1.0: none; below is noise, clamped by calibrate)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 1.0)


def check_factor(owner: str, name: str, value) -> None:
    """One slowdown (a link file's ``compute_slowdown``), else a one-line InputError."""
    if not _is_factor(value):
        raise InputError(f"{owner}: {name} must be >= 1.0, got {value!r}")


def check_factors(owner: str, what: str, value) -> tuple[float, float]:
    """A (compute, comm) pair of slowdowns as a tuple (a host's ``contention``), else a
    one-line InputError naming ``owner`` and ``what``."""
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

    spread: ((compute, comm) low, (compute, comm) high), the p10 and p90 over the repeats
      and ranks of the measurement; None: not measured.
    source: "link" (calibrate, a generic MLP), "model" (the model's own backward against its
      own all-reduces), "published" (the GPU figures below), "given" (the user's own) or ""
      (none: a preset on a CPU, or factors given as 1.0).
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
        """Whether a measurement set these factors (else a range must assume some: the
        published GPU figures are not a measurement of this job)."""
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
