"""Simulate one configuration; optionally write its timeline as a Chrome trace and a Gantt PNG.

    python -m simddp simulate --strategy ddp --bucket-mb 25
    python -m simddp simulate --strategy no_sync --bucket-mb 25 --accum-steps 4
    python -m simddp simulate --strategy overlap --trace trace.json --plot gantt.png
    python -m simddp simulate --strategy bucketed --bucket-mb 10 --format json
    python -m simddp simulate --strategy fsdp --shard-unit-mb 50 --plot fsdp.png
    python -m simddp simulate --strategy ddp --comm-hook powersgd:2 --trace psgd.json
    python -m simddp simulate --strategy fsdp --precision bf16 --device h100

Prints the step time (per optimizer step), the exposed communication (step time no compute
covers), the number of collectives and the compute-only time. --trace FILE writes the Trace
Event Format (open it at https://ui.perfetto.dev): a compute track and a comm track.
--plot FILE draws both lanes, compute coloured by phase, with the exposed gaps hatched.
--bucket-mb is ignored by naive, flat, overlap, fsdp and zero2; --accum-steps defaults to 4
for no_sync and sync_each (the same K micro-steps, synced every time) and to 1 otherwise.
--comm-hook (fp16, bf16, powersgd:R) applies to ddp and bucketed; --shard-unit-mb to fsdp and
zero2. --precision bf16 is realrun's: with fsdp and zero2, FSDP2's
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), so the all-gathers move half the
bytes and each pays a cast of the shard (timed at the preset device's memory bandwidth, or a
measured profile's host copy rate); elsewhere autocast, which moves the same fp32 gradients.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

from simddp.cli.args import (add_beyond_ddp_args, add_contention_arg, add_host_args,
                             add_link_args, add_model_args, add_precision_arg, casts_of,
                             contention_choice, parse_hooks, parse_positive_floats,
                             resolve_host, resolve_link, resolve_model, resolve_world)
from simddp.predict.resolve import resolve
from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.io import write_atomic
from simddp.kinds import CollectiveKind
from simddp.planning.plans import plan
from simddp.report.levels import topology_text
from simddp.report.table import contention_line, fmt_mb, setup_line
from simddp.report.trace import trace_events
from simddp.planning.plans import Plan
from simddp.result import COMM, Result
from simddp.planning.grad_dtype import with_grad_dtype
from simddp.planning.registry import ALWAYS, BASELINE, ON_REQUEST, Name, help_lines, names
from simddp.planning.strategy import (DDP_DEFAULT_BUCKET_MB, MB, SHARDED, Strategy, UnknownStrategy,
                             make_strategy, with_precision)
from simddp.predict.sweep import DEFAULT_ACCUM_STEPS

HELP = "simulate one strategy; write a Chrome trace and a Gantt plot of the step"
# every strategy but the two-level ones (a sweep with --nodes shows those beside ddp)
CHOICES = names(offered=(ALWAYS, ON_REQUEST, BASELINE))


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("simulate")
    g.add_argument("--strategy", default=Name.DDP, metavar="S",
                   help=f"{', '.join(CHOICES)} (default %(default)s)")
    g.add_argument("--bucket-mb", default=f"{DDP_DEFAULT_BUCKET_MB:g}", metavar="MB",
                   help="bucket cap in MB (2^20 bytes), as torch's bucket_cap_mb "
                        "(default %(default)s)")
    g.add_argument("--accum-steps", type=int, default=None, metavar="K",
                   help=f"micro-steps per optimizer step (default {DEFAULT_ACCUM_STEPS} for "
                        "no_sync and sync_each, else 1)")
    g.add_argument("--trace", metavar="FILE", help="write a Chrome trace JSON (Perfetto)")
    g.add_argument("--plot", metavar="FILE", help="write a Gantt chart of the two lanes "
                                                  "(.png, .svg, .pdf or .jpg, by the name)")
    g.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people, json (one document on stdout) for scripts")
    add_precision_arg(g)
    add_beyond_ddp_args(p, one_hook=True)
    add_model_args(p)
    add_link_args(p)
    add_host_args(p)
    add_contention_arg(p)
    p.epilog = help_lines(CHOICES)


# What --plot can write, by the name's suffix: matplotlib needs no extra package for these
# (JPEG goes through Pillow, a dependency of matplotlib).
PLOT_FORMATS = {"png": "png", "svg": "svg", "pdf": "pdf", "jpg": "jpeg", "jpeg": "jpeg"}


def _check_output(path: str | None, flag: str) -> None:
    if path is not None and Path(path).is_dir():
        raise InputError(f"{flag}: {path!r} is a directory; give a file name")


def _plot_format(path: str) -> str:
    """The image format ``path``'s suffix names; InputError for any other suffix, so a .jpg
    never holds PNG bytes."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise InputError(f"--plot {path}: {'.' + suffix if suffix else 'no suffix'} is not an "
                         "image type simulate writes; end the name in .png, .svg, .pdf or .jpg")
    return PLOT_FORMATS[suffix]


