"""Measured step times of gradient-sync strategies, side by side in one world of ranks.

Started by ``python -m realrun bench`` through the launcher (or under torchrun)::

    from realrun.launch import run_world
    ranks = run_world("realrun.bench:run_rank", payload, world_size=2)
    results = summarize(ranks, payload, link="loopback")      # list[simddp.result.Result]

``payload``: ``spec`` (a simddp ModelSpec as a dict), ``configs`` (``{"strategy", "bucket_mb"}``
each), ``batch``, ``seq``, ``steps``, ``warmup``, ``chunk``, ``seed``, ``optimizer``,
``trace_dir`` (or None), ``trace_steps``, ``progress``.

How the comparison is kept fair on a noisy box:

- every configuration builds its model from the same seed and trains on the same per-rank
  batch (seed + rank), and all of them stay alive for the whole run;
- each one first runs ``warmup`` untimed steps (torch DDP records the gradient order in its
  first step and rebuilds its buckets in the forward of its second; allocators and gloo's
  buffers settle), then the timed steps run round-robin in chunks
  of ``chunk`` steps, the starting configuration rotating each round, so slow drift (thermal,
  other tenants) hits all configurations alike;
- every timed step starts after a barrier (outside the clock), so the ranks start together;
  a step's time is the max over ranks, as a step ends when its slowest rank ends.

Configurations: ``compute-only`` (no communication at all: the compute baseline, and the
single-rank baseline for scaling), ``ddp`` (torch's DistributedDataParallel with
``bucket_cap_mb``), and everything else through :class:`realrun.ddp.DDP`.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist

from realrun.launch import run_world
from realrun.models import build_model, make_batch
from realrun.timing import phase, timed, write_trace
from simddp.presets.models import ModelSpec
from simddp.strategy import DDP_FIRST_BUCKET_MB
from simddp.result import Result

COMPUTE_ONLY = "compute-only"
LEARNING_RATES = {"sgd": 1e-3, "adam": 1e-4}  # small: the same batch is seen hundreds of times


def label(config: dict) -> str:
    """'naive', 'bucketed-25MB', 'compute-only': a config's name in tables and file names."""
    mb = config["bucket_mb"]
    return config["strategy"] if mb is None else f"{config['strategy']}-{mb:g}MB"


def make_optimizer(name: str, params) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=LEARNING_RATES["sgd"])
    if name == "adam":
        return torch.optim.Adam(params, lr=LEARNING_RATES["adam"])
    raise ValueError(f"optimizer {name!r}: expected sgd or adam")


class Trainer:
    """One configuration on one rank: its model, optimizer and the step it times."""

    def __init__(self, config: dict, spec: ModelSpec, batch: tuple, ctx, payload: dict) -> None:
        torch.manual_seed(payload["seed"])   # same weights on every rank, in every config
        module = build_model(spec).to(ctx.device)
        strategy, mb = config["strategy"], config["bucket_mb"]
        self.sync = None
        self.torch_ddp = None
        if strategy == COMPUTE_ONLY:
            self.model = module
        elif strategy == "ddp":
            from torch.nn.parallel import DistributedDataParallel
            device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
            self.model = self.torch_ddp = DistributedDataParallel(
                module, device_ids=device_ids, **torch_ddp_bucket_args(mb))
        else:
            from realrun.ddp import DDP
            kwargs = {} if mb is None else {"bucket_mb": mb}
            self.model = DDP(module, strategy=strategy, **kwargs)
            self.sync = self.model.finish_gradient_synchronization
        self.optimizer = make_optimizer(payload["optimizer"], self.model.parameters())
        self.batch = tuple(t.to(ctx.device) for t in batch)

    def step(self, ranges: bool = False) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with phase("forward", ranges):
            loss = self.model(*self.batch)
        with phase("backward", ranges):
            loss.backward()
        with phase("sync", ranges):
            if self.sync is not None:
                self.sync()
        with phase("optimizer", ranges):
            self.optimizer.step()

    def collectives(self) -> int:
        """All-reduces per step: the plan's, or what torch DDP reports after its rebuild."""
        if self.torch_ddp is not None:
            data = self.torch_ddp._get_ddp_logging_data()
            sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
            return len([s for s in str(sizes).split(",") if s.strip()])
        if self.sync is None:
            return 0
        return len(self.model.plan.collectives)


def run_rank(payload: dict, ctx) -> dict:
    """Rank function for run_world: warm up every config, then time them round-robin."""
    torch.set_flush_denormal(True)  # tiny activations must not hit the slow denormal path
    spec = ModelSpec(**payload["spec"])
    configs = payload["configs"]
    batch = make_batch(spec, payload["batch"], payload["seq"], payload["seed"] + ctx.rank)
    steps, warmup = payload["steps"], payload["warmup"]
    progress = Progress(len(configs) * (warmup + steps), payload.get("progress", False) and
                        ctx.rank == 0, f"{ctx.world_size} rank(s), {len(configs)} configs")
    from realrun.probes import Probe, is_probe, solo_groups
    solo = solo_groups(configs, ctx)
    try:
        trainers = []
        for config in configs:
            trainers.append(Probe(config["strategy"], spec, batch, ctx, payload, solo)
                            if is_probe(config["strategy"])
                            else Trainer(config, spec, batch, ctx, payload))
            for _ in range(warmup):
                trainers[-1].step()
                progress.advance(label(config))
        steps_s: list[list[float]] = [[] for _ in configs]
        for round_index, start in enumerate(range(0, steps, payload["chunk"])):
            n = min(payload["chunk"], steps - start)
            for k in range(len(configs)):
                i = (k + round_index) % len(configs)
                for _ in range(n):
                    _barrier(ctx)
                    step_s = timed(ctx, trainers[i].step)
                    # a probe may time only part of its step (realrun/probes.py)
                    steps_s[i].append(getattr(trainers[i], "inner_s", None) or step_s)
                    progress.advance(label(configs[i]))
        if payload.get("trace_dir"):
            for config, trainer in zip(configs, trainers):
                path = os.path.join(payload["trace_dir"], f"{label(config)}.rank{ctx.rank}.json")
                write_trace(ctx, lambda t=trainer: t.step(ranges=True), payload["trace_steps"], path)
        return {"rank": ctx.rank, "steps_s": steps_s,
                "collectives": [t.collectives() for t in trainers],
                "threads": torch.get_num_threads()}
    finally:
        progress.close()


