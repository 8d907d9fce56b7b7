"""validate's measured timeline of one configuration, clocked on rank 0.

The rank target is ``realrun.validate.timeline:timeline_rank``.
"""
from __future__ import annotations

import time

import torch

from realrun.launch import run_world
from realrun.precision import set_precision
from realrun.steps import Trainer
from realrun.workload import Workload
from realrun.validate.settings import ValidateSettings, bench_payload
from simddp.kinds import SpanKind
from simddp.result import BACKWARD, COMM, COMPUTE, FORWARD, OPTIMIZER, Span

# ---------------------------------------------------------------------------------------------
# 5. measured timeline


def timeline_rank(payload: dict, ctx) -> dict:
    """Rank function: run one configuration; rank 0 clocks its spans. Median-length step kept.

    Compute spans: forward, backward (``loss.backward()`` returns; with overlap it includes
    launching collectives), optimizer. Comm spans: launch (or the end of the previous
    collective, Gloo runs them one at a time) to completion, read in the work's future
    callback. Only realrun.DDP strategies have the hooks; torch's (``ddp``, hooked strategies,
    FSDP2's ``fsdp`` and ``zero2``) get compute spans only.
    """
    torch.set_flush_denormal(True)
    set_precision(payload["precision"])
    trainer = Trainer(payload["config"], Workload(**payload["workload"]), ctx, payload)
    clock = time.perf_counter
    comm: list[list] = []          # [label, launch_s, end_s, nbytes]
    ddp = trainer.model if trainer.sync is not None else None
    if ddp is not None and ctx.rank == 0:
        clock_collectives(ddp, comm, clock)
    for _ in range(payload["warmup"]):
        trainer.step()
    steps = []
    for _ in range(payload["steps"]):
        t0, t1, t2, t3, t4 = clocked_step(trainer, ctx, comm, clock)
        spans = [(COMPUTE, "forward", t0, t1, FORWARD), (COMPUTE, "backward", t1, t2, BACKWARD),
                 (COMPUTE, "optimizer", t3, t4, OPTIMIZER)]
        prev_end = t0
        for label, start, end, _ in comm:
            end = t3 if end is None else end
            start = max(start, prev_end)
            spans.append((COMM, label, start, end, SpanKind.ALL_REDUCE))
            prev_end = end
        steps.append({"step_s": t4 - t0,
                      "spans": [[a, b, c - t0, d - t0, k] for a, b, c, d, k in spans]})
    steps.sort(key=lambda x: x["step_s"])
    return steps[len(steps) // 2]


def clock_collectives(ddp, comm: list, clock) -> None:
    """Record every collective of a realrun.DDP in ``comm`` as [label, launch_s, end_s,
    nbytes]: launched in ``on_collective_launch``, ended in the work's future callback
    (bench/small_collectives.py clocks both ranks with it)."""
    ddp.on_collective_launch = lambda c: comm.append([c.label, clock(), None, c.nbytes])
    for bucket in ddp._flat:
        _clock_bucket(bucket, comm, clock)


def clocked_step(trainer: Trainer, ctx, comm: list, clock) -> list[float]:
    """One training step after a barrier (``comm`` emptied first): its start and its forward,
    backward, sync and optimizer ends on ``clock``."""
    ctx.barrier()
    comm.clear()
    t0 = clock()
    trainer.optimizer.zero_grad(set_to_none=True)
    loss = trainer.loss()
    t1 = clock()
    loss.backward()
    t2 = clock()
    if trainer.sync is not None:
        trainer.sync()
    t3 = clock()
    trainer.optimizer.step()
    return [t0, t1, t2, t3, clock()]


def _clock_bucket(bucket, comm: list, clock) -> None:
    """Wrap one FlatBucket's launch so its completion time lands in the last comm entry."""
    launch = bucket.launch

    def timed_launch(async_op: bool) -> None:
        entry = comm[-1] if comm else None
        launch(async_op)
        if entry is None:
            return
        work = bucket._work
        if not async_op or work is None:
            entry[2] = clock()
        else:
            work.get_future().then(lambda _f, e=entry: e.__setitem__(2, clock()))
    bucket.launch = timed_launch


def grid_config(s: ValidateSettings, strategy: str, bucket_mb: float | None) -> dict:
    """The configuration as bench ran it (realrun/configs.py: its Strategy, with its units
    if sharded); ValueError if the grid has no such row."""
    for config in s.configs():
        if (config["strategy"], config["bucket_mb"]) == (strategy, bucket_mb):
            return config
    raise ValueError(f"{strategy} at bucket_mb={bucket_mb!r} is not one of this "
                     "validation's configurations")


def measure_timeline(s: ValidateSettings, strategy: str, bucket_mb: float | None
                     ) -> tuple[Span, ...]:
    """Spans of one measured step (the median of ``timeline_steps``) on rank 0, of the
    configuration of this validation's grid with that row name and bucket size."""
    config = grid_config(s, strategy, bucket_mb)
    payload = {**bench_payload(s, []), "config": config, "steps": s.timeline_steps}
    ranks = run_world("realrun.validate.timeline:timeline_rank", payload,
                      threads_per_rank=s.threads, **s.world.launch_args())
    return () if ranks is None else tuple(Span(*sp) for sp in ranks[0]["spans"])


