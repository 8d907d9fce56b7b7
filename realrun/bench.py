"""Measured step times of gradient-sync strategies, side by side in one world of ranks.

Started by ``python -m realrun bench`` through the launcher (or under torchrun)::

    from realrun.launch import run_world
    ranks = run_world("realrun.bench:run_rank", payload, world_size=2)   # or run_bench(payload)
    run = summarize(ranks, payload, link="loopback")   # .results: list[simddp Result]

``payload``: ``workload`` (a Workload as a dict), ``configs`` (from
:func:`realrun.configs.bench_configs`: ``{"strategy", "bucket_mb", "spec"}``), ``steps``,
``warmup``, ``chunk``, ``seed``, ``optimizer``, ``precision``, ``trace_dir`` (or None),
``trace_steps``, ``progress``, ``timeline_steps`` (0: none; else clocked steps,
realrun/step_clock.py), ``hold``; optionally ``extras`` (names) and ``extras_factory`` (a
``module:function`` building a steppable per name): things timed in the same rounds that are
not configurations, such as realrun validate's probes.

Fair on a noisy box (docs/REALRUN.md, Fair comparison on a noisy box): the same seed and
batch for every configuration; timed steps round-robin in chunks, the first configuration
rotating each round; one model held at a time, as a training job does
(docs/FINDINGS.md#models-a-rank-holds); a barrier before every step, and a step's time the max
over ranks. Each configuration runs under its implementation's executor
(realrun/executors/); each measured Result carries its Strategy (``Result.spec``).
"""
from __future__ import annotations

import gc
import os
import shutil
import tempfile
from dataclasses import dataclass, field

import numpy as np
import torch

from realrun.configs import label, spec_of
from realrun.launch import resolve_target, run_world
from realrun.launch.env import ranks_on_this_cpu, usable_cpus
from realrun.launch.world import WorldConfig
from realrun.precision import set_precision
from realrun.step_clock import clocked_steps, timeline_fields
from realrun.steps import Trainer
from realrun.timing import timed, write_trace
from realrun.workload import Workload
from simddp.report.progress import Progress
from simddp.result import COMPUTE_ONLY, Result

def run_rank(payload: dict, ctx) -> dict:
    """Rank function for run_world: time every config and extra round-robin, in turns of
    ``chunk`` steps. ``payload["hold"]``: ``"one"`` (default) builds each turn's model afresh
    and warms it up; ``"all"`` builds and warms every model once and keeps them all."""
    torch.set_flush_denormal(True)  # tiny activations must not hit the slow denormal path
    set_precision(payload.get("precision", "fp32"))
    workload = Workload(**payload["workload"])
    extras = payload.get("extras") or []
    configs = payload["configs"] + [{"strategy": name, "bucket_mb": None} for name in extras]
    steps, warmup = payload["steps"], payload["warmup"]
    progress = Progress(f"{ctx.world_size} rank(s), {len(configs)} configs",
                        len(configs) * steps, show=payload.get("progress", False) and ctx.rank == 0)
    make_extra = resolve_target(payload["extras_factory"]) if extras else None
    shared: dict = {}  # what the extras share on this rank (e.g. a 1-rank process group)
    held = Held(lambda i: Trainer(configs[i], workload, ctx, payload)
                if i < len(payload["configs"])
                else make_extra(configs[i]["strategy"], workload, ctx, payload, shared),
                warmup, one=payload.get("hold", "one") == "one")
    try:
        if not held.one:
            for i in range(len(configs)):
                held.take(i)
        steps_s: list[list[float]] = [[] for _ in configs]
        inner: list[dict[str, list[float]]] = [{} for _ in configs]
        collectives = [0] * len(configs)
        for round_index, start in enumerate(range(0, steps, payload["chunk"])):
            n = min(payload["chunk"], steps - start)
            for k in range(len(configs)):
                i = (k + round_index) % len(configs)
                trainer = None           # let go of the last turn's before the next is built
                trainer = held.take(i)   # built and warmed up if it was not held
                if len(configs) > 1 and not held.one:  # the caches warm again, untimed
                    # (docs/FINDINGS.md#drift-and-the-compute-only-anchor)
                    ctx.barrier()
                    trainer.step()
                for _ in range(n):
                    ctx.barrier()
                    step_s = timed(ctx, trainer.step)
                    # an extra may time only part of its step, or several numbers of it
                    steps_s[i].append(getattr(trainer, "inner_s", None) or step_s)
                    for key, value in (getattr(trainer, "inner", None) or {}).items():
                        inner[i].setdefault(key, []).append(value)
                    progress.advance(label(configs[i]))
                collectives[i] = trainer.collectives()
        trainer = None
        if payload.get("trace_dir"):
            for i, config in enumerate(payload["configs"]):   # not the extras
                path = os.path.join(payload["trace_dir"], f"{label(config)}.rank{ctx.rank}.json")
                held.take(i)    # built and warmed up before the profiler starts
                write_trace(ctx, lambda i=i: held.take(i).step(ranges=True),
                            payload["trace_steps"], path)
        timelines = [clocked_steps(held.take(i), ctx, payload["timeline_steps"])
                     for i in range(len(payload["configs"]))] \
            if payload.get("timeline_steps") else None
        return {"rank": ctx.rank, "steps_s": steps_s, "inner": inner, "timelines": timelines,
                "collectives": collectives,
                "threads": torch.get_num_threads(), "cpus": usable_cpus(),
                "ranks_on_host": ranks_on_this_cpu(ctx.world_size),
                "models_held": held.most, "allocator": ctx.allocator}
    finally:
        progress.close()


