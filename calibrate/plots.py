"""calibrate's two pictures: all-reduce time against size (log-log, the fitted line, relative
residuals below) and bus bandwidth against size, as ``allreduce_time.png`` and
``allreduce_busbw.png``; the busbw plot also has a series per other collective kind measured
(reduce-scatter, all-gather) and, on a two-level world, per level (its all-reduces inside
every node at once, and across nodes with every local-rank group at once). matplotlib's
object API (Figure, Agg canvas): no pyplot state.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from calibrate.analysis import WorldCalibration
from calibrate.nccl_table import bandwidths_gbps
from simddp.inputs.io import write_atomic
from simddp.cost.factors import ALL_REDUCE, GB, bus_factor, kind_factor
from simddp.report.sweep_plot import figure_png


# One colour per collective kind and per level, the same in every world; worlds differ by
# marker (a legend of colours told apart only by marker direction is hard to read)
KIND_COLORS = {ALL_REDUCE: "C0", "reduce_scatter": "C1", "all_gather": "C2",
               "intra": "C4", "inter": "C3"}
KIND_NAMES = {ALL_REDUCE: "all-reduce", "reduce_scatter": "reduce-scatter",
              "all_gather": "all-gather"}
_WORLD_MARKERS = "osD^v"
# Up to this many legend entries fit top left inside the axes, where small sizes leave busbw
# near 0 (one world with its two other kinds: 6, and the wire); a two-level world has ~11
INSIDE_ENTRIES = 8


def write_plots(out_dir: str | Path, runs: list[WorldCalibration],
                wire_gbps: float | None = None) -> list[Path]:
    """Time vs size (log-log, fitted line, relative residuals below) and busbw vs size."""
    paths = []
    for name, figure in figures(runs, wire_gbps).items():
        write_atomic(Path(out_dir) / name, figure_png(figure, dpi=110))
        paths.append(Path(out_dir) / name)
    return paths


def figures(runs: list[WorldCalibration], wire_gbps: float | None = None) -> dict[str, Figure]:
    """File name -> Figure, laid out and ready to render (tests check what lies inside)."""
    return {"allreduce_time.png": time_figure(runs),
            "allreduce_busbw.png": busbw_figure(runs, wire_gbps)}


def time_figure(runs: list[WorldCalibration]) -> Figure:
    """All-reduce time against size, log-log, a colour per world: measured (median, bar to
    p95), held-out, the lone fit and the link file's line; relative residuals below."""
    fig = Figure(figsize=(7, 6.5))
    ax, res_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    for i, run in enumerate(runs):
        color = f"C{i}"
        p = run.world_size
        sizes = np.array([r["size_bytes"] for r in run.rows], dtype=float)
        times = np.array([r["time_s"] for r in run.rows])
        p95 = np.array([r["p95_s"] for r in run.rows])
        held = np.asarray(run.heldout_mask, dtype=bool)
        grid = np.geomspace(sizes.min(), sizes.max(), 200)
        lone = run.lone_fit or run.fit
        model = lone.predict_s(grid)
        ax.errorbar(sizes[~held], times[~held] * 1e6, yerr=[0 * p95[~held],
                    (p95 - times)[~held] * 1e6], fmt="o", color=color, ms=4, capsize=2,
                    label=f"p={p} measured (median, bar to p95)")
        if held.any():
            ax.plot(sizes[held], times[held] * 1e6, "s", mfc="none", color=color, ms=6,
                    label=f"p={p} held out")
        ax.plot(grid, model * 1e6, "-", color=color, lw=1,
                label=f"p={p} fit of lone all-reduces (α {lone.alpha_s * 1e6:.0f} µs)")
        if run.sequence is not None:  # the link file's line: the step's α, busbw under it
            ax.plot(grid, run.fit.predict_s(grid) * 1e6, "--", color=color, lw=1.2,
                    label=f"p={p} link file: α as a step sees it "
                          f"({run.link.alpha_s * 1e6:.0f} µs), busbw "
                          f"{run.link.busbw_gbps:.3g} GB/s")
        rel = (times - lone.predict_s(sizes)) / lone.predict_s(sizes) * 100
        res_ax.plot(sizes, rel, "o-", color=color, ms=3, lw=0.8)
        res_ax.plot(sizes[held], rel[held], "s", mfc="none", color=color, ms=6)
    ax.set(xscale="log", yscale="log", ylabel="all-reduce time (µs)",
           title="all-reduce time vs size")
    ax.legend(fontsize=7)
    res_ax.axhline(0, color="k", lw=0.6)
    res_ax.set(xscale="log", xlabel="message size (bytes)",
               ylabel="measured / lone fit − 1 (%)")
    fig.tight_layout()
    return fig


