"""Measured step times of gradient-sync strategies, side by side in one world of ranks.

Started by ``python -m realrun bench`` through the launcher (or under torchrun)::

    from realrun.launch import run_world
    ranks = run_world("realrun.bench:run_rank", payload, world_size=2)   # or run_bench(payload)
    run = summarize(ranks, payload, link="loopback")   # .results: list[simddp Result]

``payload``: ``workload`` (a realrun.workload.Workload as a dict: a preset at batch x seq, or
the user's ``--module``), ``configs`` (``{"strategy", "bucket_mb", "spec"}`` each, the
Strategy serialised, from :func:`realrun.configs.bench_configs`), ``steps``, ``warmup``, ``chunk``, ``seed``,
``optimizer``, ``precision``, ``trace_dir`` (or None), ``trace_steps``, ``progress``,
``timeline_steps`` (0: none; else each config's clocked steps on every rank, and on its
Result the median one's spans of every rank, realrun/step_clock.py);
optionally ``extras`` (names) and ``extras_factory`` (a ``module:function`` target building
a steppable per name): things timed in the same rounds that are not configurations, such as
realrun validate's probes (realrun/workflows/validate/probes.py).

How the comparison is kept fair on a noisy box:

- every configuration builds its model from the same seed and trains on the same per-rank
  batch;
- the timed steps run round-robin in chunks of ``chunk`` steps, the starting configuration
  rotating each round, so slow drift (thermal, other tenants) hits all configurations alike;
- a rank holds one model at a time (``hold: "one"``, the default), as a training job does: a
  turn builds its configuration's model afresh and runs ``warmup`` untimed steps first (torch
  DDP records the gradient order in its first step and rebuilds its buckets in the forward of
  its second; allocators and gloo's buffers settle). On 4 KiB pages every further model a
  Gloo rank holds slows the stepped one (docs/FINDINGS.md#models-a-rank-holds).
  ``hold: "all"`` builds and warms each model once and keeps them all; then each chunk starts
  with one untimed step, as the first step after switching models finds the caches holding
  the previous one and runs slower (docs/FINDINGS.md#drift-and-the-compute-only-anchor);
- every timed step starts after a barrier (outside the clock), so the ranks start together;
  a step's time is the max over ranks, as a step ends when its slowest rank ends.

Configurations: ``compute-only`` (no communication at all: the compute baseline, and the
single-rank baseline for scaling), then each Strategy under the executor of its
implementation (realrun/steps.py, realrun/executors/): ``ddp`` and hooked strategies under
torch's DistributedDataParallel (``bucket_cap_mb_list=[1, X]``), fsdp and zero2 under FSDP2,
the others under :class:`realrun.ddp.DDP`. Each measured Result carries its Strategy
(``Result.spec``).
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
    ``chunk`` steps. Extras (``payload["extras"]``, names handed to the ``extras_factory``
    target, e.g. realrun.workflows.validate's probes) are timed alongside but are not
    configurations.

    ``payload["hold"]``: ``"one"`` (the default) builds a turn's model afresh and warms it up
    (``warmup`` untimed steps), dropping the last turn's, so the rank holds one model, as a
    training job does; ``"all"`` builds and warms every model once and keeps them all alive."""
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
                if len(configs) > 1 and not held.one:  # its caches warm again, untimed
                    ctx.barrier()
                    trainer.step()
                for _ in range(n):
                    ctx.barrier()
                    step_s = timed(ctx, trainer.step)
                    # an extra may time only part of its step (realrun/workflows/validate/
                    # probes.py), or report several numbers of it (``inner``, a dict)
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
    """The models a rank holds: built by ``build(i)`` and warmed up (``warmup`` untimed steps)
    when first taken. With ``one``, taking another drops the one held first (why: the module
    docstring)."""

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
    """What a benchmark measured: Results of the configurations, their step statistics, and
    the statistics of each extra by name (with ``per_rank`` medians of the numbers an extra
    reports in ``inner``, if it does)."""

    results: list[Result]
    stats: list[dict]
    extras: dict[str, dict]
    # rank 0's CPUs (affinity) and the ranks sharing them: compare's caution (cpu_share.py);
    # the models it held and its allocator (the bench's caution, realrun/launch/allocator.py)
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
    """Run ``payload`` on the ranks of ``world`` (default ``WorldConfig()``: 2 ranks, Gloo); a
    BenchRun on the launching process or torchrun's rank 0, None on other torchrun ranks.
    LaunchError if a rank fails.

    Traces are written to a hidden staging folder inside ``trace_dir`` and moved into it only
    when every rank succeeded, so a failed run leaves no partial trace files.
    """
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
