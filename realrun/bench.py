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
realrun validate's probes (realrun/validate/probes.py).

How the comparison is kept fair on a noisy box:

- every configuration builds its model from the same seed and trains on the same per-rank
  batch, and all of them stay alive for the whole run;
- each one first runs ``warmup`` untimed steps (torch DDP records the gradient order in its
  first step and rebuilds its buckets in the forward of its second; allocators and gloo's
  buffers settle), then the timed steps run round-robin in chunks
  of ``chunk`` steps, the starting configuration rotating each round, so slow drift (thermal,
  other tenants) hits all configurations alike;
- each chunk starts with one untimed step: the first step after switching to another
  configuration finds the caches holding the previous one's model, which a training job (one
  model) never does. It ran 12-20 % slower than the chunk's other steps on a 2-vCPU VM (the
  median over configurations of the first step's median over the others', 30 steps in chunks
  of 5; the transformer and the mlp of bench/workflow_grid.py) and 1-12 % on a 16-CPU host,
  and moved the medians by 1-3 % (docs/results/2026-11-26-cores-and-overlap.md, section 5);
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
    """Rank function for run_world: warm up every config and extra, then time them all
    round-robin. Extras (``payload["extras"]``, names handed to the ``extras_factory``
    target, e.g. realrun.validate's probes) are timed alongside but are not configurations."""
    torch.set_flush_denormal(True)  # tiny activations must not hit the slow denormal path
    set_precision(payload.get("precision", "fp32"))
    workload = Workload(**payload["workload"])
    extras = payload.get("extras") or []
    configs = payload["configs"] + [{"strategy": name, "bucket_mb": None} for name in extras]
    steps, warmup = payload["steps"], payload["warmup"]
    progress = Progress(f"{ctx.world_size} rank(s), {len(configs)} configs",
                        len(configs) * (warmup + steps),
                        show=payload.get("progress", False) and ctx.rank == 0)
    make_extra = resolve_target(payload["extras_factory"]) if extras else None
    shared: dict = {}  # what the extras share on this rank (e.g. a 1-rank process group)
    try:
        trainers = []
        for config in configs:
            trainers.append(Trainer(config, workload, ctx, payload)
                            if len(trainers) < len(payload["configs"])
                            else make_extra(config["strategy"], workload, ctx, payload, shared))
            for _ in range(warmup):
                trainers[-1].step()
                progress.advance(label(config))
        steps_s: list[list[float]] = [[] for _ in configs]
        inner: list[dict[str, list[float]]] = [{} for _ in configs]
        for round_index, start in enumerate(range(0, steps, payload["chunk"])):
            n = min(payload["chunk"], steps - start)
            for k in range(len(configs)):
                i = (k + round_index) % len(configs)
                if len(configs) > 1:   # back to this model: its caches warm again, untimed
                    ctx.barrier()
                    trainers[i].step()
                for _ in range(n):
                    ctx.barrier()
                    step_s = timed(ctx, trainers[i].step)
                    # an extra may time only part of its step (realrun/validate/probes.py),
                    # or report several numbers of it (``inner``, a dict)
                    steps_s[i].append(getattr(trainers[i], "inner_s", None) or step_s)
                    for key, value in (getattr(trainers[i], "inner", None) or {}).items():
                        inner[i].setdefault(key, []).append(value)
                    progress.advance(label(configs[i]))
        if payload.get("trace_dir"):
            for config, trainer in zip(payload["configs"], trainers):   # not the extras
                path = os.path.join(payload["trace_dir"], f"{label(config)}.rank{ctx.rank}.json")
                write_trace(ctx, lambda t=trainer: t.step(ranges=True), payload["trace_steps"], path)
        timelines = [clocked_steps(t, ctx, payload["timeline_steps"])
                     for t in trainers[:len(payload["configs"])]] \
            if payload.get("timeline_steps") else None
        return {"rank": ctx.rank, "steps_s": steps_s, "inner": inner, "timelines": timelines,
                "collectives": [t.collectives() for t in trainers],
                "threads": torch.get_num_threads(), "cpus": usable_cpus(),
                "ranks_on_host": ranks_on_this_cpu(ctx.world_size),
                "models_held": len(trainers), "allocator": ctx.allocator}
    finally:
        progress.close()


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
