"""A link file from nccl-tests or rccl-tests logs, without a GPU: ``python -m calibrate
--from-nccl-tests``.

    python -m calibrate --from-nccl-tests all_reduce.log --out cal
    python -m calibrate --from-nccl-tests all_reduce.log reduce_scatter.log all_gather.log \\
        --out cal --name h100-node7
    python -m calibrate --from-nccl-tests pasted.txt --ranks 16 --nodes 2 --out cal
    python -m simddp collectives --link cal/link.json --measured all_reduce.log

Each table of each log (simddp/ingest/nccl_tests.py reads them: all_reduce_perf,
reduce_scatter_perf, all_gather_perf, alltoall_perf; a file may hold several) becomes one
measured curve of link.json (docs/FORMATS.md): its sizes and out-of-place times, its ranks and
nodes, and NCCL's algorithm where the log pins one (``NCCL_ALGO=Ring`` in it). Where two tables
answer for the same kind at the same ranks and nodes, the one with the most sizes is used
(the later on a tie), and the output says which. simddp charges a kind by its curve wherever
one exists.

The link's own α and busbw — what the closed form and a kind without a curve read — are the
least-squares line (on relative error) through the all-reduce curve over DDP's bucket range,
1–100 MB (simddp.cost.fitted); without an all-reduce log, through the first table's kind.
That line's busbw is not a figure the log prints (it can exceed every row's busbw): what the
command leads with is the curve's own peak busbw, the line's α and busbw beside it with the
range they hold for. Nothing here imports torch.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from simddp.errors import InputError
from simddp.inputs.io import link_to_json, save_json
from simddp.cost import GB, Curve, kind_factor
from simddp.cost.fitted import BUCKET_RANGE_BYTES, fit_line
from simddp.inputs.link import Link
from simddp.ingest.nccl_tests import NcclTestsLog, choose, read_tables
from simddp.report.outdir import check_out_dir

_ALGO = re.compile(r"NCCL_ALGO\s*=\s*([A-Za-z]+)")


def log_curve(log: NcclTestsLog, algorithm: str | None = None) -> Curve:
    """The log's rows as a :class:`simddp.cost.Curve` (out-of-place unless the log says)."""
    if len(log.rows) < 2:
        raise InputError(f"{log.source}: one size only; a curve needs at least 2")
    return Curve(log.kind, log.ranks, tuple(r.bytes for r in log.rows),
                 tuple(float(f"{r.time_us!r}e-6") for r in log.rows), log.nodes, algorithm,
                 f"nccl-tests {log.kind}_perf, {log.ranks} ranks on {log.nodes} node(s), "
                 f"{log.placement} time: {log.source}")


def fit_alpha_busbw(link: Link, kind: str, world_size: int,
                    lo_bytes: float = BUCKET_RANGE_BYTES[0],
                    hi_bytes: float = BUCKET_RANGE_BYTES[1]) -> tuple[float, float]:
    """(α s, busbw GB/s) of the line through ``link``'s ``kind`` law over [lo, hi] bytes:
    least squares on relative error at log-spaced sizes, α ≥ 0 (simddp.cost.fitted.fit_line)."""
    alpha_s, beta = fit_line(link, world_size, lo_bytes, hi_bytes, kind)
    return alpha_s, kind_factor(kind, world_size) / (beta * GB)


def tables_of(paths, ranks: int | None = None, nodes: int | None = None
              ) -> tuple[list[tuple[NcclTestsLog, str | None]], list[str]]:
    """One (table, NCCL algorithm) per kind, ranks and nodes across ``paths``, and the notes
    (what each table's reading skipped or inferred, and which table of several was used)."""
    found: dict[tuple, list[tuple[NcclTestsLog, str | None]]] = {}
    for path in paths:
        text = Path(path).read_text(encoding="utf-8", errors="replace") \
            if Path(path).is_file() else ""
        algos = {m.group(1).lower() for m in _ALGO.finditer(text)}
        algorithm = algos.pop() if len(algos) == 1 else None
        for table in read_tables(path, ranks=ranks, nodes=nodes):
            key = (table.kind, table.ranks, table.nodes, algorithm)
            found.setdefault(key, []).append((table, algorithm))
    out, notes = [], []
    for (kind, n, _, _), candidates in found.items():
        table = choose([c[0] for c in candidates], kind, str(candidates[0][0].source), n)
        out.append((table, candidates[0][1]))
        notes += [f"{table.source}: {note}" for note in table.notes]
    return out, notes


