"""Contention: how much compute and communication slow each other, and how sure that is.

Picture a backward running while an all-reduce is in flight: both share the memory bus and
the CPU threads (Gloo) or the SMs (NCCL), so each runs slower than alone. The engine
(simddp/sim/engine.py, through :func:`contention_for` only) slows a lane while the other is
busy: compute runs at 1/``compute`` of its speed while a collective is in flight, a
collective at 1/``comm`` while compute runs. :class:`Contention` is the one type that holds
those two factors, their measured spread and where they come from; the files keep their own
fields (a link's ``compute_slowdown``/``comm_slowdown``, a profile's ``host_costs.contention``
and ``contention_spread``: docs/FORMATS.md), read into it here::

    >>> from simddp.inputs.host import Host
    >>> from simddp.inputs.link import Link
    >>> link = Link("l", 0.0, 1.0, compute_slowdown=1.2, comm_slowdown=1.1)
    >>> contention_for(link)                       # calibrate's, with a generic MLP
    Contention(compute=1.2, comm=1.1, spread=None, source='link', comm_bytes=None)
    >>> own = Host("h", contention=(1.5, 2.0), contention_spread=((1.2, 1.5), (1.8, 2.4)))
    >>> c = contention_for(link, own)              # measured with the model itself: it wins
    >>> c.source, c.measured, c.ends()[1].factors  # the high end of its measured spread
    ('model', True, (1.8, 2.4))

The rest of the module inverts the engine's model: given compute alone (W), comm alone (T),
and both started together (compute ends at D, comm at Ts), which two factors reproduce them.
``calibrate`` and ``realrun`` measure; this is the arithmetic::

    >>> slowdowns(0.020, 0.020, 0.030, 0.035)       # compute x1.5, comm x2
    (1.5, 2.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from simddp.errors import InputError

# Contention needs the compute and the all-reduce stream to overlap: the shorter of the two
# (alone) should be at least this fraction of the longer, or the factors are guesses.
MIN_OVERLAP = 0.3
# Where factors come from: calibrate's generic MLP (a link file), the model's own backward
# (a profile's host_costs), the published GPU figures below (compute on a GPU, nothing
# measured: :func:`default_contention`), or nothing ("").
SOURCES = ("", "link", "model", "published")
MEASURED_SOURCES = ("link", "model")
# The model's stream tells its α part's factor from its bytes part's only where α is a fair
# share of its lone time: the solve in :func:`split_comm` multiplies the stream's noise by
# 1/share. Over 134 kept grid cells the mlp's 8 x 4 MiB read 0.02-0.10 of α, the
# transformer's 75 all-reduces 0.68-0.82 on loopback and 0.29-0.50 at 2 Gbit/s. At 0.5 the
# 2 Gbit/s transformer went unsplit in 33 of 34 cells, its 1 MiB buckets slowed like its
# tiny all-reduces (+8 … +13 % at 0.25-2 MB in three grids; at 0.2: -4 … +5 %,
# docs/FINDINGS.md#contention-split-into-alpha-and-bytes).
MIN_ALPHA_SHARE = 0.2


# GPU contention from published measurements, for compute on a GPU that nobody measured
# contention for (issue 52; docs/FINDINGS.md#gpu-contention-under-overlap).
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
# Device presets that are not GPUs (simddp/presets/devices.py): every other preset is one.
NOT_GPU_PRESETS = ("cpu",)


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
      own all-reduces) or "" (nothing measured: a preset, or factors given by hand as 1.0).
    comm_bytes: the factor of a collective's bytes part, ``comm`` then being its α part's
      (:func:`split_comm`); None: ``comm`` slows the whole collective.
    """

    compute: float = 1.0
    comm: float = 1.0
    spread: tuple[tuple[float, float], tuple[float, float]] | None = None
    source: str = ""
    comm_bytes: float | None = None

    def __post_init__(self) -> None:
        check_factors("contention", "(compute, comm)", (self.compute, self.comm))
        if self.comm_bytes is not None:
            check_factor("contention", "comm_bytes", self.comm_bytes)
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


