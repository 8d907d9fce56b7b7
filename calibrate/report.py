"""What ``python -m calibrate`` prints and writes: an nccl-tests table, a fit summary, CSV,
JSON and two PNG plots (matplotlib Agg, no display needed)::

    print(table(rows, "float32", world_size=2, fit=fit, heldout=mask))
    write_plots("out/", runs)     # out/allreduce_time.png, out/allreduce_busbw.png

Vocabulary as in nccl-tests' doc/PERFORMANCE.md: ``algbw = size / time`` and
``busbw = algbw · 2(p−1)/p`` for all-reduce, in GB/s = 1e9 bytes/s. Times are µs on screen,
seconds inside.
"""
from __future__ import annotations

import csv
import io
import math
import os
import sys
from pathlib import Path

import numpy as np

from calibrate.fit import MAX_BUSBW_GBPS, AlphaBetaFit, PiecewiseFit
from simddp.io import write_atomic
from simddp.link import GB, bus_factor

_NCCL_TYPE = {"float32": "float", "float16": "half", "bfloat16": "bfloat16",
              "float64": "double", "int32": "int32", "int64": "int64", "uint8": "uint8"}


def bandwidths_gbps(size_bytes: float, time_s: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s, as nccl-tests computes them for all-reduce.

    >>> bandwidths_gbps(1e9, 2.0, 4)
    (0.5, 0.75)
    """
    algbw = size_bytes / time_s / GB
    return algbw, algbw * bus_factor(world_size)


def human_bytes(n: float) -> str:
    """1024 -> '1 KiB', 67108864 -> '64 MiB'."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def table(rows: list[dict], dtype: str, world_size: int, fit=None, heldout=None) -> str:
    """The nccl-tests all_reduce_perf layout, plus p95, the fit's prediction and its error.

    Held-out sizes (not used by the fit) are marked ``*`` in the last column.
    """
    head = ("#{:>12} {:>12} {:>9} {:>6} {:>10} {:>10} {:>8} {:>8} {:>10} {:>7}"
            .format("size", "count", "type", "redop", "time", "p95", "algbw", "busbw",
                    "fit", "err"))
    units = ("#{:>12} {:>12} {:>9} {:>6} {:>10} {:>10} {:>8} {:>8} {:>10} {:>7}"
             .format("(B)", "(elements)", "", "", "(us)", "(us)", "(GB/s)", "(GB/s)", "(us)",
                     "(%)"))
    lines = [head, units]
    predicted = fit.predict_s([r["size_bytes"] for r in rows]) if fit is not None else None
    for i, r in enumerate(rows):
        algbw, busbw = bandwidths_gbps(r["size_bytes"], r["time_s"], world_size)
        fit_cols = ["", ""]
        if predicted is not None:
            err = (predicted[i] - r["time_s"]) / r["time_s"]
            fit_cols = [f"{predicted[i] * 1e6:.1f}", f"{err * 100:+.1f}"]
        mark = " *" if heldout is not None and heldout[i] else ""
        lines.append(" {:>12} {:>12} {:>9} {:>6} {:>10.1f} {:>10.1f} {:>8.3f} {:>8.3f} {:>10} "
                     "{:>7}{}".format(r["size_bytes"], r["count"], _NCCL_TYPE.get(dtype, dtype),
                                      "sum", r["time_s"] * 1e6, r["p95_s"] * 1e6, algbw, busbw,
                                      *fit_cols, mark))
    if heldout is not None and any(heldout):
        lines.append("# * held out: not used by the fit, scored against it")
    return "\n".join(lines)


def describe_fit(fit: AlphaBetaFit | PiecewiseFit) -> list[str]:
    """Lines for the summary: α, busbw with 95% CIs, R² on log time, residuals, size range."""
    if isinstance(fit, PiecewiseFit):
        out = [f"piecewise fit, breakpoint at {human_bytes(fit.breakpoint_bytes)}: "
               f"R² (log t) {fit.r2:.4f}, rms rel. residual {fit.rms_rel_err:.1%}, "
               f"max {fit.max_rel_err:.1%}"]
        for label, piece in (("  <= breakpoint", fit.lower), ("  >  breakpoint", fit.upper)):
            out.append(f"{label}: " + _line(piece) + f" ({human_bytes(piece.min_bytes)}–"
                       f"{human_bytes(piece.max_bytes)})")
        return out
    return [f"fit ({fit.weights} residuals) on {fit.n_points} sizes, "
            f"{human_bytes(fit.min_bytes)}–{human_bytes(fit.max_bytes)}: " + _line(fit),
            f"  R² (log t) {fit.r2:.4f}, rms rel. residual {fit.rms_rel_err:.1%}, "
            f"max {fit.max_rel_err:.1%}"]


def _line(f: AlphaBetaFit) -> str:
    lo, hi = f.busbw_ci_gbps
    busbw = (f"busbw = {f.busbw_gbps:.3f} GB/s [{lo:.3f}, {hi:.3f}]"
             if f.busbw_gbps < MAX_BUSBW_GBPS / 2 else
             "busbw unresolved (time flat in size: latency-bound)")
    if f.alpha_ci_s[0] == f.alpha_ci_s[1]:  # held at the sequence step's α, not fitted
        return f"α = {f.alpha_s * 1e6:.1f} µs (held: the sequence step's), {busbw}"
    return (f"α = {f.alpha_s * 1e6:.1f} µs [95% CI {f.alpha_ci_s[0] * 1e6:.1f}, "
            f"{f.alpha_ci_s[1] * 1e6:.1f}], {busbw}")


def fit_to_json(fit: AlphaBetaFit | PiecewiseFit | None) -> dict | None:
    if fit is None:
        return None
    if isinstance(fit, PiecewiseFit):
        return {"kind": "piecewise", "breakpoint_bytes": fit.breakpoint_bytes,
                "r2": fit.r2, "rms_rel_err": fit.rms_rel_err, "max_rel_err": fit.max_rel_err,
                "lower": fit_to_json(fit.lower), "upper": fit_to_json(fit.upper)}
    return {"kind": "alpha_beta", **{k: _finite(v) for k, v in vars(fit).items()}}


def _finite(v):
    if isinstance(v, tuple):
        return [_finite(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def csv_text(runs: list[dict]) -> str:
    """One row per (world size, size): what the table shows, machine-readable."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["world_size", "size_bytes", "count", "dtype", "time_us", "p95_us",
                  "algbw_gbps", "busbw_gbps", "fit_us", "heldout", "iters"])
    for run in runs:
        predicted = run["fit"].predict_s([r["size_bytes"] for r in run["rows"]])
        for i, r in enumerate(run["rows"]):
            algbw, busbw = bandwidths_gbps(r["size_bytes"], r["time_s"], run["world_size"])
            out.writerow([run["world_size"], r["size_bytes"], r["count"], run["dtype"],
                          f"{r['time_s'] * 1e6:.3f}", f"{r['p95_s'] * 1e6:.3f}", f"{algbw:.6f}",
                          f"{busbw:.6f}", f"{predicted[i] * 1e6:.3f}",
                          int(bool(run["heldout_mask"][i])), r["iters"]])
    return buf.getvalue()


def write_plots(out_dir: str | Path, runs: list[dict],
                wire_gbps: float | None = None) -> list[Path]:
    """Time vs size (log-log, fitted line, relative residuals below) and busbw vs size."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    fig, (ax, res_ax) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True,
                                     gridspec_kw={"height_ratios": [3, 1.3]})
    bw_fig, bw_ax = plt.subplots(figsize=(7, 4.5))
    for i, run in enumerate(runs):
        color = f"C{i}"
        p = run["world_size"]
        sizes = np.array([r["size_bytes"] for r in run["rows"]], dtype=float)
        times = np.array([r["time_s"] for r in run["rows"]])
        p95 = np.array([r["p95_s"] for r in run["rows"]])
        held = np.asarray(run["heldout_mask"], dtype=bool)
        grid = np.geomspace(sizes.min(), sizes.max(), 200)
        model = run["fit"].predict_s(grid)
        ax.errorbar(sizes[~held], times[~held] * 1e6, yerr=[0 * p95[~held],
                    (p95 - times)[~held] * 1e6], fmt="o", color=color, ms=4, capsize=2,
                    label=f"p={p} measured (median, bar to p95)")
        if held.any():
            ax.plot(sizes[held], times[held] * 1e6, "s", mfc="none", color=color, ms=6,
                    label=f"p={p} held out")
        ax.plot(grid, model * 1e6, "-", color=color, lw=1, label=f"p={p} fit")
        if run.get("sequence") is not None:  # the line's α is a sequence's, not a lone one's
            lone = run["sequence"]["lone_alpha_s"] + (model - run["fit"].alpha_s)
            ax.plot(grid, lone * 1e6, ":", color=color, lw=1,
                    label=f"p={p} same busbw, lone α (sweep intercept)")
        rel = (times - run["fit"].predict_s(sizes)) / run["fit"].predict_s(sizes) * 100
        res_ax.plot(sizes, rel, "o-", color=color, ms=3, lw=0.8)
        res_ax.plot(sizes[held], rel[held], "s", mfc="none", color=color, ms=6)
        bw = [bandwidths_gbps(s, t, p)[1] for s, t in zip(sizes, times)]
        bw_ax.plot(sizes, bw, "o-", color=color, ms=4, label=f"p={p} measured")
        bw_ax.plot(grid, grid * bus_factor(p) / model / GB, "--", color=color, lw=1,
                   label=f"p={p} fit")
    if wire_gbps:
        bw_ax.axhline(wire_gbps, color="k", lw=0.8, ls=":", label=f"wire {wire_gbps:g} GB/s")
    ax.set(xscale="log", yscale="log", ylabel="all-reduce time (µs)",
           title="all-reduce time vs size")
    ax.legend(fontsize=7)
    res_ax.axhline(0, color="k", lw=0.6)
    res_ax.set(xscale="log", xlabel="message size (bytes)", ylabel="measured/fit − 1 (%)")
    bw_ax.set(xscale="log", xlabel="message size (bytes)", ylabel="busbw (GB/s)",
              title="bus bandwidth vs size")
    bw_ax.legend(fontsize=7)
    paths = []
    for figure, name in ((fig, "allreduce_time.png"), (bw_fig, "allreduce_busbw.png")):
        figure.tight_layout()
        buf = io.BytesIO()
        figure.savefig(buf, format="png", dpi=110)
        plt.close(figure)
        write_atomic(out_dir / name, buf.getvalue())
        paths.append(out_dir / name)
    return paths


def link_paths(out_dir: str | Path, world_sizes: list[int]) -> dict[int, Path]:
    """link.json for one world size, link-p<N>.json each when several were swept."""
    out_dir = Path(out_dir)
    if len(world_sizes) == 1:
        return {world_sizes[0]: out_dir / "link.json"}
    return {p: out_dir / f"link-p{p}.json" for p in world_sizes}


def wire_fraction(busbw_gbps: float, link_gbit: float | None) -> float | None:
    """busbw over the emulated wire rate R/8 GB/s (1 Gbit/s carries 0.125 GB/s)."""
    return busbw_gbps / (link_gbit / 8) if link_gbit else None


def results_json(a, runs: list[dict], links: dict[int, Path]) -> dict:
    from simddp.io import link_to_json
    out = {"format": "calibrate.results/1", "command": "python -m calibrate " + " ".join(
        sys.argv[1:]), "backend": a.backend, "dtype": a.dtype, "sizes_bytes": a.sizes_bytes,
        "warmup": a.warmup, "iters": a.iters, "emulate_hosts": a.emulate_hosts,
        "link_gbit": a.link_gbit, "load_before": getattr(a, "load_before", None), "runs": []}
    for run in runs:
        p, held = run["world_size"], run["heldout"]
        rows = [{**r, **dict(zip(("algbw_gbps", "busbw_gbps"),
                                 bandwidths_gbps(r["size_bytes"], r["time_s"], p))),
                 "heldout": bool(h)} for r, h in zip(run["rows"], run["heldout_mask"])]
        out["runs"].append({
            "world_size": p, "rows": rows, "fit": fit_to_json(run["fit"]),
            "heldout": {k: _finite(held[k]) for k in ("heldout_bytes", "rel_err",
                                                      "median_rel_err", "max_rel_err")},
            "piecewise_suggested": fit_to_json(run["alternative"]),
            "busbw_wire_fraction": wire_fraction(run["link"].busbw_gbps, a.link_gbit),
            "contention": run["contention"], "sequence": run.get("sequence"),
            "oversubscribed": run["oversubscribed"] or None, "link_file": str(links[p]), "link": link_to_json(run["link"])})
    return out


def write_outputs(a, runs: list[dict]) -> list[Path]:
    """Plots, CSV, the results JSON and the link file(s), each written atomically."""
    from simddp.io import link_to_json, save_json
    out_dir = Path(a.out)
    links = link_paths(out_dir, [run["world_size"] for run in runs])
    paths = [] if a.no_plots else write_plots(
        out_dir, runs, a.link_gbit / 8 if a.link_gbit else None)
    write_atomic(out_dir / "allreduce.csv", csv_text(runs))
    save_json(out_dir / "allreduce.json", results_json(a, runs, links))
    paths += [out_dir / "allreduce.csv", out_dir / "allreduce.json"]
    for run in runs:
        save_json(links[run["world_size"]], link_to_json(run["link"]))
        paths.append(links[run["world_size"]])
    return paths


def print_report(a, runs: list[dict], paths: list[Path], elapsed_s: float) -> None:
    where = (f" on {a.emulate_hosts} emulated hosts at {a.link_gbit:g} Gbit/s"
             if a.link_gbit else f" on {a.emulate_hosts} emulated hosts" if a.emulate_hosts
             else "")
    load = getattr(a, "load_before", None)
    if load is not None and load > (os.cpu_count() or 1):
        print(f"note: 1-min load average was {load:.1f} on {os.cpu_count()} cores before the "
              "run (other processes, or a run that just ended): times may be inflated")
    for run in runs:
        p, fit, held = run["world_size"], run["fit"], run["heldout"]
        print(f"# all_reduce {a.backend}, {p} ranks{where}, {a.warmup} warm-up + {a.iters} "
              "timed iters per size; time = max over ranks of each rank's median (p95 likewise)")
        print(table(run["rows"], a.dtype, p, fit, run["heldout_mask"]))
        print("\n".join(describe_fit(fit)))
        if held["heldout_bytes"]:
            print(f"  held-out {len(held['heldout_bytes'])} sizes: median error "
                  f"{held['median_rel_err']:.1%}, max {held['max_rel_err']:.1%}")
        seq = run.get("sequence")
        if seq is not None:
            print(f"  α in a step: {seq['count']} all-reduces ({human_bytes(seq['bytes'])} in "
                  f"all) back to back, median of {seq['repeats']}: queued async "
                  f"{seq['async_s'] * 1e3:.2f} ms -> α {seq['alpha_s'] * 1e6:.0f} µs (alpha_s), "
                  f"each waited for {seq['blocking_s'] * 1e3:.2f} ms -> α "
                  f"{seq['blocking_alpha_s'] * 1e6:.0f} µs (blocking_alpha_s); a lone "
                  f"all-reduce's fitted α is {seq['lone_alpha_s'] * 1e6:.0f} µs. busbw is "
                  "fitted with α held, by plain least squares (the large sizes decide it)")
        frac = wire_fraction(run["link"].busbw_gbps, a.link_gbit)
        if frac is not None:
            print(f"  busbw {run['link'].busbw_gbps:.4f} GB/s = {frac:.0%} of the "
                  f"{a.link_gbit:g} Gbit/s wire ({a.link_gbit / 8:g} GB/s)")
        alt = run["alternative"]
        if alt is not None:
            print(f"  note: one line misses by {fit.rms_rel_err:.0%} rms (> 15%), a protocol "
                  f"switch? --piecewise would break at {human_bytes(alt.breakpoint_bytes)} "
                  f"with {alt.rms_rel_err:.0%} rms")
        cont = run["contention"]
        if cont is not None:
            c0 = cont["per_rank"][0]
            print(f"contention ({human_bytes(c0['size_bytes'])} all-reduce vs "
                  f"{c0['matmul_n']}x{c0['matmul_n']} matmuls, median of {c0['repeats']}, max "
                  f"over ranks): compute x{cont['compute_slowdown']:.2f} slower while the "
                  f"all-reduce runs, all-reduce x{cont['comm_slowdown']:.2f} slower under "
                  "compute")
            for note in cont["notes"]:
                print(f"  note: {note}")
        if run["oversubscribed"]:
            print(f"note: {run['oversubscribed']}")
        print()
    if len(runs) > 1:
        base = runs[0]["link"]
        print("# world size   alpha (us)   busbw (GB/s)   R² (log t)   held-out err   "
              f"vs p={runs[0]['world_size']}")
        for run in runs:
            link, fit = run["link"], run["fit"]
            print(f"  {run['world_size']:>10} {link.alpha_s * 1e6:>12.1f} "
                  f"{link.busbw_gbps:>14.4f} {fit.r2:>12.4f} "
                  f"{run['heldout']['median_rel_err']:>14.1%}   α x"
                  f"{link.alpha_s / base.alpha_s if base.alpha_s else float('nan'):.2f}, "
                  f"busbw x{link.busbw_gbps / base.busbw_gbps:.2f}")
        print()
    print("wrote " + ", ".join(str(p) for p in paths))
    print(f"took {elapsed_s:.1f} s")
