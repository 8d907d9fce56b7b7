"""Model presets: transformers, MLPs and FFN stacks as layer lists with FLOP-based times.

A :class:`ModelSpec` names a model's shape; realrun builds the same spec as a torch module
(same parameter names, same order), so a simulated and a measured run name the same model::

    >>> spec = parse_model("transformer-xl")
    >>> len(spec.parameters())           # 9 per block + embedding, final norm, head
    435
    >>> profile = build_profile(spec, device="a100", batch=8, seq=1024)

Presets: ``transformer-small|medium|large|xl|2.7b``, ``mlp-DEPTHxWIDTH`` (bias-free
Linear+ReLU), ``ffn-LAYERSxDMODELxDFF`` (bias-free up/down blocks). Per-layer time is a
roofline: ``max(flops / (peak·eff), bytes / (mem_bw·eff))`` on a device from
:mod:`simddp.presets.devices`; backward costs twice the forward (grad input + grad weight).
A model read from a Hugging Face config or a short spec (simddp/presets/hf_config.py) is
timed by the same :func:`build_profile`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import NamedTuple

from simddp.errors import InputError
from simddp.presets.devices import Device, get_device
from simddp.inputs.profile import Layer, ModelProfile

GRAD_BYTES = 4  # fp32 gradients
VOCAB = 10_000
# name: (d_model, d_ff, layers, heads)
TRANSFORMERS = {
    "small": (768, 3072, 12, 12), "medium": (1024, 4096, 24, 16), "large": (1280, 5120, 36, 20),
    "xl": (1600, 6400, 48, 25), "2.7b": (2560, 10240, 32, 32),
}
# Optimizer step bytes per parameter, fp32: Adam reads p, g, m, v and writes p, m, v (7×4);
# SGD reads p, g and writes p (3×4). The step is memory-bound on every device listed.
OPTIMIZER_BYTES_PER_PARAM = {"adam": 28, "sgd": 12}
PRESET_HELP = ("transformer-small|medium|large|xl|2.7b, mlp-DEPTHxWIDTH (e.g. mlp-40x4096), "
               "ffn-LAYERSxDMODELxDFF (e.g. ffn-126x16384x53248)")
# What simddp's --model takes: a preset, a model config or spec (simddp/presets/hf_config.py),
# or a profile file (python -m realrun profile --out).
# realrun runs torch modules and takes presets only: its errors list PRESET_HELP, so that
# `realrun bench --model nonexist` does not suggest the profile file bench refuses.
MODEL_HELP = (f"{PRESET_HELP}, a Hugging Face config FILE.json[#ARCH], a spec "
              "decoder:|encoder:|mpt:KEY=VALUE,... (docs/MODELS.md), or a profile FILE.json")
PARAM_KINDS = ("linear", "embed", "norm")   # the preset ops that hold a weight


class Op(NamedTuple):
    """One module in forward order: its name, op kind and dims (as :func:`_op_cost` reads
    them), its parameters ((name, elements) in definition order) and whether it sits in a
    repeated block, the part activation checkpointing recomputes."""

    name: str
    kind: str
    dims: tuple[int, ...]
    params: tuple[tuple[str, int], ...] = ()
    in_block: bool = False


@dataclass(frozen=True)
class ModelSpec:
    kind: str            # "transformer", "mlp" or "ffn"
    layers: int
    d_model: int
    d_ff: int = 0
    heads: int = 1
    vocab: int = VOCAB
    name: str = ""

    def __post_init__(self) -> None:
        for field in ("layers", "d_model", "heads", "vocab"):
            if getattr(self, field) < 1:
                raise InputError(f"model {self.name!r}: {field} must be >= 1")
        if self.kind == "transformer" and self.d_model % self.heads:
            raise InputError(f"model {self.name!r}: d_model {self.d_model} is not divisible "
                             f"by heads {self.heads}")

    def shrunk(self, **dims: int | None) -> "ModelSpec":
        """The same family with some dims replaced (e.g. ``layers=2`` for a CPU run)."""
        dims = {k: v for k, v in dims.items() if v is not None}
        if not dims:
            return self
        tag = ",".join(f"{k}={v}" for k, v in sorted(dims.items()))
        return replace(self, **dims, name=f"{self.name}[{tag}]")

    def ops(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """(layer name, op kind, dims) in forward order; kinds: embed, norm, linear, attn, relu."""
        d, f = self.d_model, self.d_ff
        if self.kind == "mlp":
            return [(f"layers.{i}", "linear", (d, d)) for i in range(self.layers)]
        if self.kind == "ffn":
            return [op for i in range(self.layers)
                    for op in ((f"blocks.{i}.up", "linear", (d, f)),
                               (f"blocks.{i}.down", "linear", (f, d)))]
        ops = [("embed", "embed", (self.vocab, d))]
        for i in range(self.layers):
            b = f"blocks.{i}"
            ops += [(f"{b}.attn_norm", "norm", (d,)), (f"{b}.q", "linear", (d, d)),
                    (f"{b}.k", "linear", (d, d)), (f"{b}.v", "linear", (d, d)),
                    (f"{b}.attn", "attn", (d,)), (f"{b}.o", "linear", (d, d)),
                    (f"{b}.ffn_norm", "norm", (d,)), (f"{b}.w1", "linear", (d, f)),
                    (f"{b}.w2", "linear", (f, d)), (f"{b}.w3", "linear", (d, f))]
        return ops + [("norm", "norm", (d,)), ("head", "linear", (d, self.vocab))]

    def modules(self) -> list[Op]:
        """:meth:`ops` with their parameters: one weight per linear, embedding and norm."""
        return [Op(name, kind, dims,
                   ((f"{name}.weight", math.prod(dims)),) if kind in PARAM_KINDS else (),
                   name.startswith(("blocks.", "layers.")))
                for name, kind, dims in self.ops()]

    @property
    def position_limit(self) -> int | None:
        """The longest sequence the model holds positions for (None: no learned table)."""
        return None

    def parameters(self) -> list[tuple[str, tuple[int, ...]]]:
        """(parameter name, torch shape) in definition order, as realrun's module has them."""
        params = []
        for name, kind, dims in self.ops():
            if kind == "linear":
                params.append((f"{name}.weight", (dims[1], dims[0])))  # torch: (out, in)
            elif kind in ("embed", "norm"):
                params.append((f"{name}.weight", dims))
        return params

    @property
    def n_params(self) -> int:
        total = 0
        for _, shape in self.parameters():
            n = 1
            for s in shape:
                n *= s
            total += n
        return total


