"""Predict every strategy at every bucket size and recommend a bucket_cap_mb.

    python -m simddp sweep                                     # documented defaults
    python -m simddp sweep --bucket-mb 1,10,100,1000
    python -m simddp sweep --model transformer-xl --link ib-hdr --world-size 16
    python -m simddp sweep --strategies ddp,no_sync --accum-steps 8 --format json
    python -m simddp sweep --model profile.json --link link.json --out out/sweep
    python -m simddp sweep --strategies ddp,fsdp,zero2 --comm-hook fp16,powersgd:2

Prints the setup, the contention the rows run under (--contention to change it) and the
prediction ranges' inputs, a table (strategy, bucket MB, collectives per step, step ms,
exposed communication ms, speedup vs naive), a second table for gradient accumulation
(no_sync vs sync_each, per optimizer step of K micro-steps), then the decision in four lines:
the bucket size for torch DDP, what is at stake, the call that sets it, and a faster path
where one exists. With sharded strategies (fsdp, zero2, hsdp) or --comm-hook rows, it also
says whether one of them beats plain DDP, and the model states per rank each holds.
--explain gives the reasoning instead: the runner-up, regret over the ranges, every
framework's call and the closed-form optimum.
--format json prints one JSON document and nothing else on stdout.
--out DIR writes sweep.csv, sweep.json (simddp.results/1 plus the rows) and sweep.png.
"""
from __future__ import annotations

import argparse
import json
import sys

from simddp.cli.args import (add_beyond_ddp_args, add_contention_arg, add_host_args,
                             add_link_args, add_model_args, add_precision_arg, casts_of,
                             contention_choice, parse_hooks, parse_names,
                             parse_positive_floats, resolve_cpu_note, resolve_host,
                             resolve_link, resolve_model, resolve_world)
from simddp.inputs.io import write_atomic
from simddp.planning.grad_dtype import with_grad_dtype
from simddp.planning.registry import ALWAYS, ON_REQUEST, TWO_LEVEL, help_lines, names
from simddp.planning.strategy import STRATEGIES, SWEEPABLE, with_precision
from simddp.predict.answer import SweepRequest, answer
from simddp.predict.resolve import resolve
from simddp.predict.sweep import (DEFAULT_ACCUM_STEPS, DEFAULT_BUCKET_MB, configurations,
                                  sweep_inputs)
from simddp.report.outdir import check_out_dir
from simddp.report.progress import Progress
from simddp.report.sweep_json import answer_json, out_files
from simddp.report.sweep_text import answer_text

HELP = "predict every strategy at every bucket size; recommend bucket_cap_mb"
# what --strategies lists: the strategies all sweeps, then those only asked for by name (the
# two-level ones are named where --nodes makes them one of all's)
LISTED = names(offered=(ALWAYS, ON_REQUEST))


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sweep")
    g.add_argument("--bucket-mb", default=",".join(f"{mb:g}" for mb in DEFAULT_BUCKET_MB),
                   metavar="LIST", help="bucket sizes in MB (2^20 bytes, like torch's "
                                        "bucket_cap_mb), comma-separated (default %(default)s)")
    g.add_argument("--strategies", default="all", metavar="LIST",
                   help=f"comma-separated from {', '.join(LISTED)}, or all "
                        f"(= {', '.join(STRATEGIES)}; default all)")
    g.add_argument("--accum-steps", type=int, default=DEFAULT_ACCUM_STEPS, metavar="K",
                   help="micro-steps per optimizer step for no_sync and its sync_each baseline "
                        "(default %(default)s)")
    g.add_argument("--explain", action="store_true",
                   help="the reasoning behind the recommendation (runner-up, regret over the "
                        "ranges, each framework's call, the closed form) instead of its summary")
    g.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people, json (one document on stdout) for scripts")
    g.add_argument("--out", metavar="DIR", help="also write sweep.csv, sweep.json, sweep.png here")
    g.add_argument("--force", action="store_true",
                   help="replace an earlier sweep's files in --out (default: move them "
                        "into --out/earlier-<time>/)")
    add_precision_arg(g)
    add_beyond_ddp_args(p)
    add_model_args(p)
    add_link_args(p)
    add_host_args(p)
    add_contention_arg(p)
    p.epilog = help_lines(SWEEPABLE)


def run(args: argparse.Namespace) -> int:
    # Resolve: every flag checked and every input resolved before anything is simulated.
    bucket_mbs = parse_positive_floats(args.bucket_mb, "--bucket-mb")
    topology = resolve_world(args)
    hooks = parse_hooks(args.comm_hook)
    configs = configurations(_strategies(args.strategies, topology), bucket_mbs,
                             args.accum_steps, hooks, args.shard_unit_mb)
    profile, link_file, host = resolve_model(args), resolve_link(args), resolve_host(args)
    inputs = resolve(profile, link_file, args.world_size, host=host, topology=topology,
                     contention=contention_choice(args.contention))
    cast_gbps, casts = casts_of(args, host)
    configs = [with_grad_dtype(with_precision(c, args.precision, cast_gbps), args.grad_dtype)
               for c in configs]
    out_dir = check_out_dir(args.out, files=("sweep.json", "sweep.csv", "sweep.png"),
                            force=args.force)  # last: it moves an earlier sweep aside
    # Sweep: spans are kept only for --out, where sweep.json holds every predicted timeline.
    with Progress("simulating", delay_s=1.0) as progress:
        results = sweep_inputs(inputs, configs, on_progress=progress.update,
                               record=out_dir is not None, ranges=True)
    # Recommend: one answer, which every output below renders.
    request = SweepRequest(args.accum_steps, tuple(h.name for h in hooks), args.shard_unit_mb,
                           args.precision, cast_gbps, casts, args.optimizer == "adam",
                           resolve_cpu_note(args))
    a = answer(inputs, results, request, link_file)
    # Render: everything in memory before anything is written (no partial output).
    if out_dir is not None:
        files = out_files(a)
        for name, payload in files.items():
            write_atomic(out_dir / name, payload)
        print(f"wrote {', '.join(str(out_dir / n) for n in files)}", file=sys.stderr)
    print(json.dumps(answer_json(a), indent=1) if args.format == "json" else answer_text(a, args.explain))
    return 0


def _strategies(text: str, topology) -> list[str]:
    """--strategies; "all" is every DDP strategy, and hierarchical on a two-level cluster."""
    if text.strip() != "all":
        return parse_names(text, SWEEPABLE, "--strategies")
    two_level = topology is not None and topology.two_level
    return list(names(offered=(ALWAYS, TWO_LEVEL) if two_level else ALWAYS))
