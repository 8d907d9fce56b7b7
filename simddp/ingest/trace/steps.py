"""Training steps in one rank's lanes, each cut into the phases the simulator runs.

    steps = find_steps(timeline)        # InputError if the trace has no whole step
    s = steps[0]
    s.forward_s, [g.wall_s for g in s.segments], s.post_s   # forward, backward pieces, rest

A step is a ``ProfilerStep#N`` range (a profiler with a schedule and ``prof.step()`` each
iteration: what ``tensorboard_trace_handler`` users record), else the time from one
``Optimizer.step#...`` range's end to the next's (torch.optim records those ranges). Within a
step, on the compute lane:

- **forward**: from the step's start to the first autograd node (zero_grad, data, forward,
  loss: whatever precedes the backward);
- **backward segments**: the backward cut where gradients become ready. A segment ends with
  a run of ``AccumulateGrad`` nodes (the gradients it makes ready, with their bytes) and
  holds the nodes before it; its wall time includes hooks and the profiler's overhead;
- **gradient syncs**: the all-reduces issued between the backward's start and the
  optimizer; other collectives (a buffer broadcast, a logged loss) are listed apart;
- **post**: the compute lane's work between the backward and the step's end (DDP's copies
  out of its buckets, the optimizer, anything after it): while a gradient all-reduce may
  still be running, only its ops (on CUDA, its kernels); after the last one's end, all of
  it. The rest of that time is the **wait** for the gradient syncs.

step = forward + backward + wait + post, exactly.

On CUDA each phase also has its **device** seconds: what the host work of that phase (its
ops, by their span on the host) cost the GPU, kernel by kernel (simddp.ingest.trace.device);
the rest of the phase the GPU sat idle, waiting for the host (``Step.host_idle_s``). On CPU
those fields are None.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from simddp.errors import InputError
from simddp.ingest.trace.rank_timeline import Comm, Node, Timeline, Window, merge


@dataclass(frozen=True)
class Segment:
    """Backward compute that ends with gradients becoming ready (none: the tail)."""

    start_s: float
    end_s: float
    grads: tuple[int, ...]      # indices into the step's gradients, in ready order
    names: tuple[str, ...]      # the autograd nodes it ran (without AccumulateGrad)
    n_events: int               # profiler events recorded in it
    host_s: float               # collective launch calls inside it
    device_s: float | None = None   # CUDA: its kernels' time on the GPU

    @property
    def wall_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Step:
    """One rank's step, in that rank's lane seconds."""

    label: str
    start_s: float
    end_s: float
    backward_start_s: float
    backward_end_s: float
    last_node_start_s: float    # the backward's last autograd node: what runs after it is tail
    segments: tuple[Segment, ...]
    grad_bytes: tuple[int | None, ...]            # in ready order
    grad_shapes: tuple[tuple[int, ...] | None, ...]
    syncs: tuple[Comm, ...]
    others: tuple[Comm, ...]
    optimizer_s: float          # the Optimizer.step range (0 if none): for the summary
    forward_events: int
    post_events: int
    post_busy_s: float          # the compute lane's work after the backward (not its waits)
    forward_device_s: float | None = None   # CUDA: the phases' kernels' time on the GPU
    post_device_s: float | None = None
    # Other collectives (not gradient syncs: a hybrid job's all_to_all, a broadcast): the time
    # they held the compute lane idle, per phase (forward, each segment, post). Kept as
    # measured: on CUDA added to each phase's device seconds, on CPU already in its wall time.
    others_exposed_s: tuple[float, ...] = ()
    # Gradient accumulation: the step's earlier micro-steps (their forward and backward,
    # under no_sync(): no gradient sync), each a Step of its own; this Step is the one that
    # syncs, its forward from ``forward_start_s`` (None: the step's start).
    micro: tuple["Step", ...] = ()
    forward_start_s: float | None = None

    @property
    def step_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def sync_end_s(self) -> float:
        return max((c.end_s for c in self.syncs), default=self.backward_end_s)

    @property
    def forward_s(self) -> float:
        start = self.start_s if self.forward_start_s is None else self.forward_start_s
        return self.backward_start_s - start

    @property
    def accum_steps(self) -> int:
        """Forward+backward passes in the step: 1, or K under gradient accumulation."""
        return 1 + len(self.micro)

    @property
    def backward_s(self) -> float:
        return self.backward_end_s - self.backward_start_s

    @property
    def wait_s(self) -> float:
        """Gradient sync not hidden behind the backward: the compute lane's idle time
        between its backward and the step's end."""
        return max(0.0, self.end_s - self.backward_end_s - self.post_busy_s)

    @property
    def device_s(self) -> float | None:
        """CUDA: the step's kernels' time on the GPU, phase by phase; None on CPU."""
        if self.forward_device_s is None:
            return None
        return (self.forward_device_s + sum(g.device_s for g in self.segments)
                + self.post_device_s)

    @property
    def host_idle_s(self) -> float | None:
        """CUDA: the step's time on the GPU's clock in which no kernel of its own ran and no
        gradient all-reduce was awaited: the GPU waiting for the host."""
        device = self.device_s
        return None if device is None else max(0.0, self.step_s - self.wait_s - device)

    @property
    def lane_sync_end_s(self) -> float:
        """When the syncs were done as the compute lane saw it: the latest its post-backward
        work could start. Gloo's end stamps can be milliseconds late (its thread, once it
        has woken the waiter, may wait for a CPU before closing its range); this is not."""
        return self.end_s - self.post_busy_s


