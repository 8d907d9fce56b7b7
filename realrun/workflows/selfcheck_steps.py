"""The five steps of ``python -m realrun selfcheck`` (realrun/commands/selfcheck.py), in order.

Each step is the library call its own command makes — ``run_world`` (init), ``calibrate.run``
with ``CalibrateSettings.short`` (validate's recipe), ``profile_world``, ``run_bench`` — and
validate is validate's own prediction and report (realrun.workflows.validate) on what those three
measured, so nothing is measured twice. :class:`Check` carries what one step hands the next::

    check = Check(args, workload, world, (1.0, 4.0), "sc", lead=True)
    steps = run_steps(check, report=print)      # [Step(init), Step(calibrate), ...]

Every rank runs every step (under torchrun each is one ``run_world`` in torchrun's group);
only the lead (the launching process, or torchrun's rank 0) gets results and writes files.
"""
from __future__ import annotations

import argparse
import os
import time
from contextlib import ExitStack

from realrun.launch.env import is_torchrun
from realrun.launch.world import WorldConfig
from realrun.workflows.selfcheck import Step, run_step, skipped
from realrun.workload import Workload
from simddp.planning.registry import Name

# Steps per round-robin turn of the bench step: 20 steps make 4 turns, so validate's verdict
# has each row's split halves to judge against (simddp/compare/noise.py).
CHUNK = 5


class Check:
    """One self-check: its inputs, and what each step measured for the next (None: not
    measured, or a torchrun rank other than 0)."""

    def __init__(self, args: argparse.Namespace, workload: Workload, world: WorldConfig,
                 buckets: tuple[float, ...], out: str, lead: bool) -> None:
        self.args, self.workload, self.world, self.buckets = args, workload, world, buckets
        self.out, self.lead = out, lead
        self.load0 = os.getloadavg()[0]
        self.start = time.perf_counter()
        self.stack = ExitStack()  # torchrun's process group, left after the bundle is written
        self.ranks = self.link = self.link_info = self.profile_run = self.measured = None

    def folder(self, name: str) -> str:
        path = os.path.join(self.out, name)
        os.makedirs(path, exist_ok=True)
        return path

    def rel(self, paths) -> list[str]:
        return [os.path.relpath(str(p), self.out) for p in paths]

    def load(self) -> list[float]:
        return [round(self.load0, 2), round(os.getloadavg()[0], 2)]

    def settings_json(self) -> dict:
        a = self.args
        return {"model": self.workload.name, "module": a.module, "batch": a.batch,
                "seq": a.seq, "precision": a.precision, "optimizer": a.optimizer,
                "threads": a.threads, "seed": a.seed, "strategy": Name.DDP,
                "bucket_mb": list(self.buckets), "steps": a.steps,
                "profile_repeats": a.profile_repeats, "calibrate_iters": a.calibrate_iters,
                "world": {**self.world.launch_args(), "link": self.world.link_label,
                          "torchrun": is_torchrun()}}

    def close(self) -> None:
        """Leave torchrun's group (a barrier, then teardown). After a failed step a peer may
        be gone: that ends in an error after the timeout, which is not the check's result."""
        try:
            self.stack.close()
        except Exception as e:  # noqa: BLE001
            if self.lead:
                print(f"note: leaving torchrun's group: {str(e).splitlines()[0]}", flush=True)


def run_steps(check: Check, report=lambda step: None) -> list[Step]:
    """Every step in order, ``report``-ed as it ends. A failed init skips the rest (there is
    no world to measure on); under torchrun any failed step skips the measuring steps after
    it (a peer may still sit in the failed step's collectives)."""
    steps: list[Step] = []
    for name, fn in (("init", init_step), ("calibrate", calibrate_step),
                     ("profile", profile_step), ("bench", bench_step),
                     ("validate", validate_step)):
        failed = [s.name for s in steps if s.status == "failed"]
        if "init" in failed:
            step = skipped(name, "init failed: the ranks did not form a working world")
        elif failed and is_torchrun() and name != "validate":
            step = skipped(name, f"{failed[0]} failed under torchrun: the ranks' collectives "
                                 "may no longer line up")
        else:
            step = fn(check)
        steps.append(step)
        report(step)
    return steps


