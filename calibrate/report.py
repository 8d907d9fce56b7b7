"""What ``python -m calibrate`` prints: an nccl-tests table, then what the link file holds, in
a few lines (:func:`summary_text`); every measurement behind it (each α, held-out errors, the
curve, the kinds) is the full report, OUT/report.txt and ``--explain`` (:func:`print_report`)::

    print_report(calibration, written_paths)

The nccl-tests table and its units are calibrate/nccl_table.py; the files it writes
calibrate/files.py; the plots calibrate/plots.py.
"""
from __future__ import annotations

import io
import os
from contextlib import redirect_stdout
from pathlib import Path

from calibrate.analysis import Calibration, KindCalibration
from calibrate.judged import ALL_SIZES
from calibrate.fit import MAX_BUSBW_GBPS, AlphaBetaFit, PiecewiseFit
from calibrate.nccl_table import human_bytes, table, wire_fraction
from calibrate.rig.alpha_report import busbw_text, print_alphas

# Gloo's flows on bbr: what this project's VMs showed (the ranks report their TCP, ranks/run.py)
BBR_NOTE = ("the ranks' TCP ran bbr, which paces each flow by its own bandwidth estimate: "
            "it can stall small waited-for all-reduces for tens of ms and double a naive "
            "step against cubic (docs/FINDINGS.md#pacing-bbr-against-cubic): "
            "the naive and small-bucket rows swing with it. A cluster's hosts usually run cubic")

# What every [low, high] of the report is (calibrate/intervals.py), said once per world
INTERVALS_NOTE = ("# [low, high]: where 95 % of reruns would read, from this run's sizes and "
                  "their iterations (a bootstrap); a whole run on a busier box can fall "
                  "outside")


def describe_fit(fit: AlphaBetaFit | PiecewiseFit) -> list[str]:
    """Lines for the summary: α, busbw with their rerun intervals, R² on log time, residuals,
    size range."""
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
    busbw = busbw_text(f)
    if f.alpha_ci_s[0] == f.alpha_ci_s[1]:  # held at the sequence step's α, not fitted
        return f"α = {f.alpha_s * 1e6:.1f} µs (held: the sequence step's), {busbw}"
    return (f"α = {f.alpha_s * 1e6:.1f} µs [{f.alpha_ci_s[0] * 1e6:.1f}, "
            f"{f.alpha_ci_s[1] * 1e6:.1f}], {busbw}")


def describe_kind(c: KindCalibration, allreduce_busbw_gbps: float,
                  allreduce_max_bytes: float = 0) -> str:
    """One line for a reduce-scatter's or all-gather's fit (a :class:`KindCalibration`): the
    link file's α and busbw, where α came from, busbw against the all-reduce's (and against
    its busbw on the kind's own sizes when they stop below ``allreduce_max_bytes``),
    held-out."""
    f, seq, lone = c.fit, c.sequence, c.lone_fit
    if seq is not None:
        alpha = (f"α {f.alpha_s * 1e6:.0f} µs (from {seq['alpha_from']}; {seq['count']} "
                 f"queued {seq['async_s'] * 1e3:.2f} ms, not used; lone fit "
                 f"{lone.alpha_s * 1e6:.0f} µs)")
        if seq.get("blocking_alpha_s") is not None:
            alpha += f"; waited for each: α {seq['blocking_alpha_s'] * 1e6:.0f} µs"
    else:
        alpha = f"α {f.alpha_s * 1e6:.0f} µs (lone fit)"
    if f.busbw_gbps >= MAX_BUSBW_GBPS / 2:
        busbw = "busbw unresolved (latency-bound)"
    else:
        lo, hi = f.busbw_ci_gbps
        busbw = (f"busbw {f.busbw_gbps:.3f} GB/s [{lo:.3f}, {hi:.3f}] = "
                 f"x{f.busbw_gbps / allreduce_busbw_gbps:.2f} the all-reduce's")
        if (c.allreduce_busbw_gbps and c.allreduce_busbw_gbps < MAX_BUSBW_GBPS / 2
                and c.rows[-1]["size_bytes"] < allreduce_max_bytes):
            busbw += (f" (x{f.busbw_gbps / c.allreduce_busbw_gbps:.2f} its "
                      f"{c.allreduce_busbw_gbps:.3f} GB/s fitted on the same sizes)")
    return f"{c.kind}: {alpha}, {busbw}{_held_out(c.heldout, '; ')}"


