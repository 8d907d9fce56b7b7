"""Predict every configuration with simddp, run it for real, and compare: is the simulator right?

    python -m realrun validate                                     # defaults, ~2 min here
    python -m realrun validate --model mlp-8x1024 --bucket-mb 1,4,10,40 --strategies all
    python -m realrun validate --emulate-hosts 2 --link-gbit 2     # each rank its own host
    python -m realrun validate --link cal/link.json --format json  # skip calibration
    python -m realrun validate --model transformer-small --layers 8 --d-model 128 --d-ff 512 \\
        --heads 4 --vocab 1024 --batch 2 --seq 32 --bucket-mb 0.25,0.5,1,2,4 --out out/val
    python -m realrun validate --module examples/gpt2_tiny.py:build --bucket-mb 0.5,2,8
    python -m realrun validate --strategies ddp,fsdp,zero2 --bucket-mb 4    # torch FSDP2 too
    python -m realrun validate --strategies ddp --bucket-mb 4 --comm-hook fp16,powersgd:2
    python -m realrun validate --backend nccl --precision bf16 --module my_model.py:build
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 \\
        -m realrun validate --backend nccl --module my_model.py:build   # rank 0 prints, writes

Without --link it first calibrates the link on the same world (a short ``calibrate`` sweep,
in process), then profiles the model on every rank (``realrun profile``), simulates every
configuration (``simddp.sweep``), measures each (``realrun bench``: compute-only, naive, flat,
overlap, then bucketed and ddp per --bucket-mb) and compares them (``simddp.compare``).

Prints a short summary first — the verdict on simddp's recommendation (PROVEN, PROVEN
within 3 %, REFUTED or CANNOT TELL, with the margin it needed and the rows' spread it had to
clear), the errors, the recommended and the measured-best configuration, where the files
went — then the details: the inputs, a table (predicted ms, measured median and p95, error
%), its summary (median and max APE, Spearman ρ, predicted-best vs measured-best bucket and
the regret) and the recommendation as ``simddp sweep`` words it. ``--format json`` prints only
``{"rows": [...], "summary": {...}, "validate": {...}}``. --out DIR gets compare_scatter.png,
compare_buckets.png, compare_timeline.png, compare.{json,csv}, validate.json,
predicted.json, measured.json, link.json and profile.json.

Bad input: one line, exit 2. If the shared run fails, each configuration is rerun alone;
failures are named and the other rows kept (exit 1 if any failed).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from realrun.commands.common import (DEFAULT_MODEL, add_host_turns_arg, add_model_args,
                                     resolve_workload)
from realrun.comm_hooks import check_backend, check_warmup
from realrun.configs import BENCH_STRATEGIES, COMPUTE_BASES, DEFAULT_STRATEGIES
from realrun.launch.env import is_torchrun
from realrun.launch.world import STEP_TIMEOUT_S, add_world_args, world_from_args
from simddp.cli.args import add_beyond_ddp_args, parse_hooks, parse_positive_floats
from simddp.errors import InputError, error_line
from simddp.inputs.io import load_link_file
from simddp.report.outdir import check_out_dir

HELP = "predict, run for real and compare every strategy and bucket size"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    g = p.add_argument_group("what to validate")
    g.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                   help="comma list of naive, flat, overlap, bucketed, ddp, fsdp, zero2 "
                        "(torch FSDP2), or all (default %(default)s)")
    g.add_argument("--bucket-mb", default="1,4,10,40",
                   help="bucket caps in MiB for bucketed and ddp (default %(default)s)")
    g.add_argument("--steps", type=int, default=30, help="timed steps per config (default %(default)s)")
    g.add_argument("--warmup", type=int, default=5, help="untimed steps per config (default %(default)s)")
    g.add_argument("--chunk", type=int, default=5,
                   help="steps per config per round-robin turn (default %(default)s)")
    g.add_argument("--profile-repeats", type=int, default=15,
                   help="profiled steps; per-layer medians (default %(default)s)")
    add_host_turns_arg(g)
    g.add_argument("--timeline-steps", type=int, default=5,
                   help="steps clocked span by span for the timeline plot; the median one "
                        "is drawn (default %(default)s)")
    add_beyond_ddp_args(p)
    # one timeout for every phase (calibration and profile too): a step's, a minute
    add_world_args(p, timeout_s=STEP_TIMEOUT_S)
    w = p.add_argument_group("link and prediction")
    w.add_argument("--link", metavar="FILE", default=None,
                   help="a simddp link JSON (e.g. from python -m calibrate); skips calibration")
    w.add_argument("--lone-alpha", action="store_true",
                   help="calibrate α from lone all-reduces (the sweep's intercept) instead of "
                        "this model's all-reduces issued back to back, as a step issues them")
    w.add_argument("--piecewise", action="store_true",
                   help="calibrate two α–β lines joined at a fitted breakpoint (default one)")
    w.add_argument("--calibrate-iters", type=int, default=20,
                   help="timed all-reduces per size when calibrating (default %(default)s)")
    w.add_argument("--free-copies", action="store_true",
                   help="do not charge the DDP implementations' host costs (gradient copies, "
                        "hooks: the Host costs) in the prediction, for comparison")
    w.add_argument("--profile-compute", action="store_true",
                   help="predict with the profile phase's compute totals; by default they are "
                        "set to the compute-only steps measured alongside the strategies")
    w.add_argument("--no-probes", action="store_true",
                   help="predict with the calibration phase's α, busbw and hook costs instead "
                        "of probes measured in the same rounds as the strategies")
    w.add_argument("--compute-basis", choices=COMPUTE_BASES, default="slowest",
                   help="what the profile's compute is scaled to: the slowest rank's plain "
                        "step per step, as bench times a step (default), or rank 0's")
    o = p.add_argument_group("output")
    o.add_argument("--out", default="out/validate", help="folder for plots and JSON "
                                                         "(default %(default)s)")
    o.add_argument("--force", action="store_true",
                   help="replace an earlier run's files in --out (default: move them into "
                        "--out/earlier-<time>/)")
    o.add_argument("--format", default="table", choices=("table", "json"),
                   help="stdout: the report, or one JSON document (default %(default)s)")


def settings_from_args(args: argparse.Namespace):
    """ValidateSettings from the flags; InputError (one line) on anything bad."""
    world = world_from_args(args)  # ValidateSettings asks for 2 ranks or more
    # the ranks' fork server imports torch (and --module's imports) meanwhile
    world.prestart(args.threads, args.module)
    workload = resolve_workload(args)  # --model or --module, shrink flags, --batch, --seq
    from realrun.workflows.validate import ValidateSettings
    hooks = parse_hooks(args.comm_hook)
    check_backend(hooks, args.backend)  # bf16 needs NCCL: before any rank starts
    check_warmup(hooks, args.warmup)
    text = args.strategies.strip()
    names = BENCH_STRATEGIES if text == "all" else tuple(n.strip() for n in text.split(","))
    for n in names:
        if n not in BENCH_STRATEGIES:
            raise InputError(f"--strategies: unknown strategy {n!r}; choose from "
                             f"{', '.join(BENCH_STRATEGIES)} or all")
    if not args.bucket_mb.strip():
        raise InputError("--bucket-mb: empty grid; give bucket sizes, e.g. 1,10,100")
    buckets = parse_positive_floats(args.bucket_mb, "--bucket-mb")
    world.check_local_gpus()  # before minutes of calibration, not after
    link = None
    if args.link is not None:
        link = load_link_file(args.link)  # InputError on a missing or malformed file
    shrink = {f: getattr(args, f) for f in ("layers", "d_model", "d_ff", "heads", "vocab")
              if getattr(args, f) is not None}
    return ValidateSettings(
        model=args.model or DEFAULT_MODEL, shrink=shrink, module=workload.module,
        batch=args.batch, seq=args.seq, precision=args.precision, world=world,
        optimizer=args.optimizer, threads=args.threads, seed=args.seed,
        strategies=tuple(names), bucket_mbs=tuple(buckets),
        comm_hooks=tuple(h.name for h in hooks), shard_unit_mb=args.shard_unit_mb,
        link=link,
        steps=args.steps, warmup=args.warmup, chunk=args.chunk,
        profile_repeats=args.profile_repeats, host_turns=args.host_turns,
        timeline_steps=args.timeline_steps,
        calibrate_iters=args.calibrate_iters, model_copies=not args.free_copies,
        compute_basis=args.compute_basis, piecewise=args.piecewise,
        lone_alpha=args.lone_alpha, anchor_compute=not args.profile_compute,
        probes=not args.no_probes)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    lead = not is_torchrun() or os.environ["RANK"] == "0"
    if lead:
        check_out_dir(args.out, files=("validate.json",), force=args.force)
    from realrun.launch import torchrun_group
    from realrun.workflows.validate import MeasureFailed, validate

    def log(msg: str) -> None:
        if lead:  # under torchrun every rank runs the pipeline; rank 0 speaks
            print(msg, file=sys.stderr)

    try:
        with torchrun_group(settings.backend, settings.threads, settings.timeout_s):
            report = validate(settings, log=log)
    except MeasureFailed as e:
        print(error_line("realrun", e), file=sys.stderr)
        return 1
    except ValueError as e:  # run_world's checks of its arguments
        raise InputError(str(e).splitlines()[0]) from None
    if report is None:
        return 0  # a torchrun rank other than 0: rank 0 prints and writes
    report.write(args.out)
    if args.format == "json":
        print(json.dumps(report.to_json()))
    else:
        print(report.text(args.out))   # its summary says where the files went
    return 1 if report.failures else 0
