"""What nccl-tests would print on a link: size, count, time, algbw, busbw, by simddp's law.

    python -m simddp collectives --link nvlink-h100-nvls --world-size 8
    python -m simddp collectives --link cal/link.json --world-size 2 --sizes 8,1K,1M,64M
    python -m simddp collectives --link ib-hdr --nodes 2 --gpus-per-node 8 --intra-link nvlink-h100
    python -m simddp collectives --link nvlink-h100 --world-size 8 --measured all_reduce_perf.log
    python -m simddp collectives --link nvlink-h100 --kind all_gather --format json

One row per size, as ``all_reduce_perf -b 8 -e 8G -f 2`` prints them: size in bytes, count
(fp32 elements; all_gather and reduce_scatter: per rank, as nccl-tests counts), time in µs,
``algbw = size / time`` and ``busbw = algbw · f(p)`` in GB/s (1e9 B/s; f = 2(p−1)/p for
all_reduce, (p−1)/p for the others). The time is the one simddp charges a collective issued
back to back (simddp/cost/): the link's measured curve where it has one, else its α–β.
``--measured LOG`` reads an nccl-tests or rccl-tests log (simddp/ingest/nccl_tests.py) and adds
its out-of-place time and the error at each of its sizes: a preset checked against a cluster
in one command. The world size is, unless given, the log's, else the link file's own, else 2.
"""
from __future__ import annotations

import argparse
import json
import re

from simddp.cli.args import add_link_args, resolve_link, resolve_world
from simddp.errors import InputError
from simddp.cost import ALGORITHMS, COLLECTIVE_KINDS, GB, collective_s, kind_factor
from simddp.cost import topology_collective_s
from simddp.cost.single import pick_curves

HELP = "the table nccl-tests would print on a link (size, time, algbw, busbw)"
DEFAULT_SIZES = tuple(8 << i for i in range(31))        # 8 B … 8 GiB, ×2 (nccl-tests -f 2)
_SIZE = re.compile(r"^(\d+)([KMG]?)$")
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_ELEMENT_BYTES = 4   # float, nccl-tests' default type


def parse_sizes(text: str) -> list[int]:
    """``8,1K,1M,8G`` -> bytes (K/M/G = 2^10/2^20/2^30, as nccl-tests reads -b/-e)::

        >>> parse_sizes("8,1K,64M")
        [8, 1024, 67108864]
    """
    out = []
    for item in text.split(","):
        m = _SIZE.match(item.strip().upper())
        if not m or int(m.group(1)) == 0:
            raise InputError(f"--sizes: {item.strip()!r} is not a size; expected bytes > 0 "
                             "with an optional K, M or G suffix (2^10, 2^20, 2^30), e.g. "
                             "8,1K,1M,8G")
        out.append(int(m.group(1)) * _UNIT[m.group(2)])
    return sorted(set(out))


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_link_args(p)
    p.add_argument("--kind", default=None,
                   help=f"{', '.join(COLLECTIVE_KINDS)} (default all_reduce, or the "
                        "--measured log's)")
    p.add_argument("--sizes", default=None, metavar="LIST",
                   help="sizes in bytes, K/M/G = 2^10/2^20/2^30 (default 8 B to 8 GiB ×2, "
                        "or the --measured log's)")
    p.add_argument("--algorithm", default="ring", choices=ALGORITHMS,
                   help="on --nodes × --gpus-per-node: one ring over every rank (NCCL's "
                        "default) or hierarchical (default %(default)s)")
    p.add_argument("--measured", default=None, metavar="LOG",
                   help="an nccl-tests or rccl-tests log (all_reduce_perf, ...): its time and "
                        "the error at each of its sizes (a log of several tables: the one of "
                        "--kind and --world-size)")
    p.add_argument("--format", choices=("table", "json"), default="table")


def _measured(args: argparse.Namespace):
    """The --measured log's table of --kind and --world-size (where it has several); a log
    that cannot tell its rank count takes --world-size as it."""
    from simddp.ingest.nccl_tests import choose, read_tables

    ranks = args.world_size if args.nodes is None else None
    try:
        tables = read_tables(args.measured)
    except InputError as e:
        if ranks is None or "rank count" not in str(e):
            raise
        tables = read_tables(args.measured, ranks=ranks)
    return choose(tables, args.kind, args.measured, ranks)


