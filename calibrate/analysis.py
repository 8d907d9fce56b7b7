"""Turn one world's raw all-reduce timings into fits, the sequence α, contention and a Link;
reduce-scatter and all-gather timings into the Link's ``kind_fits`` the same way.

:func:`calibrate.run` calls :func:`analyse` on what :func:`calibrate.measure` returned, for
``python -m calibrate`` and for ``realrun validate`` alike.
"""
from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass, field
from datetime import datetime

import calibrate.fit as fitting
from calibrate.judged import finished, problems_of
from calibrate.curves import CurveChoice, choose_curve
from calibrate.combine import (combine_kind_sequence, combine_sequence, overlapped_alpha,
                               summarize, time_spread)
from calibrate.rig.lone_alpha import alpha_unresolved, sampled_lone_alpha
from calibrate.spreads import alpha_uncertainty, widen
from calibrate.settings import CalibrateSettings
from simddp.inputs.contention import Contention
from simddp.inputs.contention_measurement import combine_contention
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.link import KindFit, Link
from simddp.inputs.link_file import LinkFile


@dataclass(frozen=True)
class KindCalibration:
    """One other collective kind's sweep and fit (reduce_scatter, all_gather): the same
    method as the all-reduce's, with that kind's (p−1)/p bytes per rank."""

    kind: str
    rows: list[dict]               # per size (n = full bytes): time_s, p95_s, ...
    fit: object                    # calibrate.fit.AlphaBetaFit: the link file's kind_fits
    heldout: dict
    lone_fit: object               # relative residuals on the lone sweep, α fitted
    lone_heldout: dict
    sequence: dict | None = None   # α queued back to back (rig/sequence.py), if measured
    # The all-reduce's busbw over this kind's sizes: the fair baseline for the report's ratio
    allreduce_busbw_gbps: float | None = None

    @property
    def kind_fit(self) -> KindFit:
        return KindFit(self.fit.alpha_s, self.fit.busbw_gbps)

    @property
    def blocking_alpha_s(self) -> float | None:
        """Its α when each is waited for before the next (the sequence's), if measured."""
        return (self.sequence or {}).get("blocking_alpha_s")


@dataclass(frozen=True)
class WorldCalibration:
    """One world size's calibration: the measured rows, the fits, the link file's Link and
    what was measured beside it (:attr:`link_file`)."""

    world_size: int
    dtype: str
    rows: list[dict]               # per size: time_s (max over ranks of medians), p95_s, ...
    fit: object                    # calibrate.fit.AlphaBetaFit or PiecewiseFit
    heldout_mask: object           # numpy bool array: sizes held out of the fit
    heldout: dict                  # the held-out sizes' errors
    link: Link
    sequence: dict | None = None   # α as a step sees it (rig/sequence.py)
    alternative: object = None     # what --piecewise would give, when one line fits badly
    contention: dict | None = None
    oversubscribed: str = ""
    # The sweep's own fit (relative residuals); with the sequence step ``fit`` is busbw
    # refitted under the step's α, without it the same fit.
    lone_fit: object = None
    lone_heldout: dict | None = None
    # reduce_scatter / all_gather, when measured: their fits are link.kind_fits
    kinds: dict[str, KindCalibration] = field(default_factory=dict)
    # Why a fit the link uses is degenerate ("link: busbw at its bound ..."); () when usable.
    problems: tuple[str, ...] = ()
    tcp: str = ""   # the ranks' TCP congestion control (realrun/launch/host_stack.py)
    # calibrate.levels.LevelsCalibration: the link file's levels; None where not run.
    levels: object = None
    # Whether the link carries the sweep as its all-reduce curve, and why (calibrate/curves.py)
    curve: CurveChoice | None = None
    # What Gloo on this shared CPU host adds: the link file's gloo_host section; None on NCCL.
    host: GlooHost | None = None

    @property
    def link_contention(self) -> Contention | None:
        """The factors of the contention step, as the link file keeps them; None: not
        measured, or none (1.0 and 1.0)."""
        c = self.contention
        if c is None or (c["compute_slowdown"], c["comm_slowdown"]) == (1.0, 1.0):
            return None
        return Contention(c["compute_slowdown"], c["comm_slowdown"], source="link")

    @property
    def link_file(self) -> LinkFile:
        """The link file: the link, calibrate's contention, Gloo's host, the levels."""
        return LinkFile(self.link, self.link_contention, self.host,
                        None if self.levels is None else self.levels.levels)