def _held_out(held: dict, sep: str) -> str:
    """'; held-out median err 31%' (on the sizes the line is judged on, if not every size),
    or nothing when no held-out size is among them."""
    if not held["heldout_bytes"]:
        return ""
    n = len(held["heldout_bytes"])
    where = ("" if held.get("judged_on", ALL_SIZES) == ALL_SIZES else
             f" ({n} size{'s' if n > 1 else ''} taking ≥ 2α)")
    return f"{sep}held-out median err {held['median_rel_err']:.0%}{where}"


def report_text(cal: Calibration, paths: list[Path]) -> str:
    """The full report (what :func:`print_report` prints) as one text."""
    out = io.StringIO()
    with redirect_stdout(out):
        print_report(cal, paths)
    return out.getvalue()


def summary_text(cal: Calibration, paths: list[Path], details: Path) -> str:
    """Per world: the nccl-tests table, then the link file's numbers in a few lines, the
    warnings, and where the details are (``details``: the full report's file)."""
    out = io.StringIO()
    with redirect_stdout(out):
        _print_load_note(cal.load_before)
        for run in cal.worlds:
            _print_table(run, cal.settings)
            for line in headline(run, cal.settings.link_gbit):
                print(line)
            _print_warnings(run, cal.settings.backend)
            print()
        if len(cal.worlds) > 1:
            _print_world_sizes(cal.worlds)
            print()
        print("wrote " + ", ".join(str(p) for p in paths))
        print(f"every measurement behind these numbers: {details} (or --explain)")
        print(f"took {cal.elapsed_s:.1f} s")
    return out.getvalue()


def headline(run, link_gbit: float | None = None) -> list[str]:
    """What the link file holds, one number per question: α and busbw (the range they were
    fitted on; against the wire where ``link_gbit`` emulated one), what a CPU host adds, the
    contention, the other kinds against the all-reduce."""
    link, found, fit = run.link, run.link_file, run.fit
    sizes = [r["size_bytes"] for r in run.rows]
    lines = [f"link file: α {link.alpha_s * 1e6:.0f} µs a call, "
             f"{busbw_text(fit).replace('busbw = ', 'busbw ')} "
             f"(all-reduce, {human_bytes(sizes[0])}–{human_bytes(sizes[-1])})"]
    frac = wire_fraction(link.busbw_gbps, link_gbit)
    if frac is not None:
        lines[0] += f" = {frac:.0%} of the {link_gbit:g} Gbit/s wire"
    host = found.host
    if host is not None and host.blocking_alpha_s is not None:
        wake = ("" if host.idle_wake_s is None
                else f"; the first after compute waits {host.idle_wake_s * 1e3:.2f} ms more")
        lines.append(f"  Gloo on this CPU host: a waited-for call costs α "
                     f"{host.blocking_alpha_s * 1e6:.0f} µs{wake}")
    if found.contention is not None:
        c = found.contention
        lines.append(f"  contention: compute x{c.compute:.2f} while collectives run, "
                     f"collectives x{c.comm:.2f} under compute")
    if run.kinds:
        lines.append("  " + ", ".join(f"{c.kind} busbw x{c.fit.busbw_gbps / link.busbw_gbps:.2f}"
                                      for c in run.kinds.values()) + " the all-reduce's")
    return lines


def print_report(cal: Calibration, paths: list[Path]) -> None:
    """The tables, fits, α, contention and notes of every world size, then what was written."""
    _print_load_note(cal.load_before)
    for run in cal.worlds:
        print_world(run, cal.settings)
        print()
    if len(cal.worlds) > 1:
        _print_world_sizes(cal.worlds)
        print()
    print("wrote " + ", ".join(str(p) for p in paths))
    print(f"took {cal.elapsed_s:.1f} s")