def link_from_logs(paths, name: str | None = None, ranks: int | None = None,
                   nodes: int | None = None) -> Link:
    """One link from the logs at ``paths``: a curve each table, α/busbw fitted (module
    text); ``ranks``/``nodes``: the world, for logs that do not say it."""
    return link_and_notes(paths, name, ranks, nodes)[0]


def link_and_notes(paths, name: str | None = None, ranks: int | None = None,
                   nodes: int | None = None) -> tuple[Link, list[str]]:
    """:func:`link_from_logs`, with what reading the logs noted."""
    if not paths:
        raise InputError("--from-nccl-tests: give at least one log")
    tables, notes = tables_of(paths, ranks, nodes)
    curves = [log_curve(table, algorithm) for table, algorithm in tables]
    world = {c.ranks for c in curves}
    first = next((c for c in curves if c.kind == "all_reduce"), curves[0])
    # a placeholder line so the curves can be asked (a Link needs α and busbw); replaced below
    draft = Link(name or f"nccl-tests-{Path(paths[0]).stem}", 0.0, 1.0, backend="nccl",
                 curves=tuple(curves))
    alpha_s, busbw_gbps = fit_alpha_busbw(draft, first.kind, first.ranks)
    lo, hi = BUCKET_RANGE_BYTES
    kinds = ", ".join(f"{c.kind} ({c.ranks} ranks, {c.nodes} node(s), {c.bytes[0]}–"
                      f"{c.bytes[-1]} B)" for c in curves)
    source = (f"nccl-tests logs ({', '.join(str(p) for p in paths)}): curves of {kinds}. "
              f"alpha_s/busbw_gbps: least-squares fit (relative error) of the {first.kind} "
              f"curve over {lo / 1e6:g}–{hi / 1e6:g} MB (fit_range_bytes "
              f"[{lo:.0f}, {hi:.0f}]), good for that range only; outside it the curves answer")
    link = replace(draft, alpha_s=alpha_s, busbw_gbps=busbw_gbps, source=source,
                   world_size=world.pop() if len(world) == 1 else None)
    return link, notes


def peak_busbw_gbps(curve: Curve) -> float:
    """The highest busbw a curve's own rows give (algbw · the kind's bus factor)."""
    return max(n / s / GB * kind_factor(curve.kind, curve.ranks)
               for n, s in zip(curve.bytes, curve.seconds))


def run_from_args(args) -> int:
    """The calibrate CLI's ``--from-nccl-tests`` branch: write ``--out``/link.json, print it."""
    link, notes = link_and_notes(args.from_nccl_tests, args.name, args.ranks, args.nodes)
    out = check_out_dir(args.out, files=("link.json",), force=args.force)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "link.json"
    save_json(path, link_to_json(link))
    lo, hi = BUCKET_RANGE_BYTES
    for c in link.curves:
        print(f"{c.kind}: {len(c.bytes)} sizes {c.bytes[0]}–{c.bytes[-1]} B, {c.ranks} ranks "
              f"on {c.nodes} node(s), algorithm {c.algorithm or 'NCCL default'}; peak busbw "
              f"{peak_busbw_gbps(c):.1f} GB/s")
    print(f"the α–β line over {lo / 1e6:g}–{hi / 1e6:g} MB (the closed form's): α "
          f"{link.alpha_s * 1e6:.1f} µs, busbw {link.busbw_gbps:.1f} GB/s; the curves answer "
          "at every size")
    first = link.curves[0]
    if first.bytes[0] > lo or first.bytes[-1] < hi:
        notes = [*notes, f"the log's {first.kind} sizes ({first.bytes[0]}–{first.bytes[-1]} B) "
                 f"do not span {lo / 1e6:g}–{hi / 1e6:g} MB: that line is extrapolated there"]
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {path}")
    return 0
