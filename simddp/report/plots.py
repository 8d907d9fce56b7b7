"""Plots of Results — predicted or measured, the same functions draw both.

Two pictures: the Gantt of one step (:mod:`simddp.report.gantt`: a compute lane over a comm
lane, with the time compute sits waiting for the all-reduce shaded), and step time against
bucket size per strategy::

    save_png("gantt.png", gantt_figure(result))            # result with spans
    save_png("sweep.png", sweep_figure(results))            # sweep() output, measured too

Figures are built with matplotlib's object API (``matplotlib.figure.Figure``, Agg canvas), never
pyplot: no global state, no display needed, and a notebook can pass its own ``ax`` to
:func:`draw_gantt` / :func:`draw_sweep`. Measured Results (``source="measured"``) are drawn
dashed with their p5–p95 spread as error bars; predictions with ranges (simddp/ranges.py)
get a shaded band from the low to the high end of their range.
"""
from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter
from matplotlib.transforms import blended_transform_factory

from simddp.errors import InputError
from simddp.io import write_atomic
from simddp.report.gantt import draw_gantt
from simddp.report.style import strategy_colour
from simddp.report.trace import describe
from simddp.result import Result
from simddp.strategies import ROWS
from simddp.sweeps import accumulates


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


def draw_sweep(ax, results: Sequence[Result], mark: tuple[str, float] | None = None) -> None:
    """Step time vs bucket size (log x): a line per bucketed strategy, flat lines for the rest.

    ``mark=("ddp", 25.0)`` puts a star on that configuration (the recommendation).
    """
    series = _series(results)
    bucketed = [r.bucket_mb for r in results if r.bucket_mb is not None]
    # (marker, line, width, size, hollow) per strategy: its registry row's curve
    style = {row.name: row.curve for row in ROWS if row.curve is not None}
    flat_bands = [r for r in results if r.bucket_mb is None and _band(r) is not None]
    if bucketed:
        ax.set_xscale("log")
        # room right of the largest size for the bucket-less strategies' range bars
        ax.set_xlim(min(bucketed) / 1.5, max(bucketed) * (1.5 + 0.6 * len(flat_bands)))
        # a tick at every swept size, so each point has its label (log ticks left 4 and
        # 40 MB unlabelled), and none between them
        sizes = sorted(set(bucketed))
        shown = spaced_labels(sizes)
        ax.set_xticks(sizes, [f"{x:g}" if x in shown else "" for x in sizes])
        ax.xaxis.set_minor_formatter(NullFormatter())
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
                          style.get(base, ("o", "-", 1.4, 4, False)))
        for r in (r for r in rs if r.bucket_mb is None):
            ax.axhline(r.step_s * 1e3, color=color, linestyle=":" if measured else "--",
                       linewidth=1.2, label=f"{label} (no buckets)")
            band = _band(r)
            if band is not None:  # a bar at the right edge: three full-width bands hid the panel
                k = flat_bands.index(r)
                ax.errorbar([0.975 - 0.03 * k], [r.step_s * 1e3], transform=edge,
                            yerr=[[(r.step_s - band[0]) * 1e3], [(band[1] - r.step_s) * 1e3]],
                            fmt="_", color=color, capsize=3, linewidth=1.4, markersize=8)
    if mark is not None:
        _star(ax, results, *mark)
    if any(r.step_range_s for r in results if r.bucket_mb is not None):  # one entry for all
        ax.fill_between([], [], [], color="grey", alpha=0.25, linewidth=0,
                        label="shaded: prediction range (low–high)")
    if flat_bands:
        ax.errorbar([], [], yerr=[], fmt="_", color="0.3", capsize=3,
                    label="bar at the right: range of a strategy without buckets")
    ax.set_xlabel("bucket size (bucket_cap_mb, MB = 2^20 bytes)")
    ax.grid(True, which="major", alpha=0.3)
    _zoom_on_buckets(ax, results)
    # beside the panel, not on it: "best" still landed on the curves and hid the star
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def _bucket_curve(ax, rows: list[Result], color: str, label: str, measured: bool,
                  style: tuple) -> None:
    """One strategy's step against bucket size, its prediction range as a band and its
    measured p5–p95 as bars."""
    marker, line, width, size, hollow = style
    xs = [r.bucket_mb for r in rows]
    ys = [r.step_s * 1e3 for r in rows]
    ax.plot(xs, ys, color=color, marker="s" if measured else marker, markersize=size,
            linestyle="--" if measured else line, linewidth=width, label=label,
            markerfacecolor="none" if hollow else color)
    ranges = [r.step_range_s for r in rows]
    if all(ranges):  # the prediction range as a band (simddp/ranges.py)
        ax.fill_between(xs, [v[0] * 1e3 for v in ranges], [v[1] * 1e3 for v in ranges],
                        color=color, alpha=0.12, linewidth=0)
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


def spaced_labels(sizes: list[float], labels: int = 7) -> set[float]:
    """The sizes to label: each at least 1/``labels`` of the range (in decades) after the
    last one labelled, so 12 sizes over 0.25..1000 MB do not print "0.250.5" and "100200".

    >>> sorted(spaced_labels([1, 4, 10, 40]))
    [1, 4, 10, 40]
    >>> sorted(spaced_labels([0.25, 0.5, 1, 2, 5, 10, 25, 50, 100]))
    [0.25, 1, 5, 25, 100]
    """
    gap = math.log10(sizes[-1] / sizes[0]) / labels if len(sizes) > 1 else 0.0
    shown = [sizes[0]]
    for x in sizes[1:]:
        if math.log10(x / shown[-1]) >= gap - 1e-9:
            shown.append(x)
    return set(shown)


def _band(r: Result) -> tuple[float, float] | None:
    """A bucket-less row's range: its prediction range, else its measured p5–p95."""
    if r.step_range_s is not None:
        return r.step_range_s
    if r.step_p5_s is not None and r.step_p95_s is not None:
        return r.step_p5_s, r.step_p95_s
    return None


def _zoom_on_buckets(ax, results: Sequence[Result]) -> None:
    """Y limits from the bucket curves, so a naive 50 % above them does not flatten them; a
    bucket-less line off that range becomes a label at the panel's edge, with its time."""
    curve_ms = [v * 1e3 for r in results if r.bucket_mb is not None
                for v in (r.step_s, r.step_p5_s, r.step_p95_s, *(r.step_range_s or ()))
                if v is not None]
    if not curve_ms:
        return
    low, high = min(curve_ms), max(curve_ms)
    pad = max(0.08 * (high - low), 0.01 * high)
    flat = [r for r in results if r.bucket_mb is None]
    # a bucket-less line close to the curves (within half their span) stays in the picture
    near = [r.step_s * 1e3 for r in flat
            if low - (high - low) / 2 <= r.step_s * 1e3 <= high + (high - low) / 2]
    bottom, top = min([low, *near]) - pad, max([high, *near]) + pad
    ax.set_ylim(bottom, top)
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
    fig = Figure(figsize=(9.0 * len(panels), 4.5), layout="constrained")  # legends beside
    for i, rs in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        draw_sweep(ax, rs, recommended if rs is per_step else None)
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
    return fig


def figure_png(fig: Figure, dpi: int = 120) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def save_png(path: str | os.PathLike, fig: Figure, dpi: int = 120) -> None:
    """Render first, then write atomically: a failed plot leaves no file behind."""
    write_atomic(path, figure_png(fig, dpi))
