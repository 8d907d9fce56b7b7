"""Will a profile's ranks fit this machine's memory? Their need, against what is here.

A rank profiling a model holds what a torch DDP step holds (docs/FINDINGS.md, Memory and the
allocator): the fp32 weights, one gradient-sized bucket and the optimizer's state all along;
then either the forward's saved tensors (activations, and under bf16 autocast the weights'
bf16 copies) or, as backward frees those, the gradients::

    need = rank_need(n_params=10**9, optimizer="sgd", precision="fp32")
    fit = judge(need, ranks=2, machine=host_memory())     # fit.verdict: fits, close, cannot

Estimates, not measurements: the process's own libraries and Gloo's buffers come on top.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simddp.analytic.memory import DTYPE_BYTES, OPTIM_STATES, activation_terms
from simddp.presets.models import ModelSpec

FP32_BYTES = DTYPE_BYTES["fp32"]
# Above this share of the memory free now a run is close: the box's other work and the
# ranks' own libraries take the rest.
CLOSE_SHARE = 0.8
FITS, CLOSE, CANNOT = "fits", "close", "cannot"


@dataclass(frozen=True)
class RankNeed:
    """Bytes one rank holds, term by term; ``activations_bytes`` None: not known (your own
    model), so the total is a floor.

    >>> RankNeed(n_params=10, weights_bytes=40, bucket_bytes=40, optimizer_bytes=0,
    ...          gradients_bytes=40, weight_copy_bytes=20, activations_bytes=30).total_bytes
    130
    """

    n_params: int
    weights_bytes: int
    bucket_bytes: int
    optimizer_bytes: int
    gradients_bytes: int
    weight_copy_bytes: int
    activations_bytes: int | None

    @property
    def total_bytes(self) -> int:
        forward = self.weight_copy_bytes + (self.activations_bytes or 0)
        return (self.weights_bytes + self.bucket_bytes + self.optimizer_bytes
                + max(self.gradients_bytes, forward))


def rank_need(n_params: int, optimizer: str, precision: str,
              activations_bytes: int | None = None) -> RankNeed:
    """What one rank of ``realrun profile`` holds for ``n_params`` parameters: fp32 weights,
    gradients and bucket (realrun keeps all three fp32 at every precision), ``optimizer``'s
    state (sgd: none, adam: two moments) and, under bf16 autocast, a bf16 copy of the weights.

    >>> rank_need(10**9, "adam", "bf16").total_bytes // 10**9   # 4 + 4 + 8 + max(4, 2)
    20
    """
    states = OPTIM_STATES["sgd" if optimizer == "sgd" else "adam"]
    return RankNeed(n_params, n_params * FP32_BYTES, n_params * FP32_BYTES,
                    n_params * states * FP32_BYTES, n_params * FP32_BYTES,
                    n_params * DTYPE_BYTES["bf16"] if precision == "bf16" else 0,
                    activations_bytes)


def preset_need(spec: ModelSpec, batch: int, seq: int, optimizer: str,
                precision: str) -> RankNeed:
    """:func:`rank_need` of a preset, with its activations at ``batch`` x ``seq``
    (simddp.analytic.memory's model; fp32, or bf16 under autocast)."""
    n_params = sum(math.prod(shape) for _, shape in spec.parameters())
    act_bytes = DTYPE_BYTES["bf16" if precision == "bf16" else "fp32"]
    activations = sum(t.total_bytes for t in activation_terms(spec, batch, seq, act_bytes))
    return rank_need(n_params, optimizer, precision, activations)


@dataclass(frozen=True)
class Machine:
    """Memory where the ranks' tensors live: ``total_bytes`` in all, ``available_bytes``
    free now; ``what`` names it ("RAM", "GPU")."""

    total_bytes: int
    available_bytes: int
    what: str = "RAM"


def host_memory(meminfo: str = "/proc/meminfo") -> Machine | None:
    """This machine's RAM from /proc/meminfo (MemTotal, MemAvailable); None where there is
    no such file (not Linux)."""
    try:
        with open(meminfo) as f:
            fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f
                      if line.split(":")[0] in ("MemTotal", "MemAvailable")}
    except (OSError, ValueError, IndexError):
        return None
    if "MemTotal" not in fields:
        return None
    return Machine(fields["MemTotal"], fields.get("MemAvailable", fields["MemTotal"]))


