"""One training step's spans on each rank's clock: what ``realrun validate`` and ``realrun
bench --timelines`` measure, and what ``simddp compare`` lays beside a prediction's spans.

Every rank clocks its compute and every collective from its launch (or its predecessor's
end) to its future's callback; FSDP2 and hooked torch DDP get compute spans only. Of several
clocked steps the median by the slower rank is kept, on every rank::

    steps = clocked_steps(trainer, ctx, steps=5)             # on each rank
    spans_by_rank, slowest = step_on_ranks([r0_steps, r1_steps])   # in the parent
"""
from __future__ import annotations

import time

import torch.distributed as dist

from realrun.steps import Trainer
from simddp.kinds import SpanKind
from simddp.result import BACKWARD, COMM, COMPUTE, FORWARD, OPTIMIZER, Span


def clocked_steps(trainer: Trainer, ctx, steps: int, warmup: int = 0) -> list[dict]:
    """``{"step_s", "spans"}`` of each of ``steps`` clocked steps of ``trainer`` (after
    ``warmup`` unclocked ones), relative to this rank's step start. Every rank must call it
    (a barrier starts each step), so every rank pays the clocks' callbacks alike."""
    clock = time.perf_counter
    comm: list[list] = []          # [label, launch_s, end_s, nbytes]
    ddp = trainer.model if trainer.sync is not None else None
    if ddp is not None:
        clock_collectives(ddp, comm, clock)
    torch_clocked = trainer.torch_ddp is not None and clock_torch_ddp(trainer.torch_ddp,
                                                                      comm, clock)
    for _ in range(warmup):
        trainer.step()
    clocked = []
    for _ in range(steps):
        t0, t1, t2, t3, t4 = clocked_step(trainer, ctx, comm, clock)
        t2 = backward_end(t1, t2, comm, torch_clocked)
        spans = [(COMPUTE, "forward", t0, t1, FORWARD), (COMPUTE, "backward", t1, t2, BACKWARD),
                 (COMPUTE, "optimizer", t3, t4, OPTIMIZER)]
        spans += comm_spans(comm, t0, t3)
        clocked.append({"step_s": t4 - t0,
                        "spans": [[a, b, c - t0, d - t0, k] for a, b, c, d, k in spans]})
    return clocked


def step_on_ranks(per_rank: list[list[dict]]) -> tuple[list[list], int]:
    """(every rank's spans of the kept step, the rank whose backward ended last in it): the
    median step by its slower rank, as realrun bench times a step. The last backward is what
    the step's last collectives waited for, so its rank's timeline explains the step; one
    rank's alone can mislead, as backwards part under overlap (docs/FINDINGS.md#contention).

        >>> def step(step_s, backward_end_s):
        ...     return {"step_s": step_s, "spans": [["compute", "backward", 0.0,
        ...                                          backward_end_s, "backward"]]}
        >>> a = [step(3.0, 1.0), step(1.0, 0.5), step(2.0, 0.5)]
        >>> b = [step(1.0, 0.5), step(5.0, 1.0), step(2.5, 2.0)]
        >>> spans, rank = step_on_ranks([a, b])    # by the slower rank: 3, 5, 2.5 -> the 1st
        >>> rank, [s[0][3] for s in spans]         # rank 0's backward ended last in it
        (0, [1.0, 0.5])
    """
    n = min(len(steps) for steps in per_rank)
    by_step = sorted(range(n), key=lambda j: max(steps[j]["step_s"] for steps in per_rank))
    j = by_step[n // 2]

    def backward_end_s(r: int) -> tuple[float, float]:
        ends = [sp[3] for sp in per_rank[r][j]["spans"] if sp[0] == COMPUTE and sp[4] == BACKWARD]
        return max(ends, default=0.0), per_rank[r][j]["step_s"]
    return [steps[j]["spans"] for steps in per_rank], max(range(len(per_rank)),
                                                           key=backward_end_s)


def timeline_fields(per_rank: list[list[dict]]) -> dict:
    """A measured Result's ``rank_spans``, ``spans`` and ``spans_rank`` (:func:`step_on_ranks`)."""
    by_rank, slowest = step_on_ranks(per_rank)
    rank_spans = tuple(tuple(Span(*sp) for sp in spans) for spans in by_rank)
    return {"spans": rank_spans[slowest], "rank_spans": rank_spans, "spans_rank": slowest}


def backward_end(t1: float, t2: float, comm: list[list], torch_clocked: bool) -> float:
    """Where the backward's compute ended: ``t2``, or under a clocked torch DDP, which waits
    inside ``backward()``, its last bucket's launch."""
    return max(t1, comm[-1][1]) if torch_clocked and comm else t2


def comm_spans(comm: list[list], t0: float, t3: float) -> list[tuple]:
    """The comm lane's spans from ``comm`` (in launch order; an unstamped end counts as ``t3``):
    each from its launch, or its predecessor's end if it queued behind it; one that ended first
    ran beside it (Gloo runs two at once), from its launch::

        >>> [s[2:4] for s in comm_spans([["a", 1, 5, 0], ["b", 2, 4, 0], ["c", 3, None, 0]],
        ...                             0, 6)]
        [(1, 5), (2, 4), (5, 6)]
    """
    spans, prev_end = [], t0
    for label, start, end, _ in comm:
        end = t3 if end is None else end
        start = max(start, prev_end) if end >= prev_end else start
        spans.append((COMM, label, start, end, SpanKind.ALL_REDUCE))
        prev_end = max(prev_end, end)
    return spans


def clock_collectives(ddp, comm: list, clock) -> None:
    """Record every collective of a realrun.DDP in ``comm`` as [label, launch_s, end_s,
    nbytes]: launched in ``on_collective_launch``, ended in the work's future callback."""
    ddp.on_collective_launch = lambda c: comm.append([c.label, clock(), None, c.nbytes])
    for bucket in ddp._flat:
        _clock_bucket(bucket, comm, clock)


def clockable(spec) -> bool:
    """Whether a Strategy's collectives get clocked: realrun.DDP's, and unhooked torch DDP's."""
    return spec.implementation == "realrun" or (spec.implementation == "torch"
                                                and spec.comm_hook is None)


def clock_torch_ddp(ddp, comm: list, clock) -> bool:
    """Record every bucket of a torch DDP in ``comm`` through a comm hook that averages as
    torch does without one; False if it has a hook already. Registered after the timed steps,
    which ran torch's own C++ path."""
    group = ddp.process_group
    world_size = dist.get_world_size(group)

    def hook(_state, bucket):
        buffer = bucket.buffer()
        # one more pass than torch's own path, before the launch: outside the span
        buffer.div_(world_size)
        entry = [f"bucket {bucket.index()}", clock(), None,
                 buffer.numel() * buffer.element_size()]
        comm.append(entry)

        def done(fut):
            entry[2] = clock()
            return fut.value()[0]
        return dist.all_reduce(buffer, group=group, async_op=True).get_future().then(done)
    try:
        ddp.register_comm_hook(None, hook)
    except RuntimeError:  # "can only be called once": its own hook runs (ddp+fp16, PowerSGD)
        return False
    return True


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
        elif hasattr(work, "get_future"):  # a c10d Work
            work.get_future().then(lambda _f, e=entry: e.__setitem__(2, clock()))
        else:  # hierarchical's two-level all-reduce: a concurrent.futures.Future inside
            work.future.add_done_callback(lambda _f, e=entry: e.__setitem__(2, clock()))
    bucket.launch = timed_launch
