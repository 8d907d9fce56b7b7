"""Start a world of ranks and call one function on each: self-spawned, or under torchrun.

    from realrun.launch import run_world
    values = run_world("pkg.module:fn", {"n": 4}, world_size=2)   # fn(payload, ctx) per rank

:mod:`~realrun.launch.run` (run_world), :mod:`~realrun.launch.context` (RankContext: rank,
device, ``barrier()``), :mod:`~realrun.launch.env` (``is_torchrun()``, no torch),
:mod:`~realrun.launch.finish` (``finish_torchrun(code)``: end a torchrun rank, no torch),
:mod:`~realrun.launch.worker` (one spawned rank), :mod:`~realrun.launch.forkserver` (ranks
forked from a server that imported torch once), :mod:`~realrun.launch.supervise` (first
failure, blame, no orphans), :mod:`~realrun.launch.errors` (one-line errors) and
:mod:`~realrun.launch.netns` (an emulated multi-host cluster in network namespaces) and
:mod:`~realrun.launch.world` (``WorldConfig``: ranks, backend, emulated hosts, link shaping,
timeout, and their flags; no torch). And the collective-timing primitives calibrate shares
with realrun's core: :mod:`~realrun.launch.two_level` (``TwoLevel``: the hierarchical
all-reduce's process groups) and :mod:`~realrun.launch.contention_timing` (a backward against
its all-reduces, alone and together).

The bottom of realrun: it imports simddp only, never realrun's core, its workflows or calibrate
(tests/test_layers.py).
Names are imported on first use, so ``realrun.launch.env`` and the errors need no torch.
"""
from __future__ import annotations

import importlib

_LAZY = {"RankContext": "realrun.launch.context", "make_context": "realrun.launch.context",
         "is_torchrun": "realrun.launch.env",
         "finish_torchrun": "realrun.launch.finish", "LaunchError": "realrun.launch.errors",
         "NetnsUnavailable": "realrun.launch.errors", "resolve_target": "realrun.launch.run",
         "run_world": "realrun.launch.run", "share": "realrun.launch.run",
         "torchrun_group": "realrun.launch.run", "WorldConfig": "realrun.launch.world"}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'realrun.launch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
