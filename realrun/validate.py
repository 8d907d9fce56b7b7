"""Validate simddp's predictions against real runs of the same configurations.

The whole loop in one call, used by ``python -m realrun validate`` and the notebook::

    from realrun.validate import ValidateSettings, validate
    report = validate(ValidateSettings(model="mlp-8x1024", bucket_mbs=(1, 10, 100)))
    print(report.text())                       # table, summary, recommendation and verdict
    report.write("out/validate")               # PNGs, validate.json, predicted/measured files

Steps, in order (each one a plain function here, so a notebook can run them one by one):

1. :func:`calibrate_link` — unless a link is given: a short ``calibrate`` sweep on the same
   world (same ranks, same emulated hosts) fits α/busbw and measures contention;
2. :func:`measure_profile` — ``realrun profile`` on *every* rank at once, so each rank's
   compute sees the same neighbours (memory bandwidth, caches) as in the real run; rank 0's
   per-layer times are rescaled to its hook-free forward/backward totals (hooks cost Python
   time that training does not pay);
3. :func:`predict` — ``simddp.sweep`` of every configuration with that profile and link;
4. :func:`measure` — ``realrun bench`` of the same configurations (one world, round-robin);
   if the world fails, every configuration is retried alone so the failing one is named and
   the others are kept;
5. :func:`measure_timeline` — a few more steps of one configuration with per-span clock
   reads on rank 0 (forward, backward, optimizer; each all-reduce from its launch, via
   ``realrun.DDP.on_collective_launch``, to its completion, via the work's future);
6. ``simddp.compare.compare_results`` and ``simddp.compare_plots`` for the numbers and plots.

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
from realrun.validate_timeline import measure_timeline  # noqa: F401
from simddp.compare import Comparison, compare_results, format_table, pick_timeline
from simddp.errors import InputError
from simddp.link import Link
from simddp.models import ModelSpec
from simddp.profile import ModelProfile
from simddp.result import Result
from simddp.sweep import recommend, sweep

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
        from simddp.models import parse_model
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
            from realrun.probes import PROBES
            out += [{"strategy": name, "bucket_mb": None} for name in PROBES]
        return out

    def world(self) -> dict:
        return {"world_size": self.world_size, "emulate_hosts": self.emulate_hosts,
                "link_gbit": self.link_gbit, "timeout_s": self.timeout_s}


# ---------------------------------------------------------------------------------------------
# 3. predict


def predict(profile: ModelProfile, link: Link, s: ValidateSettings) -> list[Result]:
    """simddp's prediction of every configuration (spans kept for the timeline plot)."""
    link = link.for_world(s.world_size)
    mbs = sorted({float(mb) for mb in s.bucket_mbs})
    # realrun bench runs torch DDP with bucket_cap_mb_list=[1, X]: simddp's ddp plan exactly
    return sweep(profile, link, s.world_size, s.strategies, mbs, record=True)


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


# ---------------------------------------------------------------------------------------------
# 6. the report


