"""Pictures of a :class:`~simddp.compare.Comparison`: scatter, bucket curves, two timelines.

Three PNGs, times in ms: ``compare_scatter.png``, ``compare_buckets.png`` and
``compare_timeline.png`` (what each shows: docs/COMPARE.md)::

    from simddp.compare import compare_results
    from simddp.compare.plots import write_compare_files
    write_compare_files(compare_results(predicted, measured), "out/")   # PNGs + json + csv

Everything is rendered to bytes first, then written atomically: a failure leaves no file.
"""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import blended_transform_factory

from simddp.compare.labels import plain_log_labels
from simddp.compare.match import Comparison, pick_timeline
from simddp.compare.text import config_label, config_sort_key
from simddp.inputs.io import write_atomic
from simddp.report.gantt import draw_gantt, step_end_ms, timeline_end_ms
from simddp.report.sweep_plot import keep_tick_labels_apart, label_every_size, legend_under
from simddp.report.style import strategy_colour
from simddp.result import Result

SCATTER_PNG, BUCKETS_PNG, TIMELINE_PNG = ("compare_scatter.png", "compare_buckets.png",
                                          "compare_timeline.png")
JSON_NAME, CSV_NAME = "compare.json", "compare.csv"
_DPI = 120


def plot_scatter(c: Comparison) -> Figure:
    """Measured median (p5–p95 bars) against predicted: a colour per strategy, a marker per
    bucket size, both named in the legend (labels beside close points piled up). Step times
    far apart get panels of their own, each scaled to its points."""
    groups = scatter_groups(c.rows)
    main = max(range(len(groups)), key=lambda i: len(groups[i]))
    others = [g for i, g in enumerate(groups) if i != main]
    fig = Figure(figsize=(10 if others else 8, 7.6), dpi=_DPI, layout="constrained")
    if others:
        grid = fig.add_gridspec(len(others), 2, width_ratios=[2.6, 1])
        axes = [fig.add_subplot(grid[:, 0])] + [fig.add_subplot(grid[i, 1])
                                                 for i in range(len(others))]
    else:
        axes = [fig.add_subplot()]
    colours, markers = _colours(c), bucket_markers(r.bucket_mb for r in c.rows)
    cut = False
    for ax, rows in zip(axes, [groups[main], *others]):
        cut |= _scatter_panel(ax, rows, colours, markers, small=ax is not axes[0])
    # three columns: the lines, the colours, the markers (a column each, read down)
    columns = [[Patch(color="0.9", label="±10 %"),
                Line2D([], [], ls="--", color="0.4", lw=1, label="y = x (perfect)")]]
    if cut:
        columns[0].append(Line2D([], [], color="0.35", marker="^", ls="none", ms=5,
                                 label="p5–p95 bar cut\nat the panel's edge"))
    columns.append([])
    for strategy in _strategies(c.rows):
        accum = sorted({r.accum_steps for r in c.rows if r.strategy == strategy} - {1})
        columns[1].append(Line2D([], [], color=colours[strategy], marker="o", ls="none",
                                 label=strategy + "".join(f" (accum {k})" for k in accum)))
    if len(markers) > 1 or None not in markers:  # the shapes mean something: say what
        columns.append([Line2D([], [], ls="none", label="marker = bucket size:")])
        columns[2] += [Line2D([], [], color="0.35", marker=m, ls="none", mfc="none", mew=1.4,
                              label="no buckets" if mb is None else f"{mb:g} MB")
                       for mb, m in markers.items()]
    rows = max(len(col) for col in columns)
    blank = Line2D([], [], ls="none", label=" ")
    # padding before the marker key, after the others: the key stays one run, at the end
    columns = [col + [blank] * (rows - len(col)) if i < 2 else [blank] * (rows - len(col)) + col
               for i, col in enumerate(columns)]
    axes[0].set_xlabel("predicted step time (ms)")
    axes[0].set_ylabel("measured step time, median (ms); bars p5–p95")
    legend_under(axes[0], [h for col in columns for h in col], max_cols=len(columns))
    s = c.summary
    rho = "n/a" if s.spearman is None else f"{s.spearman:.2f}"
    fig.suptitle(f"Predicted vs measured step time\n{_job(c)}\n"
                 f"|error| median {s.median_ape:.1f} %, max {s.max_ape:.1f} %; "
                 f"Spearman ρ {rho} ({s.configs} configs)", fontsize=9)
    return fig


