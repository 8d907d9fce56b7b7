"""Progress of long work on a rank, counted in steps: an estimate of the whole after the first
step, then a line at intervals on stderr (in a terminal, simddp's progress bar instead).

    progress = StepProgress({"layers": 23, "host costs": 198}, label="profile")
    progress.phase("layers")    # the clock starts at the first phase
    progress.step()             # one step done; may print a line
    progress.close()            # the last line, if anything was shown

Work projected to take less than ``quiet_s`` prints nothing. The estimate is the time per step
so far times the steps left; at each phase's start the count jumps there, so work a phase
does not count step by step still goes into the time per step.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import Callable

QUIET_S = 10.0            # work shorter than this stays quiet
LINES = 15                # about this many progress lines over the whole work...
EVERY_MIN_S, EVERY_MAX_S = 5.0, 60.0   # ...but not more often than 5 s, nor rarer than 60 s
BAR_EVERY_S = 1.0         # the terminal bar's redraws (each lands inside a timed step)
ESTIMATE, PROGRESS, DONE = "estimate", "progress", "done"


@dataclass(frozen=True)
class Report:
    """One line's numbers: ``done`` of ``total`` steps in ``phase`` after ``elapsed_s``;
    ``left_s`` the estimate of what remains (None in the DONE report)."""

    kind: str
    done: int
    total: int
    phase: str
    elapsed_s: float
    left_s: float | None


class StepProgress:
    """Counts steps against ``planned`` (steps per phase, in the order the phases run) and
    reports on ``write`` (default: a line on stderr); ``show`` False: does nothing."""

    def __init__(self, planned: dict[str, int], *, label: str = "profile", show: bool = True,
                 tty: bool = False, write: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, quiet_s: float = QUIET_S,
                 every_s: float | None = None) -> None:
        self.planned = dict(planned)
        self.total = sum(self.planned.values())
        self.starts, before = {}, 0
        for name, steps in self.planned.items():
            self.starts[name], before = before, before + steps
        self.label, self.show, self.tty = label, show, tty
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self.clock, self.quiet_s, self.every_s = clock, quiet_s, every_s
        self.reports: list[Report] = []
        self.counted: dict[str, int] = {}   # steps counted in each phase
        self.done = 0
        self.current = ""
        self._start_s: float | None = None
        self._last_s: float | None = None   # when the last line was written
        self._first_total_s: float | None = None
        self._bar = None
        self._bar_s = 0.0

    def phase(self, name: str) -> None:
        """Phase ``name`` (a key of ``planned``) begins: the count moves up to its start."""
        if not self.show:
            return
        if self._start_s is None:
            self._start_s = self.clock()
        self.current = name
        self.counted.setdefault(name, 0)
        self.done = max(self.done, self.starts[name])

    def step(self) -> None:
        """One step of the current phase is done."""
        if not self.show or self._start_s is None:
            return
        self.done += 1
        self.counted[self.current] += 1
        self._update()

    def close(self, done: bool = True) -> None:
        """The DONE line, if a line was shown or the work outlasted ``quiet_s``; ``done``
        False (the work failed): only the bar is taken down."""
        if not self.show or self._start_s is None:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elapsed_s = self.clock() - self._start_s
        if not done or (self._last_s is None and elapsed_s < self.quiet_s):
            return
        self._emit(Report(DONE, self.total, self.total, self.current, elapsed_s, None))

    def _update(self) -> None:
        now = self.clock()
        elapsed_s = now - self._start_s
        done = min(self.done, self.total)
        left_s = (self.total - done) * elapsed_s / done
        report = Report(PROGRESS, done, self.total, self.current, elapsed_s, left_s)
        if self._last_s is None:
            if elapsed_s + left_s < self.quiet_s:
                return
            self._first_total_s = elapsed_s + left_s
            self._emit(replace(report, kind=ESTIMATE))
            self._last_s = self._bar_s = now
            if self.tty:
                from simddp.report.progress import Progress
                self._bar = Progress(self.label, self.total)
            return
        if self._bar is not None:
            if now - self._bar_s >= BAR_EVERY_S:
                self._bar_s = now
                self._bar.update(done, self.total, f"{self.current}, "
                                                   f"about {about(left_s)} left")
            return
        if now - self._last_s >= self._every_s(elapsed_s + left_s):
            self._emit(report)
            self._last_s = now

    def _every_s(self, total_s: float) -> float:
        if self.every_s is not None:
            return self.every_s
        return min(EVERY_MAX_S, max(EVERY_MIN_S, total_s / LINES))

    def _emit(self, report: Report) -> None:
        self.reports.append(report)
        self.write(self.line(report))

    def line(self, r: Report) -> str:
        """The line of report ``r``."""
        count = f"{self.label}: {r.done}/{r.total} steps"
        if r.kind == ESTIMATE:
            return (f"{count} in {duration(r.elapsed_s)} ({r.phase}): about "
                    f"{about(r.elapsed_s + r.left_s)} in all")
        if r.kind == PROGRESS:
            return (f"{count} ({r.phase}), {duration(r.elapsed_s)} so far, about "
                    f"{about(r.left_s)} left")
        first = (f" (first estimate: about {about(self._first_total_s)})"
                 if self._first_total_s is not None else "")
        return f"{count} in {duration(r.elapsed_s)}{first}"


def duration(seconds: float) -> str:
    """Seconds as a person reads them.

    >>> duration(4.26), duration(42.4), duration(250), duration(120), duration(4000)
    ('4.3 s', '42 s', '4 min 10 s', '2 min', '1 h 6 min')
    """
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 10 and secs:
        return f"{minutes} min {secs} s"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def about(seconds: float) -> str:
    """An estimate, rounded as far as it deserves.

    >>> about(3.2), about(47), about(95), about(250), about(4000)
    ('3 s', '50 s', '1.5 min', '4 min', '1 h 5 min')
    """
    if seconds < 10:
        return f"{round(seconds)} s"
    if seconds < 60:
        return f"{10 * round(seconds / 10)} s"
    if seconds < 180:
        return f"{round(seconds / 30) / 2:g} min"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    minutes = 5 * round(seconds / 300)
    return f"{minutes // 60} h {minutes % 60} min"