def step_windows(tl: Timeline) -> list[Window]:
    """ProfilerStep#N ranges, else optimizer-to-optimizer; InputError if neither exists."""
    if tl.steps:
        return list(tl.steps)
    if tl.optimizer:
        starts = [tl.start_s] + [w.end_s for w in tl.optimizer[:-1]]
        host = [float("-inf")] + [w.host_end_s for w in tl.optimizer[:-1]]
        return [Window(f"step {i}", s, w.end_s, h, w.host_end_s) for i, (s, h, w) in
                enumerate(zip(starts, host, tl.optimizer))]
    raise InputError(f"{tl.trace.path}: cannot tell the steps apart: no ProfilerStep#N ranges "
                     "(profile with a schedule and call prof.step() after each step) and no "
                     "Optimizer.step# ranges (a torch.optim optimizer records them)")


def find_steps(tl: Timeline) -> list[Step]:
    """Every whole step of the trace that ran a backward with gradients."""
    steps = []
    host_starts = list(tl.event_starts) or sorted(
        e.start_s for e in tl.trace.events if e.cat == "cpu_op")
    for window in step_windows(tl):
        nodes = [n for n in tl.nodes if window.start_s <= n.start_s < window.end_s]
        if any(n.is_grad for n in nodes):
            steps.append(_accumulated(tl, window, nodes, host_starts))
    if not steps:
        raise InputError(f"{tl.trace.path}: no step holds a backward that made gradients "
                         "ready (AccumulateGrad); trace at least one whole training step")
    return steps