def print_world(run, a) -> None:
    """One world size: its table and lone fit, the link's α and busbw, the other kinds, the
    notes on the fit, contention, the warnings, and its levels (``a``: the settings)."""
    _print_lone(run, a)
    if run.sequence is None:
        print(f"link file: that fit (α {run.link.alpha_s * 1e6:.0f} µs, busbw "
              f"{run.link.busbw_gbps:.3f} GB/s)")
    else:
        print_alphas(run, run.sequence, run.fit, run.heldout)
    if run.curve is not None:   # calibrate/curves.py: the sweep as the link's curve, or not
        print(f"measured curve: {'in the link file' if run.curve.curve else 'not used'}, "
              f"{run.curve.why}")
    _print_kinds(run)
    _print_fit_notes(run, a.link_gbit)
    _print_contention(run.contention, len(a.contention_widths))
    _print_warnings(run, a.backend)
    if run.levels is not None:
        print_levels(run, a.dtype, a.link_gbit)


def _print_load_note(load: float | None) -> None:
    if load is not None and load > (os.cpu_count() or 1):
        print(f"note: 1-min load average was {load:.1f} on {os.cpu_count()} cores before the "
              "run (other processes, or a run that just ended): times may be inflated")


def _print_table(run, a) -> None:
    """The nccl-tests table of lone all-reduces, with the lone fit's column."""
    where = (f" on {a.emulate_hosts} emulated hosts at {a.link_gbit:g} Gbit/s"
             if a.link_gbit else f" on {a.emulate_hosts} emulated hosts" if a.emulate_hosts
             else "")
    print(f"# all_reduce {a.backend}, {run.world_size} ranks{where}, {a.warmup} warm-up + "
          f"{a.iters} timed iters per size; time = max over ranks of each rank's median (p95 "
          "likewise)")
    print(table(run.rows, a.dtype, run.world_size, run.lone_fit or run.fit, run.heldout_mask))


def _print_lone(run, a) -> None:
    """The nccl-tests table of lone all-reduces and the fit through them (its held-out)."""
    _print_table(run, a)
    lone = run.lone_fit or run.fit
    lone_held = run.lone_heldout or run.heldout
    print(INTERVALS_NOTE)
    print("lone all-reduces, each after a barrier (the table; 'fit' is this line):")
    print("\n".join("  " + line for line in describe_fit(lone)))
    if lone_held["heldout_bytes"]:
        print(f"  held-out {len(lone_held['heldout_bytes'])} sizes: median error "
              f"{lone_held['median_rel_err']:.1%}, max {lone_held['max_rel_err']:.1%}")


def _print_kinds(run) -> None:
    """A line per other collective kind (its kind_fits)."""
    if not run.kinds:
        return
    k_sizes = [r["size_bytes"] for r in next(iter(run.kinds.values())).rows]
    print(f"other collectives, {human_bytes(k_sizes[0])}–{human_bytes(k_sizes[-1])} "
          "(n = the full, unsharded bytes, (p−1)/p·n per rank; kinds.csv has the "
          "rows; the link file's kind_fits):")
    for c in run.kinds.values():
        print("  " + describe_kind(c, run.link.busbw_gbps, run.rows[-1]["size_bytes"]))


def _print_fit_notes(run, link_gbit: float | None) -> None:
    """busbw against the wire (emulated), and what --piecewise would give where one line
    fits badly."""
    frac = wire_fraction(run.link.busbw_gbps, link_gbit)
    if frac is not None:
        print(f"  busbw {run.link.busbw_gbps:.4f} GB/s = {frac:.0%} of the "
              f"{link_gbit:g} Gbit/s wire ({link_gbit / 8:g} GB/s)")
    alt = run.alternative
    if alt is not None:
        print(f"  note: one line misses by {run.fit.rms_rel_err:.0%} rms (> 15%), a protocol "
              f"switch? --piecewise would break at {human_bytes(alt.breakpoint_bytes)} "
              f"with {alt.rms_rel_err:.0%} rms")