def init_step(c: Check) -> Step:
    def work():
        from realrun.launch import run_world, torchrun_group
        if is_torchrun():  # one group for every step, as realrun validate does
            c.stack.enter_context(torchrun_group(c.world.backend, c.args.threads,
                                                 c.world.timeout_s))
        ranks = run_world("realrun.workflows.selfcheck:init_rank", {},
                          threads_per_rank=c.args.threads, **c.world.launch_args())
        if ranks is None:
            return {}, []
        c.ranks = ranks
        bad = [r["rank"] for r in ranks if not r["allreduce_ok"]]
        if bad:
            raise RuntimeError(f"the all-reduce returned a wrong sum on rank(s) {bad}")
        hosts = sorted({r["hostname"] for r in ranks})
        gpus = sorted({r["gpu"]["name"] for r in ranks if r["gpu"]})
        devices = sorted({r["device"].split(":")[0] for r in ranks})
        figures = {"ranks": len(ranks), "hosts": hosts, "devices": devices, "gpu_names": gpus,
                   "allreduce_ms_max": max(r["allreduce_ms"] for r in ranks)}
        figures["summary"] = (f"{len(ranks)} ranks on {len(hosts)} host(s), "
                              f"{c.world.backend} on {'/'.join(devices)}, link "
                              f"{c.world.link_label}"
                              + (f" ({', '.join(gpus)})" if gpus else "")
                              + "; checked all-reduce ok")
        return figures, []
    return run_step("init", work)


def calibrate_step(c: Check) -> Step:
    if c.world.world_size < 2:
        return skipped("calibrate", "one rank: no link between ranks to calibrate")

    def work():
        import calibrate
        from calibrate.files import write_outputs
        from calibrate.settings import CalibrateSettings
        from realrun.tensors import tensor_bytes
        sizes = tensor_bytes(c.workload.build(c.args.seed, 0, "cpu")[0])
        cal = calibrate.run(CalibrateSettings.short(
            c.world, sizes, iters=c.args.calibrate_iters, threads_per_rank=c.args.threads))
        if cal is None:
            return {}, []
        run = cal.worlds[0]
        c.link, link = run.link_file, run.link
        gloo, contention = run.host, run.link_contention
        compute, comm = (1.0, 1.0) if contention is None else contention.factors
        files = c.rel(write_outputs(cal, c.folder("calibrate")))
        c.link_info = figures = {
            "alpha_us": link.alpha_s * 1e6, "busbw_gbps": link.busbw_gbps,
            "blocking_alpha_us": (None if gloo is None or gloo.blocking_alpha_s is None
                                  else gloo.blocking_alpha_s * 1e6),
            # the line as calibrate judges it: on the held-out sizes it claims
            # (calibrate/judged.py), one figure with the report's
            "r2_log": run.heldout.get("r2_log"), "r2_judged_on": run.heldout.get("judged_on"),
            "heldout_median_err": run.heldout.get("median_rel_err"),
            "compute_slowdown": compute, "comm_slowdown": comm,
            "sizes_bytes": [cal.settings.min_bytes, cal.settings.max_bytes],
            "iters": c.args.calibrate_iters}
        figures["summary"] = (f"α {link.alpha_s * 1e6:.0f} µs, busbw {link.busbw_gbps:.3g} "
                              f"GB/s, contention compute x{compute:.2f} comm x{comm:.2f}")
        return figures, files
    return run_step("calibrate", work)


def profile_step(c: Check) -> Step:
    def work():
        from realrun.profile_on_ranks import profile_world
        from simddp.sim.engine import compute_only_s
        from simddp.inputs.io import profile_to_json, save_json
        a = c.args
        run = profile_world(c.workload, c.world, threads=a.threads, repeats=a.profile_repeats,
                            optimizer=a.optimizer, seed=a.seed, precision=a.precision)
        if run is None:
            return {}, []
        c.profile_run = run
        p = run.profile
        path = os.path.join(c.folder("profile"), "profile.json")
        save_json(path, {**profile_to_json(p, host=run.host), "measured": run.measured})
        compute_ms = compute_only_s(p, 1) * 1e3
        figures = {"compute_ms": compute_ms, "forward_ms": p.forward_s * 1e3,
                   "backward_ms": p.backward_s * 1e3, "optimizer_ms": p.optimizer_s * 1e3,
                   "tensors": p.n_tensors, "grad_mib": p.grad_total_bytes / 2 ** 20,
                   "compute_spread": p.compute_spread}
        figures["summary"] = (f"{p.name}: compute {compute_ms:.2f} ms per step (forward "
                              f"{p.forward_s * 1e3:.2f}, backward {p.backward_s * 1e3:.2f}), "
                              f"{p.n_tensors} gradients, {p.grad_total_bytes / 2 ** 20:.1f} MiB")
        return figures, c.rel([path])
    return run_step("profile", work)


