"""List the link presets: α, bus bandwidth, backend, and where the numbers come from.

    python -m simddp links
    python -m simddp links --world-size 8 --size-mb 100
    python -m simddp links ib-hdr              # one preset: its whole source and citation

One row per preset (the default, eth-100g, is starred): α in µs, busbw in GB/s (1e9 B/s, as
nccl-tests prints it), the backend, the time of one all-reduce of --size-mb MB (default 25,
torch's bucket_cap_mb) among --world-size ranks by the ring law
``α + 2(p−1)/p · n / busbw``, and the start of its source (``links NAME`` prints it whole).
docs/LINKS.md has the same table; a link calibrated on your own cluster (python -m calibrate)
beats every preset.
"""
from __future__ import annotations

import argparse
import textwrap

from simddp.cli.args import parse_positive_floats
from simddp.errors import InputError
from simddp.presets import DEFAULT_LINK, LINKS, get_link
from simddp.report.table import render_table
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB, MB

HELP = "list link presets (α, busbw, backend, source)"
LINE_WIDTH = 160   # a table row; the whole source is one `links NAME` away


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="one preset: its numbers and its whole source")
    p.add_argument("--world-size", type=int, default=2,
                   help="ranks for the example all-reduce time (default %(default)s)")
    p.add_argument("--size-mb", default=f"{DDP_DEFAULT_BUCKET_MB:g}", metavar="MB",
                   help="message size for the example all-reduce time, MB = 2^20 bytes "
                        "(default %(default)s)")


def run(args: argparse.Namespace) -> int:
    if args.world_size < 2:
        raise InputError(f"--world-size must be an integer >= 2, got {args.world_size}")
    sizes = parse_positive_floats(args.size_mb, "--size-mb")
    if len(sizes) != 1:
        raise InputError(f"--size-mb: give one size, got {args.size_mb!r}")
    n_bytes = sizes[0] * MB
    if args.name is not None:
        print(_one(args.name, n_bytes, sizes[0], args.world_size))
        return 0
    rows = [[name + (" *" if name == DEFAULT_LINK else ""), f"{link.alpha_s * 1e6:g}",
             f"{link.busbw_gbps:g}", link.backend,
             f"{link.allreduce_s(n_bytes, args.world_size) * 1e3:.2f}", link.source]
            for name, link in LINKS.items()]
    head = ["link", "α µs", "busbw GB/s", "backend", f"{sizes[0]:g} MB ×{args.world_size} ms"]
    room = LINE_WIDTH - len(render_table(head, [r[:-1] for r in rows]).splitlines()[-1]) - 2
    for row in rows:
        row[-1] = _start(row[-1], room)
    print(render_table(head + ["source (links NAME: all of it)"], rows,
                       title="link presets (* = default); all-reduce time "
                             "t = α + 2(p−1)/p · n / busbw"))
    return 0


def _start(source: str, width: int) -> str:
    """The source's first clause, cut to ``width`` characters."""
    first = source.split(": ")[0].split("; ")[0]
    if first.count("(") > first.count(")"):   # split inside a bracket: end before it
        first = first[:first.rfind(" (")]
    if len(first) <= width:
        return first
    cut = first.rfind(" (", 0, width)   # not inside an unclosed bracket
    return first[:cut] if cut > 0 else first[:width - 1].rstrip() + "…"


def _one(name: str, n_bytes: float, size_mb: float, world_size: int) -> str:
    """One preset: its numbers, then its whole source, wrapped."""
    link = get_link(name)
    lines = [f"{name}: α {link.alpha_s * 1e6:g} µs, busbw {link.busbw_gbps:g} GB/s, "
             f"{link.backend or 'any backend'}; {size_mb:g} MB among {world_size} ranks: "
             f"{link.allreduce_s(n_bytes, world_size) * 1e3:.2f} ms"]
    if link.curves:
        lines.append("measured curves: " + ", ".join(
            f"{c.kind} at {c.ranks} ranks ({c.bytes[0]}–{c.bytes[-1]} B)" for c in link.curves))
    return "\n".join(lines + ["source:"] + textwrap.wrap(link.source, 100,
                                                        initial_indent="  ",
                                                        subsequent_indent="  "))
