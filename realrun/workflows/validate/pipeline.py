"""Validate simddp's predictions against real runs of the same configurations.

The whole loop in one call, used by ``python -m realrun validate`` and the notebook::

    from realrun.workflows.validate import ValidateSettings, validate
    report = validate(ValidateSettings(model="mlp-8x1024", bucket_mbs=(1, 10, 100)))
    print(report.text())                       # summary and verdict first, then details
    report.write("out/validate")               # PNGs, validate.json, predicted/measured files

Steps, in order, each a plain function so a notebook can run them one by one
(docs/VALIDATION.md, What it does): :func:`~realrun.workflows.validate.inputs.calibrate_link`
(unless a link is given), :func:`~realrun.workflows.validate.inputs.measure_profile` on every
rank at once, :func:`measure` (every configuration, compute-only and the probes in one world),
:func:`predict` from steps 1 and 2 alone (the prediction before running: the summary and the
verdict are about it), :func:`anchored_prediction` on inputs measured in the same rounds as the
runs, :func:`~realrun.workflows.validate.timeline.timeline_fields` (one configuration clocked
on every rank), then ``simddp.compare`` and the
:class:`~realrun.workflows.validate.report.ValidationReport`.
"""
from __future__ import annotations

import dataclasses
import os
import time

from realrun.bench import run_bench
from realrun.configs import spec_of
from realrun.launch.contention_timing import compute_after_comm
from realrun.launch import LaunchError, is_torchrun, share
from realrun.profile_on_ranks import ProfileRun
from realrun.step_clock import clockable
from realrun.workflows.validate.inputs import calibrate_link, measure_profile, scale_to_compute_only
from realrun.workflows.validate.probes import inputs_from_probes
from realrun.workflows.validate.report import Prediction, ValidationReport
from realrun.workflows.validate.settings import ValidateSettings, bench_payload
from realrun.workflows.validate.timeline import grid_config, timeline_fields
from simddp.compare import compare_results, pick_timeline
from simddp.inputs.host import Host
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.inputs.profile import ModelProfile
from simddp.result import COMPUTE_ONLY, Result
from simddp.planning.sharding import cast_rate
from simddp.planning.registry import TORCH_FSDP
from simddp.predict.sweep import sweep


class MeasureFailed(RuntimeError):
    """Every configuration's real run failed."""


def predict(profile: ModelProfile, link_file: LinkFile, host: Host | None,
            s: ValidateSettings) -> list[Result]:
    """simddp's prediction of every configuration, with ranges (spans kept for the timeline
    plot), on inputs resolved as ``simddp sweep`` resolves them."""
    link_file = dataclasses.replace(link_file, link=link_file.link.for_world(s.world_size))
    mbs = sorted({float(mb) for mb in s.bucket_mbs})
    # fsdp/zero2's casts (at --precision bf16) at the measured host's copy rate
    copy_gbps = None if host is None else host.costs(TORCH_FSDP).copy_gbps
    return sweep(profile, link_file, s.world_size, s.strategies, mbs, host=host, record=True,
                 ranges=True, comm_hooks=s.comm_hooks, shard_unit_mb=s.shard_unit_mb,
                 precision=s.precision, cast_gbps=cast_rate(copy_gbps, None)[0])


def measure(s: ValidateSettings, log=print) -> tuple[list[Result], dict[str, dict], list[str]]:
    """(measured Results, each probe's statistics by name, failures): all configurations and
    the probes in one world, round-robin. If that world fails, each configuration runs alone
    (with compute-only), so the failing ones are named and the rest kept (probes unmeasured)."""
    world = dict(world=s.world, threads=s.threads)
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


