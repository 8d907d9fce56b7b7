"""Per-level fits of a two-level world: the ranks' per-level timings (calibrate/ranks/levels.py)
into the link file's ``levels`` section (docs/FORMATS.md)::

    world = with_levels(settings, analyse(settings, 4, ranks), ranks)   # calibrate.run does
    lv = world.levels                        # a LevelsCalibration, None without the step
    lv.intra.link, lv.inter.link, lv.levels  # simddp Links; simddp.inputs.link_file.Levels

Each level is fitted as the world's all-reduce is, with its own ranks in the factor (G inside,
N across) and α from its sizes up to 64 KiB (:func:`calibrate.combine.small_message_alpha`);
the intra level's reduce-scatter and all-gather go into its ``kind_fits``. The world's fit
stays the link's top level (docs/CALIBRATE.md, Per level).
"""
from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass, field
from datetime import datetime

import calibrate.fit as fitting
from calibrate.analysis import KindCalibration, WorldCalibration, held_alpha_fit
from calibrate.judged import finished, problems_of
from calibrate.combine import small_message_alpha, summarize, time_spread
from calibrate.settings import CalibrateSettings
from simddp.cost.factors import ALL_REDUCE
from simddp.inputs.link import Link
from simddp.inputs.link_file import Levels

# What each level's subgroups are, for the report and the link's source.
WHERE = {"intra": "inside each node ({p} ranks), all {groups} nodes at once",
         "inter": "across nodes ({p} ranks, one per node), all {groups} local-rank groups "
                  "at once"}


@dataclass(frozen=True)
class LevelCalibration:
    """One level's sweep and fit: ``ranks`` per subgroup, ``groups`` subgroups timed at once."""

    level: str                     # "intra" or "inter"
    ranks: int                     # G inside a node, N across nodes
    groups: int                    # N nodes, G local-rank groups
    rows: list[dict]               # per size: time_s (max over every rank), p95_s, ...
    fit: object                    # calibrate.fit.AlphaBetaFit: the level's link
    heldout: dict
    lone_fit: object               # relative residuals on the sweep, α fitted
    alpha_from: str                # where α came from, in words
    link: Link
    kinds: dict[str, KindCalibration] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return WHERE[self.level].format(p=self.ranks, groups=self.groups)


@dataclass(frozen=True)
class LevelsCalibration:
    """Both levels of one world of ``nodes`` × ``gpus_per_node`` ranks."""

    gpus_per_node: int
    nodes: int
    intra: LevelCalibration
    inter: LevelCalibration

    @property
    def levels(self) -> Levels:
        """The link file's ``levels`` section."""
        return Levels(self.gpus_per_node, self.intra.link, self.inter.link)

    @property
    def problems(self) -> tuple[str, ...]:
        return self.intra.problems + self.inter.problems


def with_levels(s: CalibrateSettings, world: WorldCalibration, ranks: list[dict]
                ) -> WorldCalibration:
    """``world`` with its per-level fits, when the ranks measured them."""
    if "levels" not in ranks[0]:
        return world
    return dataclasses.replace(world, levels=analyse_levels(s, world, ranks))


def analyse_levels(s: CalibrateSettings, world: WorldCalibration, ranks: list[dict]
                   ) -> LevelsCalibration:
    """Both levels' fits and Links from every rank's ``levels`` results."""
    per_rank = [r["levels"] for r in ranks]
    g, n = per_rank[0]["gpus_per_node"], per_rank[0]["nodes"]
    return LevelsCalibration(g, n, *(
        analyse_level(s, world.link.name, level, [r[level] for r in per_rank], p, groups)
        for level, p, groups in (("intra", g, n), ("inter", n, g))))


