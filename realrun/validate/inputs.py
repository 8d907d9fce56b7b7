"""validate's inputs: calibrate the link and profile the model on the same ranks, and set
the compute total from the compute-only steps measured alongside the strategies.

The rank target here runs under ``run_world`` as ``realrun.validate.inputs:profile_rank``.
"""
from __future__ import annotations

import dataclasses
import math
import statistics

import torch

import calibrate
from calibrate.settings import CalibrateSettings
from realrun.launch import run_world
from realrun.profiler import profile_workload
from realrun.steps import Trainer
from realrun.timing import timed
from realrun.validate.host_costs import measure_copies, measure_hooks
from realrun.validate.settings import ValidateSettings
from realrun.workload import Workload
from simddp.engine import compute_only_s
from simddp.io import profile_from_json, profile_to_json
from simddp.link import Link
from simddp.profile import ModelProfile
from simddp.result import COMPUTE_ONLY


# ---------------------------------------------------------------------------------------------
# 1. calibrate


def calibrate_link(s: ValidateSettings, max_bytes: int | None = None,
                   piecewise: bool = False, lone_alpha: bool = False
                   ) -> tuple[Link, dict] | tuple[None, None]:
    """A short in-process ``python -m calibrate`` on the same world: (Link, its summary);
    (None, None) on torchrun ranks other than 0.

    Sizes 4 KiB .. ``max_bytes`` (default: the model's gradient bytes rounded up to a power
    of two, 1-64 MiB) ×2, ``calibrate_iters`` timed all-reduces each, contention measured,
    and calibrate's sequence step run on *this model's* gradients (one all-reduce per
    tensor, back to back, async and blocking: the α of each pattern, calibrate/ranks/sequence.py).
    ``lone_alpha`` skips the sequence step (α = the sweep's intercept, as before 2026-11-22).
    ``piecewise`` fits two lines joined at a fitted breakpoint (and implies lone α). Off by
    default: on this box it made 3 of 4 validation cells worse (docs/VALIDATION.md).
    """
    sizes = s.tensor_bytes()
    if max_bytes is None:
        total = sum(sizes)
        max_bytes = min(64 << 20, max(1 << 20, 1 << math.ceil(math.log2(max(total, 1)))))
    settings = CalibrateSettings(
        min_bytes=4 << 10, max_bytes=max_bytes, factor=2.0, iters=s.calibrate_iters, warmup=3,
        contention_repeats=5, world_sizes=(s.world_size,), threads_per_rank=s.threads,
        timeout_s=s.timeout_s, emulate_hosts=s.emulate_hosts, link_gbit=s.link_gbit,
        piecewise=piecewise, sequence=not lone_alpha, progress=False,
        # the sequence step on this model's own gradients, one all-reduce per tensor
        sequence_sizes=tuple(sizes), sequence_repeats=15, backend=s.backend)
    cal = calibrate.run(settings)
    if cal is None:  # a torchrun rank other than 0: rank 0 predicts
        return None, None
    run = cal.worlds[0]
    link, fit = run.link, run.fit
    info = {"alpha_us": link.alpha_s * 1e6, "busbw_gbps": link.busbw_gbps, "r2_log": fit.r2,
            "piecewise": piecewise, "pieces": [dataclasses.asdict(p) for p in link.pieces],
            "rows": [{"size_bytes": r["size_bytes"], "time_us": r["time_s"] * 1e6,
                      "fit_us": link.allreduce_s(r["size_bytes"], s.world_size) * 1e6}
                     for r in run.rows],
            "compute_slowdown": link.compute_slowdown, "comm_slowdown": link.comm_slowdown,
            "sizes": f"4K..{max_bytes}", "iters": s.calibrate_iters,
            "sequence": run.sequence}
    return link, info


# ---------------------------------------------------------------------------------------------
# 2. profile


def profile_rank(payload: dict, ctx) -> dict:
    """Rank function: profile the model on this rank while the other ranks do the same."""
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    profile, measured = profile_workload(
        workload, seed=payload["seed"], rank=ctx.rank, repeats=payload["repeats"],
        warmup=payload["warmup"], optimizer=payload["optimizer"], device=ctx.device,
        precision=payload["precision"])
    measured["copy"] = measure_copies(list(profile.tensor_bytes), ctx, payload["repeats"])
    measured["plain_steps_s"] = plain_steps(workload, payload, ctx)
    measured["hooks"] = measure_hooks(workload, payload, ctx)
    return {"profile": profile_to_json(profile), "measured": measured}


