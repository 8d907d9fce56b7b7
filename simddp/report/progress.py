"""The one progress bar: rich, on stderr, redrawn only when work advances.

Sweeps, benchmarks and calibration all use it::

    with Progress("simulating", delay_s=1.0) as bar:      # appears only after 1 s
        results = sweep(..., on_progress=bar.update)      # update(done, total)
    bar = Progress("bench", total=120, show=rank == 0)   # a rank-0 bar inside timed steps
    bar.advance("ddp-25MB"); bar.close()

Why redraw only on progress: rich's default refresh thread takes the GIL ten times a second,
which lands inside timed all-reduces and training steps (docs/FINDINGS.md#lone-alpha). Short runs
(under ``delay_s``) print nothing, so tests and quick sweeps keep a clean stderr; in a
terminal the bar is removed when done, in a log only its final line stays.
"""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, description: str, total: int | None = None, *, show: bool = True,
                 delay_s: float = 0.0, stream=None) -> None:
        self.description = description
        self.total = total
        self.show = show
        self.delay_s = delay_s
        self.stream = stream
        self._start_s = time.perf_counter()
        self._done = 0
        self._bar = None
        self._task = None

    def __enter__(self) -> "Progress":
        self._start_s = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, done: int, total: int | None = None, item: str = "") -> None:
        """``done`` of ``total`` units finished (sweep's on_progress signature)."""
        self._done = done
        self.total = total if total is not None else self.total
        if self._bar is None and not self._start():
            return
        self._bar.update(self._task, completed=done, total=self.total, item=item, refresh=True)

    def advance(self, item: str = "") -> None:
        """One more unit finished; ``item`` names what (shown next to the bar)."""
        self.update(self._done + 1, self.total, item)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _start(self) -> bool:
        if not self.show or time.perf_counter() - self._start_s < self.delay_s:
            return False
        if self.total is not None and self._done >= self.total:
            return False  # finished before it was worth showing
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=self.stream or sys.stderr)
        self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[item]}"),
                                 TimeElapsedColumn(), console=console,
                                 transient=console.is_terminal, auto_refresh=False,
                                 redirect_stdout=False, redirect_stderr=False)
        self._bar.start()
        self._task = self._bar.add_task(self.description, total=self.total, item="")
        return True