@dataclass(frozen=True)
class Fit:
    """``need`` per rank times ``ranks`` on ``machine``: ``verdict`` is CANNOT when it is more
    than the machine has at all, CLOSE above :data:`CLOSE_SHARE` of what is free now, else
    FITS; ``machine`` None: not checked (FITS)."""

    need: RankNeed
    ranks: int
    machine: Machine | None
    verdict: str

    @property
    def all_ranks_bytes(self) -> int:
        return self.need.total_bytes * self.ranks


def judge(need: RankNeed, ranks: int, machine: Machine | None) -> Fit:
    """The :class:`Fit` of ``ranks`` ranks of ``need`` each on ``machine``.

    >>> need = rank_need(10**9, "sgd", "fp32")                     # 12 GB a rank
    >>> judge(need, 2, Machine(32 * 10**9, 28 * 10**9)).verdict     # 24 of 28 GB free
    'close'
    >>> judge(need, 2, Machine(20 * 10**9, 19 * 10**9)).verdict
    'cannot'
    """
    if machine is None:
        return Fit(need, ranks, None, FITS)
    total = need.total_bytes * ranks
    verdict = (CANNOT if total > machine.total_bytes
               else CLOSE if total > CLOSE_SHARE * machine.available_bytes else FITS)
    return Fit(need, ranks, machine, verdict)


def gib(n_bytes: float) -> str:
    """A size in GiB, to two figures or whole; MiB or KiB below 1 GiB.

    >>> gib(1.5 * 2**30), gib(12.34 * 2**30), gib(120 * 2**30), gib(2**24), gib(6144)
    ('1.5 GiB', '12 GiB', '120 GiB', '16 MiB', '6 KiB')
    """
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if n_bytes >= size:
            value = n_bytes / size
            return f"{value:.2g} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{max(1, round(n_bytes / 1024))} KiB"


def fit_text(fit: Fit) -> str:
    """The memory part of the plan line: per rank, all ranks, and the machine's."""
    floor = "" if fit.need.activations_bytes is not None else "at least "
    text = f"memory {floor}~{gib(fit.need.total_bytes)} a rank"
    if fit.ranks > 1:
        text += f", {gib(fit.all_ranks_bytes)} for {fit.ranks} ranks"
    if fit.machine is None:
        return text + " (this machine's not read)"
    return (f"{text}; this machine's {fit.machine.what}: {gib(fit.machine.total_bytes)}, "
            f"{gib(fit.machine.available_bytes)} free")


def refusal(fit: Fit, name: str) -> str:
    """The one line refusing a run that cannot fit (``fit.verdict`` CANNOT)."""
    need = fit.need
    terms = ["weights", "gradients", "a bucket"] + (
        ["optimizer state"] if need.optimizer_bytes else []) + (
        ["bf16 weights"] if need.weight_copy_bytes else []) + (
        ["activations"] if need.activations_bytes else [])
    ranks = f" for {fit.ranks} ranks" if fit.ranks > 1 else ""
    where = "this machine's" if fit.machine.what == "RAM" else "the"
    return (f"{name} needs ~{gib(fit.all_ranks_bytes)}{ranks} (~{gib(need.total_bytes)} a "
            f"rank: {', '.join(terms)}), more than {where} {gib(fit.machine.total_bytes)} of "
            f"{fit.machine.what}: use fewer ranks (--world-size) or a smaller model")


def warning(fit: Fit) -> str:
    """The warning of a run close to what is free (``fit.verdict`` CLOSE)."""
    return (f"warning: ~{gib(fit.all_ranks_bytes)} is close to or over the "
            f"{gib(fit.machine.available_bytes)} of {fit.machine.what} free now: the run may "
            f"run out of memory, or slow everything else here")
