"""Calibrate simddp's link model on real ranks: all-reduce sweep, α–β fit, contention.

    python -m calibrate --out cal                  # 2 local Gloo ranks -> cal/link.json
    python -m simddp sweep --link cal/link.json    # simulate with the measured link

As a library::

    import calibrate
    cal = calibrate.run(calibrate.CalibrateSettings(max_bytes=16 << 20, world_sizes=(2,)))
    cal.link                  # a simddp.Link: alpha_s, busbw (the network and its library)
    cal.link_file             # and what was measured beside it: contention, Gloo's host
    cal.worlds[0].fit         # the α–β fit with 95 % intervals, cal.worlds[0].rows the sweep

Modules: settings (what to measure, validated), calibration (run, measure), ranks/ (what runs
on every rank: the sweep, the sequence α, contention, each level's sweeps), combine (the
ranks' numbers into one), analysis (fits and the Link, per world), levels (per-level fits of a
two-level world: the link file's levels), fit (least squares, numpy/scipy), report (text),
files (CSV, JSON, link files), plots, cli (flags -> settings -> run -> report). Names are
imported on first use, so ``python -m calibrate --help`` needs neither torch nor scipy.
See docs/CALIBRATE.md.
"""
from __future__ import annotations

import importlib

_LAZY = {"CalibrateSettings": "calibrate.settings", "Calibration": "calibrate.analysis",
         "WorldCalibration": "calibrate.analysis", "measure": "calibrate.calibration",
         "run": "calibrate.calibration"}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'calibrate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
