"""Record torch.profiler traces of a job realrun runs, or time its steps, with gradient
accumulation: K micro-steps under ``no_sync()`` (torch DDP) or
``set_requires_gradient_sync(False)`` (FSDP2), then the one that syncs.

    run_world("realrun.trace_job:trace_rank", {
        "workload": Workload.from_target("examples/gpt2_tiny.py:build").to_json(),
        "config": config_of(make_strategy("ddp", 1.0)), "accum_steps": 2,
        "warmup": 3, "steps": 10, "out": "traces/job.rank{rank}.json"}, world_size=2)
    run_world("realrun.trace_job:time_rank", {..., "configs": [...], "steps": 12,
        "chunk": 3}, world_size=2)          # {"steps_s": [[s, ...] per config]} per rank

Each rank trains what ``realrun bench`` trains (realrun.steps.Trainer: the same workload,
seed, optimizer and wrapper: torch DDP for ``ddp``, FSDP2 for ``fsdp``/``zero2``,
realrun.DDP for the rest). ``trace_rank`` warms up, times ``logged_steps`` steps without the
profiler (the job's own log, what a user passes as ``--step-ms``), then records ``steps``
steps under ``torch.profiler.profile(record_shapes=True)`` with a schedule (each optimizer
step one ``ProfilerStep#N`` range, as a loop with ``tensorboard_trace_handler`` records it),
or with ``"schedule": False`` a plain profile around the loop (no step ranges).
``time_rank`` times every configuration round-robin, ``chunk`` steps a turn, a barrier before
each step, as ``realrun bench`` does; it exists because realrun bench runs no accumulation
(no_sync is a training-loop pattern, not a wrapper: realrun/configs.py).
"""
from __future__ import annotations

from contextlib import nullcontext

import torch

from realrun.steps import Trainer
from realrun.tensors import trainable_parameters
from realrun.timing import phase, timed
from realrun.workload import Workload


class AccumTrainer:
    """A Trainer whose step is ``accum_steps`` forward+backward passes, all but the last
    without gradient sync, then the optimizer."""

    def __init__(self, config: dict, workload: Workload, ctx, payload: dict) -> None:
        self.trainer = Trainer(config, workload, ctx, payload)
        self.accum_steps = int(payload.get("accum_steps", 1))
        model = self.trainer.model
        if self.accum_steps > 1 and self.trainer.torch_ddp is None \
                and not hasattr(model, "set_requires_gradient_sync"):
            raise ValueError("gradient accumulation runs under torch DDP (no_sync) or FSDP2 "
                             "(set_requires_gradient_sync); not this configuration")

    def _quiet(self, last: bool):
        """No gradient sync in this micro-step unless it is the last."""
        model = self.trainer.model
        if last:
            if hasattr(model, "set_requires_gradient_sync"):
                model.set_requires_gradient_sync(True)
            return nullcontext()
        if self.trainer.torch_ddp is not None:
            return self.trainer.torch_ddp.no_sync()
        model.set_requires_gradient_sync(False)
        return nullcontext()

    def step(self, ranges: bool = False) -> None:
        t = self.trainer
        if self.accum_steps == 1:
            t.step(ranges)
            return
        t.optimizer.zero_grad(set_to_none=True)
        for k in range(self.accum_steps):
            with self._quiet(k == self.accum_steps - 1):
                with phase("forward", ranges):
                    loss = t.loss() / self.accum_steps
                with phase("backward", ranges):
                    loss.backward()
        with phase("sync", ranges):
            if t.sync is not None:
                t.sync()
        with phase("optimizer", ranges):
            t.optimizer.step()


def trace_rank(payload: dict, ctx) -> dict:
    """Warm up, time ``logged_steps``, then trace ``steps`` steps into ``payload["out"]``
    (``{rank}`` in it); returns the gradients' bytes, the collectives a synced step issues,
    and the logged step times."""
    torch.set_flush_denormal(True)  # as realrun bench: tiny activations off the slow path
    workload = Workload(**payload["workload"])
    run = {"seed": payload.get("seed", 0), "optimizer": payload.get("optimizer", "sgd"),
           "accum_steps": payload.get("accum_steps", 1)}
    job = AccumTrainer(payload["config"], workload, ctx, run)
    for _ in range(payload.get("warmup", 3)):
        job.step()
    logged_s = []
    for _ in range(payload.get("logged_steps", 0)):
        ctx.barrier()
        logged_s.append(timed(ctx, job.step))
    ctx.barrier()
    path = payload["out"].format(rank=ctx.rank)
    steps, ranges = payload["steps"], payload.get("ranges", False)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if payload.get("schedule", True):
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
        with torch.profiler.profile(activities=activities, record_shapes=True,
                                    schedule=schedule,
                                    on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
            for _ in range(1 + steps):
                job.step(ranges)
                prof.step()
    else:
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            for _ in range(steps):
                job.step(ranges)
        prof.export_chrome_trace(path)
    module = getattr(job.trainer.model, "module", job.trainer.model)
    grads = [p.numel() * p.element_size() for _, p in trainable_parameters(module)]
    return {"grad_bytes": grads, "collectives": job.trainer.collectives(),
            "logged_s": logged_s}


def time_rank(payload: dict, ctx) -> dict:
    """Every configuration's step timed round-robin (``chunk`` steps a turn, each after a
    barrier, each turn's model built afresh and warmed up ``warmup`` steps)."""
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    run = {"seed": payload.get("seed", 0), "optimizer": payload.get("optimizer", "sgd"),
           "accum_steps": payload.get("accum_steps", 1)}
    configs, chunk = payload["configs"], payload.get("chunk", 3)
    steps_s: list[list[float]] = [[] for _ in configs]
    for start in range(0, payload["steps"], chunk):
        for i, config in enumerate(configs):
            job = AccumTrainer(config, workload, ctx, run)
            for _ in range(payload.get("warmup", 3)):
                job.step()
            for _ in range(min(chunk, payload["steps"] - start)):
                ctx.barrier()
                steps_s[i].append(timed(ctx, job.step))
            job = None
    return {"steps_s": steps_s}
