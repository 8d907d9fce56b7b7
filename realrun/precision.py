"""The numeric precision a step computes in: fp32, tf32 or bf16, the same on CPU and GPU.

    set_precision("tf32")                            # once per process, before the model runs
    with autocast("bf16", device):                   # around forward and the loss
        loss = loss_of(forward(model, inputs), loss_fn)

- fp32: plain float32 everywhere (``torch.set_float32_matmul_precision("highest")``);
- tf32: float32 tensors, matmuls and convolutions on TF32 tensor cores (Ampere and newer;
  ``set_float32_matmul_precision("high")`` and cuDNN's ``allow_tf32``); on a CPU this is fp32;
- bf16: ``torch.autocast(device_type, dtype=torch.bfloat16)`` around forward and loss;
  parameters, gradients and the all-reduced bytes stay float32. fsdp and zero2 also run under
  FSDP2's mixed precision (:func:`mixed_precision_policy`): bf16 all-gathers and compute,
  float32 shards, optimizer and reduce-scatters; Gloo carries bf16 there too in torch 2.13
  (docs/REALRUN.md, fsdp, zero2 and comm hooks).
"""
from __future__ import annotations

from contextlib import nullcontext

import torch

from simddp.planning.sharding import PRECISIONS
from simddp.errors import InputError

# simddp's Strategy.param_dtype (simddp/planning/sharding.py, PARAM_DTYPES) as torch dtypes
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise InputError(f"--precision: unknown {precision!r}; choose from "
                         f"{', '.join(PRECISIONS)}")
    return precision


def set_precision(precision: str) -> None:
    """Process-wide float32 matmul precision for ``precision``."""
    tf32 = check_precision(precision) == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32


def autocast(precision: str, device) -> "torch.autocast | nullcontext":
    """The autocast context for ``precision`` on ``device`` (a no-op but for bf16)."""
    if check_precision(precision) != "bf16":
        return nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def mixed_precision_policy(param_dtype: str | None):
    """FSDP2's policy for a sharded Strategy's ``param_dtype`` (None: no policy, fp32):
    gathered and computed in ``param_dtype``, reduced in float32.

    >>> mixed_precision_policy("bf16").param_dtype, mixed_precision_policy(None)
    (torch.bfloat16, None)
    """
    if param_dtype is None:
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy
    return MixedPrecisionPolicy(param_dtype=TORCH_DTYPES[param_dtype], reduce_dtype=torch.float32)