def passes(nodes: list[Node], host_starts: list[float] | None = None) -> list[list[Node]]:
    """The step's backward passes: K > 1 under gradient accumulation, else one.

    K passes make the same gradients ready in the same order (their shapes repeat K times),
    and a forward runs between two passes: between each pass's last gradient and the next
    one's first, the largest gap between autograd nodes holds a forward: more host ops
    (``host_starts``: the trace's op starts, sorted) than any gap inside a pass, and 5 at
    least; without them, a gap ten times any inside a pass and a tenth of a pass's backward.
    (A model of K identical layers repeats its shapes too, but runs no forward between
    them.)"""
    grads = [i for i, n in enumerate(nodes) if n.is_grad]
    sig = [(nodes[i].grad_bytes, nodes[i].grad_shape) for i in grads]
    if not sig or all(b is None and sh is None for b, sh in sig):
        return [nodes]
    gaps = [nodes[i + 1].start_s - nodes[i].end_s for i in range(len(nodes) - 1)]
    for k in range(2, len(sig) + 1):
        m = len(sig) // k
        if len(sig) % k or sig != sig[:m] * k:
            continue
        cuts = []   # the largest gap between each pass's last gradient and the next's first
        for j in range(1, k):
            lo, hi = grads[j * m - 1], grads[j * m]
            cuts.append(max(range(lo, hi), key=lambda i: gaps[i]))
        bounds = [0] + [c + 1 for c in cuts] + [len(nodes)]
        split = [nodes[a:b] for a, b in zip(bounds, bounds[1:])]
        if host_starts:     # the host ops recorded in each gap (host times on CUDA)
            def host(n: Node, end: bool) -> float:
                at = n.host_end_s if end else n.host_start_s
                return (n.end_s if end else n.start_s) if at is None else at

            ops = [bisect.bisect_left(host_starts, host(nodes[i + 1], False))
                   - bisect.bisect_left(host_starts, host(nodes[i], True))
                   for i in range(len(gaps))]
            inner = max((n for i, n in enumerate(ops) if i not in cuts), default=0)
            forward = all(ops[c] >= max(5, 2 * inner) for c in cuts)
        else:
            backward = min(p[-1].end_s - p[0].start_s for p in split)
            inner_gap = max((g for i, g in enumerate(gaps) if i not in cuts), default=0.0)
            forward = all(gaps[c] >= max(0.1 * backward, 10 * inner_gap) for c in cuts)
        if forward:
            return split
    return [nodes]


def _accumulated(tl: Timeline, window: Window, nodes: list[Node],
                 host_starts: list[float]) -> Step:
    """The window's step: one pass, or the synced last of K (module text, ``passes``)."""
    split = passes(nodes, host_starts)
    if len(split) == 1:
        return _step(tl, window, nodes)
    micro, start, host_start = [], window.start_s, window.host_start_s
    for j, pass_nodes in enumerate(split[:-1]):
        end = pass_nodes[-1].end_s
        host_end = pass_nodes[-1].host_end_s
        sub = _step(tl, Window(f"{window.label} micro-step {j + 1}", start, end, host_start,
                               host_end), pass_nodes)
        if sub.syncs:
            raise InputError(f"{tl.trace.path}: {window.label}: micro-step {j + 1} of "
                             f"{len(split)} all-reduced its gradients too (accumulation without "
                             "no_sync()); the import reads no_sync() accumulation, or one "
                             "micro-step per step")
        micro.append(sub)
        start, host_start = end, host_end
    last = _step(tl, Window(window.label, start, window.end_s, host_start, window.host_end_s),
                 split[-1])
    return replace(last, start_s=window.start_s, forward_start_s=start, micro=tuple(micro))


