"""One calibration, start to end: measure on the ranks, then analyse each world size.

    cal = run(CalibrateSettings(max_bytes=16 << 20))     # calibrate.run is this function
    cal.link, cal.worlds[0].fit, cal.worlds[0].rows
    cal.worlds[0].levels        # per level on a two-level world (calibrate/levels.py), or None
"""
from __future__ import annotations

import dataclasses
import os
import time

from calibrate.analysis import Calibration, WorldCalibration, analyse
from calibrate.levels import with_levels
from calibrate.settings import CalibrateSettings
from realrun.launch import run_world
from realrun.launch.netns import tbf_burst_bytes


def measure(s: CalibrateSettings, world_size: int) -> list[dict] | None:
    """All ranks' raw results for one world size (None on torchrun ranks other than 0).

    Raises ValueError for what the launcher refuses (e.g. nccl without GPUs), LaunchError
    when a rank fails, NetnsUnavailable when emulated hosts cannot be made here.
    """
    contention = None if not s.contention else {
        "widths": list(s.contention_widths), "rows": s.contention_rows, "dtype": s.dtype,
        "stream_bytes": list(s.contention_stream_bytes), "repeats": s.contention_repeats}
    sequence = None if not s.sequence else {
        "sizes_bytes": list(s.sequence_sizes), "dtype": s.dtype, "repeats": s.sequence_repeats,
        "kinds": list(s.kinds)}
    gpus = s.gpus_per_node(world_size)
    levels = None if gpus is None else {
        "gpus_per_node": gpus, "sizes_bytes": s.sizes_bytes, "dtype": s.dtype,
        "warmup": s.warmup, "iters": s.iters, "kinds": list(s.kinds),
        "kind_sizes_bytes": s.kind_sizes_bytes}
    payload = {"sizes_bytes": s.sizes_bytes, "dtype": s.dtype, "warmup": s.warmup,
               "iters": s.iters, "contention": contention, "sequence": sequence,
               "progress": s.progress, "kinds": list(s.kinds),
               "kind_sizes_bytes": s.kind_sizes_bytes, "levels": levels}
    return run_world("calibrate.ranks.run:run_rank", payload, world_size=world_size,
                     backend=s.backend, threads_per_rank=s.threads_per_rank,
                     timeout_s=s.timeout_s, emulate_hosts=s.emulate_hosts, link_gbit=s.link_gbit)


def run(s: CalibrateSettings) -> Calibration | None:
    """Measure and analyse every world size of ``s``; None on torchrun ranks other than 0."""
    start_s = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    raw = [(p, measure(s, p)) for p in s.world_sizes]
    if any(ranks is None for _, ranks in raw):
        return None
    # The token bucket realrun's emulated hosts shape with (tbf), when shaped (--link-gbit)
    burst = tbf_burst_bytes(s.link_gbit) if s.link_gbit else None
    worlds = [shaped(with_levels(s, analyse(s, p, ranks, burst), ranks), burst)
              for p, ranks in raw]
    return Calibration(s, worlds, load, time.perf_counter() - start_s)


def shaped(world: WorldCalibration, burst_bytes: int | None) -> WorldCalibration:
    """``world`` whose Gloo host carries the shaper's token bucket (``burst_bytes``,
    docs/FORMATS.md), if there is one."""
    if burst_bytes is None or world.host is None:
        return world
    return dataclasses.replace(world, host=dataclasses.replace(world.host,
                                                               burst_bytes=burst_bytes))
