"""Plots of Results — predicted or measured, the same functions draw both.

Two pictures: the Gantt of one step (:mod:`simddp.report.gantt`: a compute lane over a comm
lane, with the time compute sits waiting for the all-reduce shaded), and step time against
bucket size per strategy::

    save_png("gantt.png", gantt_figure(result))            # result with spans
    save_png("sweep.png", sweep_figure(results))            # sweep() output, measured too

Figures are built with matplotlib's object API (``matplotlib.figure.Figure``, Agg canvas), never
pyplot: no global state, no display needed, and a notebook can pass its own ``ax`` to
:func:`draw_gantt` / :func:`draw_sweep`. Measured Results (``source="measured"``) are drawn
dashed with their p5–p95 spread as error bars; predictions with ranges (simddp/predict/scenarios.py)
get a shaded band from the low to the high end of their range, cut at the panel's edge where
it reaches further beyond the curves than their own span (the legend says how far it goes).
A sweep's panels stand one above the other, every swept size labelled on the x axis.
"""
from __future__ import annotations

import io
import os
from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter
from matplotlib.transforms import blended_transform_factory

from simddp.errors import InputError
from simddp.inputs.io import write_atomic
from simddp.report.gantt import draw_gantt
from simddp.report.style import strategy_colour
from simddp.report.trace import describe
from simddp.result import Result
from simddp.planning.registry import ROWS
from simddp.predict.sweep import accumulates


def gantt_figure(result: Result, title: str | None = None) -> Figure:
    fig = Figure(figsize=(11, 3.2), layout="constrained")
    if not result.spans:
        raise InputError(f"{describe(result)}: no timeline to plot (spans are empty)")
    ax = fig.add_subplot()
    handles = draw_gantt(ax, result)
    # below the axes, inside the figure: anchored to the axes it hung a pixel out of it
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4),
               fontsize=8, frameon=False)
    per = " per optimizer step" if result.accum_steps > 1 else ""
    ax.set_title(title or f"{describe(result)}\nstep {result.step_s * 1e3:.2f} ms{per}, exposed "
                          f"comm {result.exposed_comm_s * 1e3:.2f} ms, "
                          f"{result.collectives} collectives", fontsize=10)
    return fig


def _series(results: Sequence[Result]) -> dict[tuple[str, str], list[Result]]:
    out: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        out.setdefault((r.strategy, r.source), []).append(r)
    return out


def draw_sweep(ax, results: Sequence[Result], mark: tuple[str, float] | None = None,
               fit_ticks: bool = True) -> None:
    """Step time vs bucket size (log x): a line per bucketed strategy, flat lines for the rest.

    ``mark=("ddp", 25.0)`` puts a star on that configuration (the recommendation). The y range
    is the curves' (:func:`y_window_ms`); prediction bands are cut to it, never drawn past it.
    ``fit_ticks``: tilt the size labels where they would touch, measured on ``ax``'s figure
    as it is now (a caller that adds panels afterwards calls :func:`keep_tick_labels_apart`
    once they are all there).
    """
    series = _series(results)
    bucketed = [r.bucket_mb for r in results if r.bucket_mb is not None]
    # (marker, line, width, size, hollow) per strategy: its registry row's curve
    style = {row.name: row.curve for row in ROWS if row.curve is not None}
    flat_bands = [r for r in results if r.bucket_mb is None and _band(r) is not None]
    window = y_window_ms(results)
    if bucketed:
        ax.set_xscale("log")
        # room right of the largest size for the bucket-less strategies' range bars
        ax.set_xlim(min(bucketed) / 1.5, max(bucketed) * (1.5 + 0.6 * len(flat_bands)))
        label_every_size(ax, bucketed)
    edge = blended_transform_factory(ax.transAxes, ax.transData)
    for (strategy, source), rs in series.items():
        spec = rs[0].spec   # ddp+fp16 is drawn like ddp (spec.base), in fp16's colour
        color = strategy_colour(spec)
        measured = source == "measured"
        label = strategy + (" (measured)" if measured else "")
        with_buckets = sorted((r for r in rs if r.bucket_mb is not None), key=lambda r: r.bucket_mb)
        if with_buckets:
            base = spec.base if spec is not None else strategy
            _bucket_curve(ax, with_buckets, color, label, measured,
                          style.get(base, ("o", "-", 1.4, 4, False)), window)
        for r in (r for r in rs if r.bucket_mb is None):
            ax.axhline(r.step_s * 1e3, color=color, linestyle=":" if measured else "--",
                       linewidth=1.2, label=f"{label} (no buckets)")
            bar = _bar_ms(r, window)
            if bar is not None:  # a bar at the right edge: three full-width bands hid the panel
                k = flat_bands.index(r)
                ax.errorbar([0.975 - 0.03 * k], [r.step_s * 1e3], transform=edge,
                            yerr=[[r.step_s * 1e3 - bar[0]], [bar[1] - r.step_s * 1e3]],
                            fmt="_", color=color, capsize=3, linewidth=1.4, markersize=8)
    if mark is not None:
        _star(ax, results, *mark)
    _range_legend_entries(ax, results, window, bool(flat_bands))
    ax.set_xlabel("bucket size (bucket_cap_mb, MB = 2^20 bytes; log scale)")
    ax.grid(True, which="major", alpha=0.3)
    if window is not None:
        ax.set_ylim(*window)
        _off_the_scale(ax, results, window)
    # beside the panel, not on it: "best" still landed on the curves and hid the star
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    if fit_ticks and bucketed:
        keep_tick_labels_apart(ax.figure, [ax])