def validate(s: ValidateSettings, *, profile_run: ProfileRun | None = None,
             log=lambda msg: None) -> ValidationReport | None:
    """Calibrate (unless ``s.link``), profile (unless given), measure, predict, compare; both
    predictions, before running and anchored, are scored. Under torchrun every rank calls
    this (inside :func:`realrun.launch.torchrun_group`); rank 0 gets the report, others None."""
    start = time.perf_counter()
    load0 = os.getloadavg()[0]
    lead = not is_torchrun() or int(os.environ["RANK"]) == 0
    link, link_info = s.link, None
    if link is None:
        log("validate: calibrating the link (short sweep, same world)...")
        link, link_info = calibrate_link(s, piecewise=s.piecewise, lone_alpha=s.lone_alpha)
    link = None if link is None else as_link_file(link)
    if profile_run is None:
        log("validate: profiling the model on every rank...")
        profile_run = measure_profile(s)
    log(f"validate: measuring {len(s.configs())} configurations x {s.steps} steps...")
    measured, probes, failures = measure(s, log)
    if lead and not measured:
        raise MeasureFailed("every configuration failed: " + "; ".join(failures))
    before = anchored = m = None
    if lead:
        host = profile_host(s, profile_run)
        predicted = predict(profile_run.profile, link, host, s)
        # the profile's buckets decide which sizes are one configuration, as in the verdict
        before = Prediction("before running", link, host, profile_run.profile, predicted,
                            compare_results(predicted, measured, profile=profile_run.profile)
                            .split_halves(s.chunk))
        anchored = anchored_prediction(s, before, measured, probes)
        m = pick_timeline(before.comparison, None)[1]
    # Which configuration to clock: rank 0 decides, every rank runs it.
    config = share(None if m is None else (m.strategy, m.bucket_mb))
    timeline_config, note = None, ""
    if config is not None:
        strategy, bucket_mb = config
        timeline_config = strategy + (f":{bucket_mb:g}" if bucket_mb is not None else "")
        spec = spec_of(grid_config(s, strategy, bucket_mb))
        if spec is None or not clockable(spec):
            note = (f"timeline: {strategy} runs under torch FSDP2 or its own DDP comm hook, "
                    "which leave no room for ours, so its measured panel shows compute "
                    "spans only")
        log(f"validate: clocking one step of {timeline_config} for the timeline...")
        try:
            try:
                fields = timeline_fields(s, strategy, bucket_mb)
            except Exception as e:  # one retry: a world can fail to form on a busy host
                if is_torchrun():
                    raise
                log(f"validate: timeline run failed ({str(e).splitlines()[0]}); retrying once")
                fields = timeline_fields(s, strategy, bucket_mb)
            if lead:
                measured = [dataclasses.replace(r, **fields) if r is m else r
                            for r in measured]
                before, anchored = (p and p.rescored(measured) for p in (before, anchored))
        except Exception as e:  # the timeline is an illustration; the numbers stand without it
            if is_torchrun():
                raise  # the ranks must stay in step
            note = f"timeline: measuring spans failed ({str(e).splitlines()[0]}); none drawn"
    if not lead:
        return None
    return ValidationReport(s, link_info, profile_run.measured, measured, before, anchored,
                            failures, timeline_config, note, (load0, os.getloadavg()[0]),
                            time.perf_counter() - start)


def profile_host(s: ValidateSettings, profile_run: ProfileRun) -> Host | None:
    """The host costs measured with the profile (copies, hooks, this model's contention);
    with --free-copies only the contention is kept."""
    host = profile_run.host
    if not s.model_copies:
        host = None if host.contention is None else Host(
            host.name, {}, host.source, contention=host.contention,
            compute_after_comm=host.compute_after_comm)
    return host


def anchored_prediction(s: ValidateSettings, before: Prediction, measured: list[Result],
                        probes: dict[str, dict]) -> Prediction | None:
    """The prediction re-made with inputs measured alongside the runs; None when neither the
    probes nor the compute anchor ran (it would equal the one before running)."""
    if not probes and not s.anchor_compute:
        return None
    inputs = prediction_inputs(s, before.link_file, before.profile, before.host, measured,
                               probes)
    predicted = predict(inputs["profile"], inputs["link"], inputs["host"], s)
    return Prediction("anchored", inputs["link"], inputs["host"], inputs["profile"], predicted,
                      compare_results(predicted, measured, inputs=inputs["scored_out"],
                                      profile=inputs["profile"]).split_halves(s.chunk),
                      inputs["scored_out"], inputs["anchor"], inputs["probes"])


def prediction_inputs(s: ValidateSettings, link: LinkFile, profile: ModelProfile,
                      host: Host | None, measured: list[Result], probes: dict[str, dict]) -> dict:
    """The anchored prediction's link, host and profile: the profile phase's, then what the
    probes measured, then the compute total anchored to the compute-only row (then not scored)."""
    probe_info = None
    if probes:
        medians = {name: stats["median_s"] for name, stats in probes.items()}
        medians.update({r.strategy: r.step_s for r in measured if r.strategy == COMPUTE_ONLY})
        link, host, probe_info = inputs_from_probes(
            link, host, medians, list(profile.tensor_bytes), s.world_size,
            contention=probes.get("probe:contention", {}).get("per_rank"))
    anchored = scale_to_compute_only(profile, measured) if s.anchor_compute else None
    sim_profile, anchor, scored_out = profile, None, frozenset()
    if anchored is not None:
        (sim_profile, anchor), scored_out = anchored, frozenset({COMPUTE_ONLY})
        per_rank = (probes or {}).get("probe:contention", {}).get("per_rank")
        after = per_rank and compute_after_comm(per_rank,
                                                sim_profile.forward_s + sim_profile.backward_s)
        if host is not None and after:   # against the compute it is anchored to, same rounds
            host = Host(host.name, host.implementations, host.source, host.contention,
                        host.contention_spread, compute_after_comm=after)
    return {"link": link, "host": host, "profile": sim_profile, "anchor": anchor,
            "probes": probe_info, "scored_out": scored_out}
