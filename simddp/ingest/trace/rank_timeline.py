"""The lanes one rank's trace is read into: autograd nodes, collectives, step windows.

A :class:`Timeline` holds, in "lane time" (seconds on the compute lane's clock: the host
thread on CPU, the GPU on CUDA), what the import reads from one rank::

    tl = build_timeline(load_trace("rank0.json"))   # simddp.ingest.trace.timeline
    tl.nodes      # autograd nodes of every backward, in order; AccumulateGrad ones carry bytes
    tl.comms      # collectives: issued when, on the comm lane from when to when, how many bytes
    tl.steps      # ProfilerStep#N windows (empty if the trace has none); tl.optimizer: ranges

simddp.ingest.trace.cpu builds it from a CPU (Gloo) trace, simddp.ingest.trace.cuda from a
CUDA (NCCL) one; this module holds the types and the helpers both use.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from simddp.errors import InputError
from simddp.ingest.trace.device import DeviceWork
from simddp.ingest.trace.events import Event, RankTrace

NODE = "autograd::engine::evaluate_function: "
ACCUMULATE = "torch::autograd::AccumulateGrad"
STEP = "ProfilerStep#"
OPTIMIZER = "Optimizer.step#"
HOST_CATEGORIES = ("cpu_op", "user_annotation")
# Ops only torch's DistributedDataParallel (its C++ reducer) records.
TORCH_DDP_MARKS = ("torch::distributed::reducer::", "DistributedDataParallel.forward")


# What a collective's name says it is, by the first of these it holds (spelling without "_"):
# "allreducebarrier" (NCCL's barrier) before "allreduce", "reducescatter" before "scatter".
_KIND_WORDS = (("barrier", "barrier"), ("reducescatter", "reducescatter"),
               ("allreduce", "allreduce"), ("allgather", "allgather"), ("alltoall", "alltoall"),
               ("broadcast", "broadcast"), ("sendrecv", "sendrecv"), ("send", "sendrecv"),
               ("recv", "sendrecv"), ("reduce", "reduce"), ("gather", "gather"),
               ("scatter", "scatter"))
# How a summary or a refusal names each kind (simddp.kinds.CollectiveKind's spelling).
KIND_NAMES = {"allreduce": "all_reduce", "reducescatter": "reduce_scatter",
              "allgather": "all_gather", "alltoall": "all_to_all", "sendrecv": "send/recv"}


def canonical_kind(text: str, strict: bool = False) -> str | None:
    """'allgather' for '_allgather_base', 'all_gather_into_tensor_coalesced', ...; a text
    naming no kind stays as it is (``strict``: None).

    >>> canonical_kind("_reduce_scatter_base"), canonical_kind("all_reduce_barrier")
    ('reducescatter', 'barrier')
    """
    flat = text.replace("_", "").lower()
    return next((kind for word, kind in _KIND_WORDS if word in flat),
                None if strict else flat or None)


def comm_kind(name: str) -> str | None:
    """'allreduce', 'allgather', ... for a collective's event name; None for anything else.

    >>> comm_kind("gloo:all_reduce"), comm_kind("c10d::_allgather_base_"), comm_kind("aten::add_")
    ('allreduce', 'allgather', None)
    """
    for prefix in ("gloo:", "c10d::", "nccl:"):
        if name.startswith(prefix):
            return canonical_kind(name[len(prefix):].strip("_"))
    return None


def kind_name(kind: str) -> str:
    """'all_to_all' for 'alltoall': how people and files spell it."""
    return KIND_NAMES.get(kind, kind)


@dataclass(frozen=True)
class Node:
    """One autograd node of a backward pass, in lane seconds.

    host_s: seconds of collective launch calls inside it (charged per collective instead);
    n_events: profiler events recorded inside it (each costs the profiler's overhead);
    grad_bytes/grad_shape: an AccumulateGrad node's gradient (None: not recorded, or not one);
    host_start_s/host_end_s: its span on the host (CUDA: the lane is the GPU's clock; None on
    CPU, where the lane is the host).
    """

    name: str
    start_s: float
    end_s: float
    host_s: float = 0.0
    n_events: int = 0
    grad_bytes: int | None = None
    grad_shape: tuple[int, ...] | None = None
    host_start_s: float | None = None
    host_end_s: float | None = None

    @property
    def is_grad(self) -> bool:
        return self.name == "AccumulateGrad"


@dataclass(frozen=True)
class Comm:
    """One collective as one rank saw it: issued at ``issue_s`` on the compute lane, on the
    comm lane from ``start_s`` to ``end_s``; ``launch_s``: host seconds of the launch call."""

    kind: str
    nbytes: int | None
    issue_s: float
    start_s: float
    end_s: float
    launch_s: float = 0.0


@dataclass(frozen=True)
class Window:
    """A named range in lane seconds; on CUDA also its span on the host."""

    label: str
    start_s: float
    end_s: float
    host_start_s: float | None = None
    host_end_s: float | None = None


@dataclass(frozen=True)
class Timeline:
    """What one rank's trace says, in lane seconds; see the module docstring."""

    trace: RankTrace
    device: str
    implementation: str            # "torch" (DistributedDataParallel) or "realrun" (other)
    nodes: tuple[Node, ...]
    comms: tuple[Comm, ...]
    steps: tuple[Window, ...]
    optimizer: tuple[Window, ...]
    event_starts: tuple[float, ...]  # host events on the compute lane (CPU), for overhead
    overhead_s: float                # profiler overhead per recorded event (CPU), else 0
    start_s: float                   # the first event's start on the compute lane
    end_s: float                     # the last event's end on the compute lane
    busy: tuple[tuple[float, float], ...] = ()   # when the compute lane ran ops, merged
    # One rank (world size 1): no collective crossed a network. On one GPU they are the
    # host's records of calls that launched no kernel (simddp.ingest.trace.cuda)
    local_comms: bool = False
    # CUDA: the compute kernels tied to their launches (simddp.ingest.trace.device): what a
    # stretch of host work cost the GPU. None on CPU, whose lane is the host's own time.
    work: DeviceWork | None = None

    def device_s(self, host_a_s: float, host_b_s: float, lane_a_s: float,
                 lane_b_s: float) -> float | None:
        """Device seconds launched on the host in [host_a_s, host_b_s) (untied kernels: by
        their start in [lane_a_s, lane_b_s)); None without device work (CPU)."""
        if self.work is None:
            return None
        return self.work.seconds(host_a_s, host_b_s, lane_a_s, lane_b_s)

    def busy_between(self, start_s: float, end_s: float) -> float:
        """Seconds the compute lane ran ops in [start_s, end_s): not the gaps between them."""
        i = max(0, bisect.bisect_right(self.busy, (start_s, float("inf"))) - 1)
        total = 0.0
        for a, b in self.busy[i:]:
            if a >= end_s:
                break
            total += max(0.0, min(b, end_s) - max(a, start_s))
        return total

    def events_between(self, start_s: float, end_s: float) -> int:
        """Profiler events recorded on the compute lane in [start_s, end_s)."""
        return (bisect.bisect_left(self.event_starts, end_s)
                - bisect.bisect_left(self.event_starts, start_s))


def merge(intervals, gap_s: float = 0.0) -> tuple[tuple[float, float], ...]:
    """Sorted intervals merged where they overlap or lie within ``gap_s`` of each other.

    >>> merge([(0, 1), (1.5, 2), (0.5, 1.2)], gap_s=0.4)
    ((0, 2),)
    """
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1] + gap_s:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def node_events(trace: RankTrace) -> list[Event]:
    """Outermost autograd node events; InputError if the trace has none."""
    nodes = [e for e in trace.events if e.name.startswith(NODE)]
    if not nodes:
        raise InputError(f"{trace.path}: no backward pass in the trace (no "
                         f"'{NODE}...' events); trace at least one whole training step")
    outer, end_s = [], -1.0
    for e in nodes:  # sorted by start, longest first: a node inside another is skipped
        if e.start_s >= end_s:
            outer.append(e)
            end_s = e.end_s
    return outer


def implementation(trace: RankTrace) -> str:
    """"torch" if torch's DistributedDataParallel recorded its reducer ops, else "realrun"
    (realrun.DDP, or another wrapper issuing its own all-reduces from gradient hooks)."""
    marked = any(e.name.startswith(TORCH_DDP_MARKS) for e in trace.events)
    return "torch" if marked else "realrun"


def windows(events: list[Event], prefix: str) -> tuple[Window, ...]:
    """Ranges whose name starts with ``prefix`` (ProfilerStep#3, Optimizer.step#SGD.step)."""
    return tuple(Window(e.name, e.start_s, e.end_s) for e in events
                 if e.name.startswith(prefix))


def node_name(event: Event) -> str:
    name = event.name[len(NODE):]
    return "AccumulateGrad" if name == ACCUMULATE else name
