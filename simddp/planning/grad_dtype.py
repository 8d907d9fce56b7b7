"""The dtype gradients are reduced in: what DDP's all-reduces and FSDP's reduce-scatters move.

torch DDP under autocast all-reduces fp32 gradients; Megatron-LM and DeepSpeed keep 16-bit
gradients and all-reduce half the bytes; FSDP2's ``reduce_dtype`` does the same to its
reduce-scatters, not its all-gathers::

    >>> from simddp import Layer, ModelProfile, make_strategy, plan
    >>> toy = ModelProfile("toy", (Layer("l0", (100 * 10**6,)),))
    >>> [c.calls for c in plan(toy, with_grad_dtype(make_strategy("flat"), "bf16")).collectives]
    [(50000000,)]
    >>> [(c.kind, c.calls) for c in plan(toy, with_grad_dtype(make_strategy("zero2"), "bf16")
    ...                                  ).collectives]
    [('all_gather', (100000000,)), ('reduce_scatter', (50000000,))]

A collective's ``nbytes`` stays fp32; its ``calls`` are the bytes on the wire. A bucket cap
counts 16-bit bytes, as torch DDP on a 16-bit model does. A comm hook takes fp32 gradients
only.
"""
from __future__ import annotations

from dataclasses import replace

from simddp.errors import InputError
from simddp.kinds import CollectiveKind
from simddp.planning.hooks import GRAD_ELEM_BYTES, HookCost

# The dtypes gradients are reduced in, bytes per element; fp32 is the default (None).
GRAD_DTYPES = {"fp32": 4, "bf16": 2, "fp16": 2}
# What a reduced-precision gradient shrinks: the reductions, not the parameter all-gathers.
REDUCTIONS = (CollectiveKind.ALL_REDUCE.value, CollectiveKind.REDUCE_SCATTER.value)


def check_grad_dtype(grad_dtype: str | None) -> str | None:
    """``grad_dtype`` as a Strategy keeps it: None for fp32; InputError for an unknown name.

    >>> check_grad_dtype("fp32"), check_grad_dtype("bf16")
    (None, 'bf16')
    """
    if grad_dtype is None or grad_dtype == "fp32":
        return None
    if grad_dtype not in GRAD_DTYPES:
        raise InputError(f"--grad-dtype: unknown {grad_dtype!r}; choose from "
                         f"{', '.join(GRAD_DTYPES)}")
    return grad_dtype


def with_grad_dtype(strategy, grad_dtype: str | None):
    """``strategy`` reducing its gradients in ``grad_dtype`` (fp32 or None: unchanged)."""
    dtype = check_grad_dtype(grad_dtype)
    return strategy if dtype is None else replace(strategy, grad_dtype=dtype)


def bucket_widening(grad_dtype: str | None) -> int:
    """How many fp32 bytes one byte of a bucket cap holds at ``grad_dtype`` (1 for fp32)."""
    return GRAD_ELEM_BYTES // GRAD_DTYPES[grad_dtype or "fp32"]


def wire_bytes(nbytes: int, grad_dtype: str | None) -> int:
    """The bytes ``nbytes`` of fp32 gradients take on the wire at ``grad_dtype``."""
    return nbytes * GRAD_DTYPES[grad_dtype or "fp32"] // GRAD_ELEM_BYTES


def reduced_in(collectives, grad_dtype: str | None) -> tuple:
    """``collectives`` with each reduction (all-reduce, reduce-scatter) calling its gradients
    at ``grad_dtype``; gathers, and collectives a hook already shapes, unchanged."""
    if check_grad_dtype(grad_dtype) is None:
        return tuple(collectives)
    return tuple(replace(c, hook=HookCost((wire_bytes(c.nbytes, grad_dtype),)))
                 if c.kind in REDUCTIONS and c.hook is None else c for c in collectives)