@dataclass
class ValidationReport:
    settings: ValidateSettings
    link: Link
    link_info: dict | None
    profile: ModelProfile
    profile_measured: dict | None
    predicted: list[Result]
    measured: list[Result]
    comparison: Comparison
    failures: list[str]
    timeline_config: str | None
    timeline_note: str
    compute_anchor: dict | None      # profile vs measured compute-only ms, and the factor
    probes: dict | None              # link fields set from the in-run probes, and medians
    load: tuple[float, float]        # 1-min load average before and after
    elapsed_s: float

    def verdict(self) -> dict:
        """simddp's recommendation and whether the measurement proves or refutes it."""
        from simddp.commands.sweep import recommendation_text
        rec = recommend(self.predicted)
        naive = next((r for r in self.predicted if r.strategy == "naive"), None)
        out = {"recommendation": recommendation_text(rec, naive), "proven": None, "text": ""}
        if rec is None:
            return out
        measured = [r for r in self.measured if r.strategy == rec.strategy
                    and r.bucket_mb is not None]
        at_rec = next((r for r in measured if abs(r.bucket_mb - rec.bucket_mb)
                       <= 1e-3 * rec.bucket_mb), None)
        if at_rec is None:
            out["text"] = (f"Not measured: {rec.strategy} at {rec.bucket_mb:g} MB did not run, "
                           "so the recommendation is neither proven nor refuted.")
            return out
        best = min(measured, key=lambda r: r.step_s)
        regret = 100 * (at_rec.step_s / best.step_s - 1)
        # Within the measured p5-p95 spread of the best, the two are not distinguishable.
        tied = best.step_p95_s is not None and at_rec.step_s <= best.step_p95_s
        proven = best is at_rec or tied
        out.update(proven=proven, measured_best_mb=best.bucket_mb, regret_pct=regret)
        if best is at_rec:
            out["text"] = (f"PROVEN: measured, {rec.strategy} at {rec.bucket_mb:g} MB is the "
                           f"fastest bucket size ({at_rec.step_ms:.2f} ms median).")
        elif tied:
            out["text"] = (f"PROVEN within noise: the measured best is {best.bucket_mb:g} MB "
                           f"({best.step_ms:.2f} ms); {rec.bucket_mb:g} MB is {regret:.1f}% "
                           f"slower, inside the best's p95 ({best.step_p95_s * 1e3:.2f} ms).")
        else:
            out["text"] = (f"REFUTED: the measured best is {best.bucket_mb:g} MB "
                           f"({best.step_ms:.2f} ms); following the recommendation costs "
                           f"{regret:.1f}% ({at_rec.step_ms:.2f} ms).")
        return out

    def to_json(self) -> dict:
        doc = self.comparison.to_json()
        doc["summary"]["failures"] = list(self.failures)
        doc["validate"] = {
            "link": {"name": self.link.name, "alpha_us": self.link.alpha_s * 1e6,
                     "blocking_alpha_us": (None if self.link.blocking_alpha_s is None
                                           else self.link.blocking_alpha_s * 1e6),
                     "busbw_gbps": self.link.busbw_gbps,
                     "compute_slowdown": self.link.compute_slowdown,
                     "comm_slowdown": self.link.comm_slowdown,
                     "copy_gbps": self.link.copy_gbps, "scale_gbps": self.link.scale_gbps,
                     "hook_us": None if self.link.hook_s is None else self.link.hook_s * 1e6,
                     "launch_us": None if self.link.launch_s is None else self.link.launch_s * 1e6,
                     "ddp_hook_us": (None if self.link.ddp_hook_s is None
                                     else self.link.ddp_hook_s * 1e6),
                     "calibrated_here": self.link_info},
            "profile": {"forward_ms": self.profile.forward_s * 1e3,
                        "backward_ms": self.profile.backward_s * 1e3,
                        "optimizer_ms": self.profile.optimizer_s * 1e3,
                        "tensors": self.profile.n_tensors,
                        "grad_mib": self.profile.grad_total_bytes / 2 ** 20},
            "compute_anchor": self.compute_anchor, "probes": self.probes,
            "verdict": self.verdict(), "timeline_config": self.timeline_config,
            "timeline_note": self.timeline_note, "load_before_after": list(self.load),
            "elapsed_s": round(self.elapsed_s, 1)}
        return doc

    def text(self) -> str:
        s, l = self.settings, self.link
        lines = [f"# validate: {self.profile.name}, batch {s.batch} x seq {s.seq}, "
                 f"{s.world_size} ranks; link {l.name}: α {l.alpha_s * 1e6:.0f} µs"
                 + ("" if l.blocking_alpha_s is None else
                    f" (blocking {l.blocking_alpha_s * 1e6:.0f} µs)") + ", busbw "
                 f"{l.busbw_gbps:.3g} GB/s, contention compute x{l.compute_slowdown:.2f} "
                 f"comm x{l.comm_slowdown:.2f}, copies "
                 + ("free" if l.copy_gbps is None else f"{l.copy_gbps:.2f} GB/s")
                 + ("" if l.hook_s is None else f", hooks {l.hook_s * 1e6:.0f} µs per gradient"
                    f" + {(l.launch_s or 0) * 1e6:.0f} µs per launch (torch ddp "
                    f"{(l.ddp_hook_s or 0) * 1e6:.0f} µs per gradient)"),
                 f"# profile: forward {self.profile.forward_s * 1e3:.2f} ms, backward "
                 f"{self.profile.backward_s * 1e3:.2f} ms, optimizer "
                 f"{self.profile.optimizer_s * 1e3:.2f} ms, {self.profile.n_tensors} tensors "
                 f"({self.profile.grad_total_bytes / 2 ** 20:.1f} MiB); load "
                 f"{self.load[0]:.2f} -> {self.load[1]:.2f}; {self.elapsed_s:.0f} s",
                 format_table(self.comparison)]
        pr = self.probes
        if pr is not None and pr["fields"]:
            def show(k: str, v: float) -> str:
                return f"busbw {v:.3g} GB/s" if k == "busbw_gbps" else f"{k} {v * 1e6:.0f} µs"
            lines.insert(2, "# link from probes run alongside the strategies: "
                         + ", ".join(show(k, v) for k, v in pr["fields"].items())
                         + " (the calibration phase said: " + ", ".join(
                             "-" if v is None else show(k, v)
                             for k, v in pr["calibrated"].items()) + ")")
        a = self.compute_anchor
        if a is not None:
            lines.insert(2, f"# compute: {a['profile_ms']:.2f} ms per step in the profile phase,"
                         f" set to the compute-only median measured alongside the strategies, "
                         f"{a['measured_ms']:.2f} ms (x{a['factor']:.3f}); --profile-compute "
                         "keeps the profile's")
        for f in self.failures:
            lines.append(f"FAILED {f}")
        v = self.verdict()
        lines += ["", v["recommendation"]]
        if v["text"]:
            lines.append(v["text"])
        if self.timeline_note:
            lines.append(self.timeline_note)
        return "\n".join(lines)

    def write(self, out_dir: str) -> list[str]:
        """validate.json, compare.{json,csv}, predicted.json, measured.json, link.json, PNGs."""
        import json

        from simddp.compare_plots import write_compare_files
        from simddp.io import (
            link_to_json,
            profile_to_json,
            results_to_json,
            write_atomic,
        )
        paths = [str(p) for p in write_compare_files(self.comparison, out_dir,
                                                     timeline=self.timeline_config)]
        files = {"validate.json": self.to_json(),
                 "predicted.json": results_to_json(self.predicted),
                 "measured.json": results_to_json(self.measured),
                 "link.json": link_to_json(self.link),
                 "profile.json": {**profile_to_json(self.profile),
                                  "measured": self.profile_measured}}
        for name, doc in files.items():
            path = os.path.join(out_dir, name)
            write_atomic(path, json.dumps(doc, indent=1) + "\n")
            paths.append(path)
        return paths


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
    if profile_measured is not None and link.copy_gbps is None and s.model_copies:
        # The DDP implementations' host costs — gradient copies and the hook path per
        # gradient — measured on these ranks with this model (realrun/host_costs.py).
        from realrun.host_costs import hook_fields
        copy = profile_measured["copy"]
        link = dataclasses.replace(link, copy_gbps=copy["copy_gbps"],
                                   scale_gbps=copy["in_place_gbps"],
                                   **hook_fields(profile_measured["hooks"], copy,
                                                 list(profile.tensor_bytes)))
    log(f"validate: measuring {len(s.configs())} configurations x {s.steps} steps...")
    measured, failures = measure(s, log)
    if not measured:
        raise MeasureFailed("every configuration failed: " + "; ".join(failures))
    from realrun.probes import is_probe, link_from_probes
    probes = {r.strategy: r.step_s for r in measured if is_probe(r.strategy)}
    measured = [r for r in measured if not is_probe(r.strategy)]
    probe_info = None
    if probes:
        probes.update({r.strategy: r.step_s for r in measured if r.strategy == COMPUTE_ONLY})
        link, probe_info = link_from_probes(link, probes, list(profile.tensor_bytes),
                                            s.world_size)
    anchored = anchor_compute(profile, measured) if s.anchor_compute else None
    anchor, inputs = None, frozenset()
    if anchored is not None:
        (sim_profile, anchor), inputs = anchored, frozenset({COMPUTE_ONLY})
    predicted = predict(sim_profile if anchor else profile, link, s)
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
    return ValidationReport(s, link, link_info, profile, profile_measured, predicted, measured,
                            comparison, failures, timeline_config, note, anchor, probe_info,
                            (load0, os.getloadavg()[0]), time.perf_counter() - start)


class MeasureFailed(RuntimeError):
    """Every configuration's real run failed."""