def parse_model(name: str, accepted: str = PRESET_HELP) -> ModelSpec:
    """A preset by name; InputError listing ``accepted`` otherwise: the presets, or
    :data:`MODEL_HELP` where the command reads a profile file too.

    >>> for accepted in (PRESET_HELP, MODEL_HELP):
    ...     try:
    ...         parse_model("cnn-3", accepted)
    ...     except InputError as e:
    ...         print(str(e)[:34], "...", str(e)[-22:])
    unknown model 'cnn-3'; choose tran ... ffn-126x16384x53248)
    unknown model 'cnn-3'; choose tran ... or a profile FILE.json
    """
    m = re.fullmatch(r"transformer-(small|medium|large|xl|2\.7b)", name)
    if m:
        d, f, layers, heads = TRANSFORMERS[m.group(1)]
        return ModelSpec("transformer", layers, d, f, heads, VOCAB, name)
    m = re.fullmatch(r"mlp-(\d+)x(\d+)", name)
    if m:
        return ModelSpec("mlp", int(m.group(1)), int(m.group(2)), name=name)
    m = re.fullmatch(r"ffn-(\d+)x(\d+)x(\d+)", name)
    if m:
        return ModelSpec("ffn", int(m.group(1)), int(m.group(2)), int(m.group(3)), name=name)
    raise InputError(f"unknown model {name!r}; choose {accepted}")


def _op_cost(kind: str, dims: tuple[int, ...], tokens: int, seq: int, act_bytes: int):
    """(forward flops, forward bytes moved) of one op over ``tokens`` = batch × seq positions."""
    if kind == "linear":
        d_in, d_out = dims
        return 2 * tokens * d_in * d_out, (tokens * (d_in + d_out) + d_in * d_out) * act_bytes
    if kind == "pooler":  # a Linear on one position per sample (BERT's [CLS] token)
        return _op_cost("linear", dims, tokens // seq, seq, act_bytes)
    if kind == "attn":   # QKᵀ and AV: 2·2·T·S·d flops (no causal saving); read q,k,v, write out
        return 4 * tokens * seq * dims[0], 4 * tokens * dims[0] * act_bytes
    if kind == "norm":   # RMSNorm: square, mean, rsqrt, scale ≈ 4 flops/element, read + write
        return 4 * tokens * dims[0], 2 * tokens * dims[0] * act_bytes
    if kind == "embed":  # a gather: no flops, read and write one row per token
        return 0, 2 * tokens * dims[1] * act_bytes
    raise AssertionError(kind)


def build_profile(spec, device: str | Device = "a100", batch: int = 8,
                  seq: int = 1024, efficiency: float | None = None,
                  optimizer: str = "adam", dtype: str | None = None,
                  checkpointing: bool = False) -> ModelProfile:
    """Per-layer forward/backward seconds from FLOPs and bytes on ``device``, for a
    :class:`ModelSpec` or a :class:`simddp.presets.architecture.Architecture` (anything
    with ``modules()``, ``n_params``, ``position_limit`` and ``name``).

    ``dtype``: what the compute runs in (:meth:`Device.for_dtype`; None: the device's own,
    16-bit tensor cores on a GPU); ``checkpointing``: each block's forward is recomputed
    in its backward, as activation checkpointing does. Gradients are fp32 bytes whatever
    the dtype: the dtype they are reduced in is the strategy's
    (simddp/planning/grad_dtype.py).
    """
    dev = get_device(device) if isinstance(device, str) else device
    if efficiency is not None:
        dev = dev.with_efficiency(efficiency)
    dev = dev.for_dtype(dtype)
    for flag, value in (("--batch", batch), ("--seq", seq)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"{flag} must be an integer >= 1, got {value!r}")
    limit = spec.position_limit
    if limit is not None and seq > limit:
        raise InputError(f"--seq {seq}: model {spec.name!r} has learned positions for "
                         f"{limit} tokens only")
    if optimizer not in OPTIMIZER_BYTES_PER_PARAM:
        raise InputError(f"unknown optimizer {optimizer!r}; choose adam or sgd")
    tokens = batch * seq
    layers = []
    for op in spec.modules():
        flops, nbytes = _op_cost(op.kind, op.dims, tokens, seq, dev.act_bytes)
        forward_s = dev.seconds(flops, nbytes)
        backward_s = 2 * forward_s
        if checkpointing and op.in_block:
            backward_s += forward_s   # the block's forward runs again before its backward
        layers.append(Layer(op.name, tuple(n * GRAD_BYTES for _, n in op.params), forward_s,
                            backward_s, tuple(name for name, _ in op.params)))
    optimizer_s = dev.seconds(0, spec.n_params * OPTIMIZER_BYTES_PER_PARAM[optimizer])
    label = (f"{spec.name}@{dev.name},b{batch}s{seq}" + (f",{dtype}" if dtype else "")
             + (",checkpointed" if checkpointing else ""))
    return ModelProfile(label, tuple(layers), optimizer_s, device=dev.name)