def _figure_bytes(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=120)  # 120 dpi, as simddp.report.sweep_plot.figure_png
    return buf.getvalue()


def _strategy(args: argparse.Namespace) -> Strategy:
    """The one configuration the flags name, every flag checked."""
    mbs = parse_positive_floats(args.bucket_mb, "--bucket-mb")
    if len(mbs) != 1:
        raise InputError(f"--bucket-mb: {args.bucket_mb!r} is a list; simulate takes one size "
                         "(use python -m simddp sweep for several)")
    if not math.isfinite(mbs[0] * MB):
        raise InputError(f"--bucket-mb: {args.bucket_mb!r} is too large (MB, e.g. 25)")
    hooks = parse_hooks(args.comm_hook)
    if len(hooks) > 1:
        raise InputError(f"--comm-hook: {args.comm_hook!r} is a list; simulate takes one hook "
                         "(use python -m simddp sweep for several)")
    try:
        strategy = make_strategy(args.strategy, mbs[0], comm_hook=hooks[0] if hooks else None,
                                 shard_unit_mb=args.shard_unit_mb)
    except UnknownStrategy:
        raise InputError(f"--strategy: unknown {args.strategy!r}; "
                         f"choose from {', '.join(CHOICES)}") from None
    if args.shard_unit_mb is not None and strategy.reshard_after_forward is None:
        raise InputError(f"--shard-unit-mb: applies to {' and '.join(SHARDED)}, "
                         f"not {args.strategy}")
    accum = args.accum_steps
    if accum is None:
        accum = DEFAULT_ACCUM_STEPS if strategy.accumulates else 1
    return replace(strategy, accum_steps=accum)


def _with_precision(strategy: Strategy, args: argparse.Namespace, host) -> tuple[Strategy, str]:
    """``strategy`` at ``--precision`` and ``--grad-dtype``, its casts timed as :func:`simddp.planning.sharding.cast_rate`
    says; and a note on the table's first line ("" where nothing changes)."""
    mixed = with_grad_dtype(with_precision(strategy, args.precision), args.grad_dtype)
    reduced = mixed.grad_dtype or "fp32"
    if mixed.param_dtype is None:
        return mixed, "" if mixed.grad_dtype is None else f"; gradients reduced in {reduced}"
    gbps, source = casts_of(args, host)
    note = (f"; {mixed.param_dtype} all-gathers, {reduced} reduce-scatters (FSDP2 "
            f"MixedPrecisionPolicy), casts {'at ' if gbps else ''}{source}")
    return replace(mixed, cast_gbps=gbps), note


