"""The one Gantt chart of a step: a compute lane over a comm lane, predicted or measured.

Compute spans are coloured by kind (forward, backward, optimizer, the DDP implementation's
host work), collectives alternate two shades, and the time compute sits idle waiting for
communication is hatched; a dotted line marks the step's end::

    fig = Figure(); draw_gantt(fig.add_subplot(), result)      # result with spans

``simddp simulate --plot``, ``simddp compare --out`` and ``realrun validate`` all draw with
:func:`draw_gantt`, so the same thing looks the same everywhere (colours: report/style.py).
"""
from __future__ import annotations

from matplotlib.patches import Patch

from simddp.report.style import (EXPOSED_COLOUR, KIND_COLOURS, KIND_LABELS, comm_shades)
from simddp.result import COMM, COMPUTE, KINDS, Result

LANE_Y = {COMPUTE: 1.0, COMM: 0.0}
BAR_H = 0.6


def idle_gaps_s(result: Result) -> list[tuple[float, float]]:
    """(start, end) intervals inside the step when the compute lane does nothing."""
    spans = sorted((s for s in result.spans if s.lane == COMPUTE), key=lambda s: s.start_s)
    gaps, t = [], (spans[0].start_s if spans else 0.0)
    for s in spans:
        if s.start_s > t + 1e-12:
            gaps.append((t, s.start_s))
        t = max(t, s.end_s)
    return gaps


def timeline_end_ms(result: Result) -> float:
    """Where the picture of ``result`` ends: its step end or its last span, ms from the first."""
    end_ms = result.step_s * 1e3
    if result.spans:
        t0 = min(s.start_s for s in result.spans)
        end_ms = max(end_ms, max(s.end_s - t0 for s in result.spans) * 1e3)
    return max(end_ms, 1e-3)


def step_end_ms(result: Result) -> tuple[float, str]:
    """Where the dotted step-end line goes, ms from the first span, and its label.

    A measured result's spans are one clocked step of a separate run (realrun validate's
    timeline, with hooks on its clock), its ``step_s`` the median of the bench's steps: a
    line at the median can sit in the middle of the drawn spans. So the line marks the end
    of the drawn spans and the label names the median beside it.

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


def draw_gantt(ax, result: Result, title: str | None = None) -> list:
    """Draw ``result``'s spans on ``ax``; returns the legend handles of what was drawn.

    Times are ms from the first span (a measured clock need not start at 0). A result with
    no spans gets empty lanes and a note instead.
    """
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
    bars: dict[tuple[str, str], list[tuple[float, float]]] = {}
    comm_kinds: dict[str, int] = {}
    for s in sorted(result.spans, key=lambda s: s.start_s):
        if s.lane == COMM:
            k = comm_kinds.get(s.kind, 0)
            comm_kinds[s.kind] = k + 1
            colour = comm_shades(s.kind)[k % 2]
        else:
            colour = KIND_COLOURS.get(s.kind, KIND_COLOURS["compute"])
        bars.setdefault((s.lane, colour), []).append(((s.start_s - t0) * 1e3,
                                                      max(s.duration_s, 0.0) * 1e3))
    for (lane, colour), xs in bars.items():
        # Layer boundaries are not drawn: hundreds of them would grey out the lane.
        ax.broken_barh(xs, (LANE_Y.get(lane, 0.0) - BAR_H / 2, BAR_H), facecolors=colour,
                       linewidth=0)
    gaps = [((a - t0) * 1e3, (b - a) * 1e3) for a, b in idle_gaps_s(result)]
    if gaps:
        ax.broken_barh(gaps, (LANE_Y[COMPUTE] - BAR_H / 2, BAR_H), facecolors="none",
                       edgecolor=EXPOSED_COLOUR, hatch="///", linewidth=0.8)
    ax.set_xlim(0, timeline_end_ms(result) * 1.01)
    ax.text(end_ms, 1.5, end_text, va="center", ha="right", fontsize=8)
    kinds = {s.kind for s in result.spans if s.lane == COMPUTE}
    handles = [Patch(facecolor=KIND_COLOURS[k], label=KIND_LABELS.get(k, k))
               for k in KINDS if k in kinds and k in KIND_COLOURS]
    for kind, n in comm_kinds.items():
        handles.append(Patch(facecolor=comm_shades(kind)[0], label=f"{kind} ({n})"))
    if gaps:
        exposed_ms = sum(w for _, w in gaps)
        handles.append(Patch(facecolor="none", edgecolor=EXPOSED_COLOUR, hatch="///",
                             label=f"compute waits for comm ({exposed_ms:.1f} ms)"))
    return handles