def bench_step(c: Check) -> Step:
    def work():
        from realrun.bench import run_bench
        from realrun.configs import bench_configs
        from simddp.inputs.io import save_json
        from simddp.result import results_to_json
        a = c.args
        configs = bench_configs((Name.DDP,), c.buckets, (), None)  # compute-only, ddp per size
        # warmup 3: torch DDP rebuilds its buckets in its second step (realrun/bench.py)
        payload = {"workload": c.workload.to_json(), "configs": configs,
                   "precision": a.precision, "steps": a.steps, "warmup": 3, "chunk": CHUNK,
                   "seed": a.seed, "optimizer": a.optimizer, "trace_dir": None,
                   "trace_steps": 1, "progress": False}
        run = run_bench(payload, world=c.world, threads=a.threads)
        if run is None:
            return {}, []
        c.measured = run.results
        path = os.path.join(c.folder("bench"), "bench.json")
        save_json(path, results_to_json(run.results, bench={k: v for k, v in payload.items()
                                                            if k != "workload"}))
        rows = [{"config": s["label"], "median_ms": s["median_s"] * 1e3,
                 "p95_ms": s["p95_s"] * 1e3, "collectives": s["collectives"]}
                for s in run.stats]
        figures = {"rows": rows, "summary": ", ".join(
            f"{r['config']} {r['median_ms']:.1f} ms" + (
                f" ({r['collectives']} all-reduce{'s' * (r['collectives'] != 1)})"
                if r["collectives"] else "")
            for r in rows)}
        return figures, c.rel([path])
    return run_step("bench", work)


def validate_step(c: Check) -> Step:
    if c.world.world_size < 2:
        return skipped("validate", "one rank: nothing is all-reduced, so nothing to predict")
    if not c.lead:
        return Step("validate")  # rank 0 predicts and writes; no collectives here
    missing = [n for n, v in (("calibrate", c.link), ("profile", c.profile_run),
                              ("bench", c.measured)) if v is None]
    if missing:
        return skipped("validate", f"needs what {' and '.join(missing)} measured")
    return run_step("validate", lambda: _validate(c))


def _validate(c: Check):
    from realrun.workflows.validate import ValidateSettings
    from realrun.workflows.validate.pipeline import anchored_prediction, predict, profile_host
    from realrun.workflows.validate.report import Prediction, ValidationReport
    from simddp.compare import compare_results
    a = c.args
    s = ValidateSettings(
        model=a.model or "mlp-8x512", module=a.module, shrink={
            f: getattr(a, f) for f in ("layers", "d_model", "d_ff", "heads", "vocab")
            if getattr(a, f) is not None}, batch=a.batch, seq=a.seq,
        precision=a.precision, world=c.world, optimizer=a.optimizer, threads=a.threads,
        seed=a.seed, strategies=(Name.DDP,), bucket_mbs=c.buckets, link=c.link,
        steps=a.steps, warmup=3, chunk=CHUNK, profile_repeats=a.profile_repeats,
        calibrate_iters=a.calibrate_iters, probes=False)
    profile, measured = c.profile_run.profile, c.measured
    host = profile_host(s, c.profile_run)
    predicted = predict(profile, c.link, host, s)
    before = Prediction("before running", c.link, host, profile, predicted,
                        compare_results(predicted, measured, profile=profile)
                        .split_halves(CHUNK))
    anchored = anchored_prediction(s, before, measured, {})
    report = ValidationReport(
        s, c.link_info, c.profile_run.measured, measured, before, anchored, [], None,
        "timeline: not clocked by selfcheck (predicted spans only)",
        (c.load0, os.getloadavg()[0]), time.perf_counter() - c.start)
    files = c.rel(report.write(c.folder("validate")))
    sm, v = before.comparison.summary, report.verdict()
    figures = {"median_ape_pct": sm.median_ape, "max_ape_pct": sm.max_ape,
               "spearman": sm.spearman,
               "anchored_median_ape_pct": (None if anchored is None
                                           else anchored.comparison.summary.median_ape),
               "recommendation": v["recommendation"], "proven": v["proven"],
               "verdict": v["text"], "verdict_word": v["word"],
               "verdict_margin_pct": v.get("verdict_margin_pct"),
               "spread_pct": v.get("spread_pct"), "spread_from": v.get("spread_from")}
    figures["summary"] = (f"prediction |error| median {sm.median_ape:.1f} %, max "
                          f"{sm.max_ape:.1f} %; verdict: {verdict_words(v)}")
    return figures, files


def verdict_words(v: dict) -> str:
    """The verdict's word with the margin and spread it rests on, for the one-line summary.

    >>> verdict_words({"word": "CANNOT TELL", "claim": None, "verdict_margin_pct": 2.7,
    ...                "spread_pct": 12.1})
    'CANNOT TELL (margin 2.7 % < spread 12.1 %)'
    >>> verdict_words({"word": "NOT JUDGED"}), verdict_words({"word": None})
    ('NOT JUDGED', 'not judged')
    """
    word = v.get("word") or "not judged"
    margin, spread = v.get("verdict_margin_pct"), v.get("spread_pct")
    if margin is None or spread is None:
        return word
    sign = ">" if v.get("claim") is not None else "<"
    return f"{word} (margin {margin:.1f} % {sign} spread {spread:.1f} %)"