def busbw_figure(runs: list[WorldCalibration], wire_gbps: float | None = None) -> Figure:
    """Bus bandwidth against size: a colour per collective kind (and per level on a
    two-level world), a marker per world size; points measured, dashed the link file's
    line. The legend sits inside the axes, top left, where small sizes leave busbw near 0
    (beside them when it has more than :data:`INSIDE_ENTRIES` entries)."""
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    for i, run in enumerate(runs):
        marker = _WORLD_MARKERS[i % len(_WORLD_MARKERS)]
        world = f" (p={run.world_size})" if len(runs) > 1 else ""
        _plot_kind(ax, ALL_REDUCE, run.rows, run.fit, run.world_size, marker, world)
        for kind, c in run.kinds.items():
            _plot_kind(ax, kind, c.rows, c.fit, run.world_size, marker, world)
        _plot_levels(ax, run, marker)
    if wire_gbps:
        ax.axhline(wire_gbps, color="k", lw=0.8, ls=":", label=f"wire {wire_gbps:g} GB/s")
    ax.set(xscale="log", xlabel="message size n (bytes; the full, unsharded size for "
           "reduce-scatter and all-gather)", ylabel="bus bandwidth (GB/s, 1 GB = 1e9 B)",
           title=f"bus bandwidth vs size, {len(runs) and runs[0].dtype} "
                 "(points: measured, dashed: link file)")
    ax.set_ylim(bottom=0)
    if len(ax.get_legend_handles_labels()[1]) <= INSIDE_ENTRIES:
        ax.legend(fontsize=7, loc="upper left", framealpha=0.9)
    else:   # beside the axes; constrained layout keeps it inside the figure
        fig.set_size_inches(11, 5)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


def _plot_kind(ax, kind: str, rows: list[dict], fit, p: int, marker: str, world: str) -> None:
    """One kind's measured busbw and its link-file line, in the kind's colour."""
    color, name = KIND_COLORS.get(kind, "C7"), KIND_NAMES.get(kind, kind)
    sizes = np.array([r["size_bytes"] for r in rows], dtype=float)
    bw = [bandwidths_gbps(n, r["time_s"], p, kind)[1] for n, r in zip(sizes, rows)]
    grid = np.geomspace(sizes.min(), sizes.max(), 200)
    ax.plot(sizes, bw, marker, ls="-", color=color, ms=4, lw=0.6, alpha=0.9,
            label=f"{name}{world} measured")
    ax.plot(grid, grid * kind_factor(kind, p) / fit.predict_s(grid) / GB, "--", color=color,
            lw=1.2, label=f"{name}{world} link file ({fit.busbw_gbps:.3g} GB/s, "
                         f"α {fit.alpha_s * 1e6:.0f} µs)")


def _plot_levels(ax, run: WorldCalibration, marker: str) -> None:
    """A two-level world's per-level all-reduce busbw, measured and its fit (calibrate.levels),
    in colours of their own: where the inter level sits below the ring is the shared NIC."""
    levels = getattr(run, "levels", None)
    if levels is None:
        return
    for name in ("intra", "inter"):
        c = getattr(levels, name)
        color = KIND_COLORS[name]
        sizes = np.array([r["size_bytes"] for r in c.rows], dtype=float)
        grid = np.geomspace(sizes.min(), sizes.max(), 200)
        bw = [bandwidths_gbps(n, r["time_s"], c.ranks)[1] for n, r in zip(sizes, c.rows)]
        ax.plot(sizes, bw, marker, ls="-", color=color, ms=4, lw=0.6, mfc="none",
                label=f"{name} measured: {c.ranks} ranks a group, {c.groups} groups at once")
        ax.plot(grid, grid * bus_factor(c.ranks) / c.fit.predict_s(grid) / GB, "--",
                color=color, lw=1.2,
                label=f"{name} fit (α {c.link.alpha_s * 1e6:.0f} µs, busbw "
                      f"{c.link.busbw_gbps:.3g} GB/s)")