def _print_contention(cont: dict | None, layers: int) -> None:
    """How much compute and all-reduces slowed each other (simddp.inputs.contention)."""
    if cont is None:
        return
    c0 = cont["per_rank"][0]
    print(f"contention (a forward + backward of {layers} Linear "
          f"layers, {c0['compute_alone_s'] * 1e3:.1f} ms alone, against "
          f"{c0['stream_count']} all-reduces of {human_bytes(c0['stream_bytes'])} in "
          f"all, {c0['comm_alone_s'] * 1e3:.1f} ms alone; median over {c0['repeats']} "
          f"repeats x {len(cont['per_rank'])} ranks): compute "
          f"x{cont['compute_slowdown']:.2f} slower while all-reduces run, all-reduces "
          f"x{cont['comm_slowdown']:.2f} slower under compute")
    for note in cont["notes"]:
        print(f"  note: {note}")


def _print_warnings(run, backend: str) -> None:
    """What may make the link wrong: an oversubscribed CPU, bbr, degenerate fits."""
    if run.oversubscribed:
        print(f"note: {run.oversubscribed}")
    if backend == "gloo" and run.tcp == "bbr":
        print(f"note: {BBR_NOTE}")
    for problem in run.problems:  # the link file's source says so too
        print(f"WARNING: degenerate fit, {problem}")
    if any(not p.startswith("lone fit") for p in run.problems):
        print("  the link file was written but is suspect: rerun on a quieter machine, "
              "or with a larger --max-bytes when busbw is at its bound")


def _print_world_sizes(runs: list) -> None:
    """One line per world size, against the first."""
    base = runs[0].link
    print("# world size   alpha (us)   busbw (GB/s)   R² (log t)   held-out err   "
          f"vs p={runs[0].world_size}")
    for run in runs:
        link = run.link
        print(f"  {run.world_size:>10} {link.alpha_s * 1e6:>12.1f} "
              f"{link.busbw_gbps:>14.4f} {run.heldout['r2_log']:>12.4f} "
              f"{run.heldout['median_rel_err']:>14.1%}   α x"
              f"{link.alpha_s / base.alpha_s if base.alpha_s else float('nan'):.2f}, "
              f"busbw x{link.busbw_gbps / base.busbw_gbps:.2f}")


def print_levels(run, dtype: str, link_gbit: float | None) -> None:
    """The per-level step of one world (calibrate/levels.py): a table and a line per level,
    then the world's ring beside them; the link file's ``levels`` section."""
    lv = run.levels
    print(f"\n# per level: {lv.nodes} nodes x {lv.gpus_per_node} ranks, every group of a level "
          "at once (the hierarchical all-reduce's phases; link file: levels)")
    for c in (lv.intra, lv.inter):
        print(f"## {c.level}, {c.where}: all-reduce")
        print(table(c.rows, dtype, c.ranks, c.fit, c.heldout["mask"]))
        wire = link_gbit if c.level == "inter" else None   # emulated: intra is loopback
        print(f"{c.level}: " + _level_line(c.fit, c.alpha_from, c.heldout, wire))
        for kind, k in c.kinds.items():
            ratio = k.fit.busbw_gbps / c.fit.busbw_gbps
            print(f"  {kind}: " + _level_line(k.fit, "its small sizes", k.heldout, None)
                  + f" (x{ratio:.2f} the level's all-reduce)")
    ring = run.fit.upper if isinstance(run.fit, PiecewiseFit) else run.fit
    print("world, the flat ring over all ranks (the link file's top level): "
          + _level_line(ring, "the sequence step" if run.sequence else "the fit",
                        run.heldout, link_gbit))
    for problem in lv.problems:
        print(f"WARNING: degenerate fit, {problem}")


def _level_line(fit, alpha_from: str, held: dict, link_gbit: float | None) -> str:
    """'α 412 µs (from ...), busbw 0.520 GB/s [0.51, 0.53] = 42% of the wire, held-out ...'."""
    if fit.busbw_gbps >= MAX_BUSBW_GBPS / 2:
        busbw = "busbw unresolved (latency-bound)"
    else:
        lo, hi = fit.busbw_ci_gbps
        busbw = f"busbw {fit.busbw_gbps:.3f} GB/s [{lo:.3f}, {hi:.3f}]"
        frac = wire_fraction(fit.busbw_gbps, link_gbit)
        busbw += f" = {frac:.0%} of the {link_gbit:g} Gbit/s wire" if frac is not None else ""
    return f"α {fit.alpha_s * 1e6:.0f} µs (from {alpha_from}), {busbw}{_held_out(held, ', ')}"
