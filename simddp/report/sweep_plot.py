"""Plots of Results — predicted or measured, the same functions draw both.

The Gantt of one step (:mod:`simddp.report.gantt`) and step time against bucket size per
strategy (what it shows: docs/CLI.md, ``sweep``)::

    save_png("gantt.png", gantt_figure(result))            # result with spans
    save_png("sweep.png", sweep_figure(results))            # sweep() output, measured too

Figures use matplotlib's object API on an Agg canvas, never pyplot: no global state, no
display, and a notebook can pass its own ``ax`` to :func:`draw_gantt` / :func:`draw_sweep`.
"""
from __future__ import annotations

import io
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter
from matplotlib.transforms import blended_transform_factory, offset_copy

from simddp.errors import InputError
from simddp.inputs.io import write_atomic
from simddp.report.gantt import draw_gantt, exposed_parts
from simddp.report.style import KIND_LABELS, strategy_colour
from simddp.report.trace import describe
from simddp.result import COMPUTE, Result
from simddp.planning.registry import ROWS
from simddp.predict.sweep import accumulates


def gantt_figure(result: Result, title: str | None = None) -> Figure:
    """The Gantt of one step, its title the step's parts as the picture shows them
    (:func:`~simddp.report.gantt.exposed_parts`)."""
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    if not result.spans:
        raise InputError(f"{describe(result)}: no timeline to plot (spans are empty)")
    ax = fig.add_subplot()
    handles = draw_gantt(ax, result)
    drawn_ms: dict[str, float] = {}
    for s in result.spans:
        if s.lane == COMPUTE:
            name = KIND_LABELS.get(s.kind, s.kind)
            drawn_ms[name] = drawn_ms.get(name, 0.0) + s.duration_s * 1e3
    for h in handles:  # each compute kind's time as drawn, to set beside the profile's
        if h.get_label() in drawn_ms:
            h.set_label(f"{h.get_label()} {drawn_ms[h.get_label()]:.1f} ms")
    # below the axes, inside the figure: anchored to the axes it hung a pixel out of it
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4),
               fontsize=8, frameon=False)
    ax.set_title(title or f"{describe(result)}\n{_gantt_parts(result)}", fontsize=9)
    return fig


def _gantt_parts(result: Result) -> str:
    """The title's lines under the configuration: the step, and what its exposed comm is."""
    per = " per optimizer step" if result.accum_steps > 1 else ""
    step = f"step {result.step_s * 1e3:.2f} ms{per}"
    parts = exposed_parts(result)
    if parts is None:
        return (f"{step}, exposed comm {result.exposed_comm_s * 1e3:.2f} ms (step minus "
                f"compute alone), {result.collectives} collectives")
    split = [f"compute idle, waiting {parts.waits_ms:.2f} ms (hatched)"]
    if parts.host_ms >= 0.005:
        split.append(f"DDP host work {parts.host_ms:.2f} ms (its own bars)")
    if parts.slowed_ms >= 0.005:
        split.append(f"compute slowed while comm runs {parts.slowed_ms:.2f} ms "
                     "(bars longer than compute alone)")
    lines = textwrap.wrap("exposed comm = " + " + ".join(split), 120, break_on_hyphens=False)
    return "\n".join([f"{step} = compute alone {parts.compute_ms:.2f} ms + exposed comm "
                      f"{parts.exposed_ms:.2f} ms; {result.collectives} collectives", *lines])


def _series(results: Sequence[Result]) -> dict[tuple[str, str], list[Result]]:
    out: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        out.setdefault((r.strategy, r.source), []).append(r)
    return out


@dataclass(frozen=True)
class _Column:
    """One column of the strip right of the curves: a strategy's step and its range."""
    label: str
    row: Result
    colour: str
    marker: str
    hollow: bool