def link_contention(link) -> Contention:
    """A link's factors (calibrate's); measured unless both are 1.0 (a preset, or none)."""
    c, m = link.compute_slowdown, link.comm_slowdown
    return Contention(c, m, source="link" if (c, m) != (1.0, 1.0) else "")


def contention_for(link, host=None) -> Contention:
    """The contention a simulation runs under: the model's own (``host.contention``, with
    its spread), else the link's. The one place that choice is made."""
    if host is not None and host.contention is not None:
        return Contention(*host.contention, spread=host.contention_spread, source="model")
    return link_contention(link)


def computes_on_gpu(device: str | None) -> bool:
    """Whether ``device`` names a GPU: a device preset other than cpu (``--device``,
    simddp/presets/devices.py), or a torch device "cuda" / "cuda:N" (what ``realrun profile``
    and ``simddp trace-import`` record as a profile's ``measured.device``). None, or a name
    neither knows: not known to be one::

        >>> [computes_on_gpu(d) for d in ("a100", "cuda:0", "cuda", "cpu", None, "mps")]
        [True, True, True, False, False, False]
    """
    # here, not at the top: simddp.presets imports simddp.inputs.link, which imports this module
    from simddp.presets.devices import DEVICES

    if not isinstance(device, str):
        return False
    name = device.split(":")[0].strip().lower()
    return name == "cuda" or (name in DEVICES and name not in NOT_GPU_PRESETS)


def published_gpu() -> Contention:
    """The published GPU contention at the point, its spread none … :data:`PUBLISHED_GPU_HIGH`."""
    return Contention(*PUBLISHED_GPU, spread=((1.0, 1.0), PUBLISHED_GPU_HIGH),
                      source="published")


def default_contention(link, host=None, device: str | None = None) -> Contention:
    """The contention a sweep predicts under: a measured one (:func:`contention_for`: the
    model's own, else calibrate's) always; else, where compute runs on a GPU (``device``,
    :func:`computes_on_gpu`), the published GPU figures (:func:`published_gpu`); else none,
    as on the CPU box, where Gloo's contention is this host's and calibrate measures it::

        >>> from simddp.inputs.link import Link
        >>> bare = Link("l", 0.0, 1.0)
        >>> c = default_contention(bare, device="a100"); c.source, c.factors, c.measured
        ('published', (1.189, 2.22), False)
        >>> default_contention(bare, device="cpu").factors
        (1.0, 1.0)
        >>> default_contention(Link("l", 0.0, 1.0, compute_slowdown=1.1), device="a100").source
        'link'
    """
    measured = contention_for(link, host)
    if measured.measured or not computes_on_gpu(device):
        return measured
    return published_gpu()