def run(args: argparse.Namespace) -> int:
    strategy = _strategy(args)
    _check_output(args.trace, "--trace")
    _check_output(args.plot, "--plot")
    plot_format = None if args.plot is None else _plot_format(args.plot)
    profile = resolve_model(args)
    topology = resolve_world(args)
    link_file = resolve_link(args)
    host = resolve_host(args)
    strategy, precision_note = _with_precision(strategy, args, host)
    inputs = resolve(profile, link_file, args.world_size, host=host, topology=topology,
                     contention=contention_choice(args.contention))
    contention = inputs.contention

    p = plan(profile, strategy)
    result = simulate(p, inputs, record=True)
    comm_s = sum(s.duration_s for s in result.spans if s.lane == COMM)
    n_bytes = sum(c.nbytes for c in p.collectives)
    wire_bytes = sum(sum(c.calls) for c in p.collectives)

    outputs: dict[str, bytes | str] = {}  # rendered before any is written
    if args.trace:
        outputs[args.trace] = json.dumps(trace_events(result)) + "\n"
    if args.plot:
        from simddp.report.sweep_plot import gantt_figure
        outputs[args.plot] = _figure_bytes(gantt_figure(result), plot_format)
    for path, payload in outputs.items():
        write_atomic(path, payload)
    if outputs:
        print(f"wrote {', '.join(outputs)}", file=sys.stderr)

    bucketed = strategy.granularity == "bucket"
    if args.format == "json":
        print(json.dumps({
            "strategy": result.strategy,
            "bucket_mb": round(result.bucket_mb, 6) if bucketed else None,
            "accum_steps": result.accum_steps, "step_ms": result.step_s * 1e3,
            "exposed_comm_ms": result.exposed_comm_s * 1e3, "collectives": result.collectives,
            "compute_ms": result.compute_s * 1e3, "comm_ms": comm_s * 1e3,
            "allreduce_bytes": n_bytes, "wire_bytes": wire_bytes,
            "kinds": sorted({c.kind for c in p.collectives}), "model": result.model,
            "precision": args.precision, "param_dtype": strategy.param_dtype,
            "grad_dtype": strategy.grad_dtype or "fp32",
            "cast_gbps": strategy.cast_gbps,
            "contention": {"compute": contention.compute, "comm": contention.comm,
                           "source": contention.source or None},
            "link": result.link,
            "world_size": result.world_size}, indent=1))
        return 0
    print(setup_line(profile, link_file, args.world_size) + topology_text(topology))
    print(contention_line(contention))
    print()
    _print_table(result, p, comm_s, n_bytes, wire_bytes, precision_note)
    return 0


def _print_table(result: Result, p: Plan, comm_s: float, n_bytes: int, wire_bytes: int,
                 note: str = "") -> None:
    """The configuration in words, then step, compute, exposed comm and collectives."""
    strategy, accum = p.strategy, p.strategy.accum_steps
    bucketed = strategy.granularity == "bucket"
    per = "per optimizer step" if accum > 1 else "per step"
    what = strategy.name + (f", bucket_cap_mb {fmt_mb(result.bucket_mb)}" if bucketed else "")
    if p.units:
        what += (f", {len(p.units)} units (fully_shard, reshard_after_forward="
                 f"{strategy.reshard_after_forward})")
    if strategy.first_bucket_bytes and strategy.first_bucket_bytes != strategy.bucket_bytes:
        what += f" (first bucket {fmt_mb(strategy.first_bucket_bytes / 2**20)} MB)"
    if accum > 1:
        what += f", {accum} micro-steps"
    what += note
    hidden_s = max(comm_s - result.exposed_comm_s, 0.0)
    rows = [
        ("step", f"{result.step_s * 1e3:.2f} ms", per),
        ("compute only", f"{result.compute_s * 1e3:.2f} ms",
         "forward + backward + optimizer, no sync"),
        ("exposed comm", f"{result.exposed_comm_s * 1e3:.2f} ms",
         f"{100 * result.exposed_comm_s / max(result.step_s, 1e-300):.1f}% of the step: "
         "compute waits for comm"),
        ("collectives", str(result.collectives),
         f"{_moved(p, n_bytes, wire_bytes)}; link busy {comm_s * 1e3:.2f} ms, "
         f"{hidden_s * 1e3:.2f} ms of it hidden under compute"),
    ]
    print(what)
    for key, value, note in rows:
        print(f"  {key:<13} {value:>10}  {note}")


def _moved(p, n_bytes: int, wire_bytes: int) -> str:
    """'490.7 MiB all-reduced', '… gathered or reduce-scattered', '… (8.0 MiB on the wire)'."""
    verb = "all-reduced" if all(c.kind == CollectiveKind.ALL_REDUCE for c in p.collectives) else \
        "all-gathered or reduce-scattered"
    text = f"{n_bytes / 2**20:.1f} MiB {verb}"
    if wire_bytes != n_bytes:
        text += f" ({wire_bytes / 2**20:.1f} MiB on the wire)"
    return text
