"""Memory per device: model states at chosen precisions, saved activations, and FSDP sharding.

Parameters, gradients, optimizer state and saved activations: DDP keeps all four whole on
every device; FSDP / ZeRO-3 slices the first three over N devices, plus one gathered unit::

    >>> from simddp.presets.models import parse_model
    >>> spec = parse_model("ffn-126x16384x53248")
    >>> prec = Precision(master="fp32", grad="fp32", optim="adam", act="bf16")
    >>> report = memory_report(spec, prec, batch=1, seq=1024, world_size=8, device_mem_gb=80)
    >>> report["params"], report["fsdp_min_world"]
    (219848638464, 74)

GB = 1e9 bytes, GiB = 2**30 bytes. The activation model: docs/ACCOUNT.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from simddp.errors import InputError
from simddp.presets.models import ModelSpec
from simddp.inputs.profile import ModelProfile
from simddp.planning.registry import Name

GB, GiB = 1e9, 2**30
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# Optimizer state tensors per parameter: Adam/AdamW keep two moments, momentum SGD one buffer.
OPTIM_STATES = {"adam": 2, "adamw": 2, "sgd-momentum": 1, "sgd": 0}
WEIGHT_COPIES = ("none", "bf16", "fp16")
ATTENTION = ("flash", "eager")
PROFILE_GRAD_BYTES = 4  # presets and realrun write fp32 gradients into profiles
INDEX_BYTES = 8         # token ids are int64
STAT_BYTES = 4          # RMSNorm's 1/rms and attention's logsumexp are fp32


def _pick(flag: str, value: str, allowed) -> str:
    if value not in allowed:
        raise InputError(f"{flag}: unknown {value!r}; choose from {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class Precision:
    """Bytes per element of each stored thing; ``comm`` None means "as the gradients"."""

    master: str = "fp32"
    grad: str = "fp32"
    optim: str = "adam"
    optim_dtype: str = "fp32"
    weight_copy: str = "none"   # a low-precision copy of all weights held through the step
    act: str = "bf16"
    comm: str | None = None

    def __post_init__(self) -> None:
        for flag, value in (("--master", self.master), ("--grad", self.grad),
                            ("--optim-dtype", self.optim_dtype), ("--act-dtype", self.act)):
            _pick(flag, value, DTYPE_BYTES)
        _pick("--optim", self.optim, OPTIM_STATES)
        _pick("--weight-copy", self.weight_copy, WEIGHT_COPIES)
        if self.comm is not None:
            _pick("--comm-dtype", self.comm, DTYPE_BYTES)

    @property
    def master_bytes(self) -> int:
        return DTYPE_BYTES[self.master]

    @property
    def grad_bytes(self) -> int:
        return DTYPE_BYTES[self.grad]

    @property
    def optim_bytes(self) -> int:
        return OPTIM_STATES[self.optim] * DTYPE_BYTES[self.optim_dtype]

    @property
    def copy_bytes(self) -> int:
        return DTYPE_BYTES.get(self.weight_copy, 0)

    @property
    def act_bytes(self) -> int:
        return DTYPE_BYTES[self.act]

    @property
    def comm_bytes(self) -> int:
        return DTYPE_BYTES[self.comm or self.grad]

    @property
    def gather_bytes(self) -> int:
        """Bytes per element FSDP all-gathers: the compute copy if there is one, else master."""
        return self.copy_bytes or self.master_bytes


@dataclass(frozen=True)
class ActivationTerm:
    what: str
    count: int
    bytes_each: int

    @property
    def total_bytes(self) -> int:
        return self.count * self.bytes_each


def activation_terms(spec: ModelSpec, batch: int, seq: int, act_bytes: int,
                     attention: str = "flash") -> list[ActivationTerm]:
    """Bytes each layer saves for backward, per rank, with no activation checkpointing.

    A bias-free Linear saves its input (its weight is a parameter, counted elsewhere); a
    tensor saved by two ops (ReLU's output is also the next Linear's input) counts once.
    """
    _pick("--attention", attention, ATTENTION)
    for flag, value in (("--batch", batch), ("--seq", seq)):
        if not isinstance(value, int) or value < 1:
            raise InputError(f"{flag} must be an integer >= 1, got {value!r}")
    T, d, f, a, L = batch * seq, spec.d_model, spec.d_ff, act_bytes, spec.layers
    if spec.kind == "ffn":
        return [ActivationTerm("block: up input T·d_model + hidden T·d_ff", L, T * (d + f) * a)]
    if spec.kind == "mlp":
        return [ActivationTerm("layer: input T·width (the previous ReLU's output)", L, T * d * a),
                ActivationTerm("last ReLU output T·width", 1, T * d * a)]
    if attention == "flash":
        attn = ActivationTerm("block: attention q, k, v, out 4·T·d + logsumexp b·heads·seq fp32",
                              L, 4 * T * d * a + batch * spec.heads * seq * STAT_BYTES)
    else:
        attn = ActivationTerm("block: attention q, k, v, o input 4·T·d + probs b·heads·seq²",
                              L, 4 * T * d * a + batch * spec.heads * seq * seq * a)
    return [
        ActivationTerm("block: 2 norm inputs, q/k/v input, w1/w3 input 4·T·d", L, 4 * T * d * a),
        attn,
        ActivationTerm("block: SwiGLU w1 out, silu out, w3 out, product 4·T·d_ff", L,
                       4 * T * f * a),
        ActivationTerm("block: 2 RMSNorm 1/rms, T fp32 each", L, 2 * T * STAT_BYTES),
        ActivationTerm("embedding: token ids T int64", 1, T * INDEX_BYTES),
        ActivationTerm("final norm input + 1/rms, head input 2·T·d", 1,
                       2 * T * d * a + T * STAT_BYTES),
        ActivationTerm("loss: log-softmax T·vocab fp32", 1, T * spec.vocab * 4),
    ]


def fsdp_units(spec: ModelSpec) -> list[int]:
    """Parameter count of each FSDP unit: one per block (``blocks.i``/``layers.i``), plus a
    root unit holding whatever is outside blocks (embedding, final norm, head)."""
    units: dict[str, int] = {}
    for name, shape in spec.parameters():
        parts = name.split(".")
        key = ".".join(parts[:2]) if parts[0] in ("blocks", "layers") else "root"
        units[key] = units.get(key, 0) + math.prod(shape)
    return list(units.values())


def profile_units(profile: ModelProfile) -> list[int]:
    """A profile file has no dims: each layer is a unit, ``grad_bytes / 4`` elements."""
    return [sum(layer.grad_bytes) // PROFILE_GRAD_BYTES for layer in profile.layers
            if layer.grad_bytes]


def fsdp_device_bytes(units: list[int], prec: Precision, act_bytes: int, world: int) -> dict:
    """Per-device bytes under FSDP over ``world`` devices, term by term: shards of
    ``ceil(numel / world)`` elements (FSDP pads), and the largest unit gathered with its full
    gradient."""
    shard = sum(-(-n // world) for n in units)
    return {"params": shard * prec.master_bytes, "grads": shard * prec.grad_bytes,
            "optimizer": shard * prec.optim_bytes,
            "working_set": max(units) * (prec.gather_bytes + prec.grad_bytes),
            "activations": act_bytes}


def fsdp_min_world(units: list[int], prec: Precision, act_bytes: int,
                   device_mem_bytes: float) -> int | None:
    """Smallest N whose FSDP per-device total fits, or None if no N does."""
    def fits(n: int) -> bool:
        return sum(fsdp_device_bytes(units, prec, act_bytes, n).values()) <= device_mem_bytes
    hi = max(units)          # beyond this every shard is one element: the total stops falling
    if not fits(hi):
        return None
    lo = 1
    while lo < hi:           # the total never rises with N, so bisect
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def memory_report(model: ModelSpec | ModelProfile, prec: Precision, batch: int, seq: int,
                  world_size: int, device_mem_gb: float, attention: str = "flash") -> dict:
    """Every memory number ``simddp account`` prints, in bytes (JSON-ready)."""
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise InputError(f"--world-size must be an integer >= 1 (1: memory only), "
                         f"got {world_size!r}")
    if not (isinstance(device_mem_gb, (int, float)) and math.isfinite(device_mem_gb)
            and device_mem_gb > 0):
        raise InputError(f"--device-mem-gb must be a number > 0 (GB = 1e9 bytes), "
                         f"got {device_mem_gb!r}")
    if isinstance(model, ModelSpec):
        units = fsdp_units(model)
        acts = activation_terms(model, batch, seq, prec.act_bytes, attention)
    else:
        units, acts = profile_units(model), None
    n_params = sum(units)
    act_total = sum(t.total_bytes for t in acts) if acts is not None else 0
    replicated = {"params": n_params * prec.master_bytes, "grads": n_params * prec.grad_bytes,
                  "optimizer": n_params * prec.optim_bytes,
                  "weight_copy": n_params * prec.copy_bytes, "activations": act_total}
    limit = device_mem_gb * GB
    fsdp = fsdp_device_bytes(units, prec, act_total, world_size)
    min_world = fsdp_min_world(units, prec, act_total, limit)
    floor = fsdp_device_bytes(units, prec, act_total, max(units))
    return {
        "model": getattr(model, "name", ""), "params": n_params, "tokens": batch * seq,
        "bytes_per_param": {"params": prec.master_bytes, "grads": prec.grad_bytes,
                            "optimizer": prec.optim_bytes, "weight_copy": prec.copy_bytes},
        "activations_modelled": acts is not None,
        "activation_terms": [{"what": t.what, "count": t.count, "bytes_each": t.bytes_each,
                              "bytes": t.total_bytes} for t in acts or ()],
        "replicated": {**replicated, "total": sum(replicated.values())},
        "fsdp_units": len(units), "fsdp_largest_unit_params": max(units),
        Name.FSDP: {"world_size": world_size, **fsdp, "total": sum(fsdp.values())},
        "device_mem_bytes": limit,
        "fsdp_min_world": min_world,
        "fsdp_at_min_world": None if min_world is None else
        {"world_size": min_world, **(d := fsdp_device_bytes(units, prec, act_total, min_world)),
         "total": sum(d.values())},
        "fsdp_floor_bytes": sum(floor.values()),
    }