def split_comm(contention: Contention, bytes_factor: float | None, stream_alpha_s: float,
               stream_bytes_s: float) -> Contention:
    """The model's comm factor split into its α part's and its bytes part's.

    Why: the model's own stream (one all-reduce per gradient tensor, realrun profile) measures
    one factor for a mix of fixed per-call work and bytes, and the engine used it for every
    collective of every plan. On the emulated 2 Gbit/s link the two parts contend very
    differently: the same box's transformer stream (then ~70 % α) read comm ×1.95–2.44, the
    mlp's 8 × 4 MiB (~94 % bytes) ×1.04–1.16 and calibrate's 8 × 4 MiB ×1.02–1.14 (six grids): a
    call's fixed part is CPU work beside the backward, its bytes mostly wait on the shaped
    wire. So a bucketed plan's 1 MiB collectives were slowed like the model's tiny ones
    (docs/FINDINGS.md#contention-split-into-alpha-and-bytes).

    ``bytes_factor``: the link's comm factor (calibrate's stream is bytes-dominated; 1.0 where
    it measured less, clamped), None when the link has none measured (a preset);
    ``stream_alpha_s``/``stream_bytes_s``: the model's stream's lone α and bytes seconds
    (A, B). The α factor reproduces the model's measurement:
    c·(A + B) = c_α·A + c_β·B. Unchanged where that cannot be told (not the model's own
    factors, no link factor, α under :data:`MIN_ALPHA_SHARE` of the stream, or c_α < 1)::

        >>> model = Contention(1.5, 2.44, source="model")
        >>> round(split_comm(model, 1.14, 0.0916, 0.0403).comm, 2)   # the 2 Gbit/s transformer
        3.01
        >>> split_comm(model, 1.14, 0.0096, 0.1416) is model  # the mlp: bytes-dominated
        True
    """
    alpha_s, bytes_s = stream_alpha_s, stream_bytes_s
    if (contention.source != "model" or contention.comm_bytes is not None
            or bytes_factor is None or alpha_s < MIN_ALPHA_SHARE * (alpha_s + bytes_s)):
        return contention
    comm_alpha = (contention.comm * (alpha_s + bytes_s) - bytes_factor * bytes_s) / alpha_s
    if comm_alpha < 1.0:
        return contention
    return replace(contention, comm=comm_alpha, comm_bytes=bytes_factor)


def with_contention(link, host, contention: Contention):
    """(link, host) whose :func:`contention_for` is ``contention``'s factors: set where the
    engine reads them (the host's own when it has one, else the link's)."""
    if host is not None and host.contention is not None:
        return link, replace(host, contention=contention.factors)
    if contention.factors == (link.compute_slowdown, link.comm_slowdown):
        return link, host
    return replace(link, compute_slowdown=contention.compute, comm_slowdown=contention.comm), host


def slowdowns(compute_alone_s: float, comm_alone_s: float, compute_end_s: float,
              comm_end_s: float) -> tuple[float, float]:
    """(compute_slowdown, comm_slowdown) from one overlap measurement, under the engine's
    model: while both run, compute advances at 1/compute_slowdown and comm at 1/comm_slowdown;
    alone each runs at full speed. Both ``*_end_s`` count from the common start.

    Compute W = 20 ms alone, comm T = 20 ms alone; together compute ends at D = 30 ms, comm at
    Ts = 35 ms: compute was slowed x1.5 (30/20); comm did 30/s_m ms of work by 30 ms and the
    remaining 20 − 30/s_m at full speed, ending at 35: s_m = 30 / (30 + 20 − 35) = 2::

    >>> slowdowns(0.020, 0.020, 0.030, 0.035)
    (1.5, 2.0)
    >>> slowdowns(0.020, 0.020, 0.035, 0.030)      # the same, comm finishing first
    (2.0, 1.5)
    """
    W, T, D, Ts = compute_alone_s, comm_alone_s, compute_end_s, comm_end_s
    if Ts >= D:  # compute ended first: it was slowed the whole time
        rest_s = D + T - Ts       # the comm work done during the overlap, at full speed
        return D / W, D / rest_s if rest_s > 0.1 * D else Ts / T
    rest_s = Ts + W - D           # the compute work done during the overlap, at full speed
    # A noisy repeat can leave less compute than the overlap explains: then the whole
    # compute counts as slowed (an upper bound) rather than a division by ~0.
    return (Ts / rest_s if rest_s > 0.1 * Ts else D / W), Ts / T


