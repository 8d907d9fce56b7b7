"""DDP communication hooks for real: torch's fp16, bf16 and PowerSGD hooks on torch DDP.

A simddp :class:`simddp.planning.hooks.CommHook` ("ddp+fp16", "bucketed+powersgd:2") becomes
``model.register_comm_hook(state, hook)`` on torch's DistributedDataParallel::

    model = DistributedDataParallel(net, bucket_cap_mb=25)
    register(model, parse_comm_hook("powersgd:2"), process_group=None)

- ``fp16``, ``bf16``: torch's ``default_hooks``; bf16 needs NCCL (:func:`check_backend`);
- ``powersgd:R[:S]``: ``powerSGD_hook`` starting at step 2, torch's minimum, so bench's timed
  steps are all compressed (``--warmup`` >= :data:`POWERSGD_MIN_WARMUP`); S is not used. Off
  NCCL each bucket's hook waits for the previous bucket's chain (:func:`bucket_by_bucket`), as
  Gloo paired the wrong collectives when buckets overlapped (docs/REALRUN.md, Comm hooks).
- PowerSGD on CPU tensors where CUDA exists: torch's hook ends its decompress callback with
  ``if torch.cuda.is_available(): torch.cuda.synchronize(device)``, ``device`` being the
  bucket's, so a Gloo run on a GPU host fails in the callback with "Expected a cuda device,
  but got: cpu" (torch 2.11 and 2.13: powerSGD_hook.py lines 630 and 854 in 2.13).
  :func:`register` hands that module a ``torch`` whose ``cuda.synchronize`` skips a
  non-CUDA device: nothing is queued on a GPU for CPU tensors, and a CUDA bucket still syncs.
"""
from __future__ import annotations

from simddp.errors import InputError
from simddp.planning.hooks import PSGD_MIN_START, CommHook

POWERSGD_START_ITER = PSGD_MIN_START   # 2: torch refuses less with error feedback/warm start
# steps before the first timed one: plain steps 0..1, then one compressed step that allocates
POWERSGD_MIN_WARMUP = POWERSGD_START_ITER + 1


def check_backend(hooks, backend: str) -> None:
    """InputError (one line) if a hook cannot run on ``backend``: bf16 needs NCCL."""
    for hook in hooks:
        if hook.kind == "bf16" and backend != "nccl":
            raise InputError(f"--comm-hook bf16: torch's bf16_compress_hook needs NCCL "
                             f"(--backend nccl); Gloo has no bfloat16 all-reduce. On "
                             f"{backend}, use fp16")


def check_warmup(hooks, warmup: int) -> None:
    """InputError unless PowerSGD's timed steps all come after its start and first step."""
    if any(h.kind == "powersgd" for h in hooks) and warmup < POWERSGD_MIN_WARMUP:
        raise InputError(f"--warmup {warmup}: powersgd compresses from step "
                         f"{POWERSGD_START_ITER} on and allocates its buffers in that step; "
                         f"use --warmup >= {POWERSGD_MIN_WARMUP}")


def register(model, hook: CommHook, process_group=None) -> None:
    """Register ``hook`` on the torch DistributedDataParallel ``model``."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if hook.kind == "fp16":
        model.register_comm_hook(process_group, default_hooks.fp16_compress_hook)
    elif hook.kind == "bf16":
        model.register_comm_hook(process_group, default_hooks.bf16_compress_hook)
    else:
        _cpu_safe_sync(powerSGD_hook)
        state = powerSGD_hook.PowerSGDState(
            process_group=process_group, matrix_approximation_rank=hook.rank,
            start_powerSGD_iter=POWERSGD_START_ITER)
        nccl = dist.get_backend(process_group) == "nccl"
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook if nccl
                                 else bucket_by_bucket(powerSGD_hook.powerSGD_hook))


def bucket_by_bucket(hook_fn):
    """``hook_fn`` with each bucket's start waiting for the previous bucket's future (the
    reducer calls hooks in bucket order, from index 0 every step)."""
    last: list = [None]

    def hook(state, bucket):
        if bucket.index() > 0 and last[0] is not None:
            last[0].wait()
        fut = hook_fn(state, bucket)
        last[0] = None if bucket.is_last() else fut
        return fut
    return hook


class _CudaSkippingCpu:
    """``torch.cuda`` with ``synchronize(device)`` a no-op for a non-CUDA ``torch.device``."""

    def __getattr__(self, name: str):
        import torch
        return getattr(torch.cuda, name)

    @staticmethod
    def synchronize(device=None) -> None:
        import torch
        if isinstance(device, torch.device) and device.type != "cuda":
            return      # CPU tensors: no CUDA work to wait for, and torch.cuda refuses cpu
        torch.cuda.synchronize(device)


class _TorchForHook:
    """``torch`` as one hook module sees it: everything torch's, but :class:`_CudaSkippingCpu`."""

    cuda = _CudaSkippingCpu()

    def __getattr__(self, name: str):
        import torch
        return getattr(torch, name)


def _cpu_safe_sync(module) -> None:
    """Give ``module`` (torch's powerSGD_hook) the ``torch`` above: see the module text."""
    if not isinstance(module.torch, _TorchForHook):
        module.torch = _TorchForHook()
