"""Terminal output: plain-text tables, number formats, and a progress bar for long runs only.

Tables are plain text (no colour, no box drawing) so they read the same in a terminal, a CI
log and a pasted issue — the nccl-tests habit of columns users can ``grep`` and ``awk``::

    >>> print(render_table(["strategy", "step ms"], [["naive", "113.10"], ["ddp", "73.08"]]))
    strategy  step ms
    --------  -------
    naive      113.10
    ddp         73.08

Numbers are right-aligned, text left-aligned (a cell is "a number" if it parses as one after
stripping a trailing ``×``, ``%`` or unit).
"""
from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence

from simddp.link import Link
from simddp.profile import ModelProfile

MIB = 2**20
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*(×|%|ms|s|MB|MiB)?$")


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                 title: str | None = None) -> str:
    """Columns padded to their widest cell; numeric columns right-aligned."""
    cols = len(headers)
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(headers[i])] + [len(r[i]) for r in cells]) for i in range(cols)]
    numeric = [bool(cells) and all(_NUMBER.match(r[i]) or r[i] in ("-", "") for r in cells)
               for i in range(cols)]

    def line(row: Sequence[str]) -> str:
        parts = [row[i].rjust(widths[i]) if numeric[i] else row[i].ljust(widths[i])
                 for i in range(cols)]
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out += [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def fmt_ms(seconds: float | None, digits: int = 2) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.{digits}f}"


def fmt_mb(bucket_mb: float | None) -> str:
    """A bucket size as the user typed it: 25, 2.5, 1000; '-' for strategies without buckets."""
    return "-" if bucket_mb is None else f"{round(bucket_mb, 6):g}"


def fmt_speedup(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}×"


def setup_line(profile: ModelProfile, link: Link, world_size: int) -> str:
    """One line naming everything a prediction depends on."""
    link_law = (f"α {link.alpha_s * 1e6:g} µs, busbw {link.busbw_gbps:g} GB/s" if not link.pieces
                else f"piecewise α–β fit ({len(link.pieces)} pieces)")
    return (f"model {profile.name}: {profile.n_tensors} gradient tensors, "
            f"{profile.grad_total_bytes / MIB:.1f} MiB of gradients, forward "
            f"{fmt_ms(profile.forward_s, 1)} ms, backward {fmt_ms(profile.backward_s, 1)} ms, "
            f"optimizer {fmt_ms(profile.optimizer_s, 1)} ms | link {link.name}: {link_law}, "
            f"{world_size} ranks")


class LazyProgress:
    """A rich progress bar on stderr that appears only once a run has taken ``delay_s``.

    Short runs print nothing, so tests and quick sweeps keep a clean stderr; a long sweep in a
    terminal gets a live bar (removed when done), and in a log only one final line::

        with LazyProgress("simulating") as progress:
            results = sweep(..., on_progress=progress.update)
    """

    def __init__(self, description: str, delay_s: float = 1.0, stream=None) -> None:
        self.description = description
        self.delay_s = delay_s
        self.stream = stream
        self._start_s = 0.0
        self._progress = None
        self._task = None

    def __enter__(self) -> "LazyProgress":
        self._start_s = time.perf_counter()
        return self

    def update(self, done: int, total: int) -> None:
        if self._progress is None:
            if time.perf_counter() - self._start_s < self.delay_s or done >= total:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            console = Console(file=self.stream or sys.stderr)
            self._progress = Progress(f"[progress.description]{self.description}", BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                                      transient=console.is_terminal, redirect_stdout=False,
                                      redirect_stderr=False)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