def combine_contention(per_rank: list[dict]) -> dict:
    """The factors for the link or host: the median over every repeat of every rank of that
    repeat's :func:`slowdowns` (``repeats_s``: (W, T, D, Ts) each), at least 1.0 (below 1.0
    is noise); and their p10/p90 spread (:func:`contention_spread`).

    Why per repeat: the four times of one repeat are taken within half a second, but the comm
    alone (T) of the same 75 all-reduces drifts ±35 % between stretches of seconds on a 2-core
    box, and comm's factor is a difference, D / (D + T − Ts). Fed four medians taken from
    different repeats it read ×1.5 to ×7.3 for the same transformer in eight profiles of one
    afternoon; the median of the per-repeat factors, ×1.7 to ×2.8 
    (docs/FINDINGS.md#contention). Without repeats (older files): each
    rank's medians through :func:`slowdowns`, the mean over ranks.

    >>> r = {"compute_alone_s": 0.02, "comm_alone_s": 0.02, "compute_together_s": 0.03,
    ...      "comm_together_s": 0.035, "repeats": 5, "stream_bytes": 8, "stream_count": 1}
    >>> c = combine_contention([r, r]); (c["compute_slowdown"], c["comm_slowdown"], c["notes"])
    (1.5, 2.0, [])
    >>> reps = [(0.05, 0.05, 0.08, 0.10), (0.05, 0.07, 0.08, 0.12), (0.05, 0.05, 0.08, 0.11)]
    >>> c = combine_contention([{**r, "repeats_s": reps}])     # comm x2.67, x2.67, x4
    >>> round(c["compute_slowdown"], 2), round(c["comm_slowdown"], 2)
    (1.6, 2.67)
    """
    repeats = [tuple(rep) for r in per_rank for rep in r.get("repeats_s") or ()]
    if repeats:
        compute, comm = (float(v) for v in
                         np.median(np.array([slowdowns(*rep) for rep in repeats]), axis=0))
    else:
        factors = [slowdowns(r["compute_alone_s"], r["comm_alone_s"], r["compute_together_s"],
                             r["comm_together_s"]) for r in per_rank]
        compute = sum(f[0] for f in factors) / len(factors)
        comm = sum(f[1] for f in factors) / len(factors)
    notes = [f"{name} measured {v:.3f} < 1.0 (noise), clamped to 1.0"
             for name, v in (("compute_slowdown", compute), ("comm_slowdown", comm)) if v < 1.0]
    # The two lanes must overlap for most of the shorter one, or the factors are guesses.
    r0 = per_rank[0]
    shorter = min(r0["compute_alone_s"], r0["comm_alone_s"])
    longer = max(r0["compute_alone_s"], r0["comm_alone_s"])
    if shorter < MIN_OVERLAP * longer:
        notes.append(f"compute alone {r0['compute_alone_s'] * 1e3:.1f} ms and comm alone "
                     f"{r0['comm_alone_s'] * 1e3:.1f} ms overlap little: the factors are coarse")
    return {"compute_slowdown": max(1.0, compute), "comm_slowdown": max(1.0, comm),
            "compute_slowdown_raw": compute, "comm_slowdown_raw": comm,
            "clamped": [n for n, v in (("compute_slowdown", compute), ("comm_slowdown", comm))
                        if v < 1.0], "notes": notes, "per_rank": per_rank,
            "spread": contention_spread(per_rank)}


def contention_spread(per_rank: list[dict]) -> tuple[tuple[float, float], ...] | None:
    """((compute, comm) low, (compute, comm) high): the p10 and p90 of each factor over every
    repeat of every rank, at least 1.0, bracketing the point estimate; None without repeats.

    >>> reps = [(0.02, 0.02, 0.03, 0.035), (0.02, 0.02, 0.036, 0.04)]    # x1.5/x2, x1.8/x2.25
    >>> contention_spread([{"repeats_s": reps}])
    ((1.53, 2.02), (1.77, 2.23))
    """
    repeats = [tuple(rep) for r in per_rank for rep in r.get("repeats_s") or ()]
    if not repeats:
        return None
    factors = np.array([slowdowns(*rep) for rep in repeats])
    low, high = (np.maximum(1.0, np.percentile(factors, q, axis=0)) for q in (10, 90))
    return tuple(round(float(v), 2) for v in low), tuple(round(float(v), 2) for v in high)
