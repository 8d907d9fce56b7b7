"""What every rank of a calibration runs: the sweep, then the sequence and contention steps.

Started by :func:`calibrate.measure` through the launcher, never by hand::

    from realrun.launch import run_world
    ranks = run_world("calibrate.ranks.run:run_rank", payload_of(settings), world_size=2)
    ranks[r]["sweep"][i]["times_s"]      # rank r's iteration times at size i
    ranks[r]["kinds"]["all_gather"][i]   # the same for an all-gather (settings.kinds)
    ranks[r]["levels"]["inter"]["sweep"] # per level, on a two-level world (ranks/levels.py)
"""
from __future__ import annotations

from calibrate.ranks.allreduce import measure_sweep
from calibrate.ranks.mlp_contention import measure_contention
from calibrate.ranks.kinds import measure_kind_sweep
from calibrate.ranks.levels import level_steps, measure_levels
from calibrate.rig.sequence import measure_sequence
from realrun.launch.env import ranks_on_this_cpu, usable_cpus
from realrun.launch.host_stack import congestion_control
from simddp.report.progress import Progress


def run_rank(payload: dict, ctx) -> dict:
    """Rank function for run_world; ``payload`` is :func:`calibrate.measure`'s."""
    kinds = payload.get("kinds", [])
    kind_sizes = payload.get("kind_sizes_bytes", payload["sizes_bytes"])
    steps = (len(payload["sizes_bytes"]) + len(kind_sizes) * len(kinds)
             + bool(payload["sequence"]) + bool(payload["contention"])
             + (level_steps(payload["levels"]) if payload.get("levels") else 0))
    # Only rank 0 draws; the bar redraws between sizes, never inside a timed all-reduce.
    label = ", ".join(["all-reduce", *kinds])
    progress = Progress(f"{label} sweep, {ctx.world_size} ranks", steps,
                        show=ctx.rank == 0 and payload["progress"])
    try:
        out = {"rank": ctx.rank, "world_size": ctx.world_size,
               # what shares this rank's CPU: analysis flags an oversubscribed box from
               # the ranks' own report, not from the launching process's environment
               "local_world_size": ranks_on_this_cpu(ctx.world_size),
               # the CPUs it may run on (taskset, a cpuset), not the machine's count
               "cpu_count": usable_cpus(),
               # Gloo's flows run on it, and bbr's pacing stalls waited-for all-reduces
               # (docs/FINDINGS.md#pacing-bbr-against-cubic)
               "tcp": congestion_control(),
               "sweep": measure_sweep(payload["sizes_bytes"], payload["dtype"],
                                      payload["warmup"], payload["iters"], ctx, progress)}
        if kinds:
            out["kinds"] = measure_kind_sweep(kinds, kind_sizes, payload["dtype"],
                                              payload["warmup"], payload["iters"], ctx, progress)
        if payload.get("levels"):  # inside nodes and across, each level's groups at once
            out["levels"] = measure_levels(payload["levels"], ctx, progress)
        if payload["sequence"]:
            out["sequence"] = measure_sequence(payload["sequence"], ctx)
            progress.advance("sequence")
        if payload["contention"]:
            out["contention"] = measure_contention(payload["contention"], ctx)
            progress.advance("contention")
        return out
    finally:
        progress.close()

