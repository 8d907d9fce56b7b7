"""What ``python -m calibrate`` prints: an nccl-tests table, a fit summary, α, contention::

    print_report(calibration, written_paths)

The nccl-tests table and its units are calibrate/report_table.py; the files it writes
calibrate/files.py; the plots calibrate/plots.py.
"""
from __future__ import annotations

import os
from pathlib import Path

from calibrate.analysis import ALL_SIZES, Calibration, KindCalibration
from calibrate.spreads import alpha_uncertainty
from calibrate.fit import MAX_BUSBW_GBPS, AlphaBetaFit, PiecewiseFit
from calibrate.lone_alpha import alpha_unresolved
from calibrate.report_table import human_bytes, table, wire_fraction

# Gloo's flows on bbr: what this project's VMs showed (the ranks report their TCP, ranks/run.py)
BBR_NOTE = ("the ranks' TCP ran bbr, which paces each flow by its own bandwidth estimate: "
            "on this project's VMs it stalled small waited-for all-reduces for 40-70 ms, and "
            "an emulated 2 Gbit/s transformer's naive step took 205 ms against 96.5 under "
            "cubic (docs/results/2026-11-26-pacing-stalls.md, 2026-11-27-high-tail-day.md): "
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
    lo, hi = f.busbw_ci_gbps
    busbw = (f"busbw = {f.busbw_gbps:.3f} GB/s [{lo:.3f}, {hi:.3f}]"
             if f.busbw_gbps < MAX_BUSBW_GBPS / 2 else
             "busbw unresolved (time flat in size: latency-bound)")
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


def _spread(spread: tuple[float, float] | None) -> str:
    return "not measured" if spread is None else f"x{spread[0]:.2f}–x{spread[1]:.2f}"


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
        _print_alphas(run, run.sequence, run.fit, run.heldout)
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


def _print_lone(run, a) -> None:
    """The nccl-tests table of lone all-reduces and the fit through them (its held-out)."""
    where = (f" on {a.emulate_hosts} emulated hosts at {a.link_gbit:g} Gbit/s"
             if a.link_gbit else f" on {a.emulate_hosts} emulated hosts" if a.emulate_hosts
             else "")
    print(f"# all_reduce {a.backend}, {run.world_size} ranks{where}, {a.warmup} warm-up + "
          f"{a.iters} timed iters per size; time = max over ranks of each rank's median (p95 "
          "likewise)")
    lone = run.lone_fit or run.fit
    print(table(run.rows, a.dtype, run.world_size, lone, run.heldout_mask))
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
    """How much compute and all-reduces slowed each other (simddp.contention)."""
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


def _print_alphas(run, seq: dict, fit, held: dict) -> None:
    """Where the link's two αs come from (issue 19: docs/results/
    2026-11-25-small-collective-law.md), and the queue figure kept for comparison."""
    print(f"α of overlapped all-reduces: {seq['alpha_s'] * 1e6:.0f} µs, a small all-reduce's "
          f"lone time less its bytes (median over {seq['alpha_from']}; a step's queued "
          "all-reduces complete one every lone α + bytes/busbw)")
    uncertainty = alpha_uncertainty(seq)
    if seq.get("alpha_interval_s"):
        low, high = seq["alpha_interval_s"]
        print(f"  the median's p5–p95 over bootstrap resamples: {low * 1e6:.0f}–"
              f"{high * 1e6:.0f} µs" + (" (unresolved: α from the fast mode; see the warning)"
                 if alpha_unresolved(seq) else ""))
    if seq.get("sweep_small_alpha_s") is not None:
        print(f"  the sweep's sizes up to 64 KiB alone gave {seq['sweep_small_alpha_s'] * 1e6:.0f}"
              " µs (measured in one stretch of seconds, which a slow stretch can cover)")
    if seq.get("alpha_spread"):
        print(f"  what it was taken from spread x{seq['alpha_spread'][0]:.2f}–"
              f"x{seq['alpha_spread'][1]:.2f} of it (one call's jitter, not a step's)")
    if uncertainty:
        print(f"  the link's time_spread covers α x{uncertainty[0]:.2f}–x{uncertainty[1]:.2f}, "
              "so the prediction ranges do: "
              f"x{run.link.time_spread[0]:.2f}–x{run.link.time_spread[1]:.2f} (large "
              "all-reduces alone: " + _spread(seq.get("bandwidth_spread")) + ")")
    print(f"α of blocking all-reduces (naive, flat): {seq['blocking_alpha_s'] * 1e6:.0f} µs, "
          f"from {seq['count']} ({human_bytes(seq['bytes'])} in all) each waited for after 20 "
          f"ms of compute, mean of {seq['repeats']} (each its slowest rank): "
          f"{seq['blocking_s'] * 1e3:.2f} ms")
    if seq.get("idle_wake_s") is not None:   # the first call after compute, apart
        print(f"  the first of them took {seq['blocking_first_s'] * 1e3:.2f} ms on average: "
              f"{seq['idle_wake_s'] * 1e3:.2f} ms over its law, what a step's first collective "
              "after compute waits for Gloo's threads to wake (idle_wake_s)")
    if seq.get("blocking_call_median_s") is not None:   # each call after the first, clocked
        print(f"  one by one: median {seq['blocking_call_median_s'] * 1e6:.0f} µs, mean "
              f"{seq['blocking_call_mean_s'] * 1e6:.0f} µs a call (a few wait a scheduler "
              "tick; a step adds up the mean)" + (
                  f"; each hand-off refills the link's bucket by "
                  f"{seq['blocking_refill_s'] * 1e6:.0f} µs on average (a call's α, capped "
                  "at the burst: blocking_refill_s)" if "blocking_refill_s" in seq else ""))
    bucket_s = seq["bandwidth_s"] - seq.get("blocking_bytes_s", seq["bandwidth_s"])
    if bucket_s > 0:
        print(f"  its bytes: {seq['bandwidth_s'] * 1e3:.2f} ms at busbw, of which the link's "
              f"bucket served {bucket_s * 1e3:.2f} (refilled during each call's hand-off, as "
              f"simddp charges a chain): {seq['blocking_bytes_s'] * 1e3:.2f} ms taken out")
    if seq.get("blocking_alpha_spread"):
        low, high = seq["blocking_alpha_spread"]
        print(f"  per repeat (slowest rank): p5–p95 x{low:.2f}–x{high:.2f} of the mean over "
              f"{seq['repeats']} repeats; the link's time_spread covers it too")
    if seq.get("queued_alpha_s") is not None and seq["queued_alpha_s"] != seq["alpha_s"]:
        print(f"  not used: the same {seq['count']} queued at once {seq['async_s'] * 1e3:.2f} "
              f"ms -> {seq['queued_alpha_s'] * 1e6:.0f} µs each; a queue's fixed start, spread "
              "over its all-reduces, would be charged to every one of a step's")
    print(f"link file uses: α {run.link.alpha_s * 1e6:.0f} µs (overlapped), blocking "
          f"{run.link.blocking_alpha_s * 1e6:.0f} µs; the lone fit's intercept was "
          f"{seq['lone_alpha_s'] * 1e6:.0f} µs; busbw {_line(fit).split('busbw = ')[-1]}, " + (
              f"from {held['busbw_from']}" if held.get("busbw_from") else
              "refitted with that α held (the large sizes decide it)"))
    print("  " + judged_line(held))


def judged_line(held: dict) -> str:
    """The link line's R² and held-out errors on the sizes it is judged on, as its warnings
    read them (calibrate.analysis.judged)."""
    r2 = held["r2_log"]
    text = (f"judged on {held['judged_on']} (bandwidth-bound, where this line makes its "
            "claim): R² (log t) "
            + (f"{r2:.4f}" if r2 == r2 else "not scored (fewer than 3 such sizes)"))
    n = len(held["heldout_bytes"])
    if not n:
        return text + "; no held-out size among them"
    return (text + f"; held-out {n} size{'s' if n > 1 else ''}: median error {held['median_rel_err']:.1%}, "
            f"max {held['max_rel_err']:.1%}")
