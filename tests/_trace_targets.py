"""Rank functions that record real torch.profiler traces of a data-parallel job, for
tests/realrun/test_trace_import_real.py and bench/bench_trace_import.py.

    run_world("tests._trace_targets:trace_rank", {
        "workload": Workload.from_target("examples/gpt2_tiny.py:build").to_json(),
        "config": config_of(make_strategy("ddp", 0.25)),   # torch DDP, 0.25 MiB buckets
        "warmup": 3, "steps": 4, "out": "traces/gpt2.rank{rank}.json"}, world_size=2)

Each rank trains what ``realrun bench`` trains (realrun.steps.Trainer: the same workload,
seed, optimizer and DDP wrapper, torch's DistributedDataParallel for ``ddp`` and realrun.DDP
for the other strategies), runs ``warmup`` untimed steps (torch DDP rebuilds its buckets in
the forward of its second step), then ``steps`` steps under
``torch.profiler.profile(record_shapes=True)``: by default with a schedule (one warmup step,
then ``steps`` active ones, ``prof.step()`` after each, as a training loop with
``tensorboard_trace_handler`` does, so each step is a ``ProfilerStep#N`` range), or with
``"schedule": False`` a plain profile around the loop (no step ranges). One Chrome trace per
rank. It returns what the tests check
the import against (the bytes of every trainable gradient, the collectives the wrapper
issues per step) and, with ``"logged_steps": N``, N step times measured without the
profiler just before it started: the job's own log, what a user passes as ``--step-ms``.
"""
from __future__ import annotations

import torch

from realrun.steps import Trainer
from realrun.tensors import trainable_parameters
from realrun.timing import timed
from realrun.workload import Workload


def trace_rank(payload: dict, ctx) -> dict:
    """Warm up, then trace ``payload["steps"]`` steps into ``payload["out"]`` (``{rank}``)."""
    torch.set_flush_denormal(True)  # as realrun bench: tiny activations off the slow path
    workload = Workload(**payload["workload"])
    run = {"seed": payload.get("seed", 0), "optimizer": payload.get("optimizer", "sgd")}
    trainer = Trainer(payload["config"], workload, ctx, run)
    for _ in range(payload.get("warmup", 3)):
        trainer.step()
    # The job's own log: step times without the profiler, just before it starts (what a
    # user passes as --step-ms). Each step starts after a barrier, as realrun bench's do.
    logged_s = []
    for _ in range(payload.get("logged_steps", 0)):
        ctx.barrier()
        logged_s.append(timed(ctx, trainer.step))
    ctx.barrier()
    path = payload["out"].format(rank=ctx.rank)
    activities = [torch.profiler.ProfilerActivity.CPU]
    steps = payload["steps"]
    if payload.get("schedule", True):
        # As with tensorboard_trace_handler: one warmup step, then `steps` recorded steps,
        # each a ProfilerStep#N range; the handler exports when the active window closes.
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
        with torch.profiler.profile(activities=activities, record_shapes=True, schedule=schedule,
                                    on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
            for _ in range(1 + steps):
                trainer.step(ranges=payload.get("ranges", False))
                prof.step()
    else:  # a plain profile() around the loop: no ProfilerStep ranges in the trace
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            for _ in range(steps):
                trainer.step(ranges=payload.get("ranges", False))
        prof.export_chrome_trace(path)
    module = getattr(trainer.model, "module", trainer.model)
    grads = [p.numel() * p.element_size() for _, p in trainable_parameters(module)]
    return {"grad_bytes": grads, "collectives": trainer.collectives(), "logged_s": logged_s}
