"""Trace a job once, import the trace, predict other bucket sizes; then measure them.

    python bench/bench_trace_import.py                          # GPT-2, loopback + 2 Gbit/s
    python bench/bench_trace_import.py --links loopback --rounds 2 --steps 30
    python bench/bench_trace_import.py --trace-mb 0.25 --bucket-mb 0.5,1,2,4 --out out/trace_import
    python bench/bench_trace_import.py --trace-mb 1 --bucket-mb 0.25,4,25 --alpha-us 450

For each link and round:

1. **trace**: 2 Gloo ranks train examples/gpt2_tiny.py under torch's DistributedDataParallel
   at ``--trace-mb`` (``bucket_cap_mb_list=[1, X]``, as ``realrun bench``'s ddp rows) and
   record ``--trace-steps`` steps with ``torch.profiler.profile(record_shapes=True)`` and a
   schedule (tests/_trace_targets.py); one Chrome trace per rank;
2. **import**: ``simddp.ingest.trace.import_traces`` (what ``python -m simddp trace-import``
   runs) gives a profile, a link and host costs; the traced configuration is re-simulated
   and compared with the traced steps (the profiler's overhead kept, as in the trace);
3. **predict**: the engine runs torch ddp at every ``--bucket-mb`` on the imported profile
   (the profiler's overhead removed);
4. **measure**: ``realrun.bench.run_bench`` (what ``python -m realrun bench --module
   examples/gpt2_tiny.py:build --strategies ddp --bucket-mb ...`` runs) times compute-only,
   the traced size and every other size, ``--steps`` steps each, round-robin.

Printed per round: the load average before and after, the traced step (median over steps,
p5–p95) against its re-simulation, and per bucket size the prediction, the measured median,
p5–p95 and n, and the error; the median APE is over the sizes other than the traced one,
also "relative to the traced size" (predictions and measurements each divided by their own
value at the traced size: the change a bucket size makes, without the level).
No thresholds: this is a measurement, not a test. Runs take ~1–2 min per link and round on
2 vCPUs; the emulated link needs root (network namespaces).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from realrun.bench import run_bench  # noqa: E402
from realrun.configs import bench_configs, config_of  # noqa: E402
from realrun.launch import run_world  # noqa: E402
from realrun.launch.world import WorldConfig  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.sim.engine import simulate  # noqa: E402
from simddp.planning.plans import plan  # noqa: E402
from simddp.planning.strategy import make_strategy  # noqa: E402
from simddp.ingest.trace import import_traces  # noqa: E402

LINKS = {"loopback": {}, "emulated-2Gbit": {"emulate_hosts": 2, "link_gbit": 2.0}}
MODULE = os.path.join(ROOT, "examples", "gpt2_tiny.py") + ":build"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--links", default=",".join(LINKS), help="comma list of %(default)s")
    p.add_argument("--module", default=MODULE, help="FILE.py:FN (default examples/gpt2_tiny.py)")
    p.add_argument("--trace-mb", type=float, default=0.25, help="the traced bucket_cap_mb")
    p.add_argument("--bucket-mb", default="0.5,1,2,4", help="bucket sizes to predict")
    p.add_argument("--alpha-us", type=float, default=None,
                   help="trace-import's --alpha-us (calibrate's α), for a trace whose sizes "
                        "are too alike to tell α (--trace-mb 1)")
    p.add_argument("--trace-steps", type=int, default=12, help="steps recorded per trace")
    p.add_argument("--steps", type=int, default=30, help="timed steps per measured config")
    p.add_argument("--logged-steps", type=int, default=10,
                   help="steps timed without the profiler just before tracing: the job's log, "
                        "the --step-ms anchor")
    p.add_argument("--cycles", type=int, default=3,
                   help="trace, import, measure --steps/--cycles steps; repeated (interleaved)")
    p.add_argument("--rounds", type=int, default=1, help="independent rounds per link")
    p.add_argument("--out", default=None, help="also write one JSON per round here")
    args = p.parse_args()
    others = [float(x) for x in args.bucket_mb.split(",")]
    for link in args.links.split(","):
        if link not in LINKS:
            p.error(f"--links: unknown {link!r}; choose from {', '.join(LINKS)}")
        for k in range(args.rounds):
            report = run_round(link, args, others)
            print(render(report))
            if args.out:
                os.makedirs(args.out, exist_ok=True)
                with open(os.path.join(args.out, f"{link}-round{k + 1}.json"), "w") as f:
                    json.dump(report, f, indent=1)
    return 0


def run_round(link: str, args, others: list[float]) -> dict:
    """``--cycles`` times: trace and import, then measure ``--steps / --cycles`` steps of
    every configuration. On a shared host the load drifts by tens of percent within a
    minute; interleaving puts the traces and the measurements through the same drift. The
    measured steps are pooled over cycles; each size's prediction is the median over the
    cycles' imports."""
    world = LINKS[link]
    workload = Workload.from_target(args.module)
    sizes = sorted({args.trace_mb, *others})
    load_before = os.getloadavg()
    cycles, steps_s, stats0 = [], {}, None
    for _ in range(args.cycles):
        cycles.append(trace_and_import(workload, world, args, sizes))
        payload = {"workload": workload.to_json(), "configs": bench_configs(["ddp"], sizes),
                   "precision": "fp32", "steps": max(1, args.steps // args.cycles),
                   "warmup": 5, "chunk": 5, "seed": 0, "optimizer": "sgd", "trace_dir": None,
                   "trace_steps": 3, "progress": False}
        measured = run_bench(payload, world=WorldConfig(world_size=2, timeout_s=300, **world))
        stats0 = stats0 or measured.stats
        for s in measured.stats:
            steps_s.setdefault(s["label"], []).extend(s["steps_s"])
    rows = []
    for s in stats0:
        mb, ddp = s["bucket_mb"], s["strategy"] == "ddp"
        x = np.asarray(steps_s[s["label"]])
        row = {"strategy": s["strategy"], "bucket_mb": mb, "collectives": s["collectives"],
               "median_ms": float(np.median(x)) * 1e3, "p5_ms": float(np.percentile(x, 5)) * 1e3,
               "p95_ms": float(np.percentile(x, 95)) * 1e3, "n": int(x.size),
               "traced": mb == args.trace_mb and ddp}
        for key in ("", "anchored_"):
            pred = statistics.median(c[f"{key}predicted_s"][mb] for c in cycles) if ddp else None
            row[f"{key}predicted_ms"] = None if pred is None else pred * 1e3
            row[f"{key}error_pct"] = None if pred is None else (pred / np.median(x) - 1) * 100
        rows.append(row)

    def median_ape(key: str) -> float | None:
        apes = [abs(r[key]) for r in rows if r[key] is not None and not r["traced"]]
        return statistics.median(apes) if apes else None

    # The change from the traced size, without the level: each prediction and measurement
    # over its own value at the traced size.
    ref = next((r for r in rows if r["traced"]), None)
    relative = None if ref is None else statistics.median(
        abs(r["predicted_ms"] / ref["predicted_ms"] / (r["median_ms"] / ref["median_ms"]) - 1)
        * 100 for r in rows if r["predicted_ms"] is not None and not r["traced"])

    return {"link": link, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "load_before": load_before, "load_after": os.getloadavg(),
            "trace_mb": args.trace_mb, "alpha_us_given": args.alpha_us, "cycles": [
                {k: v for k, v in c.items() if not k.endswith("predicted_s")} for c in cycles],
            "rows": rows, "median_ape_pct": median_ape("error_pct"),
            "anchored_median_ape_pct": median_ape("anchored_error_pct"),
            "relative_median_ape_pct": relative}


def trace_and_import(workload: Workload, world: dict, args, sizes: list[float]) -> dict:
    """Trace the job at --trace-mb, import it twice (the trace alone; with the job's logged
    step time as --step-ms) and predict every size."""
    tmp = tempfile.mkdtemp(prefix="trace-import-")
    try:
        load = os.getloadavg()[0]
        config = config_of(make_strategy("ddp", args.trace_mb), args.trace_mb)
        ranks = run_world("tests._trace_targets:trace_rank", {
            "workload": workload.to_json(), "config": config,
            "warmup": 3, "steps": args.trace_steps, "logged_steps": args.logged_steps,
            "out": os.path.join(tmp, "rank{rank}.json")}, world_size=2, timeout_s=300, **world)
        paths = [os.path.join(tmp, f"rank{r}.json") for r in range(2)]
        alpha_s = None if args.alpha_us is None else args.alpha_us / 1e6
        imp = import_traces(paths, alpha_s=alpha_s)
        # The job's log: each step's time is its slowest rank's; the median over steps.
        logged_s = statistics.median(max(s) for s in zip(*(r["logged_s"] for r in ranks)))
        anchored = import_traces(paths, step_s=logged_s, alpha_s=alpha_s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "load": load, "trace_steps": len(imp.joint),
        "traced_step_ms": imp.measured_step_s * 1e3, "traced_p5_ms": imp.measured_p5_s * 1e3,
        "traced_p95_ms": imp.measured_p95_s * 1e3, "resimulated_ms": imp.resimulated.step_s * 1e3,
        "reproduction_error_pct": imp.reproduction_error * 100,
        "replayed_ms": imp.replayed_step_s * 1e3, "replay_error_pct": imp.replay_error * 100,
        "comm_scale": imp.comm_scale,
        "without_profiler_ms": imp.without_profiler.step_s * 1e3,
        "logged_step_ms": logged_s * 1e3, "compute_scale": anchored.compute_scale,
        "traced_strategy": f"{imp.traced.strategy.name} {imp.traced.strategy.bucket_mb:g} MB",
        "alpha_us": imp.link.alpha_s * 1e6, "busbw_gbps": imp.link.busbw_gbps,
        "compute_slowdown": imp.link.compute_slowdown, "comm_slowdown": imp.link.comm_slowdown,
        "forward_ms": imp.profile.forward_s * 1e3, "backward_ms": imp.profile.backward_s * 1e3,
        "post_ms": imp.profile.optimizer_s * 1e3,
        "predicted_s": {mb: predict(imp, mb) for mb in sizes},
        "anchored_predicted_s": {mb: predict(anchored, mb) for mb in sizes}}


def predict(imp, bucket_mb: float) -> float:
    """The engine's step for torch ddp at ``bucket_mb`` on the imported profile and link."""
    profile = imp.profile
    return simulate(profile, imp.link, plan(profile, make_strategy("ddp", bucket_mb)),
                    imp.world_size, host=imp.host).step_s


def render(r: dict) -> str:
    lines = [f"## {r['link']}: traced ddp at {r['trace_mb']:g} MB, {r['date']}",
             f"load average {r['load_before'][0]:.2f} before, {r['load_after'][0]:.2f} after",
             "", "| cycle | load | traced step ms (p5–p95, steps) | replayed ms | error | "
             "comm × | re-simulated ms | error | w/o profiler ms | job's log ms | α µs | "
             "busbw GB/s | contention comp/comm |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, c in enumerate(r["cycles"]):
        lines.append(
            f"| {i + 1} | {c['load']:.2f} | {c['traced_step_ms']:.2f} ({c['traced_p5_ms']:.1f}–"
            f"{c['traced_p95_ms']:.1f}, {c['trace_steps']}) | {c['replayed_ms']:.2f} | "
            f"{c['replay_error_pct']:+.1f} % | ×{c['comm_scale']:.3f} | "
            f"{c['resimulated_ms']:.2f} | "
            f"{c['reproduction_error_pct']:+.1f} % | {c['without_profiler_ms']:.2f} | "
            f"{c['logged_step_ms']:.2f} | {c['alpha_us']:.0f} | {c['busbw_gbps']:.3g} | "
            f"×{c['compute_slowdown']:.2f} / ×{c['comm_slowdown']:.2f} |")
    lines += ["", "| config | bucket MB | colls | measured median ms | p5–p95 ms | n "
              "| trace alone: predicted ms | error | + --step-ms: predicted ms | error |",
              "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(value, fmt):
        return "-" if value is None else format(value, fmt)

    for row in r["rows"]:
        mb = "-" if row["bucket_mb"] is None else f"{row['bucket_mb']:g}"
        name = row["strategy"] + (" (traced)" if row["traced"] else "")
        lines.append(
            f"| {name} | {mb} | {row['collectives']} | {row['median_ms']:.2f} "
            f"| {row['p5_ms']:.2f}–{row['p95_ms']:.2f} | {row['n']} "
            f"| {cell(row['predicted_ms'], '.2f')} | {cell(row['error_pct'], '+.1f')} % "
            f"| {cell(row['anchored_predicted_ms'], '.2f')} "
            f"| {cell(row['anchored_error_pct'], '+.1f')} % |")
    lines.append(f"\nmedian APE over the untraced sizes: trace alone "
                 f"{cell(r['median_ape_pct'], '.1f')} %, with --step-ms "
                 f"{cell(r['anchored_median_ape_pct'], '.1f')} %; relative to the traced size "
                 f"(trace alone) {cell(r['relative_median_ape_pct'], '.1f')} %\n")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
