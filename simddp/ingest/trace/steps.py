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

from dataclasses import dataclass, replace

from simddp.errors import InputError
from simddp.ingest.trace.rank_timeline import Comm, Node, Timeline, Window


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

    @property
    def step_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def sync_end_s(self) -> float:
        return max((c.end_s for c in self.syncs), default=self.backward_end_s)

    @property
    def forward_s(self) -> float:
        return self.backward_start_s - self.start_s

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
    for window in step_windows(tl):
        nodes = [n for n in tl.nodes if window.start_s <= n.start_s < window.end_s]
        if any(n.is_grad for n in nodes):
            steps.append(_step(tl, window, nodes))
    if not steps:
        raise InputError(f"{tl.trace.path}: no step holds a backward that made gradients "
                         "ready (AccumulateGrad); trace at least one whole training step")
    return steps


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
    if tl.work is not None:   # CUDA: each phase's host span, as the GPU ran its kernels
        host_bwd = nodes[0].host_start_s, max(n.host_end_s for n in nodes)
        step = replace(step, forward_device_s=tl.device_s(
            window.host_start_s, host_bwd[0], window.start_s, bwd_start),
            post_device_s=tl.device_s(host_bwd[1], window.host_end_s, bwd_end, window.end_s))
    return step


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