def collectives(args: argparse.Namespace) -> dict:
    """The table as data (what ``--format json`` prints)."""
    if args.kind is not None and args.kind not in COLLECTIVE_KINDS:
        raise InputError(f"--kind {args.kind!r}: expected one of {', '.join(COLLECTIVE_KINDS)}")
    log = _measured(args) if args.measured else None
    kind = args.kind or (log.kind if log else "all_reduce")
    if log is not None and args.world_size is None and args.nodes is None:
        args.world_size = log.ranks
    topology = resolve_world(args)
    link = resolve_link(args).link
    p = args.world_size
    measured = {r.bytes: r.time_us for r in log.rows} if log else {}
    sizes = (parse_sizes(args.sizes) if args.sizes
             else sorted(measured) if measured else list(DEFAULT_SIZES))
    rows = []
    for n in sizes:
        if topology is None:
            t_s = collective_s(link, kind, n, p, nodes=getattr(log, "nodes", None))
        else:
            t_s = topology_collective_s(topology, link, kind, n, args.algorithm)
        algbw = n / t_s / GB
        row = {"bytes": n, "count": n // _ELEMENT_BYTES // (1 if kind == "all_reduce" else p),
               "time_us": t_s * 1e6, "algbw_gbps": algbw,
               "busbw_gbps": algbw * kind_factor(kind, p)}
        if n in measured:
            row["measured_time_us"] = measured[n]
            row["error_pct"] = (t_s * 1e6 - measured[n]) / measured[n] * 100
        rows.append(row)
    notes = (list(log.notes) if log else []) + _outside_curve(link, kind, p, sizes, log)
    return {"format": "simddp.collectives/1", "link": link.name, "kind": kind,
            "world_size": p, "nodes": topology.nodes if topology else None,
            "algorithm": args.algorithm if topology else None,
            "measured": args.measured, "rows": rows, "notes": notes}


def _outside_curve(link, kind: str, p: int, sizes: list[int], log) -> list[str]:
    """A note for the sizes the link's measured curve does not cover: those are extrapolated
    (the line through its two end points), which a user should know before trusting them."""
    curves = pick_curves(link, kind, p, getattr(log, "nodes", None))
    if not curves:
        return []
    low, high = min(c.bytes[0] for c in curves), max(c.bytes[-1] for c in curves)
    outside = [n for n in sizes if n < low or n > high]
    if not outside:
        return []
    return [f"{len(outside)} of {len(sizes)} sizes lie outside the measured "
            f"{_size(low)}–{_size(high)} and are extrapolated from its end points"]


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def render(out: dict) -> str:
    """nccl-tests' layout: '#'-prefixed header lines, one line a size."""
    kind, measured = out["kind"], out["measured"] is not None
    redop = "sum" if kind in ("all_reduce", "reduce_scatter") else "none"
    where = (f"{out['nodes']} nodes, {out['algorithm']}" if out["nodes"] else "one link")
    head = [f"# simddp collectives: {kind} on {out['link']}, {out['world_size']} ranks "
            f"({where}); times as simddp charges them (simddp/cost/)"]
    cols = "#       size         count      type   redop     time   algbw   busbw"
    units = "#        (B)    (elements)                        (us)  (GB/s)  (GB/s)"
    if measured:
        head.append(f"# measured: {out['measured']} (out-of-place time)")
    head += [f"# note: {note}" for note in out.get("notes", ())]
    if measured:
        cols += "  measured    error"
        units += "      (us)      (%)"
    lines = head + [cols, units]
    for r in out["rows"]:
        line = (f"{r['bytes']:12d}  {r['count']:12d}  {'float':>8}  {redop:>6}  "
                f"{r['time_us']:7.2f}  {r['algbw_gbps']:6.2f}  {r['busbw_gbps']:6.2f}")
        if "measured_time_us" in r:
            line += f"  {r['measured_time_us']:8.2f}  {r['error_pct']:+7.1f}"
        lines.append(line)
    errors = [abs(r["error_pct"]) for r in out["rows"] if "error_pct" in r]
    if errors:
        errors.sort()
        lines.append(f"# error over {len(errors)} sizes: median {errors[len(errors) // 2]:.1f} %, "
                     f"max {errors[-1]:.1f} %")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    out = collectives(args)
    print(json.dumps(out, indent=1) if args.format == "json" else render(out))
    return 0
