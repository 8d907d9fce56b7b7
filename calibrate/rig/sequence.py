"""α as a training step sees it: all-reduces issued back to back, blocking and asynchronous.

The sweep times each all-reduce alone, after a barrier. A DDP step issues many in a row: an
overlapping DDP queues them asynchronously (``async_op=True``) as gradients become ready, a
naive one waits for each before issuing the next. Each repeat, on every rank::

    barrier; compute; clock; for t in tensors: all_reduce(t)                 -> blocking_s
                                   (the first call's seconds alone    -> blocking_first_s)
                                   (each other's, on the CPU          -> blocking_calls_s)
    barrier; compute; clock; works = [all_reduce(t, async_op=True) for t in tensors]
                             for w in works: w.wait()                        -> async_s
    4 x (barrier; clock; all_reduce(4 KiB))                                  -> lone_s

blocking_s gives GlooHost.blocking_alpha_s (the calls after the first; the first's excess is
GlooHost.idle_wake_s, docs/FINDINGS.md#wake-after-idle), lone_s Link.alpha_s, blocking_calls_s
on a shaped link GlooHost.blocking_refill_s; async_s is reported, not used. "compute" is 20 ms
of matmuls, as a step's all-reduces follow the backward. Per rank the median over repeats,
then the max over ranks; each total less the fitted line's bandwidth terms, over N, is α::

    α_async    = (async_s    − Σ 2(p−1)/p·n/busbw) / N      -> queued_alpha_s (reported)
    α_blocking = (blocking_s − Σ 2(p−1)/p·n/busbw) / N      -> GlooHost.blocking_alpha_s

With ``kinds``, each repeat also issues one kind's collectives (the kinds in turn, to save
time), queued (``α_kind``, Link.kind_fits) then each waited for (the kind's own blocking α,
docs/FINDINGS.md#blocking-alpha). docs/CALIBRATE.md, Method, says why.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from calibrate.ranks.allreduce import time_allreduce, zeros
from calibrate.ranks.kinds import collective, full_bytes, kind_tensors

BUSY_S = 0.020  # compute before each timed sequence, as a backward precedes the all-reduces
# Lone small all-reduces each repeat: α sampled across the whole step, not in one stretch
# (docs/FINDINGS.md#lone-alpha).
LONE_BYTES = 4096
LONE_PER_REPEAT = 4
_MATMUL_N = 256  # one chunk: well under a millisecond on one core, so busy() ends near busy_s


def measure_sequence(cfg: dict, ctx) -> dict:
    """Rank side. ``cfg``: sizes_bytes (one all-reduce each, in order), dtype, repeats, and
    optionally kinds (one kind per repeat, in turn: one collective per size, queued)."""
    tensors = [zeros(n, cfg["dtype"], ctx.device) for n in cfg["sizes_bytes"]]
    for t in tensors:  # connections and buffers for every size, untimed
        dist.all_reduce(t)
    kinds = {}
    for kind in cfg.get("kinds", ()):
        op = collective(kind)
        pairs = [kind_tensors(kind, n, cfg["dtype"], ctx.world_size, ctx.device)
                 for n in cfg["sizes_bytes"]]
        kinds[kind] = ([lambda async_op, o=o, i=i, op=op: op(o, i, async_op=async_op)
                        for o, i in pairs], [full_bytes(kind, pair) for pair in pairs])
        for call in kinds[kind][0]:  # untimed, as the all-reduces above
            call(False)
    blocking_s, async_s, lone_s, first_s, each_s = [], [], [], [], []
    kinds_s = {kind: {"async_s": [], "blocking_s": [], "blocking_first_s": []} for kind in kinds}
    order = list(kinds)
    lone = zeros(LONE_BYTES, cfg["dtype"], ctx.device)
    for repeat in range(max(cfg["repeats"], len(order))):  # every kind at least once
        for blocking, times in ((True, blocking_s), (False, async_s)):
            if repeat < cfg["repeats"]:
                ctx.barrier()
                times.append(timed_sequence(tensors, blocking, ctx,
                                            first_s=first_s if blocking else None,
                                            each_s=each_s if blocking else None))
        if repeat < cfg["repeats"]:
            lone_s += time_allreduce(lone, ctx, 0, LONE_PER_REPEAT)
        if order:  # one kind per repeat, in turn: each gets repeats/len(kinds), to save time
            kind = order[repeat % len(order)]
            times = kinds_s[kind]
            for blocking in (False, True):
                ctx.barrier()
                times["blocking_s" if blocking else "async_s"].append(timed_calls(
                    kinds[kind][0], blocking, ctx,
                    first_s=times["blocking_first_s"] if blocking else None))
    out = {"blocking_s": blocking_s, "blocking_first_s": first_s, "async_s": async_s,
           "lone_s": lone_s, "lone_bytes": LONE_BYTES}
    if each_s:
        out["blocking_calls_s"] = each_s
    if kinds:
        out["kinds"] = {kind: {**kinds_s[kind], "sizes_bytes": sizes}
                        for kind, (_, sizes) in kinds.items()}
    return out


def timed_sequence(tensors: list, blocking: bool, ctx, busy_s: float = BUSY_S,
                   first_s: list | None = None, each_s: list | None = None) -> float:
    """``busy_s`` of matmuls, then seconds to all-reduce ``tensors`` back to back, each waited
    for (``blocking``) or all queued; ``first_s``, ``each_s`` as :func:`timed_calls`."""
    return timed_calls([lambda async_op, t=t: dist.all_reduce(t, async_op=async_op)
                        for t in tensors], blocking, ctx, busy_s, first_s, each_s)


def busy(busy_s: float, ctx) -> None:
    """``busy_s`` of matmuls on the rank's device, as a backward precedes a step's calls."""
    matrix = torch.ones(_MATMUL_N, _MATMUL_N, device=ctx.device)
    end_s = time.perf_counter() + busy_s
    while time.perf_counter() < end_s:
        torch.mm(matrix, matrix)
        ctx.synchronize()


def timed_calls(calls: list, blocking: bool, ctx, busy_s: float = BUSY_S,
                first_s: list | None = None, each_s: list | None = None) -> float:
    """:func:`timed_sequence` for any collectives (``call(async_op)`` returns its work when
    async). Blocking: the first call's seconds go to ``first_s``, and on the CPU (where a call
    returns when done) the others' to ``each_s``."""
    busy(busy_s, ctx)
    start_s = time.perf_counter()
    if blocking:
        ends_s = [start_s]
        for j, call in enumerate(calls):
            call(False)
            if j == 0 and first_s is not None:
                ctx.synchronize()
                first_s.append(time.perf_counter() - start_s)
            ends_s.append(time.perf_counter())
        if each_s is not None and ctx.device.type == "cpu":
            each_s.append([b - a for a, b in zip(ends_s[1:], ends_s[2:])])
    else:
        for work in [call(True) for call in calls]:
            work.wait()
    ctx.synchronize()
    return time.perf_counter() - start_s
