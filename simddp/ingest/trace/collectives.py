"""Gradient all-reduces across ranks: when each was ready on every rank, when it ended, and
when the one-at-a-time communication lane was busy with it.

    joint = join_ranks(steps_by_rank, same_clock=True)   # steps every rank traced
    for step in joint:
        [(s.nbytes, s.ready_s, s.end_s, s.in_backward) for s in step.samples]

An all-reduce can only run once the last rank has issued it, and it ends at about the same
instant on every rank. So, with each rank's clock shifted onto rank 0's (0 when the traces
come from one host; else the median difference of the collectives' ends), collective i of a
step is **ready** at the latest issue over ranks and **ends** at the earliest end over
ranks, or earlier if a rank's compute lane went on past its wait before that (a Gloo thread
that has woken the waiter may wait milliseconds for a CPU before closing its range). The
link is fitted to these ready and end times (simddp.ingest.trace.fit). On the simulator's
lane, collective i occupies [max(ready_i, end_{i−1}), end_i]: two all-reduces in flight at
once (Gloo runs two worker threads) share the link, and the lane charges the second only
for what it adds. Those busy intervals are what compute ran beside (:func:`busy_overlap`).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from simddp.errors import InputError
from simddp.ingest.trace.steps import Step

_MIN_SERVICE_S = 1e-6   # a collective takes at least this long on the lane


@dataclass(frozen=True)
class CommSample:
    """One gradient all-reduce of one step, seen by all ranks (rank 0's clock)."""

    step: str
    position: int          # its index among the step's gradient all-reduces
    nbytes: int
    ready_s: float
    begin_s: float         # max(ready, previous end): when the lane took it up
    end_s: float
    overlap: float         # share of [begin, end] the ranks spent in their backward
    in_backward: bool      # issued before the backward's last node began (median over ranks):
                           # compute still ran beside it

    @property
    def service_s(self) -> float:
        return max(_MIN_SERVICE_S, self.end_s - self.begin_s)


@dataclass(frozen=True)
class JointStep:
    """One step every rank traced: each rank's Step, and its collectives seen together."""

    label: str
    ranks: tuple[Step, ...]
    offsets_s: tuple[float, ...]   # added to rank r's times to put them on rank 0's clock
    samples: tuple[CommSample, ...]

    @property
    def sync_end_s(self) -> float:
        """When the step's last gradient all-reduce ended (rank 0's clock)."""
        return max((s.end_s for s in self.samples), default=float("-inf"))

    def post_s(self, rank: int) -> float:
        """Rank ``rank``'s work after its backward (copies out, optimizer, the loop's own)."""
        return self.ranks[rank].post_busy_s

    @property
    def step_s(self) -> float:
        """The step's time: the slowest rank's, as a step ends when its last rank does."""
        return max(s.step_s for s in self.ranks)


def join_ranks(steps_by_rank: list[list[Step]], same_clock: bool,
               labels: list[str] | None = None) -> list[JointStep]:
    """Steps traced on every rank, matched by ProfilerStep number (else by order)."""
    labels = labels or [f"rank {r}" for r in range(len(steps_by_rank))]
    by_label = [{s.label: s for s in steps} for steps in steps_by_rank]
    common = [s.label for s in steps_by_rank[0] if all(s.label in b for b in by_label)]
    if not common:
        raise InputError(f"the traces share no step ({labels[0]}: "
                         f"{', '.join(s.label for s in steps_by_rank[0][:3])}...; "
                         f"{labels[-1]}: {', '.join(s.label for s in steps_by_rank[-1][:3])}"
                         "...); record the same steps on every rank")
    matched = [[b[label] for b in by_label] for label in common]
    for steps in matched:
        sizes = [[c.nbytes for c in s.syncs] for s in steps]
        if any(sz != sizes[0] for sz in sizes):
            bad = next(r for r, sz in enumerate(sizes) if sz != sizes[0])
            raise InputError(f"{steps[0].label}: {labels[0]} issued {len(sizes[0])} gradient "
                             f"all-reduces, {labels[bad]} {len(sizes[bad])} (or of other "
                             "sizes); are these traces of one job, recorded at the same steps?")
    offsets = [0.0] * len(steps_by_rank)
    if not same_clock:
        for r in range(1, len(steps_by_rank)):
            diffs = [a.end_s - b.end_s for steps in matched
                     for a, b in zip(steps[0].syncs, steps[r].syncs)]
            offsets[r] = statistics.median(diffs) if diffs else 0.0
    return [JointStep(steps[0].label, tuple(steps), tuple(offsets),
                      tuple(_samples(steps, offsets))) for steps in matched]


def _samples(steps: list[Step], offsets: list[float]) -> list[CommSample]:
    out: list[CommSample] = []
    prev_end = float("-inf")
    backward = [(s.backward_start_s + off, s.backward_end_s + off)
                for s, off in zip(steps, offsets)]
    # No all-reduce ended after the first rank could go on past its wait (Step.lane_sync_end_s).
    lane_end = min(s.lane_sync_end_s + off for s, off in zip(steps, offsets))
    for i, nbytes in enumerate(c.nbytes for c in steps[0].syncs):
        ready = max(s.syncs[i].issue_s + off for s, off in zip(steps, offsets))
        end = min([s.syncs[i].end_s + off for s, off in zip(steps, offsets)] + [lane_end])
        end = max(end, ready + _MIN_SERVICE_S)
        begin = min(max(ready, prev_end), end)
        span = max(end - begin, _MIN_SERVICE_S)
        overlap = statistics.mean(max(0.0, min(end, b1) - max(begin, b0)) / span
                                  for b0, b1 in backward)
        issued_in = sorted(s.syncs[i].issue_s < s.last_node_start_s for s in steps)
        out.append(CommSample(steps[0].label, i, nbytes, ready, begin, end, overlap,
                              issued_in[len(issued_in) // 2]))
        prev_end = max(prev_end, end)
    return out


def busy_overlap(samples: tuple[CommSample, ...], start_s: float, end_s: float) -> float:
    """Share of [start_s, end_s] during which the communication lane was busy."""
    if end_s <= start_s:
        return 0.0
    busy = sum(max(0.0, min(end_s, s.end_s) - max(start_s, s.begin_s)) for s in samples)
    return min(1.0, busy / (end_s - start_s))