def _barrier(ctx) -> None:
    if ctx.device.type == "cuda":
        dist.barrier(device_ids=[ctx.device.index])
    else:
        dist.barrier()


def step_stats(rank_steps_s: list[list[float]]) -> dict:
    """Per step the max over ranks; then median, p5, p95 and the count of those steps."""
    per_step = np.max(np.asarray(rank_steps_s, dtype=float), axis=0)
    return {"median_s": float(np.median(per_step)), "p5_s": float(np.percentile(per_step, 5)),
            "p95_s": float(np.percentile(per_step, 95)), "n": int(per_step.size),
            "steps_s": per_step.tolist()}


def summarize(ranks: list[dict], payload: dict, link: str) -> tuple[list[Result], list[dict]]:
    """simddp Results (source="measured") and the per-config stats they came from.

    exposed_comm_s = median step − median compute-only step (0 if negative, or if no
    compute-only config was run); compute_s = the compute-only median.
    """
    spec = ModelSpec(**payload["spec"])
    stats = []
    for i, config in enumerate(payload["configs"]):
        s = step_stats([r["steps_s"][i] for r in ranks])
        stats.append({**config, "label": label(config), **s,
                      "collectives": ranks[0]["collectives"][i]})
    compute = next((s for s in stats if s["strategy"] == COMPUTE_ONLY), None)
    compute_s = compute["median_s"] if compute else 0.0
    results = [Result(
        model=spec.name, link=link, strategy=s["strategy"], bucket_mb=s["bucket_mb"],
        world_size=len(ranks), step_s=s["median_s"],
        exposed_comm_s=max(0.0, s["median_s"] - compute_s) if compute else 0.0,
        collectives=s["collectives"], accum_steps=1, compute_s=compute_s, source="measured",
        step_p5_s=s["p5_s"], step_p95_s=s["p95_s"], samples=s["n"]) for s in stats]
    return results, stats


def link_label(emulate_hosts: int | None, link_gbit: float | None) -> str:
    """What the ranks talked over: loopback, an emulated link, or whatever torchrun set up."""
    if all(name in os.environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):
        return "torchrun"
    if emulate_hosts is None:
        return "loopback"
    return f"emulated-{link_gbit:g}Gbit" if link_gbit is not None else "emulated-unshaped"


def run_bench(payload: dict, *, world_size: int = 2, backend: str = "gloo", threads: int = 1,
              timeout_s: float = 60.0, emulate_hosts: int | None = None,
              link_gbit: float | None = None,
              trace_dir: str | None = None) -> tuple[list[Result], list[dict]] | None:
    """Run ``payload`` on a world of ranks; (results, stats) on the launching process or
    torchrun's rank 0, None on other torchrun ranks. LaunchError if a rank fails.

    Traces are written to a hidden staging folder inside ``trace_dir`` and moved into it only
    when every rank succeeded, so a failed run leaves no partial trace files.
    """
    staging = created = None
    if trace_dir is not None:
        created = not os.path.isdir(trace_dir)
        os.makedirs(trace_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".staging-", dir=trace_dir)
        payload = {**payload, "trace_dir": staging}
    ok = False
    try:
        ranks = run_world("realrun.bench:run_rank", payload, world_size=world_size,
                          backend=backend, threads_per_rank=threads, timeout_s=timeout_s,
                          emulate_hosts=emulate_hosts, link_gbit=link_gbit)
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
    return summarize(ranks, payload, link_label(emulate_hosts, link_gbit))


class Progress:
    """A rich progress bar on stderr, shown by rank 0 only; a no-op when hidden."""

    def __init__(self, total: int, show: bool, what: str) -> None:
        self.bar = None
        if not show:
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn,
                                   TimeElapsedColumn)
        self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[item]}"), TimeElapsedColumn(),
                       console=Console(file=sys.stderr), transient=True)
        self.task = self.bar.add_task(what, total=total, item="")
        self.bar.start()

    def advance(self, item: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, item=item)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def torch_ddp_bucket_args(bucket_mb: float) -> dict:
    """torch DDP arguments giving simddp's ``ddp`` plan: a 1 MiB first bucket, then the cap.

    Since torch 2.x a plain ``bucket_cap_mb=X`` makes the first bucket X as well (the 1 MiB
    first bucket is kept only when the cap is left at its default), which is simddp's
    ``bucketed`` plan. ``bucket_cap_mb_list=[1, X]`` (in recent releases, e.g. 2.13) restores torch's default
    rule at any cap; older releases always used 1 MiB, so ``bucket_cap_mb`` alone is right there.
    """
    import inspect

    from torch.nn.parallel import DistributedDataParallel
    if "bucket_cap_mb_list" in inspect.signature(DistributedDataParallel.__init__).parameters:
        return {"bucket_cap_mb_list": [DDP_FIRST_BUCKET_MB, bucket_mb]}
    return {"bucket_cap_mb": bucket_mb}
