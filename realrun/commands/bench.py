"""Measure step time per gradient-sync strategy on real ranks, side by side in one run.

    python -m realrun bench                                      # mlp-8x1024, 2 ranks, ~1 min
    python -m realrun bench --model transformer-small --layers 2 --d-model 256 --d-ff 1024 \\
        --heads 4 --vocab 2048 --batch 4 --seq 32 --strategies bucketed,ddp --bucket-mb 25
    python -m realrun bench --emulate-hosts 2 --link-gbit 1      # each rank its own 1 Gbit/s host
    python -m realrun bench --format json                        # {"rows": [...]} only, on stdout
    python -m realrun bench --trace traces/ --scaling            # Chrome traces; vs one process
    python -m realrun bench --strategies ddp,fsdp,zero2 --bucket-mb 10   # torch FSDP2 too
    python -m realrun bench --strategies fsdp,zero2 --precision bf16  # FSDP2 bf16/fp32 policy
    python -m realrun bench --strategies ddp --bucket-mb 10 --comm-hook fp16,powersgd:2
    python -m realrun bench --strategies bucketed,hierarchical --bucket-mb 1,4,16 \
        --emulate-hosts 2 --world-size 4 --link-gbit 2     # 2 hosts x 2 ranks (root)
    torchrun --nproc-per-node 2 -m realrun bench                 # ranks started by torchrun

Configurations: ``compute-only`` (no communication: the compute baseline) always runs first;
naive, flat, overlap, fsdp and zero2 run once; bucketed and ddp once per --bucket-mb, and
once more per --comm-hook ("ddp+fp16"). ``ddp`` is torch's DistributedDataParallel(model,
bucket_cap_mb_list=[1, X]); a hooked strategy is torch DDP with register_comm_hook
(realrun/comm_hooks.py); fsdp and zero2 are torch FSDP2 fully_shard (realrun/sharded.py); the
others are realrun.ddp.DDP (hierarchical: its buckets all-reduced in two levels, G ranks
a node from --gpus-per-node or the launcher's local world size). bf16 on Gloo is refused
(one line, exit 2): torch's hook needs NCCL. --precision bf16 is autocast, and for fsdp and
zero2 also FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), on Gloo as on
NCCL (realrun/precision.py). Every
configuration trains the same model (same seed) on the same batch; the timed steps run
round-robin in chunks of --chunk steps so drift on a shared box hits all alike, and each turn
builds its configuration's model afresh and runs --warmup untimed steps first, so a rank
holds one model, as a training job does (--hold all: every model built once and kept). A
step's time is the max over ranks; median, p5 and p95 are over steps.

Writes OUT/bench.json (simddp results, source "measured") and OUT/bench.csv, only if every
rank succeeded. Bad arguments: one line, exit 2. A rank failure: one line naming it, exit 1.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys

from realrun.commands.common import add_model_args, require_int, resolve_workload
from realrun.comm_hooks import check_backend, check_warmup
from realrun.configs import (BENCH_STRATEGIES, DEFAULT_STRATEGIES, GPUS_PER_NODE_ENV,
                             bench_configs, runs_torch_ddp, two_level)
from realrun.launch.allocator import held_models_note
from realrun.launch.env import is_torchrun
from realrun.launch.world import STEP_TIMEOUT_S, WorldConfig, add_world_args, world_from_args
from realrun.twin import FACTORY as TWIN_FACTORY
from realrun.twin import TWIN, gap_text, instance_gap
from simddp.cli.args import (add_beyond_ddp_args, parse_hooks, parse_names,
                                    parse_positive_floats)
from simddp.rig.cpu_share import starved_note
from simddp.errors import InputError
from simddp.planning.registry import help_lines
from simddp.inputs.io import save_json, write_atomic
from simddp.result import results_to_json
from simddp.report.outdir import check_out_dir

HELP = "measure step time per strategy and bucket size on real ranks (gloo or nccl)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    g = p.add_argument_group("what to compare")
    g.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                   help=f"comma list of {', '.join(BENCH_STRATEGIES)} (each below), or "
                        "all (default %(default)s)")
    p.epilog = help_lines(BENCH_STRATEGIES)
    g.add_argument("--bucket-mb", default="1,10,100",
                   help="bucket caps in MiB for bucketed, ddp and hierarchical "
                        "(default %(default)s)")
    g.add_argument("--gpus-per-node", type=int, default=None,
                   help="ranks per node for hierarchical (node = rank // G; default: the "
                        "launcher's local world size: every rank on loopback, one host's "
                        "ranks with --emulate-hosts, torchrun's LOCAL_WORLD_SIZE)")
    g.add_argument("--steps", type=int, default=30, help="timed steps per config (default %(default)s)")
    g.add_argument("--warmup", type=int, default=5,
                   help="untimed steps per config first; >= 1, and >= 2 with ddp: torch DDP "
                        "rebuilds its buckets in the forward of its second step "
                        "(default %(default)s)")
    g.add_argument("--chunk", type=int, default=5,
                   help="timed steps per config per round-robin turn (default %(default)s)")
    g.add_argument("--hold", default="one", choices=("one", "all"),
                   help="models a rank holds: one (each turn builds its configuration's model "
                        "and runs --warmup untimed steps, as a one-model job) or all (built "
                        "once and kept: faster, but on 4 KiB pages held models slow the "
                        "stepped one) (default %(default)s)")
    g.add_argument("--scaling", action="store_true",
                   help="also time compute-only in ONE process and report samples/s and "
                        "efficiency = (N-rank samples/s) / (N x single samples/s)")
    add_beyond_ddp_args(p)
    add_world_args(p, timeout_s=STEP_TIMEOUT_S)  # a step's collectives: a minute is plenty
    o = p.add_argument_group("output")
    o.add_argument("--out", default="out/bench", help="folder for bench.json and bench.csv "
                                                      "(default %(default)s)")
    o.add_argument("--force", action="store_true",
                   help="replace an earlier run's bench.json/bench.csv in --out (default: "
                        "move them into --out/earlier-<time>/)")
    o.add_argument("--format", default="table", choices=("table", "json"),
                   help='stdout: a table, or only {"rows": [...]} as JSON (default %(default)s)')
    o.add_argument("--trace", metavar="DIR", default=None,
                   help="after timing, run --trace-steps more steps per config under "
                        "torch.profiler; write DIR/<config>.rank<r>.json (Chrome/Perfetto)")
    o.add_argument("--trace-steps", type=int, default=3, help="steps per trace (default %(default)s)")
    o.add_argument("--timelines", action="store_true",
                   help="after timing, clock 5 more steps per config on rank 0 and keep the "
                        "median one's spans in bench.json: simddp compare then reports each "
                        "config's compute, exposed communication and overlap %% beside the "
                        "prediction's")


TIMELINE_STEPS = 5  # clocked steps per config with --timelines; the median one is kept


def check_args(args: argparse.Namespace, configs: list[dict], hooks=()) -> None:
    """Sets ``args.world`` (a WorldConfig) and ``args.world_size``; InputError otherwise."""
    for flag in ("steps", "warmup", "chunk", "trace_steps"):
        require_int("--" + flag.replace("_", "-"), getattr(args, flag))
    args.world = world_from_args(
        args, min_ranks=2,
        why="one rank has nothing to synchronise; --scaling times one process alone")
    args.world_size = args.world.world_size
    if runs_torch_ddp(configs) and args.warmup < 2:
        raise InputError(f"--warmup {args.warmup}: torch ddp rebuilds its buckets in the "
                         "forward of its second step; use --warmup >= 2")
    _check_gpus_per_node(args, configs)
    check_backend(hooks, args.backend)   # bf16 needs NCCL
    check_warmup(hooks, args.warmup)     # PowerSGD's timed steps all compressed
    if is_torchrun() and args.scaling:  # --emulate-hosts: the world refuses it there
        raise InputError("--scaling starts its own one-process run; run it without torchrun")


def _check_gpus_per_node(args: argparse.Namespace, configs: list[dict]) -> None:
    g = args.gpus_per_node
    if g is None:
        return
    if not two_level(configs):
        raise InputError(f"--gpus-per-node {g}: only hierarchical uses it; add it to "
                         "--strategies")
    require_int("--gpus-per-node", g)
    if args.world_size % g:
        raise InputError(f"--gpus-per-node {g}: must divide --world-size {args.world_size} "
                         "(node = rank // G)")


def run(args: argparse.Namespace) -> int:
    strategies = parse_names(args.strategies, BENCH_STRATEGIES, "--strategies")
    buckets_mb = parse_positive_floats(args.bucket_mb, "--bucket-mb")
    hooks = parse_hooks(args.comm_hook)
    configs = bench_configs(strategies, buckets_mb, hooks, args.shard_unit_mb, args.precision)
    check_args(args, configs, hooks)
    # the ranks' fork server imports torch (and --module's imports) meanwhile
    args.world.prestart(args.threads, args.module)
    workload = resolve_workload(args)  # imports torch, after the cheap checks
    if not is_torchrun() or os.environ["RANK"] == "0":  # last: it moves an earlier run aside
        check_out_dir(args.out, files=("bench.json", "bench.csv"), force=args.force)
    import realrun.bench as bench

    if args.gpus_per_node is not None:  # spawned ranks inherit it; torchrun ranks set it here
        os.environ[GPUS_PER_NODE_ENV] = str(args.gpus_per_node)

    payload = {"workload": workload.to_json(), "configs": configs, "precision": args.precision,
               "steps": args.steps, "warmup": args.warmup,
               "chunk": args.chunk, "hold": args.hold, "seed": args.seed,
               "optimizer": args.optimizer, "trace_dir": None, "trace_steps": args.trace_steps,
               "timeline_steps": TIMELINE_STEPS if args.timelines else 0,
               "progress": sys.stderr.isatty(),
               "extras": [TWIN], "extras_factory": TWIN_FACTORY}   # realrun/twin.py
    try:
        out = bench.run_bench(payload, world=args.world, threads=args.threads,
                              trace_dir=args.trace)
        if out is None:
            return 0  # a torchrun rank other than 0: rank 0 reports
        single = None
        if args.scaling:  # one process alone, on loopback, with the same backend and timeout
            solo = {**payload, "configs": payload["configs"][:1], "extras": []}
            alone = WorldConfig(world_size=1, backend=args.backend, timeout_s=args.timeout_s)
            single = bench.run_bench(solo, world=alone, threads=args.threads).stats[0]
    except ValueError as e:  # run_world's checks of its arguments
        raise InputError(str(e)) from None
    results, stats = out.results, out.stats
    args.gap = instance_gap(stats[0], out.extras[TWIN])   # stats[0]: compute-only
    # samples per rank-step: the preset's batch; a --module's micro-batch counts as 1
    per_step = 1 if workload.module else args.batch
    scaling = _scaling(stats, single, args.world_size, per_step) if single else None
    args.what = ("one --module micro-batch per rank" if workload.module
                 else f"batch {args.batch} x seq {args.seq} per rank")
    args.host = out.host      # rank 0's CPUs and the ranks sharing them (cpu_share.py)
    _write_files(args, results, stats, scaling)
    if args.format == "json":
        rows = [{"strategy": s["strategy"], "bucket_mb": s["bucket_mb"],
                 "median_ms": s["median_s"] * 1e3, "p95_ms": s["p95_s"] * 1e3,
                 "steps": s["n"]} for s in stats]
        print(json.dumps({"rows": rows, "instance_gap": args.gap}))
    else:
        print(format_table(args, results, stats, scaling))
    return 0


def _scaling(stats: list[dict], single: dict, world_size: int, batch: int) -> list[dict]:
    """samples/s per config, and efficiency against N copies of one process alone."""
    single_sps = batch / single["median_s"]
    return [{"strategy": s["strategy"], "bucket_mb": s["bucket_mb"], "ranks": world_size,
             "samples_per_s": world_size * batch / s["median_s"],
             "efficiency": (world_size * batch / s["median_s"]) / (world_size * single_sps)}
            for s in stats] + [{"strategy": "single-process", "bucket_mb": None, "ranks": 1,
                                "samples_per_s": single_sps, "efficiency": 1.0}]


def _write_files(args, results, stats, scaling) -> None:
    meta = {"model": results[0].model, "module": args.module,
            "batch": None if args.module else args.batch,
            "seq": None if args.module else args.seq, "precision": args.precision,
            "optimizer": args.optimizer, "world_size": args.world_size, "backend": args.backend,
            "threads": args.threads, "link": results[0].link, "steps": args.steps,
            "warmup": args.warmup, "chunk": args.chunk, "hold": args.hold, "seed": args.seed,
            "comm_hooks": [h.name for h in parse_hooks(args.comm_hook)],
            "shard_unit_mb": args.shard_unit_mb, **getattr(args, "host", {})}
    data = results_to_json(results, bench=meta,
                           steps_s={s["label"]: s["steps_s"] for s in stats},
                           scaling=scaling, instance_gap=args.gap)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["model", "link", "world_size", "strategy", "bucket_mb", "collectives",
                     "median_ms", "p5_ms", "p95_ms", "steps", "exposed_comm_ms", "compute_ms"])
    for r in results:
        writer.writerow([r.model, r.link, r.world_size, r.strategy,
                         "" if r.bucket_mb is None else f"{r.bucket_mb:g}", r.collectives,
                         f"{r.step_s * 1e3:.3f}", f"{r.step_p5_s * 1e3:.3f}",
                         f"{r.step_p95_s * 1e3:.3f}", r.samples,
                         f"{r.exposed_comm_s * 1e3:.3f}", f"{r.compute_s * 1e3:.3f}"])
    save_json(os.path.join(args.out, "bench.json"), data)
    write_atomic(os.path.join(args.out, "bench.csv"), text.getvalue())


WARMUP_PER = {"one": "model built (one held at a time)", "all": "config (all held)"}


def format_table(args, results, stats, scaling) -> str:
    """nccl-tests style: '#' header lines, then one aligned row per configuration."""
    r0 = results[0]
    # the reference: torch's own DDP, no hook (its Strategy says so, not its name)
    ddp_ms = {r.bucket_mb: r.step_s for r in results if r.spec is not None
              and r.spec.implementation == "torch" and r.spec.comm_hook is None}
    lines = [f"# realrun bench: {r0.model}, {args.what}, {args.optimizer}, "
             f"{args.precision}; {r0.world_size} ranks, {args.backend}, {r0.link}, "
             f"{args.threads} thread(s)/rank",
             f"# {args.steps} timed steps per config, round-robin in chunks of {args.chunk}, "
             f"{args.warmup} warm-up steps per {WARMUP_PER[args.hold]}; step = max over ranks; "
             "exposed = median - compute-only",
             f"# {'strategy':<20}{'bucket_MB':>10}{'colls':>7}{'median_ms':>11}{'p5_ms':>9}"
             f"{'p95_ms':>9}{'exposed_ms':>12}{'vs_ddp':>8}"]
    for r in results:
        ratio = "-"
        # every bucketed row (hooked ones too) against plain torch DDP at its bucket size
        if r.spec is not None and r.spec.granularity == "bucket" and r.bucket_mb in ddp_ms:
            ratio = f"{r.step_s / ddp_ms[r.bucket_mb]:.3f}"
        mb = "-" if r.bucket_mb is None else f"{r.bucket_mb:g}"
        lines.append(f"  {r.strategy:<20}{mb:>10}{r.collectives:>7}{r.step_s * 1e3:>11.2f}"
                     f"{r.step_p5_s * 1e3:>9.2f}{r.step_p95_s * 1e3:>9.2f}"
                     f"{r.exposed_comm_s * 1e3:>12.2f}{ratio:>8}")
    if getattr(args, "gap", None):
        lines.append(f"# {gap_text(args.gap)}")
    host = getattr(args, "host", {})
    if "cpus" in host:   # realrun bench's own, as simddp compare reads it back
        note = starved_note(args.backend, host["ranks_on_host"], args.threads, host["cpus"])
        if note:
            lines.append(f"# note: {note}")
    held = held_models_note(args.backend, host.get("models_held"), host.get("allocator"))
    if held:
        lines.append(f"# note: {held}")
    lines.append(f"# wrote {os.path.join(args.out, 'bench.json')} and bench.csv"
                 + (f"; traces in {args.trace}" if args.trace else "")
                 + ("; each config's clocked spans in bench.json (simddp compare reads them)"
                    if args.timelines else ""))
    if scaling:
        lines += ["#", f"# scaling vs one process alone (compute-only, 1 rank, {args.threads} "
                  f"thread(s)): efficiency = N-rank samples/s / (N x single samples/s)",
                  f"# {'strategy':<15}{'bucket_MB':>10}{'ranks':>7}{'samples_per_s':>15}"
                  f"{'efficiency':>12}"]
        for row in scaling:
            mb = "-" if row["bucket_mb"] is None else f"{row['bucket_mb']:g}"
            lines.append(f"  {row['strategy']:<15}{mb:>10}{row['ranks']:>7}"
                         f"{row['samples_per_s']:>15.1f}{row['efficiency']:>12.3f}")
    return "\n".join(lines)