def _step(tl: Timeline, window: Window, nodes: list[Node]) -> Step:
    bwd_start, bwd_end = nodes[0].start_s, max(n.end_s for n in nodes)
    optimizer = [w for w in tl.optimizer if window.start_s <= w.start_s < window.end_s]
    sync_until = optimizer[0].start_s if optimizer else window.end_s
    comms = [c for c in tl.comms if window.start_s <= c.issue_s < window.end_s]
    syncs = tuple(c for c in comms if c.kind == "allreduce"
                  and bwd_start <= c.issue_s < sync_until)
    grads = [n for n in nodes if n.is_grad]
    step = Step(label=window.label, start_s=window.start_s, end_s=window.end_s,
                backward_start_s=bwd_start, backward_end_s=bwd_end,
                last_node_start_s=nodes[-1].start_s,
                segments=tuple(_segments(tl, nodes, bwd_start)),
                grad_bytes=tuple(n.grad_bytes for n in grads),
                grad_shapes=tuple(n.grad_shape for n in grads),
                syncs=syncs, others=tuple(c for c in comms if c not in syncs),
                optimizer_s=sum(w.end_s - w.start_s for w in optimizer),
                forward_events=tl.events_between(window.start_s, bwd_start),
                post_events=tl.events_between(bwd_end, window.end_s),
                post_busy_s=_post_busy(tl, bwd_end, window.end_s, syncs))
    others = [c for c in step.others if c.end_s > c.start_s]
    spans = ([(window.start_s, bwd_start)] + [(g.start_s, g.end_s) for g in step.segments]
             + [(bwd_end, window.end_s)])
    exposed = tuple(_exposed(tl, others, syncs, a, b) for a, b in spans) if others else ()
    step = replace(step, others_exposed_s=exposed)
    if tl.work is not None:   # CUDA: each phase's host span, as the GPU ran its kernels
        host_bwd = nodes[0].host_start_s, max(n.host_end_s for n in nodes)
        add = exposed or (0.0,) * len(spans)   # other collectives' idle time, kept as measured
        step = replace(step, forward_device_s=tl.device_s(
            window.host_start_s, host_bwd[0], window.start_s, bwd_start) + add[0],
            post_device_s=tl.device_s(host_bwd[1], window.host_end_s, bwd_end, window.end_s)
            + add[-1], segments=tuple(replace(g, device_s=g.device_s + x) for g, x in
                                      zip(step.segments, add[1:-1])))
    return step


def _exposed(tl: Timeline, others: list[Comm], syncs: tuple[Comm, ...], start_s: float,
             end_s: float) -> float:
    """Seconds of [start_s, end_s) in which another collective ran and the compute lane ran
    nothing, nor waited for a gradient sync (the engine's own): what it cost the step, kept
    as measured."""
    def clip(comms):
        return merge((max(c.start_s, start_s), min(c.end_s, end_s)) for c in comms
                     if c.start_s < end_s and c.end_s > start_s)

    waits = clip(syncs)
    total = 0.0
    for a, b in clip(others):
        idle = b - a - tl.busy_between(a, b)
        for w0, w1 in waits:   # less what of it the gradient syncs' wait covers
            lo, hi = max(a, w0), min(b, w1)
            if hi > lo:
                idle -= hi - lo - tl.busy_between(lo, hi)
        total += max(0.0, idle)
    return total


def _post_busy(tl: Timeline, bwd_end: float, end: float, syncs: tuple[Comm, ...]) -> float:
    """The compute lane's work from its backward's end to the step's end. Until the last
    gradient all-reduce's latest end stamp the lane may be waiting, so only its ops count
    there; after it, everything counts (Python's gaps between ops are work too)."""
    last = min(max([c.end_s for c in syncs] + [bwd_end]), end)
    return tl.busy_between(bwd_end, last) + (end - last)


def _segments(tl: Timeline, nodes: list[Node], start_s: float) -> list[Segment]:
    """Cut the backward after each run of AccumulateGrad nodes."""
    out: list[Segment] = []
    names: list[str] = []
    grads: list[int] = []
    host_s, n_grads = 0.0, 0
    host_start_s = nodes[0].host_start_s   # CUDA: the segment's span on the host
    for i, node in enumerate(nodes):
        host_s += node.host_s
        if node.is_grad:
            grads.append(n_grads)
            n_grads += 1
        else:
            names.append(node.name)
        run_ends = node.is_grad and (i + 1 == len(nodes) or not nodes[i + 1].is_grad)
        if run_ends or i + 1 == len(nodes):
            device_s = None if tl.work is None else tl.device_s(
                host_start_s, node.host_end_s, start_s, node.end_s)
            out.append(Segment(start_s, node.end_s, tuple(grads), tuple(names),
                               tl.events_between(start_s, node.end_s), host_s, device_s))
            start_s, names, grads, host_s = node.end_s, [], [], 0.0
            host_start_s = node.host_end_s
    return out