def scatter_groups(rows) -> list[list]:
    """Rows grouped by step time for the scatter's panels: sorted by the geometric mean of
    predicted and measured, a new group where the next is over 1.5x the last.

    >>> from types import SimpleNamespace as R
    >>> rows = [R(predicted_s=p, measured_s=m) for p, m in ((60, 58), (27, 25), (62, 66))]
    >>> [[r.predicted_s for r in g] for g in scatter_groups(rows)]
    [[27], [60, 62]]
    """
    ordered = sorted(rows, key=lambda r: (r.predicted_s * r.measured_s) ** 0.5)
    groups: list[list] = []
    last = None
    for r in ordered:
        v = (r.predicted_s * r.measured_s) ** 0.5
        if last is None or v > 1.5 * last:
            groups.append([])
        groups[-1].append(r)
        last = v
    return groups


def _scatter_panel(ax, rows, colours: dict, markers: dict, small: bool) -> bool:
    """One panel: its rows' points, the ±10 % band and y = x over its own range (from the
    points, not their p5–p95 bars, which may run past it). True if a bar was cut."""
    values_ms = [t * 1e3 for r in rows for t in (r.predicted_s, r.measured_s)]
    lo, hi = min(values_ms), max(values_ms)
    pad = max(0.08 * (hi - lo), 0.04 * hi)
    lo, hi = lo - pad, hi + pad
    line = np.linspace(lo, hi, 2)
    ax.fill_between(line, line * 0.9, line * 1.1, color="0.9", zorder=0)
    ax.plot(line, line, "--", color="0.4", lw=1, zorder=1)
    cut = False
    # big markers first and hollow, so markers at the same place all show
    for r in sorted(rows, key=lambda r: r.bucket_mb is None):
        x, y = r.predicted_s * 1e3, r.measured_s * 1e3
        colour = colours[r.strategy]
        spread = _spread_ms([r])
        ax.errorbar([x], [y], yerr=spread, fmt="none", capsize=3, lw=0.9, ecolor=colour,
                    alpha=0.5, zorder=2)
        ax.plot([x], [y], marker=markers[r.bucket_mb], ms=8 if r.bucket_mb is None else 11,
                mfc="none", mec=colour, mew=1.6, ls="none", zorder=3)
        for end, edge, arrow in ((y + spread[1][0], hi, "^"), (y - spread[0][0], lo, "v")):
            if (end > edge) if arrow == "^" else (end < edge):
                ax.plot([x], [edge], marker=arrow, ms=5, color=colour, ls="none",
                        clip_on=False, zorder=4)
                cut = True
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal", adjustable="box")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(4 if small else 7))
    ax.grid(True, alpha=0.3)
    if small:
        names = sorted({r.strategy for r in rows}, key=lambda n: config_sort_key((n, None, 1)))
        ax.set_title(", ".join(names), fontsize=8)
        ax.set_xlabel("predicted (ms)", fontsize=8)
        ax.set_ylabel("measured (ms)", fontsize=8)
        ax.tick_params(labelsize=8)
    return cut


# A marker per bucket size, smallest first: shapes that differ in outline, not only in
# direction, which is hard to tell at 6 pt.
_BUCKET_MARKERS = ("s", "^", "D", "P", "X", "v", "p", "h", "*", "<", ">", "8")


def bucket_markers(sizes_mb) -> dict[float | None, str]:
    """Bucket MB (None: no buckets) -> matplotlib marker, in size order; past 12 sizes the
    shapes repeat.

    >>> bucket_markers([40.0, None, 1.0, 4.0])
    {None: 'o', 1.0: 's', 4.0: '^', 40.0: 'D'}
    """
    sizes = sorted(set(sizes_mb), key=lambda mb: -1.0 if mb is None else mb)
    out: dict[float | None, str] = {None: "o"} if None in sizes else {}
    bucketed = [mb for mb in sizes if mb is not None]
    out.update({mb: _BUCKET_MARKERS[i % len(_BUCKET_MARKERS)] for i, mb in enumerate(bucketed)})
    return out


