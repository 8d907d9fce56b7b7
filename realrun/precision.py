"""The numeric precision a step computes in: fp32, tf32 or bf16, the same on CPU and GPU.

    set_precision("tf32")                            # once per process, before the model runs
    with autocast("bf16", device):                   # around forward and the loss
        loss = loss_of(forward(model, inputs), loss_fn)

- fp32: plain float32 everywhere (``torch.set_float32_matmul_precision("highest")``);
- tf32: float32 tensors, matmuls and convolutions on TF32 tensor cores (Ampere and newer;
  ``set_float32_matmul_precision("high")`` and cuDNN's ``allow_tf32``); on a CPU this is fp32;
- bf16: ``torch.autocast(device_type, dtype=torch.bfloat16)`` around forward and loss, as
  mixed-precision training does; parameters, gradients and the all-reduced bytes stay float32.
  fsdp and zero2 also run as GPU FSDP jobs do, under FSDP2's
  ``MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)``
  (:func:`mixed_precision_policy`, realrun/sharded.py): the shards and the optimizer stay
  float32, each all-gather sends the shard cast to bf16 and forward and backward compute on
  it, the gradients are cast to float32 and reduce-scattered in float32.

Gloo carries bf16: in torch 2.13 its ``all_gather_into_tensor`` and ``reduce_scatter_tensor``
(SUM and AVG) accept bfloat16 and float16 on CPU tensors (checked on 2 ranks), so the policy
is the same on Gloo and NCCL and needs no fp16 stand-in. (torch's ``bf16_compress_hook`` for
DDP is another matter: it needs NCCL, realrun/comm_hooks.py.)
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
    """FSDP2's policy for a sharded Strategy's ``param_dtype`` (None: no policy, fp32), as GPU
    FSDP jobs set it: gathered and computed in ``param_dtype``, reduced in float32.

    >>> mixed_precision_policy("bf16").param_dtype, mixed_precision_policy(None)
    (torch.bfloat16, None)
    """
    if param_dtype is None:
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy
    return MixedPrecisionPolicy(param_dtype=TORCH_DTYPES[param_dtype], reduce_dtype=torch.float32)