@dataclass(frozen=True)
class Calibration:
    """Everything one calibration measured: one :class:`WorldCalibration` per world size."""

    settings: CalibrateSettings
    worlds: list[WorldCalibration]
    load_before: float | None = None
    elapsed_s: float = 0.0

    @property
    def link(self) -> Link:
        """The link of the first (usually only) world size."""
        return self.worlds[0].link

    @property
    def link_file(self) -> LinkFile:
        """The first world size's link file: the link and what was measured beside it."""
        return self.worlds[0].link_file


def analyse(s: CalibrateSettings, world_size: int, ranks: list[dict],
            burst_bytes: int | None = None) -> WorldCalibration:
    """Summaries, fits (held-out scored), contention factors and the Link for one world.
    ``burst_bytes``: the shaped link's token bucket (None unshaped)."""
    rows = summarize(ranks)
    sizes = [r["size_bytes"] for r in rows]
    times = [r["time_s"] for r in rows]
    held = lone_held = fitting.heldout_error(sizes, times, world_size, s.holdout_every,
                                             s.piecewise)
    fit = lone = held["fit"]
    seq = None
    if "sequence" in ranks[0]:
        seq, held = step_alpha_fit(s, world_size, ranks, rows, lone, burst_bytes)
    # Each line's intervals and judged figures, once, for everything that prints them
    lone_held = finished(lone_held, rows, None)
    held = lone_held if seq is None else finished(held, rows, seq["alpha_s"])
    fit, lone = held["fit"], lone_held["fit"]
    alternative = None  # what --piecewise would give, shown when one line fits badly
    if (not s.piecewise and seq is None and fitting.suggest_piecewise(fit)
            and fit.n_points >= 2 * fitting.MIN_POINTS):
        kept = [i for i, h in enumerate(held["mask"]) if not h]
        alternative = fitting.fit_piecewise([sizes[i] for i in kept], [times[i] for i in kept],
                                            world_size)
    cont = combine_contention([r["contention"] for r in ranks]) if "contention" in ranks[0] \
        else None
    oversubscribed = _oversubscribed(s, world_size, ranks[0])
    tcp = ranks[0].get("tcp", "")   # the ranks' congestion control; "" from older ranks
    link = fitting.to_link(fit, _link_name(s, world_size), world_size, s.backend,
                           _source(s, world_size, fit, held, oversubscribed, seq, tcp))
    spread = time_spread(rows, link.alpha_s)
    if seq is not None:  # how sure the overlapped α is; the blocking α's repeats
        seq["bandwidth_spread"] = spread
        spread = widen(spread, widen(alpha_uncertainty(seq), seq.get("blocking_alpha_spread")))
    link = dataclasses.replace(link, time_spread=spread)
    kinds = {kind: analyse_kind(s, world_size, ranks, kind, rows,
                                seq["alpha_s"] if seq is not None else None)
             for kind in ranks[0].get("kinds", {})}
    if kinds:
        link = dataclasses.replace(link, kind_fits={k: c.kind_fit for k, c in kinds.items()})
    host = gloo_host(seq, kinds) if s.backend == "gloo" else None
    # The sweep as the link's curve where it beats the line (docs/CALIBRATE.md, measured curve)
    curve = choose_curve(rows, held, world_size, _nodes(s, world_size),
                         seq["alpha_s"] - lone.alpha_s if seq is not None else 0.0,
                         link.busbw_gbps, s.backend)
    if curve.curve is not None:
        link = dataclasses.replace(link, curves=(curve.curve,))
    problems = [f"link: {p}" for p in problems_of(fit, held)]
    problems += [f"{k}: {p}" for k, c in kinds.items() for p in problems_of(c.fit, c.heldout)]
    unresolved = alpha_unresolved(seq) if seq is not None else None
    if unresolved:  # the median was between two modes: the link file says where α came from
        problems.append(f"link: {unresolved}")
    if held.get("busbw_from"):
        link = dataclasses.replace(link, source=f"{link.source}; busbw from {held['busbw_from']}")
    if problems:  # the link file says so too: whoever reads it later sees the warning
        link = dataclasses.replace(link, source=f"{link.source}; DEGENERATE FIT: "
                                                + "; ".join(problems))
    if seq is not None:  # the table's line: its α is not the link's, its busbw may be
        problems += [f"lone fit (the table's line, not the link's α): {p}"
                     for p in problems_of(lone, lone_held)]
    return WorldCalibration(world_size, s.dtype, rows, fit, held["mask"], held, link, seq,
                            alternative, cont, oversubscribed, lone, lone_held, kinds,
                            tuple(problems), tcp=tcp, curve=curve, host=host)