def draw_sweep(ax, results: Sequence[Result], mark: tuple[str, float] | None = None,
               fit_ticks: bool = True) -> None:
    """Step time vs bucket size (log x), a curve per bucketed strategy; a strip at the right,
    on the same y range (:func:`y_window_ms`), holds each strategy without buckets and every
    prediction range. ``mark=("ddp", 25.0)`` stars that configuration. ``fit_ticks``: tilt the
    size labels now (a caller adding panels later calls :func:`keep_tick_labels_apart`).
    """
    series = _series(results)
    bucketed = [r.bucket_mb for r in results if r.bucket_mb is not None]
    window = y_window_ms(results)
    columns = _columns(series, mark)
    strip = ax
    if bucketed:
        ax.set_xscale("log")
        ax.set_xlim(min(bucketed) / 1.5, max(bucketed) * 1.5)
        label_every_size(ax, bucketed)
        ax.set_xlabel("bucket size (bucket_cap_mb, MB = 2^20 bytes; log scale)")
        ax.grid(True, which="major", alpha=0.3)
        if columns:
            # a line or band across the panel per strategy without buckets hid the curves
            strip = ax.inset_axes([1.02, 0.0, min(0.06 * len(columns) + 0.02, 0.4), 1.0],
                                  sharey=ax)
        _draw_curves(ax, series, window)
    if columns:
        _draw_columns(strip, columns, window, beside=strip is not ax)
    if mark is not None:
        _star(ax, results, *mark)
    if window is not None:
        ax.set_ylim(*window)
    handles = ax.get_legend_handles_labels()[0]
    handles += _column_key(columns, window, results, "right: " if strip is not ax else "")
    ax.legend(handles=handles, fontsize=8, loc="upper center", frameon=False)
    if fit_ticks:
        keep_tick_labels_apart(ax.figure, [ax])


def _draw_curves(ax, series: dict, window: tuple[float, float] | None) -> None:
    """Each bucketed strategy's curve (measured: dashed, p5–p95 bars); a curve that lies on
    another's says so in its label, and hollow markers go on top so both stay in sight."""
    style = {row.name: row.curve for row in ROWS if row.curve is not None}
    drawn: list[tuple[str, list[Result]]] = []
    for (strategy, source), rs in series.items():
        rows = sorted((r for r in rs if r.bucket_mb is not None), key=lambda r: r.bucket_mb)
        if not rows:
            continue
        spec = rows[0].spec   # ddp+fp16 is drawn like ddp (spec.base), in fp16's colour
        base = spec.base if spec is not None else strategy
        label = strategy + (" (measured)" if source == "measured" else "")
        twin = _coincides_with(rows, drawn, window)
        if twin is not None:
            label += f" (on {twin[0]}'s curve: ≤ {twin[1]:.2g} ms apart)"
        _bucket_curve(ax, rows, strategy_colour(spec), label, source == "measured",
                      style.get(base, ("o", "-", 1.4, 4, False)))
        drawn.append((strategy + (" (measured)" if source == "measured" else ""), rows))


def _coincides_with(rows: list[Result], drawn: list, window) -> tuple[str, float] | None:
    """(name, largest gap in ms) of a curve already drawn that ``rows`` lie on: within 1 % of
    the panel's height at every size, where one would hide the other."""
    if window is None:
        return None
    mine = {r.bucket_mb: r.step_s * 1e3 for r in rows}
    for name, other in drawn:
        theirs = {r.bucket_mb: r.step_s * 1e3 for r in other}
        if set(theirs) == set(mine):
            gap = max(abs(mine[mb] - theirs[mb]) for mb in mine)
            if gap <= 0.01 * (window[1] - window[0]):
                return name, max(gap, 0.01)
    return None


def _columns(series: dict, mark: tuple[str, float] | None = None) -> list[_Column]:
    """The strip's columns: each bucketed prediction with ranges at its fastest size (the
    starred one at its starred size), then each strategy without buckets (measured too:
    its p5–p95)."""
    style = {row.name: row.curve for row in ROWS if row.curve is not None}
    out = []
    for (strategy, source), rs in series.items():
        rows = [r for r in rs if r.bucket_mb is not None and r.step_range_s is not None]
        if rows and source != "measured":
            starred = [r for r in rows if mark is not None and (r.strategy, r.bucket_mb) == mark]
            best = starred[0] if starred else min(rows, key=lambda r: r.step_s)
            base = best.spec.base if best.spec is not None else strategy
            marker, _, _, _, hollow = style.get(base, ("o", "-", 1.4, 4, False))
            out.append(_Column(f"{strategy} {best.bucket_mb:g} MB", best,
                               strategy_colour(best.spec), marker, hollow))
    for (strategy, source), rs in series.items():
        for r in (r for r in rs if r.bucket_mb is None):
            measured = source == "measured"
            out.append(_Column(strategy + (" (measured)" if measured else ""), r,
                               strategy_colour(r.spec), "s" if measured else "_", measured))
    return out