class Held:
    """The models a rank holds, built by ``build(i)`` and warmed up when first taken; with
    ``one``, taking another drops the one held."""

    def __init__(self, build, warmup: int, one: bool) -> None:
        self.build, self.warmup, self.one = build, warmup, one
        self.live: dict = {}
        self.most = 0   # the most models held at once

    def take(self, i: int):
        if i not in self.live:
            if self.one and self.live:
                self.live.clear()
                gc.collect()   # torch DDP's reducer and hooks hold the model in cycles
            self.live[i] = self.build(i)
            for _ in range(self.warmup):
                self.live[i].step()
            self.most = max(self.most, len(self.live))
        return self.live[i]


def step_stats(rank_steps_s: list[list[float]]) -> dict:
    """Per step the max over ranks; then median, p5, p95 and the count of those steps."""
    per_step = np.max(np.asarray(rank_steps_s, dtype=float), axis=0)
    return {"median_s": float(np.median(per_step)), "p5_s": float(np.percentile(per_step, 5)),
            "p95_s": float(np.percentile(per_step, 95)), "n": int(per_step.size),
            "steps_s": per_step.tolist()}


@dataclass(frozen=True)
class BenchRun:
    """What a benchmark measured: the configurations' Results and step statistics, and each
    extra's statistics by name (with ``per_rank`` medians of its ``inner`` numbers)."""

    results: list[Result]
    stats: list[dict]
    extras: dict[str, dict]
    # rank 0's CPUs, the ranks sharing them, the models it held, its allocator: the cautions
    host: dict = field(default_factory=dict)


def summarize(ranks: list[dict], payload: dict, link: str) -> BenchRun:
    """simddp Results (source="measured") and the per-config stats they came from.

    exposed_comm_s = median step − median compute-only step (0 if negative, or if no
    compute-only config was run); compute_s = the compute-only median.
    """
    name = payload["workload"]["name"]
    n = len(payload["configs"])
    all_stats = [step_stats([r["steps_s"][i] for r in ranks])
                 for i in range(len(ranks[0]["steps_s"]))]
    extras = dict(zip(payload.get("extras") or [], all_stats[n:]))
    for k, name_k in enumerate(payload.get("extras") or []):  # each rank's median per value
        keys = ranks[0].get("inner", [{}] * len(all_stats))[n + k]
        if keys:
            extras[name_k]["per_rank"] = [{key: float(np.median(r["inner"][n + k][key]))
                                           for key in keys} for r in ranks]
    stats = []
    for i, config in enumerate(payload["configs"]):
        stats.append({"strategy": config["strategy"], "bucket_mb": config["bucket_mb"],
                      "label": label(config), **all_stats[i],
                      "collectives": ranks[0]["collectives"][i]})
    specs = [spec_of(config) for config in payload["configs"]]
    timelines = [timeline_fields([r["timelines"][i] for r in ranks]) if ranks[0].get("timelines")
                 else {} for i in range(n)]   # every rank's clocked spans, if asked
    compute = next((s for s in stats if s["strategy"] == COMPUTE_ONLY), None)
    compute_s = compute["median_s"] if compute else 0.0
    results = [Result(
        model=name, link=link, strategy=s["strategy"], bucket_mb=s["bucket_mb"],
        world_size=len(ranks), step_s=s["median_s"],
        exposed_comm_s=max(0.0, s["median_s"] - compute_s) if compute else 0.0,
        collectives=s["collectives"], accum_steps=1, compute_s=compute_s, source="measured",
        step_p5_s=s["p5_s"], step_p95_s=s["p95_s"], samples=s["n"],
        steps_s=tuple(s["steps_s"]), spec=spec,
        **timeline)
        for s, spec, timeline in zip(stats, specs, timelines)]
    host = {k: ranks[0][k] for k in ("cpus", "ranks_on_host", "models_held", "allocator")
            if k in ranks[0]}
    return BenchRun(results, stats, extras, host)


def run_bench(payload: dict, *, world: WorldConfig | None = None, threads: int = 1,
              trace_dir: str | None = None) -> BenchRun | None:
    """Run ``payload`` on the ranks of ``world`` (default 2 Gloo ranks): a BenchRun, None on
    torchrun ranks other than 0; LaunchError if a rank fails. Traces are staged and moved into
    ``trace_dir`` only when every rank succeeded."""
    world = WorldConfig() if world is None else world
    staging = created = None
    if trace_dir is not None:
        created = not os.path.isdir(trace_dir)
        os.makedirs(trace_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".staging-", dir=trace_dir)
        payload = {**payload, "trace_dir": staging}
    ok = False
    try:
        ranks = run_world("realrun.bench:run_rank", payload, threads_per_rank=threads,
                          **world.launch_args())
        if staging is not None:
            for name in sorted(os.listdir(staging)):
                os.replace(os.path.join(staging, name), os.path.join(trace_dir, name))
        ok = True
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
            if created and not ok and not os.listdir(trace_dir):
                os.rmdir(trace_dir)
    if ranks is None:
        return None
    return summarize(ranks, payload, world.link_label)
