"""Validate simddp's predictions against real runs of the same configurations.

The whole loop in one call, used by ``python -m realrun validate`` and the notebook::

    from realrun.validate import ValidateSettings, validate
    report = validate(ValidateSettings(model="mlp-8x1024", bucket_mbs=(1, 10, 100)))
    print(report.text())                       # table, summary, recommendation and verdict
    report.write("out/validate")               # PNGs, validate.json, predicted/measured files

Steps, in order (each one a plain function here, so a notebook can run them one by one):

1. :func:`calibrate_link` — unless a link is given: a short ``calibrate`` sweep on the same
   world (same ranks, same emulated hosts): busbw, α from this model's all-reduces issued
   back to back (async and blocking), contention;
2. :func:`measure_profile` — ``realrun profile`` on *every* rank at once; rank 0's per-layer
   times rescaled to its hook-free totals; the wrapper's copy rates and hook costs;
3. :func:`measure` — ``realrun bench`` of every configuration, compute-only and the probes
   (realrun/probes.py) in one world, round-robin; if the world fails, every configuration is
   retried alone so the failing one is named and the others are kept;
4. inputs from the same rounds — :func:`realrun.probes.link_from_probes` (α, busbw, host
   costs) and :func:`anchor_compute` (the compute total), so drift between phases a minute
   apart does not land in every prediction;
5. :func:`predict` — ``simddp.sweep`` of every configuration with that profile and link;
6. :func:`measure_timeline` — a few more steps of one configuration with per-span clock
   reads on rank 0 (forward, backward, optimizer; each all-reduce from its launch, via
   ``realrun.DDP.on_collective_launch``, to its completion, via the work's future);
7. ``simddp.compare.compare_results`` and ``simddp.compare_plots`` for the numbers and plots;
   :class:`realrun.validate_report.ValidationReport` for the text, JSON and files.

torch's ``ddp`` is run with ``bucket_cap_mb_list=[1, X]`` (see realrun.bench and docs/CLI.md),
so it executes simddp's ``ddp`` plan: a 1 MiB first bucket, then buckets of at most X.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass, field

from realrun.validate_inputs import (  # noqa: F401
    anchor_compute,
    calibrate_link,
    measure_profile,
    spec_dict,
)
from realrun.validate_report import ValidationReport
from realrun.validate_timeline import measure_timeline  # noqa: F401
from simddp.compare import compare_results, pick_timeline
from simddp.errors import InputError
from simddp.host import Host
from simddp.link import Link
from simddp.presets.models import ModelSpec
from simddp.profile import ModelProfile
from simddp.result import Result
from simddp.sweeps import sweep

BENCH_STRATEGIES = ("naive", "flat", "overlap", "bucketed", "ddp")
PER_BUCKET = ("bucketed", "ddp")
COMPUTE_ONLY = "compute-only"


@dataclass(frozen=True)
class ValidateSettings:
    """Everything one validation needs; checked in ``__post_init__`` (InputError, one line)."""

    model: str = "mlp-8x1024"
    shrink: dict = field(default_factory=dict)      # layers, d_model, d_ff, heads, vocab
    batch: int = 2
    seq: int = 8
    optimizer: str = "sgd"
    threads: int = 1
    seed: int = 0
    strategies: tuple[str, ...] = BENCH_STRATEGIES
    bucket_mbs: tuple[float, ...] = (1.0, 4.0, 10.0, 40.0)
    world_size: int = 2
    emulate_hosts: int | None = None
    link_gbit: float | None = None
    link: Link | None = None                         # None: calibrate first
    steps: int = 30
    warmup: int = 5
    chunk: int = 5
    profile_repeats: int = 15
    timeline_steps: int = 5
    timeout_s: float = 60.0
    calibrate_iters: int = 20
    piecewise: bool = False                          # calibrate two α–β lines (see below)
    lone_alpha: bool = False                         # calibrate --no-sequence (old α)
    anchor_compute: bool = True                      # compute total from the compute-only row
    probes: bool = True                              # link + hooks measured in the same run
    model_copies: bool = True                        # charge the wrapper's copies (copy_gbps)
    rank_max: bool = False                           # compute = slowest rank's step (jitter)

    def __post_init__(self) -> None:
        for name in ("batch", "seq", "threads", "world_size", "steps", "warmup", "chunk",
                     "profile_repeats", "timeline_steps", "calibrate_iters"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"--{name.replace('_', '-')} must be an integer >= 1, got {v!r}")
        if self.world_size < 2:
            raise InputError(f"--world-size must be >= 2 (one rank has nothing to sync), "
                             f"got {self.world_size}")
        if "ddp" in self.strategies and self.warmup < 2:
            raise InputError(f"--warmup {self.warmup}: torch ddp rebuilds its buckets in its "
                             "second step; use --warmup >= 2")
        bad = [s for s in self.strategies if s not in BENCH_STRATEGIES]
        if bad or not self.strategies:
            raise InputError(f"--strategies: {bad[0] if bad else 'nothing'!r} is not one of "
                             f"{', '.join(BENCH_STRATEGIES)} (or all)")
        if any(s in PER_BUCKET for s in self.strategies) and not self.bucket_mbs:
            raise InputError("--bucket-mb: empty grid; give bucket sizes, e.g. 1,10,100")
        for mb in self.bucket_mbs:
            if not (isinstance(mb, (int, float)) and math.isfinite(mb) and mb > 0):
                raise InputError(f"--bucket-mb: {mb!r} is not a number of MB > 0")
        if not (isinstance(self.timeout_s, (int, float)) and self.timeout_s > 0):
            raise InputError(f"--timeout-s must be > 0, got {self.timeout_s!r}")
        if self.emulate_hosts is not None and self.emulate_hosts != self.world_size:
            raise InputError(f"--emulate-hosts {self.emulate_hosts}: must equal --world-size "
                             f"{self.world_size} (one rank per emulated host)")
        if self.link_gbit is not None and (self.emulate_hosts is None or not self.link_gbit > 0):
            raise InputError(f"--link-gbit {self.link_gbit!r}: needs --emulate-hosts and a "
                             "rate > 0")
        if self.link is not None:
            self.link.for_world(self.world_size)  # InputError if calibrated at another size

    @property
    def spec(self) -> ModelSpec:
        from simddp.presets.models import parse_model
        return parse_model(self.model).shrunk(**self.shrink)

    def configs(self) -> list[dict]:
        """compute-only first, then bucket-less strategies once, bucketed/ddp per cap."""
        out = [{"strategy": COMPUTE_ONLY, "bucket_mb": None}]
        mbs = sorted({float(mb) for mb in self.bucket_mbs})
        for name in (s for s in BENCH_STRATEGIES if s in self.strategies):
            if name in PER_BUCKET:
                out += [{"strategy": name, "bucket_mb": mb} for mb in mbs]
            else:
                out.append({"strategy": name, "bucket_mb": None})
        if self.probes:  # measured in the same rounds, not compared (realrun/probes.py)
            from realrun.probes import HOST_PROBES, PROBES
            out += [{"strategy": name, "bucket_mb": None} for name in PROBES
                    if self.model_copies or name not in HOST_PROBES]  # --free-copies
        return out

    def world(self) -> dict:
        return {"world_size": self.world_size, "emulate_hosts": self.emulate_hosts,
                "link_gbit": self.link_gbit, "timeout_s": self.timeout_s}


# ---------------------------------------------------------------------------------------------
# 3. predict


def predict(profile: ModelProfile, link: Link, host: Host | None,
            s: ValidateSettings) -> list[Result]:
    """simddp's prediction of every configuration (spans kept for the timeline plot)."""
    link = link.for_world(s.world_size)
    mbs = sorted({float(mb) for mb in s.bucket_mbs})
    # realrun bench runs torch DDP with bucket_cap_mb_list=[1, X]: simddp's ddp plan exactly
    return sweep(profile, link, s.world_size, s.strategies, mbs, host=host, record=True)