def _draw_columns(ax, columns: list[_Column], window: tuple[float, float] | None,
                  beside: bool) -> None:
    """Each column: its step as a marker, its range as a wide pale bar; a step off the panel
    is an arrow at the edge, its time in the label. ``beside``: the strip shares the curves'
    y labels."""
    labels = []
    for x, col in enumerate(columns):
        step_ms, label = col.row.step_s * 1e3, col.label
        bar = _bar_ms(col.row, window)
        if bar is not None and col.row.source == "measured":
            ax.errorbar([x], [step_ms], yerr=[[step_ms - bar[0]], [bar[1] - step_ms]],
                        fmt="none", ecolor=col.colour, capsize=3, linewidth=1.2)
        elif bar is not None:
            ax.vlines([x], bar[0], bar[1], colors=col.colour, linewidth=7, alpha=0.3)
        if bar is not None:
            low, high = _band(col.row)
            for cut, y, arrow in ((high * 1e3 > bar[1], bar[1], "^"),
                                  (low * 1e3 < bar[0], bar[0], "v")):
                if cut:
                    ax.plot([x], [y], marker=arrow, color=col.colour, markersize=6,
                            linestyle="none", clip_on=False, zorder=4)
        off = window is not None and not window[0] <= step_ms <= window[1]
        if off:
            above = step_ms > window[1]
            edge = blended_transform_factory(ax.transData, ax.transAxes)
            ax.plot([x], [1.0 if above else 0.0], transform=edge, marker="^" if above else "v",
                    markersize=8, color=col.colour, linestyle="none", clip_on=False, zorder=5)
            label += f" ({'↑' if above else '↓'} {step_ms:.1f} ms)"
        else:
            big = col.marker == "_"
            ax.plot([x], [step_ms], marker=col.marker, color=col.colour, linestyle="none",
                    markersize=18 if big else 6, markeredgewidth=2.5 if big else 1.2,
                    markerfacecolor="none" if col.hollow else col.colour, zorder=5)
        labels.append(label)
    ax.set_xlim(-0.6, len(columns) - 0.4)
    ax.set_xticks(range(len(columns)), labels, rotation=90 if beside else 0, fontsize=8)
    for text, col in zip(ax.get_xticklabels(), columns):
        text.set_color(col.colour)
    ax.grid(True, axis="y", alpha=0.3)
    if beside:
        ax.tick_params(axis="y", labelleft=False)


def _column_key(columns: list[_Column], window, results: Sequence[Result],
                where: str) -> list:
    """Legend entries that say what the strip's marks mean, and how far cut ranges reach;
    ``where`` ("right: ") says where the strip is."""
    if not columns:
        return []
    grey = "0.35"
    out = []
    if any(c.marker == "_" for c in columns):
        out.append(Line2D([], [], color=grey, marker="_", markersize=12, markeredgewidth=2.5,
                          linestyle="none", label=f"{where}strategy without buckets"))
    ranges = [c for c in columns if c.row.source != "measured" and _bar_ms(c.row, window)]
    if ranges:
        text = f"{where}prediction range (low–high)"
        if any(c.row.bucket_mb is not None for c in ranges):
            text += ";\n  a curve's at the size named under it"
        reach = [v * 1e3 for c in ranges for v in _band(c.row)]
        reach += [v * 1e3 for r in results if r.bucket_mb is not None and r.source != "measured"
                  for v in r.step_range_s or ()]
        if window is not None and max(reach) > window[1]:
            text += f";\n  ▲ cut at the panel's top (ranges reach {max(reach):.4g} ms)"
        if window is not None and min(reach) < window[0]:
            text += f";\n  ▼ cut at the panel's bottom (ranges from {min(reach):.4g} ms)"
        out.append(Line2D([], [], color=grey, alpha=0.3, linewidth=7, label=text))
    if any(c.row.source == "measured" and _bar_ms(c.row, window) for c in columns):
        out.append(Line2D([], [], color=grey, marker="|", markersize=8, linestyle="none",
                          label=f"{where}measured p5–p95"))
    return out


def _legends_under(fig: Figure, axes) -> None:
    """Hang each panel's legend under its x labels (and its strip's): beside the panel it
    took a third of the figure's width."""
    for ax in axes:
        legend = ax.get_legend()
        if legend is not None:
            handles, texts = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
            legend.remove()
            legend_under(ax, handles, texts)


