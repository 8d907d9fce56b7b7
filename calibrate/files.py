"""What ``python -m calibrate`` writes: allreduce.csv, allreduce.json, the link file(s) and the
plots (and kinds.csv when reduce-scatter and all-gather were measured), each atomically, only
after every rank succeeded::

    paths = write_outputs(calibration, "cal", plots=True)   # cal/link.json, cal/allreduce.*

On a two-level world the link file gets the per-level fits as its ``levels`` section and
allreduce.json each world's ``levels`` (rows, fits, where α came from; calibrate/levels.py).
The link file carries the sweep itself as its measured all-reduce curve where that curve
predicts the held-out sizes better than the fitted line (calibrate/curves.py says why);
allreduce.json says which, with both figures (``curve``).
"""
from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path

from calibrate.analysis import Calibration, WorldCalibration
from calibrate.fit import AlphaBetaFit, PiecewiseFit
from calibrate.nccl_table import bandwidths_gbps, wire_fraction
from calibrate.plots import write_plots
from simddp.inputs.io import link_to_json, save_json, write_atomic


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


def csv_text(runs: list[WorldCalibration]) -> str:
    """One row per (world size, size): what the table shows, machine-readable."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["world_size", "size_bytes", "count", "dtype", "time_us", "p95_us",
                  "algbw_gbps", "busbw_gbps", "fit_us", "heldout", "iters"])
    for run in runs:
        predicted = run.fit.predict_s([r["size_bytes"] for r in run.rows])
        for i, r in enumerate(run.rows):
            algbw, busbw = bandwidths_gbps(r["size_bytes"], r["time_s"], run.world_size)
            out.writerow([run.world_size, r["size_bytes"], r["count"], run.dtype,
                          f"{r['time_s'] * 1e6:.3f}", f"{r['p95_s'] * 1e6:.3f}", f"{algbw:.6f}",
                          f"{busbw:.6f}", f"{predicted[i] * 1e6:.3f}",
                          int(bool(run.heldout_mask[i])), r["iters"]])
    return buf.getvalue()


def kinds_csv_text(runs: list[WorldCalibration]) -> str:
    """One row per (world size, kind, size) of the reduce-scatter and all-gather sweeps; size
    is the full bytes n, busbw = algbw · (p−1)/p, fit the link file's kind_fits line."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["world_size", "kind", "size_bytes", "count", "dtype", "time_us", "p95_us",
                  "algbw_gbps", "busbw_gbps", "fit_us", "heldout", "iters"])
    for run in runs:
        for kind, c in run.kinds.items():
            predicted = c.fit.predict_s([r["size_bytes"] for r in c.rows])
            for i, r in enumerate(c.rows):
                algbw, busbw = bandwidths_gbps(r["size_bytes"], r["time_s"], run.world_size,
                                               kind)
                out.writerow([run.world_size, kind, r["size_bytes"], r["count"], run.dtype,
                              f"{r['time_s'] * 1e6:.3f}", f"{r['p95_s'] * 1e6:.3f}",
                              f"{algbw:.6f}", f"{busbw:.6f}", f"{predicted[i] * 1e6:.3f}",
                              int(bool(c.heldout["mask"][i])), r["iters"]])
    return buf.getvalue()


def kinds_json(run: WorldCalibration) -> dict:
    """allreduce.json's ``kinds`` of one world: per kind its rows, fits and sequence."""
    out = {}
    for kind, c in run.kinds.items():
        rows = [{**r, **dict(zip(("algbw_gbps", "busbw_gbps"),
                                 bandwidths_gbps(r["size_bytes"], r["time_s"], run.world_size,
                                                 kind))),
                 "heldout": bool(h)} for r, h in zip(c.rows, c.heldout["mask"])]
        out[kind] = {"rows": rows, "fit": fit_to_json(c.fit), "lone_fit": fit_to_json(c.lone_fit),
                     "heldout": {k: _finite(c.heldout[k]) for k in (
                         "heldout_bytes", "rel_err", "median_rel_err", "max_rel_err")},
                     "sequence": c.sequence,
                     "allreduce_busbw_gbps_same_sizes": c.allreduce_busbw_gbps}
    return out