# ---------------------------------------------------------------------------------------------
# 4. measure


def bench_payload(s: ValidateSettings, configs: list[dict]) -> dict:
    return {"spec": spec_dict(s.spec), "configs": configs, "batch": s.batch, "seq": s.seq,
            "steps": s.steps, "warmup": s.warmup, "chunk": s.chunk, "seed": s.seed,
            "optimizer": s.optimizer, "trace_dir": None, "trace_steps": 1, "progress": False}


def measure(s: ValidateSettings, log=print) -> tuple[list[Result], list[str]]:
    """(measured Results, failures) — all configurations in one world, round-robin.

    If that world fails, each configuration runs alone (with compute-only) so the failing
    ones are named in ``failures`` ("bucketed:10: rank 1 failed: ...") and the rest kept.
    """
    from realrun.bench import run_bench
    from realrun.errors import LaunchError
    world = dict(world_size=s.world_size, threads=s.threads, timeout_s=s.timeout_s,
                 emulate_hosts=s.emulate_hosts, link_gbit=s.link_gbit)
    configs = s.configs()
    try:
        results, _ = run_bench(bench_payload(s, configs), **world)
        return results, []
    except LaunchError as e:
        log(f"validate: the shared run failed ({str(e).splitlines()[0]}); "
            "retrying each configuration alone")
    kept: dict[tuple, Result] = {}
    failures = []
    for config in configs[1:]:
        try:
            results, _ = run_bench(bench_payload(s, [configs[0], config]), **world)
        except LaunchError as e:
            failures.append(f"{config_name(config)}: {str(e).splitlines()[0]}")
            log(f"validate: {failures[-1]}")
            continue
        for r in results:
            kept.setdefault((r.strategy, r.bucket_mb), r)
    return list(kept.values()), failures