def _range_legend_entries(ax, results: Sequence[Result], window, flat_bars: bool) -> None:
    """One legend entry for all the shaded bands, one for the bars of the strategies without
    buckets; the last of them says where ranges were cut at the panel's edge, and how far
    they reach."""
    ranges = [r.step_range_s for r in results if r.bucket_mb is not None and r.step_range_s]
    labels = (["shaded: prediction range (low–high)"] if ranges else []) + \
        (["bar at the right: range of a strategy without buckets"] if flat_bars else [])
    if not labels:
        return
    drawn = [*ranges, *(_band(r) for r in results
                        if r.bucket_mb is None and _bar_ms(r, window) is not None)]
    reach = [v * 1e3 for band in drawn for v in band]
    if window is not None and max(reach) > window[1]:
        labels[-1] += f";\n  ranges cut at the panel's top (they reach {max(reach):.4g} ms)"
    if window is not None and min(reach) < window[0]:
        labels[-1] += f";\n  ranges cut at the panel's bottom (from {min(reach):.4g} ms)"
    if ranges:
        ax.fill_between([], [], [], color="grey", alpha=0.2, linewidth=0, label=labels[0])
    if flat_bars:
        ax.errorbar([], [], yerr=[], fmt="_", color="0.3", capsize=3, label=labels[-1])


