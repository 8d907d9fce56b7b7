"""Trace a job once, import the trace, predict other bucket sizes; then measure them.

    python bench/bench_trace_import.py                          # GPT-2, loopback + 2 Gbit/s
    python bench/bench_trace_import.py --links loopback --rounds 2 --steps 30
    python bench/bench_trace_import.py --trace-mb 0.25 --bucket-mb 0.5,1,2,4 --out out/trace_import
    python bench/bench_trace_import.py --trace-mb 1 --bucket-mb 0.25,4,25 --alpha-us 450

For each link and round:

1. **trace**: 2 Gloo ranks train examples/gpt2_tiny.py under torch's DistributedDataParallel
   at ``--trace-mb`` (``bucket_cap_mb_list=[1, X]``, as ``realrun bench``'s ddp rows) and
   record ``--trace-steps`` steps with ``torch.profiler.profile(record_shapes=True)`` and a
   schedule (realrun/trace_job.py); one Chrome trace per rank;
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

FSDP2 and gradient accumulation (``--job``)::

    python bench/bench_trace_import.py --job fsdp --model transformer --links loopback \
        --unit-mb 0.1,0.25,1 --trace-steps 10 --steps 24 --cycles 3
    python bench/bench_trace_import.py --job no_sync --accum-steps 2 --links loopback \
        --trace-mb 0.25 --bucket-mb 1,4 --trace-steps 10 --steps 24 --cycles 3

``--job fsdp`` traces torch FSDP2 (``fully_shard`` per module with parameters, realrun's
finest units) and predicts, from that one trace, fsdp at each ``--unit-mb``
(``--shard-unit-mb``), zero2 and torch DDP at 25 MB; ``--job no_sync`` traces torch DDP over
``--accum-steps`` micro-steps, all but the last under ``no_sync()``, at ``--trace-mb`` and
predicts the other ``--bucket-mb``. Tracing and timing are realrun/trace_job.py's (realrun
bench runs no accumulation), round-robin, each row's step the slowest rank's. Printed per
round: the traced step against its re-simulation, each row's prediction (trace alone, and
with the job's logged step time as ``--step-ms``) against its measured median, and the
median APE over the fsdp/zero2 (or no_sync) rows, the traced one included.
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
from simddp.inputs.resolved import Inputs  # noqa: E402
from simddp.presets.models import ModelSpec  # noqa: E402
from simddp.sim.engine import simulate  # noqa: E402
from simddp.planning.plans import plan  # noqa: E402
from simddp.planning.strategy import make_strategy  # noqa: E402
from simddp.errors import InputError  # noqa: E402
from simddp.ingest.trace import import_traces  # noqa: E402

LINKS = {"loopback": {}, "emulated-2Gbit": {"emulate_hosts": 2, "link_gbit": 2.0}}
MODULE = os.path.join(ROOT, "examples", "gpt2_tiny.py") + ":build"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--job", choices=("ddp", "fsdp", "no_sync"), default="ddp",
                   help="what is traced: torch DDP at --trace-mb (default), FSDP2 at its "
                        "finest units (predicting --unit-mb, zero2 and ddp), or torch DDP "
                        "with --accum-steps micro-steps under no_sync() (predicting --bucket-mb)")
    p.add_argument("--unit-mb", default="0.5,1,4",
                   help="fsdp: the --shard-unit-mb sizes to predict and measure")
    p.add_argument("--accum-steps", type=int, default=2, help="no_sync: micro-steps per step")
    p.add_argument("--links", default=",".join(LINKS), help="comma list of %(default)s")
    p.add_argument("--module", default=MODULE, help="FILE.py:FN (default examples/gpt2_tiny.py)")
    p.add_argument("--model", choices=("module", "transformer"), default="module",
                   help="transformer: a small preset transformer (2 blocks of width 256, "
                        "21 FSDP units of 1 KiB to 2 MiB) instead of --module")
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
            if args.job == "ddp":
                report = run_round(link, args, others)
                print(render(report))
            else:
                report = run_job_round(link, args, others)
                print(render_job(report))
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
        ranks = run_world("realrun.trace_job:trace_rank", {
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
        "compute_slowdown": imp.contention.compute, "comm_slowdown": imp.contention.comm,
        "forward_ms": imp.profile.forward_s * 1e3, "backward_ms": imp.profile.backward_s * 1e3,
        "post_ms": imp.profile.optimizer_s * 1e3,
        "predicted_s": {mb: predict(imp, mb) for mb in sizes},
        "anchored_predicted_s": {mb: predict(anchored, mb) for mb in sizes}}


# --- fsdp and no_sync: trace once, predict other configurations, time them all -----------

def job_configs(args, others: list[float]) -> list[tuple[str, dict, object]]:
    """(row name, realrun configuration, simddp strategy) of every row; the first is the
    traced one."""
    if args.job == "fsdp":
        rows = [("fsdp (traced)", make_strategy("fsdp"))]
        rows += [(f"fsdp {mb:g} MB units", make_strategy("fsdp", shard_unit_mb=mb))
                 for mb in (float(x) for x in args.unit_mb.split(","))]
        rows += [("zero2", make_strategy("zero2")), ("ddp 25 MB", make_strategy("ddp", 25.0))]
    else:
        k = args.accum_steps
        sizes = sorted({args.trace_mb, *others})
        rows = [(f"no_sync {args.trace_mb:g} MB (traced)",
                 make_strategy("no_sync", args.trace_mb, accum_steps=k))]
        rows += [(f"no_sync {mb:g} MB", make_strategy("no_sync", mb, accum_steps=k))
                 for mb in sizes if mb != args.trace_mb]
    return [(name, config_of(make_strategy("ddp", s.bucket_mb) if s.accumulates else s),
             s) for name, s in rows]


def workload_of(args) -> Workload:
    if args.model == "transformer":
        return Workload.preset(ModelSpec("transformer", layers=2, d_model=256, d_ff=1024,
                                         heads=4, vocab=2048, name="transformer-2x256"),
                               batch=4, seq=32)
    return Workload.from_target(args.module)


def run_job_round(link: str, args, others: list[float]) -> dict:
    """``--cycles`` times: trace the job and import it, then time every row
    (realrun/trace_job.py, round-robin); predictions are the median over the cycles' imports,
    measurements pooled over the cycles."""
    world = LINKS[link]
    workload = workload_of(args)
    rows = job_configs(args, others)
    accum = args.accum_steps if args.job == "no_sync" else 1
    load_before = os.getloadavg()
    cycles, steps_s = [], [[] for _ in rows]
    for _ in range(args.cycles):
        tmp = tempfile.mkdtemp(prefix="trace-import-")
        try:
            load = os.getloadavg()[0]
            ranks = run_world("realrun.trace_job:trace_rank", {
                "workload": workload.to_json(), "config": rows[0][1], "accum_steps": accum,
                "warmup": 5, "steps": args.trace_steps, "logged_steps": args.logged_steps,
                "out": os.path.join(tmp, "rank{rank}.json")},
                world_size=2, timeout_s=600, **world)
            paths = [os.path.join(tmp, f"rank{r}.json") for r in range(2)]
            imp = import_traces(paths)
            # the job's log: each step's time is its slowest rank's; the median over steps
            logged_s = statistics.median(max(s) for s in zip(*(r["logged_s"] for r in ranks)))
            try:    # the log can be faster than the traced collectives alone: no anchor
                anchored = import_traces(paths, step_s=logged_s)
            except InputError:
                anchored = None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        cycles.append({"load": load, "traced_step_ms": imp.measured_step_s * 1e3,
                       "resimulated_ms": imp.resimulated.step_s * 1e3,
                       "replay_error_pct": imp.replay_error * 100,
                       "comm_scale": imp.comm_scale,
                       "without_profiler_ms": imp.without_profiler.step_s * 1e3,
                       "logged_step_ms": logged_s * 1e3,
                       "compute_scale": None if anchored is None else anchored.compute_scale,
                       "traced": imp.traced.strategy.name,
                       "predicted_s": [predict_strategy(imp, s) for _, _, s in rows],
                       "anchored_predicted_s": [None if anchored is None else
                                                predict_strategy(anchored, s)
                                                for _, _, s in rows]})
        ranks = run_world("realrun.trace_job:time_rank", {
            "workload": workload.to_json(), "configs": [c for _, c, _ in rows],
            "accum_steps": accum, "steps": max(1, args.steps // args.cycles), "warmup": 5,
            "chunk": 6}, world_size=2, timeout_s=900, **world)
        for i in range(len(rows)):   # a step lasts as long as its slowest rank
            now = [max(x) for x in zip(*(r["steps_s"][i] for r in ranks))]
            steps_s[i] += now
            cycles[-1].setdefault("measured_s", []).append(statistics.median(now))
    out_rows = []
    for i, (name, _, _) in enumerate(rows):
        x = np.asarray(steps_s[i])
        row = {"row": name, "traced": i == 0, "measured_ms": float(np.median(x)) * 1e3,
               "p5_ms": float(np.percentile(x, 5)) * 1e3,
               "p95_ms": float(np.percentile(x, 95)) * 1e3, "n": int(x.size)}
        for key in ("", "anchored_"):
            preds = [c[f"{key}predicted_s"][i] for c in cycles
                     if c[f"{key}predicted_s"][i] is not None]
            pred = statistics.median(preds) if preds else None
            row[f"{key}predicted_ms"] = None if pred is None else pred * 1e3
            row[f"{key}error_pct"] = None if pred is None else \
                (pred / float(np.median(x)) - 1) * 100
        out_rows.append(row)
    scored = [r for r in out_rows if not r["row"].startswith("ddp")]

    def median_ape(key: str) -> float | None:
        apes = [abs(r[key]) for r in scored if r[key] is not None]
        return statistics.median(apes) if apes else None

    # Paired in time: each cycle's prediction over the medians measured right after its trace
    # (the box drifts by tens of percent between cycles), the median over cycles per row.
    for i, row in enumerate(out_rows):
        row["paired_error_pct"] = statistics.median(
            (c["predicted_s"][i] / c["measured_s"][i] - 1) * 100 for c in cycles)
    # The change from the traced configuration, without the level: each prediction and each
    # measurement over its own at the traced configuration.
    ref = out_rows[0]
    for row in out_rows:
        row["relative_error_pct"] = ((row["predicted_ms"] / ref["predicted_ms"])
                                     / (row["measured_ms"] / ref["measured_ms"]) - 1) * 100

    return {"job": args.job, "link": link, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "load_before": load_before, "load_after": os.getloadavg(),
            "model": workload.name, "accum_steps": accum,
            "cycles": [{k: v for k, v in c.items() if not k.endswith("predicted_s")}
                       for c in cycles],
            "rows": out_rows,
            "median_ape_pct": median_ape("error_pct"),
            "anchored_median_ape_pct": median_ape("anchored_error_pct"),
            "paired_median_ape_pct": median_ape("paired_error_pct"),
            "relative_median_ape_pct": statistics.median(
                abs(r["relative_error_pct"]) for r in scored[1:]) if len(scored) > 1 else None}


def predict_strategy(imp, strategy) -> float:
    """The engine's step for ``strategy`` on the imported profile, link and host."""
    return simulate(plan(imp.profile, strategy), Inputs(imp.profile, imp.link, imp.world_size,
                                                        imp.contention, imp.host)).step_s


