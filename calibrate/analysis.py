"""Turn one world's raw all-reduce timings into fits, the sequence α, contention and a Link.

Called by ``python -m calibrate`` (calibrate/cli.py) after :func:`calibrate.cli.measure`, and
in process by ``realrun validate``.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import socket
from datetime import datetime


def analyse(a: argparse.Namespace, world_size: int, ranks: list[dict]) -> dict:
    """Summaries, fits (held-out scored), contention factors and the Link for one world."""
    from calibrate import fit as fitting
    from calibrate.bench import summarize
    from calibrate.contention import combine
    rows = summarize(ranks)
    sizes = [r["size_bytes"] for r in rows]
    times = [r["time_s"] for r in rows]
    held = fitting.heldout_error(sizes, times, world_size, a.holdout_every, a.piecewise)
    fit = lone = held["fit"]
    seq = None
    if "sequence" in ranks[0]:
        # α from the sequence step (async: Link.alpha_s; blocking: Link.blocking_alpha_s);
        # busbw refitted under that α with plain least squares, which the large sizes decide
        # (relative residuals would bend busbw to the erratic small sizes). α needs busbw for
        # its bandwidth terms and busbw needs α: a few rounds settle both (they barely couple).
        from calibrate.sequence import combine as combine_sequence
        for _ in range(3):
            seq = combine_sequence([r["sequence"] for r in ranks], a.sequence_sizes,
                                   fit.busbw_gbps, world_size)
            held = fitting.heldout_error(sizes, times, world_size, a.holdout_every,
                                         weights="absolute", fixed_alpha_s=seq["alpha_s"])
            fit = held["fit"]
        seq["lone_alpha_s"] = lone.alpha_s
    alternative = None  # what --piecewise would give, shown when one line fits badly
    if (not a.piecewise and seq is None and fitting.suggest_piecewise(fit)
            and fit.n_points >= 2 * fitting.MIN_POINTS):
        kept = [i for i, h in enumerate(held["mask"]) if not h]
        alternative = fitting.fit_piecewise([sizes[i] for i in kept], [times[i] for i in kept],
                                            world_size)
    cont = combine([r["contention"] for r in ranks]) if "contention" in ranks[0] else None
    oversubscribed = _oversubscribed(a, world_size)
    link = fitting.to_link(fit, _link_name(a, world_size), world_size, a.backend,
                           cont["compute_slowdown"] if cont else 1.0,
                           cont["comm_slowdown"] if cont else 1.0,
                           _source(a, world_size, fit, held, oversubscribed, seq))
    if seq is not None:
        link = dataclasses.replace(link, blocking_alpha_s=seq["blocking_alpha_s"])
    return {"world_size": world_size, "dtype": a.dtype, "rows": rows, "fit": fit,
            "sequence": seq,
            "heldout_mask": held["mask"], "heldout": held, "alternative": alternative,
            "contention": cont, "oversubscribed": oversubscribed, "link": link}


def _link_name(a: argparse.Namespace, world_size: int) -> str:
    if a.name:
        return f"{a.name}-p{world_size}" if len(a.world_sizes) > 1 else a.name
    if a.link_gbit:
        return f"emulated-{a.link_gbit:g}gbit-p{world_size}"
    return f"{socket.gethostname()}-{a.backend}-p{world_size}"


def _source(a: argparse.Namespace, world_size: int, fit, held: dict, oversubscribed: str,
            seq: dict | None) -> str:
    """One line for the link's ``source``: where, when, what was swept, how well it fit."""
    where = f"{a.backend}, {world_size} ranks"
    if a.emulate_hosts:
        where += f" on {a.emulate_hosts} emulated hosts"
    if a.link_gbit:
        where += f" at {a.link_gbit:g} Gbit/s"
    n_fit = len(held["mask"]) - sum(held["mask"])
    text = (f"python -m calibrate on {socket.gethostname()}, "
            f"{datetime.now().isoformat(timespec='seconds')}: {where}, {a.dtype} "
            f"{a.min_bytes}..{a.max_bytes} B x{a.factor:g} ({len(held['mask'])} sizes), "
            f"{a.warmup}+{a.iters} iters; {'piecewise' if a.piecewise else 'α-β'} fit on "
            f"{n_fit} sizes, R²(log t)={fit.r2:.4f}")
    if held["heldout_bytes"]:
        text += f", held-out median err {held['median_rel_err']:.1%}"
    if seq is not None:
        text += (f"; α from {seq['count']} back-to-back all-reduces ({seq['bytes']} B), "
                 f"lone α {seq['lone_alpha_s'] * 1e6:.0f} µs")
    return text + (" (CPU oversubscribed)" if oversubscribed else "")


def _oversubscribed(a: argparse.Namespace, world_size: int) -> str:
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world_size)) if a.torchrun else world_size
    cores = os.cpu_count() or 1
    if a.backend == "gloo" and local * a.threads_per_rank > cores:
        return (f"{local} ranks x {a.threads_per_rank} thread(s) on {cores} cores: the CPU is "
                "oversubscribed, so times include waiting for a core; this α and busbw "
                "describe this box's scheduling as much as the link")
    return ""
