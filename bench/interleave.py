"""Does a configuration run slower right after another one, as realrun bench interleaves them?

    python bench/interleave.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32 --target ddp --bucket-mb 16
    python bench/interleave.py --target compute-only          # the default model

One world of 2 Gloo ranks holding the target and every other configuration of
``--strategies`` x ``--bucket-mb`` (as realrun bench builds them; 3 warm-up steps each).
Then, twice over the others: 10 steps of the target alone ("alone"), 5 steps of the next
other configuration, and 10 steps of the target again ("after another"); every step after a
barrier, the step the max over ranks. Pairs of blocks next to each other in time, so the
box's drift hits both alike: printed, the median over pairs of (after another − alone),
how many pairs were slower after, and the medians of each kind (the first step after
another apart). Numbers from this 2-vCPU VM: docs/results/2026-11-26-flat-host.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from realrun.commands.common import add_model_args, resolve_workload  # noqa: E402
from realrun.configs import bench_configs, config_of, label  # noqa: E402
from realrun.launch import run_world  # noqa: E402
from realrun.steps import Trainer  # noqa: E402
from realrun.timing import timed  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.commands.common import parse_positive_floats  # noqa: E402
from simddp.errors import InputError  # noqa: E402

BLOCK, OTHER = 10, 5   # steps of the target per block, of the other configuration between


def rank(payload: dict, ctx) -> dict:
    """{"alone": [...], "after": [...], "first": [...]}: step seconds, blocks in order."""
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    target = Trainer(payload["target"], workload, ctx, payload)
    others = [Trainer(c, workload, ctx, payload) for c in payload["others"]]
    for trainer in [target, *others]:
        for _ in range(3):
            trainer.step()

    def block(trainer: Trainer, n: int) -> list[float]:
        out = []
        for _ in range(n):
            ctx.barrier()
            out.append(timed(ctx, trainer.step))
        return out
    res: dict[str, list[float]] = {"alone": [], "after": [], "first": []}
    for i in range(2 * len(others)):
        alone = block(target, BLOCK)
        block(others[i % len(others)], OTHER)
        after = block(target, BLOCK)
        res["alone"] += alone[1:]
        res["after"] += after[1:]
        res["first"].append(after[0])
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(ap)
    ap.add_argument("--target", default="ddp", help="compute-only or a strategy (default ddp)")
    ap.add_argument("--strategies", default="naive,flat,overlap,bucketed,ddp")
    ap.add_argument("--bucket-mb", default="0.25,1,4,16",
                    help="the sizes; the target takes the last one")
    args = ap.parse_args()
    try:
        workload = resolve_workload(args)
        mbs = parse_positive_floats(args.bucket_mb, "--bucket-mb")
        configs = bench_configs(args.strategies.split(","), mbs)
        if args.target == "compute-only":
            target = config_of(None)
        else:
            found = [c for c in configs if c.get("strategy") == args.target
                     and c.get("bucket_mb") in (mbs[-1], None)]
            if not found:
                raise InputError(f"--target {args.target!r} is not among --strategies "
                                 f"{args.strategies!r}")
            target = found[0]
        others = [c for c in configs if c.get("spec") is not None and c is not target]
        if not others:
            raise InputError("no other configuration to interleave with")
    except InputError as e:   # bad flags: one line, exit 2
        print(f"interleave: {e}", file=sys.stderr)
        return 2
    payload = {"workload": workload.to_json(), "target": target, "others": others,
               "seed": args.seed, "optimizer": args.optimizer, "precision": args.precision}
    load = os.getloadavg()[0]
    ranks = run_world("bench.interleave:rank", payload, threads_per_rank=args.threads,
                      timeout_s=900)
    per_step = {k: [max(x) for x in zip(*(r[k] for r in ranks))]
                for k in ("alone", "after", "first")}
    n = BLOCK - 1   # each block's steps but its first
    pairs = [statistics.median(per_step["after"][i:i + n])
             - statistics.median(per_step["alone"][i:i + n])
             for i in range(0, len(per_step["alone"]), n)]
    print(f"# {workload.name}, target {label(target)}, {len(others)} others; load {load:.2f} "
          f"-> {os.getloadavg()[0]:.2f}; step = max over ranks, ms")
    print(f"after another - alone, median over {len(pairs)} pairs: "
          f"{statistics.median(pairs) * 1e3:+.1f} ms ({sum(p > 0 for p in pairs)} slower after)")
    for key, name in (("alone", "alone"), ("after", "after another"),
                      ("first", "first step after another")):
        ms = statistics.median(per_step[key]) * 1e3
        print(f"{name:26} n {len(per_step[key]):3d}  median {ms:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