def render_job(r: dict) -> str:
    lines = [f"## {r['link']}: traced {r['job']}"
             + (f" ({r['accum_steps']} micro-steps)" if r["accum_steps"] > 1 else "")
             + f", {r['date']}",
             f"load average {r['load_before'][0]:.2f} before, {r['load_after'][0]:.2f} after",
             "", "| cycle | load | traced step ms | re-simulated ms | replay error | comm × | "
             "w/o profiler ms | job's log ms | compute × |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i, c in enumerate(r["cycles"]):
        lines.append(f"| {i + 1} | {c['load']:.2f} | {c['traced_step_ms']:.2f} | "
                     f"{c['resimulated_ms']:.2f} | {c['replay_error_pct']:+.1f} % | "
                     f"×{c['comm_scale']:.3f} | {c['without_profiler_ms']:.2f} | "
                     f"{c['logged_step_ms']:.2f} | "
                     + ("-" if c["compute_scale"] is None else f"×{c['compute_scale']:.3f}")
                     + " |")
    lines += ["", "| row | measured median ms | p5–p95 ms | n | trace alone: predicted ms | "
              "error | paired by cycle | relative to traced | + --step-ms: predicted ms | "
              "error |", "|---|---|---|---|---|---|---|---|---|---|"]
    def cell(value, fmt):
        return "-" if value is None else format(value, fmt)

    for row in r["rows"]:
        lines.append(f"| {row['row']} | {row['measured_ms']:.2f} | {row['p5_ms']:.2f}–"
                     f"{row['p95_ms']:.2f} | {row['n']} | {cell(row['predicted_ms'], '.2f')} | "
                     f"{cell(row['error_pct'], '+.1f')} % | "
                     f"{row['paired_error_pct']:+.1f} % | {row['relative_error_pct']:+.1f} % | "
                     f"{cell(row['anchored_predicted_ms'], '.2f')} | "
                     f"{cell(row['anchored_error_pct'], '+.1f')} % |")
    lines.append(f"\nmedian APE over the {r['job']} rows (the traced one included; ddp not): "
                 f"trace alone {cell(r['median_ape_pct'], '.1f')} % (paired by cycle "
                 f"{cell(r['paired_median_ape_pct'], '.1f')} %; relative to the traced "
                 f"configuration, the others {cell(r['relative_median_ape_pct'], '.1f')} %), "
                 f"with --step-ms {cell(r['anchored_median_ape_pct'], '.1f')} %\n")
    return "\n".join(lines)


def predict(imp, bucket_mb: float) -> float:
    """The engine's step for torch ddp at ``bucket_mb`` on the imported profile and link."""
    return predict_strategy(imp, make_strategy("ddp", bucket_mb))


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