def levels_json(run: WorldCalibration) -> dict | None:
    """allreduce.json's ``levels`` of one world (calibrate/levels.py): per level its rows,
    fits, where α came from and its link; None without the per-level step."""
    lv = run.levels
    if lv is None:
        return None
    out = {"gpus_per_node": lv.gpus_per_node, "nodes": lv.nodes}
    for c in (lv.intra, lv.inter):
        rows = [{**r, **dict(zip(("algbw_gbps", "busbw_gbps"),
                                 bandwidths_gbps(r["size_bytes"], r["time_s"], c.ranks))),
                 "heldout": bool(h)} for r, h in zip(c.rows, c.heldout["mask"])]
        out[c.level] = {"ranks": c.ranks, "groups_at_once": c.groups, "where": c.where,
                        "rows": rows, "fit": fit_to_json(c.fit),
                        "lone_fit": fit_to_json(c.lone_fit), "alpha_from": c.alpha_from,
                        "heldout": {k: _finite(c.heldout[k]) for k in (
                            "heldout_bytes", "rel_err", "median_rel_err", "max_rel_err")},
                        "kinds": {k: {"rows": k_c.rows, "fit": fit_to_json(k_c.fit)}
                                  for k, k_c in c.kinds.items()},
                        "problems": list(c.problems), "link": link_to_json(c.link)}
    return out


def link_paths(out_dir: str | Path, world_sizes: list[int]) -> dict[int, Path]:
    """link.json for one world size, link-p<N>.json each when several were swept."""
    out_dir = Path(out_dir)
    if len(world_sizes) == 1:
        return {world_sizes[0]: out_dir / "link.json"}
    return {p: out_dir / f"link-p{p}.json" for p in world_sizes}


def results_json(cal: Calibration, links: dict[int, Path]) -> dict:
    """allreduce.json: how it was measured, and per world size the rows, fits and link."""
    a = cal.settings
    out = {"format": "calibrate.results/1", "command": "python -m calibrate " + " ".join(
        sys.argv[1:]), "backend": a.backend, "dtype": a.dtype, "sizes_bytes": a.sizes_bytes,
        "warmup": a.warmup, "iters": a.iters, "emulate_hosts": a.emulate_hosts,
        "link_gbit": a.link_gbit, "load_before": cal.load_before, "runs": []}
    for run in cal.worlds:
        p, held = run.world_size, run.heldout
        rows = [{**r, **dict(zip(("algbw_gbps", "busbw_gbps"),
                                 bandwidths_gbps(r["size_bytes"], r["time_s"], p))),
                 "heldout": bool(h)} for r, h in zip(run.rows, run.heldout_mask)]
        out["runs"].append({
            "world_size": p, "rows": rows, "fit": fit_to_json(run.fit),
            "heldout": {k: _finite(held[k]) for k in ("heldout_bytes", "rel_err",
                                                      "median_rel_err", "max_rel_err")},
            "piecewise_suggested": fit_to_json(run.alternative),
            "busbw_wire_fraction": wire_fraction(run.link.busbw_gbps, a.link_gbit),
            "contention": run.contention, "sequence": run.sequence,
            "oversubscribed": run.oversubscribed or None, "link_file": str(links[p]),
            "kinds": kinds_json(run), "levels": levels_json(run),
            "curve": run.curve.to_json() if run.curve is not None else None,
            "link": link_to_json(run.link_file)})
    return out


def write_outputs(cal: Calibration, out_dir: str | Path, plots: bool = True) -> list[Path]:
    """Plots, CSV, the results JSON and the link file(s), each written atomically."""
    out_dir = Path(out_dir)
    runs = cal.worlds
    links = link_paths(out_dir, [run.world_size for run in runs])
    link_gbit = cal.settings.link_gbit
    paths = write_plots(out_dir, runs, link_gbit / 8 if link_gbit else None) if plots else []
    write_atomic(out_dir / "allreduce.csv", csv_text(runs))
    save_json(out_dir / "allreduce.json", results_json(cal, links))
    paths += [out_dir / "allreduce.csv", out_dir / "allreduce.json"]
    if any(run.kinds for run in runs):
        write_atomic(out_dir / "kinds.csv", kinds_csv_text(runs))
        paths.append(out_dir / "kinds.csv")
    for run in runs:
        save_json(links[run.world_size],
                  link_to_json(run.link_file))
        paths.append(links[run.world_size])
    return paths
