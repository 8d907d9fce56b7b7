"""Check a cluster end to end in about a minute and write one bundle to attach to a report.

    python -m realrun selfcheck                              # 2 Gloo ranks here, ~40 s
    python -m realrun selfcheck --backend nccl --world-size 8 --out sc
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint NODE0:29500 \\
        -m realrun selfcheck --backend nccl                  # on every node; rank 0 writes
    python -m realrun selfcheck --backend nccl --world-size 1   # one GPU: no calibrate/validate
    python -m realrun selfcheck --emulate-hosts 2 --link-gbit 1 # root: emulated hosts

Five steps on the same world, each one line on stdout as it ends (ok, failed or skipped, its
seconds and key figures):

1. init      — every rank joins and all-reduces a checked value; hosts, devices, GPU names;
2. calibrate — calibrate's short sweep (``CalibrateSettings.short``): α, busbw, contention;
3. profile   — ``realrun profile`` of a small model on every rank: compute per step;
4. bench     — ``realrun bench``: compute-only and torch ``ddp`` at two --bucket-mb sizes;
5. validate  — simddp's prediction from steps 2 and 3 against step 4 (nothing measured again):
               median |error|, the recommendation and its verdict.

A failed step is recorded and the others still run (validate is skipped without its inputs;
under torchrun a failed step skips the measuring steps after it, whose collectives could no
longer line up). The bundle, --out (default selfcheck-<UTC time>; an earlier bundle there
moves into --out/earlier-<time>/, --force replaces it in place): selfcheck.json (each
step, the environment: python, torch, CUDA, NCCL, GPU names, CPUs, hosts, NCCL_*/GLOO_*/
TORCH_* variables), calibrate/ (link.json, allreduce.json, plots), profile/profile.json,
bench/bench.json, validate/ (validate.json, compare plots). Exit 0 when every step passed,
1 when one failed (the bundle still written), 2 on bad input (one line, nothing written).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from datetime import datetime, timezone

from realrun.commands.common import add_model_args, require_int, resolve_workload
from realrun.launch.env import is_torchrun
from realrun.launch.world import STEP_TIMEOUT_S, add_world_args, world_from_args
from simddp.cli.args import parse_positive_floats
from simddp.errors import InputError
from simddp.report.outdir import check_out_dir

HELP = "check a cluster end to end (init, calibrate, profile, bench, validate); one bundle"
# Small enough for ~40 s on a 2-core CPU box with 2 Gloo ranks, big enough for buckets to
# matter: 8 gradients of 1 MiB, so ddp at 1 and 4 MB makes 8 and 3 all-reduces.
MODEL, BUCKETS = "mlp-8x512", "1,4"
STEPS = ("init", "calibrate", "profile", "bench", "validate")
BUNDLE = "selfcheck.json"   # marks a folder as a bundle (simddp/report/outdir.py's OUT_FILES)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_args(p)
    for action in p._actions:  # the shared model flags; this command's own default model
        if action.dest == "model":
            action.help = f"a preset (default here {MODEL}) — or --module FILE.py:FN"
    g = p.add_argument_group("how much to measure")
    g.add_argument("--bucket-mb", default=BUCKETS,
                   help="two or more bucket caps in MiB for torch ddp (default %(default)s)")
    g.add_argument("--steps", type=int, default=20,
                   help="timed steps per configuration (default %(default)s)")
    g.add_argument("--profile-repeats", type=int, default=8,
                   help="profiled steps; per-layer medians (default %(default)s)")
    g.add_argument("--calibrate-iters", type=int, default=20,
                   help="timed all-reduces per size in the calibration (default %(default)s)")
    add_world_args(p, timeout_s=STEP_TIMEOUT_S)
    o = p.add_argument_group("output")
    o.add_argument("--out", default=None,
                   help="the bundle's folder (default selfcheck-<UTC time>); an earlier "
                        "bundle there moves into --out/earlier-<time>/, as every command's")
    o.add_argument("--force", action="store_true",
                   help="replace an earlier bundle's files in --out (default: move them into "
                        "--out/earlier-<time>/)")


def check_args(args: argparse.Namespace):
    """(workload, world, bucket sizes, out folder); InputError (one line) on anything bad.
    Nothing is started before this returns; last, an earlier bundle in --out is moved into
    --out/earlier-<time>/ by the rule every command follows (simddp/report/outdir.py), and a
    folder holding another command's results is refused."""
    for flag in ("steps", "profile_repeats", "calibrate_iters"):
        require_int("--" + flag.replace("_", "-"), getattr(args, flag))
    if args.module is None and args.model is None:
        args.model = MODEL
    buckets = sorted(set(parse_positive_floats(args.bucket_mb, "--bucket-mb")))
    if len(buckets) < 2:
        raise InputError(f"--bucket-mb {args.bucket_mb}: give two or more sizes (e.g. 1,4): "
                         "the verdict compares them")
    world = world_from_args(args)
    # the ranks' fork server imports torch (and --module's imports) meanwhile
    world.prestart(args.threads, args.module)
    workload = resolve_workload(args)
    world.check_local_gpus()
    if world.emulate_hosts is not None:  # no root or no iproute2: bad input, not a failed step
        from realrun.launch.netns import check_available
        check_available()  # NetnsUnavailable: one line, exit 2 (realrun/cli.py)
    out = args.out or datetime.now(timezone.utc).strftime("selfcheck-%Y%m%dT%H%M%SZ")
    if not is_torchrun() or os.environ["RANK"] == "0":   # the rank that writes the bundle
        check_out_dir(out, files=(BUNDLE,), force=args.force)
    return workload, world, tuple(buckets), out


