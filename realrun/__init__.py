"""Real DDP runs with torch.distributed: launcher, wrappers, profiling, timing, validation.

    import realrun
    model = realrun.DDP(net, strategy="bucketed", bucket_mb=25)   # inside an initialised group
    loss_fn(model(x), y).backward()
    model.finish_gradient_synchronization()   # REQUIRED after each synced backward
    opt.step(); opt.zero_grad(set_to_none=True)

    values = realrun.run_world("pkg.module:fn", {"n": 4}, world_size=2)
    profile, measured = realrun.profile_module(net, inputs, loss_fn, repeats=10)

examples/train_ddp.py is a whole training script (torchrun, no_sync, and the end a Gloo
job needs: ``realrun.launch.finish_torchrun(0)``), run by tests/realrun/test_examples.py.

Names are imported on first use, so ``import realrun`` stays cheap (no torch import).
"""
from __future__ import annotations

import importlib

# exported name -> module that defines it
_LAZY = {
    "DDP": "realrun.ddp",
    "module_profile": "realrun.tensors",
    "trainable_parameters": "realrun.tensors",
    "run_world": "realrun.launch",
    "RankContext": "realrun.launch",
    "LaunchError": "realrun.launch",
    "profile_module": "realrun.layer_timing",
    "Workload": "realrun.workload",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'realrun' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