def label_every_size(ax, sizes_mb: Sequence[float]) -> None:
    """A tick and a plain label ("0.25", "1000") at every swept size and none between: log
    ticks left 4 and 40 MB bare, and thinning the labels left 25 MB bare beside 16 MB.
    :func:`keep_tick_labels_apart` tilts them where they would touch."""
    sizes = sorted(set(sizes_mb))
    ax.set_xticks(sizes, [f"{x:g}" for x in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())


def keep_tick_labels_apart(fig: Figure, axes) -> None:
    """Tilt the x tick labels of ``axes`` by 45°, then 90°, until no two overlap (drawn and
    measured on the Agg canvas): 12 sizes from 0.25 to 1000 MB fit flat, 16 beside 25 MB or
    many sizes on a narrow panel may not."""
    canvas = FigureCanvasAgg(fig)
    for angle in (0, 45, 90):
        for ax in axes:
            ax.tick_params(axis="x", which="major", labelrotation=angle)
            for label in ax.get_xticklabels():
                label.set_horizontalalignment("right" if angle == 45 else "center")
                label.set_rotation_mode("anchor" if angle == 45 else "default")
        canvas.draw()
        if not any(_labels_touch(ax) for ax in axes):
            return


def _labels_touch(ax) -> bool:
    boxes = sorted((t.get_window_extent() for t in ax.get_xticklabels()
                    if t.get_visible() and t.get_text()), key=lambda b: b.x0)
    return any(a.x1 + 1 > b.x0 and a.y0 < b.y1 and b.y0 < a.y1
               for a, b in zip(boxes, boxes[1:]))


def _bucket_curve(ax, rows: list[Result], color: str, label: str, measured: bool,
                  style: tuple, window: tuple[float, float] | None) -> None:
    """One strategy's step against bucket size, its prediction range as a band (cut to the
    panel's ``window``, ms) and its measured p5–p95 as bars."""
    marker, line, width, size, hollow = style
    xs = [r.bucket_mb for r in rows]
    ys = [r.step_s * 1e3 for r in rows]
    ax.plot(xs, ys, color=color, marker="s" if measured else marker, markersize=size,
            linestyle="--" if measured else line, linewidth=width, label=label,
            markerfacecolor="none" if hollow else color)
    ranges = [r.step_range_s for r in rows]
    if all(ranges):  # the prediction range as a band (simddp/predict/scenarios.py)
        cut = [_cut(v, window) or (v[0] * 1e3, v[0] * 1e3) for v in ranges]
        # light: ddp's and bucketed's bands lie on top of each other and at 0.12 made one
        # dark block that hid the curves
        ax.fill_between(xs, [v[0] for v in cut], [v[1] for v in cut],
                        color=color, alpha=0.09, linewidth=0)
    lo = [r.step_s - r.step_p5_s if r.step_p5_s is not None else 0 for r in rows]
    hi = [r.step_p95_s - r.step_s if r.step_p95_s is not None else 0 for r in rows]
    if any(lo) or any(hi):
        ax.errorbar(xs, ys, yerr=[[v * 1e3 for v in lo], [v * 1e3 for v in hi]],
                    fmt="none", ecolor=color, capsize=2, linewidth=0.8)


def _star(ax, results: Sequence[Result], strategy: str, bucket_mb: float) -> None:
    """The recommendation, a star drawn over everything and never clipped."""
    hit = [r for r in results if r.strategy == strategy and r.bucket_mb == bucket_mb]
    if hit:
        y_ms = min(r.step_s for r in hit) * 1e3
        ax.plot([bucket_mb], [y_ms], marker="*", markersize=15, color="gold",
                markeredgecolor="black", linestyle="none", zorder=10, clip_on=False,
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
    ``max(span, 3 % of the top)`` beyond those: transformer-xl on ib-hdr x16 has curves over
    1045–1115 ms and ranges to 1314 ms, which squashed the curves into a quarter of the panel.
    A naive 50 % above the curves stays off it too (:func:`_off_the_scale` names it).

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


def _off_the_scale(ax, results: Sequence[Result], window: tuple[float, float]) -> None:
    """A bucket-less line off the window becomes a label at the panel's edge, with its time."""
    bottom, top = window
    flat = [r for r in results if r.bucket_mb is None]
    edge = blended_transform_factory(ax.transAxes, ax.transData)
    above = sorted((r for r in flat if r.step_s * 1e3 > top), key=lambda r: r.step_s)
    below = sorted((r for r in flat if r.step_s * 1e3 < bottom), key=lambda r: -r.step_s)
    for rows, y, va, arrow in ((above, top, "top", "↑"), (below, bottom, "bottom", "↓")):
        if rows:
            text = ", ".join(f"{r.strategy} {r.step_s * 1e3:.1f} ms" for r in rows)
            ax.text(0.01, y, f" {arrow} off the scale: {text}", transform=edge, va=va,
                    ha="left", fontsize=8, color="0.3")


def sweep_figure(results: Sequence[Result], recommended: tuple[str, float] | None = None,
                 title: str | None = None) -> Figure:
    """One panel per step kind: per step, and (if present) per optimizer step with no_sync.

    ``recommended=("ddp", 25.0)`` stars that point; accumulation rows (per optimizer step of K
    micro-steps) get their own panel, since their times are K steps long.
    """
    accum = [r for r in results if accumulates(r)]
    per_step = [r for r in results if not accumulates(r)]
    panels = [p for p in (per_step, accum) if p]
    # panels one above the other, legends beside: side by side they made a 2160x540 strip
    fig = Figure(figsize=(10.0, 4.4 * len(panels)), layout="constrained")
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
