"""The one Gantt chart of a step: a compute lane over a comm lane, predicted or measured.

Compute spans are coloured by kind (forward, backward, optimizer, the DDP implementation's
host work), collectives alternate two shades, and the time compute sits idle waiting for
communication is hatched; a dotted line marks the step's end::

    fig = Figure(); draw_gantt(fig.add_subplot(), result)      # result with spans

``simddp simulate --plot``, ``simddp compare --out`` and ``realrun validate`` all draw with
:func:`draw_gantt`, so the same thing looks the same everywhere (colours: report/style.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from matplotlib.patches import Patch

from simddp.report.style import (EXPOSED_COLOUR, KIND_COLOURS, KIND_LABELS, comm_shades)
from simddp.result import COMM, COMPUTE, COPY, KINDS, Result

LANE_Y = {COMPUTE: 1.0, COMM: 0.0}
BAR_H = 0.6


def idle_gaps_s(result: Result) -> list[tuple[float, float]]:
    """(start, end) intervals when the compute lane does nothing, from the step's first span
    to its last (either may be a collective's)."""
    spans = sorted((s for s in result.spans if s.lane == COMPUTE), key=lambda s: s.start_s)
    gaps, t = [], min((s.start_s for s in result.spans), default=0.0)
    for s in spans:
        if s.start_s > t + 1e-12:
            gaps.append((t, s.start_s))
        t = max(t, s.end_s)
    end = max((s.end_s for s in result.spans), default=t)
    if spans and end > t + 1e-12:
        gaps.append((t, end))
    return gaps


@dataclass(frozen=True)
class ExposedParts:
    """A predicted step's exposed communication split as the Gantt shows it: compute waiting
    for comm (hatched), DDP host work (its own bars), and compute slowed by contention.
    All ms; they add up to ``exposed_ms``."""
    compute_ms: float
    exposed_ms: float
    waits_ms: float
    host_ms: float
    slowed_ms: float


def exposed_parts(result: Result) -> ExposedParts | None:
    """The split of a predicted result with spans; None where the parts do not add up to its
    exposed time (a measured step, its spans one clocked step of another run).

    >>> from simddp.result import Span
    >>> spans = (Span("compute", "fwd", 0.0, 0.010, "forward"),
    ...          Span("compute", "bwd", 0.010, 0.034, "backward"),      # 20 ms alone, slowed
    ...          Span("comm", "ar", 0.020, 0.040, "all-reduce"),
    ...          Span("compute", "opt", 0.040, 0.045, "optimizer"))
    >>> exposed_parts(Result("m", "l", "ddp", 25.0, 2, 0.045, 0.010, 1, compute_s=0.035,
    ...                      spans=spans))
    ExposedParts(compute_ms=35.0, exposed_ms=10.0, waits_ms=6.0, host_ms=0.0, slowed_ms=4.0)
    """
    if result.source == "measured" or not result.spans or result.compute_s <= 0:
        return None
    compute = [s for s in result.spans if s.lane == COMPUTE]
    host_s = sum(s.duration_s for s in compute if s.kind == COPY)
    slowed_s = sum(s.duration_s for s in compute if s.kind != COPY) - result.compute_s
    waits_s = sum(b - a for a, b in idle_gaps_s(result))
    if abs(waits_s + host_s + slowed_s - result.exposed_comm_s) > 1e-6 + 1e-4 * result.step_s:
        return None
    return ExposedParts(*(round(v * 1e3, 9) for v in (result.compute_s, result.exposed_comm_s,
                                                        waits_s, host_s, max(slowed_s, 0.0))))


def timeline_end_ms(result: Result) -> float:
    """Where the picture of ``result`` ends: its step end or its last span, ms from the first."""
    end_ms = result.step_s * 1e3
    if result.spans:
        t0 = min(s.start_s for s in result.spans)
        end_ms = max(end_ms, max(s.end_s - t0 for s in result.spans) * 1e3)
    return max(end_ms, 1e-3)


def step_end_ms(result: Result) -> tuple[float, str]:
    """Where the dotted step-end line goes, ms from the first span, and its label. A measured
    result's spans are one clocked step, its ``step_s`` a median, so the line marks the drawn
    step's end and the label names the median.

    >>> from simddp.result import Span
    >>> spans = (Span("compute", "fwd", 2.0, 2.030, "forward"),
    ...          Span("compute", "opt", 2.030, 2.071, "optimizer"))
    >>> step_end_ms(Result("m", "l", "ddp", 4.0, 2, 0.0593, 0.0, 8, source="measured", spans=spans))
    (71.0, 'this step ends 71.0 ms (median 59.3 ms) ')
    """
    step_ms = result.step_s * 1e3
    if not result.spans:
        return step_ms, f"step ends {step_ms:.1f} ms "
    t0 = min(s.start_s for s in result.spans)
    spans_ms = round((max(s.end_s for s in result.spans) - t0) * 1e3, 6)
    if result.source == "measured" and abs(spans_ms - step_ms) > 0.01 * step_ms:
        return spans_ms, f"this step ends {spans_ms:.1f} ms (median {step_ms:.1f} ms) "
    return step_ms, f"step ends {step_ms:.1f} ms "


def comm_rows(result: Result) -> dict[int, int]:
    """Index of a comm span in ``result.spans`` -> its row of the comm lane: the first row
    free when it starts, so collectives that ran at once are all seen.

    >>> from simddp.result import Span
    >>> a, b, c = (Span("comm", n, t0, t1, "all-reduce")
    ...            for n, t0, t1 in (("a", 0.0, 5.0), ("b", 2.0, 4.0), ("c", 5.0, 6.0)))
    >>> comm_rows(Result("m", "l", "ddp", 1.0, 2, 6.0, 0.0, 3, spans=(a, b, c)))
    {0: 0, 1: 1, 2: 0}
    """
    ends: list[float] = []     # each row's last end
    rows = {}
    for i, s in sorted(((i, s) for i, s in enumerate(result.spans) if s.lane == COMM),
                       key=lambda item: item[1].start_s):
        free = [r for r, end in enumerate(ends) if end <= s.start_s + 1e-12]
        row = free[0] if free else len(ends)
        if row == len(ends):
            ends.append(s.end_s)
        ends[row] = s.end_s
        rows[i] = row
    return rows


def draw_gantt(ax, result: Result, title: str | None = None) -> list:
    """Draw ``result``'s spans on ``ax``, in ms from the first span; returns the legend
    handles. A result with no spans gets empty lanes and a note."""
    ax.set_yticks([LANE_Y[COMPUTE], LANE_Y[COMM]], ["compute", "comm"])
    ax.set_ylim(-0.6, 1.75)
    ax.set_xlabel("time in step (ms)")
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=9)
    step_ms = result.step_s * 1e3
    if not result.spans:
        ax.axvline(step_ms, color="black", linewidth=0.8, linestyle=":")
        ax.set_xlim(0, max(step_ms * 1.01, 1e-3))
        ax.text(0.5, 0.5, f"no spans in the {result.source} result", transform=ax.transAxes,
                ha="center", va="center", color="0.3")
        return []
    t0 = min(s.start_s for s in result.spans)
    end_ms, end_text = step_end_ms(result)
    ax.axvline(end_ms, color="black", linewidth=0.8, linestyle=":")
    bars: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    comm_kinds: dict[str, int] = {}
    rows = comm_rows(result)
    for i, s in sorted(enumerate(result.spans), key=lambda item: item[1].start_s):
        if s.lane == COMM:
            k = comm_kinds.get(s.kind, 0)
            comm_kinds[s.kind] = k + 1
            colour = comm_shades(s.kind)[k % 2]
        else:
            colour = KIND_COLOURS.get(s.kind, KIND_COLOURS["compute"])
        row = rows.get(i, 0)
        bars.setdefault((s.lane, colour, row), []).append(((s.start_s - t0) * 1e3,
                                                           max(s.duration_s, 0.0) * 1e3))
    n_rows = max(rows.values(), default=0) + 1
    for (lane, colour, row), xs in bars.items():
        # Layer boundaries are not drawn: hundreds of them would grey out the lane.
        y, h = LANE_Y.get(lane, 0.0) - BAR_H / 2, BAR_H
        if lane == COMM and n_rows > 1:  # collectives that ran at once, one above the other
            h = BAR_H / n_rows
            y += (n_rows - 1 - row) * h
        ax.broken_barh(xs, (y, h), facecolors=colour, linewidth=0)
    gaps = [((a - t0) * 1e3, (b - a) * 1e3) for a, b in idle_gaps_s(result)]
    if gaps:
        ax.broken_barh(gaps, (LANE_Y[COMPUTE] - BAR_H / 2, BAR_H), facecolors="none",
                       edgecolor=EXPOSED_COLOUR, hatch="///", linewidth=0.8)
    ax.set_xlim(0, timeline_end_ms(result) * 1.01)
    ax.text(end_ms, 1.5, end_text, va="center", ha="right", fontsize=8)
    kinds = {s.kind for s in result.spans if s.lane == COMPUTE}
    handles = [Patch(facecolor=KIND_COLOURS[k], label=KIND_LABELS.get(k, k))
               for k in KINDS if k in kinds and k in KIND_COLOURS]
    stacked = ", overlapping ones stacked" if n_rows > 1 else ""
    for kind, n in comm_kinds.items():
        handles.append(Patch(facecolor=comm_shades(kind)[0], label=f"{kind} ({n}{stacked})"))
    if gaps:
        exposed_ms = sum(w for _, w in gaps)
        handles.append(Patch(facecolor="none", edgecolor=EXPOSED_COLOUR, hatch="///",
                             label=f"compute idle, waiting for comm ({exposed_ms:.2f} ms)"))
    return handles
