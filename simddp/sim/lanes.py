"""One rank's two lanes, compute and communication, and how they slow each other.

Each lane runs one piece of work at a time. Under contention (:class:`Contention`, measured
by calibrate or with the model) a lane runs at 1/slowdown of its speed while the other lane
is busy, so work is tracked as remaining full-speed seconds: when the other lane starts or
stops, the waiting process is interrupted and re-plans the rest at the new rate::

    >>> import simpy
    >>> env = simpy.Environment()
    >>> lanes = Lanes(env, Contention(compute=2.0, comm=1.0))
    >>> def run(lane, work_s):
    ...     ref = [None]
    ...     ref[0] = env.process(lanes.work(lane, lane, "x", work_s, ref))
    >>> run(Lane.COMPUTE, 2.0); run(Lane.COMM, 1.0); env.run()
    >>> [(s[0], s[2], s[3]) for s in lanes.spans]   # compute at half speed for 1 s
    [('comm', 0, 1.0), ('compute', 0, 2.5)]
"""
from __future__ import annotations

import simpy

from simddp.inputs.contention import Contention
from simddp.kinds import Lane

_EPS_S = 1e-15  # leftover work below this is float noise, not work
COMPUTE, COMM = Lane.COMPUTE, Lane.COMM


class Lanes:
    """Which lane is busy, and the process to interrupt when the other lane's state flips.

    ``spans`` collects (lane, label, start_s, end_s, kind) of every piece of work."""

    def __init__(self, env: simpy.Environment, contention: Contention) -> None:
        self.env = env
        self.slowdown = {COMPUTE: contention.compute, COMM: contention.comm}
        self.contended = contention.active
        self.busy = {COMPUTE: False, COMM: False}
        self.waiting: dict[str, simpy.Process | None] = {COMPUTE: None, COMM: None}
        self.spans: list[tuple[str, str, float, float, str]] = []

    def _set_busy(self, lane: str, busy: bool) -> None:
        self.busy[lane] = busy
        other = COMM if lane == COMPUTE else COMPUTE
        proc = self.waiting[other]
        if proc is not None and self.slowdown[other] != 1.0:
            self.waiting[other] = None  # one interrupt: a 2nd could land after its work ended
            proc.interrupt()  # its rate just changed: let it re-plan its remaining work

    def work(self, lane: str, label: str, kind: str, work_s: float, proc_ref: list,
             slowdown: float | None = None, span_from_s: float | None = None):
        """Generator: occupy ``lane`` for ``work_s`` of full-speed work (slowed under
        contention); ``proc_ref[0]`` is the process running it, to interrupt; ``slowdown``:
        this work's own factor under contention (a collective's mix of α and bytes), else
        the lane's; ``span_from_s``: where its span starts, if before now (a wait it had)."""
        start_s = self.env.now if span_from_s is None else span_from_s
        if slowdown is not None:
            self.slowdown[lane] = slowdown   # a lane runs one piece of work at a time
        if not self.contended:
            yield self.env.timeout(work_s)
        else:
            other = COMM if lane == COMPUTE else COMPUTE
            self._set_busy(lane, True)
            remaining_s = work_s
            while remaining_s > _EPS_S:
                rate = 1.0 / self.slowdown[lane] if self.busy[other] else 1.0
                t0 = self.env.now
                self.waiting[lane] = proc_ref[0]
                try:
                    yield self.env.timeout(remaining_s / rate)
                    remaining_s = 0.0
                except simpy.Interrupt:
                    remaining_s -= (self.env.now - t0) * rate
                finally:
                    self.waiting[lane] = None
            self._set_busy(lane, False)
        self.spans.append((lane, label, start_s, self.env.now, kind))