def gloo_host(seq: dict | None, kinds: dict[str, KindCalibration]) -> GlooHost:
    """What Gloo on this shared CPU host adds, from the sequence step: each kind's waited-for
    α, the wake after compute, a shaped link's refill (its bucket is set apart)."""
    seq = seq or {}
    return GlooHost(seq.get("blocking_alpha_s"),
                    {k: c.blocking_alpha_s for k, c in kinds.items()
                     if c.blocking_alpha_s is not None},
                    idle_wake_s=seq.get("idle_wake_s"),
                    blocking_refill_s=seq.get("blocking_refill_s"))


def _nodes(s: CalibrateSettings, world_size: int) -> int:
    """How many nodes (or emulated hosts) the world spans: the curve's ``nodes``."""
    per_node = s.gpus_per_node(world_size)
    return world_size // per_node if per_node and world_size % per_node == 0 else 1


def step_alpha_fit(s: CalibrateSettings, world_size: int, ranks: list[dict], rows: list[dict],
                   lone, burst_bytes: int | None) -> tuple[dict, dict]:
    """(the sequence step's summary, the held-out line through its α): busbw refitted under
    that α by plain least squares (docs/FINDINGS.md#bandwidth-from-the-large-sizes); α and
    busbw need each other, and a few rounds settle both."""
    sizes = [r["size_bytes"] for r in rows]
    times = [r["time_s"] for r in rows]
    fit = lone
    for _ in range(3):
        seq = combine_sequence([r["sequence"] for r in ranks], list(s.sequence_sizes),
                               fit.busbw_gbps, world_size, burst_bytes)
        overlapped_alpha(seq, rows, fit.busbw_gbps, world_size, sampled=sampled_lone_alpha(
            [r["sequence"] for r in ranks], fit.busbw_gbps, world_size))
        held = held_alpha_fit(s, sizes, times, world_size, seq["alpha_s"], lone)
        fit = held["fit"]
    seq["lone_alpha_s"] = lone.alpha_s
    return seq, held


def held_alpha_fit(s: CalibrateSettings, sizes: list, times: list, world_size: int,
                    alpha_s: float, lone, kind: str = fitting.ALL_REDUCE) -> dict:
    """busbw under the step's α by plain least squares (held-out scored); where no slope fits
    under that α (busbw at its bound), the lone fit's busbw, if it measured one."""
    held = fitting.heldout_error(sizes, times, world_size, s.holdout_every, weights="absolute",
                                 fixed_alpha_s=alpha_s, kind=kind)
    if fitting.busbw_unresolved(held["fit"]) and not fitting.busbw_unresolved(lone):
        held = fitting.heldout_error(sizes, times, world_size, s.holdout_every,
                                     weights="absolute", fixed_alpha_s=alpha_s, kind=kind,
                                     fixed_busbw_gbps=lone.busbw_gbps)
        held["busbw_from"] = "the lone fit: no slope fits under the step's α on these sizes"
    return held


