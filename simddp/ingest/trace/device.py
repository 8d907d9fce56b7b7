"""The GPU's own time in a CUDA trace: each kernel tied to the host call that launched it,
and the device seconds that a stretch of host work put on the GPU.

    work = device_work(kernels, launched_s, gap_kernels)   # simddp.ingest.trace.cuda builds it
    work.seconds(host_a_s, host_b_s, lane_a_s, lane_b_s)   # device time launched in [a, b)
    work.gap_s, work.tied_by, work.untied                  # the GPU's own gap; how tied

Why: the host runs ahead of the GPU only while it is faster. Under a profiler recording
``profile_memory=True`` or ``with_stack=True`` every op costs the host tens of µs more, the
GPU runs out of queued work and waits, and any span on the GPU's clock then measures the
host: the spans on the GPU's clock of such a trace add up to far more than its kernels'
busy time or the step without the profiler (docs/FINDINGS.md#trace-import). So compute is
taken from the kernels themselves:

- each kernel (``kernel``, ``gpu_memcpy``, ``gpu_memset``; NCCL's are the communication
  lane, not compute) is tied to its launch call by ``args.correlation`` (the kernel's and a
  ``cuda_runtime``/``cuda_driver`` event's), else by an ``ac2g`` flow arrow (``"s"`` at the
  launch, ``"f"`` at the kernel's start, one id);
- a stretch of host work [a, b) — a backward segment's autograd nodes, the forward, the
  optimizer — costs the union over its kernels of [start − lead, end] on the GPU: kernels
  that overlap on two streams count once;
- ``lead``: the GPU idles between two kernels even when the second was queued long before
  (it has to be started: ~1–4 µs). That gap is the GPU's own, ``gap_s``: the median idle gap
  before kernels launched before the GPU went idle. Every kernel that starts after an idle
  gap is charged min(gap, gap_s); the rest of the gap is waiting — for the host when the
  kernel was launched after the GPU went idle (the profiler's doing, on a job the GPU bounds
  without it), else for another stream (a collective it depends on). Without any queued
  kernel in the trace gap_s is 0 and the summary says so;
- a kernel tied to no launch (its correlation names no call in the trace, no flow) is not
  dropped: it counts where it ran on the GPU's clock (``lane_a``–``lane_b``), and the
  summary counts such kernels and their time.

Host work the GPU waits for in every step without the profiler too (a synchronize's return,
``zero_grad``, the first launches of a step) is in no kernel: only ``--step-ms`` (the job's
own step time) brings it back.
"""
from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field

from simddp.ingest.trace.events import Event, Flow

_NS = 1e9   # flow ends match kernel starts to the nanosecond (Kineto writes µs with 3 decimals)


@dataclass(frozen=True)
class Kernel:
    """One compute kernel: [start_s, end_s) on the GPU, launched at ``launch_s`` on the host
    (None: tied to no launch), charged ``lead_s`` of the idle gap before it."""

    start_s: float
    end_s: float
    launch_s: float | None
    lead_s: float = 0.0


@dataclass(frozen=True)
class DeviceWork:
    """The trace's compute kernels, ready to be summed over host windows."""

    tied: tuple[Kernel, ...]          # sorted by launch_s
    untied: tuple[Kernel, ...]        # sorted by start_s
    gap_s: float                      # the GPU's own gap between queued kernels (median)
    queued_gaps: int                  # how many gaps gave it
    tied_by: dict = field(default_factory=dict)   # {"correlation": n, "flow": m}
    _launch_keys: tuple[float, ...] = ()
    _untied_keys: tuple[float, ...] = ()

    def seconds(self, host_a_s: float, host_b_s: float, lane_a_s: float,
                lane_b_s: float) -> float:
        """Device seconds of the kernels launched on the host in [host_a_s, host_b_s),
        with the untied kernels that started on the GPU in [lane_a_s, lane_b_s)."""
        i = bisect.bisect_left(self._launch_keys, host_a_s)
        j = bisect.bisect_left(self._launch_keys, host_b_s)
        u = bisect.bisect_left(self._untied_keys, lane_a_s)
        v = bisect.bisect_left(self._untied_keys, lane_b_s)
        return union_s([(k.start_s - k.lead_s, k.end_s)
                        for k in self.tied[i:j] + self.untied[u:v]])

    def untied_between(self, lane_a_s: float, lane_b_s: float) -> tuple[int, float]:
        """(count, seconds) of the untied kernels that started in [lane_a_s, lane_b_s)."""
        u = bisect.bisect_left(self._untied_keys, lane_a_s)
        v = bisect.bisect_left(self._untied_keys, lane_b_s)
        kernels = self.untied[u:v]
        return len(kernels), union_s([(k.start_s - k.lead_s, k.end_s) for k in kernels])


def union_s(intervals) -> float:
    """Seconds covered by ``intervals``; overlaps count once.

    >>> union_s([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)])
    4.0
    """
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def tie_launches(kernels: list[Event], launches: list[Event], flows: tuple[Flow, ...]
                 ) -> tuple[list[float | None], dict]:
    """The host instant each kernel was launched at (None: no tie found), and how many were
    tied by correlation and by flow."""
    by_corr = {e.args["correlation"]: e.start_s for e in launches if "correlation" in e.args}
    starts = {f.id: f.at_s for f in flows if f.phase == "s"}
    ends = {(f.pid, f.tid, round(f.at_s * _NS)): f.id for f in flows if f.phase == "f"}
    out, counts = [], {"correlation": 0, "flow": 0}
    for k in kernels:
        corr = k.args.get("correlation")
        if corr in by_corr:
            out.append(by_corr[corr])
            counts["correlation"] += 1
            continue
        flow = ends.get((k.pid, k.tid, round(k.start_s * _NS)))
        if flow is None and corr in starts:   # a flow's arrow may land on another tid
            flow = corr
        if flow in starts:
            out.append(starts[flow])
            counts["flow"] += 1
        else:
            out.append(None)
    return out, counts


def device_work(kernels: list[Event], launched_s: list[float | None],
                tied_by: dict | None = None) -> DeviceWork:
    """Compute kernels with their launch instants (parallel lists) as a DeviceWork."""
    order = sorted(range(len(kernels)), key=lambda i: (kernels[i].start_s, -kernels[i].end_s))
    # The idle gap before each kernel on the merged lane (all compute streams), and whether
    # the kernel was already launched when the GPU went idle.
    gaps: list[tuple[int, float, bool]] = []
    running = float("-inf")
    for i in order:
        k = kernels[i]
        if k.start_s > running:
            launch = launched_s[i]
            gaps.append((i, k.start_s - running,
                         launch is not None and launch <= running))
        running = max(running, k.end_s)
    queued = [g for _, g, q in gaps if q]
    gap_s = statistics.median(queued) if queued else 0.0
    lead = {i: min(g, gap_s) for i, g, _ in gaps}
    made = [Kernel(kernels[i].start_s, kernels[i].end_s, launched_s[i], lead.get(i, 0.0))
            for i in range(len(kernels))]
    tied = tuple(sorted((k for k in made if k.launch_s is not None), key=lambda k: k.launch_s))
    untied = tuple(sorted((k for k in made if k.launch_s is None), key=lambda k: k.start_s))
    return DeviceWork(tied, untied, gap_s, len(queued), dict(tied_by or {}),
                      tuple(k.launch_s for k in tied), tuple(k.start_s for k in untied))