def config_name(config: dict) -> str:
    mb = config["bucket_mb"]
    return config["strategy"] if mb is None else f"{config['strategy']}:{mb:g}"


def validate(s: ValidateSettings, *, profile: ModelProfile | None = None,
             profile_measured: dict | None = None, log=lambda msg: None) -> ValidationReport:
    """Calibrate (unless ``s.link``), profile (unless given), predict, measure, compare.

    A given ``profile`` comes with ``profile_measured`` (both from :func:`measure_profile`) for
    the host costs (copies, hooks) to be charged; without it they are not."""
    start = time.perf_counter()
    load0 = os.getloadavg()[0]
    link, link_info = s.link, None
    if link is None:
        log("validate: calibrating the link (short sweep, same world)...")
        link, link_info = calibrate_link(s, piecewise=s.piecewise, lone_alpha=s.lone_alpha)
    if profile is None:
        log("validate: profiling the model on every rank...")
        profile, profile_measured = measure_profile(s)
    host = None
    if profile_measured is not None and s.model_copies:
        # The DDP implementations' host costs — gradient copies and the hook path per
        # gradient — measured on these ranks with this model (realrun/host_costs.py).
        from realrun.host_costs import host_from_measurements
        host = host_from_measurements("profile phase", profile_measured["copy"],
                                      profile_measured["hooks"], list(profile.tensor_bytes),
                                      "realrun validate's profile phase on these ranks")
    log(f"validate: measuring {len(s.configs())} configurations x {s.steps} steps...")
    measured, failures = measure(s, log)
    if not measured:
        raise MeasureFailed("every configuration failed: " + "; ".join(failures))
    from realrun.probes import inputs_from_probes, is_probe
    probes = {r.strategy: r.step_s for r in measured if is_probe(r.strategy)}
    measured = [r for r in measured if not is_probe(r.strategy)]
    probe_info = None
    if probes:
        probes.update({r.strategy: r.step_s for r in measured if r.strategy == COMPUTE_ONLY})
        link, host, probe_info = inputs_from_probes(link, host, probes,
                                                    list(profile.tensor_bytes), s.world_size)
    anchored = anchor_compute(profile, measured) if s.anchor_compute else None
    anchor, inputs = None, frozenset()
    if anchored is not None:
        (sim_profile, anchor), inputs = anchored, frozenset({COMPUTE_ONLY})
    predicted = predict(sim_profile if anchor else profile, link, host, s)
    comparison = compare_results(predicted, measured, inputs=inputs)
    _, m = pick_timeline(comparison, None)
    timeline_config, note = None, ""
    if m is not None:
        timeline_config = m.strategy + (f":{m.bucket_mb:g}" if m.bucket_mb is not None else "")
        if m.strategy in ("ddp", COMPUTE_ONLY):
            note = ("timeline: torch DDP has no launch hooks, so its measured panel shows "
                    "compute spans only")
        log(f"validate: clocking one step of {timeline_config} for the timeline...")
        try:
            spans = measure_timeline(s, m.strategy, m.bucket_mb)
            measured = [dataclasses.replace(r, spans=spans) if r is m else r for r in measured]
            comparison = compare_results(predicted, measured, inputs=inputs)
        except Exception as e:  # the timeline is an illustration; the numbers stand without it
            note = f"timeline: measuring spans failed ({str(e).splitlines()[0]}); none drawn"
    return ValidationReport(s, link, host, link_info, profile, profile_measured, predicted,
                            measured,
                            comparison, failures, timeline_config, note, anchor, probe_info,
                            (load0, os.getloadavg()[0]), time.perf_counter() - start)


class MeasureFailed(RuntimeError):
    """Every configuration's real run failed."""