def analyse_kind(s: CalibrateSettings, world_size: int, ranks: list[dict], kind: str,
                 allreduce_rows: list[dict] | None = None,
                 allreduce_alpha_s: float | None = None) -> KindCalibration:
    """A reduce-scatter's or all-gather's fit, as the all-reduce's, always one line;
    ``allreduce_rows`` (and the all-reduce's step α): its busbw over the same sizes, for a
    like-for-like ratio."""
    rows = summarize(ranks, kind)
    sizes = [r["size_bytes"] for r in rows]
    times = [r["time_s"] for r in rows]
    held = lone_held = fitting.heldout_error(sizes, times, world_size, s.holdout_every,
                                             kind=kind)
    fit = lone = held["fit"]
    seq = None
    if kind in ranks[0].get("sequence", {}).get("kinds", {}):
        for _ in range(3):  # α needs busbw and busbw α: as for the all-reduce, they settle
            seq = combine_kind_sequence([r["sequence"] for r in ranks], kind, fit.busbw_gbps,
                                        world_size)
            overlapped_alpha(seq, rows, fit.busbw_gbps, world_size, kind)
            held = held_alpha_fit(s, sizes, times, world_size, seq["alpha_s"], lone, kind)
            fit = held["fit"]
        seq["lone_alpha_s"] = lone.alpha_s
    lone_held = finished(lone_held, rows, None)
    held = lone_held if seq is None else finished(held, rows, seq["alpha_s"])
    fit, lone = held["fit"], lone_held["fit"]
    same = [r for r in allreduce_rows or () if r["size_bytes"] <= max(sizes)]
    ar_busbw = None
    if len(same) >= fitting.MIN_POINTS:
        ar_busbw = fitting.fit_alpha_beta(
            [r["size_bytes"] for r in same], [r["time_s"] for r in same], world_size,
            "absolute" if allreduce_alpha_s is not None else "relative",
            allreduce_alpha_s).busbw_gbps
    return KindCalibration(kind, rows, fit, held, lone, lone_held, seq, ar_busbw)


def _link_name(s: CalibrateSettings, world_size: int) -> str:
    if s.name:
        return f"{s.name}-p{world_size}" if len(s.world_sizes) > 1 else s.name
    if s.link_gbit:
        return f"emulated-{s.link_gbit:g}gbit-p{world_size}"
    return f"{socket.gethostname()}-{s.backend}-p{world_size}"


def _source(s: CalibrateSettings, world_size: int, fit, held: dict, oversubscribed: str,
            seq: dict | None, tcp: str = "") -> str:
    """One line for the link's ``source``: where, when, what was swept, how well it fit."""
    where = f"{s.backend}{f' over TCP {tcp}' if tcp and s.backend == 'gloo' else ''}, " \
            f"{world_size} ranks"
    if s.emulate_hosts:
        where += f" on {s.emulate_hosts} emulated hosts"
    if s.link_gbit:
        where += f" at {s.link_gbit:g} Gbit/s"
    n_fit = len(held["mask"]) - sum(held["mask"])
    text = (f"python -m calibrate on {socket.gethostname()}, "
            f"{datetime.now().isoformat(timespec='seconds')}: {where}, {s.dtype} "
            f"{s.min_bytes}..{s.max_bytes} B x{s.factor:g} ({len(held['mask'])} sizes), "
            f"{s.warmup}+{s.iters} iters; {'piecewise' if s.piecewise else 'α-β'} fit on "
            f"{n_fit} sizes; on {held['judged_on']}: R²(log t)={held['r2_log']:.4f}")
    if held["heldout_bytes"]:
        text += f", held-out median err {held['median_rel_err']:.1%}"
    if seq is not None:
        text += (f"; α (overlapped) from {seq['alpha_from']}, blocking α from "
                 f"{seq['count']} back-to-back all-reduces ({seq['bytes']} B)"
                 + (", idle wake from the first of them" if "idle_wake_s" in seq else "")
                 + f", lone fit's α {seq['lone_alpha_s'] * 1e6:.0f} µs")
    if s.kinds:
        text += (f"; kind_fits ({', '.join(s.kinds)}) by the same method on "
                 f"{s.kind_sizes_bytes[0]}..{s.kind_sizes_bytes[-1]} B")
    return text + (" (CPU oversubscribed)" if oversubscribed else "")


def _oversubscribed(s: CalibrateSettings, world_size: int, rank0: dict) -> str:
    """Rank 0 reports how many ranks share its host and its cores (calibrate/ranks/run.py)."""
    local = rank0.get("local_world_size", world_size)
    cores = rank0.get("cpu_count") or 1
    if s.backend == "gloo" and local * s.threads_per_rank > cores:
        return (f"{local} ranks x {s.threads_per_rank} thread(s) on {cores} cores: the CPU is "
                "oversubscribed, so times include waiting for a core; this α and busbw "
                "describe this box's scheduling as much as the link")
    return ""
