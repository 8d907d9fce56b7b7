"""A CPU trace (Gloo) read into lanes: the calling thread is the compute lane.

    tl = build_cpu_timeline(load_trace("rank0.json"))   # via simddp.ingest.trace.timeline

On CPU the backward runs on the thread that called it: each ``autograd::engine::
evaluate_function: X`` event is a node, and a gradient is ready when its ``AccumulateGrad``
node ends (its post-hooks run inside it: torch DDP's reducer copies the gradient into its
bucket there and launches the bucket's all-reduce once the bucket is full; realrun.DDP does
the same from Python). A collective is issued by a ``c10d::allreduce_`` op and runs on a
``pt_gloo_runloop`` thread as ``gloo:all_reduce``, whose ``Input Dims`` and ``Input type``
give its size (``record_shapes=True``). Every recorded op costs the profiler some time on
this thread: :func:`profiler_overhead_s` estimates how much, from the trace itself.
"""
from __future__ import annotations

import bisect
import statistics
from collections import Counter

from simddp.errors import InputError
from simddp.ingest.trace.events import Event, RankTrace, nbytes_of, numel_of, shape_of
from simddp.ingest.trace.rank_timeline import (
    ACCUMULATE,
    HOST_CATEGORIES,
    OPTIMIZER,
    STEP,
    Comm,
    Node,
    Timeline,
    comm_kind,
    implementation,
    merge,
    node_events,
    node_name,
    windows,
)

_CLOCK_SLACK_S = 1e-6   # one thread's clock read may precede another's by a tick
# What a c10d launch runs as on a gloo thread: Gloo reduce-scatters by all-reducing the whole
# tensor (gloo:all_reduce under c10d::_reduce_scatter_base_, torch 2.13).
_RUNS_AS = {"reducescatter": ("reducescatter", "allreduce")}


def build_cpu_timeline(trace: RankTrace) -> Timeline:
    """The lanes of one rank's CPU trace; InputError if it has no backward pass."""
    host = [e for e in trace.events if e.cat in HOST_CATEGORIES]
    nodes = node_events(trace)
    tid = Counter(e.tid for e in nodes).most_common(1)[0][0]
    thread = [e for e in host if e.tid == tid]
    starts = [e.start_s for e in thread]
    launches = [e for e in thread if comm_kind(e.name) and e.name.startswith("c10d::")]
    return Timeline(
        trace=trace, device="cpu", implementation=implementation(trace),
        nodes=tuple(_cpu_node(n, thread, starts) for n in nodes if n.tid == tid),
        comms=tuple(_gloo_comms(trace, host, launches)),
        steps=windows(host, STEP), optimizer=windows(host, OPTIMIZER),
        event_starts=tuple(starts), overhead_s=profiler_overhead_s(thread),
        start_s=thread[0].start_s, end_s=max(e.end_s for e in thread),
        busy=merge((e.start_s, e.end_s) for e in thread if e.cat == "cpu_op"),
        local_comms=trace.world_size == 1)   # one rank: Gloo reduces in place, no network


def _cpu_node(node: Event, thread: list[Event], starts: list[float]) -> Node:
    lo = bisect.bisect_left(starts, node.start_s)
    hi = bisect.bisect_left(starts, node.end_s)
    inside = [e for e in thread[lo:hi] if node.contains(e) and e is not node]
    launch_s = sum(e.dur_s for e in inside if e.name.startswith("c10d::") and comm_kind(e.name))
    grad = next((e for e in inside if e.name == ACCUMULATE), None)
    return Node(node_name(node), node.start_s, node.end_s, host_s=launch_s,
                n_events=len(inside) + 1,
                grad_bytes=None if grad is None else nbytes_of(grad),
                grad_shape=None if grad is None else shape_of(grad))


def _gloo_comms(trace: RankTrace, host: list[Event], launches: list[Event]) -> list[Comm]:
    """Each gloo collective paired with the c10d launch that issued it, in issue order.

    A launch's collective is the first run of its kind and element count that starts after
    it: Gloo's two worker threads take collectives from one queue, but may stamp their
    starts out of order, so runs are matched by size, not by position. A run no launch
    claims was issued before the trace began: it is issued when it starts."""
    runs = [e for e in host if e.name.startswith("gloo:") and comm_kind(e.name)]
    free = list(runs)
    comms = []
    for launch in launches:
        kind = comm_kind(launch.name)
        numels = {numel_of(launch, i) for i in (0, 1)} - {None} or {None}
        run = next((e for e in free if comm_kind(e.name) in _RUNS_AS.get(kind, (kind,))
                    and e.start_s >= launch.start_s - _CLOCK_SLACK_S
                    and (None in numels or numel_of(e) in numels)), None)
        if run is not None:
            free.remove(run)
            # a reduce-scatter's or all-gather's bytes: the whole unsharded tensor (simddp's
            # and nccl-tests' convention), the larger of its two tensors
            sizes = [nbytes_of(run)] + [numel_of(launch, i) * (nbytes_of(run) // numel_of(run))
                                        for i in (0, 1) if numel_of(launch, i)
                                        and nbytes_of(run) and numel_of(run)]
            comms.append(Comm(kind, max((b for b in sizes if b), default=None), launch.start_s,
                              run.start_s, run.end_s, launch.dur_s))
    comms += [Comm(comm_kind(e.name), nbytes_of(e), e.start_s, e.start_s, e.end_s) for e in free]
    if not comms and launches:
        raise InputError(f"{trace.path}: collectives were launched ({launches[0].name}) but "
                         "their execution was not recorded (no gloo:* events); the import "
                         "needs the backend's events (Gloo on CPU, NCCL kernels on CUDA)")
    return sorted(comms, key=lambda c: c.issue_s)


def profiler_overhead_s(thread: list[Event]) -> float:
    """The profiler's cost per recorded event on the host, estimated from the trace itself.

    An op whose only child is another op spends, besides dispatching it (~0.2 µs), what
    the profiler costs to record that child (its shapes, its two clock reads): the median of
    those parents' self times. It agrees with timing the same steps with and without the
    profiler on an idle host (docs/FINDINGS.md#trace-import).
    """
    ops = [e for e in thread if e.cat == "cpu_op"]
    stack: list[int] = []
    children: dict[int, list[int]] = {}
    for i, e in enumerate(ops):
        while stack and ops[stack[-1]].end_s <= e.start_s:
            stack.pop()
        if stack:
            children.setdefault(stack[-1], []).append(i)
        stack.append(i)
    selfs = [ops[i].dur_s - ops[kids[0]].dur_s for i, kids in children.items() if len(kids) == 1]
    return max(0.0, statistics.median(selfs)) if len(selfs) >= 20 else 0.0