def plot_buckets(c: Comparison) -> Figure:
    """Step time against bucket MB (log x): predicted curves, measured points with spread;
    accumulation runs, several micro-steps long, in a panel of their own below."""
    groups = sorted({(r.strategy, r.accum_steps) for r in c.rows},
                    key=lambda g: config_sort_key((g[0], None, g[1])))
    panels = [[g for g in groups if g[1] == 1], [g for g in groups if g[1] != 1]]
    panels = [p for p in panels if p]
    fig = Figure(figsize=(9.5, 5.5 if len(panels) == 1 else 8), dpi=_DPI)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": [2, 1][:len(panels)]})[:, 0]
    bucket_values = [r.bucket_mb for r in (*c.predicted, *c.measured) if r.bucket_mb is not None]
    xmin, xmax = (min(bucket_values) / 1.5, max(bucket_values) * 1.5) if bucket_values else (1, 100)
    if any(r.bucket_mb is None for r in c.rows):
        xmax *= 3  # room right of the largest bucket for the bucket-less p5–p95 bars
    handles, colours = [], _colours(c)
    for ax, panel in zip(axes, panels):
        bucketed_groups = [g for g in panel if _group_rows(c, g)[0].bucket_mb is not None]
        flat_index = 0
        for strategy, accum in panel:
            colour = colours[strategy]
            name = strategy if accum == 1 else f"{strategy} (accum {accum})"
            rows = _group_rows(c, (strategy, accum))
            if rows[0].bucket_mb is None:  # a strategy without buckets: one time, flat lines
                _flat_lines(ax, rows[0], colour, name, flat_index)
                flat_index += 1
            else:
                _bucket_points(ax, c, (strategy, accum), rows, colour, bucketed_groups)
            handles.append(Patch(color=colour, label=name))
        _bucket_axis(ax, bucket_values, xmin, xmax)
        ax.set_ylabel("step time (ms)" if panel[0][1] == 1 else
                      "step time (ms), per optimizer step")
        ax.grid(True, alpha=0.3, which="both")
    if len(panels) > 1:
        axes[1].set_title("gradient accumulation: several micro-steps per optimizer step",
                          fontsize=8)
    axes[-1].set_xlabel("bucket size (MB = 2^20 bytes, log scale)")
    handles += [Line2D([], [], color="0.3", ls="--", marker=".", label="predicted"),
                Line2D([], [], color="0.3", ls="none", marker="o",
                       label="measured median,\np5–p95 bars"),
                Line2D([], [], color="0.3", ls="-", marker="s", ms=4,
                       label="measured (no buckets),\np5–p95 bar at the right")]
    axes[0].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.09, 1.0),
                   borderaxespad=0)
    s = c.summary
    best = (f"{s.bucket_strategy}: best bucket predicted {s.predicted_best_bucket_mb:g} MB, "
            f"measured {s.measured_best_bucket_mb:g} MB, regret {s.regret:.1f} %"
            if s.bucket_strategy else "no bucketed configs measured")
    axes[0].set_title(f"Step time vs bucket size\n{_job(c)}\n{best}", fontsize=9)
    fig.tight_layout()
    keep_tick_labels_apart(fig, axes)   # tilted labels are taller: lay out again
    fig.tight_layout()
    return fig


def _bucket_points(ax, c: Comparison, group: tuple[str, int], rows: list, colour: str,
                   bucketed_groups: list) -> None:
    """A bucketed strategy's predicted curve and measured medians with p5–p95 bars."""
    preds = sorted((p for p in c.predicted if p.bucket_mb is not None
                    and (p.strategy, p.accum_steps) == group), key=lambda p: p.bucket_mb)
    ax.plot([p.bucket_mb for p in preds], [p.step_s * 1e3 for p in preds], "--",
            color=colour, lw=1.3, marker=".", ms=4)
    # dodge measured markers of strategies sharing a bucket by a few % (log x)
    k = bucketed_groups.index(group)
    dodge = 1.05 ** (k - (len(bucketed_groups) - 1) / 2)
    ax.errorbar([r.bucket_mb * dodge for r in rows], [r.measured_s * 1e3 for r in rows],
                yerr=_spread_ms(rows), fmt="o", ms=6, capsize=3, lw=1, color=colour)


def _bucket_axis(ax, bucket_values: list[float], xmin: float, xmax: float) -> None:
    """Log x with a label under every measured size."""
    ax.set_xscale("log")
    plain_log_labels(ax.xaxis)
    if bucket_values:
        label_every_size(ax, bucket_values)
    ax.set_xlim(xmin, xmax)


def _group_rows(c: Comparison, group: tuple[str, int]) -> list:
    return sorted((r for r in c.rows if (r.strategy, r.accum_steps) == group),
                  key=lambda r: r.bucket_mb or 0.0)


def _flat_lines(ax, r, colour: str, name: str, k: int) -> None:
    """A bucket-less strategy: predicted dashed, measured solid; its p5–p95 as a bar at the
    right edge (the k-th, staggered), since full-width bands of noisy runs turn to mud."""
    ax.axhline(r.predicted_s * 1e3, color=colour, ls="--", lw=1.3)
    ax.axhline(r.measured_s * 1e3, color=colour, ls="-", lw=1.3)
    edge = blended_transform_factory(ax.transAxes, ax.transData)
    ax.errorbar([0.985 - 0.02 * k], [r.measured_s * 1e3], yerr=_spread_ms([r]), fmt="s", ms=4,
                capsize=3, lw=1, color=colour, transform=edge, clip_on=False)
    ax.annotate(name, (1.0, r.measured_s * 1e3), xycoords=("axes fraction", "data"),
                xytext=(4, 0), textcoords="offset points", va="center", fontsize=8, color=colour)