def legend_under(ax, handles: list, labels: list[str] | None = None, max_cols: int = 4):
    """``ax``'s legend under its and its insets' x labels, centred, in as many columns (up to
    ``max_cols``) as fit their width; offset in points, so it holds at any size and dpi."""
    fig = ax.figure.figure     # the root figure, also for a panel in a subfigure
    renderer = FigureCanvasAgg(fig).get_renderer()
    labels = [h.get_label() for h in handles] if labels is None else labels
    boxes = [a.get_tightbbox(renderer) for a in (ax, *ax.child_axes)]
    width = max(b.x1 for b in boxes) - min(b.x0 for b in boxes)
    drop = ax.bbox.y0 - min(b.y0 for b in boxes) + 2
    frames = [a.bbox for a in (ax, *ax.child_axes)]
    centre = ((min(b.x0 for b in frames) + max(b.x1 for b in frames)) / 2
              - ax.bbox.x0) / ax.bbox.width
    for ncol in range(min(len(handles), max_cols), 0, -1):
        legend = ax.legend(handles, labels, fontsize=8, ncol=ncol, frameon=False,
                           loc="upper center", bbox_to_anchor=(centre, 0.0),
                           bbox_transform=offset_copy(ax.transAxes, fig,
                                                      y=-drop * 72 / fig.dpi,
                                                      units="points"),
                           borderaxespad=0.0)
        if legend.get_window_extent(renderer).width <= width or ncol == 1:
            return legend
        legend.remove()


