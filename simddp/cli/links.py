"""List the link presets: α, bus bandwidth, backend, and where the numbers come from.

    python -m simddp links
    python -m simddp links --world-size 8 --size-mb 100

One row per preset (the default, eth-100g, is starred): α in µs, busbw in GB/s (1e9 B/s, as
nccl-tests prints it), the backend, the time of one all-reduce of --size-mb MB (default 25,
torch's bucket_cap_mb) among --world-size ranks by the ring law
``α + 2(p−1)/p · n / busbw``, and the source. docs/LINKS.md has the same table; a link
calibrated on your own cluster (python -m calibrate) beats every preset.
"""
from __future__ import annotations

import argparse

from simddp.cli.args import parse_positive_floats
from simddp.errors import InputError
from simddp.presets import DEFAULT_LINK, LINKS
from simddp.report.table import render_table
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB, MB

HELP = "list link presets (α, busbw, backend, source)"


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    rows = [[name + (" *" if name == DEFAULT_LINK else ""), f"{link.alpha_s * 1e6:g}",
             f"{link.busbw_gbps:g}", link.backend,
             f"{link.allreduce_s(n_bytes, args.world_size) * 1e3:.2f}", link.source]
            for name, link in LINKS.items()]
    print(render_table(["link", "α µs", "busbw GB/s", "backend",
                        f"{sizes[0]:g} MB ×{args.world_size} ms", "source"], rows,
                       title="link presets (* = default); all-reduce time "
                             "t = α + 2(p−1)/p · n / busbw"))
    return 0