def plot_timelines(predicted: Result, measured: Result | None) -> Figure:
    """Predicted and measured timeline of one configuration, side by side on one ms axis,
    each with its own legend; only the predicted panel (the title says why) when the
    measurement has no spans."""
    have_measured = measured is not None and bool(measured.spans)
    fig = Figure(figsize=(13 if have_measured else 8, 4.3), dpi=_DPI, layout="constrained")
    axes = fig.subplots(1, 2 if have_measured else 1, sharex=True, sharey=True, squeeze=False)[0]
    drawn = [(predicted, draw_gantt(axes[0], predicted,
                                    f"predicted: {predicted.step_ms:.1f} ms per step"))]
    if have_measured:
        whose = ("one clocked step" if measured.spans_rank is None or len(measured.rank_spans) < 2
                 else f"rank {measured.spans_rank}'s clocked step (its backward ended last)")
        drawn.append((measured, draw_gantt(axes[1], measured,
                                           f"measured: median {measured.step_ms:.1f} ms per "
                                           f"step ({measured.samples} steps)\nspans: {whose}, "
                                           f"{step_end_ms(measured)[0]:.1f} ms")))
    axes[0].set_xlim(0, max(timeline_end_ms(r) for r, _ in drawn) * 1.01)  # shared by both
    fig.suptitle(f"Timeline of {config_label(*predicted.config)}, {predicted.model}, "
                 f"{predicted.world_size} ranks{_timeline_note(predicted, measured)}",
                 fontsize=10)
    for ax, (_, handles) in zip(axes, drawn):
        legend_under(ax, [*handles, Line2D([], [], color="k", ls=":", label="step end")])
    return fig


def _timeline_note(predicted: Result, measured: Result | None) -> str:
    """The title's second line: what is missing from the picture, if anything."""
    if measured is None:
        return "\nnot measured: predicted timeline only" + (
            "" if predicted.spans else ", and the predicted result has no spans")
    if not measured.spans:
        return ("\nthe measured result has no spans: predicted timeline only" if predicted.spans
                else "\nneither the predicted nor the measured result has spans")
    return "" if predicted.spans else "\nthe predicted result has no spans"


def render_compare_plots(c: Comparison, timeline: str | None = None) -> dict[str, bytes]:
    """File name -> PNG bytes for the three plots. ``timeline``: "strategy[:bucket_mb]"."""
    predicted, measured = pick_timeline(c, timeline)  # InputError before anything is drawn
    return {SCATTER_PNG: _png(plot_scatter(c)), BUCKETS_PNG: _png(plot_buckets(c)),
            TIMELINE_PNG: _png(plot_timelines(predicted, measured))}


def write_compare_plots(c: Comparison, out_dir: str | os.PathLike,
                        timeline: str | None = None) -> list[Path]:
    """Render the three PNGs, then write them into ``out_dir``; returns the paths."""
    return _write_all(out_dir, render_compare_plots(c, timeline))


def write_compare_files(c: Comparison, out_dir: str | os.PathLike,
                        timeline: str | None = None) -> list[Path]:
    """The PNGs plus compare.json (the --format json document) and compare.csv (the rows)."""
    files = render_compare_plots(c, timeline)
    files[JSON_NAME] = (json.dumps(c.to_json(timeline), indent=1) + "\n").encode()
    files[CSV_NAME] = c.to_csv().encode()
    return _write_all(out_dir, files)


def _write_all(out_dir, files: dict[str, bytes]) -> list[Path]:
    paths = []
    for name, data in files.items():
        path = Path(out_dir) / name
        write_atomic(path, data)
        paths.append(path)
    return paths


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()


def _spread_ms(rows) -> np.ndarray | None:
    """Asymmetric error bars median−p5, p95−median in ms (0 where a bound is missing)."""
    lo = [0.0 if r.measured_p5_s is None else max(r.measured_s - r.measured_p5_s, 0.0)
          for r in rows]
    hi = [0.0 if r.measured_p95_s is None else max(r.measured_p95_s - r.measured_s, 0.0)
          for r in rows]
    return np.array([lo, hi]) * 1e3


def _colours(c: Comparison) -> dict[str, str]:
    """Each row name's colour, from its results' Strategy (compute-only has none: grey)."""
    return {r.strategy: strategy_colour(r.spec) for r in (*c.measured, *c.predicted)}


def _strategies(rows) -> list[str]:
    return sorted({r.strategy for r in rows}, key=lambda s: config_sort_key((s, None, 1)))


def _job(c: Comparison) -> str:
    s = c.summary
    return (f"{s.model}, {s.world_size} ranks; predicted on {s.predicted_link}, "
            f"measured on {s.measured_link}")