def label_every_size(ax, sizes_mb: Sequence[float]) -> None:
    """A tick and a plain label ("0.25", "1000") at every swept size and none between: log
    ticks and thinned labels left swept sizes bare."""
    sizes = sorted(set(sizes_mb))
    ax.set_xticks(sizes, [f"{x:g}" for x in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())


def keep_tick_labels_apart(fig: Figure, axes) -> None:
    """Tilt the x tick labels of ``axes`` by 45°, then 90°, until no two overlap, then hang
    each panel's legend under its labels."""
    canvas = FigureCanvasAgg(fig)
    for angle in (0, 45, 90):
        for ax in axes:
            ax.tick_params(axis="x", which="major", labelrotation=angle)
            for label in ax.get_xticklabels():
                label.set_horizontalalignment("right" if angle == 45 else "center")
                label.set_rotation_mode("anchor" if angle == 45 else "default")
        canvas.draw()
        if not any(_labels_touch(ax) for ax in axes):
            break
    _legends_under(fig, axes)


def _labels_touch(ax) -> bool:
    boxes = sorted((t.get_window_extent() for t in ax.get_xticklabels()
                    if t.get_visible() and t.get_text()), key=lambda b: b.x0)
    return any(a.x1 + 1 > b.x0 and a.y0 < b.y1 and b.y0 < a.y1
               for a, b in zip(boxes, boxes[1:]))


def _bucket_curve(ax, rows: list[Result], color: str, label: str, measured: bool,
                  style: tuple) -> None:
    """One strategy's step against bucket size, its measured p5–p95 as bars."""
    marker, line, width, size, hollow = style
    xs = [r.bucket_mb for r in rows]
    ys = [r.step_s * 1e3 for r in rows]
    # hollow markers on top, a size larger: where two curves coincide, one rings the other
    if measured:
        marker, line, width, size, hollow = "s", ":", 1.4, 4, False
    ax.plot(xs, ys, color=color, marker=marker, markersize=size + 2 if hollow else size,
            linestyle=line, linewidth=width, label=label,
            markerfacecolor="none" if hollow else color, zorder=2.6 if hollow else 2.4)
    lo = [r.step_s - r.step_p5_s if r.step_p5_s is not None else 0 for r in rows]
    hi = [r.step_p95_s - r.step_s if r.step_p95_s is not None else 0 for r in rows]
    if any(lo) or any(hi):
        ax.errorbar(xs, ys, yerr=[[v * 1e3 for v in lo], [v * 1e3 for v in hi]],
                    fmt="none", ecolor=color, capsize=2, linewidth=0.8)


def _star(ax, results: Sequence[Result], strategy: str, bucket_mb: float) -> None:
    """The recommendation, a star on its own curve (the prediction's, where both were drawn),
    edged in that curve's colour, drawn over everything and never clipped."""
    hit = [r for r in results if r.strategy == strategy and r.bucket_mb == bucket_mb]
    hit = [r for r in hit if r.source != "measured"] or hit
    if hit:
        y_ms = hit[0].step_s * 1e3
        ax.plot([bucket_mb], [y_ms], marker="*", markersize=16, color="gold",
                markeredgecolor=strategy_colour(hit[0].spec), markeredgewidth=1.6,
                linestyle="none", zorder=10, clip_on=False,
                label=f"recommended: {strategy} {bucket_mb:g} MB, {y_ms:.1f} ms")


def _band(r: Result) -> tuple[float, float] | None:
    """A bucket-less row's range: its prediction range, else its measured p5–p95."""
    if r.step_range_s is not None:
        return r.step_range_s
    if r.step_p5_s is not None and r.step_p95_s is not None:
        return r.step_p5_s, r.step_p95_s
    return None


def y_window_ms(results: Sequence[Result]) -> tuple[float, float] | None:
    """The panel's y limits (ms), from the bucket curves: their points and measured p5–p95,
    the bucket-less lines within half their span, and the prediction ranges only up to
    ``max(span, 3 % of the top)`` beyond those, so long ranges do not squash the curves.

    >>> from simddp.result import Result
    >>> rows = [Result("m", "l", "ddp", mb, 2, s, 0.0, 1, scenarios_s={"high": 2 * s})
    ...         for mb, s in ((1.0, 0.100), (10.0, 0.090))]
    >>> [round(v, 1) for v in y_window_ms(rows)]     # ranges reach 200 ms: cut at 110 + pad
    [88.4, 111.6]
    """
    points = [v * 1e3 for r in results if r.bucket_mb is not None
              for v in (r.step_s, r.step_p5_s, r.step_p95_s) if v is not None]
    if not points:
        return None
    low, high = min(points), max(points)
    near = [r.step_s * 1e3 for r in results if r.bucket_mb is None
            if low - (high - low) / 2 <= r.step_s * 1e3 <= high + (high - low) / 2]
    low, high = min([low, *near]), max([high, *near])
    room = max(high - low, 0.03 * high)
    ranges = [v * 1e3 for r in results if r.bucket_mb is not None for v in r.step_range_s or ()]
    low, high = max(min([low, *ranges]), low - room), min(max([high, *ranges]), high + room)
    pad = max(0.08 * (high - low), 0.01 * high)
    return low - pad, high + pad


def _cut(band_s: tuple[float, float] | None,
         window_ms: tuple[float, float] | None) -> tuple[float, float] | None:
    """A (low, high) range in s as ms, clipped to the window; None if nothing is left."""
    if band_s is None:
        return None
    lo, hi = band_s[0] * 1e3, band_s[1] * 1e3
    if window_ms is not None:
        lo, hi = max(lo, window_ms[0]), min(hi, window_ms[1])
    return (lo, hi) if lo <= hi else None


def _bar_ms(r: Result, window_ms: tuple[float, float] | None) -> tuple[float, float] | None:
    """A bucket-less row's range bar in ms, cut to the window; None if its line is off it."""
    bar = _cut(_band(r), window_ms)
    return bar if bar is not None and bar[0] <= r.step_s * 1e3 <= bar[1] else None


def sweep_figure(results: Sequence[Result], recommended: tuple[str, float] | None = None,
                 title: str | None = None) -> Figure:
    """One panel per step kind, one above the other: per step, and (if present) per
    optimizer step of K micro-steps. ``recommended=("ddp", 25.0)`` stars that point."""
    accum = [r for r in results if accumulates(r)]
    per_step = [r for r in results if not accumulates(r)]
    panels = [p for p in (per_step, accum) if p]
    fig = Figure(figsize=(10.0, 5.2 * len(panels)), layout="constrained")
    for i, rs in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        draw_sweep(ax, rs, recommended if rs is per_step else None, fit_ticks=False)
        if rs is accum:
            k = max(r.accum_steps for r in accum)
            ax.set_title(f"gradient accumulation, K={k} micro-steps", fontsize=10)
            ax.set_ylabel("time per optimizer step (ms)")
        else:
            ax.set_title("per step (no gradient accumulation)", fontsize=10)
            ax.set_ylabel("step time (ms)")
    if results:
        r0 = results[0]
        fig.suptitle(title or f"{r0.model} · {r0.link} ×{r0.world_size} ranks ({r0.source})",
                     fontsize=11)
    keep_tick_labels_apart(fig, fig.axes)
    return fig


def figure_png(fig: Figure, dpi: int = 120) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def save_png(path: str | os.PathLike, fig: Figure, dpi: int = 120) -> None:
    """Render first, then write atomically: a failed plot leaves no file behind."""
    write_atomic(path, figure_png(fig, dpi))