def run(args: argparse.Namespace) -> int:
    workload, world, buckets, out = check_args(args)
    from realrun.workflows.selfcheck_steps import Check, run_steps
    lead = not is_torchrun() or os.environ["RANK"] == "0"
    check = Check(args, workload, world, buckets, out, lead)
    start = time.perf_counter()
    try:
        steps = run_steps(check, report=lambda step: lead and print(step_line(step), flush=True))
        failed = any(s.status == "failed" for s in steps)
        if lead:  # the bundle first: leaving torchrun's group can wait out a dead peer
            bundle = write_bundle(check, steps, time.perf_counter() - start)
            print(summary_line(steps, bundle["seconds"], out), flush=True)
        return 1 if failed else 0
    finally:
        check.close()


def write_bundle(check, steps, seconds: float) -> dict:
    """selfcheck.json, atomically, after every step (a failed one too)."""
    from realrun.workflows.selfcheck import environment
    from simddp.inputs.io import write_atomic
    bundle = {"format": "realrun.selfcheck/1",
              "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "ok": not any(s.status == "failed" for s in steps),
              "failed": [s.name for s in steps if s.status == "failed"],
              "seconds": round(seconds, 1), "load_before_after": check.load(),
              "settings": check.settings_json(),
              "steps": [s.to_json() for s in steps],
              "environment": environment(check.world.backend, check.world.world_size,
                                         check.ranks)}
    os.makedirs(check.out, exist_ok=True)
    write_atomic(os.path.join(check.out, BUNDLE), json.dumps(bundle, indent=1) + "\n")
    return bundle


def step_line(step) -> str:
    """``selfcheck: bench      ok       6.1 s  compute-only 5.2 ms, ddp-1MB 17.9 ms, ...``"""
    what = step.error or step.figures.get("summary", "")
    return f"selfcheck: {step.name:<10}{step.status:<8}{step.seconds:6.1f} s  {what}"


def summary_line(steps, seconds: float, out: str) -> str:
    counts = {k: sum(s.status == k for s in steps) for k in ("ok", "failed", "skipped")}
    failed = [s.name for s in steps if s.status == "failed"]
    verdict = "PASSED" if not failed else "FAILED (" + ", ".join(failed) + ")"
    return (f"selfcheck: {verdict}: {counts['ok']} ok, {counts['failed']} failed, "
            f"{counts['skipped']} skipped in {seconds:.0f} s; bundle {out}/selfcheck.json")
