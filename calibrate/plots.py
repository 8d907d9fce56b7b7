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
from calibrate.report_table import bandwidths_gbps
from simddp.io import write_atomic
from simddp.link import GB, bus_factor, kind_factor
from simddp.report.plots import figure_png


_KIND_MARKERS = {"reduce_scatter": "^", "all_gather": "v"}


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
    fig = Figure(figsize=(7, 6.5))
    ax, res_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    # the legend beside the axes (a two-level world has ~11 entries); constrained layout
    # keeps it inside the figure, which tight_layout does not for a legend outside the axes
    bw_fig = Figure(figsize=(10.5, 4.5), layout="constrained")
    bw_ax = bw_fig.subplots()
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
        bw = [bandwidths_gbps(s, t, p)[1] for s, t in zip(sizes, times)]
        bw_ax.plot(sizes, bw, "o-", color=color, ms=4, label=f"p={p} measured")
        bw_ax.plot(grid, grid * bus_factor(p) / run.fit.predict_s(grid) / GB, "--",
                   color=color, lw=1, label=f"p={p} link file")
        for kind, c in run.kinds.items():  # same colour per world, a marker per kind
            marker = _KIND_MARKERS.get(kind, "x")
            k_sizes = np.array([r["size_bytes"] for r in c.rows], dtype=float)
            k_bw = [bandwidths_gbps(n, r["time_s"], p, kind)[1] for n, r in zip(k_sizes, c.rows)]
            bw_ax.plot(k_sizes, k_bw, marker, ls=":", color=color, ms=4, lw=0.8, mfc="none",
                       label=f"p={p} {kind} measured")
            bw_ax.plot(grid, grid * kind_factor(kind, p) / c.fit.predict_s(grid) / GB, "-.",
                       color=color, lw=0.8, alpha=0.7, label=f"p={p} {kind} link file")
        _plot_levels(bw_ax, run, grid)
    if wire_gbps:
        bw_ax.axhline(wire_gbps, color="k", lw=0.8, ls=":", label=f"wire {wire_gbps:g} GB/s")
    ax.set(xscale="log", yscale="log", ylabel="all-reduce time (µs)",
           title="all-reduce time vs size")
    ax.legend(fontsize=7)
    res_ax.axhline(0, color="k", lw=0.6)
    res_ax.set(xscale="log", xlabel="message size (bytes)",
               ylabel="measured / lone fit − 1 (%)")
    bw_ax.set(xscale="log", xlabel="message size (bytes)", ylabel="busbw (GB/s)",
              title="bus bandwidth vs size")
    bw_ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return {"allreduce_time.png": fig, "allreduce_busbw.png": bw_fig}


_LEVEL_STYLES = {"intra": ("D", "C2"), "inter": ("P", "C3")}   # marker, colour


def _plot_levels(ax, run: WorldCalibration, grid: np.ndarray) -> None:
    """A two-level world's per-level all-reduce busbw, measured and its fit (calibrate.levels),
    in colours of their own: where the inter level sits below the ring is the shared NIC."""
    levels = getattr(run, "levels", None)
    if levels is None:
        return
    for name, (marker, color) in _LEVEL_STYLES.items():
        c = getattr(levels, name)
        sizes = np.array([r["size_bytes"] for r in c.rows], dtype=float)
        bw = [bandwidths_gbps(n, r["time_s"], c.ranks)[1] for n, r in zip(sizes, c.rows)]
        ax.plot(sizes, bw, marker, ls="-", color=color, ms=4,
                lw=0.8, mfc="none", label=f"{name} measured: {c.ranks} ranks a group, "
                                            f"{c.groups} groups at once")
        ax.plot(grid, grid * bus_factor(c.ranks) / c.fit.predict_s(grid) / GB, "--",
                color=color, lw=0.8,
                label=f"{name} fit (α {c.link.alpha_s * 1e6:.0f} µs, busbw "
                      f"{c.link.busbw_gbps:.3g} GB/s)")
