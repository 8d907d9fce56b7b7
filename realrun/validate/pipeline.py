"""Validate simddp's predictions against real runs of the same configurations.

The whole loop in one call, used by ``python -m realrun validate`` and the notebook::

    from realrun.validate import ValidateSettings, validate
    report = validate(ValidateSettings(model="mlp-8x1024", bucket_mbs=(1, 10, 100)))
    print(report.text())                       # table, summary, recommendation and verdict
    report.write("out/validate")               # PNGs, validate.json, predicted/measured files

Steps, in order (each one a plain function, so a notebook can run them one by one):

1. :func:`~realrun.validate.inputs.calibrate_link` — unless a link is given: a short
   ``calibrate`` run on the same world (same ranks, same emulated hosts): busbw, α from this
   model's all-reduces issued back to back (async and blocking), contention;
2. :func:`~realrun.validate.inputs.measure_profile` — ``realrun profile`` on *every* rank at
   once; rank 0's per-layer times rescaled to its hook-free totals; the DDP implementations'
   copy rates and hook costs (realrun/validate/host_costs.py);
3. :func:`measure` — ``realrun bench`` of every configuration, compute-only and the probes
   (realrun/validate/probes.py) in one world, round-robin; if the world fails, every
   configuration is retried alone so the failing one is named and the others are kept;
4. inputs from the same rounds — :func:`~realrun.validate.probes.inputs_from_probes` (α,
   busbw, host costs) and :func:`~realrun.validate.inputs.anchor_compute` (the compute
   total), so drift between phases a minute apart does not land in every prediction;
5. :func:`predict` — ``simddp.sweep`` of every configuration with that profile, link and host;
6. :func:`~realrun.validate.timeline.measure_timeline` — a few more steps of one
   configuration with per-span clock reads on rank 0;
7. ``simddp.compare`` for the numbers and plots; :class:`~realrun.validate.report.
   ValidationReport` for the text, JSON and files.

torch's ``ddp`` is run with ``bucket_cap_mb_list=[1, X]`` (realrun/steps.py, docs/CLI.md), so
it executes simddp's ``ddp`` plan: a 1 MiB first bucket, then buckets of at most X.
"""
from __future__ import annotations

import dataclasses
import os
import time

from realrun.bench import run_bench
from realrun.launch import LaunchError, is_torchrun, share
from realrun.validate.host_costs import host_from_measurements
from realrun.validate.inputs import anchor_compute, calibrate_link, measure_profile
from realrun.validate.probes import inputs_from_probes
from realrun.validate.report import ValidationReport
from realrun.validate.settings import ValidateSettings, bench_payload
from realrun.validate.timeline import measure_timeline
from simddp.compare import compare_results, pick_timeline
from simddp.host import Host
from simddp.link import Link
from simddp.profile import ModelProfile
from simddp.result import COMPUTE_ONLY, Result
from simddp.sweeps import sweep


class MeasureFailed(RuntimeError):
    """Every configuration's real run failed."""


def predict(profile: ModelProfile, link: Link, host: Host | None,
            s: ValidateSettings) -> list[Result]:
    """simddp's prediction of every configuration (spans kept for the timeline plot)."""
    link = link.for_world(s.world_size)
    mbs = sorted({float(mb) for mb in s.bucket_mbs})
    # realrun bench runs torch DDP with bucket_cap_mb_list=[1, X]: simddp's ddp plan exactly
    return sweep(profile, link, s.world_size, s.strategies, mbs, host=host, record=True)


def measure(s: ValidateSettings, log=print) -> tuple[list[Result], dict[str, dict], list[str]]:
    """(measured Results, each probe's statistics by name, failures) — all configurations and
    the probes in one world, round-robin.

    If that world fails, each configuration runs alone (with compute-only) so the failing
    ones are named in ``failures`` ("bucketed:10: rank 1 failed: ...") and the rest kept;
    the probes are then not measured.
    """
    world = dict(world_size=s.world_size, backend=s.backend, threads=s.threads,
                 timeout_s=s.timeout_s,
                 emulate_hosts=s.emulate_hosts, link_gbit=s.link_gbit)
    configs = s.configs()
    try:
        run = run_bench(bench_payload(s, configs, s.probes_run()), **world)
        if run is None:  # a torchrun rank other than 0
            return [], {}, []
        return run.results, run.extras, []
    except LaunchError as e:
        if is_torchrun():  # torchrun's agent stops every rank: nothing to retry
            raise
        log(f"validate: the shared run failed ({str(e).splitlines()[0]}); "
            "retrying each configuration alone")
    kept: dict[tuple, Result] = {}
    failures = []
    for config in configs[1:]:
        try:
            run = run_bench(bench_payload(s, [configs[0], config]), **world)
        except LaunchError as e:
            failures.append(f"{config_name(config)}: {str(e).splitlines()[0]}")
            log(f"validate: {failures[-1]}")
            continue
        for r in run.results:
            kept.setdefault((r.strategy, r.bucket_mb), r)
    return list(kept.values()), {}, failures


