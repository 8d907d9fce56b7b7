"""validate's inputs: calibrate the link and profile the model on the same ranks
(realrun/profile_on_ranks.py), and set the compute total from the compute-only steps measured
alongside the strategies.
"""
from __future__ import annotations

import dataclasses
import math

import calibrate
from calibrate.settings import KINDS, CalibrateSettings
from realrun.profile_on_ranks import ProfileRun, profile_world
from realrun.workflows.validate.settings import ValidateSettings
from simddp.sim.engine import compute_only_s
from simddp.inputs.link_file import LinkFile
from simddp.inputs.profile import ModelProfile
from simddp.result import COMPUTE_ONLY


def calibrate_link(s: ValidateSettings, max_bytes: int | None = None,
                   piecewise: bool = False, lone_alpha: bool = False
                   ) -> tuple[LinkFile, dict] | tuple[None, None]:
    """A short in-process ``python -m calibrate`` on the same world: (its link file, a
    summary); (None, None) on torchrun ranks other than 0.

    calibrate's short preset (``CalibrateSettings.short``) on this model's gradients, as
    ``calibrate --profile`` does. ``lone_alpha`` skips the sequence step (α = the sweep's
    intercept); ``piecewise`` fits two lines (and implies lone α), off by default
    (docs/FINDINGS.md#tried-and-not-adopted).
    """
    settings = CalibrateSettings.short(
        s.world, s.tensor_bytes(), iters=s.calibrate_iters, threads_per_rank=s.threads,
        piecewise=piecewise, sequence=not lone_alpha, max_bytes=max_bytes,
        # reduce-scatter and all-gather only when a sharded strategy will use them: on Gloo
        # they lengthen the calibration (docs/FINDINGS.md#sharded-steps-fsdp2-on-gloo)
        kinds=KINDS if s.shards else ())
    cal = calibrate.run(settings)
    if cal is None:  # a torchrun rank other than 0: rank 0 predicts
        return None, None
    run = cal.worlds[0]
    link, held = run.link, run.heldout
    contention = run.link_contention
    r2 = held.get("r2_log")
    # R² as calibrate judges the line: on the held-out sizes it claims (calibrate/judged.py);
    # NaN (fewer than 3 of them) is null, so validate.json stays strict JSON
    info = {"alpha_us": link.alpha_s * 1e6, "busbw_gbps": link.busbw_gbps,
            "r2_log": r2 if r2 is not None and math.isfinite(r2) else None,
            "r2_judged_on": held.get("judged_on"),
            "heldout_median_err": _finite(held.get("median_rel_err")),
            "piecewise": piecewise, "pieces": [dataclasses.asdict(p) for p in link.pieces],
            "rows": [{"size_bytes": r["size_bytes"], "time_us": r["time_s"] * 1e6,
                      "fit_us": link.allreduce_s(r["size_bytes"], s.world_size) * 1e6}
                     for r in run.rows],
            "compute_slowdown": 1.0 if contention is None else contention.compute,
            "comm_slowdown": 1.0 if contention is None else contention.comm,
            "sizes": f"4K..{settings.max_bytes}", "iters": s.calibrate_iters,
            "sequence": run.sequence}
    return run.link_file, info


def _finite(x):
    return x if isinstance(x, float) and math.isfinite(x) else None


def measure_profile(s: ValidateSettings) -> ProfileRun | None:
    """``realrun profile`` on ``world_size`` ranks at once (realrun/profile_on_ranks.py): the
    profile rescaled to hook-free totals, what was measured, and the host costs with this
    model's contention; None on torchrun ranks other than 0."""
    return profile_world(s.workload, s.world, threads=s.threads, repeats=s.profile_repeats,
                         optimizer=s.optimizer, seed=s.seed, precision=s.precision,
                         compute_basis=s.compute_basis,
                         # FSDP2's host costs only when a sharded strategy is validated
                         fsdp=s.shards,
                         shard_unit_mb=s.shard_unit_mb, host_turns=s.host_turns)


def scale_to_compute_only(profile: ModelProfile, measured: list
                          ) -> tuple[ModelProfile, dict] | None:
    """``profile`` with its compute total set to the measured compute-only median, and what
    was changed; None when compute-only was not measured.

    A profile taken a minute before the runs carries a shared box's drift into every row
    (docs/FINDINGS.md#drift-and-the-compute-only-anchor); compute-only, timed round-robin with
    the strategies, is the compute those runs saw. Every phase is scaled by one factor.
    """
    row = next((r for r in measured if r.strategy == COMPUTE_ONLY), None)
    if row is None:
        return None
    before_s = compute_only_s(profile, 1)
    k = row.step_s / before_s
    scaled = profile.scaled(forward_s=profile.forward_s * k, backward_s=profile.backward_s * k,
                            optimizer_s=profile.optimizer_s * k)
    return scaled, {"profile_ms": before_s * 1e3, "measured_ms": row.step_s * 1e3, "factor": k}