def plain_steps(workload: Workload, payload: dict, ctx) -> list[float]:
    """Seconds of hook-free compute-only steps, each after a barrier (as realrun bench times
    them): the parent takes the max over ranks per step, since a step ends with the slowest."""
    trainer = Trainer({"strategy": COMPUTE_ONLY, "bucket_mb": None}, workload, ctx, payload)
    times = []
    for i in range(3 + max(10, payload["repeats"])):
        ctx.barrier()
        step_s = timed(ctx, trainer.step)
        if i >= 3:
            times.append(step_s)
    return times


def measure_profile(s: ValidateSettings) -> tuple[ModelProfile, dict] | tuple[None, None]:
    """(profile rescaled to hook-free totals, what was measured) from ``world_size`` ranks;
    (None, None) on torchrun ranks other than 0."""
    payload = {"workload": s.workload.to_json(), "repeats": s.profile_repeats, "warmup": 3,
               "optimizer": s.optimizer, "seed": s.seed, "precision": s.precision}
    ranks = run_world("realrun.validate.inputs:profile_rank", payload, world_size=s.world_size,
                      backend=s.backend, threads_per_rank=s.threads, timeout_s=s.timeout_s)
    if ranks is None:  # a torchrun rank other than 0
        return None, None
    raw = profile_from_json(ranks[0]["profile"])
    measured = ranks[0]["measured"]
    # The per-layer split comes from hooks; the totals from the hook-free passes, which is
    # what a training step without profiler hooks pays.
    profile = raw.scaled(forward_s=measured["forward_s_unhooked"],
                         backward_s=measured["backward_s_unhooked"])
    # Jitter: a step ends when its slowest rank ends, so the compute a step sees is the
    # per-step max over ranks of hook-free steps (median over steps), not rank 0's median.
    # Both medians come from the same steps, so a load burst during profiling scales both and
    # cancels in the ratio; only the ranks' spread remains. Always measured; applied only
    # with rank_max (off by default: it did not help on the grid, docs/VALIDATION.md).
    steps0 = ranks[0]["measured"]["plain_steps_s"]
    per_step = [max(r["measured"]["plain_steps_s"][i] for r in ranks)
                for i in range(len(steps0))]
    k = statistics.median(per_step) / statistics.median(steps0)
    measured["rank_max_factor"] = k
    measured["rank_max_step_s"] = statistics.median(per_step)
    measured["rank_max_applied"] = bool(s.rank_max)
    # The hook path's step medians from the slowest rank (realrun/validate/host_costs.py).
    measured["hooks"] = {k: max(r["measured"]["hooks"][k] for r in ranks)
                         for k in ranks[0]["measured"]["hooks"]}
    if s.rank_max:
        profile = profile.scaled(forward_s=profile.forward_s * k,
                                 backward_s=profile.backward_s * k,
                                 optimizer_s=profile.optimizer_s * k)
    return profile, measured


def anchor_compute(profile: ModelProfile, measured: list) -> tuple[ModelProfile, dict] | None:
    """``profile`` with its compute total set to the measured compute-only median, and what
    was changed; None when compute-only was not measured.

    Why: measured here, the same compute-only step timed twice a few seconds apart differs
    by up to 30 % (29-42 ms for the transformer on 2026-11-22), so a profile taken a minute
    before the runs carries a common error into every row (-35 % … +21 % in the compute-only
    row of earlier grids). realrun bench times compute-only round-robin with the strategies,
    so its median is the compute those runs saw. The per-layer split, the optimizer share
    and the ready order stay the profile's; every phase is scaled by one factor.
    """
    row = next((r for r in measured if r.strategy == "compute-only"), None)
    if row is None:
        return None
    before_s = compute_only_s(profile, 1)
    k = row.step_s / before_s
    scaled = profile.scaled(forward_s=profile.forward_s * k, backward_s=profile.backward_s * k,
                            optimizer_s=profile.optimizer_s * k)
    return scaled, {"profile_ms": before_s * 1e3, "measured_ms": row.step_s * 1e3, "factor": k}