def analyse_level(s: CalibrateSettings, world_name: str, level: str, ranks: list[dict],
                  p: int, groups: int) -> LevelCalibration:
    """One level: its rows (each size's slowest rank over every subgroup, as a step waits for
    the slowest), its fit and kind fits, and its Link (world_size ``p``)."""
    rows = summarize(ranks)
    main = fit_level(s, rows, p)
    kinds = {}
    for kind in ranks[0].get("kinds", {}):
        k_rows = summarize(ranks, kind)
        k = fit_level(s, k_rows, p, kind)
        kinds[kind] = KindCalibration(kind, k_rows, k["fit"], k["held"], k["lone"],
                                      k["lone_held"])
    fit, held = main["fit"], main["held"]
    problems = [f"{level}: {x}" for x in problems_of(fit, held)]
    problems += [f"{level} {kind}: {x}" for kind, c in kinds.items()
                 for x in problems_of(c.fit, c.heldout)]
    source = _source(s, level, p, groups, main)
    if held.get("busbw_from"):
        source += f"; busbw from {held['busbw_from']}"
    if kinds:
        source += f"; kind_fits ({', '.join(kinds)}) by the same method"
    if problems:
        source += "; DEGENERATE FIT: " + "; ".join(problems)
    link = dataclasses.replace(
        fitting.to_link(fit, f"{world_name}-{level}", p, s.backend, source=source),
        time_spread=time_spread(rows, fit.alpha_s),
        kind_fits={kind: c.kind_fit for kind, c in kinds.items()})
    return LevelCalibration(level, p, groups, rows, fit, held, main["lone"], main["alpha_from"],
                            link, kinds, tuple(problems))


def fit_level(s: CalibrateSettings, rows: list[dict], p: int, kind: str = ALL_REDUCE) -> dict:
    """One line for one level and kind (module text): ``fit`` and ``held`` (its held-out
    errors), ``lone`` and ``lone_held`` (relative residuals, α fitted), ``alpha_from``."""
    sizes = [r["size_bytes"] for r in rows]
    times = [r["time_s"] for r in rows]
    held = lone_held = fitting.heldout_error(sizes, times, p, s.holdout_every, kind=kind)
    fit = lone = held["fit"]
    alpha_from, alpha_s = "the lone fit (relative residuals)", None
    if s.sequence:  # as the world's link: α a small one's lone time, busbw under it
        for _ in range(3):  # α needs busbw for its bytes term and busbw α: they settle
            small = small_message_alpha(rows, fit.busbw_gbps, p, kind)
            if small is None:   # no size up to 64 KiB: the lone fit's intercept stays
                break
            held = held_alpha_fit(s, sizes, times, p, small["alpha_s"], lone, kind)
            fit, alpha_s = held["fit"], small["alpha_s"]
            alpha_from = f"{small['sizes']} lone sizes up to 64 KiB"
    # intervals over what a rerun reads, judged as the world's line: with α held, on the
    # sizes that take >= 2α (calibrate.judged)
    lone_held = finished(lone_held, rows, None)
    held = lone_held if alpha_s is None else finished(held, rows, alpha_s)
    return {"fit": held["fit"], "held": held, "lone": lone_held["fit"],
            "lone_held": lone_held, "alpha_from": alpha_from}


def _source(s: CalibrateSettings, level: str, p: int, groups: int, main: dict) -> str:
    """One line for a level link's ``source``."""
    where = WHERE[level].format(p=p, groups=groups) + f", {s.backend}"
    if s.emulate_hosts:
        where += f" on {s.emulate_hosts} emulated hosts"
    if s.link_gbit:
        where += f" at {s.link_gbit:g} Gbit/s"
    held = main["held"]
    text = (f"python -m calibrate per level on {socket.gethostname()}, "
            f"{datetime.now().isoformat(timespec='seconds')}: {level}, {where}, {s.dtype} "
            f"{s.min_bytes}..{s.max_bytes} B x{s.factor:g}, {s.warmup}+{s.iters} iters; α from "
            f"{main['alpha_from']}; on {held['judged_on']}: R²(log t)={held['r2_log']:.4f}")
    if held["heldout_bytes"]:
        text += f", held-out median err {held['median_rel_err']:.1%}"
    return text