def config_name(config: dict) -> str:
    mb = config["bucket_mb"]
    return config["strategy"] if mb is None else f"{config['strategy']}:{mb:g}"


def validate(s: ValidateSettings, *, profile: ModelProfile | None = None,
             profile_measured: dict | None = None,
             log=lambda msg: None) -> ValidationReport | None:
    """Calibrate (unless ``s.link``), profile (unless given), predict, measure, compare.

    A given ``profile`` comes with ``profile_measured`` (both from :func:`measure_profile`) for
    the host costs (copies, hooks) to be charged; without it they are not. Under torchrun
    every rank calls this (inside :func:`realrun.launch.torchrun_group`); rank 0 gets the
    report, the others None."""
    start = time.perf_counter()
    load0 = os.getloadavg()[0]
    lead = not is_torchrun() or int(os.environ["RANK"]) == 0
    link, link_info = s.link, None
    if link is None:
        log("validate: calibrating the link (short sweep, same world)...")
        link, link_info = calibrate_link(s, piecewise=s.piecewise, lone_alpha=s.lone_alpha)
    if profile is None:
        log("validate: profiling the model on every rank...")
        profile, profile_measured = measure_profile(s)
    log(f"validate: measuring {len(s.configs())} configurations x {s.steps} steps...")
    measured, probes, failures = measure(s, log)
    if lead and not measured:
        raise MeasureFailed("every configuration failed: " + "; ".join(failures))
    inputs = predicted = comparison = m = None
    if lead:
        inputs = prediction_inputs(s, link, profile, profile_measured, measured, probes)
        predicted = predict(inputs["profile"], inputs["link"], inputs["host"], s)
        comparison = compare_results(predicted, measured, inputs=inputs["scored_out"])
        m = pick_timeline(comparison, None)[1]
    # Which configuration to clock: rank 0 decides, every rank runs it.
    config = share(None if m is None else (m.strategy, m.bucket_mb))
    timeline_config, note = None, ""
    if config is not None:
        strategy, bucket_mb = config
        timeline_config = strategy + (f":{bucket_mb:g}" if bucket_mb is not None else "")
        if strategy in ("ddp", COMPUTE_ONLY):
            note = ("timeline: torch DDP has no launch hooks, so its measured panel shows "
                    "compute spans only")
        log(f"validate: clocking one step of {timeline_config} for the timeline...")
        try:
            spans = measure_timeline(s, strategy, bucket_mb)
            if lead:
                measured = [dataclasses.replace(r, spans=spans) if r is m else r
                            for r in measured]
                comparison = compare_results(predicted, measured, inputs=inputs["scored_out"])
        except Exception as e:  # the timeline is an illustration; the numbers stand without it
            if is_torchrun():
                raise  # the ranks must stay in step
            note = f"timeline: measuring spans failed ({str(e).splitlines()[0]}); none drawn"
    if not lead:
        return None
    return ValidationReport(s, inputs["link"], inputs["host"], link_info, profile,
                            profile_measured, predicted, measured, comparison, failures,
                            timeline_config, note, inputs["anchor"], inputs["probes"],
                            (load0, os.getloadavg()[0]), time.perf_counter() - start)


def prediction_inputs(s: ValidateSettings, link: Link, profile: ModelProfile,
                      profile_measured: dict | None, measured: list[Result],
                      probes: dict[str, dict]) -> dict:
    """The link, host costs and profile the prediction uses, from the measurements: the host
    costs of the profile phase, then what the probes measured alongside the runs, then the
    compute total anchored to the compute-only row (which is then not scored)."""
    host = None
    if profile_measured is not None and s.model_copies:
        # The DDP implementations' host costs — gradient copies and the hook path per
        # gradient — measured on these ranks with this model (realrun/validate/host_costs.py).
        host = host_from_measurements("profile phase", profile_measured["copy"],
                                      profile_measured["hooks"], list(profile.tensor_bytes),
                                      "realrun validate's profile phase on these ranks")
    probe_info = None
    if probes:
        medians = {name: stats["median_s"] for name, stats in probes.items()}
        medians.update({r.strategy: r.step_s for r in measured if r.strategy == COMPUTE_ONLY})
        link, host, probe_info = inputs_from_probes(
            link, host, medians, list(profile.tensor_bytes), s.world_size,
            contention=probes.get("probe:contention", {}).get("per_rank"))
    anchored = anchor_compute(profile, measured) if s.anchor_compute else None
    sim_profile, anchor, scored_out = profile, None, frozenset()
    if anchored is not None:
        (sim_profile, anchor), scored_out = anchored, frozenset({COMPUTE_ONLY})
    return {"link": link, "host": host, "profile": sim_profile, "anchor": anchor,
            "probes": probe_info, "scored_out": scored_out}
